/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-trace - reads a WQE trace written under KINET_TRACE=FILE (format:
 * src/core/trace_fmt.h) and prints it, or converts it to the Chrome trace
 * event JSON format (a timeline: chrome://tracing, ui.perfetto.dev).
 *
 *   kinet-trace FILE                 one line per record, in time order
 *   kinet-trace --summary FILE       per QP: WQEs, CQEs, errors, bytes, span
 *   kinet-trace --json OUT FILE      the timeline: one track per QP, each
 *                                    WQE a slice from the moment the NIC
 *                                    took it to its CQE (unsignaled WQEs
 *                                    receive CQEs and LOST records are
 *                                    instants)
 *
 * Records of the GPU engine show engine "gpu"; LOST lines (the GPU engine's
 * trace ring was full) say how many of a QP's records are missing.
 *
 * Exit status: 0, 1 (unreadable or not a kinet trace), 2 (usage).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/trace_fmt.h"

static const char *op_name(const struct kinet_trace_rec *r)
{
	if (r->type == KINET_TR_LOST)
		return "lost";
	if (r->type == KINET_TR_WQE) {
		switch (r->opcode) {
		case 0x00: return "nop";
		case 0x08: return "write";
		case 0x09: return "write_imm";
		case 0x0a: return "send";
		case 0x0b: return "send_imm";
		case 0x10: return "read";
		case 0x11: return "cas";
		case 0x12: return "fadd";
		default: return "op?";
		}
	}
	switch (r->opcode) {
	case 0x0: return "cqe";
	case 0x1: return "recv_write_imm";
	case 0x2: return "recv_send";
	case 0x3: return "recv_send_imm";
	case 0xd: return "cqe_error";
	case 0xe: return "recv_error";
	default: return "cqe?";
	}
}

static const char *type_name(int t)
{
	return t == KINET_TR_WQE    ? "WQE"
	       : t == KINET_TR_CQE  ? "CQE"
	       : t == KINET_TR_RCQE ? "RCQE"
	       : t == KINET_TR_LOST ? "LOST"
				    : "?";
}

static const char *db_name(int d)
{
	switch (d) {
	case KINET_TR_DB_WQE: return "wqe-word";
	case KINET_TR_DB_PI: return "pi-word";
	case KINET_TR_DB_DBR: return "record";
	case KINET_TR_DB_BF: return "blueflame";
	default: return "-";
	}
}

/* The engine column: a CPU engine's index, gpu, or - (not an engine). */
static const char *eng_name(uint8_t e, char buf[8])
{
	if (e == KINET_TR_ENGINE_NONE)
		return "-";
	if (e == KINET_TR_ENGINE_GPU)
		return "gpu";
	snprintf(buf, 8, "%u", e);
	return buf;
}

static int by_time(const void *a, const void *b)
{
	const struct kinet_trace_rec *x = a, *y = b;
	return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

static void usage(void)
{
	fprintf(stderr, "usage: kinet-trace [--summary | --json OUT] FILE\n");
	exit(2);
}

/* Reads the trace: records sorted by time. */
static struct kinet_trace_rec *load(const char *path, struct kinet_trace_hdr *h, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "kinet-trace: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	if (fread(h, sizeof(*h), 1, f) != 1 || memcmp(h->magic, KINET_TRACE_MAGIC, 8)) {
		fprintf(stderr, "kinet-trace: %s: not a kinet trace\n", path);
		exit(1);
	}
	if (h->version != KINET_TRACE_VERSION || h->rec_size != sizeof(struct kinet_trace_rec) ||
	    h->hdr_size != sizeof(*h)) {
		fprintf(stderr,
			"kinet-trace: %s: trace version %u (records of %u bytes); this kinet-trace "
			"reads version %d\n",
			path, h->version, h->rec_size, KINET_TRACE_VERSION);
		exit(1);
	}
	size_t cap = 1 << 16, k = 0;
	struct kinet_trace_rec *r = malloc(cap * sizeof(*r));
	while (r) {
		if (k == cap) {
			cap *= 2;
			struct kinet_trace_rec *t = realloc(r, cap * sizeof(*r));
			if (!t)
				break;
			r = t;
		}
		size_t got = fread(r + k, sizeof(*r), cap - k, f);
		k += got;
		if (got == 0)
			break;
	}
	fclose(f);
	if (!r) {
		fprintf(stderr, "kinet-trace: out of memory\n");
		exit(1);
	}
	qsort(r, k, sizeof(*r), by_time);
	*n = k;
	return r;
}

/* ---- WQE -> CQE matching ---------------------------------------------------------- */

struct slot {
	uint64_t key; /* ctx << 40 | qpn << 16 | idx, +1 (0: empty) */
	size_t rec;
};

static uint64_t key_of(const struct kinet_trace_rec *r)
{
	return (((uint64_t)r->ctx << 40) | ((uint64_t)r->qpn << 16) | r->wqe_idx) + 1;
}

/* For each record: the index of its CQE (WQE) or SIZE_MAX. */
static size_t *match(const struct kinet_trace_rec *r, size_t n)
{
	size_t cap = 1;
	while (cap < 2 * n + 2)
		cap <<= 1;
	struct slot *t = calloc(cap, sizeof(*t));
	size_t *m = malloc((n ? n : 1) * sizeof(*m));
	if (!t || !m) {
		fprintf(stderr, "kinet-trace: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		m[i] = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		if (r[i].type != KINET_TR_WQE && r[i].type != KINET_TR_CQE)
			continue;
		uint64_t k = key_of(&r[i]);
		size_t h = (size_t)(k * 0x9e3779b97f4a7c15ull) & (cap - 1);
		while (t[h].key && t[h].key != k)
			h = (h + 1) & (cap - 1);
		if (r[i].type == KINET_TR_WQE) {
			t[h].key = k; /* a later WQE of the same index replaces an unsignaled one */
			t[h].rec = i;
		} else if (t[h].key == k) {
			m[t[h].rec] = i;
			/* remove, keeping the probe chains whole */
			t[h].key = 0;
			size_t j = (h + 1) & (cap - 1);
			while (t[j].key) {
				struct slot s = t[j];
				t[j].key = 0;
				size_t h2 = (size_t)(s.key * 0x9e3779b97f4a7c15ull) & (cap - 1);
				while (t[h2].key)
					h2 = (h2 + 1) & (cap - 1);
				t[h2] = s;
				j = (j + 1) & (cap - 1);
			}
		}
	}
	free(t);
	return m;
}

/* ---- outputs ---------------------------------------------------------------------------- */

static void print_text(const struct kinet_trace_rec *r, size_t n)
{
	printf("%14s %3s %8s %4s %-14s %10s %10s %10s %6s %4s %-7s %-9s %3s %8s\n", "t[us]", "ctx",
	       "qp", "type", "op", "len", "lkey", "rkey", "idx", "synd", "reason", "doorbell", "eng",
	       "pass");
	char eb[8];
	for (size_t i = 0; i < n; i++)
		printf("%14.3f %3u %8x %4s %-14s %10u %#10x %#10x %6u %#4x %-7u %-9s %3s %8u\n",
		       (double)r[i].t_ns / 1000.0, r[i].ctx, r[i].qpn, type_name(r[i].type),
		       op_name(&r[i]), r[i].len, r[i].lkey, r[i].rkey, r[i].wqe_idx, r[i].syndrome,
		       r[i].reason, r[i].type == KINET_TR_WQE ? db_name(r[i].db_form) : "-",
		       eng_name(r[i].engine, eb), r[i].pass);
}

static void print_summary(const struct kinet_trace_rec *r, size_t n)
{
	printf("%3s %8s %10s %10s %10s %8s %14s %14s %10s\n", "ctx", "qp", "wqes", "cqes", "rcqes",
	       "errors", "bytes", "span[us]", "lost");
	/* QPs in order of first appearance */
	struct q {
		uint32_t ctx, qpn;
		uint64_t w, c, rc, e, bytes, t0, t1, lost;
	} *qs = NULL;
	size_t nq = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		while (k < nq && (qs[k].ctx != r[i].ctx || qs[k].qpn != r[i].qpn))
			k++;
		if (k == nq) {
			qs = realloc(qs, (nq + 1) * sizeof(*qs));
			memset(&qs[nq], 0, sizeof(*qs));
			qs[nq].ctx = r[i].ctx;
			qs[nq].qpn = r[i].qpn;
			qs[nq].t0 = r[i].t_ns;
			nq++;
		}
		struct q *x = &qs[k];
		x->t1 = r[i].t_ns;
		if (r[i].type == KINET_TR_WQE) {
			x->w++;
			x->bytes += r[i].len;
		} else if (r[i].type == KINET_TR_CQE) {
			x->c++;
		} else if (r[i].type == KINET_TR_LOST) {
			x->lost += r[i].len;
		} else {
			x->rc++;
		}
		x->e += r[i].syndrome != 0 && r[i].syndrome != 0x05;
	}
	for (size_t k = 0; k < nq; k++)
		printf("%3u %8x %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %14" PRIu64
		       " %14.3f %10" PRIu64 "\n",
		       qs[k].ctx, qs[k].qpn, qs[k].w, qs[k].c, qs[k].rc, qs[k].e, qs[k].bytes,
		       (double)(qs[k].t1 - qs[k].t0) / 1000.0, qs[k].lost);
	free(qs);
}

static void json_args(FILE *o, const struct kinet_trace_rec *w, const struct kinet_trace_rec *c)
{
	fprintf(o, "\"args\":{\"len\":%u,\"wqe_idx\":%u,\"lkey\":\"%#x\",\"rkey\":\"%#x\"", w->len,
		w->wqe_idx, w->lkey, w->rkey);
	if (w->type == KINET_TR_WQE && w->engine == KINET_TR_ENGINE_GPU)
		fprintf(o, ",\"doorbell\":\"%s\",\"engine\":\"gpu\",\"pass\":%u",
			db_name(w->db_form), w->pass);
	else if (w->type == KINET_TR_WQE)
		fprintf(o, ",\"doorbell\":\"%s\",\"engine\":%d,\"pass\":%u", db_name(w->db_form),
			w->engine == KINET_TR_ENGINE_NONE ? -1 : w->engine, w->pass);
	if (c && c->syndrome)
		fprintf(o, ",\"syndrome\":\"%#x\",\"reason\":%u", c->syndrome, c->reason);
	fprintf(o, "}");
}

static int write_json(const char *out, const struct kinet_trace_hdr *h,
		      const struct kinet_trace_rec *r, size_t n)
{
	FILE *o = fopen(out, "w");
	if (!o) {
		fprintf(stderr, "kinet-trace: %s: %s\n", out, strerror(errno));
		return 1;
	}
	size_t *m = match(r, n);
	char *ended = calloc(n ? n : 1, 1); /* CQEs that end a WQE's slice */
	for (size_t i = 0; i < n && ended; i++)
		if (m[i] != SIZE_MAX)
			ended[m[i]] = 1;
	fprintf(o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"pid\":%u,\"start_real_ns\":%" PRIu64
		   ",\"format\":\"kinet trace v%u\"},\n\"traceEvents\":[\n",
		h->pid, h->start_real_ns, h->version);
	int first = 1;
	/* names: a process per context, a thread (track) per QP */
	for (size_t i = 0; i < n; i++) {
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = r[j].ctx == r[i].ctx && r[j].qpn == r[i].qpn;
		if (seen)
			continue;
		int ctx_seen = 0;
		for (size_t j = 0; j < i && !ctx_seen; j++)
			ctx_seen = r[j].ctx == r[i].ctx;
		if (!ctx_seen)
			fprintf(o, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,"
				   "\"args\":{\"name\":\"kinet ctx %u\"}}",
				first ? "" : ",\n", r[i].ctx, r[i].ctx), first = 0;
		fprintf(o, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,"
			   "\"args\":{\"name\":\"qp 0x%x\"}}",
			first ? "" : ",\n", r[i].ctx, r[i].qpn, r[i].qpn);
		first = 0;
	}
	for (size_t i = 0; i < n; i++) {
		const struct kinet_trace_rec *x = &r[i];
		double ts = (double)x->t_ns / 1000.0;
		if (x->type == KINET_TR_WQE && m[i] != SIZE_MAX) {
			const struct kinet_trace_rec *c = &r[m[i]];
			fprintf(o, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,"
				   "\"ts\":%.3f,\"dur\":%.3f,",
				first ? "" : ",\n", c->syndrome ? "error" : "wqe", op_name(x), x->ctx,
				x->qpn, ts, (double)(c->t_ns - x->t_ns) / 1000.0);
			json_args(o, x, c);
			fprintf(o, "}");
		} else if (x->type == KINET_TR_WQE || x->type == KINET_TR_RCQE ||
			   x->type == KINET_TR_LOST ||
			   (x->type == KINET_TR_CQE && x->syndrome && !(ended && ended[i]))) {
			/* unsignaled WQEs, receive CQEs, error CQEs without their WQE */
			fprintf(o, "%s{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"%s\",\"name\":\"%s\","
				   "\"pid\":%u,\"tid\":%u,\"ts\":%.3f,",
				first ? "" : ",\n",
				x->type == KINET_TR_LOST ? "lost"
				: x->syndrome		 ? "error"
							 : "event",
				op_name(x), x->ctx,
				x->qpn, ts);
			json_args(o, x, x->type == KINET_TR_WQE ? NULL : x);
			fprintf(o, "}");
		} else {
			continue;
		}
		first = 0;
	}
	fprintf(o, "\n]}\n");
	free(m);
	free(ended);
	return fclose(o) ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	int summary = 0, i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else if (!strcmp(argv[i], "--summary"))
			summary = 1;
		else
			usage();
	}
	if (i != argc - 1 || (json && summary))
		usage();
	struct kinet_trace_hdr h;
	size_t n;
	struct kinet_trace_rec *r = load(argv[i], &h, &n);
	int rc = 0;
	if (json)
		rc = write_json(json, &h, r, n);
	else if (summary)
		print_summary(r, n);
	else
		print_text(r, n);
	free(r);
	return rc;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report.c - statistics over the samples of a run and the output of
 * kinet-perf: perftest's columns, or one JSON object per line (--json).
 *
 * Bandwidth (all threads merged into one stream of posts and completions):
 *   BW average = bytes of all messages / (last completion - first post)
 *   BW peak    = the best rate over any stretch of W consecutive messages,
 *                from the post of the first to the completion of the last,
 *                W = max(q * threads, messages / 16); never below average
 *   MsgRate    = messages / (last completion - first post)
 *   MB = 2^20 bytes (as perftest), Mpps = 10^6 messages per second.
 * Latency: one sample per iteration (write_lat: half the round trip, as
 * perftest's ping-pong); t_typical is the median.
 * A duration run (-D) keeps counts instead of samples, as perftest: BW
 * average and MsgRate over the messages of the whole time (no peak), and
 * for latency t_avg with the transactions per second.
 * --report_gbits prints bandwidth in Gb/s (10^9 bits); JSON records carry
 * both units, and the metadata of the run (json_common).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"

#define MB (1024.0 * 1024.0)
#define RULE "---------------------------------------------------------------------------------------"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sorts a[0..n), made of runs of `run` ascending values (one per thread),
 * by merging runs pairwise: O(n log threads). tmp holds n values. */
static uint64_t *merge_runs(uint64_t *a, uint64_t *tmp, size_t n, size_t run)
{
	for (; run < n; run *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * run) {
			size_t mid = lo + run < n ? lo + run : n;
			size_t hi = lo + 2 * run < n ? lo + 2 * run : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				tmp[k++] = a[j] < a[i] ? a[j++] : a[i++];
			while (i < mid)
				tmp[k++] = a[i++];
			while (j < hi)
				tmp[k++] = a[j++];
		}
		uint64_t *t = a;
		a = tmp;
		tmp = t;
	}
	return a;
}

/* A duration run: the timed phase of all threads, first start to last end. */
static double duration_span(const struct perf_env *e)
{
	const struct perf_opts *o = e->o;
	uint64_t b = UINT64_MAX, en = 0;
	for (int i = 0; i < o->threads; i++) {
		if (e->jobs[i].t_begin < b)
			b = e->jobs[i].t_begin;
		if (e->jobs[i].t_end > en)
			en = e->jobs[i].t_end;
	}
	double span = en > b ? (double)(en - b) * 1e-9 : 0;
	return span > 0 ? span : 1e-9;
}

int perf_bw_stats(const struct perf_env *e, uint64_t size, struct perf_bw *out)
{
	const struct perf_opts *o = e->o;
	memset(out, 0, sizeof(*out));
	if (o->duration_s) { /* counts only: no samples, no peak (as perftest) */
		for (int i = 0; i < o->threads; i++)
			out->msgs += e->jobs[i].done;
		double rate = (double)out->msgs / duration_span(e);
		out->avg_mbs = rate * (double)size / MB;
		out->mpps = rate / 1e6;
		return 0;
	}
	size_t n = (size_t)o->threads * (size_t)o->iters;
	uint64_t *bp = malloc(2 * n * sizeof(uint64_t)), *bc = malloc(2 * n * sizeof(uint64_t));
	if (!bp || !bc) {
		free(bp);
		free(bc);
		return -ENOMEM;
	}
	/* each thread's post and completion times are ascending already */
	for (int i = 0; i < o->threads; i++) {
		memcpy(bp + (size_t)i * o->iters, e->jobs[i].tpost, o->iters * sizeof(uint64_t));
		memcpy(bc + (size_t)i * o->iters, e->jobs[i].tcomp, o->iters * sizeof(uint64_t));
	}
	const uint64_t *tp = merge_runs(bp, bp + n, n, o->iters);
	const uint64_t *tc = merge_runs(bc, bc + n, n, o->iters);
	double span = (double)(tc[n - 1] - tp[0]) * 1e-9;
	if (span <= 0)
		span = 1e-9;
	double rate = (double)n / span; /* messages per second */
	out->msgs = n;
	out->has_peak = true;
	out->avg_mbs = rate * (double)size / MB;
	out->mpps = rate / 1e6;
	size_t w = (size_t)o->qdepth * (size_t)o->threads;
	if (w < n / 16)
		w = n / 16;
	if (w > n)
		w = n;
	if (w == 0)
		w = 1;
	double best = rate; /* the whole run is a stretch too */
	for (size_t i = 0; i + w <= n; i++) {
		if (tc[i + w - 1] <= tp[i])
			continue;
		double r = (double)w / ((double)(tc[i + w - 1] - tp[i]) * 1e-9);
		if (r > best)
			best = r;
	}
	out->peak_mbs = best * (double)size / MB;
	free(bp);
	free(bc);
	return 0;
}

int perf_lat_stats(const struct perf_env *e, struct perf_lat *out)
{
	const struct perf_opts *o = e->o;
	double div = (o->test->flags & PERF_F_PINGPONG) ? 2000.0 : 1000.0; /* ns -> us */
	memset(out, 0, sizeof(*out));
	if (o->duration_s) { /* the average and the rate only (as perftest) */
		double sum = 0;
		out->duration = true;
		for (int i = 0; i < o->threads; i++) {
			out->n += e->jobs[i].done;
			sum += (double)e->jobs[i].lat_sum;
		}
		out->avg_us = out->n ? sum / (double)out->n / div : 0;
		out->tps = (double)out->n / duration_span(e);
		return 0;
	}
	size_t n = (size_t)o->threads * (size_t)o->iters;
	uint64_t *s = malloc(n * sizeof(uint64_t));
	if (!s)
		return -ENOMEM;
	for (int i = 0; i < o->threads; i++)
		memcpy(s + (size_t)i * o->iters, e->jobs[i].tcomp, o->iters * sizeof(uint64_t));
	qsort(s, n, sizeof(uint64_t), cmp_u64);
	double sum = 0, sq = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)s[i] / div;
	double avg = sum / (double)n;
	for (size_t i = 0; i < n; i++) {
		double d = (double)s[i] / div - avg;
		sq += d * d;
	}
	size_t i99 = (size_t)ceil(0.99 * (double)n), i999 = (size_t)ceil(0.999 * (double)n);
	out->n = n;
	out->min_us = (double)s[0] / div;
	out->max_us = (double)s[n - 1] / div;
	out->typical_us = (double)s[n / 2] / div;
	out->avg_us = avg;
	out->stdev_us = sqrt(sq / (double)n);
	out->p99_us = (double)s[(i99 ? i99 : 1) - 1] / div;
	out->p999_us = (double)s[(i999 ? i999 : 1) - 1] / div;
	out->tps = avg > 0 ? 1e6 / (avg * div / 1000.0) * o->threads : 0;
	free(s);
	return 0;
}

static bool no_nic(const struct perf_env *e)
{
	return (e->o->test->flags & PERF_F_NO_NIC) != 0;
}

static int engine_threads(const struct perf_env *e)
{
	return e->o->engine_threads > 0 ? e->o->engine_threads
					: (int)kinet_tunable_int("KINET_ENGINE_THREADS");
}

static const char *backend_name(const struct perf_env *e)
{
	return no_nic(e) || e->backend < 0 ? "none" : kinet_backend_name(e->backend);
}

static const char *db_mode_name(const struct perf_env *e)
{
	return no_nic(e) ? "none" : kinet_db_mode_str(perf_env_db_mode(e));
}

/* How the threads share QPs (the Executor line). */
static void qp_desc(const struct perf_opts *o, char *b, size_t l)
{
	int group = o->qp_group > 0 ? o->qp_group : 1;
	int nqp = (o->threads + group - 1) / group;
	const char *share = o->qp_share == KN_SHARE_CTA ? "CTA-shared" : "GPU-shared";
	if (nqp == 1 && group > 1)
		snprintf(b, l, "one QP shared by all threads (%s)", share);
	else if (group > 1)
		snprintf(b, l, "%d QPs, each shared by %d threads (%s)", nqp, group, share);
	else if (o->ctas > 0 && o->scope == PERF_SCOPE_WARP)
		snprintf(b, l, "one QP per warp (%d QP%s)", o->threads / 32, o->threads > 32 ? "s" : "");
	else if (o->ctas > 0 && o->scope == PERF_SCOPE_BLOCK)
		snprintf(b, l, "one QP per CTA (%d QP%s)", o->ctas, o->ctas > 1 ? "s" : "");
	else
		snprintf(b, l, "one QP per thread (%d QP%s)", nqp, nqp > 1 ? "s" : "");
}

static const char *const scope_name[] = {"thread", "warp", "block"};

static const char *mem_name(int kind)
{
	return kind == KINET_MEM_CUDA ? "gpu" : "host";
}

/* The backend's reason without its leading "name: ". */
static const char *reason_text(const struct perf_env *e)
{
	const char *r = e->backend_reason ? e->backend_reason : "";
	const char *n = backend_name(e);
	size_t l = strlen(n);
	if (!strncmp(r, n, l) && r[l] == ':' && r[l + 1] == ' ')
		r += l + 2;
	return r;
}

void perf_report_header(const struct perf_env *e, FILE *f)
{
	const struct perf_opts *o = e->o;
	const struct perf_test *pt = o->test;
	char qd[128];
	if (o->json)
		return;
	fprintf(f, "%s\n", RULE);
	fprintf(f, "                    %s\n", pt->title);
	if (no_nic(e)) {
		fprintf(f, " Backend         : none (plain memcpy, the baseline of the bandwidth tests)\n");
		fprintf(f, " Threads         : %d\n", o->threads);
	} else {
		if (e->backend == KINET_BACKEND_SOFT)
			fprintf(f, " Backend         : soft (software NIC, %d engine thread%s)\n",
				engine_threads(e), engine_threads(e) == 1 ? "" : "s");
		else
			fprintf(f, " Backend         : %s\n", backend_name(e));
		fprintf(f, " Backend choice  : %s\n", reason_text(e));
		if (e->procs_line)
			fprintf(f, " Processes       : %s\n", e->procs_line);
		if (e->procs_line && e->provider[0])
			fprintf(f, " Transport       : %s\n", e->provider);
		qp_desc(o, qd, sizeof(qd));
		fprintf(f, " Executor        : %s, %d thread%s, %s\n", o->executor, o->threads,
			o->threads == 1 ? "" : "s", qd);
		if (o->ctas > 0)
			fprintf(f, " GPU launch      : %d CTA%s x %d thread%s, %s scope, payloads in %s\n",
				o->ctas, o->ctas == 1 ? "" : "s", o->cta_threads,
				o->cta_threads == 1 ? "" : "s", scope_name[o->scope % 3],
				o->mem == PERF_MEM_GPU ? "GPU memory" : "pinned host memory");
		if (e->mem_line[0])
			fprintf(f, " Payload memory  : %s\n", e->mem_line);
		fprintf(f, " Doorbell mode   : %s\n", db_mode_name(e));
		struct kinet_ep_info ei;
		if (e->backend == KINET_BACKEND_SOFT && e->qa && e->qa[0] &&
		    kinet_qp_ep_info(e->qa[0], &ei) == 0)
			/* decided at connect (KINET_GPU_ENGINE): who executes the WQEs */
			fprintf(f, " NIC engine      : %s (%s)\n",
				ei.engine == KINET_ENGINE_GPU        ? "GPU"
				: ei.engine == KINET_ENGINE_GPU_HOST ? "GPU engine's code on a CPU thread"
								     : "CPU",
				ei.engine_why);
		fprintf(f, " Waiting threads : %s\n",
			o->yield ? "yield the CPU between polls" : "spin (pause between polls)");
		if (pt->kind == PERF_BW)
			fprintf(f, " Outstanding     : %u WQEs per thread\n", o->qdepth);
		if (o->inline_size)
			fprintf(f, " Inline          : messages of up to %u bytes carried in the WQE\n",
				o->inline_size);
		if (o->mtu)
			fprintf(f, " MTU             : -m %d asked for, not applied: QPs connect with the "
				   "smaller active MTU of the two ports\n",
				o->mtu);
	}
	if (o->duration_s)
		fprintf(f, " Duration        : %u s per size after %" PRIu64 " warm-up iterations "
			   "(counts only: no samples, no BW peak)\n",
			o->duration_s, o->warmup);
	else
		fprintf(f, " Iterations      : %" PRIu64 " timed (+%" PRIu64 " warm-up) per size\n",
			o->iters, o->warmup);
	fprintf(f, " Data check      : random contents, checked after each size\n");
	fprintf(f, "%s\n", RULE);
	if (pt->kind == PERF_BW && o->report_gbits)
		fprintf(f, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
			   "MsgRate[Mpps]\n");
	else if (pt->kind == PERF_BW)
		fprintf(f, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   "
			   "MsgRate[Mpps]\n");
	else if (o->duration_s)
		fprintf(f, " #bytes        #iterations       t_avg[usec]    tps average\n");
	else
		fprintf(f, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
			   "t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% "
			   "percentile[usec]\n");
}

/* A JSON string (quotes and escapes). */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* The fields every record carries: what ran, where, when and how, so that
 * runs can be compared later. */
static void json_common(const struct perf_env *e, uint64_t size, FILE *f)
{
	const struct perf_opts *o = e->o;
	char qd[128];
	qp_desc(o, qd, sizeof(qd));
	int group = o->qp_group > 0 ? o->qp_group : 1;
	fprintf(f, "{\"test\":\"%s\",\"kinet_version\":\"%d.%d\",\"backend\":\"%s\",", o->test->name,
		KINET_VERSION_MAJOR, KINET_VERSION_MINOR, backend_name(e));
	fprintf(f, "\"backend_reason\":");
	json_str(f, no_nic(e) ? "" : reason_text(e));
	fprintf(f, ",\"provider\":");
	if (e->procs_line && e->provider[0])
		json_str(f, e->provider);
	else
		fprintf(f, "null");
	fprintf(f, ",\"host\":");
	json_str(f, o->host);
	if (e->procs_line) {
		fprintf(f, ",\"peer_host\":");
		json_str(f, e->peer_host);
	}
	fprintf(f, ",\"date\":\"%s\",\"executor\":\"%s\",\"mem_initiator\":\"%s\","
		   "\"mem_target\":\"%s\",\"cmdline\":",
		o->date, o->executor, mem_name(e->mem_initiator), mem_name(e->mem_target));
	json_str(f, o->cmdline);
	fprintf(f,
		",\"threads\":%d,\"qps\":%d,\"shared\":%s,\"qdepth\":%u,\"inline\":%u,"
		"\"db_mode\":\"%s\",\"engine_threads\":%d,\"poll\":\"%s\",\"processes\":%d,"
		"\"bytes\":%" PRIu64 ",\"iterations\":%" PRIu64 ",\"duration_s\":%u,"
		"\"verified\":true",
		o->threads, no_nic(e) ? 0 : (o->threads + group - 1) / group,
		group > 1 ? "true" : "false", o->test->kind == PERF_BW ? o->qdepth : 1u,
		o->inline_size, db_mode_name(e),
		no_nic(e) || e->backend != KINET_BACKEND_SOFT ? 0 : engine_threads(e),
		o->yield ? "yield" : "spin", e->procs_line ? 2 : 1, size,
		o->duration_s ? (uint64_t)0 : o->iters, o->duration_s);
}

/* The cuda executor's launch, in the JSON objects. */
static void json_gpu(const struct perf_env *e, FILE *f)
{
	const struct perf_opts *o = e->o;
	if (o->ctas <= 0)
		return;
	fprintf(f,
		",\"scope\":\"%s\",\"ctas\":%d,\"cta_threads\":%d,\"mem\":\"%s\","
		"\"qp_share\":\"%s\"",
		scope_name[o->scope % 3], o->ctas, o->cta_threads,
		o->mem == PERF_MEM_GPU ? "gpu" : "host",
		o->qp_share == KN_SHARE_GPU ? "gpu" : o->qp_share == KN_SHARE_CTA ? "cta" : "exclusive");
}

/* MB/s (2^20 bytes) to Gb/s (10^9 bits). */
static double gbits(double mbs)
{
	return mbs * MB * 8.0 / 1e9;
}

static void json_bw(const struct perf_env *e, uint64_t size, const struct perf_bw *r, FILE *f)
{
	json_common(e, size, f);
	json_gpu(e, f);
	if (r->has_peak)
		fprintf(f, ",\"bw_peak_mbs\":%.2f,\"bw_peak_gbps\":%.4f", r->peak_mbs,
			gbits(r->peak_mbs));
	else
		fprintf(f, ",\"bw_peak_mbs\":null,\"bw_peak_gbps\":null");
	fprintf(f,
		",\"bw_avg_mbs\":%.2f,\"bw_avg_gbps\":%.4f,\"msg_rate_mpps\":%.6f,"
		"\"messages\":%" PRIu64 "}\n",
		r->avg_mbs, gbits(r->avg_mbs), r->mpps, r->msgs);
}

static void json_lat(const struct perf_env *e, uint64_t size, const struct perf_lat *r, FILE *f)
{
	json_common(e, size, f);
	json_gpu(e, f);
	if (r->duration)
		fprintf(f, ",\"t_avg_us\":%.3f", r->avg_us);
	else
		fprintf(f,
			",\"t_min_us\":%.3f,\"t_max_us\":%.3f,\"t_typical_us\":%.3f,"
			"\"t_avg_us\":%.3f,\"t_stdev_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f",
			r->min_us, r->max_us, r->typical_us, r->avg_us, r->stdev_us, r->p99_us,
			r->p999_us);
	fprintf(f, ",\"tps\":%.2f,\"messages\":%" PRIu64 "}\n", r->tps, r->n);
}

void perf_row_bw(const struct perf_env *e, uint64_t size, const struct perf_bw *r, bool json,
		 FILE *f)
{
	const struct perf_opts *o = e->o;
	if (json) {
		json_bw(e, size, r, f);
		return;
	}
	double pk = r->has_peak ? r->peak_mbs : 0, av = r->avg_mbs;
	if (o->report_gbits)
		pk = gbits(pk), av = gbits(av);
	fprintf(f, " %-10" PRIu64 " %-14" PRIu64 " %-18.2f %-20.2f %.6f\n", size,
		o->duration_s ? r->msgs : o->iters, pk, av, r->mpps);
}

void perf_row_lat(const struct perf_env *e, uint64_t size, const struct perf_lat *r, bool json,
		  FILE *f)
{
	const struct perf_opts *o = e->o;
	if (json)
		json_lat(e, size, r, f);
	else if (r->duration)
		fprintf(f, " %-13" PRIu64 " %-17" PRIu64 " %-14.2f %.2f\n", size, r->n, r->avg_us,
			r->tps);
	else
		fprintf(f, " %-7" PRIu64 " %-10" PRIu64 " %-14.2f %-12.2f %-16.2f %-14.2f %-15.2f "
			   "%-22.2f %.2f\n",
			size, o->iters, r->min_us, r->max_us, r->typical_us, r->avg_us, r->stdev_us,
			r->p99_us, r->p999_us);
}

void perf_report_bw(const struct perf_env *e, uint64_t size, const struct perf_bw *r, FILE *f)
{
	if (e->o->json_out) {
		perf_row_bw(e, size, r, true, e->o->json_out);
		fflush(e->o->json_out);
	}
	perf_row_bw(e, size, r, e->o->json, f);
	fflush(f);
}

void perf_report_lat(const struct perf_env *e, uint64_t size, const struct perf_lat *r, FILE *f)
{
	if (e->o->json_out) {
		perf_row_lat(e, size, r, true, e->o->json_out);
		fflush(e->o->json_out);
	}
	perf_row_lat(e, size, r, e->o->json, f);
	fflush(f);
}

void perf_report_footer(const struct perf_env *e, FILE *f)
{
	if (!e->o->json)
		fprintf(f, "%s\n", RULE);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The WQE trace (KINET_TRACE=FILE): every WQE the engine takes and every
 * CQE it writes is a record (time, QP, opcode, length, keys, syndrome and
 * reason, doorbell form, engine pass) in a versioned binary file, written
 * out at kinet_close; kinet-trace prints it, sums it up per QP and turns it
 * into a Chrome/Perfetto timeline (one slice per WQE, from the NIC taking
 * it to its CQE).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "core/trace_fmt.h"
#include "../util/testutil.h"

#ifndef KINET_TRACE_BIN
#define KINET_TRACE_BIN "kinet-trace"
#endif
#define N 50

static char path[64], json[80];

static void run_traffic(uint32_t *qpn_a, uint32_t *qpn_b, uint32_t *rkey)
{
	snprintf(path, sizeof(path), "/tmp/kinet-trace-test-%d.ktr", (int)getpid());
	setenv("KINET_TRACE", path, 1); /* read at the first tunable */
	struct tu_pair p;
	struct kinet_qp_attr at = {.sq_depth = 64, .rq_depth = 4};
	cr_assert_eq(tu_pair_open(&p, &at), 0);
	struct tu_region src, dst;
	cr_assert_eq(tu_region_alloc(&src, p.pd, 65536, KINET_ACCESS_LOCAL_WRITE, 1), 0);
	cr_assert_eq(tu_region_alloc(&dst, p.pd, 65536, KINET_ACCESS_ALL, 2), 0);
	kn_ticket_t t = 0;
	for (int i = 0; i < N; i++)
		cr_assert_eq(kn_put(p.da, tu_addr(dst.buf + i * 1000), kinet_mr_rkey(dst.mr),
				    src.buf + i * 1000, tu_lkey(&src), 1000 + (uint32_t)i, &t),
			     0);
	cr_assert_eq(kn_wait(p.da, t), 0);
	/* one that fails: an unknown key */
	cr_assert_eq(kn_put(p.da, tu_addr(dst.buf), kinet_mr_rkey(dst.mr) ^ 0x100, src.buf,
			    tu_lkey(&src), 8, &t),
		     0);
	cr_assert_eq(kn_wait(p.da, t), -EIO);
	*qpn_a = kinet_qp_num(p.a);
	*qpn_b = kinet_qp_num(p.b);
	*rkey = kinet_mr_rkey(dst.mr);
	tu_region_free(&src);
	tu_region_free(&dst);
	tu_pair_close(&p); /* writes the trace out */
}

static char *run(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t cap = 1 << 20, n = 0;
	char *out = malloc(cap);
	size_t k;
	while ((k = fread(out + n, 1, cap - n - 1, f)) > 0)
		n += k;
	out[n] = 0;
	cr_assert_eq(WEXITSTATUS(pclose(f)), 0, "%s: %s", cmd, out);
	return out;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

Test(trace, every_wqe_and_cqe_recorded_and_converted)
{
	uint32_t qa, qb, rkey;
	run_traffic(&qa, &qb, &rkey);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "no trace file %s", path);
	struct kinet_trace_hdr h;
	cr_assert_eq(fread(&h, sizeof(h), 1, f), 1);
	cr_assert_eq(memcmp(h.magic, KINET_TRACE_MAGIC, 8), 0);
	cr_assert_eq(h.version, KINET_TRACE_VERSION);
	cr_assert_eq(h.rec_size, sizeof(struct kinet_trace_rec));
	cr_assert_eq(h.pid, (uint32_t)getpid());
	struct kinet_trace_rec r;
	int wqes = 0, cqes = 0, errs = 0, ok_len = 0;
	uint64_t bytes = 0;
	while (fread(&r, sizeof(r), 1, f) == 1) {
		cr_assert_eq(r.qpn, qa, "a record of QP 0x%x", r.qpn);
		if (r.type == KINET_TR_WQE) {
			wqes++;
			bytes += r.len;
			cr_assert_eq(r.opcode, KN_OPCODE_RDMA_WRITE);
			cr_assert(r.rkey == rkey || r.rkey == (rkey ^ 0x100));
			cr_assert_neq(r.lkey, 0);
			/* the device API writes the record, then the register word naming
			 * its last WQE: the engine may see either first */
			cr_assert(r.db_form == KINET_TR_DB_WQE || r.db_form == KINET_TR_DB_DBR,
				  "doorbell form %u", r.db_form);
			cr_assert_neq(r.engine, 0xff);
			cr_assert_gt(r.pass, 0);
		} else if (r.type == KINET_TR_CQE) {
			cqes++;
			if (r.syndrome) {
				errs++;
				cr_assert_eq(r.syndrome, KN_SYND_REMOTE_ACCESS_ERR);
				cr_assert_eq(r.reason, KINET_REASON_UNKNOWN_KEY);
			} else {
				ok_len += r.len >= 1000;
			}
		}
	}
	fclose(f);
	cr_assert_eq(wqes, N + 1);
	cr_assert_eq(cqes, N + 1);
	cr_assert_eq(errs, 1);
	cr_assert_eq(ok_len, N);
	cr_assert_eq(bytes, (uint64_t)N * 1000 + (uint64_t)N * (N - 1) / 2 + 8);
	/* kinet-trace: text, summary, timeline */
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s %s", KINET_TRACE_BIN, path);
	char *txt = run(cmd);
	cr_assert_eq(count(txt, " WQE "), N + 1);
	cr_assert_eq(count(txt, " CQE "), N + 1);
	free(txt);
	snprintf(cmd, sizeof(cmd), "%s --summary %s", KINET_TRACE_BIN, path);
	char *sum = run(cmd);
	char line[128];
	snprintf(line, sizeof(line), "%8x %10d %10d", qa, N + 1, N + 1);
	cr_assert(strstr(sum, line), "%s", sum);
	free(sum);
	snprintf(json, sizeof(json), "%s.json", path);
	snprintf(cmd, sizeof(cmd), "%s --json %s %s", KINET_TRACE_BIN, json, path);
	free(run(cmd));
	f = fopen(json, "r");
	cr_assert_not_null(f);
	char *js = calloc(1, 1 << 20);
	size_t n = fread(js, 1, (1 << 20) - 1, f);
	fclose(f);
	cr_assert_gt(n, 0);
	cr_assert(strstr(js, "\"traceEvents\":["));
	cr_assert_eq(count(js, "\"ph\":\"X\""), N + 1); /* one slice per WQE, its CQE ends it */
	cr_assert_eq(count(js, "\"cat\":\"error\""), 1);
	snprintf(line, sizeof(line), "\"name\":\"qp 0x%x\"", qa);
	cr_assert(strstr(js, line));
	free(js);
	unlink(json);
	unlink(path);
	(void)qb;
}

Test(trace, unwritable_file_refuses_open)
{
	setenv("KINET_TRACE", "/nonexistent-dir/x.ktr", 1);
	kinet_ctx *ctx = NULL;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_lt(kinet_open(&ca, &ctx), 0);
	cr_assert_null(ctx);
}

/* kinet_open in a child with KINET_TRACE=target; the child exits 0 when the
 * open returned -EINVAL and no context. The parent waits at most 5 s, then
 * kills it: 1 when it returned in time with -EINVAL, 0 when it did not. */
static int open_refused_in_time(const char *target)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		alarm(20); /* never outlive the parent's bound by much */
		setenv("KINET_TRACE", target, 1);
		kinet_ctx *ctx = NULL;
		struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
		int rc = kinet_open(&ca, &ctx);
		_exit(rc == -EINVAL && !ctx ? 0 : 1);
	}
	int st = 0;
	for (int i = 0; i < 500; i++) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			return WIFEXITED(st) && WEXITSTATUS(st) == 0;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return 0;
}

/* A FIFO with no reader blocked kinet_open for ever in open(2); the trace
 * must be a regular file: a FIFO (read or not) or a device is refused at
 * once, and nothing is written to it. */
Test(trace, fifo_or_device_refused_without_blocking)
{
	char dir[] = "/tmp/kinet-trace-fifo-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char fifo[64];
	snprintf(fifo, sizeof(fifo), "%s/t.ktr", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_expect(open_refused_in_time(fifo), "a FIFO without a reader");
	/* with a reader: refused too (a stalled reader would stall the engine) */
	int rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	cr_assert_geq(rfd, 0);
	cr_expect(open_refused_in_time(fifo), "a FIFO with a reader");
	char b;
	cr_expect_leq(read(rfd, &b, 1), 0, "nothing written into the FIFO");
	close(rfd);
	cr_expect(open_refused_in_time("/dev/null"), "a character device");
	unlink(fifo);
	rmdir(dir);
}

Test(trace, not_a_trace_refused_by_the_tool)
{
	char bad[64];
	snprintf(bad, sizeof(bad), "/tmp/kinet-not-a-trace-%d", (int)getpid());
	FILE *f = fopen(bad, "w");
	fputs("hello", f);
	fclose(f);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null", KINET_TRACE_BIN, bad);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 1);
	snprintf(cmd, sizeof(cmd), "%s 2>/dev/null", KINET_TRACE_BIN);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
	unlink(bad);
}

/* ---- the GPU engine (KINET_GPU_ENGINE=host: its code on a CPU thread) ---------------- */

#define GT_BATCHES 40
#define GT_BATCH 32
#define GT_STRIDE 4096u
#define GT_RLEN (512u * GT_STRIDE)
#define GT_MAX 4096 /* posts at most: their WQE indexes stay distinct */

struct gt_post {
	uint8_t op;
	uint32_t len;
	int main; /* posted once the GPU engine had the QP, before the fault rule */
	int cpu;  /* left to the CPU engine (a read, once the fault rule is in) */
};

struct gt_run {
	struct gt_post post[GT_MAX];
	int n;
	uint32_t qpn, lkey, rkey;
	uint64_t gpu_wqes;
	uint64_t t_close; /* CLOCK_MONOTONIC after kinet_close */
};

static uint64_t gt_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void gt_fill(uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = (uint8_t)rand();
}

/* Posts WQE k (a write, or a read when rd): fresh random bytes on its source
 * side, kept in want, for the check once it completed. */
static void gt_post1(struct tu_rawpair *p, struct tu_region *src, struct tu_region *dst,
		     struct gt_run *g, int rd, uint8_t *want)
{
	int k = g->n;
	cr_assert_lt(k, GT_MAX);
	uint32_t len = 1 + (uint32_t)rand() % (GT_STRIDE - 1);
	uint64_t off = (uint64_t)(p->pi % 512) * GT_STRIDE;
	uint8_t *from = rd ? dst->buf + off : src->buf + off;
	gt_fill(from, len);
	memcpy(want + off, from, len);
	uint8_t w[64];
	tu_wqe_write(w, (uint16_t)p->pi, g->qpn, tu_addr(src->buf + off), g->lkey,
		     tu_addr(dst->buf + off), g->rkey, len, 1);
	if (rd)
		kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)p->pi, KN_OPCODE_RDMA_READ, 0,
				g->qpn, KN_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
	cr_assert_eq(tu_post(p, w, 1), (uint64_t)k, "one WQEBB per WQE: ticket k");
	g->post[k].op = rd ? KN_OPCODE_RDMA_READ : KN_OPCODE_RDMA_WRITE;
	g->post[k].len = len;
	g->n++;
}

/* Completes WQEs [k0, g->n): each CQE in order, each payload byte for byte. */
static void gt_complete(struct tu_rawpair *p, struct tu_region *src, struct tu_region *dst,
			struct gt_run *g, int k0, const uint8_t *want)
{
	for (int k = k0; k < g->n; k++) {
		struct kn_cqe64 c;
		cr_assert_eq(tu_poll(p->acq, &c, 10000), 0, "no CQE for WQE %d", k);
		cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ, "WQE %d: op %u syndrome 0x%x", k,
			     tu_cqe_op(&c), tu_cqe_synd(&c));
		cr_assert_eq(tu_cqe_idx(&c), (uint16_t)k);
	}
	for (int k = k0; k < g->n; k++) {
		uint64_t off = (uint64_t)(k % 512) * GT_STRIDE;
		const uint8_t *to = g->post[k].op == KN_OPCODE_RDMA_READ ? src->buf + off
									 : dst->buf + off;
		cr_assert_eq(memcmp(to, want + off, g->post[k].len), 0, "WQE %d (%s): data", k,
			     g->post[k].op == KN_OPCODE_RDMA_READ ? "read" : "write");
	}
}

static int gt_engine(struct tu_rawpair *p, char *why)
{
	struct kinet_ep_info e;
	cr_assert_eq(kinet_qp_ep_info(p->a, &e), 0);
	if (why)
		snprintf(why, 96, "%s", e.engine_why);
	return e.engine;
}

/* With the trace on and the host form of the GPU engine: writes until the GPU
 * engine has the QP, then batches of random writes and reads, all checked.
 * In the second half a fault rule that may match every read (a delay of
 * 0 us) sends each read back to the CPU engine, so the QP moves between the
 * engines WQE by WQE. The QP is then taken back (ERR), its GPU count read,
 * and the context closed, which writes the trace out. */
static void gt_traffic(struct gt_run *g, const char *ring_recs)
{
	snprintf(path, sizeof(path), "/tmp/kinet-trace-gpu-%d.ktr", (int)getpid());
	setenv("KINET_TRACE", path, 1);
	setenv("KINET_GPU_ENGINE", "host", 1);
	setenv("KINET_GPU_ENGINE_IDLE_US", "10000000", 1); /* it keeps the QP while the case runs */
	if (ring_recs)
		setenv("KINET_GPU_ENGINE_TRACE_RECS", ring_recs, 1);
	srand(7);
	memset(g, 0, sizeof(*g));
	struct tu_rawpair p;
	cr_assert_eq(tu_rawpair_open(&p, 256, 0), 0);
	struct tu_region src, dst;
	cr_assert_eq(tu_region_alloc(&src, p.pd, GT_RLEN, KINET_ACCESS_LOCAL_WRITE, 3), 0);
	cr_assert_eq(tu_region_alloc(&dst, p.pd, GT_RLEN, KINET_ACCESS_ALL, 4), 0);
	uint8_t *want = calloc(1, GT_RLEN);
	cr_assert_not_null(want);
	g->qpn = kinet_qp_num(p.a);
	g->lkey = tu_lkey(&src);
	g->rkey = kinet_mr_rkey(dst.mr);
	char why[96] = "";
	/* the GPU engine takes a busy QP between two of its WQEs */
	while (gt_engine(&p, why) != KINET_ENGINE_GPU_HOST) {
		cr_assert_lt(g->n, 2000, "the GPU engine never took the QP: %s", why);
		int k = g->n;
		gt_post1(&p, &src, &dst, g, 0, want);
		gt_complete(&p, &src, &dst, g, k, want);
	}
	for (int b = 0; b < GT_BATCHES; b++) {
		int k0 = g->n;
		if (b == GT_BATCHES / 2)
			cr_assert_eq(kinet_fault_add(p.ctx, "action=delay,op=read,us=0"), 1);
		for (int i = 0; i < GT_BATCH; i++) {
			int rd = rand() % 3 == 0;
			g->post[g->n].main = b < GT_BATCHES / 2;
			g->post[g->n].cpu = rd && b >= GT_BATCHES / 2;
			gt_post1(&p, &src, &dst, g, rd, want);
		}
		gt_complete(&p, &src, &dst, g, k0, want);
	}
	/* taken back: its count is the GPU engine's final one */
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_ERR, NULL), 0);
	struct kinet_ep_info e;
	cr_assert_eq(kinet_qp_ep_info(p.a, &e), 0);
	cr_assert_eq(e.engine, KINET_ENGINE_CPU);
	g->gpu_wqes = e.gpu_wqes;
	cr_assert_geq(g->gpu_wqes, (uint64_t)GT_BATCHES * GT_BATCH / 2);
	free(want);
	tu_region_free(&src);
	tu_region_free(&dst);
	tu_rawpair_close(&p); /* writes the trace out */
	g->t_close = gt_mono();
}

struct gt_seen {
	int nw, nc;                  /* records of each WQE */
	struct kinet_trace_rec w, c; /* the last of each */
};

struct gt_file {
	struct kinet_trace_hdr h;
	struct gt_seen s[GT_MAX];
	uint64_t lost, gpu_w, gpu_c;
};

/* Reads the trace back: each record checked against what was posted. */
static void gt_read(const struct gt_run *g, struct gt_file *f)
{
	memset(f, 0, sizeof(*f));
	FILE *fp = fopen(path, "rb");
	cr_assert_not_null(fp, "no trace file %s", path);
	cr_assert_eq(fread(&f->h, sizeof(f->h), 1, fp), 1);
	cr_assert_eq(memcmp(f->h.magic, KINET_TRACE_MAGIC, 8), 0);
	uint64_t t_max = g->t_close - f->h.start_mono_ns;
	struct kinet_trace_rec r;
	while (fread(&r, sizeof(r), 1, fp) == 1) {
		cr_assert_eq(r.qpn, g->qpn, "a record of QP 0x%x", r.qpn);
		cr_assert(r.t_ns > 0 && r.t_ns <= t_max, "t_ns %llu outside the run (0, %llu]",
			  (unsigned long long)r.t_ns, (unsigned long long)t_max);
		if (r.type == KINET_TR_LOST) {
			cr_assert_eq(r.engine, KINET_TR_ENGINE_GPU);
			cr_assert_gt(r.len, 0);
			f->lost += r.len;
			continue;
		}
		cr_assert(r.type == KINET_TR_WQE || r.type == KINET_TR_CQE, "type %u", r.type);
		cr_assert_lt(r.wqe_idx, g->n, "a record of WQE %u, %d posted", r.wqe_idx, g->n);
		const struct gt_post *q = &g->post[r.wqe_idx];
		struct gt_seen *s = &f->s[r.wqe_idx];
		cr_assert(r.engine == KINET_TR_ENGINE_GPU || r.engine < 64, "engine %u", r.engine);
		if (q->main)
			cr_assert_eq(r.engine, KINET_TR_ENGINE_GPU,
				     "WQE %u, posted while the GPU engine had the QP: engine %u",
				     r.wqe_idx, r.engine);
		if (q->cpu)
			cr_assert_lt(r.engine, 64, "WQE %u, a read for the CPU engine: engine %u",
				     r.wqe_idx, r.engine);
		if (r.type == KINET_TR_WQE) {
			s->nw++;
			s->w = r;
			cr_assert_eq(r.opcode, q->op, "WQE %u: opcode", r.wqe_idx);
			cr_assert_eq(r.len, q->len, "WQE %u: len", r.wqe_idx);
			cr_assert_eq(r.lkey, g->lkey, "WQE %u: lkey", r.wqe_idx);
			cr_assert_eq(r.rkey, g->rkey, "WQE %u: rkey", r.wqe_idx);
			cr_assert(r.db_form >= KINET_TR_DB_WQE && r.db_form <= KINET_TR_DB_DBR,
				  "WQE %u: doorbell form %u", r.wqe_idx, r.db_form);
			if (r.engine == KINET_TR_ENGINE_GPU) {
				f->gpu_w++;
				cr_assert_eq(r.pass, 0);
			} else {
				cr_assert_gt(r.pass, 0);
			}
		} else {
			s->nc++;
			s->c = r;
			cr_assert_eq(r.opcode, KN_CQE_REQ, "CQE %u: opcode", r.wqe_idx);
			cr_assert_eq(r.len, q->len, "CQE %u: byte count", r.wqe_idx);
			cr_assert_eq(r.syndrome, 0);
			f->gpu_c += r.engine == KINET_TR_ENGINE_GPU;
		}
	}
	fclose(fp);
}

/* Times in the QP's order: WQEs taken, CQEs written, each CQE after its WQE. */
static void gt_check_times(const struct gt_run *g, const struct gt_file *f)
{
	uint64_t tw = 0, tc = 0;
	for (int k = 0; k < g->n; k++) {
		const struct gt_seen *s = &f->s[k];
		if (s->nw) {
			cr_assert_geq(s->w.t_ns, tw, "WQE %d taken at %llu, before WQE %d's %llu", k,
				      (unsigned long long)s->w.t_ns, k - 1, (unsigned long long)tw);
			tw = s->w.t_ns;
		}
		if (s->nc) {
			cr_assert_geq(s->c.t_ns, tc,
				      "CQE %d at %llu, before the previous one's %llu", k,
				      (unsigned long long)s->c.t_ns, (unsigned long long)tc);
			tc = s->c.t_ns;
		}
		if (s->nw && s->nc)
			cr_assert_geq(s->c.t_ns, s->w.t_ns, "CQE %d before its WQE", k);
	}
}

/* The trace is on with the GPU engine: it serves the QP (it is not refused)
 * and writes the same records as the CPU engine, one WQE and one CQE record
 * per WQE, with the GPU engine's index and times in order. */
Test(trace, gpu_engine_records_every_wqe_and_cqe)
{
	static struct gt_run g;
	static struct gt_file f;
	gt_traffic(&g, NULL);
	gt_read(&g, &f);
	cr_assert_eq(f.lost, 0, "%llu records lost", (unsigned long long)f.lost);
	for (int k = 0; k < g.n; k++) {
		cr_assert_eq(f.s[k].nw, 1, "WQE %d: %d WQE records", k, f.s[k].nw);
		cr_assert_eq(f.s[k].nc, 1, "WQE %d: %d CQE records", k, f.s[k].nc);
	}
	/* every WQE the GPU engine executed, and only those, is its record */
	cr_assert_eq(f.gpu_w, g.gpu_wqes, "%llu GPU engine WQE records, it executed %llu",
		     (unsigned long long)f.gpu_w, (unsigned long long)g.gpu_wqes);
	cr_assert_eq(f.gpu_c, g.gpu_wqes);
	cr_assert_lt(f.gpu_w, (uint64_t)g.n, "the reads of the second half on the CPU engine");
	gt_check_times(&g, &f);
	/* kinet-trace names the engine */
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s %s", KINET_TRACE_BIN, path);
	char *txt = run(cmd);
	cr_assert_eq(count(txt, " gpu "), (int)(f.gpu_w + f.gpu_c), "%.2000s", txt);
	free(txt);
	unlink(path);
}

/* A ring of two records: the GPU engine never waits for the CPU to read it,
 * it counts what does not fit; the trace says how many records are missing
 * (KINET_TR_LOST), every record it holds is right, and the traffic is not
 * disturbed (every WQE completed, its data checked). */
Test(trace, gpu_engine_full_ring_counts_lost_records)
{
	static struct gt_run g;
	static struct gt_file f;
	gt_traffic(&g, "2");
	gt_read(&g, &f);
	cr_assert_gt(f.lost, 0, "no record lost with a ring of 2");
	cr_assert_eq(f.gpu_w + f.gpu_c + f.lost, 2 * g.gpu_wqes,
		     "%llu WQE and %llu CQE records of the GPU engine and %llu lost: %llu WQEs",
		     (unsigned long long)f.gpu_w, (unsigned long long)f.gpu_c,
		     (unsigned long long)f.lost, (unsigned long long)g.gpu_wqes);
	for (int k = 0; k < g.n; k++) {
		cr_assert_leq(f.s[k].nw, 1, "WQE %d: %d WQE records", k, f.s[k].nw);
		cr_assert_leq(f.s[k].nc, 1, "WQE %d: %d CQE records", k, f.s[k].nc);
		cr_assert(f.s[k].nw || f.s[k].nc || !g.post[k].cpu, "WQE %d: CPU records lost", k);
		/* the CPU engine loses none */
		if (f.s[k].nw && f.s[k].w.engine != KINET_TR_ENGINE_GPU)
			cr_assert_eq(f.s[k].nc, 1, "WQE %d: the CPU engine's CQE record", k);
	}
	gt_check_times(&g, &f);
	/* kinet-trace: LOST lines, and the QP's sum */
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s %s", KINET_TRACE_BIN, path);
	char *txt = run(cmd);
	cr_assert_gt(count(txt, " LOST "), 0);
	free(txt);
	snprintf(cmd, sizeof(cmd), "%s --summary %s", KINET_TRACE_BIN, path);
	char *sum = run(cmd);
	char want[32];
	snprintf(want, sizeof(want), " %10llu\n", (unsigned long long)f.lost);
	cr_assert(strstr(sum, want), "lost %llu expected in: %s", (unsigned long long)f.lost, sum);
	free(sum);
	unlink(path);
}

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

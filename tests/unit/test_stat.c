/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-stat watching a running process from outside: a child publishes its
 * counters (KINET_STATS=1), moves data on a QP pair and waits; kinet-stat
 * reads the segment and shows the context's and the QP's counters, which
 * must be those of the traffic. The segment goes when the process exits;
 * kinet-stat refuses a process that publishes nothing.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../util/testutil.h"

#ifndef KINET_STAT_BIN
#define KINET_STAT_BIN "kinet-stat"
#endif
#define N 300

/* The child: traffic on a pair, then waits for the parent (stdin pipe). */
static int child(int rfd, int wfd)
{
	setenv("KINET_STATS", "1", 1);
	setenv("KINET_STATS_INTERVAL_MS", "20", 1);
	struct tu_pair p;
	if (tu_pair_open(&p, NULL))
		return 1;
	struct tu_region src, dst;
	if (tu_region_alloc(&src, p.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 1) ||
	    tu_region_alloc(&dst, p.pd, 4096, KINET_ACCESS_ALL, 2))
		return 1;
	for (int i = 0; i < N; i++) {
		kn_ticket_t t;
		if (kn_put(p.da, tu_addr(dst.buf), kinet_mr_rkey(dst.mr), src.buf, tu_lkey(&src), 100,
			   &t) ||
		    kn_wait(p.da, t))
			return 1;
	}
	uint32_t qpn = kinet_qp_num(p.a);
	if (write(wfd, &qpn, 4) != 4)
		return 1;
	char c;
	if (read(rfd, &c, 1) != 1)
		return 1;
	tu_region_free(&src);
	tu_region_free(&dst);
	tu_pair_close(&p);
	return 0;
}

/* Value of "name:" in the section that starts with `section` (text of
 * kinet-stat), or -1. */
static long long value(const char *out, const char *section, const char *name)
{
	const char *s = strstr(out, section);
	if (!s)
		return -1;
	const char *end = strstr(s + 1, "\nctx");
	char key[64];
	snprintf(key, sizeof(key), " %s: ", name);
	const char *k = strstr(s, key);
	if (!k || (end && k > end))
		return -1;
	return atoll(k + strlen(key));
}

Test(stat, kinet_stat_shows_a_running_process)
{
	int down[2], up[2];
	cr_assert_eq(pipe(down), 0);
	cr_assert_eq(pipe(up), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(down[1]);
		close(up[0]);
		_exit(child(down[0], up[1]));
	}
	close(down[0]);
	close(up[1]);
	uint32_t qpn = 0;
	cr_assert_eq(read(up[0], &qpn, 4), 4, "the child did not get through its traffic");
	usleep(100000); /* a few refreshes of 20 ms */
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s -a %d 2>&1", KINET_STAT_BIN, (int)pid);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	static char out[1 << 16];
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	int st = pclose(f);
	cr_assert_eq(WEXITSTATUS(st), 0, "kinet-stat: %s", out);
	char sec[64];
	snprintf(sec, sizeof(sec), "ctx0 (soft):");
	cr_assert_eq(value(out, sec, "wqes"), N, "%s", out);
	cr_assert_eq(value(out, sec, "bytes"), N * 100);
	snprintf(sec, sizeof(sec), "qp 0x%x (RTS, ready):", qpn);
	cr_assert_eq(value(out, sec, "posted"), N, "%s", out);
	cr_assert_eq(value(out, sec, "completed"), N);
	cr_assert_eq(value(out, sec, "outstanding"), 0);
	cr_assert_eq(value(out, sec, "cqes"), N);
	cr_assert_eq(value(out, sec, "direct_bytes"), N * 100);
	/* let it go: the segment goes with it */
	cr_assert_eq(write(down[1], "x", 1), 1);
	int ws;
	cr_assert_eq(waitpid(pid, &ws, 0), pid);
	cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	char path[64];
	snprintf(path, sizeof(path), "/dev/shm/kinet-%d", (int)pid);
	cr_assert_neq(access(path, F_OK), 0, "%s is left behind", path);
	/* nothing published: a clear refusal */
	snprintf(cmd, sizeof(cmd), "%s %d 2>&1", KINET_STAT_BIN, (int)pid);
	f = popen(cmd, "r");
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	st = pclose(f);
	cr_assert_eq(WEXITSTATUS(st), 1);
	cr_assert(strstr(out, "KINET_STATS=1"), "%s", out);
	snprintf(cmd, sizeof(cmd), "%s 2>/dev/null", KINET_STAT_BIN);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
}

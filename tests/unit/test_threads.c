/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every thread kinet starts is named by its role ("kn-..."), as ps -L, top -H
 * and /proc/<pid>/task/<tid>/comm show it: the software NIC's engines
 * (kn-engine<i>), an Ethernet port's thread (kn-eth-<interface>), the host
 * executor's threads beyond the caller's (kn-host<i>). The threads a context
 * and a port add are found by comparing the process's tasks before and after.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include <kinet/eth.h>
#include <kinet/device.h>
#include <time.h>
#include "../util/testutil.h"

#define MAXT 256

struct task {
	long tid;
	char comm[32];
};

static int tasks(struct task *t)
{
	DIR *d = opendir("/proc/self/task");
	cr_assert_not_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < MAXT) {
		if (e->d_name[0] == '.')
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; /* ended meanwhile */
		t[n].tid = atol(e->d_name);
		if (!fgets(t[n].comm, sizeof(t[n].comm), f))
			t[n].comm[0] = 0;
		t[n].comm[strcspn(t[n].comm, "\n")] = 0;
		fclose(f);
		n++;
	}
	closedir(d);
	return n;
}

static int known(const struct task *t, int n, long tid)
{
	for (int i = 0; i < n; i++)
		if (t[i].tid == tid)
			return 1;
	return 0;
}

/* The names of the tasks of now that were not there before, one per line. */
static int new_names(const struct task *before, int nb, char *out, size_t cap)
{
	static struct task now[MAXT];
	int n = tasks(now), k = 0;
	out[0] = 0;
	for (int i = 0; i < n; i++)
		if (!known(before, nb, now[i].tid)) {
			size_t l = strlen(out);
			snprintf(out + l, cap - l, "%s\n", now[i].comm);
			k++;
		}
	return k;
}

static int has_line(const char *list, const char *name)
{
	size_t l = strlen(name);
	for (const char *s = list; (s = strstr(s, name)); s++)
		if ((s == list || s[-1] == '\n') && s[l] == '\n')
			return 1;
	return 0;
}

/* every line starts with "kn-" */
static int all_kn(const char *list)
{
	for (const char *s = list; *s; s = strchr(s, '\n') + 1)
		if (strncmp(s, "kn-", 3))
			return 0;
	return 1;
}

static char g_host_name[32];

static int host_fn(int tid, int n, void *arg)
{
	(void)n;
	(void)arg;
	if (tid == 1) {
		char path[96];
		snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", (long)syscall(SYS_gettid));
		FILE *f = fopen(path, "r");
		if (!f || !fgets(g_host_name, sizeof(g_host_name), f))
			return 1;
		fclose(f);
		g_host_name[strcspn(g_host_name, "\n")] = 0;
	}
	return 0;
}

Test(threads, every_kinet_thread_is_named_by_its_role)
{
	static struct task before[MAXT];
	char self[32] = "";
	int nb = tasks(before);
	for (int i = 0; i < nb; i++)
		if (before[i].tid == getpid())
			snprintf(self, sizeof(self), "%s", before[i].comm);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT, .engine_threads = 2};
	kinet_ctx *ctx;
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	kinet_pd *pd;
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	struct kinet_eth_port_attr pa = {.driver = KINET_ETH_DRIVER_LOOPBACK};
	kinet_eth_port *port;
	cr_assert_eq(kinet_eth_port_open(pd, &pa, &port), 0);
	char names[4096];
	int n = new_names(before, nb, names, sizeof(names));
	cr_assert_geq(n, 3, "a context of 2 engines and a port started:\n%s", names);
	cr_assert(has_line(names, "kn-engine0"), "no kn-engine0 among:\n%s", names);
	cr_assert(has_line(names, "kn-engine1"), "no kn-engine1 among:\n%s", names);
	cr_assert(has_line(names, "kn-eth-loopback"), "no kn-eth-loopback among:\n%s", names);
	cr_assert(all_kn(names), "a thread kinet started has no role name (the program's, %s):\n%s",
		  self, names);
	cr_assert_eq(kinet_host_exec(2, host_fn, NULL), 0);
	cr_assert_str_eq(g_host_name, "kn-host1");
	cr_assert_eq(kinet_eth_port_close(port), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}

/* CPU time (clock ticks) a thread of this process has used. */
static long thread_ticks(long tid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", tid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* after the name: state is field 3 */
	cr_assert_not_null(p);
	long ut = 0, st = 0;
	/* fields 3 .. 15: state ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime */
	cr_assert_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st),
		     2);
	return ut + st;
}

Test(threads, engine_without_qps_sleeps)
{
	static struct task before[MAXT], now[MAXT];
	int nb = tasks(before);
	kinet_ctx *ctx;
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = KINET_BACKEND_SOFT;
	ca.engine_threads = 1;
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	long tid = 0;
	int n = tasks(now);
	for (int i = 0; i < n; i++)
		if (!known(before, nb, now[i].tid) && !strcmp(now[i].comm, "kn-engine0"))
			tid = now[i].tid;
	cr_assert_neq(tid, 0, "no kn-engine0 thread");
	usleep(300000); /* past its polling time */
	long t0 = thread_ticks(tid);
	usleep(1000000);
	long used = thread_ticks(tid) - t0;
	long hz = sysconf(_SC_CLK_TCK);
	cr_assert_leq(used * 100, 5 * hz,
		      "an engine with no QP used %ld of %ld ticks in 1 s (more than 5%% of a core)",
		      used, hz);
	kinet_close(ctx);

	/* an engine that started with no QP serves the first one at once */
	struct tu_pair p;
	cr_assert_eq(tu_pair_open(&p, NULL), 0);
	usleep(300000);
	struct tu_region src, dst;
	cr_assert_eq(tu_region_alloc(&src, p.pd, 4096, KINET_ACCESS_ALL, 21), 0);
	cr_assert_eq(tu_region_alloc(&dst, p.pd, 4096, KINET_ACCESS_ALL, 22), 0);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	kn_ticket_t t;
	cr_assert_eq(kn_put(p.da, tu_addr(dst.buf), kinet_mr_rkey(dst.mr), src.buf, tu_lkey(&src),
			    4096, &t), 0);
	cr_assert_eq(kn_wait(p.da, t), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
	cr_assert_lt(ms, 100.0, "the first write took %.1f ms", ms);
	cr_assert_eq(memcmp(dst.buf, src.buf, 4096), 0);
	cr_assert(tu_region_canaries_ok(&dst));
	tu_region_free(&src);
	tu_region_free(&dst);
	tu_pair_close(&p);
}

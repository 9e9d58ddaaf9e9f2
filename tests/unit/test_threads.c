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

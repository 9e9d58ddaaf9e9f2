/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers of the PGAS layer's tests (tests/net/test_shmem*.c): a job of n
 * PEs as forked processes on this host, joined by the TCP bootstrap (rank 0
 * on a free loopback port, handed to the others through shared memory),
 * each running kinet_shmem_init on the host executor with the same-node
 * path on (load/store through shared memory) or off (every peer over the
 * software NIC's wire), then one scenario function; results come back in
 * shared memory and every process is bounded by a deadline.
 *
 * Inside a PE, SK() checks a condition: on failure it prints the PE, the
 * line and the expression (and a formatted detail) and the PE exits 1.
 */
#ifndef TEST_SHMEM_COMMON_H
#define TEST_SHMEM_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include <kinet/boot.h>
#include <kinet/shmem.h>
#include <kinet/shmem_device.h>
#include "../util/testutil.h"

#define SH_MAXPE 8
#define SH_FN static __attribute__((unused))

struct sh_shared {
	volatile int addr_ready;
	char addr[128];
	int result[SH_MAXPE];
	volatile int killed_pid;
	volatile int arrived[SH_MAXPE];
};
static struct sh_shared *sh_sh;
static int sh_cur_pe = -1;

#define SK(cond, ...)                                                                      \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "[PE %d] %s:%d: check failed: %s: ", sh_cur_pe,    \
				__FILE__, __LINE__, #cond);                                \
			fprintf(stderr, "" __VA_ARGS__);                                   \
			fprintf(stderr, "\n");                                             \
			fflush(stderr);                                                    \
			_exit(1);                                                          \
		}                                                                          \
	} while (0)
#define SK0(e)                                                                             \
	do {                                                                               \
		long long rc_ = (long long)(e);                                            \
		SK(rc_ == 0, "%s = %lld (%s)", #e, rc_, kinet_strerror((int)rc_));         \
	} while (0)

SH_FN uint64_t sh_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

SH_FN uint64_t sh_ms(void)
{
	return sh_us() / 1000u;
}

SH_FN void sh_sleep_us(unsigned us)
{
	struct timespec ts = {us / 1000000u, (long)(us % 1000000u) * 1000L};
	nanosleep(&ts, NULL);
}

/* A job: n PEs, same-node path p2p, the scenario fn (its return value is
 * the PE's result), an argument, extra environment ("NAME=value" entries,
 * NULL-terminated, may be NULL). */
typedef int (*sh_fn)(int pe, int n, void *arg);
#define SH_HEAP_ENV ((size_t)-1)
struct sh_job {
	int n;
	int p2p;
	sh_fn fn;
	void *arg;
	const char *const *env;
	size_t heap;   /* device heap (0: 32 MiB; SH_HEAP_ENV: what the environment says) */
	int qps;       /* KINET_SHMEM_QPS (0: the default) */
	int expect_killed; /* a PE that kills itself: its status is not checked */
};

static void sh_listening(const char *addr, void *arg)
{
	(void)arg;
	snprintf(sh_sh->addr, sizeof(sh_sh->addr), "%s", addr);
	__atomic_store_n(&sh_sh->addr_ready, 1, __ATOMIC_RELEASE);
}

static int sh_pe_main(const struct sh_job *j, int pe)
{
	sh_cur_pe = pe;
	unsetenv("BXFI_MAP");
	setenv("KINET_SHMEM_P2P", j->p2p ? "1" : "0", 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	/* 2 s, times how loaded the machine is (tu_load_scale: 1 to 4), so that a
	 * PE's peer that is only slow to be scheduled is not given up */
	char net_ms[16];
	snprintf(net_ms, sizeof(net_ms), "%u", 2000u * tu_load_scale());
	setenv("KINET_NET_TIMEOUT_MS", net_ms, 0);
	setenv("KINET_TIMEOUT_MS", "20000", 0);
	setenv("KINET_SHMEM_TIMEOUT_MS", "20000", 0);
	if (j->qps) {
		char v[16];
		snprintf(v, sizeof(v), "%d", j->qps);
		setenv("KINET_SHMEM_QPS", v, 1);
	}
	for (int i = 0; j->env && j->env[i]; i++)
		putenv((char *)j->env[i]);
	if (pe != 0) {
		uint64_t t0 = sh_ms();
		while (!__atomic_load_n(&sh_sh->addr_ready, __ATOMIC_ACQUIRE)) {
			if (sh_ms() - t0 > 20000)
				return -ETIMEDOUT;
			sh_sleep_us(1000);
		}
	}
	struct kinet_boot_attr ba = {
		.rank = pe,
		.size = j->n,
		.addr = pe == 0 ? "127.0.0.1:0" : sh_sh->addr,
		.secret = "shmem-test",
		.timeout_ms = 15000,
		.listening = sh_listening,
	};
	kinet_boot *b;
	int rc = kinet_boot_init(&ba, &b);
	if (rc) {
		fprintf(stderr, "[PE %d] boot: %s\n", pe, kinet_strerror(rc));
		return rc;
	}
	struct kinet_shmem_attr sa = {.boot = b, .executor = KINET_SHMEM_EXEC_HOST,
				      .heap_size = j->heap == SH_HEAP_ENV ? 0
						   : j->heap		 ? j->heap
									 : (32u << 20),
				      .host_heap_size = 1u << 20,
				      .backend = KINET_BACKEND_SOFT,
				      .gpu = -1};
	rc = kinet_shmem_init(&sa);
	if (rc) {
		fprintf(stderr, "[PE %d] kinet_shmem_init: %s\n", pe, kinet_strerror(rc));
		kinet_boot_close(b);
		return rc;
	}
	rc = j->fn(pe, j->n, j->arg);
	int frc = kinet_shmem_initialized() ? kinet_shmem_finalize() : 0;
	if (!rc && frc)
		rc = frc;
	kinet_boot_close(b);
	return rc;
}

/* Runs the job; every PE must end with 0 (but a PE whose result is
 * expected otherwise: results[] returned for the caller to check). */
SH_FN void sh_run_job(const struct sh_job *j, int results[SH_MAXPE])
{
	cr_assert(j->n >= 1 && j->n <= SH_MAXPE);
	sh_sh = mmap(NULL, sizeof(*sh_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		     0);
	cr_assert(sh_sh != MAP_FAILED);
	memset((void *)sh_sh, 0, sizeof(*sh_sh));
	pid_t pid[SH_MAXPE];
	fflush(NULL);
	for (int pe = 0; pe < j->n; pe++) {
		pid[pe] = fork();
		cr_assert(pid[pe] >= 0);
		if (pid[pe] == 0) {
			alarm(240);
			int rc = sh_pe_main(j, pe);
			sh_sh->result[pe] = rc;
			_exit(rc ? 1 : 0);
		}
		if (pe == 0) {
			uint64_t t0 = sh_ms();
			while (!__atomic_load_n(&sh_sh->addr_ready, __ATOMIC_ACQUIRE) &&
			       sh_ms() - t0 < 20000)
				sh_sleep_us(1000);
		}
	}
	uint64_t t0 = sh_ms();
	int st[SH_MAXPE], left = j->n;
	for (int pe = 0; pe < j->n; pe++)
		st[pe] = -1;
	while (left) {
		for (int pe = 0; pe < j->n; pe++) {
			if (st[pe] != -1)
				continue;
			int s;
			if (waitpid(pid[pe], &s, WNOHANG) == pid[pe]) {
				st[pe] = s;
				left--;
			}
		}
		if (left && sh_ms() - t0 > 200000) {
			for (int pe = 0; pe < j->n; pe++)
				if (st[pe] == -1)
					kill(pid[pe], SIGKILL);
			t0 = (uint64_t)-1 / 2;
			cr_log_error("deadline: the PEs were killed");
		}
		if (left)
			sh_sleep_us(2000);
	}
	for (int pe = 0; pe < j->n; pe++) {
		if (results)
			results[pe] = WIFEXITED(st[pe]) ? sh_sh->result[pe] : -EINTR;
		if (j->expect_killed && pe == j->n - 1)
			continue;
		if (!results)
			cr_expect(WIFEXITED(st[pe]) && WEXITSTATUS(st[pe]) == 0,
				  "PE %d of %d (same-node path %s) failed: %s %d", pe, j->n,
				  j->p2p ? "on" : "off",
				  WIFEXITED(st[pe]) ? "exit" : "signal",
				  WIFEXITED(st[pe]) ? WEXITSTATUS(st[pe]) : WTERMSIG(st[pe]));
	}
	munmap(sh_sh, sizeof(*sh_sh));
	sh_sh = NULL;
}

/* Runs fn with n PEs, over the wire and over the same-node path. */
SH_FN void sh_both(int n, sh_fn fn, void *arg)
{
	for (int p2p = 0; p2p < 2; p2p++) {
		struct sh_job j = {.n = n, .p2p = p2p, .fn = fn, .arg = arg};
		sh_run_job(&j, NULL);
	}
}

/* Deterministic random bytes of (seed, pe, what). */
SH_FN uint64_t sh_seed(int pe, int what, int round)
{
	return 0x5eed0000ull ^ ((uint64_t)pe << 40) ^ ((uint64_t)what << 20) ^ (uint64_t)round;
}

#endif

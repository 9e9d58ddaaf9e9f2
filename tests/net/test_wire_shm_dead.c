/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A same-host (shm) peer killed while it holds the lock of its own queue.
 * libfabric's shm takes that lock, a spin lock in the peer's /dev/shm
 * region, for every message sent to the peer, and the peer itself takes it
 * whenever it polls; a process killed inside it leaves it held for good, and
 * a send to it spun for ever on the survivor's engine thread (kinet_mr_dereg
 * then waited on that thread too). The wire sends nothing to an shm peer
 * whose process has ended, and drops such a peer as soon as it sees that.
 *
 * Side b learns where that lock is (this program's pthread_spin_lock, which
 * libfabric calls, sees it taken while side a's writes land), takes it and
 * kills itself with SIGKILL. Side a then posts writes and a read to it:
 * each completes with an error within the network timeout, and
 * the deregistration of its region returns. Afterwards, a new process's
 * first shm endpoint removes the region the killed one left in /dev/shm.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "test_wire_common.h"

/* ---- the lock ------------------------------------------------------------- */

/* The spin lock libfabric's shm keeps in this process's region: learnt by
 * this program's pthread_spin_lock, which libfabric calls, as the lowest
 * lock address inside the region's mapping once that range is set. */
static _Atomic uintptr_t reg_lo, reg_hi, reg_lock;

int pthread_spin_lock(pthread_spinlock_t *l);
int pthread_spin_lock(pthread_spinlock_t *l)
{
	static int (*real)(pthread_spinlock_t *);
	if (!real)
		real = (int (*)(pthread_spinlock_t *))dlsym(RTLD_NEXT, "pthread_spin_lock");
	uintptr_t a = (uintptr_t)l, lo = atomic_load(&reg_lo), k = atomic_load(&reg_lock);
	if (lo && a >= lo && a < atomic_load(&reg_hi) && (!k || a < k))
		atomic_store(&reg_lock, a);
	return real(l);
}

/* The address range this process maps of its own shm region (the name
 * "<pid>.<PID namespace>." in /dev/shm): 0, or -1 when none is mapped. */
static int own_region(uintptr_t *lo, uintptr_t *hi)
{
	char pre[96], line[640];
	snprintf(pre, sizeof(pre), "/dev/shm/%d.%llx.", (int)getpid(), tw_pid_ns());
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	*lo = UINTPTR_MAX;
	*hi = 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');
		unsigned long a, b;
		if (!p || strncmp(p, pre, strlen(pre)) || sscanf(line, "%lx-%lx", &a, &b) != 2)
			continue;
		if (a < *lo)
			*lo = a;
		if (b > *hi)
			*hi = b;
	}
	fclose(f);
	return *hi ? 0 : -1;
}

/* ---- the two sides ---------------------------------------------------------- */

#define NW 4

static int survivor(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
	if (wi.qps_same_host != 1) {
		fprintf(stderr, "not over shm: %s\n", wi.same_host_why);
		return 77;
	}
	CK(tw_sync(fd, 1) == 1);
	/* writes it answers: it takes its lock for each, and learns where it is */
	for (int i = 0; i < 8; i++)
		CK0(kn_wait(s.d, tw_post_write(&s, TW_Q, TW_P + (uint32_t)i * 4096, 4096, 0, 0)));
	CK(tw_sync(fd, 2) == 2);
	/* the peer is dead once its end of the socket closes */
	char c;
	struct pollfd pf = {fd, POLLIN, 0};
	CK(poll(&pf, 1, 20000) == 1);
	CK(recv(fd, &c, 1, 0) <= 0);
	tw_sleep_ms(20);
	uint64_t t0 = tw_ms();
	kn_ticket_t t[NW + 1];
	/* eager, rendezvous and inline writes, and a read */
	t[0] = tw_post_write(&s, TW_Q, TW_P, 4096, 0, 0);
	t[1] = tw_post_write(&s, TW_Q, TW_P + 65536, 1u << 20, 0, 0);
	t[2] = tw_post_write(&s, TW_Q + 5, TW_P + 7, 100, 0, 0);
	t[3] = tw_post_write(&s, TW_Q, TW_P + (1u << 20) + 65536, 70000, 0, 0);
	CK0(kn_get(s.d, s.buf + TW_L, kinet_mr_lkey(s.mr), s.peer.addr + TW_Q, s.peer.rkey, 4096,
		   &t[NW]));
	for (int i = 0; i <= NW; i++)
		CK(kn_wait(s.d, t[i]) == -EIO);
	uint64_t dt = tw_ms() - t0;
	fprintf(stderr, "[dead peer] %d requests failed in %llu ms\n", NW + 1,
		(unsigned long long)dt);
	CK(dt < tw_net_ms() + 3000);
	CK(kinet_qp_get_state(s.qp) == KINET_QPS_ERR);
	/* the deregistration returns within the timeout too */
	t0 = tw_ms();
	CK0(kinet_mr_dereg(s.mr));
	dt = tw_ms() - t0;
	fprintf(stderr, "[dead peer] dereg took %llu ms\n", (unsigned long long)dt);
	CK(dt < tw_net_ms() + 3000);
	CK0(kinet_qp_destroy(s.qp));
	CK0(kinet_pd_free(s.pd));
	CK0(kinet_close(s.ctx));
	free(s.buf);
	return 0;
}

static int victim(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	uintptr_t lo, hi;
	CK0(own_region(&lo, &hi));
	atomic_store(&reg_hi, hi);
	atomic_store(&reg_lo, lo);
	CK(tw_sync(fd, 1) == 1);
	CK(tw_sync(fd, 2) == 2); /* the writes landed */
	uintptr_t k = atomic_load(&reg_lock);
	if (!k) {
		fprintf(stderr, "libfabric took no lock in the region through this program's "
				"pthread_spin_lock\n");
		return 2;
	}
	pthread_spin_lock((pthread_spinlock_t *)k);
	raise(SIGKILL); /* dies holding it */
	return 2;
}

/* Regions of process pid in /dev/shm; with unlink, removes them. */
static int regions_of(pid_t pid, bool unlink_them)
{
	char pre[64];
	snprintf(pre, sizeof(pre), "%d.%llx.", (int)pid, tw_pid_ns());
	DIR *d = opendir("/dev/shm");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, pre, strlen(pre))) {
			n++;
			if (unlink_them)
				unlinkat(dirfd(d), e->d_name, 0);
		}
	closedir(d);
	return n;
}

/* A new process's first shm endpoint: 0 once it is open and the regions of
 * pid are gone. */
static int sweeper(pid_t pid)
{
	setenv("KINET_FI_PROVIDER", "shm", 1);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *c;
	kinet_pd *pd;
	kinet_qp *q;
	uint8_t d[KINET_QP_DESC_MAX];
	CK0(kinet_open(&ca, &c));
	CK0(kinet_pd_alloc(c, &pd));
	CK0(kinet_qp_create(pd, NULL, &q));
	CK(kinet_qp_export(q, d, sizeof(d)) > 0);
	int left = regions_of(pid, false);
	CK0(kinet_qp_destroy(q));
	CK0(kinet_pd_free(pd));
	CK0(kinet_close(c));
	if (left)
		fprintf(stderr, "%d regions of pid %d left\n", left, (int)pid);
	return left ? 1 : 0;
}

Test(wire_shm_dead, peer_killed_holding_its_lock)
{
	unsetenv("KINET_FI_PROVIDER");
	tw_need_wire();
	if (tw_have_shm() == 77)
		cr_skip_test("libfabric has no shm provider here");
	static const int link[][2] = {{0, 1}};
	struct tw_proc p[2] = {{.fn = survivor}, {.fn = victim}};
	tw_run(p, 2, link, 1, NULL, 60000);
	int left = regions_of(p[1].pid, false);
	cr_assert(WIFSIGNALED(p[1].status) && WTERMSIG(p[1].status) == SIGKILL,
		  "side b was to die holding its lock: status 0x%x", p[1].status);
	if (WIFEXITED(p[0].status) && WEXITSTATUS(p[0].status) == 77) {
		regions_of(p[1].pid, true);
		cr_skip_test("the two processes did not connect over shm");
	}
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	/* the killed process left its region; the next process's endpoint
	 * removes it (its pid is gone) and opens */
	cr_assert_eq(left, 1, "regions of the killed process: %d", left);
	fflush(NULL);
	pid_t c = fork();
	if (c == 0)
		_exit(sweeper(p[1].pid));
	int st = 0;
	cr_assert_eq(tw_wait_pid(c, TW_IO_MS, &st), 0, "the next process did not end in %d s",
		     TW_IO_MS / 1000);
	int after = regions_of(p[1].pid, true);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the next process: status 0x%x", st);
	cr_assert_eq(after, 0);
}

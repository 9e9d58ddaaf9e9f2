/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers of the wire tests (tests/net/test_wire*.c): processes that each
 * open a software NIC, exchange QP and memory descriptors over a socketpair
 * and connect over the wire; an orchestrator that runs them (optionally each
 * in its own network namespace) and bounds everything with deadlines.
 *
 * A peer function returns 0 on success; CK() prints the failing expression
 * with its line and makes the process exit 1.
 */
#ifndef TEST_WIRE_COMMON_H
#define TEST_WIRE_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include <kinet/net.h>
#include "../util/testutil.h"

#define TW_FN static __attribute__((unused))
#define TW_IO_MS 30000 /* bound on every socket exchange */

TW_FN uint64_t tw_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

TW_FN void tw_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Full read/write with a deadline: 0 or -1. */
TW_FN int tw_io(int fd, void *buf, size_t n, int wr)
{
	uint8_t *p = buf;
	uint64_t end = tw_ms() + TW_IO_MS;
	while (n) {
		struct pollfd pf = {fd, (short)(wr ? POLLOUT : POLLIN), 0};
		uint64_t now = tw_ms();
		if (now >= end || poll(&pf, 1, (int)(end - now)) <= 0)
			return -1;
		ssize_t k = wr ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Waits at most ms for child pid to end: 0 with its status in *st, or -1
 * when it had not (it is killed and reaped then). */
TW_FN int tw_wait_pid(pid_t pid, unsigned ms, int *st)
{
	uint64_t end = tw_ms() + ms;
	for (;;) {
		pid_t r = waitpid(pid, st, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 || tw_ms() >= end)
			break;
		tw_sleep_ms(5);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* Reads one byte from fd (a pipe) within ms: 1, or 0 at its end or the
 * deadline. */
TW_FN int tw_read_byte(int fd, char *c, unsigned ms)
{
	struct pollfd pf = {fd, POLLIN, 0};
	return poll(&pf, 1, (int)ms) == 1 && read(fd, c, 1) == 1;
}

/* Sends a blob and receives the other side's (length-prefixed). */
TW_FN int tw_xchg(int fd, const void *mine, uint32_t n, void *theirs, uint32_t cap)
{
	uint32_t m;
	if (tw_io(fd, &n, 4, 1) || tw_io(fd, (void *)mine, n, 1) || tw_io(fd, &m, 4, 0) || m > cap ||
	    tw_io(fd, theirs, m, 0))
		return -1;
	return (int)m;
}

/* Barrier with a value: sends v, returns the other side's value (or -1). */
TW_FN long long tw_sync(int fd, long long v)
{
	long long o;
	if (tw_io(fd, &v, sizeof(v), 1) || tw_io(fd, &o, sizeof(o), 0))
		return -1;
	return o;
}

/* One side: context, PD, a region of `len` bytes (random, seeded) with
 * every access, one RC QP connected to the peer at the other end of `fd`. */
struct tw_side {
	int fd;
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp;
	kn_qp *d;
	uint8_t *buf;
	size_t len;
	kinet_mr *mr;
	struct kinet_mr_info peer; /* the other side's region */
	uint32_t rnr_retry;
};

#define TW_QP_ATTR(s)                                                                      \
	{.sq_depth = 256, .rq_depth = 64, .rnr_retry = (s)->rnr_retry}

/* This process's PID namespace (its inode: the wire's shm endpoint names
 * carry it), 0 when it cannot be read. */
TW_FN unsigned long long tw_pid_ns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* Exports qp's descriptor and exchanges it over fd for the one the other end
 * exports at the same time: that lands in theirs, its length returned. */
TW_FN int tw_qp_xchg(kinet_qp *qp, int fd, char theirs[KINET_QP_DESC_MAX])
{
	char mine[KINET_QP_DESC_MAX];
	int n = kinet_qp_export(qp, mine, sizeof(mine));
	CK(n > 0);
	int m = tw_xchg(fd, mine, (uint32_t)n, theirs, KINET_QP_DESC_MAX);
	CK(m > 0);
	return m;
}

/* Connects qp (RESET or INIT) to the QP the other end of fd exports at the
 * same time: descriptors exchanged, then RTS. */
TW_FN void tw_qp_connect(kinet_qp *qp, int fd)
{
	char theirs[KINET_QP_DESC_MAX];
	int m = tw_qp_xchg(qp, fd, theirs);
	CK0(kinet_qp_connect_remote(qp, theirs, (size_t)m));
	CK(kinet_qp_get_state(qp) == KINET_QPS_RTS);
}

/* A new QP of pd (sq 256, rq 64, rnr_retry 7) connected over fd. */
TW_FN kinet_qp *tw_qp_link(kinet_pd *pd, int fd)
{
	struct kinet_qp_attr a = {.sq_depth = 256, .rq_depth = 64, .rnr_retry = 7};
	kinet_qp *qp;
	CK0(kinet_qp_create(pd, &a, &qp));
	tw_qp_connect(qp, fd);
	return qp;
}

/* s's QP replaced by a new one, not connected (both sides call it together;
 * the barrier keeps one side from replacing its QP while the other still
 * uses it). */
TW_FN void tw_qp_replace(struct tw_side *s)
{
	CK(tw_sync(s->fd, 0x51) == 0x51);
	if (s->qp)
		CK0(kinet_qp_destroy(s->qp));
	s->qp = NULL;
	struct kinet_qp_attr a = TW_QP_ATTR(s);
	CK0(kinet_qp_create(s->pd, &a, &s->qp));
}

/* A new QP connected to the peer. */
TW_FN void tw_qp_new(struct tw_side *s)
{
	tw_qp_replace(s);
	tw_qp_connect(s->qp, s->fd);
	CK0(kinet_qp_device(s->qp, &s->d));
}

/* tw_qp_new but for the connect: the peer's descriptor in theirs, its length
 * returned. */
TW_FN int tw_qp_fresh(struct tw_side *s, char theirs[KINET_QP_DESC_MAX])
{
	tw_qp_replace(s);
	return tw_qp_xchg(s->qp, s->fd, theirs);
}

TW_FN void tw_open2(struct tw_side *s, int fd, size_t len, uint64_t seed, uint32_t rnr_retry)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->len = len;
	s->rnr_retry = rnr_retry;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	CK0(kinet_open(&ca, &s->ctx));
	CK0(kinet_pd_alloc(s->ctx, &s->pd));
	CK0(posix_memalign((void **)&s->buf, 4096, len));
	tu_fill_random(s->buf, len, seed);
	CK0(kinet_mr_reg(s->pd, s->buf, len, KINET_ACCESS_ALL, &s->mr));
	uint8_t mine[KINET_MR_DESC_SIZE], theirs[KINET_MR_DESC_SIZE];
	CK(kinet_mr_export(s->mr, mine, sizeof(mine)) == KINET_MR_DESC_SIZE);
	int m = tw_xchg(fd, mine, sizeof(mine), theirs, sizeof(theirs));
	CK(m == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(theirs, (size_t)m, &s->peer));
	CK(s->peer.len == len);
	tw_qp_new(s);
}

TW_FN void tw_open(struct tw_side *s, int fd, size_t len, uint64_t seed)
{
	tw_open2(s, fd, len, seed, 7);
}

TW_FN void tw_close(struct tw_side *s)
{
	if (s->qp)
		CK0(kinet_qp_destroy(s->qp));
	CK0(kinet_mr_dereg(s->mr));
	CK0(kinet_pd_free(s->pd));
	CK0(kinet_close(s->ctx));
	free(s->buf);
}

/* Posts one WQE through the device API (host executor) and returns its
 * ticket. */
TW_FN kn_ticket_t tw_post_write(struct tw_side *s, size_t loff, uint64_t roff, uint32_t len,
				 int with_imm, uint32_t imm)
{
	kn_ticket_t t;
	CK0(kn_sq_reserve(s->d, 1, &t));
	if (with_imm)
		kn_prep_write_imm(s->d, kn_wqe_ptr(s->d, t), t, (uint64_t)(uintptr_t)(s->buf + loff),
				  kinet_mr_lkey(s->mr), s->peer.addr + roff, s->peer.rkey, len, imm);
	else
		kn_prep_write(s->d, kn_wqe_ptr(s->d, t), t, (uint64_t)(uintptr_t)(s->buf + loff),
			      kinet_mr_lkey(s->mr), s->peer.addr + roff, s->peer.rkey, len);
	kn_sq_submit(s->d, t, 1);
	return t;
}

TW_FN kn_ticket_t tw_post_send(struct tw_side *s, size_t loff, uint32_t len, int with_imm,
				uint32_t imm)
{
	kn_ticket_t t;
	CK0(kn_sq_reserve(s->d, 1, &t));
	kn_prep_send(s->d, kn_wqe_ptr(s->d, t), t, (uint64_t)(uintptr_t)(s->buf + loff),
		     kinet_mr_lkey(s->mr), len, with_imm, imm);
	kn_sq_submit(s->d, t, 1);
	return t;
}

/* ---- orchestration ------------------------------------------------------------ */

typedef int (*tw_fn)(int fd, int fd2, void *arg);

struct tw_proc {
	tw_fn fn;
	const char *netns; /* NULL: this namespace */
	const char *iface; /* interface for the wire (NULL: lo) */
	pid_t pid;
	int status;
	int fds[2]; /* its two socket ends (-1 if none) */
};

/* KINET_NET_TIMEOUT_MS of the wire tests' processes (tw_child_env sets it
 * where the environment does not): 1500 ms, short so that the tests of a
 * silent peer end soon; 6000 ms over udp;ofi_rxd, whose data path can be
 * silent longer than that on a loaded machine (it recovers dropped
 * datagrams by retransmitting after a timeout that grows with each retry,
 * and only while its peer's progress calls run: a 1.5 s gap ended a
 * 24-write eager run there once in CI). The 1.5 s is multiplied by
 * tu_load_scale() (1 to 4): on 2 cores with four multi-process tests beside
 * each other, a live peer was seen silent past 1.5 s. ofi_rxd's stays 6 s:
 * 24 s went past the 20 s bound of the tests' device calls. The value is fixed once
 * per test program, when it starts (tw_net_ms_fix), and put in the
 * environment, so that the test and every process it starts agree on it.
 * Tests that wait "longer than the timeout" or bound a call by it read it
 * here. */
TW_FN unsigned tw_net_ms(void)
{
	const char *v = getenv("KINET_NET_TIMEOUT_MS");
	if (v && *v)
		return (unsigned)strtoul(v, NULL, 10);
	const char *prov = getenv("KINET_FI_PROVIDER");
	unsigned ms = 1500u * tu_load_scale();
	if (prov && strstr(prov, "ofi_rxd") && ms < 6000u)
		ms = 6000u; /* not more: the tests' device calls end at 20 s (KINET_TIMEOUT_MS) */
	char buf[16];
	snprintf(buf, sizeof(buf), "%u", ms);
	setenv("KINET_NET_TIMEOUT_MS", buf, 0);
	return ms;
}

__attribute__((constructor)) static void tw_net_ms_fix(void)
{
	(void)tw_net_ms();
}

TW_FN void tw_child_env(const char *iface)
{
	char ms[16];
	snprintf(ms, sizeof(ms), "%u", tw_net_ms());
	setenv("KINET_NET_TIMEOUT_MS", ms, 0);
	setenv("KINET_TIMEOUT_MS", "20000", 0);
	/* the tcp provider binds to this interface (loopback, or the veth) */
	setenv("FI_TCP_IFACE", iface, 1);
}

TW_FN int tw_enter_netns(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = setns(fd, CLONE_NEWNET);
	close(fd);
	return rc;
}

/* Runs n processes; p[i] talks to p[j] over pairs[i][j]. Returns once all
 * exited, killing them all at deadline_ms. Each status is in p[i].status. */
TW_FN void tw_run(struct tw_proc *p, int n, const int links[][2], int nlinks, void *arg,
		   unsigned deadline_ms)
{
	int ends[8][2];
	for (int i = 0; i < n; i++)
		p[i].fds[0] = p[i].fds[1] = -1;
	for (int l = 0; l < nlinks; l++) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			abort();
		ends[l][0] = sv[0];
		ends[l][1] = sv[1];
		int a = links[l][0], b = links[l][1];
		p[a].fds[p[a].fds[0] < 0 ? 0 : 1] = sv[0];
		p[b].fds[p[b].fds[0] < 0 ? 0 : 1] = sv[1];
	}
	fflush(NULL);
	for (int i = 0; i < n; i++) {
		p[i].pid = fork();
		if (p[i].pid == 0) {
			for (int l = 0; l < nlinks; l++)
				for (int k = 0; k < 2; k++)
					if (ends[l][k] != p[i].fds[0] && ends[l][k] != p[i].fds[1])
						close(ends[l][k]);
			if (p[i].netns && tw_enter_netns(p[i].netns)) {
				fprintf(stderr, "cannot enter network namespace %s\n", p[i].netns);
				_exit(3);
			}
			tw_child_env(p[i].iface ? p[i].iface : "lo");
			int rc = p[i].fn(p[i].fds[0], p[i].fds[1], arg);
			_exit(rc == 77 ? 77 : rc ? 1 : 0); /* 77: the test skips */
		}
	}
	for (int l = 0; l < nlinks; l++) {
		close(ends[l][0]);
		close(ends[l][1]);
	}
	uint64_t end = tw_ms() + deadline_ms;
	int left = n;
	for (int i = 0; i < n; i++)
		p[i].status = -1;
	while (left) {
		for (int i = 0; i < n; i++) {
			if (p[i].status != -1)
				continue;
			int st;
			pid_t r = waitpid(p[i].pid, &st, WNOHANG);
			if (r == p[i].pid) {
				p[i].status = st;
				left--;
			}
		}
		if (!left)
			break;
		if (tw_ms() > end) {
			fprintf(stderr, "deadline: killing the test processes\n");
			for (int i = 0; i < n; i++)
				if (p[i].status == -1)
					kill(p[i].pid, SIGKILL);
			end = (uint64_t)-1 / 2;
		}
		tw_sleep_ms(5);
	}
}

/* Does this build have the wire (libfabric and its provider)? Checked in a
 * child so that the test process itself never starts kinet threads. */
TW_FN int tw_have_wire(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		tw_child_env("lo");
		kinet_ctx *ctx;
		kinet_pd *pd;
		kinet_qp *qp;
		struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
		uint8_t d[KINET_QP_DESC_MAX];
		if (kinet_open(&ca, &ctx) || kinet_pd_alloc(ctx, &pd) || kinet_qp_create(pd, NULL, &qp))
			_exit(1);
		int n = kinet_qp_export(qp, d, sizeof(d));
		/* closed: shm leaves the region of an endpoint not closed in /dev/shm */
		kinet_qp_destroy(qp);
		kinet_pd_free(pd);
		kinet_close(ctx);
		_exit(n > 0 ? 0 : (n == -ENOSYS || n == -ENODEV) ? 77 : 1);
	}
	int st = 0;
	if (tw_wait_pid(pid, TW_IO_MS, &st)) {
		fprintf(stderr, "the check for the wire did not end in %d s\n", TW_IO_MS / 1000);
		return 1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* Does libfabric here have the shm provider? 0, or 77 when it has not
 * (checked in a child, as tw_have_wire). */
TW_FN int tw_have_shm(void)
{
	fflush(NULL);
	pid_t p = fork();
	if (p == 0) {
		setenv("KINET_FI_PROVIDER", "shm", 1);
		_exit(tw_have_wire() == 0 ? 0 : 77);
	}
	int st = 0;
	if (tw_wait_pid(p, 2 * TW_IO_MS, &st)) {
		fprintf(stderr, "the check for shm did not end in %d s\n", 2 * TW_IO_MS / 1000);
		return 1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

TW_FN int tw_exited_ok(const struct tw_proc *p)
{
	return WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0;
}

#ifdef CRITERION_H_ /* in a Criterion test (criterion.h included before this header) */
/* Skips the test when the build has no wire (no libfabric, or no provider). */
TW_FN void tw_need_wire(void)
{
	int w = tw_have_wire();
	if (w == 77)
		cr_skip_test("this build has no libfabric wire (or its provider is missing)");
	cr_assert_eq(w, 0, "a context with a wire endpoint could not be opened");
}

/* Sides a and b over one link, within deadline_ms; both must exit 0. */
TW_FN void tw_run_two(tw_fn a, tw_fn b, unsigned deadline_ms)
{
	static const int link[][2] = {{0, 1}};
	struct tw_proc p[2] = {{.fn = a}, {.fn = b}};
	tw_run(p, 2, link, 1, NULL, deadline_ms);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}
#endif

/* ---- scenarios ------------------------------------------------------------------- */

/* Buffer layout of the scenarios (each side, TW_LEN bytes):
 *   P [0, 2M)        written by the peer
 *   Q [2M, 3M)       read by the peer, source of this side's writes and sends
 *   S [3M, 3.5M)     receive buffers
 *   L [3.5M, 4M-64)  destination of this side's reads and atomic results
 *   W [4M-8, 4M)     the word the peer's atomics work on */
#define TW_LEN (4u << 20)
#define TW_P 0u
#define TW_Q (2u << 20)
#define TW_S (3u << 20)
#define TW_L (TW_S + (512u << 10))
#define TW_W (TW_LEN - 8u)

struct tw_wr {
	uint32_t src, dst, len; /* Q offset, P offset */
	int kind;               /* 0 write, 1 inline write, 2 write imm */
	uint32_t imm;
};
static const struct tw_wr tw_writes[] = {
	{0, 0, 1, 0, 0},
	{8, 16, 8, 0, 0},
	{64, 100, 28, 1, 0},
	{100, 200, 4096, 0, 0},
	{8192, 8192 + 3, 65536, 0, 0},
	{77777, 300001, 262144 + 1000, 0, 0},
	{0, 600000, 1u << 20, 0, 0},
	{5000, 1700000, 100000, 2, 0x12345678u},
	{0, 1900000, 0, 2, 0xdeadbeefu},
};
#define TW_NWR ((int)(sizeof(tw_writes) / sizeof(tw_writes[0])))
struct tw_rd {
	uint32_t src, dst, len; /* peer Q offset, own L offset */
};
static const struct tw_rd tw_reads[] = {{5, 0, 400000}, {999, 400008, 8}, {4097, 400100, 0}};
#define TW_NRD ((int)(sizeof(tw_reads) / sizeof(tw_reads[0])))
/* receives, in the order they are consumed: two write-imm, then two sends */
struct tw_rv {
	uint32_t off, cap; /* S offset */
	uint32_t src, len; /* send: peer Q offset and length */
	int imm_send;
	uint32_t imm;
};
static const struct tw_rv tw_recvs[] = {
	{400000, 16, 0, 0, 0, 0},
	{400016, 16, 0, 0, 0, 0},
	{0, 300000, 100, 280000, 0, 0},
	{300000, 100, 7, 64, 1, 0xcafeu},
};
#define TW_NRV 4

/* What this side's buffer must hold after tw_ops (own seed, peer seed). */
TW_FN void tw_model(uint8_t *m, uint64_t own_seed, uint64_t peer_seed)
{
	uint8_t *peer = malloc(TW_LEN);
	tu_fill_random(m, TW_LEN, own_seed);
	tu_fill_random(peer, TW_LEN, peer_seed);
	for (int i = 0; i < TW_NWR; i++)
		memcpy(m + TW_P + tw_writes[i].dst, peer + TW_Q + tw_writes[i].src, tw_writes[i].len);
	for (int i = 0; i < TW_NRD; i++)
		memcpy(m + TW_L + tw_reads[i].dst, peer + TW_Q + tw_reads[i].src, tw_reads[i].len);
	for (int i = 2; i < TW_NRV; i++)
		memcpy(m + TW_S + tw_recvs[i].off, peer + TW_Q + tw_recvs[i].src, tw_recvs[i].len);
	uint64_t pw, ow;
	memcpy(&pw, peer + TW_W, 8);
	memcpy(&ow, m + TW_W, 8);
	(void)ow;
	/* the peer's word: fetch-add 5, CAS(pw+5 -> 42) succeeds, CAS(7 -> 9) fails */
	uint64_t r[3] = {kn_htobe64(pw), kn_htobe64(pw + 5), kn_htobe64(42)};
	memcpy(m + TW_L + 450000, r, sizeof(r));
	uint64_t fin = 42;
	memcpy(m + TW_W, &fin, 8);
	free(peer);
}

/* Every opcode, both directions at once, verified byte for byte. */
TW_FN int tw_ops(struct tw_side *s, uint64_t own_seed, uint64_t peer_seed)
{
	kinet_qp *qp = s->qp;
	(void)qp;
	kn_qp *d = s->d;
	uint32_t lkey = kinet_mr_lkey(s->mr);
	/* receives for the peer's write-imm and sends */
	kn_ticket_t rt[TW_NRV];
	for (int i = 0; i < TW_NRV; i++)
		CK0(kn_recv_post(d, s->buf + TW_S + tw_recvs[i].off, lkey, tw_recvs[i].cap, &rt[i]));
	CK(tw_sync(s->fd, 1) == 1);
	/* writes */
	for (int i = 0; i < TW_NWR; i++) {
		const struct tw_wr *w = &tw_writes[i];
		if (w->kind == 1) {
			kn_ticket_t t;
			CK0(kn_put_inline(d, s->peer.addr + TW_P + w->dst, s->peer.rkey,
					  s->buf + TW_Q + w->src, w->len, &t));
		} else {
			tw_post_write(s, TW_Q + w->src, TW_P + w->dst, w->len, w->kind == 2, w->imm);
		}
	}
	/* reads */
	for (int i = 0; i < TW_NRD; i++) {
		kn_ticket_t t;
		CK0(kn_get(d, s->buf + TW_L + tw_reads[i].dst, lkey,
			   s->peer.addr + TW_Q + tw_reads[i].src, s->peer.rkey, tw_reads[i].len, &t));
	}
	/* sends */
	for (int i = 2; i < TW_NRV; i++)
		tw_post_send(s, TW_Q + tw_recvs[i].src, tw_recvs[i].len, tw_recvs[i].imm_send,
			     tw_recvs[i].imm);
	CK0(kn_quiet(d));
	/* atomics, blocking */
	uint64_t pw;
	{
		uint8_t *peer = malloc(TW_LEN);
		tu_fill_random(peer, TW_LEN, peer_seed);
		memcpy(&pw, peer + TW_W, 8);
		free(peer);
	}
	uint64_t *res = (uint64_t *)(s->buf + TW_L + 450000);
	kn_ticket_t t;
	CK0(kn_sq_reserve(d, 1, &t));
	kn_prep_atomic_fa(d, kn_wqe_ptr(d, t), t, (uint64_t)(uintptr_t)&res[0], lkey,
			  s->peer.addr + TW_W, s->peer.rkey, 5);
	kn_sq_submit(d, t, 1);
	CK0(kn_wait(d, t));
	CK0(kn_sq_reserve(d, 1, &t));
	kn_prep_atomic_cs(d, kn_wqe_ptr(d, t), t, (uint64_t)(uintptr_t)&res[1], lkey,
			  s->peer.addr + TW_W, s->peer.rkey, pw + 5, 42);
	kn_sq_submit(d, t, 1);
	CK0(kn_wait(d, t));
	CK0(kn_sq_reserve(d, 1, &t));
	kn_prep_atomic_cs(d, kn_wqe_ptr(d, t), t, (uint64_t)(uintptr_t)&res[2], lkey,
			  s->peer.addr + TW_W, s->peer.rkey, 7, 9);
	kn_sq_submit(d, t, 1);
	CK0(kn_wait(d, t));
	/* the receives of the peer's operations */
	for (int i = 0; i < TW_NRV; i++) {
		kn_recv_info info;
		CK0(kn_recv_poll(d, rt[i], 1, &info));
		if (i < 2) {
			CK(info.opcode == KN_CQE_RESP_WR_IMM && info.has_imm);
			CK(info.imm == tw_writes[TW_NWR - 2 + i].imm);
			CK(info.byte_len == tw_writes[TW_NWR - 2 + i].len);
		} else {
			CK(info.byte_len == tw_recvs[i].len);
			CK(info.has_imm == tw_recvs[i].imm_send);
			if (info.has_imm)
				CK(info.imm == tw_recvs[i].imm);
		}
	}
	CK(tw_sync(s->fd, 2) == 2); /* both sides done: every write placed */
	uint8_t *m = malloc(TW_LEN);
	tw_model(m, own_seed, peer_seed);
	for (size_t i = 0; i < TW_LEN; i++)
		if (m[i] != s->buf[i]) {
			fprintf(stderr, "[pid %d] byte %zu differs: %02x, expected %02x\n",
				(int)getpid(), i, s->buf[i], m[i]);
			CK(0);
		}
	free(m);
	struct kinet_counters c;
	CK0(kinet_ctx_counters(s->ctx, &c));
	CK(c.errors == 0);
	CK(tw_sync(s->fd, 3) == 3);
	return 0;
}

/* Side a of the ops scenario (seed 1), side b (seed 2). */
TW_FN int tw_ops_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	tw_ops(&s, 1, 2);
	tw_close(&s);
	return 0;
}
TW_FN int tw_ops_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	tw_ops(&s, 2, 1);
	tw_close(&s);
	return 0;
}

/* ---- protection errors ------------------------------------------------------------ */

#define TW_RO_LEN 65536u

/* Waits for a ticket that must fail with synd; the QP ends in ERR. */
TW_FN void tw_expect_fail(struct tw_side *s, kn_ticket_t t, uint32_t synd)
{
	CK(kn_wait(s->d, t) == -EIO);
	uint32_t got = kn_qp_error(s->d, NULL);
	if (got != synd)
		fprintf(stderr, "[pid %d] syndrome 0x%x (%s), expected 0x%x (%s)\n", (int)getpid(),
			got, kinet_syndrome_str(got), synd, kinet_syndrome_str(synd));
	CK(got == synd);
	CK(kinet_qp_get_state(s->qp) == KINET_QPS_ERR);
}

/* a: requester of every violation; b: target, with a read-only region too. */
TW_FN int tw_prot_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	uint8_t rod[KINET_MR_DESC_SIZE];
	struct kinet_mr_info ro;
	CK(tw_xchg(fd, "", 0, rod, sizeof(rod)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(rod, sizeof(rod), &ro));
	uint32_t lkey = kinet_mr_lkey(s.mr);
	kn_ticket_t t0, t1, t2;
	/* 1: a write past the end of the region, between two good ones */
	t0 = tw_post_write(&s, TW_Q, TW_P, 4096, 0, 0);
	t1 = tw_post_write(&s, TW_Q, s.peer.len - 4, 8, 0, 0);
	t2 = tw_post_write(&s, TW_Q + 8192, TW_P + 8192, 4096, 0, 0);
	CK0(kn_wait(s.d, t0));
	tw_expect_fail(&s, t1, KN_SYND_REMOTE_ACCESS_ERR);
	CK(kn_wait(s.d, t2) == -EIO); /* flushed: never executed */
	struct kinet_counters c;
	CK0(kinet_ctx_counters(s.ctx, &c));
	CK(c.by_syndrome[KN_SYND_REMOTE_ACCESS_ERR] == 1);
	CK(c.by_syndrome[KN_SYND_WR_FLUSH_ERR] >= 1);
	CK(tw_sync(fd, 1) == 1); /* b checks what landed */
	CK(tw_sync(fd, 2) == 2);
	/* 2: a read with a key that names no region */
	tw_qp_new(&s);
	CK0(kn_get(s.d, s.buf + TW_L, lkey, s.peer.addr + TW_Q, s.peer.rkey + 0x100, 64, &t0));
	tw_expect_fail(&s, t0, KN_SYND_REMOTE_ACCESS_ERR);
	/* 3: a write into a region that only allows reads */
	tw_qp_new(&s);
	t0 = tw_post_write(&s, TW_Q, 0, 64, 0, 0);
	{
		/* tw_post_write targets s.peer: aim it at the read-only region */
		kn_ticket_t t;
		CK0(kn_put(s.d, ro.addr + 64, ro.rkey, s.buf + TW_Q, lkey, 64, &t));
		CK0(kn_wait(s.d, t0));
		tw_expect_fail(&s, t, KN_SYND_REMOTE_ACCESS_ERR);
	}
	/* 4: reading it is allowed: random data checked */
	tw_qp_new(&s);
	CK0(kn_get(s.d, s.buf + TW_L, lkey, ro.addr + 100, ro.rkey, 5000, &t0));
	CK0(kn_wait(s.d, t0));
	{
		uint8_t *exp = malloc(TW_RO_LEN);
		tu_fill_random(exp, TW_RO_LEN, 3);
		CK(memcmp(s.buf + TW_L, exp + 100, 5000) == 0);
		free(exp);
	}
	/* 5: a misaligned atomic */
	CK0(kn_sq_reserve(s.d, 1, &t0));
	kn_prep_atomic_fa(s.d, kn_wqe_ptr(s.d, t0), t0, (uint64_t)(uintptr_t)(s.buf + TW_L), lkey,
			  s.peer.addr + TW_W - 4, s.peer.rkey, 1);
	kn_sq_submit(s.d, t0, 1);
	tw_expect_fail(&s, t0, KN_SYND_REMOTE_INVAL_REQ_ERR);
	/* 6: a send larger than the receive buffer b posted */
	tw_qp_new(&s);
	CK(tw_sync(fd, 3) == 3); /* b has posted a 100-byte receive */
	t0 = tw_post_send(&s, TW_Q, 200, 0, 0);
	tw_expect_fail(&s, t0, KN_SYND_REMOTE_INVAL_REQ_ERR);
	CK(tw_sync(fd, 4) == 4);
	tw_close(&s);
	return 0;
}

TW_FN int tw_prot_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	uint8_t *ro = malloc(TW_RO_LEN);
	tu_fill_random(ro, TW_RO_LEN, 3);
	kinet_mr *romr;
	CK0(kinet_mr_reg(s.pd, ro, TW_RO_LEN, KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_READ,
			 &romr));
	uint8_t rod[KINET_MR_DESC_SIZE], dummy[4];
	CK(kinet_mr_export(romr, rod, sizeof(rod)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd, rod, sizeof(rod), dummy, sizeof(dummy)) == 0);
	CK(tw_sync(fd, 1) == 1);
	/* the first write landed, the failed one and the flushed one did not */
	uint8_t *a = malloc(TW_LEN), *mine = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	tu_fill_random(mine, TW_LEN, 2);
	CK(memcmp(s.buf + TW_P, a + TW_Q, 4096) == 0);
	CK(memcmp(s.buf + 4096, mine + 4096, TW_LEN - 4096) == 0);
	free(a);
	free(mine);
	CK(tw_sync(fd, 2) == 2);
	tw_qp_new(&s); /* 2 */
	tw_qp_new(&s); /* 3 */
	{
		uint8_t *exp = malloc(TW_RO_LEN);
		tu_fill_random(exp, TW_RO_LEN, 3);
		CK(memcmp(ro, exp, TW_RO_LEN) == 0); /* the read-only region is intact */
		free(exp);
	}
	tw_qp_new(&s); /* 4, 5 */
	tw_qp_new(&s); /* 6 */
	kn_ticket_t rt;
	CK0(kn_recv_post(s.d, s.buf + TW_S, kinet_mr_lkey(s.mr), 100, &rt));
	CK(tw_sync(fd, 3) == 3);
	kn_recv_info info;
	CK(kn_recv_poll(s.d, rt, 1, &info) == -EIO);
	CK(info.syndrome == KN_SYND_LOCAL_LENGTH_ERR);
	CK(tw_sync(fd, 4) == 4);
	CK0(kinet_mr_dereg(romr));
	free(ro);
	tw_close(&s);
	return 0;
}

/* ---- receiver not ready ------------------------------------------------------------- */

/* a sends; b has no receive posted. rnr_retry 1: RNR retry exceeded. Then
 * rnr_retry 7: the send waits (longer than the network timeout: the target
 * keeps the requester's timer alive) and a write posted after it waits
 * behind it (RC order) until b posts the receive. */
TW_FN int tw_rnr_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open2(&s, fd, TW_LEN, 1, 1);
	kn_ticket_t t = tw_post_send(&s, TW_Q, 64, 0, 0);
	tw_expect_fail(&s, t, KN_SYND_RNR_RETRY_EXC_ERR);
	CK(tw_sync(fd, 1) == 1);
	s.rnr_retry = 7;
	tw_qp_new(&s);
	kn_ticket_t t1 = tw_post_send(&s, TW_Q + 1000, 3000, 1, 77);
	kn_ticket_t t2 = tw_post_write(&s, TW_Q + 5000, TW_P, 4096, 0, 0);
	CK(tw_sync(fd, 2) == 2);
	CK0(kn_wait(s.d, t1));
	CK0(kn_wait(s.d, t2));
	CK(tw_sync(fd, 3) == 3);
	tw_close(&s);
	return 0;
}

TW_FN int tw_rnr_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open2(&s, fd, TW_LEN, 2, 1);
	CK(tw_sync(fd, 1) == 1);
	struct kinet_counters c;
	CK0(kinet_ctx_counters(s.ctx, &c));
	CK(c.rnr_retries >= 1); /* the target retried before giving up */
	s.rnr_retry = 7;
	tw_qp_new(&s);
	CK(tw_sync(fd, 2) == 2);
	tw_sleep_ms(tw_net_ms() + 1000); /* longer than KINET_NET_TIMEOUT_MS */
	uint8_t *a = malloc(TW_LEN), *mine = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	tu_fill_random(mine, TW_LEN, 2);
	CK(memcmp(s.buf + TW_P, mine + TW_P, 4096) == 0); /* the write waits behind the send */
	kn_ticket_t rt;
	CK0(kn_recv_post(s.d, s.buf + TW_S, kinet_mr_lkey(s.mr), 4096, &rt));
	kn_recv_info info;
	CK0(kn_recv_poll(s.d, rt, 1, &info));
	CK(info.byte_len == 3000 && info.has_imm && info.imm == 77);
	CK(memcmp(s.buf + TW_S, a + TW_Q + 1000, 3000) == 0);
	CK(tw_sync(fd, 3) == 3);
	CK(memcmp(s.buf + TW_P, a + TW_Q + 5000, 4096) == 0);
	free(a);
	free(mine);
	tw_close(&s);
	return 0;
}

/* ---- a peer killed mid-stream, then a new peer ---------------------------------------- */

#define TW_KILL_N 200
#define TW_KILL_LEN (256u << 10)

/* a streams writes to b, kills b, every WQE completes (a suffix in error,
 * the first of them with transport retry exceeded) within the network
 * timeout; then a connects a new QP to c and moves data both ways. */
TW_FN int tw_kill_a(int fd, int fd2, void *arg)
{
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	long long pid = tw_sync(fd, 0);
	CK(pid > 0);
	kn_ticket_t t[TW_KILL_N];
	for (int i = 0; i < TW_KILL_N; i++)
		t[i] = tw_post_write(&s, TW_Q + (uint32_t)(i % 4) * TW_KILL_LEN, TW_P + (i % 8) * TW_KILL_LEN,
				     TW_KILL_LEN, 0, 0);
	CK(kill((pid_t)pid, SIGKILL) == 0);
	uint64_t t0 = tw_ms();
	int first_err = -1;
	for (int i = 0; i < TW_KILL_N; i++) {
		int rc = kn_wait(s.d, t[i]);
		CK(rc == 0 || rc == -EIO);
		if (rc == -EIO && first_err < 0)
			first_err = i;
		CK(rc == 0 || first_err >= 0);
		if (first_err >= 0)
			CK(rc == -EIO); /* RC: everything after the first error fails */
	}
	uint64_t dt = tw_ms() - t0;
	fprintf(stderr, "[kill] %d of %d completed before the failure, all done in %llu ms\n",
		first_err, TW_KILL_N, (unsigned long long)dt);
	CK(first_err >= 0);
	CK(dt < tw_net_ms() + 3000);
	CK(kn_qp_error(s.d, NULL) == KN_SYND_TRANSPORT_RETRY_EXC_ERR);
	CK(kinet_qp_get_state(s.qp) == KINET_QPS_ERR);
	/* reconnect: a new QP to a new peer */
	s.fd = fd2;
	uint8_t mine[KINET_MR_DESC_SIZE], theirs[KINET_MR_DESC_SIZE];
	CK(kinet_mr_export(s.mr, mine, sizeof(mine)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd2, mine, sizeof(mine), theirs, sizeof(theirs)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(theirs, sizeof(theirs), &s.peer));
	tw_qp_new(&s);
	kn_ticket_t w = tw_post_write(&s, TW_Q, TW_P, 300000, 0, 0);
	kn_ticket_t r;
	CK0(kn_get(s.d, s.buf + TW_L, kinet_mr_lkey(s.mr), s.peer.addr + TW_Q + 5, s.peer.rkey,
		   100000, &r));
	CK0(kn_wait(s.d, w));
	CK0(kn_wait(s.d, r));
	uint8_t *c = malloc(TW_LEN);
	tu_fill_random(c, TW_LEN, 3);
	CK(memcmp(s.buf + TW_L, c + TW_Q + 5, 100000) == 0);
	free(c);
	CK(tw_sync(fd2, 1) == 1);
	tw_close(&s);
	return 0;
}

TW_FN int tw_kill_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	CK(tw_sync(fd, (long long)getpid()) == 0);
	for (int i = 0; i < 3000; i++) /* killed long before this ends */
		tw_sleep_ms(10);
	return 1;
}

TW_FN int tw_kill_c(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 3); /* waits for a to come back */
	CK(tw_sync(fd, 1) == 1);
	uint8_t *a = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	CK(memcmp(s.buf + TW_P, a + TW_Q, 300000) == 0);
	free(a);
	tw_close(&s);
	return 0;
}

/* ---- cutting the link ------------------------------------------------------------------ */

/* Data both ways on the new QPs once the link is back: a (seed 1) writes
 * 500000 bytes into b (seed 2) and reads 200000 of b's back, byte for byte;
 * b checks what a wrote once a says it is done. */
TW_FN void tw_again_a(struct tw_side *s)
{
	kn_ticket_t w = tw_post_write(s, TW_Q + 3, TW_P + 5, 500000, 0, 0);
	kn_ticket_t r;
	CK0(kn_get(s->d, s->buf + TW_L, kinet_mr_lkey(s->mr), s->peer.addr + TW_Q + 11,
		   s->peer.rkey, 200000, &r));
	CK0(kn_wait(s->d, w));
	CK0(kn_wait(s->d, r));
	uint8_t *b = malloc(TW_LEN);
	tu_fill_random(b, TW_LEN, 2);
	CK(memcmp(s->buf + TW_L, b + TW_Q + 11, 200000) == 0);
	free(b);
}

TW_FN void tw_again_b(struct tw_side *s)
{
	uint8_t *a = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	CK(memcmp(s->buf + TW_P + 5, a + TW_Q + 3, 500000) == 0);
	free(a);
}

#define TW_CUT_N 100

/* a streams writes, takes its end of the link down (arg: its interface) and
 * streams more: every WQE completes, errors within the network timeout;
 * link up again, new QPs on both sides, data both ways. */
TW_FN int tw_cut_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	const char *ifc = arg;
	char cmd[128];
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	kn_ticket_t t[2 * TW_CUT_N];
	for (int i = 0; i < TW_CUT_N; i++)
		t[i] = tw_post_write(&s, TW_Q + (uint32_t)(i % 4) * TW_KILL_LEN,
				     TW_P + (i % 8) * TW_KILL_LEN, TW_KILL_LEN, 0, 0);
	snprintf(cmd, sizeof(cmd), "ip link set dev %s down", ifc);
	CK(system(cmd) == 0);
	uint64_t t0 = tw_ms();
	for (int i = TW_CUT_N; i < 2 * TW_CUT_N; i++)
		t[i] = tw_post_write(&s, TW_Q + (uint32_t)(i % 4) * TW_KILL_LEN,
				     TW_P + (i % 8) * TW_KILL_LEN, TW_KILL_LEN, 0, 0);
	int first_err = -1;
	for (int i = 0; i < 2 * TW_CUT_N; i++) {
		int rc = kn_wait(s.d, t[i]);
		CK(rc == 0 || rc == -EIO);
		if (rc == -EIO && first_err < 0)
			first_err = i;
		if (first_err >= 0)
			CK(rc == -EIO);
	}
	uint64_t dt = tw_ms() - t0;
	fprintf(stderr, "[cut] %d of %d completed before the failure, all done %llu ms after the cut\n",
		first_err, 2 * TW_CUT_N, (unsigned long long)dt);
	CK(first_err >= 0 && first_err <= TW_CUT_N);
	CK(dt < tw_net_ms() + 3000);
	CK(kn_qp_error(s.d, NULL) == KN_SYND_TRANSPORT_RETRY_EXC_ERR);
	snprintf(cmd, sizeof(cmd), "ip link set dev %s up", ifc);
	CK(system(cmd) == 0);
	CK(tw_sync(fd, 1) == 1);
	tw_qp_new(&s);
	tw_again_a(&s);
	CK(tw_sync(fd, 2) == 2);
	tw_close(&s);
	return 0;
}

TW_FN int tw_cut_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	CK(tw_sync(fd, 1) == 1);
	tw_qp_new(&s);
	CK(tw_sync(fd, 2) == 2);
	tw_again_b(&s);
	tw_close(&s);
	return 0;
}

/* ---- a requester that goes silent while the target reads from it ---------------------- */

/* How the requester goes silent: SIGSTOP, or (iface set) the target takes
 * its end of the link down. close_first: tear the context down first. */
struct tw_silent {
	const char *iface;
	int close_first;
	int no_av_cleanup; /* the target runs with FI_AV_REMOVE_CLEANUP=0 */
};

#define TW_SIL_LEN (8u << 20)
#define TW_SIL_BOUND_MS (tw_net_ms() + 3000u) /* KINET_NET_TIMEOUT_MS + a margin */

/* Bytes the wire has placed (straight into the region, or through a
 * bounce buffer where the provider cannot cancel reads in place). */
TW_FN uint64_t tw_direct(kinet_ctx *ctx)
{
	struct kinet_counters c;
	CK0(kinet_ctx_counters(ctx, &c));
	return c.direct_bytes + c.staged_bytes;
}

/* ---- cutting the link under the target's reads, then the same two processes again ------ */

/* a streams rendezvous writes until its QP fails; b (arg: its interface)
 * takes its end of the link down once reads of a's writes are under way, so
 * that they stall and b gives them up (KINET_NET_TIMEOUT_MS), then brings
 * the link up again: both sides create new QPs (the same two endpoints, the
 * same connection underneath), a writes and reads, byte for byte. The reads
 * b gave up reach a only once the link is back, after a's requests ended. */
TW_FN int tw_cutr_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	CK(tw_sync(fd, 0) == 0);
	uint32_t lkey = kinet_mr_lkey(s.mr);
	uint64_t end = tw_ms() + 20000;
	for (int i = 0; kinet_qp_get_state(s.qp) != KINET_QPS_ERR && tw_ms() < end; i++) {
		kn_ticket_t t;
		if (kn_put(s.d, s.peer.addr + TW_P + (uint64_t)(i % 8) * TW_KILL_LEN, s.peer.rkey,
			   s.buf + TW_Q + (uint32_t)(i % 4) * TW_KILL_LEN, lkey, TW_KILL_LEN, &t))
			tw_sleep_ms(1);
	}
	CK(kinet_qp_get_state(s.qp) == KINET_QPS_ERR);
	CK(kn_qp_error(s.d, NULL) == KN_SYND_TRANSPORT_RETRY_EXC_ERR);
	CK(tw_sync(fd, 1) == 1); /* the link is up again */
	tw_qp_new(&s);
	tw_again_a(&s);
	CK(tw_sync(fd, 2) == 2);
	tw_close(&s);
	return 0;
}

TW_FN int tw_cutr_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	const char *ifc = arg;
	char cmd[128];
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	CK(tw_sync(fd, 0) == 0);
	uint64_t end = tw_ms() + 20000;
	uint64_t base = tw_direct(s.ctx);
	while (tw_direct(s.ctx) < base + (4u << 20) && tw_ms() < end)
		;
	CK(tw_direct(s.ctx) >= base + (4u << 20));
	snprintf(cmd, sizeof(cmd), "ip link set dev %s down", ifc);
	CK(system(cmd) == 0);
	tw_sleep_ms(tw_net_ms() + 1000); /* the reads stall and are given up */
	snprintf(cmd, sizeof(cmd), "ip link set dev %s up", ifc);
	CK(system(cmd) == 0);
	CK(tw_sync(fd, 1) == 1);
	tw_qp_new(&s);
	CK(tw_sync(fd, 2) == 2);
	tw_again_b(&s);
	tw_close(&s);
	return 0;
}

TW_FN void tw_silence(const struct tw_silent *a, pid_t pid, int on)
{
	if (a->iface) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "ip link set dev %s %s", a->iface, on ? "down" : "up");
		CK(system(cmd) == 0);
	} else {
		CK(kill(pid, on ? SIGSTOP : SIGCONT) == 0);
	}
}

#define TW_BOUNDED(t0, what)                                                               \
	do {                                                                               \
		uint64_t dt_ = tw_ms() - (t0);                                             \
		fprintf(stderr, "[silent] %s: %llu ms\n", what, (unsigned long long)dt_);   \
		CK(dt_ < TW_SIL_BOUND_MS);                                                 \
	} while (0)

/* The target: b streams rendezvous writes into a region of its; b goes
 * silent; every control call of the target returns within the bound, the
 * region is never written after its deregistration returned, and the
 * context serves c afterwards (or, close_first, closes at once). */
TW_FN int tw_silent_t(int fd, int fd2, void *arg)
{
	const struct tw_silent *a = arg;
	if (a->no_av_cleanup)
		setenv("FI_AV_REMOVE_CLEANUP", "0", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	uint8_t *um = mmap(NULL, TW_SIL_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
	CK(um != MAP_FAILED);
	kinet_mr *mr;
	CK0(kinet_mr_reg(s.pd, um, TW_SIL_LEN, KINET_ACCESS_ALL, &mr));
	uint8_t d[KINET_MR_DESC_SIZE], dummy[4];
	CK(kinet_mr_export(mr, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd, d, sizeof(d), dummy, sizeof(dummy)) == 0);
	long long pid = tw_sync(fd, 0);
	CK(pid > 0);
	uint64_t end = tw_ms() + 20000;
	while (tw_direct(s.ctx) < (4u << 20) && tw_ms() < end)
		tw_sleep_ms(1);
	CK(tw_direct(s.ctx) >= (4u << 20));
	tw_silence(a, (pid_t)pid, 1);
	uint64_t t0 = tw_ms();
	if (a->close_first) {
		/* teardown with the reads of the silent peer outstanding */
		CK0(kinet_qp_destroy(s.qp));
		s.qp = NULL;
		CK0(kinet_mr_dereg(mr));
		TW_BOUNDED(t0, "kinet_mr_dereg after the peer went silent");
		tw_close(&s);
		TW_BOUNDED(t0, "kinet_close after the peer went silent");
		tw_silence(a, (pid_t)pid, 0);
		CK(kill((pid_t)pid, SIGKILL) == 0);
		CK(munmap(um, TW_SIL_LEN) == 0);
		return 0;
	}
	uint8_t *other = malloc(1u << 20);
	kinet_mr *omr;
	CK0(kinet_mr_reg(s.pd, other, 1u << 20, KINET_ACCESS_ALL, &omr));
	TW_BOUNDED(t0, "kinet_mr_reg after the peer went silent");
	kinet_qp *q;
	CK0(kinet_qp_create(s.pd, NULL, &q));
	TW_BOUNDED(t0, "kinet_qp_create after the peer went silent");
	CK0(kinet_qp_destroy(q));
	CK0(kinet_mr_dereg(mr));
	TW_BOUNDED(t0, "kinet_mr_dereg after the peer went silent");
	CK(mprotect(um, TW_SIL_LEN, PROT_NONE) == 0); /* a late write kills this process */
	CK0(kinet_mr_dereg(omr));
	free(other);
	/* the peer comes back: what it still sends must not land */
	tw_silence(a, (pid_t)pid, 0);
	tw_sleep_ms(500);
	CK(kill((pid_t)pid, SIGKILL) == 0);
	/* the context serves another peer: a large write each way */
	s.fd = fd2;
	uint8_t mine[KINET_MR_DESC_SIZE], theirs[KINET_MR_DESC_SIZE];
	CK(kinet_mr_export(s.mr, mine, sizeof(mine)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd2, mine, sizeof(mine), theirs, sizeof(theirs)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(theirs, sizeof(theirs), &s.peer));
	tw_qp_new(&s);
	CK0(kn_wait(s.d, tw_post_write(&s, TW_Q, TW_P, 500000, 0, 0)));
	CK(tw_sync(fd2, 1) == 1);
	uint8_t *c = malloc(TW_LEN);
	tu_fill_random(c, TW_LEN, 3);
	CK(memcmp(s.buf + TW_P + 600000, c + TW_Q, 400000) == 0);
	free(c);
	uint64_t t1 = tw_ms();
	tw_close(&s);
	TW_BOUNDED(t1, "kinet_close, later");
	CK(munmap(um, TW_SIL_LEN) == 0);
	return 0;
}

/* The requester: writes into the target's region until it is killed
 * (errors are expected once the target has dropped it). */
TW_FN int tw_silent_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	uint8_t d[KINET_MR_DESC_SIZE];
	struct kinet_mr_info um;
	CK(tw_xchg(fd, "", 0, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(d, sizeof(d), &um));
	CK(tw_sync(fd, (long long)getpid()) == 0);
	uint32_t lkey = kinet_mr_lkey(s.mr);
	uint64_t end = tw_ms() + 50000;
	for (int i = 0; tw_ms() < end; i++) { /* until killed (once failed, posts flush fast) */
		kn_ticket_t t;
		if (kn_put(s.d, um.addr + (uint64_t)(i % 8) * (1u << 20), um.rkey,
			   s.buf + (uint32_t)(i % 3) * (1u << 20), lkey, 1u << 20, &t))
			tw_sleep_ms(10);
	}
	return 1;
}

/* Another peer of the target, once the silent one is gone. */
TW_FN int tw_silent_c(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 3);
	CK0(kn_wait(s.d, tw_post_write(&s, TW_Q, TW_P + 600000, 400000, 0, 0)));
	CK(tw_sync(fd, 1) == 1);
	uint8_t *a = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	CK(memcmp(s.buf + TW_P, a + TW_Q, 500000) == 0);
	free(a);
	tw_close(&s);
	return 0;
}

#endif

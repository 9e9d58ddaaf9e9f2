/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which provider the wire takes for a peer (KINET_FI_SAME_HOST): with
 * KINET_FI_PROVIDER not set, two processes of this host connect over shm,
 * and every opcode lands byte for byte, again after a reset; a side with
 * KINET_FI_SAME_HOST=off, a side in another mount namespace (another "host"
 * for shm), two contexts of one process and a side with KINET_FI_PROVIDER
 * set all take the network provider, on both ends. The descriptor carries
 * the second address only where a same-host wire exists, and what
 * kinet_wire_info says matches what was taken.
 */
#define _GNU_SOURCE /* unshare */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <dirent.h>
#include "test_wire_common.h"

/* The wire as this side sees it after the connect: which provider carries
 * the QP. */
static void expect_path(struct tw_side *s, bool same_host)
{
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(s->ctx, &wi, sizeof(wi)));
	if ((wi.qps_same_host == 1) != same_host || (wi.qps_net == 1) == same_host)
		fprintf(stderr, "[pid %d] same host \"%s\" (%s): %llu QPs over it, %llu over %s\n",
			(int)getpid(), wi.same_host, wi.same_host_why,
			(unsigned long long)wi.qps_same_host, (unsigned long long)wi.qps_net,
			wi.provider);
	CK(wi.same_host_why[0] != 0);
	CK(wi.qps_same_host == (same_host ? 1u : 0u));
	CK(wi.qps_net == (same_host ? 0u : 1u));
	if (same_host)
		CK(!strcmp(wi.same_host, "shm"));
}

/* Length of this side's QP descriptor without a same-host part. */
static int plain_len(const void *d, int n)
{
	struct kinet_qp_info qi;
	if (kinet_qp_desc_parse(d, (size_t)n, &qi))
		return -1;
	return 64 + (int)qi.addr_len;
}

/* One side: over shm (want) or not; every opcode, then again on a fresh QP
 * (a reset one's new generation reaches the other wire's end too). */
static int side(int fd, uint64_t own, uint64_t peer, bool want)
{
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, own);
	expect_path(&s, want);
	tw_ops(&s, own, peer);
	CK0(kinet_qp_modify(s.qp, KINET_QPS_RESET, NULL));
	char mine[KINET_QP_DESC_MAX], theirs[KINET_QP_DESC_MAX];
	int n = kinet_qp_export(s.qp, mine, sizeof(mine));
	CK(n > 0);
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
	/* the second address is there exactly where this side has shm */
	CK((n > plain_len(mine, n)) == (wi.same_host[0] != 0));
	int m = tw_xchg(s.fd, mine, (uint32_t)n, theirs, sizeof(theirs));
	CK(m > 0);
	CK0(kinet_qp_connect_remote(s.qp, theirs, (size_t)m));
	CK0(kinet_qp_device(s.qp, &s.d));
	expect_path(&s, want);
	tu_fill_random(s.buf, s.len, own + 100);
	tw_ops(&s, own + 100, peer + 100);
	tw_close(&s);
	return 0;
}

static int auto_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	return side(fd, 1, 2, true);
}
static int auto_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	return side(fd, 2, 1, true);
}

static void run_two(tw_fn a, tw_fn b)
{
	tw_run_two(a, b, 90000);
}

static void setup(void)
{
	unsetenv("KINET_FI_PROVIDER");
	tw_need_wire();
	if (tw_have_shm() == 77)
		cr_skip_test("libfabric has no shm provider here");
}

Test(same_host, two_processes_take_shm)
{
	setup();
	run_two(auto_a, auto_b);
}

/* The side that turned it off has no same-host address in its descriptor;
 * the other side sees that and takes the network provider too. */
static int off_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "off", 1);
	return side(fd, 1, 2, false);
}
static int net_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	return side(fd, 2, 1, false);
}

Test(same_host, one_side_off_both_take_network)
{
	setup();
	run_two(off_a, net_b);
}

/* A side with KINET_FI_PROVIDER set: every peer over that provider (its
 * descriptor names only it), and the other side follows. */
static int prov_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_PROVIDER", "tcp;ofi_rxm", 1);
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
	CK(wi.same_host[0] == 0);
	CK(strstr(wi.same_host_why, "KINET_FI_PROVIDER") != NULL);
	expect_path(&s, false);
	tw_ops(&s, 1, 2);
	tw_close(&s);
	return 0;
}
static int net_b1(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	expect_path(&s, false);
	tw_ops(&s, 2, 1);
	tw_close(&s);
	return 0;
}

Test(same_host, provider_set_on_one_side_both_take_it)
{
	setup();
	run_two(prov_a, net_b1);
}

/* A side in a mount namespace of its own does not share /dev/shm as shm
 * needs: another host as far as the wire is concerned. */
static int ns_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	if (unshare(CLONE_NEWNS)) {
		fprintf(stderr, "unshare(CLONE_NEWNS): %s\n", strerror(errno));
		return 1;
	}
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	return side(fd, 1, 2, false);
}

Test(same_host, other_mount_namespace_takes_network)
{
	setup();
	if (geteuid() != 0)
		cr_skip_test("a mount namespace of its own needs root");
	run_two(ns_a, net_b);
}

/* Two contexts of one process: the network provider (shm joins processes),
 * each context over a thread of its own. */
static void *ctx_thread(void *arg)
{
	int *fdp = arg;
	struct tw_side s;
	uint64_t own = fdp[1], peer = 3 - fdp[1];
	tw_open(&s, fdp[0], TW_LEN, own);
	expect_path(&s, false);
	tw_ops(&s, own, peer);
	tw_close(&s);
	return NULL;
}

static int one_process(int fd, int fd2, void *arg)
{
	(void)fd;
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	int sv[2];
	CK0(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	int a[2] = {sv[0], 1}, b[2] = {sv[1], 2};
	pthread_t t1, t2;
	CK0(pthread_create(&t1, NULL, ctx_thread, a));
	CK0(pthread_create(&t2, NULL, ctx_thread, b));
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	return 0;
}

Test(same_host, contexts_of_one_process_take_network)
{
	setup();
	struct tw_proc p[1] = {{.fn = one_process}};
	tw_run(p, 1, NULL, 0, NULL, 90000);
	cr_assert(tw_exited_ok(&p[0]), "status 0x%x", p[0].status);
}

/* Descriptors: a same-host part that is malformed is refused (-EPROTO),
 * before anything connects; without it, the descriptor is a plain one. */
static int desc_side(int fd, int fd2, void *arg)
{
	(void)fd;
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp, *q2;
	CK0(kinet_open(&ca, &ctx));
	CK0(kinet_pd_alloc(ctx, &pd));
	CK0(kinet_qp_create(pd, NULL, &qp));
	CK0(kinet_qp_create(pd, NULL, &q2));
	uint8_t d[KINET_QP_DESC_MAX], bad[KINET_QP_DESC_MAX];
	int n = kinet_qp_export(qp, d, sizeof(d));
	CK(n > 0);
	int base = plain_len(d, n);
	CK(base > 0 && n > base + 28);
	struct kinet_qp_info qi;
	/* the part's length field one too many, then zero, then the part cut */
	memcpy(bad, d, (size_t)n);
	bad[base + 27]++;
	CK(kinet_qp_desc_parse(bad, (size_t)n, &qi) == -EPROTO);
	CK(kinet_qp_connect_remote(q2, bad, (size_t)n) == -EPROTO);
	memcpy(bad, d, (size_t)n);
	memset(bad + base + 24, 0, 4);
	CK(kinet_qp_desc_parse(bad, (size_t)n, &qi) == -EPROTO);
	memcpy(bad, d, (size_t)n);
	bad[6] = (uint8_t)((base + 10) >> 8);
	bad[7] = (uint8_t)(base + 10);
	CK(kinet_qp_desc_parse(bad, (size_t)n, &qi) == -EPROTO);
	/* without the part: a plain descriptor of the same QP */
	memcpy(bad, d, (size_t)base);
	bad[6] = (uint8_t)(base >> 8);
	bad[7] = (uint8_t)base;
	CK0(kinet_qp_desc_parse(bad, (size_t)base, &qi));
	CK(qi.addr_len == (uint32_t)(base - 64));
	CK0(kinet_qp_destroy(qp));
	CK0(kinet_qp_destroy(q2));
	CK0(kinet_pd_free(pd));
	CK0(kinet_close(ctx));
	return 0;
}

Test(same_host, malformed_same_host_part_refused)
{
	setup();
	struct tw_proc p[1] = {{.fn = desc_side}};
	tw_run(p, 1, NULL, 0, NULL, 30000);
	cr_assert(tw_exited_ok(&p[0]), "status 0x%x", p[0].status);
}

/* A long-lived context and short-lived peer processes of this host, one
 * after the other: shm's address vector frees no address, so after
 * KINET_FI_SAME_HOST_PEERS of them the context's new QPs take the network
 * provider (both ends alike), and every peer still reads the server's
 * random bytes exactly. */
#define SEQ_PEERS 6
#define SEQ_MAX "3"

static void seq_client(int fd, int i, const struct kinet_mr_info *srv_mr)
{
	struct tw_side s;
	memset(&s, 0, sizeof(s));
	s.fd = fd;
	s.len = 1 << 16;
	s.rnr_retry = 7;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	CK0(kinet_open(&ca, &s.ctx));
	CK0(kinet_pd_alloc(s.ctx, &s.pd));
	CK0(posix_memalign((void **)&s.buf, 4096, s.len));
	memset(s.buf, 0, s.len);
	CK0(kinet_mr_reg(s.pd, s.buf, s.len, KINET_ACCESS_ALL, &s.mr));
	s.peer = *srv_mr;
	tw_qp_new(&s);
	kn_ticket_t t;
	CK0(kn_get(s.d, s.buf, kinet_mr_lkey(s.mr), s.peer.addr, s.peer.rkey, 4096, &t));
	CK0(kn_quiet(s.d));
	uint8_t *want = malloc(1 << 16);
	CK(want != NULL);
	tu_fill_random(want, 1 << 16, 1);
	CK(memcmp(s.buf, want, 4096) == 0);
	free(want);
	expect_path(&s, i < 3);
	CK(tw_sync(fd, 7) == 7);
	tw_close(&s);
}

/* What the server and its clients share: a socket pair (server end sv[0],
 * clients' sv[1]), the server's "ready" pipe, and the server's region
 * descriptor, handed to each client by the parent (returned). */
static struct kinet_mr_info *seq_links(int sv[2], int ready[2])
{
	CK0(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	CK0(pipe(ready));
	struct kinet_mr_info *mr = mmap(NULL, sizeof(*mr), PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CK(mr != MAP_FAILED);
	return mr;
}

/* The server of the clients below: a context with a 64 KiB region of random
 * bytes (seed 1), its descriptor in *mr (shared with the parent), then
 * "ready" on ready_w. */
static void seq_server_open(struct tw_side *s, int fd, struct kinet_mr_info *mr, int ready_w)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->len = 1 << 16;
	s->rnr_retry = 7;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	CK0(kinet_open(&ca, &s->ctx));
	CK0(kinet_pd_alloc(s->ctx, &s->pd));
	CK0(posix_memalign((void **)&s->buf, 4096, s->len));
	tu_fill_random(s->buf, s->len, 1);
	CK0(kinet_mr_reg(s->pd, s->buf, s->len, KINET_ACCESS_ALL, &s->mr));
	uint8_t d[KINET_MR_DESC_SIZE];
	CK(kinet_mr_export(s->mr, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(d, sizeof(d), mr));
	CK(write(ready_w, "r", 1) == 1);
}

/* Client i (pid p) has ended: true when it did well; otherwise the server
 * srv is killed. */
static bool client_done(pid_t p, int i, pid_t srv)
{
	int st = 0;
	CK(waitpid(p, &st, 0) == p);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return true;
	fprintf(stderr, "client %d (pid %d): status 0x%x\n", i, (int)p, st);
	kill(srv, SIGKILL);
	waitpid(srv, &st, 0);
	return false;
}

/* The server srv, once its clients are done: 0 when it did well. */
static int server_done(pid_t srv)
{
	int st = 0;
	CK(waitpid(srv, &st, 0) == srv);
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return 0;
}

static int seq_run(int fd, int fd2, void *arg)
{
	(void)fd;
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	setenv("KINET_FI_SAME_HOST_PEERS", SEQ_MAX, 1);
	int sv[2], ready[2];
	struct kinet_mr_info *mr = seq_links(sv, ready);
	pid_t srv = fork();
	if (srv == 0) {
		close(sv[1]);
		struct tw_side s;
		seq_server_open(&s, sv[0], mr, ready[1]);
		for (int i = 0; i < SEQ_PEERS; i++) {
			tw_qp_new(&s); /* connected to client i */
			expect_path(&s, i < 3);
			CK(tw_sync(s.fd, 7) == 7);
		}
		struct kinet_wire_info wi;
		CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
		CK(strstr(wi.same_host_why, "KINET_FI_SAME_HOST_PEERS") != NULL);
		tw_close(&s);
		_exit(0);
	}
	close(sv[0]);
	char c;
	CK(read(ready[0], &c, 1) == 1);
	for (int i = 0; i < SEQ_PEERS; i++) {
		pid_t p = fork();
		if (p == 0) {
			seq_client(sv[1], i, mr);
			_exit(0);
		}
		if (!client_done(p, i, srv))
			return 1;
	}
	return server_done(srv);
}

Test(same_host, peers_beyond_the_address_vector_take_network)
{
	setup();
	struct tw_proc p[1] = {{.fn = seq_run}};
	tw_run(p, 1, NULL, 0, NULL, 90000);
	cr_assert(tw_exited_ok(&p[0]), "status 0x%x", p[0].status);
}

/* A later process with a peer's pid: libfabric's shm names an endpoint
 * after its process's pid by default ("fi_shm://<pid>:<uid>:<n>") and its
 * address vector keeps one mapping per name, so a server that had a client
 * over shm met the next process with that pid (and the same endpoint
 * counter) through the first one's region, which was gone, and its QPs
 * timed out. The wire's own names are unique to the process. The second
 * client is forked with the first one's pid (/proc/sys/kernel/ns_last_pid),
 * the server connects to it late, and it must read the server's bytes
 * exactly, over shm, as the first did. */

/* Forks a child with pid want (0 in the child); -1 when no fork got it,
 * -2 when the next pid cannot be set here. */
static pid_t fork_as(pid_t want)
{
	for (int tries = 0; tries < 40; tries++) {
		int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -2;
		char b[24];
		int n = snprintf(b, sizeof(b), "%d", (int)want - 1);
		bool ok = write(fd, b, (size_t)n) == n;
		close(fd);
		if (!ok)
			return -2;
		int go[2];
		if (pipe(go))
			return -1;
		fflush(NULL);
		pid_t p = fork();
		if (p == 0) {
			char c = 0;
			close(go[1]);
			if (read(go[0], &c, 1) != 1 || c != 'g')
				_exit(0);
			close(go[0]);
			return 0;
		}
		close(go[0]);
		bool mine = p == want;
		ok = p > 0 && write(go[1], mine ? "g" : "n", 1) == 1;
		close(go[1]);
		if (p > 0 && mine && ok)
			return p;
		if (p > 0)
			waitpid(p, NULL, 0);
	}
	return -1;
}

static int reuse_body(void)
{
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	int sv[2], ready[2];
	struct kinet_mr_info *mr = seq_links(sv, ready);
	fflush(NULL);
	pid_t srv = fork();
	if (srv == 0) {
		close(sv[1]);
		struct tw_side s;
		seq_server_open(&s, sv[0], mr, ready[1]);
		for (int i = 0; i < 2; i++) {
			/* tw_qp_new, with the second connect 300 ms late: that
			 * client's first request, and libfabric's announcement of
			 * its endpoint, reach ours before it */
			char theirs[KINET_QP_DESC_MAX];
			int m = tw_qp_fresh(&s, theirs);
			if (i == 1)
				tw_sleep_ms(300);
			CK0(kinet_qp_connect_remote(s.qp, theirs, (size_t)m));
			CK0(kinet_qp_device(s.qp, &s.d));
			expect_path(&s, true);
			CK(tw_sync(s.fd, 7) == 7);
		}
		tw_close(&s);
		_exit(0);
	}
	close(sv[0]);
	close(ready[1]); /* a server that fails first ends the read */
	char c;
	CK(read(ready[0], &c, 1) == 1);
	pid_t first = 0;
	for (int i = 0; i < 2; i++) {
		pid_t p = i == 0 ? fork() : fork_as(first);
		if (p == 0) {
			seq_client(sv[1], 0, mr);
			_exit(0);
		}
		if (p < 0) {
			fprintf(stderr, "no child with pid %d: %s\n", (int)first,
				p == -2 ? "ns_last_pid cannot be set here" : "no fork got it");
			kill(srv, SIGKILL);
			waitpid(srv, NULL, 0);
			return 77;
		}
		first = p;
		if (!client_done(p, i, srv))
			return 1;
	}
	return server_done(srv);
}

/* In a PID namespace of its own: ns_last_pid is that namespace's, no other
 * process takes the pid, and whatever is left ends with it. */
static int reuse_run(int fd, int fd2, void *arg)
{
	(void)fd;
	(void)fd2;
	(void)arg;
	if (unshare(CLONE_NEWPID)) {
		fprintf(stderr, "no PID namespace of its own: %s\n", strerror(errno));
		return 77;
	}
	fflush(NULL);
	pid_t init = fork();
	if (init == 0)
		_exit(reuse_body());
	int st = 0;
	if (init < 0 || waitpid(init, &st, 0) != init)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* fn in one process, as root (skipped otherwise: root_why), skipped where
 * it returns 77 (skip_why). */
static void run_as_root(tw_fn fn, unsigned deadline_ms, const char *root_why,
			const char *skip_why)
{
	setup();
	if (geteuid() != 0)
		cr_skip_test("%s", root_why);
	struct tw_proc p[1] = {{.fn = fn}};
	tw_run(p, 1, NULL, 0, NULL, deadline_ms);
	if (WIFEXITED(p[0].status) && WEXITSTATUS(p[0].status) == 77)
		cr_skip_test("%s", skip_why);
	cr_assert(tw_exited_ok(&p[0]), "status 0x%x", p[0].status);
}

Test(same_host, a_later_process_with_a_peers_pid_is_reached)
{
	run_as_root(reuse_run, 90000, "choosing a child's pid needs root",
		    "no PID namespace of its own, or no child could be given the first one's "
		    "pid");
}

/* Requests that reach a peer before it has connected wait there for its
 * connect: side a connects at once and posts a rendezvous write, an inline
 * write and a read; side b connects 800 ms later (within the timeout). The
 * requests arrive at b's end on the shm wire, which its connect keeps, and
 * every byte lands. */
#define EA_WR (64u << 10)
static int early_side(int fd, uint64_t own, bool late)
{
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, own);
	expect_path(&s, true);
	CK(tw_sync(fd, 4) == 4);
	CK0(kinet_qp_modify(s.qp, KINET_QPS_RESET, NULL));
	char theirs[KINET_QP_DESC_MAX];
	int m = tw_qp_xchg(s.qp, fd, theirs);
	if (late)
		tw_sleep_ms(800);
	CK0(kinet_qp_connect_remote(s.qp, theirs, (size_t)m));
	CK0(kinet_qp_device(s.qp, &s.d));
	expect_path(&s, true);
	uint8_t *model = malloc(TW_LEN);
	CK(model != NULL);
	if (!late) {
		kn_ticket_t t;
		tw_post_write(&s, 0, 1u << 20, EA_WR, 0, 0);
		CK0(kn_put_inline(s.d, s.peer.addr + (1u << 20) + EA_WR, s.peer.rkey, s.buf + EA_WR,
				  KN_MAX_INLINE_WRITE, &t));
		CK0(kn_get(s.d, s.buf + (3u << 20), kinet_mr_lkey(s.mr), s.peer.addr + (2u << 20),
			   s.peer.rkey, 4096, &t));
		CK0(kn_quiet(s.d));
		tu_fill_random(model, TW_LEN, 2);
		CK(memcmp(s.buf + (3u << 20), model + (2u << 20), 4096) == 0);
	}
	CK(tw_sync(fd, 5) == 5);
	if (late) {
		tu_fill_random(model, TW_LEN, 1);
		CK(memcmp(s.buf + (1u << 20), model, EA_WR + KN_MAX_INLINE_WRITE) == 0);
	}
	free(model);
	tw_close(&s);
	return 0;
}
static int early_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return early_side(fd, 1, false);
}
static int early_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return early_side(fd, 2, true);
}

Test(same_host, requests_before_the_peer_connects_wait_for_it)
{
	setup();
	run_two(early_a, early_b);
}

/* Connect before export: side a exports its fresh QP's descriptor; side b
 * connects to it before it exports its own, then exports, and a connects to
 * that. b cannot read a descriptor of its own at its connect, so it names
 * its same-host end then, as its export would: both take shm (before, b took
 * the network provider, a shm, and every request failed after the network
 * timeout). Every opcode lands byte for byte, both ways. */
static int cbe_side(int fd, uint64_t own, uint64_t peer, bool first)
{
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, own);
	tw_qp_replace(&s); /* a fresh QP, not exported yet */
	char mine[KINET_QP_DESC_MAX], theirs[KINET_QP_DESC_MAX];
	uint32_t n, m;
	if (first) {
		int k = kinet_qp_export(s.qp, mine, sizeof(mine));
		CK(k > 0);
		n = (uint32_t)k;
		CK0(tw_io(fd, &n, 4, 1));
		CK0(tw_io(fd, mine, n, 1));
		CK0(tw_io(fd, &m, 4, 0));
		CK(m <= sizeof(theirs));
		CK0(tw_io(fd, theirs, m, 0));
		CK0(kinet_qp_connect_remote(s.qp, theirs, m));
	} else {
		CK0(tw_io(fd, &m, 4, 0));
		CK(m <= sizeof(theirs));
		CK0(tw_io(fd, theirs, m, 0));
		CK0(kinet_qp_connect_remote(s.qp, theirs, m)); /* before its export */
		int k = kinet_qp_export(s.qp, mine, sizeof(mine));
		CK(k > 0);
		n = (uint32_t)k;
		CK0(tw_io(fd, &n, 4, 1));
		CK0(tw_io(fd, mine, n, 1));
	}
	CK0(kinet_qp_device(s.qp, &s.d));
	expect_path(&s, true);
	tw_ops(&s, own, peer);
	tw_close(&s);
	return 0;
}
static int cbe_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return cbe_side(fd, 1, 2, true);
}
static int cbe_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return cbe_side(fd, 2, 1, false);
}

Test(same_host, connect_before_export_both_take_shm)
{
	setup();
	run_two(cbe_a, cbe_b);
}

/* A /dev/shm too small for shm's region (a container's, say): the shm
 * endpoint cannot be made, the context says why (with the room left) and
 * its descriptors name the network wire only. In a mount namespace of its
 * own, with an 8 MiB tmpfs over /dev/shm. */
static int small_shm(int fd, int fd2, void *arg)
{
	(void)fd;
	(void)fd2;
	(void)arg;
	if (unshare(CLONE_NEWNS) || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=8m")) {
		fprintf(stderr, "a small /dev/shm: %s\n", strerror(errno));
		return 77;
	}
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp;
	CK0(kinet_open(&ca, &ctx));
	CK0(kinet_pd_alloc(ctx, &pd));
	CK0(kinet_qp_create(pd, NULL, &qp));
	uint8_t d[KINET_QP_DESC_MAX];
	int n = kinet_qp_export(qp, d, sizeof(d));
	CK(n > 0 && n == plain_len(d, n));
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(ctx, &wi, sizeof(wi)));
	if (wi.same_host[0] || !strstr(wi.same_host_why, "/dev/shm has"))
		fprintf(stderr, "same host \"%s\": %s\n", wi.same_host, wi.same_host_why);
	CK(wi.same_host[0] == 0);
	CK(strstr(wi.same_host_why, "shm could not be opened") != NULL);
	CK(strstr(wi.same_host_why, "MiB free") != NULL); /* 8 MiB at most */
	CK0(kinet_qp_destroy(qp));
	CK0(kinet_pd_free(pd));
	CK0(kinet_close(ctx));
	return 0;
}

Test(same_host, small_dev_shm_is_reported)
{
	run_as_root(small_shm, 30000, "a tmpfs of its own needs root",
		    "no mount namespace with a tmpfs here");
}

/* Regions in /dev/shm named after process pid (the wire names its shm
 * endpoints "<pid>.<PID namespace>.<node>:<uid>:<n>"). */
static void region_prefix(pid_t pid, char *pre, size_t cap)
{
	snprintf(pre, cap, "%d.%llx.", (int)pid, tw_pid_ns());
}

static int regions_of(pid_t pid)
{
	char pre[48];
	region_prefix(pid, pre, sizeof(pre));
	DIR *d = opendir("/dev/shm");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, pre, strlen(pre));
	closedir(d);
	return n;
}

/* In a forked child: a context whose QP's export made its shm end (and so
 * the endpoint's region), descriptor in d. Its length, or <= 0. */
static int open_shm_end(kinet_ctx **ctx, kinet_pd **pd, kinet_qp **qp,
			uint8_t d[KINET_QP_DESC_MAX])
{
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	unsetenv("KINET_FI_PROVIDER");
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	if (kinet_open(&ca, ctx) || kinet_pd_alloc(*ctx, pd) || kinet_qp_create(*pd, NULL, qp))
		return -1;
	return kinet_qp_export(*qp, d, KINET_QP_DESC_MAX);
}

/* A process that ends with exit() and never closes its context leaves no
 * shm region in /dev/shm (libfabric removes one only when its endpoint is
 * closed, or on SIGINT and SIGTERM). */
Test(same_host, exit_without_close_leaves_no_region)
{
	setup();
	int go[2], done[2];
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(done), 0);
	fflush(NULL);
	pid_t p = fork();
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* not left behind by a failed assertion */
		kinet_ctx *ctx;
		kinet_pd *pd;
		kinet_qp *qp;
		uint8_t d[KINET_QP_DESC_MAX];
		close(done[0]);
		close(go[1]); /* a parent that ends ends the read below */
		if (open_shm_end(&ctx, &pd, &qp, d) <= 0)
			_exit(2);
		char c = 'r';
		if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(3);
		exit(0); /* the context stays open */
	}
	/* a child that fails ends the read (its end of the pipe closes) */
	close(done[1]);
	close(go[0]);
	char c;
	if (!tw_read_byte(done[0], &c, TW_IO_MS)) {
		int st = 0;
		if (tw_wait_pid(p, 1000, &st))
			cr_assert_fail("the child did not open its context in %d s (killed)",
				       TW_IO_MS / 1000);
		cr_assert_fail("the child ended before it opened its context: status 0x%x", st);
	}
	cr_assert_eq(regions_of(p), 1, "the child's shm endpoint has no region");
	cr_assert_eq(write(go[1], "g", 1), 1);
	int st = 0;
	cr_assert_eq(tw_wait_pid(p, TW_IO_MS, &st), 0, "the child did not end in %d s",
		     TW_IO_MS / 1000);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	cr_assert_eq(regions_of(p), 0, "the child's region is left in /dev/shm");
}

/* ... and a region of a closed endpoint's name that is not ours (made by
 * someone else after the close: another copy of libfabric in the process,
 * say) is left alone at exit. */
Test(same_host, exit_leaves_a_closed_endpoints_name_alone)
{
	setup();
	fflush(NULL);
	pid_t p = fork();
	if (p == 0) {
		kinet_ctx *ctx;
		kinet_pd *pd;
		kinet_qp *qp;
		uint8_t d[KINET_QP_DESC_MAX];
		int n = open_shm_end(&ctx, &pd, &qp, d);
		if (n <= 0)
			_exit(2);
		/* the endpoint's region, from the same-host address */
		int base = plain_len(d, n);
		char path[300];
		if (n <= base + 28 || strncmp((char *)d + base + 28, "fi_shm://", 9))
			_exit(3);
		snprintf(path, sizeof(path), "/dev/shm/%s", (char *)d + base + 28 + 9);
		if (kinet_qp_destroy(qp) || kinet_pd_free(pd) || kinet_close(ctx))
			_exit(4);
		if (access(path, F_OK) == 0)
			_exit(5); /* closed: libfabric removed it */
		/* someone else's region of that name, mapped here */
		int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd < 0 || ftruncate(fd, 4096))
			_exit(6);
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			_exit(7);
		exit(0);
	}
	int st = 0;
	cr_assert_eq(tw_wait_pid(p, TW_IO_MS, &st), 0, "the child did not end in %d s",
		     TW_IO_MS / 1000);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	int left = regions_of(p);
	char pre[48], path[300];
	region_prefix(p, pre, sizeof(pre));
	DIR *dd = opendir("/dev/shm");
	struct dirent *e;
	while (dd && (e = readdir(dd)))
		if (!strncmp(e->d_name, pre, strlen(pre))) {
			snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
			unlink(path);
		}
	if (dd)
		closedir(dd);
	cr_assert_eq(left, 1, "the other owner's region was removed at exit");
}

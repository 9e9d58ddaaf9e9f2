/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bootstrap (kinet/boot.h) between processes: allgather and barrier
 * with 2 and 4 processes on loopback, the job secret, timeouts, malformed
 * input, two network namespaces joined by a veth pair, and mpirun.
 *
 * Each rank runs in a forked child and reports its result in shared memory;
 * rank 0 hands its port-0 address to the parent through a pipe.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <kinet/boot.h>
#include <kinet/kinet.h>
#include "boot/boot_int.h"
#include "../util/testutil.h"

#define MAXR 8
#define NOT_DONE 0x7fff0000 /* result of a rank that did not report */
#define BAD_DATA 0x7fff0001 /* gathered bytes differ from what was sent */
#define WAIT_MS 20000       /* bound on waiting for the children */

/* ---- running ranks in children --------------------------------------------- */

struct shared {
	int result[MAXR]; /* per rank (or per child slot) */
	char addr[300];
};
static struct shared *sh;
static pid_t kids[16];
static int nkids;
static int addr_pipe[2] = {-1, -1};
static int gate_pipe[2] = {-1, -1}; /* a rank may wait on it before a collective */

struct rank_spec {
	int rank, size;
	const char *secret;
	int timeout_ms;
	int rounds;
	size_t len;         /* payload per round (0: a few sizes) */
	int slot;           /* where to report (default: rank) */
	const char *netns;  /* enter this network namespace first */
	const char *addr;   /* NULL: the address rank 0 reported */
	bool wait_gate;     /* wait for a byte on gate_pipe before the first allgather */
	const char *listen; /* rank 0's listen address (default 127.0.0.1:0) */
};

static void setup(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(sh != MAP_FAILED);
	for (int i = 0; i < MAXR; i++)
		sh->result[i] = NOT_DONE;
	cr_assert_eq(pipe(addr_pipe), 0);
	cr_assert_eq(pipe(gate_pipe), 0);
	nkids = 0;
}

static void kill_kids(void)
{
	for (int i = 0; i < nkids; i++) {
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
			kids[i] = 0;
		}
	}
	nkids = 0;
}

static void teardown(void)
{
	kill_kids();
	for (int i = 0; i < 2; i++) {
		if (addr_pipe[i] >= 0)
			close(addr_pipe[i]);
		if (gate_pipe[i] >= 0)
			close(gate_pipe[i]);
		addr_pipe[i] = gate_pipe[i] = -1;
	}
	if (sh && sh != MAP_FAILED)
		munmap(sh, sizeof(*sh));
	sh = NULL;
}

static void on_listening(const char *addr, void *arg)
{
	(void)arg;
	snprintf(sh->addr, sizeof(sh->addr), "%s", addr);
	if (write(addr_pipe[1], "A", 1) != 1)
		_exit(3);
}

static uint64_t seed_of(int rank, int round)
{
	return 0xb0075eedull ^ ((uint64_t)rank << 32) ^ (uint64_t)round * 7919;
}

static int enter_netns(const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = setns(fd, CLONE_NEWNET) ? -errno : 0;
	close(fd);
	return rc;
}

/* Body of a rank: join, allgather random payloads and verify them, barrier. */
static int rank_main(const struct rank_spec *s)
{
	static const size_t sizes[] = {8, 0, 1, 333, 65536, 1 << 20};
	const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
	if (s->netns && enter_netns(s->netns))
		return -EPERM;
	struct kinet_boot_attr a = {
		.rank = s->rank,
		.size = s->size,
		.addr = s->rank == 0 ? (s->listen ? s->listen : "127.0.0.1:0")
				     : (s->addr ? s->addr : sh->addr),
		.secret = s->secret ? s->secret : "test-secret",
		.timeout_ms = s->timeout_ms ? s->timeout_ms : 10000,
		.listening = on_listening,
	};
	kinet_boot *b;
	int rc = kinet_boot_init(&a, &b);
	if (rc)
		return rc;
	if (kinet_boot_rank(b) != s->rank || kinet_boot_size(b) != s->size ||
	    strcmp(kinet_boot_transport(b), "tcp")) {
		kinet_boot_close(b);
		return -EINVAL;
	}
	if (s->wait_gate) {
		char c;
		if (read(gate_pipe[0], &c, 1) != 1) {
			kinet_boot_close(b);
			return -EIO;
		}
	}
	int rounds = s->rounds ? s->rounds : nsizes;
	for (int round = 0; round < rounds && !rc; round++) {
		size_t len = s->len ? s->len : sizes[round % nsizes];
		uint8_t *mine = malloc(len), *all = malloc(len * (size_t)s->size), *want = malloc(len);
		tu_fill_random(mine, len, seed_of(s->rank, round));
		tu_fill_random(all, len * (size_t)s->size, 99); /* not zeros */
		rc = kinet_boot_allgather(b, mine, all, len);
		for (int r = 0; r < s->size && !rc; r++) {
			tu_fill_random(want, len, seed_of(r, round));
			if (memcmp(all + (size_t)r * len, want, len))
				rc = BAD_DATA;
		}
		free(mine);
		free(all);
		free(want);
		if (!rc)
			rc = kinet_boot_barrier(b);
	}
	kinet_boot_close(b);
	return rc;
}

static pid_t spawn(const struct rank_spec *s)
{
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int rc = rank_main(s);
		sh->result[s->slot ? s->slot : s->rank] = rc;
		_exit(0);
	}
	kids[nkids++] = pid;
	return pid;
}

/* Waits for rank 0's address (it listens on port 0). */
static void wait_addr(void)
{
	struct pollfd p = {.fd = addr_pipe[0], .events = POLLIN};
	cr_assert_eq(poll(&p, 1, WAIT_MS), 1, "rank 0 did not start listening");
	char c;
	cr_assert_eq(read(addr_pipe[0], &c, 1), 1);
	cr_assert(strlen(sh->addr) > 0);
}

/* Waits for one child (bounded); true when it exited. */
static bool wait_one(pid_t pid)
{
	for (int waited = 0; waited < WAIT_MS; waited += 5) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid) {
			for (int i = 0; i < nkids; i++)
				if (kids[i] == pid)
					kids[i] = 0;
			return WIFEXITED(st);
		}
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
	return false;
}

static void wait_all(void)
{
	for (int i = 0; i < nkids; i++)
		if (kids[i] > 0)
			cr_assert(wait_one(kids[i]), "a rank did not finish");
}

static void run_job(int size, size_t len)
{
	struct rank_spec s = {.rank = 0, .size = size, .len = len};
	spawn(&s);
	wait_addr();
	for (int r = 1; r < size; r++) {
		s.rank = r;
		spawn(&s);
	}
	wait_all();
	for (int r = 0; r < size; r++)
		cr_expect_eq(sh->result[r], 0, "rank %d: %d (%s)", r, sh->result[r],
			     kinet_strerror(sh->result[r]));
}

TestSuite(boot, .init = setup, .fini = teardown, .timeout = 60);

/* ---- the keyed MAC ---------------------------------------------------------- */

Test(boot, siphash_published_vector)
{
	/* the example of the SipHash paper: key 00..0f, message 00..0e */
	uint8_t key[16], msg[15];
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 15; i++)
		msg[i] = (uint8_t)i;
	cr_assert_eq(kboot_siphash24(key, msg, sizeof(msg)), 0xa129ca6149be45e5ull);
}

Test(boot, mac_depends_on_secret_and_message)
{
	uint8_t k1[16], k2[16], k3[16], t1[16], t2[16], t3[16], t4[16], msg[43];
	tu_fill_random(msg, sizeof(msg), 7);
	kboot_mac_key("secret", k1);
	kboot_mac_key("secret", k2);
	kboot_mac_key("secreT", k3);
	cr_assert(kboot_tag_equal(k1, k2, 16));
	cr_assert(!kboot_tag_equal(k1, k3, 16));
	kboot_mac(k1, msg, sizeof(msg), t1);
	kboot_mac(k3, msg, sizeof(msg), t2);
	cr_assert(!kboot_tag_equal(t1, t2, 16));
	msg[20] ^= 1;
	kboot_mac(k1, msg, sizeof(msg), t3);
	cr_assert(!kboot_tag_equal(t1, t3, 16));
	msg[20] ^= 1;
	kboot_mac(k1, msg, sizeof(msg), t4);
	cr_assert(kboot_tag_equal(t1, t4, 16));
}

/* ---- jobs on loopback --------------------------------------------------------- */

Test(boot, allgather_barrier_2)
{
	run_job(2, 0);
}

Test(boot, allgather_barrier_4)
{
	run_job(4, 0);
}

Test(boot, allgather_odd_length_4)
{
	run_job(4, 7);
}

Test(boot, single_process_needs_no_network)
{
	struct kinet_boot_attr a = {.rank = 0, .size = 1};
	kinet_boot *b;
	cr_assert_eq(kinet_boot_init(&a, &b), 0);
	cr_assert_str_eq(kinet_boot_transport(b), "single");
	uint8_t mine[100], all[100];
	tu_fill_random(mine, sizeof(mine), 3);
	cr_assert_eq(kinet_boot_allgather(b, mine, all, sizeof(mine)), 0);
	cr_assert_eq(memcmp(mine, all, sizeof(mine)), 0);
	cr_assert_eq(kinet_boot_barrier(b), 0);
	kinet_boot_close(b);
}

Test(boot, bad_arguments)
{
	kinet_boot *b = NULL;
	struct kinet_boot_attr a = {.rank = 2, .size = 2, .addr = "127.0.0.1:1"};
	cr_assert_eq(kinet_boot_init(&a, &b), -EINVAL);
	a.rank = -1;
	cr_assert_eq(kinet_boot_init(&a, &b), -EINVAL);
	a.rank = 0;
	a.size = 0;
	cr_assert_eq(kinet_boot_init(&a, &b), -EINVAL);
	a.size = 2;
	a.timeout_ms = -5;
	cr_assert_eq(kinet_boot_init(&a, &b), -EINVAL);
	a.timeout_ms = 500;
	static const char *bad[] = {"nocolon", "127.0.0.1:", "127.0.0.1:70000", "1.2.3.4:12x",
				    "::1:5", "[::1]5", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a.addr = bad[i];
		cr_assert_eq(kinet_boot_init(&a, &b), -EINVAL, "address \"%s\"", bad[i]);
	}
	a.rank = 1;
	a.addr = "127.0.0.1:0"; /* a client needs the real port */
	cr_assert_eq(kinet_boot_init(&a, &b), -EINVAL);
	cr_assert(b == NULL);
	cr_assert_eq(kinet_boot_init(NULL, &b), -EINVAL);
	cr_assert_eq(kinet_boot_allgather(NULL, NULL, NULL, 0), -EINVAL);
	cr_assert_eq(kinet_boot_close(NULL), 0);
}

/* ---- the job secret ---------------------------------------------------------- */

Test(boot, wrong_secret_refused_real_ranks_complete)
{
	struct rank_spec s0 = {.rank = 0, .size = 3, .secret = "right"};
	spawn(&s0);
	wait_addr();
	/* two strays, one after the other, while rank 0 waits for the job */
	struct rank_spec stray = {.rank = 1, .size = 3, .secret = "wrong", .slot = 5};
	cr_assert(wait_one(spawn(&stray)));
	cr_assert_eq(sh->result[5], -KINET_ESECRET, "stray: %d", sh->result[5]);
	struct rank_spec stray2 = {.rank = 2, .size = 3, .secret = "", .slot = 6};
	cr_assert(wait_one(spawn(&stray2)));
	cr_assert_eq(sh->result[6], -KINET_ESECRET, "stray: %d", sh->result[6]);
	struct rank_spec s = {.rank = 1, .size = 3, .secret = "right"};
	spawn(&s);
	s.rank = 2;
	spawn(&s);
	wait_all();
	for (int r = 0; r < 3; r++)
		cr_expect_eq(sh->result[r], 0, "rank %d: %s", r, kinet_strerror(sh->result[r]));
}

/* ---- timeouts ------------------------------------------------------------------ */

Test(boot, timeout_when_a_rank_never_comes)
{
	struct kinet_boot_attr a = {.rank = 0, .size = 2, .addr = "127.0.0.1:0",
				    .secret = "s", .timeout_ms = 500};
	kinet_boot *b = NULL;
	cr_assert_eq(kinet_boot_init(&a, &b), -ETIMEDOUT);
	cr_assert(b == NULL);
}

Test(boot, joined_rank_told_when_another_never_comes)
{
	struct rank_spec s0 = {.rank = 0, .size = 3, .timeout_ms = 500};
	spawn(&s0);
	wait_addr();
	struct rank_spec s1 = {.rank = 1, .size = 3, .timeout_ms = 5000};
	spawn(&s1);
	wait_all();
	cr_assert_eq(sh->result[0], -ETIMEDOUT);
	cr_assert_eq(sh->result[1], -ETIMEDOUT); /* told by rank 0, not its own bound */
}

Test(boot, client_timeout_nobody_listening)
{
	/* a bound socket that does not listen: connections are refused */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
	struct kinet_boot_attr a = {.rank = 1, .size = 2, .addr = addr, .timeout_ms = 500};
	kinet_boot *b = NULL;
	cr_assert_eq(kinet_boot_init(&a, &b), -ETIMEDOUT);
	close(fd);
}

/* A listening socket that accepts nothing and says nothing. */
static int silent_server(char *addr, size_t n)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 8), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(addr, n, "127.0.0.1:%d", ntohs(sa.sin_port));
	return fd;
}

Test(boot, client_timeout_silent_server)
{
	char addr[64];
	int fd = silent_server(addr, sizeof(addr));
	struct kinet_boot_attr a = {.rank = 1, .size = 2, .addr = addr, .timeout_ms = 500};
	kinet_boot *b = NULL;
	cr_assert_eq(kinet_boot_init(&a, &b), -ETIMEDOUT);
	close(fd);
}

Test(boot, allgather_timeout_when_a_rank_stalls)
{
	/* rank 1 joins, then waits on the gate: rank 0's allgather times out,
	 * rank 0 tells rank 1, whose allgather then fails too */
	struct kinet_boot_attr a = {.rank = 0, .size = 2, .addr = "127.0.0.1:0",
				    .secret = "test-secret", .timeout_ms = 500,
				    .listening = on_listening};
	fflush(NULL);
	pid_t p0 = fork();
	cr_assert(p0 >= 0);
	if (p0 == 0) {
		kinet_boot *b;
		int rc = kinet_boot_init(&a, &b);
		if (!rc) {
			uint8_t x[16], all[32];
			tu_fill_random(x, sizeof(x), 1);
			rc = kinet_boot_allgather(b, x, all, sizeof(x));
			/* broken after a failure: the same error again, at once */
			int again = kinet_boot_barrier(b);
			if (again != rc)
				rc = -EILSEQ;
			kinet_boot_close(b);
		}
		sh->result[0] = rc;
		_exit(0);
	}
	kids[nkids++] = p0;
	wait_addr();
	struct rank_spec s1 = {.rank = 1, .size = 2, .wait_gate = true, .timeout_ms = 5000};
	spawn(&s1);
	cr_assert(wait_one(p0));
	cr_assert_eq(sh->result[0], -ETIMEDOUT, "rank 0: %s", kinet_strerror(sh->result[0]));
	cr_assert_eq(write(gate_pipe[1], "G", 1), 1);
	wait_all();
	cr_assert_eq(sh->result[1], -ETIMEDOUT, "rank 1: %s", kinet_strerror(sh->result[1]));
}

Test(boot, length_mismatch_fails_on_every_rank)
{
	struct rank_spec s = {.rank = 0, .size = 2, .len = 8, .rounds = 1};
	spawn(&s);
	wait_addr();
	s.rank = 1;
	s.len = 16;
	spawn(&s);
	wait_all();
	cr_assert_eq(sh->result[0], -EPROTO);
	cr_assert_eq(sh->result[1], -EPROTO);
}

/* ---- malformed input ------------------------------------------------------------ */

static int connect_to(const char *addr)
{
	char host[64];
	int port;
	cr_assert_eq(sscanf(addr, "%63[^:]:%d", host, &port), 2);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, host, &sa.sin_addr);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Reads one message; returns its type, the payload in buf (up to n). */
static int read_msg(int fd, uint8_t *buf, size_t n, uint32_t *len, uint16_t *ver)
{
	uint8_t h[KBOOT_HDR_LEN];
	if (recv(fd, h, sizeof(h), MSG_WAITALL) != (ssize_t)sizeof(h))
		return -1;
	*ver = kn_load_be16(h + 4);
	*len = kn_load_be32(h + 8);
	if (kn_load_be32(h) != KBOOT_MAGIC || *len > n)
		return -1;
	if (*len && recv(fd, buf, *len, MSG_WAITALL) != (ssize_t)*len)
		return -1;
	return kn_load_be16(h + 6);
}

Test(boot, malformed_bytes_to_rank0_do_not_break_it)
{
	struct rank_spec s0 = {.rank = 0, .size = 2};
	spawn(&s0);
	wait_addr();
	uint8_t buf[512];
	uint32_t len;
	uint16_t ver;

	/* 1. random bytes */
	int fd = connect_to(sh->addr);
	tu_fill_random(buf, 200, 42);
	cr_assert_eq(read_msg(fd, buf + 256, 256, &len, &ver), KBOOT_CHALLENGE);
	send(fd, buf, 200, MSG_NOSIGNAL);
	close(fd);

	/* 2. a valid header announcing 4 GiB */
	fd = connect_to(sh->addr);
	kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_RESPONSE, 0xffffffffu);
	send(fd, buf, KBOOT_HDR_LEN, MSG_NOSIGNAL);
	cr_assert_eq(read_msg(fd, buf + 256, 256, &len, &ver), KBOOT_CHALLENGE);
	cr_assert_eq(read_msg(fd, buf + 256, 256, &len, &ver), KBOOT_ERROR);
	cr_assert_eq((int)kn_load_be32(buf + 256), EPROTO);
	close(fd);

	/* 3. a truncated response, then hang up */
	fd = connect_to(sh->addr);
	kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_RESPONSE, KBOOT_RESPONSE_LEN);
	send(fd, buf, KBOOT_HDR_LEN + 5, MSG_NOSIGNAL);
	close(fd);

	/* 4. another protocol version: refused with a clear error */
	fd = connect_to(sh->addr);
	kboot_hdr(buf, KINET_BOOT_PROTO_VERSION + 1, KBOOT_RESPONSE, KBOOT_RESPONSE_LEN);
	send(fd, buf, KBOOT_HDR_LEN, MSG_NOSIGNAL);
	cr_assert_eq(read_msg(fd, buf + 256, 256, &len, &ver), KBOOT_CHALLENGE);
	cr_assert_eq(read_msg(fd, buf + 256, 256, &len, &ver), KBOOT_ERROR);
	cr_assert_eq((int)kn_load_be32(buf + 256), KINET_EVERSION);
	close(fd);

	/* 5. a well-formed response with a forged tag */
	fd = connect_to(sh->addr);
	cr_assert_eq(read_msg(fd, buf + 256, 256, &len, &ver), KBOOT_CHALLENGE);
	kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_RESPONSE, KBOOT_RESPONSE_LEN);
	kn_store_be32(buf + KBOOT_HDR_LEN, 1);
	kn_store_be32(buf + KBOOT_HDR_LEN + 4, 2);
	tu_fill_random(buf + KBOOT_HDR_LEN + 8, KBOOT_NONCE_LEN + KBOOT_TAG_LEN, 5);
	send(fd, buf, KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN, MSG_NOSIGNAL);
	cr_assert_eq(read_msg(fd, buf + 256, 256, &len, &ver), KBOOT_ERROR);
	cr_assert_eq((int)kn_load_be32(buf + 256), KINET_ESECRET);
	close(fd);

	/* 6. a connection that stays open and silent while the real rank joins */
	int quiet = connect_to(sh->addr);

	struct rank_spec s1 = {.rank = 1, .size = 2};
	spawn(&s1);
	wait_all();
	close(quiet);
	cr_assert_eq(sh->result[0], 0, "rank 0: %s", kinet_strerror(sh->result[0]));
	cr_assert_eq(sh->result[1], 0, "rank 1: %s", kinet_strerror(sh->result[1]));
}

/* A fake rank 0 in a child: sends `reply` after the challenge exchange. */
enum fake_mode { FAKE_GARBAGE, FAKE_VERSION, FAKE_BAD_SERVER_TAG, FAKE_HUGE_GATHER };

static void fake_rank0(int lfd, enum fake_mode mode)
{
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		_exit(1);
	uint8_t buf[256];
	if (mode == FAKE_GARBAGE) {
		tu_fill_random(buf, sizeof(buf), 11);
		send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
	} else if (mode == FAKE_VERSION) {
		kboot_hdr(buf, KINET_BOOT_PROTO_VERSION + 7, KBOOT_CHALLENGE, KBOOT_CHALLENGE_LEN);
		memset(buf + KBOOT_HDR_LEN, 1, KBOOT_CHALLENGE_LEN);
		send(fd, buf, KBOOT_HDR_LEN + KBOOT_CHALLENGE_LEN, MSG_NOSIGNAL);
	} else {
		kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_CHALLENGE, KBOOT_CHALLENGE_LEN);
		tu_fill_random(buf + KBOOT_HDR_LEN, KBOOT_NONCE_LEN, 3);
		kn_store_be32(buf + KBOOT_HDR_LEN + KBOOT_NONCE_LEN, 2);
		send(fd, buf, KBOOT_HDR_LEN + KBOOT_CHALLENGE_LEN, MSG_NOSIGNAL);
		recv(fd, buf, KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN, MSG_WAITALL);
		kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_ACCEPT, KBOOT_ACCEPT_LEN);
		tu_fill_random(buf + KBOOT_HDR_LEN, KBOOT_TAG_LEN, 4); /* does not know the key */
		send(fd, buf, KBOOT_HDR_LEN + KBOOT_ACCEPT_LEN, MSG_NOSIGNAL);
	}
	/* let the client read before we go */
	recv(fd, buf, 1, 0);
	close(fd);
	_exit(0);
}

static int client_against_fake(enum fake_mode mode)
{
	char addr[64];
	int lfd = silent_server(addr, sizeof(addr));
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0)
		fake_rank0(lfd, mode);
	kids[nkids++] = pid;
	close(lfd);
	struct kinet_boot_attr a = {.rank = 1, .size = 2, .addr = addr, .secret = "k",
				    .timeout_ms = 3000};
	kinet_boot *b = NULL;
	int rc = kinet_boot_init(&a, &b);
	cr_assert(b == NULL);
	wait_all();
	return rc;
}

Test(boot, client_refuses_garbage_from_rank0)
{
	cr_assert_eq(client_against_fake(FAKE_GARBAGE), -EPROTO);
}

Test(boot, client_refuses_other_protocol_version)
{
	cr_assert_eq(client_against_fake(FAKE_VERSION), -KINET_EVERSION);
}

Test(boot, client_refuses_rank0_without_the_secret)
{
	cr_assert_eq(client_against_fake(FAKE_BAD_SERVER_TAG), -KINET_ESECRET);
}

/* ---- the environment (a fresh process per rank: boot_peer) --------------------- */

#ifdef KINET_BOOT_PEER
/* A free loopback port (closed again: a small window for someone else). */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* Runs argv with extra environment entries; its exit status, or -1. */
static int run_prog(char *const argv[], char *const env[], bool search_path)
{
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* the sandbox of Criterion's worker must not leak into the program
		 * (it links Criterion through the test helpers) */
		unsetenv("BXFI_MAP");
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		if (search_path)
			execvp(argv[0], argv);
		else
			execv(argv[0], argv);
		_exit(127);
	}
	kids[nkids++] = pid;
	for (int waited = 0; waited < 2 * WAIT_MS; waited += 10) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			kids[nkids - 1] = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	return -1; /* killed by teardown */
}

static pid_t start_prog(char *const argv[], char *const env[])
{
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* the sandbox of Criterion's worker must not leak into the program
		 * (it links Criterion through the test helpers) */
		unsetenv("BXFI_MAP");
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		execv(argv[0], argv);
		_exit(127);
	}
	kids[nkids++] = pid;
	return pid;
}

Test(boot, env_two_processes)
{
	char addr[64];
	snprintf(addr, sizeof(addr), "KINET_BOOT_ADDR=127.0.0.1:%d", free_port());
	char *argv[] = {KINET_BOOT_PEER, "tcp", "2", NULL};
	char *env0[] = {addr, "KINET_BOOT_RANK=0", "KINET_BOOT_SIZE=2", "KINET_BOOT_SECRET=e1",
			"KINET_BOOT_TIMEOUT_MS=10000", "KINET_BOOT_MODE=auto", NULL};
	char *env1[] = {addr, "KINET_BOOT_RANK=1", "KINET_BOOT_SIZE=2", "KINET_BOOT_SECRET=e1",
			"KINET_BOOT_TIMEOUT_MS=10000", "KINET_BOOT_MODE=auto", NULL};
	pid_t p0 = start_prog(argv, env0);
	cr_assert_eq(run_prog(argv, env1, false), 0);
	cr_assert(wait_one(p0));
}

Test(boot, env_single_process)
{
	char *argv[] = {KINET_BOOT_PEER, "single", "1", NULL};
	char *env[] = {"KINET_BOOT_ADDR=", "KINET_BOOT_RANK=", "KINET_BOOT_SIZE=",
		       "KINET_BOOT_MODE=auto", NULL};
	cr_assert_eq(run_prog(argv, env, false), 0);
}

Test(boot, env_incomplete_is_refused)
{
	char *argv[] = {KINET_BOOT_PEER, "any", NULL};
	char *env[] = {"KINET_BOOT_ADDR=127.0.0.1:1", "KINET_BOOT_RANK=", "KINET_BOOT_SIZE=2",
		       "KINET_BOOT_MODE=auto", NULL};
	cr_assert_eq(run_prog(argv, env, false), 1);
	char *env2[] = {"KINET_BOOT_MODE=carrier-pigeon", NULL};
	cr_assert_eq(run_prog(argv, env2, false), 1);
}

/* ---- mpirun ------------------------------------------------------------------------- */

static bool have_mpirun(void)
{
	return system("command -v mpirun >/dev/null 2>&1") == 0;
}

/* vader's single-copy needs ptrace rights containers often lack; Open MPI's
 * own allocations outlive MPI_Finalize, which a sanitized build would report */
static char *mpi_env[] = {"OMPI_MCA_btl_vader_single_copy_mechanism=none",
			  "ASAN_OPTIONS=detect_leaks=0", "KINET_BOOT_ADDR=",
			  "KINET_BOOT_RANK=", "KINET_BOOT_SIZE=", NULL};

Test(boot, mpirun_np2_mpi_transport)
{
	if (!KINET_HAVE_MPI)
		cr_skip_test("this build has no MPI: the MPI transport is not built");
	if (!have_mpirun())
		cr_skip_test("mpirun (Open MPI) is not installed");
	char *argv[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
			KINET_BOOT_PEER, "mpi", "2", NULL};
	cr_assert_eq(run_prog(argv, mpi_env, true), 0, "mpirun -np 2 boot_peer failed");
}

Test(boot, mpirun_np2_tcp_transport)
{
	if (!have_mpirun())
		cr_skip_test("mpirun (Open MPI) is not installed");
	/* the launcher's rank and size, the exchange over TCP (what a build
	 * without MPI does under mpirun when KINET_BOOT_ADDR is set) */
	char addr[64];
	snprintf(addr, sizeof(addr), "KINET_BOOT_ADDR=127.0.0.1:%d", free_port());
	char *env[] = {"OMPI_MCA_btl_vader_single_copy_mechanism=none", addr,
		       "KINET_BOOT_MODE=tcp", "KINET_BOOT_SECRET=mpi-tcp", "KINET_BOOT_RANK=",
		       "KINET_BOOT_SIZE=", NULL};
	char *argv[] = {"mpirun",      "--allow-run-as-root", "--oversubscribe",
			"-np",         "2",
			"-x",          "KINET_BOOT_ADDR",
			"-x",          "KINET_BOOT_MODE",
			"-x",          "KINET_BOOT_SECRET",
			KINET_BOOT_PEER, "tcp", "2", NULL};
	cr_assert_eq(run_prog(argv, env, true), 0, "mpirun -np 2 boot_peer (tcp) failed");
}

Test(boot, mpirun_without_mpi_in_build_uses_tcp_with_addr)
{
	if (KINET_HAVE_MPI)
		cr_skip_test("this build has MPI (see mpirun_np2_tcp_transport for the TCP path)");
	if (!have_mpirun())
		cr_skip_test("mpirun (Open MPI) is not installed");
	char addr[64];
	snprintf(addr, sizeof(addr), "KINET_BOOT_ADDR=127.0.0.1:%d", free_port());
	char *env[] = {addr, "KINET_BOOT_MODE=auto", "KINET_BOOT_SECRET=no-mpi",
		       "KINET_BOOT_RANK=", "KINET_BOOT_SIZE=", NULL};
	char *argv[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
			"-x", "KINET_BOOT_ADDR", "-x", "KINET_BOOT_MODE", "-x", "KINET_BOOT_SECRET",
			KINET_BOOT_PEER, "tcp", "2", NULL};
	cr_assert_eq(run_prog(argv, env, true), 0);
}

Test(boot, mpirun_without_mpi_in_build_and_no_addr_fails)
{
	if (KINET_HAVE_MPI)
		cr_skip_test("this build has MPI");
	if (!have_mpirun())
		cr_skip_test("mpirun (Open MPI) is not installed");
	char *env[] = {"KINET_BOOT_ADDR=", "KINET_BOOT_MODE=auto", "KINET_BOOT_RANK=",
		       "KINET_BOOT_SIZE=", NULL};
	char *argv[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
			KINET_BOOT_PEER, "any", NULL};
	cr_assert_neq(run_prog(argv, env, true), 0);
}
#endif

/* ---- two network namespaces joined by a veth pair ----------------------------------- */

static char ns_a[48], ns_b[48], veth_a[16], veth_b[16];
static bool ns_made;

static int sh_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh_cmd(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Removes namespaces of earlier runs whose process is gone (a crash). */
static void remove_stale_namespaces(void)
{
	FILE *f = popen("ip netns list 2>/dev/null", "r");
	char line[256];
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		int pid;
		char side;
		if (sscanf(line, "kn-boot-%d-%c", &pid, &side) == 2 && pid > 0 &&
		    kill(pid, 0) && errno == ESRCH)
			sh_cmd("ip netns del kn-boot-%d-%c 2>/dev/null", pid, side);
	}
	pclose(f);
}

static void ns_teardown(void)
{
	if (ns_made) {
		sh_cmd("ip netns del %s 2>/dev/null", ns_a);
		sh_cmd("ip netns del %s 2>/dev/null", ns_b);
		sh_cmd("ip link del %s 2>/dev/null", veth_a);
		ns_made = false;
	}
	teardown();
}

Test(boot, two_network_namespaces_over_veth, .init = setup, .fini = ns_teardown)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to create network namespaces");
	if (sh_cmd("ip netns list >/dev/null 2>&1"))
		cr_skip_test("`ip netns` is not available (iproute2)");
	remove_stale_namespaces();
	int pid = (int)getpid();
	snprintf(ns_a, sizeof(ns_a), "kn-boot-%d-a", pid);
	snprintf(ns_b, sizeof(ns_b), "kn-boot-%d-b", pid);
	snprintf(veth_a, sizeof(veth_a), "knb%da", pid % 10000000);
	snprintf(veth_b, sizeof(veth_b), "knb%db", pid % 10000000);
	ns_made = true;
	if (sh_cmd("ip netns add %s", ns_a) || sh_cmd("ip netns add %s", ns_b))
		cr_skip_test("cannot create network namespaces here");
	if (sh_cmd("ip link add %s type veth peer name %s", veth_a, veth_b))
		cr_skip_test("cannot create a veth pair here");
	cr_assert_eq(sh_cmd("ip link set %s netns %s", veth_a, ns_a), 0);
	cr_assert_eq(sh_cmd("ip link set %s netns %s", veth_b, ns_b), 0);
	cr_assert_eq(sh_cmd("ip -n %s addr add 10.231.0.1/30 dev %s", ns_a, veth_a), 0);
	cr_assert_eq(sh_cmd("ip -n %s addr add 10.231.0.2/30 dev %s", ns_b, veth_b), 0);
	cr_assert_eq(sh_cmd("ip -n %s link set %s up", ns_a, veth_a), 0);
	cr_assert_eq(sh_cmd("ip -n %s link set %s up", ns_b, veth_b), 0);
	cr_assert_eq(sh_cmd("ip -n %s link set lo up", ns_a), 0);
	cr_assert_eq(sh_cmd("ip -n %s link set lo up", ns_b), 0);

	struct rank_spec s0 = {.rank = 0, .size = 2, .netns = ns_a, .listen = "10.231.0.1:0"};
	spawn(&s0);
	wait_addr();
	cr_assert(!strncmp(sh->addr, "10.231.0.1:", 11), "rank 0 reports %s", sh->addr);
	/* rank 1 lives in the other namespace: only the veth reaches rank 0 */
	struct rank_spec s1 = {.rank = 1, .size = 2, .netns = ns_b};
	spawn(&s1);
	wait_all();
	cr_assert_eq(sh->result[0], 0, "rank 0: %d (%s)", sh->result[0],
		     kinet_strerror(sh->result[0]));
	cr_assert_eq(sh->result[1], 0, "rank 1: %d (%s)", sh->result[1],
		     kinet_strerror(sh->result[1]));

	/* and a stray in namespace b with the wrong secret is refused there too */
	for (int i = 0; i < MAXR; i++)
		sh->result[i] = NOT_DONE;
	spawn(&s0);
	wait_addr();
	struct rank_spec stray = {.rank = 1, .size = 2, .netns = ns_b, .secret = "nope",
				  .slot = 5};
	cr_assert(wait_one(spawn(&stray)));
	cr_assert_eq(sh->result[5], -KINET_ESECRET);
	spawn(&s1);
	wait_all();
	cr_assert_eq(sh->result[0], 0);
	cr_assert_eq(sh->result[1], 0);
}

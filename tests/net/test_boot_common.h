/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers of the bootstrap tests (tests/net/test_boot*.c): each rank runs in
 * a forked child and reports its result in shared memory; rank 0 hands its
 * port-0 address to the parent through a pipe. Raw connections to rank 0
 * (connect_to, read_msg) play strangers and malformed peers.
 */
#ifndef TEST_BOOT_COMMON_H
#define TEST_BOOT_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
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
	const char *log_path; /* write the rank's stderr (kinet's log) there */
	int nofile;         /* lower the descriptor limit (soft) to this first */
	int as_mb;          /* allow this many MiB of address space beyond what is mapped */
};

static inline void setup(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(sh != MAP_FAILED);
	for (int i = 0; i < MAXR; i++)
		sh->result[i] = NOT_DONE;
	cr_assert_eq(pipe(addr_pipe), 0);
	cr_assert_eq(pipe(gate_pipe), 0);
	nkids = 0;
}

static inline void kill_kids(void)
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

static inline void teardown(void)
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

static inline void on_listening(const char *addr, void *arg)
{
	(void)arg;
	snprintf(sh->addr, sizeof(sh->addr), "%s", addr);
	if (write(addr_pipe[1], "A", 1) != 1)
		_exit(3);
}

static inline uint64_t seed_of(int rank, int round)
{
	return 0xb0075eedull ^ ((uint64_t)rank << 32) ^ (uint64_t)round * 7919;
}

static inline int enter_netns(const char *name)
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
static inline int rank_main(const struct rank_spec *s)
{
	static const size_t sizes[] = {8, 0, 1, 333, 65536, 1 << 20};
	const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
	if (s->netns && enter_netns(s->netns))
		return -EPERM;
	if (s->log_path) {
		int fd = open(s->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0)
			return -EIO;
		close(fd);
	}
	if (s->nofile) {
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl))
			return -EIO;
		rl.rlim_cur = (rlim_t)s->nofile;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			return -EIO;
	}
	if (s->as_mb) {
		/* what is mapped now (the first field of statm, in pages) and
		 * as_mb more: a large allocation fails instead of being made */
		unsigned long pages = 0;
		FILE *f = fopen("/proc/self/statm", "r");
		if (!f || fscanf(f, "%lu", &pages) != 1)
			return -EIO;
		fclose(f);
		struct rlimit rl;
		if (getrlimit(RLIMIT_AS, &rl))
			return -EIO;
		rl.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) +
			      ((rlim_t)s->as_mb << 20);
		if (setrlimit(RLIMIT_AS, &rl))
			return -EIO;
	}
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

static inline pid_t spawn(const struct rank_spec *s)
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
static inline void wait_addr(void)
{
	struct pollfd p = {.fd = addr_pipe[0], .events = POLLIN};
	cr_assert_eq(poll(&p, 1, WAIT_MS), 1, "rank 0 did not start listening");
	char c;
	cr_assert_eq(read(addr_pipe[0], &c, 1), 1);
	cr_assert(strlen(sh->addr) > 0);
}

/* Waits for one child (bounded); true when it exited. */
static inline bool wait_one(pid_t pid)
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

static inline void wait_all(void)
{
	for (int i = 0; i < nkids; i++)
		if (kids[i] > 0)
			cr_assert(wait_one(kids[i]), "a rank did not finish");
}

static inline void run_job(int size, size_t len)
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

static inline int silent_server(char *addr, size_t n)
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

static inline int connect_to(const char *addr)
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
static inline int read_msg(int fd, uint8_t *buf, size_t n, uint32_t *len, uint16_t *ver)
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

#endif

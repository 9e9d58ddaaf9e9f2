/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strangers at rank 0's port (kinet/boot.h, "what strangers get"): a flood
 * of a hundred connections that never send a byte, send garbage, or answer
 * the challenge slowly without the secret must not keep the real ranks out
 * of the job, and none of them may join.
 *
 * The flood runs in a forked child, one thread per stranger; each stranger
 * reconnects as soon as rank 0 drops it, until the parent stops the flood,
 * and counts in shared memory what rank 0 said to it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include "test_boot_common.h"

#define N_SILENT 60 /* connect and say nothing */
#define N_GARBAGE 20 /* send random bytes, a few at a time */
#define N_WRONG 20 /* answer the challenge slowly with a tag made without the secret */
#define N_STRANGERS (N_SILENT + N_GARBAGE + N_WRONG)

struct flood {
	atomic_int stop;
	atomic_int connects;   /* connections established */
	atomic_int challenged; /* CHALLENGE messages received */
	atomic_int joined;     /* ACCEPT or READY received: must stay 0 */
	atomic_int esecret;    /* ERROR wrong job secret */
	atomic_int eproto;     /* ERROR malformed handshake */
	atomic_int eagain;     /* ERROR try again (dropped: too slow or too many) */
	atomic_int other;      /* any other message or error code */
	atomic_int hangups;    /* connections rank 0 closed */
	/* per stranger: rank 0 ended one of its connections (closed it, refused
	 * it with an error, or no longer listened) */
	atomic_int refused[N_STRANGERS];
};
static struct flood *fl;

struct stranger {
	int id;
	int kind; /* 0 silent, 1 garbage, 2 wrong secret */
};

/* Reads what rank 0 sent and counts the messages; the buffer keeps a partial
 * message across calls. -1 once rank 0 hung up, 0 otherwise. */
struct inbox {
	uint8_t buf[1024];
	size_t have;
	uint8_t nonce[KBOOT_NONCE_LEN];
	bool challenged;
};

static int pump(int fd, struct inbox *in, int id)
{
	ssize_t n = recv(fd, in->buf + in->have, sizeof(in->buf) - in->have, 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (n <= 0) {
		atomic_fetch_add(&fl->hangups, 1);
		atomic_store(&fl->refused[id], 1);
		return -1;
	}
	in->have += (size_t)n;
	while (in->have >= KBOOT_HDR_LEN) {
		uint32_t len = kn_load_be32(in->buf + 8);
		if (kn_load_be32(in->buf) != KBOOT_MAGIC || len > sizeof(in->buf) - KBOOT_HDR_LEN) {
			atomic_fetch_add(&fl->other, 1);
			in->have = 0;
			return 0;
		}
		if (in->have < KBOOT_HDR_LEN + len)
			break;
		const uint8_t *p = in->buf + KBOOT_HDR_LEN;
		switch (kn_load_be16(in->buf + 6)) {
		case KBOOT_CHALLENGE:
			atomic_fetch_add(&fl->challenged, 1);
			if (len >= KBOOT_NONCE_LEN)
				memcpy(in->nonce, p, KBOOT_NONCE_LEN);
			in->challenged = true;
			break;
		case KBOOT_ACCEPT:
		case KBOOT_READY:
			atomic_fetch_add(&fl->joined, 1);
			break;
		case KBOOT_ERROR: {
			int code = len >= 4 ? (int)kn_load_be32(p) : 0;
			atomic_fetch_add(code == KINET_ESECRET ? &fl->esecret
					 : code == EPROTO      ? &fl->eproto
					 : code == EAGAIN      ? &fl->eagain
							       : &fl->other,
					 1);
			atomic_store(&fl->refused[id], 1);
			break;
		}
		default:
			atomic_fetch_add(&fl->other, 1);
		}
		memmove(in->buf, in->buf + KBOOT_HDR_LEN + len, in->have - KBOOT_HDR_LEN - len);
		in->have -= KBOOT_HDR_LEN + len;
	}
	return 0;
}

static void pause_ms(int ms)
{
	struct timespec ts = {0, (long)ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* Pumps for ms milliseconds (recv waits at most 20 ms at a time). */
static int pump_for(int fd, struct inbox *in, int id, int ms)
{
	for (int t = 0; t < ms && !atomic_load(&fl->stop); t += 20)
		if (pump(fd, in, id))
			return -1;
	return 0;
}

static void *stranger_main(void *arg)
{
	const struct stranger *s = arg;
	char host[64];
	int port;
	if (sscanf(sh->addr, "%63[^:]:%d", host, &port) != 2)
		return NULL;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, host, &sa.sin_addr);
	uint64_t rnd = 0x5742a11ull + (uint64_t)s->id * 7919;
	while (!atomic_load(&fl->stop)) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct timeval tv = {0, 20000};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		struct timeval ctv = {0, 500000};
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &ctv, sizeof(ctv));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			if (errno == ECONNREFUSED) /* rank 0 no longer listens */
				atomic_store(&fl->refused[s->id], 1);
			close(fd);
			pause_ms(10);
			continue;
		}
		atomic_fetch_add(&fl->connects, 1);
		struct inbox in = {.have = 0};
		if (s->kind == 1) {
			/* garbage, a few bytes at a time */
			for (int i = 0; i < 4 && !atomic_load(&fl->stop); i++) {
				uint8_t junk[10];
				for (size_t k = 0; k < sizeof(junk); k++)
					junk[k] = (uint8_t)tu_rand64(&rnd);
				if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) < 0)
					break;
				if (pump_for(fd, &in, s->id, 40))
					break;
			}
		} else if (s->kind == 2) {
			/* a well-formed response whose tag is not made with the
			 * secret, sent slowly in four pieces */
			for (int t = 0; t < 2000 && !in.challenged; t += 20)
				if (atomic_load(&fl->stop) || pump(fd, &in, s->id))
					break;
			if (in.challenged) {
				uint8_t msg[KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN];
				kboot_hdr(msg, KINET_BOOT_PROTO_VERSION, KBOOT_RESPONSE,
					  KBOOT_RESPONSE_LEN);
				kn_store_be32(msg + KBOOT_HDR_LEN, 1);
				kn_store_be32(msg + KBOOT_HDR_LEN + 4, 3);
				for (size_t k = 8; k < KBOOT_RESPONSE_LEN; k++)
					msg[KBOOT_HDR_LEN + k] = (uint8_t)tu_rand64(&rnd);
				size_t piece = (sizeof(msg) + 3) / 4;
				for (size_t off = 0; off < sizeof(msg); off += piece) {
					size_t n = sizeof(msg) - off;
					if (n > piece)
						n = piece;
					if (send(fd, msg + off, n, MSG_NOSIGNAL) < 0)
						break;
					if (pump_for(fd, &in, s->id, 60))
						break;
				}
			}
		}
		/* then (silent ones: only) listen until rank 0 hangs up */
		while (!atomic_load(&fl->stop) && !pump(fd, &in, s->id))
			;
		close(fd);
	}
	return NULL;
}

static pid_t start_flood(void)
{
	fl = mmap(NULL, sizeof(*fl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(fl != MAP_FAILED);
	memset(fl, 0, sizeof(*fl));
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		static struct stranger st[N_STRANGERS];
		static pthread_t th[N_STRANGERS];
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, 128 * 1024);
		int n = 0;
		for (int i = 0; i < N_STRANGERS; i++) {
			st[i].id = i;
			st[i].kind = i < N_SILENT ? 0 : i < N_SILENT + N_GARBAGE ? 1 : 2;
			if (!pthread_create(&th[n], &at, stranger_main, &st[i]))
				n++;
		}
		for (int i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		_exit(n == N_STRANGERS ? 0 : 2);
	}
	kids[nkids++] = pid;
	return pid;
}

/* Waits (bounded) until cond holds; true when it did. */
#define WAIT_FOR(cond, ms)                                                                 \
	({                                                                                 \
		bool ok_ = false;                                                          \
		for (int t_ = 0; t_ < (ms) && !(ok_ = (cond)); t_ += 10)                  \
			pause_ms(10);                                                      \
		ok_;                                                                       \
	})

static int count_refused(void)
{
	int n = 0;
	for (int i = 0; i < N_STRANGERS; i++)
		n += atomic_load(&fl->refused[i]) != 0;
	return n;
}

static bool all_refused(void)
{
	return count_refused() == N_STRANGERS;
}

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int n = 0, c;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* A job of 4 on loopback amid the flood: rank 0 waits; a hundred strangers
 * take their places; the real ranks 1 and 2 come; while rank 0 waits for
 * rank 3, every stranger is turned away, each in its own way, and keeps
 * coming back; rank 3 comes. Rank 0's log goes to log_path. */
static void flood_job(int nofile, const char *log_path)
{
	struct rank_spec s0 = {.rank = 0, .size = 4, .secret = "flood-secret", .timeout_ms = 20000,
			       .rounds = 3, .len = 4096, .nofile = nofile, .log_path = log_path};
	spawn(&s0);
	wait_addr();
	pid_t flood = start_flood();
	cr_assert(WAIT_FOR(atomic_load(&fl->connects) >= N_STRANGERS &&
				   atomic_load(&fl->challenged) >= 32,
			   15000),
		  "the flood did not start: %d connections, %d challenged",
		  atomic_load(&fl->connects), atomic_load(&fl->challenged));
	struct rank_spec s = {.rank = 1, .size = 4, .secret = "flood-secret", .timeout_ms = 10000,
			      .rounds = 3, .len = 4096};
	spawn(&s);
	s.rank = 2;
	spawn(&s);
	bool refused = WAIT_FOR(all_refused() && atomic_load(&fl->esecret) > 0 &&
					atomic_load(&fl->eproto) > 0,
				8000);
	s.rank = 3;
	spawn(&s);
	for (int i = 0; i < nkids; i++)
		if (kids[i] > 0 && kids[i] != flood)
			cr_assert(wait_one(kids[i]), "a rank did not finish");
	atomic_store(&fl->stop, 1);
	cr_assert(wait_one(flood), "the flood did not stop");
	for (int r = 0; r < 4; r++)
		cr_expect_eq(sh->result[r], 0, "rank %d: %d (%s)", r, sh->result[r],
			     kinet_strerror(sh->result[r]));
	cr_expect(refused, "strangers were not turned away while rank 0 waited: %d of %d "
		  "were, %d told wrong secret, %d malformed", count_refused(), N_STRANGERS,
		  atomic_load(&fl->esecret), atomic_load(&fl->eproto));
	cr_expect_eq(atomic_load(&fl->joined), 0, "a stranger was accepted");
	cr_expect_eq(atomic_load(&fl->other), 0, "rank 0 sent strangers something unexpected");
}

static char log_path[64];

static void log_teardown(void)
{
	if (log_path[0])
		unlink(log_path);
	log_path[0] = 0;
	if (fl) {
		munmap(fl, sizeof(*fl));
		fl = NULL;
	}
	teardown();
}

TestSuite(boot_strangers, .init = setup, .fini = log_teardown, .timeout = 120);

Test(boot_strangers, flood_does_not_keep_the_real_ranks_out)
{
	snprintf(log_path, sizeof(log_path), "/tmp/kinet-boot-flood-%d.log", (int)getpid());
	flood_job(0, log_path);
	/* a log line for each of the thousand connections turned away would be
	 * a flood of its own: the first few, then sums */
	int lines = count_lines(log_path);
	cr_expect(lines >= 1 && lines <= 40, "rank 0 logged %d lines for %d connections",
		  lines, atomic_load(&fl->connects));
}

Test(boot_strangers, rank0_short_of_descriptors_makes_room)
{
	/* a descriptor limit of 160 leaves rank 0 room for 46 handshakes, fewer
	 * than there are strangers: those past their grace are dropped (told to
	 * try again) for the connections waiting in the backlog, and the real
	 * ranks still get in */
	flood_job(160, NULL);
	cr_expect_gt(atomic_load(&fl->eagain), 0, "no handshake was dropped to make room");
}

Test(boot_strangers, silent_and_trickling_handshakes_are_dropped)
{
	/* one stranger says nothing, one sends a valid header and then a byte
	 * at a time: neither may hold its handshake for long; both are told to
	 * try again, and rank 0 still waits for the real rank, which joins */
	struct rank_spec s0 = {.rank = 0, .size = 2, .timeout_ms = 20000};
	spawn(&s0);
	wait_addr();
	int quiet = connect_to(sh->addr), slow = connect_to(sh->addr);
	uint8_t buf[256];
	uint32_t len;
	uint16_t ver;
	cr_assert_eq(read_msg(quiet, buf, sizeof(buf), &len, &ver), KBOOT_CHALLENGE);
	cr_assert_eq(read_msg(slow, buf, sizeof(buf), &len, &ver), KBOOT_CHALLENGE);
	uint8_t m[KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN];
	kboot_hdr(m, KINET_BOOT_PROTO_VERSION, KBOOT_RESPONSE, KBOOT_RESPONSE_LEN);
	tu_fill_random(m + KBOOT_HDR_LEN, KBOOT_RESPONSE_LEN, 21);
	cr_assert_eq(send(slow, m, KBOOT_HDR_LEN, MSG_NOSIGNAL), KBOOT_HDR_LEN);
	/* a byte every 100 ms would take 4 s for the rest of the response */
	int sent = 0;
	struct pollfd p = {.fd = slow, .events = POLLIN};
	while (sent < KBOOT_RESPONSE_LEN - 1 && poll(&p, 1, 100) == 0)
		send(slow, m + KBOOT_HDR_LEN + sent++, 1, MSG_NOSIGNAL);
	cr_assert(sent < KBOOT_RESPONSE_LEN - 1, "the trickle was not cut off");
	cr_assert_eq(read_msg(slow, buf, sizeof(buf), &len, &ver), KBOOT_ERROR);
	cr_assert_eq((int)kn_load_be32(buf), EAGAIN);
	cr_assert_eq(read_msg(quiet, buf, sizeof(buf), &len, &ver), KBOOT_ERROR);
	cr_assert_eq((int)kn_load_be32(buf), EAGAIN);
	cr_assert_eq(recv(quiet, buf, 1, 0), 0, "the silent connection stayed open");
	struct rank_spec s1 = {.rank = 1, .size = 2};
	spawn(&s1);
	wait_all();
	close(quiet);
	close(slow);
	cr_assert_eq(sh->result[0], 0, "rank 0: %s", kinet_strerror(sh->result[0]));
	cr_assert_eq(sh->result[1], 0, "rank 1: %s", kinet_strerror(sh->result[1]));
}

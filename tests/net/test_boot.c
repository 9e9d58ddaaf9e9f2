/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bootstrap (kinet/boot.h) between processes: allgather and barrier
 * with 2 and 4 processes on loopback, the job secret, timeouts, malformed
 * input, two network namespaces joined by a veth pair, and mpirun (the
 * helpers are in test_boot_common.h; strangers flooding rank 0 are in
 * test_boot_strangers.c).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include "test_boot_common.h"

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

/* A job as large as an int allows, of which one rank comes: rank 0 holds
 * what joined, not a socket per rank up front (a few hundred MiB of address
 * space are plenty), and both end at rank 0's timeout, not a minute later. */
Test(boot, huge_size_costs_per_joined_rank_and_keeps_the_timeout)
{
	int64_t t0 = kboot_now_ms();
	struct rank_spec s0 = {.rank = 0, .size = INT_MAX, .timeout_ms = 2000, .as_mb = 256};
	spawn(&s0);
	struct pollfd p = {.fd = addr_pipe[0], .events = POLLIN};
	if (poll(&p, 1, 5000) != 1) {
		wait_all();
		cr_assert_fail("rank 0 did not listen: %s", kinet_strerror(sh->result[0]));
	}
	char c;
	cr_assert_eq(read(addr_pipe[0], &c, 1), 1);
	/* a rank of that job, its own timeout much longer: told by rank 0 */
	struct rank_spec s1 = {.rank = 1, .size = INT_MAX, .timeout_ms = 20000, .as_mb = 256};
	spawn(&s1);
	wait_all();
	int64_t took = kboot_now_ms() - t0;
	cr_assert_eq(sh->result[0], -ETIMEDOUT, "rank 0: %s", kinet_strerror(sh->result[0]));
	cr_assert_eq(sh->result[1], -ETIMEDOUT, "rank 1: %s", kinet_strerror(sh->result[1]));
	cr_assert(took < 6000, "the 2 s timeout took %lld ms", (long long)took);
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

/* A fake rank 0 in a child. Without the secret: garbage, another version, or
 * an ACCEPT whose tag it cannot make. With it (key of "k"): tells the first
 * connection to try again and admits the second (then serves one allgather
 * honestly), or admits the first and answers its allgather with a length
 * field of 4 GiB. */
enum fake_mode {
	FAKE_GARBAGE,
	FAKE_VERSION,
	FAKE_BAD_SERVER_TAG,
	FAKE_TRY_AGAIN,
	FAKE_HUGE_GATHER,
};

/* The server's half of a handshake that knows the key: 0 when the client
 * was admitted (ACCEPT and READY sent). */
static int fake_admit(int fd, const uint8_t key[16])
{
	uint8_t buf[256], ns[KBOOT_NONCE_LEN];
	tu_fill_random(ns, sizeof(ns), 3);
	kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_CHALLENGE, KBOOT_CHALLENGE_LEN);
	memcpy(buf + KBOOT_HDR_LEN, ns, KBOOT_NONCE_LEN);
	kn_store_be32(buf + KBOOT_HDR_LEN + KBOOT_NONCE_LEN, 2);
	send(fd, buf, KBOOT_HDR_LEN + KBOOT_CHALLENGE_LEN, MSG_NOSIGNAL);
	if (recv(fd, buf, KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN, MSG_WAITALL) !=
	    KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN)
		return -1;
	const uint8_t *r = buf + KBOOT_HDR_LEN;
	uint8_t out[2 * KBOOT_HDR_LEN + KBOOT_TAG_LEN];
	kboot_hdr(out, KINET_BOOT_PROTO_VERSION, KBOOT_ACCEPT, KBOOT_ACCEPT_LEN);
	kboot_auth_tag(key, 'S', ns, r + 8, kn_load_be32(r), kn_load_be32(r + 4),
		       out + KBOOT_HDR_LEN);
	kboot_hdr(out + KBOOT_HDR_LEN + KBOOT_TAG_LEN, KINET_BOOT_PROTO_VERSION, KBOOT_READY, 0);
	return send(fd, out, sizeof(out), MSG_NOSIGNAL) == (ssize_t)sizeof(out) ? 0 : -1;
}

static void fake_rank0(int lfd, enum fake_mode mode)
{
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		_exit(1);
	uint8_t buf[256], key[16];
	kboot_mac_key("k", key);
	if (mode == FAKE_GARBAGE) {
		tu_fill_random(buf, sizeof(buf), 11);
		send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
	} else if (mode == FAKE_VERSION) {
		kboot_hdr(buf, KINET_BOOT_PROTO_VERSION + 7, KBOOT_CHALLENGE, KBOOT_CHALLENGE_LEN);
		memset(buf + KBOOT_HDR_LEN, 1, KBOOT_CHALLENGE_LEN);
		send(fd, buf, KBOOT_HDR_LEN + KBOOT_CHALLENGE_LEN, MSG_NOSIGNAL);
	} else if (mode == FAKE_BAD_SERVER_TAG) {
		kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_CHALLENGE, KBOOT_CHALLENGE_LEN);
		tu_fill_random(buf + KBOOT_HDR_LEN, KBOOT_NONCE_LEN, 3);
		kn_store_be32(buf + KBOOT_HDR_LEN + KBOOT_NONCE_LEN, 2);
		send(fd, buf, KBOOT_HDR_LEN + KBOOT_CHALLENGE_LEN, MSG_NOSIGNAL);
		recv(fd, buf, KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN, MSG_WAITALL);
		kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_ACCEPT, KBOOT_ACCEPT_LEN);
		tu_fill_random(buf + KBOOT_HDR_LEN, KBOOT_TAG_LEN, 4); /* does not know the key */
		send(fd, buf, KBOOT_HDR_LEN + KBOOT_ACCEPT_LEN, MSG_NOSIGNAL);
	} else if (mode == FAKE_TRY_AGAIN) {
		/* what rank 0 tells a handshake it drops for a newer one */
		kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_CHALLENGE, KBOOT_CHALLENGE_LEN);
		tu_fill_random(buf + KBOOT_HDR_LEN, KBOOT_NONCE_LEN, 5);
		kn_store_be32(buf + KBOOT_HDR_LEN + KBOOT_NONCE_LEN, 2);
		send(fd, buf, KBOOT_HDR_LEN + KBOOT_CHALLENGE_LEN, MSG_NOSIGNAL);
		recv(fd, buf, KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN, MSG_WAITALL);
		kboot_send_error(fd, EAGAIN, "too many handshakes in progress: try again");
		close(fd);
		fd = accept(lfd, NULL, NULL);
		if (fd < 0 || fake_admit(fd, key))
			_exit(1);
		/* an honest allgather of 8 bytes: rank 0's are random */
		uint8_t h[KBOOT_HDR_LEN + 4 + 8];
		if (recv(fd, h, sizeof(h), MSG_WAITALL) != (ssize_t)sizeof(h))
			_exit(1);
		uint8_t g[KBOOT_HDR_LEN + 4 + 16];
		kboot_hdr(g, KINET_BOOT_PROTO_VERSION, KBOOT_GATHER, 4 + 16);
		memcpy(g + KBOOT_HDR_LEN, h + KBOOT_HDR_LEN, 4); /* seq */
		tu_fill_random(g + KBOOT_HDR_LEN + 4, 8, 6);
		memcpy(g + KBOOT_HDR_LEN + 12, h + KBOOT_HDR_LEN + 4, 8);
		send(fd, g, sizeof(g), MSG_NOSIGNAL);
	} else {
		if (fake_admit(fd, key))
			_exit(1);
		uint8_t h[KBOOT_HDR_LEN + 4];
		recv(fd, h, sizeof(h), MSG_WAITALL);
		kboot_hdr(h, KINET_BOOT_PROTO_VERSION, KBOOT_GATHER, 0xffffffffu);
		send(fd, h, sizeof(h), MSG_NOSIGNAL);
	}
	/* let the client read before we go */
	recv(fd, buf, 1, 0);
	close(fd);
	_exit(0);
}

/* Joins a fake rank 0 as rank 1 of 2 with the secret "k"; with a join,
 * one allgather of 8 random bytes follows (*gather: its result, -1 when
 * the join failed), whose bytes are checked. */
static int client_against_fake_gather(enum fake_mode mode, int *gather)
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
	*gather = -1;
	if (!rc) {
		cr_assert(b != NULL);
		uint8_t mine[8], all[16], want0[8];
		tu_fill_random(mine, sizeof(mine), 8);
		tu_fill_random(all, sizeof(all), 9);
		tu_fill_random(want0, sizeof(want0), 6);
		*gather = kinet_boot_allgather(b, mine, all, sizeof(mine));
		if (!*gather)
			cr_assert(!memcmp(all, want0, 8) && !memcmp(all + 8, mine, 8),
				  "gathered bytes differ");
		kinet_boot_close(b);
	} else {
		cr_assert(b == NULL);
	}
	wait_all();
	return rc;
}

static int client_against_fake(enum fake_mode mode)
{
	int gather;
	return client_against_fake_gather(mode, &gather);
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

Test(boot, client_told_to_try_again_joins_on_its_next_attempt)
{
	int gather;
	cr_assert_eq(client_against_fake_gather(FAKE_TRY_AGAIN, &gather), 0);
	cr_assert_eq(gather, 0, "allgather: %s", kinet_strerror(gather));
}

Test(boot, client_refuses_oversized_gather_from_rank0)
{
	/* rank 0 knows the secret but announces 4 GiB: refused before a byte
	 * of it is read */
	int gather;
	cr_assert_eq(client_against_fake_gather(FAKE_HUGE_GATHER, &gather), 0);
	cr_assert_eq(gather, -EPROTO, "allgather: %s", kinet_strerror(gather));
}

/* ---- ranks that know the secret and misbehave ---------------------------------- */

/* Rank 1 of a job of 3 that joins honestly (it knows the secret), then
 * breaks the protocol in its first allgather and holds its connection. */
enum rogue_mode { ROGUE_STALL, ROGUE_HUGE };

static pid_t spawn_rogue(enum rogue_mode mode)
{
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct kinet_boot_attr a = {.rank = 1, .size = 3, .addr = sh->addr,
					    .secret = "test-secret", .timeout_ms = 10000};
		kinet_boot *b;
		int rc = kinet_boot_init(&a, &b);
		sh->result[1] = rc;
		if (rc)
			_exit(0);
		uint8_t m[KBOOT_HDR_LEN + 4 + 32];
		/* allgather of 64 bytes: the header, the sequence number and
		 * half the payload, then silence; or a length field of 4 GiB */
		kboot_hdr(m, KINET_BOOT_PROTO_VERSION, KBOOT_DATA,
			  mode == ROGUE_STALL ? 4 + 64 : 0xfffffff0u);
		kn_store_be32(m + KBOOT_HDR_LEN, 0);
		tu_fill_random(m + KBOOT_HDR_LEN + 4, 32, 12);
		send(b->fds[0], m, sizeof(m), MSG_NOSIGNAL);
		pause(); /* killed by the test */
		_exit(0);
	}
	kids[nkids++] = pid;
	return pid;
}

static void rogue_job(enum rogue_mode mode, int expect)
{
	struct rank_spec s0 = {.rank = 0, .size = 3, .len = 64, .rounds = 1, .timeout_ms = 1500};
	spawn(&s0);
	wait_addr();
	pid_t rogue = spawn_rogue(mode);
	struct rank_spec s2 = {.rank = 2, .size = 3, .len = 64, .rounds = 1, .timeout_ms = 8000};
	spawn(&s2);
	for (int i = 0; i < nkids; i++)
		if (kids[i] > 0 && kids[i] != rogue)
			cr_assert(wait_one(kids[i]), "a rank did not finish");
	cr_assert_eq(sh->result[1], 0, "the rogue did not join: %s", kinet_strerror(sh->result[1]));
	cr_assert_eq(sh->result[0], expect, "rank 0: %s", kinet_strerror(sh->result[0]));
	/* told by rank 0 (before its own, longer timeout) */
	cr_assert_eq(sh->result[2], expect, "rank 2: %s", kinet_strerror(sh->result[2]));
}

Test(boot, rank_stalling_mid_message_fails_the_collective_everywhere)
{
	rogue_job(ROGUE_STALL, -ETIMEDOUT);
}

Test(boot, rank_announcing_oversized_data_fails_the_collective_everywhere)
{
	rogue_job(ROGUE_HUGE, -EPROTO);
}

/* The client's half of a handshake, done by hand: the connection once rank 0
 * accepted it as `rank` of `size`, or -1. */
static int raw_join(const char *addr, const char *secret, int rank, int size)
{
	int fd = connect_to(addr);
	uint8_t buf[256], key[16], nc[KBOOT_NONCE_LEN];
	uint32_t len;
	uint16_t ver;
	if (read_msg(fd, buf, sizeof(buf), &len, &ver) != KBOOT_CHALLENGE) {
		close(fd);
		return -1;
	}
	uint8_t ns[KBOOT_NONCE_LEN];
	memcpy(ns, buf, KBOOT_NONCE_LEN);
	kboot_mac_key(secret, key);
	tu_fill_random(nc, sizeof(nc), (uint64_t)rank + 40);
	uint8_t *r = buf + KBOOT_HDR_LEN;
	kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, KBOOT_RESPONSE, KBOOT_RESPONSE_LEN);
	kn_store_be32(r, (uint32_t)rank);
	kn_store_be32(r + 4, (uint32_t)size);
	memcpy(r + 8, nc, KBOOT_NONCE_LEN);
	kboot_auth_tag(key, 'C', ns, nc, (uint32_t)rank, (uint32_t)size, r + 8 + KBOOT_NONCE_LEN);
	send(fd, buf, KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN, MSG_NOSIGNAL);
	if (read_msg(fd, buf, sizeof(buf), &len, &ver) != KBOOT_ACCEPT) {
		close(fd);
		return -1;
	}
	return fd;
}

Test(boot, second_connection_of_a_rank_refused_while_the_first_lives)
{
	/* rank 1 joined (by hand, and stays): another rank 1 is refused; once
	 * the first has gone, a new rank 1 takes its place and the job runs */
	struct rank_spec s0 = {.rank = 0, .size = 3};
	spawn(&s0);
	wait_addr();
	int first = raw_join(sh->addr, "test-secret", 1, 3);
	cr_assert(first >= 0, "the first rank 1 was not accepted");
	struct rank_spec twin = {.rank = 1, .size = 3, .slot = 5};
	cr_assert(wait_one(spawn(&twin)));
	cr_assert_eq(sh->result[5], -EEXIST, "second rank 1: %s", kinet_strerror(sh->result[5]));
	close(first); /* the first process of rank 1 is gone */
	struct rank_spec s = {.rank = 1, .size = 3};
	spawn(&s);
	s.rank = 2;
	spawn(&s);
	wait_all();
	for (int r = 0; r < 3; r++)
		cr_expect_eq(sh->result[r], 0, "rank %d: %s", r, kinet_strerror(sh->result[r]));
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
	/* and neither process maps libmpi */
	char *argv[] = {KINET_BOOT_PEER, "tcp", "2", "no-mpi-mapped", NULL};
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
	char *argv[] = {KINET_BOOT_PEER, "single", "1", "no-mpi-mapped", NULL};
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
	/* NVSHMEM's unique-id mode joins only through the program's id */
	char *env3[] = {"KINET_BOOT_MODE=", "NVSHMEM_BOOTSTRAP=UID", NULL};
	cr_assert_eq(run_prog(argv, env3, false), 1);
}

/* ---- the MPI module ---------------------------------------------------------------- */

/* Whether a library whose name contains `name` is mapped in this process. */
static bool mapped(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	bool found = false;
	cr_assert(f != NULL);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

Test(boot, libkinet_does_not_map_mpi)
{
	/* this program links libkinet; a bootstrap of one process (given, and
	 * from the environment) loads nothing of MPI either */
	cr_assert(!mapped("/libmpi.so"), "libmpi is mapped by a program that links libkinet");
	struct kinet_boot_attr a = {.rank = 0, .size = 1};
	kinet_boot *b;
	cr_assert_eq(kinet_boot_init(&a, &b), 0);
	kinet_boot_close(b);
	unsetenv("KINET_BOOT_ADDR");
	unsetenv("KINET_BOOT_RANK");
	unsetenv("KINET_BOOT_SIZE");
	unsetenv("KINET_BOOT_MODE");
	cr_assert_eq(kinet_boot_init_env(&b), 0);
	cr_assert_str_eq(kinet_boot_transport(b), "single");
	kinet_boot_close(b);
	cr_assert(!mapped("/libmpi.so"));
	cr_assert(!mapped("/libkinet_mpi.so"));
}

#ifdef KINET_FAKE_MPI_DIR
/* A folder with a copy of libkinet, and beside it the fake MPI module
 * `fake` (NULL: none): boot_peer runs with it through LD_LIBRARY_PATH. */
static char mod_dir[64], mod_env[96], mod_log[96];

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	cr_assert(in >= 0 && out >= 0, "copy %s to %s", from, to);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		cr_assert_eq(write(out, buf, (size_t)n), n);
	cr_assert_eq(n, 0);
	close(in);
	close(out);
}

static void module_dir(const char *fake)
{
	snprintf(mod_dir, sizeof(mod_dir), "/tmp/kinet-mpimod-XXXXXX");
	cr_assert(mkdtemp(mod_dir) != NULL);
	char to[128];
	snprintf(to, sizeof(to), "%s/%s", mod_dir, KINET_LIB_SONAME);
	copy_file(KINET_LIB_FILE, to);
	if (fake) {
		char from[512];
		snprintf(from, sizeof(from), "%s/%s/libkinet_mpi.so", KINET_FAKE_MPI_DIR, fake);
		snprintf(to, sizeof(to), "%s/libkinet_mpi.so", mod_dir);
		copy_file(from, to);
	}
	snprintf(mod_env, sizeof(mod_env), "LD_LIBRARY_PATH=%s", mod_dir);
	snprintf(mod_log, sizeof(mod_log), "%s/log", mod_dir);
}

static void module_dir_remove(void)
{
	static const char *files[] = {KINET_LIB_SONAME, "libkinet_mpi.so", "log"};
	char path[160];
	if (!mod_dir[0])
		return;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", mod_dir, files[i]);
		unlink(path);
	}
	rmdir(mod_dir);
	mod_dir[0] = 0;
}

static void module_teardown(void)
{
	module_dir_remove();
	teardown();
}

/* Runs boot_peer with the folder's libkinet; its exit status, its stderr in
 * mod_log. */
static int run_with_module(char *const argv[], char *const env[])
{
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int fd = open(mod_log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(126);
		unsetenv("BXFI_MAP");
		putenv(mod_env);
		for (int i = 0; env[i]; i++)
			putenv(env[i]);
		execv(argv[0], argv);
		_exit(127);
	}
	kids[nkids++] = pid;
	for (int waited = 0; waited < WAIT_MS; waited += 10) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			kids[nkids - 1] = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	cr_assert_fail("boot_peer did not finish");
	return -1;
}

static bool log_has(const char *needle)
{
	FILE *f = fopen(mod_log, "r");
	char text[8192];
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = 0;
	return strstr(text, needle) != NULL;
}

Test(boot, mpi_module_missing_is_a_clear_error, .fini = module_teardown)
{
	module_dir(NULL);
	char *argv[] = {KINET_BOOT_PEER, "any", NULL};
	char *env[] = {"KINET_BOOT_MODE=mpi", "KINET_BOOT_ADDR=", NULL};
	cr_assert_eq(run_with_module(argv, env), 1);
	cr_assert(log_has("libkinet_mpi.so is not installed"), "no clear message");
	/* launched by mpirun (as far as the environment says), auto mode, no
	 * address for TCP: the same, and what to set */
	char *env2[] = {"KINET_BOOT_MODE=auto", "KINET_BOOT_ADDR=", "OMPI_COMM_WORLD_RANK=0",
			"OMPI_COMM_WORLD_SIZE=1", NULL};
	cr_assert_eq(run_with_module(argv, env2), 1);
	cr_assert(log_has("libkinet_mpi.so is not installed") && log_has("KINET_BOOT_ADDR"));
	/* with an address, auto mode takes TCP (documented) and says so */
	char *argv3[] = {KINET_BOOT_PEER, "single", "1", "no-mpi-mapped", NULL};
	char *env3[] = {"KINET_BOOT_MODE=auto", "KINET_BOOT_ADDR=127.0.0.1:1",
			"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", NULL};
	cr_assert_eq(run_with_module(argv3, env3), 0);
	cr_assert(log_has("TCP bootstrap") && log_has("libkinet_mpi.so is not installed"));
}

Test(boot, mpi_module_without_its_library_is_a_clear_error, .fini = module_teardown)
{
	/* the module is there but a library it needs is not (as when libmpi
	 * is missing): the message names that library */
	module_dir("missing_dep");
	char *argv[] = {KINET_BOOT_PEER, "any", NULL};
	char *env[] = {"KINET_BOOT_MODE=mpi", "KINET_BOOT_ADDR=", NULL};
	cr_assert_eq(run_with_module(argv, env), 1);
	cr_assert(log_has("libkinet_test_gone.so"), "the missing library is not named");
}

Test(boot, mpi_module_of_another_kind_is_refused, .fini = module_teardown)
{
	char *argv[] = {KINET_BOOT_PEER, "any", NULL};
	char *env[] = {"KINET_BOOT_MODE=mpi", "KINET_BOOT_ADDR=", NULL};
	module_dir("no_entry");
	cr_assert_eq(run_with_module(argv, env), 1);
	cr_assert(log_has("has no kinet_mpi_module_ops"));
	module_dir_remove();
	module_dir("other_abi");
	cr_assert_eq(run_with_module(argv, env), 1);
	cr_assert(log_has("module interface"));
}
#endif

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
	/* the MPI module is loaded, and libmpi with it */
	char *argv[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
			KINET_BOOT_PEER, "mpi", "2", "mpi-mapped", NULL};
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
			KINET_BOOT_PEER, "tcp", "2", "no-mpi-mapped", NULL};
	/* launched by mpirun, but the TCP bootstrap does not load MPI */
	cr_assert_eq(run_prog(argv, env, true), 0, "mpirun -np 2 boot_peer (tcp) failed");
}

Test(boot, mpirun_without_mpi_in_build_uses_tcp_with_addr)
{
	if (KINET_HAVE_MPI || KINET_HAVE_PMIX)
		cr_skip_test("this build has MPI or PMIx (see mpirun_np2_tcp_transport for the TCP "
			     "path)");
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
	if (KINET_HAVE_MPI || KINET_HAVE_PMIX)
		cr_skip_test("this build has MPI or PMIx");
	if (!have_mpirun())
		cr_skip_test("mpirun (Open MPI) is not installed");
	char *env[] = {"KINET_BOOT_ADDR=", "KINET_BOOT_MODE=auto", "KINET_BOOT_RANK=",
		       "KINET_BOOT_SIZE=", NULL};
	char *argv[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
			KINET_BOOT_PEER, "any", NULL};
	cr_assert_neq(run_prog(argv, env, true), 0);
}
#endif

/* ---- PMIx and other launchers ------------------------------------------------------ */

Test(boot, pmix_module_missing_is_a_clear_error, .fini = module_teardown)
{
	module_dir(NULL); /* a libkinet with neither module beside it */
	char *argv[] = {KINET_BOOT_PEER, "any", NULL};
	char *env[] = {"KINET_BOOT_MODE=pmix", "KINET_BOOT_ADDR=", NULL};
	cr_assert_eq(run_with_module(argv, env), 1);
	cr_assert(log_has("KINET_BOOT_MODE=pmix but the PMIx bootstrap is not available"));
	cr_assert(log_has(KINET_HAVE_PMIX ? "libkinet_pmix.so is not installed" : "libpmix-dev"));
	/* started by a PMIx server (as far as the environment says), auto mode,
	 * no address for TCP: the same, and what to set */
	char *env2[] = {"KINET_BOOT_MODE=auto", "KINET_BOOT_ADDR=", "PMIX_RANK=0",
			"PMIX_NAMESPACE=kinet-test", NULL};
	cr_assert_eq(run_with_module(argv, env2), 1);
	cr_assert(log_has("launched by a PMIx server") && log_has("KINET_BOOT_ADDR"));
}

/* Slurm's variables number the TCP bootstrap when no module applies. */
Test(boot, slurm_variables_number_the_tcp_bootstrap)
{
	char addr[64];
	snprintf(addr, sizeof(addr), "KINET_BOOT_ADDR=127.0.0.1:%d", free_port());
	char *argv[] = {KINET_BOOT_PEER, "tcp", "2", "no-mpi-mapped", NULL};
	char *env0[] = {addr, "KINET_BOOT_RANK=", "KINET_BOOT_SIZE=", "SLURM_PROCID=0",
			"SLURM_NTASKS=2", "KINET_BOOT_SECRET=s1", "KINET_BOOT_MODE=auto", NULL};
	char *env1[] = {addr, "KINET_BOOT_RANK=", "KINET_BOOT_SIZE=", "SLURM_PROCID=1",
			"SLURM_NTASKS=2", "KINET_BOOT_SECRET=s1", "KINET_BOOT_MODE=auto", NULL};
	pid_t p0 = start_prog(argv, env0);
	cr_assert_eq(run_prog(argv, env1, false), 0);
	cr_assert(wait_one(p0));
}

#if KINET_HAVE_PMIX
static char *pmix_env[] = {"OMPI_MCA_btl_vader_single_copy_mechanism=none",
			   "ASAN_OPTIONS=detect_leaks=0", "KINET_BOOT_ADDR=", "KINET_BOOT_RANK=",
			   "KINET_BOOT_SIZE=", NULL};

Test(boot, mpirun_np3_pmix_transport)
{
	if (!have_mpirun())
		cr_skip_test("mpirun (Open MPI) is not installed");
	/* mpirun is the PMIx server; the PMIx module is loaded, libmpi is not */
	char *argv[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3",
			"-x", "KINET_BOOT_MODE=pmix", KINET_BOOT_PEER, "pmix", "3", "pmix-mapped",
			NULL};
	cr_assert_eq(run_prog(argv, pmix_env, true), 0, "mpirun -np 3 boot_peer (pmix) failed");
}

Test(boot, pmix_server_without_open_mpi_variables_chooses_pmix)
{
	if (!have_mpirun())
		cr_skip_test("mpirun (Open MPI) is not installed");
	/* what srun --mpi=pmix or prterun give: PMIx variables, no Open MPI ones */
	char *argv[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
			"-x", "KINET_BOOT_MODE=auto", "env", "-u", "OMPI_COMM_WORLD_RANK",
			"-u", "OMPI_COMM_WORLD_SIZE", KINET_BOOT_PEER, "pmix", "2", "pmix-mapped",
			NULL};
	cr_assert_eq(run_prog(argv, pmix_env, true), 0);
}

Test(boot, nvshmem_bootstrap_variable_chooses_the_transport)
{
	if (!have_mpirun())
		cr_skip_test("mpirun (Open MPI) is not installed");
	/* NVSHMEM's own variable, as NVSHMEM's users set it: PMI under mpirun
	 * is PMIx, and not MPI although Open MPI's variables are there */
	char *argv[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
			"-x", "KINET_BOOT_MODE=", "-x", "NVSHMEM_BOOTSTRAP=PMI", KINET_BOOT_PEER,
			"pmix", "2", "pmix-mapped", NULL};
	cr_assert_eq(run_prog(argv, pmix_env, true), 0);
}

Test(boot, pmix_fence_times_out_when_a_rank_is_late)
{
	if (!have_mpirun())
		cr_skip_test("mpirun (Open MPI) is not installed");
	/* rank 1 comes 8 s late; rank 0's first allgather gives up at 1 s with
	 * -ETIMEDOUT and says why, rather than waiting */
	char log[64], cmd[1024];
	snprintf(log, sizeof(log), "/tmp/kinet-pmix-late-%d.log", (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "mpirun --allow-run-as-root --oversubscribe -np 2 -x KINET_BOOT_MODE=pmix "
		 "-x KINET_BOOT_TIMEOUT_MS=1000 -x BOOT_PEER_STALL_PMIX_RANK=1 "
		 "-x BOOT_PEER_STALL_MS=8000 %s pmix 2 >%s 2>&1",
		 KINET_BOOT_PEER, log);
	char *argv[] = {"sh", "-c", cmd, NULL};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_neq(run_prog(argv, pmix_env, true), 0, "a late rank went unnoticed");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	FILE *f = fopen(log, "r");
	char text[16384];
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = 0;
	unlink(log);
	cr_assert(strstr(text, "did not complete within 1000 ms"), "no timeout message: %s", text);
	cr_assert(strstr(text, "allgather: ") && strstr(text, "timed out"),
		  "rank 0 did not report -ETIMEDOUT: %s", text);
	(void)t1;
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

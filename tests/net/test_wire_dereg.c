/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Deregistration with work in flight on the wire (kinet_mr_dereg's
 * contract): a region that outstanding WQEs use fails them with the local
 * protection error, and once kinet_mr_dereg has returned nothing reads or
 * writes it any more. The peer is stopped (SIGSTOP) so that its answers,
 * or its reads of a rendezvous source, come after the deregistration:
 *   - a READ and an atomic whose answers arrive after dereg: the region is
 *     made inaccessible right after dereg (a late write kills the
 *     process), then checked byte for byte, canaries included;
 *   - a WRITE by rendezvous (the target stops itself while it reads the
 *     source) and an eager one (sent from user memory while the target is
 *     stopped) whose source is deregistered and then replaced by another
 *     owner's bytes at the same address: the target never receives those
 *     bytes, and the WRITE does not complete with success.
 * The connection is in use before (the provider connects on first use).
 */
#define _GNU_SOURCE /* setns, MAP_FIXED */
#include <sys/mman.h>
#include <criterion/criterion.h>
#include "test_wire_common.h"

static const int one_link[][2] = {{0, 1}};

#define BIG (32u << 20)  /* the target's region, a write's source (> 16 MiB of reads in flight) */
#define RD_LEN (4u << 20) /* a read's length */
#define SEED_A 41u       /* the requester's source */
#define SEED_B 22u       /* the target's region */
#define SEED_NEW 99u     /* whoever owns the source's address afterwards */
#define MARGIN_MS 3000u  /* the machine may be loaded */

enum { K_READ = 1, K_ATOMIC, K_WRITE_RNDV, K_WRITE_EAGER };
#define K_NO_CLEANUP 0x10 /* the requester runs with FI_AV_REMOVE_CLEANUP=0 */

static uint64_t wqes(kinet_ctx *ctx)
{
	struct kinet_counters c;
	CK0(kinet_ctx_counters(ctx, &c));
	return c.wqes;
}

/* Waits until the engine has handed the WQEs posted so far to the wire. */
static void handed(kinet_ctx *ctx, uint64_t before)
{
	uint64_t end = tw_ms() + 10000;
	while (wqes(ctx) == before && tw_ms() < end)
		tw_sleep_ms(1);
	CK(wqes(ctx) > before);
	tw_sleep_ms(20); /* a rendezvous write's RTS leaves on the next pass */
}

/* Is process pid stopped? */
static int stopped(pid_t pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *c = strrchr(buf, ')');
	return c && c[1] == ' ' && c[2] == 'T';
}

/* The page-aligned mapping of a guarded region, for mprotect. */
static void guard_body(struct tu_region *r, int prot)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	CK(mprotect((uint8_t *)r->g.map + pg, r->g.maplen - 2 * pg, prot) == 0);
}

/* The requester: the WQE of kind k on a region that it deregisters while
 * the peer is stopped. */
static int req_side(int fd, int fd2, void *arg)
{
	(void)fd2;
	int k = (int)(intptr_t)arg;
	if (k & K_NO_CLEANUP)
		setenv("FI_AV_REMOVE_CLEANUP", "0", 1); /* the endpoint is closed instead */
	k &= ~K_NO_CLEANUP;
	if (k == K_WRITE_EAGER)
		setenv("KINET_NET_RNDV_BYTES", "0", 1); /* every write eager */
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	uint8_t d[KINET_MR_DESC_SIZE];
	struct kinet_mr_info big;
	CK(tw_xchg(fd, "", 0, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(d, sizeof(d), &big));
	long long pid = tw_sync(fd, 0);
	CK(pid > 0);
	struct tu_region r; /* read destination, atomic result */
	uint8_t *src = NULL; /* write source */
	kinet_mr *mr;
	if (k == K_READ || k == K_ATOMIC) {
		CK0(tu_region_alloc(&r, s.pd, k == K_READ ? RD_LEN : 4096, KINET_ACCESS_LOCAL_WRITE,
				    31));
		mr = r.mr;
	} else {
		src = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CK(src != MAP_FAILED);
		tu_fill_random(src, BIG, SEED_A);
		CK0(kinet_mr_reg(s.pd, src, BIG, KINET_ACCESS_LOCAL_WRITE, &mr));
	}
	/* the connection is up before the peer stops */
	kn_ticket_t w0;
	CK0(kn_get(s.d, s.buf + TW_L, kinet_mr_lkey(s.mr), big.addr, big.rkey, 64, &w0));
	CK0(kn_wait(s.d, w0));
	if (k != K_WRITE_RNDV) {
		/* stopped for sure before the request goes out (kill returns before
		 * the signal took effect: the peer could still answer it) */
		CK(kill((pid_t)pid, SIGSTOP) == 0);
		uint64_t end = tw_ms() + 20000;
		while (!stopped((pid_t)pid) && tw_ms() < end)
			tw_sleep_ms(1);
		CK(stopped((pid_t)pid));
	}
	uint64_t before = wqes(s.ctx);
	kn_ticket_t t;
	if (k == K_READ) {
		CK0(kn_get(s.d, r.buf, kinet_mr_lkey(mr), big.addr, big.rkey, RD_LEN, &t));
	} else if (k == K_ATOMIC) {
		CK0(kn_sq_reserve(s.d, 1, &t));
		kn_prep_atomic_fa(s.d, kn_wqe_ptr(s.d, t), t, tu_addr(r.buf + 64), kinet_mr_lkey(mr),
				  big.addr + 4096, big.rkey, 3);
		kn_sq_submit(s.d, t, 1);
	} else {
		CK0(kn_put(s.d, big.addr, big.rkey, src, kinet_mr_lkey(mr), BIG, &t));
	}
	handed(s.ctx, before);
	if (k == K_WRITE_RNDV) {
		/* the target stops itself once its first read has landed */
		uint64_t end = tw_ms() + 20000;
		while (!stopped((pid_t)pid) && tw_ms() < end)
			tw_sleep_ms(1);
		CK(stopped((pid_t)pid));
	}
	uint64_t t0 = tw_ms();
	CK0(kinet_mr_dereg(mr));
	uint64_t dt = tw_ms() - t0;
	fprintf(stderr, "[dereg %d] returned after %llu ms\n", k, (unsigned long long)dt);
	CK(dt < tw_net_ms() + MARGIN_MS); /* KINET_NET_TIMEOUT_MS + a margin */
	if (k == K_READ || k == K_ATOMIC) {
		guard_body(&r, PROT_NONE); /* a write from now on kills this process */
	} else {
		/* the address goes to another owner, with bytes of its own */
		CK(mmap(src, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			-1, 0) == src);
		tu_fill_random(src, BIG, SEED_NEW);
	}
	CK(kill((pid_t)pid, SIGCONT) == 0);
	int whole = 0;
	if (k == K_WRITE_RNDV) {
		/* the target may have read everything before it stopped: then the
		 * write completed before dereg, in full */
		int rc = kn_wait(s.d, t);
		CK(rc == 0 || rc == -EIO);
		if (rc == 0)
			whole = 1;
		else
			CK(kn_qp_error(s.d, NULL) == KN_SYND_LOCAL_PROT_ERR);
		fprintf(stderr, "[dereg %d] the write %s\n", k,
			whole ? "completed before dereg" : "failed (local protection error)");
	} else {
		tw_expect_fail(&s, t, KN_SYND_LOCAL_PROT_ERR);
	}
	tw_sleep_ms(500); /* the peer's answers, if any, arrive meanwhile */
	CK(tw_sync(fd, 5 + whole) == 5); /* the target checks what it holds */
	if (k == K_READ || k == K_ATOMIC) {
		guard_body(&r, PROT_READ | PROT_WRITE);
		uint8_t *exp = malloc(r.len);
		tu_fill_random(exp, r.len, 31);
		CK(memcmp(r.buf, exp, r.len) == 0);
		CK(tu_region_canaries_ok(&r));
		free(exp);
		r.mr = NULL;
		tu_region_free(&r);
	} else {
		CK(munmap(src, BIG) == 0);
	}
	/* the pair still works: a new QP, a read checked byte for byte */
	tw_qp_new(&s);
	CK0(kn_get(s.d, s.buf + TW_L, kinet_mr_lkey(s.mr), s.peer.addr + TW_Q + 5, s.peer.rkey,
		   100000, &t));
	CK0(kn_wait(s.d, t));
	{
		uint8_t *b = malloc(TW_LEN);
		tu_fill_random(b, TW_LEN, 2);
		CK(memcmp(s.buf + TW_L, b + TW_Q + 5, 100000) == 0);
		free(b);
	}
	CK(tw_sync(fd, 6) == 6);
	tw_close(&s);
	return 0;
}

/* The target: a large region; after the requester's WQE, checks that it
 * holds only its own bytes or the requester's original source. */
static int tgt_side(int fd, int fd2, void *arg)
{
	(void)fd2;
	int k = (int)(intptr_t)arg & ~K_NO_CLEANUP;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	uint8_t *big = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(big != MAP_FAILED);
	tu_fill_random(big, BIG, SEED_B);
	kinet_mr *mr;
	CK0(kinet_mr_reg(s.pd, big, BIG, KINET_ACCESS_ALL, &mr));
	uint8_t d[KINET_MR_DESC_SIZE], dummy[4];
	CK(kinet_mr_export(mr, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd, d, sizeof(d), dummy, sizeof(dummy)) == 0);
	CK(tw_sync(fd, (long long)getpid()) == 0);
	if (k == K_WRITE_RNDV) {
		/* stop in the middle of the reads of the requester's source */
		uint64_t end = tw_ms() + 20000;
		while (tw_direct(s.ctx) < (1u << 20) && tw_ms() < end)
			;
		CK(tw_direct(s.ctx) >= (1u << 20)); /* the 64-byte warm-up read counts too */
		raise(SIGSTOP);
	}
	/* stopped and continued by the requester meanwhile */
	long long v = tw_sync(fd, 5);
	CK(v == 5 || v == 6); /* 6: the write completed: all of it landed */
	uint8_t *mine = malloc(BIG), *theirs = malloc(BIG);
	tu_fill_random(mine, BIG, SEED_B);
	tu_fill_random(theirs, BIG, SEED_A);
	if (k == K_WRITE_RNDV || k == K_WRITE_EAGER) {
		size_t bad = 0, got = 0;
		for (size_t i = 0; i < BIG; i++) {
			if (big[i] == theirs[i] && big[i] != mine[i])
				got++;
			else if (big[i] != mine[i])
				bad++;
		}
		fprintf(stderr, "[dereg %d] target: %zu bytes of the source landed, %zu foreign\n",
			k, got, bad);
		CK(bad == 0); /* never the new owner's bytes */
		if (v == 6)
			CK(memcmp(big, theirs, BIG) == 0);
	} else {
		/* reads take nothing away; the atomic changed its word only */
		CK(memcmp(big, mine, 4096) == 0);
		CK(memcmp(big + 4104, mine + 4104, BIG - 4104) == 0);
	}
	free(mine);
	free(theirs);
	tw_qp_new(&s);
	CK(tw_sync(fd, 6) == 6);
	CK0(kinet_mr_dereg(mr));
	CK(munmap(big, BIG) == 0);
	tw_close(&s);
	return 0;
}

static void run(int k)
{
	tw_need_wire();
	struct tw_proc p[2] = {{.fn = req_side}, {.fn = tgt_side}};
	tw_run(p, 2, one_link, 1, (void *)(intptr_t)k, 60000);
	cr_assert(tw_exited_ok(&p[0]), "requester: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "target: status 0x%x", p[1].status);
}

Test(wire_dereg, read_answer_after_dereg)
{
	run(K_READ);
}

Test(wire_dereg, atomic_result_after_dereg)
{
	run(K_ATOMIC);
}

Test(wire_dereg, rendezvous_write_source_dereg)
{
	run(K_WRITE_RNDV);
}

Test(wire_dereg, eager_write_source_dereg)
{
	run(K_WRITE_EAGER);
}

/* Without FI_AV_REMOVE_CLEANUP the provider keeps a removed peer's
 * connection: the requester closes its whole endpoint instead (its QPs
 * fail, new descriptors work). */
Test(wire_dereg, eager_write_source_dereg_without_av_cleanup)
{
	run(K_WRITE_EAGER | K_NO_CLEANUP);
}

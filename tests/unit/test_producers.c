/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Third-party producers of mlx5 WQEs drive the software NIC unchanged.
 *
 * The producer here is written against the queue format only (the kn_qp
 * descriptor's SQ, doorbell record and register, the CQ), not against
 * kinet's posting code, and rings in each convention real producers use
 * (docs/hardware.md, "Producer conventions"):
 *   RDMA_CORE  record, then the first 8 bytes of the last WQE's ctrl segment
 *   VERBS_DB   a producer-index word (next index, opcode 0, ds 0, the QPN),
 *              the record, the word again (as GPU verbs libraries ring)
 *   NO_DBR     the producer-index word alone (no doorbell record ever)
 *   BF_DB      the whole WQE into the BlueFlame register (ascending, as one
 *              burst would), the record, then a producer-index word over it
 *   DBR_ONLY   the record alone
 * Its CQ is created with overrun ignore: the consumer never writes the CQ
 * doorbell record, and polls the owner bit only (which works because CQEs
 * start as 0xF1). Every WQE writes its own random bytes to its own place;
 * the data is checked byte for byte, every CQE's index too, through hundreds
 * of SQ laps, by one thread and by several threads sharing the QP (a lock
 * around the ring, as those libraries take), on the software NIC and on the
 * mlx5 backend over the rdma-core double (verbs and DevX queues: the CQ's
 * overrun-ignore flag reaches the device through ibv_create_cq_ex or cqc.oi).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kinet_config.h"
#include "../util/testutil.h"
#if KINET_HAVE_RDMA_HEADERS
#include "nic/mlx5/ops.h"
#endif

enum conv { RDMA_CORE, VERBS_DB, NO_DBR, BF_DB, DBR_ONLY };

#define DEPTH 32u
#define MSG 16u

struct prod {
	enum conv conv;
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *a, *b;
	kn_qp *d; /* only the queue addresses and sizes are used */
	struct tu_region src, dst;
	uint64_t n;          /* WQEs in all */
	atomic_ullong resv;  /* next index to hand out */
	atomic_ullong ready; /* every index below is written */
	atomic_ullong done;  /* CQEs consumed */
	pthread_mutex_t ring_lock, poll_lock;
	uint64_t rung;       /* producer index last rung (ring_lock) */
	atomic_int bad;      /* first failure (line) */
	char why[160];
	uint64_t fail_at;    /* a thread fails at this index, unpublished (0: none) */
};

/* Every wait of the producers is bounded, and stops at the first failure of
 * any thread: a failure is a message, never a hang. */
#define PROD_WAIT_NS 20000000000ull

static void fail(struct prod *p, int line, const char *what, uint64_t i)
{
	int zero = 0;
	if (atomic_compare_exchange_strong(&p->bad, &zero, line))
		snprintf(p->why, sizeof(p->why), "%s (WQE %llu)", what, (unsigned long long)i);
}

/* Backend of the next prod_open: 0 soft, 1 mlx5 verbs queues, 2 mlx5 DevX. */
static int g_backend;

static void prod_open(struct prod *p, enum conv conv, uint64_t n)
{
	memset(p, 0, sizeof(*p));
	p->conv = conv;
	p->n = n;
	pthread_mutex_init(&p->ring_lock, NULL);
	pthread_mutex_init(&p->poll_lock, NULL);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
#if KINET_HAVE_RDMA_HEADERS
	if (g_backend) {
		struct kinet_mlx5_emu_cfg c = {.ndev = 1, .link_layer = IBV_LINK_LAYER_ETHERNET,
					       .devx = g_backend == 2, .max_qp_wr = 32768};
		kinet_mlx5_emu_set_cfg(&c);
		kinet_mlx5_set_ops(kinet_mlx5_emu_ops());
		ca.backend = KINET_BACKEND_MLX5;
	}
#endif
	cr_assert_eq(kinet_open(&ca, &p->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(p->ctx, &p->pd), 0);
	struct kinet_qp_attr qa = {.sq_depth = DEPTH, .cq_flags = KINET_CQ_OVERRUN_IGNORE};
	cr_assert_eq(kinet_qp_create(p->pd, &qa, &p->a), 0);
	cr_assert_eq(kinet_cq_flags(kinet_qp_send_cq(p->a)), KINET_CQ_OVERRUN_IGNORE);
	struct kinet_qp_attr qb = {.sq_depth = DEPTH};
	cr_assert_eq(kinet_qp_create(p->pd, &qb, &p->b), 0);
	cr_assert_eq(kinet_qp_connect_local(p->a, p->b), 0);
	cr_assert_eq(kinet_qp_device(p->a, &p->d), 0);
	size_t len = (size_t)n * MSG;
	cr_assert_eq(tu_region_alloc(&p->src, p->pd, len, KINET_ACCESS_LOCAL_WRITE, 1000 + conv), 0);
	cr_assert_eq(tu_region_alloc(&p->dst, p->pd, len, KINET_ACCESS_ALL, 2000 + conv), 0);
}

/* WQEs of the last run the GPU engine executed (KINET_GPU_ENGINE): it runs
 * them from the SQ, never from BlueFlame copies */
static uint64_t last_gpu_wqes;

static struct kinet_counters prod_close(struct prod *p)
{
	struct kinet_counters c;
	/* the GPU engine's counts reach the counters when it gives the QP back */
	last_gpu_wqes = tu_engine_settle(p->a, 5000);
	cr_assert_neq(last_gpu_wqes, UINT64_MAX, "the GPU engine kept the QP");
	/* given back, its counts are folded in at the CPU engine's next pass:
	 * the QP's posted count, folded last, says when */
	for (int k = 0; last_gpu_wqes && k < 5000; k++) {
		struct kinet_qp_counters qc;
		cr_assert_eq(kinet_qp_counters(p->a, &qc), 0);
		if (qc.posted >= atomic_load(&p->done))
			break;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	cr_assert_eq(kinet_ctx_counters(p->ctx, &c), 0);
#if KINET_HAVE_RDMA_HEADERS
	if (g_backend) /* what the software NIC behind the double counted */
		cr_assert_eq(kinet_mlx5_emu_counters(0, &c), 0);
#endif
	cr_assert(tu_region_canaries_ok(&p->dst));
	tu_region_free(&p->src);
	tu_region_free(&p->dst);
	cr_assert_eq(kinet_qp_destroy(p->a), 0);
	cr_assert_eq(kinet_qp_destroy(p->b), 0);
	cr_assert_eq(kinet_pd_free(p->pd), 0);
	cr_assert_eq(kinet_close(p->ctx), 0);
	return c;
}

static inline uint64_t be64(uint64_t v) { return kn_htobe64(v); }
static inline uint32_t be32(uint32_t v) { return kn_htobe32(v); }

/* The producer-index word: next index, opcode 0, ds 0, the QP number. */
static uint64_t pi_word(const struct prod *p, uint64_t pi)
{
	uint32_t w[2] = {be32((uint32_t)(pi & 0xffff) << 8), be32(p->d->qpn << 8)};
	uint64_t v;
	memcpy(&v, w, 8);
	return v;
}

/* An RDMA write WQE with index i (one WQEBB), built from the format alone. */
static void build(const struct prod *p, uint64_t i, uint64_t q[8])
{
	memset(q, 0, 64);
	uint32_t *c = (uint32_t *)q;
	c[0] = be32(((uint32_t)(i & 0xffff) << 8) | KN_OPCODE_RDMA_WRITE);
	c[1] = be32((p->d->qpn << 8) | 3); /* ctrl, raddr, data */
	((uint8_t *)q)[11] = KN_WQE_CTRL_CQ_UPDATE;
	q[2] = be64(tu_addr(p->dst.buf + i * MSG)); /* raddr segment */
	c[6] = be32(kinet_mr_rkey(p->dst.mr));
	c[8] = be32(MSG); /* data segment: byte count, lkey, address */
	c[9] = be32(tu_lkey(&p->src));
	q[5] = be64(tu_addr(p->src.buf + i * MSG));
}

static void ring(struct prod *p, uint64_t pi, const uint64_t *last)
{
	volatile uint32_t *dbr = &p->d->dbrec[KN_SND_DBR];
	volatile uint64_t *reg = (volatile uint64_t *)p->d->db;
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* WQEs before any doorbell */
	switch (p->conv) {
	case RDMA_CORE:
		*dbr = be32((uint32_t)(pi & 0xffff));
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		*reg = last[0];
		break;
	case VERBS_DB:
		*reg = pi_word(p, pi);
		*dbr = be32((uint32_t)(pi & 0xffff));
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		*reg = pi_word(p, pi);
		break;
	case NO_DBR:
		*reg = pi_word(p, pi);
		break;
	case BF_DB:
		for (int k = 0; k < 8; k++)
			reg[k] = last[k];
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		*dbr = be32((uint32_t)(pi & 0xffff));
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		*reg = pi_word(p, pi);
		break;
	case DBR_ONLY:
		*dbr = be32((uint32_t)(pi & 0xffff));
		break;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Consumes the CQEs that are there (owner bit only, no CQ doorbell record). */
static void poll(struct prod *p)
{
	if (pthread_mutex_trylock(&p->poll_lock))
		return;
	uint64_t d = atomic_load(&p->done);
	for (;;) {
		struct kn_cqe64 *c =
			(struct kn_cqe64 *)(p->d->cq + (d & (p->d->cq_cqe_cnt - 1)) * KN_CQE_SIZE);
		uint8_t own = __atomic_load_n(&c->op_own, __ATOMIC_ACQUIRE);
		if ((own & 1) != ((d / p->d->cq_cqe_cnt) & 1))
			break;
		if ((own >> 4) != KN_CQE_REQ)
			fail(p, __LINE__, "error CQE", d);
		if (kn_be16toh(c->wqe_counter) != (uint16_t)d)
			fail(p, __LINE__, "CQE names another WQE", d);
		d++;
	}
	atomic_store(&p->done, d);
	pthread_mutex_unlock(&p->poll_lock);
}

static int post_fn(int tid, int nt, void *arg)
{
	(void)tid;
	(void)nt;
	struct prod *p = arg;
	uint64_t t0 = kn_now_ns();
	for (;;) {
		uint64_t i = atomic_fetch_add(&p->resv, 1);
		if (i >= p->n)
			break;
		if (p->fail_at && i == p->fail_at) {
			/* a producer that dies holding index i: the WQEs after it
			 * are never published */
			fail(p, __LINE__, "injected failure", i);
			return 1;
		}
		/* the slot's previous WQE is complete (its CQE consumed) */
		while (i >= DEPTH && atomic_load(&p->done) <= i - DEPTH) {
			poll(p);
			if (atomic_load(&p->bad) || kn_now_ns() - t0 > PROD_WAIT_NS) {
				fail(p, __LINE__, "no room in the SQ", i);
				return 1;
			}
			sched_yield();
		}
		uint64_t q[8];
		build(p, i, q);
		memcpy(p->d->sq + (i & (p->d->sq_wqe_cnt - 1)) * KN_SEND_WQE_BB, q, 64);
		/* publish in order, ring under the lock: the thread with the
		 * index before may have failed, or be stuck */
		while (atomic_load(&p->ready) != i) {
			if (atomic_load(&p->bad) || kn_now_ns() - t0 > PROD_WAIT_NS) {
				fail(p, __LINE__, "the WQEs before this one never published", i);
				return 1;
			}
			sched_yield();
		}
		atomic_store(&p->ready, i + 1);
		pthread_mutex_lock(&p->ring_lock);
		uint64_t r = atomic_load(&p->ready);
		if (r > p->rung) {
			uint64_t last[8];
			build(p, r - 1, last);
			ring(p, r, last);
			p->rung = r;
		}
		pthread_mutex_unlock(&p->ring_lock);
	}
	while (atomic_load(&p->done) < p->n && !atomic_load(&p->bad)) {
		poll(p);
		if (kn_now_ns() - t0 > PROD_WAIT_NS) {
			fail(p, __LINE__, "completions missing", atomic_load(&p->done));
			return 1;
		}
		sched_yield();
	}
	return atomic_load(&p->bad);
}

static struct kinet_counters run(enum conv conv, int threads, uint64_t n)
{
	struct prod p;
	prod_open(&p, conv, n);
	int rc = kinet_host_exec(threads, post_fn, &p);
	cr_assert_eq(rc, 0, "%s", p.why);
	cr_assert_eq(atomic_load(&p.done), n);
	cr_assert_eq(memcmp(p.src.buf, p.dst.buf, (size_t)n * MSG), 0,
		     "the target differs from what was written");
	return prod_close(&p);
}

#define LAPS 200
#define N ((uint64_t)DEPTH * LAPS)

Test(producers, rdma_core_last_wqe_word)
{
	struct kinet_counters c = run(RDMA_CORE, 1, N);
	cr_assert_gt(c.db_wqe_words, 0);
	cr_assert_eq(c.db_pi_words, 0);
	cr_assert_eq(c.db_foreign, 0);
	c = run(RDMA_CORE, 4, N);
	cr_assert_gt(c.db_wqe_words, 0);
}

Test(producers, verbs_producer_index_word)
{
	struct kinet_counters c = run(VERBS_DB, 1, N);
	cr_assert_gt(c.db_pi_words, 0);
	cr_assert_eq(c.db_wqe_words, 0);
	c = run(VERBS_DB, 4, N);
	cr_assert_gt(c.db_pi_words, 0);
}

/* No doorbell record ever, through a 16-bit wrap of the producer index: a
 * record that stays 0 is not a producer (it would look like one once the
 * consumer index nears 65536). */
Test(producers, no_doorbell_record)
{
	struct kinet_counters c = run(NO_DBR, 1, 70000);
	cr_assert_gt(c.db_pi_words, 0);
	cr_assert_eq(c.dbr_only, 0);
	c = run(NO_DBR, 4, N);
	cr_assert_gt(c.db_pi_words, 0);
}

/* BlueFlame followed by a producer-index word: the body stays usable. */
Test(producers, blueflame_then_doorbell_word)
{
	/* the register is written in ascending order as the engine reads it: a
	 * WQE whose copy it only saw torn runs from the SQ (bf_mismatch); the
	 * data check above says no torn copy ever ran */
	struct kinet_counters c = run(BF_DB, 1, N);
	if (!last_gpu_wqes)
		cr_assert_gt(c.bf_wqes, 0, "the register copies were never used");
	cr_assert_leq(c.bf_wqes + c.bf_mismatch, N);
	c = run(BF_DB, 4, N);
	if (!last_gpu_wqes)
		cr_assert_gt(c.bf_wqes, 0);
	cr_assert_leq(c.bf_wqes + c.bf_mismatch, N);
}

/* A producer thread that fails with an index reserved and not published
 * (here: made to, at index 100 of 4 threads): the threads holding the
 * indexes after it wait for it to publish, and must stop, bounded, on its
 * failure. The run ends with that failure, promptly. */
Test(producers, failed_producer_stops_the_others)
{
	struct prod p;
	prod_open(&p, RDMA_CORE, N);
	p.fail_at = 100;
	uint64_t t0 = kn_now_ns();
	int rc = kinet_host_exec(4, post_fn, &p);
	uint64_t took = kn_now_ns() - t0;
	cr_assert_neq(rc, 0, "a run with a failed producer passed");
	cr_assert(strstr(p.why, "injected failure (WQE 100)"), "failure: %s", p.why);
	cr_assert_lt(took, PROD_WAIT_NS / 2, "the other producers took %llu ms to stop",
		     (unsigned long long)(took / 1000000));
	/* WQEs 0 to 99 were published before the failure and may all have
	 * completed; none after index 100 may */
	cr_assert_leq(atomic_load(&p.done), 100, "WQEs past the unpublished one completed");
	prod_close(&p);
}

Test(producers, doorbell_record_only)
{
	struct kinet_counters c = run(DBR_ONLY, 1, N);
	cr_assert_eq(c.db_wqe_words + c.db_pi_words, 0);
	c = run(DBR_ONLY, 4, N);
	cr_assert_eq(c.doorbells, 0);
}

/* A word that names another QP rings nothing. */
Test(producers, foreign_word_ignored)
{
	struct prod p;
	prod_open(&p, NO_DBR, 4);
	uint64_t q[8];
	build(&p, 0, q);
	memcpy(p.d->sq, q, 64);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	uint32_t w[2] = {be32(1u << 8), be32((p.d->qpn + 1) << 8)};
	memcpy((void *)p.d->db, w, 8);
	/* the engine sees the word on one of its passes (a loaded machine may
	 * not run it for a while): up to 2 s */
	struct kinet_counters c;
	for (int k = 0; k < 2000; k++) {
		cr_assert_eq(kinet_ctx_counters(p.ctx, &c), 0);
		if (c.db_foreign)
			break;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	cr_assert_eq(c.db_foreign, 1);
	cr_assert_eq(c.wqes, 0, "a doorbell for another QP ran a WQE");
	ring(&p, 1, q);
	poll(&p);
	for (int k = 0; k < 1000 && atomic_load(&p.done) < 1; k++) {
		nanosleep(&(struct timespec){0, 1000000}, NULL);
		poll(&p);
	}
	cr_assert_eq(atomic_load(&p.done), 1);
	cr_assert_eq(memcmp(p.src.buf, p.dst.buf, MSG), 0);
	prod_close(&p);
}

#if KINET_HAVE_RDMA_HEADERS
/* The same producers on the mlx5 backend over the rdma-core double. */
static void on_mlx5(int mode)
{
	g_backend = mode;
	struct kinet_counters c = run(VERBS_DB, 1, N);
	cr_assert_gt(c.db_pi_words, 0);
	c = run(NO_DBR, 1, N);
	cr_assert_gt(c.db_pi_words, 0);
	c = run(BF_DB, 4, N);
	cr_assert_gt(c.bf_wqes, 0);
	c = run(RDMA_CORE, 4, N);
	cr_assert_gt(c.db_wqe_words, 0);
	if (mode == 1)
		cr_assert_gt(kinet_mlx5_emu_calls("create_cq_ex"), 0,
			     "the overrun-ignore CQ did not come from ibv_create_cq_ex");
	g_backend = 0;
	kinet_mlx5_set_ops(NULL);
}

Test(producers, mlx5_verbs_queues) { on_mlx5(1); }
Test(producers, mlx5_devx_queues) { on_mlx5(2); }
#endif

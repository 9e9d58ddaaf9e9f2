/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.c - the software NIC's engine threads.
 *
 * Each engine serves a set of QPs. A pass over a QP: ring for the CPU proxy
 * (doorbell mode cpu), find the producer index from the doorbell record or
 * the doorbell register (either alone is enough), then parse, check and
 * execute WQEs in order and write their CQEs. A QP in ERR has every posted
 * WQE (send and receive) flushed. An idle engine polls for
 * KINET_ENGINE_SPIN_US, then sleeps in growing steps up to
 * KINET_ENGINE_SLEEP_US (with a wire, until the network has something, at
 * most that long). While polling it yields its CPU only where other threads
 * want it (KINET_ENGINE_YIELD, kinet_idle_poll).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <unistd.h>
#include "nic/soft/soft.h"
#include "nic/soft/wire/wire.h"

#define BURST 32 /* WQEs per QP per pass: fairness between QPs */
#define INFL 64  /* WQEs with GPU copies in flight per QP (power of two) */

/* A WQE executed, its copies (and those of the WQEs before it) possibly
 * still in flight: completed in WQE order once a fence at or after it has. */
struct infl {
	void *fence; /* recorded after this WQE's copies, or NULL (a later one covers it) */
	uint64_t total;
	uint16_t wqe_idx;
	uint8_t opcode, signaled;
};

/* The engine's own state of one QP (soft_qp(qp)->engine_priv), touched by its engine
 * inside a pass, or by whoever holds that engine's pass lock. */
struct eng_qp {
	uint32_t bf_idx;   /* BlueFlame copy below: its WQE index, bit 16 valid */
	uint32_t bf_want[2]; /* per register: the WQE its last word names when that
			      * WQE had no good copy yet (bit 16 valid): looked at again
			      * when the WQE is next to run (ascending BlueFlame stores
			      * put the ctrl word there before the body) */
	uint32_t head, tail; /* in-flight WQEs ring[head..tail) */
	uint64_t pub;      /* last sq_ci published in sq_ci_pub */
	uint8_t bf[KN_SEND_WQE_BB];
	uint64_t bf_seen[2][KN_SEND_WQE_BB / 8]; /* register words 1..7 when last looked at */
	uint32_t bf_bad; /* a register body that differed from the SQ: its WQE index, bit 16 */
	uint64_t last_ctrl; /* first 8 bytes of the last WQE consumed (0: none since reset) */
	uint64_t infl_since; /* when the oldest copy in flight began waiting (0: none) */
	bool infl_warned;    /* that wait was reported */
	struct infl ring[INFL];
};

/* Each engine's lock, counters and state on cache lines of its own: the
 * engines never write a line another engine or an idle QP's producer uses. */
struct engine {
	pthread_t th;
	pthread_mutex_t lock; /* held during a pass; taken to change the QP list,
			       * and by writers of the key table (stop the world) */
	kinet_qp **qps;
	int nqps, cap;
	atomic_bool stop;
	atomic_bool kick; /* a QP was added: skip the sleep */
	int wake_fd;      /* eventfd: an engine with no QP waits on it (attach, close) */
	struct kinet_soft_nic *nic;
	struct kinet_ctr_blk ctr; /* this engine's counters (kinet_ctx_counters) */
	struct soft_req req;  /* scratch for one WQE */
	struct soft_req done; /* scratch for a deferred CQE */
} __attribute__((aligned(64)));

struct kinet_soft_nic {
	kinet_ctx *ctx;
	int n;
	struct engine *eng;
	uint64_t spin_ns, sleep_ns;
};

void soft_resp_set_held(kinet_ctx *ctx);

/* ---- doorbells --------------------------------------------------------------
 * What a producer may have written (docs/hardware.md, "Producer conventions"):
 *  - the doorbell record (big-endian, low 16 bits: the producer index); some
 *    producers never write it (GPU verbs libraries' "no DBR" mode), so it
 *    counts only when it moved;
 *  - the 8-byte doorbell register word, in either of the UAR's two registers
 *    (mlx5 drivers ring them in turn; qp->bf_alt apart), in one of two forms,
 *    as a ConnectX reads it: the first 8 bytes of the last WQE's ctrl segment
 *    (rdma-core, kinet: ds >= 1, the index names that WQE, the producer is
 *    past its WQEBBs), or a word no WQE can have (ds 0: GPU verbs libraries
 *    ring with the next producer index, opcode 0, ds 0 and the QP number); a
 *    word that names another QP is ignored, as the NIC ignores a doorbell for
 *    a QP that is not its own; of the producer indexes named, the furthest
 *    ahead counts;
 *  - a BlueFlame write: a whole 64-byte WQE in a register, alone (rdma-core,
 *    kinet: ascending stores, the ctrl word first) or followed by a
 *    producer-index word over its ctrl word (GPU verbs libraries: the body
 *    stays in words 1..7, the ctrl word is the SQ slot's). A CPU's stores to
 *    the register are not one 64-byte burst as a write-combined PCIe write
 *    is, so a copy may be incomplete when first seen, or torn by a later
 *    ringer: the engine executes a register copy only when it equals the SQ
 *    slot (which hardware may read at any time, e.g. to retransmit), looks
 *    again when the WQE is next to run, and counts the copies that still
 *    differ (bf_mismatch) instead of running them. */

static volatile uint64_t *reg_at(kinet_qp *qp, unsigned b)
{
	return (volatile uint64_t *)(qp->db + (b ? qp->bf_alt : 0u));
}

static unsigned nregs(kinet_qp *qp)
{
	return qp->bf_alt ? 2u : 1u;
}

/* Register b's copy of WQE t, when its words 1..7 look like a BlueFlame
 * body: ctrl is the WQE's ctrl word (from the register, or from the SQ when
 * a producer-index word overwrote it). */
static void bf_take(kinet_qp *qp, struct soft_qp *s, struct eng_qp *sp, unsigned b, uint16_t t,
		    uint64_t ctrl)
{
	if ((uint16_t)(t - (uint16_t)s->sq_ci) >= qp->sq_cnt)
		return; /* consumed already, or not a WQE ahead of us */
	if ((sp->bf_idx & 0x10000u) && (uint16_t)sp->bf_idx == t)
		return; /* a good copy is held already */
	uint32_t qpn_ds;
	memcpy(&qpn_ds, (const uint8_t *)&ctrl + 4, 4);
	uint32_t ds = kn_be32toh(qpn_ds) & 0x3f;
	if (ds == 0 || ds > KN_SEND_WQE_BB / 16)
		return; /* more than one WQEBB: no BlueFlame copy */
	const volatile uint64_t *reg = reg_at(qp, b);
	uint64_t body[KN_SEND_WQE_BB / 8];
	body[0] = ctrl;
	bool fresh = false;
	uint64_t any = 0;
	for (unsigned i = 1; i < KN_SEND_WQE_BB / 8; i++) {
		body[i] = __atomic_load_n(&reg[i], __ATOMIC_RELAXED);
		fresh |= body[i] != sp->bf_seen[b][i];
		any |= body[i];
		sp->bf_seen[b][i] = body[i];
	}
	if (!any)
		return; /* 8-byte doorbells only: no BlueFlame body was ever written */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	const uint8_t *slot = qp->sq + (t & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB;
	if (memcmp(body, slot, sizeof(body)) == 0) {
		memcpy(sp->bf, body, sizeof(body));
		sp->bf_idx = t | 0x10000u;
		sp->bf_bad = 0;
		sp->bf_want[0] = sp->bf_want[1] = 0;
		return;
	}
	sp->bf_want[b] = t | 0x10000u; /* once more when it is next to run */
	if (fresh)
		sp->bf_bad = t | 0x10000u; /* counted if it runs without a good copy */
}

/* The BlueFlame part of register b's word w (either form). */
static void reg_bf(kinet_qp *qp, struct soft_qp *s, struct eng_qp *sp, unsigned b, uint64_t w)
{
	uint32_t a, c;
	memcpy(&a, &w, 4);
	memcpy(&c, (const uint8_t *)&w + 4, 4);
	uint16_t idx = (uint16_t)(kn_be32toh(a) >> 8);
	if ((kn_be32toh(c) & 0x3f) != 0) {
		bf_take(qp, s, sp, b, idx, w);
		return;
	}
	uint64_t ctrl;
	memcpy(&ctrl, qp->sq + ((uint16_t)(idx - 1) & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB, 8);
	if (kn_wqe_index_of((const struct kn_wqe_ctrl_seg *)&ctrl) == (uint16_t)(idx - 1))
		bf_take(qp, s, sp, b, (uint16_t)(idx - 1), ctrl);
}

/* Keeps the producer index furthest ahead of the consumer (an older word in
 * the other register names less, or a consumed index). */
static void db_target_offer(kinet_qp *qp, struct soft_qp *s, uint16_t p)
{
	uint16_t ci = (uint16_t)s->sq_ci;
	uint32_t d = (uint16_t)(p - ci);
	if (d == 0 || d > qp->sq_cnt)
		return; /* names nothing new, or not a sane producer */
	if (s->db_target & 0x10000u) {
		uint32_t d0 = (uint16_t)((uint16_t)s->db_target - ci);
		if (d0 != 0 && d0 <= qp->sq_cnt && d0 > d)
			return;
	}
	s->db_target = p | 0x10000u; /* bit 16: valid */
}

/* A new value of doorbell register b. */
static void reg_word(kinet_qp *qp, struct soft_qp *s, struct eng_qp *sp, unsigned b, uint64_t w)
{
	uint32_t a, c;
	memcpy(&a, &w, 4);
	memcpy(&c, (const uint8_t *)&w + 4, 4);
	uint32_t opmod_idx_op = kn_be32toh(a), qpn_ds = kn_be32toh(c);
	if ((qpn_ds >> 8) != qp->qpn) {
		KINET_COUNT(qp->ctx, c_db_foreign, 1);
		KINET_QCOUNT_OWN(qp, KQ_DB_FOREIGN, 1);
		return;
	}
	uint16_t idx = (uint16_t)(opmod_idx_op >> 8);
	uint32_t ds = qpn_ds & 0x3f;
	if (ds == 0) {
		/* no WQE has ds 0: the next producer index */
		KINET_COUNT(qp->ctx, c_db_pi, 1);
		KINET_QCOUNT_OWN(qp, KQ_DB_PI, 1);
		s->db_form = KINET_TR_DB_PI;
		db_target_offer(qp, s, idx);
	} else {
		/* the ctrl word of the last WQE: the producer is past its WQEBBs */
		KINET_COUNT(qp->ctx, c_db_wqe, 1);
		KINET_QCOUNT_OWN(qp, KQ_DB_WQE, 1);
		if (w == sp->last_ctrl)
			/* the WQE consumed last: the doorbell record ran it already,
			 * and this word, seen after it, names nothing new. Its index
			 * cannot tell: a WQE that claims the index of another lap
			 * (refused when it ran) would otherwise name a whole lap of
			 * WQEs beyond the consumer */
			return;
		s->db_form = KINET_TR_DB_WQE;
		db_target_offer(qp, s, (uint16_t)(idx + (ds * 16 + 63) / 64));
	}
	reg_bf(qp, s, sp, b, w);
}

/* The WQE at the consumer has no good register copy, and a register's last
 * word named it: look at that register again (its body may have landed
 * since). */
static void bf_retake(kinet_qp *qp, struct soft_qp *s, struct eng_qp *sp)
{
	uint32_t want = (uint16_t)s->sq_ci | 0x10000u;
	for (unsigned b = 0; b < nregs(qp); b++) {
		if (sp->bf_want[b] != want)
			continue;
		sp->bf_want[b] = 0;
		uint64_t w = __atomic_load_n(reg_at(qp, b), __ATOMIC_ACQUIRE);
		if (w == s->last_db_word[b])
			reg_bf(qp, s, sp, b, w);
	}
}

/* Number of WQEBBs published beyond the consumer index (0 if none). */
static uint32_t published(kinet_qp *qp, bool *via_dbr_only)
{
	struct soft_qp *s = soft_qp(qp);
	struct eng_qp *sp = s->engine_priv;
	uint16_t ci = (uint16_t)s->sq_ci;
	uint32_t dbr = __atomic_load_n(&qp->dbrec[KN_SND_DBR], __ATOMIC_ACQUIRE);
	for (unsigned b = 0; b < nregs(qp); b++) {
		uint64_t reg = __atomic_load_n(reg_at(qp, b), __ATOMIC_ACQUIRE);
		if (reg != s->last_db_word[b]) {
			s->last_db_word[b] = reg;
			KINET_COUNT(qp->ctx, c_doorbells, 1);
			KINET_QCOUNT_OWN(qp, KQ_DOORBELLS, 1);
			reg_word(qp, s, sp, b, reg);
		}
	}
	if (dbr != s->dbr_seen) {
		/* the record moved: a producer that writes it */
		s->dbr_seen = dbr;
		s->dbr_target = (uint16_t)kn_be32toh(dbr) | 0x10000u;
	}
	if ((sp->bf_idx & 0x10000u) && (uint16_t)((uint16_t)sp->bf_idx - ci) >= qp->sq_cnt)
		sp->bf_idx = 0; /* its WQE was consumed from the SQ */
	uint32_t d_dbr = 0, d_reg = 0;
	if (s->dbr_target & 0x10000u) {
		d_dbr = (uint16_t)((uint16_t)s->dbr_target - ci);
		if (d_dbr == 0 || d_dbr > qp->sq_cnt) {
			s->dbr_target = 0; /* consumed (or not a sane producer): forget it */
			d_dbr = 0;
		}
	}
	if (s->db_target & 0x10000u) {
		d_reg = (uint16_t)((uint16_t)s->db_target - ci);
		if (d_reg == 0 || d_reg > qp->sq_cnt) {
			s->db_target = 0;
			d_reg = 0;
		}
	}
	*via_dbr_only = d_dbr > d_reg;
	if (d_dbr > d_reg)
		s->db_form = KINET_TR_DB_DBR;
	return d_dbr > d_reg ? d_dbr : d_reg;
}

/* Flushes every published WQE of a QP in ERR. */
static int flush_sq(kinet_qp *qp, struct soft_req *r)
{
	struct soft_qp *s = soft_qp(qp);
	bool dummy;
	uint32_t avail = published(qp, &dummy);
	int n = 0;
	while (avail > 0) {
		const struct kn_wqe_ctrl_seg *c =
			(const void *)(qp->sq + (s->sq_ci & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB);
		uint32_t ds = kn_be32toh(c->qpn_ds) & 0x3f;
		uint32_t nbb = ds ? (ds * 16 + 63) / 64 : 1;
		if (nbb > avail)
			nbb = avail;
		r->opcode = kn_wqe_opcode_of(c);
		r->wqe_idx = (uint16_t)s->sq_ci; /* the slot's own index */
		r->total = 0;
		if (soft_req_cqe(qp, r, KN_SYND_WR_FLUSH_ERR))
			break; /* CQ full: later */
		KINET_QCOUNT_OWN(qp, KQ_POSTED, 1);
		KINET_QCOUNT_OWN(qp, KQ_COMPLETED, 1);
		struct eng_qp *sp = s->engine_priv;
		sp->bf_idx = 0;
		memcpy(&sp->last_ctrl, c, 8);
		s->sq_ci += nbb;
		avail -= nbb;
		n++;
	}
	return n;
}

/* A doorbell rung on a QP in RESET or INIT: the NIC ignores it (the WQEs
 * run once the QP reaches RTS); counted, and logged once per context. */
static void not_ready_doorbell(kinet_qp *qp, struct soft_qp *s, int state)
{
	if (!atomic_load(&s->nr_armed))
		return; /* entering RESET: the old doorbells are not cleared yet */
	uint32_t dbr = __atomic_load_n(&qp->dbrec[KN_SND_DBR], __ATOMIC_RELAXED);
	uint64_t r0 = __atomic_load_n(reg_at(qp, 0), __ATOMIC_RELAXED);
	uint64_t r1 = nregs(qp) > 1 ? __atomic_load_n(reg_at(qp, 1), __ATOMIC_RELAXED) : 0;
	if (dbr == s->nr_dbr && r0 == s->nr_reg[0] && r1 == s->nr_reg[1])
		return;
	s->nr_dbr = dbr;
	s->nr_reg[0] = r0;
	s->nr_reg[1] = r1;
	KINET_QCOUNT_OWN(qp, KQ_DB_NOT_READY, 1);
	if (!atomic_exchange(&soft_ctx(qp->ctx)->nr_warned, true))
		KLOG_WARN("qp 0x%x: doorbell rung while the QP is in %s: ignored until it reaches "
			  "RTS (logged once per context; counters.db_not_ready counts them per QP)",
			  qp->qpn, kinet_qp_state_str(state));
}

/* Fault injection at a WQE (the rules of the context, docs/lifecycle.md):
 * 1 when the WQE must wait (delay, cqfull, silent: s->hold_*), else 0 with
 * *synd set when the WQE is to fail (an injected error, or a silent peer's
 * timeout). */
static int fault_wqe(kinet_qp *qp, struct soft_qp *s, const struct soft_req *r, uint32_t *synd)
{
	uint64_t now = kn_now_ns();
	if (s->hold_kind) {
		if (now < s->hold_until_ns)
			return 1;
		if (s->hold_kind == KF_SILENT)
			*synd = SOFT_REASON(KN_SYND_TRANSPORT_RETRY_EXC_ERR, KINET_REASON_PEER_GONE);
		s->hold_kind = 0;
		s->hold_done_ci = s->sq_ci | (1ull << 63);
		return 0;
	}
	if (s->hold_done_ci == (s->sq_ci | (1ull << 63))) {
		s->hold_done_ci = 0; /* held already: it runs now */
		return 0;
	}
	struct kinet_fault_set *fs = soft_ctx(qp->ctx)->faults;
	const struct kinet_fault_rule *f = fs ? kinet_fault_match(fs, KF_AT_WQE, qp->qpn, r->opcode)
					      : NULL;
	if (!f)
		return 0;
	KINET_QCOUNT_OWN(qp, KQ_FAULTS, 1);
	switch (f->action) {
	case KF_ERROR:
		*synd = SOFT_REASON(f->synd, KINET_REASON_INJECTED);
		return 0;
	case KF_SILENT:
		s->hold_until_ns = now + (uint64_t)KT(NET_TIMEOUT_MS) * 1000000ull;
		break;
	default: /* delay, cqfull */
		s->hold_until_ns = now + f->us * 1000ull;
		break;
	}
	s->hold_kind = (uint8_t)f->action;
	KLOG_DBG("qp 0x%x: WQE %u: injected %s", qp->qpn, (unsigned)(uint16_t)s->sq_ci,
		 kinet_fault_action_str(f->action));
	return 1;
}

int kinet_soft_fault_rx(kinet_qp *t, uint8_t op, uint8_t *p, uint32_t n)
{
	struct kinet_fault_set *fs = soft_ctx(t->ctx)->faults;
	const struct kinet_fault_rule *f = fs ? kinet_fault_match(fs, KF_AT_RX, t->qpn, op) : NULL;
	if (!f)
		return 0;
	KINET_QCOUNT(t, KQ_FAULTS, 1);
	KLOG_DBG("qp 0x%x: injected %s on a received request", t->qpn,
		 kinet_fault_action_str(f->action));
	if (f->action == KF_DROP)
		return 1;
	if (f->action == KF_DUP)
		return 2;
	if (f->byte < n)
		p[f->byte] ^= 0x5a; /* corrupt */
	return 0;
}

static void to_error(kinet_qp *qp)
{
	int old = atomic_exchange(&qp->state, KINET_QPS_ERR);
	if (old != KINET_QPS_ERR)
		KLOG_DBG("qp 0x%x: %s -> ERR", qp->qpn, kinet_qp_state_str(old));
}

/* ---- WQEs with GPU copies in flight ----------------------------------------
 * A write or read whose local and remote memory are both GPU memory has its
 * copies only enqueued (copy_async) on the engine thread's stream; the WQE
 * joins the QP's in-flight ring, and a fence recorded after the last copy of
 * the pass covers it and the WQEs before it (a stream completes in order).
 * CQEs are written strictly in WQE order, each once a fence at or after its
 * WQE completed, i.e. once its data is visible (docs/ordering.md). While the
 * ring holds anything, only such writes and reads execute: any other WQE
 * (its effect would be visible at once: host memory, atomics, receive CQEs)
 * waits until the ring is empty. */

/* Does a request touch GPU memory on this side (staged by the wire)? */
static bool wire_gpu(const struct soft_req *r)
{
	for (int i = 0; i < r->niov; i++)
		if (r->iov[i].kind != KINET_MEM_HOST)
			return true;
	return false;
}

static bool infl_busy(const struct eng_qp *sp)
{
	return sp->head != sp->tail;
}

/* Could this request's copies be left in flight? (The responder decides per
 * piece: GPU memory on both sides.) */
static bool infl_candidate(kinet_qp *qp, const struct soft_req *r)
{
	if (soft_qp(qp)->wire || !kinet_cuda || !kinet_cuda->copy_async || !r->total ||
	    (r->opcode != KN_OPCODE_RDMA_WRITE && r->opcode != KN_OPCODE_RDMA_READ))
		return false;
	for (int i = 0; i < r->niov; i++)
		if (r->iov[i].len && r->iov[i].kind != KINET_MEM_CUDA)
			return false;
	return true;
}

static void infl_push(struct eng_qp *sp, const struct soft_req *r)
{
	struct infl *f = &sp->ring[sp->tail++ & (INFL - 1)];
	f->fence = NULL;
	f->total = r->total;
	f->wqe_idx = r->wqe_idx;
	f->opcode = r->opcode;
	f->signaled = r->signaled;
}

/* After a pass: one fence after the last WQE enqueued. -EIO: none could be
 * recorded (the CUDA module reports why). */
static int infl_fence(struct eng_qp *sp)
{
	if (!infl_busy(sp))
		return 0;
	struct infl *last = &sp->ring[(sp->tail - 1) & (INFL - 1)];
	if (last->fence)
		return 0;
	return kinet_cuda->fence(&last->fence);
}

/* Writes the CQEs of ring[head, end) into their reserved slots. synd: 0,
 * or a copy among them failed: the first completes with that syndrome (the
 * QP goes to ERR first), the others are flushed (RC: nothing after an error
 * completes successfully). */
static void infl_complete(struct engine *e, kinet_qp *qp, struct eng_qp *sp, uint32_t end,
			  uint32_t synd)
{
	struct soft_req *d = &e->done;
	sp->infl_since = 0; /* the oldest copy landed (or failed): a new wait begins */
	if (synd) {
		to_error(qp);
		KLOG_DBG("qp 0x%x: WQE %u: %s (%s)", qp->qpn, sp->ring[sp->head & (INFL - 1)].wqe_idx,
			 kinet_syndrome_str(synd), kinet_reason_str(KINET_REASON_COPY_FAILED));
		synd = SOFT_REASON(synd, KINET_REASON_COPY_FAILED);
	}
	for (; sp->head != end; sp->head++) {
		struct infl *f = &sp->ring[sp->head & (INFL - 1)];
		if (f->fence) {
			kinet_cuda->fence_free(f->fence);
			f->fence = NULL;
		}
		d->opcode = f->opcode;
		d->wqe_idx = f->wqe_idx;
		d->total = f->total;
		KINET_QCOUNT_OWN(qp, KQ_COMPLETED, 1);
		if (f->signaled || synd)
			soft_req_cqe_reserved(qp, d, synd);
		else
			soft_cq_unreserve(qp->scq);
		if (synd)
			synd = KN_SYND_WR_FLUSH_ERR;
	}
}

/* A copy in flight that has not landed for 1 s is reported once (a stream
 * that waits for an application kernel that waits for this QP's CQE would
 * otherwise be a silent hang): the QP's WQEs after it wait too. */
static void infl_stalled(kinet_qp *qp, struct eng_qp *sp)
{
	uint64_t now = kn_now_ns();
	if (!sp->infl_since) {
		sp->infl_since = now;
		sp->infl_warned = false;
	} else if (!sp->infl_warned && now - sp->infl_since > 1000000000ull) {
		sp->infl_warned = true;
		KLOG_WARN("qp 0x%x: a GPU copy has been in flight for 1 s (%u WQEs wait behind "
			  "it%s)",
			  qp->qpn, sp->tail - sp->head,
			  soft_qp(qp)->geng == 1 && kinet_geng_running()
				  ? "; the GPU engine takes the QP once they land"
				  : "");
	}
}

/* Completes what has landed, in order; wait: everything, blocking. Between
 * passes the last WQE of a non-empty ring always holds a fence. Returns the
 * number of WQEs completed. */
static int infl_progress(struct engine *e, kinet_qp *qp, struct eng_qp *sp, bool wait)
{
	int n = 0;
	while (infl_busy(sp)) {
		uint32_t j = sp->head;
		while (j != sp->tail && !sp->ring[j & (INFL - 1)].fence)
			j++;
		if (j == sp->tail)
			break; /* not fenced yet (inside a pass) */
		void *fc = sp->ring[j & (INFL - 1)].fence;
		int rc = wait ? (kinet_cuda->fence_wait(fc) == 0 ? 1 : -EIO)
			      : kinet_cuda->fence_query(fc);
		if (rc == 0) {
			infl_stalled(qp, sp);
			break;
		}
		n += (int)(j + 1 - sp->head);
		if (rc < 0) {
			/* which copy failed is not known: the oldest WQE fails,
			 * everything after it is flushed */
			n += (int)(sp->tail - (j + 1));
			infl_complete(e, qp, sp, sp->tail, KN_SYND_REMOTE_OP_ERR);
			break;
		}
		infl_complete(e, qp, sp, j + 1, 0);
	}
	return n;
}

/* Lets every copy in flight of this QP land and drops the ring without CQEs
 * (RESET, destruction), giving the reserved CQE slots back. */
static void infl_drop(kinet_qp *qp, struct eng_qp *sp)
{
	for (; infl_busy(sp); sp->head++) {
		struct infl *f = &sp->ring[sp->head & (INFL - 1)];
		if (f->fence) {
			kinet_cuda->fence_wait(f->fence);
			kinet_cuda->fence_free(f->fence);
			f->fence = NULL;
		}
		soft_cq_unreserve(qp->scq);
	}
}

/* Waits (any thread) until the copies in flight of this QP have landed. */
static void infl_wait(struct eng_qp *sp)
{
	for (uint32_t j = sp->head; j != sp->tail; j++)
		if (sp->ring[j & (INFL - 1)].fence)
			kinet_cuda->fence_wait(sp->ring[j & (INFL - 1)].fence);
}

/* sq_ci for readers outside the engine, stored only when it moved (an idle
 * pass writes nothing). */
static void publish_ci(kinet_qp *qp, struct eng_qp *sp)
{
	struct soft_qp *s = soft_qp(qp);
	if (sp->pub != s->sq_ci) {
		sp->pub = s->sq_ci;
		atomic_store(&s->sq_ci_pub, s->sq_ci);
	}
}

/* The WQE at sq_ci is done with (executed, failed, or handed to the wire). */
/* The WQE's record in the trace (KINET_TRACE). */
static void trace_wqe(kinet_qp *qp, const struct soft_req *r, bool from_bf)
{
	struct kinet_trace_rec t;
	memset(&t, 0, sizeof(t));
	t.type = KINET_TR_WQE;
	t.t_ns = r->trace_t;
	t.ctx = qp->ctx->id;
	t.qpn = qp->qpn;
	t.opcode = r->opcode;
	t.wqe_idx = (uint16_t)soft_qp(qp)->sq_ci;
	t.len = (uint32_t)r->total;
	t.rkey = r->rkey;
	t.db_form = from_bf ? KINET_TR_DB_BF : soft_qp(qp)->db_form;
	/* the first data segment's key (none for inline data) */
	uint32_t off = r->opcode == KN_OPCODE_SEND || r->opcode == KN_OPCODE_SEND_IMM ? 16
		       : r->opcode == KN_OPCODE_ATOMIC_CS || r->opcode == KN_OPCODE_ATOMIC_FA ? 48
											: 32;
	uint32_t bc, lk;
	memcpy(&bc, r->wqe + off, 4);
	memcpy(&lk, r->wqe + off + 4, 4);
	if (r->opcode != KN_OPCODE_NOP && !(kn_be32toh(bc) & KN_INLINE_SEG) &&
	    r->nbb * KN_SEND_WQE_BB >= off + 16)
		t.lkey = kn_be32toh(lk);
	if (r->opcode != KN_OPCODE_RDMA_WRITE && r->opcode != KN_OPCODE_RDMA_WRITE_IMM &&
	    r->opcode != KN_OPCODE_RDMA_READ && r->opcode != KN_OPCODE_ATOMIC_CS &&
	    r->opcode != KN_OPCODE_ATOMIC_FA)
		t.rkey = 0;
	kinet_trace_emit(&t);
}

static void consume(kinet_qp *qp, struct eng_qp *sp, const struct soft_req *r, bool from_bf)
{
	KINET_QCOUNT_OWN(qp, KQ_POSTED, 1);
	if (__builtin_expect(kinet_trace_on, 0))
		trace_wqe(qp, r, from_bf);
	if (from_bf) {
		sp->bf_idx = 0;
		KINET_COUNT(qp->ctx, c_bf_wqes, 1);
		KINET_QCOUNT_OWN(qp, KQ_BF_WQES, 1);
	} else if ((sp->bf_bad & 0x10000u) && (uint16_t)sp->bf_bad == (uint16_t)soft_qp(qp)->sq_ci) {
		KINET_COUNT(qp->ctx, c_bf_mismatch, 1); /* its register copy was refused */
		KINET_QCOUNT_OWN(qp, KQ_BF_MISMATCH, 1);
	}
	if ((uint16_t)sp->bf_bad == (uint16_t)soft_qp(qp)->sq_ci)
		sp->bf_bad = 0;
	memcpy(&sp->last_ctrl, qp->sq + (soft_qp(qp)->sq_ci & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB, 8);
	soft_qp(qp)->sq_ci += r->nbb;
}

/* One pass over one QP; returns the amount of work done. */
static int serve_qp(struct engine *e, kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	struct eng_qp *sp = s->engine_priv;
	int work = 0;
	if (s->gslot1 && kinet_geng_pass(qp))
		return 0; /* the GPU engine serves it */
	if (qp->db_mode == KN_DB_CPU_PROXY)
		work += kinet_proxy_ring(qp, NULL);
	int state = atomic_load(&qp->state);
	if (infl_busy(sp)) {
		/* copies in flight: complete what landed; stay awake meanwhile.
		 * In ERR they all complete before the flush CQEs. */
		work += 1 + infl_progress(e, qp, sp, state == KINET_QPS_ERR);
		state = atomic_load(&qp->state);
	}
	if (state == KINET_QPS_ERR) {
		/* the wire completes its outstanding WQEs first: CQEs stay in order */
		bool drained = true;
		if (s->wire) {
			work += kinet_wire_progress(qp);
			drained = kinet_wire_drained(qp);
		}
		if (drained)
			work += flush_sq(qp, &e->req);
		if (qp->rq_cnt) {
			pthread_mutex_lock(&s->rq_lock);
			work += soft_flush_rq(qp);
			pthread_mutex_unlock(&s->rq_lock);
		}
		publish_ci(qp, sp);
		return work;
	}
	if (state != KINET_QPS_RTS) {
		if (state == KINET_QPS_RESET || state == KINET_QPS_INIT)
			not_ready_doorbell(qp, s, state);
		return work;
	}
	if (s->geng == 1 && kinet_geng_running()) {
		/* the GPU engine runs: hand this eligible QP over once the copies
		 * in flight have landed (their CQEs are ours), executing nothing
		 * new meanwhile */
		if (infl_busy(sp))
			return work + 1 + infl_progress(e, qp, sp, false);
		if (!sp->bf_idx && !((sp->bf_want[0] | sp->bf_want[1]) & 0x10000u)) {
			kinet_geng_offer(qp, sp->last_ctrl);
			if (s->geng_on)
				return work + 1;
		}
	}
	if (s->wire)
		work += kinet_wire_progress(qp);
	if (s->rnr_until_ns && kn_now_ns() < s->rnr_until_ns)
		return work;
	bool dbr_only;
	uint32_t avail = published(qp, &dbr_only);
	/* a WQE posted after a move to ERR (kinet_qp_modify returned, then the
	 * doorbell) is flushed, never executed: the state read above may be
	 * older than the doorbell, this one is not */
	if (avail && atomic_load(&qp->state) != KINET_QPS_RTS)
		return work;
	if (avail && dbr_only) {
		KINET_COUNT(qp->ctx, c_dbr_only, 1);
		KINET_QCOUNT_OWN(qp, KQ_DBR_ONLY, 1);
	}
	for (int n = 0; n < BURST && avail > 0; n++) {
		/* room for the completion, or wait for the consumer. A local WQE
		 * reserves its CQE slot before it executes: the CQ may be shared
		 * with QPs of other engines, and a WQE that has executed must
		 * get its CQE (never run again for want of room). The wire
		 * writes its CQEs later, when room allows. */
		bool rsv = !s->wire;
		if (rsv ? soft_cq_reserve(qp->scq) != 0 : soft_cq_space(qp->scq) == 0)
			break;
		if (s->wire && !kinet_wire_can_post(qp))
			break;
		struct soft_req *r = &e->req;
		/* BlueFlame: the register's copy of this WQE, when it has one */
		bool bf = (sp->bf_idx & 0x10000u) && (uint16_t)sp->bf_idx == (uint16_t)s->sq_ci;
		if (!bf && ((sp->bf_want[0] | sp->bf_want[1]) & 0x10000u)) {
			bf_retake(qp, s, sp);
			bf = (sp->bf_idx & 0x10000u) && (uint16_t)sp->bf_idx == (uint16_t)s->sq_ci;
		}
		uint32_t synd = soft_parse_wqe_bb(qp, s->sq_ci, avail, bf ? sp->bf : NULL, r);
		if (__builtin_expect(kinet_trace_on, 0))
			r->trace_t = kinet_trace_now();
		if (!synd && __builtin_expect(s->hold_kind || soft_ctx(qp->ctx)->faults, 0) &&
		    fault_wqe(qp, s, r, &synd)) {
			if (rsv)
				soft_cq_unreserve(qp->scq);
			break; /* held: a later pass */
		}
		if (!synd && __builtin_expect(r->opcode == KN_OPCODE_WAIT, 0)) {
			/* cross-channel WAIT: the queue holds here until the CQ
			 * it names has written the CQE it names (a later pass
			 * looks again); a CQ the context does not have is an
			 * error CQE. Met, it completes as a NOP would */
			int met = soft_cq_wait_met(qp->ctx, r->wait_cqn, r->wait_index);
			if (met < 0) {
				KLOG_ERR("qp 0x%x: WAIT WQE %u names CQ 0x%x, which this "
					 "context does not have", qp->qpn, r->wqe_idx,
					 r->wait_cqn);
				synd = SOFT_REASON(KN_SYND_LOCAL_QP_OP_ERR,
						   KINET_REASON_MALFORMED);
			} else if (!met) {
				if (rsv)
					soft_cq_unreserve(qp->scq);
				break;
			}
		}
		int res = synd;
		if (synd && s->wire && !kinet_wire_drained(qp))
			break; /* the requests before it complete first (RC order):
				  its error CQE on a later pass */
		bool cand = !synd && infl_candidate(qp, r);
		if (infl_busy(sp) && (!cand || sp->tail - sp->head == INFL)) {
			/* its effect would show before the CQEs of the copies in
			 * flight: once they have landed (parsing again is harmless) */
			if (rsv)
				soft_cq_unreserve(qp->scq);
			break;
		}
		if (!synd) {
			if (s->wire) {
				res = kinet_wire_post(qp, r); /* completes later, in order */
				if (res == 0) {
					KINET_QCOUNT_OWN(qp, KQ_WIRE_POSTED, 1);
					KINET_QCOUNT_OWN(qp, KQ_BYTES, r->total);
					KINET_QCOUNT_OWN(qp, wire_gpu(r) ? KQ_STAGED : KQ_DIRECT, r->total);
					consume(qp, sp, r, bf);
					avail -= r->nbb;
					work++;
					KINET_COUNT(qp->ctx, c_wqes, 1);
					continue;
				}
			} else {
				r->async_ok = cand;
				soft_moved_staged = false;
				res = soft_exec_local(qp, r);
			}
		}
		if (res == SOFT_RNR) {
			KINET_COUNT(qp->ctx, c_rnr, 1);
			KINET_QCOUNT_OWN(qp, KQ_RNR, 1);
			if (qp->attr.rnr_retry == 7 || s->rnr_count < qp->attr.rnr_retry) {
				s->rnr_count++;
				s->rnr_until_ns =
					kn_now_ns() +
					(uint64_t)KT(RNR_TIMER_US) * 1000ull;
				if (rsv)
					soft_cq_unreserve(qp->scq);
				break;
			}
			res = SOFT_REASON(KN_SYND_RNR_RETRY_EXC_ERR, KINET_REASON_RNR);
		}
		if (res != 0 && res != SOFT_STALL && res != -EAGAIN &&
		    (r->in_flight || infl_busy(sp))) {
			/* failed behind copies in flight (or after enqueuing some
			 * of its own): those land and complete first */
			void *f;
			if (r->in_flight && kinet_cuda->fence(&f) == 0) {
				kinet_cuda->fence_wait(f);
				kinet_cuda->fence_free(f);
			}
			if (infl_fence(sp) != 0)
				infl_complete(e, qp, sp, sp->tail, KN_SYND_REMOTE_OP_ERR);
			infl_progress(e, qp, sp, true);
			if (infl_busy(sp) || atomic_load(&qp->state) != KINET_QPS_RTS) {
				if (rsv)
					soft_cq_unreserve(qp->scq);
				break; /* a copy failed: the ERR pass flushes this one */
			}
		}
		if (res == SOFT_STALL || res == -EAGAIN) {
			if (rsv)
				soft_cq_unreserve(qp->scq);
			break;
		}
		s->rnr_count = 0;
		s->rnr_until_ns = 0;
		if (res == 0) {
			KINET_QCOUNT_OWN(qp, KQ_BYTES, r->total);
			KINET_QCOUNT_OWN(qp, soft_moved_staged ? KQ_STAGED : KQ_DIRECT, r->total);
			if (r->in_flight || infl_busy(sp))
				infl_push(sp, r); /* its CQE once its copies landed */
			else if (r->signaled && rsv)
				soft_req_cqe_reserved(qp, r, 0);
			else if (rsv)
				soft_cq_unreserve(qp->scq);
			else if (r->signaled && soft_req_cqe(qp, r, 0))
				break; /* cannot happen: space was checked */
			if (!r->in_flight && !infl_busy(sp))
				KINET_QCOUNT_OWN(qp, KQ_COMPLETED, 1);
		} else {
			/* ERR first (whoever sees the error CQE sees ERR); the CQE
			 * names the slot's own index, whatever the WQE said */
			to_error(qp);
			r->wqe_idx = (uint16_t)s->sq_ci;
			if (rsv)
				soft_req_cqe_reserved(qp, r, (uint32_t)res);
			else
				soft_req_cqe(qp, r, (uint32_t)res);
			KLOG_DBG("qp 0x%x: WQE %u: %s (%s)", qp->qpn, r->wqe_idx,
				 kinet_syndrome_str(SOFT_SYND(res)),
				 kinet_reason_str(soft_reason_of((uint32_t)res)));
			KINET_QCOUNT_OWN(qp, KQ_COMPLETED, 1);
			consume(qp, sp, r, bf);
			work++;
			break;
		}
		KINET_COUNT(qp->ctx, c_wqes, 1);
		consume(qp, sp, r, bf);
		avail -= r->nbb;
		work++;
	}
	/* one fence after the copies this pass left in flight */
	if (infl_fence(sp) != 0)
		infl_complete(e, qp, sp, sp->tail, KN_SYND_REMOTE_OP_ERR);
	publish_ci(qp, sp);
	/* busy and eligible: the GPU engine's kernel starts (a later pass
	 * hands the QP over once it runs) */
	if (work && s->geng == 1)
		kinet_geng_launch();
	return work;
}

void kinet_soft_engine_state(kinet_qp *qp, uint64_t last_ctrl)
{
	struct eng_qp *sp = soft_qp(qp)->engine_priv;
	if (sp) {
		sp->last_ctrl = last_ctrl;
		sp->pub = 0; /* published again */
	}
}

/* Ends the wait of an engine with no QP. */
static void engine_wake(struct engine *e)
{
	uint64_t one = 1;
	if (e->wake_fd >= 0 && write(e->wake_fd, &one, sizeof(one)) < 0)
		(void)0; /* the counter is full: it is awake anyway */
}

static void *engine_main(void *arg)
{
	struct engine *e = arg;
	struct kinet_soft_nic *nic = e->nic;
	struct kinet_idle idle;
	kinet_idle_init(&idle, nic->spin_ns, nic->sleep_ns);
	bool pinned = false; /* key table kept across passes: wire placements in flight */
	/* naps as long as asked: the default timer slack (50 us) would stretch
	 * the first steps of the idle policy many times over */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
	e->ctr.ctx = nic->ctx;
	kinet_ctr_self = &e->ctr; /* counts go to this engine's block */
	kinet_trace_engine = (uint8_t)(e - nic->eng);
	while (!atomic_load_explicit(&e->stop, memory_order_relaxed)) {
		int work = 0;
		bool own = true;
		if (__builtin_expect(kinet_trace_on, 0))
			kinet_trace_pass++;
		if (!pinned) {
			/* the pass lock alone: writers of the key table stop every
			 * engine (kinet_soft_stop_world) before they take the table lock,
			 * so a pass reads the table without touching its lock */
			pthread_mutex_lock(&e->lock);
		} else {
			/* holding the key table: never wait for the QP list, whose
			 * holder may be waiting for the table */
			own = pthread_mutex_trylock(&e->lock) == 0;
		}
		soft_resp_set_held(nic->ctx);
		if (own)
			for (int i = 0; i < e->nqps; i++)
				work += serve_qp(e, e->qps[i]);
		work += kinet_wire_ctx_progress(nic->ctx); /* requests from other processes */
		soft_resp_set_held(NULL);
		/* the wire reads data straight into regions it has checked: no
		 * region may go away before those reads have landed. Pinning
		 * starts inside a pass (own is true: no writer holds or waits
		 * for the table lock while this engine holds its pass lock) */
		bool pin = kinet_wire_pinned(nic->ctx);
		if (pin && !pinned)
			pthread_rwlock_rdlock(&soft_ctx(nic->ctx)->keys.lock);
		else if (!pin && pinned)
			pthread_rwlock_unlock(&soft_ctx(nic->ctx)->keys.lock);
		pinned = pin;
		if (own)
			pthread_mutex_unlock(&e->lock);
		/* an idle pass writes no shared line: the kick is read first */
		bool kicked = !work && atomic_load_explicit(&e->kick, memory_order_relaxed) &&
			      atomic_exchange(&e->kick, false);
		uint64_t nap = kinet_idle_next(&idle, work || kicked);
		if (work || kicked)
			continue;
		if (!nap) {
			/* poll again soon: one pause per idle pass (each hop of a
			 * round trip over the wire waits for a pass), and give the CPU
			 * away every few microseconds where there are more busy threads
			 * than cores (the application's, a peer's engine) */
			kinet_idle_poll(&idle);
			continue;
		}
		if (!__atomic_load_n(&e->nqps, __ATOMIC_RELAXED) && e->wake_fd >= 0 &&
		    !soft_ctx(nic->ctx)->wire && !soft_ctx(nic->ctx)->wire_sh) {
			/* nothing to serve: sleep until a QP comes (or the close),
			 * not in naps of KINET_ENGINE_SLEEP_US */
			struct pollfd pf = {.fd = e->wake_fd, .events = POLLIN};
			if (poll(&pf, 1, 1000) > 0) {
				uint64_t v;
				if (read(e->wake_fd, &v, sizeof(v)) < 0)
					(void)0;
			}
			continue;
		}
		/* with a wire, the nap ends as soon as the network has something */
		if (kinet_wire_ctx_wait(nic->ctx, nap) == -ENOSYS)
			kinet_sleep_ns(nap);
	}
	if (pinned)
		pthread_rwlock_unlock(&soft_ctx(nic->ctx)->keys.lock);
	kinet_ctr_self = NULL;
	if (kinet_trace_on)
		kinet_trace_flush();
	return NULL;
}

int kinet_soft_open(kinet_ctx *ctx, int n)
{
	if (n <= 0)
		n = 1;
	if (n > 64)
		return -EINVAL;
	struct kinet_soft_nic *nic = calloc(1, sizeof(*nic));
	if (!nic)
		return -ENOMEM;
	nic->ctx = ctx;
	nic->n = n;
	nic->spin_ns = (uint64_t)KT(ENGINE_SPIN_US) * 1000ull;
	nic->sleep_ns = (uint64_t)KT(ENGINE_SLEEP_US) * 1000ull;
	void *eng = NULL;
	if (posix_memalign(&eng, 64, (size_t)n * sizeof(struct engine)) == 0)
		memset(eng, 0, (size_t)n * sizeof(struct engine));
	nic->eng = eng;
	if (!nic->eng) {
		free(nic);
		return -ENOMEM;
	}
	soft_ctx(ctx)->nic = nic;
	for (int i = 0; i < n; i++) {
		struct engine *e = &nic->eng[i];
		e->nic = nic;
		e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		pthread_mutex_init(&e->lock, NULL);
		if (pthread_create(&e->th, NULL, engine_main, e) != 0) {
			nic->n = i;
			kinet_soft_close(ctx);
			return -EAGAIN;
		}
		kinet_thread_name(e->th, "kn-engine%d", i);
	}
	KLOG_INFO("software NIC: %d engine thread(s)", n);
	return 0;
}

void kinet_soft_close(kinet_ctx *ctx)
{
	struct kinet_soft_nic *nic = soft_ctx(ctx)->nic;
	if (!nic)
		return;
	for (int i = 0; i < nic->n; i++) {
		atomic_store(&nic->eng[i].stop, true);
		engine_wake(&nic->eng[i]);
	}
	for (int i = 0; i < nic->n; i++) {
		pthread_join(nic->eng[i].th, NULL);
		if (nic->eng[i].wake_fd >= 0)
			close(nic->eng[i].wake_fd);
		pthread_mutex_destroy(&nic->eng[i].lock);
		free(nic->eng[i].qps);
	}
	kinet_wire_ctx_close(ctx);
	free(nic->eng);
	free(nic);
	soft_ctx(ctx)->nic = NULL;
}

int kinet_soft_qp_attach(kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	struct kinet_soft_nic *nic = soft_ctx(qp->ctx)->nic;
	int idx = (int)(qp->qpn % (uint32_t)nic->n);
	struct engine *e = &nic->eng[idx];
	struct eng_qp *sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	pthread_mutex_lock(&e->lock);
	if (e->nqps == e->cap) {
		int ncap = e->cap ? e->cap * 2 : 16;
		kinet_qp **t = realloc(e->qps, (size_t)ncap * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&e->lock);
			free(sp);
			return -ENOMEM;
		}
		e->qps = t;
		e->cap = ncap;
	}
	s->engine_priv = sp;
	atomic_store(&s->nr_armed, true); /* a new QP is in RESET with clean registers */
	qp->ctr.owner = &e->ctr; /* its engine counts in qp->ctr.own */
	s->engine_slot = e->nqps;
	e->qps[e->nqps++] = qp;
	s->engine_idx = idx;
	pthread_mutex_unlock(&e->lock);
	atomic_store(&e->kick, true);
	engine_wake(e);
	return 0;
}

void kinet_soft_qp_detach(kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	struct kinet_soft_nic *nic = soft_ctx(qp->ctx)->nic;
	/* stop the world: no engine may be inside a pass that can reach qp as a
	 * peer while it goes away */
	kinet_soft_stop_world(qp->ctx, false);
	kinet_geng_release(qp);
	struct engine *e = &nic->eng[s->engine_idx];
	if (s->engine_slot < e->nqps && e->qps[s->engine_slot] == qp) {
		kinet_qp *last = e->qps[--e->nqps];
		e->qps[s->engine_slot] = last;
		soft_qp(last)->engine_slot = s->engine_slot;
	}
	if (s->wire || s->wire_ep)
		kinet_wire_qp_close(qp);
	struct eng_qp *sp = s->engine_priv;
	if (sp) {
		infl_drop(qp, sp); /* its copies land before its memory may go */
		free(sp);
		s->engine_priv = NULL;
	}
	kinet_soft_start_world(qp->ctx);
}

void kinet_soft_stop_world(kinet_ctx *ctx, bool wait_copies)
{
	struct kinet_soft_nic *nic = soft_ctx(ctx)->nic;
	if (!nic)
		return;
	for (int i = 0; i < nic->n; i++)
		pthread_mutex_lock(&nic->eng[i].lock);
	/* and the GPU engine out of ctx's QPs, queues and regions */
	kinet_geng_recall(ctx, NULL, true);
	if (!wait_copies || !kinet_cuda || !kinet_cuda->fence_wait)
		return;
	for (int i = 0; i < nic->n; i++)
		for (int q = 0; q < nic->eng[i].nqps; q++)
			infl_wait(soft_qp(nic->eng[i].qps[q])->engine_priv);
}

void kinet_soft_start_world(kinet_ctx *ctx)
{
	struct kinet_soft_nic *nic = soft_ctx(ctx)->nic;
	if (!nic)
		return;
	for (int i = nic->n - 1; i >= 0; i--)
		pthread_mutex_unlock(&nic->eng[i].lock);
}

/* The GPU engine's QPs of ctx (or whose peer is in ctx) counted into the
 * counters: asked back, which folds their counts (gengine.c, settle); they
 * go back to it with their next busy pass. A read of the counters is rare
 * (observability), a hand-over costs a few microseconds. */
void kinet_soft_counters_sync(kinet_ctx *ctx)
{
	if (!kinet_geng_holds(ctx))
		return;
	kinet_soft_stop_world(ctx, false);
	kinet_soft_start_world(ctx);
}

void kinet_soft_counters_add(kinet_ctx *ctx, struct kinet_counters *o)
{
	struct kinet_soft_nic *nic = soft_ctx(ctx)->nic;
	for (int i = 0; nic && i < nic->n; i++)
		kinet_ctr_blk_add(&nic->eng[i].ctr, o);
}

void kinet_soft_qp_state_changed(kinet_qp *qp, int old_state, int new_state)
{
	struct soft_qp *s = soft_qp(qp);
	struct kinet_soft_nic *nic = soft_ctx(qp->ctx)->nic;
	if (!nic)
		return;
	(void)old_state;
	if (new_state == KINET_QPS_RESET) {
		struct engine *e = &nic->eng[s->engine_idx];
		pthread_mutex_lock(&e->lock);
		s->sq_ci = 0;
		/* a peer's engine consumes the receive queue under rq_lock */
		pthread_mutex_lock(&s->rq_lock);
		s->rq_ci = 0;
		pthread_mutex_unlock(&s->rq_lock);
		s->last_db_word[0] = s->last_db_word[1] = 0;
		s->db_target = 0;
		s->dbr_seen = 0;
		s->dbr_target = 0;
		qp->proxy_seen = 0;
		qp->proxy_bf_off = 0;
		qp->raw_bf_off = 0;
		s->rnr_count = 0;
		s->rnr_until_ns = 0;
		s->hold_kind = 0; /* an injected hold ends with the WQEs it held */
		s->hold_done_ci = 0;
		s->nr_dbr = 0;
		s->nr_reg[0] = s->nr_reg[1] = 0;
		memset((void *)qp->dbrec, 0, 64);
		memset((void *)qp->db, 0, 64);
		if (qp->bf_alt)
			memset((void *)(qp->db + qp->bf_alt), 0, 64);
		atomic_store(&s->sq_ci_pub, 0);
		struct eng_qp *sp = s->engine_priv;
		infl_drop(qp, sp);
		sp->head = sp->tail = 0;
		sp->bf_idx = 0;
		sp->bf_bad = 0;
		sp->bf_want[0] = sp->bf_want[1] = 0;
		memset(sp->bf_seen, 0, sizeof(sp->bf_seen));
		sp->last_ctrl = 0;
		sp->pub = 0;
		if (s->wire_ep)
			kinet_wire_qp_reset(qp);
		if (qp->own_scq)
			soft_cq_reset(qp->scq);
		if (qp->own_rcq)
			soft_cq_reset(qp->rcq);
		atomic_store(&s->nr_armed, true); /* doorbells rung from now on are the RESET state's */
		pthread_mutex_unlock(&e->lock);
	} else if (new_state != KINET_QPS_INIT) {
		atomic_store(&s->nr_armed, false);
	}
	atomic_store(&nic->eng[s->engine_idx].kick, true);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gengine.c - the CPU side of the software NIC's GPU engine (geng.h has the
 * protocol, src/cuda/engine.cu the kernel).
 *
 * One kernel per process (one block, KINET_GPU_ENGINE_WARPS warps) serves
 * up to KN_GENG_SLOTS (256) QPs. A QP is eligible at connect time (RTR) when
 * KINET_GPU_ENGINE=on, the CUDA module is loaded, its peer is in this
 * process and its send CQ is its own; kinet_qp_ep_info says which engine
 * serves it and why. With KINET_FAULT rules, the WQEs they may match go back
 * to the CPU engine one by one (fault_ops).
 *
 * KINET_TRACE: each slot has a ring the engine writes its WQE and CQE
 * records into (geng.h); the CPU reads it into the trace (trace_drain)
 * with every pass of the QP's CPU engine while the GPU engine has the QP,
 * when it takes the QP back, and at the QP's destroy, so before the trace
 * is written out at kinet_close. The records' times are the engine's clock
 * (kn_gx_now) turned into the trace's: the same clock in the host form
 * (exact); for the kernel, %globaltimer plus an offset to CLOCK_MONOTONIC
 * that the kernel's clock samples (ctl->clock) bound from above, kept
 * within [the take, the drain] of the QP and never before the QP's previous
 * record (trace_time).
 *
 * The CPU engine serves every QP first. When an eligible QP has work, its
 * CPU engine launches the kernel (if it is not running) and, once the
 * kernel runs, hands the QP over between two WQEs. The kernel gives a QP
 * back at a WQE it does not execute (the CPU engine executes it with the
 * same rules: error CQEs, sends, host-memory atomics), when asked (a state
 * change, a key-table write, a destroy) and when it exits after
 * KINET_GPU_ENGINE_IDLE_US without work: an idle process holds no SM, and
 * cudaDeviceSynchronize returns. A QP given back for an opcode or memory the
 * GPU engine leaves to the CPU stays with the CPU engine.
 *
 * KINET_GPU_ENGINE=host runs the kernel's code (geng_exec.h) on a CPU
 * thread instead (geng_host.c), for testing without a GPU: the same
 * control block, protocol and eligibility, no CUDA module needed (it starts
 * when an eligible QP connects, not at its first busy pass); the GPU's
 * address of host memory is its own address, and kinet_qp_ep_info reports
 * the engine as KINET_ENGINE_GPU_HOST.
 */
#include <stdio.h>
#include <string.h>
#include "nic/soft/soft.h"
#include "nic/soft/geng.h"

_Static_assert((int)KN_GTR_WQE == (int)KINET_TR_WQE && (int)KN_GTR_CQE == (int)KINET_TR_CQE &&
		       (int)KN_GTR_DB_NONE == (int)KINET_TR_DB_NONE &&
		       (int)KN_GTR_DB_WQE == (int)KINET_TR_DB_WQE &&
		       (int)KN_GTR_DB_PI == (int)KINET_TR_DB_PI &&
		       (int)KN_GTR_DB_DBR == (int)KINET_TR_DB_DBR,
	       "geng.h numbers the trace's types and doorbell forms as trace_fmt.h");
_Static_assert(sizeof(struct kn_geng_trec) == 32, "a GPU engine trace record is 32 bytes");
_Static_assert(sizeof(struct kn_geng_slot) % 8 == 0, "slots are loaded in 8-byte words");

/* KINET_TRACE: the CPU's side of a slot's trace ring (geng.h). */
struct gtrace {
	pthread_mutex_t lock;      /* the ring's one consumer */
	struct kn_geng_trec *ring; /* NULL: no trace */
	uint32_t cap;
	uint64_t ci;               /* records read */
	uint64_t lost;             /* losses reported */
	uint64_t bad;              /* records dropped for an impossible producer index */
	uint64_t floor;            /* the earliest time of the slot's next record (t_ns) */
};

static struct {
	pthread_mutex_t lock;
	struct kn_geng_ctl *ctl; /* mapped into the GPU */
	kinet_qp *qp[KN_GENG_SLOTS];
	uint64_t launch_ns; /* the last launch */
	bool failed;        /* a launch or the kernel failed: no more takes */
	bool warned_start;  /* the last launch was reported as not started */
	struct gtrace tr[KN_GENG_SLOTS];
	int64_t clk_off;    /* the kernel's clock to CLOCK_MONOTONIC: an upper bound */
	bool clk_have;
	pthread_mutex_t clk_lock;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .clk_lock = PTHREAD_MUTEX_INITIALIZER,
       .tr = {[0 ... KN_GENG_SLOTS - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}}};

static const char *why_str(uint32_t w)
{
	switch (w) {
	case KN_GWHY_OP: return "an opcode the GPU engine leaves to the CPU (send, write with "
				"immediate, masked atomics)";
	case KN_GWHY_HOST_MEM: return "host memory that is not mapped into the GPU";
	case KN_GWHY_HOST_ATOMIC: return "an atomic on host memory (atomic with the CPU's "
					 "atomics only on the CPU engine)";
	default: return "";
	}
}

static void refuse(struct soft_qp *s, const char *why)
{
	s->geng = 2;
	snprintf(s->geng_why, sizeof(s->geng_why), "%s", why);
}

bool kinet_geng_host(void)
{
	return !strcmp(KT(GPU_ENGINE), "host");
}

/* The executor's hooks: the CUDA module's, or the host thread's. */
static int eng_launch(void *ctl, unsigned warps)
{
	if (kinet_geng_host())
		return kinet_geng_host_launch(ctl);
	return kinet_cuda->engine_launch(ctl, warps);
}

static int eng_query(void)
{
	if (kinet_geng_host())
		return kinet_geng_host_query();
	return kinet_cuda->engine_query ? kinet_cuda->engine_query() : 0;
}

static int eng_wait(void)
{
	if (kinet_geng_host())
		return kinet_geng_host_wait();
	return kinet_cuda->engine_wait();
}

static uint64_t dev(const volatile void *p)
{
	void *d = NULL;
	if (!p)
		return 0;
	if (kinet_geng_host())
		return (uint64_t)(uintptr_t)p; /* the executor's own address space */
	if (kinet_cuda->dev_addr((const void *)(uintptr_t)p, &d) || !d)
		return 0;
	return (uint64_t)(uintptr_t)d;
}

const char *kinet_geng_unavailable(void)
{
	if (kinet_geng_host())
		return NULL;
	if (strcmp(KT(GPU_ENGINE), "on"))
		return "KINET_GPU_ENGINE is off";
	if (!kinet_cuda_load() || !kinet_cuda->engine_launch || !kinet_cuda->dev_addr)
		return "no usable GPU (the CUDA module is not loaded)";
	return NULL;
}

static void launch(void);

/* The opcodes of qp's WQEs that a fault rule of its context may match
 * (kinet_fault_match at a WQE): the GPU engine hands those back, so the
 * CPU engine matches and applies the rules to every WQE they could take,
 * in order, as if it served the QP alone. A rule added later stops the
 * world (soft_fault_set), which asks the QP back; the next offer reads
 * the new rules. */
static uint32_t fault_ops(kinet_qp *qp)
{
	const struct kinet_fault_set *fs =
		__atomic_load_n(&soft_ctx(qp->ctx)->faults, __ATOMIC_ACQUIRE);
	uint32_t m = 0;
	for (int i = 0; fs && i < fs->n; i++) {
		const struct kinet_fault_rule *r = &fs->r[i];
		if (r->action == KF_DROP || r->action == KF_CORRUPT || r->action == KF_DUP)
			continue; /* at a received request: the wire's */
		if (r->qpn && r->qpn != qp->qpn)
			continue;
		if (r->count && atomic_load(&((struct kinet_fault_rule *)r)->fired) >= r->count)
			continue; /* spent */
		m |= r->op < 0 ? ~0u : 1u << ((unsigned)r->op & 31);
	}
	return m;
}

/* KINET_TRACE: gives slot i its trace ring if it has none (G.lock held; the
 * slot is the CPU's). 0, or -ENOMEM. */
static int trace_ring(int i)
{
	struct gtrace *t = &G.tr[i];
	if (!kinet_trace_on || t->ring)
		return 0;
	uint32_t cap = 2;
	while (cap < (uint32_t)KT(GPU_ENGINE_TRACE_RECS))
		cap <<= 1;
	size_t bytes = (size_t)cap * sizeof(struct kn_geng_trec);
	struct kn_geng_trec *ring = kinet_queue_alloc(bytes);
	if (ring && !dev(ring)) {
		kinet_queue_free(ring, bytes);
		ring = NULL;
	}
	if (!ring) {
		KLOG_ERR("soft: no memory for the GPU engine's trace ring of %u records "
			 "(KINET_GPU_ENGINE_TRACE_RECS): the QP stays on the CPU engine", cap);
		return -ENOMEM;
	}
	pthread_mutex_lock(&t->lock);
	t->cap = cap;
	__atomic_store_n(&t->ring, ring, __ATOMIC_RELAXED);
	t->ci = t->lost = t->bad = t->floor = 0;
	pthread_mutex_unlock(&t->lock);
	struct kn_geng_slot *sl = &G.ctl->slot[i];
	sl->trace_pi = sl->trace_ci = sl->trace_lost = 0;
	sl->trace = dev(ring);
	sl->trace_cap = cap;
	G.ctl->trace = 1; /* the executor samples its clock (read at its launch) */
	return 0;
}

/* The offset from the kernel's clock to CLOCK_MONOTONIC: each sample of
 * the kernel's clock (ctl->clock, written every 16 of its passes) was taken
 * before the CPU reads it, so now minus the sample bounds the offset from
 * above; the smallest such bound is kept. The host form runs on
 * CLOCK_MONOTONIC itself: 0. false while the kernel has written no sample. */
static bool clock_off(int64_t *off)
{
	if (kinet_geng_host()) {
		*off = 0;
		return true;
	}
	uint64_t c = __atomic_load_n(&G.ctl->clock, __ATOMIC_ACQUIRE);
	uint64_t m = kn_now_ns();
	pthread_mutex_lock(&G.clk_lock);
	if (c) {
		int64_t o = (int64_t)(m - c);
		if (!G.clk_have || o < G.clk_off)
			G.clk_off = o;
		G.clk_have = true;
	}
	*off = G.clk_off;
	bool have = G.clk_have;
	pthread_mutex_unlock(&G.clk_lock);
	return have;
}

/* A record's trace time: its engine time converted (stamped now when no
 * offset is known yet), within [t->floor, now]: never before the take or
 * the slot's previous record, never after the drain. */
static uint64_t trace_time(struct gtrace *t, uint64_t eng_t, bool have, int64_t off, uint64_t now)
{
	uint64_t ts = have ? kinet_trace_at(eng_t + (uint64_t)off) : now;
	if (ts > now)
		ts = now;
	if (ts < t->floor)
		ts = t->floor;
	t->floor = ts;
	return ts;
}

/* Reads slot i's trace ring into the trace (t->lock held): its records as
 * the GPU engine's (engine KINET_TR_ENGINE_GPU, pass 0), then a
 * KINET_TR_LOST record for the records lost since the last drain. */
static void trace_drain(kinet_qp *qp, int i)
{
	struct gtrace *t = &G.tr[i];
	struct kn_geng_slot *sl = &G.ctl->slot[i];
	if (!t->ring)
		return;
	uint64_t pi = __atomic_load_n(&sl->trace_pi, __ATOMIC_ACQUIRE);
	uint64_t lost = __atomic_load_n(&sl->trace_lost, __ATOMIC_ACQUIRE) + t->bad;
	if (pi == t->ci && lost == t->lost)
		return;
	if (pi - t->ci > t->cap) {
		/* never written so by the engine: a torn or foreign index */
		KLOG_ERR("qp 0x%x: the GPU engine's trace ring says %llu records, at most %u "
			 "fit: they are counted as lost",
			 qp->qpn, (unsigned long long)(pi - t->ci), t->cap);
		t->bad += pi - t->ci;
		lost += pi - t->ci;
		t->ci = pi;
	}
	int64_t off;
	bool have = clock_off(&off);
	uint64_t now = kinet_trace_now();
	struct kinet_trace_rec r;
	for (; t->ci != pi; t->ci++) {
		struct kn_geng_trec e;
		memcpy(&e, &t->ring[t->ci & (t->cap - 1)], sizeof(e));
		memset(&r, 0, sizeof(r));
		r.t_ns = trace_time(t, e.t, have, off, now);
		r.ctx = qp->ctx->id;
		r.qpn = qp->qpn;
		r.len = e.len;
		r.lkey = e.lkey;
		r.rkey = e.rkey;
		r.wqe_idx = e.wqe_idx;
		r.type = e.type;
		r.opcode = e.opcode;
		r.db_form = e.type == KINET_TR_WQE ? e.db_form : 0;
		r.engine = KINET_TR_ENGINE_GPU;
		kinet_trace_emit_as(&r);
	}
	__atomic_store_n(&sl->trace_ci, t->ci, __ATOMIC_RELEASE);
	if (lost != t->lost) {
		memset(&r, 0, sizeof(r));
		r.t_ns = trace_time(t, 0, false, 0, now);
		r.ctx = qp->ctx->id;
		r.qpn = qp->qpn;
		r.len = (uint32_t)(lost - t->lost);
		r.type = KINET_TR_LOST;
		r.engine = KINET_TR_ENGINE_GPU;
		kinet_trace_emit_as(&r);
		if (!t->lost)
			KLOG_WARN("qp 0x%x: the GPU engine's trace ring (%u records) was full: "
				  "records lost (KINET_TR_LOST records in the trace count them; "
				  "KINET_GPU_ENGINE_TRACE_RECS sets the ring's size)",
				  qp->qpn, t->cap);
		t->lost = lost;
	}
}

void kinet_geng_connect(kinet_qp *qp, kinet_qp *peer)
{
	struct soft_qp *s = soft_qp(qp);
	s->geng = 0;
	s->geng_why[0] = 0;
	const char *why = kinet_geng_unavailable();
	if (why)
		return refuse(s, why);
	if (qp->dc)
		return refuse(s, "a DC QP (its target is named per WQE)");
	if (!peer)
		return refuse(s, "the peer is in another process (the wire stays on the CPU)");
	if (qp->scq->sq_owner != qp || qp->scq == qp->rcq)
		return refuse(s, "its send CQ is shared");
	if (qp->db_mode == KN_DB_CPU_PROXY)
		return refuse(s, "doorbell mode cpu (the CPU proxy)");
	if (!dev(qp->sq) || !dev(qp->dbrec) || !dev(qp->db) || !dev(qp->scq->buf) ||
	    !dev(qp->scq->dbrec))
		return refuse(s, "its queues are not mapped into the GPU");
	/* the key views the kernel reads, of both contexts */
	kinet_ctx *cs[2] = {qp->ctx, peer->ctx};
	for (int k = 0; k < 2; k++) {
		if (k == 1 && cs[1] == cs[0])
			break;
		struct soft_ctx *c = soft_ctx(cs[k]);
		kinet_soft_stop_world(cs[k], false);
		pthread_rwlock_wrlock(&c->keys.lock);
		int rc = kinet_keytab_view_enable(&c->keys);
		pthread_rwlock_unlock(&c->keys.lock);
		kinet_soft_start_world(cs[k]);
		if (rc)
			return refuse(s, "no memory for the GPU engine's key view");
	}
	pthread_mutex_lock(&G.lock);
	if (!G.ctl) {
		G.ctl = kinet_queue_alloc(sizeof(struct kn_geng_ctl));
		if (G.ctl && !dev(G.ctl)) {
			kinet_queue_free(G.ctl, sizeof(struct kn_geng_ctl));
			G.ctl = NULL;
		}
	}
	int slot = -1;
	if (s->gslot1) {
		slot = s->gslot1 - 1;
	} else if (G.ctl) {
		for (int i = 0; i < KN_GENG_SLOTS && slot < 0; i++)
			if (!G.qp[i])
				slot = i;
		if (slot >= 0) {
			G.qp[slot] = qp;
			s->gslot1 = slot + 1;
			if ((uint32_t)slot >= G.ctl->nslots)
				G.ctl->nslots = (uint32_t)slot + 1;
		}
	}
	int trc = slot >= 0 ? trace_ring(slot) : 0;
	pthread_mutex_unlock(&G.lock);
	if (!G.ctl)
		return refuse(s, "the GPU engine's control block could not be mapped");
	if (slot < 0)
		return refuse(s, "every GPU engine slot is in use");
	if (trc)
		return refuse(s, "no memory for the GPU engine's trace ring "
				 "(KINET_GPU_ENGINE_TRACE_RECS)");
	s->geng = 1;
	snprintf(s->geng_why, sizeof(s->geng_why), "%s",
		 kinet_geng_host() ? "eligible: same process (the GPU engine's code on a CPU thread)"
				   : "eligible: same process, GPU-reachable queues");
	if (kinet_geng_host()) {
		/* the host executor starts now (a thread, not a kernel): the QP's
		 * first pass in RTS hands it over, so its WQEs run through the GPU
		 * engine's code from the first one */
		pthread_mutex_lock(&G.lock);
		launch();
		pthread_mutex_unlock(&G.lock);
	}
}

/* Takes a slot's state back (BACK -> CPU). Caller serves the QP (its
 * engine's pass lock). */
static void settle(kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	struct kn_geng_slot *sl = &G.ctl->slot[s->gslot1 - 1];
	if (sl->own != KN_GOWN_BACK)
		return;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	struct gtrace *t = &G.tr[s->gslot1 - 1];
	if (t->ring) {
		/* every record of the engine before the CPU engine's next ones */
		pthread_mutex_lock(&t->lock);
		trace_drain(qp, s->gslot1 - 1);
		pthread_mutex_unlock(&t->lock);
	}
	s->db_form = (uint8_t)sl->db_form;
	s->sq_ci = sl->sq_ci;
	struct soft_cq *cq = soft_cq(qp->scq);
	pthread_spin_lock(&cq->lock);
	__atomic_store_n(&cq->pi, sl->cq_pi, __ATOMIC_RELEASE); /* read without the lock (WAIT) */
	pthread_spin_unlock(&cq->lock);
	kinet_soft_engine_state(qp, sl->last_ctrl);
	s->last_db_word[0] = sl->last_db_word[0];
	s->last_db_word[1] = sl->last_db_word[1];
	s->dbr_seen = sl->dbr_seen;
	s->dbr_target = sl->dbr_target;
	s->db_target = sl->db_target;
	KINET_QCOUNT(qp, KQ_BYTES, sl->n_bytes);
	KINET_QCOUNT(qp, KQ_DIRECT, sl->n_bytes);
	KINET_QCOUNT(qp, KQ_CQES, sl->n_cqes);
	KINET_QCOUNT(qp, KQ_DOORBELLS, sl->n_doorbells);
	KINET_COUNT(qp->ctx, c_wqes, sl->n_wqes);
	/* the bytes of writes and reads count against the target's context,
	 * as the CPU engine's (resp.c); moved with loads and stores: direct */
	kinet_ctx *tctx = s->peer ? s->peer->ctx : qp->ctx;
	KINET_COUNT(tctx, c_bytes, sl->n_moved);
	KINET_COUNT(tctx, c_direct, sl->n_moved);
	KINET_COUNT(qp->ctx, c_cqes, sl->n_cqes);
	KINET_COUNT(qp->ctx, c_doorbells, sl->n_doorbells);
	KINET_QCOUNT(qp, KQ_DB_WQE, sl->n_db_wqe);
	KINET_QCOUNT(qp, KQ_DB_PI, sl->n_db_pi);
	KINET_QCOUNT(qp, KQ_DB_FOREIGN, sl->n_db_foreign);
	KINET_QCOUNT(qp, KQ_DBR_ONLY, sl->n_dbr_only);
	KINET_COUNT(qp->ctx, c_db_wqe, sl->n_db_wqe);
	KINET_COUNT(qp->ctx, c_db_pi, sl->n_db_pi);
	KINET_COUNT(qp->ctx, c_db_foreign, sl->n_db_foreign);
	KINET_COUNT(qp->ctx, c_dbr_only, sl->n_dbr_only);
	/* posted and completed last: a reader that sees them sees the rest */
	KINET_QCOUNT(qp, KQ_POSTED, sl->n_wqes);
	KINET_QCOUNT(qp, KQ_COMPLETED, sl->n_wqes);
	s->geng_wqes += sl->n_wqes;
	atomic_store(&s->sq_ci_pub, s->sq_ci);
	uint32_t why = sl->why;
	if (why < KN_GWHY__N)
		s->geng_backs[why]++;
	if (why != KN_GWHY_ASKED && why != KN_GWHY_IDLE)
		/* the WQE at the consumer is the CPU engine's to execute: not
		 * offered again before it is consumed */
		s->geng_skip = s->sq_ci | (1ull << 63);
	if (why == KN_GWHY_OP || why == KN_GWHY_HOST_MEM || why == KN_GWHY_HOST_ATOMIC) {
		refuse(s, why_str(why));
		KLOG_INFO("qp 0x%x: back on the CPU engine: %s", qp->qpn, why_str(why));
	}
	s->geng_on = false;
	__atomic_store_n(&sl->own, KN_GOWN_CPU, __ATOMIC_RELEASE);
}

int kinet_geng_pass(kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	if (!s->gslot1 || !G.ctl)
		return 0;
	uint32_t own = __atomic_load_n(&G.ctl->slot[s->gslot1 - 1].own, __ATOMIC_ACQUIRE);
	if (own == KN_GOWN_CPU)
		return 0;
	if (own == KN_GOWN_BACK) {
		settle(qp);
		return 0;
	}
	struct gtrace *t = &G.tr[s->gslot1 - 1];
	if (__builtin_expect(__atomic_load_n(&t->ring, __ATOMIC_RELAXED) != NULL, 0) &&
	    !pthread_mutex_trylock(&t->lock)) {
		trace_drain(qp, s->gslot1 - 1); /* KINET_TRACE: the records so far */
		pthread_mutex_unlock(&t->lock);
	}
	return 1; /* the GPU serves it */
}

uint64_t kinet_geng_sq_ci(kinet_qp *qp, bool *on)
{
	struct soft_qp *s = soft_qp(qp);
	*on = false;
	if (!s->gslot1 || !G.ctl)
		return 0;
	struct kn_geng_slot *sl = &G.ctl->slot[s->gslot1 - 1];
	uint32_t own = __atomic_load_n(&sl->own, __ATOMIC_ACQUIRE);
	if (own == KN_GOWN_CPU)
		return 0;
	*on = true;
	return sl->sq_ci_pub;
}

/* Launches the kernel when it is not running (G.lock held). */
static void launch(void)
{
	if (G.failed || G.ctl->running)
		return;
	int q = eng_query();
	if (q < 0) {
		G.failed = true;
		KLOG_ERR("soft: the GPU engine failed: every QP stays on the CPU engine");
		return;
	}
	if (q == 1) {
		/* launched, not started yet (or exiting): a kernel that cannot
		 * start (every SM taken) is reported once; the CPU engine serves */
		if (!G.warned_start && !G.ctl->passes && kn_now_ns() - G.launch_ns > 1000000000ull) {
			G.warned_start = true;
			KLOG_WARN("soft: the GPU engine's kernel was launched %.1f s ago and has "
				  "not started (the GPU may have no room for its block): the "
				  "CPU engine serves meanwhile",
				  (double)(kn_now_ns() - G.launch_ns) / 1e9);
		}
		return;
	}
	G.ctl->stop = 0;
	G.ctl->passes = 0; /* the kernel's first 16 passes set it: started */
	G.ctl->idle_us = (uint32_t)KT(GPU_ENGINE_IDLE_US);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (eng_launch(G.ctl, (unsigned)KT(GPU_ENGINE_WARPS))) {
		G.failed = true;
		KLOG_ERR("soft: the GPU engine did not launch: every QP stays on the CPU engine");
		return;
	}
	G.launch_ns = kn_now_ns();
	G.warned_start = false;
}

bool kinet_geng_running(void)
{
	return G.ctl && G.ctl->running && !G.failed;
}

void kinet_geng_launch(void)
{
	if (!G.ctl || G.ctl->running || G.failed)
		return;
	pthread_mutex_lock(&G.lock);
	launch();
	pthread_mutex_unlock(&G.lock);
}

void kinet_geng_offer(kinet_qp *qp, uint64_t last_ctrl)
{
	struct soft_qp *s = soft_qp(qp);
	if (s->geng != 1 || !s->gslot1)
		return;
	kinet_qp *peer = s->peer;
	int ps = peer ? atomic_load(&peer->state) : -1;
	if (atomic_load(&qp->state) != KINET_QPS_RTS || (ps != KINET_QPS_RTR && ps != KINET_QPS_RTS) ||
	    s->wire || s->hold_kind || s->rnr_until_ns)
		return;
	if (s->geng_skip >> 63) {
		if ((s->geng_skip & ~(1ull << 63)) == s->sq_ci)
			return; /* the WQE it gave back has not run yet */
		s->geng_skip = 0;
	}
	pthread_mutex_lock(&G.lock);
	if (!G.ctl->running) {
		launch();
		pthread_mutex_unlock(&G.lock);
		return;
	}
	struct kn_geng_slot *sl = &G.ctl->slot[s->gslot1 - 1];
	if (sl->own != KN_GOWN_CPU) {
		pthread_mutex_unlock(&G.lock);
		return;
	}
	/* a state change of qp or of its peer in progress (soft_qp_modify: it
	 * recalls them under G.lock, then changes the state): the state read
	 * above may be the old one */
	if (__atomic_load_n(&s->geng_hold, __ATOMIC_SEQ_CST) ||
	    __atomic_load_n(&soft_qp(peer)->geng_hold, __ATOMIC_SEQ_CST) ||
	    atomic_load(&qp->state) != KINET_QPS_RTS) {
		pthread_mutex_unlock(&G.lock);
		return;
	}
	struct kinet_keytab *k0 = &soft_ctx(qp->ctx)->keys, *k1 = &soft_ctx(peer->ctx)->keys;
	if (!k0->view || !k1->view || k0->vcap != k0->cap || k1->vcap != k1->cap) {
		pthread_mutex_unlock(&G.lock);
		return; /* a view that could not grow: the CPU serves */
	}
	sl->qpn = qp->qpn;
	sl->sq_cnt = qp->sq_cnt;
	/* a collapsed CQ is written as a CQ of one entry (slot 0) */
	sl->cq_cnt = qp->scq->flags & KINET_CQF_COLLAPSED ? 1 : qp->scq->cnt;
	sl->cq_ignore_overrun = (qp->scq->flags & KINET_CQ_OVERRUN_IGNORE) != 0;
	sl->sq = dev(qp->sq);
	sl->dbrec = dev(qp->dbrec);
	sl->db0 = dev(qp->db);
	sl->db1 = qp->bf_alt ? dev(qp->db + qp->bf_alt) : 0;
	sl->nregs = qp->bf_alt ? 2 : 1;
	sl->cq = dev(qp->scq->buf);
	sl->cq_dbrec = dev(qp->scq->dbrec);
	sl->keys = dev(k0->view);
	sl->keys_cap = k0->vcap;
	sl->peer_keys = dev(k1->view);
	sl->peer_keys_cap = k1->vcap;
	sl->pd = (uint64_t)(uintptr_t)qp->pd;
	sl->peer_pd = (uint64_t)(uintptr_t)peer->pd;
	sl->peer_access = __atomic_load_n(&peer->attr.remote_access, __ATOMIC_RELAXED);
	sl->fault_ops = fault_ops(qp);
	sl->sq_ci = s->sq_ci;
	sl->cq_pi = soft_cq(qp->scq)->pi;
	sl->last_ctrl = last_ctrl;
	sl->last_db_word[0] = s->last_db_word[0];
	sl->last_db_word[1] = s->last_db_word[1];
	sl->dbr_seen = s->dbr_seen;
	sl->dbr_target = s->dbr_target;
	sl->db_target = s->db_target;
	sl->n_wqes = sl->n_bytes = sl->n_cqes = sl->n_doorbells = sl->n_moved = 0;
	sl->n_db_wqe = sl->n_db_pi = sl->n_db_foreign = sl->n_dbr_only = 0;
	sl->db_form = s->db_form;
	struct gtrace *t = &G.tr[s->gslot1 - 1];
	if (t->ring) {
		/* the engine's records come after the take */
		pthread_mutex_lock(&t->lock);
		uint64_t now = kinet_trace_now();
		if (now > t->floor)
			t->floor = now;
		pthread_mutex_unlock(&t->lock);
	}
	sl->sq_ci_pub = s->sq_ci;
	sl->why = 0;
	sl->gen++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	sl->own = KN_GOWN_GPU;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	s->geng_on = true;
	if (!G.ctl->running) {
		/* the kernel is exiting: its last sweep gives the slot back, or it
		 * never saw it; either way it is ours once the kernel is gone */
		eng_wait();
		if (__atomic_load_n(&sl->own, __ATOMIC_ACQUIRE) == KN_GOWN_GPU) {
			sl->own = KN_GOWN_CPU;
			s->geng_on = false;
		}
	}
	pthread_mutex_unlock(&G.lock);
	if (sl->own == KN_GOWN_BACK)
		settle(qp);
}

/* Asks the kernel for a slot back and waits until it is (own: GPU or STOP). */
static void recall_slot(struct kn_geng_slot *sl, uint32_t qpn)
{
	uint32_t own = __atomic_load_n(&sl->own, __ATOMIC_ACQUIRE);
	if (own != KN_GOWN_GPU && own != KN_GOWN_STOP)
		return;
	__atomic_store_n(&sl->own, KN_GOWN_STOP, __ATOMIC_SEQ_CST);
	uint64_t t0 = kn_now_ns();
	bool warned = false;
	while (__atomic_load_n(&sl->own, __ATOMIC_ACQUIRE) == KN_GOWN_STOP) {
		if (!G.ctl->running) {
			/* exiting: its last sweep answers, or it is gone */
			eng_wait();
			if (__atomic_load_n(&sl->own, __ATOMIC_ACQUIRE) == KN_GOWN_STOP) {
				KLOG_ERR("qp 0x%x: the GPU engine is gone without giving it back",
					 qpn);
				sl->own = KN_GOWN_BACK;
			}
			break;
		}
		if (!warned && kn_now_ns() - t0 > 1000000000ull) {
			KLOG_WARN("qp 0x%x: the GPU engine has not given it back for 1 s", qpn);
			warned = true;
		}
		kinet_sleep_ns(2000);
	}
}

void kinet_geng_recall(kinet_ctx *ctx, kinet_qp *qp, bool settle_own)
{
	if (!G.ctl)
		return;
	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < KN_GENG_SLOTS; i++) {
		kinet_qp *q = G.qp[i];
		if (!q)
			continue;
		kinet_qp *peer = soft_qp(q)->peer;
		bool hit = qp ? (q == qp || peer == qp)
			      : (q->ctx == ctx || (peer && peer->ctx == ctx));
		if (!hit)
			continue;
		recall_slot(&G.ctl->slot[i], q->qpn);
		if (settle_own && q->ctx == ctx)
			settle(q);
	}
	pthread_mutex_unlock(&G.lock);
}

bool kinet_geng_holds(kinet_ctx *ctx)
{
	if (!G.ctl)
		return false;
	bool any = false;
	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < KN_GENG_SLOTS && !any; i++) {
		kinet_qp *q = G.qp[i];
		if (!q)
			continue;
		kinet_qp *peer = soft_qp(q)->peer;
		if (q->ctx != ctx && !(peer && peer->ctx == ctx))
			continue;
		any = __atomic_load_n(&G.ctl->slot[i].own, __ATOMIC_ACQUIRE) != KN_GOWN_CPU;
	}
	pthread_mutex_unlock(&G.lock);
	return any;
}

void kinet_geng_release(kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	if (!s->gslot1 || !G.ctl)
		return;
	pthread_mutex_lock(&G.lock);
	int i = s->gslot1 - 1;
	recall_slot(&G.ctl->slot[i], qp->qpn);
	settle(qp);
	uint64_t backs = 0;
	for (int k = 0; k < KN_GWHY__N; k++)
		backs += s->geng_backs[k];
	if (s->geng_wqes || backs)
		KLOG_INFO("qp 0x%x: the GPU engine executed %llu WQEs; given back: %llu asked, %llu "
			  "idle, %llu error, %llu opcode, %llu host memory, %llu host atomic, "
			  "%llu fault rule",
			  qp->qpn, (unsigned long long)s->geng_wqes,
			  (unsigned long long)s->geng_backs[KN_GWHY_ASKED],
			  (unsigned long long)s->geng_backs[KN_GWHY_IDLE],
			  (unsigned long long)s->geng_backs[KN_GWHY_ERROR],
			  (unsigned long long)s->geng_backs[KN_GWHY_OP],
			  (unsigned long long)s->geng_backs[KN_GWHY_HOST_MEM],
			  (unsigned long long)s->geng_backs[KN_GWHY_HOST_ATOMIC],
			  (unsigned long long)s->geng_backs[KN_GWHY_FAULT]);
	struct gtrace *t = &G.tr[i];
	if (t->ring) {
		/* settle read it whole: the ring goes with the slot */
		pthread_mutex_lock(&t->lock);
		trace_drain(qp, i);
		if (t->lost)
			KLOG_WARN("qp 0x%x: %llu trace records of the GPU engine lost (its ring of "
				  "%u records was full; KINET_GPU_ENGINE_TRACE_RECS)",
				  qp->qpn, (unsigned long long)t->lost, t->cap);
		kinet_queue_free(t->ring, (size_t)t->cap * sizeof(struct kn_geng_trec));
		__atomic_store_n(&t->ring, NULL, __ATOMIC_RELAXED);
		G.ctl->slot[i].trace_cap = 0;
		G.ctl->slot[i].trace = 0;
		pthread_mutex_unlock(&t->lock);
	}
	G.qp[i] = NULL;
	s->gslot1 = 0;
	bool any = false;
	for (int k = 0; k < KN_GENG_SLOTS; k++)
		any |= G.qp[k] != NULL;
	if (!any && G.ctl->running) {
		/* the last QP: the kernel exits now */
		G.ctl->stop = 1;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		eng_wait();
		uint64_t ns = kn_now_ns() - G.launch_ns, passes = G.ctl->passes;
		if (passes)
			KLOG_INFO("the GPU engine stops: %llu passes in its last %.1f ms (%.2f us a "
				  "pass)",
				  (unsigned long long)passes, ns / 1e6, ns / 1e3 / (double)passes);
	}
	pthread_mutex_unlock(&G.lock);
}

void kinet_geng_info(kinet_qp *qp, struct kinet_ep_info *o)
{
	struct soft_qp *s = soft_qp(qp);
	bool on = s->geng_on;
	o->gpu_wqes = s->geng_wqes;
	if (s->gslot1 && G.ctl) {
		struct kn_geng_slot *sl = &G.ctl->slot[s->gslot1 - 1];
		uint32_t own = __atomic_load_n(&sl->own, __ATOMIC_ACQUIRE);
		if (own != KN_GOWN_CPU)
			o->gpu_wqes += sl->n_wqes; /* as of its last give-back: live
						    * counts stay in the kernel */
		/* given back and not settled yet (the CPU engine's next pass):
		 * the CPU engine's already */
		on &= own == KN_GOWN_GPU || own == KN_GOWN_STOP;
	}
	o->engine = !on ? KINET_ENGINE_CPU
		    : kinet_geng_host() ? KINET_ENGINE_GPU_HOST
					: KINET_ENGINE_GPU;
	snprintf(o->engine_why, sizeof(o->engine_why), "%s",
		 s->geng_why[0] ? s->geng_why : "KINET_GPU_ENGINE is off");
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend.c - the software NIC as a kinet backend: contexts (engines, key
 * table, QP numbers), regions, CQs and QPs, the state machine's effects and
 * local peers, whichever context they belong to.
 */
#include <stdlib.h>
#include <string.h>
#include "nic/soft/soft.h"
#include "nic/soft/dc.h"
#include "nic/soft/wire/wire.h"
#include "nic/soft/eth_int.h" /* SOFT_ETH_OPS: Ethernet ports */

/* Every soft QP's peer link (soft_qp.peer and the referrer lists), process
 * wide: a peer may belong to another context. Lock order: this, then the
 * engines' pass locks (kinet_soft_stop_world). */
static pthread_mutex_t soft_peer_lock = PTHREAD_MUTEX_INITIALIZER;

static int soft_probe(const struct kinet_ctx_attr *attr, char *why, size_t wl)
{
	(void)attr;
	snprintf(why, wl, "software NIC");
	return 0;
}

static int soft_open(kinet_ctx *c, const struct kinet_ctx_attr *attr)
{
	struct soft_ctx *ctx = soft_ctx(c);
	kinet_keytab_init(&ctx->keys);
	int n = attr && attr->engine_threads > 0 ? attr->engine_threads
						 : (int)KT(ENGINE_THREADS);
	int rc = kinet_soft_open(c, n);
	if (rc)
		kinet_keytab_fini(&ctx->keys);
	return rc;
}

static void soft_close(kinet_ctx *c)
{
	struct soft_ctx *ctx = soft_ctx(c);
	kinet_soft_close(c);
	kinet_keytab_fini(&ctx->keys);
	free(ctx->faults);
	for (int i = 0; i < ctx->nretired; i++)
		free(ctx->retired[i]);
	free(ctx->retired);
	free(ctx->qp_tab);
	free(ctx->qp_free);
}

/* ---- memory regions ---------------------------------------------------------- */

static int soft_mr_reg(kinet_mr *mr)
{
	kinet_ctx *c = mr->pd->ctx;
	struct soft_ctx *ctx = soft_ctx(c);
	const struct kinet_cuda_ops *cu = kinet_cuda_load();
	if (cu && cu->pointer_kind) {
		int k = cu->pointer_kind(mr->addr);
		if (k >= 0)
			mr->kind = k;
	}
	/* the software NIC is a CPU: it reaches GPU memory only by CUDA copies,
	 * i.e. by staging, which must have been allowed (as on mlx5) */
	mr->path = mr->kind == KINET_MEM_CUDA ? KINET_MR_PATH_STAGED : KINET_MR_PATH_HOST;
	if (mr->kind == KINET_MEM_CUDA && !KT(ALLOW_HOST_STAGING)) {
		KLOG_ERR("soft: GPU memory %p+%zu can only be reached by staging (CUDA copies by "
			 "the software NIC's engines); refused (KINET_ALLOW_HOST_STAGING=0)",
			 mr->addr, mr->len);
		return -EOPNOTSUPP;
	}
	if (mr->kind == KINET_MEM_CUDA)
		KLOG_INFO("soft: GPU memory %p+%zu registered, path staged "
			  "(KINET_ALLOW_HOST_STAGING=1)",
			  mr->addr, mr->len);
	/* engines read the table inside their passes without its lock: stop
	 * them first; other readers (wire, other contexts' responders) hold
	 * the lock for reading */
	kinet_soft_stop_world(c, false);
	pthread_rwlock_wrlock(&ctx->keys.lock);
	int rc = kinet_keytab_insert(&ctx->keys, mr);
	pthread_rwlock_unlock(&ctx->keys.lock);
	kinet_soft_start_world(c);
	return rc;
}

/* Who moves each memory kind (kinet_mem_alloc's report): docs/architecture.md,
 * "Two engines, one set of rules". The GPU engine serves same-process QPs
 * (eligible at connect) and moves what the GPU reaches with its SMs; the CPU
 * engine reaches GPU memory only by CUDA copies, and host memory directly. */
static void soft_mem_route(kinet_ctx *c, int mem_kind, bool gpu_mapped, const char **engine,
			   const char **path)
{
	(void)c;
	/* the host executor (KINET_GPU_ENGINE=host) moves nothing a CPU engine
	 * would not: the report stays the CPU engine's */
	bool geng = kinet_geng_unavailable() == NULL && !kinet_geng_host();
	bool staging = KT(ALLOW_HOST_STAGING);
	if (mem_kind == KINET_MEM_CUDA && geng) {
		*engine = "GPU engine";
		*path = staging ? "GPU engine: SM loads/stores (same-process QPs; the CPU engine, "
				  "for the QPs it keeps, CUDA copies (staged))"
				: "GPU engine: SM loads/stores (same-process QPs; the CPU engine, "
				  "for the QPs it keeps, CUDA copies (staged)); registering it "
				  "needs KINET_ALLOW_HOST_STAGING=1";
	} else if (mem_kind == KINET_MEM_CUDA) {
		*engine = "CPU engine";
		*path = staging ? "CPU engine: CUDA copies (staged)"
				: "CPU engine: CUDA copies (staged); registering it needs "
				  "KINET_ALLOW_HOST_STAGING=1";
	} else if (gpu_mapped && geng) {
		*engine = "GPU engine";
		*path = "GPU engine: SM loads/stores through the GPU's mapping (same-process QPs; "
			"atomics and the QPs the CPU engine keeps: CPU engine, direct)";
	} else {
		*engine = "CPU engine";
		*path = gpu_mapped ? "CPU engine: direct"
				   : "CPU engine: direct (the GPU cannot reach it)";
	}
}

static int soft_mr_revoke(kinet_mr *mr)
{
	kinet_ctx *c = mr->pd->ctx;
	struct soft_ctx *ctx = soft_ctx(c);
	/* as a writer of the table: no engine in a pass, their GPU copies
	 * landed, the wire's placements into regions landed (it holds the
	 * table for reading while they are in flight) and other contexts'
	 * responders out of it; from then on every check of the key fails */
	kinet_soft_stop_world(c, true);
	pthread_rwlock_wrlock(&ctx->keys.lock);
	atomic_store(&mr->state, KINET_MR_REVOKED);
	kinet_keytab_view_update(&ctx->keys, mr);
	pthread_rwlock_unlock(&ctx->keys.lock);
	kinet_soft_start_world(c);
	return 0;
}

/* Deregistration with work in flight (kinet_mr_dereg's contract): once the
 * region is out of the key table no new WQE can name it; local WQEs run
 * inside an engine pass, so none is half done; target-side placements of
 * the wire keep the table (the write lock waits for them, bounded by the
 * network timeout); requests on the wire that would still touch it fail and
 * the wire returns once the provider no longer reads or writes it. */
static int soft_mr_dereg(kinet_mr *mr)
{
	kinet_ctx *c = mr->pd->ctx;
	struct soft_ctx *ctx = soft_ctx(c);
	/* no engine in a pass, no GPU copy of theirs still moving bytes of it */
	kinet_soft_stop_world(c, true);
	pthread_rwlock_wrlock(&ctx->keys.lock);
	kinet_keytab_remove(&ctx->keys, mr);
	pthread_rwlock_unlock(&ctx->keys.lock);
	kinet_soft_start_world(c);
	return kinet_wire_mr_gone(c, mr);
}

/* ---- completion queues --------------------------------------------------------- */

static int soft_cq_create(kinet_cq *c)
{
	struct soft_cq *cq = soft_cq(c);
	int rc = kinet_cq_host_init(c, c->cnt);
	if (rc)
		return rc;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	soft_cq_register(c);
	return 0;
}

static void soft_cq_destroy(kinet_cq *c)
{
	soft_cq_unregister(c);
	kinet_cq_host_fini(c);
	pthread_spin_destroy(&soft_cq(c)->lock);
}

/* ---- QP numbers ------------------------------------------------------------------- */

static int qpn_alloc(struct soft_ctx *ctx, kinet_qp *qp)
{
	pthread_mutex_lock(&ctx->c.lock);
	if (!ctx->nfree) {
		uint32_t ocap = ctx->qp_cap, ncap = ocap ? ocap * 2 : 64;
		kinet_qp **t = ncap <= (1u << 23) ? realloc(ctx->qp_tab, ncap * sizeof(*t)) : NULL;
		uint32_t *f = t ? realloc(ctx->qp_free, ncap * sizeof(*f)) : NULL;
		if (t)
			ctx->qp_tab = t;
		if (!f) {
			pthread_mutex_unlock(&ctx->c.lock);
			return -ENOMEM;
		}
		ctx->qp_free = f;
		memset(t + ocap, 0, (ncap - ocap) * sizeof(*t));
		for (uint32_t i = ncap; i > ocap; i--)
			ctx->qp_free[ctx->nfree++] = i - 1; /* lowest index on top */
		ctx->qp_cap = ncap;
	}
	uint32_t i = ctx->qp_free[--ctx->nfree];
	ctx->qp_tab[i] = qp;
	qp->qpn = 0x100 + i; /* low QP numbers are reserved on real NICs */
	pthread_mutex_unlock(&ctx->c.lock);
	return 0;
}

static void qpn_free(struct soft_ctx *ctx, kinet_qp *qp)
{
	pthread_mutex_lock(&ctx->c.lock);
	uint32_t i = qp->qpn - 0x100;
	if (qp->qpn >= 0x100 && i < ctx->qp_cap && ctx->qp_tab[i] == qp) {
		ctx->qp_tab[i] = NULL;
		ctx->qp_free[ctx->nfree++] = i;
	}
	pthread_mutex_unlock(&ctx->c.lock);
}

/* The QP of ctx numbered qpn, or NULL; c.lock held. */
static kinet_qp *qp_at(struct soft_ctx *ctx, uint32_t qpn)
{
	return qpn >= 0x100 && qpn - 0x100 < ctx->qp_cap ? ctx->qp_tab[qpn - 0x100] : NULL;
}

kinet_qp *soft_qp_lookup(kinet_ctx *c, uint32_t qpn)
{
	pthread_mutex_lock(&c->lock);
	kinet_qp *qp = qp_at(soft_ctx(c), qpn);
	pthread_mutex_unlock(&c->lock);
	return qp;
}

/* ---- dynamically connected transport (dc.h) ----------------------------------------- */

int kinet_qp_set_dc(kinet_qp *qp, int role, uint64_t key)
{
	if (!qp || (role != KINET_DC_DCI && role != KINET_DC_DCT))
		return -EINVAL;
	if (qp->ctx->backend != KINET_BACKEND_SOFT) {
		KLOG_ERR("qp 0x%x: the DC transport is the software NIC's", qp->qpn);
		return -EINVAL;
	}
	if (atomic_load(&qp->state) != KINET_QPS_RESET || qp->peer_qpn || qp->dc) {
		KLOG_ERR("qp 0x%x: a DC role is given once, in RESET, before any connect",
			 qp->qpn);
		return -EINVAL;
	}
	qp->dc_key = role == KINET_DC_DCT ? key : 0;
	qp->dc = (uint8_t)role;
	return 0;
}

kinet_qp *soft_dct_find(kinet_ctx *c, uint32_t dct, uint64_t key, uint32_t *why)
{
	*why = KINET_REASON_PEER_GONE;
	pthread_mutex_lock(&c->lock);
	kinet_qp *qp = qp_at(soft_ctx(c), dct);
	if (!qp || qp->dc != KINET_DC_DCT || atomic_load(&qp->dc_gone)) {
		qp = NULL;
	} else if (atomic_load(&qp->state) != KINET_QPS_RTR) {
		*why = KINET_REASON_QP_NOT_READY;
		qp = NULL;
	} else if (qp->dc_key != key) {
		*why = KINET_REASON_DC_KEY;
		qp = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	return qp;
}

/* ---- queue pairs ------------------------------------------------------------------- */

static void qp_free_queues(kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	kinet_queue_free(qp->sq, (size_t)qp->sq_cnt * KN_SEND_WQE_BB);
	kinet_queue_free(qp->rq, (size_t)qp->rq_cnt * qp->rq_stride);
	kinet_queue_free(s->dbrec_page, 4096);
	kinet_queue_free(s->uar, KN_UAR_PAGE_SIZE);
	qp->sq = qp->rq = NULL;
	s->dbrec_page = NULL;
	s->uar = NULL;
}

static void qp_free_cqs(kinet_qp *qp)
{
	if (qp->own_scq && qp->scq)
		kinet_cq_destroy(qp->scq);
	if (qp->own_rcq && qp->rcq)
		kinet_cq_destroy(qp->rcq);
	qp->scq = qp->rcq = NULL;
}

static int soft_qp_create(kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	kinet_ctx *ctx = qp->ctx;
	qp->sq_cnt = kinet_pow2(qp->attr.sq_depth < 2 ? 2 : qp->attr.sq_depth);
	qp->rq_cnt = qp->attr.rq_depth ? kinet_pow2(qp->attr.rq_depth) : 0;
	/* a data segment (16 bytes) per scatter entry, a power of two of them */
	qp->rq_stride = 16 * kinet_pow2(qp->attr.rq_sge ? qp->attr.rq_sge : 1);
	pthread_mutex_init(&s->rq_lock, NULL);
	int rc = -ENOMEM;
	qp->sq = kinet_queue_alloc((size_t)qp->sq_cnt * KN_SEND_WQE_BB);
	s->dbrec_page = kinet_queue_alloc(4096);
	s->uar = kinet_queue_alloc(KN_UAR_PAGE_SIZE);
	if (qp->rq_cnt)
		qp->rq = kinet_queue_alloc((size_t)qp->rq_cnt * qp->rq_stride);
	if (!qp->sq || !s->dbrec_page || !s->uar || (qp->rq_cnt && !qp->rq))
		goto fail;
	qp->dbrec = s->dbrec_page;
	qp->db = s->uar + KN_BF_OFFSET;
	qp->bf_alt = KN_BF_SIZE; /* the engine watches both registers */
	qp->cpu_pi = qp->dbrec + 4;
	/* completion queues: dedicated ones unless given */
	if (qp->attr.send_cq) {
		qp->scq = qp->attr.send_cq;
	} else {
		struct kinet_cq_attr ca = {.depth = qp->sq_cnt, .flags = qp->attr.cq_flags};
		rc = kinet_cq_create_ex(ctx, &ca, &qp->scq);
		if (rc)
			goto fail;
		qp->own_scq = true;
	}
	if (qp->rq_cnt) {
		if (qp->attr.recv_cq) {
			qp->rcq = qp->attr.recv_cq;
		} else {
			struct kinet_cq_attr ca = {.depth = qp->rq_cnt, .flags = qp->attr.cq_flags};
			rc = kinet_cq_create_ex(ctx, &ca, &qp->rcq);
			if (rc)
				goto fail;
			qp->own_rcq = true;
		}
	}
	rc = qpn_alloc(soft_ctx(ctx), qp);
	if (rc)
		goto fail;
	return 0;
fail:
	qp_free_cqs(qp);
	qp_free_queues(qp);
	pthread_mutex_destroy(&s->rq_lock);
	return rc;
}

/* Links s to its local peer p (soft_peer_lock held). */
static void peer_link(struct soft_qp *s, kinet_qp *p)
{
	struct soft_qp *t = soft_qp(p);
	s->ref_next = t->ref_head;
	if (t->ref_head)
		t->ref_head->ref_pprev = &s->ref_next;
	t->ref_head = s;
	s->ref_pprev = &t->ref_head;
	__atomic_store_n(&s->peer, p, __ATOMIC_RELEASE);
}

/* Forgets s's local peer (soft_peer_lock held; s's engine stopped). */
static void peer_unlink(struct soft_qp *s)
{
	if (!s->peer)
		return;
	*s->ref_pprev = s->ref_next;
	if (s->ref_next)
		s->ref_next->ref_pprev = s->ref_pprev;
	s->ref_next = NULL;
	s->ref_pprev = NULL;
	__atomic_store_n(&s->peer, NULL, __ATOMIC_RELEASE);
}

static void soft_qp_detach(kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	/* every QP that has this one as its peer, in whatever context, forgets
	 * it while its engines are stopped: none of them is inside a pass that
	 * can reach qp as it goes away */
	pthread_mutex_lock(&soft_peer_lock);
	while (s->ref_head) {
		struct soft_qp *x = s->ref_head;
		kinet_ctx *xc = x->q.ctx;
		kinet_soft_stop_world(xc, false);
		peer_unlink(x);
		kinet_soft_start_world(xc);
	}
	/* a DCT: no DCI of ctx finds it from here on, and none that found it
	 * is still executing against it (copies in flight included) */
	if (qp->dc == KINET_DC_DCT)
		atomic_store(&qp->dc_gone, true);
	kinet_soft_stop_world(qp->ctx, qp->dc == KINET_DC_DCT);
	peer_unlink(s);
	kinet_soft_start_world(qp->ctx);
	pthread_mutex_unlock(&soft_peer_lock);
	kinet_soft_qp_detach(qp); /* off its engine, wire closed, copies landed */
	qpn_free(soft_ctx(qp->ctx), qp);
}

static void soft_qp_destroy(kinet_qp *qp)
{
	struct soft_qp *s = soft_qp(qp);
	if (s->srq) {
		atomic_fetch_sub(&s->srq->refs, 1);
		s->srq = NULL;
	}
	qp_free_cqs(qp);
	qp_free_queues(qp);
	pthread_mutex_destroy(&s->rq_lock);
}

static int soft_qp_modify_state(kinet_qp *qp, int to, const struct kinet_qp_remote *remote);

static int soft_qp_modify(kinet_qp *qp, int from, int to, const struct kinet_qp_remote *remote)
{
	struct soft_qp *s = soft_qp(qp);
	(void)from;
	/* the GPU engine executes nothing of qp, or against it, across a
	 * state change: the CPU engine applies it (stopping the world takes
	 * ctx's QPs back and settles them; the QPs of other contexts whose
	 * peer qp is settle on their engines' next pass) */
	bool held = s->gslot1 || s->ref_head;
	if (held) {
		/* and hands over neither qp nor a QP whose peer it is until the
		 * new state is in place: an engine's pass between the recall and
		 * the state change would otherwise see the old state (RTS) and
		 * hand the QP over again, in ERR */
		__atomic_add_fetch(&s->geng_hold, 1, __ATOMIC_SEQ_CST);
		kinet_soft_stop_world(qp->ctx, false);
		kinet_soft_start_world(qp->ctx);
		kinet_geng_recall(qp->ctx, qp, false);
	}
	int rc = soft_qp_modify_state(qp, to, remote);
	if (held)
		__atomic_sub_fetch(&s->geng_hold, 1, __ATOMIC_SEQ_CST);
	return rc;
}

static int soft_qp_modify_state(kinet_qp *qp, int to, const struct kinet_qp_remote *remote)
{
	struct soft_qp *s = soft_qp(qp);
	if (to == KINET_QPS_RTR && qp->dc) {
		kinet_geng_connect(qp, NULL); /* refused: the CPU engine serves it */
	} else if (to == KINET_QPS_RTR) {
		if (remote->local) {
			pthread_mutex_lock(&soft_peer_lock);
			kinet_soft_stop_world(qp->ctx, false);
			peer_unlink(s);
			peer_link(s, remote->local);
			kinet_soft_start_world(qp->ctx);
			pthread_mutex_unlock(&soft_peer_lock);
			s->wire = NULL;
			kinet_geng_connect(qp, remote->local);
		} else {
			kinet_geng_connect(qp, NULL);
#if KINET_HAVE_FABRIC
			int rc = kinet_soft_wire_connect(qp, remote);
			if (rc)
				return rc;
#else
			return kinet_backend_unsupported(
				qp->ctx, "a peer in another process (this build has no libfabric)");
#endif
		}
	}
	int old = atomic_exchange(&qp->state, to);
	kinet_soft_qp_state_changed(qp, old, to);
	return 0;
}

static uint64_t soft_sq_consumed(kinet_qp *qp)
{
	bool on;
	uint64_t ci = kinet_geng_sq_ci(qp, &on);
	return on ? ci : atomic_load(&soft_qp(qp)->sq_ci_pub);
}

/* ---- counters, endpoint states, fault injection --------------------------------- */

static void soft_qp_counters(kinet_qp *qp, struct kinet_qp_counters *o)
{
	/* WQEs handed to the wire complete there: those not outstanding any more */
	uint64_t handed = kinet_qp_ctr_get(qp, KQ_WIRE_POSTED);
	if (!handed)
		return;
	struct kinet_wire_status st;
	uint64_t out = kinet_wire_qp_status(qp, &st) == 0 ? st.outstanding : 0;
	o->completed += handed > out ? handed - out : 0;
}

static void soft_qp_ep_info(kinet_qp *qp, struct kinet_ep_info *o)
{
	struct soft_qp *s = soft_qp(qp);
	struct kinet_wire_status st;
	kinet_geng_info(qp, o);
	if (!s->wire || kinet_wire_qp_status(qp, &st) != 0) {
		if (o->qp_state != KINET_QPS_RTS || s->wire)
			return;
		/* a local peer: gone (destroyed), or not accepting (RESET, INIT, ERR) */
		pthread_mutex_lock(&soft_peer_lock);
		kinet_qp *p = s->peer;
		int ps = p ? atomic_load(&p->state) : -1;
		pthread_mutex_unlock(&soft_peer_lock);
		if (!p)
			o->peer_dead = 1;
		if (ps != KINET_QPS_RTR && ps != KINET_QPS_RTS)
			o->state = KINET_EP_DEGRADED;
		return;
	}
	o->remote = 1;
	o->peer_dead = st.peer_dead;
	o->silent_ms = st.silent_ns / 1000000ull;
	if (o->qp_state == KINET_QPS_RTS && (st.peer_dead || st.rnr_waiting ||
					     (st.outstanding && st.silent_ns > st.timeout_ns / 2)))
		o->state = KINET_EP_DEGRADED;
	if (o->qp_state == KINET_QPS_ERR && st.outstanding)
		o->state = KINET_EP_DRAINING;
}

static int soft_fault_set(kinet_ctx *c, struct kinet_fault_set *add)
{
	struct soft_ctx *ctx = soft_ctx(c);
	struct kinet_fault_set *n = NULL;
	if (add) {
		n = kinet_fault_join(ctx->faults, add);
		free(add);
		if (!n)
			return -ENOMEM;
	}
	void **t = realloc(ctx->retired, (size_t)(ctx->nretired + 1) * sizeof(*t));
	if (!t) {
		free(n);
		return -ENOMEM;
	}
	ctx->retired = t;
	/* engines read the rules inside their passes (and the wire's receive
	 * path may, outside one): the old set is kept until the context closes */
	kinet_soft_stop_world(c, false);
	struct kinet_fault_set *old = ctx->faults;
	__atomic_store_n(&ctx->faults, n, __ATOMIC_RELEASE);
	kinet_soft_start_world(c);
	if (old)
		ctx->retired[ctx->nretired++] = old;
	return 0;
}


const struct kinet_backend_ops kinet_soft_backend = {
	.name = "soft",
	.id = KINET_BACKEND_SOFT,
	.priority = 0,
	.caps = KINET_CAP_SHARED_CQ | KINET_CAP_RESET_REUSE | KINET_CAP_HOST_STAGING,
	.ctx_size = sizeof(struct soft_ctx),
	.pd_size = sizeof(kinet_pd),
	.mr_size = sizeof(kinet_mr),
	.cq_size = sizeof(struct soft_cq),
	.qp_size = sizeof(struct soft_qp),
	.probe = soft_probe,
	.open = soft_open,
	.close = soft_close,
	.mr_reg = soft_mr_reg,
	.mem_route = soft_mem_route,
	.mr_dereg = soft_mr_dereg,
	.cq_create = soft_cq_create,
	.cq_destroy = soft_cq_destroy,
	.qp_create = soft_qp_create,
	.qp_attach = kinet_soft_qp_attach,
	.qp_detach = soft_qp_detach,
	.qp_destroy = soft_qp_destroy,
	.qp_modify = soft_qp_modify,
#if KINET_HAVE_FABRIC
	.qp_local_end = kinet_wire_local_end, /* without libfabric: no descriptors */
#endif
	.sq_consumed = soft_sq_consumed,
	.counters_sync = kinet_soft_counters_sync,
	.counters = kinet_soft_counters_add,
	.qp_counters = soft_qp_counters,
	.mr_revoke = soft_mr_revoke,
	.qp_ep_info = soft_qp_ep_info,
	.fault_set = soft_fault_set,
	SOFT_ETH_OPS,
};

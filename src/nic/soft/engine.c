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
 * most that long).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include "nic/soft/soft.h"
#include "nic/soft/wire.h"

#define BURST 32 /* WQEs per QP per pass: fairness between QPs */

struct engine {
	pthread_t th;
	pthread_mutex_t lock; /* held during a pass; taken to change the QP list */
	kinet_qp **qps;
	int nqps, cap;
	atomic_bool stop;
	atomic_bool kick; /* a QP was added: skip the sleep */
	struct kinet_soft_nic *nic;
	struct soft_req req; /* scratch for one WQE */
};

struct kinet_soft_nic {
	kinet_ctx *ctx;
	int n;
	struct engine *eng;
	uint64_t spin_ns, sleep_ns;
};

void soft_resp_set_held(kinet_ctx *ctx);

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	nanosleep(&ts, NULL);
}

/* CPU-assisted doorbell: the producer published its index in host memory;
 * this CPU thread writes the doorbell record and the register for it. */
static int proxy_ring(kinet_qp *qp)
{
	uint32_t pi = __atomic_load_n(&qp->dbrec[4], __ATOMIC_ACQUIRE);
	if (pi == qp->proxy_seen)
		return 0;
	qp->proxy_seen = pi;
	__atomic_store_n(&qp->dbrec[KN_SND_DBR], kn_htobe32(pi & 0xffff), __ATOMIC_RELEASE);
	uint64_t w;
	memcpy(&w, qp->sq + ((pi - 1) & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB, 8);
	__atomic_store_n((uint64_t *)(qp->uar + KN_BF_OFFSET), w, __ATOMIC_RELEASE);
	atomic_fetch_add(&qp->ctx->c_proxy, 1);
	return 1;
}

/* Number of WQEBBs published beyond the consumer index (0 if none). */
static uint32_t published(kinet_qp *qp, bool *via_dbr_only)
{
	uint16_t ci = (uint16_t)qp->sq_ci;
	uint16_t dbr = (uint16_t)kn_be32toh(__atomic_load_n(&qp->dbrec[KN_SND_DBR], __ATOMIC_ACQUIRE));
	uint64_t reg = __atomic_load_n((uint64_t *)(qp->uar + KN_BF_OFFSET), __ATOMIC_ACQUIRE);
	if (reg != qp->last_db_word) {
		/* a doorbell write: the first 8 bytes of the last WQE's ctrl */
		qp->last_db_word = reg;
		atomic_fetch_add(&qp->ctx->c_doorbells, 1);
		uint32_t w0;
		memcpy(&w0, &reg, 4);
		uint16_t idx = (uint16_t)(kn_be32toh(w0) >> 8);
		const struct kn_wqe_ctrl_seg *c =
			(const void *)(qp->sq + (idx & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB);
		uint32_t ds = kn_be32toh(__atomic_load_n(&c->qpn_ds, __ATOMIC_ACQUIRE)) & 0x3f;
		uint32_t nbb = ds ? (ds * 16 + 63) / 64 : 1;
		qp->db_target = (uint16_t)(idx + nbb) | 0x10000u; /* bit 16: valid */
	}
	uint32_t d_dbr = (uint16_t)(dbr - ci);
	if (d_dbr > qp->sq_cnt)
		d_dbr = 0; /* not a sane producer: ignore */
	uint32_t d_reg = 0;
	if (qp->db_target & 0x10000u) {
		d_reg = (uint16_t)((uint16_t)qp->db_target - ci);
		if (d_reg == 0 || d_reg > qp->sq_cnt) {
			qp->db_target = 0; /* consumed (or bogus): forget it */
			d_reg = 0;
		}
	}
	*via_dbr_only = d_dbr > d_reg;
	return d_dbr > d_reg ? d_dbr : d_reg;
}

/* Flushes every published WQE of a QP in ERR. */
static int flush_sq(kinet_qp *qp, struct soft_req *r)
{
	bool dummy;
	uint32_t avail = published(qp, &dummy);
	int n = 0;
	while (avail > 0) {
		const struct kn_wqe_ctrl_seg *c =
			(const void *)(qp->sq + (qp->sq_ci & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB);
		uint32_t ds = kn_be32toh(c->qpn_ds) & 0x3f;
		uint32_t nbb = ds ? (ds * 16 + 63) / 64 : 1;
		if (nbb > avail)
			nbb = avail;
		r->opcode = kn_wqe_opcode_of(c);
		r->wqe_idx = (uint16_t)qp->sq_ci; /* the slot's own index */
		r->total = 0;
		if (soft_req_cqe(qp, r, KN_SYND_WR_FLUSH_ERR))
			break; /* CQ full: later */
		qp->sq_ci += nbb;
		avail -= nbb;
		n++;
	}
	return n;
}

static void to_error(kinet_qp *qp)
{
	int old = atomic_exchange(&qp->state, KINET_QPS_ERR);
	if (old != KINET_QPS_ERR)
		KLOG_DBG("qp 0x%x: %s -> ERR", qp->qpn, kinet_qp_state_str(old));
}

/* One pass over one QP; returns the amount of work done. */
static int serve_qp(struct engine *e, kinet_qp *qp)
{
	int work = 0;
	if (qp->db_mode == KN_DB_CPU_PROXY)
		work += proxy_ring(qp);
	int state = atomic_load(&qp->state);
	if (state == KINET_QPS_ERR) {
		/* the wire completes its outstanding WQEs first: CQEs stay in order */
		bool drained = true;
		if (qp->wire) {
			work += kinet_wire_progress(qp);
			drained = kinet_wire_drained(qp);
		}
		if (drained)
			work += flush_sq(qp, &e->req);
		if (qp->rq_cnt) {
			pthread_mutex_lock(&qp->rq_lock);
			work += soft_flush_rq(qp);
			pthread_mutex_unlock(&qp->rq_lock);
		}
		atomic_store(&qp->sq_ci_pub, qp->sq_ci);
		return work;
	}
	if (state != KINET_QPS_RTS)
		return work;
	if (qp->wire)
		work += kinet_wire_progress(qp);
	if (qp->rnr_until_ns && kn_now_ns() < qp->rnr_until_ns)
		return work;
	bool dbr_only;
	uint32_t avail = published(qp, &dbr_only);
	if (avail && dbr_only)
		atomic_fetch_add(&qp->ctx->c_dbr_only, 1);
	for (int n = 0; n < BURST && avail > 0; n++) {
		/* room for the completion, or wait for the consumer. A local WQE
		 * reserves its CQE slot before it executes: the CQ may be shared
		 * with QPs of other engines, and a WQE that has executed must
		 * get its CQE (never run again for want of room). The wire
		 * writes its CQEs later, when room allows. */
		bool rsv = !qp->wire;
		if (rsv ? kinet_cq_reserve(qp->scq) != 0 : kinet_cq_space(qp->scq) == 0)
			break;
		if (qp->wire && !kinet_wire_can_post(qp))
			break;
		struct soft_req *r = &e->req;
		uint32_t synd = soft_parse_wqe(qp, qp->sq_ci, avail, r);
		int res = synd;
		if (!synd) {
			if (qp->wire) {
				res = kinet_wire_post(qp, r); /* completes later, in order */
				if (res == 0) {
					qp->sq_ci += r->nbb;
					avail -= r->nbb;
					work++;
					atomic_fetch_add(&qp->ctx->c_wqes, 1);
					continue;
				}
			} else {
				res = soft_exec_local(qp, r);
			}
		}
		if (res == SOFT_RNR) {
			atomic_fetch_add(&qp->ctx->c_rnr, 1);
			if (qp->attr.rnr_retry == 7 || qp->rnr_count < qp->attr.rnr_retry) {
				qp->rnr_count++;
				qp->rnr_until_ns =
					kn_now_ns() +
					(uint64_t)kinet_tunable_int("KINET_RNR_TIMER_US") * 1000ull;
				if (rsv)
					kinet_cq_unreserve(qp->scq);
				break;
			}
			res = KN_SYND_RNR_RETRY_EXC_ERR;
		}
		if (res == SOFT_STALL || res == -EAGAIN) {
			if (rsv)
				kinet_cq_unreserve(qp->scq);
			break;
		}
		qp->rnr_count = 0;
		qp->rnr_until_ns = 0;
		if (res == 0) {
			if (r->signaled && rsv)
				soft_req_cqe_reserved(qp, r, 0);
			else if (rsv)
				kinet_cq_unreserve(qp->scq);
			else if (r->signaled && soft_req_cqe(qp, r, 0))
				break; /* cannot happen: space was checked */
		} else {
			/* ERR first (whoever sees the error CQE sees ERR); the CQE
			 * names the slot's own index, whatever the WQE said */
			to_error(qp);
			r->wqe_idx = (uint16_t)qp->sq_ci;
			if (rsv)
				soft_req_cqe_reserved(qp, r, (uint32_t)res);
			else
				soft_req_cqe(qp, r, (uint32_t)res);
			KLOG_DBG("qp 0x%x: WQE %u: %s", qp->qpn, r->wqe_idx,
				 kinet_syndrome_str((uint32_t)res));
			qp->sq_ci += r->nbb;
			work++;
			break;
		}
		atomic_fetch_add(&qp->ctx->c_wqes, 1);
		qp->sq_ci += r->nbb;
		avail -= r->nbb;
		work++;
	}
	atomic_store(&qp->sq_ci_pub, qp->sq_ci);
	return work;
}

static void *engine_main(void *arg)
{
	struct engine *e = arg;
	struct kinet_soft_nic *nic = e->nic;
	uint64_t last_work = kn_now_ns();
	uint64_t nap = 1000;
	bool pinned = false; /* key table kept across passes: wire placements in flight */
	/* naps as long as asked: the default timer slack (50 us) would stretch
	 * the first steps of the idle policy many times over */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
	while (!atomic_load(&e->stop)) {
		int work = 0;
		bool own = true;
		if (!pinned) {
			pthread_mutex_lock(&e->lock);
			pthread_rwlock_rdlock(&nic->ctx->mr_lock);
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
		 * region may go away before those reads have landed (the wire
		 * starts no new ones while a writer waits for the table) */
		pinned = kinet_wire_pinned(nic->ctx);
		if (!pinned)
			pthread_rwlock_unlock(&nic->ctx->mr_lock);
		if (own)
			pthread_mutex_unlock(&e->lock);
		if (work || atomic_exchange(&e->kick, false)) {
			last_work = kn_now_ns();
			nap = 1000;
			continue;
		}
		uint64_t idle = kn_now_ns() - last_work;
		if (idle < nic->spin_ns) {
			/* poll again soon: one pause per idle pass (KN_PAUSE gives the
			 * CPU away every 64th time); each hop of a round trip over the
			 * wire waits for a pass */
			KN_PAUSE();
			continue;
		}
		/* with a wire, the nap ends as soon as the network has something */
		if (kinet_wire_ctx_wait(nic->ctx, nap) == -ENOSYS)
			sleep_ns(nap);
		if (nap < nic->sleep_ns)
			nap *= 2;
		if (nap > nic->sleep_ns)
			nap = nic->sleep_ns;
	}
	if (pinned)
		pthread_rwlock_unlock(&nic->ctx->mr_lock);
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
	nic->spin_ns = (uint64_t)kinet_tunable_int("KINET_ENGINE_SPIN_US") * 1000ull;
	nic->sleep_ns = (uint64_t)kinet_tunable_int("KINET_ENGINE_SLEEP_US") * 1000ull;
	if (nic->sleep_ns < 1000)
		nic->sleep_ns = 1000;
	nic->eng = calloc((size_t)n, sizeof(struct engine));
	if (!nic->eng) {
		free(nic);
		return -ENOMEM;
	}
	ctx->nic = nic;
	for (int i = 0; i < n; i++) {
		struct engine *e = &nic->eng[i];
		e->nic = nic;
		pthread_mutex_init(&e->lock, NULL);
		if (pthread_create(&e->th, NULL, engine_main, e) != 0) {
			nic->n = i;
			kinet_soft_close(ctx);
			return -EAGAIN;
		}
	}
	KLOG_INFO("software NIC: %d engine thread(s)", n);
	return 0;
}

void kinet_soft_close(kinet_ctx *ctx)
{
	struct kinet_soft_nic *nic = ctx->nic;
	if (!nic)
		return;
	for (int i = 0; i < nic->n; i++)
		atomic_store(&nic->eng[i].stop, true);
	for (int i = 0; i < nic->n; i++) {
		pthread_join(nic->eng[i].th, NULL);
		pthread_mutex_destroy(&nic->eng[i].lock);
		free(nic->eng[i].qps);
	}
	kinet_wire_ctx_close(ctx);
	free(nic->eng);
	free(nic);
	ctx->nic = NULL;
}

int kinet_soft_qp_attach(kinet_qp *qp)
{
	struct kinet_soft_nic *nic = qp->ctx->nic;
	int idx = (int)(qp->qpn % (uint32_t)nic->n);
	struct engine *e = &nic->eng[idx];
	pthread_mutex_lock(&e->lock);
	if (e->nqps == e->cap) {
		int ncap = e->cap ? e->cap * 2 : 16;
		kinet_qp **t = realloc(e->qps, (size_t)ncap * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&e->lock);
			return -ENOMEM;
		}
		e->qps = t;
		e->cap = ncap;
	}
	e->qps[e->nqps++] = qp;
	qp->engine_idx = idx;
	pthread_mutex_unlock(&e->lock);
	atomic_store(&e->kick, true);
	return 0;
}

void kinet_soft_qp_detach(kinet_qp *qp)
{
	struct kinet_soft_nic *nic = qp->ctx->nic;
	/* stop the world: no engine may be inside a pass that can reach qp as a
	 * peer while it goes away */
	for (int i = 0; i < nic->n; i++)
		pthread_mutex_lock(&nic->eng[i].lock);
	struct engine *e = &nic->eng[qp->engine_idx];
	for (int i = 0; i < e->nqps; i++)
		if (e->qps[i] == qp) {
			e->qps[i] = e->qps[--e->nqps];
			break;
		}
	if (qp->wire || qp->wire_ep)
		kinet_wire_qp_close(qp);
	for (int i = nic->n - 1; i >= 0; i--)
		pthread_mutex_unlock(&nic->eng[i].lock);
}

void kinet_soft_qp_state_changed(kinet_qp *qp, int old_state, int new_state)
{
	struct kinet_soft_nic *nic = qp->ctx->nic;
	if (!nic)
		return;
	(void)old_state;
	if (new_state == KINET_QPS_RESET) {
		struct engine *e = &nic->eng[qp->engine_idx];
		pthread_mutex_lock(&e->lock);
		qp->sq_ci = 0;
		qp->rq_ci = 0;
		qp->last_db_word = 0;
		qp->db_target = 0;
		qp->proxy_seen = 0;
		qp->host_pi = 0;
		qp->rnr_count = 0;
		qp->rnr_until_ns = 0;
		memset((void *)qp->dbrec, 0, 64);
		memset(qp->uar + KN_BF_OFFSET, 0, 64);
		atomic_store(&qp->sq_ci_pub, 0);
		if (qp->wire_ep)
			kinet_wire_qp_reset(qp);
		if (qp->own_scq)
			kinet_cq_reset(qp->scq);
		if (qp->own_rcq)
			kinet_cq_reset(qp->rcq);
		pthread_mutex_unlock(&e->lock);
	}
	atomic_store(&nic->eng[qp->engine_idx].kick, true);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * srq.c - shared receive queues of the software NIC (srq.h): the queue
 * memory, the NIC's consumer (which WQE is next, how many were taken), and
 * the QPs that receive through it.
 */
#include <stdlib.h>
#include <string.h>
#include "nic/soft/soft.h"
#include "nic/soft/srq.h"

static _Atomic uint32_t srqn_next = 1;

static bool is_soft(kinet_ctx *ctx)
{
	return ctx && ctx->ops && strcmp(ctx->ops->name, "soft") == 0;
}

int kinet_srq_create(kinet_pd *pd, uint32_t max_wr, uint32_t max_sge, kinet_srq **out,
		     struct kinet_srq_info *info)
{
	if (out)
		*out = NULL;
	if (!pd || !out || !info)
		return -EINVAL;
	if (!is_soft(pd->ctx)) {
		KLOG_ERR("srq_create: shared receive queues are the software NIC's only");
		return -EOPNOTSUPP;
	}
	if (max_wr == 0 || max_wr > 32767 || max_sge == 0 || max_sge > KINET_MAX_RQ_SGE) {
		KLOG_ERR("srq_create: %u WQEs (1 .. 32767) of %u scatter entries (1 .. %u)", max_wr,
			 max_sge, KINET_MAX_RQ_SGE);
		return -EINVAL;
	}
	kinet_srq *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ctx = pd->ctx;
	s->pd = pd;
	s->cnt = kinet_pow2(max_wr + 1);
	s->stride = 16 * kinet_pow2(1 + max_sge); /* the next segment, then the data segments */
	s->buf = kinet_queue_alloc((size_t)s->cnt * s->stride);
	s->dbrec = kinet_queue_alloc(64);
	if (!s->buf || !s->dbrec) {
		if (s->buf)
			kinet_queue_free(s->buf, (size_t)s->cnt * s->stride);
		if (s->dbrec)
			kinet_queue_free((void *)s->dbrec, 64);
		free(s);
		return -ENOMEM;
	}
	memset(s->buf, 0, (size_t)s->cnt * s->stride);
	for (uint32_t i = 0; i < s->cnt; i++) {
		uint16_t next = kn_htobe16((uint16_t)((i + 1) & (s->cnt - 1)));
		memcpy(s->buf + (size_t)i * s->stride + 2, &next, 2);
	}
	memset((void *)s->dbrec, 0, 64);
	pthread_mutex_init(&s->lock, NULL);
	s->srqn = atomic_fetch_add(&srqn_next, 1) & 0xffffff;
	atomic_fetch_add(&pd->refs, 1);
	info->buf = s->buf;
	info->cnt = s->cnt;
	info->stride = s->stride;
	info->dbrec = s->dbrec;
	info->srqn = s->srqn;
	*out = s;
	return 0;
}

int kinet_srq_destroy(kinet_srq *s)
{
	if (!s)
		return -EINVAL;
	if (atomic_load(&s->refs) > 0) {
		KLOG_ERR("srq_destroy: SRQ 0x%x still has %d QPs receiving through it", s->srqn,
			 atomic_load(&s->refs));
		return -EBUSY;
	}
	atomic_fetch_sub(&s->pd->refs, 1);
	pthread_mutex_destroy(&s->lock);
	kinet_queue_free(s->buf, (size_t)s->cnt * s->stride);
	kinet_queue_free((void *)s->dbrec, 64);
	free(s);
	return 0;
}

int kinet_qp_set_srq(kinet_qp *qp, kinet_srq *srq, kinet_cq *rcq)
{
	if (!qp || !srq || !rcq)
		return -EINVAL;
	if (!is_soft(qp->ctx) || srq->ctx != qp->ctx || rcq->ctx != qp->ctx) {
		KLOG_ERR("qp 0x%x: an SRQ and receive CQ of its own software NIC context only",
			 qp->qpn);
		return -EINVAL;
	}
	struct soft_qp *s = soft_qp(qp);
	if (atomic_load(&qp->state) != KINET_QPS_RESET || qp->rq_cnt || qp->rcq || s->srq) {
		KLOG_ERR("qp 0x%x: an SRQ is given in RESET to a QP without a receive queue",
			 qp->qpn);
		return -EINVAL;
	}
	atomic_fetch_add(&srq->refs, 1);
	atomic_fetch_add(&rcq->refs, 1);
	qp->rcq = rcq;
	s->srq = srq;
	return 0;
}

int soft_srq_take(kinet_srq *srq, uint16_t *idx, const uint8_t **wqe)
{
	pthread_mutex_lock(&srq->lock);
	uint16_t posted = (uint16_t)kn_be32toh(__atomic_load_n(&srq->dbrec[0], __ATOMIC_ACQUIRE));
	uint16_t avail = (uint16_t)(posted - (uint16_t)srq->taken);
	if (avail == 0 || avail >= srq->cnt) {
		pthread_mutex_unlock(&srq->lock);
		return -EAGAIN;
	}
	const uint8_t *w = srq->buf + (size_t)srq->head * srq->stride;
	uint16_t next;
	memcpy(&next, w + 2, 2);
	*idx = srq->head;
	*wqe = w;
	srq->head = (uint16_t)(kn_be16toh(next) & (srq->cnt - 1));
	srq->taken++;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* The software NIC's side of a CQ: writing CQEs, never into a slot the
 * consumer has not released (CQ doorbell record). */
#include <string.h>
#include "nic/soft/soft.h"

uint32_t soft_cq_space(kinet_cq *c)
{
	struct soft_cq *cq = soft_cq(c);
	if (c->flags & KINET_CQ_OVERRUN_IGNORE)
		return c->cnt; /* the consumer bounds what is outstanding itself */
	uint32_t ci = kn_be32toh(__atomic_load_n(&c->dbrec[0], __ATOMIC_ACQUIRE)) & 0xffffff;
	uint32_t used = (((uint32_t)cq->pi - ci) & 0xffffff) + cq->reserved;
	return used >= c->cnt ? 0 : c->cnt - used;
}

int soft_cq_reserve(kinet_cq *c)
{
	struct soft_cq *cq = soft_cq(c);
	pthread_spin_lock(&cq->lock);
	int rc = soft_cq_space(c) ? 0 : -EAGAIN;
	if (!rc)
		cq->reserved++;
	pthread_spin_unlock(&cq->lock);
	return rc;
}

void soft_cq_unreserve(kinet_cq *c)
{
	struct soft_cq *cq = soft_cq(c);
	pthread_spin_lock(&cq->lock);
	cq->reserved--;
	pthread_spin_unlock(&cq->lock);
}

/* Writes the CQE at the producer index (lock held, a slot known free). */
static void cq_write(struct soft_cq *cq, struct kn_cqe64 *cqe)
{
	uint64_t idx = cq->pi++;
	uint32_t cnt = cq->c.cnt;
	struct kn_cqe64 *dst = (struct kn_cqe64 *)(cq->c.buf + (idx & (cnt - 1)) * KN_CQE_SIZE);
	uint8_t op_own = (uint8_t)((cqe->op_own & 0xfe) | ((idx / cnt) & 1));
	memcpy(dst, cqe, KN_CQE_SIZE - 1);
	__atomic_store_n(&dst->op_own, op_own, __ATOMIC_RELEASE);
}

int soft_cq_push(kinet_cq *c, struct kn_cqe64 *cqe)
{
	struct soft_cq *cq = soft_cq(c);
	pthread_spin_lock(&cq->lock);
	if (soft_cq_space(c) == 0) {
		pthread_spin_unlock(&cq->lock);
		return -EAGAIN;
	}
	cq_write(cq, cqe);
	pthread_spin_unlock(&cq->lock);
	KINET_COUNT(c->ctx, c_cqes, 1);
	return 0;
}

void soft_cq_push_reserved(kinet_cq *c, struct kn_cqe64 *cqe)
{
	struct soft_cq *cq = soft_cq(c);
	pthread_spin_lock(&cq->lock);
	cq->reserved--;
	cq_write(cq, cqe);
	pthread_spin_unlock(&cq->lock);
	KINET_COUNT(c->ctx, c_cqes, 1);
}

void soft_cq_reset(kinet_cq *c)
{
	struct soft_cq *cq = soft_cq(c);
	pthread_spin_lock(&cq->lock);
	kinet_cq_host_clear(c);
	cq->pi = 0;
	pthread_spin_unlock(&cq->lock);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* The software NIC's side of a CQ: writing CQEs, never into a slot the
 * consumer has not released (CQ doorbell record). */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include "nic/soft/soft.h"

/* Every CQ of the process, for WAIT WQEs that name one by number: held
 * only for list updates and one lookup (never while waiting for anything) */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct soft_cq *reg_head;

void soft_cq_register(kinet_cq *c)
{
	struct soft_cq *cq = soft_cq(c);
	pthread_mutex_lock(&reg_lock);
	cq->reg_next = reg_head;
	reg_head = cq;
	pthread_mutex_unlock(&reg_lock);
}

void soft_cq_unregister(kinet_cq *c)
{
	struct soft_cq *cq = soft_cq(c);
	pthread_mutex_lock(&reg_lock);
	for (struct soft_cq **p = &reg_head; *p; p = &(*p)->reg_next)
		if (*p == cq) {
			*p = cq->reg_next;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
}

int soft_cq_wait_met(kinet_ctx *ctx, uint32_t cqn, uint32_t index)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&reg_lock);
	for (struct soft_cq *cq = reg_head; cq; cq = cq->reg_next)
		if (cq->c.ctx == ctx && cqn && __atomic_load_n(&cq->c.num, __ATOMIC_ACQUIRE) == cqn) {
			/* CQE `index` is written when the producer is past it:
			 * pi - 1 at or after index, within half the 24-bit space */
			uint64_t pi = __atomic_load_n(&cq->pi, __ATOMIC_ACQUIRE);
			rc = pi && (((uint32_t)(pi - 1) - index) & 0xffffff) < 0x800000u;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

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
	/* collapsed: every CQE in slot 0, as in a CQ of one entry */
	soft_cq_store(cq, cq->c.flags & KINET_CQF_COLLAPSED ? 1 : cq->c.cnt, cqe);
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
	__atomic_store_n(&cq->pi, 0, __ATOMIC_RELEASE);
	pthread_spin_unlock(&cq->lock);
}

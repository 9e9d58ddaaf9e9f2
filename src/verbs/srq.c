/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * srq.c - shared receive queues of the rdma-core double (ibv_create_srq,
 * ibv_post_srq_recv, ...), over the software NIC's SRQ (nic/soft/srq.h).
 *
 * The queue is the PRM's and is kept as rdma-core's mlx5 provider keeps
 * it: its free WQEs form a list from head to tail through their
 * next_wqe_index; a post fills the head and moves it along the list; a
 * completion (its CQE names the WQE) links the WQE behind the tail. The
 * tail is never posted, so the NIC, which follows the list from WQE 0,
 * always finds the next pointer of a posted WQE final. mlx5dv_init_obj
 * gives a program the same queue (buffer, doorbell record, stride, head,
 * tail, number) to post to itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "verbs/emu.h"

static pthread_mutex_t srq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_srq *all_srqs;

struct emu_srq *emu_srq_by_num(struct emu_dev *d, uint32_t srqn)
{
	pthread_mutex_lock(&srq_lock);
	struct emu_srq *s = all_srqs;
	while (s && (s->info.srqn != srqn || emu_dev_of(s->srq.context) != d))
		s = s->next;
	pthread_mutex_unlock(&srq_lock);
	return s;
}

struct ibv_srq *emu_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *ia)
{
	if (!pd || !ia) {
		errno = EINVAL;
		return NULL;
	}
	struct emu_pd *p = (struct emu_pd *)pd;
	if (ia->attr.max_wr == 0 || ia->attr.max_wr > EMU_SRQ_MAX_WR || ia->attr.max_sge == 0 ||
	    ia->attr.max_sge > EMU_SRQ_MAX_SGE) {
		KLOG_ERR("kinet-verbs: ibv_create_srq: %u WQEs (1 .. %u) of %u scatter entries "
			 "(1 .. %u) (EINVAL)",
			 ia->attr.max_wr, EMU_SRQ_MAX_WR, ia->attr.max_sge, EMU_SRQ_MAX_SGE);
		errno = EINVAL;
		return NULL;
	}
	struct emu_srq *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = kinet_srq_create(p->spd, ia->attr.max_wr, ia->attr.max_sge, &s->s, &s->info);
	if (rc) {
		free(s);
		errno = -rc;
		return NULL;
	}
	s->wrid = calloc(s->info.cnt, sizeof(*s->wrid));
	if (!s->wrid) {
		kinet_srq_destroy(s->s);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->head = 0;
	s->tail = (uint16_t)(s->info.cnt - 1);
	s->max_sge = s->info.stride / 16 - 1;
	s->srq.context = pd->context;
	s->srq.srq_context = ia->srq_context;
	s->srq.pd = pd;
	s->srq.handle = s->info.srqn;
	pthread_mutex_init(&s->srq.mutex, NULL);
	pthread_cond_init(&s->srq.cond, NULL);
	/* what it holds: one WQE is always the free list's tail */
	ia->attr.max_wr = s->info.cnt - 1;
	ia->attr.max_sge = s->max_sge;
	pthread_mutex_lock(&srq_lock);
	s->next = all_srqs;
	all_srqs = s;
	pthread_mutex_unlock(&srq_lock);
	return &s->srq;
}

int emu_destroy_srq(struct ibv_srq *srq)
{
	if (!srq)
		return EINVAL;
	struct emu_srq *s = (struct emu_srq *)srq;
	pthread_mutex_lock(&srq_lock);
	int rc = kinet_srq_destroy(s->s);
	if (!rc)
		for (struct emu_srq **pp = &all_srqs; *pp; pp = &(*pp)->next)
			if (*pp == s) {
				*pp = s->next;
				break;
			}
	pthread_mutex_unlock(&srq_lock);
	if (rc)
		return -rc; /* EBUSY: QPs still receive through it (logged) */
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->srq.mutex);
	pthread_cond_destroy(&s->srq.cond);
	free(s->wrid);
	free(s);
	return 0;
}

int emu_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask)
{
	if (!srq || !a)
		return EINVAL;
	if (mask & IBV_SRQ_MAX_WR) {
		KLOG_ERR("kinet-verbs: ibv_modify_srq: resizing an SRQ is not supported "
			 "(EOPNOTSUPP; the device does not report IBV_DEVICE_SRQ_RESIZE)");
		return EOPNOTSUPP;
	}
	if (mask & IBV_SRQ_LIMIT) {
		KLOG_ERR("kinet-verbs: ibv_modify_srq: the SRQ limit event "
			 "(IBV_EVENT_SRQ_LIMIT_REACHED) is not supported (EOPNOTSUPP)");
		return EOPNOTSUPP;
	}
	return mask ? EINVAL : 0;
}

int emu_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a)
{
	if (!srq || !a)
		return EINVAL;
	struct emu_srq *s = (struct emu_srq *)srq;
	a->max_wr = s->info.cnt - 1;
	a->max_sge = s->max_sge;
	a->srq_limit = 0;
	return 0;
}

static uint8_t *wqe_at(struct emu_srq *s, uint16_t i)
{
	return s->info.buf + (size_t)i * s->info.stride;
}

static uint16_t next_of(struct emu_srq *s, uint16_t i)
{
	uint16_t n;
	memcpy(&n, wqe_at(s, i) + 2, 2);
	return (uint16_t)(kn_be16toh(n) & (s->info.cnt - 1));
}

int emu_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct emu_srq *s = (struct emu_srq *)srq;
	int rc = 0;
	uint32_t n = 0;
	pthread_mutex_lock(&s->lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > s->max_sge) {
			KLOG_ERR("kinet-verbs: ibv_post_srq_recv: %d scatter entries (the SRQ takes "
				 "%u) (EINVAL)",
				 wr->num_sge, s->max_sge);
			rc = EINVAL;
			break;
		}
		if (s->head == s->tail) {
			KLOG_ERR("kinet-verbs: ibv_post_srq_recv: the SRQ is full (%u WQEs posted, "
				 "none completed since) (ENOMEM)",
				 s->info.cnt - 1);
			rc = ENOMEM;
			break;
		}
		uint16_t i = s->head;
		uint8_t *w = wqe_at(s, i);
		uint32_t k = 0;
		for (; k < (uint32_t)wr->num_sge; k++) {
			uint8_t *d = w + 16 + 16 * k;
			uint32_t bc = kn_htobe32(wr->sg_list[k].length);
			uint32_t lkey = kn_htobe32(wr->sg_list[k].lkey);
			uint64_t addr = kn_htobe64(wr->sg_list[k].addr);
			memcpy(d, &bc, 4);
			memcpy(d + 4, &lkey, 4);
			memcpy(d + 8, &addr, 8);
		}
		if (16 + 16 * k < s->info.stride) {
			/* a shorter list ends with the reserved key */
			uint8_t *d = w + 16 + 16 * k;
			uint32_t zero = 0, lkey = kn_htobe32(KN_INVALID_LKEY);
			uint64_t addr = 0;
			memcpy(d, &zero, 4);
			memcpy(d + 4, &lkey, 4);
			memcpy(d + 8, &addr, 8);
		}
		s->wrid[i] = wr->wr_id;
		s->head = next_of(s, i);
		n++;
	}
	if (n) {
		s->counter += n;
		/* the WQEs before the count that names them */
		__atomic_store_n(&s->info.dbrec[0], kn_htobe32(s->counter), __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&s->lock);
	if (rc && bad)
		*bad = wr;
	return rc;
}

uint64_t emu_srq_complete(struct emu_srq *s, uint16_t idx)
{
	idx &= (uint16_t)(s->info.cnt - 1);
	pthread_mutex_lock(&s->lock);
	uint64_t id = s->wrid[idx];
	/* behind the tail: the tail is free, so the NIC has not read its next */
	uint16_t be = kn_htobe16(idx);
	memcpy(wqe_at(s, s->tail) + 2, &be, 2);
	s->tail = idx;
	pthread_mutex_unlock(&s->lock);
	return id;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dma.c - copy queues (kinet/dma.h): a copy queue is an RC QP connected to
 * itself (kinet_qp_connect_local(qp, qp)), so a copy is an RDMA write from
 * one registered region to another, checked and completed as one by
 * whichever NIC runs the QP: the software NIC's engine (CUDA copies for GPU
 * memory), or a ConnectX looping the write back to itself.
 */
#include <stdlib.h>
#include <string.h>
#include <kinet/dma.h>
#include <kinet/device_dma.h>
#include "core/internal.h"

struct kinet_dma {
	kinet_qp *qp;
	kn_dma desc;
};

int kinet_dma_create(kinet_pd *pd, const struct kinet_dma_attr *attr, kinet_dma **out)
{
	if (!pd || !out)
		return -EINVAL;
	*out = NULL;
	struct kinet_qp_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.sq_depth = attr && attr->depth ? attr->depth : 256;
	qa.db_mode = attr ? attr->db_mode : KN_DB_AUTO;
	qa.share = attr ? attr->share : KN_SHARE_EXCLUSIVE;
	qa.timeout_ms = attr ? attr->timeout_ms : 0;
	kinet_dma *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	int rc = kinet_qp_create(pd, &qa, &d->qp);
	if (rc) {
		free(d);
		return rc;
	}
	rc = kinet_qp_connect_local(d->qp, d->qp);
	kn_qp *dq = NULL;
	if (rc == 0)
		rc = kinet_qp_device(d->qp, &dq);
	if (rc) {
		KLOG_ERR("dma_create: the loopback queue pair cannot be connected: %s",
			 kinet_strerror(rc));
		kinet_qp_destroy(d->qp);
		free(d);
		return rc;
	}
	d->desc.q = *dq;
	KLOG_DBG("dma queue: loopback qp 0x%x, %u copies in flight", kinet_qp_num(d->qp),
		 dq->sq_wqe_cnt);
	*out = d;
	return 0;
}

int kinet_dma_destroy(kinet_dma *d)
{
	if (!d)
		return -EINVAL;
	int rc = kinet_qp_destroy(d->qp);
	if (rc)
		return rc;
	free(d);
	return 0;
}

int kinet_dma_device(kinet_dma *d, struct kn_dma **out)
{
	if (!d || !out)
		return -EINVAL;
	kn_qp *dq = NULL;
	int rc = kinet_qp_device(d->qp, &dq);
	if (rc)
		return rc;
	d->desc.q = *dq; /* the state pointers are the QP's: one state for both */
	*out = &d->desc;
	return 0;
}

kinet_qp *kinet_dma_qp(const kinet_dma *d)
{
	return d ? d->qp : NULL;
}

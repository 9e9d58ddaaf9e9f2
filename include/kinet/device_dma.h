/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_dma.h - copy queues, the device data path at thread scope (C
 * and CUDA): a copy is an RDMA write on the copy queue's loopback queue
 * pair, from a source region (its lkey) to a destination region (its key,
 * with remote write access), completed by a CQE like every WQE. Warp and
 * block scope: kinet/device_dma.cuh. The host creates the queue
 * (kinet/dma.h).
 *
 * Return values: 0, -EINVAL (a length over KN_MAX_LEN, an empty or too large
 * batch: nothing posted), -ETIMEDOUT (the queue stayed full), and from the
 * waits -EIO (an error CQE; kn_dma_error() gives the syndrome, e.g.
 * KN_SYND_REMOTE_ACCESS_ERR for a destination outside its region).
 */
#ifndef KINET_DEVICE_DMA_H
#define KINET_DEVICE_DMA_H

#include <stdint.h>
#include <kinet/prm.h>
#include <kinet/device_types.h>
#include <kinet/device_port.h>
#include <kinet/device_sq.h>
#include <kinet/device_ops.h>

/* The device descriptor of a copy queue (kinet_dma_device()). */
typedef struct kn_dma {
	kn_qp q; /* the loopback queue pair */
} kn_dma;

/* One copy of a batch. */
typedef struct kn_dma_copy {
	void *dst;
	const void *src;
	uint32_t dst_key; /* the destination region's key (remote write access) */
	uint32_t src_key; /* the source region's lkey */
	uint32_t len;     /* bytes, at most KN_MAX_LEN */
	uint32_t rsvd;
} kn_dma_copy;

/* Copies len bytes from src to dst; *ticket (may be NULL) gets the ticket to
 * wait for. */
KN_INLINE int kn_dma_memcpy(const kn_dma *d, void *dst, uint32_t dst_key, const void *src,
			    uint32_t src_key, uint32_t len, kn_ticket_t *ticket)
{
	return kn_put(&d->q, (uint64_t)(uintptr_t)dst, dst_key, src, src_key, len, ticket);
}

/* Posts n copies (1 .. the queue depth) with one reservation and one
 * doorbell; *last gets the ticket of the last (the copies complete in
 * order). Every copy is checked first: -EINVAL and nothing posted if any
 * length is refused. */
KN_INLINE int kn_dma_memcpy_batch(const kn_dma *d, const kn_dma_copy *c, uint32_t n,
				  kn_ticket_t *last)
{
	const kn_qp *qp = &d->q;
	kn_ticket_t t;
	if (n == 0 || n > qp->sq_wqe_cnt)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (c[i].len > KN_MAX_LEN)
			return -EINVAL;
	int rc = kn_sq_reserve(qp, n, &t);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		KNX_WQE_DECL(w);
		knx_build_rw(qp, KNX_WQE_AT(qp, t + i, w), t + i, KN_OPCODE_RDMA_WRITE,
			     (uint64_t)(uintptr_t)c[i].src, c[i].src_key,
			     (uint64_t)(uintptr_t)c[i].dst, c[i].dst_key, c[i].len, 0);
		KNX_WQE_PUT(qp, t + i, w);
		if (i == n - 1)
			knx_sq_submit_last(qp, t, n, KNX_WQE_OWN(w));
	}
	if (last)
		*last = t + n - 1;
	return 0;
}

/* Completion: as kn_test / kn_wait / kn_quiet / kn_qp_error on the queue. */
KN_INLINE int kn_dma_test(const kn_dma *d, kn_ticket_t ticket)
{
	return kn_test(&d->q, ticket);
}
KN_INLINE int kn_dma_wait(const kn_dma *d, kn_ticket_t ticket)
{
	return kn_wait(&d->q, ticket);
}
KN_INLINE int kn_dma_quiet(const kn_dma *d)
{
	return kn_quiet(&d->q);
}
KN_INLINE uint32_t kn_dma_error(const kn_dma *d, uint32_t *vendor)
{
	return kn_qp_error(&d->q, vendor);
}

#endif /* KINET_DEVICE_DMA_H */

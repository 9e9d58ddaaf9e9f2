/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/dma.h - copy queues (host control path): device code posts copies
 * between registered regions (kn_dma_memcpy, kinet/device_dma.h) and waits
 * for their CQEs. A copy is a local RDMA write between two regions, checked
 * as one: the source key must cover the source (any region of the queue's
 * protection domain), the destination key must cover the destination and
 * allow remote write; a violation completes with the RDMA error CQE and
 * puts the queue in error. Host to GPU, GPU to host, GPU to GPU and host to
 * host all take the same call; the NIC (a loopback queue pair on a ConnectX,
 * the engine's copies on the software NIC, CUDA copies for GPU memory) moves
 * the bytes.
 *
 * Every call returns 0 or a negative errno (kinet_strerror()).
 */
#ifndef KINET_DMA_H
#define KINET_DMA_H

#include <stdint.h>
#include <kinet/kinet.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kinet_dma kinet_dma;
struct kn_dma; /* kinet/device_dma.h */

struct kinet_dma_attr {
	uint32_t depth;      /* copies in flight, rounded up to a power of two (0: 256) */
	int db_mode;         /* enum kn_db_mode (KN_DB_AUTO) */
	int share;           /* enum kn_share: which device threads post */
	uint32_t timeout_ms; /* device-side bound on blocking calls (0: tunable) */
};

/* A copy queue of pd's context, ready to take copies (attr may be NULL). */
int kinet_dma_create(kinet_pd *pd, const struct kinet_dma_attr *attr, kinet_dma **out);
int kinet_dma_destroy(kinet_dma *dma);
/* The device descriptor (a host pointer, valid until the queue is destroyed). */
int kinet_dma_device(kinet_dma *dma, struct kn_dma **out);
/* The queue pair behind the copy queue (counters, state, kinet_qp_device_cuda):
 * it must not be modified or destroyed by itself. */
kinet_qp *kinet_dma_qp(const kinet_dma *dma);

#ifdef __cplusplus
}
#endif
#endif /* KINET_DMA_H */

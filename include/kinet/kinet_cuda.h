/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/kinet_cuda.h - host API of the CUDA module (libkinet_cuda.so): puts
 * the device descriptor of a QP where CUDA kernels can use it.
 *
 * Link libkinet_cuda.so (and libkinet.so). Plain C; the CUDA runtime is not
 * needed to include this header. The kernels themselves include
 * <kinet/device.h> (thread scope) and <kinet/device_cuda.cuh> (warp and
 * block scope).
 *
 * Placement (software NIC): the SQ, CQs, doorbell records and the doorbell
 * page stay in pinned host memory mapped into the GPU (the NIC engine runs on
 * CPU threads and reads them there); the descriptor, the mutable producer
 * state (kn_qp_state) and the slot_ready marks are placed in GPU memory,
 * since only device threads touch them and GPU-memory atomics are fast.
 */
#ifndef KINET_KINET_CUDA_H
#define KINET_KINET_CUDA_H

#include <kinet/kinet.h>
#include <kinet/eth.h>
#include <kinet/dma.h>
#include <kinet/sem.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when a usable GPU is present (the module's hooks are active), else 0. */
int kinet_cuda_available(void);

/* Places the device descriptor of qp in GPU memory and returns its device
 * address in *d_qp (valid until kinet_qp_device_cuda_release() or the QP is
 * destroyed). The QP state block is (re)initialised, so call it again after
 * the QP went through RESET, and never while a kernel uses the QP.
 * -EINVAL: qp cannot be driven by the device API (see kinet_qp_device);
 * -ENODEV: no usable GPU, or the queues are not mapped into the GPU
 * (KINET_NO_CUDA was set when the QP was created); -ENOMEM. */
int kinet_qp_device_cuda(kinet_qp *qp, kn_qp **d_qp);

/* The same descriptor by value (its pointers are device addresses), for
 * kernels that take the kn_qp as a parameter. Needs a prior
 * kinet_qp_device_cuda(). 0, -EINVAL, -ENOENT (not placed yet). */
int kinet_qp_device_cuda_desc(kinet_qp *qp, kn_qp *out);

/* Copies the QP's device state (tickets, first error) to *out, or writes
 * *in into it (benchmarks that exclude the NIC set done ahead). No kernel
 * may use the QP meanwhile. 0, -EINVAL, -ENOENT, -EIO. */
int kinet_qp_cuda_state_read(kinet_qp *qp, kn_qp_state *out);
int kinet_qp_cuda_state_write(kinet_qp *qp, const kn_qp_state *in);

/* Frees what kinet_qp_device_cuda() placed in GPU memory. Call it before
 * kinet_qp_destroy(). 0, or -ENOENT when nothing was placed. */
int kinet_qp_device_cuda_release(kinet_qp *qp);

/* ---- Ethernet, copy and semaphore rings (kinet/eth.h, dma.h, sem.h) ----------
 * The same placement: the queues stay where the backend put them (host
 * memory mapped into the GPU on the software NIC and the mlx5 verbs path);
 * the descriptor and the device state go to GPU memory. A receive queue's
 * buffers are used where they are (host memory mapped into the GPU, or the
 * caller's GPU memory). Call again after a reset of the queue, never while a
 * kernel uses it; release before destroying the queue. 0, -EINVAL, -ENODEV
 * (no usable GPU, or memory not mapped into it), -ENOMEM, -EIO. */
int kinet_eth_txq_device_cuda(kinet_eth_txq *txq, struct kn_eth_txq **d_txq);
int kinet_eth_txq_device_cuda_release(kinet_eth_txq *txq);
/* The receive queue's consumer state goes with it: placed as the host
 * executor left it (a queue used from the host first continues there). */
int kinet_eth_rxq_device_cuda(kinet_eth_rxq *rxq, struct kn_eth_rxq **d_rxq);
int kinet_eth_rxq_device_cuda_release(kinet_eth_rxq *rxq);
int kinet_dma_device_cuda(kinet_dma *dma, struct kn_dma **d_dma);
int kinet_dma_device_cuda_release(kinet_dma *dma);
/* A semaphore ring's descriptor by value, its pointers the GPU's addresses
 * of the ring (host memory mapped into the GPU: the CPU reads it too). */
int kinet_sem_device_cuda(kinet_sem *sem, struct kn_sem *out);

#ifdef __cplusplus
}
#endif
#endif /* KINET_KINET_CUDA_H */

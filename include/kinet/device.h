/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device.h - the device data path, thread scope: include this one.
 *
 * Portable C that both a C (or C++) compiler (host executor: CPU threads)
 * and nvcc (CUDA kernels) accept. A thread reserves send-queue slots, writes
 * mlx5 WQEs into them, publishes them in order, rings the doorbell and polls
 * the completion queue, all without calling into the host library.
 *
 * An umbrella over one header per concept:
 *   kinet/device_types.h  kn_qp, kn_qp_state, tickets, doorbell and sharing
 *                         modes, QP flags, limits (what kinet/kinet.h sees)
 *   kinet/device_port.h   loads, stores, fences, atomics, pause and clock:
 *                         PTX under nvcc, the C11 memory model elsewhere
 *   kinet/device_sq.h     the send path: reserve, in-order publication,
 *                         doorbell, send completions (kn_wait, kn_quiet)
 *   kinet/device_ops.h    WQE builders (kn_prep_*), operations (kn_op,
 *                         kn_op_*), and the calls posting them (kn_post,
 *                         kn_put, kn_get, kn_put_signal, atomics, ...)
 *   kinet/device_rq.h     the receive path: kn_recv_post, kn_recv_poll
 * Warp and block scope (CUDA only): kinet/device_cuda.cuh. The mlx5 formats
 * and byte order underneath: kinet/prm.h.
 *
 * Return values of every call: 0, -EBUSY (not yet), -EIO (error CQE;
 * kn_qp_error() gives the syndrome), -ETIMEDOUT (qp->timeout_ns elapsed),
 * -EINVAL (bad argument: nothing was posted). Names: kn_ and KN_ are the
 * API; knx_ and KNX_ are the implementation, not API.
 */
#ifndef KINET_DEVICE_H
#define KINET_DEVICE_H

#include <kinet/prm.h>
#include <kinet/device_types.h>
#include <kinet/device_port.h>
#include <kinet/device_sq.h>
#include <kinet/device_ops.h>
#include <kinet/device_rq.h>

#endif /* KINET_DEVICE_H */

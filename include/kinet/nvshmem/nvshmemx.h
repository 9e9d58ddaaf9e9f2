/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvshmemx.h (kinet) - NVSHMEM's extensions (nvshmemx_*: init with
 * attributes, warp and block forms, signal_op, on-stream operations,
 * collective launch, buffer registration). kinet keeps them with the rest in
 * kinet/nvshmem/nvshmem.h; this header is there so that programs that
 * include it compile unchanged.
 */
#ifndef KINET_NVSHMEMX_H
#define KINET_NVSHMEMX_H
#include "nvshmem.h"
#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device_host/nvshmem_common.cuh (kinet) - NVSHMEM's programs that use the
 * tile API include this header of NVSHMEM's; kinet's gives the whole API
 * (nvshmem.h) and the tile types and calls (nvshmem_tensor.h).
 */
#ifndef KINET_NVSHMEM_COMMON_CUH
#define KINET_NVSHMEM_COMMON_CUH
#include "../nvshmem.h"
#include "nvshmem_tensor.h"
#endif

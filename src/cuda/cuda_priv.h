/* SPDX-License-Identifier: BSD-3-Clause */
/* Private interface between the C and the CUDA files of libkinet_cuda.so. */
#ifndef KINET_CUDA_PRIV_H
#define KINET_CUDA_PRIV_H

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues the initialisation of a device QP state block (kn_qp_state
 * followed by n slot_ready words): every field 0, err_ticket KN_NO_ERROR. */
cudaError_t kinet_cuda_launch_state_init(void *state, uint32_t n, cudaStream_t s);

/* The GPU engine's kernel (engine.cu): one block of `warps` warps serving
 * the control block at ctl (the GPU's address; src/nic/soft/geng.h). */
cudaError_t kinet_cuda_launch_engine(void *ctl, unsigned warps, cudaStream_t s);
cudaError_t kinet_cuda_preload_engine(void);

/* Loads the module's kernels (no lazy loading while kernels run). */
cudaError_t kinet_cuda_preload(void);

/* The GPU's address of host memory mapped into it (NULL stays NULL): 0, or
 * -ENODEV when it is not mapped (registered) memory. */
int kinet_cuda_dev_addr(const volatile void *h, void **out);

/* Device chosen at load time, or -ENODEV. */
int kinet_cuda_device(void);

#ifdef __cplusplus
}
#endif
#endif

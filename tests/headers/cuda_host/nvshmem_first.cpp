/* SPDX-License-Identifier: BSD-3-Clause */
/* The other order: kinet's nvshmem.h first, then CUDA's runtime header
 * (tests/headers/cuda_host.sh). */
#include <nvshmem.h>
#ifndef CUDART_VERSION
#error "nvshmem.h did not take CUDA's runtime header, which is on the include path"
#endif
#include <nvshmemx.h>
#include <cuda_runtime.h>
#include "use.h"

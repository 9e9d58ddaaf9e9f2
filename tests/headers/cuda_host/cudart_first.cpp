/* SPDX-License-Identifier: BSD-3-Clause */
/* A host file of a CUDA program, compiled by a C++ compiler: CUDA's runtime
 * header first, then kinet's nvshmem.h (tests/headers/cuda_host.sh). */
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include "use.h"

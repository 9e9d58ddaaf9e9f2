/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every GPU test program includes this once (gpu_util.h does): without a
 * usable GPU none of its tests can run, and tests/util/main.c reports each
 * one skipped (CTest: exit 77) with the reason found here instead of letting
 * them fail on their first CUDA call.
 *
 * The probe runs in a child process (tu_ask_child): the test runner itself
 * stays clear of CUDA, whose state does not survive a fork. No <unistd.h>
 * here: its F_LOCK would clash with the tests' own names.
 */
#ifndef KINET_GPU_NEED_H
#define KINET_GPU_NEED_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <kinet/kinet_cuda.h>

extern "C" {
extern const char *(*tu_skip_program)(void);        /* tests/util/main.c */
const char *tu_ask_child(const char *(*fn)(void)); /* tests/util/main.c */
}

static const char *gn_probe(void)
{
	static char why[200];
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess)
		snprintf(why, sizeof(why), "no usable GPU: cudaGetDeviceCount: %s",
			 cudaGetErrorString(e));
	else if (n == 0)
		snprintf(why, sizeof(why), "no usable GPU: no CUDA device");
	else if (kinet_cuda_available() != 1)
		snprintf(why, sizeof(why), "no usable GPU: kinet_cuda_available() is 0");
	else
		return NULL;
	return why;
}

static const char *gn_no_gpu(void)
{
	return tu_ask_child(gn_probe);
}

__attribute__((constructor)) static void gn_register(void)
{
	tu_skip_program = gn_no_gpu;
}

#endif

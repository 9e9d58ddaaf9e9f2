/* SPDX-License-Identifier: BSD-3-Clause */
/* Queue memory, memory copies between kinds, and the CUDA module loader. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "core/driver.h"
#include "gpu/gpu.h"

const struct kinet_cuda_ops *kinet_cuda;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static char cuda_why[320]; /* why kinet_cuda is NULL, set once by cuda_load_once */

static void cuda_load_once(void)
{
	/* The CUDA module (libkinet_cuda.so.MAJOR, built when nvcc is found)
	 * registers its hooks from its constructor; load it from beside this
	 * library. */
	void *h = kinet_module_open(KINET_CUDA_MODULE, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		const char *err = dlerror();
		KLOG_DBG("CUDA module not loaded: %s", err);
		snprintf(cuda_why, sizeof(cuda_why), "the CUDA module %s is not loaded: %s",
			 KINET_CUDA_MODULE, err ? err : "not found");
		return;
	}
	const struct kinet_cuda_ops *(*get)(void) =
		(const struct kinet_cuda_ops *(*)(void))dlsym(h, "kinet_cuda_module_ops");
	if (!get) {
		KLOG_WARN("%s has no kinet_cuda_module_ops", KINET_CUDA_MODULE);
		snprintf(cuda_why, sizeof(cuda_why), "%s has no kinet_cuda_module_ops",
			 KINET_CUDA_MODULE);
		return;
	}
	kinet_cuda = get(); /* NULL when no GPU is usable */
	if (!kinet_cuda) {
		KLOG_DBG("CUDA module loaded, no usable GPU");
		snprintf(cuda_why, sizeof(cuda_why),
			 "no usable GPU (the CUDA module found none that can map host memory and "
			 "run its kernels)");
	}
}

const struct kinet_cuda_ops *kinet_cuda_load(void)
{
	if (KT(NO_CUDA))
		return NULL;
	pthread_once(&cuda_once, cuda_load_once);
	return kinet_cuda;
}

const char *kinet_cuda_absent_why(void)
{
	if (kinet_cuda_load())
		return "";
	if (KT(NO_CUDA))
		return "GPUs are not used (KINET_NO_CUDA=1)";
	return cuda_why;
}

void *kinet_queue_alloc(size_t len)
{
	if (!len)
		return NULL;
	size_t sz = (len + 4095) & ~(size_t)4095;
	void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	const struct kinet_cuda_ops *cu = kinet_cuda_load();
	if (cu && cu->host_register && cu->host_register(p, sz) != 0)
		KLOG_WARN("queue memory could not be mapped into the GPU");
	return p;
}

void kinet_queue_free(void *p, size_t len)
{
	if (!p)
		return;
	size_t sz = (len + 4095) & ~(size_t)4095;
	if (kinet_cuda && kinet_cuda->host_unregister)
		kinet_cuda->host_unregister(p);
	munmap(p, sz);
}

int kinet_mem_copy(void *dst, int dkind, const void *src, int skind, size_t n)
{
	if (dkind == KINET_MEM_HOST && skind == KINET_MEM_HOST) {
		/* a WQE may name overlapping source and target (one region
		 * written into itself): memmove, never memcpy's undefined case */
		memmove(dst, src, n);
		return 0;
	}
	if (!kinet_cuda || !kinet_cuda->copy)
		return -ENOSYS;
	return kinet_cuda->copy(dst, dkind, src, skind, n);
}

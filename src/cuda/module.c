/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * module.c - libkinet_cuda.so: the hooks the core loads at run time
 * (struct kinet_cuda_ops): copies between host and GPU memory, atomics on GPU
 * memory, pointer kinds, mapping of queue memory into the GPU, the memory
 * kinds of kinet_mem_alloc.
 *
 * Every engine thread that calls a hook gets a non-blocking stream (one of a
 * few, shared) and a pinned staging buffer for small copies and atomics. A hook returns only
 * once its effect is complete and visible to later kernels and copies (the
 * engine writes the CQE after it returns: docs/ordering.md), except
 * copy_async, which only enqueues on that stream: the engine records a fence
 * (a CUDA event) after such copies and writes their CQEs once it completed.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "core/driver.h"
#include "gpu/gpu.h"
#include "cuda/cuda_priv.h"

static int g_dev = -1;
static size_t g_small = 4096;
static pthread_key_t g_key;

struct cu_thread {
	cudaStream_t stream; /* one of g_streams */
	uint8_t *stage;      /* pinned, g_stage bytes */
	uint8_t *bounce;     /* pinned, CU_BOUNCE bytes: GPU-to-GPU copies (KINET_GPU_COPY_D2D=ce) */
};

/* GPU-to-GPU copies through pinned host memory (KINET_GPU_COPY_D2D=ce, the
 * default). A device-to-device CUDA copy runs on an SM: on an H100
 * (2026-12-07, driver 580) none landed within a second while a kernel held
 * every SM, where copies to and from pinned host memory, which the copy
 * engines do alone, landed at once. A GPU-initiated program commonly holds
 * every SM while it waits for the NIC, so the CPU engine's GPU-to-GPU copies
 * go to host memory and back, in CU_BOUNCE chunks on the thread's stream:
 * each chunk's copy out of the bounce buffer is ordered before the next
 * chunk's copy into it, so one buffer per thread serves copies left in
 * flight too. */
#define CU_BOUNCE (1u << 20)
static int g_d2d_ce = 1;

/* The engine threads' streams: at most CU_STREAMS, shared round-robin. The
 * GPU has a few hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by
 * default) that streams share; a stream mapped onto the queue of an
 * application kernel that waits for a CQE would wait for that kernel, and
 * the CQE would never come. Few streams keep clear of the application's. */
#define CU_STREAMS 4
static pthread_mutex_t g_st_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t g_streams[CU_STREAMS];
static unsigned g_st_next;

static void cu_thread_free(void *p)
{
	struct cu_thread *t = p;
	if (!t)
		return;
	if (t->stage)
		cudaFreeHost(t->stage);
	if (t->bounce)
		cudaFreeHost(t->bounce);
	free(t);
}

static int cu_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	KLOG_ERR("cuda: %s: %s", what, cudaGetErrorString(e));
	cudaGetLastError(); /* clear a sticky-free error */
	return -EIO;
}

static int cu_stream_get(cudaStream_t *out)
{
	pthread_mutex_lock(&g_st_lock);
	unsigned i = g_st_next++ % CU_STREAMS;
	int rc = 0;
	if (!g_streams[i])
		rc = cu_err(cudaStreamCreateWithFlags(&g_streams[i], cudaStreamNonBlocking),
			    "cudaStreamCreate");
	*out = g_streams[i];
	pthread_mutex_unlock(&g_st_lock);
	return rc;
}

/* The calling thread's CUDA resources, created on first use. */
static struct cu_thread *cu_self(void)
{
	struct cu_thread *t = pthread_getspecific(g_key);
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (cu_err(cudaSetDevice(g_dev), "cudaSetDevice") || cu_stream_get(&t->stream) ||
	    cu_err(cudaHostAlloc((void **)&t->stage, g_small > 64 ? g_small : 64,
				 cudaHostAllocDefault),
		   "cudaHostAlloc")) {
		cu_thread_free(t);
		return NULL;
	}
	pthread_setspecific(g_key, t);
	return t;
}

/* dst and src both GPU memory, through t->bounce (above): enqueued on
 * t->stream, not waited for. */
static int cu_copy_d2d_ce(struct cu_thread *t, void *dst, const void *src, size_t n)
{
	if (!t->bounce &&
	    cu_err(cudaHostAlloc((void **)&t->bounce, CU_BOUNCE, cudaHostAllocDefault),
		   "cudaHostAlloc of the GPU-to-GPU bounce buffer"))
		return -EIO;
	for (size_t off = 0; off < n; off += CU_BOUNCE) {
		size_t c = n - off < CU_BOUNCE ? n - off : CU_BOUNCE;
		cudaError_t e = cudaMemcpyAsync(t->bounce, (const uint8_t *)src + off, c,
						cudaMemcpyDeviceToHost, t->stream);
		if (e == cudaSuccess)
			e = cudaMemcpyAsync((uint8_t *)dst + off, t->bounce, c,
					    cudaMemcpyHostToDevice, t->stream);
		if (cu_err(e, "GPU-to-GPU copy through host memory"))
			return -EIO;
	}
	return 0;
}

static int cu_copy(void *dst, int dkind, const void *src, int skind, size_t n)
{
	struct cu_thread *t = cu_self();
	if (!t)
		return -EIO;
	if (n == 0)
		return 0;
	cudaError_t e;
	if (n <= g_small && dkind == KINET_MEM_CUDA && skind == KINET_MEM_HOST) {
		/* small host -> GPU: through pinned staging, so the copy engine
		 * never waits for the driver's pageable path */
		memcpy(t->stage, src, n);
		e = cudaMemcpyAsync(dst, t->stage, n, cudaMemcpyHostToDevice, t->stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(t->stream);
		return cu_err(e, "copy to GPU");
	}
	if (n <= g_small && dkind == KINET_MEM_HOST && skind == KINET_MEM_CUDA) {
		e = cudaMemcpyAsync(t->stage, src, n, cudaMemcpyDeviceToHost, t->stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(t->stream);
		if (e == cudaSuccess)
			memcpy(dst, t->stage, n);
		return cu_err(e, "copy from GPU");
	}
	if (g_d2d_ce && dkind == KINET_MEM_CUDA && skind == KINET_MEM_CUDA) {
		if (cu_copy_d2d_ce(t, dst, src, n))
			return -EIO;
		return cu_err(cudaStreamSynchronize(t->stream), "GPU-to-GPU copy (wait)");
	}
	e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, t->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(t->stream);
	return cu_err(e, "copy");
}

/* A NIC atomic on GPU memory: read the word, compute, write it back, both
 * through the copy engine. The responder calls this under its lock, so NIC
 * atomics are atomic with respect to each other (what IB promises:
 * IBV_ATOMIC_HCA), not with respect to kernels' own atomics on the word.
 * A one-thread kernel would be atomic with those too, but it needs a free
 * SM: a persistent kernel filling the GPU, or kernels serialised (the
 * sanitizers do that), would deadlock against the kernel that waits for
 * this atomic. The copy engine needs no SM. */
static int cu_atomic64(void *addr, int op, uint64_t a, uint64_t b, uint64_t *old)
{
	struct cu_thread *t = cu_self();
	if (!t)
		return -EIO;
	if (op != KN_OPCODE_ATOMIC_FA && op != KN_OPCODE_ATOMIC_CS)
		return -EINVAL;
	cudaError_t e = cudaMemcpyAsync(t->stage, addr, 8, cudaMemcpyDeviceToHost, t->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(t->stream);
	if (cu_err(e, "atomic on GPU memory (read)"))
		return -EIO;
	uint64_t v, nv;
	memcpy(&v, t->stage, 8);
	nv = op == KN_OPCODE_ATOMIC_FA ? v + a : (v == b ? a : v);
	if (nv != v) {
		memcpy(t->stage + 8, &nv, 8);
		e = cudaMemcpyAsync(addr, t->stage + 8, 8, cudaMemcpyHostToDevice, t->stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(t->stream);
		if (cu_err(e, "atomic on GPU memory (write)"))
			return -EIO;
	}
	*old = v;
	return 0;
}

/* ---- copies left in flight -------------------------------------------------- */

static int cu_copy_async(void *dst, int dkind, const void *src, int skind, size_t n)
{
	struct cu_thread *t = cu_self();
	if (!t)
		return -EIO;
	if (n == 0)
		return 0;
	if (g_d2d_ce && dkind == KINET_MEM_CUDA && skind == KINET_MEM_CUDA)
		return cu_copy_d2d_ce(t, dst, src, n);
	return cu_err(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, t->stream), "copy (async)");
}

/* Fences are CUDA events, kept for reuse (creating one costs more than
 * recording it). */
static pthread_mutex_t g_ev_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaEvent_t *g_ev_pool;
static size_t g_ev_n, g_ev_cap;

static int cu_fence(void **f)
{
	struct cu_thread *t = cu_self();
	if (!t)
		return -EIO;
	cudaEvent_t ev = NULL;
	pthread_mutex_lock(&g_ev_lock);
	if (g_ev_n)
		ev = g_ev_pool[--g_ev_n];
	pthread_mutex_unlock(&g_ev_lock);
	if (!ev && cu_err(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate"))
		return -EIO;
	if (cu_err(cudaEventRecord(ev, t->stream), "cudaEventRecord")) {
		cudaEventDestroy(ev);
		return -EIO;
	}
	*f = ev;
	return 0;
}

static int cu_fence_query(void *f)
{
	cudaError_t e = cudaEventQuery((cudaEvent_t)f);
	if (e == cudaErrorNotReady)
		return 0;
	return cu_err(e, "copy in flight") ? -EIO : 1;
}

static int cu_fence_wait(void *f)
{
	return cu_err(cudaEventSynchronize((cudaEvent_t)f), "copy in flight");
}

static void cu_fence_free(void *f)
{
	cudaEvent_t ev = (cudaEvent_t)f;
	pthread_mutex_lock(&g_ev_lock);
	if (g_ev_n == g_ev_cap) {
		size_t ncap = g_ev_cap ? g_ev_cap * 2 : 64;
		cudaEvent_t *p = realloc(g_ev_pool, ncap * sizeof(*p));
		if (p) {
			g_ev_pool = p;
			g_ev_cap = ncap;
		}
	}
	if (g_ev_n < g_ev_cap) {
		g_ev_pool[g_ev_n++] = ev;
		ev = NULL;
	}
	pthread_mutex_unlock(&g_ev_lock);
	if (ev)
		cudaEventDestroy(ev);
}

static int cu_pointer_kind(const void *p)
{
	struct cudaPointerAttributes a;
	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		cudaGetLastError();
		return KINET_MEM_HOST;
	}
	if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged)
		return KINET_MEM_CUDA;
	return KINET_MEM_HOST;
}

/* ---- allocation identity (the registration cache) ------------------------------ */

typedef CUresult (*pga_fn)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *, void *);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
static pga_fn g_pga;
static retain_fn g_retain;
static release_fn g_release;

/* The driver's entry points, through the runtime (no link to libcuda). */
static void cu_entry_points(void)
{
	enum cudaDriverEntryPointQueryResult q;
	void *f = NULL;
	if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &f, 12000, cudaEnableDefault,
					     &q) == cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		g_pga = (pga_fn)f;
	f = NULL;
	if (cudaGetDriverEntryPointByVersion("cuMemRetainAllocationHandle", &f, 12000,
					     cudaEnableDefault, &q) == cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		g_retain = (retain_fn)f;
	f = NULL;
	if (cudaGetDriverEntryPointByVersion("cuMemRelease", &f, 12000, cudaEnableDefault, &q) ==
		    cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		g_release = (release_fn)f;
	cudaGetLastError();
}

/* What the driver says of the allocation at p: its buffer id (unique in the
 * process for every allocation, so an address reused by a later cudaMalloc
 * has another), its range, and whether a pool, cuMemMap or managed memory
 * holds it. */
static int cu_mem_info(const void *p, struct kinet_cuda_mem *out)
{
	if (!g_pga)
		return -ENOSYS;
	CUpointer_attribute at[7] = {CU_POINTER_ATTRIBUTE_BUFFER_ID,
				     CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
				     CU_POINTER_ATTRIBUTE_RANGE_SIZE,
				     CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
				     CU_POINTER_ATTRIBUTE_IS_MANAGED,
				     CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
	unsigned long long id = 0;
	CUdeviceptr base = 0;
	size_t size = 0;
	void *pool = NULL;
	unsigned int managed = 0, type = 0;
	int ordinal = 0;
	void *data[7] = {&id, &base, &size, &pool, &managed, &type, &ordinal};
	CUresult r = g_pga(7, at, data, (CUdeviceptr)(uintptr_t)p);
	if (r != CUDA_SUCCESS) {
		KLOG_DBG("cuda: cuPointerGetAttributes(%p): error %d", p, (int)r);
		return -EIO;
	}
	if (type != CU_MEMORYTYPE_DEVICE && !managed)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->buffer_id = id;
	out->base = (uintptr_t)base;
	out->size = size;
	out->pool = pool != NULL;
	out->managed = managed != 0;
	out->device = ordinal;
	if (g_retain && g_release) {
		/* only memory mapped with cuMemMap has an allocation handle */
		CUmemGenericAllocationHandle h;
		if (g_retain(&h, (void *)p) == CUDA_SUCCESS) {
			out->vmm = 1;
			g_release(h);
		}
	}
	cudaGetLastError();
	return 0;
}

static int cu_host_register(void *p, size_t len)
{
	cudaError_t e =
		cudaHostRegister(p, len, cudaHostRegisterMapped | cudaHostRegisterPortable);
	if (e != cudaSuccess) {
		KLOG_WARN("cuda: cudaHostRegister(%zu bytes): %s", len, cudaGetErrorString(e));
		cudaGetLastError();
		return -ENOMEM;
	}
	return 0;
}

static int cu_host_unregister(void *p)
{
	if (cudaHostUnregister(p) != cudaSuccess) {
		cudaGetLastError();
		return -EINVAL;
	}
	return 0;
}

static int cu_dev_addr(const void *p, void **out)
{
	if (cudaSetDevice(g_dev) != cudaSuccess) {
		cudaGetLastError();
		return -ENODEV;
	}
	return kinet_cuda_dev_addr(p, out);
}

/* The GPU engine (src/cuda/engine.cu): one kernel at a time, on a stream of
 * its own with the highest priority, never the application's. */
static pthread_mutex_t g_eng_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t g_eng_stream;

static int cu_engine_launch(void *ctl, unsigned warps)
{
	void *d = NULL;
	/* the calling thread (an engine) may never have made the device's
	 * context current: pointer queries would not know the registration */
	if (cudaSetDevice(g_dev) != cudaSuccess) {
		cudaGetLastError();
		return -ENODEV;
	}
	if (kinet_cuda_dev_addr(ctl, &d) || !d) {
		KLOG_ERR("cuda: the GPU engine's control block %p is not mapped into the GPU", ctl);
		return -ENODEV;
	}
	cudaGetLastError(); /* an earlier call's error is not the launch's */
	pthread_mutex_lock(&g_eng_lock);
	cudaError_t e = cudaSuccess;
	if (!g_eng_stream) {
		int lo = 0, hi = 0;
		cudaDeviceGetStreamPriorityRange(&lo, &hi);
		e = cudaStreamCreateWithPriority(&g_eng_stream, cudaStreamNonBlocking, hi);
	}
	if (e == cudaSuccess)
		e = kinet_cuda_launch_engine(d, warps, g_eng_stream);
	pthread_mutex_unlock(&g_eng_lock);
	return cu_err(e, "launching the GPU engine");
}

static int cu_engine_wait(void)
{
	pthread_mutex_lock(&g_eng_lock);
	cudaStream_t s = g_eng_stream;
	pthread_mutex_unlock(&g_eng_lock);
	return s ? cu_err(cudaStreamSynchronize(s), "waiting for the GPU engine") : 0;
}

static int cu_engine_query(void)
{
	pthread_mutex_lock(&g_eng_lock);
	cudaStream_t s = g_eng_stream;
	pthread_mutex_unlock(&g_eng_lock);
	if (!s)
		return 0;
	cudaError_t e = cudaStreamQuery(s);
	if (e == cudaErrorNotReady)
		return 1;
	return cu_err(e, "the GPU engine");
}

/* ---- memory of kinet_mem_alloc --------------------------------------------------- */

static int cu_alloc_err(cudaError_t e, const char *what, size_t len)
{
	KLOG_ERR("cuda: %s(%zu bytes) on GPU %d: %s", what, len, g_dev, cudaGetErrorString(e));
	cudaGetLastError();
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

/* Managed memory kept on the GPU and mapped for the CPU: its preferred
 * location is the GPU (pages migrate to the CPU only while it touches them),
 * the CPU's page tables map it (no fault to establish a mapping where the
 * hardware can read it in place), and it is placed on the GPU now. */
static int cu_managed_on_gpu(void *p, size_t len)
{
	/* a stream of the module's (non-blocking): never behind an application
	 * kernel that waits for the network */
	struct cu_thread *t = cu_self();
	if (!t)
		return -EIO;
#if CUDART_VERSION >= 13000
	struct cudaMemLocation gpu = {cudaMemLocationTypeDevice, g_dev};
	struct cudaMemLocation cpu = {cudaMemLocationTypeHost, 0};
	cudaError_t e = cudaMemAdvise(p, len, cudaMemAdviseSetPreferredLocation, gpu);
	if (e == cudaSuccess)
		e = cudaMemAdvise(p, len, cudaMemAdviseSetAccessedBy, cpu);
	if (e == cudaSuccess)
		e = cudaMemPrefetchAsync(p, len, gpu, 0, t->stream);
#else
	cudaError_t e = cudaMemAdvise(p, len, cudaMemAdviseSetPreferredLocation, g_dev);
	if (e == cudaSuccess)
		e = cudaMemAdvise(p, len, cudaMemAdviseSetAccessedBy, cudaCpuDeviceId);
	if (e == cudaSuccess)
		e = cudaMemPrefetchAsync(p, len, g_dev, t->stream);
#endif
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(t->stream);
	return e == cudaSuccess ? 0 : cu_alloc_err(e, "placing managed memory on the GPU", len);
}

static int cu_mem_alloc(int kind, size_t len, struct kinet_cuda_alloc *out)
{
	memset(out, 0, sizeof(*out));
	out->gpu = g_dev;
	cudaError_t e = cudaSetDevice(g_dev);
	if (e != cudaSuccess)
		return cu_alloc_err(e, "cudaSetDevice", len);
	void *p = NULL;
	switch (kind) {
	case KINET_ALLOC_GPU:
		e = cudaMalloc(&p, len);
		if (e != cudaSuccess)
			return cu_alloc_err(e, "cudaMalloc", len);
		out->base = out->dev_ptr = p;
		return 0;
	case KINET_ALLOC_GPU_HOST_VISIBLE: {
		int conc = 0, direct = 0;
		if (cudaDeviceGetAttribute(&conc, cudaDevAttrConcurrentManagedAccess, g_dev) !=
			    cudaSuccess ||
		    !conc) {
			cudaGetLastError();
			KLOG_ERR("cuda: GPU %d has no concurrent managed access: the CPU could not "
				 "touch host-visible GPU memory while kernels run",
				 g_dev);
			return -EOPNOTSUPP;
		}
		if (cudaDeviceGetAttribute(&direct, cudaDevAttrDirectManagedMemAccessFromHost,
					   g_dev) != cudaSuccess) {
			cudaGetLastError();
			direct = 0;
		}
		e = cudaMallocManaged(&p, len, cudaMemAttachGlobal);
		if (e != cudaSuccess)
			return cu_alloc_err(e, "cudaMallocManaged", len);
		int rc = cu_managed_on_gpu(p, len);
		if (rc) {
			cudaFree(p);
			return rc;
		}
		out->base = out->dev_ptr = out->host_ptr = p;
		out->cpu_in_place = direct != 0;
		return 0;
	}
	case KINET_ALLOC_HOST_PINNED: {
		e = cudaHostAlloc(&p, len, cudaHostAllocMapped | cudaHostAllocPortable);
		if (e != cudaSuccess)
			return cu_alloc_err(e, "cudaHostAlloc", len);
		void *d = NULL;
		e = cudaHostGetDevicePointer(&d, p, 0);
		if (e != cudaSuccess) {
			cudaFreeHost(p);
			return cu_alloc_err(e, "cudaHostGetDevicePointer", len);
		}
		out->base = out->host_ptr = p;
		out->dev_ptr = d;
		return 0;
	}
	default: return -EINVAL;
	}
}

static int cu_mem_free(int kind, void *base)
{
	cudaError_t e = kind == KINET_ALLOC_HOST_PINNED ? cudaFreeHost(base) : cudaFree(base);
	return cu_err(e, kind == KINET_ALLOC_HOST_PINNED ? "cudaFreeHost" : "cudaFree");
}

static const struct kinet_cuda_ops cu_ops = {
	.dev_addr = cu_dev_addr,
	.engine_query = cu_engine_query,
	.engine_launch = cu_engine_launch,
	.engine_wait = cu_engine_wait,
	.copy = cu_copy,
	.atomic64 = cu_atomic64,
	.pointer_kind = cu_pointer_kind,
	.host_register = cu_host_register,
	.host_unregister = cu_host_unregister,
	.copy_async = cu_copy_async,
	.fence = cu_fence,
	.fence_query = cu_fence_query,
	.fence_wait = cu_fence_wait,
	.fence_free = cu_fence_free,
	.mem_info = cu_mem_info,
	.mem_alloc = cu_mem_alloc,
	.mem_free = cu_mem_free,
};

static const struct kinet_cuda_ops *g_ops;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void cu_init(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
		cudaGetLastError();
		return; /* no driver or no GPU: quietly absent */
	}
	int dev = 0, can_map = 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, dev) != cudaSuccess ||
	    !can_map) {
		cudaGetLastError();
		KLOG_INFO("cuda: GPU %d cannot map host memory: CUDA support off", dev);
		return;
	}
	if (kinet_cuda_preload() != cudaSuccess || kinet_cuda_preload_engine() != cudaSuccess) {
		KLOG_WARN("cuda: the module's kernels do not load on GPU %d: CUDA support off",
			  dev);
		cudaGetLastError();
		return;
	}
	if (pthread_key_create(&g_key, cu_thread_free) != 0)
		return;
	long long s = (long long)KT(GPU_SMALL_COPY);
	g_small = s > 0 ? (size_t)s : 0;
	g_d2d_ce = strcmp(KT(GPU_COPY_D2D), "sm") != 0;
	if (g_small > (1u << 20))
		g_small = 1u << 20;
	cu_entry_points();
	g_dev = dev;
	g_ops = &cu_ops;
	KLOG_INFO("cuda: GPU %d of %d in use", dev, n);
}

const struct kinet_cuda_ops *kinet_cuda_module_ops(void)
{
	pthread_once(&g_once, cu_init);
	return g_ops;
}

int kinet_cuda_device(void)
{
	return kinet_cuda_module_ops() ? g_dev : -ENODEV;
}

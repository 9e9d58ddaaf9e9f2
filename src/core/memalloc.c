/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory for GPU-initiated programs (kinet_mem_alloc): the checks, the
 * alignment, and the report of where an allocation lives and who moves it.
 * The CUDA module allocates (kinet_cuda_ops.mem_alloc); the backend says
 * which engine moves each kind (kinet_backend_ops.mem_route).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "core/internal.h"

#define MEM_ALIGN_MAX ((size_t)1 << 30)
#define MEM_GPU_ALIGN 256 /* what cudaMalloc and cudaMallocManaged give at least */

struct kinet_mem {
	struct kinet_mem_info info;
	void *base;       /* what the allocator returned; info.ptr lies in it */
	size_t alloc_len; /* bytes allocated from base */
	const struct kinet_cuda_ops *cu; /* the CUDA module that allocated it; NULL: mmap */
};

static const char *kind_str(int kind)
{
	switch (kind) {
	case KINET_ALLOC_GPU: return "GPU memory";
	case KINET_ALLOC_GPU_HOST_VISIBLE: return "host-visible GPU memory";
	case KINET_ALLOC_HOST_PINNED: return "pinned host memory";
	default: return "?";
	}
}

static const char *where_str(int kind, bool cuda, bool cpu_in_place)
{
	if (!cuda)
		return "pageable host memory, neither pinned nor mapped into a GPU (no usable GPU): "
		       "the GPU cannot reach it";
	switch (kind) {
	case KINET_ALLOC_GPU: return "GPU memory (cudaMalloc): the CPU cannot access it";
	case KINET_ALLOC_GPU_HOST_VISIBLE:
		return cpu_in_place
			       ? "managed memory kept on the GPU (cudaMallocManaged, preferred "
				 "location the GPU, mapped for the CPU): the CPU reads and writes "
				 "it in place (hardware coherence)"
			       : "managed memory kept on the GPU (cudaMallocManaged, preferred "
				 "location the GPU, mapped for the CPU): a CPU access moves the "
				 "pages it touches to host memory (page faults) until the GPU's "
				 "next access moves them back";
	default: return "pinned host memory mapped into the GPU (cudaHostAlloc): the GPU reaches "
			"it over PCIe";
	}
}

/* The backend's words, or a hardware NIC's. */
static void route(kinet_ctx *ctx, struct kinet_mem_info *i)
{
	bool mapped = i->mem_kind == KINET_MEM_HOST && i->dev_ptr != NULL;
	i->engine = "hardware";
	i->path = i->mem_kind == KINET_MEM_CUDA
			  ? "NIC DMA: dma-buf, else the peer-memory module, else refused "
			    "(kinet_mr_path of its region tells)"
			  : "NIC DMA: direct";
	if (ctx->ops->mem_route)
		ctx->ops->mem_route(ctx, i->mem_kind, mapped, &i->engine, &i->path);
}

static int host_fallback(struct kinet_mem *m, size_t len, size_t align)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t extra = align > pg ? align : 0; /* align is at least a page */
	if (len > SIZE_MAX - extra - pg)
		return -ENOMEM;
	m->alloc_len = (len + extra + pg - 1) & ~(pg - 1);
	void *p = mmap(NULL, m->alloc_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	m->base = p;
	m->info.host_ptr = p;
	m->info.gpu = -1;
	return 0;
}

int kinet_mem_alloc(kinet_ctx *ctx, int kind, size_t len, size_t align, kinet_mem **out)
{
	if (out)
		*out = NULL;
	if (!ctx || !out) {
		KLOG_ERR("kinet_mem_alloc: %s is NULL", ctx ? "out" : "ctx");
		return -EINVAL;
	}
	if (kind != KINET_ALLOC_GPU && kind != KINET_ALLOC_GPU_HOST_VISIBLE &&
	    kind != KINET_ALLOC_HOST_PINNED) {
		KLOG_ERR("kinet_mem_alloc: unknown kind %d (KINET_ALLOC_GPU, "
			 "KINET_ALLOC_GPU_HOST_VISIBLE, KINET_ALLOC_HOST_PINNED)",
			 kind);
		return -EINVAL;
	}
	if (len == 0) {
		KLOG_ERR("kinet_mem_alloc: length 0");
		return -EINVAL;
	}
	if ((align & (align - 1)) || align > MEM_ALIGN_MAX) {
		KLOG_ERR("kinet_mem_alloc: alignment %zu is not 0 or a power of two up to 1 GiB",
			 align);
		return -EINVAL;
	}
	const struct kinet_cuda_ops *cu = kinet_cuda_load();
	bool have = cu && cu->mem_alloc && cu->mem_free;
	const char *why = !cu ? kinet_cuda_absent_why()
			      : "the CUDA module has no allocation hooks";
	if (!have && kind != KINET_ALLOC_HOST_PINNED) {
		KLOG_ERR("kinet_mem_alloc: %s needs a usable GPU: %s", kind_str(kind), why);
		return -ENODEV;
	}
	struct kinet_mem *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	/* the allocators' own alignment, and more by allocating more */
	size_t natural = have ? MEM_GPU_ALIGN : (size_t)sysconf(_SC_PAGESIZE);
	if (align < natural)
		align = natural;
	size_t extra = align > natural ? align : 0;
	bool in_place = false;
	int rc;
	if (have) {
		if (len > SIZE_MAX - extra) {
			free(m);
			return -ENOMEM;
		}
		struct kinet_cuda_alloc a;
		memset(&a, 0, sizeof(a));
		m->alloc_len = len + extra;
		rc = cu->mem_alloc(kind, m->alloc_len, &a);
		if (rc) {
			KLOG_ERR("kinet_mem_alloc: %s of %zu bytes: %s", kind_str(kind), len,
				 kinet_strerror(rc));
			free(m);
			return rc;
		}
		m->cu = cu;
		m->base = a.base;
		m->info.dev_ptr = a.dev_ptr;
		m->info.host_ptr = a.host_ptr;
		m->info.gpu = a.gpu;
		in_place = a.cpu_in_place;
	} else {
		rc = host_fallback(m, len, align);
		if (rc) {
			KLOG_ERR("kinet_mem_alloc: %zu bytes of host memory: %s", len,
				 kinet_strerror(rc));
			free(m);
			return rc;
		}
		KLOG_INFO("kinet_mem_alloc: %s: %s; page-aligned host memory instead, which the "
			  "GPU cannot reach",
			  kind_str(kind), why);
	}
	/* the first multiple of align in the allocation, for each view of it */
	uintptr_t b = (uintptr_t)m->base;
	size_t off = (size_t)(((b + align - 1) & ~(uintptr_t)(align - 1)) - b);
	if (m->info.dev_ptr)
		m->info.dev_ptr = (char *)m->info.dev_ptr + off;
	if (m->info.host_ptr)
		m->info.host_ptr = (char *)m->info.host_ptr + off;
	m->info.ptr = m->info.dev_ptr ? m->info.dev_ptr : m->info.host_ptr;
	m->info.len = len;
	m->info.align = align;
	m->info.kind = kind;
	m->info.mem_kind = kind == KINET_ALLOC_HOST_PINNED ? KINET_MEM_HOST : KINET_MEM_CUDA;
	m->info.where = where_str(kind, m->cu != NULL, in_place);
	route(ctx, &m->info);
	KLOG_DBG("kinet_mem_alloc: %s %p+%zu (GPU %d): %s; %s", kind_str(kind), m->info.ptr, len,
		 m->info.gpu, m->info.where, m->info.path);
	*out = m;
	return 0;
}

int kinet_mem_free(kinet_mem *m)
{
	if (!m) {
		KLOG_ERR("kinet_mem_free: NULL allocation");
		return -EINVAL;
	}
	int rc = 0;
	if (m->cu) {
		rc = m->cu->mem_free(m->info.kind, m->base);
	} else {
		munmap(m->base, m->alloc_len);
	}
	free(m);
	return rc;
}

int kinet_mem_query(const kinet_mem *m, struct kinet_mem_info *out)
{
	if (!m || !out)
		return -EINVAL;
	*out = m->info;
	return 0;
}

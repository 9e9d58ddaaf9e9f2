/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU memory through the registration cache and the region lifecycle, on
 * a GPU (the software NIC, staging allowed: gpu_util.h):
 *  - cudaFree then cudaMalloc at the same address is never served the old
 *    registration (the allocation's buffer id is checked on every hit), and
 *    the new one works for the NIC;
 *  - memory of a stream-ordered pool (cudaMallocAsync), mapped with
 *    cuMemMap, or managed, is refused by the cache (-EOPNOTSUPP);
 *  - a region revoked while a kernel keeps writing into it: the kernel's
 *    next write fails with the remote access error (reason revoked) and
 *    nothing lands after the revoke.
 */
#include <cuda.h>
#include <unistd.h>
#include "gpu_util.h"

static struct kinet_mr_cache_stats cstats(kinet_mr_cache *c)
{
	struct kinet_mr_cache_stats s;
	cr_assert_eq(kinet_mr_cache_stats(c, &s), 0);
	return s;
}

Test(gpu_lifecycle, free_then_malloc_same_address_gets_a_new_registration)
{
	struct gu_ctx g;
	gu_open(&g, 1, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1);
	kinet_mr_cache *c;
	cr_assert_eq(kinet_mr_cache_create(g.pd, NULL, &c), 0);
	/* a pair driven from the host (g's QPs are driven from kernels) */
	kinet_qp *ha, *hb;
	kn_qp *h;
	cr_assert_eq(kinet_qp_create(g.pd, NULL, &ha), 0);
	cr_assert_eq(kinet_qp_create(g.pd, NULL, &hb), 0);
	cr_assert_eq(kinet_qp_connect_local(ha, hb), 0);
	cr_assert_eq(kinet_qp_device(ha, &h), 0);
	const size_t len = 1 << 20;
	int same = 0;
	for (int round = 0; round < 8 && !same; round++) {
		uint8_t *p;
		CU(cudaMalloc((void **)&p, len));
		kinet_mr *m1, *m2, *m3;
		cr_assert_eq(kinet_mr_cache_get(c, p + 4096, 8192, KINET_ACCESS_ALL, &m1), 0);
		cr_assert_eq(kinet_mr_kind(m1), KINET_MEM_CUDA);
		/* a hit while the allocation lives */
		cr_assert_eq(kinet_mr_cache_get(c, p, 4096, KINET_ACCESS_ALL, &m2), 0);
		cr_assert_eq(m2, m1);
		cr_assert_eq(kinet_mr_cache_put(c, m1), 0);
		cr_assert_eq(kinet_mr_cache_put(c, m2), 0);
		uint32_t old_key = kinet_mr_rkey(m1);
		CU(cudaFree(p));
		uint8_t *q;
		CU(cudaMalloc((void **)&q, len));
		same = q == p;
		uint64_t hits = cstats(c).hits, inv = cstats(c).invalidations;
		cr_assert_eq(kinet_mr_cache_get(c, q, len, KINET_ACCESS_ALL, &m3), 0);
		if (same) {
			cr_assert_eq(cstats(c).hits, hits, "the freed allocation's region was served");
			cr_assert_gt(cstats(c).invalidations, inv);
			cr_assert_neq(kinet_mr_rkey(m3), old_key);
		}
		/* the new registration works: a write from host memory into it */
		struct tu_region src;
		cr_assert_eq(tu_region_alloc(&src, g.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 7 + round), 0);
		uint8_t back[4096];
		kn_ticket_t t;
		cr_assert_eq(kn_put(h, (uint64_t)(uintptr_t)q, kinet_mr_rkey(m3), src.buf, tu_lkey(&src),
				    4096, &t),
			     0);
		cr_assert_eq(kn_wait(h, t), 0);
		CU(cudaMemcpy(back, q, 4096, cudaMemcpyDeviceToHost));
		cr_assert_eq(memcmp(back, src.buf, 4096), 0);
		tu_region_free(&src);
		cr_assert_eq(kinet_mr_cache_put(c, m3), 0);
		CU(cudaFree(q));
		kinet_mr_cache_flush(c);
	}
	cr_assert(same, "cudaMalloc never returned the freed address: the case was not exercised");
	cr_assert_eq(kinet_mr_cache_destroy(c), 0);
	cr_assert_eq(kinet_qp_destroy(ha), 0);
	cr_assert_eq(kinet_qp_destroy(hb), 0);
	gu_close(&g);
}

typedef CUresult (*fn_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			      unsigned long long);
typedef CUresult (*fn_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*fn_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			   unsigned long long);
typedef CUresult (*fn_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*fn_gran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*fn_unmap)(CUdeviceptr, size_t);
typedef CUresult (*fn_release)(CUmemGenericAllocationHandle);
typedef CUresult (*fn_free)(CUdeviceptr, size_t);

static void *drv(const char *name)
{
	void *f = NULL;
	cudaDriverEntryPointQueryResult q;
	CU(cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q));
	cr_assert_eq(q, cudaDriverEntryPointSuccess, "%s", name);
	return f;
}

Test(gpu_lifecycle, pools_cumemmap_and_managed_memory_refused)
{
	struct gu_ctx g;
	gu_open(&g, 1, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1);
	kinet_mr_cache *c;
	cr_assert_eq(kinet_mr_cache_create(g.pd, NULL, &c), 0);
	kinet_mr *m = NULL;
	/* the stream-ordered allocator's pool */
	void *pa;
	cudaStream_t s;
	CU(cudaStreamCreate(&s));
	CU(cudaMallocAsync(&pa, 1 << 20, s));
	CU(cudaStreamSynchronize(s));
	cr_assert_eq(kinet_mr_cache_get(c, pa, 4096, KINET_ACCESS_ALL, &m), -EOPNOTSUPP);
	cr_assert_null(m);
	CU(cudaFreeAsync(pa, s));
	CU(cudaStreamSynchronize(s));
	CU(cudaStreamDestroy(s));
	/* cuMemMap */
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	size_t gran = 0;
	cr_assert_eq(((fn_gran)drv("cuMemGetAllocationGranularity"))(
			     &gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
		     CUDA_SUCCESS);
	CUmemGenericAllocationHandle h;
	cr_assert_eq(((fn_create)drv("cuMemCreate"))(&h, gran, &prop, 0), CUDA_SUCCESS);
	CUdeviceptr va = 0;
	cr_assert_eq(((fn_reserve)drv("cuMemAddressReserve"))(&va, gran, 0, 0, 0), CUDA_SUCCESS);
	cr_assert_eq(((fn_map)drv("cuMemMap"))(va, gran, 0, h, 0), CUDA_SUCCESS);
	CUmemAccessDesc ad;
	memset(&ad, 0, sizeof(ad));
	ad.location = prop.location;
	ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	cr_assert_eq(((fn_access)drv("cuMemSetAccess"))(va, gran, &ad, 1), CUDA_SUCCESS);
	cr_assert_eq(kinet_mr_cache_get(c, (void *)(uintptr_t)va, 4096, KINET_ACCESS_ALL, &m),
		     -EOPNOTSUPP);
	((fn_unmap)drv("cuMemUnmap"))(va, gran);
	((fn_release)drv("cuMemRelease"))(h);
	((fn_free)drv("cuMemAddressFree"))(va, gran);
	/* managed memory migrates */
	void *mm;
	CU(cudaMallocManaged(&mm, 1 << 16));
	cr_assert_eq(kinet_mr_cache_get(c, mm, 4096, KINET_ACCESS_ALL, &m), -EOPNOTSUPP);
	CU(cudaFree(mm));
	cr_assert_eq(cstats(c).refused, 3);
	cr_assert_eq(cstats(c).entries, 0);
	cr_assert_eq(kinet_mr_cache_destroy(c), 0);
	gu_close(&g);
}

/* ---- revoke under GPU traffic ----------------------------------------------------- */

#define CH 4096u
#define SLOTS 64u

struct rv_out {
	int rc;
	uint32_t synd, vendor;
	unsigned long long writes; /* completed before the error */
};

/* Writes chunk after chunk into the target until one fails. */
__global__ void revoke_writer(const kn_qp *qp, uint8_t *src, uint32_t lkey, uint64_t dst,
			      uint32_t rkey, volatile int *stop, rv_out *o)
{
	unsigned long long i = 0;
	int rc = 0;
	for (; !*stop; i++) {
		kn_ticket_t t;
		uint32_t k = (uint32_t)(i % SLOTS);
		rc = kn_put(qp, dst + (uint64_t)k * CH, rkey, src + (size_t)k * CH, lkey, CH, &t);
		if (!rc)
			rc = kn_wait(qp, t);
		if (rc)
			break;
	}
	o->rc = rc;
	o->writes = i;
	o->synd = kn_qp_error(qp, &o->vendor);
}

Test(gpu_lifecycle, revoke_under_gpu_traffic)
{
	struct gu_ctx g;
	gu_open(&g, 1, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1);
	struct gu_buf src, dst;
	gu_buf_alloc(&src, g.pd, SLOTS * CH, 51, 0);
	gu_buf_alloc(&dst, g.pd, SLOTS * CH, 52, 0);
	rv_out *o, ho;
	int *stop;
	CU(cudaMalloc((void **)&o, sizeof(*o)));
	CU(cudaHostAlloc((void **)&stop, sizeof(int), cudaHostAllocMapped));
	*stop = 0;
	int *dstop;
	CU(cudaHostGetDevicePointer((void **)&dstop, stop, 0));
	revoke_writer<<<1, 1>>>(g.d[0], src.dev, kinet_mr_lkey(src.mr),
				(uint64_t)(uintptr_t)dst.dev, gu_key(&dst), dstop, o);
	CU(cudaGetLastError());
	/* let it write a while, then revoke the target under it */
	struct kinet_qp_counters qc;
	for (int i = 0; i < 5000; i++) {
		cr_assert_eq(kinet_qp_counters(g.a[0], &qc), 0);
		if (qc.completed >= 200)
			break;
		usleep(1000);
	}
	cr_assert_geq(qc.completed, 200, "the kernel's writes did not get going");
	cr_assert_eq(kinet_mr_revoke(dst.mr), 0);
	uint8_t *snap = (uint8_t *)malloc(SLOTS * CH), *fin = (uint8_t *)malloc(SLOTS * CH);
	gu_buf_read(&dst, snap); /* what the target holds once revoke returned */
	/* the kernel stops at its first failed write; never wait forever */
	cudaError_t q = cudaErrorNotReady;
	for (int i = 0; i < 20000 && (q = cudaStreamQuery(0)) == cudaErrorNotReady; i++)
		usleep(1000);
	if (q == cudaErrorNotReady) {
		*stop = 1;
		CU(cudaDeviceSynchronize());
		cr_assert_fail("the kernel's writes went on succeeding after the revoke");
	}
	CU(cudaDeviceSynchronize());
	CU(cudaMemcpy(&ho, o, sizeof(ho), cudaMemcpyDeviceToHost));
	cr_assert_eq(ho.rc, -EIO, "rc %d after %llu writes", ho.rc, ho.writes);
	cr_assert_eq(ho.synd, KN_SYND_REMOTE_ACCESS_ERR, "syndrome 0x%x", ho.synd);
	cr_assert_eq(ho.vendor, KINET_REASON_REVOKED, "reason %u", ho.vendor);
	gu_buf_read(&dst, fin);
	cr_assert_eq(memcmp(snap, fin, SLOTS * CH), 0, "a write landed after the revoke");
	/* the writes before it landed: the slots hold the source's bytes */
	cr_assert_eq(memcmp(fin, src.mirror, CH), 0);
	free(snap);
	free(fin);
	cudaFree(o);
	cudaFreeHost(stop);
	gu_buf_free(&src);
	gu_buf_free(&dst);
	gu_close(&g);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet_mem_alloc on a GPU: each kind allocates, aligned as asked; what it
 * reports agrees with cudaPointerGetAttributes; a kernel writes random data
 * that the host reads back byte for byte (directly where the CPU can access
 * the memory), and the host's writes reach the kernel; each registers with
 * kinet_mr_reg as the kind it reports; and a put from a kernel between two
 * allocations, for every pair of kinds, moves the data byte for byte and
 * nothing beyond. Runs again with KINET_GPU_ENGINE=on (test_gpu_memkinds.geng):
 * the engine reported follows the tunable.
 */
#include "gpu_util.h"

static const int kinds[3] = {KINET_ALLOC_GPU, KINET_ALLOC_GPU_HOST_VISIBLE,
			     KINET_ALLOC_HOST_PINNED};
static const char *const kind_name[3] = {"gpu", "gpu_host_visible", "host_pinned"};

/* Byte i of the pattern of `seed`: the host and the kernels compute it alike. */
__host__ __device__ static uint8_t pat(uint64_t seed, size_t i)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull + (i >> 3) + 1;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint8_t)(z >> (8 * (i & 7)));
}

__global__ void fill_kernel(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = pat(seed, i);
}

/* Counts the bytes that differ from the pattern; the first in *first. */
__global__ void check_kernel(const uint8_t *p, size_t n, uint64_t seed,
			     unsigned long long *bad, unsigned long long *first)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		if (p[i] != pat(seed, i)) {
			atomicAdd(bad, 1ull);
			atomicMin(first, (unsigned long long)i);
		}
}

__global__ void put_kernel(const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *laddr,
			   uint32_t lkey, uint32_t len, int *rc)
{
	kn_ticket_t t;
	int r = kn_put(qp, raddr, rkey, laddr, lkey, len, &t);
	if (!r)
		r = kn_wait(qp, t);
	*rc = r;
}

static void fill(void *p, size_t n, uint64_t seed)
{
	fill_kernel<<<64, 256>>>((uint8_t *)p, n, seed);
	CU_SYNC();
}

/* Reads [p, p + n) back into a host buffer and compares it with the pattern:
 * from the CPU's own address where it has one, else by a CUDA copy. */
static void expect(const struct kinet_mem_info *i, size_t off, size_t n, uint64_t seed,
		   const char *what)
{
	uint8_t *want = (uint8_t *)malloc(n);
	uint8_t *got = (uint8_t *)malloc(n);
	cr_assert(want && got);
	for (size_t k = 0; k < n; k++)
		want[k] = pat(seed, off + k);
	if (i->host_ptr)
		memcpy(got, (uint8_t *)i->host_ptr + off, n);
	else
		CU(cudaMemcpy(got, (uint8_t *)i->dev_ptr + off, n, cudaMemcpyDeviceToHost));
	long d = gu_diff(want, got, n);
	cr_assert_eq(d, -1, "%s (%s): byte %ld of %zu differs: 0x%02x, want 0x%02x", what,
		     kind_name[i->kind], d + (long)off, n, d < 0 ? 0 : got[d], d < 0 ? 0 : want[d]);
	free(want);
	free(got);
}

static bool geng_on(void)
{
	const char *v = kinet_tunable_str("KINET_GPU_ENGINE");
	return v && !strcmp(v, "on");
}

/* What the allocation reports, against the CUDA driver and the rules. */
static void check_info(const struct kinet_mem_info *i, int kind, size_t len, size_t align)
{
	cr_assert_eq(i->kind, kind);
	cr_assert_eq(i->len, len);
	cr_assert_not_null(i->ptr);
	cr_assert_geq(i->align, align ? align : 256);
	cr_assert_eq((uintptr_t)i->ptr % i->align, 0, "%s: %p, align %zu", kind_name[kind], i->ptr,
		     i->align);
	int dev = -1;
	CU(cudaGetDevice(&dev));
	cr_assert_eq(i->gpu, dev);
	cr_assert_not_null(i->dev_ptr, "%s: the GPU reaches every kind", kind_name[kind]);
	cr_assert_eq(i->ptr, i->dev_ptr);
	cudaPointerAttributes a;
	CU(cudaPointerGetAttributes(&a, i->ptr));
	switch (kind) {
	case KINET_ALLOC_GPU:
		cr_assert_eq(a.type, cudaMemoryTypeDevice);
		cr_assert_null(i->host_ptr);
		cr_assert_eq(i->mem_kind, KINET_MEM_CUDA);
		break;
	case KINET_ALLOC_GPU_HOST_VISIBLE:
		cr_assert_eq(a.type, cudaMemoryTypeManaged);
		cr_assert_eq(i->host_ptr, i->ptr);
		cr_assert_eq(i->mem_kind, KINET_MEM_CUDA);
		cr_assert(strstr(i->where, "managed memory kept on the GPU"), "%s", i->where);
		break;
	default:
		cr_assert_eq(a.type, cudaMemoryTypeHost);
		cr_assert_eq(a.hostPointer, i->host_ptr);
		cr_assert_eq(i->mem_kind, KINET_MEM_HOST);
		break;
	}
	cr_assert_eq(a.devicePointer, i->dev_ptr, "%s: %p, the driver says %p", kind_name[kind],
		     i->dev_ptr, a.devicePointer);
	cr_assert_eq(a.device, dev);
	/* the software NIC's engines (docs/architecture.md, "Memory kinds") */
	const char *eng = geng_on() ? "GPU engine" : "CPU engine";
	cr_assert_str_eq(i->engine, eng, "%s: %s", kind_name[kind], i->path);
	cr_assert_eq(strncmp(i->path, eng, strlen(eng)), 0, "%s", i->path);
	if (!geng_on())
		cr_assert_str_eq(i->path, i->mem_kind == KINET_MEM_CUDA
						  ? "CPU engine: CUDA copies (staged)"
						  : "CPU engine: direct");
}

Test(memkinds, each_kind)
{
	struct gu_ctx g;
	gu_open(&g, 1, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 0);
	size_t lens[2] = {1000003, 4096};
	size_t aligns[3] = {0, 4096, 1u << 16};
	unsigned long long *cnt;
	CU(cudaMalloc((void **)&cnt, 2 * sizeof(*cnt)));
	for (int k = 0; k < 3; k++)
		for (int l = 0; l < 2; l++)
			for (int a = 0; a < 3; a++) {
				size_t len = lens[l];
				uint64_t seed = 1000 + (uint64_t)(k * 100 + l * 10 + a);
				kinet_mem *m = NULL;
				cr_assert_eq(kinet_mem_alloc(g.ctx, kinds[k], len, aligns[a], &m), 0,
					     "%s", kind_name[k]);
				struct kinet_mem_info i;
				cr_assert_eq(kinet_mem_query(m, &i), 0);
				check_info(&i, kinds[k], len, aligns[a]);
				/* a kernel writes, the host reads */
				fill(i.ptr, len, seed);
				expect(&i, 0, len, seed, "written by a kernel");
				/* the host writes, a kernel reads */
				if (i.host_ptr) {
					for (size_t b = 0; b < len; b++)
						((uint8_t *)i.host_ptr)[b] = pat(seed + 7, b);
					unsigned long long init[2] = {0, ~0ull};
					CU(cudaMemcpy(cnt, init, sizeof(init), cudaMemcpyHostToDevice));
					check_kernel<<<64, 256>>>((const uint8_t *)i.ptr, len, seed + 7,
								  cnt, cnt + 1);
					CU_SYNC();
					unsigned long long res[2];
					CU(cudaMemcpy(res, cnt, sizeof(res), cudaMemcpyDeviceToHost));
					cr_assert_eq(res[0], 0, "%s: %llu bytes written by the host "
								"differ in the kernel, the first at %llu",
						     kind_name[k], res[0], res[1]);
				}
				kinet_mr *mr = NULL;
				cr_assert_eq(kinet_mr_reg(g.pd, i.ptr, len, KINET_ACCESS_ALL, &mr), 0,
					     "%s", kind_name[k]);
				cr_assert_eq(kinet_mr_kind(mr), i.mem_kind, "%s", kind_name[k]);
				cr_assert_eq(kinet_mr_dereg(mr), 0);
				cr_assert_eq(kinet_mem_free(m), 0);
			}
	CU(cudaFree(cnt));
	gu_close(&g);
}

/* A put from a kernel out of an allocation of each kind into one of each
 * kind: the bytes arrive, the destination's tail stays as it was. */
Test(memkinds, put_between_kinds)
{
	struct gu_ctx g;
	gu_open(&g, 1, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 0);
	const size_t len = gu_quick() ? 65536 : 1u << 20, tail = 4096;
	int *rc;
	CU(cudaMalloc((void **)&rc, sizeof(*rc)));
	for (int s = 0; s < 3; s++)
		for (int d = 0; d < 3; d++) {
			uint64_t ss = 500 + (uint64_t)(s * 3 + d), ds = 900 + (uint64_t)(s * 3 + d);
			kinet_mem *ms, *md;
			struct kinet_mem_info is, id;
			cr_assert_eq(kinet_mem_alloc(g.ctx, kinds[s], len, 0, &ms), 0);
			cr_assert_eq(kinet_mem_alloc(g.ctx, kinds[d], len + tail, 0, &md), 0);
			cr_assert_eq(kinet_mem_query(ms, &is), 0);
			cr_assert_eq(kinet_mem_query(md, &id), 0);
			fill(is.ptr, len, ss);
			fill(id.ptr, len + tail, ds);
			kinet_mr *rs, *rd;
			cr_assert_eq(kinet_mr_reg(g.pd, is.ptr, len, KINET_ACCESS_LOCAL_WRITE, &rs), 0);
			cr_assert_eq(kinet_mr_reg(g.pd, id.ptr, len + tail, KINET_ACCESS_ALL, &rd), 0);
			CU(cudaMemset(rc, 0x7f, sizeof(*rc)));
			put_kernel<<<1, 1>>>(g.d[0], (uint64_t)(uintptr_t)id.ptr, kinet_mr_rkey(rd),
					     is.ptr, kinet_mr_lkey(rs), (uint32_t)len, rc);
			CU_SYNC();
			int r = -1;
			CU(cudaMemcpy(&r, rc, sizeof(r), cudaMemcpyDeviceToHost));
			if (r)
				gu_diag(&g, 0);
			cr_assert_eq(r, 0, "%s -> %s: put %d", kind_name[s], kind_name[d], r);
			char what[64];
			snprintf(what, sizeof(what), "put from %s", kind_name[s]);
			expect(&id, 0, len, ss, what);
			expect(&id, len, tail, ds, "past the put");
			expect(&is, 0, len, ss, "the put's source");
			cr_assert_eq(kinet_mr_dereg(rs), 0);
			cr_assert_eq(kinet_mr_dereg(rd), 0);
			cr_assert_eq(kinet_mem_free(ms), 0);
			cr_assert_eq(kinet_mem_free(md), 0);
		}
	CU(cudaFree(rc));
	gu_close(&g);
}

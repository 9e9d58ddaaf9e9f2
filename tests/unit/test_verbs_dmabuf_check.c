/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The checks of kinet-verbs' ibv_reg_dmabuf_mr (src/verbs/dmabuf.c), on
 * dma-bufs this machine need not have: an fdinfo entry of a GPU dma-buf
 * read, and the decision for each exporter (nvidia with and without kinet's
 * CUDA module, udmabuf, another device), for ranges in and past the
 * dma-buf, and for an iova in, outside or across the CUDA allocations that
 * a stand-in CUDA module reports; every refusal with its errno and a log
 * line saying why. test_verbs_dmabuf runs the verb itself.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include "verbs/dmabuf.h"
#include "../util/testutil.h"

/* ---- the log ------------------------------------------------------------------------- */

static char last_log[1024];
static int nlogs;

static void log_cb(int level, const char *msg, void *user)
{
	(void)level, (void)user;
	snprintf(last_log, sizeof(last_log), "%s", msg);
	nlogs++;
}

static void capture(void)
{
	kinet_log_set_callback(log_cb, NULL);
}

static void release(void)
{
	kinet_log_set_callback(NULL, NULL);
}

/* ---- a stand-in CUDA module: two allocations of 1 MiB, back to back -------------------- */

#define GPU_BASE 0x7e0000000000ull
#define ALLOC (1ull << 20)

static int fake_kind(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	return a >= GPU_BASE && a < GPU_BASE + 2 * ALLOC ? KINET_MEM_CUDA : KINET_MEM_HOST;
}

static int fake_info(const void *p, struct kinet_cuda_mem *out)
{
	uintptr_t a = (uintptr_t)p;
	if (fake_kind(p) != KINET_MEM_CUDA)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->base = a < GPU_BASE + ALLOC ? GPU_BASE : GPU_BASE + ALLOC;
	out->size = ALLOC;
	return 0;
}

static const struct kinet_cuda_ops fake_cu = {.pointer_kind = fake_kind, .mem_info = fake_info};

static struct kv_dmabuf buf(const char *exp, uint64_t size)
{
	struct kv_dmabuf d = {.size = size};
	snprintf(d.exp_name, sizeof(d.exp_name), "%s", exp);
	return d;
}

/* kv_dmabuf_check's answer, and (refusals) a log line containing `says`. */
static void expect(const struct kv_dmabuf *d, uint64_t off, size_t len, uint64_t iova,
		   const struct kinet_cuda_ops *cu, int want, const char *says)
{
	nlogs = 0;
	last_log[0] = 0;
	int rc = kv_dmabuf_check(d, 5, off, len, iova, cu, "stand-in reason");
	cr_assert_eq(rc, want, "exporter %s, offset %llu len %zu iova 0x%llx: %d, want %d",
		     d->exp_name, (unsigned long long)off, len, (unsigned long long)iova, rc,
		     want);
	if (want) {
		cr_assert_eq(nlogs, 1, "one log line for the refusal, got %d", nlogs);
		cr_assert(strstr(last_log, "ibv_reg_dmabuf_mr") && strstr(last_log, says),
			  "the log line \"%s\" lacks \"%s\"", last_log, says);
	} else {
		cr_assert_eq(nlogs, 0, "a log line for an accepted dma-buf: %s", last_log);
	}
}

/* ---- fdinfo ---------------------------------------------------------------------------- */

Test(verbs_dmabuf, parse_fdinfo)
{
	/* a dma-buf's entry, as the kernel's dma_buf_show_fdinfo writes it */
	const char *gpu = "pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t4711\n"
			  "size:\t2097152\ncount:\t1\nexp_name:\tnvidia\n";
	struct kv_dmabuf d;
	cr_assert_eq(kv_dmabuf_parse(gpu, &d), 0);
	cr_assert_str_eq(d.exp_name, "nvidia");
	cr_assert_eq(d.size, 2097152);
	const char *named = "pos:\t0\nflags:\t02\nsize:\t4096\ncount:\t2\nexp_name:\tudmabuf\n"
			    "name:\tbuf0\n";
	cr_assert_eq(kv_dmabuf_parse(named, &d), 0);
	cr_assert_str_eq(d.exp_name, "udmabuf");
	cr_assert_eq(d.size, 4096);
	/* any other file's entry: no exporter */
	const char *pipe_info = "pos:\t0\nflags:\t02\nmnt_id:\t14\nino:\t99\n";
	cr_assert_eq(kv_dmabuf_parse(pipe_info, &d), -EINVAL);
	cr_assert_eq(kv_dmabuf_parse("", &d), -EINVAL);
	cr_assert_eq(kv_dmabuf_parse(NULL, &d), -EINVAL);
	/* a key that only begins like exp_name is not it */
	cr_assert_eq(kv_dmabuf_parse("exp_name_x:\tnvidia\n", &d), -EINVAL);
}

Test(verbs_dmabuf, probe_files, .init = capture, .fini = release)
{
	struct kv_dmabuf d;
	nlogs = 0;
	cr_assert_eq(kv_dmabuf_probe(-1, &d), -EBADF);
	cr_assert_eq(nlogs, 1);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	nlogs = 0;
	cr_assert_eq(kv_dmabuf_probe(p[0], &d), -EINVAL);
	cr_assert(nlogs == 1 && strstr(last_log, "not a dma-buf"), "log: %s", last_log);
	cr_assert_neq(fcntl(p[0], F_GETFD), -1, "the descriptor was closed");
	close(p[0]);
	close(p[1]);
	nlogs = 0;
	cr_assert_eq(kv_dmabuf_probe(p[0], &d), -EBADF);
	cr_assert_eq(nlogs, 1);
}

/* ---- decisions ------------------------------------------------------------------------- */

Test(verbs_dmabuf, gpu_accepted, .init = capture, .fini = release)
{
	struct kv_dmabuf d = buf("nvidia", 2 * ALLOC);
	expect(&d, 0, ALLOC, GPU_BASE, &fake_cu, 0, "");
	expect(&d, 4096, 8192, GPU_BASE + 4096, &fake_cu, 0, "");
	expect(&d, ALLOC, ALLOC, GPU_BASE + ALLOC, &fake_cu, 0, "");
	expect(&d, 0, 1, GPU_BASE + 2 * ALLOC - 1, &fake_cu, 0, "");
	struct kv_dmabuf upper = buf("NVIDIA", ALLOC);
	expect(&upper, 0, ALLOC, GPU_BASE, &fake_cu, 0, "");
	/* the name NVIDIA's driver 580 gives its dma-bufs (seen on an H100) */
	struct kv_dmabuf nv = buf("nv_dmabuf", ALLOC);
	expect(&nv, 0, ALLOC, GPU_BASE, &fake_cu, 0, "");
	expect(&nv, 0, ALLOC, 4096, &fake_cu, -EINVAL, "CUDA");
	/* without mem_info, both ends must be GPU memory */
	const struct kinet_cuda_ops kind_only = {.pointer_kind = fake_kind};
	expect(&d, 0, ALLOC, GPU_BASE, &kind_only, 0, "");
}

Test(verbs_dmabuf, gpu_without_cuda, .init = capture, .fini = release)
{
	struct kv_dmabuf d = buf("nvidia", 2 * ALLOC);
	expect(&d, 0, ALLOC, GPU_BASE, NULL, -EOPNOTSUPP, "CUDA module");
	cr_assert(strstr(last_log, "stand-in reason"), "the reason is not logged: %s", last_log);
	const struct kinet_cuda_ops none = {0};
	expect(&d, 0, ALLOC, GPU_BASE, &none, -EOPNOTSUPP, "CUDA module");
}

Test(verbs_dmabuf, gpu_iova_not_the_memory, .init = capture, .fini = release)
{
	struct kv_dmabuf d = buf("nvidia", 2 * ALLOC);
	/* iova 0 (as NCCL's GPU-initiated path passes), the offset, host memory */
	expect(&d, 0, ALLOC, 0, &fake_cu, -EINVAL, "CUDA");
	expect(&d, 4096, 4096, 4096, &fake_cu, -EINVAL, "CUDA");
	expect(&d, 0, 4096, (uintptr_t)&d & ~(uintptr_t)4095, &fake_cu, -EINVAL, "CUDA");
	/* running past the GPU memory, or across two allocations */
	expect(&d, 0, 8192, GPU_BASE + 2 * ALLOC - 4096, &fake_cu, -EINVAL, "one allocation");
	expect(&d, 0, 8192, GPU_BASE + ALLOC - 4096, &fake_cu, -EINVAL, "one allocation");
	/* starting below it */
	expect(&d, 0, 8192, GPU_BASE - 4096, &fake_cu, -EINVAL, "CUDA");
	/* wrapping the address space */
	expect(&d, 0, 8192, UINT64_MAX - 4095, &fake_cu, -EINVAL, "wraps");
}

Test(verbs_dmabuf, ranges, .init = capture, .fini = release)
{
	struct kv_dmabuf d = buf("nvidia", ALLOC);
	expect(&d, 0, ALLOC + 1, GPU_BASE, &fake_cu, -EINVAL, "not within");
	expect(&d, ALLOC - 4096, 8192, GPU_BASE, &fake_cu, -EINVAL, "not within");
	expect(&d, ALLOC, 1, GPU_BASE, &fake_cu, -EINVAL, "not within");
	expect(&d, 0, 0, GPU_BASE, &fake_cu, -EINVAL, "empty");
	expect(&d, UINT64_MAX - 4095, 8192, GPU_BASE, &fake_cu, -EINVAL, "not within");
	/* a range check comes before the exporter's: a bad range of any
	 * dma-buf is EINVAL, as the kernel answers it */
	struct kv_dmabuf h = buf("udmabuf", 4096);
	expect(&h, 0, 8192, 0, &fake_cu, -EINVAL, "not within");
}

Test(verbs_dmabuf, other_exporters, .init = capture, .fini = release)
{
	struct kv_dmabuf h = buf("udmabuf", ALLOC);
	expect(&h, 0, ALLOC, GPU_BASE, &fake_cu, -EOPNOTSUPP, "host dma-buf");
	struct kv_dmabuf sys = buf("system", ALLOC);
	expect(&sys, 0, ALLOC, GPU_BASE, &fake_cu, -EOPNOTSUPP, "\"system\"");
	struct kv_dmabuf amd = buf("amdgpu", ALLOC);
	expect(&amd, 0, ALLOC, GPU_BASE, &fake_cu, -EOPNOTSUPP, "\"amdgpu\"");
}

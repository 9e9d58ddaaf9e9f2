/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet_mem_alloc without a GPU: argument checks, GPU kinds refused with
 * -ENODEV and the reason, the host kind's fallback (what it reports, its
 * alignment, a put between two such allocations), and, with a stand-in CUDA
 * module whose "GPU memory" is host memory, what each kind reports and which
 * engine the software NIC names with the GPU engine off and on.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <kinet/device.h>
#include "core/internal.h"
#include "../util/testutil.h"

/* ---- log capture ------------------------------------------------------------------ */

static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_log[8192];

static void log_cb(int level, const char *msg, void *user)
{
	(void)level, (void)user;
	pthread_mutex_lock(&g_log_lock);
	size_t n = strlen(g_log);
	snprintf(g_log + n, sizeof(g_log) - n, "%s\n", msg);
	pthread_mutex_unlock(&g_log_lock);
}

static void log_reset(void)
{
	pthread_mutex_lock(&g_log_lock);
	g_log[0] = 0;
	pthread_mutex_unlock(&g_log_lock);
}

static bool log_has(const char *s)
{
	pthread_mutex_lock(&g_log_lock);
	bool r = strstr(g_log, s) != NULL;
	pthread_mutex_unlock(&g_log_lock);
	return r;
}

static kinet_ctx *open_soft(void)
{
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *ctx = NULL;
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	return ctx;
}

static bool starts(const char *s, const char *prefix)
{
	return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- arguments ---------------------------------------------------------------------- */

Test(memkinds, bad_arguments)
{
	kinet_ctx *ctx = open_soft();
	kinet_mem *m = (kinet_mem *)(uintptr_t)1;
	cr_assert_eq(kinet_mem_alloc(NULL, KINET_ALLOC_HOST_PINNED, 4096, 0, &m), -EINVAL);
	cr_assert_null(m, "out is cleared on failure");
	cr_assert_eq(kinet_mem_alloc(ctx, KINET_ALLOC_HOST_PINNED, 4096, 0, NULL), -EINVAL);
	cr_assert_eq(kinet_mem_alloc(ctx, KINET_ALLOC_HOST_PINNED, 0, 0, &m), -EINVAL);
	int kinds[] = {-1, 3, 1000};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		cr_assert_eq(kinet_mem_alloc(ctx, kinds[i], 4096, 0, &m), -EINVAL, "kind %d",
			     kinds[i]);
	size_t aligns[] = {3, 12, 4097, (size_t)1 << 31, SIZE_MAX};
	for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		/* the GPU kinds check it first too: -EINVAL, never -ENODEV */
		cr_assert_eq(kinet_mem_alloc(ctx, KINET_ALLOC_HOST_PINNED, 4096, aligns[i], &m),
			     -EINVAL, "align %zu", aligns[i]);
		cr_assert_eq(kinet_mem_alloc(ctx, KINET_ALLOC_GPU, 4096, aligns[i], &m), -EINVAL,
			     "align %zu", aligns[i]);
	}
	cr_assert_null(m);
	struct kinet_mem_info info;
	cr_assert_eq(kinet_mem_query(NULL, &info), -EINVAL);
	cr_assert_eq(kinet_mem_free(NULL), -EINVAL);
	cr_assert_eq(kinet_mem_alloc(ctx, KINET_ALLOC_HOST_PINNED, 4096, 0, &m), 0);
	cr_assert_eq(kinet_mem_query(m, NULL), -EINVAL);
	cr_assert_eq(kinet_mem_free(m), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}

/* ---- no GPU --------------------------------------------------------------------------- */

static void gpu_kinds_refused(kinet_ctx *ctx, const char *reason)
{
	int kinds[] = {KINET_ALLOC_GPU, KINET_ALLOC_GPU_HOST_VISIBLE};
	for (int i = 0; i < 2; i++) {
		log_reset();
		kinet_mem *m = (kinet_mem *)(uintptr_t)1;
		cr_assert_eq(kinet_mem_alloc(ctx, kinds[i], 1 << 20, 0, &m), -ENODEV, "kind %d",
			     kinds[i]);
		cr_assert_null(m);
		cr_assert(log_has("needs a usable GPU"), "log: %s", g_log);
		cr_assert(log_has(reason), "log lacks '%s': %s", reason, g_log);
	}
}

Test(memkinds, gpu_kinds_without_gpu)
{
	if (kinet_cuda_load())
		cr_skip("a usable GPU is present (tests/gpu/test_gpu_memkinds covers it)");
	kinet_log_set_callback(log_cb, NULL);
	kinet_ctx *ctx = open_soft();
	/* the module absent, or present and finding no GPU: either is named */
	const char *why = kinet_cuda_absent_why();
	cr_assert(why[0], "no reason for the absent GPU");
	gpu_kinds_refused(ctx, why);
	cr_assert_eq(kinet_close(ctx), 0);
	kinet_log_set_callback(NULL, NULL);
}

static void no_cuda(void)
{
	/* read once, at the first tunable: each test runs in a process of its own */
	setenv("KINET_NO_CUDA", "1", 1);
}

Test(memkinds, gpu_kinds_no_cuda, .init = no_cuda)
{
	cr_assert_eq(kinet_tunable_int("KINET_NO_CUDA"), 1, "the tunables were read before");
	kinet_log_set_callback(log_cb, NULL);
	kinet_ctx *ctx = open_soft();
	gpu_kinds_refused(ctx, "KINET_NO_CUDA=1");
	cr_assert_eq(kinet_close(ctx), 0);
	kinet_log_set_callback(NULL, NULL);
}

/* The host kind without a GPU: page-aligned host memory that says the GPU
 * cannot reach it; aligned as asked; registered and written by a put. */
Test(memkinds, host_fallback, .init = no_cuda)
{
	kinet_log_set_level(KINET_LOG_INFO); /* the fallback is said at info level */
	kinet_log_set_callback(log_cb, NULL);
	struct tu_pair p;
	cr_assert_eq(tu_pair_open(&p, NULL), 0);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t lens[] = {1, 4096, 100000};
	size_t aligns[] = {0, 64, pg, 1u << 16, 1u << 21};
	for (size_t l = 0; l < 3; l++)
		for (size_t a = 0; a < 5; a++) {
			log_reset();
			kinet_mem *m = NULL;
			cr_assert_eq(kinet_mem_alloc(p.ctx, KINET_ALLOC_HOST_PINNED, lens[l],
						     aligns[a], &m),
				     0);
			struct kinet_mem_info i;
			memset(&i, 0xa5, sizeof(i));
			cr_assert_eq(kinet_mem_query(m, &i), 0);
			cr_assert_not_null(i.ptr);
			cr_assert_eq(i.host_ptr, i.ptr);
			cr_assert_null(i.dev_ptr, "the GPU cannot reach it");
			cr_assert_eq(i.gpu, -1);
			cr_assert_eq(i.len, lens[l]);
			cr_assert_eq(i.kind, KINET_ALLOC_HOST_PINNED);
			cr_assert_eq(i.mem_kind, KINET_MEM_HOST);
			cr_assert_geq(i.align, aligns[a] > pg ? aligns[a] : pg);
			cr_assert_eq((uintptr_t)i.ptr % i.align, 0, "%p align %zu", i.ptr, i.align);
			cr_assert_str_eq(i.engine, "CPU engine");
			cr_assert(strstr(i.path, "GPU cannot reach it"), "path: %s", i.path);
			cr_assert(strstr(i.where, "GPU cannot reach it"), "where: %s", i.where);
			cr_assert(strstr(i.where, "not pinned") || strstr(i.where, "neither pinned"),
				  "where: %s", i.where);
			cr_assert(log_has("KINET_NO_CUDA=1"), "log: %s", g_log);
			/* every byte is the caller's */
			tu_fill_random(i.ptr, lens[l], 7 + l * 5 + a);
			cr_assert_eq(kinet_mem_free(m), 0);
		}

	/* two allocations, registered, one written into the other by a put */
	enum { LEN = 65536 };
	kinet_mem *ms, *md;
	struct kinet_mem_info is, id;
	cr_assert_eq(kinet_mem_alloc(p.ctx, KINET_ALLOC_HOST_PINNED, LEN, 0, &ms), 0);
	cr_assert_eq(kinet_mem_alloc(p.ctx, KINET_ALLOC_HOST_PINNED, LEN, 0, &md), 0);
	cr_assert_eq(kinet_mem_query(ms, &is), 0);
	cr_assert_eq(kinet_mem_query(md, &id), 0);
	tu_fill_random(is.ptr, LEN, 11);
	tu_fill_random(id.ptr, LEN, 12);
	kinet_mr *rs, *rd;
	cr_assert_eq(kinet_mr_reg(p.pd, is.ptr, LEN, KINET_ACCESS_LOCAL_WRITE, &rs), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, id.ptr, LEN, KINET_ACCESS_ALL, &rd), 0);
	cr_assert_eq(kinet_mr_kind(rd), id.mem_kind);
	kn_ticket_t t;
	cr_assert_eq(kn_put(p.da, tu_addr(id.ptr), kinet_mr_rkey(rd), is.ptr, kinet_mr_lkey(rs),
			    LEN, &t),
		     0);
	cr_assert_eq(kn_wait(p.da, t), 0);
	cr_assert_eq(memcmp(is.ptr, id.ptr, LEN), 0);
	cr_assert_eq(kinet_mr_dereg(rs), 0);
	cr_assert_eq(kinet_mr_dereg(rd), 0);
	cr_assert_eq(kinet_mem_free(ms), 0);
	cr_assert_eq(kinet_mem_free(md), 0);
	tu_pair_close(&p);
	kinet_log_set_callback(NULL, NULL);
}

/* ---- a stand-in CUDA module ------------------------------------------------------------- */

/* "GPU memory" is host memory; the stand-in remembers its allocations so
 * that a free of anything else is seen. */
#define FK_MAX 16
static struct {
	void *base;
	size_t len;
	int kind;
} g_al[FK_MAX];
static int g_nal, g_freed, g_bad_free;
static int g_fail_rc;

static int fk_mem_alloc(int kind, size_t len, struct kinet_cuda_alloc *out)
{
	if (g_fail_rc)
		return g_fail_rc;
	cr_assert_lt(g_nal, FK_MAX);
	/* the allocators' 256-byte alignment, and no more: the core must align */
	/* (aligned_alloc's size: a multiple of the alignment) */
	char *p = aligned_alloc(4096, (len + 4096 + 256 + 4095) & ~(size_t)4095);
	cr_assert_not_null(p);
	void *base = p + 256;
	g_al[g_nal].base = base;
	g_al[g_nal].len = len;
	g_al[g_nal].kind = kind;
	g_nal++;
	memset(out, 0, sizeof(*out));
	out->base = base;
	out->gpu = 3;
	out->dev_ptr = base;
	out->host_ptr = kind == KINET_ALLOC_GPU ? NULL : base;
	out->cpu_in_place = 0;
	return 0;
}

static int fk_mem_free(int kind, void *base)
{
	for (int i = 0; i < g_nal; i++)
		if (g_al[i].base == base && g_al[i].kind == kind) {
			free((char *)base - 256);
			g_al[i].base = NULL;
			g_freed++;
			return 0;
		}
	g_bad_free++;
	return -EINVAL;
}

static int fk_engine_launch(void *ctl, unsigned warps)
{
	(void)ctl, (void)warps;
	return -ENODEV;
}

static int fk_dev_addr(const void *p, void **out)
{
	*out = (void *)p;
	return 0;
}

static const struct kinet_cuda_ops fk_ops = {
	.mem_alloc = fk_mem_alloc,
	.mem_free = fk_mem_free,
	.engine_launch = fk_engine_launch,
	.dev_addr = fk_dev_addr,
};

/* The tunables are read once, at the first (kinet_cuda_load reads one):
 * set them before. */
static void stand_in_env(const char *geng)
{
	unsetenv("KINET_NO_CUDA");
	if (geng) {
		setenv("KINET_GPU_ENGINE", geng, 1);
		setenv("KINET_ALLOW_HOST_STAGING", "1", 1);
	} else {
		unsetenv("KINET_GPU_ENGINE");
		unsetenv("KINET_ALLOW_HOST_STAGING");
	}
	kinet_cuda_load(); /* the real module (if any) is looked for once, then replaced */
	kinet_cuda = &fk_ops;
	g_nal = g_freed = g_bad_free = 0;
	g_fail_rc = 0;
}

static void stand_in(void)
{
	stand_in_env(NULL);
}

static void stand_in_geng(void)
{
	stand_in_env("on");
	cr_assert_str_eq(kinet_tunable_str("KINET_GPU_ENGINE"), "on");
}

static void stand_in_fini(void)
{
	kinet_cuda = NULL;
}

/* Allocates one of each kind (aligned to align) and checks what is common. */
static void alloc_each(kinet_ctx *ctx, size_t align, kinet_mem *m[3], struct kinet_mem_info i[3])
{
	for (int k = 0; k < 3; k++) {
		size_t len = 1000 + 4096 * (size_t)k;
		cr_assert_eq(kinet_mem_alloc(ctx, k, len, align, &m[k]), 0, "kind %d", k);
		cr_assert_eq(kinet_mem_query(m[k], &i[k]), 0);
		cr_assert_eq(i[k].kind, k);
		cr_assert_eq(i[k].len, len);
		cr_assert_eq(i[k].gpu, 3);
		cr_assert_geq(i[k].align, align ? align : 256);
		cr_assert_eq((uintptr_t)i[k].ptr % i[k].align, 0, "kind %d: %p", k, i[k].ptr);
		cr_assert_eq(i[k].dev_ptr, i[k].ptr);
		cr_assert_eq(i[k].mem_kind, k == KINET_ALLOC_HOST_PINNED ? KINET_MEM_HOST
									 : KINET_MEM_CUDA);
		/* inside what the module allocated */
		cr_assert_geq((char *)i[k].ptr, (char *)g_al[g_nal - 1].base);
		cr_assert_leq((char *)i[k].ptr + len,
			      (char *)g_al[g_nal - 1].base + g_al[g_nal - 1].len);
		memset(i[k].ptr, 0x5a, len);
	}
	cr_assert_null(i[KINET_ALLOC_GPU].host_ptr, "the CPU cannot access GPU memory");
	cr_assert_eq(i[KINET_ALLOC_GPU_HOST_VISIBLE].host_ptr, i[KINET_ALLOC_GPU_HOST_VISIBLE].ptr);
	cr_assert_eq(i[KINET_ALLOC_HOST_PINNED].host_ptr, i[KINET_ALLOC_HOST_PINNED].ptr);
	cr_assert(strstr(i[KINET_ALLOC_GPU_HOST_VISIBLE].where, "managed memory kept on the GPU"),
		  "%s", i[KINET_ALLOC_GPU_HOST_VISIBLE].where);
	cr_assert(strstr(i[KINET_ALLOC_GPU_HOST_VISIBLE].where, "page faults"), "%s",
		  i[KINET_ALLOC_GPU_HOST_VISIBLE].where);
	cr_assert(strstr(i[KINET_ALLOC_HOST_PINNED].where, "mapped into the GPU"), "%s",
		  i[KINET_ALLOC_HOST_PINNED].where);
}

static void free_each(kinet_mem *m[3])
{
	int before = g_freed;
	for (int k = 0; k < 3; k++)
		cr_assert_eq(kinet_mem_free(m[k]), 0);
	cr_assert_eq(g_freed - before, 3);
	cr_assert_eq(g_bad_free, 0, "a free of what the module did not allocate");
}

Test(memkinds_module, cpu_engine, .init = stand_in, .fini = stand_in_fini)
{
	kinet_ctx *ctx = open_soft();
	size_t aligns[] = {0, 256, 4096, 1u << 16};
	for (size_t a = 0; a < 4; a++) {
		kinet_mem *m[3];
		struct kinet_mem_info i[3];
		alloc_each(ctx, aligns[a], m, i);
		for (int k = 0; k < 3; k++)
			cr_assert_str_eq(i[k].engine, "CPU engine", "kind %d", k);
		cr_assert(starts(i[KINET_ALLOC_GPU].path, "CPU engine: CUDA copies (staged)"), "%s",
			  i[KINET_ALLOC_GPU].path);
		cr_assert(strstr(i[KINET_ALLOC_GPU].path, "KINET_ALLOW_HOST_STAGING=1"), "%s",
			  i[KINET_ALLOC_GPU].path);
		cr_assert(starts(i[KINET_ALLOC_GPU_HOST_VISIBLE].path,
				 "CPU engine: CUDA copies (staged)"),
			  "%s", i[KINET_ALLOC_GPU_HOST_VISIBLE].path);
		cr_assert_str_eq(i[KINET_ALLOC_HOST_PINNED].path, "CPU engine: direct");
		free_each(m);
	}
	cr_assert_eq(kinet_close(ctx), 0);
}

Test(memkinds_module, gpu_engine, .init = stand_in_geng, .fini = stand_in_fini)
{
	kinet_ctx *ctx = open_soft();
	kinet_mem *m[3];
	struct kinet_mem_info i[3];
	alloc_each(ctx, 0, m, i);
	for (int k = 0; k < 3; k++) {
		cr_assert_str_eq(i[k].engine, "GPU engine", "kind %d: %s", k, i[k].path);
		cr_assert(starts(i[k].path, "GPU engine: SM loads/stores"), "kind %d: %s", k,
			  i[k].path);
	}
	cr_assert_null(strstr(i[KINET_ALLOC_GPU].path, "KINET_ALLOW_HOST_STAGING"), "%s",
		       i[KINET_ALLOC_GPU].path);
	free_each(m);
	cr_assert_eq(kinet_close(ctx), 0);
}

/* What the module refuses is returned as it is, nothing allocated. */
Test(memkinds_module, module_fails, .init = stand_in, .fini = stand_in_fini)
{
	kinet_ctx *ctx = open_soft();
	int rcs[] = {-ENOMEM, -EIO, -EOPNOTSUPP};
	for (int r = 0; r < 3; r++) {
		g_fail_rc = rcs[r];
		kinet_mem *m = (kinet_mem *)(uintptr_t)1;
		cr_assert_eq(kinet_mem_alloc(ctx, KINET_ALLOC_GPU_HOST_VISIBLE, 4096, 0, &m), rcs[r]);
		cr_assert_null(m);
	}
	cr_assert_eq(g_nal, 0);
	cr_assert_eq(kinet_close(ctx), 0);
}

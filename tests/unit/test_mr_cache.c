/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache (kinet_mr_cache_*) on host memory: hits and
 * misses by range and access, LRU eviction within the entry and byte
 * limits, held regions never evicted nor deregistered, and invalidation
 * when the memory goes away or is reused (munmap, mremap, madvise
 * DONTNEED, free + malloc at the same address) through the kernel memory
 * monitor; memory the monitor cannot watch is never cached; a cached
 * region whose pages were never touched works for the NIC (the monitor
 * answers the first touches). GPU memory: tests/gpu/test_gpu_mr_cache.cu.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "../util/testutil.h"

struct env {
	struct tu_pair p;
	kinet_mr_cache *c;
};

static void env_open(struct env *e, size_t max_entries, size_t max_bytes)
{
	cr_assert_eq(tu_pair_open(&e->p, NULL), 0);
	struct kinet_mr_cache_attr a = {.max_entries = max_entries, .max_bytes = max_bytes};
	cr_assert_eq(kinet_mr_cache_create(e->p.pd, &a, &e->c), 0);
}

static void env_close(struct env *e)
{
	cr_assert_eq(kinet_mr_cache_destroy(e->c), 0);
	tu_pair_close(&e->p);
}

static struct kinet_mr_cache_stats stats(struct env *e)
{
	struct kinet_mr_cache_stats s;
	cr_assert_eq(kinet_mr_cache_stats(e->c, &s), 0);
	return s;
}

static void need_monitor(struct env *e)
{
	if (!stats(e).monitor)
		cr_skip_test("no userfaultfd here: host memory is not cached");
}

static uint8_t *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	return p;
}

Test(mr_cache, hits_misses_and_access)
{
	struct env e;
	env_open(&e, 0, 0);
	need_monitor(&e);
	uint8_t *b = map(1 << 20);
	kinet_mr *m1, *m2, *m3;
	cr_assert_eq(kinet_mr_cache_get(e.c, b + 100, 5000, KINET_ACCESS_LOCAL_WRITE, &m1), 0);
	cr_assert_leq(kinet_mr_addr(m1), (void *)(b + 100));
	cr_assert_eq(kinet_mr_cache_put(e.c, m1), 0);
	/* a sub-range of the same pages: the same region */
	cr_assert_eq(kinet_mr_cache_get(e.c, b + 200, 3000, KINET_ACCESS_LOCAL_WRITE, &m2), 0);
	cr_assert_eq(m2, m1);
	/* more access: another registration (held ones are never shared out wrongly) */
	cr_assert_eq(kinet_mr_cache_get(e.c, b + 200, 3000, KINET_ACCESS_ALL, &m3), 0);
	cr_assert_neq(m3, m1);
	cr_assert_eq(kinet_mr_kind(m3), KINET_MEM_HOST);
	struct kinet_mr_cache_stats s = stats(&e);
	cr_assert_eq(s.hits, 1);
	cr_assert_eq(s.misses, 2);
	cr_assert_eq(s.entries, 2);
	cr_assert_eq(s.held, 2);
	cr_assert_geq(s.reg_hist[KINET_MR_CACHE_HOST][0] + s.reg_hist[KINET_MR_CACHE_HOST][1] +
			      s.reg_hist[KINET_MR_CACHE_HOST][15],
		      0);
	uint64_t n = 0;
	for (int i = 0; i < KINET_MR_CACHE_HIST; i++)
		n += s.reg_hist[KINET_MR_CACHE_HOST][i];
	cr_assert_eq(n, 2, "every registration is in the histogram");
	/* a held region is not deregistered behind the cache's back */
	cr_assert_eq(kinet_mr_dereg(m3), -EBUSY);
	cr_assert_eq(kinet_mr_cache_destroy(e.c), -EBUSY);
	cr_assert_eq(kinet_mr_cache_put(e.c, m2), 0);
	cr_assert_eq(kinet_mr_cache_put(e.c, m3), 0);
	cr_assert_eq(kinet_mr_cache_put(e.c, m3), -EINVAL); /* not held any more */
	cr_assert_eq(stats(&e).held, 0);
	cr_assert_eq(kinet_mr_cache_flush(e.c), 2);
	cr_assert_eq(stats(&e).entries, 0);
	munmap(b, 1 << 20);
	env_close(&e);
}

Test(mr_cache, lru_eviction_within_limits_never_a_held_region)
{
	struct env e;
	env_open(&e, 2, 0);
	need_monitor(&e);
	uint8_t *b = map(16 * 4096);
	kinet_mr *m[4];
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(kinet_mr_cache_get(e.c, b + i * 4096, 4096, 0, &m[i]), 0);
		cr_assert_eq(kinet_mr_cache_put(e.c, m[i]), 0);
	}
	struct kinet_mr_cache_stats s = stats(&e);
	cr_assert_eq(s.entries, 2);
	cr_assert_eq(s.evictions, 1);
	/* the least recently used (page 0) went: getting it again misses */
	kinet_mr *x;
	cr_assert_eq(kinet_mr_cache_get(e.c, b + 2 * 4096, 4096, 0, &x), 0); /* hit */
	cr_assert_eq(stats(&e).hits, 1);
	cr_assert_eq(kinet_mr_cache_get(e.c, b + 1 * 4096, 4096, 0, &m[3]), 0); /* hit */
	/* both held: a third range does not fit and nothing may be evicted */
	kinet_mr *y = NULL;
	cr_assert_eq(kinet_mr_cache_get(e.c, b + 5 * 4096, 4096, 0, &y), -ENOSPC);
	cr_assert_null(y);
	cr_assert_eq(stats(&e).refused, 1);
	cr_assert_eq(kinet_mr_cache_put(e.c, x), 0);
	cr_assert_eq(kinet_mr_cache_get(e.c, b + 5 * 4096, 4096, 0, &y), 0); /* x evicted */
	s = stats(&e);
	cr_assert_eq(s.evictions, 2);
	cr_assert_eq(kinet_mr_state(m[3]), KINET_MR_REGISTERED); /* the held one stayed */
	cr_assert_eq(kinet_mr_cache_put(e.c, y), 0);
	cr_assert_eq(kinet_mr_cache_put(e.c, m[3]), 0);
	/* the byte limit */
	kinet_mr_cache *cb;
	struct kinet_mr_cache_attr a = {.max_bytes = 3 * 4096};
	cr_assert_eq(kinet_mr_cache_create(e.p.pd, &a, &cb), 0);
	kinet_mr *z;
	cr_assert_eq(kinet_mr_cache_get(cb, b, 2 * 4096, 0, &z), 0);
	cr_assert_eq(kinet_mr_cache_put(cb, z), 0);
	cr_assert_eq(kinet_mr_cache_get(cb, b + 8 * 4096, 2 * 4096, 0, &z), 0);
	struct kinet_mr_cache_stats sb;
	cr_assert_eq(kinet_mr_cache_stats(cb, &sb), 0);
	cr_assert_eq(sb.evictions, 1);
	cr_assert_eq(sb.bytes, 2 * 4096);
	cr_assert_eq(kinet_mr_cache_put(cb, z), 0);
	cr_assert_eq(kinet_mr_cache_destroy(cb), 0);
	munmap(b, 16 * 4096);
	env_close(&e);
}

/* The range is cached and given back; `gone` makes its memory go away or be
 * replaced; the next get must be a new registration. */
static void invalidated_by(void (*gone)(uint8_t **b, size_t len))
{
	struct env e;
	env_open(&e, 0, 0);
	need_monitor(&e);
	size_t len = 8 * 4096;
	uint8_t *b = map(len);
	memset(b, 1, len);
	kinet_mr *m1, *m2;
	cr_assert_eq(kinet_mr_cache_get(e.c, b, len, KINET_ACCESS_ALL, &m1), 0);
	uint32_t k1 = kinet_mr_rkey(m1);
	cr_assert_eq(kinet_mr_cache_put(e.c, m1), 0);
	gone(&b, len);
	cr_assert_eq(kinet_mr_cache_get(e.c, b, len, KINET_ACCESS_ALL, &m2), 0);
	struct kinet_mr_cache_stats s = stats(&e);
	cr_assert_geq(s.invalidations, 1);
	cr_assert_eq(s.hits, 0, "a region of memory that went away was served again");
	cr_assert_eq(s.misses, 2);
	cr_assert_eq(s.entries, 1, "the invalidated entry was not deregistered");
	cr_assert_neq(kinet_mr_rkey(m2), k1);
	/* and it works: the NIC writes into it */
	struct tu_region src;
	cr_assert_eq(tu_region_alloc(&src, e.p.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 7), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(e.p.da, tu_addr(b + 4096), kinet_mr_rkey(m2), src.buf, tu_lkey(&src),
			    4096, &t),
		     0);
	cr_assert_eq(kn_wait(e.p.da, t), 0);
	cr_assert_eq(memcmp(b + 4096, src.buf, 4096), 0);
	tu_region_free(&src);
	cr_assert_eq(kinet_mr_cache_put(e.c, m2), 0);
	munmap(b, len);
	env_close(&e);
}

/* New memory at old, which was just unmapped. Never MAP_FIXED: another
 * thread (an engine's allocator, a sanitizer) may have mapped something
 * there meanwhile, and it must not be clobbered. */
static uint8_t *remap_at(uint8_t *old, size_t len)
{
	void *p = mmap(old, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED) /* taken meanwhile (a sanitizer's allocations): elsewhere */
		p = map(len);
	return p;
}

static void by_munmap(uint8_t **b, size_t len)
{
	uint8_t *old = *b;
	cr_assert_eq(munmap(old, len), 0);
	*b = remap_at(old, len); /* the same address (almost always), other memory */
}

static void by_mremap(uint8_t **b, size_t len)
{
	/* the memory moves elsewhere (the next get names its new address) */
	uint8_t *old = *b;
	void *hole = mmap(NULL, 2 * len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(hole, MAP_FAILED);
	void *n = mremap(old, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
	cr_assert_eq(n, hole);
	munmap((uint8_t *)hole + len, len);
	*b = n;
}

static void by_dontneed(uint8_t **b, size_t len)
{
	cr_assert_eq(madvise(*b, len, MADV_DONTNEED), 0);
}

Test(mr_cache, invalidated_by_munmap) { invalidated_by(by_munmap); }
Test(mr_cache, invalidated_by_mremap) { invalidated_by(by_mremap); }
Test(mr_cache, invalidated_by_madvise_dontneed) { invalidated_by(by_dontneed); }

/* free + malloc of a large block (returned to the kernel by free) at the
 * same address is new memory: a new registration. (A block that free keeps
 * mapped stays the same memory: its registration stays valid.) */
Test(mr_cache, free_then_malloc_at_the_same_address)
{
	struct env e;
	env_open(&e, 0, 0);
	need_monitor(&e);
	/* a fixed threshold: every block this large is mapped by malloc and
	 * unmapped by free (glibc raises a dynamic one after the first free) */
	if (mallopt(M_MMAP_THRESHOLD, 1 << 20) != 1)
		cr_skip_test("this malloc has no M_MMAP_THRESHOLD (a sanitizer's allocator)");
	size_t len = 4 << 20;
	int same = 0;
	for (int round = 0; round < 4 && !same; round++) {
		uint8_t *a = malloc(len);
		cr_assert_not_null(a);
		memset(a, 3, 4096);
		kinet_mr *m1, *m2;
		cr_assert_eq(kinet_mr_cache_get(e.c, a, len, KINET_ACCESS_ALL, &m1), 0);
		cr_assert_eq(kinet_mr_cache_put(e.c, m1), 0);
		uint64_t inv = stats(&e).invalidations;
		free(a);
		uint8_t *b = malloc(len);
		cr_assert_not_null(b);
		same = b == a;
		uint64_t hits = stats(&e).hits;
		cr_assert_eq(kinet_mr_cache_get(e.c, b, len, KINET_ACCESS_ALL, &m2), 0);
		cr_assert_gt(stats(&e).invalidations, inv, "the free was not seen");
		cr_assert_eq(stats(&e).hits, hits, "a freed block's region was served again");
		cr_assert_eq(kinet_mr_cache_put(e.c, m2), 0);
		free(b);
	}
	cr_assert(same, "malloc never returned the freed address: the case was not exercised");
	env_close(&e);
}

/* Memory goes away while a region of it is held: the region is marked, not
 * handed out again, and deregistered at its last put. */
Test(mr_cache, invalidated_while_held)
{
	struct env e;
	env_open(&e, 0, 0);
	need_monitor(&e);
	uint8_t *b = map(4 * 4096);
	kinet_mr *m;
	cr_assert_eq(kinet_mr_cache_get(e.c, b, 4096, 0, &m), 0);
	by_munmap(&b, 4 * 4096);
	kinet_mr *m2;
	cr_assert_eq(kinet_mr_cache_get(e.c, b, 4096, 0, &m2), 0);
	cr_assert_neq(m2, m);
	cr_assert_eq(kinet_mr_state(m), KINET_MR_INVALID);
	cr_assert_eq(stats(&e).entries, 2);
	cr_assert_eq(kinet_mr_cache_put(e.c, m), 0);
	cr_assert_eq(stats(&e).entries, 1); /* gone at its last put */
	cr_assert_eq(kinet_mr_cache_put(e.c, m2), 0);
	munmap(b, 4 * 4096);
	env_close(&e);
}

/* Pages never touched before the NIC writes them: the monitor answers their
 * first touch (a zero page, as the kernel would) and the data lands. */
Test(mr_cache, untouched_pages_written_by_the_nic)
{
	struct env e;
	env_open(&e, 0, 0);
	need_monitor(&e);
	size_t len = 64 * 4096;
	uint8_t *b = map(len);
	kinet_mr *m;
	cr_assert_eq(kinet_mr_cache_get(e.c, b, len, KINET_ACCESS_ALL, &m), 0);
	struct tu_region src;
	cr_assert_eq(tu_region_alloc(&src, e.p.pd, len, KINET_ACCESS_LOCAL_WRITE, 9), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(e.p.da, tu_addr(b), kinet_mr_rkey(m), src.buf, tu_lkey(&src),
			    (uint32_t)len, &t),
		     0);
	cr_assert_eq(kn_wait(e.p.da, t), 0);
	cr_assert_eq(memcmp(b, src.buf, len), 0);
	/* and the application's own first touch of another watched page */
	uint8_t *c = map(4 * 4096);
	kinet_mr *mc;
	cr_assert_eq(kinet_mr_cache_get(e.c, c, 4 * 4096, 0, &mc), 0);
	c[3 * 4096 + 5] = 42;
	cr_assert_eq(c[3 * 4096 + 5], 42);
	cr_assert_eq(c[0], 0);
	cr_assert_eq(kinet_mr_cache_put(e.c, mc), 0);
	tu_region_free(&src);
	cr_assert_eq(kinet_mr_cache_put(e.c, m), 0);
	munmap(b, len);
	munmap(c, 4 * 4096);
	env_close(&e);
}

/* A file mapping cannot be watched: registered per get, deregistered at
 * its put, never served from the cache. */
Test(mr_cache, unwatchable_memory_is_not_cached)
{
	struct env e;
	env_open(&e, 0, 0);
	need_monitor(&e);
	char path[] = "/tmp/kinet-cache-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	cr_assert_eq(ftruncate(fd, 8192), 0);
	uint8_t *f = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(f, MAP_FAILED);
	kinet_mr *m1, *m2;
	cr_assert_eq(kinet_mr_cache_get(e.c, f, 8192, 0, &m1), 0);
	cr_assert_eq(kinet_mr_cache_put(e.c, m1), 0);
	cr_assert_eq(kinet_mr_cache_get(e.c, f, 8192, 0, &m2), 0);
	struct kinet_mr_cache_stats s = stats(&e);
	cr_assert_eq(s.hits, 0);
	cr_assert_eq(s.uncached, 2);
	cr_assert_eq(kinet_mr_cache_put(e.c, m2), 0);
	cr_assert_eq(stats(&e).entries, 0);
	munmap(f, 8192);
	close(fd);
	env_close(&e);
}

Test(mr_cache, bad_arguments)
{
	struct env e;
	env_open(&e, 0, 0);
	kinet_mr *m;
	uint8_t x[64];
	cr_assert_eq(kinet_mr_cache_get(NULL, x, 64, 0, &m), -EINVAL);
	cr_assert_eq(kinet_mr_cache_get(e.c, NULL, 64, 0, &m), -EINVAL);
	cr_assert_eq(kinet_mr_cache_get(e.c, x, 0, 0, &m), -EINVAL);
	cr_assert_eq(kinet_mr_cache_get(e.c, x, 64, 0x100, &m), -EINVAL);
	cr_assert_eq(kinet_mr_cache_put(e.c, NULL), -EINVAL);
	struct tu_region r;
	cr_assert_eq(tu_region_alloc(&r, e.p.pd, 64, 0, 1), 0);
	cr_assert_eq(kinet_mr_cache_put(e.c, r.mr), -EINVAL); /* not a cached region */
	tu_region_free(&r);
	cr_assert_eq(kinet_mr_cache_create(NULL, NULL, &e.c), -EINVAL);
	env_close(&e);
}

/* A key from the cache whose memory was unmapped since (given back, or still
 * held) fails like a revoked one at once, before any later get applies the
 * monitor's events: never a fault, never a write into what the address
 * holds now. */
static void unmapped_key(int held)
{
	struct env e;
	env_open(&e, 0, 0);
	need_monitor(&e);
	size_t len = 4 * 4096;
	uint8_t *b = map(len);
	kinet_mr *m;
	cr_assert_eq(kinet_mr_cache_get(e.c, b, len, KINET_ACCESS_ALL, &m), 0);
	uint32_t rkey = kinet_mr_rkey(m);
	if (!held)
		cr_assert_eq(kinet_mr_cache_put(e.c, m), 0); /* cached, key still live */
	cr_assert_eq(munmap(b, len), 0);
	/* whatever is there now (a new mapping, most often at the same place) */
	uint8_t *now = mmap(b, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	struct tu_region src;
	cr_assert_eq(tu_region_alloc(&src, e.p.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 31), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(e.p.da, tu_addr(b + 4096), rkey, src.buf, tu_lkey(&src), 4096, &t), 0);
	cr_assert_eq(kn_wait(e.p.da, t), -EIO);
	uint32_t vendor = 0;
	cr_assert_eq(kn_qp_error(e.p.da, &vendor), KN_SYND_REMOTE_ACCESS_ERR);
	cr_assert_eq(vendor, KINET_REASON_REVOKED, "reason %u", vendor);
	if (now != MAP_FAILED) {
		for (size_t i = 0; i < len; i++)
			cr_assert_eq(now[i], 0, "the new mapping was written at %zu", i);
		munmap(now, len);
	}
	tu_region_free(&src);
	if (held)
		cr_assert_eq(kinet_mr_cache_put(e.c, m), 0);
	env_close(&e);
}

Test(mr_cache, unmapped_after_put_fails_as_revoked) { unmapped_key(0); }
Test(mr_cache, unmapped_while_held_fails_as_revoked) { unmapped_key(1); }

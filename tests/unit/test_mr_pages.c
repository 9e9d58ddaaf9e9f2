/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration checks every page of host memory, as a NIC does (rdma-core's
 * ibv_reg_mr fails with EFAULT): a range with an unmapped page or a
 * PROT_NONE page, or a read-only page registered with write access, is
 * refused with -EFAULT and a log line naming the first bad page, through
 * kinet_mr_reg and kinet_mr_cache_get alike (the cache registers through
 * kinet_mr_reg and keeps nothing of a refusal). Ordinary and read-only
 * mappings registered for what they allow are accepted, and a put into an
 * accepted region lands.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "../util/testutil.h"

static size_t pg;
static struct tu_pair P;
static kinet_mr_cache *C;

/* the last error line kinet logged */
static char last_err[512];
static void log_fn(int level, const char *msg, void *user)
{
	(void)user;
	if (level == KINET_LOG_ERROR)
		snprintf(last_err, sizeof(last_err), "%s", msg);
}

static void setup(void)
{
	pg = (size_t)sysconf(_SC_PAGESIZE);
	kinet_log_set_callback(log_fn, NULL);
	cr_assert_eq(tu_pair_open(&P, NULL), 0);
	struct kinet_mr_cache_attr a = {0};
	cr_assert_eq(kinet_mr_cache_create(P.pd, &a, &C), 0);
}

static void teardown(void)
{
	cr_assert_eq(kinet_mr_cache_destroy(C), 0);
	tu_pair_close(&P);
	kinet_log_set_callback(NULL, NULL);
}

TestSuite(mr_pages, .init = setup, .fini = teardown);

/* Three pages, read-write; the middle one then changed by how (0: left,
 * 1: unmapped, 2: PROT_NONE, 3: read-only). */
static uint8_t *three_pages(int how)
{
	uint8_t *p = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(p, 0x5a, 3 * pg);
	if (how == 1)
		cr_assert_eq(munmap(p + pg, pg), 0);
	else if (how == 2)
		cr_assert_eq(mprotect(p + pg, pg, PROT_NONE), 0);
	else if (how == 3)
		cr_assert_eq(mprotect(p + pg, pg, PROT_READ), 0);
	return p;
}

static void three_free(uint8_t *p)
{
	munmap(p, 3 * pg);
}

/* Both paths refuse [p, p + len) with access: -EFAULT, the log names the
 * page at bad. */
static void refused(uint8_t *p, size_t len, unsigned access, const uint8_t *bad)
{
	char want[64];
	snprintf(want, sizeof(want), "%p", (const void *)bad);
	kinet_mr *mr = (kinet_mr *)0x1;
	last_err[0] = 0;
	cr_expect_eq(kinet_mr_reg(P.pd, p, len, access, &mr), -EFAULT, "kinet_mr_reg %p+%zu", p,
		     len);
	cr_expect_null(mr);
	cr_expect(strstr(last_err, want), "kinet_mr_reg's log names page %s: \"%s\"", want,
		  last_err);
	if (mr && mr != (kinet_mr *)0x1)
		kinet_mr_dereg(mr);
	mr = NULL;
	last_err[0] = 0;
	cr_expect_eq(kinet_mr_cache_get(C, p, len, access, &mr), -EFAULT,
		     "kinet_mr_cache_get %p+%zu", p, len);
	cr_expect(strstr(last_err, want), "kinet_mr_cache_get's log names page %s: \"%s\"", want,
		  last_err);
	if (mr)
		kinet_mr_cache_put(C, mr);
}

static void accepted(uint8_t *p, size_t len, unsigned access)
{
	kinet_mr *mr = NULL;
	cr_assert_eq(kinet_mr_reg(P.pd, p, len, access, &mr), 0);
	cr_assert_eq(kinet_mr_dereg(mr), 0);
	mr = NULL;
	cr_assert_eq(kinet_mr_cache_get(C, p, len, access, &mr), 0);
	cr_assert_eq(kinet_mr_cache_put(C, mr), 0);
}

Test(mr_pages, unmapped_hole_refused)
{
	uint8_t *p = three_pages(1);
	refused(p, 3 * pg, KINET_ACCESS_ALL, p + pg);
	refused(p, 3 * pg, 0, p + pg);
	refused(p + pg - 8, 16, KINET_ACCESS_LOCAL_WRITE, p + pg); /* 8 bytes into the hole */
	refused(p + pg, 1, 0, p + pg);
	/* the pages around it are fine on their own */
	accepted(p, pg, KINET_ACCESS_ALL);
	accepted(p + 2 * pg, pg, KINET_ACCESS_ALL);
	three_free(p);
}

Test(mr_pages, prot_none_page_refused)
{
	uint8_t *p = three_pages(2);
	refused(p, 3 * pg, KINET_ACCESS_ALL, p + pg);
	refused(p, 3 * pg, KINET_ACCESS_REMOTE_READ, p + pg);
	refused(p + 2 * pg - 1, 2, 0, p + pg);
	accepted(p, pg, KINET_ACCESS_ALL);
	three_free(p);
}

Test(mr_pages, read_only_page_refused_for_writes_only)
{
	uint8_t *p = three_pages(3);
	refused(p, 3 * pg, KINET_ACCESS_LOCAL_WRITE, p + pg);
	refused(p, 3 * pg, KINET_ACCESS_ALL, p + pg);
	refused(p + pg, pg, KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_WRITE, p + pg);
	/* reading it is what it allows */
	accepted(p, 3 * pg, 0);
	accepted(p, 3 * pg, KINET_ACCESS_REMOTE_READ);
	three_free(p);
}

Test(mr_pages, ordinary_memory_accepted_and_usable)
{
	uint8_t *p = three_pages(0);
	accepted(p, 3 * pg, KINET_ACCESS_ALL);
	accepted(p + 100, 2 * pg, KINET_ACCESS_ALL); /* unaligned, across pages */
	/* heap and stack memory too */
	uint8_t *h = malloc(100000);
	accepted(h, 100000, KINET_ACCESS_ALL);
	uint8_t s[256];
	accepted(s, sizeof(s), KINET_ACCESS_ALL);
	free(h);
	/* a put into a region of the three pages lands */
	kinet_mr *dst = NULL, *src = NULL;
	uint8_t *q = three_pages(0);
	memset(q, 0x33, 3 * pg);
	cr_assert_eq(kinet_mr_reg(P.pd, p, 3 * pg, KINET_ACCESS_ALL, &dst), 0);
	cr_assert_eq(kinet_mr_cache_get(C, q, 3 * pg, KINET_ACCESS_LOCAL_WRITE, &src), 0);
	kn_ticket_t t = 0;
	cr_assert_eq(kn_put(P.da, tu_addr(p + pg - 64), kinet_mr_rkey(dst), q + 7,
			    kinet_mr_lkey(src), (uint32_t)pg, &t),
		     0);
	cr_assert_eq(kn_wait(P.da, t), 0);
	for (size_t i = 0; i < pg; i++)
		cr_assert_eq(p[pg - 64 + i], 0x33, "byte %zu", i);
	cr_assert_eq(p[pg - 65], 0x5a);
	cr_assert_eq(kinet_mr_cache_put(C, src), 0);
	cr_assert_eq(kinet_mr_dereg(dst), 0);
	three_free(q);
	three_free(p);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* First end-to-end path: put and get on random data through the soft NIC. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

Test(smoke, put_get_roundtrip)
{
	struct tu_pair p;
	cr_assert_eq(tu_pair_open(&p, NULL), 0);
	size_t n = 65536;
	uint8_t *src = malloc(n), *dst = malloc(n), *back = malloc(n);
	tu_fill_random(src, n, 1);
	tu_fill_random(dst, n, 2);
	memset(back, 0, n);
	kinet_mr *ms, *md, *mb;
	cr_assert_eq(kinet_mr_reg(p.pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, dst, n, KINET_ACCESS_ALL, &md), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, back, n, KINET_ACCESS_LOCAL_WRITE, &mb), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
			    kinet_mr_lkey(ms), (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(p.da, t), 0);
	cr_assert_eq(memcmp(src, dst, n), 0);
	cr_assert_eq(kn_get(p.da, back, kinet_mr_lkey(mb), (uint64_t)(uintptr_t)dst,
			    kinet_mr_rkey(md), (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(p.da, t), 0);
	cr_assert_eq(memcmp(src, back, n), 0);
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	kinet_mr_dereg(mb);
	tu_pair_close(&p);
	free(src);
	free(dst);
	free(back);
}

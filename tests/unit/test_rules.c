/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The software NIC's rules (src/nic/soft/rules.h), the code both engines run
 * (the CPU engine compiled here, the GPU engine by nvcc): the order of the
 * region checks, the key view, the WQE decoder on well-formed and malformed
 * WQEs built with kinet's own builders, and the doorbell words.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <kinet/device.h>
#include "nic/soft/rules.h"
#include "../util/testutil.h"

Test(rules, region_checks_in_order)
{
	/* every check fails: the first in the NIC's order is reported */
	cr_assert_eq(kn_rule_region(0, 0, 1, 0, 0, 0, 5, 5, 2), KINET_REASON_UNKNOWN_KEY);
	cr_assert_eq(kn_rule_region(1, 0, 1, 0, 0, 0, 5, 5, 2), KINET_REASON_WRONG_PD);
	cr_assert_eq(kn_rule_region(1, 1, 1, 0, 0, 0, 5, 5, 2), KINET_REASON_REVOKED);
	cr_assert_eq(kn_rule_region(1, 1, 0, 1, 0, 0, 5, 5, 2), KINET_REASON_ACCESS);
	cr_assert_eq(kn_rule_region(1, 1, 0, 3, 100, 50, 90, 5, 2), KINET_REASON_OUT_OF_BOUNDS);
	/* bounds: both ends, the exact fit, and a length that wraps */
	cr_assert_eq(kn_rule_region(1, 1, 0, 3, 100, 50, 100, 50, 2), 0);
	cr_assert_eq(kn_rule_region(1, 1, 0, 3, 100, 50, 149, 1, 2), 0);
	cr_assert_eq(kn_rule_region(1, 1, 0, 3, 100, 50, 149, 2, 2), KINET_REASON_OUT_OF_BOUNDS);
	cr_assert_eq(kn_rule_region(1, 1, 0, 3, 100, 50, 120, ~0ull - 10, 2),
		     KINET_REASON_OUT_OF_BOUNDS);
	cr_assert_eq(kn_rule_region(1, 1, 0, 3, 100, 50, ~0ull - 3, 8, 2),
		     KINET_REASON_OUT_OF_BOUNDS);
}

Test(rules, key_view)
{
	struct kn_keyent v[4];
	memset(v, 0, sizeof(v));
	v[2] = (struct kn_keyent){.base = 0x10000, .len = 4096, .gbase = 0x7f0000000000ull,
				  .pd = 9, .key = (2u << 8) | 0x33, .access = 3};
	uint64_t g = 0;
	cr_assert_eq(kn_rule_keyview(v, 4, 9, (2u << 8) | 0x33, 0x10010, 16, 2, &g), 0);
	cr_assert_eq(g, 0x7f0000000010ull);
	/* another tag of the same slot, a slot past the view, slot 0 */
	cr_assert_eq(kn_rule_keyview(v, 4, 9, (2u << 8) | 0x34, 0x10010, 16, 2, &g),
		     KINET_REASON_UNKNOWN_KEY);
	cr_assert_eq(kn_rule_keyview(v, 4, 9, (9u << 8) | 0x33, 0x10010, 16, 2, &g),
		     KINET_REASON_UNKNOWN_KEY);
	cr_assert_eq(kn_rule_keyview(v, 4, 9, 0x33, 0x10010, 16, 2, &g), KINET_REASON_UNKNOWN_KEY);
	cr_assert_eq(kn_rule_keyview(v, 4, 8, (2u << 8) | 0x33, 0x10010, 16, 2, &g),
		     KINET_REASON_WRONG_PD);
	cr_assert_eq(kn_rule_keyview(v, 4, 0, (2u << 8) | 0x33, 0x10010, 16, 4, &g),
		     KINET_REASON_ACCESS);
	v[2].revoked = 1;
	cr_assert_eq(kn_rule_keyview(v, 4, 9, (2u << 8) | 0x33, 0x10010, 16, 2, &g),
		     KINET_REASON_REVOKED);
	/* memory the GPU cannot reach: allowed, address 0 */
	v[2].revoked = 0;
	v[2].gbase = 0;
	g = 1;
	cr_assert_eq(kn_rule_keyview(v, 4, 9, (2u << 8) | 0x33, 0x10010, 16, 2, &g), 0);
	cr_assert_eq(g, 0u);
}

/* A WQE of nseg data segments (random keys, addresses, lengths) at index pi. */
static void build_write(uint8_t *w, uint16_t pi, uint32_t qpn, uint32_t nseg, uint64_t seed,
			uint8_t opcode)
{
	memset(w, 0, KN_MAX_WQE_BBS * KN_SEND_WQE_BB);
	uint32_t ds = 2 + nseg;
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, pi, opcode, 0, qpn, KN_WQE_CTRL_CQ_UPDATE,
			(uint8_t)ds, 0, 0);
	uint64_t s = seed;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), 0x1234567890ull + seed, 0xabcd00 | 7);
	for (uint32_t i = 0; i < nseg; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32 + 16 * i), 1 + (uint32_t)(s >> 40) % 5000,
				(uint32_t)(s >> 8), s ^ 0x5555);
	}
}

Test(rules, decode_write)
{
	static uint8_t w[KN_MAX_WQE_BBS * KN_SEND_WQE_BB];
	for (uint32_t nseg = 1; nseg <= 40; nseg += 13) {
		build_write(w, 77, 0x123, nseg, nseg, KN_OPCODE_RDMA_WRITE);
		struct kn_rule_wqe d;
		kn_rule_ctrl(w, &d);
		cr_assert_eq(d.ds, 2 + nseg);
		cr_assert_eq(d.nbb, (d.ds * 16 + 63) / 64);
		cr_assert_eq(kn_rule_decode(w, 77, 0x123, &d), 0);
		cr_assert_eq(d.opcode, KN_OPCODE_RDMA_WRITE);
		cr_assert_eq(d.signaled, 1);
		cr_assert_eq(d.raddr, 0x1234567890ull + nseg);
		cr_assert_eq(d.rkey, 0xabcd07u);
		cr_assert_eq(d.nseg, nseg);
		cr_assert_eq(d.access, 0u);
		uint64_t total = 0;
		for (uint32_t i = 0; i < nseg; i++) {
			const struct kn_wqe_data_seg *g = (const void *)(w + 32 + 16 * i);
			cr_assert_eq(d.seg[i].len, kn_be32toh(g->byte_count));
			cr_assert_eq(d.seg[i].lkey, kn_be32toh(g->lkey));
			cr_assert_eq(d.seg[i].addr, kn_be64toh(g->addr));
			cr_assert_eq(d.seg[i].inl, 0u);
			total += d.seg[i].len;
		}
		cr_assert_eq(d.total, total);
	}
	/* a read needs local write on its scatter list */
	build_write(w, 5, 0x123, 2, 3, KN_OPCODE_RDMA_READ);
	struct kn_rule_wqe d;
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 5, 0x123, &d), 0);
	cr_assert_eq(d.access, (unsigned)KINET_ACCESS_LOCAL_WRITE);
	cr_assert_eq(kn_rule_remote_access(KN_OPCODE_RDMA_READ), (unsigned)KINET_ACCESS_REMOTE_READ);
}

Test(rules, decode_malformed)
{
	static uint8_t w[KN_MAX_WQE_BBS * KN_SEND_WQE_BB];
	struct kn_rule_wqe d;
	/* another QP's number, another index, ds 0 */
	build_write(w, 9, 0x123, 1, 1, KN_OPCODE_RDMA_WRITE);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 9, 0x124, &d), KN_SYND_LOCAL_QP_OP_ERR);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 10, 0x123, &d), KN_SYND_LOCAL_QP_OP_ERR);
	((struct kn_wqe_ctrl_seg *)w)->qpn_ds = kn_htobe32(0x123u << 8);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(d.nbb, 1u);
	cr_assert_eq(kn_rule_decode(w, 9, 0x123, &d), KN_SYND_LOCAL_QP_OP_ERR);
	/* an unknown opcode */
	build_write(w, 9, 0x123, 1, 1, 0x1f);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 9, 0x123, &d), KN_SYND_LOCAL_QP_OP_ERR);
	/* inline data longer than the WQE: after the good segments before it */
	build_write(w, 9, 0x123, 3, 1, KN_OPCODE_RDMA_WRITE);
	*(uint32_t *)(w + 32 + 32) = kn_htobe32(KN_INLINE_SEG | 200);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 9, 0x123, &d), KN_SYND_LOCAL_QP_OP_ERR);
	cr_assert_eq(d.nseg, 2u, "the segments before it are checked first");
	/* more segments than the NIC takes: a length error after 64 */
	build_write(w, 9, 0x123, 61, 1, KN_OPCODE_RDMA_WRITE); /* ds 63: the field's largest */
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 9, 0x123, &d), 0);
	cr_assert_eq(d.nseg, 61u);
	/* a message over 1 GiB: the segment that crosses is checked first */
	build_write(w, 9, 0x123, 2, 1, KN_OPCODE_RDMA_WRITE);
	*(uint32_t *)(w + 32) = 0; /* 2^31 bytes */
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 9, 0x123, &d),
		     KN_RULE(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH));
	cr_assert_eq(d.nseg, 1u);
	/* an atomic whose data segment is not 8 bytes */
	memset(w, 0, 256);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 3, KN_OPCODE_ATOMIC_FA, 0, 0x123, 0, 4, 0, 0);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), 4, 1, 2);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 3, 0x123, &d),
		     KN_RULE(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH));
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), 8, 1, 2);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 3, 0x123, &d), 0);
	cr_assert_eq(d.access, (unsigned)KINET_ACCESS_LOCAL_WRITE);
}

Test(rules, doorbell_words)
{
	uint8_t w[64];
	uint16_t p = 0;
	/* the ctrl word of a 3-WQEBB WQE at index 10: the producer is at 13 */
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 10, KN_OPCODE_RDMA_WRITE, 0, 0x42, 0, 12, 0, 0);
	uint64_t word;
	memcpy(&word, w, 8);
	cr_assert_eq(kn_rule_db_word(word, 0x42, &p), 1);
	cr_assert_eq(p, 13);
	cr_assert_eq(kn_rule_db_word(word, 0x43, &p), -1, "another QP's word");
	/* a producer-index word (ds 0) */
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 200, 0, 0, 0x42, 0, 0, 0, 0);
	memcpy(&word, w, 8);
	cr_assert_eq(kn_rule_db_word(word, 0x42, &p), 0);
	cr_assert_eq(p, 200);
	/* offers: the furthest sane producer wins; none beyond the queue */
	uint32_t t = 0;
	t = kn_rule_db_offer(t, 100, 104, 64);
	t = kn_rule_db_offer(t, 100, 102, 64);
	cr_assert_eq(t, 104u | 0x10000u);
	t = kn_rule_db_offer(t, 100, 100 + 65, 64);
	cr_assert_eq(t, 104u | 0x10000u, "more than a queue ahead: not a producer");
	cr_assert_eq(kn_rule_db_avail(&t, 100, 64), 4u);
	cr_assert_eq(kn_rule_db_avail(&t, 104, 64), 0u);
	cr_assert_eq(t, 0u, "consumed: forgotten");
	/* across the 16-bit wrap */
	t = kn_rule_db_offer(0, 65534, 2, 64);
	cr_assert_eq(kn_rule_db_avail(&t, 65534, 64), 4u);
}

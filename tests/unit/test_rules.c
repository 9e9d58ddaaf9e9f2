/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The software NIC's rules (src/nic/soft/rules.h), the code both engines run
 * (the CPU engine compiled here, the GPU engine by nvcc): the order of the
 * region checks, the key view, the WQE decoder on well-formed and malformed
 * WQEs built with kinet's own builders, and the doorbell words. Then the GPU
 * engine's executor (src/nic/soft/geng_exec.h, the kernel's per-slot code,
 * compiled here as for KINET_GPU_ENGINE=host) over a control block and queues
 * of its own: what it executes, the CQEs it writes, the doorbell forms it
 * counts, a full CQ, and what it gives back to the CPU engine and why.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <kinet/device.h>
#include "nic/soft/rules.h"
#include "nic/soft/geng_exec.h"
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

/* DUMP: local data segments only (no remote address, no inline data),
 * read and discarded; no remote access needed. */
Test(rules, decode_dump)
{
	static uint8_t w[4 * KN_SEND_WQE_BB];
	struct kn_rule_wqe d;
	memset(w, 0, sizeof(w));
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 4, KN_OPCODE_DUMP, 0, 0x123, 8, 2, 0, 0);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 16), 1, 0x4455, 0x1000);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 4, 0x123, &d), 0);
	cr_assert_eq(d.opcode, KN_OPCODE_DUMP);
	cr_assert_eq(d.nseg, 1u);
	cr_assert_eq(d.seg[0].lkey, 0x4455u);
	cr_assert_eq(d.seg[0].addr, 0x1000u);
	cr_assert_eq(d.seg[0].len, 1u);
	cr_assert_eq(d.access, 0u);
	cr_assert_eq(kn_rule_remote_access(KN_OPCODE_DUMP), 0u);
	/* inline data is not a buffer to read */
	*(uint32_t *)(w + 16) = kn_htobe32(KN_INLINE_SEG | 4);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 4, 0x123, &d), KN_SYND_LOCAL_QP_OP_ERR);
}

/* WAIT on a CQ (opmod 0, ds 2): 8 reserved bytes, the CQE index and the
 * CQ's number, both 24 bits; no segment to check, no remote access. The
 * clock form (opmod 2) and other sizes are not an RC WQE. */
Test(rules, decode_wait)
{
	static uint8_t w[KN_SEND_WQE_BB];
	struct kn_rule_wqe d;
	memset(w, 0, sizeof(w));
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 9, KN_OPCODE_WAIT, 0, 0x123,
			KN_WQE_CTRL_CQ_UPDATE, 2, 0, 0);
	kn_store_be32(w + 24, 0x12345678u);
	kn_store_be32(w + 28, 0xff000041u);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 9, 0x123, &d), 0);
	cr_assert_eq(d.opcode, KN_OPCODE_WAIT);
	cr_assert_eq(d.wait_index, 0x345678u);
	cr_assert_eq(d.wait_cqn, 0x41u);
	cr_assert_eq(d.nseg, 0u);
	cr_assert(d.signaled);
	cr_assert_eq(kn_rule_remote_access(KN_OPCODE_WAIT), 0u);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 9, KN_OPCODE_WAIT, 2, 0x123, 0, 2, 0, 0);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 9, 0x123, &d), KN_SYND_LOCAL_QP_OP_ERR);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 9, KN_OPCODE_WAIT, 0, 0x123, 0, 3, 0, 0);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode(w, 9, 0x123, &d), KN_SYND_LOCAL_QP_OP_ERR);
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

/* A DCI's WQEs: the address vector (48 bytes, or the compact 16) names the
 * DCT and the key; the segments after it decode as an RC WQE's; local
 * operations carry none; a vector cut short is malformed. */
Test(rules, decode_dci)
{
	static uint8_t w[KN_MAX_WQE_BBS * KN_SEND_WQE_BB];
	struct kn_rule_wqe d;
	for (int half = 0; half < 2; half++) {
		uint32_t h = half ? 16 : 48;
		memset(w, 0, sizeof(w));
		kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 5, KN_OPCODE_ATOMIC_FA, 0, 0x321,
				KN_WQE_CTRL_CQ_UPDATE, (uint8_t)(4 + h / 16), 0, 0);
		kn_store_be64(w + 16, 0x1122334455667788ull);
		kn_store_be32(w + 24, (half ? 0 : 1u << 31) | 0xabcdeu);
		kn_store_be64(w + 16 + h, 0x1000);
		kn_store_be32(w + 24 + h, 0x777);
		kn_store_be64(w + 32 + h, 0x55);
		kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48 + h), 8, 0x99, 0x2000);
		kn_rule_ctrl(w, &d);
		cr_assert_eq(kn_rule_decode_dci(w, 5, 0x321, &d), 0, "half %d", half);
		cr_assert_eq(d.dct, 0xabcdeu);
		cr_assert_eq(d.dc_key, 0x1122334455667788ull);
		cr_assert_eq(d.raddr, 0x1000u);
		cr_assert_eq(d.rkey, 0x777u);
		cr_assert_eq(d.swap_add, 0x55u);
		cr_assert_eq(d.nseg, 1u);
		cr_assert_eq(d.seg[0].lkey, 0x99u);
		cr_assert_eq(d.seg[0].addr, 0x2000u);
		/* the same bytes as an RC WQE: not an atomic of the right size */
		kn_rule_ctrl(w, &d);
		cr_assert_neq(kn_rule_decode(w, 5, 0x321, &d), 0u);
	}
	/* a send with inline data after the whole vector */
	memset(w, 0, sizeof(w));
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 6, KN_OPCODE_SEND, 0, 0x321, 0, 5, 0, 0);
	kn_store_be32(w + 24, 1u << 31 | 0x100u);
	kn_store_be32(w + 64, KN_INLINE_SEG | 12);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode_dci(w, 6, 0x321, &d), 0);
	cr_assert_eq(d.dct, 0x100u);
	cr_assert_eq(d.nseg, 1u);
	cr_assert_eq(d.seg[0].inl, 68u, "inline data's offset in the WQE, past the vector");
	cr_assert_eq(d.seg[0].len, 12u);
	/* a NOP carries no vector */
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 7, KN_OPCODE_NOP, 0, 0x321, 0, 1, 0, 0);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode_dci(w, 7, 0x321, &d), 0);
	cr_assert_eq(d.dct, 0u);
	/* a write whose ds leaves no room for the vector it announces */
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 8, KN_OPCODE_RDMA_WRITE, 0, 0x321, 0, 3, 0,
			0);
	kn_store_be32(w + 24, 1u << 31 | 0x100u);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode_dci(w, 8, 0x321, &d),
		     KN_RULE(KN_SYND_LOCAL_QP_OP_ERR, KINET_REASON_MALFORMED));
	/* with the compact vector, ds 2 leaves no room for the remote address */
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 8, KN_OPCODE_RDMA_WRITE, 0, 0x321, 0, 2, 0,
			0);
	kn_store_be32(w + 24, 0x100u);
	kn_rule_ctrl(w, &d);
	cr_assert_eq(kn_rule_decode_dci(w, 8, 0x321, &d), KN_SYND_LOCAL_QP_OP_ERR);
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

/* ---- the GPU engine's executor (geng_exec.h), compiled for the host -------- */

#define GX_SQ 16
#define GX_CQ 8

static struct {
	struct kn_geng_ctl ctl;
	uint8_t sq[GX_SQ * KN_SEND_WQE_BB] __attribute__((aligned(64)));
	uint32_t dbrec[2];
	uint64_t db[2];
	struct kn_cqe64 cq[GX_CQ];
	uint32_t cq_dbrec[2];
	struct kn_keyent keys[4];
	uint8_t src[4096] __attribute__((aligned(64)));
	uint8_t dst[4096] __attribute__((aligned(64)));
	uint8_t orig[4096];
	struct kn_gx_slot g;
	struct kn_gx_warp w;
} X;

#define GX_LKEY ((1u << 8) | 5)
#define GX_RKEY ((2u << 8) | 9)

static void gx_setup(uint64_t seed)
{
	memset(&X, 0, sizeof(X));
	tu_fill_random(X.src, sizeof(X.src), seed);
	tu_fill_random(X.dst, sizeof(X.dst), seed + 1);
	memcpy(X.orig, X.dst, sizeof(X.dst));
	X.keys[1] = (struct kn_keyent){.base = tu_addr(X.src), .len = sizeof(X.src),
				       .gbase = tu_addr(X.src), .pd = 7, .key = GX_LKEY,
				       .access = KINET_ACCESS_LOCAL_WRITE};
	X.keys[2] = (struct kn_keyent){.base = tu_addr(X.dst), .len = sizeof(X.dst),
				       .gbase = tu_addr(X.dst), .pd = 7, .key = GX_RKEY,
				       .access = KINET_ACCESS_ALL};
	struct kn_geng_slot *s = &X.ctl.slot[0];
	s->qpn = 0x42;
	s->sq_cnt = GX_SQ;
	s->cq_cnt = GX_CQ;
	s->sq = tu_addr(X.sq);
	s->dbrec = tu_addr(X.dbrec);
	s->db0 = tu_addr(&X.db[0]);
	s->nregs = 1;
	s->cq = tu_addr(X.cq);
	s->cq_dbrec = tu_addr(X.cq_dbrec);
	s->keys = s->peer_keys = tu_addr(X.keys);
	s->keys_cap = s->peer_keys_cap = 4;
	s->pd = s->peer_pd = 7;
	s->gen = 1;
	s->own = KN_GOWN_GPU;
	X.ctl.nslots = 1;
	kn_gx_load_slot(&X.ctl, 0, &X.g);
	cr_assert_eq(X.g.active, 1u);
}

/* The write at index idx: len bytes from src + 64 * idx to dst + 64 * idx. */
static uint8_t *gx_write(uint16_t idx, uint32_t len, uint32_t rkey)
{
	uint8_t *w = X.sq + (idx % GX_SQ) * KN_SEND_WQE_BB;
	tu_wqe_write(w, idx, 0x42, tu_addr(X.src + 64 * idx), GX_LKEY, tu_addr(X.dst + 64 * idx),
		     rkey, len, 1);
	return w;
}

static void gx_ring_record(uint16_t pi) { X.dbrec[KN_SND_DBR] = kn_htobe32(pi); }

static void gx_expect_cqe(uint64_t n, uint16_t idx, uint32_t len)
{
	const struct kn_cqe64 *c = &X.cq[n % GX_CQ];
	cr_assert_eq(c->op_own, (uint8_t)((KN_CQE_REQ << 4) | ((n / GX_CQ) & 1)), "CQE %llu: op_own",
		     (unsigned long long)n);
	cr_assert_eq(kn_be16toh(c->wqe_counter), idx);
	cr_assert_eq(kn_be32toh(c->byte_cnt), len);
	cr_assert_eq(kn_be32toh(c->sop_drop_qpn), ((uint32_t)KN_OPCODE_RDMA_WRITE << 24) | 0x42u);
}

Test(rules, geng_exec_serves_and_gives_back)
{
	gx_setup(5);
	/* three writes found through the doorbell record alone */
	for (uint16_t i = 0; i < 3; i++)
		gx_write(i, 10 + 7 * i, GX_RKEY);
	gx_ring_record(3);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 3);
	for (uint16_t i = 0; i < 3; i++) {
		cr_assert_eq(memcmp(X.dst + 64 * i, X.src + 64 * i, 10 + 7 * i), 0);
		cr_assert_eq(memcmp(X.dst + 64 * i + 10 + 7 * i, X.orig + 64 * i + 10 + 7 * i, 1), 0,
			     "wrote past its length");
		gx_expect_cqe(i, i, 10 + 7 * i);
	}
	cr_assert_eq(X.g.s.sq_ci, 3u);
	cr_assert_eq(X.ctl.slot[0].sq_ci_pub, 3u);
	cr_assert_eq(X.g.s.n_wqes, 3u);
	cr_assert_eq(X.g.s.n_cqes, 3u);
	cr_assert_eq(X.g.s.n_moved, 30u + 7u * 3u);
	cr_assert_eq(X.g.s.n_dbr_only, 1u);
	cr_assert_eq(X.g.s.n_doorbells, 0u);
	/* nothing new: no work */
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 0);
	/* one found through the register word naming it (the record not updated) */
	uint8_t *w = gx_write(3, 64, GX_RKEY);
	memcpy(&X.db[0], w, 8);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 1);
	cr_assert_eq(X.g.s.n_doorbells, 1u);
	cr_assert_eq(X.g.s.n_db_wqe, 1u);
	gx_expect_cqe(3, 3, 64);
	/* a bad key: given back unconsumed, for the CPU engine's error CQE */
	gx_write(4, 16, GX_RKEY ^ 0x80);
	gx_write(5, 16, GX_RKEY);
	gx_ring_record(6);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 1);
	struct kn_geng_slot *h = &X.ctl.slot[0];
	cr_assert_eq(h->own, (uint32_t)KN_GOWN_BACK);
	cr_assert_eq(h->why, (uint32_t)KN_GWHY_ERROR);
	cr_assert_eq(h->sq_ci, 4u, "the bad WQE stays unconsumed");
	cr_assert_eq(h->cq_pi, 4u);
	cr_assert_eq(h->n_wqes, 4u);
	cr_assert_eq(X.g.active, 0u);
	cr_assert_eq(memcmp(X.dst + 64 * 4, X.orig + 64 * 4, 128), 0, "executed after the bad one");
	cr_assert_eq(X.cq[4].op_own, 0, "a CQE for the bad one");
}

Test(rules, geng_exec_leaves_to_the_cpu)
{
	/* a send: the opcode stays with the CPU engine */
	gx_setup(6);
	uint8_t *w = gx_write(0, 8, GX_RKEY);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 0, KN_OPCODE_SEND, 0, 0x42, KN_WQE_CTRL_CQ_UPDATE,
			2, 0, 0);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 16), 8, GX_LKEY, tu_addr(X.src));
	gx_ring_record(1);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 1);
	cr_assert_eq(X.ctl.slot[0].why, (uint32_t)KN_GWHY_OP);
	/* a WAIT: the CPU engine holds the queue on it */
	gx_setup(13);
	w = gx_write(0, 8, GX_RKEY);
	memset(w, 0, KN_SEND_WQE_BB);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 0, KN_OPCODE_WAIT, 0, 0x42, KN_WQE_CTRL_CQ_UPDATE,
			2, 0, 0);
	gx_ring_record(1);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 1);
	cr_assert_eq(X.ctl.slot[0].why, (uint32_t)KN_GWHY_OP);
	/* memory the executor cannot reach */
	gx_setup(7);
	X.keys[2].gbase = 0;
	gx_write(0, 8, GX_RKEY);
	gx_ring_record(1);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 1);
	cr_assert_eq(X.ctl.slot[0].why, (uint32_t)KN_GWHY_HOST_MEM);
	cr_assert_eq(memcmp(X.dst, X.orig, sizeof(X.dst)), 0);
	/* revoked, another PD, out of bounds, no remote write: errors */
	for (int k = 0; k < 4; k++) {
		gx_setup(8 + (uint64_t)k);
		if (k == 0)
			X.keys[2].revoked = 1;
		else if (k == 1)
			X.keys[2].pd = 8;
		else if (k == 3)
			X.keys[2].access = KINET_ACCESS_REMOTE_READ;
		gx_write(k == 2 ? 63 : 0, k == 2 ? 100 : 8, GX_RKEY);
		if (k == 2) /* index 63 of a 16-deep SQ sits in slot 15 */
			X.g.s.sq_ci = 63, X.g.s.dbr_seen = 0;
		gx_ring_record(k == 2 ? 64 : 1);
		cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 1, "case %d", k);
		cr_assert_eq(X.ctl.slot[0].why, (uint32_t)KN_GWHY_ERROR, "case %d", k);
		cr_assert_eq(memcmp(X.dst, X.orig, sizeof(X.dst)), 0, "case %d", k);
	}
	/* asked back (STOP) */
	gx_setup(12);
	X.ctl.slot[0].own = KN_GOWN_STOP;
	cr_assert_eq(kn_gx_visit(&X.ctl, 0, &X.g, KN_GOWN_STOP, &X.w, 0, NULL), 1);
	cr_assert_eq(X.ctl.slot[0].own, (uint32_t)KN_GOWN_BACK);
	cr_assert_eq(X.ctl.slot[0].why, (uint32_t)KN_GWHY_ASKED);
}

Test(rules, geng_exec_cq_full_and_atomics)
{
	gx_setup(13);
	/* a full CQ (as last seen, and again when read): the executor waits */
	for (uint16_t i = 0; i < GX_CQ + 2; i++)
		gx_write(i, 4, GX_RKEY);
	gx_ring_record(GX_CQ + 2);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), GX_CQ);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 0, "ran past a full CQ");
	X.cq_dbrec[0] = kn_htobe32(2); /* the consumer took two */
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 2);
	gx_expect_cqe(GX_CQ, GX_CQ, 4);
	gx_expect_cqe(GX_CQ + 1, GX_CQ + 1, 4);
	/* fetch-and-add on host memory: the host executor's atomics are the CPU
	 * engine's own; the old value lands big-endian */
	gx_setup(14);
	uint64_t v;
	memcpy(&v, X.dst + 128, 8);
	uint8_t *w = X.sq;
	memset(w, 0, 64);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 0, KN_OPCODE_ATOMIC_FA, 0, 0x42,
			KN_WQE_CTRL_CQ_UPDATE, 4, 0, 0);
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), tu_addr(X.dst + 128), GX_RKEY);
	kn_set_atomic_seg((struct kn_wqe_atomic_seg *)(w + 32), 0x1234, 0);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), 8, GX_LKEY, tu_addr(X.src + 256));
	gx_ring_record(1);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 1);
	uint64_t now, old;
	memcpy(&now, X.dst + 128, 8);
	memcpy(&old, X.src + 256, 8);
	cr_assert_eq(now, v + 0x1234);
	cr_assert_eq(kn_be64toh(old), v);
	cr_assert_eq(X.g.s.n_moved, 0u, "an atomic moves no bytes");
	/* misaligned: an error for the CPU engine */
	gx_setup(15);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 0, KN_OPCODE_ATOMIC_FA, 0, 0x42,
			KN_WQE_CTRL_CQ_UPDATE, 4, 0, 0);
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), tu_addr(X.dst + 129), GX_RKEY);
	kn_set_atomic_seg((struct kn_wqe_atomic_seg *)(w + 32), 1, 0);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), 8, GX_LKEY, tu_addr(X.src + 256));
	gx_ring_record(1);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 1);
	cr_assert_eq(X.ctl.slot[0].why, (uint32_t)KN_GWHY_ERROR);
}

/* A target QP's remote-access flags: without KINET_QP_ACCESS_SET every
 * access; with it, only those given. */
Test(rules, target_qp_access)
{
	const unsigned W = KINET_ACCESS_REMOTE_WRITE, R = KINET_ACCESS_REMOTE_READ,
		       A = KINET_ACCESS_REMOTE_ATOMIC, S = KINET_QP_ACCESS_SET;
	cr_assert_eq(kn_rule_qp_access(0, W), 0);
	cr_assert_eq(kn_rule_qp_access(0, R), 0);
	cr_assert_eq(kn_rule_qp_access(0, A), 0);
	cr_assert_eq(kn_rule_qp_access(S, W), KINET_REASON_QP_ACCESS);
	cr_assert_eq(kn_rule_qp_access(S, R), KINET_REASON_QP_ACCESS);
	cr_assert_eq(kn_rule_qp_access(S, A), KINET_REASON_QP_ACCESS);
	cr_assert_eq(kn_rule_qp_access(S, 0), 0, "a NOP needs nothing");
	cr_assert_eq(kn_rule_qp_access(S | W, W), 0);
	cr_assert_eq(kn_rule_qp_access(S | W, R), KINET_REASON_QP_ACCESS);
	cr_assert_eq(kn_rule_qp_access(S | W | KINET_ACCESS_LOCAL_WRITE, A), KINET_REASON_QP_ACCESS);
	cr_assert_eq(kn_rule_qp_access(S | R | A, A), 0);
	cr_assert_eq(kn_rule_qp_access(S | R | A, W), KINET_REASON_QP_ACCESS);
	for (uint32_t i = 0; i < 6; i++) {
		uint8_t op = (uint8_t[]){KN_OPCODE_RDMA_WRITE, KN_OPCODE_RDMA_WRITE_IMM,
					 KN_OPCODE_RDMA_READ, KN_OPCODE_ATOMIC_CS,
					 KN_OPCODE_ATOMIC_FA, KN_OPCODE_ATOMIC_MASKED_FA}[i];
		cr_assert_eq(kn_rule_qp_access(S | W | R | A, kn_rule_remote_access(op)), 0);
		cr_assert_eq(kn_rule_qp_access(S, kn_rule_remote_access(op)),
			     KINET_REASON_QP_ACCESS, "opcode 0x%x", op);
	}
}

/* The GPU engine against a target QP that refuses: the WQE goes back to the
 * CPU engine unconsumed (its error CQE is the CPU engine's), nothing moves. */
Test(rules, geng_exec_target_qp_access)
{
	gx_setup(16);
	X.g.s.peer_access = KINET_QP_ACCESS_SET | KINET_ACCESS_REMOTE_WRITE;
	gx_write(0, 100, GX_RKEY);
	uint8_t *w = gx_write(1, 200, GX_RKEY); /* made a read below */
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 1, KN_OPCODE_RDMA_READ, 0, 0x42,
			KN_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
	uint8_t keep[4096];
	memcpy(keep, X.src, sizeof(keep));
	gx_ring_record(2);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 2);
	gx_expect_cqe(0, 0, 100);
	cr_assert_eq(memcmp(X.dst, X.src, 100), 0, "the allowed write");
	struct kn_geng_slot *h = &X.ctl.slot[0];
	cr_assert_eq(h->own, (uint32_t)KN_GOWN_BACK);
	cr_assert_eq(h->why, (uint32_t)KN_GWHY_ERROR);
	cr_assert_eq(h->sq_ci, 1u, "the refused read stays unconsumed");
	cr_assert_eq(memcmp(X.src, keep, sizeof(keep)), 0, "the refused read landed");
	cr_assert_eq(X.cq[1].op_own, 0, "a CQE for the refused read");
	/* a QP allowing reads only: a write goes back, nothing lands */
	gx_setup(17);
	X.g.s.peer_access = KINET_QP_ACCESS_SET | KINET_ACCESS_REMOTE_READ;
	gx_write(0, 64, GX_RKEY);
	gx_ring_record(1);
	cr_assert_eq(kn_gx_serve(&X.ctl, 0, &X.g, &X.w, 0, NULL), 1);
	cr_assert_eq(X.ctl.slot[0].why, (uint32_t)KN_GWHY_ERROR);
	cr_assert_eq(X.ctl.slot[0].sq_ci, 0u);
	cr_assert_eq(memcmp(X.dst, X.orig, sizeof(X.dst)), 0, "the refused write landed");
}

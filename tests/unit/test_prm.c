/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conformance of include/kinet/prm.h with rdma-core's <infiniband/mlx5dv.h>:
 * struct sizes and field offsets, opcode / CQE opcode / syndrome / flag
 * values, and byte equality of the segment builders with mlx5dv's inline
 * builders on random inputs. Only the header's static inline functions are
 * used: the program does not link libmlx5.
 */
#include <criterion/criterion.h>
#include <endian.h>
#include <stddef.h>
#include <string.h>
#include <kinet/prm.h>
#include <kinet/device.h>
#include "../util/testutil.h"

#if __has_include(<infiniband/mlx5dv.h>)
#include <infiniband/mlx5dv.h>
#define HAVE_MLX5DV 1
#else
#define HAVE_MLX5DV 0
#endif

#if HAVE_MLX5DV

#define SAME_SIZE(ours, theirs) \
	cr_assert_eq(sizeof(struct ours), sizeof(struct theirs), #ours " size %zu != %zu", \
		     sizeof(struct ours), sizeof(struct theirs))
#define SAME_FIELD(ours, theirs, f)                                                      \
	do {                                                                             \
		cr_assert_eq(offsetof(struct ours, f), offsetof(struct theirs, f),       \
			     #ours "." #f " at %zu, mlx5dv at %zu", offsetof(struct ours, f), \
			     offsetof(struct theirs, f));                                \
		cr_assert_eq(sizeof(((struct ours *)0)->f), sizeof(((struct theirs *)0)->f), \
			     #ours "." #f " size differs");                             \
	} while (0)
#define SAME_VALUE(ours, theirs) \
	cr_assert_eq((long long)(ours), (long long)(theirs), #ours " = %lld, " #theirs " = %lld", \
		     (long long)(ours), (long long)(theirs))

Test(prm, ctrl_seg_layout)
{
	SAME_SIZE(kn_wqe_ctrl_seg, mlx5_wqe_ctrl_seg);
	cr_assert_eq(sizeof(struct kn_wqe_ctrl_seg), 16);
	SAME_FIELD(kn_wqe_ctrl_seg, mlx5_wqe_ctrl_seg, opmod_idx_opcode);
	SAME_FIELD(kn_wqe_ctrl_seg, mlx5_wqe_ctrl_seg, qpn_ds);
	SAME_FIELD(kn_wqe_ctrl_seg, mlx5_wqe_ctrl_seg, signature);
	SAME_FIELD(kn_wqe_ctrl_seg, mlx5_wqe_ctrl_seg, dci_stream_channel_id);
	SAME_FIELD(kn_wqe_ctrl_seg, mlx5_wqe_ctrl_seg, fm_ce_se);
	SAME_FIELD(kn_wqe_ctrl_seg, mlx5_wqe_ctrl_seg, imm);
}

Test(prm, raddr_data_inline_atomic_layout)
{
	SAME_SIZE(kn_wqe_raddr_seg, mlx5_wqe_raddr_seg);
	SAME_FIELD(kn_wqe_raddr_seg, mlx5_wqe_raddr_seg, raddr);
	SAME_FIELD(kn_wqe_raddr_seg, mlx5_wqe_raddr_seg, rkey);
	SAME_FIELD(kn_wqe_raddr_seg, mlx5_wqe_raddr_seg, reserved);

	SAME_SIZE(kn_wqe_data_seg, mlx5_wqe_data_seg);
	SAME_FIELD(kn_wqe_data_seg, mlx5_wqe_data_seg, byte_count);
	SAME_FIELD(kn_wqe_data_seg, mlx5_wqe_data_seg, lkey);
	SAME_FIELD(kn_wqe_data_seg, mlx5_wqe_data_seg, addr);

	SAME_SIZE(kn_wqe_inl_data_seg, mlx5_wqe_inl_data_seg);
	SAME_FIELD(kn_wqe_inl_data_seg, mlx5_wqe_inl_data_seg, byte_count);

	SAME_SIZE(kn_wqe_atomic_seg, mlx5_wqe_atomic_seg);
	SAME_FIELD(kn_wqe_atomic_seg, mlx5_wqe_atomic_seg, swap_add);
	SAME_FIELD(kn_wqe_atomic_seg, mlx5_wqe_atomic_seg, compare);
}

Test(prm, cqe64_layout)
{
	SAME_SIZE(kn_cqe64, mlx5_cqe64);
	cr_assert_eq(sizeof(struct kn_cqe64), KN_CQE_SIZE);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, rsvd0);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, wqe_id);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, rsvd4);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, ml_path);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, rsvd20);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, slid);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, flags_rqpn);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, hds_ip_ext);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, l4_hdr_type_etc);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, vlan_info);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, srqn_uidx);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, imm_inval_pkey);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, app);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, app_op);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, app_info);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, byte_cnt);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, timestamp);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, sop_drop_qpn);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, wqe_counter);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, signature);
	SAME_FIELD(kn_cqe64, mlx5_cqe64, op_own);
}

Test(prm, err_cqe_layout)
{
	SAME_SIZE(kn_err_cqe, mlx5_err_cqe);
	cr_assert_eq(sizeof(struct kn_err_cqe), KN_CQE_SIZE);
	SAME_FIELD(kn_err_cqe, mlx5_err_cqe, rsvd0);
	SAME_FIELD(kn_err_cqe, mlx5_err_cqe, srqn);
	SAME_FIELD(kn_err_cqe, mlx5_err_cqe, rsvd1);
	SAME_FIELD(kn_err_cqe, mlx5_err_cqe, vendor_err_synd);
	SAME_FIELD(kn_err_cqe, mlx5_err_cqe, syndrome);
	SAME_FIELD(kn_err_cqe, mlx5_err_cqe, s_wqe_opcode_qpn);
	SAME_FIELD(kn_err_cqe, mlx5_err_cqe, wqe_counter);
	SAME_FIELD(kn_err_cqe, mlx5_err_cqe, signature);
	SAME_FIELD(kn_err_cqe, mlx5_err_cqe, op_own);
	/* the two layouts of one CQE agree where they overlap */
	cr_assert_eq(offsetof(struct kn_err_cqe, wqe_counter), offsetof(struct kn_cqe64, wqe_counter));
	cr_assert_eq(offsetof(struct kn_err_cqe, op_own), offsetof(struct kn_cqe64, op_own));
}

Test(prm, wqe_opcodes)
{
	SAME_VALUE(KN_OPCODE_NOP, MLX5_OPCODE_NOP);
	SAME_VALUE(KN_OPCODE_SEND_INVAL, MLX5_OPCODE_SEND_INVAL);
	SAME_VALUE(KN_OPCODE_RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE);
	SAME_VALUE(KN_OPCODE_RDMA_WRITE_IMM, MLX5_OPCODE_RDMA_WRITE_IMM);
	SAME_VALUE(KN_OPCODE_SEND, MLX5_OPCODE_SEND);
	SAME_VALUE(KN_OPCODE_SEND_IMM, MLX5_OPCODE_SEND_IMM);
	SAME_VALUE(KN_OPCODE_RDMA_READ, MLX5_OPCODE_RDMA_READ);
	SAME_VALUE(KN_OPCODE_ATOMIC_CS, MLX5_OPCODE_ATOMIC_CS);
	SAME_VALUE(KN_OPCODE_ATOMIC_FA, MLX5_OPCODE_ATOMIC_FA);
}

Test(prm, cqe_opcodes)
{
	SAME_VALUE(KN_CQE_REQ, MLX5_CQE_REQ);
	SAME_VALUE(KN_CQE_RESP_WR_IMM, MLX5_CQE_RESP_WR_IMM);
	SAME_VALUE(KN_CQE_RESP_SEND, MLX5_CQE_RESP_SEND);
	SAME_VALUE(KN_CQE_RESP_SEND_IMM, MLX5_CQE_RESP_SEND_IMM);
	SAME_VALUE(KN_CQE_RESP_SEND_INV, MLX5_CQE_RESP_SEND_INV);
	SAME_VALUE(KN_CQE_REQ_ERR, MLX5_CQE_REQ_ERR);
	SAME_VALUE(KN_CQE_RESP_ERR, MLX5_CQE_RESP_ERR);
	SAME_VALUE(KN_CQE_INVALID, MLX5_CQE_INVALID);
}

Test(prm, syndromes)
{
	SAME_VALUE(KN_SYND_LOCAL_LENGTH_ERR, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
	SAME_VALUE(KN_SYND_LOCAL_QP_OP_ERR, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
	SAME_VALUE(KN_SYND_LOCAL_PROT_ERR, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
	SAME_VALUE(KN_SYND_WR_FLUSH_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
	SAME_VALUE(KN_SYND_MW_BIND_ERR, MLX5_CQE_SYNDROME_MW_BIND_ERR);
	SAME_VALUE(KN_SYND_BAD_RESP_ERR, MLX5_CQE_SYNDROME_BAD_RESP_ERR);
	SAME_VALUE(KN_SYND_LOCAL_ACCESS_ERR, MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR);
	SAME_VALUE(KN_SYND_REMOTE_INVAL_REQ_ERR, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
	SAME_VALUE(KN_SYND_REMOTE_ACCESS_ERR, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
	SAME_VALUE(KN_SYND_REMOTE_OP_ERR, MLX5_CQE_SYNDROME_REMOTE_OP_ERR);
	SAME_VALUE(KN_SYND_TRANSPORT_RETRY_EXC_ERR, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
	SAME_VALUE(KN_SYND_RNR_RETRY_EXC_ERR, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
	SAME_VALUE(KN_SYND_REMOTE_ABORTED_ERR, MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR);
}

Test(prm, flags_and_constants)
{
	SAME_VALUE(KN_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_CQ_UPDATE);
	SAME_VALUE(KN_WQE_CTRL_SOLICITED, MLX5_WQE_CTRL_SOLICITED);
	SAME_VALUE(KN_WQE_CTRL_FENCE, MLX5_WQE_CTRL_FENCE);
	SAME_VALUE(KN_WQE_CTRL_INITIATOR_SMALL_FENCE, MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
	SAME_VALUE(KN_INLINE_SEG, MLX5_INLINE_SEG);
	SAME_VALUE(KN_SEND_WQE_BB, MLX5_SEND_WQE_BB);
	SAME_VALUE(KN_SEND_WQE_SHIFT, MLX5_SEND_WQE_SHIFT);
	SAME_VALUE(1u << KN_SEND_WQE_SHIFT, KN_SEND_WQE_BB);
	SAME_VALUE(KN_RCV_DBR, MLX5_RCV_DBR);
	SAME_VALUE(KN_SND_DBR, MLX5_SND_DBR);
	SAME_VALUE(KN_CQE_SIZE, sizeof(struct mlx5_cqe64));
}

/* The builders produce the same 16 bytes as mlx5dv's, on random inputs. The
 * destination starts as the same random garbage on both sides, so bytes a
 * builder does not write must also agree. */
Test(prm, ctrl_seg_bytes_equal_mlx5dv)
{
	uint64_t s = 0x1234567;
	for (int i = 0; i < 20000; i++) {
		union {
			struct kn_wqe_ctrl_seg k;
			uint8_t b[16];
		} ours;
		union {
			struct mlx5_wqe_ctrl_seg m;
			uint8_t b[16];
		} ref;
		tu_fill_random(ours.b, 16, (uint64_t)i + 7);
		memcpy(ref.b, ours.b, 16);
		uint64_t r1 = tu_rand64(&s), r2 = tu_rand64(&s), r3 = tu_rand64(&s);
		uint16_t pi = (uint16_t)r1;
		uint8_t opcode = (uint8_t)(r1 >> 16), opmod = (uint8_t)(r1 >> 24);
		/* a QP number is 24 bits; every 8th input also tries wider values */
		uint32_t qpn = (i & 7) ? (uint32_t)(r1 >> 32) & 0xffffff : (uint32_t)(r1 >> 32);
		uint8_t fm_ce_se = (uint8_t)r2, ds = (uint8_t)(r2 >> 8) & 0x3f;
		if (i & 1)
			ds = (uint8_t)(r2 >> 8); /* out-of-range ds values too */
		uint8_t signature = (uint8_t)(r2 >> 16);
		uint32_t imm = (uint32_t)r3;
		kn_set_ctrl_seg(&ours.k, pi, opcode, opmod, qpn, fm_ce_se, ds, signature, imm);
		mlx5dv_set_ctrl_seg(&ref.m, pi, opcode, opmod, qpn, fm_ce_se, ds, signature, imm);
		cr_assert_arr_eq(ours.b, ref.b, 16, "ctrl seg differs at input %d", i);
		/* and the accessors read back what was written */
		if (!(i & 1)) {
			cr_assert_eq(kn_wqe_opcode_of(&ours.k), opcode);
			cr_assert_eq(kn_wqe_index_of(&ours.k), pi);
			cr_assert_eq(kn_wqe_ds_of(&ours.k), ds);
		}
	}
}

Test(prm, data_seg_bytes_equal_mlx5dv)
{
	uint64_t s = 0xabcdef;
	for (int i = 0; i < 20000; i++) {
		union {
			struct kn_wqe_data_seg k;
			uint8_t b[16];
		} ours;
		union {
			struct mlx5_wqe_data_seg m;
			uint8_t b[16];
		} ref;
		tu_fill_random(ours.b, 16, (uint64_t)i + 99);
		memcpy(ref.b, ours.b, 16);
		uint64_t r1 = tu_rand64(&s), r2 = tu_rand64(&s);
		uint32_t len = (uint32_t)r1, lkey = (uint32_t)(r1 >> 32);
		if (i % 3 == 0)
			len |= KN_INLINE_SEG;
		uint64_t addr = r2;
		kn_set_data_seg(&ours.k, len, lkey, addr);
		mlx5dv_set_data_seg(&ref.m, len, lkey, (uintptr_t)addr);
		cr_assert_arr_eq(ours.b, ref.b, 16, "data seg differs at input %d", i);
	}
}

/* The other builders have no mlx5dv counterpart: check them against the
 * big-endian layout of the mlx5dv structs field by field. */
Test(prm, raddr_and_atomic_seg_big_endian)
{
	uint64_t s = 42;
	for (int i = 0; i < 5000; i++) {
		uint64_t raddr = tu_rand64(&s), a = tu_rand64(&s), c = tu_rand64(&s);
		uint32_t rkey = (uint32_t)tu_rand64(&s);
		union {
			struct kn_wqe_raddr_seg k;
			struct mlx5_wqe_raddr_seg m;
		} r;
		memset(&r, 0xa5, sizeof(r));
		kn_set_raddr_seg(&r.k, raddr, rkey);
		cr_assert_eq(be64toh(r.m.raddr), raddr);
		cr_assert_eq(be32toh(r.m.rkey), rkey);
		cr_assert_eq(r.m.reserved, 0);
		union {
			struct kn_wqe_atomic_seg k;
			struct mlx5_wqe_atomic_seg m;
		} at;
		kn_set_atomic_seg(&at.k, a, c);
		cr_assert_eq(be64toh(at.m.swap_add), a);
		cr_assert_eq(be64toh(at.m.compare), c);
	}
}

#else /* !HAVE_MLX5DV */

Test(prm, mlx5dv_header_missing)
{
	cr_skip_test("rdma-core's infiniband/mlx5dv.h is not installed: conformance not checked");
}

#endif

/* Byte order helpers agree with the C library's, whatever rdma-core says. */
Test(prm, byte_order_helpers)
{
	uint64_t s = 5;
	for (int i = 0; i < 10000; i++) {
		uint64_t v = tu_rand64(&s);
		cr_assert_eq(kn_htobe16((uint16_t)v), htobe16((uint16_t)v));
		cr_assert_eq(kn_htobe32((uint32_t)v), htobe32((uint32_t)v));
		cr_assert_eq(kn_htobe64(v), htobe64(v));
		cr_assert_eq(kn_be16toh((uint16_t)v), be16toh((uint16_t)v));
		cr_assert_eq(kn_be32toh((uint32_t)v), be32toh((uint32_t)v));
		cr_assert_eq(kn_be64toh(v), be64toh(v));
	}
}

/* The device-API preparers put every field where the PRM says. */
Test(prm, device_preparers_layout)
{
	kn_qp q;
	memset(&q, 0, sizeof(q));
	q.qpn = 0x1a2b3c;
	uint8_t w[64];
	tu_fill_random(w, sizeof(w), 3);
	kn_prep_atomic_cs(&q, w, 0x12345, 0x1111222233334444ull, 0x5566, 0x7788990011223344ull,
			  0xabcd, 0x0102030405060708ull, 0x0a0b0c0d0e0f1011ull);
	const struct kn_wqe_ctrl_seg *c = (const void *)w;
	cr_assert_eq(kn_wqe_opcode_of(c), KN_OPCODE_ATOMIC_CS);
	cr_assert_eq(kn_wqe_index_of(c), 0x2345);
	cr_assert_eq(kn_wqe_ds_of(c), 4);
	cr_assert_eq(kn_be32toh(c->qpn_ds) >> 8, 0x1a2b3c);
	cr_assert_eq(c->fm_ce_se, KN_WQE_CTRL_CQ_UPDATE);
	const struct kn_wqe_raddr_seg *r = (const void *)(w + 16);
	cr_assert_eq(kn_be64toh(r->raddr), 0x7788990011223344ull);
	cr_assert_eq(kn_be32toh(r->rkey), 0xabcd);
	const struct kn_wqe_atomic_seg *a = (const void *)(w + 32);
	cr_assert_eq(kn_be64toh(a->swap_add), 0x0a0b0c0d0e0f1011ull);
	cr_assert_eq(kn_be64toh(a->compare), 0x0102030405060708ull);
	const struct kn_wqe_data_seg *d = (const void *)(w + 48);
	cr_assert_eq(kn_be32toh(d->byte_count), 8);
	cr_assert_eq(kn_be32toh(d->lkey), 0x5566);
	cr_assert_eq(kn_be64toh(d->addr), 0x1111222233334444ull);

	uint8_t src[28];
	tu_fill_random(src, sizeof(src), 9);
	for (uint32_t len = 1; len <= KN_MAX_INLINE_WRITE; len++) {
		tu_fill_random(w, sizeof(w), len + 100);
		cr_assert_eq(kn_prep_write_inline(&q, w, 7, src, len, 0x1000, 0x77), 0);
		cr_assert_eq(kn_wqe_ds_of(c), (36 + len + 15) / 16);
		cr_assert_eq(kn_be32toh(*(uint32_t *)(w + 32)), len | KN_INLINE_SEG);
		cr_assert_arr_eq(w + 36, src, len);
	}
	/* zero bytes: no inline segment (rdma-core posts none) */
	cr_assert_eq(kn_prep_write_inline(&q, w, 7, src, 0, 0x1000, 0x77), 0);
	cr_assert_eq(kn_wqe_ds_of(c), 2);
	cr_assert_eq(kn_prep_write_inline(&q, w, 7, src, KN_MAX_INLINE_WRITE + 1, 0x1000, 0x77),
		     -EINVAL);
}

/* The unaligned loads and stores every byte string of kinet uses
 * (descriptors, wire and bootstrap messages): the bytes of the C library's
 * htobe/htole at every alignment, on random values, loads inverting stores,
 * nothing written past the value. */
Test(prm, unaligned_loads_and_stores)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	uint8_t buf[32], ref[8];
	for (int i = 0; i < 4096; i++) {
		uint64_t v = tu_rand64(&s);
		size_t off = (size_t)(i % 9);
		tu_fill_random(buf, sizeof(buf), (uint64_t)i + 1);
		uint16_t v16 = (uint16_t)v;
		uint32_t v32 = (uint32_t)(v >> 16);

		uint16_t b16 = htobe16(v16), l16 = htole16(v16);
		uint32_t b32 = htobe32(v32), l32 = htole32(v32);
		uint64_t b64 = htobe64(v), l64 = htole64(v);
		kn_store_be16(buf + off, v16);
		memcpy(ref, &b16, 2);
		cr_assert_arr_eq(buf + off, ref, 2);
		cr_assert_eq(kn_load_be16(buf + off), v16);
		kn_store_le16(buf + off, v16);
		memcpy(ref, &l16, 2);
		cr_assert_arr_eq(buf + off, ref, 2);
		cr_assert_eq(kn_load_le16(buf + off), v16);
		kn_store_be32(buf + off, v32);
		memcpy(ref, &b32, 4);
		cr_assert_arr_eq(buf + off, ref, 4);
		cr_assert_eq(kn_load_be32(buf + off), v32);
		kn_store_le32(buf + off, v32);
		memcpy(ref, &l32, 4);
		cr_assert_arr_eq(buf + off, ref, 4);
		cr_assert_eq(kn_load_le32(buf + off), v32);
		uint8_t keep[8];
		memcpy(keep, buf + off + 8, 8);
		kn_store_be64(buf + off, v);
		memcpy(ref, &b64, 8);
		cr_assert_arr_eq(buf + off, ref, 8);
		cr_assert_eq(kn_load_be64(buf + off), v);
		kn_store_le64(buf + off, v);
		memcpy(ref, &l64, 8);
		cr_assert_arr_eq(buf + off, ref, 8);
		cr_assert_eq(kn_load_le64(buf + off), v);
		cr_assert_arr_eq(buf + off + 8, keep, 8, "a store wrote past its 8 bytes");
	}
}

/* ---- the WQEs rdma-core's mlx5 provider writes for the same work requests ----
 * A reference written from the provider's rules (post_send): the ctrl
 * segment's bytes 8-11 zeroed, then fm_ce_se; imm only for the immediate
 * opcodes; a remote-address segment for RDMA and atomics; one data segment
 * per SGE of non-zero length (none for zero bytes: a byte count of 0 means
 * 2 GiB to the NIC); an inline segment only for a non-zero inline length;
 * the atomic segment's compare field left as the slot held it for a
 * fetch-add. ref_dc marks the bytes the provider leaves as they were. Every
 * form kinet's builders emit is compared over its ds, on a slot full of
 * leftovers. */
struct ref_wr {
	uint8_t opcode;
	uint64_t laddr, raddr, swap_add, compare;
	uint32_t lkey, rkey, len, imm_be;
	const uint8_t *inl; /* inline data (len bytes), or NULL */
};

static unsigned ref_post(uint8_t *w, uint8_t *dc, const struct ref_wr *r, uint16_t idx,
			 uint32_t qpn)
{
	memset(dc, 0, 64);
	unsigned ds = 1;
	uint8_t *seg = w + 16;
	int rdma = r->opcode == KN_OPCODE_RDMA_WRITE || r->opcode == KN_OPCODE_RDMA_WRITE_IMM ||
		   r->opcode == KN_OPCODE_RDMA_READ;
	int atomic = r->opcode == KN_OPCODE_ATOMIC_CS || r->opcode == KN_OPCODE_ATOMIC_FA;
	if (rdma || atomic) {
		kn_store_be64(seg, r->raddr);
		kn_store_be32(seg + 8, r->rkey);
		kn_store_be32(seg + 12, 0);
		seg += 16;
		ds++;
	}
	if (atomic) {
		kn_store_be64(seg, r->swap_add);
		if (r->opcode == KN_OPCODE_ATOMIC_CS)
			kn_store_be64(seg + 8, r->compare);
		else
			memset(dc + (seg + 8 - w), 1, 8); /* not written for a fetch-add */
		seg += 16;
		ds++;
	}
	if (r->inl) {
		if (r->len) {
			kn_store_be32(seg, r->len | KN_INLINE_SEG);
			memcpy(seg + 4, r->inl, r->len);
			unsigned n = (4 + r->len + 15) / 16;
			memset(dc + (seg + 4 + r->len - w), 1, n * 16 - 4 - r->len); /* padding */
			ds += n;
		}
	} else if (r->opcode != KN_OPCODE_NOP && (r->len || atomic)) {
		kn_store_be32(seg, atomic ? 8 : r->len);
		kn_store_be32(seg + 4, r->lkey);
		kn_store_be64(seg + 8, r->laddr);
		ds++;
	}
	kn_store_be32(w, ((uint32_t)idx << 8) | r->opcode);
	kn_store_be32(w + 4, (qpn << 8) | ds);
	memset(w + 8, 0, 4);
	w[11] = KN_WQE_CTRL_CQ_UPDATE; /* signaled, no fence or solicited event */
	int with_imm = r->opcode == KN_OPCODE_RDMA_WRITE_IMM || r->opcode == KN_OPCODE_SEND_IMM;
	memcpy(w + 12, with_imm ? &r->imm_be : &(uint32_t){0}, 4);
	return ds;
}

static void compare_form(const kn_qp *q, const struct ref_wr *r, uint64_t t, int trial)
{
	uint8_t ours[64], ref[64], dc[64];
	tu_fill_random(ours, 64, 1000 + (uint64_t)trial); /* the slot's leftovers */
	memcpy(ref, ours, 64);
	int rc = 0;
	switch (r->opcode) {
	case KN_OPCODE_NOP: kn_prep_nop(q, ours, t); break;
	case KN_OPCODE_RDMA_WRITE:
		rc = r->inl ? kn_prep_write_inline(q, ours, t, r->inl, r->len, r->raddr, r->rkey)
			    : kn_prep_write(q, ours, t, r->laddr, r->lkey, r->raddr, r->rkey, r->len);
		break;
	case KN_OPCODE_RDMA_WRITE_IMM:
		rc = kn_prep_write_imm(q, ours, t, r->laddr, r->lkey, r->raddr, r->rkey, r->len,
				       kn_be32toh(r->imm_be));
		break;
	case KN_OPCODE_RDMA_READ:
		rc = kn_prep_read(q, ours, t, r->laddr, r->lkey, r->raddr, r->rkey, r->len);
		break;
	case KN_OPCODE_SEND:
	case KN_OPCODE_SEND_IMM:
		rc = kn_prep_send(q, ours, t, r->laddr, r->lkey, r->len,
				  r->opcode == KN_OPCODE_SEND_IMM, kn_be32toh(r->imm_be));
		break;
	case KN_OPCODE_ATOMIC_FA:
		kn_prep_atomic_fa(q, ours, t, r->laddr, r->lkey, r->raddr, r->rkey, r->swap_add);
		break;
	case KN_OPCODE_ATOMIC_CS:
		kn_prep_atomic_cs(q, ours, t, r->laddr, r->lkey, r->raddr, r->rkey, r->compare,
				  r->swap_add);
		break;
	}
	cr_assert_eq(rc, 0);
	unsigned ds = ref_post(ref, dc, r, (uint16_t)t, q->qpn);
	cr_assert_eq(kn_wqe_ds_of((const struct kn_wqe_ctrl_seg *)ours), ds,
		     "opcode 0x%x, %u bytes%s: ds %u, rdma-core %u", r->opcode, r->len,
		     r->inl ? " inline" : "", kn_wqe_ds_of((const struct kn_wqe_ctrl_seg *)ours),
		     ds);
	for (unsigned i = 0; i < ds * 16; i++)
		if (!dc[i])
			cr_assert_eq(ours[i], ref[i],
				     "opcode 0x%x, %u bytes%s: byte %u is 0x%02x, rdma-core 0x%02x",
				     r->opcode, r->len, r->inl ? " inline" : "", i, ours[i], ref[i]);
}

Test(prm, wqe_forms_equal_rdma_core)
{
	kn_qp q;
	memset(&q, 0, sizeof(q));
	q.qpn = 0x00c0de;
	uint64_t s = 77;
	uint8_t inl[KN_MAX_INLINE_WRITE];
	tu_fill_random(inl, sizeof(inl), 5);
	static const uint8_t ops[] = {KN_OPCODE_NOP,       KN_OPCODE_RDMA_WRITE, KN_OPCODE_RDMA_WRITE_IMM,
				      KN_OPCODE_RDMA_READ, KN_OPCODE_SEND,       KN_OPCODE_SEND_IMM,
				      KN_OPCODE_ATOMIC_FA, KN_OPCODE_ATOMIC_CS};
	int trial = 0;
	for (unsigned o = 0; o < sizeof(ops); o++)
		for (int k = 0; k < 200; k++, trial++) {
			struct ref_wr r = {
				.opcode = ops[o],
				.laddr = tu_rand64(&s),
				.raddr = tu_rand64(&s),
				.swap_add = tu_rand64(&s),
				.compare = tu_rand64(&s),
				.lkey = (uint32_t)tu_rand64(&s),
				.rkey = (uint32_t)tu_rand64(&s),
				/* zero bytes, one byte, anything a data segment carries */
				.len = k == 0 ? 0 : k == 1 ? 1 : (uint32_t)tu_rand64(&s) & KN_MAX_LEN,
				.imm_be = (uint32_t)tu_rand64(&s),
			};
			compare_form(&q, &r, tu_rand64(&s), trial);
		}
	for (uint32_t len = 0; len <= KN_MAX_INLINE_WRITE; len++, trial++) {
		struct ref_wr r = {.opcode = KN_OPCODE_RDMA_WRITE, .raddr = tu_rand64(&s),
				   .rkey = (uint32_t)tu_rand64(&s), .len = len, .inl = inl};
		compare_form(&q, &r, tu_rand64(&s), trial);
	}
}

/* A receive WQE as rdma-core's post_recv writes it: one segment per non-zero
 * SGE, then the terminator (lkey MLX5_INVALID_LKEY) filling the stride; zero
 * bytes is the terminator alone. */
Test(prm, receive_wqe_equal_rdma_core)
{
	enum { DEPTH = 4, STRIDE = 32 };
	uint8_t rq[DEPTH * STRIDE], cq[DEPTH * KN_CQE_SIZE];
	uint32_t dbr[2] = {0, 0};
	kn_qp_state st;
	memset(&st, 0, sizeof(st));
	kn_qp q;
	memset(&q, 0, sizeof(q));
	q.rq = rq;
	q.rq_wqe_cnt = DEPTH;
	q.rq_stride = STRIDE;
	q.rcq = cq;
	q.rcq_cqe_cnt = DEPTH;
	q.dbrec = dbr;
	q.st = &st;
	uint8_t buf[1];
	for (uint32_t len = 0; len < 3; len++) {
		tu_fill_random(rq, sizeof(rq), 50 + len);
		kn_ticket_t t;
		cr_assert_eq(kn_recv_post(&q, buf, 0x4242, len, &t), 0);
		const uint8_t *w = rq + (t % DEPTH) * STRIDE;
		unsigned off = 0;
		if (len) {
			cr_assert_eq(kn_load_be32(w), len);
			cr_assert_eq(kn_load_be32(w + 4), 0x4242u);
			cr_assert_eq(kn_load_be64(w + 8), (uint64_t)(uintptr_t)buf);
			off = 16;
		}
		for (; off < STRIDE; off += 16) {
			cr_assert_eq(kn_load_be32(w + off), 0u, "len %u, terminator at %u", len, off);
			cr_assert_eq(kn_load_be32(w + off + 4), KN_INVALID_LKEY);
			cr_assert_eq(kn_load_be64(w + off + 8), 0u);
		}
		st.rq_done = st.rq_resv; /* consumed, as if its CQE came */
	}
}

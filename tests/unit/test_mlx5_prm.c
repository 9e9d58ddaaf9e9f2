/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The PRM command layouts of the DevX path (src/nic/mlx5/ifc.c): every table
 * is well formed, every field round-trips, and the encoders put known values
 * at the byte positions the PRM gives (written here independently of the
 * tables, from the layouts published in the kernel's and rdma-core's
 * mlx5_ifc.h: e.g. create_qp_in.qpc starts at bit 0xc0, qpc.pd is bits
 * 0x28..0x3f of the QP context).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include "../util/testutil.h"
#include "nic/mlx5/ifc.h"

Test(mlx5_prm, opcodes)
{
	cr_assert_eq(KINET_PRM_OP_QUERY_HCA_CAP, 0x100);
	cr_assert_eq(KINET_PRM_OP_CREATE_CQ, 0x400);
	cr_assert_eq(KINET_PRM_OP_DESTROY_CQ, 0x401);
	cr_assert_eq(KINET_PRM_OP_CREATE_QP, 0x500);
	cr_assert_eq(KINET_PRM_OP_DESTROY_QP, 0x501);
	cr_assert_eq(KINET_PRM_OP_RST2INIT_QP, 0x502);
	cr_assert_eq(KINET_PRM_OP_INIT2RTR_QP, 0x503);
	cr_assert_eq(KINET_PRM_OP_RTR2RTS_QP, 0x504);
	cr_assert_eq(KINET_PRM_OP_2ERR_QP, 0x507);
	cr_assert_eq(KINET_PRM_OP_2RST_QP, 0x50a);
	cr_assert_eq(KINET_PRM_OP_ALLOC_PD, 0x800);
	cr_assert_eq(KINET_PRM_OP_ALLOC_UAR, 0x802);
	cr_assert_eq(KINET_PRM_OP_DEALLOC_UAR, 0x803);
	cr_assert_eq(KINET_PRM_OP_CREATE_UMEM, 0xa08);
	cr_assert_eq(KINET_PRM_OP_QUERY_ROCE_ADDRESS, 0x760);
}

/* QUERY_ROCE_ADDRESS at the PRM's byte positions: the index at bytes 8-9 and
 * the port in the low nibble of byte 11 of the input; in the output the
 * address (roce_addr_layout) from byte 16: the GID in 16-31, vlan_valid bit
 * 4 of byte 32, the MAC in 34-39, roce_l3_type the low nibble of byte 42,
 * roce_version byte 43. */
Test(mlx5_prm, query_roce_address_positions)
{
	uint8_t in[16] = {0}, out[48] = {0}, gid[16], mac_hi[2] = {0x02, 0x00};
	cr_assert_eq(kinet_prm_set(&kinet_prm_query_roce_address_in, in, "roce_address_index",
				   0x1234), 0);
	cr_assert_eq(kinet_prm_set(&kinet_prm_query_roce_address_in, in, "vhca_port_num", 1), 0);
	cr_assert_eq(in[8], 0x12);
	cr_assert_eq(in[9], 0x34);
	cr_assert_eq(in[11], 0x01);
	const struct kinet_prm_layout *L = &kinet_prm_query_roce_address_out;
	tu_fill_random(gid, sizeof(gid), 99);
	cr_assert_eq(kinet_prm_set_bytes(L, out, "roce_address.source_l3_address", gid, 16), 0);
	cr_assert_eq(memcmp(out + 16, gid, 16), 0);
	cr_assert_eq(kinet_prm_set(L, out, "roce_address.vlan_valid", 1), 0);
	cr_assert_eq(out[32], 0x10);
	cr_assert_eq(kinet_prm_set(L, out, "roce_address.source_mac_47_32", 0x0200), 0);
	cr_assert_eq(kinet_prm_set(L, out, "roce_address.source_mac_31_0", 0x0a4d0001), 0);
	cr_assert_eq(memcmp(out + 34, mac_hi, 2), 0);
	cr_assert(out[36] == 0x0a && out[37] == 0x4d && out[38] == 0x00 && out[39] == 0x01);
	cr_assert_eq(kinet_prm_set(L, out, "roce_address.roce_l3_type", KINET_PRM_ROCE_L3_IPV6), 0);
	cr_assert_eq(kinet_prm_set(L, out, "roce_address.roce_version", KINET_PRM_ROCE_VERSION_2),
		     0);
	cr_assert_eq(out[42], 0x01);
	cr_assert_eq(out[43], 0x02);
}

Test(mlx5_prm, layouts_are_well_formed)
{
	char why[200];
	int n = 0;
	for (const struct kinet_prm_layout *const *l = kinet_prm_layouts; *l; l++, n++)
		cr_assert_eq(kinet_prm_check(*l, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(n, 24);
	/* sizes of the contexts and commands (bytes) */
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_ads), 44u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_qpc), 232u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_cqc), 64u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_create_qp_in), 272u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_create_cq_in), 272u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_modify_qp_in), 272u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_query_qp_out), 272u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_qpn_in), 16u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_create_qp_out), 16u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_query_hca_cap_in), 16u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_query_hca_cap_out), 16u + 4096u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_roce_addr), 32u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_query_roce_address_in), 16u);
	cr_assert_eq(kinet_prm_bytes(&kinet_prm_query_roce_address_out), 48u);
	/* the checker finds a broken table */
	static const struct kinet_prm_field bad_f[] = {
		{"a", 0, 8, NULL},
		{"b", 4, 8, NULL},
	};
	static const struct kinet_prm_layout bad = {"bad", 32, bad_f, 2};
	cr_assert_eq(kinet_prm_check(&bad, why, sizeof(why)), -EINVAL);
	cr_assert(strstr(why, "overlap"), "%s", why);
	static const struct kinet_prm_field cross_f[] = {{"c", 28, 8, NULL}};
	static const struct kinet_prm_layout cross = {"cross", 64, cross_f, 1};
	cr_assert_eq(kinet_prm_check(&cross, why, sizeof(why)), -EINVAL);
}

/* Every field of every layout: a random value written reads back, and
 * writing all of them leaves each one intact (no field clobbers another). */
static void roundtrip(const struct kinet_prm_layout *top, const struct kinet_prm_layout *l,
		      const char *prefix, uint8_t *buf, uint64_t *st, int pass, uint64_t *vals,
		      int *k)
{
	for (int i = 0; i < l->nfields; i++) {
		const struct kinet_prm_field *f = &l->fields[i];
		char name[180];
		snprintf(name, sizeof(name), "%.120s%.50s", prefix, f->name);
		if (f->sub) {
			char p[200];
			snprintf(p, sizeof(p), "%.180s.", name);
			roundtrip(top, f->sub, p, buf, st, pass, vals, k);
			continue;
		}
		if (f->width > 64) {
			uint8_t b[64], c[64];
			tu_fill_random(b, f->width / 8, *st += 7);
			if (pass == 0)
				cr_assert_eq(kinet_prm_set_bytes(top, buf, name, b, f->width / 8), 0);
			cr_assert_eq(kinet_prm_get_bytes(top, buf, name, c, f->width / 8), 0);
			cr_assert_eq(memcmp(b, c, f->width / 8), 0, "%s", name);
			continue;
		}
		uint64_t mask = f->width == 64 ? ~0ull : (1ull << f->width) - 1;
		uint64_t v = tu_rand64(st) & mask;
		if (pass == 0) {
			if (f->width > 1 && v == 0)
				v = 1;
			vals[*k] = v;
			cr_assert_eq(kinet_prm_set(top, buf, name, v), 0, "%s", name);
		}
		cr_assert_eq(kinet_prm_get(top, buf, name, &v), 0);
		cr_assert_eq(v, vals[*k], "%s: wrote 0x%llx, read 0x%llx", name,
			     (unsigned long long)vals[*k], (unsigned long long)v);
		(*k)++;
	}
}

Test(mlx5_prm, every_field_round_trips)
{
	for (const struct kinet_prm_layout *const *l = kinet_prm_layouts; *l; l++) {
		uint8_t buf[512];
		uint64_t vals[256];
		memset(buf, 0, sizeof(buf));
		for (int pass = 0; pass < 2; pass++) {
			uint64_t st = 42;
			int k = 0;
			roundtrip(*l, *l, "", buf, &st, pass, vals, &k);
		}
	}
}

Test(mlx5_prm, names_widths_and_errors)
{
	uint8_t buf[272];
	memset(buf, 0, sizeof(buf));
	uint32_t off, w;
	cr_assert_eq(kinet_prm_find(&kinet_prm_create_qp_in, "qpc.pd", &off, &w), 0);
	cr_assert_eq(off, 0xc0u + 0x28u);
	cr_assert_eq(w, 24u);
	cr_assert_eq(kinet_prm_find(&kinet_prm_create_qp_in, "qpc.primary_address_path.rlid",
				    &off, &w), 0);
	cr_assert_eq(off, 0xc0u + 0xc0u + 0x30u);
	cr_assert_eq(kinet_prm_find(&kinet_prm_create_qp_in, "qpc", &off, &w), 0);
	cr_assert_eq(w, 0x740u);
	cr_assert_eq(kinet_prm_set(&kinet_prm_create_qp_in, buf, "qpc.nope", 1), -ENOENT);
	cr_assert_eq(kinet_prm_set(&kinet_prm_create_qp_in, buf, "qpc.pd.x", 1), -ENOENT);
	cr_assert_eq(kinet_prm_set(&kinet_prm_create_qp_in, buf, "qpc.pd", 1u << 24), -ERANGE);
	uint8_t zero[272] = {0};
	cr_assert_eq(memcmp(buf, zero, sizeof(buf)), 0, "a refused write changed the buffer");
	uint64_t v;
	cr_assert_eq(kinet_prm_get(&kinet_prm_modify_qp_in, buf,
				   "qpc.primary_address_path.rgid_rip", &v), -EINVAL);
	uint8_t gid[16];
	cr_assert_eq(kinet_prm_set_bytes(&kinet_prm_modify_qp_in, buf, "qpc.log_sq_size", gid, 1),
		     -EINVAL, "not byte aligned");
	cr_assert_eq(kinet_prm_set_bytes(&kinet_prm_modify_qp_in, buf, "qpc.pd", gid, 4), -EINVAL,
		     "wrong length");
}

static uint32_t be24(const uint8_t *p)
{
	return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}

Test(mlx5_prm, create_qp_known_bytes)
{
	struct kinet_prm_qp_params p = {
		.pd = 0xabcdef,
		.uar_page = 0x123456,
		.log_sq_size = 8,
		.cqn_snd = 0x0a0b0c,
		.wq_umem_id = 0x11223344,
		.wq_umem_offset = 0x0102030405060708ull,
		.dbr_umem_id = 0x55667788,
		.dbr_offset = 0x40,
		.user_index = 0x777,
	};
	uint8_t in[272];
	cr_assert_eq(kinet_prm_build_create_qp(in, sizeof(in) - 1, &p), -EINVAL);
	cr_assert_eq(kinet_prm_build_create_qp(in, sizeof(in), &p), 0);
	cr_assert_eq(in[0], 0x05);
	cr_assert_eq(in[1], 0x00);
	/* qpc at byte 24: st (RC) 0 at byte 25, pm_state (bits 0x13-0x14) = 3 */
	cr_assert_eq(in[25], 0x00);
	cr_assert_eq(in[26], 0x18);
	cr_assert_eq(be24(in + 29), 0xabcdefu, "qpc.pd");
	cr_assert_eq(in[28], 0x00);
	cr_assert_eq(in[34], 0x40, "qpc.log_sq_size = 8 at bits 0x51-0x54");
	cr_assert_eq(be24(in + 37), 0x123456u, "qpc.uar_page");
	cr_assert_eq(be24(in + 41), 0x777u, "qpc.user_index");
	cr_assert_eq(be24(in + 149), 0x0a0b0cu, "qpc.cqn_snd");
	cr_assert_eq(be24(in + 181), 0x0a0b0cu, "qpc.cqn_rcv (no RQ: the send CQ)");
	cr_assert_eq(in[196] & 0x07, 0x03, "qpc.rq_type zero-size RQ");
	cr_assert_eq(kn_load_be64(in + 184), 0x40u, "qpc.dbr_addr");
	cr_assert_eq(in[232], 0x10, "qpc.dbr_umem_valid");
	cr_assert_eq(kn_load_be32(in + 252), 0x55667788u, "qpc.dbr_umem_id");
	cr_assert_eq(kn_load_be64(in + 256), 0x0102030405060708ull, "wq_umem_offset");
	cr_assert_eq(kn_load_be32(in + 264), 0x11223344u, "wq_umem_id");
	cr_assert_eq(in[268], 0x80, "wq_umem_valid");
	/* with a receive queue */
	p.has_rq = 1;
	p.log_rq_size = 6;
	p.log_rq_stride = 0;
	p.cqn_rcv = 0x0d0e0f;
	cr_assert_eq(kinet_prm_build_create_qp(in, sizeof(in), &p), 0);
	cr_assert_eq(be24(in + 181), 0x0d0e0fu);
	cr_assert_eq(in[196] & 0x07, 0x00);
	/* log_rq_size is bits 0x49-0x4c of the qpc: byte 33, bits 1-4 */
	cr_assert_eq(in[33], 6 << 3);
}

Test(mlx5_prm, create_cq_known_bytes)
{
	struct kinet_prm_cq_params p = {
		.log_cq_size = 8,
		.uar_page = 0x00beef,
		.eqn = 7,
		.cq_umem_id = 0xcafe0001,
		.cq_umem_offset = 0x1000,
		.dbr_umem_id = 0xcafe0002,
		.dbr_offset = 0x80,
	};
	uint8_t in[272];
	cr_assert_eq(kinet_prm_build_create_cq(in, sizeof(in), &p), 0);
	cr_assert_eq(in[0], 0x04);
	cr_assert_eq(in[1], 0x00);
	/* cq_context at byte 16 */
	cr_assert_eq(in[16], 0x02, "cqc.dbr_umem_valid (bit 6), cqe_sz 64 = 0");
	cr_assert_eq(in[17], 0x00, "cqc.oi off");
	cr_assert_eq(kn_load_be32(in + 20), 0xcafe0002u, "cqc.dbr_umem_id");
	cr_assert_eq(in[28], 0x08, "cqc.log_cq_size = 8 at bits 0x63-0x67");
	cr_assert_eq(be24(in + 29), 0x00beefu, "cqc.uar_page");
	cr_assert_eq(kn_load_be32(in + 36), 7u, "cqc.c_eqn");
	cr_assert_eq(kn_load_be64(in + 72), 0x80u, "cqc.dbr_addr");
	cr_assert_eq(kn_load_be64(in + 80), 0x1000u, "cq_umem_offset");
	cr_assert_eq(kn_load_be32(in + 88), 0xcafe0001u, "cq_umem_id");
	cr_assert_eq(in[92], 0x80, "cq_umem_valid");
	p.overrun_ignore = 1;
	cr_assert_eq(kinet_prm_build_create_cq(in, sizeof(in), &p), 0);
	cr_assert_eq(in[17], 0x02, "cqc.oi is bit 0xe");
}

Test(mlx5_prm, modify_qp_known_bytes)
{
	struct kinet_prm_qp_path p = {
		.port = 1,
		.rre = 1,
		.rwe = 1,
		.rae = 1,
		.mtu = 5,
		.log_msg_max = 30,
		.remote_qpn = 0x00abcd,
		.next_rcv_psn = 0x123456,
		.log_rra_max = 4,
		.min_rnr_nak = 12,
		.grh = 1,
		.src_addr_index = 3,
		.hop_limit = 64,
		.udp_sport = 0xc000,
		.rmac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55},
		.next_send_psn = 0x654321,
		.ack_timeout = 14,
		.retry_count = 7,
		.rnr_retry = 7,
		.log_sra_max = 4,
	};
	for (int i = 0; i < 16; i++)
		p.rgid[i] = (uint8_t)(0xf0 + i);
	uint8_t in[272];
	cr_assert_eq(kinet_prm_build_modify_qp(in, sizeof(in), 0x999, 1, &p), -EINVAL);
	/* RST2INIT: access, atomic mode, port */
	cr_assert_eq(kinet_prm_build_modify_qp(in, sizeof(in), KINET_PRM_OP_RST2INIT_QP, 0x1234,
					       &p), 0);
	cr_assert_eq(in[0], 0x05);
	cr_assert_eq(in[1], 0x02);
	cr_assert_eq(be24(in + 9), 0x1234u, "qpn");
	cr_assert_eq(in[170], 0xe0, "qpc.rre, rwe, rae (bits 0x490-0x492)");
	cr_assert_eq(in[169] & 0x0f, 0x01, "qpc.atomic_mode IB");
	cr_assert_eq(in[85], 1, "primary_address_path.vhca_port_num");
	/* INIT2RTR */
	cr_assert_eq(kinet_prm_build_modify_qp(in, sizeof(in), KINET_PRM_OP_INIT2RTR_QP, 0x1234,
					       &p), 0);
	cr_assert_eq(in[1], 0x03);
	cr_assert_eq(in[32], (5 << 5) | 30, "qpc.mtu (3 bits) and log_msg_max (5 bits)");
	cr_assert_eq(be24(in + 45), 0x00abcdu, "qpc.remote_qpn");
	cr_assert_eq(be24(in + 173), 0x123456u, "qpc.next_rcv_psn");
	cr_assert_eq(in[172] & 0x1f, 12, "qpc.min_rnr_nak");
	cr_assert_eq(in[169] >> 5, 4, "qpc.log_rra_max (bits 0x488-0x48a)");
	/* primary address path at byte 48 */
	cr_assert_eq(in[53] & 0x80, 0x80, "ads.grh");
	cr_assert_eq(in[57], 3, "ads.src_addr_index");
	cr_assert_eq(in[59], 64, "ads.hop_limit");
	for (int i = 0; i < 16; i++)
		cr_assert_eq(in[64 + i], 0xf0 + i, "ads.rgid_rip byte %d", i);
	cr_assert_eq(in[82], 0xc0);
	cr_assert_eq(in[83], 0x00, "ads.udp_sport");
	cr_assert_eq(in[85], 1);
	cr_assert_eq(in[86], 0x02);
	cr_assert_eq(in[87], 0x11, "ads.rmac_47_32");
	cr_assert_eq(kn_load_be32(in + 88), 0x22334455u, "ads.rmac_31_0");
	/* RTR2RTS */
	cr_assert_eq(kinet_prm_build_modify_qp(in, sizeof(in), KINET_PRM_OP_RTR2RTS_QP, 0x1234,
					       &p), 0);
	cr_assert_eq(in[1], 0x04);
	cr_assert_eq(be24(in + 145), 0x654321u, "qpc.next_send_psn");
	cr_assert_eq(in[137], (4 << 5) | 7, "qpc.log_sra_max and retry_count");
	cr_assert_eq(in[138] >> 5, 7, "qpc.rnr_retry");
	cr_assert_eq(in[56] >> 3, 14, "ads.ack_timeout");
	/* the decoder reads the same values back */
	uint64_t v;
	cr_assert_eq(kinet_prm_get(&kinet_prm_modify_qp_in, in, "qpc.next_send_psn", &v), 0);
	cr_assert_eq(v, 0x654321u);
}

Test(mlx5_prm, small_commands_and_outputs)
{
	uint8_t in[16];
	cr_assert_eq(kinet_prm_build_qpn_cmd(in, sizeof(in), KINET_PRM_OP_2ERR_QP, 0xfedcba), 0);
	cr_assert_eq(in[0], 0x05);
	cr_assert_eq(in[1], 0x07);
	cr_assert_eq(be24(in + 9), 0xfedcbau);
	cr_assert_eq(kinet_prm_build_qpn_cmd(in, sizeof(in), KINET_PRM_OP_2ERR_QP, 1u << 24),
		     -ERANGE);
	uint8_t out[16] = {0x03, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0, 0x0a, 0x0b, 0x0c};
	uint32_t status, synd;
	kinet_prm_out_status(out, &status, &synd);
	cr_assert_eq(status, 3u);
	cr_assert_eq(synd, 0x12345678u);
	uint64_t v;
	cr_assert_eq(kinet_prm_get(&kinet_prm_create_qp_out, out, "qpn", &v), 0);
	cr_assert_eq(v, 0x0a0b0cu);
	cr_assert_eq(kinet_prm_get(&kinet_prm_create_cq_out, out, "cqn", &v), 0);
	cr_assert_eq(v, 0x0a0b0cu);
	cr_assert_eq(kinet_prm_get(&kinet_prm_alloc_uar_out, out, "uar", &v), 0);
	cr_assert_eq(v, 0x0a0b0cu);
}

/* The capability fields at the bit positions of the kernel's mlx5_ifc.h
 * (cmd_hca_cap, roce_cap, qpc.ts_format), in the output of QUERY_HCA_CAP. */
static void one_bitfield(const struct kinet_prm_layout *l, const char *name, uint32_t abs_bit,
			 uint32_t width)
{
	size_t n = kinet_prm_bytes(l);
	uint8_t *b = calloc(1, n);
	cr_assert_eq(kinet_prm_set(l, b, name, (1ull << width) - 1), 0, "%s", name);
	for (uint32_t bit = 0; bit < n * 8; bit++) {
		int set = (b[bit / 8] >> (7 - bit % 8)) & 1;
		cr_assert_eq(set, bit >= abs_bit && bit < abs_bit + width, "%s: bit 0x%x", name, bit);
	}
	free(b);
}

Test(mlx5_prm, capabilities_known_bits)
{
	const struct kinet_prm_layout *o = &kinet_prm_query_hca_cap_out;
	one_bitfield(o, "capability.log_max_qp_sz", 0x80 + 0x88, 8);
	one_bitfield(o, "capability.log_max_cq_sz", 0x80 + 0xc8, 8);
	one_bitfield(o, "capability.log_max_msg", 0x80 + 0x1c3, 5);
	one_bitfield(o, "capability.port_type", 0x80 + 0x1b6, 2);
	one_bitfield(o, "capability.num_ports", 0x80 + 0x1b8, 8);
	one_bitfield(o, "capability.cqe_version", 0x80 + 0x1fc, 4);
	one_bitfield(o, "capability.cq_oi", 0x80 + 0x220, 1);
	one_bitfield(o, "capability.rc", 0x80 + 0x23f, 1);
	one_bitfield(o, "capability.bf", 0x80 + 0x260, 1);
	one_bitfield(o, "capability.log_bf_reg_size", 0x80 + 0x26b, 5);
	one_bitfield(o, "capability.sq_ts_format", 0x80 + 0x440, 2);
	one_bitfield(o, "capability.rq_ts_format", 0x80 + 0x442, 2);
	one_bitfield(&kinet_prm_query_roce_cap_out, "capability.qp_ts_format", 0x80 + 0x1e, 2);
	one_bitfield(&kinet_prm_create_qp_in, "qpc.ts_format", 0xc0 + 0x58, 2);
	/* the atomic capabilities */
	const struct kinet_prm_layout *a = &kinet_prm_query_atomic_cap_out;
	one_bitfield(a, "capability.atomic_req_8B_endianness_mode", 0x80 + 0x40, 2);
	one_bitfield(a, "capability.supported_atomic_req_8B_endianness_mode_1", 0x80 + 0x46, 1);
	one_bitfield(a, "capability.atomic_operations", 0x80 + 0x90, 16);
	one_bitfield(a, "capability.atomic_size_qp", 0x80 + 0xb0, 16);
	one_bitfield(a, "capability.atomic_size_dc", 0x80 + 0xd0, 16);
	/* QUERY_QP's output: the QP context at 0xc0, as in the modify commands */
	one_bitfield(&kinet_prm_query_qp_out, "qpc.state", 0xc0, 4);
	one_bitfield(&kinet_prm_query_qp_out, "qpc.remote_qpn", 0xc0 + 0xa8, 24);
	one_bitfield(&kinet_prm_query_qp_out, "qpc.next_send_psn", 0xc0 + 0x3c8, 24);
	/* QUERY_HCA_CAP input: opcode 0x100, op_mod = type << 1 | current */
	uint8_t in[16];
	cr_assert_eq(kinet_prm_build_query_hca_cap(in, sizeof(in), KINET_PRM_CAP_ROCE, 1), 0);
	cr_assert_eq(in[0], 0x01);
	cr_assert_eq(in[1], 0x00);
	cr_assert_eq(in[6], 0x00);
	cr_assert_eq(in[7], 0x09);
	/* the timestamp format a device's capability calls for */
	cr_assert_eq(kinet_prm_ts_format_for(KINET_PRM_TS_CAP_REAL_TIME), KINET_PRM_TS_REAL_TIME);
	cr_assert_eq(kinet_prm_ts_format_for(KINET_PRM_TS_CAP_FREE_RUNNING),
		     KINET_PRM_TS_FREE_RUNNING);
	cr_assert_eq(kinet_prm_ts_format_for(KINET_PRM_TS_CAP_BOTH), KINET_PRM_TS_DEFAULT);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* PRM command layouts as field tables, and the encoders they drive (ifc.h). */
#include <stdio.h>
#include <string.h>
#include "core/driver.h"
#include "nic/mlx5/ifc.h"

#define F(n, o, w) {n, o, w, NULL}
#define S(n, o, l) {n, o, 0, &l}
#define LAYOUT(var, nm, bits_, tab)                                                       \
	const struct kinet_prm_layout var = {nm, bits_, tab,                              \
					     (int)(sizeof(tab) / sizeof(tab[0]))}

/* The input header every command starts with, and the output's. */
#define IN_HDR F("opcode", 0x00, 16), F("uid", 0x10, 16), F("op_mod", 0x30, 16)
#define OUT_HDR F("status", 0x00, 8), F("syndrome", 0x20, 32)

/* ---- address path (ads) ---- */
static const struct kinet_prm_field ads_f[] = {
	F("fl", 0x00, 1),
	F("free_ar", 0x01, 1),
	F("pkey_index", 0x10, 16),
	F("grh", 0x28, 1),
	F("mlid", 0x29, 7),
	F("rlid", 0x30, 16),
	F("ack_timeout", 0x40, 5),
	F("src_addr_index", 0x48, 8),
	F("stat_rate", 0x54, 4),
	F("hop_limit", 0x58, 8),
	F("tclass", 0x64, 8),
	F("flow_label", 0x6c, 20),
	F("rgid_rip", 0x80, 128),
	F("f_dscp", 0x104, 1),
	F("f_ecn", 0x105, 1),
	F("f_eth_prio", 0x107, 1),
	F("ecn", 0x108, 2),
	F("dscp", 0x10a, 6),
	F("udp_sport", 0x110, 16),
	F("dei_cfi", 0x120, 1),
	F("eth_prio", 0x121, 3),
	F("sl", 0x124, 4),
	F("vhca_port_num", 0x128, 8),
	F("rmac_47_32", 0x130, 16),
	F("rmac_31_0", 0x140, 32),
};
LAYOUT(kinet_prm_ads, "ads", 0x160, ads_f);

/* ---- QP context ---- */
static const struct kinet_prm_field qpc_f[] = {
	F("state", 0x00, 4),
	F("lag_tx_port_affinity", 0x04, 4),
	F("st", 0x08, 8),
	F("pm_state", 0x13, 2),
	F("req_e2e_credit_mode", 0x16, 2),
	F("offload_type", 0x18, 4),
	F("end_padding_mode", 0x1c, 2),
	F("wq_signature", 0x20, 1),
	F("block_lb_mc", 0x21, 1),
	F("atomic_like_write_en", 0x22, 1),
	F("latency_sensitive", 0x23, 1),
	F("drain_sigerr", 0x25, 1),
	F("pd", 0x28, 24),
	F("mtu", 0x40, 3),
	F("log_msg_max", 0x43, 5),
	F("log_rq_size", 0x49, 4),
	F("log_rq_stride", 0x4d, 3),
	F("no_sq", 0x50, 1),
	F("log_sq_size", 0x51, 4),
	F("ts_format", 0x58, 2),
	F("rlky", 0x5b, 1),
	F("ulp_stateless_offload_mode", 0x5c, 4),
	F("counter_set_id", 0x60, 8),
	F("uar_page", 0x68, 24),
	F("user_index", 0x88, 24),
	F("log_page_size", 0xa3, 5),
	F("remote_qpn", 0xa8, 24),
	S("primary_address_path", 0xc0, kinet_prm_ads),
	S("secondary_address_path", 0x220, kinet_prm_ads),
	F("log_ack_req_freq", 0x380, 4),
	F("log_sra_max", 0x388, 3),
	F("retry_count", 0x38d, 3),
	F("rnr_retry", 0x390, 3),
	F("fre", 0x394, 1),
	F("cur_rnr_retry", 0x395, 3),
	F("cur_retry_count", 0x398, 3),
	F("next_send_psn", 0x3c8, 24),
	F("cqn_snd", 0x3e8, 24),
	F("deth_sqpn", 0x408, 24),
	F("last_acked_psn", 0x448, 24),
	F("ssn", 0x468, 24),
	F("log_rra_max", 0x488, 3),
	F("atomic_mode", 0x48c, 4),
	F("rre", 0x490, 1),
	F("rwe", 0x491, 1),
	F("rae", 0x492, 1),
	F("page_offset", 0x494, 6),
	F("cd_slave_receive", 0x49d, 1),
	F("cd_slave_send", 0x49e, 1),
	F("cd_master", 0x49f, 1),
	F("min_rnr_nak", 0x4a3, 5),
	F("next_rcv_psn", 0x4a8, 24),
	F("xrcd", 0x4c8, 24),
	F("cqn_rcv", 0x4e8, 24),
	F("dbr_addr", 0x500, 64),
	F("q_key", 0x540, 32),
	F("rq_type", 0x565, 3),
	F("srqn_rmpn_xrqn", 0x568, 24),
	F("rmsn", 0x588, 24),
	F("hw_sq_wqebb_counter", 0x5a0, 16),
	F("sw_sq_wqebb_counter", 0x5b0, 16),
	F("hw_rq_counter", 0x5c0, 32),
	F("sw_rq_counter", 0x5e0, 32),
	F("cgs", 0x62f, 1),
	F("cs_req", 0x630, 8),
	F("cs_res", 0x638, 8),
	F("dc_access_key", 0x640, 64),
	F("dbr_umem_valid", 0x683, 1),
	F("dbr_umem_id", 0x720, 32),
};
LAYOUT(kinet_prm_qpc, "qpc", 0x740, qpc_f);

/* ---- CQ context ---- */
static const struct kinet_prm_field cqc_f[] = {
	F("status", 0x00, 4),
	F("as_notify", 0x04, 1),
	F("dbr_umem_valid", 0x06, 1),
	F("cqe_sz", 0x08, 3),
	F("cc", 0x0b, 1),
	F("scqe_break_moderation_en", 0x0d, 1),
	F("oi", 0x0e, 1),
	F("cq_period_mode", 0x0f, 2),
	F("cqe_comp_en", 0x11, 1),
	F("mini_cqe_res_format", 0x12, 2),
	F("st", 0x14, 4),
	F("dbr_umem_id", 0x20, 32),
	F("page_offset", 0x54, 6),
	F("cq_timestamp_format", 0x5e, 2),
	F("log_cq_size", 0x63, 5),
	F("uar_page", 0x68, 24),
	F("cq_period", 0x84, 12),
	F("cq_max_count", 0x90, 16),
	F("c_eqn", 0xa0, 32), /* c_eqn_or_apu_element; older layouts: 8 low bits */
	F("log_page_size", 0xc3, 5),
	F("last_notified_index", 0x108, 24),
	F("last_solicit_index", 0x128, 24),
	F("consumer_counter", 0x148, 24),
	F("producer_counter", 0x168, 24),
	F("dbr_addr", 0x1c0, 64),
};
LAYOUT(kinet_prm_cqc, "cqc", 0x200, cqc_f);

/* ---- commands ---- */
static const struct kinet_prm_field cmd_out_f[] = {
	OUT_HDR,
};
LAYOUT(kinet_prm_cmd_out, "cmd_out", 0x40, cmd_out_f);

static const struct kinet_prm_field create_cq_in_f[] = {
	IN_HDR,
	S("cq_context", 0x80, kinet_prm_cqc),
	F("cq_umem_offset", 0x280, 64),
	F("cq_umem_id", 0x2c0, 32),
	F("cq_umem_valid", 0x2e0, 1),
};
LAYOUT(kinet_prm_create_cq_in, "create_cq_in", 0x880, create_cq_in_f);

static const struct kinet_prm_field create_cq_out_f[] = {
	OUT_HDR,
	F("cqn", 0x48, 24),
};
LAYOUT(kinet_prm_create_cq_out, "create_cq_out", 0x80, create_cq_out_f);

static const struct kinet_prm_field destroy_cq_in_f[] = {
	IN_HDR,
	F("cqn", 0x48, 24),
};
LAYOUT(kinet_prm_destroy_cq_in, "destroy_cq_in", 0x80, destroy_cq_in_f);

static const struct kinet_prm_field create_qp_in_f[] = {
	IN_HDR,
	F("input_qpn", 0x48, 24),
	F("opt_param_mask", 0x80, 32),
	F("ece", 0xa0, 32),
	S("qpc", 0xc0, kinet_prm_qpc),
	F("wq_umem_offset", 0x800, 64),
	F("wq_umem_id", 0x840, 32),
	F("wq_umem_valid", 0x860, 1),
};
LAYOUT(kinet_prm_create_qp_in, "create_qp_in", 0x880, create_qp_in_f);

static const struct kinet_prm_field create_qp_out_f[] = {
	OUT_HDR,
	F("qpn", 0x48, 24),
};
LAYOUT(kinet_prm_create_qp_out, "create_qp_out", 0x80, create_qp_out_f);

static const struct kinet_prm_field modify_qp_in_f[] = {
	IN_HDR,
	F("qpn", 0x48, 24),
	F("opt_param_mask", 0x80, 32),
	F("ece", 0xa0, 32),
	S("qpc", 0xc0, kinet_prm_qpc),
};
LAYOUT(kinet_prm_modify_qp_in, "modify_qp_in", 0x880, modify_qp_in_f);

/* QUERY_QP output: the QP context as the device holds it. */
static const struct kinet_prm_field query_qp_out_f[] = {
	OUT_HDR,
	F("opt_param_mask", 0x80, 32),
	F("ece", 0xa0, 32),
	S("qpc", 0xc0, kinet_prm_qpc),
};
LAYOUT(kinet_prm_query_qp_out, "query_qp_out", 0x880, query_qp_out_f);

static const struct kinet_prm_field qpn_in_f[] = {
	IN_HDR,
	F("qpn", 0x48, 24),
};
LAYOUT(kinet_prm_qpn_in, "qpn_in", 0x80, qpn_in_f);

static const struct kinet_prm_field alloc_uar_in_f[] = {IN_HDR};
LAYOUT(kinet_prm_alloc_uar_in, "alloc_uar_in", 0x80, alloc_uar_in_f);

static const struct kinet_prm_field alloc_uar_out_f[] = {
	OUT_HDR,
	F("uar", 0x48, 24),
};
LAYOUT(kinet_prm_alloc_uar_out, "alloc_uar_out", 0x80, alloc_uar_out_f);

/* ---- device capabilities (QUERY_HCA_CAP) ---- */
/* The general device capabilities (cmd_hca_cap): the fields kinet reads. */
static const struct kinet_prm_field hca_cap_f[] = {
	F("log_max_srq_sz", 0x80, 8),
	F("log_max_qp_sz", 0x88, 8),
	F("log_max_srq", 0xab, 5),
	F("log_max_cq_sz", 0xc8, 8),
	F("port_type", 0x1b6, 2), /* 0 InfiniBand, 1 Ethernet (RoCE) */
	F("num_ports", 0x1b8, 8),
	F("log_max_msg", 0x1c3, 5),
	F("cqe_version", 0x1fc, 4),
	F("cq_oi", 0x220, 1),
	F("rc", 0x23f, 1),
	F("bf", 0x260, 1),
	F("log_bf_reg_size", 0x26b, 5),
	F("max_wqe_sz_sq", 0x290, 16),
	F("max_wqe_sz_rq", 0x2b0, 16),
	F("sq_ts_format", 0x440, 2),
	F("rq_ts_format", 0x442, 2),
};
LAYOUT(kinet_prm_hca_cap, "cmd_hca_cap", 0x800, hca_cap_f);

/* The RoCE capabilities (roce_cap): timestamp format of RC QPs on RoCE, the
 * versions and address families, UDP ports, the GID table's size. */
static const struct kinet_prm_field roce_cap_f[] = {
	F("qp_ts_format", 0x1e, 2),
	F("l3_type", 0x8c, 4),                  /* bits: 1 << 1 IPv4, 1 << 2 IPv6 */
	F("roce_version", 0x98, 8),             /* bits: 1 << 0 v1, 1 << 2 v2 */
	F("r_roce_dest_udp_port", 0xb0, 16),
	F("r_roce_max_src_udp_port", 0xc0, 16),
	F("r_roce_min_src_udp_port", 0xd0, 16),
	F("roce_address_table_size", 0xf0, 16), /* GID table entries */
};
LAYOUT(kinet_prm_roce_cap, "roce_cap", 0x800, roce_cap_f);

/* The atomic capabilities (atomic_caps): operations, sizes, endianness. */
static const struct kinet_prm_field atomic_cap_f[] = {
	F("atomic_req_8B_endianness_mode", 0x40, 2), /* 1: host byte order */
	F("supported_atomic_req_8B_endianness_mode_1", 0x46, 1),
	F("atomic_operations", 0x90, 16), /* 1 CAS, 2 FA, 4 masked CAS, 8 masked FA */
	F("atomic_size_qp", 0xb0, 16),    /* bit n: 2^n bytes */
	F("atomic_size_dc", 0xd0, 16),
};
LAYOUT(kinet_prm_atomic_cap, "atomic_caps", 0x800, atomic_cap_f);

static const struct kinet_prm_field query_hca_cap_in_f[] = {
	IN_HDR,
	F("other_function", 0x40, 1),
	F("function_id", 0x50, 16),
};
LAYOUT(kinet_prm_query_hca_cap_in, "query_hca_cap_in", 0x80, query_hca_cap_in_f);

/* The output: a header, then the capability block asked for (a union of
 * 0x8000 bits); read with kinet_prm_hca_cap or kinet_prm_roce_cap at
 * KINET_PRM_CAP_OFFSET bits. */
static const struct kinet_prm_field query_hca_cap_out_f[] = {
	OUT_HDR,
	S("capability", 0x80, kinet_prm_hca_cap),
};
LAYOUT(kinet_prm_query_hca_cap_out, "query_hca_cap_out", 0x8080, query_hca_cap_out_f);

static const struct kinet_prm_field query_roce_cap_out_f[] = {
	OUT_HDR,
	S("capability", 0x80, kinet_prm_roce_cap),
};
LAYOUT(kinet_prm_query_roce_cap_out, "query_roce_cap_out", 0x8080, query_roce_cap_out_f);

static const struct kinet_prm_field query_atomic_cap_out_f[] = {
	OUT_HDR,
	S("capability", 0x80, kinet_prm_atomic_cap),
};
LAYOUT(kinet_prm_query_atomic_cap_out, "query_atomic_cap_out", 0x8080, query_atomic_cap_out_f);

/* A RoCE address (roce_addr_layout): a GID table entry as the NIC holds it. */
static const struct kinet_prm_field roce_addr_f[] = {
	F("source_l3_address", 0x00, 128),
	F("vlan_valid", 0x83, 1),
	F("vlan_id", 0x84, 12),
	F("source_mac_47_32", 0x90, 16),
	F("source_mac_31_0", 0xa0, 32),
	F("roce_l3_type", 0xd4, 4), /* KINET_PRM_ROCE_L3_* */
	F("roce_version", 0xd8, 8), /* KINET_PRM_ROCE_VERSION_* */
};
LAYOUT(kinet_prm_roce_addr, "roce_addr_layout", 0x100, roce_addr_f);

static const struct kinet_prm_field query_roce_address_in_f[] = {
	IN_HDR,
	F("roce_address_index", 0x40, 16),
	F("vhca_port_num", 0x5c, 4),
};
LAYOUT(kinet_prm_query_roce_address_in, "query_roce_address_in", 0x80, query_roce_address_in_f);

static const struct kinet_prm_field query_roce_address_out_f[] = {
	OUT_HDR,
	S("roce_address", 0x80, kinet_prm_roce_addr),
};
LAYOUT(kinet_prm_query_roce_address_out, "query_roce_address_out", 0x180,
       query_roce_address_out_f);

const struct kinet_prm_layout *const kinet_prm_layouts[] = {
	&kinet_prm_ads,           &kinet_prm_qpc,           &kinet_prm_cqc,
	&kinet_prm_cmd_out,       &kinet_prm_create_cq_in,  &kinet_prm_create_cq_out,
	&kinet_prm_destroy_cq_in, &kinet_prm_create_qp_in,  &kinet_prm_create_qp_out,
	&kinet_prm_modify_qp_in,  &kinet_prm_qpn_in,        &kinet_prm_alloc_uar_in,
	&kinet_prm_alloc_uar_out, &kinet_prm_hca_cap,       &kinet_prm_roce_cap,
	&kinet_prm_query_hca_cap_in, &kinet_prm_query_hca_cap_out, &kinet_prm_query_roce_cap_out,
	&kinet_prm_query_qp_out, &kinet_prm_atomic_cap, &kinet_prm_query_atomic_cap_out,
	&kinet_prm_roce_addr, &kinet_prm_query_roce_address_in, &kinet_prm_query_roce_address_out,
	NULL,
};

/* ---- field access ---------------------------------------------------------------- */

size_t kinet_prm_bytes(const struct kinet_prm_layout *l)
{
	return l->bits / 8;
}

static uint32_t fwidth(const struct kinet_prm_field *f)
{
	return f->sub ? f->sub->bits : f->width;
}

int kinet_prm_find(const struct kinet_prm_layout *l, const char *name, uint32_t *off,
		   uint32_t *width)
{
	uint32_t base = 0;
	if (!l || !name)
		return -EINVAL;
	for (;;) {
		const char *dot = strchr(name, '.');
		size_t n = dot ? (size_t)(dot - name) : strlen(name);
		const struct kinet_prm_field *f = NULL;
		for (int i = 0; i < l->nfields; i++)
			if (strlen(l->fields[i].name) == n && !strncmp(l->fields[i].name, name, n)) {
				f = &l->fields[i];
				break;
			}
		if (!f)
			return -ENOENT;
		base += f->off;
		if (!dot) {
			*off = base;
			*width = fwidth(f);
			return 0;
		}
		if (!f->sub)
			return -ENOENT;
		l = f->sub;
		name = dot + 1;
	}
}

/* Bit i of the stream is bit 7 - i % 8 of byte i / 8 (big-endian words). */
static void put_bits(uint8_t *b, uint32_t off, uint32_t w, uint64_t v)
{
	for (uint32_t i = 0; i < w; i++) {
		uint32_t bit = off + i;
		uint8_t m = (uint8_t)(0x80u >> (bit & 7));
		if ((v >> (w - 1 - i)) & 1)
			b[bit >> 3] |= m;
		else
			b[bit >> 3] &= (uint8_t)~m;
	}
}

static uint64_t get_bits(const uint8_t *b, uint32_t off, uint32_t w)
{
	uint64_t v = 0;
	for (uint32_t i = 0; i < w; i++) {
		uint32_t bit = off + i;
		v = (v << 1) | ((b[bit >> 3] >> (7 - (bit & 7))) & 1);
	}
	return v;
}

int kinet_prm_set(const struct kinet_prm_layout *l, void *buf, const char *name, uint64_t v)
{
	uint32_t off, w;
	int rc = kinet_prm_find(l, name, &off, &w);
	if (rc)
		return rc;
	if (w > 64)
		return -EINVAL;
	if (w < 64 && (v >> w))
		return -ERANGE;
	put_bits(buf, off, w, v);
	return 0;
}

int kinet_prm_get(const struct kinet_prm_layout *l, const void *buf, const char *name,
		  uint64_t *v)
{
	uint32_t off, w;
	int rc = kinet_prm_find(l, name, &off, &w);
	if (rc)
		return rc;
	if (w > 64)
		return -EINVAL;
	*v = get_bits(buf, off, w);
	return 0;
}

int kinet_prm_set_bytes(const struct kinet_prm_layout *l, void *buf, const char *name,
			const void *src, size_t n)
{
	uint32_t off, w;
	int rc = kinet_prm_find(l, name, &off, &w);
	if (rc)
		return rc;
	if ((off & 7) || (w & 7) || n != w / 8)
		return -EINVAL;
	memcpy((uint8_t *)buf + off / 8, src, n);
	return 0;
}

int kinet_prm_get_bytes(const struct kinet_prm_layout *l, const void *buf, const char *name,
			void *dst, size_t n)
{
	uint32_t off, w;
	int rc = kinet_prm_find(l, name, &off, &w);
	if (rc)
		return rc;
	if ((off & 7) || (w & 7) || n != w / 8)
		return -EINVAL;
	memcpy(dst, (const uint8_t *)buf + off / 8, n);
	return 0;
}

int kinet_prm_check(const struct kinet_prm_layout *l, char *why, size_t wl)
{
	if (l->bits % 32) {
		snprintf(why, wl, "%s: size %u bits is not whole 32-bit words", l->name, l->bits);
		return -EINVAL;
	}
	for (int i = 0; i < l->nfields; i++) {
		const struct kinet_prm_field *a = &l->fields[i];
		uint32_t wa = fwidth(a);
		if (wa == 0 || a->off + wa > l->bits) {
			snprintf(why, wl, "%s.%s: outside the layout", l->name, a->name);
			return -EINVAL;
		}
		if (wa > 32 && wa <= 64 && !a->sub && (a->off % 32)) {
			snprintf(why, wl, "%s.%s: a 64-bit field must start on a word", l->name,
				 a->name);
			return -EINVAL;
		}
		if (wa <= 32 && !a->sub && a->off / 32 != (a->off + wa - 1) / 32) {
			snprintf(why, wl, "%s.%s: crosses a 32-bit word", l->name, a->name);
			return -EINVAL;
		}
		for (int j = i + 1; j < l->nfields; j++) {
			const struct kinet_prm_field *b = &l->fields[j];
			if (!strcmp(a->name, b->name)) {
				snprintf(why, wl, "%s.%s: defined twice", l->name, a->name);
				return -EINVAL;
			}
			if (a->off < b->off + fwidth(b) && b->off < a->off + wa) {
				snprintf(why, wl, "%s: %s and %s overlap", l->name, a->name, b->name);
				return -EINVAL;
			}
		}
		if (a->sub) {
			int rc = kinet_prm_check(a->sub, why, wl);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- encoders -------------------------------------------------------------------- */

#define SET(l, name, v)                                          \
	do {                                                     \
		int rc_ = kinet_prm_set(&l, in, name, (uint64_t)(v)); \
		if (rc_)                                         \
			return rc_;                              \
	} while (0)

int kinet_prm_build_create_cq(void *in, size_t inlen, const struct kinet_prm_cq_params *p)
{
	const struct kinet_prm_layout *l = &kinet_prm_create_cq_in;
	if (inlen < kinet_prm_bytes(l))
		return -EINVAL;
	memset(in, 0, kinet_prm_bytes(l));
	SET(kinet_prm_create_cq_in, "opcode", KINET_PRM_OP_CREATE_CQ);
	SET(kinet_prm_create_cq_in, "cq_context.cqe_sz", KINET_PRM_CQE_SIZE_64);
	SET(kinet_prm_create_cq_in, "cq_context.oi", p->overrun_ignore ? 1 : 0);
	SET(kinet_prm_create_cq_in, "cq_context.log_cq_size", p->log_cq_size);
	SET(kinet_prm_create_cq_in, "cq_context.uar_page", p->uar_page);
	SET(kinet_prm_create_cq_in, "cq_context.c_eqn", p->eqn);
	SET(kinet_prm_create_cq_in, "cq_context.log_page_size", 0); /* 4 KiB pages */
	SET(kinet_prm_create_cq_in, "cq_context.dbr_umem_valid", 1);
	SET(kinet_prm_create_cq_in, "cq_context.dbr_umem_id", p->dbr_umem_id);
	SET(kinet_prm_create_cq_in, "cq_context.dbr_addr", p->dbr_offset);
	SET(kinet_prm_create_cq_in, "cq_umem_valid", 1);
	SET(kinet_prm_create_cq_in, "cq_umem_id", p->cq_umem_id);
	SET(kinet_prm_create_cq_in, "cq_umem_offset", p->cq_umem_offset);
	return 0;
}

int kinet_prm_build_query_hca_cap(void *in, size_t inlen, uint32_t cap_type, int current)
{
	const struct kinet_prm_layout *l = &kinet_prm_query_hca_cap_in;
	if (inlen < kinet_prm_bytes(l) || cap_type > 0x7fff)
		return -EINVAL;
	memset(in, 0, kinet_prm_bytes(l));
	SET(kinet_prm_query_hca_cap_in, "opcode", KINET_PRM_OP_QUERY_HCA_CAP);
	SET(kinet_prm_query_hca_cap_in, "op_mod", (cap_type << 1) | (current ? 1u : 0u));
	return 0;
}

int kinet_prm_build_create_qp(void *in, size_t inlen, const struct kinet_prm_qp_params *p)
{
	const struct kinet_prm_layout *l = &kinet_prm_create_qp_in;
	if (inlen < kinet_prm_bytes(l))
		return -EINVAL;
	memset(in, 0, kinet_prm_bytes(l));
	SET(kinet_prm_create_qp_in, "opcode", KINET_PRM_OP_CREATE_QP);
	SET(kinet_prm_create_qp_in, "qpc.st", KINET_PRM_QPC_ST_RC);
	SET(kinet_prm_create_qp_in, "qpc.pm_state", KINET_PRM_QPC_PM_MIGRATED);
	SET(kinet_prm_create_qp_in, "qpc.pd", p->pd);
	SET(kinet_prm_create_qp_in, "qpc.uar_page", p->uar_page);
	SET(kinet_prm_create_qp_in, "qpc.user_index", p->user_index);
	SET(kinet_prm_create_qp_in, "qpc.log_page_size", 0); /* 4 KiB pages */
	SET(kinet_prm_create_qp_in, "qpc.log_sq_size", p->log_sq_size);
	SET(kinet_prm_create_qp_in, "qpc.ts_format", p->ts_format);
	SET(kinet_prm_create_qp_in, "qpc.cqn_snd", p->cqn_snd);
	if (p->has_rq) {
		SET(kinet_prm_create_qp_in, "qpc.rq_type", KINET_PRM_QPC_RQ_REGULAR);
		SET(kinet_prm_create_qp_in, "qpc.log_rq_size", p->log_rq_size);
		SET(kinet_prm_create_qp_in, "qpc.log_rq_stride", p->log_rq_stride);
		SET(kinet_prm_create_qp_in, "qpc.cqn_rcv", p->cqn_rcv);
	} else {
		SET(kinet_prm_create_qp_in, "qpc.rq_type", KINET_PRM_QPC_RQ_ZERO_SIZE);
		SET(kinet_prm_create_qp_in, "qpc.cqn_rcv", p->cqn_snd);
	}
	SET(kinet_prm_create_qp_in, "qpc.dbr_umem_valid", 1);
	SET(kinet_prm_create_qp_in, "qpc.dbr_umem_id", p->dbr_umem_id);
	SET(kinet_prm_create_qp_in, "qpc.dbr_addr", p->dbr_offset);
	SET(kinet_prm_create_qp_in, "wq_umem_valid", 1);
	SET(kinet_prm_create_qp_in, "wq_umem_id", p->wq_umem_id);
	SET(kinet_prm_create_qp_in, "wq_umem_offset", p->wq_umem_offset);
	return 0;
}

static int set_path(void *in, const struct kinet_prm_qp_path *p, bool rtr)
{
	const struct kinet_prm_layout *l = &kinet_prm_modify_qp_in;
	SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.vhca_port_num", p->port);
	if (!rtr) {
		SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.pkey_index", p->pkey_index);
		return 0;
	}
	SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.grh", p->grh ? 1 : 0);
	SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.rlid", p->rlid);
	SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.sl", p->sl);
	if (p->grh) {
		int rc = kinet_prm_set_bytes(l, in, "qpc.primary_address_path.rgid_rip", p->rgid,
					     16);
		if (rc)
			return rc;
		SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.src_addr_index",
		    p->src_addr_index);
		SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.hop_limit", p->hop_limit);
		SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.udp_sport", p->udp_sport);
		SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.rmac_47_32",
		    ((uint32_t)p->rmac[0] << 8) | p->rmac[1]);
		SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.rmac_31_0",
		    ((uint32_t)p->rmac[2] << 24) | ((uint32_t)p->rmac[3] << 16) |
			    ((uint32_t)p->rmac[4] << 8) | p->rmac[5]);
	}
	return 0;
}

int kinet_prm_build_modify_qp(void *in, size_t inlen, uint16_t opcode, uint32_t qpn,
			      const struct kinet_prm_qp_path *p)
{
	const struct kinet_prm_layout *l = &kinet_prm_modify_qp_in;
	if (inlen < kinet_prm_bytes(l))
		return -EINVAL;
	if (opcode != KINET_PRM_OP_RST2INIT_QP && opcode != KINET_PRM_OP_INIT2RTR_QP &&
	    opcode != KINET_PRM_OP_RTR2RTS_QP)
		return -EINVAL;
	memset(in, 0, kinet_prm_bytes(l));
	SET(kinet_prm_modify_qp_in, "opcode", opcode);
	SET(kinet_prm_modify_qp_in, "qpn", qpn);
	int rc = 0;
	switch (opcode) {
	case KINET_PRM_OP_RST2INIT_QP:
		SET(kinet_prm_modify_qp_in, "qpc.rre", p->rre ? 1 : 0);
		SET(kinet_prm_modify_qp_in, "qpc.rwe", p->rwe ? 1 : 0);
		SET(kinet_prm_modify_qp_in, "qpc.rae", p->rae ? 1 : 0);
		if (p->rae)
			SET(kinet_prm_modify_qp_in, "qpc.atomic_mode", KINET_PRM_ATOMIC_MODE_IB);
		rc = set_path(in, p, false);
		break;
	case KINET_PRM_OP_INIT2RTR_QP:
		SET(kinet_prm_modify_qp_in, "qpc.mtu", p->mtu);
		SET(kinet_prm_modify_qp_in, "qpc.log_msg_max", p->log_msg_max);
		SET(kinet_prm_modify_qp_in, "qpc.remote_qpn", p->remote_qpn);
		SET(kinet_prm_modify_qp_in, "qpc.next_rcv_psn", p->next_rcv_psn);
		SET(kinet_prm_modify_qp_in, "qpc.log_rra_max", p->log_rra_max);
		SET(kinet_prm_modify_qp_in, "qpc.min_rnr_nak", p->min_rnr_nak);
		rc = set_path(in, p, true);
		break;
	default: /* RTR2RTS */
		SET(kinet_prm_modify_qp_in, "qpc.next_send_psn", p->next_send_psn);
		SET(kinet_prm_modify_qp_in, "qpc.log_sra_max", p->log_sra_max);
		SET(kinet_prm_modify_qp_in, "qpc.retry_count", p->retry_count);
		SET(kinet_prm_modify_qp_in, "qpc.rnr_retry", p->rnr_retry);
		SET(kinet_prm_modify_qp_in, "qpc.primary_address_path.ack_timeout", p->ack_timeout);
		break;
	}
	(void)l;
	return rc;
}

int kinet_prm_build_qpn_cmd(void *in, size_t inlen, uint16_t opcode, uint32_t qpn)
{
	if (inlen < kinet_prm_bytes(&kinet_prm_qpn_in))
		return -EINVAL;
	memset(in, 0, kinet_prm_bytes(&kinet_prm_qpn_in));
	SET(kinet_prm_qpn_in, "opcode", opcode);
	SET(kinet_prm_qpn_in, "qpn", qpn);
	return 0;
}

void kinet_prm_out_status(const void *out, uint32_t *status, uint32_t *syndrome)
{
	uint64_t v = 0;
	kinet_prm_get(&kinet_prm_cmd_out, out, "status", &v);
	*status = (uint32_t)v;
	kinet_prm_get(&kinet_prm_cmd_out, out, "syndrome", &v);
	*syndrome = (uint32_t)v;
}

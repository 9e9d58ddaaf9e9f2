/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ifc.h - the PRM command layouts the DevX path encodes, as tables of named
 * fields (bit offset, bit width), and the encoders and decoders they drive.
 *
 * Layout convention (the PRM's): a command is a sequence of big-endian
 * 32-bit words; bit offset 0 is the most significant bit of the first byte,
 * so a field is a run of bits in a big-endian bit stream. A field of a
 * nested context is named with its path, e.g. "qpc.primary_address_path.rlid".
 * The offsets were written from the PRM layouts as published in the Linux
 * kernel's and rdma-core's mlx5_ifc.h; tests/unit/test_mlx5_prm.c checks
 * them field by field against known byte positions.
 */
#ifndef KINET_MLX5_IFC_H
#define KINET_MLX5_IFC_H

#include <stddef.h>
#include <stdint.h>

/* ---- command opcodes --------------------------------------------------------- */
enum {
	KINET_PRM_OP_QUERY_HCA_CAP = 0x100,
	KINET_PRM_OP_CREATE_CQ = 0x400,
	KINET_PRM_OP_DESTROY_CQ = 0x401,
	KINET_PRM_OP_CREATE_QP = 0x500,
	KINET_PRM_OP_DESTROY_QP = 0x501,
	KINET_PRM_OP_RST2INIT_QP = 0x502,
	KINET_PRM_OP_INIT2RTR_QP = 0x503,
	KINET_PRM_OP_RTR2RTS_QP = 0x504,
	KINET_PRM_OP_2ERR_QP = 0x507,
	KINET_PRM_OP_2RST_QP = 0x50a,
	KINET_PRM_OP_QUERY_QP = 0x50b,
	KINET_PRM_OP_QUERY_ROCE_ADDRESS = 0x760,
	KINET_PRM_OP_ALLOC_PD = 0x800,
	KINET_PRM_OP_ALLOC_UAR = 0x802,
	KINET_PRM_OP_DEALLOC_UAR = 0x803,
	KINET_PRM_OP_CREATE_UMEM = 0xa08,
};

/* ---- context values ----------------------------------------------------------- */
enum {
	KINET_PRM_QPC_ST_RC = 0x0,
	KINET_PRM_QPC_ST_DCI = 0x5, /* a DC initiator (its WQEs name their DCT) */
	KINET_PRM_QPC_PM_MIGRATED = 0x3,
	KINET_PRM_QPC_RQ_REGULAR = 0x0,
	KINET_PRM_QPC_RQ_SRQ = 0x1,
	KINET_PRM_QPC_RQ_ZERO_SIZE = 0x3,
	/* qpc.state */
	KINET_PRM_QPC_STATE_RST = 0x0,
	KINET_PRM_QPC_STATE_INIT = 0x1,
	KINET_PRM_QPC_STATE_RTR = 0x2,
	KINET_PRM_QPC_STATE_RTS = 0x3,
	KINET_PRM_QPC_STATE_SQER = 0x4,
	KINET_PRM_QPC_STATE_ERR = 0x6,
	KINET_PRM_CQE_SIZE_64 = 0x0,
	/* roce_addr_layout */
	KINET_PRM_ROCE_L3_IPV4 = 0x0,
	KINET_PRM_ROCE_L3_IPV6 = 0x1,
	KINET_PRM_ROCE_VERSION_1 = 0x0,
	KINET_PRM_ROCE_VERSION_2 = 0x2,
	KINET_PRM_ATOMIC_MODE_IB = 0x1, /* 8-byte IB atomics (qpc.atomic_mode) */
	/* qpc.ts_format */
	KINET_PRM_TS_FREE_RUNNING = 0x0,
	KINET_PRM_TS_DEFAULT = 0x1,
	KINET_PRM_TS_REAL_TIME = 0x2,
	/* the capabilities' *_ts_format: what the device supports */
	KINET_PRM_TS_CAP_FREE_RUNNING = 0x0,
	KINET_PRM_TS_CAP_REAL_TIME = 0x1,
	KINET_PRM_TS_CAP_BOTH = 0x2,
	/* QUERY_HCA_CAP op_mod: capability type << 1 | current */
	KINET_PRM_CAP_GENERAL = 0x0,
	KINET_PRM_CAP_ATOMIC = 0x3,
	KINET_PRM_CAP_ROCE = 0x4,
	KINET_PRM_CAP_NIC_FLOW_TABLE = 0x7,
	KINET_PRM_CAP_DEVICE_MEMORY = 0xf,
};

/* ---- layouts -------------------------------------------------------------------- */
struct kinet_prm_layout;

struct kinet_prm_field {
	const char *name;
	uint32_t off;   /* bits from the start of the layout */
	uint32_t width; /* bits */
	const struct kinet_prm_layout *sub; /* an embedded layout (width = its size) */
};

struct kinet_prm_layout {
	const char *name;
	uint32_t bits; /* size of the layout */
	const struct kinet_prm_field *fields;
	int nfields;
};

extern const struct kinet_prm_layout kinet_prm_ads;        /* address path */
extern const struct kinet_prm_layout kinet_prm_qpc;        /* QP context */
extern const struct kinet_prm_layout kinet_prm_cqc;        /* CQ context */
extern const struct kinet_prm_layout kinet_prm_cmd_out;    /* status, syndrome (every output) */
extern const struct kinet_prm_layout kinet_prm_create_cq_in;
extern const struct kinet_prm_layout kinet_prm_create_cq_out;
extern const struct kinet_prm_layout kinet_prm_destroy_cq_in;
extern const struct kinet_prm_layout kinet_prm_create_qp_in;
extern const struct kinet_prm_layout kinet_prm_create_qp_out;
extern const struct kinet_prm_layout kinet_prm_modify_qp_in; /* RST2INIT, INIT2RTR, RTR2RTS */
extern const struct kinet_prm_layout kinet_prm_qpn_in;       /* 2ERR, 2RST, DESTROY_QP, QUERY_QP */
extern const struct kinet_prm_layout kinet_prm_query_qp_out;
extern const struct kinet_prm_layout kinet_prm_alloc_uar_in;
extern const struct kinet_prm_layout kinet_prm_alloc_uar_out;
extern const struct kinet_prm_layout kinet_prm_hca_cap;   /* general capabilities */
extern const struct kinet_prm_layout kinet_prm_roce_cap;  /* RoCE capabilities */
extern const struct kinet_prm_layout kinet_prm_query_hca_cap_in;
extern const struct kinet_prm_layout kinet_prm_query_hca_cap_out;  /* general */
extern const struct kinet_prm_layout kinet_prm_query_roce_cap_out; /* the same bytes, RoCE */
extern const struct kinet_prm_layout kinet_prm_atomic_cap;
extern const struct kinet_prm_layout kinet_prm_query_atomic_cap_out; /* the same, atomics */
extern const struct kinet_prm_layout kinet_prm_roce_addr; /* a GID table entry */
extern const struct kinet_prm_layout kinet_prm_query_roce_address_in;
extern const struct kinet_prm_layout kinet_prm_query_roce_address_out;

/* Every layout above, for tests and tools (NULL-terminated). */
extern const struct kinet_prm_layout *const kinet_prm_layouts[];

/* Size of a layout in bytes. */
size_t kinet_prm_bytes(const struct kinet_prm_layout *l);

/* Finds a field by (dotted) name: its absolute offset and width, or -ENOENT. */
int kinet_prm_find(const struct kinet_prm_layout *l, const char *name, uint32_t *off,
		   uint32_t *width);

/* Writes / reads a field of at most 64 bits. set: -ERANGE when v does not fit
 * the field (nothing is written); both: -ENOENT for an unknown name, -EINVAL
 * for a field wider than 64 bits (use the _bytes forms). */
int kinet_prm_set(const struct kinet_prm_layout *l, void *buf, const char *name, uint64_t v);
int kinet_prm_get(const struct kinet_prm_layout *l, const void *buf, const char *name,
		  uint64_t *v);
/* Byte-aligned fields of any width (e.g. a GID): n must equal width / 8. */
int kinet_prm_set_bytes(const struct kinet_prm_layout *l, void *buf, const char *name,
			const void *src, size_t n);
int kinet_prm_get_bytes(const struct kinet_prm_layout *l, const void *buf, const char *name,
			void *dst, size_t n);

/* Checks a layout: every field inside it, no two fields overlapping, names
 * unique. 0 or -EINVAL and *why. */
int kinet_prm_check(const struct kinet_prm_layout *l, char *why, size_t whylen);

/* ---- command encoders ------------------------------------------------------------ */

struct kinet_prm_cq_params {
	uint32_t log_cq_size;
	uint32_t uar_page;
	uint32_t eqn;
	uint32_t cq_umem_id;
	uint64_t cq_umem_offset;
	uint32_t dbr_umem_id;
	uint64_t dbr_offset; /* byte offset of the doorbell record in its umem */
	int overrun_ignore;  /* cqc.oi */
};
/* CREATE_CQ input (kinet_prm_bytes(&kinet_prm_create_cq_in) bytes). */
int kinet_prm_build_create_cq(void *in, size_t inlen, const struct kinet_prm_cq_params *p);

struct kinet_prm_qp_params {
	uint32_t pd;
	uint32_t uar_page;
	uint32_t log_sq_size;   /* WQEBBs */
	uint32_t log_rq_size;   /* 0 with rq_stride 0: no receive queue */
	uint32_t log_rq_stride; /* stride = 16 << log_rq_stride */
	int has_rq;
	uint32_t cqn_snd, cqn_rcv;
	uint32_t wq_umem_id;
	uint64_t wq_umem_offset;
	uint32_t dbr_umem_id;
	uint64_t dbr_offset;
	uint32_t user_index;
	uint32_t ts_format;     /* KINET_PRM_TS_*: what the device's capabilities allow */
};
int kinet_prm_build_create_qp(void *in, size_t inlen, const struct kinet_prm_qp_params *p);

/* QUERY_HCA_CAP input: cap_type KINET_PRM_CAP_*, current (1) or maximum (0). */
int kinet_prm_build_query_hca_cap(void *in, size_t inlen, uint32_t cap_type, int current);

/* The qpc.ts_format a device with this capability (KINET_PRM_TS_CAP_*)
 * accepts: real time where it has only that, free running where only that,
 * the device's default where it has both. */
static inline uint32_t kinet_prm_ts_format_for(uint32_t cap)
{
	return cap == KINET_PRM_TS_CAP_REAL_TIME      ? KINET_PRM_TS_REAL_TIME
	       : cap == KINET_PRM_TS_CAP_FREE_RUNNING ? KINET_PRM_TS_FREE_RUNNING
						      : KINET_PRM_TS_DEFAULT;
}

/* The path and transport attributes of RST2INIT, INIT2RTR and RTR2RTS. */
struct kinet_prm_qp_path {
	uint32_t port;         /* vhca_port_num */
	uint32_t pkey_index;
	int rre, rwe, rae;     /* remote read / write / atomic enable */
	uint32_t mtu;          /* 1 = 256 .. 5 = 4096 (as enum ibv_mtu) */
	uint32_t log_msg_max;
	uint32_t remote_qpn;
	uint32_t next_rcv_psn;
	uint32_t log_rra_max;  /* responder resources, log2 */
	uint32_t min_rnr_nak;
	int grh;               /* RoCE, or IB across subnets */
	uint32_t rlid;
	uint8_t rgid[16];
	uint32_t src_addr_index; /* the local GID index */
	uint32_t hop_limit;
	uint32_t udp_sport;
	uint8_t rmac[6];       /* RoCE: the next hop's MAC */
	uint32_t sl;
	uint32_t next_send_psn;
	uint32_t ack_timeout;
	uint32_t retry_count;
	uint32_t rnr_retry;
	uint32_t log_sra_max;  /* initiator depth, log2 */
};
/* opcode: KINET_PRM_OP_RST2INIT_QP, _INIT2RTR_QP or _RTR2RTS_QP. */
int kinet_prm_build_modify_qp(void *in, size_t inlen, uint16_t opcode, uint32_t qpn,
			      const struct kinet_prm_qp_path *p);
/* 2ERR, 2RST, DESTROY_QP, DESTROY_CQ: opcode and object number only. */
int kinet_prm_build_qpn_cmd(void *in, size_t inlen, uint16_t opcode, uint32_t qpn);

/* Decodes the output header: status (0 = OK) and syndrome. */
void kinet_prm_out_status(const void *out, uint32_t *status, uint32_t *syndrome);

#endif

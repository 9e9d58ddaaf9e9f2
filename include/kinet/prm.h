/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/prm.h - mlx5 queue formats (WQE segments, CQE, opcodes, syndromes),
 * written from the ConnectX PRM layouts, and kinet's byte-order helpers.
 * Every backend speaks these bytes.
 *
 * This header is usable from C (host) and CUDA (device). It defines its own
 * structs so it needs no rdma-core at build time; tests/unit/test_prm.c checks
 * that sizes, offsets and values equal rdma-core's <infiniband/mlx5dv.h>.
 */
#ifndef KINET_PRM_H
#define KINET_PRM_H

#include <stdint.h>

/* KN_INLINE declares every function of kinet's public headers that both a C
 * (or C++) compiler and nvcc compile: host and device code, always inlined,
 * under nvcc; static inline, always inlined, elsewhere, so the host executor
 * runs the code the GPU runs (the thread-scope calls are wrappers that must
 * fold into straight-line code). It lives here because prm.h is the lowest
 * of those headers; the CUDA-only header (device_cuda.cuh) spells its
 * __device__ functions out. */
#if defined(__CUDACC__)
#define KN_INLINE static __host__ __device__ __forceinline__
#else
#define KN_INLINE static inline __attribute__((always_inline))
#endif

/* ---- sizes ---------------------------------------------------------- */
#define KN_SEND_WQE_BB 64u    /* one WQE basic block */
#define KN_SEND_WQE_SHIFT 6u
#define KN_SEG_SIZE 16u       /* "ds" counts 16-byte units */
#define KN_MAX_WQE_BBS 16u    /* largest WQE the engine accepts (1 KiB) */
#define KN_CQE_SIZE 64u
#define KN_RCV_DBR 0          /* doorbell record word of the receive queue */
#define KN_SND_DBR 1          /* doorbell record word of the send queue */
#define KN_BF_OFFSET 0x800u   /* doorbell/BlueFlame register inside the UAR page */
#define KN_BF_SIZE 0x100u     /* one BlueFlame buffer (log_bf_reg_size 9): the
			       * second register is at KN_BF_OFFSET + KN_BF_SIZE */
#define KN_UAR_PAGE_SIZE 4096u

/* ---- WQE opcodes (ctrl.opmod_idx_opcode & 0xff) ---------------------- */
enum kn_wqe_opcode {
	KN_OPCODE_NOP = 0x00,
	KN_OPCODE_SEND_INVAL = 0x01,
	KN_OPCODE_RDMA_WRITE = 0x08,
	KN_OPCODE_RDMA_WRITE_IMM = 0x09,
	KN_OPCODE_SEND = 0x0a,
	KN_OPCODE_SEND_IMM = 0x0b,
	KN_OPCODE_RDMA_READ = 0x10,
	KN_OPCODE_ATOMIC_CS = 0x11,
	KN_OPCODE_ATOMIC_FA = 0x12,
	KN_OPCODE_TSO = 0x0e,  /* Ethernet large send (refused by kinet's NICs) */
	KN_OPCODE_WAIT = 0x0f, /* hold the queue until a condition: a CQ's index (RC,
				* opmod 0) or the clock (Ethernet SQ, KN_OPMOD_WAIT_TIME) */
	KN_OPCODE_ATOMIC_MASKED_CS = 0x14, /* extended atomics: opmod KN_OPMOD_EXT_ATOMIC_* */
	KN_OPCODE_ATOMIC_MASKED_FA = 0x15,
	/* reads the local buffers of its data segments and discards them: a
	 * producer's way to order a NIC's earlier writes into GPU memory
	 * before it reads them (IBGDA's read consistency); the software NIC
	 * checks the segments' keys and completes it as a NOP */
	KN_OPCODE_DUMP = 0x23,
};

/* ---- extended (masked) atomics ------------------------------------------
 * ConnectX's masked compare-and-swap and masked fetch-and-add on 4 or 8
 * bytes. The operand size is in the ctrl segment's opmod, 0x08 | (log2(size)
 * - 2); the WQE is ctrl, remote address, the operand segment below, and one
 * data segment of `size` bytes where the old value lands (big-endian):
 *   masked CS, 4 bytes  operands 16 bytes  ds 4 (one WQEBB)
 *   masked CS, 8 bytes  operands 32 bytes  ds 5 (two WQEBBs)
 *   masked FA, 4 or 8   operands 16 bytes  ds 4 (one WQEBB)
 * Masked CS: if ((old ^ compare) & compare_mask) == 0, the word becomes
 * (old & ~swap_mask) | (swap & swap_mask). Masked FA: the word becomes old +
 * add, where a carry out of a bit set in field_boundary is dropped (the bits
 * form fields that add on their own: boundary 0 is a plain add, all ones an
 * exclusive or). Every operand is big-endian, in the operand size. */
#define KN_OPMOD_EXT_ATOMIC(log2_size) (0x08u | ((log2_size) - 2u))
enum {
	KN_OPMOD_EXT_ATOMIC_4 = 0x08,
	KN_OPMOD_EXT_ATOMIC_8 = 0x09,
};

/* ctrl.opmod of a WAIT WQE: wait for the NIC's real-time clock. */
#define KN_OPMOD_WAIT_TIME 2u

/* ---- ctrl.fm_ce_se --------------------------------------------------- */
enum {
	KN_WQE_CTRL_CQ_UPDATE = 2 << 2, /* write a CQE when this WQE completes */
	KN_WQE_CTRL_SOLICITED = 1 << 1,
	KN_WQE_CTRL_FENCE = 4 << 5,
	KN_WQE_CTRL_INITIATOR_SMALL_FENCE = 1 << 5,
};

#define KN_INLINE_SEG 0x80000000u /* inline segment flag in byte_count */
#define KN_INVALID_LKEY 0x100u   /* mlx5 reserved lkey: ends a receive scatter list */

/* ---- CQE opcodes (op_own >> 4) ---------------------------------------- */
enum kn_cqe_opcode {
	KN_CQE_REQ = 0,
	KN_CQE_RESP_WR_IMM = 1,
	KN_CQE_RESP_SEND = 2,
	KN_CQE_RESP_SEND_IMM = 3,
	KN_CQE_RESP_SEND_INV = 4,
	KN_CQE_REQ_ERR = 13,
	KN_CQE_RESP_ERR = 14,
	KN_CQE_INVALID = 15,
};

/* ---- error CQE syndromes ------------------------------------------------ */
enum kn_cqe_syndrome {
	KN_SYND_LOCAL_LENGTH_ERR = 0x01,
	KN_SYND_LOCAL_QP_OP_ERR = 0x02,
	KN_SYND_LOCAL_PROT_ERR = 0x04,
	KN_SYND_WR_FLUSH_ERR = 0x05,
	KN_SYND_MW_BIND_ERR = 0x06,
	KN_SYND_BAD_RESP_ERR = 0x10,
	KN_SYND_LOCAL_ACCESS_ERR = 0x11,
	KN_SYND_REMOTE_INVAL_REQ_ERR = 0x12,
	KN_SYND_REMOTE_ACCESS_ERR = 0x13,
	KN_SYND_REMOTE_OP_ERR = 0x14,
	KN_SYND_TRANSPORT_RETRY_EXC_ERR = 0x15,
	KN_SYND_RNR_RETRY_EXC_ERR = 0x16,
	KN_SYND_REMOTE_ABORTED_ERR = 0x22,
};

/* ---- WQE segments (all multi-byte fields big-endian) ----------------- */
struct kn_wqe_ctrl_seg {
	uint32_t opmod_idx_opcode; /* opmod<<24 | wqe_index<<8 | opcode */
	uint32_t qpn_ds;           /* qpn<<8 | ds (16-byte units in this WQE) */
	uint8_t signature;
	uint8_t dci_stream_channel_id[2];
	uint8_t fm_ce_se;
	uint32_t imm; /* immediate, already in wire order */
};

struct kn_wqe_raddr_seg {
	uint64_t raddr;
	uint32_t rkey;
	uint32_t reserved;
};

struct kn_wqe_data_seg {
	uint32_t byte_count;
	uint32_t lkey;
	uint64_t addr;
};

struct kn_wqe_inl_data_seg {
	uint32_t byte_count; /* length | KN_INLINE_SEG; the data follows */
};

struct kn_wqe_atomic_seg {
	uint64_t swap_add; /* swap value (CS) or addend (FA) */
	uint64_t compare;  /* compare value (CS) */
};

/* Operands of an 8-byte masked compare-and-swap (rdma-core's struct
 * mlx5_wqe_masked_atomic_seg). */
struct kn_wqe_masked_atomic_seg {
	uint64_t swap_add;
	uint64_t compare;
	uint64_t swap_add_mask;
	uint64_t compare_mask;
};

/* Operands of a 4-byte masked compare-and-swap. */
struct kn_wqe_masked_cs32_seg {
	uint32_t swap;
	uint32_t compare;
	uint32_t swap_mask;
	uint32_t compare_mask;
};

/* Operands of a masked fetch-and-add, 4 and 8 bytes. */
struct kn_wqe_masked_fa32_seg {
	uint32_t add;
	uint32_t field_boundary;
	uint64_t reserved;
};
struct kn_wqe_masked_fa64_seg {
	uint64_t add;
	uint64_t field_boundary;
};

/* 64-byte completion entry (success layout). */
struct kn_cqe64 {
	uint8_t rsvd0[2];
	uint16_t wqe_id;
	uint8_t rsvd4[13];
	uint8_t ml_path;
	uint8_t rsvd20[4];
	uint16_t slid;
	uint32_t flags_rqpn; /* remote qpn in the low 24 bits (responder) */
	uint8_t hds_ip_ext;
	uint8_t l4_hdr_type_etc;
	uint16_t vlan_info;
	uint32_t srqn_uidx;
	uint32_t imm_inval_pkey; /* immediate (wire order) on *_IMM */
	uint8_t app;
	uint8_t app_op;
	uint16_t app_info;
	uint32_t byte_cnt; /* bytes received (responder) / transferred */
	uint64_t timestamp;
	uint32_t sop_drop_qpn; /* local qpn in the low 24 bits */
	uint16_t wqe_counter;  /* index of the WQE this CQE completes */
	uint8_t signature;
	uint8_t op_own; /* opcode<<4 | ... | owner bit */
};

/* The error layout of the same 64 bytes. */
struct kn_err_cqe {
	uint8_t rsvd0[32];
	uint32_t srqn;
	uint8_t rsvd1[18];
	uint8_t vendor_err_synd;
	uint8_t syndrome;
	uint32_t s_wqe_opcode_qpn; /* wqe opcode<<24 | qpn */
	uint16_t wqe_counter;
	uint8_t signature;
	uint8_t op_own;
};

/* ---- Ethernet queues --------------------------------------------------
 * An Ethernet send queue is an SQ of 64-byte WQEBBs like an RC QP's; its
 * send WQE is ctrl | eth segment (checksum offload, inline headers) | data
 * segments, its WAIT WQE ctrl | wait segment. A receive queue is cyclic
 * (one data segment per WQE, one packet per WQE) or striding ("multi-packet":
 * each WQE a buffer of 2^n strides, packets placed in consecutive strides).
 * Layouts as rdma-core's mlx5dv.h (eth segment, next segment, MPRQ WQE) and
 * the kernel's include/linux/mlx5/device.h (receive CQE); the wait segment
 * as DPDK's mlx5_prm.h; tests/unit/test_prm.c checks them. */

/* eth.cs_flags: the NIC computes and writes these checksums. */
enum {
	KN_ETH_WQE_L3_CSUM = 1 << 6, /* IPv4 header checksum */
	KN_ETH_WQE_L4_CSUM = 1 << 7, /* TCP / UDP checksum (with the pseudo header) */
};
/* Bytes of headers a ConnectX-4 (Lx) needs inline in every send WQE; later
 * NICs take 0. The first 2 inline bytes sit in the 16-byte eth segment
 * itself, the rest follows in 16-byte units. */
#define KN_ETH_L2_INLINE_HEADER_SIZE 18u
#define KN_ETH_INLINE_HDR_START 2u

struct kn_wqe_eth_seg {
	uint32_t rsvd0;
	uint8_t cs_flags;       /* KN_ETH_WQE_*_CSUM */
	uint8_t rsvd1;
	uint16_t mss;           /* TSO only: 0 in a SEND */
	uint32_t rsvd2;
	uint16_t inline_hdr_sz; /* bytes of the frame carried from inline_hdr_start on */
	uint8_t inline_hdr_start[2];
	uint8_t inline_hdr[16]; /* the next 16 inline bytes (more follow in 16-byte units) */
};

/* Offset of the first data segment of an Ethernet send WQE whose eth segment
 * carries ihs inline bytes (the kernel's mlx5e: 32 + ALIGN(ihs - 2, 16)). */
KN_INLINE uint32_t kn_eth_wqe_dseg_offset(uint32_t ihs)
{
	return 32u + (ihs > KN_ETH_INLINE_HDR_START ? (ihs - KN_ETH_INLINE_HDR_START + 15u) & ~15u
						    : 0u);
}

/* The wait segment of a WAIT WQE (wait on time: operation
 * KN_WAIT_COND_CYCLIC_SMALLER, lkey and va 0, value the time in the NIC's
 * real-time format, mask all ones). */
struct kn_wqe_wait_seg {
	uint32_t operation;
	uint32_t lkey;
	uint32_t va_high;
	uint32_t va_low;
	uint64_t value;
	uint64_t mask;
};
#define KN_WAIT_COND_CYCLIC_SMALLER 5u

/* The NIC's real-time clock format (CQE timestamps, wait values): seconds in
 * the high 32 bits, nanoseconds in the low 32. */
KN_INLINE uint64_t kn_rt_from_ns(uint64_t ns)
{
	return (ns / 1000000000ull) << 32 | (ns % 1000000000ull);
}
KN_INLINE uint64_t kn_rt_to_ns(uint64_t rt)
{
	return (rt >> 32) * 1000000000ull + (rt & 0xffffffffull);
}

/* A striding receive WQE: the next segment (unused in a cyclic queue) and
 * one data segment covering the WQE's strides. */
struct kn_wqe_srq_next_seg {
	uint8_t rsvd0[2];
	uint16_t next_wqe_index;
	uint8_t signature;
	uint8_t rsvd1[11];
};
struct kn_mprq_wqe {
	struct kn_wqe_srq_next_seg nseg;
	struct kn_wqe_data_seg dseg;
};

/* The receive CQE of an Ethernet RQ: the 64 bytes of kn_cqe64, named as the
 * kernel names them for Ethernet. Striding queues: wqe_id is the WQE's index,
 * wqe_counter the first stride of the packet, byte_cnt KN_MPRQ_*. */
struct kn_eth_cqe {
	uint8_t tunneled;
	uint8_t rsvd1;
	uint16_t wqe_id;
	uint8_t lro[8];
	uint32_t rss_hash;     /* the Toeplitz hash of the packet's flow */
	uint8_t rss_hash_type; /* KN_RSS_HTYPE_* of the fields hashed */
	uint8_t ml_path;
	uint8_t rsvd18[2];
	uint16_t check_sum;
	uint16_t slid;
	uint32_t flags_rqpn;
	uint8_t hds_ip_ext;     /* KN_CQE_L{2,3,4}_OK */
	uint8_t l4_l3_hdr_type; /* L4 type << 4 | L3 type << 2 | VLAN */
	uint16_t vlan_info;
	uint32_t srqn;
	uint32_t imm_inval_pkey;
	uint8_t rsvd40[4];
	uint32_t byte_cnt;
	uint64_t timestamp; /* real-time format (kn_rt_to_ns) */
	uint32_t sop_drop_qpn;
	uint16_t wqe_counter;
	uint8_t signature;
	uint8_t op_own;
};

/* hds_ip_ext: the headers parsed and their checksums correct. */
enum {
	KN_CQE_L2_OK = 1 << 0,
	KN_CQE_L3_OK = 1 << 1,
	KN_CQE_L4_OK = 1 << 2,
};
/* l4_l3_hdr_type: bits 6..4 the L4 type, 3..2 the L3 type, bit 0 VLAN. */
enum {
	KN_CQE_L3_HDR_NONE = 0x0,
	KN_CQE_L3_HDR_IPV6 = 0x1,
	KN_CQE_L3_HDR_IPV4 = 0x2,
};
enum {
	KN_CQE_L4_HDR_NONE = 0x0,
	KN_CQE_L4_HDR_TCP_NO_ACK = 0x1,
	KN_CQE_L4_HDR_UDP = 0x2,
	KN_CQE_L4_HDR_TCP_ACK_NO_DATA = 0x3,
	KN_CQE_L4_HDR_TCP_ACK_AND_DATA = 0x4,
};
#define KN_CQE_HAS_VLAN 0x1u
/* rss_hash_type */
enum {
	KN_RSS_HTYPE_SRC_IPV4 = 0x1 << 0,
	KN_RSS_HTYPE_SRC_IPV6 = 0x2 << 0,
	KN_RSS_HTYPE_DST_IPV4 = 0x1 << 2,
	KN_RSS_HTYPE_DST_IPV6 = 0x2 << 2,
	KN_RSS_HTYPE_SRC_TCP = 0x1 << 4,
	KN_RSS_HTYPE_SRC_UDP = 0x2 << 4,
	KN_RSS_HTYPE_DST_TCP = 0x1 << 6,
	KN_RSS_HTYPE_DST_UDP = 0x2 << 6,
};
/* byte_cnt of a striding queue's CQE: filler (strides skipped at the end of
 * a WQE, no packet), strides consumed, bytes. */
#define KN_MPRQ_FILLER 0x80000000u
#define KN_MPRQ_STRIDES_SHIFT 16u
#define KN_MPRQ_STRIDES_MASK 0x7fffu
#define KN_MPRQ_LEN_MASK 0xffffu

/* ---- byte order, host and device -------------------------------------- */
/* The one definition of byte order in kinet (the WQE/CQE formats, the
 * descriptors, the wire and bootstrap messages use these). Every supported
 * host (x86-64, aarch64) and every GPU is little-endian. */
KN_INLINE uint16_t kn_bswap16(uint16_t v) { return (uint16_t)((v << 8) | (v >> 8)); }
KN_INLINE uint32_t kn_bswap32(uint32_t v)
{
#if defined(__CUDA_ARCH__)
	return __byte_perm(v, 0, 0x0123);
#else
	return __builtin_bswap32(v);
#endif
}
KN_INLINE uint64_t kn_bswap64(uint64_t v)
{
	return ((uint64_t)kn_bswap32((uint32_t)v) << 32) | kn_bswap32((uint32_t)(v >> 32));
}
KN_INLINE uint16_t kn_htobe16(uint16_t v) { return kn_bswap16(v); }
KN_INLINE uint32_t kn_htobe32(uint32_t v) { return kn_bswap32(v); }
KN_INLINE uint64_t kn_htobe64(uint64_t v) { return kn_bswap64(v); }
KN_INLINE uint16_t kn_be16toh(uint16_t v) { return kn_bswap16(v); }
KN_INLINE uint32_t kn_be32toh(uint32_t v) { return kn_bswap32(v); }
KN_INLINE uint64_t kn_be64toh(uint64_t v) { return kn_bswap64(v); }

/* Unaligned loads and stores of big- and little-endian integers in byte
 * strings (descriptors, message headers). */
KN_INLINE uint16_t kn_load_be16(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint16_t)((uint32_t)b[0] << 8 | b[1]);
}
KN_INLINE uint32_t kn_load_be32(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}
KN_INLINE uint64_t kn_load_be64(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint64_t)kn_load_be32(b) << 32 | kn_load_be32(b + 4);
}
KN_INLINE void kn_store_be16(void *p, uint16_t v)
{
	uint8_t *b = (uint8_t *)p;
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}
KN_INLINE void kn_store_be32(void *p, uint32_t v)
{
	uint8_t *b = (uint8_t *)p;
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}
KN_INLINE void kn_store_be64(void *p, uint64_t v)
{
	kn_store_be32(p, (uint32_t)(v >> 32));
	kn_store_be32((uint8_t *)p + 4, (uint32_t)v);
}
KN_INLINE uint16_t kn_load_le16(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint16_t)((uint32_t)b[1] << 8 | b[0]);
}
KN_INLINE uint32_t kn_load_le32(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | b[0];
}
KN_INLINE uint64_t kn_load_le64(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint64_t)kn_load_le32(b + 4) << 32 | kn_load_le32(b);
}
KN_INLINE void kn_store_le16(void *p, uint16_t v)
{
	uint8_t *b = (uint8_t *)p;
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}
KN_INLINE void kn_store_le32(void *p, uint32_t v)
{
	uint8_t *b = (uint8_t *)p;
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}
KN_INLINE void kn_store_le64(void *p, uint64_t v)
{
	kn_store_le32(p, (uint32_t)v);
	kn_store_le32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

/* ---- segment builders (byte-identical to mlx5dv_set_*_seg) ----------- */
KN_INLINE void kn_set_ctrl_seg(struct kn_wqe_ctrl_seg *seg, uint16_t pi, uint8_t opcode,
			   uint8_t opmod, uint32_t qpn, uint8_t fm_ce_se, uint8_t ds,
			   uint8_t signature, uint32_t imm)
{
	seg->opmod_idx_opcode =
		kn_htobe32(((uint32_t)opmod << 24) | ((uint32_t)pi << 8) | opcode);
	seg->qpn_ds = kn_htobe32((qpn << 8) | ds);
	seg->fm_ce_se = fm_ce_se;
	seg->signature = signature;
	seg->imm = imm;
}

/* length is written as given: in a send WQE its bit 31 is the inline flag
 * (KN_INLINE_SEG), so a data segment carries at most 2^31 - 1 bytes
 * (KN_MAX_LEN); the device API checks that, this raw builder does not. */
KN_INLINE void kn_set_data_seg(struct kn_wqe_data_seg *seg, uint32_t length, uint32_t lkey,
			   uint64_t addr)
{
	seg->byte_count = kn_htobe32(length);
	seg->lkey = kn_htobe32(lkey);
	seg->addr = kn_htobe64(addr);
}

KN_INLINE void kn_set_raddr_seg(struct kn_wqe_raddr_seg *seg, uint64_t raddr, uint32_t rkey)
{
	seg->raddr = kn_htobe64(raddr);
	seg->rkey = kn_htobe32(rkey);
	seg->reserved = 0;
}

KN_INLINE void kn_set_atomic_seg(struct kn_wqe_atomic_seg *seg, uint64_t swap_add,
			     uint64_t compare)
{
	seg->swap_add = kn_htobe64(swap_add);
	seg->compare = kn_htobe64(compare);
}

/* The operand segments of the extended atomics (values in host order; the
 * 4-byte forms use the low 32 bits). */
KN_INLINE void kn_set_masked_atomic_seg(struct kn_wqe_masked_atomic_seg *seg, uint64_t swap,
					uint64_t compare, uint64_t swap_mask, uint64_t compare_mask)
{
	seg->swap_add = kn_htobe64(swap);
	seg->compare = kn_htobe64(compare);
	seg->swap_add_mask = kn_htobe64(swap_mask);
	seg->compare_mask = kn_htobe64(compare_mask);
}

KN_INLINE void kn_set_masked_cs32_seg(struct kn_wqe_masked_cs32_seg *seg, uint32_t swap,
				      uint32_t compare, uint32_t swap_mask, uint32_t compare_mask)
{
	seg->swap = kn_htobe32(swap);
	seg->compare = kn_htobe32(compare);
	seg->swap_mask = kn_htobe32(swap_mask);
	seg->compare_mask = kn_htobe32(compare_mask);
}

KN_INLINE void kn_set_masked_fa32_seg(struct kn_wqe_masked_fa32_seg *seg, uint32_t add,
				      uint32_t field_boundary)
{
	seg->add = kn_htobe32(add);
	seg->field_boundary = kn_htobe32(field_boundary);
	seg->reserved = 0;
}

KN_INLINE void kn_set_masked_fa64_seg(struct kn_wqe_masked_fa64_seg *seg, uint64_t add,
				      uint64_t field_boundary)
{
	seg->add = kn_htobe64(add);
	seg->field_boundary = kn_htobe64(field_boundary);
}

/* ---- CQE accessors ------------------------------------------------------ */
KN_INLINE uint8_t kn_cqe_opcode(const struct kn_cqe64 *cqe) { return cqe->op_own >> 4; }
KN_INLINE uint8_t kn_cqe_owner(const struct kn_cqe64 *cqe) { return cqe->op_own & 1; }
/* A CQE at index idx of a CQ of cnt entries (a power of two) is there when
 * its opcode is valid and its owner bit matches idx's lap (bit log2(cnt) of
 * idx). Reads op_own once, as a volatile byte (the NIC writes it last). */
KN_INLINE int kn_cqe_ready(const struct kn_cqe64 *cqe, uint64_t idx, uint32_t cnt)
{
	uint8_t op_own = *(volatile const uint8_t *)&cqe->op_own;
	return (op_own >> 4) != KN_CQE_INVALID && (op_own & 1) == ((idx / cnt) & 1);
}
KN_INLINE uint8_t kn_wqe_opcode_of(const struct kn_wqe_ctrl_seg *c)
{
	return (uint8_t)(kn_be32toh(c->opmod_idx_opcode) & 0xff);
}
KN_INLINE uint16_t kn_wqe_index_of(const struct kn_wqe_ctrl_seg *c)
{
	return (uint16_t)(kn_be32toh(c->opmod_idx_opcode) >> 8);
}
KN_INLINE uint8_t kn_wqe_ds_of(const struct kn_wqe_ctrl_seg *c)
{
	return (uint8_t)(kn_be32toh(c->qpn_ds) & 0x3f);
}
KN_INLINE uint8_t kn_wqe_opmod_of(const struct kn_wqe_ctrl_seg *c)
{
	return (uint8_t)(kn_be32toh(c->opmod_idx_opcode) >> 24);
}

#endif /* KINET_PRM_H */

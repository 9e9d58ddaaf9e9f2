/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs_devx.c - a GPU-initiated stack's host side, as NVSHMEM's IBGDA
 * transport or GPUNetIO's host library does it, written against rdma-core's
 * verbs.h and mlx5dv.h (no kinet header) and the PRM's command layouts,
 * linked with the system's libibverbs and libmlx5 and run under kinet-run
 * (test_verbs_devx): a DevX context on kinet0; CQs and RC QPs made with
 * CREATE_CQ and CREATE_QP over umem in host memory (queue buffers and
 * doorbell records); a UAR; RST2INIT, INIT2RTR (remote QP number and GID
 * in the QP context's address path), RTR2RTS; QUERY_QP. The program writes
 * its mlx5 WQEs itself (RDMA write, read, compare-and-swap, fetch-and-add),
 * rings the doorbell record and the UAR register, and polls the CQEs from
 * the CQ buffer, moving the CQ's doorbell record; data is random and checked
 * byte for byte, over many laps of the queues. Bad commands must fail as
 * rdma-core reports a firmware refusal (errno EREMOTEIO, a status and
 * syndrome in the output mailbox) with a log line; umem in use and a CQ of
 * a QP must be EBUSY; a UAR freed under a live QP must not crash; a bad
 * rkey gives an error CQE and QUERY_QP says ERR; a DevX QP and a verbs QP
 * connect to each other; a QP of the shape NVSHMEM's IBGDA makes (a
 * collapsed send CQ, receives through an SRQ of verbs into a verbs CQ)
 * carries traffic both ways.
 *
 * Four modes: no argument, two QPs of this process; "fork", the same
 * between a parent and a child process, whose QPs find each other from
 * (GID, QP number) alone; "dc", a DCI of DevX reaching a DCT of
 * mlx5dv_create_qp as NVSHMEM's IBGDA makes them (address vectors whole and
 * compact; a wrong key, a missing DCT and a DCT destroyed under writes in
 * flight are error CQEs); "gpu", a umem of GPU memory (cuMemAlloc through
 * the CUDA driver, loaded at run time) must be refused with EOPNOTSUPP and a
 * log line (exit 77, skipped, without a CUDA driver or GPU). Without a kinet
 * device it fails.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#define VT_WHO "verbs_devx"
#include "verbs_check.h"

/* ---- PRM fields: big-endian bit streams, bit 0 the top bit of byte 0 ---------- */

static void prm_set(void *buf, unsigned off, unsigned width, uint64_t v)
{
	uint8_t *b = buf;
	for (unsigned i = 0; i < width; i++) {
		unsigned bit = off + width - 1 - i; /* the field's bit i, from the right */
		uint8_t m = (uint8_t)(0x80u >> (bit % 8));
		if ((v >> i) & 1)
			b[bit / 8] |= m;
		else
			b[bit / 8] &= (uint8_t)~m;
	}
}
static uint64_t prm_get(const void *buf, unsigned off, unsigned width)
{
	const uint8_t *b = buf;
	uint64_t v = 0;
	for (unsigned i = 0; i < width; i++)
		v = v << 1 | ((b[(off + i) / 8] >> (7 - (off + i) % 8)) & 1);
	return v;
}

/* Command layouts (bit offsets, mlx5_ifc): the header, CQ and QP contexts. */
#define OPCODE 0x00, 16
#define OP_MOD 0x30, 16
#define OUT_STATUS 0x00, 8
#define OUT_SYNDROME 0x20, 32
#define OBJ_NUM 0x48, 24 /* cqn / qpn, in and out */
enum {
	OP_QUERY_HCA_CAP = 0x100, OP_CREATE_CQ = 0x400, OP_CREATE_QP = 0x500,
	OP_RST2INIT = 0x502, OP_INIT2RTR = 0x503, OP_RTR2RTS = 0x504, OP_2ERR = 0x507,
	OP_2RST = 0x50a, OP_QUERY_QP = 0x50b, OP_INIT2INIT = 0x50e,
	OP_QUERY_ROCE_ADDRESS = 0x760,
};
/* query_roce_address_in and _out (roce_addr_layout at bit 0x80 of the output) */
#define RA_INDEX 0x40, 16
#define RA_PORT 0x5c, 4
#define RA_GID_BYTE 16
#define RA_VLAN_VALID 0x103, 1
#define RA_MAC_BYTE 34 /* source_mac_47_32, then source_mac_31_0: 6 bytes */
#define RA_L3_TYPE 0x154, 4
#define RA_VERSION 0x158, 8
#define RA_OUT_BYTES 48
#define OP_DUMP 0x23 /* WQE opcode: reads its local buffers and discards them */
#define OP_WAIT 0x0f /* WQE opcode: holds the queue until a CQ's CQE is written */
#define CMD_BYTES 272   /* CREATE_CQ, CREATE_QP, modify and QUERY_QP: 0x880 bits */
#define CQC 0x80        /* cq_context in CREATE_CQ */
#define QPC 0xc0        /* qpc in CREATE_QP, the modifies and QUERY_QP's output */
#define ADS (QPC + 0xc0) /* qpc.primary_address_path */
/* cqc */
#define CQC_DBR_UMEM_VALID CQC + 0x06, 1
#define CQC_DBR_UMEM_ID CQC + 0x20, 32
#define CQC_CC CQC + 0x0b, 1
#define CQC_OI CQC + 0x0e, 1
#define CQC_LOG_PAGE_SIZE CQC + 0xc3, 5
#define CQC_LOG_SIZE CQC + 0x63, 5
#define CQC_UAR_PAGE CQC + 0x68, 24
#define CQC_EQN CQC + 0xa0, 32
#define CQC_DBR_ADDR CQC + 0x1c0, 64
#define CQ_UMEM_OFFSET 0x280, 64
#define CQ_UMEM_ID 0x2c0, 32
#define CQ_UMEM_VALID 0x2e0, 1
/* qpc */
#define QPC_STATE QPC + 0x00, 4
#define QPC_ST QPC + 0x08, 8
#define QPC_PM_STATE QPC + 0x13, 2
#define QPC_PD QPC + 0x28, 24
#define QPC_MTU QPC + 0x40, 3
#define QPC_LOG_MSG_MAX QPC + 0x43, 5
#define QPC_LOG_SQ_SIZE QPC + 0x51, 4
#define QPC_TS_FORMAT QPC + 0x58, 2
#define QPC_UAR_PAGE QPC + 0x68, 24
#define QPC_REMOTE_QPN QPC + 0xa8, 24
#define QPC_LOG_SRA_MAX QPC + 0x388, 3
#define QPC_RETRY_COUNT QPC + 0x38d, 3
#define QPC_RNR_RETRY QPC + 0x390, 3
#define QPC_NEXT_SEND_PSN QPC + 0x3c8, 24
#define QPC_CQN_SND QPC + 0x3e8, 24
#define QPC_LOG_RRA_MAX QPC + 0x488, 3
#define QPC_ATOMIC_MODE QPC + 0x48c, 4
#define QPC_RRE QPC + 0x490, 1
#define QPC_RWE QPC + 0x491, 1
#define QPC_RAE QPC + 0x492, 1
#define QPC_MIN_RNR_NAK QPC + 0x4a3, 5
#define QPC_NEXT_RCV_PSN QPC + 0x4a8, 24
#define QPC_CQN_RCV QPC + 0x4e8, 24
#define QPC_DBR_ADDR QPC + 0x500, 64
#define QPC_RQ_TYPE QPC + 0x565, 3
#define QPC_SRQN QPC + 0x568, 24
#define QPC_USER_INDEX QPC + 0x88, 24
#define QPC_DBR_UMEM_VALID QPC + 0x683, 1
#define QPC_DBR_UMEM_ID QPC + 0x720, 32
#define WQ_UMEM_OFFSET 0x800, 64
#define WQ_UMEM_ID 0x840, 32
#define WQ_UMEM_VALID 0x860, 1
/* qpc.primary_address_path */
#define ADS_PKEY_INDEX ADS + 0x10, 16
#define ADS_GRH ADS + 0x28, 1
#define ADS_ACK_TIMEOUT ADS + 0x40, 5
#define ADS_SRC_ADDR_INDEX ADS + 0x48, 8
#define ADS_HOP_LIMIT ADS + 0x58, 8
#define ADS_RGID_BYTE ((ADS + 0x80) / 8)
#define ADS_UDP_SPORT ADS + 0x110, 16
#define ADS_VHCA_PORT ADS + 0x128, 8
#define ADS_RMAC_47_32 ADS + 0x130, 16
#define ADS_RMAC_31_0 ADS + 0x140, 32
/* QUERY_HCA_CAP's general capabilities, after the 0x80-bit header */
#define CAP_LOG_MAX_QP_SZ 0x80 + 0x88, 8
#define CAP_LOG_MAX_MSG 0x80 + 0x1c3, 5
#define CAP_PORT_TYPE 0x80 + 0x1b6, 2
#define CAP_NUM_PORTS 0x80 + 0x1b8, 8
#define CAP_CQE_VERSION 0x80 + 0x1fc, 4
#define CAP_LOG_BF_REG_SIZE 0x80 + 0x26b, 5
#define CAP_MAX_WQE_SZ_SQ 0x80 + 0x290, 16
#define CAP_MAX_WQE_SZ_RQ 0x80 + 0x2b0, 16
#define CAP_LOG_MAX_SRQ_SZ 0x80 + 0x80, 8
/* QUERY_HCA_CAP's atomic capabilities (op_mod 3 << 1 | 1) */
#define ATOMIC_ENDIANNESS 0x80 + 0x40, 2
#define ATOMIC_ENDIANNESS_SUP 0x80 + 0x46, 1
#define ATOMIC_OPS 0x80 + 0x90, 16
#define ATOMIC_SIZE_QP 0x80 + 0xb0, 16
#define ATOMIC_SIZE_DC 0x80 + 0xd0, 16
#define CAP_RC 0x80 + 0x23f, 1

/* ---- one side: a DevX CQ and RC QP with queues in one umem ------------------- */

#define LOG_SQ 6 /* 64 WQEBBs */
#define LOG_CQ 6
#define NSQ (1u << LOG_SQ)
#define NCQ (1u << LOG_CQ)
#define CQ_AT 0
#define SQ_AT (NCQ * 64)
#define DBR_AT (SQ_AT + NSQ * 64) /* CQ record, then (64 bytes on) the QP's */
#define QMEM (DBR_AT + 128)
#define BUF (1 << 20)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint32_t pdn;
	struct mlx5dv_devx_uar *uar;
	uint32_t eqn;
	uint8_t *qmem;
	struct mlx5dv_devx_umem *umem;
	struct mlx5dv_devx_obj *cq, *qp;
	uint32_t cqn, qpn;
	uint8_t *cqb, *sq;
	volatile uint32_t *cq_dbr, *qp_dbr;
	uint32_t ci; /* CQEs consumed */
	uint32_t pi; /* WQEBBs posted */
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gid_index;
	uint8_t mac[6]; /* of gid, as QUERY_ROCE_ADDRESS gives it */
	uint32_t psn;
	/* the shape of NVSHMEM's IBGDA RC QPs: a collapsed send CQ (every CQE
	 * in slot 0, overrun ignored), receives through an SRQ of
	 * ibv_create_srq, their completions in a CQ of ibv_create_cq */
	bool ibgda;
	/* the commands as GPUNetIO and IBGDA write them on RoCE: no pm_state
	 * at CREATE_QP, no grh and no port in INIT2RTR */
	bool lean;
	bool dci; /* a DC initiator (CREATE_QP of st DCI) */
	struct ibv_srq *srq;
	struct ibv_cq *rcq;
	uint32_t srqn, rcqn;
};

/* What a peer needs: its QP number, GID, PSN, buffer and rkey. */
struct peer_info {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
	uint8_t mac[6]; /* QUERY_ROCE_ADDRESS's source MAC of gid */
};

static struct ibv_context *open_devx(struct ibv_device *dev)
{
	CHECK(mlx5dv_is_supported(dev), "kinet0 is not an mlx5 device");
	struct mlx5dv_context_attr a = {.flags = MLX5DV_CONTEXT_FLAGS_DEVX};
	return mlx5dv_open_device(dev, &a);
}

/* kinet0, with DevX */
static struct ibv_context *open_kinet0(void)
{
	return vt_open_kinet("kinet0", open_devx);
}

/* A RoCE v2 GID of port 1. */
static int roce_gid(struct ibv_context *ctx, union ibv_gid *gid)
{
	for (int i = 0; i < 16; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0) == 0 &&
		    e.gid_type == IBV_GID_TYPE_ROCE_V2) {
			*gid = e.gid;
			return i;
		}
	}
	fail("no RoCE v2 GID on kinet0");
	return -1;
}

static void cmd_ok(int rc, const uint8_t *out, const char *what)
{
	CHECK(rc == 0, "%s: %s (status 0x%x, syndrome 0x%x)", what, strerror(rc),
	      (unsigned)prm_get(out, OUT_STATUS), (unsigned)prm_get(out, OUT_SYNDROME));
	CHECK(prm_get(out, OUT_STATUS) == 0, "%s: status 0x%x", what,
	      (unsigned)prm_get(out, OUT_STATUS));
}

static void side_open(struct side *s)
{
	s->ctx = open_kinet0();
	s->pd = ibv_alloc_pd(s->ctx);
	CHECK(s->pd, "ibv_alloc_pd");
	struct mlx5dv_pd dpd;
	struct mlx5dv_obj o = {.pd = {.in = s->pd, .out = &dpd}};
	CHECK(mlx5dv_init_obj(&o, MLX5DV_OBJ_PD) == 0, "mlx5dv_init_obj(PD)");
	s->pdn = dpd.pdn;
	s->gid_index = roce_gid(s->ctx, &s->gid);
	/* this GID's entry as the NIC holds it: GPUNetIO takes its GID and MAC
	 * from here (the MAC the peer's address handle must resolve) */
	uint8_t ra_in[16] = {0}, ra[RA_OUT_BYTES] = {0};
	prm_set(ra_in, OPCODE, OP_QUERY_ROCE_ADDRESS);
	prm_set(ra_in, RA_INDEX, (uint64_t)s->gid_index);
	prm_set(ra_in, RA_PORT, 1);
	cmd_ok(mlx5dv_devx_general_cmd(s->ctx, ra_in, sizeof(ra_in), ra, sizeof(ra)), ra,
	       "QUERY_ROCE_ADDRESS");
	CHECK(!memcmp(ra + RA_GID_BYTE, s->gid.raw, 16) && prm_get(ra, RA_VERSION) == 2,
	      "QUERY_ROCE_ADDRESS of GID %d: not its RoCE v2 GID", s->gid_index);
	memcpy(s->mac, ra + RA_MAC_BYTE, 6);

	/* QUERY_HCA_CAP (general, current): RC, message and queue sizes */
	uint8_t in[16] = {0}, cap[0x1010] = {0};
	prm_set(in, OPCODE, OP_QUERY_HCA_CAP);
	prm_set(in, OP_MOD, 0 << 1 | 1);
	cmd_ok(mlx5dv_devx_general_cmd(s->ctx, in, sizeof(in), cap, sizeof(cap)), cap,
	       "QUERY_HCA_CAP");
	CHECK(prm_get(cap, CAP_RC) == 1, "QUERY_HCA_CAP: no RC");
	CHECK(prm_get(cap, CAP_LOG_MAX_QP_SZ) >= LOG_SQ, "QUERY_HCA_CAP: log_max_qp_sz %u",
	      (unsigned)prm_get(cap, CAP_LOG_MAX_QP_SZ));
	CHECK(prm_get(cap, CAP_LOG_MAX_MSG) >= 20, "QUERY_HCA_CAP: log_max_msg");
	/* what IBGDA and GPUNetIO read: a RoCE port, the UAR's two registers */
	CHECK(prm_get(cap, CAP_PORT_TYPE) == 1 && prm_get(cap, CAP_NUM_PORTS) == 1,
	      "QUERY_HCA_CAP: port_type %u num_ports %u, want one Ethernet port",
	      (unsigned)prm_get(cap, CAP_PORT_TYPE), (unsigned)prm_get(cap, CAP_NUM_PORTS));
	CHECK(prm_get(cap, CAP_LOG_BF_REG_SIZE) >= 8, "QUERY_HCA_CAP: log_bf_reg_size");
	CHECK(prm_get(cap, CAP_CQE_VERSION) == 1, "QUERY_HCA_CAP: cqe_version %u, IBGDA needs 1",
	      (unsigned)prm_get(cap, CAP_CQE_VERSION));
	/* GPUNetIO divides by the send WQE size and bounds receive WQEs by the
	 * other: the software NIC's largest (63 units of 16 bytes; 32 data
	 * segments) */
	CHECK(prm_get(cap, CAP_MAX_WQE_SZ_SQ) == 1008 && prm_get(cap, CAP_MAX_WQE_SZ_RQ) == 512 &&
		      prm_get(cap, CAP_LOG_MAX_SRQ_SZ) == 15,
	      "QUERY_HCA_CAP: max_wqe_sz_sq %u, max_wqe_sz_rq %u, log_max_srq_sz %u",
	      (unsigned)prm_get(cap, CAP_MAX_WQE_SZ_SQ), (unsigned)prm_get(cap, CAP_MAX_WQE_SZ_RQ),
	      (unsigned)prm_get(cap, CAP_LOG_MAX_SRQ_SZ));
	/* the atomic capabilities, as IBGDA reads them: every RC atomic of 4 and
	 * 8 bytes, host byte order (IBV_ATOMIC_HCA), and the same sizes for DC,
	 * which IBGDA requires of any NIC (no DC is offered) */
	memset(cap, 0, sizeof(cap));
	prm_set(in, OP_MOD, 3 << 1 | 1);
	cmd_ok(mlx5dv_devx_general_cmd(s->ctx, in, sizeof(in), cap, sizeof(cap)), cap,
	       "QUERY_HCA_CAP (atomic)");
	CHECK(prm_get(cap, ATOMIC_OPS) == 0xf && prm_get(cap, ATOMIC_SIZE_QP) == 0xc &&
		      prm_get(cap, ATOMIC_SIZE_DC) == 0xc,
	      "atomic caps: operations 0x%x, sizes 0x%x (QP) 0x%x (DC)",
	      (unsigned)prm_get(cap, ATOMIC_OPS), (unsigned)prm_get(cap, ATOMIC_SIZE_QP),
	      (unsigned)prm_get(cap, ATOMIC_SIZE_DC));
	CHECK(prm_get(cap, ATOMIC_ENDIANNESS) == 1 && prm_get(cap, ATOMIC_ENDIANNESS_SUP) == 1,
	      "atomic caps: not host byte order");
	/* the RoCE capabilities, as GPUNetIO reads them: the GID table's size
	 * (it bounds the source GID index by it), v1 and v2, IPv4 and IPv6,
	 * RoCE v2's UDP ports */
	memset(cap, 0, sizeof(cap));
	prm_set(in, OP_MOD, 4 << 1 | 1);
	cmd_ok(mlx5dv_devx_general_cmd(s->ctx, in, sizeof(in), cap, sizeof(cap)), cap,
	       "QUERY_HCA_CAP (RoCE)");
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(s->ctx, 1, &pa) == 0, "ibv_query_port");
	CHECK(prm_get(cap, 0x80 + 0xf0, 16) == (uint64_t)pa.gid_tbl_len,
	      "RoCE caps: roce_address_table_size %u, the port's GID table %d",
	      (unsigned)prm_get(cap, 0x80 + 0xf0, 16), pa.gid_tbl_len);
	CHECK(prm_get(cap, 0x80 + 0x98, 8) == 0x5 && prm_get(cap, 0x80 + 0x8c, 4) == 0x6,
	      "RoCE caps: roce_version 0x%x, l3_type 0x%x", (unsigned)prm_get(cap, 0x80 + 0x98, 8),
	      (unsigned)prm_get(cap, 0x80 + 0x8c, 4));
	CHECK(prm_get(cap, 0x80 + 0xb0, 16) == 4791 && prm_get(cap, 0x80 + 0xd0, 16) == 0xc000 &&
		      prm_get(cap, 0x80 + 0xc0, 16) == 0xffff,
	      "RoCE caps: UDP ports");

	CHECK(mlx5dv_devx_query_eqn(s->ctx, 0, &s->eqn) == 0, "mlx5dv_devx_query_eqn");
	s->uar = mlx5dv_devx_alloc_uar(s->ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
	CHECK(s->uar && s->uar->reg_addr, "mlx5dv_devx_alloc_uar: %s", strerror(errno));

	CHECK(posix_memalign((void **)&s->qmem, 4096, QMEM) == 0, "memory");
	memset(s->qmem, 0, QMEM);
	s->umem = mlx5dv_devx_umem_reg(s->ctx, s->qmem, QMEM, IBV_ACCESS_LOCAL_WRITE);
	CHECK(s->umem, "mlx5dv_devx_umem_reg: %s", strerror(errno));
	s->cqb = s->qmem + CQ_AT;
	s->sq = s->qmem + SQ_AT;
	s->cq_dbr = (volatile uint32_t *)(s->qmem + DBR_AT);
	s->qp_dbr = (volatile uint32_t *)(s->qmem + DBR_AT + 64);
	for (uint32_t i = 0; i < NCQ; i++) /* invalid, hardware-owned: nothing on lap 0 */
		((struct mlx5_cqe64 *)(s->cqb + 64 * i))->op_own = MLX5_CQE_INVALID << 4 | 1;

	uint8_t cin[CMD_BYTES] = {0}, out[CMD_BYTES] = {0};
	prm_set(cin, OPCODE, OP_CREATE_CQ);
	prm_set(cin, CQC_LOG_SIZE, LOG_CQ);
	prm_set(cin, CQC_UAR_PAGE, s->uar->page_id);
	prm_set(cin, CQC_EQN, s->eqn);
	prm_set(cin, CQC_LOG_PAGE_SIZE, 4); /* 64 KiB pages, as IBGDA asks */
	prm_set(cin, CQC_DBR_UMEM_VALID, 1);
	prm_set(cin, CQC_DBR_UMEM_ID, s->umem->umem_id);
	prm_set(cin, CQC_DBR_ADDR, DBR_AT);
	prm_set(cin, CQ_UMEM_VALID, 1);
	prm_set(cin, CQ_UMEM_ID, s->umem->umem_id);
	prm_set(cin, CQ_UMEM_OFFSET, CQ_AT);
	if (s->ibgda) {
		prm_set(cin, CQC_CC, 1);
		prm_set(cin, CQC_OI, 1);
	}
	s->cq = mlx5dv_devx_obj_create(s->ctx, cin, sizeof(cin), out, sizeof(out));
	CHECK(s->cq, "CREATE_CQ: %s (status 0x%x)", strerror(errno),
	      (unsigned)prm_get(out, OUT_STATUS));
	s->cqn = (uint32_t)prm_get(out, OBJ_NUM);

	uint8_t qin[CMD_BYTES] = {0};
	memset(out, 0, sizeof(out));
	prm_set(qin, OPCODE, OP_CREATE_QP);
	prm_set(qin, QPC_ST, s->dci ? 0x5 : 0x0); /* DCI or RC */
	if (!s->lean)
		prm_set(qin, QPC_PM_STATE, 0x3);
	prm_set(qin, QPC_PD, s->pdn);
	prm_set(qin, QPC_UAR_PAGE, s->uar->page_id);
	prm_set(qin, QPC_LOG_SQ_SIZE, LOG_SQ);
	prm_set(qin, QPC_RQ_TYPE, 0x3); /* zero-size receive queue */
	prm_set(qin, QPC_TS_FORMAT, 0x1);
	prm_set(qin, QPC_CQN_SND, s->cqn);
	prm_set(qin, QPC_CQN_RCV, s->cqn);
	if (s->ibgda) {
		/* an SRQ and a receive CQ of verbs, named by the numbers
		 * mlx5dv_init_obj gives */
		struct ibv_srq_init_attr sa = {.attr = {.max_wr = 64, .max_sge = 1}};
		s->srq = ibv_create_srq(s->pd, &sa);
		CHECK(s->srq, "ibv_create_srq: %s", strerror(errno));
		s->rcq = ibv_create_cq(s->ctx, 128, NULL, NULL, 0);
		CHECK(s->rcq, "ibv_create_cq: %s", strerror(errno));
		struct mlx5dv_srq dsrq = {.comp_mask = MLX5DV_SRQ_MASK_SRQN};
		struct mlx5dv_cq dcq;
		struct mlx5dv_obj ob = {.srq = {.in = s->srq, .out = &dsrq},
					.cq = {.in = s->rcq, .out = &dcq}};
		CHECK(mlx5dv_init_obj(&ob, MLX5DV_OBJ_SRQ | MLX5DV_OBJ_CQ) == 0,
		      "mlx5dv_init_obj(SRQ, CQ)");
		CHECK((dsrq.comp_mask & MLX5DV_SRQ_MASK_SRQN) && dsrq.srqn != 0 && dsrq.buf &&
			      dsrq.dbrec && dsrq.stride >= 32 && dsrq.head == 0 && dsrq.tail >= 64,
		      "mlx5dv_init_obj(SRQ): srqn 0x%x stride %u head %u tail %u", dsrq.srqn,
		      dsrq.stride, dsrq.head, dsrq.tail);
		s->srqn = dsrq.srqn;
		s->rcqn = dcq.cqn;
		prm_set(qin, QPC_RQ_TYPE, 0x1); /* SRQ */
		prm_set(qin, QPC_SRQN, s->srqn);
		prm_set(qin, QPC_CQN_RCV, s->rcqn);
		prm_set(qin, QPC_USER_INDEX, 7);
	}
	prm_set(qin, QPC_DBR_UMEM_VALID, 1);
	prm_set(qin, QPC_DBR_UMEM_ID, s->umem->umem_id);
	prm_set(qin, QPC_DBR_ADDR, DBR_AT + 64);
	prm_set(qin, WQ_UMEM_VALID, 1);
	prm_set(qin, WQ_UMEM_ID, s->umem->umem_id);
	prm_set(qin, WQ_UMEM_OFFSET, SQ_AT);
	s->qp = mlx5dv_devx_obj_create(s->ctx, qin, sizeof(qin), out, sizeof(out));
	CHECK(s->qp, "CREATE_QP: %s (status 0x%x)", strerror(errno),
	      (unsigned)prm_get(out, OUT_STATUS));
	s->qpn = (uint32_t)prm_get(out, OBJ_NUM);
	CHECK(s->qpn > 0 && s->qpn <= 0xffffff, "CREATE_QP: QP number 0x%x", s->qpn);

	s->buf = aligned_alloc(4096, BUF);
	CHECK(s->buf, "memory");
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(s->mr, "ibv_reg_mr: %s", strerror(errno));
	s->psn = (uint32_t)rnd() & 0xffffff;
}

static struct peer_info side_info(const struct side *s)
{
	struct peer_info p = {s->qpn, s->psn, s->mr->rkey, (uint64_t)(uintptr_t)s->buf, s->gid,
			      {0}};
	memcpy(p.mac, s->mac, 6);
	return p;
}

static void modify(struct side *s, uint8_t *in, uint16_t op, const char *what)
{
	uint8_t out[16] = {0xff};
	prm_set(in, OPCODE, op);
	prm_set(in, OBJ_NUM, s->qpn);
	cmd_ok(mlx5dv_devx_obj_modify(s->qp, in, CMD_BYTES, out, sizeof(out)), out, what);
}

/* The QP's state as QUERY_QP reports it; the context into qpc (CMD_BYTES). */
static unsigned query_qp(struct side *s, uint8_t *out)
{
	uint8_t in[16] = {0};
	prm_set(in, OPCODE, OP_QUERY_QP);
	prm_set(in, OBJ_NUM, s->qpn);
	memset(out, 0xa5, CMD_BYTES);
	cmd_ok(mlx5dv_devx_obj_query(s->qp, in, sizeof(in), out, CMD_BYTES), out, "QUERY_QP");
	return (unsigned)prm_get(out, QPC_STATE);
}

/* RTR2RTS with the send PSN given, the retries and read depth of both
 * connect paths. */
static void rtr2rts(struct side *s, uint32_t psn, const char *what)
{
	uint8_t in[CMD_BYTES];
	memset(in, 0, sizeof(in));
	prm_set(in, QPC_NEXT_SEND_PSN, psn);
	prm_set(in, ADS_ACK_TIMEOUT, 14);
	prm_set(in, QPC_RETRY_COUNT, 7);
	prm_set(in, QPC_RNR_RETRY, 7);
	prm_set(in, QPC_LOG_SRA_MAX, 4);
	modify(s, in, OP_RTR2RTS, what);
}

/* RST2INIT, INIT2RTR to the peer (its QP number and GID in the address
 * path), RTR2RTS, checking QUERY_QP after each. */
static void side_connect(struct side *s, const struct peer_info *p)
{
	uint8_t in[CMD_BYTES], q[CMD_BYTES];
	CHECK(query_qp(s, q) == 0, "QUERY_QP: a new QP is not in RESET");
	memset(in, 0, sizeof(in));
	prm_set(in, QPC_RWE, 1);
	prm_set(in, QPC_RRE, 1);
	prm_set(in, QPC_RAE, 1);
	prm_set(in, QPC_ATOMIC_MODE, 0x1);
	prm_set(in, ADS_VHCA_PORT, 1);
	prm_set(in, ADS_PKEY_INDEX, 0);
	modify(s, in, OP_RST2INIT, "RST2INIT");
	CHECK(query_qp(s, q) == 1, "QUERY_QP: not INIT after RST2INIT");
	CHECK(prm_get(q, QPC_RWE) == 1 && prm_get(q, QPC_RAE) == 1, "QUERY_QP: access bits");

	memset(in, 0, sizeof(in));
	prm_set(in, QPC_MTU, IBV_MTU_1024);
	prm_set(in, QPC_LOG_MSG_MAX, 30);
	prm_set(in, QPC_REMOTE_QPN, p->qpn);
	prm_set(in, QPC_NEXT_RCV_PSN, p->psn);
	prm_set(in, QPC_LOG_RRA_MAX, 4);
	prm_set(in, QPC_MIN_RNR_NAK, 12);
	if (!s->lean)
		prm_set(in, ADS_GRH, 1);
	memcpy(in + ADS_RGID_BYTE, p->gid.raw, 16);
	if (s->lean) {
		/* as IBGDA: the next hop's MAC and the GID from an address handle */
		struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .dlid = 0xc000};
		aa.grh.dgid = p->gid;
		aa.grh.sgid_index = (uint8_t)s->gid_index;
		struct ibv_ah *ah = ibv_create_ah(s->pd, &aa);
		CHECK(ah, "ibv_create_ah: %s", strerror(errno));
		struct mlx5dv_ah dah;
		struct mlx5dv_obj ob = {.ah = {.in = ah, .out = &dah}};
		CHECK(mlx5dv_init_obj(&ob, MLX5DV_OBJ_AH) == 0 && dah.av, "mlx5dv_init_obj(AH)");
		static const uint8_t zero[6];
		CHECK(!memcmp(dah.av->rgid, p->gid.raw, 16) && memcmp(dah.av->rmac, zero, 6),
		      "the AH's address vector: GID or MAC");
		CHECK(!memcmp(dah.av->rmac, p->mac, 6),
		      "the AH's MAC is not the one the peer's QUERY_ROCE_ADDRESS gave");
		CHECK(be16toh(dah.av->rlid) == 0xc000, "the AH's rlid (IBGDA's UDP port base)");
		memcpy(in + ADS_RGID_BYTE, dah.av->rgid, 16);
		prm_set(in, ADS_RMAC_47_32, (uint64_t)dah.av->rmac[0] << 8 | dah.av->rmac[1]);
		prm_set(in, ADS_RMAC_31_0,
			(uint64_t)dah.av->rmac[2] << 24 | (uint64_t)dah.av->rmac[3] << 16 |
				(uint64_t)dah.av->rmac[4] << 8 | dah.av->rmac[5]);
		CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
		/* RoCE addresses are global; the port is 1; the GID index a RoCE one */
		struct ibv_ah_attr bad[] = {aa, aa, aa};
		bad[0].is_global = 0;
		bad[1].port_num = 2;
		bad[2].grh.sgid_index = 200;
		for (int i = 0; i < 3; i++) {
			errno = 0;
			CHECK(!ibv_create_ah(s->pd, &bad[i]) && errno == EINVAL,
			      "ibv_create_ah of bad address %d: errno %d", i, errno);
		}
	}
	prm_set(in, ADS_SRC_ADDR_INDEX, (uint64_t)s->gid_index);
	prm_set(in, ADS_HOP_LIMIT, 64);
	prm_set(in, ADS_UDP_SPORT, 0xc000 | (s->qpn & 0x3fff));
	if (!s->lean) {
		prm_set(in, ADS_VHCA_PORT, 1);
		prm_set(in, ADS_RMAC_47_32, 0x02aa);
		prm_set(in, ADS_RMAC_31_0, 0xbbccddee);
	}
	modify(s, in, OP_INIT2RTR, "INIT2RTR");
	CHECK(query_qp(s, q) == 2, "QUERY_QP: not RTR after INIT2RTR");
	CHECK(prm_get(q, QPC_REMOTE_QPN) == p->qpn, "QUERY_QP: remote_qpn 0x%x, want 0x%x",
	      (unsigned)prm_get(q, QPC_REMOTE_QPN), p->qpn);
	CHECK(!memcmp(q + ADS_RGID_BYTE, p->gid.raw, 16), "QUERY_QP: remote GID");
	CHECK(prm_get(q, QPC_NEXT_RCV_PSN) == p->psn, "QUERY_QP: next_rcv_psn");

	rtr2rts(s, s->psn, "RTR2RTS");
	CHECK(query_qp(s, q) == 3, "QUERY_QP: not RTS after RTR2RTS");
	CHECK(prm_get(q, QPC_NEXT_SEND_PSN) == s->psn, "QUERY_QP: next_send_psn");
	CHECK(prm_get(q, QPC_CQN_SND) == s->cqn && prm_get(q, QPC_PD) == s->pdn,
	      "QUERY_QP: CQ or PD of the context");
}

/* ---- the data path, as a GPU-initiated stack writes it ----------------------- */

static uint32_t post_lkey_xor; /* a bad local key, when not 0 */

/* One WQE: ctrl, remote address, [atomic], one data segment; signaled. */
static void ring(struct side *s, const uint8_t *w);

static void post(struct side *s, uint8_t opcode, uint64_t laddr, uint32_t len, uint64_t raddr,
		 uint32_t rkey, uint64_t swap_add, uint64_t cmp)
{
	uint8_t *w = s->sq + (s->pi & (NSQ - 1)) * 64;
	memset(w, 0, 64);
	bool atomic = opcode == MLX5_OPCODE_ATOMIC_CS || opcode == MLX5_OPCODE_ATOMIC_FA;
	bool send = opcode == MLX5_OPCODE_SEND || opcode == OP_DUMP;
	uint8_t ds = atomic ? 4 : send ? 2 : 3;
	struct mlx5_wqe_ctrl_seg *c = (void *)w;
	mlx5dv_set_ctrl_seg(c, (uint16_t)s->pi, opcode, 0, s->qpn, MLX5_WQE_CTRL_CQ_UPDATE, ds, 0,
			    0);
	struct mlx5_wqe_raddr_seg *r = (void *)(w + 16);
	r->raddr = htobe64(raddr);
	r->rkey = htobe32(rkey);
	struct mlx5_wqe_data_seg *d = (void *)(w + 32);
	if (atomic) {
		struct mlx5_wqe_atomic_seg *a = (void *)(w + 32);
		a->swap_add = htobe64(swap_add);
		a->compare = htobe64(cmp);
		d = (void *)(w + 48);
	}
	if (send)
		d = (void *)(w + 16); /* no remote address */
	mlx5dv_set_data_seg(d, len, s->mr->lkey ^ post_lkey_xor, laddr);
	ring(s, w);
}

/* The WQE at w posted: the record, then the register. */
static void ring(struct side *s, const uint8_t *w)
{
	s->pi++;
	/* the record, then the register: the WQE before either */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	s->qp_dbr[MLX5_SND_DBR] = htobe32(s->pi & 0xffff);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	uint64_t word;
	memcpy(&word, w, 8);
	*(volatile uint64_t *)s->uar->reg_addr = word;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The next CQE within 5 s: its opcode; wqe_counter and syndrome out. */
static uint8_t poll_cqe(struct side *s, uint16_t *wqe_counter, uint8_t *syndrome)
{
	if (s->ibgda) {
		/* collapsed, as IBGDA polls it: slot 0's wqe_counter reaches the
		 * WQE; its owner bit that of a CQ of one entry; the other slots
		 * never written */
		struct mlx5_cqe64 *e = (void *)s->cqb;
		uint64_t end = now_ns() + 5000000000ull;
		for (;;) {
			uint8_t op_own = __atomic_load_n(&e->op_own, __ATOMIC_ACQUIRE);
			if ((op_own >> 4) != MLX5_CQE_INVALID &&
			    be16toh(__atomic_load_n(&e->wqe_counter, __ATOMIC_ACQUIRE)) ==
				    (uint16_t)s->ci)
				break;
			CHECK(now_ns() < end, "no CQE %u in the collapsed CQ within 5 s (QP 0x%x)",
			      s->ci, s->qpn);
		}
		uint8_t op_own = e->op_own;
		CHECK((op_own & 1) == (s->ci & 1), "collapsed CQE %u: owner bit %u", s->ci,
		      op_own & 1);
		for (uint32_t i = 1; i < NCQ; i++)
			CHECK(((struct mlx5_cqe64 *)(s->cqb + 64 * i))->op_own ==
				      (MLX5_CQE_INVALID << 4 | 1),
			      "the collapsed CQ's slot %u was written", i);
		uint8_t op = mlx5dv_get_cqe_opcode(e);
		*wqe_counter = be16toh(e->wqe_counter);
		*syndrome = op == MLX5_CQE_REQ_ERR ? ((struct mlx5_err_cqe *)e)->syndrome : 0;
		s->ci++;
		return op;
	}
	struct mlx5_cqe64 *e = (void *)(s->cqb + (s->ci & (NCQ - 1)) * 64);
	uint8_t lap = (s->ci >> LOG_CQ) & 1;
	uint64_t end = now_ns() + 5000000000ull;
	for (;;) {
		uint8_t op_own = __atomic_load_n(&e->op_own, __ATOMIC_ACQUIRE);
		if ((op_own >> 4) != MLX5_CQE_INVALID && (op_own & 1) == lap)
			break;
		CHECK(now_ns() < end, "no CQE %u within 5 s (QP 0x%x, %u WQEBBs posted)", s->ci,
		      s->qpn, s->pi);
	}
	uint8_t op = mlx5dv_get_cqe_opcode(e);
	*wqe_counter = be16toh(e->wqe_counter);
	*syndrome = op == MLX5_CQE_REQ_ERR ? ((struct mlx5_err_cqe *)e)->syndrome : 0;
	s->ci++;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*s->cq_dbr = htobe32(s->ci & 0xffffff); /* the slot is the NIC's again */
	return op;
}

static void expect_ok(struct side *s, const char *what)
{
	uint16_t wc;
	uint8_t syn;
	uint8_t op = poll_cqe(s, &wc, &syn);
	CHECK(op == MLX5_CQE_REQ, "%s: CQE opcode 0x%x (syndrome 0x%x)", what, op, syn);
	CHECK(wc == (uint16_t)(s->ci - 1), "%s: wqe_counter %u, want %u", what, wc,
	      (uint16_t)(s->ci - 1));
}

/* Writes, reads and atomics from s into the peer's buffer, over laps of both
 * queues; peer_buf is the peer's buffer when it is readable here (one
 * process), else NULL: the data then comes back with reads. Each buffer is
 * four quarters: the peer writes into the first (and its atomic word is
 * there), the second holds what this side sends, the third what it reads
 * back, the fourth atomic results. */
#define QTR (BUF / 4)
static void traffic(struct side *s, const struct peer_info *p, uint8_t *peer_buf, uint32_t rounds)
{
	uint8_t *src = s->buf + QTR, *back = s->buf + 2 * QTR;
	for (uint32_t round = 0; round < rounds; round++) {
		uint32_t len = 1 + (uint32_t)(rnd() % 4096);
		uint32_t lo = (uint32_t)(rnd() % (QTR - len));
		uint32_t ro = (uint32_t)(rnd() % (QTR / 2 - len)); /* the atomic word is above */
		fill(src + lo, len);
		post(s, MLX5_OPCODE_RDMA_WRITE, (uint64_t)(uintptr_t)(src + lo), len, p->addr + ro,
		     p->rkey, 0, 0);
		expect_ok(s, "RDMA write");
		/* read it back, and compare */
		memset(back + lo, 0, len);
		post(s, MLX5_OPCODE_RDMA_READ, (uint64_t)(uintptr_t)(back + lo), len, p->addr + ro,
		     p->rkey, 0, 0);
		expect_ok(s, "RDMA read");
		if (round % 8 == 0) {
			/* IBGDA's read consistency: a DUMP of one byte of what was read */
			post(s, OP_DUMP, (uint64_t)(uintptr_t)(back + lo), 1, 0, 0, 0, 0);
			expect_ok(s, "DUMP");
		}
		CHECK(!memcmp(src + lo, back + lo, len), "RDMA write/read: data differ (round %u, "
		      "%u bytes)", round, len);
		if (peer_buf)
			CHECK(!memcmp(peer_buf + ro, src + lo, len), "RDMA write: target differs "
			      "(round %u, %u bytes)", round, len);
	}
	/* a large write and read, 128 KiB */
	const uint32_t big = QTR / 2;
	fill(src, big);
	post(s, MLX5_OPCODE_RDMA_WRITE, (uint64_t)(uintptr_t)src, big, p->addr, p->rkey, 0, 0);
	expect_ok(s, "RDMA write 128 KiB");
	memset(back, 0, big);
	post(s, MLX5_OPCODE_RDMA_READ, (uint64_t)(uintptr_t)back, big, p->addr, p->rkey, 0, 0);
	expect_ok(s, "RDMA read 128 KiB");
	CHECK(!memcmp(src, back, big), "128 KiB write/read: data differ");

	/* atomics on an 8-byte word of the peer, in host byte order (the
	 * device's atomics are the host's, IBV_ATOMIC_HCA); the old value
	 * lands big-endian, as the PRM's responder returns it */
	const uint64_t at = p->addr + QTR - 64;
	uint64_t v = rnd();
	uint64_t *res = (uint64_t *)(s->buf + 3 * QTR);
	uint64_t *word = (uint64_t *)src;
	*word = v;
	post(s, MLX5_OPCODE_RDMA_WRITE, (uint64_t)(uintptr_t)word, 8, at, p->rkey, 0, 0);
	expect_ok(s, "RDMA write of the atomic word");
	for (int i = 0; i < 64; i++) {
		uint64_t add = rnd();
		*res = 0;
		post(s, MLX5_OPCODE_ATOMIC_FA, (uint64_t)(uintptr_t)res, 8, at, p->rkey, add, 0);
		expect_ok(s, "fetch-and-add");
		CHECK(be64toh(*res) == v, "fetch-and-add: old value 0x%" PRIx64 ", want 0x%" PRIx64,
		      be64toh(*res), v);
		v += add;
		uint64_t swap = rnd();
		bool hit = rnd() & 1;
		*res = 0;
		post(s, MLX5_OPCODE_ATOMIC_CS, (uint64_t)(uintptr_t)res, 8, at, p->rkey, swap,
		     hit ? v : ~v);
		expect_ok(s, "compare-and-swap");
		CHECK(be64toh(*res) == v, "compare-and-swap: old value 0x%" PRIx64 ", want 0x%" PRIx64,
		      be64toh(*res), v);
		if (hit)
			v = swap;
	}
	*res = 0;
	post(s, MLX5_OPCODE_RDMA_READ, (uint64_t)(uintptr_t)res, 8, at, p->rkey, 0, 0);
	expect_ok(s, "RDMA read of the atomic word");
	CHECK(*res == v, "atomics: final value 0x%" PRIx64 ", want 0x%" PRIx64, *res, v);
	if (peer_buf)
		CHECK(*(uint64_t *)(peer_buf + QTR - 64) == v, "atomics: the target's word");
}

/* A bad rkey: an error CQE (remote access), and QUERY_QP says ERR. */
static void bad_rkey(struct side *s, const struct peer_info *p)
{
	post(s, MLX5_OPCODE_RDMA_WRITE, (uint64_t)(uintptr_t)s->buf, 64, p->addr, p->rkey ^ 0x5500,
	     0, 0);
	uint16_t wc;
	uint8_t syn;
	uint8_t op = poll_cqe(s, &wc, &syn);
	CHECK(op == MLX5_CQE_REQ_ERR, "bad rkey: CQE opcode 0x%x, want an error CQE", op);
	CHECK(syn == MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, "bad rkey: syndrome 0x%x", syn);
	uint8_t q[CMD_BYTES];
	CHECK(query_qp(s, q) == 6, "QUERY_QP: not ERR after an error CQE");
}

/* ---- bad commands ------------------------------------------------------------ */

/* Runs f with stderr in a file: what it logged. */
static char logbuf[8192];
static const char *logged(void (*f)(struct side *), struct side *s)
{
	FILE *t = vt_capture_begin();
	f(s);
	return vt_capture_end(t, logbuf, sizeof(logbuf));
}

static const char *logged_void(void (*f)(void))
{
	FILE *t = vt_capture_begin();
	f();
	return vt_capture_end(t, logbuf, sizeof(logbuf));
}

static void refused(int rc, int err, const uint8_t *out, const char *what)
{
	CHECK(rc == EREMOTEIO && err == EREMOTEIO, "%s: rc %d errno %d, want EREMOTEIO", what, rc,
	      err);
	CHECK(prm_get(out, OUT_STATUS) != 0 && prm_get(out, OUT_SYNDROME) != 0,
	      "%s: no status and syndrome in the output", what);
}

/* A CREATE_CQ command of 2^lg CQEs on s's UAR and EQ, its buffer and
 * doorbell record in umem `umem`. */
static void cq_cmd(const struct side *s, uint8_t *in, unsigned lg, uint32_t umem)
{
	memset(in, 0, CMD_BYTES);
	prm_set(in, OPCODE, OP_CREATE_CQ);
	prm_set(in, CQC_LOG_SIZE, lg);
	prm_set(in, CQC_UAR_PAGE, s->uar->page_id);
	prm_set(in, CQC_EQN, s->eqn);
	prm_set(in, CQC_DBR_UMEM_VALID, 1);
	prm_set(in, CQC_DBR_UMEM_ID, umem);
	prm_set(in, CQ_UMEM_VALID, 1);
	prm_set(in, CQ_UMEM_ID, umem);
}

/* mlx5dv_devx_obj_create of `in` (CMD_BYTES) is refused as firmware does. */
static void create_refused(const struct side *s, const uint8_t *in, const char *what)
{
	uint8_t out[CMD_BYTES];
	memset(out, 0, sizeof(out));
	errno = 0;
	struct mlx5dv_devx_obj *o = mlx5dv_devx_obj_create(s->ctx, in, CMD_BYTES, out, sizeof(out));
	CHECK(!o, "%s succeeded", what);
	refused(EREMOTEIO, errno, out, what);
}

static void bad_commands(struct side *s)
{
	uint8_t in[CMD_BYTES] = {0}, out[CMD_BYTES];

	/* CREATE_QP of a UD QP: refused by the "firmware" */
	prm_set(in, OPCODE, OP_CREATE_QP);
	prm_set(in, QPC_ST, 0x2);
	prm_set(in, QPC_PM_STATE, 0x3);
	create_refused(s, in, "CREATE_QP of a UD QP");

	/* CREATE_CQ over a umem that does not exist */
	cq_cmd(s, in, LOG_CQ, 0xdead);
	create_refused(s, in, "CREATE_CQ over an unknown umem");

	/* a collapsed CQ (every CQE in slot 0) without overrun ignore */
	cq_cmd(s, in, LOG_CQ, s->umem->umem_id);
	prm_set(in, CQC_CC, 1);
	create_refused(s, in, "CREATE_CQ of a collapsed CQ");

	/* a CQ buffer off the CQE size's alignment: the NIC's CQE stores are
	 * whole words, so it is refused (one CQE at umem offset 8) */
	cq_cmd(s, in, 0, s->umem->umem_id);
	prm_set(in, CQ_UMEM_OFFSET, 8);
	create_refused(s, in, "CREATE_CQ at umem offset 8");

	/* a modify the device does not have; one naming another QP */
	memset(in, 0, sizeof(in));
	prm_set(in, OPCODE, OP_INIT2INIT);
	prm_set(in, OBJ_NUM, s->qpn);
	memset(out, 0, sizeof(out));
	errno = 0;
	int rc = mlx5dv_devx_obj_modify(s->qp, in, sizeof(in), out, sizeof(out));
	refused(rc, errno, out, "INIT2INIT");
	memset(in, 0, sizeof(in));
	prm_set(in, OPCODE, OP_QUERY_QP);
	prm_set(in, OBJ_NUM, s->qpn ^ 1);
	memset(out, 0, sizeof(out));
	errno = 0;
	rc = mlx5dv_devx_obj_query(s->qp, in, 16, out, sizeof(out));
	refused(rc, errno, out, "QUERY_QP of another QP");
	/* INIT2RTR without a message size */
	memset(in, 0, sizeof(in));
	prm_set(in, OPCODE, OP_INIT2RTR);
	prm_set(in, OBJ_NUM, s->qpn);
	memset(out, 0, sizeof(out));
	errno = 0;
	rc = mlx5dv_devx_obj_modify(s->qp, in, sizeof(in), out, sizeof(out));
	refused(rc, errno, out, "INIT2RTR with log_msg_max 0");

	/* objects in use; bad arguments */
	CHECK(mlx5dv_devx_umem_dereg(s->umem) == EBUSY, "umem_dereg of a umem in use: not EBUSY");
	CHECK(mlx5dv_devx_obj_destroy(s->cq) == EBUSY, "destroy of a QP's CQ: not EBUSY");
	errno = 0;
	CHECK(!mlx5dv_devx_umem_reg(s->ctx, NULL, 4096, 0) && errno == EINVAL,
	      "umem_reg of NULL: not EINVAL");
	/* a dma-buf umem is GPU memory: refused */
	struct mlx5dv_devx_umem_in uin = {
		.addr = s->qmem, .size = 4096, .access = IBV_ACCESS_LOCAL_WRITE,
		.comp_mask = MLX5DV_UMEM_MASK_DMABUF, .dmabuf_fd = 0,
	};
	errno = 0;
	CHECK(!mlx5dv_devx_umem_reg_ex(s->ctx, &uin) && errno == EOPNOTSUPP,
	      "umem_reg_ex of a dma-buf: not EOPNOTSUPP");
}

static void check_bad_commands(struct side *s)
{
	const char *log = logged(bad_commands, s);
	static const char *const want[] = {
		"CREATE_QP", "CREATE_CQ", "collapsed", "64-byte aligned", "unsupported opcode", "another QP", "log_msg_max",
		"EBUSY", "umem_reg", "dma-buf",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(strstr(log, want[i]), "no log line about \"%s\"; the log:\n%s", want[i], log);
}

/* The UAR freed while its QP is in RTS: the NIC still reads the register,
 * so the page must stay until the QP goes (no crash), and a line says so. */
static void free_uar_early(struct side *s)
{
	mlx5dv_devx_free_uar(s->uar);
	s->uar = NULL;
	usleep(100 * 1000); /* engine passes over the QP, reading its register */
}

static void side_close(struct side *s)
{
	if (s->srq) /* in use by the QP */
		CHECK(ibv_destroy_srq(s->srq) == EBUSY, "ibv_destroy_srq of a DevX QP's SRQ");
	CHECK(mlx5dv_devx_obj_destroy(s->qp) == 0, "destroy QP");
	CHECK(mlx5dv_devx_obj_destroy(s->cq) == 0, "destroy CQ");
	if (s->srq)
		CHECK(ibv_destroy_srq(s->srq) == 0 && ibv_destroy_cq(s->rcq) == 0,
		      "destroy the SRQ and receive CQ");
	CHECK(mlx5dv_devx_umem_dereg(s->umem) == 0, "umem_dereg");
	mlx5dv_devx_free_uar(s->uar);
	CHECK(ibv_dereg_mr(s->mr) == 0, "ibv_dereg_mr");
	CHECK(ibv_dealloc_pd(s->pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(s->ctx) == 0, "ibv_close_device");
	free(s->buf);
	free(s->qmem);
}

/* A verbs QP (ibv_create_qp, ibv_modify_qp) as the peer of a DevX QP: the
 * two kinds find each other by QP number and GID alike. */
static void devx_to_verbs(void)
{
	struct side d;
	memset(&d, 0, sizeof(d));
	side_open(&d);
	struct ibv_context *ctx = open_kinet0();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	CHECK(cq, "verbs peer: PD and CQ");
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 16, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "verbs peer: ibv_create_qp: %s", strerror(errno));
	uint8_t *buf = aligned_alloc(4096, BUF);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, BUF,
					     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						     IBV_ACCESS_REMOTE_READ |
						     IBV_ACCESS_REMOTE_ATOMIC)
				: NULL;
	CHECK(mr, "verbs peer: ibv_reg_mr");
	union ibv_gid gid;
	int gi = roce_gid(ctx, &gid);
	uint32_t psn = (uint32_t)rnd() & 0xffffff;
	vt_rc_init_rtr(qp,
		       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
		       IBV_MTU_1024, d.qpn, d.psn, &d.gid, gi, 64);
	vt_rc_rts(qp, psn);
	struct peer_info pv = {qp->qp_num, psn, mr->rkey, (uint64_t)(uintptr_t)buf, gid, {0}};
	side_connect(&d, &pv);
	traffic(&d, &pv, buf, NSQ);
	CHECK(!ibv_destroy_qp(qp) && !ibv_destroy_cq(cq) && !ibv_dereg_mr(mr) &&
	      !ibv_dealloc_pd(pd) && !ibv_close_device(ctx), "verbs peer: cleanup");
	free(buf);
	side_close(&d);
	printf("%s: one process: DevX QP 0x%x with verbs QP 0x%x: ok\n", who, d.qpn, pv.qpn);
}

/* A context of ibv_open_device, which rdma-core 44 opens for DevX where
 * the kernel allows it: QUERY_HCA_CAP, umem, UAR and EQ work there; a
 * command that makes an object is EINVAL as a general command. The capability pages of features the software NIC lacks
 * (NIC flow table 0x7, device memory 0xf) are all zeros, as pyverbs'
 * tests read them to decide to skip. */
static void plain_context(void)
{
	struct ibv_context *ctx = vt_open_kinet("kinet0", NULL);
	uint8_t in[16] = {0}, cap[0x1010];
	prm_set(in, OPCODE, OP_QUERY_HCA_CAP);
	prm_set(in, OP_MOD, 0 << 1 | 1);
	fill(cap, sizeof(cap));
	cmd_ok(mlx5dv_devx_general_cmd(ctx, in, sizeof(in), cap, sizeof(cap)), cap,
	       "QUERY_HCA_CAP on a context without DevX");
	CHECK(prm_get(cap, CAP_RC) == 1, "QUERY_HCA_CAP without DevX: no RC");
	const unsigned zero_types[] = {0x7, 0xf};
	for (size_t t = 0; t < sizeof(zero_types) / sizeof(zero_types[0]); t++) {
		prm_set(in, OP_MOD, zero_types[t] << 1 | 1);
		fill(cap, sizeof(cap));
		cmd_ok(mlx5dv_devx_general_cmd(ctx, in, sizeof(in), cap, sizeof(cap)), cap,
		       "QUERY_HCA_CAP of a capability the NIC lacks");
		for (size_t i = 0; i < sizeof(cap); i++)
			CHECK(cap[i] == 0, "QUERY_HCA_CAP type 0x%x: byte %zu is 0x%x, not 0",
			      zero_types[t], i, cap[i]);
	}
	uint8_t cin[CMD_BYTES] = {0}, cout[CMD_BYTES] = {0};
	prm_set(cin, OPCODE, OP_CREATE_CQ);
	int rc = mlx5dv_devx_general_cmd(ctx, cin, sizeof(cin), cout, sizeof(cout));
	CHECK(rc == EINVAL, "CREATE_CQ as a general command: %d, not EINVAL", rc);
	/* rdma-core 44 opens a DevX context for ibv_open_device where the
	 * kernel allows it, and IBGDA and GPUNetIO rely on it: umem, UAR and
	 * EQ on this plain context */
	static uint8_t page[4096] __attribute__((aligned(4096)));
	struct mlx5dv_devx_umem *um = mlx5dv_devx_umem_reg(ctx, page, sizeof(page), 0);
	CHECK(um, "mlx5dv_devx_umem_reg on a context of ibv_open_device: %s", strerror(errno));
	struct mlx5dv_devx_uar *uar = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
	CHECK(uar, "mlx5dv_devx_alloc_uar on a context of ibv_open_device: %s", strerror(errno));
	uint32_t eqn;
	CHECK(mlx5dv_devx_query_eqn(ctx, 0, &eqn) == 0, "mlx5dv_devx_query_eqn (plain context)");
	mlx5dv_devx_free_uar(uar);
	CHECK(mlx5dv_devx_umem_dereg(um) == 0, "umem_dereg (plain context)");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
}

static void ibgda_shape(void);
/* A cross-channel WAIT WQE (opmod 0, ds 2): 8 reserved bytes, the CQE
 * index, the CQ's number; signaled, as GPUNetIO writes it. */
static void post_wait(struct side *s, uint32_t cqn, uint32_t index)
{
	uint8_t *w = s->sq + (s->pi & (NSQ - 1)) * 64;
	memset(w, 0, 64);
	mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)(void *)w, (uint16_t)s->pi, OP_WAIT, 0,
			    s->qpn, MLX5_WQE_CTRL_CQ_UPDATE, 2, 0, 0);
	uint32_t seg[4] = {0, 0, htobe32(index), htobe32(cqn)};
	memcpy(w + 16, seg, sizeof(seg));
	ring(s, w);
}

/* GPUNetIO's put-with-counter: b (the companion) posts a WAIT on a's send
 * CQ for the CQE of a's k-th next WQE, then a fetch-and-add of a counter;
 * a then posts k writes. The counter must not move, nor b complete
 * anything, until a's k-th CQE is written; then b completes both, in
 * order, with the writes' data in place. A WAIT naming a CQ the context
 * does not have is an error CQE. */
static void cross_channel(void)
{
	struct side a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	side_open(&a);
	side_open(&b);
	struct peer_info pa = side_info(&a), pb = side_info(&b);
	side_connect(&a, &pb);
	side_connect(&b, &pa);
	enum { K = 5 };
	volatile uint64_t *counter = (volatile uint64_t *)(void *)(a.buf + QTR - 128);
	*counter = 0;
	uint64_t *old = (uint64_t *)(void *)(b.buf + 3 * QTR);
	*old = ~0ull;
	uint64_t add = rnd() | 1;
	uint32_t b_ci = b.ci;
	post_wait(&b, a.cqn, (a.ci + K - 1) & 0xffffff);
	post(&b, MLX5_OPCODE_ATOMIC_FA, (uint64_t)(uintptr_t)old, 8,
	     pa.addr + QTR - 128, pa.rkey, add, 0);
	uint8_t *src = a.buf + QTR;
	for (int i = 0; i < K; i++) {
		/* nothing of b's yet: the WAIT holds it and the add behind it */
		usleep(i ? 20 * 1000 : 100 * 1000);
		CHECK(*counter == 0, "the counter moved after %d of %d writes", i, K);
		CHECK(b.ci == b_ci, "b completed a WQE");
		const struct mlx5_cqe64 *e = (const void *)(b.cqb + (b.ci & (NCQ - 1)) * 64);
		uint8_t own = __atomic_load_n(&e->op_own, __ATOMIC_ACQUIRE);
		CHECK((own >> 4) == MLX5_CQE_INVALID || (own & 1) != ((b.ci >> LOG_CQ) & 1),
		      "a CQE in b's CQ after %d of %d writes: the WAIT did not hold", i, K);
		uint32_t len = 1 + (uint32_t)(rnd() % 2048);
		fill(src + (uint32_t)i * 2048, len);
		post(&a, MLX5_OPCODE_RDMA_WRITE, (uint64_t)(uintptr_t)(src + (uint32_t)i * 2048), len,
		     pb.addr + (uint32_t)i * 2048, pb.rkey, 0, 0);
		expect_ok(&a, "write before the counter");
		CHECK(!memcmp(b.buf + (uint32_t)i * 2048, src + (uint32_t)i * 2048, len),
		      "write %d: the target differs", i);
	}
	expect_ok(&b, "WAIT");
	expect_ok(&b, "fetch-and-add behind the WAIT");
	CHECK(*counter == add && be64toh(*old) == 0,
	      "the counter: 0x%" PRIx64 " (old 0x%" PRIx64 "), want 0x%" PRIx64, *counter,
	      be64toh(*old), add);
	/* a WAIT met already: completes at once */
	post_wait(&b, a.cqn, (a.ci - 1) & 0xffffff);
	expect_ok(&b, "WAIT on a CQE already written");
	/* a CQ number no CQ has */
	post_wait(&b, 0xabcdef, 0);
	uint16_t wc;
	uint8_t syn;
	CHECK(poll_cqe(&b, &wc, &syn) == MLX5_CQE_REQ_ERR &&
		      syn == MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR,
	      "WAIT on an unknown CQ: not a local QP operation error (syndrome 0x%x)", syn);
	side_close(&a);
	side_close(&b);
	printf("%s: a WAIT on another QP's CQ held a fetch-and-add behind %d writes: ok\n", who,
	       K);
}

/* QUERY_ROCE_ADDRESS of every entry of the GID table, against
 * ibv_query_gid_ex: the same GID, its RoCE version, its L3 type, no VLAN, a
 * unicast locally administered MAC, equal for a v1 and v2 entry of one
 * address; an empty entry reads as zeros; past the table, another port or a
 * short output: refused. */
static void roce_addresses(void)
{
	struct ibv_context *ctx = open_kinet0();
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0, "ibv_query_port");
	uint8_t in[16] = {0}, out[RA_OUT_BYTES];
	static const uint8_t zero[RA_OUT_BYTES], v4[12] = {[10] = 0xff, [11] = 0xff};
	unsigned set = 0;
	for (uint32_t i = 0; i < (uint32_t)pa.gid_tbl_len; i++) {
		memset(out, 0xa5, sizeof(out));
		prm_set(in, OPCODE, OP_QUERY_ROCE_ADDRESS);
		prm_set(in, RA_INDEX, i);
		prm_set(in, RA_PORT, i % 2); /* 0 and 1 both name the one port */
		cmd_ok(mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, sizeof(out)), out,
		       "QUERY_ROCE_ADDRESS");
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0)) {
			CHECK(!memcmp(out, zero, sizeof(out)), "GID %u: empty, but not zeros", i);
			continue;
		}
		set++;
		CHECK(!memcmp(out + RA_GID_BYTE, e.gid.raw, 16), "GID %u: another address", i);
		CHECK(prm_get(out, RA_VERSION) == (e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 2u : 0u),
		      "GID %u: roce_version %u for type %u", i, (unsigned)prm_get(out, RA_VERSION),
		      e.gid_type);
		CHECK(prm_get(out, RA_L3_TYPE) == (memcmp(e.gid.raw, v4, 12) ? 1u : 0u),
		      "GID %u: roce_l3_type %u", i, (unsigned)prm_get(out, RA_L3_TYPE));
		const uint8_t *mac = out + RA_MAC_BYTE;
		CHECK(prm_get(out, RA_VLAN_VALID) == 0 && !(mac[0] & 1) && (mac[0] & 2),
		      "GID %u: a VLAN, or not a unicast local MAC", i);
		/* a v2 entry of the same address: the same MAC */
		struct ibv_gid_entry f;
		if (i % 2 == 0 && !ibv_query_gid_ex(ctx, 1, i + 1, &f, 0) &&
		    !memcmp(f.gid.raw, e.gid.raw, 16)) {
			uint8_t o2[RA_OUT_BYTES];
			prm_set(in, RA_INDEX, i + 1);
			cmd_ok(mlx5dv_devx_general_cmd(ctx, in, sizeof(in), o2, sizeof(o2)), o2,
			       "QUERY_ROCE_ADDRESS");
			CHECK(!memcmp(o2 + RA_MAC_BYTE, mac, 6), "GIDs %u and %u: two MACs", i, i + 1);
		}
	}
	CHECK(set >= 2, "only %u RoCE GIDs", set);
	int rc;
	prm_set(in, RA_INDEX, (uint64_t)pa.gid_tbl_len);
	prm_set(in, RA_PORT, 1);
	errno = 0;
	rc = mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, sizeof(out));
	refused(rc, errno, out, "QUERY_ROCE_ADDRESS past the table");
	prm_set(in, RA_INDEX, 0);
	prm_set(in, RA_PORT, 2);
	errno = 0;
	rc = mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, sizeof(out));
	refused(rc, errno, out, "QUERY_ROCE_ADDRESS of port 2");
	prm_set(in, RA_PORT, 1);
	errno = 0;
	rc = mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, 16);
	refused(rc, errno, out, "QUERY_ROCE_ADDRESS into 16 bytes");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
}


static void one_process(void)
{
	plain_context();
	const char *ralog = logged_void(roce_addresses);
	CHECK(strstr(ralog, "past the GID table") && strstr(ralog, "one port"),
	      "QUERY_ROCE_ADDRESS's refusals are not said; the log:\n%s", ralog);
	struct side a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	side_open(&a);
	side_open(&b);
	CHECK(a.qpn != b.qpn, "two QPs with one number");
	struct peer_info pa = side_info(&a), pb = side_info(&b);
	side_connect(&a, &pb);
	side_connect(&b, &pa);
	traffic(&a, &pb, b.buf, 5 * NSQ);
	traffic(&b, &pa, a.buf, 5 * NSQ);
	check_bad_commands(&a);
	const char *log = logged(free_uar_early, &b);
	CHECK(strstr(log, "freed while"), "no log line about a UAR freed in use; the log:\n%s",
	      log);
	bad_rkey(&a, &pb);
	/* 2RST, and the QP is in RESET with its context as created */
	uint8_t in[CMD_BYTES] = {0}, q[CMD_BYTES];
	modify(&a, in, OP_2RST, "2RST");
	CHECK(query_qp(&a, q) == 0 && prm_get(q, QPC_REMOTE_QPN) == 0, "QUERY_QP after 2RST");
	side_close(&a);
	side_close(&b);
	devx_to_verbs();
	ibgda_shape();
	const char *cxlog = logged_void(cross_channel);
	CHECK(strstr(cxlog, "names CQ 0xabcdef"), "the unknown CQ of a WAIT is not said; the "
	      "log:\n%s", cxlog);
	printf("%s: one process: DevX QPs 0x%x and 0x%x: writes, reads, atomics over %u laps, "
	       "bad commands, error CQE: ok\n", who, pa.qpn, pb.qpn, 2 * 5 * NSQ / NSQ);
}

/* A QP of IBGDA's shape (b), made and connected with the commands as the
 * stacks write them on RoCE (no pm_state, grh or INIT2RTR port), and a
 * plain one (a): b's writes, reads and
 * atomics complete into its collapsed CQ over laps of it; a's sends land in
 * the receives posted to b's SRQ, completed in b's verbs CQ with their
 * work requests' ids and the data in their buffers. */
static void ibgda_shape(void)
{
	struct side a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	b.ibgda = true;
	b.lean = true;
	side_open(&a);
	side_open(&b);
	struct peer_info pa = side_info(&a), pb = side_info(&b);
	side_connect(&a, &pb);
	side_connect(&b, &pa);
	traffic(&b, &pa, a.buf, 3 * NCQ);
	uint8_t *rb = b.buf + 2 * QTR; /* the receive slots, 4 KiB each */
	const uint32_t n = 40;
	for (uint32_t k = 0; k < n; k++) {
		struct ibv_sge g = {.addr = (uintptr_t)(rb + (size_t)k * 4096), .length = 4096,
				    .lkey = b.mr->lkey};
		struct ibv_recv_wr w = {.wr_id = 900 + k, .sg_list = &g, .num_sge = 1}, *bad;
		CHECK(ibv_post_srq_recv(b.srq, &w, &bad) == 0, "ibv_post_srq_recv");
	}
	uint8_t *src = a.buf + QTR;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t len = 1 + (uint32_t)(rnd() % 4096);
		fill(src + (size_t)k * 4096, len);
		post(&a, MLX5_OPCODE_SEND, (uint64_t)(uintptr_t)(src + (size_t)k * 4096), len, 0, 0, 0,
		     0);
		expect_ok(&a, "SEND to an SRQ");
		struct ibv_wc wc;
		uint64_t end = now_ns() + 5000000000ull;
		int got;
		while ((got = ibv_poll_cq(b.rcq, 1, &wc)) == 0)
			CHECK(now_ns() < end, "no receive completion %u within 5 s", k);
		CHECK(got == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 900 + k &&
			      wc.opcode == IBV_WC_RECV && wc.byte_len == len && wc.qp_num == b.qpn,
		      "receive %u: status %s wr_id %" PRIu64 " opcode %d byte_len %u (sent %u) "
		      "qp 0x%x (want 0x%x)",
		      k, ibv_wc_status_str(wc.status), wc.wr_id, wc.opcode, wc.byte_len, len,
		      wc.qp_num, b.qpn);
		CHECK(!memcmp(rb + (size_t)k * 4096, src + (size_t)k * 4096, len),
		      "receive %u: data differ", k);
	}
	/* a DUMP whose key is bad: a local protection error, as a NIC's */
	post_lkey_xor = 0x5500;
	post(&b, OP_DUMP, (uint64_t)(uintptr_t)b.buf, 1, 0, 0, 0, 0);
	post_lkey_xor = 0;
	uint16_t wc;
	uint8_t syn;
	uint8_t op = poll_cqe(&b, &wc, &syn);
	CHECK(op == MLX5_CQE_REQ_ERR && syn == MLX5_CQE_SYNDROME_LOCAL_PROT_ERR,
	      "DUMP with a bad key: CQE opcode 0x%x, syndrome 0x%x", op, syn);
	uint32_t cqes = b.ci;
	CHECK(cqes > 4 * NCQ, "only %u CQEs in the collapsed CQ", cqes);
	side_close(&a);
	side_close(&b);
	printf("%s: IBGDA's shape: %u CQEs in a collapsed CQ of %u, %u sends through an SRQ: ok\n",
	       who, cqes, NCQ, n);
}

/* Parent and child: each a DevX QP; they swap peer_info over pipes, connect
 * from (GID, QP number) alone, and each runs the traffic into the other. */
static void two_processes(void)
{
	int up[2], down[2];
	CHECK(pipe(up) == 0 && pipe(down) == 0, "pipe");
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	bool child = pid == 0;
	if (child)
		who = "verbs_devx(child)";
	rng ^= child ? 0x9e3779b97f4a7c15ull : 0;
	struct side s;
	memset(&s, 0, sizeof(s));
	side_open(&s);
	struct peer_info me = side_info(&s), peer;
	int wfd = child ? up[1] : down[1], rfd = child ? down[0] : up[0];
	/* only the other process writes what this one reads: when it fails, the
	 * read ends (instead of waiting for ever) */
	close(child ? up[0] : down[0]);
	close(child ? down[1] : up[1]);
	signal(SIGPIPE, SIG_IGN); /* a write to it fails then, with a message */
	CHECK(write(wfd, &me, sizeof(me)) == (ssize_t)sizeof(me), "pipe write");
	CHECK(read(rfd, &peer, sizeof(peer)) == (ssize_t)sizeof(peer),
	      "the other process ended before it sent its QP");
	side_connect(&s, &peer);
	/* both in RTS before traffic: a byte each way */
	char c = 1;
	CHECK(write(wfd, &c, 1) == 1 && read(rfd, &c, 1) == 1,
	      "pipe sync: the other process ended before its QP was ready");
	traffic(&s, &peer, NULL, NSQ); /* two laps of the queues */
	/* the peer's QP must stay until both are done */
	CHECK(write(wfd, &c, 1) == 1 && read(rfd, &c, 1) == 1,
	      "pipe sync: the other process ended before its traffic was done");
	side_close(&s);
	if (child)
		_exit(0);
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed (status 0x%x)", st);
	printf("%s: two processes: DevX QPs 0x%x and 0x%x: writes, reads, atomics: ok\n", who,
	       me.qpn, peer.qpn);
}

/* ---- the dynamically connected transport, as NVSHMEM's IBGDA makes it --------- */

#define DC_KEY 0x0123456789abcdefull

/* The index of the last DCI WQE posted (its CQE's: WQEs may take two WQEBBs). */
static uint16_t dc_last;

/* RST2INIT, INIT2RTR, RTR2RTS of a DCI: no remote end. */
static void dci_connect(struct side *s)
{
	uint8_t in[CMD_BYTES], q[CMD_BYTES];
	memset(in, 0, sizeof(in));
	prm_set(in, ADS_VHCA_PORT, 1);
	prm_set(in, ADS_PKEY_INDEX, 0);
	modify(s, in, OP_RST2INIT, "DCI RST2INIT");
	memset(in, 0, sizeof(in));
	prm_set(in, QPC_MTU, IBV_MTU_1024);
	prm_set(in, QPC_LOG_MSG_MAX, 30);
	modify(s, in, OP_INIT2RTR, "DCI INIT2RTR");
	rtr2rts(s, 0, "DCI RTR2RTS");
	CHECK(query_qp(s, q) == 3, "QUERY_QP: the DCI is not in RTS");
}

/* A DCI in ERR back to RTS: 2RST, its send queue from 0 again (the CQ goes
 * on), the transitions again. */
static void dci_reset(struct side *s)
{
	uint8_t in[CMD_BYTES];
	memset(in, 0, sizeof(in));
	modify(s, in, OP_2RST, "DCI 2RST");
	s->pi = 0;
	s->qp_dbr[MLX5_SND_DBR] = 0;
	dci_connect(s);
}

/* The DCT and what it stands on, as IBGDA makes them: a parent domain of
 * the PD, an SRQ on it, CQs, an address handle whose mlx5 address vector
 * the DCIs' WQEs carry. */
struct dct {
	struct ibv_pd *pd; /* the parent domain */
	struct ibv_srq *srq;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct mlx5_wqe_av av; /* dqp_dct and key set as the device code sets them */
	uint8_t *buf;
	struct ibv_mr *mr;
};

static void dct_open(struct side *s, struct dct *t)
{
	struct ibv_parent_domain_init_attr pa = {.pd = s->pd};
	t->pd = ibv_alloc_parent_domain(s->ctx, &pa);
	CHECK(t->pd, "ibv_alloc_parent_domain: %s", strerror(errno));
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 64, .max_sge = 1}};
	t->srq = ibv_create_srq(t->pd, &sa);
	CHECK(t->srq, "ibv_create_srq on the parent domain: %s", strerror(errno));
	t->scq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	t->rcq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	CHECK(t->scq && t->rcq, "ibv_create_cq");
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_DRIVER, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = t->pd,
		.srq = t->srq, .send_cq = t->scq, .recv_cq = t->rcq,
		.cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1}};
	struct mlx5dv_qp_init_attr dv = {.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC};
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	errno = 0;
	CHECK(!mlx5dv_create_qp(s->ctx, &qa, &dv) && errno == EOPNOTSUPP,
	      "mlx5dv_create_qp of a DCI: %s, want EOPNOTSUPP (DevX makes DCIs)", strerror(errno));
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
	dv.dc_init_attr.dct_access_key = DC_KEY;
	struct ibv_qp_init_attr_ex nosrq = qa;
	nosrq.srq = NULL;
	errno = 0;
	CHECK(!mlx5dv_create_qp(s->ctx, &nosrq, &dv) && errno == EINVAL,
	      "mlx5dv_create_qp of a DCT without an SRQ: %s, want EINVAL", strerror(errno));
	t->qp = mlx5dv_create_qp(s->ctx, &qa, &dv);
	CHECK(t->qp, "mlx5dv_create_qp of a DCT: %s", strerror(errno));
	CHECK(t->qp->qp_num > 0 && t->qp->qp_num <= 0xffffff, "DCT number 0x%x", t->qp->qp_num);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
	CHECK(ibv_modify_qp(t->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_ACCESS_FLAGS) == 0, "DCT to INIT");
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	aa.grh.dgid = s->gid;
	aa.grh.sgid_index = (uint8_t)s->gid_index;
	aa.grh.hop_limit = 255;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.min_rnr_timer = 12;
	a.ah_attr = aa;
	CHECK(ibv_modify_qp(t->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				IBV_QP_MIN_RNR_TIMER) == 0, "DCT to RTR");
	struct ibv_ah *ah = ibv_create_ah(s->pd, &aa);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));
	struct mlx5dv_ah dah;
	struct mlx5dv_obj ob = {.ah = {.in = ah, .out = &dah}};
	CHECK(mlx5dv_init_obj(&ob, MLX5DV_OBJ_AH) == 0 && dah.av, "mlx5dv_init_obj(AH)");
	memcpy(&t->av, dah.av, sizeof(t->av));
	CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
	t->av.dqp_dct = htobe32(1u << 31 | t->qp->qp_num); /* the whole 48-byte vector */
	t->av.key.dc_key = htobe64(DC_KEY);
	/* its memory: a region of the PD the parent domain stands for */
	t->buf = aligned_alloc(4096, BUF);
	CHECK(t->buf, "memory");
	t->mr = ibv_reg_mr(s->pd, t->buf, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(t->mr, "ibv_reg_mr: %s", strerror(errno));
	CHECK(ibv_dealloc_pd(s->pd) == EBUSY, "ibv_dealloc_pd under a parent domain: not EBUSY");
}

static void dct_close(struct dct *t)
{
	if (t->qp)
		CHECK(ibv_destroy_qp(t->qp) == 0, "ibv_destroy_qp of the DCT");
	CHECK(ibv_destroy_srq(t->srq) == 0 && ibv_destroy_cq(t->scq) == 0 &&
		      ibv_destroy_cq(t->rcq) == 0 && ibv_dealloc_pd(t->pd) == 0 &&
		      ibv_dereg_mr(t->mr) == 0,
	      "destroying the DCT's objects");
	free(t->buf);
}

/* One DCI WQE: ctrl, the address vector (48 bytes, or the 16-byte compact
 * form: half), then what an RC WQE has; over two WQEBBs when it needs them. */
static void post_dc(struct side *s, const struct mlx5_wqe_av *av, bool half, uint8_t opcode,
		    uint64_t laddr, uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t swap_add,
		    uint64_t cmp)
{
	uint8_t w[128];
	memset(w, 0, sizeof(w));
	dc_last = (uint16_t)s->pi;
	bool atomic = opcode == MLX5_OPCODE_ATOMIC_CS || opcode == MLX5_OPCODE_ATOMIC_FA;
	bool send = opcode == MLX5_OPCODE_SEND;
	uint32_t avb = half ? 16 : 48, at = 16 + avb;
	uint8_t ds = (uint8_t)(1 + avb / 16 + (send ? 0 : 1) + (atomic ? 1 : 0) + 1);
	mlx5dv_set_ctrl_seg((void *)w, (uint16_t)s->pi, opcode, 0, s->qpn,
			    MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
	memcpy(w + 16, av, avb);
	if (half) /* the compact form: the ext bit clear */
		((struct mlx5_wqe_av *)(w + 16))->dqp_dct &= htobe32(~(1u << 31));
	if (!send) {
		struct mlx5_wqe_raddr_seg *r = (void *)(w + at);
		r->raddr = htobe64(raddr);
		r->rkey = htobe32(rkey);
		at += 16;
	}
	if (atomic) {
		struct mlx5_wqe_atomic_seg *a = (void *)(w + at);
		a->swap_add = htobe64(swap_add);
		a->compare = htobe64(cmp);
		at += 16;
	}
	mlx5dv_set_data_seg((void *)(w + at), len, s->mr->lkey, laddr);
	uint32_t nbb = (ds * 16u + 63) / 64;
	for (uint32_t i = 0; i < nbb; i++)
		memcpy(s->sq + ((s->pi + i) & (NSQ - 1)) * 64, w + 64 * i, 64);
	s->pi += nbb - 1;
	ring(s, s->sq + ((s->pi - (nbb - 1)) & (NSQ - 1)) * 64);
}

static void dc_ok(struct side *s, const char *what)
{
	uint16_t wc;
	uint8_t syn;
	uint8_t op = poll_cqe(s, &wc, &syn);
	CHECK(op == MLX5_CQE_REQ, "%s: CQE opcode 0x%x (syndrome 0x%x)", what, op, syn);
	CHECK(wc == dc_last, "%s: wqe_counter %u, want %u", what, wc, dc_last);
}

static void expect_err(struct side *s, uint8_t want, const char *what)
{
	uint16_t wc;
	uint8_t syn;
	uint8_t op = poll_cqe(s, &wc, &syn);
	CHECK(op == MLX5_CQE_REQ_ERR && syn == want, "%s: CQE opcode 0x%x syndrome 0x%x, want an "
	      "error CQE of syndrome 0x%x", what, op, syn, want);
}

/* A DCI reaches a DCT of its context: writes, reads, atomics and sends,
 * with the whole address vector and the compact one, over laps of the
 * queue; data random and checked byte for byte. A wrong key, a DCT that
 * does not exist (or was destroyed) are error CQEs, and the DCT's memory
 * stays as it was. */
static void dc_mode(void)
{
	struct side a;
	memset(&a, 0, sizeof(a));
	a.dci = true;
	side_open(&a);
	dci_connect(&a);
	struct dct t;
	memset(&t, 0, sizeof(t));
	dct_open(&a, &t);
	uint8_t *src = a.buf + QTR, *back = a.buf + 2 * QTR;
	uint64_t tb = (uint64_t)(uintptr_t)t.buf;
	uint32_t rounds = 3 * NSQ;
	for (uint32_t round = 0; round < rounds; round++) {
		bool half = round % 3 == 1;
		uint32_t len = 1 + (uint32_t)(rnd() % 4096);
		uint32_t lo = (uint32_t)(rnd() % (QTR - len));
		uint32_t ro = (uint32_t)(rnd() % (QTR / 2 - len));
		fill(src + lo, len);
		post_dc(&a, &t.av, half, MLX5_OPCODE_RDMA_WRITE, (uint64_t)(uintptr_t)(src + lo),
			len, tb + ro, t.mr->rkey, 0, 0);
		dc_ok(&a, "DC RDMA write");
		CHECK(!memcmp(t.buf + ro, src + lo, len), "DC write: the DCT's memory differs "
		      "(round %u, %u bytes)", round, len);
		fill(t.buf + ro, len);
		memset(back + lo, 0, len);
		post_dc(&a, &t.av, half, MLX5_OPCODE_RDMA_READ, (uint64_t)(uintptr_t)(back + lo),
			len, tb + ro, t.mr->rkey, 0, 0);
		dc_ok(&a, "DC RDMA read");
		CHECK(!memcmp(back + lo, t.buf + ro, len), "DC read: data differ (round %u)", round);
		if (round % 16 == 0) {
			/* local operations carry no address vector */
			dc_last = (uint16_t)a.pi;
			post(&a, OP_DUMP, (uint64_t)(uintptr_t)(back + lo), 1, 0, 0, 0, 0);
			dc_ok(&a, "DCI DUMP");
		}
	}
	/* atomics on a word of the DCT's memory */
	uint64_t *word = (uint64_t *)(t.buf + QTR - 64), v = rnd();
	*word = v;
	uint64_t *res = (uint64_t *)(a.buf + 3 * QTR);
	for (int i = 0; i < 32; i++) {
		uint64_t add = rnd(), swap = rnd();
		*res = 0;
		post_dc(&a, &t.av, i & 1, MLX5_OPCODE_ATOMIC_FA, (uint64_t)(uintptr_t)res, 8,
			(uint64_t)(uintptr_t)word, t.mr->rkey, add, 0);
		dc_ok(&a, "DC fetch-and-add");
		CHECK(be64toh(*res) == v, "DC fetch-and-add: old value");
		v += add;
		bool hit = rnd() & 1;
		post_dc(&a, &t.av, i & 1, MLX5_OPCODE_ATOMIC_CS, (uint64_t)(uintptr_t)res, 8,
			(uint64_t)(uintptr_t)word, t.mr->rkey, swap, hit ? v : ~v);
		dc_ok(&a, "DC compare-and-swap");
		CHECK(be64toh(*res) == v, "DC compare-and-swap: old value");
		if (hit)
			v = swap;
		CHECK(*word == v, "DC atomics: the DCT's word 0x%" PRIx64 ", want 0x%" PRIx64,
		      *word, v);
	}
	/* sends into the DCT's SRQ, completed in its receive CQ */
	uint8_t *rb = t.buf + 2 * QTR;
	for (uint32_t k = 0; k < 16; k++) {
		struct ibv_sge g = {.addr = (uintptr_t)(rb + (size_t)k * 4096), .length = 4096,
				    .lkey = t.mr->lkey};
		struct ibv_recv_wr w = {.wr_id = 500 + k, .sg_list = &g, .num_sge = 1}, *bad;
		CHECK(ibv_post_srq_recv(t.srq, &w, &bad) == 0, "ibv_post_srq_recv");
		uint32_t len = 1 + (uint32_t)(rnd() % 4096);
		fill(src + (size_t)k * 4096, len);
		post_dc(&a, &t.av, k & 1, MLX5_OPCODE_SEND, (uint64_t)(uintptr_t)(src + (size_t)k * 4096),
			len, 0, 0, 0, 0);
		dc_ok(&a, "DC SEND");
		struct ibv_wc wc;
		uint64_t end = now_ns() + 5000000000ull;
		int got;
		while ((got = ibv_poll_cq(t.rcq, 1, &wc)) == 0)
			CHECK(now_ns() < end, "no DCT receive completion %u within 5 s", k);
		CHECK(got == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 500 + k &&
			      wc.byte_len == len && wc.qp_num == t.qp->qp_num,
		      "DCT receive %u: status %s wr_id %" PRIu64 " byte_len %u (sent %u)", k,
		      ibv_wc_status_str(wc.status), wc.wr_id, wc.byte_len, len);
		CHECK(!memcmp(rb + (size_t)k * 4096, src + (size_t)k * 4096, len),
		      "DCT receive %u: data differ", k);
	}
	/* a wrong key: an error CQE, the DCT's memory untouched */
	struct mlx5_wqe_av bad = t.av;
	bad.key.dc_key = htobe64(DC_KEY ^ 0x40);
	uint8_t keep[256];
	memcpy(keep, t.buf, sizeof(keep));
	fill(src, sizeof(keep));
	post_dc(&a, &bad, false, MLX5_OPCODE_RDMA_WRITE, (uint64_t)(uintptr_t)src, sizeof(keep), tb,
		t.mr->rkey, 0, 0);
	expect_err(&a, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, "DC write with a wrong key");
	CHECK(!memcmp(keep, t.buf, sizeof(keep)), "a write with a wrong DC key reached the DCT");
	uint8_t q[CMD_BYTES];
	CHECK(query_qp(&a, q) == 6, "QUERY_QP: the DCI is not in ERR after an error CQE");
	dci_reset(&a);
	/* a DCT number nobody has: retry exceeded, as a DCT that never answers */
	struct mlx5_wqe_av none = t.av;
	none.dqp_dct = htobe32(1u << 31 | 0xfffff0);
	post_dc(&a, &none, false, MLX5_OPCODE_RDMA_WRITE, (uint64_t)(uintptr_t)src, 64, tb,
		t.mr->rkey, 0, 0);
	expect_err(&a, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, "DC write to no DCT");
	CHECK(!memcmp(keep, t.buf, sizeof(keep)), "a write to no DCT touched the DCT's memory");
	/* and the DCT gone: the same */
	dci_reset(&a);
	/* the DCT destroyed while writes to it are in flight: those before it
	 * complete and landed, then one error CQE (retry exceeded), then the
	 * rest are flushed; nothing hangs */
	uint32_t dctn = t.qp->qp_num;
	const uint32_t K = NSQ / 2 - 1, piece = 2048;
	uint16_t idx[NSQ / 2];
	uint8_t *tq = t.buf + QTR; /* a quarter of the DCT's memory the checks above left */
	memset(tq, 0, (size_t)K * piece);
	fill(src, (size_t)K * piece);
	for (uint32_t k = 0; k < K; k++) {
		post_dc(&a, &t.av, false, MLX5_OPCODE_RDMA_WRITE,
			(uint64_t)(uintptr_t)(src + (size_t)k * piece), piece,
			(uint64_t)(uintptr_t)(tq + (size_t)k * piece), t.mr->rkey, 0, 0);
		idx[k] = dc_last;
	}
	/* once the first has completed, so that the destroy meets the others */
	struct mlx5_cqe64 *first = (void *)(a.cqb + (a.ci & (NCQ - 1)) * 64);
	uint64_t until = now_ns() + 5000000000ull;
	for (;;) {
		uint8_t oo = __atomic_load_n(&first->op_own, __ATOMIC_ACQUIRE);
		if ((oo >> 4) != MLX5_CQE_INVALID && (oo & 1) == ((a.ci >> LOG_CQ) & 1))
			break;
		CHECK(now_ns() < until, "racing destroy: no first CQE within 5 s");
	}
	CHECK(ibv_destroy_qp(t.qp) == 0, "ibv_destroy_qp of the DCT");
	t.qp = NULL;
	uint32_t done = 0, errs = 0, flushed = 0;
	for (uint32_t k = 0; k < K; k++) {
		uint16_t wc;
		uint8_t syn;
		uint8_t op = poll_cqe(&a, &wc, &syn);
		CHECK(wc == idx[k], "racing destroy: CQE %u has wqe_counter %u, want %u", k, wc,
		      idx[k]);
		if (op == MLX5_CQE_REQ) {
			CHECK(!errs, "racing destroy: a write completed after the error CQE");
			CHECK(!memcmp(tq + (size_t)k * piece, src + (size_t)k * piece, piece),
			      "racing destroy: completed write %u did not land", k);
			done++;
		} else if (!errs) {
			CHECK(op == MLX5_CQE_REQ_ERR &&
				      syn == MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
			      "racing destroy: first error CQE opcode 0x%x syndrome 0x%x", op, syn);
			errs++;
		} else {
			CHECK(op == MLX5_CQE_REQ_ERR && syn == MLX5_CQE_SYNDROME_WR_FLUSH_ERR,
			      "racing destroy: after the error, CQE opcode 0x%x syndrome 0x%x, want "
			      "a flush", op, syn);
			flushed++;
		}
	}
	if (!errs) {
		/* every write landed before the DCT went: the next one finds none */
		post_dc(&a, &t.av, false, MLX5_OPCODE_RDMA_WRITE, (uint64_t)(uintptr_t)src, 64, tb,
			t.mr->rkey, 0, 0);
		expect_err(&a, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
			   "DC write to a destroyed DCT");
	}
	CHECK(!memcmp(keep, t.buf, sizeof(keep)), "a write to a destroyed DCT reached its memory");
	dct_close(&t);
	side_close(&a);
	printf("%s: dc: DCI 0x%x to DCT 0x%x: %u writes and reads, 64 atomics, 16 sends; a wrong "
	       "key and a missing DCT are error CQEs; destroyed under %u writes: %u landed, %u "
	       "error, %u flushed: ok\n", who, a.qpn, dctn, rounds, K, done, errs, flushed);
}

/* GPU memory cannot hold DevX queues on the software NIC: refused. */
static void gpu_umem(struct side *s)
{
	struct vt_cuda c;
	vt_cuda_open(&c);
	void *cctx = NULL;
	unsigned long long p = 0;
	CHECK(c.retain(&cctx, c.dev) == 0 && c.set(cctx) == 0 && c.alloc(&p, 1 << 16) == 0,
	      "cuMemAlloc of 64 KiB");
	errno = 0;
	struct mlx5dv_devx_umem *u = mlx5dv_devx_umem_reg(s->ctx, (void *)(uintptr_t)p, 1 << 16,
							  IBV_ACCESS_LOCAL_WRITE);
	CHECK(!u && errno == EOPNOTSUPP, "umem_reg of GPU memory: %s, want EOPNOTSUPP",
	      u ? "accepted" : strerror(errno));
	c.release(p);
}

static void gpu_mode(void)
{
	/* skipped before anything is opened: an exit with the device open, and
	 * stderr in logged()'s file, hid what the sanitizer build says at exit */
	struct vt_cuda c;
	vt_cuda_open(&c);
	struct side s;
	memset(&s, 0, sizeof(s));
	s.ctx = open_kinet0();
	const char *log = logged(gpu_umem, &s);
	CHECK(strstr(log, "GPU memory"), "no log line about GPU memory; the log:\n%s", log);
	/* host memory still registers */
	void *h = aligned_alloc(4096, 4096);
	struct mlx5dv_devx_umem *u = mlx5dv_devx_umem_reg(s.ctx, h, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(u && mlx5dv_devx_umem_dereg(u) == 0, "umem of host memory");
	free(h);
	CHECK(ibv_close_device(s.ctx) == 0, "ibv_close_device");
	printf("%s: gpu: a umem of GPU memory is refused (EOPNOTSUPP): ok\n", who);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	vt_seed(NULL);
	if (argc > 1 && !strcmp(argv[1], "fork"))
		two_processes();
	else if (argc > 1 && !strcmp(argv[1], "gpu"))
		gpu_mode();
	else if (argc > 1 && !strcmp(argv[1], "dc"))
		dc_mode();
	else
		one_process();
	return 0;
}

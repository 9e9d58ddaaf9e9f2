/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_types.h - the types of the device data path: the device
 * descriptor of a QP (kn_qp) and its mutable state (kn_qp_state), tickets,
 * doorbell and sharing modes, limits. Plain data, no functions: the host
 * control path (kinet/kinet.h) includes only this header of the device API;
 * device code includes kinet/device.h, which includes it.
 *
 * Tickets: a ticket is the 64-bit, never-wrapping index of a WQE basic block
 * (WQEBB) of a QP's send queue (or of a receive WQE of its receive queue);
 * the slot of ticket t is t % sq_wqe_cnt and its 16-bit mlx5 wqe_index is
 * t & 0xffff. Almost every WQE is one WQEBB, hence one ticket; the 8-byte
 * masked compare-and-swap takes two.
 */
#ifndef KINET_DEVICE_TYPES_H
#define KINET_DEVICE_TYPES_H

#include <stdint.h>

/* Doorbell modes: how a producer tells the NIC about new WQEs. */
enum kn_db_mode {
	KN_DB_AUTO = 0,      /* host-side only: resolved at QP creation */
	KN_DB_GPU = 1,       /* write the doorbell register directly */
	KN_DB_BLUEFLAME = 2, /* a post of one WQE writes the whole 64-byte WQE
			      * into the register (ascending stores); other
			      * posts ring the 8-byte doorbell word */
	KN_DB_CPU_PROXY = 3, /* publish the producer index; a CPU thread rings */
};

/* Resource sharing of one QP between device threads. */
enum kn_share {
	KN_SHARE_EXCLUSIVE = 0, /* one thread (or one warp leader) posts */
	KN_SHARE_CTA = 1,       /* threads of one CTA post concurrently */
	KN_SHARE_GPU = 2,       /* any thread of the grid posts concurrently */
};

/* kn_qp_state.err_ticket while no WQE of the QP has failed. */
#define KN_NO_ERROR UINT64_MAX

/* Capabilities of a QP's NIC, in kn_qp.flags (set by the host when it fills
 * the descriptor; device code reads them, never the backend's name). */
enum kn_qp_flag {
	/* The NIC takes the doorbell record or the doorbell register, whichever
	 * it sees first (the software NIC): a producer need not order the
	 * record before the register. Clear (hardware, and the safe default):
	 * the record is made visible before the register is written. */
	KN_QP_DB_UNORDERED = 1u << 0,
};

/* Mutable per-QP state, written only by device code (never by the NIC). */
typedef struct kn_qp_state {
	uint64_t resv;    /* next send ticket to hand out */
	uint64_t ready;   /* every ticket < ready is written and published */
	uint64_t rung;    /* producer value last written to the doorbell */
	uint64_t done;    /* every ticket < done has a consumed CQE */
	uint32_t db_lock; /* held while ringing, keeps the DBR monotonic */
	uint32_t poll_lock;
	uint64_t err_ticket; /* first ticket completed in error, or KN_NO_ERROR */
	uint32_t err_syndrome;
	uint32_t err_vendor;
	uint64_t rq_resv; /* receive queue: next receive ticket */
	uint64_t rq_done; /* every receive ticket < rq_done has been consumed */
	uint64_t cq_ci;   /* send CQEs consumed (one per WQE; a WQE of several
			   * WQEBBs takes as many tickets, so cq_ci <= done) */
	uint32_t bf_off;  /* the register the next ring writes: 0 or kn_qp.bf_alt */
	uint32_t pad32;
	uint64_t pad[4];
} kn_qp_state;

/* Everything device code needs to drive one RC QP. Exported by the host
 * (kinet_qp_device(), kinet_qp_device_cuda()); plain data, may be copied to
 * GPU memory. */
typedef struct kn_qp {
	uint8_t *sq;               /* sq_wqe_cnt WQEBBs */
	volatile uint32_t *dbrec;  /* [KN_RCV_DBR], [KN_SND_DBR], big-endian */
	volatile uint8_t *db;      /* doorbell / BlueFlame register, 64 bytes;
				    * with bf_alt, the first of two */
	volatile uint32_t *cpu_pi; /* KN_DB_CPU_PROXY: producer published here */
	uint8_t *cq;               /* send CQ, cq_cqe_cnt == sq_wqe_cnt */
	volatile uint32_t *cq_dbrec;
	uint8_t *rq;               /* receive queue: data segments */
	uint8_t *rcq;              /* receive CQ, rcq_cqe_cnt == rq_wqe_cnt */
	volatile uint32_t *rcq_dbrec;
	kn_qp_state *st;
	uint64_t *slot_ready; /* shared modes: slot_ready[slot] = ticket + 1 */
	uint64_t scratch_addr; /* 8 registered bytes for discarded atomic results */
	uint64_t timeout_ns;   /* bound on every blocking call */
	uint32_t scratch_lkey;
	uint32_t qpn;
	uint32_t sq_wqe_cnt; /* power of two */
	uint32_t cq_cqe_cnt;
	uint32_t rq_wqe_cnt; /* power of two, 0 when there is no receive queue */
	uint32_t rq_stride;  /* bytes per receive WQE (16 * sge) */
	uint32_t rcq_cqe_cnt;
	uint32_t db_mode; /* enum kn_db_mode, never KN_DB_AUTO */
	uint32_t share;   /* enum kn_share */
	uint32_t max_inline;
	uint32_t backend; /* informative only (1 soft, 2 mlx5): device code never reads it */
	uint32_t flags;   /* enum kn_qp_flag bits */
	uint32_t bf_alt;  /* bytes from db to the second register (the UAR's two
			   * BlueFlame buffers: rings alternate between them, as
			   * mlx5 drivers do); 0: one register */
} kn_qp;

typedef uint64_t kn_ticket_t;

/* Largest payload of kn_prep_write_inline / kn_put_inline (one WQEBB). */
#define KN_MAX_INLINE_WRITE 28u
/* Largest length of one device-API operation (write, read, send, receive
 * buffer): what an mlx5 data segment carries (bit 31 of its byte count is
 * the inline flag). Longer lengths are refused with -EINVAL. */
#define KN_MAX_LEN 0x7fffffffu

#endif /* KINET_DEVICE_TYPES_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * geng.h - the GPU engine's control block: what the software NIC (gengine.c,
 * on the CPU) and the GPU engine's kernel (src/cuda/engine.cu) share. It lives
 * in pinned host memory mapped into the GPU (kinet_queue_alloc).
 *
 * A QP is served by one engine at a time; its slot's `own` word says which.
 *   CPU  -> GPU   the QP's CPU engine, inside its pass, writes the slot
 *                 (queues, key views, its doorbell and consumer state) and
 *                 then own = GPU, while the kernel runs.
 *   GPU  -> STOP  the CPU asks for it back (a state change, a key-table
 *                 write, a destroy: kinet_soft_stop_world);
 *   GPU|STOP -> BACK  the kernel wrote its state into the slot and stopped
 *                 touching the QP, its queues and the memory it names: at
 *                 a WQE it does not execute (why says which: the CPU engine
 *                 executes it, with the same rules, and writes its CQE,
 *                 error CQEs included), when asked, or when it exits idle;
 *   BACK -> CPU   the CPU takes the state back (gengine.c, geng_settle).
 * The GPU only stores to `own` (no CPU-GPU atomics over PCIe).
 */
#ifndef KINET_SOFT_GENG_H
#define KINET_SOFT_GENG_H

#include <stdint.h>

#define KN_GENG_SLOTS 256
#define KN_GENG_BURST 32 /* WQEs per QP per pass */

enum { KN_GOWN_CPU = 0, KN_GOWN_GPU = 1, KN_GOWN_STOP = 2, KN_GOWN_BACK = 3 };

/* Why the GPU engine gave a QP back. */
enum kn_geng_why {
	KN_GWHY_NONE = 0,
	KN_GWHY_ASKED,     /* the CPU asked (state change, key table, destroy) */
	KN_GWHY_IDLE,      /* the kernel exits after KINET_GPU_ENGINE_IDLE_US without work */
	KN_GWHY_ERROR,     /* a WQE fails a check: the CPU engine writes its error CQE */
	KN_GWHY_OP,        /* an opcode the GPU engine does not execute (send, write with
			    * immediate, masked atomics): the QP stays on the CPU */
	KN_GWHY_HOST_MEM,  /* memory the GPU cannot reach (host memory not mapped into it) */
	KN_GWHY_HOST_ATOMIC, /* an atomic on host memory: atomic with the CPU's only there */
	KN_GWHY_FAULT,     /* an opcode a KINET_FAULT rule of the context may match: the CPU
			    * engine executes the WQE (and the rule), then offers the QP again */
	KN_GWHY__N
};

struct kn_geng_slot {
	volatile uint32_t own;  /* KN_GOWN_* */
	volatile uint32_t why;  /* enum kn_geng_why, with own = BACK */
	uint32_t gen;           /* bumped by each take: the kernel reloads the slot */
	uint32_t qpn, sq_cnt, cq_cnt, cq_ignore_overrun;
	uint32_t keys_cap, peer_keys_cap;
	uint32_t peer_access;   /* the peer's kinet_qp_attr.remote_access */
	uint32_t fault_ops;     /* bit 1 << (opcode & 31): WQEs left to the CPU engine, where
				 * a fault rule may match them (all bits: any opcode) */
	/* the GPU's addresses */
	uint64_t sq, dbrec, db0, db1, cq, cq_dbrec;
	uint64_t keys, peer_keys; /* struct kn_keyent views */
	uint64_t pd, peer_pd;
	/* the serving engine's state: the kernel's while own is GPU or STOP */
	uint64_t sq_ci, cq_pi, last_ctrl;
	uint64_t last_db_word[2];
	uint32_t dbr_seen, dbr_target, db_target, nregs;
	volatile uint64_t sq_ci_pub; /* the kernel publishes sq_ci here while serving */
	/* counted by the kernel since the take */
	uint64_t n_wqes, n_bytes, n_cqes, n_doorbells;
	uint64_t n_moved; /* bytes of writes and reads (the contexts' bytes) */
	/* the doorbell forms, as the CPU engine counts them */
	uint64_t n_db_wqe, n_db_pi, n_db_foreign, n_dbr_only;
};

struct kn_geng_ctl {
	volatile uint32_t stop;    /* the CPU: exit now (gives every QP back) */
	volatile uint32_t running; /* the kernel: 1 from its start to its exit */
	uint32_t idle_us;          /* exit after this long without work */
	volatile uint32_t nslots;  /* the CPU: slots [0, nslots) may be in use */
	volatile uint64_t passes;  /* the kernel's passes (liveness) */
	uint64_t pad[5];
	struct kn_geng_slot slot[KN_GENG_SLOTS];
};

#endif

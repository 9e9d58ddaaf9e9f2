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
 *
 * The WQE trace (KINET_TRACE): a slot whose trace_cap is not 0 has a ring of
 * trace_cap records (struct kn_geng_trec, in pinned host memory mapped into
 * the GPU, one ring per slot: one producer, the engine serving the slot, and
 * one consumer, the CPU). The engine writes a record for each WQE it takes
 * and each CQE it writes, then, after a fence, the number written
 * (trace_pi); the CPU reads them and stores the number read (trace_ci). A
 * full ring never stops the engine: the records that do not fit are counted
 * (trace_lost) and the CPU says so in the trace (KINET_TR_LOST).
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

/* The trace's record types and doorbell forms, as trace_fmt.h numbers them
 * (KINET_TR_*; gengine.c checks that they agree): the kernel's code does not
 * include core's headers. */
enum { KN_GTR_WQE = 1, KN_GTR_CQE = 2 };
enum { KN_GTR_DB_NONE = 0, KN_GTR_DB_WQE = 1, KN_GTR_DB_PI = 2, KN_GTR_DB_DBR = 3 };

/* A trace record as the engine writes it (32 bytes, four 8-byte stores); the
 * CPU adds the context and QP numbers and the engine index (trace_fmt.h). */
struct kn_geng_trec {
	uint64_t t;        /* the engine's clock, ns (kn_gx_now: %globaltimer in the kernel,
			    * CLOCK_MONOTONIC in the host form) */
	uint32_t len;      /* payload bytes (CQE: byte count) */
	uint32_t lkey;     /* first local key (0: none, inline) */
	uint32_t rkey;     /* remote key (0: none) */
	uint16_t wqe_idx;  /* WQE index (CQE: wqe_counter) */
	uint8_t type;      /* KN_GTR_WQE or KN_GTR_CQE */
	uint8_t opcode;    /* WQE: KN_OPCODE_*; CQE: the CQE opcode */
	uint8_t db_form;   /* WQE: KN_GTR_DB_* */
	uint8_t pad[7];
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
	/* the trace (KINET_TRACE), above */
	uint64_t trace;              /* the GPU's address of the ring */
	uint32_t trace_cap;          /* records in it, a power of two; 0: no trace */
	uint32_t db_form;            /* KN_GTR_DB_*: how the producer last rang */
	volatile uint64_t trace_pi;  /* the engine: records written (after a fence) */
	volatile uint64_t trace_ci;  /* the CPU: records read */
	volatile uint64_t trace_lost; /* the engine: records not written, the ring full */
};

struct kn_geng_ctl {
	volatile uint32_t stop;    /* the CPU: exit now (gives every QP back) */
	volatile uint32_t running; /* the kernel: 1 from its start to its exit */
	uint32_t idle_us;          /* exit after this long without work */
	volatile uint32_t nslots;  /* the CPU: slots [0, nslots) may be in use */
	volatile uint64_t passes;  /* the kernel's passes (liveness) */
	volatile uint64_t clock;   /* with passes, while trace is set: the engine's clock
				    * (kn_gx_now), the CPU's calibration of trace times */
	uint32_t trace;            /* the CPU: some slot has a trace ring */
	uint32_t pad32;
	uint64_t pad[3];
	struct kn_geng_slot slot[KN_GENG_SLOTS];
};

#endif

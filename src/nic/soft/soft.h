/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * soft.h - the software NIC: engine threads that serve doorbells, parse mlx5
 * WQEs, check every access against the key table and write CQEs.
 *
 * The engine is split into a requester (parses a WQE of the QP it serves,
 * resolves the local side) and a responder (checks and executes the remote
 * side against the target QP). For a peer in the same process the requester
 * calls the responder directly; the wire (another process) carries the same
 * request to the remote engine, which calls the same responder functions.
 */
#ifndef KINET_SOFT_H
#define KINET_SOFT_H

#include <string.h>
#include "core/driver.h"
#include "gpu/gpu.h"
#include "nic/soft/keytab.h"

/* ---- the software NIC's objects (each embeds the core's) ------------------------ */

struct kinet_soft_nic; /* engine.c */
struct kinet_wire;     /* wire*.c */

struct soft_ctx {
	kinet_ctx c;
	struct kinet_keytab keys;  /* the regions the engines check every access against */
	struct kinet_soft_nic *nic; /* engine threads */
	struct kinet_wire *wire;    /* endpoint to other processes, created on first use */
	struct kinet_wire *wire_sh; /* and to processes of this host (shm), created with it
				     * where KINET_FI_SAME_HOST allows; NULL: none (sh_why) */
	char sh_why[160];
	/* QPs by number (qpn = 0x100 + index), under c.lock */
	kinet_qp **qp_tab;
	uint32_t qp_cap;
	uint32_t *qp_free; /* free indexes (a stack) */
	uint32_t nfree;
	/* fault-injection rules (src/core/fault.h), NULL: none; replaced while
	 * the engines are stopped */
	struct kinet_fault_set *faults;
	_Atomic bool nr_warned; /* a doorbell rung in RESET or INIT was logged (once per context) */
	void **retired; /* replaced rule sets (freed at close) */
	int nretired;
};

/* A CQ and its producer side: engine threads (possibly of several QPs). */
struct soft_cq {
	kinet_cq c;
	pthread_spinlock_t lock; /* producers */
	uint64_t pi;             /* next CQE index the NIC writes (stored under lock,
				  * read by WAITs without it) */
	uint32_t reserved;       /* slots promised by soft_cq_reserve (under lock) */
	struct soft_cq *reg_next; /* every CQ of the process (soft_cq_wait_met) */
};

struct soft_qp {
	kinet_qp q;
	void *dbrec_page;
	uint8_t *uar; /* 4 KiB doorbell page, register at KN_BF_OFFSET */
	/* the peer in this process (any context), and who has us as their peer:
	 * under soft_peer_lock; readers are engines inside a pass */
	kinet_qp *peer;
	struct soft_qp *ref_head, *ref_next, **ref_pprev;
	/* the peer in another process */
	struct kinet_wire *wire;    /* the wire it is connected over */
	void *wire_ep;              /* its end there (before a connect: on one of the wires) */
	void *wire_alt;             /* before a connect: its end on the other wire (the
				     * descriptor names both), released by the connect */
	bool sh_named;              /* its last descriptor named its same-host end: only
				     * then may a connect take the same-host wire (the peer,
				     * which reads that descriptor, decides alike) */
	bool exported;              /* a descriptor was made since the last reset (or a
				     * connect named its ends as one would) */
	/* engine side (touched by the serving engine thread only, unless noted) */
	uint64_t sq_ci;             /* WQEBBs consumed (low 16 bits vs the DBR) */
	uint64_t last_db_word[2];   /* last value seen in each register (doorbell words) */
	uint32_t db_target;         /* producer named by the register (bit 16: valid) */
	uint32_t dbr_seen;          /* the doorbell record when last read */
	uint32_t dbr_target;        /* producer named by the record (bit 16: valid) */
	pthread_mutex_t rq_lock;    /* receive queue consumer (any engine) */
	uint32_t rq_ci;             /* receive WQEs consumed */
	struct kinet_srq *srq;      /* receives through this SRQ (srq.c), not an RQ */
	uint16_t rwqe;              /* the receive WQE taken last (its CQE's wqe_counter) */
	uint32_t rnr_count;
	uint64_t rnr_until_ns;
	uint8_t db_form;     /* how the producer last rang (KINET_TR_DB_*: the trace) */
	uint32_t nr_dbr;     /* doorbell record / register seen while in RESET or INIT */
	uint64_t nr_reg[2];
	_Atomic bool nr_armed; /* the registers were cleared in RESET: new words count */
	uint64_t hold_until_ns; /* fault injection: the head WQE waits (delay, cqfull, silent) */
	uint8_t hold_kind;      /* which (enum kinet_fault_action), 0: none */
	uint64_t hold_done_ci;  /* bit 63 | sq_ci of the WQE whose hold just ended */
	_Atomic uint64_t sq_ci_pub; /* sq_ci for readers outside the engine */
	int engine_idx, engine_slot;
	void *engine_priv; /* engine.c's per-QP state */
	/* the GPU engine (gengine.c) */
	int gslot1;        /* its slot + 1 (0: none) */
	uint8_t geng;      /* 0 not decided, 1 eligible, 2 refused (geng_why) */
	bool geng_on;      /* the GPU engine has it now */
	uint64_t geng_wqes; /* WQEs it executed, as of its last give-back */
	uint64_t geng_skip; /* bit 63 | sq_ci of a WQE it gave back: the CPU's to run */
	uint32_t geng_hold; /* state changes of it in progress: not offered (atomic) */
	uint64_t geng_backs[8]; /* give-backs by enum kn_geng_why (logged at destroy) */
	char geng_why[96];
};

/* A shared receive queue (srq.c, nic/soft/srq.h). */
struct kinet_srq {
	kinet_ctx *ctx;
	kinet_pd *pd;            /* the receive WQEs' keys are checked against it */
	uint8_t *buf;
	uint32_t cnt, stride;
	volatile uint32_t *dbrec;
	uint32_t srqn;
	_Atomic int refs;        /* QPs receiving through it */
	pthread_mutex_t lock;    /* the consumer: any engine, any QP */
	uint16_t head;           /* the next WQE the NIC takes */
	uint32_t taken;          /* WQEs taken (low 16 bits vs the doorbell record; lock) */
};
/* Takes the SRQ's next posted WQE: 0 with its index and address, or -EAGAIN
 * when none is posted. */
int soft_srq_take(struct kinet_srq *srq, uint16_t *idx, const uint8_t **wqe);

static inline struct soft_ctx *soft_ctx(kinet_ctx *c)
{
	return kinet_container_of(c, struct soft_ctx, c);
}
static inline struct soft_qp *soft_qp(kinet_qp *q)
{
	return kinet_container_of(q, struct soft_qp, q);
}
static inline struct soft_cq *soft_cq(kinet_cq *c)
{
	return kinet_container_of(c, struct soft_cq, c);
}

/* Writes a CQE (64 bytes the caller prepared; op_own's owner bit is set
 * here) at the producer index of a CQ of cnt slots (1: a collapsed CQ) and
 * advances the index; the caller owns the producer side (its lock, or the
 * only thread producing). The body first, then the last word
 * (sop_drop_qpn, wqe_counter, signature, op_own) in one store: a poller of
 * the owner bit and one of wqe_counter (IBGDA's, on a collapsed CQ) both
 * see the CQE whole, never a new wqe_counter beside the last CQE's opcode.
 * The index is stored atomically: WAIT WQEs read it (soft_cq_wait_met). */
static inline void soft_cq_store(struct soft_cq *cq, uint32_t cnt, const void *cqe)
{
	uint64_t idx = cq->pi;
	__atomic_store_n(&cq->pi, idx + 1, __ATOMIC_RELEASE);
	uint8_t *dst = cq->c.buf + (idx & (cnt - 1)) * KN_CQE_SIZE;
	uint64_t last;
	memcpy(&last, (const uint8_t *)cqe + KN_CQE_SIZE - 8, 8);
	((uint8_t *)&last)[7] = (uint8_t)((((uint8_t *)&last)[7] & 0xfe) | ((idx / cnt) & 1));
	memcpy(dst, cqe, KN_CQE_SIZE - 8);
	__atomic_store_n((uint64_t *)(dst + KN_CQE_SIZE - 8), last, __ATOMIC_RELEASE);
}

/* The region checks of the NIC against ctx's key table (keytab.h). */
static inline int soft_mr_check(kinet_ctx *ctx, const kinet_pd *pd, uint32_t key, uint64_t addr,
				uint64_t len, unsigned access, struct kinet_mr_ref *out)
{
	int why = kinet_keytab_check(&soft_ctx(ctx)->keys, pd, key, addr, len, access, out);
	/* a cached region whose memory was unmapped since: as revoked */
	if (!why && __builtin_expect(out->mr->cache_ent != NULL, 0) && kinet_cache_mr_gone(out->mr))
		why = KINET_REASON_REVOKED;
	return why;
}
/* Does target QP t allow the remote access `need` (its remote_access flags,
 * which kinet-verbs may change while the QP serves)? 0 or the reason. */
static inline uint32_t soft_qp_access_check(const kinet_qp *t, unsigned need)
{
	return kn_rule_qp_access(__atomic_load_n(&t->attr.remote_access, __ATOMIC_RELAXED), need);
}
/* The QP of ctx with number qpn, or NULL. */
kinet_qp *soft_qp_lookup(kinet_ctx *ctx, uint32_t qpn);

/* ---- engines (engine.c) ---- */
int kinet_soft_open(kinet_ctx *ctx, int engine_threads);
void kinet_soft_close(kinet_ctx *ctx);
int kinet_soft_qp_attach(kinet_qp *qp);
void kinet_soft_qp_detach(kinet_qp *qp);
/* Called on every state change (flushes on ERR, resets on RESET). */
void kinet_soft_qp_state_changed(kinet_qp *qp, int old_state, int new_state);
/* Stops every engine of ctx between passes (takes their pass locks, in
 * engine order) and resumes them. While stopped, no engine reads the key
 * table: writers of the table take this, then the table's lock for writing
 * (lock order: pass locks, then the table). wait_copies: also waits until
 * the engines' GPU copies in flight have landed (a region may go away). */
void kinet_soft_stop_world(kinet_ctx *ctx, bool wait_copies);
void kinet_soft_start_world(kinet_ctx *ctx);
/* Adds the engines' counter blocks to the sums (kinet_ctx_counters). */
void kinet_soft_counters_sync(kinet_ctx *ctx);
void kinet_soft_counters_add(kinet_ctx *ctx, struct kinet_counters *o);

/* The engine's last-consumed ctrl word of qp (engine.c), set by a give-back. */
void kinet_soft_engine_state(kinet_qp *qp, uint64_t last_ctrl);

/* ---- the GPU engine (gengine.c; geng.h) ---- */
/* Can the GPU engine run in this process (KINET_GPU_ENGINE=on and a GPU
 * with the module's engine hooks, or KINET_GPU_ENGINE=host)? NULL when it
 * can, else why not. */
const char *kinet_geng_unavailable(void);
/* KINET_GPU_ENGINE=host: its code runs on a CPU thread (geng_host.c). */
bool kinet_geng_host(void);
/* At connect (RTR): decides whether the GPU engine may serve qp. */
void kinet_geng_connect(kinet_qp *qp, kinet_qp *peer);
/* At the start of qp's CPU pass: 1 when the GPU serves it (skip it), 0 when
 * the CPU does (a QP just given back is settled first). */
int kinet_geng_pass(kinet_qp *qp);
/* Hands qp over to the GPU engine (its CPU engine, inside a pass, nothing in
 * flight), when the kernel runs; s->geng_on says whether it took it. */
void kinet_geng_offer(kinet_qp *qp, uint64_t last_ctrl);
/* Is the kernel running? Launch it (an eligible QP has work). */
bool kinet_geng_running(void);
void kinet_geng_launch(void);
/* Takes back every QP of ctx, or every QP that has ctx as its peer's (qp
 * NULL), or qp and the QPs whose peer it is; settle_own: the caller serves
 * ctx's QPs (holds its engines' pass locks) and settles them. */
void kinet_geng_recall(kinet_ctx *ctx, kinet_qp *qp, bool settle_own);
/* Whether the GPU engine holds a QP of ctx or one whose peer is in ctx. */
bool kinet_geng_holds(kinet_ctx *ctx);
/* Takes qp back and frees its slot (destroy). */
void kinet_geng_release(kinet_qp *qp);
/* sq_ci published by the kernel while it serves qp (*on). */
uint64_t kinet_geng_sq_ci(kinet_qp *qp, bool *on);
void kinet_geng_info(kinet_qp *qp, struct kinet_ep_info *o);
/* The host executor's thread (geng_host.c), as the CUDA module's engine
 * hooks: launch, query (0 not running, 1 launched), wait. gengine.c's lock. */
struct kn_geng_ctl;
int kinet_geng_host_launch(struct kn_geng_ctl *ctl);
int kinet_geng_host_query(void);
int kinet_geng_host_wait(void);

/* ---- CQ producer (cq.c) ---- */
/* Writes one CQE (64 bytes prepared by the caller, op_own's owner bit is set
 * here) to a CQ: -EAGAIN when the CQ is full (consumer index behind). */
int soft_cq_push(kinet_cq *cq, struct kn_cqe64 *cqe);
/* Free CQE slots as seen from the NIC side (reserved ones are not free). */
uint32_t soft_cq_space(kinet_cq *cq);
/* Promises the caller one CQE slot before it executes a WQE, so that the
 * CQE can always be written (another engine may share the CQ): 0, or -EAGAIN
 * when the CQ is full. Every promise ends in exactly one
 * soft_cq_push_reserved or soft_cq_unreserve. */
int soft_cq_reserve(kinet_cq *cq);
void soft_cq_unreserve(kinet_cq *cq);
/* soft_cq_push into a promised slot: cannot fail. */
void soft_cq_push_reserved(kinet_cq *cq, struct kn_cqe64 *cqe);
/* The CQs a WAIT WQE may name: registered at creation, gone at destroy. */
void soft_cq_register(kinet_cq *cq);
void soft_cq_unregister(kinet_cq *cq);
/* Has the CQ of ctx numbered cqn (kinet_cq.num) written its CQE of index
 * `index` (24 bits, cyclic: within 2^23 behind its producer)? 1 yes, 0 not
 * yet, -ENOENT no such CQ in ctx. The index a WAIT WQE names. */
int soft_cq_wait_met(kinet_ctx *ctx, uint32_t cqn, uint32_t index);
/* Empties a CQ (all CQEs invalid, indexes 0): a dedicated CQ of a QP reset. */
void soft_cq_reset(kinet_cq *cq);

#define SOFT_MAX_SGE 64 /* KN_RULE_MAX_SGE (rules.h) */
#define SOFT_MAX_MSG (1ull << 30) /* largest message (1 GiB): KN_RULE_MAX_MSG */

/* One piece of a gather or scatter list, already checked and translated. */
struct soft_iov {
	uint8_t *ptr;
	uint64_t len;
	int kind;     /* enum kinet_mem_kind */
	kinet_mr *mr; /* the region it was checked against (requester; NULL: inline data,
		       * staging): the wire compares it, never reads through it */
};

/* A parsed send WQE. */
struct soft_req {
	uint8_t opcode;    /* KN_OPCODE_* */
	uint8_t signaled;
	uint16_t wqe_idx;
	uint32_t nbb;      /* WQEBBs it occupies */
	uint64_t raddr;
	uint32_t rkey;
	uint32_t imm;      /* wire order */
	uint64_t swap_add, compare;
	uint64_t swap_mask, compare_mask; /* masked atomics (FA: swap_mask is the
					     field boundary) */
	uint8_t atomic_size; /* masked atomics: 4 or 8 bytes */
	uint32_t wait_index, wait_cqn; /* WAIT: the CQE index (24 bits) and its CQ */
	uint32_t dct;      /* a DCI's remote operation: its DCT's number and key (dc.h) */
	uint64_t dc_key;
	uint64_t total;    /* payload bytes */
	uint8_t async_ok;  /* in: GPU-to-GPU copies may be left in flight (engine) */
	uint8_t in_flight; /* out: soft_exec_local left a copy in flight */
	uint64_t trace_t;  /* KINET_TRACE: when the engine took it */
	int niov;
	struct soft_iov iov[SOFT_MAX_SGE]; /* local gather (write/send) or scatter (read/atomic) */
	const uint8_t *inl[SOFT_MAX_SGE]; /* inline data pieces point into wqe (iov.kind host) */
	uint8_t wqe[KN_MAX_WQE_BBS * KN_SEND_WQE_BB];
};

/* Responder results: 0 done, a KN_SYND_* for the requester's error CQE, or
 * SOFT_RNR when the target has no receive WQE (retry later). */
#define SOFT_RNR 0x100
#define SOFT_STALL 0x200 /* target CQ full: retry later, no retry counted */
/* An error result may carry the check that failed (enum kinet_reason) in
 * bits 16..23: it becomes the vendor syndrome byte of the error CQE. Code
 * that compares results masks with SOFT_SYND; the wire carries the reason
 * in its answer. */
#define SOFT_REASON(synd, why) ((uint32_t)(synd) | ((uint32_t)(why) << 16))
#define SOFT_SYND(rc) ((uint32_t)(rc)&0xffffu)
#define SOFT_WHY(rc) (((uint32_t)(rc) >> 16) & 0xffu)
/* The reason code an error CQE of result res carries (the recorded one, or
 * what its syndrome implies). */
uint8_t soft_reason_of(uint32_t res);

/* Responder side, for the target QP `t` (RTR or RTS). Called by the local
 * requester or by the wire on behalf of a remote one. src/dst iovs are the
 * requester's local memory (or wire staging buffers). */
int soft_resp_write(kinet_qp *t, uint64_t raddr, uint32_t rkey, const struct soft_iov *src,
		    int niov, uint64_t total, int with_imm, uint32_t imm, uint32_t src_qpn);
/* The receive side of an RDMA write with immediate whose payload the caller
 * has placed already (the wire: a write in chunks, or read in place): takes
 * a receive WQE and writes its CQE with byte count len. 0, SOFT_RNR,
 * SOFT_STALL, or a syndrome for the requester. */
int soft_resp_write_imm(kinet_qp *t, uint64_t len, uint32_t imm, uint32_t src_qpn);
int soft_resp_read(kinet_qp *t, uint64_t raddr, uint32_t rkey, const struct soft_iov *dst,
		   int niov, uint64_t total);
int soft_resp_atomic(kinet_qp *t, uint8_t opcode, uint64_t raddr, uint32_t rkey,
		     uint64_t swap_add, uint64_t compare, uint64_t *old);
int soft_resp_send(kinet_qp *t, const struct soft_iov *src, int niov, uint64_t total,
		   int with_imm, uint32_t imm, uint32_t src_qpn);
/* The extended atomics (KN_OPCODE_ATOMIC_MASKED_CS / _FA) on `size` (4 or 8)
 * bytes at raddr: a = swap or addend, b = compare, c = swap mask or field
 * boundary, d = compare mask (prm.h has the semantics); *old gets the value
 * before (the low `size` bytes). Atomic with respect to every other atomic
 * the NIC executes, and on host memory to the CPU's own atomics. */
int soft_resp_masked_atomic(kinet_qp *t, uint8_t opcode, uint32_t size, uint64_t raddr,
			    uint32_t rkey, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
			    uint64_t *old);
/* The new value of a word holding `old` under a masked atomic (size 4: the
 * low 32 bits); false when a masked compare-and-swap does not match (the
 * word stays). Pure: the responder and the wire's tests share it. */
bool soft_masked_apply(uint8_t opcode, uint32_t size, uint64_t old, uint64_t a, uint64_t b,
		       uint64_t c, uint64_t d, uint64_t *nv);
/* Did the last move of the calling thread's soft_exec_local touch GPU
 * memory (staged, through CUDA copies)? For the per-QP byte counters. */
extern __thread bool soft_moved_staged __attribute__((tls_model("initial-exec")));

/* Fault injection (engine.c): a wire request received for QP t (opcode
 * op, payload p of n bytes): 1 to drop it, 2 to deliver it twice, 0 to keep
 * it (possibly with a byte corrupted). */
int kinet_soft_fault_rx(kinet_qp *t, uint8_t op, uint8_t *p, uint32_t n);

/* Scatter/gather copy between two lists of equal total length. */
int soft_copy_iov(const struct soft_iov *dst, int ndst, const struct soft_iov *src, int nsrc,
		  uint64_t total);

/* Completion writers. soft_req_cqe: -EAGAIN when the send CQ is full;
 * soft_req_cqe_reserved: into a slot reserved with kinet_cq_reserve. */
int soft_req_cqe(kinet_qp *qp, const struct soft_req *r, uint32_t syndrome);
void soft_req_cqe_reserved(kinet_qp *qp, const struct soft_req *r, uint32_t syndrome);
int soft_flush_rq(kinet_qp *qp);

/* Parses the WQE at the QP's consumer index (avail BBs published). Returns
 * 0, or a KN_SYND_* (the WQE is malformed or its local side invalid); r->nbb
 * is always set to how many BBs to consume. */
uint32_t soft_parse_wqe(kinet_qp *qp, uint64_t ci, uint32_t avail, struct soft_req *r);
/* The same, with the first WQEBB taken from bb (a BlueFlame copy of it, 64
 * bytes) instead of the SQ; bb NULL: the SQ. */
uint32_t soft_parse_wqe_bb(kinet_qp *qp, uint64_t ci, uint32_t avail, const uint8_t *bb,
			   struct soft_req *r);

/* Executes a parsed request against a same-process peer. With r->async_ok,
 * copies between GPU buffers are only enqueued (kinet_cuda->copy_async) and
 * r->in_flight says so: the caller completes the WQE once a later fence of
 * its thread has completed. */
int soft_exec_local(kinet_qp *qp, struct soft_req *r);

#endif

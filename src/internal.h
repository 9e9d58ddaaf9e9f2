/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * internal.h - library-private structures shared by core, mem and the NICs.
 */
#ifndef KINET_INTERNAL_H
#define KINET_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <kinet/kinet.h>
#include "kinet_config.h"

/* ---- logging (src/core/log.c) --------------------------------------------- */
void kinet_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define KLOG_ERR(...) kinet_log(KINET_LOG_ERROR, __VA_ARGS__)
#define KLOG_WARN(...) kinet_log(KINET_LOG_WARN, __VA_ARGS__)
#define KLOG_INFO(...) kinet_log(KINET_LOG_INFO, __VA_ARGS__)
#define KLOG_DBG(...) kinet_log(KINET_LOG_DEBUG, __VA_ARGS__)
#define KLOG_TRACE(...) kinet_log(KINET_LOG_TRACE, __VA_ARGS__)

/* kinet-specific error codes beyond errno (negative, see kinet_strerror). */
#define KINET_ERR_BASE 2000
#define KINET_ENOBACKEND (KINET_ERR_BASE + 1) /* no usable backend */
#define KINET_EVERSION (KINET_ERR_BASE + 2)   /* descriptor version mismatch */
#define KINET_ESECRET (KINET_ERR_BASE + 3)    /* wrong job secret */

/* ---- run-time modules (src/core/module.c) ----------------------------------- */
/* dlopen of a module (KINET_CUDA_MODULE, KINET_MLX5EMU_MODULE) from the folder
 * libkinet itself was loaded from, whatever the search path says. NULL when it
 * cannot be loaded: dlerror() says why. */
void *kinet_module_open(const char *file, int flags);

/* ---- tunables (src/core/tunables.c) ---------------------------------------- */
/* Registry is static: add an entry to the table in tunables.c. */

/* ---- memory helpers (src/mem/) ---------------------------------------------- */
/* Page-aligned, zeroed memory for queues and doorbell pages. When a GPU is
 * present (CUDA module loaded), it is registered and mapped into the GPU. */
void *kinet_queue_alloc(size_t len);
void kinet_queue_free(void *p, size_t len);

/* Moves n bytes between memories of the given kinds (enum kinet_mem_kind).
 * Host to host is memcpy; anything involving GPU memory goes through the
 * CUDA module. 0 or a negative errno. */
int kinet_mem_copy(void *dst, int dkind, const void *src, int skind, size_t n);

/* Hooks filled by the CUDA module when it is loaded (src/cuda/). */
struct kinet_cuda_ops {
	int (*copy)(void *dst, int dkind, const void *src, int skind, size_t n);
	int (*atomic64)(void *addr, int op, uint64_t a, uint64_t b, uint64_t *old);
	int (*pointer_kind)(const void *p); /* enum kinet_mem_kind, or -errno */
	int (*host_register)(void *p, size_t len);
	int (*host_unregister)(void *p);
	/* Copies left in flight (the engine keeps several GPU copies going):
	 * copy_async enqueues on the calling thread's stream and returns at once
	 * (the memory on both sides must stay until a later fence completed);
	 * fence records a point after every copy the calling thread enqueued so
	 * far; fence_query: 1 completed (the copies before it are visible to
	 * later kernels and copies), 0 not yet, -EIO a copy failed; fence_wait
	 * blocks until completed (any thread); fence_free gives it back (any
	 * thread). NULL hooks: synchronous copies only. */
	int (*copy_async)(void *dst, int dkind, const void *src, int skind, size_t n);
	int (*fence)(void **f);
	int (*fence_query)(void *f);
	int (*fence_wait)(void *f);
	void (*fence_free)(void *f);
};
extern const struct kinet_cuda_ops *kinet_cuda;
/* Tries to load the CUDA module once; returns kinet_cuda (NULL when absent). */
const struct kinet_cuda_ops *kinet_cuda_load(void);

/* ---- objects -------------------------------------------------------------------- */

struct kinet_soft_nic; /* src/nic/soft/ */

struct kinet_ctx {
	int backend;
	char reason[256]; /* why this backend (auto) */
	pthread_mutex_t lock;
	/* memory regions: key = index << 8 | tag; tag never 0 */
	pthread_rwlock_t mr_lock;
	struct kinet_mr **mr_tab;
	uint32_t mr_cap;
	uint32_t mr_tag;
	/* queue pairs by number */
	struct kinet_qp **qp_tab;
	uint32_t qp_cap;
	uint32_t next_pdn;
	struct kinet_soft_nic *nic;
	struct kinet_wire *wire; /* soft: endpoint to other processes (wire.c), lazy */
	void *mlx5; /* mlx5 backend state (src/nic/mlx5/) */
	atomic_int pds, cqs; /* live PDs and CQs: kinet_close refuses while any */
	/* counters: see struct kinet_counters. These are the shared ones, for
	 * threads without a block of their own (host calls, other contexts'
	 * engines); each engine thread counts in its own block (below) and
	 * kinet_ctx_counters() adds them up. */
	_Atomic uint64_t c_wqes, c_bytes, c_cqes, c_errors, c_flushed, c_doorbells, c_dbr_only,
		c_bf_wqes, c_staged, c_direct, c_rnr, c_proxy;
	_Atomic uint64_t c_synd[64];
};

/* One thread's counters for one context: the same names as kinet_ctx's,
 * written by their owner thread only (plain increments, relaxed stores: no
 * locked instruction, no line shared with other writers), read by
 * kinet_ctx_counters() with relaxed loads. */
struct kinet_ctr_blk {
	kinet_ctx *ctx;
	uint64_t c_wqes, c_bytes, c_cqes, c_errors, c_flushed, c_doorbells, c_dbr_only, c_bf_wqes,
		c_staged, c_direct, c_rnr, c_proxy;
	uint64_t c_synd[64];
} __attribute__((aligned(64)));

/* The calling thread's counter block (engine threads set it), or NULL. */
extern __thread struct kinet_ctr_blk *kinet_ctr_self __attribute__((tls_model("initial-exec")));

/* Adds n to counter `field` (c_wqes, ...) of ctx: in the thread's own block
 * when it has one for ctx, otherwise with an atomic add on ctx's. */
#define KINET_COUNT(ctx_, field, n_)                                                            \
	do {                                                                                    \
		kinet_ctx *kc_ctx = (ctx_);                                                     \
		struct kinet_ctr_blk *kc_b = kinet_ctr_self;                                    \
		uint64_t kc_n = (n_);                                                           \
		if (kc_b && kc_b->ctx == kc_ctx)                                                \
			__atomic_store_n(&kc_b->field, kc_b->field + kc_n, __ATOMIC_RELAXED);   \
		else                                                                            \
			atomic_fetch_add_explicit(&kc_ctx->field, kc_n, memory_order_relaxed);  \
	} while (0)

struct kinet_pd {
	kinet_ctx *ctx;
	uint32_t pdn;
	atomic_int refs; /* regions and QPs using it */
	void *priv;      /* mlx5: the verbs PD */
};

struct kinet_mr {
	kinet_pd *pd;
	void *addr;
	size_t len;
	unsigned access;
	uint32_t key;
	int kind; /* enum kinet_mem_kind */
	int path; /* enum kinet_mr_path: how it was registered */
	uint32_t rkey; /* remote key (soft: == key; mlx5: the verbs rkey) */
	void *priv;    /* mlx5: the verbs MR */
};

struct kinet_cq {
	kinet_ctx *ctx;
	uint8_t *buf;              /* cnt CQEs */
	uint32_t cnt;              /* power of two */
	volatile uint32_t *dbrec;  /* [0] consumer index (big-endian, 24 bits) */
	void *dbrec_page;
	pthread_spinlock_t lock;   /* producers (engine threads) */
	uint64_t pi;               /* next CQE index the NIC writes */
	uint64_t host_ci;          /* kinet_cq_poll consumer */
	uint32_t reserved;         /* slots promised by kinet_cq_reserve (under lock) */
	atomic_int refs;
};

/* Result of a memory check by the NIC. */
struct kinet_mr_ref {
	uint8_t *ptr; /* translated address */
	int kind;     /* enum kinet_mem_kind */
};

/* Checks that [addr, addr+len) lies in the region named by key, that the
 * region belongs to pd and grants `access` (0 = local read). Returns 0 and
 * the translation, or -EACCES (bad key, PD, access) / -ERANGE (bounds).
 * Caller holds ctx->mr_lock for reading across the access, or is an engine
 * thread of ctx inside its pass (writers stop the engines first). */
int kinet_mr_check(kinet_ctx *ctx, const kinet_pd *pd, uint32_t key, uint64_t addr,
		   uint64_t len, unsigned access, struct kinet_mr_ref *out);

/* Wire hooks: filled by the wire (src/nic/soft/wire*.c) for QPs whose peer
 * is in another process. See engine.c: the engine hands each WQE for a remote
 * peer to wire->submit() and completes it when the wire reports back. */
struct kinet_wire;

struct kinet_qp {
	kinet_ctx *ctx;
	kinet_pd *pd;
	uint32_t qpn;
	_Atomic int state;
	struct kinet_qp_attr attr;
	kinet_cq *scq, *rcq;
	bool own_scq, own_rcq;
	/* queues */
	uint8_t *sq; /* sq_cnt * 64 */
	uint32_t sq_cnt;
	uint8_t *rq; /* rq_cnt * rq_stride */
	uint32_t rq_cnt, rq_stride;
	volatile uint32_t *dbrec; /* [0] RQ, [1] SQ; also holds cpu_pi at [4] */
	void *dbrec_page;
	uint8_t *uar; /* 4 KiB doorbell page, register at KN_BF_OFFSET */
	int db_mode;
	/* device descriptor (host executor copy) */
	kn_qp desc;
	kn_qp_state *dstate;
	uint64_t *slot_ready;
	uint64_t *scratch; /* 8 bytes, registered as scratch_mr */
	kinet_mr *scratch_mr;
	/* remote end */
	struct kinet_qp *peer; /* same process */
	uint32_t peer_qpn;
	struct kinet_wire *wire; /* other process (NULL: local) */
	void *wire_ep;
	/* engine side (touched by the serving engine thread only, unless noted) */
	uint64_t sq_ci;             /* WQEBBs consumed (low 16 bits vs the DBR) */
	uint64_t last_db_word;      /* last doorbell register value seen */
	uint32_t db_target;         /* producer named by the register */
	uint32_t proxy_seen;        /* CPU proxy: last cpu_pi rung */
	pthread_mutex_t rq_lock;    /* receive queue consumer (any engine) */
	uint32_t rq_ci;             /* receive WQEs consumed */
	uint32_t rnr_count;
	uint64_t rnr_until_ns;
	_Atomic uint64_t sq_ci_pub; /* sq_ci for readers outside the engine */
	int engine_idx;
	void *engine_priv; /* engine/wire per-QP data */
	uint64_t host_pi;  /* kinet_qp_post_raw producer */
};

/* ---- the software NIC (src/nic/soft/) ----------------------------------------- */
int kinet_soft_open(kinet_ctx *ctx, int engine_threads);
void kinet_soft_close(kinet_ctx *ctx);
int kinet_soft_qp_attach(kinet_qp *qp);
void kinet_soft_qp_detach(kinet_qp *qp);
/* Called on every state change (flushes on ERR, resets on RESET). */
void kinet_soft_qp_state_changed(kinet_qp *qp, int old_state, int new_state);
/* Stops every engine of ctx between passes (takes their pass locks, in
 * engine order) and resumes them. While stopped, no engine reads the key
 * table: writers of the table take this, then mr_lock for writing (lock
 * order: pass locks, then mr_lock). wait_copies: also waits until the
 * engines' GPU copies in flight have landed (a region may go away).
 * No-op without a software NIC. */
void kinet_soft_stop_world(kinet_ctx *ctx, bool wait_copies);
void kinet_soft_start_world(kinet_ctx *ctx);
/* Adds the engines' counter blocks to the sums (kinet_ctx_counters). */
void kinet_soft_counters_add(kinet_ctx *ctx, struct kinet_counters *o);
/* Connects a QP to a peer in another process (RTR with remote->wire_addr). */
int kinet_soft_wire_connect(kinet_qp *qp, const struct kinet_qp_remote *remote);

/* Writes one CQE (64 bytes prepared by the caller, op_own's owner bit is set
 * here) to a CQ: -EAGAIN when the CQ is full (consumer index behind). */
int kinet_cq_push(kinet_cq *cq, struct kn_cqe64 *cqe);
/* Free CQE slots as seen from the NIC side (reserved ones are not free). */
uint32_t kinet_cq_space(kinet_cq *cq);
/* Promises the caller one CQE slot before it executes a WQE, so that the
 * CQE can always be written (another engine may share the CQ): 0, or -EAGAIN
 * when the CQ is full. Every promise ends in exactly one
 * kinet_cq_push_reserved or kinet_cq_unreserve. */
int kinet_cq_reserve(kinet_cq *cq);
void kinet_cq_unreserve(kinet_cq *cq);
/* kinet_cq_push into a promised slot: cannot fail. */
void kinet_cq_push_reserved(kinet_cq *cq, struct kn_cqe64 *cqe);
/* Empties a CQ (all CQEs invalid, indexes 0): a dedicated CQ of a QP reset. */
void kinet_cq_reset(kinet_cq *cq);

void kinet_count_syndrome(kinet_ctx *ctx, uint32_t synd);

/* Internal helpers shared by backends */
uint32_t kinet_pow2(uint32_t v);
kinet_qp *kinet_ctx_qp_lookup(kinet_ctx *ctx, uint32_t qpn);
/* Fills qp->desc (the device descriptor) from the QP; every backend uses it so
 * that device code sees the same descriptor whatever executes the queue. */
void kinet_qp_fill_desc(kinet_qp *qp, volatile uint8_t *db, volatile uint32_t *cpu_pi,
			int backend);

#endif

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
#include <kinet/device_port.h> /* kn_now_ns, KN_PAUSE */
#include "kinet_config.h"

/* ---- logging (src/core/log.c) --------------------------------------------- */
void kinet_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define KLOG_ERR(...) kinet_log(KINET_LOG_ERROR, __VA_ARGS__)
#define KLOG_WARN(...) kinet_log(KINET_LOG_WARN, __VA_ARGS__)
#define KLOG_INFO(...) kinet_log(KINET_LOG_INFO, __VA_ARGS__)
#define KLOG_DBG(...) kinet_log(KINET_LOG_DEBUG, __VA_ARGS__)
#define KLOG_TRACE(...) kinet_log(KINET_LOG_TRACE, __VA_ARGS__)
/* The rank shown in the prefix of log lines, set by the bootstrap once it
 * knows it (-1: unknown). Process-wide: the last one set. */
void kinet_log_set_rank(int rank);


/* ---- run-time modules (src/core/module.c) ----------------------------------- */
/* dlopen of a module (KINET_CUDA_MODULE, KINET_MLX5EMU_MODULE) from the folder
 * libkinet itself was loaded from, whatever the search path says. NULL when it
 * cannot be loaded: dlerror() says why. */
void *kinet_module_open(const char *file, int flags);

/* ---- tunables (src/core/tunables.c): declared in src/core/tunables.def ------ */
#include "core/tunables.h"
#include "core/trace.h"

/* ---- memory helpers (src/mem/) ---------------------------------------------- */
/* Page-aligned, zeroed memory for queues and doorbell pages. When a GPU is
 * present (CUDA module loaded), it is registered and mapped into the GPU. */
void *kinet_queue_alloc(size_t len);
void kinet_queue_free(void *p, size_t len);

/* Moves n bytes between memories of the given kinds (enum kinet_mem_kind).
 * Host to host is memcpy; anything involving GPU memory goes through the
 * CUDA module. 0 or a negative errno. */
int kinet_mem_copy(void *dst, int dkind, const void *src, int skind, size_t n);

/* Deregisters at once (no cache check): kinet_mr_dereg's body. */
int kinet_mr_dereg_now(kinet_mr *mr);
/* The registration cache (src/mem/cache.c): is the cache deregistering mr
 * itself right now? The next cache of a context (the stats' walk). */
bool kinet_mr_cache_owns_dereg(const kinet_mr *mr);
struct kinet_mr_cache *kinet_mr_cache_next(const struct kinet_mr_cache *c);

/* What the CUDA driver says of a GPU pointer (kinet_cuda_ops.mem_info). */
struct kinet_cuda_mem {
	uint64_t buffer_id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID: the allocation's identity */
	uintptr_t base;     /* the allocation: [base, base + size) */
	size_t size;
	int pool;           /* from a memory pool (cudaMallocAsync, cuMemAllocFromPool) */
	int vmm;            /* mapped with cuMemMap (virtual memory management) */
	int managed;        /* managed (unified) memory */
	int device;         /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
};

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
	/* Allocation identity of GPU memory at p (the registration cache checks
	 * it on every hit): 0, or -EINVAL (not GPU memory) / -EIO. NULL: the
	 * module has none (GPU memory is then not cached). */
	int (*mem_info)(const void *p, struct kinet_cuda_mem *out);
};
extern const struct kinet_cuda_ops *kinet_cuda;
/* Tries to load the CUDA module once; returns kinet_cuda (NULL when absent). */
const struct kinet_cuda_ops *kinet_cuda_load(void);

/* ---- objects -------------------------------------------------------------------- */

/* The core objects. A backend embeds each in an object of its own (first
 * member or not: container_of) whose size it declares in its ops table; the
 * core allocates that size, zeroed, fills the core fields and hands it to the
 * backend. Nothing here belongs to one backend. */

#define kinet_container_of(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))

struct kinet_backend_ops; /* src/core/backend.h */

struct kinet_ctx {
	const struct kinet_backend_ops *ops;
	int backend; /* enum kinet_backend (ops->id) */
	uint32_t id; /* number of the context in the process (0, 1, ...): trace, stats */
	pthread_mutex_t qp_lock; /* the list of its QPs (qp_head), and its caches */
	kinet_qp *qp_head;
	struct kinet_mr_cache *cache_head;
	/* descriptors of peers whose connection with a QP of this context ended
	 * (reset, destroyed): a ring of KINET_STALE_MAX, under lock; a connect
	 * with one of them is refused (-ESTALE) */
	struct kinet_stale { uint64_t node, gen; uint32_t qpn; } *stale;
	uint32_t nstale;
	char reason[256]; /* why this backend (auto) */
	pthread_mutex_t lock;
	uint32_t next_pdn;
	atomic_int pds, cqs, qps; /* live objects: kinet_close refuses while any */
	/* counters: see struct kinet_counters. These are the shared ones, for
	 * threads without a block of their own (host calls, other contexts'
	 * engines); a backend may count in blocks of its own (ops->counters
	 * adds them up). */
	_Atomic uint64_t c_wqes, c_bytes, c_cqes, c_errors, c_flushed, c_doorbells, c_dbr_only,
		c_bf_wqes, c_staged, c_direct, c_rnr, c_proxy, c_db_wqe, c_db_pi, c_db_foreign,
		c_bf_mismatch;
	_Atomic uint64_t c_synd[64];
};

/* One thread's counters for one context: the same names as kinet_ctx's,
 * written by their owner thread only (plain increments, relaxed stores: no
 * locked instruction, no line shared with other writers), read by
 * kinet_ctx_counters() with relaxed loads. */
struct kinet_ctr_blk {
	kinet_ctx *ctx;
	uint64_t c_wqes, c_bytes, c_cqes, c_errors, c_flushed, c_doorbells, c_dbr_only, c_bf_wqes,
		c_staged, c_direct, c_rnr, c_proxy, c_db_wqe, c_db_pi, c_db_foreign, c_bf_mismatch;
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
/* Adds a counter block to the sums of kinet_ctx_counters. */
void kinet_ctr_blk_add(const struct kinet_ctr_blk *b, struct kinet_counters *o);

struct kinet_pd {
	kinet_ctx *ctx;
	uint32_t pdn;
	atomic_int refs; /* regions and QPs using it */
};

struct kinet_mr {
	kinet_pd *pd;
	void *addr;
	size_t len;
	unsigned access;
	uint32_t key;  /* local key */
	uint32_t rkey; /* remote key */
	int kind;      /* enum kinet_mem_kind */
	int path;      /* enum kinet_mr_path: how it was registered */
	_Atomic int state; /* enum kinet_mr_state; REVOKED is set by the backend's revoke */
	void *cache_ent;   /* the registration cache's entry (src/mem/cache.c), or NULL */
	bool internal;     /* the library's own (a QP's scratch word): no in-flight check */
};

/* A completion queue as its consumer sees it. The producer side (who writes
 * CQEs) belongs to the backend: the software NIC's engine, or the hardware. */
struct kinet_cq {
	kinet_ctx *ctx;
	uint8_t *buf;              /* cnt CQEs */
	uint32_t cnt;              /* power of two */
	uint32_t flags;            /* enum kinet_cq_flag */
	volatile uint32_t *dbrec;  /* [0] consumer index (big-endian, 24 bits) */
	uint64_t host_ci;          /* kinet_cq_poll consumer */
	atomic_int refs;           /* QPs using it */
	kinet_qp *sq_owner;        /* the QP whose dedicated send CQ this is, or NULL */
};

/* QP flags (kinet_qp.flags). */
enum {
	KINET_QPF_QUEUES_ON_GPU = 1u << 0, /* SQ and records in GPU memory: no host access */
	/* hardware doorbell: the NIC acts on a register write that follows the
	 * record (both needed, in that order); without it (the software NIC)
	 * either alone is enough */
	KINET_QPF_HW_DOORBELL = 1u << 1,
	KINET_QPF_USED = 1u << 2, /* work was posted before a RESET */
};

/* Per-QP counters (kinet_qp_counters), indices of struct kinet_qp_ctr. */
enum kinet_qpc {
	KQ_POSTED, KQ_COMPLETED, KQ_WIRE_POSTED, KQ_CQES, KQ_BYTES, KQ_DIRECT, KQ_STAGED,
	KQ_ERRORS, KQ_FLUSHED, KQ_RNR, KQ_RETRY_EXC, KQ_DOORBELLS, KQ_DB_WQE, KQ_DB_PI,
	KQ_DB_FOREIGN, KQ_DBR_ONLY, KQ_BF_WQES, KQ_BF_MISMATCH, KQ_DB_NOT_READY, KQ_RECV,
	KQ_RECV_BYTES, KQ_FAULTS, KQ_HOST_CQES,
	KQ_SYND0, /* KQ_SYND0 + (syndrome & 63): error and flush CQEs by syndrome */
	KQ_N = KQ_SYND0 + 64
};
/* own[] is written only by the thread that serves the QP (the engine whose
 * counter block is `owner`: plain increments, relaxed stores, a line no one
 * else writes), shr[] by every other thread (atomic adds: the wire writing
 * CQEs from another engine, a peer's responder, host calls). Readers add
 * both with relaxed loads. */
struct kinet_qp_ctr {
	const void *owner;
	uint64_t own[KQ_N];
	_Atomic uint64_t shr[KQ_N];
};

struct kinet_qp {
	kinet_ctx *ctx;
	kinet_pd *pd;
	uint32_t qpn;
	uint32_t flags;     /* KINET_QPF_* */
	_Atomic int state;
	struct kinet_qp_attr attr;
	kinet_cq *scq, *rcq;
	bool own_scq, own_rcq;
	/* queues, set up by the backend */
	uint8_t *sq; /* sq_cnt * 64 */
	uint32_t sq_cnt;
	uint8_t *rq; /* rq_cnt * rq_stride */
	uint32_t rq_cnt, rq_stride;
	volatile uint32_t *dbrec;  /* [KN_RCV_DBR], [KN_SND_DBR] */
	volatile uint8_t *db;      /* doorbell / BlueFlame register (64 bytes) */
	uint32_t bf_alt;           /* bytes from db to the UAR's second register; 0: one */
	volatile uint32_t *cpu_pi; /* KN_DB_CPU_PROXY: the producer's published index */
	int db_mode;
	/* device descriptor (host executor copy) and its state */
	kn_qp desc;
	kn_qp_state *dstate;
	uint64_t *slot_ready;
	uint64_t *scratch; /* 8 bytes, registered as scratch_mr */
	kinet_mr *scratch_mr;
	/* remote end */
	uint32_t peer_qpn;
	/* the CPU proxy (kinet_proxy_ring) */
	uint32_t proxy_seen;
	uint32_t proxy_bf_off; /* the register its next ring writes */
	/* kinet_qp_post_raw: producer, and the SQ consumer learned from CQEs */
	pthread_mutex_t raw_lock;
	uint64_t raw_pi, raw_ci;
	uint32_t raw_bf_off; /* the register the next raw post rings */
	uint8_t *raw_nbb; /* per slot: WQEBBs of the raw WQE that starts there */
	kinet_qp *ctx_next, **ctx_pprev; /* the context's list (qp_lock) */
	/* the peer's descriptor connected to (kinet_qp_connect_remote) */
	uint64_t peer_node, peer_gen;
	bool remote_connected;
	struct kinet_qp_ctr ctr __attribute__((aligned(64)));
};

#define KINET_STALE_MAX 1024u
/* The QP's connection to a peer in another process ends (RESET, destroy):
 * that peer descriptor is stale from now on (kinet_qp_connect_remote). */
void kinet_qp_forget_peer(kinet_qp *qp);

/* Adds n to per-QP counter idx (enum kinet_qpc): a plain update when the
 * calling thread serves the QP, an atomic add otherwise. */
#define KINET_QCOUNT(qp_, idx_, n_)                                                             \
	do {                                                                                    \
		kinet_qp *kq_qp = (qp_);                                                        \
		uint64_t kq_n = (n_);                                                           \
		if (kinet_ctr_self && kq_qp->ctr.owner == (const void *)kinet_ctr_self)         \
			__atomic_store_n(&kq_qp->ctr.own[idx_], kq_qp->ctr.own[idx_] + kq_n,    \
					 __ATOMIC_RELAXED);                                     \
		else                                                                            \
			atomic_fetch_add_explicit(&kq_qp->ctr.shr[idx_], kq_n,                  \
						  memory_order_relaxed);                        \
	} while (0)
/* The same from the QP's serving engine itself (known to be the owner): a
 * plain update. */
#define KINET_QCOUNT_OWN(qp_, idx_, n_)                                                         \
	__atomic_store_n(&(qp_)->ctr.own[idx_], (qp_)->ctr.own[idx_] + (n_), __ATOMIC_RELAXED)
/* The value of per-QP counter idx (both halves). */
uint64_t kinet_qp_ctr_get(const kinet_qp *qp, int idx);
/* Counts an error or flush CQE of syndrome s against qp (errors, flushes,
 * by syndrome, retry exceeded). */
void kinet_qp_count_syndrome(kinet_qp *qp, uint32_t s);

/* ---- helpers of the core for backends ------------------------------------------- */

uint32_t kinet_pow2(uint32_t v);
void kinet_count_syndrome(kinet_ctx *ctx, uint32_t synd);

/* CQ memory in host memory (mapped into the GPU when the CUDA module is
 * loaded), CQEs invalid (op_own 0xF1: opcode invalid, owner 1), consumer
 * index 0: used by backends whose CQs live in host memory. */
int kinet_cq_host_init(kinet_cq *cq, uint32_t depth);
void kinet_cq_host_fini(kinet_cq *cq);
/* All CQEs invalid again, indexes 0. */
void kinet_cq_host_clear(kinet_cq *cq);

/* Doorbell mode for a requested one (KN_DB_AUTO: the tunable, else the
 * plain doorbell). */
int kinet_db_mode_resolve(int requested);
/* IB state machine: is from -> to a legal modify? */
bool kinet_qp_legal(int from, int to);
/* Fills qp->desc (the device descriptor) from the QP's queues and
 * attributes: every backend's QPs get the same descriptor. */
void kinet_qp_fill_desc(kinet_qp *qp);
/* Device state of a QP back to its creation values (RESET). */
void kinet_qp_reset_device_state(kinet_qp *qp);
/* The raw post shared by kinet_qp_post_raw and kinet_eth_txq_post_raw, which
 * check their arguments first (wqe of nbb WQEBBs: 1 .. KN_MAX_WQE_BBS, at
 * most the SQ's depth; the SQ in host memory). Under qp->raw_lock: waits for
 * room by consumed(obj), the NIC's consumer index (called with the lock
 * held), copies the WQE into the SQ, writes the doorbell record and, on
 * hardware, the register. Returns the WQE's first ticket, or -ETIMEDOUT
 * when the SQ stayed full for timeout_ns (not logged: the caller names its
 * queue). */
long long kinet_sq_post_raw(kinet_qp *qp, const void *wqe, uint32_t nbb, uint64_t timeout_ns,
			    uint64_t (*consumed)(void *obj), void *obj);

/* The CPU proxy's ring of one QP (doorbell mode cpu): when the producer
 * published a new index in qp->cpu_pi, writes the doorbell record, then the
 * first 8 bytes of the last WQE to the register. Queues in GPU memory are
 * reached through io (NULL: host memory). Returns 1 when it rang. */
struct kinet_qmem_io {
	int (*read)(void *dst, const void *src, size_t n);  /* queue memory to host */
	int (*write)(void *dst, const void *src, size_t n); /* host to queue memory */
};
int kinet_proxy_ring(kinet_qp *qp, const struct kinet_qmem_io *io);

/* Idle policy of a polling service thread (the software NIC's engines, the
 * mlx5 CPU proxy): poll for spin_ns after the last work, then nap in
 * doubling steps from 1 us up to sleep_ns. */
struct kinet_idle {
	uint64_t spin_ns, sleep_ns;
	uint64_t last_work, nap;
	/* yielding while polling (KINET_ENGINE_YIELD) */
	uint8_t yield_mode;  /* 0 off, 1 on, 2 auto */
	bool contended;      /* auto: the thread was preempted in the last window */
	uint64_t last_yield, window_start;
	long nivcsw;         /* involuntary switches at window_start */
};
void kinet_idle_init(struct kinet_idle *s, uint64_t spin_ns, uint64_t sleep_ns);
/* After a pass: 0 to poll again at once (work done, or still spinning),
 * else the nap to take before the next pass. */
uint64_t kinet_idle_next(struct kinet_idle *s, bool worked);
/* An idle pass that polls again at once (kinet_idle_next gave 0): one pause,
 * and every few microseconds the CPU given away (sched_yield) where other
 * threads may want it: always (KINET_ENGINE_YIELD=on), never (off), or, by
 * default (auto), while the thread has been preempted (involuntary context
 * switches, looked at once a millisecond) in the last millisecond. */
void kinet_idle_poll(struct kinet_idle *s);
void kinet_sleep_ns(uint64_t ns);

/* Incarnation of this process (random, never 0): descriptors carry it. */
uint64_t kinet_node(void);
/* This host as a process here sees it (never 0): equal in two processes
 * that share the boot, the user and the network, PID and mount namespaces,
 * so that libfabric's shm provider can join them (its shared memory lives
 * in /dev/shm, its copies go by pid). */
uint64_t kinet_host(void);
/* Random bytes from the kernel (getrandom), or a clock-based fallback. */
void kinet_random(void *buf, size_t n);

#endif

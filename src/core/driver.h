/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * driver.h - the one header of the core a backend includes.
 *
 * A backend (src/nic/<name>/) is one table of operations, listed in
 * src/nic/backends.c; kinet_open picks one and the core reaches it only
 * through ctx->ops. The core validates every argument, keeps the state
 * machines, the device descriptors and the objects' lifetimes; a backend
 * builds and serves the queues. Objects: the core allocates each object
 * with the size the backend declares (*_size, at least the core struct),
 * zeroed, and fills the core fields before it calls the backend; a backend
 * embeds the core struct in its own and reaches its part with
 * kinet_container_of.
 *
 * Every operation is optional unless marked required: where a backend has
 * none, the core answers -EOPNOTSUPP with a log line naming the backend and
 * the operation (kinet_backend_unsupported). Backends return 0 or a
 * negative errno, and log what went wrong with the detail only they know.
 *
 * Here: logging, tunables and traces, the core objects and their counters,
 * the Ethernet objects, fault-injection rules, the core's helpers for
 * backends, and struct kinet_backend_ops. What the core keeps to itself is
 * in core/internal.h; GPU memory helpers are in gpu/gpu.h (below both).
 */
#ifndef KINET_CORE_DRIVER_H
#define KINET_CORE_DRIVER_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <kinet/kinet.h>
#include <kinet/eth.h>
#include <kinet/device_eth.h>
#include <kinet/device_port.h> /* kn_now_ns, KN_PAUSE */
#include "kinet_config.h"

/* ---- logging (src/core/log.c) --------------------------------------------- */
void kinet_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define KLOG_ERR(...) kinet_log(KINET_LOG_ERROR, __VA_ARGS__)
#define KLOG_WARN(...) kinet_log(KINET_LOG_WARN, __VA_ARGS__)
#define KLOG_INFO(...) kinet_log(KINET_LOG_INFO, __VA_ARGS__)
#define KLOG_DBG(...) kinet_log(KINET_LOG_DEBUG, __VA_ARGS__)
#define KLOG_TRACE(...) kinet_log(KINET_LOG_TRACE, __VA_ARGS__)
/* ---- run-time modules (src/core/module.c) ----------------------------------- */
/* dlopen of a module (KINET_CUDA_MODULE, KINET_MLX5EMU_MODULE) from the folder
 * libkinet itself was loaded from, whatever the search path says. NULL when it
 * cannot be loaded: dlerror() says why. */
void *kinet_module_open(const char *file, int flags);

/* ---- tunables (src/core/tunables.c): declared in src/core/tunables.def ------ */
#include "core/tunables.h"
#include "core/trace.h"

/* ---- objects -------------------------------------------------------------------- */

/* The core objects. A backend embeds each in an object of its own (first
 * member or not: container_of) whose size it declares in its ops table; the
 * core allocates that size, zeroed, fills the core fields and hands it to the
 * backend. Nothing here belongs to one backend. */

#define kinet_container_of(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))

struct kinet_backend_ops; /* below */

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
	void *cache_ent;   /* the registration cache's entry (src/core/cache.c), or NULL */
	bool internal;     /* the library's own (a QP's scratch word): no in-flight check */
	_Atomic uint64_t mon_seen; /* cached host memory: the monitor's sequence checked */
	_Atomic bool mon_gone;     /* cached host memory: part of it was unmapped */
};

/* A NIC's check before it touches a region from the registration cache: true
 * when its memory went away (the cache invalidated it, or the host memory
 * monitor saw part of it unmapped since) although the key is still in the
 * table: the access fails as on a revoked region, never faults (cache.c). */
bool kinet_cache_mr_gone(kinet_mr *mr);

/* A completion queue as its consumer sees it. The producer side (who writes
 * CQEs) belongs to the backend: the software NIC's engine, or the hardware. */
struct kinet_cq {
	kinet_ctx *ctx;
	uint8_t *buf;              /* cnt CQEs */
	uint32_t cnt;              /* power of two */
	uint32_t flags;            /* enum kinet_cq_flag, and KINET_CQF_COLLAPSED */
	volatile uint32_t *dbrec;  /* [0] consumer index (big-endian, 24 bits) */
	uint64_t host_ci;          /* kinet_cq_poll consumer */
	atomic_int refs;           /* QPs using it */
	kinet_qp *sq_owner;        /* the QP whose dedicated send CQ this is, or NULL */
	uint32_t num;              /* the number producers name it by (a WAIT WQE's CQ:
				    * the verbs or DevX CQ number; 0: none). Set once,
				    * before any WQE names it (__atomic) */
};

/* A collapsed CQ (the PRM's cqc.cc, which the DevX emulation creates for
 * programs such as NVSHMEM's IBGDA): the software NIC writes every CQE into
 * slot 0, its owner bit that of a CQ of one entry (the CQE's number & 1),
 * and never waits for the consumer (with KINET_CQ_OVERRUN_IGNORE). Not a
 * flag of kinet_cq_create_ex: set on the CQ before any QP uses it. */
#define KINET_CQF_COLLAPSED (1u << 31)

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

enum kinet_dc_role { KINET_DC_NONE = 0, KINET_DC_DCI = 1, KINET_DC_DCT = 2 };

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
	/* dynamically connected transport (the software NIC's; kinet-verbs):
	 * a DCI names its target per WQE, a DCT answers any DCI presenting
	 * dc_key; neither has a peer (nic/soft/dc.h) */
	uint8_t dc;                /* enum kinet_dc_role */
	_Atomic bool dc_gone;      /* a DCT being destroyed: found by no DCI */
	uint64_t dc_key;
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

/* The remote accesses (KINET_ACCESS_REMOTE_*) a QP serves as a target: its
 * kinet_qp_attr.remote_access, every one when that is not given. */
static inline unsigned kinet_qp_remote_allowed(const kinet_qp *qp)
{
	uint32_t a = __atomic_load_n(&qp->attr.remote_access, __ATOMIC_RELAXED);
	unsigned all = KINET_ACCESS_REMOTE_WRITE | KINET_ACCESS_REMOTE_READ |
		       KINET_ACCESS_REMOTE_ATOMIC;
	return (a & KINET_QP_ACCESS_SET) ? a & all : all;
}

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
/* Names thread th (as ps -L, top -H and /proc/<pid>/task/<tid>/comm show
 * it) from a printf format, cut to the kernel's 15 characters. Every thread
 * kinet starts is named by its role, "kn-...", by its creator right after
 * pthread_create. */
void kinet_thread_name(pthread_t th, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Incarnation of this process (random, never 0): descriptors carry it. */
uint64_t kinet_node(void);
/* This host as a process here sees it (never 0): equal in two processes
 * that share the boot, the user and the network, PID and mount namespaces,
 * so that libfabric's shm provider can join them (its shared memory lives
 * in /dev/shm, its copies go by pid). */
uint64_t kinet_host(void);
/* Random bytes from the kernel (getrandom), or a clock-based fallback. */
void kinet_random(void *buf, size_t n);

/* ---- Ethernet objects (kinet/eth.h; src/core/eth.c) -------------------------- */

/* The core objects of Ethernet queues, embedded by the backends in objects
 * of their own as for QPs. The core checks every argument, owns the
 * lifetimes, the device descriptors and state, the receive buffers and the
 * receive WQEs that point at them, and a port's list of flows (in the order
 * they are tried); the backend builds the queues and serves them. */
struct kinet_eth_port {
	kinet_ctx *ctx;
	kinet_pd *pd;
	struct kinet_eth_port_attr attr; /* attr.ifname points at ifname below */
	char ifname[32];
	struct kinet_eth_port_info info; /* filled by the backend's open */
	uint32_t max_frame;              /* Ethernet header + MTU (+ a VLAN tag) */
	atomic_int queues;               /* send and receive queues of the port */
	pthread_mutex_t lock;            /* the flows below */
	kinet_eth_flow *flows;           /* in the order they are tried */
	uint32_t nflows;
	uint64_t flow_seq;
};

struct kinet_eth_txq {
	kinet_eth_port *port;
	struct kinet_eth_txq_attr attr;
	/* The SQ as the core sees a QP (never in the context's QP list, never
	 * given to kinet_qp_* calls that change it): sq, sq_cnt, dbrec, db,
	 * cpu_pi, scq, db_mode, flags, qpn set by the backend; dstate,
	 * slot_ready, desc, raw_* by the core. */
	kinet_qp q;
	kn_eth_txq desc;
};

struct kinet_eth_rxq {
	kinet_eth_port *port;
	struct kinet_eth_rxq_attr attr;
	/* the queues, set by the backend's create */
	uint32_t rqn;
	uint8_t *wq;               /* wqe_cnt x wqe_size bytes */
	uint32_t wqe_cnt, wqe_size;
	volatile uint32_t *dbrec;  /* [0]: the receive producer */
	kinet_cq *cq;              /* as deep as the queue (at least) */
	/* geometry, set by the core before the backend's create */
	uint32_t wqe_bytes, stride_bytes, strides;
	/* buffers and device side, set by the core */
	uint8_t *buf;
	size_t buf_len;
	kinet_mr *mr;
	bool own_buf, own_mr;
	kn_eth_rxq desc;
	kn_eth_rxq_state *st;
	uint64_t *fin;
	atomic_int flows;
};

struct kinet_eth_flow {
	kinet_eth_rxq *rxq;
	struct kinet_eth_match m;
	uint64_t seq;
	kinet_eth_flow *next; /* the port's list */
};

/* The SQ of a send queue as a QP, for the CUDA module's placement
 * (kinet_qp_device_cuda; private node of the version script). */
kinet_qp *kinet_eth_txq_qp(kinet_eth_txq *txq);

/* Largest number of flows a port takes (the software NIC's steering table). */
#define KINET_ETH_MAX_FLOWS 64

/* ---- fault injection (src/core/fault.c) ------------------------------------- */

/* Rules of kinet_fault_add / KINET_FAULT: parsed by the core, applied by the
 * backend (the software NIC's engine at each WQE, its wire's receive path). */
enum kinet_fault_action {
	KF_ERROR = 1,   /* complete the WQE with an error CQE */
	KF_DELAY = 2,   /* hold the WQE for us microseconds */
	KF_DROP = 3,    /* drop a received wire request */
	KF_CORRUPT = 4, /* flip one payload byte of a received wire request */
	KF_SILENT = 5,  /* the peer stops answering: the WQE times out */
	KF_CQFULL = 6,  /* the send CQ looks full for us microseconds */
	KF_DUP = 7,     /* a received wire request arrives twice */
};
/* Where a rule is looked at. */
enum { KF_AT_WQE = 1, KF_AT_RX = 2 };

struct kinet_fault_rule {
	int action;        /* enum kinet_fault_action */
	uint32_t qpn;      /* 0: every QP */
	int op;            /* KN_OPCODE_*, -1: any */
	uint64_t every;    /* every Nth match (1: each) */
	double prob;       /* > 0: with this probability instead */
	uint64_t after;    /* skip the first matches */
	uint64_t count;    /* most injections (0: no limit) */
	uint32_t synd;     /* error: the syndrome */
	uint64_t us;       /* delay, cqfull */
	uint32_t byte;     /* corrupt: payload offset */
	_Atomic uint64_t matches, fired;
};

struct kinet_fault_set {
	int n;
	struct kinet_fault_rule r[];
};

/* Parses spec (NULL or "": no rules, *out NULL). 0, or -EINVAL with what
 * is wrong logged (naming `who`). */
int kinet_fault_parse(const char *spec, const char *who, struct kinet_fault_set **out);
/* Appends b's rules to a (either may be NULL); frees neither. NULL on
 * -ENOMEM. */
struct kinet_fault_set *kinet_fault_join(const struct kinet_fault_set *a,
					 const struct kinet_fault_set *b);
/* The rule that fires now for a WQE or message of QP qpn, opcode op, looked
 * at in place `at` (KF_AT_*), or NULL. Thread-safe. */
const struct kinet_fault_rule *kinet_fault_match(struct kinet_fault_set *s, int at, uint32_t qpn,
						 int op);
const char *kinet_fault_action_str(int action);

/* ---- the backend interface -------------------------------------------------- */

/* Capabilities (kinet_backend_ops.caps). */
enum {
	KINET_CAP_SHARED_CQ = 1u << 0, /* send/receive CQs created apart and shared by QPs */
	KINET_CAP_RESET_REUSE = 1u << 1, /* a QP may be used again after RESET */
	KINET_CAP_HOST_STAGING = 1u << 2, /* can stage GPU memory through host memory */
};

/* The local end of a QP, for its descriptor (kinet_qp_export). */
struct kinet_qp_local {
	uint64_t gen;          /* generation: changes on every RESET */
	uint64_t node;         /* incarnation of this process */
	char transport[32];    /* "tcp;ofi_rxm" (the wire's provider), "mlx5", ... */
	uint8_t addr[128];     /* what a peer needs to reach the QP */
	size_t addr_len;
	/* a second way in for peers of this host (software NIC: its shm wire);
	 * alt_len 0: none */
	uint64_t host;         /* kinet_host(): which host (and namespaces) this is */
	char alt_transport[16];
	uint8_t alt_addr[128];
	size_t alt_len;
};

struct kinet_qp_info; /* kinet/net.h */

/* The same-host part of a QP descriptor (kinet_qp_desc_parse_alt). */
struct kinet_qp_alt {
	uint64_t host;         /* the writer's kinet_host() */
	char transport[16];    /* "shm" */
	uint8_t addr[128];
	uint32_t len;          /* 0: the descriptor has none */
};
/* Bytes of a QP descriptor with an address of addr_len bytes and a
 * same-host part of alt_len (0: none); the part is only written when the
 * whole fits KINET_QP_DESC_MAX. */
size_t kinet_qp_desc_len(size_t addr_len, size_t alt_len);
/* kinet_qp_desc_parse, and the same-host part (alt->len 0 when absent). */
int kinet_qp_desc_parse_alt(const void *buf, size_t len, struct kinet_qp_info *out,
			    struct kinet_qp_alt *alt);

struct kinet_backend_ops {
	const char *name; /* required: "soft", "mlx5" */
	int id;           /* required: enum kinet_backend */
	int priority;     /* auto picks the usable backend of highest priority */
	unsigned caps;    /* KINET_CAP_* */
	size_t ctx_size, pd_size, mr_size, cq_size, qp_size; /* required: sizes of the objects */

	/* Is the backend usable (device present, libraries loadable)? 0, or a
	 * negative errno with the reason in why; on success why describes what
	 * would be used. Required. */
	int (*probe)(const struct kinet_ctx_attr *attr, char *why, size_t wl);
	/* Opens the backend's part of a context / closes it (no object left). Required. */
	int (*open)(kinet_ctx *ctx, const struct kinet_ctx_attr *attr);
	void (*close)(kinet_ctx *ctx);

	int (*pd_alloc)(kinet_pd *pd);
	void (*pd_free)(kinet_pd *pd);

	/* Registers mr->addr, len, access (validated): sets key, rkey, kind, path. */
	int (*mr_reg)(kinet_mr *mr);
	/* Deregisters; may wait (bounded) or refuse with -EBUSY as its contract says. */
	int (*mr_dereg)(kinet_mr *mr);

	/* A CQ of cq->cnt CQEs (power of two, set by the core). */
	int (*cq_create)(kinet_cq *cq);
	void (*cq_destroy)(kinet_cq *cq);

	/* Builds the queues of a QP (qp->attr holds the validated attributes, the
	 * doorbell mode resolved in qp->db_mode): sets qpn, sq/sq_cnt, rq/rq_cnt/
	 * rq_stride, dbrec, db, cpu_pi, scq/rcq (own_* when it created them),
	 * flags, and may change db_mode (saying why). Required. */
	int (*qp_create)(kinet_qp *qp);
	/* The descriptor is complete: start serving the QP. */
	int (*qp_attach)(kinet_qp *qp);
	/* Stop serving it (nothing of the backend touches it afterwards). */
	void (*qp_detach)(kinet_qp *qp);
	/* Frees what qp_create built. Required. */
	void (*qp_destroy)(kinet_qp *qp);
	/* Moves the QP from `from` to `to` (a legal step, checked by the core;
	 * RTR with the remote end: a local QP or a descriptor). The core sets
	 * qp->state once this returns 0 (unless the backend did). Required. */
	int (*qp_modify)(kinet_qp *qp, int from, int to, const struct kinet_qp_remote *remote);
	/* The local end for a descriptor (kinet_qp_export). */
	int (*qp_local_end)(kinet_qp *qp, struct kinet_qp_local *out);
	/* SQ consumer index as the NIC sees it (WQEBBs it has read), for
	 * kinet_qp_post_raw; NULL: learned from the send CQEs consumed with
	 * kinet_cq_poll, as hardware reports it. */
	uint64_t (*sq_consumed)(kinet_qp *qp);

	/* Brings counts kept elsewhere into the counters before a read
	 * (kinet_ctx_counters, kinet_qp_counters): the software NIC's GPU
	 * engine counts in its kernel until it gives a QP back. NULL: none. */
	void (*counters_sync)(kinet_ctx *ctx);
	/* Adds the backend's own counters to o (kinet_ctx_counters). */
	void (*counters)(kinet_ctx *ctx, struct kinet_counters *o);
	/* Completes a QP's counters (o holds what the core counted: struct
	 * kinet_qp_ctr): what only the backend knows (outstanding work on the
	 * wire, the device state on hardware). */
	void (*qp_counters)(kinet_qp *qp, struct kinet_qp_counters *o);

	/* Revokes a region (kinet_mr_revoke): once this returns no new access
	 * through its keys succeeds and no access that started before is still
	 * moving bytes; the backend then sets mr->state to KINET_MR_REVOKED. */
	int (*mr_revoke)(kinet_mr *mr);
	/* What the transport knows of the QP's peer, for kinet_qp_ep_info: the
	 * core fills state, qp_state and outstanding first; the backend sets
	 * remote, peer_dead and silent_ms (and may change state). */
	void (*qp_ep_info)(kinet_qp *qp, struct kinet_ep_info *o);
	/* Fault injection (kinet_fault_add / KINET_FAULT): the parsed rules
	 * (src/core/fault.h); NULL: the backend has none. */
	int (*fault_set)(kinet_ctx *ctx, struct kinet_fault_set *rules);
	/* Who moves memory of kind mem_kind (enum kinet_mem_kind) for the
	 * context's QPs, and how (kinet_mem_alloc's report): *engine and *path
	 * are static strings. gpu_mapped: host memory mapped into the GPU. NULL:
	 * the NIC is hardware that moves every kind itself (the core's words). */
	void (*mem_route)(kinet_ctx *ctx, int mem_kind, bool gpu_mapped, const char **engine,
			  const char **path);

	/* ---- Ethernet queues (kinet/eth.h, below) ----
	 * Object sizes (0: the core struct), then the operations; a backend
	 * without eth_port_open has no Ethernet ports. */
	size_t eth_port_size, eth_txq_size, eth_rxq_size, eth_flow_size;
	/* Opens port->attr (validated; ifname in port->ifname): fills port->info
	 * and port->max_frame, logs why when it cannot. */
	int (*eth_port_open)(kinet_eth_port *port);
	void (*eth_port_close)(kinet_eth_port *port);
	/* The port's real-time clock, nanoseconds. */
	int (*eth_port_time)(kinet_eth_port *port, uint64_t *ns);
	/* Builds a send queue of txq->q.attr.sq_depth WQEBBs (a power of two)
	 * with a dedicated send CQ as deep: sets q.qpn, sq, sq_cnt, dbrec, db,
	 * cpu_pi, scq, flags and may lower q.db_mode; desc.inline_hdr at least
	 * what the NIC needs. Not served before eth_txq_start. */
	int (*eth_txq_create)(kinet_eth_txq *txq);
	int (*eth_txq_start)(kinet_eth_txq *txq);
	void (*eth_txq_destroy)(kinet_eth_txq *txq);
	/* Error -> ready, empty (the core resets the device state). */
	int (*eth_txq_reset)(kinet_eth_txq *txq);
	/* WQEBBs the NIC has read (kinet_eth_txq_post_raw); NULL: learned from
	 * the send CQEs consumed with kinet_cq_poll. */
	uint64_t (*eth_txq_consumed)(kinet_eth_txq *txq);
	/* Builds a receive queue of rxq->wqe_cnt WQEs of the geometry set by the
	 * core: sets rqn, wq, wqe_size, dbrec, cq. eth_rxq_start: the core has
	 * written and posted the WQEs (raw queues: none), serve it. */
	int (*eth_rxq_create)(kinet_eth_rxq *rxq);
	int (*eth_rxq_start)(kinet_eth_rxq *rxq);
	void (*eth_rxq_destroy)(kinet_eth_rxq *rxq);
	/* The port's flow list changed (flow added, or about to go: removed from
	 * the list already); under port->lock. */
	int (*eth_flow_create)(kinet_eth_flow *flow);
	void (*eth_flow_destroy)(kinet_eth_flow *flow);
	/* Counters of one queue (txq or rxq) or of the port (both NULL). */
	int (*eth_counters)(kinet_eth_port *port, kinet_eth_txq *txq, kinet_eth_rxq *rxq,
			    struct kinet_eth_counters *out);
};

/* Every backend of this build, highest priority first, NULL-terminated
 * (src/nic/backends.c). */
extern const struct kinet_backend_ops *const kinet_backends[];

/* Logs that backend b lacks operation `op` and returns -EOPNOTSUPP. */
int kinet_backend_unsupported(const kinet_ctx *ctx, const char *op);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/kinet.h - the host control path: context, protection domains, memory
 * registration, completion and queue pairs, connection, export of the device
 * descriptor, errors, logging and tunables.
 *
 * Every call returns 0 (or a non-negative value where stated) on success and
 * a negative errno on failure; kinet_strerror() explains the code.
 */
#ifndef KINET_KINET_H
#define KINET_KINET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <kinet/device.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KINET_VERSION_MAJOR 0
#define KINET_VERSION_MINOR 1

typedef struct kinet_ctx kinet_ctx;
typedef struct kinet_pd kinet_pd;
typedef struct kinet_mr kinet_mr;
typedef struct kinet_cq kinet_cq;
typedef struct kinet_qp kinet_qp;

/* ---- errors and logging ---------------------------------------------------- */

/* Explains a return code of any kinet call (negative errno). Never NULL. */
const char *kinet_strerror(int err);

/* Name of an mlx5 CQE syndrome (KN_SYND_*), e.g. "remote access error". */
const char *kinet_syndrome_str(uint32_t syndrome);

/* Log levels; KINET_LOG=error|warn|info|debug|trace sets the initial one. */
enum kinet_log_level {
	KINET_LOG_ERROR = 0,
	KINET_LOG_WARN = 1,
	KINET_LOG_INFO = 2,
	KINET_LOG_DEBUG = 3,
	KINET_LOG_TRACE = 4,
};
void kinet_log_set_level(int level);
int kinet_log_get_level(void);

/* ---- tunables ------------------------------------------------------------------ */

/* A tunable: name (also the environment variable that sets it), its default,
 * its current value and what it does. */
struct kinet_tunable {
	const char *name;
	const char *def;
	const char *value; /* current value: from the environment or the default */
	const char *desc;
};
/* Number of registered tunables; kinet_tunable_at(i) returns one, or NULL. */
int kinet_tunable_count(void);
const struct kinet_tunable *kinet_tunable_at(int i);
/* Current value of a tunable as an integer / string (NULL if unknown). */
long long kinet_tunable_int(const char *name);
const char *kinet_tunable_str(const char *name);
/* Prints every tunable (name, value, default, description). */
void kinet_tunables_print(FILE *f);

/* ---- context ---------------------------------------------------------------- */

enum kinet_backend {
	KINET_BACKEND_AUTO = 0, /* mlx5 when a usable NIC is there, else soft */
	KINET_BACKEND_SOFT = 1,
	KINET_BACKEND_MLX5 = 2,
};

struct kinet_ctx_attr {
	int backend;         /* enum kinet_backend */
	int engine_threads;  /* soft: engine threads (0: KINET_ENGINE_THREADS) */
	const char *device;  /* mlx5: verbs device name, NULL: first usable */
};

/* Opens a context. attr may be NULL (backend from KINET_BACKEND, default
 * auto). With auto, the reason a backend was not chosen is logged at info
 * level and available from kinet_ctx_backend_reason(). */
int kinet_open(const struct kinet_ctx_attr *attr, kinet_ctx **out);
/* Closes a context: -EBUSY (and nothing is freed) while QPs, CQs or
 * protection domains (hence regions) of it still exist. */
int kinet_close(kinet_ctx *ctx);
int kinet_ctx_backend(const kinet_ctx *ctx);
const char *kinet_backend_name(int backend);
const char *kinet_ctx_backend_reason(const kinet_ctx *ctx);

/* ---- protection domain and memory ----------------------------------------- */

int kinet_pd_alloc(kinet_ctx *ctx, kinet_pd **out);
/* Fails with -EBUSY while regions or QPs still use the PD. */
int kinet_pd_free(kinet_pd *pd);

/* Access flags (values equal to ibv_access_flags). */
enum kinet_access {
	KINET_ACCESS_LOCAL_WRITE = 1,
	KINET_ACCESS_REMOTE_WRITE = 2,
	KINET_ACCESS_REMOTE_READ = 4,
	KINET_ACCESS_REMOTE_ATOMIC = 8,
};
#define KINET_ACCESS_ALL 15u

/* Where registered memory lives. */
enum kinet_mem_kind {
	KINET_MEM_HOST = 0,
	KINET_MEM_CUDA = 1,
};

/* Registers [addr, addr+len) with the given access. The NIC refuses every
 * access outside it or not allowed by `access`. len must be > 0. */
int kinet_mr_reg(kinet_pd *pd, void *addr, size_t len, unsigned access, kinet_mr **out);
/* Deregisters a region and frees mr: 0, -EINVAL (mr NULL), or -EBUSY (below).
 * Once it has returned 0 the NIC never reads or writes the region again,
 * whatever was in flight:
 * - WQEs between QPs of this process run within an engine pass, never half
 *   done; GPU copies in flight land before it returns;
 * - software NIC, WQEs on the wire (kinet/net.h) whose local buffer lies in
 *   the region (the source of a WRITE or SEND, the destination of a READ or
 *   of an atomic's result): the oldest one of each QP completes with the
 *   local protection error and the QP's later WQEs are flushed (RC); an
 *   answer that arrives afterwards is dropped. A success CQE of a WRITE or
 *   SEND means that every byte sent was read from the region while it was
 *   registered. It waits for the provider to let go of the region (sends
 *   straight from it, a rendezvous source the target may still be reading),
 *   at most about KINET_NET_TIMEOUT_MS, then closes the connection of the
 *   peer that keeps it (that peer's QPs fail);
 * - as the target of another process's writes: placements into the region
 *   land first; those of a peer that has gone silent are given up after
 *   KINET_NET_TIMEOUT_MS (they never write into the region).
 * -EBUSY: the provider still uses the region for a silent peer whose
 * connection cannot be closed (software NIC with libfabric before 1.18, a
 * peer this context also reads from): no WQE can use the region any more,
 * but it must not be freed yet; call kinet_mr_dereg again later. */
int kinet_mr_dereg(kinet_mr *mr);
uint32_t kinet_mr_lkey(const kinet_mr *mr);
uint32_t kinet_mr_rkey(const kinet_mr *mr);
void *kinet_mr_addr(const kinet_mr *mr);
size_t kinet_mr_len(const kinet_mr *mr);
int kinet_mr_kind(const kinet_mr *mr); /* enum kinet_mem_kind */

/* How the NIC reaches a region's memory. GPU memory is registered through a
 * dma-buf, else through the peer-memory kernel module; without either it is
 * refused unless KINET_ALLOW_HOST_STAGING=1 (and only the soft backend can
 * stage). The path used is never silent: kinet_mr_path() reports it. */
enum kinet_mr_path {
	KINET_MR_PATH_HOST = 0,    /* host memory, registered directly */
	KINET_MR_PATH_DMABUF = 1,  /* GPU memory exported as a dma-buf */
	KINET_MR_PATH_PEERMEM = 2, /* GPU memory through the peer-memory module */
	KINET_MR_PATH_STAGED = 3,  /* GPU memory copied through the host by a CPU */
};
/* enum kinet_mr_path of a region, or -EINVAL. */
int kinet_mr_path(const kinet_mr *mr);
/* "host", "dmabuf", "peermem", "staged" (never NULL). */
const char *kinet_mr_path_str(int path);

/* ---- completion queues and queue pairs ------------------------------------ */

/* A CQ of `depth` (rounded up to a power of two) 64-byte CQEs. */
int kinet_cq_create(kinet_ctx *ctx, uint32_t depth, kinet_cq **out);
int kinet_cq_destroy(kinet_cq *cq);
uint32_t kinet_cq_depth(const kinet_cq *cq);

/* kinet_qp_attr.rnr_retry: no retry at all (IB's rnr_retry = 0). */
#define KINET_RNR_RETRY_NONE 0x100u

enum kinet_qp_state {
	KINET_QPS_RESET = 0,
	KINET_QPS_INIT = 1,
	KINET_QPS_RTR = 2,
	KINET_QPS_RTS = 3,
	KINET_QPS_ERR = 6,
};
const char *kinet_qp_state_str(int state);

struct kinet_qp_attr {
	uint32_t sq_depth;   /* WQEs, rounded up to a power of two (default 256) */
	uint32_t rq_depth;   /* receive WQEs, power of two, 0 = no receive queue */
	uint32_t max_inline; /* bytes (default and most: KN_MAX_INLINE_WRITE) */
	kinet_cq *send_cq;   /* NULL: kinet_qp_create creates a dedicated one */
	kinet_cq *recv_cq;   /* NULL: created when rq_depth > 0 */
	int db_mode;         /* enum kn_db_mode; KN_DB_AUTO picks the best */
	int share;           /* enum kn_share */
	uint32_t rnr_retry;  /* receiver-not-ready retries 1..6, 7 = forever; 0 selects
				the default (7); KINET_RNR_RETRY_NONE: fail at the first RNR */
	uint32_t timeout_ms; /* device-side bound on blocking calls (0: tunable) */
};

/* Creates an RC QP in RESET, with its CQs when attr->send_cq / recv_cq are
 * NULL (the one-call form). The device API needs a dedicated send CQ as deep
 * as the SQ; kinet_qp_device() refuses a QP without one. */
int kinet_qp_create(kinet_pd *pd, const struct kinet_qp_attr *attr, kinet_qp **out);
int kinet_qp_destroy(kinet_qp *qp);
uint32_t kinet_qp_num(const kinet_qp *qp);
int kinet_qp_get_state(const kinet_qp *qp);

/* Where the remote end of a QP is. For a QP of the same process, `local`
 * points to it; remote processes use endpoint descriptors (kinet/net.h). */
struct kinet_qp_remote {
	kinet_qp *local;
	uint32_t qpn;
	const void *wire_addr; /* wire endpoint, NULL for the same process */
	size_t wire_addr_len;
};

/* Moves the QP to `state` following IB rules (RESET->INIT->RTR->RTS, any
 * state->ERR or RESET); RTR needs `remote`. -EINVAL on an illegal step. */
int kinet_qp_modify(kinet_qp *qp, int state, const struct kinet_qp_remote *remote);
/* Connects two QPs of this process to each other and moves both to RTS. */
int kinet_qp_connect_local(kinet_qp *a, kinet_qp *b);

/* The device descriptor of a QP, for the host executor (a host pointer,
 * valid until the QP is destroyed). -EINVAL if the QP cannot be driven by the
 * device API (no dedicated send CQ as deep as the SQ). */
int kinet_qp_device(kinet_qp *qp, kn_qp **out);

/* Resolved doorbell mode of a QP (enum kn_db_mode) and its name. */
int kinet_qp_db_mode(const kinet_qp *qp);
const char *kinet_db_mode_str(int mode);

/* ---- host-side posting (the control path and tests) -------------------------- */

/* Copies one raw mlx5 WQE of `nbb` basic blocks into the SQ at the producer
 * index and rings the doorbell: lets any producer of mlx5 WQEs (and tests)
 * drive the NIC. Returns the ticket of the WQE, or a negative errno. */
long long kinet_qp_post_raw(kinet_qp *qp, const void *wqe, uint32_t nbb);

/* Reads the CQE at index `idx` of a CQ into *out when it is there: 0, or
 * -EBUSY. Does not consume it. */
int kinet_cq_peek(kinet_cq *cq, uint64_t idx, struct kn_cqe64 *out);

/* Host-side consumer of a CQ not driven by the device API: copies the next
 * CQE into *out and consumes it (updates the CQ doorbell record). 0, or
 * -EBUSY when there is none yet. */
int kinet_cq_poll(kinet_cq *cq, struct kn_cqe64 *out);
/* As kinet_cq_poll, waiting at most timeout_ms: 0 or -ETIMEDOUT. */
int kinet_cq_poll_wait(kinet_cq *cq, struct kn_cqe64 *out, int timeout_ms);

/* ---- counters ------------------------------------------------------------------ */

struct kinet_counters {
	uint64_t wqes;          /* WQEs executed */
	uint64_t bytes;         /* payload bytes moved */
	uint64_t cqes;          /* CQEs written */
	uint64_t errors;        /* error CQEs (not counting flushes) */
	uint64_t flushed;       /* flush CQEs */
	uint64_t by_syndrome[64];
	uint64_t doorbells;     /* doorbells (register writes) seen */
	uint64_t dbr_only;      /* batches found through the doorbell record alone */
	uint64_t bf_wqes;       /* WQEs taken from the BlueFlame register */
	uint64_t staged_bytes;  /* bytes moved through host staging */
	uint64_t direct_bytes;  /* bytes moved without staging */
	uint64_t rnr_retries;
	uint64_t proxy_rings;   /* doorbells rung by the CPU proxy */
};
int kinet_ctx_counters(kinet_ctx *ctx, struct kinet_counters *out);

/* ---- host executor -------------------------------------------------------------- */

/* Runs fn(tid, nthreads, arg) on nthreads CPU threads and waits for all:
 * this is how device-API code runs without a GPU. Returns 0, or the first
 * non-zero value an fn returned. */
typedef int (*kinet_host_fn)(int tid, int nthreads, void *arg);
int kinet_host_exec(int nthreads, kinet_host_fn fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* KINET_KINET_H */

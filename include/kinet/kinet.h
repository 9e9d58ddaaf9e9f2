/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/kinet.h - the host control path: context, protection domains, memory
 * registration, completion and queue pairs, connection, export of the device
 * descriptor, errors, logging and tunables.
 *
 * Every call returns 0 (or a non-negative value where stated) on success and
 * a negative errno (or -KINET_E*, kinet/errors.h) on failure;
 * kinet_strerror() explains the code.
 *
 * Of the device API this header sees only its types (kinet/device_types.h);
 * code that posts from the host executor or a kernel includes
 * kinet/device.h.
 */
#ifndef KINET_KINET_H
#define KINET_KINET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <kinet/errors.h>
#include <kinet/prm.h>          /* struct kn_cqe64, KN_SYND_* */
#include <kinet/device_types.h> /* kn_qp, kn_qp_state, enum kn_db_mode, enum kn_share */

#ifdef __cplusplus
extern "C" {
#endif

/* The version of these headers. The build takes the library's version from
 * these three lines (soname libkinet.so.MAJOR, file libkinet.so.MAJOR.MINOR.PATCH);
 * kinet_version() tells the version of the library a program runs with. */
#define KINET_VERSION_MAJOR 0
#define KINET_VERSION_MINOR 2
#define KINET_VERSION_PATCH 0

typedef struct kinet_ctx kinet_ctx;
typedef struct kinet_pd kinet_pd;
typedef struct kinet_mr kinet_mr;
typedef struct kinet_cq kinet_cq;
typedef struct kinet_qp kinet_qp;
typedef struct kinet_mem kinet_mem;

/* ---- version ------------------------------------------------------------------ */

/* The version of the library in use (which may differ from the headers a
 * program was compiled with, within one major version): "MAJOR.MINOR.PATCH".
 * Each of major, minor and patch that is not NULL receives that number.
 * Never fails; the string is static. */
const char *kinet_version(int *major, int *minor, int *patch);

/* ---- errors and logging ---------------------------------------------------- */

/* Explains a return code of any kinet call (negative errno). Never NULL. */
const char *kinet_strerror(int err);

/* Name of an mlx5 CQE syndrome (KN_SYND_*), e.g. "remote access error". */
const char *kinet_syndrome_str(uint32_t syndrome);

/* Log levels; KINET_LOG=error|warn|info|debug|trace (or 0 .. 4) sets the
 * initial one (default warn). */
enum kinet_log_level {
	KINET_LOG_ERROR = 0,
	KINET_LOG_WARN = 1,
	KINET_LOG_INFO = 2,
	KINET_LOG_DEBUG = 3,
	KINET_LOG_TRACE = 4,
};
/* Sets / returns the current level; messages less severe than it are not
 * produced. A level outside error .. trace is clamped. */
void kinet_log_set_level(int level);
int kinet_log_get_level(void);

/*
 * Where log messages go. Without a callback, each message is one line on
 * stderr, prefixed with the host (up to its first dot), the process id and,
 * once a bootstrap in this process knows it, the rank:
 *
 *   node1:4242:3 kinet[warn]: ...          (rank 3)
 *   node1:4242 kinet[warn]: ...            (rank not known)
 *
 * kinet_log_set_callback(fn, user) sends every message instead to fn(level,
 * msg, user): level is an enum kinet_log_level, msg the message without the
 * prefix and without a newline (NUL-terminated, valid only during the call),
 * user the pointer given here. Only messages at or above the current level's
 * severity are passed. While a callback is installed kinet writes nothing to
 * stderr; fn = NULL restores the stderr lines.
 *
 * Thread safety: fn is called from whichever kinet thread logs (application
 * threads, engine and wire threads), possibly from several at once, so it must
 * be thread-safe. It must not call back into kinet (in particular not
 * kinet_log_set_callback, which would wait for it forever). Once
 * kinet_log_set_callback returns, no call of the previous callback is running
 * and none is made later: the user pointer may be freed.
 */
typedef void (*kinet_log_fn)(int level, const char *msg, void *user);
void kinet_log_set_callback(kinet_log_fn fn, void *user);

/* ---- tunables ------------------------------------------------------------------ */

/*
 * Tunables are environment variables, KINET_*; docs/tunables.md lists every
 * one with its type, default, allowed values and what a malformed value does.
 * The environment is read once, at the first use of any tunable (a later
 * setenv() changes nothing). An empty variable counts as not set.
 *
 * Values by type:
 *   int       decimal, optional '-': no leading zeros (010 is not read as
 *             octal nor as ten: it is refused), no 0x, nothing after the digits
 *   bool      1, 0, true, false, yes, no, on, off (any case)
 *   size      bytes: decimal with an optional suffix K, M or G (2^10, 2^20,
 *             2^30, any case)
 *   duration  a plain decimal number is in the unit the name ends with
 *             (_MS: milliseconds, _US: microseconds); a suffix ns, us, ms or
 *             s gives another unit, as long as the value is a whole number of
 *             the tunable's unit (KINET_TIMEOUT_MS=2s is 2000)
 *   enum      one of the allowed words (any case)
 *   string    any text up to the stated length
 * and every number must lie within the stated bounds.
 *
 * A malformed value is reported once, at error level, naming the variable,
 * the value, what is allowed and what happens instead, and it is never used
 * in part (never read as 0 or as its leading digits):
 *   - tunables of the context (most): every kinet_open() of the process
 *     fails with -EINVAL;
 *   - tunables of the bootstrap (KINET_BOOT_*): kinet_boot_init() and
 *     kinet_boot_init_env() fail with -EINVAL;
 *   - KINET_LOG: the default is used, with a warning.
 * Code that reads a refused tunable outside those calls (kinet-info, a probe)
 * sees the default.
 *
 * Secrets (KINET_BOOT_SECRET) are never shown: their value here, in
 * kinet_tunable_str() and in every listing is "(set, N characters)".
 */
enum kinet_tunable_type {
	KINET_TUNABLE_INT = 0,
	KINET_TUNABLE_BOOL = 1,
	KINET_TUNABLE_SIZE = 2,
	KINET_TUNABLE_DURATION = 3,
	KINET_TUNABLE_ENUM = 4,
	KINET_TUNABLE_STRING = 5,
};
#define KINET_TUNABLE_SECRET 0x1u /* flags: the value is masked */
#define KINET_TUNABLE_SET 0x2u    /* flags: the environment sets it (not empty) */

/* A tunable: name (also the environment variable that sets it), its default,
 * its current value and what it does (the fields after desc came later:
 * code that knows only the first four still works). Every string is owned by
 * the library and stays valid while it is loaded. */
struct kinet_tunable {
	const char *name;
	const char *def;   /* default, as text ("": not set) */
	const char *value; /* value in use, as text: the environment's when well
			    * formed (canonical: decimal in the unit, 0/1,
			    * lower-case word), else the default; masked for
			    * secrets */
	const char *desc;
	int type;            /* enum kinet_tunable_type */
	unsigned flags;      /* KINET_TUNABLE_SECRET, KINET_TUNABLE_SET */
	const char *allowed; /* what a value may be, in words ("1 .. 64",
			      * "auto, soft, mlx5", "0 .. 1M bytes") */
	const char *unit;    /* "ms", "us" or "bytes"; "" for the other types */
	const char *refused_by; /* what fails while the value is malformed:
				 * "kinet_open", or "kinet_boot_init" (and
				 * kinet_boot_init_env); NULL when the default
				 * is used instead */
	const char *error; /* NULL, or why the environment's value is not used
			    * and what happens instead (the report logged) */
};
/* Number of registered tunables; kinet_tunable_at(i) returns one, or NULL. */
int kinet_tunable_count(void);
const struct kinet_tunable *kinet_tunable_at(int i);
/* The tunable of that name, or NULL if there is none. */
const struct kinet_tunable *kinet_tunable_get(const char *name);
/* Current value of a tunable. _int: int and size as the number, duration in
 * its unit, bool 0/1, enum the position of the word in allowed (0 first);
 * 0 for strings, secrets and unknown names. _str: the value text (NULL if
 * unknown). */
long long kinet_tunable_int(const char *name);
const char *kinet_tunable_str(const char *name);
/* Prints every tunable (name, value, default, allowed values, description,
 * and the report of a malformed value); secrets are masked. */
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
	/* software NIC, GPU memory registered with the libfabric provider
	 * (FI_HMEM_CUDA): the provider sends it itself (GPUDirect where its NIC
	 * can, its own copies otherwise). A region starts as STAGED and becomes
	 * FABRIC when the wire first sends from it; it stays STAGED where the
	 * provider refuses GPU memory (kinet_wire_info says why). */
	KINET_MR_PATH_FABRIC = 4,
};
/* enum kinet_mr_path of a region, or -EINVAL. */
int kinet_mr_path(const kinet_mr *mr);
/* "host", "dmabuf", "peermem", "staged", "fabric" (never NULL). */
const char *kinet_mr_path_str(int path);

/* ---- memory for GPU-initiated programs --------------------------------------- */

/*
 * The memory kinds a GPU-initiated program posts from and lands into (those
 * of DOCA's doca_gpu_mem_alloc), allocated by kinet, each reporting where it
 * lives and which engine moves it (docs/architecture.md, "Memory kinds"):
 *
 *   KINET_ALLOC_GPU               GPU memory (cudaMalloc). The CPU cannot
 *                                 access it (host_ptr NULL).
 *   KINET_ALLOC_GPU_HOST_VISIBLE  GPU memory the CPU can also access: CUDA
 *                                 managed memory whose preferred location is
 *                                 the GPU, mapped for the CPU, and placed on
 *                                 the GPU before it is returned. It is not
 *                                 GPU memory mapped through the PCIe BAR
 *                                 (DOCA's GPU_CPU kind, which needs GDRCopy):
 *                                 where the CPU cannot reach GPU memory in
 *                                 place (PCIe without coherence), a CPU
 *                                 access moves the pages it touches to host
 *                                 memory (page faults, tens of microseconds
 *                                 each) and the GPU's next access moves them
 *                                 back; with hardware coherence (Grace
 *                                 Hopper) the CPU reads it in place. `where`
 *                                 says which.
 *   KINET_ALLOC_HOST_PINNED       pinned host memory mapped into the GPU
 *                                 (cudaHostAlloc, mapped and portable): the
 *                                 GPU reaches it over PCIe.
 *
 * Contents are not cleared. The memory is not registered: kinet_mr_reg(pd,
 * info.ptr, ...) registers it as any memory (the software NIC registers GPU
 * memory only with KINET_ALLOW_HOST_STAGING=1, as every GPU region; the
 * registration cache refuses host-visible GPU memory, managed memory that
 * migrates). Deregister its regions before kinet_mem_free. An allocation does not hold
 * its context: what it reports was decided when it was made (backend,
 * KINET_GPU_ENGINE), and it may outlive the context.
 */
enum kinet_mem_alloc_kind {
	KINET_ALLOC_GPU = 0,
	KINET_ALLOC_GPU_HOST_VISIBLE = 1,
	KINET_ALLOC_HOST_PINNED = 2,
};
/* What an allocation is; every string is owned by the allocation and valid
 * until kinet_mem_free. */
struct kinet_mem_info {
	void *ptr;        /* the address for kernels, device code and kinet_mr_reg
			   * (unified addressing: equal to dev_ptr, else host_ptr) */
	void *dev_ptr;    /* the GPU's address; NULL when no GPU reaches it */
	void *host_ptr;   /* the CPU's address; NULL when the CPU cannot access it */
	size_t len;
	size_t align;     /* ptr is a multiple of it */
	int kind;         /* enum kinet_mem_alloc_kind */
	int mem_kind;     /* enum kinet_mem_kind: where it lives, as kinet_mr_kind()
			   * of a region of it says (managed memory: KINET_MEM_CUDA) */
	int gpu;          /* the CUDA device it belongs to or is mapped into; -1: none */
	const char *where;  /* in words: what the memory is and how the CPU and the
			     * GPU reach it */
	const char *engine; /* what moves it for the context's QPs: "GPU engine",
			     * "CPU engine" (software NIC) or "hardware" (a ConnectX) */
	const char *path;   /* how, e.g. "GPU engine: SM loads/stores", "CPU engine:
			     * CUDA copies (staged)", "CPU engine: direct" */
};

/*
 * Allocates len bytes of `kind` (enum kinet_mem_alloc_kind) for the
 * context's NIC. align: 0 (the allocator's own: at least 256 bytes, a page
 * for host memory) or a power of two up to 1 GiB. Errors: -EINVAL (ctx or
 * out NULL, len 0, an unknown kind, a bad align), -ENODEV (a GPU kind
 * without a usable GPU: no GPU, the CUDA module not loaded, KINET_NO_CUDA=1;
 * the reason is logged), -EOPNOTSUPP (host-visible GPU memory on a GPU
 * without concurrent managed access), -ENOMEM, -EIO (CUDA failed, logged).
 * Without a usable GPU KINET_ALLOC_HOST_PINNED gives page-aligned host
 * memory that is neither pinned nor mapped into a GPU: dev_ptr NULL, gpu -1,
 * and `where` and `path` say that the GPU cannot reach it.
 */
int kinet_mem_alloc(kinet_ctx *ctx, int kind, size_t len, size_t align, kinet_mem **out);
/* Frees an allocation: 0, or -EINVAL (m NULL). */
int kinet_mem_free(kinet_mem *m);
/* Fills *out: 0, or -EINVAL (m or out NULL). */
int kinet_mem_query(const kinet_mem *m, struct kinet_mem_info *out);

/* ---- completion queues and queue pairs ------------------------------------ */

/* CQ flags (kinet_cq_attr.flags, kinet_qp_attr.cq_flags). */
enum kinet_cq_flag {
	/* The consumer never reports its index (the CQ doorbell record): the NIC
	 * writes CQEs without checking for room, as a ConnectX CQ created with
	 * the overrun-ignore bit (cqc.oi) does. The producer must bound the
	 * outstanding CQEs itself (e.g. by the SQ depth); an overrun overwrites
	 * CQEs the consumer has not read. */
	KINET_CQ_OVERRUN_IGNORE = 1u << 0,
};

struct kinet_cq_attr {
	uint32_t depth; /* CQEs, rounded up to a power of two */
	uint32_t flags; /* enum kinet_cq_flag */
};

/* A CQ of `depth` (rounded up to a power of two) 64-byte CQEs. Every CQE
 * starts as op_own 0xF1 (opcode invalid, owner 1), so a poller that checks
 * only the owner bit sees nothing on the first lap. */
int kinet_cq_create(kinet_ctx *ctx, uint32_t depth, kinet_cq **out);
/* The same with attributes: -EINVAL for an unknown flag, -EOPNOTSUPP where
 * the backend cannot create CQs apart (mlx5: QPs create theirs; use
 * kinet_qp_attr.cq_flags). */
int kinet_cq_create_ex(kinet_ctx *ctx, const struct kinet_cq_attr *attr, kinet_cq **out);
/* The flags a CQ was created with (enum kinet_cq_flag): what the backend
 * honours, never silently less. */
uint32_t kinet_cq_flags(const kinet_cq *cq);
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
	uint32_t cq_flags;   /* enum kinet_cq_flag, for the CQs the QP creates */
	uint32_t rq_sge;     /* scatter entries per receive WQE, 1 .. KINET_MAX_RQ_SGE (0: 1);
				the software NIC's; the ConnectX backends take 1 */
	uint32_t remote_access; /* what this QP serves as a target, as ibv's qp_access_flags:
				   KINET_QP_ACCESS_SET | KINET_ACCESS_REMOTE_* (LOCAL_WRITE
				   is ignored); 0 (without the SET bit): every remote access */
};
#define KINET_MAX_RQ_SGE 32
/* kinet_qp_attr.remote_access: the field is given. A remote write, read or
 * atomic the target QP does not allow fails as a region without that access
 * does: the requester's error CQE has KN_SYND_REMOTE_ACCESS_ERR (reason
 * KINET_REASON_QP_ACCESS), its QP goes to ERR, the target memory is not
 * touched. KINET_QP_ACCESS_SET alone allows none; sends need no flag. */
#define KINET_QP_ACCESS_SET (1u << 31)

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
 * drive the NIC, on every backend. Returns the ticket of the WQE (its first
 * WQEBB's index), or a negative errno: -EINVAL, -ETIMEDOUT when the SQ stays
 * full for the QP's timeout, -EOPNOTSUPP when the QP's queues are in GPU
 * memory. Room in the SQ is judged by the NIC's consumer index; a ConnectX
 * reports it only in CQEs, so on mlx5 room comes back as the caller consumes
 * send CQEs with kinet_cq_poll (kinet_qp_send_cq): request a CQE at least
 * once per SQ depth. Do not mix with the device API on one QP. */
long long kinet_qp_post_raw(kinet_qp *qp, const void *wqe, uint32_t nbb);

/* The send / receive CQ of a QP (the one given at creation, or the one it
 * created), NULL for a QP without a receive queue (recv) or NULL qp. */
kinet_cq *kinet_qp_send_cq(const kinet_qp *qp);
kinet_cq *kinet_qp_recv_cq(const kinet_qp *qp);

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
	/* software NIC: how producers rang (docs/hardware.md, "Producer conventions") */
	uint64_t db_wqe_words;  /* register words naming the last WQE (rdma-core, kinet) */
	uint64_t db_pi_words;   /* register words naming the next producer index (ds 0) */
	uint64_t db_foreign;    /* register words naming another QP (ignored) */
	uint64_t bf_mismatch;   /* BlueFlame copies that differed from the SQ (the SQ ran) */
};
int kinet_ctx_counters(kinet_ctx *ctx, struct kinet_counters *out);

/* Counters of one QP (both backends; docs/lifecycle.md, "Counters", says
 * which the mlx5 backend maintains and which are the NIC's port counters).
 * Send-side figures count this QP's WQEs; receive-side ones the receive
 * WQEs it consumed as a target. */
struct kinet_qp_counters {
	uint32_t qpn;
	int state;               /* enum kinet_qp_state */
	uint64_t posted;         /* send WQEs the NIC has taken from the SQ */
	uint64_t completed;      /* of those, finished: success, error or flush, with a CQE
				  * or not (unsignaled) */
	uint64_t outstanding;    /* posted - completed: executing, on the wire, in GPU copies,
				  * or waiting for room in the CQ */
	uint64_t cqes;           /* send CQEs written */
	uint64_t bytes;          /* payload of the send WQEs executed (local peer) or handed
				  * to the wire (peer in another process) */
	uint64_t direct_bytes;   /* of those, between host memories */
	uint64_t staged_bytes;   /* of those, to or from GPU memory through CUDA copies */
	uint64_t errors;         /* error CQEs, send and receive, not counting flushes */
	uint64_t flushed;        /* flush CQEs, send and receive */
	uint64_t by_syndrome[64]; /* error and flush CQEs by syndrome (KN_SYND_* & 63) */
	uint64_t rnr_retries;    /* receiver-not-ready waits of this QP's WQEs */
	uint64_t retry_exceeded; /* transport retry exceeded: the peer was gone or silent */
	uint64_t doorbells;      /* doorbell register writes seen */
	uint64_t db_wqe_words;   /* ... naming the last WQE (rdma-core, kinet) */
	uint64_t db_pi_words;    /* ... naming the next producer index (ds 0) */
	uint64_t db_foreign;     /* ... naming another QP (ignored) */
	uint64_t dbr_only;       /* batches found through the doorbell record alone */
	uint64_t bf_wqes;        /* WQEs executed from the BlueFlame register */
	uint64_t bf_mismatch;    /* BlueFlame copies that differed from the SQ */
	uint64_t db_not_ready;   /* doorbells rung while the QP was in RESET or INIT */
	uint64_t recv_completed; /* receive WQEs completed (with data, an error or a flush) */
	uint64_t recv_bytes;     /* bytes placed into this QP's receive WQEs */
	uint64_t faults;         /* faults injected into this QP (kinet_fault_add) */
	uint64_t host_cqes;      /* CQEs of its CQs consumed with kinet_cq_poll */
};
/* Fills *out with qp's counters: 0, or -EINVAL. Cheap enough to call while
 * traffic runs (relaxed reads of counters that their writers update without
 * locks). */
int kinet_qp_counters(const kinet_qp *qp, struct kinet_qp_counters *out);

/* ---- why a WQE failed ------------------------------------------------------------ */

/*
 * The software NIC says which check failed: the vendor syndrome byte of each
 * error CQE it writes (struct kn_err_cqe.vendor_err_synd, device state
 * err_vendor) carries one of these reason codes, and the debug log names it.
 * Flush CQEs carry KINET_REASON_FLUSHED (0xf9, as the mlx5 driver writes).
 * On the mlx5 backend the byte is the ConnectX's own vendor syndrome: it is
 * not a kinet reason (kinet_reason_str then says "vendor syndrome").
 */
enum kinet_reason {
	KINET_REASON_NONE = 0,
	KINET_REASON_UNKNOWN_KEY = 1,   /* no region has that key (never registered, or removed) */
	KINET_REASON_WRONG_PD = 2,      /* the region belongs to another protection domain */
	KINET_REASON_OUT_OF_BOUNDS = 3, /* the range is not inside the region */
	KINET_REASON_ACCESS = 4,        /* the region lacks the access flag the operation needs */
	KINET_REASON_REVOKED = 5,       /* the region was revoked (kinet_mr_revoke) */
	KINET_REASON_QP_NOT_READY = 6,  /* the target QP is not in RTR or RTS */
	KINET_REASON_PEER_GONE = 7,     /* no peer, a destroyed peer, or a peer that stopped
					 * answering (transport retry exceeded) */
	KINET_REASON_MALFORMED = 8,     /* the WQE itself: size, index, QP number, segments */
	KINET_REASON_LENGTH = 9,        /* message larger than the receive WQE or the NIC's limit */
	KINET_REASON_RNR = 10,          /* no receive WQE within the RNR retries */
	KINET_REASON_ALIGNMENT = 11,    /* atomic on an address that is not 8-byte aligned */
	KINET_REASON_COPY_FAILED = 12,  /* a copy to or from GPU memory failed */
	KINET_REASON_BAD_RESPONSE = 13, /* the answer did not match the request */
	KINET_REASON_INJECTED = 14,     /* an error injected by kinet_fault_add / KINET_FAULT */
	KINET_REASON_QP_ACCESS = 15,    /* the target QP does not allow the operation
					 * (kinet_qp_attr.remote_access, ibv's qp_access_flags) */
	KINET_REASON_DC_KEY = 16,       /* a DCI presented an access key its DCT does not have */
	KINET_REASON_FLUSHED = 0xf9,    /* flushed: the QP was in ERR */
};
/* "unknown key", "wrong protection domain", ... (never NULL). */
const char *kinet_reason_str(int reason);
/* The reason code of an error CQE written by the software NIC (0 for a
 * successful CQE or a NULL cqe). */
int kinet_cqe_reason(const struct kn_cqe64 *cqe);

/* ---- region lifecycle -------------------------------------------------------------- */

/*
 * What kinet knows about a region (docs/lifecycle.md walks the whole buffer
 * life: allocated, registered, exposed, in flight, done, published,
 * consumed, invalidated, deregistered, freed). Published and consumed belong
 * to the application's protocol: kinet cannot see them.
 */
enum kinet_mr_state {
	KINET_MR_REGISTERED = 1, /* keys valid, never exported */
	KINET_MR_EXPOSED = 2,    /* keys valid, a descriptor was exported (kinet_mr_export) */
	KINET_MR_REVOKED = 3,    /* kinet_mr_revoke: every access fails; only dereg remains */
	KINET_MR_INVALID = 4,    /* a cached region whose memory went away or was reused:
				  * no longer handed out, deregistered at its last put */
};
/* enum kinet_mr_state of a region, or -EINVAL. */
int kinet_mr_state(const kinet_mr *mr);
const char *kinet_mr_state_str(int state);

/*
 * Revokes a region: from the moment this returns, every new access through
 * its keys fails as the hardware fails an access through an invalid key
 * (local: local protection error; remote: the requester's remote access
 * error, reason KINET_REASON_REVOKED on the software NIC), so a peer learns
 * it from its error CQE. Work already executing finishes first: the software
 * NIC returns once no engine pass, GPU copy or wire placement that checked
 * the region before is still moving its bytes; mlx5 invalidates the memory
 * key in the NIC (ibv_dereg_mr), which waits for the DMA in progress. The
 * region object and its keys stay (no other region gets them) until
 * kinet_mr_dereg. 0, -EINVAL, -EALREADY (revoked before), or the backend's
 * error.
 */
int kinet_mr_revoke(kinet_mr *mr);

/* ---- registration cache ------------------------------------------------------------ */

/*
 * A registration cache: regions by address range for one PD, shared by the
 * threads of a process, reference counted, evicted least recently used
 * within entry and byte limits, invalidated when the memory goes away or is
 * reused (docs/lifecycle.md, "Registration cache"):
 *  - host memory: a kernel memory monitor (userfaultfd unmap, remove and
 *    remap events) covers every cached range; memory it cannot watch
 *    (file mappings, shared memory) is registered per get and deregistered
 *    at its last put (never cached);
 *  - GPU memory: the allocation identity (CU_POINTER_ATTRIBUTE_BUFFER_ID) is
 *    checked on every hit, so cudaFree + cudaMalloc at the same address gets
 *    a new registration; memory of a CUDA memory pool (cudaMallocAsync) or
 *    mapped with cuMemMap is refused (-EOPNOTSUPP): reuse there is not
 *    visible to the cache.
 * A region handed out by get stays registered (never evicted, never
 * deregistered) until the matching put; hold it until every WQE that names
 * it has completed.
 */
typedef struct kinet_mr_cache kinet_mr_cache;
struct kinet_mr_cache_attr {
	size_t max_entries; /* 0: KINET_MR_CACHE_ENTRIES */
	size_t max_bytes;   /* 0: KINET_MR_CACHE_BYTES */
};
/* attr may be NULL (the tunables). */
int kinet_mr_cache_create(kinet_pd *pd, const struct kinet_mr_cache_attr *attr,
			  kinet_mr_cache **out);
/* -EBUSY (nothing freed) while a region is held (got and not put). */
int kinet_mr_cache_destroy(kinet_mr_cache *c);
/* A region covering [addr, addr+len) with at least `access`: a cached one
 * (hit) or a new registration (miss). The caller holds a reference until
 * kinet_mr_cache_put. Errors: those of kinet_mr_reg, -EOPNOTSUPP (GPU
 * memory the cache cannot track), -ENOSPC (limits reached and every entry
 * held). */
int kinet_mr_cache_get(kinet_mr_cache *c, void *addr, size_t len, unsigned access,
		       kinet_mr **out);
/* Gives back a reference from get: 0, -EINVAL (not a region of this cache,
 * or not held). */
int kinet_mr_cache_put(kinet_mr_cache *c, kinet_mr *mr);
/* Deregisters every entry nobody holds: returns how many. */
int kinet_mr_cache_flush(kinet_mr_cache *c);

#define KINET_MR_CACHE_HIST 16 /* registration time buckets: < 1 us, < 2 us, ... 2^15 us */
enum kinet_mr_cache_path { KINET_MR_CACHE_HOST = 0, KINET_MR_CACHE_GPU = 1 };
struct kinet_mr_cache_stats {
	uint64_t hits, misses;
	uint64_t evictions;     /* entries deregistered to stay within the limits */
	uint64_t invalidations; /* entries whose memory went away or was reused */
	uint64_t uncached;      /* gets served without caching (memory the monitor cannot watch) */
	uint64_t refused;       /* gets refused (pool or cuMemMap GPU memory, limits) */
	uint64_t entries, bytes, held; /* now: entries, their bytes, entries held */
	uint64_t reg_hist[2][KINET_MR_CACHE_HIST]; /* [path][log2 us]: registration times */
	uint64_t reg_ns[2];                        /* [path]: their sum */
	int monitor;            /* 1: the host memory monitor runs (userfaultfd), 0: none */
};
int kinet_mr_cache_stats(const kinet_mr_cache *c, struct kinet_mr_cache_stats *out);

/* ---- endpoint states ------------------------------------------------------------------ */

/*
 * The state of a QP's connection as the layer above sees it, derived from
 * the QP state and from what the transport knows (the wire's view of the
 * peer on the software NIC). Transitions and what each means for
 * outstanding work: docs/lifecycle.md, "Endpoint states".
 */
enum kinet_ep_state {
	KINET_EP_IDLE = 0,       /* RESET, never connected or reset since */
	KINET_EP_CONNECTING = 1, /* INIT or RTR: sends wait until RTS */
	KINET_EP_READY = 2,      /* RTS, the peer answers */
	KINET_EP_DEGRADED = 3,   /* RTS, work outstanding and the peer silent for more than
				  * half the network timeout, or waiting on RNR: it may recover
				  * or fail */
	KINET_EP_DRAINING = 4,   /* ERR, WQEs still completing (errors and flushes) */
	KINET_EP_FAILED = 5,     /* ERR, everything completed: reset or destroy it */
};
const char *kinet_ep_state_str(int state);
struct kinet_ep_info {
	int state;            /* enum kinet_ep_state */
	int qp_state;         /* enum kinet_qp_state */
	int remote;           /* 1: the peer is in another process */
	int peer_dead;        /* the transport gave the peer up */
	uint64_t outstanding; /* send WQEs posted and not completed */
	uint64_t silent_ms;   /* work outstanding and nothing heard from the peer for this long */
	uint32_t peer_qpn;
	uint64_t peer_gen;    /* generation of the peer's descriptor connected to */
	int engine;           /* enum kinet_engine: who executes its WQEs now */
	uint64_t gpu_wqes;    /* WQEs the GPU engine executed (as of its last give-back) */
	char engine_why[96];  /* why that engine: the GPU engine's eligibility or refusal */
};
/* Who executes a QP's WQEs: a ConnectX, the software NIC's CPU engine
 * (threads), or its GPU engine (a kernel; KINET_GPU_ENGINE, docs/architecture.md);
 * GPU_HOST: the GPU engine's code on a CPU thread (KINET_GPU_ENGINE=host, for
 * testing without a GPU). */
enum kinet_engine {
	KINET_ENGINE_CPU = 0,
	KINET_ENGINE_GPU = 1,
	KINET_ENGINE_HW = 2,
	KINET_ENGINE_GPU_HOST = 3
};
int kinet_qp_ep_info(const kinet_qp *qp, struct kinet_ep_info *out);

/* ---- fault injection (software NIC) ------------------------------------------------ */

/*
 * Adds fault-injection rules to a context (the same grammar as KINET_FAULT,
 * which applies to every context at kinet_open): rules separated by ';',
 * each a comma-separated list of key=value:
 *   action=error|delay|drop|dup|corrupt|silent|cqfull   (required)
 *   qp=N       the QP (number, decimal or 0x hex); default every QP
 *   op=write|write_imm|read|send|send_imm|cas|fadd|nop|any  (default any)
 *   every=N    the Nth, 2Nth, ... matching WQE (default 1) | prob=P (0 < P <= 1)
 *   after=N    skip the first N matches;  count=N  at most N injections
 *   synd=S     error: the CQE's syndrome, a name (local_prot, remote_access,
 *              remote_op, remote_inval, retry_exc, rnr_exc, local_len, local_qp_op,
 *              bad_resp) or a number (default remote_access)
 *   us=N       delay, cqfull: how long (default 1000)
 *   byte=N     corrupt: offset in the payload (default 0)
 * error completes the WQE with that error CQE (reason KINET_REASON_INJECTED;
 * the QP goes to ERR), delay holds it (and the WQEs behind it), silent makes
 * the peer stop answering the QP (its WQE waits KINET_NET_TIMEOUT_MS and
 * fails with transport retry exceeded), cqfull makes the send CQ look full
 * for `us`, drop, dup and corrupt act on wire messages received by QP N (a
 * peer in another process): a dropped request is never executed (the
 * requester times out), a duplicated one arrives again once the target has
 * served it and is recognised by its message number and dropped (executed
 * once, as RC requires), a corrupted one has one payload byte flipped. Returns the
 * number of rules added, or -EINVAL with the reason logged (nothing added);
 * -EOPNOTSUPP on a backend without fault injection (mlx5).
 */
int kinet_fault_add(kinet_ctx *ctx, const char *spec);
/* Removes every rule of the context. */
int kinet_fault_clear(kinet_ctx *ctx);

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

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/shmem.h - the PGAS layer on kinet (libkinet_shmem.so), host side:
 * one processing element (PE) per process, a symmetric heap every PE
 * allocates from in the same order, teams, and what device code
 * (kinet/shmem_device.h) needs to reach every other PE: by load/store for
 * peers on the same node (host heaps through shared memory, GPU heaps
 * through CUDA IPC), through kinet's RC queue pairs for the others. The
 * NVSHMEM names of these calls are in kinet/nvshmem/nvshmem.h.
 *
 * The layer uses kinet's public API only (kinet.h, net.h, boot.h and the
 * device API). Every call returns 0 (or a value where stated) or a negative
 * errno; kinet_strerror() explains it, and the log says what went wrong.
 * Calls marked collective must be made by every PE, in the same order, with
 * the same arguments: each checks that (kinet_boot_allgather) and fails on
 * every PE with -EINVAL and a message naming the PEs that differ.
 * Collectives are bounded by the bootstrap's timeout; a PE that died makes
 * them fail on the others (-ETIMEDOUT, -EPROTO or -ECONNRESET from the
 * bootstrap) instead of hanging.
 *
 * One thread at a time calls the host API (as with the bootstrap).
 */
#ifndef KINET_SHMEM_H
#define KINET_SHMEM_H

#include <stddef.h>
#include <stdint.h>
#include <kinet/kinet.h>
#include <kinet/boot.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kn_shmem; /* the device state (kinet/shmem_device.h) */

/* ---- init and teardown ------------------------------------------------------------ */

/* Where the device code of this process runs. */
enum kinet_shmem_exec {
	KINET_SHMEM_EXEC_AUTO = 0, /* CUDA when a usable GPU is there, else host */
	KINET_SHMEM_EXEC_HOST = 1, /* CPU threads (the host executor): heaps in host memory */
	KINET_SHMEM_EXEC_CUDA = 2, /* CUDA kernels: the device heap in GPU memory */
};

struct kinet_shmem_attr {
	/* The job. NULL: kinet_boot_init_env() (the environment's TCP job, or
	 * mpirun's), closed by kinet_shmem_finalize. A bootstrap given here stays
	 * the caller's (it must outlive the layer; the layer uses it for its
	 * collectives, so the caller makes no collective of its own meanwhile). */
	kinet_boot *boot;
	int executor;          /* enum kinet_shmem_exec */
	size_t heap_size;      /* device heap (0: KINET_SHMEM_HEAP_SIZE) */
	size_t host_heap_size; /* host heap (0: KINET_SHMEM_HOST_HEAP_SIZE) */
	int backend;           /* enum kinet_backend of the context (0: auto) */
	int gpu;               /* CUDA executor: the device (-1: the current one) */
};

/* Joins the job and sets the layer up (collective): one context and PD, the
 * heaps (allocated and registered once, keys and addresses exchanged), the
 * local peers mapped (same host and boot: KINET_SHMEM_P2P), KINET_SHMEM_QPS
 * QPs to every other peer connected, the device state placed for device
 * code (and handed to every CUDA module that registered). attr may be
 * NULL. -EALREADY when already initialised; -EINVAL: bad attributes, a
 * malformed KINET_SHMEM_* tunable (as kinet_open refuses it), or PEs that
 * disagree on the heap sizes or the executor; -ENODEV: CUDA asked for but no
 * usable GPU; what kinet_open, kinet_mr_reg, the connection or the
 * bootstrap return. On failure nothing is left behind. */
int kinet_shmem_init(const struct kinet_shmem_attr *attr);

/* Tears the layer down (collective: a barrier first, so no PE frees what
 * another still reaches); later calls fail with -EINVAL until a new init.
 * Never hangs on a dead peer: the barrier's error is returned, the local
 * resources are freed anyway. */
int kinet_shmem_finalize(void);

/* 1 between a successful init and finalize, else 0. */
int kinet_shmem_initialized(void);

/* This PE and the number of PEs; -1 when not initialised. */
int kinet_shmem_my_pe(void);
int kinet_shmem_n_pes(void);

/* The executor in use (enum kinet_shmem_exec), or -1. */
int kinet_shmem_executor(void);

/* The first error device code of this PE recorded (0: none; the NVSHMEM
 * calls return nothing, so this is where their errors go), or -EINVAL when
 * not initialised. clear: set it back to 0. */
int kinet_shmem_error(int clear);

/* The context the layer opened (for counters, kinet_ctx_backend), or NULL. */
kinet_ctx *kinet_shmem_ctx(void);
/* The protection domain of the heaps' regions, or NULL: QPs a program
 * creates in it to post its own WQEs reach the heaps with the keys in
 * kinet_shmem_device_state() (the user parts only: docs/shmem.md). */
kinet_pd *kinet_shmem_pd(void);

/* ---- the node ---------------------------------------------------------------------- */

/* Node index of a PE (nodes numbered by their lowest PE, from 0), this
 * PE's index among the PEs of its node, how many PEs its node has; -1
 * for a bad PE or when not initialised. */
int kinet_shmem_node_of(int pe);
int kinet_shmem_local_pe(void);
int kinet_shmem_local_n_pes(void);
/* 1 when pe's heaps are mapped here (load/store), 0 when the NIC reaches
 * it, -1 for a bad PE. This PE itself: 1. */
int kinet_shmem_pe_mapped(int pe);

/* ---- the symmetric heap --------------------------------------------------------------- */

/* Which heap an allocation comes from. */
enum kinet_shmem_kind {
	KINET_SHMEM_DEVICE = 0, /* GPU memory (CUDA executor), else host memory */
	KINET_SHMEM_HOST = 1,   /* host memory (mapped into the GPU): signal words
				   the CPU must see */
};

/* Allocates size bytes (> 0) aligned to align (a power of two; 0: 64) from
 * the heap of `kind` (collective). Every PE gets the block at the same
 * offset of its heap, and that is how a symmetric address is translated.
 * The PEs' calls are checked against each other (sequence number, kind,
 * size, alignment): a PE that asks for another size, or allocates in
 * another order, makes the call fail on every PE with -EINVAL and a
 * message naming it ("PE 2 asked for 8192 bytes, PE 0 for 4096 (call 3)").
 * -ENOMEM: the heap has no room (on some PE). flags: 1 = zeroed. */
int kinet_shmem_alloc(size_t size, size_t align, int kind, unsigned flags, void **out);

/* The usual forms (collective; NULL on failure, with the reason logged and
 * in kinet_shmem_error): malloc (device heap), calloc (zeroed), align, and
 * malloc_host (host heap). A size of 0 returns NULL without an error. */
void *kinet_shmem_malloc(size_t size);
void *kinet_shmem_calloc(size_t count, size_t size);
void *kinet_shmem_align(size_t alignment, size_t size);
void *kinet_shmem_malloc_host(size_t size);

/* Frees a block (collective: every PE frees the same block in the same
 * order, checked as above; a barrier, so no PE still uses it). NULL: a
 * no-op (still collective). -EINVAL: not a block of the heap, or PEs that
 * disagree. */
int kinet_shmem_free(void *ptr);

/* A pointer through which the calling host thread reaches symmetric dest on
 * PE pe by load/store (this PE; a same-node peer's host heap; with the CUDA
 * executor, a GPU heap address usable by kernels and cudaMemcpy), or NULL. */
void *kinet_shmem_ptr(const void *dest, int pe);

/* Registers a local buffer (not in a heap) as the local side of NIC
 * operations (the source of put, the destination of get). At most
 * KN_SHMEM_MAX_REGS at once. Not collective. -EINVAL, -ENOSPC, what
 * kinet_mr_reg returns. */
int kinet_shmem_buffer_register(void *addr, size_t len);
int kinet_shmem_buffer_unregister(void *addr);

/* ---- teams ----------------------------------------------------------------------------- */

typedef int32_t kinet_shmem_team;
#define KINET_SHMEM_TEAM_INVALID (-1)
#define KINET_SHMEM_TEAM_WORLD 0  /* every PE */
#define KINET_SHMEM_TEAM_SHARED 1 /* the PEs whose heaps this PE maps, itself included */
#define KINET_SHMEM_TEAM_NODE 2   /* the PEs of this PE's node */

/* Splits parent (collective over ALL PEs of the world, members of parent or
 * not: the layer checks the arguments against each other with the world's
 * bootstrap): the new team holds the parent's PEs start, start + stride,
 * ... (size of them); *out gets its handle on members and
 * KINET_SHMEM_TEAM_INVALID elsewhere. -EINVAL (arguments, or PEs that
 * disagree), -ENOSPC (KN_SHMEM_MAX_TEAMS teams alive). */
int kinet_shmem_team_split_strided(kinet_shmem_team parent, int start, int stride, int size,
				   kinet_shmem_team *out);
/* Destroys a team made by split (collective over all PEs). Predefined teams
 * cannot be destroyed (-EINVAL). */
int kinet_shmem_team_destroy(kinet_shmem_team team);
/* This PE's index in team, its size; the index in dst of src's PE pe; -1
 * when not a member, or a bad team or PE. */
int kinet_shmem_team_my_pe(kinet_shmem_team team);
int kinet_shmem_team_n_pes(kinet_shmem_team team);
int kinet_shmem_team_translate_pe(kinet_shmem_team src, int pe, kinet_shmem_team dst);

/* Splits parent into a grid of rows of xrange PEs (collective over ALL PEs
 * of the world, as kinet_shmem_team_split_strided; a PE outside parent
 * passes KINET_SHMEM_TEAM_INVALID): *xteam gets this PE's row (parent's
 * PEs k*xrange ... k*xrange + xrange - 1, the last row the rest), *yteam
 * its column (parent's PEs c, c + xrange, c + 2*xrange, ...); an xrange
 * above the parent's size is the parent's size. The rows are split first,
 * in order, then the columns: ceil(size / xrange) + xrange splits, each
 * taking a team slot on its members. -EINVAL (an xrange below 1, PEs that
 * disagree, no parent), -ENOSPC (KN_SHMEM_MAX_TEAMS teams alive: the
 * teams already made are destroyed); both handles are
 * KINET_SHMEM_TEAM_INVALID on failure and on a PE outside parent. */
int kinet_shmem_team_split_2d(kinet_shmem_team parent, int xrange, kinet_shmem_team *xteam,
			      kinet_shmem_team *yteam);

/* Bytes kept with a team (up to KINET_SHMEM_TEAM_CONFIG_MAX) for the layers
 * above (nvshmem.h keeps the config a team was split with there): set
 * replaces them (len 0: none), get copies at most len of them to out and
 * returns how many are kept (0: none). A split or destroy clears them.
 * -EINVAL: not a team of this PE, len too large, NULL with len. */
#define KINET_SHMEM_TEAM_CONFIG_MAX 64
int kinet_shmem_team_set_config(kinet_shmem_team team, const void *config, size_t len);
int kinet_shmem_team_get_config(kinet_shmem_team team, void *out, size_t len);

/* ---- host-side synchronisation ----------------------------------------------------------- */

/* Barrier of every PE's host thread (collective): kinet_shmem_barrier on
 * the world team, so this PE's host-initiated operations are complete
 * first, and every PE leaves within about one poll of the last arrival (as
 * NVSHMEM's host barrier does; programs that reset a word after the barrier
 * that a peer writes right after it rely on that). Kernels in flight are
 * not waited for: a kernel's operations complete at its own quiet or
 * barrier. A PE that is gone makes it fail (-ETIMEDOUT after
 * KINET_SHMEM_TIMEOUT_MS, or the NIC's error), never hang. */
int kinet_shmem_barrier_all(void);

/* ---- the host executor --------------------------------------------------------------------- */

/* Grid and block sizes of kinet_shmem_host_launch (CUDA's dim3). */
struct kinet_shmem_dim3 {
	unsigned x, y, z;
};

/* Where a thread of kinet_shmem_host_launch is: CUDA's blockIdx, threadIdx,
 * blockDim, gridDim; in_launch 0 for a thread outside any launch. */
struct kinet_shmem_host_thread {
	struct kinet_shmem_dim3 block_idx, thread_idx, block_dim, grid_dim;
	int in_launch;
};

/* Runs fn(arg) on grid x block CPU threads at once (every CTA resident, as
 * a collective launch needs), each with its place (kinet_shmem_host_self),
 * and waits for all. The threads of a CTA synchronise with
 * kinet_shmem_host_group_sync (scope 2, __syncthreads) and, by 32, scope 1
 * (__syncwarp). At most 4096 threads. -EINVAL, -EAGAIN. */
int kinet_shmem_host_launch(void (*fn)(void *), void *arg, struct kinet_shmem_dim3 grid,
			    struct kinet_shmem_dim3 block);

/* The calling thread's place in the launch it belongs to (a thread outside
 * any launch: a block of one thread). Never NULL. */
const struct kinet_shmem_host_thread *kinet_shmem_host_self(void);

/* Group primitives of the host executor (scope 1: the warp, 32 threads of a
 * CTA; 2: the CTA; 3: the warpgroup, 128 threads of a CTA, the last one of a
 * CTA whose size is not a multiple of 128 the rest), for the device
 * headers' warp, block and warpgroup forms: a
 * barrier, the calling thread's rank and the group's size, and a broadcast
 * of the first thread's value (with a barrier). A thread outside a launch is
 * a group of one. */
void kinet_shmem_host_group_sync(int scope);
int kinet_shmem_host_group_rank(int scope);
int kinet_shmem_host_group_size(int scope);
int kinet_shmem_host_group_bcast(int scope, int value);

/* A small number for the calling host thread: its linear CTA index under
 * kinet_shmem_host_launch, else one taken on its first call (the device
 * header's QP choice). */
int kinet_shmem_host_qp_index(void);

/* ---- the device state ----------------------------------------------------------------------- */

/* The state device code reads: with the host executor its host address
 * (kinet/shmem_device.h reads it through this call), with CUDA its address in
 * GPU memory. NULL when not initialised. */
const struct kn_shmem *kinet_shmem_device_state(void);

/* Registers the setter of a CUDA translation unit's copy of the state
 * pointer (kinet/shmem_device.h does it for every CUDA translation unit
 * that includes it, at load): called with the device state at every init,
 * at once when already initialised, and with NULL at finalize. Up to 256
 * setters; -ENOSPC beyond. */
int kinet_shmem_register_module(void (*set)(const void *state));

/* ---- CUDA streams ------------------------------------------------------------------------------ */

/* A device barrier of every PE enqueued on a CUDA stream (cudaStream_t, NULL:
 * the default stream): a kernel of one thread runs kn_shmem_barrier_all. The
 * host executor runs the barrier at once on the calling thread. -ENOSYS: the
 * library was built without CUDA and the executor is CUDA. */
int kinet_shmem_barrier_all_on_stream(void *stream);
int kinet_shmem_sync_all_on_stream(void *stream);
int kinet_shmem_quiet_on_stream(void *stream);


/* ---- host-initiated operations ------------------------------------------------------------ */

/* The device operations of kinet/shmem_device.h called from host code
 * (NVSHMEM's nvshmem_putmem, _getmem, typed put/get/p/g, quiet, fence and
 * atomics in a host function). With the host executor they run on the
 * calling thread at once (the CPU posts into this PE's QPs, or copies
 * through the mapping). With the CUDA executor the operation runs as a
 * kernel of one thread on a stream of the layer's own, and the call returns
 * once it has completed; its local buffer (the source of a put, the
 * destination of a get) must be one the GPU reaches: a heap, GPU memory, or
 * host memory pinned or registered with CUDA (pageable memory: -EINVAL, with
 * a line that says so). put and get return once their buffer may be reused
 * (get: the data is there); the _nbi forms at once (kinet_shmem_quiet
 * completes them). The rules of the device calls apply (symmetric
 * addresses, registration of local buffers, the reserved bytes); errors are
 * returned and kept as the PE's first error. -EINVAL when not initialised.
 * One thread at a time calls the host API. */
int kinet_shmem_put(void *dest, const void *src, size_t len, int pe);
int kinet_shmem_put_nbi(void *dest, const void *src, size_t len, int pe);
int kinet_shmem_get(void *dest, const void *src, size_t len, int pe);
int kinet_shmem_get_nbi(void *dest, const void *src, size_t len, int pe);
/* One value of size 1, 2, 4 or 8 bytes (its bytes the low ones of value). */
int kinet_shmem_p(void *dest, uint64_t value, uint32_t size, int pe);
int kinet_shmem_g(const void *src, uint32_t size, int pe, uint64_t *out);
/* kn_shmem_atomic from the host: amo is enum kn_amo, old (may be NULL)
 * receives the previous value of the fetching ones. */
int kinet_shmem_atomic(void *dest, int amo, uint32_t size, uint64_t value, uint64_t compare,
		       int pe, uint64_t *old);
int kinet_shmem_quiet(void);
int kinet_shmem_fence(void);
/* A team's barrier (quiet, then sync: kn_shmem_barrier) and sync
 * (kn_shmem_team_sync) from host code; collective over the team's PEs,
 * which may each call it from host or device code. */
int kinet_shmem_barrier(kinet_shmem_team team);
int kinet_shmem_team_sync(kinet_shmem_team team);
/* Strided put and get (OpenSHMEM's iput, iget; kn_shmem_iput): element i of
 * size bytes (1, 2, 4, 8 or 16) moves between src + i*sst*size and dest +
 * i*dst*size, i in [0, nelems); strides count elements. put: dest
 * symmetric; get: src symmetric. A bad size or a span that overflows:
 * -EINVAL with a line. */
int kinet_shmem_iput(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
		     uint32_t size, int pe);
int kinet_shmem_iget(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
		     uint32_t size, int pe);

/* ---- stream-ordered operations ------------------------------------------------------------ */

/* The same operations, and put_signal, signal_op, signal_wait_until and
 * team barriers, enqueued on a CUDA stream (cudaStream_t; NULL: the default
 * stream): a kernel of one thread runs the device call when the stream
 * reaches it (the call returns at once; errors of the operation itself are
 * kept as the PE's first error, kinet_shmem_error). The host executor runs
 * the operation at once on the calling thread and returns its result.
 * nbi: 1 for the _nbi forms (completed by kinet_shmem_quiet_on_stream).
 * kinet_shmem_g_on_stream waits for the stream (its value is returned).
 * -ENOSYS: the library was built without CUDA and the executor is CUDA. */
int kinet_shmem_put_on_stream(void *dest, const void *src, size_t len, int pe, int nbi,
			      void *stream);
int kinet_shmem_get_on_stream(void *dest, const void *src, size_t len, int pe, int nbi,
			      void *stream);
int kinet_shmem_p_on_stream(void *dest, uint64_t value, uint32_t size, int pe, void *stream);
int kinet_shmem_g_on_stream(const void *src, uint32_t size, int pe, uint64_t *out, void *stream);
int kinet_shmem_put_signal_on_stream(void *dest, const void *src, size_t len, uint64_t *sig_addr,
				     uint64_t signal, int sig_op, int pe, int nbi, void *stream);
int kinet_shmem_signal_op_on_stream(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe,
				    void *stream);
/* Waits (in stream order) until the local signal word compares true. */
int kinet_shmem_signal_wait_until_on_stream(uint64_t *sig_addr, int cmp, uint64_t value,
					    void *stream);
/* Waits (in stream order) until the local word ivar of size 1, 2, 4 or 8
 * bytes (signed when sgn) compares true with value (kn_shmem_wait_until). */
int kinet_shmem_wait_until_on_stream(void *ivar, int cmp, uint64_t value, uint32_t size, int sgn,
				     void *stream);
/* A team's barrier (quiet, then sync) and sync; collective over the team. */
int kinet_shmem_barrier_on_stream(kinet_shmem_team team, void *stream);
int kinet_shmem_team_sync_on_stream(kinet_shmem_team team, void *stream);
/* Strided put and get (kinet_shmem_iput, _iget) in stream order. */
int kinet_shmem_iput_on_stream(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			       size_t nelems, uint32_t size, int pe, void *stream);
int kinet_shmem_iget_on_stream(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			       size_t nelems, uint32_t size, int pe, void *stream);

/* ---- init with a unique id ------------------------------------------------------------------- */

/* A job's unique id: rank 0's bootstrap address (this host's address and a
 * free TCP port) and a random job secret, opaque to the caller. One process,
 * the one that will be rank 0, makes it (kinet_shmem_uniqueid); the program
 * hands it to the others (e.g. MPI_Bcast), and each calls
 * kinet_shmem_init_uniqueid with its rank and the job's size: the TCP
 * bootstrap of kinet/boot.h (KINET_BOOT_TIMEOUT_MS bounds the join). The
 * address is this host's first IPv4 address of an interface that is up
 * (not loopback), else 127.0.0.1; KINET_BOOT_ADDR's host, when set, wins
 * (its port is ignored). */
#define KINET_SHMEM_UNIQUEID_LEN 124
int kinet_shmem_uniqueid(unsigned char id[KINET_SHMEM_UNIQUEID_LEN]);
/* kinet_shmem_init with the job of id (collective over the nranks
 * processes). -EINVAL: not an id of kinet_shmem_uniqueid, rank outside
 * [0, nranks), attr->boot set, or rank 0 that is not the process that made
 * the id (it must listen where the id points); else what kinet_boot_init
 * and kinet_shmem_init return. The bootstrap is the layer's (closed by
 * kinet_shmem_finalize). */
int kinet_shmem_init_uniqueid(const struct kinet_shmem_attr *attr,
			      const unsigned char id[KINET_SHMEM_UNIQUEID_LEN], int rank,
			      int nranks);

/* ---- what kinet-shmem does not do, said clearly -------------------------------------------- */

/* NVSHMEM's nvshmemx_buffer_register_symmetric maps a buffer the program
 * allocated into every PE's symmetric space. kinet's heaps are allocated
 * whole at init and not extended: this returns NULL, with a line that says
 * so and -ENOTSUP kept as the PE's error (allocate with kinet_shmem_malloc
 * instead); unregister returns -ENOTSUP. */
void *kinet_shmem_buffer_register_symmetric(void *addr, size_t len, int flags);
int kinet_shmem_buffer_unregister_symmetric(void *addr, size_t len);

/* A CUDA module loaded with the driver API (cuModuleLoad*: a CUmodule)
 * whose code includes kinet/shmem_device.h: its copy of the state pointer is
 * set now and at every later init and finalize (as the modules of
 * kinet_shmem_register_module). -EINVAL: NULL, or a module without kinet's
 * device code; -ENOTSUP: not the CUDA executor (a host-executor program has
 * no CUDA modules), -ENOSPC: 64 modules at once. kinet_shmem_cumodule_finalize
 * sets it to NULL and forgets the module (before it is unloaded). */
int kinet_shmem_cumodule_init(void *module);
int kinet_shmem_cumodule_finalize(void *module);
/* ---- collectives from the host ------------------------------------------------------------ */

/* A collective of kinet/shmem_device.h (kn_shmem_coll: coll is enum
 * kn_shmem_coll, op enum kn_shmem_red_op, dtype enum kn_shmem_dtype; root,
 * op unused where they do not apply) started by the host thread, which
 * every member PE's host calls with the same arguments. On stream: the
 * CUDA executor enqueues it (a kernel of one thread runs kn_shmem_coll; its
 * error is kept as the PE's first error), the host executor runs it at once
 * on the calling thread. kinet_shmem_coll waits for it: the CUDA executor
 * runs it on the layer's own stream, as the host-initiated operations
 * above. Returns what kn_shmem_coll returns (0, -EINVAL, -ENOSPC,
 * -ETIMEDOUT, -EIO), what launching the kernel returns, -ENOSYS when the
 * library was built without CUDA and the executor is CUDA, -EINVAL when
 * not initialised; an error is logged and kept as the PE's first error. */
int kinet_shmem_coll(int coll, int team, void *dest, const void *src, size_t nelems, int root,
		     int op, int dtype);
int kinet_shmem_coll_on_stream(int coll, int team, void *dest, const void *src, size_t nelems,
			       int root, int op, int dtype, void *stream);
/* The strided alltoall (kn_shmem_alltoalls: es-byte elements, strides dst
 * and sst in elements, at least 1) started by the host thread, waited for
 * as kinet_shmem_coll; its returns and errors are the same. */
int kinet_shmem_alltoalls(int team, void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			  size_t nelems, uint32_t es);

#ifdef __cplusplus
}
#endif
#endif /* KINET_SHMEM_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rma.c - device operations that host code asks for: host-initiated
 * (kinet_shmem_put, _get, _p, _g, _atomic, _quiet, _fence) and
 * stream-ordered (kinet_shmem_*_on_stream). The host executor runs them on
 * the calling thread, now; the CUDA executor as a kernel of one thread
 * (stream.cu), on the layer's own stream and waited for (host-initiated),
 * or on the caller's stream (stream-ordered).
 */
#include <errno.h>
#include <string.h>
#include "shmem/shmem_int.h"
#include "shmem/op.h"

static const char *op_name(int kind)
{
	static const char *const n[] = {"?",        "put",        "get",       "p",
					"g",        "atomic",     "quiet",     "fence",
					"put_signal", "signal_op", "signal_wait_until", "barrier",
					"team_sync", "wait_until", "collective", "iput", "iget",
					"alltoalls"};
	return kind > 0 && kind <= SHM_OP_ALLTOALLS ? n[kind] : n[0];
}

/* The local buffer of a host-initiated NIC or load/store operation run by
 * a GPU thread must be one the GPU reaches. */
static int check_local(const struct shm_op *op)
{
	const void *p = NULL;
	uint64_t len = op->len;
	if (op->kind == SHM_OP_PUT || op->kind == SHM_OP_PUT_SIGNAL)
		p = op->src;
	else if (op->kind == SHM_OP_GET)
		p = op->dest;
	else if (op->kind == SHM_OP_IPUT || op->kind == SHM_OP_IGET) {
		/* the local strided array's span (a bad one: the device call refuses it) */
		int64_t lo;
		int get = op->kind == SHM_OP_IGET;
		if (knx_sh_span((ptrdiff_t)(get ? op->dst : op->sst), (size_t)op->len, op->size,
				&lo, &len))
			return 0;
		p = (const uint8_t *)(get ? (const void *)op->dest : op->src) + lo;
	}
	if (!p || !len)
		return 0;
	int r = shm_cuda_reachable(p, len);
	if (r < 0)
		return r;
	if (!r) {
		SHLOG_ERR("%s from the host: the local buffer %p (%llu bytes) is pageable host "
			  "memory, which the GPU running the operation cannot reach: use a heap "
			  "(kinet_shmem_malloc), GPU memory, or host memory pinned "
			  "(cudaMallocHost) or registered (cudaHostRegister)",
			  op_name(op->kind), p, (unsigned long long)len);
		return -EINVAL;
	}
	return 0;
}

/* Kept as the PE's first error too (device code keeps its own errors). */
static int keep(int rc)
{
	if (rc && shm_g.up && !shm_g.host_error)
		shm_g.host_error = rc;
	return rc;
}

/* Host-initiated: done (or, nbi, posted) when this returns. */
static int run_now(const struct shm_op *op, uint64_t *out)
{
	uint64_t v = 0;
	if (!shm_g.up) {
		SHLOG_ERR("%s from the host: the layer is not initialised", op_name(op->kind));
		return -EINVAL;
	}
	int rc;
	if (shm_g.exec == KINET_SHMEM_EXEC_HOST) {
		rc = shm_op_run(op, &v);
	} else {
		rc = check_local(op);
		if (!rc)
			rc = shm_cuda_op(op, NULL, 1, 1, &v);
	}
	if (out)
		*out = v;
	return keep(rc);
}

/* Stream-ordered: enqueued on stream (CUDA), or done now (host executor). */
static int run_on(const struct shm_op *op, void *stream, int sync, uint64_t *out)
{
	uint64_t v = 0;
	if (!shm_g.up) {
		SHLOG_ERR("%s_on_stream: the layer is not initialised", op_name(op->kind));
		return -EINVAL;
	}
	int rc = shm_g.exec == KINET_SHMEM_EXEC_HOST ? shm_op_run(op, &v)
						     : shm_cuda_op(op, stream, 0, sync, &v);
	if (out)
		*out = v;
	return keep(rc);
}

/* ---- host-initiated ---------------------------------------------------------------------- */

static int rma(int kind, void *dest, const void *src, size_t len, int pe, int nbi)
{
	struct shm_op op = {.kind = kind, .pe = pe, .nbi = nbi, .dest = dest, .src = src,
			    .len = len};
	return run_now(&op, NULL);
}

int kinet_shmem_put(void *dest, const void *src, size_t len, int pe)
{
	return rma(SHM_OP_PUT, dest, src, len, pe, 0);
}

int kinet_shmem_put_nbi(void *dest, const void *src, size_t len, int pe)
{
	return rma(SHM_OP_PUT, dest, src, len, pe, 1);
}

int kinet_shmem_get(void *dest, const void *src, size_t len, int pe)
{
	return rma(SHM_OP_GET, dest, src, len, pe, 0);
}

int kinet_shmem_get_nbi(void *dest, const void *src, size_t len, int pe)
{
	return rma(SHM_OP_GET, dest, src, len, pe, 1);
}

int kinet_shmem_p(void *dest, uint64_t value, uint32_t size, int pe)
{
	struct shm_op op = {.kind = SHM_OP_P, .pe = pe, .size = size, .dest = dest, .value = value};
	return run_now(&op, NULL);
}

int kinet_shmem_g(const void *src, uint32_t size, int pe, uint64_t *out)
{
	struct shm_op op = {.kind = SHM_OP_G, .pe = pe, .size = size, .src = src};
	return run_now(&op, out);
}

int kinet_shmem_atomic(void *dest, int amo, uint32_t size, uint64_t value, uint64_t compare,
		       int pe, uint64_t *old)
{
	struct shm_op op = {.kind = SHM_OP_ATOMIC, .pe = pe, .amo = amo, .size = size,
			    .dest = dest, .value = value, .compare = compare};
	return run_now(&op, old);
}

int kinet_shmem_quiet(void)
{
	struct shm_op op = {.kind = SHM_OP_QUIET};
	return run_now(&op, NULL);
}

int kinet_shmem_fence(void)
{
	struct shm_op op = {.kind = SHM_OP_FENCE};
	return run_now(&op, NULL);
}

int kinet_shmem_barrier(kinet_shmem_team team)
{
	struct shm_op op = {.kind = SHM_OP_BARRIER, .team = team};
	return run_now(&op, NULL);
}

int kinet_shmem_team_sync(kinet_shmem_team team)
{
	struct shm_op op = {.kind = SHM_OP_TEAM_SYNC, .team = team};
	return run_now(&op, NULL);
}

/* Strided put and get: nelems elements of size bytes (1, 2, 4, 8, 16). A
 * refused one says why (device code cannot log). */
static int istride(int kind, void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
		   size_t nelems, uint32_t size, int pe, void *stream, int on_stream)
{
	struct shm_op op = {.kind = kind, .pe = pe, .size = size, .dest = dest, .src = src,
			    .len = nelems, .dst = dst, .sst = sst};
	int64_t lo;
	uint64_t len;
	if (shm_g.up && (knx_sh_span(dst, nelems, size, &lo, &len) ||
			 knx_sh_span(sst, nelems, size, &lo, &len))) {
		SHLOG_ERR("%s%s of %zu elements of %u bytes, strides %td (dest) and %td (source): "
			  "%s", op_name(kind), on_stream ? "_on_stream" : "", nelems, size, dst,
			  sst, size != 1 && size != 2 && size != 4 && size != 8 && size != 16
				  ? "the element size must be 1, 2, 4, 8 or 16 bytes"
				  : "the strided span overflows");
		return keep(-EINVAL);
	}
	return on_stream ? run_on(&op, stream, 0, NULL) : run_now(&op, NULL);
}

int kinet_shmem_iput(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
		     uint32_t size, int pe)
{
	return istride(SHM_OP_IPUT, dest, src, dst, sst, nelems, size, pe, NULL, 0);
}

int kinet_shmem_iget(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
		     uint32_t size, int pe)
{
	return istride(SHM_OP_IGET, dest, src, dst, sst, nelems, size, pe, NULL, 0);
}

/* ---- stream-ordered -------------------------------------------------------------------------- */

int kinet_shmem_iput_on_stream(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			       size_t nelems, uint32_t size, int pe, void *stream)
{
	return istride(SHM_OP_IPUT, dest, src, dst, sst, nelems, size, pe, stream, 1);
}

int kinet_shmem_iget_on_stream(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			       size_t nelems, uint32_t size, int pe, void *stream)
{
	return istride(SHM_OP_IGET, dest, src, dst, sst, nelems, size, pe, stream, 1);
}

int kinet_shmem_put_on_stream(void *dest, const void *src, size_t len, int pe, int nbi,
			      void *stream)
{
	struct shm_op op = {.kind = SHM_OP_PUT, .pe = pe, .nbi = !!nbi, .dest = dest, .src = src,
			    .len = len};
	return run_on(&op, stream, 0, NULL);
}

int kinet_shmem_get_on_stream(void *dest, const void *src, size_t len, int pe, int nbi,
			      void *stream)
{
	struct shm_op op = {.kind = SHM_OP_GET, .pe = pe, .nbi = !!nbi, .dest = dest, .src = src,
			    .len = len};
	return run_on(&op, stream, 0, NULL);
}

int kinet_shmem_p_on_stream(void *dest, uint64_t value, uint32_t size, int pe, void *stream)
{
	struct shm_op op = {.kind = SHM_OP_P, .pe = pe, .size = size, .dest = dest, .value = value};
	return run_on(&op, stream, 0, NULL);
}

int kinet_shmem_g_on_stream(const void *src, uint32_t size, int pe, uint64_t *out, void *stream)
{
	struct shm_op op = {.kind = SHM_OP_G, .pe = pe, .size = size, .src = src};
	return run_on(&op, stream, 1, out);
}

int kinet_shmem_put_signal_on_stream(void *dest, const void *src, size_t len, uint64_t *sig_addr,
				     uint64_t signal, int sig_op, int pe, int nbi, void *stream)
{
	struct shm_op op = {.kind = SHM_OP_PUT_SIGNAL, .pe = pe, .nbi = !!nbi, .sig_op = sig_op,
			    .dest = dest, .src = src, .len = len, .sig = sig_addr, .value = signal};
	return run_on(&op, stream, 0, NULL);
}

int kinet_shmem_signal_op_on_stream(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe,
				    void *stream)
{
	struct shm_op op = {.kind = SHM_OP_SIGNAL_OP, .pe = pe, .sig_op = sig_op, .sig = sig_addr,
			    .value = signal};
	return run_on(&op, stream, 0, NULL);
}

int kinet_shmem_signal_wait_until_on_stream(uint64_t *sig_addr, int cmp, uint64_t value,
					    void *stream)
{
	struct shm_op op = {.kind = SHM_OP_SIGNAL_WAIT, .cmp = cmp, .sig = sig_addr, .value = value};
	return run_on(&op, stream, 0, NULL);
}

int kinet_shmem_wait_until_on_stream(void *ivar, int cmp, uint64_t value, uint32_t size, int sgn,
				     void *stream)
{
	struct shm_op op = {.kind = SHM_OP_WAIT, .cmp = cmp, .amo = !!sgn, .size = size,
			    .dest = ivar, .value = value};
	return run_on(&op, stream, 0, NULL);
}

int kinet_shmem_barrier_on_stream(kinet_shmem_team team, void *stream)
{
	struct shm_op op = {.kind = SHM_OP_BARRIER, .team = team};
	return run_on(&op, stream, 0, NULL);
}

int kinet_shmem_team_sync_on_stream(kinet_shmem_team team, void *stream)
{
	struct shm_op op = {.kind = SHM_OP_TEAM_SYNC, .team = team};
	return run_on(&op, stream, 0, NULL);
}

/* The three older stream calls (host.c) go the same way. */
int shm_stream_op(void *stream, int op)
{
	struct shm_op o = {.kind = op == 2 ? SHM_OP_QUIET : op == 1 ? SHM_OP_TEAM_SYNC
								      : SHM_OP_BARRIER,
			   .team = KINET_SHMEM_TEAM_WORLD};
	return run_on(&o, stream, 0, NULL);
}

/* ---- collectives ---------------------------------------------------------------------------- */

/* A refused or failed collective says so (device code cannot log). */
static int coll_said(const struct shm_op *o, const char *form, int rc)
{
	static const char *const n[] = {"broadcast", "fcollect", "alltoall", "reduce",
					"reducescatter"};
	if (rc && shm_g.up)
		SHLOG_ERR("%s%s on team %d (%llu elements of type %d, root %d, op %d): %s%s",
			  o->coll >= 0 && o->coll <= 4 ? n[o->coll] : "collective", form, o->team,
			  (unsigned long long)o->len, o->dtype, o->root, o->red_op, kinet_strerror(rc),
			  rc == -EINVAL ? " (a bad team, root, operator or type, a buffer outside "
					  "the heaps or overlapping another, or a size that overflows)"
					: "");
	return rc;
}

/* kn_shmem_coll from the host: waited for (the CUDA executor: on the
 * layer's own stream), or enqueued on stream. Its buffers are symmetric
 * (heaps), which the GPU reaches. */
int kinet_shmem_coll(int coll, int team, void *dest, const void *src, size_t nelems, int root,
		     int op, int dtype)
{
	struct shm_op o = {.kind = SHM_OP_COLL, .team = team, .dest = dest, .src = src,
			   .len = nelems, .coll = coll, .root = root, .red_op = op, .dtype = dtype};
	return coll_said(&o, "", run_now(&o, NULL));
}

int kinet_shmem_coll_on_stream(int coll, int team, void *dest, const void *src, size_t nelems,
			       int root, int op, int dtype, void *stream)
{
	struct shm_op o = {.kind = SHM_OP_COLL, .team = team, .dest = dest, .src = src,
			   .len = nelems, .coll = coll, .root = root, .red_op = op, .dtype = dtype};
	return coll_said(&o, "_on_stream", run_on(&o, stream, 0, NULL));
}

/* kn_shmem_alltoalls from the host, waited for as kinet_shmem_coll. */
int kinet_shmem_alltoalls(int team, void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			  size_t nelems, uint32_t es)
{
	struct shm_op o = {.kind = SHM_OP_ALLTOALLS, .team = team, .dest = dest, .src = src,
			   .len = nelems, .size = es, .dst = dst, .sst = sst};
	int rc = run_now(&o, NULL);
	if (rc && shm_g.up)
		SHLOG_ERR("alltoalls on team %d (%zu elements of %u bytes, strides dest %td, "
			  "source %td): %s%s",
			  team, nelems, es, dst, sst, kinet_strerror(rc),
			  rc == -EINVAL ? " (a bad team or element size, a stride below 1, a "
					  "buffer outside the heaps or overlapping the other, or a "
					  "size that overflows)"
					: "");
	return rc;
}

/* ---- symmetric registration of the program's buffers: not done --------------------------- */

void *kinet_shmem_buffer_register_symmetric(void *addr, size_t len, int flags)
{
	(void)flags;
	SHLOG_ERR("buffer_register_symmetric(%p, %zu bytes): not supported: kinet's symmetric "
		  "heaps are allocated whole at init and cannot take in a buffer of the program; "
		  "allocate it with nvshmem_malloc (kinet_shmem_malloc) instead", addr, len);
	keep(-ENOTSUP);
	return NULL;
}

int kinet_shmem_buffer_unregister_symmetric(void *addr, size_t len)
{
	SHLOG_ERR("buffer_unregister_symmetric(%p, %zu bytes): not supported (nothing is ever "
		  "registered symmetrically)", addr, len);
	return keep(-ENOTSUP);
}

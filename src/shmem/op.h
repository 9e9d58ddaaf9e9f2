/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * op.h - one device operation that host code asks for (host-initiated and
 * stream-ordered calls, kinet_shmem_*_on_stream): rma.c fills it, runs it
 * on the calling thread with the host executor, or hands it to stream.cu,
 * whose one-thread kernel runs it with the CUDA executor.
 */
#ifndef KINET_SHMEM_OP_H
#define KINET_SHMEM_OP_H

#include <stdint.h>
#include <kinet/shmem_device.h>

#ifdef __cplusplus
extern "C" {
#endif

enum shm_op_kind {
	SHM_OP_PUT = 1,
	SHM_OP_GET,
	SHM_OP_P,
	SHM_OP_G,
	SHM_OP_ATOMIC,
	SHM_OP_QUIET,
	SHM_OP_FENCE,
	SHM_OP_PUT_SIGNAL,
	SHM_OP_SIGNAL_OP,
	SHM_OP_SIGNAL_WAIT,
	SHM_OP_BARRIER,   /* team: quiet, then sync */
	SHM_OP_TEAM_SYNC, /* team */
	SHM_OP_WAIT,      /* a local word of size bytes, signed (amo 1) or not */
	SHM_OP_COLL,      /* kn_shmem_coll: coll, team, dest, src, len elements, root,
			     red_op, dtype */
	SHM_OP_IPUT,      /* strided: len elements of size bytes, strides dst, sst */
	SHM_OP_IGET,
	SHM_OP_ALLTOALLS, /* kn_shmem_alltoalls: team, dest, src, len elements of
			     size bytes, strides dst, sst */
};

struct shm_op {
	int32_t kind;   /* enum shm_op_kind */
	int32_t pe;
	int32_t nbi;
	int32_t sig_op; /* put_signal, signal_op */
	int32_t cmp;    /* signal_wait */
	int32_t amo;    /* atomic: enum kn_amo */
	int32_t team;
	uint32_t size;  /* p, g, atomic */
	void *dest;
	const void *src;
	uint64_t len;
	uint64_t *sig;
	uint64_t value;   /* p, atomic, signal value, wait value */
	uint64_t compare; /* atomic */
	int32_t coll;     /* collective: enum kn_shmem_coll */
	int32_t root;     /* broadcast's root (team index) */
	int32_t red_op;   /* enum kn_shmem_red_op */
	int32_t dtype;    /* enum kn_shmem_dtype */
	int64_t dst;      /* iput, iget: the strides of dest and src, in elements */
	int64_t sst;
};

/* stream.cu: a kernel of one thread runs op on stream; sync: wait for it
 * and return its result (and *out); else return once it is enqueued.
 * own: the layer's own stream (host-initiated calls), stream ignored. */
int shm_cuda_op(const struct shm_op *op, void *stream, int own, int sync, uint64_t *out);
/* 1 when the GPU can address [p, p+len) (device, managed, pinned or
 * registered host memory), 0 for pageable memory, negative on error. */
int shm_cuda_reachable(const void *p, uint64_t len);

#ifdef __cplusplus
}
#endif

/* Runs op as device code on the calling thread (a CUDA thread, or a host
 * thread with the host executor): its result, *out the fetched value (g,
 * atomic). */
KN_INLINE int shm_op_run(const struct shm_op *op, uint64_t *out)
{
	switch (op->kind) {
	case SHM_OP_PUT:
		return op->nbi ? kn_shmem_put_nbi(op->dest, op->src, op->len, op->pe)
			       : kn_shmem_put(op->dest, op->src, op->len, op->pe);
	case SHM_OP_GET:
		return op->nbi ? kn_shmem_get_nbi(op->dest, op->src, op->len, op->pe)
			       : kn_shmem_get(op->dest, op->src, op->len, op->pe);
	case SHM_OP_P:
		return kn_shmem_p(op->dest, op->value, op->size, op->pe);
	case SHM_OP_G:
		return kn_shmem_g(op->src, op->size, op->pe, out);
	case SHM_OP_ATOMIC:
		return kn_shmem_atomic(op->dest, op->amo, op->size, op->value, op->compare, op->pe,
				       out);
	case SHM_OP_QUIET:
		return kn_shmem_quiet();
	case SHM_OP_FENCE:
		return kn_shmem_fence();
	case SHM_OP_PUT_SIGNAL:
		return op->nbi ? kn_shmem_put_signal_nbi(op->dest, op->src, op->len, op->sig,
							 op->value, op->sig_op, op->pe)
			       : kn_shmem_put_signal(op->dest, op->src, op->len, op->sig, op->value,
						     op->sig_op, op->pe);
	case SHM_OP_SIGNAL_OP:
		return kn_shmem_signal_op(op->sig, op->value, op->sig_op, op->pe);
	case SHM_OP_SIGNAL_WAIT:
		return kn_shmem_signal_wait_until(op->sig, op->cmp, op->value, out);
	case SHM_OP_BARRIER:
		return kn_shmem_barrier(op->team);
	case SHM_OP_TEAM_SYNC:
		return kn_shmem_team_sync(op->team);
	case SHM_OP_WAIT:
		return kn_shmem_wait_until(op->dest, op->cmp, op->value, op->size, op->amo);
	case SHM_OP_COLL:
		return kn_shmem_coll(op->coll, op->team, op->dest, op->src, op->len, op->root,
				     op->red_op, op->dtype);
	case SHM_OP_IPUT:
		return kn_shmem_iput(op->dest, op->src, (ptrdiff_t)op->dst, (ptrdiff_t)op->sst,
				     (size_t)op->len, op->size, op->pe);
	case SHM_OP_IGET:
		return kn_shmem_iget(op->dest, op->src, (ptrdiff_t)op->dst, (ptrdiff_t)op->sst,
				     (size_t)op->len, op->size, op->pe);
	case SHM_OP_ALLTOALLS:
		return kn_shmem_alltoalls(op->team, op->dest, op->src, (ptrdiff_t)op->dst,
					  (ptrdiff_t)op->sst, (size_t)op->len, op->size);
	default:
		return -EINVAL;
	}
}
#endif

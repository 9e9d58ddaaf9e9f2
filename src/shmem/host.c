/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host.c - what device code needs from the host side: the setters of the
 * CUDA translation units' state pointers, and the host executor's launches
 * (grid x block CPU threads at once, each with its CUDA coordinates, and
 * barriers per warp, per warpgroup and per block for the group forms).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "shmem/shmem_int.h"

/* ---- CUDA modules ------------------------------------------------------------------- */

#define MAX_MODULES 256
static pthread_mutex_t mod_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*mod_set[MAX_MODULES])(const void *);
static int mod_n;

int kinet_shmem_register_module(void (*set)(const void *state))
{
	if (!set)
		return -EINVAL;
	pthread_mutex_lock(&mod_lock);
	if (mod_n == MAX_MODULES) {
		pthread_mutex_unlock(&mod_lock);
		return -ENOSPC;
	}
	mod_set[mod_n++] = set;
	pthread_mutex_unlock(&mod_lock);
	/* a module loaded after init learns the state at once */
	if (shm_g.up && shm_g.exec == KINET_SHMEM_EXEC_CUDA)
		set(shm_g.dev);
	return 0;
}

void shm_modules_set(const void *state)
{
	if (shm_g.exec != KINET_SHMEM_EXEC_CUDA)
		return;
	pthread_mutex_lock(&mod_lock);
	for (int i = 0; i < mod_n; i++)
		mod_set[i](state);
	pthread_mutex_unlock(&mod_lock);
}

/* ---- the host executor's launches ----------------------------------------------------- */

#define LAUNCH_MAX_THREADS 4096u /* CPU threads of one launch */

struct launch {
	void (*fn)(void *);
	void *arg;
	struct kinet_shmem_dim3 grid, block;
	unsigned nthr;       /* threads per block */
	pthread_barrier_t *block_bar; /* one per block */
	pthread_barrier_t *warp_bar;  /* one per warp of every block */
	pthread_barrier_t *wg_bar;    /* one per warpgroup (4 warps) of every block */
	int *block_val, *warp_val, *wg_val; /* broadcast words */
	unsigned warps;      /* warps per block */
	unsigned wgs;        /* warpgroups per block */
};

struct self {
	struct kinet_shmem_host_thread t;
	const struct launch *l;
	unsigned block, tid; /* linear block and thread-in-block */
	int qp_index;
};

static __thread struct self me_tls = {{{0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 0}, NULL, 0, 0,
				       -1};
static int qp_next;

static struct kinet_shmem_dim3 unlin(unsigned i, struct kinet_shmem_dim3 d)
{
	struct kinet_shmem_dim3 r = {i % d.x, (i / d.x) % d.y, i / (d.x * d.y)};
	return r;
}

static int launch_thread(int tid, int nthreads, void *arg)
{
	(void)nthreads;
	const struct launch *l = arg;
	struct self saved = me_tls;
	me_tls.l = l;
	me_tls.block = (unsigned)tid / l->nthr;
	me_tls.tid = (unsigned)tid % l->nthr;
	me_tls.qp_index = (int)me_tls.block;
	me_tls.t.block_idx = unlin(me_tls.block, l->grid);
	me_tls.t.thread_idx = unlin(me_tls.tid, l->block);
	me_tls.t.block_dim = l->block;
	me_tls.t.grid_dim = l->grid;
	me_tls.t.in_launch = 1;
	l->fn(l->arg);
	me_tls = saved; /* thread 0 is the caller's own */
	return 0;
}

int kinet_shmem_host_launch(void (*fn)(void *), void *arg, struct kinet_shmem_dim3 grid,
			    struct kinet_shmem_dim3 block)
{
	if (!fn || !grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) {
		SHLOG_ERR("kinet_shmem_host_launch: %s",
			  fn ? "a grid or block dimension of 0" : "no function");
		return -EINVAL;
	}
	/* grid x block, each factor checked against the bound before the next
	 * multiplication: nothing wraps (six 32-bit factors reach 2^192) */
	const unsigned dim[6] = {block.x, block.y, block.z, grid.x, grid.y, grid.z};
	uint64_t total = 1, nthr = 1;
	for (int i = 0; i < 6; i++) {
		if (dim[i] > LAUNCH_MAX_THREADS || total * dim[i] > LAUNCH_MAX_THREADS) {
			SHLOG_ERR("kinet_shmem_host_launch: grid %ux%ux%u x block %ux%ux%u is more "
				  "than %u threads",
				  grid.x, grid.y, grid.z, block.x, block.y, block.z,
				  LAUNCH_MAX_THREADS);
			return -EINVAL;
		}
		total *= dim[i];
		if (i == 2)
			nthr = total;
	}
	uint64_t nblk = total / nthr;
	struct launch l = {.fn = fn, .arg = arg, .grid = grid, .block = block,
			   .nthr = (unsigned)nthr, .warps = (unsigned)((nthr + 31) / 32),
			   .wgs = (unsigned)((nthr + 127) / 128)};
	l.block_bar = calloc(nblk, sizeof(*l.block_bar));
	l.warp_bar = calloc(nblk * l.warps, sizeof(*l.warp_bar));
	l.wg_bar = calloc(nblk * l.wgs, sizeof(*l.wg_bar));
	l.block_val = calloc(nblk, sizeof(int));
	l.warp_val = calloc(nblk * l.warps, sizeof(int));
	l.wg_val = calloc(nblk * l.wgs, sizeof(int));
	int rc = l.block_bar && l.warp_bar && l.wg_bar && l.block_val && l.warp_val && l.wg_val
			 ? 0
			 : -ENOMEM;
	uint64_t inited = rc ? 0 : nblk;
	for (uint64_t b = 0; b < inited; b++) {
		pthread_barrier_init(&l.block_bar[b], NULL, (unsigned)nthr);
		for (unsigned w = 0; w < l.warps; w++) {
			unsigned in = nthr - w * 32u < 32u ? (unsigned)nthr - w * 32u : 32u;
			pthread_barrier_init(&l.warp_bar[b * l.warps + w], NULL, in);
		}
		for (unsigned g = 0; g < l.wgs; g++) {
			unsigned in = nthr - g * 128u < 128u ? (unsigned)nthr - g * 128u : 128u;
			pthread_barrier_init(&l.wg_bar[b * l.wgs + g], NULL, in);
		}
	}
	if (!rc)
		rc = kinet_host_exec((int)(nblk * nthr), launch_thread, &l);
	for (uint64_t b = 0; b < inited; b++) {
		pthread_barrier_destroy(&l.block_bar[b]);
		for (unsigned w = 0; w < l.warps; w++)
			pthread_barrier_destroy(&l.warp_bar[b * l.warps + w]);
		for (unsigned g = 0; g < l.wgs; g++)
			pthread_barrier_destroy(&l.wg_bar[b * l.wgs + g]);
	}
	free(l.block_bar);
	free(l.warp_bar);
	free(l.wg_bar);
	free(l.block_val);
	free(l.warp_val);
	free(l.wg_val);
	return rc;
}

const struct kinet_shmem_host_thread *kinet_shmem_host_self(void)
{
	return &me_tls.t;
}

static pthread_barrier_t *group_bar(int scope, int **val)
{
	const struct launch *l = me_tls.l;
	if (!l)
		return NULL;
	if (scope == 2) {
		*val = &l->block_val[me_tls.block];
		return &l->block_bar[me_tls.block];
	}
	if (scope == 3) {
		unsigned g = me_tls.block * l->wgs + me_tls.tid / 128u;
		*val = &l->wg_val[g];
		return &l->wg_bar[g];
	}
	unsigned w = me_tls.block * l->warps + me_tls.tid / 32u;
	*val = &l->warp_val[w];
	return &l->warp_bar[w];
}

void kinet_shmem_host_group_sync(int scope)
{
	int *v;
	pthread_barrier_t *b = group_bar(scope, &v);
	if (b)
		pthread_barrier_wait(b);
}

int kinet_shmem_host_group_rank(int scope)
{
	if (!me_tls.l)
		return 0;
	return scope == 2 ? (int)me_tls.tid
	       : scope == 3 ? (int)(me_tls.tid % 128u)
			    : (int)(me_tls.tid % 32u);
}

int kinet_shmem_host_group_size(int scope)
{
	const struct launch *l = me_tls.l;
	if (!l)
		return 1;
	if (scope == 2)
		return (int)l->nthr;
	unsigned gs = scope == 3 ? 128u : 32u;
	unsigned w = me_tls.tid / gs, rest = l->nthr - w * gs;
	return rest < gs ? (int)rest : (int)gs;
}

int kinet_shmem_host_group_bcast(int scope, int value)
{
	int *v;
	pthread_barrier_t *b = group_bar(scope, &v);
	if (!b)
		return value;
	if (kinet_shmem_host_group_rank(scope) == 0)
		__atomic_store_n(v, value, __ATOMIC_RELEASE);
	pthread_barrier_wait(b);
	int r = __atomic_load_n(v, __ATOMIC_ACQUIRE);
	pthread_barrier_wait(b); /* read before the next broadcast writes */
	return r;
}

int kinet_shmem_host_qp_index(void)
{
	if (me_tls.qp_index < 0)
		me_tls.qp_index = __atomic_fetch_add(&qp_next, 1, __ATOMIC_RELAXED) & 0x3fffffff;
	return me_tls.qp_index;
}

/* ---- device work on a stream ----------------------------------------------------------- */

int kinet_shmem_barrier_all_on_stream(void *stream)
{
	return shm_stream_op(stream, 0);
}

int kinet_shmem_sync_all_on_stream(void *stream)
{
	return shm_stream_op(stream, 1);
}

int kinet_shmem_quiet_on_stream(void *stream)
{
	return shm_stream_op(stream, 2);
}

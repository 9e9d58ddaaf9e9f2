/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pmix.c - libkinet_pmix.so, the PMIx transport of the bootstrap: a module
 * that libkinet loads at run time (mpi_module.h, mpi_load.c) when a process
 * was started by a PMIx server (Slurm's srun --mpi=pmix, PRRTE's prterun,
 * Open MPI's mpirun) or KINET_BOOT_MODE=pmix asks for it, so that only those
 * processes map libpmix.
 *
 * Rank and size are the process's PMIx rank and its namespace's
 * PMIX_JOB_SIZE. An allgather is a put of this rank's bytes under a key of
 * its own (kinet.boot.<object>.<collective>), a commit, a fence that
 * collects the data, and a get of every rank's value; a barrier is a fence
 * without data. Fences are the non-blocking ones, waited for here with the
 * bootstrap's timeout, so that a rank that never arrives makes the call fail
 * with -ETIMEDOUT instead of hanging (the PMIX_TIMEOUT attribute is passed
 * too, for servers that honour it).
 *
 * Keys are unique per bootstrap object (numbered in the order the process
 * creates them: objects are created collectively, so every rank numbers them
 * alike) and per collective. PMIx_Init and PMIx_Finalize are counted by
 * PMIx itself, so an application (or an MPI) that uses PMIx too is not
 * disturbed.
 */
#include <pmix.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/internal.h"
#include "boot/mpi_module.h"

struct kboot_pmix {
	pmix_proc_t me;
	pmix_proc_t all; /* the namespace, rank wildcard */
	int size;
	unsigned id;  /* this object's number in the process */
	uint32_t seq; /* collectives done */
};

/* A non-blocking fence's outcome. It outlives a fence that timed out (the
 * server may still answer), so it is allocated and, then, leaked. */
struct fence_wait {
	pmix_info_t info[2]; /* kept until the server answers */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int done;
	pmix_status_t status;
};

static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned next_id;

static int pmix_fail(pmix_status_t st, const char *what)
{
	KLOG_ERR("boot: %s failed: %s", what, PMIx_Error_string(st));
	return st == PMIX_ERR_TIMEOUT ? -ETIMEDOUT : -EIO;
}

static int mod_init(int timeout_ms, void **h, int *rank, int *size)
{
	(void)timeout_ms; /* PMIx_Init has no bound of its own */
	struct kboot_pmix *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pmix_status_t st = PMIx_Init(&p->me, NULL, 0);
	if (st != PMIX_SUCCESS) {
		free(p);
		KLOG_ERR("boot: PMIx_Init failed: %s (was the process started by a PMIx "
			 "server: srun --mpi=pmix, prterun, mpirun?)", PMIx_Error_string(st));
		return -EIO;
	}
	PMIX_LOAD_PROCID(&p->all, p->me.nspace, PMIX_RANK_WILDCARD);
	pmix_value_t *v = NULL;
	st = PMIx_Get(&p->all, PMIX_JOB_SIZE, NULL, 0, &v);
	if (st != PMIX_SUCCESS || !v || v->type != PMIX_UINT32 || v->data.uint32 < 1 ||
	    v->data.uint32 > INT32_MAX || p->me.rank >= v->data.uint32) {
		KLOG_ERR("boot: PMIx gives no usable job size for namespace %s (%s)",
			 p->me.nspace, st != PMIX_SUCCESS ? PMIx_Error_string(st) : "bad value");
		if (v)
			PMIX_VALUE_RELEASE(v);
		PMIx_Finalize(NULL, 0);
		free(p);
		return -EIO;
	}
	p->size = (int)v->data.uint32;
	PMIX_VALUE_RELEASE(v);
	pthread_mutex_lock(&ids_lock);
	p->id = next_id++;
	pthread_mutex_unlock(&ids_lock);
	*rank = (int)p->me.rank;
	*size = p->size;
	*h = p;
	return 0;
}

static void fence_done(pmix_status_t status, void *cbdata)
{
	struct fence_wait *w = cbdata;
	pthread_mutex_lock(&w->lock);
	w->status = status;
	w->done = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
}

static void fence_free(struct fence_wait *w)
{
	PMIX_INFO_DESTRUCT(&w->info[0]);
	PMIX_INFO_DESTRUCT(&w->info[1]);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* A fence over the namespace (collecting the data put before it when
 * collect), bounded by timeout_ms. */
static int fence(struct kboot_pmix *p, int timeout_ms, bool collect, const char *what)
{
	struct fence_wait *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	bool yes = true;
	int secs = (timeout_ms + 999) / 1000;
	PMIX_INFO_CONSTRUCT(&w->info[0]);
	PMIX_INFO_CONSTRUCT(&w->info[1]);
	PMIX_INFO_LOAD(&w->info[0], PMIX_TIMEOUT, &secs, PMIX_INT);
	PMIX_INFO_LOAD(&w->info[1], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
	pmix_status_t st = PMIx_Fence_nb(&p->all, 1, w->info, collect ? 2 : 1, fence_done, w);
	if (st != PMIX_SUCCESS) {
		fence_free(w);
		return pmix_fail(st, what);
	}
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		if (pthread_cond_timedwait(&w->cv, &w->lock, &dl) == ETIMEDOUT)
			break;
	int done = w->done;
	pmix_status_t fst = w->status;
	pthread_mutex_unlock(&w->lock);
	if (!done) {
		/* the server may still call back: w stays (leaked) */
		KLOG_ERR("boot: PMIx %s did not complete within %d ms (a rank is missing)", what,
			 timeout_ms);
		return -ETIMEDOUT;
	}
	fence_free(w);
	return fst == PMIX_SUCCESS ? 0 : pmix_fail(fst, what);
}

static int mod_allgather(void *h, int timeout_ms, const void *mine, void *all, size_t len)
{
	struct kboot_pmix *p = h;
	char key[PMIX_MAX_KEYLEN + 1];
	snprintf(key, sizeof(key), "kinet.boot.%u.%u", p->id, p->seq++);
	/* this rank's value: its length (8 bytes, so that a rank passing
	 * another length fails cleanly), then its bytes */
	uint8_t *buf = malloc(8 + len);
	if (!buf)
		return -ENOMEM;
	uint64_t l = len;
	memcpy(buf, &l, 8);
	if (len)
		memcpy(buf + 8, mine, len);
	pmix_value_t val;
	PMIX_VALUE_CONSTRUCT(&val);
	val.type = PMIX_BYTE_OBJECT;
	val.data.bo.bytes = (char *)buf;
	val.data.bo.size = 8 + len;
	pmix_status_t st = PMIx_Put(PMIX_GLOBAL, key, &val);
	free(buf); /* PMIx_Put copies it */
	if (st != PMIX_SUCCESS)
		return pmix_fail(st, "PMIx_Put");
	st = PMIx_Commit();
	if (st != PMIX_SUCCESS)
		return pmix_fail(st, "PMIx_Commit");
	int rc = fence(p, timeout_ms, true, "allgather");
	if (rc)
		return rc;
	/* every rank's value, into a staging buffer first: `mine` may lie
	 * within `all` */
	uint8_t *out = len ? malloc(len * (size_t)p->size) : NULL;
	if (len && !out)
		return -ENOMEM;
	for (int r = 0; !rc && r < p->size; r++) {
		pmix_proc_t who;
		PMIX_LOAD_PROCID(&who, p->me.nspace, (pmix_rank_t)r);
		pmix_value_t *v = NULL;
		st = PMIx_Get(&who, key, NULL, 0, &v);
		if (st != PMIX_SUCCESS || !v || v->type != PMIX_BYTE_OBJECT ||
		    v->data.bo.size < 8) {
			KLOG_ERR("boot: allgather: no value from rank %d (%s)", r,
				 st != PMIX_SUCCESS ? PMIx_Error_string(st) : "malformed");
			rc = -EPROTO;
		} else {
			memcpy(&l, v->data.bo.bytes, 8);
			if (l != len || v->data.bo.size != 8 + len) {
				KLOG_ERR("boot: allgather: rank %d passed %llu bytes, rank %u %zu "
					 "(all ranks must pass the same length)", r,
					 (unsigned long long)l, p->me.rank, len);
				rc = -EPROTO;
			} else if (len) {
				memcpy(out + (size_t)r * len, v->data.bo.bytes + 8, len);
			}
		}
		if (v)
			PMIX_VALUE_RELEASE(v);
	}
	if (!rc && len)
		memcpy(all, out, len * (size_t)p->size);
	free(out);
	return rc;
}

static int mod_barrier(void *h, int timeout_ms)
{
	return fence(h, timeout_ms, false, "barrier");
}

static void mod_close(void *h, bool broken)
{
	struct kboot_pmix *p = h;
	if (!p)
		return;
	/* after a timed-out fence the server may still call back into PMIx:
	 * leave it initialised */
	if (!broken)
		PMIx_Finalize(NULL, 0);
	free(p);
}

static const struct kboot_mpi_ops mod_ops = {
	.abi = KBOOT_MPI_ABI,
	.init = mod_init,
	.allgather = mod_allgather,
	.barrier = mod_barrier,
	.close = mod_close,
};

/* The module's only exported symbol (KBOOT_PMIX_ENTRY). */
__attribute__((visibility("default"))) const struct kboot_mpi_ops *kinet_pmix_module_ops(void);
const struct kboot_mpi_ops *kinet_pmix_module_ops(void)
{
	return &mod_ops;
}

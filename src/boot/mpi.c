/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi.c - libkinet_mpi.so, the MPI transport of the bootstrap: a module that
 * libkinet loads at run time (mpi_module.h, mpi_load.c), so that only the
 * processes that use MPI map libmpi.
 *
 * Rank and size come from MPI_COMM_WORLD; the bootstrap works on a duplicate
 * of it with errors returned, not fatal. Collectives are the non-blocking
 * MPI-3 ones, tested until done or until the timeout, so that a rank that
 * never arrives makes the call fail with -ETIMEDOUT instead of hanging.
 * MPI is initialised here only when the application has not done it, and
 * then finalized by the last bootstrap object that uses it.
 */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/internal.h"
#include "boot/mpi_module.h"

struct kboot_mpi {
	MPI_Comm comm;
	int rank, size;
};

static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static int mpi_users; /* bootstrap objects on MPI */
static bool mpi_ours; /* MPI_Init was called here */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int mpi_fail(int code, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;
	if (MPI_Error_string(code, s, &n) != MPI_SUCCESS)
		snprintf(s, sizeof(s), "MPI error %d", code);
	KLOG_ERR("boot: %s failed: %s", what, s);
	return -EIO;
}

/* Tests a request until it completes or the timeout passes. */
static int mpi_wait(int timeout_ms, MPI_Request *req, const char *what)
{
	int64_t deadline = now_ms() + timeout_ms;
	long pause_ns = 1000;
	for (;;) {
		int done = 0;
		int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return mpi_fail(rc, what);
		if (done)
			return 0;
		if (now_ms() >= deadline) {
			KLOG_ERR("boot: MPI %s did not complete within %d ms (a rank is missing)",
				 what, timeout_ms);
			return -ETIMEDOUT;
		}
		struct timespec ts = {0, pause_ns};
		nanosleep(&ts, NULL);
		if (pause_ns < 1000000)
			pause_ns *= 2;
	}
}

static int mod_init(int timeout_ms, void **h, int *rank, int *size)
{
	int inited = 0, finalized = 0, rc = 0;
	(void)timeout_ms; /* MPI_Init has no bound of its own */
	pthread_mutex_lock(&mpi_lock);
	MPI_Initialized(&inited);
	MPI_Finalized(&finalized);
	if (finalized) {
		KLOG_ERR("boot: MPI was already finalized in this process; the MPI bootstrap "
			 "cannot start again (KINET_BOOT_MODE=tcp selects the TCP bootstrap)");
		rc = -EALREADY;
		goto out;
	}
	if (!inited) {
		int provided = 0;
		int e = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
		if (e != MPI_SUCCESS) {
			rc = mpi_fail(e, "MPI_Init_thread");
			goto out;
		}
		mpi_ours = true;
		KLOG_INFO("boot: MPI initialised by the bootstrap (thread level %d)", provided);
	}
	struct kboot_mpi *m = calloc(1, sizeof(*m));
	if (!m) {
		rc = -ENOMEM;
		goto out;
	}
	int e = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
	if (e != MPI_SUCCESS) {
		free(m);
		rc = mpi_fail(e, "MPI_Comm_dup");
		goto out;
	}
	MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
	MPI_Comm_rank(m->comm, &m->rank);
	MPI_Comm_size(m->comm, &m->size);
	*rank = m->rank;
	*size = m->size;
	*h = m;
	mpi_users++;
out:
	if (rc && mpi_ours && !mpi_users) {
		MPI_Finalize();
		mpi_ours = false;
	}
	pthread_mutex_unlock(&mpi_lock);
	return rc;
}

static int mod_allgather(void *h, int timeout_ms, const void *mine, void *all, size_t len)
{
	struct kboot_mpi *m = h;
	MPI_Request req;
	uint64_t mylen = len;
	uint64_t *lens = malloc(sizeof(uint64_t) * (size_t)m->size);
	if (!lens)
		return -ENOMEM;
	/* first the lengths, so that a rank with another one fails cleanly */
	int e = MPI_Iallgather(&mylen, 1, MPI_UINT64_T, lens, 1, MPI_UINT64_T, m->comm, &req);
	int rc = e != MPI_SUCCESS ? mpi_fail(e, "MPI_Iallgather")
				  : mpi_wait(timeout_ms, &req, "allgather");
	for (int r = 0; !rc && r < m->size; r++) {
		if (lens[r] != mylen) {
			KLOG_ERR("boot: allgather: rank %d passed %llu bytes, rank %d %zu (all "
				 "ranks must pass the same length)", r, (unsigned long long)lens[r],
				 m->rank, len);
			rc = -EPROTO;
		}
	}
	free(lens);
	if (rc || !len)
		return rc;
	if (len > (size_t)INT_MAX / (size_t)m->size) /* on every rank alike */
		return -E2BIG;
	/* MPI forbids overlapping send and receive buffers */
	const uint8_t *src = mine, *dst = all;
	void *tmp = NULL;
	if (src < dst + len * (size_t)m->size && dst < src + len) {
		tmp = malloc(len);
		if (!tmp)
			return -ENOMEM;
		memcpy(tmp, mine, len);
		mine = tmp;
	}
	e = MPI_Iallgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, m->comm, &req);
	rc = e != MPI_SUCCESS ? mpi_fail(e, "MPI_Iallgather")
			      : mpi_wait(timeout_ms, &req, "allgather");
	free(tmp);
	return rc;
}

static int mod_barrier(void *h, int timeout_ms)
{
	struct kboot_mpi *m = h;
	MPI_Request req;
	int e = MPI_Ibarrier(m->comm, &req);
	return e != MPI_SUCCESS ? mpi_fail(e, "MPI_Ibarrier")
				: mpi_wait(timeout_ms, &req, "barrier");
}

static void mod_close(void *h, bool broken)
{
	struct kboot_mpi *m = h;
	if (!m)
		return;
	pthread_mutex_lock(&mpi_lock);
	/* after a timed-out collective the communicator has a request pending
	 * forever: leave it (and MPI) alone rather than block in MPI */
	if (!broken)
		MPI_Comm_free(&m->comm);
	free(m);
	if (--mpi_users == 0 && mpi_ours) {
		if (!broken) {
			MPI_Finalize();
			KLOG_INFO("boot: MPI finalized by the bootstrap");
		}
		mpi_ours = false;
	}
	pthread_mutex_unlock(&mpi_lock);
}

static const struct kboot_mpi_ops mod_ops = {
	.abi = KBOOT_MPI_ABI,
	.init = mod_init,
	.allgather = mod_allgather,
	.barrier = mod_barrier,
	.close = mod_close,
};

/* The module's only exported symbol (KBOOT_MPI_ENTRY). */
__attribute__((visibility("default"))) const struct kboot_mpi_ops *kinet_mpi_module_ops(void);
const struct kboot_mpi_ops *kinet_mpi_module_ops(void)
{
	return &mod_ops;
}

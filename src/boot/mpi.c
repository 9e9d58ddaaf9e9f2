/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi.c - the MPI transport of the bootstrap (when the build has MPI).
 *
 * Rank and size come from MPI_COMM_WORLD; the bootstrap works on a duplicate
 * of it with errors returned, not fatal. Collectives are the non-blocking
 * MPI-3 ones, tested until done or until the timeout, so that a rank that
 * never arrives makes the call fail with -ETIMEDOUT instead of hanging.
 * MPI is initialised here only when the application has not done it, and
 * then finalized by the last bootstrap object that uses it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "boot/boot_int.h"

#if KINET_HAVE_MPI
#include <limits.h>
#include <mpi.h>

struct kboot_mpi {
	MPI_Comm comm;
};

static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static int mpi_users; /* bootstrap objects on MPI */
static bool mpi_ours; /* MPI_Init was called here */

bool kboot_mpi_built(void)
{
	return true;
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
static int mpi_wait(kinet_boot *b, MPI_Request *req, const char *what)
{
	int64_t deadline = kboot_now_ms() + b->timeout_ms;
	long pause_ns = 1000;
	for (;;) {
		int done = 0;
		int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return mpi_fail(rc, what);
		if (done)
			return 0;
		if (kboot_now_ms() >= deadline) {
			KLOG_ERR("boot: MPI %s did not complete within %d ms (a rank is missing)",
				 what, b->timeout_ms);
			return -ETIMEDOUT;
		}
		struct timespec ts = {0, pause_ns};
		nanosleep(&ts, NULL);
		if (pause_ns < 1000000)
			pause_ns *= 2;
	}
}

int kboot_mpi_init(kinet_boot *b)
{
	int inited = 0, finalized = 0, rc = 0;
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
	MPI_Comm_rank(m->comm, &b->rank);
	MPI_Comm_size(m->comm, &b->size);
	b->mpi = m;
	mpi_users++;
out:
	if (rc && mpi_ours && !mpi_users) {
		MPI_Finalize();
		mpi_ours = false;
	}
	pthread_mutex_unlock(&mpi_lock);
	return rc;
}

int kboot_mpi_allgather(kinet_boot *b, const void *mine, void *all, size_t len)
{
	struct kboot_mpi *m = b->mpi;
	MPI_Request req;
	uint64_t mylen = len;
	uint64_t *lens = malloc(sizeof(uint64_t) * (size_t)b->size);
	if (!lens)
		return -ENOMEM;
	/* first the lengths, so that a rank with another one fails cleanly */
	int e = MPI_Iallgather(&mylen, 1, MPI_UINT64_T, lens, 1, MPI_UINT64_T, m->comm, &req);
	int rc = e != MPI_SUCCESS ? mpi_fail(e, "MPI_Iallgather") : mpi_wait(b, &req, "allgather");
	for (int r = 0; !rc && r < b->size; r++) {
		if (lens[r] != mylen) {
			KLOG_ERR("boot: allgather: rank %d passed %llu bytes, rank %d %zu (all "
				 "ranks must pass the same length)", r, (unsigned long long)lens[r],
				 b->rank, len);
			rc = -EPROTO;
		}
	}
	free(lens);
	if (rc || !len)
		return rc;
	if (len > (size_t)INT_MAX / (size_t)b->size)
		return -E2BIG;
	/* MPI forbids overlapping send and receive buffers */
	const uint8_t *src = mine, *dst = all;
	void *tmp = NULL;
	if (src < dst + len * (size_t)b->size && dst < src + len) {
		tmp = malloc(len);
		if (!tmp)
			return -ENOMEM;
		memcpy(tmp, mine, len);
		mine = tmp;
	}
	e = MPI_Iallgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, m->comm, &req);
	rc = e != MPI_SUCCESS ? mpi_fail(e, "MPI_Iallgather") : mpi_wait(b, &req, "allgather");
	free(tmp);
	return rc;
}

int kboot_mpi_barrier(kinet_boot *b)
{
	struct kboot_mpi *m = b->mpi;
	MPI_Request req;
	int e = MPI_Ibarrier(m->comm, &req);
	return e != MPI_SUCCESS ? mpi_fail(e, "MPI_Ibarrier") : mpi_wait(b, &req, "barrier");
}

void kboot_mpi_close(kinet_boot *b)
{
	struct kboot_mpi *m = b->mpi;
	if (!m)
		return;
	pthread_mutex_lock(&mpi_lock);
	/* after a timed-out collective the communicator has a request pending
	 * forever: leave it (and MPI) alone rather than block in MPI */
	if (!b->err)
		MPI_Comm_free(&m->comm);
	free(m);
	b->mpi = NULL;
	if (--mpi_users == 0 && mpi_ours) {
		if (!b->err) {
			MPI_Finalize();
			KLOG_INFO("boot: MPI finalized by the bootstrap");
		}
		mpi_ours = false;
	}
	pthread_mutex_unlock(&mpi_lock);
}

#else /* !KINET_HAVE_MPI */

bool kboot_mpi_built(void)
{
	return false;
}

int kboot_mpi_init(kinet_boot *b)
{
	(void)b;
	return -ENOSYS;
}

int kboot_mpi_allgather(kinet_boot *b, const void *mine, void *all, size_t len)
{
	(void)b, (void)mine, (void)all, (void)len;
	return -ENOSYS;
}

int kboot_mpi_barrier(kinet_boot *b)
{
	(void)b;
	return -ENOSYS;
}

void kboot_mpi_close(kinet_boot *b)
{
	(void)b;
}
#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * setup.c - "the QP pair" of kinet-perf: a context of the chosen backend
 * (--backend, KINET_BACKEND: the software NIC or a ConnectX through
 * rdma-core), connected pairs of QPs (one per thread, per group of threads
 * sharing one with -q or --shared), registered buffers for both sides, the
 * jobs of one message size, and the data check after a run.
 *
 * Here both ends live in this process (--loopback: kinet_qp_connect_local).
 * remote.c replaces perf_env_open()/perf_env_buffers() with a version that
 * creates only its own side and exchanges descriptors with the peer; the
 * jobs then get tqp = NULL and the peer process runs the target's part
 * (write_lat and send_lat replies, send_bw and send_lat receives). Every QP is created with CQs of its
 * own and used from RTS to its end: the mlx5 backend has no shared CQs and
 * no reuse of a QP after RESET, and kinet-perf needs neither.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"

/* Thread slice of a side: [buf0: max][buf1: max, write_lat and send_lat: where
 * the peer's messages land][small: atomics] */
#define PERF_ALIGN 4096u

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* Pseudo-random bytes (xorshift64), a different stream for every seed. */
static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		memcpy(p + i, &s, 8);
	}
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	for (; i < n; i++)
		p[i] = (uint8_t)(s >> ((i & 7) * 8));
}

void perf_fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	fill_random(p, n, seed);
}

int perf_env_db_mode(const struct perf_env *e)
{
	return e->nqp ? kinet_qp_db_mode(e->qa[0]) : KN_DB_AUTO;
}

int perf_qp_of(const struct perf_opts *o, int i)
{
	return o->qp_group > 0 ? i / o->qp_group : i;
}

int perf_open_ctx(struct perf_env *e, const char **what)
{
	static char why[512];
	const struct perf_opts *o = e->o;
	struct kinet_ctx_attr ca = {.backend = o->backend,
				    .engine_threads = o->engine_threads,
				    .device = o->device};
	int rc;
	e->backend = -1;
	*what = "kinet_open";
	if ((rc = kinet_open(&ca, &e->ctx)))
		return rc;
	e->backend = kinet_ctx_backend(e->ctx);
	e->backend_reason = kinet_ctx_backend_reason(e->ctx);
	/* options the opened backend cannot honour: refused, never dropped */
	const char *opt = NULL;
	if (e->backend == KINET_BACKEND_SOFT)
		opt = o->device ? "-d" : o->ib_port ? "-i" : o->gid_index >= 0 ? "-x" : o->mtu ? "-m" : NULL;
	if (opt) {
		snprintf(why, sizeof(why),
			 "%s applies to an RDMA device (the mlx5 backend), and the backend is "
			 "soft (%s)",
			 opt, e->backend_reason);
		*what = why;
		return -ENODEV;
	}
	if (e->backend == KINET_BACKEND_MLX5 && o->engine_threads) {
		*what = "--engine-threads applies to the software NIC (--backend soft), and the "
			"backend is mlx5";
		return -EINVAL;
	}
	*what = "kinet_pd_alloc";
	return kinet_pd_alloc(e->ctx, &e->pd);
}

int perf_env_open(struct perf_env *e, const struct perf_opts *o, const char **what)
{
	const struct perf_test *pt = o->test;
	int rc;
	memset(e, 0, sizeof(*e));
	e->o = o;
	e->seed = 0x6b696e6574ull; /* fixed: runs are reproducible */
	e->backend = -1;
	e->mem_initiator = e->mem_target = o->mem == PERF_MEM_GPU ? KINET_MEM_CUDA : KINET_MEM_HOST;
	if (pt->flags & PERF_F_NO_NIC)
		return 0; /* the memcpy baseline needs buffers only */
	if ((rc = perf_open_ctx(e, what)))
		return rc;
	/* jobs per QP pair (kinet-perf.c: 1, threads / -q, every thread with
	 * --shared, or what the cuda executor's scope and sharing ask for);
	 * mlx5 QPs have CQs of their own, so every QP gets its own (the
	 * one-call form of kinet_qp_create), on both backends */
	int group = o->qp_group > 0 ? o->qp_group : 1;
	e->nqp = (o->threads + group - 1) / group;
	uint32_t sharers = (uint32_t)group;
	uint64_t want = (uint64_t)o->qdepth * sharers;
	if (want < 16)
		want = 16;
	struct kinet_qp_attr qa = {
		.sq_depth = (uint32_t)want,
		.rq_depth = (pt->flags & PERF_F_RECV) ? (o->qdepth < 16 ? 16 : o->qdepth) : 0,
		.db_mode = o->db_mode,
		.share = o->qp_share,
	};
	e->qa = calloc((size_t)e->nqp, sizeof(*e->qa));
	e->qb = calloc((size_t)e->nqp, sizeof(*e->qb));
	e->da = calloc((size_t)e->nqp, sizeof(*e->da));
	e->db = calloc((size_t)e->nqp, sizeof(*e->db));
	*what = "memory";
	if (!e->qa || !e->qb || !e->da || !e->db)
		return -ENOMEM;
	for (int i = 0; i < e->nqp; i++) {
		*what = "kinet_qp_create";
		if ((rc = kinet_qp_create(e->pd, &qa, &e->qa[i])) ||
		    (rc = kinet_qp_create(e->pd, &qa, &e->qb[i])))
			return rc;
		*what = "kinet_qp_connect_local";
		if ((rc = kinet_qp_connect_local(e->qa[i], e->qb[i])))
			return rc;
		*what = "kinet_qp_device";
		if ((rc = kinet_qp_device(e->qa[i], &e->da[i])) ||
		    (rc = kinet_qp_device(e->qb[i], &e->db[i])))
			return rc;
	}
	return 0;
}

int perf_env_buffers(struct perf_env *e, uint64_t max_size, const char **what)
{
	const struct perf_opts *o = e->o;
	const struct perf_test *pt = o->test;
	int rc;
	size_t m = round_up((size_t)max_size, 64);
	e->off_buf1 = m;
	e->off_small = (pt->flags & PERF_F_PINGPONG) ? 2 * m : m;
	e->slice = round_up(e->off_small + (size_t)o->qdepth * 8 + 64, PERF_ALIGN);
	e->buf_len = e->slice * (size_t)o->threads;
	*what = "memory for the buffers";
	if (posix_memalign((void **)&e->abuf, PERF_ALIGN, e->buf_len) ||
	    posix_memalign((void **)&e->bbuf, PERF_ALIGN, e->buf_len))
		return -ENOMEM;
	memset(e->abuf, 0, e->buf_len);
	memset(e->bbuf, 0, e->buf_len);
	/* samples: timed iterations per thread */
	e->cap_iters = o->duration_s ? 0 : o->iters; /* a duration run keeps no samples */
	size_t n = (size_t)o->threads * (size_t)e->cap_iters + 1;
	e->tpost = calloc(n, sizeof(uint64_t));
	e->tcomp = calloc(n, sizeof(uint64_t));
	e->ring = calloc((size_t)o->threads * o->qdepth, sizeof(uint64_t));
	e->jobs = calloc((size_t)o->threads, sizeof(*e->jobs));
	if (posix_memalign((void **)&e->barrier, 64, 64))
		e->barrier = NULL;
	if (!e->tpost || !e->tcomp || !e->ring || !e->jobs || !e->barrier)
		return -ENOMEM;
	if (pt->flags & PERF_F_NO_NIC)
		return 0;
	*what = "kinet_mr_reg";
	if ((rc = kinet_mr_reg(e->pd, e->abuf, e->buf_len, KINET_ACCESS_ALL, &e->amr)) ||
	    (rc = kinet_mr_reg(e->pd, e->bbuf, e->buf_len, KINET_ACCESS_ALL, &e->bmr)))
		return rc;
	return 0;
}

int perf_env_prepare(struct perf_env *e, uint64_t size)
{
	const struct perf_opts *o = e->o;
	const struct perf_test *pt = o->test;
	e->cur_size = size;
	e->seed++;
	*e->barrier = 0;
	for (int i = 0; i < o->threads; i++) {
		uint8_t *a = e->abuf + (size_t)i * e->slice;
		uint8_t *b = e->bbuf + (size_t)i * e->slice;
		struct perf_job *j = &e->jobs[i];
		int q = perf_qp_of(o, i);
		/* different random contents on both sides: a byte that did not
		 * move is seen by the check */
		fill_random(a, (size_t)size, e->seed * 131 + (uint64_t)i * 2);
		fill_random(b, (size_t)size, e->seed * 131 + (uint64_t)i * 2 + 1);
		if (pt->flags & PERF_F_PINGPONG) {
			fill_random(b + e->off_buf1, (size_t)size, e->seed * 7 + (uint64_t)i);
			fill_random(a + e->off_buf1, (size_t)size, e->seed * 11 + (uint64_t)i);
			/* the polled byte starts at 0, a value no stamp takes */
			a[e->off_buf1 + size - 1] = 0;
			b[e->off_buf1 + size - 1] = 0;
		}
		uint64_t init;
		fill_random((uint8_t *)&init, 8, e->seed * 13 + (uint64_t)i);
		memcpy(b + e->off_small, &init, 8);
		memset(a + e->off_small, 0, (size_t)o->qdepth * 8);

		memset(j, 0, sizeof(*j));
		j->test = pt->id;
		j->tid = i;
		j->nthreads = o->threads;
		j->size = (uint32_t)size;
		j->window = pt->kind == PERF_LAT ? 1 : o->qdepth;
		j->iters = o->iters;
		j->warmup = o->warmup;
		j->cap = e->cap_iters;
		j->duration_ns = (uint64_t)o->duration_s * 1000000000ull;
		j->inline_max = o->inline_size;
		j->barrier = e->barrier;
		j->tpost = e->tpost + (size_t)i * e->cap_iters;
		j->tcomp = e->tcomp + (size_t)i * e->cap_iters;
		j->ring = e->ring + (size_t)i * o->qdepth;
		j->atomic_init = init;
		j->yield = o->yield;
		j->laddr = (uint64_t)(uintptr_t)a;
		j->raddr = (uint64_t)(uintptr_t)b;
		if (pt->flags & PERF_F_NO_NIC) {
			j->timeout_ns = 10000000000ull;
			continue;
		}
		j->qp = e->da[q];
		j->timeout_ns = j->qp->timeout_ns;
		j->lkey = kinet_mr_lkey(e->amr);
		j->rkey = kinet_mr_rkey(e->bmr);
		j->res = (uint64_t)(uintptr_t)(a + e->off_small);
		j->res_lkey = j->lkey;
		if (pt->id == PERF_ATOMIC_BW || pt->id == PERF_ATOMIC_LAT)
			j->raddr = (uint64_t)(uintptr_t)(b + e->off_small);
		/* the target's side, driven by this job (local pair) */
		j->tqp = e->db[q];
		j->t_lkey = kinet_mr_lkey(e->bmr);
		j->t_rkey = kinet_mr_rkey(e->amr);
		j->t_laddr = (uint64_t)(uintptr_t)b;
		if (pt->flags & PERF_F_PINGPONG) {
			j->raddr = (uint64_t)(uintptr_t)(b + e->off_buf1);
			j->t_land = j->raddr;
			j->land = (uint64_t)(uintptr_t)(a + e->off_buf1);
			j->t_raddr = j->land;
		}
	}
	return 0;
}

static int cmp_bytes(const uint8_t *want, const uint8_t *got, size_t n, int tid, const char *what,
		     char *why, size_t whylen)
{
	if (!memcmp(want, got, n))
		return 0;
	size_t i = 0;
	while (i < n && want[i] == got[i])
		i++;
	snprintf(why, whylen,
		 "thread %d: %s differs at byte %zu of %zu (expected 0x%02x, found 0x%02x)", tid,
		 what, i, n, want[i], got[i]);
	return -EIO;
}

int perf_env_verify(struct perf_env *e, uint64_t size, char *why, size_t whylen)
{
	const struct perf_opts *o = e->o;
	const struct perf_test *pt = o->test;
	size_t n = (size_t)size;
	for (int i = 0; i < o->threads; i++) {
		const uint8_t *a = e->abuf + (size_t)i * e->slice;
		const uint8_t *b = e->bbuf + (size_t)i * e->slice;
		const struct perf_job *j = &e->jobs[i];
		int rc = 0;
		switch (pt->id) {
		case PERF_WRITE_BW:
		case PERF_PUT_BW:
		case PERF_SEND_BW:
		case PERF_MEMCPY_BW:
			rc = cmp_bytes(a, b, n, i, "destination", why, whylen);
			break;
		case PERF_READ_BW:
		case PERF_READ_LAT:
			rc = cmp_bytes(b, a, n, i, "read buffer", why, whylen);
			break;
		case PERF_WRITE_LAT:
		case PERF_SEND_LAT: /* the last message of each side, stamp included */
			rc = cmp_bytes(a, b + e->off_buf1, n, i,
				       pt->id == PERF_SEND_LAT ? "target's receive buffer"
							       : "target's landing buffer",
				       why, whylen);
			if (!rc)
				rc = cmp_bytes(b, a + e->off_buf1, n, i,
					       pt->id == PERF_SEND_LAT ? "initiator's receive buffer"
								       : "initiator's landing buffer",
					       why, whylen);
			break;
		case PERF_ATOMIC_BW:
		case PERF_ATOMIC_LAT: {
			uint64_t got, k = perf_job_total(j);
			memcpy(&got, b + e->off_small, 8);
			uint64_t want = perf_atomic_expect(j, k);
			if (got != want) {
				snprintf(why, whylen,
					 "thread %d: atomic word is 0x%llx after %llu fetch-adds, "
					 "expected 0x%llx",
					 i, (unsigned long long)got, (unsigned long long)k,
					 (unsigned long long)want);
				rc = -EIO;
			}
			break;
		}
		default:
			break;
		}
		if (rc)
			return rc;
		if (j->bad) {
			snprintf(why, whylen,
				 "thread %d: %llu message(s) came back wrong, the first is number "
				 "%llu (%s)",
				 i, (unsigned long long)j->bad, (unsigned long long)j->first_bad,
				 pt->id == PERF_SEND_BW	   ? "receive length"
				 : pt->id == PERF_SEND_LAT ? "receive length or last byte"
							   : "fetch-add result");
			return -EIO;
		}
	}
	return 0;
}

void perf_env_corrupt(struct perf_env *e, uint64_t size)
{
	uint8_t *a = e->abuf, *b = e->bbuf; /* thread 0 */
	switch (e->o->test->id) {
	case PERF_READ_BW:
	case PERF_READ_LAT:
		a[size / 2] ^= 0x5a;
		break;
	case PERF_WRITE_LAT:
	case PERF_SEND_LAT:
		b[e->off_buf1 + size / 2] ^= 0x5a;
		break;
	case PERF_ATOMIC_BW:
	case PERF_ATOMIC_LAT:
		b[e->off_small] ^= 1;
		break;
	default:
		b[size / 2] ^= 0x5a;
		break;
	}
}

void perf_env_close(struct perf_env *e)
{
	if (e->amr)
		kinet_mr_dereg(e->amr);
	if (e->bmr)
		kinet_mr_dereg(e->bmr);
	for (int i = 0; i < e->nqp; i++) {
		if (e->qa && e->qa[i])
			kinet_qp_destroy(e->qa[i]);
		if (e->qb && e->qb[i])
			kinet_qp_destroy(e->qb[i]);
	}
	if (e->pd)
		kinet_pd_free(e->pd);
	if (e->ctx)
		kinet_close(e->ctx);
	free(e->qa);
	free(e->qb);
	free(e->da);
	free(e->db);
	free(e->abuf);
	free(e->bbuf);
	free(e->tpost);
	free(e->tcomp);
	free(e->ring);
	free(e->jobs);
	free(e->barrier);
	memset(e, 0, sizeof(*e));
}

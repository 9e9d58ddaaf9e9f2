/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf_body.h - the test bodies of kinet-perf: what one initiator thread
 * does. Device-API code only (kinet/device.h), written in the C subset that
 * both a C compiler and nvcc accept (explicit casts, no libc), so the host
 * executor (exec_host.c) and a CUDA executor (a .cu file that includes this
 * header and calls perf_body_run() from a kernel) run the very same code.
 *
 * A job is plain data: QP descriptors, addresses and keys, sample arrays.
 * Everything it points to must be reachable by the executor (host memory for
 * the host executor; mapped or device memory for a GPU).
 *
 * Message numbering: a job posts warmup + iters messages, k = 0, 1, ...;
 * the first `warmup` are not timed. Samples land at index k - warmup (below
 * `cap`). A duration run (-D: duration_ns > 0) posts timed messages until
 * duration_ns have passed since the timed phase began, keeps no samples
 * (cap 0) and counts them instead (done; lat_sum for the latency tests).
 */
#ifndef KINET_PERF_BODY_H
#define KINET_PERF_BODY_H

#include <kinet/device.h>

/* Between two polls of a waiting job: the device layer's pause; on the host
 * with --poll yield, give the CPU away (sched_yield) every time, for machines
 * with fewer cores than initiator plus engine threads. */
#if defined(__CUDA_ARCH__)
#define PERF_RELAX(j) KN_PAUSE()
#else
#include <sched.h>
#define PERF_RELAX(j)                     \
	do {                              \
		if ((j)->yield)           \
			sched_yield();    \
		else                      \
			KN_PAUSE();       \
	} while (0)
#endif

enum perf_test_id {
	PERF_WRITE_BW = 0,
	PERF_WRITE_LAT,
	PERF_READ_BW,
	PERF_READ_LAT,
	PERF_ATOMIC_BW,
	PERF_ATOMIC_LAT,
	PERF_SEND_BW,
	PERF_PUT_BW,
	PERF_MEMCPY_BW, /* baseline, host only (exec_host.c) */
	PERF_SEND_LAT,
};

/* What a job does: everything (the initiator; with a local pair it also
 * plays the target's part), or only the target's part of write_lat and
 * send_lat (the replies) and send_bw (the receives), for the server of a run
 * across processes (remote.c). */
enum perf_role {
	PERF_ROLE_INITIATOR = 0,
	PERF_ROLE_TARGET = 1,
};

/* Where a job failed (named by step_str() in kinet-perf.c). */
enum perf_step {
	PERF_STEP_NONE = 0,
	PERF_STEP_BARRIER,  /* waiting for the other threads */
	PERF_STEP_POST,     /* reserve / prepare / submit */
	PERF_STEP_CQE,      /* a send completion */
	PERF_STEP_RECV,     /* posting or polling a receive */
	PERF_STEP_ARRIVAL,  /* write_lat: waiting for the data to land */
};

/* One initiator thread's work. */
struct perf_job {
	int test;        /* enum perf_test_id */
	int tid, nthreads;
	uint32_t size;   /* message bytes */
	uint32_t window; /* messages in flight (bandwidth tests) */
	uint64_t iters, warmup;
	uint64_t cap;         /* sample slots of tpost / tcomp (iters, or 0 in a duration run) */
	uint64_t duration_ns; /* > 0: a duration run (the timed phase is time-bounded) */
	uint32_t inline_max;  /* -I: writes of at most this many bytes are posted inline */
	uint64_t timeout_ns;
	/* the initiator: its QP and local memory */
	const kn_qp *qp;
	uint64_t laddr;  /* source (write, send, put), sink (read) */
	uint32_t lkey;
	uint32_t res_lkey;
	uint64_t res;    /* atomics: `window` 8-byte result slots */
	uint64_t land;   /* write_lat: where the target's writes land; send_lat:
			  * the initiator's receive buffer */
	/* the target as the initiator addresses it */
	uint64_t raddr;  /* destination, read source, or the atomic word */
	uint32_t rkey;
	uint32_t t_lkey;
	/* the target's side when this job drives it too (a local pair: the
	 * target's QP replies in write_lat and send_lat and takes the receives
	 * of send_bw and send_lat); tqp == NULL when another process plays the
	 * target */
	const kn_qp *tqp;
	uint32_t role;    /* enum perf_role; a target job uses only the t_* fields */
	uint64_t t_laddr; /* write_lat, send_lat: target's source; send_bw: receive
			   * buffer */
	uint64_t t_land;  /* write_lat: where the initiator's writes land;
			   * send_lat: the target's receive buffer */
	uint64_t t_raddr; /* write_lat: the initiator's landing buffer */
	uint32_t t_rkey;
	uint32_t yield;   /* host: sched_yield() instead of pause while waiting */
	uint64_t atomic_init; /* atomics: initial value of the remote word */
	/* a duration run across processes (write_lat, send_lat, send_bw): the
	 * target does not know how many messages come, so the initiator writes
	 * the count + 1 into the target's stop word after its last message (from
	 * stop_laddr, 8 registered bytes of its own), and the target job
	 * watches t_stop */
	uint64_t stop_raddr, stop_laddr;
	uint32_t stop_rkey, stop_lkey;
	uint64_t t_stop;      /* target job: its stop word (0: none) */
	uint64_t *barrier;    /* shared by the jobs of a run, starts at 0 */
	/* outputs */
	uint64_t *tpost;  /* bw: post time of message k (ns); unused by lat */
	uint64_t *tcomp;  /* bw: completion time seen; lat: the sample (ns) */
	uint64_t *ring;   /* `window` tickets in flight */
	uint64_t t_begin, t_end; /* timed phase, for the report */
	uint64_t done;     /* timed messages completed (every run; a duration run's count) */
	uint64_t lat_sum;  /* latency tests: sum of the timed samples (ns) */
	uint64_t seen_ns;  /* time of the last completions perf_reap() saw */
	uint64_t rx_posted, rx_done; /* send_bw, send_lat: the target's receives
				      * posted / consumed */
	uint64_t irx_posted, irx_done; /* send_lat: the initiator's receives */
	uint64_t bad;      /* data or length mismatches seen during the run */
	uint64_t first_bad; /* message number of the first one */
	int rc;            /* 0 or the first negative errno */
	int step;          /* enum perf_step where rc happened */
	uint32_t syndrome, vendor;
};

KN_INLINE int perf_fail(struct perf_job *j, const kn_qp *qp, int rc, int step)
{
	if (!j->rc) {
		j->rc = rc;
		j->step = step;
		if (rc == -EIO && qp && !j->syndrome)
			j->syndrome = kn_qp_error(qp, &j->vendor);
	}
	return rc;
}

KN_INLINE int perf_timed_out(uint64_t *t0, uint64_t limit)
{
	uint64_t now = kn_now_ns();
	if (!*t0) {
		*t0 = now;
		return 0;
	}
	return now - *t0 > limit;
}

/* Messages a job is to post in all (a duration run: as many as time allows). */
KN_INLINE uint64_t perf_job_limit(const struct perf_job *j)
{
	return j->warmup + (j->duration_ns ? (uint64_t)1 << 62 : j->iters);
}

/* Messages a job posted in all, after its run. */
KN_INLINE uint64_t perf_job_total(const struct perf_job *j)
{
	return j->warmup + (j->duration_ns ? j->done : j->iters);
}

/* In a duration run: has the timed phase lasted its time at `now`? */
KN_INLINE int perf_time_up(const struct perf_job *j, uint64_t now)
{
	return j->duration_ns && now - j->t_begin >= j->duration_ns;
}

/* Every job arrives; generation gen (1, 2, ...) is complete when the counter
 * reaches gen * nthreads. Jobs that failed still arrive. */
KN_INLINE int perf_barrier(struct perf_job *j, uint64_t gen)
{
	KN_FADD64(j->barrier, 1);
	uint64_t t0 = 0;
	unsigned spins = 0;
	while (KN_LOAD64(j->barrier) < gen * (uint64_t)j->nthreads) {
		if ((++spins & 1023u) == 0 && perf_timed_out(&t0, j->timeout_ns))
			return perf_fail(j, (const kn_qp *)0, -ETIMEDOUT, PERF_STEP_BARRIER);
		PERF_RELAX(j);
	}
	return 0;
}

/* Atomics: the k-th fetch-add of a job adds k + 1, so the value it returns
 * is init + k(k+1)/2 (each job owns its word; RC executes in order). */
KN_INLINE uint64_t perf_atomic_expect(const struct perf_job *j, uint64_t k)
{
	return j->atomic_init + (k % 2 == 0 ? (k / 2) * (k + 1) : k * ((k + 1) / 2));
}

KN_INLINE void perf_check_atomic(struct perf_job *j, uint64_t k)
{
	volatile const uint64_t *slot =
		(volatile const uint64_t *)(uintptr_t)(j->res + (k % j->window) * 8u);
	if (kn_be64toh(*slot) != perf_atomic_expect(j, k)) {
		if (!j->bad)
			j->first_bad = k;
		j->bad++;
	}
}

/* -I: an RDMA write of the message carried in the WQE itself (reserved slot
 * t), submitted; the source is read now. 0, or the error of the prepare. */
KN_INLINE int perf_inline_write(struct perf_job *j, const kn_qp *qp, void *w, kn_ticket_t t,
				uint64_t laddr, uint64_t raddr, uint32_t rkey)
{
	int rc = kn_prep_write_inline(qp, w, t, (const void *)(uintptr_t)laddr, j->size, raddr,
				      rkey);
	if (rc)
		kn_prep_nop(qp, w, t); /* the slot is reserved: it must still complete */
	kn_sq_submit(qp, t, 1);
	return rc;
}

/* Posts message k of a bandwidth or read/atomic latency test. */
KN_INLINE int perf_post(struct perf_job *j, uint64_t k, kn_ticket_t *t)
{
	const kn_qp *qp = j->qp;
	if (j->test == PERF_PUT_BW) { /* the high-level API */
		if (j->size <= j->inline_max)
			return kn_put_inline(qp, j->raddr, j->rkey,
					     (const void *)(uintptr_t)j->laddr, j->size, t);
		return kn_put(qp, j->raddr, j->rkey, (const void *)(uintptr_t)j->laddr, j->lkey,
			      j->size, t);
	}
	int rc = kn_sq_reserve(qp, 1, t);
	if (rc)
		return rc;
	void *w = kn_wqe_ptr(qp, *t);
	switch (j->test) {
	case PERF_WRITE_BW:
		if (j->size <= j->inline_max)
			return perf_inline_write(j, qp, w, *t, j->laddr, j->raddr, j->rkey);
		kn_prep_write(qp, w, *t, j->laddr, j->lkey, j->raddr, j->rkey, j->size);
		break;
	case PERF_READ_BW:
	case PERF_READ_LAT:
		kn_prep_read(qp, w, *t, j->laddr, j->lkey, j->raddr, j->rkey, j->size);
		break;
	case PERF_ATOMIC_BW:
	case PERF_ATOMIC_LAT:
		kn_prep_atomic_fa(qp, w, *t, j->res + (k % j->window) * 8u, j->res_lkey, j->raddr,
				  j->rkey, k + 1);
		break;
	case PERF_SEND_BW:
		kn_prep_send(qp, w, *t, j->laddr, j->lkey, j->size, 0, 0);
		break;
	default:
		kn_prep_nop(qp, w, *t);
		break;
	}
	kn_sq_submit(qp, *t, 1);
	return 0;
}

/* Consumes the completions of messages [*reaped, posted) that are there,
 * and waits until at least `upto` are. Stamps each with the time it was
 * seen; atomics check the value each one returned. */
KN_INLINE int perf_reap(struct perf_job *j, uint64_t *reaped, uint64_t posted, uint64_t upto)
{
	const kn_qp *qp = j->qp;
	uint64_t t0 = 0;
	unsigned spins = 0;
	for (;;) {
		uint64_t done = kn_cq_progress(qp);
		uint64_t now = 0;
		while (*reaped < posted) {
			uint64_t k = *reaped;
			kn_ticket_t t = j->ring[k % j->window];
			if (t >= done)
				break;
			if (kn_ticket_status(qp, t))
				return perf_fail(j, qp, -EIO, PERF_STEP_CQE);
			if (!now)
				j->seen_ns = now = kn_now_ns();
			if (k >= j->warmup && k - j->warmup < j->cap)
				j->tcomp[k - j->warmup] = now;
			if (j->test == PERF_ATOMIC_BW)
				perf_check_atomic(j, k);
			*reaped = k + 1;
		}
		if (*reaped >= upto)
			return 0;
		if ((++spins & 255u) == 0 && perf_timed_out(&t0, j->timeout_ns))
			return perf_fail(j, qp, -ETIMEDOUT, PERF_STEP_CQE);
		PERF_RELAX(j);
	}
}

/* send_bw: consumes one receive completion (blocking or not). */
KN_INLINE int perf_rx_poll(struct perf_job *j, int blocking)
{
	const kn_qp *tq = j->tqp;
	kn_recv_info info;
	int rc = kn_recv_poll(tq, tq->st->rq_done, blocking, &info);
	if (rc == -EBUSY)
		return rc;
	if (rc) {
		if (rc == -EIO && !j->rc)
			j->syndrome = info.syndrome;
		return perf_fail(j, (const kn_qp *)0, rc, PERF_STEP_RECV);
	}
	if (info.byte_len != j->size) {
		if (!j->bad)
			j->first_bad = j->rx_done;
		j->bad++;
	}
	j->rx_done++;
	return 0;
}

/* send_bw: makes sure message k finds a receive posted at the target (the
 * job posts the target's receives itself: a local pair). */
KN_INLINE int perf_rx_ready(struct perf_job *j, uint64_t k)
{
	const kn_qp *tq = j->tqp;
	uint64_t total = perf_job_limit(j);
	for (;;) {
		int rc;
		while ((rc = perf_rx_poll(j, 0)) == 0)
			;
		if (rc != -EBUSY)
			return rc;
		while (j->rx_posted < total && j->rx_posted - j->rx_done < tq->rq_wqe_cnt) {
			kn_ticket_t rt;
			rc = kn_recv_post(tq, (void *)(uintptr_t)j->t_laddr, j->t_lkey, j->size, &rt);
			if (rc)
				return perf_fail(j, (const kn_qp *)0, rc, PERF_STEP_RECV);
			j->rx_posted++;
		}
		if (j->rx_posted > k)
			return 0;
		rc = perf_rx_poll(j, 1);
		if (rc)
			return rc;
	}
}

/* Bandwidth: messages [*k, end) with at most `window` in flight; a timed
 * phase of a duration run ends earlier, when its time is up. */
KN_INLINE int perf_bw_phase(struct perf_job *j, uint64_t *k, uint64_t end)
{
	uint64_t posted = *k, reaped = *k;
	int timed = *k >= j->warmup;
	int rc;
	while (posted < end) {
		uint64_t now = 0;
		if (posted - reaped >= j->window) {
			rc = perf_reap(j, &reaped, posted, posted - j->window + 1);
			if (rc)
				return rc;
			now = j->seen_ns; /* read just before this post: one clock read
					   * per message in the steady state, and a post
					   * time never later than the real one */
		}
		if (j->test == PERF_SEND_BW && j->tqp && (rc = perf_rx_ready(j, posted)))
			return rc;
		if (!now || j->test == PERF_SEND_BW)
			now = kn_now_ns();
		if (timed && perf_time_up(j, now))
			break;
		kn_ticket_t t;
		rc = perf_post(j, posted, &t);
		if (rc)
			return perf_fail(j, j->qp, rc, PERF_STEP_POST);
		j->ring[posted % j->window] = t;
		if (posted >= j->warmup && posted - j->warmup < j->cap)
			j->tpost[posted - j->warmup] = now;
		posted++;
	}
	rc = perf_reap(j, &reaped, posted, posted);
	if (rc)
		return rc;
	if (j->test == PERF_SEND_BW && j->tqp)
		while (j->rx_done < posted)
			if ((rc = perf_rx_poll(j, 1)))
				return rc;
	*k = posted;
	return 0;
}

/* write_lat: waits until the last byte of a landing buffer shows `stamp`;
 * the write that carries it is ticket t of qp (its error ends the wait; qp
 * NULL: no write of ours to watch). A target job of a duration run also
 * watches its stop word: 1 when it says that message k never comes (the
 * initiator sent k messages in all). */
KN_INLINE int perf_wait_byte(struct perf_job *j, uint64_t addr, uint8_t stamp, const kn_qp *qp,
			     kn_ticket_t t, uint64_t k)
{
	volatile const uint8_t *p = (volatile const uint8_t *)(uintptr_t)(addr + j->size - 1);
	volatile const uint64_t *stop = (volatile const uint64_t *)(uintptr_t)j->t_stop;
	uint64_t t0 = 0;
	unsigned spins = 0;
	while (*p != stamp) {
		if ((++spins & 63u) == 0) {
			if (qp && kn_test(qp, t) == -EIO)
				return perf_fail(j, qp, -EIO, PERF_STEP_CQE);
			if (stop && *stop == k + 1)
				return 1;
			if (perf_timed_out(&t0, j->timeout_ns))
				return perf_fail(j, qp, -ETIMEDOUT, PERF_STEP_ARRIVAL);
		}
		PERF_RELAX(j);
	}
	KN_FENCE_ACQ();
	return 0;
}

/* One write of the message in buffer laddr (inline up to -I bytes) to raddr
 * on qp: its ticket in *t. */
KN_INLINE int perf_write_one(struct perf_job *j, const kn_qp *qp, uint64_t laddr, uint32_t lkey,
			     uint64_t raddr, uint32_t rkey, kn_ticket_t *t)
{
	int rc = kn_sq_reserve(qp, 1, t);
	if (rc)
		return rc;
	void *w = kn_wqe_ptr(qp, *t);
	if (j->size <= j->inline_max)
		return perf_inline_write(j, qp, w, *t, laddr, raddr, rkey);
	kn_prep_write(qp, w, *t, laddr, lkey, raddr, rkey, j->size);
	kn_sq_submit(qp, *t, 1);
	return 0;
}

/* write_lat, one round trip: the initiator writes, the target sees the last
 * byte change and writes back, the initiator sees it (perftest's ping-pong;
 * the report halves it). With a local pair this job plays both sides. */
KN_INLINE int perf_pingpong(struct perf_job *j, uint64_t k)
{
	uint8_t stamp = (uint8_t)(k % 255u + 1u); /* never 0: landing buffers start at 0 */
	kn_ticket_t t;
	int rc;
	((volatile uint8_t *)(uintptr_t)j->laddr)[j->size - 1] = stamp;
	if ((rc = perf_write_one(j, j->qp, j->laddr, j->lkey, j->raddr, j->rkey, &t)))
		return perf_fail(j, j->qp, rc, PERF_STEP_POST);
	if (!j->tqp) /* another process replies */
		return perf_wait_byte(j, j->land, stamp, j->qp, t, k);
	/* the target's side */
	if ((rc = perf_wait_byte(j, j->t_land, stamp, j->qp, t, k)))
		return rc;
	((volatile uint8_t *)(uintptr_t)j->t_laddr)[j->size - 1] = stamp;
	kn_ticket_t u;
	if ((rc = perf_write_one(j, j->tqp, j->t_laddr, j->t_lkey, j->t_raddr, j->t_rkey, &u)))
		return perf_fail(j, j->tqp, rc, PERF_STEP_POST);
	/* back at the initiator */
	return perf_wait_byte(j, j->land, stamp, j->tqp, u, k);
}

/* send_lat: keeps receives of j->size bytes into buf posted on qp, as many
 * as its receive queue holds, and never more than `total` in all (*posted of
 * them so far, done consumed): a size leaves no receive of its length for
 * the next one. 0 or the error of the post. */
KN_INLINE int perf_rx_fill(struct perf_job *j, const kn_qp *qp, uint64_t buf, uint32_t lkey,
			   uint64_t *posted, uint64_t done, uint64_t total)
{
	while (*posted < total && *posted - done < qp->rq_wqe_cnt) {
		kn_ticket_t rt;
		int rc = kn_recv_post(qp, (void *)(uintptr_t)buf, lkey, j->size, &rt);
		if (rc)
			return perf_fail(j, (const kn_qp *)0, rc, PERF_STEP_RECV);
		(*posted)++;
	}
	return 0;
}

/* send_lat: waits for the next receive completion of qp, message k of the
 * ping-pong, and checks it: its length, and the stamp the sender put in its
 * last byte (in buf, the receive buffer); a mismatch counts in bad. The send
 * that the peer answers is ticket t of sq (its error ends the wait; sq NULL:
 * none of ours). A target job of a duration run also watches its stop word:
 * 1 when it says that message k never comes. 0, 1, or the error. */
KN_INLINE int perf_rx_wait(struct perf_job *j, const kn_qp *qp, uint64_t buf, uint64_t *done,
			   uint8_t stamp, const kn_qp *sq, kn_ticket_t t, uint64_t k)
{
	volatile const uint64_t *stop = (volatile const uint64_t *)(uintptr_t)j->t_stop;
	kn_recv_info info;
	uint64_t t0 = 0;
	unsigned spins = 0;
	int rc;
	while ((rc = kn_recv_poll(qp, qp->st->rq_done, 0, &info)) == -EBUSY) {
		if ((++spins & 63u) == 0) {
			if (sq && kn_test(sq, t) == -EIO)
				return perf_fail(j, sq, -EIO, PERF_STEP_CQE);
			if (stop && *stop == k + 1)
				return 1;
			if (perf_timed_out(&t0, j->timeout_ns))
				return perf_fail(j, (const kn_qp *)0, -ETIMEDOUT, PERF_STEP_RECV);
		}
		PERF_RELAX(j);
	}
	if (rc) {
		if (rc == -EIO && !j->rc)
			j->syndrome = info.syndrome;
		return perf_fail(j, (const kn_qp *)0, rc, PERF_STEP_RECV);
	}
	(*done)++;
	if (info.byte_len != j->size ||
	    ((volatile const uint8_t *)(uintptr_t)buf)[j->size - 1] != stamp) {
		if (!j->bad)
			j->first_bad = k;
		j->bad++;
	}
	return 0;
}

/* send_lat: one SEND of the message in buffer laddr on qp, its last byte
 * stamped first: its ticket in *t. */
KN_INLINE int perf_send_one(struct perf_job *j, const kn_qp *qp, uint64_t laddr, uint32_t lkey,
			    uint8_t stamp, kn_ticket_t *t)
{
	((volatile uint8_t *)(uintptr_t)laddr)[j->size - 1] = stamp;
	int rc = kn_sq_reserve(qp, 1, t);
	if (rc)
		return rc;
	void *w = kn_wqe_ptr(qp, *t);
	rc = kn_prep_send(qp, w, *t, laddr, lkey, j->size, 0, 0);
	if (rc)
		kn_prep_nop(qp, w, *t); /* the slot is reserved: it must still complete */
	kn_sq_submit(qp, *t, 1);
	return rc;
}

/* send_lat, one round trip as perftest's ib_send_lat makes it: both sides
 * keep receives posted; the initiator SENDs, the target's receive completes
 * and it SENDs back, the initiator's receive completes (the report halves
 * the round trip). Each side's receives are posted before the send that
 * its peer answers, so no message waits for one. With a local pair this job
 * plays both sides. */
KN_INLINE int perf_send_pingpong(struct perf_job *j, uint64_t k)
{
	uint8_t stamp = (uint8_t)(k % 255u + 1u); /* never 0: receive buffers start at 0 */
	uint64_t total = perf_job_limit(j);
	kn_ticket_t t, u;
	int rc;
	if ((rc = perf_rx_fill(j, j->qp, j->land, j->lkey, &j->irx_posted, j->irx_done, total)))
		return rc;
	if (j->tqp && (rc = perf_rx_fill(j, j->tqp, j->t_land, j->t_lkey, &j->rx_posted,
					 j->rx_done, total)))
		return rc;
	if ((rc = perf_send_one(j, j->qp, j->laddr, j->lkey, stamp, &t)))
		return perf_fail(j, j->qp, rc, PERF_STEP_POST);
	if (!j->tqp) /* another process replies */
		return perf_rx_wait(j, j->qp, j->land, &j->irx_done, stamp, j->qp, t, k);
	/* the target's side */
	if ((rc = perf_rx_wait(j, j->tqp, j->t_land, &j->rx_done, stamp, j->qp, t, k)))
		return rc;
	if ((rc = perf_send_one(j, j->tqp, j->t_laddr, j->t_lkey, stamp, &u)))
		return perf_fail(j, j->tqp, rc, PERF_STEP_POST);
	/* back at the initiator */
	return perf_rx_wait(j, j->qp, j->land, &j->irx_done, stamp, j->tqp, u, k);
}

/* Latency: messages [*k, end), one at a time; a timed phase of a duration
 * run ends earlier, when its time is up. */
KN_INLINE int perf_lat_phase(struct perf_job *j, uint64_t *k, uint64_t end)
{
	int timed = *k >= j->warmup;
	int rc;
	for (; *k < end; (*k)++) {
		uint64_t t0 = kn_now_ns();
		if (timed && perf_time_up(j, t0))
			break;
		if (j->test == PERF_WRITE_LAT) {
			if ((rc = perf_pingpong(j, *k)))
				return rc;
		} else if (j->test == PERF_SEND_LAT) {
			if ((rc = perf_send_pingpong(j, *k)))
				return rc;
		} else {
			kn_ticket_t t;
			if ((rc = perf_post(j, *k, &t)))
				return perf_fail(j, j->qp, rc, PERF_STEP_POST);
			if ((rc = kn_wait(j->qp, t)))
				return perf_fail(j, j->qp, rc, PERF_STEP_CQE);
		}
		uint64_t t1 = kn_now_ns();
		if (j->test == PERF_ATOMIC_LAT)
			perf_check_atomic(j, *k);
		if (*k >= j->warmup) {
			if (*k - j->warmup < j->cap)
				j->tcomp[*k - j->warmup] = t1 - t0;
			j->lat_sum += t1 - t0;
		}
	}
	return 0;
}

/* Waits for every WQE the job posted (both QPs of a local pair). */
KN_INLINE int perf_drain(struct perf_job *j)
{
	int rc = kn_quiet(j->qp);
	if (rc)
		return perf_fail(j, j->qp, rc, PERF_STEP_CQE);
	if (j->tqp && (j->test == PERF_WRITE_LAT || j->test == PERF_SEND_LAT) &&
	    (rc = kn_quiet(j->tqp)))
		return perf_fail(j, j->tqp, rc, PERF_STEP_CQE);
	return 0;
}

/* A duration run across processes: tells the target job that `total`
 * messages came (its stop word becomes total + 1), after all of them
 * completed. */
KN_INLINE int perf_send_stop(struct perf_job *j, uint64_t total)
{
	kn_ticket_t t;
	*(volatile uint64_t *)(uintptr_t)j->stop_laddr = total + 1;
	KN_FENCE_SYS();
	int rc = kn_sq_reserve(j->qp, 1, &t);
	if (rc)
		return perf_fail(j, j->qp, rc, PERF_STEP_POST);
	kn_prep_write(j->qp, kn_wqe_ptr(j->qp, t), t, j->stop_laddr, j->stop_lkey, j->stop_raddr,
		      j->stop_rkey, 8);
	kn_sq_submit(j->qp, t, 1);
	if ((rc = kn_wait(j->qp, t)))
		return perf_fail(j, j->qp, rc, PERF_STEP_CQE);
	return 0;
}

/* send_bw's target in a duration run: keeps receives posted and consumes
 * them until the stop word says how many came and they all did. */
KN_INLINE int perf_target_rx_until_stop(struct perf_job *j)
{
	const kn_qp *tq = j->tqp;
	volatile const uint64_t *stop = (volatile const uint64_t *)(uintptr_t)j->t_stop;
	uint64_t t0 = 0;
	unsigned spins = 0;
	for (;;) {
		int rc;
		uint64_t before = j->rx_done;
		while ((rc = perf_rx_poll(j, 0)) == 0)
			;
		if (rc != -EBUSY)
			return rc;
		uint64_t s = *stop;
		if (s && j->rx_done >= s - 1)
			return 0;
		while (j->rx_posted - j->rx_done < tq->rq_wqe_cnt) {
			kn_ticket_t rt;
			rc = kn_recv_post(tq, (void *)(uintptr_t)j->t_laddr, j->t_lkey, j->size, &rt);
			if (rc)
				return perf_fail(j, (const kn_qp *)0, rc, PERF_STEP_RECV);
			j->rx_posted++;
		}
		if (j->rx_done != before)
			t0 = 0;
		else if ((++spins & 255u) == 0 && perf_timed_out(&t0, j->timeout_ns))
			return perf_fail(j, (const kn_qp *)0, -ETIMEDOUT, PERF_STEP_RECV);
		PERF_RELAX(j);
	}
}

/* The target's part only (PERF_ROLE_TARGET; the initiator is another
 * process): write_lat answers each of the initiator's writes with one of its
 * own once it has landed; send_lat keeps receives posted and answers each
 * SEND with one of its own once its receive has completed (checked as the
 * initiator checks the replies); send_bw keeps receives posted (up to the RQ
 * depth) and consumes them, checking their lengths. warmup + iters of them,
 * or in a duration run as many as the stop word (t_stop) says came. Other
 * tests have nothing to do at the target. Uses tqp and the t_* fields; done
 * counts the messages served. */
KN_INLINE int perf_target_run(struct perf_job *j)
{
	const kn_qp *tq = j->tqp;
	uint64_t total = perf_job_limit(j);
	int rc;
	j->rx_posted = j->rx_done = 0;
	j->bad = 0;
	j->done = 0;
	j->t_begin = kn_now_ns();
	if (j->test == PERF_WRITE_LAT) {
		kn_ticket_t u = 0;
		for (uint64_t k = 0; k < total; k++) {
			uint8_t stamp = (uint8_t)(k % 255u + 1u);
			if (perf_wait_byte(j, j->t_land, stamp, k ? tq : (const kn_qp *)0, u, k))
				break;
			((volatile uint8_t *)(uintptr_t)j->t_laddr)[j->size - 1] = stamp;
			if ((rc = perf_write_one(j, tq, j->t_laddr, j->t_lkey, j->t_raddr, j->t_rkey,
						 &u))) {
				perf_fail(j, tq, rc, PERF_STEP_POST);
				break;
			}
			j->done = k + 1;
		}
		if (!j->rc && (rc = kn_quiet(tq)))
			perf_fail(j, tq, rc, PERF_STEP_CQE);
	} else if (j->test == PERF_SEND_LAT) {
		kn_ticket_t u = 0;
		for (uint64_t k = 0; k < total; k++) {
			uint8_t stamp = (uint8_t)(k % 255u + 1u);
			if (perf_rx_fill(j, tq, j->t_land, j->t_lkey, &j->rx_posted, j->rx_done,
					 total) ||
			    perf_rx_wait(j, tq, j->t_land, &j->rx_done, stamp,
					 k ? tq : (const kn_qp *)0, u, k))
				break;
			/* the next message's receive is posted before the reply */
			if (perf_rx_fill(j, tq, j->t_land, j->t_lkey, &j->rx_posted, j->rx_done,
					 total))
				break;
			if ((rc = perf_send_one(j, tq, j->t_laddr, j->t_lkey, stamp, &u))) {
				perf_fail(j, tq, rc, PERF_STEP_POST);
				break;
			}
			j->done = k + 1;
		}
		if (!j->rc && (rc = kn_quiet(tq)))
			perf_fail(j, tq, rc, PERF_STEP_CQE);
	} else if (j->test == PERF_SEND_BW && j->t_stop) {
		perf_target_rx_until_stop(j);
		j->done = j->rx_done;
	} else if (j->test == PERF_SEND_BW) {
		for (uint64_t k = 0; k < total && !j->rc; k++)
			perf_rx_ready(j, k);
		while (!j->rc && j->rx_done < total)
			perf_rx_poll(j, 1);
		j->done = j->rx_done;
	}
	j->t_end = kn_now_ns();
	return j->rc;
}

/* The whole job: warm-up, barrier, timed phase, barrier, drain. Returns 0 or
 * the job's error (also in j->rc, j->step, j->syndrome). A target job runs
 * perf_target_run() instead. */
KN_INLINE int perf_body_run(struct perf_job *j)
{
	if (j->role == PERF_ROLE_TARGET)
		return perf_target_run(j);
	int lat = j->test == PERF_WRITE_LAT || j->test == PERF_READ_LAT ||
		  j->test == PERF_ATOMIC_LAT || j->test == PERF_SEND_LAT;
	uint64_t k = 0;
	j->rx_posted = j->rx_done = 0;
	j->irx_posted = j->irx_done = 0;
	j->bad = 0;
	j->done = 0;
	j->lat_sum = 0;
	if (!j->rc)
		(void)(lat ? perf_lat_phase(j, &k, j->warmup) : perf_bw_phase(j, &k, j->warmup));
	perf_barrier(j, 1);
	j->t_begin = kn_now_ns();
	if (!j->rc)
		(void)(lat ? perf_lat_phase(j, &k, perf_job_limit(j))
			   : perf_bw_phase(j, &k, perf_job_limit(j)));
	j->t_end = kn_now_ns();
	j->done = k > j->warmup ? k - j->warmup : 0;
	perf_barrier(j, 2);
	if (!j->rc)
		perf_drain(j);
	if (!j->rc && j->stop_raddr)
		perf_send_stop(j, k);
	return j->rc;
}

#endif /* KINET_PERF_BODY_H */

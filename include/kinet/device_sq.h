/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_sq.h - the send path of the device data path, thread scope:
 * reserving send-queue slots, publishing the WQEs written into them in
 * order, ringing the doorbell, and consuming the send CQ (completion of a
 * ticket, the first error). The operations that fill the slots are in
 * kinet/device_ops.h; include kinet/device.h rather than this header.
 *
 * Conventions
 *  - a ticket is one 64-byte basic block (WQEBB); tickets:
 *    kinet/device_types.h. Every WQE the device API posts is one WQEBB except
 *    the 8-byte masked compare-and-swap (two).
 *  - every WQE the device API posts is signaled, and the send CQ is dedicated
 *    and as deep as the SQ, so the CQEs complete the WQEs in order, one each:
 *    CQE number k (st->cq_ci counts them) completes the WQE that starts at
 *    ticket st->done, and done moves past its WQEBBs.
 *  - a slot is reused only once the CQE of its previous occupant has been
 *    consumed: a full SQ waits on completions, nothing is overwritten.
 *  - return values: 0, -EBUSY (not yet), -EIO (error CQE; kn_qp_error() gives
 *    the syndrome), -ETIMEDOUT (qp->timeout_ns elapsed), -EINVAL (bad argument).
 *
 * Public: kn_cq_progress, kn_ticket_status, kn_test, kn_wait, kn_qp_error,
 * kn_sq_reserve, kn_wqe_ptr, kn_sq_submit, kn_quiet. The knx_ functions and
 * types are the implementation (shared with kinet/device_ops.h and
 * kinet/device_cuda.cuh), not API.
 */
#ifndef KINET_DEVICE_SQ_H
#define KINET_DEVICE_SQ_H

#include <stddef.h>
#include <stdint.h>
#include <kinet/prm.h>
#include <kinet/device_types.h>
#include <kinet/device_port.h>

/* The send CQE at index idx. */
KN_INLINE struct kn_cqe64 *knx_cqe_at(const kn_qp *qp, uint64_t idx)
{
	return (struct kn_cqe64 *)(qp->cq + (size_t)(idx & (qp->cq_cqe_cnt - 1)) * KN_CQE_SIZE);
}

/* The op_own byte of send CQE idx, read once (the NIC writes it last). */
KN_INLINE uint8_t knx_cqe_own(const kn_qp *qp, uint64_t idx)
{
	return *(volatile const uint8_t *)&knx_cqe_at(qp, idx)->op_own;
}

/* The last 8 bytes of send CQE idx in one load: the WQE opcode (byte 56: the
 * top byte of sop_drop_qpn / s_wqe_opcode_qpn, big-endian), wqe_counter,
 * signature and op_own (byte 63, bits 56..63 of the value). One aligned
 * 8-byte access: a CQE whose op_own it shows valid shows its opcode too
 * (the NIC writes op_own last). */
KN_INLINE uint64_t knx_cqe_tail(const kn_qp *qp, uint64_t idx)
{
	return *(volatile const uint64_t *)((const uint8_t *)knx_cqe_at(qp, idx) + 56);
}

/* WQEBBs of the WQE starting at ticket t, whose CQE has opcode op (op_own >>
 * 4) and WQE opcode wop. Every device-API WQE is one WQEBB but the 8-byte
 * masked compare-and-swap; its size (and that of any WQE completed in error,
 * whose CQE may not name the opcode) is read from the WQE's ds: the slot is
 * not reused before done moves past it. */
KN_INLINE uint32_t knx_wqe_nbb(const kn_qp *qp, uint64_t t, uint8_t op, uint8_t wop)
{
	if (wop != KN_OPCODE_ATOMIC_MASKED_CS && op != KN_CQE_REQ_ERR && op != KN_CQE_RESP_ERR)
		return 1;
	const uint8_t *w = qp->sq + (size_t)(t & (qp->sq_wqe_cnt - 1)) * KN_SEND_WQE_BB;
	uint32_t ds = *(volatile const uint8_t *)(w + 7) & 0x3fu; /* low byte of qpn_ds */
	uint32_t nbb = (ds * 16u + 63u) / 64u;
	return nbb ? nbb : 1u;
}

/* Records the first error of the QP (its ticket and syndrome). */
KN_INLINE void knx_record_error(const kn_qp *qp, uint64_t ticket, const struct kn_cqe64 *cqe)
{
	const struct kn_err_cqe *e = (const struct kn_err_cqe *)cqe;
	uint64_t prev = KN_LOAD64(&qp->st->err_ticket);
	while (ticket < prev) {
		uint64_t seen = KN_CAS64(&qp->st->err_ticket, prev, ticket);
		if (seen == prev) {
			KN_STORE32(&qp->st->err_syndrome, e->syndrome);
			KN_STORE32(&qp->st->err_vendor, e->vendor_err_synd);
			break;
		}
		prev = seen;
	}
}

/* Consumes every CQE that is there, from st->cq_ci on (the one of the WQE
 * at st->done). One thread at a time (poll_lock); returns the new done
 * value. Non-blocking. */
KN_INLINE uint64_t kn_cq_progress(const kn_qp *qp)
{
	kn_qp_state *st = qp->st;
	if (qp->share != KN_SHARE_EXCLUSIVE && KN_CAS32(&st->poll_lock, 0u, 1u) != 0u)
		return KN_LOAD64(&st->done);
	uint64_t done = KN_LOAD64(&st->done);
	uint64_t start = done;
	uint64_t ci = KN_LOAD64(&st->cq_ci);
	uint64_t limit = KN_LOAD64(&st->ready);
#if defined(__CUDA_ARCH__)
	/* device code: the CQ is in host memory, each read a PCIe round trip;
	 * read the tails of up to 8 CQEs at once, then one acquire fence for
	 * the batch (it also orders the caller's later reads of payloads). At
	 * most limit - done CQEs can be due (a WQE has at least one WQEBB); a
	 * slot not written yet shows the owner bit of its previous lap. */
	while (done < limit) {
		uint32_t m = limit - done < 8 ? (uint32_t)(limit - done) : 8u;
		uint64_t tw[8];
#pragma unroll
		for (uint32_t k = 0; k < 8; k++)
			tw[k] = k < m ? knx_cqe_tail(qp, ci + k) : (uint64_t)(KN_CQE_INVALID << 4) << 56;
		uint32_t got = 0;
#pragma unroll
		for (uint32_t k = 0; k < 8; k++) {
			uint64_t i = ci + k;
			uint8_t own = (uint8_t)(tw[k] >> 56);
			if (got != k || (own >> 4) == KN_CQE_INVALID ||
			    (own & 1) != ((i / qp->cq_cqe_cnt) & 1))
				continue;
			got++;
		}
		if (!got)
			break;
		KN_BAR_CQE_DATA();
		for (uint32_t k = 0; k < got; k++) {
			uint8_t op = (uint8_t)(tw[k] >> 60);
			if (op == KN_CQE_REQ_ERR || op == KN_CQE_RESP_ERR)
				knx_record_error(qp, done, knx_cqe_at(qp, ci + k));
			done += knx_wqe_nbb(qp, done, op, (uint8_t)tw[k]);
		}
		ci += got;
		if (got < m)
			break;
	}
#else
	while (done < limit) {
		struct kn_cqe64 *cqe = knx_cqe_at(qp, ci);
		if (!kn_cqe_ready(cqe, ci, qp->cq_cqe_cnt))
			break;
		KN_BAR_CQE_DATA();
		uint8_t op = kn_cqe_opcode(cqe);
		if (op == KN_CQE_REQ_ERR || op == KN_CQE_RESP_ERR)
			knx_record_error(qp, done, cqe);
		done += knx_wqe_nbb(qp, done, op, (uint8_t)(kn_be32toh(cqe->sop_drop_qpn) >> 24));
		ci++;
	}
#endif
	if (done != start) {
		/* consumer index for the NIC (CQ overflow protection) */
		*qp->cq_dbrec = kn_htobe32((uint32_t)(ci & 0xffffff));
#if defined(__CUDA_ARCH__)
		if (qp->share == KN_SHARE_EXCLUSIVE) {
			st->cq_ci = ci;
			st->done = done; /* one consumer: no ordering to publish */
		} else {
			/* the next lock holder's consumer index must reach the NIC
			 * after ours: a GPU-scope release does not order writes to
			 * host memory as the CPU sees them */
			KN_FENCE_REL();
			KN_STORE64(&st->cq_ci, ci);
			KN_STORE64(&st->done, done);
		}
#else
		KN_STORE64(&st->cq_ci, ci);
		KN_STORE64(&st->done, done);
#endif
	}
	if (qp->share != KN_SHARE_EXCLUSIVE)
		KN_STORE32(&st->poll_lock, 0u);
	return done;
}

/* Status of a ticket whose CQE has been consumed (ticket < the value
 * kn_cq_progress returned): 0, or -EIO when it completed in error. */
KN_INLINE int kn_ticket_status(const kn_qp *qp, kn_ticket_t ticket)
{
#if defined(__CUDA_ARCH__)
	/* the caller's load of done acquires err_ticket and the payloads; the
	 * owner of an exclusive QP consumed the CQEs itself, fenced then */
	if (qp->share != KN_SHARE_EXCLUSIVE)
		KN_FENCE_ACQ();
#endif
	return ticket >= KN_LOAD64(&qp->st->err_ticket) ? -EIO : 0;
}

/* Non-blocking test of one ticket: 0 done, -EIO error, -EBUSY not yet. */
KN_INLINE int kn_test(const kn_qp *qp, kn_ticket_t ticket)
{
	if (ticket < KN_LOAD64(&qp->st->done) || ticket < kn_cq_progress(qp))
		return kn_ticket_status(qp, ticket);
	return -EBUSY;
}

/* Blocking wait for one ticket, bounded by qp->timeout_ns. */
KN_INLINE int kn_wait(const kn_qp *qp, kn_ticket_t ticket)
{
	uint64_t t0 = 0;
	unsigned spins = 0;
	for (;;) {
		int rc = kn_test(qp, ticket);
		if (rc != -EBUSY)
			return rc;
		if ((++spins & 255u) == 0) {
			uint64_t now = kn_now_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 > qp->timeout_ns)
				return -ETIMEDOUT;
		}
		KN_PAUSE();
	}
}

/* Syndrome (and vendor syndrome) of the QP's first error CQE; 0 if none. */
KN_INLINE uint32_t kn_qp_error(const kn_qp *qp, uint32_t *vendor)
{
	if (KN_LOAD64(&qp->st->err_ticket) == KN_NO_ERROR)
		return 0;
	if (vendor)
		*vendor = KN_LOAD32(&qp->st->err_vendor);
	return KN_LOAD32(&qp->st->err_syndrome);
}

/* Reserves n consecutive SQ slots and returns the first ticket in *ticket.
 * Waits (bounded) while the SQ is full. In exclusive mode only the owner may
 * call it; in shared modes any thread may. -ETIMEDOUT: nothing is reserved
 * (in shared modes, unless other threads reserved after this one meanwhile:
 * then publication stops at the abandoned tickets and the QP needs a reset). */
KN_INLINE int kn_sq_reserve(const kn_qp *qp, uint32_t n, kn_ticket_t *ticket)
{
	kn_qp_state *st = qp->st;
	uint64_t t;
	if (n == 0 || n > qp->sq_wqe_cnt)
		return -EINVAL;
	if (qp->share == KN_SHARE_EXCLUSIVE) {
		t = st->resv;
		st->resv = t + n;
	} else {
		t = KN_FADD64(&st->resv, n);
	}
	*ticket = t;
	/* the slots of t .. t+n-1 last held t-cnt .. t+n-1-cnt */
	uint64_t need = t + n - qp->sq_wqe_cnt; /* done must exceed need-1 */
#if defined(__CUDA_ARCH__)
	/* device code: the owner of an exclusive QP is the only writer of done */
	uint64_t d = qp->share == KN_SHARE_EXCLUSIVE ? st->done : KN_LOAD64(&st->done);
	if (t + n <= qp->sq_wqe_cnt || d >= need)
		return 0;
#else
	if (t + n <= qp->sq_wqe_cnt || KN_LOAD64(&st->done) >= need)
		return 0;
#endif
	uint64_t t0 = kn_now_ns();
	while (kn_cq_progress(qp) < need) {
		if (kn_now_ns() - t0 > qp->timeout_ns) {
			/* give the tickets back: a reserved ticket never published
			 * would stop publication (shared modes) or let the NIC run
			 * the slot's previous WQE again (exclusive). In shared modes
			 * this works while nobody has reserved after us. */
			if (qp->share == KN_SHARE_EXCLUSIVE)
				st->resv = t;
			else
				KN_CAS64(&st->resv, t + n, t);
			return -ETIMEDOUT;
		}
		KN_PAUSE();
	}
	return 0;
}

/* Address of the WQE of a ticket. */
KN_INLINE void *kn_wqe_ptr(const kn_qp *qp, kn_ticket_t ticket)
{
	return qp->sq + (size_t)(ticket & (qp->sq_wqe_cnt - 1)) * KN_SEND_WQE_BB;
}

/* The doorbell word for producer p without a copy of the last WQE: the
 * first 8 bytes of an mlx5 ctrl segment with the QP number, ds 0 and opcode
 * 0, naming the next producer index p (no WQE has ds 0, so a ConnectX, and
 * the software NIC, read it as a producer index; GPU verbs libraries ring
 * the same word). */
KN_INLINE uint64_t knx_db_word(const kn_qp *qp, uint64_t p)
{
	uint32_t w0 = kn_htobe32((uint32_t)(p & 0xffff) << 8);
	uint32_t w1 = kn_htobe32(qp->qpn << 8);
	return (uint64_t)w0 | ((uint64_t)w1 << 32);
}

#if defined(__CUDACC__)
/* One 64-byte WQE in registers: device code builds a WQE here and stores it
 * into the SQ with four 16-byte writes (the SQ is host memory across PCIe:
 * one write per field would cost one PCIe write each). */
typedef struct __align__(16) knx_wqebb {
	uint64_t q[8];
} knx_wqebb;

KN_INLINE void knx_wqe_store(const kn_qp *qp, kn_ticket_t t, const knx_wqebb *w)
{
	uint4 *d = (uint4 *)kn_wqe_ptr(qp, t);
	const uint4 *s = (const uint4 *)w;
	d[0] = s[0];
	d[1] = s[1];
	d[2] = s[2];
	d[3] = s[3];
}
#endif

/* Rings the doorbell for every WQE below producer p; the caller holds
 * db_lock or owns the QP. own: the ringer's own copy of WQE p-1 (taken
 * before it was published) or NULL; single: the ring covers WQE p-1 alone.
 *
 * As an mlx5 driver rings: the WQEs before the doorbell record, the record
 * before the register; the register gets the whole WQE (BlueFlame: single
 * posts only, in ascending 8- or 16-byte stores with no fence inside, as
 * rdma-core's BlueFlame copy writes) or 8 bytes: the first 8 bytes of the
 * last WQE's ctrl segment, or without a copy the word naming producer p.
 * Rings alternate between the UAR's two registers (kn_qp.bf_alt). The SQ is
 * never read back: once the record names p, the NIC may run WQE p-1 and,
 * its CQE consumed, another thread may write the slot again, so a word read
 * from it could name WQEs that are not published yet. */
KN_INLINE void knx_ring_nic(const kn_qp *qp, uint64_t p, const void *own, int single)
{
	kn_qp_state *st = qp->st;
	const uint64_t *w = (const uint64_t *)own;
	/* loaded before the barrier, so that their latency hides behind it */
	uint32_t off = st->bf_off, alt = qp->bf_alt;
	KN_BAR_WQE_DBR();
	qp->dbrec[KN_SND_DBR] = kn_htobe32((uint32_t)(p & 0xffff));
#if defined(__CUDA_ARCH__)
	/* a NIC that takes the record or the register, whichever it sees first
	 * (KN_QP_DB_UNORDERED: the software NIC, which also checks a BlueFlame
	 * copy against the SQ before it runs it), needs no order between them;
	 * hardware does */
	if ((qp->flags & KN_QP_DB_UNORDERED) == 0u)
		KN_BAR_DBR_REG();
#else
	KN_BAR_DBR_REG();
#endif
	volatile uint64_t *reg = (volatile uint64_t *)(qp->db + off);
	if (qp->db_mode == KN_DB_BLUEFLAME && w && single) {
#if defined(__CUDA_ARCH__)
		for (int i = 0; i < 8; i += 2)
			asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(reg + i), "l"(w[i]),
				     "l"(w[i + 1])
				     : "memory");
#else
		for (int i = 0; i < 8; i++)
			reg[i] = w[i];
#endif
	} else {
		reg[0] = w ? w[0] : knx_db_word(qp, p);
	}
	KN_BAR_REG_FLUSH();
	st->bf_off = off ^ alt;
}

/* knx_ring_nic, or with a CPU proxy (KN_DB_CPU_PROXY) the producer index
 * published for the CPU thread that rings (a CPU observer: full fences). */
KN_INLINE void knx_ring(const kn_qp *qp, uint64_t p, const void *own, int single)
{
	if (qp->db_mode == KN_DB_CPU_PROXY) {
#if defined(__CUDA_ARCH__)
		KN_FENCE_REL(); /* the WQEs before the index the proxy reads */
		*qp->cpu_pi = (uint32_t)p;
#else
		KN_FENCE_SYS();
		*qp->cpu_pi = (uint32_t)p;
		KN_FENCE_SYS();
#endif
		return;
	}
	knx_ring_nic(qp, p, own, single);
}

/* slot_ready mark of the first WQEBB of a WQE of two (its second holds the
 * plain mark): a scan takes the pair together or not at all, so the NIC is
 * never rung with a producer index that cuts a WQE. */
#define KNX_SPAN (1ull << 63)

/* Publishes tickets [t, t+n) and rings the doorbell; last: the caller's own
 * copy of its last WQE (device code builds WQEs in registers) or NULL (the C
 * build then copies that WQE from the SQ before publishing it); span: bit i
 * set when ticket t+i starts a WQE of two WQEBBs (i < 32); the last WQE is
 * the one that starts at t+n-2 when bit n-2 is set, else at t+n-1, and its
 * copy (its first WQEBB: the ctrl word) is what the doorbell rings with.
 * Shared modes: slots are marked ready, and whoever finds the next slot
 * ready advances the in-order "ready" counter past it (a WQE of two WQEBBs:
 * past both marks together), so no thread waits for its predecessors; one
 * thread at a time rings, with a value that never goes backwards, using its
 * own copy only when the ring ends at its own WQE. */
KN_INLINE void knx_sq_submit_span(const kn_qp *qp, kn_ticket_t t, uint32_t n, uint32_t span,
				  const void *last)
{
	kn_qp_state *st = qp->st;
#if !defined(__CUDA_ARCH__)
	uint64_t copy[KN_SEND_WQE_BB / 8];
	if (!last && qp->db_mode != KN_DB_CPU_PROXY) {
		/* the last WQE's first WQEBB (its ctrl word is the doorbell) */
		uint64_t lw = n >= 2 && n - 2 < 32 && ((span >> (n - 2)) & 1u) ? t + n - 2
									    : t + n - 1;
		const volatile uint64_t *src = (const volatile uint64_t *)kn_wqe_ptr(qp, lw);
		for (unsigned i = 0; i < KN_SEND_WQE_BB / 8; i++)
			copy[i] = src[i];
		last = copy;
	}
#endif
	if (qp->share == KN_SHARE_EXCLUSIVE) {
		/* the owner submits in ticket order: the ring covers [t, t+n) */
#if defined(__CUDA_ARCH__)
		st->ready = t + n; /* read by the owner only */
#else
		KN_STORE64(&st->ready, t + n);
#endif
		knx_ring(qp, t + n, last, n == 1);
		st->rung = t + n;
		return;
	}
	uint64_t mask = qp->sq_wqe_cnt - 1;
	KN_FENCE_REL();
#if defined(__CUDA_ARCH__)
	/* device code. The marks: relaxed stores after the release fence above
	 * (it made our WQEs visible to the NIC), then a GPU-scope full fence
	 * (marks and ready live in GPU memory). The advance: only the thread
	 * whose tickets are at the head (ready in [t, t+n)) advances, over a
	 * run of up to 32 marked slots per compare-and-swap, read 8 at a time,
	 * and goes on after each success; a thread behind the head leaves, and
	 * a failed CAS means another thread advanced and goes on itself. The
	 * full fence after a successful CAS pairs with the one after the marks
	 * (store buffering): either the head sees a new mark or its owner sees
	 * itself at the head. Thousands of threads on one QP then cost a few
	 * atomics per run instead of a contended CAS per slot. */
	for (uint32_t i = 0; i < n; i++)
		*(volatile uint64_t *)&qp->slot_ready[(t + i) & mask] =
			(t + i + 1) | (i < 32 && ((span >> i) & 1u) ? KNX_SPAN : 0);
	asm volatile("fence.sc.gpu;" ::: "memory");
	uint64_t r = KN_LOAD64(&st->ready);
	uint64_t h0 = t, h1 = t + n; /* our tickets; then the slot we stand on */
	while (r >= h0 && r < h1) {
		uint64_t e = r;
		for (int chunk = 0; chunk < 4; chunk++) {
			uint64_t v[8];
#pragma unroll
			for (int k = 0; k < 8; k++)
				v[k] = KN_LOAD64(&qp->slot_ready[(e + k) & mask]);
			int k = 0;
#pragma unroll
			for (int j = 0; j < 8; j++) {
				if (k == j && v[j] == e + j + 1)
					k = j + 1;
				else if (k == j && j < 7 && v[j] == ((e + j + 1) | KNX_SPAN) &&
					 v[j + 1] == e + j + 2)
					k = j + 2; /* a WQE of two: both marked */
			}
			e += k;
			if (k < 8)
				break;
		}
		if (e == r)
			break;
		if (KN_CAS64(&st->ready, r, e) != r)
			break;
		asm volatile("fence.sc.gpu;" ::: "memory");
		r = e;
		h0 = e; /* we now stand at the head */
		h1 = e + 1;
	}
#else
	for (uint32_t i = 0; i < n; i++)
		KN_STORE64(&qp->slot_ready[(t + i) & mask],
			   (t + i + 1) | (i < 32 && ((span >> i) & 1u) ? KNX_SPAN : 0));
	KN_FENCE_SYS();
	/* advance ready over every consecutive ready slot (a WQE of two WQEBBs
	 * when both are marked) */
	uint64_t r = KN_LOAD64(&st->ready);
	for (;;) {
		uint64_t m = KN_LOAD64(&qp->slot_ready[r & mask]), step;
		if (m == r + 1)
			step = 1;
		else if (m == ((r + 1) | KNX_SPAN) &&
			 KN_LOAD64(&qp->slot_ready[(r + 1) & mask]) == r + 2)
			step = 2;
		else
			break;
		uint64_t seen = KN_CAS64(&st->ready, r, r + step);
		r = (seen == r) ? r + step : seen;
	}
#endif
#if defined(__CUDA_ARCH__)
	/* our advance of ready before our look at rung/db_lock, against the
	 * holder's release of db_lock before its look at ready (store buffering:
	 * both sides need a full fence; the C build's atomics are seq_cst; all
	 * three words are in GPU memory) */
	asm volatile("fence.sc.gpu;" ::: "memory");
#endif
	/* ring: a single ringer at a time, re-checking after release */
	for (;;) {
		uint64_t ready = KN_LOAD64(&st->ready);
		if (KN_LOAD64(&st->rung) >= ready)
			return;
		if (KN_CAS32(&st->db_lock, 0u, 1u) != 0u)
			return; /* the holder re-checks after releasing */
		ready = KN_LOAD64(&st->ready);
		uint64_t rung = st->rung;
		if (ready > rung) {
			int mine = ready == t + n; /* the ring ends at our own WQE */
			knx_ring(qp, ready, mine ? last : (const void *)0,
				 mine && n == 1 && rung + 1 == ready);
			KN_STORE64(&st->rung, ready);
		}
		KN_FENCE_SYS();
		KN_STORE32(&st->db_lock, 0u);
		KN_FENCE_SYS();
	}
}

/* knx_sq_submit_span for WQEs of one WQEBB each. */
KN_INLINE void knx_sq_submit_last(const kn_qp *qp, kn_ticket_t t, uint32_t n, const void *last)
{
	knx_sq_submit_span(qp, t, n, 0u, last);
}

/* Publishes tickets [t, t+n), whose WQEs the caller has written (every one
 * of them: the NIC executes what is in a published slot; one WQEBB each),
 * and rings the doorbell. In shared modes a thread never waits for slower
 * predecessors: whoever publishes last carries the doorbell past everyone. */
KN_INLINE void kn_sq_submit(const kn_qp *qp, kn_ticket_t t, uint32_t n)
{
	knx_sq_submit_last(qp, t, n, (const void *)0);
}

/* Waits for every ticket reserved so far; 0 or the first error. */
KN_INLINE int kn_quiet(const kn_qp *qp)
{
	uint64_t last = KN_LOAD64(&qp->st->resv);
	if (last == 0)
		return 0;
	/* tickets reserved but not yet published cannot complete: wait for the
	 * publication of all of them first (bounded by kn_wait's timeout). */
	return kn_wait(qp, last - 1);
}

#endif /* KINET_DEVICE_SQ_H */

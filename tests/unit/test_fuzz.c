/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fuzzing the software NIC: 100,000+ WQEs fed through kinet_qp_post_raw,
 * made of random bytes, of valid WQEs with random byte mutations, and of
 * valid WQEs whose keys, addresses and lengths point near and across region
 * edges. Receive WQEs on the target are fuzzed too. Invariants:
 *  - no crash (guard pages around every region turn a wild write into one);
 *  - no write outside a region: canaries next to every region's edges, and
 *    regions nobody may write (remote-read only, local-read only, another
 *    PD's, deregistered) keep their bytes;
 *  - every CQE is a well-formed requester CQE with a known syndrome, and the
 *    engine keeps answering: a QP in ERR is reset (RESET->INIT->RTR->RTS)
 *    and reused (and now and then both QPs are replaced by new ones); the
 *    marker NOP after each batch always completes.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

#define BATCH 8
#define TARGET_WQES 100000
#define RBUF_SLOT 4096
#define RQ 16

enum { R_LW, R_ALL, R_RO, R_RW, R_RBUF, R_OTHER, R_GONE, R_SMALL, R_LRO, NR };

struct fz {
	struct tu_rawpair p;
	kinet_pd *pd2;
	struct tu_region r[NR];
	uint8_t *keep[NR]; /* original bytes of the regions nobody may write */
	uint32_t key[NR];
	uint64_t s;
	uint32_t qpn;
	uint64_t rq_posted, rq_done; /* receive tickets on b */
	int clean; /* generate WQEs that should succeed: own keys, in bounds */
	/* statistics */
	uint64_t fed, batches, resets, ok_cqes, err_cqes, synd[64], recv_err, marker_flushed;
	uint64_t clean_synd[64];
};

static const size_t rlen[NR] = {65536, 65536, 65536, 65536, RQ * RBUF_SLOT, 65536, 65536, 100, 4096};
static const unsigned racc[NR] = {
	KINET_ACCESS_LOCAL_WRITE,
	KINET_ACCESS_ALL,
	KINET_ACCESS_REMOTE_READ,
	KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_WRITE | KINET_ACCESS_REMOTE_READ,
	KINET_ACCESS_LOCAL_WRITE,
	KINET_ACCESS_ALL,
	KINET_ACCESS_ALL,
	KINET_ACCESS_ALL,
	0,
};
static const int never_written[NR] = {[R_RO] = 1, [R_OTHER] = 1, [R_GONE] = 1, [R_LRO] = 1};

static uint64_t rnd(struct fz *f) { return tu_rand64(&f->s); }
static uint32_t below(struct fz *f, uint32_t n) { return n ? (uint32_t)(rnd(f) % n) : 0; }

static void fz_open(struct fz *f, uint64_t seed, uint32_t sq_depth)
{
	memset(f, 0, sizeof(*f));
	f->s = seed;
	cr_assert_eq(tu_rawpair_open(&f->p, sq_depth, RQ), 0);
	cr_assert_eq(kinet_pd_alloc(f->p.ctx, &f->pd2), 0);
	f->qpn = kinet_qp_num(f->p.a);
	for (int i = 0; i < NR; i++) {
		kinet_pd *pd = i == R_OTHER ? f->pd2 : f->p.pd;
		cr_assert_eq(tu_region_alloc(&f->r[i], pd, rlen[i], racc[i], seed + (uint64_t)i), 0);
		f->key[i] = tu_lkey(&f->r[i]);
		if (never_written[i]) {
			f->keep[i] = malloc(rlen[i]);
			memcpy(f->keep[i], f->r[i].buf, rlen[i]);
		}
	}
	cr_assert_eq(kinet_mr_dereg(f->r[R_GONE].mr), 0);
	f->r[R_GONE].mr = NULL;
}

static void fz_check_memory(struct fz *f)
{
	for (int i = 0; i < NR; i++) {
		cr_assert(tu_region_canaries_ok(&f->r[i]), "a canary of region %d changed after %llu WQEs",
			  i, (unsigned long long)f->fed);
		if (never_written[i])
			cr_assert_arr_eq(f->r[i].buf, f->keep[i], rlen[i],
					 "region %d (never writable) changed after %llu WQEs", i,
					 (unsigned long long)f->fed);
	}
}

static void fz_close(struct fz *f)
{
	fz_check_memory(f);
	for (int i = 0; i < NR; i++) {
		tu_region_free(&f->r[i]);
		free(f->keep[i]);
	}
	cr_assert_eq(kinet_pd_free(f->pd2), 0);
	tu_rawpair_close(&f->p);
}

/* ---- random pieces ------------------------------------------------------------ */

/* A key: mostly the region's own, else one of the traps. */
static uint32_t pick_key(struct fz *f, int reg)
{
	uint32_t k = f->key[reg];
	if (f->clean)
		return k;
	switch (below(f, 16)) {
	case 0: return (uint32_t)rnd(f);
	case 1: return 0x100;
	case 2: return f->key[below(f, NR)];
	case 3: return k ^ (1u << below(f, 32));
	case 4: return f->key[R_GONE];
	case 5: return f->key[R_OTHER];
	default: return k;
	}
}

/* An address and length in, near, or across region reg's edges. */
static void pick_range(struct fz *f, int reg, uint64_t *addr, uint32_t *len)
{
	uint64_t base = tu_addr(f->r[reg].buf), rl = rlen[reg];
	uint32_t l;
	if (f->clean) {
		/* a data segment of 0 bytes means 2 GiB to the NIC: never clean */
		l = 1 + below(f, rl < 4096 ? (uint32_t)rl : 4096);
		*addr = base + below(f, (uint32_t)(rl - l + 1));
		*len = l;
		return;
	}
	switch (below(f, 8)) {
	case 0: l = 0; break;
	case 1: l = 1 + below(f, 8); break;
	case 2: l = (uint32_t)rl + below(f, 3) - 1; break; /* around the whole region */
	case 3: l = (uint32_t)rnd(f); break;                /* anything */
	default: l = 1 + below(f, rl < 4096 ? (uint32_t)rl : 4096); break;
	}
	int64_t off;
	switch (below(f, 6)) {
	case 0: off = -(int64_t)below(f, 64) - 1; break;               /* before the start */
	case 1: off = (int64_t)rl - (int64_t)l + (int64_t)below(f, 8) - 3; break; /* end edge */
	case 2: off = (int64_t)rl + below(f, 64); break;               /* past the end */
	case 3: off = (int64_t)(rnd(f) >> 1) - (int64_t)(base >> 1); break; /* anywhere */
	default: off = l < rl ? below(f, (uint32_t)(rl - l + 1)) : 0; break;
	}
	*addr = base + (uint64_t)off;
	*len = l;
}

/* remote: 0 local gather, 1 remote target, 2 local scatter */
static int pick_reg(struct fz *f, int remote)
{
	if (f->clean) {
		static const int cl[] = {R_LW, R_ALL, R_RW, R_LRO}, ct[] = {R_ALL, R_RW};
		return remote == 1 ? ct[below(f, 2)] : cl[below(f, remote ? 3 : 4)];
	}
	static const int local[] = {R_LW, R_LW, R_ALL, R_RW, R_LRO, R_SMALL, R_RO, R_GONE, R_OTHER};
	static const int rem[] = {R_ALL, R_ALL, R_RW, R_RO, R_SMALL, R_LW, R_GONE, R_OTHER, R_LRO};
	return remote == 1 ? rem[below(f, 9)] : local[below(f, 9)];
}

/* Gather/scatter list from off up to at most `room` bytes; returns the new
 * offset. */
static uint32_t add_segments(struct fz *f, uint8_t *w, uint32_t off, uint32_t room, int inl_ok,
			     int scatter)
{
	int n = 1 + (int)below(f, 4);
	for (int i = 0; i < n && off + 16 <= room; i++) {
		if (inl_ok && below(f, 4) == 0) {
			uint32_t l = below(f, 44);
			if (off + 4 + l > room)
				l = room - off - 4;
			*(uint32_t *)(w + off) = kn_htobe32(l | KN_INLINE_SEG);
			tu_fill_random(w + off + 4, l, rnd(f));
			off += (4 + l + 15) & ~15u;
		} else {
			int reg = pick_reg(f, scatter ? 2 : 0);
			uint64_t a;
			uint32_t l;
			pick_range(f, reg, &a, &l);
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + off), l, pick_key(f, reg), a);
			off += 16;
		}
	}
	return off;
}

/* A valid-looking WQE at ticket t: returns its nbb. */
static uint32_t gen_valid(struct fz *f, uint8_t *w, uint64_t t)
{
	static const uint8_t ops[] = {KN_OPCODE_NOP,        KN_OPCODE_RDMA_WRITE, KN_OPCODE_RDMA_WRITE,
				      KN_OPCODE_RDMA_WRITE_IMM, KN_OPCODE_SEND, KN_OPCODE_SEND_IMM,
				      KN_OPCODE_RDMA_READ,  KN_OPCODE_RDMA_READ, KN_OPCODE_ATOMIC_CS,
				      KN_OPCODE_ATOMIC_FA};
	uint8_t op = ops[below(f, sizeof(ops))];
	memset(w, 0, KN_MAX_WQE_BBS * KN_SEND_WQE_BB);
	uint32_t room = 16 * (1 + below(f, 63)); /* ds up to 63 */
	uint32_t off = 16;
	uint64_t a;
	uint32_t l;
	int reg;
	switch (op) {
	case KN_OPCODE_NOP:
		break;
	case KN_OPCODE_RDMA_WRITE:
	case KN_OPCODE_RDMA_WRITE_IMM:
	case KN_OPCODE_RDMA_READ:
		off = add_segments(f, w, 32, room < 48 ? 48 : room, op != KN_OPCODE_RDMA_READ,
				   op == KN_OPCODE_RDMA_READ);
		reg = pick_reg(f, 1);
		pick_range(f, reg, &a, &l);
		if (f->clean) { /* the remote range as long as the local list */
			uint64_t total = 0;
			for (uint32_t o = 32; o < off;) {
				uint32_t bc = kn_be32toh(*(uint32_t *)(w + o));
				total += bc & ~KN_INLINE_SEG;
				o += bc & KN_INLINE_SEG ? (4 + (bc & ~KN_INLINE_SEG) + 15) & ~15u : 16;
			}
			a = tu_addr(f->r[reg].buf);
			if (total < rlen[reg])
				a += below(f, (uint32_t)(rlen[reg] - total + 1));
		}
		kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), a, pick_key(f, reg));
		break;
	case KN_OPCODE_SEND:
	case KN_OPCODE_SEND_IMM:
		if (f->clean)
			room = 32; /* one receive buffer of 4 KiB takes one 4 KiB piece */
		off = add_segments(f, w, 16, room < 32 ? 32 : room, 1, 0);
		break;
	default: /* atomics */
		reg = below(f, 2) || f->clean ? R_ALL : pick_reg(f, 1);
		pick_range(f, reg, &a, &l);
		if (below(f, 3) || f->clean)
			a &= ~7ull;
		kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), a, pick_key(f, reg));
		kn_set_atomic_seg((struct kn_wqe_atomic_seg *)(w + 32), rnd(f), rnd(f));
		reg = pick_reg(f, 2);
		pick_range(f, reg, &a, &l);
		if (f->clean && l < 8)
			a = tu_addr(f->r[reg].buf);
		kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), below(f, 4) || f->clean ? 8 : l,
				pick_key(f, reg), below(f, 2) ? a & ~7ull : a);
		off = 64;
		break;
	}
	uint8_t fm = below(f, 4) || f->clean ? KN_WQE_CTRL_CQ_UPDATE : (uint8_t)below(f, 256);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)t, op, 0, f->qpn, fm,
			(uint8_t)(off / 16), 0, (uint32_t)rnd(f));
	return (off + 63) / 64;
}

static uint32_t nbb_of(const uint8_t *w)
{
	uint32_t ds = kn_wqe_ds_of((const struct kn_wqe_ctrl_seg *)w);
	return ds ? (ds * 16 + 63) / 64 : 1;
}

/* One fuzz WQE at ticket t; returns its nbb (what the NIC will consume).
 * In a clean batch every WQE should succeed. */
static uint32_t gen_fuzz(struct fz *f, uint8_t *w, uint64_t t)
{
	if (f->clean)
		return gen_valid(f, w, t);
	switch (below(f, 8)) {
	case 0: { /* random bytes */
		tu_fill_random(w, KN_MAX_WQE_BBS * KN_SEND_WQE_BB, rnd(f));
		struct kn_wqe_ctrl_seg *c = (struct kn_wqe_ctrl_seg *)w;
		uint32_t r = below(f, 4);
		if (r >= 1) { /* index and QP right, the rest random */
			uint8_t op = r == 3 ? (uint8_t)below(f, 0x14) : kn_wqe_opcode_of(c);
			kn_set_ctrl_seg(c, (uint16_t)t, op, (uint8_t)rnd(f), f->qpn, c->fm_ce_se,
					kn_wqe_ds_of(c), c->signature, c->imm);
		}
		return nbb_of(w);
	}
	case 1:
	case 2: { /* a valid WQE with a few bytes changed */
		f->clean = 1;
		gen_valid(f, w, t);
		f->clean = 0;
		uint32_t span = kn_wqe_ds_of((struct kn_wqe_ctrl_seg *)w) * 16;
		int n = 1 + (int)below(f, 4);
		int keep_ctrl = below(f, 2);
		for (int i = 0; i < n; i++) {
			uint32_t at = keep_ctrl ? 8 + below(f, span > 8 ? span - 8 : 1) : below(f, span);
			w[at] ^= (uint8_t)(1u << below(f, 8)) | (uint8_t)(below(f, 2) ? rnd(f) : 0);
		}
		return nbb_of(w);
	}
	default: /* valid shape, random keys, addresses and lengths */
		return gen_valid(f, w, t);
	}
}

/* ---- receives on b -------------------------------------------------------------- */

/* A receive WQE written as a raw producer would (kn_recv_post refuses a
 * length over KN_MAX_LEN, but the NIC must cope with whatever is there). */
static kn_ticket_t raw_recv_post(struct fz *f, uint64_t addr, uint32_t lkey, uint32_t len)
{
	const kn_qp *d = f->p.db;
	kn_ticket_t t = d->st->rq_resv;
	struct kn_wqe_data_seg *seg =
		(struct kn_wqe_data_seg *)(d->rq + (size_t)(t & (d->rq_wqe_cnt - 1)) * d->rq_stride);
	kn_set_data_seg(seg, len, lkey, addr);
	for (uint32_t off = 16; off < d->rq_stride; off += 16)
		kn_set_data_seg(seg + off / 16, 0, 0x100, 0);
	d->st->rq_resv = t + 1;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	d->dbrec[KN_RCV_DBR] = kn_htobe32((uint32_t)((t + 1) & 0xffff));
	return t;
}

static void top_up_receives(struct fz *f)
{
	while (f->rq_posted - f->rq_done < RQ) {
		kn_ticket_t rt;
		uint8_t *buf = f->r[R_RBUF].buf + (f->rq_posted % RQ) * RBUF_SLOT;
		uint32_t lkey = f->key[R_RBUF], len = RBUF_SLOT;
		uint64_t addr = tu_addr(buf);
		if (below(f, 10) == 0) { /* a fuzzed receive WQE */
			int reg = pick_reg(f, 0);
			pick_range(f, reg, &addr, &len);
			lkey = pick_key(f, reg);
		}
		int rc = kn_recv_post(f->p.db, (void *)(uintptr_t)addr, lkey, len, &rt);
		if (len > KN_MAX_LEN) {
			cr_assert_eq(rc, -EINVAL, "recv post of %#x bytes: %d", len, rc);
			cr_assert_eq(f->p.db->st->rq_resv, f->rq_posted, "refused, yet posted");
			rt = raw_recv_post(f, addr, lkey, len);
			rc = 0;
		}
		cr_assert_eq(rc, 0, "recv post: %d", rc);
		cr_assert_eq(rt, f->rq_posted);
		f->rq_posted++;
	}
}

static void drain_receives(struct fz *f)
{
	while (f->rq_done < f->rq_posted) {
		kn_recv_info info;
		int rc = kn_recv_poll(f->p.db, f->rq_done, 0, &info);
		if (rc == -EBUSY)
			return;
		cr_assert(rc == 0 || rc == -EIO, "receive poll: %d", rc);
		if (rc == -EIO) {
			cr_assert(info.syndrome == KN_SYND_WR_FLUSH_ERR ||
				  info.syndrome == KN_SYND_LOCAL_LENGTH_ERR ||
				  info.syndrome == KN_SYND_LOCAL_PROT_ERR,
				  "receive CQE syndrome 0x%x", info.syndrome);
			f->recv_err++;
		} else {
			cr_assert(info.opcode == KN_CQE_RESP_SEND || info.opcode == KN_CQE_RESP_SEND_IMM ||
				  info.opcode == KN_CQE_RESP_WR_IMM, "receive CQE opcode %u", info.opcode);
		}
		f->rq_done++;
	}
}

/* New QPs (and send CQ) in place of the old ones, same PD and regions. */
static void fz_new_qps(struct fz *f)
{
	struct tu_rawpair *p = &f->p;
	uint32_t depth = kinet_cq_depth(p->acq);
	cr_assert_eq(kinet_qp_destroy(p->a), 0);
	cr_assert_eq(kinet_qp_destroy(p->b), 0);
	if (!p->own_acq) {
		cr_assert_eq(kinet_cq_destroy(p->acq), 0);
		cr_assert_eq(kinet_cq_create(p->ctx, depth, &p->acq), 0);
	}
	struct kinet_qp_attr aa = {.sq_depth = depth, .send_cq = p->own_acq ? NULL : p->acq};
	struct kinet_qp_attr ba = {.sq_depth = depth, .rq_depth = RQ};
	cr_assert_eq(kinet_qp_create(p->pd, &aa, &p->a), 0);
	if (p->own_acq)
		p->acq = kinet_qp_send_cq(p->a);
	cr_assert_eq(kinet_qp_create(p->pd, &ba, &p->b), 0);
	cr_assert_eq(kinet_qp_connect_local(p->a, p->b), 0);
	cr_assert_eq(kinet_qp_device(p->b, &p->db), 0);
	p->pi = 0;
	f->qpn = kinet_qp_num(p->a);
	f->rq_posted = f->rq_done = 0;
}

/* ---- one batch ----------------------------------------------------------------------- */

static int known_syndrome(uint8_t s)
{
	switch (s) {
	case KN_SYND_LOCAL_LENGTH_ERR:
	case KN_SYND_LOCAL_QP_OP_ERR:
	case KN_SYND_LOCAL_PROT_ERR:
	case KN_SYND_WR_FLUSH_ERR:
	case KN_SYND_REMOTE_INVAL_REQ_ERR:
	case KN_SYND_REMOTE_ACCESS_ERR:
	case KN_SYND_REMOTE_OP_ERR:
	case KN_SYND_RNR_RETRY_EXC_ERR:
		return 1;
	default:
		return 0;
	}
}

static void batch(struct fz *f, int nwqe, int clean)
{
	static uint8_t w[KN_MAX_WQE_BBS * KN_SEND_WQE_BB];
	f->clean = 0;
	top_up_receives(f);
	f->clean = clean;
	uint64_t first = f->p.pi;
	for (int i = 0; i < nwqe; i++) {
		uint32_t nbb = gen_fuzz(f, w, f->p.pi);
		tu_post(&f->p, w, nbb);
		f->fed++;
	}
	/* the marker: a signaled NOP; its CQE (done or flushed) comes last */
	memset(w, 0, KN_SEND_WQE_BB);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)f->p.pi, KN_OPCODE_NOP, 0, f->qpn,
			KN_WQE_CTRL_CQ_UPDATE, 1, 0, 0);
	uint64_t marker = tu_post(&f->p, w, 1);
	f->clean = 0;
	int errors = 0;
	for (;;) {
		struct kn_cqe64 c;
		int rc = tu_poll(f->p.acq, &c, 10000);
		cr_assert_eq(rc, 0, "the engine stopped answering after %llu WQEs (batch %llu)",
			     (unsigned long long)f->fed, (unsigned long long)f->batches);
		uint8_t op = tu_cqe_op(&c);
		uint16_t idx = tu_cqe_idx(&c);
		cr_assert((uint16_t)(idx - (uint16_t)first) <= (uint16_t)(marker - first),
			  "CQE names WQE %u outside the batch [%llu, %llu]", idx,
			  (unsigned long long)first, (unsigned long long)marker);
		if (op == KN_CQE_REQ_ERR) {
			uint8_t s = tu_cqe_synd(&c);
			cr_assert(known_syndrome(s), "unexpected syndrome 0x%x", s);
			f->synd[s & 63]++;
			if (clean)
				f->clean_synd[s & 63]++;
			f->err_cqes++;
			errors++;
		} else {
			cr_assert_eq(op, KN_CQE_REQ, "CQE opcode %u on the send CQ", op);
			f->ok_cqes++;
		}
		if (idx == (uint16_t)marker) {
			if (op != KN_CQE_REQ)
				f->marker_flushed++;
			break;
		}
	}
	cr_assert_eq(kinet_cq_poll(f->p.acq, &(struct kn_cqe64){0}), -EBUSY,
		     "a CQE after the marker's");
	drain_receives(f);
	int sa = kinet_qp_get_state(f->p.a), sb = kinet_qp_get_state(f->p.b);
	if (!errors) {
		cr_assert_eq(sa, KINET_QPS_RTS, "requester left RTS without an error CQE");
		cr_assert_eq(sb, KINET_QPS_RTS, "responder left RTS without a requester error");
	} else {
		cr_assert_eq(sa, KINET_QPS_ERR, "error CQE, but the requester is in %s",
			     kinet_qp_state_str(sa));
		cr_assert_eq(tu_rawpair_reconnect(&f->p), 0);
		f->rq_posted = f->rq_done = 0;
		f->resets++;
	}
	f->batches++;
}

static void fuzz_run(uint64_t seed, uint32_t sq_depth)
{
	struct fz f;
	fz_open(&f, seed, sq_depth);
	while (f.fed < TARGET_WQES) {
		/* half the batches should succeed, the other half mostly fail */
		batch(&f, 1 + (int)below(&f, BATCH), (f.batches & 1) == 0);
		if ((f.batches & 63) == 0)
			fz_check_memory(&f);
		if ((f.batches & 2047) == 0)
			fz_new_qps(&f);
	}
	cr_log_info("fuzz: %llu WQEs in %llu batches, %llu resets, %llu good and %llu error CQEs "
		    "(local QP op %llu, local prot %llu, local length %llu, remote access %llu, "
		    "remote invalid %llu, remote op %llu, flushed %llu), %llu receive errors",
		    (unsigned long long)f.fed, (unsigned long long)f.batches,
		    (unsigned long long)f.resets, (unsigned long long)f.ok_cqes,
		    (unsigned long long)f.err_cqes,
		    (unsigned long long)f.synd[KN_SYND_LOCAL_QP_OP_ERR],
		    (unsigned long long)f.synd[KN_SYND_LOCAL_PROT_ERR],
		    (unsigned long long)f.synd[KN_SYND_LOCAL_LENGTH_ERR],
		    (unsigned long long)f.synd[KN_SYND_REMOTE_ACCESS_ERR],
		    (unsigned long long)f.synd[KN_SYND_REMOTE_INVAL_REQ_ERR],
		    (unsigned long long)f.synd[KN_SYND_REMOTE_OP_ERR],
		    (unsigned long long)f.synd[KN_SYND_WR_FLUSH_ERR], (unsigned long long)f.recv_err);
	/* clean batches fail only on a fuzzed receive WQE of b (receive buffer
	 * too short, or a bad lkey), and what that flushes */
	for (int i = 0; i < 64; i++)
		if (i != KN_SYND_REMOTE_INVAL_REQ_ERR && i != KN_SYND_REMOTE_OP_ERR &&
		    i != KN_SYND_WR_FLUSH_ERR)
			cr_assert_eq(f.clean_synd[i], 0, "%llu errors 0x%x (%s) in clean batches",
				     (unsigned long long)f.clean_synd[i], i, kinet_syndrome_str(i));
	/* the fuzz reached every kind of outcome */
	cr_assert_gt(f.ok_cqes, 10000);
	cr_assert_gt(f.synd[KN_SYND_LOCAL_QP_OP_ERR], 100);
	cr_assert_gt(f.synd[KN_SYND_LOCAL_PROT_ERR], 100);
	cr_assert_gt(f.synd[KN_SYND_REMOTE_ACCESS_ERR], 100);
	cr_assert_gt(f.synd[KN_SYND_WR_FLUSH_ERR], 100);
	cr_assert_gt(f.resets, 100);
	struct kinet_counters c;
	cr_assert_eq(kinet_ctx_counters(f.p.ctx, &c), 0);
	cr_assert_gt(c.wqes, 10000);
	/* and the engine still moves data after all that */
	if (kinet_qp_get_state(f.p.a) != KINET_QPS_RTS)
		cr_assert_eq(tu_rawpair_reconnect(&f.p), 0);
	uint8_t w[64] = {0};
	tu_fill_random(f.r[R_LW].buf, 1000, 1);
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), tu_addr(f.r[R_ALL].buf + 5),
			 f.key[R_ALL]);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), 1000, f.key[R_LW],
			tu_addr(f.r[R_LW].buf));
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)f.p.pi, KN_OPCODE_RDMA_WRITE, 0, f.qpn,
			KN_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
	tu_post(&f.p, w, 1);
	struct kn_cqe64 cqe;
	cr_assert_eq(tu_poll(f.p.acq, &cqe, 10000), 0);
	cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ, "%s", kinet_syndrome_str(tu_cqe_synd(&cqe)));
	cr_assert_arr_eq(f.r[R_ALL].buf + 5, f.r[R_LW].buf, 1000);
	fz_close(&f);
}

Test(fuzz, seed_1_sq_64)
{
	fuzz_run(0xf00dfeed, 64);
}

/* an SQ of 16: WQEs of up to 16 blocks wrap it all the time */
Test(fuzz, seed_2_sq_16)
{
	fuzz_run(0x5eed0002, 16);
}

/* two engine threads: requester and responder on different ones */
Test(fuzz, seed_3_two_engines)
{
	tu_engine_threads = 2;
	fuzz_run(0x5eed0003, 32);
}

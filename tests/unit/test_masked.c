/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The extended (masked) atomics: ConnectX's masked compare-and-swap and
 * masked fetch-and-add (opcodes 0x14 / 0x15), 4 and 8 bytes.
 *  - the WQE bytes kinet builds against rdma-core's <infiniband/mlx5dv.h>
 *    (opcodes, ctrl and data segments through mlx5dv_set_*) and the operand
 *    layouts rdma-core's providers use (struct mlx5_wqe_masked_atomic_seg:
 *    swap_add, compare, swap_add_mask, compare_mask; the 4-byte forms packed
 *    into 16 bytes; opmod 0x08 | (log2(size) - 2));
 *  - the software NIC executing exactly those WQEs, against a reference
 *    model written bit by bit (not with the NIC's own formula), on random
 *    words and operands: every kn_amo, raw masks and field boundaries;
 *  - atomicity: threads hammering one word with masked adds, xors, ands/ors
 *    and compare-and-swaps end with exactly the combined result;
 *  - the two-WQEBB WQE (8-byte masked CS): at the end of the SQ (its second
 *    WQEBB in slot 0), in a shared QP among many threads, as a SET signal
 *    behind a put, and the completion accounting after an error;
 *  - malformed WQEs and bad targets answered with the IB error CQEs.
 */
#include <criterion/criterion.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

#if __has_include(<infiniband/mlx5dv.h>)
#include <infiniband/mlx5dv.h>
#define HAVE_MLX5DV 1
#else
#define HAVE_MLX5DV 0
#endif

#define REGION (1u << 20)

/* ---- reference model, bit by bit ------------------------------------------- */

static uint64_t ref_mask(uint32_t size)
{
	return size == 4 ? 0xffffffffull : ~0ull;
}

/* Masked compare-and-swap: bit by bit. */
static uint64_t ref_masked_cs(uint32_t size, uint64_t old, uint64_t swap, uint64_t cmp,
			      uint64_t smask, uint64_t cmask)
{
	for (uint32_t b = 0; b < size * 8; b++) {
		uint64_t bit = 1ull << b;
		if ((cmask & bit) && ((old ^ cmp) & bit))
			return old; /* a compared bit differs */
	}
	uint64_t nv = 0;
	for (uint32_t b = 0; b < size * 8; b++) {
		uint64_t bit = 1ull << b;
		nv |= (smask & bit) ? (swap & bit) : (old & bit);
	}
	return nv;
}

/* Masked fetch-and-add: a ripple-carry adder whose carry is dropped after
 * every bit set in the boundary. */
static uint64_t ref_masked_fa(uint32_t size, uint64_t old, uint64_t add, uint64_t boundary)
{
	uint64_t nv = 0, carry = 0;
	for (uint32_t b = 0; b < size * 8; b++) {
		uint64_t x = (old >> b) & 1, y = (add >> b) & 1;
		uint64_t s = x ^ y ^ carry;
		carry = (x & y) | (x & carry) | (y & carry);
		nv |= s << b;
		if ((boundary >> b) & 1)
			carry = 0;
	}
	return nv;
}

/* What each kn_amo must leave in the word, from its definition. */
static uint64_t ref_amo(int amo, uint32_t size, uint64_t old, uint64_t v, uint64_t cmp)
{
	uint64_t m = ref_mask(size);
	old &= m, v &= m, cmp &= m;
	switch (amo) {
	case KN_AMO_FETCH_ADD:
		return (old + v) & m;
	case KN_AMO_COMPARE_SWAP:
		return old == cmp ? v : old;
	case KN_AMO_SWAP:
		return v;
	case KN_AMO_FETCH:
		return old;
	case KN_AMO_FETCH_AND:
		return old & v;
	case KN_AMO_FETCH_OR:
		return old | v;
	default:
		return old ^ v;
	}
}

static uint64_t load_n(const void *p, uint32_t size)
{
	if (size == 4) {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void store_n(void *p, uint32_t size, uint64_t v)
{
	if (size == 4) {
		uint32_t w = (uint32_t)v;
		memcpy(p, &w, 4);
	} else {
		memcpy(p, &v, 8);
	}
}

/* ---- the bytes of the WQEs ------------------------------------------------------ */

Test(masked, opcodes_and_layouts)
{
	cr_assert_eq(KN_OPMOD_EXT_ATOMIC_4, KN_OPMOD_EXT_ATOMIC(2));
	cr_assert_eq(KN_OPMOD_EXT_ATOMIC_8, KN_OPMOD_EXT_ATOMIC(3));
	cr_assert_eq(KN_OPMOD_EXT_ATOMIC_4, 0x08);
	cr_assert_eq(KN_OPMOD_EXT_ATOMIC_8, 0x09);
	cr_assert_eq(sizeof(struct kn_wqe_masked_atomic_seg), 32);
	cr_assert_eq(offsetof(struct kn_wqe_masked_atomic_seg, swap_add), 0);
	cr_assert_eq(offsetof(struct kn_wqe_masked_atomic_seg, compare), 8);
	cr_assert_eq(offsetof(struct kn_wqe_masked_atomic_seg, swap_add_mask), 16);
	cr_assert_eq(offsetof(struct kn_wqe_masked_atomic_seg, compare_mask), 24);
	cr_assert_eq(sizeof(struct kn_wqe_masked_cs32_seg), 16);
	cr_assert_eq(offsetof(struct kn_wqe_masked_cs32_seg, compare), 4);
	cr_assert_eq(offsetof(struct kn_wqe_masked_cs32_seg, swap_mask), 8);
	cr_assert_eq(offsetof(struct kn_wqe_masked_cs32_seg, compare_mask), 12);
	cr_assert_eq(sizeof(struct kn_wqe_masked_fa32_seg), 16);
	cr_assert_eq(offsetof(struct kn_wqe_masked_fa32_seg, field_boundary), 4);
	cr_assert_eq(sizeof(struct kn_wqe_masked_fa64_seg), 16);
	cr_assert_eq(offsetof(struct kn_wqe_masked_fa64_seg, field_boundary), 8);
#if HAVE_MLX5DV
	cr_assert_eq(KN_OPCODE_ATOMIC_MASKED_CS, MLX5_OPCODE_ATOMIC_MASKED_CS);
	cr_assert_eq(KN_OPCODE_ATOMIC_MASKED_FA, MLX5_OPCODE_ATOMIC_MASKED_FA);
#endif
}

/* The expected WQE, written with mlx5dv's structs and builders where it has
 * them and the provider's operand layouts otherwise. */
static void expect_wqe(uint8_t *w, uint16_t pi, uint32_t qpn, uint8_t opcode, uint32_t size,
		       uint64_t raddr, uint32_t rkey, uint64_t laddr, uint32_t lkey, uint64_t a,
		       uint64_t b, uint64_t c, uint64_t d)
{
	memset(w, 0, 128);
	int cs8 = opcode == KN_OPCODE_ATOMIC_MASKED_CS && size == 8;
	uint8_t ds = cs8 ? 5 : 4;
	uint8_t opmod = size == 4 ? 0x08 : 0x09;
#if HAVE_MLX5DV
	mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)w, pi, opcode, opmod, qpn,
			    MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
	struct mlx5_wqe_raddr_seg *ra = (struct mlx5_wqe_raddr_seg *)(w + 16);
	ra->raddr = htobe64(raddr);
	ra->rkey = htobe32(rkey);
	ra->reserved = 0;
#else
	uint32_t v = htobe32(((uint32_t)opmod << 24) | ((uint32_t)pi << 8) | opcode);
	memcpy(w, &v, 4);
	v = htobe32((qpn << 8) | ds);
	memcpy(w + 4, &v, 4);
	w[11] = 8; /* CQ update */
	uint64_t r64 = htobe64(raddr);
	memcpy(w + 16, &r64, 8);
	v = htobe32(rkey);
	memcpy(w + 24, &v, 4);
#endif
	uint8_t *o = w + 32;
	if (cs8) {
		uint64_t q[4] = {htobe64(a), htobe64(b), htobe64(c), htobe64(d)};
		memcpy(o, q, 32);
	} else if (opcode == KN_OPCODE_ATOMIC_MASKED_CS) {
		uint32_t q[4] = {htobe32((uint32_t)a), htobe32((uint32_t)b), htobe32((uint32_t)c),
				 htobe32((uint32_t)d)};
		memcpy(o, q, 16);
	} else if (size == 4) {
		uint32_t q[2] = {htobe32((uint32_t)a), htobe32((uint32_t)c)};
		memcpy(o, q, 8);
	} else {
		uint64_t q[2] = {htobe64(a), htobe64(c)};
		memcpy(o, q, 16);
	}
	uint8_t *dseg = w + (cs8 ? 64 : 48);
#if HAVE_MLX5DV
	mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)dseg, size, lkey, laddr);
#else
	uint32_t bc = htobe32(size), lk = htobe32(lkey);
	uint64_t ad = htobe64(laddr);
	memcpy(dseg, &bc, 4);
	memcpy(dseg + 4, &lk, 4);
	memcpy(dseg + 8, &ad, 8);
#endif
}

Test(masked, builders_bytes_equal_mlx5)
{
	uint64_t seed = 0xa70;
	kn_qp q;
	memset(&q, 0, sizeof(q));
	for (int i = 0; i < 2000; i++) {
		q.qpn = (uint32_t)tu_rand64(&seed) & 0xffffff;
		uint16_t pi = (uint16_t)tu_rand64(&seed);
		uint32_t size = (i & 1) ? 8 : 4;
		int cs = (i & 2) != 0;
		uint64_t raddr = tu_rand64(&seed), laddr = tu_rand64(&seed);
		uint32_t rkey = (uint32_t)tu_rand64(&seed), lkey = (uint32_t)tu_rand64(&seed);
		uint64_t a = tu_rand64(&seed), b = tu_rand64(&seed), c = tu_rand64(&seed),
			 d = tu_rand64(&seed);
		uint8_t got[128], want[128];
		memset(got, 0, sizeof(got));
		int rc;
		if (cs)
			rc = kn_prep_masked_cs(&q, got, got + 64, pi, size, laddr, lkey, raddr, rkey, a,
					       b, c, d);
		else
			rc = kn_prep_masked_fa(&q, got, pi, size, laddr, lkey, raddr, rkey, a, c);
		cr_assert_eq(rc, 0);
		expect_wqe(want, pi, q.qpn, cs ? KN_OPCODE_ATOMIC_MASKED_CS : KN_OPCODE_ATOMIC_MASKED_FA,
			   size, raddr, rkey, laddr, lkey, a, b, c, d);
		size_t n = cs && size == 8 ? 80 : 64;
		cr_assert_arr_eq(got, want, n, "%s %u bytes: WQE differs", cs ? "masked CS" : "masked FA",
				 size);
		if (n == 64)
			for (int k = 64; k < 128; k++)
				cr_assert_eq(got[k], 0, "a one-WQEBB WQE wrote into the next slot");
	}
	uint8_t w[128];
	memset(w, 0xab, sizeof(w));
	cr_assert_eq(kn_prep_masked_cs(&q, w, w + 64, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0), -EINVAL);
	cr_assert_eq(kn_prep_masked_fa(&q, w, 0, 16, 0, 0, 0, 0, 0, 0), -EINVAL);
	for (size_t k = 0; k < sizeof(w); k++)
		cr_assert_eq(w[k], 0xab, "a refused builder wrote byte %zu", k);
}

/* Every kn_amo maps to the WQE its comment names. */
Test(masked, amo_mapping)
{
	kn_op op;
	uint64_t res;
	kn_op_amo(&op, KN_AMO_FETCH_ADD, 8, 64, 1, 5, 0, &res, 2);
	cr_assert_eq(op.kind, KN_OP_FETCH_ADD);
	kn_op_amo(&op, KN_AMO_FETCH_ADD, 4, 64, 1, 5, 0, &res, 2);
	cr_assert(op.kind == KN_OP_MASKED_FA && op.size == 4 && op.swap_mask == 0);
	kn_op_amo(&op, KN_AMO_COMPARE_SWAP, 8, 64, 1, 5, 6, &res, 2);
	cr_assert(op.kind == KN_OP_COMPARE_SWAP && op.add == 5 && op.compare == 6);
	kn_op_amo(&op, KN_AMO_COMPARE_SWAP, 4, 64, 1, 5, 6, &res, 2);
	cr_assert(op.kind == KN_OP_MASKED_CS && op.swap_mask == 0xffffffffu &&
		  op.compare_mask == 0xffffffffu);
	kn_op_amo(&op, KN_AMO_SWAP, 8, 64, 1, 5, 0, &res, 2);
	cr_assert(op.kind == KN_OP_MASKED_CS && op.swap_mask == ~0ull && op.compare_mask == 0);
	kn_op_amo(&op, KN_AMO_FETCH_XOR, 8, 64, 1, 5, 0, &res, 2);
	cr_assert(op.kind == KN_OP_MASKED_FA && op.swap_mask == ~0ull);
	kn_op_amo(&op, KN_AMO_FETCH, 4, 64, 1, 5, 0, &res, 2);
	cr_assert(op.kind == KN_OP_MASKED_FA && op.add == 0);
	kn_op_amo(&op, KN_AMO_SWAP, 2, 64, 1, 5, 0, &res, 2);
	cr_assert_eq(knx_op_check(NULL, &op), -EINVAL, "size 2 accepted");
	kn_op_amo(&op, 99, 8, 64, 1, 5, 0, &res, 2);
	cr_assert_eq(knx_op_check(NULL, &op), -EINVAL, "unknown amo accepted");
	/* tickets: two for the 8-byte masked CS and a SET signal, three for a
	 * SET put_signal */
	kn_op_amo(&op, KN_AMO_SWAP, 8, 64, 1, 5, 0, &res, 2);
	cr_assert(knx_op_nwqe(&op) == 2 && knx_op_span(&op) == 1);
	kn_op_amo(&op, KN_AMO_SWAP, 4, 64, 1, 5, 0, &res, 2);
	cr_assert(knx_op_nwqe(&op) == 1 && knx_op_span(&op) == 0);
	kn_op_put_signal_op(&op, 64, 1, &res, 2, 8, 128, 3, 7, KN_SIG_SET);
	cr_assert(knx_op_nwqe(&op) == 3 && knx_op_span(&op) == 2);
	kn_op_signal_op(&op, 128, 3, 7, KN_SIG_SET);
	cr_assert(knx_op_nwqe(&op) == 2 && knx_op_span(&op) == 1);
	kn_op_signal_op(&op, 128, 3, 7, 2);
	cr_assert_eq(knx_op_check(NULL, &op), -EINVAL, "unknown signal op accepted");
}

/* ---- execution ------------------------------------------------------------------ */

struct env {
	struct tu_pair p;
	struct tu_region dst;  /* b's words */
	struct tu_region back; /* a's results */
	uint64_t seed;
	int rounds;
	int amo; /* concurrency tests: what the threads do */
	uint32_t size;
};

static void env_open(struct env *e, const struct kinet_qp_attr *attr)
{
	memset(e, 0, sizeof(*e));
	cr_assert_eq(tu_pair_open(&e->p, attr), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->p.pd, REGION, KINET_ACCESS_ALL, 21), 0);
	cr_assert_eq(tu_region_alloc(&e->back, e->p.pd, REGION, KINET_ACCESS_LOCAL_WRITE, 22), 0);
	e->seed = 0x3a5c;
	tu_fail_msg[0] = 0;
}

static void env_close(struct env *e)
{
	cr_assert(tu_region_canaries_ok(&e->dst), "canary of dst changed");
	cr_assert(tu_region_canaries_ok(&e->back), "canary of back changed");
	tu_region_free(&e->dst);
	tu_region_free(&e->back);
	tu_pair_close(&e->p);
}

static void run(int nthreads, kinet_host_fn fn, struct env *e)
{
	int rc = kinet_host_exec(nthreads, fn, e);
	cr_assert_eq(rc, 0, "host executor: %s", tu_fail_msg);
}

/* Random operands with structure: masks and boundaries of every density,
 * compare values that match the word (or not) in the compared bits. */
static uint64_t rnd_mask(uint64_t *seed)
{
	switch (tu_rand64(seed) % 5) {
	case 0:
		return 0;
	case 1:
		return ~0ull;
	case 2:
		return tu_rand64(seed) & tu_rand64(seed);
	case 3:
		return tu_rand64(seed) | tu_rand64(seed);
	default:
		return tu_rand64(seed);
	}
}

/* Raw masked CS / FA of both sizes on random words of b's region. */
static int raw_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr), lkey = tu_lkey(&e->back);
	for (int i = 0; i < e->rounds; i++) {
		uint32_t size = (tu_rand64(&e->seed) & 1) ? 8 : 4;
		int cs = (tu_rand64(&e->seed) & 1) != 0;
		uint8_t *w = e->dst.buf + (tu_rand64(&e->seed) % (REGION / size)) * size;
		uint8_t *res = e->back.buf + (tu_rand64(&e->seed) % (REGION / 8)) * 8;
		uint64_t m = ref_mask(size), old = load_n(w, size);
		uint64_t a = tu_rand64(&e->seed), c = rnd_mask(&e->seed), d = rnd_mask(&e->seed);
		/* compare: the word with some bits flipped, often none */
		uint64_t b = old ^ ((tu_rand64(&e->seed) & 1) ? 0 : rnd_mask(&e->seed));
		uint8_t before[4];
		memcpy(before, res + 4, 4);
		kn_op op;
		if (cs)
			kn_op_masked_cs(&op, size, tu_addr(w), rkey, a, b, c, d, res, lkey);
		else
			kn_op_masked_fa(&op, size, tu_addr(w), rkey, a, c, res, lkey);
		kn_ticket_t t;
		TU_CHECK(kn_post(q, &op, &t) == 0, "post %d", i);
		TU_CHECK(kn_wait(q, t) == 0, "masked %s %u bytes failed: syndrome 0x%x",
			 cs ? "CS" : "FA", size, kn_qp_error(q, NULL));
		uint64_t want = cs ? ref_masked_cs(size, old, a & m, b & m, c & m, d & m)
				   : ref_masked_fa(size, old, a & m, c & m);
		uint64_t got = load_n(w, size);
		TU_CHECK(got == want, "masked %s %u bytes: word 0x%llx, expected 0x%llx (old 0x%llx "
			 "a 0x%llx b 0x%llx c 0x%llx d 0x%llx)", cs ? "CS" : "FA", size,
			 (unsigned long long)got, (unsigned long long)want, (unsigned long long)old,
			 (unsigned long long)a, (unsigned long long)b, (unsigned long long)c,
			 (unsigned long long)d);
		uint64_t ret = size == 4 ? be32toh((uint32_t)load_n(res, 4)) : be64toh(load_n(res, 8));
		TU_CHECK(ret == old, "returned 0x%llx, the word held 0x%llx", (unsigned long long)ret,
			 (unsigned long long)old);
		if (size == 4)
			TU_CHECK(memcmp(res + 4, before, 4) == 0, "a 4-byte result wrote 8 bytes");
	}
	return 0;
}

Test(masked, raw_forms_against_the_model)
{
	struct env e;
	env_open(&e, NULL);
	e.rounds = 4000;
	run(1, raw_fn, &e);
	env_close(&e);
}

/* Every kn_amo, both sizes, through the blocking kn_atomic. */
static int amo_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr), lkey = tu_lkey(&e->back);
	for (int i = 0; i < e->rounds; i++) {
		int amo = (int)(tu_rand64(&e->seed) % 7);
		uint32_t size = (tu_rand64(&e->seed) & 1) ? 8 : 4;
		uint8_t *w = e->dst.buf + (tu_rand64(&e->seed) % (REGION / size)) * size;
		uint8_t *res = e->back.buf + (tu_rand64(&e->seed) % (REGION / 8)) * 8;
		uint64_t oldw = load_n(w, size), v = tu_rand64(&e->seed);
		uint64_t cmp = (tu_rand64(&e->seed) & 1) ? oldw : oldw ^ (1ull << (i % (size * 8)));
		uint64_t old = ~0ull;
		TU_CHECK(kn_atomic(q, amo, size, tu_addr(w), rkey, v, cmp, res, lkey, &old) == 0,
			 "amo %d size %u", amo, size);
		TU_CHECK(old == oldw, "amo %d size %u returned 0x%llx, the word held 0x%llx", amo, size,
			 (unsigned long long)old, (unsigned long long)oldw);
		uint64_t want = ref_amo(amo, size, oldw, v, cmp), got = load_n(w, size);
		TU_CHECK(got == want, "amo %d size %u: 0x%llx, expected 0x%llx", amo, size,
			 (unsigned long long)got, (unsigned long long)want);
	}
	/* refused before anything is posted */
	uint64_t old;
	kn_ticket_t before = q->st->resv;
	TU_CHECK(kn_atomic(q, KN_AMO_SWAP, 2, tu_addr(e->dst.buf), rkey, 1, 0, e->back.buf, lkey,
			   &old) == -EINVAL, "size 2");
	TU_CHECK(kn_atomic(q, 42, 8, tu_addr(e->dst.buf), rkey, 1, 0, e->back.buf, lkey, &old) ==
			 -EINVAL, "amo 42");
	TU_CHECK(q->st->resv == before, "a refused atomic took a ticket");
	return 0;
}

Test(masked, every_amo_both_sizes)
{
	struct env e;
	env_open(&e, NULL);
	e.rounds = 3000;
	run(1, amo_fn, &e);
	env_close(&e);
}

/* ---- atomicity: threads on one word ---------------------------------------------- */

#define HAMMER 400

static uint64_t thread_value(int tid, int i)
{
	uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(tid * 1000 + i + 1);
	return s ^ (s >> 29);
}

/* Each thread applies HAMMER operations to the word at offset 0 (and the
 * 4-byte word at offset 8), through one GPU-shared QP. */
static int hammer_fn(int tid, int n, void *arg)
{
	(void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr), lkey = tu_lkey(&e->back);
	uint8_t *res = e->back.buf + (size_t)tid * 64;
	uint8_t *w = e->dst.buf + (e->size == 4 ? 8 : 0);
	for (int i = 0; i < HAMMER; i++) {
		uint64_t v = thread_value(tid, i), old;
		if (e->amo == KN_AMO_COMPARE_SWAP) {
			/* a counter of successful increments by CAS: retry until it takes */
			old = load_n(w, e->size);
			for (;;) {
				uint64_t seen;
				TU_CHECK(kn_atomic(q, KN_AMO_COMPARE_SWAP, e->size, tu_addr(w), rkey,
						   old + 1, old, res, lkey, &seen) == 0, "cas");
				if (seen == old)
					break;
				old = seen;
			}
			continue;
		}
		if (e->amo == KN_AMO_FETCH_AND || e->amo == KN_AMO_FETCH_OR) {
			/* thread tid owns bit tid: set then clear it, HAMMER times */
			uint64_t bit = 1ull << tid;
			int amo = e->amo == KN_AMO_FETCH_OR ? (i & 1 ? KN_AMO_FETCH_AND : KN_AMO_FETCH_OR)
							    : (i & 1 ? KN_AMO_FETCH_OR : KN_AMO_FETCH_AND);
			uint64_t val = amo == KN_AMO_FETCH_OR ? bit : ~bit;
			TU_CHECK(kn_atomic(q, amo, e->size, tu_addr(w), rkey, val, 0, res, lkey, &old) ==
					 0, "and/or");
			int was = (old & bit) != 0;
			int want = e->amo == KN_AMO_FETCH_OR ? (i & 1) : !(i & 1);
			TU_CHECK(was == want, "thread %d: its own bit was %d before op %d", tid, was, i);
			continue;
		}
		TU_CHECK(kn_atomic(q, e->amo, e->size, tu_addr(w), rkey, v, 0, res, lkey, &old) == 0,
			 "amo %d", e->amo);
	}
	return 0;
}

static void hammer(int amo, uint32_t size)
{
	struct kinet_qp_attr a = {.sq_depth = 64, .share = KN_SHARE_GPU};
	struct env e;
	env_open(&e, &a);
	const int nt = 8;
	e.amo = amo;
	e.size = size;
	uint64_t init = amo == KN_AMO_FETCH_AND ? ~0ull : amo == KN_AMO_FETCH_OR ? 0
							: tu_rand64(&e.seed);
	uint8_t *w = e.dst.buf + (size == 4 ? 8 : 0);
	store_n(w, size, init);
	run(nt, hammer_fn, &e);
	uint64_t want = init & ref_mask(size);
	for (int t = 0; t < nt; t++)
		for (int i = 0; i < HAMMER; i++) {
			if (amo == KN_AMO_FETCH_ADD)
				want = (want + thread_value(t, i)) & ref_mask(size);
			else if (amo == KN_AMO_FETCH_XOR)
				want ^= thread_value(t, i) & ref_mask(size);
		}
	if (amo == KN_AMO_COMPARE_SWAP)
		want = (init + (uint64_t)nt * HAMMER) & ref_mask(size);
	cr_assert_eq(load_n(w, size), want, "amo %d size %u: 0x%llx, expected 0x%llx", amo, size,
		     (unsigned long long)load_n(w, size), (unsigned long long)want);
	env_close(&e);
}

Test(masked, concurrent_adds_32)
{
	hammer(KN_AMO_FETCH_ADD, 4);
}

Test(masked, concurrent_xors_32_and_64)
{
	hammer(KN_AMO_FETCH_XOR, 4);
	hammer(KN_AMO_FETCH_XOR, 8);
}

Test(masked, concurrent_ands_ors_own_bits)
{
	hammer(KN_AMO_FETCH_OR, 8); /* two WQEBBs each, on a shared QP */
	hammer(KN_AMO_FETCH_AND, 4);
}

Test(masked, concurrent_compare_swap_32)
{
	hammer(KN_AMO_COMPARE_SWAP, 4);
}

/* ---- the two-WQEBB WQE ---------------------------------------------------------- */

/* Swaps at every position of a small SQ: the 8-byte masked CS lands with its
 * second WQEBB in slot 0 once per lap; NOPs between shift the phase. */
static int wrap_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr), lkey = tu_lkey(&e->back);
	uint64_t *w = (uint64_t *)e->dst.buf;
	int wrapped = 0;
	for (int i = 0; i < 200; i++) {
		if (i % 3 == 0) {
			kn_ticket_t t;
			TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
			kn_prep_nop(q, kn_wqe_ptr(q, t), t);
			kn_sq_submit(q, t, 1);
		}
		if ((q->st->resv & (q->sq_wqe_cnt - 1)) == q->sq_wqe_cnt - 1)
			wrapped++;
		uint64_t v = tu_rand64(&e->seed), before = *w, old;
		TU_CHECK(kn_atomic(q, KN_AMO_SWAP, 8, tu_addr(w), rkey, v, 0, e->back.buf, lkey,
				   &old) == 0, "swap %d: syndrome 0x%x", i, kn_qp_error(q, NULL));
		TU_CHECK(old == before && *w == v, "swap %d", i);
	}
	TU_CHECK(wrapped > 5, "the WQE wrapped the SQ only %d times", wrapped);
	TU_CHECK(q->st->done == q->st->resv, "done %llu, reserved %llu",
		 (unsigned long long)q->st->done, (unsigned long long)q->st->resv);
	TU_CHECK(q->st->cq_ci < q->st->done, "CQEs %llu, tickets %llu",
		 (unsigned long long)q->st->cq_ci, (unsigned long long)q->st->done);
	return 0;
}

Test(masked, two_wqebbs_across_the_end_of_the_sq)
{
	struct kinet_qp_attr a = {.sq_depth = 16};
	struct env e;
	env_open(&e, &a);
	run(1, wrap_fn, &e);
	env_close(&e);
}

/* SET signals behind puts: thread 0 writes chunk r and SETs the signal word
 * to a fresh random value (not a count); thread 1 waits for exactly that
 * value and finds the chunk. The BlueFlame QP rings with the doorbell word
 * for a WQE of two WQEBBs. */
#define SROUNDS 60
static uint64_t set_value(int r)
{
	return thread_value(77, r) | 1; /* never 0 */
}

static int set_signal_fn(int tid, int n, void *arg)
{
	(void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr);
	volatile uint64_t *sig = (volatile uint64_t *)(e->dst.buf + REGION - 8);
	volatile uint64_t *ack = (volatile uint64_t *)(e->dst.buf + REGION - 16);
	uint8_t *src = e->back.buf;
	if (tid == 0) {
		for (int r = 0; r < SROUNDS; r++) {
			uint32_t len = 1 + (uint32_t)(thread_value(5, r) % 9000);
			tu_fill_random(src + (size_t)r * 9000, len, (uint64_t)r + 1);
			TU_CHECK(kn_put_signal_op(q, tu_addr(e->dst.buf + (size_t)r * 9000), rkey,
						  src + (size_t)r * 9000, tu_lkey(&e->back), len,
						  tu_addr(sig), rkey, set_value(r), KN_SIG_SET, NULL) == 0,
				 "put_signal SET %d", r);
			/* the next SET only once the reader saw this one */
			TU_CHECK(kn_wait_signal(ack, (uint64_t)r + 1, 10000000000ull) == 0, "ack %d", r);
		}
		TU_CHECK(kn_quiet(q) == 0, "quiet");
		return 0;
	}
	for (int r = 0; r < SROUNDS; r++) {
		uint64_t t0 = kn_now_ns();
		while (*sig != set_value(r)) {
			TU_CHECK(kn_now_ns() - t0 < 10000000000ull, "SET %d never came (0x%llx)", r,
				 (unsigned long long)*sig);
			KN_PAUSE();
		}
		KN_FENCE_ACQ();
		uint32_t len = 1 + (uint32_t)(thread_value(5, r) % 9000);
		TU_CHECK(memcmp(e->dst.buf + (size_t)r * 9000, src + (size_t)r * 9000, len) == 0,
			 "signal %d seen before its data", r);
		*ack = (uint64_t)r + 1;
	}
	return 0;
}

static void set_signals(int db_mode)
{
	struct kinet_qp_attr a = {.sq_depth = 32, .db_mode = db_mode};
	struct env e;
	env_open(&e, &a);
	*(uint64_t *)(e.dst.buf + REGION - 8) = 0;
	*(uint64_t *)(e.dst.buf + REGION - 16) = 0;
	run(2, set_signal_fn, &e);
	cr_assert_eq(*(uint64_t *)(e.dst.buf + REGION - 8), set_value(SROUNDS - 1));
	env_close(&e);
}

Test(masked, set_signal_behind_put)
{
	set_signals(KN_DB_GPU);
	set_signals(KN_DB_BLUEFLAME);
	set_signals(KN_DB_CPU_PROXY);
}

/* Many threads on one GPU-shared QP mixing one- and two-WQEBB WQEs: every
 * WQE complete, publication never cut a WQE (the NIC would answer a local QP
 * operation error), done == resv at the end. */
static int mixed_fn(int tid, int n, void *arg)
{
	(void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr), lkey = tu_lkey(&e->back);
	uint64_t *mine = (uint64_t *)(e->dst.buf + 4096 + (size_t)tid * 64);
	uint64_t *ctr = (uint64_t *)(e->dst.buf + 64);
	for (int i = 0; i < 300; i++) {
		kn_ticket_t t;
		if (i % 3 == 0)
			TU_CHECK(kn_signal_op(q, tu_addr(mine), rkey, thread_value(tid, i), KN_SIG_SET,
					      &t) == 0, "signal SET");
		else if (i % 3 == 1)
			TU_CHECK(kn_signal(q, tu_addr(ctr), rkey, 1, &t) == 0, "signal ADD");
		else
			TU_CHECK(kn_put_signal_op(q, tu_addr(mine + 1), rkey, e->back.buf, lkey, 8,
						  tu_addr(mine), rkey, thread_value(tid, i),
						  KN_SIG_SET, &t) == 0, "put_signal SET");
		if (i % 17 == 0)
			TU_CHECK(kn_wait(q, t) == 0, "wait: syndrome 0x%x", kn_qp_error(q, NULL));
	}
	TU_CHECK(kn_quiet(q) == 0, "quiet: syndrome 0x%x", kn_qp_error(q, NULL));
	TU_CHECK(*mine == thread_value(tid, 299), "thread %d: last SET lost", tid);
	return 0;
}

Test(masked, shared_qp_mixed_sizes)
{
	struct kinet_qp_attr a = {.sq_depth = 64, .share = KN_SHARE_GPU};
	struct env e;
	env_open(&e, &a);
	*(uint64_t *)(e.dst.buf + 64) = 0;
	run(8, mixed_fn, &e);
	cr_assert_eq(*(uint64_t *)(e.dst.buf + 64), 8 * 100);
	cr_assert_eq(e.p.da->st->done, e.p.da->st->resv);
	cr_assert_eq(kn_qp_error(e.p.da, NULL), 0);
	env_close(&e);
}

/* An error behind and after two-WQEBB WQEs: the failing one's ticket is the
 * QP's error ticket, every later WQE flushed, and kn_quiet returns -EIO (the
 * accounting of done went through the flushed two-WQEBB WQEs). */
static int error_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr), lkey = tu_lkey(&e->back);
	kn_ticket_t t[8];
	kn_op op;
	for (int i = 0; i < 3; i++) {
		kn_op_amo(&op, KN_AMO_SWAP, 8, tu_addr(e->dst.buf + 8 * i), rkey, 5, 0,
			  e->back.buf + 8 * i, lkey);
		TU_CHECK(kn_post(q, &op, &t[i]) == 0, "post");
	}
	/* misaligned: remote invalid request */
	kn_op_amo(&op, KN_AMO_SWAP, 8, tu_addr(e->dst.buf + 4), rkey, 5, 0, e->back.buf, lkey);
	TU_CHECK(kn_post(q, &op, &t[3]) == 0, "post");
	for (int i = 4; i < 8; i++) {
		kn_op_amo(&op, i & 1 ? KN_AMO_SWAP : KN_AMO_FETCH_XOR, 8, tu_addr(e->dst.buf + 64),
			  rkey, 5, 0, e->back.buf + 64, lkey);
		TU_CHECK(kn_post(q, &op, &t[i]) == 0, "post");
	}
	TU_CHECK(kn_quiet(q) == -EIO, "quiet after an error");
	for (int i = 0; i < 3; i++)
		TU_CHECK(kn_test(q, t[i]) == 0, "WQE %d before the error", i);
	for (int i = 3; i < 8; i++)
		TU_CHECK(kn_test(q, t[i]) == -EIO, "WQE %d at or after the error", i);
	TU_CHECK(kn_qp_error(q, NULL) == KN_SYND_REMOTE_INVAL_REQ_ERR, "syndrome 0x%x",
		 kn_qp_error(q, NULL));
	TU_CHECK(q->st->err_ticket == t[3] - 1, "error ticket %llu, the WQE starts at %llu",
		 (unsigned long long)q->st->err_ticket, (unsigned long long)(t[3] - 1));
	TU_CHECK(q->st->done == q->st->resv, "done %llu resv %llu", (unsigned long long)q->st->done,
		 (unsigned long long)q->st->resv);
	return 0;
}

Test(masked, error_and_flush_accounting)
{
	struct env e;
	env_open(&e, NULL);
	uint64_t keep = *(uint64_t *)(e.dst.buf + 64);
	run(1, error_fn, &e);
	cr_assert_eq(*(uint64_t *)(e.dst.buf + 64), keep, "a flushed WQE executed");
	env_close(&e);
}

/* ---- malformed WQEs and bad targets --------------------------------------------- */

struct raw {
	struct tu_rawpair p;
	struct tu_region dst, back;
};

static void raw_open(struct raw *r, unsigned dst_access)
{
	cr_assert_eq(tu_rawpair_open(&r->p, 64, 0), 0);
	cr_assert_eq(tu_region_alloc(&r->dst, r->p.pd, 4096, dst_access, 31), 0);
	cr_assert_eq(tu_region_alloc(&r->back, r->p.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 32), 0);
}

static void raw_close(struct raw *r)
{
	tu_region_free(&r->dst);
	tu_region_free(&r->back);
	tu_rawpair_close(&r->p);
}

/* Posts a masked WQE built by the device builders, then edits applied by
 * `edit` (NULL: none); returns the syndrome of its CQE (0: success). */
static uint8_t raw_one(struct raw *r, int cs, uint32_t size, uint64_t raddr,
		       void (*edit)(uint8_t *w), int *nbb_out)
{
	uint8_t w[128];
	memset(w, 0, sizeof(w));
	kn_qp q;
	memset(&q, 0, sizeof(q));
	q.qpn = kinet_qp_num(r->p.a);
	uint64_t pi = r->p.pi;
	if (cs)
		kn_prep_masked_cs(&q, w, w + 64, pi, size, tu_addr(r->back.buf), tu_lkey(&r->back),
				  raddr, kinet_mr_rkey(r->dst.mr), 1, 0, ~0ull, 0);
	else
		kn_prep_masked_fa(&q, w, pi, size, tu_addr(r->back.buf), tu_lkey(&r->back), raddr,
				  kinet_mr_rkey(r->dst.mr), 1, 0);
	if (edit)
		edit(w);
	int nbb = (kn_wqe_ds_of((struct kn_wqe_ctrl_seg *)w) * 16 + 63) / 64;
	if (nbb < 1)
		nbb = 1;
	if (nbb_out)
		*nbb_out = nbb;
	tu_post(&r->p, w, (uint32_t)nbb);
	struct kn_cqe64 c;
	cr_assert_eq(tu_poll(r->p.acq, &c, 5000), 0, "no CQE");
	if (tu_cqe_op(&c) == KN_CQE_REQ) {
		cr_assert_eq(tu_cqe_idx(&c), (uint16_t)pi);
		cr_assert_eq(kn_be32toh(c.sop_drop_qpn) >> 24,
			     cs ? KN_OPCODE_ATOMIC_MASKED_CS : KN_OPCODE_ATOMIC_MASKED_FA);
		return 0;
	}
	cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ_ERR);
	return tu_cqe_synd(&c);
}

static void opmod_16(uint8_t *w)
{
	w[0] = 0x0a; /* opmod 0x0a: 16-byte operands, not supported */
}
static void opmod_none(uint8_t *w)
{
	w[0] = 0;
}
static void length_7(uint8_t *w)
{
	uint8_t *d = (kn_wqe_ds_of((struct kn_wqe_ctrl_seg *)w) == 5) ? w + 64 : w + 48;
	d[3] = 7;
}
static void inline_data(uint8_t *w)
{
	w[48] |= 0x80;
}
static void short_ds(uint8_t *w)
{
	w[7] = (uint8_t)((w[7] & ~0x3f) | 3);
}

Test(masked, malformed_and_refused)
{
	struct raw r;
	raw_open(&r, KINET_ACCESS_ALL);
	uint64_t base = tu_addr(r.dst.buf);
	int nbb;
	cr_assert_eq(raw_one(&r, 1, 8, base, NULL, &nbb), 0);
	cr_assert_eq(nbb, 2);
	cr_assert_eq(raw_one(&r, 0, 4, base + 4, NULL, &nbb), 0);
	cr_assert_eq(nbb, 1);
	cr_assert_eq(raw_one(&r, 0, 4, base + 2, NULL, NULL), KN_SYND_REMOTE_INVAL_REQ_ERR);
	cr_assert_eq(tu_rawpair_reconnect(&r.p), 0);
	cr_assert_eq(raw_one(&r, 1, 8, base + 4, NULL, NULL), KN_SYND_REMOTE_INVAL_REQ_ERR);
	cr_assert_eq(tu_rawpair_reconnect(&r.p), 0);
	cr_assert_eq(raw_one(&r, 1, 4, base, opmod_16, NULL), KN_SYND_LOCAL_QP_OP_ERR);
	cr_assert_eq(tu_rawpair_reconnect(&r.p), 0);
	cr_assert_eq(raw_one(&r, 0, 8, base, opmod_none, NULL), KN_SYND_LOCAL_QP_OP_ERR);
	cr_assert_eq(tu_rawpair_reconnect(&r.p), 0);
	cr_assert_eq(raw_one(&r, 1, 8, base, length_7, NULL), KN_SYND_LOCAL_LENGTH_ERR);
	cr_assert_eq(tu_rawpair_reconnect(&r.p), 0);
	cr_assert_eq(raw_one(&r, 0, 4, base, inline_data, NULL), KN_SYND_LOCAL_QP_OP_ERR);
	cr_assert_eq(tu_rawpair_reconnect(&r.p), 0);
	cr_assert_eq(raw_one(&r, 1, 4, base, short_ds, NULL), KN_SYND_LOCAL_QP_OP_ERR);
	cr_assert_eq(tu_rawpair_reconnect(&r.p), 0);
	/* outside the region */
	cr_assert_eq(raw_one(&r, 0, 8, base + 4096, NULL, NULL), KN_SYND_REMOTE_ACCESS_ERR);
	raw_close(&r);
	/* a region without remote atomic access */
	raw_open(&r, KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_WRITE | KINET_ACCESS_REMOTE_READ);
	uint64_t keep = *(uint64_t *)r.dst.buf;
	cr_assert_eq(raw_one(&r, 1, 8, tu_addr(r.dst.buf), NULL, NULL), KN_SYND_REMOTE_ACCESS_ERR);
	cr_assert_eq(*(uint64_t *)r.dst.buf, keep);
	cr_assert(tu_region_canaries_ok(&r.dst));
	raw_close(&r);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The PGAS layer (kinet/shmem.h, kinet/shmem_device.h) with 2 to 4 PEs as
 * processes on the host executor, each scenario over the software NIC's
 * wire (KINET_SHMEM_P2P=0) and over the same-node load/store path: data on
 * random contents verified byte for byte, every comparison, every atomic on
 * 4 and 8 bytes, fence ordering, quiet, barriers under skew, teams, the
 * group forms, a PE killed mid-run and allocations the PEs disagree on.
 */
#include "test_shmem_common.h"

TestSuite(shmem, .timeout = 600);

/* ---- RMA ---------------------------------------------------------------------------- */

static const uint32_t rma_sizes[] = {1, 3, 8, 28, 29, 64, 1000, 4096, 32767, 32768, 100001,
				     300000};
#define NRMA ((int)(sizeof(rma_sizes) / sizeof(rma_sizes[0])))
#define SLOT (320u << 10) /* per (source PE, size) in dst */

/* Every PE puts every size to every other PE (blocking, nbi, and 1-byte p
 * values), then gets them back from the target; verified against the seed. */
static int rma_fn(int me, int n, void *arg)
{
	(void)arg;
	size_t span = (size_t)NRMA * SLOT;
	uint8_t *dst = kinet_shmem_malloc((size_t)n * span);
	uint8_t *src = kinet_shmem_malloc(span);
	uint8_t *back = kinet_shmem_malloc(span);
	uint64_t *pv = kinet_shmem_calloc((size_t)n, 8);
	SK(dst && src && back && pv, "malloc");
	for (int i = 0; i < NRMA; i++)
		tu_fill_random(src + (size_t)i * SLOT, rma_sizes[i], sh_seed(me, 1, i));
	SK0(kinet_shmem_barrier_all());
	for (int k = 1; k < n; k++) {
		int to = (me + k) % n;
		for (int i = 0; i < NRMA; i++) {
			uint8_t *d = dst + (size_t)me * span + (size_t)i * SLOT;
			if (i % 2)
				SK0(kn_shmem_put(d, src + (size_t)i * SLOT, rma_sizes[i], to));
			else
				SK0(kn_shmem_put_nbi(d, src + (size_t)i * SLOT, rma_sizes[i], to));
		}
		SK0(kn_shmem_p(&pv[me], 0x1122334455667788ull ^ (uint64_t)me, 8, to));
	}
	SK0(kn_shmem_quiet());
	SK0(kn_shmem_barrier_all());
	/* what the others put here */
	for (int from = 0; from < n; from++) {
		if (from == me)
			continue;
		for (int i = 0; i < NRMA; i++) {
			tu_fill_random(back, rma_sizes[i], sh_seed(from, 1, i));
			SK(!memcmp(dst + (size_t)from * span + (size_t)i * SLOT, back, rma_sizes[i]),
			   "put of %u bytes from PE %d", rma_sizes[i], from);
		}
		SK(pv[from] == (0x1122334455667788ull ^ (uint64_t)from), "p from PE %d", from);
	}
	SK0(kinet_shmem_barrier_all());
	/* gets: read back what this PE put at each peer */
	for (int k = 1; k < n; k++) {
		int at = (me + k) % n;
		for (int i = 0; i < NRMA; i++) {
			memset(back, 0xee, rma_sizes[i]);
			uint8_t *s = dst + (size_t)me * span + (size_t)i * SLOT;
			if (i % 2) {
				SK0(kn_shmem_get(back, s, rma_sizes[i], at));
			} else {
				SK0(kn_shmem_get_nbi(back, s, rma_sizes[i], at));
				SK0(kn_shmem_quiet());
			}
			SK(!memcmp(back, src + (size_t)i * SLOT, rma_sizes[i]), "get of %u bytes at PE %d",
			   rma_sizes[i], at);
		}
		uint64_t g = 0;
		SK0(kn_shmem_g(&pv[me], 8, at, &g));
		SK(g == (0x1122334455667788ull ^ (uint64_t)me), "g at PE %d: %llx", at,
		   (unsigned long long)g);
		uint64_t g1 = 0;
		SK0(kn_shmem_g((uint8_t *)&pv[me] + 1, 1, at, &g1));
		SK(g1 == ((0x1122334455667788ull ^ (uint64_t)me) >> 8 & 0xff), "g of one byte");
	}
	SK0(kinet_shmem_barrier_all());
	/* the path taken: load/store for mapped peers, else the NIC's WQEs */
	int mapped = 0;
	for (int p = 0; p < n; p++)
		mapped += kinet_shmem_pe_mapped(p) == 1;
	struct kinet_counters c;
	SK0(kinet_ctx_counters(kinet_shmem_ctx(), &c));
	if (mapped == n)
		SK(c.wqes == 0, "%llu WQEs with every peer mapped", (unsigned long long)c.wqes);
	else
		SK(mapped == 1 && c.wqes > 0, "mapped %d, WQEs %llu", mapped,
		   (unsigned long long)c.wqes);
	SK0(kinet_shmem_free(pv));
	SK0(kinet_shmem_free(back));
	SK0(kinet_shmem_free(src));
	SK0(kinet_shmem_free(dst));
	return 0;
}

Test(shmem, rma_2_pes)
{
	sh_both(2, rma_fn, NULL);
}

Test(shmem, rma_4_pes)
{
	sh_both(4, rma_fn, NULL);
}

/* ---- signals and point-to-point synchronisation ---------------------------------------- */

#define SIG_ROUNDS 40

/* A ring: PE me sends chunk r to its right neighbour with put_signal
 * (alternately SET to a random value and ADD 1 on a second word), the
 * neighbour waits for the signal with signal_wait_until and checks the
 * chunk. Then signal_op alone, and signal_fetch. */
static int signal_fn(int me, int n, void *arg)
{
	(void)arg;
	int right = (me + 1) % n, left = (me + n - 1) % n;
	uint8_t *buf = kinet_shmem_malloc(SIG_ROUNDS * 40000u);
	uint8_t *src = kinet_shmem_malloc(SIG_ROUNDS * 40000u);
	uint64_t *sig = kinet_shmem_calloc(4, 8);
	SK(buf && src && sig, "malloc");
	SK0(kinet_shmem_barrier_all());
	for (int r = 0; r < SIG_ROUNDS; r++) {
		uint32_t len = 1 + (uint32_t)(sh_seed(me, 2, r) % 39999);
		uint8_t *s = src + (size_t)r * 40000, *d = buf + (size_t)r * 40000;
		tu_fill_random(s, len, sh_seed(me, 3, r));
		uint64_t v = sh_seed(me, 4, r) | 1;
		if (r % 2)
			SK0(kn_shmem_put_signal(d, s, len, &sig[0], v, KN_SIG_SET, right));
		else
			SK0(kn_shmem_put_signal_nbi(d, s, len, &sig[1], 1, KN_SIG_ADD, right));
		/* receive the left neighbour's chunk r */
		uint32_t llen = 1 + (uint32_t)(sh_seed(left, 2, r) % 39999);
		uint64_t got = 0;
		if (r % 2) {
			uint64_t lv = sh_seed(left, 4, r) | 1;
			SK0(kn_shmem_signal_wait_until(&sig[0], KN_SHMEM_CMP_EQ, lv, &got));
			SK(got == lv, "SET signal %llx", (unsigned long long)got);
		} else {
			SK0(kn_shmem_signal_wait_until(&sig[1], KN_SHMEM_CMP_GE, (uint64_t)r / 2 + 1,
						       &got));
		}
		uint8_t *want = malloc(llen);
		tu_fill_random(want, llen, sh_seed(left, 3, r));
		SK(!memcmp(buf + (size_t)r * 40000, want, llen), "round %d: data behind its signal",
		   r);
		free(want);
		/* the next SET only once the neighbour consumed this one */
		SK0(kinet_shmem_barrier_all());
	}
	SK(kn_shmem_signal_fetch(&sig[1]) == SIG_ROUNDS / 2, "ADD signals %llu",
	   (unsigned long long)kn_shmem_signal_fetch(&sig[1]));
	/* signal_op without data, both ops */
	SK0(kn_shmem_signal_op(&sig[2], 5, KN_SIG_ADD, right));
	SK0(kn_shmem_signal_op(&sig[2], 7, KN_SIG_ADD, right));
	SK0(kn_shmem_signal_op(&sig[3], 0xabcdef0123ull + (uint64_t)me, KN_SIG_SET, right));
	SK0(kn_shmem_signal_wait_until(&sig[2], KN_SHMEM_CMP_EQ, 12, NULL));
	SK0(kn_shmem_signal_wait_until(&sig[3], KN_SHMEM_CMP_EQ, 0xabcdef0123ull + (uint64_t)left,
				       NULL));
	/* refused: a bad op, a bad PE, a word outside the heap */
	SK(kn_shmem_signal_op(&sig[2], 1, 7, right) == -EINVAL, "signal op 7");
	SK(kn_shmem_signal_op(&sig[2], 1, KN_SIG_ADD, n) == -EINVAL, "PE n");
	uint64_t local = 0;
	SK(kn_shmem_signal_op(&local, 1, KN_SIG_ADD, right) == -EINVAL, "not symmetric");
	/* p and g of a word not aligned to its size (one store or load on a
	 * mapped peer: a GPU faults on it) */
	uint64_t gw = 0;
	SK(kn_shmem_p((uint8_t *)&sig[3] + 4, 1, 8, right) == -EINVAL, "p of 8 bytes at +4");
	SK(kn_shmem_p((uint8_t *)&sig[3] + 1, 1, 2, right) == -EINVAL, "p of 2 bytes at +1");
	SK(kn_shmem_g((uint8_t *)&sig[3] + 2, 4, right, &gw) == -EINVAL, "g of 4 bytes at +2");
	SK(kn_shmem_test((uint8_t *)&sig[3] + 4, KN_SHMEM_CMP_EQ, 0, 8, 0) == -EINVAL,
	   "test of 8 bytes at +4");
	SK(kinet_shmem_error(1) == -EINVAL, "the first error is kept");
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_free(sig));
	SK0(kinet_shmem_free(src));
	SK0(kinet_shmem_free(buf));
	return 0;
}

Test(shmem, put_signal_set_add_and_waits)
{
	sh_both(3, signal_fn, NULL);
}

/* Every comparison on every size, signed and unsigned: the value a PE's
 * left neighbour writes (p) decides; test() against a model, then
 * wait_until for the true ones, the _all/_any/_some forms with status
 * masks and per-variable values (vector), and the timeout of a wait that
 * cannot come true. */
/* a cmp b in the model: signed, or unsigned. */
static int model_cmp(int cmp, int sgn, uint64_t a, uint64_t b)
{
	int lt = sgn ? (int64_t)a < (int64_t)b : a < b;
	int eq = a == b;
	switch (cmp) {
	case KN_SHMEM_CMP_EQ:
		return eq;
	case KN_SHMEM_CMP_NE:
		return !eq;
	case KN_SHMEM_CMP_GT:
		return !lt && !eq;
	case KN_SHMEM_CMP_GE:
		return !lt;
	case KN_SHMEM_CMP_LT:
		return lt;
	default:
		return lt || eq;
	}
}

static int wait_fn(int me, int n, void *arg)
{
	(void)arg;
	int right = (me + 1) % n;
	static const uint32_t sizes[] = {1, 2, 4, 8};
	uint8_t *vars = kinet_shmem_calloc(64, 8);
	SK(vars, "malloc");
	SK0(kinet_shmem_barrier_all());
	for (int si = 0; si < 4; si++) {
		uint32_t sz = sizes[si];
		/* the right neighbour gets -3 (all ones but the low bits) in its variable */
		uint64_t v = (uint64_t)(int64_t)-3;
		SK0(kn_shmem_p(vars + sz * 8, v, sz, right));
		SK0(kn_shmem_quiet());
		SK0(kinet_shmem_barrier_all());
		void *mine = vars + sz * 8;
		for (int sgn = 0; sgn < 2; sgn++)
			for (int cmp = 0; cmp < 6; cmp++)
				for (int64_t b = -5; b <= 5; b++) {
					/* the variable holds -3 in sz bytes; b is compared in
					 * sz bytes too: as signed values, or unsigned ones */
					uint64_t m = sz == 8 ? ~0ull : (1ull << (8 * sz)) - 1;
					uint64_t a = sgn ? (uint64_t)(int64_t)-3 : v & m;
					uint64_t bb = sgn ? (uint64_t)b : (uint64_t)b & m;
					int want = model_cmp(cmp, sgn, a, bb);
					int got = kn_shmem_test(mine, cmp, (uint64_t)b, sz, sgn);
					SK(got == want, "size %u %s cmp %d vs %lld: %d, model %d", sz,
					   sgn ? "signed" : "unsigned", cmp, (long long)b, got, want);
					if (want)
						SK0(kn_shmem_wait_until(mine, cmp, (uint64_t)b, sz, sgn));
				}
		SK(kn_shmem_test(mine, 9, 0, sz, 0) == -EINVAL, "comparison 9");
		SK0(kinet_shmem_barrier_all());
	}
	SK(kn_shmem_test(vars, KN_SHMEM_CMP_EQ, 0, 3, 0) == -EINVAL, "size 3");
	/* the vector forms over 8 uint32 variables: the left neighbour sets
	 * them to i*10 one after the other */
	uint32_t *v32 = (uint32_t *)(vars + 128);
	for (int i = 0; i < 8; i++)
		SK0(kn_shmem_p(&v32[i], (uint64_t)i * 10, 4, right));
	SK0(kn_shmem_quiet());
	SK0(kinet_shmem_barrier_all());
	uint64_t vals[8];
	for (int i = 0; i < 8; i++)
		vals[i] = (uint64_t)i * 10;
	SK0(kn_shmem_wait_until_all(v32, 8, NULL, KN_SHMEM_CMP_EQ, vals, 1, 4, 0));
	SK(kn_shmem_test_all(v32, 8, NULL, KN_SHMEM_CMP_GE, vals, 1, 4, 0) == 1, "test_all");
	uint64_t thirty = 30;
	SK(kn_shmem_test_all(v32, 8, NULL, KN_SHMEM_CMP_GE, &thirty, 0, 4, 0) == 0, "not all >= 30");
	int status[8] = {1, 1, 1, 0, 0, 0, 0, 0};
	SK(kn_shmem_test_all(v32, 8, status, KN_SHMEM_CMP_GE, &thirty, 0, 4, 0) == 1,
	   "the excluded ones do not count");
	size_t idx = 99;
	SK0(kn_shmem_wait_until_any(v32, 8, status, KN_SHMEM_CMP_GT, &thirty, 0, 4, 0, &idx));
	SK(idx == 4, "first > 30 among the included: %zu", idx);
	size_t ids[8], cnt = 0;
	SK0(kn_shmem_wait_until_some(v32, 8, ids, NULL, KN_SHMEM_CMP_LE, &thirty, 0, 4, 0, &cnt));
	SK(cnt == 4 && ids[0] == 0 && ids[3] == 3, "some <= 30: %zu", cnt);
	int err = 1;
	SK(kn_shmem_test_any(v32, 8, NULL, KN_SHMEM_CMP_GT, (uint64_t[]){70}, 0, 4, 0, &err) ==
		   SIZE_MAX && err == 0, "none > 70");
	int all_out[8] = {1, 1, 1, 1, 1, 1, 1, 1};
	SK0(kn_shmem_wait_until_any(v32, 8, all_out, KN_SHMEM_CMP_EQ, vals, 1, 4, 0, &idx));
	SK(idx == SIZE_MAX, "nothing included: at once, SIZE_MAX");
	/* a wait that cannot come true ends at the timeout (short here) */
	uint64_t t0 = kn_now_ns();
	SK(kn_shmem_wait_until(&v32[7], KN_SHMEM_CMP_EQ, 71, 4, 0) == -ETIMEDOUT, "no timeout");
	uint64_t dt = (kn_now_ns() - t0) / 1000000;
	SK(dt >= 1000 && dt < 20000, "waited %llu ms for a 1500 ms bound", (unsigned long long)dt);
	kinet_shmem_error(1);
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_free(vars));
	return 0;
}

Test(shmem, every_comparison_and_wait_form)
{
	static const char *const env[] = {"KINET_SHMEM_TIMEOUT_MS=1500", NULL};
	for (int p2p = 0; p2p < 2; p2p++) {
		struct sh_job j = {.n = 2, .p2p = p2p, .fn = wait_fn, .env = env};
		sh_run_job(&j, NULL);
	}
}

/* ---- atomics ------------------------------------------------------------------------------ */

#define AMO_N 60

/* Every PE hammers words of PE 0 with every atomic, 4 and 8 bytes, from
 * several host threads at once; after a barrier PE 0 checks the combined
 * results, and each PE checks what its fetching atomics returned. */
struct amo_words {
	uint64_t add64, xor64, cas64, andor64, swap64, set64;
	uint32_t add32, xor32, cas32, andor32, swap32, set32;
};

static int amo_thread(int tid, int nthr, void *arg)
{
	(void)nthr;
	struct amo_words *w = arg;
	int me = kinet_shmem_my_pe(), key = me * 8 + tid; /* this thread's bit */
	uint64_t old;
	for (int i = 0; i < AMO_N; i++) {
		uint64_t v = sh_seed(key, 5, i);
		SK0(kn_shmem_atomic(&w->add64, KN_AMO_FETCH_ADD, 8, v, 0, 0, &old));
		SK0(kn_shmem_atomic(&w->add32, KN_AMO_FETCH_ADD, 4, v, 0, 0, NULL));
		SK0(kn_shmem_atomic(&w->xor64, KN_AMO_FETCH_XOR, 8, v, 0, 0, i % 2 ? &old : NULL));
		SK0(kn_shmem_atomic(&w->xor32, KN_AMO_FETCH_XOR, 4, v, 0, 0, &old));
		/* a counter by compare-and-swap */
		for (uint32_t size = 4; size <= 8; size += 4) {
			void *c = size == 4 ? (void *)&w->cas32 : (void *)&w->cas64;
			uint64_t cur;
			SK0(kn_shmem_atomic(c, KN_AMO_FETCH, size, 0, 0, 0, &cur));
			for (;;) {
				SK0(kn_shmem_atomic(c, KN_AMO_COMPARE_SWAP, size, cur + 1, cur, 0, &old));
				if (old == cur)
					break;
				cur = old;
			}
		}
		/* this thread's own bit: set with or, clear with and, seen both times */
		for (uint32_t size = 4; size <= 8; size += 4) {
			void *c = size == 4 ? (void *)&w->andor32 : (void *)&w->andor64;
			uint64_t bit = 1ull << key;
			SK0(kn_shmem_atomic(c, KN_AMO_FETCH_OR, size, bit, 0, 0, &old));
			SK(!(old & bit), "bit %d set before its or", key);
			SK0(kn_shmem_atomic(c, KN_AMO_FETCH_AND, size, ~bit, 0, 0, &old));
			SK(old & bit, "bit %d clear before its and", key);
		}
		/* swap: the value returned is one some thread stored (tagged) */
		SK0(kn_shmem_atomic(&w->swap64, KN_AMO_SWAP, 8, ((uint64_t)key << 32) | (uint64_t)i, 0, 0,
				    &old));
		SK(old == 0x5a5a5a5a5a5a5a5aull || (old >> 32) < 32, "swap returned %llx",
		   (unsigned long long)old);
		SK0(kn_shmem_atomic(&w->swap32, KN_AMO_SWAP, 4, (uint64_t)key << 16 | (uint64_t)i, 0, 0,
				    &old));
		SK(old == 0x5a5a5a5au || (old >> 16) < 32, "swap32 returned %llx",
		   (unsigned long long)old);
	}
	/* set (a swap without the old value) and fetch */
	if (key == 0) {
		SK0(kn_shmem_atomic(&w->set64, KN_AMO_SWAP, 8, 0x0123456789abcdefull, 0, 0, NULL));
		SK0(kn_shmem_atomic(&w->set32, KN_AMO_SWAP, 4, 0x89abcdefu, 0, 0, NULL));
	}
	return 0;
}

static int amo_fn(int me, int n, void *arg)
{
	(void)arg;
	const int nthr = 3;
	struct amo_words *w = kinet_shmem_calloc(1, sizeof(*w));
	SK(w, "malloc");
	w->swap64 = 0x5a5a5a5a5a5a5a5aull;
	w->swap32 = 0x5a5a5a5au;
	w->andor64 = 0;
	w->andor32 = 0;
	uint64_t x0 = 0x1111222233334444ull;
	w->xor64 = x0;
	w->xor32 = (uint32_t)x0;
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_host_exec(nthr, amo_thread, w));
	SK0(kn_shmem_quiet());
	SK0(kinet_shmem_barrier_all());
	if (me == 0) {
		uint64_t add = 0, xo = x0;
		for (int p = 0; p < n; p++)
			for (int t = 0; t < nthr; t++)
				for (int i = 0; i < AMO_N; i++) {
					add += sh_seed(p * 8 + t, 5, i);
					xo ^= sh_seed(p * 8 + t, 5, i);
				}
		SK(w->add64 == add, "add64 %llx, expected %llx", (unsigned long long)w->add64,
		   (unsigned long long)add);
		SK(w->add32 == (uint32_t)add, "add32");
		SK(w->xor64 == xo, "xor64");
		SK(w->xor32 == (uint32_t)xo, "xor32");
		SK(w->cas64 == (uint64_t)n * nthr * AMO_N, "cas64 counter %llu",
		   (unsigned long long)w->cas64);
		SK(w->cas32 == (uint32_t)(n * nthr * AMO_N), "cas32 counter %u", w->cas32);
		SK(w->andor64 == 0 && w->andor32 == 0, "and/or bits left");
		SK((w->swap64 >> 32) < 32 && (w->swap64 & 0xffffffff) == AMO_N - 1, "last swap");
		SK(w->set64 == 0x0123456789abcdefull && w->set32 == 0x89abcdefu, "set");
	}
	/* refused: size 2, misaligned, not symmetric */
	SK(kn_shmem_atomic((uint8_t *)&w->add64 + 4, KN_AMO_FETCH_ADD, 8, 1, 0, 0, NULL) == -EINVAL,
	   "misaligned");
	SK(kn_shmem_atomic(&w->add64, KN_AMO_FETCH_ADD, 2, 1, 0, 0, NULL) == -EINVAL, "size 2");
	kinet_shmem_error(1);
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_free(w));
	return 0;
}

Test(shmem, every_atomic_4_and_8_bytes_concurrently)
{
	sh_both(3, amo_fn, NULL);
}

/* ---- fence and quiet ------------------------------------------------------------------------ */

#define ORD_ROUNDS 30
#define ORD_LEN (256u << 10) /* rendezvous on the wire: reads that could overtake */

/* PE 0 writes a large buffer, then (fenced) a flag: the last word of a
 * second write large enough to go by rendezvous as well (odd rounds), or a
 * p (even rounds); PE 1 waits for the flag and must find the buffer whole.
 * The wire reads rendezvous writes in parallel: without the fence the
 * second could land first. */
#define FLAG_LEN (40u << 10)
static int fence_fn(int me, int n, void *arg)
{
	(void)n, (void)arg;
	uint8_t *buf = kinet_shmem_malloc(ORD_LEN);
	uint8_t *src = kinet_shmem_malloc(ORD_LEN);
	uint64_t *flag = kinet_shmem_calloc(2, 8);
	uint64_t *big = kinet_shmem_calloc(FLAG_LEN / 8, 8), *bsrc = kinet_shmem_calloc(FLAG_LEN / 8, 8);
	SK(buf && src && flag && big && bsrc, "malloc");
	SK0(kinet_shmem_barrier_all());
	for (int r = 1; r <= ORD_ROUNDS && me < 2; r++) {
		if (me == 0) {
			tu_fill_random(src, ORD_LEN, sh_seed(0, 6, r));
			SK0(kn_shmem_put_nbi(buf, src, ORD_LEN, 1));
			SK0(kn_shmem_fence());
			if (r % 2) {
				bsrc[FLAG_LEN / 8 - 1] = (uint64_t)r;
				SK0(kn_shmem_put(big, bsrc, FLAG_LEN, 1));
			}
			SK0(kn_shmem_p(&flag[0], (uint64_t)r, 8, 1));
			/* the next round's source once PE 1 checked */
			SK0(kn_shmem_wait_until(&flag[1], KN_SHMEM_CMP_EQ, (uint64_t)r, 8, 0));
		} else {
			if (r % 2)
				SK0(kn_shmem_wait_until(&big[FLAG_LEN / 8 - 1], KN_SHMEM_CMP_EQ,
							(uint64_t)r, 8, 0));
			else
				SK0(kn_shmem_wait_until(&flag[0], KN_SHMEM_CMP_EQ, (uint64_t)r, 8, 0));
			uint8_t *want = malloc(ORD_LEN);
			tu_fill_random(want, ORD_LEN, sh_seed(0, 6, r));
			SK(!memcmp(buf, want, ORD_LEN), "round %d: the flag came before the data", r);
			free(want);
			SK0(kn_shmem_p(&flag[1], (uint64_t)r, 8, 0));
		}
	}
	SK0(kinet_shmem_barrier_all());
	/* quiet: PE 0 puts to every peer non-blocking, quiets, then tells them
	 * through the bootstrap's barrier (no kinet ordering involved) */
	if (me == 0)
		for (int p = 1; p < n; p++)
			for (int k = 0; k < 4; k++) {
				tu_fill_random(src + k * (ORD_LEN / 4), ORD_LEN / 4, sh_seed(p, 7, k));
				SK0(kn_shmem_put_nbi(buf + k * (ORD_LEN / 4), src + k * (ORD_LEN / 4),
						     ORD_LEN / 4, p));
				SK0(kn_shmem_quiet()); /* src reused next round: complete first */
			}
	SK0(kinet_shmem_barrier_all());
	if (me != 0) {
		uint8_t *want = malloc(ORD_LEN / 4);
		for (int k = 0; k < 4; k++) {
			tu_fill_random(want, ORD_LEN / 4, sh_seed(me, 7, k));
			SK(!memcmp(buf + k * (ORD_LEN / 4), want, ORD_LEN / 4),
			   "piece %d not there after PE 0's quiet", k);
		}
		free(want);
	}
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_free(bsrc));
	SK0(kinet_shmem_free(big));
	SK0(kinet_shmem_free(flag));
	SK0(kinet_shmem_free(src));
	SK0(kinet_shmem_free(buf));
	return 0;
}

Test(shmem, fence_orders_and_quiet_completes)
{
	sh_both(2, fence_fn, NULL);
	struct sh_job j = {.n = 3, .p2p = 0, .fn = fence_fn};
	sh_run_job(&j, NULL);
}

/* A fence orders without waiting: PE 0 puts a large buffer (rendezvous on
 * the wire), fences, then put_signals a second rendezvous-sized block; the
 * fence polls no completion (the queue's consumed count stays where it
 * was, the put still outstanding) and adds one WQE, and PE 1, woken by the
 * signal, finds both blocks whole, every round. */
static int fence_nowait_fn(int me, int n, void *arg)
{
	(void)n, (void)arg;
	uint8_t *buf = kinet_shmem_malloc(ORD_LEN), *src = kinet_shmem_malloc(ORD_LEN);
	uint8_t *blk = kinet_shmem_malloc(FLAG_LEN), *bsrc = kinet_shmem_malloc(FLAG_LEN);
	uint64_t *sig = kinet_shmem_calloc(2, 8);
	SK(buf && src && blk && bsrc && sig, "malloc");
	SK0(kinet_shmem_barrier_all());
	const kn_shmem *sh = kinet_shmem_device_state();
	for (int r = 1; r <= ORD_ROUNDS; r++) {
		if (me == 0) {
			const kn_qp *qp = &sh->peers[1].qp[knx_sh_qp_index(sh)];
			tu_fill_random(src, ORD_LEN, sh_seed(0, 12, r));
			tu_fill_random(bsrc, FLAG_LEN, sh_seed(0, 13, r));
			SK0(kn_shmem_put_nbi(buf, src, ORD_LEN, 1));
			uint64_t done0 = qp->st->done, resv0 = qp->st->resv;
			SK0(kn_shmem_fence());
			SK(qp->st->done == done0, "round %d: the fence polled completions (done %llu "
			   "-> %llu)", r, (unsigned long long)done0,
			   (unsigned long long)qp->st->done);
			SK(qp->st->resv == resv0 + 1, "round %d: %llu WQEs posted by the fence", r,
			   (unsigned long long)(qp->st->resv - resv0));
			SK0(kn_shmem_put_signal_nbi(blk, bsrc, FLAG_LEN, &sig[0], (uint64_t)r,
						    KN_SIG_SET, 1));
			SK0(kn_shmem_quiet()); /* src reused next round */
			SK0(kn_shmem_wait_until(&sig[1], KN_SHMEM_CMP_EQ, (uint64_t)r, 8, 0));
		} else if (me == 1) {
			SK0(kn_shmem_signal_wait_until(&sig[0], KN_SHMEM_CMP_EQ, (uint64_t)r, NULL));
			uint8_t *want = malloc(ORD_LEN);
			SK(want, "malloc");
			tu_fill_random(want, ORD_LEN, sh_seed(0, 12, r));
			SK(!memcmp(buf, want, ORD_LEN), "round %d: the data before the fence is late", r);
			tu_fill_random(want, FLAG_LEN, sh_seed(0, 13, r));
			SK(!memcmp(blk, want, FLAG_LEN), "round %d: the block before the signal", r);
			free(want);
			SK0(kn_shmem_p(&sig[1], (uint64_t)r, 8, 0));
		}
	}
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_free(sig));
	SK0(kinet_shmem_free(bsrc));
	SK0(kinet_shmem_free(blk));
	SK0(kinet_shmem_free(src));
	SK0(kinet_shmem_free(buf));
	return 0;
}

Test(shmem, fence_orders_without_waiting)
{
	struct sh_job j = {.n = 2, .p2p = 0, .fn = fence_nowait_fn};
	sh_run_job(&j, NULL);
}

/* ---- barriers, teams -------------------------------------------------------------------------- */

#define BAR_ROUNDS 12

/* Each round every PE arrives late by a different amount, puts its round
 * number into every other PE's slot, and enters barrier_all: on leaving it,
 * every slot holds this round (barrier_all completes the puts before it);
 * sync_all then lets no PE run ahead: a PE that left records it, and no PE
 * may see a later round recorded before it left itself. */
static int barrier_fn(int me, int n, void *arg)
{
	(void)arg;
	uint64_t *slot = kinet_shmem_calloc((size_t)n, 8);
	SK(slot, "malloc");
	SK0(kinet_shmem_barrier_all());
	for (int r = 1; r <= BAR_ROUNDS; r++) {
		sh_sleep_us((unsigned)((me * 7 + r * 3) % (n + 2)) * 20000u); /* skew */
		for (int p = 0; p < n; p++)
			if (p != me)
				SK0(kn_shmem_p(&slot[me], (uint64_t)r, 8, p));
		SK0(kn_shmem_barrier_all());
		for (int p = 0; p < n; p++)
			SK(p == me || slot[p] == (uint64_t)r, "round %d: PE %d's value %llu", r, p,
			   (unsigned long long)slot[p]);
		/* nobody may start the next round's puts before everyone checked */
		SK0(kn_shmem_sync_all());
	}
	/* the same through the device API from another host thread */
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_barrier_all_on_stream(NULL));
	SK0(kinet_shmem_sync_all_on_stream(NULL));
	SK0(kinet_shmem_free(slot));
	return 0;
}

Test(shmem, barriers_under_skew)
{
	sh_both(4, barrier_fn, NULL);
}

/* NVSHMEM's atomic ping-pong perftest, round by round: after a host
 * barrier_all each PE resets its own flag with a plain store, then PE 0
 * increments PE 1's flag at once and PE 1 waits for it. That is a race the
 * program wins only if no PE leaves the barrier long after another: the
 * one that left late resets the flag over the peer's increment, and the
 * ping-pong hangs (on the GPU machine it did, at its second type, while
 * the host barrier was the bootstrap's, whose releasing PE left first). A
 * late PE can still lose a round here when the machine deschedules it (on
 * 2 shared cores, 1 to 51 of 200 on the same-node path, which the
 * bootstrap's barrier lost 170 of), so fewer than half must be lost. */
#define PP_ROUNDS 200
static int pingpong_fn(int me, int n, void *arg)
{
	(void)arg;
	(void)n;
	uint64_t *flag = kinet_shmem_calloc(1, 8);
	SK(flag, "malloc");
	int lost = 0;
	for (int r = 0; r < PP_ROUNDS; r++) {
		SK0(kinet_shmem_barrier_all());
		__atomic_store_n(flag, 0, __ATOMIC_RELAXED);
		if (me == 0) {
			/* the perftest's PE 0 launches its kernel first: about 20 us */
			uint64_t t0 = sh_us();
			while (sh_us() - t0 < 20)
				;
			SK0(kn_shmem_atomic(flag, KN_AMO_FETCH_ADD, 8, 1, 0, 1, NULL));
			SK0(kn_shmem_quiet());
		} else if (me == 1) {
			uint64_t t0 = sh_ms();
			while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != 1 && sh_ms() - t0 < 500)
				;
			lost += __atomic_load_n(flag, __ATOMIC_ACQUIRE) != 1;
		}
	}
	SK0(kinet_shmem_barrier_all());
	if (me == 1)
		fprintf(stderr, "[PE 1] %d of %d increments lost to the reset after the barrier\n",
			lost, PP_ROUNDS);
	SK(lost < PP_ROUNDS / 2, "%d of %d rounds: PE 1 reset its flag after PE 0's increment "
	   "had landed (it left the barrier that much later)", lost, PP_ROUNDS);
	SK0(kinet_shmem_free(flag));
	return 0;
}

Test(shmem, host_barrier_releases_together)
{
	sh_both(2, pingpong_fn, NULL);
}

/* Teams: the predefined ones (world, node, shared), a split into even and
 * odd PEs (every PE calls; each gets its own team or INVALID), their
 * queries and translations, team barriers inside them that do not wait for
 * the other team, destroy and a new split reusing the slot. */
static int team_fn(int me, int n, void *arg)
{
	(void)arg;
	SK(kinet_shmem_team_n_pes(KINET_SHMEM_TEAM_WORLD) == n, "world size");
	SK(kinet_shmem_team_my_pe(KINET_SHMEM_TEAM_WORLD) == me, "world index");
	SK(kinet_shmem_team_n_pes(KINET_SHMEM_TEAM_NODE) == n, "every PE on this node");
	SK(kinet_shmem_local_n_pes() == n && kinet_shmem_local_pe() == me, "local PEs");
	SK(kinet_shmem_node_of(n - 1) == 0 && kinet_shmem_node_of(n) == -1, "nodes");
	int mapped = 0;
	for (int p = 0; p < n; p++)
		mapped += kinet_shmem_pe_mapped(p);
	SK(kinet_shmem_team_n_pes(KINET_SHMEM_TEAM_SHARED) == mapped, "shared team: the mapped PEs");
	SK(kn_shmem_team_n_pes(KINET_SHMEM_TEAM_SHARED) == mapped, "the device view");
	kinet_shmem_team even, odd;
	SK0(kinet_shmem_team_split_strided(KINET_SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, &even));
	SK0(kinet_shmem_team_split_strided(KINET_SHMEM_TEAM_WORLD, 1, 2, n / 2, &odd));
	kinet_shmem_team mine = me % 2 ? odd : even;
	SK((me % 2 ? even : odd) == KINET_SHMEM_TEAM_INVALID, "not a member: INVALID");
	SK(mine >= 3, "a new slot: %d", mine);
	SK(kinet_shmem_team_my_pe(mine) == me / 2, "index in the team");
	SK(kn_shmem_team_my_pe(mine) == me / 2, "the device's index");
	SK(kinet_shmem_team_translate_pe(mine, 0, KINET_SHMEM_TEAM_WORLD) == me % 2,
	   "member 0 is world PE %d", me % 2);
	SK(kn_shmem_team_translate_pe(KINET_SHMEM_TEAM_WORLD, me, mine) == me / 2, "translate back");
	SK(kn_shmem_team_translate_pe(KINET_SHMEM_TEAM_WORLD, (me + 1) % n, mine) == -1,
	   "a PE of the other team");
	/* the odd team's barriers run while the even team's PEs wait elsewhere */
	uint64_t *flag = kinet_shmem_calloc(1, 8);
	SK(flag, "malloc");
	SK0(kinet_shmem_barrier_all());
	for (int r = 0; r < 5; r++)
		SK0(kn_shmem_barrier(mine));
	if (me % 2 == 0 && me + 1 < n)
		SK0(kn_shmem_p(flag, 1, 8, me + 1)); /* the odd team only then left its loop */
	if (me % 2 == 1)
		SK0(kn_shmem_wait_until(flag, KN_SHMEM_CMP_EQ, 1, 8, 0));
	SK(kn_shmem_team_sync(me % 2 ? even : odd) == -EINVAL, "sync of a team not joined");
	kinet_shmem_error(1);
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_team_destroy(mine));
	SK(kinet_shmem_team_destroy(KINET_SHMEM_TEAM_WORLD) == -EINVAL, "the world stays");
	/* the slot is taken again, with its counters reset */
	kinet_shmem_team all;
	SK0(kinet_shmem_team_split_strided(KINET_SHMEM_TEAM_WORLD, 0, 1, n, &all));
	SK(all == mine || all == (me % 2 ? even : odd) || all >= 3, "slot %d", all);
	for (int r = 0; r < 3; r++)
		SK0(kn_shmem_barrier(all));
	/* disagreements are refused everywhere */
	kinet_shmem_team bad;
	SK(kinet_shmem_team_split_strided(KINET_SHMEM_TEAM_WORLD, 0, 1, me == 0 ? n : n - 1, &bad) ==
		   -EINVAL, "sizes differ");
	SK(bad == KINET_SHMEM_TEAM_INVALID, "no team on refusal");
	SK(kinet_shmem_team_split_strided(KINET_SHMEM_TEAM_WORLD, 0, 1, n + 1, &bad) == -EINVAL,
	   "larger than the parent");
	SK0(kinet_shmem_team_destroy(all));
	SK0(kinet_shmem_free(flag));
	return 0;
}

Test(shmem, teams)
{
	sh_both(4, team_fn, NULL);
}

/* A split whose PEs pass different parents: PEs 1 and 3 pass the team of
 * the odd PEs, PEs 0 and 2 the world, all with (start 0, stride 1, size 2).
 * PE 0 would make {0, 1} and PE 1 {1, 3}, and the team's barrier would never
 * complete: the split is refused on every PE with -EINVAL, nothing is
 * created, and the world still works. Parents that differ but each of
 * which is passed by all its members (the even PEs pass the even team, the
 * odd PEs the odd team) agree on the members: that split is accepted. */
static int split_parents_fn(int me, int n, void *arg)
{
	(void)arg;
	kinet_shmem_team even, odd, bad, both;
	SK0(kinet_shmem_team_split_strided(KINET_SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, &even));
	SK0(kinet_shmem_team_split_strided(KINET_SHMEM_TEAM_WORLD, 1, 2, n / 2, &odd));
	kinet_shmem_team mine = me % 2 ? odd : even;
	int rc = kinet_shmem_team_split_strided(me % 2 ? odd : KINET_SHMEM_TEAM_WORLD, 0, 1, 2,
						&bad);
	SK(rc == -EINVAL, "a split over different parents: %d (%s)", rc, kinet_strerror(rc));
	SK(bad == KINET_SHMEM_TEAM_INVALID, "no team on refusal");
	/* a PE that is a member of the parent the others pass, passing none */
	rc = kinet_shmem_team_split_strided(me == 1 ? KINET_SHMEM_TEAM_INVALID : odd, 0, 1, n / 2,
					    &bad);
	SK(rc == -EINVAL, "a member passing no parent: %d (%s)", rc, kinet_strerror(rc));
	SK(bad == KINET_SHMEM_TEAM_INVALID, "no team on refusal");
	kinet_shmem_error(1);
	SK0(kinet_shmem_barrier_all());
	SK0(kn_shmem_barrier_all());
	/* each team's members pass their own team: accepted, the same slot */
	SK0(kinet_shmem_team_split_strided(mine, 0, 1, me % 2 ? n / 2 : (n + 1) / 2, &both));
	SK(both != KINET_SHMEM_TEAM_INVALID, "a member of its own team's split");
	SK(kinet_shmem_team_n_pes(both) == kinet_shmem_team_n_pes(mine), "the whole parent");
	for (int r = 0; r < 3; r++)
		SK0(kn_shmem_barrier(both));
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_team_destroy(both));
	SK0(kinet_shmem_team_destroy(mine));
	return 0;
}

Test(shmem, split_with_different_parents_refused_everywhere)
{
	struct sh_job j = {.n = 4, .p2p = 1, .fn = split_parents_fn};
	sh_run_job(&j, NULL);
}

/* ---- the group forms and the QPs per peer ------------------------------------------------------ */

#define GRID 4
#define BLK 40 /* a full warp and a partial one */
#define GLEN 50000u

struct grp_arg {
	uint8_t *dst, *src, *got;
	uint64_t *sig;
	int me, n;
	volatile int bad;
};

/* Each CTA sends one buffer to the right neighbour with the block form, one
 * with the warp form of warp 0 and a short one from the partial warp, then
 * a fourth with the block form of put_signal, and waits for the left
 * neighbour's signal of the same CTA. */
static void grp_kernel(void *argp)
{
	struct grp_arg *a = argp;
	const struct kinet_shmem_host_thread *t = kinet_shmem_host_self();
	unsigned cta = t->block_idx.x, tid = t->thread_idx.x;
	int right = (a->me + 1) % a->n;
	uint8_t *d = a->dst + (size_t)cta * 4 * GLEN, *s = a->src + (size_t)cta * 4 * GLEN;
	if (kn_shmem_putmem_block(d, s, GLEN, right) != 0)
		a->bad = __LINE__;
	if (tid < 32 && kn_shmem_putmem_nbi_warp(d + GLEN, s + GLEN, GLEN, right) != 0)
		a->bad = __LINE__;
	if (tid >= 32 && kn_shmem_putmem_warp(d + 3 * GLEN, s + 3 * GLEN, 1000, right) != 0)
		a->bad = __LINE__; /* the partial warp: 8 threads */
	if (kn_shmem_quiet_block() != 0)
		a->bad = __LINE__;
	if (kn_shmem_put_signal_nbi_block(d + 2 * GLEN, s + 2 * GLEN, GLEN, &a->sig[cta], 1,
					  KN_SIG_ADD, right) != 0)
		a->bad = __LINE__;
	if (tid == 0 && kn_shmem_signal_wait_until(&a->sig[cta], KN_SHMEM_CMP_GE, 1, NULL) != 0)
		a->bad = __LINE__;
	if (kn_shmem_quiet_block() != 0)
		a->bad = __LINE__;
}

/* Each CTA reads the left neighbour's copy of its first buffer back. */
static void grp_get_kernel(void *argp)
{
	struct grp_arg *a = argp;
	const struct kinet_shmem_host_thread *t = kinet_shmem_host_self();
	unsigned cta = t->block_idx.x, tid = t->thread_idx.x;
	int left = (a->me + a->n - 1) % a->n;
	uint8_t *d = a->dst + (size_t)cta * 4 * GLEN;
	if (kn_shmem_getmem_block(a->got + (size_t)cta * GLEN, d, GLEN / 2, left) != 0)
		a->bad = __LINE__;
	if (tid < 32 && kn_shmem_getmem_nbi_warp(a->got + (size_t)cta * GLEN + GLEN / 2,
						 d + GLEN / 2, GLEN / 2, left) != 0)
		a->bad = __LINE__;
	if (kn_shmem_quiet_block() != 0)
		a->bad = __LINE__;
}

/* One CTA per PE: the block and warp barriers. */
static void grp_bar_kernel(void *argp)
{
	struct grp_arg *a = argp;
	if (kn_shmem_barrier_all_block() != 0 || kn_shmem_sync_all_block() != 0)
		a->bad = __LINE__;
	if (kinet_shmem_host_self()->thread_idx.x < 32 &&
	    (kn_shmem_barrier_all_warp() != 0 || kn_shmem_team_sync_warp(0) != 0))
		a->bad = __LINE__;
	if (kn_shmem_barrier_block(KINET_SHMEM_TEAM_WORLD) != 0)
		a->bad = __LINE__;
}

static int grp_fn(int me, int n, void *arg)
{
	(void)arg;
	struct grp_arg a = {0};
	a.me = me;
	a.n = n;
	a.dst = kinet_shmem_malloc((size_t)GRID * 4 * GLEN);
	a.src = kinet_shmem_malloc((size_t)GRID * 4 * GLEN);
	a.got = kinet_shmem_malloc((size_t)GRID * GLEN);
	a.sig = kinet_shmem_calloc(GRID, 8);
	SK(a.dst && a.src && a.got && a.sig, "malloc");
	tu_fill_random(a.src, (size_t)GRID * 4 * GLEN, sh_seed(me, 8, 0));
	SK0(kinet_shmem_barrier_all());
	struct kinet_shmem_dim3 grid = {GRID, 1, 1}, block = {BLK, 1, 1}, one = {1, 1, 1};
	SK0(kinet_shmem_host_launch(grp_kernel, &a, grid, block));
	SK(!a.bad, "a group call failed (line %d): %s", a.bad, kinet_strerror(kinet_shmem_error(0)));
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_host_launch(grp_get_kernel, &a, grid, block));
	SK0(kinet_shmem_host_launch(grp_bar_kernel, &a, one, block));
	SK(!a.bad, "a group call failed (line %d): %s", a.bad, kinet_strerror(kinet_shmem_error(0)));
	SK0(kinet_shmem_barrier_all());
	int left = (me + n - 1) % n, left2 = (me + 2 * n - 2) % n;
	uint8_t *want = malloc((size_t)GRID * 4 * GLEN);
	uint8_t *want2 = malloc((size_t)GRID * 4 * GLEN);
	tu_fill_random(want, (size_t)GRID * 4 * GLEN, sh_seed(left, 8, 0));
	tu_fill_random(want2, (size_t)GRID * 4 * GLEN, sh_seed(left2, 8, 0));
	for (int c = 0; c < GRID; c++) {
		const uint8_t *d = a.dst + (size_t)c * 4 * GLEN, *w = want + (size_t)c * 4 * GLEN;
		SK(!memcmp(d, w, 3 * GLEN), "CTA %d: the block, warp and signal puts", c);
		SK(!memcmp(d + 3 * GLEN, w + 3 * GLEN, 1000), "CTA %d: the partial warp's put", c);
		SK(a.sig[c] == 1, "CTA %d: signal %llu", c, (unsigned long long)a.sig[c]);
		/* the left neighbour's dst holds what its own left neighbour sent */
		SK(!memcmp(a.got + (size_t)c * GLEN, want2 + (size_t)c * 4 * GLEN, GLEN),
		   "CTA %d: getmem_block and getmem_nbi_warp", c);
	}
	free(want);
	free(want2);
	/* through the NIC, the CTAs used several QPs to the right neighbour */
	const kn_shmem *st = kinet_shmem_device_state();
	int right = (me + 1) % n;
	if (st->peers[right].qp) {
		int used = 0;
		for (uint32_t q = 0; q < st->nqp; q++)
			used += st->peers[right].qp[q].st->resv > 0;
		SK(used == (int)(st->nqp < GRID ? st->nqp : GRID), "%d QPs of %u used by %d CTAs",
		   used, st->nqp, GRID);
	}
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_free(a.sig));
	SK0(kinet_shmem_free(a.got));
	SK0(kinet_shmem_free(a.src));
	SK0(kinet_shmem_free(a.dst));
	return 0;
}

Test(shmem, warp_and_block_forms_and_qps_by_cta)
{
	sh_both(2, grp_fn, NULL);
	struct sh_job j = {.n = 3, .p2p = 0, .fn = grp_fn, .qps = 2};
	sh_run_job(&j, NULL);
}

static void count_kernel(void *arg)
{
	__atomic_fetch_add((int *)arg, 1, __ATOMIC_RELAXED);
}

/* Grid x block is checked without wrapping: 2^64 threads (65536^2 blocks of
 * 65536^2) wrapped to 0 and passed the 4096 bound, then tried to allocate
 * 128 GiB of barriers; a block of 2^64 threads ran nothing. Both -EINVAL at
 * once; a launch in bounds still runs every thread. */
Test(shmem, host_launch_refuses_shapes_that_wrap)
{
	int calls = 0;
	struct kinet_shmem_dim3 g16 = {65536, 65536, 1}, b16 = {65536, 65536, 1};
	cr_assert_eq(kinet_shmem_host_launch(count_kernel, &calls, g16, b16), -EINVAL);
	struct kinet_shmem_dim3 one = {1, 1, 1}, bwrap = {1u << 31, 1u << 31, 4};
	cr_assert_eq(kinet_shmem_host_launch(count_kernel, &calls, one, bwrap), -EINVAL);
	struct kinet_shmem_dim3 gmax = {~0u, ~0u, ~0u};
	cr_assert_eq(kinet_shmem_host_launch(count_kernel, &calls, gmax, gmax), -EINVAL);
	struct kinet_shmem_dim3 g4k = {4096, 1, 1}, b2 = {2, 1, 1};
	cr_assert_eq(kinet_shmem_host_launch(count_kernel, &calls, g4k, b2), -EINVAL);
	cr_assert_eq(calls, 0);
	struct kinet_shmem_dim3 g = {2, 2, 1}, b = {3, 1, 2};
	cr_assert_eq(kinet_shmem_host_launch(count_kernel, &calls, g, b), 0);
	cr_assert_eq(calls, 24);
}

/* ---- ptr ------------------------------------------------------------------------------------ */

static int ptr_fn(int me, int n, void *arg)
{
	(void)arg;
	uint64_t *x = kinet_shmem_malloc(64), *h = kinet_shmem_malloc_host(64);
	SK(x && h, "malloc");
	x[0] = 0x7000 + (uint64_t)me;
	h[0] = 0x8000 + (uint64_t)me;
	SK0(kinet_shmem_barrier_all());
	for (int p = 0; p < n; p++) {
		uint64_t *dx = kn_shmem_ptr(x, p), *hx = kinet_shmem_ptr(x, p), *dh = kn_shmem_ptr(h, p);
		if (kinet_shmem_pe_mapped(p)) {
			SK(dx && hx == dx && dh, "PE %d is mapped: a pointer", p);
			SK(*dx == 0x7000 + (uint64_t)p && *dh == 0x8000 + (uint64_t)p, "PE %d's words",
			   p);
		} else {
			SK(!dx && !hx && !dh, "PE %d goes through the NIC: NULL", p);
		}
	}
	SK(kn_shmem_ptr(x, n) == NULL && kn_shmem_ptr(&me, 0) == NULL, "bad PE, not symmetric");
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_free(h));
	SK0(kinet_shmem_free(x));
	return 0;
}

Test(shmem, ptr_reaches_mapped_peers_only)
{
	sh_both(3, ptr_fn, NULL);
}

/* ---- the layer's reserved area ------------------------------------------------------------------ */

/* The first KN_SHMEM_RESERVED bytes of every device heap are the layer's
 * (barrier counters, result slots): no user operation reaches them, on a
 * peer or on this PE. PE 0 tries every kind of access to PE 1's world
 * barrier counter; had one been accepted, PE 1's next barrier would return
 * before PE 0 arrived. Each is refused with -EINVAL, and the barrier still
 * waits for PE 0 (which arrives late, after setting PE 1's flag). */
static int reserved_fn(int me, int n, void *arg)
{
	(void)arg;
	uint64_t *flag = kinet_shmem_calloc(1, 8), *src = kinet_shmem_malloc(64);
	uint64_t *data = kinet_shmem_calloc(8, 8);
	SK(flag && src && data, "malloc");
	uint8_t *heap = kinet_shmem_device_state()->heap[KN_SHMEM_HEAP_DEVICE];
	uint64_t *ctr = (uint64_t *)(void *)heap; /* world team, round 0 */
	uint64_t big = 1ull << 40, g = 0;
	int accepted = 0;
	SK0(kinet_shmem_barrier_all());
	if (me == 0) {
		for (int i = 0; i < 8; i++)
			src[i] = big;
		int pe = 1;
		int rcs[] = {
			kn_shmem_p(ctr, big, 8, pe),
			kn_shmem_put(ctr, src, 8, pe),
			kn_shmem_put_nbi(ctr, src, 64, pe),
			kn_shmem_put(heap + KN_SHMEM_RESERVED - 8, src, 16, pe), /* across its end */
			kn_shmem_signal_op(ctr, big, KN_SIG_SET, pe),
			kn_shmem_put_signal(data, src, 8, ctr, big, KN_SIG_ADD, pe),
			kn_shmem_atomic(ctr, KN_AMO_FETCH_ADD, 8, big, 0, pe, NULL),
			kn_shmem_atomic(ctr, KN_AMO_SWAP, 8, big, 0, pe, &g),
			kn_shmem_get(src, ctr, 8, pe),
			kn_shmem_g(ctr, 8, pe, &g),
			kn_shmem_p(ctr, big, 8, me), /* this PE's own */
		};
		for (size_t i = 0; i < sizeof(rcs) / sizeof(rcs[0]); i++)
			if (rcs[i] != -EINVAL) {
				fprintf(stderr, "[PE 0] access %zu to the reserved area: %d\n", i,
					rcs[i]);
				accepted++;
			}
		if (kinet_shmem_ptr(ctr, pe) || kn_shmem_ptr(ctr, pe))
			accepted++;
		SK0(kn_shmem_quiet());
	}
	SK0(kinet_shmem_barrier_all()); /* the bootstrap's barrier, not the counters */
	if (me == 0) {
		sh_sleep_us(300000);
		for (int p = 1; p < n; p++)
			SK0(kn_shmem_p(flag, 1, 8, p));
		SK0(kn_shmem_quiet());
	}
	SK0(kn_shmem_barrier_all());
	SK(me == 0 || *flag == 1, "the device barrier returned before PE 0 arrived");
	SK(accepted == 0, "%d accesses to the reserved area were accepted", accepted);
	SK(me != 0 || kinet_shmem_error(1) == -EINVAL, "the refusal is the PE's error");
	SK0(kn_shmem_barrier_all());
	SK0(kinet_shmem_free(data));
	SK0(kinet_shmem_free(src));
	SK0(kinet_shmem_free(flag));
	return 0;
}

Test(shmem, reserved_area_unreachable_and_barriers_hold)
{
	sh_both(2, reserved_fn, NULL);
}

/* The same bytes through WQEs a program posts itself, with the user heap's
 * key (kinet_shmem_device_state's rkey[KN_SHMEM_HEAP_DEVICE]): the reserved
 * area is a region of its own, so the target's NIC refuses the write as out
 * of the user region's bounds. Every PE writes its own world counter
 * through a loopback pair of QPs in the layer's PD (the software NIC within
 * one process); over the wire, PE 0 also writes PE 1's through the layer's
 * QP that its own thread does not use. Each gets an error CQE, remote
 * access error, reason out of bounds; the counters keep their values and
 * the next barrier still waits for the late PE 0. A write to a block of the
 * heap with the same key lands (the key is the heap's user part). */
static int raw_put(const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *src,
		   uint32_t lkey, uint32_t len, const char *what)
{
	kn_ticket_t t;
	uint32_t why = 0;
	SK0(kn_put(qp, raddr, rkey, src, lkey, len, &t));
	int rc = kn_wait(qp, t);
	uint32_t synd = kn_qp_error(qp, &why);
	SK(rc == -EIO && synd == KN_SYND_REMOTE_ACCESS_ERR && why == KINET_REASON_OUT_OF_BOUNDS,
	   "%s: wait %d, syndrome 0x%x, reason %u (%s)", what, rc, synd, why,
	   kinet_reason_str((int)why));
	return 0;
}

static int raw_reserved_fn(int me, int n, void *arg)
{
	(void)arg;
	const kn_shmem *st = kinet_shmem_device_state();
	uint64_t *flag = kinet_shmem_calloc(1, 8), *src = kinet_shmem_malloc(64);
	SK(st && flag && src, "malloc");
	uint8_t *heap = st->heap[KN_SHMEM_HEAP_DEVICE];
	volatile uint64_t *ctr = (volatile uint64_t *)(void *)heap; /* world team, round 0 */
	uint64_t big = 1ull << 40;
	uint32_t lkey = st->lkey[KN_SHMEM_HEAP_DEVICE];
	for (int i = 0; i < 8; i++)
		src[i] = big;
	SK0(kinet_shmem_barrier_all());
	/* one process: a loopback pair in the layer's PD */
	kinet_pd *pd = kinet_shmem_pd();
	SK(pd, "the layer's PD");
	struct kinet_qp_attr qa = {.sq_depth = 16};
	kinet_qp *a, *b;
	kn_qp *da;
	SK0(kinet_qp_create(pd, &qa, &a));
	SK0(kinet_qp_create(pd, &qa, &b));
	SK0(kinet_qp_connect_local(a, b));
	SK0(kinet_qp_device(a, &da));
	uint32_t urkey = st->peers[me].rkey[KN_SHMEM_HEAP_DEVICE];
	uint64_t mine = (uint64_t)(uintptr_t)heap;
	SK0(raw_put(da, mine, urkey, src, lkey, 8, "loopback: the counter"));
	SK0(kinet_qp_modify(a, KINET_QPS_RESET, NULL));
	SK0(kinet_qp_modify(b, KINET_QPS_RESET, NULL));
	SK0(kinet_qp_connect_local(a, b));
	SK0(raw_put(da, mine + KN_SHMEM_RESERVED - 8, urkey, src, lkey, 16,
		    "loopback: across the reserved area's end"));
	/* the raw writes carry 2^40, which no count of barrier arrivals reaches
	 * (the other PE's arrivals may move the counter meanwhile) */
	SK(*ctr < big, "the loopback write reached the counter: %llx", (unsigned long long)*ctr);
	SK0(kinet_qp_modify(a, KINET_QPS_RESET, NULL));
	SK0(kinet_qp_modify(b, KINET_QPS_RESET, NULL));
	SK0(kinet_qp_connect_local(a, b));
	/* the user part with the same key: allowed */
	uint64_t *land = kinet_shmem_calloc(1, 8);
	SK(land, "malloc");
	kn_ticket_t t;
	SK0(kn_put(da, (uint64_t)(uintptr_t)land, urkey, src, lkey, 8, &t));
	SK0(kn_wait(da, t));
	SK(*land == big, "a raw write to the user part");
	SK0(kinet_qp_destroy(a));
	SK0(kinet_qp_destroy(b));
	/* over the wire: PE 0 to PE 1's counter through the QP its thread does not use */
	const kn_shmem_peer *p1 = &st->peers[1];
	if (me == 0 && kinet_shmem_pe_mapped(1) == 0) {
		SK(p1->qp && st->nqp > 1, "PE 1 is reached through %u QPs", st->nqp);
		const kn_qp *q = &p1->qp[(kinet_shmem_host_qp_index() + 1) % st->nqp];
		SK0(raw_put(q, p1->base[KN_SHMEM_HEAP_DEVICE], p1->rkey[KN_SHMEM_HEAP_DEVICE], src,
			    lkey, 8, "wire: PE 1's counter"));
	}
	SK0(kinet_shmem_barrier_all()); /* the bootstrap's barrier, not the counters */
	SK(*ctr < big, "a raw write reached the counter: %llx", (unsigned long long)*ctr);
	if (me == 0) {
		sh_sleep_us(300000);
		for (int p = 1; p < n; p++)
			SK0(kn_shmem_p(flag, 1, 8, p));
		SK0(kn_shmem_quiet());
	}
	SK0(kn_shmem_barrier_all());
	SK(me == 0 || *flag == 1, "the device barrier returned before PE 0 arrived");
	SK0(kn_shmem_barrier_all());
	SK0(kinet_shmem_free(land));
	SK0(kinet_shmem_free(src));
	SK0(kinet_shmem_free(flag));
	return 0;
}

Test(shmem, reserved_area_refused_by_the_nic)
{
	for (int p2p = 0; p2p < 2; p2p++) {
		struct sh_job j = {.n = 2, .p2p = p2p, .fn = raw_reserved_fn, .qps = 2};
		sh_run_job(&j, NULL);
	}
}

/* ---- failures ---------------------------------------------------------------------------------- */

/* Allocations the PEs disagree on are refused on every PE, and the heap
 * stays usable: a size that differs, an order that differs, a free of
 * different blocks; then agreeing calls succeed at the same offsets. */
static int mismatch_fn(int me, int n, void *arg)
{
	(void)n, (void)arg;
	void *p = NULL;
	SK(kinet_shmem_alloc(me == 1 ? 8192 : 4096, 0, KINET_SHMEM_DEVICE, 0, &p) == -EINVAL,
	   "differing sizes");
	SK(p == NULL, "no block");
	SK(kinet_shmem_malloc(me == 2 ? 100 : 200) == NULL, "malloc: differing sizes");
	SK(kinet_shmem_error(1) == -EINVAL, "malloc's error is kept");
	/* another order: PE 0 allocates the host heap first */
	SK(kinet_shmem_alloc(256, 0, me == 0 ? KINET_SHMEM_HOST : KINET_SHMEM_DEVICE, 0, &p) ==
		   -EINVAL, "differing kinds");
	void *a = kinet_shmem_malloc(1000), *b = kinet_shmem_malloc(3000);
	SK(a && b, "agreeing calls work");
	SK(kinet_shmem_free(me == 1 ? a : b) == -EINVAL, "freeing different blocks");
	SK(kinet_shmem_free(&me) == -EINVAL, "not a block");
	SK(kinet_shmem_alloc(1ull << 40, 0, KINET_SHMEM_DEVICE, 0, &p) == -ENOMEM, "too large");
	SK(kinet_shmem_align(3, 64) == NULL, "alignment not a power of two");
	SK0(kinet_shmem_free(a));
	SK0(kinet_shmem_free(b));
	/* the same offsets everywhere: PE 0 tells its offset, each compares */
	uint64_t *c = kinet_shmem_align(4096, 8192);
	SK(c && ((uintptr_t)c & 4095) == 0, "aligned");
	uint64_t off = (uint64_t)((uint8_t *)c - (uint8_t *)kinet_shmem_device_state()->heap[0]);
	c[0] = off;
	SK0(kinet_shmem_barrier_all());
	uint64_t o0;
	SK0(kn_shmem_g(c, 8, 0, &o0));
	SK(o0 == off, "offset %llu here, %llu on PE 0", (unsigned long long)off,
	   (unsigned long long)o0);
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_free(c));
	SK0(kinet_shmem_free(NULL));
	kinet_shmem_error(1);
	return 0;
}

Test(shmem, mismatched_allocations_refused)
{
	struct sh_job j = {.n = 3, .p2p = 0, .fn = mismatch_fn};
	sh_run_job(&j, NULL);
}

/* The heap's size from NVSHMEM's variable (2.5G: its syntax, a fraction
 * with a suffix): allocations up to it succeed, and the data at both ends
 * of a block beyond 2 GiB travels; the next one is refused on every PE with
 * NULL and a line naming the request, the heap's size and what to raise. */
static char heap_log[8192];
static void heap_cap(int level, const char *msg, void *user)
{
	(void)user;
	size_t l = strlen(heap_log);
	if (level == KINET_LOG_ERROR && l + strlen(msg) + 2 < sizeof(heap_log))
		snprintf(heap_log + l, sizeof(heap_log) - l, "%s\n", msg);
}

#define BIG_LEN (5ull << 29) /* 2.5 GiB */
static int big_heap_fn(int me, int n, void *arg)
{
	(void)n, (void)arg;
	SK(kinet_tunable_int("KINET_SHMEM_HEAP_SIZE") == (long long)BIG_LEN, "heap %lld",
	   kinet_tunable_int("KINET_SHMEM_HEAP_SIZE"));
	kinet_log_set_callback(heap_cap, NULL);
	uint8_t *a = kinet_shmem_malloc(1ull << 30), *b = kinet_shmem_malloc(1ull << 30);
	SK(a && b, "two blocks of 1 GiB in a heap of 2.5 GiB");
	heap_log[0] = '\0';
	SK(kinet_shmem_malloc(1ull << 30) == NULL, "a third GiB does not fit");
	SK(strstr(heap_log, "1073741824 bytes") && strstr(heap_log, "heap of 2684354560 bytes") &&
		   strstr(heap_log, "NVSHMEM_SYMMETRIC_SIZE"),
	   "the line names the request, the size and the variable: %s", heap_log);
	SK(kinet_shmem_error(1) == -ENOMEM, "kept as the PE's error");
	/* the rest, to the last byte */
	size_t rest = (size_t)(BIG_LEN - (2ull << 30) - KN_SHMEM_RESERVED);
	uint8_t *c = kinet_shmem_malloc(rest);
	SK(c, "the remaining %zu bytes", rest);
	SK(kinet_shmem_malloc(64) == NULL, "the heap is full");
	kinet_shmem_error(1);
	kinet_log_set_callback(NULL, NULL);
	/* PE 0 puts random bytes (its first MiB of a) at both ends of b and c on PE 1 */
	const size_t mib = 1u << 20;
	uint8_t *dst[4] = {b, b + (1ull << 30) - mib, c, c + rest - mib};
	if (me == 0) {
		tu_fill_random(a, 4 * mib, sh_seed(0, 11, 0));
		for (int k = 0; k < 4; k++)
			SK0(kn_shmem_put(dst[k], a + k * mib, mib, 1));
		SK0(kn_shmem_quiet());
	}
	SK0(kinet_shmem_barrier_all());
	if (me == 1) {
		uint8_t *want = malloc(4 * mib);
		SK(want, "malloc");
		tu_fill_random(want, 4 * mib, sh_seed(0, 11, 0));
		for (int k = 0; k < 4; k++)
			SK(!memcmp(dst[k], want + k * mib, mib), "piece %d", k);
		free(want);
	}
	SK0(kinet_shmem_barrier_all());
	SK0(kinet_shmem_free(c));
	SK0(kinet_shmem_free(b));
	SK0(kinet_shmem_free(a));
	return 0;
}

Test(shmem, heap_size_from_nvshmem_symmetric_size)
{
	static const char *const env[] = {"NVSHMEM_SYMMETRIC_SIZE=2.5G", NULL};
	for (int p2p = 0; p2p < 2; p2p++) {
		struct sh_job j = {.n = 2, .p2p = p2p, .fn = big_heap_fn, .env = env,
				   .heap = SH_HEAP_ENV};
		sh_run_job(&j, NULL);
	}
}

/* A PE killed mid-run: the others' operations to it fail (-EIO, the NIC's
 * transport error after KINET_NET_TIMEOUT_MS), their device barrier ends
 * with -ETIMEDOUT at KINET_SHMEM_TIMEOUT_MS, their host collectives with
 * the bootstrap's error; nothing hangs. */
static int kill_fn(int me, int n, void *arg)
{
	(void)arg;
	uint8_t *buf = kinet_shmem_malloc(1u << 20);
	SK(buf, "malloc");
	SK0(kinet_shmem_barrier_all());
	if (me == n - 1) {
		kill(getpid(), SIGKILL);
		for (;;)
			pause();
	}
	sh_sleep_us(200000);
	uint64_t t0 = sh_ms();
	/* through the NIC (same-node path off): a stream of puts to the dead PE */
	int rc = 0;
	for (int i = 0; i < 50 && !rc; i++)
		rc = kn_shmem_put(buf, buf + 512 * 1024, 256 * 1024, n - 1);
	SK(rc == -EIO || rc == -ETIMEDOUT, "puts to a dead PE: %d", rc);
	uint64_t dt1 = sh_ms() - t0;
	t0 = sh_ms();
	SK(kn_shmem_barrier_all() != 0, "a barrier with a dead PE");
	SK(kn_shmem_sync_all() == -ETIMEDOUT, "a sync with a dead PE");
	uint64_t dt2 = sh_ms() - t0;
	t0 = sh_ms();
	int hrc = kinet_shmem_barrier_all();
	uint64_t dt3 = sh_ms() - t0;
	SK(hrc != 0, "a host barrier with a dead PE");
	fprintf(stderr, "[PE %d] dead peer: puts failed after %llu ms (%s), device barrier %llu ms, "
		"host barrier %llu ms (%s)\n", me, (unsigned long long)dt1, kinet_strerror(rc),
		(unsigned long long)dt2, (unsigned long long)dt3, kinet_strerror(hrc));
	SK(dt1 < 2000 + 20000 && dt2 >= 2500 && dt2 < 3000 + 5000 && dt3 < 15000 + 5000, "bounded");
	SK(kinet_shmem_error(0) != 0, "the error is kept");
	/* the layer still tears down (its barrier fails: the error, not a hang) */
	return kinet_shmem_finalize() != 0 ? 0 : 1;
}

Test(shmem, a_pe_killed_mid_run)
{
	static const char *const env[] = {"KINET_SHMEM_TIMEOUT_MS=3000", NULL};
	struct sh_job j = {.n = 3, .p2p = 0, .fn = kill_fn, .env = env, .expect_killed = 1};
	int res[SH_MAXPE];
	sh_run_job(&j, res);
	for (int pe = 0; pe < 2; pe++)
		cr_expect_eq(res[pe], 0, "PE %d: %d", pe, res[pe]);
	cr_expect_eq(res[2], -EINTR, "the killed PE");
}

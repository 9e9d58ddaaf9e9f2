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

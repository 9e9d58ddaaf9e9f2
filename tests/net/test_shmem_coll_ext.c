/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NVSHMEM 3.4 names that docs/shmem.md once listed as not covered, with 2
 * to 4 PEs as processes on the host executor, over the software NIC's wire
 * and over the same-node path, on the world and on split teams:
 *  - nvshmemx_barrier_warpgroup: every thread of one warpgroup (4 warps) of
 *    a block calls, full and partial warpgroups, the first and a later one
 *    of the block: the group waits for all its threads, the puts made
 *    before the barrier are seen after it on every member;
 *  - nvshmemx_double2_maxloc_reduce_block: random (value, index) pairs with
 *    many ties and NaNs, against a reference computed here (largest value,
 *    lowest index), one pair and many (past a chunk of the scratch), in
 *    place, guard pairs around dest untouched;
 *  - nvshmem_TYPENAME_alltoalls: every element size, strides 1 and more,
 *    host-called and from a launch, every element checked byte for byte and
 *    every byte around them (the gaps of the strides, guards) untouched;
 *  - bad arguments refused with -EINVAL and nothing written.
 */
#define KINET_NVSHMEM_HOST_EXECUTOR 1
#include "test_shmem_common.h"
#include <math.h>
#include <kinet/nvshmem/nvshmem.h>

TestSuite(shmem_coll_ext, .timeout = 600);

/* The teams of a scenario: the world, this PE's parity (two disjoint teams
 * at once), and the PEs but the first (INVALID on PE 0). */
struct teams {
	nvshmem_team_t t[3];
	nvshmem_team_t even, odd, tail;
};

static void teams_make(int me, int n, struct teams *ts)
{
	SK0(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, &ts->even));
	SK0(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 1, 2, n / 2, &ts->odd));
	SK0(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 1, 1, n - 1, &ts->tail));
	ts->t[0] = NVSHMEM_TEAM_WORLD;
	ts->t[1] = me % 2 ? ts->odd : ts->even;
	ts->t[2] = ts->tail;
}

static void teams_free(struct teams *ts)
{
	nvshmem_team_t t[3] = {ts->tail, ts->odd, ts->even};
	for (int i = 0; i < 3; i++)
		if (t[i] != NVSHMEM_TEAM_INVALID)
			SK0(kinet_shmem_team_destroy(t[i]));
}

static int member(nvshmem_team_t team, int i)
{
	int w = nvshmem_team_translate_pe(team, i, NVSHMEM_TEAM_WORLD);
	SK(w >= 0, "member %d of team %d", i, team);
	return w;
}

static uint64_t xs(uint64_t *st)
{
	*st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
	return *st;
}

/* ---- barrier_warpgroup ------------------------------------------------------------------ */

/* One launch: the threads of warpgroup wg of a block of nthr call the
 * barrier; before it, each of them counts itself in and its first thread
 * puts a token to every member of the team; after it, every thread checks
 * that the whole group had counted itself in and every member's token is
 * here. */
struct wg_arg {
	nvshmem_team_t team;
	int wg;           /* the warpgroup that calls */
	int size, my;     /* the team's */
	uint64_t *tokens; /* symmetric: [team size], the team's row */
	uint64_t token;   /* this round's */
	int arrived;      /* threads of the group counted in */
	int seen_short;   /* a thread saw fewer arrived after the barrier */
	int bad_rc, bad_token, grp_size, grp_rank_sum;
};

static void wg_kernel(void *p)
{
	struct wg_arg *a = p;
	const struct kinet_shmem_host_thread *me = kinet_shmem_host_self();
	int tid = (int)(me->thread_idx.x + me->block_dim.x * me->thread_idx.y);
	if (tid / 128 != a->wg)
		return;
	int gs = kinet_shmem_host_group_size(3);
	if (kinet_shmem_host_group_rank(3) == 0) {
		a->grp_size = gs;
		for (int i = 0; i < a->size; i++)
			nvshmem_uint64_p(a->tokens + a->my, a->token, member(a->team, i));
	}
	__atomic_add_fetch(&a->grp_rank_sum, kinet_shmem_host_group_rank(3), __ATOMIC_RELAXED);
	/* the last threads to come in are slowed down: the others must wait */
	if (tid % 128 >= gs - 3)
		sh_sleep_us(20000);
	__atomic_add_fetch(&a->arrived, 1, __ATOMIC_ACQ_REL);
	int rc = nvshmemx_barrier_warpgroup(a->team);
	if (rc)
		__atomic_store_n(&a->bad_rc, kn_shmem_error() ? kn_shmem_error() : -1,
				 __ATOMIC_RELAXED);
	if (__atomic_load_n(&a->arrived, __ATOMIC_ACQUIRE) != gs)
		__atomic_store_n(&a->seen_short, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < a->size; i++)
		if (__atomic_load_n(&a->tokens[i], __ATOMIC_ACQUIRE) != a->token)
			__atomic_store_n(&a->bad_token, 1, __ATOMIC_RELAXED);
}

static int wg_fn(int me, int n, void *arg)
{
	(void)arg;
	struct teams ts;
	teams_make(me, n, &ts);
	/* block sizes and the warpgroup that calls: the first of 128, the
	 * second of 256, a partial second one (72 threads) of 200, the third of
	 * 3 x 128 in two dimensions */
	static const unsigned bx[] = {128, 256, 200, 192};
	static const unsigned by[] = {1, 1, 1, 2};
	static const int wgs[] = {0, 1, 1, 2};
	/* a row of tokens per team: a member of two teams takes them in turn */
	uint64_t *tokens = nvshmem_calloc(3 * SH_MAXPE, sizeof(uint64_t));
	SK(tokens, "calloc");
	int round = 0;
	for (int ti = 0; ti < 3; ti++) {
		nvshmem_team_t team = ts.t[ti];
		if (team == NVSHMEM_TEAM_INVALID)
			continue;
		for (int c = 0; c < 4; c++) {
			round++;
			struct wg_arg a = {.team = team, .wg = wgs[c],
					   .size = nvshmem_team_n_pes(team),
					   .my = nvshmem_team_my_pe(team),
					   .tokens = tokens + ti * SH_MAXPE,
					   .token = ((uint64_t)round << 32) | (uint64_t)(ti * 4 + c + 1)};
			struct kinet_shmem_dim3 g = {1, 1, 1}, b = {bx[c], by[c], 1};
			SK0(kinet_shmem_host_launch(wg_kernel, &a, g, b));
			unsigned nthr = bx[c] * by[c], want = nthr - (unsigned)wgs[c] * 128u;
			if (want > 128)
				want = 128;
			SK(a.grp_size == (int)want, "block %u: warpgroup %d has %d threads, not %u",
			   nthr, wgs[c], a.grp_size, want);
			SK(a.arrived == (int)want, "arrived %d", a.arrived);
			SK(a.grp_rank_sum == (int)(want * (want - 1) / 2), "ranks: sum %d",
			   a.grp_rank_sum);
			SK(!a.bad_rc, "team %d, block %u: the barrier failed: %s", team, nthr,
			   kinet_strerror(a.bad_rc));
			SK(!a.seen_short, "block %u, warpgroup %d: a thread left the barrier before "
					  "every thread of its group came",
			   nthr, wgs[c]);
			SK(!a.bad_token, "team %d, block %u: a member's put before the barrier missing "
					 "after it",
			   team, nthr);
			/* no member puts the next round's token before every one checked this */
			SK0(nvshmem_barrier(team));
		}
	}
	SK0(kinet_shmem_error(0));
	nvshmem_free(tokens);
	teams_free(&ts);
	return 0;
}

Test(shmem_coll_ext, barrier_warpgroup_2_pes)
{
	sh_both(2, wg_fn, NULL);
}

Test(shmem_coll_ext, barrier_warpgroup_3_pes)
{
	sh_both(3, wg_fn, NULL);
}

/* ---- maxloc ------------------------------------------------------------------------------- */

#define ML_GUARD 2 /* pairs of guard before and after dest */

/* Member w's pairs: values from a few integers (ties everywhere), some NaN,
 * indices random below 1000 (ties of index too). */
static void ml_gen(double2 *v, size_t n, int w, size_t count, int round)
{
	uint64_t st = sh_seed(w, 70 + round, (int)count) | 1;
	for (size_t i = 0; i < n; i++) {
		uint64_t r = xs(&st);
		v[i].x = (r % 17) == 0 ? NAN : (double)(int)(r % 5) - 2.0;
		v[i].y = (double)(xs(&st) % 1000);
	}
}

/* The reference: the largest value, ties to the lowest index, NaN losing
 * to any number. */
static void ml_ref(double2 *acc, const double2 *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double u = acc[i].x, v = x[i].x;
		if (isnan(v))
			continue;
		if (isnan(u) || v > u || (v == u && x[i].y < acc[i].y))
			acc[i] = x[i];
	}
}

struct ml_arg {
	nvshmem_team_t team;
	double2 *dest;
	const double2 *src;
	size_t n;
	int rc;
	int differs;
};

static void ml_kernel(void *p)
{
	struct ml_arg *a = p;
	int rc = nvshmemx_double2_maxloc_reduce_block(a->team, a->dest, a->src, a->n);
	if (kinet_shmem_host_self()->thread_idx.x == 0)
		a->rc = rc;
	kinet_shmem_host_group_sync(2);
	if (rc != a->rc)
		__atomic_store_n(&a->differs, 1, __ATOMIC_RELAXED);
}

static int ml_fn(int me, int n, void *arg)
{
	(void)arg;
	struct teams ts;
	teams_make(me, n, &ts);
	static const size_t counts[] = {1, 3, 5003};
	const size_t cap = 5003 + 2 * ML_GUARD;
	double2 *src = nvshmem_malloc(cap * sizeof(double2));
	double2 *dst = nvshmem_malloc(cap * sizeof(double2));
	double2 *want = malloc(cap * sizeof(double2)), *x = malloc(cap * sizeof(double2));
	double2 *mine = malloc(cap * sizeof(double2));
	SK(src && dst && want && x && mine, "malloc");
	SK(((uintptr_t)src & 15) == 0, "double2 is aligned to 16");
	int round = 0;
	for (int ti = 0; ti < 3; ti++) {
		nvshmem_team_t team = ts.t[ti];
		if (team == NVSHMEM_TEAM_INVALID)
			continue;
		int size = nvshmem_team_n_pes(team);
		for (int ci = 0; ci < 3; ci++) {
			for (int inplace = 0; inplace < 2; inplace++) {
				size_t cnt = counts[ci];
				round++;
				ml_gen(src + ML_GUARD, cnt, me, cnt, round);
				memcpy(mine, src + ML_GUARD, cnt * sizeof(double2));
				/* the guards: around dest, and around src when in place */
				double2 *d = inplace ? src : dst;
				memset(d, 0x5a, ML_GUARD * sizeof(double2));
				memset(d + ML_GUARD + cnt, 0x5a, ML_GUARD * sizeof(double2));
				if (!inplace)
					memset(dst + ML_GUARD, 0xa5, cnt * sizeof(double2));
				for (int i = 0; i < size; i++) {
					ml_gen(x, cnt, member(team, i), cnt, round);
					if (i == 0)
						memcpy(want, x, cnt * sizeof(double2));
					else
						ml_ref(want, x, cnt);
				}
				struct ml_arg a = {.team = team, .dest = d + ML_GUARD,
						   .src = src + ML_GUARD, .n = cnt};
				struct kinet_shmem_dim3 g = {1, 1, 1}, b = {64, 1, 1};
				SK0(kinet_shmem_host_launch(ml_kernel, &a, g, b));
				SK(a.rc == 0 && !a.differs, "maxloc of %zu on team %d: %d (%s)%s",
				   cnt, team, a.rc, kinet_strerror(a.rc),
				   a.differs ? ", threads differ" : "");
				for (size_t i = 0; i < cnt; i++) {
					const double2 *g2 = d + ML_GUARD + i;
					SK(memcmp(g2, want + i, sizeof(double2)) == 0,
					   "team %d of %d, %zu pairs%s: pair %zu is (%g, %g), not "
					   "(%g, %g)",
					   team, size, cnt, inplace ? " in place" : "", i, g2->x,
					   g2->y, want[i].x, want[i].y);
				}
				const uint8_t *gb = (const uint8_t *)d, *ga = (const uint8_t *)(d + ML_GUARD + cnt);
				for (size_t k = 0; k < ML_GUARD * sizeof(double2); k++)
					SK(gb[k] == 0x5a && ga[k] == 0x5a,
					   "a guard byte around dest was written (%zu)", k);
				if (!inplace)
					SK(!memcmp(src + ML_GUARD, mine, cnt * sizeof(double2)),
					   "the source was changed");
			}
		}
	}
	/* ties across every member: the same value everywhere, the index of
	 * world PE w being 100 - w on a few pairs: the last member's wins;
	 * on the others the index is the same and the value decides */
	for (int i = 0; i < 8; i++) {
		src[i].x = i < 4 ? 1.5 : (double)me;
		src[i].y = i < 4 ? 100.0 - me : 7.0;
	}
	struct ml_arg a = {.team = NVSHMEM_TEAM_WORLD, .dest = dst, .src = src, .n = 8};
	struct kinet_shmem_dim3 g = {1, 1, 1}, b = {32, 1, 1};
	SK0(kinet_shmem_host_launch(ml_kernel, &a, g, b));
	SK0(a.rc);
	for (int i = 0; i < 8; i++) {
		double wx = i < 4 ? 1.5 : (double)(n - 1), wy = i < 4 ? 100.0 - (n - 1) : 7.0;
		SK(dst[i].x == wx && dst[i].y == wy, "tie pair %d: (%g, %g), not (%g, %g)", i,
		   dst[i].x, dst[i].y, wx, wy);
	}
	SK0(kinet_shmem_error(0));
	free(want);
	free(x);
	free(mine);
	nvshmem_free(dst);
	nvshmem_free(src);
	teams_free(&ts);
	return 0;
}

Test(shmem_coll_ext, double2_maxloc_reduce_block_2_pes)
{
	sh_both(2, ml_fn, NULL);
}

Test(shmem_coll_ext, double2_maxloc_reduce_block_4_pes)
{
	sh_both(4, ml_fn, NULL);
}

/* ---- alltoalls ---------------------------------------------------------------------------- */

/* The call of one element size in one form (0: host-called, 1: from a
 * launch of one thread), through NVSHMEM's typed names. */
struct as_arg {
	int es, form;
	nvshmem_team_t team;
	void *d;
	const void *s;
	ptrdiff_t dst, sst;
	size_t n;
	int rc;
};

static int as_call(struct as_arg *a)
{
	switch (a->es) {
	case 1:
		return nvshmem_uint8_alltoalls(a->team, a->d, a->s, a->dst, a->sst, a->n);
	case 2:
		return nvshmem_half_alltoalls(a->team, a->d, a->s, a->dst, a->sst, a->n);
	case 4:
		return nvshmem_float_alltoalls(a->team, a->d, a->s, a->dst, a->sst, a->n);
	default:
		return nvshmem_longlong_alltoalls(a->team, a->d, a->s, a->dst, a->sst, a->n);
	}
}

static void as_kernel(void *p)
{
	struct as_arg *a = p;
	a->rc = as_call(a);
}

static int as_run(struct as_arg *a)
{
	if (a->form == 0)
		return as_call(a);
	struct kinet_shmem_dim3 one = {1, 1, 1};
	a->rc = -12345;
	SK0(kinet_shmem_host_launch(as_kernel, a, one, one));
	return a->rc;
}

#define AS_CAP (1u << 20)

static int as_fn(int me, int n, void *arg)
{
	(void)arg;
	struct teams ts;
	teams_make(me, n, &ts);
	uint8_t *src = nvshmem_malloc(AS_CAP), *dst = nvshmem_malloc(AS_CAP);
	uint8_t *x = malloc(AS_CAP);
	SK(src && dst && x, "malloc");
	static const int ess[] = {1, 2, 4, 8};
	static const ptrdiff_t strides[][2] = {{1, 1}, {2, 3}, {3, 1}, {1, 4}};
	static const size_t counts[] = {0, 1, 5, 301};
	int round = 0;
	for (int ti = 0; ti < 3; ti++) {
		nvshmem_team_t team = ts.t[ti];
		if (team == NVSHMEM_TEAM_INVALID)
			continue;
		size_t size = (size_t)nvshmem_team_n_pes(team), my = (size_t)nvshmem_team_my_pe(team);
		for (int ei = 0; ei < 4; ei++) {
			for (int si = 0; si < 4; si++) {
				for (int ci = 0; ci < 4; ci++) {
					round++;
					size_t es = (size_t)ess[ei], cnt = counts[ci];
					ptrdiff_t dstr = strides[si][0], sstr = strides[si][1];
					size_t slen = (size * cnt * (size_t)sstr + 8) * es;
					size_t dlen = (size * cnt * (size_t)dstr + 8) * es;
					SK(slen <= AS_CAP && dlen + 64 <= AS_CAP, "sizes");
					tu_fill_random(src, slen, sh_seed(me, 90, round));
					memset(dst, 0xa5, dlen + 64);
					struct as_arg a = {.es = (int)es, .form = round % 2,
							   .team = team, .d = dst + 32, .s = src,
							   .dst = dstr, .sst = sstr, .n = cnt};
					int rc = as_run(&a);
					SK(rc == 0, "alltoalls of %zu x %zu bytes, strides %td %td, on "
						    "team %d: %d (%s)",
					   cnt, es, dstr, sstr, team, rc, kinet_strerror(rc));
					/* what each member i sent here: its block my */
					uint8_t *want = x;
					memset(want, 0xa5, dlen + 64);
					for (size_t i = 0; i < size; i++) {
						tu_fill_random(x + AS_CAP / 2, slen,
							       sh_seed(member(team, (int)i), 90, round));
						for (size_t k = 0; k < cnt; k++)
							memcpy(want + 32 +
								       (i * cnt + k) * (size_t)dstr * es,
							       x + AS_CAP / 2 +
								       (my * cnt + k) * (size_t)sstr * es,
							       es);
					}
					for (size_t b = 0; b < dlen + 64; b++)
						SK(dst[b] == want[b],
						   "alltoalls of %zu x %zu bytes, strides %td %td, team "
						   "%d of %zu (%s): byte %zd of dest is %#x, not %#x",
						   cnt, es, dstr, sstr, team, size,
						   a.form ? "launch" : "host", (ptrdiff_t)b - 32,
						   dst[b], want[b]);
					/* nobody starts the next round before every check */
					nvshmem_team_sync(team);
				}
			}
		}
	}
	SK0(kinet_shmem_error(0));
	free(x);
	nvshmem_free(dst);
	nvshmem_free(src);
	teams_free(&ts);
	return 0;
}

Test(shmem_coll_ext, alltoalls_2_pes)
{
	sh_both(2, as_fn, NULL);
}

Test(shmem_coll_ext, alltoalls_3_pes)
{
	sh_both(3, as_fn, NULL);
}

/* ---- bad arguments ------------------------------------------------------------------------ */

/* Each is refused on the calling PE before anything moves: -EINVAL, the
 * PE's error kept, dest untouched; the world works afterwards. */
static int bad_fn(int me, int n, void *arg)
{
	(void)arg;
	int *a = nvshmem_malloc(64 * sizeof(int) * (size_t)n);
	int *b = nvshmem_malloc(64 * sizeof(int) * (size_t)n);
	int priv[64];
	SK(a && b, "malloc");
	memset(b, 0x77, 64 * sizeof(int) * (size_t)n);
	nvshmem_barrier_all();
	nvshmem_team_t W = NVSHMEM_TEAM_WORLD;
	SK(nvshmem_int_alltoalls(W, b, a, 0, 1, 2) == -EINVAL, "dest stride 0");
	SK(nvshmem_int_alltoalls(W, b, a, 1, -1, 2) == -EINVAL, "source stride -1");
	SK(nvshmem_int_alltoalls(W, a + 1, a, 1, 1, 2) == -EINVAL, "overlap");
	SK(nvshmem_int_alltoalls(W, priv, a, 1, 1, 2) == -EINVAL, "private dest");
	SK(nvshmem_int_alltoalls(W, b, priv, 1, 1, 2) == -EINVAL, "private source");
	SK(nvshmem_int_alltoalls(W, b, a, 1, 1, (size_t)-1 / 2) == -EINVAL, "overflow");
	SK(nvshmem_int_alltoalls(W, b, a, (ptrdiff_t)1 << 60, 1, 2) == -EINVAL,
	   "a stride past the heap");
	SK(nvshmem_int_alltoalls(NVSHMEM_TEAM_INVALID, b, a, 1, 1, 2) == -EINVAL, "team");
	SK(kinet_shmem_alltoalls(W, b, a, 1, 1, 2, 3) == -EINVAL, "element size 3");
	SK(kinet_shmem_coll(KN_COLL_REDUCE, W, b, a, 2, 0, KN_RED_MAXLOC, KN_DT_DOUBLE) == -EINVAL,
	   "maxloc of doubles");
	SK(kinet_shmem_coll(KN_COLL_REDUCE, W, b, a, 2, 0, KN_RED_MAX, KN_DT_DOUBLE2) == -EINVAL,
	   "max of double2");
	SK(kinet_shmem_coll(KN_COLL_REDUCE, W, b, a, 2, 0, 8, KN_DT_DOUBLE2) == -EINVAL,
	   "an unknown operator");
	SK(kinet_shmem_error(1) == -EINVAL, "the PE's error kept");
	for (size_t i = 0; i < 64 * (size_t)n * sizeof(int); i++)
		SK(((uint8_t *)b)[i] == 0x77, "a refused call wrote byte %zu", i);
	/* all is well afterwards */
	for (int i = 0; i < 2 * n; i++)
		a[i] = me * 1000 + i;
	SK0(nvshmem_int_alltoalls(W, b, a, 1, 1, 2));
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 2; k++)
			SK(b[i * 2 + k] == i * 1000 + me * 2 + k, "b[%d] = %d", i * 2 + k,
			   b[i * 2 + k]);
	nvshmem_barrier_all();
	nvshmem_free(b);
	nvshmem_free(a);
	return 0;
}

Test(shmem_coll_ext, bad_arguments_refused)
{
	sh_both(3, bad_fn, NULL);
}

/* ---- team_split_2d and team_get_config ------------------------------------------------------- */

/* Checks that team holds exactly the world PEs want[0..n) in order, works
 * (a sum over it of every member's world PE) and keeps config c (or the
 * version 1 default when c is NULL). */
static void team_is(nvshmem_team_t team, const int *want, int n, const nvshmem_team_config_t *c,
		    int *scratch, const char *what)
{
	SK(team != NVSHMEM_TEAM_INVALID, "%s: no team", what);
	SK(nvshmem_team_n_pes(team) == n, "%s: %d PEs, not %d", what, nvshmem_team_n_pes(team), n);
	int me = nvshmem_my_pe(), my = -1, sum = 0;
	for (int i = 0; i < n; i++) {
		SK(member(team, i) == want[i], "%s: member %d is PE %d, not %d", what, i,
		   member(team, i), want[i]);
		if (want[i] == me)
			my = i;
		sum += want[i];
	}
	SK(my >= 0 && nvshmem_team_my_pe(team) == my, "%s: this PE is %d, not %d", what,
	   nvshmem_team_my_pe(team), my);
	scratch[0] = me;
	SK0(nvshmem_int_sum_reduce(team, scratch + 1, scratch, 1));
	SK(scratch[1] == sum, "%s: the sum over the team is %d, not %d", what, scratch[1], sum);
	nvshmem_team_config_t got;
	memset(&got, 0x3c, sizeof(got));
	nvshmem_team_get_config(team, &got);
	if (c) {
		SK(!memcmp(&got, c, sizeof(got)), "%s: the config kept differs", what);
	} else {
		SK(got.version == (1 << 16) + 64 && got.num_contexts == -1,
		   "%s: the default config is version %#x, %d contexts", what, got.version,
		   got.num_contexts);
	}
}

static int split2d_fn(int me, int n, void *arg)
{
	(void)arg;
	int *scratch = nvshmem_calloc(2, sizeof(int));
	SK(scratch, "calloc");
	SK(sizeof(nvshmem_team_config_t) == 64, "the config is NVSHMEM's 64 bytes");
	/* the predefined teams: NVSHMEM's initializer */
	nvshmem_team_config_t c0 = NVSHMEM_TEAM_CONFIG_INITIALIZER, got;
	memset(&got, 0, sizeof(got));
	nvshmem_team_get_config(NVSHMEM_TEAM_WORLD, &got);
	SK(!memcmp(&got, &c0, sizeof(got)) && got.version == (2 << 16) + 64 &&
		   got.num_contexts == -1 && got.uniqueid == NVSHMEM_TEAM_UNIQUID_INITIALIZER,
	   "the world's config");
	/* NVSHMEM_TEAM_INVALID: config untouched */
	memset(&got, 0x5a, sizeof(got));
	nvshmem_team_get_config(NVSHMEM_TEAM_INVALID, &got);
	for (size_t i = 0; i < sizeof(got); i++)
		SK(((uint8_t *)&got)[i] == 0x5a, "get_config of no team wrote byte %zu", i);

	/* parents: the world, and the PEs but the first (PE 0 outside) */
	nvshmem_team_t tail;
	SK0(nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 1, 1, n - 1, NULL, 0, &tail));
	for (int pi = 0; pi < 2; pi++) {
		nvshmem_team_t parent = pi ? tail : NVSHMEM_TEAM_WORLD;
		int psize = pi ? n - 1 : n, first = pi ? 1 : 0; /* parent's PE k is world k+first */
		for (int xr = 1; xr <= psize + 1; xr++) {
			nvshmem_team_config_t cx = NVSHMEM_TEAM_CONFIG_INITIALIZER;
			cx.num_contexts = 10 + xr;
			cx.uniqueid = 0x1234500000ull + (uint64_t)xr;
			nvshmem_team_t xt = 77, yt = 78;
			int rc = nvshmem_team_split_2d(parent, xr, &cx,
						       NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS, &xt,
						       NULL, 0, &yt);
			SK(rc == 0, "split_2d of %d PEs by %d: %d", psize, xr, rc);
			if (me < first) {
				SK(xt == NVSHMEM_TEAM_INVALID && yt == NVSHMEM_TEAM_INVALID,
				   "a PE outside the parent got teams");
				continue;
			}
			int k = me - first, x = xr > psize ? psize : xr;
			int row = k / x, col = k % x, want[SH_MAXPE], m = 0;
			char what[64];
			for (int j = row * x; j < psize && j < row * x + x; j++)
				want[m++] = j + first;
			snprintf(what, sizeof(what), "row of %d by %d", psize, xr);
			team_is(xt, want, m, &cx, scratch, what);
			m = 0;
			for (int j = col; j < psize; j += x)
				want[m++] = j + first;
			snprintf(what, sizeof(what), "column of %d by %d", psize, xr);
			team_is(yt, want, m, NULL, scratch, what);
			SK0(kinet_shmem_team_destroy(xt));
			SK0(kinet_shmem_team_destroy(yt));
		}
	}
	/* refused on every PE: xrange 0, PEs that disagree; handles INVALID */
	nvshmem_team_t xt = 5, yt = 5;
	SK(kinet_shmem_team_split_2d(NVSHMEM_TEAM_WORLD, 0, &xt, &yt) == -EINVAL &&
		   xt == NVSHMEM_TEAM_INVALID && yt == NVSHMEM_TEAM_INVALID,
	   "xrange 0");
	SK(kinet_shmem_team_split_2d(NVSHMEM_TEAM_WORLD, 1 + (me == 1), &xt, &yt) == -EINVAL,
	   "xranges that differ");
	SK(kinet_shmem_team_set_config(NVSHMEM_TEAM_WORLD, &c0, 65) == -EINVAL, "65 bytes");
	SK(kinet_shmem_team_get_config(31, &got, sizeof(got)) == -EINVAL, "not a team");

	/* no slot left midway: the teams made are destroyed, nothing leaks */
	nvshmem_team_t fill[KN_SHMEM_MAX_TEAMS];
	int nf = 0;
	for (; nf < KN_SHMEM_MAX_TEAMS - 3 - 1 - 3; nf++) /* 3 predefined, tail, 3 left */
		SK0(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, n, &fill[nf]));
	SK(kinet_shmem_team_split_2d(NVSHMEM_TEAM_WORLD, 1, &xt, &yt) == -ENOSPC &&
		   xt == NVSHMEM_TEAM_INVALID && yt == NVSHMEM_TEAM_INVALID,
	   "%d rows and a column in 3 slots", n);
	for (int i = 0; i < 3; i++) /* the 3 slots are free again */
		SK0(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, n, &fill[nf++]));
	SK(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, n, &xt) == -ENOSPC, "full");
	for (int i = 0; i < nf; i++)
		SK0(kinet_shmem_team_destroy(fill[i]));
	(void)kinet_shmem_error(1);
	if (tail != NVSHMEM_TEAM_INVALID)
		SK0(kinet_shmem_team_destroy(tail));
	nvshmem_barrier_all();
	nvshmem_free(scratch);
	return 0;
}

Test(shmem_coll_ext, team_split_2d_and_get_config_3_pes)
{
	sh_both(3, split2d_fn, NULL);
}

Test(shmem_coll_ext, team_split_2d_and_get_config_4_pes)
{
	sh_both(4, split2d_fn, NULL);
}

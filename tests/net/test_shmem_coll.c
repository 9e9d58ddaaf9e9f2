/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NVSHMEM's collectives on kinet-shmem (kinet/nvshmem/nvshmem.h), with 2 to
 * 4 PEs as processes on the host executor, over the software NIC's wire and
 * over the same-node path: reduce and reducescatter for every operator and
 * every type NVSHMEM has (half and bfloat16 bit for bit against the
 * conversions of kinet_cuda_host.h), broadcast, fcollect and
 * alltoall for every standard RMA type (half and bfloat16 included) and
 * their mem forms; sizes 0, 1, odd and larger than a
 * chunk of the scratch; in place; the world, the shared team and split
 * teams (two disjoint ones at once); the thread, warp, block, host-called
 * and on-stream forms. Inputs are random; every result is checked against a
 * reference the test computes itself from every member's input (floats
 * within rounding). Bad arguments come back as errors.
 */
#define KINET_NVSHMEM_HOST_EXECUTOR 1
#include "test_shmem_common.h"
#include <math.h>
#include <kinet/nvshmem/nvshmem.h>

TestSuite(shmem_coll, .timeout = 600);

/* How a collective is called. */
enum form {
	F_HOST = 0,   /* nvshmem_X on the PE's own thread (host-called) */
	F_STREAM = 1, /* nvshmemx_X_on_stream on the PE's own thread */
	F_THREAD = 2, /* nvshmem_X in a launch of one thread */
	F_WARP = 3,   /* nvshmemx_X_warp, every thread of a warp of 32 */
	F_BLOCK = 4,  /* nvshmemx_X_block, every thread of a block of 48 */
	F_COUNT = 5,
};
static const char *const form_name[F_COUNT] = {"host", "on_stream", "thread", "warp", "block"};

/* ---- the reductions: one entry per (type, operator) ------------------------------------ */

struct red_entry {
	const char *name; /* TYPENAME_OP */
	size_t esz;
	int flt;
	/* the call: form, reducescatter or reduce */
	int (*call)(int form, int rs, nvshmem_team_t team, void *d, const void *s, size_t n);
	void (*ref)(void *acc, const void *x, size_t n); /* acc op= x */
	void (*gen)(void *buf, size_t n, uint64_t seed);
	int (*same)(const void *got, const void *want, size_t n, size_t *at);
};

/* Integer reference: sums and products wrap (as two's complement). */
#define REF_I(T, OP)                                                                       \
	do {                                                                               \
		T *a = acc;                                                                \
		const T *b = x;                                                            \
		for (size_t i = 0; i < n; i++)                                             \
			a[i] = REF_I_##OP(T, a[i], b[i]);                                  \
	} while (0)
#define REF_I_and(T, a, b) (T)((a) & (b))
#define REF_I_or(T, a, b) (T)((a) | (b))
#define REF_I_xor(T, a, b) (T)((a) ^ (b))
#define REF_I_min(T, a, b) ((b) < (a) ? (b) : (a))
#define REF_I_max(T, a, b) ((b) > (a) ? (b) : (a))
#define REF_I_sum(T, a, b) (T)((unsigned long long)(a) + (unsigned long long)(b))
#define REF_I_prod(T, a, b) (T)((unsigned long long)(a) * (unsigned long long)(b))
#define REF_F(T, OP)                                                                       \
	do {                                                                               \
		T *a = acc;                                                                \
		const T *b = x;                                                            \
		for (size_t i = 0; i < n; i++)                                             \
			a[i] = REF_F_##OP(a[i], b[i]);                                     \
	} while (0)
#define REF_F_min(a, b) ((b) < (a) ? (b) : (a))
#define REF_F_max(a, b) ((b) > (a) ? (b) : (a))
#define REF_F_sum(a, b) ((a) + (b))
#define REF_F_prod(a, b) ((a) * (b))

/* Random inputs: integers any bits; floats in [-8, 8) for sums, [0.5, 1.5)
 * for products (no overflow), any of them for min and max. */
#define GEN_I(T, OP)                                                                       \
	do {                                                                               \
		tu_fill_random(buf, n * sizeof(T), seed);                                  \
	} while (0)
#define GEN_F(T, OP)                                                                       \
	do {                                                                               \
		T *v = buf;                                                                \
		uint64_t st = seed | 1;                                                    \
		for (size_t i = 0; i < n; i++) {                                           \
			st ^= st << 13, st ^= st >> 7, st ^= st << 17;                     \
			double u = (double)(st >> 11) / 9007199254740992.0;                \
			v[i] = (T)(strcmp(#OP, "prod") ? u * 16.0 - 8.0 : 0.5 + u);        \
		}                                                                          \
	} while (0)

/* half and bfloat16 (kinet_cuda_host.h's types and conversions): each step
 * combined in float and rounded back, as NVSHMEM's; compared bit for bit. */
#define REF_16(T, OP, TOF, FROMF)                                                          \
	do {                                                                               \
		T *a = acc;                                                                \
		const T *b = x;                                                            \
		for (size_t i = 0; i < n; i++)                                             \
			a[i] = FROMF(REF_F_##OP(TOF(a[i]), TOF(b[i])));                    \
	} while (0)
#define REF_H(T, OP) REF_16(T, OP, __half2float, __float2half)
#define REF_B(T, OP) REF_16(T, OP, __bfloat162float, __float2bfloat16)
#define GEN_H(T, OP) GEN_F16(T, OP, __float2half)
#define GEN_B(T, OP) GEN_F16(T, OP, __float2bfloat16)
#define GEN_F16(T, OP, FROMF)                                                              \
	do {                                                                               \
		T *v = buf;                                                                \
		uint64_t st = seed | 1;                                                    \
		for (size_t i = 0; i < n; i++) {                                           \
			st ^= st << 13, st ^= st >> 7, st ^= st << 17;                     \
			double u = (double)(st >> 11) / 9007199254740992.0;                \
			v[i] = FROMF((float)(strcmp(#OP, "prod") ? u * 16.0 - 8.0          \
								 : 0.5 + u));              \
		}                                                                          \
	} while (0)
#define SAME_H(T) SAME_16(T)
#define SAME_B(T) SAME_16(T)
#define SAME_16(T)                                                                         \
	do {                                                                               \
		const T *g = got, *w = want;                                               \
		for (size_t i = 0; i < n; i++)                                             \
			if (g[i].__x != w[i].__x) {                                        \
				*at = i;                                                   \
				return 0;                                                  \
			}                                                                  \
		return 1;                                                                  \
	} while (0)

#define SAME_I(T)                                                                          \
	do {                                                                               \
		const T *g = got, *w = want;                                               \
		for (size_t i = 0; i < n; i++)                                             \
			if (g[i] != w[i]) {                                                \
				*at = i;                                                   \
				return 0;                                                  \
			}                                                                  \
		return 1;                                                                  \
	} while (0)
#define SAME_F(T)                                                                          \
	do {                                                                               \
		const T *g = got, *w = want;                                               \
		double tol = sizeof(T) == 4 ? 1e-5 : 1e-12;                                \
		for (size_t i = 0; i < n; i++)                                             \
			if (!(fabs((double)g[i] - (double)w[i]) <=                         \
			      tol * (1.0 + fabs((double)w[i])))) {                         \
				*at = i;                                                   \
				return 0;                                                  \
			}                                                                  \
		return 1;                                                                  \
	} while (0)

#define RED_FNS(NAME, TYPE, OP, K)                                                         \
	static int call_##NAME##_##OP(int form, int rs, nvshmem_team_t team, void *d,      \
				      const void *s, size_t n)                             \
	{                                                                                  \
		switch (form * 2 + rs) {                                                   \
		case F_HOST * 2:                                                           \
		case F_THREAD * 2:                                                         \
			return nvshmem_##NAME##_##OP##_reduce(team, d, s, n);              \
		case F_HOST * 2 + 1:                                                       \
		case F_THREAD * 2 + 1:                                                     \
			return nvshmem_##NAME##_##OP##_reducescatter(team, d, s, n);       \
		case F_STREAM * 2:                                                         \
			return nvshmemx_##NAME##_##OP##_reduce_on_stream(team, d, s, n, 0);  \
		case F_STREAM * 2 + 1:                                                     \
			return nvshmemx_##NAME##_##OP##_reducescatter_on_stream(team, d, s, \
										n, 0);     \
		case F_WARP * 2:                                                           \
			return nvshmemx_##NAME##_##OP##_reduce_warp(team, d, s, n);        \
		case F_WARP * 2 + 1:                                                       \
			return nvshmemx_##NAME##_##OP##_reducescatter_warp(team, d, s, n); \
		case F_BLOCK * 2:                                                          \
			return nvshmemx_##NAME##_##OP##_reduce_block(team, d, s, n);       \
		default:                                                                   \
			return nvshmemx_##NAME##_##OP##_reducescatter_block(team, d, s, n); \
		}                                                                          \
	}                                                                                  \
	static void ref_##NAME##_##OP(void *acc, const void *x, size_t n)                  \
	{                                                                                  \
		REF_##K(TYPE, OP);                                                         \
	}                                                                                  \
	static void gen_##NAME##_##OP(void *buf, size_t n, uint64_t seed)                  \
	{                                                                                  \
		GEN_##K(TYPE, OP);                                                         \
	}                                                                                  \
	static int same_##NAME##_##OP(const void *got, const void *want, size_t n,         \
				      size_t *at)                                          \
	{                                                                                  \
		SAME_##K(TYPE);                                                            \
	}

/* NVSHMEM's lists (its documentation's reduction types), written out here
 * independently of the header's. */
#define BIT_TYPES(X, OP)                                                                   \
	X(uchar, unsigned char, OP, I)                                                     \
	X(ushort, unsigned short, OP, I)                                                   \
	X(uint, unsigned int, OP, I)                                                       \
	X(ulong, unsigned long, OP, I)                                                     \
	X(ulonglong, unsigned long long, OP, I)                                            \
	X(int8, int8_t, OP, I)                                                             \
	X(int16, int16_t, OP, I)                                                           \
	X(int32, int32_t, OP, I)                                                           \
	X(int64, int64_t, OP, I)                                                           \
	X(uint8, uint8_t, OP, I)                                                           \
	X(uint16, uint16_t, OP, I)                                                         \
	X(uint32, uint32_t, OP, I)                                                         \
	X(uint64, uint64_t, OP, I)                                                         \
	X(size, size_t, OP, I)
#define STD_TYPES(X, OP)                                                                   \
	BIT_TYPES(X, OP)                                                                   \
	X(char, char, OP, I)                                                               \
	X(schar, signed char, OP, I)                                                       \
	X(short, short, OP, I)                                                             \
	X(int, int, OP, I)                                                                 \
	X(long, long, OP, I)                                                               \
	X(longlong, long long, OP, I)                                                      \
	X(float, float, OP, F)                                                             \
	X(double, double, OP, F)                                                           \
	X(half, half, OP, H)                                                               \
	X(bfloat16, __nv_bfloat16, OP, B)
#define ALL_REDS(X)                                                                        \
	BIT_TYPES(X, and)                                                                  \
	BIT_TYPES(X, or)                                                                   \
	BIT_TYPES(X, xor)                                                                  \
	STD_TYPES(X, min)                                                                  \
	STD_TYPES(X, max)                                                                  \
	STD_TYPES(X, sum)                                                                  \
	STD_TYPES(X, prod)

ALL_REDS(RED_FNS)

#define RED_ENTRY(NAME, TYPE, OP, K)                                                       \
	{#NAME "_" #OP,       sizeof(TYPE),       #K[0] != 'I',       call_##NAME##_##OP,  \
	 ref_##NAME##_##OP,   gen_##NAME##_##OP,  same_##NAME##_##OP},
static const struct red_entry reds[] = {ALL_REDS(RED_ENTRY)};
#define NREDS ((int)(sizeof(reds) / sizeof(reds[0])))

/* ---- the moves: broadcast, fcollect, alltoall per RMA type, and the mem forms --------------- */

enum move { M_BCAST = 0, M_FCOLLECT = 1, M_ALLTOALL = 2 };

struct move_entry {
	const char *name;
	size_t esz;
	int (*call)(int form, int what, nvshmem_team_t team, void *d, const void *s, size_t n,
		    int root);
};

#define MOVE_CALL(PFX, XPFX, T, form, d, s, n, ...)                                        \
	switch (form) {                                                                    \
	case F_HOST:                                                                       \
	case F_THREAD:                                                                     \
		return PFX(team, (T *)d, (const T *)s, n __VA_ARGS__);                     \
	case F_STREAM:                                                                     \
		return XPFX##_on_stream(team, (T *)d, (const T *)s, n __VA_ARGS__, 0);     \
	case F_WARP:                                                                       \
		return XPFX##_warp(team, (T *)d, (const T *)s, n __VA_ARGS__);             \
	default:                                                                           \
		return XPFX##_block(team, (T *)d, (const T *)s, n __VA_ARGS__);            \
	}

#define MOVE_FNS(NAME, TYPE)                                                               \
	static int mcall_##NAME(int form, int what, nvshmem_team_t team, void *d,          \
				const void *s, size_t n, int root)                         \
	{                                                                                  \
		if (what == M_BCAST) {                                                     \
			MOVE_CALL(nvshmem_##NAME##_broadcast, nvshmemx_##NAME##_broadcast, \
				  TYPE, form, d, s, n, , root)                             \
		} else if (what == M_FCOLLECT) {                                           \
			MOVE_CALL(nvshmem_##NAME##_fcollect, nvshmemx_##NAME##_fcollect,   \
				  TYPE, form, d, s, n, )                                   \
		} else {                                                                   \
			MOVE_CALL(nvshmem_##NAME##_alltoall, nvshmemx_##NAME##_alltoall,   \
				  TYPE, form, d, s, n, )                                   \
		}                                                                          \
	}
#define RMA_TYPES(X)                                                                       \
	X(float, float)                                                                    \
	X(double, double)                                                                  \
	X(char, char)                                                                      \
	X(schar, signed char)                                                              \
	X(short, short)                                                                    \
	X(int, int)                                                                        \
	X(long, long)                                                                      \
	X(longlong, long long)                                                             \
	X(uchar, unsigned char)                                                            \
	X(ushort, unsigned short)                                                          \
	X(uint, unsigned int)                                                              \
	X(ulong, unsigned long)                                                            \
	X(ulonglong, unsigned long long)                                                   \
	X(int8, int8_t)                                                                    \
	X(int16, int16_t)                                                                  \
	X(int32, int32_t)                                                                  \
	X(int64, int64_t)                                                                  \
	X(uint8, uint8_t)                                                                  \
	X(uint16, uint16_t)                                                                \
	X(uint32, uint32_t)                                                                \
	X(uint64, uint64_t)                                                                \
	X(size, size_t)                                                                    \
	X(ptrdiff, ptrdiff_t)                                                              \
	X(half, half)                                                                      \
	X(bfloat16, __nv_bfloat16)
RMA_TYPES(MOVE_FNS)

static int mcall_mem(int form, int what, nvshmem_team_t team, void *d, const void *s, size_t n,
		     int root)
{
	if (what == M_BCAST) {
		MOVE_CALL(nvshmem_broadcastmem, nvshmemx_broadcastmem, void, form, d, s, n, , root)
	} else if (what == M_FCOLLECT) {
		MOVE_CALL(nvshmem_fcollectmem, nvshmemx_fcollectmem, void, form, d, s, n, )
	} else {
		MOVE_CALL(nvshmem_alltoallmem, nvshmemx_alltoallmem, void, form, d, s, n, )
	}
}

#define MOVE_ENTRY(NAME, TYPE) {#NAME, sizeof(TYPE), mcall_##NAME},
static const struct move_entry moves[] = {RMA_TYPES(MOVE_ENTRY){"mem", 1, mcall_mem}};
#define NMOVES ((int)(sizeof(moves) / sizeof(moves[0])))

/* ---- running a call in a form -------------------------------------------------------------- */

struct call_arg {
	int form;
	int (*fn)(struct call_arg *a);
	/* what fn needs */
	const struct red_entry *re;
	const struct move_entry *me;
	int rs, what, root;
	nvshmem_team_t team;
	void *d;
	const void *s;
	size_t n;
	int rc;      /* the first thread's result */
	int differs; /* a thread of the group got another result */
};

static int red_call(struct call_arg *a)
{
	return a->re->call(a->form, a->rs, a->team, a->d, a->s, a->n);
}

static int move_call(struct call_arg *a)
{
	return a->me->call(a->form, a->what, a->team, a->d, a->s, a->n, a->root);
}

static void call_kernel(void *p)
{
	struct call_arg *a = p;
	int rc = a->fn(a);
	if (kinet_shmem_host_self()->thread_idx.x == 0)
		a->rc = rc;
	kinet_shmem_host_group_sync(2);
	if (rc != a->rc)
		__atomic_store_n(&a->differs, 1, __ATOMIC_RELAXED);
}

/* Makes the call in a's form; returns its result. */
static int run_form(struct call_arg *a)
{
	static const unsigned threads[F_COUNT] = {0, 0, 1, 32, 48};
	if (a->form == F_HOST || a->form == F_STREAM) {
		SK(!kinet_shmem_host_self()->in_launch, "the PE's own thread");
		return a->fn(a);
	}
	struct kinet_shmem_dim3 grid = {1, 1, 1}, block = {threads[a->form], 1, 1};
	a->rc = 0;
	a->differs = 0;
	SK0(kinet_shmem_host_launch(call_kernel, a, grid, block));
	SK(!a->differs, "the threads of the %s form got different results", form_name[a->form]);
	return a->rc;
}

/* ---- teams ------------------------------------------------------------------------------- */

/* The teams a scenario runs on: the world, the shared team, the PEs of
 * this PE's parity (two disjoint teams running at once), and the PEs but
 * the first (team index and world PE differ). */
struct teams {
	nvshmem_team_t t[4];
	int n_t;
	nvshmem_team_t even, odd, tail;
};

static void teams_make(int me, int n, struct teams *ts)
{
	SK0(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, &ts->even));
	SK0(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 1, 2, n / 2, &ts->odd));
	SK0(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 1, 1, n - 1, &ts->tail));
	ts->n_t = 0;
	ts->t[ts->n_t++] = NVSHMEM_TEAM_WORLD;
	ts->t[ts->n_t++] = NVSHMEM_TEAM_SHARED;
	ts->t[ts->n_t++] = me % 2 ? ts->odd : ts->even;
	ts->t[ts->n_t++] = ts->tail; /* INVALID on PE 0: it skips it */
}

/* Destroy is local to the members. */
static void teams_free(struct teams *ts)
{
	nvshmem_team_t t[3] = {ts->tail, ts->odd, ts->even};
	for (int i = 0; i < 3; i++)
		if (t[i] != NVSHMEM_TEAM_INVALID)
			SK0(kinet_shmem_team_destroy(t[i]));
}

/* The world PE of member i of team. */
static int member(nvshmem_team_t team, int i)
{
	int w = nvshmem_team_translate_pe(team, i, NVSHMEM_TEAM_WORLD);
	SK(w >= 0, "member %d of team %d", i, team);
	return w;
}

/* ---- reductions ------------------------------------------------------------------------------- */

/* Element counts: 0, 1, odd, and beyond one chunk of the scratch (32 KiB
 * per team shared by the members) for a few entries. */
static const size_t red_counts[] = {0, 1, 7, 1001};
#define NRED_COUNTS ((int)(sizeof(red_counts) / sizeof(red_counts[0])))
#define RED_BIG 20011

static uint64_t red_seed(int wpe, int entry, size_t count, int rs)
{
	return sh_seed(wpe, 40 + rs, entry * 100003 + (int)count);
}

/* One reduce or reducescatter of entry e, count elements (per member for
 * reducescatter), on team, in form; in place when inplace. The inputs of
 * every member are made from its world PE, so each PE computes the
 * reference on its own. buf: a symmetric scratch of the test. */
static void red_one(int ei, size_t count, nvshmem_team_t team, int form, int rs, int inplace,
		    uint8_t *src, uint8_t *dst)
{
	const struct red_entry *e = &reds[ei];
	int size = nvshmem_team_n_pes(team), my = nvshmem_team_my_pe(team);
	size_t blk = count * e->esz, slen = rs ? blk * (size_t)size : blk;
	e->gen(src, slen / e->esz, red_seed(nvshmem_my_pe(), ei, count, rs));
	uint8_t *mine = malloc(slen + 1), *want = malloc(blk + 1), *x = malloc(slen + 1);
	SK(mine && want && x, "malloc");
	memcpy(mine, src, slen);
	memset(dst, 0xa5, blk);
	/* the reference, in member order, from every member's input */
	for (int i = 0; i < size; i++) {
		e->gen(x, slen / e->esz, red_seed(member(team, i), ei, count, rs));
		const uint8_t *part = x + (rs ? (size_t)my * blk : 0);
		if (i == 0)
			memcpy(want, part, blk);
		else
			e->ref(want, part, count);
	}
	struct call_arg a = {.form = form, .fn = red_call, .re = e, .rs = rs, .team = team,
			     .d = inplace ? src : dst, .s = src, .n = count};
	int rc = run_form(&a);
	SK(rc == 0, "%s_%s of %zu on team %d (%s form%s): %d (%s)", e->name,
	   rs ? "reducescatter" : "reduce", count, team, form_name[form],
	   inplace ? ", in place" : "", rc, kinet_strerror(rc));
	size_t at = 0;
	const uint8_t *got = inplace ? src : dst;
	SK(e->same(got, want, count, &at),
	   "%s_%s of %zu on team %d of %d (%s form%s): element %zu differs", e->name,
	   rs ? "reducescatter" : "reduce", count, team, size, form_name[form],
	   inplace ? ", in place" : "", at);
	if (!inplace)
		SK(!memcmp(src, mine, slen), "%s: the source was changed", e->name);
	free(mine);
	free(want);
	free(x);
}

/* Every entry and both collectives on the world (the count, form and
 * in-place choice going round), a share of them on the other teams. */
static int red_all_fn(int me, int n, void *arg)
{
	(void)arg;
	struct teams ts;
	teams_make(me, n, &ts);
	size_t cap = (size_t)RED_BIG * 8 * 4;
	uint8_t *src = nvshmem_malloc(cap), *dst = nvshmem_malloc(cap);
	SK(src && dst, "malloc");
	/* the world: every entry, both collectives, the counts, forms and in
	 * place going round; the other teams: a share of the entries each */
	for (int ti = 0; ti < ts.n_t; ti++) {
		nvshmem_team_t team = ts.t[ti];
		if (team == NVSHMEM_TEAM_INVALID)
			continue;
		for (int ei = 0; ei < NREDS; ei++) {
			if (ti && ei % 11 != ti)
				continue;
			for (int rs = 0; rs < 2; rs++) {
				int k = ei + ti + rs;
				red_one(ei, red_counts[1 + k % (NRED_COUNTS - 1)], team, k % F_COUNT,
					rs, (k / F_COUNT) % 2, src, dst);
				if (ei % 17 == 0)
					red_one(ei, 0, team, (k + 1) % F_COUNT, rs, 0, src, dst);
			}
		}
	}
	SK0(kinet_shmem_barrier_all());
	/* larger than a chunk (several rounds through the scratch), a few entries */
	for (int ei = 0; ei < NREDS; ei += 13)
		for (int rs = 0; rs < 2; rs++)
			red_one(ei, RED_BIG, NVSHMEM_TEAM_WORLD, (ei + rs) % F_COUNT, rs, ei % 2, src,
				dst);
	SK0(kinet_shmem_barrier_all());
	nvshmem_free(dst);
	nvshmem_free(src);
	teams_free(&ts);
	return 0;
}

Test(shmem_coll, reduce_every_op_and_type_2_pes)
{
	sh_both(2, red_all_fn, NULL);
}

Test(shmem_coll, reduce_every_op_and_type_3_pes)
{
	sh_both(3, red_all_fn, NULL);
}

Test(shmem_coll, reduce_every_op_and_type_4_pes)
{
	sh_both(4, red_all_fn, NULL);
}

/* ---- broadcast, fcollect, alltoall -------------------------------------------------------------- */

static const size_t move_counts[] = {0, 1, 5, 333, 40001};
#define NMOVE_COUNTS ((int)(sizeof(move_counts) / sizeof(move_counts[0])))

static void move_one(int mi, int what, size_t count, nvshmem_team_t team, int form, int root,
		     uint8_t *src, uint8_t *dst, int round)
{
	const struct move_entry *e = &moves[mi];
	int size = nvshmem_team_n_pes(team), my = nvshmem_team_my_pe(team);
	size_t blk = count * e->esz;
	size_t slen = what == M_ALLTOALL ? blk * (size_t)size : blk;
	size_t dlen = what == M_BCAST ? blk : blk * (size_t)size;
	static const char *const wn[] = {"broadcast", "fcollect", "alltoall"};
	tu_fill_random(src, slen, sh_seed(nvshmem_my_pe(), 60 + what, round));
	memset(dst, 0x5a, dlen + 64);
	uint8_t *want = malloc(dlen + 1), *x = malloc(slen + 1);
	SK(want && x, "malloc");
	for (int i = 0; i < size; i++) {
		tu_fill_random(x, slen, sh_seed(member(team, i), 60 + what, round));
		if (what == M_BCAST && i == root)
			memcpy(want, x, blk);
		else if (what == M_FCOLLECT)
			memcpy(want + (size_t)i * blk, x, blk);
		else if (what == M_ALLTOALL)
			memcpy(want + (size_t)i * blk, x + (size_t)my * blk, blk);
	}
	struct call_arg a = {.form = form, .fn = move_call, .me = e, .what = what, .root = root,
			     .team = team, .d = dst, .s = src, .n = count};
	int rc = run_form(&a);
	SK(rc == 0, "%s %s of %zu on team %d (%s form): %d (%s)", e->name, wn[what], count, team,
	   form_name[form], rc, kinet_strerror(rc));
	SK(!memcmp(dst, want, dlen), "%s %s of %zu elements on team %d of %d, root %d (%s form)",
	   e->name, wn[what], count, team, size, root, form_name[form]);
	for (int i = 0; i < 64; i++)
		SK(dst[dlen + (size_t)i] == 0x5a, "%s %s wrote past its end", e->name, wn[what]);
	free(want);
	free(x);
}

static int move_all_fn(int me, int n, void *arg)
{
	(void)arg;
	struct teams ts;
	teams_make(me, n, &ts);
	size_t cap = (size_t)40001 * 8 * 4 + 64;
	uint8_t *src = nvshmem_malloc(cap), *dst = nvshmem_malloc(cap);
	SK(src && dst, "malloc");
	int round = 0;
	for (int ti = 0; ti < ts.n_t; ti++) {
		nvshmem_team_t team = ts.t[ti];
		if (team == NVSHMEM_TEAM_INVALID)
			continue;
		int size = nvshmem_team_n_pes(team);
		for (int mi = 0; mi < NMOVES; mi++) {
			if (ti && mi % 7 != ti)
				continue; /* the other teams: a share of the types */
			for (int what = 0; what < 3; what++)
				for (int r = 0; r < 2; r++) {
					int k = mi + what + ti + r;
					size_t c = move_counts[(mi + what + r * 2) % NMOVE_COUNTS];
					move_one(mi, what, c, team, k % F_COUNT, k % size, src, dst,
						 round++);
				}
		}
	}
	/* broadcast in place on the root (dest == source) */
	tu_fill_random(src, 1000, sh_seed(0, 70, 0));
	if (me != 1)
		memset(src, 0, 1000);
	SK0(nvshmem_broadcastmem(NVSHMEM_TEAM_WORLD, src, src, 1000, 1));
	uint8_t want[1000];
	tu_fill_random(want, 1000, sh_seed(0, 70, 0));
	SK(!memcmp(src, want, 1000), "broadcast in place");
	SK0(kinet_shmem_barrier_all());
	nvshmem_free(dst);
	nvshmem_free(src);
	teams_free(&ts);
	return 0;
}

Test(shmem_coll, broadcast_fcollect_alltoall_2_pes)
{
	sh_both(2, move_all_fn, NULL);
}

Test(shmem_coll, broadcast_fcollect_alltoall_3_pes)
{
	sh_both(3, move_all_fn, NULL);
}

Test(shmem_coll, broadcast_fcollect_alltoall_4_pes)
{
	sh_both(4, move_all_fn, NULL);
}

/* ---- bad arguments --------------------------------------------------------------------------- */

/* Each is refused on the calling PE before anything moves (no peer
 * involved): a nonzero return, kinet's errno, the PE's error kept. The
 * world works afterwards. */
static int bad_fn(int me, int n, void *arg)
{
	(void)arg;
	int *a = nvshmem_malloc(64 * sizeof(int) * (size_t)n);
	int *b = nvshmem_malloc(64 * sizeof(int) * (size_t)n);
	int priv[64];
	SK(a && b, "malloc");
	SK(nvshmem_int_sum_reduce(NVSHMEM_TEAM_INVALID, b, a, 4) == -EINVAL, "invalid team");
	SK(nvshmem_int_sum_reduce(KN_SHMEM_MAX_TEAMS, b, a, 4) == -EINVAL, "team out of range");
	SK(nvshmem_int_sum_reduce(7, b, a, 4) == -EINVAL, "a team never made");
	SK(nvshmem_int_broadcast(NVSHMEM_TEAM_WORLD, b, a, 4, n) == -EINVAL, "root = size");
	SK(nvshmem_int_broadcast(NVSHMEM_TEAM_WORLD, b, a, 4, -1) == -EINVAL, "root -1");
	SK(nvshmem_int_sum_reduce(NVSHMEM_TEAM_WORLD, priv, a, 4) == -EINVAL, "private dest");
	SK(nvshmem_int_sum_reduce(NVSHMEM_TEAM_WORLD, b, priv, 4) == -EINVAL, "private source");
	SK(nvshmem_int_sum_reduce(NVSHMEM_TEAM_WORLD, a + 1, a, 4) == -EINVAL, "overlap");
	SK(nvshmem_int_fcollect(NVSHMEM_TEAM_WORLD, a, a, 4) == -EINVAL, "fcollect in place");
	SK(nvshmem_int_alltoall(NVSHMEM_TEAM_WORLD, a, a, 4) == -EINVAL, "alltoall in place");
	SK(nvshmem_int_fcollect(NVSHMEM_TEAM_WORLD, b, a, (size_t)8 << 20) == -EINVAL,
	   "fcollect past the heap's end");
	SK(nvshmem_int_sum_reduce(NVSHMEM_TEAM_WORLD, b, a, (size_t)-1 / 2) == -EINVAL,
	   "a count that overflows");
	/* bitwise operators on floating types (no NVSHMEM name: the kinet call) */
	SK(kinet_shmem_coll(KN_COLL_REDUCE, NVSHMEM_TEAM_WORLD, b, a, 4, 0, KN_RED_XOR,
			    KN_DT_FLOAT) == -EINVAL, "xor of floats");
	SK(kinet_shmem_coll(KN_COLL_REDUCE, NVSHMEM_TEAM_WORLD, b, a, 4, 0, 7, KN_DT_INT32) ==
		   -EINVAL, "an unknown operator");
	SK(kinet_shmem_coll(KN_COLL_REDUCE, NVSHMEM_TEAM_WORLD, b, a, 4, 0, KN_RED_SUM,
			    KN_DT_COUNT) == -EINVAL, "an unknown type");
	SK(kinet_shmem_coll(9, NVSHMEM_TEAM_WORLD, b, a, 4, 0, 0, KN_DT_INT32) == -EINVAL,
	   "an unknown collective");
	/* a member of a split team passing a team it is not in */
	nvshmem_team_t tail;
	SK0(kinet_shmem_team_split_strided(NVSHMEM_TEAM_WORLD, 1, 1, n - 1, &tail));
	if (me == 0) {
		SK(tail == NVSHMEM_TEAM_INVALID, "PE 0 outside");
		nvshmem_team_t other = 3; /* the slot the others got */
		SK(nvshmem_int_sum_reduce(other, b, a, 4) == -EINVAL, "not a member");
	}
	SK(kinet_shmem_error(1) == -EINVAL, "the PE's error kept");
	/* all is well afterwards */
	for (int i = 0; i < 4; i++)
		a[i] = me + i;
	SK0(nvshmem_int_sum_reduce(NVSHMEM_TEAM_WORLD, b, a, 4));
	for (int i = 0; i < 4; i++)
		SK(b[i] == n * (n - 1) / 2 + n * i, "sum %d", b[i]);
	if (tail != NVSHMEM_TEAM_INVALID)
		SK0(kinet_shmem_team_destroy(tail));
	nvshmem_free(b);
	nvshmem_free(a);
	return 0;
}

Test(shmem_coll, bad_arguments_refused)
{
	sh_both(3, bad_fn, NULL);
}

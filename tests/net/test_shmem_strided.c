/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The strided RMA of kinet-shmem (kn_shmem_iput / _iget, NVSHMEM's
 * nvshmem_TYPENAME_iput / _iget, nvshmem_iputSIZE / _igetSIZE and their
 * warp, block and _on_stream forms) and the int results of NVSHMEM 3.x's
 * team barriers, with 2 and 3 PEs as processes on the host executor, over
 * the software NIC's wire and over the same-node path.
 *
 * Every case fills the source with random bytes and the whole target
 * region (with a margin on each side) with random guard bytes, moves the
 * strided elements, and checks the target region byte for byte against a
 * model: the strided elements from the source, every other byte still its
 * guard. Element sizes 1, 2, 4, 8 and 16 bytes through every type class
 * (signed and unsigned integers, float, double, half, bfloat16, size and
 * ptrdiff), strides above 1 on both sides, a negative and a zero stride,
 * nelems 0, 1, odd and more than a send queue holds.
 */
#define KINET_NVSHMEM_HOST_EXECUTOR 1 /* kinet's stand-ins, even with CUDA installed */
#include "test_shmem_common.h"
#include <nvshmem.h>
#include <nvshmemx.h>

TestSuite(shmem_strided, .timeout = 600);

/* NVSHMEM 3.x: team barriers return int, barrier_all returns nothing. */
_Static_assert(__builtin_types_compatible_p(__typeof__(nvshmem_barrier(0)), int),
	       "nvshmem_barrier returns int");
_Static_assert(__builtin_types_compatible_p(__typeof__(nvshmemx_barrier_warp(0)), int),
	       "nvshmemx_barrier_warp returns int");
_Static_assert(__builtin_types_compatible_p(__typeof__(nvshmemx_barrier_block(0)), int),
	       "nvshmemx_barrier_block returns int");
_Static_assert(__builtin_types_compatible_p(__typeof__(nvshmem_team_sync(0)), int),
	       "nvshmem_team_sync returns int");

enum form { F_HOST, F_HOST_SIZED, F_STREAM, F_STREAM_SIZED, F_THREAD, F_THREAD_SIZED, F_WARP,
	    F_BLOCK, F_WARP_SIZED, F_BLOCK_SIZED, F_NFORMS };
static const char *const form_name[F_NFORMS] = {
	"host typed", "host sized", "on_stream typed", "on_stream sized", "thread typed",
	"thread sized", "warp typed", "block typed", "warp sized", "block sized"};

/* One strided operation, by the NVSHMEM name of its form. */
struct op {
	int form, get, es, tsel, pe;
	void *d;
	const void *s;
	ptrdiff_t dst, sst;
	size_t n;
	cudaStream_t st;
};

/* The typed names of one type: the form's call. */
#define TYPED(NAME, TYPE)                                                                       \
	static void op_##NAME(const struct op *o)                                               \
	{                                                                                       \
		TYPE *d = (TYPE *)o->d;                                                         \
		const TYPE *s = (const TYPE *)o->s;                                             \
		switch (o->form) {                                                              \
		case F_HOST:                                                                    \
		case F_THREAD:                                                                  \
			if (o->get)                                                             \
				nvshmem_##NAME##_iget(d, s, o->dst, o->sst, o->n, o->pe);       \
			else                                                                    \
				nvshmem_##NAME##_iput(d, s, o->dst, o->sst, o->n, o->pe);       \
			break;                                                                  \
		case F_STREAM:                                                                  \
			if (o->get)                                                             \
				nvshmemx_##NAME##_iget_on_stream(d, s, o->dst, o->sst, o->n,    \
								 o->pe, o->st);                 \
			else                                                                    \
				nvshmemx_##NAME##_iput_on_stream(d, s, o->dst, o->sst, o->n,    \
								 o->pe, o->st);                 \
			break;                                                                  \
		case F_WARP:                                                                    \
			if (o->get)                                                             \
				nvshmemx_##NAME##_iget_warp(d, s, o->dst, o->sst, o->n, o->pe); \
			else                                                                    \
				nvshmemx_##NAME##_iput_warp(d, s, o->dst, o->sst, o->n, o->pe); \
			break;                                                                  \
		case F_BLOCK:                                                                   \
			if (o->get)                                                             \
				nvshmemx_##NAME##_iget_block(d, s, o->dst, o->sst, o->n, o->pe); \
			else                                                                    \
				nvshmemx_##NAME##_iput_block(d, s, o->dst, o->sst, o->n, o->pe); \
			break;                                                                  \
		}                                                                               \
	}
TYPED(char, char)
TYPED(schar, signed char)
TYPED(uchar, unsigned char)
TYPED(int8, int8_t)
TYPED(uint8, uint8_t)
TYPED(short, short)
TYPED(ushort, unsigned short)
TYPED(int16, int16_t)
TYPED(uint16, uint16_t)
TYPED(half, half)
TYPED(bfloat16, __nv_bfloat16)
TYPED(int, int)
TYPED(uint, unsigned int)
TYPED(int32, int32_t)
TYPED(uint32, uint32_t)
TYPED(float, float)
TYPED(long, long)
TYPED(longlong, long long)
TYPED(ulong, unsigned long)
TYPED(ulonglong, unsigned long long)
TYPED(int64, int64_t)
TYPED(uint64, uint64_t)
TYPED(double, double)
TYPED(size, size_t)
TYPED(ptrdiff, ptrdiff_t)

typedef void (*op_fn)(const struct op *);
/* The types of each element size, taken in turn by the cases. */
static const op_fn t1[] = {op_char, op_schar, op_uchar, op_int8, op_uint8};
static const op_fn t2[] = {op_short, op_ushort, op_int16, op_uint16, op_half, op_bfloat16};
static const op_fn t4[] = {op_int, op_uint, op_int32, op_uint32, op_float};
static const op_fn t8[] = {op_long, op_longlong, op_ulong, op_ulonglong, op_int64,
			   op_uint64, op_double, op_size, op_ptrdiff};

#define SIZED(BITS)                                                                             \
	static void op_sized##BITS(const struct op *o)                                          \
	{                                                                                       \
		switch (o->form) {                                                              \
		case F_HOST_SIZED:                                                              \
		case F_THREAD_SIZED:                                                            \
			if (o->get)                                                             \
				nvshmem_iget##BITS(o->d, o->s, o->dst, o->sst, o->n, o->pe);    \
			else                                                                    \
				nvshmem_iput##BITS(o->d, o->s, o->dst, o->sst, o->n, o->pe);    \
			break;                                                                  \
		case F_STREAM_SIZED:                                                            \
			if (o->get)                                                             \
				nvshmemx_iget##BITS##_on_stream(o->d, o->s, o->dst, o->sst,     \
								o->n, o->pe, o->st);            \
			else                                                                    \
				nvshmemx_iput##BITS##_on_stream(o->d, o->s, o->dst, o->sst,     \
								o->n, o->pe, o->st);            \
			break;                                                                  \
		case F_WARP_SIZED:                                                              \
			if (o->get)                                                             \
				nvshmemx_iget##BITS##_warp(o->d, o->s, o->dst, o->sst, o->n,    \
							   o->pe);                              \
			else                                                                    \
				nvshmemx_iput##BITS##_warp(o->d, o->s, o->dst, o->sst, o->n,    \
							   o->pe);                              \
			break;                                                                  \
		case F_BLOCK_SIZED:                                                             \
			if (o->get)                                                             \
				nvshmemx_iget##BITS##_block(o->d, o->s, o->dst, o->sst, o->n,   \
							    o->pe);                             \
			else                                                                    \
				nvshmemx_iput##BITS##_block(o->d, o->s, o->dst, o->sst, o->n,   \
							    o->pe);                             \
			break;                                                                  \
		}                                                                               \
	}
SIZED(8)
SIZED(16)
SIZED(32)
SIZED(64)
SIZED(128)

static int sized_form(int f)
{
	return f == F_HOST_SIZED || f == F_STREAM_SIZED || f == F_THREAD_SIZED ||
	       f == F_WARP_SIZED || f == F_BLOCK_SIZED;
}

static void op_run(const struct op *o)
{
	/* 16-byte elements have no typed name: the sized one in every form */
	if (sized_form(o->form) || o->es == 16) {
		struct op c = *o;
		if (!sized_form(c.form))
			c.form = c.form == F_HOST ? F_HOST_SIZED : c.form == F_STREAM ? F_STREAM_SIZED
				 : c.form == F_THREAD ? F_THREAD_SIZED : c.form == F_WARP ? F_WARP_SIZED
				 : F_BLOCK_SIZED;
		switch (o->es) {
		case 1: op_sized8(&c); break;
		case 2: op_sized16(&c); break;
		case 4: op_sized32(&c); break;
		case 8: op_sized64(&c); break;
		default: op_sized128(&c); break;
		}
		return;
	}
	switch (o->es) {
	case 1: t1[o->tsel % 5](o); break;
	case 2: t2[o->tsel % 6](o); break;
	case 4: t4[o->tsel % 5](o); break;
	default: t8[o->tsel % 9](o); break;
	}
}

static void op_kernel(void *arg)
{
	const struct op *o = arg;
	if ((o->form == F_THREAD || o->form == F_THREAD_SIZED) && threadIdx.x != 0)
		return;
	op_run(o);
}

/* Runs o in its form: host-called, on a stream (then synchronised), or in a
 * kernel (one block: 32 threads for the warp forms, 64 for the others). */
static void op_do(struct op *o)
{
	if (o->form == F_HOST || o->form == F_HOST_SIZED) {
		op_run(o);
	} else if (o->form == F_STREAM || o->form == F_STREAM_SIZED) {
		op_run(o);
		SK0(cudaStreamSynchronize(o->st));
	} else {
		dim3 one = {1, 1, 1}, blk = {o->form == F_WARP || o->form == F_WARP_SIZED ? 32u : 64u,
					    1, 1};
		void *args[] = {&(void *){o}};
		SK0(nvshmemx_collective_launch((const void *)op_kernel, one, blk, args, 0, o->st));
	}
}

/* ---- the model ----------------------------------------------------------------------------- */

#define MARGIN 64
#define REGION (1u << 20)

/* The offset of element 0 of a strided array of n elements (stride st, es
 * bytes) placed MARGIN bytes into a region: a negative stride starts at
 * the top. Its whole span is inside [MARGIN, MARGIN + span). */
static size_t origin(ptrdiff_t st, size_t n, int es)
{
	return MARGIN + (st < 0 && n ? (size_t)(-st) * (n - 1) * (size_t)es : 0);
}
static size_t span(ptrdiff_t st, size_t n, int es)
{
	return n ? (size_t)(st < 0 ? -st : st) * (n - 1) * (size_t)es + (size_t)es : 0;
}

/* exp: the target region after the operation: guard, with element i of
 * the source region (its bytes at sorg + i*sst*es) at dorg + i*dst*es. */
static void model(uint8_t *exp, const uint8_t *guard, size_t rlen, const uint8_t *src,
		  const struct op *o, size_t dorg, size_t sorg)
{
	memcpy(exp, guard, rlen);
	for (size_t i = 0; i < o->n; i++)
		memcpy(exp + dorg + (ptrdiff_t)i * o->dst * o->es,
		       src + sorg + (ptrdiff_t)i * o->sst * o->es, (size_t)o->es);
}

static void first_diff(const uint8_t *a, const uint8_t *b, size_t n, char *out, size_t cap)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i]) {
			snprintf(out, cap, "byte %zu: 0x%02x, expected 0x%02x", i, a[i], b[i]);
			return;
		}
	snprintf(out, cap, "equal");
}

struct scase {
	int es;
	ptrdiff_t dst, sst;
	size_t n;
};

/* The cases: every element size with strides above 1 on both sides, one
 * side contiguous, nelems 0, 1 and odd, and the special ones below. */
static size_t make_cases(struct scase *c)
{
	static const int es[] = {1, 2, 4, 8, 16};
	static const ptrdiff_t st[][2] = {{2, 3}, {3, 1}, {1, 5}, {7, 2}};
	static const size_t ns[] = {0, 1, 37};
	size_t k = 0;
	for (int e = 0; e < 5; e++)
		for (int s = 0; s < 4; s++)
			for (int m = 0; m < 3; m++)
				c[k++] = (struct scase){es[e], st[s][0], st[s][1], ns[m]};
	c[k++] = (struct scase){4, -3, 2, 9};   /* a negative stride: written downwards */
	c[k++] = (struct scase){8, 2, -1, 11};
	c[k++] = (struct scase){2, 1, 1, 1001}; /* contiguous, odd byte count */
	c[k++] = (struct scase){8, 2, 3, 3000}; /* more WQEs than a send queue holds */
	c[k++] = (struct scase){16, 3, 2, 700};
	c[k++] = (struct scase){1, 5, 0, 13};   /* one source element to 13 places */
	return k;
}

struct sargs {
	int forms_from, forms_to; /* [from, to) */
};

/* Every case in every form of [from, to), put to the right neighbour and
 * get from the left one, checked byte for byte on the receiving PE. */
static int strided_fn(int me, int n, void *arg)
{
	const struct sargs *sa = arg;
	int to = (me + 1) % n, from = (me + n - 1) % n;
	uint8_t *sym_src = nvshmem_malloc(REGION); /* put's source, get's remote source */
	uint8_t *sym_dst = nvshmem_malloc(REGION); /* put's remote target, get's local target */
	uint8_t *guard = malloc(REGION), *exp = malloc(REGION), *peer_src = malloc(REGION);
	uint8_t *plain = malloc(REGION); /* pageable memory as a put's source */
	SK(sym_src && sym_dst && guard && exp && peer_src && plain, "malloc");
	cudaStream_t st;
	SK0(cudaStreamCreate(&st));
	struct scase cs[80];
	size_t nc = make_cases(cs);
	char why[128];
	int round = 0;
	for (int f = sa->forms_from; f < sa->forms_to; f++) {
		for (size_t k = 0; k < nc; k++) {
			for (int get = 0; get < 2; get++, round++) {
				struct op o = {.form = f, .get = get, .es = cs[k].es,
					       .tsel = (int)k + get, .dst = cs[k].dst,
					       .sst = cs[k].sst, .n = cs[k].n, .st = st};
				size_t dorg = origin(o.dst, o.n, o.es), sorg = origin(o.sst, o.n, o.es);
				size_t rlen = 2 * MARGIN + span(o.dst, o.n, o.es);
				size_t slen = 2 * MARGIN + span(o.sst, o.n, o.es);
				SK(rlen <= REGION && slen <= REGION, "case %zu too large", k);
				/* sources (this PE's and, for the model, the sender's), guards */
				/* put: the left neighbour sends to me; get: I read from it */
				int sender = from;
				tu_fill_random(sym_src, slen, sh_seed(me, 1, round));
				tu_fill_random(peer_src, slen, sh_seed(sender, 1, round));
				tu_fill_random(guard, rlen, sh_seed(me, 2, round));
				memcpy(sym_dst, guard, rlen);
				int use_plain = !get && f == F_HOST && (k & 1);
				if (use_plain)
					memcpy(plain, sym_src, slen);
				nvshmem_barrier_all();
				if (get) {
					o.pe = from;
					o.d = sym_dst + dorg;
					o.s = sym_src + sorg;
				} else {
					o.pe = to;
					o.d = sym_dst + dorg;
					o.s = (use_plain ? plain : sym_src) + sorg;
				}
				op_do(&o);
				if (!get && use_plain)
					memset(plain, 0, slen); /* blocking: the source may change */
				nvshmem_barrier_all();
				SK0(kinet_shmem_error(0));
				model(exp, guard, rlen, peer_src, &o, dorg, sorg);
				first_diff(sym_dst, exp, rlen, why, sizeof(why));
				SK(!memcmp(sym_dst, exp, rlen),
				   "%s %s: %zu elements of %d bytes, strides %td/%td, %s", form_name[f],
				   get ? "iget" : "iput", o.n, o.es, o.dst, o.sst, why);
			}
		}
	}
	SK0(cudaStreamDestroy(st));
	nvshmem_barrier_all();
	free(plain);
	free(peer_src);
	free(exp);
	free(guard);
	nvshmem_free(sym_dst);
	nvshmem_free(sym_src);
	return 0;
}

Test(shmem_strided, host_and_on_stream_forms_byte_for_byte)
{
	struct sargs a = {F_HOST, F_THREAD};
	sh_both(2, strided_fn, &a);
}

Test(shmem_strided, thread_warp_and_block_forms_byte_for_byte)
{
	struct sargs a = {F_THREAD, F_NFORMS};
	sh_both(2, strided_fn, &a);
}

Test(shmem_strided, three_pes_host_and_block_forms)
{
	struct sargs a = {F_BLOCK, F_BLOCK + 1};
	sh_both(3, strided_fn, &a);
	struct sargs b = {F_HOST_SIZED, F_HOST_SIZED + 1};
	sh_both(3, strided_fn, &b);
}

/* ---- bad arguments: refused, nothing written ------------------------------------------------ */

struct bad_args {
	uint8_t *sym;
	int pe, rc[4];
};

static void bad_kernel(void *arg)
{
	struct bad_args *a = arg;
	if (threadIdx.x == 0) {
		a->rc[0] = kn_shmem_iput(a->sym, a->sym + 4096, 1, 1, 4, 3, a->pe);
		a->rc[1] = kn_shmem_iget(a->sym, a->sym + 4096, 1, PTRDIFF_MAX / 2, 4, 8, a->pe);
	}
	int r = kn_shmem_iput_block(a->sym, a->sym + 4096, 1, 1, 4, 12, a->pe);
	if (threadIdx.x == 0)
		a->rc[2] = r;
	int b = nvshmemx_barrier_block(NVSHMEM_TEAM_WORLD);
	if (threadIdx.x == 0)
		a->rc[3] = b;
}

static int bad_fn(int me, int n, void *arg)
{
	(void)arg;
	int to = (me + 1) % n;
	size_t len = 64 << 10;
	uint8_t *sym = nvshmem_malloc(len);
	uint8_t *guard = malloc(len), *plain = malloc(len);
	SK(sym && guard && plain, "malloc");
	tu_fill_random(guard, len, sh_seed(me, 9, 0));
	memcpy(sym, guard, len);
	nvshmem_barrier_all();
	/* an element size that is none of 1, 2, 4, 8, 16 */
	SK(kinet_shmem_iput(sym, sym + 4096, 2, 2, 5, 3, to) == -EINVAL, "unexpected result");
	SK(kinet_shmem_iget(sym, sym + 4096, 2, 2, 5, 32, to) == -EINVAL, "unexpected result");
	/* a span that overflows */
	SK(kinet_shmem_iput(sym, sym + 4096, PTRDIFF_MAX / 4, 1, 9, 8, to) == -EINVAL, "unexpected result");
	SK(kinet_shmem_iget(sym, sym + 4096, 1, PTRDIFF_MIN / 2, 3, 4, to) == -EINVAL, "unexpected result");
	/* a dest span that leaves the heap (its first element inside) */
	uint8_t *last = sym + len - 8;
	SK(kinet_shmem_iput(last, guard, 1 << 20, 1, 1000, 8, to) == -EINVAL, "unexpected result");
	/* the remote side not symmetric */
	SK(kinet_shmem_iput(plain, guard, 2, 1, 3, 4, to) == -EINVAL, "unexpected result");
	SK(kinet_shmem_iget(sym, plain, 2, 1, 3, 4, to) == -EINVAL, "unexpected result");
	/* on stream, and a bad PE */
	SK(kinet_shmem_iput_on_stream(sym, sym + 4096, 1, 1, 4, 7, to, NULL) == -EINVAL, "unexpected result");
	SK(kinet_shmem_iget(sym, sym + 4096, 1, 1, 4, 4, n + 3) == -EINVAL, "unexpected result");
	/* nelems 0 with a good size: nothing to do */
	SK0(kinet_shmem_iput(sym, sym + 4096, 3, 3, 0, 4, to));
	/* device forms */
	struct bad_args a = {.sym = sym, .pe = to};
	dim3 one = {1, 1, 1}, blk = {64, 1, 1};
	void *args[] = {&(void *){&a}};
	SK0(nvshmemx_collective_launch((const void *)bad_kernel, one, blk, args, 0, 0));
	SK(a.rc[0] == -EINVAL && a.rc[1] == -EINVAL && a.rc[2] == -EINVAL, "%d %d %d", a.rc[0],
	   a.rc[1], a.rc[2]);
	SK(a.rc[3] == 0, "nvshmemx_barrier_block = %d", a.rc[3]);
	SK(kinet_shmem_error(0) == -EINVAL, "kept error %d", kinet_shmem_error(0));
	/* team barriers' results: 0, and nonzero for a team that does not exist */
	SK(nvshmem_barrier(NVSHMEM_TEAM_WORLD) == 0, "unexpected result");
	SK(nvshmem_team_sync(NVSHMEM_TEAM_WORLD) == 0, "unexpected result");
	SK(nvshmem_barrier(KN_SHMEM_MAX_TEAMS + 3) != 0, "unexpected result");
	SK(kinet_shmem_barrier(KN_SHMEM_MAX_TEAMS + 3) == -EINVAL, "unexpected result");
	nvshmem_barrier_all();
	SK(!memcmp(sym, guard, len), "a refused call wrote");
	nvshmem_barrier_all();
	free(plain);
	free(guard);
	nvshmem_free(sym);
	return 0;
}

Test(shmem_strided, bad_arguments_refused_and_barriers_return_int)
{
	sh_both(2, bad_fn, NULL);
}

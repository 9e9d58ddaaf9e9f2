/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Third-party producers of mlx5 WQEs on the GPU: the counterpart of
 * tests/unit/test_producers.c. The kernels here write their WQEs and ring
 * their doorbells themselves, from the queue format alone (the kn_qp
 * descriptor's SQ, doorbell record, the UAR's two registers and the CQ; no
 * kinet device call), with the PTX a GPU verbs library uses: system-scope
 * relaxed stores to the host-mapped queues, st.release.sys on the doorbell
 * record, fence.acq_rel.sys / fence.sc.sys between WQE, record and register.
 * Conventions (docs/hardware.md, "Producer conventions"):
 *   RDMA_CORE  record, then the first 8 bytes of the last WQE's ctrl segment
 *   VERBS_DB   a producer-index word (next index, opcode 0, ds 0, the QPN),
 *              the record, the word again (as GPU verbs libraries ring)
 *   NO_DBR     the producer-index word alone (no doorbell record ever)
 *   BF_DB      the last WQE into the BlueFlame register, the record, then a
 *              producer-index word over its ctrl word
 *   BF_WQE     record, then the last WQE into the register, ctrl word first
 *              (rdma-core's and kinet's BlueFlame form)
 *   DBR_ONLY   the record alone
 * Producers: one thread; one warp (lanes write the words of four WQEs and
 * lane 0 rings; for BlueFlame, 8 lanes write one WQE into the SQ and then
 * its 8 words into the register with one store instruction); the threads of
 * a grid sharing the QP, publishing in ticket order and ringing under a lock
 * (a ringer rings for every WQE published so far), or each ringing its own
 * WQE in ticket order. Rings use one register or alternate between the two.
 * The CQ is created with overrun ignore: the kernels never write the CQ
 * doorbell record and poll the owner bit only; the SQ depth bounds what is
 * outstanding. Every WQE writes its own 16 random bytes (host or GPU memory)
 * to its own place; the data is checked byte for byte, every CQE's opcode
 * and WQE index too, through 200 SQ laps (70000 WQEs, past the 16-bit index
 * wrap, without a record); the context's counters must show the doorbell
 * form and BlueFlame copies of the convention. On the software NIC, and on
 * the mlx5 backend over the rdma-core double with the real GPU (verbs and
 * DevX queues; KINET_MLX5_EMULATE=1, the double's counters read from the
 * module libkinet loaded). Every wait in a kernel is bounded and reports the
 * WQE or CQE it was stuck on.
 */
#include <dlfcn.h>
#include <link.h>
#include "gpu_util.h"
#include "kinet_config.h"

enum conv { RDMA_CORE, VERBS_DB, NO_DBR, BF_DB, BF_WQE, DBR_ONLY, NCONV };
static const char *const conv_name[NCONV] = {"RDMA_CORE", "VERBS_DB", "NO_DBR",
					     "BF_DB",     "BF_WQE",   "DBR_ONLY"};

enum scope { S_THREAD, S_WARP, S_GRID_LOCK, S_GRID_TICKET, NSCOPE };
static const char *const scope_name[NSCOPE] = {"one thread", "one warp", "grid, ring lock",
					       "grid, ring ticket"};

#define DEPTH 32u
#define MSG 16u     /* bytes per WQE */
#define GUARD 256u  /* bytes past the last message that must stay as they were */
#define WAIT_NS 5000000000ull /* bound on every wait of a kernel */
#define GRID_BLOCKS 8
#define GRID_THREADS 64

/* Why a kernel stopped (first failure only). */
enum fail_kind { F_NONE, F_ROOM, F_CQE_ERR, F_CQE_IDX, F_TURN, F_LOCK, F_DONE };

/* Producer state shared by the threads of a kernel (GPU memory, zeroed). */
struct shared {
	unsigned long long resv;  /* next WQE index to hand out (grid) */
	unsigned long long ready; /* every WQE below is written (grid) */
	unsigned long long done;  /* CQEs consumed */
	unsigned long long rung;  /* producer index last rung (ring lock) */
	unsigned long long rings; /* doorbells rung (ring lock): picks the register */
	unsigned int ring_lock, poll_lock;
	int bad;                  /* source line of the first failure, 0: none */
	int kind;                 /* enum fail_kind */
	unsigned long long idx;   /* the WQE or CQE it was stuck on */
	unsigned long long seen;  /* what it saw instead */
};

/* What a kernel needs: the descriptor by value (device addresses; only the
 * queues, sizes and QP number are used), the convention, the payloads. */
struct job {
	kn_qp q;
	int conv, alt;
	uint64_t n;
	uint64_t src, dst;
	uint32_t lkey, rkey;
	struct shared *sh;
};

/* ---- PTX: system scope toward the queues, GPU scope for the shared state -- */

__device__ __forceinline__ void st_sys64(volatile void *p, uint64_t v)
{
	asm volatile("st.relaxed.sys.b64 [%0], %1;" ::"l"((uintptr_t)p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_sys32(volatile void *p, uint32_t v)
{
	asm volatile("st.relaxed.sys.b32 [%0], %1;" ::"l"((uintptr_t)p), "r"(v) : "memory");
}
/* the doorbell record, released: the WQEs before it are visible first */
__device__ __forceinline__ void st_rel_sys32(volatile void *p, uint32_t v)
{
	asm volatile("st.release.sys.b32 [%0], %1;" ::"l"((uintptr_t)p), "r"(v) : "memory");
}
__device__ __forceinline__ uint64_t ld_sys64(const volatile void *p)
{
	uint64_t v;
	asm volatile("ld.relaxed.sys.b64 %0, [%1];" : "=l"(v) : "l"((uintptr_t)p) : "memory");
	return v;
}
__device__ __forceinline__ void fence_acq_rel_sys(void)
{
	asm volatile("fence.acq_rel.sys;" ::: "memory");
}
__device__ __forceinline__ void fence_sc_sys(void)
{
	asm volatile("fence.sc.sys;" ::: "memory");
}
__device__ __forceinline__ uint64_t ld_acq64(const unsigned long long *p)
{
	uint64_t v;
	asm volatile("ld.acquire.gpu.b64 %0, [%1];" : "=l"(v) : "l"((uintptr_t)p) : "memory");
	return v;
}
__device__ __forceinline__ void st_rel64(unsigned long long *p, uint64_t v)
{
	asm volatile("st.release.gpu.b64 [%0], %1;" ::"l"((uintptr_t)p), "l"(v) : "memory");
}
__device__ __forceinline__ int try_lock(unsigned int *p)
{
	uint32_t old;
	asm volatile("atom.acquire.gpu.cas.b32 %0, [%1], 0, 1;"
		     : "=r"(old)
		     : "l"((uintptr_t)p)
		     : "memory");
	return old == 0;
}
__device__ __forceinline__ void unlock(unsigned int *p)
{
	asm volatile("st.release.gpu.b32 [%0], 0;" ::"l"((uintptr_t)p) : "memory");
}
__device__ __forceinline__ uint64_t gpu_now(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* ---- the format --------------------------------------------------------- */

__device__ static uint64_t pack(uint32_t lo, uint32_t hi)
{
	return (uint64_t)lo | (uint64_t)hi << 32;
}

/* Word k (8 bytes, as stored) of WQE i: an RDMA write of MSG bytes from
 * src + i * MSG to dst + i * MSG, one WQEBB, a CQE requested. */
__device__ static uint64_t wqe_word(const struct job *j, uint64_t i, int k)
{
	switch (k) {
	case 0: /* ctrl: wqe index, opcode | QPN, ds = 3 (ctrl, raddr, data) */
		return pack(kn_htobe32(((uint32_t)(i & 0xffff) << 8) | KN_OPCODE_RDMA_WRITE),
			    kn_htobe32((j->q.qpn << 8) | 3));
	case 1: /* signature, stream id, fm_ce_se (byte 11), immediate */
		return (uint64_t)KN_WQE_CTRL_CQ_UPDATE << 24;
	case 2: /* raddr segment */
		return kn_htobe64(j->dst + i * MSG);
	case 3:
		return kn_htobe32(j->rkey);
	case 4: /* data segment: byte count, lkey, address */
		return pack(kn_htobe32(MSG), kn_htobe32(j->lkey));
	case 5:
		return kn_htobe64(j->src + i * MSG);
	default:
		return 0;
	}
}

/* The producer-index word: next index, opcode 0, ds 0, the QP number. */
__device__ static uint64_t pi_word(const struct job *j, uint64_t pi)
{
	return pack(kn_htobe32((uint32_t)(pi & 0xffff) << 8), kn_htobe32(j->q.qpn << 8));
}

__device__ static volatile uint64_t *slot_of(const struct job *j, uint64_t i)
{
	return (volatile uint64_t *)(j->q.sq + (i & (j->q.sq_wqe_cnt - 1)) * KN_SEND_WQE_BB);
}

/* The register of ring number r: the first, or the two in turn. */
__device__ static volatile uint64_t *reg_of(const struct job *j, uint64_t r)
{
	return (volatile uint64_t *)(j->q.db + (j->alt && (r & 1) ? j->q.bf_alt : 0u));
}

__device__ static void fail(const struct job *j, int line, int kind, uint64_t idx, uint64_t seen)
{
	if (atomicCAS(&j->sh->bad, 0, line) == 0) {
		j->sh->kind = kind;
		j->sh->idx = idx;
		j->sh->seen = seen;
		__threadfence();
	}
}

__device__ static int failed(const struct job *j)
{
	return *(volatile int *)&j->sh->bad != 0;
}

/* ---- ringing ------------------------------------------------------------- */

/* Rings producer index pi from one thread; last holds the 8 words of WQE
 * pi - 1 (never read back from the SQ: its slot may be reused meanwhile). */
__device__ static void ring_thread(const struct job *j, uint64_t pi, const uint64_t *last,
				   uint64_t r)
{
	volatile uint32_t *dbr = &j->q.dbrec[KN_SND_DBR];
	volatile uint64_t *reg = reg_of(j, r);
	uint32_t rec = kn_htobe32((uint32_t)(pi & 0xffff));
	switch (j->conv) {
	case RDMA_CORE:
		st_rel_sys32(dbr, rec);
		fence_sc_sys(); /* record before register */
		st_sys64(reg, last[0]);
		break;
	case VERBS_DB:
		fence_acq_rel_sys(); /* WQEs before any doorbell */
		st_sys64(reg, pi_word(j, pi));
		st_sys32(dbr, rec);
		fence_sc_sys();
		st_sys64(reg, pi_word(j, pi));
		break;
	case NO_DBR:
		fence_acq_rel_sys();
		st_sys64(reg, pi_word(j, pi));
		break;
	case BF_DB:
		fence_acq_rel_sys();
		for (int k = 0; k < 8; k++) /* ascending, as one burst would */
			st_sys64(reg + k, last[k]);
		fence_sc_sys();
		st_sys32(dbr, rec);
		fence_sc_sys();
		st_sys64(reg, pi_word(j, pi));
		break;
	case BF_WQE:
		st_rel_sys32(dbr, rec);
		fence_sc_sys();
		for (int k = 0; k < 8; k++)
			st_sys64(reg + k, last[k]);
		break;
	default: /* DBR_ONLY */
		st_rel_sys32(dbr, rec);
		break;
	}
}

/* Rings producer index pi from a whole warp (every lane calls it): lanes
 * 0..7 hold word `lane` of WQE pi - 1 in lw. BlueFlame copies are written by
 * those 8 lanes at once, the 8-byte words by lane 0. */
__device__ static void ring_warp(const struct job *j, uint64_t pi, uint64_t lw, uint64_t r)
{
	unsigned lane = threadIdx.x & 31;
	volatile uint32_t *dbr = &j->q.dbrec[KN_SND_DBR];
	volatile uint64_t *reg = reg_of(j, r);
	uint32_t rec = kn_htobe32((uint32_t)(pi & 0xffff));
	if (j->conv == BF_DB) {
		if (lane < 8)
			st_sys64(reg + lane, lw); /* one store instruction, 64 bytes */
		fence_acq_rel_sys();
		__syncwarp();
		if (lane == 0) {
			st_sys32(dbr, rec);
			fence_sc_sys();
			st_sys64(reg, pi_word(j, pi));
		}
	} else if (j->conv == BF_WQE) {
		if (lane == 0) {
			st_rel_sys32(dbr, rec);
			fence_sc_sys();
		}
		__syncwarp();
		if (lane < 8)
			st_sys64(reg + lane, lw);
	} else if (lane == 0) {
		uint64_t last[8] = {lw};
		ring_thread(j, pi, last, r);
	}
	__syncwarp();
}

/* ---- completions -------------------------------------------------------- */

/* Consumes the CQEs that are there from CQE d on (the owner bit alone says
 * which are; the CQ doorbell record is never written); returns the next. */
__device__ static uint64_t poll_cq(const struct job *j, uint64_t d)
{
	uint32_t cnt = j->q.cq_cqe_cnt;
	for (;;) {
		const volatile uint8_t *c = j->q.cq + (d & (cnt - 1)) * KN_CQE_SIZE;
		uint64_t tail = ld_sys64(c + 56); /* qpn, wqe_counter, signature, op_own */
		if (((tail >> 56) & 1) != ((d / cnt) & 1))
			return d;
		fence_acq_rel_sys(); /* the CQE's other bytes after its owner bit */
		tail = ld_sys64(c + 56);
		uint8_t own = (uint8_t)(tail >> 56);
		if ((own >> 4) != KN_CQE_REQ) {
			uint64_t e = ld_sys64(c + 48); /* byte 54 vendor syndrome, 55 syndrome */
			fail(j, __LINE__, F_CQE_ERR, d,
			     (uint64_t)own << 16 | (e >> 56) << 8 | ((e >> 48) & 0xff));
			return d;
		}
		uint16_t wc = kn_be16toh((uint16_t)(tail >> 32));
		if (wc != (uint16_t)d) {
			fail(j, __LINE__, F_CQE_IDX, d, wc);
			return d;
		}
		d++;
	}
}

/* One consumer (thread or warp leader): waits until WQE i's slot is free
 * (the CQE of the WQE one lap before it consumed). 0 on failure. */
__device__ static int wait_room(const struct job *j, uint64_t i, uint64_t *done)
{
	uint32_t cnt = j->q.sq_wqe_cnt;
	uint64_t t0 = gpu_now();
	while (i >= cnt && *done <= i - cnt) {
		uint64_t d = poll_cq(j, *done);
		if (failed(j))
			return 0;
		if (d != *done)
			t0 = gpu_now();
		else if (gpu_now() - t0 > WAIT_NS) {
			fail(j, __LINE__, F_ROOM, i, *done);
			return 0;
		}
		*done = d;
	}
	return 1;
}

/* One consumer: every CQE up to n (none after a failure); the count goes
 * to the shared state either way. */
__device__ static void wait_all(const struct job *j, uint64_t done)
{
	uint64_t t0 = gpu_now();
	while (done < j->n && !failed(j)) {
		uint64_t d = poll_cq(j, done);
		if (d != done)
			t0 = gpu_now();
		else if (gpu_now() - t0 > WAIT_NS) {
			fail(j, __LINE__, F_DONE, done, j->n);
			break;
		}
		done = d;
	}
	st_rel64(&j->sh->done, done);
}

/* Many consumers: whoever gets the poll lock consumes what is there. */
__device__ static void grid_poll(const struct job *j)
{
	struct shared *sh = j->sh;
	if (!try_lock(&sh->poll_lock))
		return;
	uint64_t d = ld_acq64(&sh->done);
	st_rel64(&sh->done, poll_cq(j, d));
	unlock(&sh->poll_lock);
}

/* ---- producers ---------------------------------------------------------- */

__global__ void thread_kernel(struct job j)
{
	uint64_t done = 0;
	for (uint64_t i = 0; i < j.n; i++) {
		if (!wait_room(&j, i, &done))
			break;
		uint64_t w[8];
		volatile uint64_t *s = slot_of(&j, i);
		for (int k = 0; k < 8; k++) {
			w[k] = wqe_word(&j, i, k);
			st_sys64(s + k, w[k]);
		}
		ring_thread(&j, i + 1, w, i);
	}
	wait_all(&j, done);
}

/* One warp. 8-byte conventions: rounds of four WQEs, lanes 8g..8g+7 write
 * the words of WQE base + g, lane 0 rings once per round with the last
 * WQE's ctrl word (shuffled to it). BlueFlame: rounds of one WQE, lanes 0..7
 * write it to the SQ, then to the register. */
__global__ void warp_kernel(struct job j)
{
	unsigned lane = threadIdx.x & 31;
	uint64_t per = j.conv == BF_DB || j.conv == BF_WQE ? 1 : 4;
	uint64_t done = 0, r = 0;
	for (uint64_t base = 0; base < j.n; base += per, r++) {
		uint64_t end = base + per < j.n ? base + per : j.n;
		int ok = 1;
		if (lane == 0)
			ok = wait_room(&j, end - 1, &done);
		if (!__shfl_sync(0xffffffffu, ok, 0))
			break;
		uint64_t i = base + lane / 8;
		uint64_t w = 0;
		if (i < end) {
			w = wqe_word(&j, i, (int)(lane & 7));
			st_sys64(slot_of(&j, i) + (lane & 7), w);
		}
		fence_acq_rel_sys(); /* every lane: its words before any doorbell */
		__syncwarp();
		uint64_t g = end - 1 - base;
		uint64_t lw = __shfl_sync(0xffffffffu, w, (int)(g * 8 + (lane & 7)));
		ring_warp(&j, end, lw, r);
	}
	if (lane == 0)
		wait_all(&j, done);
}

/* Threads of a grid on one QP: a ticket each, the slot's previous CQE
 * consumed (whoever holds the poll lock polls), the WQE written, published
 * in ticket order; then either the ring lock (ring whatever is published
 * and not rung yet) or, ticket mode, a ring of its own before the next
 * ticket may publish. */
__global__ void grid_kernel(struct job j, int ticket)
{
	struct shared *sh = j.sh;
	uint32_t cnt = j.q.sq_wqe_cnt;
	for (;;) {
		uint64_t i = atomicAdd(&sh->resv, 1ull);
		if (i >= j.n)
			break;
		uint64_t t0 = gpu_now();
		while (i >= cnt && ld_acq64(&sh->done) <= i - cnt) {
			grid_poll(&j);
			if (failed(&j))
				return;
			if (gpu_now() - t0 > WAIT_NS) {
				fail(&j, __LINE__, F_ROOM, i, ld_acq64(&sh->done));
				return;
			}
		}
		uint64_t w[8];
		volatile uint64_t *s = slot_of(&j, i);
		for (int k = 0; k < 8; k++) {
			w[k] = wqe_word(&j, i, k);
			st_sys64(s + k, w[k]);
		}
		fence_acq_rel_sys(); /* its WQE, whoever rings it */
		t0 = gpu_now();
		while (ld_acq64(&sh->ready) != i) {
			if (failed(&j))
				return;
			if (gpu_now() - t0 > WAIT_NS) {
				fail(&j, __LINE__, F_TURN, i, ld_acq64(&sh->ready));
				return;
			}
		}
		if (ticket) {
			ring_thread(&j, i + 1, w, i);
			st_rel64(&sh->ready, i + 1);
			continue;
		}
		st_rel64(&sh->ready, i + 1);
		t0 = gpu_now();
		while (!try_lock(&sh->ring_lock)) {
			if (failed(&j))
				return;
			if (gpu_now() - t0 > WAIT_NS) {
				fail(&j, __LINE__, F_LOCK, i, ld_acq64(&sh->rung));
				return;
			}
		}
		volatile unsigned long long *rung = &sh->rung, *rings = &sh->rings;
		uint64_t rd = ld_acq64(&sh->ready);
		if (rd > *rung) {
			uint64_t last[8];
			for (int k = 0; k < 8; k++)
				last[k] = wqe_word(&j, rd - 1, k);
			ring_thread(&j, rd, last, *rings);
			*rings = *rings + 1;
			*rung = rd;
		}
		unlock(&sh->ring_lock);
	}
	uint64_t t0 = gpu_now(), d0 = ld_acq64(&sh->done);
	for (;;) {
		uint64_t d = ld_acq64(&sh->done);
		if (d >= j.n || failed(&j))
			return;
		if (d != d0) {
			d0 = d;
			t0 = gpu_now();
		} else if (gpu_now() - t0 > WAIT_NS) {
			fail(&j, __LINE__, F_DONE, d, j.n);
			return;
		}
		grid_poll(&j);
	}
}

/* ---- host side ------------------------------------------------------------ */

/* Backend of the runs: soft, or mlx5 over the double (the test sets
 * KINET_MLX5_EMULATE=1 and the queue kind before its first kinet call). */
static int g_mlx5;

/* The double's module, as libkinet loaded it: its path among the loaded
 * objects (dl_iterate_phdr), then dlopen without loading anything new. */
#if KINET_HAVE_RDMA_HEADERS
static int find_emu(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	const char *name = info->dlpi_name;
	const char *slash = name ? strrchr(name, '/') : NULL;
	if (slash && !strcmp(slash + 1, KINET_MLX5EMU_MODULE)) {
		*(const char **)arg = name;
		return 1;
	}
	return 0;
}

static void *emu_sym(const char *sym)
{
	const char *path = NULL;
	dl_iterate_phdr(find_emu, &path);
	cr_assert_not_null(path, "%s is not loaded", KINET_MLX5EMU_MODULE);
	void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	cr_assert_not_null(h, "%s: %s", path, dlerror());
	void *f = dlsym(h, sym);
	cr_assert_not_null(f, "%s: no %s", path, sym);
	dlclose(h);
	return f;
}

static unsigned emu_calls(const char *name)
{
	unsigned (*f)(const char *) = (unsigned (*)(const char *))emu_sym("kinet_mlx5_emu_calls");
	return f(name);
}
#endif

/* What the NIC counted (the software NIC behind the double on mlx5). */
static void nic_counters(kinet_ctx *ctx, struct kinet_counters *c)
{
	memset(c, 0, sizeof(*c));
	if (!g_mlx5) {
		cr_assert_eq(kinet_ctx_counters(ctx, c), 0);
		return;
	}
#if KINET_HAVE_RDMA_HEADERS
	int (*f)(int, struct kinet_counters *) =
		(int (*)(int, struct kinet_counters *))emu_sym("kinet_mlx5_emu_counters");
	cr_assert_eq(f(0, c), 0);
#endif
}

struct prod {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *a, *b;
	struct gu_buf src, dst;
	struct job j;
	char what[160];
};

static void prod_open(struct prod *p, enum conv conv, int scope, int gpu_mem, int alt,
		      uint64_t n)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->what, sizeof(p->what), "%s, %s, %s payloads, %s, %s", conv_name[conv],
		 scope_name[scope], gpu_mem ? "GPU" : "host",
		 alt ? "two registers" : "one register",
		 g_mlx5 ? "mlx5 over the double" : "software NIC");
	cr_assert_eq(kinet_cuda_available(), 1, "no usable GPU");
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = g_mlx5 ? KINET_BACKEND_MLX5 : KINET_BACKEND_SOFT;
	int rc = kinet_open(&ca, &p->ctx);
	cr_assert_eq(rc, 0, "%s: kinet_open: %s", p->what, kinet_strerror(rc));
	cr_assert_eq(kinet_pd_alloc(p->ctx, &p->pd), 0);
	struct kinet_qp_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.sq_depth = DEPTH;
	qa.db_mode = KN_DB_GPU; /* the producer rings; kinet's proxy never does */
	qa.cq_flags = KINET_CQ_OVERRUN_IGNORE;
	rc = kinet_qp_create(p->pd, &qa, &p->a);
	cr_assert_eq(rc, 0, "%s: kinet_qp_create: %s", p->what, kinet_strerror(rc));
	cr_assert_eq(kinet_cq_flags(kinet_qp_send_cq(p->a)), KINET_CQ_OVERRUN_IGNORE);
	qa.cq_flags = 0;
	rc = kinet_qp_create(p->pd, &qa, &p->b);
	cr_assert_eq(rc, 0, "%s: kinet_qp_create: %s", p->what, kinet_strerror(rc));
	rc = kinet_qp_connect_local(p->a, p->b);
	cr_assert_eq(rc, 0, "%s: kinet_qp_connect_local: %s", p->what, kinet_strerror(rc));
	kn_qp *dq;
	rc = kinet_qp_device_cuda(p->a, &dq);
	cr_assert_eq(rc, 0, "%s: kinet_qp_device_cuda: %s", p->what, kinet_strerror(rc));
	cr_assert_eq(kinet_qp_device_cuda_desc(p->a, &p->j.q), 0);
	cr_assert_eq(p->j.q.sq_wqe_cnt, DEPTH);
	cr_assert_eq(p->j.q.cq_cqe_cnt, DEPTH);
	if (alt && !p->j.q.bf_alt) {
		/* DevX queues for a GPU ring through a non-cached UAR, where kinet
		 * has no BlueFlame buffers to alternate: one register, rung as kinet
		 * rings it; every other QP offers two */
		const char *qs = getenv("KINET_MLX5_QUEUES");
		cr_assert(g_mlx5 && qs && !strcmp(qs, "devx"), "%s: the descriptor has one register",
			  p->what);
		alt = 0;
	}
	size_t len = (size_t)n * MSG;
	gu_buf_alloc(&p->src, p->pd, len, 1000 + (uint64_t)conv * 16 + (uint64_t)scope, !gpu_mem);
	gu_buf_alloc(&p->dst, p->pd, len + GUARD, 2000 + (uint64_t)conv * 16 + (uint64_t)scope,
		     !gpu_mem);
	p->j.conv = conv;
	p->j.alt = alt;
	p->j.n = n;
	p->j.src = (uint64_t)(uintptr_t)p->src.dev;
	p->j.dst = (uint64_t)(uintptr_t)p->dst.dev;
	p->j.lkey = kinet_mr_lkey(p->src.mr);
	p->j.rkey = kinet_mr_rkey(p->dst.mr);
	CU(cudaMalloc((void **)&p->j.sh, sizeof(struct shared)));
	CU(cudaMemset(p->j.sh, 0, sizeof(struct shared)));
}

/* After a failure: what the NIC sees of the QP (host view of the queues). */
static void prod_diag(struct prod *p, const struct shared *sh)
{
	kn_qp *h = NULL;
	kinet_qp_device(p->a, &h);
	struct kinet_counters c;
	nic_counters(p->ctx, &c);
	if (h) {
		uint64_t r0 = *(volatile uint64_t *)h->db;
		uint64_t r1 = h->bf_alt ? *(volatile uint64_t *)(h->db + h->bf_alt) : 0;
		const uint8_t *cqe = h->cq + (sh->done & (h->cq_cqe_cnt - 1)) * KN_CQE_SIZE;
		fprintf(stderr,
			"%s: qp 0x%x %s: dbr %u, registers 0x%016llx 0x%016llx, op_own of CQE %llu "
			"0x%02x\n",
			p->what, h->qpn, kinet_qp_state_str(kinet_qp_get_state(p->a)),
			kn_be32toh(h->dbrec[KN_SND_DBR]), (unsigned long long)kn_be64toh(r0),
			(unsigned long long)kn_be64toh(r1), (unsigned long long)sh->done,
			((const volatile uint8_t *)cqe)[63]);
	}
	fprintf(stderr,
		"%s: wqes %llu cqes %llu errors %llu doorbells %llu db_wqe_words %llu "
		"db_pi_words %llu db_foreign %llu dbr_only %llu bf_wqes %llu bf_mismatch %llu\n",
		p->what, (unsigned long long)c.wqes, (unsigned long long)c.cqes,
		(unsigned long long)c.errors, (unsigned long long)c.doorbells,
		(unsigned long long)c.db_wqe_words, (unsigned long long)c.db_pi_words,
		(unsigned long long)c.db_foreign, (unsigned long long)c.dbr_only,
		(unsigned long long)c.bf_wqes, (unsigned long long)c.bf_mismatch);
}

static const char *fail_str(int kind)
{
	switch (kind) {
	case F_ROOM:
		return "no room in the SQ: WQE idx waits for the CQE one lap before it "
		       "(CQEs consumed: seen)";
	case F_CQE_ERR:
		return "error CQE for WQE idx (seen: op_own << 16 | syndrome << 8 | vendor "
		       "syndrome)";
	case F_CQE_IDX:
		return "CQE idx names another WQE (seen: its wqe_counter)";
	case F_TURN:
		return "WQE idx: its turn to publish never came (seen: published up to)";
	case F_LOCK:
		return "WQE idx: the ring lock was never free (seen: producer index rung)";
	case F_DONE:
		return "all WQEs rung, CQE idx never came (seen: WQEs in all)";
	default:
		return "?";
	}
}

/* Runs one producer; returns what the NIC counted. */
static struct kinet_counters run(enum conv conv, int scope, int gpu_mem, int alt, uint64_t n)
{
	struct prod p;
	prod_open(&p, conv, scope, gpu_mem, alt, n);
	if (scope == S_THREAD)
		thread_kernel<<<1, 1>>>(p.j);
	else if (scope == S_WARP)
		warp_kernel<<<1, 32>>>(p.j);
	else
		grid_kernel<<<GRID_BLOCKS, GRID_THREADS>>>(p.j, scope == S_GRID_TICKET);
	CU_SYNC();
	struct shared sh;
	CU(cudaMemcpy(&sh, p.j.sh, sizeof(sh), cudaMemcpyDeviceToHost));
	if (sh.bad)
		prod_diag(&p, &sh);
	cr_assert_eq(sh.bad, 0, "%s: kernel line %d: %s; idx %llu, seen 0x%llx", p.what, sh.bad,
		     fail_str(sh.kind), sh.idx, sh.seen);
	cr_assert_eq(sh.done, n, "%s: %llu CQEs of %llu", p.what, sh.done, (unsigned long long)n);
	size_t len = (size_t)n * MSG;
	uint8_t *back = (uint8_t *)malloc(len + GUARD);
	cr_assert_not_null(back);
	gu_buf_read(&p.dst, back);
	long d = gu_diff(back, p.src.mirror, len);
	cr_assert_eq(d, -1, "%s: byte %ld (WQE %ld) differs from what was written", p.what, d,
		     d / (long)MSG);
	d = gu_diff(back + len, p.dst.mirror + len, GUARD);
	cr_assert_eq(d, -1, "%s: byte %ld past the last message was written", p.what, d);
	free(back);
	struct kinet_counters c;
	nic_counters(p.ctx, &c);
	CU(cudaFree(p.j.sh));
	cr_assert_eq(kinet_qp_device_cuda_release(p.a), 0);
	cr_assert_eq(kinet_qp_destroy(p.a), 0);
	cr_assert_eq(kinet_qp_destroy(p.b), 0);
	gu_buf_free(&p.src);
	gu_buf_free(&p.dst);
	cr_assert_eq(kinet_pd_free(p.pd), 0);
	cr_assert_eq(kinet_close(p.ctx), 0);

	/* what the counters must say of this convention */
	cr_assert_eq(c.errors, 0, "%s", p.what);
	cr_assert_eq(c.wqes, n, "%s: %llu WQEs ran", p.what, (unsigned long long)c.wqes);
	cr_assert_eq(c.db_foreign, 0, "%s", p.what);
	switch (conv) {
	case RDMA_CORE:
		cr_assert_gt(c.db_wqe_words, 0, "%s: no last-WQE word seen", p.what);
		cr_assert_eq(c.db_pi_words, 0, "%s", p.what);
		cr_assert_eq(c.bf_wqes + c.bf_mismatch, 0, "%s: a BlueFlame copy?", p.what);
		break;
	case VERBS_DB:
		cr_assert_gt(c.db_pi_words, 0, "%s: no producer-index word seen", p.what);
		cr_assert_eq(c.db_wqe_words, 0, "%s", p.what);
		cr_assert_eq(c.bf_wqes + c.bf_mismatch, 0, "%s: a BlueFlame copy?", p.what);
		break;
	case NO_DBR:
		cr_assert_gt(c.db_pi_words, 0, "%s: no producer-index word seen", p.what);
		cr_assert_eq(c.db_wqe_words, 0, "%s", p.what);
		cr_assert_eq(c.dbr_only, 0, "%s: a record that never moved rang", p.what);
		cr_assert_eq(c.bf_wqes + c.bf_mismatch, 0, "%s: a BlueFlame copy?", p.what);
		break;
	case BF_DB: /* until the word lands, the register's first word is the ctrl
		     * word of the body: the NIC may take it as a last-WQE word */
		cr_assert_gt(c.db_pi_words, 0, "%s: no producer-index word seen", p.what);
		cr_assert_leq(c.bf_wqes + c.bf_mismatch, n, "%s", p.what);
		break;
	case BF_WQE:
		cr_assert_gt(c.db_wqe_words, 0, "%s: no ctrl word seen", p.what);
		cr_assert_eq(c.db_pi_words, 0, "%s", p.what);
		cr_assert_leq(c.bf_wqes + c.bf_mismatch, n, "%s", p.what);
		break;
	default: /* DBR_ONLY */
		cr_assert_eq(c.doorbells, 0, "%s: a register was written", p.what);
		cr_assert_eq(c.db_wqe_words + c.db_pi_words, 0, "%s", p.what);
		cr_assert_gt(c.dbr_only, 0, "%s: never found through the record", p.what);
		cr_assert_eq(c.bf_wqes + c.bf_mismatch, 0, "%s", p.what);
		break;
	}
	return c;
}

#define LAPS (gu_quick() ? 20u : 200u)
#define N ((uint64_t)DEPTH * LAPS)

/* Every producer of a convention: each scope with payloads in host and in
 * GPU memory, one register or both (each scope and each memory gets both).
 * Returns the BlueFlame copies taken over all of them: a copy is taken only
 * when the NIC reaches the WQE after the register was written, which a fast
 * engine may not do in a given run, but does over these (the GPU-memory
 * runs' staged copies keep the SQ full). */
static uint64_t every_producer(enum conv conv, uint64_t *mismatch)
{
	uint64_t bf = 0, bad = 0;
	for (int s = 0; s < NSCOPE; s++)
		for (int gpu = 0; gpu < 2; gpu++) {
			struct kinet_counters c = run(conv, s, gpu, (s + gpu) & 1, N);
			bf += c.bf_wqes;
			bad += c.bf_mismatch;
		}
	if (mismatch)
		*mismatch = bad;
	return bf;
}

Test(gpu_producers, rdma_core_last_wqe_word, .timeout = 120)
{
	every_producer(RDMA_CORE, NULL);
}

Test(gpu_producers, verbs_producer_index_word, .timeout = 120)
{
	every_producer(VERBS_DB, NULL);
}

/* No doorbell record ever, also through the 16-bit wrap of the index. */
Test(gpu_producers, no_doorbell_record, .timeout = 120)
{
	every_producer(NO_DBR, NULL);
	uint64_t n = gu_quick() ? 4 * DEPTH * 20 : 70000;
	run(NO_DBR, S_THREAD, 0, 0, n);
	run(NO_DBR, S_WARP, 0, 1, n);
}

/* Is the GPU engine asked for (the suite's .geng variant)? */
static int geng_on(void)
{
	const char *v = getenv("KINET_GPU_ENGINE");
	return v && !strcmp(v, "on");
}

/* BlueFlame, then the record, then a producer-index word over the ctrl
 * word: the body stays usable (the data check says no torn copy ran). */
Test(gpu_producers, blueflame_then_doorbell_word, .timeout = 120)
{
	uint64_t bad, bf = every_producer(BF_DB, &bad);
	/* the GPU engine executes every WQE from the SQ (KINET_GPU_ENGINE=on,
	 * the .geng variant): no register copy is taken there */
	if (!geng_on())
		cr_assert_gt(bf, 0, "the register copies were never used (%llu refused)",
			     (unsigned long long)bad);
}

/* The whole WQE into the register after the record, ctrl word first. */
Test(gpu_producers, blueflame_whole_wqe, .timeout = 120)
{
	uint64_t bad, bf = every_producer(BF_WQE, &bad);
	/* the GPU engine executes every WQE from the SQ (KINET_GPU_ENGINE=on,
	 * the .geng variant): no register copy is taken there */
	if (!geng_on())
		cr_assert_gt(bf, 0, "the register copies were never used (%llu refused)",
			     (unsigned long long)bad);
}

Test(gpu_producers, doorbell_record_only, .timeout = 120)
{
	every_producer(DBR_ONLY, NULL);
}

#if KINET_HAVE_RDMA_HEADERS
/* The producers on the mlx5 backend over the double, with the real GPU:
 * every convention that rings a register (hardware needs one), each scope
 * once, host and GPU payloads in turn. */
static void on_mlx5(const char *queues)
{
	setenv("KINET_MLX5_EMULATE", "1", 1);
	setenv("KINET_MLX5_QUEUES", queues, 1);
	g_mlx5 = 1;
	static const enum conv convs[] = {RDMA_CORE, VERBS_DB, NO_DBR, BF_DB, BF_WQE};
	uint64_t bf = 0;
	for (unsigned k = 0; k < sizeof(convs) / sizeof(convs[0]); k++)
		for (int s = 0; s < NSCOPE; s++) {
			struct kinet_counters c =
				run(convs[k], s, (int)(k + (unsigned)s) & 1, s & 1, N);
			if (convs[k] == BF_DB || convs[k] == BF_WQE)
				bf += c.bf_wqes;
		}
	cr_assert_gt(bf, 0, "the register copies were never used");
	if (!strcmp(queues, "devx")) {
		cr_assert_gt(emu_calls("devx_obj_create"), 0, "the queues were not DevX objects");
	} else {
		cr_assert_eq(emu_calls("devx_obj_create"), 0, "DevX queues, not verbs");
		cr_assert_gt(emu_calls("create_cq_ex"), 0,
			     "the overrun-ignore CQ did not come from ibv_create_cq_ex");
	}
}

Test(gpu_producers, mlx5_verbs_queues, .timeout = 300) { on_mlx5("verbs"); }
Test(gpu_producers, mlx5_devx_queues, .timeout = 300) { on_mlx5("devx"); }
#endif

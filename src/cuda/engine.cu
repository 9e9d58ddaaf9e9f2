/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.cu - the software NIC's GPU engine: one block of persistent warps
 * that serves the QPs handed to it (src/nic/soft/geng.h has the protocol),
 * with the rules the CPU engine uses (src/nic/soft/rules.h): the same WQE
 * decoding, key, PD, access and bounds checks. A WQE it does not execute
 * (a failed check, an opcode it leaves to the CPU) goes back to the CPU
 * engine untouched, which executes it with the same rules and writes its
 * CQE: error CQEs and flushes come from one place.
 *
 * Warp w serves slots w, w + W, ...; its lane 0 reads doorbells, decodes
 * and checks, the whole warp moves the payload (SM loads and stores, 16
 * bytes per lane where both sides are aligned).
 */
#include <kinet/prm.h>
#include "nic/soft/rules.h"
#include "nic/soft/geng.h"
#include "cuda_priv.h"

#define GW_MAX 8       /* warps per block at most */
#define KEYC 4         /* key entries cached per slot (per take) */

struct gslot {
	struct kn_geng_slot s;   /* the slot as loaded at the take, then the live state */
	uint32_t gen;
	uint32_t active;
	uint32_t nkc;
	uint32_t cq_ci;            /* the CQ consumer's index as last read */
	struct kn_keyent kc[KEYC]; /* entries looked up since the take (views do not
				    * change while the slot is taken) */
	uint32_t kcside[KEYC];     /* 0 own view, 1 peer's */
};

struct gwarp {
	uint8_t wqe[KN_MAX_WQE_BBS * KN_SEND_WQE_BB];
	struct kn_rule_wqe d;
	uint64_t lg[KN_RULE_MAX_SGE]; /* local segments: the GPU's addresses */
	uint64_t rg;                  /* remote: the GPU's address */
	uint32_t decision;            /* 0 execute, else enum kn_geng_why */
	uint32_t target_host;
};

__device__ static inline uint32_t ld32(const volatile void *p)
{
	return *(const volatile uint32_t *)p;
}
__device__ static inline uint64_t ld64(const volatile void *p)
{
	return *(const volatile uint64_t *)p;
}
__device__ static inline uint64_t now_ns(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* A key through the slot's cache (lane 0). */
__device__ static uint32_t key_check(struct gslot *g, int side, uint32_t key, uint64_t addr,
				     uint64_t len, unsigned access, uint64_t *gaddr, int *kind)
{
	const struct kn_keyent *e = NULL;
	for (uint32_t i = 0; i < g->nkc; i++)
		if (g->kcside[i] == (uint32_t)side && g->kc[i].key == key) {
			e = &g->kc[i];
			break;
		}
	const struct kn_keyent *view = (const struct kn_keyent *)(side ? g->s.peer_keys : g->s.keys);
	uint32_t cap = side ? g->s.peer_keys_cap : g->s.keys_cap;
	uint64_t pd = side ? g->s.peer_pd : g->s.pd;
	if (!e) {
		uint32_t i = key >> 8;
		if (!i || i >= cap)
			return KINET_REASON_UNKNOWN_KEY;
		struct kn_keyent tmp;
		const volatile uint64_t *src = (const volatile uint64_t *)&view[i];
		uint64_t *dst = (uint64_t *)&tmp;
		for (unsigned w = 0; w < sizeof(tmp) / 8; w++)
			dst[w] = src[w];
		uint32_t slot = g->nkc < KEYC ? g->nkc++ : (key & (KEYC - 1));
		g->kc[slot] = tmp;
		g->kcside[slot] = (uint32_t)side;
		e = &g->kc[slot];
	}
	uint32_t why = kn_rule_keyent(e, pd, key, addr, len, access, gaddr); /* the shared rule */
	*kind = e->kind;
	return why;
}

/* Copies n bytes with the warp. */
__device__ static void wcopy(uint64_t dst, uint64_t src, uint64_t n, unsigned lane)
{
	if (((dst | src) & 15) == 0) {
		uint64_t nv = n / 16;
		uint4 *d = (uint4 *)dst;
		const uint4 *s = (const uint4 *)src;
		for (uint64_t i = lane; i < nv; i += 32)
			d[i] = s[i];
		for (uint64_t i = nv * 16 + lane; i < n; i += 32)
			((uint8_t *)dst)[i] = ((const uint8_t *)src)[i];
	} else if (((dst | src) & 7) == 0) {
		uint64_t nv = n / 8;
		for (uint64_t i = lane; i < nv; i += 32)
			((uint64_t *)dst)[i] = ((const uint64_t *)src)[i];
		for (uint64_t i = nv * 8 + lane; i < n; i += 32)
			((uint8_t *)dst)[i] = ((const uint8_t *)src)[i];
	} else {
		for (uint64_t i = lane; i < n; i += 32)
			((uint8_t *)dst)[i] = ((const uint8_t *)src)[i];
	}
}

/* Hands a slot back (lane 0): the live state into the slot, then own. */
__device__ static void give_back(struct kn_geng_ctl *ctl, int i, struct gslot *g, uint32_t why)
{
	struct kn_geng_slot *h = &ctl->slot[i];
	if (g->active) {
		h->sq_ci = g->s.sq_ci;
		h->cq_pi = g->s.cq_pi;
		h->last_ctrl = g->s.last_ctrl;
		h->last_db_word[0] = g->s.last_db_word[0];
		h->last_db_word[1] = g->s.last_db_word[1];
		h->dbr_seen = g->s.dbr_seen;
		h->dbr_target = g->s.dbr_target;
		h->db_target = g->s.db_target;
		h->n_wqes = g->s.n_wqes;
		h->n_bytes = g->s.n_bytes;
		h->n_cqes = g->s.n_cqes;
		h->n_doorbells = g->s.n_doorbells;
		h->n_db_wqe = g->s.n_db_wqe;
		h->n_db_pi = g->s.n_db_pi;
		h->n_db_foreign = g->s.n_db_foreign;
		h->n_dbr_only = g->s.n_dbr_only;
		h->sq_ci_pub = g->s.sq_ci;
	}
	h->why = why;
	__threadfence_system();
	h->own = KN_GOWN_BACK;
	__threadfence_system();
	g->active = 0;
}

/* Doorbells (lane 0): WQEBBs published beyond the consumer, from the
 * doorbell record dbr and the register words w0, w1 (read side by side by
 * three lanes: one round trip over PCIe). */
__device__ static uint32_t published(struct gslot *g, uint32_t dbr, uint64_t w0, uint64_t w1)
{
	struct kn_geng_slot *s = &g->s;
	uint16_t ci = (uint16_t)s->sq_ci;
	for (uint32_t b = 0; b < s->nregs; b++) {
		uint64_t w = b ? w1 : w0;
		if (w == s->last_db_word[b])
			continue;
		s->last_db_word[b] = w;
		s->n_doorbells++;
		uint16_t p;
		int k = kn_rule_db_word(w, s->qpn, &p);
		if (k < 0)
			s->n_db_foreign++;
		else if (k == 0)
			s->n_db_pi++;
		else
			s->n_db_wqe++;
		if (k == 0 || (k == 1 && w != s->last_ctrl))
			s->db_target = kn_rule_db_offer(s->db_target, ci, p, s->sq_cnt);
	}
	if (dbr != s->dbr_seen) {
		s->dbr_seen = dbr;
		s->dbr_target = (uint16_t)kn_be32toh(dbr) | 0x10000u;
	}
	uint32_t a = kn_rule_db_avail(&s->dbr_target, ci, s->sq_cnt);
	uint32_t b = kn_rule_db_avail(&s->db_target, ci, s->sq_cnt);
	if (a > b)
		s->n_dbr_only++; /* found through the record alone */
	return a > b ? a : b;
}

/* Decodes and checks the WQE in w->wqe (lane 0): sets w->decision. */
__device__ static void plan(struct gslot *g, struct gwarp *w, uint32_t avail)
{
	struct kn_rule_wqe *d = &w->d;
	w->decision = KN_GWHY_ERROR;
	if (d->nbb > avail)
		return;
	if (kn_rule_decode(w->wqe, (uint16_t)g->s.sq_ci, g->s.qpn, d))
		return; /* the CPU engine writes its error CQE */
	switch (d->opcode) {
	case KN_OPCODE_NOP:
	case KN_OPCODE_RDMA_WRITE:
	case KN_OPCODE_RDMA_READ:
	case KN_OPCODE_ATOMIC_CS:
	case KN_OPCODE_ATOMIC_FA:
		break;
	default:
		w->decision = KN_GWHY_OP;
		return;
	}
	int kind;
	for (uint32_t i = 0; i < d->nseg; i++) {
		const struct kn_rule_seg *s = &d->seg[i];
		if (s->inl) {
			w->lg[i] = (uint64_t)(uintptr_t)(w->wqe + s->inl);
			continue;
		}
		if (s->len == 0) {
			w->lg[i] = 0;
			continue;
		}
		if (key_check(g, 0, s->lkey, s->addr, s->len, d->access, &w->lg[i], &kind))
			return;
		if (!w->lg[i]) {
			w->decision = KN_GWHY_HOST_MEM;
			return;
		}
	}
	if (d->opcode != KN_OPCODE_NOP) {
		bool atomic = d->opcode == KN_OPCODE_ATOMIC_CS || d->opcode == KN_OPCODE_ATOMIC_FA;
		uint64_t len = atomic ? 8 : d->total;
		if (atomic && (d->raddr & 7))
			return;
		if (len == 0) {
			w->rg = 0;
		} else {
			if (key_check(g, 1, d->rkey, d->raddr, len, kn_rule_remote_access(d->opcode),
				      &w->rg, &kind))
				return;
			if (!w->rg) {
				w->decision = KN_GWHY_HOST_MEM;
				return;
			}
			if (atomic && kind != 1 /* KINET_MEM_CUDA */) {
				w->decision = KN_GWHY_HOST_ATOMIC;
				return;
			}
		}
	}
	w->decision = 0;
}

/* Executes the planned WQE with the warp. */
__device__ static void execute(struct gwarp *w, unsigned lane)
{
	struct kn_rule_wqe *d = &w->d;
	switch (d->opcode) {
	case KN_OPCODE_RDMA_WRITE: {
		uint64_t off = 0;
		for (uint32_t i = 0; i < d->nseg; i++) {
			wcopy(w->rg + off, w->lg[i], d->seg[i].len, lane);
			off += d->seg[i].len;
		}
		break;
	}
	case KN_OPCODE_RDMA_READ: {
		uint64_t off = 0;
		for (uint32_t i = 0; i < d->nseg; i++) {
			wcopy(w->lg[i], w->rg + off, d->seg[i].len, lane);
			off += d->seg[i].len;
		}
		break;
	}
	case KN_OPCODE_ATOMIC_CS:
	case KN_OPCODE_ATOMIC_FA:
		if (lane == 0) {
			unsigned long long *t = (unsigned long long *)w->rg;
			unsigned long long old =
				d->opcode == KN_OPCODE_ATOMIC_FA
					? atomicAdd(t, (unsigned long long)d->swap_add)
					: atomicCAS(t, (unsigned long long)d->compare,
						    (unsigned long long)d->swap_add);
			uint64_t be = kn_htobe64(old); /* the NIC returns big-endian */
			const uint8_t *b = (const uint8_t *)&be;
			uint64_t off = 0;
			for (uint32_t i = 0; i < d->nseg; i++)
				for (uint64_t k = 0; k < d->seg[i].len && off < 8; k++)
					((uint8_t *)w->lg[i])[k] = b[off++];
		}
		break;
	default:
		break;
	}
}

/* The success CQE of the WQE just executed (lane 0). */
__device__ static void write_cqe(struct kn_geng_slot *s, const struct kn_rule_wqe *d)
{
	uint64_t idx = s->cq_pi++;
	uint32_t cnt = s->cq_cnt;
	struct kn_cqe64 c;
	uint64_t *cw = (uint64_t *)&c;
	for (int k = 0; k < 8; k++)
		cw[k] = 0;
	c.byte_cnt = kn_htobe32((uint32_t)d->total);
	c.sop_drop_qpn = kn_htobe32(((uint32_t)d->opcode << 24) | s->qpn);
	c.wqe_counter = kn_htobe16(d->wqe_idx);
	c.op_own = (uint8_t)((KN_CQE_REQ << 4) | ((idx / cnt) & 1));
	volatile uint64_t *dst = (volatile uint64_t *)(s->cq + (idx & (cnt - 1)) * KN_CQE_SIZE);
	for (int k = 0; k < 7; k++)
		dst[k] = cw[k];
	__threadfence_system();
	dst[7] = cw[7]; /* op_own last */
	s->n_cqes++;
}

/* One pass over slot i (the whole warp): the amount of work done. */
__device__ static int serve(struct kn_geng_ctl *ctl, int i, struct gslot *g, struct gwarp *w,
			    unsigned lane)
{
	uint64_t v = 0;
	if (lane == 0)
		v = ld32((const volatile uint32_t *)g->s.dbrec + KN_SND_DBR);
	else if (lane == 1)
		v = ld64((const volatile uint64_t *)g->s.db0);
	else if (lane == 2 && g->s.nregs > 1)
		v = ld64((const volatile uint64_t *)g->s.db1);
	uint64_t w0 = __shfl_sync(0xffffffffu, v, 1), w1 = __shfl_sync(0xffffffffu, v, 2);
	uint32_t avail = 0;
	if (lane == 0)
		avail = published(g, (uint32_t)v, w0, w1);
	avail = __shfl_sync(0xffffffffu, avail, 0);
	int work = 0;
	for (int n = 0; n < KN_GENG_BURST && avail; n++) {
		uint32_t go = 1;
		if (lane == 0 && !g->s.cq_ignore_overrun &&
		    (((uint32_t)g->s.cq_pi - g->cq_ci) & 0xffffff) >= g->s.cq_cnt) {
			/* full as last seen: read the consumer's index again (only
			 * then: a round trip over PCIe) */
			g->cq_ci = kn_be32toh(ld32((const volatile uint32_t *)g->s.cq_dbrec)) & 0xffffff;
			if ((((uint32_t)g->s.cq_pi - g->cq_ci) & 0xffffff) >= g->s.cq_cnt)
				go = 0; /* the CQ is full: wait for the consumer */
		}
		if (!__shfl_sync(0xffffffffu, go, 0))
			break;
		__threadfence_system(); /* the WQE after the doorbell that published it */
		uint32_t mask = g->s.sq_cnt - 1;
		/* the first WQEBB, 8 bytes a lane */
		if (lane < 8)
			((uint64_t *)w->wqe)[lane] = ld64((const volatile uint64_t *)(
				g->s.sq + (g->s.sq_ci & mask) * KN_SEND_WQE_BB) + lane);
		__syncwarp();
		uint32_t nbb = 0;
		if (lane == 0) {
			kn_rule_ctrl(w->wqe, &w->d);
			nbb = w->d.nbb <= avail ? w->d.nbb : 0;
		}
		nbb = __shfl_sync(0xffffffffu, nbb, 0);
		for (uint32_t k = lane + 8; k < nbb * 8; k += 32)
			((uint64_t *)w->wqe)[k] = ld64((const volatile uint64_t *)(
				g->s.sq + ((g->s.sq_ci + k / 8) & mask) * KN_SEND_WQE_BB) + (k & 7));
		__syncwarp();
		if (lane == 0)
			plan(g, w, avail);
		__syncwarp();
		uint32_t dec = w->decision;
		if (dec) {
			if (lane == 0)
				give_back(ctl, i, g, dec);
			__syncwarp();
			return work + 1;
		}
		execute(w, lane);
		__threadfence_system(); /* the payload before the CQE */
		__syncwarp();
		if (lane == 0) {
			if (w->d.signaled)
				write_cqe(&g->s, &w->d);
			g->s.last_ctrl = ((const uint64_t *)w->wqe)[0];
			g->s.sq_ci += w->d.nbb;
			g->s.n_wqes++;
			g->s.n_bytes += w->d.total;
		}
		__syncwarp();
		avail -= w->d.nbb;
		work++;
	}
	if (lane == 0 && work)
		ctl->slot[i].sq_ci_pub = g->s.sq_ci;
	return work;
}

/* The slots' kernel-side state: global memory (one kernel runs at a time). */
static __device__ struct gslot g_gs[KN_GENG_SLOTS];

/* Loads a slot the CPU just handed over (lane 0). A slot stays loaded
 * (active) until this kernel gives it back: the CPU takes a slot only from
 * the kernel (STOP, then BACK), so an active slot was not taken again. */
__device__ static void load_slot(struct kn_geng_ctl *ctl, int i, struct gslot *g)
{
	if (g->active)
		return;
	__threadfence_system();
	uint32_t gen = ld32(&ctl->slot[i].gen);
	const volatile uint64_t *src = (const volatile uint64_t *)&ctl->slot[i];
	uint64_t *dst = (uint64_t *)&g->s;
	for (unsigned k = 0; k < sizeof(g->s) / 8; k++)
		dst[k] = src[k];
	g->gen = gen;
	g->active = 1;
	g->nkc = 0;
	g->cq_ci = kn_be32toh(ld32((const volatile uint32_t *)g->s.cq_dbrec)) & 0xffffff;
}

static __global__ void __launch_bounds__(GW_MAX * 32) kn_geng_kernel(struct kn_geng_ctl *ctl)
{
	__shared__ struct gwarp gw[GW_MAX];
	__shared__ int sh_work, sh_exit;
	unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32, nw = blockDim.x / 32;
	for (unsigned i = threadIdx.x; i < KN_GENG_SLOTS; i += blockDim.x)
		g_gs[i].active = 0;
	if (threadIdx.x == 0) {
		sh_work = 0;
		sh_exit = 0;
		ctl->running = 1;
		__threadfence_system();
	}
	__syncthreads();
	uint64_t last = now_ns();
	uint64_t idle_ns = (uint64_t)ctl->idle_us * 1000ull;
	uint32_t n = 0;
	for (uint32_t pass = 0;; pass++) {
		int work = 0;
		/* the slots in use, again every 16 passes (a read over PCIe) */
		if ((pass & 15) == 0) {
			n = ld32(&ctl->nslots);
			if (n > KN_GENG_SLOTS)
				n = KN_GENG_SLOTS;
		}
		/* slots in groups of 32, one group per warp at a time: every lane
		 * reads one slot's own word, in one round trip over PCIe */
		for (unsigned base = warp * 32; base < n; base += nw * 32) {
			unsigned i = base + lane;
			uint32_t own = i < n ? ld32(&ctl->slot[i].own) : (uint32_t)KN_GOWN_CPU;
			bool mine = own == KN_GOWN_GPU || own == KN_GOWN_STOP;
			if (!mine && i < n)
				g_gs[i].active = 0;
			unsigned m = __ballot_sync(0xffffffffu, mine);
			while (m) {
				unsigned l = __ffs(m) - 1;
				m &= m - 1;
				unsigned k = base + l;
				uint32_t ko = __shfl_sync(0xffffffffu, own, l);
				struct gslot *g = &g_gs[k];
				if (lane == 0) {
					load_slot(ctl, (int)k, g);
					if (ko == KN_GOWN_STOP)
						give_back(ctl, (int)k, g, KN_GWHY_ASKED);
				}
				__syncwarp();
				if (ko == KN_GOWN_STOP) {
					work++;
					continue;
				}
				work += serve(ctl, (int)k, g, &gw[warp], lane);
			}
		}
		if (lane == 0 && work)
			atomicAdd(&sh_work, work);
		__syncthreads();
		if (threadIdx.x == 0) {
			uint64_t t = now_ns();
			if (sh_work)
				last = t;
			sh_work = 0;
			sh_exit = t - last > idle_ns;
			if ((pass & 15) == 15) {
				/* the CPU's stop, every 16 passes (a read over PCIe) */
				ctl->passes = pass + 1;
				sh_exit |= ctl->stop != 0;
			}
		}
		__syncthreads();
		if (sh_exit)
			break;
	}
	/* exit: not running first, then every slot taken goes back (a take
	 * that raced with the exit sees running 0 and waits for this) */
	if (threadIdx.x == 0) {
		ctl->running = 0;
		__threadfence_system();
	}
	__syncthreads();
	for (unsigned i = threadIdx.x; i < KN_GENG_SLOTS; i += blockDim.x) {
		uint32_t own = ld32(&ctl->slot[i].own);
		if (own == KN_GOWN_GPU || own == KN_GOWN_STOP) {
			__threadfence_system();
			struct gslot *g = &g_gs[i];
			if (g->active && g->gen != ld32(&ctl->slot[i].gen))
				g->active = 0; /* taken again, never loaded: its state stands */
			give_back(ctl, (int)i, g, own == KN_GOWN_STOP ? KN_GWHY_ASKED : KN_GWHY_IDLE);
		}
	}
}

extern "C" cudaError_t kinet_cuda_launch_engine(void *ctl, unsigned warps, cudaStream_t s)
{
	if (warps < 1)
		warps = 1;
	if (warps > GW_MAX)
		warps = GW_MAX;
	kn_geng_kernel<<<1, warps * 32, 0, s>>>((struct kn_geng_ctl *)ctl);
	return cudaGetLastError();
}

extern "C" cudaError_t kinet_cuda_preload_engine(void)
{
	cudaFuncAttributes a;
	return cudaFuncGetAttributes(&a, kn_geng_kernel);
}

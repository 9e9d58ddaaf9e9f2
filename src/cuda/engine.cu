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
 * bytes per lane where both sides are aligned). The per-slot logic lives in
 * src/nic/soft/geng_exec.h, which the host executor (KINET_GPU_ENGINE=host,
 * src/nic/soft/geng_host.c) runs on a CPU thread: this file keeps the
 * block's structure (the warps, the sweep of the own words, the exit).
 */
#include <kinet/prm.h>
#include "nic/soft/geng_exec.h"
#include "cuda_priv.h"

#define GW_MAX 8       /* warps per block at most */

/* The slots' and warps' kernel-side state and the block's flags: global
 * memory (one kernel runs at a time), none of it shared memory. A block that
 * asks for shared memory cannot start on an SM whose split between L1 and
 * shared memory was set smaller by the application's resident blocks (the
 * split changes only on an idle SM), and the engine starts while the
 * application's kernels run. */
static __device__ struct kn_gx_slot g_gs[KN_GENG_SLOTS];
static __device__ struct kn_gx_warp g_gw[GW_MAX];
static __device__ int g_work, g_exit;

__device__ static inline uint64_t now_ns(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

static __global__ void __launch_bounds__(GW_MAX * 32) kn_geng_kernel(struct kn_geng_ctl *ctl)
{
	struct kn_gx_warp *gw = g_gw;
	volatile int *sh_work = &g_work, *sh_exit = &g_exit;
	unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32, nw = blockDim.x / 32;
	for (unsigned i = threadIdx.x; i < KN_GENG_SLOTS; i += blockDim.x)
		g_gs[i].active = 0;
	if (threadIdx.x == 0) {
		*sh_work = 0;
		*sh_exit = 0;
		ctl->running = 1;
		__threadfence_system();
	}
	__syncthreads();
	uint64_t last = now_ns();
	uint64_t idle_ns = (uint64_t)ctl->idle_us * 1000ull;
	uint32_t trace = ctl->trace; /* set before the launch */
	uint32_t n = 0;
	for (uint32_t pass = 0;; pass++) {
		int work = 0;
		/* the slots in use, again every 16 passes (a read over PCIe) */
		if ((pass & 15) == 0) {
			n = KN_GX_LD32(&ctl->nslots);
			if (n > KN_GENG_SLOTS)
				n = KN_GENG_SLOTS;
		}
		/* slots in groups of 32, one group per warp at a time: every lane
		 * reads one slot's own word, in one round trip over PCIe */
		for (unsigned base = warp * 32; base < n; base += nw * 32) {
			unsigned i = base + lane;
			/* every lane: its slot's own word and, where the slot is
			 * loaded, its doorbells, in the same round trip */
			struct kn_gx_db pre = {0, 0, 0};
			if (i < n && g_gs[i].active) {
				const struct kn_geng_slot *ls = &g_gs[i].s;
				pre.dbr = KN_GX_LD32((const uint32_t *)(uintptr_t)ls->dbrec + KN_SND_DBR);
				pre.w0 = KN_GX_LD64(ls->db0);
				if (ls->nregs > 1)
					pre.w1 = KN_GX_LD64(ls->db1);
			}
			uint32_t own = i < n ? KN_GX_LD32(&ctl->slot[i].own) : (uint32_t)KN_GOWN_CPU;
			bool mine = own == KN_GOWN_GPU || own == KN_GOWN_STOP;
			if (!mine && i < n)
				g_gs[i].active = 0;
			unsigned m = __ballot_sync(0xffffffffu, mine);
			while (m) {
				unsigned l = __ffs(m) - 1;
				m &= m - 1;
				unsigned k = base + l;
				uint32_t ko = __shfl_sync(0xffffffffu, own, l);
				struct kn_gx_db kp;
				kp.dbr = __shfl_sync(0xffffffffu, pre.dbr, l);
				kp.w0 = __shfl_sync(0xffffffffu, pre.w0, l);
				kp.w1 = __shfl_sync(0xffffffffu, pre.w1, l);
				work += kn_gx_visit(ctl, (int)k, &g_gs[k], ko, &gw[warp], lane, &kp);
			}
		}
		if (lane == 0 && work)
			atomicAdd((int *)sh_work, work);
		__syncthreads();
		if (threadIdx.x == 0) {
			uint64_t t = now_ns();
			if (*sh_work)
				last = t;
			*sh_work = 0;
			int ex = t - last > idle_ns;
			if ((pass & 15) == 15) {
				/* the CPU's stop, every 16 passes (a read over PCIe) */
				ctl->passes = pass + 1;
				if (trace)
					ctl->clock = t; /* KINET_TRACE: the CPU's calibration */
				ex |= ctl->stop != 0;
			}
			*sh_exit = ex;
		}
		__syncthreads();
		if (*sh_exit)
			break;
	}
	/* exit: not running first, then every slot taken goes back (a take
	 * that raced with the exit sees running 0 and waits for this) */
	__threadfence_system(); /* every lane's unsignaled payloads before the BACKs */
	if (threadIdx.x == 0) {
		ctl->running = 0;
		__threadfence_system();
	}
	__syncthreads();
	for (unsigned i = threadIdx.x; i < KN_GENG_SLOTS; i += blockDim.x)
		kn_gx_exit_slot(ctl, (int)i, &g_gs[i]);
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

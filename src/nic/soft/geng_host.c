/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * geng_host.c - the host executor of the GPU engine (KINET_GPU_ENGINE=host):
 * the kernel's code (geng_exec.h) on a CPU thread, over the same control
 * block and with the same protocol (geng.h), so that the suites exercise the
 * GPU engine's decode, checks, key cache, doorbell reading, CQE writing and
 * give-back/take/recall protocol on a machine without a GPU. Its memory is
 * the process's: the key views' GPU address of a host region is its own
 * address (keytab.c), GPU memory is out of its reach (given back as host
 * memory the GPU cannot reach, reversed), and its atomics are the CPU
 * engine's own (seq_cst), so atomics on host memory stay with it.
 *
 * One thread plays the kernel's one block: a sweep over the slots in use,
 * each slot it owns loaded, served (up to KN_GENG_BURST WQEs) or given back
 * when asked; it exits after idle_us without work or when told to stop,
 * giving every slot back (kn_gx_exit_slot), as the kernel does. gengine.c
 * launches, queries and waits for it under its lock, as for the kernel.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nic/soft/soft.h"
#include "nic/soft/geng_exec.h"

static struct {
	pthread_t th;
	bool live;               /* started and not joined */
	uint32_t done;           /* the thread's function returned */
	struct kn_geng_ctl *ctl;
	struct kn_gx_slot gs[KN_GENG_SLOTS];
	struct kn_gx_warp w;
} H;

static void *host_main(void *arg)
{
	struct kn_geng_ctl *ctl = arg;
	for (int i = 0; i < KN_GENG_SLOTS; i++)
		H.gs[i].active = 0;
	KN_GX_ST32(&ctl->running, 1u);
	KN_GX_FENCE();
	uint64_t last = kn_now_ns();
	uint64_t idle_ns = (uint64_t)ctl->idle_us * 1000ull;
	uint32_t trace = KN_GX_LD32(&ctl->trace); /* set before the launch */
	uint32_t n = 0, idle = 0;
	for (uint32_t pass = 0;; pass++) {
		int work = 0;
		if ((pass & 15) == 0) {
			n = KN_GX_LD32(&ctl->nslots);
			if (n > KN_GENG_SLOTS)
				n = KN_GENG_SLOTS;
		}
		for (uint32_t i = 0; i < n; i++) {
			/* as the kernel: a loaded slot's doorbells are read with
			 * (here: just before) its own word */
			struct kn_gx_db pre;
			bool ahead = H.gs[i].active != 0;
			if (ahead)
				kn_gx_doorbells(&H.gs[i], 0, &pre.dbr, &pre.w0, &pre.w1);
			uint32_t own = KN_GX_LD32(&ctl->slot[i].own);
			if (own != KN_GOWN_GPU && own != KN_GOWN_STOP) {
				H.gs[i].active = 0;
				continue;
			}
			work += kn_gx_visit(ctl, (int)i, &H.gs[i], own, &H.w, 0, ahead ? &pre : NULL);
		}
		uint64_t t = kn_now_ns();
		if (work)
			last = t;
		bool exit = t - last > idle_ns;
		if ((pass & 15) == 15) {
			KN_GX_ST64(&ctl->passes, (uint64_t)pass + 1);
			if (trace)
				KN_GX_ST64(&ctl->clock, t);
			exit |= KN_GX_LD32(&ctl->stop) != 0;
		}
		if (exit)
			break;
		/* a CPU shared with the engines and the application: idle, it
		 * yields, then sleeps a little per pass (as an idle CPU engine) */
		if (work) {
			idle = 0;
		} else if (++idle < 256) {
			sched_yield();
		} else {
			struct timespec ts = {0, 20000};
			nanosleep(&ts, NULL);
		}
	}
	KN_GX_ST32(&ctl->running, 0u);
	KN_GX_FENCE();
	for (int i = 0; i < KN_GENG_SLOTS; i++)
		kn_gx_exit_slot(ctl, i, &H.gs[i]);
	__atomic_store_n(&H.done, 1u, __ATOMIC_RELEASE);
	return NULL;
}

int kinet_geng_host_launch(struct kn_geng_ctl *ctl)
{
	if (H.live)
		return -EBUSY;
	H.ctl = ctl;
	H.done = 0;
	pthread_attr_t a;
	pthread_attr_init(&a);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay the application's */
	int rc = pthread_create(&H.th, &a, host_main, ctl);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc)
		return -rc;
	pthread_setname_np(H.th, "kinet-geng-host");
	H.live = true;
	return 0;
}

int kinet_geng_host_wait(void)
{
	if (!H.live)
		return 0;
	pthread_join(H.th, NULL);
	H.live = false;
	return 0;
}

int kinet_geng_host_query(void)
{
	if (!H.live)
		return 0;
	if (!__atomic_load_n(&H.done, __ATOMIC_ACQUIRE))
		return 1;
	return kinet_geng_host_wait();
}

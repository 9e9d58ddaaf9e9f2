/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers every backend's service threads share: the CPU proxy's ring, the
 * idle policy, random numbers, the process incarnation. */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/resource.h>
#include "core/internal.h"

void kinet_random(void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t r = getrandom(p, n, 0);
		if (r <= 0)
			break;
		p += r;
		n -= (size_t)r;
	}
	/* no entropy source (never seen on Linux >= 3.17): a clock and pid mix,
	 * unpredictable enough to keep processes apart */
	for (uint64_t x = kn_now_ns() ^ ((uint64_t)getpid() << 32); n; n--) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		*p++ = (uint8_t)x;
	}
}

int kinet_proxy_ring(kinet_qp *qp, const struct kinet_qmem_io *io)
{
	uint32_t pi = __atomic_load_n(qp->cpu_pi, __ATOMIC_ACQUIRE);
	if (pi == qp->proxy_seen)
		return 0;
	uint32_t dbr = kn_htobe32(pi & 0xffff);
	uint64_t w = 0;
	/* the register word is the first 8 bytes of WQE pi-1, read before the
	 * record names it: once the NIC may run it, its slot may be reused */
	const uint8_t *last = qp->sq + (size_t)((pi - 1) & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB;
	if (io) {
		if (io->read(&w, last, 8)) {
			KLOG_ERR("qp 0x%x: the CPU proxy cannot reach the queues in GPU memory",
				 qp->qpn);
			return 0;
		}
		KN_BAR_WQE_DBR();
		if (io->write((void *)&qp->dbrec[KN_SND_DBR], &dbr, 4)) {
			KLOG_ERR("qp 0x%x: the CPU proxy cannot reach the queues in GPU memory",
				 qp->qpn);
			return 0;
		}
	} else {
		memcpy(&w, last, 8);
		KN_BAR_WQE_DBR();
		__atomic_store_n(&qp->dbrec[KN_SND_DBR], dbr, __ATOMIC_RELAXED);
	}
	qp->proxy_seen = pi;
	KN_BAR_DBR_REG();
	/* the two registers in turn, as the device code rings */
	*(volatile uint64_t *)(qp->db + qp->proxy_bf_off) = w;
	KN_BAR_REG_FLUSH();
	qp->proxy_bf_off ^= qp->bf_alt;
	KINET_COUNT(qp->ctx, c_proxy, 1);
	return 1;
}

void kinet_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	nanosleep(&ts, NULL);
}

void kinet_thread_name(pthread_t th, const char *fmt, ...)
{
	char name[16]; /* TASK_COMM_LEN */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	pthread_setname_np(th, name);
}

/* involuntary context switches of the calling thread so far (-1: unknown) */
static long thread_nivcsw(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : -1;
}

void kinet_idle_init(struct kinet_idle *s, uint64_t spin_ns, uint64_t sleep_ns)
{
	s->spin_ns = spin_ns;
	s->sleep_ns = sleep_ns < 1000 ? 1000 : sleep_ns;
	s->last_work = kn_now_ns();
	s->nap = 1000;
	const char *m = KT(ENGINE_YIELD);
	s->yield_mode = !strcmp(m, "off") ? 0 : !strcmp(m, "on") ? 1 : 2;
	s->contended = true; /* until a quiet window shows otherwise */
	s->last_yield = s->window_start = s->last_work;
	s->nivcsw = thread_nivcsw();
}

#define IDLE_YIELD_NS 4000ull        /* a polling thread yields this often... */
#define IDLE_WINDOW_NS 1000000ull    /* ...auto: if preempted in the last such window */

void kinet_idle_poll(struct kinet_idle *s)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
	if (!s->yield_mode)
		return;
	uint64_t now = kn_now_ns();
	if (s->yield_mode == 2 && now - s->window_start >= IDLE_WINDOW_NS) {
		/* a yield that lets another thread run counts as an involuntary
		 * switch too, so contention keeps the yields on while it lasts;
		 * a thread alone on its CPU is never switched out */
		long n = thread_nivcsw();
		s->contended = n < 0 || s->nivcsw < 0 || n != s->nivcsw;
		s->nivcsw = n;
		s->window_start = now;
	}
	if (s->yield_mode == 2 && !s->contended)
		return;
	if (now - s->last_yield > IDLE_YIELD_NS) {
		sched_yield();
		s->last_yield = now;
	}
}

uint64_t kinet_idle_next(struct kinet_idle *s, bool worked)
{
	if (worked) {
		s->last_work = kn_now_ns();
		s->nap = 1000;
		return 0;
	}
	if (kn_now_ns() - s->last_work < s->spin_ns)
		return 0;
	uint64_t n = s->nap;
	s->nap = s->nap * 2 > s->sleep_ns ? s->sleep_ns : s->nap * 2;
	return n;
}

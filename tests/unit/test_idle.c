/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The idle policy's yields (kinet_idle_poll, KINET_ENGINE_YIELD): a polling
 * service thread gives its CPU away every few microseconds always (on),
 * never (off), or, by default (auto), while it is being preempted. The test
 * links the library statically and stands in for sched_yield (counted, then
 * done) and getrusage (the thread's involuntary switches, scripted by the
 * test), so that "preempted" and "alone on its CPU" are under its control.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/internal.h"

static unsigned long g_yields;
static bool g_script;      /* getrusage answers from the script below */
static long g_nivcsw;      /* what it answers */
static long g_step;        /* added after each answer: a thread preempted meanwhile */
static unsigned long g_rusage_calls;

int sched_yield(void)
{
	g_yields++;
	return (int)syscall(SYS_sched_yield);
}

int getrusage(int who, struct rusage *ru)
{
	if (!g_script)
		return (int)syscall(SYS_getrusage, who, ru);
	memset(ru, 0, sizeof(*ru));
	g_rusage_calls++;
	ru->ru_nivcsw = g_nivcsw;
	g_nivcsw += g_step;
	return 0;
}

/* polls as an idle engine does for ms milliseconds: the yields it made */
static unsigned long poll_for(struct kinet_idle *s, unsigned ms)
{
	unsigned long y0 = g_yields;
	uint64_t end = kn_now_ns() + (uint64_t)ms * 1000000ull;
	while (kn_now_ns() < end)
		kinet_idle_poll(s);
	return g_yields - y0;
}

/* polls until *count has grown by want (at most 5 s, however busy the
 * machine): the nanoseconds that took, or 0 when it did not get there */
static uint64_t poll_until(struct kinet_idle *s, const unsigned long *count, unsigned long want)
{
	unsigned long c0 = *count;
	uint64_t t0 = kn_now_ns();
	while (*count - c0 < want) {
		if (kn_now_ns() - t0 > 5000000000ull)
			return 0;
		kinet_idle_poll(s);
	}
	return kn_now_ns() - t0;
}

/* until it has yielded want times */
static uint64_t poll_until_yields(struct kinet_idle *s, unsigned long want)
{
	return poll_until(s, &g_yields, want);
}

/* until the switch counts have been looked at k more times. The phases of a
 * test step by these looks, not by time, so that a thread kept off its CPU
 * for a while cannot skip one */
static uint64_t poll_windows(struct kinet_idle *s, unsigned long k)
{
	return poll_until(s, &g_rusage_calls, k);
}

static struct kinet_idle idle_with(uint8_t mode)
{
	struct kinet_idle s;
	kinet_idle_init(&s, 0, 50000);
	s.yield_mode = mode;
	return s;
}

Test(idle, default_is_auto)
{
	/* each test runs in a process of its own, and the tunables are read
	 * at their first use: unset here, the default is what is read */
	unsetenv("KINET_ENGINE_YIELD");
	struct kinet_idle s;
	kinet_idle_init(&s, 0, 50000);
	cr_assert_eq(s.yield_mode, 2, "KINET_ENGINE_YIELD unset: auto (2), got %u", s.yield_mode);
	cr_assert(s.contended, "auto starts yielding until a quiet window is seen");
}

Test(idle, on_yields_every_few_microseconds)
{
	struct kinet_idle s = idle_with(1);
	/* 200 yields come (a machine too busy to run this thread only slows
	 * them down), and never more than one per 4 us */
	uint64_t ns = poll_until_yields(&s, 200);
	cr_assert_neq(ns, 0, "on: not 200 yields in 5 s");
	cr_assert_geq(ns, 199 * 4000ull, "on: 200 yields in %llu ns: more than one per 4 us",
		      (unsigned long long)ns);
}

Test(idle, off_never_yields)
{
	struct kinet_idle s = idle_with(0);
	g_script = true; /* and never asks for the switch counts */
	unsigned long y = poll_for(&s, 20);
	cr_assert_eq(y, 0, "off: %lu yields", y);
	cr_assert_eq(g_rusage_calls, 0, "off: getrusage called %lu times", g_rusage_calls);
}

Test(idle, auto_stops_when_alone_and_resumes_when_preempted)
{
	g_script = true;
	g_nivcsw = 7;
	g_step = 0; /* never switched out: alone on its CPU */
	struct kinet_idle s = idle_with(2);
	s.nivcsw = 7;
	cr_assert(s.contended, "auto starts yielding");
	/* the first look finds no involuntary switch: no more yields */
	cr_assert_neq(poll_windows(&s, 1), 0, "auto: the switch counts never looked at");
	cr_assert_not(s.contended, "no involuntary switch in a window: not contended");
	unsigned long y0 = g_yields;
	uint64_t ns = poll_windows(&s, 5);
	cr_assert_neq(ns, 0, "auto: not 5 looks at the switch counts in 5 s");
	cr_assert_eq(g_yields - y0, 0, "auto, alone: %lu yields", g_yields - y0);
	/* the counts are looked at once a millisecond, not on every pass */
	cr_assert_geq(ns, 4000000ull, "auto: 5 looks at the switch counts in %llu ns",
		      (unsigned long long)ns);

	/* preempted from now on (another thread wants the CPU): the script
	 * counts one switch more after each look, so the second look sees it */
	g_step = 1;
	cr_assert_neq(poll_windows(&s, 2), 0);
	cr_assert(s.contended, "involuntary switches in a window: contended");
	cr_assert_neq(poll_until_yields(&s, 200), 0, "auto, preempted: not 200 yields in 5 s");

	/* quiet again (the first look still sees the last switch): no yields */
	g_step = 0;
	cr_assert_neq(poll_windows(&s, 2), 0);
	cr_assert_not(s.contended, "quiet again: not contended");
	y0 = g_yields;
	cr_assert_neq(poll_windows(&s, 5), 0);
	cr_assert_eq(g_yields - y0, 0, "auto, alone again: %lu yields", g_yields - y0);
}

Test(idle, auto_on_a_shared_cpu_yields)
{
	/* the real switch counts: this thread and a busy one on one CPU. The
	 * kernel switches them (time slices of a few ms), so auto must yield */
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
	cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	/* from "alone" (not yielding): it must find out by itself */
	struct kinet_idle s = idle_with(2);
	struct rusage ru;
	cr_assert_eq(getrusage(RUSAGE_THREAD, &ru), 0);
	pid_t busy = fork();
	cr_assert_geq(busy, 0);
	if (busy == 0) {
		/* inherits the one CPU; spins until killed, or until this test's
		 * process is gone, 30 s at most */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		uint64_t end = kn_now_ns() + 30ull * 1000000000ull;
		while (kn_now_ns() < end)
			;
		_exit(0);
	}
	s.nivcsw = ru.ru_nivcsw;
	s.contended = false;
	s.window_start = kn_now_ns();
	unsigned long y = poll_for(&s, 300);
	kill(busy, SIGKILL);
	waitpid(busy, NULL, 0);
	cr_assert_gt(y, 0, "auto, sharing its CPU with a busy process: no yield in 300 ms");
}

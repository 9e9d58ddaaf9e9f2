/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs_check.h - what the verbs test programs share: a failure that says
 * which program failed and exits 1 (on the saved stderr while a test
 * captures it), CHECK, and random contents from a seeded xorshift.
 * Define VT_WHO (the program's name) before including it.
 */
#ifndef KINET_TESTS_VERBS_CHECK_H
#define KINET_TESTS_VERBS_CHECK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *who __attribute__((unused)) = VT_WHO;
static int saved_stderr __attribute__((unused)) = -1; /* stderr, while a test captures it */

static void fail(const char *fmt, ...)
{
	if (saved_stderr >= 0) /* say it where it is seen */
		dup2(saved_stderr, 2);
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: FAIL: ", who);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}
#define CHECK(c, ...)                                                                          \
	do {                                                                                   \
		if (!(c))                                                                      \
			fail(__VA_ARGS__);                                                     \
	} while (0)

static uint64_t rng; /* seeded by the program */
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}
static inline void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

#endif

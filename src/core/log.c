/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging: level from KINET_LOG, messages to stderr with a prefix. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static atomic_int log_level = -1;

static int level_from_env(void)
{
	const char *v = kinet_tunable_str("KINET_LOG");
	static const char *names[] = {"error", "warn", "info", "debug", "trace"};
	if (!v || !*v)
		return KINET_LOG_WARN;
	for (int i = 0; i < 5; i++)
		if (!strcasecmp(v, names[i]))
			return i;
	if (v[0] >= '0' && v[0] <= '4' && !v[1])
		return v[0] - '0';
	return KINET_LOG_WARN;
}

int kinet_log_get_level(void)
{
	int l = atomic_load(&log_level);
	if (l < 0) {
		l = level_from_env();
		atomic_store(&log_level, l);
	}
	return l;
}

void kinet_log_set_level(int level)
{
	if (level < KINET_LOG_ERROR)
		level = KINET_LOG_ERROR;
	if (level > KINET_LOG_TRACE)
		level = KINET_LOG_TRACE;
	atomic_store(&log_level, level);
}

void kinet_log(int level, const char *fmt, ...)
{
	static const char *tag[] = {"error", "warn", "info", "debug", "trace"};
	if (level > kinet_log_get_level())
		return;
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "kinet[%s]: %s\n", tag[level], buf);
}

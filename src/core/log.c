/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging: level from KINET_LOG; each message goes to the application's
 * callback, or to stderr as one line "host:pid[:rank] kinet[level]: ...". */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/internal.h"

static const char *level_names[] = {"error", "warn", "info", "debug", "trace"};

static atomic_int log_level = -1;
static atomic_int log_rank = -1;

/* the callback: taken for reading around each call, for writing to change */
static pthread_rwlock_t cb_lock = PTHREAD_RWLOCK_INITIALIZER;
static kinet_log_fn cb_fn;
static void *cb_user;

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static char host[64];

static void host_init(void)
{
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = '\0';
	host[strcspn(host, ".")] = '\0';
}

static int level_from_env(void)
{
	const char *v = KT(LOG); /* a canonical word: tunables.def */
	for (int i = 0; i < 5; i++)
		if (!strcmp(v, level_names[i]))
			return i;
	return KINET_LOG_WARN;
}

int kinet_log_get_level(void)
{
	int l = atomic_load(&log_level);
	if (l < 0) {
		l = level_from_env();
		int unset = -1; /* a kinet_log_set_level() meanwhile wins */
		if (!atomic_compare_exchange_strong(&log_level, &unset, l))
			l = unset;
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

void kinet_log_set_rank(int rank)
{
	atomic_store(&log_rank, rank < 0 ? -1 : rank);
}

void kinet_log_set_callback(kinet_log_fn fn, void *user)
{
	pthread_rwlock_wrlock(&cb_lock);
	cb_fn = fn;
	cb_user = user;
	pthread_rwlock_unlock(&cb_lock);
}

void kinet_log(int level, const char *fmt, ...)
{
	if (level < KINET_LOG_ERROR)
		level = KINET_LOG_ERROR;
	if (level > KINET_LOG_TRACE)
		level = KINET_LOG_TRACE;
	if (level > kinet_log_get_level())
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_rwlock_rdlock(&cb_lock);
	if (cb_fn) {
		cb_fn(level, msg, cb_user);
		pthread_rwlock_unlock(&cb_lock);
		return;
	}
	pthread_rwlock_unlock(&cb_lock);
	pthread_once(&host_once, host_init);
	char rank[16] = "";
	int r = atomic_load(&log_rank);
	if (r >= 0)
		snprintf(rank, sizeof(rank), ":%d", r);
	/* one write: lines of several threads do not interleave */
	char line[1200];
	snprintf(line, sizeof(line), "%s:%ld%s kinet[%s]: %s\n", host, (long)getpid(), rank,
		 level_names[level], msg);
	fputs(line, stderr);
}

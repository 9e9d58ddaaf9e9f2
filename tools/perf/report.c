/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report.c - statistics over the samples of a run and the output of
 * kinet-perf: perftest's columns, or one JSON object per line (--json).
 *
 * Bandwidth (all threads merged into one stream of posts and completions):
 *   BW average = bytes of all messages / (last completion - first post)
 *   BW peak    = the best rate over any stretch of W consecutive messages,
 *                from the post of the first to the completion of the last,
 *                W = max(q * threads, messages / 16); never below average
 *   MsgRate    = messages / (last completion - first post)
 *   MB = 2^20 bytes (as perftest), Mpps = 10^6 messages per second.
 * Latency: one sample per iteration (write_lat: half the round trip, as
 * perftest's ping-pong); t_typical is the median.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"

#define MB (1024.0 * 1024.0)
#define RULE "---------------------------------------------------------------------------------------"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sorts a[0..n), made of runs of `run` ascending values (one per thread),
 * by merging runs pairwise: O(n log threads). tmp holds n values. */
static uint64_t *merge_runs(uint64_t *a, uint64_t *tmp, size_t n, size_t run)
{
	for (; run < n; run *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * run) {
			size_t mid = lo + run < n ? lo + run : n;
			size_t hi = lo + 2 * run < n ? lo + 2 * run : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				tmp[k++] = a[j] < a[i] ? a[j++] : a[i++];
			while (i < mid)
				tmp[k++] = a[i++];
			while (j < hi)
				tmp[k++] = a[j++];
		}
		uint64_t *t = a;
		a = tmp;
		tmp = t;
	}
	return a;
}

int perf_bw_stats(const struct perf_env *e, uint64_t size, struct perf_bw *out)
{
	const struct perf_opts *o = e->o;
	size_t n = (size_t)o->threads * (size_t)o->iters;
	uint64_t *bp = malloc(2 * n * sizeof(uint64_t)), *bc = malloc(2 * n * sizeof(uint64_t));
	if (!bp || !bc) {
		free(bp);
		free(bc);
		return -ENOMEM;
	}
	/* each thread's post and completion times are ascending already */
	for (int i = 0; i < o->threads; i++) {
		memcpy(bp + (size_t)i * o->iters, e->jobs[i].tpost, o->iters * sizeof(uint64_t));
		memcpy(bc + (size_t)i * o->iters, e->jobs[i].tcomp, o->iters * sizeof(uint64_t));
	}
	const uint64_t *tp = merge_runs(bp, bp + n, n, o->iters);
	const uint64_t *tc = merge_runs(bc, bc + n, n, o->iters);
	double span = (double)(tc[n - 1] - tp[0]) * 1e-9;
	if (span <= 0)
		span = 1e-9;
	double rate = (double)n / span; /* messages per second */
	out->avg_mbs = rate * (double)size / MB;
	out->mpps = rate / 1e6;
	size_t w = (size_t)o->qdepth * (size_t)o->threads;
	if (w < n / 16)
		w = n / 16;
	if (w > n)
		w = n;
	if (w == 0)
		w = 1;
	double best = rate; /* the whole run is a stretch too */
	for (size_t i = 0; i + w <= n; i++) {
		if (tc[i + w - 1] <= tp[i])
			continue;
		double r = (double)w / ((double)(tc[i + w - 1] - tp[i]) * 1e-9);
		if (r > best)
			best = r;
	}
	out->peak_mbs = best * (double)size / MB;
	free(bp);
	free(bc);
	return 0;
}

int perf_lat_stats(const struct perf_env *e, struct perf_lat *out)
{
	const struct perf_opts *o = e->o;
	size_t n = (size_t)o->threads * (size_t)o->iters;
	uint64_t *s = malloc(n * sizeof(uint64_t));
	if (!s)
		return -ENOMEM;
	for (int i = 0; i < o->threads; i++)
		memcpy(s + (size_t)i * o->iters, e->jobs[i].tcomp, o->iters * sizeof(uint64_t));
	qsort(s, n, sizeof(uint64_t), cmp_u64);
	double div = (o->test->flags & PERF_F_PINGPONG) ? 2000.0 : 1000.0; /* ns -> us */
	double sum = 0, sq = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)s[i] / div;
	double avg = sum / (double)n;
	for (size_t i = 0; i < n; i++) {
		double d = (double)s[i] / div - avg;
		sq += d * d;
	}
	size_t i99 = (size_t)ceil(0.99 * (double)n), i999 = (size_t)ceil(0.999 * (double)n);
	out->min_us = (double)s[0] / div;
	out->max_us = (double)s[n - 1] / div;
	out->typical_us = (double)s[n / 2] / div;
	out->avg_us = avg;
	out->stdev_us = sqrt(sq / (double)n);
	out->p99_us = (double)s[(i99 ? i99 : 1) - 1] / div;
	out->p999_us = (double)s[(i999 ? i999 : 1) - 1] / div;
	free(s);
	return 0;
}

static int engine_threads(const struct perf_env *e)
{
	return e->o->engine_threads > 0 ? e->o->engine_threads
					: (int)kinet_tunable_int("KINET_ENGINE_THREADS");
}

static const char *db_mode_name(const struct perf_env *e)
{
	return (e->o->test->flags & PERF_F_NO_NIC) ? "none" : kinet_db_mode_str(perf_env_db_mode(e));
}

/* How the threads share QPs (the Executor line). */
static const char *qp_desc(const struct perf_opts *o)
{
	if (o->ctas <= 0 || o->qp_group <= 0) /* the host executor */
		return o->shared ? "one QP shared by all threads" : "one QP per thread";
	if (o->qp_share == KN_SHARE_GPU)
		return "one QP shared by all threads (GPU-shared)";
	if (o->qp_share == KN_SHARE_CTA)
		return "one QP per CTA, shared by its threads (CTA-shared)";
	return o->scope == PERF_SCOPE_WARP    ? "one QP per warp"
	       : o->scope == PERF_SCOPE_BLOCK ? "one QP per CTA"
					      : "one QP per thread";
}

static const char *const scope_name[] = {"thread", "warp", "block"};

void perf_report_header(const struct perf_env *e, FILE *f)
{
	const struct perf_opts *o = e->o;
	const struct perf_test *pt = o->test;
	if (o->json)
		return;
	fprintf(f, "%s\n", RULE);
	fprintf(f, "                    %s\n", pt->title);
	if (pt->flags & PERF_F_NO_NIC) {
		fprintf(f, " Backend         : none (plain memcpy, the baseline of the bandwidth tests)\n");
		fprintf(f, " Threads         : %d\n", o->threads);
	} else {
		fprintf(f, " Backend         : soft (software NIC, %d engine thread%s)\n",
			engine_threads(e), engine_threads(e) == 1 ? "" : "s");
		if (e->procs_line)
			fprintf(f, " Processes       : %s\n", e->procs_line);
		fprintf(f, " Executor        : %s, %d thread%s, %s\n", o->executor, o->threads,
			o->threads == 1 ? "" : "s",
			qp_desc(o));
		if (o->ctas > 0)
			fprintf(f, " GPU launch      : %d CTA%s x %d thread%s, %s scope, payloads in %s\n",
				o->ctas, o->ctas == 1 ? "" : "s", o->cta_threads,
				o->cta_threads == 1 ? "" : "s", scope_name[o->scope % 3],
				o->mem == PERF_MEM_GPU ? "GPU memory" : "pinned host memory");
		fprintf(f, " Doorbell mode   : %s\n", db_mode_name(e));
		fprintf(f, " Waiting threads : %s\n",
			o->yield ? "yield the CPU between polls" : "spin (pause between polls)");
		if (pt->kind == PERF_BW)
			fprintf(f, " Outstanding     : %u WQEs per thread\n", o->qdepth);
	}
	fprintf(f, " Iterations      : %" PRIu64 " timed (+%" PRIu64 " warm-up) per size\n", o->iters,
		o->warmup);
	fprintf(f, " Data check      : random contents, checked after each size\n");
	fprintf(f, "%s\n", RULE);
	if (pt->kind == PERF_BW)
		fprintf(f, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   "
			   "MsgRate[Mpps]\n");
	else
		fprintf(f, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
			   "t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% "
			   "percentile[usec]\n");
}

static void json_common(const struct perf_env *e, uint64_t size, FILE *f)
{
	const struct perf_opts *o = e->o;
	fprintf(f,
		"{\"test\":\"%s\",\"backend\":\"%s\",\"executor\":\"%s\",\"threads\":%d,"
		"\"shared\":%s,\"qdepth\":%u,\"db_mode\":\"%s\",\"engine_threads\":%d,"
		"\"poll\":\"%s\",\"processes\":%d,\"bytes\":%" PRIu64 ",\"iterations\":%" PRIu64
		",\"verified\":true",
		o->test->name, (o->test->flags & PERF_F_NO_NIC) ? "none" : "soft", o->executor,
		o->threads, o->shared ? "true" : "false",
		o->test->kind == PERF_BW ? o->qdepth : 1u, db_mode_name(e),
		(o->test->flags & PERF_F_NO_NIC) ? 0 : engine_threads(e), o->yield ? "yield" : "spin",
		e->procs_line ? 2 : 1, size, o->iters);
}

/* The cuda executor's launch, in the JSON objects. */
static void json_gpu(const struct perf_env *e, FILE *f)
{
	const struct perf_opts *o = e->o;
	if (o->ctas <= 0)
		return;
	fprintf(f,
		",\"scope\":\"%s\",\"ctas\":%d,\"cta_threads\":%d,\"mem\":\"%s\","
		"\"qp_share\":\"%s\"",
		scope_name[o->scope % 3], o->ctas, o->cta_threads,
		o->mem == PERF_MEM_GPU ? "gpu" : "host",
		o->qp_share == KN_SHARE_GPU ? "gpu" : o->qp_share == KN_SHARE_CTA ? "cta" : "exclusive");
}

void perf_report_bw(const struct perf_env *e, uint64_t size, const struct perf_bw *r, FILE *f)
{
	if (e->o->json) {
		json_common(e, size, f);
		json_gpu(e, f);
		fprintf(f, ",\"bw_peak_mbs\":%.2f,\"bw_avg_mbs\":%.2f,\"msg_rate_mpps\":%.6f}\n",
			r->peak_mbs, r->avg_mbs, r->mpps);
	} else {
		fprintf(f, " %-10" PRIu64 " %-14" PRIu64 " %-18.2f %-20.2f %.6f\n", size, e->o->iters,
			r->peak_mbs, r->avg_mbs, r->mpps);
	}
	fflush(f);
}

void perf_report_lat(const struct perf_env *e, uint64_t size, const struct perf_lat *r, FILE *f)
{
	if (e->o->json) {
		json_common(e, size, f);
		json_gpu(e, f);
		fprintf(f,
			",\"t_min_us\":%.3f,\"t_max_us\":%.3f,\"t_typical_us\":%.3f,"
			"\"t_avg_us\":%.3f,\"t_stdev_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f}\n",
			r->min_us, r->max_us, r->typical_us, r->avg_us, r->stdev_us, r->p99_us,
			r->p999_us);
	} else {
		fprintf(f, " %-7" PRIu64 " %-10" PRIu64 " %-14.2f %-12.2f %-16.2f %-14.2f %-15.2f "
			   "%-22.2f %.2f\n",
			size, e->o->iters, r->min_us, r->max_us, r->typical_us, r->avg_us, r->stdev_us,
			r->p99_us, r->p999_us);
	}
	fflush(f);
}

void perf_report_footer(const struct perf_env *e, FILE *f)
{
	if (!e->o->json)
		fprintf(f, "%s\n", RULE);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-perf as a user sees it: runs the built binary with tiny iteration
 * counts and checks its output format (perftest's column headers, numeric
 * rows, --json lines that parse), its data check and its exit status. It
 * checks format and status, never speed.
 *
 * The binary: $KINET_PERF_BIN, else the path given at build time
 * (tests/unit/test_perf_tool.cmake), else ../tools/perf/kinet-perf next to
 * this program.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef KINET_HAVE_JSONC
#include <json-c/json.h>
#endif

#define RUN_TIMEOUT_MS 120000

#include "../util/perf_bin.h"

struct out {
	char *out, *err;
	size_t nout, nerr;
	int status; /* exit status, or 128 + signal */
};

static void append(char **buf, size_t *n, const char *p, size_t k)
{
	*buf = realloc(*buf, *n + k + 1);
	cr_assert_not_null(*buf);
	memcpy(*buf + *n, p, k);
	*n += k;
	(*buf)[*n] = 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs kinet-perf with argv (NULL-terminated, without argv[0]) and extra
 * environment assignments "NAME=value" (NULL-terminated or NULL); collects
 * stdout and stderr; kills it after RUN_TIMEOUT_MS. */
static struct out run_env(const char *const *args, const char *const *env)
{
	struct out o = {0};
	const char *bin = perf_bin();
	int po[2], pe[2];
	cr_assert_eq(pipe(po), 0);
	cr_assert_eq(pipe(pe), 0);
	const char *argv[64];
	int argc = 0;
	argv[argc++] = bin;
	for (int i = 0; args[i]; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		close(po[1]);
		close(pe[1]);
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(bin, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
	int open_fds = 2;
	uint64_t deadline = now_ms() + RUN_TIMEOUT_MS;
	char buf[4096];
	while (open_fds > 0) {
		uint64_t t = now_ms();
		if (t >= deadline) {
			kill(pid, SIGKILL);
			break;
		}
		int r = poll(fds, 2, (int)(deadline - t));
		if (r < 0 && errno == EINTR)
			continue;
		cr_assert(r >= 0);
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t k = read(fds[i].fd, buf, sizeof(buf));
			if (k <= 0) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
			} else if (i == 0) {
				append(&o.out, &o.nout, buf, (size_t)k);
			} else {
				append(&o.err, &o.nerr, buf, (size_t)k);
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (!o.out)
		append(&o.out, &o.nout, "", 0);
	if (!o.err)
		append(&o.err, &o.nerr, "", 0);
	return o;
}

static struct out run(const char *const *args)
{
	return run_env(args, NULL);
}

static void out_free(struct out *o)
{
	free(o->out);
	free(o->err);
}

/* Parses the numbers of a whitespace-separated row; returns how many, or
 * -1 when a field is not a number. */
static int parse_row(const char *line, double *v, int max)
{
	int n = 0;
	const char *p = line;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '\n')
			return n;
		char *end;
		double d = strtod(p, &end);
		if (end == p || (*end && *end != ' ' && *end != '\t' && *end != '\n'))
			return -1;
		if (n == max)
			return -1;
		v[n++] = d;
		p = end;
	}
}

/* Finds the header line in text; the rows follow it until the closing rule.
 * Returns the number of rows; rows[i][0..ncol) their values. */
static int table_rows(const char *text, const char *header, int ncol, double rows[][16], int max)
{
	const char *h = strstr(text, header);
	cr_assert_not_null(h, "column header not found in:\n%s", text);
	const char *p = strchr(h, '\n');
	cr_assert_not_null(p);
	p++;
	int n = 0;
	while (*p && *p != '-') {
		const char *nl = strchr(p, '\n');
		cr_assert_not_null(nl, "unterminated row");
		char line[512];
		size_t len = (size_t)(nl - p);
		cr_assert_lt(len, sizeof(line));
		memcpy(line, p, len);
		line[len] = 0;
		cr_assert_lt(n, max);
		int k = parse_row(line, rows[n], 16);
		cr_assert_eq(k, ncol, "row '%s' has %d numeric fields, expected %d", line, k, ncol);
		n++;
		p = nl + 1;
	}
	cr_assert_eq(*p, '-', "the table is not closed by a rule");
	return n;
}

static void check_bw_row(const double *r, double bytes, double iters)
{
	cr_assert_eq(r[0], bytes);
	cr_assert_eq(r[1], iters);
	cr_assert_gt(r[3], 0.0, "BW average must be positive");
	cr_assert_geq(r[2], r[3], "BW peak %f below BW average %f", r[2], r[3]);
	cr_assert_gt(r[4], 0.0, "MsgRate must be positive");
}

static void check_lat_row(const double *r, double bytes, double iters)
{
	cr_assert_eq(r[0], bytes);
	cr_assert_eq(r[1], iters);
	double mn = r[2], mx = r[3], typ = r[4], avg = r[5], sd = r[6], p99 = r[7], p999 = r[8];
	cr_assert_gt(mn, 0.0);
	cr_assert(mn <= typ && typ <= mx, "t_typical out of [t_min, t_max]");
	cr_assert(mn <= avg && avg <= mx, "t_avg out of [t_min, t_max]");
	cr_assert(mn <= p99 && p99 <= p999 && p999 <= mx, "percentiles out of order");
	cr_assert_geq(sd, 0.0);
}

Test(perf_tool, help_exits_zero)
{
	const char *a[] = {"-h", NULL};
	struct out o = run(a);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_not_null(strstr(o.out, "usage: kinet-perf TEST"));
	const char *names[] = {"write_bw", "write_lat", "read_bw",  "read_lat", "atomic_bw",
			       "atomic_lat", "send_bw", "put_bw", "memcpy_bw"};
	for (int i = 0; i < 9; i++)
		cr_assert_not_null(strstr(o.out, names[i]), "help does not list %s", names[i]);
	out_free(&o);
}

Test(perf_tool, write_bw_table)
{
	const char *a[] = {"write_bw", "-s", "64", "-n", "50", "--warmup", "2", NULL};
	struct out o = run(a);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	double rows[4][16];
	int n = table_rows(o.out, BW_HEADER, 5, rows, 4);
	cr_assert_eq(n, 1);
	check_bw_row(rows[0], 64, 50);
	out_free(&o);
}

Test(perf_tool, size_sweep_with_suffix)
{
	const char *a[] = {"write_bw", "-a", "--max-size", "1K", "-n", "20", "-q", "4", NULL};
	struct out o = run(a);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	double rows[16][16];
	int n = table_rows(o.out, BW_HEADER, 5, rows, 16);
	cr_assert_eq(n, 10, "sizes 2..1024 are 10 rows, got %d", n);
	for (int i = 0; i < n; i++)
		check_bw_row(rows[i], (double)(2u << i), 20);
	out_free(&o);
}

Test(perf_tool, latency_tables)
{
	const char *tests[] = {"write_lat", "read_lat", "atomic_lat"};
	for (int t = 0; t < 3; t++) {
		const char *a[] = {tests[t], "-n", "30", NULL};
		struct out o = run(a);
		cr_assert_eq(o.status, 0, "%s: stderr: %s", tests[t], o.err);
		double rows[4][16];
		int n = table_rows(o.out, LAT_HEADER, 9, rows, 4);
		cr_assert_eq(n, 1);
		check_lat_row(rows[0], t == 2 ? 8 : 2, 30);
		out_free(&o);
	}
}

Test(perf_tool, threads_and_shared_qp)
{
	const char *a1[] = {"put_bw", "-s", "8", "-t", "2", "-n", "200", NULL};
	const char *a2[] = {"write_bw", "-s", "100", "-t", "3", "--shared", "-q", "8", "-n", "100",
			    NULL};
	const char *a3[] = {"atomic_bw", "-t", "2", "--shared", "-n", "100", "--poll", "yield",
			    NULL};
	const char *const *all[] = {a1, a2, a3};
	const double sizes[] = {8, 100, 8}, iters[] = {200, 100, 100};
	for (int i = 0; i < 3; i++) {
		struct out o = run(all[i]);
		cr_assert_eq(o.status, 0, "%s: stderr: %s", all[i][0], o.err);
		double rows[4][16];
		cr_assert_eq(table_rows(o.out, BW_HEADER, 5, rows, 4), 1);
		check_bw_row(rows[0], sizes[i], iters[i]);
		out_free(&o);
	}
}

#ifdef KINET_HAVE_JSONC
static void json_num(struct json_object *obj, const char *key, const char *line)
{
	struct json_object *v;
	cr_assert(json_object_object_get_ex(obj, key, &v), "'%s' missing in %s", key, line);
	cr_assert(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int),
		  "'%s' is not a number in %s", key, line);
}
#endif

/* Every test, --json: each line of stdout is one JSON object. */
Test(perf_tool, json_lines_parse)
{
#ifndef KINET_HAVE_JSONC
	cr_skip_test("json-c not found at build time (libjson-c-dev)");
#else
	const char *tests[] = {"write_bw", "read_bw", "atomic_bw", "send_bw", "put_bw",
			       "write_lat", "read_lat", "atomic_lat", "memcpy_bw"};
	for (int t = 0; t < 9; t++) {
		int lat = strstr(tests[t], "_lat") != NULL;
		const char *a[] = {tests[t], "--json", "-t", "2", "-n", "20", "-q", "8",
				   "-a", "--max-size", "64", NULL};
		struct out o = run(a);
		cr_assert_eq(o.status, 0, "%s: stderr: %s", tests[t], o.err);
		int lines = 0;
		char *save = NULL;
		for (char *line = strtok_r(o.out, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			enum json_tokener_error jerr;
			struct json_object *obj = json_tokener_parse_verbose(line, &jerr);
			cr_assert_not_null(obj, "%s: not JSON (%s): %s", tests[t],
					   json_tokener_error_desc(jerr), line);
			cr_assert(json_object_is_type(obj, json_type_object));
			struct json_object *v;
			cr_assert(json_object_object_get_ex(obj, "test", &v));
			cr_assert_str_eq(json_object_get_string(v), tests[t]);
			cr_assert(json_object_object_get_ex(obj, "verified", &v));
			cr_assert(json_object_get_boolean(v));
			cr_assert(json_object_object_get_ex(obj, "iterations", &v));
			cr_assert_eq(json_object_get_int64(v), 20);
			cr_assert(json_object_object_get_ex(obj, "threads", &v));
			cr_assert_eq(json_object_get_int(v), 2);
			cr_assert(json_object_object_get_ex(obj, "bytes", &v));
			int64_t bytes = json_object_get_int64(v);
			if (strstr(tests[t], "atomic"))
				cr_assert_eq(bytes, 8);
			else
				cr_assert_eq(bytes, 2ll << lines, "%s: row %d is %lld bytes",
					     tests[t], lines, (long long)bytes);
			const char *keys_bw[] = {"bw_peak_mbs", "bw_avg_mbs", "msg_rate_mpps"};
			const char *keys_lat[] = {"t_min_us", "t_max_us", "t_typical_us",
						  "t_avg_us", "t_stdev_us", "p99_us", "p999_us"};
			if (lat)
				for (int k = 0; k < 7; k++)
					json_num(obj, keys_lat[k], line);
			else
				for (int k = 0; k < 3; k++)
					json_num(obj, keys_bw[k], line);
			json_object_put(obj);
			lines++;
		}
		cr_assert_eq(lines, strstr(tests[t], "atomic") ? 1 : 6, "%s: %d JSON lines",
			     tests[t], lines);
		out_free(&o);
	}
#endif
}

Test(perf_tool, usage_errors_exit_2)
{
	const char *cases[][8] = {
		{NULL},
		{"no_such_test", NULL},
		{"write_bw", "-s", "0", NULL},
		{"write_bw", "-s", "12Q", NULL},
		{"write_bw", "--max-size", "2G", "-a", NULL},
		{"atomic_bw", "-s", "16", NULL},
		{"write_bw", "-t", "0", NULL},
		{"write_bw", "--db-mode", "fast", NULL},
		{"write_bw", "--executor", "nosuch", NULL},
		{"memcpy_bw", "somehost", NULL}, /* no peer: one process */
		{"write_bw", "--bogus", NULL},
		{"send_bw", "--shared", "-t", "2", NULL},
		{"write_bw", "--poll", "sometimes", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct out o = run(cases[i]);
		cr_assert_eq(o.status, 2, "case %zu (%s): status %d", i,
			     cases[i][0] ? cases[i][0] : "(none)", o.status);
		cr_assert(strstr(o.err, "kinet-perf: "), "case %zu: no message on stderr", i);
		cr_assert_eq(o.nout, 0, "case %zu: usage errors print nothing on stdout", i);
		out_free(&o);
	}
}

/* A failure at run time exits 1 with kinet_strerror's text. */
Test(perf_tool, runtime_error_exits_1)
{
	const char *a[] = {"write_bw", "-n", "10", NULL};
	const char *env[] = {"KINET_ENGINE_THREADS=1000", NULL};
	struct out o = run_env(a, env);
	cr_assert_eq(o.status, 1, "status %d, stderr: %s", o.status, o.err);
	cr_assert(strstr(o.err, "kinet-perf: write_bw: kinet_open: invalid argument"),
		  "stderr: %s", o.err);
	out_free(&o);
}

/* The data check is real: a flipped destination byte fails the run. */
Test(perf_tool, data_check_catches_corruption)
{
	const char *tests[] = {"write_bw", "read_bw", "send_bw", "put_bw", "write_lat",
			       "atomic_bw"};
	for (int t = 0; t < 6; t++) {
		const char *a[] = {tests[t], "-s", "64", "-n", "10", "--corrupt", NULL};
		if (strstr(tests[t], "atomic"))
			a[1] = "-s", a[2] = "8";
		struct out o = run(a);
		cr_assert_eq(o.status, 1, "%s: status %d, stderr: %s", tests[t], o.status, o.err);
		cr_assert(strstr(o.err, "data check failed"), "%s: stderr: %s", tests[t], o.err);
		out_free(&o);
	}
}

/* The executor options. Without a usable GPU (KINET_NO_CUDA=1 hides one)
 * every GPU-only request is refused with exit 2 and a message, never a
 * crash; in a build without CUDA, "cuda" is simply not built in. */
Test(perf_tool, executor_refusals_exit_2)
{
	const char *no_gpu[] = {"KINET_NO_CUDA=1", NULL};
	const char *cases[][10] = {
		/* GPU-only options on the host executor */
		{"write_bw", "--executor", "host", "--scope", "warp", NULL},
		{"write_bw", "--executor", "host", "--mem", "gpu", NULL},
		{"write_bw", "--executor", "host", "--ctas", "2", NULL},
		{"write_bw", "--executor", "host", "--cta-threads", "32", NULL},
		{"write_bw", "--executor", "host", "--shared=cta", NULL},
		{"write_bw", "--executor", "host", "-t", "300", NULL},
		/* bad values */
		{"write_bw", "--scope", "sideways", NULL},
		{"write_bw", "--mem", "disk", NULL},
		{"write_bw", "--shared=everyone", NULL},
		{"write_bw", "--ctas", "0", NULL},
		{"write_bw", "--cta-threads", "2000", NULL},
		{"write_bw", "-t", "70000", NULL},
		/* host-only things on the cuda executor */
		{"memcpy_bw", "--executor", "cuda", NULL},
		{"write_bw", "--executor", "cuda", "--poll", "yield", NULL},
		/* launch shapes that make no sense (refused before looking for a GPU) */
		{"write_bw", "--executor", "cuda", "--scope", "warp", "--cta-threads", "48", NULL},
		{"write_bw", "--executor", "cuda", "--scope", "block", "-t", "40", "--cta-threads",
		 "32", NULL},
		{"write_bw", "--executor", "cuda", "-t", "5", "--ctas", "2", "--cta-threads", "2",
		 NULL},
		{"send_bw", "--executor", "cuda", "--scope", "warp", NULL},
		{"write_bw", "--executor", "cuda", "--scope", "block", "--shared=cta", NULL},
		{"write_bw", "--executor", "cuda", "--shared", "--ctas", "132", "--cta-threads", "32",
		 NULL},
		/* no usable GPU */
		{"write_bw", "--executor", "cuda", NULL},
		{"write_bw", "--mem", "gpu", NULL},
		{"atomic_bw", "--scope", "block", NULL},
		{"put_bw", "--ctas", "132", NULL},
	};
	/* what the cases of the shape group must say (a CUDA build) */
	const char *why[] = {"whole warps", "whole CTAs", "-t differs", "thread scope only",
			     "at block scope", "largest SQ"};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct out o = run_env(cases[i], no_gpu);
		cr_assert_eq(o.status, 2, "case %zu (%s %s %s): status %d, stderr: %s", i,
			     cases[i][0], cases[i][1], cases[i][2], o.status, o.err);
		cr_assert(strstr(o.err, "kinet-perf: "), "case %zu: no message on stderr", i);
		cr_assert_eq(o.nout, 0, "case %zu: refusals print nothing on stdout", i);
		int built = strstr(o.err, "is not built in") == NULL;
		if (i >= 14 && i < 20 && built)
			cr_assert(strstr(o.err, why[i - 14]), "case %zu: stderr: %s", i, o.err);
		if (i >= 20 && built)
			cr_assert(strstr(o.err, "no usable GPU") || strstr(o.err, "needs a usable GPU") ||
					  strstr(o.err, "built without CUDA"),
				  "case %zu: stderr: %s", i, o.err);
		out_free(&o);
	}
}

/* Without a GPU the default executor is host, said once on stderr; naming
 * the executor says nothing. */
Test(perf_tool, default_executor_without_gpu)
{
	const char *no_gpu[] = {"KINET_NO_CUDA=1", NULL};
	const char *a[] = {"write_bw", "-s", "64", "-n", "20", "--warmup", "2", NULL};
	struct out o = run_env(a, no_gpu);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	const char *m = strstr(o.err, "running on the host executor");
	cr_assert_not_null(m, "stderr: %s", o.err);
	cr_assert_null(strstr(m + 1, "running on the host executor"), "said twice: %s", o.err);
	cr_assert_not_null(strstr(o.out, " Executor        : host,"), "stdout: %s", o.out);
	double rows[4][16];
	cr_assert_eq(table_rows(o.out, BW_HEADER, 5, rows, 4), 1);
	check_bw_row(rows[0], 64, 20);
	out_free(&o);

	const char *b[] = {"write_bw", "--executor", "host", "-s", "64", "-n", "20", NULL};
	o = run_env(b, no_gpu);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_eq(o.nerr, 0, "stderr: %s", o.err);
	out_free(&o);
}

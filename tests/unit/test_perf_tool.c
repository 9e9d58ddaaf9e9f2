/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-perf as a user sees it, in one process (--loopback): runs the built
 * binary with tiny iteration counts and checks its output format (perftest's
 * column headers, numeric rows, --json lines that parse, the metadata of the
 * JSON records), its data check, its exit status, perftest's flags with
 * perftest's meanings, and every test on the mlx5 backend over the emulated
 * rdma-core (KINET_MLX5_EMULATE=1 --backend mlx5). It also runs the
 * kinet-perf commands docs/hardware.md shows, against the emulation. It
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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <kinet/kinet.h>
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

/* args with --loopback appended: both ends in the one process. */
static struct out local_env(const char *const *args, const char *const *env)
{
	const char *a[64];
	int n = 0;
	for (; args[n]; n++) {
		cr_assert_lt(n, 62);
		a[n] = args[n];
	}
	a[n++] = "--loopback";
	a[n] = NULL;
	return run_env(a, env);
}

static struct out local(const char *const *args)
{
	return local_env(args, NULL);
}

/* The emulated rdma-core for the whole program (mlx5_0, mlx5_1 backed by
 * the software NIC). */
static const char *const EMU[] = {"KINET_MLX5_EMULATE=1", "KINET_NO_CUDA=1", NULL};

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
			       "atomic_lat", "send_bw", "send_lat", "put_bw", "memcpy_bw"};
	for (int i = 0; i < 10; i++)
		cr_assert_not_null(strstr(o.out, names[i]), "help does not list %s", names[i]);
	out_free(&o);
}

Test(perf_tool, write_bw_table)
{
	const char *a[] = {"write_bw", "-s", "64", "-n", "50", "--warmup", "2", NULL};
	struct out o = local(a);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	double rows[4][16];
	int n = table_rows(o.out, BW_HEADER, 5, rows, 4);
	cr_assert_eq(n, 1);
	check_bw_row(rows[0], 64, 50);
	out_free(&o);
}

Test(perf_tool, size_sweep_with_suffix)
{
	const char *a[] = {"write_bw", "-a", "--max-size", "1K", "-n", "2000", "-t", "4", NULL};
	struct out o = local(a);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	double rows[16][16];
	int n = table_rows(o.out, BW_HEADER, 5, rows, 16);
	cr_assert_eq(n, 10, "sizes 2..1024 are 10 rows, got %d", n);
	for (int i = 0; i < n; i++)
		check_bw_row(rows[i], (double)(2u << i), 2000);
	out_free(&o);
}

Test(perf_tool, latency_tables)
{
	const char *tests[] = {"write_lat", "read_lat", "atomic_lat", "send_lat"};
	for (int t = 0; t < 4; t++) {
		const char *a[] = {tests[t], "-n", "30", NULL};
		struct out o = local(a);
		cr_assert_eq(o.status, 0, "%s: stderr: %s", tests[t], o.err);
		double rows[4][16];
		int n = table_rows(o.out, LAT_HEADER, 9, rows, 4);
		cr_assert_eq(n, 1);
		check_lat_row(rows[0], t == 2 ? 8 : 2, 30);
		out_free(&o);
	}
}

/* send_lat, perftest's ib_send_lat: a SEND ping-pong with receives posted
 * on both sides. A sweep of every size (each checked: lengths, the stamp of
 * each message, and the last message of both sides byte for byte), on one
 * and on two threads; the data check fails on a flipped byte; bad sizes and
 * options are refused with a message. */
Test(perf_tool, send_lat)
{
	const char *a[] = {"send_lat", "-a", "--max-size", "8K", "-n", "5", "--warmup", "2", NULL};
	struct out o = local(a);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_not_null(strstr(o.out, "Send Latency Test"), "%s", o.out);
	double rows[16][16];
	int n = table_rows(o.out, LAT_HEADER, 9, rows, 16);
	cr_assert_eq(n, 13, "sizes 2..8192 are 13 rows, got %d", n);
	for (int i = 0; i < n; i++)
		check_lat_row(rows[i], (double)(2u << i), 5);
	out_free(&o);

	/* two threads, each its own QP pair; a size that is no power of two */
	const char *b[] = {"send_lat", "--threads", "2", "-s", "1000", "-n", "20", NULL};
	o = local(b);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_eq(table_rows(o.out, LAT_HEADER, 9, rows, 16), 1);
	check_lat_row(rows[0], 1000, 20);
	out_free(&o);

	/* the data check: the target's receive buffer, one byte flipped */
	const char *c[] = {"send_lat", "-s", "300", "-n", "10", "--corrupt", NULL};
	o = local(c);
	cr_assert_eq(o.status, 1, "status %d, stderr: %s", o.status, o.err);
	cr_assert_not_null(strstr(o.err, "kinet-perf: send_lat: data check failed at 300 bytes: "
					 "thread 0: target's receive buffer differs at byte 150"),
			   "stderr: %s", o.err);
	out_free(&o);

	/* refusals: exit 2, a message naming the problem, nothing run */
	struct {
		const char *args[10];
		const char *msg;
	} bad[] = {
		{{"send_lat", "-s", "0", "--loopback", NULL}, "bad message size '0' (1 to 1G bytes)"},
		{{"send_lat", "-s", "2G", "--loopback", NULL}, "bad message size '2G' (1 to 1G bytes)"},
		{{"send_lat", "-a", "--max-size", "0", "--loopback", NULL}, "bad --max-size '0'"},
		{{"send_lat", "-I", "8", "--loopback", NULL}, "-I: send_lat has no inline form"},
		{{"send_lat", "--shared", "--threads", "2", "--loopback", NULL},
		 "send_lat --shared takes one thread"},
		{{"send_lat", "-q", "1", "--threads", "2", "--loopback", NULL},
		 "send_lat on a shared QP takes one thread"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o = run(bad[i].args);
		cr_assert_eq(o.status, 2, "case %zu: status %d, stderr: %s", i, o.status, o.err);
		cr_assert_not_null(strstr(o.err, bad[i].msg), "case %zu: stderr: %s", i, o.err);
		cr_assert_eq(o.nout, 0, "case %zu: a refusal prints nothing on stdout", i);
		out_free(&o);
	}
}

Test(perf_tool, threads_and_shared_qp)
{
	const char *a1[] = {"put_bw", "-s", "8", "--threads", "2", "-n", "200", NULL};
	const char *a2[] = {"write_bw", "-s", "100", "--threads", "3", "--shared", "--qdepth", "8",
			    "-n", "100", NULL};
	const char *a3[] = {"atomic_bw", "--threads", "2", "--shared", "-n", "100", "--poll",
			    "yield", NULL};
	const char *const *all[] = {a1, a2, a3};
	const double sizes[] = {8, 100, 8}, iters[] = {200, 100, 100};
	for (int i = 0; i < 3; i++) {
		struct out o = local(all[i]);
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
	const char *tests[] = {"write_bw", "read_bw",	 "atomic_bw", "send_bw",  "put_bw",
			       "write_lat", "read_lat", "atomic_lat", "send_lat", "memcpy_bw"};
	for (int t = 0; t < 10; t++) {
		int lat = strstr(tests[t], "_lat") != NULL;
		const char *a[] = {tests[t], "--json", "--threads", "2", "-n", "20", "-t", "8",
				   "-a", "--max-size", "64", NULL};
		struct out o = local(a);
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
	const char *cases[][10] = {
		{NULL},
		{"no_such_test", NULL},
		{"write_bw", "-s", "0", NULL},
		{"write_bw", "-s", "12Q", NULL},
		{"write_bw", "--max-size", "2G", "-a", NULL},
		{"atomic_bw", "-s", "16", NULL},
		{"write_bw", "--threads", "0", NULL},
		{"write_bw", "--db-mode", "fast", NULL},
		{"write_bw", "--executor", "nosuch", NULL},
		{"memcpy_bw", "somehost", NULL}, /* no peer: one process */
		{"write_bw", "--bogus", NULL},
		{"send_bw", "--shared", "--threads", "2", "--loopback", NULL},
		{"write_bw", "--poll", "sometimes", NULL},
		/* perftest's flags: values and combinations kinet-perf refuses */
		{"write_bw", "-c", "UD", NULL},
		{"send_bw", "-c", "XRC", NULL},
		{"write_bw", "-I", "64", NULL},          /* more than one WQE carries */
		{"read_bw", "-I", "8", NULL},            /* reads carry no payload */
		{"send_bw", "-I", "8", NULL},            /* no inline SEND */
		{"write_bw", "-D", "1", "-a", NULL},     /* one size, as perftest */
		{"write_bw", "-D", "1", "-n", "10", NULL},
		{"write_bw", "-D", "0", NULL},
		{"write_bw", "-m", "1000", NULL},
		{"write_bw", "-q", "3", "--threads", "4", "--loopback", NULL},
		{"write_bw", "-q", "4", "--threads", "2", "--loopback", NULL},
		{"write_bw", "-q", "2", "--shared", "--loopback", NULL},
		{"write_bw", "-t", "0", NULL},
		{"write_bw", "-t", "70000", NULL},
		{"write_bw", "-x", "300", NULL},
		{"write_bw", "-i", "0", NULL},
		/* the backend */
		{"write_bw", "--backend", "bogus", NULL},
		{"write_bw", "--backend", "soft", "-d", "mlx5_0", NULL},
		{"write_bw", "--backend", "soft", "-x", "3", NULL},
		{"write_bw", "--backend", "mlx5", "--engine-threads", "2", NULL},
		/* where the ends are */
		{"write_bw", "--pair=sideways", NULL},
		{"write_bw", "--loopback", "somehost", NULL},
		{"write_bw", "--loopback", "--pair", NULL},
		{"write_bw", "--loopback", "-p", "5000", NULL},
		{"write_bw", "--pair=threads", "--executor", "cuda", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct out o = run(cases[i]);
		cr_assert_eq(o.status, 2, "case %zu (%s %s %s): status %d, stderr: %s", i,
			     cases[i][0] ? cases[i][0] : "(none)", cases[i][0] ? cases[i][1] : "",
			     cases[i][0] && cases[i][1] ? cases[i][2] : "", o.status, o.err);
		cr_assert(strstr(o.err, "kinet-perf: "), "case %zu: no message on stderr", i);
		cr_assert_eq(o.nout, 0, "case %zu: usage errors print nothing on stdout", i);
		out_free(&o);
	}
	/* KINET_BACKEND must name a backend too */
	const char *a[] = {"write_bw", "--loopback", NULL};
	const char *env[] = {"KINET_BACKEND=fastest", NULL};
	struct out o = run_env(a, env);
	cr_assert_eq(o.status, 2, "status %d", o.status);
	cr_assert(strstr(o.err, "KINET_BACKEND=fastest"), "stderr: %s", o.err);
	out_free(&o);
}

/* A failure at run time exits 1 with kinet_strerror's text. */
Test(perf_tool, runtime_error_exits_1)
{
	const char *a[] = {"write_bw", "-n", "10", NULL};
	const char *env[] = {"KINET_ENGINE_THREADS=1000", NULL};
	struct out o = local_env(a, env);
	cr_assert_eq(o.status, 1, "status %d, stderr: %s", o.status, o.err);
	cr_assert(strstr(o.err, "kinet-perf: write_bw: kinet_open: invalid argument"),
		  "stderr: %s", o.err);
	out_free(&o);
}

/* The data check is real: a flipped destination byte fails the run. */
Test(perf_tool, data_check_catches_corruption)
{
	const char *tests[] = {"write_bw", "read_bw", "send_bw", "put_bw", "write_lat",
			       "atomic_bw", "send_lat"};
	for (int t = 0; t < 7; t++) {
		const char *a[] = {tests[t], "-s", "64", "-n", "10", "--corrupt", NULL};
		if (strstr(tests[t], "atomic"))
			a[1] = "-s", a[2] = "8";
		struct out o = local(a);
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
		{"write_bw", "--executor", "host", "--threads", "300", NULL},
		/* bad values */
		{"write_bw", "--scope", "sideways", NULL},
		{"write_bw", "--mem", "disk", NULL},
		{"write_bw", "--shared=everyone", NULL},
		{"write_bw", "--ctas", "0", NULL},
		{"write_bw", "--cta-threads", "2000", NULL},
		{"write_bw", "--threads", "70000", NULL},
		/* host-only things on the cuda executor */
		{"memcpy_bw", "--executor", "cuda", NULL},
		{"write_bw", "--executor", "cuda", "--poll", "yield", NULL},
		/* launch shapes that make no sense (refused before looking for a GPU) */
		{"write_bw", "--executor", "cuda", "--scope", "warp", "--cta-threads", "48", NULL},
		{"write_bw", "--executor", "cuda", "--scope", "block", "--threads", "40",
		 "--cta-threads", "32", NULL},
		{"write_bw", "--executor", "cuda", "--threads", "5", "--ctas", "2", "--cta-threads",
		 "2", NULL},
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
	const char *why[] = {"whole warps", "whole CTAs", "differs", "thread scope only",
			     "at block scope", "largest SQ"};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct out o = local_env(cases[i], no_gpu);
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

/* The cuda executor across processes (--pair, a server, a client): every
 * scope and GPU memory are accepted options there, so without a usable GPU
 * (KINET_NO_CUDA=1) they are refused at once with exit 2 and a message (a
 * server does not wait for a client, nothing is printed on stdout), as in
 * one process; GPU memory on the host executor and cuda options with
 * --pair=threads are refused whatever the machine has, and so are more
 * threads than a side runs across processes. */
Test(perf_tool, executor_refusals_across_processes)
{
	const char *no_gpu[] = {"KINET_NO_CUDA=1", NULL};
	const char *cases[][16] = {
		/* no usable GPU (or a build without CUDA) */
		{"write_bw", "--pair", "--executor", "cuda", "--mem", "gpu", NULL},
		{"write_lat", "--pair", "--executor", "cuda", "--scope", "warp", NULL},
		{"read_bw", "--pair", "--mem", "gpu", NULL}, /* a cuda option picks cuda */
		{"atomic_bw", "--pair", "--scope", "block", "--mem", "gpu", NULL},
		{"send_bw", "--server", "-p", "0", "--mem", "gpu", NULL},
		{"read_lat", "--server", "-p", "0", "--executor", "cuda", "--scope", "warp",
		 "--threads", "64", NULL},
		{"write_bw", "127.0.0.1:9", "--executor", "cuda", "--mem", "gpu", "--scope",
		 "block", "--timeout", "1", NULL},
		{"put_bw", "--pair", "--ctas", "2", NULL},
		/* refused everywhere */
		{"write_bw", "--pair", "--executor", "host", "--mem", "gpu", NULL},
		{"write_bw", "--server", "-p", "0", "--executor", "host", "--mem", "gpu", NULL},
		{"write_bw", "--pair=threads", "--mem", "gpu", NULL},
		{"write_lat", "--pair=threads", "--scope", "warp", NULL},
		/* refused before looking for a GPU (a CUDA build) */
		{"write_bw", "--pair", "--executor", "cuda", "--threads", "512", NULL},
		{"send_bw", "--pair", "--executor", "cuda", "--scope", "warp", "--mem", "gpu",
		 NULL},
		{"write_bw", "--pair", "--scope", "warp", "--cta-threads", "48", NULL},
	};
	const char *why[] = {"needs the cuda executor", "needs the cuda executor",
			     "--pair=threads runs on the host executor",
			     "--pair=threads runs on the host executor", "at most 256 threads",
			     "thread scope only", "whole warps"};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct out o = run_env(cases[i], no_gpu);
		cr_assert_eq(o.status, 2, "case %zu (%s %s %s %s): status %d, stderr: %s", i,
			     cases[i][0], cases[i][1], cases[i][2], cases[i][3], o.status, o.err);
		cr_assert(strstr(o.err, "kinet-perf: "), "case %zu: no message on stderr", i);
		cr_assert_eq(o.nout, 0, "case %zu: refusals print nothing on stdout: %s", i, o.out);
		cr_assert_null(strstr(o.err, "only so far"), "case %zu: %s", i, o.err);
		bool no_cuda = strstr(o.err, "is not built in") ||
			       strstr(o.err, "built without CUDA");
		if (i < 8)
			cr_assert(strstr(o.err, "needs a usable GPU") || no_cuda, "case %zu: %s", i,
				  o.err);
		else if (i < 12 || !no_cuda)
			cr_assert(strstr(o.err, why[i - 8]), "case %zu: stderr: %s", i, o.err);
		out_free(&o);
	}
}

/* Without a GPU the default executor is host, said once on stderr; naming
 * the executor says nothing. */
Test(perf_tool, default_executor_without_gpu)
{
	const char *no_gpu[] = {"KINET_NO_CUDA=1", NULL};
	const char *a[] = {"write_bw", "-s", "64", "-n", "20", "--warmup", "2", NULL};
	struct out o = local_env(a, no_gpu);
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
	o = local_env(b, no_gpu);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_eq(o.nerr, 0, "stderr: %s", o.err);
	out_free(&o);
}

/* ---- the mlx5 backend over the emulated rdma-core -------------------------------- */

/* Every test on --backend mlx5 (the emulation: its QPs are software-NIC QPs
 * behind rdma-core's interface): the header names the backend, the rows
 * parse, the data check passes. */
Test(perf_tool, mlx5_emulation_every_test)
{
	const char *tests[] = {"write_bw",   "write_lat", "read_bw", "read_lat", "atomic_bw",
			       "atomic_lat", "send_bw",   "send_lat", "put_bw"};
	for (int t = 0; t < 9; t++) {
		bool lat = strstr(tests[t], "_lat") != NULL, at = strstr(tests[t], "atomic") != NULL;
		const char *a[] = {tests[t], "--backend", "mlx5", "-n", "30", "--warmup", "2", "-s",
				   at ? "8" : "100", "--threads", "2", "-t", "8", NULL};
		struct out o = local_env(a, EMU);
		cr_assert_eq(o.status, 0, "%s: stderr: %s", tests[t], o.err);
		cr_assert_not_null(strstr(o.out, " Backend         : mlx5\n"), "%s: %s", tests[t],
				   o.out);
		cr_assert_not_null(strstr(o.out, "emulated rdma-core"), "%s: %s", tests[t], o.out);
		double rows[4][16];
		cr_assert_eq(table_rows(o.out, lat ? LAT_HEADER : BW_HEADER, lat ? 9 : 5, rows, 4), 1);
		if (lat)
			check_lat_row(rows[0], at ? 8 : 100, 30);
		else
			check_bw_row(rows[0], at ? 8 : 100, 30);
		out_free(&o);
	}
	/* the data check is as real on mlx5 */
	const char *c[] = {"write_bw", "--backend", "mlx5", "-n", "10", "--corrupt", NULL};
	struct out o = local_env(c, EMU);
	cr_assert_eq(o.status, 1, "status %d", o.status);
	cr_assert(strstr(o.err, "data check failed"), "stderr: %s", o.err);
	out_free(&o);
}

/* The backend comes from --backend, else KINET_BACKEND, else auto; the header
 * prints the one opened and why. */
Test(perf_tool, backend_choice)
{
	const char *a[] = {"write_bw", "-s", "64", "-n", "20", NULL};
	const char *env_mlx5[] = {"KINET_MLX5_EMULATE=1", "KINET_NO_CUDA=1", "KINET_BACKEND=mlx5",
				  NULL};
	struct out o = local_env(a, env_mlx5);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_not_null(strstr(o.out, " Backend         : mlx5\n"), "%s", o.out);
	cr_assert_not_null(strstr(o.out, " Backend choice  : requested (mlx5_0 port 1"), "%s",
			   o.out);
	out_free(&o);
	/* --backend beats the variable */
	const char *b[] = {"write_bw", "-s", "64", "-n", "20", "--backend", "soft", NULL};
	o = local_env(b, env_mlx5);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_not_null(strstr(o.out, " Backend         : soft (software NIC"), "%s", o.out);
	out_free(&o);
	/* auto with the emulation present picks mlx5; -d picks the device */
	const char *c[] = {"write_bw", "-s", "64", "-n", "20", "-d", "mlx5_1", "-i", "1", "-x",
			   "3", "-m", "1024", NULL};
	o = local_env(c, EMU);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_not_null(strstr(o.out, " Backend         : mlx5\n"), "%s", o.out);
	cr_assert_not_null(strstr(o.out, "mlx5_1 port 1, RoCE v2 GID 3"), "%s", o.out);
	cr_assert_not_null(strstr(o.out, " MTU             : -m 1024 asked for, not applied"), "%s",
			   o.out);
	out_free(&o);
	/* a device that is not there fails, naming it */
	const char *d[] = {"write_bw", "-n", "20", "--backend", "mlx5", "-d", "mlx5_7", NULL};
	o = local_env(d, EMU);
	cr_assert_eq(o.status, 1, "status %d, stderr: %s", o.status, o.err);
	cr_assert(strstr(o.err, "kinet-perf: write_bw: kinet_open: "), "stderr: %s", o.err);
	out_free(&o);
	/* mlx5-only options on a machine where auto opens the software NIC */
	const char *e[] = {"write_bw", "-n", "20", "-x", "3", NULL};
	const char *none[] = {"KINET_MLX5_EMULATE=0", NULL};
	o = local_env(e, none);
	cr_assert_eq(o.status, 1, "status %d, stderr: %s", o.status, o.err);
	cr_assert(strstr(o.err, "-x applies to an RDMA device"), "stderr: %s", o.err);
	cr_assert_eq(o.nout, 0);
	out_free(&o);
}

/* ---- perftest's flags ------------------------------------------------------------------- */

/* -q is the number of QPs, -t the tx depth; --threads and --qdepth the
 * long forms; -I inline, --report_gbits, -c RC and -F accepted. */
Test(perf_tool, perftest_flags)
{
	struct {
		const char *args[16];
		const char *want; /* in the header */
		int rows_cols;
		double bytes;
	} cases[] = {
		{{"write_bw", "-q", "2", "-s", "64", "-n", "20", NULL},
		 " Executor        : host, 2 threads, one QP per thread (2 QPs)", 5, 64},
		{{"write_bw", "-q", "2", "--threads", "4", "-s", "64", "-n", "20", NULL},
		 "2 QPs, each shared by 2 threads (GPU-shared)", 5, 64},
		{{"write_bw", "-t", "8", "-s", "64", "-n", "20", NULL},
		 " Outstanding     : 8 WQEs per thread", 5, 64},
		{{"write_bw", "--qdepth", "16", "-s", "64", "-n", "20", NULL},
		 " Outstanding     : 16 WQEs per thread", 5, 64},
		{{"write_bw", "-I", "16", "-s", "16", "-n", "20", "-c", "RC", "-F", NULL},
		 " Inline          : messages of up to 16 bytes", 5, 16},
		{{"put_bw", "-I", "28", "-s", "8", "-n", "20", NULL},
		 " Inline          : messages of up to 28 bytes", 5, 8},
		{{"write_lat", "-I", "8", "-s", "8", "-n", "20", NULL},
		 " Inline          : messages of up to 8 bytes", 9, 8},
		{{"send_bw", "-I", "0", "-s", "64", "-n", "20", NULL}, " Outstanding     : 128", 5, 64},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct out o = local(cases[i].args);
		cr_assert_eq(o.status, 0, "case %zu: stderr: %s", i, o.err);
		cr_assert_not_null(strstr(o.out, cases[i].want), "case %zu: %s", i, o.out);
		double rows[4][16];
		bool lat = cases[i].rows_cols == 9;
		cr_assert_eq(table_rows(o.out, lat ? LAT_HEADER : BW_HEADER, cases[i].rows_cols, rows,
					4),
			     1);
		if (lat)
			check_lat_row(rows[0], cases[i].bytes, 20);
		else
			check_bw_row(rows[0], cases[i].bytes, 20);
		out_free(&o);
	}
	/* Gb/s: the same run in both units agrees within the factor 2^20 * 8 / 10^9 */
	const char *g[] = {"write_bw", "-s", "4096", "-n", "50", "--report_gbits", NULL};
	struct out o = local(g);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	const char *gh = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
			 "MsgRate[Mpps]";
	double rows[4][16];
	cr_assert_eq(table_rows(o.out, gh, 5, rows, 4), 1);
	/* Gb/s = msg/s x bytes x 8 / 1e9, with msg/s from the MsgRate column */
	double want = rows[0][4] * 1e6 * 4096 * 8 / 1e9;
	cr_assert(rows[0][3] > 0.99 * want - 0.01 && rows[0][3] < 1.01 * want + 0.01,
		  "BW average %f Gb/s, MsgRate says %f", rows[0][3], want);
	out_free(&o);
	/* -V names the version */
	const char *v[] = {"-V", NULL};
	o = run(v);
	cr_assert_eq(o.status, 0);
	cr_assert_not_null(strstr(o.out, "kinet-perf (kinet "), "%s", o.out);
	out_free(&o);
	/* -h says where the old -q and -t went */
	const char *h[] = {"-h", NULL};
	o = run(h);
	cr_assert_not_null(strstr(o.out, "-q and -t have perftest's meanings"), "%s", o.out);
	cr_assert_not_null(strstr(o.out, "--threads=N"), "%s", o.out);
	out_free(&o);
}

static const char *DUR_LAT_HEADER = " #bytes        #iterations       t_avg[usec]    tps average";

/* -D: a time-bounded run; counts instead of samples, no peak (as perftest). */
Test(perf_tool, duration_runs)
{
	const char *a[] = {"write_bw", "-D", "1", "-s", "256", "--threads", "2", NULL};
	struct out o = local(a);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_not_null(strstr(o.out, " Duration        : 1 s per size"), "%s", o.out);
	double rows[4][16];
	cr_assert_eq(table_rows(o.out, BW_HEADER, 5, rows, 4), 1);
	cr_assert_eq(rows[0][0], 256);
	cr_assert_gt(rows[0][1], 0, "no message in 1 s");
	cr_assert_eq(rows[0][2], 0, "a duration run has no peak");
	cr_assert_gt(rows[0][3], 0);
	out_free(&o);
	const char *tests[] = {"write_lat", "read_lat", "atomic_lat", "send_lat"};
	for (int t = 0; t < 4; t++) {
		const char *b[] = {tests[t], "-D", "1", NULL};
		o = local(b);
		cr_assert_eq(o.status, 0, "%s: stderr: %s", tests[t], o.err);
		cr_assert_eq(table_rows(o.out, DUR_LAT_HEADER, 4, rows, 4), 1, "%s", tests[t]);
		cr_assert_gt(rows[0][1], 0, "%s: no message in 1 s", tests[t]);
		cr_assert_gt(rows[0][2], 0, "%s: t_avg", tests[t]);
		/* tps x t_avg is about 1 s of one thread (the ping-pongs, write_lat
		 * and send_lat: t_avg is half a trip) */
		double busy = rows[0][3] * rows[0][2] * 1e-6 * (t == 0 || t == 3 ? 2 : 1);
		cr_assert(busy > 0.5 && busy < 1.05, "%s: tps x t_avg = %f s", tests[t], busy);
		out_free(&o);
	}
	/* send_bw and atomics keep their data checks in a duration run */
	const char *c[] = {"send_bw", "-D", "1", "-s", "512", NULL};
	o = local(c);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	cr_assert_eq(table_rows(o.out, BW_HEADER, 5, rows, 4), 1);
	out_free(&o);
	const char *d[] = {"atomic_bw", "-D", "1", "--corrupt", NULL};
	o = local(d);
	cr_assert_eq(o.status, 1, "status %d", o.status);
	cr_assert(strstr(o.err, "data check failed"), "stderr: %s", o.err);
	out_free(&o);
}

/* ---- the JSON records: what is needed to compare runs later ---------------------------- */

#ifdef KINET_HAVE_JSONC
static const char *jstr(struct json_object *obj, const char *key, const char *line)
{
	struct json_object *v;
	cr_assert(json_object_object_get_ex(obj, key, &v), "'%s' missing in %s", key, line);
	cr_assert(json_object_is_type(v, json_type_string), "'%s' not a string in %s", key, line);
	return json_object_get_string(v);
}

/* Checks the metadata of one record; returns the parsed object. */
static struct json_object *check_meta(const char *line, const char *backend, const char *mem)
{
	enum json_tokener_error jerr;
	struct json_object *obj = json_tokener_parse_verbose(line, &jerr);
	cr_assert_not_null(obj, "not JSON (%s): %s", json_tokener_error_desc(jerr), line);
	char want[32], host[256] = "";
	snprintf(want, sizeof(want), "%d.%d", KINET_VERSION_MAJOR, KINET_VERSION_MINOR);
	cr_assert_str_eq(jstr(obj, "kinet_version", line), want);
	cr_assert_str_eq(jstr(obj, "backend", line), backend);
	jstr(obj, "backend_reason", line);
	cr_assert_eq(gethostname(host, sizeof(host) - 1), 0);
	cr_assert_str_eq(jstr(obj, "host", line), host);
	const char *d = jstr(obj, "date", line);
	int y, mo, dd, h, mi, se;
	char z = 0;
	cr_assert_eq(sscanf(d, "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &dd, &h, &mi, &se, &z), 7,
		     "date %s is not ISO 8601 UTC", d);
	cr_assert_eq(z, 'Z');
	cr_assert(y >= 2020 && mo >= 1 && mo <= 12 && dd >= 1 && dd <= 31 && h < 24 && mi < 60,
		  "date %s", d);
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	cr_assert_eq(y, tm.tm_year + 1900, "date %s is not this year's", d);
	jstr(obj, "executor", line);
	cr_assert_str_eq(jstr(obj, "mem_initiator", line), mem);
	cr_assert_str_eq(jstr(obj, "mem_target", line), mem);
	cr_assert_not_null(strstr(jstr(obj, "cmdline", line), "kinet-perf"), "%s", line);
	struct json_object *v;
	cr_assert(json_object_object_get_ex(obj, "provider", &v), "no provider in %s", line);
	return obj;
}
#endif

/* --out_json_file: the columns on stdout, JSON Lines with the metadata in
 * the file; --out_json alone writes kinet_perf_out.json where it runs. */
Test(perf_tool, out_json_records)
{
#ifndef KINET_HAVE_JSONC
	cr_skip_test("json-c not found at build time (libjson-c-dev)");
#else
	char dir[] = "/tmp/kinet-perf-json-XXXXXX", path[64];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/run.json", dir);
	char opt[96];
	snprintf(opt, sizeof(opt), "--out_json_file=%s", path);
	const char *a[] = {"read_bw", "-a", "--max-size", "16", "-n", "20", opt, NULL};
	struct out o = local_env(a, EMU);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	double rows[8][16];
	cr_assert_eq(table_rows(o.out, BW_HEADER, 5, rows, 8), 4);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s was not written", path);
	char line[8192];
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		struct json_object *obj = check_meta(line, "mlx5", "host");
		struct json_object *v;
		cr_assert(json_object_object_get_ex(obj, "bytes", &v));
		cr_assert_eq(json_object_get_int64(v), 2ll << n);
		cr_assert(json_object_object_get_ex(obj, "bw_avg_gbps", &v));
		cr_assert(json_object_object_get_ex(obj, "provider", &v));
		cr_assert(json_object_is_type(v, json_type_null), "one process: no wire: %s", line);
		cr_assert(strstr(jstr(obj, "cmdline", line), opt), "%s", line);
		json_object_put(obj);
		n++;
	}
	fclose(f);
	cr_assert_eq(n, 4, "sizes 2..16: %d records", n);
	unlink(path);
	/* the default file name, in the working directory */
	char cwd[PATH_MAX];
	cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
	cr_assert_eq(chdir(dir), 0);
	const char *b[] = {"write_lat", "--out_json", "-D", "1", NULL};
	o = local(b);
	cr_assert_eq(chdir(cwd), 0);
	cr_assert_eq(o.status, 0, "stderr: %s", o.err);
	snprintf(path, sizeof(path), "%s/kinet_perf_out.json", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f, "--out_json wrote no %s", path);
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	struct json_object *obj = check_meta(line, "soft", "host");
	struct json_object *v;
	cr_assert(json_object_object_get_ex(obj, "duration_s", &v));
	cr_assert_eq(json_object_get_int(v), 1);
	cr_assert(json_object_object_get_ex(obj, "t_avg_us", &v));
	cr_assert(json_object_object_get_ex(obj, "messages", &v));
	cr_assert_gt(json_object_get_int64(v), 0);
	json_object_put(obj);
	unlink(path);
	rmdir(dir);
#endif
}

/* ---- docs/hardware.md -------------------------------------------------------------------- */

/* Every kinet-perf line of docs/hardware.md's step 4, run against the
 * emulated rdma-core: a line with HOST_A is a client, run with its server
 * as --pair=threads (the emulation reaches QPs of one process only), and
 * its server line (the same without HOST_A) must be in the section too;
 * -a stops at 4K, -n at 20, -D at 1 s. Lines that need a GPU are refused
 * with exit 2 where there is none. */
Test(perf_tool, hardware_md_commands)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/docs/hardware.md", KINET_SOURCE_DIR);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	static char lines[64][512];
	int n = 0, in = 0;
	char buf[1024];
	while (fgets(buf, sizeof(buf), f)) {
		if (!strncmp(buf, "## ", 3))
			in = !strncmp(buf, "## Step 4", 9);
		if (!in || strncmp(buf, "kinet-perf ", 11))
			continue;
		cr_assert_lt(n, 64);
		buf[strcspn(buf, "\n")] = 0;
		cr_assert_lt(strlen(buf), sizeof(lines[0]), "a long line: %s", buf);
		memcpy(lines[n++], buf, strlen(buf) + 1);
	}
	fclose(f);
	cr_assert_geq(n, 6, "step 4 of docs/hardware.md shows %d kinet-perf lines", n);
	int ran = 0;
	for (int i = 0; i < n; i++) {
		char *host = strstr(lines[i], " HOST_A");
		char server[512];
		if (host) { /* its server: the same line without the host */
			size_t pre = (size_t)(host - lines[i]);
			memcpy(server, lines[i], pre);
			memcpy(server + pre, host + 7, strlen(host + 7) + 1);
			bool found = false;
			for (int k = 0; k < n; k++)
				found |= !strcmp(lines[k], server);
			cr_assert(found, "no server line for '%s'", lines[i]);
		} else if (!strstr(lines[i], "--loopback")) {
			continue; /* a server: run with its client */
		}
		/* the words, shrunk for a test run */
		char copy[512];
		memcpy(copy, lines[i], sizeof(copy));
		const char *argv[48];
		int argc = 0;
		bool gpu = false, sweep = false, dur = false, iters = false;
		char *save = NULL;
		for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
			if (argc == 0) { /* "kinet-perf" */
				argc = -1;
				continue;
			}
			if (!strcmp(w, "HOST_A"))
				continue;
			cr_assert_lt(argc + 1, 40);
			argv[argc < 0 ? (argc = 0) : argc] = w;
			argc++;
			gpu |= !strcmp(w, "cuda") || !strcmp(w, "--mem");
			sweep |= !strcmp(w, "-a");
			if (!strcmp(w, "-D"))
				dur = true;
			else if (dur && argc >= 2 && !strcmp(argv[argc - 2], "-D"))
				argv[argc - 1] = "1";
			if (!strcmp(w, "-n"))
				iters = true;
			else if (iters && argc >= 2 && !strcmp(argv[argc - 2], "-n"))
				argv[argc - 1] = "20";
		}
		if (host)
			argv[argc++] = "--pair=threads";
		if (sweep) {
			argv[argc++] = "--max-size";
			argv[argc++] = "4K";
		}
		if (!dur && !iters) {
			argv[argc++] = "-n";
			argv[argc++] = "20";
		}
		argv[argc] = NULL;
		const char *emu[] = {"KINET_MLX5_EMULATE=1", gpu ? NULL : "KINET_NO_CUDA=1", NULL};
		struct out o = run_env(argv, emu);
		if (gpu && o.status == 2) {
			cr_assert(strstr(o.err, "GPU") || strstr(o.err, "CUDA") ||
					  strstr(o.err, "not built in") ||
					  strstr(o.err, "host executor"),
				  "'%s': refused for another reason: %s", lines[i], o.err);
			cr_assert_null(strstr(o.err, "unknown option"), "'%s': %s", lines[i], o.err);
		} else {
			cr_assert_eq(o.status, 0, "'%s': status %d, stderr: %s", lines[i], o.status,
				     o.err);
			cr_assert_not_null(strstr(o.out, " Backend         : mlx5\n"), "'%s': %s",
					   lines[i], o.out);
			cr_assert_not_null(strstr(o.out, "mlx5_0 port 1, RoCE v2 GID 3"), "'%s': %s",
					   lines[i], o.out);
			if (host)
				cr_assert_not_null(strstr(o.out, " Transport       : mlx5"), "'%s': %s",
						   lines[i], o.out);
			ran++;
		}
		out_free(&o);
	}
	cr_assert_geq(ran, 2, "only %d of the lines ran", ran);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-plot on the JSON records of short kinet-perf runs (a bandwidth and a
 * latency test, --out_json_file): a PNG comes out, and what it drew (printed
 * on stdout) has the axes with their units, one line per file with its label
 * and one point per message size, and a title made from the records' metadata.
 * Skipped, saying why, when Python 3 or matplotlib is missing.
 *
 * The programs: $KINET_PERF_BIN / $KINET_PLOT_BIN, else the paths given at
 * build time (tests/unit/test_plot.cmake).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include "../util/perf_bin.h"

static const char *plot_bin(void)
{
	const char *env = getenv("KINET_PLOT_BIN");
	if (env && *env)
		return env;
#ifdef KINET_PLOT_BIN
	return KINET_PLOT_BIN;
#else
	return "kinet-plot";
#endif
}

/* Runs a shell command line; its output (stdout and stderr) in *out. */
static int sh(const char *cmd, char **out)
{
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s", cmd);
	size_t n = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	size_t k;
	while ((k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += k;
		if (n + 1 == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
	}
	buf[n] = 0;
	int st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char dir[] = "/tmp/kinet-plot-XXXXXX";

/* A formatted string (freed by the caller). */
static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, f);
	int n = vasprintf(&s, f, ap);
	va_end(ap);
	cr_assert(n >= 0 && s);
	return s;
}

static void records(const char *name, const char *args)
{
	char *out;
	char *cmd = fmt("KINET_NO_CUDA=1 '%s' %s --loopback --out_json_file='%s/%s' 2>&1",
		 perf_bin(), args, dir, name);
	int rc = sh(cmd, &out);
	cr_assert_eq(rc, 0, "%s: %s", cmd, out);
	free(out);
	free(cmd);
}

Test(plot, png_from_kinet_perf_records)
{
	cr_assert_not_null(mkdtemp(dir));
	records("bw.json", "write_bw -a --max-size 4K -n 50");
	records("lat.json", "write_lat -a --max-size 64 -n 50");
	char *out, *cmd;
	char *png = fmt("%s/curves.png", dir);
	cmd = fmt("'%s' -o '%s' --table --label 'writes, 1 thread' --label 'ping-pong' '%s/bw.json' "
		 "'%s/lat.json' 2>&1",
		 plot_bin(), png, dir, dir);
	int rc = sh(cmd, &out);
	if (rc == 3 || rc == 126 || rc == 127) {
		char *why = fmt("kinet-plot cannot run here (%s): %s", cmd, out);
		char *rm = fmt("rm -rf '%s'", dir);
		if (system(rm))
			fprintf(stderr, "test_plot: could not remove %s\n", dir);
		cr_skip_test("%s", why);
	}
	cr_assert_eq(rc, 0, "%s: status %d: %s", cmd, rc, out);
	/* a PNG */
	FILE *f = fopen(png, "rb");
	cr_assert_not_null(f, "no %s", png);
	unsigned char sig[8];
	cr_assert_eq(fread(sig, 1, 8, f), 8u);
	fclose(f);
	cr_assert_eq(memcmp(sig, "\x89PNG\r\n\x1a\n", 8), 0, "%s is not a PNG", png);
	struct stat stb;
	cr_assert_eq(stat(png, &stb), 0);
	cr_assert_gt(stb.st_size, 10000, "a PNG of %lld bytes has no curves", (long long)stb.st_size);
	/* what it drew: axes with units, one labelled line per file, the title */
	cr_assert_not_null(strstr(out, "panel bandwidth: x: message size [bytes]"), "%s", out);
	cr_assert_not_null(strstr(out, "y: bandwidth, BW average [MB/s (2^20 B)]\n"),
			   "a linear bandwidth axis by default: %s", out);
	cr_assert_not_null(strstr(out, "panel latency: x: message size [bytes]"), "%s", out);
	cr_assert_not_null(strstr(out, "y: latency, t_typical (median) [us]"), "%s", out);
	cr_assert_not_null(strstr(out, "line 'writes, 1 thread': 12 points, 2="), "%s", out);
	cr_assert_not_null(strstr(out, "line 'ping-pong': 6 points, 2="), "%s", out);
	char title[512], host[256] = "";
	cr_assert_eq(gethostname(host, sizeof(host) - 1), 0);
	snprintf(title, sizeof(title), "title: kinet-perf write_bw, write_lat | kinet %d.%d | %s",
		 KINET_VERSION_MAJOR, KINET_VERSION_MINOR, host);
	cr_assert_not_null(strstr(out, title), "%s", out);
	/* --table: the same points as markdown, a row per size, a column per line */
	const char *bt = strstr(out, "| size | writes, 1 thread |\n|---:|---:|\n| 2 | ");
	const char *lt = strstr(out, "| size | ping-pong |\n|---:|---:|\n| 2 | ");
	cr_assert(bt && lt, "no markdown tables: %s", out);
	cr_assert_not_null(strstr(bt, "\n| 4K | "), "%s", out);
	cr_assert_null(strstr(bt, "\n| 8K | "), "a size that was not run: %s", out);
	cr_assert_not_null(strstr(lt, "\n| 64 | "), "%s", out);
	cr_assert_null(strstr(lt, "\n| 128 | "), "%s", out);
	free(out);
	/* Gb/s and labels from the metadata */
	free(cmd);
	cmd = fmt("'%s' -o '%s' --gbits --logy '%s/bw.json' 2>&1", plot_bin(), png, dir);
	cr_assert_eq(sh(cmd, &out), 0, "%s", out);
	cr_assert_not_null(strstr(out, "y: bandwidth, BW average [Gb/s] (log 10)\n"), "%s", out);
	cr_assert_not_null(strstr(out, "line 'write_bw, soft/host'"), "%s", out);
	free(out);
	/* --table with lines of different sizes: '-' where a line has no point;
	 * a '|' in a label stays text */
	records("bw64.json", "write_bw -a --max-size 64 -n 50");
	free(cmd);
	cmd = fmt("'%s' -o '%s' --table --label 'a|b' --label 'short' '%s/bw.json' '%s/bw64.json' 2>&1",
		  plot_bin(), png, dir, dir);
	cr_assert_eq(sh(cmd, &out), 0, "%s", out);
	const char *t2 = strstr(out, "| size | a\\|b | short |\n");
	cr_assert_not_null(t2, "%s", out);
	cr_assert_not_null(strstr(t2, "\n| 64 | "), "%s", out);
	const char *r128 = strstr(t2, "\n| 128 | ");
	cr_assert_not_null(r128, "%s", out);
	const char *eol = strchr(r128 + 1, '\n');
	cr_assert_not_null(eol);
	cr_assert(eol - r128 > 4 && !strncmp(eol - 4, " - |", 4),
		  "no '-' for the short line at 128: %.*s", (int)(eol - r128), r128);
	free(out);
	/* what it refuses */
	char *empty = fmt("%s/empty.json", dir);
	f = fopen(empty, "w");
	cr_assert_not_null(f);
	fputs("{\"not\": \"a record\"}\n", f);
	fclose(f);
	free(cmd);
	cmd = fmt("'%s' -o '%s' '%s' 2>&1", plot_bin(), png, empty);
	cr_assert_eq(sh(cmd, &out), 1, "%s", out);
	cr_assert_not_null(strstr(out, "no kinet-perf record"), "%s", out);
	free(out);
	free(cmd);
	cmd = fmt("'%s' -o '%s' '%s/missing.json' 2>&1", plot_bin(), png, dir);
	cr_assert_eq(sh(cmd, &out), 1, "%s", out);
	free(out);
	free(cmd);
	cmd = fmt("'%s' 2>&1", plot_bin());
	cr_assert_eq(sh(cmd, &out), 2, "%s", out);
	free(out);
	free(cmd);
	cmd = fmt("rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
	free(cmd);
	free(png);
	free(empty);
	(void)BW_HEADER; /* perf_bin.h's column headers: not needed here */
	(void)LAT_HEADER;
}

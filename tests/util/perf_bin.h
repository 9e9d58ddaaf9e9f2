/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the tests that run the kinet-perf binary: where it is, and the
 * column headers it prints (perftest's). Header-only: KINET_PERF_BIN is a
 * per-test compile definition. */
#ifndef KINET_TEST_PERF_BIN_H
#define KINET_TEST_PERF_BIN_H
#include <criterion/criterion.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *BW_HEADER =
	" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
static const char *LAT_HEADER =
	" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
	"t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]";

/* KINET_PERF_BIN from the environment, else the build's path, else next to
 * this test program's build folder. */
static const char *perf_bin(void)
{
	static char path[PATH_MAX];
	const char *env = getenv("KINET_PERF_BIN");
	if (env && *env)
		return env;
#ifdef KINET_PERF_BIN
	if (access(KINET_PERF_BIN, X_OK) == 0)
		return KINET_PERF_BIN;
#endif
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 64);
	cr_assert(n > 0, "cannot find this program's path");
	path[n] = 0;
	char *slash = strrchr(path, '/');
	cr_assert_not_null(slash);
	strcpy(slash, "/../tools/perf/kinet-perf");
	return path;
}
#endif

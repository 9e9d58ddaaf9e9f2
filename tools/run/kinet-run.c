/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-run [--] CMD [ARGS...]: runs CMD with kinet-verbs' libibverbs.so.1
 * and libmlx5.so.1 (lib/kinet/verbs/) first in LD_LIBRARY_PATH, so an
 * unmodified RDMA program finds the kinet devices, preloads
 * libkinet_sysfs.so from the same folder when it is there (the sysfs
 * entries of a kinet device that topology readers ask for,
 * src/verbs/sysfs.c), and says so once on stderr. Exits as the command
 * does; 127 when the command or the libraries cannot be found, 126 when the
 * command cannot be run, 2 on bad usage.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs("usage: kinet-run [--] CMD [ARGS...]\n"
	      "Runs CMD with kinet-verbs (rdma-core's libibverbs.so.1 and libmlx5.so.1 over\n"
	      "kinet's software NIC) first in its library path. See kinet-run(1).\n",
	      f);
}

/* The folder of kinet-verbs' libraries, from where this program lives. */
static int verbs_dir(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -errno;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	int w;
	/* the build tree, also when reached through a link (exe is resolved) */
	char bin[PATH_MAX];
	if (!strcmp(exe, KINET_RUN_BUILD_BIN) ||
	    (realpath(KINET_RUN_BUILD_BIN, bin) && !strcmp(exe, bin)))
		w = snprintf(out, len, "%s", KINET_RUN_BUILD_VERBS);
	else
		w = snprintf(out, len, "%s/%s", exe, KINET_RUN_REL);
	if (w < 0 || (size_t)w >= len)
		return -ENAMETOOLONG;
	char lib[PATH_MAX + 32];
	snprintf(lib, sizeof(lib), "%s/libibverbs.so.1", out);
	char real[PATH_MAX];
	if (!realpath(lib, real))
		return -errno;
	snprintf(out, len, "%s", real);
	*strrchr(out, '/') = 0;
	return 0;
}

/* Puts value first in the colon-separated list of environment variable
 * name. 0, or 127 having said why. */
static int env_prepend(const char *name, const char *value)
{
	const char *old = getenv(name);
	size_t l = strlen(value) + (old ? strlen(old) + 1 : 0) + 1;
	char *v = malloc(l);
	if (!v) {
		fputs("kinet-run: out of memory\n", stderr);
		return 127;
	}
	snprintf(v, l, "%s%s%s", value, old && *old ? ":" : "", old && *old ? old : "");
	int rc = setenv(name, v, 1);
	free(v);
	if (rc) {
		fprintf(stderr, "kinet-run: %s: %s\n", name, strerror(errno));
		return 127;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int first = 1;
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--"))
		first = 2;
	if (first >= argc) {
		usage(stderr);
		return 2;
	}
	char dir[PATH_MAX];
	int rc = verbs_dir(dir, sizeof(dir));
	if (rc) {
		fprintf(stderr, "kinet-run: kinet-verbs' libibverbs.so.1 not found beside %s: %s\n",
			argv[0], strerror(-rc));
		return 127;
	}
	if (env_prepend("LD_LIBRARY_PATH", dir))
		return 127;
	char pre[PATH_MAX + 32];
	snprintf(pre, sizeof(pre), "%s/libkinet_sysfs.so", dir);
	const char *preload = "";
	if (access(pre, R_OK) == 0) {
		if (env_prepend("LD_PRELOAD", pre))
			return 127;
		preload = ", LD_PRELOAD=libkinet_sysfs.so";
	}
	fprintf(stderr, "kinet-run: %s runs on kinet-verbs (LD_LIBRARY_PATH=%s%s)\n", argv[first],
		getenv("LD_LIBRARY_PATH"), preload);
	execvp(argv[first], argv + first);
	int e = errno;
	fprintf(stderr, "kinet-run: %s: %s\n", argv[first], strerror(e));
	return e == ENOENT ? 127 : 126;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet as a user gets it: this build installed into a fresh prefix has its
 * headers, libraries with their soname links, modules, tools, docs and
 * examples in the GNU folders, and a program outside the tree builds against
 * it with each of pkg-config, find_package(kinet) and add_subdirectory(kinet)
 * (tests/install/), then runs: the installed example put_local, which writes
 * random bytes through the software NIC and checks every one of them. The
 * installed copy is the one that runs (its modules included: the same program
 * over the emulated mlx5 loads the installed emulation module).
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include "kinet_config.h"

static char prefix[256]; /* the test's install prefix (and scratch folder) */

/* Runs a shell command, its output into prefix/log; returns the exit status.
 * On failure the log is shown. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[8192], full[9000];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cr_assert(n > 0 && (size_t)n < sizeof(cmd));
	snprintf(full, sizeof(full), "( %s ) > '%s/log' 2>&1", cmd, prefix);
	int st = system(full);
	int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (rc) {
		char show[9000];
		snprintf(show, sizeof(show), "tail -n 40 '%s/log' >&2", prefix);
		fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
		if (system(show))
			fprintf(stderr, "(no log)\n");
	}
	return rc;
}

/* 1 when prefix/log contains s. */
static int log_has(const char *s)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/log", prefix);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return strstr(buf, s) != NULL;
}

static int exists(const char *rel)
{
	char p[600];
	struct stat st;
	snprintf(p, sizeof(p), "%s/inst/%s", prefix, rel);
	return lstat(p, &st) == 0;
}

/* test_install.cmake: why this build cannot be installed and run as a user's */
static void need_installable(void)
{
#ifdef KINET_TEST_INSTALL_SKIP
	cr_skip_test("%s", KINET_TEST_INSTALL_SKIP);
#endif
}

/* A fresh prefix with this build installed in prefix/inst. */
static void install(void)
{
	need_installable();
	snprintf(prefix, sizeof(prefix), "/tmp/kinet-install-XXXXXX");
	cr_assert_not_null(mkdtemp(prefix));
	cr_assert_eq(sh("'%s' --install '%s' --prefix '%s/inst'", KINET_CMAKE, KINET_BUILD_DIR,
			prefix), 0);
}

static void cleanup(void)
{
	if (prefix[0] && sh("rm -rf '%s'", prefix) == 0)
		prefix[0] = 0;
}

/* Runs an installed-against put_local; it must load libkinet from prefix/inst. */
static void run_put_local(const char *exe, const char *libdir, const char *env)
{
	cr_assert_eq(sh("ldd '%s'", exe), 0);
	char want[600];
	snprintf(want, sizeof(want), "libkinet.so.%d => %s", KINET_VERSION_MAJOR, libdir);
	cr_assert(log_has(want), "%s does not load libkinet from %s", exe, libdir);
	cr_assert_eq(sh("env -u LD_LIBRARY_PATH KINET_BACKEND=soft %s '%s' 300007", env, exe), 0);
	cr_assert(log_has("put_local: 300007 bytes written by the soft backend, verified"));
}

#define LIB KINET_LIBDIR "/libkinet.so"

Test(install, lays_out_the_gnu_folders, .fini = cleanup)
{
	install();
	const char *files[] = {
		"include/kinet/kinet.h", "include/kinet/net.h", "include/kinet/boot.h",
		"include/kinet/device.h", "include/kinet/prm.h", LIB, LIB ".0",
		LIB "." KINET_VERSION, KINET_LIBDIR "/pkgconfig/kinet.pc",
		KINET_LIBDIR "/cmake/kinet/kinetConfig.cmake",
		KINET_LIBDIR "/cmake/kinet/kinetConfigVersion.cmake",
		KINET_LIBDIR "/cmake/kinet/kinetTargets.cmake", "bin/kinet-info", "bin/kinet-perf",
		KINET_DOCDIR "/README.md", KINET_DOCDIR "/architecture.md",
		KINET_DOCDIR "/examples/put_local.c", KINET_DOCDIR "/examples/put_remote.c",
		KINET_DOCDIR "/examples/put_cuda.cu",
#if KINET_HAVE_RDMA_HEADERS
		KINET_LIBDIR "/" KINET_MLX5EMU_MODULE,
#endif
#if KINET_HAVE_CUDA
		"include/kinet/kinet_cuda.h", "include/kinet/device_cuda.cuh",
		KINET_LIBDIR "/" KINET_CUDA_MODULE,
#endif
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		cr_expect(exists(files[i]), "%s/inst/%s is missing", prefix, files[i]);
#if !KINET_HAVE_CUDA /* no CUDA headers without the library behind them */
	cr_expect(!exists("include/kinet/kinet_cuda.h"));
	cr_expect(!exists("include/kinet/device_cuda.cuh"));
#endif
	/* the installed tools find the installed library */
	cr_assert_eq(sh("env -u LD_LIBRARY_PATH '%s/inst/bin/kinet-info'", prefix), 0);
	cr_assert(log_has("kinet " KINET_VERSION));
}

Test(install, pkg_config_consumer_builds_and_runs, .fini = cleanup)
{
	install();
	char pc[400];
	snprintf(pc, sizeof(pc), "PKG_CONFIG_PATH='%s/inst/" KINET_LIBDIR "/pkgconfig' '%s'", prefix,
		 KINET_PKG_CONFIG);
	cr_assert_eq(sh("%s --modversion kinet", pc), 0);
	cr_assert(log_has(KINET_VERSION));
	cr_assert_eq(sh("cd '%s' && '%s' -Wall -Wextra -Werror inst/" KINET_DOCDIR
			"/examples/put_local.c $(%s --cflags --libs kinet) "
			"-Wl,-rpath,$(%s --variable=libdir kinet) -o put_local_pc",
			prefix, KINET_CC, pc, pc),
		     0);
	char exe[300], libdir[300];
	snprintf(exe, sizeof(exe), "%s/put_local_pc", prefix);
	snprintf(libdir, sizeof(libdir), "%s/inst/" KINET_LIBDIR, prefix);
	run_put_local(exe, libdir, "");
#if KINET_HAVE_RDMA_HEADERS
	/* the installed emulation module, found beside the installed library */
	cr_assert_eq(sh("env -u LD_LIBRARY_PATH KINET_BACKEND=mlx5 KINET_MLX5_EMULATE=1 '%s' 65536",
			exe),
		     0);
	cr_assert(log_has("put_local: 65536 bytes written by the mlx5 backend, verified"));
#endif
}

Test(install, find_package_consumer_builds_and_runs, .fini = cleanup)
{
	install();
	char cuda[300] = "";
	if (KINET_HAVE_CUDA)
		snprintf(cuda, sizeof(cuda), "-DCMAKE_CUDA_COMPILER='%s'", KINET_CUDA_COMPILER);
	cr_assert_eq(sh("'%s' -S '%s/tests/install/find_package' -B '%s/fp' -G '%s' "
			"-DCMAKE_PREFIX_PATH='%s/inst' -DKINET_EXAMPLES='%s/inst/" KINET_DOCDIR
			"/examples' -DKINET_EXPECT_CUDA=%d %s && '%s' --build '%s/fp'",
			KINET_CMAKE, KINET_SOURCE_DIR, prefix, KINET_GENERATOR, prefix, prefix,
			KINET_HAVE_CUDA, cuda, KINET_CMAKE, prefix),
		     0);
	char exe[300], libdir[300];
	snprintf(exe, sizeof(exe), "%s/fp/put_local", prefix);
	snprintf(libdir, sizeof(libdir), "%s/inst/" KINET_LIBDIR, prefix);
	run_put_local(exe, libdir, "");
#if KINET_HAVE_CUDA
	/* compiled against kinet::cuda; it runs where there is a GPU (2: none) */
	int rc = sh("env -u LD_LIBRARY_PATH '%s/fp/put_cuda'", prefix);
	cr_assert(rc == 0 || (rc == 2 && log_has("put_cuda: no usable GPU")), "put_cuda: %d", rc);
	if (rc == 0)
		cr_assert(log_has("verified"));
#endif
}

Test(install, add_subdirectory_consumer_builds_and_runs, .fini = cleanup)
{
	need_installable();
	snprintf(prefix, sizeof(prefix), "/tmp/kinet-subdir-XXXXXX");
	cr_assert_not_null(mkdtemp(prefix));
	/* the library alone (no CUDA: compiling it is covered by the main build) */
	cr_assert_eq(sh("'%s' -S '%s/tests/install/subdir' -B '%s/sd' -G '%s' "
			"-DKINET_SOURCE='%s' -DKINET_WITH_CUDA=OFF && '%s' --build '%s/sd' -j 2",
			KINET_CMAKE, KINET_SOURCE_DIR, prefix, KINET_GENERATOR, KINET_SOURCE_DIR,
			KINET_CMAKE, prefix),
		     0);
	char exe[300], libdir[300];
	snprintf(exe, sizeof(exe), "%s/sd/put_local", prefix);
	snprintf(libdir, sizeof(libdir), "%s/sd/kinet/src", prefix);
	run_put_local(exe, libdir, "");
}

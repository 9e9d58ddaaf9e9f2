/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The NVSHMEM-style examples (examples/nvshmem, written against
 * kinet/nvshmem/nvshmem.h only), host-executor builds, as jobs of 2 to 4
 * processes on the loopback, over the same-node path and over the
 * software NIC's wire: each PE checks every byte it received (all-to-all)
 * or every element against a host reduction (all-reduce) and exits non-zero
 * on a difference; the test checks every exit status and every PE's line.
 * The all-to-all also runs under mpirun (the MPI bootstrap) where Open MPI is
 * installed and the build has MPI.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kinet_config.h"

#define EX_FN static __attribute__((unused))
#define DEADLINE_S 180

TestSuite(shmem_examples, .timeout = 600);

EX_FN int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* Runs prog as n ranks; each rank's stdout must hold want (formatted with
 * its rank and n) and its exit status be 0. */
EX_FN void job(const char *prog, int n, int p2p, const char *want_fmt)
{
	char addr[64], size[32], p2pv[32];
	snprintf(addr, sizeof(addr), "KINET_BOOT_ADDR=127.0.0.1:%d", free_port());
	snprintf(size, sizeof(size), "KINET_BOOT_SIZE=%d", n);
	snprintf(p2pv, sizeof(p2pv), "KINET_SHMEM_P2P=%d", p2p);
	pid_t pid[8];
	int out[8];
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		int p[2];
		cr_assert_eq(pipe(p), 0);
		pid[r] = fork();
		cr_assert(pid[r] >= 0);
		if (pid[r] == 0) {
			char rank[32];
			snprintf(rank, sizeof(rank), "KINET_BOOT_RANK=%d", r);
			unsetenv("BXFI_MAP");
			putenv(addr);
			putenv(size);
			putenv(rank);
			putenv(p2pv);
			putenv("KINET_BOOT_SECRET=shmem-ex");
			putenv("KINET_BACKEND=soft");
			putenv("KINET_SHMEM_EXEC=host");
			putenv("KINET_SHMEM_HEAP_SIZE=16M");
			putenv("FI_TCP_IFACE=lo");
			dup2(p[1], 1);
			close(p[0]);
			close(p[1]);
			alarm(DEADLINE_S);
			execl(prog, prog, (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		out[r] = p[0];
	}
	for (int r = 0; r < n; r++) {
		char buf[4096];
		size_t k = 0;
		ssize_t got;
		while (k + 1 < sizeof(buf) && (got = read(out[r], buf + k, sizeof(buf) - 1 - k)) > 0)
			k += (size_t)got;
		buf[k] = 0;
		close(out[r]);
		int st;
		cr_assert_eq(waitpid(pid[r], &st, 0), pid[r]);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s, %d PEs, same-node path %d: PE "
			  "%d ended with %d: %s", prog, n, p2p, r, st, buf);
		char want[256];
		snprintf(want, sizeof(want), want_fmt, r, n);
		cr_expect(strstr(buf, want), "PE %d: want \"%s\" in: %s", r, want, buf);
	}
}

Test(shmem_examples, alltoall_verifies_every_byte)
{
#ifdef KINET_EX_SHMEM_ALLTOALL
	for (int n = 2; n <= 4; n++)
		for (int p2p = 0; p2p < 2; p2p++)
			job(KINET_EX_SHMEM_ALLTOALL, n, p2p,
			    "PE %d of %d: 3 rounds of all-to-all");
#else
	cr_skip_test("examples not built (KINET_EXAMPLES=OFF)");
#endif
}

Test(shmem_examples, allreduce_matches_the_host_reduction)
{
#ifdef KINET_EX_SHMEM_ALLREDUCE
	for (int n = 2; n <= 4; n++)
		for (int p2p = 0; p2p < 2; p2p++)
			job(KINET_EX_SHMEM_ALLREDUCE, n, p2p, "PE %d of %d: 3 rounds of a ring all-reduce");
#else
	cr_skip_test("examples not built (KINET_EXAMPLES=OFF)");
#endif
}

/* nvshmem_init under mpirun: the MPI bootstrap, nothing else set */
Test(shmem_examples, alltoall_under_mpirun)
{
#ifdef KINET_EX_SHMEM_ALLTOALL
	if (!KINET_HAVE_MPI)
		cr_skip_test("this build has no MPI bootstrap");
	if (system("command -v mpirun >/dev/null 2>&1") != 0)
		cr_skip_test("mpirun (Open MPI) is not installed");
	for (int p2p = 0; p2p < 2; p2p++) {
		char cmd[1024];
		snprintf(cmd, sizeof(cmd),
			 "env -u BXFI_MAP -u KINET_BOOT_ADDR -u KINET_BOOT_RANK -u KINET_BOOT_SIZE "
			 "OMPI_MCA_btl_vader_single_copy_mechanism=none ASAN_OPTIONS=detect_leaks=0 "
			 "KINET_BACKEND=soft KINET_SHMEM_EXEC=host KINET_SHMEM_HEAP_SIZE=16M "
			 "KINET_SHMEM_P2P=%d FI_TCP_IFACE=lo timeout %d mpirun --allow-run-as-root "
			 "--oversubscribe -np 3 -x KINET_BACKEND -x KINET_SHMEM_EXEC "
			 "-x KINET_SHMEM_HEAP_SIZE -x KINET_SHMEM_P2P -x FI_TCP_IFACE '%s' 2>&1",
			 p2p, DEADLINE_S, KINET_EX_SHMEM_ALLTOALL);
		FILE *f = popen(cmd, "r");
		cr_assert_not_null(f);
		char out[8192];
		size_t n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = 0;
		int st = pclose(f);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "same-node path %d: %s", p2p, out);
		for (int r = 0; r < 3; r++) {
			char want[128];
			snprintf(want, sizeof(want), "PE %d of 3: 3 rounds of all-to-all", r);
			cr_expect(strstr(out, want), "want \"%s\" in: %s", want, out);
		}
	}
#else
	cr_skip_test("examples not built (KINET_EXAMPLES=OFF)");
#endif
}

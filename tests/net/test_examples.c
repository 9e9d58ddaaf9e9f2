/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The example programs in examples/ run as the README says and do what
 * they claim: put_local's write arrives intact at several sizes and bad
 * arguments are refused; put_remote's two processes connect through the
 * bootstrap and rank 1 verifies rank 0's write; boot_hello's roll call lists
 * both ranks. Each program checks its data itself (random contents, byte for
 * byte) and exits non-zero on any difference; the test checks the exit
 * status and what the programs print.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define EX_FN static __attribute__((unused)) /* with KINET_EXAMPLES=OFF */
#define DEADLINE_S 120 /* a program still running then is killed: the test fails */

struct prog {
	pid_t pid;
	int out; /* read end of its stdout */
};

/* Starts argv with extra environment entries; its stdout comes back in a pipe. */
EX_FN struct prog start(char *const argv[], char *const env[])
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		unsetenv("BXFI_MAP"); /* Criterion's sandbox stays out of the program */
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		alarm(DEADLINE_S);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	return (struct prog){pid, p[0]};
}

/* Waits for it: its exit status (-1 when killed), its stdout in out. */
EX_FN int finish(struct prog pr, char *out, size_t cap)
{
	size_t n = 0;
	ssize_t k;
	while (n + 1 < cap && (k = read(pr.out, out + n, cap - n - 1)) > 0)
		n += (size_t)k;
	out[n] = 0;
	close(pr.out);
	int st;
	cr_assert_eq(waitpid(pr.pid, &st, 0), pr.pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

EX_FN int run(char *const argv[], char *const env[], char *out, size_t cap)
{
	return finish(start(argv, env), out, cap);
}

/* A free loopback port (closed again: a small window for someone else). */
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

EX_FN char *soft[] = {"KINET_BACKEND=soft", NULL};

Test(examples, put_local_verifies_its_write)
{
#ifdef KINET_EX_PUT_LOCAL
	const char *sizes[] = {NULL, "1", "4097", "8388608"};
	char out[4096], want[128];
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *argv[] = {KINET_EX_PUT_LOCAL, (char *)sizes[i], NULL};
		cr_assert_eq(run(argv, soft, out, sizeof(out)), 0, "size %s: %s",
			     sizes[i] ? sizes[i] : "default", out);
		snprintf(want, sizeof(want), "put_local: %s bytes written by the soft backend, verified",
			 sizes[i] ? sizes[i] : "1048576");
		cr_assert(strstr(out, want), "want \"%s\" in: %s", want, out);
	}
	const char *bad[] = {"0", "2147483648"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = {KINET_EX_PUT_LOCAL, (char *)bad[i], NULL};
		cr_assert_eq(run(argv, soft, out, sizeof(out)), 2, "size %s is refused", bad[i]);
	}
#else
	cr_skip_test("examples not built (KINET_EXAMPLES=OFF)");
#endif
}

/* Runs prog as ranks 0 and 1 of a bootstrap job on the loopback; the
 * outputs in out0 / out1, and both exit statuses must be 0. */
EX_FN void two_ranks(char *prog, char *out0, char *out1, size_t cap)
{
	char addr[64];
	snprintf(addr, sizeof(addr), "KINET_BOOT_ADDR=127.0.0.1:%d", free_port());
	char *argv[] = {prog, NULL};
	char *env0[] = {addr, "KINET_BOOT_RANK=0", "KINET_BOOT_SIZE=2", "KINET_BOOT_SECRET=ex7",
			"KINET_BACKEND=soft", NULL};
	char *env1[] = {addr, "KINET_BOOT_RANK=1", "KINET_BOOT_SIZE=2", "KINET_BOOT_SECRET=ex7",
			"KINET_BACKEND=soft", NULL};
	struct prog r0 = start(argv, env0), r1 = start(argv, env1);
	int s1 = finish(r1, out1, cap), s0 = finish(r0, out0, cap);
	cr_assert_eq(s0, 0, "%s rank 0 exited with %d: %s", prog, s0, out0);
	cr_assert_eq(s1, 0, "%s rank 1 exited with %d: %s", prog, s1, out1);
}

Test(examples, put_remote_verifies_across_two_processes)
{
#ifdef KINET_EX_PUT_REMOTE
	char out0[4096], out1[4096];
	two_ranks(KINET_EX_PUT_REMOTE, out0, out1, sizeof(out0));
	cr_assert(strstr(out1, "put_remote: 1048576 bytes written by rank 0, verified (bootstrap: tcp)"),
		  "%s", out1);
	cr_assert_eq(out0[0], 0, "rank 0 prints nothing: %s", out0);
#else
	cr_skip_test("examples not built (KINET_EXAMPLES=OFF)");
#endif
}

Test(examples, boot_hello_lists_both_ranks)
{
#ifdef KINET_EX_BOOT_HELLO
	char out0[4096], out1[4096], want[64];
	two_ranks(KINET_EX_BOOT_HELLO, out0, out1, sizeof(out0));
	cr_assert(strstr(out0, "2 processes over tcp"), "%s", out0);
	for (int r = 0; r < 2; r++) {
		snprintf(want, sizeof(want), "  rank %d: pid ", r);
		cr_assert(strstr(out0, want), "%s", out0);
	}
	cr_assert_eq(out1[0], 0, "rank 1 prints nothing: %s", out1);
#else
	cr_skip_test("examples not built (KINET_EXAMPLES=OFF)");
#endif
}

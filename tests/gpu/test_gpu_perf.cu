/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-perf's cuda executor across processes, on a GPU: the built binary
 * with --pair and as a server and a client on loopback (the software NIC
 * over the tcp provider), payloads in GPU memory (--mem gpu: cudaMalloc,
 * registered with the NIC) at thread, warp and block scope, every test. Each
 * run checks its data byte for byte on random contents; the side that holds
 * the destination reads its GPU memory back with a CUDA copy for the check,
 * so a run that passes shows that the peer's messages landed there. Also:
 * one side in GPU memory and the other in host memory (the JSON records
 * name both kinds), a host server with a warp-scope client, --corrupt
 * caught, and a server refusing a client of another scope. Tiny iteration
 * counts; exit statuses and the records' metadata, never speed. Runs
 * without the MPS daemon too (write_lat is slow then, not wrong).
 *
 * The binary: $KINET_PERF_BIN, else the path given at build time
 * (test_gpu_perf.cmake), else ../tools/perf/kinet-perf.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <kinet/kinet_cuda.h>
#include "../util/perf_bin.h"
#include "gpu_need.h"

#define RUN_MS 300000 /* bound on any process of a test */

struct proc {
	pid_t pid;
	char path[2][64]; /* stdout, stderr: temporary files */
	char *text[2];
	int status;       /* exit status, 128 + signal */
};

static void secret_env(char *buf, size_t cap)
{
	snprintf(buf, cap, "KINET_BOOT_SECRET=gpuperf%ld%d", (long)time(NULL), (int)getpid());
}

/* Starts kinet-perf with args (NULL-terminated, without argv[0]). */
static void start(struct proc *p, const char *const *args)
{
	static char secret[96];
	if (!secret[0])
		secret_env(secret, sizeof(secret));
	const char *bin = perf_bin();
	const char *argv[64];
	int argc = 0, fd[2];
	argv[argc++] = bin;
	for (int i = 0; args[i]; i++) {
		cr_assert_lt(argc, 62);
		argv[argc++] = args[i];
	}
	argv[argc] = NULL;
	memset(p, 0, sizeof(*p));
	for (int k = 0; k < 2; k++) {
		snprintf(p->path[k], sizeof(p->path[k]), "/tmp/kinet_gpu_perf_XXXXXX");
		fd[k] = mkstemp(p->path[k]);
		cr_assert(fd[k] >= 0, "mkstemp: %s", strerror(errno));
	}
	fflush(NULL);
	p->pid = fork();
	cr_assert(p->pid >= 0);
	if (p->pid == 0) {
		dup2(fd[0], 1);
		dup2(fd[1], 2);
		unsetenv("BXFI_MAP"); /* Criterion's worker sandbox stays out */
		setenv("FI_TCP_IFACE", "lo", 1);
		putenv(secret);
		execv(bin, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	close(fd[0]);
	close(fd[1]);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	size_t cap = 4096, n = 0;
	char *s = (char *)malloc(cap);
	cr_assert_not_null(s);
	for (;;) {
		if (n + 2048 > cap) {
			cap *= 2;
			s = (char *)realloc(s, cap);
			cr_assert_not_null(s);
		}
		size_t got = fread(s + n, 1, cap - n - 1, f);
		if (!got)
			break;
		n += got;
	}
	s[n] = 0;
	fclose(f);
	return s;
}

/* Waits for n processes (killing them all after RUN_MS) and reads what
 * they printed. */
static void finish(struct proc *ps, int n)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int left = n;
	bool killed = false;
	for (int i = 0; i < n; i++)
		ps[i].status = -1;
	while (left) {
		for (int i = 0; i < n; i++) {
			int st;
			if (ps[i].status >= 0 || waitpid(ps[i].pid, &st, WNOHANG) != ps[i].pid)
				continue;
			ps[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			left--;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (left && ms > RUN_MS && !killed) {
			for (int i = 0; i < n; i++)
				if (ps[i].status < 0)
					kill(ps[i].pid, SIGKILL);
			killed = true;
		}
		if (left)
			usleep(20000);
	}
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 2; k++) {
			ps[i].text[k] = slurp(ps[i].path[k]);
			unlink(ps[i].path[k]);
		}
}

static void proc_free(struct proc *p)
{
	free(p->text[0]);
	free(p->text[1]);
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t sl = sizeof(sa);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* Every line of a --json run's stdout is a record of the test that says
 * each of the strings in want; returns the number of records. */
static int check_records(const char *out, const char *test, const char *const *want)
{
	char tbuf[64];
	snprintf(tbuf, sizeof(tbuf), "\"test\":\"%s\"", test);
	int n = 0;
	const char *p = out;
	while (*p) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char line[8192];
		cr_assert_lt(len, sizeof(line));
		memcpy(line, p, len);
		line[len] = 0;
		if (len) {
			cr_assert(line[0] == '{' && line[len - 1] == '}', "not a record: %s", line);
			cr_assert_not_null(strstr(line, tbuf), "%s", line);
			cr_assert_not_null(strstr(line, "\"verified\":true"), "%s", line);
			cr_assert_not_null(strstr(line, "\"processes\":2"), "%s", line);
			for (int i = 0; want[i]; i++)
				cr_assert_not_null(strstr(line, want[i]), "%s: no %s", line, want[i]);
			n++;
		}
		p += len + (e ? 1 : 0);
	}
	return n;
}

static void need_gpu(void)
{
	cr_assert(kinet_cuda_available(), "no usable GPU (this test is label gpu)");
}

/* ---- --pair, GPU memory at both ends ---------------------------------------------- */

static const char *const TESTS[] = {"write_bw",  "write_lat", "read_bw",  "read_lat", "atomic_bw",
				    "atomic_lat", "send_bw",  "send_lat", "put_bw"};

Test(gpu_perf, pair_every_test_every_scope_gpu_memory)
{
	need_gpu();
	const char *scopes[] = {"thread", "warp", "block"};
	for (int t = 0; t < 9; t++)
		for (int s = 0; s < 3; s++) {
			bool atomic = strstr(TESTS[t], "atomic") != NULL;
			if (s && !strncmp(TESTS[t], "send_", 5))
				continue; /* thread scope only */
			const char *a[32];
			int n = 0;
			a[n++] = TESTS[t];
			a[n++] = "--pair";
			a[n++] = "--executor";
			a[n++] = "cuda";
			a[n++] = "--mem";
			a[n++] = "gpu";
			a[n++] = "--json";
			a[n++] = "-n";
			a[n++] = "20";
			a[n++] = "--warmup";
			a[n++] = "2";
			a[n++] = "--scope";
			a[n++] = scopes[s];
			a[n++] = "--threads";
			a[n++] = s == 0 ? "2" : s == 1 ? "64" : "128";
			if (s == 2) {
				a[n++] = "--cta-threads";
				a[n++] = "64";
			}
			if (!atomic) {
				a[n++] = "-s";
				a[n++] = "4096";
			}
			a[n] = NULL;
			struct proc p;
			start(&p, a);
			finish(&p, 1);
			cr_assert_eq(p.status, 0, "%s --scope %s: status %d, stderr:\n%s", TESTS[t],
				     scopes[s], p.status, p.text[1]);
			char scope[48];
			snprintf(scope, sizeof(scope), "\"scope\":\"%s\"", scopes[s]);
			const char *want[] = {"\"executor\":\"cuda\"", "\"mem_initiator\":\"gpu\"",
					      "\"mem_target\":\"gpu\"", "\"mem\":\"gpu\"", scope,
					      NULL};
			cr_assert_eq(check_records(p.text[0], TESTS[t], want), 1, "%s --scope %s:\n%s",
				     TESTS[t], scopes[s], p.text[0]);
			proc_free(&p);
		}
}

/* A sweep: the buffer goes in and out of GPU memory at every size. */
Test(gpu_perf, pair_sweep_gpu_memory)
{
	need_gpu();
	const char *a[] = {"write_lat", "--pair", "--executor", "cuda", "--mem", "gpu", "--json",
			   "--scope", "warp", "--threads", "32", "-a", "--max-size", "64K", "-n",
			   "10", "--warmup", "1", NULL};
	struct proc p;
	start(&p, a);
	finish(&p, 1);
	cr_assert_eq(p.status, 0, "status %d, stderr:\n%s", p.status, p.text[1]);
	const char *want[] = {"\"mem_target\":\"gpu\"", NULL};
	cr_assert_eq(check_records(p.text[0], "write_lat", want), 16, "sizes 2 to 64K:\n%s",
		     p.text[0]);
	proc_free(&p);
}

/* ---- a server and a client: each its own executor and memory -------------------------- */

static void server_client(const char *test, const char *const *srv, const char *const *cli,
			  struct proc *ps)
{
	static char port[16], addr[32];
	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(addr, sizeof(addr), "127.0.0.1:%s", port);
	const char *sa[32], *ca[32];
	int ns = 0, nc = 0;
	sa[ns++] = test;
	sa[ns++] = "--server";
	sa[ns++] = "-p";
	sa[ns++] = port;
	sa[ns++] = "--timeout";
	sa[ns++] = "120";
	for (int i = 0; srv[i]; i++)
		sa[ns++] = srv[i];
	sa[ns] = NULL;
	ca[nc++] = test;
	ca[nc++] = addr;
	ca[nc++] = "--timeout";
	ca[nc++] = "120";
	for (int i = 0; cli[i]; i++)
		ca[nc++] = cli[i];
	ca[nc] = NULL;
	start(&ps[0], sa);
	start(&ps[1], ca);
	finish(ps, 2);
}

Test(gpu_perf, server_client_mixed_memory)
{
	need_gpu();
	/* the server's payload in GPU memory, the client's in host memory; the
	 * server takes the client's warp scope for its replies */
	const char *s1[] = {"--executor", "cuda", "--mem", "gpu", NULL};
	const char *c1[] = {"--executor", "cuda", "--scope", "warp", "--threads", "64",
			    "--mem", "host", "--json", "-n", "20", "-s", "1000", NULL};
	struct proc ps[2];
	server_client("write_lat", s1, c1, ps);
	cr_assert_eq(ps[0].status, 0, "server: %d, stderr:\n%s", ps[0].status, ps[0].text[1]);
	cr_assert_eq(ps[1].status, 0, "client: %d, stderr:\n%s", ps[1].status, ps[1].text[1]);
	const char *w1[] = {"\"mem_initiator\":\"host\"", "\"mem_target\":\"gpu\"",
			    "\"scope\":\"warp\"", NULL};
	cr_assert_eq(check_records(ps[1].text[0], "write_lat", w1), 1, "%s", ps[1].text[0]);
	cr_assert_not_null(strstr(ps[0].text[0], " Payload memory  : GPU memory"), "%s",
			   ps[0].text[0]);
	cr_assert_not_null(strstr(ps[0].text[0], "2 CTAs x 32 threads, warp scope"), "%s",
			   ps[0].text[0]);
	proc_free(&ps[0]);
	proc_free(&ps[1]);

	/* a host server (its threads reply alone, on the warps' QPs) and a
	 * block-scope client in GPU memory */
	const char *s2[] = {"--executor", "host", NULL};
	const char *c2[] = {"--executor", "cuda", "--scope", "block", "--threads", "64",
			    "--cta-threads", "32", "--mem", "gpu", "--json", "-n", "20", "-s",
			    "512", NULL};
	const char *tests[] = {"write_lat", "read_bw", "atomic_bw"};
	for (int t = 0; t < 3; t++) {
		if (t == 2)
			c2[13] = NULL; /* atomic_bw: 8-byte messages, no -s */
		server_client(tests[t], s2, c2, ps);
		cr_assert_eq(ps[0].status, 0, "%s server: %d, stderr:\n%s\nclient: %d, stderr:\n%s",
			     tests[t], ps[0].status, ps[0].text[1], ps[1].status, ps[1].text[1]);
		cr_assert_eq(ps[1].status, 0, "%s client: %d, stderr:\n%s", tests[t], ps[1].status,
			     ps[1].text[1]);
		const char *w2[] = {"\"executor\":\"cuda\"", "\"mem_initiator\":\"gpu\"",
				    "\"mem_target\":\"host\"", NULL};
		cr_assert_eq(check_records(ps[1].text[0], tests[t], w2), 1, "%s", ps[1].text[0]);
		proc_free(&ps[0]);
		proc_free(&ps[1]);
	}
}

/* A server given a scope refuses a client of another one: both exit 1 and
 * say why. */
Test(gpu_perf, scope_mismatch_refused)
{
	need_gpu();
	const char *s[] = {"--executor", "cuda", "--scope", "block", NULL};
	const char *c[] = {"--executor", "cuda", "--scope", "warp", NULL};
	struct proc ps[2];
	server_client("write_bw", s, c, ps);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ps[i].status, 1, "status %d, stderr:\n%s", ps[i].status, ps[i].text[1]);
		cr_assert_not_null(strstr(ps[i].text[1], "different scopes (--scope)"), "%s",
				   ps[i].text[1]);
		proc_free(&ps[i]);
	}
}

/* ---- the data check is real ------------------------------------------------------------ */

Test(gpu_perf, corruption_detected_gpu_memory)
{
	need_gpu();
	const char *tests[] = {"write_bw", "write_lat", "read_bw", "atomic_bw"};
	for (int t = 0; t < 4; t++) {
		bool atomic = strstr(tests[t], "atomic") != NULL;
		const char *a[] = {tests[t], "--pair", "--executor", "cuda", "--mem", "gpu",
				   "--scope", "warp", "--threads", "32", "-n", "10", "--corrupt",
				   atomic ? NULL : "-s", "256", NULL};
		struct proc p;
		start(&p, a);
		finish(&p, 1);
		cr_assert_eq(p.status, 1, "%s: status %d, stderr:\n%s", tests[t], p.status,
			     p.text[1]);
		cr_assert_not_null(strstr(p.text[1], "data check failed"), "%s: %s", tests[t],
				   p.text[1]);
		proc_free(&p);
	}
}

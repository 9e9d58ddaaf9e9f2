/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-perf across processes, as a user runs it: the built binary as a
 * server and a client on loopback (`kinet-perf TEST -p PORT`, no host: the
 * server, as perftest; `kinet-perf TEST 127.0.0.1:PORT`), `--pair`, and
 * `--pair=threads` on the mlx5 backend over the emulated rdma-core. Tiny
 * iteration counts; checks exit statuses, the output format on both sides,
 * that the server takes the client's run options, that the data check works
 * across processes (--corrupt), real perftest command lines (server and
 * client), a client that finds no server (a line per attempt until
 * --timeout), and the refusals: a wrong job secret, mismatched tests or
 * options, a peer that dies, bad usage. Never speed.
 *
 * The binary: $KINET_PERF_BIN, else the path given at build time
 * (tests/net/test_perf_remote.cmake), else ../tools/perf/kinet-perf next to
 * this program.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "test_wire_common.h"

#define RUN_MS 120000 /* bound on any process of a test */

#include "../util/perf_bin.h"

/* ---- processes ------------------------------------------------------------------- */

struct proc {
	pid_t pid;
	int fd[2];        /* stdout, stderr (read ends) */
	char *text[2];    /* what they said */
	size_t len[2];
	int status;       /* exit status, 128 + signal, or -1 while running */
};

static char secret_env[64];

static void init_secret(void)
{
	uint8_t r[8];
	cr_assert_eq(getrandom(r, sizeof(r), 0), (ssize_t)sizeof(r));
	snprintf(secret_env, sizeof(secret_env), "KINET_BOOT_SECRET=%02x%02x%02x%02x%02x%02x%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

/* Starts kinet-perf with args (NULL-terminated, without argv[0]) and more
 * environment assignments (env, NULL-terminated, or NULL). The job secret of
 * this test is in its environment unless args set --secret. */
static void start_env(struct proc *p, const char *const *args, const char *const *env)
{
	const char *bin = perf_bin();
	const char *argv[64];
	int argc = 0, po[2], pe[2];
	argv[argc++] = bin;
	for (int i = 0; args[i]; i++)
		argv[argc++] = args[i];
	/* remote jobs run on the host executor only: say so, for machines where
	 * the cuda executor is the default */
	argv[argc++] = "--executor";
	argv[argc++] = "host";
	argv[argc] = NULL;
	cr_assert_eq(pipe(po), 0);
	cr_assert_eq(pipe(pe), 0);
	memset(p, 0, sizeof(*p));
	p->status = -1;
	fflush(NULL);
	p->pid = fork();
	cr_assert(p->pid >= 0);
	if (p->pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		close(po[1]);
		close(pe[1]);
		/* the sandbox of Criterion's worker must not leak into the program */
		unsetenv("BXFI_MAP");
		/* the tcp provider on loopback; bounded waits */
		setenv("FI_TCP_IFACE", "lo", 1);
		setenv("KINET_NET_TIMEOUT_MS", "3000", 1);
		putenv(secret_env);
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(bin, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	p->fd[0] = po[0];
	p->fd[1] = pe[0];
}

static void start(struct proc *p, const char *const *args)
{
	start_env(p, args, NULL);
}

static void append(struct proc *p, int k, const char *buf, size_t n)
{
	p->text[k] = realloc(p->text[k], p->len[k] + n + 1);
	cr_assert_not_null(p->text[k]);
	memcpy(p->text[k] + p->len[k], buf, n);
	p->len[k] += n;
	p->text[k][p->len[k]] = 0;
}

/* Collects the output of n processes until they all exit; kills them all
 * after RUN_MS. */
static void finish(struct proc *ps, int n)
{
	uint64_t end = tw_ms() + RUN_MS;
	for (;;) {
		struct pollfd fds[16];
		int who[16], nf = 0;
		for (int i = 0; i < n; i++)
			for (int k = 0; k < 2; k++)
				if (ps[i].fd[k] >= 0) {
					fds[nf] = (struct pollfd){ps[i].fd[k], POLLIN, 0};
					who[nf++] = i * 2 + k;
				}
		if (!nf)
			break;
		uint64_t now = tw_ms();
		if (now >= end) {
			for (int i = 0; i < n; i++)
				kill(ps[i].pid, SIGKILL);
			end = UINT64_MAX / 2; /* the pipes close now */
			continue;
		}
		int r = poll(fds, (nfds_t)nf, (int)(end - now < 1000 ? end - now : 1000));
		if (r < 0 && errno == EINTR)
			continue;
		cr_assert(r >= 0);
		for (int f = 0; f < nf; f++) {
			if (!(fds[f].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			struct proc *p = &ps[who[f] / 2];
			int k = who[f] % 2;
			char buf[4096];
			ssize_t got = read(p->fd[k], buf, sizeof(buf));
			if (got <= 0) {
				close(p->fd[k]);
				p->fd[k] = -1;
			} else {
				append(p, k, buf, (size_t)got);
			}
		}
	}
	for (int i = 0; i < n; i++) {
		int st = 0;
		cr_assert_eq(waitpid(ps[i].pid, &st, 0), ps[i].pid);
		ps[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		for (int k = 0; k < 2; k++)
			if (!ps[i].text[k])
				append(&ps[i], k, "", 0);
	}
}

static void proc_free(struct proc *p)
{
	free(p->text[0]);
	free(p->text[1]);
}

/* A port nobody listens on now (the kernel's pick). */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* A server on a fresh port and a client of it; both run to their end.
 * srv_extra / cli_extra: more arguments (NULL-terminated, may be empty). */
static void server_client(const char *test, const char *const *srv_extra,
			  const char *const *cli_extra, struct proc *srv, struct proc *cli)
{
	static char port[16], addr[32];
	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(addr, sizeof(addr), "127.0.0.1:%s", port);
	const char *sa[32] = {test, "-p", port, "--timeout", "60"}; /* no host: the server */
	const char *ca[32] = {test, addr, "--timeout", "60"};
	int ns = 5, nc = 4;
	for (int i = 0; srv_extra && srv_extra[i]; i++)
		sa[ns++] = srv_extra[i];
	for (int i = 0; cli_extra && cli_extra[i]; i++)
		ca[nc++] = cli_extra[i];
	sa[ns] = ca[nc] = NULL;
	struct proc ps[2];
	start(&ps[0], sa);
	start(&ps[1], ca); /* the client retries until the server listens */
	finish(ps, 2);
	*srv = ps[0];
	*cli = ps[1];
}

/* ---- output ------------------------------------------------------------------------ */

/* The rows of the table under header in text: their count; the text of all
 * rows (for comparing two outputs) in rows_text. Each row must have ncol
 * numbers. */
static int table(const char *text, const char *header, int ncol, double rows[][16], int max,
		 char *rows_text, size_t cap)
{
	const char *h = strstr(text, header);
	cr_assert_not_null(h, "column header not found in:\n%s", text);
	cr_assert_null(strstr(h + 1, header), "two tables in:\n%s", text);
	const char *p = strchr(h, '\n');
	cr_assert_not_null(p);
	p++;
	const char *first = p;
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
		int k = 0;
		char *save = NULL;
		for (char *tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
			char *end;
			cr_assert_lt(k, 16);
			rows[n][k++] = strtod(tok, &end);
			cr_assert(*end == 0, "not a number: '%s'", tok);
		}
		cr_assert_eq(k, ncol, "a row has %d numbers, expected %d", k, ncol);
		n++;
		p = nl + 1;
	}
	cr_assert_eq(*p, '-', "the table is not closed by a rule:\n%s", text);
	if (rows_text) {
		size_t len = (size_t)(p - first);
		cr_assert_lt(len, cap);
		memcpy(rows_text, first, len);
		rows_text[len] = 0;
	}
	return n;
}

static void check_bw_row(const double *r, double bytes, double iters)
{
	cr_assert_eq(r[0], bytes);
	cr_assert_eq(r[1], iters);
	/* small messages on a loaded machine can print a bandwidth of 0.00
	 * (MB/s or Gb/s, 2 decimals); the message rate (6 decimals) stays
	 * positive, and a zero is only allowed where it is rounding */
	cr_assert_gt(r[4], 0.0, "MsgRate must be positive");
	cr_assert(r[3] > 0.0 || (r[3] == 0.0 && bytes * r[4] < 10.0),
		  "BW average %.2f at %g bytes, %.6f Mpps", r[3], bytes, r[4]);
	cr_assert_geq(r[2], r[3], "BW peak below BW average");
}

static void check_lat_row(const double *r, double bytes, double iters)
{
	cr_assert_eq(r[0], bytes);
	cr_assert_eq(r[1], iters);
	cr_assert_gt(r[2], 0.0);
	cr_assert(r[2] <= r[4] && r[4] <= r[3], "t_typical out of [t_min, t_max]");
	cr_assert(r[2] <= r[5] && r[5] <= r[3], "t_avg out of [t_min, t_max]");
}

/* Both sides printed the same table, with `rows` rows of `bytes` (doubling)
 * and `iters` iterations, and say which side they are. */
static void check_both(const struct proc *srv, const struct proc *cli, const char *test,
		       int nrows, double bytes, double iters)
{
	bool lat = strstr(test, "_lat") != NULL;
	double rs[16][16], rc[16][16];
	char ts[4096], tc[4096];
	cr_assert_eq(cli->status, 0, "%s: client status %d, stderr:\n%s\nserver stderr:\n%s", test,
		     cli->status, cli->text[1], srv->text[1]);
	cr_assert_eq(srv->status, 0, "%s: server status %d, stderr:\n%s", test, srv->status,
		     srv->text[1]);
	int n = table(cli->text[0], lat ? LAT_HEADER : BW_HEADER, lat ? 9 : 5, rc, 16, tc,
		      sizeof(tc));
	cr_assert_eq(n, nrows, "%s: client has %d rows", test, n);
	for (int i = 0; i < n; i++) {
		if (lat)
			check_lat_row(rc[i], bytes * (1u << i), iters);
		else
			check_bw_row(rc[i], bytes * (1u << i), iters);
	}
	cr_assert_eq(table(srv->text[0], lat ? LAT_HEADER : BW_HEADER, lat ? 9 : 5, rs, 16, ts,
			   sizeof(ts)),
		     nrows);
	cr_assert_str_eq(ts, tc, "%s: the server's rows differ from the client's", test);
	cr_assert_not_null(strstr(cli->text[0], " Processes       : 2, this is the client"));
	cr_assert_not_null(strstr(srv->text[0], " Processes       : 2, this is the server"));
	cr_assert_not_null(strstr(srv->text[0], " Waiting for a client on "));
}

static void setup(void)
{
	init_secret();
	int w = tw_have_wire();
	if (w == 77)
		cr_skip_test("this build has no libfabric wire (or its provider is missing)");
	cr_assert_eq(w, 0, "probing the wire failed");
}

TestSuite(perf_remote, .init = setup, .timeout = 600);

/* ---- runs that succeed --------------------------------------------------------------- */

/* Every test with something across processes: the server passive (writes,
 * reads, atomics), answering (write_lat, send_lat) or receiving (send_bw,
 * send_lat). */
Test(perf_remote, every_test_server_client)
{
	const char *tests[] = {"write_bw",  "write_lat",  "read_bw", "read_lat", "atomic_bw",
			       "atomic_lat", "send_bw", "send_lat", "put_bw"};
	for (int t = 0; t < 9; t++) {
		bool atomic = strstr(tests[t], "atomic") != NULL;
		const char *cli[] = {"-n", "25", "--warmup", "3", "-t", "8", "-s", atomic ? "8" : "300",
				     NULL};
		struct proc s, c;
		server_client(tests[t], NULL, cli, &s, &c);
		check_both(&s, &c, tests[t], 1, atomic ? 8 : 300, 25);
		proc_free(&s);
		proc_free(&c);
	}
}

/* The server was given no run options: it takes the client's (threads,
 * shared QP, a size sweep); given the same ones, it agrees. */
Test(perf_remote, server_takes_the_clients_options)
{
	const char *c1[] = {"--threads", "2", "-a", "--max-size", "64", "-n", "20", "-t", "4", NULL};
	struct proc s, c;
	server_client("write_bw", NULL, c1, &s, &c);
	check_both(&s, &c, "write_bw", 6, 2, 20);
	cr_assert_not_null(strstr(s.text[0], "Executor        : host, 2 threads"));
	proc_free(&s);
	proc_free(&c);

	const char *c2[] = {"--threads", "3", "--shared", "-n", "30", NULL};
	server_client("atomic_bw", c2, c2, &s, &c);
	check_both(&s, &c, "atomic_bw", 1, 8, 30);
	cr_assert_not_null(strstr(c.text[0], "one QP shared by all threads"));
	proc_free(&s);
	proc_free(&c);

	const char *c3[] = {"--threads", "2", "-n", "40", "-s", "1000", NULL};
	server_client("send_bw", NULL, c3, &s, &c);
	check_both(&s, &c, "send_bw", 1, 1000, 40);
	proc_free(&s);
	proc_free(&c);
}

/* send_lat across processes (perftest's ib_send_lat): both sides keep
 * receives posted, the server answers each SEND with one of its own. A
 * sweep with --pair, where each size is checked on both sides (the last
 * message byte for byte, every message's length and stamp); two threads
 * between a server and a client; a duration run, where the server learns
 * from the stop word how many messages came; the data check on a flipped
 * byte of the server's receive buffer, and on a message damaged on the
 * wire. */
Test(perf_remote, send_lat)
{
	const char *a[] = {"send_lat", "--pair", "-a", "--max-size", "8K", "-n", "5", "--warmup",
			   "2", NULL};
	struct proc p;
	start(&p, a);
	finish(&p, 1);
	cr_assert_eq(p.status, 0, "status %d, stderr:\n%s", p.status, p.text[1]);
	cr_assert_not_null(strstr(p.text[0], "Send Latency Test"), "%s", p.text[0]);
	double rows[16][16];
	int n = table(p.text[0], LAT_HEADER, 9, rows, 16, NULL, 0);
	cr_assert_eq(n, 13, "sizes 2..8192 are 13 rows, got %d", n);
	for (int i = 0; i < n; i++)
		check_lat_row(rows[i], (double)(2u << i), 5);
	proc_free(&p);

	const char *cli[] = {"--threads", "2", "-n", "20", "-s", "777", NULL};
	struct proc s, c;
	server_client("send_lat", NULL, cli, &s, &c);
	check_both(&s, &c, "send_lat", 1, 777, 20);
	proc_free(&s);
	proc_free(&c);

	const char *d[] = {"send_lat", "--pair", "-D", "1", "-s", "64", NULL};
	start(&p, d);
	finish(&p, 1);
	cr_assert_eq(p.status, 0, "status %d, stderr:\n%s", p.status, p.text[1]);
	cr_assert_eq(table(p.text[0], " #bytes        #iterations       t_avg[usec]", 4, rows, 4,
			   NULL, 0),
		     1);
	cr_assert_eq(rows[0][0], 64);
	cr_assert_gt(rows[0][1], 0, "no message in 1 s");
	proc_free(&p);

	const char *x[] = {"send_lat", "--pair", "-n", "10", "-s", "100", "--corrupt", NULL};
	start(&p, x);
	finish(&p, 1);
	cr_assert_eq(p.status, 1, "status %d, stderr:\n%s", p.status, p.text[1]);
	cr_assert_not_null(strstr(p.text[1], "server: data check failed at 100 bytes: thread 0: "
					     "the server's receive buffer differs at byte 50"),
			   "stderr:\n%s", p.text[1]);
	proc_free(&p);

	/* every message is checked as it arrives: the stamp in the last byte of
	 * message 4 flipped on the wire (both sides' receive paths), a fault the
	 * check of the last message alone would miss */
	const char *f[] = {"send_lat", "--pair", "-n", "20", "-s", "16", NULL};
	const char *fenv[] = {"KINET_FAULT=action=corrupt,op=send,byte=15,after=4,count=1", NULL};
	start_env(&p, f, fenv);
	finish(&p, 1);
	cr_assert_eq(p.status, 1, "status %d, stderr:\n%s", p.status, p.text[1]);
	cr_assert_not_null(strstr(p.text[1], "data check failed at 16 bytes: thread 0: 1 "
					     "message(s) came back wrong, the first is number 4 "
					     "(receive length or last byte)"),
			   "stderr:\n%s", p.text[1]);
	proc_free(&p);
}

Test(perf_remote, pair_one_command)
{
	const char *tests[] = {"write_bw", "write_lat", "read_bw"};
	for (int t = 0; t < 3; t++) {
		bool lat = strstr(tests[t], "_lat") != NULL;
		const char *a[] = {tests[t], "--pair", "-n", "30", "-s", "512", NULL};
		struct proc p;
		start(&p, a);
		finish(&p, 1);
		cr_assert_eq(p.status, 0, "%s: status %d, stderr:\n%s", tests[t], p.status, p.text[1]);
		double rows[4][16];
		/* one table: the client's (the server of a pair is silent) */
		cr_assert_eq(table(p.text[0], lat ? LAT_HEADER : BW_HEADER, lat ? 9 : 5, rows, 4,
				   NULL, 0),
			     1);
		if (lat)
			check_lat_row(rows[0], 512, 30);
		else
			check_bw_row(rows[0], 512, 30);
		cr_assert_not_null(strstr(p.text[0], "this is the client"));
		cr_assert_null(strstr(p.text[0], "this is the server"));
		proc_free(&p);
	}
	/* --json: nothing but one JSON object per size on stdout */
	const char *a[] = {"put_bw", "--pair", "--json", "-n", "20", "-a", "--max-size", "8", NULL};
	struct proc p;
	start(&p, a);
	finish(&p, 1);
	cr_assert_eq(p.status, 0, "stderr:\n%s", p.text[1]);
	int lines = 0;
	char *save = NULL;
	for (char *l = strtok_r(p.text[0], "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		cr_assert(l[0] == '{' && l[strlen(l) - 1] == '}', "not a JSON object: %s", l);
		cr_assert_not_null(strstr(l, "\"test\":\"put_bw\""), "%s", l);
		cr_assert_not_null(strstr(l, "\"processes\":2"), "%s", l);
		cr_assert_not_null(strstr(l, "\"verified\":true"), "%s", l);
		lines++;
	}
	cr_assert_eq(lines, 3, "sizes 2, 4, 8: %d lines", lines);
	proc_free(&p);
}

/* ---- the data check across processes ----------------------------------------------- */

/* --corrupt flips a byte of what one side holds after the run: the side
 * that holds the destination finds it, and both processes fail. */
Test(perf_remote, corruption_detected)
{
	struct {
		const char *test, *checker;
	} cases[] = {
		{"write_bw", "server"}, {"read_bw", "client"},  {"send_bw", "server"},
		{"write_lat", "server"}, {"atomic_bw", "server"}, {"put_bw", "server"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool atomic = strstr(cases[i].test, "atomic") != NULL;
		const char *a[] = {cases[i].test, "--pair", "-n", "10", "--corrupt", "-s",
				   atomic ? "8" : "64", NULL};
		struct proc p;
		start(&p, a);
		finish(&p, 1);
		char want[64];
		snprintf(want, sizeof(want), "%s: data check failed", cases[i].checker);
		cr_assert_eq(p.status, 1, "%s: status %d, stderr:\n%s", cases[i].test, p.status,
			     p.text[1]);
		cr_assert_not_null(strstr(p.text[1], want), "%s: stderr:\n%s", cases[i].test,
				   p.text[1]);
		proc_free(&p);
	}
	/* server and client: the server finds it, and both say so */
	const char *c[] = {"-n", "10", "-s", "4096", "--corrupt", NULL};
	struct proc s, cl;
	server_client("write_bw", NULL, c, &s, &cl);
	cr_assert_eq(s.status, 1, "server status %d", s.status);
	cr_assert_eq(cl.status, 1, "client status %d", cl.status);
	const char *msg = "server: data check failed at 4096 bytes: thread 0: destination differs "
			  "at byte 2048";
	cr_assert_not_null(strstr(s.text[1], msg), "server stderr:\n%s", s.text[1]);
	cr_assert_not_null(strstr(cl.text[1], msg), "client stderr:\n%s", cl.text[1]);
	proc_free(&s);
	proc_free(&cl);
}

/* ---- refusals ---------------------------------------------------------------------------- */

/* A stray client with another secret is refused; the server goes on
 * waiting, and the real client completes. */
Test(perf_remote, stray_with_wrong_secret)
{
	char port[16], addr[32];
	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(addr, sizeof(addr), "127.0.0.1:%s", port);
	const char *sa[] = {"write_bw", "-p", port, "--timeout", "60", NULL};
	const char *stray[] = {"write_bw", addr, "--secret", "not-the-secret", "--timeout", "60",
			       NULL};
	const char *real[] = {"write_bw", addr, "-n", "20", "-s", "128", "--timeout", "60", NULL};
	struct proc s, x, c;
	start(&s, sa);
	start(&x, stray);
	finish(&x, 1);
	cr_assert_eq(x.status, 1, "stray status %d, stderr:\n%s", x.status, x.text[1]);
	cr_assert_not_null(strstr(x.text[1], "wrong job secret"), "stray stderr:\n%s", x.text[1]);
	start(&c, real);
	struct proc both[2] = {s, c};
	finish(both, 2);
	check_both(&both[0], &both[1], "write_bw", 1, 128, 20);
	proc_free(&x);
	proc_free(&both[0]);
	proc_free(&both[1]);
}

/* Different tests, or run options the server was given and the client
 * contradicts: both fail with the reason. */
Test(perf_remote, mismatch_refused)
{
	const char *n50[] = {"-n", "50", NULL}, *n100[] = {"-n", "100", NULL};
	struct proc s, c;
	server_client("write_bw", n100, n50, &s, &c);
	cr_assert_eq(s.status, 1);
	cr_assert_eq(c.status, 1);
	cr_assert_not_null(strstr(s.text[1], "different iterations (-n)"), "%s", s.text[1]);
	cr_assert_not_null(strstr(c.text[1], "different iterations (-n)"), "%s", c.text[1]);
	proc_free(&s);
	proc_free(&c);

	/* the server's test is write_bw, the client's read_bw */
	static char port[16], addr[32];
	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(addr, sizeof(addr), "127.0.0.1:%s", port);
	const char *sa[] = {"write_bw", "--server", "-p", port, "--timeout", "60", NULL};
	const char *ca[] = {"read_bw", addr, "--timeout", "60", NULL};
	struct proc ps[2];
	start(&ps[0], sa);
	start(&ps[1], ca);
	finish(ps, 2);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ps[i].status, 1);
		cr_assert_not_null(strstr(ps[i].text[1], "the server runs write_bw, the client "
							 "read_bw"),
				   "%s", ps[i].text[1]);
		cr_assert_null(strstr(ps[i].text[0], "#bytes"), "no table after a refusal");
		proc_free(&ps[i]);
	}
}

/* The client dies in the middle of a run: the server, waiting for the end
 * of the run, fails at once instead of waiting for its timeout. */
Test(perf_remote, client_dies_mid_run)
{
	char port[16], addr[32];
	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(addr, sizeof(addr), "127.0.0.1:%s", port);
	const char *sa[] = {"write_bw", "--server", "-p", port, "--timeout", "60", NULL};
	const char *ca[] = {"write_bw", addr, "-n", "2000000", "-s", "64", "--timeout", "60",
			    NULL};
	struct proc s, c;
	start(&s, sa);
	start(&c, ca);
	/* the server prints its header once the client has joined */
	uint64_t end = tw_ms() + 30000;
	while (tw_ms() < end) {
		char buf[4096];
		struct pollfd pf = {s.fd[0], POLLIN, 0};
		if (poll(&pf, 1, 100) > 0) {
			ssize_t k = read(s.fd[0], buf, sizeof(buf));
			if (k <= 0)
				break;
			append(&s, 0, buf, (size_t)k);
			if (strstr(s.text[0], "#bytes"))
				break;
		}
	}
	cr_assert(s.text[0] && strstr(s.text[0], "#bytes"), "the run did not start");
	tw_sleep_ms(300);
	kill(c.pid, SIGKILL);
	uint64_t t0 = tw_ms();
	struct proc both[2] = {s, c};
	finish(both, 2);
	cr_assert_eq(both[1].status, 128 + SIGKILL);
	cr_assert_eq(both[0].status, 1, "server status %d", both[0].status);
	cr_assert_lt(tw_ms() - t0, 30000, "the server waited for its timeout");
	cr_assert_not_null(strstr(both[0].text[1], "with the client"), "server stderr:\n%s",
			   both[0].text[1]);
	proc_free(&both[0]);
	proc_free(&both[1]);
}

Test(perf_remote, usage_errors_exit_2)
{
	const char *cases[][8] = {
		{"memcpy_bw", "127.0.0.1", NULL},
		{"memcpy_bw", "--pair", NULL},
		{"write_bw", "--pair", "127.0.0.1", NULL},
		{"write_bw", "--server", "127.0.0.1", NULL},
		{"write_bw", "--server", "--pair", NULL},
		{"write_bw", "--loopback", "--server", NULL},
		{"write_bw", "--server", "-p", "65536", NULL},
		{"write_bw", "127.0.0.1:0", NULL},
		{"write_bw", "[::1", NULL},
		{"write_bw", "127.0.0.1:5000", "-p", "5001", NULL},
		{"write_bw", "--pair", "-p", "5000", NULL},
		{"write_bw", "--server", "--timeout", "0", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct proc p;
		start(&p, cases[i]);
		finish(&p, 1);
		cr_assert_eq(p.status, 2, "case %zu: status %d, stderr:\n%s", i, p.status,
			     p.text[1]);
		cr_assert_not_null(strstr(p.text[1], "kinet-perf: "), "case %zu: no message", i);
		cr_assert_eq(p.len[0], 0, "case %zu: usage errors print nothing on stdout", i);
		proc_free(&p);
	}
}

/* ---- perftest's way ------------------------------------------------------------------ */

/* No host argument: the server. It says where it waits, and gives up after
 * --timeout when no client comes. */
Test(perf_remote, no_host_is_the_server)
{
	char port[16];
	snprintf(port, sizeof(port), "%d", free_port());
	const char *a[] = {"write_bw", "-p", port, "--timeout", "2", NULL};
	struct proc p;
	start(&p, a);
	finish(&p, 1);
	cr_assert_eq(p.status, 1, "status %d, stderr:\n%s", p.status, p.text[1]);
	cr_assert_not_null(strstr(p.text[0], " Waiting for a client on "), "stdout:\n%s", p.text[0]);
	cr_assert_not_null(strstr(p.text[1], "no client came"), "stderr:\n%s", p.text[1]);
	proc_free(&p);
}

/* A client with no server says so at once and on each attempt, until
 * --timeout; started before its server, it gets through once the server
 * listens. */
Test(perf_remote, client_retries_until_the_timeout)
{
	char port[16], addr[32];
	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(addr, sizeof(addr), "127.0.0.1:%s", port);
	const char *a[] = {"write_bw", addr, "--timeout", "3", NULL};
	struct proc p;
	start(&p, a);
	finish(&p, 1);
	cr_assert_eq(p.status, 1, "status %d, stderr:\n%s", p.status, p.text[1]);
	int lines = 0;
	for (const char *q = p.text[1]; (q = strstr(q, "client: no server at ")); q++)
		lines++;
	cr_assert_geq(lines, 2, "one line per attempt, got %d:\n%s", lines, p.text[1]);
	char first[128];
	snprintf(first, sizeof(first), "client: no server at %s yet (Connection refused); attempt 1",
		 addr);
	cr_assert_not_null(strstr(p.text[1], first), "stderr:\n%s", p.text[1]);
	cr_assert_not_null(strstr(p.text[1], "within 3 s"), "stderr:\n%s", p.text[1]);
	cr_assert_eq(p.len[0], 0, "stdout:\n%s", p.text[0]);
	proc_free(&p);

	/* the client first, the server a little later */
	const char *ca[] = {"write_bw", addr, "--timeout", "60", "-n", "20", "-s", "64", NULL};
	const char *sa[] = {"write_bw", "-p", port, "--timeout", "60", NULL};
	struct proc ps[2];
	start(&ps[1], ca);
	tw_sleep_ms(1500);
	start(&ps[0], sa);
	finish(ps, 2);
	check_both(&ps[0], &ps[1], "write_bw", 1, 64, 20);
	cr_assert_not_null(strstr(ps[1].text[1], "yet (Connection refused); attempt 1"),
			   "client stderr:\n%s", ps[1].text[1]);
	proc_free(&ps[0]);
	proc_free(&ps[1]);
}

/* Command lines as perftest's documentation writes them (ib_ dropped, the
 * iteration counts and durations small): the server without a host, the
 * client with it, the same options on both. */
Test(perf_remote, perftest_command_lines)
{
	struct {
		const char *args[16];
		int lat;       /* 1: latency columns, 2: duration latency columns */
		double bytes;
		int iters;     /* 0: a duration run */
	} cases[] = {
		{{"write_bw", "-s", "65536", "-D", "1", "-q", "3", NULL}, 0, 65536, 0},
		{{"read_lat", "-s", "32", "-n", "500", NULL}, 1, 32, 500},
		{{"send_bw", "-c", "RC", "-t", "64", "-n", "200", "-F", "--report_gbits", NULL}, 0,
		 65536, 200},
		{{"atomic_bw", "-q", "2", "-t", "16", "-n", "300", NULL}, 0, 8, 300},
		{{"write_lat", "-s", "8", "-I", "8", "-n", "300", "-F", NULL}, 1, 8, 300},
		{{"write_lat", "-s", "64", "-D", "1", NULL}, 2, 64, 0},
		{{"send_lat", "-s", "8", "-n", "300", "-F", NULL}, 1, 8, 300},
		{{"send_bw", "-s", "4096", "-D", "1", NULL}, 0, 4096, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char port[16], addr[32];
		snprintf(port, sizeof(port), "%d", free_port());
		snprintf(addr, sizeof(addr), "127.0.0.1");
		const char *sa[24], *ca[24];
		int n = 0;
		for (; cases[i].args[n]; n++)
			sa[n] = ca[n] = cases[i].args[n];
		sa[n] = ca[n] = "-p";
		sa[n + 1] = ca[n + 1] = port;
		sa[n + 2] = NULL;
		ca[n + 2] = addr;
		ca[n + 3] = NULL;
		struct proc ps[2];
		start(&ps[0], sa);
		start(&ps[1], ca);
		finish(ps, 2);
		const char *test = cases[i].args[0];
		cr_assert_eq(ps[1].status, 0, "case %zu (%s): client status %d, stderr:\n%s", i, test,
			     ps[1].status, ps[1].text[1]);
		cr_assert_eq(ps[0].status, 0, "case %zu (%s): server status %d, stderr:\n%s", i, test,
			     ps[0].status, ps[0].text[1]);
		const char *hdr = cases[i].lat == 2 ? " #bytes        #iterations       t_avg[usec]"
			: cases[i].lat		     ? LAT_HEADER
			: strstr(ps[1].text[0], "Gb/sec")
				? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]"
				: BW_HEADER;
		int cols = cases[i].lat == 2 ? 4 : cases[i].lat ? 9 : 5;
		double rc[4][16], rs[4][16];
		char tc[2048], ts[2048];
		cr_assert_eq(table(ps[1].text[0], hdr, cols, rc, 4, tc, sizeof(tc)), 1, "case %zu", i);
		cr_assert_eq(table(ps[0].text[0], hdr, cols, rs, 4, ts, sizeof(ts)), 1, "case %zu", i);
		cr_assert_str_eq(ts, tc, "case %zu: the server's row differs", i);
		cr_assert_eq(rc[0][0], cases[i].bytes, "case %zu", i);
		if (cases[i].iters)
			cr_assert_eq(rc[0][1], cases[i].iters, "case %zu", i);
		else
			cr_assert_gt(rc[0][1], 0, "case %zu: no message in 1 s", i);
		if (strstr(cases[i].args[0], "_bw") && cases[i].iters)
			check_bw_row(rc[0], cases[i].bytes, cases[i].iters);
		if (!strcmp(test, "write_bw"))
			cr_assert_not_null(strstr(ps[1].text[0], "3 QPs") ||
						   strstr(ps[1].text[0], "(3 QPs)"),
					   "-q 3: %s", ps[1].text[0]);
		proc_free(&ps[0]);
		proc_free(&ps[1]);
	}
}

/* ---- the mlx5 backend over the emulated rdma-core ------------------------------------ */

static const char *const EMU[] = {"KINET_MLX5_EMULATE=1", NULL};

/* The emulation connects QPs of one process only: a pair in one process on
 * two threads (--pair=threads) runs the whole exchange (bootstrap, mlx5
 * descriptors, the steps), every test, both backends' descriptors. */
Test(perf_remote, mlx5_emulation_pair_threads)
{
	const char *tests[] = {"write_bw",   "write_lat", "read_bw",  "read_lat", "atomic_bw",
			       "atomic_lat", "send_bw",   "send_lat", "put_bw"};
	for (int t = 0; t < 9; t++) {
		bool lat = strstr(tests[t], "_lat") != NULL, atomic = strstr(tests[t], "atomic");
		const char *a[] = {tests[t], "--pair=threads", "--backend", "mlx5", "-n", "30",
				   "--threads", "2", "-t", "8", "-s", atomic ? "8" : "200", NULL};
		struct proc p;
		start_env(&p, a, EMU);
		finish(&p, 1);
		cr_assert_eq(p.status, 0, "%s: status %d, stderr:\n%s", tests[t], p.status, p.text[1]);
		cr_assert_not_null(strstr(p.text[0], " Backend         : mlx5\n"), "%s", p.text[0]);
		cr_assert_not_null(strstr(p.text[0], " Transport       : mlx5\n"), "%s", p.text[0]);
		cr_assert_not_null(strstr(p.text[0], "both in this process"), "%s", p.text[0]);
		double rows[4][16];
		cr_assert_eq(table(p.text[0], lat ? LAT_HEADER : BW_HEADER, lat ? 9 : 5, rows, 4,
				   NULL, 0),
			     1);
		if (lat)
			check_lat_row(rows[0], atomic ? 8 : 200, 30);
		else
			check_bw_row(rows[0], atomic ? 8 : 200, 30);
		proc_free(&p);
	}
	/* JSON: the mlx5 transport and both hosts */
	const char *j[] = {"write_bw", "--pair=threads", "--backend", "mlx5", "--json", "-n", "20",
			   "-s", "64", NULL};
	struct proc p;
	start_env(&p, j, EMU);
	finish(&p, 1);
	cr_assert_eq(p.status, 0, "stderr:\n%s", p.text[1]);
	cr_assert_not_null(strstr(p.text[0], "\"backend\":\"mlx5\""), "%s", p.text[0]);
	cr_assert_not_null(strstr(p.text[0], "\"provider\":\"mlx5\""), "%s", p.text[0]);
	cr_assert_not_null(strstr(p.text[0], "\"peer_host\":"), "%s", p.text[0]);
	proc_free(&p);
	/* the data check across the two, on mlx5 */
	const char *c[] = {"write_bw", "--pair=threads", "--backend", "mlx5", "-n", "10", "-s",
			   "64", "--corrupt", NULL};
	start_env(&p, c, EMU);
	finish(&p, 1);
	cr_assert_eq(p.status, 1, "status %d", p.status);
	cr_assert_not_null(strstr(p.text[1], "server: data check failed"), "%s", p.text[1]);
	proc_free(&p);
	/* two processes over the emulation: refused at connection time, saying why */
	const char *d[] = {"write_bw", "--pair", "--backend", "mlx5", "-n", "10", NULL};
	start_env(&p, d, EMU);
	finish(&p, 1);
	cr_assert_eq(p.status, 1, "status %d", p.status);
	cr_assert_not_null(strstr(p.text[1], "--pair=threads"), "%s", p.text[1]);
	proc_free(&p);
	/* the two sides must use the same backend */
	char port[16], addr[32];
	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(addr, sizeof(addr), "127.0.0.1:%s", port);
	const char *sa[] = {"write_bw", "-p", port, "--backend", "soft", "--timeout", "60", NULL};
	const char *ca[] = {"write_bw", addr, "--backend", "mlx5", "--timeout", "60", NULL};
	struct proc ps[2];
	start_env(&ps[0], sa, EMU);
	start_env(&ps[1], ca, EMU);
	finish(ps, 2);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ps[i].status, 1, "side %d: status %d", i, ps[i].status);
		cr_assert_not_null(strstr(ps[i].text[1], "the server opened the soft backend, the "
							 "client mlx5"),
				   "side %d: %s", i, ps[i].text[1]);
		proc_free(&ps[i]);
	}
}

/* The soft wire's JSON records name the libfabric provider. */
Test(perf_remote, json_metadata_across_processes)
{
	const char *a[] = {"read_bw", "--pair", "--json", "-n", "20", "-s", "128", NULL};
	struct proc p;
	start(&p, a);
	finish(&p, 1);
	cr_assert_eq(p.status, 0, "stderr:\n%s", p.text[1]);
	cr_assert_not_null(strstr(p.text[0], "\"backend\":\"soft\""), "%s", p.text[0]);
	/* the provider the QPs took (KINET_FI_PROVIDER; not set: tcp;ofi_rxm, or shm
	 * between these two processes of one host unless KINET_FI_SAME_HOST=off) */
	const char *fp = getenv("KINET_FI_PROVIDER"), *sh = getenv("KINET_FI_SAME_HOST");
	bool same = !(fp && *fp) && !(sh && !strcmp(sh, "off"));
	char want[96];
	snprintf(want, sizeof(want), "\"provider\":\"%s\"",
		 fp && *fp ? fp : same ? "shm" : "tcp;ofi_rxm");
	cr_assert_not_null(strstr(p.text[0], want), "%s", p.text[0]);
	cr_assert_not_null(strstr(p.text[0], "\"processes\":2"), "%s", p.text[0]);
	cr_assert_not_null(strstr(p.text[0], "\"kinet_version\":\""), "%s", p.text[0]);
	cr_assert_not_null(strstr(p.text[0], "\"date\":\""), "%s", p.text[0]);
	cr_assert_not_null(strstr(p.text[0], "\"cmdline\":\""), "%s", p.text[0]);
	proc_free(&p);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Ethernet examples on a real network device: two network namespaces
 * joined by a veth pair that the test creates and removes (addresses in
 * 10.235.0.0/16, only inside those namespaces). In namespace a the example
 * programs run their device code on the host executor over the software
 * NIC's AF_XDP port; in namespace b plain sockets (kinet_eth_peer) and ping
 * talk to them:
 *   - the UDP echo server answers every datagram byte for byte (cyclic and
 *     striding receive queues), while a datagram to another port still
 *     reaches a socket of namespace a (frames no flow takes go on to the
 *     kernel);
 *   - the ICMP echo responder answers ping, one reply per request (no
 *     duplicate from the kernel: its frames are taken away from the stack);
 *   - the generator's frames reach a socket sink, every payload checked and
 *     each flow's sequence complete and in order, paced and unpaced;
 *   - the classifier counts exactly what was sent (per protocol, per flow,
 *     bytes), and frames written raw from namespace b with bad checksums and
 *     an unknown EtherType are counted as such;
 *   - AF_PACKET works when asked for, and AF_XDP that cannot be had is
 *     reported and falls back only when KINET_ETH_FALLBACK allows it;
 *   - more frames too long for the echo server's cyclic buffers than its
 *     queue has WQEs, then datagrams echoed byte for byte;
 *   - a peer that leaves its checksums to offload: said once (AF_XDP),
 *     completed and answered (AF_PACKET);
 *   - a missing interface, one down, one without a carrier: each said.
 * Needs root and iproute2; skipped otherwise.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include "../util/testutil.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(KINET_EX_ETH_UDP_ECHO) && defined(KINET_EX_ETH_ICMP_ECHO) && \
	defined(KINET_EX_ETH_PKTGEN) && defined(KINET_EX_ETH_CLASSIFY)
#define HAVE_EXAMPLES 1
#else
#define HAVE_EXAMPLES 0
#define KINET_EX_ETH_UDP_ECHO ""
#define KINET_EX_ETH_ICMP_ECHO ""
#define KINET_EX_ETH_PKTGEN ""
#define KINET_EX_ETH_CLASSIFY ""
#endif

#define DEADLINE_S 60

static char ns_a[32], ns_b[32], if_a[16], if_b[16], ip_a[32], ip_b[32], mac_b[32];
static int ns_made;

static void ns_down(void)
{
	if (!ns_made)
		return;
	tu_sh("ip netns del %s", ns_a);
	tu_sh("ip netns del %s", ns_b);
	ns_made = 0;
}

struct prog {
	pid_t pid;
	int out; /* its stdout and stderr */
};

/* Starts argv in namespace ns with extra environment entries. */
static struct prog start(const char *ns, char *const argv[], char *const env[])
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		unsetenv("BXFI_MAP");
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		char path[96];
		snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET))
			_exit(126);
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		alarm(DEADLINE_S);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	struct prog pr = {pid, p[0]};
	return pr;
}

/* Reads its output until a line "ready" (or the end), into out. */
static void wait_ready(struct prog *pr, char *out, size_t cap)
{
	size_t n = 0;
	while (n + 1 < cap) {
		ssize_t k = read(pr->out, out + n, 1);
		if (k <= 0)
			break;
		n++;
		out[n] = 0;
		if (n >= 6 && !strcmp(out + n - 6, "ready\n"))
			return;
	}
	out[n] = 0;
	cr_assert_fail("the program ended before it was ready:\n%s", out);
}

/* Waits for it: its exit status (-1 when killed), the rest of its output. */
static int finish(struct prog pr, char *out, size_t cap)
{
	size_t n = strlen(out);
	ssize_t k;
	while (n + 1 < cap && (k = read(pr.out, out + n, cap - n - 1)) > 0)
		n += (size_t)k;
	out[n] = 0;
	close(pr.out);
	int st;
	cr_assert_eq(waitpid(pr.pid, &st, 0), pr.pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run(const char *ns, char *const argv[], char *const env[], char *out, size_t cap)
{
	out[0] = 0;
	return finish(start(ns, argv, env), out, cap);
}

static unsigned long long field(const char *out, const char *name)
{
	char key[64];
	snprintf(key, sizeof(key), "%s=", name);
	const char *p = out;
	while ((p = strstr(p, key))) {
		if (p == out || p[-1] == ' ' || p[-1] == '\n')
			return strtoull(p + strlen(key), NULL, 10);
		p++;
	}
	cr_assert_fail("no %s in:\n%s", name, out);
	return 0;
}

/* bpffs where libxdp wants it (the dispatcher); AF_XDP works without it. */
static void bpffs(void)
{
	struct statfs sf;
	if (statfs("/sys/fs/bpf", &sf) == 0 && sf.f_type == 0xcafe4a11)
		return;
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, NULL))
		fprintf(stderr, "bpffs could not be mounted (%s): libxdp attaches without its "
				"dispatcher\n",
			strerror(errno));
}

static void ns_up(void)
{
	if (!HAVE_EXAMPLES)
		cr_skip_test("the Ethernet examples are not built (KINET_EXAMPLES=OFF)");
	if (geteuid() != 0)
		cr_skip_test("needs root to create network namespaces");
	if (system("ip -V >/dev/null 2>&1") != 0)
		cr_skip_test("needs iproute2 (ip)");
	bpffs();
	int id = (int)(getpid() % 100000);
	int x = (int)(getpid() % 250) + 1;
	snprintf(ns_a, sizeof(ns_a), "kinet-ea%d", id);
	snprintf(ns_b, sizeof(ns_b), "kinet-eb%d", id);
	snprintf(if_a, sizeof(if_a), "kea%d", id);
	snprintf(if_b, sizeof(if_b), "keb%d", id);
	snprintf(ip_a, sizeof(ip_a), "10.235.%d.1", x);
	snprintf(ip_b, sizeof(ip_b), "10.235.%d.2", x);
	ns_made = 1;
	int rc = tu_sh("ip netns add %s", ns_a) || tu_sh("ip netns add %s", ns_b) ||
		 tu_sh("ip link add %s type veth peer name %s", if_a, if_b) ||
		 tu_sh("ip link set %s netns %s", if_a, ns_a) ||
		 tu_sh("ip link set %s netns %s", if_b, ns_b) ||
		 /* no IPv6: no router solicitations or MLD reports in the counts */
		 tu_sh("ip netns exec %s sysctl -qw net.ipv6.conf.all.disable_ipv6=1", ns_a) ||
		 tu_sh("ip netns exec %s sysctl -qw net.ipv6.conf.all.disable_ipv6=1", ns_b) ||
		 tu_sh("ip -n %s addr add %s/30 dev %s", ns_a, ip_a, if_a) ||
		 tu_sh("ip -n %s addr add %s/30 dev %s", ns_b, ip_b, if_b) ||
		 tu_sh("ip -n %s link set lo up", ns_a) || tu_sh("ip -n %s link set lo up", ns_b) ||
		 tu_sh("ip -n %s link set %s up", ns_a, if_a) ||
		 tu_sh("ip -n %s link set %s up", ns_b, if_b);
	if (rc) {
		tu_sh("ip link del %s", if_a);
		ns_down();
		cr_assert_fail("could not build the two namespaces");
	}
	/* a veth leaves the sender's TCP/UDP checksums to the receiving stack;
	 * AF_XDP takes the frames before it: the peer computes them itself */
	char out[256];
	char *csum[] = {KINET_ETH_PEER, "csum-off", if_b, NULL};
	cr_assert_eq(run(ns_b, csum, NULL, out, sizeof(out)), 0, "%s", out);
	FILE *f;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "ip -n %s link show %s", ns_b, if_b);
	cr_assert_not_null(f = popen(cmd, "r"));
	char line[256];
	mac_b[0] = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "link/ether"))
			sscanf(strstr(line, "link/ether") + 11, "%31s", mac_b);
	pclose(f);
	cr_assert(mac_b[0], "no MAC address of %s", if_b);
}

TestSuite(eth_netns, .fini = ns_down);

static void echo_case(int striding)
{
	ns_up();
	char srv[4096], cli[1024], ksrv[256], kcli[512];
	char *s_argv[] = {KINET_EX_ETH_UDP_ECHO, "--if", if_a, "--port", "7", "--count", "300",
			  striding ? "--striding" : NULL, NULL};
	struct prog s = start(ns_a, s_argv, NULL);
	srv[0] = 0;
	wait_ready(&s, srv, sizeof(srv));
	cr_assert(strstr(srv, "AF_XDP"), "not an AF_XDP port:\n%s", srv);
	/* a plain socket of namespace a on another port: steering leaves its
	 * datagrams to the kernel */
	char *k_argv[] = {KINET_ETH_PEER, "echo-server", "8", "50", NULL};
	struct prog k = start(ns_a, k_argv, NULL);
	ksrv[0] = 0;
	wait_ready(&k, ksrv, sizeof(ksrv));
	char *c_argv[] = {KINET_ETH_PEER, "echo-client", ip_a, "7", "300", "1", "1400", NULL};
	cr_assert_eq(run(ns_b, c_argv, NULL, cli, sizeof(cli)), 0, "client:\n%s\nserver:\n%s", cli,
		     srv);
	cr_assert_eq(field(cli, "ok"), 300);
	char *c2_argv[] = {KINET_ETH_PEER, "echo-client", ip_a, "8", "50", "1", "1000", NULL};
	cr_assert_eq(run(ns_b, c2_argv, NULL, kcli, sizeof(kcli)), 0, "%s", kcli);
	cr_assert_eq(finish(k, ksrv, sizeof(ksrv)), 0, "%s", ksrv);
	cr_assert_eq(finish(s, srv, sizeof(srv)), 0, "%s", srv);
	cr_assert_eq(field(srv, "echoed"), 300, "%s", srv);
	cr_assert_eq(field(srv, "bad_csum"), 0, "%s", srv);
	cr_assert_eq(field(srv, "nic_rx_drops_no_wqe"), 0, "%s", srv);
}

Test(eth_netns, udp_echo_cyclic_and_steering_to_the_kernel)
{
	echo_case(0);
}

Test(eth_netns, udp_echo_striding)
{
	echo_case(1);
}

Test(eth_netns, icmp_echo_answers_ping_once_per_request)
{
	ns_up();
	char srv[4096], out[4096];
	char *s_argv[] = {
		KINET_EX_ETH_ICMP_ECHO, "--if", if_a, "--ip", ip_a, "--count", "20", NULL};
	struct prog s = start(ns_a, s_argv, NULL);
	srv[0] = 0;
	wait_ready(&s, srv, sizeof(srv));
	char *p_argv[] = {"/usr/bin/env", "ping", "-c", "20", "-i", "0.01", "-W", "2", "-s", "200",
			  ip_a, NULL};
	int prc = run(ns_b, p_argv, NULL, out, sizeof(out));
	cr_assert_eq(finish(s, srv, sizeof(srv)), 0, "%s", srv);
	cr_assert_eq(prc, 0, "ping:\n%s\nresponder:\n%s", out, srv);
	cr_assert(strstr(out, "20 packets transmitted, 20 received"), "%s", out);
	cr_assert_null(strstr(out, "DUP"), "the kernel answered too:\n%s", out);
	cr_assert_eq(field(srv, "replied"), 20, "%s", srv);
}

static void pktgen_case(int pace)
{
	ns_up();
	char sink[4096], gen[4096];
	char *k_argv[] = {KINET_ETH_PEER, "sink", "9100", "400", "4", "9000", NULL};
	struct prog k = start(ns_b, k_argv, NULL);
	sink[0] = 0;
	wait_ready(&k, sink, sizeof(sink));
	char *g_argv[] = {KINET_EX_ETH_PKTGEN, "--if", if_a, "--src-ip", ip_a, "--dst-ip", ip_b,
			  "--dst-mac", mac_b, "--sport", "9000", "--dport", "9100", "--flows", "4",
			  "--size", "300", "--count", "400", "--rate", "4000",
			  pace ? "--pace" : NULL, NULL};
	cr_assert_eq(run(ns_a, g_argv, NULL, gen, sizeof(gen)), 0, "%s", gen);
	cr_assert_eq(finish(k, sink, sizeof(sink)), 0, "sink:\n%s\ngenerator:\n%s", sink, gen);
	cr_assert_eq(field(gen, "sent"), 400);
	cr_assert_eq(field(gen, "nic_tx_waits"), pace ? 400u : 0u, "%s", gen);
	cr_assert_eq(field(sink, "received"), 400, "%s", sink);
	for (int f = 0; f < 4; f++) {
		char name[16];
		snprintf(name, sizeof(name), "flow%d", f);
		cr_assert_eq(field(sink, name), 100, "%s", sink);
	}
}

Test(eth_netns, generator_paced_by_send_at_time)
{
	pktgen_case(1);
}

Test(eth_netns, generator_unpaced)
{
	pktgen_case(0);
}

Test(eth_netns, classifier_counts_what_was_sent)
{
	ns_up();
	char cl[8192], out[2048];
	char *c_argv[] = {KINET_EX_ETH_CLASSIFY, "--if", if_a, "--count", "65", NULL};
	struct prog c = start(ns_a, c_argv, NULL);
	cl[0] = 0;
	wait_ready(&c, cl, sizeof(cl));
	static const struct {
		const char *port, *n, *size, *sport;
	} sends[] = {{"5000", "30", "100", "40001"}, {"5001", "20", "200", "40002"},
		     {"5002", "10", "300", "40003"}};
	for (int i = 0; i < 3; i++) {
		char *s_argv[] = {KINET_ETH_PEER, "send", ip_a, (char *)sends[i].port,
				  (char *)sends[i].n, (char *)sends[i].size, (char *)sends[i].sport,
				  NULL};
		cr_assert_eq(run(ns_b, s_argv, NULL, out, sizeof(out)), 0, "%s", out);
	}
	char *p_argv[] = {"/usr/bin/env", "ping", "-c", "5", "-i", "0.01", "-W", "1", ip_a, NULL};
	run(ns_b, p_argv, NULL, out, sizeof(out)); /* nobody answers: its status is 1 */
	cr_assert(strstr(out, "5 packets transmitted"), "%s", out);
	cr_assert_eq(finish(c, cl, sizeof(cl)), 0, "%s", cl);
	cr_assert_eq(field(cl, "rx"), 65, "%s", cl);
	cr_assert_eq(field(cl, "ipv4"), 65, "%s", cl);
	cr_assert_eq(field(cl, "udp"), 60, "%s", cl);
	cr_assert_eq(field(cl, "icmp"), 5, "%s", cl);
	cr_assert_eq(field(cl, "tcp") + field(cl, "ipv6") + field(cl, "other_l3"), 0, "%s", cl);
	cr_assert_eq(field(cl, "flows"), 4, "%s", cl);
	for (int i = 0; i < 3; i++) {
		char want[160];
		snprintf(want, sizeof(want), "proto=17 sport=%s dport=%s packets=%s bytes=%u",
			 sends[i].sport, sends[i].port, sends[i].n,
			 (unsigned)(atoi(sends[i].n) * (42 + atoi(sends[i].size))));
		cr_assert(strstr(cl, want), "no \"%s\" in:\n%s", want, cl);
	}
	cr_assert(strstr(cl, "proto=1 sport=0 dport=0 packets=5 bytes=490"), "%s", cl);
}

/* Frames written raw from namespace b: checksums wrong, an EtherType the
 * NIC does not parse. The classifier takes every frame (the default flow). */
Test(eth_netns, malformed_frames_over_the_wire)
{
	ns_up();
	char cl[8192], out[1024];
	char mac_a[32] = "";
	FILE *f;
	char cmd[128], line[256];
	snprintf(cmd, sizeof(cmd), "ip -n %s link show %s", ns_a, if_a);
	cr_assert_not_null(f = popen(cmd, "r"));
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "link/ether"))
			sscanf(strstr(line, "link/ether") + 11, "%31s", mac_a);
	pclose(f);
	char *c_argv[] = {KINET_EX_ETH_CLASSIFY, "--if", if_a, "--count", "18", "--all", NULL};
	struct prog c = start(ns_a, c_argv, NULL);
	cl[0] = 0;
	wait_ready(&c, cl, sizeof(cl));
	const char *kinds[] = {"badip", "badudp", "ethertype", "udp"};
	for (int i = 0; i < 4; i++) {
		char *r_argv[] = {KINET_ETH_PEER, "raw", if_b, mac_a, (char *)kinds[i],
				  i == 3 ? "3" : "5", NULL};
		cr_assert_eq(run(ns_b, r_argv, NULL, out, sizeof(out)), 0, "%s", out);
	}
	cr_assert_eq(finish(c, cl, sizeof(cl)), 0, "%s", cl);
	cr_assert_eq(field(cl, "rx"), 18, "%s", cl);
	cr_assert_eq(field(cl, "ipv4"), 13, "%s", cl);
	cr_assert_eq(field(cl, "other_l3"), 5, "%s", cl);
	cr_assert_eq(field(cl, "bad_csum"), 10, "%s", cl);
	cr_assert_eq(field(cl, "nic_rx_csum_bad"), 10, "%s", cl);
	cr_assert(strstr(cl, "proto=17 sport=12345 dport=4242 packets=13 bytes=1378"), "%s", cl);
}

Test(eth_netns, af_packet_when_asked_for)
{
	ns_up();
	char srv[4096], cli[1024];
	char *s_argv[] = {KINET_EX_ETH_UDP_ECHO, "--if", if_a, "--port", "7", "--count", "50",
			  "--driver", "packet", NULL};
	struct prog s = start(ns_a, s_argv, NULL);
	srv[0] = 0;
	wait_ready(&s, srv, sizeof(srv));
	cr_assert(strstr(srv, "AF_PACKET"), "%s", srv);
	char *c_argv[] = {KINET_ETH_PEER, "echo-client", ip_a, "7", "50", "1", "1400", NULL};
	cr_assert_eq(run(ns_b, c_argv, NULL, cli, sizeof(cli)), 0, "client:\n%s\nserver:\n%s", cli,
		     srv);
	cr_assert_eq(finish(s, srv, sizeof(srv)), 0, "%s", srv);
	cr_assert_eq(field(srv, "echoed"), 50, "%s", srv);
}

/* The loopback device has no native XDP: asked for native only, AF_XDP is
 * unavailable, said so; with the fallback allowed, AF_PACKET instead. */
Test(eth_netns, af_xdp_unavailable_reported_and_fallback_only_when_allowed)
{
	ns_up();
	char out[4096];
	char *argv[] = {KINET_EX_ETH_UDP_ECHO, "--if", "lo", "--port", "7", "--seconds", "1", NULL};
	char *native[] = {"KINET_ETH_XDP_MODE=native", NULL};
	cr_assert_eq(run(ns_a, argv, native, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "AF_XDP unavailable"), "%s", out);
	cr_assert(strstr(out, "KINET_ETH_FALLBACK=packet"), "%s", out);
	char *fallback[] = {"KINET_ETH_XDP_MODE=native", "KINET_ETH_FALLBACK=packet", NULL};
	cr_assert_eq(run(ns_a, argv, fallback, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "AF_PACKET instead"), "%s", out);
	cr_assert(strstr(out, "port lo: AF_PACKET"), "%s", out);
	char *xdp_only[] = {KINET_EX_ETH_UDP_ECHO, "--if", "lo", "--port", "7", "--seconds", "1",
			    "--driver", "xdp", NULL};
	cr_assert_eq(run(ns_a, xdp_only, fallback, out, sizeof(out)), 1,
		     "an explicit xdp driver never falls back:\n%s", out);
}

/* How many lines of out contain what. */
static int lines_with(const char *out, const char *what)
{
	int n = 0;
	for (const char *s = out; (s = strstr(s, what)); n++) {
		s = strchr(s, '\n');
		if (!s)
			break;
	}
	return n;
}

/* Frames too long for the echo server's 512-byte cyclic buffers, more of
 * them than the queue has WQEs, each an error CQE: the queue goes on
 * receiving, and the datagrams after them are echoed byte for byte. */
Test(eth_netns, udp_echo_survives_frames_too_long_for_its_buffers)
{
	ns_up();
	char srv[4096], cli[1024], out[512];
	char *s_argv[] = {KINET_EX_ETH_UDP_ECHO, "--if", if_a, "--port", "7", "--count", "50",
			  "--pkt-size", "512", NULL};
	struct prog s = start(ns_a, s_argv, NULL);
	srv[0] = 0;
	wait_ready(&s, srv, sizeof(srv));
	/* 1000-byte datagrams: 1042-byte frames; the queue has 256 WQEs */
	char *b_argv[] = {KINET_ETH_PEER, "send", ip_a, "7", "400", "1000", "40010", NULL};
	cr_assert_eq(run(ns_b, b_argv, NULL, out, sizeof(out)), 0, "%s", out);
	char *c_argv[] = {KINET_ETH_PEER, "echo-client", ip_a, "7", "50", "1", "400", NULL};
	int crc = run(ns_b, c_argv, NULL, cli, sizeof(cli));
	if (crc)
		kill(s.pid, SIGTERM);
	int src = finish(s, srv, sizeof(srv));
	cr_assert_eq(crc, 0, "client:\n%s\nserver:\n%s", cli, srv);
	cr_assert_eq(src, 0, "%s", srv);
	cr_assert_eq(field(cli, "ok"), 50);
	cr_assert_eq(field(srv, "echoed"), 50, "%s", srv);
	cr_assert_gt(field(srv, "rx_errors"), 256, "fewer too-long frames than WQEs:\n%s", srv);
	cr_assert_eq(field(srv, "nic_rx_drops_no_wqe"), 0, "%s", srv);
}

/* A peer that leaves its UDP checksums to offload (a veth's default):
 * AF_XDP takes the frames with the checksum incomplete, and the port says
 * so once, with the fix; AF_PACKET sees the kernel's mark and completes
 * them, so the echo answers every datagram. */
Test(eth_netns, peer_checksum_offload_said_once_or_completed)
{
	ns_up();
	char srv[8192], cli[1024], out[512];
	char *on[] = {KINET_ETH_PEER, "csum-on", if_b, NULL};
	cr_assert_eq(run(ns_b, on, NULL, out, sizeof(out)), 0, "%s", out);
	char *x_argv[] = {KINET_EX_ETH_UDP_ECHO, "--if", if_a, "--port", "7", "--seconds", "2",
			  NULL};
	struct prog s = start(ns_a, x_argv, NULL);
	srv[0] = 0;
	wait_ready(&s, srv, sizeof(srv));
	cr_assert(strstr(srv, "AF_XDP"), "not an AF_XDP port:\n%s", srv);
	char *b_argv[] = {KINET_ETH_PEER, "send", ip_a, "7", "5", "100", "40011", NULL};
	cr_assert_eq(run(ns_b, b_argv, NULL, out, sizeof(out)), 0, "%s", out);
	cr_assert_eq(finish(s, srv, sizeof(srv)), 0, "%s", srv);
	cr_assert_eq(field(srv, "bad_csum"), 5, "%s", srv);
	cr_assert_eq(lines_with(srv, "checksum arrived"), 1, "not said exactly once:\n%s", srv);
	cr_assert_eq(lines_with(srv, "ethtool -K"), 1, "no fix given:\n%s", srv);
	cr_assert(strstr(srv, "pseudo-header sum"), "the cause not named:\n%s", srv);
	char *p_argv[] = {KINET_EX_ETH_UDP_ECHO, "--if", if_a, "--port", "7", "--count", "50",
			  "--driver", "packet", NULL};
	s = start(ns_a, p_argv, NULL);
	srv[0] = 0;
	wait_ready(&s, srv, sizeof(srv));
	cr_assert(strstr(srv, "AF_PACKET"), "%s", srv);
	char *c_argv[] = {KINET_ETH_PEER, "echo-client", ip_a, "7", "50", "1", "1400", NULL};
	int crc = run(ns_b, c_argv, NULL, cli, sizeof(cli));
	if (crc)
		kill(s.pid, SIGTERM);
	int src = finish(s, srv, sizeof(srv));
	cr_assert_eq(crc, 0, "client:\n%s\nserver:\n%s", cli, srv);
	cr_assert_eq(src, 0, "%s", srv);
	cr_assert_eq(field(srv, "echoed"), 50, "%s", srv);
	cr_assert_eq(field(srv, "bad_csum"), 0, "%s", srv);
	cr_assert_null(strstr(srv, "ethtool"), "%s", srv);
}

/* What the port says of its interface: one that does not exist (no hint
 * of a fallback that could not help), one that is down, one without a
 * carrier (its veth peer down). */
Test(eth_netns, interface_missing_down_or_without_carrier_said)
{
	ns_up();
	char out[4096];
	char *none[] = {KINET_EX_ETH_UDP_ECHO, "--if", "nosuch0", "--port", "7", "--seconds", "1",
			NULL};
	cr_assert_eq(run(ns_a, none, NULL, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "nosuch0: no such interface"), "%s", out);
	cr_assert_null(strstr(out, "FALLBACK"), "%s", out);
	cr_assert_null(strstr(out, "AF_XDP unavailable"), "%s", out);
	char *argv[] = {KINET_EX_ETH_UDP_ECHO, "--if", if_a, "--port", "7", "--seconds", "1", NULL};
	cr_assert_eq(run(ns_a, argv, NULL, out, sizeof(out)), 0, "%s", out);
	cr_assert_null(strstr(out, "is down"), "%s", out);
	cr_assert_null(strstr(out, "no carrier"), "%s", out);
	cr_assert_eq(tu_sh("ip -n %s link set %s down", ns_a, if_a), 0);
	cr_assert_eq(run(ns_a, argv, NULL, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "the interface is down"), "%s", out);
	cr_assert(strstr(out, "ip link set"), "%s", out);
	cr_assert_eq(tu_sh("ip -n %s link set %s up", ns_a, if_a), 0);
	cr_assert_eq(tu_sh("ip -n %s link set %s down", ns_b, if_b), 0);
	cr_assert_eq(run(ns_a, argv, NULL, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "no carrier"), "%s", out);
}

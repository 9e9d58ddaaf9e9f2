/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A software-NIC Ethernet port on a veth (AF_XDP, and AF_PACKET for the idle
 * policy), opened by this test in a network namespace it creates (addresses
 * in 10.236.0.0/16, only inside its two namespaces), its peer's sockets in
 * the other namespace:
 *   - a port whose process was killed (SIGKILL: nothing detached kinet's
 *     XDP program) does not black-hole the interface: the next open finds
 *     the program's owner gone, detaches it, says so, and frames flow both
 *     ways, byte for byte;
 *     the same when it was killed and not yet reaped (a zombie);
 *   - while the owner lives, a second open fails with -EBUSY and says what
 *     is attached, by which process, and how to detach it;
 *   - an open, idle port costs its thread little CPU (it sleeps on the
 *     socket's wake-up), and a frame sent to it after the idle second, and
 *     one it sends, still arrive byte for byte, soon.
 * Needs root, iproute2 and the AF_XDP module; skipped otherwise.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include <kinet/eth.h>
#include <kinet/device_eth.h>
#include "../util/testutil.h"
#include "../util/ethutil.h"

#define PORT_A 4700 /* the kinet port's flow (UDP) */
#define PORT_B 4701 /* the peer's socket */
#define SLOT 2048u

static char ns_a[32], ns_b[32], if_a[16], if_b[16];
static uint8_t ip_a[4], ip_b[4], mac_b[6];
static int ns_made, fd_home = -1;

static void ns_down(void)
{
	if (fd_home >= 0) {
		setns(fd_home, CLONE_NEWNET);
		close(fd_home);
		fd_home = -1;
	}
	if (!ns_made)
		return;
	tu_sh("ip netns del %s", ns_a);
	tu_sh("ip netns del %s", ns_b);
	ns_made = 0;
}

/* The calling thread (and the threads it starts) into namespace ns. */
static int enter(const char *ns)
{
	char path[96];
	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = setns(fd, CLONE_NEWNET) ? -errno : 0;
	close(fd);
	return rc;
}

static void ns_up(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to create network namespaces");
	if (system("ip -V >/dev/null 2>&1") != 0)
		cr_skip_test("needs iproute2 (ip)");
	struct statfs sf;
	if ((statfs("/sys/fs/bpf", &sf) || sf.f_type != 0xcafe4a11) &&
	    mount("bpf", "/sys/fs/bpf", "bpf", 0, NULL))
		fprintf(stderr, "bpffs could not be mounted (%s)\n", strerror(errno));
	int id = (int)(getpid() % 100000);
	int x = (int)(getpid() % 250) + 1;
	snprintf(ns_a, sizeof(ns_a), "kinet-xa%d", id);
	snprintf(ns_b, sizeof(ns_b), "kinet-xb%d", id);
	snprintf(if_a, sizeof(if_a), "kxa%d", id);
	snprintf(if_b, sizeof(if_b), "kxb%d", id);
	uint8_t a[4] = {10, 236, (uint8_t)x, 1}, b[4] = {10, 236, (uint8_t)x, 2};
	memcpy(ip_a, a, 4);
	memcpy(ip_b, b, 4);
	char sa[32], sb[32];
	snprintf(sa, sizeof(sa), "10.236.%d.1", x);
	snprintf(sb, sizeof(sb), "10.236.%d.2", x);
	ns_made = 1;
	int rc = tu_sh("ip netns add %s", ns_a) || tu_sh("ip netns add %s", ns_b) ||
		 tu_sh("ip link add %s type veth peer name %s", if_a, if_b) ||
		 tu_sh("ip link set %s netns %s", if_a, ns_a) ||
		 tu_sh("ip link set %s netns %s", if_b, ns_b) ||
		 tu_sh("ip -n %s addr add %s/30 dev %s", ns_a, sa, if_a) ||
		 tu_sh("ip -n %s addr add %s/30 dev %s", ns_b, sb, if_b) ||
		 tu_sh("ip -n %s link set %s up", ns_a, if_a) ||
		 tu_sh("ip -n %s link set %s up", ns_b, if_b);
	if (rc) {
		tu_sh("ip link del %s", if_a);
		ns_down();
		cr_assert_fail("could not build the two namespaces");
	}
	char cmd[128], line[256], mac[32] = "";
	snprintf(cmd, sizeof(cmd), "ip -n %s link show %s", ns_b, if_b);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "link/ether"))
			sscanf(strstr(line, "link/ether") + 11, "%31s", mac);
	pclose(f);
	unsigned m[6];
	cr_assert_eq(sscanf(mac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]),
		     6, "no MAC address of %s", if_b);
	for (int i = 0; i < 6; i++)
		mac_b[i] = (uint8_t)m[i];
	fd_home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	/* the peer computes its UDP checksums (a veth leaves them to offload) */
	cr_assert_eq(enter(ns_b), 0);
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ethtool_value ev = {.cmd = ETHTOOL_STXCSUM, .data = 0};
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", if_b);
	ifr.ifr_data = (char *)&ev;
	cr_assert_eq(ioctl(s, SIOCETHTOOL, &ifr), 0, "tx checksumming off: %s", strerror(errno));
	close(s);
	cr_assert_eq(setns(fd_home, CLONE_NEWNET), 0);
}

TestSuite(eth_xdp, .fini = ns_down);

/* ---- the log, captured ---- */

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static char cap_buf[16384];
static void cap_log(int level, const char *msg, void *user)
{
	(void)level;
	(void)user;
	pthread_mutex_lock(&cap_mu);
	size_t l = strlen(cap_buf);
	snprintf(cap_buf + l, sizeof(cap_buf) - l, "%s\n", msg);
	pthread_mutex_unlock(&cap_mu);
}

/* ---- a port with one receive queue (UDP PORT_A) and one send queue ---- */

struct env {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_eth_port *port;
	kinet_eth_txq *txq;
	kn_eth_txq *tq;
	kinet_eth_rxq *rxq;
	kn_eth_rxq *rq;
	kinet_eth_flow *flow;
	struct tu_region txb;
	uint8_t mac[6];
	int sock; /* the peer's UDP socket, in namespace b, on PORT_B */
};

/* The peer's socket, made in namespace b (it stays there), the thread back
 * in namespace a. */
static int peer_socket(void)
{
	cr_assert_eq(enter(ns_b), 0);
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(s, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(PORT_B)};
	memcpy(&sa.sin_addr, ip_b, 4);
	cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	struct timeval tv = {2, 0};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(enter(ns_a), 0);
	return s;
}

/* Opens the context and the port (driver drv) in namespace a: 0, or the
 * port's error (the context stays open). */
static int env_port(struct env *e, int drv)
{
	memset(e, 0, sizeof(*e));
	e->sock = -1;
	cr_assert_eq(enter(ns_a), 0);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &e->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(e->ctx, &e->pd), 0);
	struct kinet_eth_port_attr pa = {.driver = drv, .ifname = if_a};
	return kinet_eth_port_open(e->pd, &pa, &e->port);
}

static void env_queues(struct env *e)
{
	struct kinet_eth_port_info info;
	cr_assert_eq(kinet_eth_port_info(e->port, &info), 0);
	memcpy(e->mac, info.mac, 6);
	cr_assert_eq(kinet_eth_txq_create(e->port, NULL, &e->txq), 0);
	cr_assert_eq(kinet_eth_txq_device(e->txq, &e->tq), 0);
	struct kinet_eth_rxq_attr ra = {.depth = 64, .pkt_size = 2048};
	cr_assert_eq(kinet_eth_rxq_create(e->port, &ra, &e->rxq), 0);
	cr_assert_eq(kinet_eth_rxq_device(e->rxq, &e->rq), 0);
	struct kinet_eth_match m = {.fields = KINET_ETH_MATCH_IP_PROTO |
					      KINET_ETH_MATCH_L4_DST_PORT,
				    .ip_proto = 17,
				    .l4_dst_port = PORT_A};
	cr_assert_eq(kinet_eth_flow_create(e->rxq, &m, &e->flow), 0);
	cr_assert_eq(tu_region_alloc(&e->txb, e->pd, 4 * SLOT, KINET_ACCESS_LOCAL_WRITE, 5), 0);
	e->sock = peer_socket();
}

static void env_close(struct env *e)
{
	if (e->sock >= 0)
		close(e->sock);
	if (e->flow)
		cr_assert_eq(kinet_eth_flow_destroy(e->flow), 0);
	if (e->rxq)
		cr_assert_eq(kinet_eth_rxq_destroy(e->rxq), 0);
	if (e->txq) {
		cr_assert(tu_region_canaries_ok(&e->txb));
		tu_region_free(&e->txb);
		cr_assert_eq(kinet_eth_txq_destroy(e->txq), 0);
	}
	if (e->port)
		cr_assert_eq(kinet_eth_port_close(e->port), 0);
	cr_assert_eq(kinet_pd_free(e->pd), 0);
	cr_assert_eq(kinet_close(e->ctx), 0);
}

/* A datagram of n random bytes (seed) from the peer to the port: it
 * arrives in the receive queue, its payload byte for byte, within ms
 * milliseconds. Returns the nanoseconds it took. */
static uint64_t peer_to_port(struct env *e, uint32_t n, uint64_t seed, unsigned ms)
{
	uint8_t buf[1500];
	tu_fill_random(buf, n, seed);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(PORT_A)};
	memcpy(&to.sin_addr, ip_a, 4);
	uint64_t t0 = kn_now_ns();
	cr_assert_eq(sendto(e->sock, buf, n, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)n,
		     "%s", strerror(errno));
	kn_eth_pkt p;
	uint32_t k = 0;
	while (!k && kn_now_ns() - t0 < (uint64_t)ms * 1000000ull)
		cr_assert_eq(kn_eth_recv(e->rq, &p, 1, 1000000, &k), 0);
	uint64_t dt = kn_now_ns() - t0;
	cr_assert_eq(k, 1, "the datagram did not arrive within %u ms", ms);
	cr_assert_eq(p.len, 42 + n, "a frame of %u bytes, %u sent", p.len, 42 + n);
	cr_assert_eq(memcmp(p.data + 42, buf, n), 0, "the payload differs");
	cr_assert_eq(kn_eth_release(e->rq, p.ticket + 1), 0);
	return dt;
}

/* A frame of n random payload bytes (seed) sent by the port to the peer's
 * socket: it arrives byte for byte within ms milliseconds. Returns the
 * nanoseconds it took. */
static uint64_t port_to_peer(struct env *e, uint32_t n, uint64_t seed, unsigned ms)
{
	struct te_flow f;
	memset(&f, 0, sizeof(f));
	memcpy(f.smac, e->mac, 6);
	memcpy(f.dmac, mac_b, 6);
	memcpy(f.sip, ip_a, 4);
	memcpy(f.dip, ip_b, 4);
	f.sport = PORT_A;
	f.dport = PORT_B;
	f.proto = 17;
	uint8_t *fr = e->txb.buf;
	uint32_t len = te_frame(fr, &f, n, seed, 0, 0);
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
	setsockopt(e->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	uint64_t t0 = kn_now_ns();
	kn_ticket_t t;
	cr_assert_eq(kn_eth_send(e->tq, fr, tu_lkey(&e->txb), len, 0, &t), 0);
	uint8_t got[1600];
	ssize_t r = recv(e->sock, got, sizeof(got), 0);
	uint64_t dt = kn_now_ns() - t0;
	cr_assert_eq(r, (ssize_t)n, "the peer got %zd bytes (%s), %u sent", r,
		     r < 0 ? strerror(errno) : "", n);
	cr_assert_eq(memcmp(got, fr + 42, n), 0, "the payload differs");
	cr_assert_eq(kn_eth_txq_wait(e->tq, t), 0);
	return dt;
}

/* ---- a port whose owner was killed, or lives ---- */

/* A child that opens an AF_XDP port on if_a in namespace a, says 'r' on
 * the pipe (or 'e' when the open failed) and waits to be killed. */
static pid_t owner_start(void)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[0]);
		alarm(60);
		char c = 'e';
		kinet_ctx *ctx;
		kinet_pd *pd;
		kinet_eth_port *port;
		struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
		struct kinet_eth_port_attr pa = {.driver = KINET_ETH_DRIVER_XDP, .ifname = if_a};
		if (enter(ns_a) == 0 && kinet_open(&ca, &ctx) == 0 &&
		    kinet_pd_alloc(ctx, &pd) == 0 && kinet_eth_port_open(pd, &pa, &port) == 0)
			c = 'r';
		if (write(p[1], &c, 1) != 1 || c != 'r')
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	char c = 0;
	cr_assert_eq(read(p[0], &c, 1), 1);
	close(p[0]);
	if (c != 'r') {
		waitpid(pid, NULL, 0);
		cr_skip_test("AF_XDP is unavailable here (the owner could not open its port)");
	}
	return pid;
}

static void owner_kill(pid_t pid)
{
	int st;
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

Test(eth_xdp, killed_owner_program_detached_and_frames_flow)
{
	ns_up();
	pid_t owner = owner_start();
	owner_kill(owner);
	cap_buf[0] = 0;
	kinet_log_set_callback(cap_log, NULL);
	struct env e;
	int rc = env_port(&e, KINET_ETH_DRIVER_XDP);
	kinet_log_set_callback(NULL, NULL);
	cr_assert_eq(rc, 0, "the port of a killed process black-holes the interface:\n%s",
		     cap_buf);
	char pid_s[32];
	snprintf(pid_s, sizeof(pid_s), "process %d", (int)owner);
	cr_assert(strstr(cap_buf, "stale"), "the detach not said:\n%s", cap_buf);
	cr_assert(strstr(cap_buf, pid_s), "the dead owner not named:\n%s", cap_buf);
	env_queues(&e);
	for (int i = 0; i < 5; i++) {
		peer_to_port(&e, 100 + 271 * (uint32_t)i, 10 + (uint64_t)i, 2000);
		port_to_peer(&e, 1400 - 211 * (uint32_t)i, 20 + (uint64_t)i, 2000);
	}
	env_close(&e);
}

/* Killed, not yet reaped by its parent (a zombie: its files, the port's
 * sockets among them, are closed): ended all the same. */
Test(eth_xdp, killed_owner_not_yet_reaped_counts_as_ended)
{
	ns_up();
	pid_t owner = owner_start();
	cr_assert_eq(kill(owner, SIGKILL), 0);
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	cr_assert_eq(waitid(P_PID, (id_t)owner, &si, WEXITED | WNOWAIT), 0); /* a zombie now */
	cr_assert_eq(si.si_pid, owner);
	cap_buf[0] = 0;
	kinet_log_set_callback(cap_log, NULL);
	struct env e;
	int rc = env_port(&e, KINET_ETH_DRIVER_XDP);
	kinet_log_set_callback(NULL, NULL);
	cr_assert_eq(waitpid(owner, NULL, 0), owner);
	cr_assert_eq(rc, 0, "a killed owner not yet reaped holds the interface:\n%s", cap_buf);
	cr_assert(strstr(cap_buf, "stale"), "the detach not said:\n%s", cap_buf);
	env_queues(&e);
	peer_to_port(&e, 300, 30, 2000);
	port_to_peer(&e, 300, 31, 2000);
	env_close(&e);
}

Test(eth_xdp, live_owner_said_with_the_command_that_detaches)
{
	ns_up();
	pid_t owner = owner_start();
	cap_buf[0] = 0;
	kinet_log_set_callback(cap_log, NULL);
	struct env e;
	int rc = env_port(&e, KINET_ETH_DRIVER_AUTO);
	kinet_log_set_callback(NULL, NULL);
	owner_kill(owner);
	cr_assert_eq(rc, -EBUSY, "a second port on a live owner's interface: %d\n%s", rc, cap_buf);
	cr_assert_null(e.port);
	char want[96];
	snprintf(want, sizeof(want), "process %d", (int)owner);
	cr_assert(strstr(cap_buf, want), "the owner not named:\n%s", cap_buf);
	cr_assert(strstr(cap_buf, "kinet_steer"), "the program not named:\n%s", cap_buf);
	cr_assert(strstr(cap_buf, "(id "), "the program's id not given:\n%s", cap_buf);
	snprintf(want, sizeof(want), "xdp-loader unload %s --all", if_a);
	cr_assert(strstr(cap_buf, want), "no command that detaches:\n%s", cap_buf);
	snprintf(want, sizeof(want), "ip link set dev %s xdp off", if_a);
	cr_assert(strstr(cap_buf, want), "no command that detaches:\n%s", cap_buf);
	cr_assert_null(strstr(cap_buf, "KINET_ETH_FALLBACK=packet would"),
		       "a fallback that would not help:\n%s", cap_buf);
	env_close(&e);
}

/* ---- an idle port ---- */

/* CPU time of the threads named name* so far (ns): the scheduler's count
 * (schedstat), else utime + stime. Returns how many threads there were. */
static int cpu_of(const char *name, uint64_t *ns)
{
	DIR *d = opendir("/proc/self/task");
	cr_assert_not_null(d);
	struct dirent *de;
	int n = 0;
	*ns = 0;
	long hz = sysconf(_SC_CLK_TCK);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[300], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		if (strncmp(comm, name, strlen(name)))
			continue;
		n++;
		unsigned long long run = 0;
		snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", de->d_name);
		if ((f = fopen(path, "r")) && fscanf(f, "%llu", &run) == 1) {
			*ns += run;
			fclose(f);
			continue;
		}
		if (f)
			fclose(f);
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", de->d_name);
		cr_assert_not_null(f = fopen(path, "r"));
		char buf[1024];
		size_t l = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[l] = 0;
		unsigned long long ut = 0, st = 0;
		const char *s = strrchr(buf, ')');
		cr_assert_not_null(s);
		cr_assert_eq(sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
				    &ut, &st),
			     2);
		*ns += (ut + st) * 1000000000ull / (unsigned long long)hz;
	}
	closedir(d);
	return n;
}

#define IDLE_MAX_FRACTION 0.10 /* of a core (before it slept on its sockets: 15 to 30%) */
#define WAKE_MS 100           /* a frame after the idle second, either way */

static void idle_case(int drv)
{
	ns_up();
	struct env e;
	int rc = env_port(&e, drv);
	if (rc == -EOPNOTSUPP)
		cr_skip_test("AF_XDP is unavailable here");
	cr_assert_eq(rc, 0);
	env_queues(&e);
	/* awake: frames both ways */
	peer_to_port(&e, 500, 1, 2000);
	port_to_peer(&e, 500, 2, 2000);
	usleep(300000); /* past the spinning after the last work */
	uint64_t c0, c1;
	char name[32];
	snprintf(name, sizeof(name), "kn-eth-%.8s", if_a);
	cr_assert_eq(cpu_of(name, &c0), 1, "no thread %s", name);
	uint64_t t0 = kn_now_ns();
	sleep(1);
	cr_assert_eq(cpu_of(name, &c1), 1);
	double frac = (double)(c1 - c0) / (double)(kn_now_ns() - t0);
	uint64_t in = peer_to_port(&e, 777, 3, WAKE_MS);
	usleep(300000);
	uint64_t out = port_to_peer(&e, 888, 4, WAKE_MS);
	fprintf(stderr, "%s: idle port thread %.2f%% of a core; after idling, in %.3f ms, out %.3f ms\n",
		drv == KINET_ETH_DRIVER_PACKET ? "AF_PACKET" : "AF_XDP", 100 * frac, in / 1e6,
		out / 1e6);
	cr_assert_lt(frac, IDLE_MAX_FRACTION, "an idle port's thread took %.1f%% of a core",
		     100 * frac);
	env_close(&e);
}

Test(eth_xdp, idle_port_sleeps_and_wakes_af_xdp)
{
	idle_case(KINET_ETH_DRIVER_XDP);
}

Test(eth_xdp, idle_port_sleeps_and_wakes_af_packet)
{
	idle_case(KINET_ETH_DRIVER_PACKET);
}

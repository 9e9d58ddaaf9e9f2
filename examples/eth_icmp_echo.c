/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_icmp_echo - an ICMP echo responder whose data path is device code
 * (app_echo of eth_apps.h, on a host-executor thread; a CUDA kernel in
 * eth_apps_cuda.cu): the ICMP frames to one IPv4 address are steered to its
 * receive queue, each echo request is answered (addresses swapped, type 0,
 * ICMP and IPv4 checksums recomputed). `ping` from a peer gets one reply per
 * request: the frames are taken from the kernel (AF_XDP), which answers ARP.
 *
 *   eth_icmp_echo --if IFNAME --ip A.B.C.D [--count N] [--seconds S]
 *                 [--driver auto|xdp|packet|loopback]
 */
#include <getopt.h>
#include <unistd.h>
#include "eth_common.h"

static int run(int tid, int n, void *arg)
{
	(void)tid;
	(void)n;
	return app_echo((const struct app_args *)arg, 1);
}

int main(int argc, char **argv)
{
	const char *ifname = NULL, *drv = "auto", *ip = NULL;
	unsigned seconds = 0;
	unsigned long long count = 0;
	static const struct option opts[] = {
		{"if", required_argument, 0, 'i'},	  {"ip", required_argument, 0, 'a'},
		{"count", required_argument, 0, 'c'},  {"seconds", required_argument, 0, 's'},
		{"driver", required_argument, 0, 'd'}, {0, 0, 0, 0}};
	for (int o; (o = getopt_long(argc, argv, "i:a:c:s:d:", opts, NULL)) != -1;) {
		switch (o) {
		case 'i': ifname = optarg; break;
		case 'a': ip = optarg; break;
		case 'c': count = strtoull(optarg, NULL, 10); break;
		case 's': seconds = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'd': drv = optarg; break;
		default: return 2;
		}
	}
	struct kinet_eth_match m;
	memset(&m, 0, sizeof(m));
	if ((!ifname && strcmp(drv, "loopback")) || ex_driver(drv) < 0 || ex_ip4(ip, m.ip_dst)) {
		fprintf(stderr, "usage: %s --if IFNAME --ip A.B.C.D [--count N] [--seconds S] "
				"[--driver auto|xdp|packet|loopback]\n",
			argv[0]);
		return 2;
	}
	m.fields = KINET_ETH_MATCH_IPV4_DST | KINET_ETH_MATCH_IP_PROTO;
	m.ip_proto = 1;
	struct eth_ex x;
	int rc = ex_open(&x, ifname, ex_driver(drv), 256, 1, 0, 0);
	if (!rc)
		rc = ex_flow(&x, &m);
	if (!rc) {
		struct app_args a;
		struct app_stats st;
		ex_args(&x, &a, &st, count);
		if (seconds) {
			signal(SIGALRM, ex_on_signal);
			alarm(seconds);
		}
		fprintf(stderr, "answering ICMP echo requests to %s\n", ip);
		printf("ready\n");
		fflush(stdout);
		rc = kinet_host_exec(1, run, &a);
		printf("replied=%llu received=%llu ignored=%llu bad_csum=%llu\n",
		       (unsigned long long)st.tx, (unsigned long long)st.rx,
		       (unsigned long long)st.ignored, (unsigned long long)st.bad_csum);
		ex_counters(&x);
		if (rc)
			ex_fail("echo loop", rc);
	}
	ex_close(&x);
	return rc ? 1 : 0;
}

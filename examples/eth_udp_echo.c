/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_udp_echo - a UDP echo server whose data path is device code: a
 * persistent loop (app_echo of eth_apps.h; a CUDA kernel in
 * eth_apps_cuda.cu) receives the datagrams of one UDP port from an Ethernet
 * receive queue, swaps the addresses, recomputes the checksums and sends
 * them back. Here it runs on a host-executor thread.
 *
 *   eth_udp_echo --if IFNAME [--port 7] [--count N] [--seconds S]
 *                [--driver auto|xdp|packet|loopback] [--striding] [--pkt-size B]
 *
 * Frames of the port's UDP port are taken from the kernel (AF_XDP), so the
 * server answers instead of the stack. --pkt-size: the bytes of each cyclic
 * receive buffer (default 2048; a frame longer is dropped with an error
 * CQE). Prints echoed=N, and the NIC's counts.
 */
#include <getopt.h>
#include <unistd.h>
#include "eth_common.h"

static int run(int tid, int n, void *arg)
{
	(void)tid;
	(void)n;
	return app_echo((const struct app_args *)arg, 0);
}

int main(int argc, char **argv)
{
	const char *ifname = NULL, *drv = "auto";
	unsigned port = 7, seconds = 0;
	unsigned long long count = 0;
	int striding = 0;
	unsigned pkt_size = 0;
	static const struct option opts[] = {
		{"if", required_argument, 0, 'i'},     {"port", required_argument, 0, 'p'},
		{"count", required_argument, 0, 'c'},  {"seconds", required_argument, 0, 's'},
		{"driver", required_argument, 0, 'd'}, {"striding", no_argument, 0, 'S'},
		{"pkt-size", required_argument, 0, 'b'}, {0, 0, 0, 0}};
	for (int o; (o = getopt_long(argc, argv, "i:p:c:s:d:Sb:", opts, NULL)) != -1;) {
		switch (o) {
		case 'i': ifname = optarg; break;
		case 'p': port = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'c': count = strtoull(optarg, NULL, 10); break;
		case 's': seconds = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'd': drv = optarg; break;
		case 'S': striding = 1; break;
		case 'b': pkt_size = (unsigned)strtoul(optarg, NULL, 10); break;
		default: return 2;
		}
	}
	if ((!ifname && strcmp(drv, "loopback")) || ex_driver(drv) < 0 || !port || port > 65535) {
		fprintf(stderr, "usage: %s --if IFNAME [--port 7] [--count N] [--seconds S] "
				"[--driver auto|xdp|packet|loopback] [--striding] "
				"[--pkt-size B]\n",
			argv[0]);
		return 2;
	}
	struct eth_ex x;
	int rc = ex_open(&x, ifname, ex_driver(drv), 256, 1, striding, pkt_size);
	struct kinet_eth_match m;
	memset(&m, 0, sizeof(m));
	m.fields = KINET_ETH_MATCH_IP_PROTO | KINET_ETH_MATCH_L4_DST_PORT;
	m.ip_proto = 17;
	m.l4_dst_port = (uint16_t)port;
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
		fprintf(stderr, "echoing UDP port %u\n", port);
		printf("ready\n");
		fflush(stdout);
		rc = kinet_host_exec(1, run, &a);
		printf("echoed=%llu received=%llu ignored=%llu bad_csum=%llu rx_errors=%llu\n",
		       (unsigned long long)st.tx, (unsigned long long)st.rx,
		       (unsigned long long)st.ignored, (unsigned long long)st.bad_csum,
		       (unsigned long long)st.errors);
		ex_counters(&x);
		if (rc)
			ex_fail("echo loop", rc);
	}
	ex_close(&x);
	return rc ? 1 : 0;
}

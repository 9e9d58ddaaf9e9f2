/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_classify - a packet classifier and counter whose data path is device
 * code (app_classify of eth_apps.h, on a host-executor thread; a CUDA kernel
 * in eth_apps_cuda.cu): every IPv4 and IPv6 frame of the port (ARP stays
 * with the kernel; --all takes every frame, the default flow) counted by
 * protocol and by flow (source, destination, protocol, ports).
 *
 *   eth_classify --if IFNAME [--count N] [--seconds S] [--all]
 *                [--driver auto|xdp|packet|loopback] [--striding]
 *
 * Prints the counts by protocol, then one line per flow.
 */
#include <getopt.h>
#include <unistd.h>
#include "eth_common.h"

static int run(int tid, int n, void *arg)
{
	(void)tid;
	(void)n;
	return app_classify((const struct app_args *)arg);
}

int main(int argc, char **argv)
{
	const char *ifname = NULL, *drv = "auto";
	unsigned seconds = 0;
	unsigned long long count = 0;
	int all = 0, striding = 0;
	static const struct option opts[] = {
		{"if", required_argument, 0, 'i'},	{"count", required_argument, 0, 'c'},
		{"seconds", required_argument, 0, 's'}, {"all", no_argument, 0, 'A'},
		{"driver", required_argument, 0, 'd'},	{"striding", no_argument, 0, 'S'},
		{0, 0, 0, 0}};
	for (int o; (o = getopt_long(argc, argv, "i:c:s:Ad:S", opts, NULL)) != -1;) {
		switch (o) {
		case 'i': ifname = optarg; break;
		case 'c': count = strtoull(optarg, NULL, 10); break;
		case 's': seconds = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'A': all = 1; break;
		case 'd': drv = optarg; break;
		case 'S': striding = 1; break;
		default: return 2;
		}
	}
	if ((!ifname && strcmp(drv, "loopback")) || ex_driver(drv) < 0) {
		fprintf(stderr, "usage: %s --if IFNAME [--count N] [--seconds S] [--all] "
				"[--driver auto|xdp|packet|loopback] [--striding]\n",
			argv[0]);
		return 2;
	}
	struct eth_ex x;
	int rc = ex_open(&x, ifname, ex_driver(drv), 1024, 1, striding, 0);
	struct kinet_eth_match m;
	memset(&m, 0, sizeof(m));
	if (!rc && all) {
		rc = ex_flow(&x, &m);
	} else if (!rc) {
		m.fields = KINET_ETH_MATCH_ETHERTYPE;
		m.ethertype = 0x0800;
		rc = ex_flow(&x, &m);
		m.ethertype = 0x86dd;
		if (!rc)
			rc = ex_flow(&x, &m);
	}
	if (!rc) {
		struct app_args a;
		struct app_stats st;
		ex_args(&x, &a, &st, count);
		if (seconds) {
			signal(SIGALRM, ex_on_signal);
			alarm(seconds);
		}
		printf("ready\n");
		fflush(stdout);
		rc = kinet_host_exec(1, run, &a);
		printf("rx=%llu ipv4=%llu ipv6=%llu arp=%llu other_l3=%llu udp=%llu tcp=%llu "
		       "icmp=%llu other_l4=%llu bad_csum=%llu flows=%u\n",
		       (unsigned long long)st.rx, (unsigned long long)st.ipv4,
		       (unsigned long long)st.ipv6, (unsigned long long)st.arp,
		       (unsigned long long)st.other_l3, (unsigned long long)st.udp,
		       (unsigned long long)st.tcp, (unsigned long long)st.icmp,
		       (unsigned long long)st.other_l4, (unsigned long long)st.bad_csum, st.nflows);
		for (uint32_t i = 0; i < st.nflows; i++) {
			const struct app_flow *f = &st.flows[i];
			printf("flow src=%u.%u.%u.%u dst=%u.%u.%u.%u proto=%u sport=%u dport=%u "
			       "packets=%llu bytes=%llu\n",
			       f->src[0], f->src[1], f->src[2], f->src[3], f->dst[0], f->dst[1],
			       f->dst[2], f->dst[3], f->proto, f->sport, f->dport,
			       (unsigned long long)f->packets, (unsigned long long)f->bytes);
		}
		ex_counters(&x);
		if (rc)
			ex_fail("classifier", rc);
	}
	ex_close(&x);
	return rc ? 1 : 0;
}

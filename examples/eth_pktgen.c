/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_pktgen - a packet generator whose data path is device code (app_pktgen
 * of eth_apps.h, on a host-executor thread; a CUDA kernel in
 * eth_apps_cuda.cu): UDP frames of one size over several flows (source
 * ports sport .. sport+flows-1), at a rate, optionally paced by the NIC
 * (each frame sent at its time, kn_eth_send_at). Each payload carries the
 * flow, a sequence number and a pattern a receiver can check.
 *
 *   eth_pktgen --if IFNAME --src-ip A --dst-ip B --dst-mac M [--sport 9000]
 *              [--dport 9000] [--flows 4] [--size 128] [--count 1000]
 *              [--rate PPS] [--pace] [--driver auto|xdp|packet|loopback]
 */
#include <getopt.h>
#include "eth_common.h"

static int run(int tid, int n, void *arg)
{
	(void)tid;
	(void)n;
	return app_pktgen((const struct app_args *)arg);
}

int main(int argc, char **argv)
{
	const char *ifname = NULL, *drv = "auto", *sip = NULL, *dip = NULL, *dmac = NULL;
	unsigned sport = 9000, dport = 9000, flows = 4, size = 128, pace = 0;
	unsigned long long count = 1000, rate = 0;
	static const struct option opts[] = {
		{"if", required_argument, 0, 'i'},	  {"src-ip", required_argument, 0, 'a'},
		{"dst-ip", required_argument, 0, 'b'},  {"dst-mac", required_argument, 0, 'm'},
		{"sport", required_argument, 0, 'S'},   {"dport", required_argument, 0, 'D'},
		{"flows", required_argument, 0, 'f'},   {"size", required_argument, 0, 'z'},
		{"count", required_argument, 0, 'c'},   {"rate", required_argument, 0, 'r'},
		{"pace", no_argument, 0, 'P'},	  {"driver", required_argument, 0, 'd'},
		{0, 0, 0, 0}};
	for (int o; (o = getopt_long(argc, argv, "i:a:b:m:S:D:f:z:c:r:Pd:", opts, NULL)) != -1;) {
		switch (o) {
		case 'i': ifname = optarg; break;
		case 'a': sip = optarg; break;
		case 'b': dip = optarg; break;
		case 'm': dmac = optarg; break;
		case 'S': sport = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'D': dport = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'f': flows = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'z': size = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'c': count = strtoull(optarg, NULL, 10); break;
		case 'r': rate = strtoull(optarg, NULL, 10); break;
		case 'P': pace = 1; break;
		case 'd': drv = optarg; break;
		default: return 2;
		}
	}
	uint8_t s4[4], d4[4], dm[6];
	if ((!ifname && strcmp(drv, "loopback")) || ex_driver(drv) < 0 || ex_ip4(sip, s4) ||
	    ex_ip4(dip, d4) || ex_mac(dmac, dm) || !flows || sport + flows > 65536 ||
	    size < 60 || size > 1514 || (pace && !rate)) {
		fprintf(stderr, "usage: %s --if IFNAME --src-ip A --dst-ip B --dst-mac M "
				"[--sport 9000] [--dport 9000] [--flows 4] [--size 60..1514] "
				"[--count 1000] [--rate PPS] [--pace (needs --rate)] "
				"[--driver auto|xdp|packet|loopback]\n",
			argv[0]);
		return 2;
	}
	struct eth_ex x;
	int rc = ex_open(&x, ifname, ex_driver(drv), 256, 0, 0, 0);
	if (!rc) {
		struct app_args a;
		struct app_stats st;
		ex_args(&x, &a, &st, count);
		a.max = count;
		uint8_t *h = a.tmpl;
		memcpy(h, dm, 6);
		memcpy(h + 6, x.info.mac, 6);
		h[12] = 0x08;
		h[13] = 0x00;
		h[14] = 0x45;
		h[22] = 64; /* TTL */
		h[23] = 17;
		memcpy(h + 26, s4, 4);
		memcpy(h + 30, d4, 4);
		h[34] = (uint8_t)(sport >> 8);
		h[35] = (uint8_t)sport;
		h[36] = (uint8_t)(dport >> 8);
		h[37] = (uint8_t)dport;
		a.flows = flows;
		a.size = size;
		a.period_ns = rate ? 1000000000ull / rate : 0;
		a.pace = pace;
		if (pace) {
			uint64_t now;
			kinet_eth_port_time(x.port, &now);
			a.t0_ns = now + 1000000; /* 1 ms from now */
		}
		rc = kinet_host_exec(1, run, &a);
		printf("sent=%llu flows=%u size=%u paced=%u\n", (unsigned long long)st.tx, flows,
		       size, pace);
		ex_counters(&x);
		if (rc)
			ex_fail("generator", rc);
	}
	ex_close(&x);
	return rc ? 1 : 0;
}

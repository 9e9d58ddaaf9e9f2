/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_apps_cuda - the Ethernet examples with CUDA kernels: the device code
 * of eth_apps.h (what eth_udp_echo, eth_icmp_echo, eth_pktgen and
 * eth_classify run on a host-executor thread) as a persistent kernel, on
 * queue descriptors placed in GPU memory (kinet_cuda.h). The frame buffers,
 * the stop flag and the statistics are pinned host memory mapped into the
 * GPU.
 *
 *   eth_apps_cuda echo     --if IFNAME [--port 7] [--count N]
 *   eth_apps_cuda icmp     --if IFNAME --ip A.B.C.D [--count N]
 *   eth_apps_cuda pktgen   --if IFNAME --src-ip A --dst-ip B --dst-mac M [--sport 9000]
 *                          [--dport 9000] [--flows 4] [--size 128] [--count 1000]
 *                          [--rate PPS] [--pace]
 *   eth_apps_cuda classify --if IFNAME [--count N] [--all]
 *
 * Common options: --driver auto|xdp|packet|loopback, --seconds S (stop after).
 * Output as the host-executor programs'.
 */
#include <getopt.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <kinet/kinet_cuda.h>
#include "eth_common.h"

static volatile uint32_t *g_stop; /* mapped: the kernel reads it */

static void on_signal(int sig)
{
	(void)sig;
	if (g_stop)
		*g_stop = 1;
}

__global__ void app_kernel(struct app_args a, int which, int *rc)
{
	if (blockIdx.x || threadIdx.x)
		return;
	int r;
	switch (which) {
	case 0: r = app_echo(&a, 0); break;
	case 1: r = app_echo(&a, 1); break;
	case 2: r = app_pktgen(&a); break;
	default: r = app_classify(&a); break;
	}
	*rc = r;
}

#define CK(x)                                                                            \
	do {                                                                             \
		cudaError_t e_ = (x);                                                    \
		if (e_ != cudaSuccess) {                                                 \
			fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));         \
			return 1;                                                        \
		}                                                                        \
	} while (0)

int main(int argc, char **argv)
{
	static const char *const apps[] = {"echo", "icmp", "pktgen", "classify"};
	int which = -1;
	for (int i = 0; argc > 1 && i < 4; i++)
		if (!strcmp(argv[1], apps[i]))
			which = i;
	const char *ifname = NULL, *drv = "auto", *ip = NULL, *sip = NULL, *dip = NULL,
		   *dmac = NULL;
	unsigned port = 7, sport = 9000, dport = 9000, flows = 4, size = 128, seconds = 0;
	unsigned long long count = 0, rate = 0;
	int pace = 0, all = 0;
	static const struct option opts[] = {
		{"if", required_argument, 0, 'i'},      {"port", required_argument, 0, 'p'},
		{"ip", required_argument, 0, 'a'},      {"src-ip", required_argument, 0, 'A'},
		{"dst-ip", required_argument, 0, 'B'},  {"dst-mac", required_argument, 0, 'm'},
		{"sport", required_argument, 0, 'S'},   {"dport", required_argument, 0, 'D'},
		{"flows", required_argument, 0, 'f'},   {"size", required_argument, 0, 'z'},
		{"count", required_argument, 0, 'c'},   {"rate", required_argument, 0, 'r'},
		{"pace", no_argument, 0, 'P'},          {"all", no_argument, 0, 'L'},
		{"driver", required_argument, 0, 'd'},  {"seconds", required_argument, 0, 's'},
		{0, 0, 0, 0}};
	optind = 2;
	for (int o;
	     which >= 0 &&
	     (o = getopt_long(argc, argv, "i:p:a:A:B:m:S:D:f:z:c:r:PLd:s:", opts, NULL)) != -1;) {
		switch (o) {
		case 'i': ifname = optarg; break;
		case 'p': port = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'a': ip = optarg; break;
		case 'A': sip = optarg; break;
		case 'B': dip = optarg; break;
		case 'm': dmac = optarg; break;
		case 'S': sport = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'D': dport = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'f': flows = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'z': size = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'c': count = strtoull(optarg, NULL, 10); break;
		case 'r': rate = strtoull(optarg, NULL, 10); break;
		case 'P': pace = 1; break;
		case 'L': all = 1; break;
		case 'd': drv = optarg; break;
		case 's': seconds = (unsigned)strtoul(optarg, NULL, 10); break;
		default: return 2;
		}
	}
	uint8_t s4[4], d4[4], dm[6], ip4[4];
	bool bad = which < 0 || (!ifname && (!drv || strcmp(drv, "loopback"))) ||
		   ex_driver(drv) < 0 || (which == 1 && ex_ip4(ip, ip4)) ||
		   (which == 2 && (ex_ip4(sip, s4) || ex_ip4(dip, d4) || ex_mac(dmac, dm) ||
				   !flows || size < 60 || size > 1514 || (pace && !rate)));
	if (bad) {
		fprintf(stderr, "usage: %s echo|icmp|pktgen|classify --if IFNAME ... (see the "
				"comment at the top of examples/eth_apps_cuda.cu)\n",
			argv[0]);
		return 2;
	}
	if (!kinet_cuda_available()) {
		fprintf(stderr, "no usable GPU (the host-executor programs run the same code on "
				"CPU threads)\n");
		return 1;
	}
	struct eth_ex x;
	int rc = ex_open(&x, ifname, ex_driver(drv), 256, which != 2, 0, 0);
	struct kinet_eth_match m;
	memset(&m, 0, sizeof(m));
	if (!rc && which == 0) {
		m.fields = KINET_ETH_MATCH_IP_PROTO | KINET_ETH_MATCH_L4_DST_PORT;
		m.ip_proto = 17;
		m.l4_dst_port = (uint16_t)port;
		rc = ex_flow(&x, &m);
	} else if (!rc && which == 1) {
		m.fields = KINET_ETH_MATCH_IPV4_DST | KINET_ETH_MATCH_IP_PROTO;
		memcpy(m.ip_dst, ip4, 4);
		m.ip_proto = 1;
		rc = ex_flow(&x, &m);
	} else if (!rc && which == 3) {
		if (!all) {
			m.fields = KINET_ETH_MATCH_ETHERTYPE;
			m.ethertype = 0x0800;
			rc = ex_flow(&x, &m);
			m.ethertype = 0x86dd;
		}
		if (!rc)
			rc = ex_flow(&x, &m);
	}
	if (rc) {
		ex_close(&x);
		return 1;
	}
	/* the device side: descriptors in GPU memory, the rest mapped */
	struct app_args a;
	struct app_stats *st;
	int *drc;
	CK(cudaHostAlloc((void **)&g_stop, 4, cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&st, sizeof(*st), cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&drc, sizeof(int), cudaHostAllocMapped));
	*g_stop = 0;
	*drc = -1;
	ex_args(&x, &a, st, count);
	a.stop = g_stop;
	if ((rc = kinet_eth_txq_device_cuda(x.txq, (kn_eth_txq **)&a.tq)) ||
	    (x.rxq && (rc = kinet_eth_rxq_device_cuda(x.rxq, (kn_eth_rxq **)&a.rq)))) {
		ex_fail("placing the queues in GPU memory", rc);
		ex_close(&x);
		return 1;
	}
	/* the frame buffer: registered host memory, mapped (unified addressing) */
	CK(cudaHostRegister(x.txbuf, x.txlen, cudaHostRegisterMapped));
	if (which == 2) {
		uint8_t *h = a.tmpl;
		memcpy(h, dm, 6);
		memcpy(h + 6, x.info.mac, 6);
		h[12] = 0x08;
		h[14] = 0x45;
		h[22] = 64;
		h[23] = 17;
		memcpy(h + 26, s4, 4);
		memcpy(h + 30, d4, 4);
		h[34] = (uint8_t)(sport >> 8);
		h[35] = (uint8_t)sport;
		h[36] = (uint8_t)(dport >> 8);
		h[37] = (uint8_t)dport;
		a.flows = flows;
		a.size = size;
		a.max = count ? count : 1000;
		a.period_ns = rate ? 1000000000ull / rate : 0;
		a.pace = (uint32_t)pace;
		if (pace) {
			uint64_t now;
			kinet_eth_port_time(x.port, &now);
			a.t0_ns = now + 1000000;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (seconds) {
		signal(SIGALRM, on_signal);
		alarm(seconds);
	}
	printf("ready\n");
	fflush(stdout);
	app_kernel<<<1, 1>>>(a, which, drc);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	rc = *drc;
	if (which <= 1)
		printf("%s=%llu received=%llu ignored=%llu bad_csum=%llu\n",
		       which ? "replied" : "echoed", (unsigned long long)st->tx,
		       (unsigned long long)st->rx, (unsigned long long)st->ignored,
		       (unsigned long long)st->bad_csum);
	else if (which == 2)
		printf("sent=%llu flows=%u size=%u paced=%d\n", (unsigned long long)st->tx, flows,
		       size, pace);
	else
		printf("rx=%llu ipv4=%llu ipv6=%llu udp=%llu tcp=%llu icmp=%llu bad_csum=%llu "
		       "flows=%u\n",
		       (unsigned long long)st->rx, (unsigned long long)st->ipv4,
		       (unsigned long long)st->ipv6, (unsigned long long)st->udp,
		       (unsigned long long)st->tcp, (unsigned long long)st->icmp,
		       (unsigned long long)st->bad_csum, st->nflows);
	ex_counters(&x);
	if (rc)
		ex_fail("the kernel", rc);
	cudaHostUnregister(x.txbuf);
	kinet_eth_txq_device_cuda_release(x.txq);
	if (x.rxq)
		kinet_eth_rxq_device_cuda_release(x.rxq);
	ex_close(&x);
	cudaFreeHost((void *)g_stop);
	cudaFreeHost(st);
	cudaFreeHost(drc);
	return rc ? 1 : 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_bench - kernel-driven Ethernet rates for bench/eth.sh: the device code
 * (kinet/device_eth.h) on one host-executor thread, the software NIC's port
 * thread serving the queues (AF_XDP on the interface).
 *
 *   eth_bench tx IFNAME DSTMAC COUNT SIZE    COUNT frames of SIZE bytes, in
 *                                            bursts of 32 (one doorbell each)
 *   eth_bench rx IFNAME COUNT [striding]     counts COUNT frames (every frame:
 *                                            the default flow), 64 per receive
 *
 * Prints frames, seconds and pps (rx: from the first frame to the last).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <kinet/kinet.h>
#include <kinet/eth.h>
#include <kinet/device_eth.h>

#define SLOT 2048u
#define BURST 32u

struct args {
	const kn_eth_txq *tq;
	const kn_eth_rxq *rq;
	uint8_t *buf;
	uint32_t key, size;
	unsigned long long count, done;
	double t0, t1;
	int rc;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int tx_fn(int tid, int n, void *arg)
{
	(void)tid;
	(void)n;
	struct args *a = arg;
	kn_eth_frame f[BURST];
	for (uint32_t i = 0; i < BURST; i++) {
		f[i].data = a->buf + (size_t)i * SLOT;
		f[i].lkey = a->key;
		f[i].len = a->size;
		f[i].flags = 0;
		f[i].rsvd = 0;
	}
	a->t0 = now_s();
	/* the frames are the same bytes every time: a slot may be reused at once */
	while (a->done < a->count) {
		uint32_t k = a->count - a->done < BURST ? (uint32_t)(a->count - a->done) : BURST;
		kn_ticket_t last;
		int rc = kn_eth_send_burst(a->tq, f, k, &last);
		if (rc)
			return rc;
		a->done += k;
	}
	int rc = kn_eth_txq_quiet(a->tq);
	a->t1 = now_s();
	return rc;
}

static int rx_fn(int tid, int n, void *arg)
{
	(void)tid;
	(void)n;
	struct args *a = arg;
	kn_eth_pkt pk[64];
	double last = now_s();
	unsigned long long sum = 0;
	unsigned iter = 0;
	while (a->done < a->count) {
		uint32_t k = 0;
		int rc = kn_eth_recv(a->rq, pk, 64, 1000000, &k);
		if (rc)
			return rc;
		if (!k) {
			double t = now_s();
			if (t - last > (a->done ? 1.0 : 20.0))
				break; /* the sender is done */
			continue;
		}
		/* the clock costs as much as a small batch: read it on the first batch, every
		 * 64th and the last one only */
		if (!a->done || !(++iter & 63) || a->done + k >= a->count) {
			a->t1 = last = now_s();
			if (!a->done)
				a->t0 = a->t1;
		}
		for (uint32_t i = 0; i < k; i++)
			sum += pk[i].data[pk[i].len - 1]; /* touch it, as a consumer would */
		kn_eth_release(a->rq, pk[k - 1].ticket + 1);
		a->done += k;
	}
	a->rc = (int)(sum & 0); /* keep the reads */
	return 0;
}

int main(int argc, char **argv)
{
	int tx = argc >= 6 && !strcmp(argv[1], "tx"), rx = argc >= 4 && !strcmp(argv[1], "rx");
	unsigned m[6];
	if ((!tx && !rx) || (tx && sscanf(argv[3], "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3],
					  &m[4], &m[5]) != 6)) {
		fprintf(stderr, "usage: eth_bench tx IFNAME DSTMAC COUNT SIZE | rx IFNAME COUNT "
				"[striding]\n");
		return 2;
	}
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_eth_port *port;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	struct kinet_eth_port_attr pa = {.ifname = argv[2], .driver = KINET_ETH_DRIVER_XDP};
	int rc = kinet_open(&ca, &ctx);
	if (!rc)
		rc = kinet_pd_alloc(ctx, &pd);
	if (!rc)
		rc = kinet_eth_port_open(pd, &pa, &port);
	if (rc) {
		fprintf(stderr, "eth_bench: %s\n", kinet_strerror(rc));
		return 1;
	}
	struct args a;
	memset(&a, 0, sizeof(a));
	kinet_eth_txq *txq = NULL;
	kinet_eth_rxq *rxq = NULL;
	kinet_eth_flow *fl = NULL;
	kinet_mr *mr = NULL;
	if (tx) {
		struct kinet_eth_port_info info;
		kinet_eth_port_info(port, &info);
		struct kinet_eth_txq_attr ta = {.depth = 256};
		kn_eth_txq *tq;
		a.count = strtoull(argv[4], NULL, 10);
		a.size = (uint32_t)atoi(argv[5]);
		a.buf = calloc(BURST, SLOT);
		rc = kinet_eth_txq_create(port, &ta, &txq);
		if (!rc)
			rc = kinet_eth_txq_device(txq, &tq);
		if (!rc)
			rc = kinet_mr_reg(pd, a.buf, BURST * SLOT, KINET_ACCESS_LOCAL_WRITE, &mr);
		if (rc) {
			fprintf(stderr, "eth_bench: %s\n", kinet_strerror(rc));
			return 1;
		}
		a.tq = tq;
		a.key = kinet_mr_lkey(mr);
		for (uint32_t i = 0; i < BURST; i++) { /* UDP 10.0.0.1:9000 -> 10.0.0.2:9001 */
			uint8_t *f = a.buf + (size_t)i * SLOT;
			for (int j = 0; j < 6; j++)
				f[j] = (uint8_t)m[j];
			memcpy(f + 6, info.mac, 6);
			f[12] = 0x08;
			f[14] = 0x45;
			f[16] = (uint8_t)((a.size - 14) >> 8);
			f[17] = (uint8_t)(a.size - 14);
			f[22] = 64;
			f[23] = 17;
			f[26] = 10, f[29] = 1, f[30] = 10, f[33] = 2;
			f[34] = 0x23, f[35] = 0x28, f[36] = 0x23, f[37] = 0x29;
			f[38] = (uint8_t)((a.size - 34) >> 8);
			f[39] = (uint8_t)(a.size - 34);
		}
		rc = kinet_host_exec(1, tx_fn, &a);
	} else {
		struct kinet_eth_rxq_attr ra = {.depth = 1024};
		if (argc >= 5 && !strcmp(argv[4], "striding")) {
			ra.mode = KINET_ETH_RXQ_STRIDING;
			ra.depth = 16;
			ra.log_stride = 7;
			ra.log_strides = 9; /* 64 KiB WQEs of 128-byte strides */
		}
		kn_eth_rxq *rq;
		struct kinet_eth_match def = {0};
		a.count = strtoull(argv[3], NULL, 10);
		rc = kinet_eth_rxq_create(port, &ra, &rxq);
		if (!rc)
			rc = kinet_eth_rxq_device(rxq, &rq);
		if (!rc)
			rc = kinet_eth_flow_create(rxq, &def, &fl);
		if (rc) {
			fprintf(stderr, "eth_bench: %s\n", kinet_strerror(rc));
			return 1;
		}
		a.rq = rq;
		printf("ready\n");
		fflush(stdout);
		rc = kinet_host_exec(1, rx_fn, &a);
	}
	double dt = a.t1 - a.t0;
	printf("frames=%llu seconds=%.6f pps=%.0f\n", a.done, dt, dt > 0 ? a.done / dt : 0.0);
	struct kinet_eth_counters c;
	if (rxq && kinet_eth_rxq_counters(rxq, &c) == 0)
		printf("nic_rx=%llu drops_no_wqe=%llu drops_ring=%llu\n",
		       (unsigned long long)c.packets,
		       (unsigned long long)c.drops[KINET_ETH_DROP_NO_WQE],
		       (unsigned long long)c.drops[KINET_ETH_DROP_RING]);
	if (fl)
		kinet_eth_flow_destroy(fl);
	if (rxq)
		kinet_eth_rxq_destroy(rxq);
	if (txq)
		kinet_eth_txq_destroy(txq);
	if (mr)
		kinet_mr_dereg(mr);
	free(a.buf);
	kinet_eth_port_close(port);
	kinet_pd_free(pd);
	kinet_close(ctx);
	return rc ? 1 : 0;
}

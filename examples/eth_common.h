/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_common.h - the host side the Ethernet examples share: a context, an
 * Ethernet port on an interface, a send queue with its frame buffer, a
 * receive queue with its flows, and the stop signal. Plain C that a C++
 * compiler takes too (eth_apps_cuda.cu includes it).
 */
#ifndef KINET_EXAMPLES_ETH_COMMON_H
#define KINET_EXAMPLES_ETH_COMMON_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <kinet/kinet.h>
#include <kinet/eth.h>
#include <kinet/device_eth.h>
#include "eth_apps.h"

struct eth_ex {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_eth_port *port;
	struct kinet_eth_port_info info;
	kinet_eth_txq *txq;
	kn_eth_txq *tq;
	kinet_eth_rxq *rxq;
	kn_eth_rxq *rq;
	kinet_eth_flow *flows[4];
	int nflows;
	uint8_t *txbuf;
	kinet_mr *txmr;
	size_t txlen;
};

/* Set by SIGINT / SIGTERM: the device loops read it. */
static volatile uint32_t ex_stop;
static inline void ex_on_signal(int sig)
{
	(void)sig;
	ex_stop = 1;
}

static inline int ex_driver(const char *s)
{
	if (!s || !strcmp(s, "auto"))
		return KINET_ETH_DRIVER_AUTO;
	if (!strcmp(s, "xdp"))
		return KINET_ETH_DRIVER_XDP;
	if (!strcmp(s, "packet"))
		return KINET_ETH_DRIVER_PACKET;
	if (!strcmp(s, "loopback"))
		return KINET_ETH_DRIVER_LOOPBACK;
	return -1;
}

static inline int ex_ip4(const char *s, uint8_t ip[4])
{
	unsigned a, b, c, d;
	char tail;
	if (!s || sscanf(s, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || a > 255 || b > 255 ||
	    c > 255 || d > 255)
		return -1;
	ip[0] = (uint8_t)a;
	ip[1] = (uint8_t)b;
	ip[2] = (uint8_t)c;
	ip[3] = (uint8_t)d;
	return 0;
}

static inline int ex_mac(const char *s, uint8_t mac[6])
{
	unsigned m[6];
	char tail;
	if (!s ||
	    sscanf(s, "%x:%x:%x:%x:%x:%x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5], &tail) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (m[i] > 255)
			return -1;
		mac[i] = (uint8_t)m[i];
	}
	return 0;
}

static inline int ex_fail(const char *what, int rc)
{
	fprintf(stderr, "%s: %s\n", what, kinet_strerror(rc));
	return rc;
}

/* Opens the context (KINET_BACKEND, default auto), the port, a send queue
 * of depth frames with its buffer and, with rx, a receive queue of depth
 * buffers of pkt_size bytes (0: 2048; striding: 64-stride WQEs of 2 KiB
 * strides). */
static inline int ex_open(struct eth_ex *x, const char *ifname, int driver, uint32_t depth, int rx,
			  int striding, uint32_t pkt_size)
{
	memset(x, 0, sizeof(*x));
	signal(SIGINT, ex_on_signal);
	signal(SIGTERM, ex_on_signal);
	int rc = kinet_open(NULL, &x->ctx);
	if (rc)
		return ex_fail("kinet_open", rc);
	if ((rc = kinet_pd_alloc(x->ctx, &x->pd)))
		return ex_fail("kinet_pd_alloc", rc);
	struct kinet_eth_port_attr pa;
	memset(&pa, 0, sizeof(pa));
	pa.ifname = ifname;
	pa.driver = driver;
	if ((rc = kinet_eth_port_open(x->pd, &pa, &x->port)))
		return ex_fail("kinet_eth_port_open", rc);
	kinet_eth_port_info(x->port, &x->info);
	struct kinet_eth_txq_attr ta;
	memset(&ta, 0, sizeof(ta));
	ta.depth = depth;
	if ((rc = kinet_eth_txq_create(x->port, &ta, &x->txq)) ||
	    (rc = kinet_eth_txq_device(x->txq, &x->tq)))
		return ex_fail("kinet_eth_txq_create", rc);
	x->txlen = (size_t)x->tq->q.sq_wqe_cnt * APP_SLOT;
	x->txbuf = (uint8_t *)calloc(1, x->txlen);
	if (!x->txbuf)
		return ex_fail("calloc", -ENOMEM);
	if ((rc = kinet_mr_reg(x->pd, x->txbuf, x->txlen, KINET_ACCESS_LOCAL_WRITE, &x->txmr)))
		return ex_fail("kinet_mr_reg", rc);
	if (rx) {
		struct kinet_eth_rxq_attr ra;
		memset(&ra, 0, sizeof(ra));
		ra.depth = striding ? (depth / 64 ? depth / 64 : 2) : depth;
		ra.mode = striding ? KINET_ETH_RXQ_STRIDING : KINET_ETH_RXQ_CYCLIC;
		ra.pkt_size = striding ? 0 : pkt_size;
		ra.log_stride = 11;
		ra.log_strides = 6;
		if ((rc = kinet_eth_rxq_create(x->port, &ra, &x->rxq)) ||
		    (rc = kinet_eth_rxq_device(x->rxq, &x->rq)))
			return ex_fail("kinet_eth_rxq_create", rc);
	}
	fprintf(stderr, "port %s: %s, MAC %02x:%02x:%02x:%02x:%02x:%02x, MTU %u\n",
		x->info.ifname, x->info.mode, x->info.mac[0], x->info.mac[1], x->info.mac[2],
		x->info.mac[3], x->info.mac[4], x->info.mac[5], x->info.mtu);
	return 0;
}

static inline int ex_flow(struct eth_ex *x, const struct kinet_eth_match *m)
{
	int rc = kinet_eth_flow_create(x->rxq, m, &x->flows[x->nflows]);
	if (rc)
		return ex_fail("kinet_eth_flow_create", rc);
	x->nflows++;
	return 0;
}

/* The arguments of an app over x's queues. */
static inline void ex_args(struct eth_ex *x, struct app_args *a, struct app_stats *st, uint64_t max)
{
	memset(a, 0, sizeof(*a));
	memset(st, 0, sizeof(*st));
	a->tq = x->tq;
	a->rq = x->rq;
	a->txbuf = x->txbuf;
	a->txkey = kinet_mr_lkey(x->txmr);
	a->stop = &ex_stop;
	a->st = st;
	a->max = max ? max : ~(uint64_t)0;
}

static inline void ex_counters(struct eth_ex *x)
{
	struct kinet_eth_counters c;
	if (x->rxq && kinet_eth_rxq_counters(x->rxq, &c) == 0)
		printf("nic_rx_packets=%llu nic_rx_drops_no_wqe=%llu nic_rx_csum_bad=%llu\n",
		       (unsigned long long)c.packets,
		       (unsigned long long)c.drops[KINET_ETH_DROP_NO_WQE],
		       (unsigned long long)c.csum_bad);
	if (kinet_eth_txq_counters(x->txq, &c) == 0)
		printf("nic_tx_packets=%llu nic_tx_waits=%llu\n", (unsigned long long)c.packets,
		       (unsigned long long)c.tx_waits);
}

static inline void ex_close(struct eth_ex *x)
{
	for (int i = 0; i < x->nflows; i++)
		kinet_eth_flow_destroy(x->flows[i]);
	if (x->rxq)
		kinet_eth_rxq_destroy(x->rxq);
	if (x->txq)
		kinet_eth_txq_destroy(x->txq);
	if (x->txmr)
		kinet_mr_dereg(x->txmr);
	free(x->txbuf);
	if (x->port)
		kinet_eth_port_close(x->port);
	if (x->pd)
		kinet_pd_free(x->pd);
	if (x->ctx)
		kinet_close(x->ctx);
}

#endif

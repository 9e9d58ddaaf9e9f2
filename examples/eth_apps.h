/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_apps.h - the device code of the Ethernet examples, written once: the
 * host executor runs it on CPU threads (eth_udp_echo.c, eth_icmp_echo.c,
 * eth_pktgen.c, eth_classify.c), CUDA kernels run the same functions
 * (eth_apps_cuda.cu). Portable C over kinet/device_eth.h: no host calls, no
 * libc beyond what device code has.
 *
 * Each app is a persistent loop: it polls its receive queue (kn_eth_recv),
 * builds frames in its send buffer, posts them (low level: kn_sq_reserve,
 * kn_prep_eth_send, kn_sq_submit; the buffer slot of a frame is its ticket
 * modulo the queue depth, so a slot is reused only once the NIC has read it),
 * gives the receive buffers back (kn_eth_release), until asked to stop.
 */
#ifndef KINET_EXAMPLES_ETH_APPS_H
#define KINET_EXAMPLES_ETH_APPS_H

#include <kinet/device_eth.h>

#define APP_SLOT 2048u /* bytes per frame slot of a send buffer */
#define APP_BATCH 32u
#define APP_FLOWS 64u  /* flows the classifier tells apart */

/* One flow the classifier counts. */
struct app_flow {
	uint8_t src[4], dst[4];
	uint16_t sport, dport;
	uint8_t proto, rsvd[3];
	uint64_t packets, bytes;
};

/* What an app did (written by the device code, read by the host after). */
struct app_stats {
	uint64_t rx, tx, ignored, bad_csum, errors;
	uint64_t ipv4, ipv6, arp, other_l3, udp, tcp, icmp, other_l4;
	uint32_t nflows, rc;
	struct app_flow flows[APP_FLOWS];
};

/* Everything an app needs, filled by the host. */
struct app_args {
	const kn_eth_txq *tq;
	const kn_eth_rxq *rq; /* NULL for the generator */
	uint8_t *txbuf;       /* tq's depth x APP_SLOT bytes, registered: txkey */
	uint32_t txkey;
	volatile uint32_t *stop; /* the host sets it to end the loop */
	struct app_stats *st;
	uint64_t max;            /* stop after this many frames (sent, or counted) */
	/* generator */
	uint8_t tmpl[64];        /* Ethernet + IPv4 + UDP headers of flow 0 */
	uint32_t flows, size;    /* flows (UDP source ports tmpl's + 0 .. flows-1), frame size */
	uint64_t period_ns;      /* between frames (0: as fast as the queue takes them) */
	uint64_t t0_ns;          /* paced: the port time of frame 0 (kn_eth_send_at) */
	uint32_t pace;
	uint32_t rsvd;
};

KN_INLINE uint16_t app_ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
KN_INLINE void app_st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
KN_INLINE void app_copy(uint8_t *d, const uint8_t *s, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		d[i] = s[i];
}
KN_INLINE void app_swap(uint8_t *a, uint8_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint8_t t = a[i];
		a[i] = b[i];
		b[i] = t;
	}
}

/* The IPv4 header checksum and the UDP checksum (pseudo header) of frame f,
 * recomputed in place. ihl: header bytes. */
KN_INLINE void app_ipv4_csum(uint8_t *ip, uint32_t ihl)
{
	ip[10] = ip[11] = 0;
	app_st16(ip + 10, kn_csum(ip, ihl));
}
KN_INLINE void app_udp_csum(uint8_t *ip, uint32_t ihl, uint32_t udplen)
{
	uint8_t *u = ip + ihl;
	u[6] = u[7] = 0;
	uint8_t pl[4] = {0, 17, (uint8_t)(udplen >> 8), (uint8_t)udplen};
	uint32_t s = kn_csum_add(kn_csum_add(0, ip + 12, 8), pl, 4);
	uint16_t c = (uint16_t)~kn_csum_add(s, u, udplen);
	app_st16(u + 6, c ? c : 0xffff);
}

/* The reply to an echo request (UDP: any datagram; ICMP: echo request) in
 * `in`, written to out: addresses swapped, checksums recomputed. Returns its
 * length, or 0 when in is not one to answer. */
KN_INLINE uint32_t app_echo_reply(uint8_t *out, const kn_eth_pkt *p, int icmp)
{
	const uint8_t *in = p->data;
	uint32_t len = p->len;
	if (!(p->flags & KN_ETH_RX_IPV4) || (p->flags & KN_ETH_RX_CSUM_BAD) || len < 14 + 20 ||
	    len > APP_SLOT)
		return 0;
	uint32_t ihl = (in[14] & 0xfu) * 4u, tot = app_ld16(in + 16);
	if (ihl < 20 || 14 + tot > len || tot < ihl + 8 || in[23] != (icmp ? 1 : 17))
		return 0;
	if (icmp && in[14 + ihl] != 8)
		return 0; /* not an echo request */
	len = 14 + tot; /* without padding */
	app_copy(out, in, len);
	app_swap(out, out + 6, 6);       /* MACs */
	app_swap(out + 26, out + 30, 4); /* IP addresses */
	uint8_t *ip = out + 14;
	ip[8] = 64;                      /* TTL */
	app_ipv4_csum(ip, ihl);
	uint8_t *l4 = ip + ihl;
	if (icmp) {
		l4[0] = 0; /* echo reply */
		l4[2] = l4[3] = 0;
		app_st16(l4 + 2, kn_csum(l4, tot - ihl));
	} else {
		app_swap(l4, l4 + 2, 2); /* ports */
		app_udp_csum(ip, ihl, tot - ihl);
	}
	return len;
}

/* The echo server: answers every UDP datagram (icmp 0) or ICMP echo request
 * (icmp 1) its receive queue gets. */
KN_INLINE int app_echo(const struct app_args *a, int icmp)
{
	const kn_eth_txq *tq = a->tq;
	const kn_qp *q = &tq->q;
	struct app_stats *st = a->st;
	kn_eth_pkt pk[APP_BATCH];
	while (!*a->stop && st->tx < a->max) {
		uint32_t n = 0;
		/* whatever is there: an echo answers at once, it does not batch */
		int rc = kn_eth_recv_any(a->rq, pk, APP_BATCH, 100000, &n);
		if (rc)
			return rc;
		if (!n)
			continue;
		st->rx += n;
		kn_ticket_t t;
		rc = kn_sq_reserve(q, n, &t);
		if (rc)
			return rc;
		/* every reserved slot gets a WQE: a frame, or a NOP */
		for (uint32_t i = 0; i < n; i++) {
			uint8_t *slot =
				a->txbuf + (size_t)((t + i) & (q->sq_wqe_cnt - 1)) * APP_SLOT;
			void *wqe = kn_wqe_ptr(q, t + i);
			uint32_t len = app_echo_reply(slot, &pk[i], icmp);
			if (pk[i].flags & KN_ETH_RX_CSUM_BAD)
				st->bad_csum++;
			if (len && kn_prep_eth_send(tq, wqe, t + i, slot, a->txkey, len, 0) == 0) {
				st->tx++;
			} else {
				st->ignored++;
				kn_prep_nop(q, wqe, t + i);
			}
		}
		kn_sq_submit(q, t, n);
		/* the replies are copies: the receive buffers go back at once */
		kn_eth_release(a->rq, pk[n - 1].ticket + 1);
	}
	st->errors = kn_eth_rxq_errors(a->rq, 0);
	return kn_eth_txq_quiet(tq);
}

/* The generator: a->max UDP frames of a->size bytes over a->flows flows
 * (source ports tmpl + 0 .. flows-1), payload: flow (4 bytes), sequence
 * number in the flow (8 bytes), then byte j = (seq * 31 + j) & 0xff. The NIC
 * computes the checksums (offloads). Paced: frame i leaves at t0 + i *
 * period (port clock, kn_eth_send_at); else at most one frame per period
 * by the local clock. */
KN_INLINE int app_pktgen(const struct app_args *a)
{
	const kn_eth_txq *tq = a->tq;
	const kn_qp *q = &tq->q;
	struct app_stats *st = a->st;
	uint32_t hdr = 14 + 20 + 8;
	uint32_t size = a->size < hdr + 12 ? hdr + 12 : a->size;
	uint64_t start = kn_now_ns();
	uint64_t i = 0;
	while (!*a->stop && i < a->max) {
		uint32_t n = a->max - i < 16 ? (uint32_t)(a->max - i) : 16u;
		if (a->pace) {
			n = n < q->sq_wqe_cnt / 2 ? n : q->sq_wqe_cnt / 2;
		} else if (a->period_ns) {
			while (kn_now_ns() - start < i * a->period_ns)
				KN_PAUSE();
			n = 1;
		}
		kn_ticket_t t;
		uint32_t per = a->pace ? 2u : 1u;
		int rc = kn_sq_reserve(q, n * per, &t);
		if (rc)
			return rc;
		for (uint32_t k = 0; k < n; k++, i++) {
			kn_ticket_t ts = t + (uint64_t)k * per + per - 1; /* the send's ticket */
			uint8_t *f = a->txbuf + (size_t)(ts & (q->sq_wqe_cnt - 1)) * APP_SLOT;
			uint32_t flow = (uint32_t)(i % a->flows);
			uint64_t seq = i / a->flows;
			app_copy(f, a->tmpl, hdr);
			app_st16(f + 16, (uint16_t)(size - 14));
			app_st16(f + 18, (uint16_t)seq); /* IP identification */
			app_st16(f + 34, (uint16_t)(app_ld16(a->tmpl + 34) + flow));
			app_st16(f + 38, (uint16_t)(size - 34));
			f[24] = f[25] = f[40] = f[41] = 0; /* the NIC fills the checksums */
			uint8_t *pl = f + hdr;
			for (int b = 0; b < 4; b++)
				pl[b] = (uint8_t)(flow >> (24 - 8 * b));
			for (int b = 0; b < 8; b++)
				pl[4 + b] = (uint8_t)(seq >> (56 - 8 * b));
			for (uint32_t j = 12; j < size - hdr; j++)
				pl[j] = (uint8_t)(seq * 31 + j);
			if (a->pace)
				kn_prep_eth_wait(tq, kn_wqe_ptr(q, ts - 1), ts - 1,
						 a->t0_ns + i * a->period_ns);
			kn_prep_eth_send(tq, kn_wqe_ptr(q, ts), ts, f, a->txkey, size,
					 KN_ETH_TX_CSUM_L3 | KN_ETH_TX_CSUM_L4);
		}
		kn_sq_submit(q, t, n * per);
		st->tx += n;
	}
	return kn_eth_txq_quiet(tq);
}

/* The classifier: counts every frame its receive queue gets, by protocol and
 * by flow (IPv4 source, destination, protocol, ports), until a->max frames. */
KN_INLINE void app_count_flow(struct app_stats *st, const uint8_t *ip, uint32_t ihl, uint8_t proto,
			      uint32_t len, const uint8_t *l4, int has_ports)
{
	uint16_t sp = has_ports ? app_ld16(l4) : 0, dp = has_ports ? app_ld16(l4 + 2) : 0;
	for (uint32_t i = 0; i < st->nflows; i++) {
		struct app_flow *f = &st->flows[i];
		if (f->proto == proto && f->sport == sp && f->dport == dp &&
		    f->src[0] == ip[12] && f->src[1] == ip[13] && f->src[2] == ip[14] &&
		    f->src[3] == ip[15] && f->dst[0] == ip[16] && f->dst[1] == ip[17] &&
		    f->dst[2] == ip[18] && f->dst[3] == ip[19]) {
			f->packets++;
			f->bytes += len;
			return;
		}
	}
	(void)ihl;
	if (st->nflows == APP_FLOWS)
		return;
	struct app_flow *f = &st->flows[st->nflows++];
	app_copy(f->src, ip + 12, 4);
	app_copy(f->dst, ip + 16, 4);
	f->proto = proto;
	f->sport = sp;
	f->dport = dp;
	f->packets = 1;
	f->bytes = len;
}

KN_INLINE int app_classify(const struct app_args *a)
{
	struct app_stats *st = a->st;
	kn_eth_pkt pk[APP_BATCH];
	while (!*a->stop && st->rx < a->max) {
		uint32_t n = 0;
		int rc = kn_eth_recv(a->rq, pk, APP_BATCH, 100000, &n);
		if (rc)
			return rc;
		for (uint32_t i = 0; i < n; i++) {
			const uint8_t *f = pk[i].data;
			uint32_t fl = pk[i].flags;
			st->rx++;
			if (fl & KN_ETH_RX_CSUM_BAD)
				st->bad_csum++;
			uint16_t et = app_ld16(f + 12);
			if (fl & KN_ETH_RX_IPV4) {
				st->ipv4++;
				uint32_t ihl = (f[14] & 0xfu) * 4u;
				uint8_t proto = f[23];
				int ports = (fl & (KN_ETH_RX_UDP | KN_ETH_RX_TCP)) != 0;
				if (fl & KN_ETH_RX_UDP)
					st->udp++;
				else if (fl & KN_ETH_RX_TCP)
					st->tcp++;
				else if (proto == 1)
					st->icmp++;
				else
					st->other_l4++;
				app_count_flow(st, f + 14, ihl, proto, pk[i].len, f + 14 + ihl,
					       ports);
			} else if (fl & KN_ETH_RX_IPV6) {
				st->ipv6++;
			} else if (et == 0x0806) {
				st->arp++;
			} else {
				st->other_l3++;
			}
		}
		if (n)
			kn_eth_release(a->rq, pk[n - 1].ticket + 1);
	}
	st->errors = kn_eth_rxq_errors(a->rq, 0);
	return 0;
}

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_eth.h - Ethernet queues, the device data path at thread scope
 * (C and CUDA): send frames (one, a burst under one doorbell, or no earlier
 * than a given time), receive packets into the queue's buffers, give the
 * buffers back. Warp and block scope: kinet/device_eth.cuh. The host creates
 * the queues and exports the descriptors (kinet/eth.h).
 *
 * Send queue. An Ethernet SQ is an SQ of 64-byte WQEBBs with its own send CQ,
 * driven by the RC send path's machinery (kinet/device_sq.h): tickets, the
 * sharing modes, in-order publication, doorbell modes, one CQE per WQE. A
 * send is one WQEBB (ctrl | eth segment | data segment), a send at a time two
 * (a WAIT WQE on the port's real-time clock, then the send). A CQE means the
 * NIC has read the frame: its buffer may be reused.
 *
 * Receive queue. kinet posted every receive WQE; the NIC fills buffers and
 * writes receive CQEs; kn_eth_recv reads them (packet pointer, length,
 * flags, timestamp, RSS hash) and kn_eth_release gives the buffers of every
 * packet before a ticket back to the NIC (in order). One consumer per
 * receive queue (a thread, or the warp or block of a warp/block call).
 *
 * Return values: 0, -EINVAL (bad argument: nothing posted), -ETIMEDOUT,
 * -EIO (an error CQE). Names: kn_ and KN_ are the API, knx_ the
 * implementation.
 */
#ifndef KINET_DEVICE_ETH_H
#define KINET_DEVICE_ETH_H

#include <stddef.h>
#include <stdint.h>
#include <kinet/prm.h>
#include <kinet/device_types.h>
#include <kinet/device_port.h>
#include <kinet/device_sq.h>
#include <kinet/device_ops.h>

/* Bytes of an Ethernet header: the shortest frame a queue sends or takes. */
#define KN_ETH_HDR_LEN 14u

/* ---- send ------------------------------------------------------------------ */

/* The device descriptor of an Ethernet send queue (kinet_eth_txq_device()). */
typedef struct kn_eth_txq {
	kn_qp q;             /* SQ, send CQ, producer state (kinet/device_types.h) */
	uint32_t inline_hdr; /* frame bytes inlined in the eth segment: 0 or 18 */
	uint32_t max_frame;  /* largest frame the port sends, in bytes */
	uint32_t flags;      /* reserved, 0 */
	uint32_t rsvd;
} kn_eth_txq;

/* Flags of a frame to send. */
enum kn_eth_tx_flag {
	KN_ETH_TX_CSUM_L3 = 1u << 0, /* the NIC computes the IPv4 header checksum */
	KN_ETH_TX_CSUM_L4 = 1u << 1, /* the NIC computes the TCP or UDP checksum */
};
#define KNX_ETH_TX_FLAGS (KN_ETH_TX_CSUM_L3 | KN_ETH_TX_CSUM_L4)

/* One frame of a burst (kn_eth_send_burst). */
typedef struct kn_eth_frame {
	const void *data; /* the frame, from its Ethernet header on */
	uint32_t lkey;    /* the region holding it */
	uint32_t len;     /* bytes, KN_ETH_HDR_LEN .. max_frame */
	uint32_t flags;   /* enum kn_eth_tx_flag */
	uint32_t rsvd;
} kn_eth_frame;

/* 0, or -EINVAL when a frame of len bytes with these flags cannot be sent. */
KN_INLINE int knx_eth_check(const kn_eth_txq *txq, uint32_t len, uint32_t flags)
{
	if (len < KN_ETH_HDR_LEN || len < txq->inline_hdr || len > txq->max_frame ||
	    (flags & ~(uint32_t)KNX_ETH_TX_FLAGS))
		return -EINVAL;
	return 0;
}

/* Fills the send WQE of ticket t (checked): ctrl, eth segment with the
 * checksum flags and the first inline_hdr bytes of the frame, one data
 * segment for the rest (none when the frame is all inline, as rdma-core
 * posts it: a byte count of 0 would mean 2 GiB). */
KN_INLINE void knx_build_eth_send(const kn_eth_txq *txq, void *wqe, kn_ticket_t t,
				  const void *data, uint32_t lkey, uint32_t len, uint32_t flags)
{
	uint8_t *w = (uint8_t *)wqe;
	/* 0 or 18 (the queue's creation checked it); bounded here too, so that
	 * the WQE provably fits its one WQEBB (compilers check the stores) */
	uint32_t ihs = txq->inline_hdr > KN_ETH_L2_INLINE_HEADER_SIZE ? KN_ETH_L2_INLINE_HEADER_SIZE
								       : txq->inline_hdr;
	uint32_t doff = kn_eth_wqe_dseg_offset(ihs);
	struct kn_wqe_eth_seg *e = (struct kn_wqe_eth_seg *)(w + 16);
	e->rsvd0 = 0;
	e->cs_flags = (uint8_t)(((flags & KN_ETH_TX_CSUM_L3) ? KN_ETH_WQE_L3_CSUM : 0) |
				((flags & KN_ETH_TX_CSUM_L4) ? KN_ETH_WQE_L4_CSUM : 0));
	e->rsvd1 = 0;
	e->mss = 0;
	e->rsvd2 = 0;
	e->inline_hdr_sz = kn_htobe16((uint16_t)ihs);
	e->inline_hdr_start[0] = 0;
	e->inline_hdr_start[1] = 0;
	const uint8_t *src = (const uint8_t *)data;
	for (uint32_t i = 0; i < ihs; i++)
		w[30 + i] = src[i];
	uint32_t end = doff;
	if (len > ihs) {
		kn_set_data_seg((struct kn_wqe_data_seg *)(w + doff), len - ihs, lkey,
				(uint64_t)(uintptr_t)(src + ihs));
		end += 16;
	}
	knx_ctrl(&txq->q, wqe, t, KN_OPCODE_SEND, (uint8_t)(end / 16), 0);
}

/* Fills the WAIT WQE of ticket t: the queue holds the WQEs after it until
 * the port's real-time clock reaches when_ns. */
KN_INLINE void knx_build_eth_wait(const kn_eth_txq *txq, void *wqe, kn_ticket_t t,
				  uint64_t when_ns)
{
	uint8_t *w = (uint8_t *)wqe;
	struct kn_wqe_wait_seg *s = (struct kn_wqe_wait_seg *)(w + 16);
	s->operation = kn_htobe32(KN_WAIT_COND_CYCLIC_SMALLER);
	s->lkey = 0;
	s->va_high = 0;
	s->va_low = 0;
	s->value = kn_htobe64(kn_rt_from_ns(when_ns));
	s->mask = ~(uint64_t)0;
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)wqe, (uint16_t)t, KN_OPCODE_WAIT,
			KN_OPMOD_WAIT_TIME, txq->q.qpn, KN_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
}

/* Builders (low level: reserve with kn_sq_reserve(&txq->q, ...), publish with
 * kn_sq_submit): the send WQE of one frame; 0, or -EINVAL with nothing
 * written. */
KN_INLINE int kn_prep_eth_send(const kn_eth_txq *txq, void *wqe, kn_ticket_t t, const void *data,
			       uint32_t lkey, uint32_t len, uint32_t flags)
{
	if (knx_eth_check(txq, len, flags))
		return -EINVAL;
	knx_build_eth_send(txq, wqe, t, data, lkey, len, flags);
	return 0;
}

/* The WAIT WQE holding the WQEs after it until when_ns (port clock). */
KN_INLINE void kn_prep_eth_wait(const kn_eth_txq *txq, void *wqe, kn_ticket_t t, uint64_t when_ns)
{
	knx_build_eth_wait(txq, wqe, t, when_ns);
}

/* Sends one frame of len bytes at data (registered: lkey). *ticket (may be
 * NULL) gets its ticket: kn_eth_txq_wait() says when the buffer is free.
 * 0, -EINVAL (nothing posted), -ETIMEDOUT (the queue stayed full). */
KN_INLINE int kn_eth_send(const kn_eth_txq *txq, const void *data, uint32_t lkey, uint32_t len,
			  uint32_t flags, kn_ticket_t *ticket)
{
	const kn_qp *qp = &txq->q;
	kn_ticket_t t;
	if (knx_eth_check(txq, len, flags))
		return -EINVAL;
	int rc = kn_sq_reserve(qp, 1, &t);
	if (rc)
		return rc;
	KNX_WQE_DECL(w0);
	knx_build_eth_send(txq, KNX_WQE_AT(qp, t, w0), t, data, lkey, len, flags);
	KNX_WQE_PUT(qp, t, w0);
	knx_sq_submit_last(qp, t, 1, KNX_WQE_OWN(w0));
	if (ticket)
		*ticket = t;
	return 0;
}

/* Sends n frames (1 .. the queue depth) with one reservation and one
 * doorbell; *last gets the ticket of the last. Every frame is checked
 * first: -EINVAL and nothing posted if any is refused. */
KN_INLINE int kn_eth_send_burst(const kn_eth_txq *txq, const kn_eth_frame *f, uint32_t n,
				kn_ticket_t *last)
{
	const kn_qp *qp = &txq->q;
	kn_ticket_t t;
	if (n == 0 || n > qp->sq_wqe_cnt)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (knx_eth_check(txq, f[i].len, f[i].flags))
			return -EINVAL;
	int rc = kn_sq_reserve(qp, n, &t);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		KNX_WQE_DECL(w);
		knx_build_eth_send(txq, KNX_WQE_AT(qp, t + i, w), t + i, f[i].data, f[i].lkey,
				   f[i].len, f[i].flags);
		KNX_WQE_PUT(qp, t + i, w);
		if (i == n - 1)
			knx_sq_submit_last(qp, t, n, KNX_WQE_OWN(w));
	}
	if (last)
		*last = t + n - 1;
	return 0;
}

/* Sends one frame no earlier than when_ns on the port's real-time clock
 * (kinet_eth_port_time(); receive timestamps are on the same clock): a WAIT
 * WQE, then the send, under one doorbell. The queue is in order: frames
 * posted after it leave after it. *ticket gets the send's ticket. */
KN_INLINE int kn_eth_send_at(const kn_eth_txq *txq, uint64_t when_ns, const void *data,
			     uint32_t lkey, uint32_t len, uint32_t flags, kn_ticket_t *ticket)
{
	const kn_qp *qp = &txq->q;
	kn_ticket_t t;
	if (knx_eth_check(txq, len, flags) || qp->sq_wqe_cnt < 2)
		return -EINVAL;
	int rc = kn_sq_reserve(qp, 2, &t);
	if (rc)
		return rc;
	KNX_WQE_DECL(w0);
	KNX_WQE_DECL(w1);
	knx_build_eth_wait(txq, KNX_WQE_AT(qp, t, w0), t, when_ns);
	knx_build_eth_send(txq, KNX_WQE_AT(qp, t + 1, w1), t + 1, data, lkey, len, flags);
	KNX_WQE_PUT(qp, t, w0);
	KNX_WQE_PUT(qp, t + 1, w1);
	knx_sq_submit_last(qp, t, 2, KNX_WQE_OWN(w1));
	if (ticket)
		*ticket = t + 1;
	return 0;
}

/* Completion of sends: as kn_test / kn_wait / kn_quiet / kn_qp_error on the
 * queue's SQ (an error CQE puts the queue in error; the host resets it). */
KN_INLINE int kn_eth_txq_test(const kn_eth_txq *txq, kn_ticket_t ticket)
{
	return kn_test(&txq->q, ticket);
}
KN_INLINE int kn_eth_txq_wait(const kn_eth_txq *txq, kn_ticket_t ticket)
{
	return kn_wait(&txq->q, ticket);
}
KN_INLINE int kn_eth_txq_quiet(const kn_eth_txq *txq)
{
	return kn_quiet(&txq->q);
}
KN_INLINE uint32_t kn_eth_txq_error(const kn_eth_txq *txq, uint32_t *vendor)
{
	return kn_qp_error(&txq->q, vendor);
}

/* ---- receive ---------------------------------------------------------------- */

enum kn_eth_rxq_mode {
	KN_ETH_RXQ_CYCLIC = 0,   /* one packet per WQE */
	KN_ETH_RXQ_STRIDING = 1, /* packets in consecutive strides of each WQE */
};

/* Consumer state of a receive queue, written by device code only. */
typedef struct kn_eth_rxq_state {
	uint64_t ci;         /* next CQE (the next packet's ticket) */
	uint64_t released;   /* every CQE < released has been given back */
	uint64_t posted;     /* receive WQEs handed to the NIC (the RQ producer) */
	uint64_t wqe_done;   /* striding: WQEs whose strides are all consumed */
	uint64_t wqe_rel;    /* striding: WQEs given back */
	uint64_t errors;     /* error CQEs consumed (not returned as packets) */
	uint32_t strides;    /* striding: strides of the current WQE consumed */
	uint32_t last_syndrome;
	uint64_t nopkt;      /* every CQE in [nopkt, ci) was one without a packet
				(error, filler): the buffers they took go back with
				the packets before them */
	uint64_t pad;
} kn_eth_rxq_state;

/* The device descriptor of a receive queue (kinet_eth_rxq_device()). */
typedef struct kn_eth_rxq {
	uint8_t *wq;              /* receive WQEs, wqe_cnt x wqe_size bytes */
	volatile uint32_t *dbrec; /* [0]: receive producer (big-endian, low 16 bits) */
	uint8_t *cq;              /* receive CQ, cqe_cnt CQEs */
	volatile uint32_t *cq_dbrec;
	kn_eth_rxq_state *st;
	uint64_t *fin;            /* striding: the CQE index after the one that
				     completed WQE w, at fin[w % wqe_cnt] */
	uint8_t *buf;             /* buffers: WQE slot i at buf + i * wqe_bytes */
	uint64_t timeout_ns;      /* the host's default bound (kn_eth_recv takes its own) */
	uint32_t buf_lkey;
	uint32_t wqe_cnt;         /* power of two */
	uint32_t cqe_cnt;         /* power of two, >= wqe_cnt */
	uint32_t wqe_size;        /* 16 (cyclic) or 32 (striding) */
	uint32_t wqe_bytes;       /* buffer bytes per WQE */
	uint32_t stride_bytes;    /* striding: bytes per stride; cyclic: wqe_bytes */
	uint32_t strides;         /* strides per WQE (cyclic: 1) */
	uint32_t mode;            /* enum kn_eth_rxq_mode */
	uint32_t rqn;
	uint32_t flags;           /* reserved, 0 */
} kn_eth_rxq;

/* Flags of a received packet (kn_eth_pkt.flags). */
enum kn_eth_rx_flag {
	KN_ETH_RX_L2_OK = 1u << 0, /* the NIC parsed the Ethernet header */
	KN_ETH_RX_L3_OK = 1u << 1, /* IPv4 header checksum right (IPv6: always) */
	KN_ETH_RX_L4_OK = 1u << 2, /* TCP / UDP checksum right */
	KN_ETH_RX_IPV4 = 1u << 3,
	KN_ETH_RX_IPV6 = 1u << 4,
	KN_ETH_RX_UDP = 1u << 5,
	KN_ETH_RX_TCP = 1u << 6,
	KN_ETH_RX_VLAN = 1u << 7,
	KN_ETH_RX_CSUM_BAD = 1u << 8, /* an IPv4 header, or a TCP/UDP checksum, is wrong */
};

/* One received packet. */
typedef struct kn_eth_pkt {
	uint8_t *data;      /* the frame, in the queue's buffer */
	uint32_t len;       /* bytes */
	uint32_t flags;     /* enum kn_eth_rx_flag */
	uint64_t ts_ns;     /* arrival on the port's real-time clock, nanoseconds */
	uint32_t hash;      /* RSS (Toeplitz) hash of the flow, 0 for none */
	uint32_t rsvd;
	kn_ticket_t ticket; /* its CQE index: kn_eth_release(rxq, ticket + 1) gives
			       its buffer (and those of every packet before) back */
} kn_eth_pkt;

/* The flags of a receive CQE. */
KN_INLINE uint32_t knx_eth_rx_flags(const struct kn_eth_cqe *c)
{
	uint32_t ok = c->hds_ip_ext & 0x7u;
	uint32_t l3 = (c->l4_l3_hdr_type >> 2) & 0x3u, l4 = (c->l4_l3_hdr_type >> 4) & 0x7u;
	uint32_t f = ok;
	if (l3 == KN_CQE_L3_HDR_IPV4)
		f |= KN_ETH_RX_IPV4;
	else if (l3 == KN_CQE_L3_HDR_IPV6)
		f |= KN_ETH_RX_IPV6;
	if (l4 == KN_CQE_L4_HDR_UDP)
		f |= KN_ETH_RX_UDP;
	else if (l4 >= KN_CQE_L4_HDR_TCP_NO_ACK && l4 <= KN_CQE_L4_HDR_TCP_ACK_AND_DATA)
		f |= KN_ETH_RX_TCP;
	if (c->l4_l3_hdr_type & KN_CQE_HAS_VLAN)
		f |= KN_ETH_RX_VLAN;
	if (((f & KN_ETH_RX_IPV4) && !(f & KN_ETH_RX_L3_OK)) ||
	    ((f & (KN_ETH_RX_UDP | KN_ETH_RX_TCP)) && !(f & KN_ETH_RX_L4_OK)))
		f |= KN_ETH_RX_CSUM_BAD;
	return f;
}

/* Consumes the CQE at st->ci (ready and acquired): 1 and *p for a packet, 0
 * for a CQE without one (filler, error: counted in st->errors). */
KN_INLINE int knx_eth_rx_take(const kn_eth_rxq *rxq, const struct kn_eth_cqe *c, uint64_t ci,
			      kn_eth_pkt *p)
{
	kn_eth_rxq_state *st = rxq->st;
	uint8_t op = c->op_own >> 4;
	if (op == KN_CQE_RESP_ERR || op == KN_CQE_REQ_ERR) {
		st->errors++;
		st->last_syndrome = ((const struct kn_err_cqe *)c)->syndrome;
		if (rxq->mode == KN_ETH_RXQ_STRIDING) {
			/* the NIC dropped the whole WQE in error */
			rxq->fin[st->wqe_done & (rxq->wqe_cnt - 1)] = ci + 1;
			st->wqe_done++;
			st->strides = 0;
		}
		return 0;
	}
	uint32_t bc = kn_be32toh(c->byte_cnt);
	uint8_t *data;
	uint32_t len;
	if (rxq->mode == KN_ETH_RXQ_STRIDING) {
		uint32_t used = (bc >> KN_MPRQ_STRIDES_SHIFT) & KN_MPRQ_STRIDES_MASK;
		uint32_t first = kn_be16toh(c->wqe_counter);
		st->strides += used;
		if (st->strides >= rxq->strides) {
			rxq->fin[st->wqe_done & (rxq->wqe_cnt - 1)] = ci + 1;
			st->wqe_done++;
			st->strides = 0;
		}
		len = bc & KN_MPRQ_LEN_MASK;
		if ((bc & KN_MPRQ_FILLER) || used == 0)
			return 0;
		if (first >= rxq->strides ||
		    (uint64_t)first * rxq->stride_bytes + len > rxq->wqe_bytes) {
			st->errors++; /* a CQE pointing outside its WQE's buffer */
			return 0;
		}
		data = rxq->buf +
		       (size_t)(kn_be16toh(c->wqe_id) & (rxq->wqe_cnt - 1)) * rxq->wqe_bytes +
		       (size_t)first * rxq->stride_bytes;
	} else {
		len = bc;
		if (len > rxq->wqe_bytes) {
			st->errors++;
			return 0;
		}
		data = rxq->buf + (size_t)(kn_be16toh(c->wqe_counter) & (rxq->wqe_cnt - 1)) *
					  rxq->wqe_bytes;
	}
	p->data = data;
	p->len = len;
	p->flags = knx_eth_rx_flags(c);
	p->ts_ns = kn_rt_to_ns(kn_be64toh(c->timestamp));
	p->hash = kn_be32toh(c->rss_hash);
	p->rsvd = 0;
	p->ticket = ci;
	st->nopkt = ci + 1;
	return 1;
}

/* Gives the buffers of every CQE below upto back to the NIC (upto <= ci). A
 * release that reaches the run of CQEs without a packet at the end of what
 * was received (errors, fillers) covers the run too: nothing in it is held
 * by the consumer, so the documented pattern, kn_eth_release(rxq,
 * pk[n - 1].ticket + 1), also returns the WQEs of the error CQEs after the
 * last packet. */
KN_INLINE void knx_eth_give_back(const kn_eth_rxq *rxq, uint64_t upto)
{
	kn_eth_rxq_state *st = rxq->st;
	if (upto >= st->nopkt)
		upto = st->ci;
	if (upto <= st->released)
		return;
	st->released = upto;
	uint64_t posted;
	if (rxq->mode == KN_ETH_RXQ_STRIDING) {
		while (st->wqe_rel < st->wqe_done &&
		       rxq->fin[st->wqe_rel & (rxq->wqe_cnt - 1)] <= upto)
			st->wqe_rel++;
		posted = rxq->wqe_cnt + st->wqe_rel;
	} else {
		posted = rxq->wqe_cnt + upto; /* one WQE per CQE, in order */
	}
	if (posted != st->posted) {
		st->posted = posted;
		KN_FENCE_SYS(); /* the reads of the buffers before they go back */
		*rxq->dbrec = kn_htobe32((uint32_t)(posted & 0xffff));
		KN_FENCE_SYS();
	}
}

/* Receives up to max packets into pkts[], waiting until max have arrived or
 * timeout_ns has passed since the call (0: only those already there); *n
 * gets how many. Filler and error CQEs are consumed on the way (errors
 * counted: kn_eth_rxq_errors()); their WQEs go back with the release of the
 * packet before them, or at once when no packet is held (kn_eth_release).
 * Packets stay valid until released. 0, or -EINVAL. */
KN_INLINE int kn_eth_recv(const kn_eth_rxq *rxq, kn_eth_pkt *pkts, uint32_t max,
			  uint64_t timeout_ns, uint32_t *n)
{
	kn_eth_rxq_state *st = rxq->st;
	uint32_t got = 0;
	uint64_t ci = st->ci, t0 = 0;
	if (!n || (max && !pkts) || !rxq->buf)
		return -EINVAL;
	while (got < max) {
		const struct kn_eth_cqe *c =
			(const struct kn_eth_cqe *)(rxq->cq + (size_t)(ci & (rxq->cqe_cnt - 1)) *
								      KN_CQE_SIZE);
		if (!kn_cqe_ready((const struct kn_cqe64 *)c, ci, rxq->cqe_cnt)) {
			if (!timeout_ns)
				break;
			uint64_t now = kn_now_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 >= timeout_ns)
				break;
			KN_PAUSE();
			continue;
		}
		KN_FENCE_ACQ(); /* the CQE, then the packet it names */
		got += (uint32_t)knx_eth_rx_take(rxq, c, ci, &pkts[got]);
		ci++;
	}
	if (ci != st->ci) {
		st->ci = ci;
		*rxq->cq_dbrec = kn_htobe32((uint32_t)(ci & 0xffffff));
		/* CQEs without a packet while the consumer holds nothing: their
		 * WQEs go back at once (no release would ever name them) */
		if (st->released >= st->nopkt)
			knx_eth_give_back(rxq, ci);
	}
	*n = got;
	return 0;
}

/* Receives what is there, up to max packets, waiting at most timeout_ns
 * for the first (0: not at all): the latency form of kn_eth_recv (which
 * waits for max packets). 0, or -EINVAL. */
KN_INLINE int kn_eth_recv_any(const kn_eth_rxq *rxq, kn_eth_pkt *pkts, uint32_t max,
			      uint64_t timeout_ns, uint32_t *n)
{
	uint64_t t0 = 0;
	for (;;) {
		int rc = kn_eth_recv(rxq, pkts, max, 0, n);
		if (rc || *n || !timeout_ns)
			return rc;
		uint64_t now = kn_now_ns();
		if (!t0)
			t0 = now;
		else if (now - t0 >= timeout_ns)
			return 0;
		KN_PAUSE();
	}
}

/* Gives the buffers of every packet with a ticket below upto back to the NIC
 * (in order; a striding WQE goes back once every packet in it is released),
 * with those of the CQEs without a packet (errors, fillers) received up to
 * the next packet: after kn_eth_recv returned n > 0 packets,
 * kn_eth_release(rxq, pk[n - 1].ticket + 1) gives back everything it
 * consumed. CQEs without a packet consumed while every packet before them
 * is released go back inside kn_eth_recv (a call that returned no packet
 * needs no release). 0, or -EINVAL for a ticket not received yet. */
KN_INLINE int kn_eth_release(const kn_eth_rxq *rxq, kn_ticket_t upto)
{
	if (upto > rxq->st->ci)
		return -EINVAL;
	knx_eth_give_back(rxq, upto);
	return 0;
}

/* Error CQEs consumed so far (and the last one's syndrome, when not NULL). */
KN_INLINE uint64_t kn_eth_rxq_errors(const kn_eth_rxq *rxq, uint32_t *syndrome)
{
	if (syndrome)
		*syndrome = rxq->st->last_syndrome;
	return rxq->st->errors;
}

/* ---- headers: checksums the device computes itself ------------------------ */

/* The 16-bit ones' complement sum of len bytes (network order), folded, not
 * inverted; start: a partial sum to add to. */
KN_INLINE uint32_t kn_csum_add(uint32_t start, const void *p, uint32_t len)
{
	const uint8_t *b = (const uint8_t *)p;
	uint64_t s = start;
	uint32_t i = 0;
	for (; i + 1 < len; i += 2)
		s += (uint32_t)b[i] << 8 | b[i + 1];
	if (i < len)
		s += (uint32_t)b[i] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint32_t)s;
}

/* The Internet checksum (RFC 1071) of len bytes: what goes into the header
 * field, network order as a host integer (store it with kn_store_be16). */
KN_INLINE uint16_t kn_csum(const void *p, uint32_t len)
{
	return (uint16_t)~kn_csum_add(0, p, len);
}

#endif /* KINET_DEVICE_ETH_H */

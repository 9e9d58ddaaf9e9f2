/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_rx.c - the software NIC's Ethernet receive path: steering (for the
 * drivers that do not steer), the NIC's parse of a frame (L2/L3/L4 types,
 * checksum status, the RSS hash), placement into the next receive buffer,
 * and the receive CQE.
 *
 * What the NIC answers, never writing outside a receive WQE's buffer:
 *   - shorter than an Ethernet header: dropped (runt, port counter);
 *   - no flow takes it: left to the kernel (AF_XDP), dropped (loopback),
 *     counted as unmatched;
 *   - longer than the port's MTU allows: dropped (oversize);
 *   - no receive WQE posted, no room in the CQ: dropped, counted;
 *   - cyclic queue, larger than the WQE's buffer: an error CQE (local
 *     length error) consuming the WQE; striding queue, larger than a whole
 *     WQE: dropped (a frame that does not fit the strides left in a WQE
 *     gets a filler CQE for them and goes to the next WQE, as on a ConnectX);
 *   - a receive WQE whose buffer is outside its region (or that is
 *     malformed): an error CQE (local protection error) consuming it;
 *   - bad IPv4 header or TCP/UDP checksums, EtherTypes the NIC does not
 *     parse: placed, with the CQE saying so (L3/L4 OK bits, header types);
 *     the first bad checksum of each kind is logged once per port, with
 *     the usual cause of bad TCP/UDP checksums (a sender that left them to
 *     offload: a veth peer) and its fix.
 */
#include <string.h>
#include "nic/soft/eth_int.h"

uint32_t soft_eth_sum(uint32_t sum, const uint8_t *p, uint32_t n)
{
	uint64_t s = sum;
	uint32_t i = 0;
	for (; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (i < n)
		s += (uint32_t)p[i] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint32_t)s;
}

uint32_t soft_eth_toeplitz(const uint8_t *key, const uint8_t *in, uint32_t n)
{
	/* the 32 key bits starting at each input bit, shifted along the key */
	uint32_t h = 0;
	uint32_t win =
		(uint32_t)key[0] << 24 | (uint32_t)key[1] << 16 | (uint32_t)key[2] << 8 | key[3];
	for (uint32_t i = 0; i < n; i++) {
		uint8_t next = i + 4 < 40 ? key[i + 4] : 0;
		for (int b = 7; b >= 0; b--) {
			if (in[i] & (1u << b))
				h ^= win;
			win = win << 1 | ((next >> b) & 1u);
		}
	}
	return h;
}

/* The RSS key every ConnectX and kinet use by default (the one of the
 * Microsoft RSS verification suite). */
static const uint8_t rss_key[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

int soft_eth_key(const uint8_t *f, uint32_t len, struct eth_key *k)
{
	memset(k, 0, sizeof(*k));
	if (len < KN_ETH_HDR_LEN)
		return -1;
	memcpy(k->dst_mac, f, 6);
	uint32_t l3 = 14;
	uint16_t et = (uint16_t)(f[12] << 8 | f[13]);
	if (et == 0x8100 && len >= 18) {
		et = (uint16_t)(f[16] << 8 | f[17]);
		l3 = 18;
	}
	k->ethertype = (uint16_t)(f[l3 - 2] | f[l3 - 1] << 8); /* network order */
	uint32_t l4 = 0;
	if (et == 0x0800 && len >= l3 + 20 && (f[l3] >> 4) == 4) {
		uint32_t ihl = (f[l3] & 0xfu) * 4u;
		k->l3 = 4;
		k->ip_proto = f[l3 + 9];
		memcpy(k->ip_dst, f + l3 + 16, 4);
		if (ihl >= 20 && !(f[l3 + 6] & 0x3f) && !f[l3 + 7])
			l4 = l3 + ihl;
	} else if (et == 0x86dd && len >= l3 + 40 && (f[l3] >> 4) == 6) {
		k->l3 = 6;
		k->ip_proto = f[l3 + 6];
		memcpy(k->ip_dst, f + l3 + 24, 16);
		l4 = l3 + 40;
	}
	if (l4 && (k->ip_proto == 6 || k->ip_proto == 17) && len >= l4 + 4) {
		k->l4 = 1;
		k->l4_dst_port = (uint16_t)(f[l4 + 2] | f[l4 + 3] << 8);
	}
	return 0;
}

/* What the NIC reports of a frame in its CQE. */
struct rx_info {
	uint8_t ok;    /* KN_CQE_L{2,3,4}_OK */
	uint8_t l4l3;  /* l4_l3_hdr_type */
	uint8_t htype; /* KN_RSS_HTYPE_* */
	uint16_t vlan;
	uint32_t hash;
	bool partial;  /* the L4 checksum field holds just the pseudo-header sum:
			  what a sender that leaves the checksum to offload writes */
};

static void rx_parse(const uint8_t *f, uint32_t len, struct rx_info *ri)
{
	memset(ri, 0, sizeof(*ri));
	ri->ok = KN_CQE_L2_OK;
	uint32_t l3 = 14;
	uint16_t et = (uint16_t)(f[12] << 8 | f[13]);
	if (et == 0x8100 && len >= 18) {
		ri->l4l3 |= KN_CQE_HAS_VLAN;
		ri->vlan = (uint16_t)(f[14] << 8 | f[15]);
		et = (uint16_t)(f[16] << 8 | f[17]);
		l3 = 18;
	}
	uint8_t hin[36];
	uint32_t hn = 0, l4 = 0, l4len = 0, psum = 0;
	uint8_t proto = 0;
	if (et == 0x0800 && len >= l3 + 20 && (f[l3] >> 4) == 4) {
		uint32_t ihl = (f[l3] & 0xfu) * 4u, tot = (uint32_t)(f[l3 + 2] << 8 | f[l3 + 3]);
		if (ihl < 20 || l3 + ihl > len || tot < ihl || l3 + tot > len)
			return; /* an IPv4 header that lies: not parsed */
		ri->l4l3 |= KN_CQE_L3_HDR_IPV4 << 2;
		if (soft_eth_sum(0, f + l3, ihl) == 0xffff)
			ri->ok |= KN_CQE_L3_OK;
		memcpy(hin, f + l3 + 12, 8); /* source, destination */
		hn = 8;
		ri->htype = KN_RSS_HTYPE_SRC_IPV4 | KN_RSS_HTYPE_DST_IPV4;
		if ((f[l3 + 6] & 0x3f) || f[l3 + 7])
			goto hash; /* a fragment: no L4 */
		proto = f[l3 + 9];
		l4 = l3 + ihl;
		l4len = tot - ihl;
		psum = soft_eth_sum(0, f + l3 + 12, 8);
	} else if (et == 0x86dd && len >= l3 + 40 && (f[l3] >> 4) == 6) {
		uint32_t plen = (uint32_t)(f[l3 + 4] << 8 | f[l3 + 5]);
		if (l3 + 40 + plen > len)
			return;
		ri->l4l3 |= KN_CQE_L3_HDR_IPV6 << 2;
		ri->ok |= KN_CQE_L3_OK; /* IPv6 has no header checksum */
		memcpy(hin, f + l3 + 8, 32);
		hn = 32;
		ri->htype = KN_RSS_HTYPE_SRC_IPV6 | KN_RSS_HTYPE_DST_IPV6;
		proto = f[l3 + 6];
		l4 = l3 + 40;
		l4len = plen;
		psum = soft_eth_sum(0, f + l3 + 8, 32);
	} else {
		return; /* an EtherType the NIC does not parse */
	}
	if ((proto == 17 && l4len >= 8) || (proto == 6 && l4len >= 20)) {
		uint8_t pl[4] = {0, proto, (uint8_t)(l4len >> 8), (uint8_t)l4len};
		uint32_t ph = soft_eth_sum(psum, pl, 4);
		uint32_t s = soft_eth_sum(ph, f + l4, l4len);
		uint32_t at = l4 + (proto == 17 ? 6u : 16u); /* the checksum field */
		ri->partial = (uint32_t)(f[at] << 8 | f[at + 1]) == ph;
		bool v4 = (ri->l4l3 >> 2 & 3) == KN_CQE_L3_HDR_IPV4;
		if (proto == 17) {
			ri->l4l3 |= KN_CQE_L4_HDR_UDP << 4;
			bool none = f[l4 + 6] == 0 && f[l4 + 7] == 0;
			if ((none && v4) || (!none && s == 0xffff))
				ri->ok |= KN_CQE_L4_OK;
			ri->htype |= KN_RSS_HTYPE_SRC_UDP | KN_RSS_HTYPE_DST_UDP;
		} else {
			uint8_t flags = f[l4 + 13];
			uint32_t doff = (f[l4 + 12] >> 4) * 4u;
			uint32_t t = !(flags & 0x10)                ? KN_CQE_L4_HDR_TCP_NO_ACK
				     : (doff >= 20 && l4len > doff) ? KN_CQE_L4_HDR_TCP_ACK_AND_DATA
								    : KN_CQE_L4_HDR_TCP_ACK_NO_DATA;
			ri->l4l3 |= (uint8_t)(t << 4);
			if (s == 0xffff)
				ri->ok |= KN_CQE_L4_OK;
			ri->htype |= KN_RSS_HTYPE_SRC_TCP | KN_RSS_HTYPE_DST_TCP;
		}
		memcpy(hin + hn, f + l4, 4); /* source port, destination port */
		hn += 4;
	}
hash:
	ri->hash = soft_eth_toeplitz(rss_key, hin, hn);
}

/* ---- CQEs --------------------------------------------------------------------------- */

static void rx_err_cqe(struct soft_eth_port *p, struct soft_eth_rxq *q, uint32_t synd,
		       uint16_t wqe)
{
	struct kn_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	struct kn_err_cqe *e = (struct kn_err_cqe *)&cqe;
	e->syndrome = (uint8_t)synd;
	e->s_wqe_opcode_qpn = kn_htobe32(q->r.rqn);
	e->wqe_counter = kn_htobe16(wqe);
	e->op_own = KN_CQE_RESP_ERR << 4;
	seth_cq_write(p, q->r.cq, &cqe);
	kinet_count_syndrome(q->r.port->ctx, synd);
}

static void rx_cqe(struct soft_eth_port *p, struct soft_eth_rxq *q, const struct rx_info *ri,
		   uint32_t byte_cnt, uint16_t wqe_id, uint16_t counter, uint64_t ts)
{
	struct kn_eth_cqe c;
	memset(&c, 0, sizeof(c));
	c.wqe_id = kn_htobe16(wqe_id);
	if (ri) {
		c.rss_hash = kn_htobe32(ri->hash);
		c.rss_hash_type = ri->htype;
		c.hds_ip_ext = ri->ok;
		c.l4_l3_hdr_type = ri->l4l3;
		c.vlan_info = kn_htobe16(ri->vlan);
	}
	c.flags_rqpn = kn_htobe32(q->r.rqn & 0xffffff);
	c.byte_cnt = kn_htobe32(byte_cnt);
	c.timestamp = kn_htobe64(kn_rt_from_ns(ts));
	c.sop_drop_qpn = kn_htobe32(q->r.rqn & 0xffffff);
	c.wqe_counter = kn_htobe16(counter);
	c.op_own = KN_CQE_RESP_SEND << 4;
	seth_cq_write(p, q->r.cq, &c);
}

/* ---- placement -------------------------------------------------------------------- */

/* Receive WQEs posted beyond the consumer index. */
static uint32_t rq_avail(struct soft_eth_rxq *q)
{
	uint32_t pi = kn_be32toh(__atomic_load_n(&q->r.dbrec[0], __ATOMIC_ACQUIRE)) & 0xffff;
	uint32_t n = (uint16_t)(pi - (uint16_t)q->ci);
	return n <= q->r.wqe_cnt ? n : 0; /* a producer past the queue is not sane */
}

static void count_rx(struct soft_eth_rxq *q, const struct rx_info *ri, uint32_t len)
{
	ECTR(&q->ctr, packets, 1);
	ECTR(&q->ctr, bytes, len);
	uint32_t l3 = ri->l4l3 >> 2 & 3, l4 = ri->l4l3 >> 4 & 7;
	if (l3 == KN_CQE_L3_HDR_NONE)
		ECTR(&q->ctr, no_l3, 1);
	if ((l3 == KN_CQE_L3_HDR_IPV4 && !(ri->ok & KN_CQE_L3_OK)) ||
	    (l4 != KN_CQE_L4_HDR_NONE && !(ri->ok & KN_CQE_L4_OK)))
		ECTR(&q->ctr, csum_bad, 1);
}

/* The first bad checksum of each kind on a port: said once, with what to do
 * about the usual cause. */
static void csum_say(struct soft_eth_port *p, const struct rx_info *ri)
{
	uint32_t l3 = ri->l4l3 >> 2 & 3, l4 = ri->l4l3 >> 4 & 7;
	const char *ifn = p->p.info.ifname;
	if (l3 == KN_CQE_L3_HDR_IPV4 && !(ri->ok & KN_CQE_L3_OK) && !p->said_l3) {
		p->said_l3 = true;
		KLOG_WARN("eth port %s: a frame with a wrong IPv4 header checksum arrived "
			  "(delivered flagged KN_ETH_RX_CSUM_BAD, counted in csum_bad; said once)",
			  ifn);
	}
	if (l4 != KN_CQE_L4_HDR_NONE && !(ri->ok & KN_CQE_L4_OK) && !p->said_l4) {
		p->said_l4 = true;
		const char *proto = l4 == KN_CQE_L4_HDR_UDP ? "UDP" : "TCP";
		if (ri->partial)
			KLOG_WARN("eth port %s: a frame with an incomplete %s checksum arrived (the "
				  "field holds just the pseudo-header sum: the sender left the "
				  "checksum to offload, as a veth does with tx-checksumming on, its "
				  "default, and kinet takes the frame before the kernel would "
				  "complete it). Delivered flagged KN_ETH_RX_CSUM_BAD, counted in "
				  "csum_bad; said once. Fix: on the sending peer, "
				  "ethtool -K <its interface> tx off",
				  ifn, proto);
		else
			KLOG_WARN("eth port %s: a frame with a wrong %s checksum arrived "
				  "(delivered flagged KN_ETH_RX_CSUM_BAD, counted in csum_bad; said "
				  "once). If the sender leaves checksums to offload (a veth peer with "
				  "tx-checksumming on, its default): ethtool -K <its interface> tx off "
				  "on the sending peer",
				  ifn, proto);
	}
}

static void drop(struct soft_eth_rxq *q, int why)
{
	ECTR(&q->ctr, drops[why], 1);
}

static void place(struct soft_eth_port *p, struct soft_eth_rxq *q, const uint8_t *f, uint32_t len)
{
	kinet_eth_rxq *r = &q->r;
	bool striding = r->attr.mode == KINET_ETH_RXQ_STRIDING;
	uint32_t avail = rq_avail(q);
	if (!avail)
		return drop(q, KINET_ETH_DROP_NO_WQE);
	uint32_t sb = r->stride_bytes, ns = r->strides;
	uint32_t need = striding ? (len + sb - 1) / sb : 1;
	bool filler = striding && need <= ns && q->strides_used + need > ns;
	if (soft_cq_space(r->cq) < (filler ? 2u : 1u))
		return drop(q, KINET_ETH_DROP_CQ_FULL);
	struct rx_info ri;
	rx_parse(f, len, &ri);
	/* the arrival time: the clock read once per pass of the port thread */
	if (!p->rx_ts)
		p->rx_ts = soft_eth_now();
	uint64_t ts = p->rx_ts;
	const uint8_t *w = r->wq + (size_t)(q->ci & (r->wqe_cnt - 1)) * r->wqe_size;
	const uint8_t *dseg = striding ? w + 16 : w;
	uint32_t bc = kn_load_be32(dseg), lkey = kn_load_be32(dseg + 4);
	uint64_t addr = kn_load_be64(dseg + 8);
	struct kinet_mr_ref ref;
	if (!striding) {
		if (bc & KN_INLINE_SEG) {
			rx_err_cqe(p, q, KN_SYND_LOCAL_QP_OP_ERR, (uint16_t)q->ci++);
			return drop(q, KINET_ETH_DROP_PROTECTION);
		}
		/* a byte count of 0 means 2^31 bytes (the PRM's data segment); the
		 * terminator (KN_INVALID_LKEY) ends an empty scatter list */
		uint64_t cap = lkey == KN_INVALID_LKEY ? 0 : bc ? bc : 1ull << 31;
		if (len > cap) {
			rx_err_cqe(p, q, KN_SYND_LOCAL_LENGTH_ERR, (uint16_t)q->ci++);
			return drop(q, KINET_ETH_DROP_TOO_LONG);
		}
		if (soft_mr_check(p->p.ctx, p->p.pd, lkey, addr, len, KINET_ACCESS_LOCAL_WRITE,
				  &ref)) {
			rx_err_cqe(p, q, KN_SYND_LOCAL_PROT_ERR, (uint16_t)q->ci++);
			return drop(q, KINET_ETH_DROP_PROTECTION);
		}
		if (kinet_mem_copy(ref.ptr, ref.kind, f, KINET_MEM_HOST, len)) {
			rx_err_cqe(p, q, KN_SYND_LOCAL_PROT_ERR, (uint16_t)q->ci++);
			return drop(q, KINET_ETH_DROP_PROTECTION);
		}
		rx_cqe(p, q, &ri, len, 0, (uint16_t)q->ci, ts);
		q->ci++;
		count_rx(q, &ri, len);
		return csum_say(p, &ri);
	}
	if (need > ns)
		return drop(q, KINET_ETH_DROP_TOO_LONG);
	if (filler) {
		/* the strides left in this WQE cannot hold it: a filler for them */
		rx_cqe(p, q, NULL, KN_MPRQ_FILLER | (ns - q->strides_used) << KN_MPRQ_STRIDES_SHIFT,
		       (uint16_t)q->ci, (uint16_t)q->strides_used, ts);
		q->ci++;
		q->strides_used = 0;
		if (!rq_avail(q))
			return drop(q, KINET_ETH_DROP_NO_WQE);
		w = r->wq + (size_t)(q->ci & (r->wqe_cnt - 1)) * r->wqe_size;
		bc = kn_load_be32(w + 16);
		lkey = kn_load_be32(w + 20);
		addr = kn_load_be64(w + 24);
	}
	uint64_t off = (uint64_t)q->strides_used * sb;
	if ((bc & KN_INLINE_SEG) || (bc ? bc : 1ull << 31) < (uint64_t)ns * sb ||
	    soft_mr_check(p->p.ctx, p->p.pd, lkey, addr + off, len, KINET_ACCESS_LOCAL_WRITE,
			  &ref) ||
	    kinet_mem_copy(ref.ptr, ref.kind, f, KINET_MEM_HOST, len)) {
		/* the whole WQE is lost, as a ConnectX drops an MPWQE in error */
		rx_err_cqe(p, q, KN_SYND_LOCAL_PROT_ERR, (uint16_t)q->ci++);
		q->strides_used = 0;
		return drop(q, KINET_ETH_DROP_PROTECTION);
	}
	rx_cqe(p, q, &ri, need << KN_MPRQ_STRIDES_SHIFT | len, (uint16_t)q->ci,
	       (uint16_t)q->strides_used, ts);
	q->strides_used += need;
	if (q->strides_used == ns) {
		q->ci++;
		q->strides_used = 0;
	}
	count_rx(q, &ri, len);
	csum_say(p, &ri);
}

void soft_eth_rx(struct soft_eth_port *p, int slot, const uint8_t *f, uint32_t len)
{
	if (len < KN_ETH_HDR_LEN) {
		ECTR(&p->ctr, drops[KINET_ETH_DROP_RUNT], 1);
		return;
	}
	if (slot < 0) {
		struct eth_key k;
		soft_eth_key(f, len, &k);
		for (int i = 0; i < p->nrules; i++)
			if (eth_rule_match(&p->rules[i], &k)) {
				slot = (int)p->rules[i].slot;
				break;
			}
	}
	struct soft_eth_rxq *q = slot >= 0 && slot < ETH_RULE_MAX ? p->slots[slot] : NULL;
	if (!q) {
		ECTR(&p->ctr, unmatched, 1);
		return;
	}
	if (len > p->p.max_frame)
		return drop(q, KINET_ETH_DROP_OVERSIZE);
	place(p, q, f, len);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_rule.h - the software NIC's steering rules, in one form for the port
 * thread's own classifier (loopback, AF_PACKET) and for kinet's XDP program
 * (src/nic/soft/xdp/steer.bpf.c, compiled with clang -target bpf), which
 * reads them from an array map. Plain fixed-size types only; both compile
 * it (the XDP program with __u32 and friends from linux/types.h).
 *
 * A rule matches a frame when every field it names matches; rules are tried
 * in table order (the core's order: priority, then age, the default flow
 * last) and the first that matches sends the frame to its slot's queue.
 */
#ifndef KINET_SOFT_ETH_RULE_H
#define KINET_SOFT_ETH_RULE_H

#define ETH_RULE_MAX 64  /* rules and receive-queue slots per port */

/* eth_rule.fields: the kinet_eth_match_field bits (kinet/eth.h) */
#define ETH_RULE_DST_MAC (1u << 0)
#define ETH_RULE_ETHERTYPE (1u << 1)
#define ETH_RULE_IPV4_DST (1u << 2)
#define ETH_RULE_IPV6_DST (1u << 3)
#define ETH_RULE_IP_PROTO (1u << 4)
#define ETH_RULE_L4_DST_PORT (1u << 5)

struct eth_rule {
	__u32 fields;
	__u32 slot;        /* receive-queue slot (the XDP program: its socket) */
	__u8 dst_mac[6];
	__u16 ethertype;   /* network order */
	__u8 ip_dst[16];   /* IPv4: the first 4 bytes */
	__u8 ip_proto;
	__u8 rsvd;
	__u16 l4_dst_port; /* network order */
	__u32 rsvd2;
};

/* What the rules look at in a frame, parsed by the caller (bounds checked
 * there): l3 4 or 6 (0: neither), l4 set when the ports were read. */
struct eth_key {
	__u8 dst_mac[6];
	__u16 ethertype; /* network order, after one VLAN tag */
	__u8 ip_dst[16];
	__u8 l3;
	__u8 ip_proto;
	__u8 l4;
	__u8 rsvd;
	__u16 l4_dst_port; /* network order */
	__u16 rsvd2;
};

static inline __attribute__((always_inline)) int eth_rule_match(const struct eth_rule *r,
								 const struct eth_key *k)
{
	__u32 f = r->fields;
	if (f & ETH_RULE_DST_MAC) {
		for (int i = 0; i < 6; i++)
			if (r->dst_mac[i] != k->dst_mac[i])
				return 0;
	}
	if ((f & ETH_RULE_ETHERTYPE) && r->ethertype != k->ethertype)
		return 0;
	if (f & ETH_RULE_IPV4_DST) {
		if (k->l3 != 4)
			return 0;
		for (int i = 0; i < 4; i++)
			if (r->ip_dst[i] != k->ip_dst[i])
				return 0;
	}
	if (f & ETH_RULE_IPV6_DST) {
		if (k->l3 != 6)
			return 0;
		for (int i = 0; i < 16; i++)
			if (r->ip_dst[i] != k->ip_dst[i])
				return 0;
	}
	if ((f & ETH_RULE_IP_PROTO) && (!k->l3 || r->ip_proto != k->ip_proto))
		return 0;
	if ((f & ETH_RULE_L4_DST_PORT) && (!k->l4 || r->l4_dst_port != k->l4_dst_port))
		return 0;
	return 1;
}

#endif

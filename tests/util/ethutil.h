/* SPDX-License-Identifier: BSD-3-Clause */
/* Frames for the Ethernet tests: headers built by hand, checksums right or
 * deliberately wrong, and the NIC's hash computed independently. */
#ifndef KINET_ETHUTIL_H
#define KINET_ETHUTIL_H
#include <stddef.h>
#include <stdint.h>

struct te_flow {
	uint8_t smac[6], dmac[6];
	uint8_t sip[16], dip[16]; /* IPv4: the first 4 bytes */
	uint16_t sport, dport;    /* host order */
	int v6;                   /* IPv6 instead of IPv4 */
	uint8_t proto;            /* 17 UDP, 6 TCP */
};

/* Writes Ethernet + IP + UDP/TCP headers and plen payload bytes (random,
 * from seed) at f; checksums right unless bad_l3 / bad_l4 (then off by one).
 * Returns the frame length. */
uint32_t te_frame(uint8_t *f, const struct te_flow *fl, uint32_t plen, uint64_t seed,
		  int bad_l3, int bad_l4);
/* A frame of EtherType et with plen random bytes after the header. */
uint32_t te_raw_frame(uint8_t *f, const uint8_t dmac[6], uint16_t et, uint32_t plen,
		      uint64_t seed);
/* Internet checksum of n bytes (RFC 1071), complemented. */
uint16_t te_csum(const uint8_t *p, uint32_t n, uint32_t start);
/* The Toeplitz hash with the standard RSS key of the frame's flow (as the
 * NIC reports it), computed bit by bit from the definition. */
uint32_t te_rss_hash(const struct te_flow *fl);
/* A flow: 10.9.x.y addresses and the given ports. */
void te_flow_v4(struct te_flow *fl, uint8_t a, uint8_t b, uint16_t sport, uint16_t dport);
#endif

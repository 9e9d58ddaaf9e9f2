/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host.h - the host's Ethernet interfaces as kinet-verbs' RoCE ports.
 *
 * One port per interface that is up and has an Ethernet address (the
 * loopback interface when there is none). Its GID table is built as RoCE
 * builds it from the interface: the default GID (fe80::/64 with the EUI-64
 * of the MAC), then every IPv4 address as an IPv4-mapped GID
 * (::ffff:a.b.c.d) and every other IPv6 address, each one twice, RoCE v1 at
 * the even index and RoCE v2 at the odd one.
 */
#ifndef KINET_VERBS_HOST_H
#define KINET_VERBS_HOST_H

#include <net/if.h>
#include <stdint.h>

#define KV_MAX_ADDRS 16 /* addresses per port: GID table entries are twice that */

struct kinet_verbs_port {
	char ifname[IF_NAMESIZE];
	uint8_t mac[6];
	int mtu;    /* the interface's MTU (bytes) */
	int naddr;  /* addresses (the default GID first) */
	uint8_t addr[KV_MAX_ADDRS][16];
};

/* Fills up to max ports in interface index order; returns how many (at
 * least 1: the loopback interface when no other is up), or -errno. */
int kinet_verbs_host_ports(struct kinet_verbs_port *ports, int max);

/* The EUI-64 of a MAC (the interface identifier of its default GID, and
 * the port's node GUID), in network order. */
void kinet_verbs_eui64(const uint8_t mac[6], uint8_t out[8]);

#endif

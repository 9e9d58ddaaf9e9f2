/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-3-Clause) */
/*
 * steer.bpf.c - kinet's XDP program: the software NIC's flow steering. Each
 * frame is parsed (Ethernet, one VLAN tag, IPv4 or IPv6, the TCP/UDP
 * destination port) into a key, the port's rules (eth_rule.h, an array map
 * written by libkinet_xdp.so) are tried in order, and the first that
 * matches redirects the frame into its slot's AF_XDP socket; frames no
 * rule takes, or whose slot has no socket, go on to the kernel's stack.
 * Compiled with clang -target bpf at build time and built into the module.
 *
 * Its owner, the process that attached it, is in its metadata (read-only
 * data the module writes before loading; `bpftool prog show` prints it): a
 * port whose process died without detaching the program is found by the
 * next port opened on the interface, which detaches it.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "nic/soft/eth_rule.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ETH_RULE_MAX);
	__type(key, __u32);
	__type(value, struct eth_rule);
} kinet_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} kinet_nrules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, ETH_RULE_MAX);
	__type(key, __u32);
	__type(value, __u32);
} kinet_xsks SEC(".maps");

/* the owner: its process id, its start time (clock ticks after boot, field
 * 22 of /proc/PID/stat: a reused id is another process) and its PID
 * namespace (the inode of /proc/PID/ns/pid: an id means nothing elsewhere) */
volatile const __u32 bpf_metadata_kinet_owner_pid = 0;
volatile const __u64 bpf_metadata_kinet_owner_start = 0;
volatile const __u64 bpf_metadata_kinet_owner_pidns = 0;

SEC("xdp")
int kinet_steer(struct xdp_md *ctx)
{
	const __u8 *p = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	struct eth_key k;
	__builtin_memset(&k, 0, sizeof(k));
	if (p + 14 > end)
		return XDP_PASS;
#pragma unroll
	for (int i = 0; i < 6; i++)
		k.dst_mac[i] = p[i];
	__u16 et = *(const __u16 *)(p + 12);
	const __u8 *l3 = p + 14;
	if (et == bpf_htons(0x8100)) {
		if (p + 18 > end)
			return XDP_PASS;
		et = *(const __u16 *)(p + 16);
		l3 = p + 18;
	}
	k.ethertype = et;
	const __u8 *l4 = 0;
	if (et == bpf_htons(0x0800)) {
		if (l3 + 20 <= end && (l3[0] >> 4) == 4) {
			__u32 ihl = (l3[0] & 0xfu) * 4u;
			k.l3 = 4;
			k.ip_proto = l3[9];
#pragma unroll
			for (int i = 0; i < 4; i++)
				k.ip_dst[i] = l3[16 + i];
			if (ihl >= 20 && !(l3[6] & 0x3f) && !l3[7])
				l4 = l3 + ihl;
		}
	} else if (et == bpf_htons(0x86dd)) {
		if (l3 + 40 <= end && (l3[0] >> 4) == 6) {
			k.l3 = 6;
			k.ip_proto = l3[6];
#pragma unroll
			for (int i = 0; i < 16; i++)
				k.ip_dst[i] = l3[24 + i];
			l4 = l3 + 40;
		}
	}
	if (l4 && (k.ip_proto == 6 || k.ip_proto == 17) && l4 + 4 <= end) {
		k.l4 = 1;
		k.l4_dst_port = *(const __u16 *)(l4 + 2);
	}
	__u32 zero = 0;
	__u32 *n = bpf_map_lookup_elem(&kinet_nrules, &zero);
	if (!n)
		return XDP_PASS;
	__u32 cnt = *n;
	for (__u32 i = 0; i < ETH_RULE_MAX; i++) {
		if (i >= cnt)
			break;
		struct eth_rule *r = bpf_map_lookup_elem(&kinet_rules, &i);
		if (!r)
			break;
		if (eth_rule_match(r, &k))
			return bpf_redirect_map(&kinet_xsks, r->slot, XDP_PASS);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";

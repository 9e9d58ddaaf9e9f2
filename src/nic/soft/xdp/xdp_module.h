/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xdp_module.h - the interface between libkinet and its AF_XDP module
 * (libkinet_xdp.so, src/nic/soft/xdp/module.c), the only part of kinet that
 * links libxdp and libbpf. libkinet loads it on the first AF_XDP port
 * (src/nic/soft/eth_xdp.c) and takes its table, kinet_xdp_module_ops; a
 * table of another ABI is refused.
 *
 * One port: kinet's XDP program (steer.bpf.c, built into the module)
 * attached to the interface, one UMEM of 2 KiB frames (half on the fill
 * ring for receiving, half for sending), a socket for sending, and one
 * socket per receive-queue slot bound to the same interface queue (shared
 * UMEM: one fill and one completion ring). The program steers each frame a
 * rule takes into its slot's socket; frames no rule takes go on to the
 * kernel's stack.
 */
#ifndef KINET_SOFT_XDP_MODULE_H
#define KINET_SOFT_XDP_MODULE_H

#include <stddef.h>
#include <stdint.h>

#define KINET_XDP_ABI 1
#define KINET_XDP_FRAME 2048u

struct kinet_xdp; /* one port */

struct kinet_xdp_info {
	char mode[128]; /* e.g. "AF_XDP on queue 0: native XDP, copy mode (...)" */
	uint8_t mac[6];
	uint32_t mtu;
	int ifindex;
};

/* A received frame of slot, valid during the call. */
typedef void (*kinet_xdp_rx_fn)(void *arg, int slot, const uint8_t *data, uint32_t len);

struct kinet_xdp_module_ops {
	int abi; /* KINET_XDP_ABI */
	/* mode: 0 auto (native, else generic), 1 native only, 2 generic only.
	 * frames: UMEM frames (power of two). 0, or a negative errno and why. */
	int (*open)(const char *ifname, uint32_t queue, uint32_t frames, int mode,
		    struct kinet_xdp **out, struct kinet_xdp_info *info, char *why, size_t wl);
	void (*close)(struct kinet_xdp *x);
	/* The socket of receive slot slot (0 .. 63), in the program's map. */
	int (*sock_add)(struct kinet_xdp *x, int slot, char *why, size_t wl);
	void (*sock_del)(struct kinet_xdp *x, int slot);
	/* The rule table (struct eth_rule, eth_rule.h; rule_size = its size). */
	int (*set_rules)(struct kinet_xdp *x, const void *rules, uint32_t n, size_t rule_size);
	/* Up to budget received frames of every slot, each handed to fn; the
	 * frames go back to the fill ring after the call. Returns how many. */
	int (*rx)(struct kinet_xdp *x, int budget, kinet_xdp_rx_fn fn, void *arg);
	/* A free frame for sending len bytes (NULL: none free, or the ring full),
	 * then commit (len 0: back unused), then flush (the kick). */
	uint8_t *(*tx_buf)(struct kinet_xdp *x, uint32_t len);
	void (*tx_commit)(struct kinet_xdp *x, uint8_t *buf, uint32_t len);
	void (*tx_flush)(struct kinet_xdp *x);
	/* Naps until a frame arrives or ns pass. */
	int (*wait)(struct kinet_xdp *x, uint64_t ns);
	/* Frames the kernel dropped for slot's socket (full ring, empty fill
	 * ring), since it was created; slot -1: the sending socket's. */
	uint64_t (*ring_drops)(struct kinet_xdp *x, int slot);
};

extern const struct kinet_xdp_module_ops kinet_xdp_module_ops;

#endif

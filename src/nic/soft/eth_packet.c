/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_packet.c - the AF_PACKET driver of software-NIC Ethernet ports: a
 * TPACKET_V3 receive ring (blocks the kernel fills and hands over whole),
 * frames sent with send(), the port thread steering. Used only when the
 * user allowed it (KINET_ETH_FALLBACK=packet, or the packet driver asked
 * for): an AF_PACKET socket sees a copy of every frame, so the kernel's own
 * stack still receives (and may answer) them, unlike AF_XDP where kinet's
 * XDP program takes a flow's frames away from the stack. A frame whose
 * TCP/UDP checksum the sender left to offload (TP_STATUS_CSUMNOTREADY) has it
 * completed before the NIC parses it, as the kernel accepts it.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>
#include <time.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include "nic/soft/eth_int.h"

#define BLOCK_SIZE (1u << 18) /* 256 KiB */
#define BLOCKS 16u
#define FRAME_SIZE 2048u

struct pkt {
	int fd;
	int ifindex;
	uint8_t *ring;
	size_t ring_len;
	uint32_t block; /* next block to look at */
	uint64_t drops; /* PACKET_STATISTICS, accumulated (reading clears it) */
};

static int pkt_open(struct soft_eth_port *p, char *why, size_t wl)
{
	const char *ifn = p->p.ifname;
	int ifindex = (int)if_nametoindex(ifn);
	if (!ifindex) {
		snprintf(why, wl, "no interface %s", ifn);
		return -ENODEV;
	}
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0) {
		int e = errno;
		snprintf(why, wl, "socket(AF_PACKET): %s%s", strerror(e),
			 e == EPERM ? " (needs CAP_NET_RAW)" : "");
		return -e;
	}
	struct pkt *k = calloc(1, sizeof(*k));
	if (!k) {
		close(fd);
		return -ENOMEM;
	}
	k->fd = fd;
	k->ifindex = ifindex;
	int v = TPACKET_V3, one = 1;
	struct tpacket_req3 req = {
		.tp_block_size = BLOCK_SIZE,
		.tp_block_nr = BLOCKS,
		.tp_frame_size = FRAME_SIZE,
		.tp_frame_nr = BLOCK_SIZE / FRAME_SIZE * BLOCKS,
		.tp_retire_blk_tov = 1, /* ms: a block with frames is handed over soon */
	};
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				  .sll_ifindex = ifindex};
	const char *step = "PACKET_VERSION";
	if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)) ||
	    (step = "PACKET_RX_RING",
	     setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req))))
		goto fail;
	/* our own frames are not received back (they are not the port's input) */
	step = "PACKET_IGNORE_OUTGOING";
	if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)))
		goto fail;
	k->ring_len = (size_t)BLOCK_SIZE * BLOCKS;
	step = "mmap of the ring";
	k->ring = mmap(NULL, k->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED, fd, 0);
	if (k->ring == MAP_FAILED) {
		k->ring = NULL;
		goto fail;
	}
	step = "bind";
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		goto fail;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%.15s", ifn);
	step = "SIOCGIFHWADDR";
	if (ioctl(fd, SIOCGIFHWADDR, &ifr))
		goto fail;
	memcpy(p->mac, ifr.ifr_hwaddr.sa_data, 6);
	if (!p->p.info.mtu) {
		step = "SIOCGIFMTU";
		if (ioctl(fd, SIOCGIFMTU, &ifr))
			goto fail;
		p->p.info.mtu = (uint32_t)ifr.ifr_mtu;
	}
	p->p.info.ifindex = ifindex;
	snprintf(p->p.info.ifname, sizeof(p->p.info.ifname), "%s", ifn);
	snprintf(p->p.info.mode, sizeof(p->p.info.mode),
		 "AF_PACKET, TPACKET_V3 ring, copies (the kernel's stack sees every frame too)");
	p->drv_priv = k;
	return 0;
fail:;
	int e = errno;
	snprintf(why, wl, "AF_PACKET %s on %s: %s", step, ifn, strerror(e));
	if (k->ring)
		munmap(k->ring, k->ring_len);
	close(fd);
	free(k);
	return -e;
}

static void pkt_close(struct soft_eth_port *p)
{
	struct pkt *k = p->drv_priv;
	if (!k)
		return;
	munmap(k->ring, k->ring_len);
	close(k->fd);
	free(k);
	p->drv_priv = NULL;
}

static int pkt_rx(struct soft_eth_port *p, int budget)
{
	struct pkt *k = p->drv_priv;
	int n = 0;
	while (n < budget) {
		struct tpacket_block_desc *b =
			(struct tpacket_block_desc *)(k->ring + (size_t)k->block * BLOCK_SIZE);
		if (!(__atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
			break;
		uint32_t cnt = b->hdr.bh1.num_pkts;
		struct tpacket3_hdr *h =
			(struct tpacket3_hdr *)((uint8_t *)b + b->hdr.bh1.offset_to_first_pkt);
		for (uint32_t i = 0; i < cnt; i++) {
			uint8_t *f = (uint8_t *)h + h->tp_mac;
			/* a frame whose TCP/UDP checksum the sender left to offload
			 * (CHECKSUM_PARTIAL: a veth peer with tx-checksumming on):
			 * the kernel takes it as good; the NIC completes it here, as
			 * the kernel would before handing it on */
			if ((h->tp_status & TP_STATUS_CSUMNOTREADY) && h->tp_snaplen == h->tp_len)
				soft_eth_tx_csum(f, h->tp_snaplen, KN_ETH_WQE_L4_CSUM);
			soft_eth_rx(p, -1, f, h->tp_snaplen);
			n++;
			h = (struct tpacket3_hdr *)((uint8_t *)h + h->tp_next_offset);
		}
		__atomic_store_n(&b->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
		k->block = (k->block + 1) % BLOCKS;
	}
	return n;
}

static uint8_t *pkt_tx_buf(struct soft_eth_port *p, uint32_t len)
{
	return len <= p->p.max_frame ? p->scratch : NULL;
}

static void pkt_tx_commit(struct soft_eth_port *p, uint8_t *buf, uint32_t len)
{
	struct pkt *k = p->drv_priv;
	if (!len)
		return;
	/* the socket's buffer full: wait for room (the NIC does not drop sends) */
	for (int tries = 0; tries < 1000; tries++) {
		if (send(k->fd, buf, len, MSG_DONTWAIT) >= 0)
			return;
		if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
			break;
		struct pollfd pf = {.fd = k->fd, .events = POLLOUT};
		poll(&pf, 1, 1);
	}
	KLOG_WARN("eth port %s: AF_PACKET send of %u bytes failed: %s", p->p.ifname, len,
		  strerror(errno));
}

static int pkt_wait(struct soft_eth_port *p, uint64_t ns)
{
	struct pkt *k = p->drv_priv;
	struct tpacket_block_desc *b =
		(struct tpacket_block_desc *)(k->ring + (size_t)k->block * BLOCK_SIZE);
	if (__atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)
		return 0;
	/* a block handed over wakes it (POLLIN); ppoll for a timeout finer than
	 * poll()'s milliseconds */
	struct pollfd pf = {.fd = k->fd, .events = POLLIN};
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	ppoll(&pf, 1, &ts, NULL);
	return 0;
}

static uint64_t pkt_ring_drops(struct soft_eth_port *p, struct soft_eth_rxq *q)
{
	struct pkt *k = p->drv_priv;
	if (q)
		return 0; /* one socket for the port: its drops are the port's */
	struct tpacket_stats_v3 st;
	socklen_t l = sizeof(st);
	if (getsockopt(k->fd, SOL_PACKET, PACKET_STATISTICS, &st, &l) == 0)
		k->drops += st.tp_drops;
	return k->drops;
}

const struct eth_drv soft_eth_drv_packet = {
	.name = "packet",
	.open = pkt_open,
	.close = pkt_close,
	.rx = pkt_rx,
	.tx_buf = pkt_tx_buf,
	.tx_commit = pkt_tx_commit,
	.wait = pkt_wait,
	.ring_drops = pkt_ring_drops,
};

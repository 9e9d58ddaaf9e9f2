/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/eth.h - Ethernet queues, the host control path: open a port, create
 * send and receive queues whose WQEs and CQEs are mlx5's (kinet/prm.h),
 * steer flows into receive queues, export the queues to device code
 * (kinet/device_eth.h), read per-queue counters.
 *
 * Backends: on the software NIC a port is a Linux network interface served
 * through AF_XDP (an XDP program of kinet's steers the flows into the right
 * socket; copy mode where the driver has no zero-copy), through AF_PACKET
 * (TPACKET_V3) only when allowed, or a loopback port inside the library; on
 * mlx5 it is a ConnectX port, its queues raw-packet queues with flow
 * steering rules. Device code is the same on both.
 *
 * Every call returns 0 (or a stated non-negative value) or a negative errno;
 * kinet_strerror() explains it. Objects are destroyed in reverse order:
 * flows before their receive queue, queues before their port, ports before
 * their protection domain.
 */
#ifndef KINET_ETH_H
#define KINET_ETH_H

#include <stddef.h>
#include <stdint.h>
#include <kinet/kinet.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kinet_eth_port kinet_eth_port;
typedef struct kinet_eth_txq kinet_eth_txq;
typedef struct kinet_eth_rxq kinet_eth_rxq;
typedef struct kinet_eth_flow kinet_eth_flow;
struct kn_eth_txq; /* kinet/device_eth.h */
struct kn_eth_rxq;

/* ---- ports -------------------------------------------------------------------- */

/* How the software NIC reaches the interface (kinet_eth_port_attr.driver). */
enum kinet_eth_driver {
	KINET_ETH_DRIVER_AUTO = 0,     /* AF_XDP; AF_PACKET only if KINET_ETH_FALLBACK=packet */
	KINET_ETH_DRIVER_XDP = 1,      /* AF_XDP sockets and kinet's XDP program */
	KINET_ETH_DRIVER_PACKET = 2,   /* AF_PACKET, TPACKET_V3 ring (frames are copied;
					* the kernel's stack still sees every frame) */
	KINET_ETH_DRIVER_LOOPBACK = 3, /* no interface: every frame sent is received */
	KINET_ETH_DRIVER_MLX5 = 4,     /* a ConnectX port (the mlx5 backend) */
};
/* "auto", "xdp", "packet", "loopback", "mlx5" (never NULL). */
const char *kinet_eth_driver_str(int driver);

struct kinet_eth_port_attr {
	const char *ifname; /* soft: the Linux interface (not needed for loopback);
			     * mlx5: NULL */
	int driver;         /* soft: enum kinet_eth_driver (0: auto) */
	uint32_t queue;     /* soft, AF_XDP: the interface's receive queue served
			     * (frames arriving on other queues are not seen) */
	uint32_t port;      /* mlx5: ConnectX port number (0: the context's port) */
	uint32_t mtu;       /* largest IP packet accepted and sent (0: the interface's;
			     * loopback default 1500) */
};

/* Opens an Ethernet port of pd's context. The driver and mode used are never
 * silent: kinet_eth_port_info() reports them (AF_XDP: attach mode native or
 * generic, copy or zero-copy). AF_XDP unavailable (module or libraries
 * missing, no privileges, no bpffs, an old kernel) is -EOPNOTSUPP with the
 * reason logged, unless KINET_ETH_FALLBACK=packet allows AF_PACKET. -ENODEV:
 * no such interface or port; -EPERM: not allowed (root or CAP_NET_ADMIN,
 * CAP_NET_RAW). */
int kinet_eth_port_open(kinet_pd *pd, const struct kinet_eth_port_attr *attr,
			kinet_eth_port **out);
/* -EBUSY (nothing closed) while queues of the port exist. */
int kinet_eth_port_close(kinet_eth_port *port);

struct kinet_eth_port_info {
	int driver;          /* enum kinet_eth_driver actually used */
	char ifname[32];     /* interface, or "loopback", or the device and port */
	int ifindex;
	uint8_t mac[6];      /* the port's MAC address */
	uint32_t mtu;
	char mode[128];      /* how frames move, e.g. "AF_XDP native, copy mode (the
			      * driver has no zero-copy)" */
};
int kinet_eth_port_info(const kinet_eth_port *port, struct kinet_eth_port_info *out);

/* The port's real-time clock in nanoseconds: the clock of receive timestamps
 * and of send-at-time (kn_eth_send_at). Software NIC: CLOCK_REALTIME. */
int kinet_eth_port_time(kinet_eth_port *port, uint64_t *ns);

/* ---- counters ------------------------------------------------------------------- */

/* Why frames did not reach a receive buffer (kinet_eth_counters.drops[]). */
enum kinet_eth_drop {
	KINET_ETH_DROP_NO_WQE = 0,   /* no receive WQE posted (buffers not released) */
	KINET_ETH_DROP_TOO_LONG = 1, /* larger than the buffer: an error CQE (cyclic),
					or than a whole striding WQE */
	KINET_ETH_DROP_RUNT = 2,     /* shorter than an Ethernet header */
	KINET_ETH_DROP_OVERSIZE = 3, /* larger than the port's MTU allows */
	KINET_ETH_DROP_CQ_FULL = 4,  /* the receive CQ had no room */
	KINET_ETH_DROP_RING = 5,     /* the kernel's socket ring was full (AF_XDP,
					AF_PACKET statistics) */
	KINET_ETH_DROP_STATE = 6,    /* the queue was not ready (reset, error) */
	KINET_ETH_DROP_PROTECTION = 7, /* the receive WQE's buffer is outside its region
					  (or the WQE is malformed): an error CQE */
	KINET_ETH_DROP_MAX = 8,
};
/* Send-side errors (kinet_eth_counters.tx_errors[]): each one an error CQE. */
enum kinet_eth_tx_error {
	KINET_ETH_TXE_MALFORMED = 0, /* a WQE whose fields contradict it (ds, inline
					length, opcode, index, queue number) */
	KINET_ETH_TXE_PROTECTION = 1, /* a data segment outside its region (lkey) */
	KINET_ETH_TXE_LENGTH = 2,    /* a frame shorter than an Ethernet header or
					larger than the port sends */
	KINET_ETH_TXE_FLUSHED = 3,   /* flushed behind an error */
	KINET_ETH_TXE_MAX = 4,
};

struct kinet_eth_counters {
	uint64_t packets;   /* rx: packets placed with a good CQE; tx: frames sent */
	uint64_t bytes;
	uint64_t drops[KINET_ETH_DROP_MAX]; /* rx, by enum kinet_eth_drop */
	uint64_t csum_bad;  /* rx: placed with an L3 or L4 checksum found wrong */
	uint64_t no_l3;     /* rx: placed, not IPv4 or IPv6 (EtherType unknown to the NIC) */
	uint64_t tx_errors[KINET_ETH_TXE_MAX]; /* tx, by enum kinet_eth_tx_error */
	uint64_t tx_csum;   /* tx: frames whose checksums the NIC computed */
	uint64_t tx_waits;  /* tx: WAIT WQEs (send at a time) executed */
	uint64_t unmatched; /* port: frames no flow took (left to the kernel's stack,
			       AF_XDP; dropped, loopback) */
};
/* Counters of a queue or port (fields that do not apply are 0). mlx5: the
 * backend has no per-queue counters (-EOPNOTSUPP). */
int kinet_eth_txq_counters(const kinet_eth_txq *txq, struct kinet_eth_counters *out);
int kinet_eth_rxq_counters(const kinet_eth_rxq *rxq, struct kinet_eth_counters *out);
int kinet_eth_port_counters(const kinet_eth_port *port, struct kinet_eth_counters *out);

/* ---- send queues ----------------------------------------------------------------- */

struct kinet_eth_txq_attr {
	uint32_t depth;      /* WQEs, rounded up to a power of two (0: 256) */
	uint32_t inline_hdr; /* frame bytes inlined in each send WQE: 0, or
				KN_ETH_L2_INLINE_HEADER_SIZE (what the NIC needs is
				used when larger) */
	int db_mode;         /* enum kn_db_mode (KN_DB_AUTO) */
	int share;           /* enum kn_share: which device threads post */
	uint32_t timeout_ms; /* device-side bound on blocking calls (0: tunable) */
};

/* A send queue of mlx5 Ethernet WQEs on port, with its dedicated send CQ as
 * deep as the queue; ready at once. The queues live in host memory mapped
 * into the GPU (software NIC, verbs). */
int kinet_eth_txq_create(kinet_eth_port *port, const struct kinet_eth_txq_attr *attr,
			 kinet_eth_txq **out);
int kinet_eth_txq_destroy(kinet_eth_txq *txq);
/* The device descriptor (a host pointer, valid until the queue is destroyed). */
int kinet_eth_txq_device(kinet_eth_txq *txq, struct kn_eth_txq **out);
/* After an error CQE the queue is in error: every later WQE is flushed.
 * This returns it to ready, empty (no device thread may use it meanwhile). */
int kinet_eth_txq_reset(kinet_eth_txq *txq);
/* 1 while the queue is in error, 0 when ready. */
int kinet_eth_txq_in_error(const kinet_eth_txq *txq);
/* Copies one raw WQE of nbb basic blocks into the queue and rings the
 * doorbell (kinet_qp_post_raw for an Ethernet SQ): the WQE's ticket, or a
 * negative errno. Do not mix with the device API on one queue. */
long long kinet_eth_txq_post_raw(kinet_eth_txq *txq, const void *wqe, uint32_t nbb);
/* The queue's send CQ (for host consumers of raw WQEs). */
kinet_cq *kinet_eth_txq_cq(const kinet_eth_txq *txq);

/* ---- receive queues --------------------------------------------------------------- */

enum kinet_eth_rxq_mode {
	KINET_ETH_RXQ_CYCLIC = 0,   /* one packet per WQE, buffers of pkt_size bytes */
	KINET_ETH_RXQ_STRIDING = 1, /* each WQE 2^log_strides strides of 2^log_stride
				       bytes; a packet takes consecutive strides */
};
/* kinet_eth_rxq_attr.flags */
enum {
	/* The caller writes the receive WQEs and rings the receive doorbell
	 * record itself (kinet allocates no buffers; the device receive calls
	 * do not apply). */
	KINET_ETH_RXQ_RAW = 1u << 0,
};

struct kinet_eth_rxq_attr {
	uint32_t depth;       /* receive WQEs, rounded up to a power of two (0: 256) */
	int mode;             /* enum kinet_eth_rxq_mode */
	uint32_t pkt_size;    /* cyclic: bytes per buffer (0: 2048) */
	uint32_t log_stride;  /* striding: stride = 2^log_stride bytes, 6 .. 13 (0: 11) */
	uint32_t log_strides; /* striding: strides per WQE = 2^log_strides, 3 .. 16 (0: 6) */
	void *buf;            /* NULL: kinet allocates the buffers in host memory mapped
				 into the GPU; else depth x (bytes per WQE) bytes of the
				 caller's (host or GPU memory), registered as mr */
	kinet_mr *mr;         /* with buf: its registration (local write) */
	uint32_t flags;       /* KINET_ETH_RXQ_* */
	uint32_t timeout_ms;  /* default bound of device receive calls (0: tunable) */
};

/* A receive queue on port with its receive CQ as deep as the queue, every
 * WQE posted. Frames reach it through flows (kinet_eth_flow_create). */
int kinet_eth_rxq_create(kinet_eth_port *port, const struct kinet_eth_rxq_attr *attr,
			 kinet_eth_rxq **out);
/* -EBUSY while flows steer into it. */
int kinet_eth_rxq_destroy(kinet_eth_rxq *rxq);
/* The device descriptor (a host pointer, valid until the queue is destroyed).
 * -EINVAL for a KINET_ETH_RXQ_RAW queue (there are no kinet buffers). */
int kinet_eth_rxq_device(kinet_eth_rxq *rxq, struct kn_eth_rxq **out);

/* A raw queue's ring (KINET_ETH_RXQ_RAW): the caller writes receive WQEs
 * (kinet/prm.h: a data segment each, cyclic; next segment + data segment,
 * striding) at wq and posts them by writing the number of WQEs posted so
 * far, big-endian, low 16 bits, to dbrec[0]; the NIC's receive CQEs arrive
 * in cq (kinet_cq_poll). */
struct kinet_eth_rxq_ring {
	uint8_t *wq;
	uint32_t wqe_cnt;  /* WQEs in the ring */
	uint32_t wqe_size; /* bytes per WQE: 16 (cyclic) or 32 (striding) */
	volatile uint32_t *dbrec;
	kinet_cq *cq;
	uint32_t rqn;      /* the queue's number (in its CQEs) */
	uint32_t wqe_bytes, stride_bytes, strides; /* the geometry of the attributes */
};
int kinet_eth_rxq_ring(kinet_eth_rxq *rxq, struct kinet_eth_rxq_ring *out);

/* ---- flow steering ---------------------------------------------------------------- */

/* kinet_eth_match.fields: what a flow matches (all of them must). */
enum kinet_eth_match_field {
	KINET_ETH_MATCH_DST_MAC = 1u << 0,
	KINET_ETH_MATCH_ETHERTYPE = 1u << 1,
	KINET_ETH_MATCH_IPV4_DST = 1u << 2,
	KINET_ETH_MATCH_IPV6_DST = 1u << 3,
	KINET_ETH_MATCH_IP_PROTO = 1u << 4,
	KINET_ETH_MATCH_L4_DST_PORT = 1u << 5, /* with IP_PROTO 6 (TCP) or 17 (UDP) */
};

struct kinet_eth_match {
	uint32_t fields;      /* enum kinet_eth_match_field; 0: the default flow (every
				 frame no other flow takes) */
	uint8_t dst_mac[6];
	uint16_t ethertype;   /* host order (0x0800 IPv4, 0x86dd IPv6, ...) */
	uint8_t ip_dst[16];   /* IPv4: the first 4 bytes; network order */
	uint8_t ip_proto;     /* 1 ICMP, 6 TCP, 17 UDP, 58 ICMPv6, ... */
	uint16_t l4_dst_port; /* host order */
	int priority;         /* lower is tried first; equal: the older flow first */
};

/* Steers the frames of port that match m into rxq. -EINVAL for a match that
 * cannot be (a port without IP_PROTO TCP or UDP, IPv4 and IPv6 together, an
 * EtherType that contradicts the IP version), -ENOSPC when the port has no
 * room for another flow (soft: 64), -EEXIST for a second default flow. */
int kinet_eth_flow_create(kinet_eth_rxq *rxq, const struct kinet_eth_match *m,
			  kinet_eth_flow **out);
int kinet_eth_flow_destroy(kinet_eth_flow *flow);

#ifdef __cplusplus
}
#endif
#endif /* KINET_ETH_H */

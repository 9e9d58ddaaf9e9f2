/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_int.h - the software NIC's Ethernet ports, private to eth*.c.
 *
 * A port is served by a thread of its own (the port thread), never by the
 * RC engines: each pass it serves the doorbells of its send queues (parses
 * the mlx5 Ethernet WQEs, checks every data segment against the key table,
 * builds the frame, computes the offloaded checksums, hands it to the
 * driver), then takes the frames the driver received and places each into
 * its receive queue's next buffer with a receive CQE. Drivers: AF_XDP (the
 * module libkinet_xdp.so; kinet's XDP program steers), AF_PACKET
 * (TPACKET_V3; the thread steers), loopback (a frame sent is a frame
 * received; the thread steers).
 *
 * Locking: the pass lock (soft_eth_port.lock) is held for a whole pass and
 * by whoever changes the port's queues or rules; the context's key table is
 * read under its read lock, taken per pass (writers stop the RC engines,
 * then take it for writing, so they wait for the pass to end).
 */
#ifndef KINET_SOFT_ETH_INT_H
#define KINET_SOFT_ETH_INT_H

#include <linux/types.h>
#include <string.h>
#include "nic/soft/soft.h"
#include "core/driver.h"
#include "nic/soft/eth_rule.h"

/* Counters of one queue or port: written by the port thread (relaxed
 * stores), read by anyone (relaxed loads). */
struct eth_ctr {
	uint64_t packets, bytes, csum_bad, no_l3, tx_csum, tx_waits, unmatched;
	uint64_t drops[KINET_ETH_DROP_MAX];
	uint64_t tx_errors[KINET_ETH_TXE_MAX];
};
#define ECTR(c, field, n) __atomic_store_n(&(c)->field, (c)->field + (n), __ATOMIC_RELAXED)
#define ECTR_GET(c, field) __atomic_load_n(&(c)->field, __ATOMIC_RELAXED)

struct soft_eth_port;
struct soft_eth_rxq;

/* A driver: how frames reach the interface and come back. */
struct eth_drv {
	const char *name;
	/* Opens the interface (p->p.attr, p->p.ifname): fills mac, ifindex,
	 * mtu (when the attribute leaves it 0) and mode; why on failure. */
	int (*open)(struct soft_eth_port *p, char *why, size_t wl);
	void (*close)(struct soft_eth_port *p);
	/* A receive queue got slot q->slot / loses it (AF_XDP: its socket). */
	int (*rxq_add)(struct soft_eth_port *p, struct soft_eth_rxq *q);
	void (*rxq_del)(struct soft_eth_port *p, struct soft_eth_rxq *q);
	/* p->rules changed (AF_XDP: the program's map). */
	int (*rules)(struct soft_eth_port *p);
	/* Takes up to budget received frames, calling soft_eth_rx() for each;
	 * returns how many. NULL: frames come from the send path (loopback). */
	int (*rx)(struct soft_eth_port *p, int budget);
	/* A buffer for a frame of len bytes to send, or NULL while the driver
	 * has no room (the WQE waits for a later pass); then tx_commit (len 0:
	 * the buffer goes back unused). */
	uint8_t *(*tx_buf)(struct soft_eth_port *p, uint32_t len);
	void (*tx_commit)(struct soft_eth_port *p, uint8_t *buf, uint32_t len);
	/* Hands the committed frames to the kernel (a kick). */
	void (*tx_flush)(struct soft_eth_port *p);
	/* Naps until a frame arrives or ns pass: 0, or -ENOSYS (sleep instead). */
	int (*wait)(struct soft_eth_port *p, uint64_t ns);
	/* Frames the kernel dropped for want of room in q's ring (NULL q: the
	 * port's), since the start. */
	uint64_t (*ring_drops)(struct soft_eth_port *p, struct soft_eth_rxq *q);
};

extern const struct eth_drv soft_eth_drv_loopback;
extern const struct eth_drv soft_eth_drv_packet;
extern const struct eth_drv soft_eth_drv_xdp;

struct soft_eth_txq {
	struct kinet_eth_txq t;
	uint64_t ci;            /* WQEBBs consumed */
	uint64_t last_db_word;  /* the doorbell register when last read */
	uint32_t db_target;     /* producer named by the register (bit 16: valid) */
	uint32_t dbr_seen, dbr_target;
	_Atomic uint64_t ci_pub; /* ci for kinet_eth_txq_post_raw */
	uint8_t *uar;           /* doorbell page */
	void *dbr_page;
	int idx;                /* in the port's list */
	struct eth_ctr ctr;
};

struct soft_eth_rxq {
	struct kinet_eth_rxq r;
	int slot;               /* steering slot 0 .. ETH_RULE_MAX-1 */
	uint32_t ci;            /* receive WQEs consumed */
	uint32_t strides_used;  /* striding: strides of WQE ci taken */
	void *dbr_page;
	void *drv;              /* the driver's per-queue state (AF_XDP: its socket) */
	uint64_t ring_base;     /* ring_drops() at creation */
	struct eth_ctr ctr;
};

struct soft_eth_port {
	struct kinet_eth_port p;
	const struct eth_drv *drv;
	void *drv_priv;
	pthread_t th;
	bool started;
	atomic_bool stop, kick;
	pthread_mutex_t lock;  /* the pass lock */
	struct soft_eth_txq **txqs;
	int ntxq, txcap;
	struct soft_eth_rxq *slots[ETH_RULE_MAX];
	struct eth_rule rules[ETH_RULE_MAX];
	int nrules;
	uint8_t mac[6];
	uint8_t *scratch;      /* one frame (loopback, AF_PACKET) */
	uint64_t spin_ns, sleep_ns;
	uint64_t wait_until;   /* earliest WAIT deadline of this pass (ns), 0 none */
	uint64_t ring_base;
	uint64_t rx_ts;        /* the clock of this pass's receive CQEs (read once) */
	uint64_t pass_cqes;    /* CQEs written this pass (the context's count, once) */
	struct eth_ctr ctr;    /* the port's own: unmatched, ring drops */
	bool said_l3, said_l4; /* a bad IPv4 header / TCP-UDP checksum was logged */
};

/* Writes a CQE into a CQ only the port thread produces into (its queues'
 * dedicated CQs; reset under the pass lock): no lock (soft_cq_store). The
 * caller checked soft_cq_space(). */
static inline void seth_cq_write(struct soft_eth_port *p, kinet_cq *c, const void *cqe)
{
	soft_cq_store(soft_cq(c), c->cnt, cqe);
	p->pass_cqes++;
}

static inline struct soft_eth_port *seth_port(kinet_eth_port *p)
{
	return kinet_container_of(p, struct soft_eth_port, p);
}
static inline struct soft_eth_txq *seth_txq(kinet_eth_txq *t)
{
	return kinet_container_of(t, struct soft_eth_txq, t);
}
static inline struct soft_eth_rxq *seth_rxq(kinet_eth_rxq *r)
{
	return kinet_container_of(r, struct soft_eth_rxq, r);
}

/* The port's real-time clock (CLOCK_REALTIME), ns. */
uint64_t soft_eth_now(void);

/* ---- receive (eth_rx.c) ---- */
/* A frame arrived: slot is the steering result (the XDP program's), or -1
 * for the port thread to classify. Places it or counts why not. Port
 * thread, pass lock and key table held. */
void soft_eth_rx(struct soft_eth_port *p, int slot, const uint8_t *frame, uint32_t len);
/* The steering key of a frame (its parse for the rules): 0, or -1 when it is
 * shorter than an Ethernet header. */
int soft_eth_key(const uint8_t *f, uint32_t len, struct eth_key *k);
/* The Toeplitz hash of the n bytes of in with the 40-byte key (RSS). */
uint32_t soft_eth_toeplitz(const uint8_t *key, const uint8_t *in, uint32_t n);
/* The Internet checksum helpers of the NIC: the offloads on send and the
 * checks on receive. */
uint32_t soft_eth_sum(uint32_t sum, const uint8_t *p, uint32_t n);

/* ---- send (eth_tx.c) ---- */
/* One pass over a send queue: up to budget WQEs. Returns the work done. */
int soft_eth_tx_serve(struct soft_eth_port *p, struct soft_eth_txq *q, int budget);
/* The NIC's checksum offloads on a frame (cs_flags of its eth segment):
 * 1 when it computed one, 0 when the headers did not allow it. */
int soft_eth_tx_csum(uint8_t *f, uint32_t len, uint8_t cs_flags);

/* ---- the backend's operations (eth.c), for the soft backend's table ---- */
int soft_eth_port_open(kinet_eth_port *p);
void soft_eth_port_close(kinet_eth_port *p);
int soft_eth_port_time(kinet_eth_port *p, uint64_t *ns);
int soft_eth_txq_create(kinet_eth_txq *t);
int soft_eth_txq_start(kinet_eth_txq *t);
void soft_eth_txq_destroy(kinet_eth_txq *t);
int soft_eth_txq_reset(kinet_eth_txq *t);
uint64_t soft_eth_txq_consumed(kinet_eth_txq *t);
int soft_eth_rxq_create(kinet_eth_rxq *r);
int soft_eth_rxq_start(kinet_eth_rxq *r);
void soft_eth_rxq_destroy(kinet_eth_rxq *r);
int soft_eth_flow_create(kinet_eth_flow *f);
void soft_eth_flow_destroy(kinet_eth_flow *f);
int soft_eth_counters(kinet_eth_port *p, kinet_eth_txq *t, kinet_eth_rxq *r,
		      struct kinet_eth_counters *out);

/* Tests: a frame arriving at the port as if received (kinet_static). */
void kinet_soft_eth_inject(kinet_eth_port *port, const void *frame, uint32_t len);

/* The Ethernet part of the soft backend's table (backend.c). */
#define SOFT_ETH_OPS                                                                               \
	.eth_port_size = sizeof(struct soft_eth_port),                                             \
	.eth_txq_size = sizeof(struct soft_eth_txq), .eth_rxq_size = sizeof(struct soft_eth_rxq),  \
	.eth_port_open = soft_eth_port_open, .eth_port_close = soft_eth_port_close,                \
	.eth_port_time = soft_eth_port_time, .eth_txq_create = soft_eth_txq_create,                \
	.eth_txq_start = soft_eth_txq_start, .eth_txq_destroy = soft_eth_txq_destroy,              \
	.eth_txq_reset = soft_eth_txq_reset, .eth_txq_consumed = soft_eth_txq_consumed,            \
	.eth_rxq_create = soft_eth_rxq_create, .eth_rxq_start = soft_eth_rxq_start,                \
	.eth_rxq_destroy = soft_eth_rxq_destroy, .eth_flow_create = soft_eth_flow_create,          \
	.eth_flow_destroy = soft_eth_flow_destroy, .eth_counters = soft_eth_counters

#endif

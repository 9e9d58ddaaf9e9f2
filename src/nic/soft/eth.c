/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth.c - the software NIC's Ethernet ports: the backend operations (ports,
 * send and receive queues, flows, counters), the port thread and the
 * loopback driver. The send path is eth_tx.c, the receive path eth_rx.c,
 * the drivers eth_packet.c and eth_xdp.c (which loads libkinet_xdp.so).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include "nic/soft/eth_int.h"

#define TX_BUDGET 64  /* WQEs per send queue per pass */
#define RX_BUDGET 256 /* frames per pass */

/* Queue numbers of Ethernet queues (never RC QP numbers: those are below). */
static _Atomic uint32_t next_qn = 0x10000;

uint64_t soft_eth_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the port thread ----------------------------------------------------------- */

static void *port_main(void *arg)
{
	struct soft_eth_port *p = arg;
	struct soft_ctx *sc = soft_ctx(p->p.ctx);
	struct kinet_idle idle;
	kinet_idle_init(&idle, p->spin_ns, p->sleep_ns);
	prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		int work = 0;
		pthread_mutex_lock(&p->lock);
		pthread_rwlock_rdlock(&sc->keys.lock);
		p->wait_until = 0;
		p->rx_ts = 0;
		p->pass_cqes = 0;
		for (int i = 0; i < p->ntxq; i++)
			work += soft_eth_tx_serve(p, p->txqs[i], TX_BUDGET);
		if (p->drv->tx_flush)
			p->drv->tx_flush(p);
		if (p->drv->rx)
			work += p->drv->rx(p, RX_BUDGET);
		pthread_rwlock_unlock(&sc->keys.lock);
		if (p->pass_cqes)
			KINET_COUNT(p->p.ctx, c_cqes, p->pass_cqes);
		uint64_t deadline = p->wait_until;
		pthread_mutex_unlock(&p->lock);
		bool kicked = !work && atomic_load_explicit(&p->kick, memory_order_relaxed) &&
			      atomic_exchange(&p->kick, false);
		uint64_t nap = kinet_idle_next(&idle, work || kicked);
		if (work || kicked)
			continue;
		if (deadline) {
			/* a WAIT WQE: be back in time for it */
			uint64_t now = soft_eth_now();
			uint64_t left = deadline > now ? deadline - now : 0;
			if (left < 20000)
				nap = 0;
			else if (!nap || nap > left - 10000)
				nap = left - 10000;
		}
		if (!nap) {
			kinet_idle_poll(&idle);
			continue;
		}
		if (!p->drv->wait || p->drv->wait(p, nap) == -ENOSYS)
			kinet_sleep_ns(nap);
	}
	return NULL;
}

static void kick(struct soft_eth_port *p)
{
	atomic_store(&p->kick, true);
}

/* ---- the loopback driver ---------------------------------------------------------- */

static int loop_open(struct soft_eth_port *p, char *why, size_t wl)
{
	(void)why;
	(void)wl;
	static const uint8_t mac[6] = {0x02, 0x6b, 0x6e, 0x00, 0x00, 0x01}; /* local admin */
	memcpy(p->mac, mac, 6);
	p->p.info.ifindex = 0;
	if (!p->p.info.mtu)
		p->p.info.mtu = 1500;
	snprintf(p->p.info.mode, sizeof(p->p.info.mode),
		 "loopback: every frame sent is received by the port's flows");
	snprintf(p->p.info.ifname, sizeof(p->p.info.ifname), "loopback");
	return 0;
}

static void loop_close(struct soft_eth_port *p)
{
	(void)p;
}

static uint8_t *loop_tx_buf(struct soft_eth_port *p, uint32_t len)
{
	return len <= p->p.max_frame ? p->scratch : NULL;
}

static void loop_tx_commit(struct soft_eth_port *p, uint8_t *buf, uint32_t len)
{
	if (len)
		soft_eth_rx(p, -1, buf, len);
}

const struct eth_drv soft_eth_drv_loopback = {
	.name = "loopback",
	.open = loop_open,
	.close = loop_close,
	.tx_buf = loop_tx_buf,
	.tx_commit = loop_tx_commit,
};

/* ---- ports ------------------------------------------------------------------------ */

static int drv_open(struct soft_eth_port *p, const struct eth_drv *d, char *why, size_t wl)
{
	p->drv = d;
	int rc = d->open(p, why, wl);
	if (rc)
		p->drv = NULL;
	return rc;
}

/* The interface's flags (IFF_*): 0 and *flags, -ENODEV when there is no
 * such interface, another negative errno when it cannot be asked. */
static int if_flags(const char *ifn, unsigned *flags)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%.*s", IFNAMSIZ - 1, ifn);
	int rc = 0;
	if (strlen(ifn) >= IFNAMSIZ)
		rc = -ENODEV; /* no interface has a name that long */
	else if (ioctl(fd, SIOCGIFFLAGS, &ifr))
		rc = errno == ENXIO ? -ENODEV : -errno;
	else
		*flags = (unsigned)(unsigned short)ifr.ifr_flags;
	close(fd);
	return rc;
}

/* 0 when this process may open an AF_PACKET socket (CAP_NET_RAW), else the
 * negative errno that says why not. */
static int packet_allowed(void)
{
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* What to add to "AF_XDP unavailable" about the AF_PACKET fallback: only
 * what can work. */
static const char *fallback_hint(void)
{
	int rc = packet_allowed();
	if (rc == 0)
		return " (KINET_ETH_FALLBACK=packet would allow AF_PACKET)";
	if (rc == -EPERM || rc == -EACCES)
		return " (AF_PACKET, the fallback, is not allowed either: it needs CAP_NET_RAW; "
		       "run as root, or give the program CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW)";
	return " (AF_PACKET is unavailable too)";
}

/* Says when the interface can neither send nor receive as it stands: down
 * (not IFF_UP), or up without a carrier (not IFF_RUNNING). */
static void warn_link_state(const char *ifn)
{
	unsigned fl = 0;
	if (if_flags(ifn, &fl))
		return;
	if (!(fl & IFF_UP))
		KLOG_WARN("eth port %s: the interface is down: nothing is sent or received until "
			  "it is up (ip link set %s up)",
			  ifn, ifn);
	else if (!(fl & IFF_RUNNING))
		KLOG_WARN("eth port %s: the interface has no carrier (up, not running: a cable "
			  "out, or a veth whose peer is down): nothing is sent or received until "
			  "it has one",
			  ifn);
}

int soft_eth_port_open(kinet_eth_port *pp)
{
	struct soft_eth_port *p = seth_port(pp);
	int drv = pp->attr.driver;
	char why[512] = "";
	int rc;
	if (drv == KINET_ETH_DRIVER_MLX5) {
		KLOG_ERR("eth_port_open: the mlx5 driver needs the mlx5 backend (this context is "
			 "the software NIC's)");
		return -EINVAL;
	}
	if (drv != KINET_ETH_DRIVER_LOOPBACK && !pp->attr.ifname) {
		KLOG_ERR("eth_port_open: the software NIC needs an interface name (ifname), or the "
			 "loopback driver");
		return -EINVAL;
	}
	pp->info.mtu = pp->attr.mtu;
	unsigned ifl = 0;
	if (drv != KINET_ETH_DRIVER_LOOPBACK && if_flags(pp->ifname, &ifl) == -ENODEV) {
		KLOG_ERR("eth port %s: no such interface (ip link lists those of this network "
			 "namespace)",
			 pp->ifname);
		return -ENODEV;
	}
	if (drv == KINET_ETH_DRIVER_LOOPBACK) {
		rc = drv_open(p, &soft_eth_drv_loopback, why, sizeof(why));
	} else if (drv == KINET_ETH_DRIVER_PACKET) {
		rc = drv_open(p, &soft_eth_drv_packet, why, sizeof(why));
		if (rc)
			KLOG_ERR("eth port %s: AF_PACKET: %s", pp->ifname, why);
	} else {
		rc = drv_open(p, &soft_eth_drv_xdp, why, sizeof(why));
		if (rc && drv == KINET_ETH_DRIVER_AUTO && !strcmp(KT(ETH_FALLBACK), "packet")) {
			KLOG_WARN("eth port %s: AF_XDP unavailable (%s): AF_PACKET instead, as "
				  "KINET_ETH_FALLBACK=packet allows",
				  pp->ifname, why);
			char why2[256] = "";
			rc = drv_open(p, &soft_eth_drv_packet, why2, sizeof(why2));
			if (rc)
				KLOG_ERR("eth port %s: AF_PACKET: %s", pp->ifname, why2);
		} else if (rc) {
			/* busy: another program holds the interface; AF_PACKET would not
			 * see the frames it takes */
			KLOG_ERR("eth port %s: AF_XDP unavailable: %s%s", pp->ifname, why,
				 drv == KINET_ETH_DRIVER_AUTO && rc != -EBUSY ? fallback_hint() : "");
			if (rc != -EPERM && rc != -ENODEV && rc != -EBUSY)
				rc = -EOPNOTSUPP;
		}
	}
	if (rc)
		return rc;
	if (p->drv != &soft_eth_drv_loopback)
		warn_link_state(pp->ifname);
	pp->info.driver = p->drv == &soft_eth_drv_xdp      ? KINET_ETH_DRIVER_XDP
			  : p->drv == &soft_eth_drv_packet ? KINET_ETH_DRIVER_PACKET
							   : KINET_ETH_DRIVER_LOOPBACK;
	memcpy(pp->info.mac, p->mac, 6);
	pp->max_frame = pp->info.mtu + 14 + 4; /* Ethernet header, one VLAN tag */
	p->scratch = malloc(pp->max_frame);
	p->spin_ns = (uint64_t)KT(ENGINE_SPIN_US) * 1000ull;
	/* the drivers' waits end when a frame arrives: an idle port may sleep
	 * longer than an engine (only device code's send doorbells wait for it) */
	p->sleep_ns = (uint64_t)KT(ETH_SLEEP_US) * 1000ull;
	pthread_mutex_init(&p->lock, NULL);
	if (p->drv->ring_drops)
		p->ring_base = p->drv->ring_drops(p, NULL);
	if (!p->scratch || pthread_create(&p->th, NULL, port_main, p)) {
		free(p->scratch);
		p->drv->close(p);
		pthread_mutex_destroy(&p->lock);
		return -ENOMEM;
	}
	kinet_thread_name(p->th, "kn-eth-%s", pp->info.ifname);
	p->started = true;
	return 0;
}

void soft_eth_port_close(kinet_eth_port *pp)
{
	struct soft_eth_port *p = seth_port(pp);
	if (p->started) {
		atomic_store(&p->stop, true);
		pthread_join(p->th, NULL);
	}
	p->drv->close(p);
	pthread_mutex_destroy(&p->lock);
	free(p->scratch);
	free(p->txqs);
}

int soft_eth_port_time(kinet_eth_port *pp, uint64_t *ns)
{
	(void)pp;
	*ns = soft_eth_now();
	return 0;
}

/* ---- send queues ------------------------------------------------------------------ */

static void txq_free_queues(struct soft_eth_txq *q)
{
	kinet_qp *qp = &q->t.q;
	kinet_queue_free(qp->sq, (size_t)qp->sq_cnt * KN_SEND_WQE_BB);
	kinet_queue_free(q->dbr_page, 4096);
	kinet_queue_free(q->uar, KN_UAR_PAGE_SIZE);
	qp->sq = NULL;
	q->dbr_page = q->uar = NULL;
	if (qp->scq) {
		kinet_cq_destroy(qp->scq);
		qp->scq = NULL;
	}
}

int soft_eth_txq_create(kinet_eth_txq *t)
{
	struct soft_eth_txq *q = seth_txq(t);
	kinet_qp *qp = &t->q;
	qp->sq_cnt = qp->attr.sq_depth;
	qp->sq = kinet_queue_alloc((size_t)qp->sq_cnt * KN_SEND_WQE_BB);
	q->dbr_page = kinet_queue_alloc(4096);
	q->uar = kinet_queue_alloc(KN_UAR_PAGE_SIZE);
	int rc = -ENOMEM;
	if (qp->sq && q->dbr_page && q->uar)
		rc = kinet_cq_create(qp->ctx, qp->sq_cnt, &qp->scq);
	if (rc) {
		txq_free_queues(q);
		return rc;
	}
	qp->dbrec = q->dbr_page;
	qp->db = q->uar + KN_BF_OFFSET;
	qp->cpu_pi = qp->dbrec + 4;
	qp->qpn = atomic_fetch_add(&next_qn, 1) & 0xffffff;
	qp->flags = 0; /* the port thread takes the record or the register */
	return 0;
}

int soft_eth_txq_start(kinet_eth_txq *t)
{
	struct soft_eth_txq *q = seth_txq(t);
	struct soft_eth_port *p = seth_port(t->port);
	pthread_mutex_lock(&p->lock);
	if (p->ntxq == p->txcap) {
		int ncap = p->txcap ? p->txcap * 2 : 8;
		struct soft_eth_txq **n = realloc(p->txqs, (size_t)ncap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&p->lock);
			return -ENOMEM;
		}
		p->txqs = n;
		p->txcap = ncap;
	}
	q->idx = p->ntxq;
	p->txqs[p->ntxq++] = q;
	pthread_mutex_unlock(&p->lock);
	kick(p);
	return 0;
}

void soft_eth_txq_destroy(kinet_eth_txq *t)
{
	struct soft_eth_txq *q = seth_txq(t);
	struct soft_eth_port *p = seth_port(t->port);
	pthread_mutex_lock(&p->lock);
	if (q->idx < p->ntxq && p->txqs[q->idx] == q) {
		p->txqs[q->idx] = p->txqs[--p->ntxq];
		p->txqs[q->idx]->idx = q->idx;
	}
	pthread_mutex_unlock(&p->lock);
	txq_free_queues(q);
}

int soft_eth_txq_reset(kinet_eth_txq *t)
{
	struct soft_eth_txq *q = seth_txq(t);
	struct soft_eth_port *p = seth_port(t->port);
	kinet_qp *qp = &t->q;
	pthread_mutex_lock(&p->lock);
	q->ci = 0;
	q->last_db_word = 0;
	q->db_target = q->dbr_seen = q->dbr_target = 0;
	qp->proxy_seen = 0;
	memset((void *)qp->dbrec, 0, 64);
	memset((void *)qp->db, 0, 64);
	atomic_store(&q->ci_pub, 0);
	soft_cq_reset(qp->scq);
	pthread_mutex_unlock(&p->lock);
	kick(p);
	return 0;
}

uint64_t soft_eth_txq_consumed(kinet_eth_txq *t)
{
	return atomic_load(&seth_txq(t)->ci_pub);
}

/* ---- receive queues ---------------------------------------------------------------- */

int soft_eth_rxq_create(kinet_eth_rxq *r)
{
	struct soft_eth_rxq *q = seth_rxq(r);
	kinet_ctx *ctx = r->port->ctx;
	r->wqe_size = r->attr.mode == KINET_ETH_RXQ_STRIDING ? 32 : 16;
	r->wq = kinet_queue_alloc((size_t)r->wqe_cnt * r->wqe_size);
	q->dbr_page = kinet_queue_alloc(4096);
	/* a striding WQE holds many packets: room for a CQE per stride and a
	 * filler per WQE */
	uint64_t cqes = (uint64_t)r->wqe_cnt * (r->strides + (r->strides > 1));
	int rc = -ENOMEM;
	if (r->wq && q->dbr_page)
		rc = kinet_cq_create(ctx, (uint32_t)(cqes > 65536 ? 65536 : cqes), &r->cq);
	if (rc) {
		kinet_queue_free(r->wq, (size_t)r->wqe_cnt * r->wqe_size);
		kinet_queue_free(q->dbr_page, 4096);
		return rc;
	}
	r->dbrec = q->dbr_page;
	r->rqn = atomic_fetch_add(&next_qn, 1) & 0xffffff;
	q->slot = -1;
	return 0;
}

int soft_eth_rxq_start(kinet_eth_rxq *r)
{
	struct soft_eth_rxq *q = seth_rxq(r);
	struct soft_eth_port *p = seth_port(r->port);
	pthread_mutex_lock(&p->lock);
	int slot = -1;
	for (int i = 0; i < ETH_RULE_MAX && slot < 0; i++)
		if (!p->slots[i])
			slot = i;
	if (slot < 0) {
		pthread_mutex_unlock(&p->lock);
		KLOG_ERR("eth port %s: %d receive queues already", p->p.info.ifname, ETH_RULE_MAX);
		return -ENOSPC;
	}
	q->slot = slot;
	int rc = p->drv->rxq_add ? p->drv->rxq_add(p, q) : 0;
	if (rc == 0) {
		if (p->drv->ring_drops)
			q->ring_base = p->drv->ring_drops(p, q);
		p->slots[slot] = q;
	} else {
		q->slot = -1;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

void soft_eth_rxq_destroy(kinet_eth_rxq *r)
{
	struct soft_eth_rxq *q = seth_rxq(r);
	struct soft_eth_port *p = seth_port(r->port);
	pthread_mutex_lock(&p->lock);
	if (q->slot >= 0 && p->slots[q->slot] == q) {
		if (p->drv->rxq_del)
			p->drv->rxq_del(p, q);
		p->slots[q->slot] = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	if (r->cq)
		kinet_cq_destroy(r->cq);
	kinet_queue_free(r->wq, (size_t)r->wqe_cnt * r->wqe_size);
	kinet_queue_free(q->dbr_page, 4096);
	r->cq = NULL;
	r->wq = NULL;
}

/* ---- flows ---------------------------------------------------------------------------- */

/* The rule table from the core's flow list (port->p.lock held by the core). */
static int rules_build(struct soft_eth_port *p)
{
	struct eth_rule rules[ETH_RULE_MAX];
	int n = 0;
	for (kinet_eth_flow *f = p->p.flows; f && n < ETH_RULE_MAX; f = f->next) {
		const struct kinet_eth_match *m = &f->m;
		struct eth_rule *r = &rules[n++];
		memset(r, 0, sizeof(*r));
		r->fields = m->fields;
		r->slot = (uint32_t)seth_rxq(f->rxq)->slot;
		memcpy(r->dst_mac, m->dst_mac, 6);
		r->ethertype = htons(m->ethertype);
		memcpy(r->ip_dst, m->ip_dst, 16);
		r->ip_proto = m->ip_proto;
		r->l4_dst_port = htons(m->l4_dst_port);
	}
	pthread_mutex_lock(&p->lock);
	memcpy(p->rules, rules, (size_t)n * sizeof(rules[0]));
	p->nrules = n;
	int rc = p->drv->rules ? p->drv->rules(p) : 0;
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int soft_eth_flow_create(kinet_eth_flow *f)
{
	return rules_build(seth_port(f->rxq->port));
}

void soft_eth_flow_destroy(kinet_eth_flow *f)
{
	if (rules_build(seth_port(f->rxq->port)))
		KLOG_WARN("eth port %s: the steering table could not be updated",
			  f->rxq->port->info.ifname);
}

/* ---- counters ----------------------------------------------------------------------- */

static void ctr_copy(const struct eth_ctr *c, struct kinet_eth_counters *o)
{
	o->packets = ECTR_GET(c, packets);
	o->bytes = ECTR_GET(c, bytes);
	o->csum_bad = ECTR_GET(c, csum_bad);
	o->no_l3 = ECTR_GET(c, no_l3);
	o->tx_csum = ECTR_GET(c, tx_csum);
	o->tx_waits = ECTR_GET(c, tx_waits);
	o->unmatched = ECTR_GET(c, unmatched);
	for (int i = 0; i < KINET_ETH_DROP_MAX; i++)
		o->drops[i] = ECTR_GET(c, drops[i]);
	for (int i = 0; i < KINET_ETH_TXE_MAX; i++)
		o->tx_errors[i] = ECTR_GET(c, tx_errors[i]);
}

int soft_eth_counters(kinet_eth_port *pp, kinet_eth_txq *t, kinet_eth_rxq *r,
		      struct kinet_eth_counters *out)
{
	struct soft_eth_port *p = seth_port(pp);
	if (t) {
		ctr_copy(&seth_txq(t)->ctr, out);
		return 0;
	}
	pthread_mutex_lock(&p->lock);
	if (r) {
		struct soft_eth_rxq *q = seth_rxq(r);
		ctr_copy(&q->ctr, out);
		if (p->drv->ring_drops && q->slot >= 0)
			out->drops[KINET_ETH_DROP_RING] += p->drv->ring_drops(p, q) - q->ring_base;
	} else {
		ctr_copy(&p->ctr, out);
		if (p->drv->ring_drops)
			out->drops[KINET_ETH_DROP_RING] +=
				p->drv->ring_drops(p, NULL) - p->ring_base;
	}
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/* ---- tests ------------------------------------------------------------------------- */

/* A frame arriving at the port as if its driver had received it (the
 * frames no wire can carry: runts). Internal: tests link kinet_static. */
void kinet_soft_eth_inject(kinet_eth_port *pp, const void *frame, uint32_t len)
{
	struct soft_eth_port *p = seth_port(pp);
	struct soft_ctx *sc = soft_ctx(pp->ctx);
	pthread_mutex_lock(&p->lock);
	pthread_rwlock_rdlock(&sc->keys.lock);
	p->rx_ts = 0;
	soft_eth_rx(p, -1, frame, len);
	pthread_rwlock_unlock(&sc->keys.lock);
	pthread_mutex_unlock(&p->lock);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ep.c - the wire's libfabric endpoint (one per context): creation
 * and destruction, receive buffers and send descriptors, scatter/gather
 * helpers, sending messages, dropping a peer (and making sure the provider
 * let go of it), closing and opening the endpoint again, and polling the CQ
 * (received messages go to the requester's answers or to the target's
 * queue).
 */

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "nic/soft/wire/wire_int.h"
#if KINET_HAVE_FABRIC

/* ---- endpoint ------------------------------------------------------------ */

/* A libfabric return code as the errno it means: libfabric's codes below
 * FI_ERRNO_OFFSET are errno values (FI_ENOMEM is ENOMEM, ...); its own
 * (truncation, no EQ bound, "other" ...) say that the provider is not
 * usable here. */
int wire_errno(int fi_rc)
{
	int e = fi_rc < 0 ? -fi_rc : fi_rc;
	if (e == 0)
		return 0;
	return e < FI_ERRNO_OFFSET ? -e : -ENODEV;
}

static bool reset_safe(const struct kinet_wire *w);

/* Closes the endpoint; its shm region's name is forgotten first (libfabric
 * removes the region at the close; a later one of that name is not ours). */
static void ep_close(struct kinet_wire *w)
{
	if (w->ep) {
		wire_shm_region_del(w->addr, w->addr_len);
		fi_close(&w->ep->fid);
	}
	w->ep = NULL;
}

void wire_destroy(struct kinet_wire *w)
{
	wire_copy_stop(w); /* what it was handed lands first */
	if (w->fab && !reset_safe(w)) {
		/* reads of a silent peer are still with the provider, which cannot
		 * close their connection: the endpoint and what it may still write
		 * into are left as they are (nothing calls into them any more) */
		KLOG_WARN("wire: the endpoint is not closed: reads of a silent peer are still "
			  "with the provider, which cannot close a connection under them "
			  "(libfabric before 1.18)");
		return;
	}
	wire_regs_close(w);
	ep_close(w);
	wire_holds_release(w, -1); /* their keys, before the domain */
	if (w->av)
		fi_close(&w->av->fid);
	if (w->cq)
		fi_close(&w->cq->fid);
	if (w->dom)
		fi_close(&w->dom->fid);
	if (w->fab)
		fi_close(&w->fab->fid);
	if (w->info)
		fi_freeinfo(w->info);
	free(w->rxmem);
	free(w->bigmem);
	free(w->txmem);
	free(w->rdmem);
	for (int i = NRD_ALL; i < w->nrdall; i++) {
		free(w->rdall[i]->buf);
		free(w->rdall[i]);
	}
	free(w->rdall);
	free(w->txall);
	free(w->lregs);
	free(w->mregs);
	free(w->extra_len);
	free(w->holds);
	free(w->fins);
	for (int i = 0; i < w->nextra; i++)
		free(w->extra[i]);
	free(w->extra);
	free(w->qps);
	free(w->peers);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static int post_rx(struct kinet_wire *w, struct rxbuf *rb)
{
	ssize_t rc = fi_recv(w->ep, rb->buf + HOFF, HSZ + CHUNK,
			     wire_ldesc(w, rb->buf + HOFF, HSZ + CHUNK), FI_ADDR_UNSPEC, &rb->fc);
	if (rc == 0)
		return 0;
	if (rc == -FI_EAGAIN) { /* later, from the progress loop */
		rb->next = w->repost;
		w->repost = rb;
		return 0;
	}
	KLOG_ERR("wire: fi_recv: %s", fi_strerror((int)-rc));
	return wire_errno((int)rc);
}

/* A received message is done with: a receive buffer is posted again at the
 * end of the poll or pass (answers go out first), a copy is freed. */
void wire_rx_release(struct kinet_wire *w, struct rxbuf *rb)
{
	if (rb->heap) {
		rb->owner->tq_bytes -= HDR + rb->m.len;
		free(rb->buf);
		free(rb);
		return;
	}
	if (rb->held) {
		rb->held = false;
		w->rx_held--;
	}
	rb->executed = 0;
	rb->off = 0;
	rb->next = w->repost;
	w->repost = rb;
}

void wire_repost(struct kinet_wire *w)
{
	if (!w->ep)
		return;
	while (w->repost) {
		struct rxbuf *rb = w->repost;
		w->repost = rb->next;
		ssize_t rc = fi_recv(w->ep, rb->buf + HOFF, HSZ + CHUNK,
				     wire_ldesc(w, rb->buf + HOFF, HSZ + CHUNK), FI_ADDR_UNSPEC,
				     &rb->fc);
		if (rc) {
			rb->next = w->repost;
			w->repost = rb;
			break;
		}
	}
}

/* The CQ, the address vector and the endpoint, bound and enabled, and our
 * address: at creation, and again after the endpoint was closed (ep_reset:
 * rxm leaves a closed endpoint's wait callback in its CQ, which must go
 * with it). */
static int ep_open_once(struct kinet_wire *w, const char **step)
{
	int rc;
	/* a wait fd lets an idle engine sleep until the network has something;
	 * with it rxm keeps the tcp sockets in an epoll set, and every round
	 * trip costs 2 to 3 us more than without (KINET_NET_CQ_WAIT=none,
	 * libfabric 1.17, docs/perf.md) */
	struct fi_cq_attr cqa = {.size = 4096, .format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_FD};
	*step = "fi_cq_open";
	if (strcmp(KT(NET_CQ_WAIT), "none") && fi_cq_open(w->dom, &cqa, &w->cq, NULL) == 0) {
		if (fi_control(&w->cq->fid, FI_GETWAIT, &w->wait_fd))
			w->wait_fd = -1;
	} else {
		w->wait_fd = -1;
		cqa.wait_obj = FI_WAIT_NONE;
		if ((rc = fi_cq_open(w->dom, &cqa, &w->cq, NULL)))
			return rc;
	}
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	*step = "fi_av_open";
	if ((rc = fi_av_open(w->dom, &ava, &w->av, NULL)))
		return rc;
	w->av_used = 0;
	w->av_full_said = false; /* a new vector: room again */
	*step = "fi_endpoint";
	if ((rc = fi_endpoint(w->dom, w->info, &w->ep, NULL)))
		return rc;
	*step = "fi_ep_bind";
	if ((rc = fi_ep_bind(w->ep, &w->av->fid, 0)) ||
	    (rc = fi_ep_bind(w->ep, &w->cq->fid, FI_TRANSMIT | FI_RECV)))
		return rc;
	*step = "fi_enable";
	if ((rc = fi_enable(w->ep)))
		return rc;
	w->addr_len = sizeof(w->addr);
	*step = "fi_getname";
	if ((rc = fi_getname(&w->ep->fid, w->addr, &w->addr_len)))
		return rc;
	return 0;
}

/* ep_open_once; on shm, with our own name (wire_shm_name), after the regions
 * that ended processes left in /dev/shm are removed (the first time). */
static int ep_open(struct kinet_wire *w, const char **step)
{
	const char *pn = w->info->fabric_attr->prov_name;
	bool shm = pn && !strcmp(pn, "shm");
	if (!shm)
		return ep_open_once(w, step);
	*step = "naming the shm endpoint";
	int rc = wire_shm_name(w->info);
	if (rc)
		return -FI_ENOMEM;
	wire_shm_lock(true);
	char names[512];
	int n = wire_shm_clear_stale(names, sizeof(names));
	if (n)
		KLOG_INFO("wire: removed %d shm region(s) of processes that have ended: %s", n,
			  names);
	rc = ep_open_once(w, step);
	wire_shm_lock(false);
	if (rc == 0)
		wire_shm_region_add(w->addr, w->addr_len); /* removed at exit if still open */
	return rc;
}

/* A boolean of the environment as libfabric reads its parameters (1, 0,
 * true, false, yes, no, on, off): 1, 0, or dflt when unset or not one. */
static int env_bool(const char *name, int dflt)
{
	const char *v = getenv(name);
	if (!v)
		return dflt;
	if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
	    !strcasecmp(v, "on"))
		return 1;
	if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
	    !strcasecmp(v, "off"))
		return 0;
	return dflt;
}

/* fi_getinfo for the provider, with RMA when it has it, with HMEM when
 * asked. Every registration mode the wire handles is offered: local
 * descriptors (its own buffers are registered, FI_MR_LOCAL), allocated
 * memory only (all it registers is), keys and addresses as the provider
 * wants them, regions bound to the endpoint; a provider clears those it
 * does not need. */
static int wire_info(struct kinet_wire *w, bool rma, bool hmem)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->caps = FI_MSG | (rma ? FI_RMA : 0) | (hmem ? FI_HMEM : 0);
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED |
				      (rma ? FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ENDPOINT : 0) |
				      (hmem ? FI_MR_HMEM : 0);
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	hints->fabric_attr->prov_name = strdup(w->prov);
	/* 1.10: the first with FI_HMEM and the iface of fi_mr_attr */
	int rc = fi_getinfo(hmem ? FI_VERSION(1, 10) : FI_VERSION(1, 9), NULL, NULL, 0, hints,
			    &w->info);
	fi_freeinfo(hints);
	if (rc)
		w->info = NULL;
	return rc;
}

/* fi_getinfo without FI_HMEM: with RMA where the provider has it, else
 * messages only (every write goes eager). */
static int wire_info_plain(struct kinet_wire *w)
{
	int rc = wire_info(w, true, false);
	w->rma = rc == 0;
	if (rc)
		rc = wire_info(w, false, false);
	return rc;
}

/* A wire over provider prov. sh: the same-host wire, which the context can
 * do without: its provider being absent is no error (logged at info). */
static int wire_create(kinet_ctx *ctx, const char *prov, bool sh, struct kinet_wire **out)
{
	struct kinet_wire *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ctx = ctx;
	w->wait_fd = -1;
	w->same_host = sh;
	pthread_mutex_init(&w->lock, NULL);
	snprintf(w->prov, sizeof(w->prov), "%s", prov);
	long long tmo = (long long)KT(NET_TIMEOUT_MS);
	w->timeout_ns = (uint64_t)(tmo > 0 ? tmo : 5000) * 1000000ull;
	long long rnr = (long long)KT(RNR_TIMER_US);
	w->rnr_ns = (uint64_t)(rnr > 0 ? rnr : 1) * 1000ull;
	w->ka_ns = w->timeout_ns / 4;
	if (w->ka_ns > 200000000ull)
		w->ka_ns = 200000000ull;
	long long rb = (long long)KT(NET_RNDV_BYTES);
	w->rndv_min = rb > 0 ? (uint64_t)rb : 0;
	wire_copy_setup(w);
	uint64_t salt = 0;
	if (getrandom(&salt, sizeof(salt), 0) != (ssize_t)sizeof(salt))
		salt = kn_now_ns();
	w->next_key = (salt << 20) | 1; /* keys of one process are not guessed by chance */

	/* what libfabric read when it initialised (wire.c sets it when the
	 * library is loaded, unless the environment says otherwise) */
	w->av_cleanup = env_bool("FI_AV_REMOVE_CLEANUP", 0) == 1;
	/* libfabric before 1.18: its tcp provider completes twice a read whose
	 * answer is half received when its connection closes (fixed upstream in
	 * 1.18, commit a74ea0f): no connection is closed under a read there */
	w->close_safe = fi_version() >= FI_VERSION(1, 18);
	/* GPU memory registered with the provider: asked for where a GPU is
	 * (KINET_FI_HMEM=auto) or always (on); a provider without it is used
	 * without it (GPU payloads are staged, and kinet_wire_info says why).
	 * Off unless asked: the provider's own CUDA copies (libfabric's shm)
	 * run on the legacy default stream, which waits for every kernel of a
	 * blocking stream, so a kernel there that waits for the network would
	 * never end (docs/architecture.md) */
	/* (by name: FI_HMEM and FI_MR_LOCAL are libfabric's macros) */
	const char *hm = kinet_tunable_str("KINET_FI_HMEM");
	bool want_hmem = !strcmp(hm, "on") || (!strcmp(hm, "auto") && kinet_cuda_load());
	int rc = -FI_ENODATA;
	if (want_hmem) {
		rc = wire_info(w, true, true);
		w->hmem = w->rma = rc == 0;
		if (rc)
			snprintf(w->hmem_why, sizeof(w->hmem_why),
				 "provider %s offers no FI_HMEM with RMA here", w->prov);
	} else {
		snprintf(w->hmem_why, sizeof(w->hmem_why), "%s",
			 !strcmp(hm, "off") ? "KINET_FI_HMEM=off (auto or on: the provider moves GPU memory where it can)"
					    : "no GPU found (KINET_FI_HMEM=auto)");
	}
	if (rc)
		rc = wire_info_plain(w);
	if (rc) {
		if (sh)
			KLOG_INFO("wire: libfabric provider \"%s\" for peers on this host not "
				  "available: %s", w->prov, fi_strerror(-rc));
		else
			KLOG_ERR("wire: libfabric provider \"%s\" (KINET_FI_PROVIDER) not "
				 "available: %s", w->prov, fi_strerror(-rc));
		wire_destroy(w);
		return rc == -FI_ENODATA ? -ENODEV : wire_errno(rc);
	}
modes:;
	uint64_t mm = w->info->domain_attr->mr_mode;
	w->virt_addr = (mm & FI_MR_VIRT_ADDR) != 0;
	w->prov_key = (mm & FI_MR_PROV_KEY) != 0;
	w->mr_ep = (mm & FI_MR_ENDPOINT) != 0;
	w->mr_local = (mm & FI_MR_LOCAL) != 0 || kinet_tunable_int("KINET_FI_MR_LOCAL") == 1;
	if (mm & FI_MR_RAW) {
		/* keys wider than 64 bits: the descriptor format has no room */
		KLOG_ERR("wire: libfabric provider \"%s\" needs raw memory keys (FI_MR_RAW), "
			 "which the wire cannot carry",
			 w->info->fabric_attr->prov_name);
		wire_destroy(w);
		return -ENOTSUP;
	}
	/* only rxm closes a removed address's connection (with the cleanup);
	 * udp;ofi_rxd, for one, goes on sending from the user's memory: there
	 * only closing the endpoint is sure */
	const char *pn = w->info->fabric_attr->prov_name;
	if (w->av_cleanup && (!pn || !strstr(pn, "ofi_rxm")))
		w->av_cleanup = false;
	/* providers with a connection per peer: a message to a dropped peer is
	 * queued on it or fails at once on a broken one. Without (shm, rxd), a
	 * send reaches into the peer's own queue: shm spins on the lock of a
	 * peer that died holding it, for ever (libfabric 1.17 to 1.20) */
	w->conn = pn && (strstr(pn, "ofi_rxm") || !strcmp(pn, "sockets") || !strcmp(pn, "net") ||
			 !strcmp(pn, "tcp"));
	w->inject = w->info->tx_attr->inject_size;
	w->iov_limit = w->info->tx_attr->iov_limit;
	if (w->iov_limit > TX_IOV + 1)
		w->iov_limit = TX_IOV + 1; /* header + pieces of a send from user memory */
	const char *step = "fi_fabric";
	if ((rc = fi_fabric(w->info->fabric_attr, &w->fab, NULL)))
		goto fail;
	step = "fi_domain";
	if ((rc = fi_domain(w->fab, w->info, &w->dom, NULL)))
		goto fail;
	if (w->hmem && !wire_hmem_probe(w)) {
		/* an endpoint with FI_HMEM that cannot take GPU memory is only
		 * worse (shm turns its CMA path off for it): without */
		fi_close(&w->dom->fid);
		fi_close(&w->fab->fid);
		w->dom = NULL;
		w->fab = NULL;
		fi_freeinfo(w->info);
		w->info = NULL;
		w->hmem = false;
		if ((rc = wire_info_plain(w))) {
			KLOG_ERR("wire: libfabric provider \"%s\": %s", w->prov, fi_strerror(-rc));
			wire_destroy(w);
			return rc == -FI_ENODATA ? -ENODEV : wire_errno(rc);
		}
		goto modes;
	}
	if ((rc = ep_open(w, &step)))
		goto fail;
	/* buffers */
	w->rxmem = malloc((size_t)NRX * (HDR + CHUNK));
	w->bigmem = malloc((size_t)NBIG * (HDR + CHUNK));
	w->txmem = calloc(NTX, sizeof(struct txd));
	w->ntxall = NTX;
	w->txall = calloc(NTX, sizeof(*w->txall));
	if (!w->rxmem || !w->bigmem || !w->txmem || !w->txall) {
		wire_destroy(w);
		return -ENOMEM;
	}
	for (int i = 0; i < NBIG; i++)
		w->bigfree[w->nbig++] = w->bigmem + (size_t)i * (HDR + CHUNK);
	struct txd *td = (struct txd *)w->txmem;
	for (int i = NTX - 1; i >= 0; i--) {
		td[i].kind = CTX_TX;
		td[i].next = w->txfree;
		w->txfree = &td[i];
		w->txall[i] = &td[i];
	}
	if (!wire_rd_init(w)) {
		wire_destroy(w);
		return -ENOMEM;
	}
	if (!wire_lregs_open(w)) {
		rc = w->lreg_rc ? wire_errno(w->lreg_rc) : -ENOMEM; /* the provider's, or no memory */
		wire_destroy(w);
		return rc;
	}
	for (int i = 0; i < NRX; i++) {
		w->rx[i].kind = CTX_RX;
		w->rx[i].buf = w->rxmem + (size_t)i * (HDR + CHUNK);
		if ((rc = post_rx(w, &w->rx[i]))) {
			wire_destroy(w);
			return rc;
		}
	}
	KLOG_INFO("wire%s: provider %s, fabric %s, domain %s, %s, %s, %s, %s, %s",
		  sh ? " (peers on this host)" : "", w->info->fabric_attr->prov_name,
		  w->info->fabric_attr->name, w->info->domain_attr->name,
		  w->rma ? "rendezvous writes" : "messages only",
		  w->mr_local ? "local descriptors" : "no local descriptors",
		  w->hmem ? "FI_HMEM" : "GPU memory staged",
		  w->wait_fd >= 0 ? "wait fd" : "no wait fd",
		  w->av_cleanup ? "connections can be closed"
				: "FI_AV_REMOVE_CLEANUP off: only the endpoint can be closed");
	*out = w;
	return 0;
fail:
	KLOG_ERR("wire: %s: %s", step, fi_strerror(-rc));
	wire_destroy(w);
	return wire_errno(rc);
}

/* The same-host wire of a context whose network wire was just created:
 * shm, unless KINET_FI_PROVIDER names the provider for every peer, or
 * KINET_FI_SAME_HOST=off. Where it cannot be had, sh_why says why. */
static void wire_sh_create(kinet_ctx *ctx, const struct kinet_wire *net)
{
	struct soft_ctx *sc = soft_ctx(ctx);
	const struct kinet_tunable *fp = kinet_tunable_at(KT_ID_FI_PROVIDER);
	if (fp && (fp->flags & KINET_TUNABLE_SET)) {
		snprintf(sc->sh_why, sizeof(sc->sh_why),
			 "KINET_FI_PROVIDER is set: every peer is reached over %s", net->prov);
		return;
	}
	if (!strcmp(KT(FI_SAME_HOST), "off")) {
		snprintf(sc->sh_why, sizeof(sc->sh_why),
			 "KINET_FI_SAME_HOST=off: peers on this host are reached over %s",
			 net->prov);
		return;
	}
	int rc = wire_create(ctx, "shm", true, &sc->wire_sh);
	if (rc) {
		sc->wire_sh = NULL;
		/* shm's region lives in /dev/shm: say so where that is nearly full */
		char room[64] = "";
		struct statvfs vf;
		if (statvfs("/dev/shm", &vf) == 0 &&
		    (uint64_t)vf.f_bavail * vf.f_frsize < (64ull << 20))
			snprintf(room, sizeof(room), "; /dev/shm has %llu MiB free",
				 (unsigned long long)((uint64_t)vf.f_bavail * vf.f_frsize >> 20));
		snprintf(sc->sh_why, sizeof(sc->sh_why),
			 "shm could not be opened (%s%s): peers on this host go over %s",
			 kinet_strerror(rc), room, net->prov);
	} else {
		snprintf(sc->sh_why, sizeof(sc->sh_why),
			 "peers in other processes of this host (same boot, user and "
			 "namespaces) are reached over shm");
	}
}

/* The context's wire, created on first use (with its same-host wire). */
int wire_get(kinet_ctx *ctx, struct kinet_wire **out)
{
	if (ctx->backend != KINET_BACKEND_SOFT || !soft_ctx(ctx)->nic)
		return -ENOTSUP;
	pthread_mutex_lock(&ctx->lock);
	int rc = 0;
	if (!soft_ctx(ctx)->wire) {
		const char *prov = KT(FI_PROVIDER);
		struct kinet_wire *w = NULL;
		rc = wire_create(ctx, prov && *prov ? prov : "tcp;ofi_rxm", false, &w);
		if (rc == 0) {
			wire_sh_create(ctx, w);
			/* published after the same-host wire: whoever sees it sees both */
			__atomic_store_n(&soft_ctx(ctx)->wire, w, __ATOMIC_RELEASE);
		}
	}
	*out = soft_ctx(ctx)->wire;
	pthread_mutex_unlock(&ctx->lock);
	return rc;
}

/* A dropped peer's address leaves the address vector. Not on shm: there
 * the removal unmaps the peer's region while the responses of sends still
 * in flight to it point into it, and the next progress reads them (a crash
 * in libfabric 1.17); it would close nothing anyway (no cleanup there: the
 * endpoint is closed instead, wire_settle). */
static void av_remove(struct kinet_wire *w, struct wpeer *p)
{
	const char *pn = w->info->fabric_attr->prov_name;
	if (pn && !strcmp(pn, "shm"))
		return;
	if (fi_av_remove(w->av, &p->fa, 1, 0) == 0)
		w->av_used--;
}

/* Closes the provider's connection to a dropped peer, to make it let go of
 * memory it still uses for it (kinet_wire_mr_gone): its address leaves the
 * address vector, which with FI_AV_REMOVE_CLEANUP closes the connection
 * and cancels every transfer on it (wire_settle checks). Not while a read
 * of it may be half answered where the provider cannot close under one
 * (close_safe): then once its given-up reads have ended. false: not now. */
bool wire_close_peer(struct kinet_wire *w, int idx)
{
	struct wpeer *p = &w->peers[idx];
	if (p->removed)
		return true;
	p->want_close = true;
	if (!w->av)
		return false;
	for (int j = 0; j < w->npeers && !w->close_safe; j++) {
		const struct wpeer *o = &w->peers[j];
		if ((j == idx || (!o->removed && o->fa == p->fa)) && (o->nrd || o->nlost))
			return false;
	}
	p->removed = true;
	p->closed = w->av_cleanup;
	p->settle = true;
	w->drop_check = true;
	KLOG_INFO("wire: peer %d: connection closed", idx);
	av_remove(w, p);
	/* a later connect to the same address took another slot, with the
	 * same address in the vector (it keeps one entry per address, counting
	 * its insertions: each slot removes it once) and so the same
	 * connection: that one is closed too */
	for (int j = 0; j < w->npeers; j++) {
		struct wpeer *o = &w->peers[j];
		if (j == idx || o->removed || o->fa != p->fa)
			continue;
		wire_drop_peer(w, j, "its connection was closed");
		o->removed = true;
		o->closed = p->closed;
		o->settle = true;
		av_remove(w, o);
	}
	return true;
}

static void txd_write_off(struct kinet_wire *w, struct txd *t);
static void txd_unbusy_qp(struct kinet_wire *w, const struct txd *t);

/* Drops a peer: every QP to it fails, its reads are given up (they stay
 * with the provider, their bytes are never used, the key table is let go)
 * and so are its sends (their descriptors and bounce buffers are replaced:
 * a silent peer does not keep the pools every QP needs; the regions they
 * send from stay held until the provider lets go of them). Its connection
 * is left as it is: a peer that only paused (a network cut that heals) gets
 * to it again on the next connect, and closing it would leave that peer
 * with a connection it thinks alive, which refuses ours. */
void wire_drop_peer(struct kinet_wire *w, int idx, const char *why)
{
	struct wpeer *p = &w->peers[idx];
	if (p->dead)
		return;
	p->dead = true;
	KLOG_INFO("wire: peer %d dropped (%s)", idx, why);
	wire_rd_give_up(w, idx);
	for (int k = 0; k < w->ntxall; k++)
		if (w->txall[k]->busy && w->txall[k]->what != TX_LOST && w->txall[k]->peer == idx)
			txd_write_off(w, w->txall[k]);
}

/* A given-up read of peer idx has ended after all. */
void wire_lost_done(struct kinet_wire *w, int idx)
{
	struct wpeer *p = &w->peers[idx];
	if (p->nlost && --p->nlost == 0 && p->want_close)
		wire_close_peer(w, idx);
}

/* A replacement buffer (room reserved in w->extra): kept until the wire
 * is destroyed, registered for local descriptors. */
static void extra_add(struct kinet_wire *w, void *p, size_t n)
{
	w->extra_len[w->nextra] = n;
	w->extra[w->nextra++] = p;
	if (!wire_lreg_add(w, p, n))
		KLOG_WARN("wire: a replacement buffer has no local descriptor: operations on it "
			  "fail");
}

/* Takes a send of a dropped peer, which the provider may never complete,
 * out of the pool (a late completion puts it back) and puts a new one in
 * its place. The regions it sends from stay held (t->mr) until then or
 * until its connection is closed. */
static void txd_write_off(struct kinet_wire *w, struct txd *t)
{
	if (t->peer >= 0 && t->peer < w->npeers)
		w->peers[t->peer].nbusy--;
	txd_unbusy_qp(w, t);
	t->fence = t->what == TX_FENCE;
	t->what = TX_LOST;
	struct txd *n = calloc(1, sizeof(*n));
	struct txd **all = n ? realloc(w->txall, (size_t)(w->ntxall + 1) * sizeof(*all)) : NULL;
	void **ex = all ? realloc(w->extra, (size_t)(w->nextra + 2) * sizeof(*ex)) : NULL;
	if (all)
		w->txall = all;
	if (ex)
		w->extra = ex;
	size_t *el = ex ? realloc(w->extra_len, (size_t)(w->nextra + 2) * sizeof(*el)) : NULL;
	if (el)
		w->extra_len = el;
	if (!el) {
		free(n);
		return; /* the pool is one smaller */
	}
	n->kind = CTX_TX;
	w->txall[w->ntxall++] = n;
	extra_add(w, n, sizeof(*n));
	n->next = w->txfree;
	w->txfree = n;
	if (t->big) {
		/* its bounce buffer stays with it: another one for the pool */
		uint8_t *b = malloc(HDR + CHUNK);
		if (b) {
			extra_add(w, b, HDR + CHUNK);
			w->bigfree[w->nbig++] = b;
		}
	}
}

/* May the whole endpoint be closed now? Not with a read answer possibly
 * half received where the provider cannot close under one. */
static bool reset_safe(const struct kinet_wire *w)
{
	if (w->close_safe)
		return true;
	if (atomic_load(&w->rd_inflight) > 0)
		return false;
	for (int i = 0; i < w->npeers; i++)
		if (w->peers[i].nlost)
			return false;
	return true;
}

/* Closes the endpoint and opens a new one: every transfer ends with it
 * (the provider closes every connection), whatever it kept. Every QP of the
 * context fails; the context's address changes. For a provider that does
 * not close a removed address's connection (FI_AV_REMOVE_CLEANUP off), and
 * for an address vector that refuses addresses it should take. */
static void ep_reset(struct kinet_wire *w)
{
	w->reset_due = false;
	w->nresets++;
	KLOG_WARN("wire: closing the endpoint and opening a new one (%s): every QP of this "
		  "context fails and its descriptors must be exported again",
		  w->av_cleanup ? "its address vector refuses addresses"
				: "a dropped peer keeps memory and the provider does not close its "
				  "connection: FI_AV_REMOVE_CLEANUP is off");
	for (int i = 0; i < w->nqps; i++) {
		struct wire_qp *wq = w->qps[i];
		if (wq->connected && wq->head != wq->tail)
			wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, false);
		wire_tq_drop(w, wq);
	}
	for (int i = 0; i < w->npeers; i++) {
		w->peers[i].dead = w->peers[i].removed = w->peers[i].closed = true;
		w->peers[i].settle = w->peers[i].want_close = false;
	}
	wire_regs_close(w);
	ep_close(w);
	/* what the close cancelled: nothing of it is used any more */
	for (int n = 0; n < 100000; n++) {
		struct fi_cq_msg_entry ce[16];
		ssize_t k = fi_cq_read(w->cq, ce, 16);
		if (k == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(w->cq, &err, 0) <= 0)
				break;
			continue;
		}
		if (k <= 0)
			break;
	}
	/* whatever is still in flight never completes now */
	for (int i = 0; i < w->nrdall; i++)
		if (w->rdall[i]->busy)
			wire_rd_done(w, w->rdall[i], false);
	for (int i = 0; i < w->ntxall; i++) {
		struct txd *t = w->txall[i];
		if (t->what == TX_LOST) {
			t->what = TX_PLAIN;
			t->busy = false;
			t->nmr = 0;
			t->big = NULL; /* replaced already */
			t->next = w->txfree;
			w->txfree = t;
		} else if (t->busy) {
			wire_txd_put(w, t);
		}
	}
	wire_holds_release(w, -1);
	for (int i = 0; i < w->npeers; i++)
		w->peers[i].nbusy = w->peers[i].nrd = 0;
	w->repost = NULL;
	w->rx_held = 0;
	for (int i = NRX - 1; i >= 0; i--) {
		w->rx[i].held = false;
		w->rx[i].executed = 0;
		w->rx[i].off = 0;
		w->rx[i].next = w->repost;
		w->repost = &w->rx[i];
	}
	if (w->av)
		fi_close(&w->av->fid);
	w->av = NULL;
	if (w->cq)
		fi_close(&w->cq->fid);
	w->cq = NULL;
	w->wait_fd = -1;
	const char *step;
	int rc = ep_open(w, &step);
	if (rc == 0 && !wire_lregs_open(w)) {
		step = "local descriptors";
		rc = -FI_ENOMEM;
	}
	if (rc) {
		KLOG_ERR("wire: %s: %s: the endpoint stays closed", step, fi_strerror(-rc));
		wire_regs_close(w);
		ep_close(w);
		return;
	}
	wire_repost(w);
}

/* Where no poll of the CQ is under way (the caller holds the lock): checks
 * that the provider let go of the peers removed since the last call, and
 * closes and opens the endpoint again when that is due. A closed
 * connection's reads and most sends come back cancelled; a send the
 * provider will never complete (nothing can reach its memory any more) is
 * written off, and the peer's holds are released. A peer removed without
 * the cleanup keeps what the provider does for it: only closing the
 * endpoint ends that. */
void wire_settle(struct kinet_wire *w)
{
	if (w->drop_check) {
		w->drop_check = false;
		for (int i = 0; i < 64 && wire_poll_cq(w) > 0; i++)
			;
		for (int i = 0; i < w->npeers; i++) {
			struct wpeer *p = &w->peers[i];
			if (!p->settle)
				continue;
			p->settle = false;
			if (p->closed) {
				if (p->nrd) {
					/* a read that was not cancelled: the connection is
					 * not closed after all */
					KLOG_WARN("wire: peer %d: reads still in flight after "
						  "its connection was closed "
						  "(FI_AV_REMOVE_CLEANUP not in effect?)", i);
					w->av_cleanup = false;
					p->closed = false;
				} else {
					/* nothing can reach its sends' memory any more */
					for (int k = 0; k < w->ntxall; k++) {
						struct txd *t = w->txall[k];
						if (t->busy && t->peer == i && t->what != TX_LOST)
							txd_write_off(w, t);
						if (t->busy && t->peer == i)
							t->nmr = 0;
					}
					wire_holds_release(w, i);
					continue;
				}
			}
			bool sends = p->nbusy > 0;
			for (int k = 0; k < w->ntxall && !sends; k++)
				sends = w->txall[k]->busy && w->txall[k]->peer == i;
			if (sends || wire_holds_peer(w, i))
				w->reset_due = true;
		}
	}
	if (w->reset_due && reset_safe(w))
		ep_reset(w);
}

/* Does the provider still hold mr (a send straight from it, a rendezvous
 * source) and for which peer? */
bool wire_mr_held(const struct kinet_wire *w, const kinet_mr *mr, int *peer)
{
	return wire_txd_uses(w, mr, peer) || wire_holds_mr(w, mr, peer);
}

/* Can the provider be made to let go of what it holds for peer idx (its
 * connection closed, or the endpoint)? */
bool wire_peer_releasable(const struct kinet_wire *w, int idx)
{
	const struct wpeer *p = &w->peers[idx];
	return p->closed || w->close_safe || (p->nrd == 0 && p->nlost == 0) || reset_safe(w);
}

/* ---- small pools --------------------------------------------------------- */

struct txd *wire_txd_get(struct kinet_wire *w, const struct wire_qp *wq)
{
	struct txd *t = w->txfree;
	if (!t)
		return NULL;
	w->txfree = t->next;
	t->next = NULL;
	t->big = NULL;
	t->busy = false;
	t->what = TX_PLAIN;
	t->nmr = 0;
	t->peer = wq->peer;
	t->qpn = wq->qp->qpn;
	t->gen = wq->gen;
	return t;
}

/* Marks a descriptor as handed to the provider (fi_send* succeeded) for
 * wq, which has one more in flight. */
void wire_txd_busy(struct kinet_wire *w, struct wire_qp *wq, struct txd *t)
{
	t->busy = true;
	if (t->peer >= 0)
		w->peers[t->peer].nbusy++;
	wq->ntxd++;
}

/* The QP that sent t has one descriptor fewer in flight. */
static void txd_unbusy_qp(struct kinet_wire *w, const struct txd *t)
{
	struct wire_qp *wq = wire_wq_find(w, t->qpn);
	if (wq && wq->gen == t->gen && wq->ntxd)
		wq->ntxd--;
}

void wire_txd_put(struct kinet_wire *w, struct txd *t)
{
	if (t->busy && t->peer >= 0 && t->peer < w->npeers)
		w->peers[t->peer].nbusy--;
	t->busy = false;
	t->nmr = 0;
	if (t->big)
		w->bigfree[w->nbig++] = t->big;
	t->big = NULL;
	t->next = w->txfree;
	w->txfree = t;
}

bool wire_txd_uses(const struct kinet_wire *w, const kinet_mr *mr, int *peer)
{
	for (int i = 0; i < w->ntxall; i++) {
		const struct txd *t = w->txall[i];
		if (!t->busy || (t->what != TX_DIRECT && t->what != TX_LOST))
			continue;
		for (int k = 0; k < t->nmr; k++)
			if (t->mr[k] == mr) {
				*peer = t->peer;
				return true;
			}
	}
	return false;
}

struct wire_qp *wire_wq_find(struct kinet_wire *w, uint32_t qpn)
{
	for (int i = 0; i < w->nqps; i++)
		if (w->qps[i]->qp->qpn == qpn)
			return w->qps[i];
	return NULL;
}

/* ---- scatter/gather helpers -------------------------------------------- */

/* Pieces of [off, off+n) of a list; -1 when more than max are needed. */
int wire_iov_slice(const struct soft_iov *iov, int niov, uint64_t off, uint64_t n,
		   struct soft_iov *out, int max)
{
	int k = 0;
	for (int i = 0; i < niov && n > 0; i++) {
		if (off >= iov[i].len) {
			off -= iov[i].len;
			continue;
		}
		uint64_t take = iov[i].len - off;
		if (take > n)
			take = n;
		if (k == max)
			return -1;
		out[k].ptr = iov[i].ptr + off;
		out[k].len = take;
		out[k].kind = iov[i].kind;
		out[k].mr = iov[i].mr;
		k++;
		n -= take;
		off = 0;
	}
	return n ? -1 : k;
}

uint64_t wire_gpu_bytes(const struct soft_iov *iov, int n)
{
	uint64_t b = 0;
	for (int i = 0; i < n; i++)
		if (iov[i].kind != KINET_MEM_HOST)
			b += iov[i].len;
	return b;
}

/* ---- sending --------------------------------------------------------------- */

/* A message of header and n payload bytes (host memory) that fits the
 * provider's inject size: no completion, no buffer. 0, -EAGAIN, -ECONNRESET. */
static int send_inject(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
		       const void *data, uint32_t n)
{
	if (w->peers[wq->peer].dead || !w->ep)
		return -ECONNRESET;
	uint8_t b[SMALL];
	m->len = n;
	wire_enc(b, m);
	if (n)
		memcpy(b + HSZ, data, n);
	ssize_t rc = fi_inject(w->ep, b, HSZ + n, wire_peer_fa(w, wq));
	if (rc == -FI_EAGAIN)
		return -EAGAIN;
	if (rc) {
		KLOG_DBG("wire: send to qp 0x%x: %s", wq->peer_qpn, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	wq->last_tx_ns = kn_now_ns();
	return 0;
}

/* A header-only message with a send descriptor (a completion). */
static int send_ctrl_txd(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m)
{
	const struct wpeer *p = &w->peers[wq->peer];
	if (p->dead || p->removed || !w->ep)
		return -ECONNRESET;
	struct txd *t = wire_txd_get(w, wq);
	if (!t)
		return -EAGAIN;
	m->len = 0;
	wire_enc(t->small, m);
	ssize_t rc = fi_send(w->ep, t->small, HSZ, wire_ldesc(w, t->small, HSZ), wire_peer_fa(w, wq),
			     &t->fc);
	if (rc)
		wire_txd_put(w, t);
	if (rc == -FI_EAGAIN)
		return -EAGAIN;
	if (rc) {
		KLOG_DBG("wire: send to qp 0x%x: %s", wq->peer_qpn, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	wire_txd_busy(w, wq, t);
	wq->last_tx_ns = kn_now_ns();
	return 0;
}

/* A header-only control message. */
int wire_send_ctrl(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m)
{
	if (HSZ <= w->inject)
		return send_inject(w, wq, m, NULL, 0);
	return send_ctrl_txd(w, wq, m);
}

/* A header-only message to peer idx, of no QP of ours (the holds, F_RDFIN):
 * where the provider has connections (w->conn) it also goes to a dropped
 * peer whose connection is still there (it fails at once on a broken one);
 * elsewhere a dropped peer gets nothing (-ECONNRESET: its holds wait for
 * the endpoint to close, wire_settle). TX_FENCE: a fence, id, with a
 * completion (wire_fence_done once it is out); TX_PLAIN: injected when it
 * fits. 0, -EAGAIN or -ECONNRESET. */
int wire_send_peer(struct kinet_wire *w, int idx, struct wmsg *m, uint8_t what, uint32_t id)
{
	const struct wpeer *p = &w->peers[idx];
	if (p->removed || !w->ep || (p->dead && !w->conn))
		return -ECONNRESET;
	m->len = 0;
	ssize_t rc;
	if (what == TX_PLAIN && HSZ <= w->inject) {
		uint8_t b[HSZ];
		wire_enc(b, m);
		rc = fi_inject(w->ep, b, HSZ, p->fa);
	} else {
		struct txd *t = w->txfree;
		if (!t)
			return -EAGAIN;
		w->txfree = t->next;
		t->next = NULL;
		t->big = NULL;
		t->nmr = 0;
		t->peer = idx;
		t->qpn = t->gen = 0; /* of no QP */
		wire_enc(t->small, m);
		rc = fi_send(w->ep, t->small, HSZ, wire_ldesc(w, t->small, HSZ), p->fa, &t->fc);
		if (rc) {
			t->busy = false;
			wire_txd_put(w, t);
		} else {
			t->what = what;
			t->seq = id;
			t->busy = true;
			w->peers[idx].nbusy++;
		}
	}
	if (rc == -FI_EAGAIN)
		return -EAGAIN;
	if (rc) {
		KLOG_DBG("wire: send to peer %d: %s", idx, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	return 0;
}

/* A message with a payload of n bytes taken from data[] (any memory kind):
 * inject when small, straight from host memory when the pieces allow it,
 * otherwise through a bounce buffer. 0, -EAGAIN (no resources now),
 * -EFAULT (local copy failed) or -ECONNRESET. */
int wire_send_data(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
		   const struct soft_iov *data, int nd, uint64_t n)
{
	if (w->peers[wq->peer].dead || !w->ep)
		return -ECONNRESET;
	m->len = (uint32_t)n;
	if (HSZ + n <= w->inject && HSZ + n <= SMALL) {
		uint8_t b[SMALL];
		struct soft_iov dst = {b, n, KINET_MEM_HOST, NULL};
		if (n && soft_copy_iov(&dst, 1, data, nd, n))
			return -EFAULT;
		uint64_t g = wire_gpu_bytes(data, nd);
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		return send_inject(w, wq, m, b, (uint32_t)n);
	}
	/* one QP does not take every descriptor (a silent peer's queued sends
	 * would starve the others): at most TXQ_MAX in flight each */
	if (wq->ntxd >= TXQ_MAX)
		return -EAGAIN;
	struct txd *t = wire_txd_get(w, wq);
	if (!t)
		return -EAGAIN;
	wire_enc(t->small + HOFF, m);
	ssize_t rc;
	uint64_t g = wire_gpu_bytes(data, nd);
	/* straight from user memory: host memory, and GPU memory the provider
	 * took (FI_HMEM); with local descriptors, regions registered with it
	 * (the region of a piece is alive: deregistration fails this request
	 * under the wire's lock before it returns) */
	bool direct = n > SMALL - HDR && nd >= 1 && (size_t)nd + 1 <= w->iov_limit &&
		      m->type == M_REQ;
	void *desc[TX_IOV + 1];
	for (int i = 0; direct && i < nd; i++) {
		desc[i + 1] = NULL;
		if (data[i].kind != KINET_MEM_HOST || w->mr_local) {
			struct wmreg *mg = data[i].mr ? wire_mr_desc(w, data[i].mr) : NULL;
			if (!mg || (data[i].kind != KINET_MEM_HOST) != (mg->mr->kind == KINET_MEM_CUDA))
				direct = false;
			else
				desc[i + 1] = mg->desc;
		}
	}
	if (direct) {
		struct iovec iov[TX_IOV + 1];
		iov[0].iov_base = t->small + HOFF;
		iov[0].iov_len = HSZ;
		desc[0] = wire_ldesc(w, t->small + HOFF, HSZ);
		for (int i = 0; i < nd; i++) {
			iov[i + 1].iov_base = data[i].ptr;
			iov[i + 1].iov_len = data[i].len;
		}
		rc = fi_sendv(w->ep, iov, desc, (size_t)nd + 1, wire_peer_fa(w, wq), &t->fc);
		if (rc == 0) {
			atomic_fetch_add(&w->ctx->c_direct, n);
			w->n_hmem_bytes += g;
			/* the provider reads these regions until the completion: the
			 * request does not complete before it, deregistration waits */
			t->what = TX_DIRECT;
			for (int i = 0; i < nd; i++) {
				int k = 0;
				while (k < t->nmr && t->mr[k] != data[i].mr)
					k++;
				if (k == t->nmr && data[i].mr)
					t->mr[t->nmr++] = data[i].mr;
			}
		}
	} else {
		uint8_t *buf = t->small;
		if (HDR + n > SMALL) {
			if (!w->nbig) {
				wire_txd_put(w, t);
				return -EAGAIN;
			}
			t->big = w->bigfree[--w->nbig];
			buf = t->big;
			memcpy(buf + HOFF, t->small + HOFF, HSZ);
		}
		struct soft_iov dst = {buf + HDR, n, KINET_MEM_HOST, NULL};
		if (n && soft_copy_iov(&dst, 1, data, nd, n)) {
			wire_txd_put(w, t);
			return -EFAULT;
		}
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		/* header right before the payload: one contiguous message */
		rc = fi_send(w->ep, buf + HOFF, HSZ + n, wire_ldesc(w, buf + HOFF, HSZ + n),
			     wire_peer_fa(w, wq), &t->fc);
	}
	if (rc) {
		wire_txd_put(w, t);
		if (rc == -FI_EAGAIN)
			return -EAGAIN;
		KLOG_DBG("wire: send to qp 0x%x: %s", wq->peer_qpn, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	wire_txd_busy(w, wq, t);
	wq->last_tx_ns = kn_now_ns();
	return 0;
}

/* ---- receiving -------------------------------------------------------------- */

static void on_rx(struct kinet_wire *w, struct rxbuf *rb, size_t len)
{
	if (len < HSZ)
		goto drop;
	wire_dec(&rb->m, rb->buf + HOFF);
	const struct wmsg *m = &rb->m;
	if (m->len > CHUNK || (size_t)HSZ + m->len != len)
		goto drop; /* malformed */
	if (m->type == M_KA && (m->flags & F_RDFIN)) {
		/* the target reads no more of a requester QP's sources (which
		 * may be gone by now: its holds outlive it) */
		wire_rd_over(w, m);
		goto drop;
	}
	struct wire_qp *wq = wire_wq_find(w, m->dst_qpn);
	if (!wq || m->dst_gen != wq->gen)
		goto drop; /* no such QP (any more): as a NIC, drop */
	if (m->type == M_KA && (m->flags & F_RDREQ)) {
		/* the requester finished requests without our answer: read no
		 * more of them, and say so */
		if (wq->connected && m->src_qpn == wq->peer_qpn && m->src_gen == wq->peer_gen)
			wire_tgt_stop(w, wq, m->seq);
		goto drop;
	}
	if (m->type == M_RESP || m->type == M_KA || m->type == M_ACK) {
		if (wq->connected && m->src_qpn == wq->peer_qpn && m->src_gen == wq->peer_gen) {
			wq->last_rx_ns = kn_now_ns();
			if (m->type == M_ACK)
				wire_on_ack(w, wq, m);
			else if (m->type == M_RESP)
				wire_on_resp(w, wq, m, rb->buf + HDR);
			/* the CQEs go out as soon as the answer is read */
			wire_complete(wq);
		}
		goto drop;
	}
	if (m->type != M_REQ && m->type != M_RTS)
		goto drop;
	/* hook (fault injection, kinet_fault_add): a request dropped, corrupted
	 * or delivered twice (a copy replayed once the target served it) */
	int f = soft_ctx(w->ctx)->faults
			? kinet_soft_fault_rx(wq->qp, m->op, rb->buf + HDR, m->len)
			: 0;
	if (f == 1)
		goto drop;
	if (f == 2 && !wq->dup)
		wq->dup = wire_rx_heap_copy(wq, rb); /* NULL: no memory, no duplicate */
	/* target: keep it, in message order; a duplicate (the network's, or
	 * the one above) goes */
	rb->executed = 0;
	rb->off = 0;
	rb->held = true;
	w->rx_held++;
	if (!wire_tq_insert(wq, rb))
		goto drop;
	return;
drop:
	wire_rx_release(w, rb);
}

static void fail_by_qpn(struct kinet_wire *w, uint32_t qpn, uint32_t gen, const char *why);

/* A send is out (ok) or failed: what waited for it goes on. */
static void tx_done(struct kinet_wire *w, struct txd *t, bool ok, int err)
{
	if (t->what == TX_LOST) {
		/* written off, back after all: a descriptor again (its bounce
		 * buffer was replaced: it stays out of the pool) */
		if (t->fence)
			wire_fence_done(w, t->peer, t->seq);
		t->fence = false;
		t->what = TX_PLAIN;
		t->busy = false;
		t->nmr = 0;
		t->big = NULL;
		t->next = w->txfree;
		w->txfree = t;
		return;
	}
	uint8_t what = t->what;
	uint32_t qpn = t->qpn, gen = t->gen, seq = t->seq;
	int peer = t->peer;
	txd_unbusy_qp(w, t);
	wire_txd_put(w, t);
	if (what == TX_FENCE)
		wire_fence_done(w, peer, seq); /* out, or its connection failed */
	if (!ok)
		fail_by_qpn(w, qpn, gen, fi_strerror(err));
}

static void fail_by_qpn(struct kinet_wire *w, uint32_t qpn, uint32_t gen, const char *why)
{
	struct wire_qp *wq = wire_wq_find(w, qpn);
	if (!wq || wq->gen != gen || !wq->connected)
		return;
	KLOG_INFO("wire: qp 0x%x: send failed (%s)", qpn, why);
	wire_drop_peer(w, wq->peer, why);
	if (wq->head != wq->tail)
		wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, true);
}

static int ctx_kind(void *op_context)
{
	return *(int *)((uint8_t *)op_context + sizeof(struct fi_context));
}

int wire_poll_cq(struct kinet_wire *w)
{
	int work = wire_copy_reap(w); /* reads copied into place meanwhile */
	if (!w->cq)
		return work; /* the endpoint stays closed (ep_reset failed) */
	struct fi_cq_msg_entry ce[16];
	for (int round = 0; round < 8; round++) {
		ssize_t n = fi_cq_read(w->cq, ce, 16);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(w->cq, &err, 0) <= 0)
				break;
			work++;
			if (!err.op_context)
				continue;
			int kind = ctx_kind(err.op_context);
			if (kind == CTX_RX) {
				struct rxbuf *rb = err.op_context;
				if (err.err == FI_ECANCELED)
					continue; /* endpoint closing */
				wire_rx_release(w, rb);
			} else if (kind == CTX_TX) {
				tx_done(w, err.op_context, false, err.err);
			} else if (kind == CTX_RD) {
				KLOG_DBG("wire: read failed: %s", fi_strerror(err.err));
				wire_rd_done(w, err.op_context, false);
			}
			continue;
		}
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			int kind = ctx_kind(ce[i].op_context);
			if (kind == CTX_RX)
				on_rx(w, ce[i].op_context, ce[i].len);
			else if (kind == CTX_RD)
				wire_rd_done(w, ce[i].op_context, true);
			else
				tx_done(w, ce[i].op_context, true, 0);
		}
		work += (int)n;
		if (n < 16)
			break;
	}
	wire_repost(w);
	return work;
}

#endif /* KINET_HAVE_FABRIC */

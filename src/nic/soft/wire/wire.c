/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c - the software NIC's wire to QPs in other processes: a wire's
 * creation (provider, domain, endpoint, buffers; the same-host wire beside
 * the network's) and destruction, the entry points the engine calls
 * (wire.h: posting, progress, the target's pass, deregistration with work
 * in flight, the idle wait), the QP lifecycle (local end, connect, reset,
 * close) and, in a build without libfabric, their stubs. The top of the
 * wire's layers: the protocol and how the files share the work,
 * wire_int.h.
 */

#define _GNU_SOURCE /* ppoll */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <kinet/net.h>
#include "nic/soft/wire/wire_int.h"

#if KINET_HAVE_FABRIC

/* When the provider must be made to let go of memory it still uses for a
 * dropped peer (kinet_mr_dereg of a region it sends from), the wire closes
 * that peer's connection. tcp;ofi_rxm closes the connection of an address
 * removed from the address vector, cancelling what is queued on it, only
 * with FI_AV_REMOVE_CLEANUP, which libfabric reads once, when it
 * initialises. It is set here, when the library is loaded (before main and
 * before anything in the process can initialise libfabric), unless the
 * environment sets it. Without it the whole endpoint is closed instead
 * (wire_settle). */
__attribute__((constructor)) static void wire_env(void)
{
	setenv("FI_AV_REMOVE_CLEANUP", "1", 0);
}

/* ---- a wire: creation and destruction ----------------------------------- */

static void wire_destroy(struct kinet_wire *w)
{
	wire_copy_stop(w); /* what it was handed lands first */
	wire_rd_reap(w);
	wire_copy_free(w);
	if (w->fab && !wire_reset_safe(w)) {
		/* reads of a silent peer are still with the provider, which cannot
		 * close their connection: the endpoint and what it may still write
		 * into are left as they are (nothing calls into them any more) */
		KLOG_WARN("wire: the endpoint is not closed: reads of a silent peer are still "
			  "with the provider, which cannot close a connection under them "
			  "(libfabric before 1.18)");
		return;
	}
	wire_regs_close(w);
	wire_ep_close(w);
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
	for (int i = 0; i < w->npeers; i++)
		if (w->peers[i].pidfd >= 0)
			close(w->peers[i].pidfd);
	free(w->peers);
	pthread_mutex_destroy(&w->lock);
	free(w);
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

/* Appends name to list (cap bytes, ", " between) unless it is there. */
static void name_add(char *list, size_t cap, const char *name)
{
	size_t l = strlen(list), n = strlen(name);
	for (const char *c = list; (c = strstr(c, name)); c += n)
		if ((c == list || c[-1] == ' ') && (c[n] == ',' || c[n] == 0))
			return;
	snprintf(list + l, cap - l, "%s%s", l ? ", " : "", name);
}

/* The providers libfabric has here, for the message of one not found: every
 * one (fi_getinfo without hints) in all, those with what the wire needs
 * (reliable datagram endpoints with messages) in fit. "none" when empty. */
static void providers_found(char *all, size_t acap, char *fit, size_t fcap)
{
	all[0] = fit[0] = 0;
	struct fi_info *list = NULL, *hints = fi_allocinfo();
	if (fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, NULL, &list) == 0) {
		for (struct fi_info *i = list; i; i = i->next)
			if (i->fabric_attr && i->fabric_attr->prov_name)
				name_add(all, acap, i->fabric_attr->prov_name);
		fi_freeinfo(list);
	}
	list = NULL;
	if (hints) {
		hints->caps = FI_MSG;
		hints->mode = FI_CONTEXT;
		hints->ep_attr->type = FI_EP_RDM;
		if (fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &list) == 0) {
			for (struct fi_info *i = list; i; i = i->next)
				if (i->fabric_attr && i->fabric_attr->prov_name)
					name_add(fit, fcap, i->fabric_attr->prov_name);
			fi_freeinfo(list);
		}
		fi_freeinfo(hints);
	}
	if (!all[0])
		snprintf(all, acap, "none");
	if (!fit[0])
		snprintf(fit, fcap, "none");
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

	/* what libfabric read when it initialised (wire_env sets it when the
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
		else if (rc == -FI_ENODATA) {
			/* which names would have done */
			char all[320], fit[320];
			providers_found(all, sizeof(all), fit, sizeof(fit));
			KLOG_ERR("wire: libfabric provider \"%s\" (KINET_FI_PROVIDER) not "
				 "available: %s; libfabric %u.%u here has the providers %s, of "
				 "which these have reliable datagram messages, which the wire "
				 "needs: %s",
				 w->prov, fi_strerror(-rc), FI_MAJOR(fi_version()),
				 FI_MINOR(fi_version()), all, fit);
		} else
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
	if ((rc = wire_ep_open(w, &step)))
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
		if ((rc = wire_post_rx(w, &w->rx[i]))) {
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
static int wire_get(kinet_ctx *ctx, struct kinet_wire **out)
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

/* ---- engine entry points ---------------------------------------------------- */

bool kinet_wire_can_post(kinet_qp *qp)
{
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	return wq && !wq->failed && wq->tail - wq->head < WIN;
}

int kinet_wire_post(kinet_qp *qp, struct soft_req *r)
{
	struct kinet_wire *w = soft_qp(qp)->wire;
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	if (!w || !wq)
		return KN_SYND_TRANSPORT_RETRY_EXC_ERR;
	pthread_mutex_lock(&w->lock);
	struct wreq *e = wire_ent(wq, wq->tail);
	struct soft_req *d = &e->r;
	/* copy what the wire needs; inline data points into r->wqe */
	d->opcode = r->opcode;
	d->signaled = r->signaled;
	d->wqe_idx = r->wqe_idx;
	d->nbb = r->nbb;
	d->raddr = r->raddr;
	d->rkey = r->rkey;
	d->imm = r->imm;
	d->swap_add = r->swap_add;
	d->compare = r->compare;
	d->swap_mask = r->swap_mask;
	d->compare_mask = r->compare_mask;
	d->atomic_size = r->atomic_size;
	d->total = r->total;
	d->niov = r->niov;
	bool inl = false;
	for (int i = 0; i < r->niov; i++) {
		d->iov[i] = r->iov[i];
		if (r->iov[i].ptr >= r->wqe && r->iov[i].ptr < r->wqe + sizeof(r->wqe)) {
			d->iov[i].ptr = d->wqe + (r->iov[i].ptr - r->wqe);
			inl = true;
		}
	}
	if (inl)
		memcpy(d->wqe, r->wqe, (size_t)r->nbb * KN_SEND_WQE_BB);
	e->sent = e->got = 0;
	e->started = false;
	e->fin = false;
	e->done = r->opcode == KN_OPCODE_NOP || r->opcode == KN_OPCODE_DUMP ||
		  r->opcode == KN_OPCODE_WAIT; /* held by the engine until met */
	e->rndv = false;
	e->nmr = 0;
	e->eager = 0;
	e->status = 0;
	e->seq = wq->tail;
	if (wq->failed || wq->cut) {
		e->done = true;
		e->status = KN_SYND_WR_FLUSH_ERR;
	}
	if (wq->head == wq->tail)
		wq->busy_since_ns = kn_now_ns();
	wq->tail++;
	wire_pump(w, wq, true); /* out on this very pass (rendezvous: the next) */
	pthread_mutex_unlock(&w->lock);
	return 0;
}

int kinet_wire_progress(kinet_qp *qp)
{
	struct kinet_wire *w = soft_qp(qp)->wire;
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	if (!w || !wq)
		return 0;
	/* the endpoint itself is polled once per engine pass, by
	 * kinet_wire_ctx_progress, which also writes CQEs as answers arrive */
	if (__atomic_load_n(&wq->head, __ATOMIC_RELAXED) == wq->tail)
		return 0; /* nothing outstanding (only this engine adds to tail) */
	pthread_mutex_lock(&w->lock);
	int work = 0;
	if (atomic_load(&qp->state) == KINET_QPS_ERR && !wq->failed && wq->head != wq->tail) {
		/* moved to ERR from outside: flush what is outstanding */
		wq->failed = true;
		for (uint32_t s = wq->head; s != wq->tail; s++)
			wire_finish(wq, wire_ent(wq, s), KN_SYND_WR_FLUSH_ERR, false);
		wq->txn = wq->tail;
	}
	if (wq->head != wq->tail) {
		if (w->peers[wq->peer].dead) {
			wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, false);
		} else {
			uint64_t ref = wq->last_rx_ns > wq->busy_since_ns ? wq->last_rx_ns
									 : wq->busy_since_ns;
			if (kn_now_ns() - ref > w->timeout_ns && !wq->failed) {
				KLOG_WARN("wire: qp 0x%x: no answer from qp 0x%x for %llu ms",
					  qp->qpn, wq->peer_qpn,
					  (unsigned long long)(w->timeout_ns / 1000000ull));
				wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, true);
			}
		}
	}
	work += wire_pump(w, wq, false);
	work += wire_complete(wq);
	wire_settle(w);
	pthread_mutex_unlock(&w->lock);
	return work;
}

/* ---- status query (endpoint states, per-QP counters: src/nic/soft/backend.c) ---- */

int kinet_wire_qp_status(kinet_qp *qp, struct kinet_wire_status *st)
{
	struct kinet_wire *w = __atomic_load_n(&soft_qp(qp)->wire, __ATOMIC_ACQUIRE);
	memset(st, 0, sizeof(*st));
	if (!w)
		return -ENOENT;
	pthread_mutex_lock(&w->lock);
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	if (!wq || wq->w != w) {
		pthread_mutex_unlock(&w->lock);
		return -ENOENT;
	}
	st->connected = wq->connected;
	st->peer_dead = wq->peer >= 0 && w->peers[wq->peer].dead;
	st->outstanding = wq->tail - wq->head;
	uint64_t ref = wq->last_rx_ns > wq->busy_since_ns ? wq->last_rx_ns : wq->busy_since_ns;
	uint64_t now = kn_now_ns();
	st->silent_ns = st->outstanding && now > ref ? now - ref : 0;
	st->timeout_ns = w->timeout_ns;
	st->rnr_waiting = wq->rnr_count > 0;
	pthread_mutex_unlock(&w->lock);
	return 0;
}

bool kinet_wire_drained(kinet_qp *qp)
{
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	return !wq || wq->head == wq->tail;
}

/* The wires of a context: the network's, then the same-host one. */
static int ctx_wires(kinet_ctx *ctx, struct kinet_wire *out[2])
{
	int n = 0;
	struct kinet_wire *w = __atomic_load_n(&soft_ctx(ctx)->wire, __ATOMIC_ACQUIRE);
	if (w) {
		out[n++] = w;
		/* set before the network wire is published (wire_get) */
		struct kinet_wire *s = __atomic_load_n(&soft_ctx(ctx)->wire_sh, __ATOMIC_ACQUIRE);
		if (s)
			out[n++] = s;
	}
	return n;
}

bool kinet_wire_pinned(kinet_ctx *ctx)
{
	struct kinet_wire *ws[2];
	int n = ctx_wires(ctx, ws);
	for (int i = 0; i < n; i++)
		if (atomic_load(&ws[i]->rd_inflight) > 0)
			return true;
	return false;
}

/* Does a writer wait for the context's key table? (The caller holds it for
 * reading; with writers preferred, another read lock is refused then.) */
static bool writer_waiting(kinet_ctx *ctx)
{
	if (pthread_rwlock_tryrdlock(&soft_ctx(ctx)->keys.lock) != 0)
		return true;
	pthread_rwlock_unlock(&soft_ctx(ctx)->keys.lock);
	return false;
}

/* One wire's pass; idle: no wire of the context had reads in flight when
 * the pass began. */
static int wire_progress_one(kinet_ctx *ctx, struct kinet_wire *w, bool idle)
{
	if (pthread_mutex_trylock(&w->lock))
		return 0;
	/* reads in flight (on either wire of the context) pin its key table; a
	 * writer waiting for it (region registration or removal) gets it once
	 * they have landed: no new reads on any wire until a pass has begun
	 * with none in flight on both (the engines let go of the table then) */
	if (idle) {
		w->draining = false;
		w->epoch++; /* the table may have changed since the last pass */
	}
	int work = wire_poll_cq(w);
	if (!w->draining && kinet_wire_pinned(ctx) && writer_waiting(ctx))
		w->draining = true;
	if (atomic_load(&w->rd_inflight) > 0) {
		/* a peer whose reads make no progress (stopped, link cut) is
		 * dropped: its reads (those of QPs gone meanwhile too) are given
		 * up and the key table is let go */
		uint64_t now = kn_now_ns();
		for (int i = 0; i < w->npeers; i++) {
			struct wpeer *p = &w->peers[i];
			if (p->nrd && !p->dead && now - p->rd_ns > w->timeout_ns) {
				KLOG_WARN("wire: peer %d: reads stalled for %llu ms", i,
					  (unsigned long long)(w->timeout_ns / 1000000ull));
				wire_drop_peer(w, i, "reads stalled");
			}
		}
	}
	if (w->npeers && kn_now_ns() - w->live_sweep_ns > LIVE_SWEEP_NS) {
		/* a peer whose process has ended is dropped at once: its QPs fail
		 * now, not after the network timeout, and nothing more goes to it */
		w->live_sweep_ns = kn_now_ns();
		for (int i = 0; i < w->npeers; i++)
			if (!w->peers[i].dead && w->peers[i].pid && wire_peer_gone(w, i))
				wire_drop_peer(w, i, "its process has ended");
	}
	for (int i = 0; i < w->nqps; i++) {
		struct wire_qp *wq = w->qps[i];
		if (!wq->tq && !wq->pend && !wq->need_ack)
			continue;
		if (wq->connected && w->peers[wq->peer].dead) {
			wire_tq_drop(w, wq);
			continue;
		}
		work += wire_serve_target(w, wq);
	}
	if (w->rx_held > RX_LOW)
		wire_tq_copy(w); /* waiting requests do not keep the receive buffers */
	if (w->nholds || w->nfins)
		work += wire_holds_progress(w);
	wire_settle(w);
	wire_repost(w);
	pthread_mutex_unlock(&w->lock);
	return work;
}

int kinet_wire_ctx_progress(kinet_ctx *ctx)
{
	struct kinet_wire *ws[2];
	int n = ctx_wires(ctx, ws), work = 0;
	bool idle = !kinet_wire_pinned(ctx);
	for (int i = 0; i < n; i++)
		work += wire_progress_one(ctx, ws[i], idle);
	return work;
}

/* Does the provider still hold mr (a send straight from it, a rendezvous
 * source) and for which peer? */
static bool wire_mr_held(const struct kinet_wire *w, const kinet_mr *mr, int *peer)
{
	return wire_txd_uses(w, mr, peer) || wire_holds_mr(w, mr, peer);
}

/* Can the provider be made to let go of what it holds for peer idx (its
 * connection closed, or the endpoint)? */
static bool wire_peer_releasable(const struct kinet_wire *w, int idx)
{
	const struct wpeer *p = &w->peers[idx];
	return p->closed || w->close_safe || (p->nrd == 0 && p->nlost == 0) ||
	       wire_reset_safe(w);
}

/* kinet_mr_dereg: mr is out of the key table (no new request names it).
 * Requests on the wire that would still read or write it fail with the
 * local protection error; then this waits until the provider no longer
 * touches it (sends straight from it, rendezvous sources not fenced yet), at
 * most KINET_NET_TIMEOUT_MS, after which the peers concerned are dropped,
 * which ends their transfers. -EBUSY when even that cannot make the
 * provider let go in time (a peer whose connection cannot be closed). */
/* The requests of wire w that would still touch mr fail. */
static void wire_mr_fail_all(struct kinet_wire *w, kinet_mr *mr)
{
	pthread_mutex_lock(&w->lock);
	int n = 0;
	for (int i = 0; i < w->nqps; i++)
		n += wire_fail_mr(w, w->qps[i], mr);
	pthread_mutex_unlock(&w->lock);
	if (n)
		KLOG_INFO("wire: region (key 0x%x) deregistered under work in flight on %d QP(s): "
			  "it fails (local protection error)", mr->key, n);
}

/* Waits until the provider of wire w no longer touches mr (below). */
static int wire_mr_gone_one(struct kinet_wire *w, kinet_mr *mr)
{
	pthread_mutex_lock(&w->lock);
	uint64_t t0 = kn_now_ns();
	int rc = 0, rounds = 0;
	int peer = -1;
	while (wire_mr_held(w, mr, &peer)) {
		if (kn_now_ns() - t0 > w->timeout_ns) {
			/* the peer does not let go in time: drop it and close its
			 * connection, or, where that leaves what the provider holds,
			 * the whole endpoint */
			if (rounds++ == 0 && peer >= 0) {
				KLOG_WARN("wire: a deregistered region is still used by the "
					  "provider after %llu ms: closing the connection to peer %d",
					  (unsigned long long)(w->timeout_ns / 1000000ull), peer);
				wire_drop_peer(w, peer, "it keeps a deregistered region");
				for (int i = 0; i < w->nqps; i++) {
					struct wire_qp *q = w->qps[i];
					if (q->connected && q->peer == peer && q->head != q->tail)
						wire_fail_qp(w, q, KN_SYND_TRANSPORT_RETRY_EXC_ERR,
							     false);
				}
				wire_close_peer(w, peer);
			} else if (rounds > 3 || peer < 0 || !wire_peer_releasable(w, peer)) {
				KLOG_ERR("wire: a deregistered region is still used by the "
					 "provider for peer %d, which cannot be disconnected now "
					 "(reads of it cannot be cancelled): the region must not "
					 "be freed yet", peer);
				rc = -EBUSY;
				break;
			} else {
				wire_close_peer(w, peer);
				if (w->peers[peer].removed && !w->peers[peer].closed)
					w->reset_due = true;
			}
			t0 = kn_now_ns();
		}
		wire_holds_progress(w);
		wire_settle(w);
		pthread_mutex_unlock(&w->lock);
		kinet_sleep_ns(500000); /* the engines progress meanwhile */
		pthread_mutex_lock(&w->lock);
	}
	if (rc == 0)
		wire_mr_unreg(w, mr); /* the provider let go of it */
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int kinet_wire_mr_gone(kinet_ctx *ctx, kinet_mr *mr)
{
	struct kinet_wire *ws[2];
	int n = ctx_wires(ctx, ws), rc = 0;
	/* every request that would touch it fails first, on both wires, so that
	 * both providers let go meanwhile; then each is waited for */
	for (int i = 0; i < n; i++)
		wire_mr_fail_all(ws[i], mr);
	for (int i = 0; i < n; i++) {
		int r = wire_mr_gone_one(ws[i], mr);
		if (r && !rc)
			rc = r;
	}
	return rc;
}

/* Adds the counters of wire w (its lock held) to i: kinet_wire_info counts
 * both wires of a context together. */
static void wire_counts(const struct kinet_wire *w, struct kinet_wire_info *i)
{
	i->desc_ops += w->n_desc;
	i->nodesc_ops += w->n_nodesc;
	i->local_regs += (uint64_t)w->nlregs;
	for (int k = 0; k < w->nmregs; k++)
		i->user_regs += w->mregs[k].fmr != NULL;
	i->hmem_regs += w->n_hmem_regs;
	i->hmem_bytes += w->n_hmem_bytes;
	i->hmem_refused += w->n_hmem_fail;
	i->copy_thread_bytes += w->copy_bytes;
	if (w->rd_max > i->reads_max)
		i->reads_max = w->rd_max;
}

int kinet_wire_info(kinet_ctx *ctx, struct kinet_wire_info *out, size_t size)
{
	if (!ctx || !out || !size)
		return -EINVAL;
	if (ctx->backend != KINET_BACKEND_SOFT)
		return -ENOTSUP;
	struct kinet_wire *w;
	int rc = wire_get(ctx, &w);
	if (rc)
		return rc;
	struct kinet_wire_info i;
	memset(&i, 0, sizeof(i));
	pthread_mutex_lock(&w->lock);
	snprintf(i.provider, sizeof(i.provider), "%s", w->info->fabric_attr->prov_name);
	snprintf(i.fabric, sizeof(i.fabric), "%s", w->info->fabric_attr->name);
	snprintf(i.domain, sizeof(i.domain), "%s", w->info->domain_attr->name);
	i.fi_version = fi_version();
	i.rma = w->rma;
	i.mr_mode = w->info->domain_attr->mr_mode;
	i.local_desc = w->mr_local;
	i.hmem = w->hmem && !w->hmem_off;
	snprintf(i.hmem_why, sizeof(i.hmem_why), "%s", i.hmem ? "" : w->hmem_why);
	wire_counts(w, &i);
	i.copy_thread = w->copy_on;
	i.cq_wait_fd = w->wait_fd >= 0;
	i.copy_min = w->copy_min;
	snprintf(i.copy_why, sizeof(i.copy_why), "%s", w->copy_why);
	for (int k = 0; k < w->nqps; k++)
		i.qps_net += w->qps[k]->connected;
	pthread_mutex_unlock(&w->lock);
	struct kinet_wire *sh = soft_ctx(ctx)->wire_sh;
	snprintf(i.same_host_why, sizeof(i.same_host_why), "%s", soft_ctx(ctx)->sh_why);
	if (sh) {
		pthread_mutex_lock(&sh->lock);
		if (sh->av_full_said)
			snprintf(i.same_host_why, sizeof(i.same_host_why),
				 "the shm endpoint has taken %d peer addresses "
				 "(KINET_FI_SAME_HOST_PEERS): new QPs reach peers of this "
				 "host over %s",
				 sh->av_used, w->prov);
		snprintf(i.same_host, sizeof(i.same_host), "%s", sh->info->fabric_attr->prov_name);
		for (int k = 0; k < sh->nqps; k++)
			i.qps_same_host += sh->qps[k]->connected;
		i.same_host_hmem = sh->hmem && !sh->hmem_off;
		i.same_host_copy_min = sh->copy_min;
		snprintf(i.same_host_hmem_why, sizeof(i.same_host_hmem_why), "%s",
			 i.same_host_hmem ? "" : sh->hmem_why);
		wire_counts(sh, &i);
		pthread_mutex_unlock(&sh->lock);
	}
	memcpy(out, &i, size < sizeof(i) ? size : sizeof(i));
	return 0;
}

int kinet_wire_ctx_wait(kinet_ctx *ctx, uint64_t ns)
{
	struct kinet_wire *ws[2];
	int n = ctx_wires(ctx, ws);
	struct pollfd pf[2];
	int nfd = 0;
	/* the nap ends after ns in any case: a wire without a wait object (shm
	 * has none) is polled on the next pass, as after a sleep; the others
	 * end it early when they have something */
	for (int i = 0; i < n; i++) {
		struct kinet_wire *w = ws[i];
		if (w->wait_fd < 0)
			continue;
		if (pthread_mutex_trylock(&w->lock))
			return 0; /* another engine is at it: do not sleep */
		if (!w->cq || w->wait_fd < 0) {
			pthread_mutex_unlock(&w->lock);
			continue; /* the endpoint is being opened again, or stays closed */
		}
		struct fid *f = &w->cq->fid;
		int rc = fi_trywait(w->fab, &f, 1);
		int fd = w->wait_fd; /* the CQ may be replaced once the lock is let go */
		pthread_mutex_unlock(&w->lock);
		if (rc != FI_SUCCESS)
			return 0; /* something to read now */
		pf[nfd++] = (struct pollfd){.fd = fd, .events = POLLIN};
	}
	if (!nfd)
		return -ENOSYS; /* nothing to wait on: the caller sleeps */
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	ppoll(pf, (nfds_t)nfd, &ts, NULL);
	return 0;
}

/* ---- QP lifecycle --------------------------------------------------------------- */

static uint32_t new_gen(void)
{
	uint32_t g = 0;
	if (getrandom(&g, sizeof(g), 0) != (ssize_t)sizeof(g))
		g = (uint32_t)kn_now_ns();
	return g ? g : 1;
}

/* The QP's end on wire w, if it has one there. */
static struct wire_qp *qp_wq(kinet_qp *qp, const struct kinet_wire *w)
{
	struct wire_qp *a = soft_qp(qp)->wire_ep, *b = soft_qp(qp)->wire_alt;
	return a && a->w == w ? a : b && b->w == w ? b : NULL;
}

/* The QP's end on wire w (w->lock held), created if it has none there yet:
 * with the generation of its end on the other wire, since its descriptor
 * names both with one generation. */
static int wq_get(struct kinet_wire *w, kinet_qp *qp, struct wire_qp **out)
{
	struct wire_qp *wq = qp_wq(qp, w);
	if (wq) {
		*out = wq;
		return 0;
	}
	struct wire_qp *other = soft_qp(qp)->wire_ep ? soft_qp(qp)->wire_ep : soft_qp(qp)->wire_alt;
	wq = calloc(1, sizeof(*wq));
	if (!wq)
		return -ENOMEM;
	wq->win = calloc(WIN, sizeof(struct wreq));
	if (!wq->win) {
		free(wq);
		return -ENOMEM;
	}
	if (w->nqps == w->qcap) {
		int ncap = w->qcap ? 2 * w->qcap : 16;
		struct wire_qp **t = realloc(w->qps, (size_t)ncap * sizeof(*t));
		if (!t) {
			free(wq->win);
			free(wq);
			return -ENOMEM;
		}
		w->qps = t;
		w->qcap = ncap;
	}
	wq->qp = qp;
	wq->w = w;
	wq->gen = other ? __atomic_load_n(&other->gen, __ATOMIC_RELAXED) : new_gen();
	wq->peer = -1;
	w->qps[w->nqps++] = wq;
	if (!soft_qp(qp)->wire_ep)
		soft_qp(qp)->wire_ep = wq;
	else
		soft_qp(qp)->wire_alt = wq;
	*out = wq;
	return 0;
}

static void peer_unref(struct kinet_wire *w, struct wire_qp *wq)
{
	if (wq->peer < 0)
		return;
	struct wpeer *p = &w->peers[wq->peer];
	if (--p->refs == 0 && !p->dead) {
		/* keep the address (and the provider's connection) for reuse */
	}
	wq->peer = -1;
}

/* Closes the source registrations of every outstanding request. */
static void wq_unreg_all(struct wire_qp *wq)
{
	for (uint32_t s = wq->head; s != wq->tail; s++)
		if (wire_ent(wq, s)->nmr)
			wire_wreq_unreg(wire_ent(wq, s));
}

static void wq_reset(struct kinet_wire *w, struct wire_qp *wq)
{
	/* what it forgets that the peer may still read is held */
	if (wq->connected)
		for (uint32_t s = wq->head; s != wq->tail; s++)
			wire_finish(wq, wire_ent(wq, s), KN_SYND_WR_FLUSH_ERR, false);
	wire_tq_drop(w, wq);
	wq_unreg_all(wq);
	peer_unref(w, wq);
	wq->connected = false;
	wq->head = wq->txn = wq->tail = 0;
	wq->msn_tx = wq->msn_rx = 0;
	wq->failed = false;
	wq->cut = false;
	wq->tgt_failed = false;
	wq->eager_out = 0;
	wq->ntxd = 0; /* what is still in flight names the old generation */
	wq->rd_all = wq->rd_part = wq->stop = wq->fin_sent = false;
	wq->gen = new_gen();
}

/* May the same-host wire sh (its lock held) take one more QP of qp's? Its
 * address vector keeps every address it was given (shm's frees none, and
 * libfabric 1.17's holds 256): not once those, with the ends named and not
 * yet connected (each may bring a new peer), reach KINET_FI_SAME_HOST_PEERS.
 * Then new QPs take the network wire (their descriptors do not name this
 * one), said once. */
static bool sh_room(struct kinet_wire *sh, kinet_qp *qp)
{
	int pending = 0;
	for (int i = 0; i < sh->nqps; i++)
		pending += !sh->qps[i]->connected && sh->qps[i]->qp != qp;
	long long max = KT(FI_SAME_HOST_PEERS);
	if ((long long)sh->av_used + pending + 1 <= max)
		return true;
	if (!sh->av_full_said) {
		sh->av_full_said = true;
		KLOG_WARN("wire: the shm endpoint has taken %d peer addresses, %d more QPs "
			  "are about to connect (KINET_FI_SAME_HOST_PEERS=%lld: its address "
			  "vector frees none): new QPs of this context reach peers of this "
			  "host over %s",
			  sh->av_used, pending, max, soft_ctx(sh->ctx)->wire->prov);
	}
	return false;
}

int kinet_wire_local_end(kinet_qp *qp, struct kinet_qp_local *out)
{
	struct kinet_wire *w;
	int rc = wire_get(qp->ctx, &w);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->lock);
	wire_settle(w);
	struct wire_qp *wq;
	rc = w->ep ? wq_get(w, qp, &wq) : -ENODEV;
	if (rc == 0 && w->addr_len > sizeof(out->addr))
		rc = -EOVERFLOW;
	if (rc == 0) {
		out->gen = wq->gen;
		snprintf(out->transport, sizeof(out->transport), "%s", w->prov);
		memcpy(out->addr, w->addr, w->addr_len);
		out->addr_len = w->addr_len;
	}
	pthread_mutex_unlock(&w->lock);
	/* and its end for peers of this host, with the same generation; without
	 * it (no endpoint now), the descriptor names the network wire only. A
	 * QP connected already (it connected before it exported) names it
	 * exactly where it is connected over it: the peer that reads this
	 * descriptor decides as its connect did */
	struct kinet_wire *sh = soft_ctx(qp->ctx)->wire_sh;
	struct kinet_wire *cw = __atomic_load_n(&soft_qp(qp)->wire, __ATOMIC_ACQUIRE);
	const struct wire_qp *ce = soft_qp(qp)->wire_ep;
	bool over_net = cw && ce && ce->w == cw && ce->connected && !cw->same_host;
	soft_qp(qp)->sh_named = false;
	if (rc == 0)
		soft_qp(qp)->exported = true;
	if (rc == 0 && sh && !over_net) {
		pthread_mutex_lock(&sh->lock);
		wire_settle(sh);
		struct wire_qp *sq;
		if (sh->ep && sh->addr_len <= sizeof(out->alt_addr) &&
		    kinet_qp_desc_len(out->addr_len, sh->addr_len) <= KINET_QP_DESC_MAX &&
		    sh_room(sh, qp) && wq_get(sh, qp, &sq) == 0 && sq->gen == out->gen) {
			soft_qp(qp)->sh_named = true;
			out->host = kinet_host();
			snprintf(out->alt_transport, sizeof(out->alt_transport), "%.15s", sh->prov);
			memcpy(out->alt_addr, sh->addr, sh->addr_len);
			out->alt_len = sh->addr_len;
		}
		pthread_mutex_unlock(&sh->lock);
	}
	return rc;
}

/* A string address (FI_ADDR_STR, shm's "fi_shm://<pid>...."): its length
 * follows the peer's numbers, so it need not be ours; printable, ended by
 * its only NUL, with our scheme ("fi_shm://"). */
static bool addr_str_usable(const struct kinet_wire *w, const uint8_t *a, size_t len)
{
	if (len < 2 || len > sizeof(w->addr) || a[len - 1] != '\0')
		return false;
	for (size_t i = 0; i + 1 < len; i++)
		if (a[i] < 0x20 || a[i] > 0x7e)
			return false;
	const char *mine = (const char *)w->addr;
	const char *sep = memchr(mine, ':', w->addr_len);
	size_t n = sep && (size_t)(sep - mine) + 3 <= w->addr_len && !memcmp(sep, "://", 3)
			   ? (size_t)(sep - mine) + 3
			   : 0;
	return len > n && !memcmp(a, mine, n);
}

/* Is a (len bytes of a peer's descriptor) an address of our provider's
 * format, that fi_av_insert can take? libfabric 1.17's IP address vectors
 * take an address's length from its family, and a failed insert of an
 * address of unknown family leaves the vector refusing every later one:
 * nothing that is not a well-formed address of our own family (with a port,
 * not the wildcard address) is given to it. Strings: addr_str_usable. Other
 * formats: our own length. */
static bool addr_usable(const struct kinet_wire *w, const uint8_t *a, size_t len)
{
	uint32_t fmt = w->info->addr_format;
	if (fmt == FI_ADDR_STR)
		return addr_str_usable(w, a, len);
	if (fmt != FI_SOCKADDR && fmt != FI_SOCKADDR_IN && fmt != FI_SOCKADDR_IN6)
		return len == w->addr_len;
	sa_family_t mine, theirs;
	if (len < sizeof(theirs) || w->addr_len < sizeof(mine))
		return false;
	memcpy(&mine, w->addr, sizeof(mine));
	memcpy(&theirs, a, sizeof(theirs));
	if (theirs != mine || len != w->addr_len)
		return false;
	if (theirs == AF_INET && len == sizeof(struct sockaddr_in)) {
		struct sockaddr_in sin;
		memcpy(&sin, a, sizeof(sin));
		static const uint8_t zero[sizeof(sin.sin_zero)];
		return sin.sin_port != 0 && sin.sin_addr.s_addr != htonl(INADDR_ANY) &&
		       !memcmp(sin.sin_zero, zero, sizeof(zero));
	}
	if (theirs == AF_INET6 && len == sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 sin6;
		memcpy(&sin6, a, sizeof(sin6));
		return sin6.sin6_port != 0 &&
		       memcmp(&sin6.sin6_addr, &in6addr_any, sizeof(in6addr_any)) != 0;
	}
	return false;
}

/* Does the address vector still take addresses? (Our own address is a good
 * one: inserted and removed again, unless a QP of ours is connected to it.) */
static bool av_usable(struct kinet_wire *w)
{
	for (int i = 0; i < w->npeers; i++)
		if (!w->peers[i].dead && w->peers[i].len == w->addr_len &&
		    !memcmp(w->peers[i].addr, w->addr, w->addr_len))
			return true; /* not to be touched: take it as usable */
	fi_addr_t fa;
	if (fi_av_insert(w->av, w->addr, 1, &fa, 0, NULL) != 1)
		return false;
	fi_av_remove(w->av, &fa, 1, 0);
	return true;
}

/* May the slot of dropped peer idx take another address? Not while
 * anything the provider still has (sends written off, reads given up,
 * holds) or an F_RDFIN still to be sent names it. */
static bool slot_free(const struct kinet_wire *w, int idx)
{
	const struct wpeer *p = &w->peers[idx];
	if (p->nbusy || p->nlost || p->nrd || p->settle || wire_holds_peer(w, idx))
		return false;
	for (int k = 0; k < w->nfins; k++)
		if (w->fins[k].peer == idx)
			return false;
	for (int k = 0; k < w->ntxall; k++)
		if (w->txall[k]->busy && w->txall[k]->peer == idx)
			return false;
	return true;
}

/* Ends the QP's end wq on its wire (its lock not held): fails what is
 * outstanding there, drops what waits for it, and frees it. */
static void wq_release(kinet_qp *qp, struct wire_qp *wq)
{
	struct kinet_wire *w = wq->w;
	pthread_mutex_lock(&w->lock);
	if (wq->head != wq->tail && wq->connected) {
		wire_drop_peer(w, wq->peer, "QP destroyed with requests outstanding");
		for (uint32_t s = wq->head; s != wq->tail; s++)
			wire_finish(wq, wire_ent(wq, s), KN_SYND_WR_FLUSH_ERR, false);
	}
	wire_tq_drop(w, wq); /* its holds outlive it */
	wq_unreg_all(wq);
	peer_unref(w, wq);
	for (int i = 0; i < w->nqps; i++)
		if (w->qps[i] == wq) {
			w->qps[i] = w->qps[--w->nqps];
			break;
		}
	pthread_mutex_unlock(&w->lock);
	if (soft_qp(qp)->wire_ep == wq)
		soft_qp(qp)->wire_ep = NULL;
	if (soft_qp(qp)->wire_alt == wq)
		soft_qp(qp)->wire_alt = NULL;
	free(wq->win);
	free(wq);
}

/* Which of the context's wires reaches the peer of descriptor pi: the
 * same-host one where both ends have it, the peer is another process and on
 * this host; the network's otherwise. why says which and why. */
static struct kinet_wire *pick_wire(kinet_qp *qp, struct kinet_wire *net,
				    const struct kinet_qp_info *pi, const struct kinet_qp_alt *alt,
				    const char **why)
{
	struct kinet_wire *sh = soft_ctx(qp->ctx)->wire_sh;
	if (!sh) {
		*why = soft_ctx(qp->ctx)->sh_why;
		return net;
	}
	if (!alt->len) {
		*why = "the peer's descriptor has no same-host address";
		return net;
	}
	if (!soft_qp(qp)->sh_named) {
		*why = "this QP's descriptor named no same-host address (no shm endpoint then, "
		       "or no room)";
		return net;
	}
	if (alt->host != kinet_host()) {
		*why = "the peer is on another host (or in other namespaces)";
		return net;
	}
	if (pi->node == kinet_node()) {
		*why = "the peer is in this process (or forked from it after its first export)";
		return net;
	}
	if (wire_shm_addr_pid(alt->addr, alt->len) == (int)getpid()) {
		/* another copy of the library in this process (its own incarnation) */
		*why = "the peer is in this process (another copy of the library)";
		return net;
	}
	if (strcmp(alt->transport, sh->prov)) {
		*why = "the peer's same-host provider is another";
		return net;
	}
	*why = "the peer is another process of this host";
	return sh;
}

/* remote->wire_addr holds the peer's QP descriptor (kinet/net.h). */
int kinet_soft_wire_connect(kinet_qp *qp, const struct kinet_qp_remote *remote)
{
	struct kinet_qp_info pi;
	struct kinet_qp_alt alt;
	int rc = kinet_qp_desc_parse_alt(remote->wire_addr, remote->wire_addr_len, &pi, &alt);
	if (rc)
		return rc;
	struct kinet_wire *w;
	if ((rc = wire_get(qp->ctx, &w)))
		return rc;
	if (!soft_qp(qp)->exported && soft_ctx(qp->ctx)->wire_sh) {
		/* connected before its export: its ends are named now, as the export
		 * would, so the choice below is the one the peer makes from the
		 * descriptor this QP exports later (kinet_wire_local_end) */
		struct kinet_qp_local own;
		memset(&own, 0, sizeof(own));
		if ((rc = kinet_wire_local_end(qp, &own)))
			return rc;
	}
	const char *why = "";
	w = pick_wire(qp, w, &pi, &alt, &why);
	if (w->same_host) {
		/* over the peer's second address */
		memcpy(pi.addr, alt.addr, alt.len);
		pi.addr_len = alt.len;
	} else if (strcmp(pi.provider, w->prov)) {
		KLOG_ERR("qp 0x%x: the peer uses libfabric provider \"%s\", this process \"%s\" "
			 "(KINET_FI_PROVIDER must match)", qp->qpn, pi.provider, w->prov);
		return -EPROTO;
	}
	pthread_mutex_lock(&w->lock);
	wire_settle(w);
	struct wire_qp *wq = NULL, *other = NULL;
	if (!w->ep) {
		KLOG_ERR("qp 0x%x: the wire's endpoint could not be opened again", qp->qpn);
		rc = -ENODEV;
		goto out;
	}
	if ((rc = wq_get(w, qp, &wq)))
		goto out;
	if (wq->connected) {
		KLOG_ERR("qp 0x%x: already connected (reset it first)", qp->qpn);
		rc = -EINVAL;
		goto out;
	}
	int idx = -1;
	for (int i = 0; i < w->npeers; i++)
		if (!w->peers[i].dead && w->peers[i].len == pi.addr_len &&
		    !memcmp(w->peers[i].addr, pi.addr, pi.addr_len)) {
			idx = i;
			break;
		}
	if (idx < 0 && !addr_usable(w, pi.addr, pi.addr_len)) {
		KLOG_ERR("qp 0x%x: the peer's wire address (%u bytes) is not an address of "
			 "provider %s", qp->qpn, pi.addr_len, w->prov);
		rc = -EINVAL;
		goto out;
	}
	if (idx < 0) {
		bool reused = false;
		for (int i = 0; i < w->npeers; i++)
			if (w->peers[i].dead && w->peers[i].refs == 0 && slot_free(w, i)) {
				idx = i; /* reuse the slot */
				reused = true;
				break;
			}
		if (idx < 0) {
			struct wpeer *np = realloc(w->peers, (size_t)(w->npeers + 1) * sizeof(*np));
			if (!np) {
				rc = -ENOMEM;
				goto out;
			}
			w->peers = np;
			idx = w->npeers++;
		}
		struct wpeer *p = &w->peers[idx];
		if (reused && p->pidfd >= 0)
			close(p->pidfd);
		memset(p, 0, sizeof(*p));
		memcpy(p->addr, pi.addr, pi.addr_len);
		p->len = pi.addr_len;
		p->pidfd = -1;
		/* shm (an address "fi_shm://<pid>..."): its process, whose end stops
		 * every send to it (wire_peer_gone) */
		p->pid = wire_shm_addr_pid(pi.addr, pi.addr_len);
		if (p->pid)
			p->pidfd = wire_shm_pid_open(p->pid, &p->gone);
		int err = 0;
		int n = fi_av_insert(w->av, pi.addr, 1, &p->fa, FI_SYNC_ERR, &err);
		if (n == -FI_EBADFLAGS) /* a provider without per-address errors (sockets) */
			n = fi_av_insert(w->av, pi.addr, 1, &p->fa, 0, NULL);
		if (n == 1)
			w->av_used++;
		if (n != 1) {
			p->dead = true;
			rc = n < 0 ? wire_errno(n) : err ? wire_errno(err) : -EINVAL;
			KLOG_ERR("qp 0x%x: the provider refuses the peer's wire address: %s",
				 qp->qpn, fi_strerror(n < 0 ? -n : err ? err : FI_EINVAL));
			if (!av_usable(w)) {
				/* the vector is broken: a new one, with a new endpoint */
				KLOG_ERR("wire: the address vector refuses every address now");
				w->reset_due = true;
				wire_settle(w);
			}
			goto out;
		}
	}
	w->peers[idx].refs++;
	wq->peer = idx;
	wq->peer_qpn = pi.qpn;
	wq->peer_gen = (uint32_t)pi.gen;
	wq->head = wq->txn = wq->tail = 0;
	wq->msn_tx = wq->msn_rx = 0;
	wq->failed = wq->tgt_failed = wq->cut = false;
	wq->eager_out = 0;
	wq->rd_all = wq->rd_part = wq->stop = wq->fin_sent = false;
	wq->need_ack = false;
	wq->done_seq = wq->acked_seq = (uint32_t)-1; /* before request 0 */
	wq->last_rx_ns = wq->last_tx_ns = kn_now_ns();
	wq->connected = true;
	soft_qp(qp)->peer = NULL;
	qp->peer_qpn = pi.qpn;
	__atomic_store_n(&soft_qp(qp)->wire, w, __ATOMIC_RELEASE);
	KLOG_INFO("qp 0x%x: connected to qp 0x%x over %s (%s)", qp->qpn, pi.qpn, w->prov, why);
	/* its end here is the one the status query finds (under this lock); the
	 * end on the other wire goes, freed under that wire's lock */
	other = soft_qp(qp)->wire_ep == wq ? soft_qp(qp)->wire_alt : soft_qp(qp)->wire_ep;
	soft_qp(qp)->wire_ep = wq;
	soft_qp(qp)->wire_alt = other;
out:
	pthread_mutex_unlock(&w->lock);
	if (rc == 0 && other)
		wq_release(qp, other); /* nothing is sent to it */
	return rc;
}

void kinet_wire_qp_reset(kinet_qp *qp)
{
	/* its end on the wire it was connected over (or, never connected, the
	 * first) starts again; one on the other wire goes (the next export
	 * makes it again, with the new generation) */
	struct wire_qp *alt = soft_qp(qp)->wire_alt;
	if (alt)
		wq_release(qp, alt);
	soft_qp(qp)->sh_named = false; /* its next descriptor says again */
	soft_qp(qp)->exported = false;
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	if (!wq)
		return;
	struct kinet_wire *w = wq->w;
	pthread_mutex_lock(&w->lock);
	wq_reset(w, wq);
	pthread_mutex_unlock(&w->lock);
}

void kinet_wire_qp_close(kinet_qp *qp)
{
	struct wire_qp *wq;
	while ((wq = soft_qp(qp)->wire_alt) || (wq = soft_qp(qp)->wire_ep))
		wq_release(qp, wq);
	soft_qp(qp)->wire = NULL;
}

void kinet_wire_ctx_close(kinet_ctx *ctx)
{
	struct kinet_wire *w = soft_ctx(ctx)->wire, *sh = soft_ctx(ctx)->wire_sh;
	soft_ctx(ctx)->wire = NULL;
	soft_ctx(ctx)->wire_sh = NULL;
	if (sh)
		wire_destroy(sh);
	if (w)
		wire_destroy(w);
}

#endif

#if !KINET_HAVE_FABRIC
int kinet_wire_info(kinet_ctx *ctx, struct kinet_wire_info *out, size_t size)
{
	if (!ctx || !out || !size)
		return -EINVAL;
	return -ENOTSUP; /* built without libfabric: no wire */
}
#endif

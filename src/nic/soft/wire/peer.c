/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * peer.c - a peer that fails: dropping it (its reads and sends are given
 * up: they stay with the provider, the wire goes on without them) and
 * closing its connection (to make the provider let go of memory it still
 * uses for it), once the reads of it that were given up have ended where
 * the provider cannot close under them.
 */

#include "nic/soft/wire/wire_int.h"
#if KINET_HAVE_FABRIC

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
			wire_txd_write_off(w, w->txall[k]);
}

/* A given-up read of peer idx has ended after all. */
void wire_lost_done(struct kinet_wire *w, int idx)
{
	struct wpeer *p = &w->peers[idx];
	if (p->nlost && --p->nlost == 0 && p->want_close)
		wire_close_peer(w, idx);
}

#endif /* KINET_HAVE_FABRIC */

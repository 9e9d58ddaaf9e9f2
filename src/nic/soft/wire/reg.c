/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reg.c - registrations with the provider: the wire's own buffers for
 * local descriptors (FI_MR_LOCAL, KINET_FI_MR_LOCAL=1), user regions for
 * sends straight from them (GPU memory as FI_HMEM_CUDA, host memory where
 * local descriptors are needed), rendezvous sources (wire_reg, for req.c),
 * and the trial of GPU memory before the endpoint opens.
 */

#include <stdlib.h>
#include <string.h>
#include "nic/soft/wire/wire_int.h"
#include "gpu/cudrv.h"
#if KINET_HAVE_FABRIC

/* One registration with the provider: [p, p + n) with access, GPU memory of
 * CUDA device dev when iface is FI_HMEM_CUDA, bound to the endpoint where
 * the provider wants that. A libfabric return code. */
static int reg_one(struct kinet_wire *w, void *p, size_t n, uint64_t access, int iface, int dev,
		   uint64_t key, struct fid_mr **out)
{
	struct iovec iov = {p, n};
	struct fi_mr_attr a;
	memset(&a, 0, sizeof(a));
	a.mr_iov = &iov;
	a.iov_count = 1;
	a.access = access;
	a.requested_key = key;
	a.iface = (enum fi_hmem_iface)iface;
	if (iface == FI_HMEM_CUDA)
		a.device.cuda = dev;
	int rc = fi_mr_regattr(w->dom, &a, 0, out);
	if (rc == 0 && w->mr_ep && w->ep) { /* (no endpoint yet: a trial, never used) */
		rc = fi_mr_bind(*out, &w->ep->fid, 0);
		if (rc == 0)
			rc = fi_mr_enable(*out);
		if (rc)
			fi_close(&(*out)->fid);
	}
	return rc;
}

int wire_reg(struct kinet_wire *w, void *p, size_t n, uint64_t access, const kinet_mr *gpu,
	     uint64_t key, struct fid_mr **out)
{
	int dev = 0;
	if (gpu) {
		/* the region's own device: on a guess the provider would map the
		 * wrong GPU's memory */
		const struct kinet_cuda_ops *cu = kinet_cuda_load();
		struct kinet_cuda_mem mi;
		if (!cu || !cu->mem_info || cu->mem_info(gpu->addr, &mi))
			return -FI_ENODEV;
		dev = mi.device;
	}
	return reg_one(w, p, n, access, gpu ? FI_HMEM_CUDA : FI_HMEM_SYSTEM, dev, key, out);
}

#define LOCAL_ACCESS (FI_SEND | FI_RECV | FI_READ | FI_WRITE)

bool wire_lreg_add(struct kinet_wire *w, void *p, size_t n)
{
	if (!w->mr_local || !p || !w->ep)
		return true;
	if (w->nlregs == w->lcap) {
		int c = w->lcap ? 2 * w->lcap : 16;
		struct wlreg *l = realloc(w->lregs, (size_t)c * sizeof(*l));
		if (!l)
			return false;
		w->lregs = l;
		w->lcap = c;
	}
	struct fid_mr *mr;
	int rc = reg_one(w, p, n, LOCAL_ACCESS, FI_HMEM_SYSTEM, 0, w->next_key++, &mr);
	if (rc) {
		KLOG_ERR("wire: registering a buffer of %zu bytes for local descriptors: %s", n,
			 fi_strerror(-rc));
		w->lreg_rc = rc;
		return false;
	}
	w->lregs[w->nlregs++] = (struct wlreg){(uint8_t *)p, n, mr, fi_mr_desc(mr)};
	return true;
}

void *wire_ldesc(struct kinet_wire *w, const void *p, size_t n)
{
	if (!w->mr_local)
		return NULL;
	const uint8_t *a = p;
	for (int i = 0; i < w->nlregs; i++) {
		const struct wlreg *l = &w->lregs[i];
		if (a >= l->p && a + n <= l->p + l->n) {
			w->n_desc++;
			return l->desc;
		}
	}
	if (w->n_nodesc++ == 0)
		KLOG_ERR("wire: a buffer %p+%zu of the wire has no local descriptor", p, n);
	return NULL;
}

/* Every buffer of the wire's own, registered (mr_local): after the endpoint
 * opened. false when one is refused. */
bool wire_lregs_open(struct kinet_wire *w)
{
	if (!w->mr_local)
		return true;
	bool ok = wire_lreg_add(w, w->rxmem, (size_t)NRX * (HDR + CHUNK)) &&
		  wire_lreg_add(w, w->bigmem, (size_t)NBIG * (HDR + CHUNK)) &&
		  wire_lreg_add(w, w->txmem, (size_t)NTX * sizeof(struct txd)) &&
		  wire_lreg_add(w, w->rdmem, RD_MEM);
	/* replacements: send descriptors and bounce buffers (w->extra), reads */
	for (int i = 0; ok && i < w->nextra; i++)
		ok = wire_lreg_add(w, w->extra[i], w->extra_len[i]);
	for (int i = NRD_ALL; ok && i < w->nrdall; i++)
		ok = wire_lreg_add(w, w->rdall[i]->buf, w->rdall[i]->cap);
	return ok;
}

/* Closes every registration bound to the endpoint (before it closes): the
 * wire's own buffers and the user regions (registered again on next use). */
void wire_regs_close(struct kinet_wire *w)
{
	for (int i = 0; i < w->nlregs; i++)
		fi_close(&w->lregs[i].mr->fid);
	w->nlregs = 0;
	for (int i = 0; i < w->nmregs; i++)
		if (w->mregs[i].fmr) {
			fi_close(&w->mregs[i].fmr->fid);
			if (w->mregs[i].mr->kind == KINET_MEM_CUDA) /* until registered again */
				__atomic_store_n(&w->mregs[i].mr->path, KINET_MR_PATH_STAGED,
						 __ATOMIC_RELAXED);
		}
	w->nmregs = 0;
}

/* The provider offers FI_HMEM but refused GPU memory (rc): counted, said
 * once in the log (what follows: then), and kept for kinet_wire_info. */
static void hmem_refused(struct kinet_wire *w, int rc, const char *then)
{
	w->n_hmem_fail++;
	snprintf(w->hmem_why, sizeof(w->hmem_why),
		 "provider %s offers FI_HMEM, but registering GPU memory as FI_HMEM_CUDA failed: %s",
		 w->info->fabric_attr->prov_name, fi_strerror(-rc));
	KLOG_WARN("wire: %s: %s", w->hmem_why, then);
}

/* Does the provider take GPU memory as FI_HMEM_CUDA? Tried on 64 KiB of
 * GPU 0 before the endpoint opens (a provider can offer FI_HMEM and still
 * refuse CUDA memory: a libfabric built without CUDA). false says why in
 * w->hmem_why. */
bool wire_hmem_probe(struct kinet_wire *w)
{
	void *g = NULL;
	int rc = kinet_cudrv_alloc(0, 65536, &g);
	if (rc) {
		snprintf(w->hmem_why, sizeof(w->hmem_why),
			 "no GPU memory to try FI_HMEM_CUDA with: %s", kinet_strerror(rc));
		return false;
	}
	struct fid_mr *mr = NULL;
	rc = reg_one(w, g, 65536, LOCAL_ACCESS | FI_REMOTE_READ, FI_HMEM_CUDA, 0, w->next_key++,
		     &mr);
	if (rc == 0)
		fi_close(&mr->fid);
	kinet_cudrv_free(g);
	if (rc)
		hmem_refused(w, rc, "the endpoint opens without FI_HMEM, GPU payloads are staged");
	return rc == 0;
}

struct wmreg *wire_mr_desc(struct kinet_wire *w, kinet_mr *mr)
{
	if (!mr || !w->ep)
		return NULL;
	bool gpu = mr->kind == KINET_MEM_CUDA;
	if (gpu ? !w->hmem : !w->mr_local)
		return NULL;
	/* one taken before stays taken (its path says fabric) */
	for (int i = 0; i < w->nmregs; i++)
		if (w->mregs[i].mr == mr)
			return w->mregs[i].fmr ? &w->mregs[i] : NULL;
	if (gpu && w->hmem_off)
		return NULL;
	if (w->nmregs == w->mcap) {
		int c = w->mcap ? 2 * w->mcap : 16;
		struct wmreg *m = realloc(w->mregs, (size_t)c * sizeof(*m));
		if (!m)
			return NULL;
		w->mregs = m;
		w->mcap = c;
	}
	struct fid_mr *fmr = NULL;
	int rc = wire_reg(w, mr->addr, mr->len, LOCAL_ACCESS, gpu ? mr : NULL, w->next_key++, &fmr);
	if (rc) {
		if (gpu) {
			/* the provider cannot take this GPU memory: new GPU regions
			 * are staged from now on */
			w->hmem_off = true;
			hmem_refused(w, rc, "GPU payloads are staged through host memory");
		} else {
			KLOG_DBG("wire: registering %p+%zu for local descriptors: %s (bounce "
				 "buffers instead)",
				 mr->addr, mr->len, fi_strerror(-rc));
		}
		w->mregs[w->nmregs++] = (struct wmreg){mr, NULL, NULL}; /* not again */
		return NULL;
	}
	w->mregs[w->nmregs++] = (struct wmreg){mr, fmr, fi_mr_desc(fmr)};
	if (gpu) {
		w->n_hmem_regs++;
		__atomic_store_n(&mr->path, KINET_MR_PATH_FABRIC, __ATOMIC_RELAXED);
		KLOG_INFO("wire: GPU memory %p+%zu registered with provider %s (FI_HMEM_CUDA): "
			  "it moves the payloads itself",
			  mr->addr, mr->len, w->info->fabric_attr->prov_name);
	}
	return &w->mregs[w->nmregs - 1];
}

void wire_mr_unreg(struct kinet_wire *w, const kinet_mr *mr)
{
	for (int i = 0; i < w->nmregs; i++) {
		if (w->mregs[i].mr != mr)
			continue;
		if (w->mregs[i].fmr)
			fi_close(&w->mregs[i].fmr->fid);
		w->mregs[i] = w->mregs[--w->nmregs];
		return;
	}
}

#endif /* KINET_HAVE_FABRIC */

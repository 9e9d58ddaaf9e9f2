/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory regions: the checks common to every backend. */
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

int kinet_mr_reg(kinet_pd *pd, void *addr, size_t len, unsigned access, kinet_mr **out)
{
	if (!pd || !addr || !out || len == 0 || (access & ~KINET_ACCESS_ALL))
		return -EINVAL;
	*out = NULL;
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return -ERANGE;
	/* IB rule: remote write/atomic need local write */
	if ((access & (KINET_ACCESS_REMOTE_WRITE | KINET_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & KINET_ACCESS_LOCAL_WRITE)) {
		KLOG_ERR("mr_reg: remote write or atomic access needs local write");
		return -EINVAL;
	}
	kinet_ctx *ctx = pd->ctx;
	kinet_mr *mr = calloc(1, ctx->ops->mr_size);
	if (!mr)
		return -ENOMEM;
	mr->pd = pd;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	mr->kind = KINET_MEM_HOST;
	atomic_store(&mr->state, KINET_MR_REGISTERED);
	int rc = ctx->ops->mr_reg(mr);
	if (rc) {
		free(mr);
		return rc;
	}
	atomic_fetch_add(&pd->refs, 1);
	*out = mr;
	return 0;
}

int kinet_mr_dereg(kinet_mr *mr)
{
	if (!mr)
		return -EINVAL;
	if (mr->cache_ent && !kinet_mr_cache_owns_dereg(mr)) {
		KLOG_ERR("kinet_mr_dereg: region %p+%zu belongs to a registration cache: give it "
			 "back with kinet_mr_cache_put",
			 mr->addr, mr->len);
		return -EBUSY;
	}
	return kinet_mr_dereg_now(mr);
}

int kinet_mr_dereg_now(kinet_mr *mr)
{
	kinet_pd *pd = mr->pd;
	int rc = pd->ctx->ops->mr_dereg(mr);
	if (rc)
		return rc;
	atomic_fetch_sub(&pd->refs, 1);
	free(mr);
	return 0;
}

int kinet_mr_revoke(kinet_mr *mr)
{
	if (!mr)
		return -EINVAL;
	kinet_ctx *ctx = mr->pd->ctx;
	if (atomic_load(&mr->state) == KINET_MR_REVOKED)
		return -EALREADY;
	if (!ctx->ops->mr_revoke)
		return kinet_backend_unsupported(ctx, "kinet_mr_revoke");
	int rc = ctx->ops->mr_revoke(mr);
	if (rc)
		return rc;
	atomic_store(&mr->state, KINET_MR_REVOKED);
	KLOG_DBG("region %p+%zu (key 0x%x) revoked", mr->addr, mr->len, mr->rkey);
	return 0;
}

int kinet_mr_state(const kinet_mr *mr)
{
	return mr ? atomic_load(&((kinet_mr *)mr)->state) : -EINVAL;
}

const char *kinet_mr_state_str(int st)
{
	switch (st) {
	case KINET_MR_REGISTERED: return "registered";
	case KINET_MR_EXPOSED: return "exposed";
	case KINET_MR_REVOKED: return "revoked";
	case KINET_MR_INVALID: return "invalid";
	default: return "?";
	}
}

uint32_t kinet_mr_lkey(const kinet_mr *mr) { return mr ? mr->key : 0; }
uint32_t kinet_mr_rkey(const kinet_mr *mr) { return mr ? mr->rkey : 0; }
void *kinet_mr_addr(const kinet_mr *mr) { return mr ? mr->addr : NULL; }
size_t kinet_mr_len(const kinet_mr *mr) { return mr ? mr->len : 0; }
int kinet_mr_kind(const kinet_mr *mr) { return mr ? mr->kind : -EINVAL; }
int kinet_mr_path(const kinet_mr *mr)
{
	return mr ? __atomic_load_n(&mr->path, __ATOMIC_RELAXED) : -EINVAL; /* the wire may set it */
}

const char *kinet_mr_path_str(int path)
{
	switch (path) {
	case KINET_MR_PATH_HOST: return "host";
	case KINET_MR_PATH_DMABUF: return "dmabuf";
	case KINET_MR_PATH_PEERMEM: return "peermem";
	case KINET_MR_PATH_STAGED: return "staged";
	case KINET_MR_PATH_FABRIC: return "fabric";
	default: return "?";
	}
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory regions: the key table the NIC checks every access against. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "nic/mlx5/mlx5.h"

int kinet_mr_reg(kinet_pd *pd, void *addr, size_t len, unsigned access, kinet_mr **out)
{
	if (!pd || !addr || !out || len == 0 || (access & ~KINET_ACCESS_ALL))
		return -EINVAL;
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return -ERANGE;
	/* IB rule: remote write/atomic need local write */
	if ((access & (KINET_ACCESS_REMOTE_WRITE | KINET_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & KINET_ACCESS_LOCAL_WRITE)) {
		KLOG_ERR("mr_reg: remote write or atomic access needs local write");
		return -EINVAL;
	}
	kinet_ctx *ctx = pd->ctx;
	if (ctx->backend == KINET_BACKEND_MLX5)
		return kinet_mlx5_mr_reg(pd, addr, len, access, out);
	kinet_mr *mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->pd = pd;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	mr->kind = KINET_MEM_HOST;
	const struct kinet_cuda_ops *cu = kinet_cuda_load();
	if (cu && cu->pointer_kind) {
		int k = cu->pointer_kind(addr);
		if (k >= 0)
			mr->kind = k;
	}
	/* the software NIC is a CPU: it reaches GPU memory by copies */
	mr->path = mr->kind == KINET_MEM_CUDA ? KINET_MR_PATH_STAGED : KINET_MR_PATH_HOST;
	/* engines read the table inside their passes without mr_lock: stop
	 * them first; other readers (wire, other contexts' responders) hold
	 * mr_lock for reading */
	kinet_soft_stop_world(ctx, false);
	pthread_rwlock_wrlock(&ctx->mr_lock);
	uint32_t i;
	for (i = 1; i < ctx->mr_cap; i++)
		if (!ctx->mr_tab[i])
			break;
	if (i >= ctx->mr_cap) {
		uint32_t ncap = ctx->mr_cap ? ctx->mr_cap * 2 : 256;
		kinet_mr **t = ncap <= (1u << 24) ? realloc(ctx->mr_tab, ncap * sizeof(*t)) : NULL;
		if (!t) {
			pthread_rwlock_unlock(&ctx->mr_lock);
			kinet_soft_start_world(ctx);
			free(mr);
			return -ENOMEM;
		}
		memset(t + ctx->mr_cap, 0, (ncap - ctx->mr_cap) * sizeof(*t));
		ctx->mr_tab = t;
		i = ctx->mr_cap ? ctx->mr_cap : 1;
		ctx->mr_cap = ncap;
	}
	ctx->mr_tag = (ctx->mr_tag + 1) & 0xff;
	if (!ctx->mr_tag)
		ctx->mr_tag = 1; /* never 0: key 0x100 is mlx5's invalid lkey */
	mr->key = (i << 8) | ctx->mr_tag;
	mr->rkey = mr->key;
	ctx->mr_tab[i] = mr;
	pthread_rwlock_unlock(&ctx->mr_lock);
	kinet_soft_start_world(ctx);
	atomic_fetch_add(&pd->refs, 1);
	*out = mr;
	return 0;
}

int kinet_mr_dereg(kinet_mr *mr)
{
	if (!mr)
		return -EINVAL;
	kinet_ctx *ctx = mr->pd->ctx;
	if (ctx->backend == KINET_BACKEND_MLX5)
		return kinet_mlx5_mr_dereg(mr);
	/* no engine in a pass, no GPU copy of theirs still moving bytes of it */
	kinet_soft_stop_world(ctx, true);
	pthread_rwlock_wrlock(&ctx->mr_lock);
	uint32_t i = mr->key >> 8;
	if (i < ctx->mr_cap && ctx->mr_tab[i] == mr)
		ctx->mr_tab[i] = NULL;
	pthread_rwlock_unlock(&ctx->mr_lock);
	kinet_soft_start_world(ctx);
	atomic_fetch_sub(&mr->pd->refs, 1);
	free(mr);
	return 0;
}

uint32_t kinet_mr_lkey(const kinet_mr *mr) { return mr ? mr->key : 0; }
uint32_t kinet_mr_rkey(const kinet_mr *mr) { return mr ? mr->rkey : 0; }
void *kinet_mr_addr(const kinet_mr *mr) { return mr ? mr->addr : NULL; }
size_t kinet_mr_len(const kinet_mr *mr) { return mr ? mr->len : 0; }
int kinet_mr_kind(const kinet_mr *mr) { return mr ? mr->kind : -EINVAL; }
int kinet_mr_path(const kinet_mr *mr) { return mr ? mr->path : -EINVAL; }

const char *kinet_mr_path_str(int path)
{
	switch (path) {
	case KINET_MR_PATH_HOST: return "host";
	case KINET_MR_PATH_DMABUF: return "dmabuf";
	case KINET_MR_PATH_PEERMEM: return "peermem";
	case KINET_MR_PATH_STAGED: return "staged";
	default: return "?";
	}
}

int kinet_mr_check(kinet_ctx *ctx, const kinet_pd *pd, uint32_t key, uint64_t addr,
		   uint64_t len, unsigned access, struct kinet_mr_ref *out)
{
	uint32_t i = key >> 8;
	if (i == 0 || i >= ctx->mr_cap)
		return -EACCES;
	kinet_mr *mr = ctx->mr_tab[i];
	if (!mr || mr->key != key || (pd && mr->pd != pd))
		return -EACCES;
	if ((mr->access & access) != access)
		return -EACCES;
	uint64_t base = (uint64_t)(uintptr_t)mr->addr;
	if (addr < base || len > mr->len || addr - base > mr->len - len)
		return -ERANGE;
	out->ptr = (uint8_t *)(uintptr_t)addr;
	out->kind = mr->kind;
	return 0;
}

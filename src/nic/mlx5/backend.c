/* SPDX-License-Identifier: BSD-3-Clause */
/* mlx5 backend entry points. rdma-core is loaded at run time. */
#include <dlfcn.h>
#include <stdio.h>
#include "nic/mlx5/mlx5.h"

int kinet_mlx5_probe(const char *device, char *why, size_t whylen)
{
	(void)device;
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, whylen, "rdma-core (libibverbs.so.1) not found");
		return -ENODEV;
	}
	dlclose(h);
	snprintf(why, whylen, "the mlx5 backend is not built yet");
	return -ENOSYS;
}

int kinet_mlx5_open(kinet_ctx *ctx, const char *device)
{
	(void)ctx;
	(void)device;
	return -ENOSYS;
}

void kinet_mlx5_close(kinet_ctx *ctx)
{
	(void)ctx;
}

int kinet_mlx5_qp_create(kinet_pd *pd, const struct kinet_qp_attr *attr, kinet_qp **out)
{
	(void)pd;
	(void)attr;
	(void)out;
	return -ENOSYS;
}

int kinet_mlx5_qp_destroy(kinet_qp *qp)
{
	(void)qp;
	return -ENOSYS;
}

int kinet_mlx5_qp_modify(kinet_qp *qp, int state, const struct kinet_qp_remote *remote)
{
	(void)qp;
	(void)state;
	(void)remote;
	return -ENOSYS;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dmabuf.h - what kinet-verbs' ibv_reg_dmabuf_mr checks before it registers
 * a dma-buf (dmabuf.c): that the descriptor is a dma-buf (its
 * /proc/self/fdinfo entry names an exporter), that the range lies in it, and
 * that the software NIC can reach its memory. docs/verbs.md, "dma-buf MRs".
 */
#ifndef KINET_VERBS_DMABUF_H
#define KINET_VERBS_DMABUF_H

#include <stddef.h>
#include <stdint.h>
#include "gpu/gpu.h"

struct kv_dmabuf {
	char exp_name[64]; /* the exporter ("nvidia", "udmabuf", ...) */
	uint64_t size;     /* bytes */
};

/* Reads the dma-buf identity from the text of a /proc/<pid>/fdinfo/<fd>
 * entry: 0, or -EINVAL when it has no exp_name line (not a dma-buf). The
 * size comes from its size line (0 when absent). */
int kv_dmabuf_parse(const char *fdinfo, struct kv_dmabuf *out);

/* The identity of descriptor fd: 0; -EBADF (not an open descriptor),
 * -EINVAL (open but not a dma-buf), -EOPNOTSUPP (/proc/self/fdinfo cannot
 * be read); each refusal logged. */
int kv_dmabuf_probe(int fd, struct kv_dmabuf *out);

/* Whether [offset, offset + len) of the dma-buf d can be registered at
 * iova: 0 when it is GPU memory the software NIC reaches at iova (cu: the
 * CUDA module, NULL when absent; no_cuda_why: why, for the log), or -EINVAL
 * (the range is not in the dma-buf, or [iova, iova + len) is not CUDA
 * device memory of one allocation), -EOPNOTSUPP (an exporter kinet cannot
 * reach: host dma-bufs, other devices, no CUDA); each refusal logged. */
int kv_dmabuf_check(const struct kv_dmabuf *d, int fd, uint64_t offset, size_t len,
		    uint64_t iova, const struct kinet_cuda_ops *cu, const char *no_cuda_why);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dmabuf.c - the checks of kinet-verbs' ibv_reg_dmabuf_mr (dmabuf.h).
 *
 * The software NIC is a CPU: it reaches a dma-buf's memory only where
 * something else maps it. GPU memory that CUDA exported
 * (cuMemGetHandleForAddressRange) is reached by CUDA copies at the CUDA
 * address it was exported from, which perftest and NCCL pass as the iova;
 * so that is what is registered, once the checks that can be made hold.
 * A host dma-buf (udmabuf) would have to be mapped by kinet at an address
 * of its own, and the software NIC's MRs are addressed by their address
 * (iova equal to it): refused.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <kinet/kinet.h>
#include "core/driver.h"
#include "verbs/dmabuf.h"

/* The value of the line "key:\t<value>" of an fdinfo text, copied into
 * out (n bytes); false when there is none. */
static bool fdinfo_value(const char *text, const char *key, char *out, size_t n)
{
	size_t kl = strlen(key);
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, key, kl) || l[kl] != ':')
			continue;
		const char *v = l + kl + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		size_t m = strcspn(v, "\n");
		if (m >= n)
			m = n - 1;
		memcpy(out, v, m);
		out[m] = 0;
		return true;
	}
	return false;
}

int kv_dmabuf_parse(const char *fdinfo, struct kv_dmabuf *out)
{
	memset(out, 0, sizeof(*out));
	if (!fdinfo || !fdinfo_value(fdinfo, "exp_name", out->exp_name, sizeof(out->exp_name)))
		return -EINVAL;
	char sz[32];
	if (fdinfo_value(fdinfo, "size", sz, sizeof(sz)))
		out->size = strtoull(sz, NULL, 10);
	return 0;
}

int kv_dmabuf_probe(int fd, struct kv_dmabuf *out)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		/* as the kernel's dma_buf_get answers a descriptor not open */
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: fd %d is not an open descriptor (EBADF)",
			 fd);
		return -EBADF;
	}
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	int f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0) {
		int e = errno;
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: cannot read %s (%s): whether fd %d is a "
			 "dma-buf cannot be told (EOPNOTSUPP)",
			 path, strerror(e), fd);
		return -EOPNOTSUPP;
	}
	ssize_t n = read(f, text, sizeof(text) - 1);
	close(f);
	text[n > 0 ? n : 0] = 0;
	if (kv_dmabuf_parse(text, out)) {
		/* the kernel's dma_buf_get: -EINVAL for a file that is no dma-buf */
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: fd %d is not a dma-buf (no exp_name in %s) "
			 "(EINVAL)",
			 fd, path);
		return -EINVAL;
	}
	if (!out->size && st.st_size > 0)
		out->size = (uint64_t)st.st_size; /* a dma-buf's inode has its size */
	return 0;
}

static bool names(const char *exp_name, const char *what)
{
	char lower[sizeof(((struct kv_dmabuf *)0)->exp_name)];
	size_t i = 0;
	for (; exp_name[i] && i + 1 < sizeof(lower); i++)
		lower[i] = (char)tolower((unsigned char)exp_name[i]);
	lower[i] = 0;
	return strstr(lower, what) != NULL;
}

int kv_dmabuf_check(const struct kv_dmabuf *d, int fd, uint64_t offset, size_t len,
		    uint64_t iova, const struct kinet_cuda_ops *cu, const char *no_cuda_why)
{
	uint64_t end;
	if (!len) {
		/* ib_umem_dmabuf_get: -EINVAL for an empty range, */
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: an empty range of fd %d's dma-buf "
			 "(EINVAL)",
			 fd);
		return -EINVAL;
	}
	if (__builtin_add_overflow(offset, (uint64_t)len, &end) || end > d->size) {
		/* and for one that wraps or runs past the end */
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: [%" PRIu64 ", %" PRIu64 " + %zu) is not "
			 "within fd %d's dma-buf of %" PRIu64 " bytes (EINVAL)",
			 offset, offset, len, fd, d->size);
		return -EINVAL;
	}
	if (names(d->exp_name, "udmabuf")) {
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: fd %d is a host dma-buf (udmabuf): the "
			 "software NIC would reach it through a mapping of kinet's own, and it "
			 "registers memory at its address only (iova equal to the address); "
			 "register the memory with ibv_reg_mr instead (EOPNOTSUPP)",
			 fd);
		return -EOPNOTSUPP;
	}
	/* NVIDIA's kernel module names its dma-bufs "nv_dmabuf" (driver 580 on
	 * an H100, 2026-12-07); "nvidia" is the module's own name */
	if (!names(d->exp_name, "nvidia") && !names(d->exp_name, "nv_dmabuf")) {
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: fd %d's exporter is \"%s\": the software "
			 "NIC reaches only GPU memory that CUDA exported (exporter nv_dmabuf or "
			 "nvidia) (EOPNOTSUPP)",
			 fd, d->exp_name);
		return -EOPNOTSUPP;
	}
	if (!cu || !cu->pointer_kind) {
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: fd %d is GPU memory (exporter \"%s\") and "
			 "kinet's CUDA module is not loaded (%s): the software NIC cannot reach it "
			 "(EOPNOTSUPP)",
			 fd, d->exp_name, no_cuda_why && *no_cuda_why ? no_cuda_why : "no CUDA");
		return -EOPNOTSUPP;
	}
	uint64_t last;
	if (__builtin_add_overflow(iova, (uint64_t)len - 1, &last) || (uintptr_t)last != last) {
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: iova 0x%" PRIx64 " + %zu wraps (EINVAL)",
			 iova, len);
		return -EINVAL;
	}
	const void *first = (const void *)(uintptr_t)iova, *lastp = (const void *)(uintptr_t)last;
	bool gpu = cu->pointer_kind(first) == KINET_MEM_CUDA &&
		   cu->pointer_kind(lastp) == KINET_MEM_CUDA;
	struct kinet_cuda_mem m;
	if (gpu && cu->mem_info && cu->mem_info(first, &m) == 0)
		gpu = iova >= m.base && last - m.base < m.size; /* one allocation */
	if (!gpu) {
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: iova 0x%" PRIx64 " + %zu is not CUDA "
			 "device memory of one allocation of this process: kinet reaches a GPU "
			 "dma-buf at the CUDA address it was exported from, which the iova must be "
			 "(EINVAL)",
			 iova, len);
		return -EINVAL;
	}
	return 0;
}

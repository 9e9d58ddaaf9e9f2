/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cudrv.h - the few CUDA driver calls the mlx5 backend and kinet-info need,
 * reached through dlopen("libcuda.so.1"): libkinet has no link-time CUDA
 * dependency. Every call fails cleanly (-ENODEV) where there is no driver.
 */
#ifndef KINET_MLX5_CUDRV_H
#define KINET_MLX5_CUDRV_H

#include <stddef.h>
#include <stdint.h>

struct kinet_gpu_info {
	int ordinal;
	char name[128];
	char pci_bus_id[32];  /* "0000:17:00.0" (lower case) */
	int dmabuf;           /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
	int gdr;              /* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED */
	int host_ptr_same;    /* registered host memory has the same GPU address */
};

/* Loads the driver and initialises it once: 0, or -ENODEV and *why. */
int kinet_cudrv_load(char *why, size_t whylen);
/* CUDA driver version (e.g. 12040), 0 when absent. */
int kinet_cudrv_version(void);
/* Number of GPUs (0 without a driver). */
int kinet_cudrv_gpu_count(void);
int kinet_cudrv_gpu_info(int ordinal, struct kinet_gpu_info *out);
/* enum kinet_mem_kind of p: KINET_MEM_CUDA for device memory, else host. */
int kinet_cudrv_mem_kind(const void *p);
/* dma-buf fd covering [p, p+len) (page-aligned inside), and p's offset in it. */
int kinet_cudrv_dmabuf_fd(void *p, size_t len, int *fd, uint64_t *offset);
/* cuMemHostRegister (io: CU_MEMHOSTREGISTER_IOMEMORY) of a page-aligned
 * range; *devp gets its GPU address. 0, 1 when the range was registered
 * already (by someone else: leave it registered), or a negative errno. */
int kinet_cudrv_map(void *p, size_t len, int io, void **devp);
int kinet_cudrv_unmap(void *p);
/* Device memory of GPU `ordinal` (its primary context becomes current). */
int kinet_cudrv_alloc(int ordinal, size_t len, void **out);
int kinet_cudrv_free(void *p);
/* The address and size of the global `name` of a CUDA module (CUmodule):
 * 0, -ENOENT (no such global), -ENOSYS (a driver without the call), -ENODEV. */
int kinet_cudrv_module_global(void *module, const char *name, uint64_t *dptr, size_t *bytes);
int kinet_cudrv_memset(void *p, int v, size_t n);
int kinet_cudrv_read(void *dst, const void *src, size_t n);  /* device to host */
int kinet_cudrv_write(void *dst, const void *src, size_t n); /* host to device */
/* 1 when nvidia_peermem (or the older nv_peer_mem) is loaded. */
int kinet_peermem_loaded(void);
/* Name of the loaded peer-memory module, or NULL. */
const char *kinet_peermem_module(void);

#endif

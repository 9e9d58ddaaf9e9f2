/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sem.c - semaphore rings (kinet/sem.h): status words (one per 64-byte
 * line) and payloads in queue memory, which is host memory mapped into the
 * GPU when the CUDA module is loaded.
 */
#include <stdlib.h>
#include <string.h>
#include <kinet/sem.h>
#include <kinet/device_sem.h>
#include "core/internal.h"

struct kinet_sem {
	kinet_ctx *ctx;
	void *mem;
	size_t len;
	kn_sem desc;
};

int kinet_sem_create(kinet_ctx *ctx, uint32_t count, uint32_t item_size, kinet_sem **out)
{
	if (!ctx || !out || count == 0 || count > 65536 || item_size > 4096) {
		if (out)
			*out = NULL;
		KLOG_ERR("sem_create: %u items (1 .. 65536) of %u bytes (at most 4096)", count,
			 item_size);
		return -EINVAL;
	}
	*out = NULL;
	item_size = (item_size + 7) & ~7u;
	size_t status = (size_t)count * 64;
	size_t len = status + (size_t)count * item_size;
	kinet_sem *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->mem = kinet_queue_alloc(len ? len : 64);
	if (!s->mem) {
		free(s);
		return -ENOMEM;
	}
	s->ctx = ctx;
	s->len = len;
	s->desc.status = (uint32_t *)s->mem;
	s->desc.items = (uint8_t *)s->mem + status;
	s->desc.count = count;
	s->desc.item_size = item_size;
	*out = s;
	return 0;
}

int kinet_sem_destroy(kinet_sem *s)
{
	if (!s)
		return -EINVAL;
	kinet_queue_free(s->mem, s->len ? s->len : 64);
	free(s);
	return 0;
}

int kinet_sem_device(kinet_sem *s, struct kn_sem **out)
{
	if (!s || !out)
		return -EINVAL;
	*out = &s->desc;
	return 0;
}

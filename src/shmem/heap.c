/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap.c - the symmetric heaps: a first-fit allocator per heap (blocks in
 * address order, neighbours merged when freed), the same on every PE, so
 * that PEs making the same calls in the same order get the same offsets;
 * every collective call checked against the others' (sequence, kind, size,
 * alignment, resulting offset); local buffers registered for the NIC.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shmem/shmem_int.h"

int shm_heap_init(struct shm_heap *h)
{
	uint64_t start = h == &shm_g.heap[KN_SHMEM_HEAP_DEVICE] ? KN_SHMEM_RESERVED : 0;
	struct shm_block *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->off = start;
	b->len = h->len - start;
	h->blocks = b;
	return 0;
}

void shm_heap_fini(struct shm_heap *h)
{
	for (struct shm_block *b = h->blocks, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	h->blocks = NULL;
}

/* First fit: the offset of a new block, or UINT64_MAX when none fits. */
static uint64_t block_alloc(struct shm_heap *h, uint64_t size, uint64_t align)
{
	for (struct shm_block *b = h->blocks; b; b = b->next) {
		if (b->used)
			continue;
		uint64_t a = (b->off + align - 1) & ~(align - 1);
		if (a < b->off || a - b->off > b->len || size > b->len - (a - b->off))
			continue;
		if (a > b->off) { /* the gap before stays free */
			struct shm_block *g = calloc(1, sizeof(*g));
			if (!g)
				return UINT64_MAX;
			g->off = b->off;
			g->len = a - b->off;
			*b = (struct shm_block){a, b->len - g->len, false, b->next};
			struct shm_block **pp = &h->blocks;
			while (*pp != b)
				pp = &(*pp)->next;
			g->next = b;
			*pp = g;
		}
		if (b->len > size) { /* the rest stays free */
			struct shm_block *r = calloc(1, sizeof(*r));
			if (!r)
				return UINT64_MAX;
			r->off = b->off + size;
			r->len = b->len - size;
			r->next = b->next;
			b->next = r;
			b->len = size;
		}
		b->used = true;
		return b->off;
	}
	return UINT64_MAX;
}

/* The used block starting at off, or NULL. */
static struct shm_block *block_at(struct shm_heap *h, uint64_t off)
{
	for (struct shm_block *b = h->blocks; b; b = b->next)
		if (b->off == off)
			return b->used ? b : NULL;
	return NULL;
}

static void block_free(struct shm_heap *h, uint64_t off)
{
	struct shm_block *prev = NULL, *b = h->blocks;
	while (b && b->off != off) {
		prev = b;
		b = b->next;
	}
	if (!b)
		return;
	b->used = false;
	struct shm_block *n = b->next;
	if (n && !n->used) {
		b->len += n->len;
		b->next = n->next;
		free(n);
	}
	if (prev && !prev->used) {
		prev->len += b->len;
		prev->next = b->next;
		free(b);
	}
}

/* ---- agreement ----------------------------------------------------------------------- */

/* What each PE did in one collective call of the heap. */
struct heap_rec {
	uint64_t seq;
	uint32_t op;   /* 1 alloc, 2 free */
	int32_t kind;
	uint64_t size, align;
	uint64_t off;  /* alloc: where the block landed; free: the block (UINT64_MAX: NULL) */
	int32_t rc;    /* this PE's own result */
	uint32_t pad;
};

static void describe(const struct heap_rec *r, char *buf, size_t cap)
{
	const char *heap = r->kind == KINET_SHMEM_HOST ? "host" : "device";
	if (r->op == 1)
		snprintf(buf, cap, "allocated %llu bytes aligned to %llu from the %s heap (call %llu)",
			 (unsigned long long)r->size, (unsigned long long)r->align, heap,
			 (unsigned long long)r->seq);
	else if (r->op == 2 && r->off == UINT64_MAX)
		snprintf(buf, cap, "freed NULL (call %llu)", (unsigned long long)r->seq);
	else if (r->op == 2)
		snprintf(buf, cap, "freed the %s heap's block at offset %llu (call %llu)", heap,
			 (unsigned long long)r->off, (unsigned long long)r->seq);
	else
		snprintf(buf, cap, "made call %llu of another kind", (unsigned long long)r->seq);
}

/* Allgathers mine and compares every PE's record: 0, the first PE's own
 * error (every PE returns it), or -EINVAL when they disagree (every PE logs
 * the first difference). */
static int agree(const struct heap_rec *mine, const char *what)
{
	struct heap_rec *all = calloc((size_t)shm_g.n, sizeof(*all));
	if (!all)
		return -ENOMEM;
	int rc = kinet_boot_allgather(shm_g.boot, mine, all, sizeof(*mine));
	if (rc) {
		SHLOG_ERR("%s: the exchange with the other PEs failed: %s", what, kinet_strerror(rc));
		free(all);
		return rc;
	}
	const struct heap_rec *a = &all[0];
	for (int p = 1; p < shm_g.n && !rc; p++) {
		const struct heap_rec *b = &all[p];
		if (b->seq == a->seq && b->op == a->op && b->kind == a->kind && b->size == a->size &&
		    b->align == a->align && (b->off == a->off || b->rc || a->rc))
			continue;
		char da[160], db[160];
		describe(a, da, sizeof(da));
		describe(b, db, sizeof(db));
		SHLOG_ERR("%s refused: the PEs disagree on sizes or order: PE %d %s, PE 0 %s", what, p,
			  db, da);
		rc = -EINVAL;
	}
	for (int p = 0; p < shm_g.n && !rc; p++)
		if (all[p].rc) {
			SHLOG_ERR("%s failed on PE %d: %s", what, p, kinet_strerror(all[p].rc));
			rc = all[p].rc;
		}
	free(all);
	return rc;
}

/* ---- allocation ------------------------------------------------------------------------- */

int kinet_shmem_alloc(size_t size, size_t align, int kind, unsigned flags, void **out)
{
	if (!shm_g.up || !out)
		return -EINVAL;
	*out = NULL;
	if (align == 0)
		align = 64;
	struct heap_rec r;
	memset(&r, 0, sizeof(r));
	r.seq = ++shm_g.alloc_seq;
	r.op = 1;
	r.kind = kind;
	r.size = size;
	r.align = align;
	r.off = UINT64_MAX;
	if (size == 0 || (align & (align - 1)) || (kind != KINET_SHMEM_DEVICE && kind != KINET_SHMEM_HOST) ||
	    (flags & ~1u)) {
		SHLOG_ERR("alloc: invalid arguments (size %zu, alignment %zu, kind %d, flags %#x)",
			  size, align, kind, flags);
		r.rc = -EINVAL;
	}
	struct shm_heap *h = &shm_g.heap[kind == KINET_SHMEM_HOST ? 1 : 0];
	if (!r.rc) {
		r.off = block_alloc(h, size, align);
		if (r.off == UINT64_MAX) {
			uint64_t free_b = 0, big = 0;
			for (const struct shm_block *b = h->blocks; b; b = b->next)
				if (!b->used) {
					free_b += b->len;
					big = b->len > big ? b->len : big;
				}
			SHLOG_ERR("alloc: %zu bytes (aligned to %zu) do not fit in the %s heap of %llu "
				  "bytes (%llu free, the largest free block %llu): refused (malloc returns "
				  "NULL); raise %s", size, align, kind == KINET_SHMEM_HOST ? "host" : "device",
				  (unsigned long long)h->len, (unsigned long long)free_b,
				  (unsigned long long)big,
				  kind == KINET_SHMEM_HOST ? "KINET_SHMEM_HOST_HEAP_SIZE"
							   : "NVSHMEM_SYMMETRIC_SIZE or "
							     "KINET_SHMEM_HEAP_SIZE (which wins)");
			r.rc = -ENOMEM;
		}
	}
	/* zeroed before the exchange: no peer writes into it before that */
	if (!r.rc && (flags & 1)) {
		if (h->kind == KINET_MEM_CUDA)
			r.rc = shm_cuda_memset(h->base + r.off, 0, size);
		else
			memset(h->base + r.off, 0, size);
	}
	int rc = agree(&r, "alloc");
	if (rc) {
		if (r.off != UINT64_MAX)
			block_free(h, r.off);
		return rc;
	}
	*out = h->base + r.off;
	return 0;
}

static void *alloc_or_null(size_t size, size_t align, int kind, unsigned flags)
{
	void *p = NULL;
	if (size == 0)
		return NULL;
	int rc = kinet_shmem_alloc(size, align, kind, flags, &p);
	if (rc && shm_g.up && !shm_g.host_error)
		shm_g.host_error = rc;
	return rc ? NULL : p;
}

void *kinet_shmem_malloc(size_t size)
{
	return alloc_or_null(size, 0, KINET_SHMEM_DEVICE, 0);
}

void *kinet_shmem_calloc(size_t count, size_t size)
{
	if (size && count > SIZE_MAX / size) {
		SHLOG_ERR("calloc: %zu x %zu bytes overflow", count, size);
		return NULL;
	}
	return alloc_or_null(count * size, 0, KINET_SHMEM_DEVICE, 1);
}

void *kinet_shmem_align(size_t alignment, size_t size)
{
	if (alignment == 0) {
		SHLOG_ERR("align: alignment 0");
		return NULL;
	}
	return alloc_or_null(size, alignment, KINET_SHMEM_DEVICE, 0);
}

void *kinet_shmem_malloc_host(size_t size)
{
	return alloc_or_null(size, 0, KINET_SHMEM_HOST, 0);
}

/* The heap holding p and its offset: 0 or 1, or -1. */
static int heap_of(const void *p, uint64_t *off)
{
	for (int h = 0; h < 2; h++) {
		const struct shm_heap *hp = &shm_g.heap[h];
		uintptr_t a = (uintptr_t)p, b = (uintptr_t)hp->base;
		if (hp->base && a >= b && a - b < hp->len) {
			*off = a - b;
			return h;
		}
	}
	return -1;
}

int kinet_shmem_free(void *ptr)
{
	if (!shm_g.up)
		return -EINVAL;
	struct heap_rec r;
	memset(&r, 0, sizeof(r));
	r.seq = ++shm_g.alloc_seq;
	r.op = 2;
	r.off = UINT64_MAX;
	int h = -1;
	if (ptr) {
		h = heap_of(ptr, &r.off);
		r.kind = h == 1 ? KINET_SHMEM_HOST : KINET_SHMEM_DEVICE;
		if (h < 0 || !block_at(&shm_g.heap[h], r.off)) {
			SHLOG_ERR("free: %p is not a block of the symmetric heap", ptr);
			r.rc = -EINVAL;
		}
	}
	int rc = agree(&r, "free");
	if (rc)
		return rc;
	if (h >= 0)
		block_free(&shm_g.heap[h], r.off);
	return 0;
}

void *kinet_shmem_ptr(const void *dest, int pe)
{
	uint64_t off;
	if (!shm_g.up || pe < 0 || pe >= shm_g.n)
		return NULL;
	int h = heap_of(dest, &off);
	if (h < 0 || knx_sh_reserved(h, off))
		return NULL;
	if (pe == shm_g.me)
		return (void *)dest;
	struct shm_peer *p = &shm_g.peers[pe];
	return p->local && p->map[h] ? p->map[h] + off : NULL;
}

/* ---- registered buffers -------------------------------------------------------------------- */

static int regs_push(void)
{
	uint32_t n = 0;
	for (int i = 0; i < KN_SHMEM_MAX_REGS; i++) {
		struct shm_reg *r = &shm_g.regs[i];
		if (!r->mr)
			continue;
		shm_g.host.regs[n].base = (uint64_t)(uintptr_t)r->addr;
		shm_g.host.regs[n].len = r->len;
		shm_g.host.regs[n].lkey = kinet_mr_lkey(r->mr);
		n++;
	}
	shm_g.host.nregs = n;
	return shm_push_state();
}

int kinet_shmem_buffer_register(void *addr, size_t len)
{
	if (!shm_g.up || !addr || !len)
		return -EINVAL;
	int slot = -1;
	for (int i = 0; i < KN_SHMEM_MAX_REGS; i++) {
		if (shm_g.regs[i].mr && shm_g.regs[i].addr == addr)
			return -EEXIST;
		if (!shm_g.regs[i].mr && slot < 0)
			slot = i;
	}
	if (slot < 0) {
		SHLOG_ERR("buffer_register: %d buffers are registered already", KN_SHMEM_MAX_REGS);
		return -ENOSPC;
	}
	kinet_mr *mr;
	int rc = kinet_mr_reg(shm_g.pd, addr, len, KINET_ACCESS_LOCAL_WRITE, &mr);
	if (rc) {
		SHLOG_ERR("buffer_register(%p, %zu): %s", addr, len, kinet_strerror(rc));
		return rc;
	}
	shm_g.regs[slot] = (struct shm_reg){addr, len, mr};
	return regs_push();
}

int kinet_shmem_buffer_unregister(void *addr)
{
	if (!shm_g.up || !addr)
		return -EINVAL;
	for (int i = 0; i < KN_SHMEM_MAX_REGS; i++) {
		struct shm_reg *r = &shm_g.regs[i];
		if (r->mr && r->addr == addr) {
			int rc = kinet_mr_dereg(r->mr);
			if (rc)
				return rc;
			memset(r, 0, sizeof(*r));
			return regs_push();
		}
	}
	return -ENOENT;
}

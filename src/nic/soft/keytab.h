/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * keytab.h - a key table: memory regions by key, as a NIC holds them.
 *
 * key = index << 8 | tag (lkey == rkey), index 1 .. 2^24-1, tag 1 .. 255
 * (mlx5's invalid lkey 0x100 never occurs). Keys are unpredictable and slow
 * to recur: each table starts from a random tag step and a shuffled slot
 * order, a freed slot is reused only after every slot freed before it (a
 * FIFO of at least KINET_KEYTAB_MIN_FREE slots: the table grows rather than
 * reuse sooner), and a reused slot takes the next tag of its own sequence,
 * so the same key comes back only after 255 reuses of its slot, i.e. after
 * at least 255 * KINET_KEYTAB_MIN_FREE registrations.
 */
#ifndef KINET_MEM_KEYTAB_H
#define KINET_MEM_KEYTAB_H

#include "core/driver.h"
#include "nic/soft/rules.h"

#define KINET_KEYTAB_MIN_FREE 1024u

struct kinet_keytab {
	pthread_rwlock_t lock; /* writers first: readers re-take it after every pass */
	kinet_mr **tab;        /* cap slots; slot 0 unused */
	uint8_t *tag;          /* last tag per slot */
	uint32_t cap;
	uint32_t *fifo;        /* free slots, oldest first: ring of cap entries */
	uint32_t fhead, nfree;
	uint8_t step;          /* odd: the tag sequence of every slot */
	uint64_t rng;          /* shuffles the order of new slots */
	/* the view the GPU engine reads (rules.h), once enabled: vcap slots in
	 * memory mapped into the GPU, written with the table (NULL: none) */
	struct kn_keyent *view;
	uint32_t vcap;
	size_t vbytes;
};

int kinet_keytab_init(struct kinet_keytab *kt);
void kinet_keytab_fini(struct kinet_keytab *kt);
/* Caller holds the table for writing. Sets mr->key and mr->rkey: 0 or -ENOMEM. */
int kinet_keytab_insert(struct kinet_keytab *kt, kinet_mr *mr);
/* Caller holds the table for writing. */
void kinet_keytab_remove(struct kinet_keytab *kt, kinet_mr *mr);

/* Creates (or regrows to the table's size) the view the GPU engine reads.
 * Caller holds the table for writing, engines stopped. 0 or -ENOMEM. */
int kinet_keytab_view_enable(struct kinet_keytab *kt);
/* Rewrites mr's entry of the view (revoked). Caller holds the table for writing. */
void kinet_keytab_view_update(struct kinet_keytab *kt, const kinet_mr *mr);

/* Result of a memory check by the NIC. */
struct kinet_mr_ref {
	uint8_t *ptr; /* translated address */
	int kind;     /* enum kinet_mem_kind */
	kinet_mr *mr; /* the region */
};

/* Checks that [addr, addr+len) lies in the region named by key, that the
 * region belongs to pd (NULL: any) and grants `access` (0 = local read).
 * Returns 0 and the translation, or the failed check (enum kinet_reason,
 * never 0): unknown key, wrong PD, revoked, access missing, out of bounds,
 * tested in that order. The caller keeps the table from changing across
 * the access (holds it for reading, or writers are stopped). */
int kinet_keytab_check(const struct kinet_keytab *kt, const kinet_pd *pd, uint32_t key,
		       uint64_t addr, uint64_t len, unsigned access, struct kinet_mr_ref *out);

#endif

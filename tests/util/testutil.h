/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the Criterion tests. */
#ifndef KINET_TESTUTIL_H
#define KINET_TESTUTIL_H
#include <stddef.h>
#include <stdint.h>
#include <kinet/kinet.h>

/* Deterministic pseudo-random bytes (xorshift), never all zero. */
void tu_fill_random(void *buf, size_t n, uint64_t seed);
uint64_t tu_rand64(uint64_t *state);

/* A buffer with inaccessible guard pages on both sides: any write outside
 * [ptr, ptr+len) by the NIC faults. */
struct tu_guarded {
	uint8_t *ptr;
	size_t len;
	void *map;
	size_t maplen;
};
int tu_guarded_alloc(struct tu_guarded *g, size_t len);
void tu_guarded_free(struct tu_guarded *g);

/* One context, PD and a connected pair of QPs (a -> b) in this process. */
struct tu_pair {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *a, *b;
	kn_qp *da, *db;
};
int tu_pair_open(struct tu_pair *p, const struct kinet_qp_attr *attr);
void tu_pair_close(struct tu_pair *p);
#endif

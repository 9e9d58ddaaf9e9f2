/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_sem.h - semaphore rings, device side (C and CUDA; CPU threads
 * use the same calls on the host descriptor): item idx of a ring has a
 * status word and item_size payload bytes. A producer fills the payload,
 * then sets the status (release: the payload is visible first); a consumer
 * waits for a status, reads the payload (acquire), and sets the next status.
 * Across kernels and to the CPU: the ring is host memory mapped into the GPU,
 * the orderings are at system scope. The host creates it (kinet/sem.h).
 */
#ifndef KINET_DEVICE_SEM_H
#define KINET_DEVICE_SEM_H

#include <stdint.h>
#include <kinet/prm.h>
#include <kinet/device_port.h>

/* Status values (any other value is the caller's own). */
enum kn_sem_status {
	KN_SEM_FREE = 0,  /* the producer may fill the item */
	KN_SEM_READY = 1, /* filled: the consumer may take it */
	KN_SEM_DONE = 2,  /* consumed: the producer may reclaim it */
	KN_SEM_HOLD = 3,  /* taken, in progress */
	KN_SEM_EXIT = 4,  /* no more items: stop */
};

/* The descriptor of a ring (kinet_sem_device()). */
typedef struct kn_sem {
	uint32_t *status;   /* count words, each on a 64-byte line of its own */
	uint8_t *items;     /* count x item_size bytes */
	uint32_t count;
	uint32_t item_size; /* a multiple of 8 */
} kn_sem;

KN_INLINE volatile uint32_t *knx_sem_word(const kn_sem *s, uint32_t idx)
{
	return (volatile uint32_t *)(s->status + (size_t)(idx % s->count) * 16u);
}

/* The payload of item idx (idx is taken modulo the ring's size). */
KN_INLINE void *kn_sem_item(const kn_sem *s, uint32_t idx)
{
	return s->items + (size_t)(idx % s->count) * s->item_size;
}

/* Sets the status of item idx after the caller's writes to its payload. */
KN_INLINE void kn_sem_set(const kn_sem *s, uint32_t idx, uint32_t status)
{
	KN_FENCE_SYS();
	*knx_sem_word(s, idx) = status;
	KN_FENCE_SYS();
}

/* The status of item idx; the payload reads after it see what the setter
 * wrote before it. */
KN_INLINE uint32_t kn_sem_get(const kn_sem *s, uint32_t idx)
{
	uint32_t v = *knx_sem_word(s, idx);
	KN_FENCE_ACQ();
	return v;
}

/* Waits until item idx has the given status: 0, or -ETIMEDOUT after
 * timeout_ns (0: forever). */
KN_INLINE int kn_sem_wait(const kn_sem *s, uint32_t idx, uint32_t status, uint64_t timeout_ns)
{
	uint64_t t0 = 0;
	for (;;) {
		if (kn_sem_get(s, idx) == status)
			return 0;
		if (timeout_ns) {
			uint64_t now = kn_now_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 >= timeout_ns)
				return -ETIMEDOUT;
		}
		KN_PAUSE();
	}
}

#endif /* KINET_DEVICE_SEM_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/sem.h - semaphore rings (host control path): a ring of items, each a
 * status word and a payload of the caller's, in host memory mapped into the
 * GPU, for handing batches (say, of received packets) from one kernel to
 * another or to a CPU thread. The device side (kn_sem_*, kinet/device_sem.h)
 * is portable C, so a CPU thread uses the same calls on the host descriptor.
 *
 * Every call returns 0 or a negative errno (kinet_strerror()).
 */
#ifndef KINET_SEM_H
#define KINET_SEM_H

#include <stdint.h>
#include <kinet/kinet.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kinet_sem kinet_sem;
struct kn_sem; /* kinet/device_sem.h */

/* A ring of count items (1 .. 65536) of item_size payload bytes each (0 ..
 * 4096, rounded up to 8), every status KN_SEM_FREE, payloads zero. */
int kinet_sem_create(kinet_ctx *ctx, uint32_t count, uint32_t item_size, kinet_sem **out);
int kinet_sem_destroy(kinet_sem *sem);
/* The descriptor for device code and CPU threads (a host pointer). */
int kinet_sem_device(kinet_sem *sem, struct kn_sem **out);

#ifdef __cplusplus
}
#endif
#endif /* KINET_SEM_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * monitor.h - the host memory monitor of the registration cache: a
 * userfaultfd (one per process) on which every cached host range is
 * registered; the kernel reports unmap (munmap, brk shrinking, free of an
 * mmap'ed chunk), remove (madvise DONTNEED/FREE/REMOVE) and remap (mremap)
 * of those ranges as events. Registration is in "missing" mode (the only
 * mode that reports them), so first touches of unpopulated pages of a
 * watched range are also reported: the monitor resolves them at once with
 * a zero page, as the kernel would have. It never takes a lock that a
 * thread touching memory might hold: invalidated ranges go into a ring the
 * caches read on their next call.
 */
#ifndef KINET_MEM_MONITOR_H
#define KINET_MEM_MONITOR_H
#include "core/internal.h"

/* Starts the monitor (once): 0, or -errno (no userfaultfd here: logged). */
int kinet_monitor_start(void);
/* Watches [start, end) (page aligned): 0, or -errno (memory the monitor
 * cannot watch: not private anonymous memory). */
int kinet_monitor_watch(uintptr_t start, uintptr_t end);
/* Reads every event the kernel has queued, now (a thread that unmapped
 * memory has returned only once its event was read: after this call every
 * such event is in the ring). Returns the ring's sequence number. */
uint64_t kinet_monitor_sync(void);
/* The ring's sequence number without reading the fd: cheap (an atomic load)
 * and complete for every thread whose unmap has returned (its event was
 * read, and that read's ranges are in the ring). */
uint64_t kinet_monitor_seq(void);
/* Calls fn(start, end, arg) for every range invalidated after sequence
 * `since`; false when some were lost (the ring wrapped): the caller must
 * drop everything it watches. */
bool kinet_monitor_ranges(uint64_t since, uint64_t upto,
			  void (*fn)(uintptr_t start, uintptr_t end, void *arg), void *arg);

#endif

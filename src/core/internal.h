/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * internal.h - what the core keeps to itself (src/core/, and the bootstrap
 * of src/boot/ beside it): everything of driver.h, the GPU helpers, and the
 * registration cache's and the stale-peer list's internals. Backends include
 * core/driver.h only.
 */
#ifndef KINET_CORE_INTERNAL_H
#define KINET_CORE_INTERNAL_H

#include "core/driver.h"
#include "gpu/gpu.h"

/* The rank shown in the prefix of log lines, set by the bootstrap once it
 * knows it (-1: unknown). Process-wide: the last one set. */
void kinet_log_set_rank(int rank);


/* ---- registration (src/core/mr.c, cache.c) ---------------------------------- */
/* Deregisters at once (no cache check): kinet_mr_dereg's body. */
int kinet_mr_dereg_now(kinet_mr *mr);
/* The registration cache (src/core/cache.c): is the cache deregistering mr
 * itself right now? The next cache of a context (the stats' walk). */
bool kinet_mr_cache_owns_dereg(const kinet_mr *mr);
struct kinet_mr_cache *kinet_mr_cache_next(const struct kinet_mr_cache *c);

#define KINET_STALE_MAX 1024u
/* The QP's connection to a peer in another process ends (RESET, destroy):
 * that peer descriptor is stale from now on (kinet_qp_connect_remote). */
void kinet_qp_forget_peer(kinet_qp *qp);

/* ---- raw posts (src/core/qp.c) ------------------------------------------------- */
/* The raw post shared by kinet_qp_post_raw and kinet_eth_txq_post_raw, which
 * check their arguments first (wqe of nbb WQEBBs: 1 .. KN_MAX_WQE_BBS, at
 * most the SQ's depth; the SQ in host memory). Under qp->raw_lock: waits for
 * room by consumed(obj), the NIC's consumer index (called with the lock
 * held), copies the WQE into the SQ, writes the doorbell record and, on
 * hardware, the register. Returns the WQE's first ticket, or -ETIMEDOUT
 * when the SQ stayed full for timeout_ns (not logged: the caller names its
 * queue). */
long long kinet_sq_post_raw(kinet_qp *qp, const void *wqe, uint32_t nbb, uint64_t timeout_ns,
			    uint64_t (*consumed)(void *obj), void *obj);

/* ---- statistics segment (src/core/stats.c; KINET_STATS, stats_fmt.h) --------- */
/* A context opened / about to close (kinet_open, kinet_close): with
 * KINET_STATS=1, the first one creates the segment and its writer thread. */
void kinet_stats_ctx_add(kinet_ctx *ctx);
void kinet_stats_ctx_remove(kinet_ctx *ctx);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.h - the published statistics segment (KINET_STATS, stats_fmt.h). */
#ifndef KINET_CORE_STATS_H
#define KINET_CORE_STATS_H
#include "internal.h"

/* A context opened / about to close (kinet_open, kinet_close): with
 * KINET_STATS=1, the first one creates the segment and its writer thread. */
void kinet_stats_ctx_add(kinet_ctx *ctx);
void kinet_stats_ctx_remove(kinet_ctx *ctx);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats_fmt.h - the shared-memory statistics segment a process publishes
 * under KINET_STATS=1 (/dev/shm/kinet-PID), read by kinet-stat. Layout,
 * native byte order (the reader runs on the same machine):
 *
 *   header (struct kinet_stats_hdr)
 *   names:   nnames entries of KINET_STATS_NAME bytes, NUL-padded: the
 *            counter names, ctx ones first (nctx_fields), then QP ones
 *            (nqp_fields), then cache ones (ncache_fields)
 *   records: nrec entries of rec_size bytes (struct kinet_stats_rec
 *            followed by its values, as many as its kind has fields)
 *
 * The writer (a thread of the process, every KINET_STATS_INTERVAL_MS)
 * rewrites the records between two increments of seq: odd while it
 * writes, even when a snapshot is complete. A reader copies the segment,
 * and keeps the copy when seq was even and unchanged before and after.
 */
#ifndef KINET_STATS_FMT_H
#define KINET_STATS_FMT_H
#include <stdint.h>

#define KINET_STATS_MAGIC "KNSTATS"
#define KINET_STATS_VERSION 1
#define KINET_STATS_NAME 32
#define KINET_STATS_PATH "/dev/shm/kinet-%d" /* the process id */

struct kinet_stats_hdr {
	char magic[8];       /* KINET_STATS_MAGIC */
	uint32_t version;    /* KINET_STATS_VERSION */
	uint32_t hdr_size;   /* sizeof(struct kinet_stats_hdr) */
	uint64_t size;       /* bytes of the whole segment */
	uint64_t seq;        /* seqlock: odd while the writer rewrites the records */
	uint64_t updated_ns; /* CLOCK_REALTIME of the last complete snapshot */
	int32_t pid;
	uint32_t interval_ms;
	uint32_t nctx_fields, nqp_fields, ncache_fields, nnames;
	uint32_t names_off, rec_off, rec_size;
	uint32_t nrec;       /* records in the snapshot */
	uint32_t nrec_max;   /* room for */
	uint32_t dropped;    /* QPs left out (no room) */
	uint8_t reserved[40];
};

enum { KINET_STATS_CTX = 1, KINET_STATS_QP = 2, KINET_STATS_CACHE = 3 };

struct kinet_stats_rec {
	uint32_t kind;   /* KINET_STATS_* */
	uint32_t ctx;    /* context number in the process */
	uint32_t id;     /* QP: its number; cache: its number in the context */
	int32_t state;   /* QP: enum kinet_qp_state; ctx: enum kinet_backend */
	char label[16];  /* ctx: backend name; QP: endpoint state */
	/* uint64_t values[] follow */
};
_Static_assert(sizeof(struct kinet_stats_hdr) == 128, "stats header is 128 bytes");
_Static_assert(sizeof(struct kinet_stats_rec) == 32, "stats record head is 32 bytes");

#endif

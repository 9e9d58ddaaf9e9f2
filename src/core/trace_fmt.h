/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trace_fmt.h - the binary WQE trace written under KINET_TRACE=FILE (read
 * by kinet-trace; docs/lifecycle.md, "WQE trace", describes it). Every
 * integer is little-endian. A file is one header, then records of
 * rec_size bytes in the order their buffers were written out (per thread;
 * sort by t_ns for a timeline).
 */
#ifndef KINET_TRACE_FMT_H
#define KINET_TRACE_FMT_H
#include <stdint.h>

#define KINET_TRACE_MAGIC "KNTRACE"  /* 8 bytes with the NUL */
#define KINET_TRACE_VERSION 1

struct kinet_trace_hdr {
	char magic[8];          /* KINET_TRACE_MAGIC */
	uint32_t version;       /* KINET_TRACE_VERSION */
	uint32_t rec_size;      /* sizeof(struct kinet_trace_rec) */
	uint64_t start_mono_ns; /* CLOCK_MONOTONIC at the start: t_ns counts from here */
	uint64_t start_real_ns; /* CLOCK_REALTIME at the same moment */
	uint32_t pid;
	uint32_t hdr_size;      /* sizeof(struct kinet_trace_hdr) */
	uint8_t reserved[24];
};

/* Record types. */
enum {
	KINET_TR_WQE = 1,  /* a send WQE taken by the NIC: executed, or handed to the wire */
	KINET_TR_CQE = 2,  /* a send CQE written */
	KINET_TR_RCQE = 3, /* a receive CQE written */
	KINET_TR_LOST = 4, /* records of qpn that the GPU engine could not write (its trace
			    * ring was full, KINET_GPU_ENGINE_TRACE_RECS): len says how many;
			    * written when the CPU found them missing, after the records it
			    * drained with them */
};
/* kinet_trace_rec.engine: a CPU engine's index (0 .. 63), or one of these. */
#define KINET_TR_ENGINE_GPU 0xfe  /* the GPU engine (the kernel, or its host form) */
#define KINET_TR_ENGINE_NONE 0xff /* not an engine thread */
/* How the producer announced the WQEs (kinet_trace_rec.db_form). */
enum {
	KINET_TR_DB_NONE = 0,
	KINET_TR_DB_WQE = 1,  /* register word naming the last WQE */
	KINET_TR_DB_PI = 2,   /* register word naming the next producer index */
	KINET_TR_DB_DBR = 3,  /* doorbell record only */
	KINET_TR_DB_BF = 4,   /* executed from the BlueFlame register */
};

struct kinet_trace_rec {
	uint64_t t_ns;     /* since start_mono_ns */
	uint32_t ctx;      /* context number in the process (0, 1, ...) */
	uint32_t qpn;
	uint32_t len;      /* payload bytes (CQE: byte count) */
	uint32_t lkey;     /* first local key of the WQE (0: none, inline) */
	uint32_t rkey;     /* remote key (0: none) */
	uint32_t pass;     /* engine pass number (0: not an engine thread, or the GPU engine) */
	uint16_t wqe_idx;  /* WQE index (CQE: wqe_counter) */
	uint8_t type;      /* KINET_TR_* */
	uint8_t opcode;    /* WQE: KN_OPCODE_*; CQE: the CQE opcode (op_own >> 4) */
	uint8_t syndrome;  /* error CQE: syndrome; else 0 */
	uint8_t reason;    /* error CQE: enum kinet_reason; else 0 */
	uint8_t db_form;   /* WQE: KINET_TR_DB_* */
	uint8_t engine;    /* engine index (KINET_TR_ENGINE_*: the GPU engine, none) */
};
#ifdef __cplusplus /* readers in C++ (the GPU tests) */
static_assert(sizeof(struct kinet_trace_hdr) == 64, "trace header is 64 bytes");
static_assert(sizeof(struct kinet_trace_rec) == 40, "trace record is 40 bytes");
#else
_Static_assert(sizeof(struct kinet_trace_hdr) == 64, "trace header is 64 bytes");
_Static_assert(sizeof(struct kinet_trace_rec) == 40, "trace record is 40 bytes");
#endif

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trace.h - the WQE trace (KINET_TRACE=FILE; format: trace_fmt.h). When the
 * tunable is not set, kinet_trace_on is false and every call site costs one
 * predictable branch on a read-only global.
 */
#ifndef KINET_CORE_TRACE_H
#define KINET_CORE_TRACE_H
#include <stdbool.h>
#include "core/trace_fmt.h"

struct kinet_qp;
struct kn_cqe64;

/* True once the trace file is open (set at the first kinet_open). Hidden:
 * one direct load at every call site, no GOT. */
extern bool kinet_trace_on __attribute__((visibility("hidden")));
/* The calling thread's engine index and pass (engine threads set them). */
extern __thread uint8_t kinet_trace_engine
	__attribute__((tls_model("initial-exec"), visibility("hidden")));
extern __thread uint32_t kinet_trace_pass
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

/* Opens the file of KINET_TRACE (once per process): 0, or -errno (logged). */
int kinet_trace_init(void);
/* The trace's clock now (never 0). */
uint64_t kinet_trace_now(void);
/* Appends a record (engine and pass are filled here, t_ns too unless set). */
void kinet_trace_emit(struct kinet_trace_rec *r);
/* Appends a record as it is: engine, pass and t_ns as the caller set them
 * (the GPU engine's records, drained on a CPU thread). */
void kinet_trace_emit_as(const struct kinet_trace_rec *r);
/* The trace's time (t_ns) of a CLOCK_MONOTONIC reading (kn_now_ns), never 0. */
uint64_t kinet_trace_at(uint64_t mono_ns);
/* A CQE of qp (send or receive) as a record. */
void kinet_trace_cqe(struct kinet_qp *qp, const struct kn_cqe64 *cqe, uint64_t len);
/* Writes out every thread's buffered records. */
void kinet_trace_flush(void);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the Criterion tests. */
#ifndef KINET_TESTUTIL_H
#define KINET_TESTUTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <kinet/kinet.h>
#include <kinet/device.h> /* the tests drive the device API from the host executor */

/* The main of the test programs (main.c) exits 77, which CTest reports as
 * skipped, when every test it ran was skipped. A program none of whose tests
 * can run on this machine sets this from a constructor: a function that
 * returns why (NULL: they can run), asked before any test starts. */
extern const char *(*tu_skip_program)(void);
/* Runs fn in a child process: what it returned there (a copy, up to 255
 * bytes), or NULL when it returned NULL or the child died (it is killed
 * after 60 s). */
const char *tu_ask_child(const char *(*fn)(void));

/* Deterministic pseudo-random bytes (xorshift), never all zero. */
void tu_fill_random(void *buf, size_t n, uint64_t seed);
/* Runs a shell command (printf format), its output discarded: its status,
 * the command printed on stderr when it failed. */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t tu_rand64(uint64_t *state);
/* How loaded this machine is, as a factor for the tests' bounds on a silent
 * peer: the 1-minute load average per online CPU, rounded up, from 1 (idle
 * or no /proc/loadavg) to 4. A bound of "no answer for N ms" that holds on an
 * idle machine is given N times this where the test sets it, so that a test
 * run beside others on 2 cores is not failed by its own scheduling. */
unsigned tu_load_scale(void);

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

/* Engine threads of the contexts tu_pair_open / tu_rawpair_open create
 * (0: KINET_ENGINE_THREADS). With 2 or more, a and b are served by different
 * engine threads. */
extern int tu_engine_threads;

/* One context, PD and a connected pair of QPs (a -> b) in this process. */
struct tu_pair {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *a, *b;
	kn_qp *da, *db;
};
int tu_pair_open(struct tu_pair *p, const struct kinet_qp_attr *attr);
void tu_pair_close(struct tu_pair *p);

/* ---- regions with canaries ------------------------------------------------ */

/* Bytes of canary on each side of a tu_region, inside the guarded pages. */
#define TU_CANARY 64

/* A registered region [buf, buf+len) filled with random bytes, with
 * TU_CANARY random canary bytes right before and after it and guard pages
 * beyond those: a write just outside the region changes a canary, a wild
 * write faults. */
struct tu_region {
	struct tu_guarded g;
	uint8_t *buf;
	size_t len;
	kinet_mr *mr;
	uint64_t seed;
};
/* access: KINET_ACCESS_* (0 allowed: local read only). pd NULL: not registered. */
int tu_region_alloc(struct tu_region *r, kinet_pd *pd, size_t len, unsigned access,
		    uint64_t seed);
/* 1 when both canaries hold their original bytes. */
int tu_region_canaries_ok(const struct tu_region *r);
void tu_region_free(struct tu_region *r);
static inline uint32_t tu_lkey(const struct tu_region *r) { return kinet_mr_lkey(r->mr); }
static inline uint64_t tu_addr(const volatile void *p) { return (uint64_t)(uintptr_t)p; }

/* ---- raw posting ------------------------------------------------------------ */

/* A connected pair a -> b where a is driven with kinet_qp_post_raw and its
 * send CQ (acq, created here; a's own when the GPU engine is on, which
 * serves only such QPs: own_acq) with kinet_cq_poll; b has its own CQs and a
 * receive queue of rq_depth (0: none), driven with the device API (db). */
struct tu_rawpair {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_cq *acq;
	int own_acq;
	kinet_qp *a, *b;
	kn_qp *db;
	uint64_t pi; /* next ticket of a (host producer index) */
};
int tu_rawpair_open(struct tu_rawpair *p, uint32_t sq_depth, uint32_t rq_depth);
/* KINET_GPU_ENGINE is on or host (the GPU engine may take the QPs). */
int tu_geng_on(void);
/* With the GPU engine on (tu_geng_on): waits until it has given qp back
 * (after KINET_GPU_ENGINE_IDLE_US idle), when its counts reach the context's
 * and qp's counters; the WQEs it executed (0 when it is off), UINT64_MAX
 * after timeout_ms. */
uint64_t tu_engine_settle(kinet_qp *qp, int timeout_ms);
/* Moves a and b to RESET and connects them again (RTS): pi restarts at 0. */
int tu_rawpair_reconnect(struct tu_rawpair *p);
void tu_rawpair_close(struct tu_rawpair *p);
/* Posts one WQE of nbb blocks on a; returns its ticket (asserts success). */
uint64_t tu_post(struct tu_rawpair *p, const void *wqe, uint32_t nbb);
/* Polls the next CQE of cq, at most timeout_ms, yielding the CPU between
 * tries: 0 or -ETIMEDOUT. */
int tu_poll(kinet_cq *cq, struct kn_cqe64 *out, int timeout_ms);

/* An RDMA write WQE of one WQEBB (ctrl, raddr, data segments) at index idx
 * of QP qpn, asking for a CQE when signaled. */
static inline void tu_wqe_write(uint8_t w[64], uint16_t idx, uint32_t qpn, uint64_t laddr,
				uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t len,
				int signaled)
{
	for (int i = 0; i < 64; i++)
		w[i] = 0;
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, idx, KN_OPCODE_RDMA_WRITE, 0, qpn,
			signaled ? KN_WQE_CTRL_CQ_UPDATE : 0, 3, 0, 0);
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), len, lkey, laddr);
}

/* Fields of a CQE in host order. */
static inline uint8_t tu_cqe_op(const struct kn_cqe64 *c) { return c->op_own >> 4; }
static inline uint16_t tu_cqe_idx(const struct kn_cqe64 *c) { return kn_be16toh(c->wqe_counter); }
static inline uint8_t tu_cqe_synd(const struct kn_cqe64 *c)
{
	return ((const struct kn_err_cqe *)c)->syndrome;
}
/* ---- checks in child processes ------------------------------------------------- */

/* A forked side of a test (no Criterion there): a failed check prints where
 * and exits 1, which the parent asserts against. CK0: the call returns 0
 * (otherwise the error is printed with kinet_strerror). Users include
 * <unistd.h> (getpid, _exit) themselves: this header does not, its F_LOCK
 * would clash with tests' own names. */
#define CK(e)                                                                              \
	do {                                                                               \
		if (!(e)) {                                                                \
			fprintf(stderr, "[pid %d] %s:%d: check failed: %s\n", (int)getpid(),     \
				__FILE__, __LINE__, #e);                                   \
			fflush(stderr);                                                    \
			_exit(1);                                                          \
		}                                                                          \
	} while (0)
#define CK0(e)                                                                             \
	do {                                                                               \
		long long rc_ = (long long)(e);                                            \
		if (rc_ != 0) {                                                            \
			fprintf(stderr, "[pid %d] %s:%d: %s = %lld (%s)\n", (int)getpid(),       \
				__FILE__, __LINE__, #e, rc_, kinet_strerror((int)rc_));    \
			fflush(stderr);                                                    \
			_exit(1);                                                          \
		}                                                                          \
	} while (0)

/* ---- checks on host-executor threads ------------------------------------------ */

/* Criterion's asserts belong to the test's own thread. Code that runs on
 * kinet_host_exec threads checks with TU_CHECK instead: the first failure is
 * recorded in tu_fail_msg and the function returns its line number, which
 * kinet_host_exec hands back to the test (assert it is 0, print tu_fail_msg). */
extern char tu_fail_msg[512];
void tu_fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define TU_CHECK(cond, ...)                          \
	do {                                         \
		if (!(cond)) {                       \
			tu_fail(__LINE__, __VA_ARGS__); \
			return __LINE__;             \
		}                                    \
	} while (0)

/* ---- doorbell registers ----------------------------------------------------- */

/* Posts n single 64-byte puts src -> dst (registered: lkey, rkey), one at a
 * time, each waited for, and checks what each ring left in the registers:
 * rings alternate between qp->db and qp->db + qp->bf_alt (starting with the
 * one the QP's state names); in BlueFlame mode the register holds the whole
 * WQE, otherwise the first 8 bytes of its ctrl segment and nothing else;
 * the bytes arrive. Then one kn_put_signal (two WQEs: a doorbell word, never
 * BlueFlame). 0, or the failing line with tu_fail_msg set. */
int tu_check_rings(const kn_qp *qp, uint8_t *src, uint32_t lkey, uint8_t *dst, uint32_t rkey,
		   uint64_t *sig, uint32_t sig_rkey, int n);
#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The host control path: the RC state machine, argument checks, error and
 * syndrome strings, the tunables registry (with overrides from the
 * environment), log levels, counters, CQ overflow protection and the host
 * executor itself.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../util/testutil.h"

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- state machine ----------------------------------------------------------- */

Test(api, state_machine_transitions)
{
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *a, *b;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	cr_assert_eq(kinet_qp_create(pd, NULL, &a), 0);
	cr_assert_eq(kinet_qp_create(pd, NULL, &b), 0);
	struct kinet_qp_remote rb = {.local = b, .qpn = kinet_qp_num(b)};
	cr_assert_eq(kinet_qp_get_state(a), KINET_QPS_RESET);
	/* illegal from RESET */
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTR, &rb), -EINVAL);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTS, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_modify(a, 4, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_modify(a, 99, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_modify(a, -1, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_get_state(a), KINET_QPS_RESET, "a refused step changed the state");
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_INIT, NULL), 0);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_INIT, NULL), 0, "INIT -> INIT is legal");
	/* illegal from INIT */
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTS, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTR, NULL), -EINVAL, "RTR without the remote");
	struct kinet_qp_remote empty = {0};
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTR, &empty), -EINVAL, "RTR with an empty remote");
	cr_assert_eq(kinet_qp_get_state(a), KINET_QPS_INIT);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTR, &rb), 0);
	/* illegal from RTR */
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_INIT, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTR, &rb), -EINVAL);
	cr_assert_eq(kinet_qp_get_state(a), KINET_QPS_RTR);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTS, NULL), 0);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTS, NULL), 0, "RTS -> RTS is legal");
	/* illegal from RTS */
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_INIT, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTR, &rb), -EINVAL);
	cr_assert_eq(kinet_qp_get_state(a), KINET_QPS_RTS);
	/* ERR from anywhere; from ERR only RESET (or ERR) */
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_ERR, NULL), 0);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTS, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_INIT, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTR, &rb), -EINVAL);
	cr_assert_eq(kinet_qp_get_state(a), KINET_QPS_ERR);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_INIT, NULL), 0);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_ERR, NULL), 0, "INIT -> ERR");
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RESET, NULL), 0, "RESET -> RESET");
	cr_assert_eq(kinet_qp_modify(NULL, KINET_QPS_INIT, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_get_state(NULL), -EINVAL);
	/* names */
	cr_assert_str_eq(kinet_qp_state_str(KINET_QPS_RESET), "RESET");
	cr_assert_str_eq(kinet_qp_state_str(KINET_QPS_INIT), "INIT");
	cr_assert_str_eq(kinet_qp_state_str(KINET_QPS_RTR), "RTR");
	cr_assert_str_eq(kinet_qp_state_str(KINET_QPS_RTS), "RTS");
	cr_assert_str_eq(kinet_qp_state_str(KINET_QPS_ERR), "ERR");
	cr_assert_not_null(kinet_qp_state_str(42));
	cr_assert_eq(kinet_close(ctx), -EBUSY, "close with QPs alive");
	cr_assert_eq(kinet_pd_free(pd), -EBUSY, "PD freed while QPs use it");
	cr_assert_eq(kinet_qp_destroy(a), 0);
	cr_assert_eq(kinet_qp_destroy(b), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}

/* WQEs posted while the QP is in INIT or RTR wait for RTS; RESET clears
 * the send queue and the CQ so that the QP starts again from index 0. */
Test(api, queues_follow_the_state)
{
	struct tu_rawpair p;
	cr_assert_eq(tu_rawpair_open(&p, 8, 4), 0);
	uint32_t qpn = kinet_qp_num(p.a);
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_INIT, NULL), 0);
	uint8_t w[64];
	struct kn_cqe64 cqe;
	for (int i = 0; i < 3; i++) {
		memset(w, 0, sizeof(w));
		kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)p.pi, KN_OPCODE_NOP, 0, qpn,
				KN_WQE_CTRL_CQ_UPDATE, 1, 0, 0);
		tu_post(&p, w, 1);
	}
	sleep_ms(20);
	cr_assert_eq(kinet_cq_poll(p.acq, &cqe), -EBUSY, "a QP in INIT executed a WQE");
	struct kinet_qp_remote rb = {.local = p.b, .qpn = kinet_qp_num(p.b)};
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_RTR, &rb), 0);
	sleep_ms(20);
	cr_assert_eq(kinet_cq_poll(p.acq, &cqe), -EBUSY, "a QP in RTR executed a WQE");
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_RTS, NULL), 0);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(kinet_cq_poll_wait(p.acq, &cqe, 10000), 0);
		cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ);
		cr_assert_eq(tu_cqe_idx(&cqe), i);
	}
	/* RESET with published but unexecuted WQEs (the QP in INIT): they are
	 * gone, the next WQE is index 0 again */
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_RESET, NULL), 0);
	p.pi = 0;
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_INIT, NULL), 0);
	for (int i = 0; i < 2; i++) {
		kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)p.pi, KN_OPCODE_NOP, 0, qpn,
				KN_WQE_CTRL_CQ_UPDATE, 1, 0, 0);
		tu_post(&p, w, 1);
	}
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_RESET, NULL), 0);
	p.pi = 0;
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_INIT, NULL), 0);
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_RTR, &rb), 0);
	cr_assert_eq(kinet_qp_modify(p.a, KINET_QPS_RTS, NULL), 0);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 0, KN_OPCODE_NOP, 0, qpn, KN_WQE_CTRL_CQ_UPDATE,
			1, 0, 0);
	cr_assert_eq(tu_post(&p, w, 1), 0);
	cr_assert_eq(kinet_cq_poll_wait(p.acq, &cqe, 10000), 0);
	cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ, "first WQE after RESET: %s",
		     kinet_syndrome_str(tu_cqe_synd(&cqe)));
	cr_assert_eq(tu_cqe_idx(&cqe), 0);
	sleep_ms(20);
	cr_assert_eq(kinet_cq_poll(p.acq, &cqe), -EBUSY, "WQEs dropped by RESET were executed");
	tu_rawpair_close(&p);
}

/* The engine never writes a CQE the consumer has not released: with the CQ
 * full it waits, and nothing is overwritten. */
Test(api, cq_full_engine_waits)
{
	struct tu_rawpair p;
	cr_assert_eq(tu_rawpair_open(&p, 8, 0), 0);
	uint32_t qpn = kinet_qp_num(p.a);
	uint8_t w[64];
	/* 8 fill the CQ, 8 more fill the SQ behind it */
	for (int i = 0; i < 16; i++) {
		memset(w, 0, sizeof(w));
		kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)p.pi, KN_OPCODE_NOP, 0, qpn,
				KN_WQE_CTRL_CQ_UPDATE, 1, 0, 0);
		tu_post(&p, w, 1);
	}
	sleep_ms(20);
	struct kinet_counters c;
	cr_assert_eq(kinet_ctx_counters(p.ctx, &c), 0);
	cr_assert_eq(c.cqes, 8, "%llu CQEs written into a CQ of 8", (unsigned long long)c.cqes);
	for (int i = 0; i < 16; i++) {
		struct kn_cqe64 cqe;
		cr_assert_eq(tu_poll(p.acq, &cqe, 10000), 0, "CQE %d", i);
		cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ);
		cr_assert_eq(tu_cqe_idx(&cqe), i, "CQE %d names WQE %u", i, tu_cqe_idx(&cqe));
	}
	tu_rawpair_close(&p);
}

/* ---- argument checks ------------------------------------------------------------ */

Test(api, argument_checks)
{
	kinet_ctx *ctx;
	cr_assert_eq(kinet_open(NULL, NULL), -EINVAL);
	struct kinet_ctx_attr bad = {.backend = 99};
	cr_assert_eq(kinet_open(&bad, &ctx), -EINVAL);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	cr_assert_eq(kinet_ctx_backend(ctx), KINET_BACKEND_SOFT);
	kinet_pd *pd;
	cr_assert_eq(kinet_pd_alloc(ctx, NULL), -EINVAL);
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	uint8_t buf[256];
	kinet_mr *mr;
	cr_assert_eq(kinet_mr_reg(pd, buf, 0, KINET_ACCESS_ALL, &mr), -EINVAL, "empty region");
	cr_assert_eq(kinet_mr_reg(pd, NULL, 16, KINET_ACCESS_ALL, &mr), -EINVAL);
	cr_assert_eq(kinet_mr_reg(pd, buf, sizeof(buf), 0x10, &mr), -EINVAL, "unknown access bit");
	cr_assert_eq(kinet_mr_reg(pd, buf, sizeof(buf), KINET_ACCESS_REMOTE_WRITE, &mr), -EINVAL,
		     "remote write without local write");
	cr_assert_eq(kinet_mr_reg(pd, buf, sizeof(buf), KINET_ACCESS_REMOTE_ATOMIC, &mr), -EINVAL,
		     "remote atomic without local write");
	cr_assert_eq(kinet_mr_reg(pd, (void *)(uintptr_t)(UINTPTR_MAX - 10), 100,
				  KINET_ACCESS_LOCAL_WRITE, &mr) < 0, 1, "region wrapping the address space");
	cr_assert_eq(kinet_mr_reg(pd, buf, sizeof(buf), KINET_ACCESS_REMOTE_READ, &mr), 0);
	cr_assert_neq(kinet_mr_lkey(mr), 0x100, "the invalid lkey was handed out");
	cr_assert_eq(kinet_mr_addr(mr), buf);
	cr_assert_eq(kinet_mr_len(mr), sizeof(buf));
	cr_assert_eq(kinet_mr_kind(mr), KINET_MEM_HOST);
	cr_assert_eq(kinet_pd_free(pd), -EBUSY, "PD freed while a region uses it");
	cr_assert_eq(kinet_mr_dereg(mr), 0);
	cr_assert_eq(kinet_mr_dereg(NULL), -EINVAL);

	kinet_cq *cq;
	cr_assert_eq(kinet_cq_create(ctx, 0, &cq), -EINVAL);
	cr_assert_eq(kinet_cq_create(ctx, 100, &cq), 0);
	cr_assert_eq(kinet_cq_depth(cq), 128, "depth rounds up to a power of two");

	kinet_qp *qp;
	struct kinet_qp_attr at;
	memset(&at, 0, sizeof(at));
	at.sq_depth = 65536;
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), -EINVAL, "SQ deeper than 32768");
	at.sq_depth = 16;
	at.max_inline = KN_MAX_INLINE_WRITE + 1;
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), -EINVAL, "max_inline");
	at.max_inline = 0;
	at.db_mode = 7;
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), -EINVAL, "db_mode");
	at.db_mode = 0;
	at.share = 9;
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), -EINVAL, "share");
	at.share = 0;
	at.rnr_retry = 8;
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), -EINVAL, "rnr_retry");
	at.rnr_retry = 0;
	at.sq_depth = 100;
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), 0);
	kn_qp *d;
	cr_assert_eq(kinet_qp_device(qp, &d), 0);
	cr_assert_eq(d->sq_wqe_cnt, 128, "SQ depth rounds up");
	cr_assert_eq(d->cq_cqe_cnt, 128);
	cr_assert_eq(d->max_inline, KN_MAX_INLINE_WRITE);
	cr_assert_neq(d->db_mode, KN_DB_AUTO, "the doorbell mode was not resolved");
	cr_assert_eq(d->rq_wqe_cnt, 0);
	cr_assert_eq(kinet_qp_device(qp, NULL), -EINVAL);

	/* kinet_qp_post_raw */
	uint8_t w[KN_SEND_WQE_BB * 17];
	memset(w, 0, sizeof(w));
	cr_assert_eq(kinet_qp_post_raw(qp, w, 0), -EINVAL);
	cr_assert_eq(kinet_qp_post_raw(qp, w, KN_MAX_WQE_BBS + 1), -EINVAL);
	cr_assert_eq(kinet_qp_post_raw(qp, NULL, 1), -EINVAL);
	cr_assert_eq(kinet_qp_post_raw(NULL, w, 1), -EINVAL);
	cr_assert_eq(kinet_qp_destroy(qp), 0);

	/* the device API needs a dedicated send CQ as deep as the SQ */
	at.sq_depth = 64;
	at.send_cq = cq; /* 128 deep */
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), 0);
	cr_assert_eq(kinet_qp_device(qp, &d), -EINVAL, "send CQ deeper than the SQ");
	cr_assert_eq(kinet_cq_destroy(cq), -EBUSY, "CQ destroyed under a QP");
	cr_assert_eq(kinet_qp_destroy(qp), 0);
	kinet_qp *q1, *q2;
	at.sq_depth = 128;
	cr_assert_eq(kinet_qp_create(pd, &at, &q1), 0);
	cr_assert_eq(kinet_qp_device(q1, &d), 0, "dedicated CQ of the right depth");
	cr_assert_eq(kinet_qp_create(pd, &at, &q2), 0);
	cr_assert_eq(kinet_qp_device(q1, &d), -EINVAL, "shared send CQ");
	cr_assert_eq(kinet_qp_device(q2, &d), -EINVAL, "shared send CQ");
	cr_assert_eq(kinet_qp_destroy(q1), 0);
	cr_assert_eq(kinet_qp_destroy(q2), 0);
	/* the context outlives its objects: close refuses while any exists */
	cr_assert_eq(kinet_close(ctx), -EBUSY, "close with a CQ and a PD alive");
	cr_assert_eq(kinet_cq_destroy(cq), 0);
	cr_assert_eq(kinet_close(ctx), -EBUSY, "close with a PD alive");
	cr_assert_eq(kinet_mr_reg(pd, buf, sizeof(buf), KINET_ACCESS_LOCAL_WRITE, &mr), 0);
	cr_assert_eq(kinet_close(ctx), -EBUSY, "close with a region alive");
	cr_assert_eq(kinet_mr_dereg(mr), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
	cr_assert_eq(kinet_close(NULL), -EINVAL);
}

Test(api, auto_backend_reports_why)
{
	kinet_ctx *ctx;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_AUTO};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	const char *why = kinet_ctx_backend_reason(ctx);
	cr_assert_not_null(why);
	cr_assert_gt(strlen(why), 0, "no reason given for the backend choice");
	if (kinet_ctx_backend(ctx) == KINET_BACKEND_SOFT)
		cr_assert_not_null(strstr(why, "mlx5"), "auto chose soft without saying why: %s", why);
	cr_assert_eq(kinet_close(ctx), 0);
	cr_assert_str_eq(kinet_backend_name(KINET_BACKEND_SOFT), "soft");
	cr_assert_str_eq(kinet_backend_name(KINET_BACKEND_MLX5), "mlx5");
	cr_assert_str_eq(kinet_backend_name(KINET_BACKEND_AUTO), "auto");
	struct kinet_ctx_attr m = {.backend = KINET_BACKEND_MLX5};
	int rc = kinet_open(&m, &ctx);
	if (rc == 0) {
		cr_assert_eq(kinet_ctx_backend(ctx), KINET_BACKEND_MLX5);
		kinet_close(ctx);
	} else {
		cr_assert_lt(rc, 0);
		cr_assert_null(ctx);
	}
}

/* ---- errors and syndromes ------------------------------------------------------- */

Test(api, strerror)
{
	static const int codes[] = {EINVAL, ENOMEM, EBUSY, EIO, ETIMEDOUT, EACCES, ERANGE, ENODEV,
				    ENOSYS, ENOTSUP, EAGAIN, ENOENT, EEXIST, ENOTCONN, ECONNREFUSED,
				    ECONNRESET, EPROTO, EPERM, E2BIG, EOVERFLOW, EALREADY};
	const int n = (int)(sizeof(codes) / sizeof(codes[0]));
	cr_assert_str_eq(kinet_strerror(0), "success");
	for (int i = 0; i < n; i++) {
		const char *s = kinet_strerror(-codes[i]);
		cr_assert_not_null(s);
		cr_assert_gt(strlen(s), 3);
		cr_assert_str_neq(s, "unknown error", "code %d", codes[i]);
		cr_assert_str_eq(s, kinet_strerror(codes[i]), "sign of %d matters", codes[i]);
		for (int j = 0; j < i; j++)
			cr_assert_str_neq(s, kinet_strerror(-codes[j]), "codes %d and %d read the same",
					  codes[i], codes[j]);
	}
	/* an errno without a kinet text still gets the C library's */
	cr_assert_str_eq(kinet_strerror(-ENOSPC), strerror(ENOSPC));
	cr_assert_str_eq(kinet_strerror(-99999), "unknown error");
	cr_assert_not_null(kinet_strerror(INT32_MIN));
	/* kinet's own codes */
	for (int c = 2001; c <= 2003; c++) {
		cr_assert_str_neq(kinet_strerror(-c), "unknown error", "kinet code %d", c);
		cr_assert_str_neq(kinet_strerror(-c), kinet_strerror(-EINVAL));
	}
}

Test(api, syndrome_strings)
{
	static const uint32_t s[] = {
		KN_SYND_LOCAL_LENGTH_ERR,     KN_SYND_LOCAL_QP_OP_ERR,
		KN_SYND_LOCAL_PROT_ERR,       KN_SYND_WR_FLUSH_ERR,
		KN_SYND_MW_BIND_ERR,          KN_SYND_BAD_RESP_ERR,
		KN_SYND_LOCAL_ACCESS_ERR,     KN_SYND_REMOTE_INVAL_REQ_ERR,
		KN_SYND_REMOTE_ACCESS_ERR,    KN_SYND_REMOTE_OP_ERR,
		KN_SYND_TRANSPORT_RETRY_EXC_ERR, KN_SYND_RNR_RETRY_EXC_ERR,
		KN_SYND_REMOTE_ABORTED_ERR,
	};
	const int n = (int)(sizeof(s) / sizeof(s[0]));
	const char *unknown = kinet_syndrome_str(0x77);
	cr_assert_not_null(unknown);
	for (int i = 0; i < n; i++) {
		const char *a = kinet_syndrome_str(s[i]);
		cr_assert_not_null(a);
		cr_assert_str_neq(a, unknown, "syndrome 0x%x has no name", s[i]);
		for (int j = 0; j < i; j++)
			cr_assert_str_neq(a, kinet_syndrome_str(s[j]));
	}
	cr_assert_str_neq(kinet_syndrome_str(0), unknown);
	cr_assert_str_eq(kinet_syndrome_str(KN_SYND_REMOTE_ACCESS_ERR), "remote access error");
	cr_assert_str_eq(kinet_db_mode_str(KN_DB_GPU), "gpu");
	cr_assert_str_eq(kinet_db_mode_str(KN_DB_BLUEFLAME), "blueflame");
	cr_assert_str_eq(kinet_db_mode_str(KN_DB_CPU_PROXY), "cpu");
}

/* ---- tunables ----------------------------------------------------------------- */

Test(api, tunables_registry)
{
	int n = kinet_tunable_count();
	cr_assert_geq(n, 10, "only %d tunables", n);
	cr_assert_null(kinet_tunable_at(-1));
	cr_assert_null(kinet_tunable_at(n));
	for (int i = 0; i < n; i++) {
		const struct kinet_tunable *t = kinet_tunable_at(i);
		cr_assert_not_null(t);
		cr_assert_not_null(t->name);
		cr_assert_eq(strncmp(t->name, "KINET_", 6), 0, "tunable %s", t->name);
		cr_assert_not_null(t->def, "%s has no default", t->name);
		cr_assert_not_null(t->value, "%s has no value", t->name);
		cr_assert_not_null(t->desc);
		cr_assert_gt(strlen(t->desc), 10, "%s: description too short", t->name);
		cr_assert_eq(kinet_tunable_str(t->name), t->value, "lookup of %s", t->name);
		if (!getenv(t->name) || !*getenv(t->name))
			cr_assert_str_eq(t->value, t->def, "%s: value without the environment", t->name);
		for (int j = 0; j < i; j++)
			cr_assert_str_neq(t->name, kinet_tunable_at(j)->name, "duplicate %s", t->name);
	}
	cr_assert_null(kinet_tunable_str("KINET_NO_SUCH_TUNABLE"));
	cr_assert_eq(kinet_tunable_int("KINET_NO_SUCH_TUNABLE"), 0);
	const char *names[] = {"KINET_LOG", "KINET_BACKEND", "KINET_ENGINE_THREADS",
			       "KINET_TIMEOUT_MS", "KINET_SQ_DEPTH", "KINET_DB_MODE"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cr_assert_not_null(kinet_tunable_str(names[i]), "%s is not registered", names[i]);
	if (!getenv("KINET_SQ_DEPTH"))
		cr_assert_eq(kinet_tunable_int("KINET_SQ_DEPTH"), 256);
	/* the printed table names every tunable */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	cr_assert_not_null(f);
	kinet_tunables_print(f);
	fclose(f);
	for (int i = 0; i < n; i++)
		cr_assert_not_null(strstr(text, kinet_tunable_at(i)->name), "%s not printed",
				   kinet_tunable_at(i)->name);
	free(text);
}

/* Each Criterion test runs in a fresh process: the environment set here
 * comes before the registry's first (cached) read. */
Test(api, tunables_from_the_environment)
{
	cr_assert_eq(setenv("KINET_SQ_DEPTH", "64", 1), 0);
	cr_assert_eq(setenv("KINET_TIMEOUT_MS", "1234", 1), 0);
	cr_assert_eq(setenv("KINET_DB_MODE", "cpu", 1), 0);
	cr_assert_eq(kinet_tunable_int("KINET_SQ_DEPTH"), 64);
	cr_assert_str_eq(kinet_tunable_str("KINET_SQ_DEPTH"), "64");
	int found = 0;
	for (int i = 0; i < kinet_tunable_count(); i++) {
		const struct kinet_tunable *t = kinet_tunable_at(i);
		if (!strcmp(t->name, "KINET_SQ_DEPTH")) {
			found = 1;
			cr_assert_str_eq(t->value, "64");
			cr_assert_str_eq(t->def, "256", "the default is kept beside the value");
		}
	}
	cr_assert(found);
	/* and the library uses them */
	struct tu_pair p;
	cr_assert_eq(tu_pair_open(&p, NULL), 0);
	cr_assert_eq(p.da->sq_wqe_cnt, 64);
	cr_assert_eq(p.da->timeout_ns, 1234000000ull);
	cr_assert_eq(p.da->db_mode, KN_DB_CPU_PROXY);
	tu_pair_close(&p);
}

/* ---- log levels ---------------------------------------------------------------- */

/* Captures what fn writes to stderr. */
static char *capture_stderr(void (*fn)(void))
{
	fflush(stderr);
	FILE *tmp = tmpfile();
	cr_assert_not_null(tmp);
	int saved = dup(2);
	cr_assert_geq(saved, 0);
	cr_assert_geq(dup2(fileno(tmp), 2), 0);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	long n = ftell(tmp);
	char *s = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
	rewind(tmp);
	if (n > 0)
		cr_assert_eq(fread(s, 1, (size_t)n, tmp), (size_t)n);
	fclose(tmp);
	return s;
}

static void illegal_transition(void)
{
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	cr_assert_eq(kinet_qp_create(pd, NULL, &qp), 0);
	cr_assert_eq(kinet_qp_modify(qp, KINET_QPS_RTS, NULL), -EINVAL);
	kinet_qp_destroy(qp);
	kinet_pd_free(pd);
	kinet_close(ctx);
}

Test(api, log_level_set_and_get)
{
	if (!getenv("KINET_LOG"))
		cr_assert_eq(kinet_log_get_level(), KINET_LOG_WARN, "default level");
	kinet_log_set_level(KINET_LOG_DEBUG);
	cr_assert_eq(kinet_log_get_level(), KINET_LOG_DEBUG);
	kinet_log_set_level(-3);
	cr_assert_eq(kinet_log_get_level(), KINET_LOG_ERROR, "below error clamps to error");
	kinet_log_set_level(42);
	cr_assert_eq(kinet_log_get_level(), KINET_LOG_TRACE, "above trace clamps to trace");
	/* an illegal transition is logged at error level; debug messages
	 * (QP creation) appear only at debug level */
	kinet_log_set_level(KINET_LOG_ERROR);
	char *out = capture_stderr(illegal_transition);
	cr_assert_not_null(strstr(out, "illegal transition"), "stderr: %s", out);
	cr_assert_null(strstr(out, "[debug]"), "debug message at error level: %s", out);
	free(out);
	kinet_log_set_level(KINET_LOG_DEBUG);
	out = capture_stderr(illegal_transition);
	cr_assert_not_null(strstr(out, "[debug]"), "no debug message at debug level: %s", out);
	free(out);
}

Test(api, log_level_from_environment_name)
{
	cr_assert_eq(setenv("KINET_LOG", "debug", 1), 0);
	cr_assert_eq(kinet_log_get_level(), KINET_LOG_DEBUG);
}

Test(api, log_level_from_environment_upper_case)
{
	cr_assert_eq(setenv("KINET_LOG", "ERROR", 1), 0);
	cr_assert_eq(kinet_log_get_level(), KINET_LOG_ERROR);
}

Test(api, log_level_from_environment_number)
{
	cr_assert_eq(setenv("KINET_LOG", "4", 1), 0);
	cr_assert_eq(kinet_log_get_level(), KINET_LOG_TRACE);
}

Test(api, log_level_from_environment_bogus)
{
	cr_assert_eq(setenv("KINET_LOG", "loud", 1), 0);
	cr_assert_eq(kinet_log_get_level(), KINET_LOG_WARN);
}

/* ---- counters ---------------------------------------------------------------------- */

struct cenv {
	struct tu_pair p;
	struct tu_region r[3]; /* source, target, receive buffer */
};

static int counters_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct cenv *e = arg;
	struct tu_region *r = e->r;
	struct tu_pair *p = &e->p;
	kn_qp *q = p->da;
	kn_ticket_t t;
	for (uint32_t i = 1; i <= 10; i++)
		TU_CHECK(kn_put(q, tu_addr(r[1].buf), kinet_mr_rkey(r[1].mr), r[0].buf, tu_lkey(&r[0]),
				i * 100, &t) == 0 && kn_wait(q, t) == 0, "put");
	for (uint32_t i = 1; i <= 3; i++)
		TU_CHECK(kn_get(q, r[0].buf, tu_lkey(&r[0]), tu_addr(r[1].buf), kinet_mr_rkey(r[1].mr),
				i * 1000, &t) == 0 && kn_wait(q, t) == 0, "get");
	uint64_t old;
	for (int i = 0; i < 2; i++)
		TU_CHECK(kn_atomic_fetch_add(q, tu_addr(r[1].buf + 64), kinet_mr_rkey(r[1].mr), 1,
					     (uint64_t *)(r[0].buf + 64), tu_lkey(&r[0]), &old) == 0,
			 "fetch-add");
	kn_ticket_t rt;
	TU_CHECK(kn_recv_post(p->db, r[2].buf, tu_lkey(&r[2]), 4096, &rt) == 0, "recv");
	TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
	kn_prep_send(q, kn_wqe_ptr(q, t), t, tu_addr(r[0].buf), tu_lkey(&r[0]), 4000, 0, 0);
	kn_sq_submit(q, t, 1);
	TU_CHECK(kn_wait(q, t) == 0, "send");
	kn_recv_info info;
	TU_CHECK(kn_recv_poll(p->db, rt, 1, &info) == 0, "receive");
	return 0;
}

static int counters_err_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct cenv *e = arg;
	struct tu_region *r = e->r;
	kn_qp *q = e->p.da;
	kn_ticket_t t;
	/* a bad rkey, then three flushed writes */
	TU_CHECK(kn_put(q, tu_addr(r[1].buf), kinet_mr_rkey(r[1].mr) ^ 0x100, r[0].buf,
			tu_lkey(&r[0]), 10, &t) == 0, "put");
	TU_CHECK(kn_wait(q, t) == -EIO, "bad rkey");
	for (int i = 0; i < 3; i++)
		TU_CHECK(kn_put(q, tu_addr(r[1].buf), kinet_mr_rkey(r[1].mr), r[0].buf, tu_lkey(&r[0]),
				10, &t) == 0 && kn_wait(q, t) == -EIO, "flushed put");
	return 0;
}

Test(api, counters)
{
	struct cenv e;
	struct kinet_qp_attr at = {.sq_depth = 32, .rq_depth = 4, .db_mode = KN_DB_GPU};
	cr_assert_eq(tu_pair_open(&e.p, &at), 0);
	struct tu_pair *pp = &e.p;
	struct tu_region *r = e.r;
	cr_assert_eq(tu_region_alloc(&r[0], pp->pd, 8192, KINET_ACCESS_LOCAL_WRITE, 1), 0);
	cr_assert_eq(tu_region_alloc(&r[1], pp->pd, 8192, KINET_ACCESS_ALL, 2), 0);
	cr_assert_eq(tu_region_alloc(&r[2], pp->pd, 8192, KINET_ACCESS_LOCAL_WRITE, 3), 0);
	struct kinet_counters c;
	cr_assert_eq(kinet_ctx_counters(NULL, &c), -EINVAL);
	cr_assert_eq(kinet_ctx_counters(pp->ctx, NULL), -EINVAL);
	cr_assert_eq(kinet_ctx_counters(pp->ctx, &c), 0);
	cr_assert_eq(c.wqes, 0);
	cr_assert_eq(c.bytes, 0);
	tu_fail_msg[0] = 0;
	cr_assert_eq(kinet_host_exec(1, counters_fn, &e), 0, "%s", tu_fail_msg);
	cr_assert_eq(kinet_ctx_counters(pp->ctx, &c), 0);
	uint64_t bytes = 5500 + 6000 + 4000;
	cr_assert_eq(c.wqes, 16, "wqes %llu", (unsigned long long)c.wqes);
	cr_assert_eq(c.bytes, bytes, "bytes %llu, expected %llu", (unsigned long long)c.bytes,
		     (unsigned long long)bytes);
	cr_assert_eq(c.direct_bytes, bytes);
	cr_assert_eq(c.staged_bytes, 0);
	cr_assert_eq(c.cqes, 17, "cqes %llu (16 send, 1 receive)", (unsigned long long)c.cqes);
	cr_assert_eq(c.errors, 0);
	cr_assert_eq(c.flushed, 0);
	cr_assert_gt(c.doorbells + c.dbr_only, 0, "no doorbell counted");
	for (int i = 0; i < 64; i++)
		cr_assert_eq(c.by_syndrome[i], 0);

	cr_assert_eq(kinet_host_exec(1, counters_err_fn, &e), 0, "%s", tu_fail_msg);
	cr_assert_eq(kinet_ctx_counters(pp->ctx, &c), 0);
	cr_assert_eq(c.wqes, 16, "failed WQEs counted as executed");
	cr_assert_eq(c.bytes, bytes, "bytes of failed WQEs counted");
	cr_assert_eq(c.errors, 1);
	cr_assert_eq(c.flushed, 3);
	cr_assert_eq(c.by_syndrome[KN_SYND_REMOTE_ACCESS_ERR], 1);
	cr_assert_eq(c.by_syndrome[KN_SYND_WR_FLUSH_ERR], 3);
	cr_assert_eq(c.cqes, 21);
	for (int i = 0; i < 3; i++)
		tu_region_free(&r[i]);
	tu_pair_close(pp);
}

/* ---- host executor ------------------------------------------------------------------ */

struct hx {
	int seen[64];
	int n;
};

static int hx_fn(int tid, int n, void *arg)
{
	struct hx *h = arg;
	__atomic_fetch_add(&h->seen[tid], 1, __ATOMIC_SEQ_CST);
	h->n = n;
	return tid == 5 ? 77 : 0;
}

static int hx_ok(int tid, int n, void *arg)
{
	(void)n;
	struct hx *h = arg;
	__atomic_fetch_add(&h->seen[tid], 1, __ATOMIC_SEQ_CST);
	return 0;
}

Test(api, host_executor)
{
	struct hx h;
	memset(&h, 0, sizeof(h));
	cr_assert_eq(kinet_host_exec(0, hx_ok, &h), -EINVAL);
	cr_assert_eq(kinet_host_exec(-1, hx_ok, &h), -EINVAL);
	cr_assert_eq(kinet_host_exec(2, NULL, &h), -EINVAL);
	cr_assert_eq(kinet_host_exec(16, hx_ok, &h), 0);
	for (int i = 0; i < 16; i++)
		cr_assert_eq(h.seen[i], 1, "thread %d ran %d times", i, h.seen[i]);
	cr_assert_eq(h.seen[16], 0);
	memset(&h, 0, sizeof(h));
	cr_assert_eq(kinet_host_exec(8, hx_fn, &h), 77, "the non-zero result is returned");
	cr_assert_eq(h.n, 8);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(h.seen[i], 1);
}

/* ---- device-side timeouts ------------------------------------------------------------- */

/* A target without receive buffers (RNR retried forever) holds up the
 * sends: kn_wait and a reservation on the full SQ time out, cleanly: once
 * buffers come, everything completes, and the QP keeps working. */
struct tmo {
	struct tu_pair p;
	struct tu_region src, dst, rbuf;
};

static int timeout_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct tmo *e = arg;
	kn_qp *q = e->p.da, *r = e->p.db;
	kn_ticket_t t[2], t2, rt;
	for (int i = 0; i < 2; i++) {
		TU_CHECK(kn_sq_reserve(q, 1, &t[i]) == 0, "reserve");
		kn_prep_send(q, kn_wqe_ptr(q, t[i]), t[i], tu_addr(e->src.buf + i * 100),
			     tu_lkey(&e->src), 100, 0, 0);
		kn_sq_submit(q, t[i], 1);
	}
	TU_CHECK(kn_wait(q, t[0]) == -ETIMEDOUT, "wait on a send nobody can receive");
	TU_CHECK(kn_put(q, tu_addr(e->dst.buf), kinet_mr_rkey(e->dst.mr), e->src.buf,
			tu_lkey(&e->src), 64, &t2) == -ETIMEDOUT, "put on a full SQ");
	TU_CHECK(q->st->resv == 2, "the timed-out reservation was kept (resv %llu)",
		 (unsigned long long)q->st->resv);
	TU_CHECK(kn_qp_error(q, NULL) == 0, "a timeout is not an error CQE");
	for (int i = 0; i < 2; i++)
		TU_CHECK(kn_recv_post(r, e->rbuf.buf + i * 100, tu_lkey(&e->rbuf), 100, &rt) == 0,
			 "recv");
	TU_CHECK(kn_wait(q, t[1]) == 0, "the sends complete once buffers exist");
	for (int i = 0; i < 20; i++) {
		TU_CHECK(kn_put(q, tu_addr(e->dst.buf + i * 64), kinet_mr_rkey(e->dst.mr),
				e->src.buf + i * 64, tu_lkey(&e->src), 64, &t2) == 0, "put after");
		TU_CHECK(t2 == 2 + (uint64_t)i, "ticket %llu", (unsigned long long)t2);
		TU_CHECK(kn_wait(q, t2) == 0, "put %d after the timeouts: %s", i,
			 kinet_syndrome_str(kn_qp_error(q, NULL)));
	}
	TU_CHECK(memcmp(e->dst.buf, e->src.buf, 20 * 64) == 0, "data after the timeouts");
	TU_CHECK(memcmp(e->rbuf.buf, e->src.buf, 200) == 0, "the delayed sends");
	return 0;
}

static void timeout_case(int share)
{
	struct tmo e;
	struct kinet_qp_attr at = {.sq_depth = 2, .rq_depth = 4, .timeout_ms = 100,
				   .share = share};
	cr_assert_eq(tu_pair_open(&e.p, &at), 0);
	cr_assert_eq(e.p.da->timeout_ns, 100000000ull);
	cr_assert_eq(tu_region_alloc(&e.src, e.p.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 1), 0);
	cr_assert_eq(tu_region_alloc(&e.dst, e.p.pd, 4096, KINET_ACCESS_ALL, 2), 0);
	cr_assert_eq(tu_region_alloc(&e.rbuf, e.p.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 3), 0);
	tu_fail_msg[0] = 0;
	cr_assert_eq(kinet_host_exec(1, timeout_fn, &e), 0, "%s", tu_fail_msg);
	tu_region_free(&e.src);
	tu_region_free(&e.dst);
	tu_region_free(&e.rbuf);
	tu_pair_close(&e.p);
}

Test(api, device_timeouts_exclusive)
{
	timeout_case(KN_SHARE_EXCLUSIVE);
}

Test(api, device_timeouts_shared)
{
	timeout_case(KN_SHARE_GPU);
}

/* ---- deregistration under traffic ------------------------------------------------------ */

/* Thread 0 writes into a region as fast as it can; thread 1 deregisters
 * it. Once kinet_mr_dereg has returned, nothing lands there any more: the
 * next writes fail with a remote access error. */
struct dereg {
	struct tu_pair p;
	struct tu_region src, dst;
	uint8_t *snap;
	int deregistered, snapped;
	int writer_ended; /* the writer returned, whatever its result */
	int dereg_failed; /* the writer stops */
	uint64_t writes;  /* the writer's most writes (0: 2000000) */
};

static int dereg_side(int tid, struct dereg *e)
{
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr);
	if (tid == 0) {
		int rc = 0;
		kn_ticket_t t = 0;
		uint64_t most = e->writes ? e->writes : 2000000;
		for (uint64_t i = 0; i < most && rc == 0; i++) {
			TU_CHECK(!__atomic_load_n(&e->dereg_failed, __ATOMIC_ACQUIRE),
				 "the deregistering thread failed");
			size_t off = (size_t)(i * 4096) % (e->dst.len - 4096);
			rc = kn_put(q, tu_addr(e->dst.buf + off), rkey, e->src.buf + (i & 7) * 4096,
				    tu_lkey(&e->src), 4096, &t);
			if (rc == 0 && (i & 15) == 15)
				rc = kn_wait(q, t);
			if (__atomic_load_n(&e->snapped, __ATOMIC_ACQUIRE) && rc == 0)
				rc = kn_wait(q, t);
		}
		TU_CHECK(rc == -EIO, "writes into a deregistered region: %d", rc);
		TU_CHECK(kn_qp_error(q, NULL) == KN_SYND_REMOTE_ACCESS_ERR, "syndrome %s",
			 kinet_syndrome_str(kn_qp_error(q, NULL)));
		return 0;
	}
	/* the writer may fail or end before its 200th write: bounded */
	uint64_t t0 = kn_now_ns();
	while (KN_LOAD64(&q->st->done) < 200) {
		TU_CHECK(!__atomic_load_n(&e->writer_ended, __ATOMIC_ACQUIRE),
			 "the writer ended after %llu writes, before 200",
			 (unsigned long long)KN_LOAD64(&q->st->done));
		TU_CHECK(kn_now_ns() - t0 < 30000000000ull, "200 writes not done in 30 s (%llu)",
			 (unsigned long long)KN_LOAD64(&q->st->done));
		sched_yield();
	}
	TU_CHECK(kinet_mr_dereg(e->dst.mr) == 0, "dereg");
	e->dst.mr = NULL;
	memcpy(e->snap, e->dst.buf, e->dst.len);
	__atomic_store_n(&e->snapped, 1, __ATOMIC_RELEASE);
	return 0;
}

static int dereg_fn(int tid, int n, void *arg)
{
	(void)n;
	struct dereg *e = arg;
	int rc = dereg_side(tid, e);
	if (tid == 0)
		__atomic_store_n(&e->writer_ended, 1, __ATOMIC_RELEASE);
	else if (rc)
		__atomic_store_n(&e->dereg_failed, 1, __ATOMIC_RELEASE);
	return rc;
}

static void dereg_case(struct dereg *e)
{
	cr_assert_eq(tu_pair_open(&e->p, &(struct kinet_qp_attr){.sq_depth = 64}), 0);
	cr_assert_eq(tu_region_alloc(&e->src, e->p.pd, 8 * 4096, KINET_ACCESS_LOCAL_WRITE, 1), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->p.pd, 1 << 20, KINET_ACCESS_ALL, 2), 0);
	e->snap = malloc(e->dst.len);
	tu_fail_msg[0] = 0;
}

/* A writer that ends before the 200 writes the other thread waits for (made
 * to stop after 50): the deregistering thread says so and ends, it does not
 * wait for ever. */
Test(api, deregistration_thread_ends_when_the_writer_does)
{
	struct dereg e;
	memset(&e, 0, sizeof(e));
	e.writes = 50;
	dereg_case(&e);
	uint64_t t0 = kn_now_ns();
	cr_assert_neq(kinet_host_exec(2, dereg_fn, &e), 0, "50 writes passed for a deregistration");
	cr_assert_lt(kn_now_ns() - t0, 10000000000ull, "the threads took more than 10 s to end");
	free(e.snap);
	tu_region_free(&e.src);
	tu_region_free(&e.dst);
	tu_pair_close(&e.p);
}

Test(api, deregistration_under_traffic)
{
	struct dereg e;
	memset(&e, 0, sizeof(e));
	dereg_case(&e);
	cr_assert_eq(kinet_host_exec(2, dereg_fn, &e), 0, "%s", tu_fail_msg);
	cr_assert_arr_eq(e.dst.buf, e.snap, e.dst.len, "a write landed after kinet_mr_dereg returned");
	cr_assert(tu_region_canaries_ok(&e.dst));
	free(e.snap);
	tu_region_free(&e.src);
	tu_region_free(&e.dst);
	tu_pair_close(&e.p);
}

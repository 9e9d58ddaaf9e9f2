/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The software NIC's wire between processes on loopback: every opcode in
 * both directions on random data, remote protection errors, a target QP's
 * remote-access flags (eager and rendezvous writes, reads, atomics), RNR, a
 * peer killed mid-stream, reconnecting, and the endpoint descriptors.
 */
#define _GNU_SOURCE /* setns */
#include <criterion/criterion.h>
#include <rdma/fabric.h> /* FI_MAJOR, FI_MINOR */
#include <stddef.h>
#include "test_wire_common.h"

/* Sides a and b over one link; both must exit 0. */
static void run_two(tw_fn a, tw_fn b)
{
	tw_run_two(a, b, 60000);
}

Test(wire, every_opcode_both_directions)
{
	tw_need_wire();
	run_two(tw_ops_a, tw_ops_b);
}

/* ---- registration modes and GPU memory ------------------------------------------------ */

/* One side of the ops scenario with local descriptors forced on
 * (KINET_FI_MR_LOCAL=1, as a provider that needs FI_MR_LOCAL has them):
 * every buffer the wire hands the provider has a descriptor (none missing),
 * user regions are registered for the sends straight from them, and every
 * opcode still lands byte for byte. */
static int mrl_side(int fd, uint64_t own, uint64_t peer)
{
	setenv("KINET_FI_MR_LOCAL", "1", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, own);
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
	CK(wi.local_desc == 1);
	CK(wi.local_regs >= 4); /* receive, bounce, send and read buffers */
	tw_ops(&s, own, peer);
	CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
	if (wi.nodesc_ops || wi.desc_ops < 50 || wi.user_regs < 1)
		fprintf(stderr, "[pid %d] %s: %llu with descriptors, %llu without, %llu user "
				"regions\n", (int)getpid(), wi.provider,
			(unsigned long long)wi.desc_ops, (unsigned long long)wi.nodesc_ops,
			(unsigned long long)wi.user_regs);
	CK(wi.nodesc_ops == 0);
	CK(wi.desc_ops >= 50);
	CK(wi.user_regs >= 1);
	tw_close(&s);
	return 0;
}
static int mrl_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return mrl_side(fd, 1, 2);
}
static int mrl_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return mrl_side(fd, 2, 1);
}

Test(wire, every_opcode_with_local_descriptors)
{
	tw_need_wire();
	run_two(mrl_a, mrl_b);
}

/* What the wire says of itself: the provider it took (KINET_FI_PROVIDER),
 * the libfabric it loaded, and, with no GPU (this build or machine) or with
 * FI_HMEM off, that GPU payloads are staged and why; bad arguments fail. */
static int winfo_side(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	(void)fd;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *ctx;
	CK0(kinet_open(&ca, &ctx));
	struct kinet_wire_info wi;
	CK(kinet_wire_info(NULL, &wi, sizeof(wi)) == -EINVAL);
	CK(kinet_wire_info(ctx, NULL, sizeof(wi)) == -EINVAL);
	CK(kinet_wire_info(ctx, &wi, 0) == -EINVAL);
	memset(&wi, 0x5a, sizeof(wi));
	CK0(kinet_wire_info(ctx, &wi, sizeof(wi)));
	const char *want = getenv("KINET_FI_PROVIDER");
	CK(!strcmp(wi.provider, want && *want ? want : "tcp;ofi_rxm"));
	CK(FI_MAJOR(wi.fi_version) == 1 && FI_MINOR(wi.fi_version) >= 9);
	CK(wi.nodesc_ops == 0);
	/* peers of this host: over shm only with no provider set and the choice on
	 * (test_wire.samehost), which then runs every case here over it */
	const char *sh = getenv("KINET_FI_SAME_HOST");
	bool auto_sh = !(want && *want) && !(sh && !strcmp(sh, "off"));
	CK(!strcmp(wi.same_host, auto_sh ? "shm" : ""));
	CK(wi.same_host_why[0] != 0);
	CK(wi.qps_net == 0 && wi.qps_same_host == 0);
	const char *hm = getenv("KINET_FI_HMEM");
	if (hm && !strcmp(hm, "off")) {
		CK(wi.hmem == 0);
		CK(strstr(wi.hmem_why, "KINET_FI_HMEM=off") != NULL);
	} else if (!wi.hmem) {
		CK(wi.hmem_why[0] != 0); /* no GPU, or the provider offers no FI_HMEM */
	}
	/* a short size gets the start only */
	struct kinet_wire_info part;
	memset(&part, 0x5a, sizeof(part));
	CK0(kinet_wire_info(ctx, &part, offsetof(struct kinet_wire_info, fabric)));
	CK(!strcmp(part.provider, wi.provider));
	CK(((uint8_t *)&part)[offsetof(struct kinet_wire_info, fabric)] == 0x5a);
	CK0(kinet_close(ctx));
	return 0;
}

Test(wire, info_names_provider_and_gpu_path)
{
	tw_need_wire();
	struct tw_proc p[1] = {{.fn = winfo_side}};
	unsetenv("KINET_FI_HMEM");
	tw_run(p, 1, NULL, 0, NULL, 30000);
	cr_assert(tw_exited_ok(&p[0]), "status 0x%x", p[0].status);
	setenv("KINET_FI_HMEM", "off", 1);
	tw_run(p, 1, NULL, 0, NULL, 30000);
	unsetenv("KINET_FI_HMEM");
	cr_assert(tw_exited_ok(&p[0]), "KINET_FI_HMEM=off: status 0x%x", p[0].status);
}

/* With FI_HMEM asked for whatever the machine (KINET_FI_HMEM=on): the
 * endpoint keeps it only where the provider offers it and takes GPU memory
 * (tried on GPU memory first); otherwise the wire says why (no FI_HMEM, no
 * GPU memory to try, refused) and runs without it; host traffic is
 * unchanged, byte for byte, either way. */
static int hmem_side(int fd, uint64_t own, uint64_t peer)
{
	setenv("KINET_FI_HMEM", "on", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, own);
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
	/* FI_HMEM is kept only where GPU memory registers: without a GPU, or
	 * where the provider refuses it, the endpoint opens without it */
	if (!wi.hmem)
		CK(strstr(wi.hmem_why, "offers no FI_HMEM") || strstr(wi.hmem_why, "failed") ||
		   strstr(wi.hmem_why, "no GPU memory to try"));
	if (!strcmp(wi.provider, "shm") && !wi.hmem) /* libfabric's shm offers FI_HMEM */
		CK(!strstr(wi.hmem_why, "offers no FI_HMEM"));
	tw_ops(&s, own, peer);
	tw_close(&s);
	return 0;
}
static int hmem_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return hmem_side(fd, 1, 2);
}
static int hmem_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return hmem_side(fd, 2, 1);
}

Test(wire, every_opcode_with_fi_hmem_asked)
{
	tw_need_wire();
	run_two(hmem_a, hmem_b);
}

Test(wire, remote_protection_errors)
{
	tw_need_wire();
	run_two(tw_prot_a, tw_prot_b);
}

/* ---- a target QP's remote-access flags ------------------------------------------------ */

#define QA_BIG (256u << 10) /* above KINET_NET_RNDV_BYTES: a rendezvous write */

/* b's QP replaced by one serving only `access` (kinet_qp_attr.remote_access),
 * a's by an ordinary one, connected. */
static void qa_new(struct tw_side *s, uint32_t access)
{
	CK(tw_sync(s->fd, 0x51) == 0x51);
	CK0(kinet_qp_destroy(s->qp));
	struct kinet_qp_attr a = TW_QP_ATTR(s);
	a.remote_access = access;
	CK0(kinet_qp_create(s->pd, &a, &s->qp));
	tw_qp_connect(s->qp, s->fd);
	CK0(kinet_qp_device(s->qp, &s->d));
}

/* Waits for a ticket refused by the target QP: remote access error with its
 * reason (carried back over the wire), the QP in ERR. */
static void qa_refused(struct tw_side *s, kn_ticket_t t)
{
	tw_expect_fail(s, t, KN_SYND_REMOTE_ACCESS_ERR);
	uint32_t why = 0;
	CK(kn_qp_error(s->d, &why) == KN_SYND_REMOTE_ACCESS_ERR);
	if (why != KINET_REASON_QP_ACCESS)
		fprintf(stderr, "[pid %d] reason %u (%s)\n", (int)getpid(), why,
			kinet_reason_str((int)why));
	CK(why == KINET_REASON_QP_ACCESS);
}

/* a: the requester. 1: b allows writes only: an eager and a rendezvous
 * write land, a read is refused, the write after it flushed. 2-4: b allows
 * nothing: an eager write, a rendezvous write, an atomic refused. */
static int qa_a(int fd, int fd2, void *arg)
{
	(void)fd2, (void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	uint32_t lkey = kinet_mr_lkey(s.mr);
	uint8_t *keep = malloc(TW_LEN);
	CK(keep);
	/* 1 */
	tw_qp_new(&s);
	kn_ticket_t t0 = tw_post_write(&s, TW_Q, TW_P, 4096, 0, 0);
	kn_ticket_t t1 = tw_post_write(&s, TW_Q + 4096, TW_P + 4096, QA_BIG, 0, 0);
	CK0(kn_wait(s.d, t0));
	CK0(kn_wait(s.d, t1));
	memcpy(keep, s.buf, TW_LEN);
	kn_ticket_t t2, t3;
	CK0(kn_get(s.d, s.buf + TW_L, lkey, s.peer.addr + TW_P, s.peer.rkey, 5000, &t2));
	t3 = tw_post_write(&s, TW_Q, TW_P + 8 * 4096 + QA_BIG, 4096, 0, 0);
	qa_refused(&s, t2);
	CK(kn_wait(s.d, t3) == -EIO);
	CK(tu_cqe_synd(knx_cqe_at(s.d, t3)) == KN_SYND_WR_FLUSH_ERR);
	CK(memcmp(s.buf, keep, TW_LEN) == 0); /* the refused read landed nothing */
	/* 2 */
	tw_qp_new(&s);
	qa_refused(&s, tw_post_write(&s, TW_Q, TW_S, 4096, 0, 0));
	/* 3 */
	tw_qp_new(&s);
	qa_refused(&s, tw_post_write(&s, TW_Q, TW_S + 8192, QA_BIG, 0, 0));
	/* 4 */
	tw_qp_new(&s);
	CK0(kn_sq_reserve(s.d, 1, &t0));
	kn_prep_atomic_fa(s.d, kn_wqe_ptr(s.d, t0), t0, (uint64_t)(uintptr_t)(s.buf + TW_L), lkey,
			  s.peer.addr + TW_W, s.peer.rkey, 1);
	kn_sq_submit(s.d, t0, 1);
	qa_refused(&s, t0);
	CK(memcmp(s.buf, keep, TW_LEN) == 0);
	CK(tw_sync(fd, 1) == 1); /* b checks its region */
	CK(tw_sync(fd, 2) == 2);
	free(keep);
	tw_close(&s);
	return 0;
}

static int qa_b(int fd, int fd2, void *arg)
{
	(void)fd2, (void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	qa_new(&s, KINET_QP_ACCESS_SET | KINET_ACCESS_REMOTE_WRITE);
	for (int i = 0; i < 3; i++)
		qa_new(&s, KINET_QP_ACCESS_SET);
	CK(tw_sync(fd, 1) == 1);
	/* the two allowed writes landed, nothing else changed */
	uint8_t *a = malloc(TW_LEN), *want = malloc(TW_LEN);
	CK(a && want);
	tu_fill_random(a, TW_LEN, 1);
	tu_fill_random(want, TW_LEN, 2);
	memcpy(want + TW_P, a + TW_Q, 4096 + QA_BIG);
	CK(memcmp(s.buf, want, TW_LEN) == 0);
	CK(kinet_qp_get_state(s.qp) == KINET_QPS_RTS); /* as for a region's access error */
	free(a);
	free(want);
	CK(tw_sync(fd, 2) == 2);
	tw_close(&s);
	return 0;
}

Test(wire, target_qp_remote_access)
{
	tw_need_wire();
	run_two(qa_a, qa_b);
}

Test(wire, receiver_not_ready)
{
	tw_need_wire();
	run_two(tw_rnr_a, tw_rnr_b);
}

Test(wire, peer_killed_mid_stream_then_reconnect)
{
	tw_need_wire();
	static const int links[][2] = {{0, 1}, {0, 2}};
	struct tw_proc p[3] = {{.fn = tw_kill_a}, {.fn = tw_kill_b}, {.fn = tw_kill_c}};
	tw_run(p, 3, links, 2, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(WIFSIGNALED(p[1].status) && WTERMSIG(p[1].status) == SIGKILL,
		  "side b was to be killed: status 0x%x", p[1].status);
	cr_assert(tw_exited_ok(&p[2]), "side c: status 0x%x", p[2].status);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The software NIC's wire between processes on loopback: every opcode in
 * both directions on random data, remote protection errors, RNR, a peer
 * killed mid-stream, reconnecting, and the endpoint descriptors.
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

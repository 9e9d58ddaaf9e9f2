/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The software NIC's wire between processes on loopback: every opcode in
 * both directions on random data, remote protection errors, RNR, a peer
 * killed mid-stream, reconnecting, and the endpoint descriptors.
 */
#define _GNU_SOURCE /* setns */
#include <criterion/criterion.h>
#include "test_wire_common.h"

static const int one_link[][2] = {{0, 1}};

/* Skips when the build has no wire (no libfabric, or no provider). */
static void need_wire(void)
{
	int w = tw_have_wire();
	if (w == 77)
		cr_skip_test("this build has no libfabric wire (or its provider is missing)");
	cr_assert_eq(w, 0, "a context with a wire endpoint could not be opened");
}

Test(wire, every_opcode_both_directions)
{
	need_wire();
	struct tw_proc p[2] = {{.fn = tw_ops_a}, {.fn = tw_ops_b}};
	tw_run(p, 2, one_link, 1, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

Test(wire, remote_protection_errors)
{
	need_wire();
	struct tw_proc p[2] = {{.fn = tw_prot_a}, {.fn = tw_prot_b}};
	tw_run(p, 2, one_link, 1, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

Test(wire, receiver_not_ready)
{
	need_wire();
	struct tw_proc p[2] = {{.fn = tw_rnr_a}, {.fn = tw_rnr_b}};
	tw_run(p, 2, one_link, 1, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

Test(wire, peer_killed_mid_stream_then_reconnect)
{
	need_wire();
	static const int links[][2] = {{0, 1}, {0, 2}};
	struct tw_proc p[3] = {{.fn = tw_kill_a}, {.fn = tw_kill_b}, {.fn = tw_kill_c}};
	tw_run(p, 3, links, 2, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(WIFSIGNALED(p[1].status) && WTERMSIG(p[1].status) == SIGKILL,
		  "side b was to be killed: status 0x%x", p[1].status);
	cr_assert(tw_exited_ok(&p[2]), "side c: status 0x%x", p[2].status);
}

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

Test(wire, every_opcode_both_directions)
{
	struct tw_proc p[2] = {{.fn = tw_ops_a}, {.fn = tw_ops_b}};
	tw_run(p, 2, one_link, 1, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The software NIC's wire between two network namespaces joined by a veth
 * pair that the test creates and removes (addresses in 10.232.0.0/16, only
 * inside those namespaces): every opcode both ways, and cutting the link
 * (errors within the network timeout, then reconnecting). Needs root and
 * iproute2; skipped otherwise.
 */
#define _GNU_SOURCE /* setns */
#include <stdarg.h>
#include <criterion/criterion.h>
#include "test_wire_common.h"

static char ns_a[32], ns_b[32], if_a[16], if_b[16];
static int ns_made;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	char full[600];
	snprintf(full, sizeof(full), "%s >/dev/null 2>&1", cmd);
	int rc = system(full);
	if (rc != 0)
		fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
	return rc;
}

static void ns_down(void)
{
	if (!ns_made)
		return;
	sh("ip netns del %s", ns_a); /* takes its end of the veth pair with it */
	sh("ip netns del %s", ns_b);
	ns_made = 0;
}

/* Two namespaces and a veth pair between them; 0, or skips the test. */
static void ns_up(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to create network namespaces");
	if (system("ip -V >/dev/null 2>&1") != 0)
		cr_skip_test("needs iproute2 (ip)");
	int id = (int)(getpid() % 100000);
	int x = (int)(getpid() % 250) + 1;
	snprintf(ns_a, sizeof(ns_a), "kinet-wa%d", id);
	snprintf(ns_b, sizeof(ns_b), "kinet-wb%d", id);
	snprintf(if_a, sizeof(if_a), "kwa%d", id);
	snprintf(if_b, sizeof(if_b), "kwb%d", id);
	ns_made = 1;
	int rc = sh("ip netns add %s", ns_a) || sh("ip netns add %s", ns_b) ||
		 sh("ip link add %s type veth peer name %s", if_a, if_b) ||
		 sh("ip link set %s netns %s", if_a, ns_a) || sh("ip link set %s netns %s", if_b, ns_b) ||
		 sh("ip -n %s addr add 10.232.%d.1/30 dev %s", ns_a, x, if_a) ||
		 sh("ip -n %s addr add 10.232.%d.2/30 dev %s", ns_b, x, if_b) ||
		 sh("ip -n %s link set lo up", ns_a) || sh("ip -n %s link set lo up", ns_b) ||
		 sh("ip -n %s link set %s up", ns_a, if_a) || sh("ip -n %s link set %s up", ns_b, if_b);
	if (rc) {
		sh("ip link del %s", if_a); /* when it never moved into a namespace */
		ns_down();
		cr_assert_fail("could not build the two namespaces");
	}
}

TestSuite(wire_netns, .fini = ns_down);

static const int one_link[][2] = {{0, 1}};

Test(wire_netns, every_opcode_both_directions)
{
	tw_need_wire();
	ns_up();
	struct tw_proc p[2] = {{.fn = tw_ops_a, .netns = ns_a, .iface = if_a},
			       {.fn = tw_ops_b, .netns = ns_b, .iface = if_b}};
	tw_run(p, 2, one_link, 1, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

Test(wire_netns, link_cut_then_reconnect)
{
	tw_need_wire();
	ns_up();
	struct tw_proc p[2] = {{.fn = tw_cut_a, .netns = ns_a, .iface = if_a},
			       {.fn = tw_cut_b, .netns = ns_b, .iface = if_b}};
	tw_run(p, 2, one_link, 1, if_a, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

/* The target takes its end of the link down while it reads a requester's
 * rendezvous writes: its control calls return within the network timeout
 * (plus a margin), nothing lands after deregistration, and once the link
 * is up again it serves a third process. */
Test(wire_netns, link_cut_under_target_reads)
{
	tw_need_wire();
	ns_up();
	static const int links[][2] = {{0, 1}, {0, 2}};
	struct tw_silent a = {.iface = if_a};
	struct tw_proc p[3] = {{.fn = tw_silent_t, .netns = ns_a, .iface = if_a},
			       {.fn = tw_silent_b, .netns = ns_b, .iface = if_b},
			       {.fn = tw_silent_c, .netns = ns_b, .iface = if_b}};
	tw_run(p, 3, links, 2, &a, 60000);
	cr_assert(tw_exited_ok(&p[0]), "target: status 0x%x", p[0].status);
	cr_assert(WIFSIGNALED(p[1].status) && WTERMSIG(p[1].status) == SIGKILL,
		  "the requester was to be killed: status 0x%x", p[1].status);
	cr_assert(tw_exited_ok(&p[2]), "the other peer: status 0x%x", p[2].status);
}

/* The target takes its end of the link down under its reads of the
 * requester's rendezvous writes and gives them up; once the link is back,
 * the same two processes connect new QPs (over the same connection of the
 * provider, where the given-up reads are still queued) and move data both
 * ways. */
Test(wire_netns, link_cut_under_reads_then_reconnect)
{
	tw_need_wire();
	ns_up();
	struct tw_proc p[2] = {{.fn = tw_cutr_a, .netns = ns_a, .iface = if_a},
			       {.fn = tw_cutr_b, .netns = ns_b, .iface = if_b}};
	tw_run(p, 2, one_link, 1, if_b, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

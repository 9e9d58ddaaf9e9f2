/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The window inside a connect: kinet_qp_connect_remote connects the QP's
 * wire end, then moves the QP to RTR (soft_qp_modify). Requests the peer
 * sent early (it connected first) may be waiting at that end already; they
 * wait for the move rather than meet a QP that does not accept yet (they
 * did, under load, and the requester got an error CQE:
 * test_wire_same_host's requests_before_the_peer_connects_wait_for_it).
 *
 * The target holds the window open by putting its connected QP back in
 * INIT (linked with the library's objects), lets the requester post a
 * rendezvous write and two eager ones, checks that nothing landed and
 * nothing failed, then moves the QP on; every byte lands.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include "kinet_config.h"
#include "test_wire_common.h"
#if KINET_HAVE_FABRIC
#include "core/internal.h"

#define RV_LEN 100000u /* by rendezvous */
#define EG_LEN 1000u   /* eager */
#define RV_OFF TW_P
#define EG_OFF (TW_P + 200000u)
#define IN_OFF (TW_P + 300000u)

static int cw_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	CK(tw_sync(fd, 1) == 1); /* the target's QP is back in INIT */
	tw_post_write(&s, TW_Q, RV_OFF, RV_LEN, 0, 0);
	tw_post_write(&s, TW_Q + RV_LEN, EG_OFF, EG_LEN, 0, 0);
	kn_ticket_t t;
	CK0(kn_put_inline(s.d, s.peer.addr + IN_OFF, s.peer.rkey, s.buf + TW_Q + 2 * RV_LEN,
			  KN_MAX_INLINE_WRITE, &t));
	CK(tw_sync(fd, 2) == 2); /* it has looked, and moved its QP on */
	CK0(kn_quiet(s.d));      /* no error CQE */
	CK(tw_sync(fd, 3) == 3);
	tw_close(&s);
	return 0;
}

static int cw_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	int was = atomic_exchange(&s.qp->state, KINET_QPS_INIT);
	CK(was == KINET_QPS_RTS);
	CK(tw_sync(fd, 1) == 1);
	tw_sleep_ms(300); /* the requests arrive and wait (timeout 1500 ms) */
	uint8_t *mine = malloc(TW_LEN), *a = malloc(TW_LEN);
	CK(mine && a);
	tu_fill_random(mine, TW_LEN, 2);
	tu_fill_random(a, TW_LEN, 1);
	CK(memcmp(s.buf, mine, TW_LEN) == 0); /* nothing landed yet */
	struct kinet_counters c;
	CK0(kinet_ctx_counters(s.ctx, &c));
	CK(c.errors == 0); /* nor was anything refused */
	atomic_store(&s.qp->state, KINET_QPS_RTS);
	CK(tw_sync(fd, 2) == 2);
	CK(tw_sync(fd, 3) == 3); /* the requester has its CQEs */
	memcpy(mine + RV_OFF, a + TW_Q, RV_LEN);
	memcpy(mine + EG_OFF, a + TW_Q + RV_LEN, EG_LEN);
	memcpy(mine + IN_OFF, a + TW_Q + 2 * RV_LEN, KN_MAX_INLINE_WRITE);
	CK(memcmp(s.buf, mine, TW_LEN) == 0); /* every byte, and nothing else */
	free(mine);
	free(a);
	tw_close(&s);
	return 0;
}

Test(wire_connect, requests_wait_for_the_move_to_rtr)
{
	tw_need_wire();
	tw_run_two(cw_a, cw_b, 60000);
}
#else
Test(wire_connect, requests_wait_for_the_move_to_rtr)
{
	cr_skip_test("this build has no libfabric wire");
}
#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A context with QPs on both of its wires (a peer of this host over shm,
 * another over the network provider) that both stream rendezvous writes
 * into it: a region registration of that context (a writer of its key
 * table, which waits until no wire has reads in flight) completes while the
 * streams go on. The writers stream until the target says its
 * registrations are done (the writes have all completed then: the writers
 * wait for them before they answer); the run's deadline is the bound, and
 * the target checks both streams' bytes.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include "test_wire_common.h"

#define PN_LEN (4u << 20)
#define PN_WR (1u << 20) /* rendezvous: read by the target */
#define PN_WIN 16
#define PN_REGS 10

/* One writer: QP to the target, writes of PN_WR bytes into its region, a
 * window of PN_WIN, until the target sends a byte. */
static int writer(int fd, bool off)
{
	setenv("KINET_FI_SAME_HOST", off ? "off" : "shm", 1);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp;
	kinet_mr *mr;
	kn_qp *d;
	uint8_t *buf;
	CK0(kinet_open(&ca, &ctx));
	CK0(kinet_pd_alloc(ctx, &pd));
	CK0(posix_memalign((void **)&buf, 4096, PN_LEN));
	tu_fill_random(buf, PN_LEN, off ? 7 : 8);
	CK0(kinet_mr_reg(pd, buf, PN_LEN, KINET_ACCESS_ALL, &mr));
	uint8_t tm[KINET_MR_DESC_SIZE];
	CK(tw_io(fd, tm, sizeof(tm), 0) == 0);
	struct kinet_mr_info peer;
	CK0(kinet_mr_desc_parse(tm, sizeof(tm), &peer));
	qp = tw_qp_link(pd, fd);
	CK0(kinet_qp_device(qp, &d));
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(ctx, &wi, sizeof(wi)));
	CK(wi.qps_same_host == (off ? 0u : 1u));
	CK(tw_sync(fd, 1) == 1);
	kn_ticket_t t[PN_WIN];
	uint64_t i = 0, nw = 0;
	for (;;) {
		struct pollfd pf = {fd, POLLIN, 0};
		if (poll(&pf, 1, 0) > 0)
			break;
		if (i >= PN_WIN)
			CK0(kn_wait(d, t[i % PN_WIN]));
		kn_ticket_t k;
		CK0(kn_sq_reserve(d, 1, &k));
		kn_prep_write(d, kn_wqe_ptr(d, k), k, (uint64_t)(uintptr_t)buf, kinet_mr_lkey(mr),
			      peer.addr + (off ? PN_LEN / 2 : 0), peer.rkey, PN_WR);
		kn_sq_submit(d, k, 1);
		t[i % PN_WIN] = k;
		i++;
		nw++;
	}
	for (uint64_t j = i > PN_WIN ? i - PN_WIN : 0; j < i; j++)
		CK0(kn_wait(d, t[j % PN_WIN]));
	char c;
	CK(tw_io(fd, &c, 1, 0) == 0);
	fprintf(stderr, "[writer %s] %llu writes\n", off ? "net" : "shm", (unsigned long long)nw);
	CK(tw_sync(fd, 2) == 2);
	CK0(kinet_qp_destroy(qp));
	CK0(kinet_mr_dereg(mr));
	CK0(kinet_pd_free(pd));
	CK0(kinet_close(ctx));
	free(buf);
	return 0;
}

static int w_shm(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return writer(fd, false);
}
static int w_net(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	return writer(fd, true);
}

static kinet_qp *target_qp(kinet_pd *pd, int fd, const uint8_t *md)
{
	CK(tw_io(fd, (void *)md, KINET_MR_DESC_SIZE, 1) == 0);
	return tw_qp_link(pd, fd);
}

static int target(int fd, int fd2, void *arg)
{
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "shm", 1);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_mr *mr;
	uint8_t *buf, *small;
	CK0(kinet_open(&ca, &ctx));
	CK0(kinet_pd_alloc(ctx, &pd));
	CK0(posix_memalign((void **)&buf, 4096, PN_LEN));
	CK0(posix_memalign((void **)&small, 4096, 65536));
	CK0(kinet_mr_reg(pd, buf, PN_LEN, KINET_ACCESS_ALL, &mr));
	uint8_t md[KINET_MR_DESC_SIZE];
	CK(kinet_mr_export(mr, md, sizeof(md)) == KINET_MR_DESC_SIZE);
	kinet_qp *qa = target_qp(pd, fd, md), *qb = target_qp(pd, fd2, md);
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(ctx, &wi, sizeof(wi)));
	CK(wi.qps_same_host == 1 && wi.qps_net == 1);
	CK(tw_sync(fd, 1) == 1);
	CK(tw_sync(fd2, 1) == 1);
	tw_sleep_ms(300); /* both streams under way */
	uint64_t worst = 0;
	for (int i = 0; i < PN_REGS; i++) {
		uint64_t t0 = tw_ms();
		kinet_mr *s;
		CK0(kinet_mr_reg(pd, small, 65536, KINET_ACCESS_ALL, &s));
		CK0(kinet_mr_dereg(s));
		uint64_t dt = tw_ms() - t0;
		worst = dt > worst ? dt : worst;
		fprintf(stderr, "[target] registration %d: %llu ms\n", i, (unsigned long long)dt);
	}
	fprintf(stderr, "[target] worst %llu ms\n", (unsigned long long)worst);
	char c = 's';
	CK(tw_io(fd, &c, 1, 1) == 0);
	CK(tw_io(fd2, &c, 1, 1) == 0);
	CK(tw_sync(fd, 2) == 2);
	CK(tw_sync(fd2, 2) == 2);
	/* both streams landed whole: the writers' random bytes, each in its half */
	uint8_t *want = malloc(PN_LEN);
	CK(want != NULL);
	tu_fill_random(want, PN_LEN, 8);
	CK(memcmp(buf, want, PN_WR) == 0);
	tu_fill_random(want, PN_LEN, 7);
	CK(memcmp(buf + PN_LEN / 2, want, PN_WR) == 0);
	free(want);
	CK0(kinet_qp_destroy(qa));
	CK0(kinet_qp_destroy(qb));
	CK0(kinet_mr_dereg(mr));
	CK0(kinet_pd_free(pd));
	CK0(kinet_close(ctx));
	free(buf);
	free(small);
	return 0;
}

static const int links[][2] = {{0, 1}, {0, 2}};

Test(two_wires, registration_completes_under_reads_on_both_wires)
{
	unsetenv("KINET_FI_PROVIDER");
	tw_need_wire();
	if (tw_have_shm() == 77)
		cr_skip_test("libfabric has no shm provider here");
	struct tw_proc p[3] = {{.fn = target}, {.fn = w_shm}, {.fn = w_net}};
	tw_run(p, 3, links, 2, NULL, 60000);
	for (int i = 0; i < 3; i++)
		cr_assert(tw_exited_ok(&p[i]), "process %d: status 0x%x", i, p[i].status);
}

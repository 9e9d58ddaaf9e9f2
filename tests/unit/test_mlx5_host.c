/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mlx5 backend's host path end to end, without a ConnectX NIC: the
 * function table is replaced by the emulated rdma-core of emu.c, whose QPs,
 * CQs and regions are software-NIC objects. Probe, open, registration,
 * queue creation, mlx5dv exposure, GPU mapping, connection and the device
 * descriptor all run as on hardware; the unchanged device code then moves
 * random data and its CQEs are checked.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "kinet_config.h"
#include <kinet/net.h>
#include "../util/testutil.h"

#if KINET_HAVE_RDMA_HEADERS
#include "nic/mlx5/ops.h"
#include "nic/mlx5/mlx5.h"

static struct kinet_mlx5_emu_cfg defaults(void)
{
	struct kinet_mlx5_emu_cfg c = {
		.ndev = 2,
		.link_layer = IBV_LINK_LAYER_ETHERNET,
		.devx = 1,
		.max_qp_wr = 32768,
	};
	return c;
}

static void emulate(const struct kinet_mlx5_emu_cfg *c)
{
	kinet_mlx5_emu_set_cfg(c);
	kinet_mlx5_set_ops(kinet_mlx5_emu_ops());
}

static kinet_ctx *open_mlx5(const char *dev)
{
	struct kinet_ctx_attr a = {.backend = KINET_BACKEND_MLX5, .device = dev};
	kinet_ctx *ctx = NULL;
	cr_assert_eq(kinet_open(&a, &ctx), 0);
	cr_assert_eq(kinet_ctx_backend(ctx), KINET_BACKEND_MLX5);
	return ctx;
}

struct pair {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *a, *b;
	kn_qp *da, *db;
};

static void pair_open(struct pair *p, const struct kinet_qp_attr *attr)
{
	p->ctx = open_mlx5(NULL);
	cr_assert_eq(kinet_pd_alloc(p->ctx, &p->pd), 0);
	cr_assert_eq(kinet_qp_create(p->pd, attr, &p->a), 0);
	cr_assert_eq(kinet_qp_create(p->pd, attr, &p->b), 0);
	cr_assert_eq(kinet_qp_connect_local(p->a, p->b), 0);
	cr_assert_eq(kinet_qp_device(p->a, &p->da), 0);
	cr_assert_eq(kinet_qp_device(p->b, &p->db), 0);
	cr_assert_eq(p->da->backend, KINET_BACKEND_MLX5);
}

static void pair_close(struct pair *p)
{
	cr_assert_eq(kinet_qp_destroy(p->a), 0);
	cr_assert_eq(kinet_qp_destroy(p->b), 0);
	cr_assert_eq(kinet_pd_free(p->pd), 0);
	cr_assert_eq(kinet_close(p->ctx), 0);
}

/* Writes n random bytes a -> b, reads them back, checks bytes and CQEs. */
static void put_get_check(struct pair *p, size_t n, uint64_t seed)
{
	uint8_t *src = malloc(n), *dst = malloc(n), *back = malloc(n);
	cr_assert(src && dst && back);
	tu_fill_random(src, n, seed);
	tu_fill_random(dst, n, seed + 1);
	tu_fill_random(back, n, seed + 2);
	kinet_mr *ms, *md, *mb;
	cr_assert_eq(kinet_mr_reg(p->pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p->pd, dst, n, KINET_ACCESS_ALL, &md), 0);
	cr_assert_eq(kinet_mr_reg(p->pd, back, n, KINET_ACCESS_LOCAL_WRITE, &mb), 0);
	cr_assert_eq(kinet_mr_path(ms), KINET_MR_PATH_HOST);
	kn_ticket_t t;
	cr_assert_eq(kn_put(p->da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
			    kinet_mr_lkey(ms), (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(p->da, t), 0);
	cr_assert_eq(memcmp(src, dst, n), 0, "put: destination differs");
	struct kn_cqe64 c;
	cr_assert_eq(kinet_cq_peek(p->a->scq, t, &c), 0);
	cr_assert_eq(kn_cqe_opcode(&c), KN_CQE_REQ);
	cr_assert_eq(kn_be16toh(c.wqe_counter), (uint16_t)t);
	cr_assert_eq(kn_be32toh(c.sop_drop_qpn) & 0xffffff, kinet_qp_num(p->a));
	cr_assert_eq(kn_get(p->da, back, kinet_mr_lkey(mb), (uint64_t)(uintptr_t)dst,
			    kinet_mr_rkey(md), (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(p->da, t), 0);
	cr_assert_eq(memcmp(src, back, n), 0, "get: bytes read back differ");
	cr_assert_eq(kinet_cq_peek(p->a->scq, t, &c), 0);
	cr_assert_eq(kn_be16toh(c.wqe_counter), (uint16_t)t);
	cr_assert_eq(kinet_mr_dereg(ms), 0);
	cr_assert_eq(kinet_mr_dereg(md), 0);
	cr_assert_eq(kinet_mr_dereg(mb), 0);
	free(src);
	free(dst);
	free(back);
}

/* ---- probe and open ----------------------------------------------------------- */

Test(mlx5_host, no_device_auto_picks_soft)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.ndev = 0;
	emulate(&c);
	char why[200];
	cr_assert_eq(kinet_mlx5_probe(NULL, why, sizeof(why)), -ENODEV);
	cr_assert(strstr(why, "no RDMA device"), "%s", why);
	kinet_ctx *ctx;
	struct kinet_ctx_attr a = {.backend = KINET_BACKEND_AUTO};
	cr_assert_eq(kinet_open(&a, &ctx), 0);
	cr_assert_eq(kinet_ctx_backend(ctx), KINET_BACKEND_SOFT);
	cr_assert(strstr(kinet_ctx_backend_reason(ctx), "no RDMA device"), "%s",
		  kinet_ctx_backend_reason(ctx));
	cr_assert_eq(kinet_close(ctx), 0);
	a.backend = KINET_BACKEND_MLX5;
	cr_assert_eq(kinet_open(&a, &ctx), -ENODEV);
}

Test(mlx5_host, port_down_is_not_usable)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.port_down = 1;
	emulate(&c);
	char why[200];
	cr_assert_eq(kinet_mlx5_probe(NULL, why, sizeof(why)), -ENODEV);
	cr_assert(strstr(why, "not active"), "%s", why);
}

Test(mlx5_host, unknown_device_name)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	char why[200];
	cr_assert_eq(kinet_mlx5_probe("mlx5_9", why, sizeof(why)), -ENODEV);
	cr_assert(strstr(why, "mlx5_9"), "%s", why);
	cr_assert_eq(kinet_mlx5_probe("mlx5_1", why, sizeof(why)), 0, "%s", why);
	cr_assert(strstr(why, "mlx5_1"), "%s", why);
}

Test(mlx5_host, auto_picks_mlx5_with_roce_v2_ipv4_gid)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	kinet_ctx *ctx;
	cr_assert_eq(kinet_open(NULL, &ctx), 0);
	cr_assert_eq(kinet_ctx_backend(ctx), KINET_BACKEND_MLX5);
	const char *r = kinet_ctx_backend_reason(ctx);
	/* the emulated table: 3 is the RoCE v2 IPv4-mapped GID (10.77.0.1) */
	cr_assert(strstr(r, "mlx5_0") && strstr(r, "GID 3") && strstr(r, "10.77.0.1"), "%s", r);
	cr_assert_eq(kinet_close(ctx), 0);
	cr_assert_eq(kinet_mlx5_emu_calls("open_device"), kinet_mlx5_emu_calls("close_device"));
}

Test(mlx5_host, infiniband_uses_lid)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.link_layer = IBV_LINK_LAYER_INFINIBAND;
	emulate(&c);
	char why[200];
	cr_assert_eq(kinet_mlx5_probe(NULL, why, sizeof(why)), 0);
	cr_assert(strstr(why, "InfiniBand LID 0x10"), "%s", why);
	struct pair p;
	pair_open(&p, NULL);
	put_get_check(&p, 4096, 77);
	pair_close(&p);
}

Test(mlx5_host, staging_allowed_and_gpu_unreachable_prefers_soft)
{
	/* a GPU the NIC cannot reach (no dma-buf, no peer memory): with host
	 * staging allowed, auto must prefer the software NIC (it stages) */
	setenv("KINET_ALLOW_HOST_STAGING", "1", 1);
	struct kinet_mlx5_emu_cfg c = defaults();
	c.gpu = 1;
	emulate(&c);
	char why[300];
	cr_assert_eq(kinet_mlx5_probe(NULL, why, sizeof(why)), -ENODEV);
	cr_assert(strstr(why, "cannot reach GPU memory") && strstr(why, "staging"), "%s", why);
	kinet_ctx *ctx;
	cr_assert_eq(kinet_open(NULL, &ctx), 0);
	cr_assert_eq(kinet_ctx_backend(ctx), KINET_BACKEND_SOFT);
	cr_assert_eq(kinet_close(ctx), 0);
	/* either direct path makes mlx5 usable again */
	c.dmabuf = 1;
	emulate(&c);
	cr_assert_eq(kinet_mlx5_probe(NULL, why, sizeof(why)), 0, "%s", why);
	c.dmabuf = 0;
	c.peermem = 1;
	emulate(&c);
	cr_assert_eq(kinet_mlx5_probe(NULL, why, sizeof(why)), 0, "%s", why);
}

Test(mlx5_host, staging_not_allowed_keeps_mlx5)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.gpu = 1;
	emulate(&c);
	char why[300];
	cr_assert_eq(kinet_mlx5_probe(NULL, why, sizeof(why)), 0, "%s", why);
}

/* ---- the data path through the unchanged device code ------------------------------- */

Test(mlx5_host, put_get_random_data_and_cqes)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	struct pair p;
	pair_open(&p, NULL);
	cr_assert_eq(kinet_qp_get_state(p.a), KINET_QPS_RTS);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_GPU, "no GPU: the host writes the register");
	/* the descriptor points at what mlx5dv_init_obj exposed */
	cr_assert_eq(p.da->sq_wqe_cnt, 256u);
	cr_assert_eq(p.da->cq_cqe_cnt, p.da->sq_wqe_cnt);
	cr_assert_eq(p.da->qpn, kinet_qp_num(p.a));
	cr_assert_eq((uintptr_t)p.da->db & 0xfff, KN_BF_OFFSET);
	put_get_check(&p, 65536, 1);
	put_get_check(&p, 1, 2);
	struct kinet_counters k;
	cr_assert_eq(kinet_mlx5_emu_counters(0, &k), 0);
	cr_assert_geq(k.wqes, 4u);
	cr_assert_geq(k.doorbells, 1u, "the NIC saw no doorbell register write");
	cr_assert_eq(k.errors, 0u);
	cr_assert_geq(kinet_mlx5_emu_calls("mlx5dv_init_obj"), 2u);
	cr_assert_eq(kinet_mlx5_emu_calls("modify_qp"), 6u);
	pair_close(&p);
}

/* What the library maintains for an mlx5 QP (the host's view of the device
 * state), deregistration refused while device-API work is in flight, and a
 * revoked region's key refused by the NIC. */
Test(mlx5_host, counters_dereg_in_flight_and_revoke)
{
	emulate(&(struct kinet_mlx5_emu_cfg){.ndev = 1, .link_layer = IBV_LINK_LAYER_ETHERNET,
					     .max_qp_wr = 32768});
	struct pair p;
	pair_open(&p, NULL);
	put_get_check(&p, 4096, 5);
	struct kinet_qp_counters c;
	cr_assert_eq(kinet_qp_counters(p.a, &c), 0);
	cr_assert_eq(c.posted, 2);
	cr_assert_eq(c.completed, 2);
	cr_assert_eq(c.outstanding, 0);
	struct kinet_counters k;
	cr_assert_eq(kinet_ctx_counters(p.ctx, &k), 0);
	cr_assert_eq(k.wqes, 2); /* its QPs' figures added up */
	uint8_t *src = malloc(8192), *dst = malloc(8192);
	tu_fill_random(src, 8192, 41);
	tu_fill_random(dst, 8192, 42);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p.pd, src, 8192, KINET_ACCESS_ALL, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, dst, 8192, KINET_ACCESS_ALL, &md), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
			    kinet_mr_lkey(ms), 8192, &t), 0);
	cr_assert_eq(kinet_mr_dereg(md), -EBUSY); /* its CQE is not consumed yet */
	cr_assert_eq(kn_wait(p.da, t), 0);
	cr_assert_eq(memcmp(dst, src, 8192), 0);
	/* revoked: the NIC no longer knows the key */
	cr_assert_eq(kinet_mr_revoke(md), 0);
	cr_assert_eq(kinet_mr_state(md), KINET_MR_REVOKED);
	cr_assert_eq(kinet_mr_revoke(md), -EALREADY);
	tu_fill_random(src, 8192, 43);
	cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
			    kinet_mr_lkey(ms), 64, &t), 0);
	cr_assert_eq(kn_wait(p.da, t), -EIO);
	cr_assert_eq(kn_qp_error(p.da, NULL), KN_SYND_REMOTE_ACCESS_ERR);
	cr_assert_neq(memcmp(dst, src, 64), 0, "a write through a revoked key landed");
	cr_assert_eq(kinet_mr_dereg(md), 0);
	cr_assert_eq(kinet_mr_dereg(ms), 0);
	free(src);
	free(dst);
	pair_close(&p);
}

Test(mlx5_host, many_ops_wrap_the_queues)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	struct kinet_qp_attr qa = {.sq_depth = 16};
	struct pair p;
	pair_open(&p, &qa);
	cr_assert_eq(p.da->sq_wqe_cnt, 16u);
	cr_assert_eq(p.da->cq_cqe_cnt, 16u);
	size_t n = 1 << 16;
	uint8_t *src = malloc(n), *dst = malloc(n);
	tu_fill_random(src, n, 5);
	memset(dst, 0, n);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p.pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, dst, n, KINET_ACCESS_ALL, &md), 0);
	uint64_t st = 9;
	/* 200 puts of random pieces: the 16-deep SQ and CQ wrap 12 times */
	for (int i = 0; i < 200; i++) {
		size_t off = tu_rand64(&st) % n;
		size_t len = 1 + tu_rand64(&st) % (n - off < 3000 ? n - off : 3000);
		cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)(dst + off), kinet_mr_rkey(md),
				    src + off, kinet_mr_lkey(ms), (uint32_t)len, NULL),
			     0);
	}
	cr_assert_eq(kn_quiet(p.da), 0);
	/* then the whole buffer, so every byte is checked */
	kn_ticket_t t;
	cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
			    kinet_mr_lkey(ms), (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(p.da, t), 0);
	cr_assert_eq(t, 200u);
	cr_assert_eq(memcmp(src, dst, n), 0);
	/* atomics */
	uint64_t *word = aligned_alloc(64, 64), *res = aligned_alloc(64, 64);
	*word = 1000;
	kinet_mr *mw, *mres;
	cr_assert_eq(kinet_mr_reg(p.pd, word, 64, KINET_ACCESS_ALL, &mw), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, res, 64, KINET_ACCESS_LOCAL_WRITE, &mres), 0);
	uint64_t old = 0;
	cr_assert_eq(kn_atomic_fetch_add(p.da, (uint64_t)(uintptr_t)word, kinet_mr_rkey(mw), 7, res,
					 kinet_mr_lkey(mres), &old), 0);
	cr_assert_eq(old, 1000u);
	cr_assert_eq(kn_atomic_compare_swap(p.da, (uint64_t)(uintptr_t)word, kinet_mr_rkey(mw), 1007,
					    42, res, kinet_mr_lkey(mres), &old), 0);
	cr_assert_eq(old, 1007u);
	cr_assert_eq(*word, 42u);
	cr_assert_eq(kn_signal(p.da, (uint64_t)(uintptr_t)word, kinet_mr_rkey(mw), 8, &t), 0);
	cr_assert_eq(kn_wait(p.da, t), 0);
	cr_assert_eq(*word, 50u);
	kinet_mr_dereg(mw);
	kinet_mr_dereg(mres);
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	free(word);
	free(res);
	free(src);
	free(dst);
	pair_close(&p);
}

Test(mlx5_host, send_recv_with_immediate)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	struct kinet_qp_attr qa = {.sq_depth = 32, .rq_depth = 8};
	struct pair p;
	pair_open(&p, &qa);
	cr_assert_eq(p.db->rq_wqe_cnt, 8u);
	cr_assert_eq(p.db->rcq_cqe_cnt, 8u);
	size_t n = 3000;
	uint8_t *src = malloc(n), *dst = malloc(n);
	tu_fill_random(src, n, 11);
	tu_fill_random(dst, n, 12);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p.pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, dst, n, KINET_ACCESS_ALL, &md), 0);
	for (int round = 0; round < 20; round++) {
		kn_ticket_t rt, t;
		cr_assert_eq(kn_recv_post(p.db, dst, kinet_mr_lkey(md), (uint32_t)n, &rt), 0);
		cr_assert_eq(kn_sq_reserve(p.da, 1, &t), 0);
		kn_prep_send(p.da, kn_wqe_ptr(p.da, t), t, (uint64_t)(uintptr_t)src,
			     kinet_mr_lkey(ms), (uint32_t)(n - (size_t)round), 1,
			     0xabc00000u + (uint32_t)round);
		kn_sq_submit(p.da, t, 1);
		cr_assert_eq(kn_wait(p.da, t), 0);
		kn_recv_info info;
		cr_assert_eq(kn_recv_poll(p.db, rt, 1, &info), 0);
		cr_assert_eq(info.byte_len, n - (size_t)round);
		cr_assert(info.has_imm);
		cr_assert_eq(info.imm, 0xabc00000u + (uint32_t)round);
		cr_assert_eq(memcmp(src, dst, n - (size_t)round), 0);
	}
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	free(src);
	free(dst);
	pair_close(&p);
}

struct shared_arg {
	kn_qp *q;
	uint8_t *src, *dst;
	uint32_t lkey, rkey;
	int per;
};

static int shared_fn(int tid, int nthreads, void *arg)
{
	struct shared_arg *s = arg;
	(void)nthreads;
	for (int i = 0; i < s->per; i++) {
		size_t off = ((size_t)tid * (size_t)s->per + (size_t)i) * 256;
		kn_ticket_t t;
		int rc = kn_put(s->q, (uint64_t)(uintptr_t)(s->dst + off), s->rkey, s->src + off,
				s->lkey, 256, &t);
		if (rc)
			return rc;
		if ((i & 7) == 7 && (rc = kn_wait(s->q, t)) != 0)
			return rc;
	}
	return kn_quiet(s->q);
}

Test(mlx5_host, shared_qp_many_threads)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	struct kinet_qp_attr qa = {.sq_depth = 64, .share = KN_SHARE_GPU};
	struct pair p;
	pair_open(&p, &qa);
	int nt = 4, per = 100;
	size_t n = (size_t)nt * (size_t)per * 256;
	struct shared_arg s = {.q = p.da, .src = malloc(n), .dst = malloc(n), .per = per};
	tu_fill_random(s.src, n, 21);
	memset(s.dst, 0, n);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p.pd, s.src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, s.dst, n, KINET_ACCESS_ALL, &md), 0);
	s.lkey = kinet_mr_lkey(ms);
	s.rkey = kinet_mr_rkey(md);
	cr_assert_eq(kinet_host_exec(nt, shared_fn, &s), 0);
	cr_assert_eq(memcmp(s.src, s.dst, n), 0);
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	free(s.src);
	free(s.dst);
	pair_close(&p);
}

Test(mlx5_host, bad_rkey_gives_error_cqe_then_flush)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	struct pair p;
	pair_open(&p, NULL);
	size_t n = 512;
	uint8_t *src = malloc(n), *dst = malloc(n);
	tu_fill_random(src, n, 31);
	tu_fill_random(dst, n, 32);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p.pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, dst, n, KINET_ACCESS_LOCAL_WRITE, &md), 0);
	kn_ticket_t t1, t2;
	/* no remote write on dst */
	cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
			    kinet_mr_lkey(ms), (uint32_t)n, &t1), 0);
	cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
			    kinet_mr_lkey(ms), (uint32_t)n, &t2), 0);
	cr_assert_eq(kn_wait(p.da, t1), -EIO);
	cr_assert_eq(kn_wait(p.da, t2), -EIO);
	cr_assert_eq(kn_qp_error(p.da, NULL), KN_SYND_REMOTE_ACCESS_ERR);
	struct kn_cqe64 cq;
	cr_assert_eq(kinet_cq_peek(p.a->scq, t2, &cq), 0);
	cr_assert_eq(((struct kn_err_cqe *)&cq)->syndrome, KN_SYND_WR_FLUSH_ERR);
	uint8_t expect[512];
	tu_fill_random(expect, n, 32);
	cr_assert_eq(memcmp(dst, expect, n), 0, "a refused write changed the target");
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	free(src);
	free(dst);
	pair_close(&p);
}

/* A target QP that allows remote writes only (kinet_qp_attr.remote_access,
 * passed to the NIC as qp_access_flags or the QP context's rwe/rre/rae): a
 * write lands, a read of a region that allows it fails with the remote
 * access error, the local buffer untouched. */
static void qp_access_check(const char *queues)
{
	if (queues)
		setenv("KINET_MLX5_QUEUES", queues, 1);
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	struct kinet_qp_attr qa = {.remote_access = KINET_QP_ACCESS_SET |
						    KINET_ACCESS_REMOTE_WRITE};
	struct pair p;
	pair_open(&p, &qa);
	size_t n = 4096;
	uint8_t *src = malloc(n), *dst = malloc(n), *back = malloc(n), *keep = malloc(n);
	cr_assert(src && dst && back && keep);
	tu_fill_random(src, n, 61);
	tu_fill_random(dst, n, 62);
	tu_fill_random(back, n, 63);
	memcpy(keep, back, n);
	kinet_mr *ms, *md, *mb;
	cr_assert_eq(kinet_mr_reg(p.pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, dst, n, KINET_ACCESS_ALL, &md), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, back, n, KINET_ACCESS_LOCAL_WRITE, &mb), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
			    kinet_mr_lkey(ms), (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(p.da, t), 0);
	cr_assert_arr_eq(dst, src, n, "the allowed write");
	cr_assert_eq(kn_get(p.da, back, kinet_mr_lkey(mb), (uint64_t)(uintptr_t)dst,
			    kinet_mr_rkey(md), (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(p.da, t), -EIO);
	cr_assert_eq(kn_qp_error(p.da, NULL), KN_SYND_REMOTE_ACCESS_ERR);
	cr_assert_arr_eq(back, keep, n, "a refused read landed");
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	kinet_mr_dereg(mb);
	free(src);
	free(dst);
	free(back);
	free(keep);
	pair_close(&p);
}
Test(mlx5_host, qp_remote_access_verbs_queues) { qp_access_check(NULL); }
Test(mlx5_host, qp_remote_access_devx_queues) { qp_access_check("devx"); }

/* ---- doorbell modes, GPU mapping, the CPU proxy ------------------------------------- */

Test(mlx5_host, gpu_present_maps_queues_and_doorbell)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.gpu = 1;
	emulate(&c);
	struct pair p;
	pair_open(&p, NULL);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_GPU);
	unsigned maps = kinet_mlx5_emu_calls("gpu_map");
	cr_assert_geq(maps, 6u, "queues, doorbell records and the UAR page are mapped");
	put_get_check(&p, 8192, 41);
	pair_close(&p);
	cr_assert_eq(kinet_mlx5_emu_calls("gpu_unmap"), maps, "every mapped page is unmapped");
}

Test(mlx5_host, doorbell_unmappable_falls_back_to_cpu_proxy)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.gpu = 1;
	c.gpu_map_fails = 1; /* the UAR cannot be mapped into the GPU */
	emulate(&c);
	struct pair p;
	pair_open(&p, NULL);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_CPU_PROXY);
	cr_assert_eq(p.da->db_mode, KN_DB_CPU_PROXY);
	put_get_check(&p, 20000, 51);
	struct kinet_counters k;
	cr_assert_eq(kinet_ctx_counters(p.ctx, &k), 0);
	cr_assert_geq(k.proxy_rings, 1u, "the CPU proxy rang nothing");
	cr_assert_eq(kinet_mlx5_emu_counters(0, &k), 0);
	cr_assert_geq(k.doorbells, 1u, "the proxy's register write was not seen");
	pair_close(&p);
}

Test(mlx5_host, explicit_modes)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	struct kinet_qp_attr qa = {.db_mode = KN_DB_CPU_PROXY};
	struct pair p;
	pair_open(&p, &qa);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_CPU_PROXY);
	put_get_check(&p, 1000, 61);
	pair_close(&p);
	qa.db_mode = KN_DB_BLUEFLAME;
	pair_open(&p, &qa);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_BLUEFLAME);
	put_get_check(&p, 1000, 62);
	pair_close(&p);
}

/* ---- registration paths ------------------------------------------------------------------ */

static void gpu_reg(int dmabuf, int peermem, int expect_rc, int expect_path)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.gpu = 1;
	c.dmabuf = dmabuf;
	c.peermem = peermem;
	emulate(&c);
	struct pair p;
	pair_open(&p, NULL);
	size_t n = 3 * 4096;
	uint8_t *gpu = aligned_alloc(4096, n), *src = malloc(n);
	cr_assert_eq(kinet_mlx5_emu_gpu_range(gpu, n), 0);
	tu_fill_random(gpu, n, 71);
	tu_fill_random(src, n, 72);
	kinet_mr *mg = NULL, *ms;
	/* an unaligned piece of "GPU memory" */
	cr_assert_eq(kinet_mr_reg(p.pd, gpu + 100, n - 200, KINET_ACCESS_ALL, &mg), expect_rc);
	if (expect_rc == 0) {
		cr_assert_eq(kinet_mr_path(mg), expect_path, "path %s",
			     kinet_mr_path_str(kinet_mr_path(mg)));
		cr_assert_eq(kinet_mr_kind(mg), KINET_MEM_CUDA);
		cr_assert_eq(kinet_mr_reg(p.pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
		kn_ticket_t t;
		cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)(gpu + 100), kinet_mr_rkey(mg), src,
				    kinet_mr_lkey(ms), (uint32_t)(n - 200), &t), 0);
		cr_assert_eq(kn_wait(p.da, t), 0);
		cr_assert_eq(memcmp(gpu + 100, src, n - 200), 0);
		/* the region's bounds hold: one byte beyond it is refused */
		cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)(gpu + 101), kinet_mr_rkey(mg), src,
				    kinet_mr_lkey(ms), (uint32_t)(n - 200), &t), 0);
		cr_assert_eq(kn_wait(p.da, t), -EIO);
		cr_assert_eq(kinet_mr_dereg(mg), 0);
		cr_assert_eq(kinet_mr_dereg(ms), 0);
	}
	free(gpu);
	free(src);
	pair_close(&p);
}

Test(mlx5_host, gpu_memory_by_dmabuf) { gpu_reg(1, 0, 0, KINET_MR_PATH_DMABUF); }
Test(mlx5_host, gpu_memory_by_peermem) { gpu_reg(0, 1, 0, KINET_MR_PATH_PEERMEM); }
Test(mlx5_host, gpu_memory_dmabuf_preferred) { gpu_reg(1, 1, 0, KINET_MR_PATH_DMABUF); }
Test(mlx5_host, gpu_memory_without_path_refused) { gpu_reg(0, 0, -EOPNOTSUPP, 0); }

/* ---- connection ---------------------------------------------------------------------------- */

Test(mlx5_host, two_devices_two_contexts_by_descriptor)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	kinet_ctx *c0 = open_mlx5("mlx5_0"), *c1 = open_mlx5("mlx5_1");
	kinet_pd *p0, *p1;
	kinet_qp *a, *b;
	cr_assert_eq(kinet_pd_alloc(c0, &p0), 0);
	cr_assert_eq(kinet_pd_alloc(c1, &p1), 0);
	cr_assert_eq(kinet_qp_create(p0, NULL, &a), 0);
	cr_assert_eq(kinet_qp_create(p1, NULL, &b), 0);
	/* as two processes would: exchange descriptors (kinet/net.h), no pointers */
	uint8_t da_[KINET_QP_DESC_MAX], db_[KINET_QP_DESC_MAX];
	int na = kinet_qp_export(a, da_, sizeof(da_));
	int nb = kinet_qp_export(b, db_, sizeof(db_));
	cr_assert_gt(na, 0);
	cr_assert_gt(nb, 0);
	struct kinet_qp_info ia, ib;
	cr_assert_eq(kinet_qp_desc_parse(da_, (size_t)na, &ia), 0);
	cr_assert_eq(kinet_qp_desc_parse(db_, (size_t)nb, &ib), 0);
	cr_assert_str_eq(ia.provider, "mlx5");
	cr_assert_eq(ia.qpn, kinet_qp_num(a));
	cr_assert_eq(ia.version, KINET_NET_VERSION);
	cr_assert_neq(ia.gen, ib.gen);
	/* the addressing a ConnectX peer needs: the GIDs of the two devices differ */
	struct kinet_mlx5_ep ea, eb;
	cr_assert_eq(kinet_mlx5_ep_decode(ia.addr, ia.addr_len, &ea), 0);
	cr_assert_eq(kinet_mlx5_ep_decode(ib.addr, ib.addr_len, &eb), 0);
	cr_assert_neq(memcmp(ea.gid, eb.gid, 16), 0);
	cr_assert_eq(ea.qpn, kinet_qp_num(a));
	cr_assert_eq(kinet_qp_connect_remote(a, db_, (size_t)nb), 0);
	cr_assert_eq(kinet_qp_connect_remote(b, da_, (size_t)na), 0);
	cr_assert_eq(kinet_qp_get_state(a), KINET_QPS_RTS);
	kn_qp *da;
	cr_assert_eq(kinet_qp_device(a, &da), 0);
	size_t n = 10000;
	uint8_t *src = malloc(n), *dst = malloc(n);
	tu_fill_random(src, n, 81);
	tu_fill_random(dst, n, 82);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p0, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p1, dst, n, KINET_ACCESS_ALL, &md), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src, kinet_mr_lkey(ms),
			    (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(da, t), 0);
	cr_assert_eq(memcmp(src, dst, n), 0);
	/* bad descriptors are refused: another version, a truncated address, a
	 * descriptor of another transport (a software-NIC QP) */
	kinet_qp *x;
	cr_assert_eq(kinet_qp_create(p0, NULL, &x), 0);
	uint8_t bad[KINET_QP_DESC_MAX];
	memcpy(bad, db_, (size_t)nb);
	bad[5] ^= 0x40; /* version (big-endian u16 at offset 4) */
	cr_assert_eq(kinet_qp_connect_remote(x, bad, (size_t)nb), -KINET_EVERSION);
	memcpy(bad, db_, (size_t)nb);
	memcpy(bad + 32, "tcp;ofi_rxm", 12);
	cr_assert_eq(kinet_qp_connect_remote(x, bad, (size_t)nb), -EPROTO);
	memcpy(bad, db_, (size_t)nb);
	bad[64 + 26] = 9; /* mtu out of range */
	cr_assert_eq(kinet_qp_connect_remote(x, bad, (size_t)nb), -EPROTO);
	cr_assert_eq(kinet_qp_destroy(x), 0);
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	cr_assert_eq(kinet_qp_destroy(a), 0);
	cr_assert_eq(kinet_qp_destroy(b), 0);
	cr_assert_eq(kinet_pd_free(p0), 0);
	cr_assert_eq(kinet_pd_free(p1), 0);
	cr_assert_eq(kinet_close(c0), 0);
	cr_assert_eq(kinet_close(c1), 0);
	free(src);
	free(dst);
}

/* kinet_qp_post_raw on mlx5: the WQE goes to the SQ, the doorbell record and
 * the register (as rdma-core rings); room comes back only through the send
 * CQEs the host consumes, so a producer of unsignaled WQEs alone runs out of
 * room and is told so after the QP's timeout. */
Test(mlx5_host, post_raw_room_from_cqes)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.devx = 0; /* verbs queues: host memory the host may write */
	emulate(&c);
	struct kinet_qp_attr qa = {.sq_depth = 16, .timeout_ms = 300};
	struct pair p;
	pair_open(&p, &qa);
	enum { N = 200, LEN = 256 };
	uint8_t *src = malloc(N * LEN), *dst = malloc(N * LEN);
	tu_fill_random(src, N * LEN, 91);
	tu_fill_random(dst, N * LEN, 92);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p.pd, src, N * LEN, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, dst, N * LEN, KINET_ACCESS_ALL, &md), 0);
	kinet_cq *cq = kinet_qp_send_cq(p.a);
	cr_assert_not_null(cq);
	uint32_t depth = p.da->sq_wqe_cnt;
	uint64_t done = 0;
	for (uint64_t i = 0; i < N; i++) {
		uint8_t w[64] = {0};
		kn_prep_write(p.da, w, i, (uint64_t)(uintptr_t)(src + i * LEN), kinet_mr_lkey(ms),
			      (uint64_t)(uintptr_t)(dst + i * LEN), kinet_mr_rkey(md), LEN);
		/* consume completions when the SQ would be full: the room they make */
		while (i - done >= depth) {
			struct kn_cqe64 cqe;
			cr_assert_eq(kinet_cq_poll_wait(cq, &cqe, 2000), 0);
			cr_assert_eq(kn_cqe_opcode(&cqe), KN_CQE_REQ);
			cr_assert_eq(kn_be16toh(cqe.wqe_counter), (uint16_t)done);
			done++;
		}
		cr_assert_eq(kinet_qp_post_raw(p.a, w, 1), (long long)i);
	}
	while (done < N) {
		struct kn_cqe64 cqe;
		cr_assert_eq(kinet_cq_poll_wait(cq, &cqe, 2000), 0);
		cr_assert_eq(kn_be16toh(cqe.wqe_counter), (uint16_t)done);
		done++;
	}
	cr_assert_eq(memcmp(src, dst, N * LEN), 0);
	/* unsignaled WQEs: no CQE ever says the NIC read them */
	for (uint32_t i = 0; i < depth; i++) {
		uint8_t w[64] = {0};
		kn_prep_nop(p.da, w, N + i);
		((struct kn_wqe_ctrl_seg *)w)->fm_ce_se = 0;
		cr_assert_eq(kinet_qp_post_raw(p.a, w, 1), (long long)(N + i));
	}
	uint8_t w[64] = {0};
	kn_prep_nop(p.da, w, N + depth);
	cr_assert_eq(kinet_qp_post_raw(p.a, w, 1), -ETIMEDOUT);
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	pair_close(&p);
	free(src);
	free(dst);
}

Test(mlx5_host, state_machine_and_refusals)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	kinet_ctx *ctx = open_mlx5(NULL);
	kinet_pd *pd;
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	/* QPs create their own CQs on this backend: a CQ apart is refused, and
	 * so is a QP given a CQ (here one of another context) */
	kinet_cq *cq;
	cr_assert_eq(kinet_cq_create(ctx, 64, &cq), -EOPNOTSUPP);
	kinet_ctx *soft;
	struct kinet_ctx_attr sa = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&sa, &soft), 0);
	cr_assert_eq(kinet_cq_create(soft, 64, &cq), 0);
	struct kinet_qp_attr qa = {.send_cq = cq};
	kinet_qp *q, *r;
	cr_assert_eq(kinet_qp_create(pd, &qa, &q), -EINVAL);
	cr_assert_eq(kinet_cq_destroy(cq), 0);
	cr_assert_eq(kinet_close(soft), 0);
	qa.send_cq = NULL;
	qa.sq_depth = 1u << 20;
	cr_assert_eq(kinet_qp_create(pd, &qa, &q), -EINVAL);
	qa.sq_depth = 100;
	cr_assert_eq(kinet_qp_create(pd, &qa, &q), 0);
	cr_assert_eq(kinet_qp_create(pd, &qa, &r), 0);
	kn_qp *d;
	cr_assert_eq(kinet_qp_device(q, &d), 0);
	cr_assert_eq(d->sq_wqe_cnt, 128u);
	cr_assert_eq(kinet_qp_modify(q, KINET_QPS_RTS, NULL), -EINVAL);
	cr_assert_eq(kinet_qp_modify(q, KINET_QPS_INIT, NULL), 0);
	cr_assert_eq(kinet_qp_modify(q, KINET_QPS_RTR, NULL), -EINVAL, "RTR needs the remote");
	cr_assert_eq(kinet_pd_free(pd), -EBUSY);
	/* after use, RESET cannot recycle an mlx5 QP */
	cr_assert_eq(kinet_qp_modify(q, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(q, KINET_QPS_INIT, NULL), 0, "unused: may start again");
	kn_ticket_t t;
	cr_assert_eq(kinet_qp_modify(q, KINET_QPS_ERR, NULL), 0);
	cr_assert_eq(kn_sq_reserve(d, 1, &t), 0);
	kn_prep_nop(d, kn_wqe_ptr(d, t), t);
	kn_sq_submit(d, t, 1);
	cr_assert_eq(kn_wait(d, t), -EIO, "a QP in ERR flushes");
	cr_assert_eq(kinet_qp_modify(q, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(q, KINET_QPS_INIT, NULL), -EOPNOTSUPP);
	cr_assert_eq(kinet_qp_destroy(q), 0);
	cr_assert_eq(kinet_qp_destroy(r), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}

/* ---- the emulation is strict where rdma-core and the kernel are ---------------------------- */

Test(mlx5_host, emulation_checks_modify_masks)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	const struct kinet_mlx5_ops *o = kinet_mlx5_emu_ops();
	int n;
	struct ibv_device **l = o->get_device_list(&n);
	cr_assert_eq(n, 2);
	struct ibv_context *ib = o->open_device(l[0]);
	cr_assert_not_null(ib);
	struct ibv_pd *pd = o->alloc_pd(ib);
	struct ibv_cq *cq = o->create_cq(ib, 15, NULL, NULL, 0);
	struct mlx5dv_cq dcq;
	struct mlx5dv_obj obj = {.cq = {.in = cq, .out = &dcq}};
	cr_assert_eq(o->mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ), 0);
	cr_assert_eq(dcq.cqe_cnt, 16u, "cqe + 1 rounded up, as the mlx5 provider");
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 8, .max_send_sge = 1}};
	struct ibv_qp *qp = o->create_qp(pd, &ia);
	cr_assert_not_null(qp);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	cr_assert_eq(o->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT), EINVAL,
		     "INIT without pkey index and access flags");
	cr_assert_eq(o->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
						  IBV_QP_ACCESS_FLAGS),
		     0);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096; /* above the RoCE port's 1024 */
	cr_assert_eq(o->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
		     EINVAL);
	cr_assert_eq(o->destroy_qp(qp), 0);
	cr_assert_eq(o->destroy_cq(cq), 0);
	cr_assert_eq(o->dealloc_pd(pd), 0);
	cr_assert_eq(o->close_device(ib), 0);
	o->free_device_list(l);
}

/* ---- pure helpers ----------------------------------------------------------------------------- */

Test(mlx5_host, gid_selection_by_family)
{
	uint8_t g[6][16];
	uint32_t ty[6];
	memset(g, 0, sizeof(g));
	/* 0: link-local v1, 1: link-local v2, 2: v4-mapped v1, 3: v4-mapped v2,
	 * 4: global v6 v2, 5: empty */
	g[0][0] = g[1][0] = 0xfe;
	g[0][1] = g[1][1] = 0x80;
	g[0][15] = g[1][15] = 1;
	g[2][10] = g[2][11] = g[3][10] = g[3][11] = 0xff;
	g[2][12] = g[3][12] = 192;
	g[2][15] = g[3][15] = 7;
	g[4][0] = 0x20;
	g[4][1] = 0x01;
	g[4][15] = 9;
	uint32_t types[6] = {1, 2, 1, 2, 2, 2};
	memcpy(ty, types, sizeof(ty));
	cr_assert_eq(kinet_mlx5_pick_gid((const uint8_t(*)[16])g, ty, 6, KINET_AF_IPV4), 3);
	cr_assert_eq(kinet_mlx5_pick_gid((const uint8_t(*)[16])g, ty, 6, KINET_AF_IPV6), 4);
	cr_assert_eq(kinet_mlx5_pick_gid((const uint8_t(*)[16])g, ty, 6, KINET_AF_ANY), 3);
	ty[4] = 1; /* no global v2 left: the link-local v2 */
	cr_assert_eq(kinet_mlx5_pick_gid((const uint8_t(*)[16])g, ty, 6, KINET_AF_IPV6), 1);
	ty[3] = 1; /* no v4 v2 */
	cr_assert_eq(kinet_mlx5_pick_gid((const uint8_t(*)[16])g, ty, 6, KINET_AF_IPV4), -1);
	cr_assert_eq(kinet_mlx5_pick_gid((const uint8_t(*)[16])g, ty, 6, KINET_AF_ANY), 1);
	cr_assert_eq(kinet_mlx5_family("ipv6"), KINET_AF_IPV6);
	cr_assert_eq(kinet_mlx5_family("bogus"), -1);
	cr_assert_str_eq(kinet_mr_path_str(KINET_MR_PATH_DMABUF), "dmabuf");
	cr_assert_str_eq(kinet_mr_path_str(99), "?");
}

#else
#include <errno.h>
#include "nic/mlx5/mlx5.h"
Test(mlx5_host, built_without_rdma_core_headers)
{
	char why[200];
	cr_assert_eq(kinet_mlx5_probe(NULL, why, sizeof(why)), -ENODEV);
}
#endif

/* kinet_qp_ep_info names who executes the WQEs: the NIC here, the software
 * NIC's CPU engine (with the reason the GPU engine does not) on soft. */
Test(mlx5_host, ep_info_names_the_engine)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c);
	struct pair p;
	pair_open(&p, NULL);
	struct kinet_ep_info ei;
	cr_assert_eq(kinet_qp_ep_info(p.a, &ei), 0);
	cr_assert_eq(ei.engine, KINET_ENGINE_HW);
	cr_assert(strstr(ei.engine_why, "NIC") != NULL, "%s", ei.engine_why);
	pair_close(&p);

	struct tu_pair s;
	cr_assert_eq(tu_pair_open(&s, NULL), 0);
	cr_assert_eq(kinet_qp_ep_info(s.a, &ei), 0);
	cr_assert_eq(ei.engine, KINET_ENGINE_CPU);
	cr_assert_eq(ei.gpu_wqes, 0u);
	cr_assert(strstr(ei.engine_why, "KINET_GPU_ENGINE") != NULL, "%s", ei.engine_why);
	tu_pair_close(&s);
}

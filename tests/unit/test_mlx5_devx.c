/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The DevX fast path of the mlx5 backend (KINET_MLX5_QUEUES=devx|auto) end
 * to end over the emulated rdma-core: the backend encodes PRM commands
 * (CREATE_CQ, CREATE_QP, RST2INIT/INIT2RTR/RTR2RTS) with its field tables;
 * the emulation decodes them, checks what firmware would check (umems, UAR
 * pages, EQ, PD, CQ numbers, the RoCE next-hop MAC) and backs the objects
 * with software-NIC queues placed in the backend's own memory. Data then
 * moves through the unchanged device code.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "kinet_config.h"
#include "../util/testutil.h"

#if KINET_HAVE_RDMA_HEADERS
#include "nic/mlx5/ops.h"
#include "nic/mlx5/mlx5.h"
#include "nic/mlx5/ifc.h"

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

static void emulate(const struct kinet_mlx5_emu_cfg *c, const char *queues)
{
	setenv("KINET_MLX5_QUEUES", queues, 1);
	kinet_mlx5_emu_set_cfg(c);
	kinet_mlx5_set_ops(kinet_mlx5_emu_ops());
}

struct pair {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *a, *b;
	kn_qp *da, *db;
};

static int pair_open(struct pair *p, const struct kinet_qp_attr *attr)
{
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_MLX5};
	int rc = kinet_open(&ca, &p->ctx);
	if (rc)
		return rc;
	cr_assert_eq(kinet_pd_alloc(p->ctx, &p->pd), 0);
	if ((rc = kinet_qp_create(p->pd, attr, &p->a)) != 0)
		return rc;
	cr_assert_eq(kinet_qp_create(p->pd, attr, &p->b), 0);
	cr_assert_eq(kinet_qp_connect_local(p->a, p->b), 0);
	cr_assert_eq(kinet_qp_device(p->a, &p->da), 0);
	cr_assert_eq(kinet_qp_device(p->b, &p->db), 0);
	return 0;
}

static void pair_close(struct pair *p)
{
	cr_assert_eq(kinet_qp_destroy(p->a), 0);
	cr_assert_eq(kinet_qp_destroy(p->b), 0);
	cr_assert_eq(kinet_pd_free(p->pd), 0);
	cr_assert_eq(kinet_close(p->ctx), 0);
}

/* n random bytes a -> b and back; CQEs of a's send CQ checked. */
static void put_get_check(struct pair *p, size_t n, uint64_t seed)
{
	uint8_t *src = malloc(n), *dst = malloc(n), *back = malloc(n);
	tu_fill_random(src, n, seed);
	tu_fill_random(dst, n, seed + 1);
	tu_fill_random(back, n, seed + 2);
	kinet_mr *ms, *md, *mb;
	cr_assert_eq(kinet_mr_reg(p->pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p->pd, dst, n, KINET_ACCESS_ALL, &md), 0);
	cr_assert_eq(kinet_mr_reg(p->pd, back, n, KINET_ACCESS_LOCAL_WRITE, &mb), 0);
	for (int round = 0; round < 3; round++) {
		kn_ticket_t t;
		cr_assert_eq(kn_put(p->da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
				    kinet_mr_lkey(ms), (uint32_t)n, &t), 0);
		cr_assert_eq(kn_wait(p->da, t), 0);
		cr_assert_eq(memcmp(src, dst, n), 0);
		struct kn_cqe64 c;
		cr_assert_eq(kinet_cq_peek(p->a->scq, t, &c), 0);
		cr_assert_eq(kn_cqe_opcode(&c), KN_CQE_REQ);
		cr_assert_eq(kn_be16toh(c.wqe_counter), (uint16_t)t);
		cr_assert_eq(kn_get(p->da, back, kinet_mr_lkey(mb), (uint64_t)(uintptr_t)dst,
				    kinet_mr_rkey(md), (uint32_t)n, &t), 0);
		cr_assert_eq(kn_wait(p->da, t), 0);
		cr_assert_eq(memcmp(src, back, n), 0);
		tu_fill_random(src, n, seed + 10 + (uint64_t)round);
	}
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	kinet_mr_dereg(mb);
	free(src);
	free(dst);
	free(back);
}

Test(mlx5_devx, host_memory_queues)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c, "devx");
	struct pair p;
	struct kinet_qp_attr qa = {.sq_depth = 32};
	cr_assert_eq(pair_open(&p, &qa), 0);
	/* CQ, QP for each side; INIT, RTR, RTS for each */
	cr_assert_eq(kinet_mlx5_emu_calls("devx_obj_create"), 4u);
	cr_assert_eq(kinet_mlx5_emu_calls("devx_obj_modify"), 6u);
	cr_assert_eq(kinet_mlx5_emu_calls("create_qp"), 0u, "no verbs QP on the DevX path");
	cr_assert_eq(p.da->sq_wqe_cnt, 32u);
	cr_assert_eq(p.da->cq_cqe_cnt, 32u);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_GPU);
	put_get_check(&p, 50000, 1);
	/* many more WQEs than the SQ holds */
	uint8_t *src = malloc(256), *dst = malloc(256 * 100);
	tu_fill_random(src, 256, 3);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p.pd, src, 256, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, dst, 256 * 100, KINET_ACCESS_ALL, &md), 0);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(kn_put(p.da, (uint64_t)(uintptr_t)(dst + 256 * i), kinet_mr_rkey(md),
				    src, kinet_mr_lkey(ms), 256, NULL), 0);
	cr_assert_eq(kn_quiet(p.da), 0);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(memcmp(dst + 256 * i, src, 256), 0);
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	free(src);
	free(dst);
	pair_close(&p);
	cr_assert_eq(kinet_mlx5_emu_calls("devx_obj_destroy"), 4u);
}

Test(mlx5_devx, send_recv_and_infiniband)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.link_layer = IBV_LINK_LAYER_INFINIBAND;
	emulate(&c, "devx");
	struct pair p;
	struct kinet_qp_attr qa = {.sq_depth = 16, .rq_depth = 4};
	cr_assert_eq(pair_open(&p, &qa), 0);
	size_t n = 2000;
	uint8_t *src = malloc(n), *dst = malloc(n);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p.pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, dst, n, KINET_ACCESS_ALL, &md), 0);
	for (int r = 0; r < 10; r++) {
		tu_fill_random(src, n, 40 + (uint64_t)r);
		kn_ticket_t rt, t;
		cr_assert_eq(kn_recv_post(p.db, dst, kinet_mr_lkey(md), (uint32_t)n, &rt), 0);
		cr_assert_eq(kn_sq_reserve(p.da, 1, &t), 0);
		kn_prep_send(p.da, kn_wqe_ptr(p.da, t), t, (uint64_t)(uintptr_t)src,
			     kinet_mr_lkey(ms), (uint32_t)n, 1, 77u + (uint32_t)r);
		kn_sq_submit(p.da, t, 1);
		cr_assert_eq(kn_wait(p.da, t), 0);
		kn_recv_info info;
		cr_assert_eq(kn_recv_poll(p.db, rt, 1, &info), 0);
		cr_assert_eq(info.byte_len, n);
		cr_assert_eq(info.imm, 77u + (uint32_t)r);
		cr_assert_eq(memcmp(src, dst, n), 0);
	}
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	free(src);
	free(dst);
	pair_close(&p);
}

static void gpu_queues(int dmabuf, int peermem, const char *umem_call)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.gpu = 1;
	c.dmabuf = dmabuf;
	c.peermem = peermem;
	emulate(&c, "auto");
	struct pair p;
	cr_assert_eq(pair_open(&p, NULL), 0);
	cr_assert_eq(kinet_mlx5_emu_calls("devx_obj_create"), 4u, "auto with a GPU: DevX");
	cr_assert_geq(kinet_mlx5_emu_calls(umem_call), 2u, "%s", umem_call);
	put_get_check(&p, 30000, 5);
	pair_close(&p);
}

Test(mlx5_devx, gpu_queues_umem_over_dmabuf) { gpu_queues(1, 0, "devx_umem_reg_dmabuf"); }
Test(mlx5_devx, gpu_queues_umem_over_peermem) { gpu_queues(0, 1, "devx_umem_reg"); }
Test(mlx5_devx, gpu_queues_unreachable_fall_back_to_host) { gpu_queues(0, 0, "devx_umem_reg"); }

Test(mlx5_devx, cpu_proxy_reaches_gpu_queues)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.gpu = 1;
	c.dmabuf = 1;
	c.gpu_map_fails = 1;
	emulate(&c, "devx");
	struct pair p;
	cr_assert_eq(pair_open(&p, NULL), 0);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_CPU_PROXY);
	put_get_check(&p, 10000, 9);
	struct kinet_counters k;
	cr_assert_eq(kinet_ctx_counters(p.ctx, &k), 0);
	cr_assert_geq(k.proxy_rings, 6u);
	pair_close(&p);
}

Test(mlx5_devx, uar_allocation_order)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	struct kinet_qp_attr qa = {.db_mode = KN_DB_BLUEFLAME};
	struct pair p;
	/* the dedicated non-cached UAR first: no BlueFlame register */
	emulate(&c, "devx");
	cr_assert_eq(pair_open(&p, &qa), 0);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_GPU);
	cr_assert_eq(kinet_mlx5_emu_calls("devx_alloc_uar"), 2u);
	pair_close(&p);
	/* older rdma-core (no dedicated type): the shared non-cached one */
	kinet_mlx5_emu_calls_reset();
	c.uar_refuse = 4;
	emulate(&c, "devx");
	cr_assert_eq(pair_open(&p, &qa), 0);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_GPU);
	cr_assert_eq(kinet_mlx5_emu_calls("devx_alloc_uar"), 4u, "one refusal per QP");
	pair_close(&p);
	/* only BlueFlame left */
	c.uar_refuse = 6;
	emulate(&c, "devx");
	cr_assert_eq(pair_open(&p, &qa), 0);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_BLUEFLAME);
	put_get_check(&p, 4000, 11);
	pair_close(&p);
	/* none */
	c.uar_refuse = 7;
	emulate(&c, "devx");
	cr_assert_eq(pair_open(&p, NULL), -ENOMEM);
	cr_assert_eq(kinet_pd_free(p.pd), 0);
	cr_assert_eq(kinet_close(p.ctx), 0);
}

Test(mlx5_devx, auto_without_gpu_is_verbs)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	struct pair p;
	emulate(&c, "auto");
	cr_assert_eq(pair_open(&p, NULL), 0);
	cr_assert_eq(kinet_mlx5_emu_calls("devx_obj_create"), 0u);
	cr_assert_eq(kinet_mlx5_emu_calls("create_qp"), 2u);
	put_get_check(&p, 1000, 13);
	pair_close(&p);
}

Test(mlx5_devx, auto_without_devx_is_verbs)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.devx = 0;
	c.gpu = 1;
	c.dmabuf = 1;
	emulate(&c, "auto");
	struct pair p;
	cr_assert_eq(pair_open(&p, NULL), 0);
	cr_assert_eq(kinet_mlx5_emu_calls("create_qp"), 2u);
	put_get_check(&p, 1000, 14);
	pair_close(&p);
}

Test(mlx5_devx, devx_required_but_missing)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.devx = 0;
	emulate(&c, "devx");
	kinet_ctx *ctx;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_MLX5};
	cr_assert_neq(kinet_open(&ca, &ctx), 0);
}

Test(mlx5_devx, bad_queues_tunable)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c, "fast");
	kinet_ctx *ctx;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_MLX5};
	cr_assert_eq(kinet_open(&ca, &ctx), -EINVAL);
}

Test(mlx5_devx, emulated_firmware_refuses_bad_commands)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	emulate(&c, "devx");
	const struct kinet_mlx5_ops *o = kinet_mlx5_emu_ops();
	int n;
	struct ibv_device **l = o->get_device_list(&n);
	struct mlx5dv_context_attr ca = {.flags = MLX5DV_CONTEXT_FLAGS_DEVX};
	struct ibv_context *ib = o->mlx5dv_open_device(l[0], &ca);
	cr_assert_not_null(ib);
	uint32_t eqn;
	cr_assert_eq(o->devx_query_eqn(ib, 0, &eqn), 0);
	uint8_t *mem = aligned_alloc(4096, 2 * 4096);
	struct mlx5dv_devx_umem *um = o->devx_umem_reg(ib, mem, 2 * 4096, IBV_ACCESS_LOCAL_WRITE);
	struct mlx5dv_devx_uar *uar = o->devx_alloc_uar(ib, KINET_UAR_ALLOC_NC);
	cr_assert(um && uar);
	struct kinet_prm_cq_params p = {
		.log_cq_size = 4,
		.uar_page = uar->page_id,
		.eqn = eqn + 1, /* not our EQ */
		.cq_umem_id = um->umem_id,
		.dbr_umem_id = um->umem_id,
		.dbr_offset = 4096,
	};
	uint8_t in[272], out[16];
	cr_assert_eq(kinet_prm_build_create_cq(in, sizeof(in), &p), 0);
	errno = 0;
	cr_assert_null(o->devx_obj_create(ib, in, sizeof(in), out, sizeof(out)));
	cr_assert_eq(errno, EREMOTEIO);
	uint32_t st, synd;
	kinet_prm_out_status(out, &st, &synd);
	cr_assert_neq(st, 0u, "firmware status of a refused command");
	/* a CQ larger than its umem */
	p.eqn = eqn;
	p.log_cq_size = 10;
	cr_assert_eq(kinet_prm_build_create_cq(in, sizeof(in), &p), 0);
	cr_assert_null(o->devx_obj_create(ib, in, sizeof(in), out, sizeof(out)));
	/* a good one */
	p.log_cq_size = 4;
	cr_assert_eq(kinet_prm_build_create_cq(in, sizeof(in), &p), 0);
	struct mlx5dv_devx_obj *cq = o->devx_obj_create(ib, in, sizeof(in), out, sizeof(out));
	cr_assert_not_null(cq);
	kinet_prm_out_status(out, &st, &synd);
	cr_assert_eq(st, 0u);
	uint64_t cqn;
	cr_assert_eq(kinet_prm_get(&kinet_prm_create_cq_out, out, "cqn", &cqn), 0);
	cr_assert_neq(cqn, 0u);
	cr_assert_eq(o->devx_obj_destroy(cq), 0);
	o->devx_free_uar(uar);
	cr_assert_eq(o->devx_umem_dereg(um), 0);
	/* without DevX on the context, DevX calls are refused */
	struct ibv_context *plain = o->open_device(l[0]);
	cr_assert_neq(o->devx_query_eqn(plain, 0, &eqn), 0);
	cr_assert_eq(o->close_device(plain), 0);
	cr_assert_eq(o->close_device(ib), 0);
	o->free_device_list(l);
	free(mem);
}


/* What the device's capabilities drive: a device with real-time timestamps
 * only refuses a free-running QP (the emulated firmware does too), so kinet
 * asks for the format the capability allows; the largest message comes from
 * log_max_msg; the BlueFlame size from log_bf_reg_size; overrun-ignore CQs
 * only where cq_oi says so. */
static void caps_case(int ts_cap, int log_max_msg)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.ts_cap = ts_cap;
	c.log_max_msg = log_max_msg;
	emulate(&c, "devx");
	struct pair p;
	cr_assert_eq(pair_open(&p, NULL), 0);
	put_get_check(&p, 4096, 7000 + (uint64_t)ts_cap);
	pair_close(&p);
}

Test(mlx5_devx, caps_real_time_only) { caps_case(2, 0); }
Test(mlx5_devx, caps_free_running_only) { caps_case(1, 0); }
Test(mlx5_devx, caps_small_messages) { caps_case(0, 20); }

Test(mlx5_devx, caps_blueflame_size_and_cq_oi)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.uar_refuse = 6; /* only a BlueFlame UAR */
	c.log_bf_reg_size = 10;
	c.no_cq_oi = 1;
	emulate(&c, "devx");
	struct kinet_qp_attr qa = {.db_mode = KN_DB_BLUEFLAME};
	struct pair p;
	cr_assert_eq(pair_open(&p, &qa), 0);
	cr_assert_eq(kinet_qp_db_mode(p.a), KN_DB_BLUEFLAME, "a 512-byte BlueFlame buffer");
	put_get_check(&p, 2048, 7100);
	kinet_qp *q;
	struct kinet_qp_attr oi = {.cq_flags = KINET_CQ_OVERRUN_IGNORE};
	cr_assert_eq(kinet_qp_create(p.pd, &oi, &q), -EOPNOTSUPP, "the device has no cq_oi");
	pair_close(&p);
	cr_assert_gt(kinet_mlx5_emu_calls("devx_general_cmd"), 0);
}

/* The mlx5 backend rings as rdma-core does: the UAR's two BlueFlame buffers
 * in turn (as far apart as the device's log_bf_reg_size says), the whole WQE
 * for a single-WQE post, the last WQE's ctrl word for a two-WQE post; the
 * emulated device reads both registers. */
struct rings_arg {
	kn_qp *qp;
	uint8_t *src, *dst;
	uint32_t lkey, rkey;
};

static int rings_fn(int tid, int n, void *arg)
{
	(void)tid;
	(void)n;
	struct rings_arg *r = arg;
	return tu_check_rings(r->qp, r->src, r->lkey, r->dst, r->rkey,
			      (uint64_t *)(r->dst + 8192 - 64), r->rkey, 40);
}

static void rings_case(int db_mode, int lbf)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.uar_refuse = 6; /* only a BlueFlame UAR */
	c.log_bf_reg_size = lbf;
	emulate(&c, "devx");
	struct kinet_qp_attr qa = {.sq_depth = 16, .db_mode = db_mode};
	struct pair p;
	cr_assert_eq(pair_open(&p, &qa), 0);
	cr_assert_eq(kinet_qp_db_mode(p.a), db_mode);
	cr_assert_eq(p.da->bf_alt, (1u << lbf) / 2, "the device's BlueFlame buffer size");
	struct rings_arg r = {.qp = p.da, .src = malloc(8192), .dst = malloc(8192)};
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(p.pd, r.src, 8192, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(p.pd, r.dst, 8192, KINET_ACCESS_ALL, &md), 0);
	r.lkey = kinet_mr_lkey(ms);
	r.rkey = kinet_mr_rkey(md);
	int rc = kinet_host_exec(1, rings_fn, &r);
	cr_assert_eq(rc, 0, "%s", tu_fail_msg);
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	free(r.src);
	free(r.dst);
	pair_close(&p);
}

Test(mlx5_devx, rings_alternate_blueflame) { rings_case(KN_DB_BLUEFLAME, 9); }
Test(mlx5_devx, rings_alternate_blueflame_512) { rings_case(KN_DB_BLUEFLAME, 10); }
Test(mlx5_devx, rings_alternate_doorbell) { rings_case(KN_DB_GPU, 9); }

/* The emulated firmware refuses a QP whose timestamp format the device
 * lacks and a log_msg_max beyond log_max_msg (as kinet's old fixed values
 * would have been). */
Test(mlx5_devx, firmware_refuses_unsupported_ts_and_msg_size)
{
	struct kinet_mlx5_emu_cfg c = defaults();
	c.ts_cap = 2;
	emulate(&c, "devx");
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_MLX5};
	kinet_ctx *ctx;
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	const struct kinet_mlx5_ops *o = kinet_mlx5_emu_ops();
	struct ibv_device **l = o->get_device_list(NULL);
	struct mlx5dv_context_attr da = {.flags = MLX5DV_CONTEXT_FLAGS_DEVX};
	struct ibv_context *ib = o->mlx5dv_open_device(l[0], &da);
	cr_assert_not_null(ib);
	size_t len = kinet_prm_bytes(&kinet_prm_create_qp_in);
	uint8_t *in = calloc(1, len), out[16];
	struct kinet_prm_qp_params qp = {.log_sq_size = 4, .ts_format = KINET_PRM_TS_FREE_RUNNING};
	cr_assert_eq(kinet_prm_build_create_qp(in, len, &qp), 0);
	cr_assert_null(o->devx_obj_create(ib, in, len, out, sizeof(out)));
	uint32_t st, synd;
	kinet_prm_out_status(out, &st, &synd);
	cr_assert_neq(st, 0u);
	free(in);
	o->close_device(ib);
	o->free_device_list(l);
	cr_assert_eq(kinet_close(ctx), 0);
}
#else
Test(mlx5_devx, built_without_rdma_core_headers) {}
#endif

// SPDX-License-Identifier: BSD-3-Clause
/*
 * gpunetio_host.cpp - open GPUNetIO's host library (its low-level
 * doca_verbs_* API, built unchanged from its sources) on kinet-verbs, with
 * no GPU: two RC QPs of one process whose CQs and QPs GPUNetIO makes with
 * DevX commands over host-memory umems, connected as GPUNetIO's examples
 * connect them (RST2INIT, INIT2RTR with an address handle of GID index 3,
 * RTR2RTS); then RDMA writes of random data written as mlx5 WQEs into the
 * SQ GPUNetIO made, doorbell record then UAR register, CQEs polled from the
 * CQ buffer and released through its doorbell record, over several laps;
 * every byte checked at the target. Then GPUNetIO's counter shape: a
 * companion QP made with its core-direct (cd_master) attribute posts a
 * WAIT on the first QP's CQ for the CQE of a write not yet posted, and a
 * fetch-and-add behind it; the counter must not move until that write's
 * CQE is written. Built and run by
 * tests/util/gpunetio_host.sh under kinet-run.
 *
 * usage: gpunetio_host [internal]  (internal: GPUNetIO allocates the CQ's
 * umem itself; that path names doorbell-record umem 0, which kinet-verbs
 * refuses: the program then expects the refusal and exits 0)
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include "doca_verbs.h"

#define CHECK(c, ...)                                                                      \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "gpunetio_host: FAIL (line %d): ", __LINE__);     \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, "\n");                                             \
			exit(1);                                                           \
		}                                                                          \
	} while (0)
#define DOK(e, what)                                                                       \
	do {                                                                               \
		doca_error_t s_ = (e);                                                     \
		CHECK(s_ == DOCA_SUCCESS, "%s: DOCA error %d", what, (int)s_);             \
	} while (0)

enum { NCQ = 64, NSQ = 64, GID_INDEX = 3, LEN = 1 << 16, WRITES = 5 * NCQ + 7 };

struct side {
	doca_verbs_cq *cq;
	doca_verbs_qp *qp;
	uint8_t *cqb, *sq;
	uint32_t ncq, nsq, qpn, pi, ci;
};

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd()
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static bool make(ibv_context *c, ibv_pd *pd, side *s, bool internal, bool cd_master = false)
{
	doca_verbs_cq_attr *ca;
	DOK(doca_verbs_cq_attr_create(&ca), "doca_verbs_cq_attr_create");
	DOK(doca_verbs_cq_attr_set_cq_size(ca, NCQ), "cq_size");
	if (!internal) {
		/* the CQ ring and its doorbell record in a umem of the program's,
		 * as GPUNetIO's high-level API makes them, in host memory; every
		 * CQE starts invalid with owner bit 1 */
		uint8_t *m = static_cast<uint8_t *>(aligned_alloc(4096, 2 * 4096));
		CHECK(m, "aligned_alloc");
		memset(m, 0, 2 * 4096);
		for (int i = 0; i < NCQ; i++)
			m[i * 64 + 63] = 0xf1;
		doca_verbs_umem *u;
		DOK(doca_verbs_umem_create(c, m, 2 * 4096, IBV_ACCESS_LOCAL_WRITE, -1, 0, &u),
		    "doca_verbs_umem_create");
		DOK(doca_verbs_cq_attr_set_external_umem(ca, u, 0), "external_umem");
		DOK(doca_verbs_cq_attr_set_external_dbr_umem(ca, u, 4096), "external_dbr_umem");
	}
	doca_error_t st = doca_verbs_cq_create(c, ca, &s->cq);
	doca_verbs_cq_attr_destroy(ca);
	if (internal)
		return st == DOCA_SUCCESS;
	DOK(st, "doca_verbs_cq_create");
	uint8_t esz;
	void *cb;
	doca_verbs_cq_get_wq(s->cq, &cb, &s->ncq, &esz);
	s->cqb = static_cast<uint8_t *>(cb);
	CHECK(s->ncq == NCQ && esz == 64, "the CQ: %u entries of %u bytes", s->ncq, esz);
	doca_verbs_qp_init_attr *ia;
	DOK(doca_verbs_qp_init_attr_create(&ia), "doca_verbs_qp_init_attr_create");
	DOK(doca_verbs_qp_init_attr_set_pd(ia, pd), "pd");
	DOK(doca_verbs_qp_init_attr_set_send_cq(ia, s->cq), "send_cq");
	DOK(doca_verbs_qp_init_attr_set_receive_cq(ia, s->cq), "receive_cq");
	DOK(doca_verbs_qp_init_attr_set_sq_wr(ia, NSQ), "sq_wr");
	DOK(doca_verbs_qp_init_attr_set_rq_wr(ia, 0), "rq_wr");
	DOK(doca_verbs_qp_init_attr_set_send_max_sges(ia, 1), "send_max_sges");
	DOK(doca_verbs_qp_init_attr_set_qp_type(ia, DOCA_VERBS_QP_TYPE_RC), "qp_type");
	if (cd_master)
		DOK(doca_verbs_qp_init_attr_set_core_direct_master(ia, 1), "core_direct_master");
	DOK(doca_verbs_qp_create(c, ia, &s->qp), "doca_verbs_qp_create");
	doca_verbs_qp_init_attr_destroy(ia);
	void *sq, *rq;
	uint32_t nrq, rsz;
	doca_verbs_qp_get_wq(s->qp, &sq, &s->nsq, &rq, &nrq, &rsz);
	s->sq = static_cast<uint8_t *>(sq);
	s->qpn = doca_verbs_qp_get_qpn(s->qp);
	CHECK(s->nsq >= NSQ, "the SQ: %u entries", s->nsq);
	return true;
}

/* As GPUNetIO's examples connect (examples/verbs_common.cpp's sequence). */
static void connect(ibv_context *c, side *s, uint32_t remote_qpn, const ibv_gid &gid)
{
	doca_verbs_ah_attr *ah;
	DOK(doca_verbs_ah_attr_create(c, &ah), "doca_verbs_ah_attr_create");
	DOK(doca_verbs_ah_attr_set_addr_type(ah, DOCA_VERBS_ADDR_TYPE_IPv4), "addr_type");
	DOK(doca_verbs_ah_attr_set_sgid_index(ah, GID_INDEX), "sgid_index");
	DOK(doca_verbs_ah_attr_set_hop_limit(ah, 255), "hop_limit");
	doca_verbs_gid g;
	memcpy(g.raw, gid.raw, sizeof(g.raw));
	DOK(doca_verbs_ah_attr_set_gid(ah, g), "gid");
	DOK(doca_verbs_ah_attr_set_sl(ah, 0), "sl");
	doca_verbs_qp_attr *a;
	DOK(doca_verbs_qp_attr_create(&a), "doca_verbs_qp_attr_create");
	DOK(doca_verbs_qp_attr_set_path_mtu(a, DOCA_VERBS_MTU_SIZE_1K_BYTES), "path_mtu");
	DOK(doca_verbs_qp_attr_set_rq_psn(a, 0), "rq_psn");
	DOK(doca_verbs_qp_attr_set_sq_psn(a, 0), "sq_psn");
	DOK(doca_verbs_qp_attr_set_port_num(a, 1), "port_num");
	DOK(doca_verbs_qp_attr_set_ack_timeout(a, 14), "ack_timeout");
	DOK(doca_verbs_qp_attr_set_retry_cnt(a, 7), "retry_cnt");
	DOK(doca_verbs_qp_attr_set_rnr_retry(a, 1), "rnr_retry");
	DOK(doca_verbs_qp_attr_set_min_rnr_timer(a, 1), "min_rnr_timer");
	DOK(doca_verbs_qp_attr_set_allow_remote_write(a, 1), "remote_write");
	DOK(doca_verbs_qp_attr_set_allow_remote_read(a, 1), "remote_read");
	DOK(doca_verbs_qp_attr_set_allow_remote_atomic(a, DOCA_VERBS_QP_ATOMIC_MODE_IB_SPEC),
	    "remote_atomic");
	DOK(doca_verbs_qp_attr_set_ah_attr(a, ah), "ah_attr");
	DOK(doca_verbs_qp_attr_set_pkey_index(a, 0), "pkey_index");
	DOK(doca_verbs_qp_attr_set_dest_qp_num(a, remote_qpn), "dest_qp_num");
	DOK(doca_verbs_qp_attr_set_next_state(a, DOCA_VERBS_QP_STATE_INIT), "INIT");
	DOK(doca_verbs_qp_modify(s->qp, a,
				 DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_WRITE |
					 DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_READ |
					 DOCA_VERBS_QP_ATTR_PKEY_INDEX | DOCA_VERBS_QP_ATTR_PORT_NUM),
	    "RST2INIT");
	DOK(doca_verbs_qp_attr_set_next_state(a, DOCA_VERBS_QP_STATE_RTR), "RTR");
	DOK(doca_verbs_qp_modify(s->qp, a,
				 DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_RQ_PSN |
					 DOCA_VERBS_QP_ATTR_DEST_QP_NUM | DOCA_VERBS_QP_ATTR_PATH_MTU |
					 DOCA_VERBS_QP_ATTR_AH_ATTR |
					 DOCA_VERBS_QP_ATTR_MIN_RNR_TIMER),
	    "INIT2RTR");
	DOK(doca_verbs_qp_attr_set_next_state(a, DOCA_VERBS_QP_STATE_RTS), "RTS");
	DOK(doca_verbs_qp_modify(s->qp, a,
				 DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_SQ_PSN |
					 DOCA_VERBS_QP_ATTR_ACK_TIMEOUT |
					 DOCA_VERBS_QP_ATTR_RETRY_CNT | DOCA_VERBS_QP_ATTR_RNR_RETRY),
	    "RTR2RTS");
	doca_verbs_qp_attr_destroy(a);
	doca_verbs_ah_attr_destroy(ah);
}

/* The WQE at w posted: the send doorbell record, then the register. */
static void ring(side *s, const uint8_t *w)
{
	s->pi++;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	auto *dbr = static_cast<volatile uint32_t *>(doca_verbs_qp_get_dbr_addr(s->qp));
	dbr[MLX5_SND_DBR] = htobe32(s->pi & 0xffff);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	uint64_t word;
	memcpy(&word, w, 8);
	*static_cast<volatile uint64_t *>(doca_verbs_qp_get_uar_addr(s->qp)) = word;
}

/* The next WQEBB of s's SQ, zeroed, with a signaled ctrl segment of
 * opcode and ds 16-byte units. */
static uint8_t *wqe_at(side *s, uint8_t opcode, uint8_t ds)
{
	uint8_t *w = s->sq + (s->pi % s->nsq) * 64;
	memset(w, 0, 64);
	mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg *>(w), static_cast<uint16_t>(s->pi),
			    opcode, 0, s->qpn, MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
	return w;
}

/* An RDMA write, signaled. */
static void write(side *s, uint64_t la, uint32_t lkey, uint64_t ra, uint32_t rkey, uint32_t len)
{
	uint8_t *w = wqe_at(s, MLX5_OPCODE_RDMA_WRITE, 3);
	auto *r = reinterpret_cast<mlx5_wqe_raddr_seg *>(w + 16);
	r->raddr = htobe64(ra);
	r->rkey = htobe32(rkey);
	mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg *>(w + 32), len, lkey, la);
	ring(s, w);
}

/* A WAIT on CQ cqn for its CQE of index `index` (24 bits), signaled, as
 * GPUNetIO's counter operations write it: ctrl, 8 reserved bytes, the
 * index, the CQ's number. */
static void wait_cqe(side *s, uint32_t cqn, uint32_t index)
{
	uint8_t *w = wqe_at(s, 0x0f /* WAIT */, 2);
	uint32_t seg[4] = {0, 0, htobe32(index), htobe32(cqn)};
	memcpy(w + 16, seg, sizeof(seg));
	ring(s, w);
}

/* A fetch-and-add of `add` at ra, the old value to la (8 bytes). */
static void fetch_add(side *s, uint64_t la, uint32_t lkey, uint64_t ra, uint32_t rkey, uint64_t add)
{
	uint8_t *w = wqe_at(s, MLX5_OPCODE_ATOMIC_FA, 4);
	auto *r = reinterpret_cast<mlx5_wqe_raddr_seg *>(w + 16);
	r->raddr = htobe64(ra);
	r->rkey = htobe32(rkey);
	auto *at = reinterpret_cast<mlx5_wqe_atomic_seg *>(w + 32);
	at->swap_add = htobe64(add);
	at->compare = 0;
	mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg *>(w + 48), 8, lkey, la);
	ring(s, w);
}

/* The next CQE within 5 s, then its slot given back: its opcode. */
static int poll(side *s, uint16_t *wqe_counter)
{
	auto *e = reinterpret_cast<mlx5_cqe64 *>(s->cqb + (s->ci % s->ncq) * 64);
	time_t end = time(nullptr) + 5;
	for (;;) {
		uint8_t o = __atomic_load_n(&e->op_own, __ATOMIC_ACQUIRE);
		if ((o >> 4) != MLX5_CQE_INVALID && (o & 1) == ((s->ci / s->ncq) & 1))
			break;
		CHECK(time(nullptr) < end, "no CQE %u within 5 s", s->ci);
	}
	int op = mlx5dv_get_cqe_opcode(e);
	*wqe_counter = be16toh(e->wqe_counter);
	s->ci++;
	uint64_t *reg;
	uint32_t *ci_dbr, *arm;
	doca_verbs_cq_get_dbr_addr(s->cq, &reg, &ci_dbr, &arm);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*reinterpret_cast<volatile uint32_t *>(ci_dbr) = htobe32(s->ci & 0xffffff);
	return op;
}

int main(int argc, char **argv)
{
	bool internal = argc > 1 && !strcmp(argv[1], "internal");
	int n = 0;
	ibv_device **l = ibv_get_device_list(&n);
	CHECK(l && n > 0, "no RDMA device");
	ibv_device *d = nullptr;
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), "kinet0"))
			d = l[i];
	CHECK(d, "no kinet0 (not under kinet-run?)");
	ibv_context *c = ibv_open_device(d); /* as GPUNetIO's examples open it */
	CHECK(c, "ibv_open_device");
	ibv_pd *pd = ibv_alloc_pd(c);
	CHECK(pd, "ibv_alloc_pd");
	if (internal) {
		side x{};
		CHECK(!make(c, pd, &x, true), "a CQ whose doorbell record names umem 0 was made");
		printf("gpunetio_host: GPUNetIO's own CQ umem names doorbell-record umem 0: "
		       "refused\n");
		return 0;
	}
	auto *src = static_cast<uint8_t *>(aligned_alloc(4096, LEN));
	auto *dst = static_cast<uint8_t *>(aligned_alloc(4096, LEN));
	CHECK(src && dst, "aligned_alloc");
	for (int i = 0; i < LEN; i++)
		src[i] = static_cast<uint8_t>(rnd());
	memset(dst, 0, LEN);
	ibv_mr *ms = ibv_reg_mr(pd, src, LEN, IBV_ACCESS_LOCAL_WRITE);
	ibv_mr *md = ibv_reg_mr(pd, dst, LEN,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(ms && md, "ibv_reg_mr");
	side a{}, b{};
	make(c, pd, &a, false);
	make(c, pd, &b, false, true); /* b: the companion of GPUNetIO's counter operations */
	ibv_gid gid;
	CHECK(!ibv_query_gid(c, 1, GID_INDEX, &gid), "ibv_query_gid %d", GID_INDEX);
	connect(c, &a, b.qpn, gid);
	connect(c, &b, a.qpn, gid);
	for (int k = 0; k < WRITES; k++) {
		uint32_t len = 1 + static_cast<uint32_t>(rnd() % 4096);
		uint32_t off = static_cast<uint32_t>(rnd() % (LEN - 4096 - len));
		for (uint32_t i = 0; i < len; i++)
			src[off + i] = static_cast<uint8_t>(rnd());
		write(&a, reinterpret_cast<uint64_t>(src + off), ms->lkey,
		      reinterpret_cast<uint64_t>(dst + off), md->rkey, len);
		uint16_t wc;
		int op = poll(&a, &wc);
		CHECK(op == MLX5_CQE_REQ && wc == static_cast<uint16_t>(a.pi - 1),
		      "write %d: CQE opcode 0x%x, wqe_counter %u", k, op, wc);
		CHECK(!memcmp(src + off, dst + off, len), "write %d: %u bytes differ at the target", k,
		      len);
	}
	/* the counter: b waits for a's K-th next CQE, then adds to a word at
	 * a's side; a's writes come after, one by one */
	enum { K = 4 };
	auto *counter = reinterpret_cast<volatile uint64_t *>(dst + LEN - 64);
	auto *old = reinterpret_cast<uint64_t *>(src + LEN - 64);
	*counter = 0;
	*old = ~0ull;
	uint64_t add = rnd() | 1;
	wait_cqe(&b, doca_verbs_cq_get_cqn(a.cq), (a.ci + K - 1) & 0xffffff);
	fetch_add(&b, reinterpret_cast<uint64_t>(old), ms->lkey, reinterpret_cast<uint64_t>(counter),
		  md->rkey, add);
	for (int k = 0; k < K; k++) {
		struct timespec ts = {0, k ? 20000000 : 100000000};
		nanosleep(&ts, nullptr);
		CHECK(*counter == 0, "the counter moved after %d of %d writes", k, K);
		auto *e = reinterpret_cast<mlx5_cqe64 *>(b.cqb + (b.ci % b.ncq) * 64);
		uint8_t o = __atomic_load_n(&e->op_own, __ATOMIC_ACQUIRE);
		CHECK((o >> 4) == MLX5_CQE_INVALID || (o & 1) != ((b.ci / b.ncq) & 1),
		      "the companion completed a WQE after %d of %d writes", k, K);
		write(&a, reinterpret_cast<uint64_t>(src), ms->lkey, reinterpret_cast<uint64_t>(dst),
		      md->rkey, 64);
		uint16_t wc;
		CHECK(poll(&a, &wc) == MLX5_CQE_REQ, "counter write %d", k);
	}
	uint16_t wc;
	int op = poll(&b, &wc);
	CHECK(op == MLX5_CQE_REQ && wc == static_cast<uint16_t>(b.pi - 2), "WAIT: CQE 0x%x", op);
	op = poll(&b, &wc);
	CHECK(op == MLX5_CQE_REQ && wc == static_cast<uint16_t>(b.pi - 1),
	      "fetch-and-add: CQE 0x%x", op);
	CHECK(*counter == add && be64toh(*old) == 0, "the counter 0x%llx (old 0x%llx), want 0x%llx",
	      (unsigned long long)*counter, (unsigned long long)be64toh(*old),
	      (unsigned long long)add);
	DOK(doca_verbs_qp_destroy(a.qp), "doca_verbs_qp_destroy");
	DOK(doca_verbs_qp_destroy(b.qp), "doca_verbs_qp_destroy");
	DOK(doca_verbs_cq_destroy(a.cq), "doca_verbs_cq_destroy");
	DOK(doca_verbs_cq_destroy(b.cq), "doca_verbs_cq_destroy");
	printf("gpunetio_host: GPUNetIO's doca_verbs QPs 0x%x and 0x%x: %d writes over %d laps of "
	       "the CQ, a counter behind a WAIT on %d writes: ok\n",
	       a.qpn, b.qpn, WRITES, WRITES / NCQ, (int)K);
	return 0;
}

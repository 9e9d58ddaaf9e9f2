/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * devx.c - the fast path: CQs and the RC QP built as DevX objects from PRM
 * commands (ifc.c), with the work queue, the CQ buffers and the doorbell
 * records in one allocation that lives in GPU memory when there is a GPU
 * (registered as a umem over a dma-buf, else through peer memory), and a UAR
 * of the QP's own (non-cached dedicated, then non-cached, then BlueFlame).
 *
 * Layout of the allocation (each part 4 KiB aligned):
 *   [ WQ: RQ (rq_cnt x 16 B) then SQ (sq_cnt x 64 B) | send CQ | receive CQ |
 *     doorbell records: QP at 0, send CQ at 64, receive CQ at 128 ]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nic/mlx5/priv.h"
#include "nic/mlx5/ifc.h"

#if KINET_HAVE_RDMA_HEADERS

#define PG 4096u
#define ALIGN_PG(x) (((x) + PG - 1) & ~(size_t)(PG - 1))
#define DBR_QP 0
#define DBR_SCQ 64
#define DBR_RCQ 128

static uint32_t ilog2(uint32_t v)
{
	uint32_t l = 0;
	while ((1u << l) < v)
		l++;
	return l;
}

/* One QUERY_HCA_CAP (current values) into out (kinet_prm_query_hca_cap_out). */
static int query_cap(struct m5 *m, uint32_t type, void *out, size_t outlen)
{
	uint8_t in[16];
	int rc = kinet_prm_build_query_hca_cap(in, sizeof(in), type, 1);
	if (rc)
		return rc;
	memset(out, 0, outlen);
	errno = 0;
	rc = m->ops->devx_general_cmd(m->ib, in, sizeof(in), out, outlen);
	if (rc) {
		uint32_t st, synd;
		kinet_prm_out_status(out, &st, &synd);
		int e = rc > 0 ? rc : (errno ? errno : EIO);
		KLOG_ERR("mlx5 %s: DevX QUERY_HCA_CAP (type %u) failed: %s (status 0x%x, syndrome "
			 "0x%x)",
			 m->name, type, strerror(e), st, synd);
		return -e;
	}
	return 0;
}

/* The device's capabilities that the PRM fields kinet sets depend on: the
 * largest message, the timestamp format QPs must use (a device that only has
 * real-time timestamps refuses a free-running QP), the BlueFlame buffer
 * size, CQ overrun ignore. Firmware refuses what they do not allow. */
static int query_caps(struct m5 *m)
{
	if (!m->ops->devx_general_cmd) {
		KLOG_WARN("mlx5 %s: rdma-core has no mlx5dv_devx_general_cmd: the device's "
			  "capabilities cannot be read, DevX is not used",
			  m->name);
		return -ENOTSUP;
	}
	size_t len = kinet_prm_bytes(&kinet_prm_query_hca_cap_out);
	uint8_t *out = malloc(len);
	if (!out)
		return -ENOMEM;
	int rc = query_cap(m, KINET_PRM_CAP_GENERAL, out, len);
	uint64_t v;
#define CAP(l, name) (kinet_prm_get(&l, out, "capability." name, &v), (uint32_t)v)
	if (rc == 0) {
		m->cap.log_max_msg = CAP(kinet_prm_query_hca_cap_out, "log_max_msg");
		m->cap.cq_oi = CAP(kinet_prm_query_hca_cap_out, "cq_oi");
		uint32_t bf = CAP(kinet_prm_query_hca_cap_out, "bf");
		uint32_t lbf = CAP(kinet_prm_query_hca_cap_out, "log_bf_reg_size");
		/* the register holds two buffers used in turn (rdma-core: bf_reg_size / 2),
		 * both in the upper half of the 4 KiB UAR page */
		m->cap.bf_size = bf && lbf >= 7 && lbf <= 11 ? (1u << lbf) / 2 : 0;
		m->cap.qp_ts_format = CAP(kinet_prm_query_hca_cap_out, "sq_ts_format");
		if (!CAP(kinet_prm_query_hca_cap_out, "rc")) {
			KLOG_ERR("mlx5 %s: the device reports no RC transport", m->name);
			rc = -ENOTSUP;
		}
	}
	if (rc == 0 && m->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
		/* RoCE QPs follow the RoCE capability's timestamp format */
		rc = query_cap(m, KINET_PRM_CAP_ROCE, out, len);
		if (rc == 0)
			m->cap.qp_ts_format = CAP(kinet_prm_query_roce_cap_out, "qp_ts_format");
	}
#undef CAP
	free(out);
	if (rc)
		return rc;
	if (m->cap.log_max_msg == 0 || m->cap.log_max_msg > 31) {
		KLOG_ERR("mlx5 %s: the device reports log_max_msg %u", m->name, m->cap.log_max_msg);
		return -EPROTO;
	}
	KLOG_DBG("mlx5 %s: caps: log_max_msg %u, QP timestamps %u, BlueFlame %u B, CQ overrun "
		 "ignore %d",
		 m->name, m->cap.log_max_msg, m->cap.qp_ts_format, m->cap.bf_size, m->cap.cq_oi);
	return 0;
}

int kinet_m5_devx_open(struct m5 *m)
{
	const struct kinet_mlx5_ops *o = m->ops;
	if (!o->devx_obj_create || !o->devx_obj_modify || !o->devx_obj_destroy ||
	    !o->devx_umem_reg || !o->devx_umem_dereg || !o->devx_alloc_uar || !o->devx_free_uar ||
	    !o->devx_query_eqn) {
		KLOG_WARN("mlx5 %s: rdma-core has no DevX", m->name);
		return -ENOTSUP;
	}
	errno = 0;
	int rc = o->devx_query_eqn(m->ib, 0, &m->eqn);
	if (rc) {
		int e = rc > 0 ? rc : (errno ? errno : EIO);
		KLOG_WARN("mlx5 %s: DevX refused (query EQN: %s): was the context opened with DevX?",
			  m->name, strerror(e));
		return -e;
	}
	if ((rc = query_caps(m)) != 0)
		return rc;
	m->devx = true;
	return 0;
}

/* Runs a DevX create command: the object, or NULL with the PRM status. */
static struct mlx5dv_devx_obj *run_create(struct m5 *m, const char *what, const void *in,
					  size_t inlen, void *out, size_t outlen)
{
	memset(out, 0, outlen);
	errno = 0;
	struct mlx5dv_devx_obj *o = m->ops->devx_obj_create(m->ib, in, inlen, out, outlen);
	if (!o) {
		uint32_t st, synd;
		kinet_prm_out_status(out, &st, &synd);
		KLOG_ERR("mlx5 %s: DevX %s failed: %s (status 0x%x, syndrome 0x%x)", m->name, what,
			 strerror(errno ? errno : EIO), st, synd);
	}
	return o;
}

/* The queue memory: GPU memory when there is a GPU, else host memory. */
static int qmem_alloc(struct m5 *m, struct m5_qp *x, size_t len)
{
	const struct kinet_mlx5_ops *o = m->ops;
	x->qlen = len;
	if (m->gpu && o->gpu_alloc && o->gpu_alloc(len, (void **)&x->qmem) == 0) {
		x->on_gpu = true;
		return 0;
	}
	if (m->gpu)
		KLOG_WARN("mlx5 %s: no GPU memory for the queues: host memory", m->name);
	x->qmem = aligned_alloc(PG, len);
	return x->qmem ? 0 : -ENOMEM;
}

static void qmem_free(struct m5 *m, struct m5_qp *x)
{
	if (!x->qmem)
		return;
	if (x->on_gpu)
		m->ops->gpu_free(x->qmem);
	else
		free(x->qmem);
	x->qmem = NULL;
}

/* Fills [off, off+n) of the queue memory with v. */
static int qmem_set(struct m5 *m, struct m5_qp *x, size_t off, int v, size_t n)
{
	if (x->on_gpu)
		return m->ops->gpu_memset(x->qmem + off, v, n);
	memset(x->qmem + off, v, n);
	return 0;
}

/* umem over a dma-buf of the GPU memory, else the plain (peer memory) one. */
static int umem_reg(struct m5 *m, struct m5_qp *x)
{
	const struct kinet_mlx5_ops *o = m->ops;
	uint32_t acc = IBV_ACCESS_LOCAL_WRITE;
	if (x->on_gpu && o->devx_umem_reg_ex && o->dmabuf_fd) {
		int fd = -1;
		uint64_t off = 0;
		if (o->dmabuf_fd(x->qmem, x->qlen, &fd, &off) == 0) {
			struct mlx5dv_devx_umem_in in = {
				.addr = x->qmem,
				.size = x->qlen,
				.access = acc,
				.pgsz_bitmap = PG,
				.comp_mask = MLX5DV_UMEM_MASK_DMABUF,
				.dmabuf_fd = fd,
			};
			errno = 0;
			x->umem = o->devx_umem_reg_ex(m->ib, &in);
			int e = errno;
			close(fd);
			if (x->umem) {
				KLOG_DBG("mlx5 %s: queue umem %u over a dma-buf", m->name,
					 x->umem->umem_id);
				return 0;
			}
			KLOG_INFO("mlx5 %s: dma-buf umem refused (%s): trying peer memory", m->name,
				  strerror(e ? e : EIO));
		}
	}
	errno = 0;
	x->umem = o->devx_umem_reg(m->ib, x->qmem, x->qlen, acc);
	if (!x->umem) {
		int e = errno ? errno : EIO;
		KLOG_ERR("mlx5 %s: the queue memory cannot be registered as a umem: %s%s", m->name,
			 strerror(e), x->on_gpu ? " (GPU memory: no dma-buf and no peer memory?)" : "");
		return -e;
	}
	return 0;
}

/* The UAR: non-cached dedicated, non-cached, then BlueFlame. */
static int uar_alloc(struct m5 *m, struct m5_qp *x)
{
	static const struct {
		uint32_t type;
		const char *name;
	} order[] = {
		{KINET_UAR_ALLOC_NC_DEDICATED, "non-cached dedicated"},
		{KINET_UAR_ALLOC_NC, "non-cached"},
		{KINET_UAR_ALLOC_BF, "BlueFlame"},
	};
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		errno = 0;
		x->uar = m->ops->devx_alloc_uar(m->ib, order[i].type);
		if (x->uar) {
			x->bf_reg = x->uar->reg_addr;
			x->bf_size = order[i].type == KINET_UAR_ALLOC_BF ? m->cap.bf_size : 0;
			KLOG_DBG("mlx5 %s: %s UAR page %u", m->name, order[i].name, x->uar->page_id);
			return 0;
		}
		KLOG_DBG("mlx5 %s: no %s UAR (%s)", m->name, order[i].name,
			 strerror(errno ? errno : EIO));
	}
	KLOG_ERR("mlx5 %s: no UAR could be allocated", m->name);
	return -ENOMEM;
}

static int create_cq(struct m5 *m, struct m5_qp *x, uint32_t cnt, size_t off, size_t dbr,
		     struct mlx5dv_devx_obj **obj)
{
	uint8_t in[272], out[16];
	if ((x->q.attr.cq_flags & KINET_CQ_OVERRUN_IGNORE) && !m->cap.cq_oi) {
		KLOG_ERR("mlx5 %s: the device cannot create CQs with overrun ignore (cq_oi 0)",
			 m->name);
		return -EOPNOTSUPP;
	}
	struct kinet_prm_cq_params p = {
		.overrun_ignore = (x->q.attr.cq_flags & KINET_CQ_OVERRUN_IGNORE) ? 1 : 0,
		.log_cq_size = ilog2(cnt),
		.uar_page = x->uar->page_id,
		.eqn = m->eqn,
		.cq_umem_id = x->umem->umem_id,
		.cq_umem_offset = off,
		.dbr_umem_id = x->umem->umem_id,
		.dbr_offset = dbr,
	};
	int rc = kinet_prm_build_create_cq(in, sizeof(in), &p);
	if (rc)
		return rc;
	*obj = run_create(m, "CREATE_CQ", in, sizeof(in), out, sizeof(out));
	if (!*obj)
		return -EIO;
	uint64_t cqn = 0;
	kinet_prm_get(&kinet_prm_create_cq_out, out, "cqn", &cqn);
	return (int)cqn;
}

int kinet_m5_devx_create(struct m5 *m, kinet_qp *qp, struct m5_qp *x, uint32_t sq_cnt,
			 uint32_t rq_cnt)
{
	const struct kinet_mlx5_ops *o = m->ops;
	x->devx = true;
	size_t rq_bytes = (size_t)rq_cnt * 16;
	size_t wq = ALIGN_PG(rq_bytes + (size_t)sq_cnt * KN_SEND_WQE_BB);
	size_t scq = wq, scq_len = ALIGN_PG((size_t)sq_cnt * KN_CQE_SIZE);
	size_t rcq = scq + scq_len, rcq_len = rq_cnt ? ALIGN_PG((size_t)rq_cnt * KN_CQE_SIZE) : 0;
	size_t dbr = rcq + rcq_len;
	int rc = qmem_alloc(m, x, dbr + PG);
	if (rc)
		return rc;
	/* CQEs start invalid (opcode 0xf); everything else zero */
	if ((rc = qmem_set(m, x, 0, 0, x->qlen)) || (rc = qmem_set(m, x, scq, 0xff, scq_len)) ||
	    (rc = qmem_set(m, x, rcq, 0xff, rcq_len)))
		return rc;
	rc = umem_reg(m, x);
	if (rc && x->on_gpu) {
		/* GPU memory the NIC cannot reach: host memory, mapped into the GPU */
		KLOG_WARN("mlx5 %s: queues in host memory instead of GPU memory", m->name);
		qmem_free(m, x);
		x->on_gpu = false;
		x->qmem = aligned_alloc(PG, x->qlen);
		if (!x->qmem)
			return -ENOMEM;
		memset(x->qmem, 0, x->qlen);
		memset(x->qmem + scq, 0xff, scq_len);
		memset(x->qmem + rcq, 0xff, rcq_len);
		rc = umem_reg(m, x);
	}
	if (rc || (rc = uar_alloc(m, x)))
		return rc;
	struct mlx5dv_pd dpd = {0};
	struct mlx5dv_obj obj;
	memset(&obj, 0, sizeof(obj));
	obj.pd.in = m5_ipd(qp->pd);
	obj.pd.out = &dpd;
	if ((rc = o->mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD)) != 0) {
		KLOG_ERR("mlx5 %s: no PD number (mlx5dv_init_obj)", m->name);
		return rc > 0 ? -rc : -EIO;
	}
	int scqn = create_cq(m, x, sq_cnt, scq, dbr + DBR_SCQ, &x->oscq);
	if (scqn < 0)
		return scqn;
	int rcqn = scqn;
	if (rq_cnt && (rcqn = create_cq(m, x, rq_cnt, rcq, dbr + DBR_RCQ, &x->orcq)) < 0)
		return rcqn;
	uint8_t in[272], out[16];
	struct kinet_prm_qp_params p = {
		.pd = dpd.pdn,
		.uar_page = x->uar->page_id,
		.log_sq_size = ilog2(sq_cnt),
		.has_rq = rq_cnt != 0,
		.log_rq_size = rq_cnt ? ilog2(rq_cnt) : 0,
		.log_rq_stride = 0, /* 16 bytes: one data segment */
		.cqn_snd = (uint32_t)scqn,
		.cqn_rcv = (uint32_t)rcqn,
		.wq_umem_id = x->umem->umem_id,
		.wq_umem_offset = 0,
		.dbr_umem_id = x->umem->umem_id,
		.dbr_offset = dbr + DBR_QP,
		.ts_format = kinet_prm_ts_format_for(m->cap.qp_ts_format),
	};
	if ((rc = kinet_prm_build_create_qp(in, sizeof(in), &p)) != 0)
		return rc;
	x->oqp = run_create(m, "CREATE_QP", in, sizeof(in), out, sizeof(out));
	if (!x->oqp)
		return -EIO;
	uint64_t qpn = 0;
	kinet_prm_get(&kinet_prm_create_qp_out, out, "qpn", &qpn);
	qp->qpn = (uint32_t)qpn;
	qp->sq = x->qmem + rq_bytes;
	qp->sq_cnt = sq_cnt;
	qp->rq = rq_cnt ? x->qmem : NULL;
	qp->rq_cnt = rq_cnt;
	qp->rq_stride = 16;
	qp->dbrec = (volatile uint32_t *)(x->qmem + dbr + DBR_QP);
	kinet_m5_cq_view(&x->scq, qp->ctx, x->qmem + scq, sq_cnt,
			 (volatile uint32_t *)(x->qmem + dbr + DBR_SCQ));
	if (rq_cnt)
		kinet_m5_cq_view(&x->rcq, qp->ctx, x->qmem + rcq, rq_cnt,
				 (volatile uint32_t *)(x->qmem + dbr + DBR_RCQ));
	KLOG_DBG("mlx5 %s: DevX QP 0x%x, CQs 0x%x/0x%x, queues in %s memory", m->name, qp->qpn,
		 scqn, rcqn, x->on_gpu ? "GPU" : "host");
	return 0;
}

static int run_modify(struct m5 *m, struct m5_qp *x, const char *what, const void *in,
		      size_t inlen)
{
	uint8_t out[16];
	memset(out, 0, sizeof(out));
	errno = 0;
	int rc = m->ops->devx_obj_modify(x->oqp, in, inlen, out, sizeof(out));
	if (rc) {
		uint32_t st, synd;
		kinet_prm_out_status(out, &st, &synd);
		int e = rc > 0 ? rc : (errno ? errno : EIO);
		KLOG_ERR("mlx5 %s: DevX %s failed: %s (status 0x%x, syndrome 0x%x)", m->name, what,
			 strerror(e), st, synd);
		return -e;
	}
	return 0;
}

static uint32_t log_rd_atomic(int dev)
{
	uint32_t n = dev < 1 ? 1 : dev > 16 ? 16 : (uint32_t)dev;
	uint32_t l = 0;
	while ((2u << l) <= n)
		l++;
	return l;
}

int kinet_m5_devx_modify(struct m5 *m, kinet_qp *qp, struct m5_qp *x, int to,
			 const struct kinet_mlx5_ep *ep)
{
	uint8_t in[272];
	int rc;
	if (to == KINET_QPS_ERR || to == KINET_QPS_RESET) {
		uint16_t op = to == KINET_QPS_ERR ? KINET_PRM_OP_2ERR_QP : KINET_PRM_OP_2RST_QP;
		if ((rc = kinet_prm_build_qpn_cmd(in, sizeof(in), op, qp->qpn)) != 0)
			return rc;
		return run_modify(m, x, to == KINET_QPS_ERR ? "2ERR_QP" : "2RST_QP", in,
				  kinet_prm_bytes(&kinet_prm_qpn_in));
	}
	struct kinet_prm_qp_path p;
	memset(&p, 0, sizeof(p));
	p.port = m->port;
	uint16_t op;
	const char *what;
	switch (to) {
	case KINET_QPS_INIT:
		op = KINET_PRM_OP_RST2INIT_QP;
		what = "RST2INIT_QP";
		p.rre = (kinet_qp_remote_allowed(qp) & KINET_ACCESS_REMOTE_READ) != 0;
		p.rwe = (kinet_qp_remote_allowed(qp) & KINET_ACCESS_REMOTE_WRITE) != 0;
		p.rae = (kinet_qp_remote_allowed(qp) & KINET_ACCESS_REMOTE_ATOMIC) != 0;
		break;
	case KINET_QPS_RTR: {
		op = KINET_PRM_OP_INIT2RTR_QP;
		what = "INIT2RTR_QP";
		p.mtu = ep->mtu && ep->mtu < m->pattr.active_mtu ? ep->mtu : m->pattr.active_mtu;
		p.log_msg_max = m->cap.log_max_msg;
		p.remote_qpn = ep->qpn;
		p.next_rcv_psn = ep->psn;
		p.log_rra_max = log_rd_atomic(m->dattr.max_qp_rd_atom);
		p.min_rnr_nak = 12;
		if (m->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
			p.grh = 1;
			memcpy(p.rgid, ep->gid, 16);
			p.src_addr_index = (uint32_t)m->gid_index;
			p.hop_limit = 64;
			p.udp_sport = 0xc000u | (qp->qpn & 0x3fffu);
			/* the kernel resolves the next hop for verbs QPs; DevX needs it here */
			struct ibv_ah_attr ah;
			memset(&ah, 0, sizeof(ah));
			ah.is_global = 1;
			memcpy(ah.grh.dgid.raw, ep->gid, 16);
			ah.grh.sgid_index = (uint8_t)m->gid_index;
			ah.grh.hop_limit = 64;
			ah.port_num = m->port;
			uint16_t vid = 0xffff;
			if (!m->ops->resolve_eth_l2_from_gid ||
			    m->ops->resolve_eth_l2_from_gid(m->ib, &ah, p.rmac, &vid)) {
				KLOG_ERR("mlx5 %s: qp 0x%x: the remote GID's MAC cannot be resolved",
					 m->name, qp->qpn);
				return -EHOSTUNREACH;
			}
		} else {
			p.rlid = ep->lid;
		}
		break;
	}
	case KINET_QPS_RTS:
		op = KINET_PRM_OP_RTR2RTS_QP;
		what = "RTR2RTS_QP";
		p.next_send_psn = x->psn;
		p.log_sra_max = log_rd_atomic(m->dattr.max_qp_init_rd_atom);
		p.retry_count = 7;
		p.rnr_retry = qp->attr.rnr_retry;
		p.ack_timeout = (uint32_t)KT(MLX5_ACK_TIMEOUT);
		break;
	default: return -EINVAL;
	}
	if ((rc = kinet_prm_build_modify_qp(in, sizeof(in), op, qp->qpn, &p)) != 0)
		return rc;
	return run_modify(m, x, what, in, kinet_prm_bytes(&kinet_prm_modify_qp_in));
}

void kinet_m5_devx_release(struct m5 *m, struct m5_qp *x)
{
	const struct kinet_mlx5_ops *o = m->ops;
	if (x->oqp && o->devx_obj_destroy(x->oqp))
		KLOG_WARN("mlx5 %s: DevX QP destroy failed", m->name);
	if (x->orcq && o->devx_obj_destroy(x->orcq))
		KLOG_WARN("mlx5 %s: DevX CQ destroy failed", m->name);
	if (x->oscq && o->devx_obj_destroy(x->oscq))
		KLOG_WARN("mlx5 %s: DevX CQ destroy failed", m->name);
	if (x->umem && o->devx_umem_dereg(x->umem))
		KLOG_WARN("mlx5 %s: umem deregistration failed", m->name);
	if (x->uar)
		o->devx_free_uar(x->uar);
	qmem_free(m, x);
	x->oqp = x->orcq = x->oscq = NULL;
	x->umem = NULL;
	x->uar = NULL;
}

#endif /* KINET_HAVE_RDMA_HEADERS */

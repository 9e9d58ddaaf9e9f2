/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_tx.c - the software NIC's Ethernet send path: the doorbells of a send
 * queue (the conventions of the RC engine: the record or the register word,
 * either alone), then each WQE parsed without trusting a byte of it, its
 * data segments checked against the key table, the frame gathered into a
 * driver buffer, the offloaded checksums computed, the CQE written.
 *
 * What the NIC answers (as a ConnectX does: an error CQE, the queue in
 * error, every later WQE flushed until the host resets the queue):
 *   - a WQE whose ctrl segment lies (index, queue number, ds 0 or cut by the
 *     published index), an unknown opcode or opmod, an eth segment asking
 *     for TSO or more inline bytes than the WQE holds, a data segment cut
 *     by the WQE's end: local QP operation error;
 *   - a data segment outside its region: local protection error;
 *   - a frame shorter than an Ethernet header or longer than the port
 *     sends: local length error.
 * A WAIT WQE holds the queue (and every WQE behind it) until the port's
 * clock reaches its time.
 */
#include <string.h>
#include "nic/soft/eth_int.h"

#define WQE_MAX (KN_MAX_WQE_BBS * KN_SEND_WQE_BB)

/* WQEBBs published beyond the consumer index (the RC engine's rule: the
 * larger of what the record and the last register word name). */
static uint32_t published(struct soft_eth_txq *q)
{
	kinet_qp *qp = &q->t.q;
	uint16_t ci = (uint16_t)q->ci;
	uint32_t dbr = __atomic_load_n(&qp->dbrec[KN_SND_DBR], __ATOMIC_ACQUIRE);
	uint64_t reg = __atomic_load_n((uint64_t *)qp->db, __ATOMIC_ACQUIRE);
	if (reg != q->last_db_word) {
		q->last_db_word = reg;
		uint32_t a, b;
		memcpy(&a, &reg, 4);
		memcpy(&b, (const uint8_t *)&reg + 4, 4);
		uint32_t op = kn_be32toh(a), qd = kn_be32toh(b);
		if ((qd >> 8) == qp->qpn) {
			uint16_t idx = (uint16_t)(op >> 8);
			uint32_t ds = qd & 0x3f;
			q->db_target =
				(ds ? (uint16_t)(idx + (ds * 16 + 63) / 64) : idx) | 0x10000u;
		}
	}
	if (dbr != q->dbr_seen) {
		q->dbr_seen = dbr;
		q->dbr_target = (uint16_t)kn_be32toh(dbr) | 0x10000u;
	}
	uint32_t d_dbr = 0, d_reg = 0;
	if (q->dbr_target & 0x10000u) {
		d_dbr = (uint16_t)((uint16_t)q->dbr_target - ci);
		if (d_dbr == 0 || d_dbr > qp->sq_cnt) {
			q->dbr_target = 0;
			d_dbr = 0;
		}
	}
	if (q->db_target & 0x10000u) {
		d_reg = (uint16_t)((uint16_t)q->db_target - ci);
		if (d_reg == 0 || d_reg > qp->sq_cnt) {
			q->db_target = 0;
			d_reg = 0;
		}
	}
	return d_dbr > d_reg ? d_dbr : d_reg;
}

/* Writes the CQE of a WQE: success (byte count) or the error syndrome. */
static void tx_cqe(struct soft_eth_port *p, kinet_qp *qp, uint8_t opcode, uint16_t wqe_idx,
		   uint32_t bytes, uint32_t synd)
{
	struct kn_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	if (synd) {
		struct kn_err_cqe *e = (struct kn_err_cqe *)&cqe;
		e->syndrome = (uint8_t)synd;
		e->vendor_err_synd = synd == KN_SYND_WR_FLUSH_ERR ? 0xf9 : 0x00;
		e->s_wqe_opcode_qpn = kn_htobe32(((uint32_t)opcode << 24) | qp->qpn);
		e->wqe_counter = kn_htobe16(wqe_idx);
		e->op_own = KN_CQE_REQ_ERR << 4;
	} else {
		cqe.byte_cnt = kn_htobe32(bytes);
		cqe.sop_drop_qpn = kn_htobe32(((uint32_t)opcode << 24) | qp->qpn);
		cqe.wqe_counter = kn_htobe16(wqe_idx);
		cqe.op_own = KN_CQE_REQ << 4;
	}
	seth_cq_write(p, qp->scq, &cqe);
	if (synd)
		kinet_count_syndrome(qp->ctx, synd);
}

/* A WQE of a queue in error: its flush CQE. */
static int flush(struct soft_eth_port *p, struct soft_eth_txq *q, uint32_t avail)
{
	kinet_qp *qp = &q->t.q;
	int n = 0;
	while (avail > 0 && soft_cq_space(qp->scq) > 0) {
		const uint8_t *c = qp->sq + (q->ci & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB;
		uint32_t ds = kn_load_be32(c + 4) & 0x3f;
		uint32_t nbb = ds ? (ds * 16 + 63) / 64 : 1;
		if (nbb > avail)
			nbb = avail;
		/* counted before its CQE is out: whoever reads the CQE sees it counted */
		ECTR(&q->ctr, tx_errors[KINET_ETH_TXE_FLUSHED], 1);
		tx_cqe(p, qp, c[3], (uint16_t)q->ci, 0, KN_SYND_WR_FLUSH_ERR);
		q->ci += nbb;
		avail -= nbb;
		n++;
	}
	return n;
}

/* One gather piece of a send WQE, checked. */
struct piece {
	const uint8_t *ptr;
	uint32_t len;
	int kind;
};

/* Parses the send WQE w (ds 16-byte units) into pieces: 0 or a syndrome. */
static uint32_t parse_send(struct soft_eth_port *p, kinet_qp *qp, const uint8_t *w, uint32_t ds,
			   struct piece *pc, int *npc, uint32_t *total, uint8_t *cs)
{
	uint32_t end = ds * 16;
	if (ds < 3)
		return KN_SYND_LOCAL_QP_OP_ERR;
	const struct kn_wqe_eth_seg *e = (const struct kn_wqe_eth_seg *)(w + 16);
	*cs = e->cs_flags;
	if (e->mss)
		return KN_SYND_LOCAL_QP_OP_ERR; /* TSO in a SEND */
	uint32_t ihs = kn_be16toh(e->inline_hdr_sz);
	uint32_t off = kn_eth_wqe_dseg_offset(ihs);
	if (off > end || 30 + ihs > end)
		return KN_SYND_LOCAL_QP_OP_ERR; /* more inline bytes than the WQE holds */
	int n = 0;
	uint64_t sum = ihs;
	if (ihs) {
		pc[n].ptr = w + 30;
		pc[n].len = ihs;
		pc[n].kind = KINET_MEM_HOST;
		n++;
	}
	while (off < end) {
		if (n == SOFT_MAX_SGE)
			return KN_SYND_LOCAL_QP_OP_ERR;
		uint32_t bc = kn_load_be32(w + off);
		if (bc & KN_INLINE_SEG) {
			uint32_t len = bc & ~KN_INLINE_SEG;
			if (len > end - off - 4)
				return KN_SYND_LOCAL_QP_OP_ERR;
			pc[n].ptr = w + off + 4;
			pc[n].len = len;
			pc[n].kind = KINET_MEM_HOST;
			off += (4 + len + 15) & ~15u;
		} else {
			if (end - off < 16)
				return KN_SYND_LOCAL_QP_OP_ERR;
			uint32_t lkey = kn_load_be32(w + off + 4);
			uint64_t addr = kn_load_be64(w + off + 8);
			off += 16;
			/* a byte count of 0 means 2^31 bytes (the PRM's data segment) */
			if (sum + (bc ? bc : 1ull << 31) > p->p.max_frame)
				return KN_SYND_LOCAL_LENGTH_ERR;
			struct kinet_mr_ref ref;
			if (soft_mr_check(qp->ctx, qp->pd, lkey, addr, bc, 0, &ref))
				return KN_SYND_LOCAL_PROT_ERR;
			pc[n].ptr = ref.ptr;
			pc[n].len = bc;
			pc[n].kind = ref.kind;
		}
		sum += pc[n].len;
		if (sum > p->p.max_frame)
			return KN_SYND_LOCAL_LENGTH_ERR;
		n++;
	}
	if (sum < KN_ETH_HDR_LEN)
		return KN_SYND_LOCAL_LENGTH_ERR;
	*npc = n;
	*total = (uint32_t)sum;
	return 0;
}

static uint32_t txe_of(uint32_t synd)
{
	return synd == KN_SYND_LOCAL_PROT_ERR	  ? KINET_ETH_TXE_PROTECTION
	       : synd == KN_SYND_LOCAL_LENGTH_ERR ? KINET_ETH_TXE_LENGTH
						  : KINET_ETH_TXE_MALFORMED;
}

int soft_eth_tx_serve(struct soft_eth_port *p, struct soft_eth_txq *q, int budget)
{
	kinet_qp *qp = &q->t.q;
	int work = 0;
	if (qp->db_mode == KN_DB_CPU_PROXY)
		work += kinet_proxy_ring(qp, NULL);
	uint32_t avail = published(q);
	if (!avail)
		return work;
	if (atomic_load(&qp->state) == KINET_QPS_ERR) {
		work += flush(p, q, avail);
		atomic_store(&q->ci_pub, q->ci);
		return work;
	}
	uint8_t w[WQE_MAX];
	struct piece pc[SOFT_MAX_SGE];
	uint32_t mask = qp->sq_cnt - 1;
	for (int n = 0; n < budget && avail > 0; n++) {
		if (soft_cq_space(qp->scq) == 0)
			break; /* the consumer is behind: later */
		memcpy(w, qp->sq + (q->ci & mask) * KN_SEND_WQE_BB, KN_SEND_WQE_BB);
		uint32_t op_idx = kn_load_be32(w), qpn_ds = kn_load_be32(w + 4);
		uint8_t opcode = (uint8_t)op_idx, opmod = (uint8_t)(op_idx >> 24);
		uint16_t idx = (uint16_t)(op_idx >> 8);
		uint32_t ds = qpn_ds & 0x3f;
		bool signaled = (w[11] & 0x0c) >= KN_WQE_CTRL_CQ_UPDATE;
		uint32_t nbb = ds ? (ds * 16 + 63) / 64 : 1;
		uint32_t synd = 0, bytes = 0;
		if (nbb > avail) {
			nbb = avail; /* the published index cuts the WQE */
			synd = KN_SYND_LOCAL_QP_OP_ERR;
		} else {
			for (uint32_t i = 1; i < nbb; i++)
				memcpy(w + i * KN_SEND_WQE_BB,
				       qp->sq + ((q->ci + i) & mask) * KN_SEND_WQE_BB,
				       KN_SEND_WQE_BB);
			if (ds == 0 || idx != (uint16_t)q->ci || (qpn_ds >> 8) != qp->qpn)
				synd = KN_SYND_LOCAL_QP_OP_ERR;
		}
		if (!synd) {
			switch (opcode) {
			case KN_OPCODE_NOP:
				break;
			case KN_OPCODE_WAIT: {
				const struct kn_wqe_wait_seg *s = (const void *)(w + 16);
				if (opmod != KN_OPMOD_WAIT_TIME || ds < 3 ||
				    kn_be32toh(s->operation) != KN_WAIT_COND_CYCLIC_SMALLER) {
					synd = KN_SYND_LOCAL_QP_OP_ERR;
					break;
				}
				uint64_t mask64 = kn_be64toh(s->mask);
				uint64_t when = kn_rt_to_ns(kn_be64toh(s->value) & mask64);
				uint64_t now = soft_eth_now();
				if (now < when) {
					/* hold the queue: this WQE and those behind it */
					if (!p->wait_until || when < p->wait_until)
						p->wait_until = when;
					goto out;
				}
				ECTR(&q->ctr, tx_waits, 1);
				break;
			}
			case KN_OPCODE_SEND: {
				int npc = 0;
				uint8_t cs = 0;
				synd = parse_send(p, qp, w, ds, pc, &npc, &bytes, &cs);
				if (synd)
					break;
				uint8_t *f = p->drv->tx_buf(p, bytes);
				if (!f)
					goto out; /* the driver has no room: a later pass */
				uint32_t at = 0;
				int rc = 0;
				for (int i = 0; i < npc && !rc; i++) {
					rc = kinet_mem_copy(f + at, KINET_MEM_HOST, pc[i].ptr,
							    pc[i].kind, pc[i].len);
					at += pc[i].len;
				}
				if (rc) {
					/* a GPU copy failed: the bytes cannot be read */
					synd = KN_SYND_LOCAL_PROT_ERR;
					p->drv->tx_commit(p, f, 0); /* unused */
					break;
				}
				if (cs && soft_eth_tx_csum(f, bytes, cs))
					ECTR(&q->ctr, tx_csum, 1);
				p->drv->tx_commit(p, f, bytes);
				ECTR(&q->ctr, packets, 1);
				ECTR(&q->ctr, bytes, bytes);
				break;
			}
			default:
				synd = KN_SYND_LOCAL_QP_OP_ERR;
				break;
			}
		}
		if (synd) {
			/* error first, then the CQE naming the slot's own index */
			atomic_store(&qp->state, KINET_QPS_ERR);
			ECTR(&q->ctr, tx_errors[txe_of(synd)], 1);
			tx_cqe(p, qp, opcode, (uint16_t)q->ci, 0, synd);
			KLOG_DBG("eth txq 0x%x: WQE %u: %s", qp->qpn, (unsigned)(q->ci & 0xffff),
				 kinet_syndrome_str(synd));
			q->ci += nbb;
			work++;
			break;
		}
		if (signaled)
			tx_cqe(p, qp, opcode, idx, bytes, 0);
		q->ci += nbb;
		avail -= nbb;
		work++;
	}
out:
	atomic_store(&q->ci_pub, q->ci);
	return work;
}

/* ---- checksum offloads ------------------------------------------------------------ */

/* Folds a 32-bit sum and stores its complement at p (network order). */
static void put_sum(uint8_t *p, uint32_t sum, int udp)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	uint16_t v = (uint16_t)~sum;
	if (udp && v == 0)
		v = 0xffff; /* UDP: 0 means "no checksum" */
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

int soft_eth_tx_csum(uint8_t *f, uint32_t len, uint8_t cs)
{
	uint32_t l3 = 14;
	uint16_t et = (uint16_t)(f[12] << 8 | f[13]);
	if (et == 0x8100 && len >= 18) {
		et = (uint16_t)(f[16] << 8 | f[17]);
		l3 = 18;
	}
	int done = 0;
	uint32_t l4, l4len;
	uint8_t proto;
	uint32_t sum = 0;
	if (et == 0x0800) {
		if (len < l3 + 20 || (f[l3] >> 4) != 4)
			return 0;
		uint32_t ihl = (f[l3] & 0xfu) * 4u, tot = (uint32_t)(f[l3 + 2] << 8 | f[l3 + 3]);
		if (ihl < 20 || tot < ihl || l3 + tot > len)
			return 0; /* headers that contradict the frame: left as they are */
		if (cs & KN_ETH_WQE_L3_CSUM) {
			f[l3 + 10] = f[l3 + 11] = 0;
			put_sum(f + l3 + 10, soft_eth_sum(0, f + l3, ihl), 0);
			done = 1;
		}
		if (!(cs & KN_ETH_WQE_L4_CSUM) || (f[l3 + 6] & 0x3f) || f[l3 + 7])
			return done; /* no L4 offload, or a fragment */
		proto = f[l3 + 9];
		l4 = l3 + ihl;
		l4len = tot - ihl;
		sum = soft_eth_sum(0, f + l3 + 12, 8);
	} else if (et == 0x86dd) {
		if (len < l3 + 40 || (f[l3] >> 4) != 6 || !(cs & KN_ETH_WQE_L4_CSUM))
			return 0;
		l4len = (uint32_t)(f[l3 + 4] << 8 | f[l3 + 5]);
		if (l3 + 40 + l4len > len)
			return 0;
		proto = f[l3 + 6];
		l4 = l3 + 40;
		sum = soft_eth_sum(0, f + l3 + 8, 32);
	} else {
		return 0;
	}
	uint32_t at;
	if (proto == 17 && l4len >= 8)
		at = 6;
	else if (proto == 6 && l4len >= 20)
		at = 16;
	else
		return done;
	uint8_t pl[4] = {0, proto, (uint8_t)(l4len >> 8), (uint8_t)l4len};
	sum = soft_eth_sum(sum, pl, 4);
	f[l4 + at] = f[l4 + at + 1] = 0;
	sum = soft_eth_sum(sum, f + l4, l4len);
	put_sum(f + l4 + at, sum, proto == 17);
	return 1;
}

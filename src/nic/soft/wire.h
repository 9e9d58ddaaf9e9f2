/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h - the software NIC's wire to QPs in other processes.
 *
 * Contract with the engine (engine.c): for a QP whose peer is remote
 * (qp->wire != NULL), the engine parses and checks each WQE locally, then
 * calls kinet_wire_post(); the wire carries the request, the remote engine
 * runs the responder (soft_resp_*), and the answer comes back. The wire
 * writes the requester's CQEs strictly in WQE order from
 * kinet_wire_progress(), which the engine calls on every pass of the QP.
 */
#ifndef KINET_WIRE_H
#define KINET_WIRE_H
#include "nic/soft/soft.h"

/* Room for one more outstanding request on this QP? */
bool kinet_wire_can_post(kinet_qp *qp);
/* Hands a parsed request to the wire: 0 (it completes later), or a KN_SYND_*
 * to complete it in error now. */
int kinet_wire_post(kinet_qp *qp, struct soft_req *r);
/* Drives the wire for this QP: completes finished requests in order, times
 * out dead peers. Returns the work done. */
int kinet_wire_progress(kinet_qp *qp);
/* The QP goes away: fail what is outstanding, release the endpoint. */
void kinet_wire_qp_close(kinet_qp *qp);
#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc.h - the dynamically connected transport of the software NIC, for
 * kinet-verbs (DevX DCIs, mlx5dv DCTs): a DCI has no peer; each WQE that
 * reaches a target carries an address vector naming a DCT (its number) and
 * the access key it presents. The NIC finds that DCT among the QPs of the
 * DCI's own context and executes the WQE against it (its PD's keys, its
 * access flags, its SRQ for sends); a DCT elsewhere is not reached (error
 * CQE, transport retry exceeded), a wrong key is an error CQE with
 * KINET_REASON_DC_KEY. docs/verbs.md, "Dynamically connected transport".
 */
#ifndef KINET_SOFT_DC_H
#define KINET_SOFT_DC_H

#include <stdint.h>
#include "core/driver.h"

/* Gives a QP of the software NIC, in RESET and never used, its DC role
 * (KINET_DC_DCI or KINET_DC_DCT) and, for a DCT, its access key. It then
 * moves RESET -> INIT -> RTR (-> RTS for a DCI) without a remote end.
 * 0 or -EINVAL. */
int kinet_qp_set_dc(kinet_qp *qp, int role, uint64_t key);

/* The DCT of ctx numbered dct that a DCI's WQE may reach with key: the QP,
 * or NULL with *why (KINET_REASON_PEER_GONE: no such DCT in ctx, or one
 * being destroyed; KINET_REASON_QP_NOT_READY: not in RTR;
 * KINET_REASON_DC_KEY: another key). The caller is an engine inside its
 * pass: a DCT is destroyed only after every pass of ctx that could have
 * found it has ended. */
kinet_qp *soft_dct_find(kinet_ctx *ctx, uint32_t dct, uint64_t key, uint32_t *why);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/* Placeholder of the wire until the libfabric wire lands: refuses clearly. */
#include "nic/soft/wire.h"

bool kinet_wire_can_post(kinet_qp *qp)
{
	(void)qp;
	return false;
}

int kinet_wire_post(kinet_qp *qp, struct soft_req *r)
{
	(void)qp;
	(void)r;
	return KN_SYND_TRANSPORT_RETRY_EXC_ERR;
}

int kinet_wire_progress(kinet_qp *qp)
{
	(void)qp;
	return 0;
}

void kinet_wire_qp_close(kinet_qp *qp)
{
	(void)qp;
}

int kinet_soft_wire_connect(kinet_qp *qp, const struct kinet_qp_remote *remote)
{
	(void)qp;
	(void)remote;
	KLOG_ERR("connecting to another process needs the wire, which this build lacks");
	return -ENOSYS;
}

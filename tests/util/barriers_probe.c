/* Functions whose generated code tests/util/barriers.sh reads: each is one
 * place where the host build orders its stores or loads for the NIC. */
#include <kinet/device.h>

/* the doorbell: WQEs, record, register (BlueFlame when own is given) */
void probe_ring(const kn_qp *qp, uint64_t p, const void *own)
{
	knx_ring_nic(qp, p, own, 1);
}

/* a receive: its WQE, then the receive doorbell record */
int probe_recv_post(const kn_qp *qp, void *addr, uint32_t len, uint32_t lkey, kn_ticket_t *t)
{
	return kn_recv_post(qp, addr, len, lkey, t);
}

/* a receive completion: the owner byte, then the CQE and the data */
int probe_recv_poll(const kn_qp *qp, kn_ticket_t t, kn_recv_info *info)
{
	return kn_recv_poll(qp, t, 0, info);
}

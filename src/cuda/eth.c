/* SPDX-License-Identifier: BSD-3-Clause */
/* Device descriptors of Ethernet, copy and semaphore queues in GPU memory
 * (kinet_cuda.h): the send queue and the copy queue are QPs placed as
 * kinet_qp_device_cuda places them; a receive queue's descriptor, state and
 * finish marks go to one GPU block. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include "core/driver.h"
#include "gpu/gpu.h"
#include <kinet/kinet_cuda.h>
#include <kinet/device_dma.h>
#include <kinet/device_sem.h>
#include "cuda/cuda_priv.h"

struct placed {
	const void *key;
	void *dmem;
	struct placed *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct placed *g_list;

static int copy_to(void *d, const void *h, size_t n)
{
	cudaStream_t s = NULL;
	cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(s);
	if (s)
		cudaStreamDestroy(s);
	if (e != cudaSuccess) {
		KLOG_ERR("placing a descriptor in GPU memory: %s", cudaGetErrorString(e));
		cudaGetLastError();
		return -EIO;
	}
	return 0;
}

/* GPU memory of len bytes for key (the same block again when placed before). */
static int block_for(const void *key, size_t len, void **out)
{
	pthread_mutex_lock(&g_lock);
	for (struct placed *p = g_list; p; p = p->next)
		if (p->key == key) {
			*out = p->dmem;
			pthread_mutex_unlock(&g_lock);
			return 0;
		}
	struct placed *p = calloc(1, sizeof(*p));
	if (!p || cudaMalloc(&p->dmem, len) != cudaSuccess) {
		cudaGetLastError();
		pthread_mutex_unlock(&g_lock);
		free(p);
		return -ENOMEM;
	}
	p->key = key;
	p->next = g_list;
	g_list = p;
	*out = p->dmem;
	pthread_mutex_unlock(&g_lock);
	return 0;
}

static int block_release(const void *key)
{
	pthread_mutex_lock(&g_lock);
	struct placed **pp = &g_list;
	while (*pp && (*pp)->key != key)
		pp = &(*pp)->next;
	struct placed *p = *pp;
	if (p)
		*pp = p->next;
	pthread_mutex_unlock(&g_lock);
	if (!p)
		return -ENOENT;
	cudaFree(p->dmem);
	cudaGetLastError();
	free(p);
	return 0;
}

static int ready(void)
{
	if (!kinet_cuda_load())
		return -ENODEV;
	if (cudaSetDevice(kinet_cuda_device()) != cudaSuccess) {
		cudaGetLastError();
		return -ENODEV;
	}
	return 0;
}

int kinet_eth_txq_device_cuda(kinet_eth_txq *txq, struct kn_eth_txq **d_txq)
{
	if (!txq || !d_txq)
		return -EINVAL;
	int rc = ready();
	if (rc)
		return rc;
	kinet_qp *q = kinet_eth_txq_qp(txq);
	kn_qp *dq;
	kn_eth_txq *h, d;
	if ((rc = kinet_eth_txq_device(txq, &h)) || (rc = kinet_qp_device_cuda(q, &dq)) ||
	    (rc = kinet_qp_device_cuda_desc(q, &d.q)))
		return rc;
	d.inline_hdr = h->inline_hdr;
	d.max_frame = h->max_frame;
	d.flags = h->flags;
	d.rsvd = 0;
	void *blk;
	if ((rc = block_for(txq, sizeof(d), &blk)) || (rc = copy_to(blk, &d, sizeof(d))))
		return rc;
	*d_txq = blk;
	return 0;
}

int kinet_eth_txq_device_cuda_release(kinet_eth_txq *txq)
{
	if (!txq)
		return -EINVAL;
	int rc = block_release(txq);
	kinet_qp_device_cuda_release(kinet_eth_txq_qp(txq));
	return rc;
}

int kinet_eth_rxq_device_cuda(kinet_eth_rxq *rxq, struct kn_eth_rxq **d_rxq)
{
	if (!rxq || !d_rxq)
		return -EINVAL;
	int rc = ready();
	if (rc)
		return rc;
	kn_eth_rxq *h;
	if ((rc = kinet_eth_rxq_device(rxq, &h)))
		return rc;
	kn_eth_rxq d = *h;
	void *p[4];
	const volatile void *hp[4] = {h->wq, h->dbrec, h->cq, h->cq_dbrec};
	for (int i = 0; i < 4 && !rc; i++)
		rc = kinet_cuda_dev_addr(hp[i], &p[i]);
	if (rc) {
		KLOG_ERR("eth rxq 0x%x: its queues are not mapped into the GPU", h->rqn);
		return rc;
	}
	d.wq = p[0];
	d.dbrec = p[1];
	d.cq = p[2];
	d.cq_dbrec = p[3];
	/* the buffers: GPU memory as they are, host memory through its mapping */
	struct cudaPointerAttributes a;
	if (cudaPointerGetAttributes(&a, h->buf) == cudaSuccess && a.type == cudaMemoryTypeDevice) {
		d.buf = h->buf;
	} else {
		cudaGetLastError();
		void *b;
		if ((rc = kinet_cuda_dev_addr(h->buf, &b))) {
			KLOG_ERR("eth rxq 0x%x: its buffers are neither GPU memory nor mapped into "
				 "the GPU",
				 h->rqn);
			return rc;
		}
		d.buf = b;
	}
	size_t fin = h->mode == KN_ETH_RXQ_STRIDING ? (size_t)h->wqe_cnt * 8 : 0;
	size_t len = sizeof(d) + sizeof(kn_eth_rxq_state) + fin;
	uint8_t *blk;
	if ((rc = block_for(rxq, len, (void **)&blk)))
		return rc;
	d.st = (kn_eth_rxq_state *)(blk + sizeof(d));
	d.fin = fin ? (uint64_t *)(blk + sizeof(d) + sizeof(kn_eth_rxq_state)) : NULL;
	uint8_t *img = malloc(len);
	if (!img)
		return -ENOMEM;
	memcpy(img, &d, sizeof(d));
	memcpy(img + sizeof(d), h->st, sizeof(kn_eth_rxq_state));
	if (fin)
		memcpy(img + sizeof(d) + sizeof(kn_eth_rxq_state), h->fin, fin);
	rc = copy_to(blk, img, len);
	free(img);
	if (rc)
		return rc;
	*d_rxq = (kn_eth_rxq *)blk;
	return 0;
}

int kinet_eth_rxq_device_cuda_release(kinet_eth_rxq *rxq)
{
	return rxq ? block_release(rxq) : -EINVAL;
}

int kinet_dma_device_cuda(kinet_dma *dma, struct kn_dma **d_dma)
{
	if (!dma || !d_dma)
		return -EINVAL;
	kn_qp *dq;
	int rc = kinet_qp_device_cuda(kinet_dma_qp(dma), &dq);
	if (rc)
		return rc;
	*d_dma = (struct kn_dma *)(void *)dq; /* a kn_dma is its QP's kn_qp */
	return 0;
}

int kinet_dma_device_cuda_release(kinet_dma *dma)
{
	return dma ? kinet_qp_device_cuda_release(kinet_dma_qp(dma)) : -EINVAL;
}

int kinet_sem_device_cuda(kinet_sem *sem, struct kn_sem *out)
{
	if (!sem || !out)
		return -EINVAL;
	int rc = ready();
	if (rc)
		return rc;
	kn_sem *h;
	if ((rc = kinet_sem_device(sem, &h)))
		return rc;
	*out = *h;
	void *a, *b;
	if ((rc = kinet_cuda_dev_addr(h->status, &a)) || (rc = kinet_cuda_dev_addr(h->items, &b)))
		return rc;
	out->status = a;
	out->items = b;
	return 0;
}

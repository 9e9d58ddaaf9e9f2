/* SPDX-License-Identifier: BSD-3-Clause */
/* Device descriptors of QPs in GPU memory (kinet_cuda.h). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include "core/driver.h"
#include "gpu/gpu.h"
#include <kinet/kinet_cuda.h>
#include "cuda/cuda_priv.h"

/* One placed QP: a device block [kn_qp | kn_qp_state | slot_ready[cnt]]. */
struct placed {
	kinet_qp *qp;
	void *dblock;
	kn_qp desc; /* device addresses */
	struct placed *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct placed *g_list;

int kinet_cuda_available(void)
{
	return kinet_cuda_load() != NULL;
}

static struct placed *find(kinet_qp *qp)
{
	for (struct placed *p = g_list; p; p = p->next)
		if (p->qp == qp)
			return p;
	return NULL;
}

/* Device address of mapped host memory (NULL stays NULL): registered
 * (kinet_queue_alloc did it when the CUDA module was loaded) and mapped. */
int kinet_cuda_dev_addr(const volatile void *h, void **out)
{
	*out = NULL;
	if (!h)
		return 0;
	struct cudaPointerAttributes a;
	if (cudaPointerGetAttributes(&a, (const void *)(uintptr_t)h) != cudaSuccess ||
	    a.type != cudaMemoryTypeHost || !a.devicePointer) {
		cudaGetLastError();
		return -ENODEV;
	}
	*out = a.devicePointer;
	return 0;
}

int kinet_qp_device_cuda(kinet_qp *qp, kn_qp **d_qp)
{
	if (!qp || !d_qp)
		return -EINVAL;
	if (!kinet_cuda_load())
		return -ENODEV;
	kn_qp *h;
	int rc = kinet_qp_device(qp, &h);
	if (rc)
		return rc;
	if (cudaSetDevice(kinet_cuda_device()) != cudaSuccess) {
		cudaGetLastError();
		return -ENODEV;
	}
	kn_qp d = *h;
	void *p[9];
	const volatile void *hp[9] = {h->sq, h->dbrec, h->db,  h->cpu_pi,	h->cq,
				      h->cq_dbrec, h->rq, h->rcq, h->rcq_dbrec};
	rc = 0;
	for (int i = 0; i < 9 && !rc; i++)
		rc = kinet_cuda_dev_addr(hp[i], &p[i]);
	if (rc) {
		KLOG_ERR("qp 0x%x: queue memory is not mapped into the GPU (was KINET_NO_CUDA set "
			 "when the QP was created?)",
			 kinet_qp_num(qp));
		return rc;
	}
	d.sq = p[0];
	d.dbrec = p[1];
	d.db = p[2];
	d.cpu_pi = p[3];
	d.cq = p[4];
	d.cq_dbrec = p[5];
	d.rq = p[6];
	d.rcq = p[7];
	d.rcq_dbrec = p[8];

	pthread_mutex_lock(&g_lock);
	struct placed *pl = find(qp);
	bool fresh = !pl;
	if (fresh) {
		pl = calloc(1, sizeof(*pl));
		size_t sz = sizeof(kn_qp) + sizeof(kn_qp_state) + (size_t)h->sq_wqe_cnt * 8;
		if (!pl || cudaMalloc(&pl->dblock, sz) != cudaSuccess) {
			cudaGetLastError();
			pthread_mutex_unlock(&g_lock);
			free(pl);
			return -ENOMEM;
		}
		pl->qp = qp;
	}
	uint8_t *blk = pl->dblock;
	d.st = (kn_qp_state *)(blk + sizeof(kn_qp));
	d.slot_ready = (uint64_t *)(blk + sizeof(kn_qp) + sizeof(kn_qp_state));
	pl->desc = d;
	/* a stream of its own: never waits for (or on) the application's work */
	cudaStream_t s = NULL;
	cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(blk, &d, sizeof(d), cudaMemcpyHostToDevice, s);
	if (e == cudaSuccess)
		e = kinet_cuda_launch_state_init(d.st, h->sq_wqe_cnt, s);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(s);
	if (s)
		cudaStreamDestroy(s);
	if (e != cudaSuccess) {
		KLOG_ERR("qp 0x%x: placing the descriptor in GPU memory: %s", kinet_qp_num(qp),
			 cudaGetErrorString(e));
		cudaGetLastError();
		if (fresh) {
			cudaFree(pl->dblock);
			free(pl);
		}
		pthread_mutex_unlock(&g_lock);
		return -EIO;
	}
	if (fresh) {
		pl->next = g_list;
		g_list = pl;
	}
	pthread_mutex_unlock(&g_lock);
	*d_qp = (kn_qp *)blk;
	return 0;
}

int kinet_qp_device_cuda_desc(kinet_qp *qp, kn_qp *out)
{
	if (!qp || !out)
		return -EINVAL;
	pthread_mutex_lock(&g_lock);
	struct placed *pl = find(qp);
	if (pl)
		*out = pl->desc;
	pthread_mutex_unlock(&g_lock);
	return pl ? 0 : -ENOENT;
}

static int state_xfer(kinet_qp *qp, kn_qp_state *host, int to_dev)
{
	if (!qp || !host)
		return -EINVAL;
	pthread_mutex_lock(&g_lock);
	struct placed *pl = find(qp);
	kn_qp_state *dst = pl ? pl->desc.st : NULL;
	pthread_mutex_unlock(&g_lock);
	if (!dst)
		return -ENOENT;
	cudaStream_t s = NULL;
	cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = to_dev ? cudaMemcpyAsync(dst, host, sizeof(*host), cudaMemcpyHostToDevice, s)
			   : cudaMemcpyAsync(host, dst, sizeof(*host), cudaMemcpyDeviceToHost, s);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(s);
	if (s)
		cudaStreamDestroy(s);
	if (e != cudaSuccess) {
		KLOG_ERR("qp 0x%x: device state copy: %s", kinet_qp_num(qp), cudaGetErrorString(e));
		cudaGetLastError();
		return -EIO;
	}
	return 0;
}

int kinet_qp_cuda_state_read(kinet_qp *qp, kn_qp_state *out)
{
	return state_xfer(qp, out, 0);
}

int kinet_qp_cuda_state_write(kinet_qp *qp, const kn_qp_state *in)
{
	kn_qp_state tmp;
	if (!in)
		return -EINVAL;
	tmp = *in;
	return state_xfer(qp, &tmp, 1);
}

int kinet_qp_device_cuda_release(kinet_qp *qp)
{
	pthread_mutex_lock(&g_lock);
	struct placed **pp = &g_list;
	while (*pp && (*pp)->qp != qp)
		pp = &(*pp)->next;
	struct placed *pl = *pp;
	if (pl)
		*pp = pl->next;
	pthread_mutex_unlock(&g_lock);
	if (!pl)
		return -ENOENT;
	cudaFree(pl->dblock);
	cudaGetLastError();
	free(pl);
	return 0;
}

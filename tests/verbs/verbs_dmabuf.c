/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs_dmabuf.c - ibv_reg_dmabuf_mr on kinet-verbs, from a program written
 * against rdma-core's verbs.h alone, linked with the system's libibverbs and
 * run under kinet-run.
 *
 * No argument (test_verbs_dmabuf): what is refused, and how, as rdma-core's
 * kernel refuses it: a descriptor not open (EBADF); a pipe, a regular file,
 * a memfd, an eventfd, none of them a dma-buf (EINVAL, as dma_buf_get
 * answers); offset and iova differing within a page, access flags a dma-buf
 * MR does not take (EINVAL); each with a log line naming the verb, the
 * program's descriptors left open, and registration working afterwards.
 *
 * "udmabuf" (test_verbs_dmabuf.udmabuf): a host dma-buf of a memfd
 * (/dev/udmabuf): a range past its end is EINVAL, the dma-buf itself
 * EOPNOTSUPP with a log line (kinet-verbs registers memory at its address
 * only). Skipped (77) without /dev/udmabuf.
 *
 * "gpu" (test_verbs_dmabuf.gpu): GPU memory (cuMemAlloc, through libcuda.so.1
 * opened at run time) exported as a dma-buf (cuMemGetHandleForAddressRange),
 * registered with iova the CUDA address as perftest and NCCL do, the
 * descriptor closed at once (the MR stays valid); an RC write from a host
 * MR into it and an RC read out of it, random contents checked byte for
 * byte through cuMemcpy; an iova that is not the GPU memory, a range past
 * the dma-buf's end: EINVAL. "gpu-nocuda" (a build without kinet's CUDA
 * module): the same dma-buf is refused with EOPNOTSUPP and a log line.
 * Both skipped (77) without a CUDA driver, a GPU, or dma-buf support.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* memfd_create */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>
#if __has_include(<linux/udmabuf.h>)
#include <linux/udmabuf.h>
#define HAVE_UDMABUF_H 1
#endif

#define VT_WHO "verbs_dmabuf"
#include "verbs_check.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static enum ibv_mtu mtu;
static char logbuf[1 << 16];

static void open_kinet(void)
{
	ctx = vt_open_kinet("kinet", NULL);
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0, "ibv_query_port");
	mtu = pa.active_mtu;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0, "ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
}

/* ibv_reg_dmabuf_mr with stderr captured: NULL and errno want, and a log
 * line naming the verb, or the MR when want is 0. */
static struct ibv_mr *reg(uint64_t offset, size_t len, uint64_t iova, int fd, int access, int want,
			  const char *what)
{
	FILE *t = vt_capture_begin();
	errno = 0;
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, offset, len, iova, fd, access);
	int err = errno;
	vt_capture_end(t, logbuf, sizeof(logbuf));
	if (!want) {
		CHECK(mr, "%s: ibv_reg_dmabuf_mr: %s; the log:\n%s", what, strerror(err), logbuf);
		return mr;
	}
	CHECK(!mr && err == want, "%s: ibv_reg_dmabuf_mr: %s (errno %d), want %s; the log:\n%s",
	      what, mr ? "registered" : strerror(err), err, strerror(want), logbuf);
	CHECK(strstr(logbuf, "ibv_reg_dmabuf_mr"), "%s: no log line naming ibv_reg_dmabuf_mr",
	      what);
	printf("%s: %s: %s, logged: ok\n", who, what, strerror(want));
	return NULL;
}

static void still_open(int fd, const char *what)
{
	CHECK(fcntl(fd, F_GETFD) != -1, "%s: the program's descriptor %d was closed", what, fd);
}

static void refusals(void)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	/* descriptors that are not open: dma_buf_get's EBADF */
	reg(0, 4096, 0, -1, rw, EBADF, "fd -1");
	/* a number far above those in use (a freed low one would be taken by
	 * the capture of stderr) */
	int closed = 900;
	while (fcntl(closed, F_GETFD) != -1)
		closed++;
	reg(0, 4096, 0, closed, rw, EBADF, "a closed descriptor");

	/* open, but not a dma-buf: dma_buf_get's EINVAL */
	int p[2];
	CHECK(pipe(p) == 0, "pipe");
	reg(0, 4096, 0, p[0], rw, EINVAL, "a pipe");
	still_open(p[0], "a pipe");
	FILE *f = tmpfile();
	CHECK(f, "tmpfile");
	CHECK(ftruncate(fileno(f), 1 << 20) == 0, "ftruncate");
	reg(0, 4096, 0, fileno(f), rw, EINVAL, "a regular file of 1 MiB");
	still_open(fileno(f), "a regular file");
	int m = memfd_create("verbs_dmabuf", MFD_CLOEXEC);
	CHECK(m >= 0, "memfd_create: %s", strerror(errno));
	CHECK(ftruncate(m, 1 << 20) == 0, "ftruncate");
	reg(0, 4096, 0, m, rw, EINVAL, "a memfd");
	still_open(m, "a memfd");
	int e = eventfd(0, EFD_CLOEXEC);
	CHECK(e >= 0, "eventfd");
	reg(0, 4096, 0, e, rw, EINVAL, "an eventfd");
	still_open(e, "an eventfd");

	/* arguments the kernel refuses before it looks at the descriptor */
	reg(0, 4096, 1, m, rw, EINVAL, "offset and iova differing within a page");
	reg(4096 + 8, 4096, 8, m, rw, EINVAL, "offset and iova differing within a page (2)");
	reg(0, 4096, 0, m, rw | IBV_ACCESS_MW_BIND, EINVAL, "access IBV_ACCESS_MW_BIND");
	reg(0, 4096, 0, m, rw | IBV_ACCESS_ON_DEMAND, EINVAL, "access IBV_ACCESS_ON_DEMAND");

	/* registration still works, and the descriptors are the program's */
	uint8_t *b = aligned_alloc(4096, 1 << 16);
	CHECK(b, "no memory");
	struct ibv_mr *mr = ibv_reg_mr(pd, b, 1 << 16, rw);
	CHECK(mr, "ibv_reg_mr after the refusals: %s", strerror(errno));
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	free(b);
	CHECK(close(p[0]) == 0 && close(p[1]) == 0 && close(m) == 0 && close(e) == 0,
	      "closing the program's descriptors");
	fclose(f);
}

static void udmabuf_mode(void)
{
#ifdef HAVE_UDMABUF_H
	int dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		printf("%s: udmabuf: /dev/udmabuf: %s: skipped\n", who, strerror(errno));
		exit(77);
	}
	const size_t size = 1 << 20;
	int m = memfd_create("verbs_dmabuf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(m >= 0 && ftruncate(m, (off_t)size) == 0 && fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK) == 0,
	      "a sealed memfd of 1 MiB");
	struct udmabuf_create c = {.memfd = (uint32_t)m, .flags = UDMABUF_FLAGS_CLOEXEC,
				   .offset = 0, .size = size};
	int fd = ioctl(dev, UDMABUF_CREATE, &c);
	CHECK(fd >= 0, "UDMABUF_CREATE: %s", strerror(errno));
	open_kinet();
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	reg(size - 4096, 8192, 0, fd, rw, EINVAL, "udmabuf: a range past the end");
	reg(0, 0, 0, fd, rw, EINVAL, "udmabuf: an empty range");
	reg(UINT64_MAX - 4095, 8192, UINT64_MAX - 4095, fd, rw, EINVAL,
	    "udmabuf: offset + length wrapping");
	reg(0, size, 0, fd, rw, EOPNOTSUPP, "udmabuf: a host dma-buf");
	still_open(fd, "udmabuf");
	close(fd);
	close(m);
	close(dev);
	printf("%s: udmabuf: ok\n", who);
#else
	printf("%s: udmabuf: no <linux/udmabuf.h>: skipped\n", who);
	exit(77);
#endif
}

/* ---- GPU memory ---------------------------------------------------------------------- */

struct side {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint32_t psn;
};

static void make_side(struct side *s)
{
	s->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(s->cq, "ibv_create_cq");
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	s->qp = ibv_create_qp(pd, &ia);
	CHECK(s->qp, "ibv_create_qp: %s", strerror(errno));
	s->psn = (uint32_t)rnd() & 0xffffff;
}

static void connect_to(struct side *s, const struct side *peer)
{
	vt_rc_init_rtr(s->qp, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, mtu,
		       peer->qp->qp_num, peer->psn, &gid, 1, 1);
	vt_rc_rts(s->qp, s->psn);
}

/* One RDMA operation from s, complete within 10 s. */
static void rdma(struct side *s, enum ibv_wr_opcode op, void *local, uint32_t lkey, uint64_t raddr,
		 uint32_t rkey, uint32_t len, const char *what)
{
	struct ibv_sge g = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = 7, .sg_list = &g, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED}, *bad = NULL;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	int rc = ibv_post_send(s->qp, &wr, &bad);
	CHECK(rc == 0, "%s: ibv_post_send: %s", what, strerror(rc));
	struct ibv_wc wc;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(s->cq, 1, &wc);
		CHECK(n >= 0, "%s: ibv_poll_cq", what);
		if (n)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 10, "%s: no completion within 10 s", what);
	}
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, "%s: completion %s (vendor_err 0x%x)",
	      what, ibv_wc_status_str(wc.status), wc.vendor_err);
}

static void gpu_mode(bool have_module)
{
	struct vt_cuda c;
	vt_cuda_open(&c);
	int dev = c.dev, dmabuf_ok = 0;
	/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
	if (!c.handle || c.attr(&dmabuf_ok, 124, dev) || !dmabuf_ok) {
		printf("%s: gpu: the GPU or driver exports no dma-bufs: skipped\n", who);
		exit(77);
	}
	void *cctx = NULL;
	const size_t size = 1 << 21, off = 1 << 16, len = 1 << 19;
	unsigned long long d = 0;
	CHECK(c.retain(&cctx, dev) == 0 && c.set(cctx) == 0 && c.alloc(&d, size) == 0,
	      "cuMemAlloc of 2 MiB");
	int fd = -1;
	/* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
	int r = c.handle(&fd, d, size, 1, 0);
	CHECK(r == 0 && fd >= 0, "cuMemGetHandleForAddressRange: CUresult %d", r);
	open_kinet();
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (!have_module) {
		reg(off, len, d + off, fd, rw, EOPNOTSUPP, "gpu: no CUDA module");
		CHECK(strstr(logbuf, "CUDA module"), "no log line about the CUDA module:\n%s",
		      logbuf);
		close(fd);
		c.release(d);
		printf("%s: gpu-nocuda: a GPU dma-buf without kinet's CUDA module: ok\n", who);
		return;
	}
	uint8_t *host = aligned_alloc(4096, len), *back = aligned_alloc(4096, len);
	CHECK(host && back, "no memory");
	reg(off, len, off, fd, rw, EINVAL, "gpu: iova not the GPU memory (the offset)");
	reg(off, len, (uintptr_t)host, fd, rw, EINVAL, "gpu: iova of host memory");
	reg(size - 4096, 8192, d + size - 4096, fd, rw, EINVAL, "gpu: a range past the end");
	struct ibv_mr *g = reg(off, len, d + off, fd, rw, 0, "gpu");
	close(fd); /* the program's: the MR stays valid without it */
	CHECK((uintptr_t)g->addr == off && g->length == len,
	      "the MR's addr %p length %zu: rdma-core reports the offset and the length", g->addr,
	      g->length);
	struct ibv_mr *h = ibv_reg_mr(pd, host, len, rw);
	CHECK(h, "ibv_reg_mr of host memory: %s", strerror(errno));

	struct side a, b;
	make_side(&a);
	make_side(&b);
	connect_to(&a, &b);
	connect_to(&b, &a);

	/* host -> GPU: an RC write into the dma-buf MR at its iova */
	fill(back, len); /* the GPU memory holds other contents first */
	CHECK(c.htod(d + off, back, len) == 0, "cuMemcpyHtoD");
	fill(host, len);
	rdma(&a, IBV_WR_RDMA_WRITE, host, h->lkey, d + off, g->rkey, (uint32_t)len,
	     "write into the GPU dma-buf");
	CHECK(c.dtoh(back, d + off, len) == 0, "cuMemcpyDtoH");
	for (size_t i = 0; i < len; i++)
		CHECK(back[i] == host[i], "write into GPU memory: byte %zu is 0x%02x, want 0x%02x",
		      i, back[i], host[i]);
	printf("%s: gpu: RC write of %zu bytes into a GPU dma-buf MR: ok\n", who, len);

	/* GPU -> host: an RC read out of it */
	fill(back, len);
	CHECK(c.htod(d + off, back, len) == 0, "cuMemcpyHtoD");
	memset(host, 0, len);
	rdma(&a, IBV_WR_RDMA_READ, host, h->lkey, d + off, g->rkey, (uint32_t)len,
	     "read from the GPU dma-buf");
	for (size_t i = 0; i < len; i++)
		CHECK(host[i] == back[i], "read from GPU memory: byte %zu is 0x%02x, want 0x%02x",
		      i, host[i], back[i]);
	printf("%s: gpu: RC read of %zu bytes from a GPU dma-buf MR: ok\n", who, len);

	CHECK(ibv_destroy_qp(a.qp) == 0 && ibv_destroy_qp(b.qp) == 0, "ibv_destroy_qp");
	CHECK(ibv_destroy_cq(a.cq) == 0 && ibv_destroy_cq(b.cq) == 0, "ibv_destroy_cq");
	CHECK(ibv_dereg_mr(g) == 0 && ibv_dereg_mr(h) == 0, "ibv_dereg_mr");
	c.release(d);
	free(host);
	free(back);
	printf("%s: gpu: ok\n", who);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	vt_seed(NULL);
	if (argc > 1 && !strcmp(argv[1], "udmabuf"))
		udmabuf_mode();
	else if (argc > 1 && !strncmp(argv[1], "gpu", 3))
		gpu_mode(strcmp(argv[1], "gpu-nocuda") != 0);
	else {
		open_kinet();
		refusals();
		printf("%s: ok\n", who);
	}
	CHECK(!pd || ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(!ctx || ibv_close_device(ctx) == 0, "ibv_close_device");
	return 0;
}

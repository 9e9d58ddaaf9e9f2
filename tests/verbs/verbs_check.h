/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs_check.h - what the verbs test programs share: a failure that says
 * which program failed and exits 1 (on the saved stderr while a test
 * captures it), CHECK, random contents from a seeded xorshift, the
 * opening of a kinet device, stderr captured in a file (what a call
 * logged), and the CUDA driver's calls of the GPU cases, loaded at run
 * time. Define VT_WHO (the program's name) before including it.
 */
#ifndef KINET_TESTS_VERBS_CHECK_H
#define KINET_TESTS_VERBS_CHECK_H

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static const char *who __attribute__((unused)) = VT_WHO;
static int saved_stderr __attribute__((unused)) = -1; /* stderr, while a test captures it */

static void fail(const char *fmt, ...)
{
	if (saved_stderr >= 0) /* say it where it is seen */
		dup2(saved_stderr, 2);
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: FAIL: ", who);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}
#define CHECK(c, ...)                                                                          \
	do {                                                                                   \
		if (!(c))                                                                      \
			fail(__VA_ARGS__);                                                     \
	} while (0)

static uint64_t rng; /* seeded by the program */
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}
static inline void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* Seeds rnd from the environment variable env when it is set, else from
 * the time and the process, and says the seed (a failure is rerun with it). */
static inline void vt_seed(const char *env)
{
	const char *v = env ? getenv(env) : NULL;
	rng = v ? strtoull(v, NULL, 0)
		: (uint64_t)time(NULL) * 6364136223846793005ull ^ (uint64_t)getpid();
	if (!rng)
		rng = 1;
	printf("%s: seed 0x%" PRIx64 "\n", who, rng);
}

/* Opens the last listed device whose name starts with prefix ("kinet":
 * any kinet device) with opener (NULL: ibv_open_device); fails the program
 * when there is none (not run under kinet-run) or it does not open. */
static inline struct ibv_context *vt_open_kinet(const char *prefix,
						struct ibv_context *(*opener)(struct ibv_device *))
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	CHECK(l && n > 0, "no RDMA device (run under kinet-run)");
	struct ibv_device *dev = NULL;
	for (int i = 0; i < n; i++)
		if (!strncmp(ibv_get_device_name(l[i]), prefix, strlen(prefix)))
			dev = l[i];
	CHECK(dev, "no device %s* (run under kinet-run)", prefix);
	struct ibv_context *ctx = opener ? opener(dev) : ibv_open_device(dev);
	CHECK(ctx, "opening %s: %s", ibv_get_device_name(dev), strerror(errno));
	ibv_free_device_list(l);
	return ctx;
}

/* stderr into a file until vt_capture_end, which reads what was written
 * into buf (n bytes, terminated) */
static inline FILE *vt_capture_begin(void)
{
	fflush(stderr);
	FILE *t = tmpfile();
	CHECK(t, "tmpfile");
	saved_stderr = dup(2);
	dup2(fileno(t), 2);
	return t;
}

static inline const char *vt_capture_end(FILE *t, char *buf, size_t n)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
	rewind(t);
	size_t got = fread(buf, 1, n - 1, t);
	buf[got] = 0;
	fclose(t);
	return buf;
}

/* An RC QP to INIT (port 1, these remote-access flags), then RTR toward a
 * peer: its QP number, PSN and GID, through source GID index sgid_index. */
static inline void vt_rc_init_rtr(struct ibv_qp *qp, unsigned access, enum ibv_mtu mtu,
				  uint32_t dest_qpn, uint32_t rq_psn, const union ibv_gid *dgid,
				  int sgid_index, uint8_t hop_limit)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = access,
	};
	CHECK(ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ==
		      0,
	      "modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = (uint8_t)sgid_index;
	a.ah_attr.grh.hop_limit = hop_limit;
	a.ah_attr.port_num = 1;
	CHECK(ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER) == 0,
	      "modify to RTR toward QP 0x%x", dest_qpn);
}

/* An RC QP from RTR to RTS, sending from PSN psn. */
static inline void vt_rc_rts(struct ibv_qp *qp, uint32_t psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = psn,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 16,
	};
	CHECK(ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0,
	      "modify to RTS");
}

/* The CUDA driver's calls the GPU cases use (libcuda.so.1, loaded at run
 * time: the programs build without CUDA), and GPU 0. */
struct vt_cuda {
	int (*init)(unsigned);
	int (*dev_get)(int *, int);
	int (*attr)(int *, int, int);
	int (*retain)(void **, int);
	int (*set)(void *);
	int (*alloc)(unsigned long long *, size_t);
	int (*release)(unsigned long long);
	int (*htod)(unsigned long long, const void *, size_t);
	int (*dtoh)(void *, unsigned long long, size_t);
	int (*handle)(void *, unsigned long long, size_t, int, unsigned long long); /* may be NULL */
	int dev;
};

/* Loads them and finds GPU 0, or says why not and exits 77 (skipped): no
 * driver, or no GPU. */
static inline void vt_cuda_open(struct vt_cuda *c)
{
	memset(c, 0, sizeof(*c));
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!cu) {
		printf("%s: gpu: no CUDA driver: skipped\n", who);
		exit(77);
	}
	*(void **)&c->init = dlsym(cu, "cuInit");
	*(void **)&c->dev_get = dlsym(cu, "cuDeviceGet");
	*(void **)&c->attr = dlsym(cu, "cuDeviceGetAttribute");
	*(void **)&c->retain = dlsym(cu, "cuDevicePrimaryCtxRetain");
	*(void **)&c->set = dlsym(cu, "cuCtxSetCurrent");
	*(void **)&c->alloc = dlsym(cu, "cuMemAlloc_v2");
	*(void **)&c->release = dlsym(cu, "cuMemFree_v2");
	*(void **)&c->htod = dlsym(cu, "cuMemcpyHtoD_v2");
	*(void **)&c->dtoh = dlsym(cu, "cuMemcpyDtoH_v2");
	*(void **)&c->handle = dlsym(cu, "cuMemGetHandleForAddressRange");
	if (!c->init || !c->dev_get || !c->attr || !c->retain || !c->set || !c->alloc ||
	    !c->release || !c->htod || !c->dtoh || c->init(0) || c->dev_get(&c->dev, 0)) {
		printf("%s: gpu: no GPU: skipped\n", who);
		exit(77);
	}
}

#endif

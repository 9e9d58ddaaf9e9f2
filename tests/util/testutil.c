/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sched.h>
#include <string.h>
#include <criterion/criterion.h>
#include <sys/mman.h>
#include <unistd.h>
#include "testutil.h"

uint64_t tu_rand64(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

void tu_fill_random(void *buf, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	uint8_t *b = buf;
	for (size_t i = 0; i < n; i++) {
		if ((i & 7) == 0)
			tu_rand64(&s);
		b[i] = (uint8_t)(s >> ((i & 7) * 8));
	}
}

int tu_engine_threads;

int tu_guarded_alloc(struct tu_guarded *g, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t body = (len + pg - 1) / pg * pg;
	g->maplen = body + 2 * pg;
	g->map = mmap(NULL, g->maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g->map == MAP_FAILED)
		return -1;
	if (mprotect((uint8_t *)g->map + pg, body, PROT_READ | PROT_WRITE))
		return -1;
	/* the region ends exactly at the upper guard page */
	g->ptr = (uint8_t *)g->map + pg + (body - len);
	g->len = len;
	return 0;
}

void tu_guarded_free(struct tu_guarded *g)
{
	if (g->map)
		munmap(g->map, g->maplen);
	g->map = NULL;
}

int tu_pair_open(struct tu_pair *p, const struct kinet_qp_attr *attr)
{
	memset(p, 0, sizeof(*p));
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT, .engine_threads = tu_engine_threads};
	int rc = kinet_open(&ca, &p->ctx);
	if (rc)
		return rc;
	if ((rc = kinet_pd_alloc(p->ctx, &p->pd)))
		return rc;
	if ((rc = kinet_qp_create(p->pd, attr, &p->a)))
		return rc;
	if ((rc = kinet_qp_create(p->pd, attr, &p->b)))
		return rc;
	if ((rc = kinet_qp_connect_local(p->a, p->b)))
		return rc;
	if ((rc = kinet_qp_device(p->a, &p->da)))
		return rc;
	return kinet_qp_device(p->b, &p->db);
}

void tu_pair_close(struct tu_pair *p)
{
	if (p->a)
		kinet_qp_destroy(p->a);
	if (p->b)
		kinet_qp_destroy(p->b);
	if (p->pd)
		kinet_pd_free(p->pd);
	if (p->ctx)
		kinet_close(p->ctx);
	memset(p, 0, sizeof(*p));
}

/* ---- regions with canaries ------------------------------------------------ */

static void canary_bytes(uint8_t *out, uint64_t seed, int side)
{
	tu_fill_random(out, TU_CANARY, seed * 2 + (uint64_t)side + 0x5eed);
}

int tu_region_alloc(struct tu_region *r, kinet_pd *pd, size_t len, unsigned access,
		    uint64_t seed)
{
	memset(r, 0, sizeof(*r));
	if (tu_guarded_alloc(&r->g, len + 2 * TU_CANARY))
		return -1;
	r->buf = r->g.ptr + TU_CANARY;
	r->len = len;
	r->seed = seed;
	canary_bytes(r->buf - TU_CANARY, seed, 0);
	canary_bytes(r->buf + len, seed, 1);
	tu_fill_random(r->buf, len, seed);
	if (pd) {
		int rc = kinet_mr_reg(pd, r->buf, len, access, &r->mr);
		if (rc) {
			tu_guarded_free(&r->g);
			return rc;
		}
	}
	return 0;
}

int tu_region_canaries_ok(const struct tu_region *r)
{
	uint8_t c[TU_CANARY];
	canary_bytes(c, r->seed, 0);
	if (memcmp(c, r->buf - TU_CANARY, TU_CANARY))
		return 0;
	canary_bytes(c, r->seed, 1);
	return memcmp(c, r->buf + r->len, TU_CANARY) == 0;
}

void tu_region_free(struct tu_region *r)
{
	if (r->mr)
		kinet_mr_dereg(r->mr);
	tu_guarded_free(&r->g);
	memset(r, 0, sizeof(*r));
}

/* ---- raw posting ------------------------------------------------------------ */

int tu_rawpair_open(struct tu_rawpair *p, uint32_t sq_depth, uint32_t rq_depth)
{
	memset(p, 0, sizeof(*p));
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT, .engine_threads = tu_engine_threads};
	int rc = kinet_open(&ca, &p->ctx);
	if (rc)
		return rc;
	if ((rc = kinet_pd_alloc(p->ctx, &p->pd)))
		return rc;
	/* the GPU engine serves only QPs whose send CQ is their own */
	p->own_acq = tu_geng_on();
	if (!p->own_acq && (rc = kinet_cq_create(p->ctx, sq_depth, &p->acq)))
		return rc;
	struct kinet_qp_attr aa = {.sq_depth = sq_depth, .send_cq = p->acq};
	struct kinet_qp_attr ba = {.sq_depth = sq_depth, .rq_depth = rq_depth};
	if ((rc = kinet_qp_create(p->pd, &aa, &p->a)))
		return rc;
	if (p->own_acq)
		p->acq = kinet_qp_send_cq(p->a);
	if ((rc = kinet_qp_create(p->pd, &ba, &p->b)))
		return rc;
	if ((rc = kinet_qp_connect_local(p->a, p->b)))
		return rc;
	return kinet_qp_device(p->b, &p->db);
}

int tu_rawpair_reconnect(struct tu_rawpair *p)
{
	int rc;
	if ((rc = kinet_qp_modify(p->a, KINET_QPS_RESET, NULL)) ||
	    (rc = kinet_qp_modify(p->b, KINET_QPS_RESET, NULL)))
		return rc;
	p->pi = 0;
	return kinet_qp_connect_local(p->a, p->b);
}

void tu_rawpair_close(struct tu_rawpair *p)
{
	if (p->a)
		kinet_qp_destroy(p->a);
	if (p->b)
		kinet_qp_destroy(p->b);
	if (p->acq && !p->own_acq)
		kinet_cq_destroy(p->acq);
	if (p->pd)
		kinet_pd_free(p->pd);
	if (p->ctx)
		kinet_close(p->ctx);
	memset(p, 0, sizeof(*p));
}

int tu_geng_on(void)
{
	const char *e = getenv("KINET_GPU_ENGINE");
	return e && (!strcmp(e, "on") || !strcmp(e, "host"));
}

uint64_t tu_engine_settle(kinet_qp *qp, int timeout_ms)
{
	if (!tu_geng_on())
		return 0;
	for (int waited = 0; waited <= timeout_ms; waited++) {
		struct kinet_ep_info e;
		if (kinet_qp_ep_info(qp, &e))
			return UINT64_MAX;
		if (e.engine != KINET_ENGINE_GPU && e.engine != KINET_ENGINE_GPU_HOST)
			return e.gpu_wqes; /* the CPU engine, or a NIC (no GPU engine there) */
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return UINT64_MAX;
}

uint64_t tu_post(struct tu_rawpair *p, const void *wqe, uint32_t nbb)
{
	long long t = kinet_qp_post_raw(p->a, wqe, nbb);
	cr_assert_geq(t, 0, "kinet_qp_post_raw: %s", kinet_strerror((int)t));
	cr_assert_eq((uint64_t)t, p->pi, "post_raw ticket %lld, expected %llu", t,
		     (unsigned long long)p->pi);
	p->pi = (uint64_t)t + nbb;
	return (uint64_t)t;
}

int tu_poll(kinet_cq *cq, struct kn_cqe64 *out, int timeout_ms)
{
	uint64_t t0 = kn_now_ns();
	unsigned spins = 0;
	for (;;) {
		int rc = kinet_cq_poll(cq, out);
		if (rc != -EBUSY)
			return rc;
		if ((++spins & 63) == 0 && kn_now_ns() - t0 > (uint64_t)timeout_ms * 1000000ull)
			return -ETIMEDOUT;
		sched_yield();
	}
}

char tu_fail_msg[512];
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

void tu_fail(int line, const char *fmt, ...)
{
	pthread_mutex_lock(&fail_lock);
	if (!tu_fail_msg[0]) {
		int n = snprintf(tu_fail_msg, sizeof(tu_fail_msg), "line %d: ", line);
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(tu_fail_msg + n, sizeof(tu_fail_msg) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&fail_lock);
}

int tu_check_rings(const kn_qp *qp, uint8_t *src, uint32_t lkey, uint8_t *dst, uint32_t rkey,
		   uint64_t *sig, uint32_t sig_rkey, int n)
{
	int bf = qp->db_mode == KN_DB_BLUEFLAME;
	for (int i = 0; i < n; i++) {
		uint32_t off = qp->st->bf_off;
		TU_CHECK(off == (i % 2 ? qp->bf_alt : 0) || qp->bf_alt == 0,
			 "ring %d: register offset %u, the rings do not alternate", i, off);
		volatile uint64_t *reg = (volatile uint64_t *)(qp->db + off);
		for (int k = 0; k < 8; k++)
			reg[k] = 0x5a5a5a5a5a5a5a5aull; /* what a ring leaves alone stays so */
		tu_fill_random(src + i * 64, 64, 900 + (uint64_t)i);
		kn_ticket_t t;
		TU_CHECK(kn_put(qp, tu_addr(dst + i * 64), rkey, src + i * 64, lkey, 64, &t) == 0,
			 "put %d", i);
		TU_CHECK(kn_wait(qp, t) == 0, "put %d: error 0x%x", i, kn_qp_error(qp, NULL));
		TU_CHECK(memcmp(src + i * 64, dst + i * 64, 64) == 0, "put %d: bytes differ", i);
		uint64_t q[8], w[8];
		for (int k = 0; k < 8; k++)
			q[k] = reg[k];
		memcpy(w, kn_wqe_ptr(qp, t), 64);
		TU_CHECK(q[0] == w[0], "ring %d: the register's word is not the WQE's ctrl", i);
		for (int k = 1; k < 8; k++)
			TU_CHECK(bf ? q[k] == w[k] : q[k] == 0x5a5a5a5a5a5a5a5aull,
				 "ring %d: register word %d %s", i, k,
				 bf ? "differs from the WQE" : "written without BlueFlame");
		TU_CHECK(qp->st->bf_off == (off ^ qp->bf_alt), "ring %d: no toggle", i);
	}
	/* two WQEs in one post: the second's ctrl word, no body */
	uint32_t off = qp->st->bf_off;
	volatile uint64_t *reg = (volatile uint64_t *)(qp->db + off);
	for (int k = 0; k < 8; k++)
		reg[k] = 0x5a5a5a5a5a5a5a5aull;
	kn_ticket_t t;
	TU_CHECK(kn_put_signal(qp, tu_addr(dst), rkey, src, lkey, 64, tu_addr(sig), sig_rkey, 1,
			       &t) == 0,
		 "put_signal");
	TU_CHECK(kn_wait(qp, t) == 0, "put_signal: error 0x%x", kn_qp_error(qp, NULL));
	uint64_t last;
	memcpy(&last, kn_wqe_ptr(qp, t), 8);
	TU_CHECK(reg[0] == last, "put_signal: the word is not the last WQE's ctrl");
	for (int k = 1; k < 8; k++)
		TU_CHECK(reg[k] == 0x5a5a5a5a5a5a5a5aull,
			 "put_signal: register word %d written (BlueFlame for two WQEs)", k);
	return 0;
}

int tu_sh(const char *fmt, ...)
{
	char cmd[512], full[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "%s >/dev/null 2>&1", cmd);
	int rc = system(full);
	if (rc != 0)
		fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
	return rc;
}

unsigned tu_load_scale(void)
{
	double load = 0;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &load) != 1)
			load = 0;
		fclose(f);
	}
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 1)
		cpus = 1;
	double per = load / (double)cpus;
	if (per <= 1.0)
		return 1;
	unsigned k = (unsigned)per;
	if ((double)k < per)
		k++; /* rounded up */
	return k < 4u ? k : 4u;
}

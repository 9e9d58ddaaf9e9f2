/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats.c - the statistics segment (KINET_STATS=1; layout: stats_fmt.h):
 * /dev/shm/kinet-PID, rewritten by a thread of its own every
 * KINET_STATS_INTERVAL_MS from the counters (kinet_ctx_counters,
 * kinet_qp_counters, kinet_mr_cache_stats), so the data path is not touched:
 * engines keep counting in their own blocks, without locks. Removed when the
 * last context closes, or at exit.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "core/internal.h"
#include "core/stats_fmt.h"

/* The counters published, by kind: names, and where each value comes from. */
#define CF(f) {#f, offsetof(struct kinet_counters, f)}
static const struct fld {
	const char *name;
	size_t off;
} ctx_f[] = {CF(wqes),         CF(bytes),        CF(cqes),        CF(errors),
	     CF(flushed),      CF(doorbells),    CF(dbr_only),    CF(bf_wqes),
	     CF(staged_bytes), CF(direct_bytes), CF(rnr_retries), CF(proxy_rings),
	     CF(db_wqe_words), CF(db_pi_words),  CF(db_foreign),  CF(bf_mismatch)};
#undef CF
#define QF(f) {#f, offsetof(struct kinet_qp_counters, f)}
static const struct fld qp_f[] = {
	QF(posted),       QF(completed),     QF(outstanding),    QF(cqes),
	QF(bytes),        QF(direct_bytes),  QF(staged_bytes),   QF(errors),
	QF(flushed),      QF(rnr_retries),   QF(retry_exceeded), QF(doorbells),
	QF(db_wqe_words), QF(db_pi_words),   QF(db_foreign),     QF(dbr_only),
	QF(bf_wqes),      QF(bf_mismatch),   QF(db_not_ready),   QF(recv_completed),
	QF(recv_bytes),   QF(faults),        QF(host_cqes)};
#undef QF
#define SF(f) {#f, offsetof(struct kinet_mr_cache_stats, f)}
static const struct fld cache_f[] = {SF(hits),     SF(misses),  SF(evictions), SF(invalidations),
				     SF(uncached), SF(refused), SF(entries),   SF(bytes),
				     SF(held)};
#undef SF
#define NF(a) (sizeof(a) / sizeof(a[0]))
/* syndromes published by name, after the fixed fields of ctx and QP records */
static const uint8_t synd_list[] = {
	KN_SYND_LOCAL_LENGTH_ERR,     KN_SYND_LOCAL_QP_OP_ERR,   KN_SYND_LOCAL_PROT_ERR,
	KN_SYND_WR_FLUSH_ERR,         KN_SYND_BAD_RESP_ERR,      KN_SYND_LOCAL_ACCESS_ERR,
	KN_SYND_REMOTE_INVAL_REQ_ERR, KN_SYND_REMOTE_ACCESS_ERR, KN_SYND_REMOTE_OP_ERR,
	KN_SYND_TRANSPORT_RETRY_EXC_ERR, KN_SYND_RNR_RETRY_EXC_ERR,
};
#define NSYND NF(synd_list)
#define NCTX (NF(ctx_f) + NSYND)
#define NQP (NF(qp_f) + NSYND)
#define NCACHE NF(cache_f)
#define NVAL_MAX NQP

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER; /* the context list */
static kinet_ctx **s_ctx;
static int s_nctx, s_cap;
static bool s_started, s_stop;
static pthread_t s_th;
static uint8_t *s_seg;
static size_t s_size;
static char s_path[64];

static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t *rec_at(struct kinet_stats_hdr *h, uint32_t i, struct kinet_stats_rec **r)
{
	*r = (struct kinet_stats_rec *)(s_seg + h->rec_off + (size_t)i * h->rec_size);
	return (uint64_t *)(*r + 1);
}

static void synd_vals(uint64_t *v, const uint64_t *by)
{
	for (size_t k = 0; k < NSYND; k++)
		v[k] = by[synd_list[k] & 63];
}

/* One snapshot (s_lock held). */
static void publish(void)
{
	struct kinet_stats_hdr *h = (struct kinet_stats_hdr *)s_seg;
	__atomic_store_n(&h->seq, h->seq + 1, __ATOMIC_RELAXED); /* odd: writing */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	uint32_t n = 0, dropped = 0;
	for (int c = 0; c < s_nctx; c++) {
		kinet_ctx *ctx = s_ctx[c];
		struct kinet_stats_rec *r;
		if (n == h->nrec_max)
			break;
		uint64_t *v = rec_at(h, n++, &r);
		memset(r, 0, h->rec_size);
		r->kind = KINET_STATS_CTX;
		r->ctx = ctx->id;
		r->state = ctx->backend;
		snprintf(r->label, sizeof(r->label), "%s", ctx->ops->name);
		struct kinet_counters k;
		kinet_ctx_counters(ctx, &k);
		for (size_t i = 0; i < NF(ctx_f); i++)
			memcpy(&v[i], (const uint8_t *)&k + ctx_f[i].off, 8);
		synd_vals(v + NF(ctx_f), k.by_syndrome);
		pthread_mutex_lock(&ctx->qp_lock);
		for (kinet_qp *qp = ctx->qp_head; qp; qp = qp->ctx_next) {
			if (n == h->nrec_max) {
				dropped++;
				continue;
			}
			v = rec_at(h, n++, &r);
			memset(r, 0, h->rec_size);
			struct kinet_qp_counters q;
			struct kinet_ep_info e;
			kinet_qp_counters(qp, &q);
			kinet_qp_ep_info(qp, &e);
			r->kind = KINET_STATS_QP;
			r->ctx = ctx->id;
			r->id = qp->qpn;
			r->state = q.state;
			snprintf(r->label, sizeof(r->label), "%s", kinet_ep_state_str(e.state));
			for (size_t i = 0; i < NF(qp_f); i++)
				memcpy(&v[i], (const uint8_t *)&q + qp_f[i].off, 8);
			synd_vals(v + NF(qp_f), q.by_syndrome);
		}
		uint32_t ci = 0;
		for (kinet_mr_cache *mc = ctx->cache_head; mc; mc = kinet_mr_cache_next(mc)) {
			if (n == h->nrec_max)
				break;
			v = rec_at(h, n++, &r);
			memset(r, 0, h->rec_size);
			struct kinet_mr_cache_stats st;
			kinet_mr_cache_stats(mc, &st);
			r->kind = KINET_STATS_CACHE;
			r->ctx = ctx->id;
			r->id = ci++;
			r->state = st.monitor;
			snprintf(r->label, sizeof(r->label), "%s", st.monitor ? "userfaultfd" : "none");
			for (size_t i = 0; i < NF(cache_f); i++)
				memcpy(&v[i], (const uint8_t *)&st + cache_f[i].off, 8);
		}
		pthread_mutex_unlock(&ctx->qp_lock);
	}
	h->nrec = n;
	h->dropped = dropped;
	h->updated_ns = real_ns();
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&h->seq, h->seq + 1, __ATOMIC_RELAXED); /* even: complete */
}

static void *stats_main(void *arg)
{
	(void)arg;
	uint64_t ns = (uint64_t)KT(STATS_INTERVAL_MS) * 1000000ull;
	pthread_mutex_lock(&s_lock);
	while (!s_stop) {
		if (s_seg)
			publish();
		pthread_mutex_unlock(&s_lock);
		kinet_sleep_ns(ns);
		pthread_mutex_lock(&s_lock);
	}
	pthread_mutex_unlock(&s_lock);
	return NULL;
}

static void stats_exit(void)
{
	pthread_mutex_lock(&s_lock);
	s_stop = true;
	pthread_mutex_unlock(&s_lock);
	if (s_started)
		pthread_join(s_th, NULL);
	if (s_seg)
		unlink(s_path);
}

/* Creates the segment (s_lock held): 0 or -errno. */
static int seg_create(void)
{
	uint32_t nrec = (uint32_t)KT(STATS_MAX_QPS) + 64; /* the QPs, contexts and caches */
	size_t names = (size_t)(NCTX + NQP + NCACHE) * KINET_STATS_NAME;
	size_t rec_size = sizeof(struct kinet_stats_rec) + NVAL_MAX * 8;
	size_t size = sizeof(struct kinet_stats_hdr) + names + (size_t)nrec * rec_size;
	snprintf(s_path, sizeof(s_path), KINET_STATS_PATH, (int)getpid());
	int fd = open(s_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size)) {
		int e = errno;
		close(fd);
		unlink(s_path);
		return -e;
	}
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		unlink(s_path);
		return -ENOMEM;
	}
	s_seg = p;
	s_size = size;
	struct kinet_stats_hdr *h = p;
	memcpy(h->magic, KINET_STATS_MAGIC, sizeof(KINET_STATS_MAGIC));
	h->version = KINET_STATS_VERSION;
	h->hdr_size = sizeof(*h);
	h->size = size;
	h->pid = (int32_t)getpid();
	h->interval_ms = (uint32_t)KT(STATS_INTERVAL_MS);
	h->nctx_fields = NCTX;
	h->nqp_fields = NQP;
	h->ncache_fields = NCACHE;
	h->nnames = NCTX + NQP + NCACHE;
	h->names_off = sizeof(*h);
	h->rec_off = (uint32_t)(sizeof(*h) + names);
	h->rec_size = (uint32_t)rec_size;
	h->nrec_max = nrec;
	char *nm = (char *)p + h->names_off;
	uint32_t k = 0;
	for (size_t i = 0; i < NF(ctx_f); i++)
		snprintf(nm + (size_t)k++ * KINET_STATS_NAME, KINET_STATS_NAME, "%s", ctx_f[i].name);
	for (size_t i = 0; i < NSYND; i++)
		snprintf(nm + (size_t)k++ * KINET_STATS_NAME, KINET_STATS_NAME, "synd_0x%02x",
			 synd_list[i]);
	for (size_t i = 0; i < NF(qp_f); i++)
		snprintf(nm + (size_t)k++ * KINET_STATS_NAME, KINET_STATS_NAME, "%s", qp_f[i].name);
	for (size_t i = 0; i < NSYND; i++)
		snprintf(nm + (size_t)k++ * KINET_STATS_NAME, KINET_STATS_NAME, "synd_0x%02x",
			 synd_list[i]);
	for (size_t i = 0; i < NCACHE; i++)
		snprintf(nm + (size_t)k++ * KINET_STATS_NAME, KINET_STATS_NAME, "%s", cache_f[i].name);
	return 0;
}

void kinet_stats_ctx_add(kinet_ctx *ctx)
{
	if (!KT(STATS))
		return;
	pthread_mutex_lock(&s_lock);
	if (!s_seg) {
		int rc = seg_create();
		if (rc) {
			KLOG_ERR("KINET_STATS: cannot create %s: %s", s_path, kinet_strerror(rc));
			pthread_mutex_unlock(&s_lock);
			return;
		}
		static bool at;
		if (!at)
			atexit(stats_exit);
		at = true;
		KLOG_INFO("KINET_STATS: counters published in %s (kinet-stat %d)", s_path,
			  (int)getpid());
	}
	if (s_nctx == s_cap) {
		int nc = s_cap ? 2 * s_cap : 8;
		kinet_ctx **t = realloc(s_ctx, (size_t)nc * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&s_lock);
			return;
		}
		s_ctx = t;
		s_cap = nc;
	}
	s_ctx[s_nctx++] = ctx;
	if (!s_started && pthread_create(&s_th, NULL, stats_main, NULL) == 0) {
		s_started = true;
		kinet_thread_name(s_th, "kn-stats");
	}
	pthread_mutex_unlock(&s_lock);
}

void kinet_stats_ctx_remove(kinet_ctx *ctx)
{
	pthread_mutex_lock(&s_lock);
	for (int i = 0; i < s_nctx; i++)
		if (s_ctx[i] == ctx) {
			s_ctx[i] = s_ctx[--s_nctx];
			if (s_seg && s_nctx)
				publish(); /* what is left, without it */
			if (s_seg && !s_nctx) {
				/* the last context: nothing left to show */
				unlink(s_path);
				munmap(s_seg, s_size);
				s_seg = NULL;
			}
			break;
		}
	pthread_mutex_unlock(&s_lock);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trace.c - the binary WQE trace (KINET_TRACE=FILE). Each thread that
 * traces appends to a buffer of its own (a lock per buffer, uncontended
 * except when the buffers are written out); a full buffer is written to
 * the file with one write() under the file's lock. Buffers are written out
 * at kinet_close, when a thread's buffer fills, and at exit.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/internal.h"
#include "core/trace.h"

bool kinet_trace_on __attribute__((visibility("hidden")));
__thread uint8_t kinet_trace_engine
	__attribute__((tls_model("initial-exec"), visibility("hidden"))) = 0xff;
__thread uint32_t kinet_trace_pass __attribute__((tls_model("initial-exec"), visibility("hidden")));

#define TBUF_RECS 2048

struct tbuf {
	pthread_mutex_t lock;
	uint32_t n;
	struct tbuf *next;
	struct kinet_trace_rec rec[TBUF_RECS];
};

static pthread_once_t t_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t t_lock = PTHREAD_MUTEX_INITIALIZER; /* file and buffer list */
static int t_fd = -1;
static int t_rc;
static uint64_t t_start;
static struct tbuf *t_bufs;
static __thread struct tbuf *t_self;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Buffer b out to the file (b->lock held). */
static void write_out(struct tbuf *b)
{
	if (!b->n)
		return;
	pthread_mutex_lock(&t_lock);
	size_t len = (size_t)b->n * sizeof(b->rec[0]);
	const uint8_t *p = (const uint8_t *)b->rec;
	while (len && t_fd >= 0) {
		ssize_t k = write(t_fd, p, len);
		if (k <= 0)
			break;
		p += k;
		len -= (size_t)k;
	}
	pthread_mutex_unlock(&t_lock);
	b->n = 0;
}

void kinet_trace_flush(void)
{
	pthread_mutex_lock(&t_lock);
	struct tbuf *b = t_bufs;
	pthread_mutex_unlock(&t_lock);
	for (; b; b = b->next) {
		pthread_mutex_lock(&b->lock);
		write_out(b);
		pthread_mutex_unlock(&b->lock);
	}
}

static void trace_open(void)
{
	const char *path = KT(TRACE);
	if (!path || !*path)
		return;
	/* Non-blocking, so that a FIFO without a reader cannot block kinet_open
	 * (it fails with ENXIO); then only a regular file is kept: a FIFO, a
	 * socket or a device would block the engine threads in write() whenever
	 * its reader stalls. O_TRUNC is not applied before the type is known. */
	int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
	if (fd < 0 && errno == ENXIO) {
		t_rc = -EINVAL;
		KLOG_ERR("KINET_TRACE=%s: a FIFO or a device without a reader; the trace must be "
			 "a regular file (writes to anything else could block the NIC's engines)",
			 path);
		return;
	}
	if (fd < 0) {
		t_rc = -errno;
		KLOG_ERR("KINET_TRACE=%s: cannot create the trace file: %s", path, strerror(errno));
		return;
	}
	struct stat sb;
	if (fstat(fd, &sb)) {
		t_rc = -errno;
		KLOG_ERR("KINET_TRACE=%s: %s", path, strerror(errno));
		close(fd);
		return;
	}
	if (!S_ISREG(sb.st_mode)) {
		t_rc = -EINVAL;
		KLOG_ERR("KINET_TRACE=%s: not a regular file (%s); the trace must be a regular "
			 "file (writes to anything else could block the NIC's engines)",
			 path,
			 S_ISFIFO(sb.st_mode)   ? "a FIFO"
			 : S_ISCHR(sb.st_mode)  ? "a character device"
			 : S_ISBLK(sb.st_mode)  ? "a block device"
			 : S_ISSOCK(sb.st_mode) ? "a socket"
			 : S_ISDIR(sb.st_mode)  ? "a directory"
						: "of another type");
		close(fd);
		return;
	}
	if (ftruncate(fd, 0) || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		t_rc = -errno;
		KLOG_ERR("KINET_TRACE=%s: cannot truncate the trace file: %s", path,
			 strerror(errno));
		close(fd);
		return;
	}
	struct kinet_trace_hdr h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, KINET_TRACE_MAGIC, sizeof(KINET_TRACE_MAGIC));
	h.version = KINET_TRACE_VERSION;
	h.rec_size = sizeof(struct kinet_trace_rec);
	h.hdr_size = sizeof(h);
	t_start = mono_ns();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	h.start_mono_ns = t_start;
	h.start_real_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	h.pid = (uint32_t)getpid();
	if (write(fd, &h, sizeof(h)) != (ssize_t)sizeof(h)) {
		t_rc = -EIO;
		KLOG_ERR("KINET_TRACE=%s: cannot write the trace header", path);
		close(fd);
		return;
	}
	t_fd = fd;
	atexit(kinet_trace_flush);
	__atomic_store_n(&kinet_trace_on, true, __ATOMIC_RELEASE);
	KLOG_INFO("tracing every WQE and CQE into %s", path);
}

int kinet_trace_init(void)
{
	pthread_once(&t_once, trace_open);
	return t_rc;
}

void kinet_trace_emit_as(const struct kinet_trace_rec *r)
{
	struct tbuf *b = t_self;
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return;
		pthread_mutex_init(&b->lock, NULL);
		pthread_mutex_lock(&t_lock);
		b->next = t_bufs;
		t_bufs = b; /* kept until exit: written out by kinet_trace_flush */
		pthread_mutex_unlock(&t_lock);
		t_self = b;
	}
	pthread_mutex_lock(&b->lock);
	b->rec[b->n++] = *r;
	if (b->n == TBUF_RECS)
		write_out(b);
	pthread_mutex_unlock(&b->lock);
}

void kinet_trace_emit(struct kinet_trace_rec *r)
{
	if (!r->t_ns)
		r->t_ns = mono_ns() - t_start;
	r->engine = kinet_trace_engine;
	r->pass = kinet_trace_pass;
	kinet_trace_emit_as(r);
}

uint64_t kinet_trace_at(uint64_t mono)
{
	return mono > t_start ? mono - t_start : 1;
}

uint64_t kinet_trace_now(void)
{
	uint64_t t = mono_ns() - t_start;
	return t ? t : 1;
}

void kinet_trace_cqe(kinet_qp *qp, const struct kn_cqe64 *cqe, uint64_t len)
{
	struct kinet_trace_rec r;
	memset(&r, 0, sizeof(r));
	uint8_t op = kn_cqe_opcode(cqe);
	bool err = op == KN_CQE_REQ_ERR || op == KN_CQE_RESP_ERR;
	r.type = (op == KN_CQE_REQ || op == KN_CQE_REQ_ERR) ? KINET_TR_CQE : KINET_TR_RCQE;
	r.ctx = qp->ctx->id;
	r.qpn = qp->qpn;
	r.opcode = op;
	r.wqe_idx = kn_be16toh(cqe->wqe_counter);
	r.len = err ? (uint32_t)len : kn_be32toh(cqe->byte_cnt);
	if (err) {
		const struct kn_err_cqe *e = (const struct kn_err_cqe *)cqe;
		r.syndrome = e->syndrome;
		r.reason = e->vendor_err_synd;
	}
	kinet_trace_emit(&r);
}

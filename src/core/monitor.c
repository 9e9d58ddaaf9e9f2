/* SPDX-License-Identifier: BSD-3-Clause */
/* The host memory monitor of the registration cache (monitor.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/monitor.h"

#define RING 4096u

static pthread_once_t m_once = PTHREAD_ONCE_INIT;
static int m_rc = -ENOSYS;
static int m_fd = -1;
static pthread_t m_th;
static size_t m_page;
/* m_lock: reading the fd and appending to the ring; held briefly, never
 * while touching user memory or any other lock */
static pthread_mutex_t m_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uintptr_t start, end;
} m_ring[RING];
static _Atomic uint64_t m_seq; /* ranges appended so far */
static _Atomic int m_busy;     /* events are being read (under m_lock) */

static void push(uintptr_t start, uintptr_t end)
{
	uint64_t s = atomic_load_explicit(&m_seq, memory_order_relaxed);
	m_ring[s % RING].start = start;
	m_ring[s % RING].end = end;
	atomic_store_explicit(&m_seq, s + 1, memory_order_release);
}

/* One event (m_lock held). */
static void handle(const struct uffd_msg *m)
{
	switch (m->event) {
	case UFFD_EVENT_PAGEFAULT: {
		/* first touch of a watched page: what the kernel does without us */
		uintptr_t a = (uintptr_t)m->arg.pagefault.address & ~(uintptr_t)(m_page - 1);
		struct uffdio_zeropage z = {.range = {a, m_page}, .mode = 0};
		if (ioctl(m_fd, UFFDIO_ZEROPAGE, &z)) {
			/* mapped meanwhile (EEXIST) or gone: let the thread try again */
			struct uffdio_range r = {a, m_page};
			ioctl(m_fd, UFFDIO_WAKE, &r);
		}
		break;
	}
	case UFFD_EVENT_UNMAP:
		push((uintptr_t)m->arg.remove.start, (uintptr_t)m->arg.remove.end);
		break;
	case UFFD_EVENT_REMOVE:
		push((uintptr_t)m->arg.remove.start, (uintptr_t)m->arg.remove.end);
		break;
	case UFFD_EVENT_REMAP:
		push((uintptr_t)m->arg.remap.from, (uintptr_t)(m->arg.remap.from + m->arg.remap.len));
		break;
	default:
		break;
	}
}

uint64_t kinet_monitor_sync(void)
{
	if (m_fd < 0)
		return atomic_load(&m_seq);
	pthread_mutex_lock(&m_lock);
	/* from before the read that lets an unmapping thread return until its
	 * range is in the ring (kinet_monitor_seq) */
	atomic_store(&m_busy, 1);
	struct uffd_msg msg[16];
	for (;;) {
		ssize_t n = read(m_fd, msg, sizeof(msg));
		if (n <= 0)
			break; /* EAGAIN: nothing queued */
		for (size_t i = 0; i < (size_t)n / sizeof(msg[0]); i++)
			handle(&msg[i]);
	}
	uint64_t s = atomic_load(&m_seq);
	atomic_store(&m_busy, 0);
	pthread_mutex_unlock(&m_lock);
	return s;
}

uint64_t kinet_monitor_seq(void)
{
	if (atomic_load(&m_busy)) {
		/* a read in progress: its ranges are in the ring once it ends */
		pthread_mutex_lock(&m_lock);
		pthread_mutex_unlock(&m_lock);
	}
	return atomic_load(&m_seq);
}

static void *monitor_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p = {.fd = m_fd, .events = POLLIN};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			break;
		kinet_monitor_sync();
	}
	return NULL;
}

static void monitor_init(void)
{
	m_page = (size_t)sysconf(_SC_PAGESIZE);
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		m_rc = -errno;
		KLOG_INFO("registration cache: no userfaultfd (%s): host memory is not cached "
			  "(vm.unprivileged_userfaultfd=1 or CAP_SYS_PTRACE allows it)",
			  strerror(errno));
		return;
	}
	struct uffdio_api api = {.api = UFFD_API,
				 .features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |
					     UFFD_FEATURE_EVENT_REMAP};
	if (ioctl(fd, UFFDIO_API, &api)) {
		m_rc = -errno;
		KLOG_INFO("registration cache: userfaultfd without unmap/remove/remap events (%s): "
			  "host memory is not cached",
			  strerror(errno));
		close(fd);
		return;
	}
	m_fd = fd;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&m_th, &a, monitor_main, NULL)) {
		pthread_attr_destroy(&a);
		m_rc = -EAGAIN;
		close(fd);
		m_fd = -1;
		return;
	}
	pthread_attr_destroy(&a);
	kinet_thread_name(m_th, "kn-mr-monitor");
	m_rc = 0;
	KLOG_DBG("registration cache: host memory monitor (userfaultfd) started");
}

int kinet_monitor_start(void)
{
	pthread_once(&m_once, monitor_init);
	return m_rc;
}

int kinet_monitor_watch(uintptr_t start, uintptr_t end)
{
	if (m_fd < 0)
		return -ENOSYS;
	struct uffdio_register r = {.range = {start, end - start},
				    .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(m_fd, UFFDIO_REGISTER, &r))
		return -errno;
	return 0;
}

bool kinet_monitor_ranges(uint64_t since, uint64_t upto,
			  void (*fn)(uintptr_t start, uintptr_t end, void *arg), void *arg)
{
	if (upto - since > RING)
		return false;
	pthread_mutex_lock(&m_lock); /* entries are not overwritten meanwhile */
	bool ok = atomic_load(&m_seq) - since <= RING;
	for (uint64_t s = since; ok && s < upto; s++)
		fn(m_ring[s % RING].start, m_ring[s % RING].end, arg);
	pthread_mutex_unlock(&m_lock);
	return ok;
}

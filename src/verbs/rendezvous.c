// SPDX-License-Identifier: BSD-3-Clause
/*
 * rendezvous.c - how a kinet-verbs QP of one process finds its peer in
 * another process of this host from (GID, QP number) alone, as RoCE
 * addresses it, without a daemon.
 *
 * QP numbers are made unique on the host: each is a file qp-XXXXXX in a
 * per-user folder (KINET_VERBS_RENDEZVOUS_DIR, by default
 * /dev/shm/kinet-verbs-<uid>), created with O_EXCL, so two processes never
 * hold the same number. The file holds the owner's pid, the GIDs of its
 * device and, once the QP is in INIT, its software-NIC descriptor
 * (kinet_qp_export); a QP moving to RTR reads the peer's file, checks the
 * GID, and connects to the descriptor. Files are replaced whole (a
 * temporary file renamed over them), so a reader never sees half of one.
 * Files of processes that have ended are ignored, and removed on the next
 * sweep (the first QP of a process sweeps the folder).
 *
 * Peers on other hosts: a destination GID that is none of this host's
 * interfaces' is asked for at the host owning its address (the IPv4 address
 * of an IPv4-mapped GID, else the IPv6 one), on TCP port
 * KINET_VERBS_RENDEZVOUS_PORT, where one kinet-verbs process of that host
 * answers from its folder: the first process of the host that publishes a
 * QP binds the port; the others try again every second, so one of them
 * takes over when it ends. The answer is the entry's descriptor, which the
 * QP connects to over the network provider of the wire.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "core/driver.h"
#include "verbs/host.h"
#include "core/tunables.h"
#include "verbs/emu.h"
#include <kinet/net.h>

#define RV_MAGIC 0x4b4e5652u /* "KNVR" */
#define RV_QPN_MIN 0x100u
#define RV_QPN_MAX 0xffffffu

struct rv_head {
	uint32_t magic;
	uint32_t pid;
	uint32_t ngid;
	uint32_t desc_len;
};

static pthread_once_t rv_once = PTHREAD_ONCE_INIT;
static char rv_dir[512];
static int rv_err; /* negative errno when the folder is unusable */
/* the service answering other hosts' lookups (below), started by the
 * first QP published */
static void svc_start(void);
static pthread_once_t svc_once = PTHREAD_ONCE_INIT;

static bool pid_alive(uint32_t pid)
{
	return pid && (kill((pid_t)pid, 0) == 0 || errno != ESRCH);
}

static void rv_path(char *buf, size_t cap, uint32_t qpn)
{
	snprintf(buf, cap, "%s/qp-%06x", rv_dir, qpn);
}

/* Reads a file of the folder: its head and up to cap bytes of the rest. */
static int rv_read(const char *path, struct rv_head *h, uint8_t *rest, size_t cap, size_t *got)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	uint8_t buf[sizeof(*h) + 16 * EMU_RV_GIDS + KINET_QP_DESC_MAX];
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < (ssize_t)sizeof(*h))
		return -EPROTO;
	memcpy(h, buf, sizeof(*h));
	if (h->magic != RV_MAGIC)
		return -EPROTO;
	size_t r = (size_t)n - sizeof(*h);
	if (r > cap)
		r = cap;
	if (rest)
		memcpy(rest, buf + sizeof(*h), r);
	if (got)
		*got = r;
	return 0;
}

/* Removes an entry whose process has ended: moved aside first, so that an
 * entry made anew under that name meanwhile is put back, not lost. */
static void rv_remove_dead(const char *path)
{
	char aside[600];
	snprintf(aside, sizeof(aside), "%s.gone-%d", path, (int)getpid());
	if (rename(path, aside))
		return;
	struct rv_head h;
	if (rv_read(aside, &h, NULL, 0, NULL) == 0 && pid_alive(h.pid))
		(void)link(aside, path); /* a live one: back where it was */
	unlink(aside);
}

static void rv_sweep(void)
{
	DIR *dir = opendir(rv_dir);
	if (!dir)
		return;
	struct dirent *e;
	char path[sizeof(rv_dir) + 16];
	while ((e = readdir(dir))) {
		if (strncmp(e->d_name, "qp-", 3) || strlen(e->d_name) != 9)
			continue;
		/* a name of 9 characters (checked above) */
		snprintf(path, sizeof(path), "%s/%.9s", rv_dir, e->d_name);
		struct rv_head h;
		if (rv_read(path, &h, NULL, 0, NULL) == 0 && !pid_alive(h.pid))
			rv_remove_dead(path);
	}
	closedir(dir);
}

static void rv_init(void)
{
	const char *d = KT(VERBS_RENDEZVOUS_DIR);
	if (d && *d)
		snprintf(rv_dir, sizeof(rv_dir), "%s", d);
	else
		snprintf(rv_dir, sizeof(rv_dir), "/dev/shm/kinet-verbs-%u", (unsigned)getuid());
	if (mkdir(rv_dir, 0700) && errno != EEXIST) {
		rv_err = -errno;
		KLOG_ERR("kinet-verbs: cannot make the rendezvous folder %s: %s", rv_dir,
			 strerror(errno));
		return;
	}
	struct stat st;
	if (lstat(rv_dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
		rv_err = -EACCES;
		KLOG_ERR("kinet-verbs: the rendezvous folder %s is not a folder of this user",
			 rv_dir);
		return;
	}
	rv_sweep();
}

/* Writes the entry of qpn whole (temporary file, renamed over it). */
static int rv_write(uint32_t qpn, const uint8_t (*gids)[16], uint32_t ngid, const void *desc,
		    size_t len)
{
	char path[600], tmp[640];
	rv_path(path, sizeof(path), qpn);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int)getpid());
	uint8_t buf[sizeof(struct rv_head) + 16 * EMU_RV_GIDS + KINET_QP_DESC_MAX];
	if (ngid > EMU_RV_GIDS)
		ngid = EMU_RV_GIDS;
	if (len > KINET_QP_DESC_MAX)
		return -E2BIG;
	struct rv_head h = {RV_MAGIC, (uint32_t)getpid(), ngid, (uint32_t)len};
	memcpy(buf, &h, sizeof(h));
	if (ngid)
		memcpy(buf + sizeof(h), gids, 16 * ngid);
	if (len)
		memcpy(buf + sizeof(h) + 16 * ngid, desc, len);
	size_t n = sizeof(h) + 16 * ngid + len;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, buf, n);
	int rc = w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		KLOG_ERR("kinet-verbs: cannot publish QP 0x%x in %s: %s", qpn, rv_dir, strerror(-rc));
	}
	return rc;
}

/* Reserves number n: 0, -EEXIST when a living process holds it (an entry of
 * an ended one is removed, and n taken), or another negative errno. */
static int rv_try(uint32_t n)
{
	char path[600];
	rv_path(path, sizeof(path), n);
	for (int tries = 0; tries < 2; tries++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			if (errno != EEXIST) {
				int e = errno;
				KLOG_ERR("kinet-verbs: cannot reserve a QP number in %s: %s", rv_dir,
					 strerror(e));
				return -e;
			}
			struct rv_head h;
			if (rv_read(path, &h, NULL, 0, NULL) == 0 && !pid_alive(h.pid)) {
				rv_remove_dead(path); /* taken by an ended process */
				continue;
			}
			return -EEXIST;
		}
		struct rv_head h = {RV_MAGIC, (uint32_t)getpid(), 0, 0};
		ssize_t w = write(fd, &h, sizeof(h));
		close(fd);
		if (w != (ssize_t)sizeof(h)) {
			unlink(path);
			return -EIO;
		}
		return 0;
	}
	return -EEXIST;
}

int emu_rv_alloc(uint32_t *qpn)
{
	pthread_once(&rv_once, rv_init);
	if (rv_err)
		return rv_err;
	uint32_t span = RV_QPN_MAX - RV_QPN_MIN + 1, r = 0;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)getpid() * 2654435761u ^ (uint32_t)time(NULL);
	for (uint32_t i = 0; i < 4096; i++) {
		uint32_t n = RV_QPN_MIN + (r + i * 7919u) % span;
		int rc = rv_try(n);
		if (rc == -EEXIST)
			continue;
		if (rc == 0)
			*qpn = n;
		return rc;
	}
	KLOG_ERR("kinet-verbs: no free QP number in %s", rv_dir);
	return -ENOSPC;
}

int emu_rv_claim(uint32_t qpn)
{
	pthread_once(&rv_once, rv_init);
	if (rv_err)
		return rv_err;
	if (qpn < RV_QPN_MIN || qpn > RV_QPN_MAX)
		return -ERANGE;
	return rv_try(qpn);
}

int emu_rv_publish(uint32_t qpn, const uint8_t (*gids)[16], uint32_t ngid, const void *desc,
		   size_t len)
{
	if (rv_err)
		return rv_err;
	if (len)
		pthread_once(&svc_once, svc_start); /* peers on other hosts may ask */
	return rv_write(qpn, gids, ngid, desc, len);
}

void emu_rv_release(uint32_t qpn)
{
	if (rv_err)
		return;
	char path[600];
	rv_path(path, sizeof(path), qpn);
	struct rv_head h;
	if (rv_read(path, &h, NULL, 0, NULL) == 0 && h.pid == (uint32_t)getpid())
		unlink(path);
}

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* One look at the entry of qpn: its descriptor's length (copied to desc),
 * or -ENOENT with why it is not there. */
static int rv_find(uint32_t qpn, const uint8_t gid[16], void *desc, size_t cap, const char **why)
{
	char path[600];
	rv_path(path, sizeof(path), qpn);
	uint8_t rest[16 * EMU_RV_GIDS + KINET_QP_DESC_MAX];
	struct rv_head h;
	size_t got = 0;
	if (rv_read(path, &h, rest, sizeof(rest), &got)) {
		*why = "no such QP number on this host";
		return -ENOENT;
	}
	bool gid_ok = false;
	for (uint32_t i = 0; i < h.ngid && i < EMU_RV_GIDS && (i + 1) * 16 <= got; i++)
		gid_ok |= !memcmp(rest + 16 * i, gid, 16);
	if (!pid_alive(h.pid)) {
		*why = "the process that held that QP number has ended";
	} else if (h.ngid == 0 || h.desc_len == 0) {
		*why = "the QP is not in INIT yet";
	} else if (!gid_ok) {
		*why = "the QP of that number is on a device without that GID";
	} else if (h.ngid > EMU_RV_GIDS || 16 * h.ngid + h.desc_len > got || h.desc_len > cap) {
		*why = "its entry is malformed";
	} else {
		memcpy(desc, rest + 16 * h.ngid, h.desc_len);
		return (int)h.desc_len;
	}
	return -ENOENT;
}

/* ---- peers on other hosts ------------------------------------------------------------------ */

#define RV_Q_MAGIC 0x4b4e5651u /* "KNVQ": a lookup */
#define RV_A_MAGIC 0x4b4e5641u /* "KNVA": its answer */
#define RV_PROTO 1
#define RV_IO_MS 1000 /* a lookup's connect, request and answer, each at most */

/* On the wire, in network byte order. */
struct rv_req {
	uint32_t magic, proto, qpn, pad;
	uint8_t gid[16];
};
struct rv_ans {
	uint32_t magic, proto;
	uint32_t status; /* 0, or an errno (ENOENT) */
	uint32_t desc_len;
	char why[96];    /* status != 0: why, as rv_find says it */
};

/* Is gid one of this host's (network namespace's) interfaces' GIDs? */
static bool gid_local(const uint8_t gid[16])
{
	struct kinet_verbs_port ports[EMU_MAXDEV];
	int n = kinet_verbs_host_ports(ports, EMU_MAXDEV);
	for (int i = 0; i < n; i++)
		for (int a = 0; a < ports[i].naddr; a++)
			if (!memcmp(ports[i].addr[a], gid, 16))
				return true;
	return false;
}

static int io_wait(int fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r = poll(&p, 1, ms);
	return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : -errno;
}

/* Sends or receives exactly n bytes within RV_IO_MS. */
static int io_all(int fd, void *buf, size_t n, bool out)
{
	uint8_t *p = buf;
	uint64_t end = now_ms() + RV_IO_MS;
	while (n) {
		uint64_t t = now_ms();
		int rc = io_wait(fd, out ? POLLOUT : POLLIN, t >= end ? 0 : (int)(end - t));
		if (rc)
			return rc;
		ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT)
				: recv(fd, p, n, MSG_DONTWAIT);
		if (k == 0)
			return -ECONNRESET;
		if (k < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Answers one lookup of a peer host from this host's folder. */
static void rv_answer(int c)
{
	struct rv_req q;
	int rc = io_all(c, &q, sizeof(q), false);
	if (rc) {
		KLOG_WARN("kinet-verbs: rendezvous service: no whole request (%s; %d ms are "
			  "given): dropped", strerror(-rc), RV_IO_MS);
		return;
	}
	if (ntohl(q.magic) != RV_Q_MAGIC || ntohl(q.proto) != RV_PROTO) {
		KLOG_WARN("kinet-verbs: rendezvous service: a request that is not a kinet-verbs "
			  "lookup of protocol %d: dropped", RV_PROTO);
		return;
	}
	uint8_t buf[sizeof(struct rv_ans) + KINET_QP_DESC_MAX];
	struct rv_ans a;
	memset(&a, 0, sizeof(a));
	const char *why = "";
	int n = rv_find(ntohl(q.qpn), q.gid, buf + sizeof(a), KINET_QP_DESC_MAX, &why);
	a.magic = htonl(RV_A_MAGIC);
	a.proto = htonl(RV_PROTO);
	a.status = htonl(n < 0 ? (uint32_t)-n : 0);
	a.desc_len = htonl(n < 0 ? 0 : (uint32_t)n);
	snprintf(a.why, sizeof(a.why), "%s", n < 0 ? why : "");
	memcpy(buf, &a, sizeof(a));
	(void)io_all(c, buf, sizeof(a) + (n < 0 ? 0 : (size_t)n), true);
}

/* The listening socket of the service on port, both IPv6 and IPv4 where
 * the host has IPv6; -errno (-EADDRINUSE: another process serves). */
static int rv_listen(unsigned port)
{
	int s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1, zero = 0;
	if (s >= 0) {
		struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
					 .sin6_addr = IN6ADDR_ANY_INIT};
		setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(s, 64) == 0)
			return s;
		int e = errno;
		close(s);
		if (e != EADDRNOTAVAIL && e != EAFNOSUPPORT)
			return -e;
	}
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* no IPv6 here */
	if (s < 0)
		return -errno;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 64)) {
		int e = errno;
		close(s);
		return -e;
	}
	return s;
}

/* The listening socket, which a child of fork does not keep (it would hold
 * the port with no thread answering, and no other process could take over). */
static int svc_fd = -1;
static void svc_atfork_child(void)
{
	if (svc_fd >= 0)
		close(svc_fd);
	svc_fd = -1;
}

static void *rv_serve(void *arg)
{
	unsigned port = (unsigned)(uintptr_t)arg;
	bool said = false;
	for (;;) {
		int s = rv_listen(port);
		if (s < 0) {
			/* another process of the host serves (EADDRINUSE): try again,
			 * to take over when it ends */
			if (s != -EADDRINUSE && !said)
				KLOG_WARN("kinet-verbs: cannot answer other hosts' lookups on TCP "
					  "port %u: %s (trying again every second)",
					  port, strerror(-s));
			said = true;
			sleep(1);
			continue;
		}
		__atomic_store_n(&svc_fd, s, __ATOMIC_RELEASE);
		KLOG_INFO("kinet-verbs: answering other hosts' lookups of this host's QPs on TCP "
			  "port %u", port);
		for (;;) {
			int c = accept(s, NULL, NULL);
			if (c < 0) {
				if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
				    errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
					if (errno != EINTR && errno != ECONNABORTED)
						sleep(1);
					continue;
				}
				KLOG_ERR("kinet-verbs: rendezvous service: accept: %s",
					 strerror(errno));
				break;
			}
			(void)fcntl(c, F_SETFD, FD_CLOEXEC);
			rv_answer(c);
			close(c);
		}
		__atomic_store_n(&svc_fd, -1, __ATOMIC_RELEASE);
		close(s);
	}
	return NULL;
}

static void svc_start(void)
{
	unsigned port = (unsigned)KT(VERBS_RENDEZVOUS_PORT);
	if (!port)
		return; /* peers on other hosts: off */
	pthread_atfork(NULL, NULL, svc_atfork_child);
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &a, rv_serve, (void *)(uintptr_t)port);
	pthread_attr_destroy(&a);
	if (rc)
		KLOG_ERR("kinet-verbs: no thread to answer other hosts' lookups: %s", strerror(rc));
}

/* The address of the host owning gid: the IPv4 address of an IPv4-mapped
 * GID, else the IPv6 address (a link-local one on the interface of ifname). */
static socklen_t gid_sockaddr(const uint8_t gid[16], const char *ifname, unsigned port,
			      struct sockaddr_storage *ss)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	memset(ss, 0, sizeof(*ss));
	if (!memcmp(gid, v4mapped, 12)) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		memcpy(&a->sin_addr, gid + 12, 4);
		return sizeof(*a);
	}
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
	a->sin6_family = AF_INET6;
	a->sin6_port = htons((uint16_t)port);
	memcpy(&a->sin6_addr, gid, 16);
	if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80 && ifname)
		a->sin6_scope_id = if_nametoindex(ifname);
	return sizeof(*a);
}

/* Asks the host at sa for the entry of (qpn, gid): the descriptor's length,
 * or -errno with why (a buffer of cap_why bytes). */
static int rv_ask(const struct sockaddr_storage *sa, socklen_t salen, uint32_t qpn,
		  const uint8_t gid[16], void *desc, size_t cap, char *why, size_t cap_why,
		  uint64_t end)
{
	int s = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0) {
		int e = errno;
		snprintf(why, cap_why, "socket: %s", strerror(e));
		return -e;
	}
	int rc = 0;
	if (connect(s, (const struct sockaddr *)sa, salen) && errno != EINPROGRESS) {
		rc = -errno;
	} else {
		/* no longer than the lookup has left (but a moment at least) */
		uint64_t t = now_ms(), left = end > t + 50 ? end - t : 50;
		rc = io_wait(s, POLLOUT, left < RV_IO_MS ? (int)left : RV_IO_MS);
		int e = 0;
		socklen_t l = sizeof(e);
		if (!rc && getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l) == 0 && e)
			rc = -e;
	}
	if (rc) {
		snprintf(why, cap_why, "its rendezvous service does not answer (%s)", strerror(-rc));
		close(s);
		return rc;
	}
	struct rv_req q = {htonl(RV_Q_MAGIC), htonl(RV_PROTO), htonl(qpn), 0, {0}};
	memcpy(q.gid, gid, 16);
	struct rv_ans a;
	if ((rc = io_all(s, &q, sizeof(q), true)) || (rc = io_all(s, &a, sizeof(a), false))) {
		snprintf(why, cap_why, "its rendezvous service: %s", strerror(-rc));
		close(s);
		return rc;
	}
	uint32_t len = ntohl(a.desc_len), st = ntohl(a.status);
	if (ntohl(a.magic) != RV_A_MAGIC || ntohl(a.proto) != RV_PROTO ||
	    (!st && (len == 0 || len > cap || len > KINET_QP_DESC_MAX))) {
		snprintf(why, cap_why, "the answer is not a kinet-verbs one of protocol %d",
			 RV_PROTO);
		close(s);
		return -EPROTO;
	}
	if (st) {
		a.why[sizeof(a.why) - 1] = 0;
		snprintf(why, cap_why, "that host says: %s", a.why);
		close(s);
		return -(int)st;
	}
	rc = io_all(s, desc, len, false);
	close(s);
	if (rc) {
		snprintf(why, cap_why, "its rendezvous service: %s", strerror(-rc));
		return rc;
	}
	return (int)len;
}

int emu_rv_lookup(uint32_t qpn, const uint8_t gid[16], const char *ifname, void *desc,
		  size_t cap)
{
	pthread_once(&rv_once, rv_init);
	if (rv_err)
		return rv_err;
	uint64_t wait = KT(VERBS_PEER_TIMEOUT_MS), end = now_ms() + wait;
	unsigned port = (unsigned)KT(VERBS_RENDEZVOUS_PORT);
	char g[INET6_ADDRSTRLEN], why[256] = "";
	inet_ntop(AF_INET6, gid, g, sizeof(g));
	/* a GID of another host: asked for there (its entry may be in this
	 * folder too, where hosts share one) */
	bool remote = !gid_local(gid);
	struct sockaddr_storage sa;
	socklen_t salen = gid_sockaddr(gid, ifname, port, &sa);
	for (;;) {
		const char *w = "";
		int n = rv_find(qpn, gid, desc, cap, &w);
		if (n >= 0)
			return n;
		snprintf(why, sizeof(why), "%s", w);
		if (remote && port) {
			char rw[160];
			n = rv_ask(&sa, salen, qpn, gid, desc, cap, rw, sizeof(rw), end);
			if (n >= 0)
				return n;
			snprintf(why, sizeof(why), "not in the folder; the host of that GID, TCP "
				 "port %u: %s", port, rw);
		} else if (remote) {
			snprintf(why, sizeof(why), "%s; a GID of another host, and "
				 "KINET_VERBS_RENDEZVOUS_PORT is 0 (no lookups there)", w);
		}
		if (now_ms() >= end)
			break;
		struct timespec ts = {0, remote ? 20000000 : 1000000};
		nanosleep(&ts, NULL);
	}
	KLOG_ERR("kinet-verbs: no QP 0x%x at GID %s after %" PRIu64 " ms: %s (%s; "
		 "KINET_VERBS_PEER_TIMEOUT_MS)", qpn, g, wait, why, rv_dir);
	return -ENOENT;
}

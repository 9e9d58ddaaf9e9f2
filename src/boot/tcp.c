/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcp.c - the TCP bootstrap: rank 0 listens, the others connect (a star
 * through rank 0), a challenge-response on the job secret at join, and
 * allgather over the star. The wire format is described in boot_int.h.
 *
 * Every socket is non-blocking and every wait is a poll() bounded by the
 * deadline of the call, so nothing blocks longer than the timeout.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "boot/boot_int.h"

#define MAX_PENDING 32        /* connections in the handshake at once */
#define HANDSHAKE_MS 5000     /* a connection must complete the handshake in this */
#define ERROR_SEND_MS 200     /* bound on best-effort error notices */

int64_t kboot_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int remaining_ms(int64_t deadline)
{
	int64_t r = deadline - kboot_now_ms();
	if (r < 0)
		return 0;
	return r > 1000000 ? 1000000 : (int)r;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Waits until fd is ready for `events`: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, remaining_ms(deadline));
		if (n > 0)
			return 0; /* ready, or an error the next call reports */
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int send_all(int fd, const void *buf, size_t len, int64_t deadline)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return errno == EPIPE ? -ECONNRESET : -errno;
		int rc = wait_fd(fd, POLLOUT, deadline);
		if (rc)
			return rc;
	}
	return 0;
}

/* Reads exactly len bytes: 0, -ECONNRESET when the peer hung up, -ETIMEDOUT. */
static int recv_all(int fd, void *buf, size_t len, int64_t deadline)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = recv(fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int rc = wait_fd(fd, POLLIN, deadline);
		if (rc)
			return rc;
	}
	return 0;
}

static int send_msg(int fd, uint16_t type, const void *payload, uint32_t len, int64_t deadline)
{
	uint8_t buf[KBOOT_HDR_LEN + 256];
	kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, type, len);
	if (len <= 256) { /* one segment for the small messages */
		if (len)
			memcpy(buf + KBOOT_HDR_LEN, payload, len);
		return send_all(fd, buf, KBOOT_HDR_LEN + len, deadline);
	}
	int rc = send_all(fd, buf, KBOOT_HDR_LEN, deadline);
	return rc ? rc : send_all(fd, payload, len, deadline);
}

/* Best-effort notice to a peer before hanging up. code: positive. */
static void send_error(int fd, int code, const char *text)
{
	uint8_t p[4 + KBOOT_ERRTEXT_MAX];
	size_t tl = strlen(text);
	if (tl > KBOOT_ERRTEXT_MAX)
		tl = KBOOT_ERRTEXT_MAX;
	kn_store_be32(p, (uint32_t)code);
	memcpy(p + 4, text, tl);
	(void)send_msg(fd, KBOOT_ERROR, p, (uint32_t)(4 + tl), kboot_now_ms() + ERROR_SEND_MS);
}

/* Checks a received header: 0 with type and length, -EPROTO (not our
 * protocol) or -KINET_EVERSION (*peer_version set). */
static int parse_hdr(const uint8_t *h, uint16_t *type, uint32_t *len, uint16_t *peer_version)
{
	if (kn_load_be32(h) != KBOOT_MAGIC)
		return -EPROTO;
	*peer_version = kn_load_be16(h + 4);
	if (*peer_version != KINET_BOOT_PROTO_VERSION)
		return -KINET_EVERSION;
	*type = kn_load_be16(h + 6);
	*len = kn_load_be32(h + 8);
	return 0;
}

/* Reads the payload of an ERROR message and turns it into a negative code. */
static int read_error(int fd, uint32_t len, int64_t deadline, const char *from)
{
	uint8_t p[4 + KBOOT_ERRTEXT_MAX + 1];
	if (len < 4 || len > 4 + KBOOT_ERRTEXT_MAX) {
		KLOG_ERR("boot: malformed error message from %s", from);
		return -EPROTO;
	}
	int rc = recv_all(fd, p, len, deadline);
	if (rc)
		return rc;
	int32_t code = (int32_t)kn_load_be32(p);
	p[len] = 0;
	for (uint32_t i = 4; i < len; i++) /* printable text only in the log */
		if (p[i] < 32 || p[i] > 126)
			p[i] = '?';
	if (code <= 0 || code >= KINET_ERR_BASE + 1000)
		code = EPROTO;
	KLOG_ERR("boot: %s says: %s", from, (char *)p + 4);
	return -code;
}

/* Splits "host:port" / "[v6]:port". 0 or -EINVAL. */
static int parse_addr(const char *s, char *host, size_t hl, char *port, size_t pl)
{
	const char *colon;
	size_t n;
	if (!s)
		return -EINVAL;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		n = (size_t)(end - s - 1);
		if (n >= hl)
			return -EINVAL;
		memcpy(host, s + 1, n);
		host[n] = 0;
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s)))
			return -EINVAL;
		n = (size_t)(colon - s);
		if (n >= hl)
			return -EINVAL;
		memcpy(host, s, n);
		host[n] = 0;
	}
	const char *p = colon + 1;
	if (!*p || strlen(p) >= pl)
		return -EINVAL;
	long v = 0;
	for (const char *q = p; *q; q++) {
		if (*q < '0' || *q > '9')
			return -EINVAL;
		v = v * 10 + (*q - '0');
		if (v > 65535)
			return -EINVAL;
	}
	snprintf(port, pl, "%ld", v);
	return 0;
}

static void set_socket_opts(int fd)
{
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void peer_name(int fd, char *buf, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char h[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (!getpeername(fd, (struct sockaddr *)&ss, &sl)) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &a->sin_addr, h, sizeof(h));
			port = ntohs(a->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof(h));
			port = ntohs(a->sin6_port);
		}
	}
	snprintf(buf, n, "%s:%d", h, port);
}

/* The message both sides MAC: role, nonces, rank, size, version. */
static void auth_tag(const uint8_t key[16], char role, const uint8_t *ns, const uint8_t *nc,
		     uint32_t rank, uint32_t size, uint8_t tag[KBOOT_TAG_LEN])
{
	uint8_t m[1 + 2 * KBOOT_NONCE_LEN + 10];
	m[0] = (uint8_t)role;
	memcpy(m + 1, ns, KBOOT_NONCE_LEN);
	memcpy(m + 1 + KBOOT_NONCE_LEN, nc, KBOOT_NONCE_LEN);
	kn_store_be32(m + 1 + 2 * KBOOT_NONCE_LEN, rank);
	kn_store_be32(m + 5 + 2 * KBOOT_NONCE_LEN, size);
	kn_store_be16(m + 9 + 2 * KBOOT_NONCE_LEN, KINET_BOOT_PROTO_VERSION);
	kboot_mac(key, m, sizeof(m), tag);
}

/* ---- rank 0 ------------------------------------------------------------------------- */

struct pending {
	int fd;
	int64_t deadline;
	size_t got;
	uint8_t nonce_s[KBOOT_NONCE_LEN];
	uint8_t buf[KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN];
	char peer[80];
};

static int do_listen(kinet_boot *b, const char *host, const char *port)
{
	bool any = !host[0] || !strcmp(host, "*");
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
	struct addrinfo *res = NULL;
	int gai = getaddrinfo(any ? NULL : host, port, &hints, &res);
	if (gai) {
		KLOG_ERR("boot: cannot resolve listen address %s: %s", host, gai_strerror(gai));
		return -EINVAL;
	}
	int fd = -1, err = -EADDRNOTAVAIL;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		int one = 1, zero = 0;
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, 128))
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		KLOG_ERR("boot: rank 0 cannot listen on %s:%s: %s", host, port, kinet_strerror(err));
		return err;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int actual = 0;
	if (!getsockname(fd, (struct sockaddr *)&ss, &sl))
		actual = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							: ((struct sockaddr_in *)&ss)->sin_port);
	char h[256];
	if (any) {
		if (gethostname(h, sizeof(h)))
			snprintf(h, sizeof(h), "localhost");
		h[sizeof(h) - 1] = 0;
	} else {
		snprintf(h, sizeof(h), "%s", host);
	}
	if (strchr(h, ':'))
		snprintf(b->addr, sizeof(b->addr), "[%s]:%d", h, actual);
	else
		snprintf(b->addr, sizeof(b->addr), "%s:%d", h, actual);
	return fd;
}

static void drop_pending(struct pending *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

/* A complete RESPONSE from a pending connection: checks it and either joins
 * the rank (ACCEPT) or refuses the connection. */
static void handle_response(kinet_boot *b, const uint8_t key[16], struct pending *p, int *joined)
{
	const uint8_t *r = p->buf + KBOOT_HDR_LEN;
	uint32_t rank = kn_load_be32(r), size = kn_load_be32(r + 4);
	const uint8_t *nc = r + 8, *tag = r + 8 + KBOOT_NONCE_LEN;
	uint8_t want[KBOOT_TAG_LEN];
	char text[160];
	auth_tag(key, 'C', p->nonce_s, nc, rank, size, want);
	if (!kboot_tag_equal(want, tag, KBOOT_TAG_LEN)) {
		KLOG_WARN("boot: connection from %s refused: wrong job secret (dropped; still "
			  "waiting for the ranks of this job)", p->peer);
		send_error(p->fd, KINET_ESECRET, "wrong job secret");
		drop_pending(p);
		return;
	}
	if (size != (uint32_t)b->size || rank == 0 || rank >= (uint32_t)b->size) {
		snprintf(text, sizeof(text), "rank %u of %u does not fit this job of %d processes",
			 rank, size, b->size);
		KLOG_WARN("boot: connection from %s refused: %s", p->peer, text);
		send_error(p->fd, EINVAL, text);
		drop_pending(p);
		return;
	}
	if (b->fds[rank] >= 0) {
		snprintf(text, sizeof(text), "rank %u has already joined", rank);
		KLOG_WARN("boot: connection from %s refused: %s", p->peer, text);
		send_error(p->fd, EEXIST, text);
		drop_pending(p);
		return;
	}
	uint8_t stag[KBOOT_TAG_LEN];
	auth_tag(key, 'S', p->nonce_s, nc, rank, size, stag);
	if (send_msg(p->fd, KBOOT_ACCEPT, stag, sizeof(stag), kboot_now_ms() + ERROR_SEND_MS * 5)) {
		KLOG_WARN("boot: rank %u (%s) went away during the handshake", rank, p->peer);
		drop_pending(p);
		return;
	}
	KLOG_DBG("boot: rank %u joined from %s", rank, p->peer);
	b->fds[rank] = p->fd;
	p->fd = -1;
	(*joined)++;
}

/* Reads what a pending connection has sent; handles it once complete. */
static void pending_input(kinet_boot *b, const uint8_t key[16], struct pending *p, int *joined)
{
	size_t want = p->got < KBOOT_HDR_LEN ? KBOOT_HDR_LEN : sizeof(p->buf);
	ssize_t n = recv(p->fd, p->buf + p->got, want - p->got, 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		KLOG_INFO("boot: connection from %s closed during the handshake", p->peer);
		drop_pending(p);
		return;
	}
	p->got += (size_t)n;
	if (p->got == KBOOT_HDR_LEN) {
		uint16_t type = 0, ver = 0;
		uint32_t len = 0;
		int rc = parse_hdr(p->buf, &type, &len, &ver);
		if (rc == -KINET_EVERSION) {
			char text[120];
			snprintf(text, sizeof(text),
				 "bootstrap protocol version %u refused: rank 0 speaks version %d",
				 ver, KINET_BOOT_PROTO_VERSION);
			KLOG_WARN("boot: connection from %s refused: %s", p->peer, text);
			send_error(p->fd, KINET_EVERSION, text);
			drop_pending(p);
		} else if (rc || type != KBOOT_RESPONSE || len != KBOOT_RESPONSE_LEN) {
			KLOG_WARN("boot: connection from %s dropped: malformed handshake "
				  "(type %u, length %u)", p->peer, type, len);
			send_error(p->fd, EPROTO, "malformed handshake");
			drop_pending(p);
		}
		return;
	}
	if (p->got == sizeof(p->buf))
		handle_response(b, key, p, joined);
}

static void notify_all(kinet_boot *b, int code, const char *text)
{
	for (int r = 1; r < b->size; r++)
		if (b->fds[r] >= 0)
			send_error(b->fds[r], code, text);
}

static int server_join(kinet_boot *b, int lfd, const uint8_t key[16], int64_t deadline)
{
	struct pending pend[MAX_PENDING];
	struct pollfd pfd[1 + MAX_PENDING + 64];
	int joined = 0, rc = 0;
	for (int i = 0; i < MAX_PENDING; i++)
		pend[i].fd = -1;

	while (joined < b->size - 1) {
		int64_t now = kboot_now_ms();
		if (now >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		/* poll: the listener, the pending handshakes, and up to 64 joined
		 * ranks (to notice one that leaves before the job is complete) */
		int np = 0, wake = remaining_ms(deadline);
		pfd[np++] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (int i = 0; i < MAX_PENDING; i++) {
			if (pend[i].fd < 0)
				continue;
			pfd[np++] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
			int w = (int)(pend[i].deadline - now);
			if (w < wake)
				wake = w < 0 ? 0 : w;
		}
		int first_joined = np;
		for (int r = 1; r < b->size && np < (int)(sizeof(pfd) / sizeof(pfd[0])); r++)
			if (b->fds[r] >= 0)
				pfd[np++] = (struct pollfd){.fd = b->fds[r], .events = POLLIN};
		int n = poll(pfd, (nfds_t)np, wake);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		/* joined ranks must stay silent until READY: input means they left */
		for (int i = first_joined; i < np; i++) {
			if (!pfd[i].revents)
				continue;
			for (int r = 1; r < b->size; r++) {
				if (b->fds[r] != pfd[i].fd)
					continue;
				KLOG_WARN("boot: rank %d left before the job was complete; its slot "
					  "is open again", r);
				close(b->fds[r]);
				b->fds[r] = -1;
				joined--;
			}
		}
		/* handshakes: input, then the ones that took too long */
		int k = 1;
		for (int i = 0; i < MAX_PENDING; i++) {
			if (pend[i].fd < 0)
				continue;
			if (pfd[k].fd == pend[i].fd && pfd[k].revents)
				pending_input(b, key, &pend[i], &joined);
			k++;
			if (pend[i].fd >= 0 && kboot_now_ms() >= pend[i].deadline) {
				KLOG_WARN("boot: connection from %s dropped: no handshake within "
					  "%d ms", pend[i].peer, HANDSHAKE_MS);
				drop_pending(&pend[i]);
			}
		}
		if (!(pfd[0].revents & POLLIN))
			continue;
		/* new connections */
		for (;;) {
			int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0)
				break;
			int slot = -1;
			for (int i = 0; i < MAX_PENDING && slot < 0; i++)
				if (pend[i].fd < 0)
					slot = i;
			struct pending *p = slot >= 0 ? &pend[slot] : NULL;
			char peer[80];
			peer_name(fd, peer, sizeof(peer));
			if (!p) {
				KLOG_WARN("boot: connection from %s dropped: too many handshakes "
					  "in progress", peer);
				close(fd);
				continue;
			}
			set_socket_opts(fd);
			p->fd = fd;
			p->got = 0;
			p->deadline = kboot_now_ms() + HANDSHAKE_MS;
			snprintf(p->peer, sizeof(p->peer), "%s", peer);
			uint8_t ch[KBOOT_CHALLENGE_LEN];
			if (kboot_random(p->nonce_s, KBOOT_NONCE_LEN)) {
				rc = -EIO;
				drop_pending(p);
				break;
			}
			memcpy(ch, p->nonce_s, KBOOT_NONCE_LEN);
			kn_store_be32(ch + KBOOT_NONCE_LEN, (uint32_t)b->size);
			if (send_msg(fd, KBOOT_CHALLENGE, ch, sizeof(ch),
				     kboot_now_ms() + ERROR_SEND_MS))
				drop_pending(p);
		}
		if (rc)
			break;
	}
	for (int i = 0; i < MAX_PENDING; i++)
		drop_pending(&pend[i]);
	if (rc == -ETIMEDOUT) {
		char missing[100] = "";
		size_t off = 0;
		for (int r = 1; r < b->size && off < sizeof(missing) - 12; r++)
			if (b->fds[r] < 0)
				off += (size_t)snprintf(missing + off, sizeof(missing) - off, " %d", r);
		char text[KBOOT_ERRTEXT_MAX + 64];
		snprintf(text, sizeof(text), "rank 0 timed out: %d of %d ranks joined; missing:%s",
			 joined + 1, b->size, missing);
		KLOG_ERR("boot: %s", text);
		notify_all(b, ETIMEDOUT, text);
	}
	return rc;
}

/* ---- the other ranks -------------------------------------------------------------------- */

/* Connects to rank 0, retrying while it is not there yet. fd or -errno. */
static int client_connect(const char *host, const char *port, int64_t deadline)
{
	int backoff = 10, last = -ETIMEDOUT;
	for (;;) {
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
		struct addrinfo *res = NULL;
		int gai = getaddrinfo(host, port, &hints, &res);
		if (gai && gai != EAI_AGAIN) {
			KLOG_ERR("boot: cannot resolve rank 0's address %s: %s", host,
				 gai_strerror(gai));
			return -EHOSTUNREACH;
		}
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
					ai->ai_protocol);
			if (fd < 0) {
				last = -errno;
				continue;
			}
			int rc = connect(fd, ai->ai_addr, ai->ai_addrlen) ? -errno : 0;
			if (rc == -EINPROGRESS) {
				rc = wait_fd(fd, POLLOUT, deadline);
				if (!rc) {
					int e = 0;
					socklen_t el = sizeof(e);
					getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
					rc = -e;
				}
			}
			if (!rc) {
				freeaddrinfo(res);
				set_socket_opts(fd);
				return fd;
			}
			last = rc;
			close(fd);
		}
		if (res)
			freeaddrinfo(res);
		if (kboot_now_ms() >= deadline)
			break;
		int w = remaining_ms(deadline);
		sleep_ms(backoff < w ? backoff : w);
		if (backoff < 200)
			backoff *= 2;
	}
	KLOG_ERR("boot: could not reach rank 0 at %s:%s before the timeout (last error: %s)",
		 host, port, kinet_strerror(last));
	return -ETIMEDOUT;
}

/* Reads one header from rank 0, refusing another protocol version. */
static int client_hdr(int fd, int64_t deadline, uint16_t *type, uint32_t *len)
{
	uint8_t h[KBOOT_HDR_LEN];
	uint16_t ver = 0;
	int rc = recv_all(fd, h, sizeof(h), deadline);
	if (rc)
		return rc;
	rc = parse_hdr(h, type, len, &ver);
	if (rc == -KINET_EVERSION) {
		char text[120];
		snprintf(text, sizeof(text), "bootstrap protocol version %u refused: this rank "
			 "speaks version %d", ver, KINET_BOOT_PROTO_VERSION);
		KLOG_ERR("boot: rank 0 %s", text);
		send_error(fd, KINET_EVERSION, text);
	} else if (rc) {
		KLOG_ERR("boot: malformed message from rank 0 (not the kinet bootstrap protocol)");
	}
	return rc;
}

static int client_join(kinet_boot *b, int fd, const uint8_t key[16], int64_t deadline,
		       bool *greeted)
{
	uint16_t type;
	uint32_t len;
	int rc = client_hdr(fd, deadline, &type, &len);
	if (rc)
		return rc;
	*greeted = true;
	if (type == KBOOT_ERROR)
		return read_error(fd, len, deadline, "rank 0");
	if (type != KBOOT_CHALLENGE || len != KBOOT_CHALLENGE_LEN) {
		KLOG_ERR("boot: malformed handshake from rank 0 (type %u, length %u)", type, len);
		return -EPROTO;
	}
	uint8_t ch[KBOOT_CHALLENGE_LEN];
	if ((rc = recv_all(fd, ch, sizeof(ch), deadline)))
		return rc;
	if (kn_load_be32(ch + KBOOT_NONCE_LEN) != (uint32_t)b->size)
		KLOG_WARN("boot: rank 0 runs a job of %u processes, this rank was told %d",
			  kn_load_be32(ch + KBOOT_NONCE_LEN), b->size);
	uint8_t resp[KBOOT_RESPONSE_LEN];
	uint8_t *nc = resp + 8;
	kn_store_be32(resp, (uint32_t)b->rank);
	kn_store_be32(resp + 4, (uint32_t)b->size);
	if (kboot_random(nc, KBOOT_NONCE_LEN))
		return -EIO;
	auth_tag(key, 'C', ch, nc, (uint32_t)b->rank, (uint32_t)b->size,
		 resp + 8 + KBOOT_NONCE_LEN);
	if ((rc = send_msg(fd, KBOOT_RESPONSE, resp, sizeof(resp), deadline)))
		return rc;

	if ((rc = client_hdr(fd, deadline, &type, &len)))
		return rc;
	if (type == KBOOT_ERROR)
		return read_error(fd, len, deadline, "rank 0");
	if (type != KBOOT_ACCEPT || len != KBOOT_ACCEPT_LEN) {
		KLOG_ERR("boot: malformed handshake from rank 0 (type %u, length %u)", type, len);
		return -EPROTO;
	}
	uint8_t stag[KBOOT_TAG_LEN], want[KBOOT_TAG_LEN];
	if ((rc = recv_all(fd, stag, sizeof(stag), deadline)))
		return rc;
	auth_tag(key, 'S', ch, nc, (uint32_t)b->rank, (uint32_t)b->size, want);
	if (!kboot_tag_equal(stag, want, KBOOT_TAG_LEN)) {
		KLOG_ERR("boot: the process at rank 0's address does not know the job secret");
		return -KINET_ESECRET;
	}
	/* joined: wait until the whole job is */
	if ((rc = client_hdr(fd, deadline, &type, &len))) {
		if (rc == -ETIMEDOUT)
			KLOG_ERR("boot: rank %d joined but the job was not complete before the "
				 "timeout", b->rank);
		return rc;
	}
	if (type == KBOOT_ERROR)
		return read_error(fd, len, deadline, "rank 0");
	if (type != KBOOT_READY || len != 0) {
		KLOG_ERR("boot: malformed message from rank 0 (type %u, length %u)", type, len);
		return -EPROTO;
	}
	return 0;
}

/* ---- entry points --------------------------------------------------------------------- */

static int server_init(kinet_boot *b, const char *host, const char *port, const uint8_t key[16],
		       void (*listening)(const char *, void *), void *arg)
{
	int64_t deadline = kboot_now_ms() + b->timeout_ms;
	int lfd = do_listen(b, host, port);
	if (lfd < 0)
		return lfd;
	KLOG_INFO("boot: rank 0 listening on %s for %d ranks", b->addr, b->size - 1);
	if (listening)
		listening(b->addr, arg);
	int rc = server_join(b, lfd, key, deadline);
	close(lfd);
	if (rc)
		return rc;
	for (int r = 1; r < b->size && !rc; r++)
		rc = send_msg(b->fds[r], KBOOT_READY, NULL, 0, deadline);
	if (rc) {
		KLOG_ERR("boot: a rank went away before the job started: %s", kinet_strerror(rc));
		notify_all(b, ECONNRESET, "a rank went away before the job started");
	}
	return rc;
}

static int client_init(kinet_boot *b, const char *addr, const char *host, const char *port,
		       const uint8_t key[16])
{
	int64_t deadline = kboot_now_ms() + b->timeout_ms;
	int rc;
	if (!strcmp(port, "0")) {
		KLOG_ERR("boot: rank %d needs rank 0's actual port (got %s)", b->rank, addr);
		return -EINVAL;
	}
	snprintf(b->addr, sizeof(b->addr), "%s", addr);
	for (;;) {
		int fd = client_connect(host, port, deadline);
		if (fd < 0)
			return fd;
		b->fds[0] = fd;
		bool greeted = false;
		rc = client_join(b, fd, key, deadline, &greeted);
		if (rc != -ECONNRESET || greeted || kboot_now_ms() >= deadline)
			break;
		/* hung up on before a word was said (rank 0 busy with too many
		 * handshakes, or a previous job's rank 0 going away): try again */
		close(fd);
		b->fds[0] = -1;
		sleep_ms(20);
	}
	return rc;
}

int kboot_tcp_init(kinet_boot *b, const char *addr, const char *secret,
		   void (*listening)(const char *, void *), void *arg)
{
	char host[256], port[8];
	int rc = parse_addr(addr, host, sizeof(host), port, sizeof(port));
	if (rc) {
		KLOG_ERR("boot: bad address \"%s\" (want host:port or [v6addr]:port)",
			 addr ? addr : "(null)");
		return rc;
	}
	b->fds = malloc(sizeof(int) * (size_t)b->size);
	if (!b->fds)
		return -ENOMEM;
	for (int i = 0; i < b->size; i++)
		b->fds[i] = -1;
	uint8_t key[16];
	kboot_mac_key(secret, key);
	rc = b->rank == 0 ? server_init(b, host, port, key, listening, arg)
			  : client_init(b, addr, host, port, key);
	explicit_bzero(key, sizeof(key));
	return rc;
}

int kboot_tcp_allgather(kinet_boot *b, const void *mine, void *all, size_t len)
{
	size_t total = len * (size_t)b->size;
	int64_t deadline = kboot_now_ms() + b->timeout_ms;
	uint8_t *out = all;
	uint8_t seq[4];
	int rc = 0;
	kn_store_be32(seq, b->seq);

	if (b->rank == 0) {
		if (len)
			memmove(out, mine, len);
		int bad = 0;
		for (int r = 1; r < b->size && !rc; r++) {
			uint8_t h[KBOOT_HDR_LEN + 4];
			uint16_t type = 0, ver = 0;
			uint32_t plen = 0;
			char from[32];
			snprintf(from, sizeof(from), "rank %d", r);
			rc = recv_all(b->fds[r], h, KBOOT_HDR_LEN, deadline);
			if (!rc)
				rc = parse_hdr(h, &type, &plen, &ver);
			if (!rc && type == KBOOT_ERROR)
				rc = read_error(b->fds[r], plen, deadline, from);
			else if (!rc && (type != KBOOT_DATA || plen != 4 + len)) {
				KLOG_ERR("boot: allgather: %s sent %s of %u bytes, rank 0 expected "
					 "%zu (all ranks must pass the same length)", from,
					 type == KBOOT_DATA ? "data" : "a wrong message", plen, len);
				rc = -EPROTO;
			}
			if (!rc)
				rc = recv_all(b->fds[r], h + KBOOT_HDR_LEN, 4, deadline);
			if (!rc && kn_load_be32(h + KBOOT_HDR_LEN) != b->seq) {
				KLOG_ERR("boot: allgather: %s is at collective %u, rank 0 at %u",
					 from, kn_load_be32(h + KBOOT_HDR_LEN), b->seq);
				rc = -EPROTO;
			}
			if (!rc && len)
				rc = recv_all(b->fds[r], out + (size_t)r * len, len, deadline);
			if (rc)
				bad = r;
		}
		if (rc) {
			char text[120];
			snprintf(text, sizeof(text), "collective %u failed at rank 0 (rank %d: %s)",
				 b->seq, bad, kinet_strerror(rc));
			if (rc != -EPROTO)
				KLOG_ERR("boot: %s", text);
			notify_all(b, -rc, text);
			return rc;
		}
		for (int r = 1; r < b->size && !rc; r++) {
			uint8_t h[KBOOT_HDR_LEN + 4];
			kboot_hdr(h, KINET_BOOT_PROTO_VERSION, KBOOT_GATHER, (uint32_t)(4 + total));
			memcpy(h + KBOOT_HDR_LEN, seq, 4);
			rc = send_all(b->fds[r], h, sizeof(h), deadline);
			if (!rc && total)
				rc = send_all(b->fds[r], out, total, deadline);
			if (rc) {
				KLOG_ERR("boot: allgather: sending to rank %d failed: %s", r,
					 kinet_strerror(rc));
				notify_all(b, -rc, "rank 0 could not deliver a collective");
			}
		}
		return rc;
	}

	int fd = b->fds[0];
	uint8_t h[KBOOT_HDR_LEN + 4];
	kboot_hdr(h, KINET_BOOT_PROTO_VERSION, KBOOT_DATA, (uint32_t)(4 + len));
	memcpy(h + KBOOT_HDR_LEN, seq, 4);
	rc = send_all(fd, h, sizeof(h), deadline);
	if (!rc && len)
		rc = send_all(fd, mine, len, deadline);
	/* an early error from rank 0 is read below even if our send failed */
	uint16_t type = 0;
	uint32_t plen = 0;
	int rc2 = client_hdr(fd, deadline, &type, &plen);
	if (rc2)
		return rc ? rc : rc2;
	if (type == KBOOT_ERROR)
		return read_error(fd, plen, deadline, "rank 0");
	if (rc)
		return rc;
	if (type != KBOOT_GATHER || plen != 4 + total) {
		KLOG_ERR("boot: allgather: rank 0 sent %u bytes, expected %zu", plen, 4 + total);
		return -EPROTO;
	}
	if ((rc = recv_all(fd, h, 4, deadline)))
		return rc;
	if (kn_load_be32(h) != b->seq) {
		KLOG_ERR("boot: allgather: rank 0 is at collective %u, this rank at %u",
			 kn_load_be32(h), b->seq);
		return -EPROTO;
	}
	return total ? recv_all(fd, out, total, deadline) : 0;
}

void kboot_tcp_close(kinet_boot *b)
{
	if (!b->fds)
		return;
	for (int r = 0; r < b->size; r++)
		if (b->fds[r] >= 0)
			close(b->fds[r]);
	free(b->fds);
	b->fds = NULL;
}

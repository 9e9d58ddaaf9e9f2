/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcp.c - the TCP bootstrap: rank 0 listens, the others connect (a star
 * through rank 0), a challenge-response on the job secret at join, and
 * allgather over the star. The wire format is described in boot_int.h;
 * rank 0's side of joining, where strangers may knock, is in join.c.
 *
 * Every socket is non-blocking and every wait is a poll() bounded by the
 * deadline of the call, so nothing blocks longer than the timeout.
 */
#include <errno.h>
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

#define ERROR_SEND_MS 200 /* bound on best-effort error notices */
#define RETRY_MS 20       /* pause before a rank tries rank 0 again */

int64_t kboot_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int kboot_remaining_ms(int64_t deadline)
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
		int n = poll(&p, 1, kboot_remaining_ms(deadline));
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

int kboot_send_msg(int fd, uint16_t type, const void *payload, uint32_t len, int64_t deadline)
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

int kboot_send_now(int fd, uint16_t type, const void *payload, uint32_t len)
{
	uint8_t buf[KBOOT_HDR_LEN + 256];
	if (len > 256)
		return -EMSGSIZE;
	kboot_hdr(buf, KINET_BOOT_PROTO_VERSION, type, len);
	if (len)
		memcpy(buf + KBOOT_HDR_LEN, payload, len);
	ssize_t n;
	do
		n = send(fd, buf, KBOOT_HDR_LEN + len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	return (size_t)n == KBOOT_HDR_LEN + len ? 0 : -EAGAIN;
}

/* The payload of an ERROR message; its length. */
static uint32_t error_payload(uint8_t *p, int code, const char *text)
{
	size_t tl = strlen(text);
	if (tl > KBOOT_ERRTEXT_MAX)
		tl = KBOOT_ERRTEXT_MAX;
	kn_store_be32(p, (uint32_t)code);
	memcpy(p + 4, text, tl);
	return (uint32_t)(4 + tl);
}

void kboot_send_error(int fd, int code, const char *text)
{
	uint8_t p[4 + KBOOT_ERRTEXT_MAX];
	uint32_t len = error_payload(p, code, text);
	(void)kboot_send_msg(fd, KBOOT_ERROR, p, len, kboot_now_ms() + ERROR_SEND_MS);
}

int kboot_send_error_now(int fd, int code, const char *text)
{
	uint8_t p[4 + KBOOT_ERRTEXT_MAX];
	uint32_t len = error_payload(p, code, text);
	return kboot_send_now(fd, KBOOT_ERROR, p, len);
}

void kboot_notify_all(kinet_boot *b, int code, const char *text)
{
	for (int r = 1; r < b->nfds; r++)
		if (b->fds[r] >= 0)
			kboot_send_error(b->fds[r], code, text);
}

/* Checks a received header: 0 with type and length, -EPROTO (not our
 * protocol) or -KINET_EVERSION (*peer_version set). */
int kboot_parse_hdr(const uint8_t *h, uint16_t *type, uint32_t *len, uint16_t *peer_version)
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
	if (code == EAGAIN) /* the caller tries again */
		KLOG_INFO("boot: %s says: %s", from, (char *)p + 4);
	else
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

void kboot_set_socket_opts(int fd)
{
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* The message both sides MAC: role, nonces, rank, size, version. */
void kboot_auth_tag(const uint8_t key[16], char role, const uint8_t *ns, const uint8_t *nc,
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
				kboot_set_socket_opts(fd);
				return fd;
			}
			last = rc;
			close(fd);
		}
		if (res)
			freeaddrinfo(res);
		if (kboot_now_ms() >= deadline)
			break;
		int w = kboot_remaining_ms(deadline);
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
	rc = kboot_parse_hdr(h, type, len, &ver);
	if (rc == -KINET_EVERSION) {
		char text[120];
		snprintf(text, sizeof(text), "bootstrap protocol version %u refused: this rank "
			 "speaks version %d", ver, KINET_BOOT_PROTO_VERSION);
		KLOG_ERR("boot: rank 0 %s", text);
		kboot_send_error(fd, KINET_EVERSION, text);
	} else if (rc) {
		KLOG_ERR("boot: malformed message from rank 0 (not the kinet bootstrap protocol)");
	}
	return rc;
}

/* One attempt at joining through a connection to rank 0. *accepted is set
 * once rank 0 has accepted this rank (proving that it knows the secret). */
static int client_join(kinet_boot *b, int fd, const uint8_t key[16], int64_t deadline,
		       bool *accepted)
{
	uint16_t type;
	uint32_t len;
	int rc = client_hdr(fd, deadline, &type, &len);
	if (rc)
		return rc;
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
	kboot_auth_tag(key, 'C', ch, nc, (uint32_t)b->rank, (uint32_t)b->size,
		 resp + 8 + KBOOT_NONCE_LEN);
	if ((rc = kboot_send_msg(fd, KBOOT_RESPONSE, resp, sizeof(resp), deadline)))
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
	kboot_auth_tag(key, 'S', ch, nc, (uint32_t)b->rank, (uint32_t)b->size, want);
	if (!kboot_tag_equal(stag, want, KBOOT_TAG_LEN)) {
		KLOG_ERR("boot: the process at rank 0's address does not know the job secret");
		return -KINET_ESECRET;
	}
	*accepted = true;
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
	for (int attempt = 1;; attempt++) {
		int fd = client_connect(host, port, deadline);
		if (fd < 0)
			return fd;
		b->fds[0] = fd;
		bool accepted = false;
		rc = client_join(b, fd, key, deadline, &accepted);
		if (accepted || (rc != -ECONNRESET && rc != -EAGAIN))
			break;
		/* hung up on or told to try again before rank 0 accepted us
		 * (rank 0 made room for newer handshakes, found ours too slow,
		 * or a previous job's rank 0 is going away): try again */
		close(fd);
		b->fds[0] = -1;
		if (kboot_now_ms() + RETRY_MS >= deadline) {
			KLOG_ERR("boot: rank %d could not complete the handshake with rank 0 at "
				 "%s before the timeout (%d attempts; last: %s)", b->rank, addr,
				 attempt, kinet_strerror(rc));
			return -ETIMEDOUT;
		}
		KLOG_DBG("boot: rank %d: attempt %d at joining: %s; trying again", b->rank,
			 attempt, kinet_strerror(rc));
		sleep_ms(RETRY_MS);
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
	/* nothing in proportion to the size before the ranks are there: rank 0
	 * allocates per joined rank (join.c), the others hold one socket */
	if (b->rank) {
		b->fds = malloc(sizeof(int));
		if (!b->fds)
			return -ENOMEM;
		b->fds[0] = -1;
		b->nfds = 1;
	}
	uint8_t key[16];
	kboot_mac_key(secret, key);
	rc = b->rank == 0 ? kboot_tcp_serve(b, host, port, key, listening, arg)
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
				rc = kboot_parse_hdr(h, &type, &plen, &ver);
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
			kboot_notify_all(b, -rc, text);
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
				kboot_notify_all(b, -rc, "rank 0 could not deliver a collective");
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
	for (int r = 0; r < b->nfds; r++)
		if (b->fds[r] >= 0)
			close(b->fds[r]);
	free(b->fds);
	b->fds = NULL;
	b->nfds = 0;
}

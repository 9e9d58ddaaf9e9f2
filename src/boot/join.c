/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * join.c - rank 0's side of joining over TCP: the listener, the handshakes
 * of the connections that come in, and the ranks that joined while the job
 * is not complete yet. The messages are described in boot_int.h.
 *
 * Rank 0 listens on a port anyone may reach, so nothing a process without
 * the job secret (a stranger) can hold here may be scarce:
 *  - one epoll loop serves the listener, every handshake and every joined
 *    rank; connections are accepted as they come (non-blocking, a bounded
 *    batch per wake-up so that handshakes in progress are served between
 *    batches), and the listen backlog is as large as the system allows;
 *  - a handshake is a small record (the 52-byte response being read, the
 *    nonce, the peer's address), up to JOIN_SLOTS_MAX of them at once
 *    (fewer when the descriptor limit is low);
 *  - the whole response must arrive within KBOOT_HANDSHAKE_MS of the
 *    accept, or the connection is dropped;
 *  - when every slot is taken, a handshake older than KBOOT_GRACE_MS makes
 *    room for the next connection: the oldest of those of the source
 *    address (an IPv6 /64) that holds the most slots. While every handshake
 *    is younger than that, rank 0 accepts nothing: the connections wait in
 *    the listen backlog, first come first served, so a stranger gains
 *    nothing by reconnecting fast. Every accepted connection thus has at
 *    least KBOOT_GRACE_MS to answer (a real rank needs one round trip), and
 *    one waiting behind n others is accepted within about
 *    n * KBOOT_GRACE_MS / slots;
 *  - nothing waits on a peer: the challenge and every refusal are one
 *    non-blocking send, and a connection that cannot take it is dropped;
 *  - refusals are logged one by one for the first few, then summed up every
 *    few seconds, so a flood does not flood the log either.
 * A connection dropped for time or room is told to try again (EAGAIN); a
 * real rank does so (tcp.c), within its timeout.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include "boot/boot_int.h"

#define JOIN_SLOTS_MAX 1024   /* handshakes in progress at once, at most */
#define JOIN_SLOTS_MIN 16
#define ACCEPT_BATCH 64       /* connections accepted per wake-up */
#define SRC_BUCKETS 1024      /* per-source counters (keyed hash of the address) */
#define LOG_FIRST 8           /* refusals logged one by one */
#define LOG_SUMMARY_MS 5000   /* then a summary at most this often */
#define LISTEN_PAUSE_MS 100   /* out of descriptors with nothing to drop */
#define LISTEN_BACKLOG 4096   /* the kernel caps it at net.core.somaxconn */

enum { TAG_LISTENER = 1, TAG_HS = 2, TAG_RANK = 3 };

/* Why a connection was turned away (counted for the log). */
enum refusal {
	R_SECRET,    /* wrong job secret */
	R_MALFORMED, /* not the kinet bootstrap protocol */
	R_VERSION,   /* another protocol version */
	R_MISFIT,    /* a rank or size that does not fit the job */
	R_DUPLICATE, /* a rank that has already joined */
	R_SLOW,      /* no complete response in time */
	R_ROOM,      /* made room for a newer connection */
	R_HANGUP,    /* hung up (or could not take the challenge) */
	R_COUNT
};
static const char *const refusal_name[R_COUNT] = {
	"wrong secret", "malformed", "other version", "misfit rank", "duplicate rank",
	"too slow", "room for newer", "hung up",
};

/* A rank that joined: its socket (-1 once it left; the entry stays for its
 * return). */
struct joined_rank {
	int rank; /* 0: free entry (rank 0 never joins) */
	int fd;
};

/* A handshake in progress. */
struct hs {
	int fd;         /* -1: free slot */
	int prev, next; /* accept order, oldest first (next: free list when free) */
	uint32_t gen;   /* tells a stale epoll event of an earlier occupant */
	uint32_t src;   /* source bucket */
	int64_t since;  /* accepted at (ms) */
	size_t got;
	bool hdr_ok;
	uint8_t nonce_s[KBOOT_NONCE_LEN];
	uint8_t buf[KBOOT_HDR_LEN + KBOOT_RESPONSE_LEN];
	struct sockaddr_storage addr;
};

struct join {
	kinet_boot *b;
	const uint8_t *key;
	int ep, lfd;
	struct hs *hs;
	int cap, used, head, tail, free;
	uint16_t per_src[SRC_BUCKETS]; /* handshakes per source bucket */
	uint8_t src_key[16]; /* keys the source hash: buckets cannot be aimed at */
	/* the ranks that joined, by rank: open addressing, grown with the
	 * joins, never in proportion to the job's size (which the caller
	 * chose and which may be far more than will ever come) */
	struct joined_rank *rt;
	int rt_cap, rt_used;
	int joined;
	bool fd_warned;
	bool listen_off;           /* the listener is disarmed ... */
	int64_t listen_again;      /* ... until then (or until a slot frees) */
	/* the log of refusals */
	unsigned n_total[R_COUNT], n_since[R_COUNT];
	unsigned logged, unlogged; /* one by one; left to the summaries */
	unsigned since;            /* refusals since the last summary */
	int64_t next_summary;
};

static uint64_t tag_of(int kind, int idx, uint32_t gen)
{
	return (uint64_t)kind << 56 | (uint64_t)(uint32_t)idx << 24 | (gen & 0xffffffu);
}

/* Printable "addr:port" of a socket address. */
static void addr_name(const struct sockaddr_storage *ss, char *buf, size_t n)
{
	char h[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &a->sin_addr, h, sizeof(h));
		port = ntohs(a->sin_port);
		snprintf(buf, n, "%s:%d", h, port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof(h));
		port = ntohs(a->sin6_port);
		snprintf(buf, n, "[%s]:%d", h, port);
	} else {
		snprintf(buf, n, "?");
	}
}

/* Source bucket of an address: IPv4 (also mapped into IPv6) by address,
 * IPv6 by /64, the usual share of one host. */
static uint32_t source_of(const struct join *j, const struct sockaddr_storage *ss)
{
	uint8_t k[9] = {0};
	if (ss->ss_family == AF_INET) {
		k[0] = 4;
		memcpy(k + 1, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const uint8_t *a = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (!memcmp(a, mapped, 12)) {
			k[0] = 4;
			memcpy(k + 1, a + 12, 4);
		} else {
			k[0] = 6;
			memcpy(k + 1, a, 8);
		}
	}
	return (uint32_t)(kboot_siphash24(j->src_key, k, sizeof(k)) % SRC_BUCKETS);
}

/* ---- the log of refusals --------------------------------------------------------- */

static void summarize(struct join *j, bool final)
{
	char text[400];
	size_t off = 0;
	for (int r = 0; r < R_COUNT; r++) {
		unsigned v = final ? j->n_total[r] : j->n_since[r];
		if (v && off < sizeof(text))
			off += (size_t)snprintf(text + off, sizeof(text) - off, "%s%s %u",
						off ? ", " : "", refusal_name[r], v);
	}
	if (final)
		KLOG_WARN("boot: rank 0 turned away %u connections while the job joined (%s)",
			  j->logged + j->unlogged, text);
	else
		KLOG_WARN("boot: rank 0 turned away %u more connections (%s); %d of %d ranks "
			  "joined, still waiting", j->since, text, j->joined + 1, j->b->size);
	memset(j->n_since, 0, sizeof(j->n_since));
	j->since = 0;
}

/* Counts a refusal; logs it while few have been, else leaves it to the
 * summaries. */
static void note(struct join *j, enum refusal why, const struct sockaddr_storage *from,
		 const char *text)
{
	j->n_total[why]++;
	if (j->logged < LOG_FIRST) {
		char peer[80];
		addr_name(from, peer, sizeof(peer));
		j->logged++;
		if (why == R_HANGUP)
			KLOG_INFO("boot: connection from %s closed during the handshake", peer);
		else
			KLOG_WARN("boot: connection from %s refused: %s%s", peer, text,
				  j->logged == LOG_FIRST ? " (further refusals are summed up)"
							 : "");
		return;
	}
	j->n_since[why]++;
	j->unlogged++;
	if (!j->since++ && !j->next_summary)
		j->next_summary = kboot_now_ms() + LOG_SUMMARY_MS;
}

/* Arms or disarms the listener (disarmed, connections wait in the backlog). */
static void listener_arm(struct join *j, bool on)
{
	struct epoll_event ev = {.events = on ? EPOLLIN : 0,
				 .data.u64 = tag_of(TAG_LISTENER, 0, 0)};
	(void)epoll_ctl(j->ep, EPOLL_CTL_MOD, j->lfd, &ev);
	j->listen_off = !on;
}

/* ---- the handshake table --------------------------------------------------------- */

static void hs_unlink(struct join *j, int i)
{
	struct hs *h = &j->hs[i];
	if (h->prev >= 0)
		j->hs[h->prev].next = h->next;
	else
		j->head = h->next;
	if (h->next >= 0)
		j->hs[h->next].prev = h->prev;
	else
		j->tail = h->prev;
	j->per_src[h->src]--;
	j->used--;
	h->fd = -1;
	h->gen++;
	h->prev = -1;
	h->next = j->free;
	j->free = i;
	if (j->listen_off)
		listener_arm(j, true);
}

/* Turns a handshake away: tells it why when code is not 0 (one non-blocking
 * send: best effort), counts it, closes it. */
static void hs_refuse(struct join *j, int i, enum refusal why, int code, const char *text)
{
	struct hs *h = &j->hs[i];
	if (code)
		(void)kboot_send_error_now(h->fd, code, text);
	note(j, why, &h->addr, text);
	close(h->fd); /* leaves the epoll set */
	hs_unlink(j, i);
}

/* The handshake to drop for a newcomer when every slot is taken: among
 * those older than the grace, the oldest of the source that holds the most
 * slots; -1 when all are younger. */
static int pick_victim(const struct join *j, int64_t now)
{
	int victim = -1;
	for (int i = j->head; i >= 0 && now - j->hs[i].since >= KBOOT_GRACE_MS; i = j->hs[i].next)
		if (victim < 0 || j->per_src[j->hs[i].src] > j->per_src[j->hs[victim].src])
			victim = i;
	return victim;
}

/* Starts the handshake of a freshly accepted connection: 0, or -EIO when no
 * nonce could be drawn (fatal). */
static int hs_start(struct join *j, int fd, const struct sockaddr_storage *from)
{
	uint32_t src = source_of(j, from);
	int i = j->free;
	struct hs *h = &j->hs[i];
	j->free = h->next;
	h->fd = fd;
	h->src = src;
	h->got = 0;
	h->hdr_ok = false;
	h->addr = *from;
	h->since = kboot_now_ms();
	h->prev = j->tail;
	h->next = -1;
	if (j->tail >= 0)
		j->hs[j->tail].next = i;
	else
		j->head = i;
	j->tail = i;
	j->per_src[src]++;
	j->used++;
	if (kboot_random(h->nonce_s, KBOOT_NONCE_LEN)) {
		KLOG_ERR("boot: rank 0 cannot draw a random nonce");
		close(fd);
		hs_unlink(j, i);
		return -EIO;
	}
	kboot_set_socket_opts(fd);
	uint8_t ch[KBOOT_CHALLENGE_LEN];
	memcpy(ch, h->nonce_s, KBOOT_NONCE_LEN);
	kn_store_be32(ch + KBOOT_NONCE_LEN, (uint32_t)j->b->size);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
				 .data.u64 = tag_of(TAG_HS, i, h->gen)};
	if (kboot_send_now(fd, KBOOT_CHALLENGE, ch, sizeof(ch)) ||
	    epoll_ctl(j->ep, EPOLL_CTL_ADD, fd, &ev))
		hs_refuse(j, i, R_HANGUP, 0, "could not take the challenge");
	return 0;
}

/* ---- the joined ranks ------------------------------------------------------------ */

static uint32_t rt_slot(int rank, int cap)
{
	return ((uint32_t)rank * 2654435761u) & (uint32_t)(cap - 1);
}

/* The entry of a rank that joined (its fd may be -1: it left), or NULL. */
static struct joined_rank *rt_find(const struct join *j, int rank)
{
	if (!j->rt_cap)
		return NULL;
	for (uint32_t i = rt_slot(rank, j->rt_cap);; i = (i + 1) & (uint32_t)(j->rt_cap - 1)) {
		if (j->rt[i].rank == rank)
			return &j->rt[i];
		if (!j->rt[i].rank)
			return NULL;
	}
}

/* The entry of rank, added (fd -1) if new: NULL when out of memory. */
static struct joined_rank *rt_get(struct join *j, int rank)
{
	struct joined_rank *e = rt_find(j, rank);
	if (e)
		return e;
	if (2 * (j->rt_used + 1) > j->rt_cap) {
		int cap = j->rt_cap ? 2 * j->rt_cap : 16;
		struct joined_rank *t = calloc((size_t)cap, sizeof(*t));
		if (!t) {
			KLOG_ERR("boot: rank 0 is out of memory for the table of %d joined ranks",
				 j->rt_used + 1);
			return NULL;
		}
		for (int k = 0; k < j->rt_cap; k++) {
			if (!j->rt[k].rank)
				continue;
			uint32_t i = rt_slot(j->rt[k].rank, cap);
			while (t[i].rank)
				i = (i + 1) & (uint32_t)(cap - 1);
			t[i] = j->rt[k];
		}
		free(j->rt);
		j->rt = t;
		j->rt_cap = cap;
	}
	uint32_t i = rt_slot(rank, j->rt_cap);
	while (j->rt[i].rank)
		i = (i + 1) & (uint32_t)(j->rt_cap - 1);
	j->rt[i].rank = rank;
	j->rt[i].fd = -1;
	j->rt_used++;
	return &j->rt[i];
}

/* ---- a complete response --------------------------------------------------------- */

/* True while a joined rank's connection is open and silent (as it must be
 * until READY). */
static bool rank_alive(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

static void rank_left(struct join *j, struct joined_rank *e, const char *why)
{
	KLOG_WARN("boot: rank %d %s before the job was complete; its place is open again",
		  e->rank, why);
	close(e->fd);
	e->fd = -1;
	j->joined--;
}

static void hs_response(struct join *j, int i)
{
	struct hs *h = &j->hs[i];
	kinet_boot *b = j->b;
	const uint8_t *r = h->buf + KBOOT_HDR_LEN;
	uint32_t rank = kn_load_be32(r), size = kn_load_be32(r + 4);
	const uint8_t *nc = r + 8, *tag = r + 8 + KBOOT_NONCE_LEN;
	uint8_t want[KBOOT_TAG_LEN];
	char text[160];
	kboot_auth_tag(j->key, 'C', h->nonce_s, nc, rank, size, want);
	if (!kboot_tag_equal(want, tag, KBOOT_TAG_LEN)) {
		hs_refuse(j, i, R_SECRET, KINET_ESECRET, "wrong job secret");
		return;
	}
	if (size != (uint32_t)b->size || rank == 0 || rank >= (uint32_t)b->size) {
		snprintf(text, sizeof(text), "rank %u of %u does not fit this job of %d processes",
			 rank, size, b->size);
		hs_refuse(j, i, R_MISFIT, EINVAL, text);
		return;
	}
	struct joined_rank *e = rt_get(j, (int)rank);
	if (!e) {
		hs_refuse(j, i, R_ROOM, ENOMEM, "rank 0 is out of memory");
		return;
	}
	if (e->fd >= 0) {
		/* the same rank again: a restarted process whose first connection
		 * is gone takes its place; while that one is open, refused */
		if (rank_alive(e->fd)) {
			snprintf(text, sizeof(text), "rank %u has already joined", rank);
			hs_refuse(j, i, R_DUPLICATE, EEXIST, text);
			return;
		}
		rank_left(j, e, "reconnected: its earlier connection is gone");
	}
	uint8_t stag[KBOOT_TAG_LEN];
	kboot_auth_tag(j->key, 'S', h->nonce_s, nc, rank, size, stag);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
				 .data.u64 = tag_of(TAG_RANK, (int)rank, 0)};
	if (kboot_send_now(h->fd, KBOOT_ACCEPT, stag, sizeof(stag)) ||
	    epoll_ctl(j->ep, EPOLL_CTL_MOD, h->fd, &ev)) {
		char peer[80];
		addr_name(&h->addr, peer, sizeof(peer));
		KLOG_WARN("boot: rank %u (%s) went away during the handshake", rank, peer);
		close(h->fd);
		hs_unlink(j, i);
		return;
	}
	char peer[80];
	addr_name(&h->addr, peer, sizeof(peer));
	KLOG_DBG("boot: rank %u joined from %s", rank, peer);
	e->fd = h->fd;
	hs_unlink(j, i); /* the descriptor now belongs to the rank */
	j->joined++;
}

/* Reads what a handshake has sent; checks the header as soon as it is in
 * and the response once complete. */
static void hs_input(struct join *j, int i)
{
	struct hs *h = &j->hs[i];
	ssize_t n = recv(h->fd, h->buf + h->got, sizeof(h->buf) - h->got, 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		hs_refuse(j, i, R_HANGUP, 0, "closed during the handshake");
		return;
	}
	h->got += (size_t)n;
	if (!h->hdr_ok && h->got >= KBOOT_HDR_LEN) {
		uint16_t type = 0, ver = 0;
		uint32_t len = 0;
		int rc = kboot_parse_hdr(h->buf, &type, &len, &ver);
		char text[120];
		if (rc == -KINET_EVERSION) {
			snprintf(text, sizeof(text),
				 "bootstrap protocol version %u refused: rank 0 speaks version %d",
				 ver, KINET_BOOT_PROTO_VERSION);
			hs_refuse(j, i, R_VERSION, KINET_EVERSION, text);
			return;
		}
		if (rc || type != KBOOT_RESPONSE || len != KBOOT_RESPONSE_LEN) {
			hs_refuse(j, i, R_MALFORMED, EPROTO, "malformed handshake");
			return;
		}
		h->hdr_ok = true;
	}
	if (h->got == sizeof(h->buf))
		hs_response(j, i);
}

/* ---- the listener ---------------------------------------------------------------- */

/* Room for one more handshake: true when a slot is free or was made (a
 * handshake past its grace dropped, also when the descriptors ran out:
 * fd_short); false when every handshake is younger, and the listener then
 * rests until the oldest is past its grace (or a slot frees). */
static bool room_for_one(struct join *j, bool fd_short)
{
	if (j->used < j->cap && !fd_short)
		return true;
	int64_t now = kboot_now_ms();
	int v = pick_victim(j, now);
	if (v >= 0) {
		hs_refuse(j, v, R_ROOM, EAGAIN, "too many handshakes in progress: try again");
		return true;
	}
	listener_arm(j, false);
	j->listen_again = j->head >= 0 ? j->hs[j->head].since + KBOOT_GRACE_MS
				       : now + LISTEN_PAUSE_MS;
	return false;
}

/* Accepts up to a batch of connections: 0 or a fatal -errno. */
static int accept_some(struct join *j)
{
	for (int k = 0; k < ACCEPT_BATCH; k++) {
		/* a full table admits one per wake-up: the listener said that
		 * one connection waits, not more */
		if (j->used >= j->cap && (k || !room_for_one(j, false)))
			return 0;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(j->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			int rc = hs_start(j, fd, &ss);
			if (rc)
				return rc;
			continue;
		}
		int e = errno;
		switch (e) {
		case EAGAIN:
#if EWOULDBLOCK != EAGAIN
		case EWOULDBLOCK:
#endif
			return 0;
		case EMFILE:
		case ENFILE:
		case ENOBUFS:
		case ENOMEM:
			/* out of descriptors (or memory) before the table is full:
			 * the same rule makes room, or the listener rests */
			if (!j->fd_warned) {
				KLOG_WARN("boot: rank 0 cannot accept more connections: %s (%d "
					  "handshakes in progress)", kinet_strerror(-e), j->used);
				j->fd_warned = true;
			}
			if (!room_for_one(j, true))
				return 0;
			continue;
		case EBADF:
		case EFAULT:
		case EINVAL:
		case ENOTSOCK:
		case EOPNOTSUPP:
			KLOG_ERR("boot: rank 0 cannot accept connections: %s", kinet_strerror(-e));
			return -e;
		default:
			/* the connection failed before it was accepted (ECONNABORTED,
			 * EPROTO, network errors: accept(2) says retry), or EINTR */
			continue;
		}
	}
	return 0;
}

/* Slots for handshakes: half of the descriptors this process may open beyond
 * the job's own and a margin, within [JOIN_SLOTS_MIN, JOIN_SLOTS_MAX]. */
static int slots_for_fd_limit(int size)
{
	struct rlimit rl;
	long avail = JOIN_SLOTS_MAX * 2L;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY)
		avail = (long)rl.rlim_cur - 64 - size;
	long cap = avail / 2;
	if (cap > JOIN_SLOTS_MAX)
		cap = JOIN_SLOTS_MAX;
	if (cap < JOIN_SLOTS_MIN)
		cap = JOIN_SLOTS_MIN;
	return (int)cap;
}

/* ---- the loop -------------------------------------------------------------------- */

static int join_loop(struct join *j, int64_t deadline)
{
	kinet_boot *b = j->b;
	struct epoll_event evs[128];
	while (j->joined < b->size - 1) {
		int64_t now = kboot_now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		while (j->head >= 0 && j->hs[j->head].since + KBOOT_HANDSHAKE_MS <= now) {
			char text[80];
			snprintf(text, sizeof(text), "no complete handshake within %d ms",
				 KBOOT_HANDSHAKE_MS);
			hs_refuse(j, j->head, R_SLOW, EAGAIN, text);
		}
		if (j->listen_off && now >= j->listen_again)
			listener_arm(j, true);
		if (j->since && now >= j->next_summary) {
			summarize(j, false);
			j->next_summary = now + LOG_SUMMARY_MS;
		}
		int64_t wake = deadline;
		if (j->head >= 0 && j->hs[j->head].since + KBOOT_HANDSHAKE_MS < wake)
			wake = j->hs[j->head].since + KBOOT_HANDSHAKE_MS;
		if (j->listen_off && j->listen_again < wake)
			wake = j->listen_again;
		int n = epoll_wait(j->ep, evs, (int)(sizeof(evs) / sizeof(evs[0])),
				   kboot_remaining_ms(wake) + 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int rc = -errno;
			KLOG_ERR("boot: rank 0: epoll_wait: %s", kinet_strerror(rc));
			return rc;
		}
		for (int e = 0; e < n; e++) {
			uint64_t t = evs[e].data.u64;
			int kind = (int)(t >> 56), idx = (int)((t >> 24) & 0xffffffffu);
			if (kind == TAG_LISTENER) {
				int rc = accept_some(j);
				if (rc)
					return rc;
			} else if (kind == TAG_HS) {
				struct hs *h = &j->hs[idx];
				if (h->fd >= 0 && (h->gen & 0xffffffu) == (t & 0xffffffu))
					hs_input(j, idx);
			} else if (kind == TAG_RANK) {
				/* joined ranks stay silent until READY: input means
				 * they left (a stale event of a replaced one is
				 * checked first) */
				struct joined_rank *r = rt_find(j, idx);
				if (r && r->fd >= 0 && !rank_alive(r->fd))
					rank_left(j, r, "left");
			}
		}
	}
	return 0;
}

/* Listens at host:port; the socket, or -errno. Sets b->addr. */
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
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, LISTEN_BACKLOG))
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		KLOG_ERR("boot: rank 0 cannot listen on %s:%s: %s", host, port,
			 kinet_strerror(err));
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

int kboot_tcp_serve(kinet_boot *b, const char *host, const char *port, const uint8_t key[16],
		    void (*listening)(const char *, void *), void *arg)
{
	int64_t deadline = kboot_now_ms() + b->timeout_ms;
	struct join *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->b = b;
	j->key = key;
	j->ep = j->lfd = -1;
	j->head = j->tail = -1;
	j->cap = slots_for_fd_limit(b->size);
	j->hs = calloc((size_t)j->cap, sizeof(*j->hs));
	int rc = j->hs ? 0 : -ENOMEM;
	if (!rc && kboot_random(j->src_key, sizeof(j->src_key)))
		rc = -EIO;
	for (int i = 0; !rc && i < j->cap; i++) {
		j->hs[i].fd = -1;
		j->hs[i].next = i + 1 < j->cap ? i + 1 : -1;
	}
	j->free = 0;
	if (!rc && (j->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		rc = -errno;
		KLOG_ERR("boot: rank 0: epoll_create1: %s", kinet_strerror(rc));
	}
	if (!rc && (j->lfd = do_listen(b, host, port)) < 0)
		rc = j->lfd;
	if (!rc) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag_of(TAG_LISTENER, 0, 0)};
		if (epoll_ctl(j->ep, EPOLL_CTL_ADD, j->lfd, &ev))
			rc = -errno;
	}
	if (!rc) {
		KLOG_INFO("boot: rank 0 listening on %s for %d ranks", b->addr, b->size - 1);
		if (listening)
			listening(b->addr, arg);
		rc = join_loop(j, deadline);
	}
	/* strangers still in the handshake are closed with the listener: later
	 * connections are refused by the system */
	if (j->lfd >= 0)
		close(j->lfd);
	while (j->hs && j->head >= 0) {
		close(j->hs[j->head].fd);
		hs_unlink(j, j->head);
	}
	if (j->ep >= 0)
		close(j->ep);
	if (j->unlogged)
		summarize(j, true);
	if (rc == -ETIMEDOUT) {
		char missing[100] = "";
		size_t off = 0;
		/* at most the joined ranks and a few missing ones are looked at */
		for (int r = 1; r < b->size && off < sizeof(missing) - 12; r++) {
			const struct joined_rank *e = rt_find(j, r);
			if (!e || e->fd < 0)
				off += (size_t)snprintf(missing + off, sizeof(missing) - off,
							" %d", r);
		}
		char text[KBOOT_ERRTEXT_MAX + 64];
		snprintf(text, sizeof(text), "rank 0 timed out: %d of %d ranks joined; missing:%s",
			 j->joined + 1, b->size, missing);
		KLOG_ERR("boot: %s", text);
		for (int k = 0; k < j->rt_cap; k++)
			if (j->rt[k].rank && j->rt[k].fd >= 0)
				kboot_send_error(j->rt[k].fd, ETIMEDOUT, text);
	}
	/* every rank is there: now one socket per rank, in rank order */
	if (!rc) {
		b->fds = malloc(sizeof(int) * (size_t)b->size);
		if (b->fds) {
			b->nfds = b->size;
			b->fds[0] = -1;
			for (int r = 1; r < b->size; r++)
				b->fds[r] = rt_find(j, r)->fd;
		} else {
			KLOG_ERR("boot: rank 0 is out of memory for the sockets of %d ranks",
				 b->size);
			rc = -ENOMEM;
			for (int k = 0; k < j->rt_cap; k++)
				if (j->rt[k].rank && j->rt[k].fd >= 0)
					kboot_send_error(j->rt[k].fd, ENOMEM,
							 "rank 0 is out of memory");
		}
	}
	if (rc)
		for (int k = 0; k < j->rt_cap; k++)
			if (j->rt[k].rank && j->rt[k].fd >= 0)
				close(j->rt[k].fd);
	free(j->rt);
	free(j->hs);
	free(j);
	if (rc)
		return rc;
	for (int r = 1; r < b->size && !rc; r++)
		rc = kboot_send_msg(b->fds[r], KBOOT_READY, NULL, 0, deadline);
	if (rc) {
		KLOG_ERR("boot: a rank went away before the job started: %s", kinet_strerror(rc));
		kboot_notify_all(b, ECONNRESET, "a rank went away before the job started");
	}
	return rc;
}

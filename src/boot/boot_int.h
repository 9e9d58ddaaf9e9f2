/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * boot_int.h - bootstrap internals: the object, the TCP wire format and the
 * keyed MAC used by the challenge-response.
 *
 * TCP wire format (all integers big-endian). Every message starts with a
 * 12-byte header whose first 6 bytes never change between protocol versions,
 * so that a peer of another version is recognised and refused clearly:
 *
 *   u32 magic 'KNBT' | u16 version | u16 type | u32 payload length
 *
 * Join (rank 0 = server, others = clients):
 *   server -> CHALLENGE  nonce_s[16] u32 size
 *   client -> RESPONSE   u32 rank u32 size nonce_c[16] tag_c[16]
 *   server -> ACCEPT     tag_s[16]              (or ERROR, and it hangs up)
 *   server -> READY      (empty) once every rank has joined
 * An ERROR with code EAGAIN before ACCEPT (the handshake was too slow, or
 * dropped to make room: join.c) asks the client to connect again.
 * tag_c = MAC(k, 'C' nonce_s nonce_c rank size version),
 * tag_s = MAC(k, 'S' nonce_s nonce_c rank size version), k derived from the
 * job secret: both sides prove they know it, neither ever sends it.
 *
 * Collectives (allgather; barrier is an allgather of 0 bytes):
 *   client -> DATA    u32 seq, len bytes
 *   server -> GATHER  u32 seq, size*len bytes in rank order
 * ERROR (either way): i32 code (positive errno or KINET_E*), text.
 */
#ifndef KINET_BOOT_INT_H
#define KINET_BOOT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <kinet/boot.h>
#include <kinet/prm.h> /* byte order: kn_load_be32, kn_store_be32, ... */
#include "core/internal.h"

#define KBOOT_MAGIC 0x4B4E4254u /* "KNBT" */
#define KBOOT_HDR_LEN 12
#define KBOOT_NONCE_LEN 16
#define KBOOT_TAG_LEN 16
#define KBOOT_ERRTEXT_MAX 200
/* Largest allgather result over TCP. */
#define KBOOT_MAX_GATHER (1u << 30)

enum kboot_type {
	KBOOT_CHALLENGE = 1,
	KBOOT_RESPONSE = 2,
	KBOOT_ACCEPT = 3,
	KBOOT_READY = 4,
	KBOOT_ERROR = 5,
	KBOOT_DATA = 6,
	KBOOT_GATHER = 7,
};

#define KBOOT_CHALLENGE_LEN (KBOOT_NONCE_LEN + 4)
#define KBOOT_RESPONSE_LEN (8 + KBOOT_NONCE_LEN + KBOOT_TAG_LEN)
#define KBOOT_ACCEPT_LEN KBOOT_TAG_LEN

/* KBOOT_MPI and KBOOT_PMIX: a launcher module's table (mpi_module.h) */
enum kboot_transport { KBOOT_SINGLE, KBOOT_TCP, KBOOT_MPI, KBOOT_PMIX };

struct kboot_mpi_ops; /* mpi_module.h */

struct kinet_boot {
	int transport; /* enum kboot_transport */
	int rank, size;
	int timeout_ms;
	int err;      /* sticky error after a failed collective (0: healthy) */
	uint32_t seq; /* collectives done */
	char addr[300];
	/* tcp: nfds sockets. Rank 0, once every rank has joined, one per rank
	 * (fds[0] unused; while the job joins they are in join.c's table of
	 * joined ranks, so nothing is allocated for ranks that never come);
	 * the others one, fds[0], the connection to rank 0 */
	int *fds;
	int nfds;
	/* mpi, pmix: the module's table and handle (mpi_module.h) */
	const struct kboot_mpi_ops *mpi_ops;
	void *mpi;
};

/* ---- MAC (mac.c) ------------------------------------------------------------ */
/* SipHash-2-4 (Aumasson & Bernstein), 64-bit output, 128-bit key. */
uint64_t kboot_siphash24(const uint8_t key[16], const void *msg, size_t len);
/* Job key from the secret string. */
void kboot_mac_key(const char *secret, uint8_t key[16]);
/* 128-bit keyed tag of msg. */
void kboot_mac(const uint8_t key[16], const void *msg, size_t len, uint8_t tag[KBOOT_TAG_LEN]);
/* Constant-time comparison: true when equal. */
bool kboot_tag_equal(const uint8_t *a, const uint8_t *b, size_t len);
/* n random bytes from the kernel; 0 or -errno. */
int kboot_random(void *buf, size_t n);

/* ---- messages ------------------------------------------------------------------ */
/* Fills a 12-byte header (big-endian, kn_store_be* of kinet/prm.h). */
static inline void kboot_hdr(uint8_t *h, uint16_t version, uint16_t type, uint32_t len)
{
	kn_store_be32(h, KBOOT_MAGIC);
	kn_store_be16(h + 4, version);
	kn_store_be16(h + 6, type);
	kn_store_be32(h + 8, len);
}

/* ---- time ---------------------------------------------------------------------- */
/* Monotonic milliseconds. */
int64_t kboot_now_ms(void);
/* Milliseconds left until deadline (0 when past), capped for poll(). */
int kboot_remaining_ms(int64_t deadline);

/* ---- TCP framing (tcp.c) ------------------------------------------------------------ */
/* A message, bounded by deadline: 0 or -errno (-ETIMEDOUT, -ECONNRESET). */
int kboot_send_msg(int fd, uint16_t type, const void *payload, uint32_t len, int64_t deadline);
/* A small message (payload <= 256 bytes) in one non-blocking send: 0 when
 * all of it went, -EAGAIN when the socket could not take it whole, -errno. */
int kboot_send_now(int fd, uint16_t type, const void *payload, uint32_t len);
/* ERROR messages (code: positive errno or KINET_E*): best effort, bounded
 * by a short wait; and in one non-blocking send. */
void kboot_send_error(int fd, int code, const char *text);
int kboot_send_error_now(int fd, int code, const char *text);
/* Tells every joined rank (rank 0 only). */
void kboot_notify_all(kinet_boot *b, int code, const char *text);
/* Checks a received header: 0 with type and length, -EPROTO (not our
 * protocol) or -KINET_EVERSION (*peer_version set). */
int kboot_parse_hdr(const uint8_t *h, uint16_t *type, uint32_t *len, uint16_t *peer_version);
/* The handshake tag: role 'C' (client) or 'S' (server). */
void kboot_auth_tag(const uint8_t key[16], char role, const uint8_t *ns, const uint8_t *nc,
		    uint32_t rank, uint32_t size, uint8_t tag[KBOOT_TAG_LEN]);
void kboot_set_socket_opts(int fd);

/* ---- transports ------------------------------------------------------------------- */
/* A connection must deliver its whole RESPONSE within this of its accept,
 * and is never dropped for a newer one before KBOOT_GRACE_MS (join.c). */
#define KBOOT_HANDSHAKE_MS 2000
#define KBOOT_GRACE_MS 250

int kboot_tcp_init(kinet_boot *b, const char *addr, const char *secret,
		   void (*listening)(const char *, void *), void *arg);
/* Rank 0's join (join.c): listens, admits the ranks, sends READY. */
int kboot_tcp_serve(kinet_boot *b, const char *host, const char *port, const uint8_t key[16],
		    void (*listening)(const char *, void *), void *arg);
int kboot_tcp_allgather(kinet_boot *b, const void *mine, void *all, size_t len);
void kboot_tcp_close(kinet_boot *b);

#endif

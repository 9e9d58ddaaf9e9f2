/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mac.c - the keyed MAC of the bootstrap's challenge-response.
 *
 * No library that libkinet already links offers a keyed hash, and the
 * bootstrap must not add a hard dependency, so this is SipHash-2-4 written
 * from its published description (J.-P. Aumasson, D. J. Bernstein, "SipHash:
 * a fast short-input PRF", 2012), a PRF designed for short messages under a
 * 128-bit secret key. The job key is derived from the secret string with
 * SipHash under a fixed public key; a 128-bit tag is two SipHash outputs
 * under the job key with different domain bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "boot/boot_int.h"

static inline uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

struct sip {
	uint64_t v0, v1, v2, v3;
	uint8_t buf[8];
	size_t nbuf;
	uint64_t total;
};

static inline void sip_round(struct sip *s)
{
	s->v0 += s->v1;
	s->v1 = rotl(s->v1, 13);
	s->v1 ^= s->v0;
	s->v0 = rotl(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = rotl(s->v3, 16);
	s->v3 ^= s->v2;
	s->v0 += s->v3;
	s->v3 = rotl(s->v3, 21);
	s->v3 ^= s->v0;
	s->v2 += s->v1;
	s->v1 = rotl(s->v1, 17);
	s->v1 ^= s->v2;
	s->v2 = rotl(s->v2, 32);
}

static void sip_init(struct sip *s, const uint8_t key[16])
{
	uint64_t k0 = kn_load_le64(key), k1 = kn_load_le64(key + 8);
	s->v0 = k0 ^ 0x736f6d6570736575ull; /* "somepseudorandomlygeneratedbytes" */
	s->v1 = k1 ^ 0x646f72616e646f6dull;
	s->v2 = k0 ^ 0x6c7967656e657261ull;
	s->v3 = k1 ^ 0x7465646279746573ull;
	s->nbuf = 0;
	s->total = 0;
}

static void sip_block(struct sip *s, uint64_t m)
{
	s->v3 ^= m;
	sip_round(s); /* c = 2 compression rounds */
	sip_round(s);
	s->v0 ^= m;
}

static void sip_update(struct sip *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	s->total += len;
	while (len) {
		size_t n = 8 - s->nbuf;
		if (n > len)
			n = len;
		memcpy(s->buf + s->nbuf, p, n);
		s->nbuf += n;
		p += n;
		len -= n;
		if (s->nbuf == 8) {
			sip_block(s, kn_load_le64(s->buf));
			s->nbuf = 0;
		}
	}
}

static uint64_t sip_final(struct sip *s)
{
	/* last block: the remaining bytes, the length mod 256 in the top byte */
	uint64_t b = (s->total & 0xff) << 56;
	for (size_t i = 0; i < s->nbuf; i++)
		b |= (uint64_t)s->buf[i] << (8 * i);
	sip_block(s, b);
	s->v2 ^= 0xff;
	for (int i = 0; i < 4; i++) /* d = 4 finalization rounds */
		sip_round(s);
	return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t kboot_siphash24(const uint8_t key[16], const void *msg, size_t len)
{
	struct sip s;
	sip_init(&s, key);
	sip_update(&s, msg, len);
	return sip_final(&s);
}

/* Two domain-separated SipHash outputs of (prefix, msg) under key. */
static void sip128(const uint8_t key[16], uint8_t domain, const void *msg, size_t len,
		   uint8_t out[16])
{
	for (int half = 0; half < 2; half++) {
		struct sip s;
		uint8_t d[2] = {domain, (uint8_t)(half + 1)};
		sip_init(&s, key);
		sip_update(&s, d, sizeof(d));
		sip_update(&s, msg, len);
		kn_store_le64(out + 8 * half, sip_final(&s));
	}
}

void kboot_mac_key(const char *secret, uint8_t key[16])
{
	static const uint8_t kdf_key[16] = {'k', 'i', 'n', 'e', 't', '-', 'b', 'o',
					    'o', 't', '-', 'k', 'd', 'f', '-', '1'};
	if (!secret)
		secret = "";
	sip128(kdf_key, 'K', secret, strlen(secret), key);
}

void kboot_mac(const uint8_t key[16], const void *msg, size_t len, uint8_t tag[KBOOT_TAG_LEN])
{
	sip128(key, 'T', msg, len, tag);
}

bool kboot_tag_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	volatile uint8_t diff = 0;
	for (size_t i = 0; i < len; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

int kboot_random(void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		p += r;
		n -= (size_t)r;
	}
	if (!n)
		return 0;
	/* kernels without getrandom(2) */
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			close(fd);
			return -EIO;
		}
		p += r;
		n -= (size_t)r;
	}
	close(fd);
	return 0;
}

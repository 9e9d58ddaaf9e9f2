/* SPDX-License-Identifier: BSD-3-Clause */
#include <string.h>
#include "ethutil.h"
#include "testutil.h"

static uint32_t sum16(const uint8_t *p, uint32_t n, uint32_t s)
{
	for (uint32_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

uint16_t te_csum(const uint8_t *p, uint32_t n, uint32_t start)
{
	uint32_t s = sum16(p, n, start);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

uint32_t te_frame(uint8_t *f, const struct te_flow *fl, uint32_t plen, uint64_t seed, int bad_l3,
		  int bad_l4)
{
	memcpy(f, fl->dmac, 6);
	memcpy(f + 6, fl->smac, 6);
	put16(f + 12, fl->v6 ? 0x86dd : 0x0800);
	uint8_t *ip = f + 14;
	uint32_t l4len = (fl->proto == 6 ? 20u : 8u) + plen;
	uint8_t *l4;
	uint32_t ps;
	if (!fl->v6) {
		memset(ip, 0, 20);
		ip[0] = 0x45;
		put16(ip + 2, (uint16_t)(20 + l4len));
		put16(ip + 4, (uint16_t)seed);
		ip[8] = 64;
		ip[9] = fl->proto;
		memcpy(ip + 12, fl->sip, 4);
		memcpy(ip + 16, fl->dip, 4);
		put16(ip + 10, (uint16_t)(te_csum(ip, 20, 0) + (bad_l3 ? 1 : 0)));
		l4 = ip + 20;
		ps = sum16(ip + 12, 8, 0);
	} else {
		memset(ip, 0, 40);
		ip[0] = 0x60;
		put16(ip + 4, (uint16_t)l4len);
		ip[6] = fl->proto;
		ip[7] = 64;
		memcpy(ip + 8, fl->sip, 16);
		memcpy(ip + 24, fl->dip, 16);
		l4 = ip + 40;
		ps = sum16(ip + 8, 32, 0);
	}
	uint8_t pl[4] = {0, fl->proto, (uint8_t)(l4len >> 8), (uint8_t)l4len};
	ps = sum16(pl, 4, ps);
	put16(l4, fl->sport);
	put16(l4 + 2, fl->dport);
	uint32_t hl;
	if (fl->proto == 6) {
		memset(l4 + 4, 0, 16);
		put16(l4 + 4, 0x1234);
		l4[12] = 5 << 4;
		l4[13] = 0x18; /* PSH ACK */
		put16(l4 + 14, 512);
		hl = 20;
	} else {
		put16(l4 + 4, (uint16_t)l4len);
		put16(l4 + 6, 0);
		hl = 8;
	}
	tu_fill_random(l4 + hl, plen, seed);
	uint16_t c = te_csum(l4, l4len, ps);
	if (fl->proto == 17 && c == 0)
		c = 0xffff;
	if (bad_l4)
		c = (uint16_t)(c + 1);
	put16(l4 + (fl->proto == 6 ? 16 : 6), c);
	return (uint32_t)(l4 + l4len - f);
}

uint32_t te_raw_frame(uint8_t *f, const uint8_t dmac[6], uint16_t et, uint32_t plen,
		      uint64_t seed)
{
	memcpy(f, dmac, 6);
	static const uint8_t smac[6] = {0x02, 0, 0, 0, 0, 0x99};
	memcpy(f + 6, smac, 6);
	put16(f + 12, et);
	tu_fill_random(f + 14, plen, seed);
	return 14 + plen;
}

static const uint8_t key[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

/* Bit i of the key (0: the most significant bit of key[0]). */
static int kbit(uint32_t i)
{
	return i / 8 < 40 ? (key[i / 8] >> (7 - i % 8)) & 1 : 0;
}

uint32_t te_rss_hash(const struct te_flow *fl)
{
	uint8_t in[36];
	uint32_t n = 0, a = fl->v6 ? 16 : 4;
	memcpy(in, fl->sip, a);
	memcpy(in + a, fl->dip, a);
	n = 2 * a;
	put16(in + n, fl->sport);
	put16(in + n + 2, fl->dport);
	n += 4;
	uint32_t h = 0;
	for (uint32_t i = 0; i < n * 8; i++)
		if ((in[i / 8] >> (7 - i % 8)) & 1) {
			uint32_t w = 0;
			for (uint32_t j = 0; j < 32; j++)
				w = w << 1 | (uint32_t)kbit(i + j);
			h ^= w;
		}
	return h;
}

void te_flow_v4(struct te_flow *fl, uint8_t a, uint8_t b, uint16_t sport, uint16_t dport)
{
	memset(fl, 0, sizeof(*fl));
	static const uint8_t sm[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
	static const uint8_t dm[6] = {0x02, 0x6b, 0x6e, 0x00, 0x00, 0x01};
	memcpy(fl->smac, sm, 6);
	memcpy(fl->dmac, dm, 6);
	fl->sip[0] = 10;
	fl->sip[1] = 9;
	fl->sip[2] = a;
	fl->sip[3] = 1;
	fl->dip[0] = 10;
	fl->dip[1] = 9;
	fl->dip[2] = b;
	fl->dip[3] = 2;
	fl->sport = sport;
	fl->dport = dport;
	fl->proto = 17;
}

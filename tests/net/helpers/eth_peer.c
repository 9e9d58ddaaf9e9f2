/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_peer - the other end of the Ethernet tests, in the peer's network
 * namespace, with plain sockets (no kinet):
 *
 *   eth_peer csum-off IFNAME
 *       the interface computes its own TCP/UDP checksums (a veth otherwise
 *       leaves them to the receiver, which AF_XDP does not do)
 *   eth_peer csum-on IFNAME
 *       the interface leaves them to offload again (a veth's default)
 *   eth_peer echo-client IP PORT N MIN MAX
 *       N datagrams of MIN..MAX random bytes, each answered byte for byte
 *       within 2 s; prints ok=N rtt_min_us= rtt_avg_us= rtt_p50_us= rtt_p99_us=
 *   eth_peer sink PORT N FLOWS SPORT
 *       receives N datagrams of eth_pktgen (flows: source ports SPORT ..),
 *       checks every payload (flow, sequence, pattern), that each flow got
 *       its share with every sequence number once and in order; prints the
 *       counts per flow
 *   eth_peer send IP PORT N SIZE SPORT
 *       N datagrams of SIZE random bytes from source port SPORT
 *   eth_peer echo-server PORT N
 *       a plain socket echo server: answers N datagrams, then exits
 *   eth_peer raw IFNAME DSTMAC KIND N
 *       N frames written with AF_PACKET, KIND: badip (IPv4 header checksum
 *       wrong), badudp (UDP checksum wrong), ethertype (0x88b5), udp (good);
 *       each UDP frame to 10.0.0.0/8 port 4242 carries its number
 *
 * Exit status 0 when everything checked out; what went wrong on stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/ethtool.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint8_t rnd8(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint8_t)rng;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int udp_socket(unsigned port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	int big = 8 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	if (port) {
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			perror("bind");
			exit(1);
		}
	}
	return fd;
}

static int csum_set(const char *ifn, unsigned on)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct ethtool_value ev = {.cmd = ETHTOOL_STXCSUM, .data = on};
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifn);
	ifr.ifr_data = (void *)&ev;
	if (ioctl(fd, SIOCETHTOOL, &ifr)) {
		perror("ETHTOOL_STXCSUM");
		return 1;
	}
	close(fd);
	return 0;
}

static int cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int echo_client(const char *ip, unsigned port, int n, int min, int max)
{
	int fd = udp_socket(0);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, ip, &to.sin_addr);
	uint8_t out[2048], in[2048];
	uint64_t sum = 0, mn = ~0ull;
	uint64_t *all = calloc((size_t)(n > 0 ? n : 1), sizeof(uint64_t));
	for (int i = 0; i < n; i++) {
		int len = min + (max > min ? (int)(rnd8() | rnd8() << 8) % (max - min + 1) : 0);
		for (int j = 0; j < len; j++)
			out[j] = rnd8();
		uint64_t t0 = now_us();
		sendto(fd, out, (size_t)len, 0, (struct sockaddr *)&to, sizeof(to));
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 2000) != 1) {
			fprintf(stderr, "echo-client: datagram %d not answered\n", i);
			return 1;
		}
		ssize_t k = recv(fd, in, sizeof(in), 0);
		uint64_t dt = now_us() - t0;
		if (k != len || memcmp(in, out, (size_t)len)) {
			fprintf(stderr, "echo-client: datagram %d: %zd bytes back, %d sent, %s\n",
				i, k, len, k == len ? "contents differ" : "length differs");
			return 1;
		}
		sum += dt;
		mn = dt < mn ? dt : mn;
		all[i] = dt;
	}
	qsort(all, (size_t)n, sizeof(uint64_t), cmp64);
	printf("ok=%d rtt_min_us=%llu rtt_avg_us=%llu rtt_p50_us=%llu rtt_p99_us=%llu\n", n,
	       (unsigned long long)mn, (unsigned long long)(n ? sum / (uint64_t)n : 0),
	       (unsigned long long)(n ? all[n / 2] : 0),
	       (unsigned long long)(n ? all[(size_t)n * 99 / 100] : 0));
	free(all);
	return 0;
}

static int sink(unsigned port, int n, int flows, unsigned sport)
{
	int fd = udp_socket(port);
	printf("ready\n");
	fflush(stdout);
	uint64_t *next = calloc((size_t)flows, sizeof(uint64_t));
	if (!next)
		return 1;
	uint8_t d[4096];
	int got = 0, bad = 0;
	while (got < n) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 5000) != 1)
			break;
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t k = recvfrom(fd, d, sizeof(d), 0, (struct sockaddr *)&from, &fl);
		if (k < 12) {
			bad++;
			continue;
		}
		uint32_t flow = (uint32_t)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3];
		uint64_t seq = 0;
		for (int b = 0; b < 8; b++)
			seq = seq << 8 | d[4 + b];
		int ok = flow < (uint32_t)flows && ntohs(from.sin_port) == sport + flow &&
			 seq == next[flow];
		for (ssize_t j = 12; ok && j < k; j++)
			ok = d[j] == (uint8_t)(seq * 31 + (uint64_t)j);
		if (!ok) {
			if (bad++ < 5)
				fprintf(stderr,
					"sink: datagram from port %u: flow %u seq %llu (expected "
					"%llu): wrong\n",
					ntohs(from.sin_port), flow, (unsigned long long)seq,
					flow < (uint32_t)flows ? (unsigned long long)next[flow]
							       : 0);
			if (flow < (uint32_t)flows)
				next[flow] = seq + 1;
			continue;
		}
		next[flow]++;
		got++;
	}
	printf("received=%d bad=%d", got, bad);
	for (int f = 0; f < flows; f++)
		printf(" flow%d=%llu", f, (unsigned long long)next[f]);
	printf("\n");
	free(next);
	return got == n && bad == 0 ? 0 : 1;
}

static int sendn(const char *ip, unsigned port, int n, int size, unsigned sport)
{
	int fd = udp_socket(sport);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, ip, &to.sin_addr);
	uint8_t b[2048];
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < size; j++)
			b[j] = rnd8();
		if (sendto(fd, b, (size_t)size, 0, (struct sockaddr *)&to, sizeof(to)) != size) {
			perror("sendto");
			return 1;
		}
		usleep(200);
	}
	return 0;
}

static int echo_server(unsigned port, int n)
{
	int fd = udp_socket(port);
	printf("ready\n");
	fflush(stdout);
	uint8_t b[4096];
	for (int i = 0; i < n; i++) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 20000) != 1)
			return 1;
		ssize_t k = recvfrom(fd, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
		if (k >= 0)
			sendto(fd, b, (size_t)k, 0, (struct sockaddr *)&from, fl);
	}
	return 0;
}

static uint16_t csum(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static int raw(const char *ifn, const char *dmac, const char *kind, int n)
{
	int fd = socket(AF_PACKET, SOCK_RAW, htons(0x0003));
	int idx = (int)if_nametoindex(ifn);
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_ifindex = idx, .sll_halen = 6};
	unsigned m[6];
	if (fd < 0 || !idx ||
	    sscanf(dmac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6) {
		fprintf(stderr, "raw: socket, interface or MAC\n");
		return 1;
	}
	for (int i = 0; i < 6; i++)
		sll.sll_addr[i] = (uint8_t)m[i];
	for (int i = 0; i < n; i++) {
		uint8_t f[256];
		memset(f, 0, sizeof(f));
		for (int j = 0; j < 6; j++)
			f[j] = (uint8_t)m[j];
		f[6] = 0x02, f[11] = 0x77;
		size_t len;
		if (!strcmp(kind, "ethertype")) {
			f[12] = 0x88, f[13] = 0xb5;
			for (int j = 14; j < 120; j++)
				f[j] = rnd8();
			f[14] = (uint8_t)i;
			len = 120;
		} else {
			f[12] = 0x08;
			uint8_t *ip = f + 14, *u = ip + 20;
			size_t pl = 64;
			ip[0] = 0x45, ip[8] = 64, ip[9] = 17;
			ip[2] = (uint8_t)((20 + 8 + pl) >> 8), ip[3] = (uint8_t)(20 + 8 + pl);
			ip[12] = 10, ip[15] = 2, ip[16] = 10, ip[19] = 1;
			u[0] = 0x30, u[1] = 0x39, u[2] = 0x10, u[3] = 0x92; /* 12345 -> 4242 */
			u[4] = (uint8_t)((8 + pl) >> 8), u[5] = (uint8_t)(8 + pl);
			for (size_t j = 0; j < pl; j++)
				u[8 + j] = rnd8();
			u[8] = (uint8_t)i;
			uint16_t c = csum(ip, 20, 0);
			ip[10] = (uint8_t)(c >> 8), ip[11] = (uint8_t)c;
			uint8_t ph[12] = {ip[12], ip[13], ip[14], ip[15], ip[16], ip[17],
					  ip[18], ip[19], 0,      17,     u[4],   u[5]};
			uint32_t s = 0;
			for (int j = 0; j < 12; j += 2)
				s += (uint32_t)ph[j] << 8 | ph[j + 1];
			c = csum(u, 8 + pl, s);
			u[6] = (uint8_t)(c >> 8), u[7] = (uint8_t)c;
			if (!strcmp(kind, "badip"))
				ip[11] ^= 1;
			else if (!strcmp(kind, "badudp"))
				u[7] ^= 1;
			len = 14 + 20 + 8 + pl;
		}
		if (sendto(fd, f, len, 0, (struct sockaddr *)&sll, sizeof(sll)) != (ssize_t)len) {
			perror("raw sendto");
			return 1;
		}
		usleep(500);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "csum-off"))
		return csum_set(argv[2], 0);
	if (argc >= 3 && !strcmp(argv[1], "csum-on"))
		return csum_set(argv[2], 1);
	if (argc >= 7 && !strcmp(argv[1], "echo-client"))
		return echo_client(argv[2], (unsigned)atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
				   atoi(argv[6]));
	if (argc >= 6 && !strcmp(argv[1], "sink"))
		return sink((unsigned)atoi(argv[2]), atoi(argv[3]), atoi(argv[4]),
			    (unsigned)atoi(argv[5]));
	if (argc >= 7 && !strcmp(argv[1], "send"))
		return sendn(argv[2], (unsigned)atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
			     (unsigned)atoi(argv[6]));
	if (argc >= 4 && !strcmp(argv[1], "echo-server"))
		return echo_server((unsigned)atoi(argv[2]), atoi(argv[3]));
	if (argc >= 6 && !strcmp(argv[1], "raw"))
		return raw(argv[2], argv[3], argv[4], atoi(argv[5]));
	fprintf(stderr, "usage: eth_peer csum-off|csum-on|echo-client|sink|send|raw ...\n");
	return 2;
}

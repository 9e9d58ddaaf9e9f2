/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xsk_base - the CPU baselines of bench/eth.sh: plain AF_XDP loops with
 * libxdp, no kinet. One thread does everything, in copy mode (what the
 * software NIC gets on a veth too).
 *
 *   xsk_base tx IFNAME DSTMAC COUNT SIZE    COUNT frames of SIZE bytes, as fast
 *                                           as the socket takes them
 *   xsk_base rx IFNAME COUNT                counts COUNT frames (every frame of
 *                                           queue 0: libxdp's default program)
 *   xsk_base echo IFNAME PORT COUNT         answers COUNT UDP datagrams to PORT
 *                                           (addresses swapped, checksums
 *                                           recomputed, as the kinet echo does),
 *                                           other frames go to the kernel
 *
 * Prints what it did: frames, seconds, pps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <net/if.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#define FRAMES 4096u
#define FSIZE 2048u
#define BATCH 64u

static struct xsk_umem *umem;
static struct xsk_socket *xsk;
static struct xsk_ring_prod fq, tx;
static struct xsk_ring_cons cq, rx;
static uint8_t *area;
static uint64_t freel[FRAMES];
static uint32_t nfree;
static volatile sig_atomic_t stop; /* SIGINT, SIGTERM: end, cleaning up */

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int quiet(enum libxdp_print_level l, const char *f, va_list ap)
{
	(void)l;
	(void)f;
	(void)ap;
	return 0;
}

static int setup(const char *ifn, int want_rx)
{
	libxdp_set_print(quiet);
	area = mmap(NULL, (size_t)FRAMES * FSIZE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct xsk_umem_config uc = {.fill_size = FRAMES, .comp_size = FRAMES, .frame_size = FSIZE};
	if (area == MAP_FAILED ||
	    xsk_umem__create(&umem, area, (size_t)FRAMES * FSIZE, &fq, &cq, &uc)) {
		fprintf(stderr, "xsk_base: UMEM\n");
		return 1;
	}
	struct xsk_socket_config sc = {.rx_size = FRAMES, .tx_size = FRAMES,
				       .bind_flags = XDP_COPY | XDP_USE_NEED_WAKEUP};
	if (!want_rx)
		sc.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
	int rc = -EBUSY;
	/* EBUSY: the pool of a socket closed a moment ago is still on the queue */
	for (int i = 0; i < 20 && rc == -EBUSY; i++) {
		if (i)
			usleep(50000);
		rc = xsk_socket__create(&xsk, ifn, 0, umem, &rx, &tx, &sc);
	}
	if (rc) {
		fprintf(stderr, "xsk_base: AF_XDP socket on %s: %s\n", ifn, strerror(-rc));
		return 1;
	}
	if (want_rx) {
		uint32_t idx = 0;
		xsk_ring_prod__reserve(&fq, FRAMES / 2, &idx);
		for (uint32_t i = 0; i < FRAMES / 2; i++)
			*xsk_ring_prod__fill_addr(&fq, idx + i) = (uint64_t)i * FSIZE;
		xsk_ring_prod__submit(&fq, FRAMES / 2);
	}
	for (uint32_t i = FRAMES / 2; i < FRAMES; i++)
		freel[nfree++] = (uint64_t)i * FSIZE;
	return 0;
}

static void reap(void)
{
	uint32_t idx = 0, n = xsk_ring_cons__peek(&cq, FRAMES, &idx);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = *xsk_ring_cons__comp_addr(&cq, idx + i);
		if (a >= (uint64_t)(FRAMES / 2) * FSIZE) {
			freel[nfree++] = a; /* a sending frame */
		} else { /* an echoed receive frame: back to the fill ring */
			uint32_t fi = 0;
			if (xsk_ring_prod__reserve(&fq, 1, &fi) == 1) {
				*xsk_ring_prod__fill_addr(&fq, fi) = a;
				xsk_ring_prod__submit(&fq, 1);
			}
		}
	}
	if (n)
		xsk_ring_cons__release(&cq, n);
}

static int do_tx(const char *dmac, unsigned long long count, unsigned size)
{
	unsigned m[6];
	if (sscanf(dmac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
		return 2;
	/* one UDP frame in every sending frame */
	for (uint32_t i = 0; i < nfree; i++) {
		uint8_t *f = area + freel[i];
		memset(f, 0, size);
		for (int j = 0; j < 6; j++)
			f[j] = (uint8_t)m[j];
		f[6] = 0x02;
		f[12] = 0x08;
		f[14] = 0x45;
		f[16] = (uint8_t)((size - 14) >> 8);
		f[17] = (uint8_t)(size - 14);
		f[22] = 64;
		f[23] = 17;
		f[26] = 10, f[29] = 1, f[30] = 10, f[33] = 2;
		f[34] = 0x23, f[35] = 0x28, f[36] = 0x23, f[37] = 0x29;
		f[38] = (uint8_t)((size - 34) >> 8);
		f[39] = (uint8_t)(size - 34);
	}
	unsigned long long sent = 0;
	double t0 = now_s();
	while (sent < count) {
		reap();
		uint32_t n = nfree < BATCH ? nfree : BATCH;
		if (count - sent < n)
			n = (uint32_t)(count - sent);
		uint32_t idx = 0;
		if (n && xsk_ring_prod__reserve(&tx, n, &idx) == n) {
			for (uint32_t i = 0; i < n; i++) {
				struct xdp_desc *d = xsk_ring_prod__tx_desc(&tx, idx + i);
				d->addr = freel[--nfree];
				d->len = size;
			}
			xsk_ring_prod__submit(&tx, n);
			sent += n;
		}
		sendto(xsk_socket__fd(xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
	}
	while (nfree < FRAMES / 2 && now_s() - t0 < 30) {
		sendto(xsk_socket__fd(xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
		reap();
	}
	double dt = now_s() - t0;
	printf("frames=%llu seconds=%.6f pps=%.0f\n", sent, dt, sent / dt);
	return 0;
}

static int do_rx(unsigned long long count)
{
	unsigned long long got = 0;
	double t0 = 0, t1 = 0, start = now_s();
	struct pollfd pf = {.fd = xsk_socket__fd(xsk), .events = POLLIN};
	printf("ready\n");
	fflush(stdout);
	while (got < count && !stop) {
		uint32_t idx = 0, n = xsk_ring_cons__peek(&rx, BATCH, &idx);
		if (!n) {
			if (poll(&pf, 1, got ? 1000 : 20000) != 1 && (got || now_s() - start > 20))
				break;
			continue;
		}
		if (!got)
			t0 = now_s();
		uint32_t fi = 0;
		xsk_ring_prod__reserve(&fq, n, &fi);
		for (uint32_t i = 0; i < n; i++) {
			const struct xdp_desc *d = xsk_ring_cons__rx_desc(&rx, idx + i);
			/* touch it, as a consumer would */
			(void)*(volatile uint8_t *)(area + d->addr);
			*xsk_ring_prod__fill_addr(&fq, fi + i) = d->addr - d->addr % FSIZE;
		}
		xsk_ring_cons__release(&rx, n);
		xsk_ring_prod__submit(&fq, n);
		got += n;
		t1 = now_s();
	}
	double dt = t1 - t0;
	printf("frames=%llu seconds=%.6f pps=%.0f\n", got, dt, dt > 0 ? got / dt : 0.0);
	return 0;
}

static uint16_t csum(const uint8_t *p, uint32_t n, uint32_t s)
{
	for (uint32_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void swap(uint8_t *a, uint8_t *b, int n)
{
	for (int i = 0; i < n; i++) {
		uint8_t t = a[i];
		a[i] = b[i];
		b[i] = t;
	}
}

static int do_echo(unsigned port, unsigned long long count)
{
	unsigned long long done = 0;
	struct pollfd pf = {.fd = xsk_socket__fd(xsk), .events = POLLIN};
	printf("ready\n");
	fflush(stdout);
	while (done < count && !stop) {
		reap();
		uint32_t idx = 0, n = xsk_ring_cons__peek(&rx, BATCH, &idx);
		if (!n) {
			if (poll(&pf, 1, 200) != 1 && stop)
				break;
			continue;
		}
		uint64_t out_addr[BATCH];
		uint32_t out_len[BATCH], nt = 0;
		for (uint32_t i = 0; i < n; i++) {
			const struct xdp_desc *d = xsk_ring_cons__rx_desc(&rx, idx + i);
			uint8_t *f = area + d->addr;
			uint32_t ihl = (f[14] & 0xfu) * 4u;
			bool udp = d->len >= 42 && f[12] == 0x08 && f[13] == 0 && f[23] == 17 &&
				   (f[14 + ihl + 2] << 8 | f[14 + ihl + 3]) == (int)port;
			if (!udp) { /* not ours: back to the fill ring */
				uint32_t fi = 0;
				xsk_ring_prod__reserve(&fq, 1, &fi);
				*xsk_ring_prod__fill_addr(&fq, fi) = d->addr - d->addr % FSIZE;
				xsk_ring_prod__submit(&fq, 1);
				continue;
			}
			swap(f, f + 6, 6);
			swap(f + 26, f + 30, 4);
			uint8_t *ip = f + 14, *u = ip + ihl;
			ip[8] = 64;
			ip[10] = ip[11] = 0;
			uint16_t c = csum(ip, ihl, 0);
			ip[10] = (uint8_t)(c >> 8), ip[11] = (uint8_t)c;
			swap(u, u + 2, 2);
			uint32_t ul = (uint32_t)(ip[2] << 8 | ip[3]) - ihl;
			u[6] = u[7] = 0;
			uint8_t ph[12] = {ip[12], ip[13], ip[14], ip[15], ip[16], ip[17],
					  ip[18], ip[19], 0,      17,     (uint8_t)(ul >> 8),
					  (uint8_t)ul};
			uint32_t s = 0;
			for (int j = 0; j < 12; j += 2)
				s += (uint32_t)ph[j] << 8 | ph[j + 1];
			c = csum(u, ul, s);
			c = c ? c : 0xffff;
			u[6] = (uint8_t)(c >> 8), u[7] = (uint8_t)c;
			out_addr[nt] = d->addr;
			out_len[nt++] = d->len;
		}
		xsk_ring_cons__release(&rx, n);
		uint32_t ti = 0;
		while (nt && xsk_ring_prod__reserve(&tx, nt, &ti) != nt)
			reap(); /* the ring holds every frame: room comes back */
		for (uint32_t i = 0; i < nt; i++) {
			struct xdp_desc *o = xsk_ring_prod__tx_desc(&tx, ti + i);
			o->addr = out_addr[i];
			o->len = out_len[i];
		}
		xsk_ring_prod__submit(&tx, nt);
		if (nt)
			sendto(xsk_socket__fd(xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
		done += nt;
	}
	for (int i = 0; i < 100 && !stop; i++) {
		reap();
		usleep(1000);
	}
	printf("echoed=%llu\n", done);
	return 0;
}

/* The socket, then the UMEM: libxdp takes its program off the interface
 * with the last socket it loaded it for. */
static int done(int rc)
{
	if (xsk)
		xsk_socket__delete(xsk);
	if (umem)
		xsk_umem__delete(umem);
	return rc;
}

int main(int argc, char **argv)
{
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (argc >= 6 && !strcmp(argv[1], "tx"))
		return done(setup(argv[2], 0) ? 1 : do_tx(argv[3], strtoull(argv[4], NULL, 10),
							  (unsigned)atoi(argv[5])));
	if (argc >= 4 && !strcmp(argv[1], "rx"))
		return done(setup(argv[2], 1) ? 1 : do_rx(strtoull(argv[3], NULL, 10)));
	if (argc >= 5 && !strcmp(argv[1], "echo"))
		return done(setup(argv[2], 1) ? 1 : do_echo((unsigned)atoi(argv[3]),
							    strtoull(argv[4], NULL, 10)));
	fprintf(stderr, "usage: xsk_base tx IFNAME DSTMAC COUNT SIZE | rx IFNAME COUNT | "
			"echo IFNAME PORT COUNT\n");
	return 2;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet_net_bw - kinet's cross-process path (software NIC over its wire),
 * measured like bench/fabric_bw: RDMA write bandwidth through the device API
 * on the host executor, and 8-byte write latency (post to completion: the
 * target has placed it). Public API only.
 *
 *   kinet_net_bw -s DIR          server: publishes DIR/kinet.srv, waits
 *   kinet_net_bw -c DIR [-n N]   client: connects, warms up, measures, prints
 *                                "bw SIZE MB/s" per size, then
 *                                "lat MEDIAN_US MEAN_US" (8-byte write)
 * Descriptors travel through files in DIR (any shared folder). As in
 * bench/fabric_bw, each process has one thread that polls (the engine; the
 * client's application thread polls its CQ as well, the server's sleeps).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include <kinet/net.h>
#include <kinet/device.h>

#define MAXSZ (4u << 20)

/* -z SIZE: only that size (0: no bandwidth); -l ITERS: latency samples;
 * -g GAP_US: a pause of that long before each latency sample (untimed: the
 * round trip after an idle spell, engines napping); -y: the application
 * thread waits with sched_yield between polls; -p: it waits for completions
 * polling with a pause only, never giving its CPU away (kn_wait yields every
 * 64 polls; a full SQ is still waited for inside kn_put, which does) */
static uint32_t only_size;
static int no_bw, lat_iters = -1, yield_poll, gap_us;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define SQ 256

/* Waits for a ticket: kn_wait, or polls with sched_yield (-y) or a pause
 * (-p). */
static int wait_ticket(kn_qp *d, kn_ticket_t t)
{
	if (!yield_poll)
		return kn_wait(d, t);
	uint64_t t0 = now_ns();
	int rc;
	for (unsigned i = 0; (rc = kn_test(d, t)) == -EBUSY; i++) {
		if ((i & 1023u) == 0 && now_ns() - t0 > 30000000000ull)
			return -ETIMEDOUT;
		if (yield_poll == 3) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		} else {
			sched_yield();
		}
	}
	return rc;
}

/* With -y, waits for room in the SQ for the ticket after t (-Y: naps of
 * 20 us instead of sched_yield: the SQ holds milliseconds of transfers). */
static void wait_room(kn_qp *d, kn_ticket_t t)
{
	if (!yield_poll || yield_poll == 3)
		return;
	uint64_t t0 = now_ns();
	while (t + 1 >= kn_cq_progress(d) + SQ && now_ns() - t0 < 30000000000ull) {
		if (yield_poll > 1) {
			struct timespec ts = {0, 20000};
			nanosleep(&ts, NULL);
		} else {
			sched_yield();
		}
	}
}

#define CHK(e)                                                                             \
	do {                                                                               \
		int r_ = (int)(e);                                                         \
		if (r_) {                                                                  \
			fprintf(stderr, "kinet_net_bw: %s: %s\n", #e, kinet_strerror(r_));   \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static void put_file(const char *dir, const char *name, const void *p, size_t n)
{
	char path[512], tmp[520];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	if (!f || fwrite(p, 1, n, f) != n) {
		fprintf(stderr, "kinet_net_bw: cannot write %s\n", tmp);
		exit(1);
	}
	fclose(f);
	rename(tmp, path);
}

/* Waits (30 s at most) for a file and reads it. */
static size_t get_file(const char *dir, const char *name, void *p, size_t cap, int wait_s)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (int i = 0; i < wait_s * 100; i++) {
		FILE *f = fopen(path, "rb");
		if (f) {
			size_t n = fread(p, 1, cap, f);
			fclose(f);
			unlink(path);
			return n;
		}
		usleep(10000);
	}
	fprintf(stderr, "kinet_net_bw: nothing in %s\n", path);
	exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct blob {
	uint8_t qp[KINET_QP_DESC_MAX];
	uint8_t mr[KINET_MR_DESC_SIZE];
	uint32_t qp_len;
};

int main(int argc, char **argv)
{
	int n = 1000, srv = -1, opt;
	const char *dir = NULL;
	while ((opt = getopt(argc, argv, "s:c:n:z:l:g:yYp")) != -1) {
		if (opt == 's' || opt == 'c') {
			srv = opt == 's';
			dir = optarg;
		} else if (opt == 'n') {
			n = atoi(optarg);
		} else if (opt == 'z') {
			only_size = (uint32_t)strtoul(optarg, NULL, 0);
			if (only_size == 0)
				no_bw = 1;
		} else if (opt == 'l') {
			lat_iters = atoi(optarg);
		} else if (opt == 'g') {
			gap_us = atoi(optarg);
		} else if (opt == 'y') {
			yield_poll = 1;
		} else if (opt == 'Y') {
			yield_poll = 2;
		} else if (opt == 'p') {
			yield_poll = 3;
		}
	}
	if (srv < 0 || n <= 0) {
		fprintf(stderr, "usage: kinet_net_bw -s DIR | -c DIR [-n N] [-z SIZE] [-l ITERS] [-g GAP_US] [-y | -Y | -p]\n");
		return 2;
	}
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp;
	kinet_mr *mr;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	CHK(kinet_open(&ca, &ctx));
	CHK(kinet_pd_alloc(ctx, &pd));
	uint8_t *buf = aligned_alloc(4096, MAXSZ);
	memset(buf, 0x5a, MAXSZ);
	CHK(kinet_mr_reg(pd, buf, MAXSZ, KINET_ACCESS_ALL, &mr));
	struct kinet_qp_attr qa = {.sq_depth = SQ};
	CHK(kinet_qp_create(pd, &qa, &qp));
	struct blob me, peer;
	memset(&me, 0, sizeof(me));
	int l = kinet_qp_export(qp, me.qp, sizeof(me.qp));
	if (l < 0)
		CHK(l);
	me.qp_len = (uint32_t)l;
	if (kinet_mr_export(mr, me.mr, sizeof(me.mr)) < 0)
		return 1;
	put_file(dir, srv ? "kinet.srv" : "kinet.cli", &me, sizeof(me));
	get_file(dir, srv ? "kinet.cli" : "kinet.srv", &peer, sizeof(peer), 30);
	CHK(kinet_qp_connect_remote(qp, peer.qp, peer.qp_len));
	if (srv) {
		char done[8];
		get_file(dir, "kinet.done", done, sizeof(done), 600);
	} else {
		struct kinet_mr_info pm;
		CHK(kinet_mr_desc_parse(peer.mr, sizeof(peer.mr), &pm));
		kn_qp *d;
		CHK(kinet_qp_device(qp, &d));
		uint32_t lkey = kinet_mr_lkey(mr);
		kn_ticket_t t;
		/* warm up: the connection, the wire's buffers, the caches */
		for (int i = 0; i < 64; i++)
			CHK(kn_put(d, pm.addr, pm.rkey, buf, lkey, 65536, &t));
		CHK(wait_ticket(d, t));
		for (int i = 0; i < 100; i++) {
			CHK(kn_put(d, pm.addr, pm.rkey, buf, lkey, 8, &t));
			CHK(wait_ticket(d, t));
		}
		for (uint32_t sz = 65536; sz <= MAXSZ && !no_bw; sz *= 4) {
			if (only_size && sz != only_size)
				continue;
			int cnt = (int)((uint64_t)n * 65536 / sz);
			if (cnt < 64)
				cnt = 64;
			uint64_t t0 = now_ns();
			for (int i = 0; i < cnt; i++) {
				wait_room(d, t);
				CHK(kn_put(d, pm.addr, pm.rkey, buf, lkey, sz, &t));
			}
			CHK(wait_ticket(d, t));
			double s = (double)(now_ns() - t0) / 1e9;
			printf("bw %u %.0f\n", sz, (double)cnt * sz / s / 1e6);
		}
		int iters = lat_iters >= 0 ? lat_iters : n * 10;
		uint64_t *lat = malloc(sizeof(*lat) * (size_t)(iters + 1));
		if (!lat)
			return 1;
		for (int i = 0; i < iters; i++) {
			if (gap_us) {
				struct timespec ts = {gap_us / 1000000, (long)(gap_us % 1000000) * 1000};
				nanosleep(&ts, NULL);
			}
			uint64_t a = now_ns();
			CHK(kn_put(d, pm.addr, pm.rkey, buf, lkey, 8, &t));
			CHK(wait_ticket(d, t));
			lat[i] = now_ns() - a;
		}
		double mean = 0;
		for (int i = 0; i < iters; i++)
			mean += (double)lat[i] / 1e3 / iters;
		qsort(lat, (size_t)iters, sizeof(*lat), cmp_u64);
		if (iters > 0)
			printf("lat %.2f %.2f\n", (double)lat[iters / 2] / 1e3, mean);
		free(lat);
		put_file(dir, "kinet.done", "done", 4);
	}
	CHK(kinet_qp_destroy(qp));
	CHK(kinet_mr_dereg(mr));
	CHK(kinet_pd_free(pd));
	CHK(kinet_close(ctx));
	free(buf);
	return 0;
}

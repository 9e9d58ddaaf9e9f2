/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fabric_bw - raw libfabric baseline for the software NIC's wire: fi_write
 * and fi_send bandwidth and 8-byte fi_send round-trip latency between two
 * processes, with the same provider the wire uses (FI_EP_RDM,
 * KINET_FI_PROVIDER or tcp;ofi_rxm).
 *
 *   fabric_bw -s DIR          server: writes DIR/fabric.addr, serves
 *   fabric_bw -c DIR [-n N]   client: reads DIR/fabric.addr, warms the
 *                             connection up, measures, prints one line per
 *                             size "bw SIZE WRITE_MB/s SEND_MB/s", then
 *                             "lat MEDIAN_US MEAN_US" (8-byte round trip).
 * Set FI_TCP_IFACE to pick the interface. Every wait is bounded (30 s).
 * Both sides poll their completion queue (one busy thread per process), as
 * kinet_net_bw's engines do.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define MAXSZ (4u << 20)

/* -z SIZE: only that size (0: no bandwidth); -l ITERS: latency samples;
 * -g GAP_US: a pause of that long before each latency sample (untimed);
 * -w (or FABRIC_BW_CQ_WAIT=fd in the environment, which reaches a server
 * too): the CQ opened with a wait fd, as kinet's wire opens it by default
 * (KINET_NET_CQ_WAIT=fd), still polled, never waited on; -W: fi_write
 * bandwidth only (the fi_send column prints 0) */
static uint32_t only_size;
static int no_bw, lat_iters = -1, gap_us, cq_wait_fd, write_only;
#define WIN 64
#define CTRL 64

static struct fid_fabric *fab;
static struct fid_domain *dom;
static struct fid_ep *ep;
static struct fid_av *av;
static struct fid_cq *cq;
static struct fid_mr *mr;
static struct fi_info *info;
static uint8_t *buf, *ctrl_rx, *ctrl_tx;
static fi_addr_t peer;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define CHK(e)                                                                             \
	do {                                                                               \
		int r_ = (int)(e);                                                         \
		if (r_) {                                                                  \
			fprintf(stderr, "fabric_bw: %s: %s\n", #e, fi_strerror(-r_));        \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

/* Waits for n completions; returns the flags of the last. */
static void wait_cq(int n)
{
	struct fi_cq_entry e[16];
	uint64_t t0 = now_ns();
	while (n > 0) {
		ssize_t k = fi_cq_read(cq, e, n < 16 ? (size_t)n : 16);
		if (k > 0) {
			n -= (int)k;
			continue;
		}
		if (k == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "fabric_bw: completion error: %s\n", fi_strerror(err.err));
			exit(1);
		}
		if (now_ns() - t0 > 30000000000ull) {
			fprintf(stderr, "fabric_bw: timed out\n");
			exit(1);
		}
	}
}

static void post_recv(void)
{
	ssize_t rc;
	while ((rc = fi_recv(ep, ctrl_rx, CTRL, NULL, FI_ADDR_UNSPEC, NULL)) == -FI_EAGAIN)
		fi_cq_read(cq, NULL, 0);
	CHK(rc);
}

static void send_ctrl(const void *p, size_t n, fi_addr_t to)
{
	memcpy(ctrl_tx, p, n);
	ssize_t rc;
	while ((rc = fi_send(ep, ctrl_tx, n, NULL, to, NULL)) == -FI_EAGAIN)
		fi_cq_read(cq, NULL, 0);
	CHK(rc);
	wait_cq(1);
}

static void setup(void)
{
	struct fi_info *hints = fi_allocinfo();
	const char *prov = getenv("KINET_FI_PROVIDER");
	hints->caps = FI_MSG | FI_RMA;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = 0; /* scalable: offsets, requested keys */
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(prov && *prov ? prov : "tcp;ofi_rxm");
	CHK(fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	CHK(fi_fabric(info->fabric_attr, &fab, NULL));
	CHK(fi_domain(fab, info, &dom, NULL));
	struct fi_cq_attr ca = {.size = 1024, .format = FI_CQ_FORMAT_CONTEXT,
				.wait_obj = cq_wait_fd ? FI_WAIT_FD : FI_WAIT_NONE};
	CHK(fi_cq_open(dom, &ca, &cq, NULL));
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	CHK(fi_av_open(dom, &aa, &av, NULL));
	CHK(fi_endpoint(dom, info, &ep, NULL));
	CHK(fi_ep_bind(ep, &av->fid, 0));
	CHK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(ep));
	buf = aligned_alloc(4096, MAXSZ);
	ctrl_rx = malloc(CTRL);
	ctrl_tx = malloc(CTRL);
	memset(buf, 0x5a, MAXSZ);
	CHK(fi_mr_reg(dom, buf, MAXSZ, FI_WRITE | FI_REMOTE_WRITE | FI_SEND | FI_RECV, 0, 7, 0, &mr,
		      NULL));
	if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CHK(fi_mr_bind(mr, &ep->fid, 0));
		CHK(fi_mr_enable(mr));
	}
}

static void path(char *out, size_t n, const char *dir)
{
	snprintf(out, n, "%s/fabric.addr", dir);
}

struct hello {
	uint64_t addr, key;
	uint8_t name[40];
	uint32_t name_len;
};

static int server(const char *dir)
{
	setup();
	uint8_t name[64];
	size_t nl = sizeof(name);
	CHK(fi_getname(&ep->fid, name, &nl));
	post_recv();
	char p[512], tmp[520];
	path(p, sizeof(p), dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	FILE *f = fopen(tmp, "wb");
	fwrite(name, 1, nl, f);
	fclose(f);
	rename(tmp, p);
	/* the client says hello with its address */
	wait_cq(1);
	struct hello h;
	memcpy(&h, ctrl_rx, sizeof(h) < CTRL ? sizeof(h) : CTRL);
	CHK(fi_av_insert(av, h.name, 1, &peer, 0, NULL) != 1);
	struct hello me = {0, fi_mr_key(mr), {0}, 0}; /* offset addressing */
	send_ctrl(&me, sizeof(me), peer);
	/* serve: bulk receives for the send test, ping-pong for latency, until "q" */
	for (;;) {
		post_recv();
		wait_cq(1);
		char c = (char)ctrl_rx[0];
		if (c == 'q')
			break;
		if (c == 'p') { /* ping: answer */
			send_ctrl("p", 8, peer);
		} else if (c == 'b') { /* bulk sends follow: count and size */
			uint32_t cnt, sz;
			memcpy(&cnt, ctrl_rx + 4, 4);
			memcpy(&sz, ctrl_rx + 8, 4);
			for (uint32_t i = 0; i < cnt;) {
				uint32_t k = 0;
				for (; k < WIN && i + k < cnt; k++)
					CHK(fi_recv(ep, buf, sz, NULL, FI_ADDR_UNSPEC, NULL));
				wait_cq((int)k);
				i += k;
			}
			send_ctrl("d", 8, peer);
		} else if (c == 'w') { /* writes done: acknowledge */
			send_ctrl("d", 8, peer);
		}
	}
	unlink(p);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void roundtrip(char c)
{
	post_recv();
	uint8_t m[8] = {(uint8_t)c};
	send_ctrl(m, 8, peer);
	wait_cq(1);
}

static int client(const char *dir, int n)
{
	setup();
	char p[512];
	path(p, sizeof(p), dir);
	uint8_t name[64];
	size_t nl = 0;
	for (int i = 0; i < 3000 && !nl; i++) {
		FILE *f = fopen(p, "rb");
		if (f) {
			nl = fread(name, 1, sizeof(name), f);
			fclose(f);
		}
		if (!nl)
			usleep(10000);
	}
	if (!nl) {
		fprintf(stderr, "fabric_bw: no server address in %s\n", p);
		return 1;
	}
	CHK(fi_av_insert(av, name, 1, &peer, 0, NULL) != 1);
	struct hello me = {0};
	size_t ml = sizeof(me.name);
	CHK(fi_getname(&ep->fid, me.name, &ml));
	me.name_len = (uint32_t)ml;
	post_recv();
	send_ctrl(&me, sizeof(me), peer);
	wait_cq(1);
	struct hello srv;
	memcpy(&srv, ctrl_rx, sizeof(srv) < CTRL ? sizeof(srv) : CTRL);
	/* warm up: the connection, the provider's buffers, the caches */
	for (int i = 0; i < 64; i++) {
		ssize_t rc;
		while ((rc = fi_write(ep, buf, 65536, NULL, peer, srv.addr, srv.key, NULL)) ==
		       -FI_EAGAIN)
			fi_cq_read(cq, NULL, 0);
		CHK(rc);
		wait_cq(1);
	}
	roundtrip('w');
	for (int i = 0; i < 100; i++)
		roundtrip('p');
	for (uint32_t sz = 65536; sz <= MAXSZ && !no_bw; sz *= 4) {
		if (only_size && sz != only_size)
			continue;
		int cnt = (int)((uint64_t)n * 65536 / sz);
		if (cnt < 64)
			cnt = 64;
		double mbs[2] = {0, 0};
		for (int kind = 0; kind < (write_only ? 1 : 2); kind++) {
			if (kind == 1) {
				uint32_t hdr[3] = {'b', (uint32_t)cnt, sz};
				send_ctrl(hdr, sizeof(hdr), peer);
			}
			uint64_t t0 = now_ns();
			int inflight = 0;
			for (int i = 0; i < cnt; i++) {
				ssize_t rc;
				do {
					rc = kind == 0 ? fi_write(ep, buf, sz, NULL, peer, srv.addr,
								  srv.key, NULL)
						       : fi_send(ep, buf, sz, NULL, peer, NULL);
					if (rc == -FI_EAGAIN) {
						struct fi_cq_entry e[16];
						ssize_t k = fi_cq_read(cq, e, 16);
						if (k > 0)
							inflight -= (int)k;
					}
				} while (rc == -FI_EAGAIN);
				CHK(rc);
				if (++inflight >= WIN) {
					wait_cq(1);
					inflight--;
				}
			}
			wait_cq(inflight);
			/* the target has everything once it answers */
			if (kind == 0)
				roundtrip('w');
			else {
				post_recv();
				wait_cq(1);
			}
			double s = (double)(now_ns() - t0) / 1e9;
			mbs[kind] = (double)cnt * sz / s / 1e6;
		}
		printf("bw %u %.0f %.0f\n", sz, mbs[0], mbs[1]);
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
		roundtrip('p');
		lat[i] = now_ns() - a;
	}
	double mean = 0;
	for (int i = 0; i < iters; i++)
		mean += (double)lat[i] / 1e3 / iters;
	qsort(lat, (size_t)iters, sizeof(*lat), cmp_u64);
	if (iters > 0)
		printf("lat %.2f %.2f\n", (double)lat[iters / 2] / 1e3, mean);
	free(lat);
	uint8_t q[8] = {'q'};
	send_ctrl(q, 8, peer);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 1000;
	const char *dir = NULL;
	int srv = -1;
	int opt;
	while ((opt = getopt(argc, argv, "s:c:n:z:l:g:wW")) != -1) {
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
		} else if (opt == 'w') {
			cq_wait_fd = 1;
		} else if (opt == 'W') {
			write_only = 1;
		}
	}
	const char *cw = getenv("FABRIC_BW_CQ_WAIT");
	if (cw && !strcmp(cw, "fd"))
		cq_wait_fd = 1;
	if (srv < 0 || n <= 0) {
		fprintf(stderr, "usage: fabric_bw -s DIR | -c DIR [-n N] [-z SIZE] [-l ITERS] [-g GAP_US] [-w] [-W]\n");
		return 2;
	}
	return srv ? server(dir) : client(dir, n);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * module.c - libkinet_xdp.so: AF_XDP ports for the software NIC, through
 * libxdp (sockets, UMEM, attaching the program) and libbpf (the object and
 * its maps). See xdp_module.h for the layout of a port.
 *
 * Modes are tried and reported, never assumed: the program is attached in
 * native mode, else (auto) in generic mode; sockets are bound for zero-copy,
 * else in copy mode (veth and most drivers without AF_XDP support). libxdp
 * and libbpf messages go to kinet's log (debug level) while kinet calls
 * them, and the previous print functions are put back after.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>
#include "core/driver.h"
#include "nic/soft/xdp/xdp_module.h"
#include "nic/soft/eth_rule.h"

/* The program, compiled at build time (the build writes kinet_steer_obj.c). */
extern const unsigned char kinet_steer_obj[];
extern const size_t kinet_steer_obj_len;

#define MAX_SLOTS ETH_RULE_MAX

struct sock {
	struct xsk_socket *xsk;
	struct xsk_ring_cons rx;
	int fd;
};

struct kinet_xdp {
	char ifname[IF_NAMESIZE];
	int ifindex;
	uint32_t queue;
	struct bpf_object *obj;
	struct xdp_program *prog;
	enum xdp_attach_mode mode;
	int rules_fd, nrules_fd, xsks_fd;
	uint8_t *area;
	size_t area_len;
	uint32_t frames, nrx;
	struct xsk_umem *umem;
	struct xsk_ring_prod fill;
	struct xsk_ring_cons comp;
	struct xsk_socket *txs; /* the sending socket (and the UMEM's first) */
	struct xsk_ring_cons txs_rx;
	struct xsk_ring_prod tx;
	int tx_fd;
	uint16_t bind_flags;
	uint64_t *tx_free; /* free sending frames (UMEM offsets) */
	uint32_t ntx_free;
	uint32_t tx_pending;
	struct sock slots[MAX_SLOTS];
	uint64_t *recycle; /* received frames going back to the fill ring */
	uint32_t nrecycle;
};

/* ---- messages of the libraries --------------------------------------------------- */

static int lib_print(const char *fmt, va_list ap)
{
	char buf[256];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	size_t l = strlen(buf);
	while (l && buf[l - 1] == '\n')
		buf[--l] = 0;
	kinet_log(KINET_LOG_DEBUG, "xdp: %s", buf);
	return 0;
}
static int xdp_print(enum libxdp_print_level lvl, const char *fmt, va_list ap)
{
	(void)lvl;
	return lib_print(fmt, ap);
}
static int bpf_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	(void)lvl;
	return lib_print(fmt, ap);
}

struct prints {
	libxdp_print_fn_t x;
	libbpf_print_fn_t b;
};
static struct prints quiet(void)
{
	struct prints p = {libxdp_set_print(xdp_print), libbpf_set_print(bpf_print)};
	return p;
}
static void loud(struct prints p)
{
	libxdp_set_print(p.x);
	libbpf_set_print(p.b);
}

/* ---- ports --------------------------------------------------------------------------- */

static void port_free(struct kinet_xdp *x)
{
	for (int i = 0; i < MAX_SLOTS; i++)
		if (x->slots[i].xsk)
			xsk_socket__delete(x->slots[i].xsk);
	if (x->txs)
		xsk_socket__delete(x->txs);
	if (x->umem)
		xsk_umem__delete(x->umem);
	if (x->prog) {
		if (x->mode)
			xdp_program__detach(x->prog, x->ifindex, x->mode, 0);
		xdp_program__close(x->prog);
	}
	if (x->obj)
		bpf_object__close(x->obj); /* the program does not own an object it was given */
	if (x->area)
		munmap(x->area, x->area_len);
	free(x->tx_free);
	free(x->recycle);
	free(x);
}

static int err_of(int e)
{
	return e < 0 ? e : -e;
}

static const char *perm_hint(int e)
{
	return (e == -EPERM || e == -EACCES)
		       ? " (needs root or CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW)"
		       : "";
}

/* The sending socket. EBUSY: the queue still has the pool of a socket that
 * was just closed (the kernel releases it a moment later): tried again for
 * up to a second. */
static int sock_create(struct kinet_xdp *x, const char *ifname, uint32_t queue,
		       const struct xsk_socket_config *sc)
{
	int rc = -EBUSY;
	for (int i = 0; i < 20 && rc == -EBUSY; i++) {
		if (i)
			usleep(50000);
		x->txs = NULL;
		rc = xsk_socket__create(&x->txs, ifname, queue, x->umem, &x->txs_rx, &x->tx, sc);
		rc = rc > 0 ? -rc : rc;
	}
	if (rc)
		x->txs = NULL;
	return rc;
}

static int x_open(const char *ifname, uint32_t queue, uint32_t frames, int mode,
		  struct kinet_xdp **out, struct kinet_xdp_info *info, char *why, size_t wl)
{
	struct kinet_xdp *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	struct prints pr = quiet();
	int rc;
	snprintf(x->ifname, sizeof(x->ifname), "%s", ifname);
	x->queue = queue;
	x->ifindex = (int)if_nametoindex(ifname);
	if (!x->ifindex) {
		snprintf(why, wl, "no interface %s", ifname);
		rc = -ENODEV;
		goto fail;
	}
	/* the program */
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "kinet_steer");
	x->obj = bpf_object__open_mem(kinet_steer_obj, kinet_steer_obj_len, &oo);
	if (!x->obj) {
		rc = err_of(errno ? errno : EINVAL);
		snprintf(why, wl, "kinet's XDP program cannot be opened: %s", strerror(-rc));
		goto fail;
	}
	x->prog = xdp_program__from_bpf_obj(x->obj, "xdp");
	if (libxdp_get_error(x->prog)) {
		rc = err_of((int)libxdp_get_error(x->prog));
		x->prog = NULL;
		snprintf(why, wl, "libxdp: the program cannot be used: %s", strerror(-rc));
		goto fail;
	}
	const char *how = "native";
	rc = -EOPNOTSUPP;
	if (mode != 2) {
		rc = xdp_program__attach(x->prog, x->ifindex, XDP_MODE_NATIVE, 0);
		if (rc == 0)
			x->mode = XDP_MODE_NATIVE;
	}
	if (rc && mode != 1) {
		int rn = rc;
		rc = xdp_program__attach(x->prog, x->ifindex, XDP_MODE_SKB, 0);
		if (rc == 0) {
			x->mode = XDP_MODE_SKB;
			how = mode == 2 ? "generic" : "generic (the driver has no native XDP)";
		} else if (mode == 0) {
			rc = rn; /* the native attempt's reason is the one to report */
		}
	}
	if (rc) {
		rc = err_of(rc);
		snprintf(why, wl, "attaching kinet's XDP program to %s failed: %s%s", ifname,
			 strerror(-rc), perm_hint(rc));
		goto fail;
	}
	x->rules_fd = bpf_object__find_map_fd_by_name(x->obj, "kinet_rules");
	x->nrules_fd = bpf_object__find_map_fd_by_name(x->obj, "kinet_nrules");
	x->xsks_fd = bpf_object__find_map_fd_by_name(x->obj, "kinet_xsks");
	if (x->rules_fd < 0 || x->nrules_fd < 0 || x->xsks_fd < 0) {
		snprintf(why, wl, "kinet's XDP program has no maps after loading");
		rc = -EPROTO;
		goto fail;
	}
	/* the UMEM: half the frames for receiving (on the fill ring), half for sending */
	x->frames = frames;
	x->nrx = frames / 2;
	x->area_len = (size_t)frames * KINET_XDP_FRAME;
	x->area =
		mmap(NULL, x->area_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (x->area == MAP_FAILED) {
		x->area = NULL;
		rc = -ENOMEM;
		snprintf(why, wl, "no memory for %u AF_XDP frames", frames);
		goto fail;
	}
	struct xsk_umem_config uc = {
		.fill_size = x->nrx,
		.comp_size = frames - x->nrx,
		.frame_size = KINET_XDP_FRAME,
		.frame_headroom = 0,
		.flags = 0,
	};
	rc = xsk_umem__create(&x->umem, x->area, x->area_len, &x->fill, &x->comp, &uc);
	if (rc) {
		rc = err_of(rc);
		x->umem = NULL;
		snprintf(why, wl, "AF_XDP UMEM: %s%s", strerror(-rc),
			 rc == -EPERM ? " (locked memory limit, or privileges)" : "");
		goto fail;
	}
	struct xsk_socket_config sc = {
		.rx_size = 64,
		.tx_size = frames - x->nrx,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.xdp_flags = 0,
		.bind_flags = XDP_ZEROCOPY | XDP_USE_NEED_WAKEUP,
	};
	const char *bind = "zero-copy";
	rc = sock_create(x, ifname, queue, &sc);
	if (rc && rc != -EBUSY) {
		sc.bind_flags = XDP_COPY | XDP_USE_NEED_WAKEUP;
		rc = sock_create(x, ifname, queue, &sc);
		bind = "copy mode (the driver has no AF_XDP zero-copy)";
	}
	if (rc) {
		rc = err_of(rc);
		x->txs = NULL;
		snprintf(why, wl, "AF_XDP socket on %s queue %u: %s%s", ifname, queue,
			 strerror(-rc), perm_hint(rc));
		goto fail;
	}
	x->bind_flags = sc.bind_flags;
	x->tx_fd = xsk_socket__fd(x->txs);
	/* every receive frame on the fill ring; the sending frames free */
	uint32_t idx = 0;
	if (xsk_ring_prod__reserve(&x->fill, x->nrx, &idx) != x->nrx) {
		rc = -ENOSPC;
		snprintf(why, wl, "AF_XDP fill ring smaller than the receive frames");
		goto fail;
	}
	for (uint32_t i = 0; i < x->nrx; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + i) = (uint64_t)i * KINET_XDP_FRAME;
	xsk_ring_prod__submit(&x->fill, x->nrx);
	x->tx_free = calloc(frames - x->nrx, sizeof(uint64_t));
	x->recycle = calloc(x->nrx, sizeof(uint64_t));
	if (!x->tx_free || !x->recycle) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = x->nrx; i < frames; i++)
		x->tx_free[x->ntx_free++] = (uint64_t)i * KINET_XDP_FRAME;
	/* what the interface is */
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%.15s", ifname);
	if (fd >= 0 && ioctl(fd, SIOCGIFHWADDR, &ifr) == 0)
		memcpy(info->mac, ifr.ifr_hwaddr.sa_data, 6);
	if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &ifr) == 0)
		info->mtu = (uint32_t)ifr.ifr_mtu;
	if (fd >= 0)
		close(fd);
	info->ifindex = x->ifindex;
	snprintf(info->mode, sizeof(info->mode), "AF_XDP on queue %u: %s XDP, %s", queue, how,
		 bind);
	loud(pr);
	*out = x;
	return 0;
fail:
	port_free(x);
	loud(pr);
	return rc;
}

static void x_close(struct kinet_xdp *x)
{
	struct prints pr = quiet();
	port_free(x);
	loud(pr);
}

static int x_sock_add(struct kinet_xdp *x, int slot, char *why, size_t wl)
{
	if (slot < 0 || slot >= MAX_SLOTS || x->slots[slot].xsk)
		return -EINVAL;
	struct prints pr = quiet();
	struct sock *s = &x->slots[slot];
	struct xsk_socket_config sc = {
		.rx_size = x->nrx,
		.tx_size = 0,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = x->bind_flags,
	};
	int rc = xsk_socket__create_shared(&s->xsk, x->ifname, x->queue, x->umem, &s->rx, NULL,
					   &x->fill, &x->comp, &sc);
	if (rc) {
		s->xsk = NULL;
		rc = err_of(rc);
		snprintf(why, wl, "AF_XDP socket of receive slot %d: %s", slot, strerror(-rc));
		loud(pr);
		return rc;
	}
	s->fd = xsk_socket__fd(s->xsk);
	__u32 key = (__u32)slot;
	if (bpf_map_update_elem(x->xsks_fd, &key, &s->fd, 0)) {
		rc = -errno;
		snprintf(why, wl, "the XDP program's socket map: %s", strerror(errno));
		xsk_socket__delete(s->xsk);
		s->xsk = NULL;
	}
	loud(pr);
	return rc;
}

static void x_sock_del(struct kinet_xdp *x, int slot)
{
	if (slot < 0 || slot >= MAX_SLOTS || !x->slots[slot].xsk)
		return;
	struct prints pr = quiet();
	__u32 key = (__u32)slot;
	bpf_map_delete_elem(x->xsks_fd, &key);
	xsk_socket__delete(x->slots[slot].xsk);
	x->slots[slot].xsk = NULL;
	loud(pr);
}

static int x_set_rules(struct kinet_xdp *x, const void *rules, uint32_t n, size_t rule_size)
{
	if (rule_size != sizeof(struct eth_rule) || n > ETH_RULE_MAX)
		return -EINVAL;
	/* the count goes down first and up last: the program never reads a
	 * rule being rewritten past the count (one being rewritten inside it
	 * may steer one frame by the old or the new rule) */
	__u32 zero = 0, cnt = 0;
	bpf_map_lookup_elem(x->nrules_fd, &zero, &cnt);
	if (n < cnt && bpf_map_update_elem(x->nrules_fd, &zero, &n, 0))
		return -errno;
	for (__u32 i = 0; i < n; i++)
		if (bpf_map_update_elem(x->rules_fd, &i, (const uint8_t *)rules + i * rule_size, 0))
			return -errno;
	if (bpf_map_update_elem(x->nrules_fd, &zero, &n, 0))
		return -errno;
	return 0;
}

static int x_rx(struct kinet_xdp *x, int budget, kinet_xdp_rx_fn fn, void *arg)
{
	int n = 0;
	for (int s = 0; s < MAX_SLOTS && n < budget; s++) {
		struct sock *k = &x->slots[s];
		if (!k->xsk)
			continue;
		uint32_t idx = 0;
		uint32_t got = xsk_ring_cons__peek(&k->rx, (uint32_t)(budget - n), &idx);
		for (uint32_t i = 0; i < got; i++) {
			const struct xdp_desc *d = xsk_ring_cons__rx_desc(&k->rx, idx + i);
			fn(arg, s, (const uint8_t *)xsk_umem__get_data(x->area, d->addr), d->len);
			x->recycle[x->nrecycle++] = d->addr - d->addr % KINET_XDP_FRAME;
		}
		if (got)
			xsk_ring_cons__release(&k->rx, got);
		n += (int)got;
		/* back to the fill ring, which has room for every receive frame */
		if (x->nrecycle) {
			uint32_t fi = 0;
			uint32_t m = xsk_ring_prod__reserve(&x->fill, x->nrecycle, &fi);
			for (uint32_t i = 0; i < m; i++)
				*xsk_ring_prod__fill_addr(&x->fill, fi + i) = x->recycle[i];
			xsk_ring_prod__submit(&x->fill, m);
			memmove(x->recycle, x->recycle + m, (x->nrecycle - m) * sizeof(uint64_t));
			x->nrecycle -= m;
			if (m && xsk_ring_prod__needs_wakeup(&x->fill))
				recvfrom(k->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		}
	}
	return n;
}

/* Sending frames the kernel is done with. */
static void reap(struct kinet_xdp *x)
{
	uint32_t idx = 0;
	uint32_t n = xsk_ring_cons__peek(&x->comp, x->frames - x->nrx, &idx);
	for (uint32_t i = 0; i < n; i++)
		x->tx_free[x->ntx_free++] = *xsk_ring_cons__comp_addr(&x->comp, idx + i);
	if (n)
		xsk_ring_cons__release(&x->comp, n);
}

static uint8_t *x_tx_buf(struct kinet_xdp *x, uint32_t len)
{
	if (len > KINET_XDP_FRAME)
		return NULL;
	if (!x->ntx_free)
		reap(x);
	if (!x->ntx_free || xsk_prod_nb_free(&x->tx, x->tx_pending + 1) < x->tx_pending + 1)
		return NULL;
	return (uint8_t *)xsk_umem__get_data(x->area, x->tx_free[--x->ntx_free]);
}

static void x_tx_commit(struct kinet_xdp *x, uint8_t *buf, uint32_t len)
{
	uint64_t addr = (uint64_t)(buf - x->area);
	if (!len) {
		x->tx_free[x->ntx_free++] = addr;
		return;
	}
	uint32_t idx = 0;
	if (xsk_ring_prod__reserve(&x->tx, 1, &idx) != 1) {
		x->tx_free[x->ntx_free++] = addr; /* tx_buf saw room: cannot happen */
		return;
	}
	struct xdp_desc *d = xsk_ring_prod__tx_desc(&x->tx, idx);
	d->addr = addr;
	d->len = len;
	d->options = 0;
	x->tx_pending++;
}

static void x_tx_flush(struct kinet_xdp *x)
{
	if (x->tx_pending) {
		xsk_ring_prod__submit(&x->tx, x->tx_pending);
		x->tx_pending = 0;
		/* copy mode sends from the sendto() call itself */
		if (!(x->bind_flags & XDP_ZEROCOPY) || xsk_ring_prod__needs_wakeup(&x->tx))
			sendto(x->tx_fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
	}
	reap(x);
}

static int x_wait(struct kinet_xdp *x, uint64_t ns)
{
	struct pollfd pf[MAX_SLOTS];
	nfds_t n = 0;
	for (int s = 0; s < MAX_SLOTS; s++)
		if (x->slots[s].xsk) {
			pf[n].fd = x->slots[s].fd;
			pf[n].events = POLLIN;
			n++;
		}
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	if (!n) {
		nanosleep(&ts, NULL);
		return 0;
	}
	ppoll(pf, n, &ts, NULL);
	return 0;
}

static uint64_t x_ring_drops(struct kinet_xdp *x, int slot)
{
	int fd = slot < 0 ? x->tx_fd
			  : (slot < MAX_SLOTS && x->slots[slot].xsk ? x->slots[slot].fd : -1);
	if (fd < 0)
		return 0;
	struct xdp_statistics st;
	socklen_t l = sizeof(st);
	memset(&st, 0, sizeof(st));
	if (getsockopt(fd, SOL_XDP, XDP_STATISTICS, &st, &l))
		return 0;
	return slot < 0 ? 0 : st.rx_dropped + st.rx_ring_full + st.rx_fill_ring_empty_descs;
}

const struct kinet_xdp_module_ops kinet_xdp_module_ops = {
	.abi = KINET_XDP_ABI,
	.open = x_open,
	.close = x_close,
	.sock_add = x_sock_add,
	.sock_del = x_sock_del,
	.set_rules = x_set_rules,
	.rx = x_rx,
	.tx_buf = x_tx_buf,
	.tx_commit = x_tx_commit,
	.tx_flush = x_tx_flush,
	.wait = x_wait,
	.ring_drops = x_ring_drops,
};

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
 *
 * A program attached by a process goes with it, as xdp-tools' discipline
 * has it: the program records its owner (metadata, steer.bpf.c), and an
 * open first detaches every kinet program on the interface whose owner has
 * ended (killed, crashed: nothing detached it), saying so. What cannot be
 * attached because another program is there (a live owner's, or not
 * kinet's) is said: the program, its owner, the commands that detach it.
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
#include <sys/stat.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
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

/* ---- the program's owner ---------------------------------------------------------- */

#define META_PID "bpf_metadata_kinet_owner_pid"
#define META_START "bpf_metadata_kinet_owner_start"
#define META_PIDNS "bpf_metadata_kinet_owner_pidns"

struct owner {
	uint32_t pid;
	uint64_t start; /* clock ticks after boot */
	uint64_t pidns; /* inode of the PID namespace */
};

/* The start time of process pid (field 22 of /proc/PID/stat): 0, or -ESRCH
 * when there is no such process, or it has ended and waits to be reaped (a
 * zombie has closed its files already). */
static int proc_start(uint32_t pid, uint64_t *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *s = strrchr(buf, ')'); /* the name may hold anything */
	unsigned long long st = 0;
	char state = 0;
	if (!s || sscanf(s + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
				"%*d %*d %*d %llu",
			 &state, &st) != 2)
		return -EPROTO;
	if (state == 'Z' || state == 'X')
		return -ESRCH;
	*start = st;
	return 0;
}

static struct owner self_owner(void)
{
	struct owner o = {.pid = (uint32_t)getpid()};
	struct stat sb;
	proc_start(o.pid, &o.start);
	if (stat("/proc/self/ns/pid", &sb) == 0)
		o.pidns = (uint64_t)sb.st_ino;
	return o;
}

enum { OWNER_NONE, OWNER_ALIVE, OWNER_DEAD, OWNER_ELSEWHERE };

/* Whether the owner runs: OWNER_ELSEWHERE when it is of another PID
 * namespace (its id says nothing here), OWNER_NONE when nothing is recorded. */
static int owner_state(const struct owner *o)
{
	if (!o->pid)
		return OWNER_NONE;
	struct owner me = self_owner();
	if (!o->pidns || o->pidns != me.pidns)
		return OWNER_ELSEWHERE;
	uint64_t st = 0;
	int rc = proc_start(o->pid, &st);
	if (rc == -ESRCH || (rc == 0 && st != o->start))
		return OWNER_DEAD; /* gone, or its id taken by a later process */
	return OWNER_ALIVE;
}

/* The offsets of the owner's fields in the read-only data whose type (a
 * DATASEC) is sec_id of btf: 0, or -ENOENT. */
static int owner_offsets(const struct btf *btf, uint32_t sec_id, size_t off[3])
{
	const struct btf_type *t = btf__type_by_id(btf, sec_id);
	if (!t || !btf_is_datasec(t))
		return -ENOENT;
	static const char *const names[3] = {META_PID, META_START, META_PIDNS};
	int found = 0;
	const struct btf_var_secinfo *v = btf_var_secinfos(t);
	for (int i = 0; i < btf_vlen(t); i++, v++) {
		const struct btf_type *vt = btf__type_by_id(btf, v->type);
		const char *name = vt ? btf__name_by_offset(btf, vt->name_off) : NULL;
		for (int k = 0; name && k < 3; k++)
			if (!strcmp(name, names[k]) && v->size == (k ? 8u : 4u)) {
				off[k] = v->offset;
				found |= 1 << k;
			}
	}
	return found == 7 ? 0 : -ENOENT;
}

/* Writes this process as the owner into the program's read-only data,
 * before it is loaded. */
static int owner_write(struct bpf_object *obj)
{
	struct bpf_map *m;
	const struct btf *btf = bpf_object__btf(obj);
	bpf_object__for_each_map(m, obj)
	{
		const char *n = bpf_map__name(m);
		size_t l = n ? strlen(n) : 0;
		if (l < 7 || strcmp(n + l - 7, ".rodata"))
			continue;
		size_t sz = 0;
		const void *init = bpf_map__initial_value(m, &sz);
		size_t off[3];
		int32_t sec = btf ? btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC) : -1;
		if (!init || sec < 0 || owner_offsets(btf, (uint32_t)sec, off) ||
		    off[0] + 4 > sz || off[1] + 8 > sz || off[2] + 8 > sz)
			return -ENOENT;
		uint8_t *d = malloc(sz);
		if (!d)
			return -ENOMEM;
		memcpy(d, init, sz);
		struct owner me = self_owner();
		memcpy(d + off[0], &me.pid, 4);
		memcpy(d + off[1], &me.start, 8);
		memcpy(d + off[2], &me.pidns, 8);
		int rc = bpf_map__set_initial_value(m, d, sz);
		free(d);
		return rc;
	}
	return -ENOENT;
}

/* The owner a loaded program records (by its id): 0, or -ENOENT when it
 * records none (not kinet's, or a kinet before owners were recorded). */
static int owner_read(uint32_t prog_id, struct owner *o)
{
	memset(o, 0, sizeof(*o));
	int pfd = bpf_prog_get_fd_by_id(prog_id);
	if (pfd < 0)
		return -errno;
	uint32_t ids[16];
	struct bpf_prog_info pi;
	memset(&pi, 0, sizeof(pi));
	pi.nr_map_ids = 16;
	pi.map_ids = (uint64_t)(uintptr_t)ids;
	uint32_t len = sizeof(pi);
	int rc = bpf_obj_get_info_by_fd(pfd, &pi, &len) ? -errno : -ENOENT;
	close(pfd);
	for (uint32_t i = 0; rc == -ENOENT && i < pi.nr_map_ids && i < 16; i++) {
		int mfd = bpf_map_get_fd_by_id(ids[i]);
		if (mfd < 0)
			continue;
		struct bpf_map_info mi;
		memset(&mi, 0, sizeof(mi));
		len = sizeof(mi);
		size_t l;
		if (bpf_obj_get_info_by_fd(mfd, &mi, &len) == 0 && mi.btf_id &&
		    (l = strlen(mi.name)) >= 7 && !strcmp(mi.name + l - 7, ".rodata") &&
		    mi.value_size && mi.value_size <= 65536) {
			struct btf *btf = btf__load_from_kernel_by_id(mi.btf_id);
			uint8_t *v = malloc(mi.value_size);
			uint32_t zero = 0;
			size_t off[3];
			if (!libbpf_get_error(btf) && btf && v &&
			    owner_offsets(btf, mi.btf_value_type_id, off) == 0 &&
			    off[0] + 4 <= mi.value_size && off[1] + 8 <= mi.value_size &&
			    off[2] + 8 <= mi.value_size && bpf_map_lookup_elem(mfd, &zero, v) == 0) {
				memcpy(&o->pid, v + off[0], 4);
				memcpy(&o->start, v + off[1], 8);
				memcpy(&o->pidns, v + off[2], 8);
				rc = 0;
			}
			free(v);
			if (!libbpf_get_error(btf))
				btf__free(btf);
		}
		close(mfd);
	}
	return rc;
}

static int is_kinet(const struct xdp_program *p)
{
	const char *n = xdp_program__name(p);
	return n && !strcmp(n, "kinet_steer");
}

static const char *mode_name(enum xdp_attach_mode m)
{
	return m == XDP_MODE_NATIVE ? "native" : m == XDP_MODE_SKB ? "generic"
					       : m == XDP_MODE_HW     ? "offloaded"
								      : "unknown mode";
}

/* The programs attached to the interface (a legacy one, or those of
 * libxdp's dispatcher), handed one by one to fn until it returns nonzero. */
static void for_each_attached(int ifindex,
			      int (*fn)(struct xdp_program *p, enum xdp_attach_mode m, void *arg),
			      void *arg)
{
	struct xdp_multiprog *mp = xdp_multiprog__get_from_ifindex(ifindex);
	if (!mp || libxdp_get_error(mp))
		return;
	enum xdp_attach_mode m = xdp_multiprog__attach_mode(mp);
	if (xdp_multiprog__is_legacy(mp)) {
		struct xdp_program *p = xdp_multiprog__main_prog(mp);
		if (p)
			fn(p, m, arg);
	} else {
		for (struct xdp_program *p = xdp_multiprog__next_prog(NULL, mp); p;
		     p = xdp_multiprog__next_prog(p, mp))
			if (fn(p, m, arg))
				break;
	}
	xdp_multiprog__close(mp);
}

struct stale_arg {
	const char *ifname;
	int ifindex;
	struct xdp_program *dead[8];
	uint32_t dead_pid[8];
	enum xdp_attach_mode dead_mode;
	int n;
};

static int find_stale(struct xdp_program *p, enum xdp_attach_mode m, void *arg)
{
	struct stale_arg *a = arg;
	struct owner o;
	if (!is_kinet(p) || owner_read(xdp_program__id(p), &o) || owner_state(&o) != OWNER_DEAD)
		return 0;
	/* a program of its own, by id: the multiprog's go with it */
	struct xdp_program *q = xdp_program__from_id(xdp_program__id(p));
	if (libxdp_get_error(q) || !q)
		return 0;
	a->dead[a->n] = q;
	a->dead_pid[a->n] = o.pid;
	a->dead_mode = m;
	return ++a->n == 8;
}

/* Detaches every kinet program on the interface whose owner has ended. */
static void detach_stale(const char *ifname, int ifindex)
{
	struct stale_arg a = {.ifname = ifname, .ifindex = ifindex};
	for_each_attached(ifindex, find_stale, &a);
	for (int i = 0; i < a.n; i++) {
		uint32_t id = xdp_program__id(a.dead[i]);
		int rc = xdp_program__detach(a.dead[i], ifindex, a.dead_mode, 0);
		if (rc == 0)
			kinet_log(KINET_LOG_WARN,
				  "eth port %s: detached a stale kinet XDP program (kinet_steer, id "
				  "%u, %s) left attached by process %u, which has ended (killed or "
				  "crashed before it closed its port)",
				  ifname, id, mode_name(a.dead_mode), a.dead_pid[i]);
		else
			kinet_log(KINET_LOG_WARN,
				  "eth port %s: a stale kinet XDP program (id %u) of process %u, "
				  "which has ended, could not be detached: %s",
				  ifname, id, a.dead_pid[i], strerror(rc < 0 ? -rc : rc));
		xdp_program__close(a.dead[i]);
	}
}

struct busy_arg {
	char *buf;
	size_t cap;
	int n;
};

static int say_one(struct xdp_program *p, enum xdp_attach_mode m, void *arg)
{
	struct busy_arg *a = arg;
	size_t l = strlen(a->buf);
	const char *name = xdp_program__name(p);
	unsigned id = xdp_program__id(p);
	char who[160];
	if (!is_kinet(p)) {
		snprintf(who, sizeof(who), "not kinet's");
	} else {
		struct owner o;
		int st = owner_read(id, &o) ? OWNER_NONE : owner_state(&o);
		if (st == OWNER_ALIVE)
			snprintf(who, sizeof(who), "kinet's, attached by process %u, which is running%s",
				 o.pid, o.pid == (uint32_t)getpid() ? " (this one)" : "");
		else if (st == OWNER_ELSEWHERE)
			snprintf(who, sizeof(who),
				 "kinet's, attached by process %u of another PID namespace", o.pid);
		else if (st == OWNER_DEAD)
			snprintf(who, sizeof(who), "kinet's, of process %u, which has ended", o.pid);
		else
			snprintf(who, sizeof(who), "kinet's, its owner not recorded");
	}
	snprintf(a->buf + l, a->cap - l, "%s%s (id %u, %s, %s)", a->n ? "; " : "",
		 name && *name ? name : "unnamed", id, mode_name(m), who);
	return ++a->n == 3;
}

/* Why the program could not be attached, when another one is there: 0 and
 * why written, or -ENOENT when none is. */
static int say_busy(const char *ifname, int ifindex, char *why, size_t wl)
{
	char progs[300] = "";
	struct busy_arg a = {progs, sizeof(progs), 0};
	for_each_attached(ifindex, say_one, &a);
	if (!a.n)
		return -ENOENT;
	snprintf(why, wl,
		 "%s already has an XDP program: %s. End its owner, or detach it with "
		 "`xdp-loader unload %s --all` or `ip link set dev %s xdp off`",
		 ifname, progs, ifname, ifname);
	return 0;
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
	if (owner_write(x->obj)) {
		snprintf(why, wl, "kinet's XDP program has no owner record (a build mismatch)");
		rc = -EPROTO;
		goto fail;
	}
	x->prog = xdp_program__from_bpf_obj(x->obj, "xdp");
	if (libxdp_get_error(x->prog)) {
		rc = err_of((int)libxdp_get_error(x->prog));
		x->prog = NULL;
		snprintf(why, wl, "libxdp: the program cannot be used: %s", strerror(-rc));
		goto fail;
	}
	detach_stale(ifname, x->ifindex);
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
		if ((rc == -EBUSY || rc == -EEXIST) && say_busy(ifname, x->ifindex, why, wl) == 0) {
			rc = -EBUSY;
			goto fail;
		}
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

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * platform.c - the machine around the GPUs and NICs, for kinet-info (see
 * platform.h): libfabric through its own API (fi_version, fi_getinfo), the
 * rest from sysfs and procfs. Nothing here fails: what cannot be read says
 * "unknown (why)".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include "kinet_config.h"
#include "platform.h"
#if KINET_HAVE_FABRIC
#include <rdma/fabric.h>
#endif

static void set(struct plat_item *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set(struct plat_item *it, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(it->s, sizeof(it->s), fmt, ap);
	va_end(ap);
	it->known = 1;
}

static void unknown(struct plat_item *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void unknown(struct plat_item *it, const char *fmt, ...)
{
	char why[PLAT_STR - 16];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(it->s, sizeof(it->s), "unknown (%s)", why);
	it->known = 0;
}

/* The contents of a small file, without the trailing newline: its length,
 * or -errno. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	size_t n = fread(buf, 1, cap - 1, f);
	int err = ferror(f) ? errno : 0;
	fclose(f);
	if (err)
		return -err;
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return (ssize_t)n;
}

/* The last component of a symbolic link's target, or "". */
static void link_base(const char *path, char *out, size_t cap)
{
	char t[PATH_MAX];
	ssize_t n = readlink(path, t, sizeof(t) - 1);
	out[0] = 0;
	if (n <= 0)
		return;
	t[n] = 0;
	const char *b = strrchr(t, '/');
	b = b ? b + 1 : t;
	size_t l = strlen(b);
	if (l >= cap)
		l = cap - 1;
	memcpy(out, b, l);
	out[l] = 0;
}

/* "dddd:bb:dd.f" from the usual forms (a 4 or 8 digit domain, or none). */
static int norm_bdf(const char *in, char *out, size_t cap)
{
	unsigned dom = 0, bus, dev, fn;
	char tail;
	if (!in || !*in)
		return -1;
	if (sscanf(in, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4) {
		dom = 0;
		if (sscanf(in, "%x:%x.%x%c", &bus, &dev, &fn, &tail) != 3)
			return -1;
	}
	if (dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
		return -1;
	snprintf(out, cap, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	return 0;
}

static int is_bdf(const char *s)
{
	char tmp[16];
	return strlen(s) == 12 && !norm_bdf(s, tmp, sizeof(tmp));
}

/* ---- machine-wide --------------------------------------------------------------- */

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* The domain types of the IOMMU groups, as a list ("DMA-FQ", "identity"). */
static void group_types(char *out, size_t cap)
{
	DIR *d = opendir("/sys/kernel/iommu_groups");
	out[0] = 0;
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		char p[PATH_MAX], t[64];
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/sys/kernel/iommu_groups/%s/type", e->d_name);
		if (slurp(p, t, sizeof(t)) <= 0 || strstr(out, t))
			continue;
		size_t l = strlen(out);
		snprintf(out + l, cap - l, "%s%s", l ? ", " : "", t);
	}
	closedir(d);
}

static void gather_iommu(struct platform *p)
{
	int units = count_dir("/sys/class/iommu");
	int groups = count_dir("/sys/kernel/iommu_groups");
	char types[128];
	if (units < 0 && groups < 0) {
		unknown(&p->iommu, "neither /sys/class/iommu nor /sys/kernel/iommu_groups is "
				   "readable: %s",
			strerror(-units));
	} else if (units <= 0 && groups <= 0) {
		set(&p->iommu, "off (no IOMMU is registered with the kernel, no IOMMU group)");
	} else {
		group_types(types, sizeof(types));
		const char *mode = !types[0]                     ? "domain type not readable"
				   : !strcmp(types, "identity")  ? "passthrough (identity domains)"
				   : strstr(types, "identity")   ? "mixed"
								 : "translated";
		set(&p->iommu, "on: %d IOMMU unit%s, %d group%s, %s%s%s%s", units < 0 ? 0 : units,
		    units == 1 ? "" : "s", groups < 0 ? 0 : groups, groups == 1 ? "" : "s", mode,
		    types[0] ? " (" : "", types, types[0] ? ")" : "");
	}
	char cmd[4096], opts[PLAT_STR] = "";
	if (slurp("/proc/cmdline", cmd, sizeof(cmd)) < 0) {
		unknown(&p->iommu_cmdline, "/proc/cmdline is not readable");
		return;
	}
	char *save = NULL;
	for (char *w = strtok_r(cmd, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (!strcmp(w, "--"))
			break; /* the rest is for init */
		if (!strstr(w, "iommu"))
			continue;
		size_t l = strlen(opts);
		snprintf(opts + l, sizeof(opts) - l, "%s%s", l ? " " : "", w);
	}
	if (opts[0])
		set(&p->iommu_cmdline, "%s", opts);
	else
		set(&p->iommu_cmdline, "none (the kernel's defaults)");
}

static void gather_fabric(struct platform *p)
{
	const char *want = kinet_tunable_str("KINET_FI_PROVIDER");
	snprintf(p->fi_wire, sizeof(p->fi_wire), "%s", want ? want : "");
#if KINET_HAVE_FABRIC
	uint32_t v = fi_version();
	set(&p->fi_version, "%u.%u", FI_MAJOR(v), FI_MINOR(v));
	snprintf(p->fi_built, sizeof(p->fi_built), "%d.%d", FI_MAJOR_VERSION, FI_MINOR_VERSION);
	struct fi_info *info = NULL;
	int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, NULL,
			    &info);
	if (rc) {
		unknown(&p->fi_note, "fi_getinfo: %s", fi_strerror(-rc));
		return;
	}
	set(&p->fi_note, "%s", "");
	for (struct fi_info *i = info; i; i = i->next) {
		const char *prov = i->fabric_attr && i->fabric_attr->prov_name
					   ? i->fabric_attr->prov_name
					   : "?";
		const char *fab = i->fabric_attr && i->fabric_attr->name ? i->fabric_attr->name : "";
		const char *dom = i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "";
		int dup = 0;
		for (int k = 0; k < p->nprov && !dup; k++)
			dup = !strcmp(p->prov[k].prov, prov) && !strcmp(p->prov[k].fabric, fab) &&
			      !strcmp(p->prov[k].domain, dom);
		if (dup || p->nprov >= PLAT_MAXPROV)
			continue;
		struct plat_prov *q = &p->prov[p->nprov++];
		snprintf(q->prov, sizeof(q->prov), "%s", prov);
		snprintf(q->fabric, sizeof(q->fabric), "%s", fab);
		snprintf(q->domain, sizeof(q->domain), "%s", dom);
		if (want && !strcmp(prov, want))
			p->fi_wire_found = 1;
	}
	fi_freeinfo(info);
#else
	unknown(&p->fi_version, "this kinet-info is built without libfabric");
	unknown(&p->fi_note, "this kinet-info is built without libfabric");
#endif
}

void plat_gather(struct platform *p)
{
	memset(p, 0, sizeof(*p));
	struct utsname u;
	if (uname(&u))
		unknown(&p->kernel, "uname: %s", strerror(errno));
	else
		set(&p->kernel, "%s %s", u.sysname, u.release);
	gather_iommu(p);
	char v[128];
	if (slurp("/sys/module/nvidia/version", v, sizeof(v)) > 0)
		set(&p->gpu_driver, "nvidia %s", v);
	else if (slurp("/proc/driver/nvidia/version", v, sizeof(v)) > 0)
		set(&p->gpu_driver, "%.*s", (int)strcspn(v, "\n"), v);
	else
		unknown(&p->gpu_driver, "no NVIDIA kernel module loaded");
	gather_fabric(p);
}

/* ---- one device -------------------------------------------------------------------- */

/* "Video BIOS" of /proc/driver/nvidia/gpus/BDF/information. */
static int nvidia_vbios(const char *bdf, char *out, size_t cap)
{
	char p[PATH_MAX], buf[4096];
	snprintf(p, sizeof(p), "/proc/driver/nvidia/gpus/%s/information", bdf);
	if (slurp(p, buf, sizeof(buf)) <= 0)
		return -1;
	const char *l = strstr(buf, "Video BIOS:");
	if (!l)
		return -1;
	l += strlen("Video BIOS:");
	while (*l == ' ' || *l == '\t')
		l++;
	snprintf(out, cap, "video BIOS %.*s", (int)strcspn(l, "\n"), l);
	return 0;
}

void plat_dev_gather(const char *pci, const char *ibname, int is_gpu, struct plat_dev *d)
{
	char p[PATH_MAX + 64], buf[512];
	memset(d, 0, sizeof(*d));
	d->numa_node = -1;
	d->bar1_bytes = -1;
	if (norm_bdf(pci, d->bdf, sizeof(d->bdf)) && ibname) {
		/* the NIC's PCI function from its RDMA device */
		char base[64];
		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/device", ibname);
		link_base(p, base, sizeof(base));
		if (is_bdf(base))
			norm_bdf(base, d->bdf, sizeof(d->bdf));
	}
	if (!d->bdf[0]) {
		const char *why = ibname ? "no PCI function for this RDMA device (not in sysfs: "
					   "an emulated or virtual device)"
					 : "no PCI address";
		unknown(&d->numa, "%s", why);
		unknown(&d->driver, "%s", why);
		unknown(&d->firmware, "%s", why);
		unknown(&d->bar1, "%s", why);
		unknown(&d->iommu_group, "%s", why);
		return;
	}
	snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s", d->bdf);
	if (!realpath(p, d->sysfs)) {
		d->sysfs[0] = 0;
		int err = errno;
		unknown(&d->numa, "%s: %s", p, strerror(err));
		unknown(&d->driver, "%s: %s", p, strerror(err));
		unknown(&d->firmware, "%s: %s", p, strerror(err));
		unknown(&d->bar1, "%s: %s", p, strerror(err));
		unknown(&d->iommu_group, "%s: %s", p, strerror(err));
		return;
	}
	/* NUMA node */
	snprintf(p, sizeof(p), "%s/numa_node", d->sysfs);
	if (slurp(p, buf, sizeof(buf)) <= 0) {
		unknown(&d->numa, "%s is not readable", p);
	} else if ((d->numa_node = atoi(buf)) < 0) {
		d->numa_node = -1;
		set(&d->numa, "none (the firmware gives no NUMA node: one node, or no NUMA "
			      "information)");
	} else {
		set(&d->numa, "%d", d->numa_node);
	}
	/* driver and its version */
	char drv[64];
	snprintf(p, sizeof(p), "%s/driver", d->sysfs);
	link_base(p, drv, sizeof(drv));
	if (!drv[0]) {
		unknown(&d->driver, "no driver bound to %s", d->bdf);
	} else {
		snprintf(p, sizeof(p), "/sys/module/%s/version", drv);
		struct utsname u;
		if (slurp(p, buf, sizeof(buf)) > 0)
			set(&d->driver, "%s %s", drv, buf);
		else if (!uname(&u))
			set(&d->driver, "%s (no module version: the kernel's, %s)", drv, u.release);
		else
			set(&d->driver, "%s (no module version)", drv);
	}
	/* firmware */
	if (ibname) {
		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/fw_ver", ibname);
		if (slurp(p, buf, sizeof(buf)) > 0)
			set(&d->firmware, "%s", buf);
		else
			unknown(&d->firmware, "%s is not readable", p);
	} else if (nvidia_vbios(d->bdf, buf, sizeof(buf)) == 0) {
		set(&d->firmware, "%s", buf);
	} else {
		unknown(&d->firmware, "no /proc/driver/nvidia/gpus/%s/information (the NVIDIA "
				      "driver shows the video BIOS there)",
			d->bdf);
	}
	/* BAR1: the GPU's window onto its memory for peers (the NIC) */
	if (is_gpu) {
		snprintf(p, sizeof(p), "%s/resource", d->sysfs);
		FILE *f = fopen(p, "r");
		unsigned long long s = 0, e = 0, fl = 0;
		int ok = 0;
		if (f) {
			ok = fgets(buf, sizeof(buf), f) && fgets(buf, sizeof(buf), f) &&
			     sscanf(buf, "%llx %llx %llx", &s, &e, &fl) == 3;
			fclose(f);
		}
		if (!f)
			unknown(&d->bar1, "%s: %s", p, strerror(errno));
		else if (!ok)
			unknown(&d->bar1, "%s has no BAR1 line", p);
		else if (e <= s)
			unknown(&d->bar1, "BAR1 of %s is not assigned", d->bdf);
		else {
			d->bar1_bytes = (long long)(e - s + 1);
			if (d->bar1_bytes >= (1ll << 30))
				set(&d->bar1, "%lld GiB", d->bar1_bytes >> 30);
			else
				set(&d->bar1, "%lld MiB", d->bar1_bytes >> 20);
		}
	} else {
		set(&d->bar1, "not a GPU");
	}
	/* IOMMU group */
	char grp[32], type[64];
	snprintf(p, sizeof(p), "%s/iommu_group", d->sysfs);
	link_base(p, grp, sizeof(grp));
	if (!grp[0]) {
		set(&d->iommu_group, "none (no IOMMU group: the IOMMU is off for it)");
	} else {
		snprintf(p, sizeof(p), "%s/iommu_group/type", d->sysfs);
		if (slurp(p, type, sizeof(type)) > 0)
			set(&d->iommu_group, "group %s (%s)", grp, type);
		else
			set(&d->iommu_group, "group %s", grp);
	}
}

/* ---- ACS on the path ---------------------------------------------------------------- */

/* The PCI functions from the host bridge down to a device (its sysfs path),
 * the device last; the host bridge ("pci0000:00") in root. */
static int path_of(const char *sysfs, char list[][16], int max, char *root, size_t rcap)
{
	char copy[PATH_MAX];
	snprintf(copy, sizeof(copy), "%s", sysfs);
	int n = 0;
	root[0] = 0;
	char *save = NULL;
	for (char *w = strtok_r(copy, "/", &save); w; w = strtok_r(NULL, "/", &save)) {
		if (!strncmp(w, "pci", 3) && strchr(w, ':'))
			snprintf(root, rcap, "%s", w);
		else if (is_bdf(w) && n < max)
			snprintf(list[n++], 16, "%s", w);
	}
	return n;
}

static unsigned get16(const unsigned char *c, size_t off)
{
	return (unsigned)c[off] | (unsigned)c[off + 1] << 8;
}

/* The ACS control of a bridge (the extended capability 0x000d in its PCI
 * configuration space, from sysfs): 0 and *ctrl, 1 (no ACS capability), or
 * -1 with why. */
static int acs_ctrl(const char *bdf, unsigned *ctrl, char *why, size_t wl)
{
	char p[PATH_MAX];
	unsigned char c[4096];
	snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/config", bdf);
	FILE *f = fopen(p, "rb");
	if (!f) {
		snprintf(why, wl, "the PCI configuration of %s: %s", bdf, strerror(errno));
		return -1;
	}
	size_t n = fread(c, 1, sizeof(c), f);
	fclose(f);
	if (n < 256) { /* sysfs gives others than root the first 64 bytes only */
		snprintf(why, wl, "the PCI configuration space of %s is not readable beyond %zu "
				  "bytes: run as root",
			 bdf, n);
		return -1;
	}
	if (n == 256)
		return 1; /* no extended configuration space: no ACS capability */
	size_t off = 0x100;
	for (int steps = 0; off >= 0x100 && off + 8 <= n && steps < 64; steps++) {
		uint32_t h = (uint32_t)get16(c, off) | (uint32_t)get16(c, off + 2) << 16;
		if (h == 0 || h == 0xffffffffu)
			break;
		if ((h & 0xffff) == 0x000d) { /* Access Control Services */
			*ctrl = get16(c, off + 6);
			return 0;
		}
		off = (h >> 20) & 0xffc;
	}
	return 1;
}

void plat_acs_gather(const struct plat_dev *gpu, const struct plat_dev *nic, struct plat_acs *a)
{
	char g[24][16], n[24][16], rg[64], rn[64], why[PLAT_STR];
	memset(a, 0, sizeof(*a));
	if (!gpu->sysfs[0] || !nic->sysfs[0]) {
		unknown(&a->verdict, "no PCI function in sysfs for the %s",
			!gpu->sysfs[0] ? "GPU" : "NIC");
		return;
	}
	int ng = path_of(gpu->sysfs, g, 24, rg, sizeof(rg));
	int nn = path_of(nic->sysfs, n, 24, rn, sizeof(rn));
	if (ng < 1 || nn < 1) {
		unknown(&a->verdict, "the PCI paths of the GPU and the NIC are not readable");
		return;
	}
	if (strcmp(rg, rn)) {
		set(&a->verdict, "not applicable: the GPU (%s) and the NIC (%s) are under different "
				 "host bridges, peer-to-peer goes through the CPUs",
		    rg, rn);
		return;
	}
	int c = 0; /* common ancestors */
	while (c < ng - 1 && c < nn - 1 && !strcmp(g[c], n[c]))
		c++;
	/* the bridges between them: the lowest common one, then both ways down */
	if (c > 0)
		snprintf(a->br[a->nbr++], 16, "%s", g[c - 1]);
	for (int i = c; i < ng - 1 && a->nbr < PLAT_MAXBR; i++)
		snprintf(a->br[a->nbr++], 16, "%s", g[i]);
	for (int i = c; i < nn - 1 && a->nbr < PLAT_MAXBR; i++)
		snprintf(a->br[a->nbr++], 16, "%s", n[i]);
	if (!a->nbr) {
		set(&a->verdict, "not applicable: no bridge between them (both on the host bridge %s)",
		    rg);
		return;
	}
	int redirect = -1, unk = -1;
	char first_why[PLAT_STR] = "";
	for (int i = 0; i < a->nbr; i++) {
		unsigned ctrl = 0;
		int rc = acs_ctrl(a->br[i], &ctrl, why, sizeof(why));
		if (rc < 0) {
			unknown(&a->br_state[i], "%s", why);
			if (unk < 0) {
				unk = i;
				snprintf(first_why, sizeof(first_why), "%s", why);
			}
		} else if (rc > 0) {
			set(&a->br_state[i], "no ACS capability");
		} else {
			int rr = (ctrl >> 2) & 1, cr = (ctrl >> 3) & 1, ec = (ctrl >> 5) & 1;
			set(&a->br_state[i],
			    "ACS control 0x%04x: P2P request redirect %s, completion redirect %s, "
			    "egress control %s",
			    ctrl, rr ? "on" : "off", cr ? "on" : "off", ec ? "on" : "off");
			if ((rr || cr || ec) && redirect < 0)
				redirect = i;
		}
	}
	if (redirect >= 0)
		set(&a->verdict, "on at %s: peer-to-peer requests are redirected to the root complex "
				 "(GPUDirect RDMA goes through it, or fails)",
		    a->br[redirect]);
	else if (unk >= 0)
		unknown(&a->verdict, "%s", first_why);
	else
		set(&a->verdict, "off on the path (%d bridge%s): peer-to-peer goes through the "
				 "switch",
		    a->nbr, a->nbr == 1 ? "" : "s");
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* PCIe distances from hwloc (see topo.h). */
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include "kinet_config.h"
#include "topo.h"

const char *kinet_topo_dist_str(int d)
{
	switch (d) {
	case KINET_DIST_PIX: return "PIX";
	case KINET_DIST_PXB: return "PXB";
	case KINET_DIST_PHB: return "PHB";
	case KINET_DIST_NODE: return "NODE";
	case KINET_DIST_SYS: return "SYS";
	default: return "n/a";
	}
}

#if KINET_HAVE_HWLOC
#include <hwloc.h>

static pthread_mutex_t topo_lock = PTHREAD_MUTEX_INITIALIZER;
static hwloc_topology_t topo;
static bool loaded;

int kinet_topo_load(const char *xml, char *why, size_t wl)
{
	pthread_mutex_lock(&topo_lock);
	if (loaded) {
		hwloc_topology_destroy(topo);
		loaded = false;
	}
	int rc = -EIO;
	if (hwloc_topology_init(&topo)) {
		snprintf(why, wl, "hwloc_topology_init failed");
		goto out;
	}
	hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
#if HWLOC_API_VERSION >= 0x20100
	/* Linux I/O discovery reads the PCI tree from sysfs; the libpciaccess
	 * plugin adds nothing to it and leaks memory when it is unloaded */
	hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
#endif
	if (xml && hwloc_topology_set_xmlbuffer(topo, xml, (int)strlen(xml) + 1)) {
		snprintf(why, wl, "hwloc cannot read the XML topology");
		hwloc_topology_destroy(topo);
		goto out;
	}
	if (hwloc_topology_load(topo)) {
		snprintf(why, wl, "hwloc_topology_load failed");
		hwloc_topology_destroy(topo);
		goto out;
	}
	loaded = true;
	rc = 0;
out:
	pthread_mutex_unlock(&topo_lock);
	return rc;
}

void kinet_topo_unload(void)
{
	pthread_mutex_lock(&topo_lock);
	if (loaded)
		hwloc_topology_destroy(topo);
	loaded = false;
	pthread_mutex_unlock(&topo_lock);
}

static hwloc_obj_t pci_find(const char *busid)
{
	unsigned dom, bus, dev, fn;
	if (!busid || sscanf(busid, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
		return NULL;
	return hwloc_get_pcidev_by_busid(topo, dom, bus, dev, fn);
}

static bool is_host_bridge(hwloc_obj_t o)
{
	return o->type == HWLOC_OBJ_BRIDGE &&
	       o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

/* Bridges strictly between o and its ancestor top. */
static int bridges_below(hwloc_obj_t o, hwloc_obj_t top)
{
	int n = 0;
	for (o = o->parent; o && o != top; o = o->parent)
		if (o->type == HWLOC_OBJ_BRIDGE)
			n++;
	return n;
}

static int classify(hwloc_obj_t a, hwloc_obj_t b)
{
	/* common ancestor (IO objects have no meaningful depth: walk parents) */
	hwloc_obj_t c = NULL;
	for (hwloc_obj_t x = a; x && !c; x = x->parent)
		for (hwloc_obj_t y = b; y; y = y->parent)
			if (x == y) {
				c = x;
				break;
			}
	if (!c)
		return KINET_DIST_SYS;
	if (c->type == HWLOC_OBJ_PCI_DEVICE)
		return KINET_DIST_PIX; /* one device below the other (or the same) */
	if (c->type == HWLOC_OBJ_BRIDGE) {
		if (is_host_bridge(c))
			return KINET_DIST_PHB;
		/* below one PCIe switch: PIX if each side crosses at most one
		 * bridge to reach the shared bus */
		return bridges_below(a, c) <= 1 && bridges_below(b, c) <= 1 ? KINET_DIST_PIX
									      : KINET_DIST_PXB;
	}
	/* different host bridges: same NUMA node or not */
	hwloc_obj_t na = hwloc_get_non_io_ancestor_obj(topo, a);
	hwloc_obj_t nb = hwloc_get_non_io_ancestor_obj(topo, b);
	if (na == nb)
		return KINET_DIST_NODE;
	if (na && nb && na->nodeset && nb->nodeset && hwloc_bitmap_isequal(na->nodeset, nb->nodeset))
		return KINET_DIST_NODE;
	return KINET_DIST_SYS;
}

int kinet_topo_distance(const char *pci_a, const char *pci_b)
{
	pthread_mutex_lock(&topo_lock);
	int rc = -ENODEV;
	if (loaded) {
		hwloc_obj_t a = pci_find(pci_a), b = pci_find(pci_b);
		rc = (a && b) ? classify(a, b) : -ENOENT;
	}
	pthread_mutex_unlock(&topo_lock);
	return rc;
}

int kinet_topo_osdev_pci(const char *name, char *out, size_t len)
{
	pthread_mutex_lock(&topo_lock);
	int rc = loaded ? -ENOENT : -ENODEV;
	for (hwloc_obj_t o = loaded ? hwloc_get_next_osdev(topo, NULL) : NULL; o;
	     o = hwloc_get_next_osdev(topo, o)) {
		if (!o->name || strcmp(o->name, name))
			continue;
		hwloc_obj_t p = o->parent;
		while (p && p->type != HWLOC_OBJ_PCI_DEVICE)
			p = p->parent;
		if (p) {
			snprintf(out, len, "%04x:%02x:%02x.%x", p->attr->pcidev.domain,
				 p->attr->pcidev.bus, p->attr->pcidev.dev, p->attr->pcidev.func);
			rc = 0;
		}
		break;
	}
	pthread_mutex_unlock(&topo_lock);
	return rc;
}

#else

int kinet_topo_load(const char *xml, char *why, size_t wl)
{
	(void)xml;
	snprintf(why, wl, "kinet was built without hwloc");
	return -ENOSYS;
}
void kinet_topo_unload(void) {}
int kinet_topo_distance(const char *a, const char *b)
{
	(void)a;
	(void)b;
	return -ENOSYS;
}
int kinet_topo_osdev_pci(const char *name, char *out, size_t len)
{
	(void)name;
	(void)out;
	(void)len;
	return -ENOSYS;
}
#endif

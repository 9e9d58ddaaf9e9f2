/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo.h - PCIe distance between a GPU and a NIC, from hwloc, in the terms
 * nvidia-smi topo uses: PIX (at most one PCIe bridge between them), PXB
 * (several bridges, no host bridge), PHB (through a PCIe host bridge), NODE
 * (between host bridges of one NUMA node), SYS (across NUMA nodes).
 * Without hwloc every call answers -ENOSYS.
 */
#ifndef KINET_MLX5_TOPO_H
#define KINET_MLX5_TOPO_H

#include <stddef.h>

enum kinet_pcie_dist {
	KINET_DIST_PIX = 0,
	KINET_DIST_PXB = 1,
	KINET_DIST_PHB = 2,
	KINET_DIST_NODE = 3,
	KINET_DIST_SYS = 4,
};

/* Loads the topology of this machine (xml == NULL) or of an hwloc XML
 * document (tests). 0, or a negative errno and *why. */
int kinet_topo_load(const char *xml, char *why, size_t whylen);
void kinet_topo_unload(void);
/* Distance between two PCI devices named by bus id ("0000:17:00.0"):
 * enum kinet_pcie_dist, -ENOENT when one is not in the topology. */
int kinet_topo_distance(const char *pci_a, const char *pci_b);
/* "PIX", "PXB", "PHB", "NODE", "SYS", or "n/a". */
const char *kinet_topo_dist_str(int d);
/* PCI bus id of an OS device (e.g. the RDMA device "mlx5_0"). */
int kinet_topo_osdev_pci(const char *name, char *out, size_t len);

#endif

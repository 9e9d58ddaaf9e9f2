/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * platform.h - what kinet-info reads about the machine around the GPUs and
 * NICs: libfabric (version, providers and their interfaces), the kernel and
 * its IOMMU mode, and per device (by PCI address, from sysfs) the NUMA node,
 * driver and firmware versions, the BAR1 size of a GPU, and ACS on the PCIe
 * path between a GPU and a NIC. Every item is a string: the value, or
 * "unknown (why)" when it cannot be read here; nothing here fails.
 */
#ifndef KINET_INFO_PLATFORM_H
#define KINET_INFO_PLATFORM_H

#include <limits.h>

#define PLAT_STR 256
#define PLAT_MAXPROV 64
#define PLAT_MAXBR 16

/* One item: its text, and whether it is known (else "unknown (why)"). */
struct plat_item {
	char s[PLAT_STR];
	int known;
};

struct plat_prov {
	char prov[64];    /* provider, e.g. "tcp;ofi_rxm" */
	char fabric[96];  /* fabric name, e.g. an IP network */
	char domain[96];  /* domain: the interface or device */
};

struct platform {
	struct plat_item kernel;     /* uname -r */
	struct plat_item iommu;      /* "on, translated (DMA-FQ)", "off (...)" */
	struct plat_item iommu_cmdline; /* the kernel's iommu= options */
	struct plat_item gpu_driver; /* NVIDIA kernel driver version */
	struct plat_item fi_version; /* libfabric at run time */
	char fi_built[32];           /* the headers kinet-info was built with, or "" */
	char fi_wire[64];            /* KINET_FI_PROVIDER: what the wire asks for */
	int fi_wire_found;           /* that provider is among those found */
	struct plat_item fi_note;    /* why no provider list, or "" */
	int nprov;
	struct plat_prov prov[PLAT_MAXPROV];
};

/* A GPU or a NIC, by PCI address. */
struct plat_dev {
	char bdf[16];                /* "0000:17:00.0", "" when unknown */
	char sysfs[PATH_MAX];        /* its sysfs directory (resolved), "" when none */
	struct plat_item numa;       /* NUMA node */
	int numa_node;               /* -1 when unknown or none */
	struct plat_item driver;     /* kernel driver and its version */
	struct plat_item firmware;   /* NIC firmware, GPU video BIOS */
	struct plat_item bar1;       /* GPU: BAR1 size */
	long long bar1_bytes;        /* -1 when unknown */
	struct plat_item iommu_group; /* the device's IOMMU group and its type */
};

/* ACS on the path between a GPU and a NIC: the bridges between them and
 * what their ACS control says. */
struct plat_acs {
	struct plat_item verdict;    /* "off on the path", "on at ...", "unknown (...)" */
	int nbr;
	char br[PLAT_MAXBR][16];     /* the bridges of the path */
	struct plat_item br_state[PLAT_MAXBR];
};

/* Machine-wide items. */
void plat_gather(struct platform *p);
/* One device. pci: a PCI address in any of the usual forms ("" unknown);
 * ibname: the RDMA device name of a NIC (NULL for a GPU). */
void plat_dev_gather(const char *pci, const char *ibname, int is_gpu, struct plat_dev *d);
/* ACS between a GPU and a NIC gathered above. */
void plat_acs_gather(const struct plat_dev *gpu, const struct plat_dev *nic, struct plat_acs *a);

#endif

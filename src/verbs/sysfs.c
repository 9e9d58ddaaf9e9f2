/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libkinet_sysfs.so: the one piece of sysfs a kinet-verbs device lacks that
 * unmodified RDMA stacks read. kinet-run preloads it (LD_PRELOAD).
 *
 * rdma-core names a device's sysfs folder (ibv_device.ibdev_path); stacks
 * that place NICs by PCI topology resolve "<that folder>/device" with
 * realpath(3) and fail when it does not exist (NVSHMEM's IB transports stop
 * at init: "realpath failed", "Failed to get paths for PCI devices"). A
 * kinet device is the software NIC, which runs on the CPUs and has no PCI
 * function, so /sys/class/infiniband/kinetN/device resolves here to the
 * CPUs' sysfs folder, /sys/devices/system/cpu: a topology reader then finds
 * the device on no PCI path shared with a GPU (NVSHMEM rates it "SYS" or
 * "NODE"), which is the truth. Every other path goes to the C library's
 * realpath untouched.
 *
 * The library links nothing of kinet: it is loaded into every program
 * kinet-run starts (mpirun included). The sanitizer build has none.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define KS_EXPORT __attribute__((visibility("default")))
#define KS_CLASS "/sys/class/infiniband/kinet"
#define KS_NIC "/sys/devices/system/cpu"

typedef char *(*realpath_fn)(const char *, char *);

static char *next_realpath(const char *path, char *resolved)
{
	static realpath_fn next;
	if (!next)
		next = (realpath_fn)dlsym(RTLD_NEXT, "realpath");
	if (!next) {
		errno = ENOSYS;
		return NULL;
	}
	return next(path, resolved);
}

/* Is path /sys/class/infiniband/kinetN/device (slashes repeated or trailing
 * allowed, as realpath allows them)? */
static int kinet_device_link(const char *path)
{
	if (strncmp(path, KS_CLASS, sizeof(KS_CLASS) - 1))
		return 0;
	const char *p = path + sizeof(KS_CLASS) - 1;
	if (*p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	if (*p != '/')
		return 0;
	while (*p == '/')
		p++;
	if (strncmp(p, "device", 6))
		return 0;
	p += 6;
	while (*p == '/')
		p++;
	return *p == 0;
}

KS_EXPORT char *realpath(const char *path, char *resolved)
{
	if (!path || !kinet_device_link(path))
		return next_realpath(path, resolved);
	char nic[PATH_MAX];
	if (!next_realpath(KS_NIC, nic))
		return NULL;
	if (resolved) {
		memcpy(resolved, nic, strlen(nic) + 1);
		return resolved;
	}
	/* a whole PATH_MAX of zeros past the name: NVSHMEM compares a GPU's
	 * path with this one over the GPU path's length */
	char *r = calloc(1, PATH_MAX);
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(r, nic, strlen(nic) + 1);
	return r;
}

/* _FORTIFY_SOURCE's entry (glibc): the same, with the caller's buffer size */
KS_EXPORT char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen)
{
	if (resolved && resolvedlen < PATH_MAX)
		abort(); /* what glibc does: __chk_fail */
	return realpath(path, resolved);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libkinet_sysfs.so: the two sysfs entries of an RDMA device that unmodified
 * stacks read and a kinet-verbs device lacks, which a software NIC can
 * answer truthfully. kinet-run preloads it (LD_PRELOAD).
 *
 * rdma-core names a device's sysfs folder (ibv_device.ibdev_path); stacks
 * that place NICs by PCI topology resolve "<that folder>/device" with
 * realpath(3) and fail when it does not exist (NVSHMEM's IB transports stop
 * at init: "realpath failed", "Failed to get paths for PCI devices"). A
 * kinet device is the software NIC, which runs on the CPUs and has no PCI
 * function, so /sys/class/infiniband/kinetN/device of a device kinet-verbs
 * has resolves here to the CPUs' sysfs folder, /sys/devices/system/cpu: a
 * topology reader then finds the device on no PCI path shared with a GPU
 * (NVSHMEM rates it "SYS" or "NODE"), which is the truth.
 *
 * The RoCE version of a GID, /sys/class/infiniband/kinetN/ports/P/
 * gid_attrs/types/I, is read with open(2) by stacks that pick GIDs or build
 * RoCE address vectors (NVSHMEM's ib_roce_get_version_num in every RC
 * INIT2RTR on RoCE). Under kinet-run it opens as a read-only in-memory file
 * holding what the kernel would print, "IB/RoCE v1" or "RoCE v2", asked of
 * kinet-verbs itself (kinet_verbs_gid_version, the one GID table); an entry
 * that holds no GID reads empty (where the kernel fails the read with
 * EINVAL, which the callers treat as "go on"); an index past the table, or
 * a device or port that does not exist, is ENOENT.
 *
 * Every other path goes to the C library untouched.
 *
 * The library links nothing of kinet (it asks kinet-verbs through dlopen):
 * it is loaded into every program kinet-run starts, mpirun included. The
 * sanitizer build has none.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KS_EXPORT __attribute__((visibility("default")))
#define KS_CLASS "/sys/class/infiniband/kinet"
#define KS_NIC "/sys/devices/system/cpu"

typedef char *(*realpath_fn)(const char *, char *);
typedef int (*gid_version_fn)(const char *, unsigned, unsigned);

/* kinet-verbs' answer for a GID entry (kinet_verbs_gid_version): the RoCE
 * version 1 or 2, 0 for an entry without a GID, -ENOENT for no such device,
 * port or entry, also when the libibverbs.so.1 found is not kinet-verbs'.
 * kinet-run put kinet-verbs first in the library path, and a program has
 * loaded it before it asks sysfs about a device. */
static int gid_version(const char *dev, unsigned port, unsigned index)
{
	void *h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
	gid_version_fn q = h ? (gid_version_fn)dlsym(h, "kinet_verbs_gid_version") : NULL;
	if (!q) {
		if (h)
			dlclose(h);
		return -ENOENT;
	}
	return q(dev, port, index); /* h stays open: the library stays loaded */
}

static char *next_realpath(const char *path, char *resolved)
{
	static realpath_fn next;
	realpath_fn f = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (realpath_fn)dlsym(RTLD_NEXT, "realpath");
		if (!f) {
			errno = ENOSYS;
			return NULL;
		}
		__atomic_store_n(&next, f, __ATOMIC_RELEASE);
	}
	return f(path, resolved);
}

/* Is path /sys/class/infiniband/kinetN/device (slashes repeated or trailing
 * allowed, as realpath allows them)? Fills the device name. */
static int kinet_device_link(const char *path, char *dev, size_t devlen)
{
	if (strncmp(path, KS_CLASS, sizeof(KS_CLASS) - 1))
		return 0;
	const char *p = path + sizeof(KS_CLASS) - 1;
	if (*p < '0' || *p > '9')
		return 0;
	const char *num = p;
	while (*p >= '0' && *p <= '9')
		p++;
	if (p - num > 9)
		return 0;
	snprintf(dev, devlen, "kinet%.*s", (int)(p - num), num);
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
	char dev[32];
	if (!path || !kinet_device_link(path, dev, sizeof(dev)))
		return next_realpath(path, resolved);
	if (gid_version(dev, 1, 0) < 0) { /* no such device */
		errno = ENOENT;
		return NULL;
	}
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

/* ---- gid_attrs/types ---------------------------------------------------------- */

typedef int (*open_fn)(const char *, int, ...);

/* Is path a kinet device's gid_attrs/types/I? Fills the device name, port
 * and index. */
static int kinet_gid_type_file(const char *path, char *dev, size_t devlen, unsigned *port,
			       unsigned *index)
{
	if (strncmp(path, KS_CLASS, sizeof(KS_CLASS) - 1))
		return 0;
	unsigned n;
	int end = 0;
	if (sscanf(path + sizeof("/sys/class/infiniband/") - 1,
		   "kinet%u/ports/%u/gid_attrs/types/%u%n", &n, port, index, &end) != 3 ||
	    path[sizeof("/sys/class/infiniband/") - 1 + end])
		return 0;
	/* digits only where the numbers are (sscanf takes signs and spaces) */
	for (const char *p = path + sizeof("/sys/class/infiniband/") - 1; *p; p++)
		if (*p == ' ' || *p == '+' || *p == '-')
			return 0;
	snprintf(dev, devlen, "kinet%u", n);
	return 1;
}

/* The file's fd, or -1 with errno. */
static int gid_type_open(const char *dev, unsigned port, unsigned index, int flags)
{
	if ((flags & O_ACCMODE) != O_RDONLY) {
		errno = EACCES;
		return -1;
	}
	int v = gid_version(dev, port, index);
	if (v < 0) {
		errno = -v;
		return -1;
	}
	int fd = memfd_create("kinet-sysfs-gid-type", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
	if (fd < 0)
		return -1;
	const char *text = v == 2 ? "RoCE v2\n" : v == 1 ? "IB/RoCE v1\n" : "";
	size_t len = strlen(text);
	if ((len && write(fd, text, len) != (ssize_t)len) || lseek(fd, 0, SEEK_SET) != 0) {
		int e = errno;
		close(fd);
		errno = e ? e : EIO;
		return -1;
	}
	return fd;
}

/* The C library's open functions, looked up once each. */
enum { KS_OPEN, KS_OPEN64, KS_OPEN_2, KS_OPEN64_2, KS_NOPEN };
static const char *const ks_open_name[KS_NOPEN] = {"open", "open64", "__open_2", "__open64_2"};

static int ks_open(int which, const char *path, int flags, mode_t mode)
{
	static open_fn next[KS_NOPEN];
	char dev[32];
	unsigned port, index;
	if (path && kinet_gid_type_file(path, dev, sizeof(dev), &port, &index))
		return gid_type_open(dev, port, index, flags);
	open_fn f = __atomic_load_n(&next[which], __ATOMIC_ACQUIRE);
	if (!f) {
		f = (open_fn)dlsym(RTLD_NEXT, ks_open_name[which]);
		if (!f) {
			errno = ENOSYS;
			return -1;
		}
		__atomic_store_n(&next[which], f, __ATOMIC_RELEASE);
	}
	return f(path, flags, mode);
}

/* the mode argument is there only with O_CREAT or O_TMPFILE (whose bits
 * include O_DIRECTORY's: all of them, as the C library tests it) */
#define KS_MODE(flags, mode)                                                                 \
	do {                                                                                 \
		if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) {             \
			va_list ap;                                                          \
			va_start(ap, flags);                                                 \
			mode = (mode_t)va_arg(ap, int);                                      \
			va_end(ap);                                                          \
		}                                                                            \
	} while (0)

KS_EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	KS_MODE(flags, mode);
	return ks_open(KS_OPEN, path, flags, mode);
}

KS_EXPORT int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	KS_MODE(flags, mode);
	return ks_open(KS_OPEN64, path, flags, mode);
}

/* _FORTIFY_SOURCE's entries (glibc): open without a mode */
KS_EXPORT int __open_2(const char *path, int flags)
{
	return ks_open(KS_OPEN_2, path, flags, 0);
}

KS_EXPORT int __open64_2(const char *path, int flags)
{
	return ks_open(KS_OPEN64_2, path, flags, 0);
}

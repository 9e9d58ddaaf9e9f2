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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KS_EXPORT __attribute__((visibility("default")))
#define KS_CLASS "/sys/class/infiniband/kinet"
#define KS_NIC "/sys/devices/system/cpu"

typedef char *(*realpath_fn)(const char *, char *);
typedef int (*open_fn)(const char *, int, ...);
typedef int (*gid_version_fn)(unsigned, unsigned, unsigned);

/* The definition of name that follows this library's (the C library's),
 * looked up once into *slot; NULL with ENOSYS when there is none. */
static void *next_sym(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		if (!f) {
			errno = ENOSYS;
			return NULL;
		}
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	}
	return f;
}

/* kinet-verbs' answer for a GID entry of device kinet<dev>
 * (kinet_verbs_gid_version): the RoCE version 1 or 2, 0 for an entry
 * without a GID, -ENOENT for no such device, port or entry, also when the
 * libibverbs.so.1 found is not kinet-verbs'. kinet-run put kinet-verbs first
 * in the library path, and a program has loaded it before it asks sysfs
 * about a device; it is opened once and stays loaded. */
static int gid_version(unsigned dev, unsigned port, unsigned index)
{
	static void *q;
	gid_version_fn f = (gid_version_fn)__atomic_load_n(&q, __ATOMIC_ACQUIRE);
	if (!f) {
		void *h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
		f = h ? (gid_version_fn)dlsym(h, "kinet_verbs_gid_version") : NULL;
		if (!f) {
			if (h)
				dlclose(h);
			return -ENOENT;
		}
		if (__atomic_exchange_n(&q, (void *)f, __ATOMIC_ACQ_REL))
			dlclose(h); /* another thread's handle holds it */
	}
	return f(dev, port, index);
}

/* Moves *p past the literal lit; 0 when *p does not start with it. */
static int ks_skip(const char **p, const char *lit)
{
	size_t n = strlen(lit);
	if (strncmp(*p, lit, n))
		return 0;
	*p += n;
	return 1;
}

/* Reads a number of 1 to 9 decimal digits (no sign, no space) at *p and
 * moves *p past it; 0 when there is none. */
static int ks_number(const char **p, unsigned *out)
{
	const char *s = *p;
	unsigned v = 0;
	while (*s >= '0' && *s <= '9' && s - *p < 9)
		v = v * 10 + (unsigned)(*s++ - '0');
	if (s == *p || (*s >= '0' && *s <= '9'))
		return 0;
	*out = v;
	*p = s;
	return 1;
}

/* The part of path after /sys/class/infiniband/kinet<dev>, with dev; NULL
 * when path is not under a kinet device's folder. */
static const char *kinet_dev(const char *path, unsigned *dev)
{
	const char *p = path;
	return ks_skip(&p, KS_CLASS) && ks_number(&p, dev) ? p : NULL;
}

/* Is path /sys/class/infiniband/kinet<dev>/device (slashes repeated or
 * trailing allowed, as realpath allows them)? */
static int kinet_device_link(const char *path, unsigned *dev)
{
	const char *p = kinet_dev(path, dev);
	if (!p || *p != '/')
		return 0;
	while (*p == '/')
		p++;
	if (!ks_skip(&p, "device"))
		return 0;
	while (*p == '/')
		p++;
	return *p == 0;
}

KS_EXPORT char *realpath(const char *path, char *resolved)
{
	static void *next;
	unsigned dev;
	if (!path || !kinet_device_link(path, &dev)) {
		realpath_fn f = (realpath_fn)next_sym(&next, "realpath");
		return f ? f(path, resolved) : NULL;
	}
	if (gid_version(dev, 1, 0) < 0) { /* no such device */
		errno = ENOENT;
		return NULL;
	}
	char nic[PATH_MAX];
	realpath_fn f = (realpath_fn)next_sym(&next, "realpath");
	if (!f || !f(KS_NIC, nic))
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

/* Is path /sys/class/infiniband/kinet<dev>/ports/<port>/gid_attrs/types/
 * <index>, exactly? */
static int kinet_gid_type_file(const char *path, unsigned *dev, unsigned *port,
			       unsigned *index)
{
	const char *p = kinet_dev(path, dev);
	return p && ks_skip(&p, "/ports/") && ks_number(&p, port) &&
	       ks_skip(&p, "/gid_attrs/types/") && ks_number(&p, index) && *p == 0;
}

/* The file's fd, or -1 with errno. */
static int gid_type_open(unsigned dev, unsigned port, unsigned index, int flags)
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
	static void *next[KS_NOPEN];
	unsigned dev, port, index;
	if (path && kinet_gid_type_file(path, &dev, &port, &index))
		return gid_type_open(dev, port, index, flags);
	open_fn f = (open_fn)next_sym(&next[which], ks_open_name[which]);
	return f ? f(path, flags, mode) : -1;
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

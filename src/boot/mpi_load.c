/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_load.c - finds and loads the MPI module (mpi_module.h) on first need.
 *
 * The module is looked for beside the object that holds this code (the
 * directory of libkinet.so, through dladdr), where the build and the install
 * put it, and only when it is not there by its bare name (LD_LIBRARY_PATH,
 * the system's library path). It is loaded with RTLD_GLOBAL: Open MPI loads
 * its own components later, and they expect libmpi's symbols in the global
 * scope.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "boot/boot_int.h"
#include "boot/mpi_module.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const struct kboot_mpi_ops *loaded;
static int load_err = -ELIBACC; /* until loaded; -ENOSYS: not built */
static char load_why[PATH_MAX + 400];

#if KINET_HAVE_MPI
/* The directory of the object this function is in ("" when unknown). */
static void own_dir(char *dir, size_t n)
{
	Dl_info di;
	dir[0] = 0;
	if (!dladdr((void *)own_dir, &di) || !di.dli_fname)
		return;
	const char *slash = strrchr(di.dli_fname, '/');
	if (!slash || (size_t)(slash - di.dli_fname) >= n)
		return;
	memcpy(dir, di.dli_fname, (size_t)(slash - di.dli_fname));
	dir[slash - di.dli_fname] = 0;
}

static void load(void)
{
	char dir[PATH_MAX], path[PATH_MAX + sizeof(KBOOT_MPI_MODULE) + 1];
	void *h = NULL;
	own_dir(dir, sizeof(dir));
	if (dir[0]) {
		snprintf(path, sizeof(path), "%s/%s", dir, KBOOT_MPI_MODULE);
		if (!access(path, F_OK)) {
			/* there: it loads, or says why (libmpi is missing) */
			h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
			if (!h) {
				snprintf(load_why, sizeof(load_why),
					 "%s could not be loaded: %s (it needs the MPI library "
					 "kinet was built with)", path, dlerror());
				return;
			}
		}
	}
	if (!h) {
		snprintf(path, sizeof(path), "%s", KBOOT_MPI_MODULE);
		h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
		if (!h) {
			snprintf(load_why, sizeof(load_why),
				 "the MPI module %s is not installed (not beside libkinet in %s, "
				 "nor in the library path: %s)", KBOOT_MPI_MODULE,
				 dir[0] ? dir : "(unknown)", dlerror());
			return;
		}
	}
	kboot_mpi_entry_fn entry;
	*(void **)&entry = dlsym(h, KBOOT_MPI_ENTRY);
	if (!entry) {
		snprintf(load_why, sizeof(load_why), "%s has no %s: not a kinet MPI module", path,
			 KBOOT_MPI_ENTRY);
		return;
	}
	const struct kboot_mpi_ops *ops = entry();
	if (!ops || ops->abi != KBOOT_MPI_ABI) {
		snprintf(load_why, sizeof(load_why),
			 "%s speaks module interface %u, this libkinet %d (an installation of "
			 "another kinet version?)", path, ops ? ops->abi : 0, KBOOT_MPI_ABI);
		return;
	}
	KLOG_DBG("boot: MPI module loaded from %s", path);
	loaded = ops;
	load_err = 0;
}
#else
static void load(void)
{
	load_err = -ENOSYS;
	snprintf(load_why, sizeof(load_why),
		 "this build of kinet has no MPI (rebuild it with Open MPI installed: "
		 "libopenmpi-dev)");
}
#endif

int kboot_mpi_load(const struct kboot_mpi_ops **ops, const char **why)
{
	pthread_once(&load_once, load);
	*ops = loaded;
	*why = load_why;
	return load_err;
}

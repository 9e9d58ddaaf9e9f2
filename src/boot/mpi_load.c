/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_load.c - finds and loads a launcher module (mpi_module.h: the MPI one,
 * the PMIx one) on first need.
 *
 * A module is looked for beside the object that holds this code (the
 * directory of libkinet.so, through dladdr), where the build and the install
 * put it, and only when it is not there by its bare name (LD_LIBRARY_PATH,
 * the system's library path). It is loaded with RTLD_GLOBAL: Open MPI loads
 * its own components later, and they expect libmpi's symbols in the global
 * scope (PMIx's plugins likewise expect libpmix's).
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

/* One launcher module: what to load, and what came of it. */
struct kboot_mod {
	const char *file, *entry, *what, *lib; /* what: "MPI"; lib: "the MPI library" */
	const char *no_build;                  /* why, when this build has none */
	int built;
	pthread_once_t once;
	const struct kboot_mpi_ops *ops;
	int err; /* until loaded; -ENOSYS: not built */
	char why[PATH_MAX + 400];
};

static struct kboot_mod mod_mpi = {
	.file = KBOOT_MPI_MODULE,
	.entry = KBOOT_MPI_ENTRY,
	.what = "MPI",
	.lib = "the MPI library kinet was built with",
	.no_build = "this build of kinet has no MPI (rebuild it with Open MPI installed: "
		    "libopenmpi-dev)",
	.built = KINET_HAVE_MPI,
	.once = PTHREAD_ONCE_INIT,
	.err = -ELIBACC,
};

static struct kboot_mod mod_pmix = {
	.file = KBOOT_PMIX_MODULE,
	.entry = KBOOT_PMIX_ENTRY,
	.what = "PMIx",
	.lib = "the PMIx library kinet was built with, libpmix",
	.no_build = "this build of kinet has no PMIx (rebuild it with PMIx installed: "
		    "libpmix-dev)",
	.built = KINET_HAVE_PMIX,
	.once = PTHREAD_ONCE_INIT,
	.err = -ELIBACC,
};

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

static void load(struct kboot_mod *m)
{
	if (!m->built) {
		m->err = -ENOSYS;
		snprintf(m->why, sizeof(m->why), "%s", m->no_build);
		return;
	}
	char dir[PATH_MAX], path[PATH_MAX + 64];
	void *h = NULL;
	own_dir(dir, sizeof(dir));
	if (dir[0]) {
		snprintf(path, sizeof(path), "%s/%s", dir, m->file);
		if (!access(path, F_OK)) {
			/* there: it loads, or says why (its library is missing) */
			h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
			if (!h) {
				snprintf(m->why, sizeof(m->why),
					 "%s could not be loaded: %s (it needs %s)", path, dlerror(),
					 m->lib);
				return;
			}
		}
	}
	if (!h) {
		snprintf(path, sizeof(path), "%s", m->file);
		h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
		if (!h) {
			snprintf(m->why, sizeof(m->why),
				 "the %s module %s is not installed (not beside libkinet in %s, "
				 "nor in the library path: %s)", m->what, m->file,
				 dir[0] ? dir : "(unknown)", dlerror());
			return;
		}
	}
	kboot_mpi_entry_fn entry;
	*(void **)&entry = dlsym(h, m->entry);
	if (!entry) {
		snprintf(m->why, sizeof(m->why), "%s has no %s: not a kinet %s module", path,
			 m->entry, m->what);
		return;
	}
	const struct kboot_mpi_ops *ops = entry();
	if (!ops || ops->abi != KBOOT_MPI_ABI) {
		snprintf(m->why, sizeof(m->why),
			 "%s speaks module interface %u, this libkinet %d (an installation of "
			 "another kinet version?)", path, ops ? ops->abi : 0, KBOOT_MPI_ABI);
		return;
	}
	KLOG_DBG("boot: %s module loaded from %s", m->what, path);
	m->ops = ops;
	m->err = 0;
}

static void load_mpi(void)
{
	load(&mod_mpi);
}

static void load_pmix(void)
{
	load(&mod_pmix);
}

int kboot_mpi_load(const struct kboot_mpi_ops **ops, const char **why)
{
	pthread_once(&mod_mpi.once, load_mpi);
	*ops = mod_mpi.ops;
	*why = mod_mpi.why;
	return mod_mpi.err;
}

int kboot_pmix_load(const struct kboot_mpi_ops **ops, const char **why)
{
	pthread_once(&mod_pmix.once, load_pmix);
	*ops = mod_pmix.ops;
	*why = mod_pmix.why;
	return mod_pmix.err;
}

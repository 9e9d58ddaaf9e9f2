/* SPDX-License-Identifier: BSD-3-Clause */
/* Run-time modules, found beside libkinet (see internal.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "core/internal.h"

void *kinet_module_open(const char *file, int flags)
{
	/* The folder of the object this code is in: libkinet.so, or a program
	 * that links the library's objects statically. A path, not a name, so
	 * neither LD_LIBRARY_PATH nor a dlopen interposer (sanitizers) changes
	 * which module a library loads. */
	Dl_info di;
	char path[4096];
	const char *slash;
	if (dladdr((void *)kinet_module_open, &di) && di.dli_fname &&
	    (slash = strrchr(di.dli_fname, '/')) &&
	    (size_t)snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - di.dli_fname),
			     di.dli_fname, file) < sizeof(path))
		return dlopen(path, flags);
	return dlopen(file, flags); /* no folder known: the search path */
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* The library's version (kinet_version), as compiled from kinet/kinet.h. */
#include <kinet/kinet.h>

#define KV_STR2(x) #x
#define KV_STR(x) KV_STR2(x)

const char *kinet_version(int *major, int *minor, int *patch)
{
	if (major)
		*major = KINET_VERSION_MAJOR;
	if (minor)
		*minor = KINET_VERSION_MINOR;
	if (patch)
		*patch = KINET_VERSION_PATCH;
	return KV_STR(KINET_VERSION_MAJOR) "." KV_STR(KINET_VERSION_MINOR) "." KV_STR(
		KINET_VERSION_PATCH);
}

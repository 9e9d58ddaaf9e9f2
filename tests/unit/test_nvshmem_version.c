/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The version that kinet's NVSHMEM headers (kinet/nvshmem/nvshmem.h) state,
 * host side: the macros NVSHMEM 3.4's headers define, with NVSHMEM's
 * meanings (NVSHMEM_MAJOR/MINOR_VERSION: the OpenSHMEM specification
 * followed, 1.3; NVSHMEM_VENDOR_*: the NVSHMEM release whose API this is,
 * 3.4.5), usable in #if as programs use them, and the calls that report
 * them.
 */
#define KINET_NVSHMEM_HOST_EXECUTOR 1 /* kinet's stand-ins, even with CUDA installed */
#include <criterion/criterion.h>
#include <string.h>
#include <nvshmem.h>
#include <nvshmemx.h>

/* what a program's preprocessor sees */
#if defined(NVSHMEM_VENDOR_VERSION) && NVSHMEM_VENDOR_VERSION >= 30400 &&                    \
	NVSHMEM_VENDOR_VERSION < 30500
static const int vendor_3_4_in_if = 1;
#else
static const int vendor_3_4_in_if = 0;
#endif
#if defined(NVSHMEM_VENDOR_MAJOR_VERSION) && NVSHMEM_VENDOR_MAJOR_VERSION >= 3
static const int vendor_major_3_in_if = 1;
#else
static const int vendor_major_3_in_if = 0;
#endif

Test(nvshmem_version, macros_state_nvshmem_3_4_5_api)
{
	cr_assert_eq(NVSHMEM_VENDOR_MAJOR_VERSION, 3);
	cr_assert_eq(NVSHMEM_VENDOR_MINOR_VERSION, 4);
	cr_assert_eq(NVSHMEM_VENDOR_PATCH_VERSION, 5);
	cr_assert_eq(NVSHMEM_VENDOR_VERSION, 30405);
	cr_assert_eq(NVSHMEM_VENDOR_VERSION, NVSHMEM_VENDOR_MAJOR_VERSION * 10000 +
						     NVSHMEM_VENDOR_MINOR_VERSION * 100 +
						     NVSHMEM_VENDOR_PATCH_VERSION);
	cr_assert(vendor_3_4_in_if, "NVSHMEM_VENDOR_VERSION not 3.4.x in #if");
	cr_assert(vendor_major_3_in_if, "NVSHMEM_VENDOR_MAJOR_VERSION not 3 in #if");
	/* the OpenSHMEM specification version, as NVSHMEM 3.4 states it */
	cr_assert_eq(NVSHMEM_MAJOR_VERSION, 1);
	cr_assert_eq(NVSHMEM_MINOR_VERSION, 3);
}

Test(nvshmem_version, calls_report_the_macros)
{
	int major = -1, minor = -1, patch = -1;
	nvshmem_info_get_version(&major, &minor);
	cr_assert_eq(major, NVSHMEM_MAJOR_VERSION);
	cr_assert_eq(minor, NVSHMEM_MINOR_VERSION);
	major = minor = -1;
	nvshmemx_vendor_get_version_info(&major, &minor, &patch);
	cr_assert_eq(major, 3);
	cr_assert_eq(minor, 4);
	cr_assert_eq(patch, 5);
	char name[NVSHMEM_MAX_NAME_LEN];
	memset(name, 'x', sizeof(name));
	nvshmem_info_get_name(name);
	cr_assert_str_eq(name, NVSHMEM_VENDOR_STRING);
	cr_assert_lt(strlen(NVSHMEM_VENDOR_STRING), (size_t)NVSHMEM_MAX_NAME_LEN);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvshmem.h (kinet) - NVSHMEM's names and signatures on kinet's PGAS layer
 * (kinet/shmem.h, kinet/shmem_device.h): a program written against NVSHMEM's
 * host and device API compiles unchanged with -I<prefix>/include/kinet/nvshmem
 * and links against libkinet_shmem (and libkinet). With nvcc the device
 * calls are CUDA device functions; with a C or C++ compiler they run on the
 * host executor, kernels launched with nvshmemx_collective_launch on CPU
 * threads (kinet/nvshmem/kinet_cuda_host.h provides the CUDA names such a
 * program uses around them).
 *
 * Every name here is a static inline wrapper of a kinet call; docs/shmem.md
 * maps each to it and lists what NVSHMEM has that this header does not.
 * Errors: NVSHMEM's calls return nothing (or a value); kinet's error of the
 * call is kept as the PE's first error (kinet_shmem_error(), kn_shmem_error())
 * and logged where the host sees it. Waits never hang on a dead peer: they
 * end at KINET_SHMEM_TIMEOUT_MS with that error kept.
 *
 * This file also holds the nvshmemx_ extensions (kinet/nvshmem/nvshmemx.h
 * includes it), so either include gives the whole API.
 */
#ifndef KINET_NVSHMEM_H
#define KINET_NVSHMEM_H

#include <assert.h> /* NVSHMEM's headers bring assert; its examples rely on it */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* The CUDA names around the calls (cudaStream_t, dim3, cudaMalloc, ...):
 * CUDA's own runtime (KNX_NV_CUDART 1) under nvcc, or in a host file that
 * includes <cuda_runtime.h> before this header, or when <cuda_runtime.h> is
 * on the include path (so that a host .cpp of a CUDA program may include
 * it after this header too); otherwise, and whenever the program defines
 * KINET_NVSHMEM_HOST_EXECUTOR, kinet's stand-ins for host-executor builds
 * (kinet/nvshmem/kinet_cuda_host.h). */
#if defined(__CUDACC__) || defined(__CUDA_RUNTIME_H__) || defined(CUDART_VERSION)
#define KNX_NV_CUDART 1
#elif defined(KINET_NVSHMEM_HOST_EXECUTOR)
#define KNX_NV_CUDART 0
#elif defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#define KNX_NV_CUDART 1
#else
#define KNX_NV_CUDART 0
#endif
#else
#define KNX_NV_CUDART 0
#endif
#if KNX_NV_CUDART
#include <cuda_runtime.h>
#include <cuda.h>      /* CUmodule */
#include <cuda_fp16.h> /* half */
#include <cuda_bf16.h> /* __nv_bfloat16 */
#else
#include <kinet/nvshmem/kinet_cuda_host.h>
#endif
#include <kinet/shmem.h>
#include <kinet/shmem_device.h>

/* ---- qualifiers --------------------------------------------------------------------- */

#if defined(__CUDACC__)
#define KNX_NV_D static __device__ __forceinline__           /* device calls */
#define KNX_NV_HD static __host__ __device__ __forceinline__ /* host and device */
#define KNX_NV_H static inline                                /* host calls */
#else
#define KNX_NV_D static inline
#define KNX_NV_HD static inline
#define KNX_NV_H static inline
#endif

/* True where the device side of a host-and-device call runs: CUDA device
 * code, or a host-executor thread inside a launch. */
#if defined(__CUDA_ARCH__)
#define KNX_NV_ON_DEVICE() 1
#elif defined(__CUDACC__)
#define KNX_NV_ON_DEVICE() 0
#else
#define KNX_NV_ON_DEVICE() (kinet_shmem_host_self()->in_launch)
#endif

/* A call NVSHMEM offers to host and device code: the device operation
 * (dev) where device code runs, the library's host-initiated one (host)
 * elsewhere (kinet/shmem.h: the CPU posts with the host executor, a kernel
 * of one thread runs it with the CUDA executor). Both return an int. */
#if defined(__CUDA_ARCH__)
#define KNX_NV_DUAL(dev, host) (dev)
#elif defined(__CUDACC__)
#define KNX_NV_DUAL(dev, host) (host)
#else
#define KNX_NV_DUAL(dev, host) (KNX_NV_ON_DEVICE() ? (dev) : (host))
#endif

/* ---- constants ------------------------------------------------------------------------ */

/* The version macros of NVSHMEM 3.4's headers, with its meanings.
 * NVSHMEM_MAJOR_VERSION and NVSHMEM_MINOR_VERSION are the OpenSHMEM
 * specification version NVSHMEM follows (1.3), not a release; they are what
 * nvshmem_info_get_version reports. The NVSHMEM_VENDOR_* ones are the NVSHMEM
 * release whose API these headers implement: 3.4.5, the release whose own
 * programs are built against them (docs/shmem.md), and NVSHMEM_VENDOR_VERSION
 * is major * 10000 + minor * 100 + patch (30405), as NVSHMEM computes it, for
 * #if tests; nvshmemx_vendor_get_version_info reports the three. The name
 * (nvshmem_info_get_name) stays kinet's. */
#define NVSHMEM_MAJOR_VERSION 1
#define NVSHMEM_MINOR_VERSION 3
#define NVSHMEM_VENDOR_MAJOR_VERSION 3
#define NVSHMEM_VENDOR_MINOR_VERSION 4
#define NVSHMEM_VENDOR_PATCH_VERSION 5
#define NVSHMEM_VENDOR_VERSION                                                              \
	((NVSHMEM_VENDOR_MAJOR_VERSION) * 10000 + (NVSHMEM_VENDOR_MINOR_VERSION) * 100 +     \
	 (NVSHMEM_VENDOR_PATCH_VERSION))
#define NVSHMEM_VENDOR_STRING "kinet"
#define NVSHMEM_MAX_NAME_LEN 256

#define NVSHMEM_CMP_EQ KN_SHMEM_CMP_EQ
#define NVSHMEM_CMP_NE KN_SHMEM_CMP_NE
#define NVSHMEM_CMP_GT KN_SHMEM_CMP_GT
#define NVSHMEM_CMP_LE KN_SHMEM_CMP_LE
#define NVSHMEM_CMP_LT KN_SHMEM_CMP_LT
#define NVSHMEM_CMP_GE KN_SHMEM_CMP_GE

#define NVSHMEM_SIGNAL_SET KN_SIG_SET
#define NVSHMEM_SIGNAL_ADD KN_SIG_ADD

#define NVSHMEM_THREAD_SINGLE 0
#define NVSHMEM_THREAD_FUNNELED 1
#define NVSHMEM_THREAD_SERIALIZED 2
#define NVSHMEM_THREAD_MULTIPLE 3

typedef int32_t nvshmem_team_t;
#define NVSHMEM_TEAM_INVALID KINET_SHMEM_TEAM_INVALID
#define NVSHMEM_TEAM_WORLD KINET_SHMEM_TEAM_WORLD
#define NVSHMEM_TEAM_SHARED KINET_SHMEM_TEAM_SHARED
#define NVSHMEMX_TEAM_NODE KINET_SHMEM_TEAM_NODE
#define NVSHMEM_TEAM_WORLD_INDEX KINET_SHMEM_TEAM_WORLD
#define NVSHMEM_TEAM_SHARED_INDEX KINET_SHMEM_TEAM_SHARED
#define NVSHMEMX_TEAM_NODE_INDEX KINET_SHMEM_TEAM_NODE

/* A team's configuration, NVSHMEM 3.4's layout (64 bytes): version 2
 * (version holds (2 << 16) + the size); version 1 has num_contexts only.
 * kinet keeps the config a team was split with and gives it back
 * (nvshmem_team_get_config); it has no contexts and no teams made from a
 * unique id, so it does nothing else with the fields. */
typedef uint64_t nvshmemx_team_uniqueid_t;
typedef struct {
	int version;
	int num_contexts;
	nvshmemx_team_uniqueid_t uniqueid;
	char padding[48];
} nvshmem_team_config_v2;
typedef struct {
	int version;
	int num_contexts;
	char padding[56];
} nvshmem_team_config_v1;
typedef nvshmem_team_config_v2 nvshmem_team_config_t;
#define NVSHMEM_TEAM_UNIQUID_INITIALIZER 0xFFFFFFFFFFFFFFFFull
#define NVSHMEM_TEAM_CONFIG_INITIALIZER                                                   \
	{(2 << 16) + (int)sizeof(nvshmem_team_config_t), -1, NVSHMEM_TEAM_UNIQUID_INITIALIZER, \
	 {0}}
#define NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS 0x0000000000000001
#define NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID 0x0000000000000002

/* nvshmemx_init_attr */
#define NVSHMEMX_INIT_THREAD_PES 1
#define NVSHMEMX_INIT_WITH_MPI_COMM (1 << 1)
#define NVSHMEMX_INIT_WITH_SHMEM (1 << 2)
#define NVSHMEMX_INIT_WITH_UNIQUEID (1 << 3)
/* The unique id of a job (nvshmemx_get_uniqueid; kinet_shmem_uniqueid: rank
 * 0's bootstrap address and the job secret) and where init finds it. */
typedef struct {
	int version;
	char internal[KINET_SHMEM_UNIQUEID_LEN];
} nvshmemx_uniqueid_v1;
typedef nvshmemx_uniqueid_v1 nvshmemx_uniqueid_t;
#define NVSHMEMX_UNIQUEID_INITIALIZER {1, {0}}
typedef struct {
	int version;
	nvshmemx_uniqueid_v1 *id;
	int myrank;
	int nranks;
} nvshmemx_uniqueid_args_v1;
typedef nvshmemx_uniqueid_args_v1 nvshmemx_uniqueid_args_t;
#define NVSHMEMX_UNIQUEID_ARGS_INITIALIZER {1, NULL, -1, -1}
typedef struct {
	int version;
	nvshmemx_uniqueid_args_t uid_args;
	int cuda_device_id; /* kinet: the GPU of the CUDA executor (-1: the current one) */
} nvshmemx_init_args_t;
typedef struct {
	int version;
	void *mpi_comm; /* MPI_Comm *: must span MPI_COMM_WORLD (kinet's MPI
			   bootstrap works on a duplicate of it) */
	nvshmemx_init_args_t args; /* the unique id (nvshmemx_set_attr_uniqueid_args) */
	size_t heap_size; /* kinet: the device heap (0: KINET_SHMEM_HEAP_SIZE) */
} nvshmemx_init_attr_t;
#define NVSHMEMX_INIT_ATTR_INITIALIZER {1, NULL, {1, NVSHMEMX_UNIQUEID_ARGS_INITIALIZER, -1}, 0}

/* return codes of the nvshmemx calls that have one */
#define NVSHMEMX_SUCCESS 0
#define NVSHMEMX_ERROR_INVALID_VALUE 1
#define NVSHMEMX_ERROR_OUT_OF_MEMORY 2
#define NVSHMEMX_ERROR_NOT_SUPPORTED 3
#define NVSHMEMX_ERROR_SYMMETRY 4
#define NVSHMEMX_ERROR_GPU_NOT_SELECTED 5
#define NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED 6
#define NVSHMEMX_ERROR_INTERNAL 7

/* The message macros NVSHMEM's public headers carry and its perftest
 * programs use: a line on stderr naming the place (file, function, line),
 * or on stdout for a warning; _EXIT ends the process. The _JMP forms set
 * the status and jump to a label on the condition their name says. */
#define KNX_NV_MSG_AT(stream, ...)                                                       \
	do {                                                                             \
		fprintf(stream, "%s:%s:%d: ", __FILE__, __func__, __LINE__);             \
		fprintf(stream, __VA_ARGS__);                                            \
		fputc('\n', stream);                                                     \
	} while (0)
#define NVSHMEMI_ERROR_PRINT(...) KNX_NV_MSG_AT(stderr, __VA_ARGS__)
#define NVSHMEMI_ERROR_EXIT(...)                                                         \
	do {                                                                             \
		KNX_NV_MSG_AT(stderr, __VA_ARGS__);                                      \
		exit(-1);                                                                \
	} while (0)
#define NVSHMEMI_WARN_PRINT(...)                                                         \
	do {                                                                             \
		fputs("WARN: ", stdout);                                                 \
		fprintf(stdout, __VA_ARGS__);                                            \
		fputc('\n', stdout);                                                     \
	} while (0)
#define KNX_NV_JMP_IF(cond, what, status, err, label, ...)                               \
	do {                                                                             \
		if (cond) {                                                              \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, what);        \
			fprintf(stderr, __VA_ARGS__);                                    \
			fputc('\n', stderr);                                             \
			status = err;                                                    \
			goto label;                                                      \
		}                                                                        \
	} while (0)
#define NVSHMEMI_ERROR_JMP(status, err, label, ...)                                      \
	KNX_NV_JMP_IF(1, "error", status, err, label, __VA_ARGS__)
#define NVSHMEMI_NULL_ERROR_JMP(var, status, err, label, ...)                            \
	KNX_NV_JMP_IF((var) == NULL, "NULL value", status, err, label, __VA_ARGS__)
#define NVSHMEMI_EQ_ERROR_JMP(status, expected, err, label, ...)                         \
	KNX_NV_JMP_IF((status) == (expected), "error status", status, err, label, __VA_ARGS__)
#define NVSHMEMI_NE_ERROR_JMP(status, expected, err, label, ...)                         \
	KNX_NV_JMP_IF((status) != (expected), "unexpected status", status, err, label,   \
		      __VA_ARGS__)
#define NVSHMEMI_NZ_ERROR_JMP(status, err, label, ...)                                   \
	KNX_NV_JMP_IF((status) != 0, "non-zero status", status, err, label, __VA_ARGS__)

#define NVSHMEM_STATUS_NOT_INITIALIZED 0
#define NVSHMEM_STATUS_IS_INITIALIZED 2

/* ---- setup, exit, query ------------------------------------------------------------- */

/* kinet_shmem_init with the environment's job (TCP, or mpirun's MPI); a
 * failure is logged and the process exits, as NVSHMEM does. */
KNX_NV_H void nvshmem_init(void)
{
	if (kinet_shmem_init(NULL) && !kinet_shmem_initialized())
		exit(1);
}

KNX_NV_H int nvshmem_init_thread(int requested, int *provided)
{
	int rc = kinet_shmem_init(NULL);
	if (provided)
		*provided = requested <= NVSHMEM_THREAD_MULTIPLE ? requested : NVSHMEM_THREAD_MULTIPLE;
	return rc ? NVSHMEMX_ERROR_INTERNAL : 0;
}

/* With NVSHMEMX_INIT_WITH_MPI_COMM the job is mpirun's (kinet_boot_init_env
 * chooses MPI under mpirun); with NVSHMEMX_INIT_WITH_UNIQUEID the job of the
 * unique id that nvshmemx_set_attr_uniqueid_args put in attr
 * (kinet_shmem_init_uniqueid: kinet's TCP bootstrap); without flags, the
 * environment's. NVSHMEMX_INIT_WITH_SHMEM: NVSHMEMX_ERROR_NOT_SUPPORTED. */
KNX_NV_H int nvshmemx_init_attr(unsigned int flags, nvshmemx_init_attr_t *attr)
{
	if (flags & ~(unsigned)(NVSHMEMX_INIT_WITH_MPI_COMM | NVSHMEMX_INIT_THREAD_PES |
				NVSHMEMX_INIT_WITH_UNIQUEID))
		return NVSHMEMX_ERROR_NOT_SUPPORTED;
	struct kinet_shmem_attr a;
	memset(&a, 0, sizeof(a));
	a.gpu = -1;
	if (attr) {
		a.heap_size = attr->heap_size;
		if (attr->args.cuda_device_id >= 0)
			a.gpu = attr->args.cuda_device_id;
	}
	int rc;
	if (flags & NVSHMEMX_INIT_WITH_UNIQUEID) {
		const nvshmemx_uniqueid_args_t *u = attr ? &attr->args.uid_args
							 : (const nvshmemx_uniqueid_args_t *)0;
		rc = kinet_shmem_init_uniqueid(
			&a, u && u->id ? (const unsigned char *)u->id->internal : (const unsigned char *)0,
			u ? u->myrank : -1, u ? u->nranks : 0);
		if (rc == -EINVAL)
			return NVSHMEMX_ERROR_INVALID_VALUE;
	} else {
		rc = kinet_shmem_init(&a);
	}
	return rc ? NVSHMEMX_ERROR_INTERNAL : NVSHMEMX_SUCCESS;
}

/* A unique id for the job (made by the process that will be PE 0, handed to
 * the others by the program). */
KNX_NV_H int nvshmemx_get_uniqueid(nvshmemx_uniqueid_t *uniqueid)
{
	if (!uniqueid)
		return NVSHMEMX_ERROR_INVALID_VALUE;
	uniqueid->version = 1;
	return kinet_shmem_uniqueid((unsigned char *)uniqueid->internal) ? NVSHMEMX_ERROR_INTERNAL
									   : NVSHMEMX_SUCCESS;
}

KNX_NV_H int nvshmemx_set_attr_uniqueid_args(const int myrank, const int nranks,
					     const nvshmemx_uniqueid_t *uniqueid,
					     nvshmemx_init_attr_t *attr)
{
	if (!attr || !uniqueid || nranks < 1 || myrank < 0 || myrank >= nranks)
		return NVSHMEMX_ERROR_INVALID_VALUE;
	attr->args.uid_args.version = 1;
	attr->args.uid_args.id = (nvshmemx_uniqueid_v1 *)uniqueid;
	attr->args.uid_args.myrank = myrank;
	attr->args.uid_args.nranks = nranks;
	return NVSHMEMX_SUCCESS;
}

KNX_NV_H int nvshmemx_init_status(void)
{
	return kinet_shmem_initialized() ? NVSHMEM_STATUS_IS_INITIALIZED
					 : NVSHMEM_STATUS_NOT_INITIALIZED;
}

KNX_NV_H void nvshmem_finalize(void)
{
	kinet_shmem_finalize();
}

KNX_NV_H void nvshmem_global_exit(int status)
{
	exit(status);
}

KNX_NV_H void nvshmem_info_get_version(int *major, int *minor)
{
	*major = NVSHMEM_MAJOR_VERSION;
	*minor = NVSHMEM_MINOR_VERSION;
}

/* The NVSHMEM release whose API this is (NVSHMEM_VENDOR_*_VERSION). */
KNX_NV_H void nvshmemx_vendor_get_version_info(int *major, int *minor, int *patch)
{
	*major = NVSHMEM_VENDOR_MAJOR_VERSION;
	*minor = NVSHMEM_VENDOR_MINOR_VERSION;
	*patch = NVSHMEM_VENDOR_PATCH_VERSION;
}

KNX_NV_H void nvshmem_info_get_name(char *name)
{
	strcpy(name, NVSHMEM_VENDOR_STRING);
}

KNX_NV_HD int nvshmem_my_pe(void)
{
#if defined(__CUDA_ARCH__)
	return kn_shmem_my_pe();
#else
	return KNX_NV_ON_DEVICE() ? kn_shmem_my_pe() : kinet_shmem_my_pe();
#endif
}

KNX_NV_HD int nvshmem_n_pes(void)
{
#if defined(__CUDA_ARCH__)
	return kn_shmem_n_pes();
#else
	return KNX_NV_ON_DEVICE() ? kn_shmem_n_pes() : kinet_shmem_n_pes();
#endif
}

KNX_NV_HD void *nvshmem_ptr(const void *dest, int pe)
{
#if defined(__CUDA_ARCH__)
	return kn_shmem_ptr(dest, pe);
#else
	return KNX_NV_ON_DEVICE() ? kn_shmem_ptr(dest, pe) : kinet_shmem_ptr(dest, pe);
#endif
}

/* ---- memory --------------------------------------------------------------------------- */

KNX_NV_H void *nvshmem_malloc(size_t size)
{
	return kinet_shmem_malloc(size);
}
KNX_NV_H void *nvshmem_calloc(size_t count, size_t size)
{
	return kinet_shmem_calloc(count, size);
}
KNX_NV_H void *nvshmem_align(size_t alignment, size_t size)
{
	return kinet_shmem_align(alignment, size);
}
KNX_NV_H void nvshmem_free(void *ptr)
{
	kinet_shmem_free(ptr);
}
KNX_NV_H int nvshmemx_buffer_register(void *addr, size_t length)
{
	return kinet_shmem_buffer_register(addr, length) ? NVSHMEMX_ERROR_INTERNAL : 0;
}
KNX_NV_H int nvshmemx_buffer_unregister(void *addr)
{
	return kinet_shmem_buffer_unregister(addr) ? NVSHMEMX_ERROR_INTERNAL : 0;
}

/* Not done by kinet (its heaps are fixed at init): NULL and
 * NVSHMEMX_ERROR_NOT_SUPPORTED, with a line in the log. */
KNX_NV_H void *nvshmemx_buffer_register_symmetric(void *buf_ptr, size_t size, int flags)
{
	return kinet_shmem_buffer_register_symmetric(buf_ptr, size, flags);
}
KNX_NV_H int nvshmemx_buffer_unregister_symmetric(void *mmap_ptr, size_t size)
{
	return kinet_shmem_buffer_unregister_symmetric(mmap_ptr, size) ? NVSHMEMX_ERROR_NOT_SUPPORTED
									: 0;
}

/* A module loaded with cuModuleLoad* whose code uses these headers. */
KNX_NV_H int nvshmemx_cumodule_init(CUmodule module)
{
	int rc = kinet_shmem_cumodule_init((void *)module);
	return !rc ? NVSHMEMX_SUCCESS : rc == -ENOTSUP ? NVSHMEMX_ERROR_NOT_SUPPORTED
			 : rc == -EINVAL ? NVSHMEMX_ERROR_INVALID_VALUE : NVSHMEMX_ERROR_INTERNAL;
}
KNX_NV_H int nvshmemx_cumodule_finalize(CUmodule module)
{
	int rc = kinet_shmem_cumodule_finalize((void *)module);
	return !rc ? NVSHMEMX_SUCCESS : rc == -ENOTSUP ? NVSHMEMX_ERROR_NOT_SUPPORTED
			 : NVSHMEMX_ERROR_INVALID_VALUE;
}

/* ---- teams ---------------------------------------------------------------------------- */

KNX_NV_HD int nvshmem_team_my_pe(nvshmem_team_t team)
{
#if defined(__CUDA_ARCH__)
	return kn_shmem_team_my_pe(team);
#else
	return KNX_NV_ON_DEVICE() ? kn_shmem_team_my_pe(team) : kinet_shmem_team_my_pe(team);
#endif
}

KNX_NV_HD int nvshmem_team_n_pes(nvshmem_team_t team)
{
#if defined(__CUDA_ARCH__)
	return kn_shmem_team_n_pes(team);
#else
	return KNX_NV_ON_DEVICE() ? kn_shmem_team_n_pes(team) : kinet_shmem_team_n_pes(team);
#endif
}

KNX_NV_HD int nvshmem_team_translate_pe(nvshmem_team_t src_team, int src_pe,
					nvshmem_team_t dest_team)
{
#if defined(__CUDA_ARCH__)
	return kn_shmem_team_translate_pe(src_team, src_pe, dest_team);
#else
	return KNX_NV_ON_DEVICE() ? kn_shmem_team_translate_pe(src_team, src_pe, dest_team)
				  : kinet_shmem_team_translate_pe(src_team, src_pe, dest_team);
#endif
}

/* The config a new team keeps, as NVSHMEM 3.4: the one passed (whatever
 * the mask says), else version 1 with num_contexts -1. */
KNX_NV_H int knx_nv_team_keep_config(nvshmem_team_t team, const nvshmem_team_config_t *config)
{
	nvshmem_team_config_t c;
	if (team == NVSHMEM_TEAM_INVALID)
		return 0;
	if (config) {
		c = *config;
	} else {
		memset(&c, 0, sizeof(c));
		c.version = (1 << 16) + (int)sizeof(nvshmem_team_config_v1);
		c.num_contexts = -1;
	}
	return kinet_shmem_team_set_config(team, &c, sizeof(c));
}

/* Collective over every PE of the world in kinet (docs/shmem.md); the
 * team keeps config (kinet has one context per team and uses none of it). */
KNX_NV_H int nvshmem_team_split_strided(nvshmem_team_t parent, int start, int stride, int size,
					const nvshmem_team_config_t *config, long config_mask,
					nvshmem_team_t *new_team)
{
	(void)config_mask;
	if (kinet_shmem_team_split_strided(parent, start, stride, size, new_team))
		return -1;
	return knx_nv_team_keep_config(*new_team, config) ? -1 : 0;
}

/* Rows of xrange PEs (xaxis_team) and columns (yaxis_team), each keeping
 * its axis' config; collective over the world (kinet_shmem_team_split_2d). */
KNX_NV_H int nvshmem_team_split_2d(nvshmem_team_t parent, int xrange,
				   const nvshmem_team_config_t *xaxis_config, long xaxis_mask,
				   nvshmem_team_t *xaxis_team,
				   const nvshmem_team_config_t *yaxis_config, long yaxis_mask,
				   nvshmem_team_t *yaxis_team)
{
	(void)xaxis_mask, (void)yaxis_mask;
	if (kinet_shmem_team_split_2d(parent, xrange, xaxis_team, yaxis_team))
		return -1;
	if (knx_nv_team_keep_config(*xaxis_team, xaxis_config) ||
	    knx_nv_team_keep_config(*yaxis_team, yaxis_config))
		return -1;
	return 0;
}

/* The config team was split with (the predefined teams:
 * NVSHMEM_TEAM_CONFIG_INITIALIZER's values). NVSHMEM_TEAM_INVALID leaves
 * config as it is (as NVSHMEM); another team this PE is not in too, and
 * says so on stderr. */
KNX_NV_H void nvshmem_team_get_config(nvshmem_team_t team, nvshmem_team_config_t *config)
{
	nvshmem_team_config_t c = NVSHMEM_TEAM_CONFIG_INITIALIZER;
	if (team == NVSHMEM_TEAM_INVALID || !config)
		return;
	int n = kinet_shmem_team_get_config(team, &c, sizeof(c));
	if (n >= 0)
		*config = c;
}

KNX_NV_H void nvshmem_team_destroy(nvshmem_team_t team)
{
	kinet_shmem_team_destroy(team);
}

/* ---- ordering, completion, barriers ------------------------------------------------------ */

KNX_NV_HD void nvshmem_fence(void)
{
	(void)KNX_NV_DUAL(kn_shmem_fence(), kinet_shmem_fence());
}

KNX_NV_HD void nvshmem_quiet(void)
{
	(void)KNX_NV_DUAL(kn_shmem_quiet(), kinet_shmem_quiet());
}

/* barrier_all and sync_all: the device barrier in device code (a host
 * executor's launch included), the host's (the bootstrap's) elsewhere. */
KNX_NV_HD void nvshmem_barrier_all(void)
{
#if defined(__CUDA_ARCH__)
	kn_shmem_barrier_all();
#else
	if (KNX_NV_ON_DEVICE())
		kn_shmem_barrier_all();
	else
		kinet_shmem_barrier_all();
#endif
}

KNX_NV_HD void nvshmem_sync_all(void)
{
#if defined(__CUDA_ARCH__)
	kn_shmem_sync_all();
#else
	if (KNX_NV_ON_DEVICE())
		kn_shmem_sync_all();
	else
		kinet_shmem_barrier_all();
#endif
}

/* A team's barrier and sync, host and device calls as in NVSHMEM 3.x: 0, or
 * -1 on error (the error kept as the PE's first: kinet_shmem_error). */
KNX_NV_HD int nvshmem_barrier(nvshmem_team_t team)
{
	return KNX_NV_DUAL(kn_shmem_barrier(team), kinet_shmem_barrier(team)) ? -1 : 0;
}

KNX_NV_HD int nvshmem_team_sync(nvshmem_team_t team)
{
	return KNX_NV_DUAL(kn_shmem_team_sync(team), kinet_shmem_team_sync(team)) ? -1 : 0;
}

KNX_NV_D void nvshmemx_barrier_all_warp(void)
{
	kn_shmem_barrier_all_warp();
}
KNX_NV_D void nvshmemx_barrier_all_block(void)
{
	kn_shmem_barrier_all_block();
}
KNX_NV_D void nvshmemx_sync_all_warp(void)
{
	kn_shmem_sync_all_warp();
}
KNX_NV_D void nvshmemx_sync_all_block(void)
{
	kn_shmem_sync_all_block();
}
KNX_NV_D int nvshmemx_barrier_warp(nvshmem_team_t team)
{
	return kn_shmem_barrier_warp(team) ? -1 : 0;
}
KNX_NV_D int nvshmemx_barrier_block(nvshmem_team_t team)
{
	return kn_shmem_barrier_block(team) ? -1 : 0;
}
/* Every thread of a warpgroup (4 consecutive warps of the block) calls. */
KNX_NV_D int nvshmemx_barrier_warpgroup(nvshmem_team_t team)
{
	return kn_shmem_barrier_warpgroup(team) ? -1 : 0;
}
KNX_NV_D int nvshmemx_team_sync_warp(nvshmem_team_t team)
{
	return kn_shmem_team_sync_warp(team) ? -1 : 0;
}
KNX_NV_D int nvshmemx_team_sync_block(nvshmem_team_t team)
{
	return kn_shmem_team_sync_block(team) ? -1 : 0;
}
KNX_NV_D void nvshmemx_quiet_warp(void)
{
	kn_shmem_quiet_warp();
}
KNX_NV_D void nvshmemx_quiet_block(void)
{
	kn_shmem_quiet_block();
}

/* ---- streams and launch ----------------------------------------------------------------- */

KNX_NV_H void nvshmemx_barrier_all_on_stream(cudaStream_t stream)
{
	kinet_shmem_barrier_all_on_stream((void *)stream);
}
KNX_NV_H void nvshmemx_sync_all_on_stream(cudaStream_t stream)
{
	kinet_shmem_sync_all_on_stream((void *)stream);
}
KNX_NV_H void nvshmemx_quiet_on_stream(cudaStream_t stream)
{
	kinet_shmem_quiet_on_stream((void *)stream);
}

#if !KNX_NV_CUDART
/* The host executor's trampoline: the kernel's one pointer argument. */
struct knx_nv_launch {
	const void *func;
	void *arg;
};
static inline void knx_nv_tramp(void *p)
{
	const struct knx_nv_launch *l = (const struct knx_nv_launch *)p;
	void (*fn)(void *);
	memcpy(&fn, &l->func, sizeof(fn));
	fn(l->arg);
}
#endif

/* Launches a kernel whose CTAs are all resident at once (device-side
 * barriers and waits between them are safe). CUDA:
 * cudaLaunchCooperativeKernel. Host executor: grid x block CPU threads; the
 * kernel takes one pointer argument (args[0] points to it) or none. */
KNX_NV_H int nvshmemx_collective_launch(const void *func, dim3 grid, dim3 block, void **args,
					size_t shared_mem, cudaStream_t stream)
{
#if KNX_NV_CUDART
	cudaError_t e = cudaLaunchCooperativeKernel(func, grid, block, args, shared_mem, stream);
	return e == cudaSuccess ? NVSHMEMX_SUCCESS : NVSHMEMX_ERROR_INTERNAL;
#else
	(void)shared_mem, (void)stream;
	struct knx_nv_launch l = {func, args ? *(void **)args[0] : (void *)0};
	return kinet_shmem_host_launch(knx_nv_tramp, &l, grid, block) ? NVSHMEMX_ERROR_INTERNAL
									: NVSHMEMX_SUCCESS;
#endif
}

/* The largest grid nvshmemx_collective_launch takes for func with blocks of
 * blockDims (every CTA resident at once): CUDA, the occupancy of func on
 * the current device times its multiprocessors; the host executor, its
 * thread limit (4096 threads) over the block's threads. */
KNX_NV_H int nvshmemx_collective_launch_query_gridsize(const void *func, dim3 blockDims,
						       void **args, size_t sharedMem,
						       int *gridsize)
{
	(void)args;
	if (!gridsize || !func)
		return NVSHMEMX_ERROR_INVALID_VALUE;
	unsigned long long nthr =
		(unsigned long long)blockDims.x * blockDims.y * blockDims.z;
	*gridsize = 0;
	if (!nthr)
		return NVSHMEMX_ERROR_INVALID_VALUE;
#if KNX_NV_CUDART
	int dev = 0, sms = 0, per_sm = 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, func, (int)nthr, sharedMem) !=
		    cudaSuccess)
		return NVSHMEMX_ERROR_INTERNAL;
	*gridsize = per_sm * sms;
#else
	(void)sharedMem;
	*gridsize = nthr > 4096 ? 0 : (int)(4096 / nthr);
#endif
	return *gridsize ? NVSHMEMX_SUCCESS : NVSHMEMX_ERROR_INVALID_VALUE;
}

/* ---- RMA: bytes ----------------------------------------------------------------------------- */

KNX_NV_HD void nvshmem_putmem(void *dest, const void *source, size_t nelems, int pe)
{
	(void)KNX_NV_DUAL(kn_shmem_put(dest, source, nelems, pe), kinet_shmem_put(dest, source, nelems, pe));
}
KNX_NV_HD void nvshmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe)
{
	(void)KNX_NV_DUAL(kn_shmem_put_nbi(dest, source, nelems, pe), kinet_shmem_put_nbi(dest, source, nelems, pe));
}
KNX_NV_HD void nvshmem_getmem(void *dest, const void *source, size_t nelems, int pe)
{
	(void)KNX_NV_DUAL(kn_shmem_get(dest, source, nelems, pe), kinet_shmem_get(dest, source, nelems, pe));
}
KNX_NV_HD void nvshmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe)
{
	(void)KNX_NV_DUAL(kn_shmem_get_nbi(dest, source, nelems, pe), kinet_shmem_get_nbi(dest, source, nelems, pe));
}
KNX_NV_D void nvshmemx_putmem_warp(void *dest, const void *source, size_t nelems, int pe)
{
	kn_shmem_putmem_warp(dest, source, nelems, pe);
}
KNX_NV_D void nvshmemx_putmem_block(void *dest, const void *source, size_t nelems, int pe)
{
	kn_shmem_putmem_block(dest, source, nelems, pe);
}
KNX_NV_D void nvshmemx_putmem_nbi_warp(void *dest, const void *source, size_t nelems, int pe)
{
	kn_shmem_putmem_nbi_warp(dest, source, nelems, pe);
}
KNX_NV_D void nvshmemx_putmem_nbi_block(void *dest, const void *source, size_t nelems, int pe)
{
	kn_shmem_putmem_nbi_block(dest, source, nelems, pe);
}
KNX_NV_D void nvshmemx_getmem_warp(void *dest, const void *source, size_t nelems, int pe)
{
	kn_shmem_getmem_warp(dest, source, nelems, pe);
}
KNX_NV_D void nvshmemx_getmem_block(void *dest, const void *source, size_t nelems, int pe)
{
	kn_shmem_getmem_block(dest, source, nelems, pe);
}
KNX_NV_D void nvshmemx_getmem_nbi_warp(void *dest, const void *source, size_t nelems, int pe)
{
	kn_shmem_getmem_nbi_warp(dest, source, nelems, pe);
}
KNX_NV_D void nvshmemx_getmem_nbi_block(void *dest, const void *source, size_t nelems, int pe)
{
	kn_shmem_getmem_nbi_block(dest, source, nelems, pe);
}

/* nvshmem_putSIZE and friends: nelems elements of SIZE bits. */
#define KNX_NV_SIZED(BITS)                                                                      \
	KNX_NV_HD void nvshmem_put##BITS(void *dest, const void *source, size_t nelems, int pe) \
	{                                                                                       \
		(void)KNX_NV_DUAL(kn_shmem_put(dest, source, nelems * (BITS / 8), pe),          \
				  kinet_shmem_put(dest, source, nelems * (BITS / 8), pe));      \
	}                                                                                       \
	KNX_NV_HD void nvshmem_put##BITS##_nbi(void *dest, const void *source, size_t nelems,   \
					      int pe)                                           \
	{                                                                                       \
		(void)KNX_NV_DUAL(kn_shmem_put_nbi(dest, source, nelems * (BITS / 8), pe),      \
				  kinet_shmem_put_nbi(dest, source, nelems * (BITS / 8), pe));  \
	}                                                                                       \
	KNX_NV_HD void nvshmem_get##BITS(void *dest, const void *source, size_t nelems, int pe) \
	{                                                                                       \
		(void)KNX_NV_DUAL(kn_shmem_get(dest, source, nelems * (BITS / 8), pe),          \
				  kinet_shmem_get(dest, source, nelems * (BITS / 8), pe));      \
	}                                                                                       \
	KNX_NV_HD void nvshmem_get##BITS##_nbi(void *dest, const void *source, size_t nelems,   \
					      int pe)                                           \
	{                                                                                       \
		(void)KNX_NV_DUAL(kn_shmem_get_nbi(dest, source, nelems * (BITS / 8), pe),      \
				  kinet_shmem_get_nbi(dest, source, nelems * (BITS / 8), pe));  \
	}
KNX_NV_SIZED(8)
KNX_NV_SIZED(16)
KNX_NV_SIZED(32)
KNX_NV_SIZED(64)
KNX_NV_SIZED(128)

/* ---- RMA: typed -------------------------------------------------------------------------------- */

/* The standard RMA types (NVSHMEM's TYPENAME, TYPE). */
#define KNX_NV_RMA_TYPES(X)                                                                     \
	X(float, float)                                                                         \
	X(double, double)                                                                       \
	X(char, char)                                                                           \
	X(schar, signed char)                                                                   \
	X(short, short)                                                                         \
	X(int, int)                                                                             \
	X(long, long)                                                                           \
	X(longlong, long long)                                                                  \
	X(uchar, unsigned char)                                                                 \
	X(ushort, unsigned short)                                                               \
	X(uint, unsigned int)                                                                   \
	X(ulong, unsigned long)                                                                 \
	X(ulonglong, unsigned long long)                                                        \
	X(int8, int8_t)                                                                         \
	X(int16, int16_t)                                                                       \
	X(int32, int32_t)                                                                       \
	X(int64, int64_t)                                                                       \
	X(uint8, uint8_t)                                                                       \
	X(uint16, uint16_t)                                                                     \
	X(uint32, uint32_t)                                                                     \
	X(uint64, uint64_t)                                                                     \
	X(size, size_t)                                                                         \
	X(ptrdiff, ptrdiff_t)

/* A value's bytes as the low bytes of a 64-bit word, and back. */
#define KNX_NV_BITS(TYPE, v, out)                                                               \
	do {                                                                                    \
		TYPE v_ = (v);                                                                  \
		(out) = 0;                                                                      \
		memcpy(&(out), &v_, sizeof(TYPE));                                              \
	} while (0)

#define KNX_NV_RMA(NAME, TYPE)                                                                  \
	KNX_NV_HD void nvshmem_##NAME##_put(TYPE *dest, const TYPE *source, size_t nelems,      \
					    int pe)                                             \
	{                                                                                       \
		(void)KNX_NV_DUAL(kn_shmem_put(dest, source, nelems * sizeof(TYPE), pe),        \
				  kinet_shmem_put(dest, source, nelems * sizeof(TYPE), pe));    \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_put_nbi(TYPE *dest, const TYPE *source, size_t nelems,  \
						int pe)                                         \
	{                                                                                       \
		(void)KNX_NV_DUAL(kn_shmem_put_nbi(dest, source, nelems * sizeof(TYPE), pe),    \
				  kinet_shmem_put_nbi(dest, source, nelems * sizeof(TYPE), pe)); \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_get(TYPE *dest, const TYPE *source, size_t nelems,      \
					    int pe)                                             \
	{                                                                                       \
		(void)KNX_NV_DUAL(kn_shmem_get(dest, source, nelems * sizeof(TYPE), pe),        \
				  kinet_shmem_get(dest, source, nelems * sizeof(TYPE), pe));    \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_get_nbi(TYPE *dest, const TYPE *source, size_t nelems,  \
						int pe)                                         \
	{                                                                                       \
		(void)KNX_NV_DUAL(kn_shmem_get_nbi(dest, source, nelems * sizeof(TYPE), pe),    \
				  kinet_shmem_get_nbi(dest, source, nelems * sizeof(TYPE), pe)); \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_p(TYPE *dest, TYPE value, int pe)                       \
	{                                                                                       \
		uint64_t w_;                                                                    \
		KNX_NV_BITS(TYPE, value, w_);                                                   \
		(void)KNX_NV_DUAL(kn_shmem_p(dest, w_, sizeof(TYPE), pe),                       \
				  kinet_shmem_p(dest, w_, sizeof(TYPE), pe));                   \
	}                                                                                       \
	KNX_NV_HD TYPE nvshmem_##NAME##_g(const TYPE *source, int pe)                           \
	{                                                                                       \
		uint64_t w_ = 0;                                                                \
		TYPE v_;                                                                        \
		(void)KNX_NV_DUAL(kn_shmem_g(source, sizeof(TYPE), pe, &w_),                    \
				  kinet_shmem_g(source, sizeof(TYPE), pe, &w_));                \
		memcpy((void *)&v_, &w_, sizeof(TYPE));                                         \
		return v_;                                                                      \
	}                                                                                       \
	KNX_NV_D void nvshmem_##NAME##_put_signal(TYPE *dest, const TYPE *source, size_t nelems, \
						  uint64_t *sig_addr, uint64_t signal,          \
						  int sig_op, int pe)                           \
	{                                                                                       \
		kn_shmem_put_signal(dest, source, nelems * sizeof(TYPE), sig_addr, signal,      \
				    sig_op, pe);                                                \
	}                                                                                       \
	KNX_NV_D void nvshmem_##NAME##_put_signal_nbi(TYPE *dest, const TYPE *source,           \
						      size_t nelems, uint64_t *sig_addr,        \
						      uint64_t signal, int sig_op, int pe)      \
	{                                                                                       \
		kn_shmem_put_signal_nbi(dest, source, nelems * sizeof(TYPE), sig_addr, signal,  \
					sig_op, pe);                                            \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_put_warp(TYPE *dest, const TYPE *source, size_t nelems, \
						 int pe)                                        \
	{                                                                                       \
		kn_shmem_putmem_warp(dest, source, nelems * sizeof(TYPE), pe);                  \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_put_block(TYPE *dest, const TYPE *source, size_t nelems, \
						  int pe)                                       \
	{                                                                                       \
		kn_shmem_putmem_block(dest, source, nelems * sizeof(TYPE), pe);                 \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_put_nbi_warp(TYPE *dest, const TYPE *source,            \
						     size_t nelems, int pe)                     \
	{                                                                                       \
		kn_shmem_putmem_nbi_warp(dest, source, nelems * sizeof(TYPE), pe);              \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_put_nbi_block(TYPE *dest, const TYPE *source,           \
						      size_t nelems, int pe)                    \
	{                                                                                       \
		kn_shmem_putmem_nbi_block(dest, source, nelems * sizeof(TYPE), pe);             \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_get_warp(TYPE *dest, const TYPE *source, size_t nelems, \
						 int pe)                                        \
	{                                                                                       \
		kn_shmem_getmem_warp(dest, source, nelems * sizeof(TYPE), pe);                  \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_get_block(TYPE *dest, const TYPE *source, size_t nelems, \
						  int pe)                                       \
	{                                                                                       \
		kn_shmem_getmem_block(dest, source, nelems * sizeof(TYPE), pe);                 \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_get_nbi_warp(TYPE *dest, const TYPE *source,            \
						     size_t nelems, int pe)                     \
	{                                                                                       \
		kn_shmem_getmem_nbi_warp(dest, source, nelems * sizeof(TYPE), pe);              \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_get_nbi_block(TYPE *dest, const TYPE *source,           \
						      size_t nelems, int pe)                    \
	{                                                                                       \
		kn_shmem_getmem_nbi_block(dest, source, nelems * sizeof(TYPE), pe);             \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_put_signal_warp(TYPE *dest, const TYPE *source,         \
							size_t nelems, uint64_t *sig_addr,      \
							uint64_t signal, int sig_op, int pe)    \
	{                                                                                       \
		kn_shmem_put_signal_warp(dest, source, nelems * sizeof(TYPE), sig_addr, signal, \
					 sig_op, pe);                                           \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_put_signal_block(TYPE *dest, const TYPE *source,        \
							 size_t nelems, uint64_t *sig_addr,     \
							 uint64_t signal, int sig_op, int pe)   \
	{                                                                                       \
		kn_shmem_put_signal_block(dest, source, nelems * sizeof(TYPE), sig_addr, signal, \
					  sig_op, pe);                                          \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_put_signal_nbi_warp(TYPE *dest, const TYPE *source,     \
							    size_t nelems, uint64_t *sig_addr,  \
							    uint64_t signal, int sig_op, int pe) \
	{                                                                                       \
		kn_shmem_put_signal_nbi_warp(dest, source, nelems * sizeof(TYPE), sig_addr,     \
					     signal, sig_op, pe);                               \
	}                                                                                       \
	KNX_NV_D void nvshmemx_##NAME##_put_signal_nbi_block(TYPE *dest, const TYPE *source,    \
							     size_t nelems, uint64_t *sig_addr, \
							     uint64_t signal, int sig_op, int pe) \
	{                                                                                       \
		kn_shmem_put_signal_nbi_block(dest, source, nelems * sizeof(TYPE), sig_addr,    \
					      signal, sig_op, pe);                              \
	}
KNX_NV_RMA_TYPES(KNX_NV_RMA)

/* ---- RMA: the 16-bit floating-point types ------------------------------------------------ */

/* NVSHMEM's standard RMA types also hold half and bfloat16 (every RMA form,
 * put_signal and the warp and block forms; no wait or test: those are
 * integer types only). Their values move as their 2 bytes: CUDA's types
 * with CUDA (<cuda_fp16.h>, <cuda_bf16.h>), the 16-bit stand-ins of
 * kinet/nvshmem/kinet_cuda_host.h on the host executor. */
#define KNX_NV_RMA_TYPES_F16(X)                                                                 \
	X(half, half)                                                                           \
	X(bfloat16, __nv_bfloat16)
KNX_NV_RMA_TYPES_F16(KNX_NV_RMA)

/* ---- RMA: strided (iput, iget) ---------------------------------------------------------- */

/* Element i moves between source + i*sst and dest + i*dst (strides in
 * elements): kn_shmem_iput / kn_shmem_iget in device code (the warp and
 * block forms: the group's copy, or its first thread's WQEs), the
 * host-initiated kinet_shmem_iput / _iget elsewhere, kinet_shmem_*_on_stream
 * on a stream. One macro per shape: FN the name, T the element type (void
 * for the sized names), ES its bytes. The blocking form, host or device: */
#define KNX_NV_I_HD(FN, DEV, HOST, T, ES)                                                       \
	KNX_NV_HD void FN(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, \
			  int pe)                                                                \
	{                                                                                       \
		(void)KNX_NV_DUAL(DEV(dest, source, dst, sst, nelems, ES, pe),                  \
				  HOST(dest, source, dst, sst, nelems, ES, pe));                \
	}
/* a warp or block form (device): */
#define KNX_NV_I_GRP(FN, DEV, T, ES)                                                            \
	KNX_NV_D void FN(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,  \
			 int pe)                                                                 \
	{                                                                                       \
		DEV(dest, source, dst, sst, nelems, ES, pe);                                    \
	}
/* a stream form (host): */
#define KNX_NV_I_STREAM(FN, HOST, T, ES)                                                        \
	KNX_NV_H void FN(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,  \
			 int pe, cudaStream_t cstrm)                                             \
	{                                                                                       \
		HOST(dest, source, dst, sst, nelems, ES, pe, (void *)cstrm);                    \
	}
/* The eight names of an element type: nvshmem_<PRE>iput<POST>, _iget and
 * nvshmemx_<PRE>iput<POST>_warp, _block, _on_stream (and iget's), PRE
 * "int_" and POST empty for nvshmem_int_iput, PRE empty and POST 8 for
 * nvshmem_iput8. */
#define KNX_NV_ISTRIDE(PRE, POST, T, ES)                                                        \
	KNX_NV_I_HD(nvshmem_##PRE##iput##POST, kn_shmem_iput, kinet_shmem_iput, T, ES)          \
	KNX_NV_I_HD(nvshmem_##PRE##iget##POST, kn_shmem_iget, kinet_shmem_iget, T, ES)          \
	KNX_NV_I_GRP(nvshmemx_##PRE##iput##POST##_warp, kn_shmem_iput_warp, T, ES)              \
	KNX_NV_I_GRP(nvshmemx_##PRE##iput##POST##_block, kn_shmem_iput_block, T, ES)            \
	KNX_NV_I_GRP(nvshmemx_##PRE##iget##POST##_warp, kn_shmem_iget_warp, T, ES)              \
	KNX_NV_I_GRP(nvshmemx_##PRE##iget##POST##_block, kn_shmem_iget_block, T, ES)            \
	KNX_NV_I_STREAM(nvshmemx_##PRE##iput##POST##_on_stream, kinet_shmem_iput_on_stream, T,  \
			ES)                                                                     \
	KNX_NV_I_STREAM(nvshmemx_##PRE##iget##POST##_on_stream, kinet_shmem_iget_on_stream, T,  \
			ES)
#define KNX_NV_IRMA(NAME, TYPE) KNX_NV_ISTRIDE(NAME##_, , TYPE, sizeof(TYPE))
KNX_NV_RMA_TYPES(KNX_NV_IRMA)
KNX_NV_RMA_TYPES_F16(KNX_NV_IRMA)

/* nvshmem_iputSIZE, _igetSIZE and their forms: elements of SIZE bits. */
#define KNX_NV_ISIZED(BITS) KNX_NV_ISTRIDE(, BITS, void, BITS / 8)
KNX_NV_ISIZED(8)
KNX_NV_ISIZED(16)
KNX_NV_ISIZED(32)
KNX_NV_ISIZED(64)
KNX_NV_ISIZED(128)

/* ---- signals ------------------------------------------------------------------------------- */

KNX_NV_D void nvshmem_putmem_signal(void *dest, const void *source, size_t nelems,
				    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	kn_shmem_put_signal(dest, source, nelems, sig_addr, signal, sig_op, pe);
}
KNX_NV_D void nvshmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems,
					uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	kn_shmem_put_signal_nbi(dest, source, nelems, sig_addr, signal, sig_op, pe);
}
KNX_NV_D void nvshmemx_putmem_signal_warp(void *dest, const void *source, size_t nelems,
					  uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	kn_shmem_put_signal_warp(dest, source, nelems, sig_addr, signal, sig_op, pe);
}
KNX_NV_D void nvshmemx_putmem_signal_block(void *dest, const void *source, size_t nelems,
					   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	kn_shmem_put_signal_block(dest, source, nelems, sig_addr, signal, sig_op, pe);
}
KNX_NV_D void nvshmemx_putmem_signal_nbi_warp(void *dest, const void *source, size_t nelems,
					      uint64_t *sig_addr, uint64_t signal, int sig_op,
					      int pe)
{
	kn_shmem_put_signal_nbi_warp(dest, source, nelems, sig_addr, signal, sig_op, pe);
}
KNX_NV_D void nvshmemx_putmem_signal_nbi_block(void *dest, const void *source, size_t nelems,
					       uint64_t *sig_addr, uint64_t signal, int sig_op,
					       int pe)
{
	kn_shmem_put_signal_nbi_block(dest, source, nelems, sig_addr, signal, sig_op, pe);
}
KNX_NV_D void nvshmemx_signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	kn_shmem_signal_op(sig_addr, signal, sig_op, pe);
}
KNX_NV_D uint64_t nvshmem_signal_fetch(uint64_t *sig_addr)
{
	return kn_shmem_signal_fetch(sig_addr);
}
KNX_NV_D uint64_t nvshmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value)
{
	uint64_t v = 0;
	kn_shmem_signal_wait_until(sig_addr, cmp, cmp_value, &v);
	return v;
}

/* ---- point-to-point synchronisation ------------------------------------------------------------ */

/* TYPENAME, TYPE, signed */
#define KNX_NV_SYNC_TYPES(X)                                       \
	X(short, short, 1)                                                                      \
	X(int, int, 1)                                                                          \
	X(long, long, 1)                                                                        \
	X(longlong, long long, 1)                                                               \
	X(ushort, unsigned short, 0)                                                            \
	X(uint, unsigned int, 0)                                                                \
	X(ulong, unsigned long, 0)                                                              \
	X(ulonglong, unsigned long long, 0)                                                     \
	X(int32, int32_t, 1)                                                                    \
	X(int64, int64_t, 1)                                                                    \
	X(uint32, uint32_t, 0)                                                                  \
	X(uint64, uint64_t, 0)                                                                  \
	X(size, size_t, 0)                                                                      \
	X(ptrdiff, ptrdiff_t, 1)

#define KNX_NV_SYNC(NAME, TYPE, SGN)                                                                 \
	KNX_NV_D void nvshmem_##NAME##_wait_until(TYPE *ivar, int cmp, TYPE cmp_value)          \
	{                                                                                       \
		kn_shmem_wait_until(ivar, cmp, (uint64_t)cmp_value, sizeof(TYPE),               \
				    SGN);                                          \
	}                                                                                       \
	KNX_NV_D int nvshmem_##NAME##_test(TYPE *ivar, int cmp, TYPE cmp_value)                 \
	{                                                                                       \
		return kn_shmem_test(ivar, cmp, (uint64_t)cmp_value, sizeof(TYPE),              \
				     SGN) == 1;                                    \
	}                                                                                       \
	KNX_NV_D void nvshmem_##NAME##_wait_until_all(TYPE *ivars, size_t nelems,               \
						      const int *status, int cmp,               \
						      TYPE cmp_value)                           \
	{                                                                                       \
		uint64_t v_ = (uint64_t)cmp_value;                                              \
		kn_shmem_wait_until_all(ivars, nelems, status, cmp, &v_, 0, sizeof(TYPE),       \
					SGN);                                      \
	}                                                                                       \
	KNX_NV_D size_t nvshmem_##NAME##_wait_until_any(TYPE *ivars, size_t nelems,             \
							const int *status, int cmp,             \
							TYPE cmp_value)                         \
	{                                                                                       \
		uint64_t v_ = (uint64_t)cmp_value;                                              \
		size_t i_ = SIZE_MAX;                                                           \
		kn_shmem_wait_until_any(ivars, nelems, status, cmp, &v_, 0, sizeof(TYPE),       \
					SGN, &i_);                                 \
		return i_;                                                                      \
	}                                                                                       \
	KNX_NV_D size_t nvshmem_##NAME##_wait_until_some(TYPE *ivars, size_t nelems,            \
							 size_t *indices, const int *status,    \
							 int cmp, TYPE cmp_value)               \
	{                                                                                       \
		uint64_t v_ = (uint64_t)cmp_value;                                              \
		size_t n_ = 0;                                                                  \
		kn_shmem_wait_until_some(ivars, nelems, indices, status, cmp, &v_, 0,           \
					 sizeof(TYPE), SGN, &n_);                  \
		return n_;                                                                      \
	}                                                                                       \
	KNX_NV_D int nvshmem_##NAME##_test_all(TYPE *ivars, size_t nelems, const int *status,   \
					       int cmp, TYPE cmp_value)                         \
	{                                                                                       \
		uint64_t v_ = (uint64_t)cmp_value;                                              \
		return kn_shmem_test_all(ivars, nelems, status, cmp, &v_, 0, sizeof(TYPE),      \
					 SGN) == 1;                                \
	}                                                                                       \
	KNX_NV_D size_t nvshmem_##NAME##_test_any(TYPE *ivars, size_t nelems, const int *status, \
						  int cmp, TYPE cmp_value)                      \
	{                                                                                       \
		uint64_t v_ = (uint64_t)cmp_value;                                              \
		int e_;                                                                         \
		return kn_shmem_test_any(ivars, nelems, status, cmp, &v_, 0, sizeof(TYPE),      \
					 SGN, &e_);                                \
	}                                                                                       \
	KNX_NV_D size_t nvshmem_##NAME##_test_some(TYPE *ivars, size_t nelems, size_t *indices, \
						   const int *status, int cmp, TYPE cmp_value)  \
	{                                                                                       \
		uint64_t v_ = (uint64_t)cmp_value;                                              \
		int e_;                                                                         \
		return kn_shmem_test_some(ivars, nelems, indices, status, cmp, &v_, 0,          \
					  sizeof(TYPE), SGN, &e_);                 \
	}                                                                                       \
	KNX_NV_D void nvshmem_##NAME##_wait_until_all_vector(TYPE *ivars, size_t nelems,        \
							     const int *status, int cmp,        \
							     TYPE *cmp_values)                  \
	{                                                                                       \
		for (size_t i_ = 0; i_ < nelems; i_++)                                          \
			if (!(status && status[i_]))                                            \
				kn_shmem_wait_until(&ivars[i_], cmp, (uint64_t)cmp_values[i_],  \
						    sizeof(TYPE), SGN);            \
	}                                                                                       \
	KNX_NV_D size_t nvshmem_##NAME##_wait_until_any_vector(TYPE *ivars, size_t nelems,      \
							       const int *status, int cmp,      \
							       TYPE *cmp_values)                \
	{                                                                                       \
		for (;;) {                                                                      \
			size_t incl_ = 0;                                                       \
			for (size_t i_ = 0; i_ < nelems; i_++) {                                \
				if (status && status[i_])                                       \
					continue;                                               \
				incl_++;                                                        \
				if (kn_shmem_test(&ivars[i_], cmp, (uint64_t)cmp_values[i_],    \
						  sizeof(TYPE), SGN) == 1)         \
					return i_;                                              \
			}                                                                       \
			if (!incl_)                                                             \
				return SIZE_MAX;                                                \
			KN_PAUSE();                                                             \
		}                                                                               \
	}                                                                                       \
	KNX_NV_D size_t nvshmem_##NAME##_wait_until_some_vector(                                \
		TYPE *ivars, size_t nelems, size_t *indices, const int *status, int cmp,        \
		TYPE *cmp_values)                                                               \
	{                                                                                       \
		for (;;) {                                                                      \
			size_t n_ = 0, incl_ = 0;                                               \
			for (size_t i_ = 0; i_ < nelems; i_++) {                                \
				if (status && status[i_])                                       \
					continue;                                               \
				incl_++;                                                        \
				if (kn_shmem_test(&ivars[i_], cmp, (uint64_t)cmp_values[i_],    \
						  sizeof(TYPE), SGN) == 1)         \
					indices[n_++] = i_;                                     \
			}                                                                       \
			if (n_ || !incl_)                                                       \
				return n_;                                                      \
			KN_PAUSE();                                                             \
		}                                                                               \
	}                                                                                       \
	KNX_NV_D int nvshmem_##NAME##_test_all_vector(TYPE *ivars, size_t nelems,               \
						      const int *status, int cmp,               \
						      TYPE *cmp_values)                         \
	{                                                                                       \
		for (size_t i_ = 0; i_ < nelems; i_++)                                          \
			if (!(status && status[i_]) &&                                          \
			    kn_shmem_test(&ivars[i_], cmp, (uint64_t)cmp_values[i_],            \
					  sizeof(TYPE), SGN) != 1)                 \
				return 0;                                                       \
		return 1;                                                                       \
	}                                                                                       \
	KNX_NV_D size_t nvshmem_##NAME##_test_any_vector(TYPE *ivars, size_t nelems,            \
							 const int *status, int cmp,            \
							 TYPE *cmp_values)                      \
	{                                                                                       \
		for (size_t i_ = 0; i_ < nelems; i_++)                                          \
			if (!(status && status[i_]) &&                                          \
			    kn_shmem_test(&ivars[i_], cmp, (uint64_t)cmp_values[i_],            \
					  sizeof(TYPE), SGN) == 1)                 \
				return i_;                                                      \
		return SIZE_MAX;                                                                \
	}                                                                                       \
	KNX_NV_D size_t nvshmem_##NAME##_test_some_vector(TYPE *ivars, size_t nelems,           \
							  size_t *indices, const int *status,   \
							  int cmp, TYPE *cmp_values)            \
	{                                                                                       \
		size_t n_ = 0;                                                                  \
		for (size_t i_ = 0; i_ < nelems; i_++)                                          \
			if (!(status && status[i_]) &&                                          \
			    kn_shmem_test(&ivars[i_], cmp, (uint64_t)cmp_values[i_],            \
					  sizeof(TYPE), SGN) == 1)                 \
				indices[n_++] = i_;                                             \
		return n_;                                                                      \
	}
KNX_NV_SYNC_TYPES(KNX_NV_SYNC)

/* The wait calls in stream order (host calls): a kernel of one thread per
 * variable waits (the host executor: at once); the _all forms wait for each
 * variable not excluded by status, one after the other, which ends when all
 * compare true. */
#define KNX_NV_SYNC_ON_STREAM(NAME, TYPE, SGN)                                                  \
	KNX_NV_H void nvshmemx_##NAME##_wait_until_on_stream(TYPE *ivar, int cmp,               \
							     TYPE cmp_value, cudaStream_t s)    \
	{                                                                                       \
		kinet_shmem_wait_until_on_stream(ivar, cmp, (uint64_t)cmp_value, sizeof(TYPE),  \
						 SGN, (void *)s);                               \
	}                                                                                       \
	KNX_NV_H void nvshmemx_##NAME##_wait_until_all_on_stream(                               \
		TYPE *ivars, size_t nelems, const int *status, int cmp, TYPE cmp_value,         \
		cudaStream_t s)                                                                 \
	{                                                                                       \
		for (size_t i_ = 0; i_ < nelems; i_++)                                          \
			if (!(status && status[i_]))                                            \
				kinet_shmem_wait_until_on_stream(&ivars[i_], cmp,               \
								 (uint64_t)cmp_value,           \
								 sizeof(TYPE), SGN, (void *)s); \
	}                                                                                       \
	KNX_NV_H void nvshmemx_##NAME##_wait_until_all_vector_on_stream(                        \
		TYPE *ivars, size_t nelems, const int *status, int cmp, TYPE *cmp_value,        \
		cudaStream_t s)                                                                 \
	{                                                                                       \
		for (size_t i_ = 0; i_ < nelems; i_++)                                          \
			if (!(status && status[i_]))                                            \
				kinet_shmem_wait_until_on_stream(&ivars[i_], cmp,               \
								 (uint64_t)cmp_value[i_],       \
								 sizeof(TYPE), SGN, (void *)s); \
	}
KNX_NV_SYNC_TYPES(KNX_NV_SYNC_ON_STREAM)

/* ---- host-initiated and stream-ordered RMA ------------------------------------------------ */

/* nvshmemx_*_on_stream: the operation enqueued on a CUDA stream (a kernel of
 * one thread runs the device call when the stream reaches it; the host
 * executor does it at once). The operation's errors are kept as the PE's
 * first error (kinet_shmem_error). The host-initiated forms (nvshmem_putmem
 * and the others above, called from host code) are kinet_shmem_put and its
 * siblings (kinet/shmem.h). */
KNX_NV_H void nvshmemx_putmem_on_stream(void *dest, const void *source, size_t bytes, int pe,
				       cudaStream_t cstrm)
{
	kinet_shmem_put_on_stream(dest, source, bytes, pe, 0, (void *)cstrm);
}
KNX_NV_H void nvshmemx_putmem_nbi_on_stream(void *dest, const void *source, size_t bytes, int pe,
					   cudaStream_t cstrm)
{
	kinet_shmem_put_on_stream(dest, source, bytes, pe, 1, (void *)cstrm);
}
KNX_NV_H void nvshmemx_getmem_on_stream(void *dest, const void *source, size_t bytes, int pe,
				       cudaStream_t cstrm)
{
	kinet_shmem_get_on_stream(dest, source, bytes, pe, 0, (void *)cstrm);
}
KNX_NV_H void nvshmemx_getmem_nbi_on_stream(void *dest, const void *source, size_t bytes, int pe,
					   cudaStream_t cstrm)
{
	kinet_shmem_get_on_stream(dest, source, bytes, pe, 1, (void *)cstrm);
}
KNX_NV_H void nvshmemx_putmem_signal_on_stream(void *dest, const void *source, size_t bytes,
					      uint64_t *sig_addr, uint64_t signal, int sig_op,
					      int pe, cudaStream_t cstrm)
{
	kinet_shmem_put_signal_on_stream(dest, source, bytes, sig_addr, signal, sig_op, pe, 0,
					 (void *)cstrm);
}
KNX_NV_H void nvshmemx_putmem_signal_nbi_on_stream(void *dest, const void *source, size_t bytes,
						  uint64_t *sig_addr, uint64_t signal, int sig_op,
						  int pe, cudaStream_t cstrm)
{
	kinet_shmem_put_signal_on_stream(dest, source, bytes, sig_addr, signal, sig_op, pe, 1,
					 (void *)cstrm);
}
KNX_NV_H void nvshmemx_signal_op_on_stream(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe,
					  cudaStream_t cstrm)
{
	kinet_shmem_signal_op_on_stream(sig_addr, signal, sig_op, pe, (void *)cstrm);
}
KNX_NV_H void nvshmemx_signal_wait_until_on_stream(uint64_t *sig_addr, int cmp,
						  uint64_t cmp_value, cudaStream_t cstream)
{
	kinet_shmem_signal_wait_until_on_stream(sig_addr, cmp, cmp_value, (void *)cstream);
}
KNX_NV_H int nvshmemx_barrier_on_stream(nvshmem_team_t team, cudaStream_t stream)
{
	return kinet_shmem_barrier_on_stream(team, (void *)stream) ? -1 : 0;
}
KNX_NV_H int nvshmemx_team_sync_on_stream(nvshmem_team_t team, cudaStream_t stream)
{
	return kinet_shmem_team_sync_on_stream(team, (void *)stream) ? -1 : 0;
}

/* nvshmemx_putSIZE_on_stream and friends: nelems elements of SIZE bits. */
#define KNX_NV_SIZED_ON_STREAM(BITS)                                                            \
	KNX_NV_H void nvshmemx_put##BITS##_on_stream(void *dest, const void *source,            \
						     size_t nelems, int pe, cudaStream_t s)     \
	{                                                                                       \
		kinet_shmem_put_on_stream(dest, source, nelems * (BITS / 8), pe, 0, (void *)s); \
	}                                                                                       \
	KNX_NV_H void nvshmemx_put##BITS##_nbi_on_stream(void *dest, const void *source,        \
							 size_t nelems, int pe, cudaStream_t s) \
	{                                                                                       \
		kinet_shmem_put_on_stream(dest, source, nelems * (BITS / 8), pe, 1, (void *)s); \
	}                                                                                       \
	KNX_NV_H void nvshmemx_get##BITS##_on_stream(void *dest, const void *source,            \
						     size_t nelems, int pe, cudaStream_t s)     \
	{                                                                                       \
		kinet_shmem_get_on_stream(dest, source, nelems * (BITS / 8), pe, 0, (void *)s); \
	}                                                                                       \
	KNX_NV_H void nvshmemx_get##BITS##_nbi_on_stream(void *dest, const void *source,        \
							 size_t nelems, int pe, cudaStream_t s) \
	{                                                                                       \
		kinet_shmem_get_on_stream(dest, source, nelems * (BITS / 8), pe, 1, (void *)s); \
	}                                                                                       \
	KNX_NV_H void nvshmemx_put##BITS##_signal_on_stream(                                    \
		void *dest, const void *source, size_t nelems, uint64_t *sig_addr,              \
		uint64_t signal, int sig_op, int pe, cudaStream_t s)                            \
	{                                                                                       \
		kinet_shmem_put_signal_on_stream(dest, source, nelems * (BITS / 8), sig_addr,   \
						 signal, sig_op, pe, 0, (void *)s);             \
	}                                                                                       \
	KNX_NV_H void nvshmemx_put##BITS##_signal_nbi_on_stream(                                \
		void *dest, const void *source, size_t nelems, uint64_t *sig_addr,              \
		uint64_t signal, int sig_op, int pe, cudaStream_t s)                            \
	{                                                                                       \
		kinet_shmem_put_signal_on_stream(dest, source, nelems * (BITS / 8), sig_addr,   \
						 signal, sig_op, pe, 1, (void *)s);             \
	}
KNX_NV_SIZED_ON_STREAM(8)
KNX_NV_SIZED_ON_STREAM(16)
KNX_NV_SIZED_ON_STREAM(32)
KNX_NV_SIZED_ON_STREAM(64)
KNX_NV_SIZED_ON_STREAM(128)

/* The typed forms, every standard RMA type (half and bfloat16 included). */
#define KNX_NV_RMA_ON_STREAM(NAME, TYPE)                                                        \
	KNX_NV_H void nvshmemx_##NAME##_put_on_stream(TYPE *dest, const TYPE *source,           \
						      size_t nelems, int pe, cudaStream_t s)    \
	{                                                                                       \
		kinet_shmem_put_on_stream(dest, source, nelems * sizeof(TYPE), pe, 0, (void *)s); \
	}                                                                                       \
	KNX_NV_H void nvshmemx_##NAME##_put_nbi_on_stream(TYPE *dest, const TYPE *source,       \
							  size_t nelems, int pe, cudaStream_t s) \
	{                                                                                       \
		kinet_shmem_put_on_stream(dest, source, nelems * sizeof(TYPE), pe, 1, (void *)s); \
	}                                                                                       \
	KNX_NV_H void nvshmemx_##NAME##_get_on_stream(TYPE *dest, const TYPE *source,           \
						      size_t nelems, int pe, cudaStream_t s)    \
	{                                                                                       \
		kinet_shmem_get_on_stream(dest, source, nelems * sizeof(TYPE), pe, 0, (void *)s); \
	}                                                                                       \
	KNX_NV_H void nvshmemx_##NAME##_get_nbi_on_stream(TYPE *dest, const TYPE *source,       \
							  size_t nelems, int pe, cudaStream_t s) \
	{                                                                                       \
		kinet_shmem_get_on_stream(dest, source, nelems * sizeof(TYPE), pe, 1, (void *)s); \
	}                                                                                       \
	KNX_NV_H void nvshmemx_##NAME##_p_on_stream(TYPE *dest, const TYPE value, int pe,       \
						    cudaStream_t s)                             \
	{                                                                                       \
		uint64_t w_;                                                                    \
		KNX_NV_BITS(TYPE, value, w_);                                                   \
		kinet_shmem_p_on_stream(dest, w_, sizeof(TYPE), pe, (void *)s);                 \
	}                                                                                       \
	KNX_NV_H TYPE nvshmemx_##NAME##_g_on_stream(const TYPE *src, int pe, cudaStream_t s)    \
	{                                                                                       \
		uint64_t w_ = 0;                                                                \
		TYPE v_;                                                                        \
		kinet_shmem_g_on_stream(src, sizeof(TYPE), pe, &w_, (void *)s);                 \
		memcpy((void *)&v_, &w_, sizeof(TYPE));                                         \
		return v_;                                                                      \
	}                                                                                       \
	KNX_NV_H void nvshmemx_##NAME##_put_signal_on_stream(                                   \
		TYPE *dest, const TYPE *source, size_t nelems, uint64_t *sig_addr,              \
		uint64_t signal, int sig_op, int pe, cudaStream_t s)                            \
	{                                                                                       \
		kinet_shmem_put_signal_on_stream(dest, source, nelems * sizeof(TYPE), sig_addr, \
						 signal, sig_op, pe, 0, (void *)s);             \
	}                                                                                       \
	KNX_NV_H void nvshmemx_##NAME##_put_signal_nbi_on_stream(                               \
		TYPE *dest, const TYPE *source, size_t nelems, uint64_t *sig_addr,              \
		uint64_t signal, int sig_op, int pe, cudaStream_t s)                            \
	{                                                                                       \
		kinet_shmem_put_signal_on_stream(dest, source, nelems * sizeof(TYPE), sig_addr, \
						 signal, sig_op, pe, 1, (void *)s);             \
	}
KNX_NV_RMA_TYPES(KNX_NV_RMA_ON_STREAM)
KNX_NV_RMA_TYPES_F16(KNX_NV_RMA_ON_STREAM)

/* ---- atomics --------------------------------------------------------------------------------- */

/* The standard AMO types; the extended ones add float and double (fetch,
 * set, swap); the bitwise ones are the unsigned and fixed-width ones. */
#define KNX_NV_AMO_TYPES(X)                                                                     \
	X(int, int)                                                                             \
	X(long, long)                                                                           \
	X(longlong, long long)                                                                  \
	X(uint, unsigned int)                                                                   \
	X(ulong, unsigned long)                                                                 \
	X(ulonglong, unsigned long long)                                                        \
	X(int32, int32_t)                                                                       \
	X(int64, int64_t)                                                                       \
	X(uint32, uint32_t)                                                                     \
	X(uint64, uint64_t)                                                                     \
	X(size, size_t)                                                                         \
	X(ptrdiff, ptrdiff_t)
#define KNX_NV_AMO_EXT_TYPES(X) KNX_NV_AMO_TYPES(X) X(float, float) X(double, double)
#define KNX_NV_AMO_BIT_TYPES(X)                                                                 \
	X(uint, unsigned int)                                                                   \
	X(ulong, unsigned long)                                                                 \
	X(ulonglong, unsigned long long)                                                        \
	X(int32, int32_t)                                                                       \
	X(int64, int64_t)                                                                       \
	X(uint32, uint32_t)                                                                     \
	X(uint64, uint64_t)

/* One atomic: value and compare as the bytes of their type (size bytes);
 * the old value's bytes back (fetch), or 0. */
KNX_NV_HD uint64_t knx_nv_amo(void *dest, int amo, uint32_t size, uint64_t value, uint64_t cond,
			      int pe, int fetch)
{
	uint64_t o = 0;
	(void)KNX_NV_DUAL(
		kn_shmem_atomic(dest, amo, size, value, cond, pe, fetch ? &o : (uint64_t *)0),
		kinet_shmem_atomic(dest, amo, size, value, cond, pe, fetch ? &o : (uint64_t *)0));
	return o;
}

/* The generated calls: TYPE's bytes in, TYPE's bytes out. */
#define KNX_NV_AMO_CALL(TYPE, dest, amo, value, cond, pe, fetch)                                \
	uint64_t a_, c_;                                                                        \
	TYPE r_;                                                                                \
	KNX_NV_BITS(TYPE, value, a_);                                                           \
	KNX_NV_BITS(TYPE, cond, c_);                                                            \
	uint64_t o_ = knx_nv_amo((void *)(dest), amo, sizeof(TYPE), a_, c_, pe, fetch);         \
	memcpy(&r_, &o_, sizeof(TYPE))

#define KNX_NV_AMO_EXT(NAME, TYPE)                                                              \
	KNX_NV_HD TYPE nvshmem_##NAME##_atomic_fetch(const TYPE *source, int pe)                \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, source, KN_AMO_FETCH, (TYPE)0, (TYPE)0, pe, 1);           \
		return r_;                                                                      \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_atomic_set(TYPE *dest, TYPE value, int pe)              \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_SWAP, value, (TYPE)0, pe, 0);                \
		(void)r_;                                                                       \
	}                                                                                       \
	KNX_NV_HD TYPE nvshmem_##NAME##_atomic_swap(TYPE *dest, TYPE value, int pe)             \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_SWAP, value, (TYPE)0, pe, 1);                \
		return r_;                                                                      \
	}
KNX_NV_AMO_EXT_TYPES(KNX_NV_AMO_EXT)

#define KNX_NV_AMO_STD(NAME, TYPE)                                                              \
	KNX_NV_HD TYPE nvshmem_##NAME##_atomic_compare_swap(TYPE *dest, TYPE cond, TYPE value,  \
							   int pe)                              \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_COMPARE_SWAP, value, cond, pe, 1);           \
		return r_;                                                                      \
	}                                                                                       \
	KNX_NV_HD TYPE nvshmem_##NAME##_atomic_fetch_inc(TYPE *dest, int pe)                    \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_ADD, (TYPE)1, (TYPE)0, pe, 1);         \
		return r_;                                                                      \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_atomic_inc(TYPE *dest, int pe)                          \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_ADD, (TYPE)1, (TYPE)0, pe, 0);         \
		(void)r_;                                                                       \
	}                                                                                       \
	KNX_NV_HD TYPE nvshmem_##NAME##_atomic_fetch_add(TYPE *dest, TYPE value, int pe)        \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_ADD, value, (TYPE)0, pe, 1);           \
		return r_;                                                                      \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_atomic_add(TYPE *dest, TYPE value, int pe)              \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_ADD, value, (TYPE)0, pe, 0);           \
		(void)r_;                                                                       \
	}
KNX_NV_AMO_TYPES(KNX_NV_AMO_STD)

#define KNX_NV_AMO_BIT(NAME, TYPE)                                                              \
	KNX_NV_HD TYPE nvshmem_##NAME##_atomic_fetch_and(TYPE *dest, TYPE value, int pe)        \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_AND, value, (TYPE)0, pe, 1);           \
		return r_;                                                                      \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_atomic_and(TYPE *dest, TYPE value, int pe)              \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_AND, value, (TYPE)0, pe, 0);           \
		(void)r_;                                                                       \
	}                                                                                       \
	KNX_NV_HD TYPE nvshmem_##NAME##_atomic_fetch_or(TYPE *dest, TYPE value, int pe)         \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_OR, value, (TYPE)0, pe, 1);            \
		return r_;                                                                      \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_atomic_or(TYPE *dest, TYPE value, int pe)               \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_OR, value, (TYPE)0, pe, 0);            \
		(void)r_;                                                                       \
	}                                                                                       \
	KNX_NV_HD TYPE nvshmem_##NAME##_atomic_fetch_xor(TYPE *dest, TYPE value, int pe)        \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_XOR, value, (TYPE)0, pe, 1);           \
		return r_;                                                                      \
	}                                                                                       \
	KNX_NV_HD void nvshmem_##NAME##_atomic_xor(TYPE *dest, TYPE value, int pe)              \
	{                                                                                       \
		KNX_NV_AMO_CALL(TYPE, dest, KN_AMO_FETCH_XOR, value, (TYPE)0, pe, 0);           \
		(void)r_;                                                                       \
	}
KNX_NV_AMO_BIT_TYPES(KNX_NV_AMO_BIT)

/* ---- collectives ------------------------------------------------------------------------------ */

/* NVSHMEM's reduction types: the bitwise ones (and, or, xor); the standard
 * ones (min, max) add the signed and floating types (half and bfloat16
 * below); sum and prod take the standard ones (no complex types). */
#define KNX_NV_RED_BIT_TYPES(X, OP)                                                             \
	X(uchar, unsigned char, OP)                                                             \
	X(ushort, unsigned short, OP)                                                           \
	X(uint, unsigned int, OP)                                                               \
	X(ulong, unsigned long, OP)                                                             \
	X(ulonglong, unsigned long long, OP)                                                    \
	X(int8, int8_t, OP)                                                                     \
	X(int16, int16_t, OP)                                                                   \
	X(int32, int32_t, OP)                                                                   \
	X(int64, int64_t, OP)                                                                   \
	X(uint8, uint8_t, OP)                                                                   \
	X(uint16, uint16_t, OP)                                                                 \
	X(uint32, uint32_t, OP)                                                                 \
	X(uint64, uint64_t, OP)                                                                 \
	X(size, size_t, OP)
#define KNX_NV_RED_STD_TYPES(X, OP)                                                             \
	KNX_NV_RED_BIT_TYPES(X, OP)                                                             \
	X(char, char, OP)                                                                       \
	X(schar, signed char, OP)                                                               \
	X(short, short, OP)                                                                     \
	X(int, int, OP)                                                                         \
	X(long, long, OP)                                                                       \
	X(longlong, long long, OP)                                                              \
	X(float, float, OP)                                                                     \
	X(double, double, OP)
#define KNX_NV_RED_ALL(X)                                                                       \
	KNX_NV_RED_BIT_TYPES(X, and)                                                            \
	KNX_NV_RED_BIT_TYPES(X, or)                                                             \
	KNX_NV_RED_BIT_TYPES(X, xor)                                                            \
	KNX_NV_RED_STD_TYPES(X, min)                                                            \
	KNX_NV_RED_STD_TYPES(X, max)                                                            \
	KNX_NV_RED_STD_TYPES(X, sum)                                                            \
	KNX_NV_RED_STD_TYPES(X, prod)

#define KNX_NV_OP_and KN_RED_AND
#define KNX_NV_OP_or KN_RED_OR
#define KNX_NV_OP_xor KN_RED_XOR
#define KNX_NV_OP_min KN_RED_MIN
#define KNX_NV_OP_max KN_RED_MAX
#define KNX_NV_OP_sum KN_RED_SUM
#define KNX_NV_OP_prod KN_RED_PROD

/* The thread-scope and host-called form: the device collective in device
 * code (a host executor's launch included), else the host's
 * (kinet_shmem_coll: with CUDA, a kernel on the layer's own stream,
 * waited for, as the host-initiated RMA). Returns 0 or kinet's negative
 * errno. */
KNX_NV_HD int knx_nv_coll(int coll, nvshmem_team_t team, void *dest, const void *src, size_t n,
			  int root, int op, int dt)
{
#if defined(__CUDA_ARCH__)
	return kn_shmem_coll(coll, team, dest, src, n, root, op, dt);
#else
	return KNX_NV_ON_DEVICE() ? kn_shmem_coll(coll, team, dest, src, n, root, op, dt)
				  : kinet_shmem_coll(coll, team, dest, src, n, root, op, dt);
#endif
}

/* reduce and reducescatter: thread (host and device), warp, block, on stream. */
#define KNX_NV_RED_DT(NAME, TYPE, OP, DT)                                                       \
	KNX_NV_HD int nvshmem_##NAME##_##OP##_reduce(nvshmem_team_t team, TYPE *dest,           \
						     const TYPE *source, size_t nreduce)        \
	{                                                                                       \
		return knx_nv_coll(KN_COLL_REDUCE, team, dest, source, nreduce, 0,              \
				   KNX_NV_OP_##OP, DT);                                         \
	}                                                                                       \
	KNX_NV_D int nvshmemx_##NAME##_##OP##_reduce_warp(nvshmem_team_t team, TYPE *dest,      \
							  const TYPE *source, size_t nreduce)   \
	{                                                                                       \
		return kn_shmem_coll_warp(KN_COLL_REDUCE, team, dest, source, nreduce, 0,       \
					  KNX_NV_OP_##OP, DT);                                  \
	}                                                                                       \
	KNX_NV_D int nvshmemx_##NAME##_##OP##_reduce_block(nvshmem_team_t team, TYPE *dest,     \
							   const TYPE *source, size_t nreduce)  \
	{                                                                                       \
		return kn_shmem_coll_block(KN_COLL_REDUCE, team, dest, source, nreduce, 0,      \
					   KNX_NV_OP_##OP, DT);                                 \
	}                                                                                       \
	KNX_NV_H int nvshmemx_##NAME##_##OP##_reduce_on_stream(                                 \
		nvshmem_team_t team, TYPE *dest, const TYPE *source, size_t nreduce,            \
		cudaStream_t stream)                                                            \
	{                                                                                       \
		return kinet_shmem_coll_on_stream(KN_COLL_REDUCE, team, dest, source, nreduce,  \
						  0, KNX_NV_OP_##OP, DT,                        \
						  (void *)stream);                              \
	}                                                                                       \
	KNX_NV_HD int nvshmem_##NAME##_##OP##_reducescatter(nvshmem_team_t team, TYPE *dest,    \
							    const TYPE *source, size_t nreduce) \
	{                                                                                       \
		return knx_nv_coll(KN_COLL_REDUCESCATTER, team, dest, source, nreduce, 0,       \
				   KNX_NV_OP_##OP, DT);                                         \
	}                                                                                       \
	KNX_NV_D int nvshmemx_##NAME##_##OP##_reducescatter_warp(                               \
		nvshmem_team_t team, TYPE *dest, const TYPE *source, size_t nreduce)            \
	{                                                                                       \
		return kn_shmem_coll_warp(KN_COLL_REDUCESCATTER, team, dest, source, nreduce,   \
					  0, KNX_NV_OP_##OP, DT);                               \
	}                                                                                       \
	KNX_NV_D int nvshmemx_##NAME##_##OP##_reducescatter_block(                              \
		nvshmem_team_t team, TYPE *dest, const TYPE *source, size_t nreduce)            \
	{                                                                                       \
		return kn_shmem_coll_block(KN_COLL_REDUCESCATTER, team, dest, source, nreduce,  \
					   0, KNX_NV_OP_##OP, DT);                              \
	}                                                                                       \
	KNX_NV_H int nvshmemx_##NAME##_##OP##_reducescatter_on_stream(                          \
		nvshmem_team_t team, TYPE *dest, const TYPE *source, size_t nreduce,            \
		cudaStream_t stream)                                                            \
	{                                                                                       \
		return kinet_shmem_coll_on_stream(KN_COLL_REDUCESCATTER, team, dest, source,    \
						  nreduce, 0, KNX_NV_OP_##OP,                   \
						  DT, (void *)stream);                          \
	}
#define KNX_NV_RED(NAME, TYPE, OP) KNX_NV_RED_DT(NAME, TYPE, OP, KN_SHMEM_DTYPE(TYPE))
KNX_NV_RED_ALL(KNX_NV_RED)
/* half and bfloat16: combined in float, rounded back at each step */
#define KNX_NV_DT16_half KN_DT_HALF
#define KNX_NV_DT16_bfloat16 KN_DT_BF16
#define KNX_NV_RED16(NAME, TYPE, OP) KNX_NV_RED_DT(NAME, TYPE, OP, KNX_NV_DT16_##NAME)
#define KNX_NV_RED_F16(X, OP) X(half, half, OP) X(bfloat16, __nv_bfloat16, OP)
KNX_NV_RED_F16(KNX_NV_RED16, min)
KNX_NV_RED_F16(KNX_NV_RED16, max)
KNX_NV_RED_F16(KNX_NV_RED16, sum)
KNX_NV_RED_F16(KNX_NV_RED16, prod)

/* maxloc of (value, index) pairs, block scope only (as NVSHMEM 3.4): the
 * pair of the largest x, ties to the lowest y, for each of nreduce pairs
 * (NVSHMEM reduces one). */
KNX_NV_D int nvshmemx_double2_maxloc_reduce_block(nvshmem_team_t team, double2 *dest,
						  const double2 *source, size_t nreduce)
{
	return kn_shmem_coll_block(KN_COLL_REDUCE, team, dest, source, nreduce, 0, KN_RED_MAXLOC,
				   KN_DT_DOUBLE2);
}

/* broadcast, fcollect, alltoall of one kind (COLL), bytes or TYPE
 * elements: the four forms. ROOT_P / ROOT_A: broadcast's root parameter
 * and argument (empty and 0 for the others). */
#define KNX_NV_MOVE(FN, XFN, COLL, TYPE, DT, ROOT_P, ROOT_A)                                    \
	KNX_NV_HD int FN(nvshmem_team_t team, TYPE *dest, const TYPE *source,                   \
			 size_t nelems ROOT_P)                                                  \
	{                                                                                       \
		return knx_nv_coll(COLL, team, dest, source, nelems, ROOT_A, 0, DT);            \
	}                                                                                       \
	KNX_NV_D int XFN##_warp(nvshmem_team_t team, TYPE *dest, const TYPE *source,            \
				size_t nelems ROOT_P)                                           \
	{                                                                                       \
		return kn_shmem_coll_warp(COLL, team, dest, source, nelems, ROOT_A, 0, DT);     \
	}                                                                                       \
	KNX_NV_D int XFN##_block(nvshmem_team_t team, TYPE *dest, const TYPE *source,           \
				 size_t nelems ROOT_P)                                          \
	{                                                                                       \
		return kn_shmem_coll_block(COLL, team, dest, source, nelems, ROOT_A, 0, DT);    \
	}                                                                                       \
	KNX_NV_H int XFN##_on_stream(nvshmem_team_t team, TYPE *dest, const TYPE *source,       \
				     size_t nelems ROOT_P, cudaStream_t stream)                 \
	{                                                                                       \
		return kinet_shmem_coll_on_stream(COLL, team, dest, source, nelems, ROOT_A, 0,  \
						  DT, (void *)stream);                          \
	}
#define KNX_NV_COMMA ,
#define KNX_NV_MOVE_TYPED(NAME, TYPE)                                                           \
	KNX_NV_MOVE(nvshmem_##NAME##_broadcast, nvshmemx_##NAME##_broadcast, KN_COLL_BROADCAST, \
		    TYPE, KN_SHMEM_DTYPE(TYPE), KNX_NV_COMMA int PE_root, PE_root)              \
	KNX_NV_MOVE(nvshmem_##NAME##_fcollect, nvshmemx_##NAME##_fcollect, KN_COLL_FCOLLECT,    \
		    TYPE, KN_SHMEM_DTYPE(TYPE), , 0)                                            \
	KNX_NV_MOVE(nvshmem_##NAME##_alltoall, nvshmemx_##NAME##_alltoall, KN_COLL_ALLTOALL,    \
		    TYPE, KN_SHMEM_DTYPE(TYPE), , 0)
KNX_NV_RMA_TYPES(KNX_NV_MOVE_TYPED)
/* half and bfloat16 (NVSHMEM's standard RMA types too): moved as 2-byte words */
#define KNX_NV_MOVE_TYPED16(NAME, TYPE)                                                         \
	KNX_NV_MOVE(nvshmem_##NAME##_broadcast, nvshmemx_##NAME##_broadcast, KN_COLL_BROADCAST, \
		    TYPE, KN_DT_UINT16, KNX_NV_COMMA int PE_root, PE_root)                      \
	KNX_NV_MOVE(nvshmem_##NAME##_fcollect, nvshmemx_##NAME##_fcollect, KN_COLL_FCOLLECT,    \
		    TYPE, KN_DT_UINT16, , 0)                                                    \
	KNX_NV_MOVE(nvshmem_##NAME##_alltoall, nvshmemx_##NAME##_alltoall, KN_COLL_ALLTOALL,    \
		    TYPE, KN_DT_UINT16, , 0)
KNX_NV_RMA_TYPES_F16(KNX_NV_MOVE_TYPED16)
KNX_NV_MOVE(nvshmem_broadcastmem, nvshmemx_broadcastmem, KN_COLL_BROADCAST, void, KN_DT_UINT8,
	    KNX_NV_COMMA int PE_root, PE_root)
KNX_NV_MOVE(nvshmem_fcollectmem, nvshmemx_fcollectmem, KN_COLL_FCOLLECT, void, KN_DT_UINT8, , 0)
KNX_NV_MOVE(nvshmem_alltoallmem, nvshmemx_alltoallmem, KN_COLL_ALLTOALL, void, KN_DT_UINT8, , 0)

/* The strided alltoall, host and device (thread scope) as in NVSHMEM 3.4:
 * strides in elements, at least 1. */
#define KNX_NV_ALLTOALLS(NAME, TYPE)                                                            \
	KNX_NV_HD int nvshmem_##NAME##_alltoalls(nvshmem_team_t team, TYPE *dest,               \
						 const TYPE *source, ptrdiff_t dst,             \
						 ptrdiff_t sst, size_t nelems)                  \
	{                                                                                       \
		return KNX_NV_DUAL(kn_shmem_alltoalls(team, dest, source, dst, sst, nelems,     \
						      sizeof(TYPE)),                            \
				   kinet_shmem_alltoalls(team, dest, source, dst, sst, nelems,  \
							 sizeof(TYPE)));                        \
	}
KNX_NV_RMA_TYPES(KNX_NV_ALLTOALLS)
KNX_NV_RMA_TYPES_F16(KNX_NV_ALLTOALLS)

#endif /* KINET_NVSHMEM_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shmem_int.h - libkinet_shmem's private state: one PE per process.
 *
 * The layer is built on kinet's public API (kinet.h, net.h, boot.h, the
 * device API) and never includes src/core/internal.h or a backend's headers; the
 * one thing it takes from libkinet's private node is kinet_log, the logger
 * every kinet module writes through (same prefix, KINET_LOG level,
 * application callback).
 */
#ifndef KINET_SHMEM_INT_H
#define KINET_SHMEM_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <kinet/kinet.h>
#include <kinet/net.h>
#include <kinet/boot.h>
#include <kinet/shmem.h>
#include <kinet/shmem_device.h>

/* libkinet's logger (its private node). */
void kinet_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define SHLOG_ERR(...) kinet_log(KINET_LOG_ERROR, "shmem: " __VA_ARGS__)
#define SHLOG_WARN(...) kinet_log(KINET_LOG_WARN, "shmem: " __VA_ARGS__)
#define SHLOG_INFO(...) kinet_log(KINET_LOG_INFO, "shmem: " __VA_ARGS__)
#define SHLOG_DBG(...) kinet_log(KINET_LOG_DEBUG, "shmem: " __VA_ARGS__)

/* A block of a heap (first fit, address order, neighbours merged on free). */
struct shm_block {
	uint64_t off, len;
	bool used;
	struct shm_block *next;
};

struct shm_heap {
	uint8_t *base;     /* as device code addresses it (UVA: the host too) */
	uint64_t len;
	kinet_mr *mr;      /* the user part: the device heap past KN_SHMEM_RESERVED */
	kinet_mr *mr_own;  /* the device heap's reserved bytes (NULL: host heap) */
	int kind;          /* enum kinet_mem_kind of its memory */
	char shm_name[64]; /* shared memory object backing it ("" : none) */
	bool shm_unlinked;
	struct shm_block *blocks;
};

/* A team, host side (the device copy lives in kn_shmem.team). */
struct shm_team {
	bool used;
	int size, my;
	int32_t *members;  /* host copy */
	int32_t *dmembers; /* what device code reads (GPU memory with CUDA) */
	uint32_t config_len; /* the bytes kinet_shmem_team_set_config kept (0: none) */
	uint8_t config[KINET_SHMEM_TEAM_CONFIG_MAX];
};

/* The peer as this process sees it (the device copy: kn_shmem_peer). */
struct shm_peer {
	int node;          /* node index */
	bool local;        /* heaps mapped here */
	uint8_t *map[2];   /* the mappings (host: shm; CUDA: IPC, shm) */
	size_t map_len[2];
	bool host_registered; /* CUDA: map[1] registered with the CUDA runtime */
	kinet_qp **qps;    /* nqp, NULL: none */
	uint64_t base[2];  /* the heaps' starts */
	uint32_t rkey[2];  /* their user parts */
	uint32_t rkey_own; /* the device heap's reserved bytes */
};

struct shm_reg {
	void *addr;
	size_t len;
	kinet_mr *mr;
};

struct shm_state {
	bool up;
	kinet_boot *boot;
	bool own_boot;
	int me, n;
	int exec;          /* KINET_SHMEM_EXEC_HOST or _CUDA */
	int gpu;
	uint32_t nqp, qp_map;
	bool p2p;
	uint64_t timeout_ns;
	kinet_ctx *ctx;
	kinet_pd *pd;
	struct shm_heap heap[2];
	struct shm_peer *peers;
	int node, local_pe, local_n;
	struct shm_team team[KN_SHMEM_MAX_TEAMS];
	struct shm_reg regs[KN_SHMEM_MAX_REGS];
	uint64_t alloc_seq; /* collective calls, for the agreement checks */
	int host_error;     /* the first error of a host call without a return code */
	/* the device state: the host copy, and where device code reads it */
	kn_shmem host;
	kn_shmem *dev;        /* == &host, or GPU memory */
	kn_shmem_peer *dpeers;
	kn_shmem_dyn *ddyn;
	kn_qp *dqps;          /* every peer's QP descriptors, by value */
	kn_shmem_dyn hdyn;    /* the host executor's dyn */
};

extern struct shm_state shm_g;

/* ---- init.c ---- */
/* kinet_shmem_init; own: a bootstrap the layer takes (closed by finalize,
 * and on failure). */
int shm_init_with(const struct kinet_shmem_attr *attr, kinet_boot *own);
/* Copies the host image of the device state where device code reads it. */
int shm_push_state(void);
/* Every PE's result of a step: 0 when all succeeded, else this PE's error or
 * -ECANCELED (another failed, and logged why). Collective. */
int shm_all_ok(int rc);

/* ---- heap.c ---- */
int shm_heap_init(struct shm_heap *h);
void shm_heap_fini(struct shm_heap *h);

/* ---- team.c ---- */
int shm_teams_init(void);
void shm_teams_fini(void);

/* ---- host.c ---- */
/* Calls every registered setter with the device state (NULL: none). */
void shm_modules_set(const void *state);

/* ---- cuda.c (stubs without CUDA) ---- */
int shm_cuda_usable(int gpu);
int shm_cuda_select(int gpu);
int shm_cuda_alloc(size_t len, void **out);
void shm_cuda_free(void *p);
int shm_cuda_memset(void *p, int v, size_t len);
int shm_cuda_copy_to(void *dev, const void *host, size_t len);
int shm_cuda_copy_from(void *host, const void *dev, size_t len);
#define SHM_IPC_HANDLE 64
int shm_cuda_ipc_get(void *dev, uint8_t handle[SHM_IPC_HANDLE]);
int shm_cuda_ipc_open(const uint8_t handle[SHM_IPC_HANDLE], void **out);
void shm_cuda_ipc_close(void *p);
int shm_cuda_host_register(void *p, size_t len);
void shm_cuda_host_unregister(void *p);
/* Modules of kinet_shmem_cumodule_init: set to the device state (NULL:
 * none) at init and finalize. */
void shm_cuda_cumodules_set(const void *state);

/* ---- rma.c ---- */
/* barrier_all (0), sync_all (1), quiet (2) on a stream. */
int shm_stream_op(void *stream, int op);

#endif /* KINET_SHMEM_INT_H */

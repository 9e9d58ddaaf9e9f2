/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf.h - the pieces of kinet-perf and the seams between them (see the
 * comment at the top of kinet-perf.c for the overall picture).
 *
 *   kinet-perf.c   command line, size sweep, the test table, exit codes
 *   setup.c        "the QP pair": context, QPs, registered buffers, the jobs
 *                  of one message size, and the data check after a run
 *   exec_host.c    the host executor (CPU threads) and the memcpy baseline
 *   perf_body.h    the test bodies: device-API code, portable C (cc and nvcc)
 *   report.c       statistics and the perftest-style / JSON output
 *   remote.c       server / client / --pair: the two ends in two processes
 */
#ifndef KINET_PERF_H
#define KINET_PERF_H

#include <stdbool.h>
#include <stdint.h>
#include <kinet/kinet.h>
#include "perf_body.h"

/* ---- tests ---------------------------------------------------------------- */

enum perf_kind { PERF_BW = 0, PERF_LAT = 1 };

/* Test flags. */
#define PERF_F_FIXED8 1u    /* atomics: the message is always 8 bytes */
#define PERF_F_RECV 2u      /* SENDs: receive queues (the target's; send_lat: both) */
#define PERF_F_PINGPONG 4u  /* both directions carry data (write_lat, send_lat) */
#define PERF_F_NO_NIC 8u    /* baseline without the NIC (memcpy_bw) */
#define PERF_F_DEVICE 16u   /* runs device-API code (perf_body.h) */

struct perf_test {
	const char *name;
	int id;   /* enum perf_test_id (perf_body.h) */
	int kind; /* enum perf_kind */
	unsigned flags;
	const char *title; /* the banner line, as perftest names its tests */
	const char *desc;  /* one line for --help */
};

/* ---- options -------------------------------------------------------------- */

struct perf_opts {
	const struct perf_test *test;
	uint64_t size;       /* -s */
	uint64_t min_size;   /* -a: first size (default 2) */
	uint64_t max_size;   /* -a: last size (default 2^23) */
	bool sweep;          /* -a */
	uint64_t iters;      /* -n */
	uint64_t warmup;     /* untimed iterations before each measurement */
	unsigned duration_s; /* -D: seconds of each timed phase (0: -n iterations) */
	int threads;         /* --threads */
	uint32_t qdepth;     /* -t, --qdepth: outstanding WQEs per thread */
	int nqp;             /* -q: QPs (0: one per thread, or 1 with --shared) */
	bool json;           /* --json */
	const char *json_file; /* --out_json, --out_json_file: JSON Lines into this file */
	FILE *json_out;      /* that file, open during the run */
	bool report_gbits;   /* --report_gbits: bandwidth in Gb/s (10^9 bits) */
	int engine_threads;  /* --engine-threads (0: KINET_ENGINE_THREADS) */
	int db_mode;         /* --db-mode (enum kn_db_mode, KN_DB_AUTO by default) */
	bool shared;         /* --shared: one QP shared by every thread */
	bool yield;          /* --poll yield: sched_yield() while waiting (host) */
	const char *executor; /* --executor: "host" (see kinet-perf.c) */
	const char *peer;     /* HOST operand: the client of a server (remote.c) */
	bool corrupt;         /* --corrupt: damage the destination before the check */
	/* the NIC */
	int backend;          /* --backend, KINET_BACKEND: enum kinet_backend */
	const char *device;   /* -d: RDMA device (mlx5) */
	int ib_port;          /* -i: port of the device (0: the first active one) */
	int gid_index;        /* -x: GID index (-1: picked by the link layer) */
	int mtu;              /* -m: path MTU asked for (0: the port's) */
	uint32_t inline_size; /* -I: writes of at most this many bytes go inline (0: none) */
	bool cpu_freq;        /* -F (accepted; kinet-perf makes no CPU-frequency check) */
	/* across processes (remote.c) */
	bool loopback;        /* --loopback: both ends in this process (a local pair) */
	bool server;          /* --server, or a NIC test with no HOST: wait for a client */
	bool pair;            /* --pair: a server and a client on this machine */
	bool pair_threads;    /* --pair=threads: the two sides on two threads of this process */
	int port;             /* -p: the server's TCP port (default 18515; -1: unset) */
	const char *secret;   /* --secret (NULL: KINET_BOOT_SECRET) */
	int timeout_ms;       /* --timeout: bound on each exchange (0: default) */
	unsigned given;       /* PERF_GIVEN_*: run options given on the command line */
	/* the cuda executor (exec_cuda.cu); ctas == 0 on the host executor */
	int scope;            /* --scope: enum perf_scope */
	int ctas;             /* --ctas: CTAs of the launch */
	int cta_threads;      /* --cta-threads: threads per CTA */
	int mem;              /* --mem: enum perf_mem, where the payload buffers live */
	bool shared_cta;      /* --shared=cta: one QP per CTA, shared by its threads */
	int qp_group;         /* jobs per QP (set by kinet-perf.c: 1, threads / -q, ...) */
	int qp_share;         /* enum kn_share of the QPs */
	/* what the JSON records say about the run */
	const char *cmdline;  /* the command line, as given */
	char date[32];        /* start of the run, UTC, ISO 8601 */
	char host[64];        /* this host's name */
};

/* Who posts on the GPU: each thread alone (device.h), each warp together or
 * each CTA together (device_cuda.cuh: one reservation, one doorbell). */
enum perf_scope { PERF_SCOPE_THREAD = 0, PERF_SCOPE_WARP = 1, PERF_SCOPE_BLOCK = 2 };
/* Payload buffers: host memory (pinned and mapped into the GPU with the
 * cuda executor) or GPU memory (cudaMalloc; copied back for the check). */
enum perf_mem { PERF_MEM_HOST = 0, PERF_MEM_GPU = 1 };

/* Run options the command line gave (a server takes the client's values for
 * the others, and refuses a client whose values differ from these). */
#define PERF_GIVEN_SIZES 1u     /* -s, -a, --min-size, --max-size */
#define PERF_GIVEN_ITERS 2u     /* -n */
#define PERF_GIVEN_WARMUP 4u    /* --warmup */
#define PERF_GIVEN_THREADS 8u   /* --threads */
#define PERF_GIVEN_QDEPTH 16u   /* -t, --qdepth */
#define PERF_GIVEN_SHARED 32u   /* --shared */
#define PERF_GIVEN_QPS 64u      /* -q */
#define PERF_GIVEN_INLINE 128u  /* -I */
#define PERF_GIVEN_DURATION 256u /* -D */
#define PERF_GIVEN_SCOPE 512u    /* --scope */
#define PERF_GIVEN_CTA_THREADS 1024u /* --cta-threads */

/* ---- the QP pair and its buffers (setup.c) ----------------------------------- */

/* Everything a run needs: the connection (today a local pair of QPs per
 * thread, or one shared pair), the registered buffers of both sides, the
 * jobs (one per thread) and their sample arrays. */
struct perf_env {
	const struct perf_opts *o;
	kinet_ctx *ctx;
	kinet_pd *pd;
	int nqp;              /* QP pairs: threads / o->qp_group */
	int backend;          /* enum kinet_backend of the context (-1 without one) */
	const char *backend_reason; /* kinet_ctx_backend_reason() */
	kinet_qp **qa, **qb;  /* initiator side, target side */
	kn_qp **da, **db;     /* their device descriptors */
	/* side A (initiator) and side B (target): one slice per thread */
	uint8_t *abuf, *bbuf;
	size_t slice;         /* bytes per thread slice */
	size_t off_buf1;      /* second data buffer of a slice (write_lat, send_lat:
			       * where the peer's messages land) */
	size_t off_small;     /* atomic results / counters of a slice */
	size_t buf_len;       /* bytes of a side */
	kinet_mr *amr, *bmr;
	/* jobs and their memory */
	struct perf_job *jobs;
	uint64_t *tpost, *tcomp, *ring;
	uint64_t *barrier;    /* a 64-byte line of its own */
	uint64_t cap_iters;   /* sample slots per thread */
	uint64_t cur_size;
	uint64_t seed;
	/* across processes (remote.c): this process's side only, in qa/da,
	 * abuf/amr (qb, db, bbuf, bmr stay NULL); NULL for a local pair */
	const char *procs_line; /* the header's "Processes" line */
	char provider[32];    /* transport of this side's QPs ("tcp;ofi_rxm", "mlx5") */
	char peer_host[64];
	int mem_initiator, mem_target; /* enum kinet_mem_kind of both sides' payloads */
	char mem_line[96];    /* across processes: how this side's NIC reaches its payload */
};

/* Opens e->ctx and e->pd with the backend and device options of o, and
 * refuses options that the opened backend cannot honour (-d, -i, -x, -m on
 * the software NIC; --engine-threads on mlx5). 0 or -errno; on failure
 * `what` names the step or the refusal. */
int perf_open_ctx(struct perf_env *e, const char **what);
/* The QP (index into qa/da) that job i uses. */
int perf_qp_of(const struct perf_opts *o, int i);

/* Opens the context and the QP pairs for o (no buffers yet). 0 or -errno;
 * `what` names the step that failed. */
int perf_env_open(struct perf_env *e, const struct perf_opts *o, const char **what);
/* Buffers for messages up to max_size (allocated and registered once). */
int perf_env_buffers(struct perf_env *e, uint64_t max_size, const char **what);
/* Fills the buffers with fresh random contents and builds the jobs of one
 * message size. */
int perf_env_prepare(struct perf_env *e, uint64_t size);
/* Checks the data after a run of `size`: 0, or -EIO with a description in
 * why (the first differing byte, thread and offset). */
int perf_env_verify(struct perf_env *e, uint64_t size, char *why, size_t whylen);
/* --corrupt: flips one byte of thread 0's destination (a test of the data
 * check itself). */
void perf_env_corrupt(struct perf_env *e, uint64_t size);
void perf_env_close(struct perf_env *e);
/* Resolved doorbell mode of the QPs (enum kn_db_mode). */
int perf_env_db_mode(const struct perf_env *e);
/* The pseudo-random contents of the data check: n bytes, one stream per seed
 * (the same on every host, so a peer can regenerate what it should hold). */
void perf_fill_random(uint8_t *p, size_t n, uint64_t seed);

/* ---- executors ------------------------------------------------------------- */

/* An executor runs every job of e (one per thread) to its end and returns 0
 * or a negative errno; the outcome of each job (rc, syndrome, bad) is in the
 * job. The host executor runs them on CPU threads (kinet_host_exec); the
 * cuda executor (exec_cuda.cu) copies the jobs to the GPU, launches one
 * thread per job, and copies the jobs and their sample arrays back. */
struct perf_executor {
	const char *name;
	int (*run)(struct perf_env *e);
	/* optional: frees what run() kept across sizes; before perf_env_close */
	void (*close)(struct perf_env *e);
	/* optional (the cuda executor), for --mem gpu across processes
	 * (remote.c), where this side's payload lives in GPU memory and the
	 * peer's NIC reaches it: gpu_alloc allocates e->buf_len bytes of GPU
	 * memory, registers them with e->pd (KINET_ACCESS_ALL) and gives their
	 * address and region (kept by the executor, given back by close); the
	 * jobs then carry these addresses and keys as they are. gpu_copy
	 * copies e->abuf into that memory (to_gpu) or that memory into
	 * e->abuf, which stays the host reference of the data check. 0 or
	 * -errno (after a message on stderr). */
	int (*gpu_alloc)(struct perf_env *e, uint64_t *addr, kinet_mr **mr);
	int (*gpu_copy)(struct perf_env *e, bool to_gpu);
};
extern const struct perf_executor perf_exec_host;
/* memcpy baseline on CPU threads: the same jobs, plain memcpy instead of the
 * NIC. */
int perf_memcpy_run(struct perf_env *e);

/* ---- across processes (remote.c) ----------------------------------------------- */

/* Runs o as the server (o->server), the client (o->peer) or both on this
 * machine (o->pair) with executor x; returns the exit status (0, 1, 2). */
int perf_remote_main(const struct perf_opts *o, const struct perf_executor *x);

/* ---- results and output (report.c) ------------------------------------------ */

struct perf_bw {
	double peak_mbs, avg_mbs, mpps;
	bool has_peak;  /* false in a duration run (no samples kept, as perftest) */
	uint64_t msgs;  /* timed messages of all threads */
};
struct perf_lat {
	double min_us, max_us, typical_us, avg_us, stdev_us, p99_us, p999_us;
	bool duration;  /* a duration run: only avg_us and tps (as perftest) */
	uint64_t n;     /* timed samples of all threads */
	double tps;     /* round trips / operations per second, all threads */
};

/* Statistics over the jobs' sample arrays (merged across threads). */
int perf_bw_stats(const struct perf_env *e, uint64_t size, struct perf_bw *out);
int perf_lat_stats(const struct perf_env *e, struct perf_lat *out);

void perf_report_header(const struct perf_env *e, FILE *f);
/* One size's row: perftest's columns, or a JSON record (with the metadata of
 * the run: version, backend, provider, host, date, executor, memory kinds,
 * command line). The perf_report_* calls print the row as the options ask
 * (--json or columns) on f and a JSON record into --out_json's file. */
void perf_row_bw(const struct perf_env *e, uint64_t size, const struct perf_bw *r, bool json,
		 FILE *f);
void perf_row_lat(const struct perf_env *e, uint64_t size, const struct perf_lat *r, bool json,
		  FILE *f);
void perf_report_bw(const struct perf_env *e, uint64_t size, const struct perf_bw *r, FILE *f);
void perf_report_lat(const struct perf_env *e, uint64_t size, const struct perf_lat *r, FILE *f);
void perf_report_footer(const struct perf_env *e, FILE *f);

#endif

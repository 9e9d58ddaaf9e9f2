/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * remote.c - kinet-perf across processes: a server, a client, or both on
 * this machine (--pair).
 *
 *   kinet-perf TEST [-p PORT]               the server: waits for one client (rank 0)
 *   kinet-perf TEST [options] HOST[:PORT]   the client (rank 1): initiates
 *   kinet-perf TEST --pair [options]        forks a server and a client
 *   kinet-perf TEST --pair=threads ...      the two on two threads of this process
 *
 * Each side first opens its context (--backend: a failure is reported at
 * once). The client then reaches the server's TCP port itself: when nothing
 * listens there it says so at once and on each attempt until --timeout
 * (wait_for_server), and only then joins. The processes meet through the
 * TCP bootstrap (kinet/boot.h: the job secret from --secret or
 * KINET_BOOT_SECRET) and then speak only through fixed-size records
 * exchanged with kinet_boot_allgather (every integer in little-endian
 * order, so hosts of any byte order agree):
 *
 *   HELLO    test, run options, the options given on the command line, the
 *            backend opened. The client's run options apply to both; a
 *            server refuses a client whose values differ from those it was
 *            given explicitly, and both refuse two different backends. Both
 *            sides decide alike from the two records.
 *   DESC     each side's QP descriptors (one per QP: -q, one per thread, or
 *            one shared) and the descriptor of its registered buffer
 *            (kinet/net.h: a software-NIC wire address, or an mlx5 QP's
 *            addressing), or why its setup failed. Then each QP connects to
 *            its peer's.
 *   per message size:
 *   READY    both buffers hold the size's random contents (same seed on
 *            both sides), the connection is up: the client starts.
 *   DONE     the run's outcome on each side (the client's jobs; the
 *            server's replies for write_lat and send_lat, receives for
 *            send_bw), and the number of messages each client job posted (a
 *            duration run's server checks against them).
 *   VERDICT  each side checked what it holds (the server the destination of
 *            writes, sends and atomics, the client the sink of reads, both
 *            for write_lat and send_lat), byte for byte against the contents
 *            regenerated from the seed; the client adds its report, as
 *            columns and as a JSON record, which the server prints too. The
 *            server's buffer stays registered until this exchange: the
 *            client has finished with it by then.
 *
 * A duration run (-D) of write_lat, send_lat or send_bw: the server's target
 * job cannot know how many messages come, so the client's job writes the
 * count into the server's stop word after its last message (perf_body.h).
 *
 * A failure on either side travels in the next record, so both processes
 * say what went wrong (a --pair server leaves that to its client) and both
 * exit 1. Every exchange is bounded by --timeout (the bootstrap's timeout;
 * default 300 s, or KINET_BOOT_TIMEOUT_MS when set; at least -D + 60 s): the
 * longest wait is the server's during the client's run of one message size.
 *
 * --pair=threads exists for the emulated rdma-core (KINET_MLX5_EMULATE=1),
 * whose QPs reach only QPs of their own process: the whole exchange runs,
 * with both sides in one process.
 *
 * This process's side lives in the perf_env's initiator slots (qa, da, abuf,
 * amr); qb, db, bbuf, bmr stay empty. The client's jobs have tqp = NULL;
 * the server's are PERF_ROLE_TARGET jobs (perf_body.h) run by the same
 * executor, for the tests where the target has work.
 *
 * Executors: each side runs its own (--executor), and the client's launch
 * applies to both: a cuda server takes the client's scope, CTAs and QP
 * grouping (warp and block scope: the server's write_lat replies are posted
 * by the warp or the CTA too); a host server's threads post alone on QPs
 * grouped as the client's. --mem gpu (the cuda executor) puts this side's
 * payload in GPU memory (the executor's gpu_alloc: cudaMalloc, registered
 * with the NIC, which reaches it as kinet_mr_path says), exported to the
 * peer instead of abuf; abuf stays the host copy: filled with the size's
 * contents and copied into GPU memory before READY, copied back from it
 * after DONE for the data check (gpu_copy, a CUDA copy).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <kinet/boot.h>
#include <kinet/net.h>
#include "perf.h"

#define RMT_PROTO 3u /* 3: the cuda launch (scope, CTAs, QP grouping) in HELLO */
#define RMT_PORT 18515
#define RMT_TIMEOUT_MS 300000
#define RMT_ALIGN 4096u
#define RMT_MAX_SIZE (1ull << 30)
#define RMT_MAX_THREADS 256u
#define RMT_MAX_SQ 32768u
#define RMT_RETRY_MS 1000 /* a client's attempts to reach its server: at most 1 s apart */
#define RMT_RETRY_FIRST_MS 100 /* the first ones sooner (100, 200, 400, 800 ms) */

/* ---- records ------------------------------------------------------------------ */

#define HELLO_LEN 256
#define H_MAGIC 0    /* 8 bytes */
#define H_PROTO 8    /* u32 */
#define H_ROLE 12    /* u32: 0 server, 1 client */
#define H_TEST 16    /* char[16] */
#define H_GIVEN 32   /* u32: PERF_GIVEN_* */
#define H_THREADS 36 /* u32 */
#define H_QDEPTH 40  /* u32 */
#define H_FLAGS 44   /* u32: HF_* */
#define H_FIRST 48   /* u64: first message size */
#define H_LAST 56    /* u64: last message size */
#define H_ITERS 64   /* u64 */
#define H_WARMUP 72  /* u64 */
#define H_HOST 80    /* char[64]: host name, for the header */
#define H_NQP 144    /* u32: QPs (-q; 0: one per thread, or 1 with --shared) */
#define H_INLINE 148 /* u32: -I */
#define H_DURATION 152 /* u32: -D seconds (0: -n iterations) */
#define H_BACKEND 156  /* u32: the backend this side opened (enum kinet_backend) */
#define H_SCOPE 160    /* u32: enum perf_scope (thread on the host executor) */
#define H_CTAS 164     /* u32: CTAs of the cuda launch (0: the host executor) */
#define H_CTA_THREADS 168 /* u32: threads per CTA (0: the host executor) */
#define H_GROUP 172    /* u32: jobs per QP */
#define H_SHARE 176    /* u32: enum kn_share of the QPs */
#define HF_SHARED 1u
#define HF_SWEEP 2u
#define HF_CORRUPT 4u

#define DESC_HDR 256
#define D_STATUS 0   /* u32: 0 ready, 1 setup failed */
#define D_NQP 4      /* u32 */
#define D_SLICE 8    /* u64 */
#define D_BUFLEN 16  /* u64 */
#define D_MRLEN 24   /* u32 */
#define D_MR 32      /* KINET_MR_DESC_SIZE bytes */
#define D_MSG 80     /* char[176] */
#define D_QP_SLOT (4 + KINET_QP_DESC_MAX) /* u32 length, descriptor */

#define STEP_LEN 8192
#define S_KIND 0     /* u32: STEP_* */
#define S_STATUS 4   /* u32: 0 fine, 1 failed */
#define S_SIZE 8     /* u64 */
#define S_SEED 16    /* u64 */
#define S_FLAGS 24   /* u32: 1 = --corrupt */
#define S_MSG 32     /* char[480]: the failure, "server: ..." / "client: ..." */
#define S_MSG_LEN 480
#define S_ROW 512    /* char[1536]: the client's report line(s), as its options ask */
#define S_ROW_LEN 1536
#define S_COUNTS 2048 /* DONE: u64 per thread, the messages each client job posted */
#define S_JSON 4096  /* char[4096]: the client's report as a JSON record */
#define S_JSON_LEN 4096
enum { STEP_READY = 1, STEP_DONE = 2, STEP_VERDICT = 3 };

static const uint8_t MAGIC[8] = {'k', 'n', 'p', 'e', 'r', 'f', 0x0d, 0x0a};

/* A NUL-terminated string field of cap bytes (truncated; never unterminated). */
static void put_str(uint8_t *p, size_t cap, const char *s)
{
	size_t n = s ? strnlen(s, cap - 1) : 0;
	memcpy(p, s ? s : "", n);
	memset(p + n, 0, cap - n);
}

static void get_str(char *out, size_t outcap, const uint8_t *p, size_t cap)
{
	size_t n = strnlen((const char *)p, cap);
	if (n >= outcap)
		n = outcap - 1;
	memcpy(out, p, n);
	out[n] = 0;
	for (size_t i = 0; i < n; i++) /* only printable text from the peer */
		if ((unsigned char)out[i] < 0x20 && out[i] != '\n')
			out[i] = '?';
}

/* ---- one side ------------------------------------------------------------------ */

struct rmt {
	struct perf_opts o;      /* the agreed options (the client's run options) */
	const struct perf_executor *x;
	struct perf_env e;
	kinet_boot *boot;
	bool server;
	bool quiet;              /* --pair server: its client reports for both */
	bool corrupt;            /* either side asked for --corrupt */
	int pipe_fd;             /* --pair server: where to write its address */
	const char *test;
	char addr[300];          /* rank 0's "host:port" */
	char peer_host[64];
	char procs[512];         /* the header's "Processes" line */
	uint64_t first, last;    /* message sizes */
	struct kinet_mr_info peer_mr;
	kinet_mr *mr;            /* this side's region: e.amr, or the GPU memory's */
	uint64_t base;           /* its address: e.abuf, or the GPU memory (--mem gpu) */
	uint8_t *expect;         /* regenerated contents for the check */
	char msg[S_MSG_LEN];     /* this side's failure, "server: ..." */
	bool failed;
	char peer_msg[S_MSG_LEN];
	bool peer_failed;
	int peer_backend;        /* the backend the peer opened (HELLO) */
	/* carried by the steps: the messages each client job posted (DONE;
	 * a duration run's server checks against them), the client's JSON
	 * record of a size (VERDICT) */
	uint64_t counts[RMT_MAX_THREADS], peer_counts[RMT_MAX_THREADS];
	char json[S_JSON_LEN], peer_json[S_JSON_LEN];
};

static const char *role(const struct rmt *r)
{
	return r->server ? "server" : "client";
}

static const char *peer_role(const struct rmt *r)
{
	return r->server ? "client" : "server";
}

/* Records a failure of this side (the first one counts). */
static void fail(struct rmt *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct rmt *r, const char *fmt, ...)
{
	if (r->failed)
		return;
	int n = snprintf(r->msg, sizeof(r->msg), "%s: ", role(r));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg + n, sizeof(r->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	r->failed = true;
}

/* Prints what went wrong on either side after an exchange (a --pair server
 * stays silent: its client prints the same). 0 when nothing did. */
static int report_failures(const struct rmt *r)
{
	if (!r->failed && !r->peer_failed)
		return 0;
	if (!r->quiet) {
		if (r->failed)
			fprintf(stderr, "kinet-perf: %s: %s\n", r->test, r->msg);
		if (r->peer_failed)
			fprintf(stderr, "kinet-perf: %s: %s\n", r->test, r->peer_msg);
	}
	return 1;
}

/* An error that the peer will not hear of (the exchange itself failed). */
static int local_error(const struct rmt *r, const char *what, int rc)
{
	if (r->failed)
		fprintf(stderr, "kinet-perf: %s: %s\n", r->test, r->msg);
	fprintf(stderr, "kinet-perf: %s: %s: %s: %s\n", r->test, role(r), what, kinet_strerror(rc));
	return 1;
}

/* Allgather of two len-byte records; the peer's lands in peer. */
static int xchg(struct rmt *r, const uint8_t *mine, uint8_t *peer, size_t len)
{
	uint8_t *all = malloc(2 * len);
	if (!all)
		return -ENOMEM;
	int rc = kinet_boot_allgather(r->boot, mine, all, len);
	if (!rc)
		memcpy(peer, all + (r->server ? len : 0), len);
	free(all);
	return rc;
}

/* One STEP record each way: kind, this side's status and message, the size
 * and seed of the run, a report line (client). 0, or a local error's exit
 * status (1) after printing it. */
static int step(struct rmt *r, uint32_t kind, uint64_t size, uint64_t seed, const char *row,
		uint64_t *peer_size, uint64_t *peer_seed, char *peer_row, size_t rowcap)
{
	uint8_t mine[STEP_LEN], peer[STEP_LEN];
	static const char *names[] = {"", "ready", "done", "verdict"};
	memset(mine, 0, sizeof(mine));
	kn_store_le32(mine + S_KIND, kind);
	kn_store_le32(mine + S_STATUS, r->failed ? 1u : 0u);
	kn_store_le64(mine + S_SIZE, size);
	kn_store_le64(mine + S_SEED, seed);
	kn_store_le32(mine + S_FLAGS, r->corrupt ? 1u : 0u);
	put_str(mine + S_MSG, S_MSG_LEN, r->failed ? r->msg : "");
	put_str(mine + S_ROW, S_ROW_LEN, row);
	for (int i = 0; i < r->o.threads && i < (int)RMT_MAX_THREADS; i++)
		kn_store_le64(mine + S_COUNTS + 8 * i, r->counts[i]);
	put_str(mine + S_JSON, S_JSON_LEN, r->json);
	int rc = xchg(r, mine, peer, sizeof(peer));
	if (rc) {
		char what[96];
		snprintf(what, sizeof(what), "exchange \"%s\" with the %s", names[kind], peer_role(r));
		return local_error(r, what, rc);
	}
	if (kn_load_le32(peer + S_KIND) != kind) {
		fprintf(stderr, "kinet-perf: %s: %s: the %s is out of step (protocol error)\n",
			r->test, role(r), peer_role(r));
		return 1;
	}
	r->peer_failed = kn_load_le32(peer + S_STATUS) != 0;
	if (r->peer_failed)
		get_str(r->peer_msg, sizeof(r->peer_msg), peer + S_MSG, S_MSG_LEN);
	if (kn_load_le32(peer + S_FLAGS) & 1u)
		r->corrupt = true;
	if (peer_size)
		*peer_size = kn_load_le64(peer + S_SIZE);
	if (peer_seed)
		*peer_seed = kn_load_le64(peer + S_SEED);
	if (peer_row)
		get_str(peer_row, rowcap, peer + S_ROW, S_ROW_LEN);
	for (int i = 0; i < r->o.threads && i < (int)RMT_MAX_THREADS; i++)
		r->peer_counts[i] = kn_load_le64(peer + S_COUNTS + 8 * i);
	get_str(r->peer_json, sizeof(r->peer_json), peer + S_JSON, S_JSON_LEN);
	return 0;
}

/* ---- HELLO: agreeing on the run -------------------------------------------------- */

static void sizes_of(const struct perf_opts *o, uint64_t *first, uint64_t *last)
{
	*first = *last = o->size;
	if (o->sweep) {
		for (*first = 1; *first < o->min_size; *first <<= 1)
			;
		for (*last = *first; *last * 2 <= o->max_size; *last <<= 1)
			;
	}
}

static void hello_fill(const struct rmt *r, const struct perf_opts *o, uint8_t *h)
{
	uint64_t first, last;
	sizes_of(o, &first, &last);
	memset(h, 0, HELLO_LEN);
	memcpy(h + H_MAGIC, MAGIC, sizeof(MAGIC));
	kn_store_le32(h + H_PROTO, RMT_PROTO);
	kn_store_le32(h + H_ROLE, r->server ? 0u : 1u);
	put_str(h + H_TEST, 16, o->test->name);
	kn_store_le32(h + H_GIVEN, o->given);
	kn_store_le32(h + H_THREADS, (uint32_t)o->threads);
	kn_store_le32(h + H_QDEPTH, o->qdepth);
	kn_store_le32(h + H_FLAGS, (o->shared ? HF_SHARED : 0u) | (o->sweep ? HF_SWEEP : 0u) |
				   (o->corrupt ? HF_CORRUPT : 0u));
	kn_store_le64(h + H_FIRST, first);
	kn_store_le64(h + H_LAST, last);
	kn_store_le64(h + H_ITERS, o->iters);
	kn_store_le64(h + H_WARMUP, o->warmup);
	kn_store_le32(h + H_NQP, (uint32_t)o->nqp);
	kn_store_le32(h + H_INLINE, o->inline_size);
	kn_store_le32(h + H_DURATION, o->duration_s);
	kn_store_le32(h + H_BACKEND, (uint32_t)r->e.backend);
	kn_store_le32(h + H_SCOPE, (uint32_t)o->scope);
	kn_store_le32(h + H_CTAS, (uint32_t)o->ctas);
	kn_store_le32(h + H_CTA_THREADS, (uint32_t)o->cta_threads);
	kn_store_le32(h + H_GROUP, (uint32_t)(o->qp_group > 0 ? o->qp_group : 1));
	kn_store_le32(h + H_SHARE, (uint32_t)o->qp_share);
	char host[64] = "?";
	if (gethostname(host, sizeof(host)))
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = 0;
	put_str(h + H_HOST, 64, host);
}

/* Decides from both records (alike on both sides): 0 and the agreed options
 * in r->o, or 1 after recording why not. */
static int hello_agree(struct rmt *r, const uint8_t *srv, const uint8_t *cli)
{
	const uint8_t *peer = r->server ? cli : srv;
	if (memcmp(peer + H_MAGIC, MAGIC, sizeof(MAGIC))) {
		fail(r, "the %s is not kinet-perf", peer_role(r));
		return 1;
	}
	if (kn_load_le32(srv + H_PROTO) != kn_load_le32(cli + H_PROTO)) {
		fail(r, "the server speaks kinet-perf protocol %" PRIu32 ", the client %" PRIu32
			": use the same kinet-perf on both sides",
		     kn_load_le32(srv + H_PROTO), kn_load_le32(cli + H_PROTO));
		return 1;
	}
	if (kn_load_le32(srv + H_ROLE) != 0 || kn_load_le32(cli + H_ROLE) != 1) {
		fail(r, "both processes claim the same role");
		return 1;
	}
	char st[16], ct[16];
	get_str(st, sizeof(st), srv + H_TEST, 16);
	get_str(ct, sizeof(ct), cli + H_TEST, 16);
	if (strcmp(st, ct)) {
		fail(r, "the server runs %s, the client %s: give both the same test", st, ct);
		return 1;
	}
	uint32_t given = kn_load_le32(srv + H_GIVEN);
	uint32_t sf = kn_load_le32(srv + H_FLAGS), cf = kn_load_le32(cli + H_FLAGS);
	bool sizes_differ = kn_load_le64(srv + H_FIRST) != kn_load_le64(cli + H_FIRST) ||
			    kn_load_le64(srv + H_LAST) != kn_load_le64(cli + H_LAST) ||
			    (sf & HF_SWEEP) != (cf & HF_SWEEP);
	struct {
		uint32_t bit;
		const char *opt;
		uint64_t s, c;
	} chk[] = {
		{PERF_GIVEN_SIZES, "message sizes (-s, -a, --min-size, --max-size)", 0,
		 sizes_differ},
		{PERF_GIVEN_ITERS, "iterations (-n)", kn_load_le64(srv + H_ITERS), kn_load_le64(cli + H_ITERS)},
		{PERF_GIVEN_WARMUP, "warm-up (--warmup)", kn_load_le64(srv + H_WARMUP), kn_load_le64(cli + H_WARMUP)},
		{PERF_GIVEN_THREADS, "threads (--threads, --ctas)", kn_load_le32(srv + H_THREADS),
		 kn_load_le32(cli + H_THREADS)},
		{PERF_GIVEN_QDEPTH, "tx depths (-t)", kn_load_le32(srv + H_QDEPTH),
		 kn_load_le32(cli + H_QDEPTH)},
		{PERF_GIVEN_SHARED, "--shared", sf & HF_SHARED, cf & HF_SHARED},
		{PERF_GIVEN_QPS, "numbers of QPs (-q)", kn_load_le32(srv + H_NQP), kn_load_le32(cli + H_NQP)},
		{PERF_GIVEN_INLINE, "inline sizes (-I)", kn_load_le32(srv + H_INLINE), kn_load_le32(cli + H_INLINE)},
		{PERF_GIVEN_DURATION, "durations (-D)", kn_load_le32(srv + H_DURATION),
		 kn_load_le32(cli + H_DURATION)},
		{PERF_GIVEN_SCOPE, "scopes (--scope)", kn_load_le32(srv + H_SCOPE),
		 kn_load_le32(cli + H_SCOPE)},
		/* a host client has no launch shape: the server keeps its own */
		{PERF_GIVEN_CTA_THREADS, "threads per CTA (--cta-threads)",
		 kn_load_le32(srv + H_CTA_THREADS),
		 kn_load_le32(cli + H_CTA_THREADS) ? kn_load_le32(cli + H_CTA_THREADS)
						   : kn_load_le32(srv + H_CTA_THREADS)},
	};
	for (size_t i = 0; i < sizeof(chk) / sizeof(chk[0]); i++) {
		if ((given & chk[i].bit) && chk[i].s != chk[i].c) {
			fail(r, "the server and the client were given different %s: give the "
				"same run options to both, or none to the server (it takes the "
				"client's)",
			     chk[i].opt);
			return 1;
		}
	}
	/* the client's run options, checked as its command line was */
	uint64_t first = kn_load_le64(cli + H_FIRST), last = kn_load_le64(cli + H_LAST);
	uint64_t iters = kn_load_le64(cli + H_ITERS), warmup = kn_load_le64(cli + H_WARMUP);
	uint32_t threads = kn_load_le32(cli + H_THREADS), qdepth = kn_load_le32(cli + H_QDEPTH);
	uint32_t nqp = kn_load_le32(cli + H_NQP), inl = kn_load_le32(cli + H_INLINE);
	uint32_t duration = kn_load_le32(cli + H_DURATION);
	uint32_t scope = kn_load_le32(cli + H_SCOPE), ctas = kn_load_le32(cli + H_CTAS);
	uint32_t tpc = kn_load_le32(cli + H_CTA_THREADS), group = kn_load_le32(cli + H_GROUP);
	uint32_t share = kn_load_le32(cli + H_SHARE);
	bool sweep = cf & HF_SWEEP, shared = cf & HF_SHARED;
	/* the launch: none (a host client), or whole CTAs, and at warp or
	 * block scope whole warps, one QP per posting group, as kinet-perf.c
	 * allows them */
	bool launch_ok = (!ctas && !tpc && scope == PERF_SCOPE_THREAD) ||
			 (ctas && tpc && tpc <= 1024 && (uint64_t)ctas * tpc >= threads &&
			  (scope == PERF_SCOPE_THREAD ||
			   ((uint64_t)ctas * tpc == threads && !nqp && !duration && !inl &&
			    !(r->o.test->flags & PERF_F_RECV) &&
			    (scope == PERF_SCOPE_BLOCK ||
			     (scope == PERF_SCOPE_WARP && tpc % 32 == 0)))));
	if (!group || share > KN_SHARE_GPU ||
	    (group > 1 && share == KN_SHARE_EXCLUSIVE && scope == PERF_SCOPE_THREAD) ||
	    (nqp && group != threads / nqp) || (shared && group != threads))
		launch_ok = false;
	if (!first || first > last || last > RMT_MAX_SIZE || !threads ||
	    threads > RMT_MAX_THREADS || !qdepth || qdepth > RMT_MAX_SQ || !iters ||
	    iters > 1000000000ull || warmup > 1000000000ull ||
	    (!duration && (uint64_t)threads * iters > (1ull << 26)) || nqp > threads ||
	    (nqp && threads % nqp) || (shared && nqp) || inl > KN_MAX_INLINE_WRITE ||
	    duration > 86400 || (duration && sweep) ||
	    (uint64_t)group * qdepth > RMT_MAX_SQ ||
	    ((r->o.test->flags & PERF_F_FIXED8) && (first != 8 || last != 8)) ||
	    (first != last && !sweep) || !launch_ok) {
		fail(r, "the client's run options are out of range (protocol error)");
		return 1;
	}
	r->peer_backend = (int)kn_load_le32(peer + H_BACKEND);
	int sb = (int)kn_load_le32(srv + H_BACKEND), cb = (int)kn_load_le32(cli + H_BACKEND);
	if (sb != cb) {
		fail(r, "the server opened the %s backend, the client %s: their QPs cannot "
			"connect (give both the same --backend)",
		     kinet_backend_name(sb), kinet_backend_name(cb));
		return 1;
	}
	r->o.size = first;
	r->o.sweep = sweep;
	r->o.min_size = first;
	r->o.max_size = last;
	r->o.iters = iters;
	r->o.warmup = warmup;
	r->o.threads = (int)threads;
	r->o.qdepth = qdepth;
	r->o.shared = shared;
	r->o.nqp = (int)nqp;
	r->o.inline_size = inl;
	r->o.duration_s = duration;
	/* the QPs: the client's grouping on both sides (their numbers must
	 * agree). A cuda server runs the client's launch (its scope and CTAs);
	 * a host server's threads post alone, sharing a group's QP */
	r->o.qp_group = (int)group;
	if (strcmp(r->x->name, "host")) {
		r->o.scope = (int)scope;
		if (tpc) {
			r->o.ctas = (int)ctas;
			r->o.cta_threads = (int)tpc;
		} else { /* a host client: thread scope in the server's own CTAs */
			int t = r->o.cta_threads > 0 ? r->o.cta_threads : 1;
			r->o.cta_threads = t;
			r->o.ctas = ((int)threads + t - 1) / t;
		}
		r->o.qp_share = (int)share;
	} else {
		r->o.qp_share = group > 1 ? KN_SHARE_GPU : KN_SHARE_EXCLUSIVE;
	}
	r->first = first;
	r->last = last;
	r->corrupt = ((sf | cf) & HF_CORRUPT) != 0;
	get_str(r->peer_host, sizeof(r->peer_host), peer + H_HOST, 64);
	snprintf(r->e.peer_host, sizeof(r->e.peer_host), "%s", r->peer_host);
	return 0;
}

/* ---- this side's QPs and buffer ------------------------------------------------- */

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* QPs and the registered buffer (the context is open already), laid out as
 * setup.c lays out one side of a local pair (so both sides agree on every
 * offset). */
static int side_open(struct rmt *r, const char **what)
{
	struct perf_env *e = &r->e;
	const struct perf_opts *o = &r->o;
	const struct perf_test *pt = o->test;
	int rc;
	e->o = o;
	e->seed = 0x6b696e6574ull;
	e->procs_line = r->procs;
	int group = o->qp_group > 0 ? o->qp_group : 1;
	e->nqp = (o->threads + group - 1) / group;
	uint64_t want = (uint64_t)o->qdepth * (uint64_t)group;
	struct kinet_qp_attr qa = {
		.sq_depth = (uint32_t)(want < 16 ? 16 : want),
		/* the receives of send_bw are the server's, send_lat's both sides' */
		.rq_depth = ((pt->flags & PERF_F_RECV) && (r->server || pt->id == PERF_SEND_LAT))
				    ? (o->qdepth < 16 ? 16 : o->qdepth)
				    : 0,
		.db_mode = o->db_mode,
		.share = o->qp_share,
	};
	*what = "memory";
	e->qa = calloc((size_t)e->nqp, sizeof(*e->qa));
	e->qb = calloc((size_t)e->nqp, sizeof(*e->qb)); /* stay NULL */
	e->da = calloc((size_t)e->nqp, sizeof(*e->da));
	e->db = calloc((size_t)e->nqp, sizeof(*e->db));
	if (!e->qa || !e->qb || !e->da || !e->db)
		return -ENOMEM;
	for (int i = 0; i < e->nqp; i++) {
		*what = "kinet_qp_create";
		if ((rc = kinet_qp_create(e->pd, &qa, &e->qa[i])))
			return rc;
		*what = "kinet_qp_device";
		if ((rc = kinet_qp_device(e->qa[i], &e->da[i])))
			return rc;
	}
	size_t m = round_up((size_t)r->last, 64);
	e->off_buf1 = m;
	e->off_small = (pt->flags & PERF_F_PINGPONG) ? 2 * m : m;
	e->slice = round_up(e->off_small + (size_t)o->qdepth * 8 + 64, RMT_ALIGN);
	e->buf_len = e->slice * (size_t)o->threads;
	*what = "memory for the buffer";
	if (posix_memalign((void **)&e->abuf, RMT_ALIGN, e->buf_len))
		return -ENOMEM;
	memset(e->abuf, 0, e->buf_len);
	r->expect = malloc((size_t)r->last);
	e->cap_iters = o->duration_s ? 0 : o->iters;
	size_t n = (size_t)o->threads * (size_t)e->cap_iters + 1;
	e->tpost = calloc(n, sizeof(uint64_t));
	e->tcomp = calloc(n, sizeof(uint64_t));
	e->ring = calloc((size_t)o->threads * o->qdepth, sizeof(uint64_t));
	e->jobs = calloc((size_t)o->threads, sizeof(*e->jobs));
	if (posix_memalign((void **)&e->barrier, 64, 64))
		e->barrier = NULL;
	if (!r->expect || !e->tpost || !e->tcomp || !e->ring || !e->jobs || !e->barrier)
		return -ENOMEM;
	if (o->mem == PERF_MEM_GPU) { /* the payload in GPU memory, abuf its host copy */
		*what = "GPU memory for the buffer (--mem gpu)";
		if (!r->x->gpu_alloc || !r->x->gpu_copy)
			return -ENOTSUP;
		return r->x->gpu_alloc(e, &r->base, &r->mr);
	}
	*what = "kinet_mr_reg";
	if ((rc = kinet_mr_reg(e->pd, e->abuf, e->buf_len, KINET_ACCESS_ALL, &e->amr)))
		return rc;
	r->mr = e->amr;
	r->base = (uint64_t)(uintptr_t)e->abuf;
	return 0;
}

/* What may explain a failed connection: the emulated rdma-core reaches
 * only QPs of its own process. */
static const char *connect_hint(const struct rmt *r)
{
	if (r->e.backend == KINET_BACKEND_MLX5 && !r->o.pair_threads &&
	    kinet_tunable_int("KINET_MLX5_EMULATE") == 1)
		return " (the emulated rdma-core of KINET_MLX5_EMULATE=1 reaches only QPs of "
		       "its own process: run both sides in one with --pair=threads)";
	return "";
}

/* DESC: descriptors both ways, then every QP connects to its peer's. */
static int desc_exchange(struct rmt *r, int setup_rc, const char *what)
{
	struct perf_env *e = &r->e;
	int nqp = e->nqp;
	size_t len = DESC_HDR + (size_t)nqp * D_QP_SLOT;
	uint8_t *mine = calloc(1, len), *peer = calloc(1, len);
	int rc = -ENOMEM, status = 1;
	if (!mine || !peer)
		goto out;
	kn_store_le32(mine + D_NQP, (uint32_t)nqp);
	kn_store_le64(mine + D_SLICE, e->slice);
	kn_store_le64(mine + D_BUFLEN, e->buf_len);
	for (int i = 0; !setup_rc && i < nqp; i++) {
		int n = kinet_qp_export(e->qa[i], mine + DESC_HDR + (size_t)i * D_QP_SLOT + 4,
					KINET_QP_DESC_MAX);
		struct kinet_qp_info qi;
		if (n < 0) {
			setup_rc = n;
			what = "kinet_qp_export";
		} else {
			kn_store_le32(mine + DESC_HDR + (size_t)i * D_QP_SLOT, (uint32_t)n);
			/* the transport, for the header and the JSON records */
			if (i == 0 && !kinet_qp_desc_parse(mine + DESC_HDR + 4, (size_t)n, &qi))
				snprintf(e->provider, sizeof(e->provider), "%s", qi.provider);
		}
	}
	if (!setup_rc) {
		int n = kinet_mr_export(r->mr, mine + D_MR, KINET_MR_DESC_SIZE);
		if (n < 0) {
			setup_rc = n;
			what = "kinet_mr_export";
		} else {
			kn_store_le32(mine + D_MRLEN, (uint32_t)n);
		}
	}
	if (setup_rc) {
		fail(r, "%s: %s%s", what, kinet_strerror(setup_rc),
		     setup_rc == -ENOSYS || setup_rc == -ENODEV
			     ? " (this build or machine has no libfabric wire or its provider)"
			     : "");
		kn_store_le32(mine + D_STATUS, 1);
		put_str(mine + D_MSG, 176, r->msg);
	}
	rc = xchg(r, mine, peer, len);
	if (rc) {
		status = local_error(r, "exchange \"descriptors\"", rc);
		goto out;
	}
	if (kn_load_le32(peer + D_STATUS)) {
		r->peer_failed = true;
		get_str(r->peer_msg, sizeof(r->peer_msg), peer + D_MSG, 176);
	}
	if (r->failed || r->peer_failed) {
		status = report_failures(r);
		goto out;
	}
	if (kn_load_le32(peer + D_NQP) != (uint32_t)nqp || kn_load_le64(peer + D_SLICE) != e->slice ||
	    kn_load_le64(peer + D_BUFLEN) != e->buf_len) {
		fail(r, "the %s laid out its buffer differently (protocol error)", peer_role(r));
	} else if ((rc = kinet_mr_desc_parse(peer + D_MR, kn_load_le32(peer + D_MRLEN), &r->peer_mr))) {
		fail(r, "the %s's memory descriptor: %s", peer_role(r), kinet_strerror(rc));
	} else if (r->peer_mr.len < e->buf_len) {
		fail(r, "the %s's region is too small (protocol error)", peer_role(r));
	} else {
		for (int i = 0; i < nqp && !r->failed; i++) {
			const uint8_t *d = peer + DESC_HDR + (size_t)i * D_QP_SLOT;
			uint32_t n = kn_load_le32(d);
			if (n > KINET_QP_DESC_MAX)
				fail(r, "the %s's QP descriptor %d is too long", peer_role(r), i);
			else if ((rc = kinet_qp_connect_remote(e->qa[i], d + 4, n)))
				fail(r, "kinet_qp_connect_remote (QP %d): %s%s", i,
				     kinet_strerror(rc), connect_hint(r));
		}
		/* the provider the connects took: a peer of this host goes over
		 * shm while KINET_FI_PROVIDER is not set (KINET_FI_SAME_HOST) */
		struct kinet_wire_info wi;
		if (!r->failed && kinet_wire_info(e->ctx, &wi, sizeof(wi)) == 0 &&
		    wi.qps_same_host > 0 && wi.same_host[0])
			snprintf(e->provider, sizeof(e->provider), "%s", wi.same_host);
		/* the kinds of memory at both ends, for the JSON records */
		int mine_k = kinet_mr_kind(r->mr);
		int path = kinet_mr_path(r->mr);
		snprintf(e->mem_line, sizeof(e->mem_line), "%s (registered: %s); the %s's: %s",
			 mine_k == KINET_MEM_CUDA ? "GPU memory" : "host memory",
			 kinet_mr_path_str(path), peer_role(r),
			 r->peer_mr.kind == KINET_MEM_CUDA ? "GPU memory" : "host memory");
		int theirs = (int)r->peer_mr.kind;
		e->mem_initiator = r->server ? theirs : mine_k;
		e->mem_target = r->server ? mine_k : theirs;
	}
	status = 0; /* a failure here travels in the first READY */
out:
	free(mine);
	free(peer);
	return status;
}

/* ---- one message size -------------------------------------------------------------- */

/* The contents of the data check: client buffer (A), server buffer (B),
 * their second buffers (write_lat, send_lat) and the atomic word, per
 * thread. */
static uint64_t seed_a(uint64_t s, int i) { return s * 131 + (uint64_t)i * 2; }
static uint64_t seed_b(uint64_t s, int i) { return s * 131 + (uint64_t)i * 2 + 1; }
static uint64_t seed_a1(uint64_t s, int i) { return s * 11 + (uint64_t)i; }
static uint64_t seed_b1(uint64_t s, int i) { return s * 7 + (uint64_t)i; }
static uint64_t seed_w(uint64_t s, int i) { return s * 13 + (uint64_t)i; }

/* Messages the client's job i posted in all: warmup + iters, or what its
 * DONE record said (a duration run). */
static uint64_t total_of(const struct rmt *r, int i)
{
	if (!r->o.duration_s)
		return r->o.warmup + r->o.iters;
	return r->server ? r->peer_counts[i] : r->counts[i];
}

/* write_lat, send_lat: the stamp in the last byte of the last of n messages */
static uint8_t last_stamp(uint64_t n)
{
	return (uint8_t)((n - 1) % 255u + 1u);
}

static void prepare(struct rmt *r, uint64_t size)
{
	struct perf_env *e = &r->e;
	const struct perf_opts *o = &r->o;
	const struct perf_test *pt = o->test;
	uint64_t s = e->seed;
	e->cur_size = size;
	*e->barrier = 0;
	for (int i = 0; i < o->threads; i++) {
		uint8_t *a = e->abuf + (size_t)i * e->slice; /* the contents, on the host */
		uint64_t la = r->base + (uint64_t)i * e->slice; /* where the NIC finds them */
		uint64_t ra = r->peer_mr.addr + (uint64_t)i * e->slice; /* the peer's slice */
		uint32_t lkey = kinet_mr_lkey(r->mr);
		struct perf_job *j = &e->jobs[i];
		const kn_qp *qp = e->da[perf_qp_of(o, i)];
		bool stop = o->duration_s && (pt->id == PERF_WRITE_LAT || pt->id == PERF_SEND_LAT ||
					      pt->id == PERF_SEND_BW);
		uint64_t init;
		perf_fill_random((uint8_t *)&init, 8, seed_w(s, i));
		perf_fill_random(a, (size_t)size, r->server ? seed_b(s, i) : seed_a(s, i));
		if (pt->flags & PERF_F_PINGPONG) {
			perf_fill_random(a + e->off_buf1, (size_t)size,
					 r->server ? seed_b1(s, i) : seed_a1(s, i));
			a[e->off_buf1 + size - 1] = 0; /* the polled byte: no stamp is 0 */
		}
		if (r->server && !stop)
			memcpy(a + e->off_small, &init, 8);
		else /* the client's results; a duration run's stop word at the server */
			memset(a + e->off_small, 0, (size_t)o->qdepth * 8);

		memset(j, 0, sizeof(*j));
		j->test = pt->id;
		j->tid = i;
		j->nthreads = o->threads;
		j->size = (uint32_t)size;
		j->window = pt->kind == PERF_LAT ? 1 : o->qdepth;
		j->iters = o->iters;
		j->warmup = o->warmup;
		j->cap = e->cap_iters;
		j->duration_ns = (uint64_t)o->duration_s * 1000000000ull;
		j->inline_max = o->inline_size;
		j->barrier = e->barrier;
		j->tpost = e->tpost + (size_t)i * e->cap_iters;
		j->tcomp = e->tcomp + (size_t)i * e->cap_iters;
		j->ring = e->ring + (size_t)i * o->qdepth;
		j->atomic_init = init;
		j->yield = o->yield;
		j->timeout_ns = qp->timeout_ns;
		if (r->server) { /* the target's part: replies (write_lat, send_lat),
				  * receives (send_bw, send_lat) */
			j->role = PERF_ROLE_TARGET;
			j->tqp = qp;
			j->t_lkey = lkey;
			j->t_rkey = r->peer_mr.rkey;
			j->t_laddr = la;
			j->t_land = la + e->off_buf1;
			j->t_raddr = ra + e->off_buf1;
			if (stop)
				j->t_stop = la + e->off_small;
			continue;
		}
		j->role = PERF_ROLE_INITIATOR;
		j->qp = qp;
		j->tqp = NULL; /* the server plays the target */
		j->laddr = la;
		j->lkey = lkey;
		j->res = la + e->off_small;
		j->res_lkey = j->lkey;
		j->raddr = ra;
		j->rkey = r->peer_mr.rkey;
		if (pt->id == PERF_ATOMIC_BW || pt->id == PERF_ATOMIC_LAT)
			j->raddr = ra + e->off_small;
		if (pt->flags & PERF_F_PINGPONG) {
			j->raddr = ra + e->off_buf1;
			j->land = la + e->off_buf1;
		}
		if (stop) {
			j->stop_laddr = la + e->off_small;
			j->stop_lkey = j->lkey;
			j->stop_raddr = ra + e->off_small;
			j->stop_rkey = r->peer_mr.rkey;
		}
	}
}

/* Does this side run jobs? The client always; the server for the tests
 * whose target posts (write_lat, send_lat) or receives (send_bw, send_lat). */
static bool has_jobs(const struct rmt *r)
{
	int id = r->o.test->id;
	return !r->server || id == PERF_WRITE_LAT || id == PERF_SEND_LAT || id == PERF_SEND_BW;
}

static const char *step_str(int step)
{
	switch (step) {
	case PERF_STEP_BARRIER: return "waiting for the other threads";
	case PERF_STEP_POST: return "posting a WQE";
	case PERF_STEP_CQE: return "completion";
	case PERF_STEP_RECV: return "receive";
	case PERF_STEP_ARRIVAL: return "waiting for the data to land";
	default: return "run";
	}
}

static void run_jobs(struct rmt *r, uint64_t size)
{
	struct perf_env *e = &r->e;
	if (!has_jobs(r))
		return;
	int rc = r->x->run(e);
	if (rc) {
		fail(r, "executor %s: %s", r->x->name, kinet_strerror(rc));
		return;
	}
	for (int i = 0; i < r->o.threads; i++) {
		const struct perf_job *j = &e->jobs[i];
		if (!j->rc)
			continue;
		char syn[128] = "";
		if (j->rc == -EIO)
			snprintf(syn, sizeof(syn), ": %s (syndrome 0x%02x, vendor syndrome 0x%02x)",
				 kinet_syndrome_str(j->syndrome), j->syndrome, j->vendor);
		fail(r, "%" PRIu64 " bytes: thread %d: %s: %s%s", size, i, step_str(j->step),
		     kinet_strerror(j->rc), syn);
		return;
	}
}

/* --corrupt: flips one byte of what this side checks (thread 0). */
static void corrupt(struct rmt *r, uint64_t size)
{
	uint8_t *a = r->e.abuf;
	switch (r->o.test->id) {
	case PERF_READ_BW:
	case PERF_READ_LAT:
		if (!r->server)
			a[size / 2] ^= 0x5a;
		break;
	case PERF_WRITE_LAT:
	case PERF_SEND_LAT:
		if (r->server)
			a[r->e.off_buf1 + size / 2] ^= 0x5a;
		break;
	case PERF_ATOMIC_BW:
	case PERF_ATOMIC_LAT:
		if (r->server)
			a[r->e.off_small] ^= 1;
		break;
	default:
		if (r->server)
			a[size / 2] ^= 0x5a;
		break;
	}
}

/* got against the contents the peer generated from seed (last byte
 * replaced by stamp when stamp != 0). */
static void check_bytes(struct rmt *r, const uint8_t *got, size_t n, uint64_t seed, uint8_t stamp,
			int tid, const char *what)
{
	perf_fill_random(r->expect, n, seed);
	if (stamp)
		r->expect[n - 1] = stamp;
	if (!memcmp(r->expect, got, n))
		return;
	size_t i = 0;
	while (i < n && r->expect[i] == got[i])
		i++;
	fail(r, "data check failed at %zu bytes: thread %d: %s differs at byte %zu of %zu "
		"(expected 0x%02x, found 0x%02x)",
	     n, tid, what, i, n, r->expect[i], got[i]);
}

/* This side's data check: what it holds, byte for byte. */
static void verify(struct rmt *r, uint64_t size)
{
	struct perf_env *e = &r->e;
	const struct perf_opts *o = &r->o;
	int id = o->test->id;
	size_t n = (size_t)size;
	for (int i = 0; i < o->threads && !r->failed; i++) {
		const uint8_t *a = e->abuf + (size_t)i * e->slice;
		const struct perf_job *j = &e->jobs[i];
		uint64_t s = e->seed;
		switch (id) {
		case PERF_WRITE_BW:
		case PERF_PUT_BW:
		case PERF_SEND_BW:
			if (r->server)
				check_bytes(r, a, n, seed_a(s, i), 0, i, "destination");
			break;
		case PERF_READ_BW:
		case PERF_READ_LAT:
			if (!r->server)
				check_bytes(r, a, n, seed_b(s, i), 0, i, "read buffer");
			break;
		case PERF_WRITE_LAT:
		case PERF_SEND_LAT: /* the last message, its stamp included */
			if (!total_of(r, i))
				break; /* no message: the landing buffer holds its own contents */
			check_bytes(r, a + e->off_buf1, n, r->server ? seed_a(s, i) : seed_b(s, i),
				    last_stamp(total_of(r, i)), i,
				    id == PERF_SEND_LAT ? (r->server ? "the server's receive buffer"
								     : "the client's receive buffer")
				    : r->server	       ? "the server's landing buffer"
						       : "the client's landing buffer");
			break;
		case PERF_ATOMIC_BW:
		case PERF_ATOMIC_LAT:
			if (r->server) {
				uint64_t got, k = total_of(r, i);
				memcpy(&got, a + e->off_small, 8);
				uint64_t want = perf_atomic_expect(j, k);
				if (got != want)
					fail(r, "data check failed at 8 bytes: thread %d: atomic word "
						"is 0x%" PRIx64 " after %" PRIu64 " fetch-adds, "
						"expected 0x%" PRIx64,
					     i, got, k, want);
			}
			break;
		default:
			break;
		}
		if (!r->failed && has_jobs(r) && j->bad)
			fail(r, "data check failed at %zu bytes: thread %d: %" PRIu64 " message(s) "
				"came back wrong, the first is number %" PRIu64 " (%s)",
			     n, i, j->bad, j->first_bad,
			     id == PERF_SEND_BW	    ? "receive length"
			     : id == PERF_SEND_LAT ? "receive length or last byte"
						   : "fetch-add result");
	}
}

/* The client's report of this size: its row in columns (row) and as a JSON
 * record (r->json); the server prints them too. */
static void report_row(struct rmt *r, uint64_t size, char *row, size_t cap)
{
	char *buf = NULL, *jbuf = NULL;
	size_t len = 0, jlen = 0;
	row[0] = 0;
	r->json[0] = 0;
	FILE *f = open_memstream(&buf, &len), *jf = open_memstream(&jbuf, &jlen);
	int rc = f && jf ? 0 : -ENOMEM;
	if (!rc && r->o.test->kind == PERF_BW) {
		struct perf_bw b;
		if (!(rc = perf_bw_stats(&r->e, size, &b))) {
			perf_row_bw(&r->e, size, &b, false, f);
			perf_row_bw(&r->e, size, &b, true, jf);
		}
	} else if (!rc) {
		struct perf_lat l;
		if (!(rc = perf_lat_stats(&r->e, &l))) {
			perf_row_lat(&r->e, size, &l, false, f);
			perf_row_lat(&r->e, size, &l, true, jf);
		}
	}
	if (f)
		fclose(f);
	if (jf)
		fclose(jf);
	if (rc) {
		fail(r, "statistics: %s", kinet_strerror(rc));
	} else {
		snprintf(row, cap, "%s", buf ? buf : "");
		snprintf(r->json, sizeof(r->json), "%s", jbuf ? jbuf : "");
	}
	free(buf);
	free(jbuf);
}

/* This side's output of a size: the client's row in columns or JSON (as
 * this side's --json asks), and the JSON record into --out_json's file. */
static void print_row(struct rmt *r, const char *row, const char *json)
{
	if (r->o.json_out && *json && !r->quiet) { /* a --pair server: its client writes */
		fputs(json, r->o.json_out);
		fflush(r->o.json_out);
	}
	if (!r->quiet)
		fputs(r->o.json ? json : row, stdout);
	fflush(stdout);
}

/* One message size, both sides in step. 0 or 1 (failed). */
static int run_size(struct rmt *r, uint64_t size)
{
	struct perf_env *e = &r->e;
	uint64_t psize = 0, pseed = 0;
	char row[S_ROW_LEN], prow[S_ROW_LEN];
	e->seed++;
	r->json[0] = 0;
	memset(r->counts, 0, sizeof(r->counts));
	int rc;
	if (!r->failed)
		prepare(r, size);
	/* --mem gpu: the contents into GPU memory before the peer may touch it */
	if (!r->failed && r->o.mem == PERF_MEM_GPU && (rc = r->x->gpu_copy(e, true)))
		fail(r, "copying the buffer into GPU memory: %s", kinet_strerror(rc));
	if (step(r, STEP_READY, size, e->seed, "", &psize, &pseed, NULL, 0))
		return 1;
	if (!r->failed && !r->peer_failed && (psize != size || pseed != e->seed))
		fail(r, "the %s is at another message size (protocol error)", peer_role(r));
	if (report_failures(r))
		return 1;
	run_jobs(r, size);
	if (!r->server) /* what the client's jobs posted, for the server's check */
		for (int i = 0; i < r->o.threads; i++)
			r->counts[i] = perf_job_total(&e->jobs[i]);
	if (step(r, STEP_DONE, 0, 0, "", NULL, NULL, NULL, 0) || report_failures(r))
		return 1;
	/* --mem gpu: the check reads what GPU memory holds, copied back */
	if (r->o.mem == PERF_MEM_GPU && (rc = r->x->gpu_copy(e, false)))
		fail(r, "copying the buffer back from GPU memory: %s", kinet_strerror(rc));
	if (r->corrupt)
		corrupt(r, size);
	verify(r, size);
	if (!r->server && !r->failed)
		report_row(r, size, row, sizeof(row));
	else
		row[0] = 0;
	if (step(r, STEP_VERDICT, 0, 0, row, NULL, NULL, prow, sizeof(prow)) ||
	    report_failures(r))
		return 1;
	if (!r->server)
		print_row(r, row, r->json);
	else
		print_row(r, prow, r->peer_json);
	return 0;
}

/* ---- a whole side ------------------------------------------------------------------- */

static void on_listening(const char *addr, void *arg)
{
	struct rmt *r = arg;
	if (r->pipe_fd >= 0) { /* --pair: tell the parent, which starts the client */
		char line[320];
		int n = snprintf(line, sizeof(line), "%s\n", addr);
		if (write(r->pipe_fd, line, (size_t)n) != n)
			fprintf(stderr, "kinet-perf: %s: server: cannot report its address\n",
				r->test);
		close(r->pipe_fd);
		r->pipe_fd = -1;
		return;
	}
	if (!r->o.json)
		printf(" Waiting for a client on %s (kinet-perf %s HOST on the other side)\n", addr,
		       r->test);
	else
		fprintf(stderr, "kinet-perf: %s: server: waiting for a client on %s\n", r->test,
			addr);
	fflush(stdout);
}

/* The bootstrap's bound on joining and on every exchange (0: its tunable),
 * at least -D + 60 s: the server waits that long for the end of a run. */
static int boot_timeout(const struct perf_opts *o)
{
	int ms = o->timeout_ms;
	if (!ms && !(kinet_tunable_get("KINET_BOOT_TIMEOUT_MS")->flags & KINET_TUNABLE_SET))
		ms = RMT_TIMEOUT_MS;
	long long floor = o->duration_s ? (long long)o->duration_s * 1000 + 60000 : 0;
	if (floor) {
		long long eff = ms ? ms : kinet_tunable_int("KINET_BOOT_TIMEOUT_MS");
		if (eff < floor)
			ms = (int)floor;
	}
	return ms;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One attempt to reach host:port over TCP, waiting at most ms: 0 (something
 * listens there), a positive errno, or -EHOSTUNREACH (no such host). */
static int probe(const char *host, const char *port, int ms)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	int gai = getaddrinfo(host, port, &hints, &res);
	if (gai == EAI_AGAIN)
		return EAGAIN;
	if (gai)
		return -EHOSTUNREACH;
	int last = ECONNREFUSED;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				ai->ai_protocol);
		if (fd < 0) {
			last = errno;
			continue;
		}
		int rc = connect(fd, ai->ai_addr, ai->ai_addrlen) ? errno : 0;
		if (rc == EINPROGRESS) {
			struct pollfd p = {fd, POLLOUT, 0};
			int k = poll(&p, 1, ms);
			socklen_t el = sizeof(rc);
			if (k <= 0)
				rc = k ? errno : ETIMEDOUT;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &el))
				rc = errno;
		}
		close(fd);
		if (!rc) {
			freeaddrinfo(res);
			return 0;
		}
		last = rc;
	}
	freeaddrinfo(res);
	return last;
}

/* The client's first step: reach the server's port. When nothing listens
 * there it says so at once, and again at each attempt (100 ms after the
 * first, the gap doubling up to 1 s), until timeout_ms. 0 (the server is
 * there: the bootstrap takes over), or 1 after a message. */
static int wait_for_server(const struct rmt *r, const char *addr, int timeout_ms)
{
	char host[256], port[8];
	const char *c = strrchr(addr, ':');
	size_t hl = c ? (size_t)(c - addr) : 0;
	if (!c || hl >= sizeof(host) || strlen(c + 1) >= sizeof(port))
		return 0; /* not host:port: the bootstrap says what is wrong */
	memcpy(host, addr, hl);
	host[hl] = 0;
	if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = 0;
	}
	snprintf(port, sizeof(port), "%s", c + 1);
	int64_t deadline = now_ms() + timeout_ms;
	int gap = RMT_RETRY_FIRST_MS;
	for (int attempt = 1;; attempt++) {
		int64_t t0 = now_ms();
		int64_t left = deadline - t0;
		int err = probe(host, port, (int)(left < RMT_RETRY_MS ? (left > 0 ? left : 1)
								      : RMT_RETRY_MS));
		if (!err)
			return 0;
		if (err < 0) {
			fprintf(stderr, "kinet-perf: %s: client: cannot resolve the server's host '%s'\n",
				r->test, host);
			return 1;
		}
		left = deadline - now_ms();
		if (left <= 0) {
			fprintf(stderr,
				"kinet-perf: %s: client: no server answered at %s within %d s (%d "
				"attempt%s; last: %s)\n",
				r->test, addr, (timeout_ms + 999) / 1000, attempt, attempt == 1 ? "" : "s",
				strerror(err));
			return 1;
		}
		fprintf(stderr,
			"kinet-perf: %s: client: no server at %s yet (%s); attempt %d, retrying "
			"for %lld s more\n",
			r->test, addr, strerror(err), attempt, (long long)(left + 999) / 1000);
		int64_t wake = t0 + gap;
		while (now_ms() < wake && now_ms() < deadline)
			poll(NULL, 0, (int)(wake - now_ms()));
		gap = gap * 2 < RMT_RETRY_MS ? gap * 2 : RMT_RETRY_MS;
	}
}

/* Runs one side to its end; the exit status. addr: rank 0's "host:port". */
static int run_side(const struct perf_opts *o, const struct perf_executor *x, bool server,
		    bool quiet, const char *addr, const char *secret, int pipe_fd)
{
	struct rmt *r = calloc(1, sizeof(*r));
	if (!r) {
		fprintf(stderr, "kinet-perf: out of memory\n");
		return 1;
	}
	r->o = *o;
	r->x = x;
	r->server = server;
	r->quiet = quiet;
	r->pipe_fd = pipe_fd;
	r->test = o->test->name;
	r->e.o = &r->o;
	snprintf(r->addr, sizeof(r->addr), "%s", addr);
	int status = 1, rc;
	const char *what = "setup";

	/* the context first: a backend that cannot open fails at once */
	if ((rc = perf_open_ctx(&r->e, &what))) {
		fprintf(stderr, "kinet-perf: %s: %s: %s: %s\n", r->test, role(r), what,
			kinet_strerror(rc));
		if (r->pipe_fd >= 0) { /* --pair: the parent learns that no server came */
			close(r->pipe_fd);
			r->pipe_fd = -1;
		}
		goto out;
	}
	int bto = boot_timeout(o);
	if (!server &&
	    wait_for_server(r, addr, bto ? bto : (int)kinet_tunable_int("KINET_BOOT_TIMEOUT_MS")))
		goto out;
	struct kinet_boot_attr ba = {
		.rank = server ? 0 : 1,
		.size = 2,
		.addr = addr,
		.secret = secret,
		.timeout_ms = bto,
		.listening = server ? on_listening : NULL,
		.listening_arg = r,
	};
	if ((rc = kinet_boot_init(&ba, &r->boot))) {
		fprintf(stderr, "kinet-perf: %s: %s: joining %s: %s%s\n", r->test, role(r), addr,
			kinet_strerror(rc),
			rc == -KINET_ESECRET ? " (both sides need the same --secret or "
					       "KINET_BOOT_SECRET)"
			: rc == -ETIMEDOUT ? (server ? " (no client came)"
						     : " (no server answered there)")
					   : "");
		goto out;
	}
	if (server)
		snprintf(r->addr, sizeof(r->addr), "%s", kinet_boot_addr(r->boot));

	/* HELLO */
	uint8_t mine[HELLO_LEN], peer[HELLO_LEN];
	hello_fill(r, o, mine);
	if ((rc = xchg(r, mine, peer, HELLO_LEN))) {
		status = local_error(r, "exchange \"hello\"", rc);
		goto out;
	}
	if (hello_agree(r, server ? mine : peer, server ? peer : mine)) {
		status = report_failures(r);
		goto out;
	}
	const char *me = o->host[0] ? o->host : "?";
	const char *how = o->pair_threads ? "; both in this process" : "";
	if (server)
		snprintf(r->procs, sizeof(r->procs),
			 "2, this is the server (%s, at %s); client on %s%s", me, r->addr,
			 r->peer_host, how);
	else
		snprintf(r->procs, sizeof(r->procs), "2, this is the client (%s); server %s at %s%s",
			 me, r->peer_host, r->addr, how);

	/* DESC and connection */
	rc = side_open(r, &what);
	if ((status = desc_exchange(r, rc, what)))
		goto out;
	status = 1;
	if ((server && !quiet) || !server)
		perf_report_header(&r->e, stdout);
	fflush(stdout);
	int failed = 0;
	for (uint64_t s = r->first; s <= r->last && !failed; s <<= 1)
		failed = run_size(r, s);
	if (!failed) {
		if (!server || !quiet)
			perf_report_footer(&r->e, stdout);
		status = 0;
	}
	/* the path said at connect can change on the first send: GPU memory the
	 * provider took (KINET_FI_HMEM, kinet_mr_path "fabric") */
	if (r->mr && r->e.mem_line[0] && (!server || !quiet)) {
		const char *now = kinet_mr_path_str(kinet_mr_path(r->mr));
		if (!strstr(r->e.mem_line, now))
			printf(" Payload memory  : registered: %s after the run\n", now);
	}
out:
	fflush(stdout);
	if (r->x->close)
		r->x->close(&r->e);
	perf_env_close(&r->e);
	kinet_boot_close(r->boot);
	free(r->expect);
	if (pipe_fd >= 0 && r->pipe_fd >= 0)
		close(r->pipe_fd);
	free(r);
	return status;
}

/* ---- the address of the server ------------------------------------------------------- */

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* HOST, HOST:PORT, [V6], [V6]:PORT or a bare IPv6 address, and -p: the
 * server's "host:port", or 2 after a usage message. */
static int client_addr(const struct perf_opts *o, char *out, size_t cap)
{
	const char *h = o->peer;
	const char *port_in = NULL;
	char host[256];
	size_t hl;
	if (h[0] == '[') {
		const char *end = strchr(h, ']');
		if (!end || (end[1] && end[1] != ':'))
			goto bad;
		hl = (size_t)(end - h - 1);
		if (end[1] == ':')
			port_in = end + 2;
		h++;
	} else {
		const char *c = strchr(h, ':');
		hl = strlen(h);
		if (c && !strchr(c + 1, ':')) { /* host:port */
			hl = (size_t)(c - h);
			port_in = c + 1;
		}
	}
	if (!hl || hl >= sizeof(host))
		goto bad;
	memcpy(host, h, hl);
	host[hl] = 0;
	long port = o->port >= 0 ? o->port : RMT_PORT;
	if (port_in) {
		if (!all_digits(port_in) || strlen(port_in) > 5 || atol(port_in) < 1 ||
		    atol(port_in) > 65535)
			goto bad;
		if (o->port >= 0 && atol(port_in) != o->port) {
			fprintf(stderr, "kinet-perf: two ports for the server: '%s' and -p %d\n"
					"(kinet-perf -h for help)\n",
				o->peer, o->port);
			return 2;
		}
		port = atol(port_in);
	}
	if (port < 1) {
		fprintf(stderr, "kinet-perf: the client needs the server's port (-p 1 to 65535)\n"
				"(kinet-perf -h for help)\n");
		return 2;
	}
	snprintf(out, cap, strchr(host, ':') ? "[%s]:%ld" : "%s:%ld", host, port);
	return 0;
bad:
	fprintf(stderr,
		"kinet-perf: bad server address '%s' (HOST, HOST:PORT, [IPV6] or [IPV6]:PORT)\n"
		"(kinet-perf -h for help)\n",
		o->peer);
	return 2;
}

/* ---- --pair ------------------------------------------------------------------------- */

/* Reads the server's "host:port" line from fd, waiting at most ms. */
static int read_line(int fd, char *buf, size_t cap, int ms)
{
	size_t n = 0;
	while (n + 1 < cap) {
		struct pollfd p = {fd, POLLIN, 0};
		int k = poll(&p, 1, ms);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -ETIMEDOUT;
		ssize_t got = read(fd, buf + n, 1);
		if (got <= 0)
			return -EPIPE;
		if (buf[n] == '\n') {
			buf[n] = 0;
			return 0;
		}
		n++;
	}
	return -E2BIG;
}

static int exit_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 1;
}

/* --pair=threads: the server's side on a thread of its own. */
struct pair_thread {
	const struct perf_opts *o;
	const struct perf_executor *x;
	const char *secret;
	int pipe_fd;
	int status;
};

static void *pair_server(void *arg)
{
	struct pair_thread *t = arg;
	t->status = run_side(t->o, t->x, true, true, "127.0.0.1:0", t->secret, t->pipe_fd);
	return NULL;
}

/* Whether a CUDA MPS control daemon is there (its pipe folder has its
 * control pipe). */
static bool mps_running(void)
{
	const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
	char path[512];
	snprintf(path, sizeof(path), "%s/control", dir && *dir ? dir : "/tmp/nvidia-mps");
	return access(path, F_OK) == 0;
}

static int run_pair(const struct perf_opts *o, const struct perf_executor *x)
{
	char secret[33];
	const char *sec = o->secret;
	if (strcmp(x->name, "host") && !o->pair_threads && !mps_running())
		fprintf(stderr, "kinet-perf: %s --pair: both processes use this machine's GPU, and "
				"no CUDA MPS daemon runs: their kernels take turns (time slices of "
				"about 2 ms), which a ping-pong measures; start "
				"nvidia-cuda-mps-control -d first\n",
			o->test->name);
	if (!sec) { /* a fresh secret for the two: nobody else can join */
		uint8_t raw[16];
		if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
			fprintf(stderr, "kinet-perf: getrandom: %s\n", strerror(errno));
			return 1;
		}
		for (int i = 0; i < 16; i++)
			snprintf(secret + 2 * i, 3, "%02x", raw[i]);
		sec = secret;
	}
	/* the tcp provider on loopback (a user's choice stays) */
	setenv("FI_TCP_IFACE", "lo", 0);
	int p[2];
	if (pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "kinet-perf: pipe: %s\n", strerror(errno));
		return 1;
	}
	if (o->pair_threads) { /* both sides in this process, on two threads */
		struct pair_thread pt = {o, x, sec, p[1], 1};
		pthread_t th;
		if ((errno = pthread_create(&th, NULL, pair_server, &pt))) {
			fprintf(stderr, "kinet-perf: pthread_create: %s\n", strerror(errno));
			close(p[0]);
			close(p[1]);
			return 1;
		}
		char addr[320];
		int rc = read_line(p[0], addr, sizeof(addr), 30000);
		close(p[0]);
		int cs = rc ? 1 : run_side(o, x, false, false, addr, sec, -1);
		pthread_join(th, NULL);
		return cs > pt.status ? cs : pt.status;
	}
	fflush(NULL);
	pid_t srv = fork();
	if (srv < 0) {
		fprintf(stderr, "kinet-perf: fork: %s\n", strerror(errno));
		return 1;
	}
	if (srv == 0) {
		close(p[0]);
		exit(run_side(o, x, true, true, "127.0.0.1:0", sec, p[1]));
	}
	close(p[1]);
	char addr[320];
	int rc = read_line(p[0], addr, sizeof(addr), 30000);
	close(p[0]);
	int st = 0;
	if (rc) { /* the server did not get to listen: it said why */
		if (rc == -ETIMEDOUT)
			kill(srv, SIGKILL);
		waitpid(srv, &st, 0);
		return exit_status(st) ? exit_status(st) : 1;
	}
	pid_t cli = fork();
	if (cli < 0) {
		fprintf(stderr, "kinet-perf: fork: %s\n", strerror(errno));
		kill(srv, SIGKILL);
		waitpid(srv, &st, 0);
		return 1;
	}
	if (cli == 0)
		exit(run_side(o, x, false, false, addr, sec, -1));
	int cs = 0, ss = 0;
	waitpid(cli, &cs, 0);
	waitpid(srv, &ss, 0);
	int a = exit_status(cs), b = exit_status(ss);
	return a > b ? a : b;
}

int perf_remote_main(const struct perf_opts *o, const struct perf_executor *x)
{
	if (o->mem == PERF_MEM_GPU && (!x->gpu_alloc || !x->gpu_copy)) {
		fprintf(stderr, "kinet-perf: --mem gpu needs the cuda executor (not %s)\n"
				"(kinet-perf -h for help)\n",
			x->name);
		return 2;
	}
	if (o->threads > (int)RMT_MAX_THREADS) { /* kinet-perf.c refuses it first */
		fprintf(stderr, "kinet-perf: across processes a side runs at most %u threads\n",
			RMT_MAX_THREADS);
		return 2;
	}
	if (o->pair)
		return run_pair(o, x);
	if (o->server) {
		char addr[32];
		int port = o->port >= 0 ? o->port : RMT_PORT;
		snprintf(addr, sizeof(addr), "*:%d", port);
		bool env = kinet_tunable_get("KINET_BOOT_SECRET")->flags & KINET_TUNABLE_SET;
		if (!o->secret && !env)
			fprintf(stderr, "kinet-perf: %s: server: no job secret (--secret or "
					"KINET_BOOT_SECRET): any process that reaches its port can "
					"join\n",
				o->test->name);
		return run_side(o, x, true, false, addr, o->secret, -1);
	}
	char addr[300];
	int rc = client_addr(o, addr, sizeof(addr));
	if (rc)
		return rc;
	return run_side(o, x, false, false, addr, o->secret, -1);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-perf - perftest-style benchmarks of the kinet data path.
 *
 *   kinet-perf TEST [options]        (kinet-perf -h for the options)
 *   kinet-perf TEST --server | HOST | --pair [options]   across processes
 *
 * How the tool is cut, and where it is meant to grow
 *
 *   1. Command line and reporting (this file, report.c). Options become a
 *      struct perf_opts; results are printed with perftest's columns or as
 *      JSON lines. Nothing here knows how a message is posted.
 *
 *   2. The QP pair (setup.c, struct perf_env). Opens the software NIC,
 *      creates and connects the QPs, registers both sides' buffers, fills
 *      them with random contents and builds one struct perf_job per thread;
 *      after a run it checks the data. Both ends are in this process (a
 *      local pair), unless --server, --pair or a HOST operand: then remote.c
 *      creates only this process's side, meets the peer through the
 *      bootstrap (kinet/boot.h), exchanges QP and memory descriptors
 *      (kinet/net.h) and fills the same jobs with tqp = NULL; the server
 *      runs the target's work (write_lat's replies, send_bw's receives) as
 *      PERF_ROLE_TARGET jobs, and each side checks the data it holds.
 *
 *   3. Test bodies (perf_body.h). What one initiator thread does, written
 *      only against kinet/device.h in C that nvcc also accepts: the low-level
 *      kn_sq_reserve / kn_prep_* / kn_sq_submit / kn_test / kn_wait API for
 *      every test but put_bw, which uses kn_put. Timing uses kn_now_ns()
 *      (CLOCK_MONOTONIC on the host, %globaltimer on a GPU).
 *
 *   4. Executors (struct perf_executor). Run every job to its end. The host
 *      executor (exec_host.c) uses kinet_host_exec (one CPU thread per job).
 *      The cuda executor (exec_cuda.cu, built when nvcc is found; the default
 *      when a GPU is usable) runs one GPU thread per job in --ctas CTAs of
 *      --cta-threads threads, at thread scope (perf_body_run) or at warp or
 *      block scope (kinet/device_cuda.cuh: the warp or the CTA posts
 *      together), with the payloads in pinned host or in GPU memory (copied
 *      back for the data check). resolve_executor() below turns the options
 *      into the launch shape and the QP grouping (opts.qp_group, setup.c)
 *      and refuses combinations that make no sense.
 *
 * Exit status: 0 success, 1 a run failed (error CQE, timeout, data check),
 * 2 bad usage. Errors are printed with kinet_strerror / kinet_syndrome_str.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"
#include "kinet_config.h"

#define KPERF_MAX_SIZE (1ull << 30)
#define KPERF_MAX_THREADS 256
#define KPERF_MAX_GPU_THREADS 65536
#define KPERF_MAX_SQ 32768u

static const struct perf_test tests[] = {
	{"write_bw", PERF_WRITE_BW, PERF_BW, PERF_F_DEVICE, "RDMA_Write BW Test",
	 "RDMA write bandwidth and message rate"},
	{"write_lat", PERF_WRITE_LAT, PERF_LAT, PERF_F_DEVICE | PERF_F_PINGPONG,
	 "RDMA_Write Latency Test", "RDMA write ping-pong latency (half round trip)"},
	{"read_bw", PERF_READ_BW, PERF_BW, PERF_F_DEVICE, "RDMA_Read BW Test",
	 "RDMA read bandwidth and message rate"},
	{"read_lat", PERF_READ_LAT, PERF_LAT, PERF_F_DEVICE, "RDMA_Read Latency Test",
	 "RDMA read latency (post to completion)"},
	{"atomic_bw", PERF_ATOMIC_BW, PERF_BW, PERF_F_DEVICE | PERF_F_FIXED8,
	 "Atomic FETCH_AND_ADD BW Test", "8-byte fetch-add bandwidth and message rate"},
	{"atomic_lat", PERF_ATOMIC_LAT, PERF_LAT, PERF_F_DEVICE | PERF_F_FIXED8,
	 "Atomic FETCH_AND_ADD Latency Test", "8-byte fetch-add latency (post to completion)"},
	{"send_bw", PERF_SEND_BW, PERF_BW, PERF_F_DEVICE | PERF_F_RECV, "Send BW Test",
	 "SEND bandwidth (the target's receives are posted by the same thread)"},
	{"put_bw", PERF_PUT_BW, PERF_BW, PERF_F_DEVICE, "kn_put BW Test",
	 "bandwidth of the high-level kn_put (RDMA write)"},
	{"memcpy_bw", PERF_MEMCPY_BW, PERF_BW, PERF_F_NO_NIC, "memcpy BW (baseline)",
	 "plain memcpy of the same sizes on the same threads, no NIC"},
};
#define NTESTS (sizeof(tests) / sizeof(tests[0]))

#if KINET_HAVE_CUDA
extern const struct perf_executor perf_exec_cuda; /* exec_cuda.cu */
int perf_cuda_usable(void);                       /* exec_cuda.cu: 1 if a GPU is */
#endif
static const struct perf_executor *const executors[] = {
	&perf_exec_host,
#if KINET_HAVE_CUDA
	&perf_exec_cuda,
#endif
};
#define NEXEC (sizeof(executors) / sizeof(executors[0]))

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kinet-perf TEST [options]\n"
		"\n"
		"Benchmarks of the kinet data path over the software NIC, device-API code\n"
		"run by GPU threads (the cuda executor) or CPU threads (the host executor).\n"
		"Output columns as perftest's.\n"
		"\n"
		"Tests:\n");
	for (size_t i = 0; i < NTESTS; i++)
		fprintf(f, "  %-11s %s\n", tests[i].name, tests[i].desc);
	fprintf(f,
		"\n"
		"Options:\n"
		"  -s, --size=BYTES       message size (default 65536 for bandwidth, 2 for\n"
		"                         latency, always 8 for atomics); K, M, G suffixes\n"
		"  -a, --all              sweep sizes 2, 4, ... up to --max-size\n"
		"      --min-size=BYTES   first size of the sweep (default 2)\n"
		"      --max-size=BYTES   last size of the sweep (default 8M); K, M, G suffixes\n"
		"  -n, --iters=N          timed iterations per size and thread (default 5000\n"
		"                         for bandwidth, 1000 for latency)\n"
		"      --warmup=N         untimed iterations before each size (default 16)\n"
		"  -t, --threads=N        initiator threads (default 1): CPU threads (1 to 256)\n"
		"                         or GPU threads (1 to 65536, see --ctas)\n"
		"  -q, --qdepth=N         outstanding WQEs per thread, the post window of the\n"
		"                         bandwidth tests (default 128)\n"
		"      --shared[=gpu|cta] one QP shared by all threads (gpu, the default:\n"
		"                         KN_SHARE_GPU) or, cuda executor, one QP per CTA\n"
		"                         shared by its threads (cta: KN_SHARE_CTA); without\n"
		"                         it one QP per thread (warp scope: per warp, block\n"
		"                         scope: per CTA)\n"
		"      --db-mode=MODE     doorbell mode: gpu, blueflame, cpu (default: auto)\n"
		"      --engine-threads=N software NIC engine threads (default:\n"
		"                         KINET_ENGINE_THREADS)\n"
		"      --executor=NAME    who runs the device code: cuda (GPU threads, one per\n"
		"                         job; the default when built with CUDA and a GPU is\n"
		"                         usable) or host (CPU threads; the default otherwise)\n"
		"      --ctas=N           cuda: CTAs of the launch (default: enough for -t)\n"
		"      --cta-threads=N    cuda: threads per CTA, 1 to 1024 (default 1 at thread\n"
		"                         scope, 32 at warp and block scope); with --ctas,\n"
		"                         -t is --ctas x --cta-threads (give one or agree)\n"
		"      --scope=SCOPE      cuda: who posts: thread (each thread alone, the\n"
		"                         default), warp (the 32 lanes in one post, one\n"
		"                         doorbell) or block (the whole CTA in one post);\n"
		"                         send_bw is thread scope only\n"
		"      --mem=host|gpu     cuda: payload buffers in pinned host memory (default)\n"
		"                         or in GPU memory (cudaMalloc; copied back for the\n"
		"                         data check)\n"
		"      --poll=spin|yield  host executor, while a thread waits: spin with the\n"
		"                         device layer's pause (default, as a GPU thread does)\n"
		"                         or give the CPU away (sched_yield) between all polls;\n"
		"                         yield suits machines with fewer cores than initiator\n"
		"                         plus engine threads\n"
		"      --json             print one JSON object per line (JSON Lines) on\n"
		"                         stdout, one per message size, and nothing else\n"
		"      --corrupt          (testing the tool) flip one destination byte after\n"
		"                         the run: the data check must fail\n"
		"  -h, --help             this text\n"
		"\n"
		"Across processes (the software NIC's wire; every test but memcpy_bw):\n"
		"  kinet-perf TEST --server [options]     waits for one client, then serves\n"
		"                                         as the target\n"
		"  kinet-perf TEST HOST[:PORT] [options]  the client: initiates; its run\n"
		"                                         options (-s -a -n --warmup -t -q\n"
		"                                         --shared) apply to both sides\n"
		"  kinet-perf TEST --pair [options]       a server and a client on this\n"
		"                                         machine (loopback), one command\n"
		"  -p, --port=PORT        the server's TCP port (default 18515; 0 on a server:\n"
		"                         any free port, printed)\n"
		"      --secret=STRING    job secret, the same on both sides (default:\n"
		"                         KINET_BOOT_SECRET; --pair makes a fresh one)\n"
		"      --timeout=SECONDS  bound on joining and on each exchange, including the\n"
		"                         server's wait during one size's run (default 300,\n"
		"                         or KINET_BOOT_TIMEOUT_MS when set)\n"
		"\n"
		"Bandwidth: BW average = bytes / (last completion - first post), all threads\n"
		"together; BW peak = best rate over max(q*threads, messages/16) consecutive\n"
		"messages; MB = 2^20 bytes; MsgRate in 10^6 messages per second.\n"
		"Latency in microseconds; t_typical is the median; write_lat reports half the\n"
		"round trip of a ping-pong. Every run checks its data (random contents) and\n"
		"fails if a byte differs.\n"
		"\n"
		"Exit status: 0 success, 1 the run failed, 2 bad usage.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "kinet-perf: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(kinet-perf -h for help)\n");
	return 2;
}

/* Number with an optional binary K/M/G suffix; 0 or -EINVAL. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	uint64_t mul = 1;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	default: break;
	}
	if ((*end == 'B' || *end == 'b') && mul > 1)
		end++;
	if (*end || (v && v > UINT64_MAX / mul))
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static int parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Options that choose or shape the executor, as given. */
struct exec_given {
	bool executor, threads, poll, ctas, cta_threads, scope, mem;
};

/* After the options: picks the executor (cuda when built in and a GPU is
 * usable, or when a GPU-only option asks for it; host otherwise, and for
 * memcpy_bw, --poll and runs across processes), works out the GPU launch
 * (-t, --ctas, --cta-threads) and the QP grouping of the scope and --shared,
 * and refuses combinations that make no sense. 0, or 2 after a message. */
static int resolve_executor(struct perf_opts *o, const struct exec_given *g)
{
	const struct perf_test *pt = o->test;
	bool gpu_opt = g->ctas || g->cta_threads || g->scope || g->mem || o->shared_cta;
	const char *gpu_name = g->ctas		? "--ctas"
			       : g->cta_threads ? "--cta-threads"
			       : g->scope	? "--scope"
			       : g->mem		? "--mem"
						: "--shared=cta";
	const char *fallback = NULL; /* why the host executor, when defaulted */
	if (g->executor) {
		bool known = false;
		for (size_t i = 0; i < NEXEC; i++)
			known |= !strcmp(executors[i]->name, o->executor);
		if (!known)
			return usage_error(KINET_HAVE_CUDA
						   ? "executor '%s' is not built in (available: host, cuda)"
						   : "executor '%s' is not built in (available: host)",
					   o->executor);
	} else if ((pt->flags & PERF_F_NO_NIC) || g->poll || o->server || o->pair || o->peer) {
		o->executor = "host"; /* a CPU baseline, a host-only option, or across
				       * processes (remote.c runs host jobs only so far) */
#if KINET_HAVE_CUDA
	} else if (gpu_opt || perf_cuda_usable()) {
		o->executor = "cuda";
	} else {
		o->executor = "host";
		fallback = "no usable GPU";
#else
	} else {
		o->executor = "host";
		fallback = "built without CUDA";
#endif
	}
	if (strcmp(o->executor, "cuda")) {
		if (gpu_opt)
			return usage_error(KINET_HAVE_CUDA ? "%s needs the cuda executor"
							   : "%s needs the cuda executor (this "
							     "kinet-perf is built without CUDA)",
					   gpu_name);
		if (o->threads > KPERF_MAX_THREADS)
			return usage_error("%s", "the host executor runs 1 to 256 threads (-t)");
		if (fallback)
			fprintf(stderr, "kinet-perf: %s: running on the host executor\n", fallback);
		return 0;
	}
	/* the cuda executor */
	if (pt->flags & PERF_F_NO_NIC)
		return usage_error("%s is a CPU baseline: it runs on the host executor", pt->name);
	if (g->poll)
		return usage_error("%s", "--poll is for the host executor (GPU threads spin)");
	int scope = o->scope;
	const char *sname = scope == PERF_SCOPE_WARP ? "warp" : "block";
	int tpc = g->cta_threads ? o->cta_threads : (scope == PERF_SCOPE_THREAD ? 1 : 32);
	if (scope == PERF_SCOPE_WARP && tpc % 32)
		return usage_error("%s", "--scope warp: --cta-threads must be whole warps (a "
					 "multiple of 32)");
	if (scope != PERF_SCOPE_THREAD && pt->id == PERF_SEND_BW)
		return usage_error("%s", "send_bw is thread scope only: a receive queue has a "
					 "single consumer");
	long n;
	if (g->ctas) {
		n = (long)o->ctas * tpc;
		if (g->threads && o->threads != n)
			return usage_error("%s", "-t differs from --ctas x --cta-threads (give one "
						 "or make them agree)");
	} else {
		n = g->threads ? o->threads : tpc;
		if (scope != PERF_SCOPE_THREAD && n % tpc)
			return usage_error("--scope %s: -t must be whole CTAs (a multiple of "
					   "--cta-threads)",
					   sname);
		o->ctas = (int)((n + tpc - 1) / tpc);
	}
	if (n > KPERF_MAX_GPU_THREADS)
		return usage_error("%s", "more than 65536 GPU threads (--ctas x --cta-threads)");
	o->threads = (int)n;
	o->cta_threads = tpc;
	/* QPs: one per posting agent, one per CTA (shared by its threads), or
	 * one for the whole grid */
	int group = scope == PERF_SCOPE_THREAD ? 1 : scope == PERF_SCOPE_WARP ? 32 : tpc;
	int share = KN_SHARE_EXCLUSIVE;
	if (o->shared) {
		group = (int)n;
		share = KN_SHARE_GPU;
	} else if (o->shared_cta) {
		if (scope == PERF_SCOPE_BLOCK)
			return usage_error("%s", "--shared=cta at block scope: the CTA is the only "
						 "poster of its QP already (the default)");
		group = tpc;
		share = KN_SHARE_CTA;
	}
	if ((uint64_t)group * o->qdepth > KPERF_MAX_SQ)
		return usage_error("%s", "threads per QP x qdepth above the largest SQ (32768): "
					 "lower -q");
	if (pt->id == PERF_SEND_BW && group > 1)
		return usage_error("%s", "send_bw on a shared QP takes one thread: the receive "
					 "queue has a single consumer");
	if ((uint64_t)n * o->iters > (1ull << 26))
		return usage_error("%s", "threads x iterations above 2^26 (samples would not fit)");
#if KINET_HAVE_CUDA
	/* last: the shape refusals above need no GPU */
	if (!perf_cuda_usable())
		return usage_error(g->executor ? "--executor %s needs a usable GPU, and there is "
						 "none here (no CUDA driver or device, or "
						 "KINET_NO_CUDA is set)"
					       : "%s needs the cuda executor, which needs a usable "
						 "GPU, and there is none here (no CUDA driver or "
						 "device, or KINET_NO_CUDA is set)",
				   g->executor ? o->executor : gpu_name);
#endif
	o->qp_group = group;
	o->qp_share = share;
	return 0;
}

enum {
	OPT_JSON = 256,
	OPT_MIN_SIZE,
	OPT_MAX_SIZE,
	OPT_WARMUP,
	OPT_SHARED,
	OPT_DB_MODE,
	OPT_ENGINE_THREADS,
	OPT_EXECUTOR,
	OPT_CORRUPT,
	OPT_POLL,
	OPT_CTAS,
	OPT_CTA_THREADS,
	OPT_SCOPE,
	OPT_MEM,
	OPT_SERVER,
	OPT_PAIR,
	OPT_SECRET,
	OPT_TIMEOUT,
};

static int parse_args(int argc, char **argv, struct perf_opts *o)
{
	static const struct option lopts[] = {
		{"size", required_argument, NULL, 's'},
		{"all", no_argument, NULL, 'a'},
		{"min-size", required_argument, NULL, OPT_MIN_SIZE},
		{"max-size", required_argument, NULL, OPT_MAX_SIZE},
		{"iters", required_argument, NULL, 'n'},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"threads", required_argument, NULL, 't'},
		{"qdepth", required_argument, NULL, 'q'},
		{"shared", optional_argument, NULL, OPT_SHARED},
		{"db-mode", required_argument, NULL, OPT_DB_MODE},
		{"engine-threads", required_argument, NULL, OPT_ENGINE_THREADS},
		{"executor", required_argument, NULL, OPT_EXECUTOR},
		{"json", no_argument, NULL, OPT_JSON},
		{"corrupt", no_argument, NULL, OPT_CORRUPT},
		{"poll", required_argument, NULL, OPT_POLL},
		{"ctas", required_argument, NULL, OPT_CTAS},
		{"cta-threads", required_argument, NULL, OPT_CTA_THREADS},
		{"scope", required_argument, NULL, OPT_SCOPE},
		{"mem", required_argument, NULL, OPT_MEM},
		{"server", no_argument, NULL, OPT_SERVER},
		{"pair", no_argument, NULL, OPT_PAIR},
		{"port", required_argument, NULL, 'p'},
		{"secret", required_argument, NULL, OPT_SECRET},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool have_size = false, have_iters = false, have_warmup = false;
	struct exec_given gg = {false, false, false, false, false, false, false};
	uint64_t v;
	int c;
	memset(o, 0, sizeof(*o));
	o->min_size = 2;
	o->max_size = 1ull << 23;
	o->threads = 1;
	o->qdepth = 128;
	o->db_mode = KN_DB_AUTO;
	o->executor = "host";
	o->port = -1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:an:t:q:p:h", lopts, NULL)) != -1) {
		/* run options given (a server takes the client's for the others) */
		switch (c) {
		case 's': case 'a': case OPT_MIN_SIZE: case OPT_MAX_SIZE:
			o->given |= PERF_GIVEN_SIZES;
			break;
		case 'n': o->given |= PERF_GIVEN_ITERS; break;
		case OPT_WARMUP: o->given |= PERF_GIVEN_WARMUP; break;
		case 't': o->given |= PERF_GIVEN_THREADS; break;
		case 'q': o->given |= PERF_GIVEN_QDEPTH; break;
		case OPT_SHARED: o->given |= PERF_GIVEN_SHARED; break;
		default: break;
		}
		switch (c) {
		case OPT_SERVER:
			o->server = true;
			break;
		case OPT_PAIR:
			o->pair = true;
			break;
		case 'p':
			if (parse_uint(optarg, 0, 65535, &v))
				return usage_error("bad port '%s' (0 to 65535)", optarg);
			o->port = (int)v;
			break;
		case OPT_SECRET:
			o->secret = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_uint(optarg, 1, 86400, &v))
				return usage_error("bad --timeout '%s' (1 to 86400 seconds)", optarg);
			o->timeout_ms = (int)v * 1000;
			break;
		case 's':
			if (parse_size(optarg, &o->size) || o->size == 0 || o->size > KPERF_MAX_SIZE)
				return usage_error("bad message size '%s' (1 to 1G bytes)", optarg);
			have_size = true;
			break;
		case 'a':
			o->sweep = true;
			break;
		case OPT_MIN_SIZE:
			if (parse_size(optarg, &o->min_size) || o->min_size == 0 ||
			    o->min_size > KPERF_MAX_SIZE)
				return usage_error("bad --min-size '%s' (1 to 1G bytes)", optarg);
			break;
		case OPT_MAX_SIZE:
			if (parse_size(optarg, &o->max_size) || o->max_size == 0 ||
			    o->max_size > KPERF_MAX_SIZE)
				return usage_error("bad --max-size '%s' (1 to 1G bytes)", optarg);
			break;
		case 'n':
			if (parse_uint(optarg, 1, 1000000000ull, &o->iters))
				return usage_error("bad iteration count '%s' (1 to 10^9)", optarg);
			have_iters = true;
			break;
		case OPT_WARMUP:
			if (parse_uint(optarg, 0, 1000000000ull, &o->warmup))
				return usage_error("bad warm-up count '%s'", optarg);
			have_warmup = true;
			break;
		case 't':
			if (parse_uint(optarg, 1, KPERF_MAX_GPU_THREADS, &v))
				return usage_error("bad thread count '%s' (1 to 256 CPU threads, "
						   "1 to 65536 GPU threads)",
						   optarg);
			o->threads = (int)v;
			gg.threads = true;
			break;
		case 'q':
			if (parse_uint(optarg, 1, KPERF_MAX_SQ, &v))
				return usage_error("bad queue depth '%s' (1 to 32768)", optarg);
			o->qdepth = (uint32_t)v;
			break;
		case OPT_SHARED:
			if (!optarg || !strcmp(optarg, "gpu"))
				o->shared = true, o->shared_cta = false;
			else if (!strcmp(optarg, "cta"))
				o->shared = false, o->shared_cta = true;
			else
				return usage_error("bad --shared '%s' (gpu, cta)", optarg);
			break;
		case OPT_DB_MODE:
			if (!strcmp(optarg, "gpu"))
				o->db_mode = KN_DB_GPU;
			else if (!strcmp(optarg, "blueflame"))
				o->db_mode = KN_DB_BLUEFLAME;
			else if (!strcmp(optarg, "cpu"))
				o->db_mode = KN_DB_CPU_PROXY;
			else if (!strcmp(optarg, "auto"))
				o->db_mode = KN_DB_AUTO;
			else
				return usage_error("bad --db-mode '%s' (gpu, blueflame, cpu)", optarg);
			break;
		case OPT_ENGINE_THREADS:
			if (parse_uint(optarg, 1, 64, &v))
				return usage_error("bad --engine-threads '%s' (1 to 64)", optarg);
			o->engine_threads = (int)v;
			break;
		case OPT_EXECUTOR:
			o->executor = optarg;
			gg.executor = true;
			break;
		case OPT_CTAS:
			if (parse_uint(optarg, 1, 65535, &v))
				return usage_error("bad --ctas '%s' (1 to 65535)", optarg);
			o->ctas = (int)v;
			gg.ctas = true;
			break;
		case OPT_CTA_THREADS:
			if (parse_uint(optarg, 1, 1024, &v))
				return usage_error("bad --cta-threads '%s' (1 to 1024)", optarg);
			o->cta_threads = (int)v;
			gg.cta_threads = true;
			break;
		case OPT_SCOPE:
			if (!strcmp(optarg, "thread"))
				o->scope = PERF_SCOPE_THREAD;
			else if (!strcmp(optarg, "warp"))
				o->scope = PERF_SCOPE_WARP;
			else if (!strcmp(optarg, "block"))
				o->scope = PERF_SCOPE_BLOCK;
			else
				return usage_error("bad --scope '%s' (thread, warp, block)", optarg);
			gg.scope = true;
			break;
		case OPT_MEM:
			if (!strcmp(optarg, "host"))
				o->mem = PERF_MEM_HOST;
			else if (!strcmp(optarg, "gpu")) {
				o->mem = PERF_MEM_GPU;
				/* the software NIC reaches GPU memory only by staging, which
				 * must be allowed (read at the first kinet call, after this) */
				setenv("KINET_ALLOW_HOST_STAGING", "1", 0);
			} else
				return usage_error("bad --mem '%s' (host, gpu)", optarg);
			gg.mem = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_POLL:
			gg.poll = true;
			if (!strcmp(optarg, "spin"))
				o->yield = false;
			else if (!strcmp(optarg, "yield"))
				o->yield = true;
			else
				return usage_error("bad --poll '%s' (spin, yield)", optarg);
			break;
		case OPT_CORRUPT:
			o->corrupt = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("%s", "which test? (write_bw, write_lat, read_bw, read_lat, "
					  "atomic_bw, atomic_lat, send_bw, put_bw, memcpy_bw)");
	for (size_t i = 0; i < NTESTS; i++)
		if (!strcmp(argv[optind], tests[i].name))
			o->test = &tests[i];
	if (!o->test)
		return usage_error("unknown test '%s'", argv[optind]);
	if (optind + 1 < argc)
		o->peer = argv[optind + 1];
	if (optind + 2 < argc)
		return usage_error("unexpected argument '%s'", argv[optind + 2]);

	const struct perf_test *pt = o->test;
	int modes = (o->peer != NULL) + o->server + o->pair;
	if (modes > 1)
		return usage_error("%s", "use one of --server, --pair and a HOST operand "
					 "(the client), not two");
	if (modes && (pt->flags & PERF_F_NO_NIC))
		return usage_error("%s has no peer: it runs in one process", pt->name);
	if (!modes && (o->port >= 0 || o->secret || o->timeout_ms))
		return usage_error("%s", "-p, --secret and --timeout go with --server, --pair or "
					 "a HOST operand");
	if (o->pair && o->port >= 0)
		return usage_error("%s", "--pair picks a free port itself (no -p)");
	if (!have_iters)
		o->iters = pt->kind == PERF_BW ? 5000 : 1000;
	if (!have_warmup)
		o->warmup = 16;
	if (pt->flags & PERF_F_FIXED8) {
		if (have_size && o->size != 8)
			return usage_error("%s moves 8 bytes per message (-s 8 or no -s)", pt->name);
		o->size = 8;
		o->sweep = false;
	} else if (!have_size) {
		o->size = pt->kind == PERF_BW ? 65536 : 2;
	}
	if (o->sweep) {
		if (o->min_size > o->max_size)
			return usage_error("%s", "--min-size is above --max-size");
		uint64_t s = 1;
		while (s < o->min_size)
			s <<= 1;
		if (s > o->max_size)
			return usage_error("%s", "no power of two between --min-size and --max-size");
	}
	if (o->shared && o->threads * (uint64_t)o->qdepth > KPERF_MAX_SQ)
		return usage_error("%s", "--shared: threads x qdepth above the largest SQ (32768)");
	if (o->shared && pt->id == PERF_SEND_BW && o->threads > 1)
		return usage_error("%s", "send_bw --shared takes one thread: the receive queue "
					 "has a single consumer");
	if ((uint64_t)o->threads * o->iters > (1ull << 26))
		return usage_error("%s", "threads x iterations above 2^26 (samples would not fit)");
	return resolve_executor(o, &gg);
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

/* One message size: prepare, run, check, report. 0 or 1 (failed). */
static int run_size(struct perf_env *e, const struct perf_executor *x, uint64_t size)
{
	const struct perf_opts *o = e->o;
	const char *name = o->test->name;
	perf_env_prepare(e, size);
	int rc = (o->test->flags & PERF_F_NO_NIC) ? perf_memcpy_run(e) : x->run(e);
	if (rc) {
		fprintf(stderr, "kinet-perf: %s: executor %s: %s\n", name, x->name,
			kinet_strerror(rc));
		return 1;
	}
	for (int i = 0; i < o->threads; i++) {
		const struct perf_job *j = &e->jobs[i];
		if (!j->rc)
			continue;
		fprintf(stderr, "kinet-perf: %s: %" PRIu64 " bytes: thread %d: %s: %s", name, size, i,
			step_str(j->step), kinet_strerror(j->rc));
		if (j->rc == -EIO)
			fprintf(stderr, ": %s (syndrome 0x%02x, vendor syndrome 0x%02x)",
				kinet_syndrome_str(j->syndrome), j->syndrome, j->vendor);
		fprintf(stderr, "\n");
		return 1;
	}
	char why[256];
	if (o->corrupt)
		perf_env_corrupt(e, size);
	if (perf_env_verify(e, size, why, sizeof(why))) {
		fprintf(stderr, "kinet-perf: %s: data check failed at %" PRIu64 " bytes: %s\n", name,
			size, why);
		return 1;
	}
	if (o->test->kind == PERF_BW) {
		struct perf_bw r;
		if ((rc = perf_bw_stats(e, size, &r)))
			goto nomem;
		perf_report_bw(e, size, &r, stdout);
	} else {
		struct perf_lat r;
		if ((rc = perf_lat_stats(e, &r)))
			goto nomem;
		perf_report_lat(e, size, &r, stdout);
	}
	return 0;
nomem:
	fprintf(stderr, "kinet-perf: %s: statistics: %s\n", name, kinet_strerror(rc));
	return 1;
}

int main(int argc, char **argv)
{
	struct perf_opts o;
	int rc = parse_args(argc, argv, &o);
	if (rc)
		return rc;
	const struct perf_executor *x = executors[0];
	for (size_t i = 0; i < NEXEC; i++)
		if (!strcmp(executors[i]->name, o.executor))
			x = executors[i];
	if (o.server || o.pair || o.peer) /* across processes: remote.c */
		return perf_remote_main(&o, x);

	struct perf_env e;
	const char *what = "setup";
	uint64_t first = o.size, last = o.size;
	if (o.sweep) {
		for (first = 1; first < o.min_size; first <<= 1)
			;
		for (last = first; last * 2 <= o.max_size; last <<= 1)
			;
	}
	if ((rc = perf_env_open(&e, &o, &what)) || (rc = perf_env_buffers(&e, last, &what))) {
		fprintf(stderr, "kinet-perf: %s: %s: %s\n", o.test->name, what, kinet_strerror(rc));
		perf_env_close(&e);
		return 1;
	}
	perf_report_header(&e, stdout);
	int failed = 0;
	for (uint64_t s = first; s <= last && !failed; s <<= 1)
		failed = run_size(&e, x, s);
	if (!failed)
		perf_report_footer(&e, stdout);
	if (x->close)
		x->close(&e);
	perf_env_close(&e);
	return failed ? 1 : 0;
}

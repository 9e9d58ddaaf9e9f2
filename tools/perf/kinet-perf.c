/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-perf - perftest-style benchmarks of the kinet data path.
 *
 *   kinet-perf TEST [options]              the server (as perftest's, no host)
 *   kinet-perf TEST [options] HOST         the client
 *   kinet-perf TEST --pair [options]       both, on this machine
 *   kinet-perf TEST --loopback [options]   both ends in this process
 *   (kinet-perf -h for the options: perftest's, with perftest's meanings,
 *   and kinet-perf's own)
 *
 * How the tool is cut, and where it is meant to grow
 *
 *   1. Command line and reporting (this file, report.c). Options become a
 *      struct perf_opts; results are printed with perftest's columns or as
 *      JSON lines. Nothing here knows how a message is posted.
 *
 *   2. The QP pair (setup.c, struct perf_env). Opens a context of the
 *      chosen backend (--backend, KINET_BACKEND: soft or mlx5), creates and
 *      connects the QPs, registers both sides' buffers, fills them with
 *      random contents and builds one struct perf_job per thread; after a
 *      run it checks the data. Both ends are in this process (a local pair)
 *      with --loopback (and for memcpy_bw); otherwise remote.c
 *      creates only this process's side, meets the peer through the
 *      bootstrap (kinet/boot.h), exchanges QP and memory descriptors
 *      (kinet/net.h) and fills the same jobs with tqp = NULL; the server
 *      runs the target's work (the replies of write_lat and send_lat, the
 *      receives of send_bw and send_lat) as PERF_ROLE_TARGET jobs, and each
 *      side checks the data it holds.
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
 *      back for the data check), in one process and across processes (there
 *      its gpu_alloc / gpu_copy hooks give remote.c a side's payload in GPU
 *      memory, and a cuda server runs the client's launch).
 *      resolve_executor() below turns the options into the launch shape and
 *      the QP grouping (opts.qp_group, setup.c) and refuses combinations
 *      that make no sense.
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
#include <strings.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
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
	{"send_lat", PERF_SEND_LAT, PERF_LAT, PERF_F_DEVICE | PERF_F_PINGPONG | PERF_F_RECV,
	 "Send Latency Test", "SEND ping-pong latency (half round trip)"},
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
		"usage: kinet-perf TEST [options]              the server: waits for a client\n"
		"       kinet-perf TEST [options] HOST[:PORT]  the client of the server on HOST\n"
		"       kinet-perf TEST --pair [options]       both, on this machine\n"
		"       kinet-perf TEST --loopback [options]   both ends in this one process\n"
		"\n"
		"Benchmarks of the kinet data path, perftest's command lines and columns:\n"
		"device-API code run by GPU threads (the cuda executor) or CPU threads (the\n"
		"host executor) over the software NIC or a ConnectX (--backend).\n"
		"\n"
		"Tests:\n");
	for (size_t i = 0; i < NTESTS; i++)
		fprintf(f, "  %-11s %s\n", tests[i].name, tests[i].desc);
	fprintf(f,
		"\n"
		"Note: -q and -t have perftest's meanings (number of QPs, tx depth); the\n"
		"initiator threads are --threads and the outstanding WQEs also --qdepth.\n"
		"\n"
		"perftest's options:\n"
		"  -s, --size=BYTES       message size (default 65536 for bandwidth, 2 for\n"
		"                         latency, always 8 for atomics); K, M, G suffixes\n"
		"  -a, --all              sweep sizes 2, 4, ... up to --max-size (default 8M)\n"
		"  -n, --iters=N          timed iterations per size and thread (default 5000\n"
		"                         for bandwidth, 1000 for latency)\n"
		"  -D, --duration=SECONDS a time-bounded run instead of -n iterations: each\n"
		"                         thread posts for SECONDS after the warm-up; counts\n"
		"                         only (no BW peak; latency: t_avg and tps), as perftest;\n"
		"                         not with -a or -n\n"
		"  -q, --qp=N             number of QPs (default: one per thread); the threads\n"
		"                         (default N) share them evenly (KN_SHARE_GPU)\n"
		"  -t, --tx-depth=N       outstanding WQEs per thread, the post window of the\n"
		"                         bandwidth tests (default 128); also --qdepth\n"
		"  -I, --inline_size=N    writes of at most N bytes are carried in the WQE\n"
		"                         (write_bw, write_lat, put_bw; N <= 28; default 0)\n"
		"  -c, --connection=RC    transport type: RC only (kinet QPs are RC)\n"
		"  -d, --ib-dev=DEV       RDMA device (mlx5 backend; default the first usable)\n"
		"  -i, --ib-port=PORT     port of the device (mlx5; default the first active)\n"
		"  -x, --gid-index=N      GID index (mlx5 RoCE; default picked by\n"
		"                         KINET_MLX5_ADDR_FAMILY)\n"
		"  -m, --mtu=MTU          path MTU asked for (256 to 4096, mlx5): accepted and\n"
		"                         shown; kinet connects with the ports' active MTU\n"
		"  -F, --CPU-freq         accepted: kinet-perf makes no CPU-frequency check\n"
		"      --report_gbits     bandwidth in Gb/s (10^9 bits) instead of MB/s\n"
		"      --out_json         also write the results as JSON Lines into a file\n"
		"      --out_json_file=F  that file (default kinet_perf_out.json; implies\n"
		"                         --out_json)\n"
		"  -p, --port=PORT        the server's TCP port (default 18515; 0 on a server:\n"
		"                         any free port, printed)\n"
		"  -h, --help             this text;  -V, --version  the version\n"
		"\n"
		"kinet-perf's options:\n"
		"      --backend=NAME     auto, soft (the software NIC) or mlx5 (a ConnectX\n"
		"                         through rdma-core); default KINET_BACKEND, else auto\n"
		"      --loopback         both ends in this process (a local QP pair), no peer\n"
		"      --pair[=threads]   a server and a client on this machine, one command;\n"
		"                         =threads runs the two in one process on two threads\n"
		"                         (for the emulated rdma-core, which reaches no other\n"
		"                         process)\n"
		"      --server           the server (the default without HOST)\n"
		"      --threads=N        initiator threads (default 1, or -q): CPU threads\n"
		"                         (1 to 256) or GPU threads (1 to 65536, see --ctas)\n"
		"      --qdepth=N         the same as -t\n"
		"      --min-size=BYTES   first size of the sweep (default 2)\n"
		"      --max-size=BYTES   last size of the sweep (default 8M); K, M, G suffixes\n"
		"      --warmup=N         untimed iterations before each size (default 16)\n"
		"      --shared[=gpu|cta] one QP shared by all threads (gpu, the default:\n"
		"                         KN_SHARE_GPU, as -q 1) or, cuda executor, one QP per\n"
		"                         CTA shared by its threads (cta: KN_SHARE_CTA); without\n"
		"                         it one QP per thread (warp scope: per warp, block\n"
		"                         scope: per CTA)\n"
		"      --db-mode=MODE     doorbell mode: gpu, blueflame, cpu (default: auto)\n"
		"      --engine-threads=N software NIC engine threads (default:\n"
		"                         KINET_ENGINE_THREADS)\n"
		"      --executor=NAME    who runs the device code: cuda (GPU threads, one per\n"
		"                         job; the default when built with CUDA and a GPU is\n"
		"                         usable, in one process, or when a cuda option is\n"
		"                         given) or host (CPU threads; the default otherwise)\n"
		"      --ctas=N           cuda: CTAs of the launch (default: enough for --threads)\n"
		"      --cta-threads=N    cuda: threads per CTA, 1 to 1024 (default 1 at thread\n"
		"                         scope, 32 at warp and block scope); with --ctas,\n"
		"                         --threads is --ctas x --cta-threads (give one or agree)\n"
		"      --scope=SCOPE      cuda: who posts: thread (each thread alone, the\n"
		"                         default), warp (the 32 lanes in one post, one\n"
		"                         doorbell) or block (the whole CTA in one post);\n"
		"                         send_bw and send_lat are thread scope only\n"
		"      --mem=host|gpu     cuda: payload buffers in pinned host memory (default)\n"
		"                         or in GPU memory (cudaMalloc, registered with the\n"
		"                         NIC; copied back for the data check)\n"
		"      --poll=spin|yield  host executor, while a thread waits: spin with the\n"
		"                         device layer's pause (default, as a GPU thread does)\n"
		"                         or give the CPU away (sched_yield) between all polls\n"
		"      --json             print one JSON object per line (JSON Lines) on\n"
		"                         stdout, one per message size, and nothing else\n"
		"      --secret=STRING    job secret, the same on both sides (default:\n"
		"                         KINET_BOOT_SECRET; --pair makes a fresh one)\n"
		"      --timeout=SECONDS  bound on joining (a client retries until then, a\n"
		"                         line per attempt) and on each exchange, including\n"
		"                         the server's wait during one size's run (default\n"
		"                         300, or KINET_BOOT_TIMEOUT_MS; at least -D + 60)\n"
		"      --corrupt          (testing the tool) flip one destination byte after\n"
		"                         the run: the data check must fail\n"
		"\n"
		"Across processes (every test but memcpy_bw, which runs in one process): the\n"
		"client initiates; its run options (-s -a -n -D --warmup --threads -q -t -I\n"
		"--shared, and the cuda launch: --scope --ctas --cta-threads) apply to both\n"
		"sides, and a server given some of them refuses a client whose values\n"
		"differ. Both sides need the same --backend. Each side has its own\n"
		"--executor (host unless a cuda option is given) and --mem: --mem gpu puts\n"
		"that side's payload in GPU memory, which the peer's messages reach.\n"
		"\n"
		"Bandwidth: BW average = bytes / (last completion - first post), all threads\n"
		"together; BW peak = best rate over max(q*threads, messages/16) consecutive\n"
		"messages; MB = 2^20 bytes, Gb = 10^9 bits; MsgRate in 10^6 messages per\n"
		"second. Latency in microseconds; t_typical is the median; write_lat and\n"
		"send_lat report half the round trip of a ping-pong. Every run checks its\n"
		"data (random contents) and fails if a byte differs.\n"
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

/* The QP grouping both executors share: SQ size and the single receive
 * consumer of send_bw and send_lat. 0, or 2 after a message. */
static int qp_checks(const struct perf_opts *o)
{
	if ((uint64_t)o->qp_group * o->qdepth > KPERF_MAX_SQ)
		return usage_error("%s", "threads per QP x tx depth (-t) above the largest SQ "
					 "(32768): lower -t or use more QPs (-q)");
	if ((o->test->flags & PERF_F_RECV) && o->qp_group > 1)
		return usage_error("%s on a shared QP takes one thread: the receive queue has a "
				   "single consumer",
				   o->test->name);
	return 0;
}

#if KINET_HAVE_CUDA
/* perf_cuda_usable() in a child process, so that this one stays without
 * CUDA (and can fork sides that use it); 0 when the child cannot tell. */
static int cuda_usable_in_child(void)
{
	fflush(NULL);
	pid_t c = fork();
	if (c < 0)
		return perf_cuda_usable(); /* no fork: the sides cannot fork either */
	if (c == 0)
		_exit(perf_cuda_usable() ? 0 : 1);
	int st = 0;
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
#endif

/* After the options: picks the executor (cuda when built in and a GPU is
 * usable, or when a GPU-only option asks for it; host otherwise, and for
 * memcpy_bw, --poll, --pair=threads and runs across processes without a
 * GPU-only option), works out the GPU launch (-t, --ctas, --cta-threads)
 * and the QP grouping of the scope and --shared, and refuses combinations
 * that make no sense. 0, or 2 after a message. */
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
	} else if ((pt->flags & PERF_F_NO_NIC) || g->poll || o->pair_threads ||
		   ((o->server || o->pair || o->peer) && !gpu_opt)) {
		o->executor = "host"; /* a CPU baseline, a host-only option, or across
				       * processes without a GPU-only option (each
				       * side picks its own executor) */
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
			return usage_error("%s", "the host executor runs 1 to 256 threads (--threads)");
		if (fallback)
			fprintf(stderr, "kinet-perf: %s: running on the host executor\n", fallback);
		/* QPs: one per thread, -q of them shared evenly, or one (--shared) */
		if (o->nqp && o->threads % o->nqp)
			return usage_error("%s", "--threads must be a multiple of -q (the threads "
						 "share the QPs evenly)");
		o->qp_group = o->shared ? o->threads : o->nqp ? o->threads / o->nqp : 1;
		o->qp_share = o->qp_group > 1 ? KN_SHARE_GPU : KN_SHARE_EXCLUSIVE;
		return qp_checks(o);
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
	if (scope != PERF_SCOPE_THREAD && (pt->flags & PERF_F_RECV))
		return usage_error("%s is thread scope only: a receive queue has a single "
				   "consumer",
				   pt->name);
	if (scope != PERF_SCOPE_THREAD && (o->nqp || o->duration_s || o->inline_size))
		return usage_error("--scope %s: -q, -D and -I are for thread scope (a warp or a "
				   "CTA posts on its own QP, for -n iterations, without inline data)",
				   sname);
	if (o->nqp && o->shared_cta)
		return usage_error("%s", "-q and --shared=cta: give one");
	long n;
	if (g->ctas) {
		n = (long)o->ctas * tpc;
		if (g->threads && o->threads != n)
			return usage_error("%s", "--threads differs from --ctas x --cta-threads (give one "
						 "or make them agree)");
	} else {
		n = g->threads ? o->threads : tpc;
		if (scope != PERF_SCOPE_THREAD && n % tpc)
			return usage_error("--scope %s: --threads must be whole CTAs (a multiple of "
					   "--cta-threads)",
					   sname);
		o->ctas = (int)((n + tpc - 1) / tpc);
	}
	if (n > KPERF_MAX_GPU_THREADS)
		return usage_error("%s", "more than 65536 GPU threads (--ctas x --cta-threads)");
	if (!o->loopback && n > KPERF_MAX_THREADS) /* remote.c's records carry 256 */
		return usage_error("%s", "across processes a side runs at most 256 threads "
					 "(--threads, --ctas x --cta-threads): use fewer, or "
					 "--loopback");
	o->threads = (int)n;
	o->cta_threads = tpc;
	/* QPs: one per posting agent, one per CTA (shared by its threads), or
	 * one for the whole grid */
	int group = scope == PERF_SCOPE_THREAD ? 1 : scope == PERF_SCOPE_WARP ? 32 : tpc;
	int share = KN_SHARE_EXCLUSIVE;
	if (o->nqp) {
		if (n % o->nqp)
			return usage_error("%s", "the GPU threads must be a multiple of -q (they "
						 "share the QPs evenly)");
		group = (int)(n / o->nqp);
		share = group > 1 ? KN_SHARE_GPU : KN_SHARE_EXCLUSIVE;
	} else if (o->shared) {
		group = (int)n;
		share = KN_SHARE_GPU;
	} else if (o->shared_cta) {
		if (scope == PERF_SCOPE_BLOCK)
			return usage_error("%s", "--shared=cta at block scope: the CTA is the only "
						 "poster of its QP already (the default)");
		group = tpc;
		share = KN_SHARE_CTA;
	}
	o->qp_group = group;
	o->qp_share = share;
	int rc = qp_checks(o);
	if (rc)
		return rc;
	if (!o->duration_s && (uint64_t)n * o->iters > (1ull << 26))
		return usage_error("%s", "threads x iterations above 2^26 (samples would not fit)");
#if KINET_HAVE_CUDA
	/* last: the shape refusals above need no GPU. --pair forks its two
	 * sides, and a child forked after its parent initialised CUDA cannot
	 * use the GPU: the parent asks a child of its own instead */
	if (!(o->pair && !o->pair_threads ? cuda_usable_in_child() : perf_cuda_usable()))
		return usage_error(g->executor ? "--executor %s needs a usable GPU, and there is "
						 "none here (no CUDA driver or device, or "
						 "KINET_NO_CUDA is set)"
					       : "%s needs the cuda executor, which needs a usable "
						 "GPU, and there is none here (no CUDA driver or "
						 "device, or KINET_NO_CUDA is set)",
				   g->executor ? o->executor : gpu_name);
#endif
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
	OPT_THREADS,
	OPT_QDEPTH,
	OPT_BACKEND,
	OPT_LOOPBACK,
	OPT_REPORT_GBITS,
	OPT_OUT_JSON,
	OPT_OUT_JSON_FILE,
};

#define KPERF_JSON_FILE "kinet_perf_out.json"

/* The command line as one string, for the JSON records (arguments with
 * spaces or quotes in single quotes); it lives as long as the process. */
static char *cmdline_buf;
static const char *join_args(int argc, char **argv)
{
	size_t n = 1;
	for (int i = 0; i < argc; i++)
		n += 4 * strlen(argv[i]) + 3;
	free(cmdline_buf);
	char *s = cmdline_buf = malloc(n), *p = s;
	if (!s)
		return "";
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool q = !*a || strpbrk(a, " \t'\"\\$") != NULL;
		if (i)
			*p++ = ' ';
		if (q)
			*p++ = '\'';
		for (; *a; a++) {
			if (*a == '\'' && q) {
				memcpy(p, "'\\''", 4);
				p += 4;
			} else {
				*p++ = *a;
			}
		}
		if (q)
			*p++ = '\'';
	}
	*p = 0;
	return s;
}

/* A backend's name (any case, as the tunable takes it): enum kinet_backend,
 * or -1. */
static int backend_from(const char *s)
{
	if (!s || !*s || !strcasecmp(s, "auto"))
		return KINET_BACKEND_AUTO;
	if (!strcasecmp(s, "soft"))
		return KINET_BACKEND_SOFT;
	if (!strcasecmp(s, "mlx5"))
		return KINET_BACKEND_MLX5;
	return -1;
}

static int parse_args(int argc, char **argv, struct perf_opts *o)
{
	static const struct option lopts[] = {
		{"size", required_argument, NULL, 's'},
		{"all", no_argument, NULL, 'a'},
		{"min-size", required_argument, NULL, OPT_MIN_SIZE},
		{"max-size", required_argument, NULL, OPT_MAX_SIZE},
		{"iters", required_argument, NULL, 'n'},
		{"duration", required_argument, NULL, 'D'},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"threads", required_argument, NULL, OPT_THREADS},
		{"qdepth", required_argument, NULL, OPT_QDEPTH},
		{"tx-depth", required_argument, NULL, 't'},
		{"qp", required_argument, NULL, 'q'},
		{"inline_size", required_argument, NULL, 'I'},
		{"connection", required_argument, NULL, 'c'},
		{"ib-dev", required_argument, NULL, 'd'},
		{"ib-port", required_argument, NULL, 'i'},
		{"gid-index", required_argument, NULL, 'x'},
		{"mtu", required_argument, NULL, 'm'},
		{"CPU-freq", no_argument, NULL, 'F'},
		{"report_gbits", no_argument, NULL, OPT_REPORT_GBITS},
		{"out_json", no_argument, NULL, OPT_OUT_JSON},
		{"out_json_file", required_argument, NULL, OPT_OUT_JSON_FILE},
		{"backend", required_argument, NULL, OPT_BACKEND},
		{"loopback", no_argument, NULL, OPT_LOOPBACK},
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
		{"pair", optional_argument, NULL, OPT_PAIR},
		{"port", required_argument, NULL, 'p'},
		{"secret", required_argument, NULL, OPT_SECRET},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	bool have_size = false, have_iters = false, have_warmup = false, have_qdepth = false;
	bool have_backend = false;
	struct exec_given gg = {false, false, false, false, false, false, false};
	const char *ib_port = NULL, *gid_index = NULL;
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
	o->gid_index = -1;
	o->cmdline = join_args(argc, argv);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:an:D:t:q:I:c:d:i:x:m:Fp:hV", lopts, NULL)) != -1) {
		/* run options given (a server takes the client's for the others) */
		switch (c) {
		case 's': case 'a': case OPT_MIN_SIZE: case OPT_MAX_SIZE:
			o->given |= PERF_GIVEN_SIZES;
			break;
		case 'n': o->given |= PERF_GIVEN_ITERS; break;
		case 'D': o->given |= PERF_GIVEN_DURATION; break;
		case OPT_WARMUP: o->given |= PERF_GIVEN_WARMUP; break;
		case OPT_THREADS: o->given |= PERF_GIVEN_THREADS; break;
		case 't': case OPT_QDEPTH: o->given |= PERF_GIVEN_QDEPTH; break;
		case 'q': o->given |= PERF_GIVEN_QPS; break;
		case 'I': o->given |= PERF_GIVEN_INLINE; break;
		case OPT_SHARED: o->given |= PERF_GIVEN_SHARED; break;
		case OPT_SCOPE: o->given |= PERF_GIVEN_SCOPE; break;
		case OPT_CTA_THREADS: o->given |= PERF_GIVEN_CTA_THREADS; break;
		case OPT_CTAS: o->given |= PERF_GIVEN_THREADS; break; /* CTAs x threads per CTA */
		default: break;
		}
		switch (c) {
		case OPT_SERVER:
			o->server = true;
			break;
		case OPT_PAIR:
			if (!optarg || !strcmp(optarg, "processes"))
				o->pair_threads = false;
			else if (!strcmp(optarg, "threads"))
				o->pair_threads = true;
			else
				return usage_error("bad --pair '%s' (processes, threads)", optarg);
			o->pair = true;
			break;
		case OPT_LOOPBACK:
			o->loopback = true;
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
		case 'D':
			if (parse_uint(optarg, 1, 86400, &v))
				return usage_error("bad duration '%s' (-D: 1 to 86400 seconds)", optarg);
			o->duration_s = (unsigned)v;
			break;
		case OPT_WARMUP:
			if (parse_uint(optarg, 0, 1000000000ull, &o->warmup))
				return usage_error("bad warm-up count '%s'", optarg);
			have_warmup = true;
			break;
		case OPT_THREADS:
			if (parse_uint(optarg, 1, KPERF_MAX_GPU_THREADS, &v))
				return usage_error("bad thread count '%s' (--threads: 1 to 256 CPU "
						   "threads, 1 to 65536 GPU threads)",
						   optarg);
			o->threads = (int)v;
			gg.threads = true;
			break;
		case 't':
		case OPT_QDEPTH:
			if (parse_uint(optarg, 1, KPERF_MAX_SQ, &v))
				return usage_error("bad tx depth '%s' (-t, --qdepth: 1 to 32768 "
						   "outstanding WQEs; the threads are --threads)",
						   optarg);
			o->qdepth = (uint32_t)v;
			have_qdepth = true;
			break;
		case 'q':
			if (parse_uint(optarg, 1, KPERF_MAX_GPU_THREADS, &v))
				return usage_error("bad number of QPs '%s' (-q: 1 to 65536; the "
						   "outstanding WQEs are -t or --qdepth)",
						   optarg);
			o->nqp = (int)v;
			break;
		case 'I':
			if (parse_uint(optarg, 0, KN_MAX_INLINE_WRITE, &v))
				return usage_error("bad inline size '%s' (-I: 0 to 28 bytes, what one "
						   "WQE carries)",
						   optarg);
			o->inline_size = (uint32_t)v;
			break;
		case 'c':
			if (strcmp(optarg, "RC") && strcmp(optarg, "rc"))
				return usage_error("-c %s: kinet QPs are reliable connected only (-c RC)",
						   optarg);
			break;
		case 'd':
			if (!*optarg)
				return usage_error("%s", "-d needs a device name");
			o->device = optarg;
			break;
		case 'i':
			if (parse_uint(optarg, 1, 255, &v))
				return usage_error("bad port of the device '%s' (-i: 1 to 255)", optarg);
			o->ib_port = (int)v;
			ib_port = optarg;
			break;
		case 'x':
			if (parse_uint(optarg, 0, 255, &v))
				return usage_error("bad GID index '%s' (-x: 0 to 255)", optarg);
			o->gid_index = (int)v;
			gid_index = optarg;
			break;
		case 'm':
			if (parse_uint(optarg, 256, 4096, &v) || (v & (v - 1)))
				return usage_error("bad MTU '%s' (-m: 256, 512, 1024, 2048 or 4096)",
						   optarg);
			o->mtu = (int)v;
			break;
		case 'F':
			o->cpu_freq = true;
			break;
		case OPT_REPORT_GBITS:
			o->report_gbits = true;
			break;
		case OPT_OUT_JSON:
			if (!o->json_file)
				o->json_file = KPERF_JSON_FILE;
			break;
		case OPT_OUT_JSON_FILE:
			if (!*optarg)
				return usage_error("%s", "--out_json_file needs a file name");
			o->json_file = optarg;
			break;
		case OPT_BACKEND:
			if ((o->backend = backend_from(optarg)) < 0)
				return usage_error("bad --backend '%s' (auto, soft, mlx5)", optarg);
			have_backend = true;
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
		case 'V':
			printf("kinet-perf (kinet %d.%d)\n", KINET_VERSION_MAJOR, KINET_VERSION_MINOR);
			exit(0);
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("%s", "which test? (write_bw, write_lat, read_bw, read_lat, "
					  "atomic_bw, atomic_lat, send_bw, send_lat, put_bw, "
					  "memcpy_bw)");
	for (size_t i = 0; i < NTESTS; i++)
		if (!strcmp(argv[optind], tests[i].name))
			o->test = &tests[i];
	if (!o->test)
		return usage_error("unknown test '%s'", argv[optind]);
	if (optind + 1 < argc)
		o->peer = argv[optind + 1];
	if (optind + 2 < argc)
		return usage_error("unexpected argument '%s'", argv[optind + 2]);

	/* the device options reach the mlx5 backend through its tunables, set
	 * before anything reads them */
	if (ib_port)
		setenv("KINET_MLX5_PORT", ib_port, 1);
	if (gid_index)
		setenv("KINET_MLX5_GID_INDEX", gid_index, 1);
	if (!have_backend) { /* the default of --backend: the variable, as given */
		const char *env = getenv("KINET_BACKEND");
		if ((o->backend = backend_from(env)) < 0)
			return usage_error("KINET_BACKEND=%s: auto, soft or mlx5", env);
	}
	const struct perf_test *pt = o->test;
	bool mlx5_opt = o->device || o->ib_port || o->gid_index >= 0 || o->mtu;
	if (o->backend == KINET_BACKEND_SOFT && mlx5_opt)
		return usage_error("%s", "-d, -i, -x and -m apply to an RDMA device (the mlx5 "
					 "backend), not to the software NIC (--backend soft)");
	if (o->backend == KINET_BACKEND_MLX5 && o->engine_threads)
		return usage_error("%s", "--engine-threads applies to the software NIC, not to "
					 "--backend mlx5");

	/* who is where: no HOST is the server, as in perftest; memcpy_bw has no
	 * peer and runs in this process */
	int modes = (o->peer != NULL) + o->server + o->pair + o->loopback;
	if (modes > 1)
		return usage_error("%s", "use one of --server, --pair, --loopback and a HOST "
					 "operand (the client), not two");
	if (pt->flags & PERF_F_NO_NIC) {
		if (modes && !o->loopback)
			return usage_error("%s has no peer: it runs in one process", pt->name);
		o->loopback = true;
	} else if (!modes) {
		o->server = true;
	}
	if (o->loopback && (o->port >= 0 || o->secret || o->timeout_ms))
		return usage_error("%s", "-p, --secret and --timeout go with a server, a client "
					 "(HOST) or --pair, not with --loopback");
	if (o->pair && o->port >= 0)
		return usage_error("%s", "--pair picks a free port itself (no -p)");
	if (o->duration_s && have_iters)
		return usage_error("%s", "-D and -n: a run is bounded by time or by iterations, "
					 "give one");
	if (o->duration_s && o->sweep)
		return usage_error("%s", "-D runs one message size (as perftest): no -a");
	if (o->inline_size && pt->id != PERF_WRITE_BW && pt->id != PERF_WRITE_LAT &&
	    pt->id != PERF_PUT_BW)
		return usage_error("-I: %s has no inline form (writes only: write_bw, write_lat, "
				   "put_bw; -I 0 turns it off)",
				   pt->name);
	if (o->nqp && o->shared && o->nqp > 1)
		return usage_error("%s", "--shared is one QP: not with -q above 1");
	if (o->shared)
		o->nqp = 0;
	if (o->nqp && !gg.threads) /* one thread per QP, as perftest's QPs */
		o->threads = o->nqp, gg.threads = true;
	if (o->nqp > o->threads)
		return usage_error("%s", "more QPs (-q) than threads (--threads): each thread "
					 "drives one QP");
	if (!have_iters)
		o->iters = pt->kind == PERF_BW ? 5000 : 1000;
	if (!have_warmup)
		o->warmup = 16;
	(void)have_qdepth;
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
		return usage_error("%s", "--shared: threads x tx depth above the largest SQ (32768)");
	if (o->shared && (pt->flags & PERF_F_RECV) && o->threads > 1)
		return usage_error("%s --shared takes one thread: the receive queue has a "
				   "single consumer",
				   pt->name);
	if (!o->duration_s && (uint64_t)o->threads * o->iters > (1ull << 26))
		return usage_error("%s", "threads x iterations above 2^26 (samples would not fit)");
	if (o->pair_threads && ((gg.executor && strcmp(o->executor, "host")) || gg.ctas ||
				gg.cta_threads || gg.scope || gg.mem || o->shared_cta))
		return usage_error("%s", "--pair=threads runs on the host executor (no cuda "
					 "executor options)");
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
	/* what every JSON record says about the run */
	time_t now = time(NULL);
	struct tm tm;
	if (gmtime_r(&now, &tm))
		strftime(o.date, sizeof(o.date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (gethostname(o.host, sizeof(o.host)))
		snprintf(o.host, sizeof(o.host), "?");
	o.host[sizeof(o.host) - 1] = 0;
	if (o.json_file && !(o.json_out = fopen(o.json_file, "w"))) {
		fprintf(stderr, "kinet-perf: --out_json_file %s: %s\n", o.json_file, strerror(errno));
		return 1;
	}
	if (!o.loopback) { /* across processes: remote.c */
		rc = perf_remote_main(&o, x);
		if (o.json_out)
			fclose(o.json_out);
		return rc;
	}

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
	if (o.json_out && fclose(o.json_out)) {
		fprintf(stderr, "kinet-perf: --out_json_file %s: %s\n", o.json_file, strerror(errno));
		failed = 1;
	}
	return failed ? 1 : 0;
}

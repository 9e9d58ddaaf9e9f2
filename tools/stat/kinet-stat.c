/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-stat - the counters of every context, QP and registration cache of
 * a running process that publishes them (KINET_STATS=1), as ethtool -S
 * shows a NIC's: read from its shared-memory segment /dev/shm/kinet-PID
 * (layout: src/core/stats_fmt.h), without stopping or slowing it.
 *
 *   kinet-stat [-a] [-i MS [-c N]] PID
 *
 * -a prints every counter (default: those that are not 0); -i repeats
 * every MS milliseconds, printing what changed since the last snapshot
 * (per second), -c stops after N snapshots. Exit status: 0, 1 (no segment,
 * or its process is gone), 2 (usage).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/stats_fmt.h"

static const char *QP_STATE[] = {"RESET", "INIT", "RTR", "RTS", "?", "?", "ERR"};

static void usage(void)
{
	fprintf(stderr, "usage: kinet-stat [-a] [-i MS [-c N]] PID\n");
	exit(2);
}

static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A consistent copy of the segment: 0, or -1 (not a kinet segment). */
static int snapshot(const uint8_t *seg, size_t size, uint8_t *out)
{
	const struct kinet_stats_hdr *h = (const void *)seg;
	for (int tries = 0; tries < 1000; tries++) {
		uint64_t s0 = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);
		if (s0 & 1) {
			usleep(100);
			continue;
		}
		memcpy(out, seg, size);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&h->seq, __ATOMIC_RELAXED) == s0)
			return 0;
	}
	return -1;
}

static const char *name_of(const uint8_t *snap, uint32_t i)
{
	const struct kinet_stats_hdr *h = (const void *)snap;
	return (const char *)snap + h->names_off + (size_t)i * KINET_STATS_NAME;
}

/* Prints one snapshot; prev (or NULL) for the rates. */
static void print(const uint8_t *snap, const uint8_t *prev, double dt, int all)
{
	const struct kinet_stats_hdr *h = (const void *)snap;
	for (uint32_t r = 0; r < h->nrec; r++) {
		const struct kinet_stats_rec *rec =
			(const void *)(snap + h->rec_off + (size_t)r * h->rec_size);
		const uint64_t *v = (const uint64_t *)(rec + 1);
		uint32_t first, n;
		if (rec->kind == KINET_STATS_CTX) {
			printf("ctx%u (%s):\n", rec->ctx, rec->label);
			first = 0;
			n = h->nctx_fields;
		} else if (rec->kind == KINET_STATS_QP) {
			int st = rec->state;
			printf("ctx%u qp 0x%x (%s, %s):\n", rec->ctx, rec->id,
			       st >= 0 && st <= 6 ? QP_STATE[st] : "?", rec->label);
			first = h->nctx_fields;
			n = h->nqp_fields;
		} else if (rec->kind == KINET_STATS_CACHE) {
			printf("ctx%u mr_cache%u (monitor %s):\n", rec->ctx, rec->id, rec->label);
			first = h->nctx_fields + h->nqp_fields;
			n = h->ncache_fields;
		} else {
			continue;
		}
		/* the same record in the previous snapshot, for rates */
		const uint64_t *pv = NULL;
		if (prev) {
			const struct kinet_stats_hdr *ph = (const void *)prev;
			for (uint32_t k = 0; k < ph->nrec && !pv; k++) {
				const struct kinet_stats_rec *q =
					(const void *)(prev + ph->rec_off + (size_t)k * ph->rec_size);
				if (q->kind == rec->kind && q->ctx == rec->ctx && q->id == rec->id)
					pv = (const uint64_t *)(q + 1);
			}
		}
		for (uint32_t i = 0; i < n; i++) {
			if (!all && !v[i])
				continue;
			if (pv && dt > 0)
				printf("     %s: %" PRIu64 " (%.0f/s)\n", name_of(snap, first + i), v[i],
				       (double)(v[i] - pv[i]) / dt);
			else
				printf("     %s: %" PRIu64 "\n", name_of(snap, first + i), v[i]);
		}
	}
	if (h->dropped)
		printf("(%u QPs not published: KINET_STATS_MAX_QPS)\n", h->dropped);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int all = 0, count = 1;
	long interval = 0;
	int opt;
	while ((opt = getopt(argc, argv, "ai:c:h")) != -1) {
		switch (opt) {
		case 'a': all = 1; break;
		case 'i':
			interval = strtol(optarg, NULL, 10);
			if (interval <= 0)
				usage();
			count = 0;
			break;
		case 'c':
			count = (int)strtol(optarg, NULL, 10);
			if (count <= 0)
				usage();
			break;
		default: usage();
		}
	}
	if (optind != argc - 1)
		usage();
	char *end;
	long pid = strtol(argv[optind], &end, 10);
	if (*end || pid <= 0)
		usage();
	char path[64];
	snprintf(path, sizeof(path), KINET_STATS_PATH, (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr,
			"kinet-stat: %s: %s (is process %ld running with KINET_STATS=1?)\n", path,
			strerror(errno), pid);
		return 1;
	}
	struct stat sb;
	if (fstat(fd, &sb) || (size_t)sb.st_size < sizeof(struct kinet_stats_hdr)) {
		fprintf(stderr, "kinet-stat: %s: not a kinet statistics segment\n", path);
		return 1;
	}
	size_t size = (size_t)sb.st_size;
	const uint8_t *seg = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (seg == MAP_FAILED) {
		fprintf(stderr, "kinet-stat: %s: %s\n", path, strerror(errno));
		return 1;
	}
	const struct kinet_stats_hdr *h = (const void *)seg;
	if (memcmp(h->magic, KINET_STATS_MAGIC, sizeof(KINET_STATS_MAGIC)) ||
	    h->version != KINET_STATS_VERSION || h->size != size) {
		fprintf(stderr, "kinet-stat: %s: not a version %d kinet statistics segment\n", path,
			KINET_STATS_VERSION);
		return 1;
	}
	if (kill((pid_t)pid, 0) && errno == ESRCH) {
		fprintf(stderr, "kinet-stat: process %ld is gone (%s is left from it)\n", pid, path);
		return 1;
	}
	uint8_t *snap = malloc(size), *prev = malloc(size);
	if (!snap || !prev)
		return 1;
	uint64_t prev_ns = 0;
	for (int k = 0; count == 0 || k < count; k++) {
		if (snapshot(seg, size, snap)) {
			fprintf(stderr, "kinet-stat: no consistent snapshot (the writer is stuck?)\n");
			return 1;
		}
		const struct kinet_stats_hdr *sh = (const void *)snap;
		uint64_t now = real_ns();
		printf("process %d, snapshot %.3f s old, refreshed every %u ms\n", sh->pid,
		       sh->updated_ns && now > sh->updated_ns ? (double)(now - sh->updated_ns) / 1e9
							     : 0.0,
		       sh->interval_ms);
		double dt = prev_ns ? (double)(sh->updated_ns - prev_ns) / 1e9 : 0;
		print(snap, prev_ns ? prev : NULL, dt, all);
		memcpy(prev, snap, size);
		prev_ns = sh->updated_ns;
		if (count == 0 || k + 1 < count) {
			struct timespec ts = {interval / 1000, (interval % 1000) * 1000000L};
			nanosleep(&ts, NULL);
			if (kill((pid_t)pid, 0) && errno == ESRCH) {
				printf("process %ld exited\n", pid);
				return 0;
			}
		}
	}
	free(snap);
	free(prev);
	return 0;
}

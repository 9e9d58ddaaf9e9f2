/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * boot_peer - one rank of a bootstrap job described by the environment
 * (kinet_boot_init_env), for the net tests: launched by mpirun, or with
 * KINET_BOOT_* set. Does allgathers of random payloads, verifies every
 * rank's bytes, a barrier, and exits 0 on success.
 *
 *   boot_peer TRANSPORT [SIZE [MAPS]]   TRANSPORT: tcp, mpi, pmix, single or any;
 *                SIZE: the job size to expect (0: any); MAPS: "mpi-mapped"
 *                "no-mpi-mapped" or "pmix-mapped", what /proc/self/maps must
 *                show at the end (libmpi and the MPI module mapped, or
 *                neither; pmix-mapped: neither, and the PMIx module mapped)
 */
#include <kinet/boot.h>
#include <kinet/kinet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../util/testutil.h"

/* Whether a library whose name contains `name` is mapped in this process. */
static int mapped(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int found = 0;
	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

static uint64_t seed_of(int rank, int round)
{
	return 0x5eed0000ull + (uint64_t)rank * 1000 + (uint64_t)round;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s tcp|mpi|pmix|single|any [size [mpi-mapped|no-mpi-mapped|pmix-mapped]]\n",
			argv[0]);
		return 2;
	}
	int want_size = argc > 2 ? atoi(argv[2]) : 0;
	/* a rank that comes late (the PMIx timeout test): the one whose
	 * PMIX_RANK is BOOT_PEER_STALL_PMIX_RANK sleeps BOOT_PEER_STALL_MS first */
	const char *stall = getenv("BOOT_PEER_STALL_PMIX_RANK"), *me = getenv("PMIX_RANK");
	if (stall && me && !strcmp(stall, me)) {
		const char *ms = getenv("BOOT_PEER_STALL_MS");
		struct timespec ts = {0, 0};
		long v = ms ? atol(ms) : 0;
		ts.tv_sec = v / 1000;
		ts.tv_nsec = (v % 1000) * 1000000L;
		nanosleep(&ts, NULL);
	}
	kinet_boot *b = NULL;
	int rc = kinet_boot_init_env(&b);
	if (rc) {
		fprintf(stderr, "boot_peer: kinet_boot_init_env: %s\n", kinet_strerror(rc));
		return 1;
	}
	int rank = kinet_boot_rank(b), size = kinet_boot_size(b);
	const char *tr = kinet_boot_transport(b);
	if (strcmp(argv[1], "any") && strcmp(argv[1], tr)) {
		fprintf(stderr, "boot_peer: rank %d: transport %s, expected %s\n", rank, tr,
			argv[1]);
		kinet_boot_close(b);
		return 1;
	}
	if (want_size && size != want_size) {
		fprintf(stderr, "boot_peer: rank %d: size %d, expected %d\n", rank, size, want_size);
		kinet_boot_close(b);
		return 1;
	}
	static const size_t lens[] = {1, 13, 4096, 70000};
	int bad = 0;
	for (int round = 0; round < 4 && !bad; round++) {
		size_t len = lens[round];
		uint8_t *mine = malloc(len), *all = malloc(len * (size_t)size),
			*want = malloc(len);
		tu_fill_random(mine, len, seed_of(rank, round));
		memset(all, 0, len * (size_t)size);
		rc = kinet_boot_allgather(b, mine, all, len);
		if (rc) {
			fprintf(stderr, "boot_peer: rank %d: allgather: %s\n", rank,
				kinet_strerror(rc));
			bad = 1;
		}
		for (int r = 0; r < size && !bad; r++) {
			tu_fill_random(want, len, seed_of(r, round));
			if (memcmp(all + (size_t)r * len, want, len)) {
				fprintf(stderr, "boot_peer: rank %d: rank %d's bytes differ (len %zu)\n",
					rank, r, len);
				bad = 1;
			}
		}
		free(mine);
		free(all);
		free(want);
	}
	if (!bad && (rc = kinet_boot_barrier(b))) {
		fprintf(stderr, "boot_peer: rank %d: barrier: %s\n", rank, kinet_strerror(rc));
		bad = 1;
	}
	const char *maps = argc > 3 ? argv[3] : NULL;
	if (!bad && maps) {
		int want = !strcmp(maps, "mpi-mapped");
		int wantp = !strcmp(maps, "pmix-mapped");
		int mpi = mapped("/libmpi.so"), mod = mapped("/libkinet_mpi.so");
		int pmod = mapped("/libkinet_pmix.so");
		if (mpi != want || mod != want || (wantp && !pmod)) {
			fprintf(stderr, "boot_peer: rank %d: libmpi %s, libkinet_mpi %s, "
				"libkinet_pmix %s (expected %s)\n", rank,
				mpi ? "mapped" : "not mapped", mod ? "mapped" : "not mapped",
				pmod ? "mapped" : "not mapped", maps);
			bad = 1;
		}
	}
	if (!bad)
		printf("boot_peer: rank %d of %d ok over %s\n", rank, size, tr);
	kinet_boot_close(b);
	return bad;
}

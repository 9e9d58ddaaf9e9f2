/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * boot_hello - the smallest multi-process kinet program: every process joins
 * the job through the bootstrap, says who it is with an allgather, and waits
 * for the others at a barrier. Rank 0 prints the roll call.
 *
 * Two processes on one machine (see docs/multiprocess.md):
 *   export KINET_BOOT_ADDR=127.0.0.1:7000 KINET_BOOT_SIZE=2 KINET_BOOT_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' ')
 *   KINET_BOOT_RANK=0 ./boot_hello & KINET_BOOT_RANK=1 ./boot_hello; wait
 * Under Open MPI:
 *   mpirun -np 2 ./boot_hello
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <kinet/boot.h>
#include <kinet/kinet.h>

struct hello {
	int32_t rank;
	int32_t pid;
	char host[56];
};

int main(void)
{
	kinet_boot *b;
	int rc = kinet_boot_init_env(&b);
	if (rc) {
		fprintf(stderr, "boot_hello: cannot join the job: %s\n", kinet_strerror(rc));
		return 1;
	}
	int rank = kinet_boot_rank(b), size = kinet_boot_size(b);

	struct hello me = {.rank = rank, .pid = (int32_t)getpid()};
	if (gethostname(me.host, sizeof(me.host) - 1))
		snprintf(me.host, sizeof(me.host), "?");
	struct hello *all = calloc((size_t)size, sizeof(*all));
	if (!all)
		return 1;
	rc = kinet_boot_allgather(b, &me, all, sizeof(me));
	if (rc) {
		fprintf(stderr, "boot_hello: rank %d: allgather: %s\n", rank, kinet_strerror(rc));
		return 1;
	}
	for (int r = 0; r < size; r++) {
		if (all[r].rank != r) {
			fprintf(stderr, "boot_hello: rank %d: slot %d holds rank %d\n", rank, r,
				all[r].rank);
			return 1;
		}
	}
	if (rank == 0) {
		printf("%d processes over %s%s%s\n", size, kinet_boot_transport(b),
		       kinet_boot_addr(b)[0] ? " at " : "", kinet_boot_addr(b));
		for (int r = 0; r < size; r++)
			printf("  rank %d: pid %d on %s\n", r, all[r].pid, all[r].host);
		fflush(stdout);
	}
	rc = kinet_boot_barrier(b);
	if (rc) {
		fprintf(stderr, "boot_hello: rank %d: barrier: %s\n", rank, kinet_strerror(rc));
		return 1;
	}
	free(all);
	kinet_boot_close(b);
	return 0;
}

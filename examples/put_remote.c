/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * put_remote - an RDMA write into another process's memory. Two processes join
 * through the bootstrap (kinet/boot.h), trade QP and memory descriptors
 * (kinet/net.h) in one allgather and connect; rank 0 writes 1 MiB of random
 * bytes into rank 1's region, and rank 1 checks every byte.
 *
 *   export KINET_BOOT_ADDR=127.0.0.1:7000 KINET_BOOT_SIZE=2 KINET_BOOT_SECRET=$RANDOM$RANDOM
 *   KINET_BOOT_RANK=0 ./put_remote & KINET_BOOT_RANK=1 ./put_remote; wait   (or mpirun -np 2)
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <kinet/boot.h>
#include <kinet/device.h>
#include <kinet/net.h>
#define LEN (1u << 20)
#define CHECK(call) check((call), #call)

static int check(int rc, const char *what) /* a negative errno ends the program */
{
	if (rc < 0) {
		fprintf(stderr, "put_remote: %s: %s\n", what, kinet_strerror(rc));
		exit(1);
	}
	return rc;
}

struct card { /* what each rank tells the other */
	uint64_t seed; /* of rank 0's data */
	uint32_t qp_len;
	uint8_t qp[KINET_QP_DESC_MAX];
	uint8_t mr[KINET_MR_DESC_SIZE];
};

static void fill(uint8_t *p, size_t n, uint64_t s) /* the data from its seed (splitmix64) */
{
	for (size_t i = 0; i < n; i++) {
		uint64_t z = (s += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		p[i] = (uint8_t)(z ^ (z >> 31));
	}
}

int main(void)
{
	kinet_boot *boot;
	CHECK(kinet_boot_init_env(&boot));
	int rank = kinet_boot_rank(boot);
	if (kinet_boot_size(boot) != 2)
		return fprintf(stderr, "put_remote: run it with 2 processes\n"), 1;
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_mr *mr;
	kinet_qp *qp;
	struct card me = {0}, all[2];
	uint8_t *buf = calloc(1, LEN), *want = malloc(LEN);
	if (!buf || !want || getrandom(&me.seed, sizeof(me.seed), 0) != sizeof(me.seed))
		return 1;
	if (rank == 0)
		fill(buf, LEN, me.seed);
	CHECK(kinet_open(NULL, &ctx));
	CHECK(kinet_pd_alloc(ctx, &pd));
	CHECK(kinet_mr_reg(pd, buf, LEN, KINET_ACCESS_ALL, &mr));
	CHECK(kinet_qp_create(pd, NULL, &qp));
	me.qp_len = (uint32_t)CHECK(kinet_qp_export(qp, me.qp, sizeof(me.qp)));
	CHECK(kinet_mr_export(mr, me.mr, sizeof(me.mr)));
	CHECK(kinet_boot_allgather(boot, &me, all, sizeof(me)));
	const struct card *peer = &all[1 - rank];
	CHECK(kinet_qp_connect_remote(qp, peer->qp, peer->qp_len)); /* INIT -> RTR -> RTS */
	CHECK(kinet_boot_barrier(boot)); /* both QPs ready */
	if (rank == 0) {
		struct kinet_mr_info dst;
		kn_qp *d;
		kn_ticket_t t;
		CHECK(kinet_mr_desc_parse(peer->mr, sizeof(peer->mr), &dst));
		CHECK(kinet_qp_device(qp, &d));
		CHECK(kn_put(d, dst.addr, dst.rkey, buf, kinet_mr_lkey(mr), LEN, &t));
		CHECK(kn_wait(d, t)); /* completed: placed in rank 1's memory */
	}
	CHECK(kinet_boot_barrier(boot)); /* the write is done */
	if (rank == 1) {
		fill(want, LEN, all[0].seed);
		for (size_t i = 0; i < LEN; i++)
			if (buf[i] != want[i])
				return fprintf(stderr, "put_remote: byte %zu differs\n", i), 1;
		printf("put_remote: %u bytes written by rank 0, verified (bootstrap: %s)\n", LEN,
		       kinet_boot_transport(boot));
	}
	CHECK(kinet_boot_barrier(boot)); /* rank 1 has checked: the region may go */
	CHECK(kinet_qp_destroy(qp));
	CHECK(kinet_mr_dereg(mr));
	CHECK(kinet_pd_free(pd));
	CHECK(kinet_close(ctx));
	CHECK(kinet_boot_close(boot));
	free(buf), free(want);
	return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * put_local - one RDMA write between two queue pairs of this process, posted
 * from a CPU thread with the device API (the calls a GPU thread makes), then
 * the destination checked byte for byte against the random source.
 *
 *   ./put_local [bytes]     (default 1 MiB, at most 1 GiB)
 *
 * KINET_BACKEND=soft|mlx5 picks who executes the write (auto: a ConnectX NIC
 * when there is a usable one, else the software NIC). Exit status 0 when the
 * data arrived intact.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <kinet/device.h>
#include <kinet/kinet.h>

#define CHECK(call)                                                                     \
	do {                                                                            \
		int rc_ = (call);                                                       \
		if (rc_) {                                                              \
			fprintf(stderr, "put_local: %s: %s\n", #call, kinet_strerror(rc_)); \
			return 1;                                                       \
		}                                                                       \
	} while (0)

int main(int argc, char **argv)
{
	size_t len = argc > 1 ? strtoull(argv[1], NULL, 0) : 1u << 20;
	if (len == 0 || len > (1u << 30)) {
		fprintf(stderr, "usage: put_local [bytes, 1 .. 1073741824]\n");
		return 2;
	}
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	if (!src || !dst)
		return 1;
	for (size_t got = 0; got < len;) { /* random contents, never a pattern */
		ssize_t n = getrandom(src + got, len - got, 0);
		if (n <= 0)
			return 1;
		got += (size_t)n;
	}

	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_mr *src_mr, *dst_mr;
	kinet_qp *a, *b;
	kn_qp *da;
	CHECK(kinet_open(NULL, &ctx));
	CHECK(kinet_pd_alloc(ctx, &pd));
	CHECK(kinet_mr_reg(pd, src, len, KINET_ACCESS_LOCAL_WRITE, &src_mr));
	CHECK(kinet_mr_reg(pd, dst, len, KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_WRITE,
			   &dst_mr));
	struct kinet_qp_attr qa = {.sq_depth = 64}; /* CQs are created with the QP */
	CHECK(kinet_qp_create(pd, &qa, &a));
	CHECK(kinet_qp_create(pd, &qa, &b));
	CHECK(kinet_qp_connect_local(a, b)); /* a -> b, both RESET -> RTS */
	CHECK(kinet_qp_device(a, &da));      /* what the device code posts to */

	kn_ticket_t t;
	CHECK(kn_put(da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(dst_mr), src,
		     kinet_mr_lkey(src_mr), (uint32_t)len, &t));
	int rc = kn_wait(da, t); /* the write's completion: the data is in place */
	if (rc) {
		fprintf(stderr, "put_local: kn_wait: %s (%s)\n", kinet_strerror(rc),
			kinet_syndrome_str(kn_qp_error(da, NULL)));
		return 1;
	}
	if (memcmp(src, dst, len)) {
		size_t i = 0;
		while (src[i] == dst[i])
			i++;
		fprintf(stderr, "put_local: byte %zu differs\n", i);
		return 1;
	}
	printf("put_local: %zu bytes written by the %s backend, verified\n", len,
	       kinet_backend_name(kinet_ctx_backend(ctx)));

	CHECK(kinet_qp_destroy(a));
	CHECK(kinet_qp_destroy(b));
	CHECK(kinet_mr_dereg(src_mr));
	CHECK(kinet_mr_dereg(dst_mr));
	CHECK(kinet_pd_free(pd));
	CHECK(kinet_close(ctx));
	free(src);
	free(dst);
	return 0;
}

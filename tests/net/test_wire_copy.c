/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The target's copy thread (KINET_NET_COPY_THREAD, src/nic/soft/wire/copy.c)
 * and writes the target forgets: once kinet_qp_modify(RESET) of the target
 * QP has returned, nothing of a rendezvous write it dropped lands in the
 * region any more, not even the reads that had landed in their bounce
 * buffers and waited for the copy thread.
 *
 * The copy thread is held inside its first copy by a userfaultfd on the
 * destination (its pages missing until the test fills them), so that the
 * second write's read waits behind it, handed over (the wire's counters
 * say so: linked with the library's objects). Then the target QP is reset;
 * the first copy (under way) lands, the second never does.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include "kinet_config.h"
#include "test_wire_common.h"
#if KINET_HAVE_FABRIC
#include "nic/soft/soft.h"
#include "nic/soft/wire/wire_int.h"

#define PIECE (1u << 20)     /* one read each (RD_PIECE) */
#define RLEN (4u * PIECE)    /* A: [0, 1M) held; B: [2M, 3M) */
#define OFF_A 0u
#define OFF_B (2u * PIECE)

static int uffd_open(void)
{
#ifdef UFFD_USER_MODE_ONLY
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd >= 0)
		return fd;
#endif
	return (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
}

/* the requester: two writes of one read each, A then B, from random bytes */
static int fg_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_FI_SAME_HOST", "off", 1); /* the network wire, as the target's */
	struct tw_side s;
	tw_open(&s, fd, RLEN, 1);
	uint8_t d[KINET_MR_DESC_SIZE];
	CK(tw_io(fd, d, sizeof(d), 0) == 0);
	struct kinet_mr_info r;
	CK0(kinet_mr_desc_parse(d, sizeof(d), &r));
	kn_ticket_t t[2];
	for (int i = 0; i < 2; i++) {
		CK0(kn_sq_reserve(s.d, 1, &t[i]));
		kn_prep_write(s.d, kn_wqe_ptr(s.d, t[i]), t[i],
			      (uint64_t)(uintptr_t)(s.buf + (size_t)i * PIECE), kinet_mr_lkey(s.mr),
			      r.addr + (i ? OFF_B : OFF_A), r.rkey, PIECE);
		kn_sq_submit(s.d, t[i], 1);
	}
	CK(tw_sync(fd, 3) == 3); /* the target has reset its QP and checked */
	tw_close(&s);
	return 0;
}

struct fg_reset {
	kinet_qp *qp;
	_Atomic int done;
	int rc;
};

static void *fg_reset_main(void *arg)
{
	struct fg_reset *r = arg;
	r->rc = kinet_qp_modify(r->qp, KINET_QPS_RESET, NULL);
	atomic_store(&r->done, 1);
	return NULL;
}

/* the requester's byte for offset off of the region (A from its first MiB,
 * B from its second) */
static size_t fg_src_off(size_t off)
{
	return off < OFF_B ? off - OFF_A : off - OFF_B + PIECE;
}

static int fg_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	setenv("KINET_NET_COPY_THREAD", "on", 1);
	setenv("KINET_NET_COPY_MIN", "0", 1);
	setenv("KINET_FI_SAME_HOST", "off", 1);
	struct tw_side s;
	tw_open(&s, fd, RLEN, 2);
	uint8_t *reg = mmap(NULL, RLEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(reg != MAP_FAILED);
	CK0(madvise(reg, RLEN, MADV_NOHUGEPAGE)); /* A's and B's pages stay small and missing */
	uint8_t *canary = malloc(RLEN), *src = NULL;
	CK(canary != NULL);
	CK0(posix_memalign((void **)&src, 4096, RLEN)); /* UFFDIO_COPY's source: aligned */
	tu_fill_random(canary, RLEN, 7);
	tu_fill_random(src, RLEN, 1); /* the requester's buffer */
	memcpy(reg + PIECE, canary + PIECE, PIECE);
	memcpy(reg + 3 * PIECE, canary + 3 * PIECE, PIECE);
	kinet_mr *mr;
	CK0(kinet_mr_reg(s.pd, reg, RLEN, KINET_ACCESS_ALL, &mr));
	CK0(madvise(reg + OFF_A, PIECE, MADV_DONTNEED));
	CK0(madvise(reg + OFF_B, PIECE, MADV_DONTNEED));
	int uffd = uffd_open();
	CK(uffd >= 0);
	struct uffdio_api api = {.api = UFFD_API};
	CK0(ioctl(uffd, UFFDIO_API, &api));
	/* A and B (and the populated MiB between them, which never faults) */
	struct uffdio_range all = {.start = (uint64_t)(uintptr_t)reg, .len = 3 * PIECE};
	struct uffdio_register ur = {.range = all, .mode = UFFDIO_REGISTER_MODE_MISSING};
	CK0(ioctl(uffd, UFFDIO_REGISTER, &ur));
	uint8_t d[KINET_MR_DESC_SIZE];
	CK(kinet_mr_export(mr, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK(tw_io(fd, d, sizeof(d), 1) == 0);
	/* the copy thread is held in the first page it writes: of X, the read
	 * that landed first (A or B) */
	struct uffd_msg msg;
	struct pollfd pf = {.fd = uffd, .events = POLLIN};
	CK(poll(&pf, 1, 20000) == 1);
	CK(read(uffd, &msg, sizeof(msg)) == (ssize_t)sizeof(msg));
	CK(msg.event == UFFD_EVENT_PAGEFAULT);
	size_t first = (size_t)((msg.arg.pagefault.address & ~4095ull) - (uintptr_t)reg);
	CK(first < PIECE || (first >= OFF_B && first < OFF_B + PIECE));
	size_t x = first < PIECE ? OFF_A : OFF_B, y = x == OFF_A ? OFF_B : OFF_A;
	/* Y's read lands and waits behind it with the copy thread: both still
	 * in flight, neither with the provider */
	struct kinet_wire *w = soft_ctx(s.ctx)->wire;
	CK(w != NULL);
	uint64_t t0 = tw_ms();
	for (;;) {
		pthread_mutex_lock(&w->lock);
		int nrd = 0;
		for (int i = 0; i < w->npeers; i++)
			nrd += w->peers[i].nrd;
		bool both = atomic_load(&w->rd_inflight) == 2 && nrd == 0;
		pthread_mutex_unlock(&w->lock);
		if (both)
			break;
		CK(tw_ms() - t0 < 20000);
		tw_sleep_ms(1);
	}
	/* the target QP is reset meanwhile (its writes are forgotten); the
	 * copy under way may finish first. X's pages are filled as the copy
	 * reaches them, until the reset has returned and nothing handed over
	 * is left; a fault in Y is a copy of a forgotten write (let through,
	 * to end, and counted) */
	struct fg_reset rs = {.qp = s.qp};
	pthread_t th;
	uint64_t forgets = wire_copy_forgets(w);
	CK0(pthread_create(&th, NULL, fg_reset_main, &rs));
	/* X is held until the reset has marked Y skipped: on a loaded machine
	 * the copy thread would otherwise finish X and start Y first */
	for (t0 = tw_ms(); wire_copy_forgets(w) == forgets && !atomic_load(&rs.done);
	     tw_sleep_ms(1))
		CK(tw_ms() - t0 < 20000);
	int y_faults = 0;
	for (t0 = tw_ms(); !atomic_load(&rs.done) || atomic_load(&w->rd_inflight) > 0;) {
		CK(tw_ms() - t0 < 20000);
		size_t off = (size_t)((msg.arg.pagefault.address & ~4095ull) - (uintptr_t)reg);
		if (off >= y && off < y + PIECE)
			y_faults++;
		struct uffdio_copy cp = {.dst = (uint64_t)(uintptr_t)reg + off,
					 .src = (uint64_t)(uintptr_t)(src + fg_src_off(off)),
					 .len = 4096};
		if (msg.event == UFFD_EVENT_PAGEFAULT)
			CK(ioctl(uffd, UFFDIO_COPY, &cp) == 0 || errno == EEXIST);
		msg.event = 0;
		while ((!atomic_load(&rs.done) || atomic_load(&w->rd_inflight) > 0) &&
		       (poll(&pf, 1, 10) != 1 ||
			read(uffd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg)))
			CK(tw_ms() - t0 < 20000);
	}
	CK0(pthread_join(th, NULL));
	CK0(rs.rc);
	CK0(ioctl(uffd, UFFDIO_UNREGISTER, &all));
	/* X was being copied when the reset came: it landed; Y never did */
	CK(y_faults == 0);
	CK(memcmp(reg + x, src + fg_src_off(x), PIECE) == 0);
	for (size_t i = 0; i < PIECE; i++)
		CK(reg[y + i] == 0); /* never populated */
	CK(memcmp(reg + PIECE, canary + PIECE, PIECE) == 0);
	CK(memcmp(reg + 3 * PIECE, canary + 3 * PIECE, PIECE) == 0);
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
	CK(wi.copy_thread == 1 && wi.copy_thread_bytes == PIECE);
	CK(tw_sync(fd, 3) == 3);
	close(uffd);
	CK0(kinet_mr_dereg(mr));
	munmap(reg, RLEN);
	free(canary);
	free(src);
	tw_close(&s);
	return 0;
}

Test(wire_copy, reset_forgets_reads_waiting_for_the_copy_thread)
{
	tw_need_wire();
	int u = uffd_open();
	if (u < 0)
		cr_skip_test("no userfaultfd here: %s", strerror(errno));
	close(u);
	tw_run_two(fg_a, fg_b, 120000);
}
#else
Test(wire_copy, reset_forgets_reads_waiting_for_the_copy_thread)
{
	cr_skip_test("this build has no libfabric wire");
}
#endif

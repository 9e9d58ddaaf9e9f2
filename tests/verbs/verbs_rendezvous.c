/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs_rendezvous.c - kinet-verbs' rendezvous of QPs between processes
 * (docs/verbs.md, "Addressing"), seen from a program of rdma-core's verbs.h
 * alone, run under kinet-run (test_verbs_rendezvous) with a rendezvous folder
 * of its own: an entry of an ended process is swept when the first QP is
 * made; each QP's number is an entry of the folder, gone at destroy; RTR to a
 * QP number no process holds, or to one whose device lacks the destination
 * GID, or at a GID of another host whose rendezvous service does not know
 * it, fails with ENOENT after KINET_VERBS_PEER_TIMEOUT_MS, not before and
 * not much later. The rendezvous service that answers other hosts (on a
 * port of its own here): a lookup of a published QP gets its descriptor,
 * one at another GID or of an unknown number gets ENOENT and why, and
 * garbage, a half request or a silent client leave it answering.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>

#define CHECK(c, ...)                                                                          \
	do {                                                                                   \
		if (!(c)) {                                                                    \
			fprintf(stderr, "verbs_rendezvous: FAIL: " __VA_ARGS__);               \
			fprintf(stderr, "\n");                                                 \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

static char dir[64];

static int entry_exists(uint32_t qpn)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/qp-%06x", dir, qpn);
	return access(p, F_OK) == 0;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* RTR toward (gid, qpn): the errno ibv_modify_qp returns, and how long it took. */
static int rtr(struct ibv_qp *qp, const union ibv_gid *gid, int gid_index, uint32_t qpn,
	       double *secs)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	double t0 = now_s();
	int rc = ibv_modify_qp(qp, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER);
	*secs = now_s() - t0;
	return rc;
}

/* ---- the rendezvous service, as another host's kinet-verbs asks it (the
 * wire format of src/verbs/rendezvous.c, network byte order) ---- */
static unsigned svc_port;

static int svc_connect(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)svc_port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* the service starts with the first published QP: give it a moment */
	for (int i = 0; i < 200; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(s >= 0, "socket");
		struct timeval tv = {3, 0};
		setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0)
			return s;
		close(s);
		usleep(10000);
	}
	CHECK(0, "nothing answers on the rendezvous port %u", svc_port);
	return -1;
}

/* A lookup of (qpn, gid): the status (0 or an errno), why, and the
 * descriptor's length (-1 when the answer is short). */
static int svc_ask(uint32_t qpn, const union ibv_gid *gid, char *why, size_t whycap, int *len)
{
	uint32_t q[4] = {htonl(0x4b4e5651u), htonl(1), htonl(qpn), 0};
	uint8_t req[32];
	memcpy(req, q, 16);
	memcpy(req + 16, gid->raw, 16);
	int s = svc_connect();
	CHECK(send(s, req, sizeof(req), 0) == (ssize_t)sizeof(req), "send the lookup");
	uint8_t ans[112 + 512];
	size_t got = 0;
	ssize_t k;
	while (got < sizeof(ans) && (k = recv(s, ans + got, sizeof(ans) - got, 0)) > 0)
		got += (size_t)k;
	close(s);
	CHECK(got >= 112, "a short answer (%zu bytes)", got);
	uint32_t h[4];
	memcpy(h, ans, 16);
	CHECK(ntohl(h[0]) == 0x4b4e5641u && ntohl(h[1]) == 1, "not an answer of protocol 1");
	snprintf(why, whycap, "%.96s", (const char *)ans + 16);
	*len = ntohl(h[3]) == got - 112 ? (int)(got - 112) : -1;
	return (int)ntohl(h[2]);
}

static void svc_check(uint32_t qpn, const union ibv_gid *gid)
{
	char why[128];
	int len;
	/* garbage, half a request, a client that says nothing: each dropped */
	int s = svc_connect();
	uint8_t junk[300];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 151 + 7);
	CHECK(send(s, junk, sizeof(junk), 0) > 0, "send garbage");
	close(s);
	s = svc_connect();
	CHECK(send(s, "\x4b\x4e\x56\x51\0\0\0\1", 8, 0) == 8, "send half a request");
	close(s);
	int silent = svc_connect();
	/* a published QP at its GID: its descriptor */
	int st = svc_ask(qpn, gid, why, sizeof(why), &len);
	CHECK(st == 0 && len > 16 && len <= 256, "lookup of QP 0x%x: status %d, %d bytes (%s)",
	      qpn, st, len, why);
	/* at another GID, an unknown number: ENOENT, and why */
	union ibv_gid other = *gid;
	other.raw[15] ^= 0x33;
	st = svc_ask(qpn, &other, why, sizeof(why), &len);
	CHECK(st == ENOENT && len == 0 && strstr(why, "without that GID"),
	      "lookup at another GID: status %d, %d bytes, why \"%s\"", st, len, why);
	st = svc_ask(0x42, gid, why, sizeof(why), &len);
	CHECK(st == ENOENT && len == 0 && strstr(why, "no such QP number"),
	      "lookup of an unknown number: status %d, %d bytes, why \"%s\"", st, len, why);
	close(silent);
	st = svc_ask(qpn, gid, why, sizeof(why), &len);
	CHECK(st == 0 && len > 16, "lookup after the silent client: status %d (%s)", st, why);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kinet-rv-XXXXXX");
	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	setenv("KINET_VERBS_RENDEZVOUS_DIR", dir, 1);
	setenv("KINET_VERBS_PEER_TIMEOUT_MS", "400", 1);
	/* a rendezvous port of this test's own: a free one, as the system gives it */
	int ps = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 pa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
	socklen_t pl = sizeof(pa);
	CHECK(ps >= 0 && bind(ps, (struct sockaddr *)&pa, sizeof(pa)) == 0 &&
		      getsockname(ps, (struct sockaddr *)&pa, &pl) == 0,
	      "a free port: %s", strerror(errno));
	svc_port = ntohs(pa.sin6_port);
	close(ps);
	char pbuf[16];
	snprintf(pbuf, sizeof(pbuf), "%u", svc_port);
	setenv("KINET_VERBS_RENDEZVOUS_PORT", pbuf, 1);

	/* an entry of a process that has ended */
	pid_t child = fork();
	CHECK(child >= 0, "fork");
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	char stale[128];
	snprintf(stale, sizeof(stale), "%s/qp-000200", dir);
	uint32_t head[4] = {0x4b4e5652u, (uint32_t)child, 0, 0};
	FILE *f = fopen(stale, "wb");
	CHECK(f && fwrite(head, sizeof(head), 1, f) == 1 && fclose(f) == 0, "stale entry");

	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	CHECK(l && n > 0, "no device (run under kinet-run)");
	struct ibv_context *ctx = ibv_open_device(l[0]);
	CHECK(ctx, "ibv_open_device: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq, "PD, CQ");
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	struct ibv_qp *qp2 = ibv_create_qp(pd, &ia);
	CHECK(qp && qp2, "ibv_create_qp: %s", strerror(errno));
	CHECK(access(stale, F_OK) != 0, "the entry of an ended process was not swept");
	CHECK(qp->qp_num != qp2->qp_num, "two QPs share number 0x%x", qp->qp_num);
	CHECK(qp->qp_num >= 0x100 && qp->qp_num <= 0xffffff, "QP number 0x%x", qp->qp_num);
	CHECK(entry_exists(qp->qp_num) && entry_exists(qp2->qp_num),
	      "the QPs' numbers 0x%x, 0x%x are not entries of %s", qp->qp_num, qp2->qp_num, dir);

	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					    IBV_QP_ACCESS_FLAGS) == 0 &&
		      ibv_modify_qp(qp2, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						     IBV_QP_ACCESS_FLAGS) == 0,
	      "modify to INIT");
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0, "ibv_query_gid");
	double t;
	/* a number below those handed out: no process holds it */
	int rc = rtr(qp, &gid, 1, 0x42, &t);
	CHECK(rc == ENOENT, "RTR to an unknown QP number: %d (%s), ENOENT expected", rc,
	      strerror(rc));
	CHECK(t >= 0.35 && t < 3.0, "RTR to an unknown QP gave up after %.3f s, 0.4 s expected",
	      t);
	/* qp2's number, at a GID its device does not have */
	union ibv_gid other = gid;
	other.raw[15] ^= 0x5a;
	other.raw[14] ^= 0xa5;
	rc = rtr(qp, &other, 1, qp2->qp_num, &t);
	CHECK(rc == ENOENT, "RTR to a known QP number at another GID: %d (%s), ENOENT expected",
	      rc, strerror(rc));
	svc_check(qp2->qp_num, &gid);
	/* a GID of another host (an address of no interface here): asked for
	 * at that address, whose service (this process's, at 127.0.0.2) has no
	 * such QP at that GID; given up after the timeout, not much later */
	union ibv_gid far = {.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2}};
	rc = rtr(qp, &far, 1, qp2->qp_num, &t);
	CHECK(rc == ENOENT, "RTR to a QP at a GID of another host: %d (%s), ENOENT expected", rc,
	      strerror(rc));
	CHECK(t >= 0.35 && t < 3.0, "RTR to another host gave up after %.3f s, 0.4 s expected", t);

	uint32_t n1 = qp->qp_num, n2 = qp2->qp_num;
	CHECK(ibv_destroy_qp(qp) == 0 && ibv_destroy_qp(qp2) == 0, "ibv_destroy_qp");
	CHECK(!entry_exists(n1) && !entry_exists(n2), "entries left after ibv_destroy_qp");
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
	rmdir(dir);
	printf("verbs_rendezvous: passed\n");
	return 0;
}

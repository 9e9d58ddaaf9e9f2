/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * desc.c - endpoint descriptors (kinet/net.h): serialised QP and memory
 * region descriptions for other processes, and connecting a QP to one. The
 * same format for every backend; what a peer needs to reach the QP (a wire
 * address, or a ConnectX QP's addressing) is the backend's, carried as the
 * address with the transport that names it.
 *
 * Layout, every integer big-endian:
 *   QP: "KNQP" | u16 version | u16 length | u32 qpn | u32 addr_len |
 *       u64 gen | u64 node | char transport[32] | addr[addr_len]
 *       [ u64 host | char alt_transport[16] | u32 alt_len | alt[alt_len] ]
 *       The part in brackets, where present, is a second address for peers
 *       on the same host (kinet_host() equal): the software NIC's shm wire.
 *   MR: "KNMR" | u16 version | u16 length | u32 rkey | u32 kind |
 *       u64 addr | u64 len | u64 gen | u64 reserved (0)
 * The version is checked before anything else is trusted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <kinet/net.h>
#include "core/internal.h"

#define QP_FIXED 64u /* bytes before the address */
#define ALT_FIXED 28u /* bytes of the same-host part before its address */


/* Magic, version and length of any descriptor. */
static int check_head(const uint8_t *b, size_t len, const char *magic, const char *what,
		      size_t min)
{
	if (len < 8 || memcmp(b, magic, 4)) {
		KLOG_ERR("%s descriptor: not a kinet %s descriptor (%zu bytes)", what, what, len);
		return -EPROTO;
	}
	uint16_t ver = kn_load_be16(b + 4);
	if (ver != KINET_NET_VERSION) {
		KLOG_ERR("%s descriptor: version %u, this library speaks version %u", what, ver,
			 KINET_NET_VERSION);
		return -KINET_EVERSION;
	}
	uint16_t dlen = kn_load_be16(b + 6);
	if (dlen < min || dlen > len) {
		KLOG_ERR("%s descriptor: truncated or malformed (%zu bytes, says %u)", what, len,
			 dlen);
		return -EPROTO;
	}
	return 0;
}

static uint64_t node_nonce;
static pthread_once_t node_once = PTHREAD_ONCE_INIT;

static void node_init(void)
{
	uint64_t v = 0;
	kinet_random(&v, sizeof(v));
	node_nonce = v ? v : 1;
}

uint64_t kinet_node(void)
{
	pthread_once(&node_once, node_init);
	return node_nonce;
}

static uint64_t host_id;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static void host_init(void)
{
	/* the boot, the user, and the namespaces that shm needs shared */
	uint64_t h = 0xcbf29ce484222325ull;
	char buf[128];
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	bool ok = f && fgets(buf, sizeof(buf), f);
	if (f)
		fclose(f);
	if (ok)
		h = fnv(h, buf, strlen(buf));
	uid_t uid = geteuid();
	h = fnv(h, &uid, sizeof(uid));
	static const char *const ns[] = {"/proc/self/ns/net", "/proc/self/ns/pid",
					 "/proc/self/ns/mnt"};
	for (size_t i = 0; ok && i < sizeof(ns) / sizeof(ns[0]); i++) {
		ssize_t n = readlink(ns[i], buf, sizeof(buf));
		ok = n > 0;
		if (ok)
			h = fnv(h, buf, (size_t)n);
	}
	/* what cannot be read is not claimed: no other process matches */
	host_id = ok && h ? h : kinet_node();
}

uint64_t kinet_host(void)
{
	pthread_once(&host_once, host_init);
	return host_id;
}

size_t kinet_qp_desc_len(size_t addr_len, size_t alt_len)
{
	return QP_FIXED + addr_len + (alt_len ? ALT_FIXED + alt_len : 0);
}

int kinet_qp_export(kinet_qp *qp, void *buf, size_t cap)
{
	if (!qp || !buf)
		return -EINVAL;
	if (!qp->ctx->ops->qp_local_end)
		return kinet_backend_unsupported(qp->ctx, "kinet_qp_export");
	struct kinet_qp_local l;
	memset(&l, 0, sizeof(l));
	l.node = kinet_node();
	int rc = qp->ctx->ops->qp_local_end(qp, &l);
	if (rc)
		return rc;
	if (l.addr_len == 0 || l.addr_len > 128)
		return -EOVERFLOW;
	size_t n = QP_FIXED + l.addr_len;
	size_t alt = 0;
	if (l.alt_len) {
		/* the backend names its same-host end only where it fits (it
		 * connects over it only then): anything else is a defect */
		if (l.alt_len > sizeof(l.alt_addr) ||
		    kinet_qp_desc_len(l.addr_len, l.alt_len) > KINET_QP_DESC_MAX)
			return -EOVERFLOW;
		alt = ALT_FIXED + l.alt_len;
	}
	n += alt;
	if (cap < n)
		return -E2BIG;
	uint8_t *b = buf;
	memset(b, 0, n);
	memcpy(b, "KNQP", 4);
	kn_store_be16(b + 4, KINET_NET_VERSION);
	kn_store_be16(b + 6, (uint16_t)n);
	kn_store_be32(b + 8, qp->qpn);
	kn_store_be32(b + 12, (uint32_t)l.addr_len);
	kn_store_be64(b + 16, l.gen);
	kn_store_be64(b + 24, l.node);
	snprintf((char *)b + 32, 32, "%s", l.transport);
	memcpy(b + QP_FIXED, l.addr, l.addr_len);
	if (alt) {
		uint8_t *a = b + QP_FIXED + l.addr_len;
		kn_store_be64(a, l.host);
		snprintf((char *)a + 8, 16, "%s", l.alt_transport);
		kn_store_be32(a + 24, (uint32_t)l.alt_len);
		memcpy(a + ALT_FIXED, l.alt_addr, l.alt_len);
	}
	return (int)n;
}

int kinet_qp_desc_parse(const void *buf, size_t len, struct kinet_qp_info *out)
{
	struct kinet_qp_alt alt;
	return kinet_qp_desc_parse_alt(buf, len, out, &alt);
}

int kinet_qp_desc_parse_alt(const void *buf, size_t len, struct kinet_qp_info *out,
			    struct kinet_qp_alt *altp)
{
	if (!buf || !out || !altp)
		return -EINVAL;
	const uint8_t *b = buf;
	int rc = check_head(b, len, "KNQP", "QP", QP_FIXED);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	out->version = kn_load_be16(b + 4);
	out->qpn = kn_load_be32(b + 8);
	out->addr_len = kn_load_be32(b + 12);
	out->gen = kn_load_be64(b + 16);
	out->node = kn_load_be64(b + 24);
	uint32_t dlen = kn_load_be16(b + 6);
	if (out->addr_len == 0 || out->addr_len > sizeof(out->addr) ||
	    QP_FIXED + out->addr_len > dlen || memchr(b + 32, 0, 32) == NULL) {
		KLOG_ERR("QP descriptor: malformed address or provider field");
		return -EPROTO;
	}
	memcpy(out->provider, b + 32, 32);
	memcpy(out->addr, b + QP_FIXED, out->addr_len);
	struct kinet_qp_alt alt;
	memset(&alt, 0, sizeof(alt));
	uint32_t rest = dlen - QP_FIXED - out->addr_len;
	if (rest) {
		const uint8_t *a = b + QP_FIXED + out->addr_len;
		if (rest < ALT_FIXED || memchr(a + 8, 0, 16) == NULL ||
		    (alt.len = kn_load_be32(a + 24)) == 0 || alt.len > sizeof(alt.addr) ||
		    ALT_FIXED + alt.len != rest) {
			KLOG_ERR("QP descriptor: malformed same-host address (%u bytes after the "
				 "address)", rest);
			return -EPROTO;
		}
		alt.host = kn_load_be64(a);
		memcpy(alt.transport, a + 8, 16);
		memcpy(alt.addr, a + ALT_FIXED, alt.len);
	}
	*altp = alt;
	return 0;
}

void kinet_qp_forget_peer(kinet_qp *qp)
{
	if (!qp->remote_connected)
		return;
	qp->remote_connected = false;
	kinet_ctx *ctx = qp->ctx;
	pthread_mutex_lock(&ctx->lock);
	if (!ctx->stale)
		ctx->stale = calloc(KINET_STALE_MAX, sizeof(*ctx->stale));
	if (ctx->stale) {
		struct kinet_stale *e = &ctx->stale[ctx->nstale++ % KINET_STALE_MAX];
		e->node = qp->peer_node;
		e->gen = qp->peer_gen;
		e->qpn = qp->peer_qpn;
	}
	pthread_mutex_unlock(&ctx->lock);
}

/* Was this peer descriptor connected to before, by a connection that has
 * ended? (A restarted peer has a new incarnation; a reset one a new
 * generation: only a fresh descriptor reaches it.) */
static bool stale(kinet_ctx *ctx, const struct kinet_qp_info *pi)
{
	bool found = false;
	pthread_mutex_lock(&ctx->lock);
	uint32_t n = ctx->nstale < KINET_STALE_MAX ? ctx->nstale : KINET_STALE_MAX;
	for (uint32_t i = 0; ctx->stale && i < n && !found; i++)
		found = ctx->stale[i].node == pi->node && ctx->stale[i].gen == pi->gen &&
			ctx->stale[i].qpn == pi->qpn;
	pthread_mutex_unlock(&ctx->lock);
	return found;
}

int kinet_qp_connect_remote(kinet_qp *qp, const void *desc, size_t len)
{
	if (!qp || !desc)
		return -EINVAL;
	struct kinet_qp_info pi;
	int rc = kinet_qp_desc_parse(desc, len, &pi);
	if (rc)
		return rc;
	if (stale(qp->ctx, &pi)) {
		KLOG_ERR("qp 0x%x: the descriptor of qp 0x%x (incarnation %016llx, generation "
			 "%llx) is stale: a connection to it ended (reset, destroyed, or the peer "
			 "restarted); connect with a fresh descriptor",
			 qp->qpn, pi.qpn, (unsigned long long)pi.node, (unsigned long long)pi.gen);
		return -ESTALE;
	}
	int st = kinet_qp_get_state(qp);
	if (st != KINET_QPS_RESET && st != KINET_QPS_INIT) {
		KLOG_ERR("qp 0x%x: connect needs RESET or INIT, it is in %s", qp->qpn,
			 kinet_qp_state_str(st));
		return -EINVAL;
	}
	if (st == KINET_QPS_RESET && (rc = kinet_qp_modify(qp, KINET_QPS_INIT, NULL)))
		return rc;
	struct kinet_qp_remote r = {.local = NULL, .qpn = pi.qpn, .wire_addr = desc,
				    .wire_addr_len = len};
	if ((rc = kinet_qp_modify(qp, KINET_QPS_RTR, &r)))
		return rc;
	qp->peer_node = pi.node;
	qp->peer_gen = pi.gen;
	qp->remote_connected = true;
	return kinet_qp_modify(qp, KINET_QPS_RTS, NULL);
}

int kinet_mr_export(const kinet_mr *mr, void *buf, size_t cap)
{
	if (!mr || !buf)
		return -EINVAL;
	if (cap < KINET_MR_DESC_SIZE)
		return -E2BIG;
	uint8_t *b = buf;
	memset(b, 0, KINET_MR_DESC_SIZE);
	memcpy(b, "KNMR", 4);
	kn_store_be16(b + 4, KINET_NET_VERSION);
	kn_store_be16(b + 6, KINET_MR_DESC_SIZE);
	kn_store_be32(b + 8, kinet_mr_rkey(mr));
	kn_store_be32(b + 12, (uint32_t)kinet_mr_kind(mr));
	kn_store_be64(b + 16, (uint64_t)(uintptr_t)kinet_mr_addr(mr));
	kn_store_be64(b + 24, (uint64_t)kinet_mr_len(mr));
	kn_store_be64(b + 32, kinet_node());
	int st = KINET_MR_REGISTERED;
	atomic_compare_exchange_strong(&((kinet_mr *)mr)->state, &st, KINET_MR_EXPOSED);
	return KINET_MR_DESC_SIZE;
}

int kinet_mr_desc_parse(const void *buf, size_t len, struct kinet_mr_info *out)
{
	if (!buf || !out)
		return -EINVAL;
	const uint8_t *b = buf;
	int rc = check_head(b, len, "KNMR", "memory region", KINET_MR_DESC_SIZE);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	out->version = kn_load_be16(b + 4);
	out->rkey = kn_load_be32(b + 8);
	out->kind = kn_load_be32(b + 12);
	out->addr = kn_load_be64(b + 16);
	out->len = kn_load_be64(b + 24);
	out->gen = kn_load_be64(b + 32);
	return 0;
}

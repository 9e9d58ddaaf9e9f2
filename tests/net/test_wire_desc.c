/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Endpoint descriptors (kinet/net.h): round trips, refusal of other
 * versions, of malformed bytes and of another provider; two contexts of one
 * process connected through the wire.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <kinet/kinet.h>
#include <kinet/net.h>
#include "../util/testutil.h"

struct one {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp;
};

static void one_open(struct one *o)
{
	setenv("FI_TCP_IFACE", "lo", 1);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &o->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(o->ctx, &o->pd), 0);
	cr_assert_eq(kinet_qp_create(o->pd, NULL, &o->qp), 0);
	uint8_t d[KINET_QP_DESC_MAX];
	int n = kinet_qp_export(o->qp, d, sizeof(d));
	if (n == -ENOSYS || n == -ENODEV)
		cr_skip_test("this build has no libfabric wire (or its provider is missing)");
}

static void one_close(struct one *o)
{
	cr_assert_eq(kinet_qp_destroy(o->qp), 0);
	cr_assert_eq(kinet_pd_free(o->pd), 0);
	cr_assert_eq(kinet_close(o->ctx), 0);
}

Test(wire_desc, qp_round_trip_and_refusals)
{
	struct one o;
	one_open(&o);
	uint8_t d[KINET_QP_DESC_MAX];
	cr_assert_eq(kinet_qp_export(o.qp, d, 8), -E2BIG);
	int n = kinet_qp_export(o.qp, d, sizeof(d));
	cr_assert_gt(n, 64);
	struct kinet_qp_info qi;
	cr_assert_eq(kinet_qp_desc_parse(d, (size_t)n, &qi), 0);
	cr_assert_eq(qi.version, KINET_NET_VERSION);
	cr_assert_eq(qi.qpn, kinet_qp_num(o.qp));
	cr_assert_str_eq(qi.provider, kinet_tunable_str("KINET_FI_PROVIDER"));
	cr_assert_gt(qi.addr_len, 0);
	cr_assert_neq(qi.gen, 0);
	/* exporting again gives the same descriptor (same generation) */
	uint8_t d2[KINET_QP_DESC_MAX];
	cr_assert_eq(kinet_qp_export(o.qp, d2, sizeof(d2)), n);
	cr_assert_eq(memcmp(d, d2, (size_t)n), 0);

	/* another version: refused before anything else is read */
	uint8_t v[KINET_QP_DESC_MAX];
	memcpy(v, d, (size_t)n);
	v[5] ^= 0x7; /* version is big-endian at offset 4 */
	cr_assert_eq(kinet_qp_desc_parse(v, (size_t)n, &qi), -KINET_EVERSION);
	cr_assert_eq(kinet_qp_connect_remote(o.qp, v, (size_t)n), -KINET_EVERSION);
	cr_assert_eq(kinet_qp_get_state(o.qp), KINET_QPS_RESET);
	cr_assert_str_eq(kinet_strerror(-KINET_EVERSION), "descriptor version mismatch");
	/* not a descriptor, truncated, a memory-region descriptor */
	uint8_t junk[KINET_QP_DESC_MAX];
	tu_fill_random(junk, sizeof(junk), 9);
	cr_assert_eq(kinet_qp_desc_parse(junk, sizeof(junk), &qi), -EPROTO);
	cr_assert_eq(kinet_qp_desc_parse(d, 20, &qi), -EPROTO);
	cr_assert_eq(kinet_qp_desc_parse(d, (size_t)n - 1, &qi), -EPROTO);
	cr_assert_eq(kinet_qp_connect_remote(o.qp, junk, sizeof(junk)), -EPROTO);
	cr_assert_eq(kinet_qp_desc_parse(NULL, 10, &qi), -EINVAL);
	/* another provider */
	memcpy(v, d, (size_t)n);
	memset(v + 32, 0, 32);
	strcpy((char *)v + 32, "verbs;ofi_rxm");
	cr_assert_eq(kinet_qp_connect_remote(o.qp, v, (size_t)n), -EPROTO);
	one_close(&o);
}

Test(wire_desc, mr_round_trip_and_refusals)
{
	struct one o;
	one_open(&o);
	uint8_t *buf = malloc(12345);
	kinet_mr *mr;
	cr_assert_eq(kinet_mr_reg(o.pd, buf, 12345, KINET_ACCESS_ALL, &mr), 0);
	uint8_t d[KINET_MR_DESC_SIZE];
	cr_assert_eq(kinet_mr_export(mr, d, sizeof(d) - 1), -E2BIG);
	cr_assert_eq(kinet_mr_export(mr, d, sizeof(d)), KINET_MR_DESC_SIZE);
	struct kinet_mr_info mi;
	cr_assert_eq(kinet_mr_desc_parse(d, sizeof(d), &mi), 0);
	cr_assert_eq(mi.addr, (uint64_t)(uintptr_t)buf);
	cr_assert_eq(mi.len, 12345);
	cr_assert_eq(mi.rkey, kinet_mr_rkey(mr));
	cr_assert_eq(mi.kind, KINET_MEM_HOST);
	cr_assert_neq(mi.gen, 0);
	d[5] = 99;
	cr_assert_eq(kinet_mr_desc_parse(d, sizeof(d), &mi), -KINET_EVERSION);
	d[0] = 'X';
	cr_assert_eq(kinet_mr_desc_parse(d, sizeof(d), &mi), -EPROTO);
	/* a QP descriptor is not a memory-region descriptor */
	uint8_t q[KINET_QP_DESC_MAX];
	int n = kinet_qp_export(o.qp, q, sizeof(q));
	cr_assert_eq(kinet_mr_desc_parse(q, (size_t)n, &mi), -EPROTO);
	cr_assert_eq(kinet_mr_dereg(mr), 0);
	free(buf);
	one_close(&o);
}

/* Two contexts of this process, connected through the wire (not directly):
 * a write and a read, data checked; then reset, the old descriptor is stale
 * (new generation) and a reconnect with fresh ones works. */
Test(wire_desc, two_contexts_through_the_wire)
{
	struct one a, b;
	one_open(&a);
	one_open(&b);
	size_t n = 1 << 20;
	uint8_t *ba = malloc(n), *bb = malloc(n);
	tu_fill_random(ba, n, 1);
	tu_fill_random(bb, n, 2);
	kinet_mr *ma, *mb;
	cr_assert_eq(kinet_mr_reg(a.pd, ba, n, KINET_ACCESS_ALL, &ma), 0);
	cr_assert_eq(kinet_mr_reg(b.pd, bb, n, KINET_ACCESS_ALL, &mb), 0);
	for (int round = 0; round < 2; round++) {
		uint8_t da[KINET_QP_DESC_MAX], db[KINET_QP_DESC_MAX];
		int la = kinet_qp_export(a.qp, da, sizeof(da));
		int lb = kinet_qp_export(b.qp, db, sizeof(db));
		cr_assert_gt(la, 0);
		cr_assert_gt(lb, 0);
		struct kinet_qp_info ia;
		cr_assert_eq(kinet_qp_desc_parse(da, (size_t)la, &ia), 0);
		cr_assert_eq(kinet_qp_connect_remote(a.qp, db, (size_t)lb), 0);
		cr_assert_eq(kinet_qp_connect_remote(b.qp, da, (size_t)la), 0);
		cr_assert_eq(kinet_qp_connect_remote(a.qp, db, (size_t)lb), -EINVAL); /* RTS already */
		kn_qp *d;
		cr_assert_eq(kinet_qp_device(a.qp, &d), 0);
		kn_ticket_t t;
		size_t off = (size_t)round * 4096;
		cr_assert_eq(kn_put(d, (uint64_t)(uintptr_t)(bb + off), kinet_mr_rkey(mb), ba + off + 100,
				    kinet_mr_lkey(ma), 300000, &t), 0);
		cr_assert_eq(kn_wait(d, t), 0);
		cr_assert_eq(memcmp(bb + off, ba + off + 100, 300000), 0);
		cr_assert_eq(kn_get(d, ba + 500000, kinet_mr_lkey(ma),
				    (uint64_t)(uintptr_t)(bb + 600000), kinet_mr_rkey(mb), 70000, &t),
			     0);
		cr_assert_eq(kn_wait(d, t), 0);
		cr_assert_eq(memcmp(ba + 500000, bb + 600000, 70000), 0);
		/* back to RESET: a new generation, the old descriptor goes stale */
		cr_assert_eq(kinet_qp_modify(a.qp, KINET_QPS_RESET, NULL), 0);
		cr_assert_eq(kinet_qp_modify(b.qp, KINET_QPS_RESET, NULL), 0);
		struct kinet_qp_info ia2;
		uint8_t da2[KINET_QP_DESC_MAX];
		int la2 = kinet_qp_export(a.qp, da2, sizeof(da2));
		cr_assert_eq(kinet_qp_desc_parse(da2, (size_t)la2, &ia2), 0);
		cr_assert_neq(ia.gen, ia2.gen);
	}
	cr_assert_eq(kinet_mr_dereg(ma), 0);
	cr_assert_eq(kinet_mr_dereg(mb), 0);
	one_close(&a);
	one_close(&b);
	free(ba);
	free(bb);
}

/* A descriptor whose wire address the provider cannot use (another address
 * family, a length that is not its format's, port 0, the wildcard address,
 * garbage) is refused with -EINVAL, and the context is not poisoned by it:
 * a good connect afterwards works and moves data byte for byte. */
Test(wire_desc, refused_address_then_good_connect)
{
	struct one a, b;
	one_open(&a);
	one_open(&b);
	uint8_t db[KINET_QP_DESC_MAX];
	int lb = kinet_qp_export(b.qp, db, sizeof(db));
	cr_assert_gt(lb, 64);
	struct kinet_qp_info ib;
	cr_assert_eq(kinet_qp_desc_parse(db, (size_t)lb, &ib), 0);
	uint16_t fam;
	memcpy(&fam, db + 64, 2); /* the address starts with a sockaddr's family */
	for (int kind = 0; kind < 7; kind++) {
		if ((kind == 3 || kind == 4) && fam != 2)
			continue; /* IPv4 only (a string address, shm's: kinds 0-2, 5, 6) */
		uint8_t v[KINET_QP_DESC_MAX];
		memcpy(v, db, (size_t)lb);
		int lv = lb;
		uint16_t f = (uint16_t)(kind == 0 ? 0x4242 : kind == 1 ? 0 : fam);
		memcpy(v + 64, &f, 2);
		if (kind == 2)
			memset(v + 66, 0, 2); /* port 0 */
		if (kind == 3 && fam == 2 /* AF_INET */)
			memset(v + 68, 0, 4); /* the wildcard address */
		if (kind == 4 && fam == 2)
			v[64 + 9] = 1; /* padding not zero */
		if (kind == 5 || kind == 6) {
			/* a length that is not the family's: shorter, longer */
			lv = kind == 5 ? lb - 4 : lb + 12;
			if (kind == 6)
				memset(v + lb, 0, 12);
			uint16_t be = (uint16_t)((lv >> 8) | ((lv & 0xff) << 8));
			uint32_t al = (uint32_t)(lv - 64);
			uint32_t albe = ((al >> 24) & 0xff) | ((al >> 8) & 0xff00) |
					((al << 8) & 0xff0000) | (al << 24);
			memcpy(v + 6, &be, 2);
			memcpy(v + 12, &albe, 4);
		}
		int rc = kinet_qp_connect_remote(a.qp, v, (size_t)lv);
		cr_assert_eq(rc, -EINVAL, "malformed address %d: %d (%s)", kind, rc,
			     kinet_strerror(rc));
		cr_assert_neq(kinet_qp_get_state(a.qp), KINET_QPS_RTS);
	}
	/* the same context connects to a good address afterwards */
	uint8_t da[KINET_QP_DESC_MAX];
	int la = kinet_qp_export(a.qp, da, sizeof(da));
	cr_assert_gt(la, 0);
	cr_assert_eq(kinet_qp_connect_remote(a.qp, db, (size_t)lb), 0);
	cr_assert_eq(kinet_qp_connect_remote(b.qp, da, (size_t)la), 0);
	size_t n = 1 << 20;
	uint8_t *ba = malloc(n), *bb = malloc(n), *exp = malloc(n);
	tu_fill_random(ba, n, 1);
	tu_fill_random(bb, n, 2);
	memcpy(exp, bb, n);
	kinet_mr *ma, *mb;
	cr_assert_eq(kinet_mr_reg(a.pd, ba, n, KINET_ACCESS_ALL, &ma), 0);
	cr_assert_eq(kinet_mr_reg(b.pd, bb, n, KINET_ACCESS_ALL, &mb), 0);
	kn_qp *d;
	cr_assert_eq(kinet_qp_device(a.qp, &d), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(d, (uint64_t)(uintptr_t)(bb + 7), kinet_mr_rkey(mb), ba + 100,
			    kinet_mr_lkey(ma), 300000, &t), 0);
	cr_assert_eq(kn_wait(d, t), 0);
	memcpy(exp + 7, ba + 100, 300000);
	cr_assert_eq(memcmp(bb, exp, n), 0);
	cr_assert_eq(kn_get(d, ba + 500000, kinet_mr_lkey(ma), (uint64_t)(uintptr_t)(bb + 600001),
			    kinet_mr_rkey(mb), 70000, &t), 0);
	cr_assert_eq(kn_wait(d, t), 0);
	cr_assert_eq(memcmp(ba + 500000, bb + 600001, 70000), 0);
	cr_assert_eq(kinet_mr_dereg(ma), 0);
	cr_assert_eq(kinet_mr_dereg(mb), 0);
	one_close(&a);
	one_close(&b);
	free(ba);
	free(bb);
	free(exp);
}

/* A string address (shm's "fi_shm://<pid>:...") is as long as the peer's
 * numbers: one longer than ours, well formed, is not refused as malformed. */
Test(wire_desc, string_address_of_another_length)
{
	struct one a, b;
	one_open(&a);
	one_open(&b);
	uint8_t db[KINET_QP_DESC_MAX];
	int lb = kinet_qp_export(b.qp, db, sizeof(db));
	cr_assert_gt(lb, 64);
	const char *s = (const char *)db + 64;
	const char *sep = memchr(s, ':', (size_t)(lb - 64));
	if (db[lb - 1] != 0 || !sep || strncmp(sep, "://", 3))
		cr_skip_test("the provider's addresses are not strings with a scheme");
	size_t at = (size_t)(sep - s) + 3 + 64;
	uint8_t v[KINET_QP_DESC_MAX];
	int lv = lb + 1;
	cr_assert_leq(lv, (int)sizeof(v));
	memcpy(v, db, at);
	v[at] = '9';
	memcpy(v + at + 1, db + at, (size_t)lb - at);
	uint16_t be = (uint16_t)((lv >> 8) | ((lv & 0xff) << 8));
	uint32_t al = (uint32_t)(lv - 64);
	uint32_t albe = ((al >> 24) & 0xff) | ((al >> 8) & 0xff00) | ((al << 8) & 0xff0000) |
			(al << 24);
	memcpy(v + 6, &be, 2);
	memcpy(v + 12, &albe, 4);
	int rc = kinet_qp_connect_remote(a.qp, v, (size_t)lv);
	cr_assert_eq(rc, 0, "%.*s: %d (%s)", lv - 64, (const char *)v + 64, rc,
		     kinet_strerror(rc));
	one_close(&a);
	one_close(&b);
}

/* KINET_FI_PROVIDER naming a provider libfabric does not have: the export
 * fails with -ENODEV, and the message names it and the providers there are
 * (tcp among them, which every libfabric build has). */
static char bad_log[4096];
static void bad_cb(int level, const char *msg, void *user)
{
	(void)user;
	if (level == KINET_LOG_ERROR && strstr(msg, "not available")) {
		size_t l = strlen(bad_log);
		snprintf(bad_log + l, sizeof(bad_log) - l, "%s\n", msg);
	}
}

Test(wire_desc, unknown_provider_lists_those_found)
{
	struct one o;
	/* before the first context: the tunables are read once */
	setenv("KINET_FI_PROVIDER", "nonexistent", 1);
	kinet_log_set_callback(bad_cb, NULL);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &o.ctx), 0);
	cr_assert_eq(kinet_pd_alloc(o.ctx, &o.pd), 0);
	cr_assert_eq(kinet_qp_create(o.pd, NULL, &o.qp), 0);
	uint8_t d[KINET_QP_DESC_MAX];
	int n = kinet_qp_export(o.qp, d, sizeof(d));
	kinet_log_set_callback(NULL, NULL);
	unsetenv("KINET_FI_PROVIDER");
	one_close(&o);
	if (n == -ENOSYS || n == -EOPNOTSUPP)
		cr_skip_test("this build has no libfabric wire");
	cr_assert_eq(n, -ENODEV, "export: %d", n);
	cr_assert(strstr(bad_log, "\"nonexistent\"") != NULL, "log: %s", bad_log);
	/* tcp is listed, as a name of its own in the list */
	const char *l = strstr(bad_log, "providers ");
	cr_assert(l != NULL, "log: %s", bad_log);
	cr_assert(strstr(l, " tcp,") || strstr(l, " tcp;") || strstr(l, " tcp\n"), "log: %s",
		  bad_log);
}

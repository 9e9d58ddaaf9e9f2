/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Provider errors on the way to the wire endpoint reach the caller of
 * kinet_qp_export as the errno they mean, not as "no such device": this
 * program interposes libfabric's fi_fabric (its definition here comes first
 * for libkinet) and wraps the fabric, domain and endpoint it returns, so
 * that one chosen step fails as a provider out of memory would.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <kinet/kinet.h>
#include <kinet/net.h>
#if __has_include(<rdma/fabric.h>)
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#define HAVE_FI 1
#endif

#ifdef HAVE_FI
enum { FAIL_NONE, FAIL_FABRIC, FAIL_DOMAIN, FAIL_ENABLE };
static int fail_at;
static int fail_rc = -FI_ENOMEM;

static struct fi_ops_fabric fab_ops, *fab_real;
static struct fi_ops_domain dom_ops, *dom_real;
static struct fi_ops ep_ops, *ep_real;

static int ep_control(struct fid *fid, int command, void *arg)
{
	if (command == FI_ENABLE && fail_at == FAIL_ENABLE)
		return fail_rc;
	return ep_real->control(fid, command, arg);
}

static int dom_endpoint(struct fid_domain *dom, struct fi_info *info, struct fid_ep **ep,
			void *context)
{
	int rc = dom_real->endpoint(dom, info, ep, context);
	if (rc == 0) {
		ep_real = (*ep)->fid.ops;
		ep_ops = *ep_real;
		ep_ops.control = ep_control;
		(*ep)->fid.ops = &ep_ops;
	}
	return rc;
}

static int fab_domain(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **dom,
		      void *context)
{
	if (fail_at == FAIL_DOMAIN)
		return fail_rc;
	int rc = fab_real->domain(fab, info, dom, context);
	if (rc == 0) {
		dom_real = (*dom)->ops;
		dom_ops = *dom_real;
		dom_ops.endpoint = dom_endpoint;
		(*dom)->ops = &dom_ops;
	}
	return rc;
}

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	int (*real)(struct fi_fabric_attr *, struct fid_fabric **, void *) =
		(int (*)(struct fi_fabric_attr *, struct fid_fabric **, void *))dlsym(RTLD_NEXT,
										  "fi_fabric");
	static __thread int inside; /* libfabric's own versions call it again */
	if (!real)
		return -FI_ENOSYS;
	if (inside)
		return real(attr, fabric, context);
	if (fail_at == FAIL_FABRIC)
		return fail_rc;
	inside = 1;
	int rc = real(attr, fabric, context);
	inside = 0;
	if (rc == 0) {
		fab_real = (*fabric)->ops;
		fab_ops = *fab_real;
		fab_ops.domain = fab_domain;
		fab_ops.domain2 = NULL; /* fi_domain then takes ops->domain */
		(*fabric)->ops = &fab_ops;
	}
	return rc;
}

/* Export with the step `at` failing with rc, then without: the errors and
 * the success of the retry. */
static void one(int at, int rc, int want)
{
	setenv("FI_TCP_IFACE", "lo", 1);
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	cr_assert_eq(kinet_qp_create(pd, NULL, &qp), 0);
	uint8_t d[KINET_QP_DESC_MAX];
	fail_at = FAIL_NONE;
	int n = kinet_qp_export(qp, d, sizeof(d));
	if (n == -ENODEV || n == -EOPNOTSUPP)
		cr_skip_test("this build has no libfabric wire (or its provider is missing)");
	cr_assert_gt(n, 0);
	cr_assert_eq(kinet_qp_destroy(qp), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
	/* a fresh context: its endpoint is created by the next export */
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	cr_assert_eq(kinet_qp_create(pd, NULL, &qp), 0);
	fail_at = at;
	fail_rc = rc;
	n = kinet_qp_export(qp, d, sizeof(d));
	cr_assert_eq(n, want, "export with step %d failing (%d): %d (%s), expected %d (%s)", at, rc,
		     n, kinet_strerror(n), want, kinet_strerror(want));
	fail_at = FAIL_NONE;
	n = kinet_qp_export(qp, d, sizeof(d)); /* the endpoint is created now */
	cr_assert_gt(n, 0, "export after the failure: %d (%s)", n, kinet_strerror(n));
	cr_assert_eq(kinet_qp_destroy(qp), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}

Test(wire_errno, enable_out_of_memory)
{
	one(FAIL_ENABLE, -FI_ENOMEM, -ENOMEM);
}

Test(wire_errno, fabric_out_of_memory)
{
	one(FAIL_FABRIC, -FI_ENOMEM, -ENOMEM);
}

Test(wire_errno, domain_busy)
{
	one(FAIL_DOMAIN, -FI_EAGAIN, -EAGAIN);
}

/* libfabric's own codes (beyond errno) are not passed through as numbers
 * nobody knows: a failure the provider does not explain leaves it not
 * available (and the log says what it said). */
Test(wire_errno, enable_provider_specific_error)
{
	one(FAIL_ENABLE, -FI_EOTHER, -ENODEV);
}
#else
Test(wire_errno, enable_out_of_memory)
{
	cr_skip_test("this build has no libfabric");
}
#endif

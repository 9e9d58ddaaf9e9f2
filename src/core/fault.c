/* SPDX-License-Identifier: BSD-3-Clause */
/* fault.c - the fault-injection grammar (kinet_fault_add) and matching. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

static const struct {
	const char *name;
	int action;
} actions[] = {{"error", KF_ERROR}, {"delay", KF_DELAY},   {"drop", KF_DROP},
	       {"corrupt", KF_CORRUPT}, {"silent", KF_SILENT}, {"cqfull", KF_CQFULL},
	       {"dup", KF_DUP}};

static const struct {
	const char *name;
	int op;
} ops[] = {{"nop", KN_OPCODE_NOP},       {"write", KN_OPCODE_RDMA_WRITE},
	   {"write_imm", KN_OPCODE_RDMA_WRITE_IMM}, {"send", KN_OPCODE_SEND},
	   {"send_imm", KN_OPCODE_SEND_IMM},   {"read", KN_OPCODE_RDMA_READ},
	   {"cas", KN_OPCODE_ATOMIC_CS},       {"fadd", KN_OPCODE_ATOMIC_FA},
	   {"any", -1}};

static const struct {
	const char *name;
	uint32_t synd;
} synds[] = {{"local_len", KN_SYND_LOCAL_LENGTH_ERR},   {"local_qp_op", KN_SYND_LOCAL_QP_OP_ERR},
	     {"local_prot", KN_SYND_LOCAL_PROT_ERR},    {"bad_resp", KN_SYND_BAD_RESP_ERR},
	     {"remote_inval", KN_SYND_REMOTE_INVAL_REQ_ERR},
	     {"remote_access", KN_SYND_REMOTE_ACCESS_ERR}, {"remote_op", KN_SYND_REMOTE_OP_ERR},
	     {"retry_exc", KN_SYND_TRANSPORT_RETRY_EXC_ERR},
	     {"rnr_exc", KN_SYND_RNR_RETRY_EXC_ERR}};

const char *kinet_fault_action_str(int a)
{
	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (actions[i].action == a)
			return actions[i].name;
	return "?";
}

/* A whole unsigned number (decimal or 0x hex) up to max: 0 or -1. */
static int num(const char *v, uint64_t max, uint64_t *out)
{
	if (!*v || *v == '-' || *v == '+' || isspace((unsigned char)*v))
		return -1;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	if (errno || *end || x > max)
		return -1;
	*out = x;
	return 0;
}

static int parse_rule(char *txt, const char *who, struct kinet_fault_rule *r)
{
	memset(r, 0, sizeof(*r));
	r->op = -1;
	r->every = 1;
	r->synd = KN_SYND_REMOTE_ACCESS_ERR;
	r->us = 1000;
	bool have_every = false;
	char *save = NULL;
	for (char *it = strtok_r(txt, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*it))
			it++;
		char *eq = strchr(it, '=');
		if (!eq) {
			KLOG_ERR("%s: fault rule: \"%s\" is not key=value", who, it);
			return -EINVAL;
		}
		*eq = 0;
		char *k = it, *v = eq + 1;
		/* spaces around keys and values are allowed */
		for (char *z = eq - 1; z >= k && isspace((unsigned char)*z); z--)
			*z = 0;
		while (isspace((unsigned char)*v))
			v++;
		for (char *z = v + strlen(v) - 1; z >= v && isspace((unsigned char)*z); z--)
			*z = 0;
		uint64_t x;
		if (!strcmp(k, "action")) {
			for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
				if (!strcmp(v, actions[i].name))
					r->action = actions[i].action;
			if (!r->action) {
				KLOG_ERR("%s: fault rule: unknown action \"%s\" (error, delay, drop, "
					 "dup, corrupt, silent, cqfull)",
					 who, v);
				return -EINVAL;
			}
		} else if (!strcmp(k, "qp")) {
			if (num(v, 0xffffff, &x) || x == 0) {
				KLOG_ERR("%s: fault rule: qp=%s is not a QP number", who, v);
				return -EINVAL;
			}
			r->qpn = (uint32_t)x;
		} else if (!strcmp(k, "op")) {
			int found = 0;
			for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
				if (!strcmp(v, ops[i].name)) {
					r->op = ops[i].op;
					found = 1;
				}
			if (!found) {
				KLOG_ERR("%s: fault rule: unknown op \"%s\" (write, write_imm, read, "
					 "send, send_imm, cas, fadd, nop, any)",
					 who, v);
				return -EINVAL;
			}
		} else if (!strcmp(k, "every")) {
			if (num(v, UINT32_MAX, &x) || x == 0) {
				KLOG_ERR("%s: fault rule: every=%s must be a number >= 1", who, v);
				return -EINVAL;
			}
			r->every = x;
			have_every = true;
		} else if (!strcmp(k, "prob")) {
			char *end;
			double p = strtod(v, &end);
			if (!*v || *end || !(p > 0.0 && p <= 1.0)) {
				KLOG_ERR("%s: fault rule: prob=%s must be in (0, 1]", who, v);
				return -EINVAL;
			}
			r->prob = p;
		} else if (!strcmp(k, "after")) {
			if (num(v, UINT64_MAX / 2, &x)) {
				KLOG_ERR("%s: fault rule: after=%s is not a number", who, v);
				return -EINVAL;
			}
			r->after = x;
		} else if (!strcmp(k, "count")) {
			if (num(v, UINT64_MAX / 2, &x) || x == 0) {
				KLOG_ERR("%s: fault rule: count=%s must be a number >= 1", who, v);
				return -EINVAL;
			}
			r->count = x;
		} else if (!strcmp(k, "synd")) {
			int found = 0;
			for (size_t i = 0; i < sizeof(synds) / sizeof(synds[0]); i++)
				if (!strcmp(v, synds[i].name)) {
					r->synd = synds[i].synd;
					found = 1;
				}
			if (!found && (num(v, 0xff, &x) || x == 0 || x == KN_SYND_WR_FLUSH_ERR)) {
				KLOG_ERR("%s: fault rule: synd=%s is not an error syndrome (a name: "
					 "local_prot, remote_access, remote_op, remote_inval, retry_exc, "
					 "rnr_exc, local_len, local_qp_op, bad_resp; or 1 .. 255 but not "
					 "the flush 5)",
					 who, v);
				return -EINVAL;
			}
			if (!found)
				r->synd = (uint32_t)x;
		} else if (!strcmp(k, "us")) {
			if (num(v, 60000000, &x)) {
				KLOG_ERR("%s: fault rule: us=%s must be 0 .. 60000000", who, v);
				return -EINVAL;
			}
			r->us = x;
		} else if (!strcmp(k, "byte")) {
			if (num(v, 1u << 30, &x)) {
				KLOG_ERR("%s: fault rule: byte=%s is not an offset", who, v);
				return -EINVAL;
			}
			r->byte = (uint32_t)x;
		} else {
			KLOG_ERR("%s: fault rule: unknown key \"%s\" (action, qp, op, every, prob, "
				 "after, count, synd, us, byte)",
				 who, k);
			return -EINVAL;
		}
	}
	if (!r->action) {
		KLOG_ERR("%s: fault rule without action=", who);
		return -EINVAL;
	}
	if (have_every && r->prob > 0) {
		KLOG_ERR("%s: fault rule: every= and prob= exclude each other", who);
		return -EINVAL;
	}
	return 0;
}

int kinet_fault_parse(const char *spec, const char *who, struct kinet_fault_set **out)
{
	*out = NULL;
	if (!spec || !*spec)
		return 0;
	char *copy = strdup(spec);
	if (!copy)
		return -ENOMEM;
	int n = 1;
	for (const char *p = spec; *p; p++)
		n += *p == ';';
	struct kinet_fault_set *s = calloc(1, sizeof(*s) + (size_t)n * sizeof(s->r[0]));
	if (!s) {
		free(copy);
		return -ENOMEM;
	}
	char *save = NULL;
	for (char *rule = strtok_r(copy, ";", &save); rule; rule = strtok_r(NULL, ";", &save)) {
		bool blank = true;
		for (const char *p = rule; *p; p++)
			blank &= isspace((unsigned char)*p) != 0;
		if (blank)
			continue;
		if (parse_rule(rule, who, &s->r[s->n])) {
			free(copy);
			free(s);
			return -EINVAL;
		}
		s->n++;
	}
	free(copy);
	if (!s->n) {
		KLOG_ERR("%s: \"%s\": no fault rule", who, spec);
		free(s);
		return -EINVAL;
	}
	*out = s;
	return 0;
}

struct kinet_fault_set *kinet_fault_join(const struct kinet_fault_set *a,
					 const struct kinet_fault_set *b)
{
	int na = a ? a->n : 0, nb = b ? b->n : 0;
	struct kinet_fault_set *s = calloc(1, sizeof(*s) + (size_t)(na + nb) * sizeof(s->r[0]));
	if (!s)
		return NULL;
	for (int i = 0; i < na; i++)
		s->r[s->n++] = a->r[i];
	for (int i = 0; i < nb; i++)
		s->r[s->n++] = b->r[i];
	return s;
}

static __thread uint64_t f_rng;

static double unit_rand(void)
{
	if (!f_rng)
		kinet_random(&f_rng, sizeof(f_rng));
	f_rng ^= f_rng << 13;
	f_rng ^= f_rng >> 7;
	f_rng ^= f_rng << 17;
	return (double)(f_rng >> 11) / 9007199254740992.0;
}

const struct kinet_fault_rule *kinet_fault_match(struct kinet_fault_set *s, int at, uint32_t qpn,
						 int op)
{
	for (int i = 0; i < s->n; i++) {
		struct kinet_fault_rule *r = &s->r[i];
		bool rx = r->action == KF_DROP || r->action == KF_CORRUPT || r->action == KF_DUP;
		if ((at == KF_AT_RX) != rx || (r->qpn && r->qpn != qpn) || (r->op >= 0 && r->op != op))
			continue;
		uint64_t m = atomic_fetch_add(&r->matches, 1) + 1;
		if (m <= r->after)
			continue;
		if (r->prob > 0 ? unit_rand() >= r->prob : (m - r->after) % r->every != 0)
			continue;
		if (r->count && atomic_fetch_add(&r->fired, 1) >= r->count)
			continue;
		if (!r->count)
			atomic_fetch_add(&r->fired, 1);
		return r;
	}
	return NULL;
}

int kinet_fault_add(kinet_ctx *ctx, const char *spec)
{
	if (!ctx || !spec)
		return -EINVAL;
	if (!ctx->ops->fault_set)
		return kinet_backend_unsupported(ctx, "fault injection");
	struct kinet_fault_set *s;
	int rc = kinet_fault_parse(spec, "kinet_fault_add", &s);
	if (rc)
		return rc;
	if (!s) {
		KLOG_ERR("kinet_fault_add: empty rule");
		return -EINVAL;
	}
	int n = s->n;
	rc = ctx->ops->fault_set(ctx, s); /* takes s (appended to the rules in force) */
	return rc ? rc : n;
}

int kinet_fault_clear(kinet_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	if (!ctx->ops->fault_set)
		return kinet_backend_unsupported(ctx, "fault injection");
	return ctx->ops->fault_set(ctx, NULL);
}

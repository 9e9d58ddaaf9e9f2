/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault.h - fault-injection rules (kinet_fault_add, KINET_FAULT): parsed
 * here, applied by the software NIC (engine.c at each WQE, the wire's
 * receive path for wire messages). Grammar: kinet/kinet.h, kinet_fault_add.
 */
#ifndef KINET_CORE_FAULT_H
#define KINET_CORE_FAULT_H
#include <stdatomic.h>
#include <stdint.h>

enum kinet_fault_action {
	KF_ERROR = 1,   /* complete the WQE with an error CQE */
	KF_DELAY = 2,   /* hold the WQE for us microseconds */
	KF_DROP = 3,    /* drop a received wire request */
	KF_CORRUPT = 4, /* flip one payload byte of a received wire request */
	KF_SILENT = 5,  /* the peer stops answering: the WQE times out */
	KF_CQFULL = 6,  /* the send CQ looks full for us microseconds */
	KF_DUP = 7,     /* a received wire request arrives twice */
};
/* Where a rule is looked at. */
enum { KF_AT_WQE = 1, KF_AT_RX = 2 };

struct kinet_fault_rule {
	int action;        /* enum kinet_fault_action */
	uint32_t qpn;      /* 0: every QP */
	int op;            /* KN_OPCODE_*, -1: any */
	uint64_t every;    /* every Nth match (1: each) */
	double prob;       /* > 0: with this probability instead */
	uint64_t after;    /* skip the first matches */
	uint64_t count;    /* most injections (0: no limit) */
	uint32_t synd;     /* error: the syndrome */
	uint64_t us;       /* delay, cqfull */
	uint32_t byte;     /* corrupt: payload offset */
	_Atomic uint64_t matches, fired;
};

struct kinet_fault_set {
	int n;
	struct kinet_fault_rule r[];
};

/* Parses spec (NULL or "": no rules, *out NULL). 0, or -EINVAL with what
 * is wrong logged (naming `who`). */
int kinet_fault_parse(const char *spec, const char *who, struct kinet_fault_set **out);
/* Appends b's rules to a (either may be NULL); frees neither. NULL on
 * -ENOMEM. */
struct kinet_fault_set *kinet_fault_join(const struct kinet_fault_set *a,
					 const struct kinet_fault_set *b);
/* The rule that fires now for a WQE or message of QP qpn, opcode op, looked
 * at in place `at` (KF_AT_*), or NULL. Thread-safe. */
const struct kinet_fault_rule *kinet_fault_match(struct kinet_fault_set *s, int at, uint32_t qpn,
						 int op);
const char *kinet_fault_action_str(int action);

#endif

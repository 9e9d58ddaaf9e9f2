/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registry of tunables (tunables.def): the environment is read and every
 * value checked once, at the first access; malformed values are reported
 * once, after that read (the report logs, and logging reads KINET_LOG). The
 * rules are in kinet/kinet.h, at struct kinet_tunable.
 */
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "core/internal.h"

enum kt_type { T_INT, T_BOOL, T_SIZE, T_MS, T_US, T_ENUM, T_STR };
#define KT_T_INT T_INT
#define KT_T_BOOL T_BOOL
#define KT_T_SIZE T_SIZE
#define KT_T_MS T_MS
#define KT_T_US T_US
#define KT_T_ENUM T_ENUM
#define KT_T_STR T_STR

struct kt_decl {
	const char *name, *def, *words, *help;
	int type;
	long long min, max;
	unsigned flags;
};

static const struct kt_decl decl[KT_COUNT] = {
#define KT_DEF(n, t, d, lo, hi, w, f, h) [KT_ID_##n] = {"KINET_" #n, d, w, h, KT_T_##t, lo, hi, f},
#include "core/tunables.def"
#undef KT_DEF
};

/* Another program's variable that sets a tunable too (tunables.def, KT_ALIAS). */
static const struct {
	int id;
	const char *var;
} alias[] = {
#define KT_DEF(...)
#define KT_ALIAS(n, var) {KT_ID_##n, var},
#include "core/tunables.def"
#undef KT_ALIAS
#undef KT_DEF
	{-1, NULL},
};

union kt_val {
	long long i;
	uint64_t u;
	bool b;
	const char *s;
};

struct kt_ent {
	struct kinet_tunable pub;
	union kt_val v;   /* in use */
	int idx;          /* enum: position of the word */
	const char *text; /* in use, as text, unmasked */
	char canon[48];   /* canonical text of non-strings */
	char allowed[160];
	char shown[96];  /* the environment's value as quoted in reports */
	char why[128];   /* what is wrong with it */
	char error[640]; /* the report (fits every part at its longest) */
	const char *src; /* the variable the value comes from (the name, or an alias) */
	char note[256];  /* a warning that is not an error (an alias not used) */
};

static struct kt_ent ent[KT_COUNT];
static struct kinet_tun_values vals;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int report_pending;

/* ---- parsing -------------------------------------------------------------------- */

/* A decimal magnitude with an optional '-': no leading zero, no 0x. *end is
 * left after the digits. 0 or -EINVAL with why. */
static int parse_dec(const char *s, bool *neg, uint64_t *mag, const char **end, char *why,
		     size_t wl)
{
	const char *p = s;
	*neg = *p == '-';
	if (*neg)
		p++;
	if (!isdigit((unsigned char)*p)) {
		snprintf(why, wl, "not a decimal number");
		return -EINVAL;
	}
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		snprintf(why, wl, "hexadecimal is not read (decimal only)");
		return -EINVAL;
	}
	if (p[0] == '0' && isdigit((unsigned char)p[1])) {
		snprintf(why, wl, "a leading zero is not allowed (decimal only: it is not read as "
				  "octal)");
		return -EINVAL;
	}
	uint64_t m = 0;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (m > (UINT64_MAX - d) / 10) {
			snprintf(why, wl, "too large");
			return -EINVAL;
		}
		m = m * 10 + d;
	}
	*mag = m;
	*end = p;
	return 0;
}

static int garbage(const char *end, char *why, size_t wl)
{
	snprintf(why, wl, "unexpected \"%.16s\" after the number", end);
	return -EINVAL;
}

/* Bounds of unsigned types; min and max are non-negative in tunables.def. */
static int in_range_u(const struct kt_decl *d, uint64_t u, const char *unit, char *why,
		      size_t wl)
{
	if (u < (uint64_t)d->min) {
		snprintf(why, wl, "below the minimum %lld%s%s", d->min, *unit ? " " : "", unit);
		return -EINVAL;
	}
	if (u > (uint64_t)d->max) {
		snprintf(why, wl, "above the maximum %lld%s%s", d->max, *unit ? " " : "", unit);
		return -EINVAL;
	}
	return 0;
}

static int parse_int(const struct kt_decl *d, const char *s, union kt_val *v, char *why,
		     size_t wl)
{
	bool neg;
	uint64_t m;
	const char *end;
	if (parse_dec(s, &neg, &m, &end, why, wl))
		return -EINVAL;
	if (*end)
		return garbage(end, why, wl);
	if (m > (uint64_t)LLONG_MAX + (neg ? 1 : 0)) {
		snprintf(why, wl, "too large");
		return -EINVAL;
	}
	long long x = neg ? (long long)(0 - m) : (long long)m;
	if (x < d->min) {
		snprintf(why, wl, "below the minimum %lld", d->min);
		return -EINVAL;
	}
	if (x > d->max) {
		snprintf(why, wl, "above the maximum %lld", d->max);
		return -EINVAL;
	}
	v->i = x;
	return 0;
}

static int mul_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	if (b && a > UINT64_MAX / b)
		return -EINVAL;
	*r = a * b;
	return 0;
}

static uint64_t size_suffix(char c)
{
	c = (char)toupper((unsigned char)c);
	return c == 'K' ? 1ull << 10 : c == 'M' ? 1ull << 20 : c == 'G' ? 1ull << 30
	       : c == 'T' ? 1ull << 40 : 0;
}

/* Bytes: decimal with an optional suffix K, M, G or T (2^10 .. 2^40, any
 * case); with a suffix, a fraction of up to 6 digits too (1.5G, as NVSHMEM
 * reads its sizes), rounded up to a whole byte. */
static int parse_size(const struct kt_decl *d, const char *s, union kt_val *v, char *why,
		      size_t wl)
{
	bool neg;
	uint64_t m, mult = 1, frac = 0, fden = 1;
	const char *end;
	if (parse_dec(s, &neg, &m, &end, why, wl))
		return -EINVAL;
	if (neg) {
		snprintf(why, wl, "a size is not negative");
		return -EINVAL;
	}
	if (*end == '.') {
		const char *f = end + 1;
		int k = 0;
		for (; isdigit((unsigned char)*f); f++, k++) {
			if (k == 6) {
				snprintf(why, wl, "more than 6 digits after the point");
				return -EINVAL;
			}
			frac = frac * 10 + (uint64_t)(*f - '0');
			fden *= 10;
		}
		if (!k || !*f || !size_suffix(*f)) {
			snprintf(why, wl, "a fraction needs digits and a suffix K, M, G or T");
			return -EINVAL;
		}
		end = f;
	}
	if (*end) {
		mult = size_suffix(*end);
		if (!mult || end[1])
			return garbage(end, why, wl);
	}
	uint64_t part = (frac * mult + fden - 1) / fden; /* frac < 10^6, mult <= 2^40 */
	if (mul_ok(m, mult, &v->u) || v->u > UINT64_MAX - part) {
		snprintf(why, wl, "too large");
		return -EINVAL;
	}
	v->u += part;
	return in_range_u(d, v->u, "bytes", why, wl);
}

static int parse_duration(const struct kt_decl *d, const char *s, union kt_val *v, char *why,
			  size_t wl)
{
	static const struct {
		const char *sfx;
		uint64_t ns;
	} units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
	const char *unit = d->type == T_MS ? "ms" : "us";
	uint64_t unit_ns = d->type == T_MS ? 1000000 : 1000;
	bool neg;
	uint64_t m;
	const char *end;
	if (parse_dec(s, &neg, &m, &end, why, wl))
		return -EINVAL;
	if (neg) {
		snprintf(why, wl, "a duration is not negative");
		return -EINVAL;
	}
	if (*end) {
		size_t k = 0;
		while (k < 4 && strcasecmp(end, units[k].sfx))
			k++;
		if (k == 4)
			return garbage(end, why, wl);
		uint64_t ns;
		if (mul_ok(m, units[k].ns, &ns)) {
			snprintf(why, wl, "too large");
			return -EINVAL;
		}
		if (ns % unit_ns) {
			snprintf(why, wl, "not a whole number of %s", unit);
			return -EINVAL;
		}
		m = ns / unit_ns;
	}
	v->u = m;
	return in_range_u(d, m, unit, why, wl);
}

static int parse_bool(const char *s, union kt_val *v, char *why, size_t wl)
{
	static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
	for (int i = 0; i < 4; i++) {
		if (!strcasecmp(s, yes[i]) || !strcasecmp(s, no[i])) {
			v->b = !strcasecmp(s, yes[i]);
			return 0;
		}
	}
	snprintf(why, wl, "not a boolean");
	return -EINVAL;
}

/* The word of words that s names (the word or its alias, any case): its
 * position, with the word copied to out; -EINVAL when none. */
static int parse_enum(const char *words, const char *s, char *out, size_t ol, char *why,
		      size_t wl)
{
	int pos = 0;
	for (const char *w = words; *w; pos++) {
		size_t n = strcspn(w, " ");
		char tok[48];
		snprintf(tok, sizeof(tok), "%.*s", (int)n, w);
		char *bar = strchr(tok, '|');
		if (bar)
			*bar = '\0';
		if (!strcasecmp(s, tok) || (bar && !strcasecmp(s, bar + 1))) {
			snprintf(out, ol, "%s", tok);
			return pos;
		}
		w += n;
		while (*w == ' ')
			w++;
	}
	snprintf(why, wl, "not one of the allowed words");
	return -EINVAL;
}

/* Parses s as a value of e's tunable into *v (and the canonical text). */
static int parse(const struct kt_decl *d, const char *s, union kt_val *v, int *idx, char *canon,
		 size_t cl, char *why, size_t wl)
{
	int rc = 0;
	*idx = 0;
	switch (d->type) {
	case T_INT:
		if (!*s) { /* not set (a tunable without a default) */
			v->i = -1;
			canon[0] = '\0';
			return 0;
		}
		rc = parse_int(d, s, v, why, wl);
		if (!rc)
			snprintf(canon, cl, "%lld", v->i);
		return rc;
	case T_BOOL:
		rc = parse_bool(s, v, why, wl);
		if (!rc)
			snprintf(canon, cl, "%d", v->b ? 1 : 0);
		return rc;
	case T_SIZE:
	case T_MS:
	case T_US:
		rc = d->type == T_SIZE ? parse_size(d, s, v, why, wl)
				       : parse_duration(d, s, v, why, wl);
		if (!rc)
			snprintf(canon, cl, "%" PRIu64, v->u);
		return rc;
	case T_ENUM:
		rc = parse_enum(d->words, s, canon, cl, why, wl);
		if (rc < 0)
			return rc;
		*idx = rc;
		v->s = canon;
		return 0;
	default: /* T_STR */
		if (d->max > 0 && strlen(s) > (size_t)d->max) {
			snprintf(why, wl, "longer than %lld characters", d->max);
			return -EINVAL;
		}
		v->s = s;
		return 0;
	}
}

/* ---- the registry ------------------------------------------------------------------ */

static void fmt_size(char *b, size_t bl, uint64_t u)
{
	if (u && !(u % (1ull << 40)))
		snprintf(b, bl, "%" PRIu64 "T", u >> 40);
	else if (u && !(u % (1ull << 30)))
		snprintf(b, bl, "%" PRIu64 "G", u >> 30);
	else if (u && !(u % (1ull << 20)))
		snprintf(b, bl, "%" PRIu64 "M", u >> 20);
	else if (u && !(u % (1ull << 10)))
		snprintf(b, bl, "%" PRIu64 "K", u >> 10);
	else
		snprintf(b, bl, "%" PRIu64, u);
}

static void describe_allowed(const struct kt_decl *d, char *b, size_t bl)
{
	char lo[24], hi[24];
	switch (d->type) {
	case T_INT: snprintf(b, bl, "%lld .. %lld", d->min, d->max); break;
	case T_BOOL: snprintf(b, bl, "1 or 0 (also true/false, yes/no, on/off)"); break;
	case T_SIZE:
		fmt_size(lo, sizeof(lo), (uint64_t)d->min);
		fmt_size(hi, sizeof(hi), (uint64_t)d->max);
		snprintf(b, bl, "%s .. %s bytes", lo, hi);
		break;
	case T_MS:
	case T_US:
		snprintf(b, bl, "%lld .. %lld %s", d->min, d->max, d->type == T_MS ? "ms" : "us");
		break;
	case T_ENUM: {
		size_t o = 0;
		b[0] = '\0';
		for (const char *w = d->words; *w && o < bl;) {
			size_t n = strcspn(w, " ");
			const char *bar = memchr(w, '|', n);
			size_t wn = bar ? (size_t)(bar - w) : n;
			int k = bar ? snprintf(b + o, bl - o, "%s%.*s (or %.*s)", o ? ", " : "",
					       (int)wn, w, (int)(n - wn - 1), bar + 1)
				    : snprintf(b + o, bl - o, "%s%.*s", o ? ", " : "", (int)n, w);
			o += k > 0 ? (size_t)k : 0;
			w += n;
			while (*w == ' ')
				w++;
		}
		break;
	}
	default:
		if (d->max > 0)
			snprintf(b, bl, "text of at most %lld characters", d->max);
		else
			snprintf(b, bl, "any text");
		break;
	}
}

/* The environment's value as reports quote it: printable, bounded, and for
 * a secret only its length. */
static void quote(const struct kt_decl *d, const char *s, char *b, size_t bl)
{
	size_t n = strlen(s);
	if (d->flags & KT_SECRET) {
		snprintf(b, bl, "(%zu characters)", n);
		return;
	}
	size_t o = 0, max = 64;
	for (size_t i = 0; i < n && i < max && o + 1 < bl; i++)
		b[o++] = isprint((unsigned char)s[i]) ? s[i] : '?';
	b[o] = '\0';
	if (n > max && o + 4 < bl)
		strcat(b, "...");
}

static const char *refuser(unsigned flags)
{
	return flags & KT_OPEN ? "kinet_open" : flags & KT_BOOT ? "kinet_boot_init" : NULL;
}

static void load_one(int i)
{
	const struct kt_decl *d = &decl[i];
	struct kt_ent *e = &ent[i];
	e->pub.name = d->name;
	e->pub.def = d->def;
	e->pub.desc = d->help;
	e->pub.type = d->type == T_INT    ? KINET_TUNABLE_INT
		      : d->type == T_BOOL ? KINET_TUNABLE_BOOL
		      : d->type == T_SIZE ? KINET_TUNABLE_SIZE
		      : d->type == T_ENUM ? KINET_TUNABLE_ENUM
		      : d->type == T_STR  ? KINET_TUNABLE_STRING
					  : KINET_TUNABLE_DURATION;
	e->pub.unit = d->type == T_MS   ? "ms"
		      : d->type == T_US   ? "us"
		      : d->type == T_SIZE ? "bytes"
					  : "";
	e->pub.refused_by = refuser(d->flags);
	e->pub.flags = (d->flags & KT_SECRET) ? KINET_TUNABLE_SECRET : 0;
	describe_allowed(d, e->allowed, sizeof(e->allowed));
	e->pub.allowed = e->allowed;

	/* the default: tunables.def is checked by test_tunables to parse */
	char why[128];
	if (parse(d, d->def, &e->v, &e->idx, e->canon, sizeof(e->canon), why, sizeof(why)) < 0)
		snprintf(e->error, sizeof(e->error), "%s: the default \"%s\" is malformed (%s)",
			 d->name, d->def, why);
	const char *env = getenv(d->name);
	e->src = d->name;
	for (int a = 0; alias[a].var; a++) {
		const char *aenv = alias[a].id == i ? getenv(alias[a].var) : NULL;
		if (!aenv || !*aenv)
			continue;
		if (!env || !*env) {
			env = aenv;
			e->src = alias[a].var;
		} else if (strcmp(env, aenv)) {
			char qa[96], qk[96];
			quote(d, aenv, qa, sizeof(qa));
			quote(d, env, qk, sizeof(qk));
			snprintf(e->note, sizeof(e->note), "%s=%s is not used: %s=%s is set and wins",
				 alias[a].var, qa, d->name, qk);
		}
	}
	if (env && *env) {
		e->pub.flags |= KINET_TUNABLE_SET;
		char *copy = strdup(env); /* getenv's storage may change under setenv */
		union kt_val v;
		int idx;
		char canon[sizeof(e->canon)];
		int rc = copy ? parse(d, copy, &v, &idx, canon, sizeof(canon), e->why,
				      sizeof(e->why))
			      : (snprintf(e->why, sizeof(e->why), "out of memory"), -ENOMEM);
		if (rc >= 0) {
			e->v = v;
			e->idx = idx;
			memcpy(e->canon, canon, sizeof(canon));
			if (d->type == T_ENUM)
				e->v.s = e->canon;
		} else {
			free(copy);
			copy = NULL;
			quote(d, env, e->shown, sizeof(e->shown));
			const char *r = refuser(d->flags);
			char instead[160];
			bool boot = d->flags & KT_BOOT;
			if (r)
				snprintf(instead, sizeof(instead),
					 "%s fail%s with -EINVAL until it is fixed (other readers "
					 "see %s%s)",
					 boot ? "kinet_boot_init and kinet_boot_init_env" : r,
					 boot ? "" : "s", d->def[0] ? "the default " : "it not set",
					 d->def);
			else
				snprintf(instead, sizeof(instead), "using the default %s",
					 d->def[0] ? d->def : "(not set)");
			char err[sizeof(e->error)];
			snprintf(err, sizeof(err), "%s=%s: %s; allowed: %s; %s", e->src, e->shown,
				 e->why, e->allowed, instead);
			memcpy(e->error, err, sizeof(err));
		}
		if (copy && d->type == T_STR)
			e->v.s = copy;
		else
			free(copy);
	}
	e->text = d->type == T_STR ? e->v.s : e->canon;
	if ((d->flags & KT_SECRET) && *e->text) {
		snprintf(e->canon, sizeof(e->canon), "(set, %zu characters)", strlen(e->text));
		e->pub.value = e->canon;
	} else {
		e->pub.value = e->text;
	}
	e->pub.error = e->error[0] ? e->error : NULL;
}

#define KT_GET_INT(e) ((e)->v.i)
#define KT_GET_BOOL(e) ((e)->v.b)
#define KT_GET_SIZE(e) ((e)->v.u)
#define KT_GET_MS(e) ((e)->v.u)
#define KT_GET_US(e) ((e)->v.u)
#define KT_GET_ENUM(e) ((e)->v.s)
#define KT_GET_STR(e) ((e)->v.s)

static void load(void)
{
	int bad = 0;
	for (int i = 0; i < KT_COUNT; i++) {
		load_one(i);
		bad |= ent[i].error[0] != '\0' || ent[i].note[0] != '\0';
	}
#define KT_DEF(n, t, ...) vals.n = KT_GET_##t(&ent[KT_ID_##n]);
#include "core/tunables.def"
#undef KT_DEF
	atomic_store(&report_pending, bad);
}

/* Logs the reports of load() (outside pthread_once: logging reads KINET_LOG). */
static void report(void)
{
	for (int i = 0; i < KT_COUNT; i++) {
		if (ent[i].error[0])
			kinet_log(refuser(decl[i].flags) || !ent[i].why[0] ? KINET_LOG_ERROR
									  : KINET_LOG_WARN,
				  "%s", ent[i].error);
		if (ent[i].note[0])
			kinet_log(KINET_LOG_WARN, "%s", ent[i].note);
	}
}

const struct kinet_tun_values *kinet_tun(void)
{
	pthread_once(&once, load);
	if (atomic_load_explicit(&report_pending, memory_order_relaxed) &&
	    atomic_exchange(&report_pending, 0))
		report();
	return &vals;
}

const char *kinet_tun_text(int id)
{
	kinet_tun();
	return id >= 0 && id < KT_COUNT ? ent[id].text : "";
}

int kinet_tun_refused(unsigned scope, const char *who)
{
	kinet_tun();
	int rc = 0;
	for (int i = 0; i < KT_COUNT; i++) {
		if (!(decl[i].flags & scope) || !ent[i].why[0])
			continue;
		KLOG_ERR("%s: refused: %s=%s is malformed (%s; allowed: %s)", who, ent[i].src,
			 ent[i].shown, ent[i].why, ent[i].allowed);
		rc = -EINVAL;
	}
	return rc;
}

/* ---- public API ------------------------------------------------------------------------ */

int kinet_tunable_count(void)
{
	return KT_COUNT;
}

const struct kinet_tunable *kinet_tunable_at(int i)
{
	kinet_tun();
	return (i >= 0 && i < KT_COUNT) ? &ent[i].pub : NULL;
}

static int find(const char *name)
{
	for (int i = 0; name && i < KT_COUNT; i++)
		if (!strcmp(decl[i].name, name))
			return i;
	return -1;
}

const struct kinet_tunable *kinet_tunable_get(const char *name)
{
	return kinet_tunable_at(find(name));
}

const char *kinet_tunable_str(const char *name)
{
	const struct kinet_tunable *t = kinet_tunable_get(name);
	return t ? t->value : NULL;
}

long long kinet_tunable_int(const char *name)
{
	int i = find(name);
	if (i < 0)
		return 0;
	kinet_tun();
	switch (decl[i].type) {
	case T_INT: return ent[i].v.i;
	case T_BOOL: return ent[i].v.b;
	case T_SIZE:
	case T_MS:
	case T_US: return (long long)ent[i].v.u;
	case T_ENUM: return ent[i].idx;
	default: return 0;
	}
}

void kinet_tunables_print(FILE *f)
{
	kinet_tun();
	for (int i = 0; i < KT_COUNT; i++) {
		const struct kinet_tunable *t = &ent[i].pub;
		fprintf(f, "%-26s = %-12s (default %s; %s)  %s\n", t->name, t->value,
			t->def[0] ? t->def : "\"\"", t->allowed, t->desc);
		if (t->error)
			fprintf(f, "%26s   ^ %s\n", "", t->error);
	}
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tunables and logging: every class of malformed value for a tunable of each
 * type is reported once (naming the variable, the value, what is allowed and
 * what happens instead) and refused or replaced by the default as declared;
 * well-formed spellings (suffixes, any case, aliases) read as documented;
 * secrets are masked in every listing; docs/tunables.md is the registry's
 * table; log lines carry host:pid[:rank]; the log callback replaces stderr.
 *
 * The environment is read once per process, at the first use of a tunable:
 * each Criterion test (and each parameter) runs in a fresh process, which
 * sets its variables first.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <kinet/boot.h>
#include <kinet/kinet.h>
#include "../util/testutil.h"

extern char **environ;

/* Removes every KINET_* variable: the test decides what is set. */
static void clean_env(void)
{
	char names[256][64];
	int n = 0;
	for (char **e = environ; *e && n < 256; e++) {
		if (strncmp(*e, "KINET_", 6))
			continue;
		size_t l = strcspn(*e, "=");
		snprintf(names[n++], sizeof(names[0]), "%.*s", (int)l, *e);
	}
	for (int i = 0; i < n; i++)
		unsetenv(names[i]);
	unsetenv("NVSHMEM_SYMMETRIC_SIZE"); /* an alias (KT_ALIAS) */
}

/* ---- a log callback that keeps what it is given -------------------------------- */

#define MAXMSG 256
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static char cap_msg[MAXMSG][1024];
static int cap_level[MAXMSG];
static int cap_n;
static int cap_token;

static void capture(int level, const char *msg, void *user)
{
	cr_assert_eq(user, &cap_token, "the user pointer is passed through");
	pthread_mutex_lock(&cap_lock);
	if (cap_n < MAXMSG) {
		snprintf(cap_msg[cap_n], sizeof(cap_msg[0]), "%s", msg);
		cap_level[cap_n] = level;
	}
	cap_n++;
	pthread_mutex_unlock(&cap_lock);
}

/* Messages captured that contain s. */
static int captured(const char *s)
{
	int k = 0;
	pthread_mutex_lock(&cap_lock);
	for (int i = 0; i < cap_n && i < MAXMSG; i++)
		k += strstr(cap_msg[i], s) != NULL;
	pthread_mutex_unlock(&cap_lock);
	return k;
}

static char *print_all(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	cr_assert_not_null(f);
	kinet_tunables_print(f);
	fclose(f);
	return text;
}

/* Reads every tunable many ways, as a program would over a run. */
static void read_a_lot(void)
{
	for (int r = 0; r < 50; r++) {
		for (int i = 0; i < kinet_tunable_count(); i++) {
			const struct kinet_tunable *t = kinet_tunable_at(i);
			(void)kinet_tunable_int(t->name);
			(void)kinet_tunable_str(t->name);
		}
		(void)kinet_log_get_level();
	}
	free(print_all());
}

/* ---- the registry ------------------------------------------------------------------ */

/* Every default parses, reads back as itself, and the declared metadata is
 * coherent (a duration's unit is the one its name ends with). */
Test(tunables, defaults_are_well_formed)
{
	clean_env();
	kinet_log_set_callback(capture, &cap_token);
	int n = kinet_tunable_count();
	cr_assert_geq(n, 20);
	for (int i = 0; i < n; i++) {
		const struct kinet_tunable *t = kinet_tunable_at(i);
		cr_assert_null(t->error, "%s: %s", t->name, t->error);
		cr_assert_eq(t->flags & KINET_TUNABLE_SET, 0u, "%s", t->name);
		cr_assert_str_eq(t->value, t->def, "%s: the default is canonical", t->name);
		cr_assert_gt(strlen(t->allowed), 2, "%s", t->name);
		cr_assert(t->type >= KINET_TUNABLE_INT && t->type <= KINET_TUNABLE_STRING);
		cr_assert_eq(kinet_tunable_get(t->name), t);
		size_t l = strlen(t->name);
		if (t->type == KINET_TUNABLE_DURATION) {
			const char *sfx = !strcmp(t->unit, "ms") ? "_MS" : "_US";
			cr_assert(!strcmp(t->unit, "ms") || !strcmp(t->unit, "us"), "%s", t->name);
			cr_assert_str_eq(t->name + l - 3, sfx, "%s: unit %s", t->name, t->unit);
		} else if (t->type == KINET_TUNABLE_SIZE) {
			cr_assert_str_eq(t->unit, "bytes");
		} else {
			cr_assert_str_eq(t->unit, "");
		}
		cr_assert(t->refused_by == NULL || !strcmp(t->refused_by, "kinet_open") ||
				  !strcmp(t->refused_by, "kinet_boot_init"),
			  "%s", t->name);
		if (!strncmp(t->name, "KINET_BOOT_", 11))
			cr_assert_str_eq(t->refused_by, "kinet_boot_init", "%s", t->name);
	}
	cr_assert_null(kinet_tunable_get("KINET_NO_SUCH_TUNABLE"));
	cr_assert_null(kinet_tunable_get(NULL));
	cr_assert_eq(kinet_tunable_int("KINET_NO_SUCH_TUNABLE"), 0);
	/* every environment variable the library reads is registered */
	const char *names[] = {"KINET_NO_CUDA", "KINET_LOG", "KINET_BOOT_SECRET",
			       "KINET_RNR_TIMER_US", "KINET_MLX5_EMULATE"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cr_assert_not_null(kinet_tunable_get(names[i]), "%s", names[i]);
	cr_assert_eq(cap_n, 0, "nothing is reported for defaults: %s", cap_msg[0]);
	/* and a context opens */
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *ctx;
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	kinet_close(ctx);
}

/* ---- malformed values ------------------------------------------------------------- */

struct bad {
	char name[32];
	char value[48];
	char why[64]; /* part of the reason given */
};

static struct bad bad_cases[] = {
	/* int */
	{"KINET_ENGINE_THREADS", "-3", "below the minimum 1"},
	{"KINET_ENGINE_THREADS", "65", "above the maximum 64"},
	{"KINET_SQ_DEPTH", "010", "leading zero"},
	{"KINET_SQ_DEPTH", "0x40", "hexadecimal"},
	{"KINET_SQ_DEPTH", "12x", "unexpected \"x\" after the number"},
	{"KINET_SQ_DEPTH", "abc", "not a decimal number"},
	{"KINET_SQ_DEPTH", " 64", "not a decimal number"},
	{"KINET_SQ_DEPTH", "64 ", "unexpected \" \" after the number"},
	{"KINET_SQ_DEPTH", "+64", "not a decimal number"},
	{"KINET_SQ_DEPTH", "99999999999999999999999", "too large"},
	{"KINET_MLX5_GID_INDEX", "-2", "below the minimum -1"},
	{"KINET_MLX5_ACK_TIMEOUT", "32", "above the maximum 31"},
	/* bool */
	{"KINET_ALLOW_HOST_STAGING", "2", "not a boolean"},
	{"KINET_NO_CUDA", "maybe", "not a boolean"},
	/* size */
	{"KINET_NET_RNDV_BYTES", "abc", "not a decimal number"},
	{"KINET_NET_RNDV_BYTES", "-1", "a size is not negative"},
	{"KINET_NET_RNDV_BYTES", "12x", "unexpected \"x\""},
	{"KINET_NET_RNDV_BYTES", "32KB", "unexpected \"KB\""},
	{"KINET_NET_RNDV_BYTES", "010", "leading zero"},
	{"KINET_NET_RNDV_BYTES", "3G", "above the maximum 2147483648 bytes"},
	{"KINET_NET_RNDV_BYTES", "99999999999G", "too large"},
	{"KINET_GPU_SMALL_COPY", "2M", "above the maximum 1048576 bytes"},
	/* duration */
	{"KINET_TIMEOUT_MS", "abc", "not a decimal number"},
	{"KINET_TIMEOUT_MS", "12x", "unexpected \"x\""},
	{"KINET_TIMEOUT_MS", "-5", "a duration is not negative"},
	{"KINET_TIMEOUT_MS", "0", "below the minimum 1 ms"},
	{"KINET_SHMEM_HEAP_SIZE", "1.5", "a fraction needs digits and a suffix"},
	{"KINET_SHMEM_HEAP_SIZE", "1.G", "a fraction needs digits and a suffix"},
	{"KINET_SHMEM_HEAP_SIZE", "1.1234567G", "more than 6 digits after the point"},
	{"KINET_SHMEM_HEAP_SIZE", "2T", "above the maximum 1099511627776 bytes"},
	{"KINET_SHMEM_HEAP_SIZE", "2M", "below the minimum 4194304 bytes"},
	{"KINET_SHMEM_HEAP_SIZE", "4P", "unexpected \"P\""},
	{"KINET_TIMEOUT_MS", "1500us", "not a whole number of ms"},
	{"KINET_TIMEOUT_MS", "2h", "unexpected \"h\""},
	{"KINET_TIMEOUT_MS", "4294967296", "above the maximum 4294967295 ms"},
	{"KINET_RNR_TIMER_US", "010", "leading zero"},
	{"KINET_ENGINE_SLEEP_US", "2s", "above the maximum 1000000 us"},
	/* enum */
	{"KINET_DB_MODE", "blueflam", "not one of the allowed words"},
	{"KINET_BACKEND", "mlx6", "not one of the allowed words"},
	{"KINET_MLX5_QUEUES", "verbs,devx", "not one of the allowed words"},
	{"KINET_LOG", "loud", "not one of the allowed words"},
	{"KINET_LOG", "5", "not one of the allowed words"},
	/* string */
	{"KINET_FI_PROVIDER", "a-provider-name-of-forty-characters-long", "longer than 31"},
	/* bootstrap */
	{"KINET_BOOT_RANK", "-1", "below the minimum 0"},
	{"KINET_BOOT_SIZE", "0", "below the minimum 1"},
	{"KINET_BOOT_MODE", "carrier-pigeon", "not one of the allowed words"},
	{"KINET_BOOT_TIMEOUT_MS", "30 s", "unexpected \" s\""},
};

ParameterizedTestParameters(tunables, malformed)
{
	return cr_make_param_array(struct bad, bad_cases, sizeof(bad_cases) / sizeof(bad_cases[0]));
}

ParameterizedTest(struct bad *c, tunables, malformed)
{
	clean_env();
	cr_assert_eq(setenv(c->name, c->value, 1), 0);
	kinet_log_set_callback(capture, &cap_token);
	const struct kinet_tunable *t = kinet_tunable_get(c->name);
	cr_assert_not_null(t, "%s", c->name);
	cr_assert(t->flags & KINET_TUNABLE_SET);

	/* the report names the variable, the value, why, what is allowed and
	 * what happens instead */
	cr_assert_not_null(t->error, "%s=%s accepted", c->name, c->value);
	char head[128];
	snprintf(head, sizeof(head), "%s=%s: ", c->name, c->value);
	cr_assert_not_null(strstr(t->error, head), "%s", t->error);
	cr_assert_not_null(strstr(t->error, c->why), "%s", t->error);
	char allowed[200];
	snprintf(allowed, sizeof(allowed), "allowed: %s", t->allowed);
	cr_assert_not_null(strstr(t->error, allowed), "%s", t->error);
	if (t->refused_by)
		cr_assert_not_null(strstr(t->error, "with -EINVAL until it is fixed"), "%s",
				   t->error);
	else
		cr_assert_not_null(strstr(t->error, "using the default"), "%s", t->error);

	/* nothing of the malformed value is used: the value in use is the
	 * default, whatever reads it */
	cr_assert_str_eq(t->value, t->def, "%s", c->name);
	cr_assert_str_eq(kinet_tunable_str(c->name), t->def);
	if (t->type == KINET_TUNABLE_INT && t->def[0])
		cr_assert_eq(kinet_tunable_int(c->name), strtoll(t->def, NULL, 10));
	if (t->type == KINET_TUNABLE_SIZE || t->type == KINET_TUNABLE_DURATION)
		cr_assert_eq(kinet_tunable_int(c->name), strtoll(t->def, NULL, 10));
	if (!strcmp(c->name, "KINET_LOG"))
		cr_assert_eq(kinet_log_get_level(), KINET_LOG_WARN);

	/* reported once, however often it is read */
	read_a_lot();
	cr_assert_eq(captured(head), 1, "%d reports of %s", captured(head), head);
	for (int i = 0; i < cap_n; i++)
		if (strstr(cap_msg[i], head))
			cr_assert_eq(cap_level[i],
				     t->refused_by ? KINET_LOG_ERROR : KINET_LOG_WARN);

	/* refused where declared: every call fails, with a line saying why;
	 * otherwise the library works on the default */
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *ctx = NULL;
	struct kinet_boot_attr ba = {.rank = 0, .size = 1};
	kinet_boot *b = NULL;
	int orc = kinet_open(&ca, &ctx);
	int brc = kinet_boot_init(&ba, &b);
	if (t->refused_by && !strcmp(t->refused_by, "kinet_open")) {
		cr_assert_eq(orc, -EINVAL, "kinet_open with %s=%s: %d", c->name, c->value, orc);
		cr_assert_eq(kinet_open(NULL, &ctx), -EINVAL);
		cr_assert_null(ctx);
		cr_assert_eq(captured("kinet_open: refused: "), 2);
		cr_assert_eq(brc, 0, "the bootstrap does not read %s", c->name);
	} else if (t->refused_by) {
		cr_assert_eq(brc, -EINVAL, "kinet_boot_init with %s=%s: %d", c->name, c->value,
			     brc);
		cr_assert_eq(kinet_boot_init_env(&b), -EINVAL);
		cr_assert_null(b);
		cr_assert_eq(captured("kinet_boot_init: refused: "), 1);
		cr_assert_eq(captured("kinet_boot_init_env: refused: "), 1);
		cr_assert_eq(orc, 0, "kinet_open does not read %s", c->name);
	} else {
		cr_assert_eq(orc, 0);
		cr_assert_eq(brc, 0);
	}
	if (ctx)
		kinet_close(ctx);
	if (b)
		kinet_boot_close(b);
	cr_assert_eq(captured(head), 1, "the detailed report is not repeated");
}

/* ---- well-formed spellings ---------------------------------------------------------- */

struct good {
	char name[32];
	char value[48];
	char canon[32];   /* value in use, as text */
	long long number; /* kinet_tunable_int */
};

static struct good good_cases[] = {
	{"KINET_SQ_DEPTH", "64", "64", 64},
	{"KINET_MLX5_PORT", "0", "0", 0},
	{"KINET_MLX5_GID_INDEX", "-1", "-1", -1},
	{"KINET_MLX5_GID_INDEX", "3", "3", 3},
	{"KINET_NET_RNDV_BYTES", "0", "0", 0},
	{"KINET_NET_RNDV_BYTES", "32K", "32768", 32768},
	{"KINET_NET_RNDV_BYTES", "1m", "1048576", 1048576},
	{"KINET_NET_RNDV_BYTES", "2G", "2147483648", 2147483648LL},
	{"KINET_NET_RNDV_BYTES", "1.5K", "1536", 1536},
	{"KINET_NET_RNDV_BYTES", "0.000001k", "1", 1}, /* rounded up to a byte */
	{"KINET_SHMEM_HEAP_SIZE", "1T", "1099511627776", 1099511627776LL},
	{"KINET_SHMEM_HEAP_SIZE", "2.25g", "2415919104", 2415919104LL},
	{"KINET_TIMEOUT_MS", "1500", "1500", 1500},
	{"KINET_TIMEOUT_MS", "2s", "2000", 2000},
	{"KINET_TIMEOUT_MS", "3000000us", "3000", 3000},
	{"KINET_TIMEOUT_MS", "5000000000ns", "5000", 5000},
	{"KINET_TIMEOUT_MS", "7MS", "7", 7},
	{"KINET_RNR_TIMER_US", "1ms", "1000", 1000},
	{"KINET_ALLOW_HOST_STAGING", "yes", "1", 1},
	{"KINET_ALLOW_HOST_STAGING", "OFF", "0", 0},
	{"KINET_ALLOW_HOST_STAGING", "True", "1", 1},
	{"KINET_MLX5_EMULATE", "0", "0", 0},
	{"KINET_DB_MODE", "BlueFlame", "blueflame", 2},
	{"KINET_DB_MODE", "cpu", "cpu", 3},
	{"KINET_LOG", "4", "trace", 4},
	{"KINET_LOG", "ERROR", "error", 0},
	{"KINET_BACKEND", "soft", "soft", 1},
	{"KINET_FI_PROVIDER", "tcp", "tcp", 0},
	{"KINET_BOOT_RANK", "0", "0", 0},
};

ParameterizedTestParameters(tunables, well_formed)
{
	return cr_make_param_array(struct good, good_cases,
				   sizeof(good_cases) / sizeof(good_cases[0]));
}

ParameterizedTest(struct good *c, tunables, well_formed)
{
	clean_env();
	cr_assert_eq(setenv(c->name, c->value, 1), 0);
	kinet_log_set_callback(capture, &cap_token);
	const struct kinet_tunable *t = kinet_tunable_get(c->name);
	cr_assert_not_null(t);
	cr_assert_null(t->error, "%s=%s: %s", c->name, c->value, t->error);
	cr_assert(t->flags & KINET_TUNABLE_SET);
	cr_assert_str_eq(t->value, c->canon, "%s=%s", c->name, c->value);
	cr_assert_eq(kinet_tunable_int(c->name), c->number, "%s=%s: %lld", c->name, c->value,
		     kinet_tunable_int(c->name));
	read_a_lot();
	cr_assert_eq(cap_n, 0, "a well-formed value is not reported: %s", cap_msg[0]);
}

/* The library runs on the parsed value, not on the text: 2s is 2000 ms. */
Test(tunables, suffixed_values_reach_the_queues)
{
	clean_env();
	cr_assert_eq(setenv("KINET_TIMEOUT_MS", "2s", 1), 0);
	cr_assert_eq(setenv("KINET_SQ_DEPTH", "128", 1), 0);
	cr_assert_eq(setenv("KINET_DB_MODE", "CPU", 1), 0);
	struct tu_pair p;
	cr_assert_eq(tu_pair_open(&p, NULL), 0);
	cr_assert_eq(p.da->timeout_ns, 2000000000ull);
	cr_assert_eq(p.da->sq_wqe_cnt, 128);
	cr_assert_eq(p.da->db_mode, KN_DB_CPU_PROXY);
	tu_pair_close(&p);
}

/* Several malformed values: each reported once, kinet_open names each. */
Test(tunables, several_malformed_each_reported_once)
{
	clean_env();
	cr_assert_eq(setenv("KINET_TIMEOUT_MS", "abc", 1), 0);
	cr_assert_eq(setenv("KINET_DB_MODE", "blueflam", 1), 0);
	cr_assert_eq(setenv("KINET_ENGINE_THREADS", "-3", 1), 0);
	cr_assert_eq(setenv("KINET_LOG", "loud", 1), 0);
	kinet_log_set_callback(capture, &cap_token);
	kinet_ctx *ctx;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(kinet_open(NULL, &ctx), -EINVAL);
	read_a_lot();
	const char *heads[] = {"KINET_TIMEOUT_MS=abc: ", "KINET_DB_MODE=blueflam: ",
			       "KINET_ENGINE_THREADS=-3: ", "KINET_LOG=loud: "};
	for (int i = 0; i < 4; i++)
		cr_assert_eq(captured(heads[i]), 1, "%s", heads[i]);
	cr_assert_eq(captured("kinet_open: refused: KINET_TIMEOUT_MS=abc is malformed"), 3);
	cr_assert_eq(captured("kinet_open: refused: KINET_DB_MODE=blueflam is malformed"), 3);
	cr_assert_eq(captured("kinet_open: refused: KINET_ENGINE_THREADS=-3 is malformed"), 3);
	cr_assert_eq(captured("kinet_open: refused: KINET_LOG"), 0, "KINET_LOG is not refused");
	/* the listing shows the reports beside the values in use */
	char *text = print_all();
	for (int i = 0; i < 4; i++)
		cr_assert_not_null(strstr(text, heads[i]), "%s", text);
	free(text);
}

/* The environment is read once: a later change is not seen. */
/* NVSHMEM_SYMMETRIC_SIZE sets KINET_SHMEM_HEAP_SIZE when that is not set
 * (NVSHMEM's syntax: a fraction with a suffix too); when both are set the
 * kinet name wins, with a warning if they differ; a malformed value is
 * reported under its own name and refused like the tunable's. */
Test(tunables, nvshmem_symmetric_size_sets_the_heap)
{
	clean_env();
	cr_assert_eq(setenv("NVSHMEM_SYMMETRIC_SIZE", "1.5G", 1), 0);
	kinet_log_set_callback(capture, &cap_token);
	const struct kinet_tunable *t = kinet_tunable_get("KINET_SHMEM_HEAP_SIZE");
	cr_assert_null(t->error, "%s", t->error);
	cr_assert(t->flags & KINET_TUNABLE_SET);
	cr_assert_str_eq(t->value, "1610612736");
	cr_assert_eq(kinet_tunable_int("KINET_SHMEM_HEAP_SIZE"), 1610612736LL);
	cr_assert_eq(captured("NVSHMEM_SYMMETRIC_SIZE"), 0, "nothing to report");
	cr_assert_not_null(strstr(t->desc, "NVSHMEM_SYMMETRIC_SIZE"), "the help names it");
}

Test(tunables, kinet_heap_size_wins_over_nvshmem_symmetric_size)
{
	clean_env();
	cr_assert_eq(setenv("NVSHMEM_SYMMETRIC_SIZE", "4G", 1), 0);
	cr_assert_eq(setenv("KINET_SHMEM_HEAP_SIZE", "64M", 1), 0);
	kinet_log_set_callback(capture, &cap_token);
	cr_assert_eq(kinet_tunable_int("KINET_SHMEM_HEAP_SIZE"), 64ll << 20);
	read_a_lot();
	cr_assert_eq(captured("NVSHMEM_SYMMETRIC_SIZE=4G is not used: KINET_SHMEM_HEAP_SIZE=64M is "
			      "set and wins"), 1);
}

Test(tunables, nvshmem_symmetric_size_malformed_is_refused)
{
	clean_env();
	cr_assert_eq(setenv("NVSHMEM_SYMMETRIC_SIZE", "12Q", 1), 0);
	kinet_log_set_callback(capture, &cap_token);
	const struct kinet_tunable *t = kinet_tunable_get("KINET_SHMEM_HEAP_SIZE");
	cr_assert_not_null(t->error);
	cr_assert_not_null(strstr(t->error, "NVSHMEM_SYMMETRIC_SIZE=12Q: unexpected \"Q\""), "%s",
			   t->error);
	cr_assert_str_eq(t->value, t->def);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *ctx = NULL;
	cr_assert_eq(kinet_open(&ca, &ctx), -EINVAL);
	cr_assert_eq(captured("kinet_open: refused: NVSHMEM_SYMMETRIC_SIZE=12Q is malformed"), 1);
	cr_assert_eq(captured("NVSHMEM_SYMMETRIC_SIZE=12Q: "), 1);
}

Test(tunables, read_once)
{
	clean_env();
	cr_assert_eq(setenv("KINET_SQ_DEPTH", "64", 1), 0);
	cr_assert_eq(kinet_tunable_int("KINET_SQ_DEPTH"), 64);
	cr_assert_eq(setenv("KINET_SQ_DEPTH", "abc", 1), 0);
	cr_assert_eq(kinet_tunable_int("KINET_SQ_DEPTH"), 64);
	cr_assert_null(kinet_tunable_get("KINET_SQ_DEPTH")->error);
}

/* ---- secrets ---------------------------------------------------------------------------- */

static void random_hex(char *out, size_t nbytes)
{
	unsigned char raw[64];
	FILE *f = fopen("/dev/urandom", "rb");
	cr_assert_not_null(f);
	cr_assert_eq(fread(raw, 1, nbytes, f), nbytes);
	fclose(f);
	for (size_t i = 0; i < nbytes; i++)
		sprintf(out + 2 * i, "%02x", raw[i]);
}

static char *run_capture(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
	}
	buf[len] = 0;
	cr_assert_eq(pclose(f), 0, "%s failed", cmd);
	return buf;
}

Test(tunables, secret_is_never_shown)
{
	clean_env();
	char secret[65];
	random_hex(secret, 16);
	cr_assert_eq(strlen(secret), 32);
	cr_assert_eq(setenv("KINET_BOOT_SECRET", secret, 1), 0);
	/* also a malformed tunable, so that reports are printed too */
	cr_assert_eq(setenv("KINET_SQ_DEPTH", "12x", 1), 0);
	const struct kinet_tunable *t = kinet_tunable_get("KINET_BOOT_SECRET");
	cr_assert(t->flags & KINET_TUNABLE_SECRET);
	cr_assert(t->flags & KINET_TUNABLE_SET);
	cr_assert_str_eq(t->value, "(set, 32 characters)");
	cr_assert_str_eq(kinet_tunable_str("KINET_BOOT_SECRET"), "(set, 32 characters)");
	cr_assert_eq(kinet_tunable_int("KINET_BOOT_SECRET"), 0);
	char *text = print_all();
	cr_assert_null(strstr(text, secret), "the secret is printed:\n%s", text);
	cr_assert_not_null(strstr(text, "(set, 32 characters)"), "%s", text);
	free(text);
	/* no half of it either */
	char half[17];
	memcpy(half, secret, 16);
	half[16] = 0;
	for (int i = 0; i < kinet_tunable_count(); i++) {
		const struct kinet_tunable *u = kinet_tunable_at(i);
		cr_assert_null(strstr(u->value, half), "%s", u->name);
		cr_assert(!u->error || !strstr(u->error, half), "%s", u->name);
	}
#ifdef KINET_INFO_BIN
	/* kinet-info, text and JSON, with the secret in its environment */
	const char *modes[] = {"--no-trial", "--json --no-trial", ""};
	for (int m = 0; m < 3; m++) {
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "%s %s 2>&1", KINET_INFO_BIN, modes[m]);
		char *out = run_capture(cmd);
		cr_assert_null(strstr(out, half), "kinet-info %s shows the secret:\n%s", modes[m],
			       out);
		cr_assert_not_null(strstr(out, "(set, 32 characters)"), "kinet-info %s:\n%s",
				   modes[m], out);
		cr_assert_not_null(strstr(out, "KINET_SQ_DEPTH=12x"), "kinet-info %s:\n%s",
				   modes[m], out);
		free(out);
	}
#endif
}

/* The secret still works where it is used, as its real text: rank 0 takes
 * it from the environment; rank 1, given a wrong one, is refused, then joins
 * with the real one given explicitly. */
struct joiner {
	char addr[64];
	char secret[65];
	int wrong_rc, rc;
	kinet_boot *b;
	pthread_t t;
};

static void *join(void *arg)
{
	struct joiner *j = arg;
	kinet_boot *b = NULL;
	struct kinet_boot_attr a = {.rank = 1, .size = 2, .addr = j->addr, .secret = "wrong"};
	j->wrong_rc = kinet_boot_init(&a, &b);
	a.secret = j->secret;
	j->rc = kinet_boot_init(&a, &j->b);
	if (!j->rc)
		j->rc = kinet_boot_barrier(j->b);
	return NULL;
}

static void listening(const char *addr, void *arg)
{
	struct joiner *j = arg;
	snprintf(j->addr, sizeof(j->addr), "%s", addr);
	cr_assert_eq(pthread_create(&j->t, NULL, join, j), 0);
}

Test(tunables, secret_from_the_environment_is_used)
{
	clean_env();
	struct joiner j = {.rc = -1};
	random_hex(j.secret, 16);
	cr_assert_eq(setenv("KINET_BOOT_SECRET", j.secret, 1), 0);
	struct kinet_boot_attr a = {.rank = 0, .size = 2, .addr = "127.0.0.1:0",
				    .listening = listening, .listening_arg = &j};
	kinet_boot *b;
	cr_assert_eq(kinet_boot_init(&a, &b), 0);
	cr_assert_eq(kinet_boot_barrier(b), 0);
	pthread_join(j.t, NULL);
	cr_assert_eq(j.wrong_rc, -KINET_ESECRET, "a wrong secret: %d", j.wrong_rc);
	cr_assert_eq(j.rc, 0);
	kinet_boot_close(b);
	kinet_boot_close(j.b);
}

/* ---- docs/tunables.md ------------------------------------------------------------------ */

#if defined(KINET_INFO_BIN) && defined(KINET_SOURCE_DIR)
Test(tunables, docs_table_is_the_registry)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "env -i %s --tunables-md", KINET_INFO_BIN);
	char *table = run_capture(cmd);
	for (int i = 0; i < kinet_tunable_count(); i++) {
		char row[80];
		snprintf(row, sizeof(row), "| `%s` |", kinet_tunable_at(i)->name);
		cr_assert_not_null(strstr(table, row), "%s not in the table", row);
	}
	FILE *f = fopen(KINET_SOURCE_DIR "/docs/tunables.md", "r");
	cr_assert_not_null(f, "docs/tunables.md is missing");
	static char doc[1 << 17];
	size_t n = fread(doc, 1, sizeof(doc) - 1, f);
	fclose(f);
	doc[n] = 0;
	const char *begin = "<!-- tunables: begin (kinet-info --tunables-md) -->\n";
	const char *end = "<!-- tunables: end -->";
	char *b = strstr(doc, begin), *e = strstr(doc, end);
	cr_assert(b && e && e > b, "docs/tunables.md lacks the markers");
	b += strlen(begin);
	*e = 0;
	cr_assert_str_eq(b, table,
			 "docs/tunables.md is not the registry: regenerate its table with "
			 "kinet-info --tunables-md; the registry says:\n%s",
			 table);
	free(table);
}
#endif

/* ---- log lines ------------------------------------------------------------------------- */

static char *capture_stderr(void (*fn)(void))
{
	fflush(stderr);
	FILE *tmp = tmpfile();
	cr_assert_not_null(tmp);
	int saved = dup(2);
	cr_assert_geq(saved, 0);
	cr_assert_geq(dup2(fileno(tmp), 2), 0);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	long n = ftell(tmp);
	char *s = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
	rewind(tmp);
	if (n > 0)
		cr_assert_eq(fread(s, 1, (size_t)n, tmp), (size_t)n);
	fclose(tmp);
	return s;
}

static kinet_ctx *g_ctx;
static kinet_pd *g_pd;
static kinet_qp *g_qp;

static void make_qp(void)
{
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &g_ctx), 0);
	cr_assert_eq(kinet_pd_alloc(g_ctx, &g_pd), 0);
	cr_assert_eq(kinet_qp_create(g_pd, NULL, &g_qp), 0);
}

static void free_qp(void)
{
	kinet_qp_destroy(g_qp);
	kinet_pd_free(g_pd);
	kinet_close(g_ctx);
}

/* Logs one error line (an illegal transition). */
static void log_one_error(void)
{
	cr_assert_eq(kinet_qp_modify(g_qp, KINET_QPS_RTS, NULL), -EINVAL);
}

static void my_prefix(char *p, size_t pl, int rank)
{
	char host[256];
	cr_assert_eq(gethostname(host, sizeof(host)), 0);
	host[sizeof(host) - 1] = 0;
	host[strcspn(host, ".")] = 0;
	if (rank >= 0)
		snprintf(p, pl, "%s:%d:%d kinet[error]: ", host, (int)getpid(), rank);
	else
		snprintf(p, pl, "%s:%d kinet[error]: ", host, (int)getpid());
}

Test(log, prefix_has_host_pid_and_rank)
{
	clean_env();
	kinet_log_set_level(KINET_LOG_ERROR);
	make_qp();
	char want[400];
	my_prefix(want, sizeof(want), -1);
	char *out = capture_stderr(log_one_error);
	cr_assert_eq(strncmp(out, want, strlen(want)), 0, "want \"%s\", got \"%s\"", want, out);
	cr_assert_not_null(strstr(out, "illegal transition"), "%s", out);
	cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line: %s", out);
	free(out);
	/* the bootstrap knows the rank: from now on it is in the prefix */
	struct kinet_boot_attr ba = {.rank = 0, .size = 1};
	kinet_boot *b;
	cr_assert_eq(kinet_boot_init(&ba, &b), 0);
	my_prefix(want, sizeof(want), 0);
	out = capture_stderr(log_one_error);
	cr_assert_eq(strncmp(out, want, strlen(want)), 0, "want \"%s\", got \"%s\"", want, out);
	free(out);
	kinet_boot_close(b);
	free_qp();
}

Test(log, callback_replaces_stderr)
{
	clean_env();
	kinet_log_set_level(KINET_LOG_ERROR);
	make_qp();
	kinet_log_set_callback(capture, &cap_token);
	char *out = capture_stderr(log_one_error);
	cr_assert_str_eq(out, "", "stderr while a callback is installed: %s", out);
	free(out);
	cr_assert_eq(cap_n, 1);
	cr_assert_eq(cap_level[0], KINET_LOG_ERROR);
	cr_assert_not_null(strstr(cap_msg[0], "illegal transition"), "%s", cap_msg[0]);
	cr_assert_null(strstr(cap_msg[0], "kinet["), "no prefix in the message: %s", cap_msg[0]);
	cr_assert_null(strchr(cap_msg[0], '\n'), "no newline: %s", cap_msg[0]);
	/* the level filters what the callback gets */
	kinet_qp *qp2;
	cr_assert_eq(kinet_qp_create(g_pd, NULL, &qp2), 0);
	cr_assert_eq(cap_n, 1, "a debug message passed at error level: %s", cap_msg[1]);
	kinet_qp_destroy(qp2);
	kinet_log_set_level(KINET_LOG_DEBUG);
	cr_assert_eq(kinet_qp_create(g_pd, NULL, &qp2), 0);
	cr_assert_gt(cap_n, 1, "no debug message at debug level");
	for (int i = 1; i < cap_n; i++)
		cr_assert_eq(cap_level[i], KINET_LOG_DEBUG);
	kinet_qp_destroy(qp2);
	kinet_log_set_level(KINET_LOG_ERROR);
	/* removed: stderr again, the callback is not called */
	int before = cap_n;
	kinet_log_set_callback(NULL, NULL);
	out = capture_stderr(log_one_error);
	cr_assert_not_null(strstr(out, "illegal transition"), "stderr: %s", out);
	free(out);
	cr_assert_eq(cap_n, before);
	free_qp();
}

#define NTHR 4
#define PER_THR 50

static void *log_many(void *arg)
{
	(void)arg;
	for (int i = 0; i < PER_THR; i++)
		cr_assert_eq(kinet_qp_modify(g_qp, KINET_QPS_RTS, NULL), -EINVAL);
	return NULL;
}

/* Messages of several threads at once all reach the callback, whole. */
Test(log, callback_from_several_threads)
{
	clean_env();
	kinet_log_set_level(KINET_LOG_ERROR);
	make_qp();
	kinet_log_set_callback(capture, &cap_token);
	pthread_t t[NTHR];
	for (int i = 0; i < NTHR; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, log_many, NULL), 0);
	for (int i = 0; i < NTHR; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(cap_n, NTHR * PER_THR);
	cr_assert_eq(captured("illegal transition"), NTHR * PER_THR);
	kinet_log_set_callback(NULL, NULL);
	free_qp();
}

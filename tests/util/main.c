/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The main of every Criterion test program (linked through kinet_testutil):
 * Criterion's own, with an exit status that tells CTest what happened, and
 * one more option.
 *
 * Criterion counts a test that called cr_skip_test as neither passed nor
 * failed and exits 0: CTest would report it "Passed". Here a run whose tests
 * were all skipped exits 77 (the tests' SKIP_RETURN_CODE, see
 * criterion_tests.cmake), after a line per test with its reason:
 *
 *   SKIPPED suite/name: reason
 *
 * which tests/util/check_summary.sh collects for `make check`. A run in
 * which no test ran at all fails: a stale list of tests must not pass.
 *
 *   --only suite/name   runs that one test (CTest runs each test so). Not
 *                       Criterion's --filter: under ASan with full stacks on
 *                       every malloc (make check-asan) compiling its pattern
 *                       costs seconds; this is a string comparison.
 *
 * A program may say before any test runs that none of its tests can run on
 * this machine (tu_skip_program, set by a constructor: the GPU tests without
 * a usable GPU). Then no test starts; each selected one is reported skipped
 * with that reason.
 */
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <criterion/options.h>
#include <criterion/internal/ordered-set.h>
#include "testutil.h"

const char *(*tu_skip_program)(void);

static size_t n_ran, n_skipped;

const char *tu_ask_child(const char *(*fn)(void))
{
	static char got[256];
	int fd[2];
	if (pipe(fd))
		return NULL;
	pid_t pid = fork();
	if (pid == 0) {
		close(fd[0]);
		/* a probe that hangs (a wedged driver) ends in a minute: the
		 * caller then gets NULL, and the tests run and fail on their own
		 * bounds rather than every program waiting here */
		alarm(60);
		const char *s = fn();
		if (s && write(fd[1], s, strnlen(s, sizeof(got) - 1)) < 0)
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	size_t n = 0;
	ssize_t r = 0;
	while (pid > 0 && n < sizeof(got) - 1 &&
	       (r = read(fd[0], got + n, sizeof(got) - 1 - n)) > 0)
		n += (size_t)r;
	close(fd[0]);
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) || !n)
		return NULL;
	got[n] = 0;
	return got;
}

static void skipped(const char *suite, const char *name, const char *why)
{
	fprintf(stderr, "SKIPPED %s/%s: %s\n", suite, name, why ? why : "(no reason given)");
}

/* Called for the tests that ran, not for those left out or disabled. */
ReportHook(POST_TEST)(struct criterion_test_stats *st)
{
	n_ran++;
	if (st->test_status == CR_STATUS_SKIPPED) {
		n_skipped++;
		skipped(st->test->category, st->test->name, st->message);
	}
}

static bool disabled(const struct criterion_suite_set *s, const struct criterion_test *t)
{
	return (t->data && t->data->disabled) || (s->suite.data && s->suite.data->disabled);
}

/* Whether "suite/name" is selected: by --only, else by Criterion's --filter. */
static bool selected(const char *only, const struct criterion_test *t)
{
	char full[512];
	snprintf(full, sizeof(full), "%s/%s", t->category, t->name);
	if (only)
		return !strcmp(full, only);
	const char *pat = criterion_options.pattern;
	return !pat || !fnmatch(pat, full, FNM_EXTMATCH);
}

/* --only: every other test disabled; how many tests have that name. */
static size_t keep_only(struct criterion_test_set *tests, const char *only)
{
	size_t count = 0; /* not n: FOREACH_SET's own variable */
	FOREACH_SET(struct criterion_suite_set *s, tests->suites)
	{
		FOREACH_SET(struct criterion_test *t, s->tests)
		{
			if (selected(only, t))
				count++;
			else
				t->data->disabled = true;
		}
	}
	return count;
}

/* The selected tests reported skipped for why (NULL: only those disabled in
 * their source, .disabled = true, which Criterion never starts). */
static size_t skip_selected(struct criterion_test_set *tests, const char *only, const char *why)
{
	size_t count = 0;
	FOREACH_SET(struct criterion_suite_set *s, tests->suites)
	{
		FOREACH_SET(struct criterion_test *t, s->tests)
		{
			if (!selected(only, t) || (!why && !disabled(s, t)))
				continue;
			skipped(t->category, t->name, why ? why : "disabled in its source");
			count++;
		}
	}
	return count;
}

int main(int argc, char *argv[])
{
	/* --only NAME / --only=NAME, taken out before Criterion reads the rest */
	const char *only = NULL;
	int n = 0;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else if (!strncmp(argv[i], "--only=", 7))
			only = argv[i] + 7;
		else
			argv[n++] = argv[i];
	}
	argv[n] = NULL;
	argc = n;

	struct criterion_test_set *tests = criterion_initialize();
	int rc = 0;
	if (only && !keep_only(tests, only)) {
		fprintf(stderr, "no test named %s in this program\n", only);
		rc = 1;
	} else if (criterion_handle_args(argc, argv, true)) {
		const char *why = tu_skip_program ? tu_skip_program() : NULL;
		size_t n_off = 0;
		if (why) {
			n_off = skip_selected(tests, only, why);
		} else {
			rc = !criterion_run_all_tests(tests);
			if (rc == 0 && n_ran == 0)
				n_off = skip_selected(tests, only, NULL);
		}
		if (rc == 0 && n_ran == 0 && n_off == 0) {
			fprintf(stderr, "no test ran (%s)\n",
				criterion_options.pattern ? criterion_options.pattern : "none selected");
			rc = 1;
		} else if (rc == 0 && n_skipped == n_ran) {
			rc = 77;
		}
	}
	criterion_finalize(tests);
	return rc;
}

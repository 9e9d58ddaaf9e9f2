/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The man pages of docs/man: each renders without a warning (groff -man -z
 * -ww, and man --warnings where man-db is installed), its .TH names the page
 * its file name says, and every public function of include/kinet/kinet.h,
 * net.h, boot.h, eth.h, dma.h, sem.h, kinet_cuda.h and shmem.h (the PGAS
 * layer's; read from the headers, so a new function needs a page) is named
 * in the NAME or SYNOPSIS section of some page.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define MAXPAGES 64

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc((size_t)n + 1);
	cr_assert_not_null(s);
	cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = 0;
	fclose(f);
	return s;
}

/* The pages: docs/man/NAME.SECTION. */
static int pages(char names[][64])
{
	DIR *d = opendir(KINET_SOURCE_DIR "/docs/man");
	cr_assert_not_null(d, "no docs/man");
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 3 || e->d_name[l - 2] != '.' || !isdigit((unsigned char)e->d_name[l - 1]))
			continue;
		cr_assert_lt(n, MAXPAGES);
		cr_assert_lt(l, 64u);
		memcpy(names[n++], e->d_name, l + 1);
	}
	closedir(d);
	cr_assert_geq(n, 10, "only %d pages", n);
	return n;
}

/* Runs cmd; what it printed, and its status. */
static int sh(const char *cmd, char **out)
{
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = 0, cap = 1 << 20;
	char *b = malloc(cap);
	cr_assert_not_null(b);
	size_t k;
	while ((k = fread(b + n, 1, cap - 1 - n, p)) > 0)
		n += k;
	b[n] = 0;
	int st = pclose(p);
	*out = b;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

Test(man_pages, render_without_warnings)
{
	char *out;
	if (sh("command -v groff >/dev/null 2>&1 && echo yes", &out) || strncmp(out, "yes", 3)) {
		free(out);
		cr_skip_test("groff is not installed (Debian: groff-base; scripts/install-deps.sh)");
	}
	free(out);
	int have_man = !sh("man --version >/dev/null 2>&1", &out);
	free(out);
	static char names[MAXPAGES][64];
	int n = pages(names);
	for (int i = 0; i < n; i++) {
		char *cmd = NULL;
		cr_assert(asprintf(&cmd, "groff -man -z -ww '%s/docs/man/%s' 2>&1", KINET_SOURCE_DIR,
				   names[i]) > 0);
		int rc = sh(cmd, &out);
		cr_assert_eq(rc, 0, "%s: status %d", cmd, rc);
		cr_assert_eq(out[0], 0, "%s warns:\n%s", names[i], out);
		free(out);
		free(cmd);
		if (!have_man)
			continue;
		cr_assert(asprintf(&cmd, "MANWIDTH=80 man --warnings -l '%s/docs/man/%s' 2>&1 "
					 ">/dev/null",
				   KINET_SOURCE_DIR, names[i]) > 0);
		rc = sh(cmd, &out);
		cr_assert_eq(rc, 0, "%s: status %d", cmd, rc);
		cr_assert_eq(out[0], 0, "man %s warns:\n%s", names[i], out);
		free(out);
		free(cmd);
	}
}

/* The text of the NAME and SYNOPSIS sections of a page. */
static char *name_synopsis(const char *page)
{
	const char *a = strstr(page, "\n.SH NAME");
	cr_assert_not_null(a, "no NAME section");
	const char *b = strstr(a, "\n.SH DESCRIPTION");
	cr_assert_not_null(b, "no DESCRIPTION after NAME and SYNOPSIS");
	cr_assert_not_null(strstr(a, "\n.SH SYNOPSIS"), "no SYNOPSIS section");
	return strndup(a, (size_t)(b - a));
}

static int has_word(const char *text, const char *w)
{
	size_t l = strlen(w);
	for (const char *p = text; (p = strstr(p, w)); p++) {
		char before = p == text ? ' ' : p[-1], after = p[l];
		if (!(isalnum((unsigned char)before) || before == '_') &&
		    !(isalnum((unsigned char)after) || after == '_'))
			return 1;
	}
	return 0;
}

/* The header without its comments. */
static char *uncommented(const char *path)
{
	char *s = slurp(path), *o = s, *w = s;
	while (*o) {
		if (o[0] == '/' && o[1] == '*') {
			char *e = strstr(o + 2, "*/");
			cr_assert_not_null(e, "%s: unterminated comment", path);
			o = e + 2;
			*w++ = ' ';
		} else if (o[0] == '/' && o[1] == '/') {
			while (*o && *o != '\n')
				o++;
		} else {
			*w++ = *o++;
		}
	}
	*w = 0;
	return s;
}

Test(man_pages, every_public_function_has_a_page)
{
	static char names[MAXPAGES][64];
	int n = pages(names);
	char *syn[MAXPAGES];
	for (int i = 0; i < n; i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/docs/man/%s", KINET_SOURCE_DIR, names[i]);
		char *page = slurp(path);
		/* .TH NAME SECTION matches the file name */
		char th[64], sec[8], want[64];
		cr_assert_eq(sscanf(page, ".TH %63s %7s", th, sec), 2, "%s: no .TH line", names[i]);
		snprintf(want, sizeof(want), "%s", names[i]);
		char *dot = strrchr(want, '.');
		cr_assert_str_eq(sec, dot + 1, "%s: .TH section %s", names[i], sec);
		*dot = 0;
		for (char *c = want; *c; c++)
			*c = (char)toupper((unsigned char)*c);
		cr_assert_str_eq(th, want, "%s: .TH names %s", names[i], th);
		syn[i] = name_synopsis(page);
		free(page);
	}
	const char *headers[] = {"kinet.h", "net.h", "boot.h", "eth.h", "dma.h", "sem.h",
				 "kinet_cuda.h", "shmem.h"};
	regex_t re;
	cr_assert_eq(regcomp(&re, "[ *](kinet_[a-z0-9_]+)[ \t]*\\(", REG_EXTENDED), 0);
	int checked = 0;
	for (int h = 0; h < (int)(sizeof(headers) / sizeof(headers[0])); h++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/include/kinet/%s", KINET_SOURCE_DIR, headers[h]);
		char *src = uncommented(path);
		regmatch_t m[2];
		for (const char *p = src; !regexec(&re, p, 2, m, 0); p += m[0].rm_eo) {
			char fn[96];
			int l = (int)(m[1].rm_eo - m[1].rm_so);
			cr_assert_lt(l, (int)sizeof(fn));
			memcpy(fn, p + m[1].rm_so, (size_t)l);
			fn[l] = 0;
			int found = 0;
			for (int i = 0; i < n && !found; i++)
				found = has_word(syn[i], fn);
			cr_assert(found, "%s (%s) has no man page naming it in NAME or SYNOPSIS", fn,
				  headers[h]);
			checked++;
		}
		free(src);
	}
	regfree(&re);
	cr_assert_geq(checked, 50, "only %d functions found in the headers", checked);
	for (int i = 0; i < n; i++)
		free(syn[i]);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ABI: libkinet.so (and libkinet_cuda.so where built, and
 * libkinet_shmem.so) export exactly the functions declared in the installed
 * headers, in the public version node, plus the private node of their
 * version script (libkinet_shmem has none), and nothing else; the
 * modules export only their entry points; the soname and the file name carry
 * the version of kinet/kinet.h, and kinet_version() reports it.
 *
 * The declarations come from the compiler (gcc -aux-info over the headers),
 * the exports from nm -D, the nodes from the version scripts as the build
 * configured them.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <kinet/kinet.h>
#include "kinet_config.h"

/* ---- small string sets ---------------------------------------------------- */

struct set {
	char **v;
	size_t n, cap;
};

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int set_has(const struct set *s, const char *x)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], x))
			return 1;
	return 0;
}

static void set_add(struct set *s, const char *x, size_t len)
{
	char *c = strndup(x, len);
	cr_assert_not_null(c);
	if (set_has(s, c)) {
		free(c);
		return;
	}
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		cr_assert_not_null(s->v);
	}
	s->v[s->n++] = c;
	qsort(s->v, s->n, sizeof(*s->v), cmp);
}

/* Names of a that are not in b, one line each, in buf. */
static const char *minus(const struct set *a, const struct set *b, char *buf, size_t cap)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = 0; i < a->n; i++)
		if (!set_has(b, a->v[i]) && o + strlen(a->v[i]) + 4 < cap)
			o += (size_t)snprintf(buf + o, cap - o, "  %s\n", a->v[i]);
	return buf;
}

/* ---- commands --------------------------------------------------------------- */

/* Runs cmd through the shell; returns its output (malloc'd), *status the exit status. */
static char *run(const char *cmd, int *status)
{
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s", cmd);
	size_t n = 0, cap = 1 << 16;
	char *out = malloc(cap);
	cr_assert_not_null(out);
	size_t k;
	while ((k = fread(out + n, 1, cap - n - 1, p)) > 0) {
		n += k;
		if (cap - n < 4096) {
			cap *= 2;
			out = realloc(out, cap);
			cr_assert_not_null(out);
		}
	}
	out[n] = 0;
	int st = pclose(p);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

/* The functions the headers declare (not the static inline ones), by name. */
static void declared(const char *headers, struct set *out)
{
	char dir[] = "/tmp/kinet-abi-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char src[PATH_MAX], aux[PATH_MAX], cmd[4 * PATH_MAX + 256];
	snprintf(src, sizeof(src), "%s/all.c", dir);
	snprintf(aux, sizeof(aux), "%s/all.aux", dir);
	FILE *f = fopen(src, "w");
	cr_assert_not_null(f);
	char hs[4096];
	snprintf(hs, sizeof(hs), "%s", headers);
	for (char *sv, *h = strtok_r(hs, " ", &sv); h; h = strtok_r(NULL, " ", &sv))
		fprintf(f, "#include <%s>\n", h);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "'%s' -std=gnu11 -I'%s' -fsyntax-only -aux-info '%s' '%s' 2>&1",
		 KINET_GCC, KINET_INCLUDE_DIR, aux, src);
	int st;
	char *o = run(cmd, &st);
	cr_assert_eq(st, 0, "%s\n%s", cmd, o);
	free(o);
	f = fopen(aux, "r");
	cr_assert_not_null(f);
	char line[4096];
	while (fgets(line, sizeof(line), f)) {
		/* "/_* <file>:<line>:NC *_/ extern <decl> <name> (<args>);" */
		char *e = strstr(line, ":NC */");
		if (strncmp(line, "/* ", 3) || !e)
			continue;
		*e = 0;
		char *file = line + 3, *colon = strrchr(file, ':');
		if (colon)
			*colon = 0;
		if (strncmp(file, KINET_INCLUDE_DIR "/kinet/", strlen(KINET_INCLUDE_DIR "/kinet/")))
			continue;
		const char *h = file + strlen(KINET_INCLUDE_DIR) + 1;
		char hw[PATH_MAX + 2];
		snprintf(hw, sizeof(hw), " %s ", h);
		char hl[4096 + 2];
		snprintf(hl, sizeof(hl), " %s ", headers);
		if (!strstr(hl, hw))
			continue; /* a header of another library */
		char *decl = e + 6, *paren = strstr(decl, " (");
		cr_assert_not_null(paren, "unexpected declaration: %s", decl);
		char *b = paren;
		while (b > decl && (b[-1] == '_' || (b[-1] >= '0' && b[-1] <= '9') ||
				    (b[-1] >= 'a' && b[-1] <= 'z') || (b[-1] >= 'A' && b[-1] <= 'Z')))
			b--;
		cr_assert(paren > b, "no name in %s", decl);
		set_add(out, b, (size_t)(paren - b));
	}
	fclose(f);
	unlink(aux);
	unlink(src);
	rmdir(dir);
}

/* Exported, defined symbols of lib: names with their version (name@@node). */
static void exported(const char *lib, struct set *names, struct set *versioned)
{
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof(cmd), "'%s' -D --defined-only '%s'", KINET_NM, lib);
	int st;
	char *o = run(cmd, &st);
	cr_assert_eq(st, 0, "%s:\n%s", cmd, o);
	for (char *sv, *l = strtok_r(o, "\n", &sv); l; l = strtok_r(NULL, "\n", &sv)) {
		char addr[64], type[8], sym[512];
		if (sscanf(l, "%63s %7s %511s", addr, type, sym) != 3 || !strcmp(type, "A"))
			continue; /* the version nodes themselves */
		char *at = strstr(sym, "@@");
		cr_assert_not_null(at, "%s is exported without a version: %s", lib, sym);
		set_add(names, sym, (size_t)(at - sym));
		set_add(versioned, sym, strlen(sym));
	}
	free(o);
}

/* The global names of version node `node` in a version script. */
static void map_node(const char *map, const char *node, struct set *out)
{
	FILE *f = fopen(map, "r");
	cr_assert_not_null(f, "%s", map);
	static char text[1 << 16];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	for (char *c = strstr(text, "/*"); c; c = strstr(c, "/*")) { /* comments out */
		char *e = strstr(c + 2, "*/");
		cr_assert_not_null(e, "unterminated comment in %s", map);
		memset(c, ' ', (size_t)(e + 2 - c));
	}
	int found = 0, in = 0, global = 0;
	const char *p = text;
	char tok[256];
	while (*p) {
		if (strchr(" \t\n\r", *p)) {
			p++;
			continue;
		}
		size_t k = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.*");
		if (!k) {
			if (*p == '}')
				in = 0;
			p++;
			continue;
		}
		snprintf(tok, sizeof(tok), "%.*s", (int)k, p);
		p += k;
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '{') {
			in = !strcmp(tok, node);
			found |= in;
			global = 1;
		} else if (in && *p == ':') {
			global = !strcmp(tok, "global");
		} else if (in && *p == ';' && global && strcmp(tok, "*")) {
			set_add(out, tok, strlen(tok));
		}
	}
	cr_assert(found, "%s has no node %s", map, node);
}

/* The whole check for one library. */
static void check_library(const char *lib, const char *map, const char *headers,
			  const char *pub_node, const char *priv_node, int all_private_built)
{
	struct set decl = {0}, names = {0}, versioned = {0}, pub = {0}, priv = {0};
	declared(headers, &decl);
	exported(lib, &names, &versioned);
	map_node(map, pub_node, &pub);
	if (priv_node)
		map_node(map, priv_node, &priv);
	static char buf[1 << 15];
	cr_assert_gt(decl.n, 0u, "no declarations found in %s", headers);

	cr_expect_eq(strlen(minus(&decl, &names, buf, sizeof(buf))), 0u,
		     "%s: declared in %s but not exported (add them to node %s of %s.in):\n%s", lib,
		     headers, pub_node, map, buf);
	cr_expect_eq(strlen(minus(&pub, &decl, buf, sizeof(buf))), 0u,
		     "%s: in node %s but declared in no header of %s:\n%s", map, pub_node, headers,
		     buf);
	struct set allowed = {0};
	for (size_t i = 0; i < decl.n; i++)
		set_add(&allowed, decl.v[i], strlen(decl.v[i]));
	for (size_t i = 0; i < priv.n; i++) {
		cr_expect(!set_has(&decl, priv.v[i]), "%s is public and in node %s", priv.v[i],
			  priv_node);
		set_add(&allowed, priv.v[i], strlen(priv.v[i]));
	}
	cr_expect_eq(strlen(minus(&names, &allowed, buf, sizeof(buf))), 0u,
		     "%s exports what is neither public nor in node %s of %s:\n%s", lib,
		     priv_node ? priv_node : "(none)", map, buf);
	if (all_private_built)
		cr_expect_eq(strlen(minus(&priv, &names, buf, sizeof(buf))), 0u,
			     "%s: in node %s of %s but not defined by the library:\n%s", lib,
			     priv_node, map, buf);
	/* each name in its own node */
	for (size_t i = 0; i < names.n; i++) {
		char want[600];
		snprintf(want, sizeof(want), "%s@@%s", names.v[i],
			 set_has(&decl, names.v[i]) || !priv_node ? pub_node : priv_node);
		cr_expect(set_has(&versioned, want), "%s: %s is not exported as %s", lib, names.v[i],
			  want);
	}
}

#define STR2(x) #x
#define STR(x) STR2(x)
#define MAJOR STR(KINET_VERSION_MAJOR)

Test(abi, libkinet_exports_the_headers_and_the_private_node)
{
	check_library(KINET_LIB, KINET_MAP, KINET_HEADERS, "KINET_" MAJOR,
		      "KINET_PRIVATE_" KINET_PROJECT_VERSION, KINET_HAVE_RDMA_HEADERS);
}

Test(abi, libkinet_cuda_exports_its_header)
{
#ifdef KINET_CUDA_LIB
	check_library(KINET_CUDA_LIB, KINET_CUDA_MAP, "kinet/kinet_cuda.h", "KINET_CUDA_" MAJOR,
		      "KINET_CUDA_PRIVATE_" KINET_PROJECT_VERSION, 1);
#else
	cr_skip_test("built without CUDA (no libkinet_cuda.so)");
#endif
}

Test(abi, libkinet_shmem_exports_its_header)
{
#ifdef KINET_SHMEM_LIB
	check_library(KINET_SHMEM_LIB, KINET_SHMEM_MAP, "kinet/shmem.h kinet/shmem_device.h",
		      "KINET_SHMEM_" MAJOR, NULL, 1);
#else
	cr_skip_test("libkinet_shmem.so is not built");
#endif
}

Test(abi, the_emulation_module_exports_only_its_entry_points)
{
#ifdef KINET_EMU_MODULE
	struct set names = {0}, versioned = {0};
	exported(KINET_EMU_MODULE, &names, &versioned);
	cr_assert_gt(names.n, 0u);
	for (size_t i = 0; i < versioned.n; i++) {
		const char *v = versioned.v[i];
		cr_expect(!strncmp(v, "kinet_mlx5_emu_", 15), "%s exports %s", KINET_EMU_MODULE, v);
		cr_expect(strstr(v, "@@KINET_MODULE_" KINET_PROJECT_VERSION), "%s", v);
	}
	char want[] = "kinet_mlx5_emu_ops";
	cr_expect(set_has(&names, want));
#else
	cr_skip_test("built without the rdma-core headers (no emulation module)");
#endif
}

Test(abi, soname_and_file_name_carry_the_version)
{
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof(cmd), "'%s' -d '%s'", KINET_READELF, KINET_LIB);
	int st;
	char *o = run(cmd, &st);
	cr_assert_eq(st, 0, "%s\n%s", cmd, o);
	cr_assert(strstr(o, "Library soname: [libkinet.so." MAJOR "]"), "%s", o);
	free(o);
	/* libkinet.so -> libkinet.so.MAJOR -> libkinet.so.MAJOR.MINOR.PATCH */
	char real[PATH_MAX], soname[PATH_MAX];
	cr_assert_not_null(realpath(KINET_LINKER_FILE, real));
	cr_assert_str_eq(basename(real), "libkinet.so." KINET_PROJECT_VERSION);
	snprintf(soname, sizeof(soname), "%s.%s", KINET_LINKER_FILE, MAJOR);
	cr_assert_eq(access(soname, F_OK), 0, "%s", soname);
}

Test(abi, kinet_version_reports_the_header_version)
{
	int ma = -1, mi = -1, pa = -1;
	const char *v = kinet_version(&ma, &mi, &pa);
	cr_assert_not_null(v);
	cr_assert_str_eq(v, KINET_PROJECT_VERSION);
	cr_assert_eq(ma, KINET_VERSION_MAJOR);
	cr_assert_eq(mi, KINET_VERSION_MINOR);
	cr_assert_eq(pa, KINET_VERSION_PATCH);
	char want[32];
	snprintf(want, sizeof(want), "%d.%d.%d", KINET_VERSION_MAJOR, KINET_VERSION_MINOR,
		 KINET_VERSION_PATCH);
	cr_assert_str_eq(v, want);
	cr_assert_str_eq(KINET_VERSION, KINET_PROJECT_VERSION); /* kinet_config.h */
	cr_assert_eq(kinet_version(NULL, NULL, NULL), v, "one static string");
}

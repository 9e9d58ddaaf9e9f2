/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-info's view of the platform around the GPUs and NICs, on whatever
 * machine runs the test (CI: no GPU, no RDMA NIC; with KINET_MLX5_EMULATE=1
 * two emulated NICs that sysfs does not know): libfabric's version and
 * providers, the kernel, the IOMMU mode, ACS on the GPU-NIC paths, and per
 * device NUMA node, driver, firmware, IOMMU group (and BAR1 of a GPU). Every
 * key is there, and what cannot be read says "unknown (why)".
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "kinet_config.h"
#ifdef KINET_HAVE_JSONC
#include <json-c/json.h>
#endif

#ifndef KINET_INFO_BIN
#define KINET_INFO_BIN "kinet-info"
#endif

/* kinet-info's output with args, the environment assignments in env. */
static char *run_info(const char *env, const char *args, int *status)
{
	char *cmd = NULL;
	cr_assert(asprintf(&cmd, "%s '%s' %s 2>&1", env, KINET_INFO_BIN, args) > 0);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = 0, cap = 1 << 20;
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	size_t k;
	while ((k = fread(buf + n, 1, cap - n - 1, p)) > 0)
		n += k;
	buf[n] = 0;
	int st = pclose(p);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	free(cmd);
	return buf;
}

Test(info_platform, text_sections)
{
	int st;
	char *out = run_info("KINET_MLX5_EMULATE=0", "--no-trial", &st);
	cr_assert_eq(st, 0, "%s", out);
	const char *want[] = {"== platform ==", "  kernel ", "  IOMMU ", "kernel options: ",
			      "  NVIDIA driver ", "  libfabric ", "== ACS on the GPU-NIC paths =="};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_not_null(strstr(out, want[i]), "no '%s' in:\n%s", want[i], out);
	free(out);
}

#ifdef KINET_HAVE_JSONC
static json_object *get(json_object *o, const char *key, json_type type)
{
	json_object *v = NULL;
	cr_assert(json_object_object_get_ex(o, key, &v), "no key %s in %s", key,
		  json_object_to_json_string(o));
	cr_assert(json_object_is_type(v, type), "%s has the wrong type", key);
	return v;
}

static const char *str(json_object *o, const char *key)
{
	const char *s = json_object_get_string(get(o, key, json_type_string));
	cr_assert(s && *s, "%s is empty", key);
	return s;
}

static json_object *run_json(const char *env)
{
	int st;
	char *out = run_info(env, "--json --no-trial", &st);
	cr_assert_eq(st, 0, "%s", out);
	json_tokener *tk = json_tokener_new();
	json_object *o = json_tokener_parse_ex(tk, out, (int)strlen(out));
	cr_assert_not_null(o, "--json output does not parse: %s\n%s",
			   json_tokener_error_desc(json_tokener_get_error(tk)), out);
	json_tokener_free(tk);
	free(out);
	return o;
}

/* A value, or "unknown (why)" with a why. */
static void value_or_why(const char *key, const char *s)
{
	if (!strncmp(s, "unknown", 7))
		cr_assert(!strncmp(s, "unknown (", 9) && strlen(s) > 11 && s[strlen(s) - 1] == ')',
			  "%s: '%s' does not say why", key, s);
}
#endif

Test(info_platform, json_keys_on_this_machine)
{
#ifndef KINET_HAVE_JSONC
	cr_skip_test("json-c not found at build time (libjson-c-dev)");
#else
	json_object *o = run_json("KINET_MLX5_EMULATE=0");
	json_object *p = get(o, "platform", json_type_object);
	const char *keys[] = {"kernel", "iommu", "iommu_cmdline", "gpu_driver", "acs_note"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		value_or_why(keys[i], str(p, keys[i]));
	cr_assert(!strncmp(str(p, "kernel"), "Linux ", 6));
	const char *iommu = str(p, "iommu");
	cr_assert(!strncmp(iommu, "on", 2) || !strncmp(iommu, "off", 3) ||
			  !strncmp(iommu, "unknown (", 9),
		  "iommu: %s", iommu);
	/* libfabric: its version and the providers with their interfaces */
	json_object *fi = get(p, "libfabric", json_type_object);
	const char *ver = str(fi, "version");
	json_object *provs = get(fi, "providers", json_type_array);
	const char *wire = str(fi, "wire_provider");
	bool found = json_object_get_boolean(get(fi, "wire_provider_found", json_type_boolean));
	get(fi, "note", json_type_string);
	if (KINET_HAVE_FABRIC) {
		unsigned ma, mi;
		cr_assert_eq(sscanf(ver, "%u.%u", &ma, &mi), 2, "libfabric version '%s'", ver);
		cr_assert_eq(sscanf(str(fi, "built_with"), "%u.%u", &ma, &mi), 2);
		bool seen = false;
		for (size_t i = 0; i < json_object_array_length(provs); i++) {
			json_object *e = json_object_array_get_idx(provs, i);
			const char *pn = str(e, "provider");
			get(e, "fabric", json_type_string);
			get(e, "domain", json_type_string);
			seen |= !strcmp(pn, wire);
		}
		cr_assert_eq(seen, found, "wire provider %s: found=%d, in the list=%d", wire, found,
			     seen);
	} else {
		cr_assert(!strncmp(ver, "unknown (", 9), "%s", ver);
	}
	/* ACS: nothing to pair without a GPU and a NIC, and it says so */
	json_object *gpus = get(o, "gpus", json_type_array), *nics = get(o, "nics", json_type_array);
	json_object *acs = get(p, "acs", json_type_array);
	size_t ng = json_object_array_length(gpus), nn = json_object_array_length(nics);
	cr_assert_eq(json_object_array_length(acs), ng * nn);
	if (!ng || !nn)
		cr_assert(!strncmp(str(p, "acs_note"), "unknown (no GPU-NIC pair", 24), "%s",
			  str(p, "acs_note"));
	for (size_t i = 0; i < json_object_array_length(acs); i++) {
		json_object *a = json_object_array_get_idx(acs, i);
		value_or_why("acs state", str(a, "state"));
		get(a, "bridges", json_type_array);
	}
	/* every GPU: NUMA node, BAR1, driver, firmware, IOMMU group */
	for (size_t i = 0; i < ng; i++) {
		json_object *g = json_object_array_get_idx(gpus, i);
		const char *gk[] = {"numa_node", "bar1", "driver", "firmware", "iommu_group"};
		for (size_t k = 0; k < 5; k++)
			value_or_why(gk[k], str(g, gk[k]));
		json_object *b;
		cr_assert(json_object_object_get_ex(g, "bar1_bytes", &b));
	}
	json_object_put(o);
#endif
}

/* Emulated NICs have no PCI function: every sysfs item says why not. */
Test(info_platform, json_nic_items_over_the_emulation)
{
#ifndef KINET_HAVE_JSONC
	cr_skip_test("json-c not found at build time (libjson-c-dev)");
#else
	json_object *o = run_json("KINET_MLX5_EMULATE=1");
	json_object *nics = get(o, "nics", json_type_array);
	cr_assert_eq(json_object_array_length(nics), 2u);
	for (size_t i = 0; i < 2; i++) {
		json_object *n = json_object_array_get_idx(nics, i);
		const char *nk[] = {"numa_node", "driver", "firmware", "iommu_group"};
		for (size_t k = 0; k < 4; k++) {
			const char *s = str(n, nk[k]);
			cr_assert(!strncmp(s, "unknown (no PCI function", 24), "%s: %s", nk[k], s);
		}
	}
	json_object *p = get(o, "platform", json_type_object);
	cr_assert_eq(json_object_array_length(get(p, "acs", json_type_array)),
		     json_object_array_length(get(o, "gpus", json_type_array)) * 2);
	json_object_put(o);
#endif
}

#ifdef KINET_HAVE_JSONC
/* The wire of the trial context (software NIC): its provider, and which
 * provider takes peers of this host, and why. */
static json_object *wire_of(const char *env)
{
	int st;
	char *out = run_info(env, "--json", &st);
	cr_assert_eq(st, 0, "%s", out);
	json_object *o = json_tokener_parse(out);
	cr_assert_not_null(o, "--json output does not parse:\n%s", out);
	free(out);
	json_object *w = NULL;
	json_object *choice = get(o, "choice", json_type_object);
	if (json_object_object_get_ex(choice, "wire", &w))
		json_object_get(w);
	json_object_put(o);
	return w;
}
#endif

Test(info_platform, json_wire_names_the_same_host_provider)
{
#ifndef KINET_HAVE_JSONC
	cr_skip_test("json-c not found at build time (libjson-c-dev)");
#else
	if (!KINET_HAVE_FABRIC)
		cr_skip_test("this build has no libfabric wire");
	json_object *w = wire_of("KINET_MLX5_EMULATE=0 KINET_BACKEND=soft KINET_FI_PROVIDER=");
	if (!w)
		cr_skip_test("the trial context has no wire here");
	cr_assert(!strcmp(str(w, "provider"), "tcp;ofi_rxm"));
	const char *sh = json_object_get_string(get(w, "same_host", json_type_string));
	const char *why = str(w, "same_host_why");
	bool shh = json_object_get_boolean(get(w, "same_host_hmem", json_type_boolean));
	const char *shw = json_object_get_string(get(w, "same_host_hmem_why", json_type_string));
	/* shm where libfabric has it; otherwise the reason */
	if (sh[0])
		cr_assert(!strcmp(sh, "shm") && strstr(why, "over shm"), "%s: %s", sh, why);
	else
		cr_assert(strstr(why, "shm could not be opened"), "%s", why);
	/* GPU payloads over it: taken, or staged with the reason */
	cr_assert(shh || !sh[0] || shw[0], "same-host GPU payloads staged, no reason given");
	json_object_put(w);
	w = wire_of("KINET_MLX5_EMULATE=0 KINET_BACKEND=soft KINET_FI_PROVIDER='tcp;ofi_rxm'");
	cr_assert_not_null(w);
	cr_assert(!strcmp(json_object_get_string(get(w, "same_host", json_type_string)), ""));
	cr_assert(strstr(str(w, "same_host_why"), "KINET_FI_PROVIDER is set"));
	json_object_put(w);
	w = wire_of("KINET_MLX5_EMULATE=0 KINET_BACKEND=soft KINET_FI_PROVIDER= "
		    "KINET_FI_SAME_HOST=off");
	cr_assert_not_null(w);
	cr_assert(!strcmp(json_object_get_string(get(w, "same_host", json_type_string)), ""));
	cr_assert(strstr(str(w, "same_host_why"), "KINET_FI_SAME_HOST=off"));
	json_object_put(w);
#endif
}

/* Whether an idle engine sleeps on the provider's wait fd (tcp has one). */
Test(info_platform, json_wire_says_whether_the_engine_sleeps_on_a_wait_fd)
{
#ifndef KINET_HAVE_JSONC
	cr_skip_test("json-c not found at build time (libjson-c-dev)");
#else
	if (!KINET_HAVE_FABRIC)
		cr_skip_test("this build has no libfabric wire");
	const char *env[2] = {
		"KINET_MLX5_EMULATE=0 KINET_BACKEND=soft KINET_FI_PROVIDER='tcp;ofi_rxm'",
		"KINET_MLX5_EMULATE=0 KINET_BACKEND=soft KINET_FI_PROVIDER='tcp;ofi_rxm' "
		"KINET_NET_CQ_WAIT=none"};
	for (int k = 0; k < 2; k++) {
		json_object *w = wire_of(env[k]);
		if (!w)
			cr_skip_test("the trial context has no wire here");
		bool fd = json_object_get_boolean(get(w, "cq_wait_fd", json_type_boolean));
		cr_assert_eq(fd, k == 0, "%s: cq_wait_fd %d", env[k], fd);
		json_object_put(w);
	}
#endif
}

/* Where the target copies rendezvous data into place: the tunable, or in
 * auto the CPUs this process may run on (4 or more: its own thread). */
Test(info_platform, json_wire_says_where_reads_are_copied)
{
#ifndef KINET_HAVE_JSONC
	cr_skip_test("json-c not found at build time (libjson-c-dev)");
#else
	if (!KINET_HAVE_FABRIC)
		cr_skip_test("this build has no libfabric wire");
	const char *base = "KINET_MLX5_EMULATE=0 KINET_BACKEND=soft KINET_FI_PROVIDER='tcp;ofi_rxm'";
	const char *mode[3] = {"off", "on", "auto"};
	cpu_set_t cs;
	cr_assert_eq(sched_getaffinity(0, sizeof(cs), &cs), 0);
	for (int k = 0; k < 3; k++) {
		char env[256];
		snprintf(env, sizeof(env), "%s KINET_NET_COPY_THREAD=%s", base, mode[k]);
		json_object *w = wire_of(env);
		if (!w)
			cr_skip_test("the trial context has no wire here");
		bool on = json_object_get_boolean(get(w, "copy_thread", json_type_boolean));
		const char *why = str(w, "copy_why");
		char want[64];
		snprintf(want, sizeof(want), "KINET_NET_COPY_THREAD=%s", mode[k]);
		cr_assert(strstr(why, want), "%s: %s", mode[k], why);
		cr_assert_eq(json_object_get_int64(get(w, "copy_min", json_type_int)), 16384);
		if (k < 2)
			cr_assert_eq(on, k == 1, "%s: copy_thread %d", mode[k], on);
		else
			cr_assert_eq(on, CPU_COUNT(&cs) >= 4, "auto, %d CPUs: copy_thread %d (%s)",
				     CPU_COUNT(&cs), on, why);
		json_object_put(w);
	}
	/* the same-host wire copies fewer reads on the thread, unless the
	 * minimum is set */
	const char *sh[2] = {"KINET_MLX5_EMULATE=0 KINET_BACKEND=soft KINET_FI_PROVIDER= "
			     "KINET_FI_SAME_HOST=shm KINET_NET_COPY_THREAD=on",
			     "KINET_MLX5_EMULATE=0 KINET_BACKEND=soft KINET_FI_PROVIDER= "
			     "KINET_FI_SAME_HOST=shm KINET_NET_COPY_THREAD=on KINET_NET_COPY_MIN=4096"};
	for (int k = 0; k < 2; k++) {
		json_object *w = wire_of(sh[k]);
		cr_assert_not_null(w);
		const char *shp = json_object_get_string(get(w, "same_host", json_type_string));
		int64_t min = json_object_get_int64(get(w, "copy_min", json_type_int));
		int64_t shmin = json_object_get_int64(get(w, "same_host_copy_min", json_type_int));
		cr_assert_eq(min, k ? 4096 : 16384);
		if (shp[0])
			cr_assert_eq(shmin, k ? 4096 : 131072, "%s: %lld", sh[k], (long long)shmin);
		else
			cr_assert_eq(shmin, 0); /* no shm here */
		json_object_put(w);
	}
#endif
}

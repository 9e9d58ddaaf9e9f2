/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-info and the PCIe distances it reports: the tool runs here (no NIC,
 * no GPU) and over the emulated rdma-core; its text has every section and
 * its --json output parses; the GPU-to-NIC distances are checked on a
 * described topology (hwloc XML) with one NIC at each distance.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "kinet_config.h"
#include "topo.h"
#if KINET_HAVE_JSONC
#include <json-c/json.h>
#endif

/* A two-socket machine: GPU 0000:03:00.0 behind a PCIe switch with mlx5_0
 * (PIX), mlx5_1 one switch level further (PXB), mlx5_2 on the same host
 * bridge (PHB), mlx5_3 on another host bridge of the socket (NODE), mlx5_4
 * on the other socket (SYS). */
static const char topo_xml[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
	"<topology version=\"2.0\">\n"
	" <object type=\"Machine\" os_index=\"0\" cpuset=\"0x3\" complete_cpuset=\"0x3\" allowed_cpuset=\"0x3\" nodeset=\"0x3\" complete_nodeset=\"0x3\" allowed_nodeset=\"0x3\" gp_index=\"1\">\n"
	"  <object type=\"Package\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"2\">\n"
	"   <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"3\" local_memory=\"1073741824\"/>\n"
	"   <object type=\"Core\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"4\">\n"
	"    <object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"5\"/>\n"
	"   </object>\n"
	"   <object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[01-06]\">\n"
	"    <object type=\"Bridge\" gp_index=\"11\" bridge_type=\"1-1\" depth=\"1\" bridge_pci=\"0000:[02-06]\" pci_busid=\"0000:01:00.0\" pci_type=\"0604 [10b5:8796] [0000:0000] 00\" pci_link_speed=\"0.0\">\n"
	"     <object type=\"Bridge\" gp_index=\"12\" bridge_type=\"1-1\" depth=\"2\" bridge_pci=\"0000:[03-03]\" pci_busid=\"0000:02:00.0\" pci_type=\"0604 [10b5:8796] [0000:0000] 00\" pci_link_speed=\"0.0\">\n"
	"      <object type=\"PCIDev\" gp_index=\"13\" pci_busid=\"0000:03:00.0\" pci_type=\"0302 [10de:2335] [10de:18be] a1\" pci_link_speed=\"0.0\"/>\n"
	"     </object>\n"
	"     <object type=\"Bridge\" gp_index=\"14\" bridge_type=\"1-1\" depth=\"2\" bridge_pci=\"0000:[04-04]\" pci_busid=\"0000:02:01.0\" pci_type=\"0604 [10b5:8796] [0000:0000] 00\" pci_link_speed=\"0.0\">\n"
	"      <object type=\"PCIDev\" gp_index=\"15\" pci_busid=\"0000:04:00.0\" pci_type=\"0207 [15b3:1021] [15b3:0041] 00\" pci_link_speed=\"0.0\">\n"
	"       <object type=\"OSDev\" gp_index=\"16\" name=\"mlx5_0\" osdev_type=\"3\"/>\n"
	"      </object>\n"
	"     </object>\n"
	"     <object type=\"Bridge\" gp_index=\"17\" bridge_type=\"1-1\" depth=\"2\" bridge_pci=\"0000:[05-06]\" pci_busid=\"0000:02:02.0\" pci_type=\"0604 [10b5:8796] [0000:0000] 00\" pci_link_speed=\"0.0\">\n"
	"      <object type=\"Bridge\" gp_index=\"18\" bridge_type=\"1-1\" depth=\"3\" bridge_pci=\"0000:[06-06]\" pci_busid=\"0000:05:00.0\" pci_type=\"0604 [10b5:8796] [0000:0000] 00\" pci_link_speed=\"0.0\">\n"
	"       <object type=\"PCIDev\" gp_index=\"19\" pci_busid=\"0000:06:00.0\" pci_type=\"0207 [15b3:1021] [15b3:0041] 00\" pci_link_speed=\"0.0\">\n"
	"        <object type=\"OSDev\" gp_index=\"20\" name=\"mlx5_1\" osdev_type=\"3\"/>\n"
	"       </object>\n"
	"      </object>\n"
	"     </object>\n"
	"    </object>\n"
	"    <object type=\"PCIDev\" gp_index=\"21\" pci_busid=\"0000:01:00.1\" pci_type=\"0207 [15b3:1021] [15b3:0041] 00\" pci_link_speed=\"0.0\">\n"
	"     <object type=\"OSDev\" gp_index=\"22\" name=\"mlx5_2\" osdev_type=\"3\"/>\n"
	"    </object>\n"
	"   </object>\n"
	"   <object type=\"Bridge\" gp_index=\"23\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[07-07]\">\n"
	"    <object type=\"PCIDev\" gp_index=\"24\" pci_busid=\"0000:07:00.0\" pci_type=\"0207 [15b3:1021] [15b3:0041] 00\" pci_link_speed=\"0.0\">\n"
	"     <object type=\"OSDev\" gp_index=\"25\" name=\"mlx5_3\" osdev_type=\"3\"/>\n"
	"    </object>\n"
	"   </object>\n"
	"  </object>\n"
	"  <object type=\"Package\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\" nodeset=\"0x2\" complete_nodeset=\"0x2\" gp_index=\"30\">\n"
	"   <object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\" nodeset=\"0x2\" complete_nodeset=\"0x2\" gp_index=\"31\" local_memory=\"1073741824\"/>\n"
	"   <object type=\"Core\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\" nodeset=\"0x2\" complete_nodeset=\"0x2\" gp_index=\"32\">\n"
	"    <object type=\"PU\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\" nodeset=\"0x2\" complete_nodeset=\"0x2\" gp_index=\"33\"/>\n"
	"   </object>\n"
	"   <object type=\"Bridge\" gp_index=\"34\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0001:[80-81]\">\n"
	"    <object type=\"PCIDev\" gp_index=\"35\" pci_busid=\"0001:81:00.0\" pci_type=\"0207 [15b3:1021] [15b3:0041] 00\" pci_link_speed=\"0.0\">\n"
	"     <object type=\"OSDev\" gp_index=\"36\" name=\"mlx5_4\" osdev_type=\"3\"/>\n"
	"    </object>\n"
	"   </object>\n"
	"  </object>\n"
	" </object>\n"
	"</topology>\n";

Test(mlx5_info, pcie_distances)
{
	char why[200];
	int rc = kinet_topo_load(topo_xml, why, sizeof(why));
#if KINET_HAVE_HWLOC
	cr_assert_eq(rc, 0, "%s", why);
	const char *gpu = "0000:03:00.0";
	cr_assert_eq(kinet_topo_distance(gpu, "0000:04:00.0"), KINET_DIST_PIX);
	cr_assert_eq(kinet_topo_distance(gpu, "0000:06:00.0"), KINET_DIST_PXB);
	cr_assert_eq(kinet_topo_distance(gpu, "0000:01:00.1"), KINET_DIST_PHB);
	cr_assert_eq(kinet_topo_distance(gpu, "0000:07:00.0"), KINET_DIST_NODE);
	cr_assert_eq(kinet_topo_distance(gpu, "0001:81:00.0"), KINET_DIST_SYS);
	/* symmetric */
	cr_assert_eq(kinet_topo_distance("0000:06:00.0", gpu), KINET_DIST_PXB);
	cr_assert_eq(kinet_topo_distance("0001:81:00.0", "0000:07:00.0"), KINET_DIST_SYS);
	cr_assert_eq(kinet_topo_distance(gpu, "0000:09:00.0"), -ENOENT);
	cr_assert_eq(kinet_topo_distance(gpu, "not a bus id"), -ENOENT);
	char pci[32];
	cr_assert_eq(kinet_topo_osdev_pci("mlx5_1", pci, sizeof(pci)), 0);
	cr_assert_str_eq(pci, "0000:06:00.0");
	cr_assert_eq(kinet_topo_osdev_pci("mlx5_9", pci, sizeof(pci)), -ENOENT);
	cr_assert_str_eq(kinet_topo_dist_str(KINET_DIST_NODE), "NODE");
	cr_assert_str_eq(kinet_topo_dist_str(-ENOENT), "n/a");
	/* malformed XML is an error, not a crash */
	cr_assert_neq(kinet_topo_load("<topology", why, sizeof(why)), 0);
	cr_assert_eq(kinet_topo_distance(gpu, "0000:04:00.0"), -ENODEV);
	kinet_topo_unload();
#else
	cr_assert_eq(rc, -ENOSYS);
	cr_assert(strstr(why, "hwloc"), "%s", why);
#endif
}

#ifdef KINET_INFO_BIN
/* Runs kinet-info with args; returns its output (malloc) and exit status. */
static char *run_info(const char *args, int *status)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null", KINET_INFO_BIN, args);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	size_t n;
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	buf[len] = 0;
	int st = pclose(f);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return buf;
}

Test(mlx5_info, text_has_every_section)
{
	int st;
	char *out = run_info("", &st);
	cr_assert_eq(st, 0);
	const char *sections[] = {"== GPUs ==", "== NICs ==", "== peer memory ==",
				  "== topology", "== choice ==", "== tunables ==",
				  "KINET_ALLOW_HOST_STAGING", "backend "};
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
		cr_assert(strstr(out, sections[i]), "missing %s in:\n%s", sections[i], out);
	free(out);
	out = run_info("--bogus", &st);
	cr_assert_eq(st, 2);
	free(out);
}

Test(mlx5_info, emulated_nics_are_listed_and_chosen)
{
	setenv("KINET_MLX5_EMULATE", "1", 1);
	int st;
	char *out = run_info("", &st);
	cr_assert_eq(st, 0);
	cr_assert(strstr(out, "mlx5_0") && strstr(out, "mlx5_1"), "%s", out);
	cr_assert(strstr(out, "backend mlx5"), "%s", out);
	cr_assert(strstr(out, "doorbell gpu") || strstr(out, "doorbell cpu"), "%s", out);
	free(out);
}

/* libkinet without the emulation module beside it (a copy of the library
 * alone in a folder, found first through LD_LIBRARY_PATH): KINET_MLX5_EMULATE=1
 * is refused with a message naming the module where libkinet looked for it
 * (beside itself, not along the search path), the choice falls back to the
 * software NIC as auto does for any missing mlx5, and nothing crashes. */
Test(mlx5_info, a_missing_emulation_module_is_reported)
{
#if KINET_HAVE_RDMA_HEADERS
	char dir[] = "/tmp/kinet-noemu-XXXXXX", cmd[1024];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/%s'", KINET_LIB_FILE, dir, KINET_LIB_SONAME);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	setenv("LD_LIBRARY_PATH", dir, 1);
	setenv("KINET_MLX5_EMULATE", "1", 1);
	int st;
	char *out = run_info("", &st);
	cr_assert_eq(st, 0, "%s", out);
	char want[300]; /* the module is looked for beside the library */
	snprintf(want, sizeof(want), "emulation module cannot be loaded (%s/%s", dir,
		 KINET_MLX5EMU_MODULE);
	cr_assert(strstr(out, want), "want \"%s\" in %s", want, out);
	cr_assert(strstr(out, "backend soft"), "%s", out);
	free(out);
	setenv("KINET_BACKEND", "mlx5", 1); /* asked for: the open fails, clearly */
	out = run_info("", &st);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert(strstr(out, "kinet_open failed"), "%s", out);
	cr_assert(strstr(out, "emulation module cannot be loaded"), "%s", out);
	free(out);
	unsetenv("LD_LIBRARY_PATH");
	snprintf(cmd, sizeof(cmd), "rm -r '%s'", dir);
	cr_assert_eq(system(cmd), 0);
#else
	cr_skip_test("built without the rdma-core headers (no emulation)");
#endif
}

#if KINET_HAVE_JSONC
static json_object *get(json_object *o, const char *key, json_type type)
{
	json_object *v = NULL;
	cr_assert(json_object_object_get_ex(o, key, &v), "no key %s", key);
	cr_assert(json_object_is_type(v, type), "%s has the wrong type", key);
	return v;
}

static json_object *run_json(int *status)
{
	char *out = run_info("--json", status);
	json_tokener *tk = json_tokener_new();
	json_object *o = json_tokener_parse_ex(tk, out, (int)strlen(out));
	cr_assert_not_null(o, "--json output does not parse: %s\n%s",
			   json_tokener_error_desc(json_tokener_get_error(tk)), out);
	json_tokener_free(tk);
	free(out);
	return o;
}

Test(mlx5_info, json_parses_with_every_section)
{
	int st;
	json_object *o = run_json(&st);
	cr_assert_eq(st, 0);
	get(o, "version", json_type_string);
	get(get(o, "build", json_type_object), "hwloc", json_type_int);
	json_object *gpus = get(o, "gpus", json_type_array);
	get(o, "nics", json_type_array);
	get(get(o, "peer_memory", json_type_object), "loaded", json_type_boolean);
	json_object *topo = get(o, "topology", json_type_object);
	cr_assert_eq(json_object_get_boolean(get(topo, "available", json_type_boolean)),
		     KINET_HAVE_HWLOC);
	json_object *choice = get(o, "choice", json_type_object);
	const char *b = json_object_get_string(get(choice, "backend", json_type_string));
	cr_assert(!strcmp(b, "soft") || !strcmp(b, "mlx5"), "backend %s", b);
	cr_assert_eq(json_object_array_length(get(choice, "gpus", json_type_array)),
		     json_object_array_length(gpus));
	json_object *tun = get(o, "tunables", json_type_array);
	cr_assert_geq(json_object_array_length(tun), 10u);
	int found = 0;
	for (size_t i = 0; i < json_object_array_length(tun); i++) {
		json_object *t = json_object_array_get_idx(tun, i);
		if (!strcmp(json_object_get_string(get(t, "name", json_type_string)),
			    "KINET_MLX5_EMULATE"))
			found = 1;
		get(t, "value", json_type_string);
	}
	cr_assert(found);
	json_object_put(o);
}

Test(mlx5_info, json_over_the_emulation)
{
	setenv("KINET_MLX5_EMULATE", "1", 1);
	setenv("KINET_MLX5_ADDR_FAMILY", "ipv6", 1);
	int st;
	json_object *o = run_json(&st);
	cr_assert_eq(st, 0);
	json_object *nics = get(o, "nics", json_type_array);
	cr_assert_eq(json_object_array_length(nics), 2u);
	json_object *n0 = json_object_array_get_idx(nics, 0);
	cr_assert_str_eq(json_object_get_string(get(n0, "name", json_type_string)), "mlx5_0");
	cr_assert(json_object_get_boolean(get(n0, "usable", json_type_boolean)));
	json_object *p0 = json_object_array_get_idx(get(n0, "ports", json_type_array), 0);
	/* KINET_MLX5_ADDR_FAMILY=ipv6: the global IPv6 RoCE v2 GID (index 4) */
	cr_assert_eq(json_object_get_int(get(p0, "gid_index", json_type_int)), 4);
	cr_assert_str_eq(json_object_get_string(get(p0, "gid", json_type_string)), "fd00:77::1");
	json_object *choice = get(o, "choice", json_type_object);
	cr_assert_str_eq(json_object_get_string(get(choice, "backend", json_type_string)), "mlx5");
	cr_assert(json_object_get_boolean(get(choice, "trial", json_type_boolean)));
	get(choice, "doorbell", json_type_string);
	json_object_put(o);
}
#endif
#endif

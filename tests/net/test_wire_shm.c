/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm endpoints' names and the regions ended processes leave in
 * /dev/shm. The wire names its shm endpoints "<pid>.<PID namespace>.<node>"
 * (the provider adds ":<uid>:<n>"), unique to the process, and at the first
 * shm endpoint a process opens it removes the regions that ended processes
 * left (a killed one's: libfabric removes a region only when its endpoint
 * closes, or on SIGINT and SIGTERM). A child plants regions, all but one an
 * hour old: of a pid no process has and of its own pid with another node,
 * and one of the provider's own form with its pid (removed); of a live
 * process, another PID namespace, another user, the provider's form with
 * another pid, a near miss of the form, a fresh one of its own pid and one
 * the child maps (kept). Then it opens a context.
 */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <sys/mman.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <criterion/criterion.h>
#include "test_wire_common.h"

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

static int plant(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return -1;
	int rc = ftruncate(fd, 4096);
	close(fd);
	return rc;
}

/* This process's region: the one name in /dev/shm that starts "<pid>.<ns>.",
 * but for skip (a path). */
static int own_regions(const char *pre, const char *skip, char *name, size_t cap)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, pre, strlen(pre)) && strcmp(e->d_name, skip + 9)) {
			snprintf(name, cap, "/dev/shm/%s", e->d_name);
			n++;
		}
	closedir(d);
	return n;
}

#define NPLANT 10
#define NGONE 3 /* the first NGONE are removed */
#define FRESH 8 /* made now, not an hour ago */
#define MAPPED 9 /* mapped by the child */

/* The regions the child (pid me, of parent) plants; INT_MAX is above any
 * pid_max, so no process has it. */
static void plant_names(pid_t me, pid_t parent, char p[NPLANT][300])
{
	unsigned long long ns = tw_pid_ns();
	unsigned uid = (unsigned)getuid();
	uint64_t r[NPLANT];
	tu_fill_random(r, sizeof(r), (uint64_t)me);
	const int gone = INT_MAX;
	/* removed: a process's that has ended, one of our pid with another node,
	 * the provider's own form with our pid */
	snprintf(p[0], 300, "/dev/shm/%d.%llx.%016llx:%u:0", gone, ns, (unsigned long long)r[0], uid);
	snprintf(p[1], 300, "/dev/shm/%d.%llx.%016llx:%u:3", (int)me, ns, (unsigned long long)r[1],
		 uid);
	snprintf(p[2], 300, "/dev/shm/%d:%u:7", (int)me, uid);
	/* kept: a live process's (our parent), another PID namespace's, another
	 * user's, the provider's form with another pid, a near miss of the form
	 * (15 hex digits), a fresh one of its own pid (another copy of the library
	 * may be making it), and one the child maps */
	snprintf(p[3], 300, "/dev/shm/%d.%llx.%016llx:%u:0", (int)parent, ns,
		 (unsigned long long)r[3], uid);
	snprintf(p[4], 300, "/dev/shm/%d.%llx.%016llx:%u:0", gone, ns + 1, (unsigned long long)r[4],
		 uid);
	snprintf(p[5], 300, "/dev/shm/%d.%llx.%016llx:%u:0", gone, ns, (unsigned long long)r[5],
		 uid + 1);
	snprintf(p[6], 300, "/dev/shm/%d:%u:0", gone, uid);
	snprintf(p[7], 300, "/dev/shm/%d.%llx.%015llx:%u:0", gone, ns,
		 (unsigned long long)(r[7] >> 4), uid);
	snprintf(p[FRESH], 300, "/dev/shm/%d.%llx.%016llx:%u:0", (int)me, ns,
		 (unsigned long long)r[8], uid);
	snprintf(p[MAPPED], 300, "/dev/shm/%d.%llx.%016llx:%u:1", gone - 2, ns,
		 (unsigned long long)r[9], uid);
}

static int child(void)
{
	setenv("KINET_FI_PROVIDER", "shm", 1);
	unsigned long long ns = tw_pid_ns();
	CK(ns != 0);
	char p[NPLANT][300];
	plant_names(getpid(), getppid(), p);
	for (int i = 0; i < NPLANT; i++) {
		CK(plant(p[i]) == 0);
		/* left by an earlier process: older than this one, and not fresh */
		struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
		if (i != FRESH)
			CK(utimensat(AT_FDCWD, p[i], old, 0) == 0);
	}
	int fd = open(p[MAPPED], O_RDWR);
	CK(fd >= 0);
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CK(m != MAP_FAILED);
	close(fd);

	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *c;
	kinet_pd *pd;
	kinet_qp *q;
	uint8_t d[KINET_QP_DESC_MAX];
	CK0(kinet_open(&ca, &c));
	CK0(kinet_pd_alloc(c, &pd));
	CK0(kinet_qp_create(pd, NULL, &q));
	int n = kinet_qp_export(q, d, sizeof(d)); /* the endpoint exists from here */
	if (n == -ENOSYS || n == -ENODEV)
		return 77;
	CK(n > 0);
	int rc = 0;
	for (int i = 0; i < NPLANT; i++)
		if (exists(p[i]) != (i >= NGONE)) {
			fprintf(stderr, "%s: %s\n", p[i], i >= NGONE ? "removed" : "left");
			rc = 1;
		}
	/* our endpoint's region, named after our pid and namespace ... */
	char pre[64], own[300];
	snprintf(pre, sizeof(pre), "%d.%llx.", (int)getpid(), ns);
	CK(own_regions(pre, p[FRESH], own, sizeof(own)) == 1);
	/* ... and our node */
	struct kinet_qp_info qi;
	CK0(kinet_qp_desc_parse(d, (size_t)n, &qi));
	char want[64];
	snprintf(want, sizeof(want), ".%016llx:", (unsigned long long)qi.node);
	CK(strstr(own, want) != NULL);
	CK0(kinet_qp_destroy(q));
	CK0(kinet_pd_free(pd));
	CK0(kinet_close(c));
	CK(!exists(own)); /* closing the endpoint removes its region */
	munmap(m, 4096);
	return rc;
}

Test(wire_shm, regions_of_ended_processes_are_removed)
{
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(child());
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	char p[NPLANT][300]; /* what the child planted, whatever became of it */
	plant_names(pid, getpid(), p);
	for (int i = 0; i < NPLANT; i++)
		unlink(p[i]);
	cr_assert(WIFEXITED(st), "the child died: status 0x%x", st);
	if (WEXITSTATUS(st) == 77)
		cr_skip_test("this build has no libfabric wire or no shm provider");
	cr_assert_eq(WEXITSTATUS(st), 0, "the child failed (its line above)");
}

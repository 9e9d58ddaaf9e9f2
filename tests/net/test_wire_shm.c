/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm provider's regions left in /dev/shm by a killed process: a later
 * process that gets the same pid must still open its endpoints. A child
 * opens one context (its endpoint's region "<pid>:<uid>:<n>"), then plants
 * copies of that region under the names its next three endpoints would
 * take, as an earlier process with its pid would have left them (same pid,
 * same region version: the provider refuses the first with EBUSY, and
 * removes it). A second context must still open its endpoint (the wire
 * removes the other stale regions and opens it again: it takes the name
 * after the refused one, created afresh); the planted regions are gone, the
 * live one, a region named with another pid and one of our pid newer than
 * this process (another PID namespace's, perhaps) are not.
 */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <time.h>
#include <sys/mman.h>
#include <dirent.h>
#include <fcntl.h>
#include <criterion/criterion.h>
#include "test_wire_common.h"

/* The one region of this process in /dev/shm; its counter in *n. */
static int own_region(char *name, size_t cap, long *n)
{
	char pre[48];
	snprintf(pre, sizeof(pre), "%d:%u:", (int)getpid(), (unsigned)getuid());
	DIR *d = opendir("/dev/shm");
	if (!d)
		return -1;
	int found = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, pre, strlen(pre))) {
			snprintf(name, cap, "%s", e->d_name);
			*n = strtol(e->d_name + strlen(pre), NULL, 10);
			found++;
		}
	closedir(d);
	return found;
}

/* Regions named with our pid before we opened any: an earlier process's. */
static void clear_own_regions(void)
{
	char pre[48], path[300];
	snprintf(pre, sizeof(pre), "%d:%u:", (int)getpid(), (unsigned)getuid());
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, pre, strlen(pre))) {
			snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
			unlink(path);
		}
	closedir(d);
}

static int copy_file(const char *from, const char *to)
{
	int a = open(from, O_RDONLY), b = open(to, O_WRONLY | O_CREAT | O_EXCL, 0600);
	int rc = a >= 0 && b >= 0 ? 0 : -1;
	static uint8_t buf[1 << 16];
	ssize_t k;
	while (!rc && (k = read(a, buf, sizeof(buf))) > 0)
		if (write(b, buf, (size_t)k) != k)
			rc = -1;
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return rc;
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

static int child(void)
{
	setenv("KINET_FI_PROVIDER", "shm", 1);
	clear_own_regions();
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	kinet_ctx *c1, *c2;
	kinet_pd *p1, *p2;
	kinet_qp *q1, *q2;
	uint8_t d[KINET_QP_DESC_MAX];
	CK0(kinet_open(&ca, &c1));
	CK0(kinet_pd_alloc(c1, &p1));
	CK0(kinet_qp_create(p1, NULL, &q1));
	int n1 = kinet_qp_export(q1, d, sizeof(d)); /* the endpoint exists from here */
	if (n1 == -ENOSYS || n1 == -ENODEV)
		return 77;
	CK(n1 > 0);
	char live[256], stale[3][300], other[300];
	long k;
	CK(own_region(live, sizeof(live), &k) == 1);
	char lp[300];
	snprintf(lp, sizeof(lp), "/dev/shm/%s", live);
	ino_t ino[3];
	for (int i = 0; i < 3; i++) {
		snprintf(stale[i], sizeof(stale[i]), "/dev/shm/%d:%u:%ld", (int)getpid(),
			 (unsigned)getuid(), k + 1 + i);
		CK(copy_file(lp, stale[i]) == 0);
		/* left by an earlier process: older than this one */
		struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
		CK(utimensat(AT_FDCWD, stale[i], old, 0) == 0);
		struct stat st;
		CK(stat(stale[i], &st) == 0);
		ino[i] = st.st_ino;
	}
	/* one of our pid made after this process started: possibly a live region of
	 * a process of another PID namespace sharing /dev/shm: kept */
	char fresh[300];
	snprintf(fresh, sizeof(fresh), "/dev/shm/%d:%u:%ld", (int)getpid(), (unsigned)getuid(),
		 k + 6);
	sleep(1); /* its time is after this process's start, whatever the rounding */
	CK(copy_file(lp, fresh) == 0);
	/* another pid's region (our parent's, which is alive): not ours to remove */
	snprintf(other, sizeof(other), "/dev/shm/%d:%u:%ld", (int)getppid(), (unsigned)getuid(),
		 999999L);
	CK(copy_file(lp, other) == 0);

	CK0(kinet_open(&ca, &c2));
	CK0(kinet_pd_alloc(c2, &p2));
	CK0(kinet_qp_create(p2, NULL, &q2));
	int n2 = kinet_qp_export(q2, d, sizeof(d));
	CK(n2 > 0); /* the endpoint opened despite the stale regions */
	struct stat st;
	CK(!exists(stale[0]));
	CK(stat(stale[1], &st) == 0 && st.st_ino != ino[1]); /* the new endpoint's */
	CK(!exists(stale[2]));
	CK(exists(lp));
	CK(exists(other));
	CK(exists(fresh));
	unlink(other);
	unlink(fresh);
	CK0(kinet_qp_destroy(q2));
	CK0(kinet_pd_free(p2));
	CK0(kinet_close(c2));
	CK0(kinet_qp_destroy(q1));
	CK0(kinet_pd_free(p1));
	CK0(kinet_close(c1));
	CK(!exists(lp) && !exists(stale[1])); /* closing an endpoint removes its region */
	return 0;
}

Test(wire_shm, endpoint_opens_over_stale_regions_of_its_pid)
{
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(child());
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	char other[300]; /* the child's region of our pid, whatever became of the child */
	snprintf(other, sizeof(other), "/dev/shm/%d:%u:%ld", (int)getpid(), (unsigned)getuid(),
		 999999L);
	unlink(other);
	cr_assert(WIFEXITED(st), "the child died: status 0x%x", st);
	if (WEXITSTATUS(st) == 77)
		cr_skip_test("this build has no libfabric wire or no shm provider");
	cr_assert_eq(WEXITSTATUS(st), 0, "the child failed (its line above)");
}

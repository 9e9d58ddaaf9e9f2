/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_shm.c - regions of the shm provider left by an earlier process that
 * had our pid. libfabric's shm names an endpoint's region in /dev/shm
 * "<pid>:<uid>:<n>" (the address fi_shm://<pid>, the user, a counter of the
 * process's endpoints) and creates it exclusively; a region of that name
 * whose recorded process is alive (the earlier process had our pid, so it
 * is us) is refused with EBUSY when the endpoint is enabled. libfabric
 * removes the one it refused; the earlier process may have left others
 * that the next endpoints of this process would meet. Those are removed
 * here: a region named with our pid and user that no endpoint of this
 * process maps is stale (a live endpoint maps its region from creation to
 * close; wire_shm_lock keeps the library's own endpoints from being
 * created meanwhile). And at exit, the regions of this process's endpoints
 * still open (wire_shm_region_add).
 */

#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>
#include "nic/soft/wire_int.h"
#if KINET_HAVE_FABRIC

static pthread_mutex_t shm_lock = PTHREAD_MUTEX_INITIALIZER;

void wire_shm_lock(bool on)
{
	if (on)
		pthread_mutex_lock(&shm_lock);
	else
		pthread_mutex_unlock(&shm_lock);
}

/* "<pid>:<uid>:<digits>" exactly, with our pid and user. */
static bool own_region_name(const char *n, const char *pre)
{
	size_t l = strlen(pre);
	if (strncmp(n, pre, l) || !n[l])
		return false;
	for (const char *c = n + l; *c; c++)
		if (*c < '0' || *c > '9')
			return false;
	return true;
}

/* Is /dev/shm/name mapped by this process (an endpoint of ours owns it)? */
static bool mapped_here(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return true; /* cannot tell: keep it */
	char path[300], line[640];
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	size_t pl = strlen(path);
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');
		if (!p)
			continue;
		p[strcspn(p, "\n")] = 0;
		found = !strncmp(p, path, pl) && (p[pl] == 0 || p[pl] == ' ');
	}
	fclose(f);
	return found;
}

/* When this process started (seconds since the epoch), or 0 when unknown:
 * a region made after that may belong to a live process of another PID
 * namespace that shares /dev/shm and has our pid number. */
static time_t started_at(void)
{
	long tck = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/self/stat", "r");
	if (!f || tck <= 0) {
		if (f)
			fclose(f);
		return 0;
	}
	char buf[1024];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the command may hold spaces */
	unsigned long long st = 0;
	/* after ") ": state (field 3), then fields 4..21, then starttime (22) */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
				"%*d %*d %*d %llu", &st) != 1)
		return 0;
	f = fopen("/proc/stat", "r");
	if (!f)
		return 0;
	unsigned long long btime = 0;
	char line[256];
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	return btime ? (time_t)(btime + st / (unsigned long long)tck) : 0;
}

int wire_shm_clear_stale(char *names, size_t cap)
{
	time_t t0 = started_at();
	char pre[48];
	snprintf(pre, sizeof(pre), "%d:%u:", (int)getpid(), (unsigned)getuid());
	DIR *d = opendir("/dev/shm");
	if (names && cap)
		names[0] = 0;
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!own_region_name(e->d_name, pre))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid() || mapped_here(e->d_name))
			continue;
		/* only what is older than this process: a region made since may be
		 * a live one of a process with our pid in another PID namespace */
		if (!t0 || st.st_mtime >= t0)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0))
			continue;
		n++;
		if (names && cap) {
			size_t l = strlen(names);
			snprintf(names + l, cap - l, "%s/dev/shm/%s", l ? ", " : "", e->d_name);
		}
	}
	closedir(d);
	return n;
}

/* The regions of this process's shm endpoints, by name, for the exit
 * below (under shm_lock). */
static char **regions;
static int nregions;
static pid_t regions_pid;

/* The region name in an shm address (fi_shm://<name>), or NULL. */
static const char *region_name(const uint8_t *addr, size_t len)
{
	static const char scheme[] = "fi_shm://";
	size_t sl = sizeof(scheme) - 1;
	if (len <= sl || memcmp(addr, scheme, sl) || !memchr(addr, 0, len))
		return NULL;
	const char *name = (const char *)addr + sl;
	return strchr(name, '/') ? NULL : name;
}

int wire_shm_addr_pid(const uint8_t *addr, size_t len)
{
	const char *name = region_name(addr, len);
	int pid = 0;
	return name && sscanf(name, "%d:", &pid) == 1 ? pid : 0;
}

void wire_shm_region_del(const uint8_t *addr, size_t len)
{
	const char *name = region_name(addr, len);
	if (!name)
		return;
	pthread_mutex_lock(&shm_lock);
	for (int i = 0; regions_pid == getpid() && i < nregions; i++)
		if (!strcmp(regions[i], name)) {
			free(regions[i]);
			regions[i] = regions[--nregions];
			break;
		}
	pthread_mutex_unlock(&shm_lock);
}

void wire_shm_region_add(const uint8_t *addr, size_t len)
{
	const char *name = region_name(addr, len);
	if (!name)
		return;
	pthread_mutex_lock(&shm_lock);
	if (regions_pid != getpid()) { /* a forked child: its parent's are not its own */
		for (int i = 0; i < nregions; i++)
			free(regions[i]);
		nregions = 0;
		regions_pid = getpid();
	}
	char **t = realloc(regions, (size_t)(nregions + 1) * sizeof(*t));
	char *c = strdup(name);
	if (t)
		regions = t;
	if (t && c)
		regions[nregions++] = c;
	else
		free(c);
	pthread_mutex_unlock(&shm_lock);
}

/* At exit (exit(), the end of main, or the library unloaded) with shm
 * endpoints still open: libfabric removes an endpoint's region when it is
 * closed, and on SIGINT or SIGTERM, but not at a plain exit, which left
 * one region in /dev/shm per context that was not closed (16 MiB each of
 * tmpfs, until a later process with this pid came). The names go (the
 * mappings stay, for whatever still runs); only regions still mapped here. */
__attribute__((destructor)) static void shm_regions_at_exit(void)
{
	if (pthread_mutex_trylock(&shm_lock))
		return; /* an endpoint is being made right now: leave it */
	if (regions_pid == getpid())
		for (int i = 0; i < nregions; i++) {
			char path[300];
			snprintf(path, sizeof(path), "/dev/shm/%s", regions[i]);
			if (mapped_here(regions[i]))
				unlink(path);
		}
	pthread_mutex_unlock(&shm_lock);
}

#endif /* KINET_HAVE_FABRIC */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm.c - names and stale regions of the shm provider. libfabric's shm
 * names an endpoint "fi_shm://<pid>:<uid>:<n>" by default (the pid, the
 * user, a counter of the process's endpoints), its region in /dev/shm after
 * that name, and keeps one mapping per name in its address vector: a server
 * that had a peer process met the next process that got that pid (and
 * counter) through the first one's region, which was gone (its QPs timed
 * out), and a region left by a killed process refused the endpoint of the
 * next process with its pid (EBUSY). So the wire names its endpoints itself
 * (wire_shm_name): the pid, the PID namespace and the process's node, unique
 * to this process. Regions of that form whose process has ended are removed
 * at the first shm endpoint a process opens (wire_shm_clear_stale), and at
 * exit the regions of this process's endpoints still open
 * (wire_shm_region_add). A peer's process is watched through a pidfd of the
 * pid in its address (wire_shm_pid_open): a send to a peer that died holding
 * the lock of its queue, in its region, would spin for ever.
 */

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include "core/driver.h"
#include "nic/soft/wire/wire_int.h"
#if KINET_HAVE_FABRIC

static pthread_mutex_t shm_lock = PTHREAD_MUTEX_INITIALIZER;

void wire_shm_lock(bool on)
{
	if (on)
		pthread_mutex_lock(&shm_lock);
	else
		pthread_mutex_unlock(&shm_lock);
}

/* Our PID namespace (its inode), 0 when it cannot be read. */
static unsigned long long pid_ns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

int wire_shm_name(struct fi_info *info)
{
	char name[96];
	int n = snprintf(name, sizeof(name), "fi_shm://%d.%llx.%016llx", (int)getpid(), pid_ns(),
			 (unsigned long long)kinet_node());
	char *c = malloc((size_t)n + 1);
	if (!c)
		return -ENOMEM;
	memcpy(c, name, (size_t)n + 1);
	free(info->src_addr);
	info->src_addr = c;
	info->src_addrlen = (size_t)n + 1;
	info->addr_format = FI_ADDR_STR;
	return 0;
}

/* Digits of base 10 (hex: 16) at *p, at least one: their value; *p moves
 * past them. */
static bool take_num(const char **p, int base, unsigned long long *v, int *ndig)
{
	const char *c = *p;
	unsigned long long x = 0;
	int n = 0;
	for (;; c++, n++) {
		int d = *c >= '0' && *c <= '9'			 ? *c - '0'
			: base == 16 && *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
							       : -1;
		if (d < 0)
			break;
		if (x > (~0ull - (unsigned)d) / (unsigned)base)
			return false;
		x = x * (unsigned)base + (unsigned)d;
	}
	*p = c;
	*v = x;
	*ndig = n;
	return n > 0;
}

/* A region name of ours, "<pid>.<ns>.<16 hex>:<uid>:<digits>", exactly: its
 * pid, PID namespace, node and user; false for any other name. */
static bool parse_region_name(const char *n, int *pid, unsigned long long *ns,
			      unsigned long long *node, unsigned *uid)
{
	unsigned long long v[5];
	int d[5];
	const char *c = n;
	static const char sep[5] = {'.', '.', ':', ':', 0};
	static const int base[5] = {10, 16, 16, 10, 10};
	for (int i = 0; i < 5; i++) {
		if (!take_num(&c, base[i], &v[i], &d[i]) || *c != sep[i])
			return false;
		if (sep[i])
			c++;
	}
	if (d[2] != 16 || v[0] == 0 || v[0] > 0x7fffffffull || v[3] > 0xffffffffull)
		return false;
	*pid = (int)v[0];
	*ns = v[1];
	*node = v[2];
	*uid = (unsigned)v[3];
	return true;
}

/* libfabric's own form, "<pid>:<uid>:<digits>", with our pid and user. */
static bool own_default_name(const char *n, const char *pre)
{
	size_t l = strlen(pre);
	if (strncmp(n, pre, l) || !n[l])
		return false;
	for (const char *c = n + l; *c; c++)
		if (*c < '0' || *c > '9')
			return false;
	return true;
}

/* When this process started (seconds since the epoch), or 0 when unknown. */
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

static pid_t swept_pid; /* the process that looked already (a forked child looks again) */

/* A region named with our pid is left alone for this long after it was
 * made: another copy of the library in this process (its own lock) may be
 * creating it, mapped only once shm has sized it. */
#define FRESH_S 10

int wire_shm_clear_stale(char *names, size_t cap)
{
	if (names && cap)
		names[0] = 0;
	if (swept_pid == getpid())
		return 0;
	swept_pid = getpid();
	unsigned long long our_ns = pid_ns();
	if (!our_ns)
		return 0; /* pids cannot be told apart from another namespace's */
	time_t now = time(NULL), t0 = started_at();
	char pre[48];
	snprintf(pre, sizeof(pre), "%d:%u:", (int)getpid(), (unsigned)getuid());
	DIR *d = opendir("/dev/shm");
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		int pid;
		unsigned long long ns, node;
		unsigned uid;
		bool ended, ours = parse_region_name(e->d_name, &pid, &ns, &node, &uid);
		if (ours) {
			if (ns != our_ns || uid != (unsigned)getuid())
				continue;
			/* its pid is gone, or it is ours and the region another process's */
			ended = pid == (int)getpid() ? node != kinet_node()
						     : kill(pid, 0) == -1 && errno == ESRCH;
		} else {
			/* the provider's own name, with our pid (an earlier build's, or
			 * another program's): an earlier process's if it is older than
			 * this one (a newer one may be a live region of a process with our
			 * pid in another PID namespace sharing /dev/shm) */
			ended = own_default_name(e->d_name, pre);
		}
		/* a region of a pid that is gone is nobody's; one named with our pid
		 * may be in the making by another copy of the library here */
		bool mine = !ours || pid == (int)getpid();
		struct stat st;
		if (!ended || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		    (mine && st.st_mtime > now - FRESH_S) ||
		    (!ours && (!t0 || st.st_mtime >= t0)) || mapped_here(e->d_name))
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

int wire_shm_pid_open(int pid, bool *gone)
{
	*gone = false;
	if (pid <= 0)
		return -1;
#ifdef SYS_pidfd_open
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd >= 0) {
		/* the engine's execs keep nothing of it */
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		return fd;
	}
	if (errno == ESRCH) {
		*gone = true;
		return -1;
	}
#endif
	*gone = kill(pid, 0) == -1 && errno == ESRCH;
	return -1;
}

bool wire_shm_pid_ended(int fd, int pid)
{
	if (fd >= 0) {
		/* readable once the process has exited (a zombie included) */
		struct pollfd pf = {fd, POLLIN, 0};
		return poll(&pf, 1, 0) == 1 && (pf.revents & (POLLIN | POLLHUP | POLLERR));
	}
	return pid > 0 && kill(pid, 0) == -1 && errno == ESRCH;
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
	return name && sscanf(name, "%d", &pid) == 1 ? pid : 0; /* "<pid>." or "<pid>:" */
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
 * tmpfs, until a later process's sweep). The names go (the
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

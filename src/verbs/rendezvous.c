// SPDX-License-Identifier: BSD-3-Clause
/*
 * rendezvous.c - how a kinet-verbs QP of one process finds its peer in
 * another process of this host from (GID, QP number) alone, as RoCE
 * addresses it, without a daemon.
 *
 * QP numbers are made unique on the host: each is a file qp-XXXXXX in a
 * per-user folder (KINET_VERBS_RENDEZVOUS_DIR, by default
 * /dev/shm/kinet-verbs-<uid>), created with O_EXCL, so two processes never
 * hold the same number. The file holds the owner's pid, the GIDs of its
 * device and, once the QP is in INIT, its software-NIC descriptor
 * (kinet_qp_export); a QP moving to RTR reads the peer's file, checks the
 * GID, and connects to the descriptor. Files are replaced whole (a
 * temporary file renamed over them), so a reader never sees half of one.
 * Files of processes that have ended are ignored, and removed on the next
 * sweep (the first QP of a process sweeps the folder).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/stat.h>
#include "core/driver.h"
#include "core/tunables.h"
#include "verbs/emu.h"
#include <kinet/net.h>

#define RV_MAGIC 0x4b4e5652u /* "KNVR" */
#define RV_QPN_MIN 0x100u
#define RV_QPN_MAX 0xffffffu

struct rv_head {
	uint32_t magic;
	uint32_t pid;
	uint32_t ngid;
	uint32_t desc_len;
};

static pthread_once_t rv_once = PTHREAD_ONCE_INIT;
static char rv_dir[512];
static int rv_err; /* negative errno when the folder is unusable */

static bool pid_alive(uint32_t pid)
{
	return pid && (kill((pid_t)pid, 0) == 0 || errno != ESRCH);
}

static void rv_path(char *buf, size_t cap, uint32_t qpn)
{
	snprintf(buf, cap, "%s/qp-%06x", rv_dir, qpn);
}

/* Reads a file of the folder: its head and up to cap bytes of the rest. */
static int rv_read(const char *path, struct rv_head *h, uint8_t *rest, size_t cap, size_t *got)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	uint8_t buf[sizeof(*h) + 16 * EMU_RV_GIDS + KINET_QP_DESC_MAX];
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < (ssize_t)sizeof(*h))
		return -EPROTO;
	memcpy(h, buf, sizeof(*h));
	if (h->magic != RV_MAGIC)
		return -EPROTO;
	size_t r = (size_t)n - sizeof(*h);
	if (r > cap)
		r = cap;
	if (rest)
		memcpy(rest, buf + sizeof(*h), r);
	if (got)
		*got = r;
	return 0;
}

/* Removes an entry whose process has ended: moved aside first, so that an
 * entry made anew under that name meanwhile is put back, not lost. */
static void rv_remove_dead(const char *path)
{
	char aside[600];
	snprintf(aside, sizeof(aside), "%s.gone-%d", path, (int)getpid());
	if (rename(path, aside))
		return;
	struct rv_head h;
	if (rv_read(aside, &h, NULL, 0, NULL) == 0 && pid_alive(h.pid))
		(void)link(aside, path); /* a live one: back where it was */
	unlink(aside);
}

static void rv_sweep(void)
{
	DIR *dir = opendir(rv_dir);
	if (!dir)
		return;
	struct dirent *e;
	char path[sizeof(rv_dir) + 16];
	while ((e = readdir(dir))) {
		if (strncmp(e->d_name, "qp-", 3) || strlen(e->d_name) != 9)
			continue;
		/* a name of 9 characters (checked above) */
		snprintf(path, sizeof(path), "%s/%.9s", rv_dir, e->d_name);
		struct rv_head h;
		if (rv_read(path, &h, NULL, 0, NULL) == 0 && !pid_alive(h.pid))
			rv_remove_dead(path);
	}
	closedir(dir);
}

static void rv_init(void)
{
	const char *d = KT(VERBS_RENDEZVOUS_DIR);
	if (d && *d)
		snprintf(rv_dir, sizeof(rv_dir), "%s", d);
	else
		snprintf(rv_dir, sizeof(rv_dir), "/dev/shm/kinet-verbs-%u", (unsigned)getuid());
	if (mkdir(rv_dir, 0700) && errno != EEXIST) {
		rv_err = -errno;
		KLOG_ERR("kinet-verbs: cannot make the rendezvous folder %s: %s", rv_dir,
			 strerror(errno));
		return;
	}
	struct stat st;
	if (lstat(rv_dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
		rv_err = -EACCES;
		KLOG_ERR("kinet-verbs: the rendezvous folder %s is not a folder of this user",
			 rv_dir);
		return;
	}
	rv_sweep();
}

/* Writes the entry of qpn whole (temporary file, renamed over it). */
static int rv_write(uint32_t qpn, const uint8_t (*gids)[16], uint32_t ngid, const void *desc,
		    size_t len)
{
	char path[600], tmp[640];
	rv_path(path, sizeof(path), qpn);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int)getpid());
	uint8_t buf[sizeof(struct rv_head) + 16 * EMU_RV_GIDS + KINET_QP_DESC_MAX];
	if (ngid > EMU_RV_GIDS)
		ngid = EMU_RV_GIDS;
	if (len > KINET_QP_DESC_MAX)
		return -E2BIG;
	struct rv_head h = {RV_MAGIC, (uint32_t)getpid(), ngid, (uint32_t)len};
	memcpy(buf, &h, sizeof(h));
	if (ngid)
		memcpy(buf + sizeof(h), gids, 16 * ngid);
	if (len)
		memcpy(buf + sizeof(h) + 16 * ngid, desc, len);
	size_t n = sizeof(h) + 16 * ngid + len;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, buf, n);
	int rc = w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		KLOG_ERR("kinet-verbs: cannot publish QP 0x%x in %s: %s", qpn, rv_dir, strerror(-rc));
	}
	return rc;
}

/* Reserves number n: 0, -EEXIST when a living process holds it (an entry of
 * an ended one is removed, and n taken), or another negative errno. */
static int rv_try(uint32_t n)
{
	char path[600];
	rv_path(path, sizeof(path), n);
	for (int tries = 0; tries < 2; tries++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			if (errno != EEXIST) {
				int e = errno;
				KLOG_ERR("kinet-verbs: cannot reserve a QP number in %s: %s", rv_dir,
					 strerror(e));
				return -e;
			}
			struct rv_head h;
			if (rv_read(path, &h, NULL, 0, NULL) == 0 && !pid_alive(h.pid)) {
				rv_remove_dead(path); /* taken by an ended process */
				continue;
			}
			return -EEXIST;
		}
		struct rv_head h = {RV_MAGIC, (uint32_t)getpid(), 0, 0};
		ssize_t w = write(fd, &h, sizeof(h));
		close(fd);
		if (w != (ssize_t)sizeof(h)) {
			unlink(path);
			return -EIO;
		}
		return 0;
	}
	return -EEXIST;
}

int emu_rv_alloc(uint32_t *qpn)
{
	pthread_once(&rv_once, rv_init);
	if (rv_err)
		return rv_err;
	uint32_t span = RV_QPN_MAX - RV_QPN_MIN + 1, r = 0;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)getpid() * 2654435761u ^ (uint32_t)time(NULL);
	for (uint32_t i = 0; i < 4096; i++) {
		uint32_t n = RV_QPN_MIN + (r + i * 7919u) % span;
		int rc = rv_try(n);
		if (rc == -EEXIST)
			continue;
		if (rc == 0)
			*qpn = n;
		return rc;
	}
	KLOG_ERR("kinet-verbs: no free QP number in %s", rv_dir);
	return -ENOSPC;
}

int emu_rv_claim(uint32_t qpn)
{
	pthread_once(&rv_once, rv_init);
	if (rv_err)
		return rv_err;
	if (qpn < RV_QPN_MIN || qpn > RV_QPN_MAX)
		return -ERANGE;
	return rv_try(qpn);
}

int emu_rv_publish(uint32_t qpn, const uint8_t (*gids)[16], uint32_t ngid, const void *desc,
		   size_t len)
{
	if (rv_err)
		return rv_err;
	return rv_write(qpn, gids, ngid, desc, len);
}

void emu_rv_release(uint32_t qpn)
{
	if (rv_err)
		return;
	char path[600];
	rv_path(path, sizeof(path), qpn);
	struct rv_head h;
	if (rv_read(path, &h, NULL, 0, NULL) == 0 && h.pid == (uint32_t)getpid())
		unlink(path);
}

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int emu_rv_lookup(uint32_t qpn, const uint8_t gid[16], void *desc, size_t cap)
{
	pthread_once(&rv_once, rv_init);
	if (rv_err)
		return rv_err;
	uint64_t wait = KT(VERBS_PEER_TIMEOUT_MS), end = now_ms() + wait;
	char path[600], g[INET6_ADDRSTRLEN];
	rv_path(path, sizeof(path), qpn);
	inet_ntop(AF_INET6, gid, g, sizeof(g));
	const char *why = "no such QP number on this host";
	uint8_t rest[16 * EMU_RV_GIDS + KINET_QP_DESC_MAX];
	for (;;) {
		struct rv_head h;
		size_t got = 0;
		int rc = rv_read(path, &h, rest, sizeof(rest), &got);
		if (rc == 0) {
			bool gid_ok = false;
			for (uint32_t i = 0; i < h.ngid && i < EMU_RV_GIDS && (i + 1) * 16 <= got; i++)
				gid_ok |= !memcmp(rest + 16 * i, gid, 16);
			if (!pid_alive(h.pid)) {
				why = "the process that held that QP number has ended";
			} else if (h.ngid == 0 || h.desc_len == 0) {
				why = "the QP is not in INIT yet";
			} else if (!gid_ok) {
				why = "the QP of that number is on a device without that GID";
			} else if (h.ngid > EMU_RV_GIDS || 16 * h.ngid + h.desc_len > got ||
				   h.desc_len > cap) {
				why = "its entry is malformed";
			} else {
				memcpy(desc, rest + 16 * h.ngid, h.desc_len);
				return (int)h.desc_len;
			}
		}
		if (now_ms() >= end)
			break;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	KLOG_ERR("kinet-verbs: no QP 0x%x at GID %s after %" PRIu64 " ms: %s (%s; "
		 "KINET_VERBS_PEER_TIMEOUT_MS)", qpn, g, wait, why, rv_dir);
	return -ENOENT;
}

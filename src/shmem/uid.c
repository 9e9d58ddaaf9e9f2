/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uid.c - init with a unique id (NVSHMEM's nvshmemx_get_uniqueid and
 * NVSHMEMX_INIT_WITH_UNIQUEID) over kinet's TCP bootstrap: the id carries
 * rank 0's "host:port" and a random job secret; every process joins that job
 * with the rank and size the program gives.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "shmem/shmem_int.h"

/* The id's layout (KINET_SHMEM_UNIQUEID_LEN bytes). */
#define UID_MAGIC "kinet-uid-1"
struct uid {
	char magic[12];
	unsigned char nonce[8]; /* which kinet_shmem_uniqueid call made it */
	char secret[36]; /* 32 hex digits */
	char addr[68];   /* rank 0's "host:port" */
};
_Static_assert(sizeof(struct uid) <= KINET_SHMEM_UNIQUEID_LEN, "unique id layout");

/* The ids this process made: rank 0 must be their maker (it listens where
 * they point). */
#define MAX_MADE 16
static uint64_t made[MAX_MADE];
static unsigned nmade;

/* This host's address for the others: KINET_BOOT_ADDR's host when set, else
 * the first IPv4 address of an interface that is up and not loopback, else
 * 127.0.0.1. */
static void host_addr(char *out, size_t cap)
{
	const char *env = kinet_tunable_str("KINET_BOOT_ADDR");
	if (env && *env) {
		const char *colon = strrchr(env, ':');
		size_t n = colon ? (size_t)(colon - env) : strlen(env);
		if (n && n < cap && strncmp(env, "*", n) != 0) {
			memcpy(out, env, n);
			out[n] = 0;
			return;
		}
	}
	snprintf(out, cap, "127.0.0.1");
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs))
		return;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		const struct sockaddr_in *sa = (const struct sockaddr_in *)(const void *)i->ifa_addr;
		inet_ntop(AF_INET, &sa->sin_addr, out, (socklen_t)cap);
		break;
	}
	freeifaddrs(ifs);
}

/* A TCP port free now on every address (rank 0 listens there at init). */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
	socklen_t len = sizeof(sa);
	int rc = 0;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len))
		rc = -errno;
	close(fd);
	return rc ? rc : ntohs(sa.sin_port);
}

int kinet_shmem_uniqueid(unsigned char id[KINET_SHMEM_UNIQUEID_LEN])
{
	if (!id) {
		SHLOG_ERR("uniqueid: no place for the id (NULL)");
		return -EINVAL;
	}
	struct uid u;
	memset(&u, 0, sizeof(u));
	memcpy(u.magic, UID_MAGIC, sizeof(UID_MAGIC));
	unsigned char rnd[24];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		int rc = -errno;
		SHLOG_ERR("uniqueid: no random bytes: %s", kinet_strerror(rc));
		return rc;
	}
	memcpy(u.nonce, rnd, sizeof(u.nonce));
	for (int i = 0; i < 16; i++)
		snprintf(u.secret + 2 * i, 3, "%02x", rnd[8 + i]);
	int port = free_port();
	if (port < 0) {
		SHLOG_ERR("uniqueid: finding a free TCP port: %s", kinet_strerror(port));
		return port;
	}
	char host[48];
	host_addr(host, sizeof(host));
	snprintf(u.addr, sizeof(u.addr), strchr(host, ':') && host[0] != '[' ? "[%s]:%d" : "%s:%d",
		 host, port);
	memcpy(&made[nmade++ % MAX_MADE], u.nonce, sizeof(u.nonce));
	memset(id, 0, KINET_SHMEM_UNIQUEID_LEN);
	memcpy(id, &u, sizeof(u));
	SHLOG_DBG("uniqueid: rank 0 will listen on %s", u.addr);
	return 0;
}

int kinet_shmem_init_uniqueid(const struct kinet_shmem_attr *attr,
			      const unsigned char id[KINET_SHMEM_UNIQUEID_LEN], int rank,
			      int nranks)
{
	if (shm_g.up)
		return -EALREADY;
	struct uid u;
	if (id)
		memcpy(&u, id, sizeof(u));
	if (!id || memcmp(u.magic, UID_MAGIC, sizeof(UID_MAGIC)) ||
	    !memchr(u.secret, 0, sizeof(u.secret)) || !memchr(u.addr, 0, sizeof(u.addr)) ||
	    !u.addr[0]) {
		SHLOG_ERR("init with a unique id: %s", id ? "not an id of kinet_shmem_uniqueid "
				"(nvshmemx_get_uniqueid), or a damaged one" : "no id (NULL)");
		return -EINVAL;
	}
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		SHLOG_ERR("init with a unique id: rank %d of %d: the rank must be in [0, %d)", rank,
			  nranks, nranks);
		return -EINVAL;
	}
	if (attr && attr->boot) {
		SHLOG_ERR("init with a unique id: attr->boot is set too: the id is the job");
		return -EINVAL;
	}
	char listen[80];
	const char *addr = u.addr;
	if (rank == 0) {
		bool mine = false;
		for (unsigned i = 0; i < MAX_MADE && i < nmade; i++)
			mine |= !memcmp(&made[i], u.nonce, sizeof(u.nonce));
		if (!mine) {
			SHLOG_ERR("init with a unique id: rank 0 must be the process that made the id "
				  "(it listens at %s, where the id points); this one did not make it",
				  u.addr);
			return -EINVAL;
		}
		snprintf(listen, sizeof(listen), "*%s", strrchr(u.addr, ':'));
		addr = listen;
	}
	struct kinet_boot_attr ba = {
		.rank = rank,
		.size = nranks,
		.addr = addr,
		.secret = u.secret,
	};
	kinet_boot *b = NULL;
	int rc = kinet_boot_init(&ba, &b);
	if (rc) {
		SHLOG_ERR("init with a unique id: joining the job at %s as rank %d of %d: %s", u.addr,
			  rank, nranks, kinet_strerror(rc));
		return rc;
	}
	return shm_init_with(attr, b);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* The bootstrap API (kinet/boot.h): argument checks, the choice of transport
 * from the environment, and dispatch to tcp.c / the MPI module (mpi.c,
 * loaded by mpi_load.c only when MPI is chosen). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "boot/boot_int.h"
#include "boot/mpi_module.h"

/* tunables.def bounds it to 1 .. INT_MAX */
static int default_timeout_ms(void)
{
	return (int)KT(BOOT_TIMEOUT_MS);
}

int kinet_boot_init(const struct kinet_boot_attr *attr, kinet_boot **out)
{
	if (!attr || !out)
		return -EINVAL;
	if (kinet_tun_refused(KT_BOOT, "kinet_boot_init"))
		return -EINVAL;
	if (attr->size < 1 || attr->rank < 0 || attr->rank >= attr->size || attr->timeout_ms < 0) {
		KLOG_ERR("boot: invalid attributes: rank %d, size %d, timeout %d ms", attr->rank,
			 attr->size, attr->timeout_ms);
		return -EINVAL;
	}
	kinet_boot *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->rank = attr->rank;
	b->size = attr->size;
	b->timeout_ms = attr->timeout_ms ? attr->timeout_ms : default_timeout_ms();
	if (b->size == 1) {
		b->transport = KBOOT_SINGLE;
		kinet_log_set_rank(b->rank);
		*out = b;
		return 0;
	}
	const char *addr = attr->addr ? attr->addr : KT(BOOT_ADDR);
	if (!*addr) {
		KLOG_ERR("boot: a job of %d processes needs rank 0's address (host:port; "
			 "KINET_BOOT_ADDR)", b->size);
		free(b);
		return -EINVAL;
	}
	b->transport = KBOOT_TCP;
	int rc = kboot_tcp_init(b, addr, attr->secret ? attr->secret : KT(BOOT_SECRET),
				attr->listening, attr->listening_arg);
	if (rc) {
		kboot_tcp_close(b);
		free(b);
		return rc;
	}
	kinet_log_set_rank(b->rank);
	KLOG_DBG("boot: rank %d of %d joined through %s", b->rank, b->size, b->addr);
	*out = b;
	return 0;
}

/* Strict decimal parse of a non-negative int: 0 or -EINVAL. */
static int parse_int(const char *s, int *v)
{
	if (!s || !*s)
		return -EINVAL;
	char *end = NULL;
	long x = strtol(s, &end, 10);
	if (*end || x < 0 || x > INT_MAX)
		return -EINVAL;
	*v = (int)x;
	return 0;
}

int kinet_boot_init_env(kinet_boot **out)
{
	if (!out)
		return -EINVAL;
	if (kinet_tun_refused(KT_BOOT, "kinet_boot_init_env"))
		return -EINVAL;
	const char *mode = KT(BOOT_MODE); /* auto, tcp or mpi: tunables.def */
	bool want_mpi = !strcmp(mode, "mpi"), want_tcp = !strcmp(mode, "tcp");
	/* Open MPI's launcher variables are not kinet's: read as they are, not
	 * through the registry of KINET_* tunables */
	const char *orank = getenv("OMPI_COMM_WORLD_RANK");
	const char *osize = getenv("OMPI_COMM_WORLD_SIZE");
	bool launched = orank && *orank && osize && *osize;
	const char *addr = KT(BOOT_ADDR);
	const char *rs = KT_STR(BOOT_RANK); /* "" or a checked decimal */
	const char *ss = KT_STR(BOOT_SIZE);

	if (want_mpi || (launched && !want_tcp)) {
		const struct kboot_mpi_ops *ops;
		const char *why;
		int lrc = kboot_mpi_load(&ops, &why);
		if (!lrc) {
			kinet_boot *b = calloc(1, sizeof(*b));
			if (!b)
				return -ENOMEM;
			b->transport = KBOOT_MPI;
			b->timeout_ms = default_timeout_ms();
			b->mpi_ops = ops;
			int rc = ops->init(b->timeout_ms, &b->mpi, &b->rank, &b->size);
			if (rc) {
				free(b);
				return rc;
			}
			kinet_log_set_rank(b->rank);
			KLOG_DBG("boot: rank %d of %d through MPI", b->rank, b->size);
			*out = b;
			return 0;
		}
		if (want_mpi) {
			KLOG_ERR("boot: KINET_BOOT_MODE=mpi but the MPI bootstrap is not "
				 "available: %s", why);
			return lrc;
		}
		if (!*addr) {
			KLOG_ERR("boot: launched by mpirun (rank %s of %s) but the MPI "
				 "bootstrap is not available: %s. Set KINET_BOOT_ADDR=host:port "
				 "(rank 0's host and a free port; and KINET_BOOT_SECRET, passed "
				 "with mpirun -x) to use the TCP bootstrap", orank, osize, why);
			return lrc;
		}
		/* auto mode under mpirun: documented (docs/multiprocess.md) */
		KLOG_WARN("boot: launched by mpirun but the MPI bootstrap is not available "
			  "(%s): TCP bootstrap through %s with the launcher's rank and size", why,
			  addr);
		rs = orank;
		ss = osize;
	} else if (launched) {
		/* KINET_BOOT_MODE=tcp under mpirun: the launcher's numbering unless set */
		if (!*rs)
			rs = orank;
		if (!*ss)
			ss = osize;
	}

	struct kinet_boot_attr attr = {0};
	if (!*addr && !*rs && !*ss) {
		KLOG_INFO("boot: no KINET_BOOT_ADDR/RANK/SIZE: a job of one process");
		attr.size = 1;
		return kinet_boot_init(&attr, out);
	}
	if (parse_int(rs, &attr.rank) || parse_int(ss, &attr.size)) {
		KLOG_ERR("boot: the TCP bootstrap needs KINET_BOOT_RANK and KINET_BOOT_SIZE "
			 "(non-negative integers; got \"%s\" and \"%s\") and KINET_BOOT_ADDR", rs,
			 ss);
		return -EINVAL;
	}
	attr.addr = addr;
	const char *secret = KT(BOOT_SECRET);
	if (!*secret && attr.size > 1)
		KLOG_WARN("boot: KINET_BOOT_SECRET is not set: any process that reaches %s can "
			  "join this job", addr);
	return kinet_boot_init(&attr, out);
}

int kinet_boot_rank(const kinet_boot *b)
{
	return b ? b->rank : -EINVAL;
}

int kinet_boot_size(const kinet_boot *b)
{
	return b ? b->size : -EINVAL;
}

const char *kinet_boot_addr(const kinet_boot *b)
{
	return b ? b->addr : "";
}

const char *kinet_boot_transport(const kinet_boot *b)
{
	static const char *names[] = {"single", "tcp", "mpi"};
	return b ? names[b->transport] : "";
}

int kinet_boot_allgather(kinet_boot *b, const void *mine, void *all, size_t len)
{
	if (!b || (len && (!mine || !all)))
		return -EINVAL;
	if (b->err)
		return b->err;
	if (len > KBOOT_MAX_GATHER / (size_t)b->size && b->transport != KBOOT_MPI)
		return -E2BIG;
	int rc;
	switch (b->transport) {
	case KBOOT_SINGLE:
		if (len)
			memmove(all, mine, len);
		rc = 0;
		break;
	case KBOOT_TCP:
		rc = kboot_tcp_allgather(b, mine, all, len);
		break;
	default:
		rc = b->mpi_ops->allgather(b->mpi, b->timeout_ms, mine, all, len);
		if (rc == -E2BIG) /* every rank alike, before any data was sent */
			return rc;
		break;
	}
	if (rc)
		b->err = rc;
	else
		b->seq++;
	return rc;
}

int kinet_boot_barrier(kinet_boot *b)
{
	if (!b)
		return -EINVAL;
	if (b->transport != KBOOT_MPI)
		return kinet_boot_allgather(b, NULL, NULL, 0);
	if (b->err)
		return b->err;
	int rc = b->mpi_ops->barrier(b->mpi, b->timeout_ms);
	if (rc)
		b->err = rc;
	return rc;
}

int kinet_boot_close(kinet_boot *b)
{
	if (!b)
		return 0;
	if (b->transport == KBOOT_TCP)
		kboot_tcp_close(b);
	else if (b->transport == KBOOT_MPI)
		b->mpi_ops->close(b->mpi, b->err != 0);
	free(b);
	return 0;
}

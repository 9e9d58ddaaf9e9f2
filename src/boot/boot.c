/* SPDX-License-Identifier: BSD-3-Clause */
/* The bootstrap API (kinet/boot.h): argument checks, the choice of transport
 * from the environment, and dispatch to tcp.c / the MPI module (mpi.c) / the
 * PMIx module (pmix.c), each loaded by mpi_load.c only when chosen. */
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

/* A bootstrap on a launcher module's table (MPI or PMIx). */
static int module_boot(int transport, const struct kboot_mpi_ops *ops, kinet_boot **out)
{
	kinet_boot *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->transport = transport;
	b->timeout_ms = default_timeout_ms();
	b->mpi_ops = ops;
	int rc = ops->init(b->timeout_ms, &b->mpi, &b->rank, &b->size);
	if (rc) {
		free(b);
		return rc;
	}
	kinet_log_set_rank(b->rank);
	KLOG_DBG("boot: rank %d of %d through %s", b->rank, b->size, kinet_boot_transport(b));
	*out = b;
	return 0;
}

/* The rank and size a launcher put in the environment, the first found of
 * Open MPI's, Slurm's, and the PMI-1 names (MPICH's Hydra, Intel MPI); PMIx
 * gives the rank only (PMIX_RANK: the size is the server's). Launcher
 * variables are not kinet's: read as they are, not through the registry of
 * KINET_* tunables. false when none is set. */
static bool launcher_vars(const char **rank, const char **size, const char **who)
{
	static const struct {
		const char *rank, *size, *who;
	} l[] = {
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun"},
		{"SLURM_PROCID", "SLURM_NTASKS", "srun"},
		{"PMI_RANK", "PMI_SIZE", "a PMI launcher"},
		{"PMIX_RANK", NULL, "a PMIx server"},
	};
	for (size_t i = 0; i < sizeof(l) / sizeof(l[0]); i++) {
		const char *r = getenv(l[i].rank), *z = l[i].size ? getenv(l[i].size) : NULL;
		if (r && *r) {
			*rank = r;
			*size = z && *z ? z : "";
			*who = l[i].who;
			return true;
		}
	}
	return false;
}

int kinet_boot_init_env(kinet_boot **out)
{
	if (!out)
		return -EINVAL;
	if (kinet_tun_refused(KT_BOOT, "kinet_boot_init_env"))
		return -EINVAL;
	const char *mode = KT(BOOT_MODE); /* auto, tcp, mpi, pmix or uid: tunables.def */
	if (!strcmp(mode, "uid")) {
		/* NVSHMEM_BOOTSTRAP=UID: the job is joined with a unique id passed by
		 * the program (kinet_shmem_init_uniqueid), not from the environment */
		KLOG_ERR("boot: KINET_BOOT_MODE (or NVSHMEM_BOOTSTRAP) is uid: a job joined with a "
			 "unique id is initialised with nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID) "
			 "(kinet_shmem_init_uniqueid); from the environment alone use auto, tcp, mpi "
			 "or pmix");
		return -EINVAL;
	}
	bool want_mpi = !strcmp(mode, "mpi"),
	     want_pmix = !strcmp(mode, "pmix"), autom = !strcmp(mode, "auto");
	const char *orank = getenv("OMPI_COMM_WORLD_RANK");
	const char *osize = getenv("OMPI_COMM_WORLD_SIZE");
	bool ompi = orank && *orank && osize && *osize;
	const char *prank = getenv("PMIX_RANK"), *pns = getenv("PMIX_NAMESPACE");
	bool pmix = prank && *prank && pns && *pns;
	const char *lrank = "", *lsize = "", *who = "";
	bool launched = launcher_vars(&lrank, &lsize, &who);
	const char *addr = KT(BOOT_ADDR);
	const char *rs = KT_STR(BOOT_RANK); /* "" or a checked decimal */
	const char *ss = KT_STR(BOOT_SIZE);
	const struct kboot_mpi_ops *ops;
	const char *why_mpi = NULL, *why_pmix = NULL;
	int lrc = 0;

	/* Open MPI's mpirun: MPI first (its collectives), then PMIx (its
	 * server), then TCP with its numbering */
	if (want_mpi || (ompi && autom)) {
		lrc = kboot_mpi_load(&ops, &why_mpi);
		if (!lrc)
			return module_boot(KBOOT_MPI, ops, out);
		if (want_mpi) {
			KLOG_ERR("boot: KINET_BOOT_MODE=mpi but the MPI bootstrap is not "
				 "available: %s", why_mpi);
			return lrc;
		}
	}
	if (want_pmix || (pmix && autom)) {
		lrc = kboot_pmix_load(&ops, &why_pmix);
		if (!lrc)
			return module_boot(KBOOT_PMIX, ops, out);
		if (want_pmix) {
			KLOG_ERR("boot: KINET_BOOT_MODE=pmix but the PMIx bootstrap is not "
				 "available: %s", why_pmix);
			return lrc;
		}
	}
	if (launched && autom && (why_mpi || why_pmix)) {
		char whys[1200];
		snprintf(whys, sizeof(whys), "%s%s%s", why_mpi ? why_mpi : "",
			 why_mpi && why_pmix ? "; " : "", why_pmix ? why_pmix : "");
		const char *what = why_mpi && why_pmix ? "neither the MPI nor the PMIx bootstrap is"
				   : why_mpi		  ? "the MPI bootstrap is not"
							  : "the PMIx bootstrap is not";
		if (!*addr) {
			KLOG_ERR("boot: launched by %s (rank %s of %s) but %s available: %s. Set "
				 "KINET_BOOT_ADDR=host:port (rank 0's host and a free port; and "
				 "KINET_BOOT_SECRET, passed by the launcher) to use the TCP bootstrap",
				 who, lrank, *lsize ? lsize : "?", what, whys);
			return lrc;
		}
		/* auto mode under a launcher: documented (docs/multiprocess.md) */
		KLOG_WARN("boot: launched by %s but %s available (%s): TCP bootstrap through %s "
			  "with the launcher's rank and size", who, what, whys, addr);
	}
	if (launched && !want_mpi && !want_pmix) {
		/* the launcher's numbering unless KINET_BOOT_RANK/SIZE say otherwise */
		if (!*rs)
			rs = lrank;
		if (!*ss)
			ss = lsize;
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
	static const char *names[] = {"single", "tcp", "mpi", "pmix"};
	return b ? names[b->transport] : "";
}

int kinet_boot_allgather(kinet_boot *b, const void *mine, void *all, size_t len)
{
	if (!b || (len && (!mine || !all)))
		return -EINVAL;
	if (b->err)
		return b->err;
	if (len > KBOOT_MAX_GATHER / (size_t)b->size && b->transport != KBOOT_MPI &&
	    b->transport != KBOOT_PMIX)
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
	if (b->transport != KBOOT_MPI && b->transport != KBOOT_PMIX)
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
	else if (b->transport == KBOOT_MPI || b->transport == KBOOT_PMIX)
		b->mpi_ops->close(b->mpi, b->err != 0);
	free(b);
	return 0;
}

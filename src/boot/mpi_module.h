/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_module.h - the interface between libkinet and its launcher modules:
 * libkinet_mpi.so (built from mpi.c when the build has MPI) and
 * libkinet_pmix.so (built from pmix.c when the build has PMIx). Both export
 * the same table.
 *
 * libkinet never links MPI: the MPI transport of the bootstrap lives in the
 * module, which links libmpi, and libkinet loads it (mpi_load.c) only for a
 * job started by mpirun or with KINET_BOOT_MODE=mpi. A process that does
 * not use MPI therefore never maps libmpi.
 *
 * The module exports one symbol, KBOOT_MPI_ENTRY, returning its table. Every
 * call returns 0 or a negative errno and is bounded by timeout_ms; the module
 * logs through libkinet's kinet_log.
 */
#ifndef KINET_BOOT_MPI_MODULE_H
#define KINET_BOOT_MPI_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Changes whenever the table below does: a module of another version is
 * refused (mixed installations). */
#define KBOOT_MPI_ABI 1
#define KBOOT_MPI_MODULE "libkinet_mpi.so"
#define KBOOT_MPI_ENTRY "kinet_mpi_module_ops"

struct kboot_mpi_ops {
	uint32_t abi; /* KBOOT_MPI_ABI of the module */
	/* Joins MPI_COMM_WORLD (MPI_Init_thread when the application has not
	 * initialised MPI, then finalized by the last close): *h is the
	 * module's handle, *rank and *size the job's. -EALREADY when MPI was
	 * finalized already, -EIO when MPI fails, -ENOMEM. */
	int (*init)(int timeout_ms, void **h, int *rank, int *size);
	/* As kinet_boot_allgather (same lengths on every rank, else -EPROTO;
	 * -E2BIG on every rank alike, after the lengths were compared and
	 * before any data is sent, beyond INT_MAX in all). */
	int (*allgather)(void *h, int timeout_ms, const void *mine, void *all, size_t len);
	int (*barrier)(void *h, int timeout_ms);
	/* broken: a collective failed, so a request may be pending forever and
	 * MPI is left alone (not freed, not finalized). */
	void (*close)(void *h, bool broken);
};

typedef const struct kboot_mpi_ops *(*kboot_mpi_entry_fn)(void);

/* The PMIx module: the same table (init joins the job's PMIx namespace:
 * PMIx_Init, rank and PMIX_JOB_SIZE; the collectives are fences). */
#define KBOOT_PMIX_MODULE "libkinet_pmix.so"
#define KBOOT_PMIX_ENTRY "kinet_pmix_module_ops"

/* The module's table (mpi_load.c): 0; -ENOSYS when this build has no MPI;
 * -ELIBACC when the module cannot be used (not installed, a library it
 * needs such as libmpi missing, not a kinet module or of another version).
 * *why says which. Loaded once per process, never unloaded. */
int kboot_mpi_load(const struct kboot_mpi_ops **ops, const char **why);
/* The same for the PMIx module (-ENOSYS: this build has no PMIx). */
int kboot_pmix_load(const struct kboot_mpi_ops **ops, const char **why);

#endif

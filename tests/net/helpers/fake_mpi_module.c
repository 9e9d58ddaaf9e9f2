/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stand-ins for a broken MPI module (libkinet_mpi.so), for the bootstrap
 * tests of what libkinet says when the module cannot be used:
 *   FAKE_missing_dep  needs a library that is not installed (as the real
 *                     module does when libmpi is missing)
 *   FAKE_no_entry     has no entry point
 *   FAKE_other_abi    speaks another version of the module interface
 */
#include <stddef.h>
#include "boot/mpi_module.h"

#if defined(FAKE_missing_dep)
int kinet_test_gone(void); /* in a library the test does not install */
#endif

#if !defined(FAKE_no_entry)
static struct kboot_mpi_ops ops = {.abi = KBOOT_MPI_ABI + 100};

const struct kboot_mpi_ops *kinet_mpi_module_ops(void);
const struct kboot_mpi_ops *kinet_mpi_module_ops(void)
{
#if defined(FAKE_missing_dep)
	ops.abi = (uint32_t)kinet_test_gone();
#endif
	return &ops;
}
#else
int kinet_fake_mpi_module(void);
int kinet_fake_mpi_module(void)
{
	return 0;
}
#endif

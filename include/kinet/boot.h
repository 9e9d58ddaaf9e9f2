/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/boot.h - the bootstrap: how the processes of one job find each other
 * and exchange small blobs (QP and memory descriptors) before they connect.
 *
 * Two transports behind one API:
 *  - tcp: rank 0 listens on "host:port", every other rank connects to it
 *    (star through rank 0). Each connection proves that it knows the job
 *    secret by a challenge-response over random nonces (the secret itself
 *    never crosses the network); a connection that fails the proof is logged
 *    and dropped while rank 0 keeps waiting for the real ranks.
 *    What strangers (processes without the secret) get: a challenge, then a
 *    refusal (-KINET_ESECRET, -EPROTO, -KINET_EVERSION) or, when silent or
 *    slow, a drop 2 s after they were accepted. They cannot keep the real
 *    ranks out: rank 0 serves every connection at once from one event loop,
 *    never waits on one, keeps up to 1024 handshakes (half its free
 *    descriptors when fewer), and when all are taken drops the oldest one
 *    past 250 ms (of the source address with the most) for the next
 *    connection, which otherwise waits its turn in the listen backlog. A
 *    dropped rank is told to try again and does, within its timeout.
 *    Refusals are logged one by one for the first few, then summed up.
 *  - mpi: when the job is launched by Open MPI's mpirun and the library was
 *    built with MPI, rank and size come from the launcher and the exchange is
 *    done with MPI collectives, in a module loaded only then (see
 *    kinet_boot_init_env).
 *
 * Every blocking step is bounded by the timeout (attr->timeout_ms, default
 * KINET_BOOT_TIMEOUT_MS). A bootstrap object is used by one thread at a time.
 * All calls return 0 or a negative errno (kinet_strerror explains), notably
 * -ETIMEDOUT, -KINET_ESECRET (wrong job secret), -KINET_EVERSION (the peer
 * speaks another bootstrap protocol version), -EPROTO (malformed message).
 * After a failed collective the object is broken: later collectives return
 * the same error; only kinet_boot_close remains to do.
 */
#ifndef KINET_BOOT_H
#define KINET_BOOT_H

#include <stddef.h>
#include <kinet/errors.h> /* -KINET_EVERSION, -KINET_ESECRET */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kinet_boot kinet_boot;

/* Version of the TCP bootstrap protocol; peers with another one are refused. */
#define KINET_BOOT_PROTO_VERSION 1

struct kinet_boot_attr {
	int rank; /* 0 .. size-1 */
	int size; /* number of processes, >= 1 */
	/* "host:port" of rank 0 ("[v6addr]:port" for IPv6). Rank 0 listens there;
	 * port 0 makes it pick a free port (kinet_boot_addr reports it, and so
	 * does the `listening` callback). Host "" or "*" listens on every
	 * address. NULL: the tunable KINET_BOOT_ADDR. Unused when size is 1. */
	const char *addr;
	/* Shared job secret (any string). NULL: the tunable KINET_BOOT_SECRET.
	 * An empty secret lets any process that reaches the port join. */
	const char *secret;
	/* Bound on every blocking step, in milliseconds. 0: the tunable
	 * KINET_BOOT_TIMEOUT_MS. Negative is invalid. */
	int timeout_ms;
	/* Optional, rank 0 only: called once rank 0 listens, with its actual
	 * "host:port", before it waits for the other ranks (e.g. to hand the
	 * address of a port-0 listener to the processes about to start). */
	void (*listening)(const char *addr, void *arg);
	void *listening_arg;
};

/* Joins the job described by attr over TCP. Returns once every rank has
 * joined (rank 0: all size-1 others passed the secret check; others: rank 0
 * accepted them and reported the job complete), or fails with -ETIMEDOUT
 * when that does not happen within the timeout (rank 0 then tells the ranks
 * that did join), -KINET_ESECRET when rank 0 refuses our secret (or proves
 * not to know it), -KINET_EVERSION, -EPROTO, -EINVAL (bad attr or address),
 * -EADDRINUSE (rank 0 cannot listen there), -EEXIST (another process holds
 * this rank and its connection is open; a rank whose earlier connection is
 * gone takes its place). A rank that rank 0 hangs up on or tells to try
 * again before accepting it tries again until the timeout. *out is set
 * only on success. */
int kinet_boot_init(const struct kinet_boot_attr *attr, kinet_boot **out);

/* Joins the job described by the environment:
 *  - launched by Open MPI's mpirun (OMPI_COMM_WORLD_RANK/SIZE set): rank,
 *    size and the exchange through MPI. libkinet does not link MPI: it loads
 *    its MPI module (libkinet_mpi.so, installed beside libkinet, which links
 *    libmpi) at this point only, so a process that never gets here with MPI
 *    never maps libmpi. MPI_Init is called only when the application has not
 *    initialised MPI; MPI is then finalized by the last kinet_boot_close,
 *    otherwise left alone.
 *  - launched by mpirun but the MPI bootstrap is not available (the build has
 *    no MPI: -ENOSYS; the module or a library it needs, such as libmpi,
 *    cannot be loaded: -ELIBACC): the TCP bootstrap with the launcher's rank
 *    and size when KINET_BOOT_ADDR is set (a warning says why), else that
 *    error, with a message naming what is missing and what to set.
 *  - otherwise TCP with KINET_BOOT_ADDR, KINET_BOOT_RANK, KINET_BOOT_SIZE,
 *    KINET_BOOT_SECRET, KINET_BOOT_TIMEOUT_MS; with none of ADDR, RANK, SIZE
 *    set, a job of one process (rank 0, size 1).
 * KINET_BOOT_MODE=tcp|mpi forces a transport (auto by default): with tcp,
 * MPI is never loaded; with mpi, an unavailable MPI bootstrap is the error
 * above, never a switch to TCP. */
int kinet_boot_init_env(kinet_boot **out);

/* This process's rank and the job size. */
int kinet_boot_rank(const kinet_boot *b);
int kinet_boot_size(const kinet_boot *b);

/* Rank 0's actual "host:port" (the picked port when asked for port 0); ""
 * for a job of one process or the MPI transport. Valid until close. */
const char *kinet_boot_addr(const kinet_boot *b);

/* The transport in use: "tcp", "mpi" or "single" (size 1). */
const char *kinet_boot_transport(const kinet_boot *b);

/* Every rank contributes len bytes (`mine`); `all` receives size*len bytes,
 * rank r's contribution at offset r*len. Collective: every rank calls it
 * with the same len (a rank with another len makes the call fail with
 * -EPROTO on every rank). len 0 is allowed. -E2BIG if size*len overflows or
 * exceeds 1 GiB (tcp) / INT_MAX (mpi). */
int kinet_boot_allgather(kinet_boot *b, const void *mine, void *all, size_t len);

/* Returns once every rank has entered the barrier (or fails, bounded by the
 * timeout). */
int kinet_boot_barrier(kinet_boot *b);

/* Closes the connections (and finalizes MPI if the bootstrap initialised it
 * and this is the last MPI bootstrap object). Not collective: a rank may
 * close while others still finish; NULL is accepted. Always 0. */
int kinet_boot_close(kinet_boot *b);

#ifdef __cplusplus
}
#endif
#endif

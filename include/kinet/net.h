/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/net.h - endpoint descriptors: how a QP and a memory region of one
 * process are described to another process, and connecting QPs across
 * processes. The same calls and format on every backend: a software-NIC QP
 * is reached over its wire (libfabric), a ConnectX QP (mlx5) through its
 * own addressing (QPN, first PSN, GID/LID, MTU), carried in the descriptor.
 *
 * A descriptor is a small, versioned byte string in a fixed byte order, so
 * it can travel over any bootstrap (kinet/boot.h, a socket, a file) between
 * processes and hosts. Typical use, on each side:
 *
 *     char mine[KINET_QP_DESC_MAX], theirs[KINET_QP_DESC_MAX];
 *     int n = kinet_qp_export(qp, mine, sizeof(mine));   // n bytes to send
 *     ... exchange ...
 *     kinet_qp_connect_remote(qp, theirs, their_len);     // RESET/INIT -> RTS
 *
 * Descriptors of another version are refused with -KINET_EVERSION; byte
 * strings that are not kinet descriptors with -EPROTO.
 */
#ifndef KINET_NET_H
#define KINET_NET_H

#include <stddef.h>
#include <stdint.h>
#include <kinet/errors.h>
#include <kinet/kinet.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the descriptor format (and of the wire protocol it implies;
 * 2: rendezvous writes and cumulative acknowledgements; 3: the target says
 * when it reads a requester's rendezvous sources no more; 4: a QP descriptor
 * may carry a second address, for peers on the same host). */
#define KINET_NET_VERSION 4

/* Largest serialised QP descriptor; a buffer this size always suffices. */
#define KINET_QP_DESC_MAX 256
/* Size of a serialised memory region descriptor. */
#define KINET_MR_DESC_SIZE 48

/* A QP descriptor, decoded. */
struct kinet_qp_info {
	uint32_t version;       /* KINET_NET_VERSION of the writer */
	uint32_t qpn;           /* QP number in its process */
	uint64_t gen;           /* generation of the QP: changes on every RESET */
	uint64_t node;          /* incarnation of the owning process (random) */
	char provider[32];      /* transport: the libfabric provider of a software-NIC
				 * QP's wire ("tcp;ofi_rxm"), or "mlx5" */
	uint8_t addr[128];      /* how to reach it: the wire address (fi_getname of its
				 * endpoint), or the mlx5 QP's addressing */
	uint32_t addr_len;
};

/* A memory region descriptor, decoded: what a peer needs to address the
 * region with RDMA (raddr within [addr, addr+len), rkey). */
struct kinet_mr_info {
	uint32_t version;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
	uint64_t gen;  /* incarnation of the owning process (as kinet_qp_info.node) */
	uint32_t kind; /* enum kinet_mem_kind of the region */
};

/* Serialises the descriptor of a QP into buf (cap bytes; KINET_QP_DESC_MAX
 * always suffices). Software NIC: creates the context's wire endpoint on
 * first use, and, while KINET_FI_PROVIDER is not set and KINET_FI_SAME_HOST
 * is not off, its endpoint for peers on this host over shm (where libfabric
 * has it), whose address the descriptor carries too. The descriptor stays
 * valid until the QP is reset or destroyed (its generation changes then: a
 * peer holding the old one cannot reach the new incarnation). Returns the
 * length written, -E2BIG when cap is too small; software NIC: -EOPNOTSUPP
 * when the build has no libfabric, -ENODEV when the provider
 * (KINET_FI_PROVIDER) is not available (logged with the providers libfabric
 * has here) or fails in a way of its own (logged), otherwise the provider's error as an errno (-ENOMEM,
 * -EAGAIN, ...) when creating the context's endpoint fails; a later call
 * tries again. */
int kinet_qp_export(kinet_qp *qp, void *buf, size_t cap);

/* Decodes a QP descriptor: 0, -KINET_EVERSION (another version, logged with
 * both numbers), -EPROTO (not a QP descriptor, or truncated), -EINVAL. */
int kinet_qp_desc_parse(const void *buf, size_t len, struct kinet_qp_info *out);

/* Connects qp (in RESET or INIT) to the QP of another process described by
 * desc and moves it to RTS (INIT -> RTR -> RTS with kinet_qp_modify). Both
 * sides call it with the other's descriptor. Errors: those of
 * kinet_qp_desc_parse, -EPROTO when the peer uses another transport (another
 * libfabric provider, or a QP of the other backend), -EINVAL (bad state or
 * arguments; software NIC: a wire address that is not one of the provider's
 * format, refused before the provider sees it, so the context connects to
 * good addresses afterwards), -EOPNOTSUPP (software NIC: no libfabric in
 * this build), or the provider's refusal of the address as an errno.
 * Operations posted before the peer has connected wait for it, at most
 * KINET_NET_TIMEOUT_MS, then fail with transport retry exceeded.
 *
 * Software NIC, which provider: a peer in another process of this host
 * (same boot, user, and network, PID and mount namespaces) is reached over
 * libfabric's shm provider when both descriptors carry a same-host address
 * (KINET_FI_PROVIDER not set, KINET_FI_SAME_HOST not off, shm available on
 * both sides); every other peer over the network provider. Both sides decide
 * alike, in either order of export and connect: a QP connected before it
 * was exported names its same-host end at the connect, as its export would
 * have, and its later descriptor names it exactly where the connect took
 * shm. The connect logs which it took and why, and kinet_wire_info counts
 * the QPs on each.
 *
 * Software NIC, a peer that goes silent (stopped, dead, cut off): a QP with
 * requests outstanding that hears nothing from it for KINET_NET_TIMEOUT_MS
 * fails them (transport retry exceeded), and so does every QP of the context
 * to that peer; the context's reads of that peer's writes that make no
 * progress for as long are given up (they never write into a region).
 * Control calls (kinet_mr_reg, kinet_mr_dereg, kinet_qp_create, kinet_close)
 * return within about KINET_NET_TIMEOUT_MS; see kinet_mr_dereg for work in
 * flight. The context reconnects to the peer with fresh descriptors. A
 * peer over shm whose process has ended fails its QPs at once, without
 * waiting for the timeout, and nothing more is sent to it. */
int kinet_qp_connect_remote(kinet_qp *qp, const void *desc, size_t len);

/* Serialises the descriptor of a memory region (KINET_MR_DESC_SIZE bytes):
 * returns that length, or -E2BIG / -EINVAL. */
int kinet_mr_export(const kinet_mr *mr, void *buf, size_t cap);

/* Decodes a memory region descriptor: 0, -KINET_EVERSION, -EPROTO, -EINVAL. */
int kinet_mr_desc_parse(const void *buf, size_t len, struct kinet_mr_info *out);

/* What the software NIC's wire of a context uses, and what it has done
 * with the provider's memory registrations (docs/architecture.md,
 * "Registration modes and GPU memory"). Fields are only ever added at the
 * end: the caller passes the size it knows. */
struct kinet_wire_info {
	char provider[32];   /* the libfabric provider in use, e.g. "tcp;ofi_rxm" */
	char fabric[64];
	char domain[64];
	uint32_t fi_version; /* fi_version() of the libfabric loaded (FI_MAJOR/FI_MINOR) */
	int rma;             /* rendezvous writes (FI_RMA); 0: every write is eager */
	uint64_t mr_mode;    /* the FI_MR_* bits the provider asked for */
	int local_desc;      /* every operation carries local descriptors (FI_MR_LOCAL, or
			      * KINET_FI_MR_LOCAL=1) */
	int hmem;            /* 1: the provider took FI_HMEM and has refused no GPU region so
			      * far: GPU regions are registered with it (FI_HMEM_CUDA) when
			      * first sent from, and it moves their payloads itself (hmem_regs
			      * says how many it took); 0: GPU payloads are staged (hmem_why) */
	char hmem_why[160];  /* hmem 0: why GPU payloads are staged through host memory */
	uint64_t desc_ops;   /* buffers of the wire given to the provider with a descriptor */
	uint64_t nodesc_ops; /* ... that needed one and had none (never, unless a defect) */
	uint64_t local_regs; /* the wire's own buffers registered for descriptors */
	uint64_t user_regs;  /* user regions registered with the provider now */
	uint64_t hmem_regs;  /* GPU regions registered as FI_HMEM_CUDA (all time) */
	uint64_t hmem_bytes; /* GPU payload bytes handed to the provider in GPU memory (eager
			      * sends, rendezvous sources) */
	uint64_t hmem_refused; /* GPU registrations the provider refused */
	/* Peers in other processes of this host (same boot, user, and network,
	 * PID and mount namespaces) are reached over a second provider, shm,
	 * while KINET_FI_PROVIDER is not set (KINET_FI_SAME_HOST). The fields
	 * above from provider to hmem_why are those of the network provider;
	 * the counters (desc_ops to hmem_refused) count both together. */
	char same_host[32];      /* that provider ("shm"), "" when there is none */
	char same_host_why[160]; /* which peers go over which provider, and why */
	uint64_t qps_net;        /* QPs connected now over the network provider */
	uint64_t qps_same_host;  /* ... over the same-host provider */
	int same_host_hmem;      /* the same-host provider takes GPU regions (as hmem) */
	char same_host_hmem_why[160]; /* same_host_hmem 0: why GPU payloads over it are staged */
	/* The target's copy of rendezvous data from its read buffers into
	 * place (KINET_NET_COPY_THREAD). */
	int copy_thread;         /* 1: on a thread of its own beside the engine; 0: on the
				  * engine thread */
	char copy_why[96];       /* why (the tunable, the CPUs the process may run on) */
	uint64_t copy_thread_bytes; /* bytes that thread has copied (both wires) */
	uint64_t copy_min;       /* reads of fewer bytes are copied on the engine thread
				  * (KINET_NET_COPY_MIN) ... */
	uint64_t same_host_copy_min; /* ... over the same-host provider (larger unless
				      * KINET_NET_COPY_MIN is set: its reads are one fast
				      * kernel copy) */
	int cq_wait_fd;          /* 1: an idle engine sleeps on the network provider's wait fd
				  * (woken by traffic); 0: it naps (KINET_NET_CQ_WAIT=none, or
				  * the provider has none) */
	uint32_t reads_max;      /* most rendezvous reads this target had in flight at once
				  * on one wire (those being copied into place included):
				  * up to 16 of 1 MiB pieces, 64 where they are of 64 KiB or
				  * less */
};

/* The wire of ctx, opened now if it is not yet (as a connect would):
 * fills out (at most size bytes: sizeof(struct kinet_wire_info) as the
 * caller was built with). 0; -EINVAL (NULL, size 0); -ENOTSUP (not the
 * software NIC, or a build without libfabric); the wire's own error
 * otherwise (-ENODEV: the provider is not available). */
int kinet_wire_info(kinet_ctx *ctx, struct kinet_wire_info *out, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* KINET_NET_H */

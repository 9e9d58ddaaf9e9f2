/* SPDX-License-Identifier: BSD-3-Clause */
/* The registry of tunables: each is an environment variable with a default. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static struct kinet_tunable table[] = {
	{"KINET_LOG", "warn", NULL, "log level: error, warn, info, debug, trace"},
	{"KINET_BACKEND", "auto", NULL, "backend for kinet_open(NULL): auto, soft, mlx5"},
	{"KINET_ENGINE_THREADS", "1", NULL, "software NIC engine threads per context"},
	{"KINET_ENGINE_SPIN_US", "200", NULL,
	 "software NIC: microseconds an idle engine polls before it starts to sleep"},
	{"KINET_ENGINE_SLEEP_US", "50", NULL, "software NIC: longest sleep of an idle engine"},
	{"KINET_TIMEOUT_MS", "10000", NULL,
	 "bound on every blocking device call (kn_wait, full SQ, receive)"},
	{"KINET_SQ_DEPTH", "256", NULL, "default send queue depth (WQEs)"},
	{"KINET_DB_MODE", "auto", NULL, "doorbell mode for KN_DB_AUTO: auto, gpu, blueflame, cpu"},
	{"KINET_RNR_TIMER_US", "100", NULL, "software NIC: wait between receiver-not-ready retries"},
	{"KINET_FI_PROVIDER", "tcp;ofi_rxm", NULL, "libfabric provider of the software NIC wire"},
	{"KINET_NET_TIMEOUT_MS", "5000", NULL,
	 "wire: time without an answer after which outstanding WQEs fail (retry exceeded)"},
	{"KINET_NET_RNDV_BYTES", "32768", NULL,
	 "wire: RDMA writes from host memory of at least this many bytes go by rendezvous "
	 "(the target checks them, then reads the data straight into place); 0: never"},
	{"KINET_BOOT_ADDR", "", NULL, "bootstrap: host:port of rank 0"},
	{"KINET_BOOT_SECRET", "", NULL, "bootstrap: shared job secret"},
	{"KINET_BOOT_RANK", "", NULL, "bootstrap (tcp): rank of this process, 0 .. size-1"},
	{"KINET_BOOT_SIZE", "", NULL, "bootstrap (tcp): number of processes in the job"},
	{"KINET_BOOT_TIMEOUT_MS", "30000", NULL,
	 "bootstrap: bound on every blocking step (join, allgather, barrier)"},
	{"KINET_BOOT_MODE", "auto", NULL,
	 "bootstrap transport: auto (mpi under mpirun when built with MPI, else tcp), tcp, mpi"},
	{"KINET_MLX5_DEVICE", "", NULL, "mlx5: verbs device to use (empty: first usable)"},
	{"KINET_MLX5_PORT", "0", NULL, "mlx5: port to use (0: first active port)"},
	{"KINET_MLX5_GID_INDEX", "-1", NULL, "mlx5: GID index to use (-1: pick by link layer)"},
	{"KINET_MLX5_ADDR_FAMILY", "ipv4", NULL,
	 "mlx5 RoCE: address family of the RoCE v2 GID to pick: ipv4, ipv6, any"},
	{"KINET_MLX5_ACK_TIMEOUT", "14", NULL,
	 "mlx5: RC ACK timeout exponent (4.096 us * 2^value; 14 = 67 ms)"},
	{"KINET_MLX5_QUEUES", "verbs", NULL,
	 "mlx5: how queues are built: verbs (host memory), devx (GPU memory), auto"},
	{"KINET_MLX5_EMULATE", "0", NULL,
	 "mlx5: 1 runs the backend over an emulated rdma-core backed by the software NIC "
	 "(testing without a ConnectX NIC)"},
	{"KINET_ALLOW_HOST_STAGING", "0", NULL,
	 "allow GPU memory to be staged through host memory when no direct path exists"},
	{"KINET_GPU_SMALL_COPY", "4096", NULL,
	 "software NIC: GPU payloads up to this size use the small-copy path"},
};

#define NT ((int)(sizeof(table) / sizeof(table[0])))

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	for (int i = 0; i < NT; i++) {
		const char *v = getenv(table[i].name);
		table[i].value = (v && *v) ? v : table[i].def;
	}
}

int kinet_tunable_count(void)
{
	return NT;
}

const struct kinet_tunable *kinet_tunable_at(int i)
{
	pthread_once(&once, load);
	return (i >= 0 && i < NT) ? &table[i] : NULL;
}

const char *kinet_tunable_str(const char *name)
{
	pthread_once(&once, load);
	for (int i = 0; i < NT; i++)
		if (!strcmp(table[i].name, name))
			return table[i].value;
	return NULL;
}

long long kinet_tunable_int(const char *name)
{
	const char *v = kinet_tunable_str(name);
	return v ? strtoll(v, NULL, 0) : 0;
}

void kinet_tunables_print(FILE *f)
{
	pthread_once(&once, load);
	for (int i = 0; i < NT; i++)
		fprintf(f, "%-26s = %-12s (default %s)  %s\n", table[i].name, table[i].value,
			table[i].def[0] ? table[i].def : "\"\"", table[i].desc);
}

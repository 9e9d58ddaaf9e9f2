/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_xdp.c - the AF_XDP driver of software-NIC Ethernet ports, in
 * libkinet: loads libkinet_xdp.so (the only part of kinet linking libxdp
 * and libbpf, src/nic/soft/xdp/) on the first port that needs it and maps
 * the port thread's driver calls onto its table. Without the module (a build
 * without libxdp, libbpf or clang's BPF target; the libraries missing at run
 * time) a port says so and AF_XDP is unavailable.
 */
#include <dlfcn.h>
#include <string.h>
#include "nic/soft/eth_int.h"
#include "nic/soft/xdp/xdp_module.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const struct kinet_xdp_module_ops *mod;
static char mod_why[300];

static void load(void)
{
#if KINET_HAVE_XDP
	void *h = kinet_module_open(KINET_XDP_MODULE, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(mod_why, sizeof(mod_why), "the AF_XDP module cannot be loaded (%s)",
			 dlerror());
		return;
	}
	const struct kinet_xdp_module_ops *o = dlsym(h, "kinet_xdp_module_ops");
	if (!o || o->abi != KINET_XDP_ABI) {
		snprintf(mod_why, sizeof(mod_why), "%s is not the AF_XDP module of this kinet (%s)",
			 KINET_XDP_MODULE, o ? "another interface version" : "no entry point");
		dlclose(h);
		return;
	}
	mod = o;
#else
	snprintf(mod_why, sizeof(mod_why),
		 "this kinet was built without AF_XDP (libxdp, libbpf or clang's BPF target were "
		 "missing: see scripts/install-deps.sh)");
#endif
}

static struct kinet_xdp *xp(struct soft_eth_port *p)
{
	return p->drv_priv;
}

static int xdrv_open(struct soft_eth_port *p, char *why, size_t wl)
{
	pthread_once(&once, load);
	if (!mod) {
		snprintf(why, wl, "%s", mod_why);
		return -EOPNOTSUPP;
	}
	const char *m = KT(ETH_XDP_MODE);
	int mode = !strcmp(m, "native") ? 1 : !strcmp(m, "generic") ? 2 : 0;
	uint32_t frames = kinet_pow2((uint32_t)KT(ETH_FRAMES));
	struct kinet_xdp_info info;
	memset(&info, 0, sizeof(info));
	struct kinet_xdp *x = NULL;
	int rc = mod->open(p->p.ifname, p->p.attr.queue, frames, mode, &x, &info, why, wl);
	if (rc)
		return rc;
	p->drv_priv = x;
	memcpy(p->mac, info.mac, 6);
	if (!p->p.info.mtu)
		p->p.info.mtu = info.mtu;
	if (p->p.info.mtu + 18 > KINET_XDP_FRAME) {
		snprintf(why, wl, "MTU %u: AF_XDP frames hold %u bytes (set a smaller MTU)",
			 p->p.info.mtu, KINET_XDP_FRAME - 18);
		mod->close(x);
		p->drv_priv = NULL;
		return -EINVAL;
	}
	p->p.info.ifindex = info.ifindex;
	snprintf(p->p.info.ifname, sizeof(p->p.info.ifname), "%s", p->p.ifname);
	snprintf(p->p.info.mode, sizeof(p->p.info.mode), "%s", info.mode);
	return 0;
}

static void xdrv_close(struct soft_eth_port *p)
{
	if (p->drv_priv)
		mod->close(xp(p));
	p->drv_priv = NULL;
}

static int xdrv_rxq_add(struct soft_eth_port *p, struct soft_eth_rxq *q)
{
	char why[200] = "";
	int rc = mod->sock_add(xp(p), q->slot, why, sizeof(why));
	if (rc)
		KLOG_ERR("eth port %s: %s", p->p.ifname, why);
	return rc;
}

static void xdrv_rxq_del(struct soft_eth_port *p, struct soft_eth_rxq *q)
{
	mod->sock_del(xp(p), q->slot);
}

static int xdrv_rules(struct soft_eth_port *p)
{
	return mod->set_rules(xp(p), p->rules, (uint32_t)p->nrules, sizeof(p->rules[0]));
}

static void rx_one(void *arg, int slot, const uint8_t *data, uint32_t len)
{
	soft_eth_rx(arg, slot, data, len);
}

static int xdrv_rx(struct soft_eth_port *p, int budget)
{
	return mod->rx(xp(p), budget, rx_one, p);
}

static uint8_t *xdrv_tx_buf(struct soft_eth_port *p, uint32_t len)
{
	return mod->tx_buf(xp(p), len);
}

static void xdrv_tx_commit(struct soft_eth_port *p, uint8_t *buf, uint32_t len)
{
	mod->tx_commit(xp(p), buf, len);
}

static void xdrv_tx_flush(struct soft_eth_port *p)
{
	mod->tx_flush(xp(p));
}

static int xdrv_wait(struct soft_eth_port *p, uint64_t ns)
{
	return mod->wait(xp(p), ns);
}

static uint64_t xdrv_ring_drops(struct soft_eth_port *p, struct soft_eth_rxq *q)
{
	return mod->ring_drops(xp(p), q ? q->slot : -1);
}

const struct eth_drv soft_eth_drv_xdp = {
	.name = "xdp",
	.open = xdrv_open,
	.close = xdrv_close,
	.rxq_add = xdrv_rxq_add,
	.rxq_del = xdrv_rxq_del,
	.rules = xdrv_rules,
	.rx = xdrv_rx,
	.tx_buf = xdrv_tx_buf,
	.tx_commit = xdrv_tx_commit,
	.tx_flush = xdrv_tx_flush,
	.wait = xdrv_wait,
	.ring_drops = xdrv_ring_drops,
};

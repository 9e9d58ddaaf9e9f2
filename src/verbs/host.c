/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host.c - the host's interfaces and addresses as RoCE ports (host.h).
 */
#include "host.h"

#include <errno.h>
#include <stdio.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/if_packet.h>
#include <net/if_arp.h>

void kinet_verbs_eui64(const uint8_t mac[6], uint8_t out[8])
{
	out[0] = mac[0] ^ 0x02; /* the universal/local bit, inverted */
	out[1] = mac[1];
	out[2] = mac[2];
	out[3] = 0xff;
	out[4] = 0xfe;
	out[5] = mac[3];
	out[6] = mac[4];
	out[7] = mac[5];
}

static int if_mtu(const char *name)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return 1500;
	struct ifreq r;
	memset(&r, 0, sizeof(r));
	snprintf(r.ifr_name, sizeof(r.ifr_name), "%s", name);
	int mtu = ioctl(s, SIOCGIFMTU, &r) == 0 ? r.ifr_mtu : 1500;
	close(s);
	return mtu;
}

static void add_addr(struct kinet_verbs_port *p, const uint8_t a[16])
{
	for (int i = 0; i < p->naddr; i++)
		if (!memcmp(p->addr[i], a, 16))
			return;
	if (p->naddr < KV_MAX_ADDRS)
		memcpy(p->addr[p->naddr++], a, 16);
}

/* The ports, by interface index; loopback ones only when want_lo. */
static int scan(struct ifaddrs *all, struct kinet_verbs_port *ports, int max, bool want_lo)
{
	int n = 0;
	unsigned idx[64];
	for (struct ifaddrs *i = all; i && n < max; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_PACKET || !(i->ifa_flags & IFF_UP))
			continue;
		const struct sockaddr_ll *ll = (const struct sockaddr_ll *)i->ifa_addr;
		bool lo = (i->ifa_flags & IFF_LOOPBACK) != 0;
		if (lo != want_lo || (!lo && (ll->sll_hatype != ARPHRD_ETHER || ll->sll_halen != 6)))
			continue;
		struct kinet_verbs_port *p = &ports[n];
		memset(p, 0, sizeof(*p));
		snprintf(p->ifname, sizeof(p->ifname), "%s", i->ifa_name);
		if (ll->sll_halen == 6)
			memcpy(p->mac, ll->sll_addr, 6);
		p->mtu = if_mtu(p->ifname);
		uint8_t g[16] = {0xfe, 0x80};
		kinet_verbs_eui64(p->mac, g + 8);
		add_addr(p, g);
		idx[n] = (unsigned)ll->sll_ifindex;
		n++;
	}
	/* order by interface index (getifaddrs lists them so; make sure) */
	for (int a = 1; a < n; a++)
		for (int b = a; b > 0 && idx[b - 1] > idx[b]; b--) {
			struct kinet_verbs_port t = ports[b];
			ports[b] = ports[b - 1];
			ports[b - 1] = t;
			unsigned ti = idx[b];
			idx[b] = idx[b - 1];
			idx[b - 1] = ti;
		}
	/* IPv4 addresses first, then IPv6, as the interfaces list them */
	for (int fam = 0; fam < 2; fam++)
		for (struct ifaddrs *i = all; i; i = i->ifa_next) {
			if (!i->ifa_addr)
				continue;
			int f = i->ifa_addr->sa_family;
			if (f != (fam == 0 ? AF_INET : AF_INET6))
				continue;
			for (int k = 0; k < n; k++) {
				if (strcmp(ports[k].ifname, i->ifa_name))
					continue;
				uint8_t g[16] = {0};
				if (f == AF_INET) {
					g[10] = g[11] = 0xff;
					memcpy(g + 12,
					       &((const struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
				} else {
					memcpy(g, &((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
					       16);
				}
				add_addr(&ports[k], g);
			}
		}
	return n;
}

int kinet_verbs_host_ports(struct kinet_verbs_port *ports, int max)
{
	if (!ports || max <= 0 || max > 64)
		return -EINVAL;
	struct ifaddrs *all;
	if (getifaddrs(&all))
		return -errno;
	int n = scan(all, ports, max, false);
	if (n == 0)
		n = scan(all, ports, max, true);
	freeifaddrs(all);
	return n > 0 ? n : -ENODEV;
}

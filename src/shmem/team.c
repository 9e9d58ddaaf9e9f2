/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * team.c - teams: the predefined world, shared (the PEs this PE maps) and
 * node teams, and teams split from them. A team's handle is its slot: the
 * index of its entry in the device state and of its barrier counters in
 * every member's device heap. A split picks the lowest slot free on every
 * PE (their free-slot masks are exchanged with the split's arguments), so
 * members of different teams never share counters, and destroy is local to
 * the members, as in OpenSHMEM.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "shmem/shmem_int.h"

/* Places team slot (members: size world PEs, host memory, taken over) where
 * device code reads it. */
static int team_place(int slot, int32_t *members, int size)
{
	struct shm_team *t = &shm_g.team[slot];
	int my = -1;
	for (int i = 0; i < size; i++)
		if (members[i] == shm_g.me)
			my = i;
	t->used = true;
	t->size = size;
	t->my = my;
	t->members = members;
	if (shm_g.exec == KINET_SHMEM_EXEC_CUDA) {
		void *d;
		int rc = shm_cuda_alloc((size_t)size * sizeof(int32_t), &d);
		if (!rc)
			rc = shm_cuda_copy_to(d, members, (size_t)size * sizeof(int32_t));
		if (rc) {
			shm_cuda_free(d);
			return rc;
		}
		t->dmembers = d;
	} else {
		t->dmembers = members;
	}
	kn_shmem_team *dt = &shm_g.host.team[slot];
	dt->size = size;
	dt->my = my;
	dt->slot = (uint32_t)slot;
	dt->members = t->dmembers;
	return 0;
}

static void team_clear(int slot)
{
	struct shm_team *t = &shm_g.team[slot];
	if (!t->used)
		return;
	if (shm_g.exec == KINET_SHMEM_EXEC_CUDA)
		shm_cuda_free(t->dmembers);
	free(t->members);
	memset(t, 0, sizeof(*t));
	memset(&shm_g.host.team[slot], 0, sizeof(shm_g.host.team[slot]));
}

int shm_teams_init(void)
{
	int n = shm_g.n;
	for (int slot = 0; slot < 3; slot++) {
		int32_t *m = calloc((size_t)n, sizeof(*m));
		if (!m)
			return -ENOMEM;
		int k = 0;
		for (int p = 0; p < n; p++) {
			bool in = slot == KINET_SHMEM_TEAM_WORLD ||
				  (slot == KINET_SHMEM_TEAM_SHARED &&
				   (p == shm_g.me || shm_g.peers[p].local)) ||
				  (slot == KINET_SHMEM_TEAM_NODE && shm_g.peers[p].node == shm_g.node);
			if (in)
				m[k++] = p;
		}
		int rc = team_place(slot, m, k);
		if (rc) {
			free(m);
			return rc;
		}
	}
	return 0;
}

void shm_teams_fini(void)
{
	for (int slot = 0; slot < KN_SHMEM_MAX_TEAMS; slot++)
		team_clear(slot);
}

static const struct shm_team *team_get(kinet_shmem_team team)
{
	if (!shm_g.up || team < 0 || team >= KN_SHMEM_MAX_TEAMS || !shm_g.team[team].used)
		return NULL;
	return &shm_g.team[team];
}

/* What every PE passes to a split. */
struct split_rec {
	uint64_t seq;
	int32_t parent, start, stride, size;
	uint32_t free_mask; /* slots free on this PE */
	int32_t rc;
	/* the parent as this PE sees it (parent not INVALID): its members'
	 * fingerprint, their number and this PE's index among them */
	uint64_t pfp;
	int32_t psize, pmy;
};

/* FNV-1a over a team's world PEs, in order. */
static uint64_t members_fp(const int32_t *m, int size)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (int i = 0; i < size; i++)
		for (int k = 0; k < 4; k++) {
			h ^= (uint8_t)((uint32_t)m[i] >> (8 * k));
			h *= 0x100000001b3ull;
		}
	return h;
}

/* The parents: every member of a parent that some PE passes must pass that
 * same parent (the same handle, the same members), else the PEs would
 * disagree on the new team's members and its barrier would never
 * complete. Decided from the gathered records alone, so every PE decides
 * alike: 0 or -EINVAL (logged). */
static int check_parents(const struct split_rec *all, int n)
{
	for (int p = 0; p < n; p++) {
		const struct split_rec *a = &all[p];
		if (a->parent == KINET_SHMEM_TEAM_INVALID)
			continue;
		int same = 0, first = 0;
		for (int q = 0; q < n; q++)
			if (all[q].parent == a->parent && all[q].pfp == a->pfp &&
			    all[q].psize == a->psize) {
				same++;
				first += all[q].pmy == 0;
			}
		if (same != a->psize || first != 1) {
			SHLOG_ERR("team_split_strided refused: PE %d passes team %d of %d PEs as the "
				  "parent, but %d PEs pass that team: every member of a parent "
				  "passes it, and a PE outside every parent passes "
				  "NVSHMEM_TEAM_INVALID", p, a->parent, a->psize, same);
			return -EINVAL;
		}
	}
	return 0;
}

/* Zeroes the barrier counters of a slot and its epoch, on this PE. */
static int reset_slot(int slot)
{
	uint8_t *c = shm_g.heap[KN_SHMEM_HEAP_DEVICE].base + knx_sh_sync_off((uint32_t)slot, 0);
	size_t len = KN_SHMEM_MAX_ROUNDS * 8;
	if (shm_g.exec == KINET_SHMEM_EXEC_CUDA) {
		int rc = shm_cuda_memset(c, 0, len);
		if (!rc)
			rc = shm_cuda_memset(&shm_g.ddyn->epoch[slot], 0, sizeof(uint64_t));
		return rc;
	}
	memset(c, 0, len);
	__atomic_store_n(&shm_g.hdyn.epoch[slot], 0, __ATOMIC_RELEASE);
	return 0;
}

int kinet_shmem_team_split_strided(kinet_shmem_team parent, int start, int stride, int size,
				   kinet_shmem_team *out)
{
	if (!shm_g.up || !out)
		return -EINVAL;
	*out = KINET_SHMEM_TEAM_INVALID;
	struct split_rec r;
	memset(&r, 0, sizeof(r));
	r.seq = ++shm_g.alloc_seq;
	r.parent = parent;
	r.start = start;
	r.stride = stride;
	r.size = size;
	for (int s = 3; s < KN_SHMEM_MAX_TEAMS; s++)
		if (!shm_g.team[s].used)
			r.free_mask |= 1u << s;
	const struct shm_team *pt = parent == KINET_SHMEM_TEAM_INVALID ? NULL : team_get(parent);
	if (pt) {
		r.pfp = members_fp(pt->members, pt->size);
		r.psize = pt->size;
		r.pmy = pt->my;
	}
	if (parent != KINET_SHMEM_TEAM_INVALID && !pt) {
		SHLOG_ERR("team_split_strided: %d is not a team", parent);
		r.rc = -EINVAL;
	} else if (pt && pt->my >= 0 &&
		   (start < 0 || stride < 1 || size < 1 ||
		    (int64_t)start + (int64_t)(size - 1) * stride >= pt->size)) {
		SHLOG_ERR("team_split_strided: start %d, stride %d, size %d do not fit the parent's "
			  "%d PEs", start, stride, size, pt->size);
		r.rc = -EINVAL;
	}
	struct split_rec *all = calloc((size_t)shm_g.n, sizeof(*all));
	if (!all)
		return -ENOMEM;
	int rc = kinet_boot_allgather(shm_g.boot, &r, all, sizeof(r));
	uint32_t mask = ~0u;
	for (int p = 0; p < shm_g.n && !rc; p++) {
		const struct split_rec *b = &all[p];
		if (b->rc) {
			SHLOG_ERR("team_split_strided refused on PE %d: %s", p, kinet_strerror(b->rc));
			rc = b->rc;
		} else if (b->seq != all[0].seq || b->start != all[0].start ||
			   b->stride != all[0].stride || b->size != all[0].size) {
			SHLOG_ERR("team_split_strided refused: PE %d asks for start %d, stride %d, size "
				  "%d (call %llu), PE 0 for %d, %d, %d (call %llu): every PE of the "
				  "world calls it, with the same arguments", p, b->start, b->stride,
				  b->size, (unsigned long long)b->seq, all[0].start, all[0].stride,
				  all[0].size, (unsigned long long)all[0].seq);
			rc = -EINVAL;
		}
		mask &= b->free_mask;
	}
	if (!rc)
		rc = check_parents(all, shm_g.n);
	free(all);
	if (rc)
		return rc;
	int slot = mask ? __builtin_ctz(mask) : -1;
	if (slot < 0) {
		SHLOG_ERR("team_split_strided: %d teams are alive on some PE (KN_SHMEM_MAX_TEAMS)",
			  KN_SHMEM_MAX_TEAMS);
		return -ENOSPC;
	}
	bool member = false;
	int32_t *m = NULL;
	if (pt && pt->my >= 0) {
		m = calloc((size_t)size, sizeof(*m));
		if (!m)
			rc = -ENOMEM;
		for (int i = 0; m && i < size; i++) {
			m[i] = pt->members[start + i * stride];
			member |= m[i] == shm_g.me;
		}
	}
	if (!rc && member) {
		rc = reset_slot(slot);
		if (!rc)
			rc = team_place(slot, m, size);
		if (!rc)
			rc = shm_push_state();
		if (!rc)
			m = NULL;
		else
			team_clear(slot);
	}
	free(m);
	/* nobody signals into the slot before every member reset it */
	rc = shm_all_ok(rc);
	if (rc) {
		if (member)
			team_clear(slot);
		return rc;
	}
	if (member)
		*out = slot;
	return 0;
}

/* What every PE passes to a 2D split. */
struct split2d_rec {
	uint64_t seq;
	int32_t xrange;
	int32_t psize; /* the parent's size on its members, 0 elsewhere */
	int32_t rc;
	int32_t pad;
};

int kinet_shmem_team_split_2d(kinet_shmem_team parent, int xrange, kinet_shmem_team *xteam,
			      kinet_shmem_team *yteam)
{
	if (!shm_g.up || !xteam || !yteam) {
		SHLOG_ERR("team_split_2d: %s", shm_g.up ? "NULL team handle" : "not initialised");
		return -EINVAL;
	}
	*xteam = *yteam = KINET_SHMEM_TEAM_INVALID;
	const struct shm_team *pt = parent == KINET_SHMEM_TEAM_INVALID ? NULL : team_get(parent);
	struct split2d_rec r = {.seq = ++shm_g.alloc_seq, .xrange = xrange,
				.psize = pt ? pt->size : 0};
	if (parent != KINET_SHMEM_TEAM_INVALID && !pt) {
		SHLOG_ERR("team_split_2d: %d is not a team", parent);
		r.rc = -EINVAL;
	} else if (xrange < 1) {
		SHLOG_ERR("team_split_2d: xrange %d: it is at least 1", xrange);
		r.rc = -EINVAL;
	}
	struct split2d_rec *all = calloc((size_t)shm_g.n, sizeof(*all));
	if (!all)
		return -ENOMEM;
	int rc = kinet_boot_allgather(shm_g.boot, &r, all, sizeof(r));
	int psize = 0;
	for (int p = 0; p < shm_g.n && !rc; p++) {
		if (all[p].rc) {
			SHLOG_ERR("team_split_2d refused on PE %d: %s", p, kinet_strerror(all[p].rc));
			rc = all[p].rc;
		} else if (all[p].seq != all[0].seq || all[p].xrange != all[0].xrange) {
			SHLOG_ERR("team_split_2d refused: PE %d asks for xrange %d (call %llu), PE 0 "
				  "for %d (call %llu): every PE of the world calls it, with the same "
				  "xrange", p, all[p].xrange, (unsigned long long)all[p].seq,
				  all[0].xrange, (unsigned long long)all[0].seq);
			rc = -EINVAL;
		} else if (all[p].psize && psize && all[p].psize != psize) {
			SHLOG_ERR("team_split_2d refused: the parent has %d PEs on PE %d, %d on "
				  "another: its members pass the same team", all[p].psize, p, psize);
			rc = -EINVAL;
		} else if (all[p].psize) {
			psize = all[p].psize;
		}
	}
	free(all);
	if (!rc && !psize) {
		SHLOG_ERR("team_split_2d: no PE passes a parent team");
		rc = -EINVAL;
	}
	if (rc)
		return rc;
	int x = xrange > psize ? psize : xrange, rows = (psize + x - 1) / x;
	kinet_shmem_team got[2] = {KINET_SHMEM_TEAM_INVALID, KINET_SHMEM_TEAM_INVALID};
	/* the rows (x-axis), then the columns (y-axis); every PE makes every
	 * split, each checked against the others as a strided split */
	for (int i = 0; i < rows + x && !rc; i++) {
		int row = i < rows, start = row ? i * x : i - rows, stride = row ? 1 : x;
		int size = row ? (psize - start < x ? psize - start : x)
			       : psize / x + (start < psize % x ? 1 : 0);
		kinet_shmem_team t;
		rc = kinet_shmem_team_split_strided(parent, start, stride, size, &t);
		if (!rc && t != KINET_SHMEM_TEAM_INVALID)
			got[row ? 0 : 1] = t;
	}
	if (rc) {
		for (int k = 0; k < 2; k++)
			if (got[k] != KINET_SHMEM_TEAM_INVALID)
				kinet_shmem_team_destroy(got[k]);
		SHLOG_ERR("team_split_2d of %d PEs by %d: %s", psize, x, kinet_strerror(rc));
		return rc;
	}
	*xteam = got[0];
	*yteam = got[1];
	return 0;
}

int kinet_shmem_team_set_config(kinet_shmem_team team, const void *config, size_t len)
{
	struct shm_team *t = (struct shm_team *)team_get(team);
	if (!t || len > KINET_SHMEM_TEAM_CONFIG_MAX || (len && !config)) {
		SHLOG_ERR("team_set_config(team %d, %zu bytes): %s", team, len,
			  !t ? "not a team of this PE" : len > KINET_SHMEM_TEAM_CONFIG_MAX
							? "more than KINET_SHMEM_TEAM_CONFIG_MAX bytes"
							: "no config");
		return -EINVAL;
	}
	if (len)
		memcpy(t->config, config, len);
	t->config_len = (uint32_t)len;
	return 0;
}

int kinet_shmem_team_get_config(kinet_shmem_team team, void *out, size_t len)
{
	const struct shm_team *t = team_get(team);
	if (!t || (len && !out)) {
		SHLOG_ERR("team_get_config(team %d): %s", team,
			  !t ? "not a team of this PE" : "no buffer");
		return -EINVAL;
	}
	size_t n = len < t->config_len ? len : t->config_len;
	if (n)
		memcpy(out, t->config, n);
	return (int)t->config_len;
}

int kinet_shmem_team_destroy(kinet_shmem_team team)
{
	if (!team_get(team) || team < 3)
		return -EINVAL;
	team_clear(team);
	return shm_push_state();
}

int kinet_shmem_team_my_pe(kinet_shmem_team team)
{
	const struct shm_team *t = team_get(team);
	return t ? t->my : -1;
}

int kinet_shmem_team_n_pes(kinet_shmem_team team)
{
	const struct shm_team *t = team_get(team);
	return t ? t->size : -1;
}

int kinet_shmem_team_translate_pe(kinet_shmem_team src, int pe, kinet_shmem_team dst)
{
	const struct shm_team *s = team_get(src), *d = team_get(dst);
	if (!s || !d || pe < 0 || pe >= s->size)
		return -1;
	for (int i = 0; i < d->size; i++)
		if (d->members[i] == s->members[pe])
			return i;
	return -1;
}

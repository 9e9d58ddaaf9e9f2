/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory regions: the checks common to every backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "core/internal.h"
#include "gpu/cudrv.h"

/* ---- host pages: every one mapped, with the access the region allows ------------- */

/* GPU memory is the CUDA driver's to check (the backend asks it). */
static bool mem_is_gpu(const void *addr)
{
	const struct kinet_cuda_ops *cu = kinet_cuda_load();
	int k = cu && cu->pointer_kind ? cu->pointer_kind(addr) : kinet_cudrv_mem_kind(addr);
	return k == KINET_MEM_CUDA;
}

/* Walks /proc/self/maps (ascending, one read per registration) over the pages
 * [lo, hi): 0 when each is mapped readable, and writable when need_w; else
 * -EFAULT with *bad the first page that is not and *why what is wrong with
 * it; -errno when the file cannot be read. */
static int pages_by_maps(uintptr_t lo, uintptr_t hi, bool need_w, uintptr_t *bad,
			 const char **why)
{
	/* read(2) into a buffer on the stack: an allocation here (stdio's
	 * buffer, getline's line) could be mapped into the very hole checked */
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[8192]; /* a line: 73 bytes and a path of at most PATH_MAX */
	size_t have = 0;
	uintptr_t cur = lo;
	int rc = 0;
	bool eof = false;
	while (cur < hi && !rc) {
		char *nl = memchr(buf, '\n', have);
		if (!nl) {
			if (eof || have == sizeof(buf))
				break;
			ssize_t n = read(fd, buf + have, sizeof(buf) - have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				eof = true;
			else
				have += (size_t)n;
			continue;
		}
		*nl = 0;
		unsigned long s, e;
		char perm[5];
		if (sscanf(buf, "%lx-%lx %4s", &s, &e, perm) == 3 && e > cur) {
			if (s > cur)
				break; /* a hole at cur */
			if (perm[0] != 'r' || (need_w && perm[1] != 'w')) {
				*why = perm[0] != 'r' ? "mapped without read access"
						      : "mapped read-only, and the region allows writes";
				rc = -EFAULT;
			} else {
				cur = e;
			}
		}
		size_t used = (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, have - used);
		have -= used;
	}
	close(fd);
	if (!rc && cur < hi) {
		*why = "not mapped";
		rc = -EFAULT;
	}
	*bad = cur;
	return rc;
}

/* PROCMAP_QUERY (Linux 6.11, <linux/fs.h>): one mapping per ioctl on an
 * open /proc/self/maps, without formatting the whole file. Declared here for
 * older headers; the layout and number are the kernel's ABI. */
struct kinet_procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define KINET_PROCMAP_QUERY 0xC0686611ul /* _IOWR('f', 17, struct procmap_query) */
#define KINET_PROCMAP_R 0x01
#define KINET_PROCMAP_W 0x02

/* The calling process's /proc/self/maps, kept open for the ioctl (opened
 * again after a fork: the old one describes the parent). */
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static int maps_fd = -1;
static pid_t maps_pid;
static bool query_absent; /* ENOTTY/EINVAL once: the kernel has no PROCMAP_QUERY */

/* The same walk as pages_by_maps through PROCMAP_QUERY: -ENOTTY where the
 * kernel has none (the caller reads the file instead). */
static int pages_by_query(uintptr_t lo, uintptr_t hi, bool need_w, uintptr_t *bad,
			  const char **why)
{
	if (__atomic_load_n(&query_absent, __ATOMIC_RELAXED))
		return -ENOTTY;
	pthread_mutex_lock(&maps_lock);
	if (maps_fd < 0 || maps_pid != getpid()) {
		if (maps_fd >= 0)
			close(maps_fd);
		maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
		maps_pid = getpid();
	}
	int rc = maps_fd < 0 ? -errno : 0;
	uintptr_t cur = lo;
	while (!rc && cur < hi) {
		struct kinet_procmap_query q;
		memset(&q, 0, sizeof(q));
		q.size = sizeof(q);
		q.query_addr = cur; /* flags 0: the mapping that covers cur */
		if (ioctl(maps_fd, KINET_PROCMAP_QUERY, &q) != 0) {
			rc = -errno;
			if (rc == -ENOENT) {
				*why = "not mapped";
				rc = -EFAULT;
			} else if (rc == -ENOTTY || rc == -EINVAL) {
				__atomic_store_n(&query_absent, true, __ATOMIC_RELAXED);
				rc = -ENOTTY;
			}
			break;
		}
		if (!(q.vma_flags & KINET_PROCMAP_R) || (need_w && !(q.vma_flags & KINET_PROCMAP_W))) {
			*why = !(q.vma_flags & KINET_PROCMAP_R)
				       ? "mapped without read access"
				       : "mapped read-only, and the region allows writes";
			rc = -EFAULT;
			break;
		}
		cur = q.vma_end > cur ? (uintptr_t)q.vma_end : hi;
	}
	pthread_mutex_unlock(&maps_lock);
	*bad = cur;
	return rc;
}

/* Without /proc: mincore finds unmapped pages (not the permissions). */
static int pages_by_mincore(uintptr_t lo, uintptr_t hi, size_t pg, uintptr_t *bad,
			    const char **why)
{
	unsigned char vec[256];
	for (uintptr_t a = lo; a < hi;) {
		size_t n = (hi - a) / pg < sizeof(vec) ? (hi - a) / pg : sizeof(vec);
		if (mincore((void *)a, n * pg, vec) == 0) {
			a += n * pg;
			continue;
		}
		if (errno != ENOMEM)
			return -errno;
		for (; n; n--, a += pg) /* the first page that is not mapped */
			if (mincore((void *)a, pg, vec) && errno == ENOMEM)
				break;
		*bad = a;
		*why = "not mapped";
		return -EFAULT;
	}
	return 0;
}

/* Every page of host memory [addr, addr + len) must be mapped with read
 * access, and write access when the region allows local or remote writes,
 * as a NIC checks by pinning (ibv_reg_mr: EFAULT): the software NIC's engines
 * would otherwise fault on the first access, from a remote peer's write too. */
static int mr_check_pages(const void *addr, size_t len, unsigned access, const char *who)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
	uintptr_t hi = ((uintptr_t)addr + len + pg - 1) & ~(uintptr_t)(pg - 1);
	if (hi < lo || !hi) /* the last page of the address space: never user memory */
		hi = UINTPTR_MAX;
	bool need_w = access & (KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_WRITE |
				KINET_ACCESS_REMOTE_ATOMIC);
	uintptr_t bad = lo;
	const char *why = "";
	int rc = strcmp(KT(MR_PAGE_CHECK), "maps") ? pages_by_query(lo, hi, need_w, &bad, &why)
						   : -ENOTTY;
	if (rc == -ENOTTY)
		rc = pages_by_maps(lo, hi, need_w, &bad, &why);
	if (rc && rc != -EFAULT) {
		static bool said;
		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			KLOG_WARN("%s: /proc/self/maps cannot be read (%s): registrations check "
				  "that every page is mapped, not its permissions",
				  who, strerror(-rc));
		rc = pages_by_mincore(lo, hi, pg, &bad, &why);
	}
	if (rc == -EFAULT)
		KLOG_ERR("%s: %p+%zu: page %p is %s (access 0x%x); every page of a region must "
			 "be mapped readable, and writable when the region allows writes",
			 who, addr, len, (void *)bad, why, access);
	else if (rc)
		KLOG_ERR("%s: %p+%zu: its pages cannot be checked: %s", who, addr, len,
			 strerror(-rc));
	return rc;
}

int kinet_mr_reg(kinet_pd *pd, void *addr, size_t len, unsigned access, kinet_mr **out)
{
	if (!pd || !addr || !out || len == 0 || (access & ~KINET_ACCESS_ALL))
		return -EINVAL;
	*out = NULL;
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return -ERANGE;
	/* IB rule: remote write/atomic need local write */
	if ((access & (KINET_ACCESS_REMOTE_WRITE | KINET_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & KINET_ACCESS_LOCAL_WRITE)) {
		KLOG_ERR("mr_reg: remote write or atomic access needs local write");
		return -EINVAL;
	}
	if (!mem_is_gpu(addr)) {
		int rc = mr_check_pages(addr, len, access, "mr_reg");
		if (rc)
			return rc;
	}
	kinet_ctx *ctx = pd->ctx;
	kinet_mr *mr = calloc(1, ctx->ops->mr_size);
	if (!mr)
		return -ENOMEM;
	mr->pd = pd;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	mr->kind = KINET_MEM_HOST;
	atomic_store(&mr->state, KINET_MR_REGISTERED);
	int rc = ctx->ops->mr_reg(mr);
	if (rc) {
		free(mr);
		return rc;
	}
	atomic_fetch_add(&pd->refs, 1);
	*out = mr;
	return 0;
}

int kinet_mr_dereg(kinet_mr *mr)
{
	if (!mr)
		return -EINVAL;
	if (mr->cache_ent && !kinet_mr_cache_owns_dereg(mr)) {
		KLOG_ERR("kinet_mr_dereg: region %p+%zu belongs to a registration cache: give it "
			 "back with kinet_mr_cache_put",
			 mr->addr, mr->len);
		return -EBUSY;
	}
	return kinet_mr_dereg_now(mr);
}

int kinet_mr_dereg_now(kinet_mr *mr)
{
	kinet_pd *pd = mr->pd;
	int rc = pd->ctx->ops->mr_dereg(mr);
	if (rc)
		return rc;
	atomic_fetch_sub(&pd->refs, 1);
	free(mr);
	return 0;
}

int kinet_mr_revoke(kinet_mr *mr)
{
	if (!mr)
		return -EINVAL;
	kinet_ctx *ctx = mr->pd->ctx;
	if (atomic_load(&mr->state) == KINET_MR_REVOKED)
		return -EALREADY;
	if (!ctx->ops->mr_revoke)
		return kinet_backend_unsupported(ctx, "kinet_mr_revoke");
	int rc = ctx->ops->mr_revoke(mr);
	if (rc)
		return rc;
	atomic_store(&mr->state, KINET_MR_REVOKED);
	KLOG_DBG("region %p+%zu (key 0x%x) revoked", mr->addr, mr->len, mr->rkey);
	return 0;
}

int kinet_mr_state(const kinet_mr *mr)
{
	return mr ? atomic_load(&((kinet_mr *)mr)->state) : -EINVAL;
}

const char *kinet_mr_state_str(int st)
{
	switch (st) {
	case KINET_MR_REGISTERED: return "registered";
	case KINET_MR_EXPOSED: return "exposed";
	case KINET_MR_REVOKED: return "revoked";
	case KINET_MR_INVALID: return "invalid";
	default: return "?";
	}
}

uint32_t kinet_mr_lkey(const kinet_mr *mr) { return mr ? mr->key : 0; }
uint32_t kinet_mr_rkey(const kinet_mr *mr) { return mr ? mr->rkey : 0; }
void *kinet_mr_addr(const kinet_mr *mr) { return mr ? mr->addr : NULL; }
size_t kinet_mr_len(const kinet_mr *mr) { return mr ? mr->len : 0; }
int kinet_mr_kind(const kinet_mr *mr) { return mr ? mr->kind : -EINVAL; }
int kinet_mr_path(const kinet_mr *mr)
{
	return mr ? __atomic_load_n(&mr->path, __ATOMIC_RELAXED) : -EINVAL; /* the wire may set it */
}

const char *kinet_mr_path_str(int path)
{
	switch (path) {
	case KINET_MR_PATH_HOST: return "host";
	case KINET_MR_PATH_DMABUF: return "dmabuf";
	case KINET_MR_PATH_PEERMEM: return "peermem";
	case KINET_MR_PATH_STAGED: return "staged";
	case KINET_MR_PATH_FABRIC: return "fabric";
	default: return "?";
	}
}

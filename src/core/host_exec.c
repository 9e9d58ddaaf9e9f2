/* SPDX-License-Identifier: BSD-3-Clause */
/* The host executor: device-API code on CPU threads. */
#include <stdlib.h>
#include "core/internal.h"

struct hx_arg {
	kinet_host_fn fn;
	void *arg;
	int tid, n, rc;
};

static void *hx_main(void *p)
{
	struct hx_arg *a = p;
	if (a->tid > 0)
		/* named here too: the creator's naming may come after fn has started */
		kinet_thread_name(pthread_self(), "kn-host%d", a->tid);
	a->rc = a->fn(a->tid, a->n, a->arg);
	return NULL;
}

int kinet_host_exec(int nthreads, kinet_host_fn fn, void *arg)
{
	if (nthreads <= 0 || nthreads > 4096 || !fn)
		return -EINVAL;
	struct hx_arg *a = calloc((size_t)nthreads, sizeof(*a));
	pthread_t *t = calloc((size_t)nthreads, sizeof(*t));
	if (!a || !t) {
		free(a);
		free(t);
		return -ENOMEM;
	}
	int started = 0, rc = 0;
	for (int i = 0; i < nthreads; i++) {
		a[i] = (struct hx_arg){fn, arg, i, nthreads, 0};
		if (i == 0)
			continue; /* thread 0 runs on the caller */
		if (pthread_create(&t[i], NULL, hx_main, &a[i]) != 0) {
			rc = -EAGAIN;
			break;
		}
		kinet_thread_name(t[i], "kn-host%d", i); /* thread 0 is the caller */
		started = i;
	}
	if (!rc)
		hx_main(&a[0]);
	for (int i = 1; i <= started; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < nthreads && !rc; i++)
		if (a[i].rc)
			rc = a[i].rc;
	free(a);
	free(t);
	return rc;
}

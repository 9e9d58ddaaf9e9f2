/* SPDX-License-Identifier: BSD-3-Clause */
/* The backends of this build, highest priority first (kinet_open, auto). */
#include "core/driver.h"

extern const struct kinet_backend_ops kinet_mlx5_backend;
extern const struct kinet_backend_ops kinet_soft_backend;

const struct kinet_backend_ops *const kinet_backends[] = {
	&kinet_mlx5_backend,
	&kinet_soft_backend,
	NULL,
};

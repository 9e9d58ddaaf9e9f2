/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * core/tunables.h - typed, cached access to the tunables of tunables.def.
 *
 * KT(ENGINE_THREADS) is the value of KINET_ENGINE_THREADS in its C type (see
 * tunables.def). The environment is read once, at the first access of any
 * tunable; an access afterwards is a call and a load (no string look-up), so
 * KT() may be used on hot paths. A malformed value never reaches KT(): it
 * reads the default, and kinet_tun_refused() tells the calls that must refuse.
 */
#ifndef KINET_CORE_TUNABLES_H
#define KINET_CORE_TUNABLES_H

#include <stdbool.h>
#include <stdint.h>

#define KT_CTYPE_INT long long
#define KT_CTYPE_BOOL bool
#define KT_CTYPE_SIZE uint64_t
#define KT_CTYPE_MS uint64_t
#define KT_CTYPE_US uint64_t
#define KT_CTYPE_ENUM const char *
#define KT_CTYPE_STR const char *

/* What a malformed value does (tunables.def, FLAGS). */
#define KT_OPEN 0x1u   /* kinet_open() fails with -EINVAL */
#define KT_BOOT 0x2u   /* kinet_boot_init*() fail with -EINVAL */
#define KT_WARN 0x4u   /* the default is used, with a warning */
#define KT_SECRET 0x8u /* the value is never shown */

/* One field per tunable, named as in tunables.def. */
struct kinet_tun_values {
#define KT_DEF(name, type, ...) KT_CTYPE_##type name;
#include "core/tunables.def"
#undef KT_DEF
};

/* KT_ID_<NAME>: the index of a tunable in the registry (kinet_tunable_at). */
enum kinet_tun_id {
#define KT_DEF(name, ...) KT_ID_##name,
#include "core/tunables.def"
#undef KT_DEF
	KT_COUNT
};

/* The values in use (read from the environment at the first call). Never NULL. */
const struct kinet_tun_values *kinet_tun(void);
#define KT(name) (kinet_tun()->name)

/* The value in use of tunable id as text ("" when not set). Secrets are real
 * here: never log it. */
const char *kinet_tun_text(int id);
#define KT_STR(name) kinet_tun_text(KT_ID_##name)

/* Called by the entry points that refuse malformed tunables (scope KT_OPEN
 * or KT_BOOT): 0 when every tunable of that scope is well formed, else
 * -EINVAL after logging which ones (at error level, one line each; the
 * details were reported when the environment was read). who names the
 * caller in that line ("kinet_open"). */
int kinet_tun_refused(unsigned scope, const char *who);

#endif

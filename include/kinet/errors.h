/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/errors.h - kinet's error codes beyond errno. Every kinet call returns
 * 0 or a negative errno; where no errno fits, one of these, negated (for
 * example -KINET_EVERSION). kinet_strerror() (kinet/kinet.h) explains both.
 * Plain C, no dependencies: kinet.h, net.h and boot.h include it.
 */
#ifndef KINET_ERRORS_H
#define KINET_ERRORS_H

#define KINET_ERR_BASE 2000
#define KINET_ENOBACKEND (KINET_ERR_BASE + 1) /* no usable backend */
#define KINET_EVERSION (KINET_ERR_BASE + 2)   /* the peer speaks another version
						 (descriptor, wire or bootstrap) */
#define KINET_ESECRET (KINET_ERR_BASE + 3)    /* wrong job secret (bootstrap) */

#endif /* KINET_ERRORS_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/* kinet_strerror and syndrome names. */
#include <string.h>
#include "core/internal.h"

const char *kinet_strerror(int err)
{
	if (err > 0)
		err = -err;
	switch (err) {
	case 0: return "success";
	case -EINVAL: return "invalid argument";
	case -ENOMEM: return "out of memory";
	case -EBUSY: return "resource busy, or not complete yet";
	case -EIO: return "operation completed with an error CQE (see the syndrome)";
	case -ETIMEDOUT: return "timed out";
	case -EACCES: return "access denied (key, protection domain or access flags)";
	case -ERANGE: return "address range outside the registered region";
	case -ENODEV: return "no such device, or the backend is not available";
	case -ENOSYS: return "not supported by this build";
	case -ENOTSUP: return "operation not supported by this backend";
	case -EAGAIN: return "try again (queue full)";
	case -ENOENT: return "not found";
	case -EEXIST: return "already exists";
	case -ENOTCONN: return "not connected";
	case -ECONNREFUSED: return "connection refused";
	case -ECONNRESET: return "connection reset by peer";
	case -EPROTO: return "protocol error (malformed message)";
	case -EPERM: return "operation not permitted";
	case -E2BIG: return "argument too large";
	case -EOVERFLOW: return "value too large";
	case -EALREADY: return "already in that state";
	case -ESTALE: return "stale descriptor: that peer's connection ended (use a fresh one)";
	case -KINET_ENOBACKEND: return "no usable backend";
	case -KINET_EVERSION: return "descriptor version mismatch";
	case -KINET_ESECRET: return "wrong job secret";
	default: break;
	}
	if (err < 0 && err > -4096) {
		static __thread char buf[96];
		snprintf(buf, sizeof(buf), "%s", strerror(-err));
		return buf;
	}
	return "unknown error";
}

const char *kinet_syndrome_str(uint32_t s)
{
	switch (s & 0xff) { /* a syndrome is one byte */
	case 0: return "no error";
	case KN_SYND_LOCAL_LENGTH_ERR: return "local length error";
	case KN_SYND_LOCAL_QP_OP_ERR: return "local QP operation error";
	case KN_SYND_LOCAL_PROT_ERR: return "local protection error";
	case KN_SYND_WR_FLUSH_ERR: return "work request flushed";
	case KN_SYND_MW_BIND_ERR: return "memory window bind error";
	case KN_SYND_BAD_RESP_ERR: return "bad response";
	case KN_SYND_LOCAL_ACCESS_ERR: return "local access error";
	case KN_SYND_REMOTE_INVAL_REQ_ERR: return "remote invalid request";
	case KN_SYND_REMOTE_ACCESS_ERR: return "remote access error";
	case KN_SYND_REMOTE_OP_ERR: return "remote operation error";
	case KN_SYND_TRANSPORT_RETRY_EXC_ERR: return "transport retry counter exceeded";
	case KN_SYND_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
	case KN_SYND_REMOTE_ABORTED_ERR: return "remote aborted";
	default: return "unknown syndrome";
	}
}

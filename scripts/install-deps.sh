#!/usr/bin/env bash
# Installs the Debian packages kinet needs to build and test, when they are
# missing. As root it installs them; otherwise it says what is missing.
set -euo pipefail

required=(cmake make gcc pkg-config libcriterion-dev)
# g++ and clang: the strict-mode compile checks of the public headers (C++17 and
# a second C compiler); a check whose compiler is missing is skipped.
optional=(libfabric-dev libfabric-bin libibverbs-dev rdma-core libhwloc-dev hwloc iproute2
          openmpi-bin libopenmpi-dev libpmix-dev libjson-c-dev g++ clang
          python3-matplotlib groff-base man-db libc6-dev-arm64-cross
          libxdp-dev libbpf-dev xdp-tools iputils-ping ibverbs-utils perftest
          python3-pyverbs)
# python3-matplotlib: kinet-plot (and its test) and scripts/trace_png.py; groff-base, man-db: rendering
# and checking the man pages (docs/man, test_man_pages); libc6-dev-arm64-cross: the arm64 libc
# headers clang cross-compiles the barrier check against (test_barriers)
# libxdp-dev, libbpf-dev, clang: the software NIC's AF_XDP driver (the module
# libkinet_xdp.so and its XDP program, built with clang -target bpf);
# xdp-tools: the xdp-bench/xdp-trafficgen baselines of bench/eth.sh;
# iputils-ping: ping, the peer of the ICMP echo test (tests/net/test_eth_netns)
# ibverbs-utils, perftest: rdma-core's utilities and perftest, run unmodified over kinet-verbs
# (tests/util/verbs_utils.sh, docs/verbs.md); python3-pyverbs: rdma-core's Python bindings,
# which test_verbs_pyverbs_load loads and scripts/pyverbs.sh runs rdma-core's tests with

missing=()
for p in "${required[@]}" "${optional[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo apt-get install ${missing[*]})" >&2
  for p in "${missing[@]}"; do
    for r in "${required[@]}"; do
      [ "$p" = "$r" ] && exit 1
    done
  done
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

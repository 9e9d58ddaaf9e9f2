#!/usr/bin/env bash
# Installs the Debian packages kinet needs to build and test, when they are
# missing. As root it installs them; otherwise it says what is missing.
set -euo pipefail

required=(cmake make gcc pkg-config libcriterion-dev)
optional=(libfabric-dev libfabric-bin libibverbs-dev rdma-core libhwloc-dev hwloc iproute2
          openmpi-bin libopenmpi-dev libjson-c-dev
          python3-matplotlib) # python3-matplotlib: scripts/trace_png.py (the timeline in docs/)

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

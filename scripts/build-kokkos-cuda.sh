#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Kokkos that the device path needs: the core's Kokkos stages compiled for CUDA (the
# kokkos-cuda preset). That is Kokkos 4.6.01, from third_party/kokkos/ (the release's library
# sources, and cuda13.patch for CUDA 13's runtime API), with the CUDA and Serial backends, for
# one GPU architecture, installed with its nvcc_wrapper. Debian's Kokkos 3.4 is Serial only and
# predates Hopper and CUDA 13.
#   scripts/build-kokkos-cuda.sh [ARCH [PREFIX]]
# ARCH: a Kokkos architecture (HOPPER90, the default: H100/H200; AMPERE80: A100; ADA89;
# BLACKWELL100; ...), or "auto" to ask nvidia-smi. PREFIX: default
# <cache>/kokkos-cuda/4.6.01-ARCH-pic. A complete earlier install there is reused. Built
# position-independent: the plugin (a shared library) links it in the lammps-wheel-cuda preset. The last line
# printed is the prefix: `FASTMLIP_KOKKOS_CUDA=$(scripts/build-kokkos-cuda.sh | tail -1)`.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

arch=${1:-${FASTMLIP_KOKKOS_CUDA_ARCH:-HOPPER90}}
if [ "$arch" = auto ]; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .') || {
    log "build-kokkos-cuda: nvidia-smi could not name this machine's GPU; give the architecture (e.g. HOPPER90)"
    exit 1
  }
  case "$cc" in
    75) arch=TURING75 ;; 80) arch=AMPERE80 ;; 86) arch=AMPERE86 ;; 89) arch=ADA89 ;; 90) arch=HOPPER90 ;;
    100) arch=BLACKWELL100 ;; 120) arch=BLACKWELL120 ;;
    *)
      log "build-kokkos-cuda: Kokkos 4.6 has no architecture for compute capability $cc"
      exit 1
      ;;
  esac
fi
prefix=${2:-$(fastmlip_cache_dir)/kokkos-cuda/4.6.01-$arch-pic}
if [ -f "$prefix/.complete" ]; then
  echo "$prefix"
  exit 0
fi
export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc > /dev/null || {
  log "build-kokkos-cuda: no nvcc on PATH or in /usr/local/cuda/bin; install the CUDA toolkit (12.x or 13.x)"
  exit 1
}
work=$(mktemp -d "${TMPDIR:-/tmp}/fastmlip-kokkos-cuda.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar xzf "$repo/third_party/kokkos/kokkos-4.6.01.tar.gz" -C "$work"
src="$work/kokkos-4.6.01"
# git apply works outside a repository too; `patch` may be missing on a bare machine.
(cd "$src" && git apply -p1 "$repo/third_party/kokkos/cuda13.patch")
rm -rf "$prefix"
log "build-kokkos-cuda: Kokkos 4.6.01 with CUDA for $arch into $prefix (a few minutes; log in $work/build.log)"
if ! { cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_COMPILER="$src/bin/nvcc_wrapper" \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_$arch=ON" &&
  cmake --build "$work/build" -j "${FASTMLIP_JOBS:-$(nproc)}" && cmake --install "$work/build"; } > "$work/build.log" 2>&1; then
  tail -60 "$work/build.log" >&2
  log "FAILED: build-kokkos-cuda (the output above); nothing was installed in $prefix"
  rm -rf "$prefix"
  exit 1
fi
touch "$prefix/.complete"
echo "$prefix"

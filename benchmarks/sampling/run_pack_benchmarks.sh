#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The side-by-side table of benchmarks/README.md ("Bin-packing batch sampler (issue 4)"): every
# algorithm in one fastmlip-pack run per configuration, repeated, medians taken.
#   1. --synthetic table3 (2,650,823 graphs), capacity 3072 atoms, W = 16, 64, 740;
#   2. an MPtrj-like slice (10% of the synthetic MPtrj rows, 158,031 graphs), size
#      atoms+edges+angles (FastCHGNet's), 4 ranks and 32 graphs per rank for the count-based
#      samplers as in FastCHGNet, capacity 262144 (1.6 x the mean 32-graph batch, so those
#      batches are rarely cut).
# Usage: benchmarks/sampling/run_pack_benchmarks.sh [path/to/fastmlip-pack] [repeats]
# Build first, in Release: cmake --build build --target fastmlip-pack
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pack="${1:-build/bin/fastmlip-pack}"
repeats="${2:-5}"
raw="$(mktemp)"
trap 'rm -f "$raw"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m), repeats=$repeats" >&2
for ((r = 1; r <= repeats; ++r)); do
  for w in 16 64 740; do
    echo "run $r/$repeats: table3 W=$w" >&2
    "$pack" --synthetic table3 --capacity 3072 --ranks "$w" --algorithm all --epochs 2 --json |
      sed "s/^{/{\"config\":\"table3 atoms C=3072 W=$w\",/" >>"$raw"
  done
  echo "run $r/$repeats: mptrj slice" >&2
  "$pack" --synthetic mptrj:158031 --size atoms+edges+angles --capacity 262144 --ranks 4 --graphs-per-batch 32 \
    --algorithm all --epochs 2 --json |
    sed 's/^{/{"config":"mptrj:158031 atoms+edges+angles C=262144 W=4 G=32",/' >>"$raw"
done
python3 "$here/summarize_pack.py" <"$raw"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs fastmlip's kernel benchmarks and mace-torch/e3nn at the same shapes in one go, and prints
# a markdown table of medians and ratios for benchmarks/README.md.
#   benchmarks/kernels/run_kernel_benchmarks.sh [build-dir] [repeats]
# Needs the reference venv (tests/reference/setup-venv.sh) for the peers.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$repo/build}
repeats=${2:-5}
out=$(mktemp -d)
OMP_NUM_THREADS=1 "$build/bin/fastmlip-bench-kernels" --benchmark_repetitions="$repeats" \
  --benchmark_report_aggregates_only=true --benchmark_format=json > "$out/ours.json"
"$repo/.venv/bin/python" "$repo/benchmarks/kernels/peers_mace_torch.py" --repeats "$repeats" > "$out/peers.jsonl" 2> /dev/null
python3 - "$out/ours.json" "$out/peers.jsonl" <<'PY'
import json, sys
ours = {b["run_name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("aggregate_name") == "median"}
peers = {}
for line in open(sys.argv[2]):
    if not line.startswith("{"):  # mace-torch prints notices to stdout
        continue
    p = json.loads(line)
    peers[p["name"]] = p
def ms(b):
    scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale
# (ours, peer, nodes in ours / nodes in the peer's run): times are compared per node.
pairs = [
    ("BM_ChannelwiseTP/small_fused/1000/30", "conv_tp_small/1000/30", 1),
    ("BM_ChannelwiseTP/medium_fused/1000/30", "conv_tp_medium/1000/30", 1),
    ("BM_ChannelwiseTP/medium_fused/1000/60", "conv_tp_medium/1000/60", 1),
    ("BM_ChannelwiseTP/large_fused/1000/30", "conv_tp_large/1000/30", 1),
    ("BM_SymmetricContraction/fused_fwd/1000", "symmetric_contraction/1000", 1),
    ("BM_SymmetricContraction/fused_fwd_bwd/1000", "symmetric_contraction_fwd_bwd/200", 5),
    ("BM_RadialMLP/30000", "radial_mlp/30000", 1),
]
print("| kernel | nodes/neighbours | fastmlip (ms) | mace-torch/e3nn (ms) | speed-up |")
print("|---|---|---|---|---|")
for o, p, per in pairs:
    if o in ours and p in peers:
        a, b = ms(ours[o]), peers[p]["median_ms"] * per
        shape = "/".join(o.split("/")[-2 if o.count("/") >= 3 else -1:]) + (
            f" (peer at {p.split('/')[1]} nodes, scaled x{per})" if per != 1 else "")
        print(f"| {p.split('/')[0]} | {shape} | {a:.2f} | {b:.2f} | {b / a:.1f}x |")
naive = [(k, ms(v)) for k, v in ours.items() if "naive" in k]
for k, v in naive:
    print(f"| naive reference | {k} | {v:.2f} | | |")
PY

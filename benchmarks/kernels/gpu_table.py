# SPDX-License-Identifier: MIT
"""Tabulates a GPU check's kernel timings: fastmlip's CUDA kernels (bench_cuda_kernels.cpp,
Google Benchmark JSON, medians of CUDA-event times) against the peers at the same shapes on the
same GPU (peers_gpu.py, JSON lines), as a markdown table for benchmarks/README.md.

    python3 gpu_table.py bench_cuda.json peers_gpu.jsonl
"""
import json
import re
import sys


def ours(path):
    """{(kernel, dtype, shape, variant, nodes): (median ms, GB/s of the forward's minimum traffic
    or None)} from Google Benchmark."""
    rows = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median" or b.get("error_occurred"):
            continue
        m = re.match(r"BM_Cuda(\w+)/(float|double)/(\w+?)(?:_(fwd_bwd|fwd))?/(\d+)", b["run_name"])
        if not m:
            continue
        kernel, dtype, shape, variant, nodes = m.groups()
        if kernel == "SymmetricContraction":  # its suffix is the variant itself
            shape, variant = "medium", shape
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        rows[(kernel, "float32" if dtype == "float" else "float64", shape, variant, int(nodes))] = (
            b["real_time"] * scale, b.get("fwd_min_GB/s"))
    return rows


def peers(path):
    rows, notes = {}, []
    for line in open(path):
        if not line.startswith("{"):
            continue
        p = json.loads(line)
        if "error" in p:
            notes.append(f"peer {p['name']}: {p['error']}")
            continue
        m = re.match(r"(conv_tp|symmetric_contraction)(?:_(small|medium|large))?(_fwd_bwd)?/(\d+)(?:/\d+)?/(float32|float64)",
                     p["name"])
        if not m:
            continue
        kind, shape, bwd, nodes, dtype = m.groups()
        kernel = "ChannelwiseTP" if kind == "conv_tp" else "SymmetricContraction"
        rows[(kernel, dtype, shape or "medium", "fwd_bwd" if bwd else "fwd", int(nodes))] = p
    return rows, notes


def main():
    a = ours(sys.argv[1])
    b, notes = peers(sys.argv[2]) if len(sys.argv) > 2 else ({}, [])
    device = next((p.get("device_name") for p in b.values() if p.get("device_name")), "")
    label = {"ChannelwiseTP": "channelwise TP (e3nn peer)", "SymmetricContraction": "symmetric contraction (mace-torch peer)"}
    print("| kernel | shape | nodes | dtype | pass | fastmlip CUDA (ms) | forward's minimum bytes at (GB/s) | peer (ms) "
          "| speed-up | peer peak memory (GB) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(a):
        kernel, dtype, shape, variant, nodes = key
        ms, gbs = a[key]
        bw = f"{gbs:.0f}" if gbs and variant == "fwd" else ""
        p = b.get(key)
        peer = f"{p['median_ms']:.3f}" if p else "n/a"
        ratio = f"{p['median_ms'] / ms:.1f}x" if p else ""
        mem = f"{p['peak_mem_bytes'] / 1e9:.2f}" if p and p.get("peak_mem_bytes") else ""
        print(f"| {label[kernel]} | {shape} | {nodes} | {dtype} | {variant} | {ms:.3f} | {bw} | {peer} | {ratio} | {mem} |")
    if device:
        print(f"\nPeers on {device}.")
    for n in notes:
        print(f"- {n}")


if __name__ == "__main__":
    main()

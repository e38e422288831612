# SPDX-License-Identifier: MIT
"""Tabulates a GPU check's kernel timings: fastmlip's CUDA kernels (bench_cuda_kernels.cpp,
Google Benchmark JSON, medians of CUDA-event times) against the peers at the same shapes on the
same GPU (peers_gpu.py, JSON lines), as a markdown table for benchmarks/README.md.

    python3 gpu_table.py bench_cuda.json peers_gpu.jsonl [bench_mace.json]
    python3 gpu_table.py - peers_gpu.jsonl bench_mace.json      (the model table only)
    python3 gpu_table.py --trainers peers_gpu.jsonl              (the trainers' table only)

With bench_mace.json (bench_mace_model.cpp's Google Benchmark JSON), a second table: the whole
MACE model, on each kernel backend, against mace-torch (peers_mace_gpu.py's lines in
peers_gpu.jsonl). Where peers_gpu.jsonl has the trainers' lines (gpu-check.sh's trainer_bench
steps, run_trainer_bench.py's results), a table of them as well.
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
        if "name" not in p:  # the trainers' lines (trainer_table)
            continue
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


def trainer_table(peers_path):
    """The trainers on the GPU: each run_trainer_bench.py result line (kind trainer_bench*), a row
    per trainer run, and the epoch-time ratio against the fastest mace_run_train backend."""
    results = [json.loads(line) for line in open(peers_path)
               if line.startswith("{") and '"kind": "trainer_bench' in line]
    if not results:
        return
    print("\n| benchmark | model | dataset | run | median epoch (s) | graphs/s | peak GPU (MiB) "
          "| valid RMSE F per epoch (meV/A) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        for name, run in r["runs"].items():
            epoch = run.get("median_epoch_s")
            curve = ", ".join(f"{e['valid_rmse_f_meV_per_A']:.1f}" for e in run.get("epochs", []))
            print(f"| {r['kind']} | {r.get('model', 'cuni')} | {r.get('dataset', 'cuni')} | {name} "
                  f"| {epoch if epoch is not None else 'n/a'} | {run.get('graphs_per_s', '')} "
                  f"| {run.get('peak_gpu_mib', '')} | {curve} |")
        for name, err in r.get("failed", {}).items():
            print(f"| {r['kind']} | {r.get('model', 'cuni')} | {r.get('dataset', 'cuni')} | {name} | failed: "
                  f"{err[:120]} | | | |")
        if "ratio_epoch_mace_over_ours" in r:
            print(f"| {r['kind']} | | | {r['fastest_mace_run']} / train-potential | "
                  f"{r['ratio_epoch_mace_over_ours']}x | | | |")


def main():
    if sys.argv[1] == "--chgnet":
        chgnet_table(sys.argv[2])
        return
    if sys.argv[1] == "--trainers":
        trainer_table(sys.argv[2])
        return
    if sys.argv[1] == "-":
        model_table(sys.argv[3], sys.argv[2])
        trainer_table(sys.argv[2])
        return
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
    if len(sys.argv) > 3:
        model_table(sys.argv[3], sys.argv[2])
    if len(sys.argv) > 2:
        trainer_table(sys.argv[2])


def model_table(bench_path, peers_path):
    """The whole MACE model (bench_mace_model.cpp: the Kokkos path, the CUDA kernels where the
    name ends in /cuda_kernels, and those with the radial MLP's cuBLAS layers where it ends in
    /cuda_kernels_cublas) against mace-torch (peers_mace_gpu.py's mace_model/... lines
    in the peers' file) and, where that ran, mace-torch with OpenEquivariance (mace_model_oeq/...).
    The speed-up is against the faster of the two."""
    peer = {}
    for line in open(peers_path):
        if line.startswith("{") and ('"mace_model/' in line or '"mace_model_oeq/' in line):
            p = json.loads(line)
            peer[p["name"]] = p
    print("\n| model | atoms | dtype | kernels | fastmlip (ms/step) | atom-steps/s | device MB per atom "
          "| mace-torch (ms/step) | mace-torch + OEQ (ms/step) | speed-up vs the faster | mace-torch peak GB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for b in json.load(open(bench_path))["benchmarks"]:
        if b.get("aggregate_name") not in (None, "median") or b.get("error_occurred"):
            continue
        m = re.match(r"BM_MaceModel/(float|double)/(\w+)/(\d+)(/cuda_kernels(_cublas)?)?(/manual_time)?$", b["run_name"])
        if not m:
            continue
        dtype = "float32" if m.group(1) == "float" else "float64"
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        ms = b["real_time"] * scale
        case = f"{m.group(2)}/{m.group(3)}/{dtype}"
        p = peer.get(f"mace_model/{case}", {})
        q = peer.get(f"mace_model_oeq/{case}")
        pm = p.get("median_ms")
        qm = q.get("median_ms") if q else None
        peer_ms = f"{pm:.2f}" if pm else p.get("error", "n/a")[:60]
        oeq_ms = "not run" if q is None else (f"{qm:.2f}" if qm else q.get("error", "n/a")[:60])
        best = min(t for t in (pm, qm, float("inf")) if t)
        ratio = f"{best / ms:.2f}x" if best != float("inf") else ""
        gb = f"{p['peak_mem_bytes'] / 1e9:.2f}" if p.get("peak_mem_bytes") else ""
        kernels = "cuda + cuBLAS radial" if m.group(5) else "cuda" if m.group(4) else "kokkos"
        rows.append(((m.group(2), int(m.group(3)), dtype, kernels),
                     f"| {m.group(2)} | {m.group(3)} | {dtype} | {kernels} | {ms:.2f} | {b.get('atom_steps_per_s', 0):.4g} "
                     f"| {b.get('device_bytes_per_atom', 0) / 1e6:.3f} | {peer_ms} | {oeq_ms} | {ratio} | {gb} |"))
    for _, row in sorted(rows):
        print(row)
    chgnet_table(bench_path)


def chgnet_table(bench_path):
    """CHGNet 0.3.0 on LiMnO2 cells (bench_chgnet_model.cpp's BM_ChgnetModel/... in the same
    file): time per step, memory per atom, and the error of a case that did not run (out of
    memory: the largest cell that fits is the largest without one)."""
    rows = []
    for b in json.load(open(bench_path))["benchmarks"]:
        if b.get("aggregate_name") not in (None, "median"):
            continue
        m = re.match(r"BM_ChgnetModel/(float|double)/(\d+)(/teams)?(/manual_time)?$", b["run_name"])
        if not m:
            continue
        dtype = ("float32" if m.group(1) == "float" else "float64") + (" teams" if m.group(3) else "")
        if b.get("error_occurred"):
            rows.append(((int(m.group(2)), dtype), f"| {m.group(2)} | {dtype} | failed: {b.get('error_message', '')[:160]} | | | | |"))
            continue
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        ms = b["real_time"] * scale
        rows.append(((int(m.group(2)), dtype),
                     f"| {m.group(2)} | {dtype} | {ms / 1e3:.4g} | {b.get('atom_steps_per_s', 0):.4g} | {b.get('edges', 0):.4g} "
                     f"| {b.get('device_bytes_per_atom', 0) / 1e3:.1f} | {b.get('kokkos_peak_bytes_per_atom', 0) / 1e3:.1f} |"))
    if not rows:
        return
    print("\n| CHGNet atoms | dtype | s/step | atom-steps/s | edges | device KB per atom | Kokkos peak KB per atom |")
    print("|---|---|---|---|---|---|---|")
    for _, row in sorted(rows):
        print(row)


if __name__ == "__main__":
    main()

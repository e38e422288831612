# SPDX-License-Identifier: MIT
"""mace-torch / e3nn timings at the shapes of bench_kernels.cpp, on the CPU, for ratios.

Run in the reference venv (tests/reference/setup-venv.sh): prints one JSON object per line
{"name", "median_ms", "repeats", ...}. Torch uses one thread (--threads to change), so the
comparison with our single-threaded Kokkos Serial build is per core.
"""
import argparse
import json
import statistics
import time

import torch
from e3nn import nn as enn
from e3nn import o3
from mace.modules.irreps_tools import tp_out_irreps_with_instructions
from mace.modules.symmetric_contraction import SymmetricContraction

HIDDEN = {"small": "128x0e", "medium": "128x0e+128x1o", "large": "128x0e+128x1o+128x2e"}
TARGET = o3.Irreps("128x0e+128x1o+128x2e+128x3o")
SH = o3.Irreps.spherical_harmonics(3)


def median_ms(fn, repeats, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def conv_tp(shape, nodes, neighbours, repeats, backward=False):
    irreps1 = o3.Irreps(HIDDEN[shape])
    mid, instructions = tp_out_irreps_with_instructions(irreps1, SH, TARGET)
    tp = o3.TensorProduct(irreps1, SH, mid, instructions=instructions, shared_weights=False, internal_weights=False)
    g = torch.Generator().manual_seed(0)
    E = nodes * neighbours
    receiver = torch.arange(nodes).repeat_interleave(neighbours)
    sender = torch.randint(0, nodes, (E,), generator=g)
    x = torch.randn(nodes, irreps1.dim, generator=g, requires_grad=backward)
    Y = torch.randn(E, SH.dim, generator=g)
    w = torch.randn(E, tp.weight_numel, generator=g)

    def run():
        m = tp(x[sender], Y, w)  # the per-edge message tensor MACE materialises
        out = torch.zeros(nodes, mid.dim).index_add_(0, receiver, m)
        if backward:
            out.sum().backward()

    return {"name": f"conv_tp_{shape}{'_fwd_bwd' if backward else ''}/{nodes}/{neighbours}",
            "median_ms": median_ms(run, repeats), "repeats": repeats,
            "message_bytes_per_edge": mid.dim * 8}


def symmetric_contraction(nodes, repeats, backward=False):
    sc = SymmetricContraction(TARGET, o3.Irreps("128x0e+128x1o"), 3, num_elements=10)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(nodes, 128, 16, generator=g, requires_grad=backward)
    species = torch.arange(nodes) % 10
    y = torch.nn.functional.one_hot(species, 10).to(x.dtype)

    def run():
        out = sc(x, y)
        if backward:
            out.sum().backward()

    return {"name": f"symmetric_contraction{'_fwd_bwd' if backward else ''}/{nodes}",
            "median_ms": median_ms(run, repeats), "repeats": repeats}


def radial_mlp(edges, repeats):
    irreps1 = o3.Irreps(HIDDEN["medium"])
    mid, instructions = tp_out_irreps_with_instructions(irreps1, SH, TARGET)
    tp = o3.TensorProduct(irreps1, SH, mid, instructions=instructions, shared_weights=False, internal_weights=False)
    mlp = enn.FullyConnectedNet([8, 64, 64, 64, tp.weight_numel], torch.nn.functional.silu)
    x = torch.randn(edges, 8)
    with torch.no_grad():
        return {"name": f"radial_mlp/{edges}", "median_ms": median_ms(lambda: mlp(x), repeats), "repeats": repeats}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)
    r = args.repeats
    # The contraction's cost is per node (no graph), and mace-torch needs ~0.1 s per node for
    # forward + backward on one core, so that case runs at 200 nodes and is compared per node.
    # 5000 nodes x 30 neighbours is left out: mace-torch's per-edge message tensor alone is
    # 150k x 5120 doubles = 6 GB there, and with autograd buffers the 24 GiB machine runs out.
    results = [conv_tp("small", 1000, 30, r), conv_tp("medium", 1000, 30, r), conv_tp("medium", 1000, 60, r),
               conv_tp("large", 1000, 30, r), symmetric_contraction(1000, r),
               symmetric_contraction(200, r, backward=True), radial_mlp(30000, r)]
    for res in results:
        res["torch"] = torch.__version__
        res["threads"] = args.threads
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()

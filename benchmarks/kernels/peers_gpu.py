# SPDX-License-Identifier: MIT
"""e3nn / mace-torch timings of the MACE kernels on the GPU, for comparison with our CUDA build.

Times the interaction convolution as MACE runs it (e3nn's o3.TensorProduct with "uvu"
instructions and per-edge weights, the per-edge message tensor materialised and summed onto
the receivers with index_add_) and mace-torch's SymmetricContraction, each forward only and
forward + backward, in float32 and float64. Prints one JSON object per line:
{"name", "median_ms", "min_ms", "repeats", "dtype", "device", "device_name", "peak_mem_bytes",
"torch", "e3nn", "mace"}. A case that runs out of memory prints {"name", "error": "out of memory"}
and the run goes on. If mace-torch does not import, the conv_tp cases still run (with a local
equivalent of mace's tp_out_irreps_with_instructions) and one line
{"name": "symmetric_contraction", "error": "<import error>"} is printed.

Usage: python benchmarks/kernels/peers_gpu.py [--device cuda] [--repeats 20]
       [--dtypes float32,float64] [--quick]
"""
import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import time

# e3nn 0.4.4 reads its own constants.pt with a bare torch.load, which torch >= 2.6 refuses under
# the weights_only default; mace-torch sets this too, but e3nn is imported first here.
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

import e3nn  # noqa: E402
import torch  # noqa: E402
from e3nn import o3  # noqa: E402

try:
    # mace-torch prints a notice about cuequivariance on import; keep stdout to the JSON lines.
    with contextlib.redirect_stdout(sys.stderr):
        import mace
        from mace.modules.symmetric_contraction import SymmetricContraction

    MACE_VERSION = getattr(mace, "__version__", "unknown")
    MACE_IMPORT_ERROR = None
except Exception as exc:  # noqa: BLE001 - any import failure leaves the e3nn cases runnable
    SymmetricContraction = None
    MACE_VERSION = None
    MACE_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"

HIDDEN = {"small": "128x0e", "medium": "128x0e+128x1o", "large": "128x0e+128x1o+128x2e"}
TARGET = "128x0e+128x1o+128x2e+128x3o"
SC_HIDDEN = "128x0e+128x1o"
NEIGHBOURS = 30
WARMUP = 3
DTYPES = {"float32": torch.float32, "float64": torch.float64}
OOM_ERRORS = tuple(e for e in (getattr(torch.cuda, "OutOfMemoryError", None), getattr(torch, "OutOfMemoryError", None))
                   if e is not None)


def conv_irreps_and_instructions(irreps_in, irreps_sh, target):
    """Output irreps and "uvu" instructions of MACE's convolution tensor product.

    Every (input irrep, spherical-harmonic irrep) pair contributes each coupled irrep that the
    target holds, keeping the input multiplicity; the output irreps are then sorted and the
    instructions' output indices renumbered to the sorted order.
    """
    out = []
    instructions = []
    for i, (mul, ir_in) in enumerate(irreps_in):
        for j, (_, ir_sh) in enumerate(irreps_sh):
            for ir_out in ir_in * ir_sh:
                if ir_out in target:
                    instructions.append((i, j, len(out), "uvu", True))
                    out.append((mul, ir_out))
    sorted_out, permutation, _ = o3.Irreps(out).sort()
    instructions = sorted(((i, j, permutation[k], mode, train) for i, j, k, mode, train in instructions),
                          key=lambda ins: ins[2])
    return sorted_out, instructions


try:
    from mace.modules.irreps_tools import tp_out_irreps_with_instructions
except Exception:  # noqa: BLE001
    tp_out_irreps_with_instructions = conv_irreps_and_instructions


def is_oom(exc):
    return isinstance(exc, OOM_ERRORS) or (isinstance(exc, RuntimeError) and "out of memory" in str(exc))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn, device, repeats, warmup=WARMUP):
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times)


def conv_tp(device, shape, nodes, repeats, backward):
    """One MACE interaction convolution: per-edge tensor product, then the sum over receivers."""
    irreps_in = o3.Irreps(HIDDEN[shape])
    irreps_sh = o3.Irreps.spherical_harmonics(3)
    mid, instructions = tp_out_irreps_with_instructions(irreps_in, irreps_sh, o3.Irreps(TARGET))
    tp = o3.TensorProduct(irreps_in, irreps_sh, mid, instructions=instructions,
                          shared_weights=False, internal_weights=False).to(device)
    edges = nodes * NEIGHBOURS
    g = torch.Generator(device=device).manual_seed(0)
    receiver = torch.arange(nodes, device=device).repeat_interleave(NEIGHBOURS)
    sender = torch.randint(0, nodes, (edges,), generator=g, device=device)
    x = torch.randn(nodes, irreps_in.dim, generator=g, device=device, requires_grad=backward)
    Y = torch.randn(edges, irreps_sh.dim, generator=g, device=device, requires_grad=backward)
    w = torch.randn(edges, tp.weight_numel, generator=g, device=device, requires_grad=backward)

    def run():
        if backward:
            x.grad = Y.grad = w.grad = None
        m = tp(x[sender], Y, w)  # the per-edge message tensor MACE materialises
        out = torch.zeros(nodes, mid.dim, device=device).index_add_(0, receiver, m)
        if backward:
            out.sum().backward()

    return time_ms(run, device, repeats)


def symmetric_contraction(device, nodes, repeats, backward):
    """MACE's product basis: correlation-3 symmetric contraction with 10 element channels.

    As in peers_mace_torch.py: the input is the l <= 3 node features (TARGET, 128 channels x 16
    components, the x of shape [nodes, 128, 16]) and the output the 128x0e+128x1o hidden features.
    """
    sc = SymmetricContraction(o3.Irreps(TARGET), o3.Irreps(SC_HIDDEN), 3, num_elements=10).to(device)
    g = torch.Generator(device=device).manual_seed(1)
    x = torch.randn(nodes, 128, 16, generator=g, device=device, requires_grad=backward)
    species = torch.arange(nodes, device=device) % 10
    y = torch.nn.functional.one_hot(species, 10).to(x.dtype)

    def run():
        if backward:
            x.grad = None
        out = sc(x, y)
        if backward:
            out.sum().backward()

    return time_ms(run, device, repeats)


def cleanup(device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_case(name, fn, device, dtype_name, repeats, meta):
    res = {"name": name}
    torch.set_default_dtype(DTYPES[dtype_name])
    cleanup(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        med, mn = fn()
        res.update(median_ms=med, min_ms=mn, repeats=repeats)
        if device.type == "cuda":
            res["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
    except Exception as exc:  # noqa: BLE001 - one failing case must not end the run
        res["error"] = "out of memory" if is_oom(exc) else f"{type(exc).__name__}: {exc}"
    res["dtype"] = dtype_name
    res.update(meta)
    cleanup(device)
    print(json.dumps(res), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a CPU smoke test")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for d in dtypes:
        if d not in DTYPES:
            ap.error(f"unknown dtype {d!r}; choose from {', '.join(DTYPES)}")

    conv_nodes = (100,) if args.quick else (1000, 5000)
    sc_nodes = (10,) if args.quick else (1000, 10000)
    meta = {"device": str(device),
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "e3nn": e3nn.__version__, "mace": MACE_VERSION}
    r = args.repeats

    for dt in dtypes:
        for shape in HIDDEN:
            for nodes in conv_nodes:
                for bwd in (False, True):
                    name = f"conv_tp_{shape}{'_fwd_bwd' if bwd else ''}/{nodes}/{NEIGHBOURS}/{dt}"
                    run_case(name, lambda: conv_tp(device, shape, nodes, r, bwd), device, dt, r, meta)
        if SymmetricContraction is None:
            continue
        for nodes in sc_nodes:
            for bwd in (False, True):
                name = f"symmetric_contraction{'_fwd_bwd' if bwd else ''}/{nodes}/{dt}"
                run_case(name, lambda: symmetric_contraction(device, nodes, r, bwd), device, dt, r, meta)
    if SymmetricContraction is None:
        print(json.dumps({"name": "symmetric_contraction", "error": MACE_IMPORT_ERROR, **meta}), flush=True)


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: MIT
"""mace-torch's whole model on the GPU at the shapes and sizes of bench_mace_model.cpp: the
MACE-MP-0 small and medium shapes and a large one (ScaleShiftMACE, 2 interactions, hidden 128x0e /
128x0e+128x1o / 128x0e+128x1o+128x2e, l_max 3, correlation 3, r_max 6, radial MLP [64, 64, 64],
Cu and Ni) on random fcc Cu50Ni50 (a = 3.568 A, rattled 0.05 A) of 864, 10976 and 97556 atoms,
float32 and float64. Times one
energy-and-forces call (model(batch, compute_force=True)) on a batch built once, as ours times
compute() on a graph built once; medians of --repeats runs after 3 warm-ups, each bracketed by
torch.cuda.synchronize(). Weights are mace-torch's random initialisation: the time does not
depend on them. The neighbour list is ASE's (no matscipy needed). One JSON line per case, named
mace_model/<model>/<atoms>/<dtype>, appended to what scripts/gpu-check.sh collects in
peers_gpu.jsonl; gpu_table.py tabulates them beside ours.

With --backend oeq the same model is converted by mace-torch's own e3nn-to-OpenEquivariance
converter (mace.cli.convert_e3nn_oeq: OpenEquivariance's fused convolution, "atomic", in place of
e3nn's channelwise TP and scatter; the rest stays e3nn) and its lines are named mace_model_oeq/...
A case where mace-torch cannot load OpenEquivariance is an error line, never an e3nn timing under
the OEQ name (mace-torch quietly falls back to e3nn then).

    python3 peers_mace_gpu.py [--device cuda] [--cells 6,14,29] [--repeats 10] [--backend e3nn|oeq]
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

# e3nn 0.4.4 torch.load()s its Wigner constants, which torch >= 2.6 refuses under the
# weights_only default; mace-torch sets this too, but e3nn is imported first here.
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

LATTICE, RATTLE, SEED = 3.568, 0.05, 20261123
CU, NI = 29, 28
SHAPES = {"mp_small": "128x0e", "mp_medium": "128x0e+128x1o", "mp_large": "128x0e+128x1o+128x2e"}
_NEIGHBOURS = {}  # cells -> (numbers, positions, cell, i, j, S): ASE's list takes a while at 97556 atoms


def build_model(hidden, torch, modules, o3):
    return modules.ScaleShiftMACE(
        r_max=6.0, num_bessel=10, num_polynomial_cutoff=5, max_ell=3,
        interaction_cls=modules.RealAgnosticResidualInteractionBlock,
        interaction_cls_first=modules.RealAgnosticInteractionBlock, num_interactions=2, num_elements=2,
        hidden_irreps=o3.Irreps(hidden), MLP_irreps=o3.Irreps("16x0e"), atomic_energies=np.array([-5.5517, -3.7152]),
        avg_num_neighbors=61.96, atomic_numbers=[NI, CU], correlation=3, gate=torch.nn.functional.silu,
        radial_MLP=[64, 64, 64], atomic_inter_scale=0.8043, atomic_inter_shift=0.1647)


def batch(cells, torch, device, dtype):
    """The batch dict mace-torch's models read, for fcc Cu50Ni50 of cells^3 conventional cells."""
    from ase.neighborlist import neighbor_list  # pylint: disable=import-outside-toplevel
    import ase  # pylint: disable=import-outside-toplevel
    if cells not in _NEIGHBOURS:
        basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
        grid = np.array([[i, j, k] for i in range(cells) for j in range(cells) for k in range(cells)])
        rng = np.random.default_rng(SEED + cells)
        pos = LATTICE * (grid[:, None, :] + basis[None, :, :]).reshape(-1, 3)
        pos = pos + rng.normal(0.0, RATTLE, pos.shape)
        numbers = rng.permutation(np.array([CU, NI] * (len(pos) // 2)))
        cell = np.eye(3) * LATTICE * cells
        atoms = ase.Atoms(numbers=numbers, positions=pos, cell=cell, pbc=True)
        i, j, S = neighbor_list("ijS", atoms, 6.0)  # D = r_j - r_i + S.cell: sender i, receiver j
        _NEIGHBOURS[cells] = (numbers, pos, cell, i, j, S)
    numbers, pos, cell, i, j, S = _NEIGHBOURS[cells]
    one_hot = np.stack([numbers == NI, numbers == CU], axis=1).astype(float)
    n = len(numbers)

    def t(a, kind=dtype):
        return torch.tensor(np.asarray(a), dtype=kind, device=device)

    return {
        "positions": t(pos), "node_attrs": t(one_hot), "cell": t(cell),
        "edge_index": t(np.stack([i, j]), torch.long), "shifts": t(S @ cell), "unit_shifts": t(S),
        "batch": t(np.zeros(n), torch.long), "ptr": t([0, n], torch.long), "head": t([0], torch.long),
    }, n, len(i)


def oeq_unavailable():
    """None where mace-torch can run OpenEquivariance, else why not (mace-torch's OEQConfig
    silently turns itself off where the import failed)."""
    try:
        from mace.modules import wrapper_ops  # pylint: disable=import-outside-toplevel
    except Exception as e:  # pylint: disable=broad-except
        return f"mace-torch has no OpenEquivariance support ({type(e).__name__}: {e})"
    if not getattr(wrapper_ops, "OEQ_AVAILABLE", False):
        try:
            import openequivariance  # pylint: disable=import-outside-toplevel,unused-import
        except Exception as e:  # pylint: disable=broad-except
            return f"OpenEquivariance does not import: {type(e).__name__}: {e}"
        return "mace-torch's wrapper_ops reports OpenEquivariance unavailable"
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--cells", default="6,14,29")
    p.add_argument("--models", default="mp_small,mp_medium,mp_large")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--backend", choices=("e3nn", "oeq"), default="e3nn",
                   help="mace-torch's tensor-product backend: e3nn, or OpenEquivariance (oeq)")
    args = p.parse_args()
    import torch  # pylint: disable=import-outside-toplevel
    from e3nn import o3  # pylint: disable=import-outside-toplevel
    import e3nn  # pylint: disable=import-outside-toplevel
    import mace  # pylint: disable=import-outside-toplevel
    from mace import modules  # pylint: disable=import-outside-toplevel
    cuda = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    info = {"device": args.device, "torch": torch.__version__, "e3nn": e3nn.__version__,
            "mace": getattr(mace, "__version__", "?"),
            "device_name": torch.cuda.get_device_name(0) if cuda else "cpu"}
    prefix = "mace_model" if args.backend == "e3nn" else "mace_model_oeq"
    oeq_problem = None
    if args.backend == "oeq":
        info["backend"] = "oeq"
        oeq_problem = oeq_unavailable()
        if oeq_problem is None:
            import openequivariance  # pylint: disable=import-outside-toplevel
            # Used from its unpacked source archive there is no installed metadata to read the
            # version from; the archive's folder (openequivariance-X.Y.Z) names it.
            info["oeq"] = getattr(openequivariance, "__version__", None) or os.path.basename(
                os.path.dirname(os.path.dirname(os.path.abspath(openequivariance.__file__))))
    for name in args.models.split(","):
        for cells in (int(c) for c in args.cells.split(",")):
            for dtype_name in ("float32", "float64"):
                rec = {"name": f"{prefix}/{name}/{4 * cells ** 3}/{dtype_name}", "dtype": dtype_name, **info}
                try:
                    if oeq_problem:
                        raise RuntimeError(oeq_problem)
                    dtype = getattr(torch, dtype_name)
                    torch.set_default_dtype(dtype)
                    torch.manual_seed(0)
                    model = build_model(SHAPES[name], torch, modules, o3).to(args.device)
                    if args.backend == "oeq":
                        from mace.cli.convert_e3nn_oeq import run as to_oeq  # pylint: disable=import-outside-toplevel
                        model = to_oeq(model, device=args.device)
                    data, n, edges = batch(cells, torch, args.device, dtype)
                    rec.update(atoms=n, edges=edges)
                    if cuda:
                        torch.cuda.reset_peak_memory_stats()
                    times = []
                    for k in range(3 + args.repeats):
                        sync()
                        t0 = time.perf_counter()
                        out = model(dict(data), compute_force=True)
                        float(out["energy"].sum())
                        sync()
                        if k >= 3:
                            times.append(1e3 * (time.perf_counter() - t0))
                    rec.update(median_ms=statistics.median(times), min_ms=min(times), repeats=args.repeats,
                               atom_steps_per_s=n / (statistics.median(times) / 1e3))
                    if cuda:
                        rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated()
                    del model, data, out
                except Exception as e:  # pylint: disable=broad-except
                    rec["error"] = f"{type(e).__name__}: {e}"[:300]
                if cuda:
                    torch.cuda.empty_cache()
                print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()

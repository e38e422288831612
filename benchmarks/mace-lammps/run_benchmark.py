# SPDX-License-Identifier: MIT
"""MACE in LAMMPS (issue 5): pair_style fastmlip/mace against mace-torch's ASE calculator, with
LAMMPS' SNAP for context, on random fcc Cu50Ni50 (a = 3.568 A) of 500, 4000 and 32000 atoms.

Run from the repository root in the reference venv (tests/reference/setup-venv.sh), after
scripts/setup.sh has built build/bin/lmp and build/lib/fastmlipplugin.so:

    .venv/bin/python benchmarks/mace-lammps/run_benchmark.py \
        --json benchmarks/mace-lammps/results-2026-11-23.json

It prints a markdown summary on stdout and writes every measurement (per-step times, loads,
LAMMPS' timing breakdown, memory) to the JSON file.

What is measured, and why that way:

- Models: tests/reference/data/mace/mp_small and mp_medium (ScaleShiftMACE, 2 interactions,
  r_max 6, hidden 128x0e resp. 128x0e+128x1o). mace-torch runs the very same models, rebuilt
  with make_mace_fixtures.build_model (same seed and calibration as the committed files); the
  script checks that LAMMPS' step-0 energy equals mace-torch's on the 500-atom structure.
- fastmlip variants (--precisions): float64 and float32 evaluate the model exactly; float64/spline
  and float32/spline add `radial spline <--spline-spacing>` (each layer's radial functions
  tabulated, docs/pair_fastmlip_mace.md). mace-torch runs in the variant's dtype.
- fastmlip: `build/bin/lmp -in in.bench.lmp`, NVE at 1 fs. The thermo column `cpu` is printed
  every step, so each step's wall time is known; the setup force evaluation (before step 0) and
  the first `--warmup` steps are dropped, and atom-steps/s = atoms / median step time. One rank,
  Kokkos Serial (one thread), float64 and float32.
- mace-torch: MACECalculator(models=<the model>) in ASE's VelocityVerlet at 1 fs, torch with one
  thread; each MD step is one calculator call, which builds its neighbour list (matscipy) and,
  in mace-torch 0.3.13, always computes the stress as well (one more gradient in the same
  backward pass). The initial force evaluation is the warm-up; atom-steps/s = atoms / median
  step time. float64, and float32 (default_dtype="float32": the calculator converts the model).
  Each configuration runs in its own process, under a memory watchdog; sizes whose time or
  memory, extrapolated linearly from the smaller size, exceed --max-config-seconds or
  --memory-limit-gb are recorded as not run, with the estimate.
- Memory per atom: peak resident set size at the end of the run minus the peak just before the
  first force evaluation (model loaded, structure built), divided by the atoms. For LAMMPS both
  come from `info memory` (getrusage) in the same process, for mace-torch from getrusage in
  the worker. So both figures hold the neighbour list, per-atom and per-edge buffers and (for
  mace-torch) autograd's graph, and neither the libraries nor the model weights.
- Scaling: 1 and 2 MPI ranks at 4000 atoms, back to back (mpirun -np 1 and -np 2), efficiency
  = rate(2 ranks) / (2 x rate(1 rank)).
- SNAP: LAMMPS' Cu_Zuo_JPCA2020 (2J = 8, 4.1 A cutoff) on the same positions, every atom Cu.
- Profile (--profile): `timer full` breakdown of LAMMPS (Pair / Neigh / Comm / Other; the
  plugin's per-layer exchange of node features happens inside the pair style, so it counts as
  Pair time) and a `perf record` flat profile of one serial and one 2-rank run, grouped by
  symbol.

The machine is usually shared: the load average is recorded before and after every run.
Timings never go into tests; this script is the only place they are produced.
"""
import argparse
import json
import os
import pathlib
import re
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "common"))
import bench_util  # pylint: disable=wrong-import-position
from bench_util import load, mem_total_gb, now, write_json  # pylint: disable=wrong-import-position

TEMPLATE = HERE / "in.bench.lmp"
MACE_DATA = REPO / "tests" / "reference" / "data" / "mace"
sys.path.insert(0, str(REPO / "tests" / "reference"))

LATTICE = 3.568  # Vegard's law for Cu50Ni50 (Cu 3.615 A, Ni 3.52 A)
RATTLE = 0.05  # A, Gaussian, so that no force vanishes by symmetry
STRUCTURE_SEED = 20261123
CU, NI = 29, 28
MASS = {CU: 63.546, NI: 58.693}
SCHEMA = "fastmlip-bench-mace-lammps 1"


def fixtures():
    """tests/reference/make_mace_fixtures.py, imported (it sets torch's default dtype to float64
    and one thread, as the fixtures were made)."""
    import make_mace_fixtures  # pylint: disable=import-outside-toplevel
    return make_mace_fixtures


# Shapes benchmarked without a committed fixture (a medium-width file is 12 MB): built by
# make_mace_fixtures.build_model from these configs (same perturbation and calibration rule),
# converted into the work directory on first use. mpa_medium: MACE-MPA-0 / OMAT-0's
# architecture at medium width, two elements (Density then DensityResidual blocks, the Agnesi
# distance transform, ZBL; mace-torch's MPA-0 medium settings otherwise as MACE-MP-0 medium).
BENCH_MODELS = {
    "mpa_medium": {
        "name": "mpa_medium", "description": "MACE-MPA-0 medium architecture with 2 elements",
        "class": "ScaleShiftMACE", "seed": 112, "species": [NI, CU], "r_max": 6.0, "num_bessel": 10,
        "num_polynomial_cutoff": 5, "max_ell": 3, "num_interactions": 2, "hidden_irreps": "128x0e+128x1o",
        "MLP_irreps": "16x0e", "correlation": 3, "radial_MLP": [64, 64, 64],
        "interaction_cls_first": "RealAgnosticDensityInteractionBlock",
        "interaction_cls": "RealAgnosticDensityResidualInteractionBlock", "avg_num_neighbors": [61.96, 61.96],
        "scale": 0.8043, "shift": 0.1647, "pair_repulsion": True, "distance_transform": "Agnesi",
        "structures": "binary",
    },
}
# mh1_medium: MACE-MH-1's blocks at MACE-MP-0 medium's width (MH-1's own widths were not at hand):
# RealAgnosticResidualNonLinearInteractionBlock on both layers, edge_irreps, apply_cutoff False,
# the agnostic product and the bias readout; built with mace-torch >= 0.3.14.
BENCH_MODELS["mh1_medium"] = {
    **{k: v for k, v in BENCH_MODELS["mpa_medium"].items() if k not in ("pair_repulsion", "distance_transform")},
    "name": "mh1_medium", "description": "MACE-MH-1's blocks at MACE-MP-0 medium width with 2 elements", "seed": 113,
    "interaction_cls_first": "RealAgnosticResidualNonLinearInteractionBlock",
    "interaction_cls": "RealAgnosticResidualNonLinearInteractionBlock",
    "edge_irreps": "128x0e+128x1o", "use_edge_irreps_first": True, "apply_cutoff": False,
    "use_agnostic_product": True, "readout_cls": "NonLinearBiasReadoutBlock", "mace_torch": "0.3.14",
}
_CONVERTED = {}


def model_config(name):
    return BENCH_MODELS.get(name) or next(c for c in fixtures().MODELS if c["name"] == name)


def potential_path(name):
    """The model's potential file: the committed fixture, or BENCH_MODELS' converted once."""
    if name not in BENCH_MODELS:
        return MACE_DATA / (name + ".safetensors")
    if name not in _CONVERTED:
        sys.path.insert(0, str(REPO / "potentials" / "convert"))
        import mace_to_fastmlip  # pylint: disable=import-outside-toplevel
        path = pathlib.Path(tempfile.mkdtemp(prefix="fastmlip-bench-")) / (name + ".safetensors")
        mace_to_fastmlip.convert(fixtures().build_model(BENCH_MODELS[name]), str(path))
        _CONVERTED[name] = path
    return _CONVERTED[name]


# ---------------------------------------------------------------------------------------------
# Structures


def cell_counts(cells):
    """The conventional fcc cells (a, b, c) along x, y, z of a size: "N" (N^3 cells, 4 N^3 atoms)
    or "AxBxC" (4 A B C atoms: "5x5x10" is 1000)."""
    try:
        parts = [int(x) for x in str(cells).split("x")]
    except ValueError:
        parts = []
    if len(parts) == 1:
        parts *= 3
    if len(parts) != 3 or min(parts) < 1:
        raise SystemExit(f"--cells: {cells!r} is neither N nor AxBxC (positive integers)")
    return tuple(parts)


def size_key(cells):
    """One name per size: "6" for 6x6x6, else "AxBxC"."""
    a, b, c = cell_counts(cells)
    return str(a) if a == b == c else f"{a}x{b}x{c}"


def natoms_of(cells):
    a, b, c = cell_counts(cells)
    return 4 * a * b * c


def structure(cells):
    """Random fcc Cu50Ni50 of a x b x c conventional cells (cell_counts): (numbers, positions, box
    lengths along x, y, z). A cubic size keeps the seed it always had."""
    a, b, c = cell_counts(cells)
    pos, cell = fixtures()._fcc_sites(LATTICE, (a, b, c))
    rng = np.random.default_rng(STRUCTURE_SEED + (a if a == b == c else 10000 * a + 100 * b + c))
    numbers = rng.permutation(np.array([CU, NI] * (len(pos) // 2)))
    pos = pos + rng.normal(0.0, RATTLE, pos.shape)
    return numbers, pos, [float(x) for x in np.diag(cell)]


def write_data(path, numbers, pos, box, pure_cu=False):
    """A LAMMPS data file: types 1 = Cu, 2 = Ni; with pure_cu one type, Cu, at every site."""
    types = np.ones(len(numbers), dtype=int) if pure_cu else np.where(numbers == CU, 1, 2)
    masses = [MASS[CU]] if pure_cu else [MASS[CU], MASS[NI]]
    lines = [f"fcc Cu{'' if pure_cu else '50Ni50'} (benchmarks/mace-lammps)", "",
             f"{len(numbers)} atoms", f"{len(masses)} atom types", "",
             f"0 {float(box[0])!r} xlo xhi", f"0 {float(box[1])!r} ylo yhi", f"0 {float(box[2])!r} zlo zhi", "",
             "Masses", ""]
    lines += [f"{t + 1} {m}" for t, m in enumerate(masses)]
    lines += ["", "Atoms # atomic", ""]
    # float(): numpy 2's repr of its scalars is "np.float64(...)", which LAMMPS cannot read.
    lines += [f"{i + 1} {t} {float(p[0])!r} {float(p[1])!r} {float(p[2])!r}"
              for i, (t, p) in enumerate(zip(types, pos))]
    path.write_text("\n".join(lines) + "\n")


def edges_per_atom(numbers, pos, box, r_max):
    from matscipy.neighbours import neighbour_list  # pylint: disable=import-outside-toplevel
    import ase  # pylint: disable=import-outside-toplevel
    atoms = ase.Atoms(numbers=numbers, positions=pos, cell=np.diag(box), pbc=True)
    return len(neighbour_list("i", atoms, r_max)) / len(numbers)


# ---------------------------------------------------------------------------------------------
# LAMMPS


# The watchdog's settings for every process this script starts (bench_util.run_watched).
WATCHDOG = {"cwd": REPO, "fresh_rusage": False,
            "memory_msg": "not run: resident memory reached {rss_gb:.1f} GB, over the {limit_gb:.0f} GB limit "
                          "(--memory-limit-gb); stopped",
            "timeout_msg": "not run: timed out after {timeout} s; stopped"}


def parse_log(text):
    out = bench_util.lammps_log_header(text)
    m = re.search(r"Per MPI rank memory allocation \(min/avg/max\) = ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) Mbytes",
                  text)
    out["lammps_memory_mb"] = float(m.group(3)) if m else None
    steps, cpu, pe = [], [], []
    block = re.search(r"^\s*Step\s+CPU\s+PotEng\s*\n(.*?)^Loop time", text, re.M | re.S)
    if block:
        for line in block.group(1).splitlines():
            f = line.split()
            if len(f) == 3 and re.fullmatch(r"-?\d+", f[0]):
                steps.append(int(f[0]))
                cpu.append(float(f[1]))
                pe.append(float(f[2]))
    out["thermo_steps"], out["thermo_cpu"] = steps, cpu
    out["pe0"] = pe[0] if pe else None
    m = re.search(r"Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms", text)
    if m:
        out.update(loop_time_s=float(m.group(1)), procs=int(m.group(2)), loop_steps=int(m.group(3)),
                   natoms=int(m.group(4)))
    breakdown = {}
    for sec in ("Pair", "Neigh", "Comm", "Output", "Modify", "Other"):
        m = re.search(rf"^{sec}\s*\|\s*([0-9.eE+-]+)\s*\|\s*([0-9.eE+-]+)\s*\|\s*([0-9.eE+-]+)\s*\|\s*"
                      rf"([0-9.eE+-]+)\s*\|\s*([0-9.eE+-]+)", text, re.M)
        if m:
            breakdown[sec] = {"min_s": float(m.group(1)), "avg_s": float(m.group(2)),
                              "max_s": float(m.group(3)), "varavg_pct": float(m.group(4)),
                              "total_pct": float(m.group(5))}
        else:
            m = re.search(rf"^{sec}\s*\|\s*([0-9.eE+-]+)\s*\|[^|]*\|[^|]*\|[^|]*\|\s*([0-9.eE+-]+)", text, re.M)
            if m:
                breakdown[sec] = {"avg_s": float(m.group(1)), "total_pct": float(m.group(2))}
    out["breakdown"] = breakdown
    m = re.search(r"([0-9.]+)% CPU use with", text)
    out["cpu_use_pct"] = float(m.group(1)) if m else None
    m = re.search(r"Ave neighs/atom = ([0-9.eE+-]+)", text)
    out["lammps_neighs_per_atom"] = float(m.group(1)) if m else None
    return out


def run_lammps(args, work, name, data, pstyle, pcoeff, steps, ranks=1, timer="normal", timeout=600, perf=False):
    """One `run steps` of in.bench.lmp; per-step times from the thermo 'cpu' column. With perf,
    every rank runs under `perf record` (99 Hz, well under 1% overhead) and the flat profile
    (symbols with >= 0.5% of the samples) is kept."""
    log = work / f"{name}.log"
    prefix = []
    if perf:
        wrapper = work / "perf-rank.sh"
        wrapper.write_text("#!/bin/sh\nexec perf record -q -F 99 -o \"$PERF_OUT.${OMPI_COMM_WORLD_RANK:-0}\" -- \"$@\"\n")
        wrapper.chmod(0o755)
        prefix = [str(wrapper)]
    cmd = [str(args.lmp), "-in", str(TEMPLATE), "-log", str(log), "-screen", "none",
           "-var", "plugin", str(args.plugin), "-var", "data", str(data), "-var", "pstyle", pstyle,
           "-var", "pcoeff", pcoeff, "-var", "steps", str(steps), "-var", "timer", timer]
    env = dict(os.environ, OMP_NUM_THREADS="1", PERF_OUT=str(work / f"{name}.perf"))
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-x", "PERF_OUT",
               "-np", str(ranks)] + prefix + cmd
    else:
        cmd = prefix + cmd
    rec = {"name": name, "ranks": ranks, "steps": steps, "command": " ".join(cmd), "load_before": load(),
           "started": now()}
    t0 = time.perf_counter()
    code, _, stderr, killed, peak = bench_util.run_watched(cmd, env, timeout, args.memory_limit_gb * 1024,
                                                           **WATCHDOG)
    rec["returncode"], rec["stderr_tail"], rec["watchdog_peak_rss_mb"] = code, stderr[-2000:], peak
    if killed:
        rec["status"] = killed
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    rec["load_after"] = load()
    text = log.read_text(errors="replace") if log.exists() else ""
    rec.update(parse_log(text))
    if rec.get("returncode") != 0 or "loop_time_s" not in rec:
        rec.setdefault("status", f"failed (exit {rec.get('returncode')})")
        rec["log_tail"] = text[-3000:]
        return rec
    cpu = rec.pop("thermo_cpu")
    rec.pop("thermo_steps")
    dt = np.diff(cpu)
    timed = dt[args.warmup:] if len(dt) > args.warmup else dt
    rec["step_times_s"] = [round(float(x), 6) for x in dt]
    rec["timed_steps"] = len(timed)
    rec["median_step_s"] = float(np.median(timed))
    rec["atom_steps_per_s"] = rec["natoms"] / rec["median_step_s"]
    rec["mean_atom_steps_per_s"] = rec["natoms"] * len(timed) / float(np.sum(timed))
    if rec["rss_before_mb"] is not None and rec["rss_after_mb"] is not None:
        rec["memory_per_atom_kb"] = (rec["rss_after_mb"] - rec["rss_before_mb"]) * 1024.0 / rec["natoms"]
    if rec.get("cpu_use_pct"):
        rec["cpu_atom_steps_per_s"] = rec["natoms"] * rec["loop_steps"] / (
            rec["loop_time_s"] * rec["cpu_use_pct"] / 100.0)
    if perf:
        rec["perf"] = {}
        for r in range(ranks):
            rec["perf"][f"rank{r}"] = perf_top(work / f"{name}.perf.{r}")
    rec["status"] = "ok"
    return rec


def perf_top(path, limit=25):
    if not path.exists():
        return []
    rep = subprocess.run(["perf", "report", "-i", str(path), "--stdio", "--no-children", "--sort", "dso,symbol",
                          "--percent-limit", "0.5"], capture_output=True, text=True, timeout=600, check=False)
    rows = []
    for line in rep.stdout.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\S+)\s+\[.\]\s+(.*?)\s*$", line)
        if m:
            rows.append({"pct": float(m.group(1)), "dso": m.group(2), "symbol": m.group(3)[:240]})
    path.unlink()
    return rows[:limit]


def plan_steps(args, natoms, rate):
    """(steps for `run`, estimated seconds) for a target timed duration; rate in atom-steps/s."""
    step_s = natoms / rate
    timed = int(min(args.max_timed, max(args.min_timed, round(args.target_seconds / step_s))))
    steps = args.warmup + timed
    return steps, (steps + 1) * step_s  # +1: the setup force evaluation


# ---------------------------------------------------------------------------------------------
# mace-torch worker (a separate process per configuration)


def torch_worker(spec):
    """Runs in its own process: ASE VelocityVerlet with MACECalculator; prints one JSON line."""
    F = fixtures()
    import ase  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    from ase import units  # pylint: disable=import-outside-toplevel
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution  # pylint: disable=import-outside-toplevel
    from ase.md.verlet import VelocityVerlet  # pylint: disable=import-outside-toplevel
    from mace.calculators import MACECalculator  # pylint: disable=import-outside-toplevel

    torch.set_num_threads(1)
    cfg = model_config(spec["model"])
    model = F.build_model(cfg)  # float64, calibrated: the model in tests/reference/data/mace
    numbers, pos, box = structure(spec["cells"])
    atoms = ase.Atoms(numbers=numbers, positions=pos, cell=np.diag(box), pbc=True)
    calc = MACECalculator(models=model, device="cpu", default_dtype=spec["dtype"])
    atoms.calc = calc
    MaxwellBoltzmannDistribution(atoms, temperature_K=600.0, rng=np.random.default_rng(1))
    out = {"torch_threads": torch.get_num_threads(), "natoms": len(atoms),
           "rss_before_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    stamps, cpu_stamps = [], []
    dyn = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    dyn.attach(lambda: (stamps.append(time.perf_counter()), cpu_stamps.append(time.process_time())), interval=1)
    t0 = time.perf_counter()
    energy0 = []

    def first():  # the initial evaluation, before step 0's observer call
        if not energy0:
            energy0.append(atoms.get_potential_energy())

    dyn.attach(first, interval=1)
    dyn.run(spec["steps"])
    out["rss_after_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out["first_eval_s"] = stamps[0] - t0
    dt = np.diff(stamps)
    out["step_times_s"] = [round(float(x), 6) for x in dt]
    out["timed_steps"] = len(dt)
    out["median_step_s"] = float(np.median(dt))
    out["atom_steps_per_s"] = len(atoms) / out["median_step_s"]
    out["cpu_step_times_s"] = [round(float(x), 6) for x in np.diff(cpu_stamps)]
    out["cpu_atom_steps_per_s"] = len(atoms) / float(np.median(np.diff(cpu_stamps)))
    out["memory_per_atom_kb"] = (out["rss_after_mb"] - out["rss_before_mb"]) * 1024.0 / len(atoms)
    out["energy0"] = float(energy0[0])
    out["num_edges"] = int(calc._atoms_to_batch(atoms)["edge_index"].shape[1])  # pylint: disable=protected-access
    print("RESULT " + json.dumps(out), flush=True)


def run_torch(args, model, cells, dtype, steps, timeout):
    spec = {"model": model, "cells": cells, "dtype": dtype, "steps": steps}
    cmd, command = bench_util.worker_command(__file__, "--torch-worker", spec)
    rec = {"name": f"mace-torch-{model}-{dtype}-{natoms_of(cells)}", "model": model, "dtype": dtype,
           "natoms": natoms_of(cells), "steps": steps, "command": command}
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return bench_util.run_worker(cmd, rec, env, timeout, args.memory_limit_gb * 1024, **WATCHDOG)


# ---------------------------------------------------------------------------------------------
# Machine and software


def machine():
    return {**bench_util.cpu_info(), "memory_gb": round(mem_total_gb(), 1), **bench_util.os_info()}


def software(args):
    import ase  # pylint: disable=import-outside-toplevel
    import e3nn  # pylint: disable=import-outside-toplevel
    import mace  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    return {"fastmlip_commit": bench_util.git(REPO, "rev-parse", "HEAD"),
            "plugin": bench_util.file_info(args.plugin),
            # The plugin is a small loader; the pair styles and the model are in this library.
            "styles": bench_util.file_info(str(pathlib.Path(args.plugin).with_name("fastmlip_styles.so"))),
            "fastmlip_worktree_dirty": bool(bench_util.git(REPO, "status", "--porcelain", "--untracked-files=no")),
            "build": bench_util.cmake_cache(args.plugin), "mace-torch": mace.__version__, "e3nn": e3nn.__version__,
            "torch": torch.__version__, "ase": ase.__version__, "numpy": np.__version__,
            "mpirun": bench_util.mpirun_version()}


# ---------------------------------------------------------------------------------------------
# Summary


def pair_style(args, variant):
    """`float64`, `float32`: the exact model; `float64/spline`, `float32/spline`: with its radial
    functions tabulated (pair_style ... radial spline <--spline-spacing>)."""
    precision, _, radial = variant.partition("/")
    style = f"fastmlip/mace precision {precision}"
    if radial == "spline":
        style += f" radial spline {args.spline_spacing}"
    elif radial:
        raise SystemExit(f"unknown fastmlip variant {variant!r}: use float64, float32, float64/spline, float32/spline")
    return style


def dtype_of(variant):
    return variant.partition("/")[0]


def fmt_rate(rec, key="atom_steps_per_s"):
    if rec is None:
        return "-"
    if rec.get("status") != "ok":
        est = rec.get("estimated_" + key)
        return f"not run (~{est:.3g})" if est else "not run"
    return f"{rec[key]:.3g}" if rec.get(key) else "-"


def fmt_mem(rec):
    if rec is None or rec.get("status") != "ok" or rec.get("memory_per_atom_kb") is None:
        return "-"
    return f"{rec['memory_per_atom_kb']:.0f}"


def summary(res):
    """Markdown tables: wall-clock medians, and rates per CPU-second (robust to other load)."""
    def find(lst, **kw):
        return next((r for r in lst if all(r.get(k) == v for k, v in kw.items())), None)

    def rate(rec, key):
        if rec is None:
            return None
        if rec.get("status") == "ok":
            return rec.get(key)
        return rec.get("estimated_" + key)

    variants = res["settings"].get("fastmlip_variants", ["float64", "float32"])
    out = []
    for key, title in (("atom_steps_per_s", "atom-steps/s, wall clock, median step"),
                       ("cpu_atom_steps_per_s", "atom-steps per CPU-second")):
        out += [f"{title} (mace-torch in the same dtype; ratio = fastmlip / mace-torch):", "",
                "| model | atoms | fastmlip variant | fastmlip | mace-torch | ratio |", "|---|---:|---|---:|---:|---:|"]
        for model in res["settings"]["models"]:
            for n in res["settings"]["natoms"]:
                for v in variants:
                    fm = find(res["fastmlip"], model=model, precision=v, natoms=n)
                    mt = find(res["mace_torch"], model=model, dtype=dtype_of(v), natoms=n)
                    a, b = rate(fm, key), rate(mt, key)
                    ok = fm is not None and mt is not None and fm.get("status") == mt.get("status") == "ok"
                    ratio = f"{a / b:.2f}x" if ok and a and b else (f"(~{a / b:.2f}x)" if a and b else "-")
                    out.append(f"| {model} | {n} | {v} | {fmt_rate(fm, key)} | {fmt_rate(mt, key)} | {ratio} |")
        out.append("")
    out += ["memory per atom (KB, peak RSS added by the run / atoms):", "",
            "| model | atoms | " + " | ".join(f"fastmlip {v}" for v in variants) + " | mace-torch f64 | mace-torch f32 |",
            "|---|---:|" + "---:|" * (len(variants) + 2)]
    for model in res["settings"]["models"]:
        for n in res["settings"]["natoms"]:
            out.append(f"| {model} | {n} | " + " | ".join(
                fmt_mem(find(res["fastmlip"], model=model, precision=v, natoms=n)) for v in variants)
                + " | " + " | ".join(fmt_mem(find(res["mace_torch"], model=model, dtype=p, natoms=n))
                                     for p in ("float64", "float32")) + " |")
    out += ["", "| scaling | atoms | 1 rank | 2 ranks | efficiency (wall) | efficiency (CPU) | load |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for s in res["scaling"]:
        if s["efficiency"] is None:
            out.append(f"| {s['model']} {s['precision']} | {s['natoms']} | {s['status']} | | | | |")
        else:
            cpu = f"{100 * s['cpu_efficiency']:.0f}%" if s.get("cpu_efficiency") else "-"
            out.append(f"| {s['model']} {s['precision']} | {s['natoms']} | {s['rate_1']:.3g} | {s['rate_2']:.3g} | "
                       f"{100 * s['efficiency']:.0f}% | {cpu} | {s['load']} |")
    out += ["", "| SNAP Cu (2J = 8) | atom-steps/s | per CPU-second | KB/atom |", "|---|---:|---:|---:|"]
    for r in res["snap"]:
        out.append(f"| {r['natoms']} | {fmt_rate(r)} | {fmt_rate(r, 'cpu_atom_steps_per_s')} | {fmt_mem(r)} |")
    for c in res.get("energy_checks", []):
        out.append(f"\nenergy check {c['model']} {c.get('variant', 'float64')} {c['natoms']}: LAMMPS {c['lammps_pe0_eV']} eV, mace-torch "
                   f"{c['mace_torch_energy0_eV']} eV, |diff|/atom {c['abs_diff_per_atom_eV']:.2e} eV")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------


class Runner:
    """Runs the configurations in priority order. Each one's wall time (and, for mace-torch, peak
    memory) is estimated from the same configuration at the next smaller size, linearly in
    atoms; a configuration over --max-config-seconds, over what is left of --budget-minutes or
    (mace-torch) over --memory-limit-gb is recorded as not run, with the estimate."""

    def __init__(self, args, res, work, data, data_cu, log_fn):
        self.args, self.res, self.work, self.data, self.data_cu, self.log = args, res, work, data, data_cu, log_fn
        self.t0 = time.time()
        self.prev = {}  # (kind, model, precision) -> last ok record

    def refuse(self, est_s):
        left = self.args.budget_minutes * 60 - (time.time() - self.t0)
        if est_s > self.args.max_config_seconds:
            return f"estimated {est_s:.0f} s, over --max-config-seconds {self.args.max_config_seconds:.0f}"
        if est_s > left:
            return f"estimated {est_s:.0f} s, over the {max(left, 0):.0f} s left of --budget-minutes " \
                   f"{self.args.budget_minutes:.0f}"
        return None

    def lammps(self, kind, model, prec, cells):
        natoms = natoms_of(cells)
        if kind == "snap":
            pstyle, pcoeff, data = "snap", self.snap_coeff(), self.data_cu[cells]
            name, first = f"snap-cu-{natoms}", 20
        else:
            pstyle = pair_style(self.args, prec)
            pcoeff = f"* * {potential_path(model)} Cu Ni"
            data, name, first = self.data[cells], f"fastmlip-{model}-{prec.replace('/', '-')}-{natoms}", self.args.first_steps
        key = (kind, model, prec)
        prev = self.prev.get(key)
        base = {"name": name, "model": model, "precision": prec, "natoms": natoms, "ranks": 1}
        if prev is None:
            steps, timeout, est = self.args.warmup + first, int(1.5 * self.args.max_config_seconds), None
        else:
            rate = prev["atom_steps_per_s"] * self.args.size_slowdown
            steps, est = plan_steps(self.args, natoms, rate)
            timeout = int(min(3 * est + 120, 1.5 * self.args.max_config_seconds + 120))
            why = self.refuse(est)
            why = [f"{why} ({steps} steps at {rate:.3g} atom-steps/s, scaled from {prev['natoms']} atoms)"] \
                if why else []
            est_mb = None
            if prev.get("memory_per_atom_kb") is not None and prev.get("rss_before_mb") is not None:
                est_mb = prev["rss_before_mb"] + prev["memory_per_atom_kb"] * natoms / 1024.0
                if est_mb > self.args.memory_limit_gb * 1024:
                    why.append(f"estimated peak {est_mb / 1024:.1f} GB ({prev['memory_per_atom_kb']:.0f} KB per atom "
                               f"measured at {prev['natoms']} atoms), over --memory-limit-gb "
                               f"{self.args.memory_limit_gb:.0f} (the machine has {mem_total_gb():.0f} GB, shared)")
            if why:
                rec = dict(base, status="not run: " + "; ".join(why), estimated_peak_rss_mb=est_mb,
                           estimated_atom_steps_per_s=prev["atom_steps_per_s"],
                           estimated_cpu_atom_steps_per_s=prev.get("cpu_atom_steps_per_s"))
                return self.store(kind, rec)
        rec = run_lammps(self.args, self.work, name, data, pstyle, pcoeff, steps, timeout=timeout,
                         perf=kind == "fastmlip" and not self.args.no_perf)
        rec.update({k: v for k, v in base.items() if k != "name"})
        rec["estimated_wall_s"] = est
        if rec["status"] == "ok":
            self.prev[key] = rec
        return self.store(kind, rec)

    def scaling(self, model, prec, cells):
        natoms = natoms_of(cells)
        serial = next((r for r in self.res["fastmlip"] if (r.get("model"), r.get("precision"), r.get("natoms"),
                                                             r.get("status")) == (model, prec, natoms, "ok")), None)
        entry = {"name": f"scaling-{model}-{prec.replace('/', '-')}-{natoms}", "model": model, "precision": prec, "natoms": natoms,
                 "rate_1": None, "rate_2": None, "efficiency": None, "cpu_efficiency": None}
        if serial is None:
            entry["status"] = "not run: no serial run at this size to compare with"
            return self.store("scaling", entry)
        est = 0.6 * serial["wall_s"]
        why = self.refuse(est)
        if why:
            entry["status"] = f"not run: {why}"
            return self.store("scaling", entry)
        rec = run_lammps(self.args, self.work, f"fastmlip-{model}-{prec.replace('/', '-')}-{natoms}-np2", self.data[cells],
                         pair_style(self.args, prec), f"* * {potential_path(model)} Cu Ni",
                         serial["steps"], ranks=2, timeout=int(2 * serial["wall_s"] + 120),
                         perf=not self.args.no_perf)
        entry.update(serial_run=serial["name"], run=rec, status=rec["status"],
                     load=f"{serial['load_before'][0]}/{serial['load_after'][0]} (1 rank), "
                          f"{rec['load_before'][0]}/{rec['load_after'][0]} (2 ranks)")
        if rec["status"] == "ok":
            entry.update(rate_1=serial["atom_steps_per_s"], rate_2=rec["atom_steps_per_s"])
            entry["efficiency"] = entry["rate_2"] / (2 * entry["rate_1"])
            if serial.get("cpu_atom_steps_per_s") and rec.get("cpu_atom_steps_per_s"):
                entry["cpu_efficiency"] = rec["cpu_atom_steps_per_s"] / (2 * serial["cpu_atom_steps_per_s"])
        return self.store("scaling", entry)

    def torch(self, model, dtype, cells):
        natoms = natoms_of(cells)
        key = ("torch", model, dtype)
        prev = self.prev.get(key)
        steps = self.args.torch_steps
        name = f"mace-torch-{model}-{dtype}-{natoms}"
        timeout = int(1.5 * self.args.max_config_seconds)
        if prev is not None:
            step_s = prev["median_step_s"] * natoms / prev["natoms"]
            est = (steps + 1) * step_s + 30
            est_mb = prev["rss_before_mb"] + prev["memory_per_atom_kb"] * natoms / 1024.0
            why = [w for w in [self.refuse(est)] if w]
            if est_mb > self.args.memory_limit_gb * 1024:
                why.append(f"estimated peak {est_mb / 1024:.1f} GB ({prev['memory_per_atom_kb']:.0f} KB per atom "
                           f"measured at {prev['natoms']} atoms), over --memory-limit-gb "
                           f"{self.args.memory_limit_gb:.0f} (the machine has {mem_total_gb():.0f} GB, shared)")
            if why:
                rec = {"name": name, "model": model, "dtype": dtype, "natoms": natoms,
                       "status": "not run: " + "; ".join(why),
                       "estimated_atom_steps_per_s": natoms / step_s,
                       "estimated_cpu_atom_steps_per_s": prev.get("cpu_atom_steps_per_s"),
                       "estimated_peak_rss_mb": round(est_mb)}
                return self.store("mace_torch", rec)
            timeout = int(2 * est + 120)
        rec = run_torch(self.args, model, cells, dtype, steps, timeout)
        if rec["status"] == "ok":
            self.prev[key] = rec
        return self.store("mace_torch", rec)

    def snap_coeff(self):
        d = pathlib.Path(self.args.snap_dir) if self.args.snap_dir else next(
            pathlib.Path.home().glob(".cache/fastmlip/lammps/current/lammps-*/potentials"))
        self.res["settings"]["snap"] = {"potential": "Cu_Zuo_JPCA2020 (linear SNAP, 2J = 8, rcutfac 4.1)",
                                        "dir": str(d), "structure": "the Cu50Ni50 positions, every atom Cu"}
        return f"* * {d / 'Cu_Zuo_JPCA2020.snapcoeff'} {d / 'Cu_Zuo_JPCA2020.snapparam'} Cu"

    def store(self, kind, rec):
        self.res[{"fastmlip": "fastmlip", "snap": "snap", "scaling": "scaling",
                  "mace_torch": "mace_torch"}[kind]].append(rec)
        self.log(rec)
        return rec


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--torch-worker", help=argparse.SUPPRESS)
    p.add_argument("--lmp", default=str(REPO / "build" / "bin" / "lmp"))
    p.add_argument("--plugin", default=str(REPO / "build" / "lib" / "fastmlipplugin.so"))
    p.add_argument("--snap-dir", default=None, help="directory with Cu_Zuo_JPCA2020.snap{coeff,param} "
                   "(default: the LAMMPS source tree under ~/.cache/fastmlip/lammps/current)")
    p.add_argument("--cells", default="5,10,20",
                   help="sizes: fcc conventional cells per edge, N (4 N^3 atoms) or AxBxC (4 A B C: 5x5x10 is 1000)")
    p.add_argument("--models", default="mp_small,mp_medium")
    p.add_argument("--precisions", default="float64,float32,float64/spline,float32/spline",
                   help="fastmlip variants: float64, float32, and either with /spline (radial spline)")
    p.add_argument("--spline-spacing", type=float, default=0.005, help="knot spacing (A) of the /spline variants")
    p.add_argument("--torch-dtypes", default="float64,float32")
    p.add_argument("--scaling-precisions", default="float64")
    p.add_argument("--scaling-cells", default="10", help="the size of the 2-rank scaling run (as --cells)")
    p.add_argument("--warmup", type=int, default=0,
                   help="LAMMPS steps dropped besides the setup evaluation (which is never timed)")
    p.add_argument("--first-steps", type=int, default=3, help="timed LAMMPS steps at the smallest size")
    p.add_argument("--min-timed", type=int, default=3)
    p.add_argument("--max-timed", type=int, default=50)
    p.add_argument("--target-seconds", type=float, default=20.0, help="timed seconds per LAMMPS run")
    p.add_argument("--size-slowdown", type=float, default=1.0,
                   help="rate assumed at the next size, relative to the last one (planning only)")
    p.add_argument("--torch-steps", type=int, default=3, help="timed ASE MD steps (after the initial evaluation)")
    p.add_argument("--memory-limit-gb", type=float, default=12.0,
                   help="largest resident memory a configuration may use (estimated beforehand, enforced)")
    p.add_argument("--max-config-seconds", type=float, default=900.0,
                   help="longest wall time one configuration may take (estimated beforehand, enforced at 1.5x)")
    p.add_argument("--budget-minutes", type=float, default=50.0, help="for the whole run")
    p.add_argument("--no-perf", action="store_true", help="do not run fastmlip under perf record")
    p.add_argument("--skip", default="", help="comma list of: fastmlip,torch,snap,scaling")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--update", action="store_true",
                   help="re-run into an existing --json: records of the same name are replaced (the old ones "
                        "move to 'superseded'); the rest is kept")
    args = p.parse_args()

    if args.torch_worker:
        torch_worker(json.loads(args.torch_worker))
        return

    if args.update:
        if not args.json or not pathlib.Path(args.json).exists():
            p.error("--update needs an existing --json file")
        pathlib.Path(args.json + ".orig").write_text(pathlib.Path(args.json).read_text())
    skip = set(filter(None, args.skip.split(",")))
    sizes = sorted({size_key(x) for x in args.cells.split(",")}, key=natoms_of)
    args.scaling_cells = size_key(args.scaling_cells)
    models = args.models.split(",")
    precisions = args.precisions.split(",")
    dtypes = args.torch_dtypes.split(",")
    res = {"schema": SCHEMA, "generated_by": "benchmarks/mace-lammps/run_benchmark.py",
           "command": " ".join([".venv/bin/python", "benchmarks/mace-lammps/run_benchmark.py"] + sys.argv[1:]),
           "started": now(), "machine": machine(), "software": software(args),
           "settings": {"models": models, "natoms": [natoms_of(c) for c in sizes], "lattice_A": LATTICE,
                        "rattle_A": RATTLE, "structure_seed": STRUCTURE_SEED, "timestep_fs": 1.0,
                        "temperature_start_K": 600.0, "neighbor_skin_A": 1.0, "warmup_steps": args.warmup,
                        "fastmlip_variants": precisions, "spline_spacing_A": args.spline_spacing,
                        "torch_threads": 1, "kokkos": "Serial (one thread)", "torch_steps": args.torch_steps,
                        "memory_limit_gb": args.memory_limit_gb,
                        "max_config_seconds": args.max_config_seconds, "budget_minutes": args.budget_minutes},
           "structures": {}, "fastmlip": [], "scaling": [], "mace_torch": [], "snap": []}

    def merged():
        if args.update:
            return merge(json.loads(pathlib.Path(args.json + ".orig").read_text()),
                         dict({"finished": None, "total_wall_s": None}, **res))
        return res

    def log_fn(rec):
        ok = rec.get("status") == "ok"
        if "run" in rec:
            rec = dict(rec, load_before=rec["run"]["load_before"], load_after=rec["run"]["load_after"],
                       wall_s=rec["run"]["wall_s"])
        if "efficiency" in rec:
            what = f"efficiency {rec['efficiency']:.2f}" if rec["efficiency"] is not None else rec["status"]
        else:
            what = f"{rec['atom_steps_per_s']:.4g} atom-steps/s" if ok else rec.get("status")
            if ok and rec.get("cpu_atom_steps_per_s"):
                what += f" ({rec['cpu_atom_steps_per_s']:.4g} per CPU-second)"
        mem = f", {rec['memory_per_atom_kb']:.1f} KB/atom" if rec.get("memory_per_atom_kb") is not None else ""
        print(f"[{now()}] {rec['name']}: {what}{mem} (load {rec.get('load_before')} -> {rec.get('load_after')}, "
              f"{rec.get('wall_s', 0)} s)", file=sys.stderr, flush=True)
        if args.json:  # partial results survive an interrupted run
            write_json(args.json, merged())

    with tempfile.TemporaryDirectory(prefix="fastmlip-mace-bench-") as tmp:
        work = pathlib.Path(tmp)
        data, data_cu = {}, {}
        for c in sorted(set(sizes) | {args.scaling_cells}, key=natoms_of):
            numbers, pos, box = structure(c)
            data[c], data_cu[c] = work / f"cuni-{c}.data", work / f"cu-{c}.data"
            write_data(data[c], numbers, pos, box)
            write_data(data_cu[c], numbers, pos, box, pure_cu=True)
            res["structures"][str(len(numbers))] = {
                "cells": c, "box_A": box, "cu": int((numbers == CU).sum()), "ni": int((numbers == NI).sum()),
                "edges_per_atom_r6": round(edges_per_atom(numbers, pos, box, 6.0), 2)}
        print(f"structures: {res['structures']}", file=sys.stderr, flush=True)

        run = Runner(args, res, work, data, data_cu, log_fn)
        # Priority order: float64 before float32, fastmlip next to its peer, then the scaling
        # figure at its size, then the larger sizes.
        for c in sizes:
            if "snap" not in skip:  # cheap, so first
                run.lammps("snap", "Cu_Zuo_JPCA2020", None, c)
            for prec_index, prec in enumerate(precisions):
                for model in models:
                    if "fastmlip" not in skip:
                        run.lammps("fastmlip", model, prec, c)
                    if c == args.scaling_cells and "scaling" not in skip and prec in args.scaling_precisions.split(","):
                        run.scaling(model, prec, c)
                    if "torch" not in skip and prec_index < len(dtypes):
                        run.torch(model, dtypes[prec_index], c)
            for dtype in dtypes[len(precisions):]:
                for model in models:
                    if "torch" not in skip:
                        run.torch(model, dtype, c)

    # LAMMPS' step-0 energy against mace-torch's on the same structure (float64).
    res["energy_checks"] = []
    for r in res["fastmlip"]:
        for t in res["mace_torch"]:
            if r.get("status") == "ok" and t.get("status") == "ok" and dtype_of(r["precision"]) == t["dtype"] == "float64" \
                    and (r["model"], r["natoms"]) == (t["model"], t["natoms"]):
                res["energy_checks"].append({"model": r["model"], "variant": r["precision"], "natoms": r["natoms"],
                                             "lammps_pe0_eV": r["pe0"],
                                             "mace_torch_energy0_eV": t["energy0"],
                                             "abs_diff_per_atom_eV": abs(r["pe0"] - t["energy0"]) / r["natoms"]})
    res["finished"] = now()
    res["total_wall_s"] = round(time.time() - run.t0, 1)
    res = merged()
    if args.json:
        write_json(args.json, res)
        if args.update:
            pathlib.Path(args.json + ".orig").unlink()
    print(summary(res))


def merge(old, new):
    """old with new's records replacing those of the same name (kept under 'superseded')."""
    old.setdefault("superseded", [])
    old.setdefault("reruns", []).append({k: new[k] for k in ("command", "started", "finished", "total_wall_s")})
    for kind in ("fastmlip", "scaling", "mace_torch", "snap"):
        for rec in new[kind]:
            for i, o in enumerate(old[kind]):
                if o["name"] == rec["name"]:
                    old["superseded"].append(dict(o, superseded_by_run_started=new["started"]))
                    old[kind][i] = rec
                    break
            else:
                old[kind].append(rec)
    old["energy_checks"] = []
    for r in old["fastmlip"]:
        for t in old["mace_torch"]:
            if r.get("status") == "ok" and t.get("status") == "ok" and dtype_of(r["precision"]) == t["dtype"] == "float64" \
                    and (r["model"], r["natoms"]) == (t["model"], t["natoms"]):
                old["energy_checks"].append({"model": r["model"], "variant": r["precision"], "natoms": r["natoms"],
                                             "lammps_pe0_eV": r["pe0"],
                                             "mace_torch_energy0_eV": t["energy0"],
                                             "abs_diff_per_atom_eV": abs(r["pe0"] - t["energy0"]) / r["natoms"]})
    return old


if __name__ == "__main__":
    main()

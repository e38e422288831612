# SPDX-License-Identifier: MIT
"""CHGNet in LAMMPS: pair_style fastmlip/chgnet against the chgnet package's own MD path (CHGNet
0.3.0 weights in ASE's velocity Verlet), same structures, same CPU, one run.

Run from the repository root in the reference venv (tests/reference/setup-venv.sh), after
scripts/setup.sh has built LAMMPS and build/lib/fastmlipplugin.so:

    .venv/bin/python benchmarks/chgnet-lammps/run_benchmark.py          # every size, both precisions
    .venv/bin/python benchmarks/chgnet-lammps/run_benchmark.py --quick  # 8 atoms, 2 steps: smoke test

It prints a markdown summary on stdout and writes every measurement (per-step times, loads,
memory) to benchmarks/chgnet-lammps/results-<date>.json (--json to choose).

What is measured, and why that way:

- Model: potentials/chgnet-0.3.0.safetensors (converted from chgnet's 0.3.0 checkpoint) for
  fastmlip; `CHGNet.load()` (the same 0.3.0 weights) for the chgnet package.
- Structures (built here, deterministically; see STRUCTURES and README.md): LiMnO2 (8 atoms,
  examples/limno2/limno2.data), Li9Co7O16 (32 atoms, constructed from layered LiCoO2),
  Li4Ti4P4O20 (32 atoms, a constructed stand-in of LiTiPO5's composition, not its structure),
  and LiMnO2 supercells of 1000 and 10240 atoms.
- fastmlip: `lmp -in in.bench.lmp`, NVE at 1 fs from 300 K; `run <--warmup>` then the timed
  `run <--steps>`. The thermo column `cpu` is printed every step, so each step's wall time is
  known: s/step is the median step of the timed run (LAMMPS' "Loop time" / steps, the mean, is
  kept too). One thread per rank (OMP_NUM_THREADS=1, Kokkos Serial), one rank; with --ranks 1,2
  also `mpirun -np 2`. float32 and float64 (--precision).
- chgnet: ASE's VelocityVerlet at 1 fs from 300 K, torch with one thread. chgnet 0.3.1's
  CHGNetCalculator builds the crystal graph inside calculate() and, on torch 1.13, the graph's
  integer index tensors come out as int32, which torch 1.13 cannot index with; so the worker
  uses its own small ASE calculator (ChgnetGraphCalculator below) that does what
  CHGNetCalculator.calculate does (pymatgen Structure, model.graph_converter, predict_graph with
  task "efsm", the same unit conversions) with those tensors cast to int64 in between. Each MD
  step is one calculator call: graph construction plus energy, forces, stress and magnetic
  moments, as chgnet's own MD does every step. The initial force evaluation and the first
  <--warmup> steps are dropped; s/step is the median of the remaining steps. chgnet runs its
  model in float32 (its only dtype), so both of our precisions are compared with it.
- Time budget for chgnet: at the sizes of --peer-limit-steps-from atoms and up it runs at most
  --peer-max-steps timed steps; a size whose step, extrapolated linearly in atoms from the
  largest size already run, would take over --peer-max-step-seconds is recorded as
  "skipped (time budget)" with the estimate.
- Ratio = chgnet s/step / fastmlip s/step, both from this run.
- Memory: peak resident set size (getrusage's ru_maxrss; the process is forked from a small
  shell, since Linux carries ru_maxrss across execve and this script is large) at the end of the
  run, and per atom the
  peak at the end minus the peak just before the first force evaluation (model loaded, structure
  built), divided by the atoms: the neighbour lists, per-atom and per-bond buffers and (chgnet)
  autograd's graph, not the libraries or the weights. For LAMMPS both come from `info memory`
  in the same process, for chgnet from getrusage in the worker. Every process also runs under
  a psutil watchdog (resident memory of the process tree, polled every 0.2 s; its peak is kept,
  and for mpirun it sums the ranks) that stops it above --memory-limit-gb.
- Memory scaling (--memory-sizes, fastmlip only): LiMnO2 supercells near each requested atom
  count, <--memory-steps> steps each, peak resident set and KB per atom. A size whose peak,
  extrapolated linearly from the previous one, would exceed 80% of MemAvailable is recorded as
  "skipped (memory)" and so are the larger ones.

Each configuration runs in its own process. The machine is usually shared: the load average is
recorded before and after every run. Timings never go into tests; this script is the only place
they are produced.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import resource
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "common"))
import bench_util  # pylint: disable=wrong-import-position
from bench_util import load, mem_available_mb, now, write_json  # pylint: disable=wrong-import-position

TEMPLATE = HERE / "in.bench.lmp"
LIMNO2_DATA = REPO / "examples" / "limno2" / "limno2.data"
POTENTIAL = REPO / "potentials" / "chgnet-0.3.0.safetensors"
DEFAULT_LMP = pathlib.Path("/root/.cache/fastmlip/lammps/current/install/bin/lmp")
SCHEMA = "fastmlip-bench-chgnet-lammps 1"
SEED = 20261124
TEMPERATURE = 300.0

# name -> (description, provenance) for the JSON and the README; the builders are below.
STRUCTURES = {
    "LiMnO2-8": "orthorhombic LiMnO2 (Pmmn, as Materials Project mp-18767), examples/limno2/limno2.data",
    "Li9Co7O16-32": "constructed: layered LiCoO2 (R-3m, a = 2.816, c = 14.05 A, O z = 0.2604), the 2x2x2 "
                    "supercell of its rhombohedral primitive cell (Li8Co8O16) with the first Co replaced by Li; "
                    "not Materials Project's Li9Co7O16",
    "LiTiPO5-32": "constructed composition stand-in Li4Ti4P4O20 (not the real LiTiOPO4 structure, which is "
                  "not available offline): rock-salt lattice, 2 x 2 x 1 conventional cells with a = 4.51 A "
                  "(3.0 g/cm^3), 16 anion sites O, the 16 cation sites 4 O + 4 Li + 4 Ti + 4 P by a seeded "
                  "permutation, rattled 0.1 A",
    "LiMnO2-1000": "LiMnO2-8 replicated 5 x 5 x 5",
    "LiMnO2-10240": "LiMnO2-8 replicated 16 x 10 x 8",
}
SIZES = {"8": "LiMnO2-8", "32": "Li9Co7O16-32,LiTiPO5-32", "1000": "LiMnO2-1000", "10000": "LiMnO2-10240"}


# ---------------------------------------------------------------------------------------------
# Structures (ase.Atoms)


def limno2():
    """examples/limno2/limno2.data (orthogonal box, atom_style atomic, types Li Mn O). Parsed here:
    ASE's reader takes the word "atoms" in its title line for the atom count."""
    import ase  # pylint: disable=import-outside-toplevel
    lines = [line.split("#")[0].split() for line in LIMNO2_DATA.read_text().splitlines()[1:]]
    edges = {f[3]: float(f[1]) - float(f[0]) for f in lines if len(f) == 4 and f[2].endswith("lo")}
    start = next(i for i, f in enumerate(lines) if f[:1] == ["Atoms"])
    rows = sorted((int(f[0]), int(f[1]), [float(x) for x in f[2:5]]) for f in lines[start + 1:] if len(f) >= 5)
    symbols = [{1: "Li", 2: "Mn", 3: "O"}[t] for _, t, _ in rows]
    return ase.Atoms(symbols=symbols, positions=[p for _, _, p in rows],
                     cell=[edges["xhi"], edges["yhi"], edges["zhi"]], pbc=True)


def li9co7o16():
    from pymatgen.core import Lattice, Structure  # pylint: disable=import-outside-toplevel
    from pymatgen.io.ase import AseAtomsAdaptor  # pylint: disable=import-outside-toplevel
    hexagonal = Structure.from_spacegroup("R-3m", Lattice.hexagonal(2.816, 14.05), ["Li", "Co", "O"],
                                          [[0, 0, 0.5], [0, 0, 0], [0, 0, 0.2604]])
    prim = hexagonal.get_primitive_structure()  # LiCoO2, 4 atoms, rhombohedral
    prim.make_supercell([2, 2, 2])
    s = prim.get_reduced_structure()  # Niggli: a cell LAMMPS' tilt limits accept
    s = s.get_sorted_structure(key=lambda site: (site.specie.Z, *np.round(site.frac_coords, 6)))
    first_co = next(i for i, site in enumerate(s) if site.specie.symbol == "Co")
    s.replace(first_co, "Li")
    return AseAtomsAdaptor.get_atoms(s)


def litipo5():
    """A rock-salt lattice of 32 sites (2 x 2 x 1 conventional cells, a = 4.51 A, which gives
    3.0 g/cm^3 for this composition, LiTiOPO4's being about 2.9): the 16 anion sites are O, of the
    16 cation sites 4 more O, 4 Li, 4 Ti and 4 P, assigned by a seeded permutation chosen so
    that no two of the extra O are nearest neighbours; then rattled by 0.1 A. Not LiTiOPO4's
    structure (Pnma, PO4 tetrahedra, TiO6 chains), only its composition and density."""
    import ase  # pylint: disable=import-outside-toplevel
    a = 4.51
    fcc = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    shifts = np.array([[i, j, 0] for i in range(2) for j in range(2)])
    anions = (fcc[None, :, :] + shifts[:, None, :]).reshape(-1, 3) * a
    cations = anions + np.array([0.5, 0, 0]) * a
    cell = np.diag([2 * a, 2 * a, a])
    inv = np.linalg.inv(cell)

    def min_dist(pts):
        d = pts[:, None, :] - pts[None, :, :]
        f = d @ inv
        f -= np.round(f)
        r = np.linalg.norm(f @ cell, axis=-1)
        r[np.diag_indices(len(pts))] = np.inf
        return r.min()

    for attempt in range(1000):
        order = np.random.default_rng(SEED + attempt).permutation(16)
        extra_o = cations[order[:4]]
        if min_dist(extra_o) > 0.75 * a:  # not nearest neighbours on the cation sublattice (a / sqrt 2)
            break
    symbols = ["Li"] * 4 + ["Ti"] * 4 + ["P"] * 4 + ["O"] * 20
    positions = np.concatenate([cations[order[4:]], anions, extra_o])
    atoms = ase.Atoms(symbols=symbols, positions=positions, cell=cell, pbc=True)
    atoms.rattle(0.1, seed=SEED)
    atoms.wrap()
    atoms.info["construction_attempt"] = attempt
    return atoms


def supercell_near(natoms):
    """LiMnO2-8 replicated to about natoms, the box as near to a cube as the cell allows."""
    base = limno2()
    edges = np.diag(base.cell.array)
    cells = natoms / len(base)
    side = (cells * np.prod(edges)) ** (1.0 / 3.0)
    rep = np.maximum(1, np.round(side / edges)).astype(int)
    # Adjust the shortest-in-atoms direction until the count is as near as one step allows.
    best = rep.copy()
    for d in range(-2, 3):
        for axis in range(3):
            r = rep.copy()
            r[axis] = max(1, r[axis] + d)
            if abs(np.prod(r) - cells) < abs(np.prod(best) - cells):
                best = r
    return base.repeat(tuple(int(x) for x in best)), tuple(int(x) for x in best)


def build(name):
    if name == "LiMnO2-8":
        return limno2()
    if name == "Li9Co7O16-32":
        return li9co7o16()
    if name == "LiTiPO5-32":
        return litipo5()
    if name == "LiMnO2-1000":
        return limno2().repeat((5, 5, 5))
    if name == "LiMnO2-10240":
        return limno2().repeat((16, 10, 8))
    m = re.fullmatch(r"LiMnO2-near-(\d+)", name)
    if m:
        return supercell_near(int(m.group(1)))[0]
    raise SystemExit(f"unknown structure {name!r}")


def describe(atoms):
    from ase.neighborlist import neighbor_list  # pylint: disable=import-outside-toplevel
    mass = atoms.get_masses().sum() * 1.66053906660  # amu -> 1e-24 g
    out = {"natoms": len(atoms), "formula": atoms.get_chemical_formula(mode="metal"),
           "cell_A": np.round(atoms.cell.array, 6).tolist(), "volume_A3": round(float(atoms.get_volume()), 3),
           "density_g_cm3": round(float(mass / atoms.get_volume()), 3)}
    if len(atoms) <= 2000:
        i, d = neighbor_list("id", atoms, 5.0)
        out["min_distance_A"] = round(float(d.min()), 4)
        out["atom_graph_edges_per_atom_5A"] = round(len(i) / len(atoms), 2)
        out["bond_graph_edges_per_atom_3A"] = round(float((d < 3.0).sum()) / len(atoms), 2)
    if "construction_attempt" in atoms.info:
        out["construction_attempt"] = atoms.info["construction_attempt"]
    return out


def species_of(atoms):
    """Element symbols in order of first appearance: LAMMPS types 1, 2, ..."""
    seen = []
    for s in atoms.get_chemical_symbols():
        if s not in seen:
            seen.append(s)
    return seen


def lammps_cell(cell):
    """LAMMPS' restricted triclinic box of a cell: (lx, ly, lz, xy, xz, yz) and the rotation that
    takes Cartesian positions into it. Tilts are brought into LAMMPS' limits by adding lattice
    vectors (the same lattice)."""
    a, b, c = cell
    lx = np.linalg.norm(a)
    ex = a / lx
    xy = b @ ex
    ly = np.linalg.norm(b - xy * ex)
    ey = (b - xy * ex) / ly
    xz, yz = c @ ex, c @ ey
    ez = np.cross(ex, ey)
    lz = c @ ez
    rot = np.array([ex, ey, ez])
    # c -= k b, then c -= k a, b -= k a keep the lattice and bound every tilt by half an edge.
    k = np.round(yz / ly)
    yz, xz = yz - k * ly, xz - k * xy
    xz -= np.round(xz / lx) * lx
    xy -= np.round(xy / lx) * lx
    return (lx, ly, lz, xy, xz, yz), rot


def write_data(path, atoms, title):
    species = species_of(atoms)
    (lx, ly, lz, xy, xz, yz), rot = lammps_cell(atoms.cell.array)
    pos = atoms.positions @ rot.T
    box = np.array([[lx, 0, 0], [xy, ly, 0], [xz, yz, lz]])
    frac = pos @ np.linalg.inv(box)
    pos = (frac - np.floor(frac)) @ box
    from ase.data import atomic_masses, atomic_numbers  # pylint: disable=import-outside-toplevel
    triclinic = max(abs(xy), abs(xz), abs(yz)) > 1e-9
    # Python floats: numpy 2's repr of its scalars is "np.float64(...)", which LAMMPS cannot read.
    lx, ly, lz, xy, xz, yz = (float(v) for v in (lx, ly, lz, xy, xz, yz))
    lines = [f"{title} (benchmarks/chgnet-lammps)", "", f"{len(atoms)} atoms", f"{len(species)} atom types", "",
             f"0 {lx!r} xlo xhi", f"0 {ly!r} ylo yhi", f"0 {lz!r} zlo zhi"]
    if triclinic:
        lines.append(f"{xy!r} {xz!r} {yz!r} xy xz yz")
    lines += ["", "Masses", ""]
    lines += [f"{t + 1} {atomic_masses[atomic_numbers[s]]:.6f}  # {s}" for t, s in enumerate(species)]
    lines += ["", "Atoms # atomic", ""]
    types = [species.index(s) + 1 for s in atoms.get_chemical_symbols()]
    lines += [f"{i + 1} {t} {float(p[0])!r} {float(p[1])!r} {float(p[2])!r}"
              for i, (t, p) in enumerate(zip(types, pos))]
    path.write_text("\n".join(lines) + "\n")
    return species


# ---------------------------------------------------------------------------------------------
# Processes

# The watchdog's settings for every process this script starts (bench_util.run_watched): from the
# repository root, each program forked from a small shell so that its ru_maxrss starts afresh.
WATCHDOG = {"cwd": REPO, "fresh_rusage": True,
            "memory_msg": "stopped: resident memory reached {rss_gb:.1f} GB, over --memory-limit-gb",
            "timeout_msg": "stopped: timed out after {timeout:.0f} s"}


# ---------------------------------------------------------------------------------------------
# fastmlip in LAMMPS


def parse_log(text):
    out = bench_util.lammps_log_header(text)
    blocks = re.findall(r"^\s*Step\s+CPU\s+PotEng\s*\n(.*?)^Loop time", text, re.M | re.S)
    cpu, pe = [], []
    for line in (blocks[-1] if blocks else "").splitlines():
        f = line.split()
        if len(f) == 3 and re.fullmatch(r"-?\d+", f[0]):
            cpu.append(float(f[1]))
            pe.append(float(f[2]))
    out["thermo_cpu"] = cpu
    m = re.search(r"^\s*Step\s+CPU\s+PotEng\s*\n\s*0\s+\S+\s+(\S+)", text, re.M)
    out["pe0_eV"] = float(m.group(1)) if m else None
    loops = re.findall(r"Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms", text)
    if loops:
        t, procs, steps, natoms = loops[-1]
        out.update(loop_time_s=float(t), procs=int(procs), loop_steps=int(steps), natoms=int(natoms))
    m = re.findall(r"([0-9.]+)% CPU use with", text)
    out["cpu_use_pct"] = float(m[-1]) if m else None
    return out


def run_lammps(args, work, name, data, species, precision, steps, ranks=1, timeout=None):
    log = work / f"{name}.log"
    cmd = [str(args.lmp), "-in", str(TEMPLATE), "-log", str(log), "-screen", "none",
           "-var", "plugin", str(args.plugin), "-var", "potential", str(args.potential), "-var", "data", str(data),
           "-var", "precision", precision, "-var", "species", " ".join(species),
           "-var", "warmup", str(args.warmup), "-var", "steps", str(steps)]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np", str(ranks)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS="1")
    rec = {"name": name, "code": "fastmlip", "precision": precision, "ranks": ranks, "steps": steps,
           "warmup_steps": args.warmup, "command": " ".join(cmd), "load_before": load(), "started": now()}
    t0 = time.perf_counter()
    code, _, stderr, killed, peak = bench_util.run_watched(cmd, env, timeout or args.max_config_seconds,
                                                           args.memory_limit_gb * 1024, **WATCHDOG)
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    rec["load_after"] = load()
    rec["watchdog_peak_rss_mb"] = peak
    text = log.read_text(errors="replace") if log.exists() else ""
    rec.update(parse_log(text))
    if killed or code != 0 or "loop_time_s" not in rec or len(rec["thermo_cpu"]) < 2:
        rec["status"] = killed or f"failed (exit {code})"
        rec["stderr_tail"], rec["log_tail"] = stderr[-2000:], text[-3000:]
        rec.pop("thermo_cpu", None)
        return rec
    dt = np.diff(rec.pop("thermo_cpu"))
    rec["step_times_s"] = [round(float(x), 6) for x in dt]
    rec["median_step_s"] = float(np.median(dt))
    rec["mean_step_s"] = rec["loop_time_s"] / rec["loop_steps"]
    rec["ms_per_atom_step"] = 1e3 * rec["median_step_s"] / rec["natoms"]
    if rec["rss_after_mb"] is not None:
        rec["peak_rss_mb"] = rec["rss_after_mb"] if ranks == 1 else peak
        if rec["rss_before_mb"] is not None:
            rec["memory_per_atom_kb"] = (rec["rss_after_mb"] - rec["rss_before_mb"]) * 1024.0 / rec["natoms"]
    rec["status"] = "ok"
    return rec


# ---------------------------------------------------------------------------------------------
# chgnet worker (a separate process per configuration)


def peer_worker(spec):
    """Runs in its own process: ASE VelocityVerlet with CHGNet 0.3.0; prints one JSON line."""
    import torch  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)
    from ase import units  # pylint: disable=import-outside-toplevel
    from ase.calculators.calculator import Calculator, all_changes  # pylint: disable=import-outside-toplevel
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution  # pylint: disable=import-outside-toplevel
    from ase.md.verlet import VelocityVerlet  # pylint: disable=import-outside-toplevel
    from chgnet.model import CHGNet  # pylint: disable=import-outside-toplevel
    from pymatgen.io.ase import AseAtomsAdaptor  # pylint: disable=import-outside-toplevel

    class ChgnetGraphCalculator(Calculator):
        """CHGNetCalculator.calculate of chgnet 0.3.1, with the crystal graph's integer tensors
        cast to int64 (torch 1.13 indexes with int64 only; chgnet's graph converter makes
        int32). Same task ("efsm"), same unit conversions (eV/atom -> eV, GPa -> eV/A^3)."""
        implemented_properties = ["energy", "free_energy", "forces", "stress", "magmoms"]

        def __init__(self, model, **kwargs):
            super().__init__(**kwargs)
            self.model = model
            self.stress_weight = 1 / 160.21766208  # GPa -> eV/A^3, as CHGNetCalculator
            self.graph_seconds = []

        def calculate(self, atoms=None, properties=None, system_changes=all_changes):
            super().calculate(atoms, properties, system_changes)
            t0 = time.perf_counter()
            structure = AseAtomsAdaptor.get_structure(self.atoms)
            graph = self.model.graph_converter(structure)
            graph.atomic_number = graph.atomic_number.long()
            for key in ("atom_graph", "bond_graph", "directed2undirected", "undirected2directed"):
                setattr(graph, key, getattr(graph, key).long())
            self.graph_seconds.append(time.perf_counter() - t0)
            pred = self.model.predict_graph(graph, task="efsm")
            factor = 1 if not self.model.is_intensive else len(self.atoms)
            self.results.update(energy=float(pred["e"]) * factor, free_energy=float(pred["e"]) * factor,
                                forces=np.asarray(pred["f"], dtype=float),
                                stress=np.asarray(pred["s"], dtype=float) * self.stress_weight,
                                magmoms=np.asarray(pred["m"], dtype=float))

    atoms = build(spec["structure"])
    model = CHGNet.load()
    calc = ChgnetGraphCalculator(model)
    atoms.calc = calc
    MaxwellBoltzmannDistribution(atoms, temperature_K=TEMPERATURE, rng=np.random.default_rng(SEED))
    out = {"torch_threads": torch.get_num_threads(), "natoms": len(atoms),
           "graph_converter_algorithm": getattr(model.graph_converter, "algorithm", None),
           "model_dtype": str(next(model.parameters()).dtype),
           "rss_before_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    t0 = time.perf_counter()
    out["energy0_eV"] = float(atoms.get_potential_energy())  # the initial evaluation; MD reuses it
    out["first_eval_s"] = time.perf_counter() - t0
    stamps = []
    dyn = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    dyn.attach(lambda: stamps.append(time.perf_counter()), interval=1)
    dyn.run(spec["warmup"] + spec["steps"])
    out["rss_after_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out["peak_rss_mb"] = out["rss_after_mb"]
    dt = np.diff(stamps)
    out["step_times_s"] = [round(float(x), 6) for x in dt]
    timed = dt[spec["warmup"]:]
    out["timed_steps"] = len(timed)
    out["median_step_s"] = float(np.median(timed))
    out["mean_step_s"] = float(np.mean(timed))
    out["ms_per_atom_step"] = 1e3 * out["median_step_s"] / len(atoms)
    out["median_graph_s"] = float(np.median(calc.graph_seconds[1 + spec["warmup"]:]))
    out["memory_per_atom_kb"] = (out["rss_after_mb"] - out["rss_before_mb"]) * 1024.0 / len(atoms)
    print("RESULT " + json.dumps(out), flush=True)


def run_peer(args, structure, natoms, steps, timeout):
    spec = {"structure": structure, "steps": steps, "warmup": args.warmup}
    cmd, command = bench_util.worker_command(__file__, "--peer-worker", spec)
    rec = {"name": f"chgnet-{structure}", "code": "chgnet", "structure": structure, "natoms": natoms,
           "steps": steps, "warmup_steps": args.warmup, "command": command}
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return bench_util.run_worker(cmd, rec, env, timeout, args.memory_limit_gb * 1024, **WATCHDOG)


# ---------------------------------------------------------------------------------------------
# Machine and software


def machine():
    meminfo = bench_util.meminfo_kb()
    return {"hostname": platform.node(), **bench_util.cpu_info(),
            "mem_total_gb": round(meminfo.get("MemTotal", 0) / 1024 ** 2, 1),
            "mem_available_gb_at_start": round(meminfo.get("MemAvailable", 0) / 1024 ** 2, 1),
            **bench_util.os_info()}


def software(args):
    import ase  # pylint: disable=import-outside-toplevel
    import chgnet  # pylint: disable=import-outside-toplevel
    import pymatgen.core  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    return {"fastmlip_commit": bench_util.git(REPO, "rev-parse", "HEAD"),
            "fastmlip_worktree_dirty": bool(bench_util.git(REPO, "status", "--porcelain", "--untracked-files=no")),
            "plugin": bench_util.file_info(args.plugin),
            "potential": bench_util.file_info(args.potential, mtime=False),
            "lmp": str(args.lmp), "build": bench_util.cmake_cache(args.plugin), "chgnet": chgnet.__version__,
            "torch": torch.__version__, "ase": ase.__version__, "pymatgen": getattr(pymatgen.core, "__version__", None),
            "numpy": np.__version__, "python": platform.python_version(), "mpirun": bench_util.mpirun_version()}


# ---------------------------------------------------------------------------------------------
# Summary


def fmt_s(rec):
    if rec is None:
        return "-"
    if rec.get("status") != "ok":
        est = rec.get("estimated_step_s")
        return f"{rec.get('status')}" + (f" (~{est:.3g})" if est else "")
    return f"{rec['median_step_s']:.4g}"


def fmt_mem(rec):
    if rec is None or rec.get("status") != "ok" or rec.get("peak_rss_mb") is None:
        return "-"
    kb = rec.get("memory_per_atom_kb")
    return f"{rec['peak_rss_mb']:.0f} / {kb:.0f}" if kb is not None else f"{rec['peak_rss_mb']:.0f} / -"


def summary(res):
    out = ["s per MD step (wall clock, median step; one thread; ratio = chgnet / fastmlip, same run):", "",
           "| structure | atoms | fastmlip f32 | fastmlip f64 | chgnet (f32) | ratio f32 | ratio f64 |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    mem = ["peak RSS (MB) / KB per atom (peak added by the run over the peak before the first force "
           "evaluation, / atoms):", "",
           "| structure | atoms | fastmlip f32 | fastmlip f64 | chgnet |", "|---|---:|---:|---:|---:|"]
    for s in res["results"]:
        ours = {p: s["fastmlip"].get(f"{p}/1") for p in ("float32", "float64")}
        peer = s.get("chgnet")
        ratios = []
        for p in ("float32", "float64"):
            r = s.get("ratio", {}).get(p)
            ratios.append(f"**{r:.1f}x**" if r else "-")
        out.append(f"| {s['structure']} | {s['natoms']} | {fmt_s(ours['float32'])} | {fmt_s(ours['float64'])} | "
                   f"{fmt_s(peer)} | {ratios[0]} | {ratios[1]} |")
        mem.append(f"| {s['structure']} | {s['natoms']} | {fmt_mem(ours['float32'])} | {fmt_mem(ours['float64'])} | "
                   f"{fmt_mem(peer)} |")
    out += [""] + mem
    scaling = [(s, k, r) for s in res["results"] for k, r in s["fastmlip"].items() if not k.endswith("/1")]
    if scaling:
        out += ["", "| structure | atoms | precision | ranks | s/step | 1 rank | efficiency |", "|---|---:|---|---:|---:|---:|---:|"]
        for s, k, r in scaling:
            prec, ranks = k.split("/")
            one = s["fastmlip"].get(f"{prec}/1")
            eff = "-"
            if r.get("status") == "ok" and one and one.get("status") == "ok":
                eff = f"{100 * one['median_step_s'] / (int(ranks) * r['median_step_s']):.0f}%"
            out.append(f"| {s['structure']} | {s['natoms']} | {prec} | {ranks} | {fmt_s(r)} | {fmt_s(one)} | {eff} |")
    if res.get("memory_scaling"):
        out += ["", "fastmlip memory scaling (LiMnO2 supercells):", "",
                "| atoms | replication | precision | peak RSS (MB) | KB/atom | s/step |", "|---:|---|---|---:|---:|---:|"]
        for r in res["memory_scaling"]:
            if r.get("status") == "ok":
                out.append(f"| {r['natoms']} | {r['replication']} | {r['precision']} | {r['peak_rss_mb']:.0f} | "
                           f"{r['memory_per_atom_kb']:.1f} | {r['median_step_s']:.4g} |")
            else:
                out.append(f"| {r['natoms']} | {r['replication']} | {r['precision']} | {r['status']} | | |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="8,32,1000,10000",
                    help="comma list of 8 (LiMnO2), 32 (Li9Co7O16 and LiTiPO5 stand-in), 1000, 10000 (LiMnO2 "
                         "supercells), or structure names (%s)" % ", ".join(STRUCTURES))
    ap.add_argument("--steps", type=int, default=5, help="timed MD steps per configuration")
    ap.add_argument("--warmup", type=int, default=2, help="MD steps before the timed ones (not timed)")
    ap.add_argument("--precision", default="both", choices=["float32", "float64", "both"])
    ap.add_argument("--ranks", default="1", help="comma list of MPI rank counts for fastmlip, e.g. 1,2")
    ap.add_argument("--quick", action="store_true", help="LiMnO2-8 only, 2 steps, 1 warm-up: a smoke test")
    ap.add_argument("--skip", default="", help="comma list of fastmlip, chgnet")
    ap.add_argument("--peer-max-steps", type=int, default=3,
                    help="at most this many timed chgnet steps at --peer-limit-steps-from atoms and up")
    ap.add_argument("--peer-limit-steps-from", type=int, default=1000)
    ap.add_argument("--peer-max-step-seconds", type=float, default=600.0,
                    help="skip chgnet at a size whose step would take longer (linear extrapolation)")
    ap.add_argument("--peer-ms-per-atom-guess", type=float, default=100.0,
                    help="chgnet ms per atom-step assumed before any size has run")
    ap.add_argument("--memory-sizes", default="",
                    help="memory-scaling mode (fastmlip only), comma list of atom counts, e.g. 1000,4000,10000")
    ap.add_argument("--memory-steps", type=int, default=1)
    ap.add_argument("--max-config-seconds", type=float, default=3600.0, help="watchdog time limit per process")
    ap.add_argument("--memory-limit-gb", type=float, default=0.8 * mem_available_mb() / 1024.0,
                    help="watchdog memory limit per process tree (default 80%% of MemAvailable)")
    ap.add_argument("--lmp", type=pathlib.Path, default=DEFAULT_LMP if DEFAULT_LMP.exists() else REPO / "build/bin/lmp")
    ap.add_argument("--plugin", type=pathlib.Path, default=REPO / "build/lib/fastmlipplugin.so")
    ap.add_argument("--potential", type=pathlib.Path, default=POTENTIAL)
    ap.add_argument("--json", default=None, help="results file (default benchmarks/chgnet-lammps/results-<date>.json)")
    ap.add_argument("--peer-worker", help=argparse.SUPPRESS)
    return ap.parse_args()


def structures_for(sizes):
    names = []
    for s in sizes.split(","):
        s = s.strip()
        for n in (SIZES[s].split(",") if s in SIZES else [s]):
            if n not in STRUCTURES:
                raise SystemExit(f"--sizes: unknown {s!r}; use {', '.join(SIZES)} or {', '.join(STRUCTURES)}")
            if n not in names:
                names.append(n)
    return names


def main():
    args = parse_args()
    if args.peer_worker:
        peer_worker(json.loads(args.peer_worker))
        return
    if args.quick:
        args.sizes, args.steps, args.warmup = "8", 2, 1
    precisions = ["float32", "float64"] if args.precision == "both" else [args.precision]
    ranks = [int(r) for r in args.ranks.split(",")]
    skip = {s for s in args.skip.split(",") if s}
    names = structures_for(args.sizes) if args.sizes else []
    date = datetime.date.today().isoformat()
    json_path = pathlib.Path(args.json) if args.json else HERE / f"results-{date}.json"

    res = {"schema": SCHEMA, "date": date, "started": now(), "command": " ".join(sys.argv),
           "machine": machine(), "software": software(args),
           "settings": {"steps": args.steps, "warmup": args.warmup, "precisions": precisions, "ranks": ranks,
                        "timestep_fs": 1.0, "temperature_K": TEMPERATURE, "ensemble": "NVE",
                        "threads_per_rank": 1, "peer_max_steps": args.peer_max_steps,
                        "peer_limit_steps_from": args.peer_limit_steps_from,
                        "peer_max_step_seconds": args.peer_max_step_seconds,
                        "memory_limit_gb": round(args.memory_limit_gb, 2), "quick": args.quick},
           "structures": {}, "results": [], "memory_scaling": []}
    t_start = time.time()

    def log(msg):
        print(f"[{now()}] {msg}", file=sys.stderr, flush=True)

    def save():
        write_json(json_path, res)  # partial results survive an interrupted run

    with tempfile.TemporaryDirectory(prefix="fastmlip-chgnet-bench-") as tmp:
        work = pathlib.Path(tmp)
        peer_ms_per_atom = None  # from the largest size chgnet has run
        for name in names:
            atoms = build(name)
            data = work / f"{name}.data"
            species = write_data(data, atoms, name)
            info = dict(describe(atoms), provenance=STRUCTURES[name], lammps_types=species)
            res["structures"][name] = info
            log(f"{name}: {info}")
            entry = {"structure": name, "natoms": len(atoms), "fastmlip": {}, "chgnet": None, "ratio": {}}
            res["results"].append(entry)
            if "fastmlip" not in skip:
                for prec in precisions:
                    for nr in ranks:
                        rec = run_lammps(args, work, f"fastmlip-{name}-{prec}-{nr}rank", data, species, prec,
                                         args.steps, nr)
                        entry["fastmlip"][f"{prec}/{nr}"] = rec
                        log(f"{rec['name']}: {fmt_s(rec)} s/step, peak RSS / KB per atom {fmt_mem(rec)} "
                            f"(load {rec['load_before']} -> {rec['load_after']}, {rec['wall_s']} s)")
                        save()
            if "chgnet" not in skip:
                n = len(atoms)
                steps = min(args.steps, args.peer_max_steps) if n >= args.peer_limit_steps_from else args.steps
                est = n * (peer_ms_per_atom or args.peer_ms_per_atom_guess) / 1e3
                if est > args.peer_max_step_seconds:
                    rec = {"name": f"chgnet-{name}", "code": "chgnet", "natoms": n, "status": "skipped (time budget)",
                           "estimated_step_s": est,
                           "reason": f"estimated {est:.0f} s per step (linear in atoms from "
                                     f"{'the largest size run' if peer_ms_per_atom else '--peer-ms-per-atom-guess'}), "
                                     f"over --peer-max-step-seconds {args.peer_max_step_seconds:.0f}"}
                else:
                    # initial evaluation + warm-up + timed steps, at three times the estimate, and model loading
                    rec = run_peer(args, name, n, steps, timeout=3 * est * (1 + args.warmup + steps) + 300)
                    if rec["status"] == "ok":
                        peer_ms_per_atom = max(peer_ms_per_atom or 0.0, rec["ms_per_atom_step"])
                entry["chgnet"] = rec
                log(f"{rec['name']}: {fmt_s(rec)} s/step, peak RSS / KB per atom {fmt_mem(rec)}"
                    + (f" (load {rec['load_before']} -> {rec['load_after']}, {rec['wall_s']} s)" if "wall_s" in rec else ""))
            peer = entry["chgnet"]
            for prec in precisions:
                ours = entry["fastmlip"].get(f"{prec}/1")
                if ours and peer and ours.get("status") == "ok" and peer.get("status") == "ok":
                    entry["ratio"][prec] = peer["median_step_s"] / ours["median_step_s"]
            # Same positions at step 0, so the energies must agree (a check that both ran the same
            # model on the same structure; chgnet evaluates in float32).
            for prec in precisions:
                ours = entry["fastmlip"].get(f"{prec}/1")
                if ours and peer and ours.get("pe0_eV") is not None and peer.get("energy0_eV") is not None:
                    entry.setdefault("energy_check", {})[prec] = {
                        "fastmlip_eV": ours["pe0_eV"], "chgnet_eV": peer["energy0_eV"],
                        "abs_diff_per_atom_eV": abs(ours["pe0_eV"] - peer["energy0_eV"]) / entry["natoms"]}
            save()

        # Memory scaling, fastmlip only: increasing LiMnO2 supercells, stop before memory runs out.
        prev = None
        stop = None
        for target in [int(x) for x in args.memory_sizes.split(",") if x.strip()]:
            atoms, rep = supercell_near(target)
            n = len(atoms)
            for prec in precisions:
                rec = {"name": f"memory-{n}-{prec}", "natoms": n, "replication": "x".join(map(str, rep)),
                       "precision": prec}
                p = prev.get(prec) if prev else None
                if stop is None and p is not None and p.get("memory_per_atom_kb") is not None:
                    predicted = p["peak_rss_mb"] + p["memory_per_atom_kb"] * (n - p["natoms"]) / 1024.0
                    avail = mem_available_mb()
                    rec["predicted_peak_rss_mb"] = round(predicted, 1)
                    if predicted > 0.8 * avail:
                        stop = (f"skipped (memory): predicted peak {predicted / 1024:.1f} GB over 80% of "
                                f"MemAvailable {avail / 1024:.1f} GB")
                if stop is not None:
                    rec["status"] = stop
                else:
                    data = work / f"memory-{n}.data"
                    if not data.exists():
                        write_data(data, atoms, f"LiMnO2 {rec['replication']}")
                    rec.update(run_lammps(args, work, rec["name"], data, species_of(atoms), prec, args.memory_steps))
                    rec["replication"] = "x".join(map(str, rep))
                    if rec["status"] == "ok":
                        prev = dict(prev or {}, **{prec: rec})
                res["memory_scaling"].append(rec)
                log(f"{rec['name']}: {rec['status']}" + (f", peak RSS / KB per atom {fmt_mem(rec)}"
                                                         if rec.get("status") == "ok" else ""))
                save()

    res["finished"] = now()
    res["total_wall_s"] = round(time.time() - t_start, 1)
    res["summary_markdown"] = summary(res)
    save()
    log(f"wrote {json_path}")
    print(res["summary_markdown"])


if __name__ == "__main__":
    main()

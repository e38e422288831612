# SPDX-License-Identifier: MIT
"""Parity fixtures of the trainer's dataset statistics against mace-torch's own functions.

Pinned: mace-torch 0.3.13, ase 3.22.1 and numpy 1.24.2 (Debian bookworm's), torch from the venv
(tests/reference/setup-venv.sh).

Writes tests/reference/data/trainer/:

* stats.xyz -- a small labelled extended-XYZ file written here from a seeded numpy generator:
  Cu/Ni/Al periodic bulk cells (9-value and Voigt-6 stresses), a slab periodic in a and b only,
  an open cluster, frames with config_weight / config_type / config_forces_weight, a lone atom
  with no neighbour within r_max. Labels are under mace-torch's default keys (REF_energy,
  REF_forces, REF_stress) so ASE leaves them in info/arrays.
* stats.json -- what mace-torch computes from it, each number printed with 17 significant
  digits:
  - e0s: data.compute_average_E0s (np.linalg.lstsq over element counts);
  - avg_num_neighbors: modules.compute_avg_num_neighbors over a DataLoader of every frame
    (r_max below), edges from mace's get_neighborhood (matscipy);
  - std_scaling: modules.compute_mean_std_atomic_inter_energy -> mean, std;
  - rms_forces_scaling: modules.compute_mean_rms_energy_forces -> mean, rms;
  - weights: per frame (config_weight * config_type_weights, energy/forces/stress weights) as
    data.config_from_atoms reads them;
  - e0s_given: the same statistics with fixed E0s ({13: -3.5, 28: -5.25, 29: -4.0}).
  The DataLoader keeps every frame (batch_size 4, drop_last=False, no shuffle): mace_run_train
  drops the last incomplete batch of a shuffled epoch, the C++ side never drops any.

tests/trainer/test_statistics.cpp compares to stats.json at 1e-10 relative. CI never runs this
script; the files are committed. To regenerate:

    tests/reference/setup-venv.sh                        # once
    .venv/bin/python tests/reference/make_trainer_data_fixtures.py
"""
import json
import os

import numpy as np
import torch

from mace import data, modules, tools
from mace.tools import torch_geometric

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "trainer")
R_MAX = 4.0
CONFIG_TYPE_WEIGHTS = {"Default": 1.0, "bulk": 2.0}
GIVEN_E0S = {13: -3.5, 28: -5.25, 29: -4.0}


def fmt(x):
    return "%.17g" % x


def frame_text(symbols, pos, energy, forces, cell=None, pbc=None, stress=None, info=None):
    head = []
    if cell is not None:
        head.append('Lattice="' + " ".join(fmt(v) for v in cell.reshape(-1)) + '"')
    head.append("Properties=species:S:1:pos:R:3:REF_forces:R:3")
    head.append("REF_energy=" + fmt(energy))
    if stress is not None:
        head.append('REF_stress="' + " ".join(fmt(v) for v in stress) + '"')
    for k, v in (info or {}).items():
        head.append(f"{k}={v}")
    if pbc is not None:
        head.append('pbc="' + " ".join("T" if p else "F" for p in pbc) + '"')
    lines = [str(len(symbols)), " ".join(head)]
    for s, p, f in zip(symbols, pos, forces):
        lines.append(" ".join([s] + [fmt(v) for v in p] + [fmt(v) for v in f]))
    return "\n".join(lines) + "\n"


def make_xyz(path):
    rng = np.random.default_rng(20260307)
    e_atom = {"Al": -3.4, "Ni": -5.3, "Cu": -3.9}
    frames = []

    def labels(symbols):
        n = len(symbols)
        energy = sum(e_atom[s] for s in symbols) + rng.normal(0.0, 0.05) * n
        forces = rng.normal(0.0, 0.4, size=(n, 3))
        return energy, forces

    def fcc(a, reps, symbols_pool, jitter=0.08):
        basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
        pts = []
        for i in range(reps[0]):
            for j in range(reps[1]):
                for k in range(reps[2]):
                    for b in basis:
                        pts.append((np.array([i, j, k]) + b) * a)
        pos = np.array(pts) + rng.normal(0.0, jitter, size=(len(pts), 3))
        cell = np.diag([a * r for r in reps]).astype(float)
        symbols = [symbols_pool[rng.integers(len(symbols_pool))] for _ in pts]
        return symbols, pos, cell

    # Periodic bulk, 9-value stress, config_type bulk (weight 2 from config_type_weights).
    for reps, pool in [((1, 1, 1), ["Cu"]), ((2, 1, 1), ["Cu", "Ni"]), ((1, 2, 2), ["Ni", "Al", "Cu"])]:
        symbols, pos, cell = fcc(3.6, reps, pool)
        cell[0, 1] = 0.3  # triclinic
        energy, forces = labels(symbols)
        s = rng.normal(0.0, 0.01, size=(3, 3))
        s = 0.5 * (s + s.T)
        frames.append(frame_text(symbols, pos, energy, forces, cell, (True, True, True), s.reshape(-1),
                                 {"config_type": "bulk"}))
    # Periodic bulk with Voigt stress and a config_weight.
    symbols, pos, cell = fcc(3.55, (1, 1, 2), ["Ni", "Cu"])
    energy, forces = labels(symbols)
    frames.append(frame_text(symbols, pos, energy, forces, cell, (True, True, True),
                             rng.normal(0.0, 0.01, size=6), {"config_weight": "0.5"}))
    # Slab: periodic in a and b, open along c.
    symbols, pos, cell = fcc(3.6, (2, 2, 1), ["Cu", "Al"])
    cell[2, 2] = 20.0
    energy, forces = labels(symbols)
    frames.append(frame_text(symbols, pos, energy, forces, cell, (True, True, False), None,
                             {"config_type": "slab", "config_forces_weight": "3.0"}))
    # Open cluster, no cell.
    symbols, pos, _ = fcc(3.6, (1, 1, 1), ["Ni", "Al", "Cu"])
    pos = np.vstack([pos, pos + [0.0, 0.0, 3.6]])
    symbols = symbols + symbols[::-1]
    energy, forces = labels(symbols)
    frames.append(frame_text(symbols, pos, energy, forces, None, None, None, {"config_type": "cluster"}))
    # A lone atom far from everything in a large open box (no neighbour within r_max).
    energy, forces = labels(["Cu"])
    frames.append(frame_text(["Cu"], np.array([[1.0, 2.0, 3.0]]), energy, forces * 0.0,
                             np.diag([10.0, 10.0, 10.0]), (False, False, False)))
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(frames))


def statistics(configs, z_table, e0s):
    atomic_energies = np.array([e0s[z] for z in z_table.zs])
    dataset = [data.AtomicData.from_config(c, z_table=z_table, cutoff=R_MAX) for c in configs]
    loader = torch_geometric.dataloader.DataLoader(dataset=dataset, batch_size=4, shuffle=False, drop_last=False)
    avg = modules.compute_avg_num_neighbors(loader)
    mean_s, std = modules.compute_mean_std_atomic_inter_energy(loader, atomic_energies)
    mean_r, rms = modules.compute_mean_rms_energy_forces(loader, atomic_energies)
    return {
        "avg_num_neighbors": fmt(avg),
        "std_scaling": {"mean": fmt(float(np.asarray(mean_s).reshape(-1)[0])),
                        "std": fmt(float(np.asarray(std).reshape(-1)[0]))},
        "rms_forces_scaling": {"mean": fmt(float(np.asarray(mean_r).reshape(-1)[0])),
                               "std": fmt(float(np.asarray(rms).reshape(-1)[0]))},
    }


def main():
    torch.set_default_dtype(torch.float64)
    os.makedirs(OUT, exist_ok=True)
    xyz = os.path.join(OUT, "stats.xyz")
    make_xyz(xyz)
    keyspec = data.KeySpecification.from_defaults()
    _, configs = data.load_from_xyz(xyz, key_specification=keyspec, config_type_weights=CONFIG_TYPE_WEIGHTS)
    z_table = tools.get_atomic_number_table_from_zs(z for c in configs for z in c.atomic_numbers)
    e0s = data.compute_average_E0s(configs, z_table)
    out = {
        "source": "tests/reference/make_trainer_data_fixtures.py (mace-torch 0.3.13)",
        "r_max": R_MAX,
        "config_type_weights": CONFIG_TYPE_WEIGHTS,
        "e0s": {str(z): fmt(e) for z, e in e0s.items()},
        "average": statistics(configs, z_table, e0s),
        "e0s_given": statistics(configs, z_table, GIVEN_E0S),
        "weights": [{"weight": fmt(c.weight),
                     "energy": fmt(c.property_weights["energy"]),
                     "forces": fmt(c.property_weights["forces"]),
                     "stress": fmt(c.property_weights["stress"]),
                     "virials": fmt(c.property_weights["virials"]),
                     "config_type": c.config_type} for c in configs],
    }
    with open(os.path.join(OUT, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: MIT
"""A synthetic labelled extended-XYZ dataset with the MACE paper's Table 3 size distribution.

    build/bin/fastmlip-pack --synthetic table3:26508 --write-sizes sizes.txt > /dev/null
    .venv/bin/python benchmarks/trainer/make_synthetic_dataset.py --sizes sizes.txt --output synth.xyz

For the data-pipeline benchmarks of train-potential (preprocessing, start-up, memory per rank:
benchmarks/trainer/run_dataset_bench.py), where what matters is the number of frames, their
atom counts and the bytes per atom of a realistic file, not the physics of the labels. Each
frame takes its atom count from the size list (fastmlip-pack's `table3:N`: Table 3's eight
sources in proportion, MPtrj's long-tailed sizes included) and is a periodic cubic cell at 12 A^3
per atom whose atoms sit on randomly chosen sites of a simple-cubic grid of 2.29 A, jittered by up
to 0.2 A (so no two atoms come closer than about 1.9 A), with elements drawn from ten. Labels:
the energy is a per-element reference plus noise, forces and stress are random; every label is
finite, and the file reads as any extxyz does. Ten IsolatedAtom frames (one atom of each element,
the energy its reference) come first. Deterministic in --seed. numpy only.
"""
import argparse
import os
import sys

import numpy as np

ELEMENTS = ["H", "C", "N", "O", "Li", "Mg", "Si", "Fe", "Cu", "Ni"]
E0 = np.array([-1.1, -8.0, -8.3, -4.9, -1.9, -1.5, -5.4, -8.3, -3.7, -5.5])
SPACING = 2.29  # A: 12 A^3 per site


def read_sizes(path):
    atoms = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                atoms.append(int(line[0]))
    return atoms


def frame(rng, n, index):
    k = int(np.ceil(n ** (1.0 / 3.0) - 1e-9))
    while k ** 3 < n:
        k += 1
    sites = rng.choice(k ** 3, size=n, replace=False)
    grid = np.stack([sites // (k * k), (sites // k) % k, sites % k], axis=1).astype(float)
    pos = (grid + 0.5) * SPACING + rng.uniform(-0.2, 0.2, size=(n, 3))
    z = rng.integers(0, len(ELEMENTS), size=n)
    energy = float(E0[z].sum() + rng.normal(0.0, 0.05 * np.sqrt(n)))
    forces = rng.normal(0.0, 0.3, size=(n, 3))
    s = rng.normal(0.0, 2e-3, size=(3, 3))
    stress = (s + s.T) / 2
    a = k * SPACING
    out = [str(n)]
    out.append(
        f'Lattice="{a:.6f} 0 0 0 {a:.6f} 0 0 0 {a:.6f}" pbc="T T T" '
        "Properties=species:S:1:pos:R:3:REF_forces:R:3 "
        f"REF_energy={energy:.10f} "
        'REF_stress="' + " ".join(f"{v:.8e}" for v in stress.ravel()) + '" '
        f"config_type={'bulk' if index % 3 else 'Default'}"
    )
    for i in range(n):
        p, f = pos[i], forces[i]
        out.append(
            f"{ELEMENTS[z[i]]} {p[0]:.8f} {p[1]:.8f} {p[2]:.8f} {f[0]:.8f} {f[1]:.8f} {f[2]:.8f}"
        )
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", required=True, help="size list (fastmlip-pack --write-sizes)")
    ap.add_argument("--output", required=True)
    ap.add_argument("--seed", type=int, default=20261128)
    args = ap.parse_args()
    atoms = read_sizes(args.sizes)
    if not atoms or min(atoms) < 1:
        sys.exit(f"{args.sizes}: no sizes, or a graph of no atoms")
    rng = np.random.default_rng(args.seed)
    tmp = args.output + ".partial"
    with open(tmp, "w") as f:
        # One IsolatedAtom frame per element first, as MACE training sets carry them: both
        # trainers take them as E0s (mace_prepare_data 0.3.13 needs some for its statistics).
        for k, el in enumerate(ELEMENTS):
            f.write(f'1\nLattice="20 0 0 0 20 0 0 0 20" pbc="F F F" Properties=species:S:1:pos:R:3:REF_forces:R:3 '
                    f"REF_energy={E0[k]:.10f} config_type=IsolatedAtom\n{el} 10 10 10 0 0 0\n")
        for index, n in enumerate(atoms):
            f.write(frame(rng, n, index))
    os.replace(tmp, args.output)
    print(f"{args.output}: {len(atoms)} frames, {sum(atoms)} atoms, and {len(ELEMENTS)} IsolatedAtom frames")


if __name__ == "__main__":
    main()

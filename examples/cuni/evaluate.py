# SPDX-License-Identifier: MIT
"""Evaluate Cu-Ni MACE potentials against the EAM they were trained on, with LAMMPS.

    python3 examples/cuni/evaluate.py                                   # the shipped potential
    python3 examples/cuni/evaluate.py --potential examples/cuni/run/cuni-mace-small.safetensors \\
        --potential potentials/cuni-mace-small.safetensors              # two side by side
    python3 examples/cuni/evaluate.py --json results.json --nve-steps 2000

Prints one table, a column per potential and one for the EAM (Onat and Durukanoglu's
CuNi.eam.alloy, which labelled the data):

* test set (examples/cuni/data/test.xyz, written by split_dataset.py): RMSE of the energy per
  atom and of the force components, and the largest force error, against the EAM labels. Each
  frame is written as a LAMMPS data file and evaluated with `run 0`; the EAM column runs the
  same frames through the same path, so its (near-zero) errors check the conversion itself.
* fcc Cu and Ni: lattice constant and cohesive energy. 3x3x3 conventional cells relaxed at zero
  pressure (fix box/relax iso 0 + minimize); cohesive energy = E(isolated atom) - E(bulk)/atom,
  where E(isolated atom) is the potential's own energy of one atom alone in a 30 A box: for a
  MACE that is the element's E0 plus the scale-shift model's per-atom shift (the interaction
  energy of an atom without neighbours is the shift alone); for the EAM it is 0.
* NVE stability: examples/cuni/in.cuni-md (Cu50Ni50, 600 K NVT, then NVE) with the potential;
  drift = slope of a least-squares line through the total energy per atom, sampled every 100
  steps (0.1 ps) of the NVE stage, in eV/atom/ps. The EAM column runs the same input with
  pair_style eam/alloy.

Standard library only; needs build/bin/lmp and the plugin build/lib/fastmlipplugin.so.
"""
import argparse
import json
import math
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "cuni"))
import split_dataset  # noqa: E402  (its frame reader)  pylint: disable=wrong-import-position
MASS = {"Cu": 63.546, "Ni": 58.693}
TYPE = {"Cu": 1, "Ni": 2}  # pair_coeff * * FILE Cu Ni
FCC_GUESS = {"Cu": 3.615, "Ni": 3.52}  # A, starting points of the relaxation


def parse_comment(line):
    """key=value pairs of an extended XYZ comment line (values may be double-quoted)."""
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
            for m in re.finditer(r'(\w+)=(?:"([^"]*)"|(\S+))', line)}


def read_xyz(path):
    """Frames of an extended XYZ file: dicts with cell (9 floats), symbols, positions, forces, energy."""
    frames, line = [], 1
    for lines in split_dataset.read_frames(path):
        info = parse_comment(lines[1])
        cols, offset = {}, 0
        fields = info["Properties"].split(":")
        for name, _, width in zip(fields[0::3], fields[1::3], fields[2::3]):
            cols[name] = (offset, int(width))
            offset += int(width)
        rows = [row.split() for row in lines[2:]]

        def column(name, rows=rows):
            start, width = cols[name]
            return [[float(x) for x in r[start:start + width]] for r in rows]

        frames.append({"where": f"{path}:{line}", "cell": [float(x) for x in info["Lattice"].split()],
                       "symbols": [r[cols["species"][0]] for r in rows], "positions": column("pos"),
                       "forces": column("forces"), "energy": float(info["energy"])})
        line += len(lines)
    return frames


def data_file(frame):
    """A LAMMPS data file of the frame. The generator writes cells in LAMMPS' own lower-triangular
    form (a along x, b in the xy plane), so the box is the cell as it is and no rotation is needed."""
    ax, ay, az, bx, by, bz, cx, cy, cz = frame["cell"]
    if ay != 0 or az != 0 or bz != 0:
        sys.exit(f"{frame['where']}: the Lattice is not lower-triangular (a_y, a_z, b_z = {ay}, {az}, {bz}); "
                 "this script expects fastmlip-cuni-dataset's cells")
    out = [f"frame {frame['where']}", "", f"{len(frame['symbols'])} atoms", "2 atom types",
           f"0 {ax!r} xlo xhi", f"0 {by!r} ylo yhi", f"0 {cz!r} zlo zhi", f"{bx!r} {cx!r} {cy!r} xy xz yz", "",
           "Masses", "", f"1 {MASS['Cu']}", f"2 {MASS['Ni']}", "", "Atoms # atomic", ""]
    for k, (s, p) in enumerate(zip(frame["symbols"], frame["positions"])):
        out.append(f"{k + 1} {TYPE[s]} {p[0]!r} {p[1]!r} {p[2]!r}")
    return "\n".join(out) + "\n"


class Lammps:
    """Runs LAMMPS inputs for one pair style (a fastmlip MACE file, or the EAM)."""

    def __init__(self, args, potential=None):
        self.args, self.potential = args, potential

    def setup(self):
        """Commands after `clear`: the plugin (it does not survive `clear`) and units."""
        lines = [f"plugin load {self.args.plugin}"] if self.potential else []
        return "\n".join(lines + ["units metal", "atom_style atomic", "atom_modify map array"]) + "\n"

    def pair(self):
        if self.potential:
            return f"pair_style fastmlip/mace\npair_coeff * * {self.potential} Cu Ni\n"
        return f"pair_style eam/alloy\npair_coeff * * {self.args.eam} Cu Ni\n"

    def run(self, script, workdir, extra=()):
        path = pathlib.Path(workdir) / "in.lmp"
        path.write_text(script)
        cmd = [self.args.lmp, "-in", str(path), "-log", str(pathlib.Path(workdir) / "log.lammps"), "-screen", "none",
               *extra]
        done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
        log_file = pathlib.Path(workdir) / "log.lammps"
        log = log_file.read_text() if log_file.exists() else ""
        if done.returncode != 0:
            errors = [l for l in (log + done.stdout + done.stderr).splitlines() if "ERROR" in l]
            sys.exit(f"LAMMPS failed ({shlex.join(cmd)} in {workdir}): {errors[-1] if errors else done.stderr[-500:]}")
        return log


def test_errors(lmp, frames, workdir):
    """RMSE of energy/atom (meV), of force components (meV/A), largest |force error| (meV/A)."""
    for k, frame in enumerate(frames):
        (workdir / f"frame_{k + 1}.data").write_text(data_file(frame))
    script = (f"variable i loop {len(frames)}\nlabel loop\nclear\n" + lmp.setup() + "read_data frame_${i}.data\n"
              + lmp.pair() + "run 0 post no\n"
              "write_dump all custom forces_${i}.dump id fx fy fz modify sort id format float %.17g\n"
              'print "${i} $(pe:%.17g)" append energies.txt screen no\nnext i\njump SELF loop\n')
    lmp.run(script, workdir)
    energies = {int(a): float(b) for a, b in (l.split() for l in (workdir / "energies.txt").read_text().splitlines())}
    de2, df2, nf, fmax = 0.0, 0.0, 0, 0.0
    for k, frame in enumerate(frames):
        n = len(frame["symbols"])
        de2 += ((energies[k + 1] - frame["energy"]) / n) ** 2
        rows = (workdir / f"forces_{k + 1}.dump").read_text().splitlines()[9:]
        for row, ref in zip(rows, frame["forces"]):
            f = [float(x) for x in row.split()[1:4]]
            d = [a - b for a, b in zip(f, ref)]
            df2 += sum(x * x for x in d)
            fmax = max(fmax, math.sqrt(sum(x * x for x in d)))
            nf += 3
    return {"test_rmse_e_meV_per_atom": 1000 * math.sqrt(de2 / len(frames)),
            "test_rmse_f_meV_per_A": 1000 * math.sqrt(df2 / nf), "test_max_f_error_meV_per_A": 1000 * fmax}


def fcc(lmp, element, workdir):
    """Zero-pressure fcc lattice constant (A), bulk energy per atom and isolated-atom energy (eV)."""
    script = (lmp.setup() + f"lattice fcc {FCC_GUESS[element]}\nregion box block 0 3 0 3 0 3\ncreate_box 2 box\n"
              f"create_atoms {TYPE[element]} box\nmass 1 {MASS['Cu']}\nmass 2 {MASS['Ni']}\n" + lmp.pair()
              + "thermo_style custom step pe lx press\nfix relax all box/relax iso 0.0 vmax 0.001\n"
              "minimize 0 1e-12 2000 20000\n"
              'print "BULK $(lx/3:%.10f) $(pe/atoms:%.10f) $(press:%.4f)"\n'
              "clear\n" + lmp.setup() + "region box block 0 30 0 30 0 30 units box\ncreate_box 2 box\n"
              f"create_atoms {TYPE[element]} single 15 15 15 units box\nmass 1 {MASS['Cu']}\nmass 2 {MASS['Ni']}\n"
              + lmp.pair() + 'run 0 post no\nprint "ATOM $(pe:%.10f)"\n')
    log = lmp.run(script, workdir)
    bulk = [l.split() for l in log.splitlines() if l.startswith("BULK ")][-1]
    atom = [l.split() for l in log.splitlines() if l.startswith("ATOM ")][-1]
    a, e_bulk, press, e_atom = float(bulk[1]), float(bulk[2]), float(bulk[3]), float(atom[1])
    if abs(press) > 100:
        print(f"warning: fcc {element}: the relaxation ended at {press} bar, not 0", file=sys.stderr)
    return {f"{element}_a_A": a, f"{element}_Ecoh_eV": e_atom - e_bulk, f"{element}_E_isolated_eV": e_atom}


def nve_drift(lmp, args, workdir):
    """eV/atom/ps of the example's NVE stage, and its largest excursion (eV/atom)."""
    vars_ = ["-var", "plugin", args.plugin, "-var", "cells", str(args.cells), "-var", "nvt_steps", str(args.nvt_steps),
             "-var", "nve_steps", str(args.nve_steps)]
    example = (REPO / "examples/cuni/in.cuni-md").read_text()
    if lmp.potential:
        vars_ += ["-var", "potential", lmp.potential]
    else:  # the same input with the EAM: only the pair style lines differ
        example = example.replace("plugin load     ${plugin}", "")
        example = re.sub(r"^if .*pair_style fastmlip/mace.*$", "pair_style eam/alloy", example, flags=re.M)
        example = re.sub(r"^pair_coeff .*$", f"pair_coeff * * {args.eam} Cu Ni", example, flags=re.M)
    log = lmp.run(example, workdir, vars_)
    # Thermo blocks: the first run is NVT, the second NVE. Columns: step time temp pe ke etotal press vol.
    blocks, current = [], None
    for line in log.splitlines():
        if line.split()[:2] == ["Step", "Time"]:
            current = []
            blocks.append(current)
        elif current is not None:
            parts = line.split()
            if len(parts) == 8 and re.fullmatch(r"\d+", parts[0]):
                current.append((float(parts[1]), float(parts[5])))
            elif line.startswith("Loop time"):
                current = None
    natoms = 4 * args.cells ** 3
    t, e = [p[0] for p in blocks[-1]], [p[1] / natoms for p in blocks[-1]]
    tm, em = sum(t) / len(t), sum(e) / len(e)
    slope = sum((a - tm) * (b - em) for a, b in zip(t, e)) / sum((a - tm) ** 2 for a in t)
    return {"nve_drift_eV_per_atom_ps": slope, "nve_excursion_eV_per_atom": max(abs(x - e[0]) for x in e),
            "nve_ps": t[-1] - t[0]}


def default_eam():
    """CuNi.eam.alloy of the LAMMPS source tree the build used (LAMMPS_SOURCE_DIR in the CMake cache)."""
    cache = REPO / "build" / "CMakeCache.txt"
    if cache.exists():
        m = re.search(r"^LAMMPS_SOURCE_DIR:\w+=(.*)$", cache.read_text(), flags=re.M)
        if m:
            return str(pathlib.Path(m.group(1)).parent / "potentials" / "CuNi.eam.alloy")
    return None


ROWS = [  # key, label, format
    ("test_rmse_e_meV_per_atom", "test RMSE E/atom (meV)", "{:.2f}"),
    ("test_rmse_f_meV_per_A", "test RMSE F (meV/A)", "{:.1f}"),
    ("test_max_f_error_meV_per_A", "test max |F error| (meV/A)", "{:.1f}"),
    ("Cu_a_A", "fcc Cu a (A)", "{:.4f}"),
    ("Ni_a_A", "fcc Ni a (A)", "{:.4f}"),
    ("Cu_Ecoh_eV", "fcc Cu E_coh (eV/atom)", "{:.4f}"),
    ("Ni_Ecoh_eV", "fcc Ni E_coh (eV/atom)", "{:.4f}"),
    ("Cu_E_isolated_eV", "Cu isolated atom (eV)", "{:.4f}"),
    ("Ni_E_isolated_eV", "Ni isolated atom (eV)", "{:.4f}"),
    ("nve_drift_eV_per_atom_ps", "NVE drift (eV/atom/ps)", "{:.2e}"),
    ("nve_excursion_eV_per_atom", "NVE largest excursion (eV/atom)", "{:.2e}"),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--potential", action="append",
                        help="fastmlip MACE file (repeatable; default potentials/cuni-mace-small.safetensors)")
    parser.add_argument("--test", default=str(REPO / "examples/cuni/data/test.xyz"))
    parser.add_argument("--lmp", default=str(REPO / "build/bin/lmp"))
    parser.add_argument("--plugin", default=str(REPO / "build/lib/fastmlipplugin.so"))
    parser.add_argument("--eam", default=default_eam(), help="CuNi.eam.alloy (default: LAMMPS' source tree)")
    parser.add_argument("--cells", type=int, default=2, help="fcc cells per edge of the NVE run (4 cells^3 atoms)")
    parser.add_argument("--nvt-steps", type=int, default=500)
    parser.add_argument("--nve-steps", type=int, default=5000, help="1 fs each")
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args(argv)
    given = args.potential or ["potentials/cuni-mace-small.safetensors"]
    # Relative paths are the repository root's when they do not exist from here.
    potentials = [str(pathlib.Path(p).resolve() if pathlib.Path(p).exists() else (REPO / p).resolve()) for p in given]
    labels = dict(zip(potentials, given))
    for path, what in [(args.test, "the test set: python3 examples/cuni/split_dataset.py"),
                       (args.lmp, "LAMMPS: scripts/setup.sh"), (args.plugin, "the plugin: scripts/setup.sh"),
                       (args.eam, "CuNi.eam.alloy: pass --eam"), *[(p, "the potential") for p in potentials]]:
        if not path or not pathlib.Path(path).exists():
            sys.exit(f"evaluate.py: {path} does not exist; make {what}")
    args.plugin, args.eam = str(pathlib.Path(args.plugin).resolve()), str(pathlib.Path(args.eam).resolve())
    frames = read_xyz(args.test)

    results = {}
    with tempfile.TemporaryDirectory(prefix="cuni-evaluate-") as tmp:
        for col, potential in [*[(p, p) for p in potentials], ("EAM", None)]:
            lmp, r = Lammps(args, potential), {}
            for name, job in [("test", lambda d: test_errors(lmp, frames, d)),
                              ("Cu", lambda d: fcc(lmp, "Cu", d)), ("Ni", lambda d: fcc(lmp, "Ni", d)),
                              ("nve", lambda d: nve_drift(lmp, args, d))]:
                d = pathlib.Path(tempfile.mkdtemp(dir=tmp, prefix=name))
                r.update(job(d))
            results[col] = r
            print(f"evaluated {labels.get(col, col)}", file=sys.stderr, flush=True)

    names = [labels.get(c, "EAM (labels)") for c in results]
    width = max(12, *(len(n) for n in names))
    print(f"test set: {args.test} ({len(frames)} frames); NVE: {4 * args.cells ** 3} atoms, "
          f"{args.nvt_steps} NVT + {args.nve_steps} NVE steps at 1 fs")
    print(f"| {'quantity':<32} | " + " | ".join(f"{n:>{width}}" for n in names) + " |")
    print(f"|{'-' * 34}|" + "|".join("-" * (width + 1) + ":" for _ in names) + "|")
    for key, label, fmt in ROWS:
        print(f"| {label:<32} | " + " | ".join(f"{fmt.format(results[c][key]):>{width}}" for c in results) + " |")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"test_file": args.test, "frames": len(frames), "labels": labels,
                                                       "nve": {"cells": args.cells, "nvt_steps": args.nvt_steps,
                                                               "nve_steps": args.nve_steps},
                                                       "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: MIT
"""Parity fixtures for the CHGNet model: what the chgnet package computes for a set of
structures, for the C++ CHGNet to be checked against.

Run in the reference venv (tests/reference/setup-venv.sh: chgnet 0.3.1, which ships the
0.3.0 and 0.2.0 checkpoints, plus the r2scan checkpoint the script copies into the package's
pretrained/r2scan/; pymatgen 2023.10.11, Debian's torch 1.13), from the repository root:

    .venv/bin/python tests/reference/make_chgnet_fixtures.py

The C++ test reads the weights for a fixture whose "model" is "chgnet <version>" from
potentials/chgnet-0.3.0.safetensors for 0.3.0 and from
tests/reference/data/chgnet/chgnet-<version>.safetensors otherwise. Those two converted
checkpoints are made (deterministically) with

    .venv/bin/python potentials/convert/chgnet_to_fastmlip.py --pretrained 0.2.0 tests/reference/data/chgnet/chgnet-0.2.0.safetensors
    .venv/bin/python potentials/convert/chgnet_to_fastmlip.py --pretrained r2scan tests/reference/data/chgnet/chgnet-r2scan.safetensors

(this script does not write them).

Writes tests/reference/data/chgnet/ (see the README there):

- <structure>.json: CHGNet.load("0.3.0") on each structure of STRUCTURES;
- <structure>_v020.json: CHGNet.load("0.2.0") on limno2_rattled and licoo2_triclinic;
- <structure>_r2scan.json: the r2scan checkpoint (chgnet_r2scan_transfer_learning_
  e15f36s161m23.pth.tar, CHGNet 0.3.0 fine-tuned on MP-r2SCAN) on the same two structures,
  "model": "chgnet r2scan" (loaded by load_r2scan, below);
- limno2_rattled_debug_atoms.json, limno2_rattled_debug_bonds.json: the 0.3.0 model's
  intermediate features for limno2_rattled in float64, layer by layer.

Each structure file holds the structure (lattice rows = lattice vectors in Angstrom,
cartesian positions, atomic numbers, pbc), the graph sizes chgnet built (directed atom-graph
edges within atom_graph_cutoff, undirected bonds, angles = bond-graph rows), and, under
"float32" and "float64", chgnet's results: energy_per_atom (chgnet's "e", eV/atom), energy
(e * n, eV), forces (eV/A), stress (GPa, exactly as chgnet reports it), magmoms (mu_B) and
site_energies (eV, chgnet's return_site_energies, which include the AtomRef shift; they sum
to energy).

Stress sign. chgnet strains the cell as L' = L (I + eps) (rows of L are lattice vectors, so
every cartesian vector r becomes r (I + eps)) and reports s = (1/V) dE/d(eps) * 160.21766208
(eV/A^3 -> GPa). That is the Cauchy stress with the tension-positive sign (the sign ASE
uses): a compressed cell, whose energy drops as it expands, has negative diagonal stress.
chgnet's training data take VASP's stress times -0.1 (kBar, compression-positive, to GPa,
tension-positive), which is the same statement. LAMMPS' pressure has the opposite sign:
the LAMMPS pressure tensor is -s (times 1e4 for bar), and the virial W = -V s (in eV once
s is divided by 160.21766208). The script checks the sign on limno2 by finite differences.

float32 is chgnet's own computation (its graph converter, its float32 checkpoint). For
float64 the model is deep-copied and .double()'d, and chgnet's float32 hardcodes on the
path are lifted, each on purpose:

- the converter's atom_frac_coord and lattice (float32) are rebuilt from the pymatgen
  Structure in float64, not widened from float32; neighbor_image (integers) is cast;
- BatchedGraph.from_graphs builds the cell volume with the module-global dtype
  chgnet.model.model.datatype (float32): set to float64 while the float64 model runs;
- AtomRef._assemble_graphs returns the composition fractions .float(): replaced, on the
  float64 copy only, by the same computation in float64.

The r2scan checkpoint. chgnet 0.3.1 cannot load it with CHGNet.from_file: its model_args
say composition_model "MP-r2SCAN", a name 0.3.1's AtomRef.initialize_from does not know
(chgnet 0.4 does). load_r2scan builds CHGNet(**model_args) with that one entry replaced by
"MPtrj" (any name 0.3.1 knows: the AtomRef weights it initialises are then overwritten by the
checkpoint's own composition_model.fc.weight in load_state_dict), version="r2scan" (what
CHGNet.load passes for the shipped checkpoints) and mlp_out_bias left False (as CHGNet.load
does for 0.3.0; the checkpoint has no mlp_out biases). Every other model_args key is a
parameter 0.3.1's CHGNet accepts (checked). load_state_dict is strict: every key of the
checkpoint's state_dict is matched and nothing is missing, and the script checks that the
AtomRef weights are the checkpoint's.

Torch 1.13 cannot index with int32 tensors, which chgnet 0.3.1's graph converter produces
(newer torch can): the graphs' index tensors and atomic numbers are cast to int64 first, which changes nothing
numerically.

Besides writing the fixtures the script checks, and stops on the first failure: site
energies sum to the energy; float32 and float64 agree to float32 accuracy; float64 forces
and stress match central finite differences of the float64 energy (this also pins the
stress sign above); the supercell has 8x the energy, the same per-atom energy and the
forces of the cell it repeats; the rotated structure has the same energy and rotated
forces and stress; every file is under 2 MB.

Deterministic: fixed seeds, one thread. The JSON numbers are Python reprs of doubles (exact
round trip).
"""
import contextlib
import copy
import importlib.metadata
import inspect
import json
import math
import os
import pathlib
import sys

import numpy as np
import torch

import chgnet
import chgnet.model.model as chgnet_model_module
from chgnet.model import CHGNet
from pymatgen.core import Lattice, Structure

REPO = pathlib.Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "reference" / "data" / "chgnet"
MAX_FILE_BYTES = 2_000_000
GPA_PER_EV_A3 = 160.21766208  # chgnet's conversion factor, kept verbatim

# chgnet's own figures for its test structure examples/o-LiMnO2_unit.cif (not in the wheel):
# CHGNet.load() ("0.3.0") gives e = -7.36769 eV/atom and Mn magmoms 3.86942 mu_B; its
# CrystalGraphConverter(5, 3) gives 384 directed edges and 744 bond-graph rows,
# CrystalGraphConverter(5.5, 3.5) 624 and 2448 (tests/test_crystal_graph.py).
CHGNET_QUOTED_LIMNO2 = {"energy_per_atom": -7.36769, "mn_magmom": 3.86942,
                        "graph_5_3": [384, 744], "graph_5.5_3.5": [624, 2448]}


# --- structures -------------------------------------------------------------------------------

def limno2():
    """Orthorhombic LiMnO2 (Pmmn, origin choice 2, c the long axis, as in chgnet's test file):
    the rock-salt cation ordering with Li and Mn in corrugated double layers. Li and Mn on 2a
    (1/4, 1/4, z), O on 2b (1/4, 3/4, z). The three lattice constants and four z were relaxed
    with chgnet 0.3.0 (a few dozen damped steps on forces and diagonal stress, keeping the
    symmetry) from a = 2.868, b = 4.639, c = 5.757 A and the ideal rock-salt z (-1/8, 3/8, 3/8,
    -1/8), and rounded to four decimals: residual forces and stresses are small, not zero."""
    a, b, c = LIMNO2_ABC
    z_li, z_mn, z_o1, z_o2 = LIMNO2_Z
    species = ["Li", "Li", "Mn", "Mn", "O", "O", "O", "O"]
    frac = [[0.25, 0.25, z_li], [0.75, 0.75, -z_li], [0.25, 0.25, z_mn], [0.75, 0.75, -z_mn],
            [0.25, 0.75, z_o1], [0.75, 0.25, -z_o1], [0.25, 0.75, z_o2], [0.75, 0.25, -z_o2]]
    # Lattice(diag), not Lattice.orthorhombic, whose cos(90 deg) leaves 1e-16 off-diagonals.
    return Structure(Lattice(np.diag([a, b, c])), species, np.mod(frac, 1.0))


LIMNO2_ABC = (2.8734, 4.6227, 5.8479)
LIMNO2_Z = (-0.1169, 0.3657, 0.4005, -0.1416)


def rattle(structure, max_displacement, seed):
    """Every atom moved by a random vector of length uniform in [0, max_displacement)."""
    rng = np.random.default_rng(seed)
    n = len(structure)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    displacement = direction * rng.uniform(0.0, max_displacement, size=(n, 1))
    return Structure(structure.lattice, structure.species, structure.cart_coords + displacement,
                     coords_are_cartesian=True)


def strained(structure, strain):
    """The cell deformed by (I + strain) (acting on row vectors), atoms carried along."""
    f = np.eye(3) + np.asarray(strain, dtype=float)
    return Structure(Lattice(structure.lattice.matrix @ f), structure.species, structure.frac_coords)


def licoo2_triclinic():
    """Layered LiCoO2 (R-3m, hexagonal a = 2.816, c = 14.05 A, O at z = +-0.2604), the
    12-atom hexagonal cell doubled along a (24 atoms), one Co made Ni and one Mn, the cell
    sheared to triclinic (up to 4 %) and every atom rattled by up to 0.05 A: a multi-element
    oxide without symmetry. Nearest distances stay above 1.8 A (checked below)."""
    a, c, z_o = 2.816, 14.05, 0.2604
    hexagonal = Lattice.hexagonal(a, c)
    species, frac = [], []
    for t in ((0, 0, 0), (2 / 3, 1 / 3, 1 / 3), (1 / 3, 2 / 3, 2 / 3)):  # R centring
        for el, z in (("Li", 0.0), ("Co", 0.5), ("O", z_o), ("O", -z_o)):
            species.append(el)
            frac.append([t[0], t[1], (t[2] + z) % 1.0])
    cell = Structure(hexagonal, species, frac)
    cell.make_supercell([2, 1, 1])
    co = [i for i, s in enumerate(cell.species) if s.symbol == "Co"]
    cell.replace(co[1], "Ni")
    cell.replace(co[4], "Mn")
    cell = strained(cell, [[0.02, 0.04, -0.01], [0.0, -0.015, 0.03], [0.01, 0.0, 0.01]])
    return rattle(cell, 0.05, seed=20261123)


def small_cell():
    """B2 FeCo (cubic a = 2.85 A, 2 atoms), strained to triclinic and rattled: every lattice
    vector is shorter than 3 A, so each atom bonds to its own periodic images in both the atom
    graph and the bond graph."""
    cell = Structure(Lattice.cubic(2.85), ["Fe", "Co"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    cell = strained(cell, [[0.01, 0.03, 0.0], [-0.02, 0.0, 0.025], [0.0, 0.015, -0.01]])
    return rattle(cell, 0.05, seed=20261124)


def rotation_matrix():
    """A fixed proper rotation (det +1): 0.7 rad about the axis (1, 2, 3)/|(1, 2, 3)|."""
    axis = np.array([1.0, 2.0, 3.0])
    axis /= np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    angle = 0.7
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


def rotated(structure, rot):
    """Lattice and positions rotated by `rot` (cartesian column vectors x -> rot x; rows of
    the lattice and of the positions therefore become row @ rot.T); fractional coordinates are
    unchanged."""
    return Structure(Lattice(structure.lattice.matrix @ rot.T), structure.species,
                     structure.frac_coords)


def dimer_isolated():
    """Mn and O 4 A apart in a 20 A cubic cell: within the 6 A atom-graph cutoff, so no atom
    is isolated, but no bond is shorter than the 3 A bond-graph cutoff: the bond graph is
    empty and chgnet skips every bond and angle update."""
    return Structure(Lattice.cubic(20.0), ["Mn", "O"], [[8.0, 10.0, 10.0], [12.0, 10.0, 10.0]],
                     coords_are_cartesian=True)


def structures():
    base = limno2()
    rattled = rattle(base, 0.05, seed=20261122)
    supercell = rattled.copy()
    supercell.make_supercell([2, 2, 2])
    tric = licoo2_triclinic()
    return {
        "limno2": (base, "orthorhombic LiMnO2 (Pmmn), 8 atoms: the structure of chgnet's own tests, rebuilt"),
        "limno2_rattled": (rattled, "limno2 with every atom moved by up to 0.05 A (seed 20261122)"),
        "licoo2_triclinic": (tric, "layered LiCoO2, 24 atoms with one Ni and one Mn, sheared triclinic and rattled"),
        "small_cell": (small_cell(), "B2 FeCo, 2 atoms, strained and rattled: lattice vectors < 3 A, self-image bonds"),
        "supercell": (supercell, "2x2x2 supercell of limno2_rattled (64 atoms): supercell invariance"),
        "rotated": (rotated(tric, rotation_matrix()), "licoo2_triclinic with lattice and positions rotated by "
                    "0.7 rad about (1, 2, 3): rotation invariance"),
        "dimer_isolated": (dimer_isolated(), "Mn-O 4 A apart in a 20 A cube: empty bond graph"),
    }


V020_STRUCTURES = ("limno2_rattled", "licoo2_triclinic")
R2SCAN_STRUCTURES = V020_STRUCTURES
R2SCAN_CHECKPOINT = "pretrained/r2scan/chgnet_r2scan_transfer_learning_e15f36s161m23.pth.tar"
# The file-name suffix of each checkpoint's fixtures.
SUFFIX = {"0.3.0": "", "0.2.0": "_v020", "r2scan": "_r2scan"}


# --- models -----------------------------------------------------------------------------------

def load_r2scan():
    """The r2scan checkpoint under chgnet 0.3.1 (see the module docstring): model_args with
    composition_model "MP-r2SCAN" replaced by "MPtrj", then a strict load_state_dict."""
    path = pathlib.Path(chgnet.__file__).parent / R2SCAN_CHECKPOINT
    check(path.is_file(), f"{path}: missing (tests/reference/setup-venv.sh copies it there)")
    state = torch.load(path, map_location="cpu")["model"]
    args = dict(state["model_args"])
    check(args.get("composition_model") == "MP-r2SCAN",
          f"r2scan: composition_model {args.get('composition_model')!r}, expected 'MP-r2SCAN'")
    args["composition_model"] = "MPtrj"  # placeholder weights, overwritten by load_state_dict
    accepted = set(inspect.signature(CHGNet.__init__).parameters) - {"self", "kwargs"}
    check(set(args) <= accepted, f"r2scan: model_args chgnet {chgnet.__version__} does not accept: "
          f"{sorted(set(args) - accepted)}")
    check(not any("mlp_out" in k and k.endswith(".bias") for k in state["state_dict"]),
          "r2scan: the checkpoint has mlp_out biases")
    model = CHGNet(**args, version="r2scan")
    keys = model.load_state_dict(state["state_dict"], strict=True)
    check(not keys.missing_keys and not keys.unexpected_keys, f"r2scan: load_state_dict {keys}")
    check(torch.equal(model.composition_model.fc.weight.detach(), state["state_dict"]["composition_model.fc.weight"]),
          "r2scan: the AtomRef weights are the checkpoint's")
    return model


# --- evaluation -------------------------------------------------------------------------------

def _index_tensors_to_int64(graph):
    for key in ("atomic_number", "atom_graph", "bond_graph", "directed2undirected", "undirected2directed"):
        setattr(graph, key, getattr(graph, key).long())
    return graph


def graph32(model, structure):
    return _index_tensors_to_int64(model.graph_converter(structure))


def graph64(model, structure):
    graph = graph32(model, structure)
    graph.atom_frac_coord = torch.tensor(structure.frac_coords, dtype=torch.float64, requires_grad=True)
    graph.lattice = torch.tensor(structure.lattice.matrix, dtype=torch.float64, requires_grad=True)
    graph.neighbor_image = graph.neighbor_image.to(torch.float64)
    return graph


def model64(model):
    m = copy.deepcopy(model).double()
    atomref = m.composition_model
    n_elements, intensive = atomref.fc.in_features, atomref.is_intensive

    def composition_feas(graphs):
        rows = []
        for g in graphs:
            row = torch.bincount(g.atomic_number.long() - 1, minlength=n_elements).to(torch.float64)
            rows.append(row / g.atomic_number.shape[0] if intensive else row)
        return torch.stack(rows, dim=0)

    atomref._assemble_graphs = composition_feas  # instance attribute: the float32 model keeps chgnet's
    return m


@contextlib.contextmanager
def float64_volumes():
    saved = chgnet_model_module.datatype
    chgnet_model_module.datatype = torch.float64
    try:
        yield
    finally:
        chgnet_model_module.datatype = saved


def predict(model, graph, dtype):
    ctx = float64_volumes() if dtype == "float64" else contextlib.nullcontext()
    with ctx:
        p = model.predict_graph(graph, task="efsm", return_site_energies=True)
    n = len(p["f"])
    out = {
        "energy_per_atom": float(p["e"]),
        "energy": float(p["e"]) * n,
        "forces": p["f"].astype(np.float64).tolist(),
        "stress": p["s"].astype(np.float64).tolist(),
        "magmoms": p["m"].astype(np.float64).tolist(),
        "site_energies": p["site_energies"].astype(np.float64).tolist(),
    }
    return out


def graph_sizes(graph, model):
    return {
        "atom_graph_cutoff": model.graph_converter.atom_graph_cutoff,
        "bond_graph_cutoff": model.graph_converter.bond_graph_cutoff,
        "num_directed_edges": int(graph.atom_graph.shape[0]),
        "num_undirected_bonds": int(graph.undirected2directed.shape[0]),
        "num_angles": int(graph.bond_graph.shape[0]) if graph.bond_graph.dim() == 2 else 0,
    }


def energy64(model, structure):
    with float64_volumes():
        p = model.predict_graph(graph64(model, structure), task="e")
    return float(p["e"]) * len(structure)


# --- checks -----------------------------------------------------------------------------------

def check(condition, what):
    if not condition:
        sys.exit(f"make_chgnet_fixtures: check failed: {what}")


def close(a, b, atol, rtol=0.0):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= atol + rtol * np.abs(b)))


def check_result(name, r32, r64):
    for r in (r32, r64):
        check(abs(sum(r["site_energies"]) - r["energy"]) < 1e-4 * max(1.0, abs(r["energy"])),
              f"{name}: site energies sum to the energy")
    check(abs(r32["energy_per_atom"] - r64["energy_per_atom"]) < 1e-4, f"{name}: float32 vs float64 energy")
    check(close(r32["forces"], r64["forces"], 1e-3), f"{name}: float32 vs float64 forces")
    check(close(r32["stress"], r64["stress"], 1e-2), f"{name}: float32 vs float64 stress")
    check(close(r32["magmoms"], r64["magmoms"], 1e-3), f"{name}: float32 vs float64 magmoms")


def check_finite_differences(name, model, structure, r64, h=1e-4):
    """float64 forces = -dE/dx and stress = (1/V) dE/deps * 160.21766208 with L' = L (I + eps)."""
    cart = structure.cart_coords
    for i in range(len(structure)):
        for k in range(3):
            e = []
            for sign in (1, -1):
                x = cart.copy()
                x[i, k] += sign * h
                e.append(energy64(model, Structure(structure.lattice, structure.species, x,
                                                   coords_are_cartesian=True)))
            fd = -(e[0] - e[1]) / (2 * h)
            check(abs(fd - r64["forces"][i][k]) < 1e-5 * max(1.0, abs(fd)),
                  f"{name}: force [{i}][{k}] {r64['forces'][i][k]} vs finite difference {fd}")
    volume = structure.volume
    for a in range(3):
        for b in range(3):
            e = []
            for sign in (1, -1):
                eps = np.zeros((3, 3))
                eps[a, b] = sign * h
                e.append(energy64(model, strained(structure, eps)))
            fd = (e[0] - e[1]) / (2 * h) / volume * GPA_PER_EV_A3
            check(abs(fd - r64["stress"][a][b]) < 1e-4 * max(1.0, abs(fd)),
                  f"{name}: stress [{a}][{b}] {r64['stress'][a][b]} vs finite difference {fd}")


def check_min_distance(name, structure, minimum=1.6):
    d = structure.distance_matrix + np.eye(len(structure)) * 1e9
    check(len(structure) == 1 or d.min() >= minimum, f"{name}: atoms closer than {minimum} A")


# --- debug fixture ----------------------------------------------------------------------------

def debug_features(model, structure):
    """Atom and bond features of the float64 model layer by layer, via forward hooks."""
    graph = graph64(model, structure)
    captured = {"atom": [], "bond": []}
    hooks = [model.atom_embedding.register_forward_hook(lambda m, i, o: captured["atom"].append(o)),
             model.bond_embedding.register_forward_hook(lambda m, i, o: captured["bond"].append(o))]
    hooks += [layer.register_forward_hook(lambda m, i, o: captured["atom"].append(o))
              for layer in model.atom_conv_layers]
    hooks += [layer.register_forward_hook(lambda m, i, o: captured["bond"].append(o))
              for layer in model.bond_conv_layers]
    try:
        with float64_volumes():
            p = model.predict_graph(graph, task="efsm", return_site_energies=True)
    finally:
        for h in hooks:
            h.remove()
    check(len(captured["atom"]) == 1 + len(model.atom_conv_layers), "debug: atom hooks fired once each")
    check(len(captured["bond"]) == 1 + len(model.bond_conv_layers), "debug: bond hooks fired once each")

    directed = graph.undirected2directed.numpy()
    pairs = graph.atom_graph.numpy()[directed]
    image = graph.neighbor_image.numpy()[directed]
    cart = structure.cart_coords
    lattice = structure.lattice.matrix
    vec = cart[pairs[:, 0]] - (cart[pairs[:, 1]] + image @ lattice)
    atomref = model.composition_model.fc.weight.detach().numpy()[0]
    numbers = np.array(structure.atomic_numbers)

    def rows(t):
        return t.detach().numpy().astype(np.float64).tolist()

    atoms = {
        "stages": ["atom_embedding"] + [f"atom_conv_layers.{k}" for k in range(len(model.atom_conv_layers))],
        "atom_features": [rows(t) for t in captured["atom"]],
        "site_energies": p["site_energies"].tolist(),
        "atomref_shift": atomref[numbers - 1].tolist(),
        "magmoms": p["m"].tolist(),
    }
    bonds = {
        "stages": ["bond_embedding"] + [f"bond_conv_layers.{k}" for k in range(len(model.bond_conv_layers))],
        "bond_atoms": pairs.tolist(),
        "bond_image": image.astype(int).tolist(),
        "bond_length": np.linalg.norm(vec, axis=1).tolist(),
        "bond_features": [rows(t) for t in captured["bond"]],
    }
    return atoms, bonds


# --- output -----------------------------------------------------------------------------------

def _format(value, indent=0):
    """JSON with one object member or one matrix row per line and the numbers of a row on that
    line: readable in a diff, and without json's one-number-per-line indentation, which
    would push the debug bond features over the size limit."""
    pad = " " * (indent + 1)
    if isinstance(value, dict) and value:
        members = [f"{pad}{json.dumps(k)}: {_format(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + " " * indent + "}"
    if isinstance(value, list) and value and all(isinstance(v, (list, dict)) for v in value):
        return "[\n" + ",\n".join(pad + _format(v, indent + 1) for v in value) + "\n" + " " * indent + "]"
    return json.dumps(value, separators=(", ", ": "), allow_nan=False)


def write_json(name, obj):
    path = OUT / f"{name}.json"
    text = _format(obj) + "\n"
    check(json.loads(text) == obj, f"{path}: the JSON text does not read back as written")
    check(len(text.encode()) < MAX_FILE_BYTES, f"{path} would be {len(text)} bytes, over {MAX_FILE_BYTES}")
    path.write_text(text)
    return path


def structure_record(structure):
    return {
        "lattice": structure.lattice.matrix.tolist(),
        "positions": structure.cart_coords.tolist(),
        "numbers": [int(z) for z in structure.atomic_numbers],
        "pbc": [True, True, True],
    }


STRESS_NOTE = ("stress: GPa as chgnet reports it, s = (1/V) dE/deps * 160.21766208 with the cell "
               "strained as L' = L (I + eps) (rows of L are lattice vectors): the tension-positive "
               "Cauchy stress (ASE's sign), negative under compression; the LAMMPS pressure tensor "
               "is -s (x 1e4 for bar)")


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    versions = (f"chgnet {chgnet.__version__}, pymatgen {importlib.metadata.version('pymatgen')}, "
                f"torch {torch.__version__}, numpy {np.__version__}")
    models = {}
    for version in ("0.3.0", "0.2.0", "r2scan"):
        m32 = load_r2scan() if version == "r2scan" else CHGNet.load(version)
        m32.eval()
        models[version] = (m32, model64(m32))

    all_structures = structures()
    rot = rotation_matrix()
    results = {}
    written = []
    for version, names in (("0.3.0", list(all_structures)), ("0.2.0", V020_STRUCTURES),
                           ("r2scan", R2SCAN_STRUCTURES)):
        m32, m64 = models[version]
        for name in names:
            structure, description = all_structures[name]
            check_min_distance(name, structure)
            g32 = graph32(m32, structure)
            r32 = predict(m32, g32, "float32")
            r64 = predict(m64, graph64(m32, structure), "float64")
            check_result(f"{name} ({version})", r32, r64)
            results[(version, name)] = r64
            notes = [STRESS_NOTE,
                     "energy = energy_per_atom * n; site_energies include the AtomRef shift and sum to energy",
                     "float32: chgnet's own float32 computation; float64: the model .double()'d, the graph's "
                     "fractional coordinates and lattice rebuilt in float64 from the structure, the cell "
                     "volume and AtomRef composition fractions in float64 (see make_chgnet_fixtures.py)"]
            if name == "limno2":
                q = CHGNET_QUOTED_LIMNO2
                mn = [r32["magmoms"][i] for i, z in enumerate(structure.atomic_numbers) if z == 25]
                g53 = m32.graph_converter.__class__(5, 3)(structure)
                g55 = m32.graph_converter.__class__(5.5, 3.5)(structure)
                notes.append(
                    "rebuilt from crystallography, not chgnet's examples/o-LiMnO2_unit.cif (not in the wheel). "
                    f"chgnet quotes e = {q['energy_per_atom']} eV/atom and Mn magmom {q['mn_magmom']} for its "
                    f"file; here (0.3.0, float32) e = {r32['energy_per_atom']:.5f}, Mn magmoms "
                    f"{[round(x, 5) for x in mn]}. Graph sizes at cutoffs (5, 3): "
                    f"{g53.atom_graph.shape[0]} edges, {g53.bond_graph.shape[0]} angles (chgnet's file: "
                    f"{q['graph_5_3'][0]}, {q['graph_5_3'][1]}); at (5.5, 3.5): {g55.atom_graph.shape[0]}, "
                    f"{g55.bond_graph.shape[0]} (chgnet's file: {q['graph_5.5_3.5'][0]}, "
                    f"{q['graph_5.5_3.5'][1]}): close to chgnet's structure, not identical")
            if name == "dimer_isolated":
                notes.append("no atom is isolated at the 6 A atom-graph cutoff, so chgnet's converter "
                             "needs no on_isolated_atoms setting; the bond graph is empty")
            record = {
                "name": name,
                "description": description,
                "model": f"chgnet {version}",
                **structure_record(structure),
                "graph": graph_sizes(g32, m32),
                "float32": r32,
                "float64": r64,
                "notes": notes,
                "generated_with": versions,
            }
            suffix = SUFFIX[version]
            written.append(write_json(name + suffix, record))
            print(f"{name + suffix}: n={len(structure)} e={r64['energy_per_atom']:.8f} eV/atom "
                  f"graph={record['graph']}")

    # Invariance and gradient checks on the float64 results of 0.3.0.
    base, sup = results[("0.3.0", "limno2_rattled")], results[("0.3.0", "supercell")]
    check(abs(sup["energy"] - 8 * base["energy"]) < 1e-8 * abs(sup["energy"]), "supercell energy = 8x")
    # pymatgen's make_supercell lists the 8 images of each site one after the other.
    check(close(np.array(sup["forces"]).reshape(-1, 8, 3), np.repeat(np.array(base["forces"])[:, None, :], 8, axis=1), 1e-9),
          "supercell forces repeat the cell's")
    check(close(sup["stress"], base["stress"], 1e-8), "supercell stress")
    tric, rotd = results[("0.3.0", "licoo2_triclinic")], results[("0.3.0", "rotated")]
    check(abs(tric["energy"] - rotd["energy"]) < 1e-9 * abs(tric["energy"]), "rotation: energy")
    check(close(np.array(tric["forces"]) @ rot.T, rotd["forces"], 1e-9), "rotation: forces")
    check(close(rot @ np.array(tric["stress"]) @ rot.T, rotd["stress"], 1e-8), "rotation: stress")
    m64 = models["0.3.0"][1]
    for name in ("limno2", "small_cell"):
        check_finite_differences(name, m64, all_structures[name][0], results[("0.3.0", name)])
    s = results[("0.3.0", "limno2")]["stress"]
    print(f"limno2 stress diagonal (GPa, tension-positive): {[s[i][i] for i in range(3)]}")

    atoms, bonds = debug_features(m64, all_structures["limno2_rattled"][0])
    header = {"structure": "limno2_rattled (see limno2_rattled.json)", "model": "chgnet 0.3.0", "dtype": "float64",
              "generated_with": versions}
    written.append(write_json("limno2_rattled_debug_atoms", {
        **header, **atoms,
        "notes": ["atom_features[k][i]: the features of atom i (structure order) after stage k: the "
                  "embedding of Z - 1, then the output of each AtomConv (the last one before readout_norm)",
                  "site_energies include atomref_shift (composition_model.fc.weight[0, Z - 1])"]}))
    written.append(write_json("limno2_rattled_debug_bonds", {
        **header, **bonds,
        "notes": ["one row per undirected bond of the atom graph (6 A), in chgnet's undirected order "
                  "(graph.undirected2directed): bond_atoms [center, neighbor], bond_image the "
                  "neighbor's periodic image (neighbor at positions[neighbor] + image @ lattice), "
                  "bond_length in A",
                  "bond_features[k][b]: the features of bond b after stage k: bond_embedding of the "
                  "radial basis (rbf_expansion_ag), then the output of each BondConv (bonds longer "
                  "than the 3 A bond-graph cutoff get no message, only the residual)"]}))
    for path in written:
        print(f"wrote {path.relative_to(REPO)} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()

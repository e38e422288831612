# SPDX-License-Identifier: MIT
"""Writes tests/reference/data/trainer/mptrj_small.json: a small file in the layout of the
Materials Project trajectory dataset (MPtrj) that chgnet's StructureJsonData reads, for the
trainer's MPtrj reader (trainer/data/mptrj.hpp, tests/trainer/test_mptrj.cpp).

Two mp-ids, three frames: every label; magmom null; sites with fractional coordinates only
(their "xyz" removed) in a triclinic, partly periodic cell. The labels are made-up numbers
(this is a format test), chosen so that the conversions are easy to check by hand. Before
writing, the script loads the file with chgnet's StructureJsonData and checks what chgnet makes
of it (its stress is -0.1 x the file's, in GPa; its magmoms are absolute values).

Run from the repository root with the reference venv (tests/reference/setup-venv.sh):
    .venv/bin/python tests/reference/make_mptrj_fixture.py
Deterministic: rerunning rewrites the same bytes.
"""
import json
import os
import tempfile

import numpy as np
from pymatgen.core import Lattice, Structure

OUT = os.path.join(os.path.dirname(__file__), "data", "trainer", "mptrj_small.json")


def frame(structure, e_total, forces, stress, magmom, drop_xyz=False):
    d = structure.as_dict()
    if drop_xyz:
        for site in d["sites"]:
            del site["xyz"]
    n = len(structure)
    return {
        "structure": d,
        "uncorrected_total_energy": e_total,
        "corrected_total_energy": e_total - 1.0,
        "energy_per_atom": (e_total - 1.0) / n,
        "force": forces,
        "stress": stress,
        "magmom": magmom,
        "mp_id": None,
    }


def main():
    limno = Structure(Lattice([[2.87, 0, 0], [0, 4.62, 0], [0, 0, 5.85]]), ["Li", "Mn", "O", "O"],
                      [[0.25, 0.25, 0.88], [0.25, 0.25, 0.37], [0.25, 0.75, 0.40], [0.75, 0.25, 0.14]])
    feco = Structure(Lattice([[2.9, 0.1, 0.0], [0.2, 2.8, 0.1], [0.0, 0.3, 2.7]], pbc=(True, True, False)),
                     ["Fe", "Co"], [[0.0, 0.0, 0.0], [0.5, 0.45, 0.55]])
    data = {
        "mp-0001": {
            "mp-0001-0-0": frame(limno, -30.0,
                                 [[0.1, -0.2, 0.3], [0.0, 0.0, -0.5], [-0.1, 0.2, 0.1], [0.0, 0.0, 0.1]],
                                 [[16.021766208, 1.0, 0.0], [1.0, -8.0, 0.0], [0.0, 0.0, 3.0]],
                                 [0.01, -3.9, 0.02, 0.03]),
            "mp-0001-0-1": frame(limno, -29.5,
                                 [[0.0, 0.0, 0.1], [0.0, 0.0, -0.1], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                                 [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], None),
        },
        "mp-0002": {
            "mp-0002-1-0": frame(feco, -16.0, [[0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]],
                                 [[-2.0, 0.0, 0.0], [0.0, -2.0, 0.0], [0.0, 0.0, -2.0]], [2.5, -1.6],
                                 drop_xyz=True),
        },
    }
    text = json.dumps(data, indent=1, sort_keys=False) + "\n"

    # What chgnet makes of it.
    from chgnet.data.dataset import StructureJsonData
    from chgnet.graph import CrystalGraphConverter

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mptrj.json")
        with open(path, "w") as f:
            f.write(text)
        ds = StructureJsonData(path, graph_converter=CrystalGraphConverter(), targets="efsm")
        for k in range(len(ds)):
            graph, t = ds[k]
            mp_id, graph_id = ds.keys[k]
            assert graph.graph_id == graph_id, (graph.graph_id, graph_id)  # chgnet substitutes a failed one
            ref = data[mp_id][graph_id]
            assert np.allclose(t["e"].numpy(), ref["energy_per_atom"])
            assert np.allclose(t["s"].numpy(), -0.1 * np.array(ref["stress"]))
            if ref["magmom"] is None:
                assert t["m"] is None
            else:
                assert np.allclose(t["m"].numpy(), np.abs(ref["magmom"]))
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote", OUT)


if __name__ == "__main__":
    main()

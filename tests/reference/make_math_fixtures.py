# SPDX-License-Identifier: MIT
"""Writes the e3nn parity fixtures of src/math/ to tests/reference/data/math/.

Run in the reference venv (tests/reference/setup-venv.sh):

    .venv/bin/python tests/reference/make_math_fixtures.py

The output is committed; the C++ tests (tests/math/) read it and never need Python. Every
file records the e3nn and torch versions it came from. All values are float64 and written
with repr(), which round-trips exactly.

Files:
  spherical_harmonics.json  o3.spherical_harmonics(l, v, normalize=True,
                            normalization="component") for l = 0..4 and its Jacobian
                            d Y / d v (autograd), for random vectors of many lengths and the
                            special ones (zero, shorter than the 1e-12 clamp, on the axes).
  wigner_3j.json            o3.wigner_3j(l1, l2, l3) for every l <= 4 triple that satisfies
                            the triangle rule, sparse (e3nn's exact non-zeros).
  wigner_D.json             o3.wigner_D(l, alpha, beta, gamma) for l = 0..4, the matching
                            o3.angles_to_matrix, and Irreps.D_from_matrix of an improper
                            rotation. The script asserts Y(R v) = D(R) Y(v) with e3nn's own
                            functions, the convention the C++ wigner_D is defined by.
"""
import json
import math
import os
import sys

import e3nn
import torch
from e3nn import o3

LMAX = 4
SEED = 20240611
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "math")


def meta(description):
    return {
        "generator": "tests/reference/make_math_fixtures.py",
        "description": description,
        "e3nn_version": e3nn.__version__,
        "torch_version": torch.__version__,
        "python_version": sys.version.split()[0],
        "dtype": "float64",
    }


def write(name, payload):
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, name)
    with open(path, "w") as f:
        # One array per line keeps the diff of a regeneration readable.
        json.dump(payload, f, indent=1)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def fixture_vectors(gen):
    """Random directions at lengths spanning 1e-3..1e3, plus the cases e3nn treats specially."""
    n_random = 48
    directions = torch.randn(n_random, 3, generator=gen, dtype=torch.float64)
    lengths = 10.0 ** (torch.rand(n_random, generator=gen, dtype=torch.float64) * 6.0 - 3.0)
    random = directions / directions.norm(dim=1, keepdim=True) * lengths[:, None]
    special = torch.tensor(
        [
            [0.0, 0.0, 0.0],  # normalize() gives 0: Y_0 = 1, Y_l>0 = 0
            [1e-13, -2e-13, 3e-13],  # below the 1e-12 clamp: e3nn's polynomials at v / 1e-12
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],  # the polar axis
            [0.0, 0.0, 1.0],
            [0.0, -2.5, 0.0],
            [-0.3, 0.0, 0.0],
            [1e-9, 1.0, -1e-9],  # next to the pole
            [1.0, 1.0, 1.0],
            [-1.5, 0.5, 2.0],
        ],
        dtype=torch.float64,
    )
    return torch.cat([special, random])


def spherical_harmonics_fixture(gen):
    vectors = fixture_vectors(gen)
    n = vectors.shape[0]
    sh_blocks, jac_blocks = [], []
    for l in range(LMAX + 1):
        x = vectors.clone().requires_grad_(True)
        y = o3.spherical_harmonics(l, x, normalize=True, normalization="component")
        jac = torch.zeros(n, 2 * l + 1, 3, dtype=torch.float64)
        # Y_0 = 1 does not depend on v, and autograd has no graph for it: its Jacobian is 0.
        for i in range(2 * l + 1 if y.requires_grad else 0):
            # Rows are independent across the batch, so the gradient of the batch sum of
            # component i is row by row d Y_i / d v.
            (g,) = torch.autograd.grad(y[:, i].sum(), x, retain_graph=True)
            jac[:, i, :] = g
        sh_blocks.append(y.detach())
        jac_blocks.append(jac)
    sh = torch.cat(sh_blocks, dim=1)
    jac = torch.cat(jac_blocks, dim=1)
    write(
        "spherical_harmonics.json",
        {
            "meta": meta(
                "o3.spherical_harmonics(l, v, normalize=True, normalization='component'), l = 0..lmax "
                "concatenated (index l*l + l + m); jacobian[n][i][k] = d sh[n][i] / d v[n][k] by autograd"
            ),
            "lmax": LMAX,
            "vectors": vectors.tolist(),
            "sh": sh.tolist(),
            "jacobian": jac.tolist(),
        },
    )


def wigner_3j_fixture():
    blocks = []
    for l1 in range(LMAX + 1):
        for l2 in range(LMAX + 1):
            for l3 in range(abs(l1 - l2), min(l1 + l2, LMAX) + 1):
                c = o3.wigner_3j(l1, l2, l3, dtype=torch.float64)
                nz = torch.nonzero(c, as_tuple=False).tolist()
                blocks.append(
                    {
                        "l": [l1, l2, l3],
                        "nonzeros": [[i, j, k, c[i, j, k].item()] for i, j, k in nz],
                    }
                )
    write(
        "wigner_3j.json",
        {
            "meta": meta(
                "o3.wigner_3j(l1, l2, l3) for all l <= lmax with |l1-l2| <= l3 <= l1+l2; every entry not "
                "listed is exactly 0; indices are m + l"
            ),
            "lmax": LMAX,
            "blocks": blocks,
        },
    )


def wigner_d_fixture(gen):
    angles = [[0.0, 0.0, 0.0], [0.5 * math.pi, 0.0, 0.0], [0.0, 0.5 * math.pi, 0.0], [1.0, 2.0, 3.0]]
    angles += (torch.rand(4, 3, generator=gen, dtype=torch.float64) * 2 * math.pi).tolist()
    rotations = []
    probe = torch.randn(16, 3, generator=gen, dtype=torch.float64)
    for a, b, g in angles:
        ta, tb, tg = (torch.tensor(t, dtype=torch.float64) for t in (a, b, g))
        R = o3.angles_to_matrix(ta, tb, tg)
        ds = []
        for l in range(LMAX + 1):
            D = o3.wigner_D(l, ta, tb, tg)
            # The convention the C++ side is defined by: Y(R v) = D(R) Y(v).
            y = o3.spherical_harmonics(l, probe, normalize=True, normalization="component")
            y_rot = o3.spherical_harmonics(l, probe @ R.T, normalize=True, normalization="component")
            assert torch.allclose(y_rot, y @ D.T, atol=1e-12), f"e3nn D^{l} is not Y(Rv) = D Y(v)"
            ds.append(D.flatten().tolist())
        rotations.append({"angles": [a, b, g], "matrix": R.flatten().tolist(), "D": ds})

    # An improper rotation on irreps of both parities: e3nn applies p^k with k = 1.
    irreps = o3.Irreps("2x0e+1x0o+1x1o+1x1e+1x2e+1x2o")
    a, b, g = (torch.tensor(t, dtype=torch.float64) for t in (0.3, 1.1, -2.0))
    R_improper = -o3.angles_to_matrix(a, b, g)
    D_improper = irreps.D_from_matrix(R_improper)
    write(
        "wigner_D.json",
        {
            "meta": meta(
                "o3.wigner_D(l, alpha, beta, gamma) for l = 0..lmax (row-major), matrix = "
                "o3.angles_to_matrix(alpha, beta, gamma) (row-major); improper: Irreps.D_from_matrix"
            ),
            "lmax": LMAX,
            "rotations": rotations,
            "improper": {
                "irreps": str(irreps),
                "matrix": R_improper.flatten().tolist(),
                "D": D_improper.flatten().tolist(),
            },
        },
    )


def main():
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(SEED)
    spherical_harmonics_fixture(gen)
    wigner_3j_fixture()
    wigner_d_fixture(gen)


if __name__ == "__main__":
    main()

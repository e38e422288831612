# SPDX-License-Identifier: MIT
"""Parity fixtures for the MACE kernels, from mace-torch and e3nn themselves.

Run in the reference venv (tests/reference/setup-venv.sh), from the repository root:

    .venv/bin/python tests/reference/make_kernel_fixtures.py

Writes tests/reference/data/kernels/channelwise_tp.json: for several irreps configurations,
the tensor product mace-torch builds for `conv_tp` (via tp_out_irreps_with_instructions and
e3nn's TensorProduct), its output irreps, weight count, and its output on random inputs,
scatter-summed over receivers as MACE's interaction block does. CI only reads the JSON.
"""
import json
import pathlib

import e3nn
import mace
import torch
from e3nn import o3
from mace.modules.irreps_tools import tp_out_irreps_with_instructions

torch.set_default_dtype(torch.float64)
OUT = pathlib.Path(__file__).parent / "data" / "kernels" / "channelwise_tp.json"

CASES = [
    # (node irreps, SH lmax, channels as in MACE's target = (sh * channels).sort().simplify())
    ("3x0e", 3, 3),  # small: 128x0e shape, fewer channels
    ("3x0e+3x1o", 3, 3),  # MACE-MP medium shape
    ("2x0e+2x1o+2x2e", 3, 2),  # large
    ("4x0e+4x1o", 2, 4),
    ("1x0e", 0, 1),
]


def case(node_irreps, lmax, channels, seed):
    g = torch.Generator().manual_seed(seed)
    irreps1 = o3.Irreps(node_irreps)
    irreps2 = o3.Irreps.spherical_harmonics(lmax)
    target = (irreps2 * channels).sort()[0].simplify()
    irreps_mid, instructions = tp_out_irreps_with_instructions(irreps1, irreps2, target)
    tp = o3.TensorProduct(irreps1, irreps2, irreps_mid, instructions=instructions, shared_weights=False,
                          internal_weights=False)
    num_nodes, num_edges = 4, 9
    receiver = torch.sort(torch.randint(0, num_nodes, (num_edges,), generator=g)).values
    sender = torch.randint(0, num_nodes, (num_edges,), generator=g)
    x = torch.randn(num_nodes, irreps1.dim, generator=g)
    Y = torch.randn(num_edges, irreps2.dim, generator=g)
    w = torch.randn(num_edges, tp.weight_numel, generator=g)
    messages = tp(x[sender], Y, w)
    out = torch.zeros(num_nodes, irreps_mid.dim).index_add_(0, receiver, messages)
    return {
        "irreps1": str(irreps1), "irreps2": str(irreps2), "target": str(target),
        "irreps_out": str(irreps_mid), "weight_numel": tp.weight_numel,
        "instructions": [[i.i_in1, i.i_in2, i.i_out] for i in tp.instructions],
        "num_nodes": num_nodes, "sender": sender.tolist(), "receiver": receiver.tolist(),
        "x": x.flatten().tolist(), "Y": Y.flatten().tolist(), "w": w.flatten().tolist(),
        "out": out.flatten().tolist(),
    }


def main():
    data = {
        "generator": "tests/reference/make_kernel_fixtures.py",
        "versions": {"e3nn": e3nn.__version__, "mace-torch": mace.__version__, "torch": torch.__version__},
        "channelwise_tp": [case(*c, seed=i) for i, c in enumerate(CASES)],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(OUT)  # atomic
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

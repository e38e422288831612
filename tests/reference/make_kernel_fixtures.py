# SPDX-License-Identifier: MIT
"""Parity fixtures for the MACE kernels, from mace-torch and e3nn themselves.

Run in the reference venv (tests/reference/setup-venv.sh), from the repository root:

    .venv/bin/python tests/reference/make_kernel_fixtures.py

Writes, under tests/reference/data/kernels/ (CI only reads these JSON files):

- channelwise_tp.json: for several irreps configurations, the tensor product mace-torch
  builds for `conv_tp` (tp_out_irreps_with_instructions + e3nn's TensorProduct), its output
  irreps, weight count, and its output on random inputs, scatter-summed over receivers as
  MACE's interaction block does;
- symmetric_contraction.json: mace-torch SymmetricContraction modules (correlation 1, 2, 3)
  with random weights: their U_matrix_nu buffers and weights, random node features and
  species, and the outputs;
- linear.json: e3nn o3.Linear (MACE's linear_up, linear, readouts) and MACE's skip_tp, a
  FullyConnectedTensorProduct with one-hot species (an element-indexed linear map), with
  random weights, inputs and outputs;
- radial_basis.json: mace-torch's BesselBasis x PolynomialCutoff, and chgnet's RadialBessel
  (smooth cutoff, learnable frequencies moved off their initial values) and Fourier angle
  expansion (chgnet/model/basis.py is loaded by path: the package's __init__ needs pymatgen;
  install with `pip install --no-deps chgnet==0.3.0` into the venv);
- radial_mlp.json: MACE's conv_tp_weights, e3nn's FullyConnectedNet with SiLU, its layer
  weights, the normalize2mom constant, inputs and outputs.
"""
import json
import pathlib

import e3nn
import mace
import torch
from e3nn import o3
from mace.modules.irreps_tools import tp_out_irreps_with_instructions
from mace.modules.symmetric_contraction import SymmetricContraction

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)  # multi-threaded reductions change the last bits run to run
DATA = pathlib.Path(__file__).parent / "data" / "kernels"

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


SC_CASES = [
    # (irreps of the node features entering the product, output irreps, correlation, elements)
    ("3x0e+3x1o+3x2e+3x3o", "3x0e", 1, 2),
    ("3x0e+3x1o+3x2e+3x3o", "3x0e+3x1o", 2, 3),
    ("2x0e+2x1o+2x2e+2x3o", "2x0e+2x1o", 3, 2),  # MACE-MP medium shape, fewer channels
    ("2x0e+2x1o+2x2e", "2x0e+2x1o+2x2e", 3, 2),
    ("4x0e+4x1o", "4x0e", 3, 3),
]


def sc_case(irreps_in, irreps_out, correlation, num_elements, seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    sc = SymmetricContraction(o3.Irreps(irreps_in), o3.Irreps(irreps_out), correlation,
                              num_elements=num_elements)
    channels = o3.Irreps(irreps_in)[0].mul
    num_ell = sum(ir.dim for _, ir in o3.Irreps(irreps_in))
    nodes = 5
    x = torch.randn(nodes, channels, num_ell, generator=g)  # MACE passes [nodes, channels, ell]
    species = torch.randint(0, num_elements, (nodes,), generator=g)
    y = torch.nn.functional.one_hot(species, num_elements).to(x.dtype)
    out = sc(x, y)
    contractions = []
    for c in sc.contractions:
        # weights_max is W of the highest correlation; c.weights holds correlation-1 .. 1.
        weights = [c.weights_max] + list(c.weights)
        contractions.append({
            # U is very sparse: store [flat index, value] of its non-zeros (exact zeros dropped).
            "U": {str(nu): {"shape": list(c.U_tensors(nu).shape),
                            "nonzeros": [[int(i), float(c.U_tensors(nu).flatten()[i])]
                                         for i in torch.nonzero(c.U_tensors(nu).flatten()).flatten()]}
                  for nu in range(1, c.correlation + 1)},
            "W": {str(c.correlation - i): {"shape": list(w.shape), "values": w.detach().flatten().tolist()}
                  for i, w in enumerate(weights)},
        })
    return {"irreps_in": irreps_in, "irreps_out": irreps_out, "correlation": correlation,
            "num_elements": num_elements, "channels": channels, "num_ell": num_ell,
            "species": species.tolist(), "x": x.flatten().tolist(),
            "out": out.detach().flatten().tolist(), "contractions": contractions}


LINEAR_CASES = [
    ("3x0e+3x1o", "5x0e+5x1o"),
    ("3x0e+3x1o+2x0e+3x2e", "4x0e+4x1o+4x2e+4x3o"),  # repeated irreps, an output with no input
    ("5x0e", "1x0e"),  # a readout
]


def linear_case(irreps_in, irreps_out, seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    lin = o3.Linear(o3.Irreps(irreps_in), o3.Irreps(irreps_out))
    x = torch.randn(6, lin.irreps_in.dim, generator=g)
    return {"irreps_in": irreps_in, "irreps_out": irreps_out, "weight": lin.weight.detach().tolist(),
            "x": x.flatten().tolist(), "out": lin(x).detach().flatten().tolist()}


def skip_case(irreps_in, num_elements, irreps_out, seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    attrs = o3.Irreps(f"{num_elements}x0e")
    tp = o3.FullyConnectedTensorProduct(o3.Irreps(irreps_in), attrs, o3.Irreps(irreps_out))
    x = torch.randn(7, tp.irreps_in1.dim, generator=g)
    species = torch.randint(0, num_elements, (7,), generator=g)
    y = torch.nn.functional.one_hot(species, num_elements).to(x.dtype)
    return {"irreps_in": irreps_in, "num_elements": num_elements, "irreps_out": irreps_out,
            "weight": tp.weight.detach().tolist(), "species": species.tolist(),
            "x": x.flatten().tolist(), "out": tp(x, y).detach().flatten().tolist()}


def radial_mlp_case(hs, seed):
    from e3nn import nn as enn
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    mlp = enn.FullyConnectedNet(hs, torch.nn.functional.silu)
    x = torch.randn(11, hs[0], generator=g)
    layers = [getattr(mlp, f"layer{i}") for i in range(len(hs) - 1)]
    cst = [l.act.cst for l in layers if l.act is not None]
    return {"hs": hs, "cst": cst[0] if cst else None,
            "weights": [l.weight.detach().flatten().tolist() for l in layers],
            "x": x.flatten().tolist(), "out": mlp(x).detach().flatten().tolist()}


def radial_cases():
    import importlib.util
    import site
    from mace.modules.radial import BesselBasis, PolynomialCutoff
    path = next(pathlib.Path(p) / "chgnet" / "model" / "basis.py" for p in site.getsitepackages()
                if (pathlib.Path(p) / "chgnet" / "model" / "basis.py").exists())
    spec = importlib.util.spec_from_file_location("chgnet_basis", path)
    basis = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(basis)
    g = torch.Generator().manual_seed(500)
    out = {"mace": [], "chgnet_radial": [], "chgnet_fourier": []}
    for r_max, n, p in [(5.0, 8, 5), (6.0, 10, 6), (4.5, 3, 3)]:
        r = 0.3 + (1.1 * r_max - 0.3) * torch.rand(40, generator=g)  # some beyond the cutoff
        bessel, cutoff = BesselBasis(r_max, n), PolynomialCutoff(r_max, p)
        with torch.no_grad():
            values = bessel(r[:, None]) * cutoff(r[:, None])
        out["mace"].append({"r_max": r_max, "num_basis": n, "p": p,
                            "bessel_weights": bessel.bessel_weights.tolist(), "r": r.tolist(),
                            "values": values.flatten().tolist()})
    for cut, n in [(6.0, 9), (3.0, 9)]:
        rb = basis.RadialBessel(num_radial=n, cutoff=cut, learnable=True, smooth_cutoff=8).double()
        with torch.no_grad():
            rb.frequencies.mul_(1 + 0.02 * torch.randn(n, generator=g, dtype=torch.float64))
            r = 0.3 + (1.1 * cut - 0.3) * torch.rand(40, generator=g)
            values = rb(r)
        out["chgnet_radial"].append({"cutoff": cut, "frequencies": rb.frequencies.tolist(), "r": r.tolist(),
                                     "values": values.flatten().tolist()})
    for order in [15, 4]:
        f = basis.Fourier(order=order, learnable=True).double()
        with torch.no_grad():
            f.frequencies.add_(0.01 * torch.randn(order, generator=g, dtype=torch.float64))
            theta = torch.pi * torch.rand(30, generator=g)
            values = f(theta)
        out["chgnet_fourier"].append({"frequencies": f.frequencies.tolist(), "theta": theta.tolist(),
                                      "values": values.flatten().tolist()})
    return out


def write(name, payload):
    data = {"generator": "tests/reference/make_kernel_fixtures.py",
            "versions": {"e3nn": e3nn.__version__, "mace-torch": mace.__version__, "torch": torch.__version__}}
    data.update(payload)
    DATA.mkdir(parents=True, exist_ok=True)
    out = DATA / name
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(out)  # atomic
    print(f"wrote {out}")


def main():
    write("channelwise_tp.json", {"channelwise_tp": [case(*c, seed=i) for i, c in enumerate(CASES)]})
    write("linear.json", {
        "linear": [linear_case(*c, seed=200 + i) for i, c in enumerate(LINEAR_CASES)],
        "skip_tp": [skip_case("3x0e+3x1o", 3, "3x0e+3x1o", 300), skip_case("4x0e+2x1o+2x2e", 2, "4x0e+2x1o", 301)],
    })
    write("radial_basis.json", radial_cases())
    write("radial_mlp.json", {"radial_mlp": [radial_mlp_case([8, 16, 16, 16, 30], 400),
                                             radial_mlp_case([5, 7, 3], 401)]})
    write("symmetric_contraction.json",
          {"symmetric_contraction": [sc_case(*c, seed=100 + i) for i, c in enumerate(SC_CASES)]})


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: MIT
"""Convert a chgnet checkpoint to a fastmlip potential file (model kind "chgnet").

    python potentials/convert/chgnet_to_fastmlip.py CHECKPOINT.pth.tar OUT.safetensors \
        [--dtype {float32,float64}] [--version NAME]
    python potentials/convert/chgnet_to_fastmlip.py --pretrained 0.3.0 potentials/chgnet-0.3.0.safetensors

or, from Python:

    from chgnet_to_fastmlip import convert_file
    meta = convert_file("chgnet_0.3.0_e29f68s314m37.pth.tar", "out.safetensors", version="0.3.0")

The container is docs/potential-format.md. A chgnet checkpoint (what chgnet's Trainer saves and
what the package ships in chgnet/pretrained/) is a torch pickle whose ["model"] entry holds
"state_dict" and "model_args", the keyword arguments of chgnet.model.CHGNet. This converter
reads only those two: it never builds a CHGNet, so it also converts checkpoints whose
composition model the installed chgnet does not know by name (the r2scan one under chgnet
0.3.1), and it needs only torch, numpy and safetensors.

What the file holds:

* tensors: every floating entry of the state_dict under its chgnet name, unchanged
  ("atom_embedding.embedding.weight" [94, 64], "bond_basis_expansion.rbf_expansion_ag.frequencies",
  "atom_conv_layers.0.twoBody_atom.mlp_core.layers.0.weight", "composition_model.fc.weight"
  [1, 94], ...), as F32 for --dtype float32 (the checkpoints' own precision) or widened to F64
  for --dtype float64;
* species: Z = 1..94 in order, because chgnet's AtomEmbedding and AtomRef index by Z - 1;
* cutoffs: {"atom_graph": atom_graph_cutoff, "bond_graph": bond_graph_cutoff};
* hyperparameters: the model_args entries the forward pass depends on (HYPERPARAMETER_KEYS),
  with chgnet's own defaults where a checkpoint leaves one out (the 0.2.0 checkpoint predates
  some), plus "version" (the checkpoint's name: "0.3.0", "0.2.0", "r2scan", ...),
  "mlp_out_bias" (whether the conv layers' output Linear has a bias: chgnet passes it at load
  time, not in model_args, so it is read from the state_dict) and "composition_model":
  "AtomRef" (a per-element energy, composition_model.fc.weight[0, Z-1], added to every site).

Only the configurations fastmlip evaluates are accepted; anything else raises
UnsupportedModelError (exit code 2 from the command line) naming the checkpoint, what is
unsupported, and SUPPORTED. The output is written atomically and deterministically, like
mace_to_fastmlip.py's.
"""
import argparse
import importlib.util
import math
import os
import sys

import numpy as np

from potential_writer import provenance, sha256_of, write_potential

WRITER = "fastmlip-convert-chgnet 0.1.0"
EXIT_UNSUPPORTED = 2

SUPPORTED = (
    "supported: CHGNet with SiLU activations, LayerNorm or no normalisation in the gated MLPs "
    "(gMLP_norm 'layer' or None) and before the readout (readout_norm 'layer' or None; v0.2.0 "
    "has None), no conv_norm, the readout MLP applied per "
    "atom before summing (mlp_first true, final_mlp 'MLP'), bond and angle updates on "
    "(update_bond, update_angle true), an odd num_angular, 94 embedded elements and an AtomRef "
    "composition model (composition_model.fc.weight)"
)

# The checkpoints shipped with chgnet, relative to the installed package (--pretrained).
PRETRAINED = {
    "0.3.0": "pretrained/0.3.0/chgnet_0.3.0_e29f68s314m37.pth.tar",
    "0.2.0": "pretrained/0.2.0/chgnet_0.2.0_e30f77s348m32.pth.tar",
    # only in chgnet 0.4.x wheels; tests/reference/setup-venv.sh unpacks it into 0.3.1
    "r2scan": "pretrained/r2scan/chgnet_r2scan_transfer_learning_e15f36s161m23.pth.tar",
}

# CHGNet.__init__'s defaults (chgnet 0.3.x): CHGNet(**model_args) falls back to these for a key
# the checkpoint omits, so the converter must too.
CHGNET_DEFAULTS = {
    "atom_fea_dim": 64, "bond_fea_dim": 64, "angle_fea_dim": 64, "num_radial": 31,
    "num_angular": 31, "n_conv": 4, "atom_conv_hidden_dim": 64, "update_bond": True,
    "bond_conv_hidden_dim": 64, "update_angle": True, "angle_layer_hidden_dim": 0,
    "mlp_hidden_dims": [64, 64, 64], "mlp_first": True, "is_intensive": True,
    "non_linearity": "silu", "atom_graph_cutoff": 6.0, "bond_graph_cutoff": 3.0,
    "cutoff_coeff": 8, "learnable_rbf": True, "gMLP_norm": "layer", "readout_norm": "layer",
    # popped from **kwargs inside CHGNet.__init__
    "conv_norm": None, "final_mlp": "MLP",
}

HYPERPARAMETER_KEYS = (
    "atom_fea_dim", "bond_fea_dim", "angle_fea_dim", "num_radial", "num_angular", "n_conv",
    "atom_conv_hidden_dim", "bond_conv_hidden_dim", "angle_layer_hidden_dim", "mlp_hidden_dims",
    "cutoff_coeff", "gMLP_norm", "readout_norm", "mlp_first", "is_intensive", "non_linearity",
    "learnable_rbf", "update_bond", "update_angle",
)

NUM_ELEMENTS = 94  # chgnet's AtomEmbedding and AtomRef cover H..Pu
ELEMENT_SYMBOLS = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se "
    "Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb "
    "Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu"
).split()
assert len(ELEMENT_SYMBOLS) == NUM_ELEMENTS

# model_args keys that CHGNet(**model_args) accepts but that change no number fastmlip computes,
# each with why. Every other key must be one of CHGNET_DEFAULTS (checked in inspect()); a key in
# neither list is refused, so that an option of a newer chgnet is never dropped silently.
HARMLESS_MODEL_ARGS = {
    "composition_model": "a name only: the AtomRef energies are the tensor composition_model.fc.weight",
    "conv_dropout": "dropout is off when a model evaluates",
    "mlp_dropout": "dropout is off when a model evaluates",
    "graph_converter_algorithm": "'fast' and 'legacy' build the same graph",
    "read_out": "ignored by CHGNet when mlp_first is true (required): the readout is a per-atom sum",
    "version": "the checkpoint's name, recorded as hyperparameters.version",
    # chgnet 0.2.0's checkpoint: a misspelt key and a pre-0.3 option that CHGNet 0.3 drops into
    # **kwargs and never reads (the 0.2.0 weights evaluate as chgnet 0.3.x evaluates them).
    "cutofff_coeff": "ignored by chgnet 0.3 (a misspelling in the 0.2.0 checkpoint; cutoff_coeff is used)",
    "skip_connection": "ignored by chgnet 0.3 (0.2.0 checkpoint)",
}

# Every state_dict entry fastmlip's loader may read, as patterns over the name with list
# indices written as N (taken from the 0.3.0, 0.2.0 and r2scan checkpoints). Anything else (a
# new block, an attention readout, a buffer of another chgnet version) is refused.
_GMLP = r"(mlp_core|mlp_gate)\.layers\.N\.(weight|bias)|bn1\.(weight|bias)|bn2\.(weight|bias)"
ALLOWED_TENSORS = [
    r"atom_embedding\.embedding\.weight", r"bond_embedding\.weight", r"angle_embedding\.weight",
    r"bond_basis_expansion\.rbf_expansion_(ag|bg)\.frequencies",
    r"angle_basis_expansion\.fourier_expansion\.frequencies",
    r"bond_weights_(ag|bg)\.weight",
    rf"atom_conv_layers\.N\.twoBody_atom\.({_GMLP})",
    r"atom_conv_layers\.N\.mlp_out\.layers\.N\.(weight|bias)",
    rf"bond_conv_layers\.N\.twoBody_bond\.({_GMLP})",
    r"bond_conv_layers\.N\.mlp_out\.layers\.N\.(weight|bias)",
    rf"angle_layers\.N\.twoBody_bond\.({_GMLP})",
    r"readout_norm\.(weight|bias)", r"site_wise\.(weight|bias)", r"mlp\.layers\.N\.(weight|bias)",
    r"composition_model\.fc\.weight",
]

MLP_OUT_BIAS_KEY = "atom_conv_layers.0.mlp_out.layers.1.bias"
ATOMREF_KEY = "composition_model.fc.weight"
EMBEDDING_KEY = "atom_embedding.embedding.weight"


class UnsupportedModelError(ValueError):
    """The checkpoint is not one fastmlip can evaluate; the message says why and what is supported."""


def _finite(value, where):
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"chgnet_to_fastmlip: {where} is {value}, not a finite number")
    return value


def _plain(value, where):
    """model_args values as JSON-ready Python (ints stay ints: the loader reads dimensions)."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _finite(float(value), where)
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise ValueError(f"chgnet_to_fastmlip: model_args '{where}' has type {type(value).__name__}")


def inspect(state_dict, model_args, name):
    """Check the configuration and return the hyperparameters; `name` is used in messages."""
    import re

    args = dict(CHGNET_DEFAULTS)
    args.update(model_args)

    def refuse(what):
        raise UnsupportedModelError(f"{name}: {what}; {SUPPORTED}")

    for key in sorted(model_args):
        if key not in CHGNET_DEFAULTS and key not in HARMLESS_MODEL_ARGS:
            refuse(f"model_args has '{key}' = {model_args[key]!r:.80}, which the converter does not know")
    patterns = [re.compile(p.replace("N", r"\d+") + "$") for p in ALLOWED_TENSORS]
    for key in state_dict:
        if not any(p.match(key) for p in patterns):
            value = state_dict[key]
            refuse(f"the state_dict holds '{key}' ({getattr(value, 'dtype', type(value).__name__)}, "
                   f"shape {list(getattr(value, 'shape', []))}), which the converter does not know")

    if args["non_linearity"] != "silu":
        refuse(f"non_linearity '{args['non_linearity']}' is not 'silu'")
    for key in ("gMLP_norm", "readout_norm"):
        if args[key] not in ("layer", None):  # None (JSON null) is v0.2.0's: no normalisation
            refuse(f"{key} {args[key]!r} is neither 'layer' nor None")
    if args["conv_norm"] is not None:
        refuse(f"conv_norm {args['conv_norm']!r} is set")
    if args["mlp_first"] is not True:
        refuse("mlp_first is false (pooling before the readout MLP)")
    if args["final_mlp"] not in ("MLP", "normal"):  # chgnet treats both names as the plain MLP
        refuse(f"final_mlp {args['final_mlp']!r} is not 'MLP'")
    for key in ("update_bond", "update_angle"):
        if args[key] is not True:
            refuse(f"{key} is false")
    if int(args["num_angular"]) % 2 == 0:
        refuse(f"num_angular {args['num_angular']} is even (the Fourier angle basis needs "
               "1 + 2 * order functions)")
    if ATOMREF_KEY not in state_dict:
        refuse(f"no {ATOMREF_KEY} in the state_dict (composition model "
               f"{model_args.get('composition_model')!r} is not AtomRef-like)")
    if tuple(state_dict[ATOMREF_KEY].shape) != (1, NUM_ELEMENTS):
        refuse(f"{ATOMREF_KEY} has shape {list(state_dict[ATOMREF_KEY].shape)}, not [1, {NUM_ELEMENTS}]")
    if EMBEDDING_KEY not in state_dict or state_dict[EMBEDDING_KEY].shape[0] != NUM_ELEMENTS:
        refuse(f"{EMBEDDING_KEY} does not have {NUM_ELEMENTS} rows")

    hyper = {k: _plain(args[k], k) for k in HYPERPARAMETER_KEYS}
    hyper["mlp_hidden_dims"] = _plain(list(np.atleast_1d(args["mlp_hidden_dims"]).tolist()),
                                      "mlp_hidden_dims")
    hyper["mlp_out_bias"] = MLP_OUT_BIAS_KEY in state_dict
    hyper["composition_model"] = "AtomRef"
    cutoffs = {"atom_graph": _plain(float(args["atom_graph_cutoff"]), "atom_graph_cutoff"),
               "bond_graph": _plain(float(args["bond_graph_cutoff"]), "bond_graph_cutoff")}
    for key, value in cutoffs.items():
        if not value > 0:
            raise ValueError(f"chgnet_to_fastmlip: {name}: cutoff {key} is {value}, not positive")
    return hyper, cutoffs


def _tensors(state_dict, dtype, name):
    """The state_dict entries (all floating: inspect() admits no other) as little-endian numpy
    arrays of `dtype`."""
    import torch

    target = {"float32": (torch.float32, "<f4"), "float64": (torch.float64, "<f8")}[dtype]
    out = {}
    for key, value in state_dict.items():
        if not (torch.is_tensor(value) and value.is_floating_point()):
            raise UnsupportedModelError(f"{name}: '{key}' is not a floating tensor; {SUPPORTED}")
        v = value.detach().cpu()
        if v.dtype == torch.float64 and target[0] == torch.float32:
            raise ValueError(f"chgnet_to_fastmlip: {name}: '{key}' is float64; --dtype float32 "
                             "would round it, use --dtype float64")
        a = v.to(target[0]).numpy().astype(target[1])  # float32 -> float64 is exact
        if not np.all(np.isfinite(a)):
            raise ValueError(f"chgnet_to_fastmlip: {name}: '{key}' has non-finite values")
        out[key] = a.copy(order="C")
    return out


def pretrained_path(name):
    """The checkpoint `name` ("0.3.0", "0.2.0", "r2scan") inside the installed chgnet package,
    found without importing it (chgnet's __init__ is light, but its model module needs pymatgen)."""
    if name not in PRETRAINED:
        raise ValueError(f"chgnet_to_fastmlip: no pretrained checkpoint '{name}'; known: {sorted(PRETRAINED)}")
    spec = importlib.util.find_spec("chgnet")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("chgnet_to_fastmlip: --pretrained needs the chgnet package installed "
                         "(tests/reference/setup-venv.sh)")
    path = os.path.join(list(spec.submodule_search_locations)[0], PRETRAINED[name])
    if not os.path.isfile(path):
        hint = " (it ships only in chgnet 0.4.x wheels: see tests/reference/setup-venv.sh)" if name == "r2scan" else ""
        raise ValueError(f"chgnet_to_fastmlip: {path} does not exist{hint}")
    return path


def load_checkpoint(path):
    """torch.load a chgnet checkpoint on the CPU (a pickle: only load files you trust) and
    return its (state_dict, model_args)."""
    import torch

    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:  # torch without the weights_only argument
        checkpoint = torch.load(path, map_location="cpu")
    model = checkpoint.get("model") if isinstance(checkpoint, dict) else None
    if not isinstance(model, dict) or "state_dict" not in model or "model_args" not in model:
        raise ValueError(f"chgnet_to_fastmlip: {path}: not a chgnet checkpoint (no "
                         "['model']['state_dict'] and ['model']['model_args'])")
    return model["state_dict"], model["model_args"]


def convert(state_dict, model_args, path, *, version, dtype="float32", name="checkpoint",
            source_sha256=None, source_name=None):
    """Write the chgnet model (state_dict, model_args) to `path`; returns (metadata, tensors).

    version: the checkpoint's name, recorded as hyperparameters.version.
    dtype: "float32" (the tensors as the checkpoints hold them) or "float64" (widened).
    name: how messages refer to the model (the checkpoint's path).
    """
    if dtype not in ("float32", "float64"):
        raise ValueError(f"chgnet_to_fastmlip: dtype '{dtype}' is not float32 or float64")
    if not isinstance(version, str) or not version:
        raise ValueError(f"chgnet_to_fastmlip: {name}: the checkpoint does not say its version; "
                         "pass --version NAME")
    hyper, cutoffs = inspect(state_dict, model_args, name)
    hyper["version"] = version

    import torch

    prov = provenance(WRITER, f"torch {torch.__version__}", source_sha256=source_sha256, source_name=source_name)
    meta = {
        "model": "chgnet",
        "species": [{"Z": z, "symbol": s} for z, s in enumerate(ELEMENT_SYMBOLS, start=1)],
        "cutoffs": cutoffs,
        "units": "metal",
        "dtype": dtype,
        "hyperparameters": hyper,
        "provenance": prov,
    }
    tensors = _tensors(state_dict, dtype, name)
    write_potential(path, meta, tensors, who="chgnet_to_fastmlip")
    return meta, tensors


def convert_file(checkpoint_path, out_path, *, dtype="float32", version=None):
    """Convert the checkpoint at `checkpoint_path`; provenance records its SHA-256. Without
    `version`, the model_args' own "version" entry is used (chgnet adds it only when a model
    built by CHGNet.load is saved again)."""
    digest = sha256_of(checkpoint_path)
    state_dict, model_args = load_checkpoint(checkpoint_path)
    return convert(state_dict, model_args, out_path, version=version or model_args.get("version"),
                   dtype=dtype, name=checkpoint_path, source_sha256=digest,
                   source_name=os.path.basename(checkpoint_path))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="chgnet_to_fastmlip.py",
        description="Convert a chgnet checkpoint (.pth.tar) to a fastmlip potential file.",
        epilog=SUPPORTED[0].upper() + SUPPORTED[1:] + ".")
    parser.add_argument("checkpoint", nargs="?",
                        help="the chgnet .pth.tar (a pickle: only convert files you trust); "
                             "leave out with --pretrained")
    parser.add_argument("output", help="the .safetensors file to write")
    parser.add_argument("--pretrained", choices=sorted(PRETRAINED),
                        help="convert this checkpoint of the installed chgnet package")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                        help="precision of the stored tensors (default float32, the checkpoints' own)")
    parser.add_argument("--version", default=None,
                        help="the checkpoint's version name to record (default: the --pretrained "
                             "name, else the checkpoint's model_args 'version')")
    args = parser.parse_args(argv)
    if (args.checkpoint is None) == (args.pretrained is None):
        parser.error("give either CHECKPOINT or --pretrained NAME")
    try:
        checkpoint = args.checkpoint or pretrained_path(args.pretrained)
        meta, tensors = convert_file(checkpoint, args.output, dtype=args.dtype,
                                     version=args.version or args.pretrained)
    except UnsupportedModelError as e:
        print(f"chgnet_to_fastmlip: unsupported model: {e}", file=sys.stderr)
        return EXIT_UNSUPPORTED
    except ValueError as e:  # its messages start with "chgnet_to_fastmlip:"
        print(e, file=sys.stderr)
        return 1
    except OSError as e:
        print(f"chgnet_to_fastmlip: {e}", file=sys.stderr)
        return 1
    n_params = sum(int(a.size) for a in tensors.values())
    print(f"wrote {args.output}: chgnet {meta['hyperparameters']['version']}, {n_params} parameters "
          f"in {len(tensors)} tensors, dtype {meta['dtype']}, sha256 {sha256_of(args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

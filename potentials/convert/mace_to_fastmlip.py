# SPDX-License-Identifier: MIT
"""Convert a mace-torch model to a fastmlip potential file (model kind "mace").

    python potentials/convert/mace_to_fastmlip.py MODEL.model -o OUT.safetensors \
        [--head NAME] [--dtype {auto,float32,float64}]

or, from Python, with a model already in memory:

    from mace_to_fastmlip import convert
    meta = convert(model, "out.safetensors")

The file layout is docs/potential-format.md (the container) and docs/mace-potential.md (what a
MACE file holds; this converter is one of the writers that page binds). In short:

* every entry of the model's state_dict() is written under its own key with its own shape,
  floating tensors as F64 (a float32 model is widened, exactly), integer buffers as I64;
* everything mace-torch keeps as plain Python attributes rather than in the state_dict -- the
  per-interaction avg_num_neighbors, the e3nn normalize2mom constants of the radial MLP
  activation and of the readout gate, the irreps of every block, the head names -- goes into
  the "hyperparameters" object of the metadata, read from the modules themselves: nothing is
  recomputed from mace-torch's construction rules, so a model whose constants differ from
  what a fresh construction would give (a fine-tuned avg_num_neighbors, trained Bessel
  frequencies) converts faithfully.

Only the architectures fastmlip evaluates are accepted; anything else raises
UnsupportedModelError (exit code 2 from the command line) with a message that ends with the
list in SUPPORTED. The output is written atomically (a temporary file in the target directory,
then os.replace) and is a pure function of the model: the same model gives the same bytes.

Needs torch, e3nn and mace-torch (to unpickle the .model and to recognise its modules), numpy
and safetensors; tests/reference/setup-venv.sh makes such an environment.
"""
import argparse
import math
import os
import re
import sys
import warnings

import numpy as np

import mace_cueq
from potential_writer import provenance as make_provenance
from potential_writer import sha256_of, write_potential

WRITER = "fastmlip-convert-mace 0.1.0"
EXIT_UNSUPPORTED = 2

SUPPORTED = (
    "supported: model classes MACE and ScaleShiftMACE built from e3nn modules, or ScaleShiftMACE "
    "from cuEquivariance's (read without cuEquivariance installed; not OpenEquivariance, not "
    "TorchScript-compiled); interaction blocks RealAgnosticInteractionBlock "
    "and RealAgnosticResidualInteractionBlock and their Density variants, and "
    "RealAgnosticResidualNonLinearInteractionBlock (MACE-MH-1, OMOL); 1 to 3 interactions; "
    "hidden irreps Cx0e, "
    "Cx0e+Cx1o or Cx0e+Cx1o+Cx2e (max_L 0 to 2); correlation 1 to 3; spherical harmonics "
    "max_ell 1 to 3; a Bessel, Gaussian or Chebyshev radial basis with a polynomial cutoff (on the basis, "
    "or with apply_cutoff False on the messages), without a distance transform or with the Agnesi or Soft one; "
    "a radial MLP with SiLU; species-dependent or (use_agnostic_product) shared product weights; "
    "LinearReadoutBlock, and NonLinearReadoutBlock or NonLinearBiasReadoutBlock with a SiLU gate, on every layer "
    "or (use_last_readout_only) the last; the last layer's scalars or (keep_last_layer_irreps) its "
    "full hidden irreps; linear_up to the node features' irreps or to edge_irreps; "
    "optional ZBL pair repulsion; total_charge / total_spin embeddings per structure (embedding_specs, "
    "categorical or continuous, with or without use_embedding_readout); one or more heads"
)

SUPPORTED_INTERACTIONS = ("RealAgnosticInteractionBlock", "RealAgnosticResidualInteractionBlock",
                          "RealAgnosticDensityInteractionBlock", "RealAgnosticDensityResidualInteractionBlock",
                          "RealAgnosticResidualNonLinearInteractionBlock")
# The Density blocks (MACE-MPA-0, -OMAT-0, MATPES) divide each node's message by 1 + its learned
# edge density, sum over its edges of tanh(density_fn(B_e)^2), instead of avg_num_neighbors.
DENSITY_INTERACTIONS = ("RealAgnosticDensityInteractionBlock", "RealAgnosticDensityResidualInteractionBlock")
RESIDUAL_INTERACTIONS = ("RealAgnosticResidualInteractionBlock", "RealAgnosticDensityResidualInteractionBlock",
                         "RealAgnosticResidualNonLinearInteractionBlock")
# MACE-MH-1 / OMOL's block: species embeddings in the radial MLP's input (a LayerNorm MLP with
# biases), a learned density normalisation alpha + beta * density, a linear residual from the
# sender features, an equivariant gate and a second linear; its skip is a plain Linear.
NONLINEAR_INTERACTION = "RealAgnosticResidualNonLinearInteractionBlock"
MAX_INTERACTIONS = 3
MAX_HIDDEN_L = 2
MAX_CORRELATION = 3
MAX_ELL = 3

# ZBLBasis.forward (mace/modules/radial.py in mace-torch 0.3.13) has these numbers in its code,
# not in buffers: the screening exponents, the Bohr radius used in the screening length and
# e^2/(4 pi eps0) in eV*A. They are written out so that a reader of the file needs no copy of
# mace-torch's source; the buffers (c, a_exp, a_prefactor, p, covalent_radii) are tensors.
ZBL_SCREENING_EXPONENTS = [3.2, 0.9423, 0.4028, 0.2016]
ZBL_BOHR_RADIUS = 0.529
ZBL_COULOMB_CONSTANT = 14.3996


TESTED_MACE_VERSIONS = "0.3.13 and 0.3.16"

# ---------------------------------------------------------------------------------------------
# The allow-list. A model is converted only when every module, tensor and plain attribute that
# mace-torch's forward reads is listed here; anything else is refused by name (_audit). The
# lists were taken from models built by mace-torch 0.3.13 and 0.3.16 with the supported
# options; a new mace-torch version that adds anything is refused until it is reviewed here.

# Module classes, by module and class name (exact type, never isinstance: a subclass may
# override forward). Where each may sit is checked by inspect(); here only whether it may exist.
ALLOWED_MODULE_CLASSES = {
    "mace.modules.models.MACE",
    "mace.modules.models.ScaleShiftMACE",
    "mace.modules.blocks.LinearNodeEmbeddingBlock",
    "mace.modules.blocks.RadialEmbeddingBlock",
    "mace.modules.radial.BesselBasis",
    "mace.modules.radial.GaussianBasis",
    "mace.modules.radial.ChebychevBasis",
    "mace.modules.radial.PolynomialCutoff",
    "mace.modules.radial.ZBLBasis",
    "mace.modules.radial.AgnesiTransform",
    "mace.modules.radial.SoftTransform",
    "mace.modules.blocks.AtomicEnergiesBlock",
    "mace.modules.blocks.ScaleShiftBlock",
    "mace.modules.blocks.RealAgnosticInteractionBlock",
    "mace.modules.blocks.RealAgnosticResidualInteractionBlock",
    "mace.modules.blocks.RealAgnosticDensityInteractionBlock",
    "mace.modules.blocks.RealAgnosticDensityResidualInteractionBlock",
    "mace.modules.blocks.RealAgnosticResidualNonLinearInteractionBlock",
    "mace.modules.radial.RadialMLP",
    "torch.nn.modules.normalization.LayerNorm",
    "mace.modules.gate.GatedEquivariantBlock",
    "mace.modules.blocks.EquivariantProductBasisBlock",
    "mace.modules.symmetric_contraction.SymmetricContraction",
    "mace.modules.symmetric_contraction.Contraction",
    "mace.modules.blocks.LinearReadoutBlock",
    "mace.modules.blocks.NonLinearReadoutBlock",
    "mace.modules.blocks.NonLinearBiasReadoutBlock",
    "mace.modules.irreps_tools.reshape_irreps",
    # --embedding_specs (MACE-OMOL's total charge and spin): the joint embedding and its parts.
    "mace.modules.embeddings.GenericJointEmbedding",
    "torch.nn.modules.container.ModuleDict",
    "torch.nn.modules.container.Sequential",
    "torch.nn.modules.sparse.Embedding",
    "torch.nn.modules.linear.Linear",
    "torch.nn.modules.activation.SiLU",
    "e3nn.o3._linear.Linear",
    "e3nn.o3._tensor_product._tensor_product.TensorProduct",
    "e3nn.o3._tensor_product._sub.FullyConnectedTensorProduct",
    "e3nn.o3._spherical_harmonics.SphericalHarmonics",
    "e3nn.nn._fc.FullyConnectedNet",
    "e3nn.nn._fc._Layer",
    "e3nn.nn._activation.Activation",
    "e3nn.math._normalize_activation.normalize2mom",
    "torch.nn.modules.container.ModuleList",
    "torch.nn.modules.container.ParameterList",
}
# Generated code: e3nn compiles its Linear and TensorProduct into TorchScript modules
# (_compiled_main*), and the symmetric contraction holds opt_einsum_fx's torch.fx GraphModules
# (graph_opt_main, contractions_*; torch makes a class per instance). They are code derived
# from the irreps, holding at most e3nn's Wigner-3j constant buffers (_ALLOWED_TENSORS); _audit
# accepts them only under these attribute names and without parameters.
_GENERATED_CODE = ("_compiled_main", "_compiled_main_left_right", "_compiled_main_right",
                   "graph_opt_main", "contractions_weighting", "contractions_features")

# Every parameter and buffer (named_parameters + named_buffers, persistent or not), as
# patterns over the dotted name with each list index written as N. What the loader reads is in
# docs/mace-potential.md; the rest are listed with why they are harmless.
_E3NN_LINEAR = r"(weight|bias|output_mask)"  # bias must be empty (checked), output_mask unused
_E3NN_TP = r"(weight|output_mask|_compiled_main_left_right\._w3j_\d+_\d+_\d+|_compiled_main_right\._w3j_\d+_\d+_\d+)"
_ALLOWED_TENSORS = [
    r"atomic_numbers", r"r_max", r"num_interactions",
    rf"node_embedding\.linear\.{_E3NN_LINEAR}",
    r"radial_embedding\.bessel_fn\.(bessel_weights|r_max|prefactor)",
    r"radial_embedding\.bessel_fn\.(gaussian_weights|n)",  # GaussianBasis' centres, ChebychevBasis' orders
    r"radial_embedding\.cutoff_fn\.(p|r_max)",
    # AgnesiTransform: a, q, p; SoftTransform: alpha (buffers, or parameters when trainable);
    # both: the covalent radii by atomic number (ase.data.covalent_radii as the model holds them).
    r"radial_embedding\.distance_transform\.(a|q|p|alpha|covalent_radii)",
    r"atomic_energies_fn\.atomic_energies",
    r"scale_shift\.(scale|shift)",
    r"pair_repulsion_fn\.(c|a_exp|a_prefactor|p|covalent_radii|r_max)",
    rf"interactions\.N\.(linear_up|linear)\.{_E3NN_LINEAR}",
    rf"interactions\.N\.(conv_tp|skip_tp)\.{_E3NN_TP}",
    r"interactions\.N\.conv_tp_weights\.layerN\.weight",
    r"interactions\.N\.density_fn\.layer0\.weight",  # Density blocks: [num_bessel, 1]
    # The non-linear block (MACE-MH-1, OMOL): its density normalisation's alpha and beta, the
    # species embeddings of the radial input, its e3nn Linears (skip_tp is one too) and its two
    # RadialMLPs (torch Linear with bias, LayerNorm, SiLU).
    r"interactions\.N\.(alpha|beta)",
    rf"interactions\.N\.(source_embedding|target_embedding|linear_res|linear_1|linear_2|skip_tp)\.{_E3NN_LINEAR}",
    r"interactions\.N\.(conv_tp_weights|density_fn)\.net\.N\.(weight|bias)",
    r"products\.N\.symmetric_contractions\.contractions\.N\.(U_matrix_N|weights_max|weights\.N)",
    # mace-torch >= 0.3.14: one boolean per contraction order saying that its U matrix is all
    # zeros (the weights of that order are then zero too). forward never reads them: it
    # contracts U and the weights as stored, and both are written, so the flags change no
    # number. _audit checks each flag against its U matrix; they are written as I64 0/1.
    r"products\.N\.symmetric_contractions\.contractions\.N\.(weights_max_zeroed|weights_N_zeroed)",
    rf"products\.N\.linear\.{_E3NN_LINEAR}",
    rf"readouts\.N\.(linear|linear_1|linear_mid|linear_2)\.{_E3NN_LINEAR}",
    # --embedding_specs: a table per categorical feature, Linear-SiLU-Linear per continuous one,
    # the projection of their concatenation; --use_embedding_readout: a LinearReadoutBlock.
    r"joint_embedding\.embedders\.(total_charge|total_spin)\.weight",
    r"joint_embedding\.embedders\.(total_charge|total_spin)\.[02]\.(weight|bias)",
    r"joint_embedding\.project\.0\.weight",
    rf"embedding_readout\.linear\.{_E3NN_LINEAR}",
]
# The only e3nn Linear biases a supported model holds: NonLinearBiasReadoutBlock's (MACE-MH-1).
# And torch.nn.Linear's in a continuous feature's embedder (joint_embedding).
_BIASED = re.compile(r"readouts\.\d+\.(linear_mid|linear_2)\.bias$|joint_embedding\.embedders\.\w+\.[02]\.bias$"
                     r"|interactions\.\d+\.(conv_tp_weights|density_fn)\.net\.\d+\.bias$")


def _is(value):
    return lambda v: v == value


def _any(_):
    return True


# Plain attributes (vars(module), torch's own private ones aside) of mace-torch's classes that
# may be present, each with the values accepted. An attribute not listed is refused; a listed
# one that is absent (an older mace-torch) means mace-torch's default behaviour, which is the
# accepted one. Irreps, head names and the like are accepted here and checked against the
# modules by inspect().
_MODEL_ATTRIBUTES = {
    "heads": _any,
    # mace-torch >= 0.3.14 options. Each non-default value changes what forward computes:
    # False (MACE-OMOL): the envelope moves from the radial basis to the messages (checked
    # against radial_embedding's, the flag forward reads; written to the file).
    "apply_cutoff": _any,
    # The irreps linear_up maps to (MACE-MH-1, OMOL): read from each interaction, whose
    # edge_irreps the model passes on (to the first one only with use_edge_irreps_first).
    "edge_irreps": _any,
    # Species-independent product weights (MACE-MH-1): each product's flag is checked against it.
    "use_agnostic_product": _any,
    "use_so3": _is(False),                # SO(3) spherical harmonics (parity-free)
    "use_last_readout_only": _any,        # one readout, on the last layer (checked by inspect())
    "use_edge_irreps_first": _any,        # the first interaction's edge_irreps, read from it
    # The Clebsch-Gordan basis the U matrices were built in: U is stored and read, any is fine.
    "use_reduced_cg": _any,
    "lammps_mliap": _any,                 # how forward is called from LAMMPS' ML-IAP, not what it computes
    "pair_repulsion": _is(True),          # present only with ZBL (checked with pair_repulsion_fn)
    # Per-structure features (MACE-OMOL's total charge and spin): checked by
    # _embedding_hyperparameters against the joint_embedding module, and written.
    "embedding_specs": _any,
}
_INTERACTION_ATTRIBUTES = {
    "node_attrs_irreps": _any, "node_feats_irreps": _any, "edge_attrs_irreps": _any,
    "edge_feats_irreps": _any, "target_irreps": _any, "hidden_irreps": _any, "irreps_out": _any,
    "avg_num_neighbors": _any, "radial_MLP": _any,
    "edge_irreps": _any,  # linear_up's and conv_tp's irreps, checked against both
    "cueq_config": lambda v: v is None or not getattr(v, "enabled", False),
    "oeq_config": lambda v: v is None or not getattr(v, "enabled", False),
}
_CLASS_ATTRIBUTES = {
    "MACE": _MODEL_ATTRIBUTES,
    "ScaleShiftMACE": _MODEL_ATTRIBUTES,
    "RealAgnosticInteractionBlock": _INTERACTION_ATTRIBUTES,
    "RealAgnosticResidualInteractionBlock": _INTERACTION_ATTRIBUTES,
    "RealAgnosticDensityInteractionBlock": _INTERACTION_ATTRIBUTES,
    "RealAgnosticDensityResidualInteractionBlock": _INTERACTION_ATTRIBUTES,
    NONLINEAR_INTERACTION: {**_INTERACTION_ATTRIBUTES, "irreps_nonlin": _any},
    "RadialMLP": {"hs": _any},
    # Only torch's defaults: the reader applies LayerNorm with eps 1e-5 and a learned affine map.
    "torch.nn.modules.normalization.LayerNorm": {"normalized_shape": _any, "eps": _is(1e-5),
                                                 "elementwise_affine": _is(True)},
    # Its slices and constants are private attributes, read by _gate_hyperparameters.
    "GatedEquivariantBlock": {"irreps_scalars": _any, "irreps_gates": _any, "irreps_gated": _any},
    "EquivariantProductBasisBlock": {
        "use_sc": _any,  # read (written as products[t].use_sc)
        "use_agnostic_product": _any,  # read (written as products[t].agnostic)
        "cueq_config": lambda v: v is None or not getattr(v, "enabled", False),
        "oeq_config": lambda v: v is None or not getattr(v, "enabled", False),
    },
    # internal_weights / shared_weights: whether the weights are the module's own parameters
    # (they are, as the tensor checks require) or come from the caller.
    "SymmetricContraction": {"irreps_in": _any, "irreps_out": _any, "internal_weights": _is(True),
                             "shared_weights": _any},
    "Contraction": {"num_features": _any, "coupling_irreps": _any, "correlation": _any},
    "RadialEmbeddingBlock": {"out_dim": _any, "apply_cutoff": _any},
    "BesselBasis": {}, "PolynomialCutoff": {}, "ZBLBasis": {}, "AgnesiTransform": {}, "SoftTransform": {},
    # GaussianBasis.coeff is read by forward but not saved: inspect() writes it to the
    # hyperparameters (gaussian_coeff). ChebychevBasis' two are shapes only.
    "GaussianBasis": {"coeff": _any},
    "ChebychevBasis": {"num_basis": _any, "r_max": _any},
    "LinearNodeEmbeddingBlock": {}, "AtomicEnergiesBlock": {}, "ScaleShiftBlock": {},
    "LinearReadoutBlock": {},
    "NonLinearReadoutBlock": {"hidden_irreps": _any, "num_heads": _any},
    "NonLinearBiasReadoutBlock": {"hidden_irreps": _any, "num_heads": _any},
    "reshape_irreps": {"irreps": _any, "dims": _any, "muls": _any, "cueq_config": _any},
    "GenericJointEmbedding": {"base_dim": _any, "specs": _any, "out_dim": _any},
    # max_norm would renormalise looked-up rows in forward; the rest act on training only.
    # torch's own classes by qualified name (e3nn's Linear shares the short one).
    "torch.nn.modules.sparse.Embedding": {"num_embeddings": _any, "embedding_dim": _any, "padding_idx": _any,
                                          "max_norm": _is(None), "norm_type": _any, "scale_grad_by_freq": _any,
                                          "sparse": _any},
    "torch.nn.modules.linear.Linear": {"in_features": _any, "out_features": _any},
    "torch.nn.modules.activation.SiLU": {"inplace": _any},
}


class UnsupportedModelError(ValueError):
    """The model is not one fastmlip can evaluate; the message says why and what is supported."""


def _refuse(what):
    raise UnsupportedModelError(f"{what}; {SUPPORTED}")


def _irreps_str(irreps):
    """The e3nn string of an Irreps or of anything o3.Irreps accepts (a module may hold a str)."""
    from e3nn import o3

    return str(o3.Irreps(str(irreps)))


def _check(condition, what):
    """A structural check: mace-torch builds supported models so; a model that fails it was
    built differently (another option, another mace-torch version) and is refused, naming the
    check, rather than converted into a file that evaluates something else."""
    if not condition:
        _refuse(f"unexpected model structure: {what} (known: mace-torch {TESTED_MACE_VERSIONS})")


def _act_constant(act, where):
    """The factor e3nn's normalize2mom multiplies the activation by, and the activation's name.

    normalize2mom keeps `cst` (the inverse RMS of f over a standard normal) as a plain
    attribute and skips the multiplication when it is within 1e-4 of 1 (`_is_id`); the value
    written is the factor actually applied."""
    import torch
    from e3nn.math import normalize2mom

    if not isinstance(act, normalize2mom):
        _refuse(f"{where}: activation {act!r} is not an e3nn normalize2mom-wrapped function")
    if act.f is not torch.nn.functional.silu:
        name = getattr(act.f, "__name__", repr(act.f))
        _refuse(f"{where}: activation '{name}' (only SiLU is supported)")
    cst = 1.0 if act._is_id else float(act.cst)  # pylint: disable=protected-access
    return "silu", cst


def _finite(value, where):
    if not math.isfinite(value):
        raise ValueError(f"mace_to_fastmlip: {where} is {value}, not a finite number")
    return value


def _conv_tp_instructions(t, tp):
    """The conv TP's instructions as written: its weights come per edge from the radial MLP, one
    block per instruction in instruction order, and every instruction must be a weighted "uvu"
    path (mace-torch's tp_out_irreps_with_instructions builds only those)."""
    _check(not tp.internal_weights and not tp.shared_weights, f"interaction {t} conv_tp weights are external")
    instructions = []
    for ins in tp.instructions:
        _check(ins.connection_mode == "uvu" and ins.has_weight, f"interaction {t} conv_tp instruction {ins}")
        instructions.append({"i_in1": ins.i_in1, "i_in2": ins.i_in2, "i_out": ins.i_out,
                             "path_weight": _finite(float(ins.path_weight), f"interaction {t} path weight")})
    return instructions


def _interaction_hyperparameters(t, inter, num_bessel, max_ell, node_attrs_irreps):
    from e3nn import nn, o3

    cls = type(inter).__name__
    if cls not in SUPPORTED_INTERACTIONS:
        _refuse(f"interaction {t} is a {cls}")
    residual = cls in RESIDUAL_INTERACTIONS
    if cls == NONLINEAR_INTERACTION:
        return residual, _nonlinear_interaction_hyperparameters(t, inter, num_bessel, max_ell, node_attrs_irreps)
    if cls in DENSITY_INTERACTIONS:
        # density_fn: one e3nn FullyConnectedNet layer num_bessel -> 1 without activation.
        dfn = inter.density_fn
        _check(isinstance(dfn, nn.FullyConnectedNet) and [int(h) for h in dfn.hs] == [num_bessel, 1],
               f"interaction {t} density_fn is FullyConnectedNet [{num_bessel}, 1]")
        _check(dfn.layer0.act is None and dfn.layer0.var_in == 1 and dfn.layer0.var_out == 1,
               f"interaction {t} density_fn is one plain linear layer")
    for name, kind in (("linear_up", o3.Linear), ("conv_tp", o3.TensorProduct), ("linear", o3.Linear),
                       ("skip_tp", o3.FullyConnectedTensorProduct)):
        module = getattr(inter, name)
        # cuEquivariance's modules use other weight layouts than the e3nn ones named here.
        if not isinstance(module, kind):
            _refuse(f"interaction {t}: {name} is a {type(module).__module__}.{type(module).__name__}, "
                    f"not an e3nn {kind.__name__}")

    node_feats = _irreps_str(inter.node_feats_irreps)
    edge_attrs = _irreps_str(inter.edge_attrs_irreps)
    target = _irreps_str(inter.target_irreps)
    hidden = _irreps_str(inter.hidden_irreps)
    irreps_mid = str(inter.conv_tp.irreps_out)
    # edge_irreps (mace-torch >= 0.3.14; absent before): what linear_up maps the node features to
    # and the conv TP reads; mace-torch makes it node_feats_irreps unless the model sets it.
    edge = _irreps_str(getattr(inter, "edge_irreps", None) or inter.node_feats_irreps)
    _check(str(inter.linear_up.irreps_in) == node_feats and str(inter.linear_up.irreps_out) == edge,
           f"interaction {t} linear_up irreps")
    _check(str(inter.conv_tp.irreps_in1) == edge and str(inter.conv_tp.irreps_in2) == edge_attrs,
           f"interaction {t} conv_tp inputs")
    _check(edge_attrs == str(o3.Irreps.spherical_harmonics(max_ell)), f"interaction {t} edge_attrs_irreps")
    _check(str(inter.linear.irreps_in) == irreps_mid and str(inter.linear.irreps_out) == target,
           f"interaction {t} linear irreps")
    _check(str(inter.skip_tp.irreps_in2) == node_attrs_irreps, f"interaction {t} skip_tp species irreps")
    if residual:
        _check(str(inter.skip_tp.irreps_in1) == node_feats and str(inter.skip_tp.irreps_out) == hidden,
               f"interaction {t} skip_tp irreps (residual)")
    else:
        _check(str(inter.skip_tp.irreps_in1) == target and str(inter.skip_tp.irreps_out) == target,
               f"interaction {t} skip_tp irreps (non-residual)")

    tp = inter.conv_tp
    instructions = _conv_tp_instructions(t, tp)

    mlp = inter.conv_tp_weights
    if not isinstance(mlp, nn.FullyConnectedNet):
        _refuse(f"interaction {t}: conv_tp_weights is a {type(mlp).__name__}, not an e3nn FullyConnectedNet")
    widths = [int(h) for h in mlp.hs]
    layers = [getattr(mlp, f"layer{k}") for k in range(len(widths) - 1)]
    _check(widths[0] == num_bessel and widths[-1] == tp.weight_numel, f"interaction {t} radial MLP widths {widths}")
    # e3nn's _Layer scales by var_in / var_out, which FullyConnectedNet leaves at 1 unless asked;
    # the contract has no room for other values, so refuse rather than mis-evaluate.
    for k, layer in enumerate(layers):
        if layer.var_in != 1 or layer.var_out != 1:
            _refuse(f"interaction {t}: radial MLP layer {k} has variance_in/out {layer.var_in}/{layer.var_out}")
        _check((layer.act is None) == (k == len(layers) - 1), f"interaction {t} radial MLP activations")
    if len(layers) > 1:
        _, radial_cst = _act_constant(layers[0].act, f"interaction {t} radial MLP")
    else:
        radial_cst = 1.0  # a single linear layer: no activation, the constant is never used

    avg = float(inter.avg_num_neighbors)
    if not (math.isfinite(avg) and avg > 0):
        raise ValueError(f"mace_to_fastmlip: interaction {t} avg_num_neighbors = {avg}")

    hyperparameters = {
        "class": cls,
        "node_feats_irreps": node_feats,
        "edge_attrs_irreps": edge_attrs,
        "edge_feats_irreps": _irreps_str(inter.edge_feats_irreps),
        "target_irreps": target,
        "hidden_irreps": hidden,
        "irreps_mid": irreps_mid,
        "skip_tp_irreps_out": str(inter.skip_tp.irreps_out),
        "conv_tp_weight_numel": int(tp.weight_numel),
        "conv_tp_instructions": instructions,
        "radial_mlp": widths,
        "radial_mlp_cst": radial_cst,
        "avg_num_neighbors": avg,
    }
    if edge != node_feats:
        # Written only where it differs, so files of models without it stay byte for byte the same.
        hyperparameters["edge_irreps"] = edge
    return residual, hyperparameters


def _radial_mlp_widths(t, name, mlp):
    """A mace-torch RadialMLP's widths: Linear (with bias), then LayerNorm and SiLU after every
    Linear but the last."""
    import torch
    from mace.modules.radial import RadialMLP

    _check(type(mlp) is RadialMLP, f"interaction {t} {name} is a RadialMLP")  # pylint: disable=unidiomatic-typecheck
    widths = [int(h) for h in mlp.hs]
    layers = list(mlp.net)
    _check(len(widths) >= 2 and len(layers) == 3 * (len(widths) - 1) - 2, f"interaction {t} {name} layers")
    for k in range(len(widths) - 1):
        lin = layers[3 * k]
        _check(type(lin) is torch.nn.Linear and lin.bias is not None and  # pylint: disable=unidiomatic-typecheck
               (lin.in_features, lin.out_features) == (widths[k], widths[k + 1]),
               f"interaction {t} {name} layer {k} is Linear({widths[k]}, {widths[k + 1]}) with a bias")
        if k + 2 < len(widths):
            norm, act = layers[3 * k + 1], layers[3 * k + 2]
            _check(type(norm) is torch.nn.LayerNorm and  # pylint: disable=unidiomatic-typecheck
                   tuple(norm.normalized_shape) == (widths[k + 1],) and norm.bias is not None,
                   f"interaction {t} {name} layer {k} LayerNorm({widths[k + 1]}) with weight and bias")
            _check(type(act) is torch.nn.SiLU, f"interaction {t} {name} layer {k} SiLU")  # pylint: disable=unidiomatic-typecheck
    return widths


def _gate_hyperparameters(t, gate, target):
    """GatedEquivariantBlock's slices of its input (scalars, gates and each gated block: start,
    length, irrep dimension, multiplicity, offset of its gates) and its normalize2mom constants,
    from the module itself: out = [silu(scalars) c_s, gated_k * sigmoid(gates_k) c_g ...]."""
    import torch
    from mace.modules.gate import GatedEquivariantBlock

    _check(type(gate) is GatedEquivariantBlock, f"interaction {t} equivariant_nonlin")  # pylint: disable=unidiomatic-typecheck
    # pylint: disable=protected-access
    if gate._layout_is_ir_mul:
        _refuse(f"interaction {t}: the gate has cuEquivariance's ir_mul layout")
    _check(gate._act_scalar is torch.nn.functional.silu, f"interaction {t} gate scalars' activation is SiLU")
    _check(gate._act_gate in (torch.nn.functional.sigmoid, torch.sigmoid), f"interaction {t} gates' sigmoid")
    _check(str(gate.irreps_out) == target, f"interaction {t} gate output is the target irreps")
    gated = [[int(v) for v in info] for info in gate._gated_info]
    _check(gate._s_start == 0 and gate._g_start == gate._s_len and
           sum(g[1] for g in gated) + gate._s_len == o3_dim(target) and
           sum(g[3] for g in gated) == gate._g_len, f"interaction {t} gate slices")
    return {"scalars": [int(gate._s_start), int(gate._s_len)], "gates": [int(gate._g_start), int(gate._g_len)],
            "gated": gated, "scalar_cst": _finite(float(gate._scalar_cst), f"interaction {t} gate constant"),
            "gate_cst": _finite(float(gate._gate_cst), f"interaction {t} gate constant")}


def o3_dim(irreps_text):
    from e3nn import o3

    return o3.Irreps(irreps_text).dim


def _nonlinear_interaction_hyperparameters(t, inter, num_bessel, max_ell, node_attrs_irreps):
    """RealAgnosticResidualNonLinearInteractionBlock (mace-torch >= 0.3.14; MACE-MH-1, OMOL)."""
    from e3nn import o3

    for name in ("source_embedding", "target_embedding", "linear_up", "linear_res", "linear_1", "linear_2",
                 "skip_tp"):
        if not isinstance(getattr(inter, name), o3.Linear):
            _refuse(f"interaction {t}: {name} is a {_qualified(getattr(inter, name))}, not an e3nn Linear")
    if not isinstance(inter.conv_tp, o3.TensorProduct):
        _refuse(f"interaction {t}: conv_tp is a {_qualified(inter.conv_tp)}, not an e3nn TensorProduct")
    node_feats = _irreps_str(inter.node_feats_irreps)
    edge_attrs = _irreps_str(inter.edge_attrs_irreps)
    target = _irreps_str(inter.target_irreps)
    hidden = _irreps_str(inter.hidden_irreps)
    edge = _irreps_str(getattr(inter, "edge_irreps", None) or inter.node_feats_irreps)
    irreps_mid = str(inter.conv_tp.irreps_out)
    nonlin = str(inter.irreps_nonlin)
    scalars = o3.Irreps(node_feats).count(o3.Irrep(0, 1))
    _check(edge_attrs == str(o3.Irreps.spherical_harmonics(max_ell)), f"interaction {t} edge_attrs_irreps")
    for name, irreps_in, irreps_out in (("source_embedding", node_attrs_irreps, f"{scalars}x0e"),
                                        ("target_embedding", node_attrs_irreps, f"{scalars}x0e"),
                                        ("linear_up", node_feats, edge), ("linear_res", edge, nonlin),
                                        ("linear_1", irreps_mid, nonlin), ("linear_2", target, target),
                                        ("skip_tp", node_feats, hidden)):
        module = getattr(inter, name)
        _check(_irreps_str(module.irreps_in) == _irreps_str(irreps_in) and
               _irreps_str(module.irreps_out) == _irreps_str(irreps_out), f"interaction {t} {name} irreps")
    tp = inter.conv_tp
    _check(str(tp.irreps_in1) == edge and str(tp.irreps_in2) == edge_attrs, f"interaction {t} conv_tp inputs")
    instructions = _conv_tp_instructions(t, tp)
    radial_in = num_bessel + 2 * scalars
    widths = _radial_mlp_widths(t, "conv_tp_weights", inter.conv_tp_weights)
    _check(widths[0] == radial_in and widths[-1] == tp.weight_numel, f"interaction {t} radial MLP widths {widths}")
    density = _radial_mlp_widths(t, "density_fn", inter.density_fn)
    _check(density[0] == radial_in and density[-1] == 1, f"interaction {t} density_fn widths {density}")
    hyperparameters = {
        "class": NONLINEAR_INTERACTION,
        "node_feats_irreps": node_feats,
        "edge_attrs_irreps": edge_attrs,
        "edge_feats_irreps": _irreps_str(inter.edge_feats_irreps),
        "target_irreps": target,
        "hidden_irreps": hidden,
        "irreps_mid": irreps_mid,
        "irreps_nonlin": nonlin,
        "skip_tp_irreps_out": hidden,
        "conv_tp_weight_numel": int(tp.weight_numel),
        "conv_tp_instructions": instructions,
        # [num_bessel + 2 x node scalars, hidden.., weight_numel]: torch Linear + LayerNorm + SiLU.
        "radial_mlp": widths,
        "density_mlp": density,
        "gate": _gate_hyperparameters(t, inter.equivariant_nonlin, target),
        # Unused by the block's forward (the density normalises the messages), kept for readers.
        "avg_num_neighbors": float(inter.avg_num_neighbors),
    }
    if edge != node_feats:
        hyperparameters["edge_irreps"] = edge
    return hyperparameters


def _embedding_hyperparameters(model, dim, num_heads):
    """--embedding_specs (MACE-OMOL): per-structure features embedded (a table per categorical
    one, Linear-SiLU-Linear per continuous one), concatenated, projected by a Linear without bias
    and SiLU to the embedding's width, and added to every node's embedding; with
    --use_embedding_readout a LinearReadoutBlock of those features adds an energy per node."""
    import torch
    from mace.modules.blocks import LinearReadoutBlock
    from mace.modules.embeddings import GenericJointEmbedding

    je = model.joint_embedding
    _check(type(je) is GenericJointEmbedding and int(je.base_dim) == dim and int(je.out_dim) == dim,  # pylint: disable=unidiomatic-typecheck
           f"joint_embedding maps to the node embedding's {dim} scalars")
    specs = dict(model.embedding_specs)
    _check(list(je.specs) == list(specs) and list(je.embedders) == list(specs),
           "joint_embedding embeds the model's embedding_specs, in their order")
    features = []
    for name, spec in specs.items():
        if name not in ("total_charge", "total_spin"):
            _refuse(f"embedding_specs has the feature '{name}' (supported: total_charge and total_spin, which "
                    f"pair_style fastmlip/mace takes as its charge and spin keywords)")
        if spec.get("per") != "graph":
            _refuse(f"embedding_specs feature '{name}' is per {spec.get('per')!r} (supported: per graph, one "
                    f"value per structure)")
        emb, width = je.embedders[name], int(spec["emb_dim"])
        entry = {"name": name, "type": spec.get("type"), "emb_dim": width}
        if spec.get("type") == "categorical":
            _check(type(emb) is torch.nn.Embedding and emb.num_embeddings == int(spec["num_classes"]) and  # pylint: disable=unidiomatic-typecheck
                   emb.embedding_dim == width, f"embedding feature {name} is a table of num_classes x emb_dim")
            offset = spec.get("offset", 0)
            _check(float(offset) == int(offset), f"embedding feature {name} has an integer offset")
            entry.update(num_classes=int(spec["num_classes"]), offset=int(offset))
        elif spec.get("type") == "continuous":
            use_bias = bool(spec.get("use_bias", True))
            layers = list(emb) if type(emb) is torch.nn.Sequential else []  # pylint: disable=unidiomatic-typecheck
            _check(int(spec.get("in_dim", 0)) == 1 and len(layers) == 3 and
                   [type(m) for m in layers] == [torch.nn.Linear, torch.nn.SiLU, torch.nn.Linear] and
                   (layers[0].in_features, layers[0].out_features, layers[2].in_features,
                    layers[2].out_features) == (1, width, width, width) and
                   (layers[0].bias is not None) == use_bias == (layers[2].bias is not None),
                   f"embedding feature {name} is Linear(1, emb_dim) - SiLU - Linear(emb_dim, emb_dim)")
            entry.update(in_dim=1, use_bias=use_bias)
        else:
            _refuse(f"embedding_specs feature '{name}' has type {spec.get('type')!r} (supported: categorical, "
                    f"continuous)")
        features.append(entry)
    project = list(je.project) if type(je.project) is torch.nn.Sequential else []  # pylint: disable=unidiomatic-typecheck
    _check(len(project) == 2 and type(project[0]) is torch.nn.Linear and project[0].bias is None and  # pylint: disable=unidiomatic-typecheck
           type(project[1]) is torch.nn.SiLU and project[0].in_features == sum(f["emb_dim"] for f in features) and  # pylint: disable=unidiomatic-typecheck
           project[0].out_features == dim, "joint_embedding.project is Linear(sum of emb_dim, dim, no bias) - SiLU")
    readout = hasattr(model, "embedding_readout")
    if readout:
        r = model.embedding_readout
        _check(type(r) is LinearReadoutBlock and str(r.linear.irreps_in) == f"{dim}x0e" and  # pylint: disable=unidiomatic-typecheck
               str(r.linear.irreps_out) == f"{num_heads}x0e", "embedding_readout is a LinearReadoutBlock to the heads")
    return {"features": features, "readout": readout}


def _product_hyperparameters(t, prod, residual, num_elements):
    from e3nn import o3
    from mace.modules.symmetric_contraction import SymmetricContraction

    sc = prod.symmetric_contractions
    if not isinstance(sc, SymmetricContraction) or not isinstance(prod.linear, o3.Linear):
        _refuse(f"product {t} is built from {type(sc).__module__}.{type(sc).__name__} "
                f"(cuEquivariance or unknown), not mace-torch's SymmetricContraction")
    correlations = {int(c.correlation) for c in sc.contractions}
    _check(len(correlations) == 1, f"product {t} has per-irrep correlations {sorted(correlations)}")
    correlation = correlations.pop()
    if not 1 <= correlation <= MAX_CORRELATION:
        _refuse(f"product {t} has correlation {correlation}")
    # use_agnostic_product: one set of weights for every species (mace-torch builds the
    # contraction with num_elements 1 and feeds it a one-hot of ones).
    agnostic = bool(getattr(prod, "use_agnostic_product", False))
    weight_sets = 1 if agnostic else num_elements
    for o, c in enumerate(sc.contractions):
        _check(len(c.weights) == correlation - 1 and tuple(c.weights_max.shape[:1]) == (weight_sets,),
               f"product {t} contraction {o} weights: expected {weight_sets} set(s) with use_agnostic_product "
               f"{agnostic}, found {list(c.weights_max.shape[:1])}")
    irreps_in = str(sc.irreps_in)
    irreps_out = str(sc.irreps_out)
    _check(str(prod.linear.irreps_in) == irreps_out and str(prod.linear.irreps_out) == irreps_out,
           f"product {t} linear irreps")
    out = {
        "correlation": correlation,
        "irreps_in": irreps_in,
        "irreps_out": irreps_out,
        # mace-torch keeps use_sc=True on every layer after the first, but only residual
        # interactions return a self-connection (the non-residual block returns None and
        # EquivariantProductBasisBlock then adds nothing): written is whether one is added.
        "use_sc": bool(prod.use_sc) and residual,
    }
    if agnostic:  # written only when set, so files of other models are unchanged
        out["agnostic"] = True
    return out


def _readout_hyperparameters(t, readout, num_heads):
    from e3nn import nn, o3
    from mace.modules import blocks
    from mace.modules.blocks import LinearReadoutBlock, NonLinearReadoutBlock

    # mace-torch < 0.3.14 has no NonLinearBiasReadoutBlock.
    NonLinearBiasReadoutBlock = getattr(blocks, "NonLinearBiasReadoutBlock", None)  # pylint: disable=invalid-name

    heads_out = f"{num_heads}x0e"
    cls = type(readout).__name__
    if type(readout) is LinearReadoutBlock:  # pylint: disable=unidiomatic-typecheck
        if not isinstance(readout.linear, o3.Linear):
            _refuse(f"readout {t}: linear is not an e3nn Linear")
        _check(str(readout.linear.irreps_out) == heads_out, f"readout {t} output irreps")
        return {"class": cls, "irreps_in": str(readout.linear.irreps_in), "irreps_out": heads_out}
    # NonLinearBiasReadoutBlock (MACE-MH-1): linear_1, the gate, linear_mid with a bias, the gate
    # again, linear_2 with a bias; with heads, mask_head after each gate.
    biased = type(readout) is NonLinearBiasReadoutBlock  # pylint: disable=unidiomatic-typecheck
    if type(readout) is NonLinearReadoutBlock or biased:  # pylint: disable=unidiomatic-typecheck
        if not isinstance(readout.linear_1, o3.Linear) or not isinstance(readout.linear_2, o3.Linear):
            _refuse(f"readout {t}: linear_1/linear_2 are not e3nn Linear modules")
        mlp = str(readout.linear_1.irreps_out)
        _check(_irreps_str(readout.hidden_irreps) == mlp and str(readout.linear_2.irreps_in) == mlp,
               f"readout {t} MLP irreps")
        if biased:
            mid = getattr(readout, "linear_mid", None)
            _check(isinstance(mid, o3.Linear) and str(mid.irreps_in) == mlp and str(mid.irreps_out) == mlp,
                   f"readout {t} ({cls}) linear_mid is an e3nn Linear {mlp} -> {mlp}")
            for name, lin in (("linear_mid", mid), ("linear_2", readout.linear_2)):
                _check(tuple(lin.bias.shape) == (lin.irreps_out.count(o3.Irrep("0e")),),
                       f"readout {t} ({cls}) {name} has one bias per scalar output")
        _check(str(readout.linear_2.irreps_out) == heads_out, f"readout {t} output irreps")
        act = readout.non_linearity
        _check(isinstance(act, nn.Activation) and len(act.acts) == len(o3.Irreps(mlp)),
               f"readout {t} activation")
        if any(ir.l != 0 or ir.p != 1 for _, ir in o3.Irreps(mlp)):
            _refuse(f"readout {t}: MLP irreps {mlp} are not all even scalars")
        gates = {_act_constant(a, f"readout {t} gate") for a in act.acts}
        _check(len(gates) == 1, f"readout {t} gates {gates}")
        gate, gate_cst = gates.pop()
        # mask_head (mace/modules/irreps_tools.py) gives head h the hidden units
        # [h*M, (h+1)*M), M = dim/num_heads; models saved before heads lack the attribute.
        readout_heads = int(getattr(readout, "num_heads", 1))
        _check(readout_heads == num_heads, f"readout {t} num_heads {readout_heads} vs {num_heads} heads")
        _check(o3.Irreps(mlp).dim % num_heads == 0, f"readout {t} MLP width vs heads")
        return {"class": cls, "irreps_in": str(readout.linear_1.irreps_in), "mlp_irreps": mlp, "gate": gate,
                "gate_cst": gate_cst, "num_heads": readout_heads, "irreps_out": heads_out}
    _refuse(f"readout {t} is a {cls}")
    return None  # not reached


def _hidden_irreps_supported(irreps_text):
    """Cx0e, Cx0e+Cx1o or Cx0e+Cx1o+Cx2e: one multiplicity, l = 0..L with parity (-1)^l."""
    from e3nn import o3

    irreps = o3.Irreps(irreps_text)
    if len(irreps) == 0 or len(irreps) > MAX_HIDDEN_L + 1:
        return False
    mul = irreps[0].mul
    return all(m == mul and ir.l == l and ir.p == (-1) ** l for l, (m, ir) in enumerate(irreps))


def _qualified(obj):
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _audit(model):
    """Refuses (UnsupportedModelError) any module, tensor or plain attribute of `model` that the
    allow-lists above do not name, and checks the values of those that matter."""
    import re

    import torch

    # N in a pattern stands for a list index (the only capital N the patterns hold).
    patterns = [re.compile(p.replace("N", r"\d+") + "$") for p in _ALLOWED_TENSORS]
    generated = set()
    for path, module in model.named_modules():
        where = f"module '{path or '<model>'}'"
        if any(path.startswith(g + ".") for g in generated):
            continue  # inside generated code: its tensors are checked below
        parent_attr = path.rsplit(".", 2)[-2] if path.rsplit(".", 1)[-1].isdigit() else path.rsplit(".", 1)[-1]
        if isinstance(module, (torch.jit.ScriptModule, torch.fx.GraphModule)):
            if parent_attr not in _GENERATED_CODE:
                _refuse(f"{where} is compiled code ({_qualified(module)}) where the converter expects none")
            if any(True for _ in module.parameters()):
                _refuse(f"{where} (compiled code) has parameters")
            generated.add(path)
            continue
        qualified = _qualified(module)
        if qualified not in ALLOWED_MODULE_CLASSES:
            _refuse(f"{where} is a {qualified}, which the converter does not know")
        rules = _CLASS_ATTRIBUTES.get(qualified, _CLASS_ATTRIBUTES.get(type(module).__name__))
        if rules is None:  # e3nn and torch containers: their structure is checked by inspect()
            continue
        for name, value in vars(module).items():
            if name.startswith("_") or name == "training":
                continue
            rule = rules.get(name)
            if rule is None:
                _refuse(f"{where} ({type(module).__name__}) has the attribute {name} = {value!r:.80}, "
                        f"which the converter does not know")
            if not rule(value):
                _refuse(f"{where} ({type(module).__name__}) has {name} = {value!r:.80}")

    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if not any(p.match(name) for p in patterns):
            _refuse(f"the model holds a tensor '{name}' (shape {list(tensor.shape)}, {tensor.dtype}) "
                    f"that the converter does not know")
        if re.search(r"\.bias$", name) and tensor.numel() != 0 and not _BIASED.match(name):
            _refuse(f"'{name}' is a non-empty bias ({tensor.numel()} values); supported are e3nn "
                    f"Linear modules without biases")
        if name.endswith("_zeroed"):
            _check(tensor.dtype == torch.bool and tensor.numel() == 1, f"'{name}' is one boolean")
            prefix, flag = name.rsplit(".", 1)
            contraction = model.get_submodule(prefix)
            correlation = int(contraction.correlation)
            nu = correlation if flag == "weights_max_zeroed" else int(flag.split("_")[1]) + 1
            _check(1 <= nu <= correlation, f"'{name}' names a contraction order")
            u = getattr(contraction, f"U_matrix_{nu}")
            _check(bool(tensor) == (not bool(torch.any(u != 0))),
                   f"'{name}' = {bool(tensor)} agrees with U_matrix_{nu} being all zeros")


def inspect(model):
    """The metadata fields of `model` (species, r_max, dtype, hyperparameters), or
    UnsupportedModelError. Does not touch the tensors beyond reading a few buffers."""
    import torch

    if isinstance(model, torch.jit.ScriptModule):
        _refuse("the model is TorchScript-compiled (a *_compiled.model); convert the plain "
                "torch.save'd module that mace's run_train writes next to it")
    cls = type(model).__name__
    if cls not in ("MACE", "ScaleShiftMACE") or not type(model).__module__.startswith("mace."):
        _refuse(f"the model is a {type(model).__module__}.{cls}")
    _audit(model)
    try:
        return _inspect_structure(model, cls)
    except (AttributeError, KeyError, IndexError, TypeError) as e:
        # A module without an attribute every supported model has: built by other code.
        _refuse(f"unexpected model structure: {type(e).__name__}: {e} "
                f"(known: mace-torch {TESTED_MACE_VERSIONS})")
    return None  # not reached


def _inspect_structure(model, cls):
    import ase.data
    import torch
    from e3nn import o3
    from mace.modules.blocks import AtomicEnergiesBlock, RadialEmbeddingBlock
    from mace.modules.radial import (AgnesiTransform, BesselBasis, ChebychevBasis, GaussianBasis, PolynomialCutoff,
                                     SoftTransform, ZBLBasis)

    float_dtypes = {v.dtype for v in model.state_dict().values() if v.is_floating_point()}
    if float_dtypes - {torch.float32, torch.float64} or len(float_dtypes) != 1:
        _refuse(f"the model's floating tensors have dtypes {sorted(str(d) for d in float_dtypes)} "
                f"(one of float32, float64 expected)")
    model_dtype = "float64" if float_dtypes == {torch.float64} else "float32"

    atomic_numbers = [int(z) for z in model.atomic_numbers.tolist()]
    if len(set(atomic_numbers)) != len(atomic_numbers) or not all(1 <= z <= 118 for z in atomic_numbers):
        raise ValueError(f"mace_to_fastmlip: the model's atomic_numbers {atomic_numbers} are not distinct "
                         f"elements")
    species = [{"Z": z, "symbol": ase.data.chemical_symbols[z]} for z in atomic_numbers]
    num_elements = len(atomic_numbers)
    node_attrs_irreps = f"{num_elements}x0e"

    heads = [str(h) for h in getattr(model, "heads", None) or ["Default"]]
    if len(set(heads)) != len(heads):
        raise ValueError(f"mace_to_fastmlip: the model's head names {heads} repeat")

    # Radial embedding: basis x polynomial envelope, the basis optionally at a transformed
    # distance (the transform's constants and radii are tensors, written as they are).
    radial = model.radial_embedding
    _check(isinstance(radial, RadialEmbeddingBlock), "radial_embedding")
    radial_types = {BesselBasis: "bessel", GaussianBasis: "gaussian", ChebychevBasis: "chebyshev"}
    if type(radial.bessel_fn) not in radial_types:  # pylint: disable=unidiomatic-typecheck
        _refuse(f"the radial basis is {type(radial.bessel_fn).__name__}")
    radial_type = radial_types[type(radial.bessel_fn)]
    distance_transform = "None"
    if hasattr(radial, "distance_transform"):
        transforms = {AgnesiTransform: "Agnesi", SoftTransform: "Soft"}
        if type(radial.distance_transform) not in transforms:  # pylint: disable=unidiomatic-typecheck
            _refuse(f"the radial basis has a {type(radial.distance_transform).__name__} distance transform")
        distance_transform = transforms[type(radial.distance_transform)]
        radii = radial.distance_transform.covalent_radii
        for z in atomic_numbers:
            _check(z < radii.numel() and float(radii[z]) > 0,
                   f"the {distance_transform} transform has a positive covalent radius for Z = {z}")
    _check(isinstance(radial.cutoff_fn, PolynomialCutoff), "cutoff_fn")
    r_max = _finite(float(model.r_max), "r_max")
    _check(float(radial.cutoff_fn.r_max) == r_max, "r_max of the model and the cutoff agree")
    basis = radial.bessel_fn
    if radial_type == "bessel":
        _check(float(basis.r_max) == r_max, "r_max of the model and the Bessel basis agree")
        num_bessel = int(basis.bessel_weights.shape[0])
    elif radial_type == "gaussian":
        # coeff is a plain attribute, not saved: written to the hyperparameters as the model
        # holds it. It need not be what r_max and N give here: GaussianBasis computes it from the
        # Python r_max, which a float32 model's r_max buffer holds rounded (4.7 -> 4.69999980...).
        num_bessel = int(basis.gaussian_weights.shape[0])
        gaussian_coeff = _finite(float(basis.coeff), "the Gaussian basis' coeff")
        _check(num_bessel >= 2 and gaussian_coeff < 0, "the Gaussian basis has N >= 2 and a negative coeff")
    else:
        # torch.special.chebyshev_polynomial_t has no derivative in torch, so mace-torch's own
        # forces and stress for this basis leave out dB/dr; fastmlip's are -dE/dr exactly.
        warnings.warn("mace_to_fastmlip: the model has a Chebyshev radial basis; mace-torch computes its forces "
                      "and stress without the basis' derivative (torch.special.chebyshev_polynomial_t is not "
                      "differentiable), fastmlip as the exact -dE/dr of the same energy: energies agree, forces "
                      "and stress differ by that term (docs/mace-potential.md)", stacklevel=2)
        num_bessel = int(basis.n.numel())
        _check(float(basis.r_max) == r_max and basis.num_basis == num_bessel and
               [float(v) for v in basis.n.flatten().tolist()] == [float(k) for k in range(1, num_bessel + 1)],
               "the Chebyshev basis has orders 1..N and the model's r_max")
    _check(int(radial.out_dim) == num_bessel, "the radial embedding's width is its basis size")
    # apply_cutoff False (mace-torch >= 0.3.14, MACE-OMOL): RadialEmbeddingBlock returns the basis
    # without the envelope and the envelope separately, which every supported interaction block
    # multiplies into its radial MLP output (and the Density blocks into their edge density).
    apply_cutoff = bool(getattr(radial, "apply_cutoff", True))
    _check(bool(getattr(model, "apply_cutoff", True)) == apply_cutoff,
           "the model's apply_cutoff and its radial embedding's agree")
    if not apply_cutoff and _version_tuple(_mace_version()) < (0, 3, 14):
        # Older mace-torch code ignores the flag: the model it runs has the envelope on the basis.
        _refuse(f"apply_cutoff = False under mace-torch {_mace_version()}, whose forward ignores it "
                f"(convert with the mace-torch 0.3.14 or later that saved the model)")
    p = int(radial.cutoff_fn.p)

    sh = model.spherical_harmonics
    _check(isinstance(sh, o3.SphericalHarmonics) and sh.normalize and sh.normalization == "component",
           "spherical harmonics normalize=True, normalization='component'")
    max_ell = int(sh._lmax)  # pylint: disable=protected-access
    _check(str(sh.irreps_out) == str(o3.Irreps.spherical_harmonics(max_ell)), "spherical harmonics irreps")
    if not 1 <= max_ell <= MAX_ELL:
        _refuse(f"the spherical harmonics have max_ell {max_ell}")

    num_interactions = len(model.interactions)
    # use_last_readout_only (mace-torch >= 0.3.14): one readout, the last layer's, at readouts[0].
    last_readout_only = bool(getattr(model, "use_last_readout_only", False))
    if last_readout_only and num_interactions < 2:
        # mace-torch then builds no readout at all (its first layer's readout is the one dropped).
        _refuse(f"use_last_readout_only with {num_interactions} interaction (no readout)")
    _check(num_interactions == int(model.num_interactions) == len(model.products) and
           len(model.readouts) == (1 if last_readout_only else num_interactions),
           f"interaction, product and readout counts ({num_interactions} interactions, {len(model.readouts)} "
           f"readouts, use_last_readout_only {last_readout_only})")
    if not 1 <= num_interactions <= MAX_INTERACTIONS:
        _refuse(f"the model has {num_interactions} interactions")

    if not isinstance(model.node_embedding.linear, o3.Linear):
        _refuse("the node embedding is not an e3nn Linear")
    _check(str(model.node_embedding.linear.irreps_in) == node_attrs_irreps, "node embedding input irreps")

    interactions, products, readouts = [], [], []
    features = str(model.node_embedding.linear.irreps_out)
    _check(hasattr(model, "embedding_specs") == hasattr(model, "joint_embedding") and
           (hasattr(model, "joint_embedding") or not hasattr(model, "embedding_readout")),
           "embedding_specs, joint_embedding and embedding_readout together")
    embeddings = None
    if hasattr(model, "joint_embedding"):
        embeddings = _embedding_hyperparameters(model, o3.Irreps(features).dim, len(heads))
    for t in range(num_interactions):
        inter = model.interactions[t]
        residual, hp = _interaction_hyperparameters(t, inter, num_bessel, max_ell, node_attrs_irreps)
        _check(hp["node_feats_irreps"] == features, f"interaction {t} input is the previous layer's output")
        if not _hidden_irreps_supported(hp["hidden_irreps"]):
            _refuse(f"interaction {t} has hidden irreps {hp['hidden_irreps']}")
        product = _product_hyperparameters(t, model.products[t], residual, num_elements)
        if hasattr(model, "use_agnostic_product"):
            _check(product.get("agnostic", False) == bool(model.use_agnostic_product),
                   f"product {t}'s use_agnostic_product agrees with the model's")
        _check(product["irreps_in"] == hp["target_irreps"] and product["irreps_out"] == hp["hidden_irreps"],
               f"product {t} irreps follow interaction {t}")
        interactions.append(hp)
        products.append(product)
        if not last_readout_only or t == num_interactions - 1:
            k = 0 if last_readout_only else t
            readout = _readout_hyperparameters(k, model.readouts[k], len(heads))
            _check(readout["irreps_in"] == product["irreps_out"], f"readout {k} input irreps")
            readouts.append(readout)
        features = product["irreps_out"]
    # mace-torch keeps only the scalars after the last product, unless keep_last_layer_irreps
    # (mace-torch >= 0.3.14, not an attribute: seen in the irreps): then the last layer keeps the
    # full hidden irreps, and its readout, an e3nn Linear to scalars, reads their 0e part alone.
    # The same blocks evaluate it; the flag is recorded for readers.
    keep_last_layer_irreps = num_interactions > 1 and any(ir.l != 0 or ir.p != 1
                                                          for _, ir in o3.Irreps(features))

    _check(isinstance(model.atomic_energies_fn, AtomicEnergiesBlock), "atomic_energies_fn")
    e0_shape = tuple(model.atomic_energies_fn.atomic_energies.shape)
    _check(e0_shape in {(num_elements,), (len(heads), num_elements)} and (len(e0_shape) == 2 or len(heads) == 1),
           f"atomic_energies shape {e0_shape} for {len(heads)} heads and {num_elements} elements")
    if cls == "ScaleShiftMACE":
        for name in ("scale", "shift"):
            n = getattr(model.scale_shift, name).numel()
            _check(n == len(heads) or (n == 1 and len(heads) == 1), f"scale_shift.{name} has {n} values")

    zbl = None
    # MACE.forward adds the pair energy when the attribute pair_repulsion exists.
    _check(hasattr(model, "pair_repulsion") == hasattr(model, "pair_repulsion_fn"), "pair_repulsion flag and module")
    if hasattr(model, "pair_repulsion"):
        fn = model.pair_repulsion_fn
        if type(fn) is not ZBLBasis:  # pylint: disable=unidiomatic-typecheck
            _refuse(f"the pair repulsion is a {type(fn).__name__}")
        radii = fn.covalent_radii.tolist()
        zbl = {
            "p": int(fn.p),
            "a_exp": float(fn.a_exp),
            "a_prefactor": float(fn.a_prefactor),
            "c": [float(x) for x in fn.c.tolist()],
            # Also in the tensor pair_repulsion_fn.covalent_radii (indexed by Z); here per species.
            "covalent_radii": [float(radii[z]) for z in atomic_numbers],
            "screening_exponents": ZBL_SCREENING_EXPONENTS,
            "bohr_radius": ZBL_BOHR_RADIUS,
            "coulomb_constant": ZBL_COULOMB_CONSTANT,
        }

    hyperparameters = {
        "model_class": cls,
        "num_elements": num_elements,
        "r_max": r_max,
        "num_bessel": num_bessel,
        "num_polynomial_cutoff": p,
        "radial_type": radial_type,
        "distance_transform": distance_transform,
        "max_ell": max_ell,
        "num_interactions": num_interactions,
        "heads": heads,
        "interactions": interactions,
        "products": products,
        "readouts": readouts,
        "zbl": zbl,
    }
    if last_readout_only:
        hyperparameters["use_last_readout_only"] = True
    if not apply_cutoff:
        hyperparameters["apply_cutoff"] = False
    if radial_type == "gaussian":
        hyperparameters["gaussian_coeff"] = gaussian_coeff
    if keep_last_layer_irreps:
        hyperparameters["keep_last_layer_irreps"] = True
    if embeddings is not None:
        hyperparameters["embeddings"] = embeddings
    return {"species": species, "r_max": r_max, "dtype": model_dtype, "hyperparameters": hyperparameters}


def _tensors(model):
    """state_dict entries as little-endian numpy arrays: floats as float64, integers as int64."""
    import torch

    out = {}
    for name, value in model.state_dict().items():
        v = value.detach().cpu()
        if v.is_floating_point():
            a = v.to(torch.float64).numpy().astype("<f8")  # float32 -> float64 is exact
        elif v.dtype == torch.bool and name.endswith("_zeroed"):
            a = v.numpy().astype("<i8")  # the *_zeroed flags (see _ALLOWED_TENSORS) as 0 / 1
        elif v.dtype == torch.bool or v.is_complex():
            raise ValueError(f"mace_to_fastmlip: state_dict entry '{name}' has dtype {v.dtype}")
        else:
            a = v.numpy().astype("<i8")
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            raise ValueError(f"mace_to_fastmlip: state_dict entry '{name}' has non-finite values")
        out[name] = a.copy(order="C")  # (np.ascontiguousarray would turn a 0-d scalar into shape [1])
    return out


def _check_finite_json(obj, where="metadata"):
    if isinstance(obj, float):
        _finite(obj, where)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _check_finite_json(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_finite_json(v, f"{where}[{i}]")


def _mace_version():
    import mace

    return getattr(mace, "__version__", "?")


def _version_tuple(text):
    """(major, minor, patch) of "0.3.16" and the like; (0, 0, 0) when unreadable."""
    import re

    parts = [int(p) for p in re.findall(r"\d+", text)[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def _versions():
    import e3nn
    import mace
    import torch

    return f"mace-torch {mace.__version__}, e3nn {e3nn.__version__}, torch {torch.__version__}"


def uses_cueq(model):
    """True for a model with cuEquivariance's modules (mace-torch's convert_e3nn_cueq, or a model
    built with a cueq_config enabled), whether their classes are installed or were read as
    placeholders (mace_cueq.load_with_stubs). A cueq_config flag on e3nn modules alone is not:
    the audit refuses that mix."""
    return any(mace_cueq.is_cueq_module_name(type(m).__module__) for m in model.modules())


def from_cueq(model):
    """The e3nn twin of a cuEquivariance model (mace_cueq.e3nn_twin): mace-torch builds the e3nn
    model of the same configuration, every weight is copied, and each symmetric contraction
    takes cuEquivariance's basis (read from the pickled polynomial) as its U tensors, with
    cuEquivariance's weights unchanged. Needs neither cuEquivariance nor a GPU. The default
    dtype is left as it was."""
    def build(config):
        return type(model)(**config)

    try:
        return mace_cueq.e3nn_twin(model, build)
    except mace_cueq.CueqLayoutError as e:
        _refuse(f"the model uses cuEquivariance layouts that the converter cannot read: {e}")
    except mace_cueq.TwinBuildError as e:
        _refuse(f"the model uses cuEquivariance layouts, and mace-torch cannot rebuild its e3nn form: {e}")
    return None


def convert(model, path, *, head=None, dtype="auto", source_sha256=None, source_name=None,
            provenance=None):
    """Write `model` (an in-memory mace-torch MACE / ScaleShiftMACE) to `path`.

    head: for a multi-head model, the head recorded as `default_head` (a reader may still
        pick another); must be one of the model's heads. Without it, the head named
        "default" (any case, as mace's ASE calculator chooses) if there is one, else none.
    dtype: "auto" records the model's own precision; "float32"/"float64" record that
        instead (the tensors are stored as F64 either way).
    source_sha256, source_name: provenance of a converted file (set by convert_file).
    provenance: extra free-form provenance keys (strings or numbers).

    A model with cuEquivariance layouts is first converted to its e3nn twin (from_cueq), which
    provenance records.

    Returns the fastmlip metadata object that was written. Raises UnsupportedModelError for a
    model outside SUPPORTED.
    """
    if uses_cueq(model):
        model = from_cueq(model)
        provenance = dict(provenance or {}, converted_from="cuEquivariance layouts, read as data (mace_cueq.py)")
    info = inspect(model)
    hyper = info["hyperparameters"]
    heads = hyper["heads"]
    if head is not None:
        if head not in heads:
            raise ValueError(f"mace_to_fastmlip: the model has no head '{head}'; its heads are {heads}")
        default_head = head
    else:
        named_default = [h for h in heads if h.lower() == "default"]
        default_head = heads[0] if len(heads) == 1 else (named_default[0] if len(named_default) == 1 else None)
    hyper["default_head"] = default_head

    if dtype not in ("auto", "float32", "float64"):
        raise ValueError(f"mace_to_fastmlip: dtype '{dtype}' is not auto, float32 or float64")
    prov = make_provenance(WRITER, _versions(), source_sha256=source_sha256, source_name=source_name,
                           extra=provenance, who="mace_to_fastmlip")

    meta = {
        "model": "mace",
        "species": info["species"],
        "cutoffs": {"r_max": info["r_max"]},
        "units": "metal",
        "dtype": info["dtype"] if dtype == "auto" else dtype,
        "hyperparameters": hyper,
        "provenance": prov,
    }
    _check_finite_json(meta)
    write_potential(path, meta, _tensors(model), who="mace_to_fastmlip")
    return meta


def load_model(path):
    """torch.load a mace-torch .model on the CPU (it is a pickle: only load files you trust).
    A model saved with cuEquivariance layouts where cuEquivariance is not installed is loaded
    with placeholders for its classes (mace_cueq.load_with_stubs)."""
    import torch

    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except TypeError:  # torch without the weights_only argument
            return torch.load(path, map_location="cpu")
    except ModuleNotFoundError as e:
        if not mace_cueq.is_cueq_module_name(e.name or ""):
            raise
    if hasattr(path, "seek"):
        path.seek(0)
    return mace_cueq.load_with_stubs(path)


def convert_file(model_path, out_path, *, head=None, dtype="auto"):
    """Convert the mace-torch .model file at `model_path`; provenance records its SHA-256."""
    digest = sha256_of(model_path)
    try:
        model = load_model(model_path)
    except (OSError, ValueError):
        raise
    except Exception as e:  # pylint: disable=broad-except
        # Unpickling runs the saving code's classes: a model saved by code that is not installed
        # here (another mace-torch version, a fork) fails with whatever that code raises.
        raise ValueError(f"cannot load it with the installed mace-torch {_mace_version()}: "
                         f"{type(e).__name__}: {e}") from e
    return convert(model, out_path, head=head, dtype=dtype, source_sha256=digest,
                   source_name=os.path.basename(model_path))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="mace_to_fastmlip.py",
        description="Convert a mace-torch .model (torch.save of a MACE or ScaleShiftMACE) to a fastmlip "
                    "potential file (docs/mace-potential.md).",
        epilog=SUPPORTED[0].upper() + SUPPORTED[1:] + ".")
    parser.add_argument("model", help="the mace-torch .model file (a pickle: only convert files you trust)")
    parser.add_argument("-o", "--output", required=True, help="the .safetensors file to write")
    parser.add_argument("--head", default=None,
                        help="for a multi-head model, the head to record as the default (all heads are kept)")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "float64"),
                        help="precision recorded in the metadata (default: the model's own); tensors are F64")
    args = parser.parse_args(argv)
    try:
        meta = convert_file(args.model, args.output, head=args.head, dtype=args.dtype)
    except UnsupportedModelError as e:
        print(f"mace_to_fastmlip: {args.model}: unsupported model: {e}", file=sys.stderr)
        return EXIT_UNSUPPORTED
    except (ValueError, OSError) as e:
        print(f"mace_to_fastmlip: {args.model}: {e}", file=sys.stderr)
        return 1
    hp = meta["hyperparameters"]
    print(f"wrote {args.output}: {hp['model_class']}, {hp['num_interactions']} interactions, "
          f"species {[s['symbol'] for s in meta['species']]}, r_max {meta['cutoffs']['r_max']}, "
          f"heads {hp['heads']} (default {hp['default_head']}), dtype {meta['dtype']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

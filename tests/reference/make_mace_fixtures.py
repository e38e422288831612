# SPDX-License-Identifier: MIT
"""Parity fixtures for the MACE model: mace-torch models, their converted potential files, and
what mace-torch computes for them on a set of structures.

Run in the reference venv (tests/reference/setup-venv.sh), from the repository root:

    .venv/bin/python tests/reference/make_mace_fixtures.py
    .venv-torch2/bin/python tests/reference/make_mace_fixtures.py --models NAME[,NAME...]

The first (mace-torch 0.3.13) builds every model but those marked with a newer "mace_torch"
(options that 0.3.14 added), whose files and index entries it keeps; the second rebuilds the
named models under mace-torch 0.3.16 (setup-venv-torch2.sh) and merges them into index.json,
each such entry recording its own versions.

Writes tests/reference/data/mace/ (the C++ tests only read these files; see the README there):

- <model>.safetensors: the model converted by potentials/convert/mace_to_fastmlip.py;
- <model>.json: the structures and, for each (structure, head), mace-torch's energy, per-atom
  energies, forces, virial and stress;
- index.json: the list of models, their files, and the checks this script made.

Every model is a freshly constructed mace-torch MACE / ScaleShiftMACE whose parameters all get
N(0, 0.3) noise on top of mace-torch's initialisation (so that no weight has its initial
value and none is zero), with non-trivial E0s, scale, shift, per-interaction
avg_num_neighbors, Bessel frequencies and ZBL parameters: a loader that recomputes any of them
instead of reading the file fails the parity test.

Besides writing the fixtures, the script checks, and stops on the first failure:

1. every converted file holds the model's state_dict verbatim (widened to F64 / I64) and
   hyperparameters whose irreps strings equal those of the modules;
2. an independent evaluator written from docs/mace-potential.md (FileMace below), which reads
   only the converted file, reproduces mace-torch's energies, per-atom energies, forces and
   virials -- so the file and its hyperparameters are enough to evaluate the model, without
   mace-torch's construction code;
3. the command-line converter gives the same tensors and metadata from a torch.save'd .model
   file, records its SHA-256, and converts a float32 model exactly;
4. the converter refuses unsupported models (max_ell 4, hidden L = 3, an attention
   interaction block, four interactions, correlation 4, a tanh gate)
   with an UnsupportedModelError that lists what is supported, and exit code 2 on the command
   line;
5. writing every file twice gives the same bytes.

Deterministic: fixed seeds, float64, one thread (multi-threaded reductions change the last
bits run to run). The JSON numbers are Python reprs of doubles (exact round trip).
"""
import argparse
import contextlib
import hashlib
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

import ase
import ase.data
import e3nn
import mace
import numpy as np
import torch
from e3nn import o3
from mace import data as mace_data
from mace import modules
from mace.tools import torch_geometric
from mace.tools.utils import AtomicNumberTable
from safetensors import safe_open

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "reference" / "data" / "mace"
CONVERTER = REPO / "potentials" / "convert" / "mace_to_fastmlip.py"
sys.path.insert(0, str(CONVERTER.parent))
import mace_to_fastmlip as converter  # noqa: E402  pylint: disable=wrong-import-position

SCHEMA = "fastmlip-mace-fixture 1"
CU, NI, AL = 29, 28, 13
PARAMETER_NOISE = 0.3
# The MP-large file is too big to commit (24.5 MB in F64 even with two elements, mostly the
# U_matrix_3 coupling tensors of the L = 1 and 2 outputs): it is converted and checked here
# like the others, and listed in index.json with committed: false. The other models keep
# correlation 3 with max_ell 3 for the MP shapes only, for the same reason.
UNCOMMITTED = {"mp_large"}

# Reference E0s (eV) per element and head-specific offsets: distinct, non-round values.
E0 = {CU: -3.7152, NI: -5.5517, AL: -3.0271}

INTERACTION = {
    "RealAgnosticInteractionBlock": modules.RealAgnosticInteractionBlock,
    "RealAgnosticResidualInteractionBlock": modules.RealAgnosticResidualInteractionBlock,
    "RealAgnosticDensityInteractionBlock": modules.RealAgnosticDensityInteractionBlock,
    "RealAgnosticDensityResidualInteractionBlock": modules.RealAgnosticDensityResidualInteractionBlock,
}
if hasattr(modules.blocks, "RealAgnosticResidualNonLinearInteractionBlock"):  # mace-torch >= 0.3.14
    INTERACTION["RealAgnosticResidualNonLinearInteractionBlock"] = (
        modules.blocks.RealAgnosticResidualNonLinearInteractionBlock)

# name, what it covers, and mace-torch constructor arguments (JSON-able; classes by name).
MODELS = [
    {
        "name": "mace_1int_L0_corr1_ell1",
        "description": "MACE, 1 interaction (non-residual), hidden max_L 0, correlation 1, max_ell 1, "
                       "linear readout only",
        "class": "MACE", "seed": 101, "species": [CU, NI], "r_max": 4.5, "num_bessel": 6,
        "num_polynomial_cutoff": 6, "max_ell": 1, "num_interactions": 1, "hidden_irreps": "8x0e",
        "MLP_irreps": "4x0e", "correlation": 1, "radial_MLP": [16, 16],
        "interaction_cls_first": "RealAgnosticInteractionBlock",
        "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [7.3],
        "structures": "binary",
    },
    {
        "name": "ssmace_2int_L1_corr2_ell2_3el",
        "description": "ScaleShiftMACE, non-residual then residual interaction, hidden max_L 1, "
                       "correlation 2, max_ell 2, 3 elements in non-sorted order (Cu, Al, Ni)",
        "class": "ScaleShiftMACE", "seed": 102, "species": [CU, AL, NI], "r_max": 5.0, "num_bessel": 8,
        "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 2, "hidden_irreps": "8x0e+8x1o",
        "MLP_irreps": "8x0e", "correlation": 2, "radial_MLP": [16, 16, 16],
        "interaction_cls_first": "RealAgnosticInteractionBlock",
        "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [9.1, 11.7],
        "scale": 0.83, "shift": -0.21, "structures": "ternary",
    },
    {
        "name": "mace_3int_L2_corr3_ell2_nonresidual",
        "description": "MACE, 3 interactions all non-residual (RealAgnosticInteractionBlock also in "
                       "later layers), hidden max_L 2, correlation 3, max_ell 2",
        "class": "MACE", "seed": 103, "species": [NI, CU], "r_max": 4.0, "num_bessel": 5,
        "num_polynomial_cutoff": 6, "max_ell": 2, "num_interactions": 3, "hidden_irreps": "4x0e+4x1o+4x2e",
        "MLP_irreps": "6x0e", "correlation": 3, "radial_MLP": [8, 8],
        "interaction_cls_first": "RealAgnosticInteractionBlock",
        "interaction_cls": "RealAgnosticInteractionBlock", "avg_num_neighbors": [5.5, 6.5, 7.5],
        "structures": "binary",
    },
    {
        "name": "ssmace_2int_L1_corr2_ell3_zbl",
        "description": "ScaleShiftMACE with ZBL pair repulsion (scaled with the interaction energy), "
                       "non-residual then residual, hidden max_L 1, correlation 2, max_ell 3, 3 elements",
        "class": "ScaleShiftMACE", "seed": 104, "species": [AL, NI, CU], "r_max": 5.0, "num_bessel": 8,
        "num_polynomial_cutoff": 5, "max_ell": 3, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
        "MLP_irreps": "8x0e", "correlation": 2, "radial_MLP": [16, 16, 16],
        "interaction_cls_first": "RealAgnosticInteractionBlock",
        "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [10.3, 8.9],
        "scale": 1.31, "shift": 0.42, "pair_repulsion": True, "structures": "ternary",
    },
    {
        "name": "mace_2int_L1_corr2_ell2_zbl_residualfirst",
        "description": "MACE with ZBL pair repulsion (not scaled), residual interactions in every layer "
                       "(self-connection already after the first product), hidden max_L 1, correlation 2, "
                       "max_ell 2",
        "class": "MACE", "seed": 105, "species": [NI, CU], "r_max": 4.5, "num_bessel": 7,
        "num_polynomial_cutoff": 6, "max_ell": 2, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
        "MLP_irreps": "5x0e", "correlation": 2, "radial_MLP": [12, 12],
        "interaction_cls_first": "RealAgnosticResidualInteractionBlock",
        "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [6.1, 6.9],
        "pair_repulsion": True, "structures": "binary",
    },
    {
        "name": "ssmace_multihead_3int_L2_corr2",
        "description": "ScaleShiftMACE with three heads (pbe, r2scan, Default): E0, scale and shift per "
                       "head, one readout column per head, mask_head in the non-linear readout; 3 "
                       "interactions, hidden max_L 2, correlation 2, max_ell 2, 3 elements",
        "class": "ScaleShiftMACE", "seed": 106, "species": [NI, CU, AL], "r_max": 4.5, "num_bessel": 6,
        "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 3, "hidden_irreps": "4x0e+4x1o+4x2e",
        "MLP_irreps": "4x0e", "correlation": 2, "radial_MLP": [10, 10],
        "interaction_cls_first": "RealAgnosticInteractionBlock",
        "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [7.7, 8.4, 9.2],
        "heads": ["pbe", "r2scan", "Default"], "scale": [0.91, 1.12, 1.27], "shift": [-0.13, 0.05, 0.22],
        "structures": "ternary",
    },
]
# MACE-MPA-0 / OMAT-0 / MP-0b3's radial embedding: the Bessel basis at an Agnesi-transformed
# distance, with ZBL (their Density interaction blocks are not supported yet: the standard
# blocks stand in). Correlation 2: with 6 channels, correlation 3 and the transform's flat
# radial functions, the calibration leaves energies of -1000 eV per atom on the small cells.
MODELS.append({
    "name": "ssmace_2int_L1_corr2_ell3_zbl_agnesi",
    "description": "ScaleShiftMACE with the Agnesi distance transform (trained-looking a, q, p) and ZBL, "
                   "non-residual then residual, hidden max_L 1, correlation 2, max_ell 3, 3 elements",
    "class": "ScaleShiftMACE", "seed": 110, "species": [AL, NI, CU], "r_max": 5.0, "num_bessel": 8,
    "num_polynomial_cutoff": 5, "max_ell": 3, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "8x0e", "correlation": 2, "radial_MLP": [16, 16, 16],
    "interaction_cls_first": "RealAgnosticInteractionBlock",
    "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [11.6, 9.7],
    "scale": 1.17, "shift": -0.21, "pair_repulsion": True, "distance_transform": "Agnesi",
    "structures": "ternary",
})
# MACE-MPA-0 / OMAT-0 / MATPES's blocks: a Density block first (non-residual), then a
# DensityResidual one, with the Agnesi transform and ZBL: their architecture at a reduced width.
MODELS.append({
    "name": "ssmace_2int_L1_corr2_ell3_density_agnesi_zbl",
    "description": "ScaleShiftMACE as MACE-MPA-0 / OMAT-0 at reduced width: RealAgnosticDensityInteractionBlock "
                   "then RealAgnosticDensityResidualInteractionBlock (messages divided by 1 + a learned edge "
                   "density), the Agnesi distance transform and ZBL; hidden max_L 1, correlation 2, max_ell 3, "
                   "3 elements",
    "class": "ScaleShiftMACE", "seed": 111, "species": [NI, AL, CU], "r_max": 5.5, "num_bessel": 8,
    "num_polynomial_cutoff": 5, "max_ell": 3, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "8x0e", "correlation": 2, "radial_MLP": [16, 16, 16],
    "interaction_cls_first": "RealAgnosticDensityInteractionBlock",
    "interaction_cls": "RealAgnosticDensityResidualInteractionBlock", "avg_num_neighbors": [20.5, 21.5],
    "scale": 0.93, "shift": 0.11, "pair_repulsion": True, "distance_transform": "Agnesi",
    "structures": "ternary",
})
# mace-torch's other radial bases (radial_type) and its Soft distance transform: a Gaussian
# basis at the Soft-transformed distance, and a Chebyshev basis (T_1..T_N at r in A, so its
# features grow as r^N: the radial MLP sees values up to ~3e5 here) without a transform, on
# a plain MACE with a residual first block. Its reference forces are -dE/dr (see
# differentiable_chebyshev: mace-torch's own leave out the basis' derivative).
MODELS.append({
    "name": "ssmace_2int_L1_corr2_ell2_gaussian_soft",
    "description": "ScaleShiftMACE with radial_type 'gaussian' (8 Gaussians, centres read from the file) at the "
                   "Soft-transformed distance (alpha read from the file), non-residual then residual, hidden "
                   "max_L 1, correlation 2, max_ell 2, 3 elements",
    "class": "ScaleShiftMACE", "seed": 112, "species": [CU, AL, NI], "r_max": 5.0, "num_bessel": 8,
    "num_polynomial_cutoff": 6, "max_ell": 2, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "8x0e", "correlation": 2, "radial_MLP": [16, 16, 16],
    "interaction_cls_first": "RealAgnosticInteractionBlock",
    "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [14.2, 12.9],
    "scale": 1.08, "shift": -0.07, "radial_type": "gaussian", "distance_transform": "Soft",
    "structures": "ternary",
})
MODELS.append({
    "name": "mace_2int_L1_corr2_ell2_chebyshev",
    "description": "MACE with radial_type 'chebyshev' (T_1..T_6 of r), residual blocks throughout, hidden max_L 1, "
                   "correlation 2, max_ell 2, 2 elements",
    "class": "MACE", "seed": 113, "species": [NI, CU], "r_max": 4.5, "num_bessel": 6,
    "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "8x0e", "correlation": 2, "radial_MLP": [16, 16],
    "interaction_cls_first": "RealAgnosticResidualInteractionBlock",
    "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [10.4, 11.3],
    "radial_type": "chebyshev", "structures": "binary",
})
# Options that mace-torch 0.3.14 added: built only under a mace-torch that has them
# ("mace_torch": the oldest such version; main() skips the model under an older one and keeps
# its committed files and index entry).
MODELS.append({
    "name": "ssmace_3int_L1_corr2_ell2_density_lastreadout",
    "description": "ScaleShiftMACE with use_last_readout_only (one non-linear readout, on the last of 3 layers, "
                   "stored as readouts.0), Density blocks and the Agnesi transform, built with mace-torch >= 0.3.14",
    "class": "ScaleShiftMACE", "seed": 114, "species": [AL, CU, NI], "r_max": 5.0, "num_bessel": 8,
    "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 3, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "8x0e", "correlation": 2, "radial_MLP": [16, 16],
    "interaction_cls_first": "RealAgnosticDensityInteractionBlock",
    "interaction_cls": "RealAgnosticDensityResidualInteractionBlock", "avg_num_neighbors": [13.1, 12.4, 11.8],
    "scale": 0.97, "shift": 0.05, "distance_transform": "Agnesi", "use_last_readout_only": True,
    "mace_torch": "0.3.14", "structures": "ternary",
})
MODELS.append({
    "name": "ssmace_2int_L1_corr2_ell2_density_nocutoff",
    "description": "ScaleShiftMACE with apply_cutoff False (as MACE-OMOL: the radial basis without its envelope, "
                   "the envelope on each radial MLP output and Density term) and Density blocks, built with "
                   "mace-torch >= 0.3.14",
    "class": "ScaleShiftMACE", "seed": 115, "species": [NI, AL, CU], "r_max": 5.0, "num_bessel": 8,
    "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "8x0e", "correlation": 2, "radial_MLP": [16, 16],
    "interaction_cls_first": "RealAgnosticDensityInteractionBlock",
    "interaction_cls": "RealAgnosticDensityResidualInteractionBlock", "avg_num_neighbors": [12.7, 13.3],
    "scale": 1.04, "shift": -0.12, "apply_cutoff": False, "mace_torch": "0.3.14", "structures": "ternary",
})
MODELS.append({
    "name": "mace_3int_L1_corr2_ell2_keeplast",
    "description": "MACE with keep_last_layer_irreps (the last of 3 layers keeps 6x0e+6x1o; its non-linear "
                   "readout reads the scalars), residual blocks throughout, built with mace-torch >= 0.3.14",
    "class": "MACE", "seed": 116, "species": [CU, NI], "r_max": 4.5, "num_bessel": 6,
    "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 3, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "8x0e", "correlation": 2, "radial_MLP": [16, 16],
    "interaction_cls_first": "RealAgnosticResidualInteractionBlock",
    "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [10.1, 9.4, 10.9],
    "keep_last_layer_irreps": True, "mace_torch": "0.3.14", "structures": "binary",
})
# MACE-MH-1's product and readout (its RealAgnosticResidualNonLinearInteractionBlock is not
# supported yet: residual blocks stand in): product weights shared by every species and the
# NonLinearBiasReadoutBlock (two gated layers, biases on the last two linears), with two heads.
MODELS.append({
    "name": "ssmace_2int_L1_corr2_ell2_agnostic_biasreadout",
    "description": "ScaleShiftMACE with MACE-MH-1's use_agnostic_product (one set of product weights for every "
                   "species) and NonLinearBiasReadoutBlock (linear_1, gate, linear_mid + bias, gate, linear_2 + "
                   "bias, mask_head after each gate) and two heads, built with mace-torch >= 0.3.14",
    "class": "ScaleShiftMACE", "seed": 117, "species": [CU, AL, NI], "r_max": 5.0, "num_bessel": 8,
    "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "6x0e", "correlation": 2, "radial_MLP": [16, 16],
    "interaction_cls_first": "RealAgnosticResidualInteractionBlock",
    "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [12.3, 11.6],
    "heads": ["omat_pbe", "Default"], "scale": [1.06, 0.94], "shift": [0.08, -0.15],
    "use_agnostic_product": True, "readout_cls": "NonLinearBiasReadoutBlock",
    "mace_torch": "0.3.14", "structures": "ternary",
})
# edge_irreps (MACE-MH-1, OMOL): linear_up maps the node features to other irreps, which the
# conv TP reads; with use_edge_irreps_first the first layer gets their scalars alone. Mixed
# multiplicities, and an l the hidden features lack, so that no kernel may assume a uniform one.
MODELS.append({
    "name": "ssmace_2int_L1_corr2_ell2_edgeirreps",
    "description": "ScaleShiftMACE with edge_irreps 5x0e+3x1o+2x2e and use_edge_irreps_first (the first "
                   "interaction's linear_up maps to 5x0e), built with mace-torch >= 0.3.14",
    "class": "ScaleShiftMACE", "seed": 118, "species": [CU, AL, NI], "r_max": 5.0, "num_bessel": 8,
    "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "6x0e", "correlation": 2, "radial_MLP": [16, 16],
    "interaction_cls_first": "RealAgnosticResidualInteractionBlock",
    "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [12.3, 11.6],
    "scale": 1.06, "shift": 0.08, "edge_irreps": "5x0e+3x1o+2x2e", "use_edge_irreps_first": True,
    "mace_torch": "0.3.14", "structures": "ternary",
})
# embedding_specs (MACE-OMOL's total charge and spin): a table for the charge (offset, so that
# negative charges index it), Linear-SiLU-Linear for the spin, the projection added to every
# node's embedding, and use_embedding_readout's energy per node. One charge and spin for every
# structure (recorded in index.json as graph_features; the tests pass them to the model).
MODELS.append({
    "name": "ssmace_2int_L1_corr2_ell2_charge_spin",
    "description": "ScaleShiftMACE with embedding_specs total_charge (categorical, 7 classes, offset 3) and "
                   "total_spin (continuous), use_embedding_readout, evaluated at charge -1 and spin 3, built "
                   "with mace-torch >= 0.3.14",
    "class": "ScaleShiftMACE", "seed": 119, "species": [CU, AL, NI], "r_max": 5.0, "num_bessel": 8,
    "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "6x0e", "correlation": 2, "radial_MLP": [16, 16],
    "interaction_cls_first": "RealAgnosticResidualInteractionBlock",
    "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [12.3, 11.6],
    "scale": 1.06, "shift": 0.08,
    "embedding_specs": {
        "total_charge": {"type": "categorical", "per": "graph", "num_classes": 7, "emb_dim": 4, "offset": 3},
        "total_spin": {"type": "continuous", "per": "graph", "in_dim": 1, "emb_dim": 3},
    },
    "use_embedding_readout": True, "graph_features": {"total_charge": -1.0, "total_spin": 3.0},
    "mace_torch": "0.3.14", "structures": "ternary",
})
# MACE-MH-1's architecture at a reduced width: RealAgnosticResidualNonLinearInteractionBlock on
# every layer (species embeddings in a LayerNorm radial MLP, the learned density normalisation
# alpha + beta * density, the linear residual, the equivariant gate), with the rest of MH-1's
# options: edge_irreps (the first layer's scalars only), apply_cutoff False, the agnostic product,
# NonLinearBiasReadoutBlock and two heads. alpha and beta are set to trained-looking values (the
# initial 20 and 0 would leave the density out).
MODELS.append({
    "name": "ssmace_2int_L1_corr2_ell2_mh1",
    "description": "ScaleShiftMACE as MACE-MH-1 at reduced width: RealAgnosticResidualNonLinearInteractionBlock "
                   "on both layers, edge_irreps 5x0e+3x1o+2x2e with use_edge_irreps_first, apply_cutoff False, "
                   "use_agnostic_product, NonLinearBiasReadoutBlock, two heads; built with mace-torch >= 0.3.14",
    "class": "ScaleShiftMACE", "seed": 120, "species": [CU, AL, NI], "r_max": 5.0, "num_bessel": 8,
    "num_polynomial_cutoff": 5, "max_ell": 2, "num_interactions": 2, "hidden_irreps": "6x0e+6x1o",
    "MLP_irreps": "6x0e", "correlation": 2, "radial_MLP": [16, 16],
    "interaction_cls_first": "RealAgnosticResidualNonLinearInteractionBlock",
    "interaction_cls": "RealAgnosticResidualNonLinearInteractionBlock", "avg_num_neighbors": [12.3, 11.6],
    "heads": ["omat_pbe", "Default"], "scale": [1.06, 0.94], "shift": [0.08, -0.15],
    "edge_irreps": "5x0e+3x1o+2x2e", "use_edge_irreps_first": True, "apply_cutoff": False,
    "use_agnostic_product": True, "readout_cls": "NonLinearBiasReadoutBlock",
    "density_alpha_beta": [[1.7, 0.45], [2.3, 0.31]],
    "mace_torch": "0.3.14", "structures": "ternary",
})
# The MACE-MP-0 architectures (mace-torch's mace_mp setup: ScaleShiftMACE, non-residual first
# block then residual, r_max 6, 10 Bessel functions, p 5, radial MLP [64, 64, 64], max_ell 3,
# correlation 3, MLP_irreps 16x0e), with two elements instead of 89 so the files stay small.
for _size, _hidden, _seed in (("small", "128x0e", 107), ("medium", "128x0e+128x1o", 108),
                              ("large", "128x0e+128x1o+128x2e", 109)):
    MODELS.append({
        "name": f"mp_{_size}",
        "description": f"MACE-MP-0 {_size} architecture (hidden {_hidden}) with 2 elements",
        "class": "ScaleShiftMACE", "seed": _seed, "species": [NI, CU], "r_max": 6.0, "num_bessel": 10,
        "num_polynomial_cutoff": 5, "max_ell": 3, "num_interactions": 2, "hidden_irreps": _hidden,
        "MLP_irreps": "16x0e", "correlation": 3, "radial_MLP": [64, 64, 64],
        "interaction_cls_first": "RealAgnosticInteractionBlock",
        "interaction_cls": "RealAgnosticResidualInteractionBlock", "avg_num_neighbors": [61.96, 61.96],
        "scale": 0.8043, "shift": 0.1647, "structures": "binary",
    })


def build_model(cfg, dtype=torch.float64, calibrate=True):
    """A mace-torch model from `cfg`, every parameter perturbed, then calibrated (below);
    deterministic given cfg["seed"]."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        torch.manual_seed(cfg["seed"])  # mace-torch and e3nn initialise from the global generator
        heads = cfg.get("heads")
        num_heads = len(heads) if heads else 1
        e0 = np.array([E0[z] for z in cfg["species"]])
        if heads:
            e0 = np.stack([e0 + 0.137 * h - 0.05 * np.arange(len(e0)) * h for h in range(num_heads)])
        kwargs = dict(
            r_max=cfg["r_max"], num_bessel=cfg["num_bessel"], num_polynomial_cutoff=cfg["num_polynomial_cutoff"],
            max_ell=cfg["max_ell"], interaction_cls=INTERACTION[cfg["interaction_cls"]],
            interaction_cls_first=INTERACTION[cfg["interaction_cls_first"]],
            num_interactions=cfg["num_interactions"], num_elements=len(cfg["species"]),
            hidden_irreps=o3.Irreps(cfg["hidden_irreps"]), MLP_irreps=o3.Irreps(cfg["MLP_irreps"]),
            atomic_energies=e0, avg_num_neighbors=cfg["avg_num_neighbors"][0], atomic_numbers=cfg["species"],
            correlation=cfg["correlation"], gate=torch.nn.functional.silu,
            pair_repulsion=cfg.get("pair_repulsion", False), radial_MLP=list(cfg["radial_MLP"]), heads=heads,
        )
        if "distance_transform" in cfg:
            kwargs["distance_transform"] = cfg["distance_transform"]
        if "radial_type" in cfg:
            kwargs["radial_type"] = cfg["radial_type"]
        for option in ("use_last_readout_only", "apply_cutoff", "keep_last_layer_irreps",
                       "use_agnostic_product", "use_edge_irreps_first", "embedding_specs",
                       "use_embedding_readout"):  # mace-torch >= 0.3.14
            if option in cfg:
                kwargs[option] = cfg[option]
        if "edge_irreps" in cfg:
            kwargs["edge_irreps"] = o3.Irreps(cfg["edge_irreps"])
        if "readout_cls" in cfg:
            kwargs["readout_cls"] = getattr(modules, cfg["readout_cls"])
        if cfg["class"] == "ScaleShiftMACE":
            model = modules.ScaleShiftMACE(atomic_inter_scale=cfg["scale"], atomic_inter_shift=cfg["shift"],
                                           **kwargs)
        else:
            model = modules.MACE(**kwargs)
        g = torch.Generator().manual_seed(cfg["seed"])
        with torch.no_grad():
            for _, p in sorted(model.named_parameters()):
                p.add_(PARAMETER_NOISE * torch.randn(p.shape, generator=g, dtype=p.dtype))
            # Buffers a loader must read rather than recompute: Bessel frequencies (trainable in
            # some mace-torch setups) and the ZBL screening parameters (likewise).
            # Gaussian centres likewise (read from the buffer); Chebyshev orders are fixed.
            basis = model.radial_embedding.bessel_fn
            if hasattr(basis, "bessel_weights"):
                basis.bessel_weights.mul_(1.0 + 0.05 * torch.randn(basis.bessel_weights.shape, generator=g,
                                                                   dtype=basis.bessel_weights.dtype))
            elif hasattr(basis, "gaussian_weights"):
                basis.gaussian_weights.add_(0.05 * torch.randn(basis.gaussian_weights.shape, generator=g,
                                                               dtype=basis.gaussian_weights.dtype))
            if cfg.get("pair_repulsion"):
                model.pair_repulsion_fn.a_exp.add_(0.013)
                model.pair_repulsion_fn.a_prefactor.mul_(1.07)
            if cfg.get("distance_transform") == "Agnesi":  # likewise trainable in mace-torch
                dt = model.radial_embedding.distance_transform
                dt.a.mul_(1.03)
                dt.q.add_(0.021)
                dt.p.sub_(0.13)
            if cfg.get("distance_transform") == "Soft":
                model.radial_embedding.distance_transform.alpha.mul_(1.07)
            for inter, (alpha, beta) in zip(model.interactions, cfg.get("density_alpha_beta", [])):
                inter.alpha.fill_(alpha)
                inter.beta.fill_(beta)
        # avg_num_neighbors is a plain attribute per interaction; mace-torch sets them equal,
        # distinct values check that a loader reads each one.
        for inter, avg in zip(model.interactions, cfg["avg_num_neighbors"]):
            inter.avg_num_neighbors = avg
        model.eval()
        if calibrate:
            _calibrate(model)
        return model
    finally:
        torch.set_default_dtype(previous)


def _calibration_atoms():
    """A fixed Cu-Ni fcc structure (every model has both elements) for _calibrate."""
    rng = np.random.default_rng(7)
    pos, cell = _fcc_sites(3.6, (2, 2, 2))
    numbers = np.where(np.arange(len(pos)) % 3 == 0, NI, CU)
    return ase.Atoms(numbers=numbers, positions=pos + rng.normal(0, 0.1, pos.shape), cell=cell, pbc=True)


def _capture(model, atoms, modules_to_watch, pre):
    """Run mace-torch on `atoms` and return the first input (pre) or the output of each module."""
    seen = [None] * len(modules_to_watch)

    def hook(i):
        if pre:
            return lambda mod, inp: seen.__setitem__(i, inp[0].detach())
        return lambda mod, inp, out: seen.__setitem__(i, out.detach())

    handles = [(m.register_forward_pre_hook(hook(i)) if pre else m.register_forward_hook(hook(i)))
               for i, m in enumerate(modules_to_watch)]
    try:
        model(mace_batch(model, atoms, model.heads[0]).to_dict(), training=False, compute_force=False)
    finally:
        for h in handles:
            h.remove()
    return seen


READOUT_RMS = 0.2  # eV per atom and layer


def _calibrate(model):
    """Rescale weights so that every term matters. Random weights on top of mace-torch's
    initialisation give features that shrink layer by layer (the radial basis is ~0.1, the
    messages are divided by avg_num_neighbors), so that the higher correlation orders and the
    later layers would add only ~1e-4 of the energy. On a fixed structure, layer by layer,
    interactions.t.linear.weight (the message is linear in it) is scaled so that the input of
    the symmetric contraction has an RMS of 1, and the last linear map of each readout so that
    its output has an RMS of READOUT_RMS. Deterministic; the model stays a plain mace-torch
    model with other weights."""
    atoms = _calibration_atoms()
    with torch.no_grad():
        for t, inter in enumerate(model.interactions):
            x = _capture(model, atoms, [p.symmetric_contractions for p in model.products], pre=True)[t]
            # The non-linear block's last linear map is linear_2 (after the gate).
            last = inter.linear_2 if hasattr(inter, "linear_2") else inter.linear
            last.weight.mul_(1.0 / float(x.pow(2).mean().sqrt()))
        outs = _capture(model, atoms, list(model.readouts), pre=False)
        for readout, out in zip(model.readouts, outs):
            last = readout.linear if hasattr(readout, "linear") else readout.linear_2
            last.weight.mul_(READOUT_RMS / float(out.pow(2).mean().sqrt()))


# ---------------------------------------------------------------------------------------------
# Structures


def _fcc_sites(a, reps):
    basis = np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    sites = [(np.array([i, j, k]) + b) * a for i in range(reps[0]) for j in range(reps[1]) for k in range(reps[2])
             for b in basis]
    return np.array(sites), np.diag(np.array(reps, dtype=float) * a)


def _species(rng, n, elements):
    """n random species from `elements`, each present at least once."""
    z = list(elements) + list(rng.choice(elements, size=n - len(elements)))
    return np.array(rng.permutation(z), dtype=int)


def _random_cell_positions(rng, cell, n, min_dist):
    """n positions in `cell` (periodic) with all minimum-image distances >= min_dist."""
    inv = np.linalg.inv(cell)
    pts = []
    while len(pts) < n:
        p = rng.random(3) @ cell
        ok = True
        for q in pts:
            d = p - q
            f = d @ inv
            f -= np.round(f)
            # check the 27 nearest images (the cell is not very skewed)
            for s in np.array(np.meshgrid([-1, 0, 1], [-1, 0, 1], [-1, 0, 1])).T.reshape(-1, 3):
                if np.linalg.norm((f + s) @ cell) < min_dist:
                    ok = False
        if ok:
            pts.append(p)
    return np.array(pts)


def make_structures():
    """Deterministic ASE structures: name -> (Atoms, description, kind) with kind "binary"
    (Cu, Ni) or "ternary" (Cu, Ni, Al)."""
    rng = np.random.default_rng(20240501)
    out = {}

    def add(name, atoms, description, kind):
        out[name] = (atoms, description, kind)

    pos, cell = _fcc_sites(3.60, (2, 2, 2))
    add("fcc_cuni_2x2x2",
        ase.Atoms(numbers=_species(rng, len(pos), [CU, NI]), positions=pos + rng.normal(0, 0.08, pos.shape),
                  cell=cell, pbc=True),
        "periodic fcc Cu-Ni, 2x2x2 conventional cells (a = 3.60 A), random species, rattled 0.08 A",
        "binary")

    tri = np.array([[5.2, 0.0, 0.0], [1.4, 4.9, 0.0], [-0.8, 1.2, 5.4]])
    add("triclinic_cuni",
        ase.Atoms(numbers=_species(rng, 10, [CU, NI]), positions=_random_cell_positions(rng, tri, 10, 2.1),
                  cell=tri, pbc=True),
        "periodic triclinic cell, 10 random atoms (minimum distance 2.1 A)", "binary")

    pos, _ = _fcc_sites(3.55, (3, 3, 3))
    center = np.array([1.5, 1.5, 1.5]) * 3.55
    cluster = pos[np.linalg.norm(pos - center, axis=1) < 3.7]
    cluster = cluster + rng.normal(0, 0.1, cluster.shape)
    cluster[0] = cluster[1] + 1.5 * (cluster[0] - cluster[1]) / np.linalg.norm(cluster[0] - cluster[1])
    add("cluster_cuni",
        ase.Atoms(numbers=_species(rng, len(cluster), [CU, NI]), positions=cluster, pbc=False),
        f"non-periodic fcc cluster of {len(cluster)} atoms (no cell), rattled, one pair pushed to 1.5 A "
        "(inside the ZBL range)", "binary")

    small = np.array([[2.62, 0.0, 0.0], [0.45, 2.71, 0.0], [0.31, 0.38, 3.05]])
    add("small_cell_cuni",
        ase.Atoms(numbers=[CU, NI], positions=np.array([[0.1, 0.05, -0.07], [1.5, 1.3, 1.62]]), cell=small,
                  pbc=True),
        "2 atoms in a triclinic cell with edges shorter than every cutoff: atoms see their own images",
        "binary")

    box = 16.0
    pos = np.array([[2.0, 2.0, 2.0], [4.4, 2.1, 2.2], [3.1, 4.2, 1.9], [2.9, 2.8, 4.3], [9.5, 9.6, 9.4]])
    pos[:4] += rng.normal(0, 0.05, (4, 3))
    add("isolated_cuni",
        ase.Atoms(numbers=[CU, NI, NI, CU, NI], positions=pos, cell=np.eye(3) * box, pbc=True),
        "periodic 16 A cubic box: a 4-atom cluster and one atom more than 12 A from every other atom and "
        "image (no neighbours)", "binary")

    pos, cell = _fcc_sites(3.70, (2, 2, 1))
    add("fcc_cunial_2x2x1",
        ase.Atoms(numbers=_species(rng, len(pos), [CU, NI, AL]), positions=pos + rng.normal(0, 0.09, pos.shape),
                  cell=cell, pbc=True),
        "periodic fcc Cu-Ni-Al, 2x2x1 conventional cells (a = 3.70 A), random species, rattled 0.09 A",
        "ternary")

    tri = np.array([[4.9, 0.0, 0.0], [-1.1, 5.0, 0.0], [0.7, -0.9, 4.6]])
    add("triclinic_cunial",
        ase.Atoms(numbers=_species(rng, 8, [CU, NI, AL]), positions=_random_cell_positions(rng, tri, 8, 2.1),
                  cell=tri, pbc=True),
        "periodic triclinic cell, 8 random Cu/Ni/Al atoms (minimum distance 2.1 A)", "ternary")

    pos, _ = _fcc_sites(3.6, (2, 2, 2))
    center = np.array([1.0, 1.0, 1.0]) * 3.6
    cluster = pos[np.linalg.norm(pos - center, axis=1) < 2.6][:9] + rng.normal(0, 0.1, (9, 3))
    cluster = np.vstack([cluster, center + np.array([21.0, -3.0, 5.0])])
    add("cluster_cunial_isolated",
        ase.Atoms(numbers=list(_species(rng, 9, [CU, NI, AL])) + [AL], positions=cluster, pbc=False),
        "non-periodic: a 9-atom Cu/Ni/Al cluster and an Al atom 21.8 A away (no neighbours)", "ternary")

    small = np.array([[2.9, 0.0, 0.0], [0.0, 2.8, 0.0], [0.6, 0.4, 3.3]])
    add("small_cell_cunial",
        ase.Atoms(numbers=[AL, CU, NI], positions=np.array([[0.0, 0.0, 0.0], [1.5, 1.3, 0.2], [0.8, 0.6, 1.75]]),
                  cell=small, pbc=True),
        "3 atoms (Al, Cu, Ni) in a small cell (edges 2.8 to 3.4 A): own images within the cutoff", "ternary")
    return out


def structure_json(atoms):
    """An ASE structure as the fixtures' JSON holds it (tests/models/test_mace_parity.cpp reads it)."""
    return {"atomic_numbers": atoms.numbers.tolist(), "positions": atoms.get_positions().tolist(),
            "cell": atoms.cell.array.tolist(), "pbc": [bool(b) for b in atoms.pbc]}


def structures_for(cfg, structures):
    kinds = {"binary": {"binary"}, "ternary": {"binary", "ternary"}}[cfg["structures"]]
    return [name for name, (_, _, kind) in structures.items() if kind in kinds]


# ---------------------------------------------------------------------------------------------
# mace-torch evaluation


def mace_batch(model, atoms, head):
    """The input mace's ASE calculator builds (MACECalculator._atoms_to_batch): matscipy
    neighbour list, directed edges sender -> receiver within r_max, periodic images included,
    no self-edge within the home cell."""
    z_table = AtomicNumberTable([int(z) for z in model.atomic_numbers])
    kwargs = {}
    graph = [k for k in ("total_charge", "total_spin") if k in atoms.info]
    if graph:  # read from atoms.info, as mace's calculator passes charge and spin
        kwargs["key_specification"] = mace_data.utils.KeySpecification(info_keys={k: k for k in graph})
    config = mace_data.config_from_atoms(atoms, head_name=head, **kwargs)
    item = mace_data.AtomicData.from_config(config, z_table=z_table, cutoff=float(model.r_max),
                                            heads=list(model.heads))
    loader = torch_geometric.dataloader.DataLoader(dataset=[item], batch_size=1, shuffle=False, drop_last=False)
    return next(iter(loader))


@contextlib.contextmanager
def differentiable_chebyshev():
    """ChebychevBasis.forward calls torch.special.chebyshev_polynomial_t, which torch marks
    non-differentiable (torch 1.13 and 2.x alike): mace-torch's autograd forces and virials for a
    Chebyshev model leave out the basis' dB/dr term, so they are not -dE/dr of its own energy.
    fastmlip evaluates -dE/dr exactly. For the reference forces, ChebychevBasis.forward is
    replaced, for the duration, by the same polynomials from the recurrence
    T_(k+1) = 2x T_k - T_(k-1), which autograd differentiates; run_mace checks the energies are
    unchanged and records how far mace-torch's own forces are from these."""
    cls = modules.radial.ChebychevBasis
    original = cls.forward

    def forward(self, x):
        cols, prev, cur = [], torch.ones_like(x), x
        for _ in range(self.num_basis):
            cols.append(cur)
            prev, cur = cur, 2.0 * x * cur - prev
        return torch.cat(cols, dim=-1)

    cls.forward = forward
    try:
        yield
    finally:
        cls.forward = original


def run_mace(model, atoms, head):
    """mace-torch's outputs (for a Chebyshev basis, with differentiable_chebyshev's forces),
    plus per-atom energies computed from the readouts (hooks), since plus per-atom energies computed from the readouts (hooks), since
    MACE.forward in mace-torch 0.3.13 returns node_energy = E0 + pair only (it overwrites the
    sum that includes the interaction energies); ScaleShiftMACE's node_energy is complete and is
    checked against ours."""
    heads = list(model.heads)
    h = heads.index(head)
    batch = mace_batch(model, atoms, head)
    captured = {"readouts": [], "pair": None}
    hooks = [r.register_forward_hook(lambda mod, inp, out: captured["readouts"].append(out.detach()))
             for r in model.readouts]
    if hasattr(model, "pair_repulsion"):
        hooks.append(model.pair_repulsion_fn.register_forward_hook(
            lambda mod, inp, out: captured.__setitem__("pair", out.detach())))
    if hasattr(model, "embedding_readout"):
        hooks.append(model.embedding_readout.register_forward_hook(
            lambda mod, inp, out: captured.__setitem__("embedding", out.detach())))
    chebyshev = isinstance(model.radial_embedding.bessel_fn, modules.radial.ChebychevBasis)
    native_forces = None
    try:
        if chebyshev:
            native = model(batch.to_dict(), training=False, compute_force=True)
            native_forces = native["forces"].detach()
            captured = {"readouts": [], "pair": None}
            with differentiable_chebyshev():
                out = model(batch.to_dict(), training=False, compute_force=True, compute_virials=False,
                            compute_stress=True)
            assert abs(float(out["energy"][0]) - float(native["energy"][0])) <= 1e-12 * max(
                1.0, abs(float(native["energy"][0]))), "the recurrence gives mace-torch's Chebyshev energies"
        else:
            out = model(batch.to_dict(), training=False, compute_force=True, compute_virials=False,
                        compute_stress=True)
    finally:
        for hook in hooks:
            hook.remove()
    species = batch["node_attrs"].argmax(dim=1)
    ae = model.atomic_energies_fn.atomic_energies
    e0 = (ae[h] if ae.dim() == 2 else ae)[species]
    readouts = [r[:, h] for r in captured["readouts"]]
    pair = captured["pair"] if captured["pair"] is not None else torch.zeros_like(e0)
    inter = pair + sum(readouts)
    if type(model).__name__ == "ScaleShiftMACE":
        scale = torch.atleast_1d(model.scale_shift.scale)[h]
        shift = torch.atleast_1d(model.scale_shift.shift)[h]
        node_energy = e0 + scale * inter + shift
        assert torch.allclose(node_energy, out["node_energy"], rtol=0, atol=1e-12), "node_energy"
    else:
        node_energy = e0 + inter
    if "embedding" in captured:
        # use_embedding_readout: mace-torch adds this per-node energy to the structure's energy
        # (with E0, unscaled) but leaves it out of node_energy; the reference per-atom energies
        # include it, so that they sum to the energy, as LAMMPS' per-atom energies must.
        node_energy = node_energy + captured["embedding"][:, h]
    energy = float(out["energy"][0])
    assert abs(float(node_energy.sum()) - energy) <= 1e-10 * max(1.0, abs(energy)), "sum of node energies"
    periodic = bool(np.all(atoms.pbc))
    return {
        "head": head,
        "num_edges": int(batch["edge_index"].shape[1]),
        "energy": energy,
        "node_energy": node_energy.tolist(),
        "node_e0": e0.tolist(),
        "readout_energies": [r.tolist() for r in readouts],
        "pair_energy": captured["pair"].tolist() if captured["pair"] is not None else None,
        "forces": out["forces"].detach().tolist(),
        "virial": out["virials"][0].detach().tolist(),
        # mace-torch divides by the volume of the cell it built; for a non-periodic direction that
        # is a made-up box (data/neighborhood.py), so a stress is recorded for periodic cells only.
        "stress": out["stress"][0].detach().tolist() if periodic else None,
    } | ({} if native_forces is None else {
        # max |F_mace-torch - F| / max |F|: the dB/dr term mace-torch's own forces leave out.
        "mace_torch_forces_rel_difference": float((native_forces - out["forces"].detach()).abs().max()) / max(
            1e-300, float(out["forces"].detach().abs().max()))}), batch


# ---------------------------------------------------------------------------------------------
# An independent evaluator from the converted file alone (docs/mace-potential.md).


class FileMace:
    """MACE evaluated from a fastmlip potential file: the tensors and the hyperparameters, with
    e3nn for the spherical harmonics and the equivariant linear maps and tensor products (built
    from the irreps strings and instructions in the file) and plain torch for the rest. It uses
    the edge vector convention of docs/mace-potential.md (v = r_sender - r_receiver, the opposite
    of mace-torch's r_receiver + shift - r_sender): the energy is invariant under inversion, so both give
    the same energies and forces."""

    def __init__(self, path):
        with safe_open(str(path), framework="pt") as f:
            self.meta = json.loads(f.metadata()["fastmlip"])
            self.t = {k: f.get_tensor(k) for k in f.keys()}
        self.hp = self.meta["hyperparameters"]
        self.zs = [s["Z"] for s in self.meta["species"]]

    def _linear(self, irreps_in, irreps_out, weight):
        lin = o3.Linear(irreps_in, irreps_out)
        with torch.no_grad():
            lin.weight.copy_(self.t[weight])
        return lin

    def _fctp(self, irreps_in1, irreps_in2, irreps_out, weight):
        tp = o3.FullyConnectedTensorProduct(irreps_in1, irreps_in2, irreps_out)
        with torch.no_grad():
            tp.weight.copy_(self.t[weight])
        return tp

    @staticmethod
    def _envelope(x, r_max, p):
        u = x / r_max
        return (1.0 - (p + 1.0) * (p + 2.0) / 2.0 * u ** p + p * (p + 2.0) * u ** (p + 1)
                - p * (p + 1.0) / 2.0 * u ** (p + 2)) * (x < r_max)

    def _graph_embedding(self, graph_features):
        """embeddings (mace-torch's joint_embedding): each per-structure feature embedded (a table
        row at int(value + offset), or Linear-SiLU-Linear of the value), concatenated, then
        SiLU(W_project . concat): one vector, added to every node's embedding."""
        t, silu = self.t, torch.nn.functional.silu
        parts = []
        for f in self.hp["embeddings"]["features"]:
            value = float(graph_features[f["name"]])
            pre = f"joint_embedding.embedders.{f['name']}."
            if f["type"] == "categorical":
                parts.append(t[pre + "weight"][int(value + f["offset"])])
            else:
                hidden = silu(torch.nn.functional.linear(torch.tensor([value], dtype=torch.float64),
                                                         t[pre + "0.weight"], t.get(pre + "0.bias")))
                parts.append(torch.nn.functional.linear(hidden, t[pre + "2.weight"], t.get(pre + "2.bias")))
        return silu(t["joint_embedding.project.0.weight"] @ torch.cat(parts))

    def energies(self, positions, numbers, sender, receiver, shifts, head, graph_features=None):
        hp, t = self.hp, self.t
        heads = hp["heads"]
        h = heads.index(head)
        num_heads = len(heads)
        E = hp["num_elements"]
        species = torch.tensor([self.zs.index(int(z)) for z in numbers])
        onehot = torch.nn.functional.one_hot(species, E).to(torch.float64)
        n = len(numbers)

        # mace-torch: vectors = r[receiver] - r[sender] + shifts (the image shift goes with the
        # receiver, matscipy's D = r_j - r_i + S.cell with i = sender); negated here.
        v = positions[sender] - positions[receiver] - shifts
        r = torch.linalg.norm(v, dim=1, keepdim=True)
        # The basis sees the distance through the transform when the model has one; the
        # envelope always sees r. Agnesi: x = 1 / (1 + a s^q / (1 + s^(q-p))), s = r / r0, r0
        # the mean covalent radius of the pair. Soft: r0 the sum of the two radii, p0 = 3/4 r0,
        # p1 = 4/3 r0, x = p0 + (r - p0) (1 + tanh(alpha / (p1 - p0) (r - (p0 + p1) / 2))) / 2.
        xr = r
        transform = hp.get("distance_transform", "None")
        if transform in ("Agnesi", "Soft"):
            dt = "radial_embedding.distance_transform."
            radii = t[dt + "covalent_radii"][torch.tensor(self.zs)][species]
            rsum = (radii[sender] + radii[receiver])[:, None]
            if transform == "Agnesi":
                s_ = r / (0.5 * rsum)
                xr = 1.0 / (1.0 + t[dt + "a"] * s_ ** t[dt + "q"] / (1.0 + s_ ** (t[dt + "q"] - t[dt + "p"])))
            else:
                p0, p1 = 0.75 * rsum, 4.0 / 3.0 * rsum
                xr = p0 + (r - p0) * 0.5 * (1.0 + torch.tanh(t[dt + "alpha"] / (p1 - p0) * (r - 0.5 * (p0 + p1))))
        bf = "radial_embedding.bessel_fn."
        radial_type = hp.get("radial_type", "bessel")
        if radial_type == "gaussian":
            nb = hp["num_bessel"]
            coeff = hp.get("gaussian_coeff", -0.5 / (hp["r_max"] / (nb - 1)) ** 2)
            basis = torch.exp(coeff * (xr - t[bf + "gaussian_weights"]) ** 2)
        elif radial_type == "chebyshev":
            # T_k(x) for k = 1..N by the recurrence T_(k+1) = 2x T_k - T_(k-1), T_0 = 1, T_1 = x.
            cols, prev, cur = [], torch.ones_like(xr), xr
            for _ in range(hp["num_bessel"]):
                cols.append(cur)
                prev, cur = cur, 2.0 * xr * cur - prev
            basis = torch.cat(cols, dim=1)
        else:
            basis = t[bf + "prefactor"] * torch.sin(t[bf + "bessel_weights"] * xr) / xr
        # apply_cutoff False (mace-torch >= 0.3.14): the envelope multiplies the radial MLP output
        # and the Density term instead of the basis.
        cutoff = self._envelope(r, hp["r_max"], hp["num_polynomial_cutoff"])
        on_messages = not hp.get("apply_cutoff", True)
        radial = basis if on_messages else basis * cutoff

        ae = t["atomic_energies_fn.atomic_energies"]
        node_e = (ae[h] if ae.dim() == 2 else ae)[species]
        inter_e = torch.zeros(n)

        if hp["zbl"] is not None:
            z = hp["zbl"]
            znum = torch.tensor([float(x) for x in numbers])
            zu, zv = znum[sender], znum[receiver]
            a = z["a_prefactor"] * z["bohr_radius"] / (zu ** z["a_exp"] + zv ** z["a_exp"])
            rr = r[:, 0]
            phi = sum(c * torch.exp(-e * rr / a) for c, e in zip(z["c"], z["screening_exponents"]))
            radii = torch.tensor(z["covalent_radii"])
            rc = radii[species[sender]] + radii[species[receiver]]
            env = self._envelope(rr, rc, z["p"])
            inter_e = inter_e.index_add(0, receiver, 0.5 * z["coulomb_constant"] * zu * zv / rr * phi * env)

        x = self._linear(f"{E}x0e", hp["interactions"][0]["node_feats_irreps"], "node_embedding.linear.weight")(onehot)
        if "embeddings" in hp:
            x = x + self._graph_embedding(graph_features)
            if hp["embeddings"]["readout"]:
                # Added to the E0 part, unscaled (mace-torch adds it to e0).
                node_e = node_e + self._linear(hp["interactions"][0]["node_feats_irreps"], f"{num_heads}x0e",
                                               "embedding_readout.linear.weight")(x)[:, h]
        # use_last_readout_only: one readout, readouts.0, on the last layer; else one per layer.
        last_only = hp.get("use_last_readout_only", False)
        num_layers = len(hp["interactions"])
        assert len(hp["readouts"]) == (1 if last_only else num_layers)
        for k, (I, P) in enumerate(zip(hp["interactions"], hp["products"])):
            pre = f"interactions.{k}."
            residual = I["class"] in ("RealAgnosticResidualInteractionBlock",
                                      "RealAgnosticDensityResidualInteractionBlock",
                                      "RealAgnosticResidualNonLinearInteractionBlock")
            nonlinear = I["class"] == "RealAgnosticResidualNonLinearInteractionBlock"
            density = I["class"].startswith("RealAgnosticDensity")
            edge = I.get("edge_irreps", I["node_feats_irreps"])  # written where it differs
            up = self._linear(I["node_feats_irreps"], edge, pre + "linear_up.weight")(x)
            if nonlinear:
                # Its skip is a plain e3nn Linear; its radial input [B, source embedding of the
                # sender's species, target embedding of the receiver's]; its MLPs torch Linear,
                # LayerNorm, SiLU.
                sc = self._linear(I["node_feats_irreps"], I["hidden_irreps"], pre + "skip_tp.weight")(x)
                c0 = o3.Irreps(I["node_feats_irreps"]).count(o3.Irrep("0e"))
                src = self._linear(f"{E}x0e", f"{c0}x0e", pre + "source_embedding.weight")(onehot)
                tgt = self._linear(f"{E}x0e", f"{c0}x0e", pre + "target_embedding.weight")(onehot)
                feats = torch.cat([radial, src[sender], tgt[receiver]], dim=1)
                w = self._normed_mlp(pre + "conv_tp_weights.", I["radial_mlp"], feats)
            else:
                sc = (self._fctp(I["node_feats_irreps"], f"{E}x0e", I["hidden_irreps"], pre + "skip_tp.weight")(
                    x, onehot) if residual else None)
                # Radial MLP: e3nn FullyConnectedNet, x @ W / sqrt(fan_in), SiLU * cst between layers.
                w = radial
                widths = I["radial_mlp"]
                for layer in range(len(widths) - 1):
                    w = w @ (t[pre + f"conv_tp_weights.layer{layer}.weight"] / math.sqrt(widths[layer]))
                    if layer < len(widths) - 2:
                        w = torch.nn.functional.silu(w) * I["radial_mlp_cst"]
            # The conv TP with the recorded path weights (normalisation off: e3nn multiplies the
            # instruction's weight by its own normalisation and takes a square root).
            tp = o3.TensorProduct(
                edge, I["edge_attrs_irreps"], I["irreps_mid"],
                [(ins["i_in1"], ins["i_in2"], ins["i_out"], "uvu", True, ins["path_weight"] ** 2)
                 for ins in I["conv_tp_instructions"]],
                irrep_normalization="none", path_normalization="none", shared_weights=False, internal_weights=False)
            Y = o3.spherical_harmonics(o3.Irreps(I["edge_attrs_irreps"]), v, normalize=True, normalization="component")
            if on_messages:
                w = w * cutoff
            m = torch.zeros(n, o3.Irreps(I["irreps_mid"]).dim).index_add(0, receiver, tp(up[sender], Y, w))
            if nonlinear:
                m = self._linear(I["irreps_mid"], I["irreps_nonlin"], pre + "linear_1.weight")(m)
                d = self._normed_mlp(pre + "density_fn.", I["density_mlp"], feats)
                dens = torch.zeros(n, 1).index_add(0, receiver, torch.tanh(d ** 2) * (cutoff if on_messages else 1))
                m = m / (dens * t[pre + "beta"] + t[pre + "alpha"])
                m = m + self._linear(edge, I["irreps_nonlin"], pre + "linear_res.weight")(up)
                m = self._gate(I["gate"], m)
                m = self._linear(I["target_irreps"], I["target_irreps"], pre + "linear_2.weight")(m)
            elif density:
                m = self._linear(I["irreps_mid"], I["target_irreps"], pre + "linear.weight")(m)
                # density_fn: one e3nn layer [num_bessel, 1] (x @ W / sqrt(fan_in)), no activation.
                d = radial @ (t[pre + "density_fn.layer0.weight"] / math.sqrt(hp["num_bessel"]))
                dens = torch.zeros(n, 1).index_add(0, receiver, torch.tanh(d ** 2) * (cutoff if on_messages else 1))
                m = m / (dens + 1)
            else:
                m = self._linear(I["irreps_mid"], I["target_irreps"], pre + "linear.weight")(m) / I["avg_num_neighbors"]
            if not residual:
                m = self._fctp(I["target_irreps"], f"{E}x0e", I["target_irreps"], pre + "skip_tp.weight")(m, onehot)
            x = self._product(k, P, m, onehot)
            if P["use_sc"]:
                x = x + sc
            if not last_only:
                inter_e = inter_e + self._readout(k, hp["readouts"][k], x, h, num_heads)
            elif k == num_layers - 1:
                inter_e = inter_e + self._readout(0, hp["readouts"][0], x, h, num_heads)

        if hp["model_class"] == "ScaleShiftMACE":
            scale = torch.atleast_1d(t["scale_shift.scale"])[h]
            shift = torch.atleast_1d(t["scale_shift.shift"])[h]
            return node_e + scale * inter_e + shift
        return node_e + inter_e

    def _normed_mlp(self, prefix, widths, y):
        """mace-torch's RadialMLP: torch Linear (with bias), LayerNorm (eps 1e-5) and SiLU after
        every Linear but the last; modules net.0, net.1, net.2, net.3, ..."""
        for layer in range(len(widths) - 1):
            lin = f"{prefix}net.{3 * layer}."
            y = torch.nn.functional.linear(y, self.t[lin + "weight"], self.t[lin + "bias"])
            if layer < len(widths) - 2:
                norm = f"{prefix}net.{3 * layer + 1}."
                y = torch.nn.functional.layer_norm(y, (widths[layer + 1],), self.t[norm + "weight"],
                                                   self.t[norm + "bias"], 1e-5)
                y = torch.nn.functional.silu(y)
        return y

    @staticmethod
    def _gate(g, y):
        """GatedEquivariantBlock from the slices recorded: silu(scalars) c_s, then each gated block
        (e3nn's mul_ir layout: [mul, dim]) times sigmoid of its gates, c_g."""
        s0, sl = g["scalars"]
        g0, gl = g["gates"]
        gates = torch.sigmoid(y[:, g0:g0 + gl]) * g["gate_cst"]
        out = [torch.nn.functional.silu(y[:, s0:s0 + sl]) * g["scalar_cst"]]
        for start, length, dim, mul, offset in g["gated"]:
            block = y[:, start:start + length].reshape(-1, mul, dim)
            out.append((block * gates[:, offset:offset + mul, None]).reshape(-1, length))
        return torch.cat(out, dim=1)

    def _product(self, k, P, m, onehot):
        """Symmetric contraction: for each output irrep o (order L), each channel c,
        B[c, M] = sum_nu sum_{i_1..i_nu} (sum_k U_nu[M, i_1..i_nu, k] W_nu[z, k, c]) x[c, i_1]...x[c, i_nu],
        with x[c, i] the interaction output as [channels, sum_l (2l+1)] (per irrep block
        [mul, 2l+1], blocks side by side: mace-torch's reshape_irreps)."""
        irreps_in = o3.Irreps(P["irreps_in"])
        C = irreps_in[0].mul
        blocks, offset = [], 0
        for mul, ir in irreps_in:
            blocks.append(m[:, offset:offset + mul * ir.dim].reshape(-1, mul, ir.dim))
            offset += mul * ir.dim
        xs = torch.cat(blocks, dim=-1)  # [n, C, num_ell]
        out = []
        for o, (_, ir) in enumerate(o3.Irreps(P["irreps_out"])):
            pre = f"products.{k}.symmetric_contractions.contractions.{o}."
            total = 0
            for nu in range(1, P["correlation"] + 1):
                U = self.t[pre + f"U_matrix_{nu}"]
                if ir.l == 0:
                    U = U.unsqueeze(0)
                W = self.t[pre + ("weights_max" if nu == P["correlation"] else f"weights.{P['correlation'] - 1 - nu}")]
                # use_agnostic_product: one weight set, every node's one-hot a single 1.
                attrs = torch.ones(len(m), 1, dtype=onehot.dtype) if P.get("agnostic") else onehot
                coupled = torch.einsum("...k,ekc,be->b...c", U, W, attrs)  # [n, M, i_1..i_nu, C]
                for _ in range(nu):  # contract i_nu, then i_{nu-1}, ...
                    coupled = torch.einsum("b...ic,bci->b...c", coupled, xs)
                total = total + coupled  # [n, M, C]
            out.append(total.transpose(1, 2).reshape(len(m), C * ir.dim))
        x = torch.cat(out, dim=-1)
        return self._linear(P["irreps_out"], P["irreps_out"], f"products.{k}.linear.weight")(x)

    def _readout(self, k, R, x, h, num_heads):
        pre = f"readouts.{k}."
        if R["class"] == "LinearReadoutBlock":
            return self._linear(R["irreps_in"], R["irreps_out"], pre + "linear.weight")(x)[:, h]

        def gate(y):
            y = torch.nn.functional.silu(y) * R["gate_cst"]
            if num_heads > 1:  # mace-torch's mask_head: head h keeps hidden units [h*M, (h+1)*M)
                per = y.shape[1] // num_heads
                mask = torch.zeros_like(y)
                mask[:, h * per:(h + 1) * per] = 1
                y = y * mask
            return y

        y = gate(self._linear(R["irreps_in"], R["mlp_irreps"], pre + "linear_1.weight")(x))
        out = self._linear(R["mlp_irreps"], R["irreps_out"], pre + "linear_2.weight")
        if R["class"] == "NonLinearBiasReadoutBlock":  # e3nn's biases: added as stored
            mid = self._linear(R["mlp_irreps"], R["mlp_irreps"], pre + "linear_mid.weight")
            y = gate(mid(y) + self.t[pre + "linear_mid.bias"])
            return (out(y) + self.t[pre + "linear_2.bias"])[:, h]
        return out(y)[:, h]


def check_file_model(path, atoms, batch, head, ref):
    """FileMace on mace-torch's graph: energies, per-atom energies, forces and virial."""
    fm = FileMace(path)
    positions = torch.tensor(atoms.get_positions(), requires_grad=True)
    sender, receiver = batch["edge_index"][0], batch["edge_index"][1]
    shifts = batch["shifts"].detach()
    # The per-structure features the model embeds (mace-torch's total_charge, total_spin).
    features = {f["name"]: float(batch[f["name"]][0]) for f in fm.hp.get("embeddings", {"features": []})["features"]}
    node_energy = fm.energies(positions, atoms.numbers, sender, receiver, shifts, head, features)
    energy = node_energy.sum()
    (grad,) = torch.autograd.grad(energy, positions)
    scale = max(1.0, max(abs(e) for e in ref["node_energy"]))
    err_e = float((node_energy.detach() - torch.tensor(ref["node_energy"])).abs().max()) / scale
    f_ref = torch.tensor(ref["forces"])
    err_f = float((-grad - f_ref).abs().max()) / max(1.0, float(f_ref.abs().max()))
    # Virial: -dE/d(strain) of the file model, with positions and image shifts strained as
    # mace-torch strains them (r -> r (1 + sym(eps))), compared with mace-torch's virials.
    w_ref = torch.tensor(ref["virial"])
    err_w = 0.0
    if len(sender):
        pos2 = torch.tensor(atoms.get_positions())
        eps = torch.zeros(3, 3, requires_grad=True)
        strain = torch.eye(3) + 0.5 * (eps + eps.T)
        e_strained = fm.energies(pos2 @ strain, atoms.numbers, sender, receiver, shifts @ strain, head,
                                 features).sum()
        (de,) = torch.autograd.grad(e_strained, eps)
        err_w = float((-de - w_ref).abs().max()) / max(1.0, float(w_ref.abs().max()))
    return max(err_e, err_f, err_w)


# ---------------------------------------------------------------------------------------------
# Converter checks


def check_converted(model, path, meta):
    """The file holds the state_dict verbatim (F64 / I64) and irreps equal to the modules'."""
    sd = model.state_dict()
    with safe_open(str(path), framework="pt") as f:
        assert set(f.keys()) == set(sd), "converted tensor names"
        for k, v in sd.items():
            got = f.get_tensor(k)
            want = v.to(torch.float64) if v.is_floating_point() else v.to(torch.int64)
            assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), k
        assert json.loads(f.metadata()["fastmlip"]) == meta
        assert f.metadata()["format"] == "fastmlip-potential" and f.metadata()["format_version"] == "1"
    hp = meta["hyperparameters"]
    assert meta["species"] == [{"Z": int(z), "symbol": ase.data.chemical_symbols[int(z)]}
                               for z in model.atomic_numbers]
    assert meta["cutoffs"]["r_max"] == float(model.r_max) == hp["r_max"]
    for k, inter in enumerate(model.interactions):
        I = hp["interactions"][k]
        assert I["node_feats_irreps"] == str(inter.linear_up.irreps_in)
        assert I.get("edge_irreps", I["node_feats_irreps"]) == str(inter.linear_up.irreps_out) == \
            str(inter.conv_tp.irreps_in1)
        assert I["edge_attrs_irreps"] == str(inter.conv_tp.irreps_in2)
        assert I["avg_num_neighbors"] == inter.avg_num_neighbors
        assert I["radial_mlp"] == list(inter.conv_tp_weights.hs)
        if hasattr(inter, "equivariant_nonlin"):  # the non-linear block
            assert I["irreps_mid"] == str(inter.conv_tp.irreps_out) == str(inter.linear_1.irreps_in)
            assert I["irreps_nonlin"] == str(inter.linear_1.irreps_out) == str(inter.linear_res.irreps_out)
            assert I["target_irreps"] == str(inter.linear_2.irreps_out)
            assert I["density_mlp"] == list(inter.density_fn.hs)
            assert I["gate"]["scalar_cst"] == inter.equivariant_nonlin._scalar_cst  # pylint: disable=protected-access
        else:
            assert I["irreps_mid"] == str(inter.conv_tp.irreps_out) == str(inter.linear.irreps_in)
            assert I["target_irreps"] == str(inter.linear.irreps_out)
            assert I["radial_mlp_cst"] == inter.conv_tp_weights.layer0.act.cst
        P = hp["products"][k]
        assert P["irreps_in"] == str(model.products[k].symmetric_contractions.irreps_in)
        assert P["irreps_out"] == str(model.products[k].linear.irreps_out) == I["hidden_irreps"]
    # One readout per layer, or (use_last_readout_only) one in all: hyperparameters readouts[k]
    # describe mace-torch's readouts[k].
    assert len(hp["readouts"]) == len(model.readouts)
    assert hp.get("use_last_readout_only", False) == getattr(model, "use_last_readout_only", False)
    for k, readout in enumerate(model.readouts):
        R = hp["readouts"][k]
        if R["class"] == "NonLinearReadoutBlock":
            assert R["mlp_irreps"] == str(readout.linear_1.irreps_out)
            assert R["gate_cst"] == readout.non_linearity.acts[0].cst


def assert_refuses(cfg_changes, what, kwargs_changes=None):
    """Build a variant of a small model and check the converter refuses it."""
    cfg = dict(MODELS[1], seed=900, **cfg_changes)
    model = build_model(cfg, calibrate=False) if kwargs_changes is None else kwargs_changes(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            converter.convert(model, os.path.join(tmp, "x.safetensors"))
        except converter.UnsupportedModelError as e:
            message = str(e)
            assert "supported: model classes MACE and ScaleShiftMACE" in message, message
            assert what in message, (what, message)
            assert not os.listdir(tmp), "a refused conversion leaves no file behind"
            return message
    raise AssertionError(f"the converter accepted an unsupported model ({what})")


def check_refusals():
    messages = [
        assert_refuses({"max_ell": 4}, "max_ell 4"),
        assert_refuses({"hidden_irreps": "4x0e+4x1o+4x2e+4x3o", "max_ell": 3}, "hidden irreps 4x0e+4x1o+4x2e+4x3o"),
        assert_refuses({"correlation": 4}, "correlation 4"),
        assert_refuses({"num_interactions": 4, "avg_num_neighbors": [9.0] * 4}, "4 interactions"),
    ]
    INTERACTION["RealAgnosticAttResidualInteractionBlock"] = modules.RealAgnosticAttResidualInteractionBlock
    try:
        messages.append(assert_refuses({"interaction_cls": "RealAgnosticAttResidualInteractionBlock"},
                                       "RealAgnosticAttResidualInteractionBlock"))
    finally:
        del INTERACTION["RealAgnosticAttResidualInteractionBlock"]

    def tanh_gate(cfg):
        model = build_model(cfg, calibrate=False)
        model.readouts[-1].non_linearity = e3nn.nn.Activation(str(model.readouts[-1].hidden_irreps), [torch.tanh])
        return model

    messages.append(assert_refuses({}, "activation 'tanh'", tanh_gate))

    # The command line: exit code 2 and the list of what is supported.
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(build_model(dict(MODELS[1], seed=901, max_ell=4), calibrate=False), os.path.join(tmp, "bad.model"))
        proc = subprocess.run([sys.executable, str(CONVERTER), os.path.join(tmp, "bad.model"), "-o",
                               os.path.join(tmp, "bad.safetensors")], capture_output=True, text=True, check=False)
        assert proc.returncode == converter.EXIT_UNSUPPORTED, (proc.returncode, proc.stderr)
        assert "max_ell 4" in proc.stderr and "supported: model classes" in proc.stderr, proc.stderr
        assert not os.path.exists(os.path.join(tmp, "bad.safetensors"))
    return messages


def check_command_line(cfg, reference_path):
    """torch.save the model, convert it with the CLI; same tensors and metadata as the in-memory
    conversion except the provenance, which names the file and its SHA-256. Also a float32
    build of the same model: recorded as float32, tensors widened exactly."""
    model = build_model(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, f"{cfg['name']}.model")
        out = os.path.join(tmp, "out.safetensors")
        torch.save(model, src)
        head = cfg["heads"][1] if cfg.get("heads") else None
        cmd = [sys.executable, str(CONVERTER), src, "-o", out] + (["--head", head] if head else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        with safe_open(out, framework="np") as a, safe_open(str(reference_path), framework="np") as b:
            assert set(a.keys()) == set(b.keys())
            for k in a.keys():
                assert a.get_tensor(k).tobytes() == b.get_tensor(k).tobytes(), k
            ma, mb = json.loads(a.metadata()["fastmlip"]), json.loads(b.metadata()["fastmlip"])
        digest = hashlib.sha256(pathlib.Path(src).read_bytes()).hexdigest()
        assert ma["provenance"]["source_sha256"] == digest and ma["provenance"]["source_name"] == os.path.basename(src)
        if head:
            assert ma["hyperparameters"]["default_head"] == head
        for m in (ma, mb):
            m.pop("provenance")
            m["hyperparameters"].pop("default_head")
        assert ma == mb

        model32 = build_model(cfg, dtype=torch.float32)
        meta32 = converter.convert(model32, out)
        assert meta32["dtype"] == "float32"
        check_converted(model32, out, meta32)
        meta64 = converter.convert(model32, out, dtype="float64")
        assert meta64["dtype"] == "float64"
        with safe_open(out, framework="pt") as f:
            for k, v in model32.state_dict().items():
                if v.is_floating_point():
                    assert torch.equal(f.get_tensor(k).to(torch.float32), v), k
    return digest


# ---------------------------------------------------------------------------------------------
# Output


def _dumps(obj, indent=0):
    """JSON with one line per array of numbers (diffable, a third of indent=1's size)."""
    pad = " " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad} {json.dumps(k)}: {_dumps(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and all(isinstance(x, list) for x in obj):
        return "[\n" + ",\n".join(f"{pad} {_dumps(x, indent + 1)}" for x in obj) + "\n" + pad + "]"
    if isinstance(obj, list) and any(isinstance(x, dict) for x in obj):
        return "[\n" + ",\n".join(f"{pad} {_dumps(x, indent + 1)}" for x in obj) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False)


def write_text(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


CONVENTIONS = {
    "units": "eV, Angstrom; forces eV/A; virial eV; stress eV/A^3",
    "positions": "Cartesian, as given (not wrapped into the cell); cell rows are the lattice vectors",
    "neighbours": "mace-torch's (matscipy): directed edges sender -> receiver for every pair, periodic "
                  "images included, with |r| < r_max; no edge from an atom to itself in the home cell, "
                  "edges to its own periodic images included; num_edges counts them",
    "energy": "total energy: sum of node_energy",
    "node_energy": "per-atom energy: E0 + sum_t readout_t (+ ZBL pair) for MACE; "
                   "E0 + scale*(sum_t readout_t + ZBL pair) + shift for ScaleShiftMACE; E0, scale, "
                   "shift and the readout column of the chosen head",
    "node_e0": "the E0 term of node_energy",
    "readout_energies": "[t][atom]: the head's column of readout t, before scale and shift",
    "pair_energy": "[atom]: ZBL energy, half of each pair to each atom, before scale (null without ZBL)",
    "forces": "-dE/d(positions)",
    "virial": "mace-torch's virials: -dE/d(strain), symmetric (eV); LAMMPS's virial has the same sign",
    "stress": "mace-torch's stress = -virial/volume (eV/A^3); null for non-periodic structures, where "
              "mace-torch divides by the volume of a made-up box",
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=None,
                        help="comma-separated model names: rebuild only these and merge them into index.json")
    args = parser.parse_args(argv)
    DATA.mkdir(parents=True, exist_ok=True)
    structures = make_structures()
    versions = {"mace-torch": mace.__version__, "e3nn": e3nn.__version__, "torch": torch.__version__,
                "numpy": np.__version__, "ase": ase.__version__}
    # Which models this run builds: the named ones (each must need no newer mace-torch than the
    # one running), or all those this mace-torch can build. The others keep their committed files
    # and index entries, so that fixtures made under different mace-torch versions live side by side.
    names = [cfg["name"] for cfg in MODELS]
    wanted = args.models.split(",") if args.models else None
    if wanted and set(wanted) - set(names):
        sys.exit(f"make_mace_fixtures.py: unknown model(s) {sorted(set(wanted) - set(names))}; known: {names}")
    here = converter._version_tuple(mace.__version__)  # pylint: disable=protected-access
    selected = [cfg for cfg in MODELS if wanted is None or cfg["name"] in wanted]
    too_new = [cfg["name"] for cfg in selected if converter._version_tuple(cfg.get("mace_torch", "0")) > here]
    if wanted and too_new:
        sys.exit(f"make_mace_fixtures.py: {too_new} need a newer mace-torch than {mace.__version__} "
                 f"(tests/reference/setup-venv-torch2.sh makes a venv with 0.3.16)")
    for name in too_new:
        print(f"{name}: skipped (needs mace-torch >= {MODELS[names.index(name)]['mace_torch']}, this is "
              f"{mace.__version__}); its committed files and index entry are kept", flush=True)
    build = [cfg for cfg in selected if cfg["name"] not in too_new]
    old_path = DATA / "index.json"
    old = json.loads(old_path.read_text()) if old_path.exists() else {"models": [], "checks": {}}
    old_entries = {e["name"]: e for e in old["models"]}
    index = {"schema": SCHEMA, "generated_by": "tests/reference/make_mace_fixtures.py",
             "versions": versions if wanted is None else old.get("versions", versions), "models": []}
    new_entries = {}
    worst_parity = 0.0
    for cfg in build:
        name = cfg["name"]
        model = build_model(cfg)
        committed = name not in UNCOMMITTED
        if committed:
            path = DATA / f"{name}.safetensors"
            tmpdir = None
        else:
            tmpdir = tempfile.TemporaryDirectory()
            path = pathlib.Path(tmpdir.name) / f"{name}.safetensors"
        provenance = {"source": f"tests/reference/make_mace_fixtures.py, model '{name}' (random weights)"}
        meta = converter.convert(model, path, provenance=provenance)
        first = path.read_bytes()
        converter.convert(model, path, provenance=provenance)
        assert path.read_bytes() == first, f"{name}: conversion is not byte-reproducible"
        check_converted(model, path, meta)
        file_sha = hashlib.sha256(first).hexdigest()

        heads = list(model.heads)
        results = []
        used = structures_for(cfg, structures)
        model_parity = 0.0
        for sname in used:
            atoms = structures[sname][0]
            if "graph_features" in cfg:  # the per-structure values the model embeds
                atoms = atoms.copy()
                atoms.info.update(cfg["graph_features"])
            for head in heads:
                res, batch = run_mace(model, atoms, head)
                err = check_file_model(path, atoms, batch, head, res)
                assert err < 1e-10, f"{name} on {sname} ({head}): FileMace differs from mace-torch by {err:.2e}"
                model_parity = max(model_parity, err)
                if res["pair_energy"] is not None and sname in ("cluster_cuni", "fcc_cuni_2x2x2"):
                    assert max(abs(x) for x in res["pair_energy"]) > 0, "ZBL is exercised"
                results.append({"structure": sname, **res})
                print(f"{name:45s} {sname:24s} {head:8s} E = {res['energy']: .6f} eV "
                      f"({res['num_edges']} edges, file parity {err:.1e})", flush=True)
        worst_parity = max(worst_parity, model_parity)
        entry = {
            "name": name, "description": cfg["description"], "class": cfg["class"],
            "species": cfg["species"], "heads": heads, "num_parameters": sum(p.numel() for p in model.parameters()),
            "potential_sha256": file_sha, "potential_bytes": len(first), "committed": committed,
            "structures": used,
        }
        if "graph_features" in cfg:
            # Every structure's total_charge / total_spin: the pair style's charge and spin.
            entry["graph_features"] = cfg["graph_features"]
        if "mace_torch" in cfg:
            # Made under another mace-torch than the index's top-level versions may say.
            entry["versions"] = versions
            entry["file_parity_max_rel_error"] = model_parity
        if committed:
            entry.update({"potential": f"{name}.safetensors", "results": f"{name}.json"})
            doc = {
                "schema": SCHEMA, "generated_by": "tests/reference/make_mace_fixtures.py", "versions": versions,
                "model": {"name": name, "description": cfg["description"], "potential": f"{name}.safetensors",
                          "class": cfg["class"], "species": cfg["species"], "heads": heads,
                          "construction": {k: v for k, v in cfg.items()
                                           if k not in ("name", "description", "structures")},
                          "parameter_noise": PARAMETER_NOISE},
                "conventions": CONVENTIONS,
                "structures": {s: {"description": structures[s][1], **structure_json(structures[s][0])}
                               for s in used},
                "results": results,
            }
            write_text(DATA / f"{name}.json", _dumps(doc) + "\n")
        else:
            entry["note"] = ("not committed (too large); converted, checked byte-reproducible, verbatim, and "
                             "evaluated from the file against mace-torch by make_mace_fixtures.py")
            tmpdir.cleanup()
        new_entries[name] = entry

    for name in names:  # MODELS' order; a model neither built now nor indexed before is left out
        if name in new_entries:
            index["models"].append(new_entries[name])
        elif name in old_entries:
            index["models"].append(old_entries[name])

    checks = dict(old.get("checks", {}))
    if wanted is None:
        # The command line on a .model file: the ZBL model (binary) and the multi-head model.
        for cfg in build:
            if cfg["name"] in ("mace_2int_L1_corr2_ell2_zbl_residualfirst", "ssmace_multihead_3int_L2_corr2"):
                check_command_line(cfg, DATA / f"{cfg['name']}.safetensors")
        checks["refusals"] = check_refusals()
        checks["file_parity_max_rel_error"] = worst_parity
    else:
        checks["file_parity_max_rel_error"] = max(worst_parity, checks.get("file_parity_max_rel_error", 0.0))
    index["checks"] = checks
    write_text(DATA / "index.json", _dumps(index) + "\n")
    total = sum(p.stat().st_size for p in DATA.iterdir() if p.is_file())
    print(f"wrote {DATA}: {total / 1e6:.1f} MB; worst file-vs-mace-torch parity {worst_parity:.1e} over "
          f"{len(build)} model(s) built; {len(checks.get('refusals', []))} refusals checked")


if __name__ == "__main__":
    main()

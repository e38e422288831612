# SPDX-License-Identifier: MIT
"""Parity fixture of the trainer's losses (trainer/train/loss.cpp) against mace-torch's.

Pinned: mace-torch 0.3.13, torch from the venv (tests/reference/setup-venv.sh).

Writes tests/reference/data/trainer/loss.json: a small random batch (3 graphs of 2, 4 and 3
atoms, per-config weights as mace-torch's data reads them, one graph without stress, i.e.
stress_weight 0 and a zero reference) and, for each loss, mace-torch 0.3.13's value in float64
(17 significant digits) and its gradient with respect to the predicted energies, forces,
stresses and virials:

* weighted: modules.WeightedEnergyForcesLoss
* stress:   modules.WeightedEnergyForcesStressLoss
* virials:  modules.WeightedEnergyForcesVirialsLoss
* huber:    modules.WeightedHuberEnergyForcesStressLoss (huber_delta 0.01 and 0.3)

with energy_weight 1.5, forces_weight 100, stress_weight 2.5, virials_weight 0.7; ddp off (a
single process: every term is a plain mean).

tests/trainer/test_loss.cpp compares at 1e-12 relative. CI never runs this script; the file is
committed. To regenerate:

    tests/reference/setup-venv.sh                        # once
    .venv/bin/python tests/reference/make_trainer_loss_fixtures.py
"""
import json
import os

import torch

from mace import modules

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "trainer")
WEIGHTS = dict(energy_weight=1.5, forces_weight=100.0, stress_weight=2.5, virials_weight=0.7)


class Ref(dict):
    """What mace's loss functions read from a torch_geometric Batch: items and attributes."""

    def __getattr__(self, name):
        return self[name]


def tolist(t):
    return [float("%.17g" % v) for v in t.detach().reshape(-1).tolist()]


def main():
    torch.set_default_dtype(torch.float64)
    g = torch.Generator().manual_seed(7)
    n_atoms = [2, 4, 3]
    ng, n = len(n_atoms), sum(n_atoms)
    ptr = torch.tensor([0] + list(torch.cumsum(torch.tensor(n_atoms), 0)))

    def rnd(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g)

    ref = Ref(
        ptr=ptr,
        energy=rnd(ng, scale=3.0),
        forces=rnd(n, 3),
        stress=rnd(ng, 3, 3, scale=0.05),
        virials=rnd(ng, 3, 3, scale=2.0),
        weight=torch.tensor([1.0, 2.0, 0.5]),
        energy_weight=torch.tensor([1.0, 1.0, 0.0]),
        forces_weight=torch.tensor([1.0, 0.3, 1.0]),
        stress_weight=torch.tensor([1.0, 1.0, 0.0]),
        virials_weight=torch.tensor([0.5, 1.0, 0.0]),
    )
    ref["stress"][2] = 0.0  # the graph without a stress label
    ref["virials"][2] = 0.0
    pred0 = dict(
        energy=ref["energy"] + rnd(ng, scale=0.05),
        forces=ref["forces"] + rnd(n, 3, scale=0.02),
        stress=ref["stress"] + rnd(ng, 3, 3, scale=0.02),
        virials=ref["virials"] + rnd(ng, 3, 3, scale=0.5),
    )
    losses = {
        "weighted": modules.WeightedEnergyForcesLoss(WEIGHTS["energy_weight"], WEIGHTS["forces_weight"]),
        "stress": modules.WeightedEnergyForcesStressLoss(
            WEIGHTS["energy_weight"], WEIGHTS["forces_weight"], WEIGHTS["stress_weight"]),
        "virials": modules.WeightedEnergyForcesVirialsLoss(
            WEIGHTS["energy_weight"], WEIGHTS["forces_weight"], WEIGHTS["virials_weight"]),
        "huber_0.01": modules.WeightedHuberEnergyForcesStressLoss(
            WEIGHTS["energy_weight"], WEIGHTS["forces_weight"], WEIGHTS["stress_weight"], huber_delta=0.01),
        "huber_0.3": modules.WeightedHuberEnergyForcesStressLoss(
            WEIGHTS["energy_weight"], WEIGHTS["forces_weight"], WEIGHTS["stress_weight"], huber_delta=0.3),
    }
    out = {
        "num_atoms": n_atoms,
        "weights": WEIGHTS,
        "ref": {k: tolist(v) for k, v in ref.items() if k != "ptr"},
        "pred": {k: tolist(v) for k, v in pred0.items()},
        "losses": {},
    }
    for name, fn in losses.items():
        pred = {k: v.clone().requires_grad_(True) for k, v in pred0.items()}
        value = fn(ref, pred, ddp=False)
        value.backward()
        out["losses"][name] = {
            "value": float("%.17g" % value.item()),
            "grad": {k: tolist(v.grad) if v.grad is not None else [0.0] * v.numel() for k, v in pred.items()},
        }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "loss.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

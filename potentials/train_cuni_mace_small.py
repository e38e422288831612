# SPDX-License-Identifier: MIT
"""Train a small MACE on the CuNi EAM reference data and convert it: potentials/cuni-mace-small.safetensors.

    .venv/bin/python potentials/train_cuni_mace_small.py      # the defaults: about 11 minutes on one core

A demonstration potential for the MACE pair style, not a production one: ten minutes of
CPU training on examples/cuni/data/cuni-eam.xyz (191 frames of an EAM potential; build it with
`build/bin/fastmlip-cuni-dataset --output examples/cuni/data/cuni-eam.xyz`; frames with atoms
closer than 1.8 A are left out, see load_configs). The training uses
mace-torch's own model, data pipeline (neighbour lists, batching), statistics and loss, with a
plain loop around them instead of mace's run_train so that the run is short and exactly
reproducible: one thread, fixed seeds, a fixed number of epochs (8, batch size 2, Adam with
AMSGrad, learning rate 0.01 then 0.003 for the last third; loss weights 1000 on the squared
energy error per atom and 100 on the squared force error, mace's second-stage (SWA) weights,
since with its first-stage 1 : 100 a run this short leaves the energies unlearned), in float32
to halve the time (about 75 s per epoch; the file records dtype float32, the tensors are
stored as F64). Everything potentials/README.md records about the file (command, seed, data
SHA-256, errors) is printed at the end and stored in the file's provenance.

Model: ScaleShiftMACE, 2 interactions (non-residual first, then residual, as MACE-MP), hidden
32x0e, max_ell 2, correlation 3, r_max 5 A, 8 Bessel functions, p = 5, radial MLP [32, 32],
MLP_irreps 16x0e. E0s are the least-squares fit of the training energies to the composition
(mace's "average" E0s); scale and shift are mace's rms_forces_scaling statistics;
avg_num_neighbors is measured on the training set.
"""
import argparse
import hashlib
import json
import pathlib
import sys
import time

import ase.io
import numpy as np
import torch
from ase.neighborlist import neighbor_list
from e3nn import o3
from mace import data as mace_data
from mace import modules
from mace.tools import torch_geometric
from mace.tools.utils import AtomicNumberTable

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "potentials" / "convert"))
import mace_to_fastmlip as converter  # noqa: E402  pylint: disable=wrong-import-position

CU, NI = 29, 28


def sha256_of(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


MIN_DISTANCE = 1.8  # A; Cu-Ni nearest neighbours are ~2.5 A, the molten frames reach ~1.95 A


def load_configs(path):
    """ASE frames -> mace Configurations with the reference energy and forces under explicit
    keys (so that ASE's SinglePointCalculator handling does not matter), and the frames left
    out: those with two atoms closer than MIN_DISTANCE. (The slab111 frames of the dataset
    written by fastmlip-cuni-dataset before commit 7a62a8c had atoms 1.3 A apart, energies near
    -1 eV/atom and forces up to 57 eV/A: a broken surface cell, not physics to learn. The shipped
    potential was trained on that file, without them; the fixed generator's slab111 frames are
    physical and pass this filter.)"""
    configs, dropped = [], []
    keys = mace_data.KeySpecification(info_keys={"energy": "REF_energy"}, arrays_keys={"forces": "REF_forces"})
    for index, atoms in enumerate(ase.io.read(path, ":")):
        if len(neighbor_list("d", atoms, MIN_DISTANCE)):
            dropped.append(f"{index} ({atoms.info.get('config_type', '?')})")
            continue
        atoms.info["REF_energy"] = atoms.get_potential_energy()
        atoms.arrays["REF_forces"] = atoms.get_forces()
        configs.append(mace_data.config_from_atoms(atoms, key_specification=keys))
    return configs, dropped


def loader(configs, z_table, r_max, batch_size, shuffle, seed=0):
    items = [mace_data.AtomicData.from_config(c, z_table=z_table, cutoff=r_max) for c in configs]
    generator = torch.Generator().manual_seed(seed) if shuffle else None
    return torch_geometric.dataloader.DataLoader(items, batch_size=batch_size, shuffle=shuffle, drop_last=False,
                                                 generator=generator)


def errors(model, data):
    """RMSE of the energy per atom (meV/atom) and of the force components (meV/A)."""
    de, df, n_frames, n_comp = 0.0, 0.0, 0, 0
    for batch in data:
        out = model(batch.to_dict(), training=False, compute_force=True)
        natoms = (batch.ptr[1:] - batch.ptr[:-1]).to(out["energy"].dtype)
        de += float((((out["energy"] - batch.energy) / natoms) ** 2).sum())
        df += float(((out["forces"] - batch.forces) ** 2).sum())
        n_frames += batch.num_graphs
        n_comp += batch.forces.numel()
    return 1000 * (de / n_frames) ** 0.5, 1000 * (df / n_comp) ** 0.5


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(REPO / "examples/cuni/data/cuni-eam.xyz"))
    parser.add_argument("--output", default=str(REPO / "potentials/cuni-mace-small.safetensors"))
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--energy-weight", type=float, default=1000.0)
    parser.add_argument("--forces-weight", type=float, default=100.0)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    args = parser.parse_args(argv)

    torch.set_default_dtype(getattr(torch, args.dtype))
    torch.set_num_threads(1)  # reproducible reductions, and the machine is shared
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    data_sha = sha256_of(args.data)
    data_path = pathlib.Path(args.data).resolve()
    data_name = str(data_path.relative_to(REPO)) if REPO in data_path.parents else data_path.name
    configs, dropped = load_configs(args.data)
    if dropped:
        print(f"left out {len(dropped)} frames with atoms closer than {MIN_DISTANCE} A: {', '.join(dropped)}")
    # Every 10th frame (in file order, after the left-out ones) is held out for validation.
    valid = [c for i, c in enumerate(configs) if i % 10 == 5]
    train = [c for i, c in enumerate(configs) if i % 10 != 5]
    z_table = AtomicNumberTable([NI, CU])
    r_max = 5.0

    e0 = mace_data.compute_average_E0s(train, z_table)
    atomic_energies = np.array([e0[z] for z in z_table.zs])
    train_loader = loader(train, z_table, r_max, args.batch_size, shuffle=True, seed=args.seed)
    stats_loader = loader(train, z_table, r_max, 16, shuffle=False)
    valid_loader = loader(valid, z_table, r_max, 16, shuffle=False)
    avg_num_neighbors = modules.compute_avg_num_neighbors(stats_loader)
    mean, rms = modules.scaling_classes["rms_forces_scaling"](stats_loader, atomic_energies)

    model = modules.ScaleShiftMACE(
        r_max=r_max, num_bessel=8, num_polynomial_cutoff=5, max_ell=2,
        interaction_cls=modules.RealAgnosticResidualInteractionBlock,
        interaction_cls_first=modules.RealAgnosticInteractionBlock, num_interactions=2,
        num_elements=len(z_table), hidden_irreps=o3.Irreps("32x0e"), MLP_irreps=o3.Irreps("16x0e"),
        atomic_energies=atomic_energies, avg_num_neighbors=avg_num_neighbors, atomic_numbers=z_table.zs,
        correlation=3, gate=torch.nn.functional.silu, radial_MLP=[32, 32],
        atomic_inter_scale=float(np.asarray(rms).reshape(-1)[0]), atomic_inter_shift=float(np.asarray(mean).reshape(-1)[0]),
    )
    loss_fn = modules.WeightedEnergyForcesLoss(energy_weight=args.energy_weight, forces_weight=args.forces_weight)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, amsgrad=True)
    # Halve the learning rate for the last third: a short run still ends in a settled state.
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2 * args.epochs // 3], gamma=0.3)

    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for batch in train_loader:
            optimizer.zero_grad()
            out = model(batch.to_dict(), training=True, compute_force=True)
            loss = loss_fn(pred=out, ref=batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
            optimizer.step()
            total += float(loss)
        scheduler.step()
        model.eval()
        ve, vf = errors(model, valid_loader)
        print(f"epoch {epoch + 1:3d}  loss {total / len(train_loader):.4f}  valid RMSE E {ve:.2f} meV/atom  "
              f"F {vf:.1f} meV/A  ({time.time() - start:.0f} s)", flush=True)

    model.eval()
    te, tf = errors(model, loader(train, z_table, r_max, 16, shuffle=False))
    ve, vf = errors(model, valid_loader)
    command = "python potentials/train_cuni_mace_small.py " + " ".join(argv if argv is not None else sys.argv[1:])
    provenance = {
        "training_data_sha256": data_sha,
        "training_data": data_name,
        "command": command.strip(),
        "seed": args.seed,
        "epochs": args.epochs,
        "train_rmse_energy_meV_per_atom": round(te, 3),
        "train_rmse_forces_meV_per_A": round(tf, 2),
        "valid_rmse_energy_meV_per_atom": round(ve, 3),
        "valid_rmse_forces_meV_per_A": round(vf, 2),
        "frames_train_valid": f"{len(train)}/{len(valid)}",
        "frames_left_out": f"{len(dropped)} with atoms closer than {MIN_DISTANCE} A: {', '.join(dropped)}",
    }
    meta = converter.convert(model, args.output, provenance=provenance)
    summary = {"output": args.output, "output_sha256": sha256_of(args.output), "E0s": e0,
               "avg_num_neighbors": avg_num_neighbors, "scale": float(model.scale_shift.scale),
               "shift": float(model.scale_shift.shift), "provenance": meta["provenance"],
               "train_seconds": round(time.time() - start)}
    print(json.dumps(summary, indent=1, default=float))


if __name__ == "__main__":
    main()

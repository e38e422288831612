# SPDX-License-Identifier: MIT
"""Fixtures for models saved with cuEquivariance layouts (tests/reference/data/mace-cueq).

Run in .venv-cueq (tests/reference/setup-venv-cueq.sh: mace-torch 0.3.16 plus NVIDIA's
pure-Python cuequivariance and cuequivariance-torch 0.13.0; no GPU):

    .venv-cueq/bin/python tests/reference/make_cueq_fixtures.py

For each architecture below it builds a fresh e3nn model with make_mace_fixtures' settings
(every weight perturbed, then calibrated), turns it into cuEquivariance layouts with mace-torch's
own convert_e3nn_cueq, and saves that model as mace-torch saves it (torch.save: a pickle that
names cuequivariance's classes). The results are the cuEquivariance model's own energies,
per-atom energies, forces, virials and stress from mace-torch on the CPU, in the layout of
data/mace (tests/models/test_mace_parity.cpp reads it), on make_mace_fixtures' structures.

With --full-width, it also checks the MPA-0 and MH-1 medium shapes at full width (128 channels,
correlation 3; benchmarks/mace-lammps's BENCH_MODELS) without committing anything: each cueq
model is saved to a temporary directory, converted by --convert-python (default .venv-torch2,
where cuEquivariance is not installed) and evaluated by the C++ core's parity test
(--model-tests, fastmlip_model_tests) against the cueq model's own mace-torch results on the
first structure.

The converter test (tests/convert: test_cueq_fixture_converts_without_cuequivariance) runs in
an environment without cuEquivariance: it converts the saved pickle and compares the file with
these results. The e3nn model the cueq one came from is evaluated too, and its largest
difference from the cueq one is printed and recorded (mace-torch's conversion is not ours to
test, but a large difference would make the fixture meaningless).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import cuequivariance  # noqa: F401  the point of this script: pylint: disable=unused-import
import mace
import torch
from mace.cli.convert_e3nn_cueq import run as e3nn_to_cueq

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_mace_fixtures as fx  # noqa: E402  pylint: disable=wrong-import-position

DATA = HERE / "data" / "mace-cueq"

# (fixture name, make_mace_fixtures model it is built like, changes to that model's settings)
MODELS = [
    # MACE-MPA-0 / OMAT-0 / MATPES: Density residual blocks, Agnesi transform, ZBL.
    ("cueq_density_agnesi_zbl", "ssmace_2int_L1_corr2_ell3_density_agnesi_zbl", {}),
    # MACE-MH-1 / OMOL: the non-linear block, edge irreps, agnostic product, two heads.
    ("cueq_mh1", "ssmace_2int_L1_corr2_ell2_mh1", {}),
    # MACE-MP-0-like L2 hidden irreps with correlation 3 (the published models' order), heads.
    ("cueq_multihead_L2_corr3", "ssmace_multihead_3int_L2_corr2", {"correlation": 3}),
]


def write_text(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def largest_difference(a, b):
    worst = 0.0
    for key in ("node_energy", "forces", "virial"):
        x, y = torch.tensor(a[key], dtype=torch.float64), torch.tensor(b[key], dtype=torch.float64)
        worst = max(worst, float((x - y).abs().max()) / max(1.0, float(y.abs().max())))
    return worst


def results_doc(name, potential, model, structures, used, e3nn_model):
    """The cueq model's own results in data/mace's layout, and their largest relative difference
    from those of the e3nn model it came from."""
    results, worst = [], 0.0
    for sname in used:
        atoms = structures[sname][0]
        for head in list(model.heads):
            res, _ = fx.run_mace(model, atoms, head)
            ref, _ = fx.run_mace(e3nn_model, atoms, head)
            worst = max(worst, largest_difference(res, ref))
            results.append({"structure": sname, **res})
    doc = {"schema": fx.SCHEMA,
           "model": {"name": name, "potential": potential},
           "conventions": fx.CONVENTIONS,
           "structures": {s: fx.structure_json(structures[s][0]) for s in used},
           "results": results}
    return doc, worst


def full_width(args):
    """The medium shapes at full width: convert without cuEquivariance, compare in C++."""
    import importlib.util  # pylint: disable=import-outside-toplevel

    spec = importlib.util.spec_from_file_location(
        "run_benchmark", HERE.parents[1] / "benchmarks" / "mace-lammps" / "run_benchmark.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    structures = fx.make_structures()
    ok = True
    for name in ("mpa_medium", "mh1_medium"):
        cfg = dict(bench.BENCH_MODELS[name])
        e3nn_model = fx.build_model(cfg)
        default = torch.get_default_dtype()
        cueq_model = e3nn_to_cueq(e3nn_model, device="cpu", return_model=True)
        torch.set_default_dtype(default)
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            torch.save(cueq_model, tmp / f"{name}.model")
            used = fx.structures_for(cfg, structures)[:1]
            doc, worst = results_doc(name, f"{name}.safetensors", cueq_model, structures, used, e3nn_model)
            (tmp / f"{name}.json").write_text(json.dumps(doc))
            (tmp / "index.json").write_text(json.dumps({"schema": fx.SCHEMA, "models": [
                {"name": name, "potential": f"{name}.safetensors", "results": f"{name}.json", "committed": True}]}))
            convert = subprocess.run([args.convert_python, str(HERE.parents[1] / "potentials" / "convert" /
                                                               "mace_to_fastmlip.py"),
                                      str(tmp / f"{name}.model"), "-o", str(tmp / f"{name}.safetensors")],
                                     capture_output=True, text=True, check=False)
            print(f"{name}: cueq vs e3nn model {worst:.1e}; converter ({args.convert_python}): rc "
                  f"{convert.returncode} {convert.stdout.strip()} {convert.stderr.strip()[-500:]}", flush=True)
            if convert.returncode != 0:
                ok = False
                continue
            parity = subprocess.run([args.model_tests, "--gtest_filter=MaceParity/*"], capture_output=True,
                                    text=True, check=False, env={**os.environ, "FASTMLIP_MACE_FIXTURE_DIR": str(tmp)})
            lines = [ln for ln in parity.stdout.splitlines() if "max" in ln.lower() or "PASSED" in ln or
                     "FAILED" in ln]
            print("\n".join(f"  {ln}" for ln in lines[-12:]), flush=True)
            ok = ok and parity.returncode == 0 and "[  PASSED  ] 2 tests" in parity.stdout
    print("full width:", "all agree" if ok else "FAILED")
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full-width", action="store_true", help="check the medium shapes; write nothing")
    parser.add_argument("--convert-python", default=str(HERE.parents[1] / ".venv-torch2" / "bin" / "python"))
    parser.add_argument("--model-tests", default=str(HERE.parents[1] / "build" / "tests" / "bin" /
                                                     "fastmlip_model_tests"))
    args = parser.parse_args()
    if args.full_width:
        return full_width(args)
    DATA.mkdir(parents=True, exist_ok=True)
    structures = fx.make_structures()
    index = {"schema": fx.SCHEMA, "versions": {"mace-torch": mace.__version__,
                                              "cuequivariance": cuequivariance.__version__,
                                              "torch": torch.__version__}, "models": []}
    for name, like, changes in MODELS:
        (cfg,) = [dict(c) for c in fx.MODELS if c["name"] == like]
        cfg.update(changes)
        e3nn_model = fx.build_model(cfg)
        default = torch.get_default_dtype()
        cueq_model = e3nn_to_cueq(e3nn_model, device="cpu", return_model=True)
        torch.set_default_dtype(default)
        tmp = DATA / f"{name}.model.tmp"
        torch.save(cueq_model, tmp)
        os.replace(tmp, DATA / f"{name}.model")

        used = fx.structures_for(cfg, structures)
        doc, worst = results_doc(name, f"{name}.safetensors", cueq_model, structures, used, e3nn_model)
        doc["model"].update({"cueq_model": f"{name}.model", "built_like": like, "changes": changes,
                             "cueq_vs_e3nn_max_relative_difference": worst})
        results = doc["results"]
        write_text(DATA / f"{name}.json", json.dumps(doc) + "\n")
        index["models"].append({"name": name, "potential": f"{name}.safetensors", "results": f"{name}.json",
                                "cueq_model": f"{name}.model", "committed": True})
        print(f"{name}: {len(results)} results; cuEquivariance vs e3nn model {worst:.1e}", flush=True)
        assert worst < 1e-10, (name, worst)
    write_text(DATA / "index.json", json.dumps(index, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: MIT
"""The MACE converter accepts exactly what fastmlip evaluates (issue 17).

Each finding of issue 17 has a test here that fails on the converter before the fix; the
mutation test changes one thing the converter does not handle in every fixture model and
requires a refusal (exit code 2, no traceback, no file). Runs under mace-torch 0.3.13 (.venv,
tests/reference/setup-venv.sh) and 0.3.16 (.venv-torch2, tests/reference/setup-venv-torch2.sh);
tests/convert/CMakeLists.txt registers it with ctest for each venv found.
"""
import json
import os
import subprocess

import pytest

from conftest import constructor_accepts, mace_version, run_converter

torch = pytest.importorskip("torch")
pytest.importorskip("mace")
from e3nn import o3  # noqa: E402
from mace import modules  # noqa: E402
from safetensors import safe_open  # noqa: E402

import mace_to_fastmlip as converter  # noqa: E402

# make_mace_fixtures' models, the MP-large shape aside (its U matrices make it slow to build;
# it differs from MP-medium only in the hidden irreps).
SMALL = "mace_2int_L1_corr2_ell2_zbl_residualfirst"
MP_SMALL = "mp_small"


def cfg_named(fixtures, name):
    (cfg,) = [c for c in fixtures.MODELS if c["name"] == name]
    return dict(cfg)


def model_names(fixtures):
    """The committed fixture models this mace-torch can build (one marked with a newer
    "mace_torch", an option that version added, is left out under an older one)."""
    return [c["name"] for c in fixtures.MODELS if c["name"] not in fixtures.UNCOMMITTED and
            converter._version_tuple(c.get("mace_torch", "0")) <= mace_version()]  # pylint: disable=protected-access


_BUILT = {}


def build(fixtures, name, **kwargs_changes):
    """A fixture model (uncalibrated: the converter does not care), with mace-torch constructor
    arguments overridden by kwargs_changes (options of newer mace-torch versions). Plain builds
    are made once per session and handed out as fresh copies (torch.load of the saved bytes)."""
    import io

    cfg = cfg_named(fixtures, name)
    if not kwargs_changes:
        if name not in _BUILT:
            buffer = io.BytesIO()
            torch.save(fixtures.build_model(cfg, calibrate=False), buffer)
            _BUILT[name] = buffer.getvalue()
        return converter.load_model(io.BytesIO(_BUILT[name]))
    original = modules.ScaleShiftMACE if cfg["class"] == "ScaleShiftMACE" else modules.MACE

    class Patched:  # build_model calls modules.MACE / ScaleShiftMACE by name
        def __init__(self):
            self.saved = {}

        def __enter__(self):
            for cls_name in ("MACE", "ScaleShiftMACE"):
                cls = getattr(modules, cls_name)
                self.saved[cls_name] = cls
                setattr(modules, cls_name, lambda *a, _cls=cls, **k: _cls(*a, **{**k, **kwargs_changes}))

        def __exit__(self, *exc):
            for cls_name, cls in self.saved.items():
                setattr(modules, cls_name, cls)

    with Patched():
        model = fixtures.build_model(cfg, calibrate=False)
    assert isinstance(model, original)
    return model


def cli(model, tmp_path):
    """torch.save the model and run the converter's command line on it."""
    src, out = tmp_path / "m.model", tmp_path / "m.safetensors"
    torch.save(model, src)
    rc, stdout, stderr = run_converter("mace_to_fastmlip.py", src, "-o", out)
    return rc, stdout, stderr, out


def assert_cli_refuses(model, tmp_path, *needles):
    rc, stdout, stderr, out = cli(model, tmp_path)
    assert rc == converter.EXIT_UNSUPPORTED, (rc, stdout, stderr)
    assert "Traceback" not in stderr, stderr
    assert "supported:" in stderr, stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(out.name)], "a temporary file was left"
    return stderr


def needs(option):
    if not constructor_accepts(modules.MACE, option):
        pytest.skip(f"mace-torch {'.'.join(map(str, mace_version()))} has no {option} option")


# --- issue 17's findings ---------------------------------------------------------------------


def test_apply_cutoff_false_converts_and_evaluates_as_mace_torch(fixtures, tmp_path):
    """--apply_cutoff False (MACE-OMOL-0) once converted silently into wrong energies, then was
    refused; now the file says so and evaluates as mace-torch does (the envelope on the radial
    MLP output): the independent evaluator against mace-torch on one structure."""
    needs("apply_cutoff")
    cfg = dict(cfg_named(fixtures, SMALL), apply_cutoff=False)
    model = fixtures.build_model(cfg)
    out = tmp_path / "nocutoff.safetensors"
    meta = converter.convert(model, out)
    assert meta["hyperparameters"]["apply_cutoff"] is False
    fixtures.check_converted(model, out, meta)
    structures = fixtures.make_structures()
    atoms = structures[fixtures.structures_for(cfg, structures)[0]][0]
    res, batch = fixtures.run_mace(model, atoms, "Default")
    assert fixtures.check_file_model(out, atoms, batch, "Default", res) < 1e-10
    # The flag matters: the same weights with the envelope on the basis give another energy.
    model.apply_cutoff = model.radial_embedding.apply_cutoff = True
    assert abs(fixtures.run_mace(model, atoms, "Default")[0]["energy"] - res["energy"]) > 1e-6


def test_embedding_specs_convert_and_evaluate_as_mace_torch(fixtures, tmp_path):
    """--embedding_specs (MACE-OMOL's total charge and spin) once converted silently into a file
    that ignored them, then was refused; now the features, their tables and MLPs, the projection
    and the embedding readout are written, and the file evaluates as mace-torch at a charge and
    spin (the independent evaluator on one structure). Features other than total_charge and
    total_spin, or per atom, are refused by name."""
    needs("embedding_specs")
    specs = {"total_spin": {"type": "continuous", "per": "graph", "in_dim": 1, "emb_dim": 5, "use_bias": False},
             "total_charge": {"type": "categorical", "per": "graph", "num_classes": 9, "emb_dim": 3, "offset": 4}}
    cfg = dict(cfg_named(fixtures, SMALL), embedding_specs=specs, use_embedding_readout=False,
               graph_features={"total_charge": 2.0, "total_spin": 0.5})
    model = fixtures.build_model(cfg)
    out = tmp_path / "embedded.safetensors"
    meta = converter.convert(model, out)
    emb = meta["hyperparameters"]["embeddings"]
    assert [f["name"] for f in emb["features"]] == ["total_spin", "total_charge"] and emb["readout"] is False
    assert emb["features"][0]["use_bias"] is False and emb["features"][1]["offset"] == 4
    fixtures.check_converted(model, out, meta)
    structures = fixtures.make_structures()
    atoms = structures[fixtures.structures_for(cfg, structures)[0]][0].copy()
    atoms.info.update(cfg["graph_features"])
    res, batch = fixtures.run_mace(model, atoms, "Default")
    assert fixtures.check_file_model(out, atoms, batch, "Default", res) < 1e-10

    other = {"temperature": {"type": "continuous", "per": "graph", "in_dim": 1, "emb_dim": 4}}
    assert_cli_refuses(build(fixtures, SMALL, embedding_specs=other), tmp_path, "temperature")
    per_atom = {"total_charge": {"type": "categorical", "per": "node", "num_classes": 5, "emb_dim": 4}}
    assert_cli_refuses(build(fixtures, SMALL, embedding_specs=per_atom), tmp_path, "is per 'node'")


@pytest.mark.parametrize("first", [False, True])
def test_edge_irreps_convert_and_evaluate_as_mace_torch(fixtures, tmp_path, first):
    """edge_irreps (MACE-MH-1, OMOL) once ended in RuntimeError "unexpected model structure ...
    please report", then was refused; now each interaction's edge_irreps are written where they
    differ from its node features' (the first one's only with use_edge_irreps_first, as their
    scalars) and the file evaluates as mace-torch: the independent evaluator on one structure."""
    needs("edge_irreps")
    cfg = dict(cfg_named(fixtures, SMALL), edge_irreps="3x0e+2x1o+2x2e", use_edge_irreps_first=first)
    model = fixtures.build_model(cfg)
    out = tmp_path / "edge.safetensors"
    meta = converter.convert(model, out)
    inter = meta["hyperparameters"]["interactions"]
    assert [I.get("edge_irreps") for I in inter] == ["3x0e" if first else None, "3x0e+2x1o+2x2e"]
    fixtures.check_converted(model, out, meta)
    structures = fixtures.make_structures()
    atoms = structures[fixtures.structures_for(cfg, structures)[0]][0]
    res, batch = fixtures.run_mace(model, atoms, "Default")
    assert fixtures.check_file_model(out, atoms, batch, "Default", res) < 1e-10


MH1 = "ssmace_2int_L1_corr2_ell2_mh1"


def test_nonlinear_interaction_block_converts_and_evaluates_as_mace_torch(fixtures, tmp_path):
    """RealAgnosticResidualNonLinearInteractionBlock (MACE-MH-1, OMOL) was refused by name; now its
    LayerNorm MLPs, species embeddings, alpha / beta, linear_res, gate and linear_2 are written
    and the file evaluates as mace-torch: the independent evaluator on one structure."""
    if not hasattr(modules.blocks, "RealAgnosticResidualNonLinearInteractionBlock"):
        pytest.skip("this mace-torch has no RealAgnosticResidualNonLinearInteractionBlock")
    cfg = cfg_named(fixtures, MH1)
    model = fixtures.build_model(cfg)
    out = tmp_path / "mh1.safetensors"
    meta = converter.convert(model, out)
    for I in meta["hyperparameters"]["interactions"]:
        assert I["class"] == "RealAgnosticResidualNonLinearInteractionBlock"
        assert I["density_mlp"][-2:] == [64, 1] and I["gate"]["scalars"] == [0, 6]
    fixtures.check_converted(model, out, meta)
    structures = fixtures.make_structures()
    atoms = structures[fixtures.structures_for(cfg, structures)[0]][0]
    res, batch = fixtures.run_mace(model, atoms, "Default")
    assert fixtures.check_file_model(out, atoms, batch, "Default", res) < 1e-10


NONLINEAR_MUTATIONS = {
    # What the reader does not apply: another LayerNorm eps, cuEquivariance's ir_mul gate layout,
    # another gate activation, a radial MLP without its norm.
    "layer_norm_eps": (lambda m: setattr(m.interactions[0].conv_tp_weights.net[1], "eps", 1e-6), "eps"),
    "gate_layout": (lambda m: setattr(m.interactions[1].equivariant_nonlin, "_layout_is_ir_mul", True), "ir_mul"),
    "gate_activation": (lambda m: setattr(m.interactions[1].equivariant_nonlin, "_act_scalar", torch.tanh),
                        "gate scalars' activation is SiLU"),
    "radial_mlp": (lambda m: m.interactions[0].density_fn.net.__setitem__(1, torch.nn.Identity()),
                   "density_fn"),
}


@pytest.mark.parametrize("mutation", sorted(NONLINEAR_MUTATIONS))
def test_nonlinear_block_changes_are_refused(fixtures, tmp_path, mutation):
    if not hasattr(modules.blocks, "RealAgnosticResidualNonLinearInteractionBlock"):
        pytest.skip("this mace-torch has no RealAgnosticResidualNonLinearInteractionBlock")
    change, needle = NONLINEAR_MUTATIONS[mutation]
    model = build(fixtures, MH1)
    change(model)
    out = tmp_path / "x.safetensors"
    with pytest.raises(converter.UnsupportedModelError) as refusal:
        converter.convert(model, out)
    assert needle in str(refusal.value), str(refusal.value)
    assert not out.exists()


def test_agnostic_product_converts(fixtures, tmp_path):
    """use_agnostic_product (MACE-MH-1): one set of product weights for every species, written
    as products[t].agnostic; the same model without it has num_elements sets and no flag."""
    needs("use_agnostic_product")
    meta = converter.convert(build(fixtures, MP_SMALL, use_agnostic_product=True), tmp_path / "a.safetensors")
    assert all(p["agnostic"] is True for p in meta["hyperparameters"]["products"])
    meta = converter.convert(build(fixtures, MP_SMALL), tmp_path / "b.safetensors")
    assert all("agnostic" not in p for p in meta["hyperparameters"]["products"])


def test_use_last_readout_only_converts_and_one_interaction_is_refused(fixtures, tmp_path):
    """use_last_readout_only: one readout, the last layer's, which mace-torch stores as readouts.0.
    The file says so; the readout's hyperparameters describe that module. With one interaction
    mace-torch builds no readout at all: refused, naming the option."""
    needs("use_last_readout_only")
    model = build(fixtures, MP_SMALL, use_last_readout_only=True)
    assert len(model.readouts) == 1
    meta = converter.convert(model, tmp_path / "last.safetensors")
    hp = meta["hyperparameters"]
    assert hp["use_last_readout_only"] is True
    assert [r["class"] for r in hp["readouts"]] == ["NonLinearReadoutBlock"]
    fixtures.check_converted(model, tmp_path / "last.safetensors", meta)
    plain = converter.convert(build(fixtures, MP_SMALL), tmp_path / "plain.safetensors")
    assert "use_last_readout_only" not in plain["hyperparameters"]
    one = build(fixtures, "mace_1int_L0_corr1_ell1", use_last_readout_only=True)
    assert_cli_refuses(one, tmp_path, "use_last_readout_only with 1 interaction")


def add_zeroed_flags(model):
    """The buffers mace-torch >= 0.3.14 adds to every Contraction, for a model built by an older
    version (under 0.3.16 the model has them already): weights_{k}_zeroed for order k + 1 and
    weights_max_zeroed for the highest order, True where that order's U matrix is all zeros."""
    n = 0
    for _, module in model.named_modules():
        if type(module).__name__ != "Contraction":
            continue
        for nu in range(1, module.correlation + 1):
            flag = "weights_max_zeroed" if nu == module.correlation else f"weights_{nu - 1}_zeroed"
            if not hasattr(module, flag):
                u = getattr(module, f"U_matrix_{nu}")
                module.register_buffer(flag, torch.tensor(not bool(torch.any(u != 0))))
            n += 1
    return n


def write_parity_fixture(fixtures, model, cfg, potential, directory):
    """mace-torch's energies, forces and virials on make_mace_fixtures' structures, in the
    fixture layout tests/models/test_mace_parity.cpp reads (FASTMLIP_MACE_FIXTURE_DIR)."""
    structures = fixtures.make_structures()
    used = fixtures.structures_for(cfg, structures)
    results, worst_python = [], 0.0
    for k, sname in enumerate(used):
        atoms = structures[sname][0]
        for head in list(model.heads):
            res, batch = fixtures.run_mace(model, atoms, head)
            if k == 0:  # the Python evaluator is slow (e3nn codegen per call): one structure
                worst_python = max(worst_python, fixtures.check_file_model(potential, atoms, batch, head, res))
            results.append({"structure": sname, **res})
    name = cfg["name"]
    doc = {"schema": fixtures.SCHEMA, "model": {"name": name, "potential": potential.name},
           "conventions": fixtures.CONVENTIONS,
           "structures": {s: fixtures.structure_json(structures[s][0]) for s in used},
           "results": results}
    (directory / f"{name}.json").write_text(json.dumps(doc))
    index = {"schema": fixtures.SCHEMA, "models": [
        {"name": name, "potential": potential.name, "results": f"{name}.json", "committed": True}]}
    (directory / "index.json").write_text(json.dumps(index))
    return worst_python


@pytest.mark.parametrize("name", [MP_SMALL, SMALL])
def test_models_with_zeroed_flags_convert_and_evaluate_as_mace_torch(fixtures, tmp_path, name):
    """Every model saved by mace-torch >= 0.3.14 has boolean *_zeroed buffers, which stopped the
    converter ("has dtype torch.bool"). They are accepted, written as I64 0 / 1, and the file
    evaluates as mace-torch does: an independent Python evaluator of the file (make_mace_fixtures'
    FileMace) on the first structure always, the C++ core (fastmlip_model_tests' parity test) on
    every structure when FASTMLIP_MODEL_TESTS_BIN names it (ctest sets it)."""
    cfg = cfg_named(fixtures, name)
    model = fixtures.build_model(cfg)  # calibrated: every correlation order contributes
    assert add_zeroed_flags(model) > 0
    rc, stdout, stderr, out = cli(model, tmp_path)
    assert rc == 0, stderr
    with safe_open(str(out), framework="pt") as f:
        meta = json.loads(f.metadata()["fastmlip"])
        flags = [k for k in f.keys() if k.endswith("_zeroed")]
        assert flags and all(f.get_tensor(k).dtype == torch.int64 for k in flags)
    fixtures.check_converted(model, out, meta)  # every tensor verbatim, irreps as the modules'
    # The Bessel prefactor is written as the model holds it (read by the C++ loader).
    with safe_open(str(out), framework="pt") as f:
        assert torch.equal(f.get_tensor("radial_embedding.bessel_fn.prefactor"),
                           model.radial_embedding.bessel_fn.prefactor.to(torch.float64))

    fixture_dir = tmp_path / "fixture"
    fixture_dir.mkdir()
    worst_python = write_parity_fixture(fixtures, model, cfg, out.rename(fixture_dir / out.name), fixture_dir)
    print(f"{name}: FileMace vs mace-torch max relative error {worst_python:.2e}")
    assert worst_python < 1e-10
    binary = os.environ.get("FASTMLIP_MODEL_TESTS_BIN")
    if not binary:
        return
    proc = subprocess.run([binary, "--gtest_filter=MaceParity/*"], capture_output=True, text=True, check=False,
                          env={**os.environ, "FASTMLIP_MACE_FIXTURE_DIR": str(fixture_dir)}, timeout=600)
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SKIPPED" not in proc.stdout and "[  PASSED  ] 2 tests" in proc.stdout, proc.stdout


def test_float32_model_stores_its_own_bessel_prefactor(fixtures, tmp_path):
    """In float32 the model's prefactor is sqrt(2 / r_max) rounded to float32; the file must
    carry that value (the C++ loader reads it instead of recomputing sqrt(2 / r_max))."""
    import math

    model = fixtures.build_model(dict(cfg_named(fixtures, SMALL), r_max=4.7), dtype=torch.float32, calibrate=False)
    out = tmp_path / "f32.safetensors"
    meta = converter.convert(model, out)
    assert meta["dtype"] == "float32"
    with safe_open(str(out), framework="pt") as f:
        stored = float(f.get_tensor("radial_embedding.bessel_fn.prefactor"))
    assert stored == float(model.radial_embedding.bessel_fn.prefactor)
    assert stored != math.sqrt(2.0 / float(model.r_max))


def test_float32_gaussian_model_keeps_its_own_coefficient(fixtures, tmp_path):
    """GaussianBasis computes its unsaved coeff from the Python r_max; a float32 model's r_max
    buffer holds it rounded (4.7), so recomputing it from the file would give another number.
    Such a model was refused; now the coefficient is written as the model holds it."""
    cfg = dict(cfg_named(fixtures, SMALL), r_max=4.7, radial_type="gaussian")
    model = fixtures.build_model(cfg, dtype=torch.float32, calibrate=False)
    meta = converter.convert(model, tmp_path / "g32.safetensors")
    hp = meta["hyperparameters"]
    coeff = float(model.radial_embedding.bessel_fn.coeff)
    assert hp["gaussian_coeff"] == coeff
    assert coeff != -0.5 / (hp["r_max"] / (hp["num_bessel"] - 1)) ** 2  # the file's r_max is float32's


# --- the mutation test -------------------------------------------------------------------------


# A module class the converter does not know (picklable, so that the command line can load it).
Unknown = torch.nn.Identity


def _swap_class(module, name):
    """Turns `module` into an instance of mace-torch's class `name` when this version has one
    (NonLinearBiasReadoutBlock, the Density interaction blocks), else of a subclass so named."""
    import mace.modules.blocks as blocks

    real = getattr(blocks, name, None)
    if real is None or real is type(module):  # blocks.py also imports BesselBasis and the like
        real = type(name, (type(module),), {})
    module.__class__ = real


MUTATIONS = {
    # name: (change the model in place, text the refusal must contain)
    # Either flag alone: the model's and its radial embedding's disagree.
    # (flipped: a fixture model may have either value).
    "apply_cutoff": (lambda m: setattr(m, "apply_cutoff", not getattr(m, "apply_cutoff", True)),
                     "apply_cutoff and its radial embedding's"),
    "radial_apply_cutoff": (lambda m: setattr(m.radial_embedding, "apply_cutoff",
                                              not getattr(m.radial_embedding, "apply_cutoff", True)),
                            "apply_cutoff and its radial embedding's"),
    # A product flag that does not match its weights (flipped: a fixture model may have either).
    "agnostic_product": (lambda m: setattr(m.products[0], "use_agnostic_product",
                                           not getattr(m.products[0], "use_agnostic_product", False)),
                         "use_agnostic_product"),
    # A flag that does not match the readouts the model has (flipped, likewise).
    "last_readout_only": (lambda m: setattr(m, "use_last_readout_only",
                                            not getattr(m, "use_last_readout_only", False)),
                          "use_last_readout_only"),
    # edge_irreps that are not what linear_up maps to.
    "edge_irreps": (lambda m: setattr(m.interactions[-1], "edge_irreps", o3.Irreps("4x0e")), "linear_up irreps"),
    "so3": (lambda m: setattr(m, "use_so3", True), "use_so3"),
    "unknown_attribute": (lambda m: setattr(m.interactions[0], "density_normalization", 3.0),
                          "density_normalization"),
    "embedding_specs": (lambda m: setattr(m, "embedding_specs", {"total_charge": {}}), "embedding_specs"),
    "unknown_buffer": (lambda m: m.radial_embedding.register_buffer("shift", torch.tensor(0.1)),
                       "radial_embedding.shift"),
    "unknown_parameter": (lambda m: m.readouts[0].register_parameter("bias_e", torch.nn.Parameter(torch.ones(1))),
                          "readouts.0.bias_e"),
    "embedding_module": (lambda m: setattr(m, "joint_embedding", Unknown()), "module 'joint_embedding'"),
    "distance_transform": (lambda m: setattr(m.radial_embedding, "distance_transform", Unknown()),
                           "radial_embedding.distance_transform"),
    "interaction_class": (lambda m: _swap_class(m.interactions[-1], "RealAgnosticDensityResidualInteractionBlock"),
                          "RealAgnosticDensityResidualInteractionBlock"),
    "readout_class": (lambda m: _swap_class(m.readouts[-1], "NonLinearBiasReadoutBlock"), "NonLinearBiasReadoutBlock"),
    "product_class": (lambda m: _swap_class(m.products[0].symmetric_contractions, "SymmetricContraction"),
                      "products.0.symmetric_contractions"),
    "bessel_class": (lambda m: _swap_class(m.radial_embedding.bessel_fn, "BesselBasis"), "bessel_fn"),
    "sh_class": (lambda m: _swap_class(m.spherical_harmonics, "SphericalHarmonics"), "spherical_harmonics"),
    "conv_fusion": (lambda m: setattr(m.interactions[0], "conv_fusion", True), "conv_fusion"),
    "cueq": (lambda m: setattr(m.products[0], "cueq_config", type("C", (), {"enabled": True})()), "cueq_config"),
}


def test_every_fixture_model_converts_unchanged(fixtures, tmp_path):
    """The baseline of the mutation test: without a mutation each model converts."""
    for name in model_names(fixtures):
        meta = converter.convert(build(fixtures, name), tmp_path / f"{name}.safetensors")
        assert meta["model"] == "mace", name


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_any_unhandled_change_is_refused(fixtures, tmp_path, mutation):
    """For every fixture model, one change the converter does not handle: a refusal that names
    it, and no file."""
    change, needle = MUTATIONS[mutation]
    for name in model_names(fixtures):
        model = build(fixtures, name)
        change(model)
        out = tmp_path / f"{name}.safetensors"
        with pytest.raises(converter.UnsupportedModelError) as refusal:
            converter.convert(model, out)
        assert needle in str(refusal.value), (name, str(refusal.value))
        assert "supported:" in str(refusal.value)
        assert not out.exists()


# Mutations that pickle in every version (mace-torch 0.3.13 has no NonLinearBiasReadoutBlock, and a
# class made up by the test cannot be unpickled by the converter's process).
@pytest.mark.parametrize("mutation", ["apply_cutoff", "unknown_buffer", "embedding_module", "interaction_class"])
def test_unhandled_changes_exit_2_from_the_command_line(fixtures, tmp_path, mutation):
    change, needle = MUTATIONS[mutation]
    model = build(fixtures, MP_SMALL)
    change(model)
    assert_cli_refuses(model, tmp_path, needle)


def test_inconsistent_zeroed_flag_is_refused(fixtures):
    """A *_zeroed flag that contradicts its U matrix means mace-torch changed what the flags
    mean: refused rather than trusted."""
    model = build(fixtures, SMALL)
    add_zeroed_flags(model)
    contraction = model.products[0].symmetric_contractions.contractions[0]
    contraction.weights_max_zeroed.fill_(not bool(contraction.weights_max_zeroed))
    with pytest.raises(converter.UnsupportedModelError, match="weights_max_zeroed"):
        converter.convert(model, "/nonexistent/never-written.safetensors")


# --- models saved with cuEquivariance layouts (issue 19) -----------------------------------------


@pytest.mark.parametrize("name", ["ssmace_2int_L1_corr2_ell3_zbl", "ssmace_2int_L1_corr2_ell3_density_agnesi_zbl",
                                  "ssmace_2int_L1_corr2_ell2_mh1"])
def test_cueq_model_converts_and_evaluates_as_its_e3nn_model(fixtures, tmp_path, name):
    """A model converted to cuEquivariance layouts by mace-torch's convert_e3nn_cueq (its linears,
    TPs and symmetric contractions are cuequivariance_torch's, the contraction's weights in
    cuEquivariance's own basis) converts from the saved file to one that evaluates as the e3nn
    model it came from, on every structure. Needs the pure-Python cuEquivariance packages
    (tests/reference/setup-venv-cueq.sh); skipped without them."""
    pytest.importorskip("cuequivariance_torch")
    from mace.cli.convert_e3nn_cueq import run as e3nn_to_cueq  # pylint: disable=import-outside-toplevel

    cfg = cfg_named(fixtures, name)
    model = fixtures.build_model(cfg)
    default = torch.get_default_dtype()
    cueq = e3nn_to_cueq(model, device="cpu", return_model=True)
    torch.set_default_dtype(default)
    assert converter.uses_cueq(cueq) and not converter.uses_cueq(model)
    src, out = tmp_path / "cueq.model", tmp_path / "cueq.safetensors"
    torch.save(cueq, src)
    rc, stdout, stderr = run_converter("mace_to_fastmlip.py", src, "-o", out)
    assert rc == 0, (stdout, stderr)
    with safe_open(str(out), framework="pt") as f:
        meta = json.loads(f.metadata()["fastmlip"])
    assert "cuEquivariance" in meta["provenance"]["converted_from"]
    structures = fixtures.make_structures()
    heads = list(model.heads)
    for sname in fixtures.structures_for(cfg, structures):
        atoms = structures[sname][0]
        for head in heads:
            res, batch = fixtures.run_mace(model, atoms, head)
            assert fixtures.check_file_model(out, atoms, batch, head, res) < 1e-12, (sname, head)


def test_cueq_model_with_projected_weights_converts(fixtures, tmp_path):
    """A model built with use_reduced_cg=False keeps its contraction weights in mace-torch's
    basis; cuEquivariance then holds them with a projection to its own (original_mace=True, a
    "projection" buffer applied at every call). The converter applies it once and the file
    evaluates as the model does."""
    pytest.importorskip("cuequivariance_torch")
    from mace.cli.convert_e3nn_cueq import run as e3nn_to_cueq  # pylint: disable=import-outside-toplevel

    model = build(fixtures, "ssmace_2int_L1_corr2_ell3_zbl", use_reduced_cg=False)
    default = torch.get_default_dtype()
    cueq = e3nn_to_cueq(model, device="cpu", return_model=True)
    torch.set_default_dtype(default)
    assert all(p.symmetric_contractions.projection is not None for p in cueq.products)
    out = tmp_path / "projected.safetensors"
    converter.convert(cueq, out)
    atoms = fixtures.make_structures()["triclinic_cuni"][0]
    res, batch = fixtures.run_mace(cueq, atoms, "Default")
    assert fixtures.check_file_model(out, atoms, batch, "Default", res) < 1e-10


def test_cueq_plain_mace_is_refused_with_mace_torchs_reason(fixtures):
    """mace-torch rebuilds the e3nn form of ScaleShiftMACE models only (extract_config_mace_model);
    a plain MACE built with cuEquivariance modules is refused by name (UnsupportedModelError),
    not a KeyError inside mace-torch."""
    pytest.importorskip("cuequivariance_torch")
    from mace.modules.wrapper_ops import CuEquivarianceConfig  # pylint: disable=import-outside-toplevel

    model = build(fixtures, SMALL, cueq_config=CuEquivarianceConfig(enabled=True, layout="ir_mul",
                                                                     group="O3_e3nn", optimize_all=True))
    assert type(model).__name__ == "MACE" and converter.uses_cueq(model)
    with pytest.raises(converter.UnsupportedModelError, match="extract_config_mace_model cannot read it"):
        converter.inspect(converter.from_cueq(model))


CUEQ_DATA = os.path.join(os.path.dirname(__file__), "..", "reference", "data", "mace-cueq")


def cueq_fixtures():
    """tests/reference/data/mace-cueq (make_cueq_fixtures.py): cuEquivariance models saved by
    mace-torch and their own results."""
    with open(os.path.join(CUEQ_DATA, "index.json"), encoding="utf-8") as f:
        return json.load(f)


def needs_cueq_fixture_mace():
    """The pickles name mace-torch 0.3.16's classes (the version that saved them)."""
    saved = converter._version_tuple(cueq_fixtures()["versions"]["mace-torch"])  # pylint: disable=protected-access
    if mace_version() < saved:
        pytest.skip(f"the cuEquivariance fixtures were saved by mace-torch {saved}; this is {mace_version()}")


@pytest.mark.parametrize("name", [m["name"] for m in cueq_fixtures()["models"]])
def test_cueq_fixture_converts_without_cuequivariance(fixtures, tmp_path, name):
    """A model that mace-torch saved with cuEquivariance layouts (make_cueq_fixtures.py: the
    MPA-0, MH-1 and L2 correlation-3 multi-head shapes) converts where cuEquivariance is not
    installed (in .venv-torch2; in .venv-cueq the real classes are read the same way), and the
    file evaluates as the cuEquivariance model did under mace-torch: the e3nn twin (mace-torch's
    own e3nn code with cuEquivariance's basis) on every structure and head, the independent
    Python evaluator of the file on the first structure, and the C++ core on all of them when
    FASTMLIP_MODEL_TESTS_BIN names it (ctest sets it)."""
    import shutil  # pylint: disable=import-outside-toplevel

    needs_cueq_fixture_mace()
    with open(os.path.join(CUEQ_DATA, f"{name}.json"), encoding="utf-8") as f:
        doc = json.load(f)
    source = os.path.join(CUEQ_DATA, doc["model"]["cueq_model"])
    out = tmp_path / doc["model"]["potential"]
    rc, stdout, stderr = run_converter("mace_to_fastmlip.py", source, "-o", out)
    assert rc == 0, (stdout, stderr)
    with safe_open(str(out), framework="pt") as f:
        meta = json.loads(f.metadata()["fastmlip"])
    assert "cuEquivariance" in meta["provenance"]["converted_from"]

    model = converter.load_model(source)
    assert converter.uses_cueq(model)
    twin = converter.from_cueq(model)
    assert not converter.uses_cueq(twin)
    structures = fixtures.make_structures()
    checked_file = set()
    for ref in doc["results"]:
        atoms = structures[ref["structure"]][0]
        res, batch = fixtures.run_mace(twin, atoms, ref["head"])
        for key in ("node_energy", "forces", "virial"):
            got, want = torch.tensor(res[key]), torch.tensor(ref[key])
            assert float((got - want).abs().max()) <= 1e-10 * max(1.0, float(want.abs().max())), (ref["structure"], key)
        if ref["head"] not in checked_file:  # the Python evaluator is slow: one structure per head
            checked_file.add(ref["head"])
            assert fixtures.check_file_model(out, atoms, batch, ref["head"], ref) < 1e-10, (ref["structure"], ref["head"])

    binary = os.environ.get("FASTMLIP_MODEL_TESTS_BIN")
    if not binary:
        return
    shutil.copy(os.path.join(CUEQ_DATA, f"{name}.json"), tmp_path / f"{name}.json")
    (tmp_path / "index.json").write_text(json.dumps({"schema": fixtures.SCHEMA, "models": [
        {"name": name, "potential": out.name, "results": f"{name}.json", "committed": True}]}))
    proc = subprocess.run([binary, "--gtest_filter=MaceParity/*"], capture_output=True, text=True, check=False,
                          env={**os.environ, "FASTMLIP_MACE_FIXTURE_DIR": str(tmp_path)}, timeout=600)
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SKIPPED" not in proc.stdout and "[  PASSED  ] 2 tests" in proc.stdout, proc.stdout


def _replace_field(obj, name, value):
    object.__setattr__(obj, name, value)  # cuequivariance's dataclasses are frozen


def _degree_one(poly):
    (stp,) = [stp for op, stp in poly.operations if len(tuple(op.buffers)) == 3]
    return stp


def _path_like(template, indices):
    """A path with template's coefficient on other segments (a placeholder or cuequivariance's)."""
    cls = type(template)
    if getattr(cls, "fastmlip_placeholder", False):
        path = cls.__new__(cls)
        path.__setstate__({"indices": indices, "coefficients": template.coefficients})
        return path
    return cls(indices, template.coefficients)


def _share_a_weight(poly):
    """Weight 0 (degree 1, the scalar output) also on the first 1o output component."""
    stp = _degree_one(poly)
    _replace_field(stp, "paths", tuple(stp.paths) + (_path_like(stp.paths[0], (0, 1, 1)),))


def _reshape_segments(poly):
    """Input segments of shape (3, mul): another layout than one block of channels each."""
    _replace_field(poly.inputs[1], "segments", tuple((3,) + tuple(seg) for seg in poly.inputs[1].segments))


def _orphan_a_weight(poly):
    stp = _degree_one(poly)
    _replace_field(stp, "paths", tuple(p for p in stp.paths if tuple(p.indices)[0] != 0))


# Changes to a saved cueq model's first contraction that the converter must refuse, not guess at.
CUEQ_MUTATIONS = {
    "shared_weight": (_share_a_weight, "is shared by output irreps"),
    "segment_shape": (_reshape_segments, "segments are not one per component"),
    "unused_weight": (_orphan_a_weight, "are on no path"),
}


@pytest.mark.parametrize("mutation", sorted(CUEQ_MUTATIONS))
def test_cueq_contraction_layouts_it_cannot_read_are_refused(mutation):
    """A cuEquivariance contraction that does not fit the reading (one weight per output irrep
    and degree, one segment of channels per component, every weight on a path) is refused by
    name rather than converted into something else."""
    needs_cueq_fixture_mace()
    change, needle = CUEQ_MUTATIONS[mutation]
    model = converter.load_model(os.path.join(CUEQ_DATA, "cueq_density_agnesi_zbl.model"))
    change(model.products[0].symmetric_contractions.etp.polynomial)
    with pytest.raises(converter.UnsupportedModelError, match="cuEquivariance layouts that the converter cannot read") \
            as refusal:
        converter.convert(model, "/nonexistent/never-written.safetensors")
    assert needle in str(refusal.value), str(refusal.value)

# SPDX-License-Identifier: MIT
"""The CHGNet converter accepts exactly what fastmlip evaluates (issue 17): every model_args
key and state_dict entry is on its allow-list or the checkpoint is refused (exit code 2, no
file). Needs chgnet with its pretrained checkpoints (.venv of tests/reference/setup-venv.sh)."""
import pytest

from conftest import run_converter

torch = pytest.importorskip("torch")
pytest.importorskip("chgnet")

import chgnet_to_fastmlip as converter  # noqa: E402


def checkpoint(name):
    try:
        path = converter.pretrained_path(name)
    except ValueError as e:
        pytest.skip(str(e))
    return converter.load_checkpoint(path)


@pytest.mark.parametrize("name", ["0.3.0", "0.2.0", "r2scan"])
def test_pretrained_checkpoints_convert(tmp_path, name):
    state_dict, model_args = checkpoint(name)
    meta, tensors = converter.convert(state_dict, model_args, tmp_path / "c.safetensors", version=name)
    assert set(tensors) == set(state_dict)
    for key, value in state_dict.items():  # stored as the checkpoint holds them (F32), not recomputed
        assert torch.equal(torch.from_numpy(tensors[key]), value.to(torch.float32)), key
    assert meta["hyperparameters"]["version"] == name


def _with(d, **changes):
    return {**d, **changes}


MUTATIONS = {
    # name: (change (state_dict, model_args) -> (state_dict, model_args), text the refusal names)
    "unknown_model_arg": (lambda sd, a: (sd, _with(a, num_heads=3)), "'num_heads'"),
    "attention_readout_tensor": (lambda sd, a: (_with(sd, **{"pooling.key.weight": torch.zeros(3, 64)}), a),
                                 "pooling.key.weight"),
    "integer_buffer": (lambda sd, a: (_with(sd, **{"num_batches_tracked": torch.tensor(7)}), a),
                       "num_batches_tracked"),
    "batch_norm": (lambda sd, a: (sd, _with(a, gMLP_norm="batch")), "gMLP_norm"),
    "tanh": (lambda sd, a: (sd, _with(a, non_linearity="tanh")), "non_linearity"),
    "mlp_last": (lambda sd, a: (sd, _with(a, mlp_first=False)), "mlp_first"),
    "conv_norm": (lambda sd, a: (sd, _with(a, conv_norm="layer")), "conv_norm"),
    "no_bond_update": (lambda sd, a: (sd, _with(a, update_bond=False)), "update_bond"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_any_unhandled_change_is_refused(tmp_path, mutation):
    change, needle = MUTATIONS[mutation]
    state_dict, model_args = change(*checkpoint("0.3.0"))
    out = tmp_path / "c.safetensors"
    with pytest.raises(converter.UnsupportedModelError) as refusal:
        converter.convert(state_dict, model_args, out, version="x")
    assert needle in str(refusal.value) and "supported:" in str(refusal.value)
    assert not out.exists()


def test_refusal_exits_2_from_the_command_line(tmp_path):
    state_dict, model_args = MUTATIONS["attention_readout_tensor"][0](*checkpoint("0.3.0"))
    src, out = tmp_path / "c.pth.tar", tmp_path / "c.safetensors"
    torch.save({"model": {"state_dict": state_dict, "model_args": model_args}}, src)
    rc, _, stderr = run_converter("chgnet_to_fastmlip.py", src, out, "--version", "x")
    assert rc == converter.EXIT_UNSUPPORTED, stderr
    assert "Traceback" not in stderr and "pooling.key.weight" in stderr
    assert not out.exists()

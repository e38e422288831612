# SPDX-License-Identifier: MIT
"""Shared helpers of the converter tests (tests/convert): small mace-torch models in the shapes
of tests/reference/make_mace_fixtures.py, and the converters run as a user runs them."""
import inspect as pyinspect
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CONVERT = REPO / "potentials" / "convert"
sys.path.insert(0, str(CONVERT))
sys.path.insert(0, str(REPO / "tests" / "reference"))


def mace_version():
    import mace

    return tuple(int(x) for x in mace.__version__.split(".")[:3])


def run_converter(script, *args):
    """The converter's command line in a fresh interpreter: (exit code, stdout, stderr)."""
    proc = subprocess.run([sys.executable, str(CONVERT / script), *map(str, args)],
                          capture_output=True, text=True, check=False, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def constructor_accepts(cls, name):
    return name in pyinspect.signature(cls.__init__).parameters


@pytest.fixture(scope="session")
def fixtures():
    """tests/reference/make_mace_fixtures.py as a module (its MODELS, build_model, run_mace,
    FileMace, check_converted)."""
    pytest.importorskip("mace")
    import make_mace_fixtures  # pylint: disable=import-outside-toplevel

    return make_mace_fixtures

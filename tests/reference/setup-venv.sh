#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Creates the Python environment that regenerates the parity fixtures in tests/reference/data
# (e3nn and mace-torch on the CPU; chgnet with pymatgen for the CHGNet fixtures and converter;
# safetensors for the potential-file interop fixtures).
# A developer tool: CI never runs it, the fixtures are committed.
#
# Why this shape:
# - torch comes from Debian (python3-torch 1.13), not PyPI, whose wheel is a multi-GB CUDA
#   build. The venv is made with --system-site-packages from Debian's own interpreter
#   (/usr/bin/python3), so that it sees Debian's torch, numpy, scipy, ase, ...
# - Every PyPI package is pinned and installed with --no-deps, so that pip never resolves
#   "torch>=1.12" into a download of PyPI's torch.
# - e3nn 0.4.4 is the version mace-torch pins (and so the one MACE models are trained with).
#   mace-torch 0.3.13 is the newest release that still runs on torch 1.13: 0.3.14 and later
#   call torch.compiler.is_compiling() in the forward pass, which arrived in torch 2.1.
# - python-hostlist (a mace-torch dependency) is left out: it ships only as an sdist that does
#   not build under Debian's setuptools, and mace-torch imports it only for SLURM launches.
#
# Usage: tests/reference/setup-venv.sh [VENV_DIR]   (default: <repo>/.venv, ignored by git)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv_dir="${1:-${repo_root}/.venv}"

debian_packages=(
  python3-torch python3-numpy python3-venv python3-scipy python3-sympy
  # mace-torch's runtime dependencies that Debian ships
  python3-ase python3-h5py python3-yaml python3-tqdm python3-matplotlib python3-pandas
  python3-git python3-prettytable python3-packaging python3-typing-extensions
  # pymatgen's (chgnet's) symmetry library
  python3-spglib
  # tests/convert (the converter tests)
  python3-pytest
)
missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y "${missing[@]}"
fi

# Debian's interpreter, not one from pyenv/conda on PATH: only it sees /usr/lib/python3/dist-packages.
/usr/bin/python3 -m venv --system-site-packages "${venv_dir}"

pypi_pins=(
  e3nn==0.4.4
  opt-einsum==3.3.0
  opt-einsum-fx==0.1.4
  mace-torch==0.3.13
  torch-ema==0.3
  torchmetrics==0.11.4  # the 0.11 line needs only torch>=1.8.1; 1.x pulls lightning-utilities
  matscipy==1.0.0
  looseversion==1.3.0
  configargparse==1.7.1
  lmdb==1.4.1
  python-hostlist==2.3.0  # mace_run_train imports it (benchmarks/trainer/run_trainer_bench.py)
  orjson==3.9.15
  safetensors==0.8.0  # make_safetensors_fixture.py (potential-file interop fixtures)
  # chgnet: make_chgnet_fixtures.py and potentials/convert/chgnet_to_fastmlip.py import it
  # whole (with pymatgen); make_kernel_fixtures.py loads chgnet/model/basis.py by path.
  chgnet==0.3.1
  nvidia-ml-py3==7.352.0  # chgnet.utils (imported by chgnet.model) imports nvidia_smi
  pymatgen==2023.10.11
  monty==2023.9.25
  ruamel.yaml==0.17.40
  ruamel.yaml.clib==0.2.8
  networkx==3.1
  tabulate==0.9.0
  uncertainties==3.1.7
  palettable==3.3.3
)
"${venv_dir}/bin/pip" install --no-deps --disable-pip-version-check "${pypi_pins[@]}"

# The r2scan checkpoint (see above): only chgnet/pretrained/r2scan/* of the 0.4.2 wheel.
site_packages="$("${venv_dir}/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
wheel_dir="$(mktemp -d)"
trap 'rm -rf "${wheel_dir}"' EXIT
"${venv_dir}/bin/pip" download --no-deps --disable-pip-version-check chgnet==0.4.2 -d "${wheel_dir}"
"${venv_dir}/bin/python" - "${wheel_dir}" "${site_packages}" <<'PY'
import glob, os, shutil, sys, zipfile
wheel_dir, site_packages = sys.argv[1:]
(wheel,) = glob.glob(os.path.join(wheel_dir, "chgnet-0.4.2-*.whl"))
prefix = "chgnet/pretrained/r2scan/"
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith(prefix) and not m.endswith("/")]
    if not members:
        sys.exit(f"setup-venv.sh: {wheel} holds no {prefix}")
    for m in members:
        target = os.path.join(site_packages, m)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(m) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
PY

"${venv_dir}/bin/python" - <<'PY'
import e3nn, torch
import mace.modules  # noqa: F401  (checks that mace-torch imports on this torch)
import chgnet
from chgnet.model import CHGNet
import os
CHGNet.load()  # the pretrained 0.3.0 weights are there and load on this torch
# chgnet 0.3.1's AtomRef does not know the 'MP-r2SCAN' composition model by name, so the r2scan
# checkpoint cannot go through CHGNet.from_file here; the converter reads only its state_dict
# and model_args, which this checks are there.
r2scan = os.path.join(os.path.dirname(chgnet.__file__), "pretrained", "r2scan",
                      "chgnet_r2scan_transfer_learning_e15f36s161m23.pth.tar")
assert {"state_dict", "model_args"} <= set(torch.load(r2scan, map_location="cpu")["model"])
print(f"reference venv ready: torch {torch.__version__}, e3nn {e3nn.__version__}, chgnet {chgnet.__version__}")
PY

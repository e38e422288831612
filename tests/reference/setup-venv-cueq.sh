#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Creates .venv-cueq: the torch-2 reference environment (setup-venv-torch2.sh, which must exist)
# plus NVIDIA's pure-Python cuEquivariance packages, for the converter's tests of models saved
# with cuEquivariance layouts (tests/convert: test_cueq_*). A developer tool: CI never runs it.
#
# Why a third venv rather than installing into .venv-torch2: with cuequivariance importable,
# mace-torch builds its symmetric contractions' U matrices in cuEquivariance's reduced basis
# (mace/tools/cg.py, use_reduced_cg), so the fixtures that make_mace_fixtures.py builds in
# .venv-torch2 would change. This venv sees .venv-torch2's packages through a .pth file and
# adds only the two cuEquivariance wheels (pure Python; no GPU or CUDA ops package).
#
# Usage: tests/reference/setup-venv-cueq.sh [VENV_DIR]   (default: <repo>/.venv-cueq, ignored by git)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv_dir="${1:-${repo_root}/.venv-cueq}"
torch2="${repo_root}/.venv-torch2"
site_packages() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

if [[ ! -x "${torch2}/bin/python" ]]; then
  echo "setup-venv-cueq.sh: ${torch2} is missing; run tests/reference/setup-venv-torch2.sh first" >&2
  exit 1
fi
/usr/bin/python3 -m venv "${venv_dir}"  # the interpreter .venv-torch2 was made with
site_packages "${torch2}" > "$(site_packages "${venv_dir}")/fastmlip-torch2.pth"
"${venv_dir}/bin/pip" install --disable-pip-version-check cuequivariance==0.13.0 cuequivariance-torch==0.13.0
"${venv_dir}/bin/python" -c 'import cuequivariance_torch, mace, torch; print("cuequivariance_torch", cuequivariance_torch.__version__, "mace-torch", mace.__version__, "torch", torch.__version__)'

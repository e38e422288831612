#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Creates a second reference environment with mace-torch 0.3.16 on PyPI's torch 2.x, for the
# converter tests (tests/convert) and for anything that needs a mace-torch newer than 0.3.13.
# A developer tool: CI never runs it.
#
# Why a second venv: setup-venv.sh (.venv) uses Debian's torch 1.13, and mace-torch 0.3.13 is
# the newest release that runs there (0.3.14 and later call torch.compiler.is_compiling(),
# torch >= 2.1). Models saved by 0.3.14+ carry extra buffers (the symmetric contraction's
# `*_zeroed` flags) that the converter must handle, so the converter is tested under both.
#
# Why this shape:
# - PyPI's torch wheel for Linux is a CUDA build that pulls the nvidia-* wheels (a few GB). That
#   is accepted for a developer venv; the CPU-only wheel lives off PyPI and is not reachable here.
# - A plain venv (no --system-site-packages): nothing from Debian's torch 1.13 may leak in.
# - mace-torch is installed with --no-deps, its runtime dependencies pinned below, so that the
#   versions are the ones tested. python-hostlist is left out: mace-torch imports it only for
#   SLURM launches.
#
# Usage: tests/reference/setup-venv-torch2.sh [VENV_DIR]   (default: <repo>/.venv-torch2, ignored by git)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv_dir="${1:-${repo_root}/.venv-torch2}"

if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y python3-venv
fi
/usr/bin/python3 -m venv "${venv_dir}"

"${venv_dir}/bin/pip" install --disable-pip-version-check \
  torch==2.5.1 \
  numpy==1.26.4 \
  scipy==1.14.1 \
  ase==3.23.0 \
  safetensors==0.4.5 \
  pytest==8.3.3 \
  e3nn==0.4.4 \
  opt-einsum==3.4.0 \
  opt-einsum-fx==0.1.4 \
  torch-ema==0.3 \
  torchmetrics==1.5.2 \
  matscipy==1.1.1 \
  prettytable==3.11.0 \
  h5py==3.12.1 \
  configargparse==1.7 \
  GitPython==3.1.43 \
  PyYAML==6.0.2 \
  tqdm==4.67.0 \
  lmdb==1.5.1 \
  orjson==3.10.11 \
  matplotlib==3.9.2 \
  pandas==2.2.3 \
  psutil==7.2.2
"${venv_dir}/bin/pip" install --no-deps --disable-pip-version-check mace-torch==0.3.16

"${venv_dir}/bin/python" - <<'PY'
import e3nn, torch
import mace, mace.modules  # noqa: F401  (checks that mace-torch imports on this torch)
from mace import __version__ as mace_version
print(f"reference venv (torch 2) ready: torch {torch.__version__}, e3nn {e3nn.__version__}, "
      f"mace-torch {mace_version.__version__ if hasattr(mace_version, '__version__') else mace_version}")
PY

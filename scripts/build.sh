#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures and builds one CMake preset (default: "default" into build/).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"
preset=${1:-default}
jobs=${FASTMLIP_JOBS:-$(nproc)}
cd "$repo"
step "configure preset '$preset'" "cmake --preset $preset" cmake --preset "$preset" -DFASTMLIP_LAMMPS_ROOT="$(fastmlip_cache_dir)/lammps/current"
step "build preset '$preset'" "cmake --build --preset $preset -j $jobs" cmake --build --preset "$preset" -j "$jobs"

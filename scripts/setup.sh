#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's first command: installs every dependency (Debian packages, LAMMPS from
# Debian's source package), builds fastmlip (CMake preset "default" into build/), then runs
# the main job: generate the CuNi reference dataset into examples/cuni/data/.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

"$here/install-deps.sh"
"$here/build.sh" default

mkdir -p "$repo/examples/cuni/data"
step "generate the CuNi EAM dataset" "$repo/build/bin/fastmlip-cuni-dataset --output $repo/examples/cuni/data/cuni-eam.xyz" \
  "$repo/build/bin/fastmlip-cuni-dataset" --output "$repo/examples/cuni/data/cuni-eam.xyz"
log "done. Next: see README.md ('Where to go next') and examples/cuni/README.md"

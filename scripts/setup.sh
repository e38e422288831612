#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's first command: installs every dependency (Debian packages, LAMMPS from
# Debian's source package), builds fastmlip (CMake preset "default" into build/), then runs
# the main jobs: generate the CuNi reference dataset into examples/cuni/data/, then run the
# Cu-Ni MD example (examples/cuni/in.cuni-md, shortened) with the shipped MACE potential.
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
# The example as a user runs it, shortened to 0.2 ps NVT + 0.2 ps NVE (about a minute): the
# thermo output shows the plugin, the potential and LAMMPS working together.
step "run the Cu-Ni MACE MD example" "build/bin/lmp -in examples/cuni/in.cuni-md -var nvt_steps 200 -var nve_steps 200" \
  bash -c 'cd "$1" && build/bin/lmp -in examples/cuni/in.cuni-md -var nvt_steps 200 -var nve_steps 200 \
           -log examples/cuni/data/cuni-md.log' _ "$repo"
log "done. Next: see README.md ('Where to go next') and examples/cuni/README.md"

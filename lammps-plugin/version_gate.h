// SPDX-License-Identifier: MIT
#pragma once
// The plugin's load-time check that the running LAMMPS is the one it was compiled against.
//
// A plugin compiles against LAMMPS' internal headers, so the class layouts it assumes (Pair,
// Atom, NeighList...) are those of one version. Loaded into another, it would read the
// wrong fields and crash or, worse, compute silently wrong forces. LAMMPS itself only
// prints a note on a mismatch; we refuse to register styles instead. Kept free of LAMMPS
// headers so it can be unit-tested.
#include <string>

namespace fastmlip::plugin {

/// "" when `running` (lmp->version) matches `compiled` (LAMMPS_VERSION at build time);
/// otherwise the error message to give the user.
std::string check_lammps_version(const std::string& compiled, const std::string& running);

}  // namespace fastmlip::plugin

// SPDX-License-Identifier: MIT
#include "version_gate.h"

namespace fastmlip::plugin {

std::string check_lammps_version(const std::string& compiled, const std::string& running) {
  if (compiled == running) {
    return "";
  }
  return "fastmlipplugin.so was compiled against LAMMPS version '" + compiled +
         "' but is loaded into LAMMPS version '" + running +
         "'. Plugins depend on LAMMPS' internal class layout, so fastmlip refuses to load. "
         "Rebuild the plugin against this LAMMPS's source tree: cmake -DLAMMPS_SOURCE_DIR=<lammps>/src "
         "(see docs/building.md).";
}

}  // namespace fastmlip::plugin

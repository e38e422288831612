// SPDX-License-Identifier: MIT
#pragma once
// `fastmlip info`: reports what this plugin build is and can do, on rank 0.
#include "command.h"

namespace LAMMPS_NS {

class FastmlipCommand : public Command {
 public:
  explicit FastmlipCommand(LAMMPS* lmp) : Command(lmp) {}
  void command(int narg, char** arg) override;
};

}  // namespace LAMMPS_NS

// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include "version_gate.h"

namespace fastmlip::plugin {
namespace {

TEST(VersionGate, AcceptsTheSameVersion) { EXPECT_EQ(check_lammps_version("29 Sep 2021", "29 Sep 2021"), ""); }

TEST(VersionGate, RefusesAnotherVersionAndSaysWhatToDo) {
  const std::string msg = check_lammps_version("29 Sep 2021", "22 Jul 2025");
  EXPECT_NE(msg.find("'29 Sep 2021'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'22 Jul 2025'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Rebuild the plugin"), std::string::npos) << msg;
}

}  // namespace
}  // namespace fastmlip::plugin

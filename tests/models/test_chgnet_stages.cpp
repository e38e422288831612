// SPDX-License-Identifier: MIT
// CHGNet's block list (models/chgnet/chgnet_stages.hpp): what both executors run, in order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "models/chgnet/chgnet_stages.hpp"

namespace fastmlip::models::chgnet {
namespace {

std::vector<std::string> described(int n_conv) {
  std::vector<std::string> out;
  for (const auto& s : stage_list(n_conv)) {
    out.push_back(describe(s));
  }
  return out;
}

// chgnet 0.3.0: four atom convolutions, three bond convolutions, two angle updates (the third
// would feed nothing), the magnetic moments read from x^3 before the last atom convolution.
TEST(ChgnetStages, Chgnet030) {
  const std::vector<std::string> expected = {
      "basis",       "embedding",   "atom_conv 0", "exchange x1",    "bond_conv 0", "angle_update 0",
      "atom_conv 1", "exchange x2", "bond_conv 1", "angle_update 1", "atom_conv 2", "exchange x3",
      "bond_conv 2", "magmom x3",   "atom_conv 3", "readout",
  };
  EXPECT_EQ(described(4), expected);
}

TEST(ChgnetStages, SmallestModelAndRefusal) {
  const std::vector<std::string> expected = {"basis",       "embedding", "atom_conv 0", "exchange x1",
                                             "bond_conv 0", "magmom x1", "atom_conv 1", "readout"};
  EXPECT_EQ(described(2), expected);
  EXPECT_THROW(stage_list(1), InputError);
}

// Every block reads features an earlier block made: x^k before AtomConv k and BondConv k-1,
// b^k before AtomConv k, g^k before BondConv k; and the ghosts of x^k are exchanged before
// AtomConv k reads them (k >= 1).
TEST(ChgnetStages, EveryInputIsMadeEarlier) {
  for (int n_conv : {2, 3, 4, 5, 7}) {
    SCOPED_TRACE(n_conv);
    int x = 0, b = 0, g = 0, exchanged = 0;  // the highest level made so far
    bool readout = false;
    for (const auto& s : stage_list(n_conv)) {
      SCOPED_TRACE(describe(s));
      switch (s.kind) {
        case StageKind::AtomConv:
          EXPECT_EQ(x, s.layer);
          EXPECT_EQ(b, s.layer);
          EXPECT_EQ(exchanged, s.layer);
          x = s.layer + 1;
          break;
        case StageKind::ExchangeAtoms:
          EXPECT_EQ(x, s.layer);
          exchanged = s.layer;
          break;
        case StageKind::BondConv:
          EXPECT_EQ(x, s.layer + 1);
          EXPECT_EQ(g, s.layer);
          b = s.layer + 1;
          break;
        case StageKind::AngleUpdate:
          EXPECT_EQ(b, s.layer + 1);
          g = s.layer + 1;
          break;
        case StageKind::Magmom:
          EXPECT_EQ(x, n_conv - 1);
          break;
        case StageKind::Readout:
          EXPECT_EQ(x, n_conv);
          readout = true;
          break;
        default:
          break;
      }
    }
    EXPECT_TRUE(readout);
    EXPECT_EQ(b, n_conv - 1);
    EXPECT_EQ(g, n_conv - 2);  // no update after the last BondConv
  }
}

}  // namespace
}  // namespace fastmlip::models::chgnet

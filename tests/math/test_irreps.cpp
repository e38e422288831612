// SPDX-License-Identifier: MIT
// Irreps parse/print/layout against e3nn 0.4.4's behaviour (the expected values are what
// e3nn returns for the same calls; several are the examples of its docstrings).
#include <gtest/gtest.h>

#include "math/irreps.hpp"
#include "math_test_util.hpp"

namespace fastmlip {
namespace {

using test::expect_input_error;

TEST(Irreps, ParsesAndPrintsMaceHiddenIrreps) {
  const Irreps irreps = Irreps::parse("128x0e+128x1o+64x2e");
  EXPECT_EQ(irreps.str(), "128x0e+128x1o+64x2e");
  ASSERT_EQ(irreps.size(), 3u);
  EXPECT_EQ(irreps[1].mul, 128);
  EXPECT_EQ(irreps[1].ir, (Irrep{1, -1}));
  EXPECT_EQ(irreps[2].ir, (Irrep{2, 1}));
  EXPECT_EQ(irreps.dim(), 128 + 128 * 3 + 64 * 5);
  EXPECT_EQ(irreps.num_irreps(), 320);
  EXPECT_EQ(irreps.offsets(), (std::vector<int>{0, 128, 512, 832}));
  EXPECT_EQ(irreps.lmax(), 2);
  EXPECT_EQ(irreps.count(Irrep{1, -1}), 128);
  EXPECT_EQ(irreps.count(Irrep{1, 1}), 0);
  EXPECT_EQ(Irreps::parse(irreps.str()), irreps);
}

TEST(Irreps, AcceptsE3nnShorthands) {
  // Implicit multiplicity 1, whitespace around tokens, "y" = parity (-1)^l, zero multiplicity.
  EXPECT_EQ(Irreps::parse(" 0e + 1o ").str(), "1x0e+1x1o");
  EXPECT_EQ(Irreps::parse("1y+2y+3x3y").str(), "1x1o+1x2e+3x3o");
  EXPECT_EQ(Irreps::parse("0x1o").str(), "0x1o");
  EXPECT_EQ(Irreps::parse("0x1o").dim(), 0);
  EXPECT_TRUE(Irreps::parse("").empty());
  EXPECT_TRUE(Irreps::parse("  ").empty());
  EXPECT_EQ(Irreps().str(), "");
  EXPECT_EQ(Irrep::parse("10e").l, 10);
  EXPECT_EQ(Irrep::parse(" 2o").str(), "2o");
}

TEST(Irreps, LsAndSphericalHarmonics) {
  EXPECT_EQ(Irreps::parse("2x0e+1x1o").ls(), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(Irreps::spherical_harmonics(3).str(), "1x0e+1x1o+1x2e+1x3o");
  EXPECT_EQ(Irreps::spherical_harmonics(2, 1).str(), "1x0e+1x1e+1x2e");
  EXPECT_EQ(Irreps::spherical_harmonics(3).dim(), 16);
}

TEST(Irreps, SimplifyMergesNeighboursOnly) {
  EXPECT_EQ(Irreps::parse("1e + 1e + 0e").simplify().str(), "2x1e+1x0e");
  EXPECT_EQ(Irreps::parse("1e + 1e + 0e + 1e").simplify().str(), "2x1e+1x0e+1x1e");
  EXPECT_EQ(Irreps::parse("0x0e+2x1o+0x2e+3x1o").simplify().str(), "5x1o");
  EXPECT_EQ(Irreps::parse("4x0e + 0x1o + 2x3e").remove_zero_multiplicities().str(), "4x0e+2x3e");
}

TEST(Irreps, SortFollowsE3nnPermutations) {
  const Irreps::Sorted s = Irreps::parse("2o + 1e + 0e + 1e").sort();
  EXPECT_EQ(s.irreps.str(), "1x0e+1x1e+1x1e+1x2o");
  EXPECT_EQ(s.p, (std::vector<int>{3, 1, 0, 2}));
  EXPECT_EQ(s.inv, (std::vector<int>{2, 1, 3, 0}));
  // (l, p) tuple order: odd before even at equal l.
  EXPECT_EQ(Irreps::parse("0e+0o+1e+1o").sort().irreps.str(), "1x0o+1x0e+1x1o+1x1e");
}

TEST(Irreps, ConcatenatesWithPlus) {
  EXPECT_EQ((Irreps::parse("8x0e") + Irreps::parse("8x1o")).str(), "8x0e+8x1o");
}

TEST(Irreps, ProductAndCouplingRules) {
  const std::vector<Irrep> p = irrep_product(Irrep{1, -1}, Irrep{2, 1});
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], (Irrep{1, -1}));
  EXPECT_EQ(p[2], (Irrep{3, -1}));
  EXPECT_TRUE(coupling_allowed(Irrep{1, -1}, Irrep{1, -1}, Irrep{2, 1}));
  EXPECT_FALSE(coupling_allowed(Irrep{1, -1}, Irrep{1, -1}, Irrep{2, -1}));  // parity
  EXPECT_FALSE(coupling_allowed(Irrep{1, -1}, Irrep{1, -1}, Irrep{3, -1}));  // triangle
  EXPECT_TRUE(coupling_allowed(Irrep{0, 1}, Irrep{3, -1}, Irrep{3, -1}));
}

TEST(Irreps, RejectsBadTokensNamingThem) {
  expect_input_error([] { Irreps::parse("128x0e+x1o"); }, {"\"x1o\"", "128x0e+x1o"});
  expect_input_error([] { Irreps::parse("16x0e+16x1q"); }, {"\"16x1q\""});
  expect_input_error([] { Irreps::parse("2x3"); }, {"\"2x3\""});
  expect_input_error([] { Irreps::parse("1x1o+"); }, {"\"\""});
  expect_input_error([] { Irreps::parse("1o++2e"); }, {"1o++2e"});
  expect_input_error([] { Irreps::parse("-1x0e"); }, {"\"-1x0e\""});
  expect_input_error([] { Irreps::parse("1x1x1o"); }, {"\"1x1x1o\"", "more than one"});
  expect_input_error([] { Irreps::parse("99999999999x0e"); }, {"99999999999x0e"});
  expect_input_error([] { Irreps::parse("abc"); }, {"\"abc\""});
  expect_input_error([] { Irrep::parse("e"); }, {"\"e\""});
  expect_input_error([] { Irrep::parse("-1o"); }, {"\"-1o\""});
  expect_input_error([] { Irreps().lmax(); }, {"empty"});
  expect_input_error([] { Irreps(std::vector<MulIrrep>{{1, Irrep{1, 0}}}); }, {"p 0"});
  expect_input_error([] { Irreps::spherical_harmonics(-1); }, {"lmax -1"});
}

}  // namespace
}  // namespace fastmlip

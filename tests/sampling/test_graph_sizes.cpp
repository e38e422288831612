// SPDX-License-Identifier: MIT
// Where the sampler's sizes come from: size measures, size lists (and their errors), extended
// XYZ counting, and the synthetic Table 3 / MPtrj draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "sampling/graph_sizes.hpp"

namespace fastmlip::sampling {
namespace {

TEST(SizeMeasure, ParsesTheSpellings) {
  const GraphSize g{10, 300, 1234};
  EXPECT_EQ(SizeMeasure::parse("atoms")(g), 10);
  EXPECT_EQ(SizeMeasure::parse("edges")(g), 300);
  EXPECT_EQ(SizeMeasure::parse("angles")(g), 1234);
  EXPECT_EQ(SizeMeasure::parse("atoms+edges+angles")(g), 1544);
  EXPECT_EQ(SizeMeasure::parse("edges+atoms")(g), 310);
  // 0.1 * 300 is 30.000000000000004 in binary: still 30, not 31.
  EXPECT_EQ(SizeMeasure::parse("weighted:1,0.1,0")(g), 40);
  EXPECT_EQ(SizeMeasure::parse("weighted:0,0,0.5")(GraphSize{0, 0, 3}), 2);  // 1.5 rounds up
  EXPECT_TRUE(SizeMeasure::parse("atoms+angles").needs_angles());
  EXPECT_FALSE(SizeMeasure::parse("atoms+angles").needs_edges());
  for (const char* bad : {"", "bonds", "atoms+atoms", "atoms+", "weighted:1,2", "weighted:1,-1,0",
                          "weighted:0,0,0", "weighted:a,b,c"}) {
    EXPECT_THROW(SizeMeasure::parse(bad), InputError) << bad;
  }
}

SizeList parse(const std::string& text, const std::string& name = "sizes.txt") {
  std::istringstream in(text);
  return read_size_list(in, name);
}

TEST(SizeList, ReadsOneGraphPerLine) {
  const SizeList list = parse("# atoms edges angles\n12\n\n  5 40   # a comment\n7 50 90\n");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list.graphs[0].atoms, 12);
  EXPECT_EQ(list.graphs[1].edges, 40);
  EXPECT_EQ(list.graphs[2].angles, 90);
  EXPECT_EQ(list.columns, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(list.lines, (std::vector<long>{2, 4, 5}));
  EXPECT_EQ(list.where(1), "sizes.txt:4");
  EXPECT_EQ(packing_sizes(list, SizeMeasure::parse("atoms")), (std::vector<std::int64_t>{12, 5, 7}));
  EXPECT_TRUE(parse("").graphs.empty());
}

TEST(SizeList, MalformedLinesNameFileAndLine) {
  struct Bad {
    const char* text;
    long line;
  };
  for (const Bad& b : {Bad{"1\n2\nx\n", 3}, Bad{"1 2 3 4\n", 1}, Bad{"5\n-5\n", 2}, Bad{"1.5\n", 1},
                       Bad{"1\n\n# c\n3 4 y\n", 4}, Bad{"99999999999999999999\n", 1}}) {
    try {
      parse(b.text, "bad.txt");
      ADD_FAILURE() << "no error for " << b.text;
    } catch (const FileError& e) {
      EXPECT_EQ(e.path(), "bad.txt");
      EXPECT_EQ(e.line(), b.line) << e.what();
      EXPECT_NE(std::string(e.what()).find("atoms [edges [angles]]"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_size_list("/nonexistent/sizes.txt"), FileError);
}

TEST(SizeList, AMissingColumnNamesTheLine) {
  const SizeList list = parse("10 100 1000\n20\n30 300 3000\n", "few.txt");
  try {
    packing_sizes(list, SizeMeasure::parse("atoms+edges+angles"));
    FAIL();
  } catch (const FileError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("needs the edges column"), std::string::npos) << e.what();
  }
  const SizeList two = parse("10 100\n", "two.txt");
  try {
    packing_sizes(two, SizeMeasure::parse("angles"));
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("needs the angles column"), std::string::npos) << e.what();
  }
  EXPECT_EQ(packing_sizes(two, SizeMeasure::parse("edges")), (std::vector<std::int64_t>{100}));
}

TEST(SizeList, WritesWhatItReads) {
  SizeList list = synthetic_sizes("table3:50", 1);
  std::ostringstream out;
  write_size_list(out, list);
  const SizeList again = parse(out.str());
  ASSERT_EQ(again.size(), list.size());
  for (std::size_t g = 0; g < list.size(); ++g) {
    EXPECT_EQ(again.graphs[g].atoms, list.graphs[g].atoms);
    EXPECT_EQ(again.graphs[g].edges, list.graphs[g].edges);
    EXPECT_EQ(again.graphs[g].angles, list.graphs[g].angles);
  }
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(SizesFromExtxyz, CountsEdgesAndAnglesPerFrame) {
  // fcc Cu (4 atoms, 12 neighbours within 3 A, 12*11 bond pairs each) and a water molecule
  // without a cell (every atom sees the other two).
  const std::string path =
      write_temp("fastmlip_sizes.xyz",
                 "4\n"
                 "Lattice=\"3.615 0 0 0 3.615 0 0 0 3.615\" Properties=species:S:1:pos:R:3 pbc=\"T T T\"\n"
                 "Cu 0 0 0\nCu 0 1.8075 1.8075\nCu 1.8075 0 1.8075\nCu 1.8075 1.8075 0\n"
                 "3\n"
                 "Properties=species:S:1:pos:R:3\n"
                 "O 0 0 0\nH 0.96 0 0\nH -0.24 0.93 0\n");
  const SizeList list = sizes_from_extxyz(path, 3.0, 3.0);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list.graphs[0].atoms, 4);
  EXPECT_EQ(list.graphs[0].edges, 48);
  EXPECT_EQ(list.graphs[0].angles, 528);
  EXPECT_EQ(list.graphs[1].atoms, 3);
  EXPECT_EQ(list.graphs[1].edges, 6);
  EXPECT_EQ(list.graphs[1].angles, 6);
  EXPECT_EQ(list.lines, (std::vector<long>{1, 7}));
  std::remove(path.c_str());
}

TEST(SizesFromExtxyz, ErrorsNameTheFrame) {
  const std::string dup = write_temp("fastmlip_dup.xyz",
                                     "1\nProperties=species:S:1:pos:R:3\nH 0 0 0\n"
                                     "2\nProperties=species:S:1:pos:R:3\nH 1 1 1\nH 1 1 1\n");
  try {
    sizes_from_extxyz(dup, 5.0, 3.0);
    FAIL();
  } catch (const FileError& e) {
    EXPECT_EQ(e.line(), 4);
    EXPECT_NE(std::string(e.what()).find("frame 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("atoms 1 and 2"), std::string::npos) << e.what();
  }
  const std::string bad = write_temp("fastmlip_bad.xyz", "2\nProperties=species:S:1:pos:R:3\nH 0 0 0\n");
  EXPECT_THROW(sizes_from_extxyz(bad, 5.0, 3.0), FileError);
  EXPECT_THROW(sizes_from_extxyz("/nonexistent/x.xyz", 5.0, 3.0), FileError);
  std::remove(dup.c_str());
  std::remove(bad.c_str());
}

TEST(Synthetic, Table3HasThePapersCountsAndRanges) {
  const SizeList full = synthetic_sizes("table3", 0);
  EXPECT_EQ(full.size(), 2650823u);
  std::int64_t lo = 1 << 30, hi = 0;
  for (const auto& g : full.graphs) {
    lo = std::min(lo, g.atoms);
    hi = std::max(hi, g.atoms);
  }
  EXPECT_EQ(lo, 1);
  EXPECT_EQ(hi, 768);  // liquid water
  // The same spec and seed give the same sizes; another seed does not.
  const SizeList a = synthetic_sizes("table3:1000", 3), b = synthetic_sizes("table3:1000", 3),
                 c = synthetic_sizes("table3:1000", 4);
  ASSERT_EQ(a.size(), 1000u);
  bool same = true, differ = false;
  for (std::size_t g = 0; g < a.size(); ++g) {
    same &= a.graphs[g].atoms == b.graphs[g].atoms && a.graphs[g].angles == b.graphs[g].angles;
    differ |= a.graphs[g].atoms != c.graphs[g].atoms;
  }
  EXPECT_TRUE(same);
  EXPECT_TRUE(differ);
  EXPECT_EQ(synthetic_sizes("table3:0", 0).size(), 0u);
  EXPECT_EQ(synthetic_sizes("table3:1", 0).size(), 1u);
  for (const char* bad : {"table4", "table3:x", "table3:-1", "mptrj:"}) {
    EXPECT_THROW(synthetic_sizes(bad, 0), InputError) << bad;
  }
}

TEST(Synthetic, MptrjIsLongTailedWithMeanAbout31) {
  const SizeList m = synthetic_sizes("mptrj:200000", 9);
  ASSERT_EQ(m.size(), 200000u);
  double sum = 0;
  std::vector<std::int64_t> atoms;
  for (const auto& g : m.graphs) {
    sum += static_cast<double>(g.atoms);
    atoms.push_back(g.atoms);
    ASSERT_GE(g.atoms, 1);
    ASSERT_LE(g.atoms, 444);
    // The edge and angle model: 30-60 edges and 6*5 to 16*15 angles per atom.
    ASSERT_GE(g.edges, 30 * g.atoms - 1);
    ASSERT_LE(g.edges, 60 * g.atoms);
    ASSERT_GE(g.angles, 30 * g.atoms - 1);
    ASSERT_LE(g.angles, 240 * g.atoms);
  }
  const double mean = sum / static_cast<double>(m.size());
  EXPECT_NEAR(mean, 31.2, 1.0);
  std::sort(atoms.begin(), atoms.end());
  const double median = static_cast<double>(atoms[atoms.size() / 2]);
  EXPECT_LT(median, mean);                           // right-skewed
  EXPECT_GT(atoms[atoms.size() * 999 / 1000], 150);  // with a long tail
}

}  // namespace
}  // namespace fastmlip::sampling

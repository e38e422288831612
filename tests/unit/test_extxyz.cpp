// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <sstream>

#include "core/error.hpp"
#include "io/extxyz.hpp"

namespace fastmlip::io {
namespace {

const char* kTwoFrames =
    "2\n"
    "Lattice=\"3.6 0 0 0 3.6 0 0 0 3.6\" Properties=species:S:1:pos:R:3:forces:R:3 energy=-7.25 "
    "stress=\"1 2 3 2 5 6 3 6 9\" config_type=bulk pbc=\"T T T\"\n"
    "Cu 0 0 0 0.1 0.2 0.3\n"
    "Ni 1.8 1.8 0 -0.1 -0.2 -0.3\n"
    "1\n"
    "Properties=species:S:1:pos:R:3 energy=-1.5 note=\"a b\"\n"
    "Cu 0.5 0.25 0.125\n";

std::vector<Frame> parse(const std::string& text, const std::string& name = "test.xyz") {
  std::istringstream in(text);
  ExtxyzReader r(in, name);
  std::vector<Frame> out;
  Frame f;
  while (r.next(f)) {
    out.push_back(f);
  }
  return out;
}

TEST(Extxyz, ReadsAseConventions) {
  const auto frames = parse(kTwoFrames);
  ASSERT_EQ(frames.size(), 2u);
  const Frame& a = frames[0];
  EXPECT_EQ(a.natoms(), 2u);
  EXPECT_EQ(a.species[1], "Ni");
  ASSERT_TRUE(a.cell.has_value());
  EXPECT_DOUBLE_EQ((*a.cell)[4], 3.6);
  EXPECT_TRUE(a.pbc[0] && a.pbc[1] && a.pbc[2]);
  EXPECT_DOUBLE_EQ(a.info_numbers("energy").at(0), -7.25);
  EXPECT_EQ(a.info_numbers("stress").size(), 9u);
  EXPECT_EQ(*a.find_info("config_type"), "bulk");
  const AtomColumn* f = a.find_array("forces");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->width, 3);
  EXPECT_DOUBLE_EQ(f->numbers[5], -0.3);
  EXPECT_EQ(a.line, 1);
  const Frame& b = frames[1];
  EXPECT_FALSE(b.cell.has_value());
  EXPECT_FALSE(b.pbc[0]);
  EXPECT_EQ(*b.find_info("note"), "a b");
  EXPECT_EQ(b.line, 5);
}

TEST(Extxyz, RoundTripsExactly) {
  auto frames = parse(kTwoFrames);
  frames[1].positions[0] = 0.1 + 0.2;  // not representable in few digits
  std::ostringstream out;
  for (const auto& f : frames) {
    write_extxyz(out, f);
  }
  const auto again = parse(out.str());
  ASSERT_EQ(again.size(), frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(again[i].species, frames[i].species);
    EXPECT_EQ(again[i].positions, frames[i].positions);  // bitwise equal doubles
    EXPECT_EQ(again[i].info, frames[i].info);
    EXPECT_EQ(again[i].pbc, frames[i].pbc);
    EXPECT_EQ(again[i].cell, frames[i].cell);
  }
}

TEST(Extxyz, EmptyInputHasNoFrames) { EXPECT_TRUE(parse("").empty()); }

struct BadCase {
  const char* text;
  long line;
  const char* words;
};

TEST(Extxyz, MalformedInputNamesFileAndLine) {
  const BadCase cases[] = {
      {"x\n", 1, "number of atoms"},
      {"2\nProperties=species:S:1:pos:R:3\nCu 0 0 0\n", 4, "file ends inside a frame"},
      {"1\nProperties=species:S:1:pos:R:3\nCu 0 0\n", 3, "columns"},
      {"1\nProperties=species:S:1:pos:R:3\nQq 0 0 0\n", 3, "not an element"},
      {"1\nProperties=species:S:1:pos:R:3\nCu 0 nan 0\n", 3, "finite"},
      {"1\nLattice=\"1 2 3\"\nCu 0 0 0\n", 2, "Lattice"},
      {"1\nenergy=\"-1\nCu 0 0 0\n", 2, "unterminated"},
      {"1\nProperties=species:S:1:pos:Q:3\nCu 0 0 0\n", 2, "type must be"},
      {"1\n", 2, "comment line"},
  };
  for (const auto& c : cases) {
    try {
      parse(c.text, "bad.xyz");
      ADD_FAILURE() << "no error for: " << c.text;
    } catch (const FileError& e) {
      EXPECT_EQ(e.path(), "bad.xyz");
      EXPECT_EQ(e.line(), c.line) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.words), std::string::npos) << e.what();
    }
  }
}

TEST(Extxyz, MalformedInputNamesTheFrame) {
  // The third frame (lines 8-10) is cut short: the error names line 11 and frame 3 (1-based, ase.io.read's
  // index 2), so a user can find it in a file of thousands of frames.
  const std::string text = std::string(kTwoFrames) + "2\nProperties=species:S:1:pos:R:3\nCu 0 0 0\n";
  try {
    parse(text, "three.xyz");
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_EQ(e.line(), 11) << e.what();
    EXPECT_NE(std::string(e.what()).find("three.xyz:11: frame 3: file ends inside a frame"), std::string::npos)
        << e.what();
  }
  const auto frames = parse(kTwoFrames);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].index, 1);
  EXPECT_EQ(frames[1].index, 2);
}

TEST(Extxyz, MissingInfoKeyNamesTheFrame) {
  const auto frames = parse(kTwoFrames, "data.xyz");
  try {
    frames[1].info_numbers("stress");
    FAIL();
  } catch (const FileError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("data.xyz:5:", 0), 0u) << e.what();
  }
}

TEST(Extxyz, ReadFileNamesAMissingFile) {
  EXPECT_THROW(read_extxyz("/nonexistent/fastmlip.xyz"), FileError);
}

// Bugs found while fuzzing the reader (tests/fuzz/fuzz_extxyz.cpp, issue 17); the inputs are
// under tests/fuzz/corpus/extxyz/regression-*.xyz.
TEST(Extxyz, RepeatedPropertiesColumnIsAnErrorNotAnOutOfBoundsWrite) {
  // Two species:S:1 columns left the first one out of the frame's arrays, and the atom loop
  // wrote past their end (heap-buffer-overflow under ASan).
  for (const char* text : {"1\nProperties=species:S:1:species:S:1:pos:R:3\nCu Cu 0 0 0\n",
                           "1\nProperties=species:S:1:pos:R:3:q:R:1:q:R:1\nCu 0 0 0 1 2\n"}) {
    try {
      parse(text, "dup.xyz");
      ADD_FAILURE() << "no error for: " << text;
    } catch (const FileError& e) {
      EXPECT_EQ(e.line(), 2) << e.what();
      EXPECT_NE(std::string(e.what()).find("twice"), std::string::npos) << e.what();
    }
  }
}

TEST(Extxyz, HugeAtomCountInAShortFileIsAnErrorNotAnAllocation) {
  // The count line's claim was allocated up front: 2e9 atoms asked for 64 GB before reading one.
  try {
    parse("2000000000\nProperties=species:S:1:pos:R:3\nCu 0 0 0\n", "huge.xyz");
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("file ends inside a frame"), std::string::npos) << e.what();
  }
}

TEST(Extxyz, ColumnCountsNearIntMaxDoNotOverflowTheRowWidth) {
  // Two counts of 2^31 - 1 overflowed the int sum of the row width (UBSan: signed overflow).
  try {
    parse("1\nProperties=species:S:1:pos:R:3:a:R:2147483647:b:R:2147483647\nCu 0 0 0\n", "wide.xyz");
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("columns"), std::string::npos) << e.what();
  }
}

TEST(Extxyz, IntegerColumnRefusesNonIntegers) {
  // An :I: column took any real ("0.1"), which the writer then wrote back as 0.
  for (const char* value : {"0.1", "1e3", "nan", "99999999999999999999"}) {
    const std::string text = std::string("1\nProperties=species:S:1:pos:R:3:tags:I:1\nCu 0 0 0 ") + value + "\n";
    try {
      parse(text, "int.xyz");
      ADD_FAILURE() << "no error for " << value;
    } catch (const FileError& e) {
      EXPECT_EQ(e.line(), 3) << e.what();
      EXPECT_NE(std::string(e.what()).find("not an integer"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse("1\nProperties=species:S:1:pos:R:3:tags:I:1\nCu 0 0 0 -7\n")[0].arrays[0].numbers[0], -7.0);
}

TEST(Extxyz, KeysAndValuesThatNeedQuotesRoundTrip) {
  // The writer wrote comment-line keys bare and quoted only values with space, tab, '"' or '=':
  // a quoted key with a space, or a value starting with '{' or holding a '\r', read back as
  // something else (or not at all).
  Frame f;
  f.species = {"Cu"};
  f.positions = {0, 0, 0};
  f.info = {{"a key", "1"}, {"braced", "{x}"}, {"cr", "a\rb"}, {"eq=", "v"}};
  std::ostringstream out;
  write_extxyz(out, f);
  const auto back = parse(out.str());
  ASSERT_EQ(back.size(), 1u) << out.str();
  EXPECT_EQ(back[0].info, f.info) << out.str();
}

}  // namespace
}  // namespace fastmlip::io

// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace fastmlip::io {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("fastmlip_atomic_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                       "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

TEST_F(AtomicFile, WritesAndReplaces) {
  const auto p = dir / "a.txt";
  write_file_atomically(p.string(), [](std::ostream& o) { o << "first"; });
  EXPECT_EQ(slurp(p), "first");
  write_file_atomically(p.string(), [](std::ostream& o) { o << "second"; });
  EXPECT_EQ(slurp(p), "second");
  // No temporary files left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST_F(AtomicFile, AFailedWriteKeepsThePreviousFile) {
  const auto p = dir / "keep.txt";
  write_file_atomically(p.string(), [](std::ostream& o) { o << "precious"; });
  EXPECT_THROW(write_file_atomically(p.string(),
                                     [](std::ostream& o) {
                                       o << "half a fi";
                                       throw std::runtime_error("simulated crash mid-write");
                                     }),
               FileError);
  EXPECT_EQ(slurp(p), "precious");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST_F(AtomicFile, DiskFullIsAnErrorNotATruncatedFile) {
  // A full disk shows up as a stream that goes bad mid-write (ENOSPC); simulate exactly that.
  const auto p = dir / "full.txt";
  write_file_atomically(p.string(), [](std::ostream& o) { o << "old"; });
  EXPECT_THROW(write_file_atomically(p.string(), [](std::ostream& o) { o.setstate(std::ios::badbit); }), FileError);
  EXPECT_EQ(slurp(p), "old");
}

TEST_F(AtomicFile, MissingDirectoryNamesThePath) {
  const auto p = dir / "no" / "such" / "dir.txt";
  try {
    write_file_atomically(p.string(), [](std::ostream& o) { o << "x"; });
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fastmlip::io

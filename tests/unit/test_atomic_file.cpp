// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

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

// remove_tree: remove_all's meaning (io/atomic_file.hpp says why the trainer needs its own).
TEST_F(AtomicFile, RemoveTreeRemovesADirectoryAndEverythingUnderItButNotWhatALinkPointsTo) {
  const auto keep = dir / "keep";
  fs::create_directories(keep);
  write_file_atomically((keep / "target.txt").string(), [](std::ostream& o) { o << "kept"; });
  const auto tree = dir / "tree";
  fs::create_directories(tree / "a" / "b" / "c");
  for (const auto& f : {tree / "top.txt", tree / "a" / "mid.txt", tree / "a" / "b" / "c" / "deep.txt"}) {
    write_file_atomically(f.string(), [](std::ostream& o) { o << "x"; });
  }
  fs::create_directory_symlink(keep, tree / "a" / "link_to_keep");
  std::error_code ec;
  remove_tree(tree.string(), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_EQ(slurp(keep / "target.txt"), "kept") << "the link was followed";
  // A single file, and a path that is not there (not an error, as for remove_all).
  remove_tree((keep / "target.txt").string());
  EXPECT_FALSE(fs::exists(keep / "target.txt"));
  remove_tree((dir / "never_there").string(), ec);
  EXPECT_FALSE(ec) << ec.message();
}

TEST_F(AtomicFile, RemoveTreeThatCannotRemoveNamesThePath) {
  // Under a regular file nothing can be (ENOTDIR), whoever runs the test.
  const auto file = dir / "plain.txt";
  write_file_atomically(file.string(), [](std::ostream& o) { o << "x"; });
  const auto under = (file / "inner").string();
  std::error_code ec;
  remove_tree(under, ec);
  EXPECT_TRUE(ec);
  try {
    remove_tree(under);
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(under), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(file), "x");
}

}  // namespace
}  // namespace fastmlip::io

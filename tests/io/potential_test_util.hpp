// SPDX-License-Identifier: MIT
#pragma once
/// \file Helpers shared by the potential-file tests: a per-test temporary directory, raw byte
/// I/O, and a valid potential to start from.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "io/potential_file.hpp"

namespace fastmlip::io::test_util {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// A fresh directory per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name) {
      if (c == '/') {
        c = '_';  // typed and parameterised tests have '/' in their names
      }
    }
    dir = fs::temp_directory_path() / ("fastmlip_potential_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  fs::path dir;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// 8-byte little-endian length, as the container starts.
inline std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) {
    s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  }
  return s;
}

/// A safetensors file from header text and buffer bytes, exactly as given.
inline std::string container(const std::string& header, const std::string& buffer) {
  return le64(header.size()) + header + buffer;
}

/// A safetensors file from a header object and buffer bytes, the header padded with spaces to
/// 8 bytes as fastmlip's writer pads it (so the bytes can equal a written file's).
inline std::string padded_container(const json& header, const std::string& buffer) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return container(text, buffer);
}

/// fastmlip metadata that passes validation.
inline json valid_metadata() {
  return json::parse(R"({
    "model": "mace",
    "species": [{"Z": 29, "symbol": "Cu"}, {"Z": 28, "symbol": "Ni"}],
    "cutoffs": {"r_max": 5.0},
    "units": "metal",
    "dtype": "float64",
    "hyperparameters": {"num_interactions": 2, "hidden_irreps": "8x0e+8x1o", "correlation": 3},
    "provenance": {"writer": "fastmlip tests"}
  })");
}

/// `__metadata__` of a valid fastmlip file around `fastmlip` metadata.
inline json metadata_block(const json& fastmlip = valid_metadata()) {
  return {{"format", "fastmlip-potential"}, {"format_version", "1"}, {"fastmlip", fastmlip.dump()}};
}

/// Message of the FileError `f` throws; fails the test if it throws anything else or nothing.
template <class F>
inline std::string file_error_of(F&& f) {
  try {
    f();
  } catch (const FileError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected FileError, got: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected FileError, nothing was thrown";
  return {};
}

}  // namespace fastmlip::io::test_util

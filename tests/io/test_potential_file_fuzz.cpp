// SPDX-License-Identifier: MIT
// Potential files: damaged versions of a valid file (every truncation, random byte flips in
// the header and anywhere, random digit changes in offsets and shapes) must each load or
// throw fastmlip::Error, never crash, read out of bounds or throw anything else. Run it in
// the sanitizer build (-DFASTMLIP_SANITIZE=address,undefined) to catch silent bad reads.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "core/error.hpp"
#include "io/potential_file.hpp"
#include "potential_test_util.hpp"

namespace fastmlip::io {
namespace {

using namespace test_util;

class PotentialFuzz : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    PotentialFile f;
    f.metadata = valid_metadata();
    f.add<double>("w", {3, 2}, {1, 2, 3, 4, 5, 6});
    f.add<float>("f", {2}, {0.5f, 1.5f});
    f.add<std::int64_t>("z", {2}, {29, 28});
    f.add<std::int32_t>("i", {1, 3}, {-1, 0, 1});
    f.add<std::uint8_t>("u", {5}, {1, 2, 3, 4, 5});
    f.add<double>("s", {}, {42.0});
    f.add<double>("e", {0, 4}, {});
    const std::string p = path("valid.safetensors");
    write_potential_file(p, f);
    valid = read_bytes(p);
    for (int i = 7; i >= 0; --i) {
      header_end = (header_end << 8) | static_cast<unsigned char>(valid[i]);
    }
    header_end += 8;
    ASSERT_LT(header_end, valid.size());
  }

  enum class Outcome { loaded, refused };

  /// Reads `bytes` from a file; a fastmlip::Error is a clean refusal, anything else fails.
  Outcome attempt(const std::string& bytes, const std::string& what) {
    const std::string p = path("mutant.safetensors");
    write_bytes(p, bytes);
    try {
      const PotentialFile f = read_potential_file(p);
      // Whatever loaded must be self-consistent: sizes agree and the metadata is valid.
      for (const auto& [name, t] : f.tensors()) {
        EXPECT_EQ(t.data.size(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype))
            << what << " " << name;
      }
      EXPECT_NO_THROW(f.validate_metadata()) << what;
      return Outcome::loaded;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(p, 0), 0u) << what << ": the message must name the file: " << msg;
      return Outcome::refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": threw a non-fastmlip exception: " << e.what();
    } catch (...) {
      ADD_FAILURE() << what << ": threw a non-exception";
    }
    return Outcome::refused;
  }

  std::string valid;
  std::uint64_t header_end = 0;  ///< 8 + header length: where the data buffer starts
};

TEST_F(PotentialFuzz, EveryTruncationIsRefused) {
  // The buffer must be covered exactly, so no proper prefix of a valid file may load.
  for (std::size_t n = 0; n < valid.size(); ++n) {
    EXPECT_EQ(attempt(valid.substr(0, n), "truncated to " + std::to_string(n)), Outcome::refused) << n;
  }
  EXPECT_EQ(attempt(valid, "complete"), Outcome::loaded);
  EXPECT_EQ(attempt(valid + "x", "one byte appended"), Outcome::refused);
}

TEST_F(PotentialFuzz, RandomHeaderByteFlips) {
  std::mt19937_64 rng(20240611);  // fixed: a failure must reproduce
  std::uniform_int_distribution<std::size_t> pos(0, header_end - 1);
  std::uniform_int_distribution<int> mask(1, 255);
  std::uniform_int_distribution<int> count(1, 4);
  int loaded = 0;
  for (int it = 0; it < 3000; ++it) {
    std::string m = valid;
    for (int k = count(rng); k > 0; --k) {
      m[pos(rng)] ^= static_cast<char>(mask(rng));
    }
    loaded += attempt(m, "header flip #" + std::to_string(it)) == Outcome::loaded;
  }
  // Most flips break the JSON; a few land in a string value and still load. Either is fine,
  // but all loading would mean the flips never reached anything checked.
  EXPECT_LT(loaded, 3000);
}

TEST_F(PotentialFuzz, RandomDigitChangesInTheHeader) {
  // Flipping a digit keeps the JSON valid, so these reach the shape/offset/version checks.
  std::vector<std::size_t> digits;
  for (std::size_t i = 8; i < header_end; ++i) {
    if (valid[i] >= '0' && valid[i] <= '9') {
      digits.push_back(i);
    }
  }
  ASSERT_FALSE(digits.empty());
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::size_t> pick(0, digits.size() - 1);
  std::uniform_int_distribution<int> digit(0, 9);
  std::uniform_int_distribution<int> count(1, 3);
  int refused = 0;
  for (int it = 0; it < 2000; ++it) {
    std::string m = valid;
    for (int k = count(rng); k > 0; --k) {
      m[digits[pick(rng)]] = static_cast<char>('0' + digit(rng));
    }
    refused += attempt(m, "digit change #" + std::to_string(it)) == Outcome::refused;
  }
  EXPECT_GT(refused, 0);
}

TEST_F(PotentialFuzz, RandomFlipsAnywhere) {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<std::size_t> pos(0, valid.size() - 1);
  std::uniform_int_distribution<int> mask(1, 255);
  for (int it = 0; it < 1000; ++it) {
    std::string m = valid;
    m[pos(rng)] ^= static_cast<char>(mask(rng));
    attempt(m, "flip #" + std::to_string(it));
  }
}

TEST_F(PotentialFuzz, HostileLengthsDoNotAllocate) {
  // Lengths near 2^64 or just past the file end must be refused before any allocation or read.
  for (const std::uint64_t n :
       {~std::uint64_t{0}, ~std::uint64_t{0} - 7, std::uint64_t{1} << 63,
        static_cast<std::uint64_t>(valid.size()), static_cast<std::uint64_t>(valid.size() - 7)}) {
    EXPECT_EQ(attempt(le64(n) + valid.substr(8), "length " + std::to_string(n)), Outcome::refused) << n;
  }
}

}  // namespace
}  // namespace fastmlip::io

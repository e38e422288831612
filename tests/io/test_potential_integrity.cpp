// SPDX-License-Identifier: MIT
// Potential files verify themselves (issue 17): the CRC-32 of every tensor is in the header
// and checked at load, so overwritten weight bytes are an error naming the tensor (they used
// to load and run with another energy); a NaN or infinite weight is refused at load and never
// written (a NaN weight used to run MD to the end with NaN forces); files written before the
// checksums still load, marked unverified.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/potential_file.hpp"
#include "potential_test_util.hpp"

namespace fastmlip::io {
namespace {

using namespace test_util;

/// A small potential of odd sizes in several dtypes.
PotentialFile small_potential() {
  PotentialFile f;
  f.metadata = valid_metadata();
  f.add<double>("interactions.0.weight", {3, 5}, {1, -2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0.125});
  f.add<float>("readout.weight", {7}, {0.5f, 1.5f, -2.f, 3.f, 1e-3f, 7.f, 9.f});
  f.add<std::int64_t>("atomic_numbers", {2}, {29, 28});
  f.add<double>("scale", {}, {2.5});
  return f;
}

/// The JSON header of the file bytes `bytes`, and where the data buffer starts.
json header_of(const std::string& bytes, std::size_t* buffer_start = nullptr) {
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (buffer_start != nullptr) {
    *buffer_start = 8 + n;
  }
  return json::parse(bytes.substr(8, n));
}

TEST(PotentialChecksum, IsZlibCrc32OfTheBytes) {
  // The check value of CRC-32/ISO-HDLC (zlib's crc32) is crc("123456789") = 0xCBF43926.
  const std::string digits = "123456789";
  std::vector<std::uint8_t> bytes(digits.begin(), digits.end());
  EXPECT_EQ(tensor_crc32(Tensor::from<std::uint8_t>("t", {9}, bytes)), 0xCBF43926u);
  EXPECT_EQ(tensor_crc32(Tensor::from<double>("empty", {0}, {})), 0u);
}

class PotentialIntegrity : public TempDirTest {};

TEST_F(PotentialIntegrity, WrittenFilesCarryEveryTensorsChecksumAndVerify) {
  const PotentialFile f = small_potential();
  write_potential_file(path("p.safetensors"), f);
  const json header = header_of(read_bytes(path("p.safetensors")));
  const json sums = json::parse(header["__metadata__"][kChecksumKey].get<std::string>());
  ASSERT_EQ(sums.size(), f.size());
  for (const auto& kv : f.tensors()) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(tensor_crc32(kv.second)));
    EXPECT_EQ(sums[kv.first], hex) << kv.first;
  }
  const PotentialFile back = read_potential_file(path("p.safetensors"));
  EXPECT_TRUE(back.checksummed);
  // Consumed by the reader and rewritten from the tensors on every write, never carried over.
  EXPECT_EQ(back.extra_metadata.count(kChecksumKey), 0u);
  EXPECT_FALSE(small_potential().checksummed);
}

TEST_F(PotentialIntegrity, EveryOverwrittenWeightByteIsFoundAndNamesItsTensor) {
  write_potential_file(path("p.safetensors"), small_potential());
  const std::string good = read_bytes(path("p.safetensors"));
  std::size_t start = 0;
  const json header = header_of(good, &start);
  const PotentialFile f = small_potential();
  for (const auto& kv : f.tensors()) {
    const auto& offsets = header[kv.first]["data_offsets"];
    for (std::size_t b = offsets[0].get<std::size_t>(); b < offsets[1].get<std::size_t>(); ++b) {
      std::string bad = good;
      bad[start + b] = static_cast<char>(bad[start + b] ^ 0x10);
      write_bytes(path("bad.safetensors"), bad);
      const std::string msg = file_error_of([&] { read_potential_file(path("bad.safetensors")); });
      EXPECT_NE(msg.find("tensor '" + kv.first + "' is damaged"), std::string::npos) << msg;
      EXPECT_NE(msg.find(path("bad.safetensors")), std::string::npos) << msg;
    }
  }
}

TEST_F(PotentialIntegrity, FourOverwrittenBytesOfAWeightAreRefused) {
  // The user's report: four bytes of weight data overwritten with a finite value, and the
  // file loaded and ran MD with another energy.
  write_potential_file(path("p.safetensors"), small_potential());
  std::string bytes = read_bytes(path("p.safetensors"));
  std::size_t start = 0;
  const json header = header_of(bytes, &start);
  const std::size_t at = start + header["interactions.0.weight"]["data_offsets"][0].get<std::size_t>() + 8;
  const float other = 1.25f;
  std::memcpy(&bytes[at], &other, 4);
  write_bytes(path("bad.safetensors"), bytes);
  const std::string msg = file_error_of([&] { read_potential_file(path("bad.safetensors")); });
  EXPECT_NE(msg.find("tensor 'interactions.0.weight' is damaged"), std::string::npos) << msg;
  EXPECT_NE(msg.find("get a fresh copy"), std::string::npos) << msg;
}

TEST_F(PotentialIntegrity, ADamagedChecksumTableIsRefused) {
  write_potential_file(path("p.safetensors"), small_potential());
  const std::string good = read_bytes(path("p.safetensors"));
  std::size_t start = 0;
  const json header = header_of(good, &start);
  const std::string buffer = good.substr(start);
  const json sums = json::parse(header["__metadata__"][kChecksumKey].get<std::string>());
  struct Case {
    std::string name, table, expect;
  };
  json missing = sums;
  missing.erase("scale");
  json extra = sums;
  extra["ghost"] = "00000000";
  json not_string = sums;
  not_string["scale"] = 12;
  const std::vector<Case> cases = {
      {"missing entry", missing.dump(), "tensor 'scale' has no checksum"},
      {"extra entry", extra.dump(), "lists a tensor 'ghost'"},
      {"not a string", not_string.dump(), "tensor 'scale' is damaged"},
      {"not an object", "[1, 2]", "is not a JSON object"},
      {"not JSON", "{\"scale\": ", "tensor_crc32"},
  };
  for (const auto& c : cases) {
    json h = header;
    h["__metadata__"][kChecksumKey] = c.table;
    write_bytes(path("bad.safetensors"), padded_container(h, buffer));
    const std::string msg = file_error_of([&] { read_potential_file(path("bad.safetensors")); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.name << ": " << msg;
  }
}

TEST_F(PotentialIntegrity, FilesWithoutChecksumsStillLoadMarkedUnverified) {
  write_potential_file(path("p.safetensors"), small_potential());
  const std::string good = read_bytes(path("p.safetensors"));
  std::size_t start = 0;
  json header = header_of(good, &start);
  header["__metadata__"].erase(kChecksumKey);
  write_bytes(path("old.safetensors"), padded_container(header, good.substr(start)));
  const PotentialFile old = read_potential_file(path("old.safetensors"));
  EXPECT_FALSE(old.checksummed);
  EXPECT_EQ(old.values<double>("interactions.0.weight", {3, 5}),
            small_potential().values<double>("interactions.0.weight", {3, 5}));
  // Written again, it has them.
  write_potential_file(path("sealed.safetensors"), old);
  EXPECT_TRUE(read_potential_file(path("sealed.safetensors")).checksummed);
  EXPECT_EQ(read_bytes(path("sealed.safetensors")), good);
}

TEST_F(PotentialIntegrity, ExtraMetadataCannotSetTheChecksums) {
  PotentialFile f = small_potential();
  f.extra_metadata[kChecksumKey] = "{}";
  EXPECT_THROW(write_potential_file(path("p.safetensors"), f), InputError);
  EXPECT_FALSE(fs::exists(path("p.safetensors")));
}

/// A file holding one tensor `name` of `dtype` with raw element bytes `raw`, with or
/// without its checksum: a NaN must be refused either way.
std::string file_with(const std::string& name, DType dtype, const std::string& raw, bool with_checksum) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {static_cast<std::int64_t>(raw.size() / dtype_size(dtype))};
  t.data.resize(raw.size());
  std::memcpy(t.data.data(), raw.data(), raw.size());
  json meta = metadata_block();
  if (with_checksum) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(tensor_crc32(t)));
    meta[kChecksumKey] = json{{name, hex}}.dump();
  }
  json h = {{"__metadata__", meta},
            {name, {{"dtype", dtype_name(dtype)}, {"shape", t.shape}, {"data_offsets", {0, raw.size()}}}}};
  return padded_container(h, raw);
}

template <class T>
std::string raw_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class T>
class PotentialNonFinite : public TempDirTest {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(PotentialNonFinite, FloatTypes);

TYPED_TEST(PotentialNonFinite, IsRefusedAtLoadNamingTensorAndElement) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (bool with_checksum : {true, false}) {
    for (std::size_t n : {1, 13}) {
      for (const T bad : {nan, inf, -inf}) {
        std::vector<T> v(n, T(0.5));
        v[n - 1] = bad;
        write_bytes(this->path("bad.safetensors"), file_with("w", DTypeOf<T>::value, raw_of(v), with_checksum));
        const std::string msg = file_error_of([&] { read_potential_file(this->path("bad.safetensors")); });
        EXPECT_NE(msg.find("tensor 'w' holds " + std::string(std::isnan(bad) ? "nan" : bad > 0 ? "+inf" : "-inf") +
                           " at element " + std::to_string(n - 1)),
                  std::string::npos)
            << msg;
        EXPECT_NE(msg.find("NaN or infinite weight"), std::string::npos) << msg;
      }
    }
  }
}

TYPED_TEST(PotentialNonFinite, IsNeverWritten) {
  using T = TypeParam;
  PotentialFile f = small_potential();
  f.add<T>("bad", {2, 3}, {0, 1, 2, 3, std::numeric_limits<T>::quiet_NaN(), 5});
  try {
    write_potential_file(this->path("p.safetensors"), f);
    ADD_FAILURE() << "a NaN weight was written";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'bad' holds nan at element 4 (index [1, 1])"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(this->path("p.safetensors")));
}

TEST(PotentialNonFiniteBits, HalfAndEightBitFormatsAreChecked) {
  auto tensor = [](DType dtype, std::vector<std::uint8_t> bytes) {
    Tensor t;
    t.name = "t";
    t.dtype = dtype;
    t.shape = {static_cast<std::int64_t>(bytes.size() / dtype_size(dtype))};
    t.data.resize(bytes.size());
    std::memcpy(t.data.data(), bytes.data(), bytes.size());
    return t;
  };
  // Little-endian 16-bit patterns: F16 1.0 = 0x3C00, inf = 0x7C00; BF16 1.0 = 0x3F80, NaN = 0x7FC0.
  EXPECT_EQ(non_finite_element(tensor(DType::F16, {0x00, 0x3C, 0x00, 0xFC})), "holds a NaN or infinity at element 1 (index [1])");
  EXPECT_EQ(non_finite_element(tensor(DType::F16, {0x00, 0x3C, 0xFF, 0x7B})), "");  // 65504, the largest
  EXPECT_NE(non_finite_element(tensor(DType::BF16, {0x80, 0x3F, 0xC0, 0x7F})), "");
  EXPECT_EQ(non_finite_element(tensor(DType::BF16, {0x80, 0x3F, 0x7F, 0x7F})), "");
  EXPECT_NE(non_finite_element(tensor(DType::F8_E5M2, {0x3C, 0x7C})), "");
  EXPECT_EQ(non_finite_element(tensor(DType::F8_E5M2, {0x3C, 0x7B})), "");
  EXPECT_NE(non_finite_element(tensor(DType::F8_E4M3, {0x38, 0xFF})), "");
  EXPECT_EQ(non_finite_element(tensor(DType::F8_E4M3, {0x38, 0x7E})), "");  // 448, no infinity in E4M3
  EXPECT_EQ(non_finite_element(tensor(DType::I32, {0xFF, 0xFF, 0xFF, 0x7F})), "");
}

}  // namespace
}  // namespace fastmlip::io

// SPDX-License-Identifier: MIT
// Potential files: every check of the reader, one malformed file each. Each must be a
// FileError that names the path and says what is wrong (docs/potential-format.md, "Validation").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/potential_file.hpp"
#include "potential_test_util.hpp"

namespace fastmlip::io {
namespace {

using namespace test_util;

/// The 16-byte buffer of two doubles 1.0 and 2.0.
std::string two_doubles() {
  const double v[2] = {1.0, 2.0};
  return std::string(reinterpret_cast<const char*>(v), sizeof(v));
}

/// A valid header with one tensor "w" (F64 [2] at [0, 16]).
json valid_header() {
  json h;
  h["__metadata__"] = metadata_block();
  h["w"] = {{"dtype", "F64"}, {"shape", {2}}, {"data_offsets", {0, 16}}};
  return h;
}

class PotentialValidation : public TempDirTest {
 protected:
  /// Writes `bytes`, reads them back, and returns the FileError message (failing the test if
  /// anything else happens). The message must start with the path.
  std::string error_for(const std::string& bytes) {
    const std::string p = path("case.safetensors");
    write_bytes(p, bytes);
    try {
      read_potential_file(p);
    } catch (const FileError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(p + ": ", 0), 0u)
          << "message must start with the path: " << e.what();
      EXPECT_EQ(e.path(), p);
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected FileError, got: " << e.what();
      return {};
    }
    ADD_FAILURE() << "expected FileError, the file loaded";
    return {};
  }
  std::string error_for(const json& header, const std::string& buffer) {
    return error_for(container(header.dump(), buffer));
  }
  /// Error for the valid header with __metadata__.fastmlip replaced by `fastmlip`.
  std::string error_for_metadata(const json& fastmlip) {
    json h = valid_header();
    h["__metadata__"] = metadata_block(fastmlip);
    return error_for(h, two_doubles());
  }
};

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST_F(PotentialValidation, TheBaselineFileLoads) {
  // Every case below breaks one thing of this file, so it must itself be valid.
  const std::string p = path("ok.safetensors");
  write_bytes(p, container(valid_header().dump(), two_doubles()));
  const PotentialFile f = read_potential_file(p);
  EXPECT_EQ(f.values<double>("w", {2}), (std::vector<double>{1.0, 2.0}));
  // Trailing spaces in the header are allowed by the spec (writers pad to alignment).
  write_bytes(p, container(valid_header().dump() + "     ", two_doubles()));
  EXPECT_NO_THROW(read_potential_file(p));
}

TEST_F(PotentialValidation, FileLevel) {
  const std::string missing = path("missing.safetensors");
  try {
    read_potential_file(missing);
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": no such potential file (check the path)");
  }
  try {
    read_potential_file(dir.string());
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_CONTAINS(e.what(), "is a directory");
  }
  EXPECT_CONTAINS(error_for(std::string()), "only 0 bytes");
  EXPECT_CONTAINS(error_for(std::string("\x10\0\0\0\0\0\0", 7)), "only 7 bytes");
}

TEST_F(PotentialValidation, HeaderLength) {
  EXPECT_CONTAINS(error_for(le64(100'000'001) + "{}"), "exceeds the limit of 100000000");
  EXPECT_CONTAINS(error_for(le64(~std::uint64_t{0}) + "{}"), "exceeds the limit");
  const std::string header = valid_header().dump();
  EXPECT_CONTAINS(error_for(le64(header.size() + 17) + header + two_doubles()), "truncated or corrupt");
  EXPECT_CONTAINS(error_for(le64(0) + "{}"), "does not start with '{'");
}

TEST_F(PotentialValidation, HeaderJson) {
  const std::string buf = two_doubles();
  EXPECT_CONTAINS(error_for(container(" " + valid_header().dump(), buf)), "does not start with '{'");
  EXPECT_CONTAINS(error_for(container("[1, 2]", "")), "does not start with '{'");
  EXPECT_CONTAINS(error_for(container("{\"a\": }", "")), "not valid JSON");
  EXPECT_CONTAINS(error_for(container("{} {}", "")), "not valid JSON");
  EXPECT_CONTAINS(error_for(container("{/* c */}", "")), "not valid JSON");
  EXPECT_CONTAINS(error_for(container("{\"\xff\": 1}", "")), "not valid JSON");  // not UTF-8
  EXPECT_CONTAINS(error_for(container(std::string("{\"a\0\": 1}", 8), "")), "not valid JSON");
}

TEST_F(PotentialValidation, DuplicateKeysAnywhere) {
  // nlohmann::json would keep the last of two equal keys; the spec forbids them.
  std::string h = valid_header().dump();
  h.insert(1, R"("w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}, )");
  auto msg = error_for(container(h, two_doubles()));
  EXPECT_CONTAINS(msg, "repeats the key 'w'");
  h = valid_header().dump();
  const auto at = h.find("\"format\"");
  h.insert(at, R"("format": "other", )");
  EXPECT_CONTAINS(error_for(container(h, two_doubles())), "repeats the key 'format'");
  json meta = metadata_block();
  std::string fast = valid_metadata().dump();
  fast.insert(1, R"("units": "real", )");
  meta["fastmlip"] = fast;
  json hdr = valid_header();
  hdr["__metadata__"] = meta;
  EXPECT_CONTAINS(error_for(hdr, two_doubles()), "repeats the key 'units'");
}

TEST_F(PotentialValidation, NestingIsBounded) {
  json h = valid_header();
  std::string deep = std::string(200, '[') + std::string(200, ']');
  std::string text = h.dump();
  text.insert(1, "\"deep\": " + deep + ", ");
  EXPECT_CONTAINS(error_for(container(text, two_doubles())), "deeper than 64");
}

TEST_F(PotentialValidation, Metadata) {
  const std::string buf = two_doubles();
  json h = valid_header();
  h.erase("__metadata__");
  EXPECT_CONTAINS(error_for(h, buf), "no __metadata__");
  h = valid_header();
  h["__metadata__"] = "fastmlip";
  EXPECT_CONTAINS(error_for(h, buf), "__metadata__ must be an object");
  h = valid_header();
  h["__metadata__"]["extra"] = 3;
  EXPECT_CONTAINS(error_for(h, buf), "only strings");
  h = valid_header();
  h["__metadata__"]["format"] = "pt";
  EXPECT_CONTAINS(error_for(h, buf), "__metadata__.format is 'pt', expected 'fastmlip-potential'");
  h = valid_header();
  h["__metadata__"].erase("format");
  EXPECT_CONTAINS(error_for(h, buf), "__metadata__.format is missing");
  h = valid_header();
  h["__metadata__"].erase("format_version");
  EXPECT_CONTAINS(error_for(h, buf), "no format_version");
  for (const char* v : {"", "0", "01", "1.0", "+1", "-1", "one", " 1"}) {
    h = valid_header();
    h["__metadata__"]["format_version"] = v;
    EXPECT_CONTAINS(error_for(h, buf), "is not a positive integer") << v;
  }
  h = valid_header();
  h["__metadata__"].erase("fastmlip");
  EXPECT_CONTAINS(error_for(h, buf), "no 'fastmlip' entry");
}

TEST_F(PotentialValidation, NewerFormatVersionSaysUpdate) {
  json h = valid_header();
  h["__metadata__"]["format_version"] = "2";
  const std::string p = path("case.safetensors");
  EXPECT_EQ(
      error_for(h, two_doubles()),
      p + ": was written by a newer fastmlip (format version 2; this build reads up to 1): update fastmlip");
  // Checked before anything else in the file, whose layout a newer version may change.
  h["__metadata__"]["fastmlip"] = "not json";
  h["w"]["dtype"] = "F4";
  EXPECT_CONTAINS(error_for(h, two_doubles()), "update fastmlip");
  h["__metadata__"]["format_version"] = "123456789012345678901234567890";
  EXPECT_CONTAINS(error_for(h, two_doubles()), "format version 123456789012345678901234567890; this build");
}

TEST_F(PotentialValidation, FastmlipMetadata) {
  json h = valid_header();
  h["__metadata__"]["fastmlip"] = "{\"model\": ";
  EXPECT_CONTAINS(error_for(h, two_doubles()), "__metadata__.fastmlip is not valid JSON");
  h["__metadata__"]["fastmlip"] = "[1]";
  EXPECT_CONTAINS(error_for(h, two_doubles()), "must be a JSON object");

  struct Case {
    const char* pointer;  // what to change
    json value;           // to this (null: remove it)
    const char* expect;   // in the message
  };
  const std::vector<Case> cases = {
      {"/model", nullptr, "no 'model'"},
      {"/model", "allegro", "'model' is 'allegro', a model kind this build does not know"},
      {"/species", nullptr, "no 'species'"},
      {"/species", json::array(), "no 'species'"},
      {"/species/0/Z", 0, "'species/0' has Z = 0, not an element"},
      {"/species/0/Z", 119, "not an element"},
      {"/species/0/Z", 29.0, "must be {\"Z\": int"},
      {"/species/1/symbol", "Cu", "'species/1' has Z = 28 but symbol 'Cu' (Z 28 is Ni)"},
      {"/species/1", json{{"Z", 29}, {"symbol", "Cu"}}, "'species/1' repeats Cu"},
      {"/cutoffs", nullptr, "no 'cutoffs'"},
      {"/cutoffs", json::object(), "no 'cutoffs'"},
      {"/cutoffs/r_max", -5.0, "'cutoffs/r_max' must be a positive number"},
      {"/cutoffs/r_max", "5", "'cutoffs/r_max' must be a positive number"},
      {"/units", "real", "'units' is 'real'; fastmlip potentials are in LAMMPS metal units"},
      {"/units", nullptr, "no 'units'"},
      {"/dtype", "float16", "'dtype' is 'float16'"},
      {"/hyperparameters", json::array(), "no 'hyperparameters'"},
      {"/provenance", nullptr, "no 'provenance'"},
      {"/provenance/writer", "", "'provenance/writer' must name"},
      {"/provenance/source_sha256", "abc", "'provenance/source_sha256' must be a SHA-256 digest"},
      {"/provenance/training_data_sha256", std::string(64, 'A'), "'provenance/training_data_sha256' must be"},
  };
  for (const Case& c : cases) {
    json m = valid_metadata();
    const json::json_pointer ptr(c.pointer);
    if (c.value.is_null()) {
      m[ptr.parent_pointer()].erase(ptr.back());
    } else {
      m[ptr] = c.value;
    }
    EXPECT_CONTAINS(error_for_metadata(m), c.expect) << c.pointer << " = " << c.value.dump();
  }
  // JSON text cannot spell NaN or inf, and a number beyond double's range (1e999) is refused
  // by the parser rather than read as inf.
  json m = valid_metadata();
  std::string text = m.dump();
  text.insert(text.find("\"num_interactions\""), "\"scale\": 1e999, ");
  h = valid_header();
  h["__metadata__"]["fastmlip"] = text;
  EXPECT_CONTAINS(error_for(h, two_doubles()), "__metadata__.fastmlip is not valid JSON (number overflow");
}

TEST_F(PotentialValidation, TensorEntries) {
  const std::string buf = two_doubles();
  struct Case {
    json entry;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {json::array(), "tensor 'w' in the header: must be an object"},
      {{{"shape", {2}}, {"data_offsets", {0, 16}}}, "has no dtype string"},
      {{{"dtype", 8}, {"shape", {2}}, {"data_offsets", {0, 16}}}, "has no dtype string"},
      {{{"dtype", "F4"}, {"shape", {2}}, {"data_offsets", {0, 16}}}, "dtype 'F4' is not one fastmlip reads"},
      {{{"dtype", "float64"}, {"shape", {2}}, {"data_offsets", {0, 16}}}, "known: BOOL, U8"},
      {{{"dtype", "F64"}, {"data_offsets", {0, 16}}}, "has no shape array"},
      {{{"dtype", "F64"}, {"shape", 2}, {"data_offsets", {0, 16}}}, "has no shape array"},
      {{{"dtype", "F64"}, {"shape", {-2}}, {"data_offsets", {0, 16}}}, "must hold non-negative integers"},
      {{{"dtype", "F64"}, {"shape", {2.0}}, {"data_offsets", {0, 16}}}, "must hold non-negative integers"},
      {{{"dtype", "F64"}, {"shape", {"2"}}, {"data_offsets", {0, 16}}}, "must hold non-negative integers"},
      {{{"dtype", "F64"}, {"shape", {2}}}, "data_offsets must be [begin, end]"},
      {{{"dtype", "F64"}, {"shape", {2}}, {"data_offsets", {0}}}, "data_offsets must be [begin, end]"},
      {{{"dtype", "F64"}, {"shape", {2}}, {"data_offsets", {0, 16, 16}}},
       "data_offsets must be [begin, end]"},
      {{{"dtype", "F64"}, {"shape", {2}}, {"data_offsets", {-8, 16}}}, "data_offsets must be [begin, end]"},
      {{{"dtype", "F64"}, {"shape", {2}}, {"data_offsets", {0, 24}}}, "outside the data buffer of 16 bytes"},
      {{{"dtype", "F64"}, {"shape", {2}}, {"data_offsets", {16, 0}}}, "outside the data buffer"},
      {{{"dtype", "F64"}, {"shape", {3}}, {"data_offsets", {0, 16}}},
       "needs 24 bytes but data_offsets span 16"},
      {{{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 16}}},
       "needs 8 bytes but data_offsets span 16"},
      // An element count that overflows 64 bits must not wrap around to a plausible size.
      {{{"dtype", "F64"},
        {"shape", {4611686018427387904ULL, 4611686018427387904ULL}},
        {"data_offsets", {0, 16}}},
       "needs more bytes"},
      {{{"dtype", "U8"}, {"shape", {18446744073709551615ULL}}, {"data_offsets", {0, 16}}},
       "must hold non-negative integers"},
      {{{"dtype", "F64"}, {"shape", {2}}, {"data_offsets", {0, 16}}, {"offsets", {0, 16}}},
       "unexpected key 'offsets'"},
  };
  for (const Case& c : cases) {
    json h = valid_header();
    h["w"] = c.entry;
    EXPECT_CONTAINS(error_for(h, buf), c.expect) << c.entry.dump();
  }
  json h = valid_header();
  h[""] = h["w"];
  h.erase("w");
  EXPECT_CONTAINS(error_for(h, buf), "a tensor with an empty name");
}

TEST_F(PotentialValidation, TensorsMustTileTheBuffer) {
  const double v[3] = {1, 2, 3};
  const std::string buf24(reinterpret_cast<const char*>(v), sizeof(v));
  json h = valid_header();
  // Overlap: b reuses bytes of w.
  h["b"] = {{"dtype", "F64"}, {"shape", {1}}, {"data_offsets", {8, 16}}};
  EXPECT_CONTAINS(error_for(h, two_doubles()), "(overlap)");
  // Gap: nothing owns bytes 16..24 (a polyglot file could hide something there).
  h["b"] = {{"dtype", "F64"}, {"shape", {1}}, {"data_offsets", {24, 32}}};
  EXPECT_CONTAINS(error_for(h, buf24 + std::string(8, '\0')), "(a gap)");
  // Trailing bytes after the last tensor.
  h = valid_header();
  EXPECT_CONTAINS(error_for(h, buf24), "the tensors cover 16 of the 24 data bytes");
  // Nothing may start after 0 either when it is the only tensor.
  h["w"]["data_offsets"] = {8, 24};
  EXPECT_CONTAINS(error_for(h, buf24), "(a gap)");
  // Two empty tensors at the same offset own no bytes and are fine, as in safetensors.
  h = valid_header();
  h["e1"] = {{"dtype", "F64"}, {"shape", {0}}, {"data_offsets", {16, 16}}};
  h["e2"] = {{"dtype", "I32"}, {"shape", {4, 0}}, {"data_offsets", {16, 16}}};
  const std::string p = path("empty_ok.safetensors");
  write_bytes(p, container(h.dump(), two_doubles()));
  const PotentialFile f = read_potential_file(p);
  EXPECT_EQ(f.get("e2").shape, (std::vector<std::int64_t>{4, 0}));
}

}  // namespace
}  // namespace fastmlip::io

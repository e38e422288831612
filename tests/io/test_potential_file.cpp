// SPDX-License-Identifier: MIT
// Potential files: the in-memory API, write/read round trips, the on-disk layout, and interop
// with the PyPI safetensors package through committed fixtures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/potential_file.hpp"
#include "potential_test_util.hpp"

namespace fastmlip::io {
namespace {

using namespace test_util;


#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

PotentialFile small_potential() {
  PotentialFile f;
  f.metadata = valid_metadata();
  f.add<double>("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  f.add<float>("w32", {3}, {0.5f, -1.25f, 3.0f});
  f.add<std::int32_t>("idx", {2}, {7, -9});
  f.add<std::uint8_t>("flags", {4}, {0, 1, 200, 255});
  return f;
}

/// The potential held by both interop fixtures; tests/reference/make_safetensors_fixture.py
/// has the same values (EXPECTED_TENSORS, EXPECTED_FASTMLIP, EXPECTED_METADATA).
PotentialFile make_interop_potential() {
  PotentialFile f;
  f.metadata = json::parse(R"({
    "model": "mace",
    "species": [{"Z": 29, "symbol": "Cu"}, {"Z": 28, "symbol": "Ni"}],
    "cutoffs": {"r_max": 5.0},
    "units": "metal",
    "dtype": "float64",
    "hyperparameters": {"num_interactions": 2, "hidden_irreps": "8x0e+8x1o", "correlation": 3},
    "provenance": {
      "writer": "fastmlip interop fixture",
      "source_sha256": "0000000000000000000000000000000000000000000000000000000000000001",
      "training_data_sha256": "abababababababababababababababababababababababababababababababab"
    }
  })");
  f.extra_metadata["comment"] = "interop fixture: see tests/reference/make_safetensors_fixture.py";
  f.add<double>("weights.f64", {2, 3}, {1.0, -2.5, 1.0 / 3.0, 1e-300, -1e300, -0.0});
  // numpy rounds the Python (double) literals to float32; static_cast does the same.
  f.add<float>("weights.f32", {4}, {static_cast<float>(0.1), -3.25f, 65504.0f, static_cast<float>(1e-40)});
  f.add<std::int64_t>("species.i64", {4}, {29, 28, -1, (std::int64_t{1} << 62) + 1});
  f.add<std::int32_t>("index.i32", {3, 2}, {-2, -1, 0, 1, 2, 3});
  f.add<std::uint8_t>("mask.u8", {3}, {0, 1, 255});
  f.add<double>("scale", {}, {2.5});
  f.add<double>("empty", {0, 3}, {});
  return f;
}

/// Same names, dtypes, shapes and bytes (bitwise, so -0.0 and subnormals count).
void expect_same_tensors(const PotentialFile& a, const PotentialFile& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a.tensors()) {
    ASSERT_TRUE(b.contains(name)) << name;
    const Tensor& u = b.get(name);
    EXPECT_EQ(u.name, name);
    EXPECT_EQ(u.dtype, t.dtype) << name;
    EXPECT_EQ(u.shape, t.shape) << name;
    EXPECT_TRUE(u.data == t.data) << name;
  }
}

// ----------------------------------------------------------------------------------------
// dtypes and tensors

TEST(PotentialDType, NamesAndSizesFollowSafetensors) {
  EXPECT_STREQ(dtype_name(DType::F64), "F64");
  EXPECT_STREQ(dtype_name(DType::BF16), "BF16");
  EXPECT_STREQ(dtype_name(DType::F8_E4M3), "F8_E4M3");
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::BOOL), 1u);
  for (const DType d :
       {DType::BOOL, DType::U8, DType::I8, DType::F8_E4M3, DType::F8_E5M2, DType::U16, DType::I16, DType::F16,
        DType::BF16, DType::U32, DType::I32, DType::F32, DType::U64, DType::I64, DType::F64}) {
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
  EXPECT_THROW(parse_dtype("f64"), InputError);  // case matters, as in safetensors
  EXPECT_THROW(parse_dtype("F4"), InputError);   // sub-byte types are not readable here
}

TEST(PotentialDType, WideningIsExactlyTheLosslessConversions) {
  EXPECT_TRUE(widens_to(DType::F32, DType::F64));
  EXPECT_FALSE(widens_to(DType::F64, DType::F32));
  EXPECT_TRUE(widens_to(DType::I32, DType::I64));
  EXPECT_TRUE(widens_to(DType::U32, DType::I64));
  EXPECT_FALSE(widens_to(DType::U64, DType::I64));  // 2^63 does not fit
  EXPECT_FALSE(widens_to(DType::I8, DType::U64));   // negatives do not fit
  EXPECT_TRUE(widens_to(DType::U8, DType::I16));
  EXPECT_FALSE(widens_to(DType::U16, DType::I16));
  EXPECT_FALSE(widens_to(DType::I32, DType::F64));  // never integer <-> floating
  EXPECT_FALSE(widens_to(DType::F16, DType::F64));  // no F16 accessor
}

TEST(PotentialTensor, TypedAccessChecksTheDtype) {
  const Tensor t32 = Tensor::from<float>("a", {2}, {0.1f, -2.0f});
  EXPECT_THROW(t32.as<double>(), InputError);  // exact by default
  const auto d = t32.as<double>(Conversion::widen);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], static_cast<double>(0.1f));
  EXPECT_EQ(d[1], -2.0);
  EXPECT_THROW(Tensor::from<double>("b", {1}, {1.0}).as<float>(Conversion::widen), InputError);

  const Tensor u8 = Tensor::from<std::uint8_t>("u", {3}, {0, 200, 255});
  EXPECT_EQ(u8.as<std::int64_t>(Conversion::widen), (std::vector<std::int64_t>{0, 200, 255}));
  const Tensor i16 = Tensor::from<std::int16_t>("i", {2}, {-32768, 32767});
  EXPECT_EQ(i16.as<std::int32_t>(Conversion::widen), (std::vector<std::int32_t>{-32768, 32767}));
  EXPECT_THROW(i16.as<std::uint32_t>(Conversion::widen), InputError);
  const Tensor u64 = Tensor::from<std::uint64_t>("big", {1}, {std::numeric_limits<std::uint64_t>::max()});
  EXPECT_THROW(u64.as<std::int64_t>(Conversion::widen), InputError);
  EXPECT_THROW(Tensor::from<std::int64_t>("n", {1}, {3}).as<double>(Conversion::widen), InputError);

  try {
    t32.as<std::int32_t>();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "tensor 'a'");
    EXPECT_CONTAINS(e.what(), "F32");
    EXPECT_CONTAINS(e.what(), "I32");
  }
}

TEST(PotentialTensor, FromChecksShapeAgainstValues) {
  EXPECT_THROW(Tensor::from<double>("x", {2, 3}, {1, 2, 3, 4, 5}), InputError);
  EXPECT_THROW(Tensor::from<double>("x", {-1}, {}), InputError);
  const Tensor scalar = Tensor::from<double>("s", {}, {4.0});
  EXPECT_EQ(scalar.numel(), 1);
  const Tensor empty = Tensor::from<double>("e", {5, 0, 7}, {});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.data.empty());
  Tensor broken = scalar;
  broken.data.pop_back();  // a hand-built tensor whose bytes disagree with its shape
  EXPECT_THROW(broken.as<double>(), InputError);
}

// ----------------------------------------------------------------------------------------
// PotentialFile in memory

TEST(PotentialFileApi, AddRefusesBadNamesAndDuplicates) {
  PotentialFile f;
  f.add<double>("w", {1}, {1.0});
  EXPECT_THROW(f.add<double>("w", {1}, {2.0}), InputError);
  EXPECT_THROW(f.add<double>("", {1}, {2.0}), InputError);
  EXPECT_THROW(f.add<double>("__metadata__", {1}, {2.0}), InputError);
  Tensor bad;
  bad.name = "bad";
  bad.dtype = DType::F32;
  bad.shape = {3};
  bad.data.resize(8);
  EXPECT_THROW(f.add(bad), InputError);
  bad.data.resize(12);
  EXPECT_NO_THROW(f.add(bad));
  EXPECT_EQ(f.size(), 2u);
}

TEST(PotentialFileApi, MissingTensorNamesFileAndTensor) {
  PotentialFile f = small_potential();
  auto msg = file_error_of([&] { f.get("interactions.0.weight"); });
  EXPECT_CONTAINS(msg, "<potential in memory>");
  EXPECT_CONTAINS(msg, "no tensor 'interactions.0.weight'");
  EXPECT_CONTAINS(msg, "idx");  // lists what there is
  f.source = "/some/dir/cuni.safetensors";
  msg = file_error_of([&] { f.get("nope"); });
  EXPECT_EQ(msg.rfind("/some/dir/cuni.safetensors: ", 0), 0u) << msg;
}

TEST(PotentialFileApi, ShapeAndDtypeChecksNameWhatWasExpected) {
  PotentialFile f = small_potential();
  f.source = "pot.safetensors";
  EXPECT_EQ(f.values<double>("w", {2, 3}), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(f.values<double>("w", {kAnyExtent, 3}).size(), 6u);
  EXPECT_NO_THROW(f.get("w", {DType::F32, DType::F64}, {2, kAnyExtent}));

  auto msg = file_error_of([&] { f.values<double>("w", {3, 2}); });
  EXPECT_CONTAINS(msg, "pot.safetensors");
  EXPECT_CONTAINS(msg, "tensor 'w'");
  EXPECT_CONTAINS(msg, "[2, 3]");
  EXPECT_CONTAINS(msg, "[3, 2]");
  msg = file_error_of([&] { f.values<double>("w", {2, 3, 1}); });
  EXPECT_CONTAINS(msg, "[2, 3, 1]");
  msg = file_error_of([&] { f.values<double>("w32", {3}); });  // F32 without widening
  EXPECT_CONTAINS(msg, "dtype F32");
  EXPECT_CONTAINS(msg, "(dtype F64, shape [3])");
  EXPECT_EQ(f.values<double>("w32", {3}, Conversion::widen), (std::vector<double>{0.5, -1.25, 3.0}));
  msg = file_error_of([&] { f.get("idx", {DType::I64}, {kAnyExtent}); });
  EXPECT_CONTAINS(msg, "dtype I64, shape [*]");
  msg = file_error_of([&] { check_tensor(f.get("flags"), {DType::U8}, {5}, "x.safetensors"); });
  EXPECT_EQ(msg.rfind("x.safetensors: ", 0), 0u) << msg;
}

TEST(PotentialFileApi, MetadataAccessors) {
  PotentialFile f = small_potential();
  f.metadata["cutoffs"] = {{"atom_graph", 5.0}, {"bond_graph", 3.0}};
  f.metadata["model"] = "chgnet";
  f.metadata["dtype"] = "float32";
  EXPECT_EQ(f.model_kind(), "chgnet");
  EXPECT_DOUBLE_EQ(f.cutoff(), 5.0);
  EXPECT_EQ(f.compute_dtype(), DType::F32);
  const auto sp = f.species();
  ASSERT_EQ(sp.size(), 2u);
  EXPECT_EQ(sp[0].z, 29);
  EXPECT_EQ(sp[1].symbol, "Ni");

  EXPECT_EQ(f.meta<int>("/hyperparameters/num_interactions"), 2);
  EXPECT_EQ(f.meta<double>("/hyperparameters/num_interactions"), 2.0);  // int -> double is exact
  EXPECT_EQ(f.meta<std::string>("/hyperparameters/hidden_irreps"), "8x0e+8x1o");
  EXPECT_EQ(f.meta<int>("/species/1/Z"), 28);
  EXPECT_TRUE(f.has_meta("/provenance/writer"));
  EXPECT_FALSE(f.has_meta("/provenance/nope"));
  EXPECT_FALSE(f.has_meta("/species/7/Z"));

  f.metadata["hyperparameters"]["scale"] = 1.5;
  f.metadata["hyperparameters"]["huge"] = 1e300;
  f.metadata["hyperparameters"]["negative"] = -3;
  EXPECT_CONTAINS(file_error_of([&] { f.meta<int>("/hyperparameters/scale"); }), "wrong type or range");
  EXPECT_CONTAINS(file_error_of([&] { f.meta<int>("/hyperparameters/hidden_irreps"); }), "hidden_irreps");
  EXPECT_CONTAINS(file_error_of([&] { f.meta<float>("/hyperparameters/huge"); }), "huge");
  EXPECT_CONTAINS(file_error_of([&] { f.meta<unsigned>("/hyperparameters/negative"); }), "negative");
  EXPECT_CONTAINS(file_error_of([&] { f.meta<int>("/hyperparameters/num_layers"); }),
                  "no '/hyperparameters/num_layers'");
  EXPECT_THROW(f.meta<int>("hyperparameters"), InputError);  // not a JSON pointer: caller's bug

  f.metadata["units"] = "real";
  EXPECT_CONTAINS(file_error_of([&] { f.cutoff(); }), "metal");
}

// ----------------------------------------------------------------------------------------
// Round trips

template <class T>
class PotentialRoundTrip : public TempDirTest {};
using RoundTripTypes = ::testing::Types<double, float, std::int64_t, std::int32_t, std::uint8_t>;
TYPED_TEST_SUITE(PotentialRoundTrip, RoundTripTypes);

TYPED_TEST(PotentialRoundTrip, EverySizeSurvivesExactly) {
  using T = TypeParam;
  PotentialFile f;
  f.metadata = valid_metadata();
  for (const std::int64_t n : {0, 1, 13, 1024}) {
    std::vector<T> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        v[i] = static_cast<T>(std::sin(0.7 * static_cast<double>(i)) *
                              std::pow(10.0, static_cast<double>(i % 9) - 4));
      } else {
        v[i] = static_cast<T>(i * 2654435761u);  // spreads over the whole range
      }
    }
    f.add<T>("t" + std::to_string(n), {n}, v);
    f.add<T>("m" + std::to_string(n), {n, 1}, v);
  }
  f.add<T>("scalar", {}, {static_cast<T>(7)});
  const std::string p = this->path("rt.safetensors");
  write_potential_file(p, f);
  const PotentialFile g = read_potential_file(p);
  EXPECT_EQ(g.source, p);
  expect_same_tensors(f, g);
  EXPECT_EQ(g.metadata, f.metadata);
  EXPECT_EQ(g.template values<T>("t13", {13}), f.template values<T>("t13", {13}));
}

class PotentialFileIo : public TempDirTest {};

TEST_F(PotentialFileIo, RoundTripKeepsMetadataAndExtras) {
  PotentialFile f = small_potential();
  f.metadata["provenance"]["source_sha256"] = std::string(64, 'e');
  f.metadata["hyperparameters"]["radial"] = {{"type", "bessel"}, {"num", 8}, {"weights", {0.5, 1e-17, -3.0}}};
  f.extra_metadata["note"] = "added by a Python tool";
  const std::string p = path("pot.safetensors");
  write_potential_file(p, f);
  const PotentialFile g = read_potential_file(p);
  expect_same_tensors(f, g);
  EXPECT_EQ(g.metadata, f.metadata);
  EXPECT_EQ(g.extra_metadata, f.extra_metadata);
  EXPECT_EQ(g.meta<double>("/hyperparameters/radial/weights/1"), 1e-17);
}

TEST_F(PotentialFileIo, WritingIsDeterministicAndStableUnderRoundTrip) {
  const PotentialFile f = small_potential();
  write_potential_file(path("a.safetensors"), f);
  write_potential_file(path("b.safetensors"), f);
  EXPECT_EQ(read_bytes(path("a.safetensors")), read_bytes(path("b.safetensors")));
  write_potential_file(path("c.safetensors"), read_potential_file(path("a.safetensors")));
  EXPECT_EQ(read_bytes(path("a.safetensors")), read_bytes(path("c.safetensors")));
}

TEST_F(PotentialFileIo, EmptyPotentialIsValid) {
  PotentialFile f;
  f.metadata = valid_metadata();
  write_potential_file(path("e.safetensors"), f);
  EXPECT_EQ(read_potential_file(path("e.safetensors")).size(), 0u);
}

TEST_F(PotentialFileIo, LayoutAlignsEveryTensorAndCoversTheBuffer) {
  PotentialFile f = small_potential();
  f.add<std::int16_t>("a16", {3}, {1, 2, 3});
  f.add<std::uint8_t>("odd", {5}, {1, 2, 3, 4, 5});
  f.add<double>("z", {1}, {1.0});
  const std::string p = path("layout.safetensors");
  write_potential_file(p, f);
  const std::string bytes = read_bytes(p);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  }
  EXPECT_EQ((8 + n) % 8, 0u) << "the data buffer must start 8-aligned";
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  const json h = json::parse(header);  // padding is spaces, which JSON allows
  ASSERT_TRUE(h.contains("__metadata__"));
  for (const auto& [k, v] : h["__metadata__"].items()) {
    EXPECT_TRUE(v.is_string()) << k;
  }
  EXPECT_EQ(h["__metadata__"]["format"], "fastmlip-potential");
  EXPECT_EQ(h["__metadata__"]["format_version"], "1");
  EXPECT_EQ(json::parse(h["__metadata__"]["fastmlip"].get<std::string>()), f.metadata);
  std::uint64_t total = 0;
  for (const auto& [name, t] : h.items()) {
    if (name == "__metadata__") {
      continue;
    }
    const std::uint64_t begin = t["data_offsets"][0];
    const std::uint64_t end = t["data_offsets"][1];
    const std::size_t elem = dtype_size(parse_dtype(t["dtype"].get<std::string>()));
    EXPECT_EQ((8 + n + begin) % elem, 0u) << name << " is not aligned to its element size";
    EXPECT_EQ(end - begin, f.get(name).data.size()) << name;
    EXPECT_EQ(bytes.compare(8 + n + begin, end - begin,
                            std::string(reinterpret_cast<const char*>(f.get(name).data.data()), end - begin)),
              0)
        << name;
    total += end - begin;
  }
  EXPECT_EQ(8 + n + total, bytes.size());
}

TEST_F(PotentialFileIo, WriteRefusesInvalidContentAndLeavesNoFile) {
  const std::string p = path("bad.safetensors");
  PotentialFile f = small_potential();
  f.metadata.erase("species");
  EXPECT_THROW(write_potential_file(p, f), InputError);

  f = small_potential();
  f.metadata["hyperparameters"]["scale"] = std::nan("");  // JSON cannot hold NaN
  try {
    write_potential_file(p, f);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "/hyperparameters/scale");
  }

  f = small_potential();
  f.extra_metadata["format_version"] = "7";
  EXPECT_THROW(write_potential_file(p, f), InputError);

  f = small_potential();
  f.add<double>(std::string("bad\xff name"), {1}, {1.0});  // not UTF-8
  EXPECT_THROW(write_potential_file(p, f), InputError);
  EXPECT_FALSE(fs::exists(p));

  auto msg =
      file_error_of([&] { write_potential_file(path("no/such/dir/x.safetensors"), small_potential()); });
  EXPECT_CONTAINS(msg, "no/such/dir/x.safetensors");
}

TEST_F(PotentialFileIo, DocumentationExampleWorks) {
  // The examples of docs/potential-format.md, so that the documented API stays real.
  PotentialFile pot;
  pot.metadata = {
      {"model", "mace"},
      {"species", {{{"Z", 29}, {"symbol", "Cu"}}, {{"Z", 28}, {"symbol", "Ni"}}}},
      {"cutoffs", {{"r_max", 5.0}}},
      {"units", "metal"},
      {"dtype", "float64"},
      {"hyperparameters", {{"num_interactions", 2}, {"correlation", 3}}},
      {"provenance",
       {{"writer", "train-potential 0.1.0"},
        {"training_data_sha256", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}}}};
  pot.add<double>("atomic_energies", {2}, {-3.72, -5.55});
  pot.add<float>("readouts.0.linear.weight", {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  const std::string p = path("cuni-mace-small.safetensors");
  write_potential_file(p, pot);

  const PotentialFile back = read_potential_file(p);
  EXPECT_EQ(back.model_kind(), "mace");
  EXPECT_EQ(back.cutoff(), 5.0);
  const int n_species = static_cast<int>(back.species().size());
  EXPECT_EQ(back.meta<int>("/hyperparameters/num_interactions"), 2);
  const std::vector<double> w =
      back.values<double>("readouts.0.linear.weight", {n_species, kAnyExtent}, Conversion::widen);
  EXPECT_EQ(w, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
}

// ----------------------------------------------------------------------------------------
// Interop with the PyPI safetensors package (fixtures: tests/reference/make_safetensors_fixture.py)

const std::string kFixtures = FASTMLIP_SAFETENSORS_FIXTURES;

TEST(PotentialFileInterop, ReadsPythonWrittenFile) {
  const std::string p = kFixtures + "/python_written.safetensors";
  const PotentialFile got = read_potential_file(p);
  const PotentialFile want = make_interop_potential();
  expect_same_tensors(want, got);
  EXPECT_EQ(got.metadata, want.metadata);
  EXPECT_EQ(got.extra_metadata, want.extra_metadata);

  // The same values once more through the typed accessors, spelled out, so that a mistake
  // shared by make_interop_potential() and the reader cannot hide.
  const auto w = got.values<double>("weights.f64", {2, 3});
  EXPECT_EQ(w[0], 1.0);
  EXPECT_EQ(w[1], -2.5);
  EXPECT_EQ(w[2], 1.0 / 3.0);
  EXPECT_EQ(w[3], 1e-300);
  EXPECT_EQ(w[4], -1e300);
  EXPECT_EQ(w[5], 0.0);
  EXPECT_TRUE(std::signbit(w[5]));
  const auto w32 = got.values<float>("weights.f32", {4});
  EXPECT_EQ(w32[0], static_cast<float>(0.1));
  EXPECT_EQ(w32[1], -3.25f);
  EXPECT_EQ(w32[2], 65504.0f);
  EXPECT_EQ(w32[3], static_cast<float>(1e-40));
  EXPECT_EQ(std::fpclassify(w32[3]), FP_SUBNORMAL);
  EXPECT_EQ(got.values<double>("weights.f32", {4}, Conversion::widen)[0],
            static_cast<double>(static_cast<float>(0.1)));
  EXPECT_EQ(got.values<std::int64_t>("species.i64", {4}),
            (std::vector<std::int64_t>{29, 28, -1, 4611686018427387905}));
  EXPECT_EQ(got.values<std::int32_t>("index.i32", {3, 2}), (std::vector<std::int32_t>{-2, -1, 0, 1, 2, 3}));
  EXPECT_EQ(got.values<std::int64_t>("index.i32", {3, 2}, Conversion::widen),
            (std::vector<std::int64_t>{-2, -1, 0, 1, 2, 3}));
  EXPECT_EQ(got.values<std::uint8_t>("mask.u8", {3}), (std::vector<std::uint8_t>{0, 1, 255}));
  EXPECT_EQ(got.values<double>("scale", {}), (std::vector<double>{2.5}));
  EXPECT_TRUE(got.values<double>("empty", {0, 3}).empty());
  EXPECT_EQ(got.model_kind(), "mace");
  EXPECT_EQ(got.cutoff(), 5.0);
  EXPECT_EQ(got.meta<int>("/hyperparameters/correlation"), 3);
  std::string ab;
  for (int i = 0; i < 32; ++i) {
    ab += "ab";
  }
  EXPECT_EQ(got.meta<std::string>("/provenance/training_data_sha256"), ab);
}

TEST(PotentialFileInterop, ReadsConverterWrittenFileAndVerifiesItsChecksums) {
  // Written by potentials/convert/potential_writer.py: its CRC-32s must be the ones this reader
  // computes (zlib's, over the same bytes), and every value must survive.
  const PotentialFile got = read_potential_file(kFixtures + "/converter_written.safetensors");
  EXPECT_TRUE(got.checksummed);
  EXPECT_TRUE(got.extra_metadata.empty());
  const PotentialFile want = make_interop_potential();
  EXPECT_EQ(got.metadata, want.metadata);
  ASSERT_EQ(got.size(), 5u);
  for (const auto& kv : got.tensors()) {
    const Tensor& w = want.get(kv.first);
    EXPECT_EQ(kv.second.dtype, w.dtype) << kv.first;
    EXPECT_EQ(kv.second.shape, w.shape) << kv.first;
    EXPECT_TRUE(kv.second.data == w.data) << kv.first;
  }
  // The file written by safetensors itself has none, and loads as an older fastmlip file does.
  EXPECT_FALSE(read_potential_file(kFixtures + "/python_written.safetensors").checksummed);
}

TEST(PotentialFileInterop, WriterMatchesCommittedBytes) {
  // cpp_written.safetensors was made by this writer and checked by the Python script with
  // safetensors; as long as the writer gives the same bytes, Python still reads its output.
  const std::string committed = kFixtures + "/cpp_written.safetensors";
  if (std::getenv("FASTMLIP_REGENERATE_FIXTURES") != nullptr) {
    write_potential_file(committed, make_interop_potential());
    std::printf("rewrote %s; now run tests/reference/make_safetensors_fixture.py to check it\n",
                committed.c_str());
  }
  ASSERT_TRUE(fs::exists(committed)) << committed
                                     << " is missing: rerun with FASTMLIP_REGENERATE_FIXTURES=1, then run "
                                        "tests/reference/make_safetensors_fixture.py";
  const std::string tmp =
      (fs::temp_directory_path() / ("fastmlip_interop_" + std::to_string(::getpid()))).string();
  write_potential_file(tmp, make_interop_potential());
  const std::string ours = read_bytes(tmp);
  fs::remove(tmp);
  EXPECT_TRUE(ours == read_bytes(committed))
      << "the writer's output changed: if that is intended, regenerate the fixture (see "
         "tests/reference/make_safetensors_fixture.py) and check it with safetensors";
  expect_same_tensors(make_interop_potential(), read_potential_file(committed));
}

}  // namespace
}  // namespace fastmlip::io

// SPDX-License-Identifier: MIT
// The MPtrj-style JSON reader (trainer/data/mptrj.hpp): the committed file of
// tests/reference/make_mptrj_fixture.py (which checks that chgnet's StructureJsonData reads it
// too), unit conversions, the energy key, magmoms, abc-only sites, and bad input named by file,
// frame and key.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "../common/error_text.hpp"
#include "core/error.hpp"
#include "data/mptrj.hpp"

namespace fastmlip::trainer::data {
namespace {

using fastmlip::test::error_of;

const std::string kFile = std::string(FASTMLIP_TRAINER_FIXTURES) + "/mptrj_small.json";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Dataset read(const std::string& text, const MptrjReadOptions& o = {}) {
  std::istringstream in(text);
  return read_mptrj(in, "mem.json", o);
}

/// One frame "mp-1-0" of one Li atom with the given label members (JSON text).
std::string one_frame(
    const std::string& labels,
    const std::string& site = R"({"species": [{"element": "Li", "occu": 1}], "xyz": [0, 0, 0]})") {
  return R"({"mp-1": {"mp-1-0": {"structure": {"lattice": {"matrix": [[3, 0, 0], [0, 3, 0], [0, 0, 3]]}, "sites": [)" +
         site + "]}" + (labels.empty() ? "" : ", " + labels) + "}}}";
}

TEST(TrainerMptrj, ReadsTheCommittedFileInOrderWithChgnetsConventions) {
  const auto ds = read_mptrj(kFile, {});
  ASSERT_EQ(ds.configs.size(), 3u);
  const auto& a = ds.configs[0];
  const auto& b = ds.configs[1];
  const auto& c = ds.configs[2];
  EXPECT_EQ(a.id, "mp-0001-0-0");
  EXPECT_EQ(b.id, "mp-0001-0-1");
  EXPECT_EQ(c.id, "mp-0002-1-0");
  EXPECT_EQ(b.where(), kFile + " (frame 2, mp-0001-0-1)");
  EXPECT_EQ(a.atomic_numbers, (std::vector<int>{3, 25, 8, 8}));
  // corrected_total_energy by default: the file's totals minus 1 eV.
  EXPECT_DOUBLE_EQ(*a.energy, -31.0);
  EXPECT_DOUBLE_EQ(*c.energy, -17.0);
  EXPECT_DOUBLE_EQ(a.positions[5], 0.37 * 5.85);
  EXPECT_EQ(a.forces.size(), 12u);
  EXPECT_DOUBLE_EQ(a.forces[2], 0.3);
  // VASP's kBar, compressive positive -> eV/A^3, tensile positive: 16.021766208 kBar is
  // -0.01 eV/A^3 (chgnet: -1.6021766208 GPa).
  ASSERT_TRUE(a.stress.has_value());
  EXPECT_NEAR((*a.stress)[0], -0.01, 1e-15);
  EXPECT_NEAR((*a.stress)[4], 8.0 / kKbarPerEvPerA3, 1e-15);
  EXPECT_NEAR((*c.stress)[8], 2.0 / kKbarPerEvPerA3, 1e-15);
  // Magnetic moments as absolute values; null is no label.
  EXPECT_EQ(a.magmoms, (std::vector<double>{0.01, 3.9, 0.02, 0.03}));
  EXPECT_TRUE(b.magmoms.empty());
  EXPECT_EQ(c.magmoms, (std::vector<double>{2.5, 1.6}));
  // The FeCo frame has fractional coordinates only, in a triclinic cell periodic in a and b.
  EXPECT_EQ(c.pbc, (std::array<bool, 3>{true, true, false}));
  const double abc[3] = {0.5, 0.45, 0.55};
  const double m[9] = {2.9, 0.1, 0.0, 0.2, 2.8, 0.1, 0.0, 0.3, 2.7};
  for (int k = 0; k < 3; ++k) {
    EXPECT_NEAR(c.positions[3 + k], abc[0] * m[k] + abc[1] * m[3 + k] + abc[2] * m[6 + k], 1e-14);
  }
  EXPECT_EQ((*c.cell)[3], 0.2);
}

TEST(TrainerMptrj, EnergyKeyChoosesTheEnergyAndPerAtomKeysAreScaled) {
  MptrjReadOptions o;
  o.energy_key = "uncorrected_total_energy";
  EXPECT_DOUBLE_EQ(*read_mptrj(kFile, o).configs[0].energy, -30.0);
  o.energy_key = "energy_per_atom";  // (corrected - 1) / 4 in the file, times 4 atoms
  EXPECT_NEAR(*read_mptrj(kFile, o).configs[0].energy, -31.0, 1e-12);
}

TEST(TrainerMptrj, MissingLabelsAreErrorsOrSkippedWithAllowMissing) {
  MptrjReadOptions o;
  o.require_magmoms = true;
  const auto msg = error_of([&] { read_mptrj(kFile, o); });
  EXPECT_TRUE(contains(msg, kFile) && contains(msg, "frame 2 (mp-0001-0-1)") && contains(msg, "'magmom'"))
      << msg;
  o.allow_missing = true;
  const auto ds = read_mptrj(kFile, o);
  EXPECT_EQ(ds.configs.size(), 2u);
  EXPECT_EQ(ds.skipped, 1u);
  EXPECT_EQ(ds.missing_by_key.at("magmom"), 1u);
  EXPECT_TRUE(contains(ds.skip_warning, "skipped 1 of 3")) << ds.skip_warning;
  // Forces and energy are required by default; stress is not.
  const auto e = error_of([] { read(one_frame(R"("corrected_total_energy": -1.5)")); });
  EXPECT_TRUE(contains(e, "mem.json") && contains(e, "mp-1-0") && contains(e, "'force'")) << e;
  const auto ok = read(one_frame(R"("corrected_total_energy": -1.5, "force": [[0, 0, 1]])"));
  EXPECT_FALSE(ok.configs[0].stress.has_value());
}

TEST(TrainerMptrj, BadInputNamesTheFrameAndTheKey) {
  const std::string labels = R"("corrected_total_energy": -1.5, "force": [[0, 0, 1]])";
  auto error = [](const std::string& text) { return error_of([&] { read(text); }); };
  EXPECT_TRUE(contains(error("{not json"), "not valid JSON"));
  EXPECT_TRUE(contains(error("[1, 2]"), "mp-ids"));
  auto msg = error(one_frame(R"("corrected_total_energy": -1.5, "force": [[0, 0, 1], [0, 0, 0]])"));
  EXPECT_TRUE(contains(msg, "frame 1 (mp-1-0)") && contains(msg, "'force'") && contains(msg, "1 rows"))
      << msg;
  msg = error(one_frame(labels, R"({"species": [{"element": "Xx", "occu": 1}], "xyz": [0, 0, 0]})"));
  EXPECT_TRUE(contains(msg, "structure.sites[0].species[0].element") && contains(msg, "Xx")) << msg;
  msg = error(one_frame(
      labels,
      R"({"species": [{"element": "Li", "occu": 0.5}, {"element": "Na", "occu": 0.5}], "xyz": [0, 0, 0]})"));
  EXPECT_TRUE(contains(msg, "disordered")) << msg;
  msg = error(one_frame(labels, R"({"species": [{"element": "Li", "occu": 1}]})"));
  EXPECT_TRUE(contains(msg, "neither 'xyz' nor 'abc'")) << msg;
  msg = error(one_frame(R"("corrected_total_energy": "a lot", "force": [[0, 0, 1]])"));
  EXPECT_TRUE(contains(msg, "'corrected_total_energy' is string")) << msg;
  msg = error(one_frame(labels + R"(, "stress": [[1, 2, 3], [4, 5, 6]])"));
  EXPECT_TRUE(contains(msg, "'stress'")) << msg;
  msg = error(one_frame(labels + R"(, "magmom": [1, 2])"));
  EXPECT_TRUE(contains(msg, "'magmom'") && contains(msg, "list of 1 numbers")) << msg;
  EXPECT_TRUE(contains(error_of([] { read_mptrj("/nonexistent/mptrj.json", {}); }), "cannot open"));
  // The layout, checked as the parser goes.
  EXPECT_TRUE(contains(error("5"), "top level must be an object of mp-ids"));
  EXPECT_TRUE(contains(error(R"({"mp-1": 5})"), "'mp-1' must be an object of frames"));
  EXPECT_TRUE(contains(error(R"({"mp-1": [1]})"), "'mp-1' must be an object of frames"));
  msg = error(R"({"mp-1": {"mp-1-0": [1, 2]}})");
  EXPECT_TRUE(contains(msg, "frame 1 (mp-1-0)") && contains(msg, "must be an object")) << msg;
}

TEST(TrainerMptrj, AScanConvertsOnlyTheWantedFramesAndNumbersThemAsTheReader) {
  const std::string labels = R"("corrected_total_energy": -1.5, "force": [[0, 0, 1]])";
  const std::string li = R"({"species": [{"element": "Li", "occu": 1}], "xyz": [0, 0, 0]})";
  const std::string bad = R"({"species": [{"element": "Xx", "occu": 1}], "xyz": [0, 0, 0]})";
  const auto frame = [&](const std::string& id, const std::string& site, const std::string& l) {
    return "\"" + id +
           R"(": {"structure": {"lattice": {"matrix": [[3, 0, 0], [0, 3, 0], [0, 0, 3]]}, "sites": [)" +
           site + "]}" + (l.empty() ? "" : ", " + l) + "}";
  };
  // Graphs 0 (a-0), 1 (a-2, with an unknown element), 2 (b-0); a-1 lacks its forces (skipped).
  const std::string text = "{\"mp-a\": {" + frame("a-0", li, labels) + ", " +
                           frame("a-1", li, R"("corrected_total_energy": -2)") + ", " +
                           frame("a-2", bad, labels) + "}, \"mp-b\": {" +
                           frame("b-0", li, R"("corrected_total_energy": -3, "force": [[1, 2, 3]])") + "}}";
  MptrjReadOptions o;
  o.allow_missing = true;
  const auto scan = [&](const std::function<bool(std::size_t)>& wanted, std::vector<std::size_t>& got,
                        std::vector<Config>& configs) {
    Dataset ds;
    std::istringstream in(text);
    const std::size_t n = scan_mptrj(in, "mem.json", o, ds, wanted, [&](std::size_t g, Config&& c) {
      got.push_back(g);
      configs.push_back(std::move(c));
    });
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(ds.skipped, 1u);
    EXPECT_TRUE(ds.configs.empty());
  };
  std::vector<std::size_t> got;
  std::vector<Config> configs;
  scan([](std::size_t g) { return g != 1; }, got, configs);  // the bad structure is not converted
  EXPECT_EQ(got, (std::vector<std::size_t>{0, 2}));
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[1].id, "b-0");
  EXPECT_EQ(configs[1].frame, 4);
  EXPECT_EQ(configs[1].forces, (std::vector<double>{1, 2, 3}));
  std::vector<std::size_t> all;
  std::vector<Config> all_configs;
  const std::string msg = error_of([&] { scan([](std::size_t) { return true; }, all, all_configs); });
  EXPECT_TRUE(contains(msg, "frame 3 (a-2)") && contains(msg, "Xx")) << msg;
}

// Bug (fuzz_mptrj, issue 17): a number beyond double's range made nlohmann's out_of_range escape
// read_mptrj instead of a FileError (only parse_error was caught). Corpus:
// tests/fuzz/corpus/mptrj/regression-number-overflow.bin.
TEST(TrainerMptrj, NumberBeyondDoubleRangeIsAFileErrorNotAJsonException) {
  const std::string text = one_frame(R"("corrected_total_energy": 1e400, "force": [[0, 0, 1]])");
  try {
    read(text);
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), "mem.json");
    EXPECT_TRUE(contains(e.what(), "not valid JSON") && contains(e.what(), "1e400")) << e.what();
  }
}

}  // namespace
}  // namespace fastmlip::trainer::data

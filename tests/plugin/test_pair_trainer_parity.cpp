// SPDX-License-Identifier: MIT
// pair_style fastmlip/mace on a model trained and exported by train-potential, against the
// trainer's own evaluation of the exported file (issue 7: "agrees within 1e-10 relative in
// double"). tests/trainer/test_lammps_parity_fixture.cpp trains the model and writes the
// structures and the trainer's energy, per-atom energies, forces and virials into
// FASTMLIP_TRAINER_PARITY_DIR, in the layout of the mace-torch fixtures; ctest runs it first
// (fixture trainer_parity) and this test on 1 and 2 ranks.
#include <cstdlib>
#include <string>

#include "mace_parity.hpp"

namespace {

using namespace fastmlip_test;

std::string parity_dir() {
  const char* dir = std::getenv("FASTMLIP_TRAINER_PARITY_DIR");
  return dir != nullptr ? dir : "";
}

TEST(PairMaceTrainerParity, ExportedModelMatchesTrainerInDouble) {
  const std::string dir = parity_dir();
  ASSERT_FALSE(dir.empty()) << "set FASTMLIP_TRAINER_PARITY_DIR (ctest does)";
  const auto models = committed_models(dir);
  ASSERT_EQ(models.size(), 1u);
  check_model(dir, models[0], {1e-10, "float64"});
}

}  // namespace

int main(int argc, char** argv) { return fastmlip_test::run_mpi_tests(argc, argv); }

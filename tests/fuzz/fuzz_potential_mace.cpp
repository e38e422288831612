// SPDX-License-Identifier: MIT
// MACE potential files: the safetensors container (src/io/potential_file.*), then the MACE loader
// (src/models/mace/mace_spec.*: hyperparameters, irreps, every tensor's shape) and the model
// built from what it accepted (src/models/mace/mace_model.*), as pair_style fastmlip/mace and
// train-potential --foundation_model load one.
#include "models/mace/mace_model.hpp"
#include "potential_fuzz.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fastmlip::fuzz::init_kokkos();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return fastmlip::fuzz::fuzz_potential(data, size, [](const fastmlip::io::PotentialFile& file) {
    // The constructor runs load_mace_spec first, then builds the kernels from what it accepted.
    fastmlip::models::MaceModel<Kokkos::DefaultHostExecutionSpace, float> model(file);
  });
}

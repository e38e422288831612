// SPDX-License-Identifier: MIT
// CHGNet potential files: the safetensors container (src/io/potential_file.*), then the CHGNet
// loader (the ChgnetModel constructor, src/models/chgnet/chgnet_model.*: hyperparameters, cutoffs,
// every tensor's shape), as pair_style fastmlip/chgnet and train-potential load one.
#include "models/chgnet/chgnet_model.hpp"
#include "potential_fuzz.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fastmlip::fuzz::init_kokkos();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return fastmlip::fuzz::fuzz_potential(data, size, [](const fastmlip::io::PotentialFile& file) {
    fastmlip::models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, float> model(file);
  });
}

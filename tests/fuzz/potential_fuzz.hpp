// SPDX-License-Identifier: MIT
#pragma once
// The common part of the potential-file harnesses: the input is written to a scratch file and
// read with read_potential_file (the only reader there is: it takes a path), then each tensor is
// read as every model loader reads tensors, then the model's own loader runs (`load`).
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.hpp"
#include "fuzz_util.hpp"
#include "io/potential_file.hpp"

namespace fastmlip::fuzz {

/// Kokkos initialised once per process, finalised at exit (the model loaders build host views).
/// (argc/argv: the form Kokkos 3.4 and 4.x both take; libFuzzer's own flags are not passed on.)
inline void init_kokkos() {
  static char name[] = "fastmlip-fuzz";
  static char* argv[] = {name, nullptr};
  int argc = 1;
  Kokkos::initialize(argc, argv);
  std::atexit([] { Kokkos::finalize(); });
}

template <class Load>
int fuzz_potential(const std::uint8_t* data, std::size_t size, Load load) {
  const std::string path = scratch_path(".safetensors");
  write_input(path, data, size);
  io::PotentialFile file;
  try {
    file = io::read_potential_file(path);
  } catch (const Error&) {
    return 0;
  }
  for (const auto& [name, tensor] : file.tensors()) {
    try {
      file.values<double>(name, std::vector<std::int64_t>(tensor.shape.size(), io::kAnyExtent),
                          io::Conversion::widen);
    } catch (const Error&) {
    }
  }
  try {
    file.species();
    file.cutoff();
    file.compute_dtype();
    load(file);
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace fastmlip::fuzz

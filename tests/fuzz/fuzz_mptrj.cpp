// SPDX-License-Identifier: MIT
// MPtrj-style JSON (trainer/data/mptrj.*), as train-potential reads a .json training file. The
// first byte picks the label requirements and keys, so that the optional-label branches (stress,
// magmoms, allow_missing, a per-atom energy key) are reached too; the rest is the file.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "data/mptrj.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::uint8_t mode = data[0];
  fastmlip::trainer::data::MptrjReadOptions options;
  options.require_energy = (mode & 1) == 0;
  options.require_forces = (mode & 2) == 0;
  options.require_stress = (mode & 4) != 0;
  options.require_magmoms = (mode & 8) != 0;
  options.allow_missing = (mode & 16) != 0;
  if (mode & 32) {
    options.energy_key = "energy_per_atom";
  } else if (mode & 64) {
    options.energy_key = "uncorrected_total_energy";
  }
  std::istringstream in(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  try {
    fastmlip::trainer::data::read_mptrj(in, "fuzz.json", options);
  } catch (const fastmlip::Error&) {
  }
  return 0;
}

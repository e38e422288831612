// SPDX-License-Identifier: MIT
// Extended XYZ (src/io/extxyz.*), as train-potential and the tools read it: every frame through
// ExtxyzReader, every info value through Frame::info_numbers, each frame written back and read
// again (the writer promises an exact round trip), then the whole input through the trainer's
// read_dataset, which parses the labels (energy, forces, stress, virials, weights).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "data/dataset.hpp"
#include "fuzz_util.hpp"
#include "io/extxyz.hpp"

namespace {

using fastmlip::fuzz::fail;
using fastmlip::io::Frame;

bool same_number(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

/// The frame read back from its own written form must hold what the first read gave.
void check_round_trip(const Frame& f) {
  std::ostringstream out;
  try {
    fastmlip::io::write_extxyz(out, f);
  } catch (const fastmlip::Error&) {
    return;  // the writer may refuse what it cannot write; it must not write it wrongly
  }
  std::istringstream in(out.str());
  fastmlip::io::ExtxyzReader reader(in, "round-trip.xyz");
  Frame g;
  std::string why;
  try {
    if (!reader.next(g)) {
      why = "no frame";
    }
  } catch (const fastmlip::Error& e) {
    why = e.what();
  }
  if (why.empty()) {
    if (g.species != f.species || g.pbc != f.pbc || g.cell.has_value() != f.cell.has_value() ||
        g.info != f.info || g.arrays.size() != f.arrays.size() || g.positions.size() != f.positions.size()) {
      why = "species, pbc, cell, info or the column layout changed";
    }
    for (std::size_t k = 0; why.empty() && k < f.positions.size(); ++k) {
      if (!same_number(f.positions[k], g.positions[k])) {
        why = "position " + std::to_string(k) + " changed";
      }
    }
    for (std::size_t k = 0; why.empty() && f.cell && k < 9; ++k) {
      if (!same_number((*f.cell)[k], (*g.cell)[k])) {
        why = "cell value " + std::to_string(k) + " changed";
      }
    }
    for (std::size_t c = 0; why.empty() && c < f.arrays.size(); ++c) {
      const auto &a = f.arrays[c], &b = g.arrays[c];
      bool same = a.name == b.name && a.type == b.type && a.width == b.width && a.strings == b.strings &&
                  a.numbers.size() == b.numbers.size();
      for (std::size_t k = 0; same && k < a.numbers.size(); ++k) {
        same = same_number(a.numbers[k], b.numbers[k]);
      }
      if (!same) {
        why = "column '" + a.name + "' changed";
      }
    }
  }
  if (!why.empty()) {
    fail("extxyz round trip of frame " + std::to_string(f.index) + ": " + why + "; written:\n" + out.str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    std::istringstream in(text);
    fastmlip::io::ExtxyzReader reader(in, "fuzz.xyz");
    Frame f;
    try {
      while (reader.next(f)) {
        for (const auto& [key, value] : f.info) {
          try {
            f.info_numbers(key);
          } catch (const fastmlip::Error&) {
          }
        }
        check_round_trip(f);
      }
    } catch (const fastmlip::Error&) {
    }
  }
  // The trainer's view of the same file: labels under both key conventions it is given.
  for (const bool ase_keys : {false, true}) {
    std::istringstream in(text);
    fastmlip::trainer::data::ReadOptions options;
    if (ase_keys) {
      options.keys = {"energy", "forces", "stress", "virial"};
      options.extract_isolated_atoms = true;
      options.config_type_weights = {{"Default", 1.0}, {"bulk", 2.0}};
    }
    options.allow_missing = ase_keys;
    try {
      fastmlip::trainer::data::read_dataset(in, "fuzz.xyz", options);
    } catch (const fastmlip::Error&) {
    }
  }
  return 0;
}

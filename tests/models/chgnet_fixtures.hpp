// SPDX-License-Identifier: MIT
#pragma once
// The chgnet parity fixtures (tests/reference/data/chgnet/*.json, made by
// tests/reference/make_chgnet_fixtures.py) and the potentials they were made with: what the model
// tests and the device tests read. Needs FASTMLIP_REFERENCE_DATA_DIR and FASTMLIP_SOURCE_DIR.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "chgnet_test_util.hpp"

namespace fastmlip::test::chgnet_fixtures {

namespace fs = std::filesystem;
using nlohmann::json;

inline std::string fixture_dir() { return std::string(FASTMLIP_REFERENCE_DATA_DIR) + "/chgnet"; }
inline std::string potential_path(const std::string& version) {
  return version == "0.3.0" ? std::string(FASTMLIP_SOURCE_DIR) + "/potentials/chgnet-0.3.0.safetensors"
                            : fixture_dir() + "/chgnet-" + version + ".safetensors";
}

inline json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  return json::parse(in);
}

inline ChgnetStructure structure_of(const json& j) {
  ChgnetStructure s;
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      s.lattice[3 * a + b] = j.at("lattice")[a][b].get<double>();
    }
  }
  for (const auto& p : j.at("positions")) {
    for (const auto& x : p) {
      s.positions.push_back(x.get<double>());
    }
  }
  for (const auto& z : j.at("numbers")) {
    s.numbers.push_back(z.get<int>());
  }
  for (int k = 0; k < 3; ++k) {
    s.pbc[k] = j.at("pbc")[k].get<bool>();
  }
  return s;
}

/// The fixtures other than the layer-by-layer debug dumps.
inline std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(fixture_dir())) {
    const auto stem = e.path().stem().string();
    if (e.path().extension() == ".json" && stem.find("_debug") == std::string::npos) {
      names.push_back(stem);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string version_of(const json& j) {
  const auto model = j.at("model").get<std::string>();  // "chgnet 0.3.0"
  return model.substr(model.find(' ') + 1);
}

}  // namespace fastmlip::test::chgnet_fixtures

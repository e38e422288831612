// SPDX-License-Identifier: MIT
#pragma once
// Reading the committed JSON parity fixtures (tests/reference/data), shared by the model tests,
// the trainer's tests and the LAMMPS-level tests.
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace fastmlip::test {

/// A committed JSON fixture; std::runtime_error naming the path if it cannot be read.
inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  return nlohmann::json::parse(in);
}

/// A MACE fixture structure (positions, atomic_numbers, pbc, cell) as a structure S with fields
/// positions, species (the model's species index of each atom, from `model.species_index(Z)`),
/// pbc and an optional cell (set only when some direction is periodic).
template <class S, class Model>
S mace_structure_of(const nlohmann::json& s, const Model& model) {
  S out;
  for (const auto& p : s["positions"]) {
    for (const auto& x : p) {
      out.positions.push_back(x.get<double>());
    }
  }
  for (const auto& z : s["atomic_numbers"]) {
    out.species.push_back(model.species_index(z.get<int>()));
  }
  bool any = false;
  for (int k = 0; k < 3; ++k) {
    out.pbc[k] = s["pbc"][k].get<bool>();
    any = any || out.pbc[k];
  }
  if (any) {
    std::array<double, 9> cell{};
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) {
        cell[3 * a + b] = s["cell"][a][b].get<double>();
      }
    }
    out.cell = cell;
  }
  return out;
}

/// For a fixture model that embeds the structure's total charge and spin (mace-torch's
/// embedding_specs), the values its structures were evaluated at: make_mace_fixtures.py's
/// graph_features, kept in the results file's model construction. Sets them on `o`, a
/// models::MaceOptions; a model without them leaves `o` as it is.
template <class Options>
void set_mace_graph_features(Options& o, const nlohmann::json& doc) {
  const auto features =
      doc.value(nlohmann::json::json_pointer("/model/construction/graph_features"), nlohmann::json::object());
  for (const auto& [name, value] : features.items()) {
    (name == "total_charge" ? o.total_charge : o.total_spin) = value.template get<double>();
  }
}

/// The same as pair_style keywords (" charge Q spin S"), empty for a model without them.
inline std::string mace_graph_keywords(const nlohmann::json& doc) {
  const auto features =
      doc.value(nlohmann::json::json_pointer("/model/construction/graph_features"), nlohmann::json::object());
  std::string out;
  for (const auto& [name, value] : features.items()) {
    out += std::string(name == "total_charge" ? " charge " : " spin ") + value.dump();
  }
  return out;
}

}  // namespace fastmlip::test

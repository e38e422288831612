// SPDX-License-Identifier: MIT
#pragma once
// Readers of the kernel parity fixtures (tests/reference/data/kernels/, written by
// tests/reference/make_kernel_fixtures.py), shared by the tests and the benchmarks.
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace fastmlip::test {

/// The fixture file `name` (e.g. "symmetric_contraction.json") from `dir`.
inline nlohmann::json load_kernel_fixture(const std::string& dir, const std::string& name) {
  std::ifstream in(dir + "/kernels/" + name);
  if (!in) {
    throw std::runtime_error("missing fixture " + dir + "/kernels/" + name +
                             "; regenerate with tests/reference/make_kernel_fixtures.py");
  }
  return nlohmann::json::parse(in);
}

/// One mace-torch SymmetricContraction of symmetric_contraction.json: its U buffers (dense,
/// rebuilt from the stored non-zeros) and weights, per contraction and order, in the layout
/// SymmetricContraction::from_mace and fold take.
struct MaceContractionData {
  std::vector<std::vector<std::vector<double>>> U, W;
  std::vector<std::vector<std::vector<int>>> u_shapes;
};

inline MaceContractionData mace_contraction_data(const nlohmann::json& c) {
  MaceContractionData d;
  const int corr = c["correlation"].get<int>();
  for (const auto& ct : c["contractions"]) {
    d.U.emplace_back();
    d.W.emplace_back();
    d.u_shapes.emplace_back();
    for (int nu = 1; nu <= corr; ++nu) {
      const auto& u = ct["U"][std::to_string(nu)];
      auto shape = u["shape"].get<std::vector<int>>();
      long long numel = 1;
      for (int s : shape) {
        numel *= s;
      }
      std::vector<double> dense(numel, 0.0);
      for (const auto& nz : u["nonzeros"]) {
        dense[nz[0].get<long long>()] = nz[1].get<double>();
      }
      d.U.back().push_back(std::move(dense));
      d.u_shapes.back().push_back(std::move(shape));
      d.W.back().push_back(ct["W"][std::to_string(nu)]["values"].get<std::vector<double>>());
    }
  }
  return d;
}

}  // namespace fastmlip::test

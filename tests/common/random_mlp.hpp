// SPDX-License-Identifier: MIT
#pragma once
// Random MLPs for kernel tests: MACE's radial MLP and CHGNet's gated MLP.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/gated_mlp.hpp"
#include "kernels/radial_mlp.hpp"
#include "tolerance.hpp"

namespace fastmlip::test {

/// A radial MLP of given widths with weights uniform in [-1.5, 1.5).
inline kernels::RadialMLP random_radial_mlp(std::vector<int> widths, double act_cst, std::uint64_t seed) {
  kernels::RadialMLP mlp;
  mlp.widths = std::move(widths);
  mlp.act_cst = act_cst;
  Uniform w(seed);
  for (std::size_t l = 0; l + 1 < mlp.widths.size(); ++l) {
    mlp.weights.emplace_back(static_cast<std::size_t>(mlp.widths[l]) * mlp.widths[l + 1]);
    for (double& x : mlp.weights.back()) {
      x = w(-1.5, 1.5);
    }
  }
  return mlp;
}

inline std::vector<double> random_vector(std::size_t n, Uniform& u, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  for (auto& x : v) {
    x = u(lo, hi);
  }
  return v;
}
template <class T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

/// A gated MLP's weights uniform in [-0.6, 0.6), LayerNorm weights around 1; drawn in double
/// and rounded, so float and double runs share the same model.
template <class T>
kernels::GatedMlpWeights<T> random_gated_mlp_weights(int in, int hidden, int out, bool norm, Uniform& u) {
  kernels::GatedMlpWeights<double> w;
  w.in = in, w.hidden = hidden, w.out = out, w.norm = norm;
  auto parts = w.parts();
  const auto shapes = w.shapes();
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const std::size_t n = static_cast<std::size_t>(shapes[k].first) * std::max(shapes[k].second, 1);
    *parts[k] = random_vector(n, u, -0.6, 0.6);
  }
  if (norm) {
    for (auto& v : w.ln_core_w) {
      v += 1.0;
    }
    for (auto& v : w.ln_gate_w) {
      v += 1.0;
    }
  }
  kernels::GatedMlpWeights<T> t;
  t.in = in, t.hidden = hidden, t.out = out, t.norm = norm;
  auto tp = t.parts();
  for (std::size_t k = 0; k < parts.size(); ++k) {
    *tp[k] = cast<T>(*parts[k]);
  }
  return t;
}

/// The same weights in precision T.
template <class T>
kernels::GatedMlpWeights<T> cast_weights(const kernels::GatedMlpWeights<double>& w) {
  kernels::GatedMlpWeights<T> t;
  t.in = w.in, t.hidden = w.hidden, t.out = w.out, t.norm = w.norm;
  const auto src = w.parts();
  auto dst = t.parts();
  for (std::size_t q = 0; q < src.size(); ++q) {
    *dst[q] = cast<T>(*src[q]);
  }
  return t;
}

struct GatedMlpShape {
  int in, hidden, out;
  bool norm;
  std::vector<int> segments;
};
/// chgnet 0.3.0's convolutions (hidden layer, norm), its angle update (no hidden layer) and
/// 0.2.0 (no norm), at odd widths; the first layer split into segments as the model splits it.
inline const std::vector<GatedMlpShape>& gated_mlp_shapes() {
  static const std::vector<GatedMlpShape> s{{13, 7, 5, true, {5, 3, 5}},
                                            {11, 0, 9, true, {3, 3, 2, 3}},
                                            {9, 5, 3, false, {}},
                                            {1, 1, 1, true, {1}}};
  return s;
}

}  // namespace fastmlip::test

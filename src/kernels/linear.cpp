// SPDX-License-Identifier: MIT
#include "kernels/linear.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"

namespace fastmlip::kernels {
namespace {

EquivariantLinear build(const Irreps& in, const Irreps& out, int sets) {
  EquivariantLinear lin;
  lin.irreps_in = in;
  lin.irreps_out = out;
  lin.num_sets = sets;
  const auto off_in = in.offsets(), off_out = out.offsets();
  for (std::size_t a = 0; a < in.size(); ++a) {
    for (std::size_t b = 0; b < out.size(); ++b) {
      if (in[a].ir == out[b].ir) {
        LinearInstruction ins;
        ins.in = static_cast<int>(a);
        ins.out = static_cast<int>(b);
        ins.mul_in = in[a].mul;
        ins.mul_out = out[b].mul;
        ins.dim = in[a].ir.dim();
        ins.offset_in = off_in[a];
        ins.offset_out = off_out[b];
        ins.offset_weight = lin.weight_numel;
        lin.weight_numel += ins.mul_in * ins.mul_out;
        lin.instructions.push_back(ins);
      }
    }
  }
  for (auto& ins : lin.instructions) {
    double fan = 0;
    for (const auto& o : lin.instructions) {
      if (o.out == ins.out) {
        fan += static_cast<double>(o.mul_in) * sets;
      }
    }
    ins.path_weight = fan > 0 ? 1.0 / std::sqrt(fan) : 1.0;
  }
  return lin;
}

}  // namespace

EquivariantLinear EquivariantLinear::e3nn(const Irreps& irreps_in, const Irreps& irreps_out) {
  return build(irreps_in, irreps_out, 1);
}

EquivariantLinear EquivariantLinear::element_skip(const Irreps& irreps_in, int num_elements, const Irreps& irreps_out) {
  if (num_elements < 1) {
    throw InputError("EquivariantLinear::element_skip: num_elements must be >= 1, got " + std::to_string(num_elements));
  }
  // FullyConnectedTensorProduct's 'element' normalisation counts mul_in * num_elements per
  // path, and the 3j block of l (x) 0 -> l times sqrt(2l+1) ('component') is the identity.
  EquivariantLinear lin = build(irreps_in, irreps_out, num_elements);
  lin.m_from_tensor_product = true;
  return lin;
}

std::vector<double> EquivariantLinear::weights_from_e3nn(const std::vector<double>& w) const {
  const std::size_t expect = static_cast<std::size_t>(weight_numel) * num_sets;
  if (w.size() != expect) {
    throw InputError("EquivariantLinear::weights_from_e3nn: " + std::to_string(w.size()) + " weights for '" +
                     irreps_in.str() + "' -> '" + irreps_out.str() + "', expected " + std::to_string(expect));
  }
  if (!m_from_tensor_product) {
    return w;
  }
  std::vector<double> out(expect);
  std::size_t src = 0;
  for (const auto& ins : instructions) {
    // e3nn 'uvw' block: [mul_in, num_elements, mul_out] row-major.
    for (int u = 0; u < ins.mul_in; ++u) {
      for (int e = 0; e < num_sets; ++e) {
        for (int v = 0; v < ins.mul_out; ++v) {
          out[static_cast<std::size_t>(e) * weight_numel + ins.offset_weight + u * ins.mul_out + v] = w[src++];
        }
      }
    }
  }
  return out;
}

}  // namespace fastmlip::kernels

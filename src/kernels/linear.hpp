// SPDX-License-Identifier: MIT
#pragma once
/// \file Equivariant linear maps, as data: e3nn's o3.Linear (MACE's linear_up, linear,
/// embeddings, readouts) and MACE's skip_tp, whose one-hot species input makes it the same map
/// with weights chosen by the node's element.
///
/// For every instruction (in entry a -> out entry b, same irrep, multiplicities U -> V):
///
///   out[b, v, m] += pw * sum_u W[set, ins, u, v] x[a, u, m],    pw = 1 / sqrt(sum of U into b (x sets))
///
/// with e3nn's instruction order (in entry major, out entry minor) and path normalisation
/// "element". `set` is 0 for o3.Linear and the node's element for the skip connection.
#include <vector>

#include "math/irreps.hpp"

namespace fastmlip::kernels {

struct LinearInstruction {
  int in = 0, out = 0;           ///< entry indices
  int mul_in = 0, mul_out = 0, dim = 0;
  int offset_in = 0, offset_out = 0;
  int offset_weight = 0;         ///< start of its [mul_in x mul_out] block in one weight set
  double path_weight = 0;
};

class EquivariantLinear {
 public:
  /// e3nn's o3.Linear(irreps_in, irreps_out) without biases; one weight set.
  static EquivariantLinear e3nn(const Irreps& irreps_in, const Irreps& irreps_out);
  /// MACE's skip_tp = FullyConnectedTensorProduct(irreps_in, num_elements x 0e, irreps_out)
  /// with one-hot species: num_elements weight sets.
  static EquivariantLinear element_skip(const Irreps& irreps_in, int num_elements, const Irreps& irreps_out);

  Irreps irreps_in, irreps_out;
  std::vector<LinearInstruction> instructions;
  int weight_numel = 0;  ///< per set
  int num_sets = 1;

  /// Our weights [set][weight_numel] from e3nn's flat weight vector: o3.Linear's as is; the
  /// skip TP's per-instruction [mul_in, num_elements, mul_out] blocks regrouped by element.
  std::vector<double> weights_from_e3nn(const std::vector<double>& e3nn_weight) const;

 private:
  bool m_from_tensor_product = false;
};

}  // namespace fastmlip::kernels

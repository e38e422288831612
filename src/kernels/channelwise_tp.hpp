// SPDX-License-Identifier: MIT
#pragma once
/// \file MACE's channelwise tensor product (mace-torch `conv_tp`: an e3nn TensorProduct in
/// "uvu" mode with per-edge weights), as data.
///
/// For every edge e = (sender s -> receiver r) and instruction (i1, i2 -> o) with
/// multiplicity u of the node features:
///
///   m[r, o, u, k] += sum_e w[e, W_o + u] * c_o * sum_{i,j} C^{l1 l2 l3}_{ijk} x[s, i1, u, i] Y[e, i2, j]
///
/// where C is e3nn's real Wigner 3j (Frobenius norm 1) and c_o = sqrt(alpha) is e3nn's
/// normalisation with irrep_normalization="component", path_normalization="element":
/// alpha = (2 l3 + 1) / sum over the instructions into o of mul(i2) (in1/in2 variances 1).
/// The instruction list, output irreps and weight layout follow mace-torch's
/// tp_out_irreps_with_instructions (irreps/instruction order included), so weights and
/// outputs of a converted model line up without permutation.
///
/// The descriptor is built once on the host; the reference, Kokkos and CUDA kernels all read
/// the same flat arrays (instructions, then their CG non-zeros with c_o folded in).
#include <vector>

#include "math/clebsch_gordan.hpp"
#include "math/irreps.hpp"

namespace fastmlip::kernels {

/// One "uvu" path. Offsets are into the flat feature vectors (e3nn layout: entry by entry,
/// within an entry channel-major, then m).
struct TPInstruction {
  int i1 = 0, i2 = 0, out = 0;  ///< entry indices into irreps1, irreps2, irreps_out
  int l1 = 0, l2 = 0, l3 = 0;
  int mul = 0;                  ///< channels u (= mul of irreps1[i1] = mul of irreps_out[out])
  int offset1 = 0;              ///< start of entry i1 in a node feature vector
  int offset2 = 0;              ///< start of entry i2 in an edge attribute vector
  int offset_out = 0;           ///< start of entry `out` in a message vector
  int offset_weight = 0;        ///< start of this path's mul weights in a per-edge weight row
  int cg_begin = 0, cg_end = 0; ///< its non-zeros in ChannelwiseTP::cg
  double coefficient = 0;       ///< c_o, also folded into the cg values
};

class ChannelwiseTP {
 public:
  /// mace-torch's construction: every (irreps1 entry, irreps2 entry, l3 in l1 (x) l2) whose
  /// irrep is in `target`, outputs sorted as e3nn's Irreps.sort() does. irreps2 entries must
  /// have multiplicity 1 (spherical harmonics); throws InputError otherwise or when an l
  /// exceeds kMaxL (naming the irreps and the limit).
  static ChannelwiseTP mace(const Irreps& irreps1, const Irreps& irreps2, const Irreps& target);

  Irreps irreps1, irreps2, irreps_out;
  std::vector<TPInstruction> instructions;  ///< in output order
  std::vector<CGNonZero> cg;                ///< values multiplied by the instruction's coefficient
  int weight_numel = 0;                     ///< per-edge weights (mace-torch's conv_tp.weight_numel)

  int dim1() const { return irreps1.dim(); }
  int dim2() const { return irreps2.dim(); }
  int dim_out() const { return irreps_out.dim(); }
  /// Largest number of output components one channel u receives (sum of 2 l3 + 1 over the
  /// instructions): the accumulator each thread of the fused kernels holds.
  int out_per_channel() const;
};

}  // namespace fastmlip::kernels

// SPDX-License-Identifier: MIT
#pragma once
/// \file Symmetric generalised coupling (U) tensors for MACE's symmetric contraction, built
/// in C++ so that a model can be trained from scratch without mace-torch.
///
/// For coupling irreps V (one block per copy, e.g. "0e+1o+2e+3o", num_ell = V.dim()), an
/// output irrep L and a correlation order nu, U is a tensor U[m, i_1, .., i_nu, k] with
///  - equivariance: sum_j U[m, j_1..j_nu, k] D(g)_{j_1 i_1} .. D(g)_{j_nu i_nu}
///                  = sum_m' D_L(g)_{m m'} U[m', i_1..i_nu, k]   for every g in O(3)
///    (D = wigner_D(V, g), parities included), i.e. x -> U (x (x) .. (x) x) is equivariant;
///  - symmetry under every permutation of i_1..i_nu (the contraction only ever sees the
///    symmetric product x (x) .. (x) x);
///  - columns k = 0..K-1 that are a basis of the whole space of such tensors, orthonormal in
///    the sense  sum_{i_1..i_nu} U[m, i, k] U[m', i, k'] = delta_mm' delta_kk'.
/// K is the dimension of Hom_O(3)(Sym^nu V, L), which the character formula gives
/// independently (symmetric_coupling_dimension); the construction checks it reaches it.
///
/// K is in general smaller than the K of mace-torch's U_matrix_nu buffers: mace-torch stacks
/// every ordered coupling path ((l1 l2) l12 l3 ..) -> L without symmetrising, so many of its
/// columns coincide or vanish once contracted with the symmetric x (x) .. (x) x (for
/// 0e+1o+2e+3o -> 0e at nu = 3: 23 columns of rank 8). Both bases give the same set of
/// functions of x; ours has no redundant weights. See docs/equivariant-conventions.md,
/// "Symmetric coupling tensors", for the construction and the normalisation.
#include <vector>

#include "math/irreps.hpp"

namespace fastmlip {

/// Highest correlation order the coupling bases support.
inline constexpr int kMaxCouplingOrder = 4;

/// A coupling basis in the dense row-major layout of mace-torch's U_matrix_nu buffers, which
/// kernels::SymmetricContraction::from_mace reads: shape [2L+1, num_ell, .., num_ell, K] with
/// nu num_ell axes, the leading axis absent when L = 0 (mace-torch squeezes it).
struct CouplingBasis {
  std::vector<double> U;
  std::vector<int> shape;
  /// Number of basis tensors K (the last axis).
  int num_params() const { return shape.empty() ? 0 : shape.back(); }
};

/// The dimension K of the space of permutation-symmetric tensors coupling nu copies of
/// `coupling_irreps` equivariantly to `out`, by the character formula
///   K = (1/2) sum_{eps = +-1} int_SO(3) chi_{Sym^nu V}(eps R) chi_L(eps R) dR,
/// integrated exactly. Same argument checks as symmetric_coupling_basis.
int symmetric_coupling_dimension(const Irreps& coupling_irreps, const Irrep& out, int nu);

/// A basis of the permutation-symmetric, O(3)-equivariant coupling tensors of order nu from
/// `coupling_irreps` (each copy of each entry is one block, laid out as Irreps lays out a
/// feature) to `out`, as documented above. Deterministic: candidates and Gram-Schmidt run in a
/// fixed order, so the same inputs give the same basis. Host only, built once per model (the
/// MACE-MP shapes take about a millisecond at nu = 3). K = 0 (shape [.., 0], no values) when
/// no such tensor exists, e.g. "0e+1o" -> 1e at every nu (no pseudovector is a polynomial
/// in a scalar s and a vector v).
/// Throws InputError for nu outside 1..kMaxCouplingOrder, empty coupling irreps, an l above
/// kMaxL, or a dense U of more than 2^28 values; Error if the construction falls short of the
/// character formula (a bug, never expected).
CouplingBasis symmetric_coupling_basis(const Irreps& coupling_irreps, const Irrep& out, int nu);

/// Every U of a SymmetricContraction in the layout of from_mace: U[o][nu-1] and shapes[o][nu-1]
/// for output entry o of irreps_out and nu = 1..correlation, coupling one copy of each entry of
/// irreps_in (as mace-torch's coupling_irreps). Usage:
///   auto b = symmetric_contraction_basis(in, out, corr);
///   auto sc = kernels::SymmetricContraction::from_mace(in, out, corr, b.U, b.shapes);
/// with weights of shape [num_elements, shapes[o][nu-1].back(), channels]. Throws InputError
/// as symmetric_coupling_basis, and when some order nu admits no tensor for an output irrep
/// (from_mace needs K >= 1), naming it.
struct SymmetricContractionBasis {
  std::vector<std::vector<std::vector<double>>> U;
  std::vector<std::vector<std::vector<int>>> shapes;
};
SymmetricContractionBasis symmetric_contraction_basis(const Irreps& irreps_in, const Irreps& irreps_out,
                                                      int correlation);

}  // namespace fastmlip

// SPDX-License-Identifier: MIT
#pragma once
/// \file MACE's symmetric contraction (seed section 4.3, Algorithm 3), as data.
///
/// For a node of element e and channel c with features x_i (i over the "ells": the 2l+1
/// components of every irrep of the node's features, num_ell in all), each output irrep L has
///
///   B[c, m] = sum_{nu=1..corr} sum_{i_1..i_nu} sum_k U_nu[m, i_1..i_nu, k] W_nu[e, k, c] x_{i_1} .. x_{i_nu}
///
/// (mace-torch evaluates this Horner-style over dense U; mace-torch's U_matrix_nu buffers
/// and weights are read unchanged). Three exact rewrites make it cheap:
/// 1. x_{i_1}..x_{i_nu} is symmetric in its indices, so U is summed over the permutations of
///    each sorted tuple t = (i_1 <= .. <= i_nu): one term per monomial instead of nu! terms.
/// 2. Each monomial is its prefix monomial times one x (the tuples form a prefix tree), so all
///    monomials of a channel cost one multiplication each: the Horner sharing.
/// 3. sum_k U[m, t, k] W[e, k, c] is folded per element ahead of time into one coefficient per
///    (element, entry (m, t), channel): only U's non-zeros survive.
/// The backward pass walks the prefix tree in reverse (exact product rule).
#include <cstddef>
#include <vector>

#include "math/irreps.hpp"

namespace fastmlip::kernels {

/// A monomial x_{i_1}..x_{i_d}: parent is the monomial of its first d-1 indices (-1 for d=1).
struct SCMonomial {
  int degree = 0;
  int parent = -1;
  int last = 0;
};

/// One non-zero of a permutation-summed U: output component m of contraction `contraction`,
/// monomial `monomial`, at correlation order nu; usym holds its K_nu values.
struct SCEntry {
  int contraction = 0;
  int nu = 0;
  int m = 0;
  int monomial = 0;
  int usym_offset = 0;  ///< into SymmetricContraction::usym
};

class SymmetricContraction {
 public:
  /// `irreps_in`: the node features entering the product (every entry with the same
  /// multiplicity C, e.g. "128x0e+128x1o+128x2e+128x3o"); `irreps_out`: the product's output
  /// (each entry C x L); `U[o][nu-1]`: mace-torch's U_matrix_nu of contraction o, dense
  /// row-major [2L+1, num_ell^nu, K] (the leading axis absent when L = 0, as mace-torch
  /// stores it), with its `u_shapes[o][nu-1]`. Throws InputError on any mismatch, naming the
  /// contraction, nu and the shape.
  static SymmetricContraction from_mace(const Irreps& irreps_in, const Irreps& irreps_out, int correlation,
                                        const std::vector<std::vector<std::vector<double>>>& U,
                                        const std::vector<std::vector<std::vector<int>>>& u_shapes);

  Irreps irreps_in, irreps_out;
  int channels = 0;
  int num_ell = 0;
  int correlation = 0;
  std::vector<SCMonomial>
      monomials;  ///< the sorted tuples some entry reads, with their prefixes; parents first
  std::vector<SCEntry> entries;       ///< non-zeros of all contractions and orders
  std::vector<double> usym;           ///< K_nu values per entry
  std::vector<std::vector<int>> num_params;  ///< K_nu per contraction o and nu
  std::vector<int> ell_offset;        ///< flat-feature start of ell i's channel 0 (e3nn layout)
  std::vector<int> ell_stride;        ///< flat-feature stride between channels of ell i (2l+1)

  int dim_in() const { return irreps_in.dim(); }
  int dim_out() const { return irreps_out.dim(); }
  /// Start of contraction o's [C x (2L+1)] block in an output row.
  int out_offset(int o) const { return irreps_out.offsets()[o]; }

  /// Folds weights into coefficients: W[o][nu-1] is mace-torch's weight of contraction o and
  /// order nu, [num_elements, K_nu, C] row-major. Returns coef[(e * num_entries + g) * C + c].
  std::vector<double> fold(const std::vector<std::vector<std::vector<double>>>& W, int num_elements) const;

  // The weights as one flat array (the device kernels' form, SymmetricContractionKokkos): every
  // W[o][nu-1] in turn, o major and nu minor, each [num_elements, K_nu, C] row-major.

  /// Index of the first of W[o][nu-1]'s values in the flat array.
  std::size_t weight_offset(int o, int nu, int num_elements) const;
  /// Length of the flat array.
  std::size_t num_weights(int num_elements) const;
  /// W as the flat array. InputError naming the contraction, order and shape on a mismatch.
  std::vector<double> flatten_weights(const std::vector<std::vector<std::vector<double>>>& W,
                                      int num_elements) const;

 private:
  void check_weights(const std::vector<std::vector<std::vector<double>>>& W, int num_elements,
                     const char* fn) const;

 public:
  /// The adjoint of fold: grad_W[o][nu-1][e, k, c] = sum_g usym[g, k] grad_coef[e, g, c].
  std::vector<std::vector<std::vector<double>>> unfold_gradient(const std::vector<double>& grad_coef,
                                                                int num_elements) const;
};

}  // namespace fastmlip::kernels

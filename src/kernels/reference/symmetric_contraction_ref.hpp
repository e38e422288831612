// SPDX-License-Identifier: MIT
#pragma once
/// \file Naive reference of the symmetric contraction: the defining sum over every index
/// tuple and parameter, with mace-torch's dense U and W, no symmetry, no folding.
#include <cstddef>
#include <vector>

#include "kernels/symmetric_contraction.hpp"

namespace fastmlip::kernels::reference {

/// x: [nodes, dim_in] (e3nn layout), species: element index per node, out: [nodes, dim_out].
/// U and W as in SymmetricContraction::from_mace and fold.
template <class T>
void compute_symmetric_contraction(const SymmetricContraction& sc, const std::vector<std::vector<std::vector<double>>>& U,
                                   const std::vector<std::vector<std::vector<double>>>& W, std::size_t nodes,
                                   const int* species, const T* x, T* out) {
  const int C = sc.channels, L = sc.num_ell, din = sc.dim_in(), dout = sc.dim_out();
  for (std::size_t n = 0; n < nodes; ++n) {
    const int e = species[n];
    for (std::size_t o = 0; o < sc.irreps_out.size(); ++o) {
      const int M = sc.irreps_out[o].ir.dim();
      for (int c = 0; c < C; ++c) {
        for (int m = 0; m < M; ++m) {
          double b = 0;
          for (int nu = 1; nu <= sc.correlation; ++nu) {
            const int K = sc.num_params[o][nu - 1];
            long long tuples = 1;
            for (int a = 0; a < nu; ++a) {
              tuples *= L;
            }
            for (long long t = 0; t < tuples; ++t) {
              double prod = 1;
              long long rest = t;
              for (int a = 0; a < nu; ++a) {
                const int i = static_cast<int>(rest % L);
                rest /= L;
                prod *= x[n * din + sc.ell_offset[i] + c * sc.ell_stride[i]];
              }
              // t enumerates (i_1..i_nu) with i_nu fastest when read back to front: rebuild
              // the row-major index of U from the same digits.
              long long row = 0;
              rest = t;
              std::vector<int> idx(nu);
              for (int a = 0; a < nu; ++a) {
                idx[a] = static_cast<int>(rest % L);
                rest /= L;
              }
              for (int a = 0; a < nu; ++a) {
                row = row * L + idx[a];
              }
              const auto& u = U[o][nu - 1];
              const auto& w = W[o][nu - 1];
              for (int k = 0; k < K; ++k) {
                b += u[(static_cast<long long>(m) * tuples + row) * K + k] * w[(static_cast<long long>(e) * K + k) * C + c] *
                     prod;
              }
            }
          }
          out[n * dout + sc.out_offset(static_cast<int>(o)) + c * M + m] = static_cast<T>(b);
        }
      }
    }
  }
}

}  // namespace fastmlip::kernels::reference

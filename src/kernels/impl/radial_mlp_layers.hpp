// SPDX-License-Identifier: MIT
#pragma once
/// \file The radial MLP as one library GEMM per layer, with the activations as element-wise
/// Kokkos launches between them: RadialMLPKokkos' 'cuda' backend, cuBLAS on a GPU.
///
/// A layer is [edges, n_l] x [n_l, n_l+1]: a few dozen columns and up to millions of rows, the
/// shape a vendor GEMM runs near the GPU's peak. The tiled functors of radial_mlp_impl.hpp
/// (one team per 32 edges, the hidden layers recomputed in team scratch) were the slowest launch
/// of a GPU step in the fourth session's ncu profile (benchmarks/README.md).
///
/// The rows stay in the model's row-major layout. A row-major [rows, cols] matrix with row
/// stride ld is the column-major [cols, rows] matrix with leading dimension ld, so
///   forward   Y = X W    is  Y^T = W^T X^T:  gemm(N, N, m = n_l+1, n = edges, k = n_l, A = W, B = X)
///   backward  G = D W^T  is  G^T = W D^T:    gemm(T, N, m = n_l, n = edges, k = n_l+1, A = W, B = D)
/// with W (row-major [n_l, n_l+1]) the column-major [n_l+1, n_l] matrix of leading dimension n_l+1.
///
/// The Gemm policy is BLAS's column-major xGEMM with alpha = 1:
///   gemm(trans_a, trans_b, m, n, k, A, lda, B, ldb, beta, C, ldc):  C = op(A) op(B) + beta C,
/// op(A) m x k, op(B) k x n. On a GPU it is cuBLAS (kernels/cuda/cublas_gemm.hpp); CPU CI runs
/// this driver with the host's reference BLAS (tests/kernels/test_radial_mlp_layers.cpp), so the
/// arguments above are checked against the standard's meaning without a GPU.
///
/// Working storage, reused from call to call: every hidden pre-activation, [edges, sum of hidden
/// widths] (the backward's SiLU' reads them), and two [edges, widest hidden] buffers. reverse()
/// recomputes the forward, as the functors do, so it does not need compute()'s result.
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/radial_mlp_impl.hpp"

namespace fastmlip::kernels::impl {

/// The activation between two layers, over a block of `cols` columns of `rows` rows.
template <class ExecSpace, class R>
struct RadialMLPActivation {
  struct TagForward {};   ///< h = cst silu(z)
  struct TagBackward {};  ///< g *= cst silu'(z): the gradient with respect to z, in place
  const R* m_z = nullptr;
  std::int64_t m_ldz = 0;
  R* m_h = nullptr;
  std::int64_t m_ldh = 0;
  std::int64_t m_cols = 1;
  R m_cst = 1;

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, std::int64_t i) const {
    const std::int64_t e = i / m_cols, j = i % m_cols;
    m_h[e * m_ldh + j] = m_cst * silu(m_z[e * m_ldz + j]);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagBackward, std::int64_t i) const {
    const std::int64_t e = i / m_cols, j = i % m_cols;
    m_h[e * m_ldh + j] *= m_cst * silu_derivative(m_z[e * m_ldz + j]);
  }
};

template <class ExecSpace, class R, class Gemm>
class RadialMLPLayers {
 public:
  using Matrix = Kokkos::View<R**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const R**, Kokkos::LayoutRight, ExecSpace>;
  using ConstVector = Kokkos::View<const R*, ExecSpace>;

  /// widths n_0 .. n_L+1 (validated by the caller), cst the activation's constant.
  RadialMLPLayers(std::vector<int> widths, R cst, Gemm gemm)
      : m_widths(std::move(widths)), m_cst(cst), m_gemm(std::move(gemm)) {
    std::size_t w = 0;
    int z = 0;
    for (int l = 0; l + 1 < static_cast<int>(m_widths.size()); ++l) {
      m_w_off.push_back(w);
      w += static_cast<std::size_t>(m_widths[l]) * static_cast<std::size_t>(m_widths[l + 1]);
      m_z_off.push_back(z);
      if (l + 2 < static_cast<int>(m_widths.size())) {  // a hidden layer's output
        z += m_widths[l + 1];
        m_max_hidden = std::max(m_max_hidden, m_widths[l + 1]);
      }
    }
    m_hidden_total = z;
  }

  int num_layers() const { return static_cast<int>(m_widths.size()) - 1; }

  /// out = MLP(in). W: every layer's [n_l, n_l+1], row-major, pre-scaled by 1/sqrt(n_l), one
  /// after the other (RadialMLPKokkos' weight store). Asynchronous on a device.
  void compute(const ConstVector& W, const ConstMatrix& in, const Matrix& out) const {
    const int E = static_cast<int>(in.extent(0));
    if (E == 0) {
      return;
    }
    const Rows x = hidden_layers(W, in, E);
    const int l = num_layers() - 1;
    m_gemm(false, false, m_widths[l + 1], E, m_widths[l], W.data() + m_w_off[l], m_widths[l + 1], x.p, x.ld,
           R(0), out.data(), row_stride(out));
  }

  /// grad_in = d sum(out * grad_out) / d in.
  void reverse(const ConstVector& W, const ConstMatrix& in, const ConstMatrix& grad_out,
               const Matrix& grad_in) const {
    const int E = static_cast<int>(in.extent(0));
    if (E == 0) {
      return;
    }
    hidden_layers(W, in, E);
    Rows d{grad_out.data(), row_stride(grad_out)};
    if (num_layers() == 1) {
      m_gemm(true, false, m_widths[0], E, m_widths[1], W.data(), m_widths[1], d.p, d.ld, R(0), grad_in.data(),
             row_stride(grad_in));
      return;
    }
    const R* const z = m_z.get(E, m_hidden_total).data();  // hidden_layers' storage, same size
    // The forward's activation buffer is free again: the two buffers take turns as the
    // gradient read and the gradient written.
    R* const buffers[2] = {m_a.get(E, m_max_hidden).data(), m_b.get(E, m_max_hidden).data()};
    for (int l = num_layers() - 1; l >= 0; --l) {
      const int K = m_widths[l], J = m_widths[l + 1];
      if (l == 0) {
        m_gemm(true, false, K, E, J, W.data() + m_w_off[l], J, d.p, d.ld, R(0), grad_in.data(),
               row_stride(grad_in));
        break;
      }
      R* const g = d.p == buffers[0] ? buffers[1] : buffers[0];
      m_gemm(true, false, K, E, J, W.data() + m_w_off[l], J, d.p, d.ld, R(0), g, m_max_hidden);
      // g is d loss / d h_l, h_l = cst silu(z_l-1): the gradient with respect to z_l-1.
      activate<typename Act::TagBackward>(z + m_z_off[l - 1], g, m_max_hidden, K, E);
      d = {g, m_max_hidden};
    }
  }

 private:
  using Act = RadialMLPActivation<ExecSpace, R>;
  struct Rows {
    const R* p;
    int ld;
  };

  template <class V>
  static int row_stride(const V& v) {
    return static_cast<int>(std::max<std::size_t>(v.stride(0), std::max<std::size_t>(v.extent(1), 1)));
  }

  /// Runs the hidden layers on `in` (pre-activations into m_z, the last activation into m_a)
  /// and returns the last layer's input: `in` itself for a one-layer MLP.
  Rows hidden_layers(const ConstVector& W, const ConstMatrix& in, int E) const {
    Rows x{in.data(), row_stride(in)};
    if (m_hidden_total == 0) {
      return x;
    }
    R* const z = m_z.get(E, m_hidden_total).data();
    R* const h = m_a.get(E, m_max_hidden).data();
    for (int l = 0; l + 1 < num_layers(); ++l) {
      const int K = m_widths[l], J = m_widths[l + 1];
      m_gemm(false, false, J, E, K, W.data() + m_w_off[l], J, x.p, x.ld, R(0), z + m_z_off[l],
             m_hidden_total);
      // h_l+1 overwrites h_l, which the product just read.
      activate<typename Act::TagForward>(z + m_z_off[l], h, m_max_hidden, J, E);
      x = {h, m_max_hidden};
    }
    return x;
  }

  /// The activation (TagForward: h = cst silu(z)) or its reverse (TagBackward: h *= cst
  /// silu'(z)) over `cols` columns of E rows; z is a block of the pre-activations.
  template <class Tag>
  void activate(const R* z, R* h, int ldh, int cols, int E) const {
    Act f;
    f.m_z = z;
    f.m_ldz = m_hidden_total;
    f.m_h = h;
    f.m_ldh = ldh;
    f.m_cols = cols;
    f.m_cst = m_cst;
    const bool forward = std::is_same_v<Tag, typename Act::TagForward>;
    Kokkos::parallel_for(forward ? "fastmlip::radial_mlp::layers_activation"
                                 : "fastmlip::radial_mlp::layers_activation_reverse",
                         Kokkos::RangePolicy<ExecSpace, Tag, Kokkos::IndexType<std::int64_t>>(
                             0, static_cast<std::int64_t>(E) * static_cast<std::int64_t>(cols)),
                         f);
  }

  std::vector<int> m_widths;
  std::vector<std::size_t> m_w_off;
  std::vector<int> m_z_off;
  int m_hidden_total = 0;
  int m_max_hidden = 0;
  R m_cst;
  Gemm m_gemm;
  mutable GrowBuffer<R, ExecSpace> m_z{"fastmlip::radial_mlp::layers_z"},
      m_a{"fastmlip::radial_mlp::layers_a"}, m_b{"fastmlip::radial_mlp::layers_b"};
};

}  // namespace fastmlip::kernels::impl

// SPDX-License-Identifier: MIT
#pragma once
/// \file The radial MLP on host execution spaces as dense products (math/simd_kernels.hpp).
///
/// Every stage of the MLP is a product of an [edges, n_l] matrix with a weight matrix, and the
/// weight gradient of layer l is dW_l = H_l^T D_l, a sum over edges of outer products of the
/// layer's input H_l and the gradient D_l of its output. Done per weight and per edge (the
/// device functors' TagReverseWeights) that sum re-reads every edge's row, and recomputes the
/// activation, once per weight; as one GEMM each value is loaded once per register block.
///
/// The edges are cut into chunks of kChunk rows, one per team of one thread: a chunk's
/// pre-activations, sigmoids and activations stay in team scratch from the forward to the
/// backward, so no exp is evaluated twice. Each chunk writes its own weight gradient slot and
/// the caller sums the slots in chunk order, which keeps the result independent of the thread
/// count.
///
/// Dual numbers (the trainer's double backward) run as planes: a value and a tangent matrix
/// of the plain type R. For a product of duals, (A + eps A')(W + eps W') = AW + eps (A'W + AW'),
/// so each product is three real GEMMs; for the activation a = cst silu(z),
/// a' = cst silu'(z) z', and the backward's D <- cst silu'(z) D has the tangent
/// cst (silu'(z) D' + silu''(z) z' D), with silu' = s (1 + z (1 - s)) and
/// silu'' = s (1 - s) (2 + z (1 - 2 s)), s = sigmoid(z).
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <type_traits>

#include "math/simd_kernels.hpp"

namespace fastmlip::kernels::impl {

/// A matrix of R as one or two planes (value, and tangent for dual numbers), rows of `ld`
/// values. `d == nullptr` is a zero tangent.
template <class R>
struct Planes {
  R* v = nullptr;
  R* d = nullptr;
  int ld = 0;
};

template <class ExecSpace, class R>
struct RadialMLPGemmFunctor {
  static_assert(std::is_floating_point_v<R>, "RadialMLPGemmFunctor: planes hold float or double");
  static constexpr int kChunk = 256;  ///< edges per team: a few hundred rows keep the scratch in L2
  struct TagForward {};
  struct TagReverse {};
  using HostView = Kokkos::View<R*, Kokkos::HostSpace>;

  int m_layers = 0;
  int m_widths[17] = {};         ///< n_0 .. n_L+1 (at most 16 layers, checked by the driver)
  std::size_t m_w_off[17] = {};  ///< start of each layer in the weight planes
  int m_hidden_total = 0;
  int m_max_width = 0;  ///< widest of n_0 .. n_L (inputs of the layers)
  bool m_dual = false;  ///< whether the weights and data have tangent planes
  R m_cst = 1;
  HostView m_Wv, m_Wd;    ///< W_l pre-scaled, [n_l][n_l+1]
  HostView m_WTv, m_WTd;  ///< the same transposed, [n_l+1][n_l]

  // One call's data (set by the driver before a launch).
  int m_edges = 0;
  Planes<const R> m_in, m_grad_out;
  Planes<R> m_out, m_grad_in;
  R* m_grad_w = nullptr;  ///< [chunks][planes * weights]: each chunk's weight gradient, or null

  int planes() const { return m_dual ? 2 : 1; }
  std::size_t num_weights() const { return m_w_off[m_layers]; }
  int num_chunks() const { return (m_edges + kChunk - 1) / kChunk; }
  /// Team scratch of one chunk, in values of R (see chunk_buffers).
  std::size_t scratch_values() const {
    const std::size_t p = planes();
    return (static_cast<std::size_t>(2 * p + 1) * m_hidden_total + 3 * p * m_max_width) * kChunk;
  }

  /// A chunk's pointers into team scratch: per hidden layer l (offset z_l = sum of earlier
  /// widths) the pre-activation Z_l, its sigmoid S_l and the activation H_l+1, each [c][n_l+1];
  /// then two [c][max_width] gradient buffers and one [max_width][c] transpose buffer.
  struct Buffers {
    R* zv;
    R* zd;
    R* s;
    R* hv;
    R* hd;
    Planes<R> d0, d1, t;
  };
  Buffers chunk_buffers(R* base) const {
    const std::size_t hid = static_cast<std::size_t>(m_hidden_total) * kChunk;
    const std::size_t wide = static_cast<std::size_t>(m_max_width) * kChunk;
    Buffers b{};
    R* p = base;
    const auto take = [&p](std::size_t n) {
      R* q = p;
      p += n;
      return q;
    };
    b.zv = take(hid);
    b.zd = m_dual ? take(hid) : nullptr;
    b.s = take(hid);
    b.hv = take(hid);
    b.hd = m_dual ? take(hid) : nullptr;
    for (Planes<R>* q : {&b.d0, &b.d1, &b.t}) {
      q->v = take(wide);
      q->d = m_dual ? take(wide) : nullptr;
    }
    return b;
  }

  /// Y (+)= X M for planes: Y.v (+)= X.v M.v and Y.d (+)= X.d M.v + X.v M.d (absent planes are
  /// zero). M is row-major [K][J] without padding.
  static void dual_gemm(Planes<const R> X, int rows, int K, const R* Mv, const R* Md, int J, Planes<R> Y,
                        bool accumulate) {
    const auto& k = math::simd_kernels<R>();
    k.gemm(X.v, rows, X.ld, K, Mv, J, Y.v, Y.ld, accumulate, nullptr);
    if (Y.d == nullptr) {
      return;
    }
    bool acc = accumulate;
    if (X.d != nullptr) {
      k.gemm(X.d, rows, X.ld, K, Mv, J, Y.d, Y.ld, acc, nullptr);
      acc = true;
    }
    if (Md != nullptr) {
      k.gemm(X.v, rows, X.ld, K, Md, J, Y.d, Y.ld, acc, nullptr);
      acc = true;
    }
    if (!acc) {
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < J; ++j) {
          Y.d[static_cast<std::size_t>(r) * Y.ld + j] = R(0);
        }
      }
    }
  }

  static Planes<const R> as_const(Planes<R> p) { return {p.v, p.d, p.ld}; }
  static Planes<const R> rows_of(Planes<const R> p, int e0) {
    const std::size_t off = static_cast<std::size_t>(e0) * p.ld;
    return {p.v + off, p.d ? p.d + off : nullptr, p.ld};
  }
  static Planes<R> rows_of(Planes<R> p, int e0) {
    const std::size_t off = static_cast<std::size_t>(e0) * p.ld;
    return {p.v + off, p.d ? p.d + off : nullptr, p.ld};
  }

  /// The hidden layers of c edges from H_0 = in: fills Z, S and H of every hidden layer.
  /// Returns the input of the last layer.
  Planes<const R> forward_hidden(Planes<const R> in, int c, const Buffers& b) const {
    const auto& k = math::simd_kernels<R>();
    Planes<const R> h = in;
    std::size_t z = 0;
    for (int l = 0; l + 1 < m_layers; ++l) {
      const int a = m_widths[l], n = m_widths[l + 1];
      const std::size_t m = static_cast<std::size_t>(c) * n;
      R* zv = b.zv + z * kChunk;
      R* s = b.s + z * kChunk;
      R* hv = b.hv + z * kChunk;
      R* zd = m_dual ? b.zd + z * kChunk : nullptr;
      R* hd = m_dual ? b.hd + z * kChunk : nullptr;
      dual_gemm(h, c, a, &m_Wv(m_w_off[l]), m_dual ? &m_Wd(m_w_off[l]) : nullptr, n, {zv, zd, n}, false);
      k.silu_forward(zv, s, hv, m);
      const R cst = m_cst;
      for (std::size_t i = 0; i < m; ++i) {
        hv[i] *= cst;
      }
      if (m_dual) {
        for (std::size_t i = 0; i < m; ++i) {
          hd[i] = cst * (s[i] * (R(1) + zv[i] * (R(1) - s[i]))) * zd[i];
        }
      }
      h = {hv, hd, n};
      z += n;
    }
    return h;
  }

  /// dst [n][c] = src^T for src [c][n] (both planes).
  static void transpose(Planes<const R> src, int c, int n, Planes<R> dst) {
    for (int p = 0; p < 2; ++p) {
      const R* s = p == 0 ? src.v : src.d;
      R* d = p == 0 ? dst.v : dst.d;
      if (s == nullptr || d == nullptr) {
        continue;
      }
      for (int r = 0; r < c; ++r) {
        for (int i = 0; i < n; ++i) {
          d[static_cast<std::size_t>(i) * c + r] = s[static_cast<std::size_t>(r) * src.ld + i];
        }
      }
    }
  }

  /// This chunk's weight gradient of layer l: slot = H^T D for H [c][a], D [c][b].
  void weight_gradient(int chunk, int l, Planes<const R> h, int c, Planes<const R> d,
                       const Buffers& buf) const {
    const int a = m_widths[l], n = m_widths[l + 1];
    R* slot = m_grad_w + static_cast<std::size_t>(chunk) * planes() * num_weights();
    Planes<R> t = buf.t;
    t.ld = c;
    if (!m_dual || h.d == nullptr) {
      t.d = nullptr;
    }
    transpose(h, c, a, t);
    // D is the "weight" operand of this product: H^T D has the tangent H'^T D + H^T D'.
    Planes<R> y{slot + m_w_off[l], m_dual ? slot + num_weights() + m_w_off[l] : nullptr, n};
    dual_gemm(as_const(t), a, c, d.v, d.d, n, y, false);
  }

  /// A team's chunk: its index, first edge, number of edges and scratch buffers.
  struct Chunk {
    int index, e0, c;
    Buffers b;
  };
  template <class Member>
  Chunk chunk_of(const Member& team) const {
    Chunk k;
    k.index = team.league_rank();
    k.e0 = k.index * kChunk;
    k.c = m_edges - k.e0 < kChunk ? m_edges - k.e0 : kChunk;
    k.b = chunk_buffers(static_cast<R*>(team.team_scratch(1).get_shmem(sizeof(R) * scratch_values())));
    return k;
  }

  /// The last layer (no activation) of c edges from its input h into m_out's rows from e0.
  void forward_last(Planes<const R> h, int c, int e0) const {
    const int l = m_layers - 1;
    dual_gemm(h, c, m_widths[l], &m_Wv(m_w_off[l]), m_dual ? &m_Wd(m_w_off[l]) : nullptr, m_widths[l + 1],
              rows_of(m_out, e0), false);
  }

  // Host only (the driver launches this functor on host spaces): no KOKKOS_INLINE_FUNCTION.
  void operator()(TagForward,
                  const typename Kokkos::TeamPolicy<ExecSpace, TagForward>::member_type& team) const {
    const Chunk k = chunk_of(team);
    forward_last(forward_hidden(rows_of(m_in, k.e0), k.c, k.b), k.c, k.e0);
  }

  // The backward of a chunk: D = G W_L^T, then per hidden layer, last first,
  // D <- cst silu'(Z_l) D, dW_l = H_l^T D, D <- D W_l^T; grad_in is the last D.
  void operator()(TagReverse,
                  const typename Kokkos::TeamPolicy<ExecSpace, TagReverse>::member_type& team) const {
    const Chunk k = chunk_of(team);
    const int chunk = k.index, e0 = k.e0, c = k.c;
    const Buffers& b = k.b;
    const Planes<const R> in = rows_of(m_in, e0);
    const Planes<const R> g = rows_of(m_grad_out, e0);
    Planes<const R> h = forward_hidden(in, c, b);
    int l = m_layers - 1;
    if (m_out.v != nullptr) {
      forward_last(h, c, e0);
    }
    if (m_grad_w != nullptr) {
      weight_gradient(chunk, l, h, c, g, b);
    }
    Planes<R> d = b.d0, next = b.d1;
    // The last layer's product goes straight to grad_in when there is no hidden layer.
    Planes<R> target = l == 0 ? rows_of(m_grad_in, e0) : Planes<R>{d.v, d.d, m_widths[l]};
    dual_gemm(g, c, m_widths[l + 1], &m_WTv(m_w_off[l]), m_dual ? &m_WTd(m_w_off[l]) : nullptr, m_widths[l],
              target, false);
    d = target;
    std::size_t z = static_cast<std::size_t>(m_hidden_total);
    for (l = m_layers - 2; l >= 0; --l) {
      const int a = m_widths[l], n = m_widths[l + 1];
      z -= n;
      const std::size_t m = static_cast<std::size_t>(c) * n;
      const R* zv = b.zv + z * kChunk;
      const R* s = b.s + z * kChunk;
      const R cst = m_cst;
      if (m_dual) {
        const R* zd = b.zd + z * kChunk;
        for (std::size_t i = 0; i < m; ++i) {
          const R si = s[i], zi = zv[i];
          const R d1 = si * (R(1) + zi * (R(1) - si));
          const R d2 = si * (R(1) - si) * (R(2) + zi * (R(1) - R(2) * si));
          d.d[i] = cst * (d1 * d.d[i] + d2 * zd[i] * d.v[i]);
          d.v[i] = cst * d1 * d.v[i];
        }
      } else {
        for (std::size_t i = 0; i < m; ++i) {
          const R si = s[i];
          d.v[i] = cst * (si * (R(1) + zv[i] * (R(1) - si))) * d.v[i];
        }
      }
      const Planes<const R> h_l =
          l == 0 ? in
                 : Planes<const R>{b.hv + (z - a) * kChunk, m_dual ? b.hd + (z - a) * kChunk : nullptr, a};
      if (m_grad_w != nullptr) {
        weight_gradient(chunk, l, h_l, c, as_const(d), b);
      }
      Planes<R> dst = l == 0 ? rows_of(m_grad_in, e0) : Planes<R>{next.v, next.d, a};
      dual_gemm(as_const(d), c, n, &m_WTv(m_w_off[l]), m_dual ? &m_WTd(m_w_off[l]) : nullptr, a, dst, false);
      next = d;
      d = dst;
    }
  }
};

}  // namespace fastmlip::kernels::impl

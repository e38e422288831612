// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of the radial MLP. Forward: a tiled GEMM per team (see TagForwardTile).
/// Input gradient (TagReverseTile): the same tiling, recomputing the tile's hidden layers in
/// team scratch (hidden widths are small) and then running the transposed GEMMs backwards.
/// With the weight gradient (TagReverse): one thread per edge recomputes the hidden
/// activations and keeps every layer's pre-activation and its gradient in caller-provided
/// buffers; the weight gradient is then a plain sum over edges.
#include <Kokkos_Core.hpp>

#include "core/kokkos_compat.hpp"
#include "math/dual.hpp"

namespace fastmlip::kernels::impl {

template <class T>
KOKKOS_INLINE_FUNCTION T silu(T z) {
  return z / (T(1) + kmath::exp(-z));
}
template <class T>
KOKKOS_INLINE_FUNCTION T silu_derivative(T z) {
  const T s = T(1) / (T(1) + kmath::exp(-z));
  return s * (T(1) + z * (T(1) - s));
}

template <class ExecSpace, class T>
struct RadialMLPFunctor {
  static constexpr int kMaxHidden = 256;       ///< widest hidden layer
  static constexpr int kMaxHiddenTotal = 1024;  ///< sum of hidden widths (per-edge pre-activations)
  static constexpr int kTile = 32;      ///< edges per team in the tiled passes
  struct TagForwardTile {};
  struct TagReverseTile {};
  struct TagReverse {};
  struct TagReverseWeights {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  Kokkos::View<const T*, ExecSpace> m_W;          // all layers, pre-scaled by 1/sqrt(n_l)
  Kokkos::View<const int*, ExecSpace> m_widths;   // n_0 .. n_L+1
  Kokkos::View<const int*, ExecSpace> m_w_offset; // start of each layer in m_W
  Kokkos::View<const int*, ExecSpace> m_z_offset; // start of each layer's pre-activations in a row of m_z
  int m_layers = 0;
  int m_max_width = 0;  ///< widest layer input (the input and the hidden layers)
  int m_scratch_level = 0;  ///< team scratch level of the tiles (impl::set_team_scratch)
  T m_cst = 1;
  ConstMatrix m_in, m_grad_out;
  Matrix m_out, m_grad_in;
  Matrix m_z;   // [edges, sum of layer outputs]: pre-activations, for the weight gradient
  Matrix m_dz;  // [edges, same]: gradients of the loss with respect to them
  Kokkos::View<T*, ExecSpace> m_grad_W;
  Kokkos::View<const int*, ExecSpace> m_grad_layer;  // layer of each weight index

  // Writes the input of layer l+1 (activation of z) into h.
  KOKKOS_INLINE_FUNCTION void forward_edge(int e, T* h, T* z_store) const {
    const int n0 = m_widths(0);
    for (int i = 0; i < n0; ++i) {
      h[i] = m_in(e, i);
    }
    T tmp[kMaxHidden];
    for (int l = 0; l + 1 < m_layers; ++l) {
      const int a = m_widths(l), b = m_widths(l + 1);
      const T* W = &m_W(m_w_offset(l));
      for (int j = 0; j < b; ++j) {
        T s = 0;
        for (int i = 0; i < a; ++i) {
          s += h[i] * W[i * b + j];
        }
        if (z_store) {
          z_store[m_z_offset(l) + j] = s;
        }
        tmp[j] = m_cst * silu(s);
      }
      for (int j = 0; j < b; ++j) {
        h[j] = tmp[j];
      }
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int e) const {
    T h[kMaxHidden];
    T* z = m_z.extent(0) ? &m_z(e, 0) : nullptr;
    T zl[kMaxHiddenTotal];  // pre-activations kept on the stack when no weight gradient is wanted
    T* zs = z ? z : zl;
    forward_edge(e, h, zs);
    // delta of the last layer's input: sum_j g_j W_L[i, j]
    int l = m_layers - 1;
    T delta[kMaxHidden], next[kMaxHidden];
    {
      const int a = m_widths(l), b = m_widths(l + 1);
      const T* W = &m_W(m_w_offset(l));
      for (int i = 0; i < a; ++i) {
        T s = 0;
        for (int j = 0; j < b; ++j) {
          s += m_grad_out(e, j) * W[i * b + j];
        }
        delta[i] = s;
      }
    }
    for (l = m_layers - 2; l >= 0; --l) {
      const int a = m_widths(l), b = m_widths(l + 1);
      const T* W = &m_W(m_w_offset(l));
      for (int j = 0; j < b; ++j) {
        delta[j] *= m_cst * silu_derivative(zs[m_z_offset(l) + j]);  // now dL/dz_l
        if (m_dz.extent(0)) {
          m_dz(e, m_z_offset(l) + j) = delta[j];
        }
      }
      for (int i = 0; i < a; ++i) {
        T s = 0;
        for (int j = 0; j < b; ++j) {
          s += delta[j] * W[i * b + j];
        }
        next[i] = s;
      }
      for (int i = 0; i < a; ++i) {
        delta[i] = next[i];
      }
    }
    for (int i = 0; i < m_widths(0); ++i) {
      m_grad_in(e, i) = delta[i];
    }
  }

  // The tiled passes: a team takes kTile edges; layer inputs sit in team scratch as
  // [width][kTile], so each weight is loaded once per tile and used for every edge of it,
  // instead of the whole weight matrix streaming through the cache once per edge.

  /// Rows of m_in for edges e0 .. e0+count-1 into A as [n_0][kTile], zero past count.
  template <class Member>
  KOKKOS_INLINE_FUNCTION void load_tile(const Member& team, int e0, int count, T* A) const {
    const auto self = *this;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_widths(0)), [=](int i) {
      for (int t = 0; t < kTile; ++t) {
        A[i * kTile + t] = t < count ? self.m_in(e0 + t, i) : T(0);
      }
    });
  }

  /// One layer of a tile, one thread per output column j: acc[t] = sum_i in[i][t] W[i, j],
  /// handed to store(j, acc). (One column per thread step: wider blocks, measured on x86-64,
  /// spill the accumulators and stop the loop over the tile from vectorising.)
  template <class Member, class Store>
  KOKKOS_INLINE_FUNCTION static void tile_layer(const Member& team, const T* in, int a, const T* W, int b,
                                                const Store& store) {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, b), [=](int j) {
      T acc[kTile];
      for (int t = 0; t < kTile; ++t) {
        acc[t] = T(0);
      }
      for (int i = 0; i < a; ++i) {
        const T* row = in + i * kTile;
        const T w = W[i * b + j];
        for (int t = 0; t < kTile; ++t) {
          acc[t] += row[t] * w;
        }
      }
      store(j, acc);
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagForwardTile,
                                         const typename Kokkos::TeamPolicy<ExecSpace, TagForwardTile>::member_type& team) const {
    const int E = static_cast<int>(m_in.extent(0));
    const int e0 = team.league_rank() * kTile;
    const int count = E - e0 < kTile ? E - e0 : kTile;
    T* A = static_cast<T*>(team.team_scratch(m_scratch_level).get_shmem(sizeof(T) * m_max_width * kTile));
    T* B = static_cast<T*>(team.team_scratch(m_scratch_level).get_shmem(sizeof(T) * m_max_width * kTile));
    const auto self = *this;
    load_tile(team, e0, count, A);
    team.team_barrier();
    for (int l = 0; l < m_layers; ++l) {
      T* out = B;
      const auto hidden = [=](int j, const T* acc) {
        for (int t = 0; t < kTile; ++t) {
          out[j * kTile + t] = self.m_cst * silu(acc[t]);
        }
      };
      const auto last = [=](int j, const T* acc) {
        for (int t = 0; t < count; ++t) {
          self.m_out(e0 + t, j) = acc[t];
        }
      };
      const T* W = &m_W(m_w_offset(l));
      if (l + 1 == m_layers) {
        tile_layer(team, A, m_widths(l), W, m_widths(l + 1), last);
      } else {
        tile_layer(team, A, m_widths(l), W, m_widths(l + 1), hidden);
      }
      team.team_barrier();
      T* tmp = A;
      A = B;
      B = tmp;
    }
  }

  std::size_t tile_shmem_bytes() const { return 2 * sizeof(T) * static_cast<std::size_t>(m_max_width) * kTile + 64; }

  static constexpr int kChunk = 64;  ///< output columns of grad_out staged at a time in the reverse
  int m_hidden_total = 0;            ///< sum of the hidden widths
  std::size_t reverse_tile_shmem_bytes() const {
    const std::size_t rows = 2 * static_cast<std::size_t>(m_max_width) + m_hidden_total + kChunk;
    return sizeof(T) * rows * kTile + 4 * 64;
  }

  // out = sum over tile edges t, rows i: in[i][t] W[i, j] or its transpose, as in the forward:
  // out[c][t] (+)= sum_a in[a][t] * (transposed ? W[c * b + a] : W[a * b + c]), c < n_out.
  template <class Member>
  KOKKOS_INLINE_FUNCTION static void tile_gemm_transposed(const Member& team, const T* in, int a_begin, int a_end,
                                                          const T* W, int b, T* out, int n_out, bool accumulate) {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n_out), [=](int c) {
      T acc[kTile];
      for (int t = 0; t < kTile; ++t) {
        acc[t] = accumulate ? out[c * kTile + t] : T(0);
      }
      const T* w = W + static_cast<std::size_t>(c) * b;
      for (int a = a_begin; a < a_end; ++a) {
        const T* row = in + (a - a_begin) * kTile;
        const T wv = w[a];
        for (int t = 0; t < kTile; ++t) {
          acc[t] += row[t] * wv;
        }
      }
      for (int t = 0; t < kTile; ++t) {
        out[c * kTile + t] = acc[t];
      }
    });
  }

  // grad_in of a tile of kTile edges: the forward recomputed into scratch (pre-activations of
  // every hidden layer kept as [unit][edge]), then delta = grad_out W_L^T and, layer by layer
  // backwards, delta = (delta * cst silu'(z)) W_l^T; every GEMM loads each weight once per
  // tile. grad_out is staged kChunk columns at a time, so scratch does not grow with the
  // output width (MACE's weight_numel, up to thousands).
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseTile,
                                         const typename Kokkos::TeamPolicy<ExecSpace, TagReverseTile>::member_type& team) const {
    const int E = static_cast<int>(m_in.extent(0));
    const int e0 = team.league_rank() * kTile;
    const int count = E - e0 < kTile ? E - e0 : kTile;
    T* A = static_cast<T*>(team.team_scratch(m_scratch_level).get_shmem(sizeof(T) * m_max_width * kTile));
    T* B = static_cast<T*>(team.team_scratch(m_scratch_level).get_shmem(sizeof(T) * m_max_width * kTile));
    T* Z = static_cast<T*>(team.team_scratch(m_scratch_level).get_shmem(sizeof(T) * (m_hidden_total > 0 ? m_hidden_total : 1) * kTile));
    T* G = static_cast<T*>(team.team_scratch(m_scratch_level).get_shmem(sizeof(T) * kChunk * kTile));
    const auto self = *this;
    const int n0 = m_widths(0);
    load_tile(team, e0, count, A);
    team.team_barrier();
    // Forward through the hidden layers: Z_l = h_l W_l, h_l+1 = cst silu(Z_l).
    for (int l = 0; l + 1 < m_layers; ++l) {
      T* z = Z + m_z_offset(l) * kTile;
      T* out = B;
      tile_layer(team, A, m_widths(l), &m_W(m_w_offset(l)), m_widths(l + 1), [=](int j, const T* acc) {
        for (int t = 0; t < kTile; ++t) {
          z[j * kTile + t] = acc[t];
          out[j * kTile + t] = self.m_cst * silu(acc[t]);
        }
      });
      team.team_barrier();
      T* tmp = A;
      A = B;
      B = tmp;
    }
    // Last layer: D[i][t] = sum_j grad_out[t, j] W_L[i, j], in chunks of columns j.
    {
      const int l = m_layers - 1;
      const int a = m_widths(l), b = m_widths(l + 1);
      const T* W = &m_W(m_w_offset(l));
      for (int j0 = 0; j0 < b; j0 += kChunk) {
        const int nj = b - j0 < kChunk ? b - j0 : kChunk;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj), [=](int j) {
          for (int t = 0; t < kTile; ++t) {
            G[j * kTile + t] = t < count ? self.m_grad_out(e0 + t, j0 + j) : T(0);
          }
        });
        team.team_barrier();
        tile_gemm_transposed(team, G, j0, j0 + nj, W, b, B, a, j0 > 0);
        team.team_barrier();
      }
    }
    // Hidden layers backwards: D_l = (D * cst silu'(Z_l)) W_l^T.
    for (int l = m_layers - 2; l >= 0; --l) {
      const int a = m_widths(l), b = m_widths(l + 1);
      const T* W = &m_W(m_w_offset(l));
      const T* z = Z + m_z_offset(l) * kTile;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, b * kTile), [=](int k) {
        B[k] *= self.m_cst * silu_derivative(z[k]);
      });
      team.team_barrier();
      tile_gemm_transposed(team, B, 0, b, W, b, A, a, false);
      team.team_barrier();
      T* tmp = A;
      A = B;
      B = tmp;
    }
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n0), [=](int i) {
      for (int t = 0; t < count; ++t) {
        self.m_grad_in(e0 + t, i) = B[i * kTile + t];
      }
    });
  }

  // One weight W_l[i, j] (pre-scaled): sum over edges of input_l[e, i] * dL/dz_l[e, j].
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseWeights, int k) const {
    const int l = m_grad_layer(k);
    const int b = m_widths(l + 1);
    const int i = (k - m_w_offset(l)) / b, j = (k - m_w_offset(l)) % b;
    const bool last = l + 1 == m_layers;
    T acc = 0;
    for (int e = 0; e < static_cast<int>(m_in.extent(0)); ++e) {
      const T input = l == 0 ? m_in(e, i) : m_cst * silu(m_z(e, m_z_offset(l - 1) + i));
      const T d = last ? m_grad_out(e, j) : m_dz(e, m_z_offset(l) + j);
      acc += input * d;
    }
    m_grad_W(k) = acc;
  }
};

/// The weights' scale 1/sqrt(n_l) (e3nn's normalisation) applied on the execution space: the
/// trainer's weights, unscaled, into the scaled array the functors read, and the gradient with
/// respect to the scaled weights back to the unscaled ones. Products are taken in double, as
/// the host's were, so either way gives the same bits.
template <class ExecSpace, class T>
struct RadialMLPScaleFunctor {
  struct TagSetWeights {};
  struct TagUnscaleGradient {};
  Kokkos::View<const int*, ExecSpace> m_layer;           // layer of each weight
  Kokkos::View<const double*, ExecSpace> m_layer_scale;  // per layer: 1/sqrt(n_l)
  Kokkos::View<const T*, ExecSpace> m_w;                 // unscaled weights
  Kokkos::View<T*, ExecSpace> m_W;                       // scaled weights
  Kokkos::View<T*, ExecSpace> m_grad;                    // a gradient, unscaled in place

  KOKKOS_INLINE_FUNCTION static T scaled(const T& x, double s) {
    if constexpr (is_dual_v<T>) {
      using V = typename T::value_type;
      return T(static_cast<V>(static_cast<double>(x.v) * s), static_cast<V>(static_cast<double>(x.d) * s));
    } else {
      return static_cast<T>(static_cast<double>(x) * s);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagSetWeights, int k) const {
    m_W(k) = scaled(m_w(k), m_layer_scale(m_layer(k)));
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagUnscaleGradient, int k) const {
    m_grad(k) = scaled(m_grad(k), m_layer_scale(m_layer(k)));
  }
};

}  // namespace fastmlip::kernels::impl

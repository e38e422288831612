// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of CHGNet's gated MLP (gated_mlp.hpp) for execution spaces without the
/// host's SIMD GEMMs, written from the formulas, not the host tiles:
///
///   TagForward       y[r] = silu(LN_c(c)) sigmoid(LN_g(g)) from z1[r]      (one team per row)
///   TagReverse       ga[r] = dL/dz1[r] from gy[r], recomputing the row's forward in scratch
///                    (and writing it to y[r] when the caller asks: a CHGNet convolution's
///                    edge-weight gradient reads it)
///
/// The first layer's products (projections, z1, and their input gradients) are dense layers over
/// a column window of W1 (dense_impl.hpp). c and g are the core and gate halves after the second
/// layers (or z1's halves without a hidden layer). In a team the threads split a row's columns;
/// LayerNorm's mean and variance are team reductions. One row's activations are 2 * width +
/// 6 * out values of team scratch, small for every CHGNet width (a few KiB), so the weights, read
/// by every row, stay the only global traffic that repeats.
#include <Kokkos_Core.hpp>

#include "core/kokkos_compat.hpp"
#include "kernels/impl/dense_impl.hpp"

namespace fastmlip::kernels::impl {

template <class ExecSpace, class T>
struct GatedMlpFunctor {
  struct TagForward {};
  struct TagReverse {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Vector = Kokkos::View<const T*, ExecSpace>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using Scratch =
      Kokkos::View<T*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  int in = 0, hidden = 0, out = 0, width2 = 0;
  bool norm = true;
  ConstMatrix W1;                     // [width2][in]: core's first layer, then gate's (the merged GEMM)
  Vector b1;                          // [width2]
  ConstMatrix W2c, W2g;               // [out][hidden] (hidden > 0)
  Vector b2c, b2g;                    // [out]
  Vector ln_cw, ln_cb, ln_gw, ln_gb;  // [out] (norm)
  int scratch_level = 0;

  // TagForward / TagReverse.
  ConstMatrix z1, gy;  // [rows][width2], [rows][out]
  Matrix ga;           // TagForward: y [rows][out]; TagReverse: dL/dz1 [rows][width2]
  Matrix y;            // TagReverse, when not empty: the recomputed forward [rows][out]

  static KOKKOS_INLINE_FUNCTION T sigmoid(T v) { return T(1) / (T(1) + kmath::exp(-v)); }

  /// Scratch values per row: a1 [width2], then c, g, chat, ghat, gc, gg [out].
  static KOKKOS_INLINE_FUNCTION std::size_t scratch_values(int width2_, int out_) {
    return static_cast<std::size_t>(width2_) + 6 * static_cast<std::size_t>(out_);
  }

  // The row's forward into scratch: c, g after the norms (chat, ghat and the 1/sigmas kept).
  KOKKOS_INLINE_FUNCTION void forward_row(const Member& team, int r, T* a1, T* c, T* g, T* chat, T* ghat,
                                          T& inv_c, T& inv_g) const {
    if (hidden > 0) {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, width2), [&](int q) {
        const T z = z1(r, q);
        a1[q] = z * sigmoid(z);
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, out), [&](int o) {
        T sc = b2c(o), sg = b2g(o);
        for (int h = 0; h < hidden; ++h) {
          sc += a1[h] * W2c(o, h);
          sg += a1[hidden + h] * W2g(o, h);
        }
        c[o] = sc;
        g[o] = sg;
      });
    } else {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, out), [&](int o) {
        c[o] = z1(r, o);
        g[o] = z1(r, out + o);
      });
    }
    team.team_barrier();
    if (norm) {
      inv_c = team_layer_norm(team, out, c, chat, ln_cw, ln_cb);
      inv_g = team_layer_norm(team, out, g, ghat, ln_gw, ln_gb);
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, const Member& team) const {
    const int r = team.league_rank();
    Scratch s(team.team_scratch(scratch_level), scratch_values(width2, out));
    T *a1 = s.data(), *c = a1 + width2, *g = c + out, *chat = g + out, *ghat = chat + out;
    T inv_c = 1, inv_g = 1;
    forward_row(team, r, a1, c, g, chat, ghat, inv_c, inv_g);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, out),
                         [&](int o) { ga(r, o) = c[o] * sigmoid(c[o]) * sigmoid(g[o]); });
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, const Member& team) const {
    const int r = team.league_rank();
    Scratch s(team.team_scratch(scratch_level), scratch_values(width2, out));
    T *a1 = s.data(), *c = a1 + width2, *g = c + out, *chat = g + out, *ghat = chat + out, *gc = ghat + out,
      *gg = gc + out;
    T inv_c = 1, inv_g = 1;
    forward_row(team, r, a1, c, g, chat, ghat, inv_c, inv_g);
    // y = c sigmoid(c) sigmoid(g): d/dc = sg sc (1 + c (1 - sc)), d/dg = c sc sg (1 - sg).
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, out), [&](int o) {
      const T sc = sigmoid(c[o]), sg = sigmoid(g[o]), dy = gy(r, o);
      gc[o] = dy * sg * sc * (T(1) + c[o] * (T(1) - sc));
      gg[o] = dy * c[o] * sc * sg * (T(1) - sg);
      if (y.extent(0) > 0) {
        y(r, o) = c[o] * sc * sg;
      }
    });
    team.team_barrier();
    if (norm) {
      team_layer_norm_reverse(team, out, gc, chat, inv_c, ln_cw);
      team_layer_norm_reverse(team, out, gg, ghat, inv_g, ln_gw);
    }
    if (hidden > 0) {
      // Through the second layers, then silu'(z1) = s (1 + z (1 - s)).
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, width2), [&](int q) {
        const bool core = q < hidden;
        const int h = core ? q : q - hidden;
        T sum = 0;
        for (int o = 0; o < out; ++o) {
          sum += (core ? gc[o] * W2c(o, h) : gg[o] * W2g(o, h));
        }
        const T z = z1(r, q), sz = sigmoid(z);
        ga(r, q) = sum * sz * (T(1) + z * (T(1) - sz));
      });
    } else {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, out), [&](int o) {
        ga(r, o) = gc[o];
        ga(r, out + o) = gg[o];
      });
    }
  }
};

}  // namespace fastmlip::kernels::impl

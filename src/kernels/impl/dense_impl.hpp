// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of the dense layer and LayerNorm (dense.hpp, layer_norm.hpp) for
/// execution spaces without the host's SIMD kernels, written from the formulas:
///
///   DenseFunctor::TagForward   y[r][o] (+)= b[o] + sum_i x[r][i] W[o][col0 + i]
///   DenseFunctor::TagReverse   gx[r][i] (+)= sum_o gy[r][o] W[o][col0 + i]
///   LayerNormFunctor           one team per row; mean and variance are team reductions
///
/// W is torch's [out][in]; col0 and the input width pick a column window of it (a gated MLP's
/// first-layer segment, gated_mlp_impl.hpp). One (row, column) per work item: every weight row
/// is read by every input row, from cache.
#include <Kokkos_Core.hpp>

#include "core/kokkos_compat.hpp"

namespace fastmlip::kernels::impl {

template <class ExecSpace, class T>
struct DenseFunctor {
  struct TagForward {};
  struct TagReverse {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Vector = Kokkos::View<const T*, ExecSpace>;

  ConstMatrix W;  // [out][W's columns]
  Vector b;       // [out], or empty (also with accumulate: the bias is not added twice)
  int col0 = 0, in = 0, out = 0;
  bool accumulate = false;
  ConstMatrix x;  // TagForward: [rows][in]; TagReverse: gy [rows][out]
  Matrix y;       // TagForward: [rows][out]; TagReverse: gx [rows][in]

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, int idx) const {
    const int r = idx / out, o = idx % out;
    T s = b.extent(0) ? b(o) : T(0);
    for (int i = 0; i < in; ++i) {
      s += x(r, i) * W(o, col0 + i);
    }
    y(r, o) = accumulate ? T(y(r, o) + s) : s;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int idx) const {
    const int r = idx / in, i = idx % in;
    T s = 0;
    for (int o = 0; o < out; ++o) {
      s += x(r, o) * W(o, col0 + i);
    }
    y(r, i) = accumulate ? T(y(r, i) + s) : s;
  }
};

constexpr double kLayerNormEps = 1e-5;  // torch's default, as LayerNorm<S>::kEps

/// A team's row v [n] <- gamma (v - mean) / sigma + beta, keeping vhat = (v - mean) / sigma;
/// returns 1 / sigma (biased variance, as torch). Every thread of the team calls it.
template <class Member, class T, class Vector>
KOKKOS_INLINE_FUNCTION T team_layer_norm(const Member& team, int n, T* v, T* vhat, const Vector& gamma,
                                         const Vector& beta) {
  T sum = 0, sq = 0;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, n), [&](int j, T& s) { s += v[j]; }, sum);
  const T mean = sum / T(n);
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, n), [&](int j, T& s) { s += (v[j] - mean) * (v[j] - mean); }, sq);
  const T inv = T(1) / kmath::sqrt(sq / T(n) + T(kLayerNormEps));
  team.team_barrier();
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](int j) {
    vhat[j] = (v[j] - mean) * inv;
    v[j] = vhat[j] * gamma(j) + beta(j);
  });
  team.team_barrier();
  return inv;
}

/// g [n] <- dL/d(row before the norm) from g = dL/d(normed row), in place:
/// inv (gamma g - mean(gamma g) - vhat mean(gamma g vhat)).
template <class Member, class T, class Vector>
KOKKOS_INLINE_FUNCTION void team_layer_norm_reverse(const Member& team, int n, T* g, const T* vhat, T inv,
                                                    const Vector& gamma) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](int j) { g[j] *= gamma(j); });
  team.team_barrier();
  T m1 = 0, m2 = 0;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, n), [&](int j, T& s) { s += g[j]; }, m1);
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, n), [&](int j, T& s) { s += g[j] * vhat[j]; }, m2);
  m1 /= T(n);
  m2 /= T(n);
  team.team_barrier();
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n),
                       [&](int j) { g[j] = inv * (g[j] - m1 - vhat[j] * m2); });
  team.team_barrier();
}

/// LayerNorm over rows, in place, one team per row (the row is staged in team scratch).
/// TagForward: y <- LN(y), keeping yhat and 1/sigma; TagReverse: g <- dL/dy from dL/d(LN(y)).
template <class ExecSpace, class T>
struct LayerNormFunctor {
  struct TagForward {};
  struct TagReverse {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Vector = Kokkos::View<const T*, ExecSpace>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using Scratch =
      Kokkos::View<T*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  int dim = 0;
  int scratch_level = 0;
  Vector gamma, beta;
  Matrix y;                         // TagForward: the rows; TagReverse: the adjoint, in place
  Matrix yhat;                      // [rows][dim]: written forward, read reverse
  Kokkos::View<T*, ExecSpace> inv;  // [rows]: likewise

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, const Member& team) const {
    const int r = team.league_rank();
    Scratch v(team.team_scratch(scratch_level), 2 * dim);
    T *row = v.data(), *hat = row + dim;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dim), [&](int j) { row[j] = y(r, j); });
    team.team_barrier();
    const T i = team_layer_norm(team, dim, row, hat, gamma, beta);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dim), [&](int j) {
      y(r, j) = row[j];
      yhat(r, j) = hat[j];
    });
    Kokkos::single(Kokkos::PerTeam(team), [&]() { inv(r) = i; });
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, const Member& team) const {
    const int r = team.league_rank();
    Scratch v(team.team_scratch(scratch_level), 2 * dim);
    T *g = v.data(), *hat = g + dim;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dim), [&](int j) {
      g[j] = y(r, j);
      hat[j] = yhat(r, j);
    });
    team.team_barrier();
    team_layer_norm_reverse(team, dim, g, hat, T(inv(r)), gamma);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dim), [&](int j) { y(r, j) = g[j]; });
  }
};

}  // namespace fastmlip::kernels::impl

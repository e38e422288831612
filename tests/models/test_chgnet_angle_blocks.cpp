// SPDX-License-Identifier: MIT
// CHGNet's BondConv and AngleUpdate blocks (models/chgnet/chgnet_angle_blocks.hpp) on Kokkos'
// default execution space, float and double, odd sizes (Fa = 5, Fb = 3, Fg = 4, Fourier order 2;
// 4 local nodes with 3, 0, 7 and 5 short edges: 68 angles over several chunks; 4 ghost slots,
// each a copy of a local slot as a pair style's exchange makes it):
// - b^{k+1} and g^{k+1} against a naive evaluation in double, for layer 0 (g^0 from theta) and
//   layer 1 (g^1 stored) of a stage with three BondConvs and two AngleUpdates, on every path the space has
//   (`rows` and `teams` on the host, `teams` on a GPU), with chunks of 32 rows;
// - keeping the activations or recomputing them gives the same bits;
// - AngleUpdate in place: g^{k+1} over g^k, dE/dg^k over dE/dg^{k+1} (k = 0 leaves it alone);
// - g^k held, recomputed per chunk from g^0, or overwritten by dE/dg^k: the same bits;
// - the reverses (dE/db, dE/dg or dE/dtheta, dE/dx of the local nodes, dE/dw') against central
//   finite differences of sum R . b^{k+1} and sum R . g^{k+1} in double, and in float against
//   double.
// Built into the model tests (the host) and the device tests (a GPU).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "../common/random_mlp.hpp"
#include "../common/space_views.hpp"
#include "kernels/reference/dense_ref.hpp"
#include "kernels/reference/radial_basis_ref.hpp"
#include "models/chgnet/chgnet_angle_blocks.hpp"

namespace fastmlip::models {
namespace {

using Space = Kokkos::DefaultExecutionSpace;
constexpr bool kHostSpace = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space::memory_space>::accessible;
constexpr int kFa = 5, kFb = 3, kFg = 4, kOrder = 2, kAngular = 2 * kOrder + 1, kLocal = 4, kGhosts = 4;

kernels::FourierParams fourier() {
  kernels::FourierParams p;
  for (int j = 1; j <= kOrder; ++j) {
    p.frequencies.push_back(j);
  }
  return p;
}

/// Slots of the local nodes' short edges, their angles (c; a, b) in the geometry stage's order,
/// the reverse of each slot (an injective map onto local and ghost slots) and each ghost slot's
/// owner.
struct Angles {
  std::vector<int> a, b, c, reverse, owner, angle_start{0}, short_start{0};
  std::vector<double> theta;
  int S = 0, slots = 0;
  explicit Angles(std::uint64_t seed) {
    test::Uniform u(seed);
    // With chunks of 32 angles: centres 0 and 1 (6 angles) in one chunk, centre 2 (42) alone
    // over the chunk size, centre 3 (20).
    const int counts[kLocal] = {3, 0, 7, 5};
    for (int i = 0; i < kLocal; ++i) {
      const int s0 = S;
      S += counts[i];
      for (int p = 0; p < counts[i]; ++p) {
        for (int q = 0; q < counts[i]; ++q) {
          if (p != q) {
            a.push_back(s0 + p), b.push_back(s0 + q), c.push_back(i), theta.push_back(u(0.3, 3.0));
          }
        }
      }
      angle_start.push_back(static_cast<int>(a.size()));
      short_start.push_back(S);
    }
    slots = S + kGhosts;
    for (int g = 0; g < kGhosts; ++g) {
      owner.push_back(static_cast<int>(u(0, S - 1e-9)));
    }
    std::vector<int> perm(slots);
    std::iota(perm.begin(), perm.end(), 0);
    for (int q = slots - 1; q > 0; --q) {
      std::swap(perm[q], perm[static_cast<int>(u(0, q + 1 - 1e-9))]);
    }
    reverse.assign(perm.begin(), perm.begin() + S);
  }
  int A() const { return static_cast<int>(a.size()); }
};

struct Weights {
  std::vector<double> w_embed;
  std::vector<kernels::GatedMlpWeights<double>> bond, angle;
  std::vector<std::vector<double>> out_w, out_b;
  explicit Weights(std::uint64_t seed) {
    test::Uniform u(seed);
    w_embed = test::random_vector(static_cast<std::size_t>(kFg) * kAngular, u);
    // Three BondConvs and two AngleUpdates (a model with n_conv = 4); the AngleUpdates have no
    // hidden layer, as chgnet 0.3.0's.
    for (int k = 0; k < 3; ++k) {
      bond.push_back(test::random_gated_mlp_weights<double>(2 * kFb + kFg + kFa, 6, kFb, true, u));
      out_w.push_back(test::random_vector(static_cast<std::size_t>(kFb) * kFb, u));
      out_b.push_back(test::random_vector(kFb, u));
      if (k < 2) {
        angle.push_back(test::random_gated_mlp_weights<double>(2 * kFb + kFg + kFa, 0, kFg, true, u));
      }
    }
  }
  template <class T>
  static kernels::GatedMlp<T> gated(const kernels::GatedMlpWeights<double>& w) {
    return kernels::GatedMlp<T>(test::cast_weights<T>(w), {kFb, kFb, kFg, kFa});
  }
  template <class T>
  chgnet::AngleBlocks<Space, T> stage(kernels::DensePath path) const {
    std::vector<kernels::GatedMlp<T>> bm, am;
    std::vector<kernels::Dense<T>> o;
    for (std::size_t k = 0; k < bond.size(); ++k) {
      bm.push_back(gated<T>(bond[k]));
      const auto ow = test::cast<T>(out_w[k]), ob = test::cast<T>(out_b[k]);
      o.emplace_back(kFb, kFb, ow.data(), ob.data());
    }
    for (const auto& a : angle) {
      am.push_back(gated<T>(a));
    }
    const auto we = test::cast<T>(w_embed);
    return chgnet::AngleBlocks<Space, T>(fourier(), kernels::Dense<T>(kAngular, kFg, we.data(), nullptr), bm,
                                         o, am, path);
  }

  /// g^k [A][Fg]: the given rows for k > 0, W_g F(theta) for k = 0.
  std::vector<double> angle_rows(int k, const Angles& an, const std::vector<double>& g,
                                 const std::vector<double>& theta) const {
    if (k > 0) {
      return g;
    }
    std::vector<double> f(theta.size() * kAngular), out(theta.size() * kFg, 0.0);
    kernels::reference::compute_fourier(fourier(), theta.size(), theta.data(), f.data());
    for (int q = 0; q < an.A(); ++q) {
      for (int o = 0; o < kFg; ++o) {
        for (int n = 0; n < kAngular; ++n) {
          out[static_cast<std::size_t>(q) * kFg + o] += w_embed[static_cast<std::size_t>(o) * kAngular + n] *
                                                        f[static_cast<std::size_t>(q) * kAngular + n];
        }
      }
    }
    return out;
  }
  /// The gated MLP over every angle's [b_a, b_b, g, x_c].
  static std::vector<double> messages(const kernels::GatedMlpWeights<double>& m, const Angles& an,
                                      const std::vector<double>& b, const std::vector<double>& gk,
                                      const std::vector<double>& x) {
    std::vector<double> y(static_cast<std::size_t>(an.A()) * m.out);
    for (int q = 0; q < an.A(); ++q) {
      std::vector<double> z;
      for (int j = 0; j < kFb; ++j) {
        z.push_back(b[static_cast<std::size_t>(an.a[q]) * kFb + j]);
      }
      for (int j = 0; j < kFb; ++j) {
        z.push_back(b[static_cast<std::size_t>(an.b[q]) * kFb + j]);
      }
      for (int j = 0; j < kFg; ++j) {
        z.push_back(gk[static_cast<std::size_t>(q) * kFg + j]);
      }
      for (int j = 0; j < kFa; ++j) {
        z.push_back(x[static_cast<std::size_t>(an.c[q]) * kFa + j]);
      }
      kernels::reference::compute_gated_mlp(m, z.data(), 1, y.data() + static_cast<std::size_t>(q) * m.out);
    }
    return y;
  }
  /// b^{k+1} [S][Fb], naively, ghost slots copied from their owners.
  std::vector<double> bond_conv(int k, const Angles& an, const std::vector<double>& b,
                                const std::vector<double>& g, const std::vector<double>& theta,
                                const std::vector<double>& x, const std::vector<double>& w) const {
    const auto y = messages(bond[k], an, b, angle_rows(k, an, g, theta), x);
    std::vector<double> H(static_cast<std::size_t>(an.slots) * kFb, 0.0), out(b.size());
    for (int q = 0; q < an.A(); ++q) {
      for (int j = 0; j < kFb; ++j) {
        H[static_cast<std::size_t>(an.a[q]) * kFb + j] += y[static_cast<std::size_t>(q) * kFb + j] *
                                                          w[static_cast<std::size_t>(an.a[q]) * kFb + j] *
                                                          w[static_cast<std::size_t>(an.b[q]) * kFb + j];
      }
    }
    for (int gs = 0; gs < kGhosts; ++gs) {
      for (int j = 0; j < kFb; ++j) {
        H[static_cast<std::size_t>(an.S + gs) * kFb + j] =
            H[static_cast<std::size_t>(an.owner[gs]) * kFb + j];
      }
    }
    for (int s = 0; s < an.S; ++s) {
      for (int o = 0; o < kFb; ++o) {
        double v = out_b[k][o] + b[static_cast<std::size_t>(s) * kFb + o];
        for (int j = 0; j < kFb; ++j) {
          v += out_w[k][static_cast<std::size_t>(o) * kFb + j] *
               (H[static_cast<std::size_t>(s) * kFb + j] +
                H[static_cast<std::size_t>(an.reverse[s]) * kFb + j]);
        }
        out[static_cast<std::size_t>(s) * kFb + o] = v;
      }
    }
    return out;
  }
  /// g^{k+1} [A][Fg], naively.
  std::vector<double> angle_update(int k, const Angles& an, const std::vector<double>& b,
                                   const std::vector<double>& g, const std::vector<double>& theta,
                                   const std::vector<double>& x) const {
    const auto gk = angle_rows(k, an, g, theta);
    auto y = messages(angle[k], an, b, gk, x);
    for (std::size_t q = 0; q < y.size(); ++q) {
      y[q] += gk[q];
    }
    return y;
  }
};

template <class T>
using M = Kokkos::View<T**, Kokkos::LayoutRight, Space>;

template <class T>
typename chgnet::AngleBlocks<Space, T>::Angles angles_in_space(const Angles& an) {
  typename chgnet::AngleBlocks<Space, T>::Angles v;
  v.n_local = kLocal, v.num_slots = an.slots;
  v.angle_a = test::vector_in_space<int>(an.a, "a");
  v.angle_b = test::vector_in_space<int>(an.b, "b");
  v.angle_c = test::vector_in_space<int>(an.c, "c");
  v.angle_start = test::vector_in_space<int>(an.angle_start, "angle_start");
  v.short_start = test::vector_in_space<int>(an.short_start, "short_start");
  v.short_reverse = test::vector_in_space<int>(an.reverse, "reverse");
  v.theta = test::vector_in_space<T>(an.theta, "theta");
  return v;
}

/// The pair style's slot exchange on one rank: ghost slots are copies of their owners.
template <class T>
void exchange_forward(const Angles& an, const M<T>& H) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), H);
  for (int g = 0; g < kGhosts; ++g) {
    for (int j = 0; j < kFb; ++j) {
      h(an.S + g, j) = h(an.owner[g], j);
    }
  }
  Kokkos::deep_copy(H, h);
}
template <class T>
void exchange_reverse(const Angles& an, const M<T>& gH) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gH);
  for (int g = 0; g < kGhosts; ++g) {
    for (int j = 0; j < kFb; ++j) {
      h(an.owner[g], j) += h(an.S + g, j);
      h(an.S + g, j) = 0;
    }
  }
  Kokkos::deep_copy(gH, h);
}

struct Inputs {
  std::vector<double> b, g, x, w, R_b, R_g;
};

struct BondResult {
  std::vector<double> b_next, gb, gg, g_theta, gx, gw;
};
template <class T>
BondResult run_bond(chgnet::AngleBlocks<Space, T>& st, int k, const Angles& an, const Inputs& in) {
  const auto v = angles_in_space<T>(an);
  st.plan(v);
  const int S = an.S, A = an.A();
  const auto b = test::matrix_in_space<T>(in.b, S, kFb), g = test::matrix_in_space<T>(in.g, A, kFg),
             x = test::matrix_in_space<T>(in.x, kLocal, kFa), w = test::matrix_in_space<T>(in.w, S, kFb),
             R = test::matrix_in_space<T>(in.R_b, S, kFb);
  M<T> H("H", an.slots, kFb), b_next("b_next", S, kFb), gH("gH", an.slots, kFb), gb("gb", S, kFb),
      gg("gg", A, kFg), gx("gx", kLocal, kFa), gw("gw", S, kFb);
  st.compute_bond_messages(k, v, b, g, x, w, H);
  exchange_forward<T>(an, H);
  st.finish_bond(k, v, H, b, b_next);
  Kokkos::View<double*, Space> g_theta("g_theta", A);
  st.start_bond_reverse(k, v, R, gb, gH);
  exchange_reverse<T>(an, gH);
  st.reverse_bond_messages(k, v, b, {g, {}, {}}, x, w, gH, gb, k > 0 ? gg : M<T>(), false, g_theta, gx, gw);
  return {test::host_values(b_next),  test::host_values(gb), test::host_values(gg),
          test::host_values(g_theta), test::host_values(gx), test::host_values(gw)};
}

struct AngleResult {
  std::vector<double> g_next, gb, gg, g_theta, gx;
};
template <class T>
AngleResult run_angle(chgnet::AngleBlocks<Space, T>& st, int k, const Angles& an, const Inputs& in) {
  const auto v = angles_in_space<T>(an);
  st.plan(v);
  const int S = an.S, A = an.A();
  const auto b = test::matrix_in_space<T>(in.b, S, kFb), g = test::matrix_in_space<T>(in.g, A, kFg),
             x = test::matrix_in_space<T>(in.x, kLocal, kFa), R = test::matrix_in_space<T>(in.R_g, A, kFg);
  // Both blocks work in place: g^k's rows become g^{k+1}'s, and dE/dg^{k+1}'s become dE/dg^k's.
  const auto g_next = test::matrix_in_space<T>(in.g, A, kFg), gg = test::matrix_in_space<T>(in.R_g, A, kFg);
  M<T> gb("gb", S, kFb), gx("gx", kLocal, kFa);
  Kokkos::View<double*, Space> g_theta("g_theta", A);
  st.compute_angle(k, v, b, x, g_next);
  st.reverse_angle(k, v, b, {st.keeps() ? M<T>() : g, {}, {}}, x, gg, gb, g_theta, gx);
  const auto gg_host = test::host_values(gg);
  if (k == 0) {  // read only: dE/dg^0 went into dE/dtheta
    EXPECT_EQ(gg_host, test::host_values(R));
  }
  return {test::host_values(g_next), test::host_values(gb), gg_host, test::host_values(g_theta),
          test::host_values(gx)};
}

/// Central differences of f in each entry of v.
template <class F>
std::vector<double> central(const std::vector<double>& v, F&& f) {
  std::vector<double> out(v.size());
  const double h = 1e-6;
  for (std::size_t q = 0; q < v.size(); ++q) {
    auto p = v, m = v;
    p[q] += h;
    m[q] -= h;
    out[q] = (f(p) - f(m)) / (2 * h);
  }
  return out;
}
double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t q = 0; q < a.size(); ++q) {
    s += a[q] * b[q];
  }
  return s;
}

template <class T>
class ChgnetAngleBlocks : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChgnetAngleBlocks, Dtypes);

TYPED_TEST(ChgnetAngleBlocks, MatchANaiveEvaluationAndItsGradient) {
  using T = TypeParam;
  constexpr bool kDouble = std::is_same_v<T, double>;
  const double tol = kDouble ? 1e-11 : 2e-4, gtol = kDouble ? 1e-6 : 3e-3;
  const std::vector<kernels::DensePath> paths =
      kHostSpace ? std::vector<kernels::DensePath>{kernels::DensePath::rows, kernels::DensePath::teams}
                 : std::vector<kernels::DensePath>{kernels::DensePath::teams};
  const Angles an(3);
  ASSERT_GT(an.A(), 2 * 32);
  const Weights wt(9);
  test::Uniform u(17);
  Inputs in;
  in.b = test::random_vector(static_cast<std::size_t>(an.S) * kFb, u);
  in.g = test::random_vector(static_cast<std::size_t>(an.A()) * kFg, u);
  in.x = test::random_vector(static_cast<std::size_t>(kLocal) * kFa, u);
  in.w = test::random_vector(static_cast<std::size_t>(an.S) * kFb, u);
  in.R_b = test::random_vector(in.b.size(), u);
  in.R_g = test::random_vector(in.g.size(), u);
  auto near = [&](const std::vector<double>& got, const std::vector<double>& want, double t,
                  const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t q = 0; q < got.size(); ++q) {
      EXPECT_NEAR(got[q], want[q], t * std::max(1.0, std::abs(want[q]))) << what << " " << q;
    }
  };
  for (int k = 0; k < 2; ++k) {
    // BondConv k.
    auto lb = [&](const std::vector<double>& b, const std::vector<double>& g, const std::vector<double>& th,
                  const std::vector<double>& x,
                  const std::vector<double>& w) { return dot(in.R_b, wt.bond_conv(k, an, b, g, th, x, w)); };
    const auto want_b = wt.bond_conv(k, an, in.b, in.g, an.theta, in.x, in.w);
    const auto fd_b = central(in.b, [&](const auto& v) { return lb(v, in.g, an.theta, in.x, in.w); });
    const auto fd_x = central(in.x, [&](const auto& v) { return lb(in.b, in.g, an.theta, v, in.w); });
    const auto fd_w = central(in.w, [&](const auto& v) { return lb(in.b, in.g, an.theta, in.x, v); });
    const auto fd_angle =
        k > 0 ? central(in.g, [&](const auto& v) { return lb(in.b, v, an.theta, in.x, in.w); })
              : central(an.theta, [&](const auto& v) { return lb(in.b, in.g, v, in.x, in.w); });
    for (const auto path : paths) {
      const std::string at =
          "bond_conv " + std::to_string(k) + (path == kernels::DensePath::rows ? ", rows" : ", teams");
      auto st = wt.stage<T>(path);
      st.set_chunk(32);
      const auto got = run_bond<T>(st, k, an, in);
      st.keep(true);
      const auto kept = run_bond<T>(st, k, an, in);
      EXPECT_EQ(kept.b_next, got.b_next) << at;
      EXPECT_EQ(kept.gb, got.gb) << at;
      EXPECT_EQ(kept.gg, got.gg) << at;
      EXPECT_EQ(kept.g_theta, got.g_theta) << at;
      EXPECT_EQ(kept.gx, got.gx) << at;
      EXPECT_EQ(kept.gw, got.gw) << at;
      near(got.b_next, want_b, tol, at + " b^{k+1}");
      near(got.gb, fd_b, gtol, at + " dE/db");
      near(got.gx, fd_x, gtol, at + " dE/dx");
      near(got.gw, fd_w, gtol, at + " dE/dw'");
      near(k > 0 ? got.gg : got.g_theta, fd_angle, gtol, at + (k > 0 ? " dE/dg" : " dE/dtheta"));
    }
  }
  for (int k = 0; k < 2; ++k) {
    // AngleUpdate k: g^0 from theta (k = 0) or the stored g^1 (k = 1).
    auto lg = [&](const std::vector<double>& b, const std::vector<double>& g, const std::vector<double>& th,
                  const std::vector<double>& x) { return dot(in.R_g, wt.angle_update(k, an, b, g, th, x)); };
    const auto want_g = wt.angle_update(k, an, in.b, in.g, an.theta, in.x);
    const auto fd_b = central(in.b, [&](const auto& v) { return lg(v, in.g, an.theta, in.x); });
    const auto fd_x = central(in.x, [&](const auto& v) { return lg(in.b, in.g, an.theta, v); });
    const auto fd_angle = k > 0 ? central(in.g, [&](const auto& v) { return lg(in.b, v, an.theta, in.x); })
                                : central(an.theta, [&](const auto& v) { return lg(in.b, in.g, v, in.x); });
    for (const auto path : paths) {
      const std::string at =
          "angle_update " + std::to_string(k) + (path == kernels::DensePath::rows ? ", rows" : ", teams");
      auto st = wt.stage<T>(path);
      st.set_chunk(32);
      const auto got = run_angle<T>(st, k, an, in);
      st.keep(true);
      const auto kept = run_angle<T>(st, k, an, in);
      EXPECT_EQ(kept.g_next, got.g_next) << at;
      EXPECT_EQ(kept.gb, got.gb) << at;
      EXPECT_EQ(kept.gg, got.gg) << at;
      EXPECT_EQ(kept.g_theta, got.g_theta) << at;
      EXPECT_EQ(kept.gx, got.gx) << at;
      near(got.g_next, want_g, tol, at + " g^{k+1}");
      near(got.gb, fd_b, gtol, at + " dE/db");
      near(got.gx, fd_x, gtol, at + " dE/dx");
      near(k > 0 ? got.gg : got.g_theta, fd_angle, gtol, at + (k > 0 ? " dE/dg" : " dE/dtheta"));
    }
  }
}

// The reverses read g^k three ways (AngleFeatures): held; recomputed chunk by chunk from g^0
// through the AngleUpdates before k; held in the very array the last BondConv's reverse writes
// dE/dg^k over (gg_first), as the model holds one array of angle rows. All three give the same
// bits, on every path, for BondConv 2 (g^2 through two AngleUpdates) and AngleUpdate 1.
TYPED_TEST(ChgnetAngleBlocks, RecomputedAndOverwrittenAngleRowsGiveTheHeldBits) {
  using T = TypeParam;
  const std::vector<kernels::DensePath> paths =
      kHostSpace ? std::vector<kernels::DensePath>{kernels::DensePath::rows, kernels::DensePath::teams}
                 : std::vector<kernels::DensePath>{kernels::DensePath::teams};
  const Angles an(5);
  const Weights wt(11);
  test::Uniform u(23);
  const int S = an.S, A = an.A();
  const auto rnd = [&](int rows, int cols) {
    return test::matrix_in_space<T>(test::random_vector(static_cast<std::size_t>(rows) * cols, u), rows,
                                    cols);
  };
  const auto b1 = rnd(S, kFb), b2 = rnd(S, kFb), x1 = rnd(kLocal, kFa), x2 = rnd(kLocal, kFa),
             w = rnd(S, kFb), R_b = rnd(S, kFb), R_g = rnd(A, kFg);
  for (const auto path : paths) {
    const std::string at = path == kernels::DensePath::rows ? "rows" : "teams";
    auto st = wt.stage<T>(path);
    st.set_chunk(32);
    const auto v = angles_in_space<T>(an);
    st.plan(v);
    // g^1 and g^2 as the forward leaves them.
    M<T> g1("g1", A, kFg), g2("g2", A, kFg);
    st.compute_angle(0, v, b1, x1, g1);
    Kokkos::deep_copy(g2, g1);
    st.compute_angle(1, v, b2, x2, g2);
    using Features = typename chgnet::AngleBlocks<Space, T>::AngleFeatures;
    const Features chain2{M<T>(), {b1, b2}, {x1, x2}}, chain1{M<T>(), {b1}, {x1}};

    // BondConv 2's reverse; `store`: the array it reads g^2 from and writes dE/dg^2 into, or
    // none (a zeroed gg of its own).
    const auto bond2 = [&](const Features& feat, const M<T>& store) {
      M<T> H("H", an.slots, kFb), b3("b3", S, kFb), gH("gH", an.slots, kFb), gb("gb", S, kFb),
          gx("gx", kLocal, kFa), gw("gw", S, kFb);
      st.compute_bond_messages(2, v, b2, g2, x2, w, H);
      exchange_forward<T>(an, H);
      st.finish_bond(2, v, H, b2, b3);
      st.start_bond_reverse(2, v, R_b, gb, gH);
      exchange_reverse<T>(an, gH);
      const bool first = store.data() != nullptr;
      const M<T> gg = first ? store : M<T>("gg", A, kFg);
      Kokkos::View<double*, Space> g_theta("g_theta", A);
      st.reverse_bond_messages(2, v, b2, feat, x2, w, gH, gb, gg, first, g_theta, gx, gw);
      return std::vector<std::vector<double>>{test::host_values(gb), test::host_values(gg),
                                              test::host_values(gx), test::host_values(gw)};
    };
    const auto held = bond2(Features{g2, {}, {}}, M<T>());
    EXPECT_EQ(bond2(chain2, M<T>()), held) << at << ": bond_conv 2, g^2 recomputed";
    M<T> store("store", A, kFg);
    Kokkos::deep_copy(store, g2);
    EXPECT_EQ(bond2(Features{store, {}, {}}, store), held) << at << ": bond_conv 2, dE/dg^2 over g^2";

    // AngleUpdate 1's reverse, in place on dE/dg^2 = R_g.
    const auto angle1 = [&](const Features& feat) {
      M<T> gg("gg", A, kFg), gb("gb", S, kFb), gx("gx", kLocal, kFa);
      Kokkos::deep_copy(gg, R_g);
      Kokkos::View<double*, Space> g_theta("g_theta", A);
      st.reverse_angle(1, v, b2, feat, x2, gg, gb, g_theta, gx);
      return std::vector<std::vector<double>>{test::host_values(gg), test::host_values(gb),
                                              test::host_values(gx)};
    };
    EXPECT_EQ(angle1(chain1), angle1(Features{g1, {}, {}})) << at << ": angle_update 1, g^1 recomputed";
  }
}

TEST(ChgnetAngleBlocksChecks, BadLayersAndShapesAreRefused) {
  const Weights wt(5);
  auto st = wt.stage<double>(kernels::DensePath::automatic);
  EXPECT_EQ(st.bond_layers(), 3);
  EXPECT_EQ(st.angle_layers(), 2);
  EXPECT_THROW(st.set_chunk(48), InputError);
  const Angles an(1);
  const auto v = angles_in_space<double>(an);
  M<double> b("b", an.S, kFb), g("g", an.A(), kFg), x("x", kLocal, kFa);
  try {
    st.compute_angle(0, v, b, x, g);
    ADD_FAILURE() << "a graph plan() has not seen accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("call plan() once per graph first"), std::string::npos) << e.what();
  }
  st.plan(v);
  try {
    st.compute_angle(2, v, b, x, g);
    ADD_FAILURE() << "angle_update layer 2 of 2 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("angle_update layer 2 of 2"), std::string::npos) << e.what();
  }
  M<double> narrow("b", an.S, kFb + 1);
  EXPECT_THROW(st.compute_angle(0, v, narrow, x, g), InputError);
  auto bad_starts = an;
  bad_starts.angle_start.back() -= 1;
  EXPECT_THROW(st.plan(angles_in_space<double>(bad_starts)), InputError);
  M<double> short_rows("g", an.A() - 1, kFg), wide_rows("g", an.A(), kFg + 1);
  EXPECT_THROW(st.compute_angle(0, v, b, x, short_rows), InputError);
  EXPECT_THROW(
      st.reverse_angle(1, v, b, {g, {}, {}}, x, wide_rows, b, Kokkos::View<double*, Space>("t", an.A()), x),
      InputError);
  try {  // g^1 neither held nor recomputable (no AngleUpdate inputs given)
    st.reverse_angle(1, v, b, {}, x, g, b, Kokkos::View<double*, Space>("t", an.A()), x);
    ADD_FAILURE() << "g^1 from nowhere accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("g^1 is neither held nor recomputable"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fastmlip::models

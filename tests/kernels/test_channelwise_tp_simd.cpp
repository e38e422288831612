// SPDX-License-Identifier: MIT
// kernels/channelwise_tp_simd.hpp: the channelwise TP's row kernels at every instruction-set
// level this machine can run, against sums in long double and against the base level's bits
// (every level rounds as the base does), in float and double, at channel
// counts that leave every kind of tail (below one register, partial registers, below and past
// the 8 interleaved parts) and with CG entries that repeat components (several entries adding
// into one output block). Nothing past an instruction's blocks may change.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "../common/isa_levels.hpp"
#include "core/error.hpp"
#include "kernels/channelwise_tp_simd.hpp"

namespace {

using fastmlip::kernels::channelwise_tp_simd;
using fastmlip::kernels::impl::TPEntryDev;
using fastmlip::math::Isa;
using fastmlip::test::isa_levels;
using fastmlip::test::random_values;

template <class T>
struct Tol;
template <>
struct Tol<float> {
  static constexpr double per_term = 2e-7;
};
template <>
struct Tol<double> {
  static constexpr double per_term = 4e-16;
};

template <class T>
class ChannelwiseTPSimdLevels : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChannelwiseTPSimdLevels, Scalars);

// An instruction 2 x 3 -> 3 (l1 = 1/2 components cut to 2, l2 = 1, l3 = 1) with entries in
// arbitrary order, repeats included.
template <class T>
std::vector<TPEntryDev<T>> entries(unsigned seed, int n1, int n2, int n3, int nnz) {
  std::mt19937 rng(seed);
  std::vector<TPEntryDev<T>> cg;
  std::uniform_real_distribution<double> d(-1, 1);
  for (int z = 0; z < nnz; ++z) {
    cg.push_back({static_cast<int>(rng() % n1), static_cast<int>(rng() % n2), static_cast<int>(rng() % n3),
                  static_cast<T>(d(rng))});
  }
  return cg;
}

constexpr int kN1 = 2, kN2 = 3, kN3 = 3, kPad = 5;
const std::vector<int> kMuls = {1, 3, 7, 8, 13, 64, 129};
const std::vector<int> kNnz = {0, 1, 11};

TEST(ChannelwiseTPSimdLevels, UnavailableLevelsThrowAndTheActiveOneIsAvailable) {
  EXPECT_NO_THROW(channelwise_tp_simd<double>());
  for (Isa isa : {Isa::base, Isa::avx2, Isa::avx512}) {
    if (!fastmlip::math::isa_available(isa)) {
      EXPECT_THROW(channelwise_tp_simd<float>(isa), fastmlip::UnsupportedError)
          << fastmlip::math::isa_name(isa);
    }
  }
}

// scatter: dst[k][u] += C y_j w[u] src[i][u]; scatter_transposed the same from k to i.
TYPED_TEST(ChannelwiseTPSimdLevels, ScattersMatchLongDoubleSums) {
  using T = TypeParam;
  for (Isa isa : isa_levels()) {
    const auto& k = channelwise_tp_simd<T>(isa);
    for (int mul : kMuls) {
      for (int nnz : kNnz) {
        for (bool transposed : {false, true}) {
          const int n_src = transposed ? kN3 : kN1, n_dst = transposed ? kN1 : kN3;
          const auto cg = entries<T>(mul + 31 * nnz, kN1, kN2, kN3, nnz);
          const auto y = random_values<T>(kN2, 1 + mul);
          const auto w = random_values<T>(mul, 2 + mul);
          const auto src = random_values<T>(static_cast<std::size_t>(n_src) * mul, 3 + mul);
          const auto dst0 = random_values<T>(static_cast<std::size_t>(n_dst) * mul + kPad, 4 + mul);
          auto dst = dst0;
          (transposed ? k.scatter_transposed : k.scatter)(cg.data(), nnz, mul, y.data(), w.data(), src.data(),
                                                          dst.data());
          auto dst_base = dst0;
          const auto& base = channelwise_tp_simd<T>(Isa::base);
          (transposed ? base.scatter_transposed : base.scatter)(cg.data(), nnz, mul, y.data(), w.data(),
                                                                src.data(), dst_base.data());
          ASSERT_EQ(dst, dst_base) << fastmlip::math::isa_name(isa) << " against base, mul " << mul;
          for (int b = 0; b < n_dst; ++b) {
            for (int u = 0; u < mul; ++u) {
              const std::size_t at = static_cast<std::size_t>(b) * mul + u;
              long double want = dst0[at], scale = std::abs(static_cast<long double>(dst0[at]));
              int terms = 1;
              for (const auto& c : cg) {
                const int to = transposed ? c.i : c.k, from = transposed ? c.k : c.i;
                if (to != b) {
                  continue;
                }
                const long double term =
                    static_cast<long double>(c.value) * y[c.j] * w[u] * src[from * mul + u];
                want += term;
                scale += std::abs(term);
                ++terms;
              }
              ASSERT_NEAR(static_cast<double>(dst[at]), static_cast<double>(want),
                          3 * Tol<T>::per_term * terms * static_cast<double>(scale) + 1e-300)
                  << fastmlip::math::isa_name(isa) << " mul " << mul << " nnz " << nnz << " transposed "
                  << transposed << " at " << b << ", " << u;
            }
          }
          for (int p = 0; p < kPad; ++p) {
            const std::size_t at = static_cast<std::size_t>(n_dst) * mul + p;
            ASSERT_EQ(dst[at], dst0[at]) << "wrote past the instruction's blocks";
          }
        }
      }
    }
  }
}

// grads: gw[u] += C y_j x[i][u] g[k][u]; gy[j] += C sum_u w[u] x[i][u] g[k][u].
TYPED_TEST(ChannelwiseTPSimdLevels, GradientsMatchLongDoubleSums) {
  using T = TypeParam;
  for (Isa isa : isa_levels()) {
    const auto& k = channelwise_tp_simd<T>(isa);
    for (int mul : kMuls) {
      for (int nnz : kNnz) {
        const auto cg = entries<T>(7 + mul + 17 * nnz, kN1, kN2, kN3, nnz);
        const auto y = random_values<T>(kN2, 11 + mul);
        const auto w = random_values<T>(mul, 12 + mul);
        const auto x = random_values<T>(static_cast<std::size_t>(kN1) * mul, 13 + mul);
        const auto g = random_values<T>(static_cast<std::size_t>(kN3) * mul, 14 + mul);
        const auto gw0 = random_values<T>(static_cast<std::size_t>(mul) + kPad, 15 + mul);
        const auto gy0 = random_values<T>(kN2 + kPad, 16 + mul);
        auto gw = gw0;
        auto gy = gy0;
        k.grads(cg.data(), nnz, mul, y.data(), w.data(), x.data(), g.data(), gw.data(), gy.data());
        auto gw_base = gw0;
        auto gy_base = gy0;
        channelwise_tp_simd<T>(Isa::base).grads(cg.data(), nnz, mul, y.data(), w.data(), x.data(), g.data(),
                                                gw_base.data(), gy_base.data());
        ASSERT_EQ(gw, gw_base) << fastmlip::math::isa_name(isa) << " against base, mul " << mul;
        ASSERT_EQ(gy, gy_base) << fastmlip::math::isa_name(isa) << " against base, mul " << mul;
        for (int u = 0; u < mul; ++u) {
          long double want = gw0[u], scale = std::abs(static_cast<long double>(gw0[u]));
          for (const auto& c : cg) {
            const long double term =
                static_cast<long double>(c.value) * y[c.j] * x[c.i * mul + u] * g[c.k * mul + u];
            want += term;
            scale += std::abs(term);
          }
          ASSERT_NEAR(static_cast<double>(gw[u]), static_cast<double>(want),
                      3 * Tol<T>::per_term * (nnz + 1) * static_cast<double>(scale) + 1e-300)
              << fastmlip::math::isa_name(isa) << " gw mul " << mul << " nnz " << nnz << " u " << u;
        }
        for (int j = 0; j < kN2; ++j) {
          long double want = gy0[j], scale = std::abs(static_cast<long double>(gy0[j]));
          for (const auto& c : cg) {
            if (c.j != j) {
              continue;
            }
            for (int u = 0; u < mul; ++u) {
              const long double term =
                  static_cast<long double>(c.value) * w[u] * x[c.i * mul + u] * g[c.k * mul + u];
              want += term;
              scale += std::abs(term);
            }
          }
          ASSERT_NEAR(static_cast<double>(gy[j]), static_cast<double>(want),
                      3 * Tol<T>::per_term * (nnz * mul + 1) * static_cast<double>(scale) + 1e-300)
              << fastmlip::math::isa_name(isa) << " gy mul " << mul << " nnz " << nnz << " j " << j;
        }
        for (int p = 0; p < kPad; ++p) {
          ASSERT_EQ(gw[mul + p], gw0[mul + p]) << "wrote past the weights";
          ASSERT_EQ(gy[kN2 + p], gy0[kN2 + p]) << "wrote past the attributes";
        }
      }
    }
  }
}

// The radial table's Hermite rows: hermite_values' out[j] = sum_q h[q] row_q[j] and
// hermite_dot's sum_j g[j] sum_q h[q] row_q[j], rows q at y0 + q width.
TYPED_TEST(ChannelwiseTPSimdLevels, HermiteRowsMatchLongDoubleAndTheBaseBits) {
  using T = TypeParam;
  const auto& base = channelwise_tp_simd<T>(Isa::base);
  for (int n : kMuls) {
    const int width = n + 3;  // rows longer than the instruction's slice, as in a table
    const auto rows = random_values<T>(4 * static_cast<std::size_t>(width), 21 + n);
    const auto h = random_values<T>(4, 22 + n);
    const auto g = random_values<T>(n, 23 + n);
    std::vector<T> want_base(n + kPad, T(777));
    base.hermite_values(rows.data(), width, h.data(), n, want_base.data());
    const T dot_base = base.hermite_dot(rows.data(), width, h.data(), n, g.data());
    long double dot = 0, dot_scale = 0;
    for (int j = 0; j < n; ++j) {
      long double v = 0, scale = 0;
      for (int q = 0; q < 4; ++q) {
        v += static_cast<long double>(h[q]) * rows[q * width + j];
        scale += std::abs(static_cast<long double>(h[q]) * rows[q * width + j]);
      }
      ASSERT_NEAR(want_base[j], static_cast<double>(v),
                  3 * Tol<T>::per_term * 4 * static_cast<double>(scale) + 1e-300)
          << "values, n " << n << " j " << j;
      dot += g[j] * v;
      dot_scale += std::abs(g[j] * scale);
    }
    ASSERT_NEAR(dot_base, static_cast<double>(dot),
                3 * Tol<T>::per_term * (n + 4) * static_cast<double>(dot_scale) + 1e-300)
        << "dot, n " << n;
    for (int p = 0; p < kPad; ++p) {
      ASSERT_EQ(want_base[n + p], T(777)) << "wrote past n";
    }
    for (Isa isa : isa_levels()) {
      const auto& k = channelwise_tp_simd<T>(isa);
      std::vector<T> out(n + kPad, T(777));
      k.hermite_values(rows.data(), width, h.data(), n, out.data());
      ASSERT_EQ(out, want_base) << fastmlip::math::isa_name(isa) << " values, n " << n;
      ASSERT_EQ(k.hermite_dot(rows.data(), width, h.data(), n, g.data()), dot_base)
          << fastmlip::math::isa_name(isa) << " dot, n " << n;
    }
  }
}

}  // namespace

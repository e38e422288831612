// SPDX-License-Identifier: MIT
// math/simd_kernels.hpp: every instruction-set level this machine can run (base, and avx2 /
// avx512 where the CPU has them) against plain reference loops and against the base level, in
// float and double, at sizes 0, 1, 13 and large, and at widths that leave every kind of tail
// (partial register panels, half registers, single columns, rows past the last block).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../common/isa_levels.hpp"
#include "core/error.hpp"
#include "math/simd_kernels.hpp"
#include "math/simd_math.hpp"

namespace {

using fastmlip::math::Isa;
using fastmlip::math::simd_kernels;
using fastmlip::test::isa_levels;
using fastmlip::test::random_values;

/// The one tolerance table of these tests, keyed by dtype: relative to the sum of the
/// magnitudes of the terms (a dot product of K terms rounds to about K eps of that sum; the
/// bound is loose by a small factor, not by orders).
template <class T>
struct Tolerance;
template <>
struct Tolerance<float> {
  static constexpr double per_term = 2e-7;  // times the number of terms added
  static constexpr double layer_norm = 2e-6;
};
template <>
struct Tolerance<double> {
  static constexpr double per_term = 4e-16;
  static constexpr double layer_norm = 4e-15;
};

template <class T>
class SimdKernels : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SimdKernels, Scalars);

const std::vector<std::size_t> kLengths = {0, 1, 13, 4099};

TEST(SimdKernelLevels, BaseIsAlwaysAvailableAndUnavailableLevelsThrow) {
  EXPECT_TRUE(fastmlip::math::isa_available(Isa::base));
  EXPECT_TRUE(fastmlip::math::isa_available(fastmlip::math::active_isa()));
  for (Isa isa : {Isa::base, Isa::avx2, Isa::avx512}) {
    if (!fastmlip::math::isa_available(isa)) {
      EXPECT_THROW(simd_kernels<float>(isa), fastmlip::UnsupportedError) << fastmlip::math::isa_name(isa);
    }
  }
  std::string names;
  for (Isa isa : isa_levels()) {
    names += std::string(" ") + fastmlip::math::isa_name(isa);
  }
  std::printf("levels available here:%s; active: %s\n", names.c_str(),
              fastmlip::math::isa_name(fastmlip::math::active_isa()));
}

// y (+)= bias + x M against a reference summed in long double, for shapes that exercise
// whole panels, every narrower register and single columns, and row counts off every block.
TYPED_TEST(SimdKernels, GemmMatchesReferenceAtEveryLevel) {
  using T = TypeParam;
  const std::vector<int> row_counts = {0, 1, 13, 32, 67};
  const std::vector<int> inner = {0, 1, 13, 64};
  const std::vector<int> cols = {1, 3, 13, 31, 64, 128, 200};
  for (Isa isa : isa_levels()) {
    const auto& k = simd_kernels<T>(isa);
    for (int rows : row_counts) {
      for (int K : inner) {
        for (int J : cols) {
          for (int mode = 0; mode < 3; ++mode) {  // 0: y = xM, 1: y = xM + bias, 2: y += xM
            const int ldx = K + 3, ldy = J + 5;   // leading dimensions past the used width
            const auto x = random_values<T>(static_cast<std::size_t>(rows) * ldx, 1 + rows + 7 * K);
            const auto M = random_values<T>(static_cast<std::size_t>(K) * J, 2 + J + 11 * K);
            const auto bias = random_values<T>(J, 3 + J);
            const auto y0 = random_values<T>(static_cast<std::size_t>(rows) * ldy, 4 + rows);
            std::vector<T> y = y0;
            k.gemm(x.data(), rows, ldx, K, M.data(), J, y.data(), ldy, mode == 2, mode == 1 ? bias.data() : nullptr);
            for (int r = 0; r < rows; ++r) {
              for (int j = 0; j < ldy; ++j) {
                const std::size_t at = static_cast<std::size_t>(r) * ldy + j;
                if (j >= J) {
                  ASSERT_EQ(y[at], y0[at]) << "wrote past column J";
                  continue;
                }
                long double want = mode == 2 ? y0[at] : mode == 1 ? bias[j] : 0;
                long double scale = std::abs(static_cast<long double>(want));
                for (int q = 0; q < K; ++q) {
                  const long double term = static_cast<long double>(x[static_cast<std::size_t>(r) * ldx + q]) *
                                           M[static_cast<std::size_t>(q) * J + j];
                  want += term;
                  scale += std::abs(term);
                }
                ASSERT_NEAR(static_cast<double>(y[at]), static_cast<double>(want),
                            Tolerance<T>::per_term * (K + 1) * static_cast<double>(scale) + 1e-300)
                    << fastmlip::math::isa_name(isa) << " rows " << rows << " K " << K << " J " << J << " mode "
                    << mode << " at (" << r << ", " << j << ")";
              }
            }
          }
        }
      }
    }
  }
}

// Every level gives the base level's bits for the activations and gathers (compiled without
// contraction, the same operations in the same order), and those bits are fast_exp's.
TYPED_TEST(SimdKernels, ElementwiseKernelsGiveTheBaseBitsAtEveryLevel) {
  using T = TypeParam;
  const auto& base = simd_kernels<T>(Isa::base);
  for (Isa isa : isa_levels()) {
    const auto& k = simd_kernels<T>(isa);
    for (std::size_t n : kLengths) {
      const auto z = random_values<T>(n, 10 + n, -30, 30);
      const auto c = random_values<T>(n, 11 + n, -8, 8);
      const auto g = random_values<T>(n, 12 + n, -8, 8);
      const auto gy = random_values<T>(n, 13 + n);
      std::vector<T> e(n), s(n), s_base(n), a(n), a_base(n);
      k.exp(z.data(), e.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(e[i], fastmlip::math::fast_exp(z[i])) << fastmlip::math::isa_name(isa) << " exp at " << z[i];
      }
      k.sigmoid(z.data(), s.data(), n);
      base.sigmoid(z.data(), s_base.data(), n);
      ASSERT_EQ(s, s_base) << fastmlip::math::isa_name(isa) << " sigmoid, n = " << n;
      k.silu_forward(z.data(), s.data(), a.data(), n);
      base.silu_forward(z.data(), s_base.data(), a_base.data(), n);
      ASSERT_EQ(s, s_base) << fastmlip::math::isa_name(isa) << " silu_forward, n = " << n;
      ASSERT_EQ(a, a_base) << fastmlip::math::isa_name(isa) << " silu_forward, n = " << n;
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(a[i], z[i] * s[i]);
      }
      std::vector<T> gs = gy, gs_base = gy;
      k.silu_backward(z.data(), s.data(), gs.data(), n);
      base.silu_backward(z.data(), s.data(), gs_base.data(), n);
      ASSERT_EQ(gs, gs_base) << fastmlip::math::isa_name(isa) << " silu_backward, n = " << n;

      std::vector<T> sc(n), sg(n), y(n), sc_b(n), sg_b(n), y_b(n);
      k.gate_forward(c.data(), g.data(), sc.data(), sg.data(), y.data(), n);
      base.gate_forward(c.data(), g.data(), sc_b.data(), sg_b.data(), y_b.data(), n);
      ASSERT_EQ(y, y_b) << fastmlip::math::isa_name(isa) << " gate_forward, n = " << n;
      ASSERT_EQ(sc, sc_b);
      ASSERT_EQ(sg, sg_b);
      for (std::size_t i = 0; i < n; ++i) {
        const T ref = c[i] / (T(1) + std::exp(-c[i])) / (T(1) + std::exp(-g[i]));
        ASSERT_NEAR(y[i], ref, 8 * std::numeric_limits<T>::epsilon() * (std::abs(ref) + T(1e-30)));
      }
      std::vector<T> gc(n), gg(n), gc_b(n), gg_b(n);
      k.gate_backward(gy.data(), c.data(), sc.data(), sg.data(), gc.data(), gg.data(), n);
      base.gate_backward(gy.data(), c.data(), sc.data(), sg.data(), gc_b.data(), gg_b.data(), n);
      ASSERT_EQ(gc, gc_b) << fastmlip::math::isa_name(isa) << " gate_backward, n = " << n;
      ASSERT_EQ(gg, gg_b);
      for (std::size_t i = 0; i < n; ++i) {
        // d/dc [c sc sg] = sg sc (1 + c (1 - sc)); d/dg = c sc sg (1 - sg)
        const double dc = sg[i] * sc[i] * (1.0 + c[i] * (1.0 - sc[i])), dg = c[i] * sc[i] * sg[i] * (1.0 - sg[i]);
        ASSERT_NEAR(gc[i], gy[i] * dc, 8 * std::numeric_limits<T>::epsilon());
        ASSERT_NEAR(gg[i], gy[i] * dg, 8 * std::numeric_limits<T>::epsilon());
      }
    }
  }
}

TYPED_TEST(SimdKernels, RowGathersAndScattersGiveTheBaseBitsAtEveryLevel) {
  using T = TypeParam;
  const auto& base = simd_kernels<T>(Isa::base);
  for (Isa isa : isa_levels()) {
    const auto& k = simd_kernels<T>(isa);
    for (int rows : {0, 1, 13, 300}) {
      for (int width : {1, 13, 64, 128, 131}) {
        const int n_src = 17;
        // Indices of a longer table whose rows kBase.. the kernels see (a window on it).
        constexpr int kBase = 5;
        std::vector<int> idx(rows);
        for (int t = 0; t < rows; ++t) {
          idx[t] = kBase + (t * 7 + 3) % n_src;  // repeated indices: the scatter's order matters
        }
        const auto src = random_values<T>(static_cast<std::size_t>(n_src) * width, 20 + width);
        const auto dst0 = random_values<T>(static_cast<std::size_t>(rows) * width, 21 + rows);
        std::vector<T> dst = dst0, dst_b = dst0;
        k.add_rows(src.data(), idx.data(), kBase, rows, width, dst.data());
        base.add_rows(src.data(), idx.data(), kBase, rows, width, dst_b.data());
        ASSERT_EQ(dst, dst_b) << fastmlip::math::isa_name(isa) << " add_rows " << rows << " x " << width;
        for (int t = 0; t < rows; ++t) {
          for (int j = 0; j < width; ++j) {
            const std::size_t at = static_cast<std::size_t>(t) * width + j;
            ASSERT_EQ(dst[at], dst0[at] + src[static_cast<std::size_t>(idx[t] - kBase) * width + j]);
          }
        }
        // scatter: rows of dst0 into the n_src rows of acc
        std::vector<T> acc(src), acc_b(src), acc_ref(src);
        k.scatter_rows(dst0.data(), idx.data(), kBase, rows, width, acc.data());
        base.scatter_rows(dst0.data(), idx.data(), kBase, rows, width, acc_b.data());
        ASSERT_EQ(acc, acc_b) << fastmlip::math::isa_name(isa) << " scatter_rows " << rows << " x " << width;
        for (int t = 0; t < rows; ++t) {
          for (int j = 0; j < width; ++j) {
            acc_ref[static_cast<std::size_t>(idx[t] - kBase) * width + j] +=
                dst0[static_cast<std::size_t>(t) * width + j];
          }
        }
        ASSERT_EQ(acc, acc_ref);
      }
    }
  }
}

// LayerNorm forward and backward against a two-pass reference in long double; the levels
// differ only in the order of the row sums.
TYPED_TEST(SimdKernels, LayerNormMatchesReferenceAtEveryLevel) {
  using T = TypeParam;
  const T eps = static_cast<T>(1e-5);
  for (Isa isa : isa_levels()) {
    const auto& k = simd_kernels<T>(isa);
    for (int rows : {0, 1, 13, 40}) {
      for (int dim : {1, 13, 64, 131}) {
        const std::size_t n = static_cast<std::size_t>(rows) * dim;
        const auto y0 = random_values<T>(n, 30 + dim, -3, 5);
        const auto gamma = random_values<T>(dim, 31 + dim, 0.5, 1.5);
        const auto beta = random_values<T>(dim, 32 + dim);
        const auto g0 = random_values<T>(n, 33 + rows);
        std::vector<T> y = y0, yhat(n), inv(rows), g = g0;
        k.layer_norm_forward(y.data(), yhat.data(), inv.data(), gamma.data(), beta.data(), rows, dim, eps);
        k.layer_norm_backward(g.data(), yhat.data(), inv.data(), gamma.data(), rows, dim);
        for (int r = 0; r < rows; ++r) {
          const T* yr = y0.data() + static_cast<std::size_t>(r) * dim;
          long double mean = 0, var = 0;
          for (int j = 0; j < dim; ++j) {
            mean += yr[j];
          }
          mean /= dim;
          for (int j = 0; j < dim; ++j) {
            var += (yr[j] - mean) * (yr[j] - mean);
          }
          var /= dim;
          const long double is = 1 / std::sqrt(var + eps);
          ASSERT_NEAR(static_cast<double>(inv[r]), static_cast<double>(is), Tolerance<T>::layer_norm * is);
          std::vector<long double> h(dim), gh(dim);
          long double m1 = 0, m2 = 0;
          for (int j = 0; j < dim; ++j) {
            h[j] = (yr[j] - mean) * is;
            gh[j] = static_cast<long double>(g0[static_cast<std::size_t>(r) * dim + j]) * gamma[j];
            m1 += gh[j];
            m2 += gh[j] * h[j];
          }
          m1 /= dim;
          m2 /= dim;
          for (int j = 0; j < dim; ++j) {
            const std::size_t at = static_cast<std::size_t>(r) * dim + j;
            ASSERT_NEAR(static_cast<double>(yhat[at]), static_cast<double>(h[j]), Tolerance<T>::layer_norm * 4)
                << fastmlip::math::isa_name(isa) << " rows " << rows << " dim " << dim;
            ASSERT_NEAR(static_cast<double>(y[at]), static_cast<double>(h[j] * gamma[j] + beta[j]),
                        Tolerance<T>::layer_norm * 8);
            const long double want = is * (gh[j] - m1 - h[j] * m2);
            ASSERT_NEAR(static_cast<double>(g[at]), static_cast<double>(want), Tolerance<T>::layer_norm * 8 * is)
                << fastmlip::math::isa_name(isa) << " backward, rows " << rows << " dim " << dim;
          }
        }
      }
    }
  }
}

}  // namespace

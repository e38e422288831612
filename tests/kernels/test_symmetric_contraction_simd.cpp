// SPDX-License-Identifier: MIT
// kernels/symmetric_contraction_simd.hpp: the symmetric contraction's row kernels at every
// instruction-set level this machine can run, on random prefix trees and entries, against
// sums and derivatives in long double and against the base level's bits, in float and double,
// at channel counts below, at and past one block (8 or 16) and with partial blocks. The
// forward writes the entries' components only; the reverse every ell of every channel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "../common/isa_levels.hpp"
#include "core/error.hpp"
#include "kernels/symmetric_contraction_simd.hpp"

namespace {

using fastmlip::kernels::kSCSimdBlock;
using fastmlip::kernels::SCSimdShape;
using fastmlip::kernels::symmetric_contraction_simd;
using fastmlip::kernels::impl::SCEntryDev;
using fastmlip::kernels::impl::SCMonomialDev;
using fastmlip::math::Isa;
using fastmlip::test::isa_levels;
using fastmlip::test::random_values;

template <class T>
class SymmetricContractionSimdLevels : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SymmetricContractionSimdLevels, Scalars);

// A random contraction: num_ell ells (row layout [channel][ell]), monomials of degree up to 3
// as a prefix tree (parents first), P output components per channel (row layout
// [channel][P] after a gap of 2 unused columns), entries on random monomials.
struct Problem {
  int num_ell = 4, P = 3, channels = 1, gap = 2;
  std::vector<SCMonomialDev> mono;
  std::vector<int> degree;
  std::vector<SCEntryDev> entries;
  std::vector<int> ell_offset, ell_stride;
  SCSimdShape shape(int ld) const {
    return SCSimdShape{mono.data(),
                       entries.data(),
                       ell_offset.data(),
                       ell_stride.data(),
                       static_cast<int>(mono.size()),
                       static_cast<int>(entries.size()),
                       num_ell,
                       channels,
                       P,
                       ld};
  }
  int dim_in() const { return channels * num_ell; }
  int dim_out() const { return gap + channels * P; }
};

Problem problem(int channels, unsigned seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.channels = channels;
  for (int i = 0; i < p.num_ell; ++i) {
    p.ell_offset.push_back(i);
    p.ell_stride.push_back(p.num_ell);
    p.mono.push_back({-1, i});
    p.degree.push_back(1);
  }
  for (int t = 0; t < 14; ++t) {  // children of earlier monomials of degree < 3
    int parent = 0;
    do {
      parent = static_cast<int>(rng() % p.mono.size());
    } while (p.degree[parent] >= 3);
    p.mono.push_back({parent, static_cast<int>(rng() % p.num_ell)});
    p.degree.push_back(p.degree[parent] + 1);
  }
  for (int g = 0; g < 23; ++g) {
    const int local = static_cast<int>(rng() % p.P);
    p.entries.push_back({p.gap + local, p.P, local, static_cast<int>(rng() % p.mono.size())});
  }
  return p;
}

// Monomial values and their derivatives by each ell, of one channel, in long double.
void tree(const Problem& p, const std::vector<long double>& x, std::vector<long double>& m,
          std::vector<std::vector<long double>>& dm) {
  m.assign(p.mono.size(), 0);
  dm.assign(p.mono.size(), std::vector<long double>(p.num_ell, 0));
  for (std::size_t t = 0; t < p.mono.size(); ++t) {
    const auto md = p.mono[t];
    if (md.parent < 0) {
      m[t] = x[md.last];
      dm[t][md.last] = 1;
    } else {
      m[t] = m[md.parent] * x[md.last];
      for (int i = 0; i < p.num_ell; ++i) {
        dm[t][i] = dm[md.parent][i] * x[md.last] + (i == md.last ? m[md.parent] : 0);
      }
    }
  }
}

// One node per call.
template <class T>
void forward1(const fastmlip::kernels::SymmetricContractionSimd<T>& k, const SCSimdShape& s,
              const std::vector<T>& coef, const std::vector<T>& x, std::vector<T>& out,
              std::vector<T>& scratch) {
  const T* c = coef.data();
  const T* xp = x.data();
  T* o = out.data();
  k.forward(s, 1, &c, &xp, &o, scratch.data());
}
template <class T>
void reverse1(const fastmlip::kernels::SymmetricContractionSimd<T>& k, const SCSimdShape& s,
              const std::vector<T>& coef, const std::vector<T>& x, const std::vector<T>& go,
              std::vector<T>& gx, std::vector<T>& scratch) {
  const T* c = coef.data();
  const T* xp = x.data();
  const T* g = go.data();
  T* o = gx.data();
  k.reverse(s, 1, &c, &xp, &g, &o, scratch.data());
}

TYPED_TEST(SymmetricContractionSimdLevels, MatchLongDoubleAndTheBaseBits) {
  using T = TypeParam;
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-13;
  for (int channels : {1, 5, 8, 13, 16, 17, 40}) {
    const Problem p = problem(channels, 100 + channels);
    const int B = kSCSimdBlock<T>;
    const int ld = (channels + 15) / 16 * 16;
    const SCSimdShape s = p.shape(ld);
    auto coef = random_values<T>(p.entries.size() * ld, 1 + channels);
    for (std::size_t g = 0; g < p.entries.size(); ++g) {  // the padding is zero, as uploaded
      for (int c = channels; c < ld; ++c) {
        coef[g * ld + c] = T(0);
      }
    }
    const auto x = random_values<T>(p.dim_in(), 2 + channels);
    const auto go = random_values<T>(p.dim_out(), 3 + channels);
    std::vector<T> scratch(s.scratch<T>());
    ASSERT_EQ(s.scratch<T>(), (2 * p.num_ell + 2 * static_cast<int>(p.mono.size()) + p.P) * B);
    std::vector<T> out_base(p.dim_out(), T(777)), gx_base(p.dim_in(), T(777));
    const auto& base = symmetric_contraction_simd<T>(Isa::base);
    forward1(base, s, coef, x, out_base, scratch);
    reverse1(base, s, coef, x, go, gx_base, scratch);
    // Long double: out[gap + c P + q] = sum_{g: local q} coef[g][c] m_g(x_c);
    // grad_x[c][i] = sum_g coef[g][c] go[out_g + c P] dm_g / dx_i.
    for (int c = 0; c < channels; ++c) {
      std::vector<long double> xc(p.num_ell), m;
      std::vector<std::vector<long double>> dm;
      for (int i = 0; i < p.num_ell; ++i) {
        xc[i] = x[c * p.num_ell + i];
      }
      tree(p, xc, m, dm);
      std::vector<long double> want(p.P, 0), gwant(p.num_ell, 0);
      std::vector<bool> written(p.P, false);
      for (std::size_t g = 0; g < p.entries.size(); ++g) {
        const auto en = p.entries[g];
        want[en.local] += coef[g * ld + c] * m[en.monomial];
        written[en.local] = true;
        for (int i = 0; i < p.num_ell; ++i) {
          gwant[i] += coef[g * ld + c] * go[en.out + c * en.stride] * dm[en.monomial][i];
        }
      }
      for (int q = 0; q < p.P; ++q) {
        const T got = out_base[p.gap + c * p.P + q];
        if (written[q]) {
          ASSERT_NEAR(got, static_cast<double>(want[q]), tol * (1 + std::abs(static_cast<double>(want[q]))))
              << "out, channel " << c << " of " << channels << ", component " << q;
        } else {
          ASSERT_EQ(got, T(777)) << "wrote a component no entry has";
        }
      }
      for (int i = 0; i < p.num_ell; ++i) {
        ASSERT_NEAR(gx_base[c * p.num_ell + i], static_cast<double>(gwant[i]),
                    tol * (1 + std::abs(static_cast<double>(gwant[i]))))
            << "grad_x, channel " << c << " of " << channels << ", ell " << i;
      }
    }
    for (int j = 0; j < p.gap; ++j) {
      ASSERT_EQ(out_base[j], T(777)) << "wrote a column before the output";
    }
    for (Isa isa : isa_levels()) {
      const auto& k = symmetric_contraction_simd<T>(isa);
      std::vector<T> out(p.dim_out(), T(777)), gx(p.dim_in(), T(777));
      forward1(k, s, coef, x, out, scratch);
      reverse1(k, s, coef, x, go, gx, scratch);
      ASSERT_EQ(out, out_base) << fastmlip::math::isa_name(isa) << ", " << channels << " channels";
      ASSERT_EQ(gx, gx_base) << fastmlip::math::isa_name(isa) << ", " << channels << " channels";
    }
  }
}

// Several nodes per call (the host functor passes 16), some sharing coefficients: each node's
// rows are those of a call with that node alone, bit for bit, at every level.
TYPED_TEST(SymmetricContractionSimdLevels, SeveralNodesPerCallGiveEachNodesOwnBits) {
  using T = TypeParam;
  for (int channels : {3, 17, 40}) {
    const Problem p = problem(channels, 300 + channels);
    const int ld = (channels + 15) / 16 * 16;
    const SCSimdShape s = p.shape(ld);
    constexpr int kNodes = 5;
    std::vector<std::vector<T>> coef, x, go, out(kNodes), gx(kNodes);
    for (int e = 0; e < 2; ++e) {  // two elements
      coef.push_back(random_values<T>(p.entries.size() * ld, 40 + e));
      for (std::size_t g = 0; g < p.entries.size(); ++g) {
        for (int c = channels; c < ld; ++c) {
          coef.back()[g * ld + c] = T(0);
        }
      }
    }
    const int element[kNodes] = {0, 1, 1, 0, 1};
    for (int n = 0; n < kNodes; ++n) {
      x.push_back(random_values<T>(p.dim_in(), 50 + n));
      go.push_back(random_values<T>(p.dim_out(), 60 + n));
    }
    std::vector<T> scratch(s.scratch<T>());
    for (Isa isa : isa_levels()) {
      const auto& k = symmetric_contraction_simd<T>(isa);
      const T *cp[kNodes], *xp[kNodes], *gp[kNodes];
      T *op[kNodes], *gxp[kNodes];
      for (int n = 0; n < kNodes; ++n) {
        out[n].assign(p.dim_out(), T(777));
        gx[n].assign(p.dim_in(), T(777));
        cp[n] = coef[element[n]].data();
        xp[n] = x[n].data();
        gp[n] = go[n].data();
        op[n] = out[n].data();
        gxp[n] = gx[n].data();
      }
      k.forward(s, kNodes, cp, xp, op, scratch.data());
      k.reverse(s, kNodes, cp, xp, gp, gxp, scratch.data());
      for (int n = 0; n < kNodes; ++n) {
        std::vector<T> out1(p.dim_out(), T(777)), gx1(p.dim_in(), T(777));
        forward1(k, s, coef[element[n]], x[n], out1, scratch);
        reverse1(k, s, coef[element[n]], x[n], go[n], gx1, scratch);
        ASSERT_EQ(out[n], out1) << fastmlip::math::isa_name(isa) << ", node " << n << ", " << channels
                                << " channels";
        ASSERT_EQ(gx[n], gx1) << fastmlip::math::isa_name(isa) << ", node " << n << ", " << channels
                              << " channels";
      }
    }
  }
}

TEST(SymmetricContractionSimdLevels, UnavailableLevelsThrow) {
  EXPECT_NO_THROW(symmetric_contraction_simd<float>());
  for (Isa isa : {Isa::base, Isa::avx2, Isa::avx512}) {
    if (!fastmlip::math::isa_available(isa)) {
      EXPECT_THROW(symmetric_contraction_simd<double>(isa), fastmlip::UnsupportedError)
          << fastmlip::math::isa_name(isa);
    }
  }
}

}  // namespace

// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/distance_transform.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "kernels/reference/radial_basis_ref.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using test::Tolerance;

// MACE (harmonic, recurrence path) and CHGNet after training (frequencies moved: direct path).
std::vector<RadialBasisParams> radial_cases() {
  std::vector<double> trained;
  for (int n = 1; n <= 9; ++n) {
    trained.push_back(n * M_PI * (1.0 + 0.013 * std::sin(3.0 * n)));
  }
  return {RadialBasisParams::mace(8, 5.0, 5), RadialBasisParams::mace(1, 4.0, 6),
          RadialBasisParams::chgnet(trained, 6.0),
          RadialBasisParams::chgnet({M_PI, 2 * M_PI, 3 * M_PI}, 3.0)};
}

// Edge lengths from 0.3 A to 10% beyond the cutoff (the envelope must zero those).
std::vector<double> lengths(int n, double r_max, std::uint64_t seed) {
  test::Uniform u(seed);
  std::vector<double> r(n);
  for (double& x : r) {
    x = u(0.3, 1.1 * r_max);
  }
  return r;
}

template <class T>
Kokkos::View<T*, Exec> to_view(const std::vector<double>& v) {
  Kokkos::View<T*, Exec> out("v", v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out(i) = static_cast<T>(v[i]);
  }
  return out;
}

template <class T>
class RadialBasis : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RadialBasis, Dtypes);

TYPED_TEST(RadialBasis, KokkosMatchesReference) {
  using T = TypeParam;
  for (const auto& p : radial_cases()) {
    const RadialBasisKokkos<Exec, T> k(p);
    for (int E : test::test_sizes()) {
      const auto rd = lengths(E, p.r_max, 1 + E);
      auto r = to_view<T>(rd);
      Kokkos::View<T**, Kokkos::LayoutRight, Exec> out("out", E, p.num_basis());
      Kokkos::deep_copy(out, T(777));  // poison: every element must be written
      k.compute(r, out);
      std::vector<T> rt(r.data(), r.data() + E), ref(static_cast<std::size_t>(E) * p.num_basis());
      reference::compute_radial_basis(p, E, rt.data(), ref.data());
      const double scale = p.c() / 0.3;  // |R_n| <= c / r
      for (int e = 0; e < E; ++e) {
        for (int n = 0; n < p.num_basis(); ++n) {
          ASSERT_NEAR(out(e, n), ref[e * p.num_basis() + n], Tolerance<T>::kernel * scale)
              << "edge " << e << " n " << n << " r " << rt[e] << (p.harmonic() ? " (harmonic)" : "");
        }
      }
    }
  }
}

TYPED_TEST(RadialBasis, ReverseMatchesReferenceAndFiniteDifferences) {
  using T = TypeParam;
  for (const auto& p : radial_cases()) {
    const RadialBasisKokkos<Exec, T> k(p);
    for (int E : test::test_sizes()) {
      const auto rd = lengths(E, p.r_max, 100 + E);
      const auto gd = lengths(E * p.num_basis(), 1.0, 200 + E);  // arbitrary upstream gradient
      auto r = to_view<T>(rd);
      Kokkos::View<T**, Kokkos::LayoutRight, Exec> g("g", E, p.num_basis());
      for (int i = 0; i < E * p.num_basis(); ++i) {
        g.data()[i] = static_cast<T>(gd[i] - 0.5);
      }
      Kokkos::View<T*, Exec> grad_r("grad_r", E), grad_w("grad_w", p.num_basis());
      Kokkos::deep_copy(grad_r, T(777));
      k.reverse(r, g, grad_r);
      k.reverse_frequencies(r, g, grad_w);

      // Finite differences of the double-precision reference, with the same (rounded) inputs.
      std::vector<double> rr(E), gg(g.data(), g.data() + E * p.num_basis());
      for (int e = 0; e < E; ++e) {
        rr[e] = static_cast<double>(r(e));
      }
      auto loss = [&](const RadialBasisParams& q, const std::vector<double>& x) {
        std::vector<double> out(static_cast<std::size_t>(E) * q.num_basis());
        reference::compute_radial_basis(q, E, x.data(), out.data());
        double s = 0;
        for (std::size_t i = 0; i < out.size(); ++i) {
          s += out[i] * gg[i];
        }
        return s;
      };
      const double h = 1e-6;
      for (int e = 0; e < E; e += std::max(1, E / 50)) {
        auto xp = rr, xm = rr;
        xp[e] += h;
        xm[e] -= h;
        const double fd = (loss(p, xp) - loss(p, xm)) / (2 * h);
        const double scale = std::max(1.0, std::abs(fd));
        EXPECT_NEAR(grad_r(e), fd, (Tolerance<T>::fd + (std::is_same_v<T, float> ? 2e-4 : 0.0)) * scale * 10)
            << "edge " << e << " r " << rr[e];
      }
      for (int n = 0; n < p.num_basis(); ++n) {
        auto qp = p, qm = p;
        qp.frequencies[n] += h;
        qm.frequencies[n] -= h;
        const double fd = (loss(qp, rr) - loss(qm, rr)) / (2 * h);
        const double scale = std::max(1.0, std::abs(fd));
        EXPECT_NEAR(grad_w(n), fd, (std::is_same_v<T, float> ? 1e-3 : 1e-6) * scale) << "frequency " << n;
      }
    }
  }
}

// The basis at an Agnesi-transformed distance (MPA-0, OMAT-0, MP-0b3): compute_at against the
// reference, and reverse_at -- the whole d/dr through x(r) and the envelope -- against finite
// differences of the reference composed with the transform, for two element pairs.
TYPED_TEST(RadialBasis, TransformedDistanceMatchesReferenceAndFiniteDifferences) {
  using T = TypeParam;
  const auto p = RadialBasisParams::mace(8, 6.0, 5);
  const RadialBasisKokkos<Exec, T> k(p);
  const double a = 1.0805, q = 0.9183, pp = 4.5791;
  auto transform = [&](double r, double r0, double& x, double& dxdr) {
    impl::agnesi_transform(r, r0, a, q, pp, x, dxdr);
  };
  for (double r0 : {0.66, 1.39}) {  // (C + C) / 2 and (Ni + Au) / 2 in ase's covalent radii
    for (int E : test::test_sizes()) {
      const auto rd = lengths(E, p.r_max, 300 + E);
      const auto gd = lengths(E * p.num_basis(), 1.0, 400 + E);
      std::vector<double> xd(E), sd(E);
      for (int e = 0; e < E; ++e) {
        transform(rd[e], r0, xd[e], sd[e]);
        ASSERT_GT(xd[e], 0.0);
        ASSERT_LE(xd[e], 1.0);
        ASSERT_LT(sd[e], 0.0) << "x must fall with r";
      }
      auto r = to_view<T>(rd), x = to_view<T>(xd), dxdr = to_view<T>(sd);
      Kokkos::View<T**, Kokkos::LayoutRight, Exec> out("out", E, p.num_basis()), g("g", E, p.num_basis());
      Kokkos::deep_copy(out, T(777));
      k.compute_at(x, r, out);
      std::vector<T> xt(x.data(), x.data() + E), rt(r.data(), r.data() + E),
          ref(static_cast<std::size_t>(E) * p.num_basis());
      reference::compute_radial_basis_at(p, E, xt.data(), rt.data(), ref.data());
      for (int i = 0; i < E * p.num_basis(); ++i) {
        ASSERT_NEAR(out.data()[i], ref[i], Tolerance<T>::kernel * p.c() / std::max(1e-3, xd[i / p.num_basis()]))
            << "entry " << i;
        g.data()[i] = static_cast<T>(gd[i] - 0.5);
      }
      Kokkos::View<T*, Exec> grad_r("grad_r", E);
      Kokkos::deep_copy(grad_r, T(777));
      k.reverse_at(x, dxdr, r, g, grad_r);
      std::vector<T> st(dxdr.data(), dxdr.data() + E), gt(g.data(), g.data() + E * p.num_basis()), gref(E);
      reference::reverse_radial_basis_at(p, E, xt.data(), st.data(), rt.data(), gt.data(), gref.data());
      auto loss = [&](double rr, int e) {
        double xx, dd;
        transform(rr, r0, xx, dd);
        std::vector<double> o(p.num_basis());
        reference::compute_radial_basis_at(p, 1, &xx, &rr, o.data());
        double sum = 0;
        for (int n = 0; n < p.num_basis(); ++n) {
          sum += o[n] * static_cast<double>(gt[e * p.num_basis() + n]);
        }
        return sum;
      };
      const double h = 1e-6;
      for (int e = 0; e < E; e += std::max(1, E / 50)) {
        const double re = static_cast<double>(rt[e]);
        const double fd = (loss(re + h, e) - loss(re - h, e)) / (2 * h);
        const double scale = std::max(1.0, std::abs(fd));
        EXPECT_NEAR(gref[e], fd, 1e-6 * scale) << "reference, edge " << e << " r " << re;
        EXPECT_NEAR(grad_r(e), gref[e], (std::is_same_v<T, float> ? 2e-3 : 1e-9) * scale) << "edge " << e;
      }
    }
  }
}

// mace-torch's other radial_types. Gaussian: a centre at 0 and at r_max, N = 2 the smallest;
// Chebyshev: T_1..T_N at r itself, whose values grow to ~r^N (checked relative to the largest).
// Each plain (compute / reverse) and at a Soft-transformed distance (compute_at / reverse_at):
// against the reference (closed forms, not the kernel's recurrence) and its finite differences.
TYPED_TEST(RadialBasis, GaussianAndChebyshevMatchReferenceAndFiniteDifferences) {
  using T = TypeParam;
  const std::vector<RadialBasisParams> cases = {
      RadialBasisParams::gaussian(8, 5.0, 6), RadialBasisParams::gaussian(2, 4.0, 5),
      RadialBasisParams::chebyshev(6, 4.5, 5), RadialBasisParams::chebyshev(1, 5.0, 5),
      RadialBasisParams::chebyshev(10, 6.0, 5)};
  const double alpha = 4.0;
  for (const auto& p : cases) {
    const RadialBasisKokkos<Exec, T> k(p);
    const int N = p.num_basis();
    for (bool transformed : {false, true}) {
      for (int E : test::test_sizes()) {
        const double rsum = 2.48;  // Ni + Ni in ase's covalent radii
        const auto rd = lengths(E, p.r_max, 500 + E);
        const auto gd = lengths(E * N, 1.0, 600 + E);
        std::vector<double> xd(rd), sd(E, 1.0);
        if (transformed) {
          for (int e = 0; e < E; ++e) {
            impl::soft_transform(rd[e], rsum, alpha, xd[e], sd[e]);
          }
        }
        auto r = to_view<T>(rd), x = to_view<T>(xd), dxdr = to_view<T>(sd);
        Kokkos::View<T**, Kokkos::LayoutRight, Exec> out("out", E, N), g("g", E, N);
        Kokkos::deep_copy(out, T(777));
        if (transformed) {
          k.compute_at(x, r, out);
        } else {
          k.compute(r, out);
        }
        std::vector<T> xt(x.data(), x.data() + E), rt(r.data(), r.data() + E),
            st(dxdr.data(), dxdr.data() + E), ref(static_cast<std::size_t>(E) * N);
        reference::compute_radial_basis_at(p, E, xt.data(), rt.data(), ref.data());
        double largest = 1.0;
        for (T v : ref) {
          largest = std::max(largest, std::abs(static_cast<double>(v)));
        }
        for (int i = 0; i < E * N; ++i) {
          // Near the cutoff the envelope is a difference of terms up to (p+1)(p+2)/2 times larger
          // than itself, so its rounding error is that times b_n(x) (large for Chebyshev).
          double b, db;
          reference::basis_function(p, i % N, static_cast<double>(xt[i / N]), b, db);
          const double scale = std::max(largest, 0.5 * (p.envelope_p + 1) * (p.envelope_p + 2) * std::abs(b));
          ASSERT_NEAR(out.data()[i], ref[i], Tolerance<T>::kernel * scale)
              << p.name() << (transformed ? " (Soft)" : "") << " entry " << i;
          g.data()[i] = static_cast<T>(gd[i] - 0.5);
        }
        Kokkos::View<T*, Exec> grad_r("grad_r", E);
        Kokkos::deep_copy(grad_r, T(777));
        if (transformed) {
          k.reverse_at(x, dxdr, r, g, grad_r);
        } else {
          k.reverse(r, g, grad_r);
        }
        std::vector<T> gt(g.data(), g.data() + E * N), gref(E);
        reference::reverse_radial_basis_at(p, E, xt.data(), st.data(), rt.data(), gt.data(), gref.data());
        auto loss = [&](double rr, int e) {
          double xx = rr, dd = 1.0;
          if (transformed) {
            impl::soft_transform(rr, rsum, alpha, xx, dd);
          }
          std::vector<double> o(N);
          reference::compute_radial_basis_at(p, 1, &xx, &rr, o.data());
          double sum = 0;
          for (int n = 0; n < N; ++n) {
            sum += o[n] * static_cast<double>(gt[e * N + n]);
          }
          return sum;
        };
        const double h = 1e-6;
        for (int e = 0; e < E; e += std::max(1, E / 50)) {
          const double re = static_cast<double>(rt[e]);
          const double fd = (loss(re + h, e) - loss(re - h, e)) / (2 * h);
          const double scale = std::max({1.0, std::abs(fd), largest / re});
          EXPECT_NEAR(gref[e], fd, 1e-6 * scale) << p.name() << " reference, edge " << e << " r " << re;
          EXPECT_NEAR(grad_r(e), gref[e], (std::is_same_v<T, float> ? 2e-3 : 1e-9) * scale)
              << p.name() << (transformed ? " (Soft)" : "") << " edge " << e;
        }
      }
    }
    // The frequencies' gradient is CHGNet's (Bessel); these bases have none to learn.
    Kokkos::View<T*, Exec> r1("r", 1), gw("gw", N);
    Kokkos::View<T**, Kokkos::LayoutRight, Exec> g1("g", 1, N);
    Kokkos::deep_copy(r1, T(1));
    EXPECT_THROW(k.reverse_frequencies(r1, g1, gw), UnsupportedError);
  }
}

// mace-torch's apply_cutoff False (MACE-OMOL): the basis without its envelope, b_n(x) alone, for
// every kind and at a transformed distance; compute and reverse against the reference's closed
// forms and finite differences, and the envelope the default basis carries is exactly the
// factor between the two.
TYPED_TEST(RadialBasis, WithoutTheEnvelopeIsTheBareBasis) {
  using T = TypeParam;
  std::vector<RadialBasisParams> cases = {RadialBasisParams::mace(8, 5.0, 5),
                                          RadialBasisParams::gaussian(8, 5.0, 6),
                                          RadialBasisParams::chebyshev(5, 4.5, 5)};
  for (const auto& with : cases) {
    auto bare = with;
    bare.apply_cutoff = false;
    const RadialBasisKokkos<Exec, T> kw(with), kb(bare);
    const int N = bare.num_basis();
    for (bool transformed : {false, true}) {
      for (int E : test::test_sizes()) {
        const auto rd = lengths(E, bare.r_max * 0.95, 700 + E);  // inside the cutoff: f_p > 0
        const auto gd = lengths(E * N, 1.0, 800 + E);
        std::vector<double> xd(rd), sd(E, 1.0);
        if (transformed) {
          for (int e = 0; e < E; ++e) {
            impl::soft_transform(rd[e], 2.48, 4.0, xd[e], sd[e]);
          }
        }
        auto r = to_view<T>(rd), x = to_view<T>(xd), dxdr = to_view<T>(sd);
        Kokkos::View<T**, Kokkos::LayoutRight, Exec> ob("ob", E, N), ow("ow", E, N), g("g", E, N);
        Kokkos::deep_copy(ob, T(777));
        if (transformed) {
          kb.compute_at(x, r, ob);
          kw.compute_at(x, r, ow);
        } else {
          kb.compute(r, ob);
          kw.compute(r, ow);
        }
        double largest = 1.0;
        for (int i = 0; i < E * N; ++i) {
          largest = std::max(largest, std::abs(static_cast<double>(ob.data()[i])));
        }
        for (int i = 0; i < E * N; ++i) {
          const int e = i / N, n = i % N;
          double b, db;
          reference::basis_function(bare, n, static_cast<double>(x(e)), b, db);
          ASSERT_NEAR(ob.data()[i], b, Tolerance<T>::kernel * largest) << bare.name() << " entry " << i;
          const double f = reference::polynomial_cutoff(with, static_cast<double>(r(e)));
          ASSERT_NEAR(ow.data()[i], b * f, Tolerance<T>::kernel * 30 * largest)
              << bare.name() << " entry " << i;
          g.data()[i] = static_cast<T>(gd[i] - 0.5);
        }
        Kokkos::View<T*, Exec> grad_r("grad_r", E);
        Kokkos::deep_copy(grad_r, T(777));
        if (transformed) {
          kb.reverse_at(x, dxdr, r, g, grad_r);
        } else {
          kb.reverse(r, g, grad_r);
        }
        auto loss = [&](double rr, int e) {
          double xx = rr, dd = 1.0;
          if (transformed) {
            impl::soft_transform(rr, 2.48, 4.0, xx, dd);
          }
          double sum = 0;
          for (int n = 0; n < N; ++n) {
            double b, db;
            reference::basis_function(bare, n, xx, b, db);
            sum += b * static_cast<double>(g(e, n));
          }
          return sum;
        };
        const double h = 1e-6;
        for (int e = 0; e < E; e += std::max(1, E / 50)) {
          const double re = static_cast<double>(r(e));
          const double fd = (loss(re + h, e) - loss(re - h, e)) / (2 * h);
          const double scale = std::max({1.0, std::abs(fd), largest / re});
          EXPECT_NEAR(grad_r(e), fd, (std::is_same_v<T, float> ? 2e-3 : 1e-7) * scale)
              << bare.name() << (transformed ? " (Soft)" : "") << " edge " << e << " r " << re;
        }
      }
    }
  }
  // CHGNet's learnable frequencies assume the envelope on the basis.
  auto bare = RadialBasisParams::mace(4, 5.0, 5);
  bare.apply_cutoff = false;
  const RadialBasisKokkos<Exec, T> k(bare);
  Kokkos::View<T*, Exec> r1("r", 1), gw("gw", 4);
  Kokkos::View<T**, Kokkos::LayoutRight, Exec> g1("g", 1, 4);
  Kokkos::deep_copy(r1, T(1));
  EXPECT_THROW(k.reverse_frequencies(r1, g1, gw), UnsupportedError);
}

// The constructors give mace-torch's buffers: GaussianBasis' linspace(0, r_max, N) and
// coefficient -0.5 / (r_max / (N-1))^2, ChebychevBasis' orders 1..N; and what they refuse.
TEST(RadialBasisParams, GaussianAndChebyshevAreMaceTorchs) {
  const auto g = RadialBasisParams::gaussian(5, 6.0, 5);
  EXPECT_EQ(g.frequencies, (std::vector<double>{0.0, 1.5, 3.0, 4.5, 6.0}));
  EXPECT_DOUBLE_EQ(g.gaussian_coeff, -0.5 / (1.5 * 1.5));
  EXPECT_FALSE(g.harmonic());
  EXPECT_STREQ(g.name(), "gaussian");
  const auto c = RadialBasisParams::chebyshev(3, 5.0, 5);
  EXPECT_EQ(c.frequencies, (std::vector<double>{1.0, 2.0, 3.0}));
  EXPECT_FALSE(c.harmonic()) << "orders 1..N are not Bessel frequencies";
  EXPECT_EQ(radial_basis_kind("chebyshev"), RadialBasisKind::Chebyshev);
  try {
    radial_basis_kind("fourier");
    FAIL() << "an unknown radial_type must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("supported: bessel, gaussian, chebyshev"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(RadialBasisParams::gaussian(1, 5.0, 5), InputError) << "one Gaussian has no width";
  auto bad = c;
  bad.frequencies[1] = 4.0;
  EXPECT_THROW(bad.validate(), InputError);
  // T_3(x) = 4x^3 - 3x and T_3' = 12x^2 - 3, on both sides of 1.
  for (double xx : {0.4, 1.0, 2.7}) {
    double b, db;
    reference::basis_function(c, 2, xx, b, db);
    EXPECT_NEAR(b, 4 * xx * xx * xx - 3 * xx, 1e-12 * std::max(1.0, std::abs(b)));
    EXPECT_NEAR(db, 12 * xx * xx - 3, 1e-9 * std::max(1.0, std::abs(db)));
  }
}

// Soft: x -> p0 = 3/4 r0 for bonds much shorter than r0, x -> r well beyond 4/3 r0 (r0 the sum
// of the two radii), x = (p0 + m) / 2 at the midpoint m, and dx/dr its derivative; the dispatch
// takes Agnesi's r0 as half the sum.
TEST(DistanceTransform, SoftFollowsMaceTorchsFormulaAndItsDerivative) {
  const double r0 = 2.2, alpha = 4.0, p0 = 0.75 * r0, p1 = 4.0 / 3.0 * r0, m = 0.5 * (p0 + p1);
  double x, dxdr;
  impl::soft_transform(0.3, r0, alpha, x, dxdr);
  EXPECT_NEAR(x, p0, 0.02);
  impl::soft_transform(3 * r0, r0, alpha, x, dxdr);
  EXPECT_NEAR(x, 3 * r0, 1e-3);
  EXPECT_NEAR(dxdr, 1.0, 1e-3);
  impl::soft_transform(m, r0, alpha, x, dxdr);
  EXPECT_NEAR(x, 0.5 * (p0 + m), 1e-14);
  for (double r : {0.5, 1.7, 2.2, 2.9, 4.1}) {
    const double h = 1e-6;
    double xp, xm, d;
    impl::soft_transform(r + h, r0, alpha, xp, d);
    impl::soft_transform(r - h, r0, alpha, xm, d);
    impl::soft_transform(r, r0, alpha, x, dxdr);
    EXPECT_NEAR(dxdr, (xp - xm) / (2 * h), 1e-8) << "r " << r;
    if (r >= p0) {
      EXPECT_GT(dxdr, 0.0) << "x grows with r from p0 on (below it, x dips slightly under p0)";
    }
    DistanceTransformConstants c;
    c.kind = DistanceTransformKind::Soft;
    c.alpha = alpha;
    double x2, d2;
    impl::distance_transform(c, r, r0, x2, d2);
    EXPECT_EQ(x2, x);
    c.kind = DistanceTransformKind::Agnesi;
    c.a = 1.0805;
    c.q = 0.9183;
    c.p = 4.5791;
    impl::distance_transform(c, r, r0, x2, d2);
    impl::agnesi_transform(r, 0.5 * r0, c.a, c.q, c.p, x, dxdr);
    EXPECT_EQ(x2, x);
    EXPECT_EQ(d2, dxdr);
  }
  DistanceTransformParams t;
  t.kind = DistanceTransformKind::Soft;
  t.covalent_radii = {1.24};
  t.alpha = 0.0;
  try {
    t.validate(1);
    FAIL() << "alpha 0 must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("Soft: alpha"), std::string::npos) << e.what();
  }
  t.alpha = 4.0;
  EXPECT_NO_THROW(t.validate(1));
  EXPECT_STREQ(t.name(), "Soft");
}

TEST(DistanceTransform, ValidateNamesTheBadValue) {
  DistanceTransformParams t;
  t.kind = DistanceTransformKind::Agnesi;
  t.a = 1.0805;
  t.q = 0.9183;
  t.p = 4.5791;
  t.covalent_radii = {0.76, 1.24};
  EXPECT_NO_THROW(t.validate(2));
  EXPECT_THROW(t.validate(3), InputError);
  t.covalent_radii[1] = 0.0;
  try {
    t.validate(2);
    FAIL() << "a zero radius must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("element 1"), std::string::npos) << e.what();
  }
  t.covalent_radii[1] = 1.24;
  t.p = 0.5;  // p < q: x would not fall with r
  EXPECT_THROW(t.validate(2), InputError);
}

TEST(RadialBasisEnvelope, IsSmoothAtTheCutoffAndOneAtZero) {
  for (int p : {1, 5, 6, 8}) {
    RadialBasisParams q = RadialBasisParams::mace(4, 5.0, p);
    EXPECT_DOUBLE_EQ(reference::envelope(q, 1e-300), 1.0);
    EXPECT_NEAR(reference::envelope(q, 5.0 - 1e-9), 0.0, 1e-12);
    EXPECT_NEAR(reference::envelope_derivative(q, 5.0 - 1e-9), 0.0, 1e-9);
    EXPECT_EQ(reference::envelope(q, 5.0), 0.0);
    EXPECT_EQ(reference::envelope(q, 7.0), 0.0);
    // The fused envelope agrees with the reference.
    for (double r : {0.5, 2.0, 4.9}) {
      double f, df;
      impl::polynomial_envelope(r, 1.0 / 5.0, p, f, df);
      EXPECT_NEAR(f, reference::envelope(q, r), 1e-14);
      EXPECT_NEAR(df, reference::envelope_derivative(q, r), 1e-13);
    }
  }
  // CHGNet's envelope is 1 - 45 u^8 + 80 u^9 - 36 u^10 (FastCHGNet eq. 12).
  const auto q = RadialBasisParams::chgnet({M_PI}, 6.0);
  const double u = 0.7;
  EXPECT_NEAR(reference::envelope(q, u * 6.0), 1 - 45 * std::pow(u, 8) + 80 * std::pow(u, 9) - 36 * std::pow(u, 10), 1e-14);
}

TYPED_TEST(RadialBasis, FourierKokkosMatchesReferenceAndFiniteDifferences) {
  using T = TypeParam;
  FourierParams trained = FourierParams::chgnet(7);
  trained.frequencies[3] += 0.05;
  for (const auto& p : {FourierParams::chgnet(15), FourierParams::chgnet(1), trained}) {
    const FourierKokkos<Exec, T> k(p);
    for (int A : test::test_sizes()) {
      test::Uniform u(5 + A);
      std::vector<double> th(A);
      for (double& t : th) {
        t = u(0.0, M_PI);
      }
      auto theta = to_view<T>(th);
      Kokkos::View<T**, Kokkos::LayoutRight, Exec> out("out", A, p.width()), g("g", A, p.width());
      Kokkos::deep_copy(out, T(777));
      k.compute(theta, out);
      std::vector<double> tt(A), ref(static_cast<std::size_t>(A) * p.width());
      for (int a = 0; a < A; ++a) {
        tt[a] = static_cast<double>(theta(a));
      }
      reference::compute_fourier(p, A, tt.data(), ref.data());
      for (int i = 0; i < A * p.width(); ++i) {
        ASSERT_NEAR(out.data()[i], ref[i], Tolerance<T>::kernel * 4) << "value " << i;
        g.data()[i] = static_cast<T>(u(-1.0, 1.0));
      }
      Kokkos::View<T*, Exec> grad("grad", A), grad_k("grad_k", p.order());
      k.reverse(theta, g, grad);
      k.reverse_frequencies(theta, g, grad_k);
      std::vector<double> gg(g.data(), g.data() + A * p.width()), ref_grad(A), ref_grad_k(p.order());
      reference::reverse_fourier(p, A, tt.data(), gg.data(), ref_grad.data(), ref_grad_k.data());
      for (int j = 0; j < p.order(); ++j) {
        // Sums over up to 1000 angles of theta ~ pi: scale the tolerance with the count.
        EXPECT_NEAR(grad_k(j), ref_grad_k[j], Tolerance<T>::kernel * 40 * std::max(1, A)) << "frequency " << j;
        // and the reference itself against central differences in the frequency
        auto kp = p, km = p;
        kp.frequencies[j] += 1e-6;
        km.frequencies[j] -= 1e-6;
        std::vector<double> op(ref.size()), om(ref.size());
        reference::compute_fourier(kp, A, tt.data(), op.data());
        reference::compute_fourier(km, A, tt.data(), om.data());
        double fd = 0;
        for (std::size_t i = 0; i < op.size(); ++i) {
          fd += (op[i] - om[i]) / 2e-6 * gg[i];
        }
        EXPECT_NEAR(ref_grad_k[j], fd, 1e-6 * std::max(1.0, std::abs(fd))) << "frequency " << j;
      }
      const double h = 1e-6;
      for (int a = 0; a < A; a += std::max(1, A / 40)) {
        EXPECT_NEAR(grad(a), ref_grad[a], Tolerance<T>::kernel * 40);
        auto tp = tt, tm = tt;
        tp[a] += h;
        tm[a] -= h;
        std::vector<double> op(ref.size()), om(ref.size());
        reference::compute_fourier(p, A, tp.data(), op.data());
        reference::compute_fourier(p, A, tm.data(), om.data());
        double fd = 0;
        for (std::size_t i = 0; i < op.size(); ++i) {
          fd += (op[i] - om[i]) / (2 * h) * gg[i];
        }
        EXPECT_NEAR(ref_grad[a], fd, 1e-6 * std::max(1.0, std::abs(fd))) << "angle " << a;
      }
    }
  }
}

// The learnable constructors (the trainer's CHGNet): frequencies read in place from a view, at
// every call, equal to a kernel built from the same values on the host; Dual frequencies carry
// d/dw into compute, reverse and reverse_frequencies (against central differences of the
// host-built kernel in double).
TYPED_TEST(RadialBasis, LearnableFrequenciesAreReadWhereTheyAre) {
  using T = TypeParam;
  using D = Dual<T>;
  using Mat = Kokkos::View<T**, Kokkos::LayoutRight, Exec>;
  using DMat = Kokkos::View<D**, Kokkos::LayoutRight, Exec>;
  const int E = 37;  // odd, and with edges beyond the cutoff
  // Each case: the basis's outputs, reverse and reverse_frequencies at frequencies f, by a kernel
  // built from f on the host (Host), and by the learnable kernel reading f from a view (the
  // same outputs, as D when the view holds duals).
  struct Outputs {
    std::vector<double> out, grad_x, grad_f;
  };
  const auto check = [&](const char* what, int K, int width, const std::vector<double>& f0,
                         const std::vector<double>& x, const std::vector<double>& g, auto host,
                         auto learnable) {
    const double scale = 40.0;  // |outputs| are O(1..10); sums over 37 edges
    // 1. Equal to the host-built kernel at f0, and at f0 changed in the view after construction.
    Kokkos::View<T*, Exec> f("f", K);
    for (int j = 0; j < K; ++j) {
      f(j) = static_cast<T>(f0[j]);
    }
    const auto k = learnable(f);
    for (const double bump : {0.0, 0.07}) {
      std::vector<double> fb = f0;
      for (int j = 0; j < K; ++j) {
        fb[j] *= 1.0 + bump * (j + 1) / K;
        f(j) = static_cast<T>(fb[j]);
      }
      const Outputs ref = host(fb);
      Mat out("out", E, width), gv("g", E, width);
      Kokkos::View<T*, Exec> xv("x", E), gx("gx", E), gf("gf", K);
      for (int e = 0; e < E; ++e) {
        xv(e) = static_cast<T>(x[e]);
        for (int n = 0; n < width; ++n) {
          gv(e, n) = static_cast<T>(g[e * width + n]);
        }
      }
      k.compute(xv, out);
      k.reverse(xv, gv, gx);
      k.reverse_frequencies(xv, gv, gf);
      for (int i = 0; i < E * width; ++i) {
        ASSERT_NEAR(out.data()[i], ref.out[i], Tolerance<T>::kernel * scale)
            << what << " value " << i << " bump " << bump;
      }
      for (int e = 0; e < E; ++e) {
        ASSERT_NEAR(gx(e), ref.grad_x[e], Tolerance<T>::kernel * scale) << what << " grad x " << e;
      }
      for (int j = 0; j < K; ++j) {
        ASSERT_NEAR(gf(j), ref.grad_f[j], Tolerance<T>::kernel * scale * E) << what << " grad f " << j;
      }
    }
    // 2. Tangents along a direction df of the frequencies against central differences.
    test::Uniform u(3 + K);
    std::vector<double> df(K);
    for (double& d : df) {
      d = u(-1.0, 1.0);
    }
    Kokkos::View<D*, Exec> fd_view("f", K);
    for (int j = 0; j < K; ++j) {
      fd_view(j) = D(static_cast<T>(f0[j]), static_cast<T>(df[j]));
    }
    const auto kd = learnable(fd_view);
    DMat out("out", E, width), gv("g", E, width);
    Kokkos::View<D*, Exec> xv("x", E), gx("gx", E), gf("gf", K);
    for (int e = 0; e < E; ++e) {
      xv(e) = D(static_cast<T>(x[e]));
      for (int n = 0; n < width; ++n) {
        gv(e, n) = D(static_cast<T>(g[e * width + n]));
      }
    }
    kd.compute(xv, out);
    kd.reverse(xv, gv, gx);
    kd.reverse_frequencies(xv, gv, gf);
    const double h = 1e-6;
    std::vector<double> fp = f0, fm = f0;
    for (int j = 0; j < K; ++j) {
      fp[j] += h * df[j];
      fm[j] -= h * df[j];
    }
    const Outputs p = host(fp), m = host(fm);
    const double tol = std::is_same_v<T, double> ? 1e-6 : 2e-3;
    for (int i = 0; i < E * width; ++i) {
      const double expect = (p.out[i] - m.out[i]) / (2 * h);
      ASSERT_NEAR(out.data()[i].d, expect, tol * std::max(1.0, std::abs(expect))) << what << " value " << i;
    }
    for (int e = 0; e < E; ++e) {
      const double expect = (p.grad_x[e] - m.grad_x[e]) / (2 * h);
      ASSERT_NEAR(gx(e).d, expect, tol * std::max(1.0, std::abs(expect))) << what << " grad x " << e;
    }
    for (int j = 0; j < K; ++j) {
      const double expect = (p.grad_f[j] - m.grad_f[j]) / (2 * h);
      ASSERT_NEAR(gf(j).d, expect, tol * std::max(1.0, std::abs(expect))) << what << " grad f " << j;
    }
  };

  // Bessel, CHGNet's shape, at trained (non-harmonic) and at harmonic frequencies.
  for (const auto& p0 : {radial_cases()[2], radial_cases()[3]}) {
    const int K = p0.num_basis();
    RadialBasisParams fixed = p0;
    fixed.frequencies.clear();
    test::Uniform u(11 + K);
    std::vector<double> r(E), g(static_cast<std::size_t>(E) * K);
    for (double& x : r) {
      x = u(0.3, 1.1 * p0.r_max);
    }
    for (double& x : g) {
      x = u(-1.0, 1.0);
    }
    const auto host = [&](const std::vector<double>& w) {
      RadialBasisParams p = p0;
      p.frequencies = w;
      Outputs o{std::vector<double>(g.size()), std::vector<double>(E), std::vector<double>(K)};
      reference::compute_radial_basis(p, E, r.data(), o.out.data());
      reference::reverse_radial_basis(p, E, r.data(), g.data(), o.grad_x.data(), o.grad_f.data());
      return o;
    };
    const auto learnable = [&](auto w) {
      return RadialBasisKokkos<Exec, typename decltype(w)::non_const_value_type>(fixed, w);
    };
    check(p0.harmonic() ? "bessel (harmonic)" : "bessel", K, K, p0.frequencies, r, g, host, learnable);
  }
  // Fourier, CHGNet's order with one frequency moved.
  {
    FourierParams p0 = FourierParams::chgnet(7);
    p0.frequencies[3] += 0.05;
    const int K = p0.order(), W = p0.width();
    test::Uniform u(5);
    std::vector<double> th(E), g(static_cast<std::size_t>(E) * W);
    for (double& t : th) {
      t = u(0.0, M_PI);
    }
    for (double& x : g) {
      x = u(-1.0, 1.0);
    }
    const auto host = [&](const std::vector<double>& k) {
      FourierParams p = p0;
      p.frequencies = k;
      Outputs o{std::vector<double>(g.size()), std::vector<double>(E), std::vector<double>(K)};
      reference::compute_fourier(p, E, th.data(), o.out.data());
      reference::reverse_fourier(p, E, th.data(), g.data(), o.grad_x.data(), o.grad_f.data());
      return o;
    };
    const auto learnable = [](auto k) {
      return FourierKokkos<Exec, typename decltype(k)::non_const_value_type>(k);
    };
    check("fourier", K, W, p0.frequencies, th, g, host, learnable);
  }
}

// Parity with mace-torch (BesselBasis x PolynomialCutoff) and chgnet (RadialBessel with a
// smooth cutoff and trained frequencies, Fourier with trained frequencies).
TEST(RadialBasisParity, MatchesMaceTorchAndChgnet) {
  std::ifstream in(FASTMLIP_REFERENCE_DATA_DIR "/kernels/radial_basis.json");
  ASSERT_TRUE(in.good()) << "missing fixture; regenerate with tests/reference/make_kernel_fixtures.py";
  const auto data = nlohmann::json::parse(in);
  auto check = [](const auto& kernel, const std::vector<double>& x, const std::vector<double>& expect, int width,
                  const char* what) {
    auto xv = to_view<double>(x);
    Kokkos::View<double**, Kokkos::LayoutRight, Exec> out("out", x.size(), width);
    kernel.compute(xv, out);
    ASSERT_EQ(expect.size(), x.size() * width);
    for (std::size_t i = 0; i < expect.size(); ++i) {
      EXPECT_NEAR(out.data()[i], expect[i], 1e-12 * std::max(1.0, std::abs(expect[i]))) << what << " value " << i;
    }
  };
  ASSERT_EQ(data["mace"].size(), 3u);
  for (const auto& c : data["mace"]) {
    auto p = RadialBasisParams::mace(c["num_basis"].get<int>(), c["r_max"].get<double>(), c["p"].get<int>());
    // The model's own weights (they are what a converted model carries), equal to n pi / r_max.
    const auto w = c["bessel_weights"].get<std::vector<double>>();
    for (std::size_t n = 0; n < w.size(); ++n) {
      EXPECT_NEAR(w[n], p.frequencies[n], 1e-6 * p.frequencies[n]);  // mace-torch stores them in float32
    }
    p.frequencies = w;
    const auto r = c["r"].get<std::vector<double>>(), expect = c["values"].get<std::vector<double>>();
    check(RadialBasisKokkos<Exec, double>(p), r, expect, p.num_basis(), "mace");
    std::vector<double> ref(expect.size());
    reference::compute_radial_basis(p, r.size(), r.data(), ref.data());
    for (std::size_t i = 0; i < ref.size(); ++i) {
      EXPECT_NEAR(ref[i], expect[i], 1e-12 * std::max(1.0, std::abs(expect[i]))) << "mace reference " << i;
    }
  }
  ASSERT_EQ(data["chgnet_radial"].size(), 2u);
  for (const auto& c : data["chgnet_radial"]) {
    const auto p =
        RadialBasisParams::chgnet(c["frequencies"].get<std::vector<double>>(), c["cutoff"].get<double>());
    EXPECT_FALSE(p.harmonic());  // trained frequencies: the direct path is exercised
    check(RadialBasisKokkos<Exec, double>(p), c["r"].get<std::vector<double>>(),
          c["values"].get<std::vector<double>>(), p.num_basis(), "chgnet radial");
  }
  ASSERT_EQ(data["chgnet_fourier"].size(), 2u);
  for (const auto& c : data["chgnet_fourier"]) {
    FourierParams p;
    p.frequencies = c["frequencies"].get<std::vector<double>>();
    check(FourierKokkos<Exec, double>(p), c["theta"].get<std::vector<double>>(), c["values"].get<std::vector<double>>(),
          p.width(), "chgnet fourier");
  }
}

TEST(RadialBasisErrors, UnsupportedSizesAndShapesAreClearErrors) {
  EXPECT_THROW(RadialBasisParams::mace(0, 5.0, 5), InputError);
  EXPECT_THROW(RadialBasisParams::mace(kMaxRadialBasis + 1, 5.0, 5), InputError);
  EXPECT_THROW(RadialBasisParams::mace(8, -1.0, 5), InputError);
  EXPECT_THROW(RadialBasisParams::mace(8, 5.0, 0), InputError);
  EXPECT_THROW(FourierParams::chgnet(kMaxFourierOrder + 1), InputError);
  try {
    RadialBasisParams::mace(40, 5.0, 5);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("40"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1..32"), std::string::npos) << e.what();
  }
  const RadialBasisKokkos<Exec, double> k(RadialBasisParams::mace(8, 5.0, 5));
  Kokkos::View<double*, Exec> r("r", 3);
  Kokkos::View<double**, Kokkos::LayoutRight, Exec> wrong("out", 3, 7);
  EXPECT_THROW(k.compute(r, wrong), InputError);
  // Learnable frequencies: a count the kernels do not take, or a basis that has none.
  Kokkos::View<double*, Exec> none("w", 0), too_many("w", kMaxRadialBasis + 1);
  RadialBasisParams fixed = RadialBasisParams::chgnet({1.0, 2.0}, 5.0);
  EXPECT_THROW((RadialBasisKokkos<Exec, double>(fixed, none)), InputError);
  EXPECT_THROW((RadialBasisKokkos<Exec, double>(fixed, too_many)), InputError);
  EXPECT_THROW((FourierKokkos<Exec, double>(Kokkos::View<const double*, Exec>(none))), InputError);
  EXPECT_THROW((RadialBasisKokkos<Exec, double>(RadialBasisParams::gaussian(4, 5.0, 5), too_many)),
               UnsupportedError);
}

}  // namespace
}  // namespace fastmlip::kernels

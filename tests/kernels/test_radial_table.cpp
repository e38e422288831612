// SPDX-License-Identifier: MIT
// The tabulated radial function (kernels/radial_table.hpp): exact at the knots, fourth-order
// between them, its reverse the exact derivative of what compute() returns, zero beyond r_max,
// and clear errors for edges below the table and for bad spacings.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/radial_table_kokkos.hpp"
#include "kernels/reference/radial_basis_ref.hpp"
#include "kernels/reference/radial_mlp_ref.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;

// MACE's shape, smaller and odd: 8 Bessel functions, hidden layers 17 and 11, 13 outputs.
// Weights ~ N(0,1)-like as e3nn initialises them, so the hidden units are in SiLU's bend.
RadialMLP random_mlp(std::uint64_t seed) {
  RadialMLP mlp;
  mlp.widths = {8, 17, 11, 13};
  mlp.act_cst = 1.679177;
  test::Uniform u(seed);
  for (int l = 0; l + 1 < static_cast<int>(mlp.widths.size()); ++l) {
    mlp.weights.emplace_back(static_cast<std::size_t>(mlp.widths[l]) * mlp.widths[l + 1]);
    for (double& w : mlp.weights.back()) {
      w = u(-1.7, 1.7);
    }
  }
  return mlp;
}

const RadialBasisParams& bessel() {
  static const RadialBasisParams p = RadialBasisParams::mace(8, 5.0, 5);
  return p;
}

template <class T>
Kokkos::View<T*, Exec> vec(const std::vector<double>& v) {
  Kokkos::View<T*, Exec> out("r", v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out(i) = static_cast<T>(v[i]);
  }
  return out;
}

TEST(RadialTable, ExactFunctionMatchesReferenceAndItsDerivative) {
  const RadialMLP mlp = random_mlp(3);
  const int W = mlp.width_out();
  for (double r : {0.05, 0.9, 2.31, 4.2, 4.999}) {
    std::vector<double> v(W), d(W), b(8), ref(W);
    evaluate_radial_function(bessel(), mlp, r, v.data(), d.data());
    reference::compute_radial_basis(bessel(), 1, &r, b.data());
    reference::compute_radial_mlp(mlp, 1, b.data(), ref.data());
    const double h = 1e-6;
    std::vector<double> vp(W), vm(W), dd(W);
    evaluate_radial_function(bessel(), mlp, r + h, vp.data(), dd.data());
    evaluate_radial_function(bessel(), mlp, r - h, vm.data(), dd.data());
    for (int j = 0; j < W; ++j) {
      EXPECT_NEAR(v[j], ref[j], 1e-13 * std::max(1.0, std::abs(ref[j]))) << "r " << r << " output " << j;
      const double fd = (vp[j] - vm[j]) / (2 * h);
      EXPECT_NEAR(d[j], fd, 1e-7 * std::max(1.0, std::abs(fd))) << "r " << r << " output " << j;
    }
  }
}

TEST(RadialTable, ErrorIsFourthOrderInValueAndThirdInDerivative) {
  const RadialMLP mlp = random_mlp(5);
  const RadialTable coarse = RadialTable::build(bessel(), mlp, 0.04, 0.05);
  const RadialTable fine = RadialTable::build(bessel(), mlp, 0.02, 0.05);
  ASSERT_GT(fine.max_error_value, 0.0);
  ASSERT_GT(fine.max_error_derivative, 0.0);
  // Halving h divides the errors by 2^4 = 16 and 2^3 = 8 (asymptotically; allow some slack).
  EXPECT_GT(coarse.max_error_value / fine.max_error_value, 12.0);
  EXPECT_LT(coarse.max_error_value / fine.max_error_value, 20.0);
  EXPECT_GT(coarse.max_error_derivative / fine.max_error_derivative, 6.0);
  EXPECT_LT(coarse.max_error_derivative / fine.max_error_derivative, 10.0);
  EXPECT_LT(fine.max_error_value, 1e-5 * fine.max_abs_value);
  EXPECT_EQ(fine.knots, 1 + static_cast<int>(std::ceil((5.0 - 0.05) / 0.02)));
  EXPECT_NEAR(fine.r_lo + (fine.knots - 1) * fine.h, 5.0, 1e-12);
}

template <class T>
class RadialTableTyped : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RadialTableTyped, Dtypes);

TYPED_TEST(RadialTableTyped, ComputeIsExactAtKnotsAndWithinTheMeasuredErrorBetween) {
  using T = TypeParam;
  const RadialMLP mlp = random_mlp(7);
  const RadialTable table = RadialTable::build(bessel(), mlp, 0.013, 0.1);
  RadialTableKokkos<Exec, T> k(table);
  const int W = mlp.width_out();
  const double round = std::is_same_v<T, double> ? 1e-13 : 3e-6;
  for (int E : test::test_sizes()) {
    test::Uniform u(E + 11);
    std::vector<double> r(E);
    for (int e = 0; e < E; ++e) {
      // Every third edge on a knot; the rest anywhere in the table, and beyond r_max.
      r[e] = e % 3 == 0 ? table.r_lo + (e % table.knots) * table.h : u(table.r_lo, 5.4);
      r[e] = static_cast<double>(static_cast<T>(r[e]));
    }
    Kokkos::View<T**, Kokkos::LayoutRight, Exec> out("out", E, W);
    Kokkos::deep_copy(out, T(777));
    k.compute(vec<T>(r), out);
    std::vector<double> v(W), d(W);
    for (int e = 0; e < E; ++e) {
      if (r[e] >= 5.0) {
        for (int j = 0; j < W; ++j) {
          EXPECT_EQ(out(e, j), T(0)) << "edge " << e << " beyond r_max";
        }
        continue;
      }
      evaluate_radial_function(bessel(), mlp, r[e], v.data(), d.data());
      const bool knot = e % 3 == 0;
      const double tol = (knot ? 0.0 : 1.5 * table.max_error_value) + round * table.max_abs_value;
      for (int j = 0; j < W; ++j) {
        EXPECT_NEAR(static_cast<double>(out(e, j)), v[j], tol) << "edge " << e << " r " << r[e] << " output " << j;
      }
    }
  }
}

TYPED_TEST(RadialTableTyped, ReverseIsTheDerivativeOfCompute) {
  using T = TypeParam;
  const RadialMLP mlp = random_mlp(9);
  const RadialTable table = RadialTable::build(bessel(), mlp, 0.021, 0.1);
  RadialTableKokkos<Exec, T> k(table);
  RadialTableKokkos<Exec, double> k64(table);
  const int W = mlp.width_out();
  for (int E : test::test_sizes()) {
    test::Uniform u(E + 21);
    std::vector<double> r(E), g(static_cast<std::size_t>(E) * W);
    for (double& x : r) {
      x = static_cast<double>(static_cast<T>(u(0.1, 5.3)));
    }
    for (double& x : g) {
      x = static_cast<double>(static_cast<T>(u(-1, 1)));
    }
    Kokkos::View<T**, Kokkos::LayoutRight, Exec> gout("g", E, W);
    for (std::size_t i = 0; i < g.size(); ++i) {
      gout.data()[i] = static_cast<T>(g[i]);
    }
    Kokkos::View<T*, Exec> gr("gr", E);
    Kokkos::deep_copy(gr, T(777));
    k.reverse(vec<T>(r), gout, gr);
    // Central differences of sum_j g_j R_j(r) through the double table: the spline is a
    // cubic in r between knots, so a small step sees exactly the derivative reverse() forms.
    auto loss = [&](int e, double re) {
      Kokkos::View<double**, Kokkos::LayoutRight, Exec> o("o", 1, W);
      k64.compute(vec<double>({re}), o);
      double s = 0;
      for (int j = 0; j < W; ++j) {
        s += g[static_cast<std::size_t>(e) * W + j] * o(0, j);
      }
      return s;
    };
    const double h = 1e-6, tol = std::is_same_v<T, double> ? 1e-7 : 1e-4;
    for (int e = 0; e < E; e += std::max(1, E / 25)) {
      const double fd = (loss(e, r[e] + h) - loss(e, r[e] - h)) / (2 * h);
      EXPECT_NEAR(static_cast<double>(gr(e)), fd, tol * std::max(1.0, std::abs(fd))) << "edge " << e << " r " << r[e];
    }
  }
}

TEST(RadialTable, BadInputIsAClearError) {
  const RadialMLP mlp = random_mlp(1);
  EXPECT_THROW(RadialTable::build(bessel(), mlp, 0.0, 0.1), InputError);
  EXPECT_THROW(RadialTable::build(bessel(), mlp, -0.01, 0.1), InputError);
  EXPECT_THROW(RadialTable::build(bessel(), mlp, 1e-9, 0.1), InputError);  // too many knots
  EXPECT_THROW(RadialTable::build(bessel(), mlp, 0.01, 0.0), InputError);
  EXPECT_THROW(RadialTable::build(bessel(), mlp, 0.01, 5.0), InputError);
  RadialMLP wrong = mlp;
  wrong.widths[0] = 7;
  wrong.weights[0].resize(7 * 17);
  EXPECT_THROW(RadialTable::build(bessel(), wrong, 0.01, 0.1), InputError);

  const RadialTable table = RadialTable::build(bessel(), mlp, 0.05, 0.1);
  RadialTableKokkos<Exec, double> k(table);
  Kokkos::View<double**, Kokkos::LayoutRight, Exec> out("out", 3, mlp.width_out());
  try {
    k.compute(vec<double>({1.0, 0.07, 2.0}), out);
    ADD_FAILURE() << "an edge below r_lo was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("edge 1 "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lower end"), std::string::npos) << e.what();
  }
  EXPECT_THROW(k.compute(vec<double>({1.0, std::nan(""), 2.0}), out), InputError);
  Kokkos::View<double**, Kokkos::LayoutRight, Exec> narrow("narrow", 3, 2);
  EXPECT_THROW(k.compute(vec<double>({1.0, 1.5, 2.0}), narrow), InputError);
}

// Tables per pair of elements: under the Agnesi transform each pair's radial features are read at
// its own x(r; r0), so the stacked tables differ, and an edge reads the table set_edge_tables()
// gives it (its values are that table's, and its reverse that table's derivative). The Density
// term tanh(d^2) is tabulated through the same features. An index out of range is refused.
TYPED_TEST(RadialTableTyped, StackedPairTablesAreReadByEdgeIndex) {
  using T = TypeParam;
  const RadialMLP mlp = random_mlp(17);
  DistanceTransformParams agnesi;
  agnesi.kind = DistanceTransformKind::Agnesi;
  agnesi.a = 1.0805;
  agnesi.q = 0.9183;
  agnesi.p = 4.5791;
  const std::vector<double> rsum = {1.9, 2.6, 3.3};
  std::vector<RadialTable> tables;
  for (double rs : rsum) {
    tables.push_back(RadialTable::build(
        [&](double r, double* v, double* d) { evaluate_radial_function(bessel(), agnesi, rs, mlp, r, v, d); },
        mlp.width_out(), bessel().r_max, 0.01, 0.1));
  }
  RadialTableKokkos<Exec, T> k(tables);
  ASSERT_EQ(k.num_tables(), 3);
  const int W = mlp.width_out();
  const int E = 11;
  test::Uniform u(5);
  std::vector<double> r(E);
  Kokkos::View<int*, Exec> which("which", E);
  for (int e = 0; e < E; ++e) {
    r[e] = static_cast<double>(static_cast<T>(u(0.3, 4.9)));
    which(e) = (e * 7) % 3;
  }
  k.set_edge_tables(which);
  Kokkos::View<T**, Kokkos::LayoutRight, Exec> out("out", E, W), gout("gout", E, W);
  k.compute(vec<T>(r), out);
  Kokkos::deep_copy(gout, T(1));
  Kokkos::View<T*, Exec> gr("gr", E);
  k.reverse(vec<T>(r), gout, gr);
  const double tol = std::is_same_v<T, double> ? 1e-6 : 1e-4;
  double largest_gap = 0;  // between an edge's table and another: the test tells the tables apart
  for (int e = 0; e < E; ++e) {
    std::vector<double> v(W), d(W), other(W), dother(W);
    evaluate_radial_function(bessel(), agnesi, rsum[which(e)], mlp, r[e], v.data(), d.data());
    evaluate_radial_function(bessel(), agnesi, rsum[(which(e) + 1) % 3], mlp, r[e], other.data(),
                             dother.data());
    double dsum = 0, gap = 0;
    for (int j = 0; j < W; ++j) {
      EXPECT_NEAR(static_cast<double>(out(e, j)), v[j], tol * std::max(1.0, std::abs(v[j]))) << "edge " << e;
      dsum += d[j];
      gap = std::max(gap, std::abs(v[j] - other[j]));
    }
    largest_gap = std::max(largest_gap, gap);
    EXPECT_NEAR(static_cast<double>(gr(e)), dsum, 100 * tol * std::max(1.0, std::abs(dsum))) << "edge " << e;
  }
  EXPECT_GT(largest_gap, 1e-2);
  // The density term: tanh(d^2) with d = features . w, its derivative by central differences.
  const std::vector<double> w = {0.3, -0.2, 0.5, 0.1, -0.4, 0.25, -0.15, 0.05};
  for (double x : {0.4, 1.7, 3.2, 4.6}) {
    double v, d, vp, vm, dummy;
    evaluate_density_term(bessel(), agnesi, 2.6, w, x, &v, &d);
    evaluate_density_term(bessel(), agnesi, 2.6, w, x + 1e-6, &vp, &dummy);
    evaluate_density_term(bessel(), agnesi, 2.6, w, x - 1e-6, &vm, &dummy);
    EXPECT_GE(v, 0.0);
    EXPECT_NEAR(d, (vp - vm) / 2e-6, 1e-6 * std::max(1.0, std::abs(d))) << "r " << x;
  }
  which(3) = 3;
  try {
    k.compute(vec<T>(r), out);
    ADD_FAILURE() << "an edge read a table that does not exist";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("edge 3 reads table 3 of 3"), std::string::npos) << e.what();
  }
  const std::vector<RadialTable> mixed = {tables[0], RadialTable::build(bessel(), mlp, 0.02, 0.1)};
  using Stack = RadialTableKokkos<Exec, T>;
  EXPECT_THROW(Stack{mixed}, InputError);  // different knots
}

}  // namespace
}  // namespace fastmlip::kernels

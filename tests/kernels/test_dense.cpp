// SPDX-License-Identifier: MIT
// The dense kernels CHGNet runs (kernels/dense.hpp, layer_norm.hpp, gated_mlp.hpp): each compute
// stage against its naive reference (reference/dense_ref.hpp) in float and double over odd
// sizes; each reverse stage (input and weight gradients) against central finite differences of
// L = sum(gy * y) in double; the Dual<double> runs' tangents (the trainer's double backward)
// against finite differences of the plain reverse stages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "../common/random_mlp.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/dense.hpp"
#include "kernels/gated_mlp.hpp"
#include "kernels/layer_norm.hpp"
#include "kernels/reference/dense_ref.hpp"
#include "math/dual.hpp"

namespace fastmlip::kernels {
namespace {

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-300;
  for (const T& w : want) scale = std::max(scale, std::abs(double(w)));
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(double(got[i]), double(want[i]), tol * std::max(scale, 1.0)) << what << " @" << i;
  }
}

using test::cast;
using test::random_vector;

template <class T>
class DenseKernels : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(DenseKernels, Precisions);

TYPED_TEST(DenseKernels, DenseMatchesReferenceAndReverseIsItsTranspose) {
  using T = TypeParam;
  test::Uniform u(11);
  for (int rows : test::test_sizes()) {
    for (auto [in, out] : {std::pair{1, 1}, {13, 7}, {31, 64}}) {
      const auto W = random_vector(static_cast<std::size_t>(in) * out, u), b = random_vector(out, u);
      const auto x = random_vector(static_cast<std::size_t>(rows) * in, u);
      const auto gy = random_vector(static_cast<std::size_t>(rows) * out, u);
      const std::string what = std::to_string(rows) + " rows, " + std::to_string(in) + " -> " + std::to_string(out);
      const auto Wt = cast<T>(W), bt = cast<T>(b), xt = cast<T>(x), gyt = cast<T>(gy);
      const Dense<T> d(in, out, Wt.data(), bt.data());
      std::vector<T> y(static_cast<std::size_t>(rows) * out, T(777)), ref(y.size());
      d.compute(xt.data(), rows, in, y.data(), out);
      reference::compute_dense(xt.data(), rows, in, out, Wt.data(), bt.data(), ref.data());
      expect_close(y, ref, test::Tolerance<T>::kernel * in, "compute " + what);
      // Accumulating adds x W^T without the bias.
      d.compute(xt.data(), rows, in, y.data(), out, true);
      std::vector<T> twice(ref.size());
      for (std::size_t q = 0; q < ref.size(); ++q) twice[q] = T(2) * ref[q] - bt[q % out];
      expect_close(y, twice, test::Tolerance<T>::kernel * in, "accumulate " + what);
      // gx = gy W, gW = gy^T x, gb = column sums: the reference's transposes.
      std::vector<T> gx(static_cast<std::size_t>(rows) * in), gx_ref(gx.size()), gw(W.size(), T(0)), gb(out, T(0));
      std::vector<T> WT(W.size());
      for (int o = 0; o < out; ++o)
        for (int i = 0; i < in; ++i) WT[static_cast<std::size_t>(i) * out + o] = Wt[static_cast<std::size_t>(o) * in + i];
      d.reverse(gyt.data(), rows, out, gx.data(), in, false);
      reference::compute_dense(gyt.data(), rows, out, in, WT.data(), static_cast<const T*>(nullptr), gx_ref.data());
      expect_close(gx, gx_ref, test::Tolerance<T>::kernel * out, "reverse " + what);
      d.reverse_weights(xt.data(), in, gyt.data(), out, rows, gw.data(), gb.data());
      std::vector<T> gw_ref(W.size()), gb_ref(out);
      for (int o = 0; o < out; ++o) {
        double sb = 0;
        for (int i = 0; i < in; ++i) {
          double s = 0;
          for (int r = 0; r < rows; ++r) s += double(gyt[static_cast<std::size_t>(r) * out + o]) * double(xt[static_cast<std::size_t>(r) * in + i]);
          gw_ref[static_cast<std::size_t>(o) * in + i] = static_cast<T>(s);
        }
        for (int r = 0; r < rows; ++r) sb += double(gyt[static_cast<std::size_t>(r) * out + o]);
        gb_ref[o] = static_cast<T>(sb);
      }
      expect_close(gw, gw_ref, test::Tolerance<T>::kernel * std::max(rows, 1), "reverse_weights W " + what);
      expect_close(gb, gb_ref, test::Tolerance<T>::kernel * std::max(rows, 1), "reverse_weights b " + what);
    }
  }
}

TYPED_TEST(DenseKernels, LayerNormMatchesReferenceRowByRowAndOverRows) {
  using T = TypeParam;
  test::Uniform u(12);
  for (int rows : test::test_sizes()) {
    for (int dim : {1, 13, 64}) {
      LayerNorm<T> ln{dim, cast<T>(random_vector(dim, u, 0.5, 1.5)), cast<T>(random_vector(dim, u))};
      const auto x = cast<T>(random_vector(static_cast<std::size_t>(rows) * dim, u, -3, 3));
      std::vector<T> ref(x.size()), a = x, b = x, ha(x.size()), hb(x.size()), ia(rows), ib(rows);
      reference::compute_layer_norm(x.data(), rows, dim, ln.gamma.data(), ln.beta.data(), LayerNorm<T>::kEps, ref.data());
      ln.compute_rows(a.data(), ha.data(), ia.data(), rows);
      for (int r = 0; r < rows; ++r) {
        ln.compute_row(b.data() + static_cast<std::size_t>(r) * dim, hb.data() + static_cast<std::size_t>(r) * dim, &ib[r]);
      }
      const std::string what = std::to_string(rows) + " rows of " + std::to_string(dim);
      // dim 1: the row is its mean, LN gives beta exactly in both.
      expect_close(a, ref, test::Tolerance<T>::kernel * 10, "compute_rows " + what);
      expect_close(b, ref, test::Tolerance<T>::kernel * 10, "compute_row " + what);
    }
  }
}

// ---- reverse stages against finite differences (double) -----------------------------------

/// Central differences of f at x in the coordinates `probe`, against `grad`.
void expect_fd(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
               const std::vector<double>& grad, const std::vector<std::size_t>& probe, const std::string& what) {
  const double h = 1e-6;
  for (std::size_t i : probe) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    const double fd = (fp - fm) / (2 * h);
    EXPECT_NEAR(grad[i], fd, test::Tolerance<double>::fd * std::max(1.0, std::abs(fd))) << what << " @" << i;
  }
}
std::vector<std::size_t> probes(std::size_t n, test::Uniform& u, std::size_t count = 12) {
  std::vector<std::size_t> p;
  for (std::size_t k = 0; k < std::min(n, count); ++k) {
    p.push_back(std::min(n - 1, static_cast<std::size_t>(u(0, 1) * double(n))));
  }
  return p;
}

/// The weights as one flat vector, and back.
std::vector<double> flatten(GatedMlpWeights<double>& w) {
  std::vector<double> out;
  for (auto* p : w.parts()) out.insert(out.end(), p->begin(), p->end());
  return out;
}
void unflatten(const std::vector<double>& flat, GatedMlpWeights<double>& w) {
  std::size_t k = 0;
  for (auto* p : w.parts()) {
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(k), p->size(), p->begin());
    k += p->size();
  }
}

TEST(DenseKernelsReverse, LayerNormInputAndWeightGradientsMatchFiniteDifferences) {
  test::Uniform u(13);
  for (int rows : {1, 13}) {
    for (int dim : {1, 13}) {
      LayerNorm<double> ln{dim, random_vector(dim, u, 0.5, 1.5), random_vector(dim, u)};
      const auto x = random_vector(static_cast<std::size_t>(rows) * dim, u, -2, 2);
      const auto gy = random_vector(x.size(), u);
      auto loss = [&](const LayerNorm<double>& l, const std::vector<double>& in) {
        std::vector<double> y = in, h(in.size()), inv(rows);
        l.compute_rows(y.data(), h.data(), inv.data(), rows);
        double s = 0;
        for (std::size_t q = 0; q < y.size(); ++q) s += gy[q] * y[q];
        return s;
      };
      std::vector<double> y = x, h(x.size()), inv(rows), g = gy, ggamma(dim, 0.0), gbeta(dim, 0.0);
      ln.compute_rows(y.data(), h.data(), inv.data(), rows);
      ln.reverse_weights(g.data(), h.data(), rows, ggamma.data(), gbeta.data());
      std::vector<double> g_row = gy;
      ln.reverse_rows(g.data(), h.data(), inv.data(), rows);
      for (int r = 0; r < rows; ++r) ln.reverse_row(g_row.data() + static_cast<std::size_t>(r) * dim, h.data() + static_cast<std::size_t>(r) * dim, inv[r]);
      const std::string what = std::to_string(rows) + " x " + std::to_string(dim);
      expect_fd([&](const std::vector<double>& in) { return loss(ln, in); }, x, g, probes(x.size(), u), "dx " + what);
      expect_close(g_row, g, 1e-12, "reverse_row " + what);
      expect_fd([&](const std::vector<double>& gam) { return loss(LayerNorm<double>{dim, gam, ln.beta}, x); }, ln.gamma,
                ggamma, probes(dim, u), "dgamma " + what);
      expect_fd([&](const std::vector<double>& bet) { return loss(LayerNorm<double>{dim, ln.gamma, bet}, x); }, ln.beta,
                gbeta, probes(dim, u), "dbeta " + what);
    }
  }
}

// ---- gated MLP -----------------------------------------------------------------------------

TYPED_TEST(DenseKernels, GatedMlpMatchesReferenceForEveryArchitectureAndSegmentSplit) {
  using T = TypeParam;
  test::Uniform u(14);
  for (const auto& sh : test::gated_mlp_shapes()) {
    const auto w = test::random_gated_mlp_weights<T>(sh.in, sh.hidden, sh.out, sh.norm, u);
    const GatedMlp<T> m(w, sh.segments);
    for (int rows : test::test_sizes()) {
      const auto z = cast<T>(random_vector(static_cast<std::size_t>(rows) * sh.in, u, -2, 2));
      std::vector<T> y(static_cast<std::size_t>(rows) * sh.out, T(777)), ref(y.size());
      m.compute(z.data(), rows, y.data());
      reference::compute_gated_mlp(w, z.data(), rows, ref.data());
      expect_close(y, ref, test::Tolerance<T>::kernel * 20,
                   "in " + std::to_string(sh.in) + " hidden " + std::to_string(sh.hidden) + ", " + std::to_string(rows) + " rows");
    }
  }
}

TEST(DenseKernelsReverse, GatedMlpInputAndWeightGradientsMatchFiniteDifferences) {
  test::Uniform u(15);
  for (const auto& sh : test::gated_mlp_shapes()) {
    for (int rows : {1, 13, 40}) {  // 40: two tiles, the second partial
      auto w = test::random_gated_mlp_weights<double>(sh.in, sh.hidden, sh.out, sh.norm, u);
      const auto z = random_vector(static_cast<std::size_t>(rows) * sh.in, u, -2, 2);
      const auto gy = random_vector(static_cast<std::size_t>(rows) * sh.out, u);
      auto loss = [&](const GatedMlpWeights<double>& weights, const std::vector<double>& in) {
        std::vector<double> y(gy.size());
        GatedMlp<double>(weights, sh.segments).compute(in.data(), rows, y.data());
        double s = 0;
        for (std::size_t q = 0; q < y.size(); ++q) s += gy[q] * y[q];
        return s;
      };
      const GatedMlp<double> m(w, sh.segments);
      std::vector<double> gz(z.size(), 777.0);
      auto gw = w.zeros_like();
      m.reverse(z.data(), gy.data(), rows, gz.data(), &gw);
      const std::string what = "in " + std::to_string(sh.in) + " hidden " + std::to_string(sh.hidden) + " norm " +
                               std::to_string(sh.norm) + ", " + std::to_string(rows) + " rows";
      expect_fd([&](const std::vector<double>& in) { return loss(w, in); }, z, gz, probes(z.size(), u), "dz " + what);
      const auto flat = flatten(w);
      expect_fd(
          [&](const std::vector<double>& p) {
            auto v = w;
            unflatten(p, v);
            return loss(v, z);
          },
          flat, flatten(gw), probes(flat.size(), u, 40), "dweights " + what);
    }
  }
}

TEST(DenseKernelsReverse, GatedMlpOnDualNumbersGivesTheDirectionalDerivativeOfItsReverse) {
  // What the trainer's double backward reads: y and (gz, gweights) at (z + eps dz, W + eps dW)
  // for a fixed gy; their tangents must be the directional derivatives of the plain stages.
  using D = Dual<double>;
  test::Uniform u(16);
  for (const auto& sh : test::gated_mlp_shapes()) {
    const int rows = 37;
    auto w = test::random_gated_mlp_weights<double>(sh.in, sh.hidden, sh.out, sh.norm, u);
    const auto z = random_vector(static_cast<std::size_t>(rows) * sh.in, u, -2, 2);
    const auto gy = random_vector(static_cast<std::size_t>(rows) * sh.out, u);
    auto flat_w = flatten(w);
    const auto dz = random_vector(z.size(), u), dw = random_vector(flat_w.size(), u);
    // Plain stages at (z + t dz, W + t dW): y, gz and gW concatenated.
    auto plain = [&](double t) {
      std::vector<double> zt(z.size()), pw(flat_w.size());
      for (std::size_t q = 0; q < z.size(); ++q) zt[q] = z[q] + t * dz[q];
      for (std::size_t q = 0; q < pw.size(); ++q) pw[q] = flat_w[q] + t * dw[q];
      auto wt = w;
      unflatten(pw, wt);
      const GatedMlp<double> m(wt, sh.segments);
      std::vector<double> y(gy.size()), gz(z.size());
      auto gw = wt.zeros_like();
      m.compute(zt.data(), rows, y.data());
      m.reverse(zt.data(), gy.data(), rows, gz.data(), &gw);
      y.insert(y.end(), gz.begin(), gz.end());
      const auto g = flatten(gw);
      y.insert(y.end(), g.begin(), g.end());
      return y;
    };
    GatedMlpWeights<D> wd;
    wd.in = w.in, wd.hidden = w.hidden, wd.out = w.out, wd.norm = w.norm;
    {
      auto src = w.parts();
      auto dst = wd.parts();
      std::size_t k = 0;
      for (std::size_t p = 0; p < src.size(); ++p) {
        for (double v : *src[p]) dst[p]->emplace_back(v, dw[k++]);
      }
    }
    std::vector<D> zd(z.size()), gyd(gy.begin(), gy.end()), yd(gy.size()), gzd(z.size());
    for (std::size_t q = 0; q < z.size(); ++q) zd[q] = D(z[q], dz[q]);
    const GatedMlp<D> md(wd, sh.segments);
    auto gwd = wd.zeros_like();
    md.compute(zd.data(), rows, yd.data());
    md.reverse(zd.data(), gyd.data(), rows, gzd.data(), &gwd);
    std::vector<double> tangent;
    for (const auto& v : yd) tangent.push_back(v.d);
    for (const auto& v : gzd) tangent.push_back(v.d);
    for (auto* p : gwd.parts())
      for (const auto& v : *p) tangent.push_back(v.d);
    const double h = 1e-5;
    const auto fp = plain(h), fm = plain(-h), f0 = plain(0);
    ASSERT_EQ(tangent.size(), fp.size());
    for (std::size_t q = 0; q < tangent.size(); ++q) {
      const double fd = (fp[q] - fm[q]) / (2 * h);
      ASSERT_NEAR(tangent[q], fd, 1e-6 * std::max(1.0, std::abs(fd))) << "hidden " << sh.hidden << " @" << q;
    }
    // And the value parts are the plain stages' values.
    std::vector<double> value;
    for (const auto& v : yd) value.push_back(v.v);
    expect_close(value, std::vector<double>(f0.begin(), f0.begin() + static_cast<std::ptrdiff_t>(yd.size())), 1e-13,
                 "dual values");
  }
}

TEST(DenseKernels, BadShapesAreRefusedNamingThePart) {
  test::Uniform u(17);
  auto w = test::random_gated_mlp_weights<double>(5, 3, 2, true, u);
  w.gate2_b.pop_back();
  try {
    GatedMlp<double> m(w, {});
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("part 7 has 1 values, expected 2"), std::string::npos) << e.what();
  }
  const auto ok = test::random_gated_mlp_weights<double>(5, 3, 2, true, u);
  EXPECT_THROW(GatedMlp<double>(ok, {2, 2}), InputError);  // segments sum to 4, not 5
}

}  // namespace
}  // namespace fastmlip::kernels

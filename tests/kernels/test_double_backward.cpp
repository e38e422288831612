// SPDX-License-Identifier: MIT
// The double backward (math/dual.hpp): every kernel's compute and reverse run in dual
// arithmetic give the exact directional derivative of the reverse, checked against central
// finite differences of the plain kernels; and, composed into a one-interaction MACE-like
// model, the eps part of the weight gradients at positions r + eps v is the gradient of a
// force loss with respect to every weight, checked against finite differences of that loss.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/tolerance.hpp"
#include "kernels/channelwise_tp_kokkos.hpp"
#include "kernels/linear_kokkos.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "kernels/radial_mlp_kokkos.hpp"
#include "kernels/symmetric_contraction_kokkos.hpp"
#include "math/coupling_basis.hpp"
#include "math/dual.hpp"
#include "math/spherical_harmonics.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Nested = std::vector<std::vector<std::vector<double>>>;
template <class S>
using Mat = Kokkos::View<S**, Kokkos::LayoutRight, Exec>;
template <class S>
using Vec = Kokkos::View<S*, Exec>;

template <class S>
Mat<S> mat(const S* v, int rows, int cols) {
  Mat<S> m("m", rows, cols);
  std::copy(v, v + static_cast<std::size_t>(rows) * cols, m.data());
  return m;
}
template <class S, class View>
void append(std::vector<S>& out, const View& v) {
  out.insert(out.end(), v.data(), v.data() + v.size());
}
template <class S, class U>
void append_nested(std::vector<S>& out, const std::vector<std::vector<U>>& v) {
  for (const auto& a : v) {
    for (const auto& b : a) {
      out.push_back(static_cast<S>(b));
    }
  }
}

Kokkos::View<int*, Exec> ints(const std::vector<int>& s) {
  Kokkos::View<int*, Exec> v("ints", s.size());
  std::copy(s.begin(), s.end(), v.data());
  return v;
}

std::vector<double> random_vector(std::size_t n, test::Uniform& u, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  for (auto& x : v) {
    x = u(lo, hi);
  }
  return v;
}

// A kernel case maps one flat input vector (its differentiable inputs and the cotangent of its
// output) to one flat output vector (the output and every reverse result). Given a direction
// d, the tangents of a Dual<T> run must equal the central difference of plain double runs.
template <class T, class Case>
void expect_tangents_match_fd(const Case& c, const std::vector<double>& x, const std::vector<double>& dir,
                              const std::string& what) {
  std::vector<Dual<T>> xd;
  for (std::size_t i = 0; i < x.size(); ++i) {
    xd.emplace_back(static_cast<T>(x[i]), static_cast<T>(dir[i]));
  }
  const std::vector<Dual<T>> yd = c(xd);
  const double h = 1e-5;
  std::vector<double> xp(x), xm(x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    xp[i] += h * dir[i];
    xm[i] -= h * dir[i];
  }
  const std::vector<double> y = c(x), yp = c(xp), ym = c(xm);
  ASSERT_EQ(yd.size(), y.size()) << what;
  double scale = 1e-3, vscale = 1e-3;
  std::vector<double> fd(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    fd[i] = (yp[i] - ym[i]) / (2 * h);
    scale = std::max(scale, std::abs(fd[i]));
    vscale = std::max(vscale, std::abs(y[i]));
  }
  // Dual<double> against differences in double: the O(h^2) truncation error. Dual<float>: the
  // float kernels' own rounding.
  const double tol = std::is_same_v<T, double> ? test::Tolerance<double>::fd : 2e-4;
  for (std::size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(yd[i].d), fd[i], tol * scale) << what << ": tangent of output " << i;
    EXPECT_NEAR(static_cast<double>(yd[i].v), y[i], (std::is_same_v<T, double> ? 1e-13 : 2e-5) * vscale)
        << what << ": value of output " << i;
  }
}

template <class T>
class DoubleBackward : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(DoubleBackward, Scalars);

TEST(Dual, ElementaryFunctionsAreExactDerivatives) {
  const double x = 0.7;
  const Dual<double> a(x, 1.0);
  const Dual<double> f = sin(a) * exp(a) / sqrt(a) + pow(a, 3) - cos(2 * a) + fabs(-a);
  const double df = std::cos(x) * std::exp(x) / std::sqrt(x) + std::sin(x) * std::exp(x) / std::sqrt(x) -
                    0.5 * std::sin(x) * std::exp(x) / std::pow(x, 1.5) + 3 * x * x + 2 * std::sin(2 * x) + 1;
  EXPECT_NEAR(f.d, df, 1e-14);
  EXPECT_NEAR(f.v, std::sin(x) * std::exp(x) / std::sqrt(x) + x * x * x - std::cos(2 * x) + x, 1e-14);
  // A clamped zero norm (sqrt of zero with zero tangent) gives no NaN.
  EXPECT_EQ(sqrt(Dual<double>(0.0, 0.0)).d, 0.0);
  EXPECT_TRUE(Dual<double>(1.0, 5.0) < 2.0);  // comparisons see values only
}

// Spherical harmonics: [vectors, grad_sh] -> [sh, grad_vectors].
struct ShCase {
  int lmax, n;
  template <class S>
  std::vector<S> operator()(const std::vector<S>& in) const {
    const int d = sh_dim(lmax);
    std::vector<S> sh(static_cast<std::size_t>(n) * d), gv(3 * static_cast<std::size_t>(n));
    compute_spherical_harmonics(lmax, n, in.data(), sh.data());
    reverse_spherical_harmonics(lmax, n, in.data(), in.data() + 3 * n, gv.data());
    sh.insert(sh.end(), gv.begin(), gv.end());
    return sh;
  }
};

TYPED_TEST(DoubleBackward, SphericalHarmonics) {
  test::Uniform u(11);
  for (int n : {0, 1, 13, 200}) {
    for (int lmax : {1, 3, 4}) {
      const ShCase c{lmax, n};
      const std::size_t size = 3 * static_cast<std::size_t>(n) + static_cast<std::size_t>(n) * sh_dim(lmax);
      expect_tangents_match_fd<TypeParam>(c, random_vector(size, u), random_vector(size, u),
                                          "sh lmax " + std::to_string(lmax) + " n " + std::to_string(n));
    }
  }
}

// Radial Bessel basis: [r, grad_out] -> [out, grad_r, grad_frequencies].
struct BesselCase {
  RadialBasisParams params;
  int n;
  template <class S>
  std::vector<S> operator()(const std::vector<S>& in) const {
    const RadialBasisKokkos<Exec, S> k(params);
    const int N = k.num_basis();
    Vec<S> r("r", n), gr("gr", n), gw("gw", N);
    std::copy(in.begin(), in.begin() + n, r.data());
    Mat<S> g = mat(in.data() + n, n, N), out("out", n, N);
    k.compute(r, out);
    k.reverse(r, g, gr);
    k.reverse_frequencies(r, g, gw);
    std::vector<S> y;
    append(y, out);
    append(y, gr);
    append(y, gw);
    return y;
  }
};

struct FourierCase {
  FourierParams params;
  int n;
  template <class S>
  std::vector<S> operator()(const std::vector<S>& in) const {
    const FourierKokkos<Exec, S> k(params);
    const int W = k.width();
    Vec<S> t("theta", n), gt("gt", n), gk("gk", params.order());
    std::copy(in.begin(), in.begin() + n, t.data());
    Mat<S> g = mat(in.data() + n, n, W), out("out", n, W);
    k.compute(t, out);
    k.reverse(t, g, gt);
    k.reverse_frequencies(t, g, gk);
    std::vector<S> y;
    append(y, out);
    append(y, gt);
    append(y, gk);
    return y;
  }
};

TYPED_TEST(DoubleBackward, RadialAndAngularBases) {
  test::Uniform u(12);
  const std::vector<RadialBasisParams> radial{RadialBasisParams::mace(8, 5.0, 5),
                                              RadialBasisParams::chgnet({3.0, 6.5, 9.1, 12.9}, 4.5)};
  for (int n : {0, 1, 13, 200}) {
    for (const auto& p : radial) {
      const std::size_t size = n + static_cast<std::size_t>(n) * p.num_basis();
      auto x = random_vector(size, u);
      for (int e = 0; e < n; ++e) {
        x[e] = u(0.5, 0.97 * p.r_max);  // inside the cutoff, where the basis is smooth
      }
      expect_tangents_match_fd<TypeParam>(BesselCase{p, n}, x, random_vector(size, u),
                                          "bessel n " + std::to_string(n));
    }
    const FourierParams f{{1.0, 2.0, 3.3}};
    const std::size_t size = n + static_cast<std::size_t>(n) * f.width();
    expect_tangents_match_fd<TypeParam>(FourierCase{f, n}, random_vector(size, u, -3, 3), random_vector(size, u),
                                        "fourier n " + std::to_string(n));
  }
}

// Radial MLP: [in, grad_out] -> [out, grad_in, grad_weights].
struct MlpCase {
  RadialMLP mlp;
  int n;
  template <class S>
  std::vector<S> operator()(const std::vector<S>& in) const {
    const RadialMLPKokkos<Exec, S> k(mlp);
    const int a = mlp.width_in(), b = mlp.width_out();
    Mat<S> x = mat(in.data(), n, a), g = mat(in.data() + static_cast<std::size_t>(n) * a, n, b), out("out", n, b),
           gx("gx", n, a);
    k.compute(x, out);
    k.reverse(x, g, gx);
    std::vector<S> y;
    append(y, out);
    append(y, gx);
    for (const auto& layer : k.reverse_weights(x, g)) {
      for (const auto& w : layer) {
        y.push_back(static_cast<S>(w));
      }
    }
    return y;
  }
};

TYPED_TEST(DoubleBackward, RadialMlp) {
  test::Uniform u(13);
  RadialMLP mlp;
  mlp.widths = {5, 7, 6, 9};
  mlp.act_cst = 1.679;
  for (std::size_t l = 0; l + 1 < mlp.widths.size(); ++l) {
    mlp.weights.push_back(random_vector(static_cast<std::size_t>(mlp.widths[l]) * mlp.widths[l + 1], u, -2, 2));
  }
  // 300 edges: the host path's chunks of 256 edges, a whole one and a partial one.
  for (int n : {0, 1, 13, 100, 300}) {
    const std::size_t size = static_cast<std::size_t>(n) * (5 + 9);
    expect_tangents_match_fd<TypeParam>(MlpCase{mlp, n}, random_vector(size, u, -2, 2), random_vector(size, u),
                                        "mlp n " + std::to_string(n));
  }
}

// Channelwise TP: [x, Y, w, grad_out] -> [out, grad_x, grad_Y, grad_w].
struct TpCase {
  ChannelwiseTP tp;
  int nodes;
  std::vector<int> sender, receiver;
  template <class S>
  std::vector<S> operator()(const std::vector<S>& in) const {
    const ChannelwiseTPKokkos<Exec, S> k(tp);
    const int E = static_cast<int>(sender.size());
    const auto g = EdgeIndex<Exec>::build(nodes, sender, receiver);
    const S* p = in.data();
    Mat<S> x = mat(p, nodes, tp.dim1());
    p += x.size();
    Mat<S> Y = mat(p, E, tp.dim2());
    p += Y.size();
    Mat<S> w = mat(p, E, tp.weight_numel);
    p += w.size();
    Mat<S> go = mat(p, nodes, tp.dim_out()), out("out", nodes, tp.dim_out()), gx("gx", nodes, tp.dim1()),
           gY("gY", E, tp.dim2()), gw("gw", E, tp.weight_numel);
    k.compute(g, x, Y, w, out);
    k.reverse(g, x, Y, w, go, gx, gY, gw);
    std::vector<S> y;
    append(y, out);
    append(y, gx);
    append(y, gY);
    append(y, gw);
    return y;
  }
};

TYPED_TEST(DoubleBackward, ChannelwiseTensorProduct) {
  test::Uniform u(14);
  const auto tp = ChannelwiseTP::mace(Irreps::parse("3x0e+3x1o"), Irreps::spherical_harmonics(2),
                                      Irreps::parse("3x0e+3x1o+3x2e"));
  for (int nodes : {0, 1, 13, 40}) {
    TpCase c{tp, nodes, {}, {}};
    for (int r = 0; r < nodes; ++r) {
      for (int s = 0; s < nodes; ++s) {
        if (s != r && u(0, 1) < 0.4) {
          c.sender.push_back(s);
          c.receiver.push_back(r);
        }
      }
    }
    const std::size_t E = c.sender.size();
    const std::size_t size = nodes * (tp.dim1() + tp.dim_out()) + E * (tp.dim2() + tp.weight_numel);
    expect_tangents_match_fd<TypeParam>(c, random_vector(size, u), random_vector(size, u),
                                        "tp nodes " + std::to_string(nodes));
  }
}

// Linear with element sets: [W, x, grad_out] -> [out, grad_x, grad_W].
struct LinearCase {
  EquivariantLinear lin;
  std::vector<int> sets;
  template <class S>
  std::vector<S> operator()(const std::vector<S>& in) const {
    const LinearKokkos<Exec, S> k(lin);
    const int n = static_cast<int>(sets.size());
    const S* p = in.data();
    Mat<S> W = mat(p, lin.num_sets, lin.weight_numel);
    p += W.size();
    Mat<S> x = mat(p, n, lin.irreps_in.dim());
    p += x.size();
    Mat<S> go = mat(p, n, lin.irreps_out.dim()), out("out", n, lin.irreps_out.dim()), gx("gx", n, lin.irreps_in.dim()),
           gW("gW", lin.num_sets, lin.weight_numel);
    const auto s = ints(sets);
    k.compute(W, s, x, out);
    k.reverse(W, s, x, go, gx);
    k.reverse_weights(W, s, x, go, gW);
    std::vector<S> y;
    append(y, out);
    append(y, gx);
    append(y, gW);
    return y;
  }
};

TYPED_TEST(DoubleBackward, EquivariantLinear) {
  test::Uniform u(15);
  const auto lin = EquivariantLinear::element_skip(Irreps::parse("4x0e+3x1o+2x2e"), 3, Irreps::parse("2x0e+5x1o+1x2e"));
  for (int n : {0, 1, 13, 100}) {
    LinearCase c{lin, {}};
    for (int i = 0; i < n; ++i) {
      c.sets.push_back(static_cast<int>(u(0, 3)));
    }
    const std::size_t size = static_cast<std::size_t>(lin.num_sets) * lin.weight_numel +
                             static_cast<std::size_t>(n) * (lin.irreps_in.dim() + lin.irreps_out.dim());
    expect_tangents_match_fd<TypeParam>(c, random_vector(size, u), random_vector(size, u),
                                        "linear n " + std::to_string(n));
  }
}

// Symmetric contraction on our own coupling basis: [x, grad_out] -> [out, grad_x, grad_W].
struct ScCase {
  SymmetricContraction sc;
  Nested W;
  int elements;
  std::vector<int> species;
  template <class S>
  std::vector<S> operator()(const std::vector<S>& in) const {
    SymmetricContractionKokkos<Exec, S> k(sc);
    k.set_weights(W, elements);
    const int n = static_cast<int>(species.size());
    Mat<S> x = mat(in.data(), n, sc.dim_in()), go = mat(in.data() + x.size(), n, sc.dim_out()),
           out("out", n, sc.dim_out()), gx("gx", n, sc.dim_in());
    const auto s = ints(species);
    k.compute(s, x, out);
    k.reverse(s, x, go, gx);
    std::vector<S> y;
    append(y, out);
    append(y, gx);
    for (const auto& o : k.reverse_weights(s, x, go)) {
      append_nested(y, o);
    }
    return y;
  }
};

Nested random_sc_weights(const SymmetricContractionBasis& b, int elements, int channels, test::Uniform& u) {
  Nested W(b.shapes.size());
  for (std::size_t o = 0; o < b.shapes.size(); ++o) {
    for (const auto& shape : b.shapes[o]) {
      W[o].push_back(random_vector(static_cast<std::size_t>(elements) * shape.back() * channels, u));
    }
  }
  return W;
}

TYPED_TEST(DoubleBackward, SymmetricContraction) {
  test::Uniform u(16);
  const Irreps in = Irreps::parse("3x0e+3x1o+3x2e"), out = Irreps::parse("3x0e+3x1o");
  for (int corr : {1, 2, 3}) {
    const auto b = symmetric_contraction_basis(in, out, corr);
    const auto sc = SymmetricContraction::from_mace(in, out, corr, b.U, b.shapes);
    for (int n : {0, 1, 13, 100}) {
      ScCase c{sc, random_sc_weights(b, 2, 3, u), 2, {}};
      for (int i = 0; i < n; ++i) {
        c.species.push_back(i % 2);
      }
      const std::size_t size = static_cast<std::size_t>(n) * (sc.dim_in() + sc.dim_out());
      expect_tangents_match_fd<TypeParam>(c, random_vector(size, u), random_vector(size, u),
                                          "sc correlation " + std::to_string(corr) + " n " + std::to_string(n));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// One MACE interaction, composed from the kernels exactly as the model code composes them:
//
//   x_i    = W_emb[z_i]                                   (embedding: element-skip linear of 1x0e)
//   v_ij   = r_j - r_i,  Y = SH(v_ij),  R = MLP(Bessel(|v_ij|))
//   A_i    = sum_j TP(x_j, Y_ij, R_ij)                     (fused gather, TP and scatter)
//   B_i    = SC(Linear(A_i); z_i),   E = sum_i Readout(B_i)
//
// and its hand-written reverse, giving forces and every weight gradient. Force loss
// L = 1/2 sum |F - F_ref|^2.
struct MiniMaceParams {
  int elements = 2;
  RadialBasisParams bessel = RadialBasisParams::chgnet({3.1, 6.4, 9.2, 12.7, 15.5}, 4.0);
  RadialMLP mlp;
  std::vector<double> emb, lin, readout;
  Nested sc_weights;
};

struct MiniMaceModel {
  int lmax = 2;
  Irreps feat = Irreps::parse("4x0e"), sh = Irreps::spherical_harmonics(2);
  ChannelwiseTP tp = ChannelwiseTP::mace(feat, sh, Irreps::parse("4x0e+4x1o+4x2e"));
  EquivariantLinear emb = EquivariantLinear::element_skip(Irreps::parse("1x0e"), 2, feat);
  EquivariantLinear lin = EquivariantLinear::e3nn(tp.irreps_out, Irreps::parse("4x0e+4x1o+4x2e"));
  EquivariantLinear readout = EquivariantLinear::e3nn(Irreps::parse("4x0e+4x1o"), Irreps::parse("1x0e"));
  SymmetricContractionBasis basis =
      symmetric_contraction_basis(Irreps::parse("4x0e+4x1o+4x2e"), Irreps::parse("4x0e+4x1o"), 3);
  SymmetricContraction sc = SymmetricContraction::from_mace(Irreps::parse("4x0e+4x1o+4x2e"),
                                                            Irreps::parse("4x0e+4x1o"), 3, basis.U, basis.shapes);
  std::vector<int> species, sender, receiver;

  MiniMaceParams random_params(test::Uniform& u) const {
    MiniMaceParams p;
    p.mlp.widths = {p.bessel.num_basis(), 8, tp.weight_numel};
    p.mlp.act_cst = 1.679;
    for (std::size_t l = 0; l + 1 < p.mlp.widths.size(); ++l) {
      p.mlp.weights.push_back(random_vector(static_cast<std::size_t>(p.mlp.widths[l]) * p.mlp.widths[l + 1], u));
    }
    p.emb = random_vector(static_cast<std::size_t>(emb.num_sets) * emb.weight_numel, u);
    p.lin = random_vector(lin.weight_numel, u);
    p.readout = random_vector(readout.weight_numel, u);
    p.sc_weights = random_sc_weights(basis, p.elements, 4, u);
    return p;
  }

  template <class S>
  struct Result {
    S energy = 0;
    std::vector<S> forces;        // [N][3]
    std::vector<S> grad_weights;  // every weight gradient, flattened in a fixed order
  };

  template <class S>
  Result<S> run(const MiniMaceParams& p, const std::vector<S>& pos) const {
    const int N = static_cast<int>(species.size()), E = static_cast<int>(sender.size());
    const int sd = sh_dim(lmax);
    const auto z = ints(species);
    const auto g = EdgeIndex<Exec>::build(N, sender, receiver);
    const Kokkos::View<const int*, Exec> no_sets;
    auto weights = [](const std::vector<double>& w, int rows) {
      Mat<S> m("w", rows, static_cast<int>(w.size()) / rows);
      std::copy(w.begin(), w.end(), m.data());
      return m;
    };
    // Forward.
    const LinearKokkos<Exec, S> k_emb(emb), k_lin(lin), k_read(readout);
    const Mat<S> W_emb = weights(p.emb, emb.num_sets), W_lin = weights(p.lin, 1), W_read = weights(p.readout, 1);
    Mat<S> ones("ones", N, 1), x("x", N, feat.dim());
    Kokkos::deep_copy(ones, S(1));
    k_emb.compute(W_emb, z, ones, x);
    std::vector<S> vec(3 * static_cast<std::size_t>(E));
    Vec<S> r("r", E);
    for (int e = 0; e < E; ++e) {
      for (int k = 0; k < 3; ++k) {
        vec[3 * e + k] = pos[3 * receiver[e] + k] - pos[3 * sender[e] + k];
      }
      using std::sqrt;
      r(e) = sqrt(vec[3 * e] * vec[3 * e] + vec[3 * e + 1] * vec[3 * e + 1] + vec[3 * e + 2] * vec[3 * e + 2]);
    }
    Mat<S> Y("Y", E, sd), B("B", E, p.bessel.num_basis()), R("R", E, tp.weight_numel), A("A", N, tp.dim_out()),
        A2("A2", N, lin.irreps_out.dim()), C("C", N, sc.dim_out()), En("En", N, 1);
    compute_spherical_harmonics(lmax, E, vec.data(), Y.data());
    const RadialBasisKokkos<Exec, S> k_bessel(p.bessel);
    const RadialMLPKokkos<Exec, S> k_mlp(p.mlp);
    const ChannelwiseTPKokkos<Exec, S> k_tp(tp);
    SymmetricContractionKokkos<Exec, S> k_sc(sc);
    k_sc.set_weights(p.sc_weights, p.elements);
    k_bessel.compute(r, B);
    k_mlp.compute(B, R);
    k_tp.compute(g, x, Y, R, A);
    k_lin.compute(W_lin, no_sets, A, A2);
    k_sc.compute(z, A2, C);
    k_read.compute(W_read, no_sets, C, En);
    Result<S> res;
    for (int i = 0; i < N; ++i) {
      res.energy += En(i, 0);
    }
    // Reverse, seeded with dE/dE_i = 1.
    Mat<S> gEn("gEn", N, 1), gC("gC", N, sc.dim_out()), gA2("gA2", N, lin.irreps_out.dim()), gA("gA", N, tp.dim_out()),
        gx("gx", N, feat.dim()), gY("gY", E, sd), gR("gR", E, tp.weight_numel), gB("gB", E, p.bessel.num_basis());
    Kokkos::deep_copy(gEn, S(1));
    Mat<S> gW_read("gW", 1, readout.weight_numel), gW_lin("gW", 1, lin.weight_numel),
        gW_emb("gW", emb.num_sets, emb.weight_numel);
    Vec<S> gr("gr", E), gfreq("gfreq", p.bessel.num_basis());
    k_read.reverse(W_read, no_sets, C, gEn, gC);
    k_read.reverse_weights(W_read, no_sets, C, gEn, gW_read);
    k_sc.reverse(z, A2, gC, gA2);
    const auto gW_sc = k_sc.reverse_weights(z, A2, gC);
    k_lin.reverse(W_lin, no_sets, A, gA2, gA);
    k_lin.reverse_weights(W_lin, no_sets, A, gA2, gW_lin);
    k_tp.reverse(g, x, Y, R, gA, gx, gY, gR);
    k_emb.reverse_weights(W_emb, z, ones, gx, gW_emb);
    k_mlp.reverse(B, gR, gB);
    const auto gW_mlp = k_mlp.reverse_weights(B, gR);
    k_bessel.reverse(r, gB, gr);
    k_bessel.reverse_frequencies(r, gB, gfreq);
    std::vector<S> gvec(3 * static_cast<std::size_t>(E));
    reverse_spherical_harmonics(lmax, E, vec.data(), gY.data(), gvec.data());
    res.forces.assign(3 * static_cast<std::size_t>(N), S(0));
    for (int e = 0; e < E; ++e) {
      for (int k = 0; k < 3; ++k) {
        const S dv = gvec[3 * e + k] + gr(e) * vec[3 * e + k] / r(e);  // dE/dv_e
        res.forces[3 * receiver[e] + k] -= dv;
        res.forces[3 * sender[e] + k] += dv;
      }
    }
    append(res.grad_weights, gW_emb);
    append(res.grad_weights, gW_lin);
    append(res.grad_weights, gW_read);
    append(res.grad_weights, gfreq);
    append_nested(res.grad_weights, gW_mlp);
    for (const auto& o : gW_sc) {
      append_nested(res.grad_weights, o);
    }
    return res;
  }
};

// Every weight, in the order of Result::grad_weights, as pointers into the parameters.
std::vector<double*> weight_slots(MiniMaceParams& p) {
  std::vector<double*> s;
  for (auto* v : {&p.emb, &p.lin, &p.readout, &p.bessel.frequencies}) {
    for (double& w : *v) {
      s.push_back(&w);
    }
  }
  for (auto& layer : p.mlp.weights) {
    for (double& w : layer) {
      s.push_back(&w);
    }
  }
  for (auto& o : p.sc_weights) {
    for (auto& nu : o) {
      for (double& w : nu) {
        s.push_back(&w);
      }
    }
  }
  return s;
}

TEST(DoubleBackwardModel, ForceLossGradientWithRespectToEveryWeightIsExact) {
  test::Uniform u(17);
  MiniMaceModel m;
  MiniMaceParams p = m.random_params(u);
  // A small cluster of 7 atoms of two elements inside one cutoff, plus one isolated atom.
  const int N = 8;
  std::vector<double> pos;
  for (int i = 0; i < N - 1; ++i) {
    pos.push_back(u(0, 2.6));
    pos.push_back(u(0, 2.6));
    pos.push_back(u(0, 2.6));
    m.species.push_back(i % 2);
  }
  pos.insert(pos.end(), {20.0, 20.0, 20.0});
  m.species.push_back(1);
  for (int r = 0; r < N; ++r) {
    for (int s = 0; s < N; ++s) {
      double d2 = 0;
      for (int k = 0; k < 3; ++k) {
        d2 += (pos[3 * r + k] - pos[3 * s + k]) * (pos[3 * r + k] - pos[3 * s + k]);
      }
      if (s != r && d2 < p.bessel.r_max * p.bessel.r_max) {
        m.sender.push_back(s);
        m.receiver.push_back(r);
      }
    }
  }
  ASSERT_GT(m.sender.size(), 20u);
  const std::vector<double> f_ref = random_vector(3 * N, u);
  auto loss = [&](const MiniMaceParams& q) {
    const auto res = m.run<double>(q, pos);
    double l = 0;
    for (int i = 0; i < 3 * N; ++i) {
      l += 0.5 * (res.forces[i] - f_ref[i]) * (res.forces[i] - f_ref[i]);
    }
    return l;
  };

  // The composed reverse is right to begin with: forces are -dE/dr.
  const auto plain = m.run<double>(p, pos);
  for (int i = 0; i < 3 * N; ++i) {
    std::vector<double> pp(pos), pm(pos);
    pp[i] += 1e-5;
    pm[i] -= 1e-5;
    const double fd = -(m.run<double>(p, pp).energy - m.run<double>(p, pm).energy) / 2e-5;
    EXPECT_NEAR(plain.forces[i], fd, 1e-7 * std::max(1.0, std::abs(fd))) << "force component " << i;
  }

  // The double backward: positions r + eps v with v = dL/dF = F - F_ref; then
  // dL/dtheta = -(eps part of dE/dtheta).
  std::vector<Dual<double>> pos_dual;
  for (int i = 0; i < 3 * N; ++i) {
    pos_dual.emplace_back(pos[i], plain.forces[i] - f_ref[i]);
  }
  const auto dual = m.run<Dual<double>>(p, pos_dual);
  ASSERT_NEAR(dual.energy.v, plain.energy, 1e-12 * std::abs(plain.energy));
  // The eps part of the energy is dE/dr . v = -F . v.
  double fv = 0;
  for (int i = 0; i < 3 * N; ++i) {
    fv += plain.forces[i] * (plain.forces[i] - f_ref[i]);
    EXPECT_NEAR(dual.forces[i].v, plain.forces[i], 1e-12);
  }
  EXPECT_NEAR(dual.energy.d, -fv, 1e-10 * std::max(1.0, std::abs(fv)));

  auto slots = weight_slots(p);
  ASSERT_EQ(slots.size(), dual.grad_weights.size());
  ASSERT_EQ(slots.size(), plain.grad_weights.size());
  double scale = 0;
  for (const auto& gw : dual.grad_weights) {
    scale = std::max(scale, std::abs(gw.d));
  }
  ASSERT_GT(scale, 1e-3);
  // Every weight of every group; the groups are small enough for a full check.
  const double h = 1e-5;
  int checked = 0;
  for (std::size_t k = 0; k < slots.size(); ++k) {
    const double w0 = *slots[k];
    *slots[k] = w0 + h;
    const double lp = loss(p);
    *slots[k] = w0 - h;
    const double lm = loss(p);
    *slots[k] = w0;
    const double fd = (lp - lm) / (2 * h);
    EXPECT_NEAR(-dual.grad_weights[k].d, fd, 1e-6 * scale) << "weight " << k;
    // The value part is the ordinary energy gradient.
    EXPECT_NEAR(dual.grad_weights[k].v, plain.grad_weights[k], 1e-12 * std::max(1.0, std::abs(plain.grad_weights[k])));
    ++checked;
  }
  EXPECT_GT(checked, 200);
  RecordProperty("weights_checked", checked);
}

}  // namespace
}  // namespace fastmlip::kernels

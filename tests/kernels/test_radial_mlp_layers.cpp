// SPDX-License-Identifier: MIT
// The radial MLP's 'cuda' backend (kernels/impl/radial_mlp_layers.hpp: one GEMM per layer, the
// activations between them) with the reference BLAS in place of cuBLAS. The driver hands both
// the same column-major xGEMM arguments, so this checks them against BLAS's own definition on
// every CI run, without a GPU; the activations' launches run on the host's Kokkos. On a GPU,
// test_radial_mlp_backend_device.cpp compares cuBLAS itself with the Kokkos functors.
#include <cblas.h>
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/random_mlp.hpp"
#include "../common/rel_diff.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/backend.hpp"
#include "kernels/impl/radial_mlp_layers.hpp"
#include "kernels/radial_mlp_kokkos.hpp"
#include "kernels/reference/radial_mlp_ref.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Dtypes = ::testing::Types<float, double>;

/// BLAS's column-major xGEMM with alpha = 1, the Gemm policy's contract (cuBLAS on a GPU).
template <class R>
struct ReferenceBlasGemm {
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  void operator()(bool trans_a, bool trans_b, int m, int n, int k, const R* A, int lda, const R* B, int ldb,
                  R beta, R* C, int ldc) const {
    const auto op = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
    if constexpr (std::is_same_v<R, float>) {
      cblas_sgemm(CblasColMajor, op(trans_a), op(trans_b), m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
    } else {
      cblas_dgemm(CblasColMajor, op(trans_a), op(trans_b), m, n, k, 1.0, A, lda, B, ldb, beta, C, ldc);
    }
    ++*calls;
  }
};

template <class T>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, Exec>;

template <class T>
Matrix<T> filled(int rows, int cols, const std::vector<double>& v, std::size_t first = 0) {
  Matrix<T> m("m", rows, cols);
  for (std::size_t i = 0; i < m.size(); ++i) {
    m.data()[i] = static_cast<T>(v[first + i]);
  }
  return m;
}

/// The driver's weight store: every layer's weights scaled by 1/sqrt(n_l), one after the other.
template <class T>
Kokkos::View<const T*, Exec> scaled_weights(const RadialMLP& mlp) {
  std::vector<T> w;
  for (int l = 0; l < mlp.num_layers(); ++l) {
    for (double x : mlp.weights[l]) {
      w.push_back(static_cast<T>(x / std::sqrt(static_cast<double>(mlp.widths[l]))));
    }
  }
  Kokkos::View<T*, Exec> v("w", w.size());
  std::copy(w.begin(), w.end(), v.data());
  return v;
}

/// Shapes: MACE-MP-0's radial MLP, odd widths, one layer (no hidden layer), a hidden layer of
/// width 1, and a wide last layer of a prime width.
std::vector<std::vector<int>> shapes() {
  return {{8, 64, 64, 64, 512}, {7, 13, 11, 29}, {5, 9}, {3, 6, 1, 4}, {8, 17, 11, 151}};
}

template <class T>
class RadialMLPLayersTyped : public ::testing::Test {};
TYPED_TEST_SUITE(RadialMLPLayersTyped, Dtypes);

// Forward and input gradient against the Kokkos functors (themselves checked against the
// reference and finite differences in test_linear_mlp.cpp), on row windows of larger matrices
// as a model's chunks of edges pass them: rows outside the window stay untouched.
TYPED_TEST(RadialMLPLayersTyped, MatchesTheKokkosFunctorsForwardAndReverse) {
  using T = TypeParam;
  const double tol = test::Tolerance<T>::kernel * 20;
  std::uint64_t seed = 11;
  for (const auto& widths : shapes()) {
    const RadialMLP mlp = test::random_radial_mlp(widths, 1.679177, seed++);
    const RadialMLPKokkos<Exec, T> functors(mlp);
    ReferenceBlasGemm<T> gemm;
    const impl::RadialMLPLayers<Exec, T, ReferenceBlasGemm<T>> layers(mlp.widths, static_cast<T>(mlp.act_cst),
                                                                      gemm);
    const auto W = scaled_weights<T>(mlp);
    const int a = mlp.width_in(), b = mlp.width_out();
    for (int E : test::test_sizes()) {
      const std::string what = "widths " + std::to_string(widths.size()) + " layers from " +
                               std::to_string(a) + " to " + std::to_string(b) + ", " + std::to_string(E) +
                               " edges";
      test::Uniform u(seed + E);
      const int pad = 3, rows = E + 2 * pad;
      const auto in_all =
          filled<T>(rows, a, test::random_vector(static_cast<std::size_t>(rows) * a, u, 0, 1));
      const auto g_all = filled<T>(rows, b, test::random_vector(static_cast<std::size_t>(rows) * b, u));
      const auto window = std::make_pair(pad, pad + E);
      const Matrix<T> in = Kokkos::subview(in_all, window, Kokkos::ALL);
      const Matrix<T> g = Kokkos::subview(g_all, window, Kokkos::ALL);

      Matrix<T> want("want", E, b), got_all("got", rows, b);
      Kokkos::deep_copy(got_all, T(777));
      const Matrix<T> got = Kokkos::subview(got_all, window, Kokkos::ALL);
      functors.compute(in, want);
      *gemm.calls = 0;
      layers.compute(W, in, got);
      Kokkos::fence();
      EXPECT_EQ(*gemm.calls, E == 0 ? 0 : mlp.num_layers()) << what << ": one product per layer";
      EXPECT_LE(test::rel_diff(got, want, 1.0), tol) << what;

      Matrix<T> gwant("gwant", E, a), gin_all("gin", rows, a);
      Kokkos::deep_copy(gin_all, T(777));
      const Matrix<T> gin = Kokkos::subview(gin_all, window, Kokkos::ALL);
      functors.reverse(in, g, gwant);
      *gemm.calls = 0;
      layers.reverse(W, in, g, gin);
      Kokkos::fence();
      EXPECT_EQ(*gemm.calls, E == 0 ? 0 : 2 * mlp.num_layers() - 1)
          << what << ": the hidden layers' forward, then one product per layer backwards";
      EXPECT_LE(test::rel_diff(gin, gwant, 1.0), tol) << what;
      for (int r : {0, 1, rows - 2, rows - 1}) {
        for (int j = 0; j < a; ++j) {
          ASSERT_EQ(gin_all(r, j), T(777)) << what << ": row " << r << " outside the window was written";
        }
        for (int j = 0; j < b; ++j) {
          ASSERT_EQ(got_all(r, j), T(777)) << what << ": row " << r << " outside the window was written";
        }
      }
    }
  }
}

// The same driver in float64 against the defining formula (reference::compute_radial_mlp), so
// that agreement with the functors is not agreement in a shared mistake.
TEST(RadialMLPLayers, MatchesTheReferenceMLP) {
  const RadialMLP mlp = test::random_radial_mlp({8, 64, 64, 64, 512}, 1.679177, 5);
  const impl::RadialMLPLayers<Exec, double, ReferenceBlasGemm<double>> layers(mlp.widths, mlp.act_cst, {});
  const int E = 37;
  test::Uniform u(6);
  const auto x = test::random_vector(static_cast<std::size_t>(E) * 8, u, 0, 1);
  std::vector<double> want(static_cast<std::size_t>(E) * 512);
  reference::compute_radial_mlp(mlp, E, x.data(), want.data());
  Matrix<double> got("got", E, 512);
  layers.compute(scaled_weights<double>(mlp), filled<double>(E, 8, x), got);
  Kokkos::fence();
  EXPECT_LE(test::rel_diff(got, want, 1.0), 1e-13);
}

// Backend::cuda is cuBLAS on a GPU: asked for on the host it is refused by name, never a
// silent fallback; automatic stays on the functors until a GPU run has compared the two.
TEST(RadialMLPLayers, CudaBackendIsRefusedOffTheGpuAndAutomaticIsKokkos) {
  const RadialMLP mlp = test::random_radial_mlp({8, 16, 24}, 1.679177, 3);
  EXPECT_EQ((RadialMLPKokkos<Exec, double>(mlp).backend()), Backend::kokkos);
  EXPECT_EQ((RadialMLPKokkos<Exec, double>(mlp, Backend::automatic).backend()), Backend::kokkos);
  EXPECT_EQ((RadialMLPKokkos<Exec, float>(mlp, Backend::kokkos).backend()), Backend::kokkos);
  try {
    RadialMLPKokkos<Exec, float> k(mlp, Backend::cuda);
    ADD_FAILURE() << "the host radial MLP accepted the cuda backend";
  } catch (const UnsupportedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cuBLAS"), std::string::npos) << msg;
    EXPECT_NE(msg.find(Exec::name()), std::string::npos) << msg;
    EXPECT_NE(msg.find("Use the 'kokkos' backend"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace fastmlip::kernels

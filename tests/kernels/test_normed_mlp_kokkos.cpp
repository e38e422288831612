// SPDX-License-Identifier: MIT
// mace-torch's RadialMLP (kernels/normed_mlp_kokkos.hpp: Linear, LayerNorm, SiLU; the non-linear
// interaction block's radial and density MLPs) on Kokkos' default execution space, float and
// double, odd row counts, with and without hidden layers and the first layer's per-row term:
// compute() against the naive reference, and reverse() against central finite differences of
// the reference (in double). On a host space both paths run (`rows`, the host SIMD kernels;
// `teams`, what a GPU runs). Built into the kernel tests and the device tests.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/random_mlp.hpp"
#include "../common/space_views.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/normed_mlp_kokkos.hpp"
#include "kernels/reference/normed_mlp_ref.hpp"

namespace fastmlip::kernels {
namespace {

using Space = Kokkos::DefaultExecutionSpace;
constexpr bool kHostSpace = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space::memory_space>::accessible;

template <class T>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, Space>;

template <class T>
Matrix<T> to_space(const std::vector<double>& v, int rows, int cols) {
  return test::matrix_in_space<T>(v, rows, cols, "normed_mlp_test");
}
template <class T>
std::vector<double> to_host(const Matrix<T>& d) {
  return test::host_values(d);
}

/// Weights as torch initialises them in scale, LayerNorm affine maps away from (1, 0).
NormedMLP random_mlp(const std::vector<int>& widths, std::uint64_t seed) {
  test::Uniform u(seed);
  NormedMLP m;
  m.widths = widths;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const double s = 1.0 / std::sqrt(static_cast<double>(widths[l]));
    m.weight.push_back(test::random_vector(static_cast<std::size_t>(widths[l]) * widths[l + 1], u, -s, s));
    m.bias.push_back(test::random_vector(widths[l + 1], u, -s, s));
    if (l + 2 < widths.size()) {
      m.gamma.push_back(test::random_vector(widths[l + 1], u, 0.5, 1.5));
      m.beta.push_back(test::random_vector(widths[l + 1], u, -0.3, 0.3));
    }
  }
  return m;
}

template <class T>
class NormedMLPKokkosTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(NormedMLPKokkosTest, Precisions);

TYPED_TEST(NormedMLPKokkosTest, ForwardMatchesTheReferenceAndReverseFiniteDifferences) {
  using T = TypeParam;
  const std::vector<std::vector<int>> shapes{{3, 5, 1}, {4, 7, 6, 9}, {2, 3}, {8, 16, 16, 35}};
  std::vector<DensePath> paths{DensePath::teams};
  if (kHostSpace) {
    paths.push_back(DensePath::rows);
  }
  std::uint64_t seed = 71;
  for (const auto& widths : shapes) {
    for (bool with_pre : {false, true}) {
      for (int rows : test::test_sizes()) {
        for (DensePath path : paths) {
          const NormedMLP mlp = random_mlp(widths, ++seed);
          test::Uniform u(seed + 1000);
          const int in = widths.front(), out = widths.back(), first = widths[1];
          const auto x = test::random_vector(static_cast<std::size_t>(rows) * in, u, -2, 2);
          const auto pre = with_pre ? test::random_vector(static_cast<std::size_t>(rows) * first, u)
                                    : std::vector<double>{};
          const std::string what = "widths " + std::to_string(widths.size()) + " layers, in " +
                                   std::to_string(in) + ", out " + std::to_string(out) + ", " +
                                   std::to_string(rows) + " rows" + (with_pre ? ", pre" : "") +
                                   (path == DensePath::rows ? ", rows" : ", teams");
          SCOPED_TRACE(what);
          // The reference sees the inputs as rounded to T.
          const auto rounded = [](const std::vector<double>& v) {
            std::vector<double> r;
            for (double a : v) {
              r.push_back(static_cast<double>(static_cast<T>(a)));
            }
            return r;
          };
          const auto xt = rounded(x), pt = rounded(pre);
          const NormedMLPKokkos<Space, T> k(mlp, path);
          typename NormedMLPKokkos<Space, T>::Workspace ws;
          Matrix<T> y("y", rows, out), gx("gx", rows, in);
          const Matrix<T> dx = to_space<T>(x, rows, in);
          const Matrix<T> dpre = with_pre ? to_space<T>(pre, rows, first) : Matrix<T>();
          k.compute(dx, dpre, y, ws);
          const auto want = reference::compute_normed_mlp(mlp, xt, pt, rows);
          const auto got = to_host(y);
          double scale = 1, err = 0;
          for (std::size_t q = 0; q < want.size(); ++q) {
            scale = std::max(scale, std::abs(want[q]));
            err = std::max(err, std::abs(got[q] - want[q]));
          }
          EXPECT_LE(err / scale, 20 * test::Tolerance<T>::kernel);

          // dE/dx for E = sum_r,o c[r][o] out[r][o], against central differences in double.
          const auto c = test::random_vector(static_cast<std::size_t>(rows) * out, u);
          k.reverse(to_space<T>(c, rows, out), gx, ws);
          const auto g = to_host(gx);
          const double h = 1e-5;
          double gerr = 0, gscale = 1;
          for (int r = 0; r < std::min(rows, 3); ++r) {
            for (int i = 0; i < in; ++i) {
              auto xp = xt, xm = xt;
              xp[static_cast<std::size_t>(r) * in + i] += h;
              xm[static_cast<std::size_t>(r) * in + i] -= h;
              const auto fp = reference::compute_normed_mlp(mlp, xp, pt, rows);
              const auto fm = reference::compute_normed_mlp(mlp, xm, pt, rows);
              double fd = 0;
              for (int o = 0; o < out; ++o) {
                const std::size_t q = static_cast<std::size_t>(r) * out + o;
                fd += c[q] * (fp[q] - fm[q]) / (2 * h);
              }
              gscale = std::max(gscale, std::abs(fd));
              gerr = std::max(gerr, std::abs(fd - g[static_cast<std::size_t>(r) * in + i]));
            }
          }
          const double fd_tolerance = std::is_same_v<T, float> ? 1e-4 : test::Tolerance<T>::fd;
          EXPECT_LE(gerr / gscale, fd_tolerance);
        }
      }
    }
  }
}

TEST(NormedMLP, ValidateNamesTheLayer) {
  NormedMLP m = random_mlp({3, 4, 2}, 5);
  m.bias[1].pop_back();
  try {
    m.validate();
    FAIL() << "a short bias was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fastmlip::kernels

// SPDX-License-Identifier: MIT
// The Kokkos entry points of CHGNet's dense kernels (kernels/dense_kokkos.hpp, gated_mlp_kokkos.hpp)
// on Kokkos' default execution space, float and double, odd row counts. The dense layer and
// LayerNorm: the `teams` path against the naive reference (forward) and the host kernel (reverse,
// itself checked against finite differences in test_dense.cpp); the `rows` path equal to the host
// kernel bit for bit. The gated MLP, for every CHGNet architecture (hidden layer or not,
// LayerNorm or not, first layer split into segments):
// - the `teams` path (what a GPU runs) against the naive reference, and its input gradient
//   against central finite differences of the reference (double);
// - the `rows` path (host spaces) equal, bit for bit, to the host kernel the pair style runs;
// - z1 assembled from per-segment projections equal to compute_z1, and the segments' input
//   gradients summing to reverse_input;
// - kept activations (the `rows` path) giving the same bits as recomputing them, and the forward
//   the reverse recomputes handed back equal to compute_from_z1's.
// Built into the kernel tests (the host: both paths) and the device tests (a GPU: teams only).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/random_mlp.hpp"
#include "../common/rel_diff.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/dense_kokkos.hpp"
#include "kernels/gated_mlp.hpp"
#include "kernels/gated_mlp_kokkos.hpp"
#include "kernels/reference/dense_ref.hpp"

namespace fastmlip::kernels {
namespace {

using Space = Kokkos::DefaultExecutionSpace;
constexpr bool kHostSpace = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space::memory_space>::accessible;

template <class T>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, Space>;

template <class T>
Matrix<T> to_space(const std::vector<T>& v, std::size_t rows, std::size_t cols, const char* label) {
  Matrix<T> d(std::string(label), rows, cols);
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t q = 0; q < v.size(); ++q) {
    h.data()[q] = v[q];
  }
  Kokkos::deep_copy(d, h);
  return d;
}
template <class T>
std::vector<T> to_host(const Matrix<T>& d) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  return std::vector<T>(h.data(), h.data() + h.size());
}
std::string describe(const test::GatedMlpShape& sh, int rows) {
  return "in " + std::to_string(sh.in) + " hidden " + std::to_string(sh.hidden) + " out " +
         std::to_string(sh.out) + (sh.norm ? " norm" : " no norm") + " segments " +
         std::to_string(std::max<std::size_t>(sh.segments.size(), 1)) + ", " + std::to_string(rows) + " rows";
}

template <class T>
class DenseKokkosTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(DenseKokkosTest, Precisions);

TYPED_TEST(DenseKokkosTest, DenseTeamsMatchTheReferenceAndRowsTheHostKernelBitForBit) {
  using T = TypeParam;
  test::Uniform u(35);
  for (const auto& [in, out] : {std::pair{1, 1}, {13, 7}, {31, 64}}) {
    const auto W = test::cast<T>(test::random_vector(static_cast<std::size_t>(in) * out, u));
    const auto b = test::cast<T>(test::random_vector(out, u));
    const Dense<T> host(in, out, W.data(), b.data());
    std::vector<T> WT(W.size());  // [in][out], for the reverse's reference
    for (int o = 0; o < out; ++o) {
      for (int i = 0; i < in; ++i) {
        WT[std::size_t(i) * out + o] = W[std::size_t(o) * in + i];
      }
    }
    for (int rows : test::test_sizes()) {
      const std::string what =
          std::to_string(rows) + " rows, " + std::to_string(in) + " -> " + std::to_string(out);
      const auto x = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * in, u));
      const auto gy = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * out, u));
      std::vector<T> y_ref(gy.size()), gx_ref(x.size());
      reference::compute_dense(x.data(), rows, in, out, W.data(), b.data(), y_ref.data());
      reference::compute_dense(gy.data(), rows, out, in, WT.data(), static_cast<const T*>(nullptr),
                               gx_ref.data());
      const auto xd = to_space(x, rows, in, "x"), gyd = to_space(gy, rows, out, "gy");
      for (const DensePath path : {DensePath::teams, DensePath::rows}) {
        if (path == DensePath::rows && !kHostSpace) {
          continue;
        }
        const DenseKokkos<Space, T> d(host, path);
        const bool teams = path == DensePath::teams;
        Matrix<T> y("y", rows, out), gx("gx", rows, in);
        d.compute(xd, y);
        d.reverse(gyd, gx);
        const auto yh = to_host(y), gxh = to_host(gx);
        // Accumulating adds x W^T without the bias, and gy W.
        d.compute(xd, y, true);
        d.reverse(gyd, gx, true);
        const auto y2 = to_host(y), gx2 = to_host(gx);
        std::vector<T> y2_ref(y_ref.size()), gx2_ref(gx_ref.size());
        for (std::size_t q = 0; q < y_ref.size(); ++q) {
          y2_ref[q] = T(2) * y_ref[q] - b[q % out];
        }
        for (std::size_t q = 0; q < gx_ref.size(); ++q) {
          gx2_ref[q] = T(2) * gx_ref[q];
        }
        const double tol = test::Tolerance<T>::kernel * std::max(in, out);
        EXPECT_LE(test::rel_diff(yh, y_ref, 1.0), tol) << (teams ? "teams " : "rows ") << what;
        EXPECT_LE(test::rel_diff(gxh, gx_ref, 1.0), tol) << (teams ? "teams " : "rows ") << what;
        EXPECT_LE(test::rel_diff(y2, y2_ref, 1.0), tol)
            << (teams ? "teams " : "rows ") << "accumulate " << what;
        EXPECT_LE(test::rel_diff(gx2, gx2_ref, 1.0), tol)
            << (teams ? "teams " : "rows ") << "accumulate " << what;
        if (!teams) {
          std::vector<T> y_host(y_ref.size()), gx_host(gx_ref.size());
          host.compute(x.data(), rows, in, y_host.data(), out);
          host.reverse(gy.data(), rows, out, gx_host.data(), in, false);
          EXPECT_EQ(yh, y_host) << what;
          EXPECT_EQ(gxh, gx_host) << what;
        }
      }
    }
  }
}

TYPED_TEST(DenseKokkosTest, LayerNormTeamsMatchTheReferenceAndTheHostReverse) {
  using T = TypeParam;
  test::Uniform u(36);
  for (int dim : {1, 7, 64, 129}) {
    const LayerNorm<T> host{dim, test::cast<T>(test::random_vector(dim, u, 0.5, 1.5)),
                            test::cast<T>(test::random_vector(dim, u))};
    for (int rows : test::test_sizes()) {
      const std::string what = std::to_string(rows) + " rows of " + std::to_string(dim);
      const auto x = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * dim, u, -3, 3));
      const auto g = test::cast<T>(test::random_vector(x.size(), u));
      std::vector<T> y_ref(x.size()), yhat_host(x.size()), inv_host(rows), y_host = x, g_host = g;
      reference::compute_layer_norm(x.data(), rows, dim, host.gamma.data(), host.beta.data(),
                                    LayerNorm<T>::kEps, y_ref.data());
      host.compute_rows(y_host.data(), yhat_host.data(), inv_host.data(), rows);
      host.reverse_rows(g_host.data(), yhat_host.data(), inv_host.data(), rows);
      for (const DensePath path : {DensePath::teams, DensePath::rows}) {
        if (path == DensePath::rows && !kHostSpace) {
          continue;
        }
        const bool teams = path == DensePath::teams;
        const LayerNormKokkos<Space, T> ln(host, path);
        Matrix<T> y = to_space(x, rows, dim, "y"), yhat("yhat", rows, dim), gd = to_space(g, rows, dim, "g");
        Kokkos::View<T*, Space> inv("inv", rows);
        ln.compute(y, yhat, inv);
        ln.reverse(gd, yhat, inv);
        const auto yh = to_host(y), gh = to_host(gd);
        const double tol = test::Tolerance<T>::kernel * dim;
        EXPECT_LE(test::rel_diff(yh, y_ref, 1.0), tol) << (teams ? "teams " : "rows ") << what;
        EXPECT_LE(test::rel_diff(gh, g_host, 1.0), tol) << (teams ? "teams " : "rows ") << "reverse " << what;
        if (!teams) {
          EXPECT_EQ(yh, y_host) << what;
          EXPECT_EQ(gh, g_host) << what;
        }
      }
    }
  }
}

template <class T>
class GatedMlpKokkosTest : public ::testing::Test {};
TYPED_TEST_SUITE(GatedMlpKokkosTest, Precisions);

TYPED_TEST(GatedMlpKokkosTest, TeamsMatchTheReferenceAndRowsTheHostKernelBitForBit) {
  using T = TypeParam;
  test::Uniform u(31);
  for (const auto& sh : test::gated_mlp_shapes()) {
    const auto w = test::random_gated_mlp_weights<T>(sh.in, sh.hidden, sh.out, sh.norm, u);
    const GatedMlp<T> host(w, sh.segments);
    const GatedMlpKokkos<Space, T> teams(host, DensePath::teams);
    for (int rows : {0, 1, 13, 33, 1000}) {  // 33: two host tiles, the second of one row
      const std::string what = describe(sh, rows);
      const auto z = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * sh.in, u, -2, 2));
      std::vector<T> ref(static_cast<std::size_t>(rows) * sh.out);
      reference::compute_gated_mlp(w, z.data(), rows, ref.data());
      const auto zd = to_space(z, rows, sh.in, "z");
      Matrix<T> y("y", rows, sh.out);
      teams.compute(zd, y);
      EXPECT_LE(test::rel_diff(to_host(y), ref, 1.0), test::Tolerance<T>::kernel * 20) << "teams, " << what;
      if constexpr (kHostSpace) {
        const GatedMlpKokkos<Space, T> by_rows(host);
        EXPECT_EQ(by_rows.path(), DensePath::rows);
        std::vector<T> want(ref.size());
        host.compute(z.data(), rows, want.data());
        by_rows.compute(zd, y);
        EXPECT_EQ(to_host(y), want) << "rows, " << what;
      } else {
        EXPECT_EQ((GatedMlpKokkos<Space, T>(host).path()), DensePath::teams);
      }
    }
  }
}

// L = sum(gy * y): the teams path's dL/dz against central differences of the reference in
// double; in both precisions against the host kernel's reverse (itself checked against finite
// differences in test_dense.cpp).
TYPED_TEST(GatedMlpKokkosTest, TeamsInputGradientMatchesFiniteDifferencesAndTheHostKernel) {
  using T = TypeParam;
  test::Uniform u(32);
  for (const auto& sh : test::gated_mlp_shapes()) {
    const auto w = test::random_gated_mlp_weights<T>(sh.in, sh.hidden, sh.out, sh.norm, u);
    const GatedMlp<T> host(w, sh.segments);
    const GatedMlpKokkos<Space, T> teams(host, DensePath::teams);
    for (int rows : {1, 13, 40}) {
      const std::string what = describe(sh, rows);
      const auto z = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * sh.in, u, -2, 2));
      const auto gy = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * sh.out, u));
      Matrix<T> gz("gz", rows, sh.in);
      Kokkos::deep_copy(gz, T(777));
      teams.reverse(to_space(z, rows, sh.in, "z"), to_space(gy, rows, sh.out, "gy"), gz);
      const auto got = to_host(gz);
      std::vector<T> want(z.size());
      host.reverse(z.data(), gy.data(), rows, want.data(), nullptr);
      EXPECT_LE(test::rel_diff(got, want, 1.0), test::Tolerance<T>::kernel * 50)
          << "vs host kernel, " << what;
      if constexpr (std::is_same_v<T, double>) {
        const auto loss = [&](const std::vector<double>& in) {
          std::vector<double> y(gy.size());
          reference::compute_gated_mlp(w, in.data(), rows, y.data());
          double s = 0;
          for (std::size_t q = 0; q < y.size(); ++q) {
            s += gy[q] * y[q];
          }
          return s;
        };
        const double h = 1e-5;
        for (std::size_t q = 0; q < z.size(); q += std::max<std::size_t>(1, z.size() / 37)) {
          auto zp = z, zm = z;
          zp[q] += h, zm[q] -= h;
          const double fd = (loss(zp) - loss(zm)) / (2 * h);
          EXPECT_NEAR(got[q], fd, test::Tolerance<double>::fd * std::max(1.0, std::abs(fd)))
              << what << " @" << q;
        }
      }
    }
  }
}

// The stages a CHGNet block calls: per-segment projections summed with the bias are z1, and the
// segments' input gradients are the columns of reverse_input; accumulate adds.
TYPED_TEST(GatedMlpKokkosTest, SegmentStagesComposeToTheWholeRowStages) {
  using T = TypeParam;
  test::Uniform u(33);
  for (const auto& sh : test::gated_mlp_shapes()) {
    const auto w = test::random_gated_mlp_weights<T>(sh.in, sh.hidden, sh.out, sh.norm, u);
    const GatedMlp<T> host(w, sh.segments);
    for (const DensePath path : {DensePath::teams, DensePath::rows}) {
      if (path == DensePath::rows && !kHostSpace) {
        continue;
      }
      const GatedMlpKokkos<Space, T> m(host, path);
      const int rows = 17, w2 = m.width2();
      const std::string what = describe(sh, rows) + (path == DensePath::rows ? ", rows" : ", teams");
      const auto z = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * sh.in, u, -2, 2));
      const auto ga = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * w2, u));
      Matrix<T> z1("z1", rows, w2), gz("gz", rows, sh.in), gad = to_space(ga, rows, w2, "ga");
      m.compute_z1(to_space(z, rows, sh.in, "z"), z1);
      m.reverse_input(gad, gz);
      const auto z1_whole = to_host(z1), gz_whole = to_host(gz);
      std::vector<T> z1_sum(z1_whole.size()), gz_cols(gz_whole.size());
      for (int r = 0; r < rows; ++r) {
        std::copy(host.b1.begin(), host.b1.end(), z1_sum.begin() + std::size_t(r) * w2);
      }
      for (int s = 0, begin = 0; s < m.segments(); begin += m.segment_width(s), ++s) {
        const int len = m.segment_width(s);
        std::vector<T> zs(static_cast<std::size_t>(rows) * len);
        for (int r = 0; r < rows; ++r) {
          std::copy_n(z.begin() + std::size_t(r) * sh.in + begin, len, zs.begin() + std::size_t(r) * len);
        }
        Matrix<T> proj("proj", rows, w2), gx("gx", rows, len);
        m.project(s, to_space(zs, rows, len, "zs"), proj);
        const auto p = to_host(proj);
        for (std::size_t q = 0; q < p.size(); ++q) {
          z1_sum[q] += p[q];
        }
        Kokkos::deep_copy(gx, T(1));
        m.reverse_segment(s, gad, gx, true);  // 1 + ga W_s
        const auto g = to_host(gx);
        for (int r = 0; r < rows; ++r) {
          for (int i = 0; i < len; ++i) {
            gz_cols[std::size_t(r) * sh.in + begin + i] = g[std::size_t(r) * len + i] - T(1);
          }
        }
      }
      EXPECT_LE(test::rel_diff(z1_sum, z1_whole, 1.0), test::Tolerance<T>::kernel * 20) << "z1, " << what;
      EXPECT_LE(test::rel_diff(gz_cols, gz_whole, 1.0), test::Tolerance<T>::kernel * 20) << "dz, " << what;
    }
  }
}

TYPED_TEST(GatedMlpKokkosTest, KeptActivationsOneSegmentsFirstLayerAndTheReversesForward) {
  using T = TypeParam;
  test::Uniform u(41);
  for (const auto& sh : test::gated_mlp_shapes()) {
    const auto w = test::random_gated_mlp_weights<T>(sh.in, sh.hidden, sh.out, sh.norm, u);
    const GatedMlp<T> host(w, sh.segments);
    for (const DensePath path : {DensePath::teams, DensePath::rows}) {
      if (path == DensePath::rows && !kHostSpace) {
        continue;
      }
      const GatedMlpKokkos<Space, T> m(host, path);
      const int rows = 71, w2 = m.width2(), s = m.segments() - 1, len = m.segment_width(s);
      const std::string what = describe(sh, rows) + (path == DensePath::rows ? ", rows" : ", teams");
      // z1 = b1 + x_s W_s against the bias plus the segment's projection.
      const auto xs = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * len, u, -2, 2));
      Matrix<T> z1("z1", rows, w2), proj("proj", rows, w2);
      m.compute_z1_from_segment(s, to_space(xs, rows, len, "xs"), z1);
      m.project(s, to_space(xs, rows, len, "xs"), proj);
      auto want = to_host(proj);
      for (std::size_t q = 0; q < want.size(); ++q) {
        want[q] += host.b1[q % w2];
      }
      EXPECT_LE(test::rel_diff(to_host(z1), want, 1.0), test::Tolerance<T>::kernel * 20)
          << "z1 from a segment, " << what;
      // Kept or recomputed, the reverse gives the same bits, and the y it hands back is the
      // forward's (bit for bit on one path's arithmetic).
      const auto gy = test::cast<T>(test::random_vector(static_cast<std::size_t>(rows) * sh.out, u));
      const auto gyd = to_space(gy, rows, sh.out, "gy");
      typename GatedMlpKokkos<Space, T>::Kept kept("kept", m.kept_size(rows));
      EXPECT_EQ(kept.extent(0) == 0, path == DensePath::teams) << what;
      Matrix<T> y("y", rows, sh.out), y_kept("y_kept", rows, sh.out), ga("ga", rows, w2),
          ga_kept("ga_kept", rows, w2), y_back("y_back", rows, sh.out);
      m.compute_from_z1(z1, y);
      m.compute_from_z1(z1, y_kept, kept);
      m.reverse_to_z1(z1, gyd, ga);
      m.reverse_to_z1(z1, gyd, ga_kept, y_back, kept);
      EXPECT_EQ(to_host(y_kept), to_host(y)) << what;
      EXPECT_EQ(to_host(ga_kept), to_host(ga)) << what;
      if (path == DensePath::rows) {
        EXPECT_EQ(to_host(y_back), to_host(y)) << what;
      } else {
        EXPECT_LE(test::rel_diff(to_host(y_back), to_host(y), 1.0), test::Tolerance<T>::kernel) << what;
      }
      if (path == DensePath::rows) {
        const typename GatedMlpKokkos<Space, T>::Kept short_kept("short", m.kept_size(rows) - 1);
        EXPECT_THROW(m.compute_from_z1(z1, y, short_kept), InputError) << what;
      }
    }
  }
}

TEST(GatedMlpKokkos, BadShapesAndSegmentsAreRefusedNamingTheView) {
  test::Uniform u(34);
  const GatedMlp<double> host(test::random_gated_mlp_weights<double>(7, 3, 4, true, u), {3, 4});
  const GatedMlpKokkos<Space, double> m(host);
  Matrix<double> z("z", 5, 7), z1("z1", 5, host.width2), y("y", 4, 4), x("x", 5, 3);
  try {
    m.compute_from_z1(z1, y);
    ADD_FAILURE() << "a y of the wrong row count was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("GatedMlpKokkos::compute_from_z1: y is 4 x 4, expected 5 x 4"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(m.compute_z1(x, z1), InputError);  // 3 columns, not 7
  EXPECT_THROW(m.project(1, x, z1), InputError);  // segment 1 is 4 wide
  try {
    m.project(2, x, z1);
    ADD_FAILURE() << "segment 2 of 2 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("GatedMlpKokkos::project: segment 2 of 2"), std::string::npos)
        << e.what();
  }
  if constexpr (!kHostSpace) {
    EXPECT_THROW((GatedMlpKokkos<Space, double>(host, DensePath::rows)), UnsupportedError);
  }
}

}  // namespace
}  // namespace fastmlip::kernels

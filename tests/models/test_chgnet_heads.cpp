// SPDX-License-Identifier: MIT
// CHGNet's heads (models/chgnet/chgnet_heads.hpp) on Kokkos' default execution space, float and
// double, odd sizes, with and without the readout's LayerNorm (v0.3.0 and v0.2.0), one to three
// readout linears:
// - site energies and magnetic moments against a naive evaluation in double, on every path the
//   space has (`rows` and `teams` on the host, `teams` on a GPU);
// - the readout's reverse against central finite differences of the energy (double) and, in
//   float, against double.
// Built into the model tests (the host) and the device tests (a GPU).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "../common/random_mlp.hpp"
#include "../common/space_views.hpp"
#include "../common/tolerance.hpp"
#include "models/chgnet/chgnet_heads.hpp"

namespace fastmlip::models {
namespace {

using Space = Kokkos::DefaultExecutionSpace;
constexpr bool kHostSpace = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space::memory_space>::accessible;

/// A readout of `widths` (Fa, hidden..., 1) with random weights, the LayerNorm optional, E
/// elements' AtomRef and a site-wise linear.
struct HeadsWeights {
  std::vector<int> widths;
  bool norm = true;
  std::vector<std::vector<double>> w, b;  // torch layout [out][in], [out]
  std::vector<double> gamma, beta, atom_ref, site_w, site_b;

  HeadsWeights(std::vector<int> widths_, bool norm_, int elements, std::uint64_t seed)
      : widths(std::move(widths_)), norm(norm_) {
    test::Uniform u(seed);
    for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
      w.push_back(test::random_vector(static_cast<std::size_t>(widths[l]) * widths[l + 1], u, -0.6, 0.6));
      b.push_back(test::random_vector(static_cast<std::size_t>(widths[l + 1]), u));
    }
    gamma = test::random_vector(static_cast<std::size_t>(widths[0]), u, 0.5, 1.5);
    beta = test::random_vector(static_cast<std::size_t>(widths[0]), u);
    atom_ref = test::random_vector(static_cast<std::size_t>(elements), u, -5, -1);
    site_w = test::random_vector(static_cast<std::size_t>(widths[0]), u);
    site_b = test::random_vector(1, u);
  }

  template <class T>
  chgnet::Heads<Space, T> heads(kernels::DensePath path) const {
    std::optional<kernels::LayerNorm<T>> ln;
    if (norm) {
      ln.emplace();
      ln->dim = widths[0];
      ln->gamma = test::cast<T>(gamma);
      ln->beta = test::cast<T>(beta);
    }
    std::vector<kernels::Dense<T>> readout;
    for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
      const auto wl = test::cast<T>(w[l]), bl = test::cast<T>(b[l]);
      readout.emplace_back(widths[l], widths[l + 1], wl.data(), bl.data());
    }
    const auto sw = test::cast<T>(site_w), sb = test::cast<T>(site_b);
    return chgnet::Heads<Space, T>(ln, readout, atom_ref,
                                   kernels::Dense<T>(widths[0], 1, sw.data(), sb.data()), path);
  }

  /// The naive site energy of one row.
  double energy(const double* x, int z) const {
    std::vector<double> h(x, x + widths[0]);
    if (norm) {
      double mean = 0, var = 0;
      for (double v : h) {
        mean += v;
      }
      mean /= widths[0];
      for (double v : h) {
        var += (v - mean) * (v - mean);
      }
      var /= widths[0];
      for (int j = 0; j < widths[0]; ++j) {
        h[j] = (h[j] - mean) / std::sqrt(var + 1e-5) * gamma[j] + beta[j];
      }
    }
    for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
      std::vector<double> y(static_cast<std::size_t>(widths[l + 1]));
      for (int o = 0; o < widths[l + 1]; ++o) {
        y[o] = b[l][o];
        for (int i = 0; i < widths[l]; ++i) {
          y[o] += w[l][static_cast<std::size_t>(o) * widths[l] + i] * h[i];
        }
        if (l + 2 < widths.size()) {
          y[o] = y[o] / (1 + std::exp(-y[o]));
        }
      }
      h = y;
    }
    return h[0] + atom_ref[z];
  }
  double magmom(const double* x) const {
    double m = site_b[0];
    for (int j = 0; j < widths[0]; ++j) {
      m += site_w[j] * x[j];
    }
    return std::abs(m);
  }
};

template <class T>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, Space>;

std::vector<kernels::DensePath> paths() {
  if (kHostSpace) {
    return {kernels::DensePath::rows, kernels::DensePath::teams};
  }
  return {kernels::DensePath::teams};
}

struct Evaluation {
  std::vector<double> site, magmom, gx;
};

template <class T>
Evaluation evaluate(const HeadsWeights& hw, const std::vector<double>& x, const std::vector<int>& species,
                    kernels::DensePath path) {
  const int rows = static_cast<int>(species.size()), dim = hw.widths[0];
  auto heads = hw.heads<T>(path);
  const auto xd = test::matrix_in_space<T>(x, rows, dim, "x");
  const auto sp = test::vector_in_space<int>(species, "species");
  Kokkos::View<double*, Space> site("site", rows), m("m", rows);
  heads.compute(xd, sp, site);
  heads.magmom(xd, m);
  Matrix<T> gx("gx", rows, dim);
  Kokkos::deep_copy(gx, T(777));  // overwritten
  heads.reverse(gx);
  return {test::host_values(site), test::host_values(m), test::host_values(gx)};
}

template <class T>
class ChgnetHeads : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChgnetHeads, Dtypes);

TYPED_TEST(ChgnetHeads, MatchTheNaiveHeadsAndTheirGradient) {
  using T = TypeParam;
  constexpr bool kDouble = std::is_same_v<T, double>;
  const double tol = kDouble ? 1e-12 : 2e-5;
  int seed = 0;
  for (const auto& widths : std::vector<std::vector<int>>{{13, 1}, {13, 7, 1}, {9, 11, 5, 1}}) {
    for (const bool norm : {true, false}) {
      for (const int rows : {1, 7, 31}) {
        const HeadsWeights hw(widths, norm, 3, static_cast<std::uint64_t>(++seed));
        test::Uniform u(static_cast<std::uint64_t>(100 + seed));
        const auto x = test::random_vector(static_cast<std::size_t>(rows) * widths[0], u, -2, 2);
        std::vector<int> species;
        for (int i = 0; i < rows; ++i) {
          species.push_back(i % 3);
        }
        const std::string where = "widths " + std::to_string(widths.size()) + (norm ? " norm" : " no norm") +
                                  ", " + std::to_string(rows) + " rows";
        const auto ref = evaluate<double>(hw, x, species, paths().front());
        for (const auto path : paths()) {
          const auto got = evaluate<T>(hw, x, species, path);
          const std::string at = where + (path == kernels::DensePath::rows ? ", rows" : ", teams");
          for (int i = 0; i < rows; ++i) {
            const double* xi = x.data() + static_cast<std::size_t>(i) * widths[0];
            EXPECT_NEAR(got.site[i], hw.energy(xi, species[i]), tol * 10) << at << " row " << i;
            EXPECT_NEAR(got.magmom[i], hw.magmom(xi), tol * 10) << at << " row " << i;
          }
          for (std::size_t q = 0; q < ref.gx.size(); ++q) {
            EXPECT_NEAR(got.gx[q], ref.gx[q], tol * 10 * std::max(1.0, std::abs(ref.gx[q])))
                << at << " " << q;
          }
        }
        if constexpr (kDouble) {
          // dE/dx by central differences of the naive energy.
          const double h = 1e-6;
          for (std::size_t q = 0; q < x.size(); ++q) {
            const int i = static_cast<int>(q) / widths[0];
            auto xp = x, xm = x;
            xp[q] += h;
            xm[q] -= h;
            const std::size_t row = static_cast<std::size_t>(i) * widths[0];
            const double fd =
                (hw.energy(xp.data() + row, species[i]) - hw.energy(xm.data() + row, species[i])) / (2 * h);
            EXPECT_NEAR(ref.gx[q], fd, 1e-7 * std::max(1.0, std::abs(fd))) << where << " " << q;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fastmlip::models

// SPDX-License-Identifier: MIT
// The symmetric contraction run on our own coupling basis (math/coupling_basis.hpp) instead of
// mace-torch's U, through from_mace and the Kokkos kernel: equivariant under rotations and
// inversion with random weights, and, with mace-torch's weights re-expressed in our basis, the
// same function as the mace-torch modules of tests/reference/data/kernels/symmetric_contraction.json.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../common/tolerance.hpp"
#include "kernels/symmetric_contraction_kokkos.hpp"
#include "math/coupling_basis.hpp"
#include "math/wigner_d.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Nested = std::vector<std::vector<std::vector<double>>>;
using Matrix = Kokkos::View<double**, Kokkos::LayoutRight, Exec>;

Matrix matrix(const std::vector<double>& v, int rows, int cols) {
  Matrix m("m", rows, cols);
  std::copy(v.begin(), v.end(), m.data());
  return m;
}

Kokkos::View<int*, Exec> species_view(const std::vector<int>& s) {
  Kokkos::View<int*, Exec> v("species", s.size());
  std::copy(s.begin(), s.end(), v.data());
  return v;
}

std::vector<double> run(const SymmetricContraction& sc, const Nested& W, int num_elements,
                        const std::vector<int>& species, const std::vector<double>& x) {
  SymmetricContractionKokkos<Exec, double> kk(sc);
  kk.set_weights(W, num_elements);
  const int N = static_cast<int>(species.size());
  Matrix out("out", N, sc.dim_out());
  kk.compute(species_view(species), matrix(x, N, sc.dim_in()), out);
  return std::vector<double>(out.data(), out.data() + out.size());
}

// Row-wise D x for a [rows, irreps.dim()] matrix.
std::vector<double> rotate(const Irreps& irreps, const Mat3<double>& R, const std::vector<double>& m,
                           int rows) {
  const auto D = wigner_D(irreps, R);
  const int d = irreps.dim();
  std::vector<double> r(m.size(), 0.0);
  for (int a = 0; a < rows; ++a) {
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) {
        r[a * d + i] += D[i * d + j] * m[a * d + j];
      }
    }
  }
  return r;
}

// With random weights, which exercise every basis tensor: contract(D x) = D contract(x) for
// a proper and an improper element of O(3).
TEST(SymmetricContractionOwnBasis, IsEquivariantUnderRotationsAndInversion) {
  const Irreps in = Irreps::parse("3x0e+3x1o+3x2e+3x3o");
  const Irreps out_irreps = Irreps::parse("3x0e+3x1o+3x2e+3x3o");
  const int corr = 3, elements = 2, N = 13, C = 3;
  const SymmetricContractionBasis b = symmetric_contraction_basis(in, out_irreps, corr);
  const SymmetricContraction sc = SymmetricContraction::from_mace(in, out_irreps, corr, b.U, b.shapes);
  test::Uniform u(7);
  Nested W(b.shapes.size());
  for (std::size_t o = 0; o < b.shapes.size(); ++o) {
    for (int nu = 1; nu <= corr; ++nu) {
      std::vector<double> w(static_cast<std::size_t>(elements) * b.shapes[o][nu - 1].back() * C);
      for (double& v : w) {
        v = u(-1, 1);
      }
      W[o].push_back(std::move(w));
    }
  }
  std::vector<int> species(N);
  for (int n = 0; n < N; ++n) {
    species[n] = n % elements;
  }
  std::vector<double> x(static_cast<std::size_t>(N) * in.dim());
  for (double& v : x) {
    v = u(-1, 1);
  }
  const auto out = run(sc, W, elements, species, x);
  double scale = 0;
  for (double v : out) {
    scale = std::max(scale, std::abs(v));
  }
  ASSERT_GT(scale, 0.1);  // a vanishing output would make the check empty
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  double worst = 0;
  for (int improper = 0; improper < 2; ++improper) {
    Mat3<double> R = rotation_from_quaternion(normal(rng), normal(rng), normal(rng), normal(rng));
    if (improper) {
      for (double& v : R) {
        v = -v;
      }
    }
    const auto out_rot = run(sc, W, elements, species, rotate(in, R, x, N));
    const auto expect = rotate(out_irreps, R, out, N);
    for (std::size_t i = 0; i < expect.size(); ++i) {
      worst = std::max(worst, std::abs(out_rot[i] - expect[i]) / scale);
      ASSERT_NEAR(out_rot[i], expect[i], 1e-12 * scale) << (improper ? "improper" : "proper") << " @" << i;
    }
  }
  std::printf("[ measured ] own-basis contraction equivariance (relative): %.3e\n", worst);
}

// Our basis spans the symmetrised mace-torch U, so every mace-torch model is also a model on
// our basis: with W_ours[e, k, c] = sum_j <U_ours[k], U_mace[j]> / (2L+1) W_mace[e, j, c] (our
// columns are orthogonal with squared norm 2L+1, and symmetric, so this projects the
// symmetrised mace-torch tensor, the only part x (x) .. (x) x sees) the contraction reproduces
// mace-torch's outputs.
TEST(SymmetricContractionOwnBasis, RepresentsEveryMaceTorchFixture) {
  std::ifstream fin(FASTMLIP_REFERENCE_DATA_DIR "/kernels/symmetric_contraction.json");
  ASSERT_TRUE(fin.good()) << "missing fixture; regenerate with tests/reference/make_kernel_fixtures.py";
  const auto data = nlohmann::json::parse(fin);
  int cases = 0;
  std::size_t params_ours = 0, params_mace = 0;
  double worst = 0;
  for (const auto& c : data["symmetric_contraction"]) {
    const Irreps in = Irreps::parse(c["irreps_in"].get<std::string>());
    const Irreps out_irreps = Irreps::parse(c["irreps_out"].get<std::string>());
    const int corr = c["correlation"].get<int>(), elements = c["num_elements"].get<int>();
    const SymmetricContractionBasis b = symmetric_contraction_basis(in, out_irreps, corr);
    const SymmetricContraction sc = SymmetricContraction::from_mace(in, out_irreps, corr, b.U, b.shapes);
    const int C = sc.channels;
    Nested W(out_irreps.size());
    for (std::size_t o = 0; o < out_irreps.size(); ++o) {
      const int M = out_irreps[o].ir.dim();
      for (int nu = 1; nu <= corr; ++nu) {
        const auto& uj = c["contractions"][o]["U"][std::to_string(nu)];
        const int Km = uj["shape"].get<std::vector<int>>().back(), K = b.shapes[o][nu - 1].back();
        const auto& ours = b.U[o][nu - 1];
        std::vector<double> mace(ours.size() / K * Km, 0.0);
        for (const auto& nz : uj["nonzeros"]) {
          mace[nz[0].get<std::size_t>()] = nz[1].get<double>();
        }
        std::vector<double> coef(static_cast<std::size_t>(K) * Km, 0.0);
        for (std::size_t r = 0; r < ours.size() / K; ++r) {
          for (int k = 0; k < K; ++k) {
            for (int j = 0; j < Km; ++j) {
              coef[k * Km + j] += ours[r * K + k] * mace[r * Km + j] / M;
            }
          }
        }
        const auto wm = c["contractions"][o]["W"][std::to_string(nu)]["values"].get<std::vector<double>>();
        std::vector<double> w(static_cast<std::size_t>(elements) * K * C, 0.0);
        for (int e = 0; e < elements; ++e) {
          for (int k = 0; k < K; ++k) {
            for (int j = 0; j < Km; ++j) {
              for (int ch = 0; ch < C; ++ch) {
                w[(e * K + k) * C + ch] += coef[k * Km + j] * wm[(e * Km + j) * C + ch];
              }
            }
          }
        }
        W[o].push_back(std::move(w));
        params_ours += static_cast<std::size_t>(K);
        params_mace += static_cast<std::size_t>(Km);
      }
    }
    // mace-torch feeds x as [nodes, channels, ell]; ours is e3nn's flat layout.
    const auto species = c["species"].get<std::vector<int>>();
    const auto xm = c["x"].get<std::vector<double>>();
    const auto expect = c["out"].get<std::vector<double>>();
    const int N = static_cast<int>(species.size());
    std::vector<double> x(static_cast<std::size_t>(N) * sc.dim_in(), 0.0);
    for (int n = 0; n < N; ++n) {
      for (int ch = 0; ch < C; ++ch) {
        for (int i = 0; i < sc.num_ell; ++i) {
          x[n * sc.dim_in() + sc.ell_offset[i] + ch * sc.ell_stride[i]] = xm[(n * C + ch) * sc.num_ell + i];
        }
      }
    }
    const auto out = run(sc, W, elements, species, x);
    double scale = 0;
    for (double v : expect) {
      scale = std::max(scale, std::abs(v));
    }
    ASSERT_EQ(out.size(), expect.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      worst = std::max(worst, std::abs(out[i] - expect[i]) / scale);
      EXPECT_NEAR(out[i], expect[i], 1e-12 * scale) << out_irreps.str() << " corr " << corr << " @" << i;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 5);
  std::printf(
      "[ measured ] own basis vs mace-torch outputs (relative): %.3e; K summed over all U: ours %zu, "
      "mace-torch %zu\n",
      worst, params_ours, params_mace);
}

}  // namespace
}  // namespace fastmlip::kernels

// SPDX-License-Identifier: MIT
// The CUDA symmetric contraction against mace-torch's fixtures and the naive reference, on a
// GPU; skipped without one. Descriptor checks happen before any CUDA call and run everywhere.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "../common/kernel_fixtures.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/symmetric_contraction_cuda.hpp"
#include "kernels/reference/symmetric_contraction_ref.hpp"

namespace fastmlip::cuda {
namespace {

using kernels::SymmetricContraction;
using Nested = std::vector<std::vector<std::vector<double>>>;
using Shapes = std::vector<std::vector<std::vector<int>>>;

template <class T>
struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t n) : size(n) {
    FASTMLIP_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T)));
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& h) {
    FASTMLIP_CUDA_CHECK(cudaMemcpy(ptr, h.data(), size * sizeof(T), cudaMemcpyHostToDevice));
  }
  void poison() {  // all-ones bytes are a NaN in float and double: unwritten outputs fail
    FASTMLIP_CUDA_CHECK(cudaMemset(ptr, 0xFF, std::max<std::size_t>(size, 1) * sizeof(T)));
  }
  std::vector<T> download() const {
    std::vector<T> h(size);
    FASTMLIP_CUDA_CHECK(cudaMemcpy(h.data(), ptr, size * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  T* ptr = nullptr;
  std::size_t size;
};

// One mace-torch SymmetricContraction from the fixture file, read with the shared fixture
// reader as test_symmetric_contraction.cpp does; the U shapes are kept to rebuild it wider.
struct Case {
  SymmetricContraction sc;
  Nested U, W;
  Shapes shapes;
  int num_elements;
  std::vector<int> species;
  std::vector<double> x;  // e3nn flat layout [nodes, dim_in]
  std::vector<double> out;
};

std::vector<Case> cases() {
  const auto data = test::load_kernel_fixture(FASTMLIP_REFERENCE_DATA_DIR, "symmetric_contraction.json");
  std::vector<Case> out;
  for (const auto& c : data["symmetric_contraction"]) {
    const int corr = c["correlation"].get<int>();
    auto [U, W, shapes] = test::mace_contraction_data(c);
    Case k{
        SymmetricContraction::from_mace(Irreps::parse(c["irreps_in"].get<std::string>()),
                                        Irreps::parse(c["irreps_out"].get<std::string>()), corr, U, shapes),
        U,
        W,
        shapes,
        c["num_elements"].get<int>(),
        c["species"].get<std::vector<int>>(),
        {},
        c["out"].get<std::vector<double>>()};
    // mace-torch feeds x as [nodes, channels, ell]; ours is e3nn's flat layout.
    const auto xm = c["x"].get<std::vector<double>>();
    const int C = k.sc.channels, L = k.sc.num_ell, N = static_cast<int>(k.species.size());
    k.x.assign(static_cast<std::size_t>(N) * k.sc.dim_in(), 0.0);
    for (int n = 0; n < N; ++n) {
      for (int ch = 0; ch < C; ++ch) {
        for (int i = 0; i < L; ++i) {
          k.x[n * k.sc.dim_in() + k.sc.ell_offset[i] + ch * k.sc.ell_stride[i]] = xm[(n * C + ch) * L + i];
        }
      }
    }
    out.push_back(std::move(k));
  }
  return out;
}

// The same irreps with `channels` copies each: U does not depend on the channels.
Irreps widen(const Irreps& irreps, int channels) {
  std::vector<MulIrrep> e;
  for (const auto& m : irreps) {
    e.push_back({channels, m.ir});
  }
  return Irreps(e);
}

// Random weights in mace-torch's layout [element, K, channels], O(1) products per entry.
Nested random_weights(const SymmetricContraction& sc, int num_elements, std::uint64_t seed) {
  test::Uniform u(seed);
  Nested W(sc.num_params.size());
  for (std::size_t o = 0; o < sc.num_params.size(); ++o) {
    for (int K : sc.num_params[o]) {
      std::vector<double> w(static_cast<std::size_t>(num_elements) * K * sc.channels);
      for (double& v : w) {
        v = u(-1, 1) / std::sqrt(static_cast<double>(K));
      }
      W[o].push_back(std::move(w));
    }
  }
  return W;
}

// Rows `nodes` of a [N x width] matrix.
std::vector<double> rows(const std::vector<double>& m, int width, const std::vector<int>& nodes) {
  std::vector<double> r;
  for (int n : nodes) {
    r.insert(r.end(), m.begin() + static_cast<std::ptrdiff_t>(n) * width,
             m.begin() + static_cast<std::ptrdiff_t>(n + 1) * width);
  }
  return r;
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
class SymmetricContractionCudaTyped : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SymmetricContractionCudaTyped, Dtypes);

TYPED_TEST(SymmetricContractionCudaTyped, MatchesMaceTorchFixtures) {
  using T = TypeParam;
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  for (const auto& k : cases()) {
    const int N = static_cast<int>(k.species.size());
    SymmetricContractionCuda<T> cu(k.sc);
    cu.set_weights(k.W, k.num_elements);
    DeviceBuffer<int> d_species(N);
    DeviceBuffer<T> d_x(k.x.size()), d_out(k.out.size());
    d_species.upload(k.species);
    d_x.upload(as<T>(k.x));
    d_out.poison();
    cu.compute(d_species.ptr, N, d_x.ptr, d_out.ptr);
    FASTMLIP_CUDA_CHECK(cudaDeviceSynchronize());
    const auto out = d_out.download();
    double scale = 0;
    for (double v : k.out) {
      scale = std::max(scale, std::abs(v));
    }
    // Double: the issue's 1e-12 relative parity; float: its rounding of O(100) terms.
    const double tol = (std::is_same_v<T, double> ? 1e-12 : test::Tolerance<T>::kernel * 100) * scale;
    for (std::size_t i = 0; i < k.out.size(); ++i) {
      EXPECT_NEAR(out[i], k.out[i], tol)
          << k.sc.irreps_out.str() << " corr " << k.sc.correlation << " @" << i;
    }
  }
}

// Forward against the reference, and grad_x against the exact directional derivative of the
// reference: L(t) = sum(out(x + t v) * g) is a polynomial of degree <= correlation <= 4 in t, so
// the five-point stencil (L(-2h) - 8 L(-h) + 8 L(h) - L(2h)) / 12h is exact up to rounding.
TYPED_TEST(SymmetricContractionCudaTyped, ForwardAndReverseMatchReference) {
  using T = TypeParam;
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const auto all = cases();
  for (std::size_t which = 0; which < all.size(); ++which) {
    const auto& base = all[which];
    const int channels = 35;  // a full and a partial 32-channel tile
    const auto sc = SymmetricContraction::from_mace(widen(base.sc.irreps_in, channels),
                                                    widen(base.sc.irreps_out, channels), base.sc.correlation,
                                                    base.U, base.shapes);
    const int E = base.num_elements;
    const Nested W = random_weights(sc, E, 100 + which);
    SymmetricContractionCuda<T> cu(sc);
    cu.set_weights(W, E);
    EXPECT_LE(cu.num_evaluated_monomials(), static_cast<int>(sc.monomials.size()));
    for (int N : test::test_sizes()) {
      test::Uniform u(N + 7 * which);
      std::vector<int> species(N);
      for (int& s : species) {
        s = static_cast<int>(u(0, E));
      }
      std::vector<double> x(static_cast<std::size_t>(N) * sc.dim_in()),
          g(static_cast<std::size_t>(N) * sc.dim_out());
      for (double& v : x) {
        v = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
      for (double& v : g) {
        v = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
      DeviceBuffer<int> d_species(N);
      DeviceBuffer<T> d_x(x.size()), d_g(g.size()), d_out(g.size()), d_gx(x.size());
      d_species.upload(species);
      d_x.upload(as<T>(x));
      d_g.upload(as<T>(g));
      d_out.poison();
      d_gx.poison();
      cu.compute(d_species.ptr, N, d_x.ptr, d_out.ptr);
      cu.reverse(d_species.ptr, N, d_x.ptr, d_g.ptr, d_gx.ptr);
      FASTMLIP_CUDA_CHECK(cudaDeviceSynchronize());
      const auto out = d_out.download(), gx = d_gx.download();
      for (T v : out) {
        ASSERT_TRUE(std::isfinite(v)) << "an output was not written";
      }
      for (T v : gx) {
        ASSERT_TRUE(std::isfinite(v)) << "a gradient was not written";
      }
      // The dense reference is slow on purpose: every node when few, a spread sample otherwise.
      std::vector<int> check;
      for (int n = 0; n < N; n += N <= 13 ? 1 : N / 5) {
        check.push_back(n);
      }
      if (N > 13) {
        check.push_back(N - 1);
      }
      const int din = sc.dim_in(), dout = sc.dim_out();
      auto reference = [&](const std::vector<int>& nodes, const std::vector<double>& xs) {
        std::vector<int> sp;
        for (int n : nodes) {
          sp.push_back(species[n]);
        }
        std::vector<double> o(nodes.size() * dout);
        kernels::reference::compute_symmetric_contraction(sc, base.U, W, nodes.size(), sp.data(), xs.data(),
                                                          o.data());
        return o;
      };
      const auto ref = reference(check, rows(x, din, check));
      double scale = 1;
      for (double v : ref) {
        scale = std::max(scale, std::abs(v));
      }
      const double tol = test::Tolerance<T>::kernel * 100 * scale;
      for (std::size_t a = 0; a < check.size(); ++a) {
        for (int j = 0; j < dout; ++j) {
          ASSERT_NEAR(out[static_cast<std::size_t>(check[a]) * dout + j], ref[a * dout + j], tol)
              << sc.irreps_out.str() << " corr " << sc.correlation << " node " << check[a] << " component "
              << j;
        }
      }
      // grad_x, node by node, along a random direction.
      for (std::size_t a = 0; a < std::min<std::size_t>(check.size(), 3); ++a) {
        const int n = check[a];
        const std::vector<int> one{n};
        const auto x0 = rows(x, din, one), g0 = rows(g, dout, one);
        std::vector<double> v(din);
        for (double& c : v) {
          c = u(-1, 1);
        }
        auto loss = [&](double t) {
          std::vector<double> xt = x0;
          for (int i = 0; i < din; ++i) {
            xt[i] += t * v[i];
          }
          const auto o = reference(one, xt);
          double s = 0;
          for (int j = 0; j < dout; ++j) {
            s += o[j] * g0[j];
          }
          return s;
        };
        const double h = 0.5;
        const double expect = (loss(-2 * h) - 8 * loss(-h) + 8 * loss(h) - loss(2 * h)) / (12 * h);
        double got = 0, mag = 1;
        for (int i = 0; i < din; ++i) {
          got += static_cast<double>(gx[static_cast<std::size_t>(n) * din + i]) * v[i];
          mag += std::abs(static_cast<double>(gx[static_cast<std::size_t>(n) * din + i]) * v[i]);
        }
        EXPECT_NEAR(got, expect, test::Tolerance<T>::kernel * 100 * mag)
            << sc.irreps_out.str() << " corr " << sc.correlation << " node " << n;
      }
    }
  }
}

// The output is linear in the weights, so <grad_W, V> = sum(out(x; V) * g) for any V: an exact
// check of every element's gradient at once. Also checks that two calls agree bit for bit.
TYPED_TEST(SymmetricContractionCudaTyped, WeightGradientIsExactAndReproducible) {
  using T = TypeParam;
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const auto all = cases();
  for (std::size_t which : {std::size_t{0}, std::size_t{2}, std::size_t{4}}) {
    const auto& base = all[which];
    const int channels = 35, E = base.num_elements;
    const auto sc = SymmetricContraction::from_mace(widen(base.sc.irreps_in, channels),
                                                    widen(base.sc.irreps_out, channels), base.sc.correlation,
                                                    base.U, base.shapes);
    const Nested W = random_weights(sc, E, 200 + which), V = random_weights(sc, E, 300 + which);
    SymmetricContractionCuda<T> cu(sc), cv(sc);
    cu.set_weights(W, E);
    cv.set_weights(V, E);
    for (int N : test::test_sizes()) {
      test::Uniform u(N + 11 * which);
      std::vector<int> species(N);
      for (int& s : species) {
        s = static_cast<int>(u(0, E));
      }
      std::vector<double> x(static_cast<std::size_t>(N) * sc.dim_in()),
          g(static_cast<std::size_t>(N) * sc.dim_out());
      for (double& v : x) {
        v = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
      for (double& v : g) {
        v = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
      DeviceBuffer<int> d_species(N);
      DeviceBuffer<T> d_x(x.size()), d_g(g.size()), d_out(g.size());
      d_species.upload(species);
      d_x.upload(as<T>(x));
      d_g.upload(as<T>(g));
      const Nested gW = cu.reverse_weights(d_species.ptr, N, d_x.ptr, d_g.ptr);
      const Nested again = cu.reverse_weights(d_species.ptr, N, d_x.ptr, d_g.ptr);
      EXPECT_EQ(gW, again) << "weight gradient differs between two identical calls";
      // sum(out(x; V) * g): the reference for few nodes, else the CUDA forward (checked above).
      std::vector<double> outV(g.size());
      if (N <= 13) {
        kernels::reference::compute_symmetric_contraction(sc, base.U, V, N, species.data(), x.data(),
                                                          outV.data());
      } else {
        cv.compute(d_species.ptr, N, d_x.ptr, d_out.ptr);
        FASTMLIP_CUDA_CHECK(cudaDeviceSynchronize());
        const auto o = d_out.download();
        outV.assign(o.begin(), o.end());
      }
      double expect = 0, mag = 1;
      for (std::size_t i = 0; i < g.size(); ++i) {
        expect += outV[i] * g[i];
        mag += std::abs(outV[i] * g[i]);
      }
      double got = 0;
      for (std::size_t o = 0; o < V.size(); ++o) {
        for (std::size_t nu = 0; nu < V[o].size(); ++nu) {
          ASSERT_EQ(gW[o][nu].size(), V[o][nu].size());
          for (std::size_t i = 0; i < V[o][nu].size(); ++i) {
            got += gW[o][nu][i] * V[o][nu][i];
          }
        }
      }
      EXPECT_NEAR(got, expect, test::Tolerance<T>::kernel * 100 * mag)
          << sc.irreps_out.str() << " corr " << sc.correlation << " nodes " << N;
    }
  }
}

// A bad element index never reads outside the coefficients: that node's outputs are NaN, the
// others are unaffected, and check_species / reverse_weights name the node.
TYPED_TEST(SymmetricContractionCudaTyped, BadSpeciesIsCaught) {
  using T = TypeParam;
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const auto all = cases();
  const auto& k = all[1];
  const int N = static_cast<int>(k.species.size());
  SymmetricContractionCuda<T> cu(k.sc);
  EXPECT_THROW(cu.compute(nullptr, 1, nullptr, nullptr), InputError);  // no weights yet
  cu.set_weights(k.W, k.num_elements);
  auto bad = k.species;
  bad[2] = k.num_elements;
  DeviceBuffer<int> d_species(N);
  DeviceBuffer<T> d_x(k.x.size()), d_out(k.out.size());
  d_species.upload(bad);
  d_x.upload(as<T>(k.x));
  d_out.poison();
  cu.compute(d_species.ptr, N, d_x.ptr, d_out.ptr);
  FASTMLIP_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = d_out.download();
  const int dout = k.sc.dim_out();
  for (int n = 0; n < N; ++n) {
    for (int j = 0; j < dout; ++j) {
      const double v = out[static_cast<std::size_t>(n) * dout + j];
      if (n == 2) {
        EXPECT_TRUE(std::isnan(v)) << "component " << j;
      } else {
        EXPECT_TRUE(std::isfinite(v)) << "node " << n << " component " << j;
      }
    }
  }
  try {
    cu.check_species(d_species.ptr, N);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("node 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cu.reverse_weights(d_species.ptr, N, d_x.ptr, d_out.ptr), InputError);
}

// Runs before any CUDA call, so it holds on machines without a GPU too.
// Coefficients folded elsewhere on the device (SymmetricContractionKokkos' fold, in the
// descriptor's entry order, rows padded) give the kernels exactly what set_weights' own fold
// gives: the same coefficients, reordered on the device.
TYPED_TEST(SymmetricContractionCudaTyped, CoefficientsFromTheDeviceEqualTheOwnFold) {
  using T = TypeParam;
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  for (const auto& k : cases()) {
    const int N = static_cast<int>(k.species.size()), E = k.num_elements, C = k.sc.channels;
    const int G = static_cast<int>(k.sc.entries.size()), stride = C + 3;
    const auto folded = k.sc.fold(k.W, E);
    std::vector<T> padded(static_cast<std::size_t>(E) * G * stride, T(1e30));
    for (std::size_t row = 0; row < static_cast<std::size_t>(E) * G; ++row) {
      for (int c = 0; c < C; ++c) {
        padded[row * stride + c] = static_cast<T>(folded[row * C + c]);
      }
    }
    DeviceBuffer<T> d_coef(padded.size());
    d_coef.upload(padded);
    SymmetricContractionCuda<T> own(k.sc), given(k.sc);
    own.set_weights(k.W, E);
    given.set_coefficients(d_coef.ptr, stride, E);
    EXPECT_EQ(given.num_elements(), E);
    DeviceBuffer<int> d_species(N);
    DeviceBuffer<T> d_x(k.x.size()), d_a(k.out.size()), d_b(k.out.size());
    d_species.upload(k.species);
    d_x.upload(as<T>(k.x));
    own.compute(d_species.ptr, N, d_x.ptr, d_a.ptr);
    given.compute(d_species.ptr, N, d_x.ptr, d_b.ptr);
    FASTMLIP_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(d_a.download(), d_b.download()) << k.sc.irreps_out.str() << " corr " << k.sc.correlation;
  }
  SymmetricContractionCuda<T> cu(cases()[0].sc);
  EXPECT_THROW(cu.set_coefficients(nullptr, cases()[0].sc.channels - 1, 1), InputError);
}

TEST(SymmetricContractionCuda, RejectsWhatTheKernelsCannotHold) {
  // 73 ells (one 0e and eight 4e per channel), correlation 1, U picking the 0e component.
  const Irreps in = Irreps::parse("2x0e+2x4e+2x4e+2x4e+2x4e+2x4e+2x4e+2x4e+2x4e");
  ASSERT_EQ(in.dim() / 2, 73);
  std::vector<double> u(73, 0.0);
  u[0] = 1.0;
  const auto sc = SymmetricContraction::from_mace(in, Irreps::parse("2x0e"), 1, {{u}}, {{{73, 1}}});
  try {
    SymmetricContractionCuda<double> cu(sc);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("73 ells"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fastmlip::cuda

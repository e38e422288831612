// SPDX-License-Identifier: MIT
// The CUDA radial basis against the reference, on a GPU; skipped without one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../common/tolerance.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/radial_basis_cuda.hpp"
#include "kernels/reference/radial_basis_ref.hpp"

namespace fastmlip::cuda {
namespace {

template <class T>
class RadialBasisCuda : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RadialBasisCuda, Dtypes);

template <class T>
struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t n) : size(n) { FASTMLIP_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T))); }
  ~DeviceBuffer() { cudaFree(ptr); }
  void upload(const std::vector<T>& h) { FASTMLIP_CUDA_CHECK(cudaMemcpy(ptr, h.data(), size * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> download() const {
    std::vector<T> h(size);
    FASTMLIP_CUDA_CHECK(cudaMemcpy(h.data(), ptr, size * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  T* ptr = nullptr;
  std::size_t size;
};

TYPED_TEST(RadialBasisCuda, MatchesReference) {
  using T = TypeParam;
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  std::vector<double> trained;
  for (int n = 1; n <= 9; ++n) {
    trained.push_back(n * M_PI * (1.0 + 0.013 * std::sin(3.0 * n)));
  }
  for (const auto& p :
       {kernels::RadialBasisParams::mace(8, 5.0, 5), kernels::RadialBasisParams::chgnet(trained, 6.0)}) {
    for (int E : {0, 1, 13, 1000, 100003}) {
      test::Uniform u(E + 3);
      std::vector<T> r(E), g(static_cast<std::size_t>(E) * p.num_basis());
      for (T& x : r) {
        x = static_cast<T>(u(0.3, 1.1 * p.r_max));
      }
      for (T& x : g) {
        x = static_cast<T>(u(-1.0, 1.0));
      }
      DeviceBuffer<T> d_r(E), d_out(g.size()), d_g(g.size()), d_grad(E);
      d_r.upload(r);
      d_g.upload(g);
      FASTMLIP_CUDA_CHECK(cudaMemset(d_out.ptr, 0xFF, std::max<std::size_t>(g.size(), 1) * sizeof(T)));  // NaN poison
      compute_radial_bessel(p, E, d_r.ptr, d_out.ptr);
      reverse_radial_bessel(p, E, d_r.ptr, d_g.ptr, d_grad.ptr);
      FASTMLIP_CUDA_CHECK(cudaDeviceSynchronize());
      const auto out = d_out.download(), grad = d_grad.download();
      std::vector<T> ref(g.size()), ref_grad(E);
      kernels::reference::compute_radial_basis(p, E, r.data(), ref.data());
      kernels::reference::reverse_radial_basis(p, E, r.data(), g.data(), ref_grad.data(),
                                               static_cast<T*>(nullptr));
      const double scale = p.c() / 0.3;
      for (std::size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(out[i], ref[i], test::Tolerance<T>::kernel * scale * 10) << "value " << i << ", E " << E;
      }
      for (int e = 0; e < E; ++e) {
        ASSERT_NEAR(grad[e], ref_grad[e], test::Tolerance<T>::kernel * 1e3 * std::max(1.0, std::abs(double(ref_grad[e]))))
            << "edge " << e;
      }
    }
  }
}

}  // namespace
}  // namespace fastmlip::cuda

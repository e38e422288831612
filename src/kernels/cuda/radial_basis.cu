// SPDX-License-Identifier: MIT
// Fused radial basis on the GPU: one thread per edge computes all N functions (one sin/cos
// pair through the Chebyshev recurrence when the frequencies are harmonic), stages them in
// shared memory, and the block then stores its [edges x N] tile with consecutive threads
// writing consecutive addresses. A thread-per-edge store would stride by N and split each
// warp's store into N transactions.
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/radial_basis_cuda.hpp"
#include "kernels/impl/polynomial_envelope.hpp"

namespace fastmlip::cuda {
namespace {

using kernels::kMaxRadialBasis;

// Passed by value in the kernel's parameter space (constant bank): no global loads for the
// frequencies, and no upload before each launch.
template <class T>
struct RadialArgs {
  T w[kMaxRadialBasis];
  T inv_rmax;
  T c;
  int n;
  int p;
  bool harmonic;
};

template <class T>
RadialArgs<T> make_args(const kernels::RadialBasisParams& p) {
  p.validate();
  if (p.kind != kernels::RadialBasisKind::Bessel) {
    // The Gaussian and Chebyshev bases run in the Kokkos kernel (the one the models call).
    throw UnsupportedError(std::string("CUDA radial basis: the ") + p.name() +
                           " basis is not implemented here; "
                           "use RadialBasisKokkos");
  }
  if (!p.apply_cutoff) {
    throw UnsupportedError(
        "CUDA radial basis: a basis without its envelope (apply_cutoff false) is not implemented here; "
        "use RadialBasisKokkos");
  }
  RadialArgs<T> a{};
  for (int i = 0; i < p.num_basis(); ++i) {
    a.w[i] = static_cast<T>(p.frequencies[i]);
  }
  a.inv_rmax = static_cast<T>(1.0 / p.r_max);
  a.c = static_cast<T>(p.c());
  a.n = p.num_basis();
  a.p = p.envelope_p;
  a.harmonic = p.harmonic();
  return a;
}

template <class T>
__global__ void radial_bessel_fwd(RadialArgs<T> args, long long num_edges, const T* __restrict__ r, T* __restrict__ out) {
  extern __shared__ unsigned char smem_raw[];
  T* tile = reinterpret_cast<T*>(smem_raw);  // [blockDim.x x n]
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x;
  const long long e = first + threadIdx.x;
  const int n = args.n;
  if (e < num_edges) {
    const T re = r[e];
    T f, df;
    kernels::impl::polynomial_envelope(re, args.inv_rmax, args.p, f, df);
    const T scale = args.c * f / re;
    T* mine = tile + threadIdx.x * n;
    if (args.harmonic) {
      T s, c1;
      sincos(args.w[0] * re, &s, &c1);
      const T twoc1 = 2 * c1;
      T s_prev = 0;
      for (int k = 0; k < n; ++k) {
        mine[k] = scale * s;
        const T s_next = twoc1 * s - s_prev;
        s_prev = s;
        s = s_next;
      }
    } else {
      for (int k = 0; k < n; ++k) {
        mine[k] = scale * sin(args.w[k] * re);
      }
    }
  }
  __syncthreads();
  const long long count = min(static_cast<long long>(blockDim.x), num_edges - first) * n;
  T* dst = out + first * n;
  for (long long i = threadIdx.x; i < count; i += blockDim.x) {
    dst[i] = tile[i];
  }
}

template <class T>
__global__ void radial_bessel_bwd(RadialArgs<T> args, long long num_edges, const T* __restrict__ r,
                                  const T* __restrict__ grad_out, T* __restrict__ grad_r) {
  extern __shared__ unsigned char smem_raw[];
  T* tile = reinterpret_cast<T*>(smem_raw);
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x;
  const int n = args.n;
  // Coalesced load of this block's [edges x N] upstream gradient, mirror of the forward store.
  const long long count = min(static_cast<long long>(blockDim.x), num_edges - first) * n;
  for (long long i = threadIdx.x; i < count; i += blockDim.x) {
    tile[i] = grad_out[first * n + i];
  }
  __syncthreads();
  const long long e = first + threadIdx.x;
  if (e >= num_edges) {
    return;
  }
  const T re = r[e];
  T f, df;
  kernels::impl::polynomial_envelope(re, args.inv_rmax, args.p, f, df);
  const T sin_coef = df - f / re;
  const T* g = tile + threadIdx.x * n;
  T acc = 0;
  if (args.harmonic) {
    T s, c;
    sincos(args.w[0] * re, &s, &c);
    const T twoc1 = 2 * c;
    T s_prev = 0, c_prev = 1;
    for (int k = 0; k < n; ++k) {
      acc += g[k] * (args.w[0] * T(k + 1) * c * f + s * sin_coef);
      const T s_next = twoc1 * s - s_prev, c_next = twoc1 * c - c_prev;
      s_prev = s;
      s = s_next;
      c_prev = c;
      c = c_next;
    }
  } else {
    for (int k = 0; k < n; ++k) {
      T s, c;
      sincos(args.w[k] * re, &s, &c);
      acc += g[k] * (args.w[k] * c * f + s * sin_coef);
    }
  }
  grad_r[e] = args.c / re * acc;
}

}  // namespace

template <class T>
void compute_radial_bessel(const kernels::RadialBasisParams& p, std::size_t num_edges, const T* d_r, T* d_out,
                           void* stream) {
  if (num_edges == 0) {
    return;
  }
  const auto args = make_args<T>(p);
  const int threads = launch::kEdgeThreads;
  const std::size_t smem = sizeof(T) * threads * args.n;
  radial_bessel_fwd<T><<<launch::blocks_for(num_edges, threads), threads, smem, static_cast<cudaStream_t>(stream)>>>(
      args, static_cast<long long>(num_edges), d_r, d_out);
  FASTMLIP_CUDA_CHECK_LAUNCH();
}

template <class T>
void reverse_radial_bessel(const kernels::RadialBasisParams& p, std::size_t num_edges, const T* d_r,
                           const T* d_grad_out, T* d_grad_r, void* stream) {
  if (num_edges == 0) {
    return;
  }
  const auto args = make_args<T>(p);
  const int threads = launch::kEdgeThreads;
  const std::size_t smem = sizeof(T) * threads * args.n;
  radial_bessel_bwd<T><<<launch::blocks_for(num_edges, threads), threads, smem, static_cast<cudaStream_t>(stream)>>>(
      args, static_cast<long long>(num_edges), d_r, d_grad_out, d_grad_r);
  FASTMLIP_CUDA_CHECK_LAUNCH();
}

template void compute_radial_bessel<float>(const kernels::RadialBasisParams&, std::size_t, const float*,
                                           float*, void*);
template void compute_radial_bessel<double>(const kernels::RadialBasisParams&, std::size_t, const double*,
                                            double*, void*);
template void reverse_radial_bessel<float>(const kernels::RadialBasisParams&, std::size_t, const float*,
                                           const float*, float*, void*);
template void reverse_radial_bessel<double>(const kernels::RadialBasisParams&, std::size_t, const double*,
                                            const double*, double*, void*);

}  // namespace fastmlip::cuda

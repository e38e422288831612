// SPDX-License-Identifier: MIT
#pragma once
/// \file CUDA backend of kernels/radial_basis.hpp (plain C++ API; pointers are device memory,
/// `stream` is a cudaStream_t or null for the default stream). Same math and layout as the
/// Kokkos and reference twins: out is row-major [edges x N]. The Bessel basis only (MACE's
/// default and CHGNet's); another kind is an UnsupportedError.
#include <cstddef>

#include "kernels/radial_basis.hpp"

namespace fastmlip::cuda {

template <class T>
void compute_radial_bessel(const kernels::RadialBasisParams& p, std::size_t num_edges, const T* d_r, T* d_out,
                           void* stream = nullptr);

template <class T>
void reverse_radial_bessel(const kernels::RadialBasisParams& p, std::size_t num_edges, const T* d_r,
                           const T* d_grad_out, T* d_grad_r, void* stream = nullptr);

}  // namespace fastmlip::cuda

// SPDX-License-Identifier: MIT
#pragma once
// SphericalHarmonicsKokkos' functor: one edge per iteration, the per-vector formulas of
// math/impl/spherical_harmonics_impl.hpp (the same function the host batch and the CUDA kernels
// call), so every backend gives the same bits.
#include <Kokkos_Core.hpp>

#include "math/impl/spherical_harmonics_impl.hpp"
#include "math/limits.hpp"

namespace fastmlip::kernels::impl {

template <class ExecSpace, class T>
struct SphericalHarmonicsFunctor {
  struct TagCompute {};
  struct TagReverse {};
  static constexpr int kMaxDim = (kMaxL + 1) * (kMaxL + 1);

  int m_lmax = 0;
  Kokkos::View<const T* [3], Kokkos::LayoutRight, ExecSpace> m_vectors;
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> m_sh;
  Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace> m_grad_sh;
  Kokkos::View<T* [3], Kokkos::LayoutRight, ExecSpace> m_grad_vectors;

  KOKKOS_INLINE_FUNCTION void operator()(TagCompute, int e) const {
    detail::spherical_harmonics_one(m_lmax, m_vectors(e, 0), m_vectors(e, 1), m_vectors(e, 2), &m_sh(e, 0),
                                    static_cast<T*>(nullptr));
  }

  // grad_v = sum_i grad_sh(e, i) d sh_i / dv, summed in i order as the host batch does.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int e) const {
    T sh[kMaxDim];
    T jac[3 * kMaxDim];
    detail::spherical_harmonics_one(m_lmax, m_vectors(e, 0), m_vectors(e, 1), m_vectors(e, 2), sh, jac);
    const int d = (m_lmax + 1) * (m_lmax + 1);
    T acc[3] = {0, 0, 0};
    for (int i = 0; i < d; ++i) {
      acc[0] += m_grad_sh(e, i) * jac[3 * i];
      acc[1] += m_grad_sh(e, i) * jac[3 * i + 1];
      acc[2] += m_grad_sh(e, i) * jac[3 * i + 2];
    }
    for (int k = 0; k < 3; ++k) {
      m_grad_vectors(e, k) = acc[k];
    }
  }
};

}  // namespace fastmlip::kernels::impl

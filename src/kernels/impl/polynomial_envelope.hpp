// SPDX-License-Identifier: MIT
#pragma once
/// \file The polynomial envelope of the radial bases (see radial_basis.hpp), shared by the
/// Kokkos and CUDA kernels.
#include "core/host_device.hpp"

namespace fastmlip::kernels::impl {

/// f_p(u) and df/dr at u = r / r_max (r_max = 1 / inv_rmax), sharing u^(p-1) between the
/// three terms and the derivative (FastCHGNet eq. 12-13); f = df = 0 from the cutoff on.
template <class T>
FASTMLIP_HOST_DEVICE inline void polynomial_envelope(T r, T inv_rmax, int p, T& f, T& df) {
  const T u = r * inv_rmax;
  if (u >= T(1)) {
    f = T(0);
    df = T(0);
    return;
  }
  T up1 = T(1);  // u^(p-1); p is a small integer, so repeated products beat pow()
  for (int i = 1; i < p; ++i) {
    up1 *= u;
  }
  const T q = static_cast<T>(p);
  const T a = (q + 1) * (q + 2) / 2, b = q * (q + 2), c = q * (q + 1) / 2;
  f = T(1) - up1 * u * (a - u * (b - c * u));
  df = -up1 * inv_rmax * (q * a - u * ((q + 1) * b - (q + 2) * c * u));
}

}  // namespace fastmlip::kernels::impl

// SPDX-License-Identifier: MIT
#include "math/spherical_harmonics.hpp"

#include <initializer_list>
#include <string>

#include "core/error.hpp"

namespace fastmlip {

void throw_sh_lmax(int lmax, const char* where) {
  throw InputError(
      std::string(where) + ": lmax " + std::to_string(lmax) +
      " is not supported; the spherical harmonics are implemented for 0 <= l <= " + std::to_string(kMaxL));
}

namespace {

void check_pointers(const char* where, std::size_t n, std::initializer_list<const void*> pointers) {
  if (n == 0) {
    return;
  }
  for (const void* p : pointers) {
    if (p == nullptr) {
      throw InputError(std::string(where) + ": null array for a batch of " + std::to_string(n) + " vectors");
    }
  }
}

}  // namespace

template <class T>
void compute_spherical_harmonics(int lmax, std::size_t n, const T* vectors, T* sh, T* jacobian) {
  check_sh_lmax(lmax, "compute_spherical_harmonics");
  check_pointers("compute_spherical_harmonics", n, {vectors, sh});
  const std::size_t d = static_cast<std::size_t>(sh_dim(lmax));
  for (std::size_t e = 0; e < n; ++e) {
    const T* v = vectors + 3 * e;
    detail::spherical_harmonics_one(lmax, v[0], v[1], v[2], sh + d * e,
                                    jacobian ? jacobian + 3 * d * e : nullptr);
  }
}

template <class T>
void reverse_spherical_harmonics(int lmax, std::size_t n, const T* vectors, const T* grad_sh,
                                 T* grad_vectors) {
  check_sh_lmax(lmax, "reverse_spherical_harmonics");
  check_pointers("reverse_spherical_harmonics", n, {vectors, grad_sh, grad_vectors});
  constexpr int kMaxDim = sh_dim(kMaxL);
  const int d = sh_dim(lmax);
  T sh[kMaxDim];
  T jac[3 * kMaxDim];
  for (std::size_t e = 0; e < n; ++e) {
    const T* v = vectors + 3 * e;
    detail::spherical_harmonics_one(lmax, v[0], v[1], v[2], sh, jac);
    const T* g = grad_sh + static_cast<std::size_t>(d) * e;
    T acc[3] = {0, 0, 0};
    for (int i = 0; i < d; ++i) {
      acc[0] += g[i] * jac[3 * i];
      acc[1] += g[i] * jac[3 * i + 1];
      acc[2] += g[i] * jac[3 * i + 2];
    }
    grad_vectors[3 * e] = acc[0];
    grad_vectors[3 * e + 1] = acc[1];
    grad_vectors[3 * e + 2] = acc[2];
  }
}

template void compute_spherical_harmonics<float>(int, std::size_t, const float*, float*, float*);
template void compute_spherical_harmonics<double>(int, std::size_t, const double*, double*, double*);
template void reverse_spherical_harmonics<float>(int, std::size_t, const float*, const float*, float*);
template void reverse_spherical_harmonics<double>(int, std::size_t, const double*, const double*, double*);
template void compute_spherical_harmonics<Dual<float>>(int, std::size_t, const Dual<float>*, Dual<float>*, Dual<float>*);
template void compute_spherical_harmonics<Dual<double>>(int, std::size_t, const Dual<double>*, Dual<double>*,
                                                        Dual<double>*);
template void reverse_spherical_harmonics<Dual<float>>(int, std::size_t, const Dual<float>*, const Dual<float>*,
                                                       Dual<float>*);
template void reverse_spherical_harmonics<Dual<double>>(int, std::size_t, const Dual<double>*, const Dual<double>*,
                                                        Dual<double>*);

}  // namespace fastmlip

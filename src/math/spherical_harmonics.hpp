// SPDX-License-Identifier: MIT
#pragma once
/// \file Real spherical harmonics Y_l(v), l = 0..kMaxL, exactly as e3nn computes
/// `o3.spherical_harmonics(l, v, normalize=True, normalization="component")`, and their
/// derivative with respect to the unnormalised vector v.
///
/// Conventions (docs/equivariant-conventions.md): components ordered m = -l..l; the polar
/// axis is y (the middle component); sum_m Y_{lm}^2 = 2l + 1 on the sphere; Y_1(v) =
/// sqrt(3) v / |v| (identity order); Y_l(R v) = D^l(R) Y_l(v) with wigner_D(); Y_l(-v) =
/// (-1)^l Y_l(v). Like e3nn (torch's normalize), |v| is clamped below at 1e-12: the zero
/// vector gives Y_0 = 1 and Y_{l>0} = 0, never a NaN. Model code should reject zero-length
/// edges before they get here; this only guarantees the values agree with e3nn.
///
/// Layout: all l = 0..lmax concatenated, sh[l*l + l + m] (e3nn's "1x0e+1x1o+1x2e+..."), so a
/// vector has sh_dim(lmax) = (lmax + 1)^2 components; a Jacobian row-major
/// [sh_dim(lmax)][3]; batches are those blocks one after another.
#include <cstddef>
#include <type_traits>

#include "math/impl/spherical_harmonics_impl.hpp"
#include "math/dual.hpp"
#include "math/limits.hpp"

namespace fastmlip {

/// Throws the InputError of check_sh_lmax.
[[noreturn]] void throw_sh_lmax(int lmax, const char* where);

/// Throws InputError unless 0 <= lmax <= kMaxL; `where` starts the message. Inline so that
/// the compiler sees that the evaluation below never runs with a larger lmax.
inline void check_sh_lmax(int lmax, const char* where) {
  if (lmax < 0 || lmax > kMaxL) {
    throw_sh_lmax(lmax, where);
  }
}

/// Y_0..Y_lmax of one vector v[3] into sh[sh_dim(lmax)]; if jacobian is not null, also
/// d sh[i] / d v[k] into jacobian[3 * i + k]. Throws InputError for lmax outside 0..kMaxL.
template <class T>
void spherical_harmonics(int lmax, const T* v, T* sh, T* jacobian = nullptr) {
  static_assert(is_kernel_scalar_v<T>, "spherical_harmonics: T must be float, double or a Dual of them");
  check_sh_lmax(lmax, "spherical_harmonics");
  detail::spherical_harmonics_one(lmax, v[0], v[1], v[2], sh, jacobian);
}

/// Batched forward: n vectors vectors[n][3] -> sh[n][sh_dim(lmax)], and, if jacobian is not
/// null, jacobian[n][sh_dim(lmax)][3]. Throws InputError for lmax outside 0..kMaxL or a null
/// pointer with n > 0.
template <class T>
void compute_spherical_harmonics(int lmax, std::size_t n, const T* vectors, T* sh, T* jacobian = nullptr);

/// Batched reverse (vector-Jacobian product): grad_vectors[e][k] = sum_i grad_sh[e][i] *
/// d sh[e][i] / d vectors[e][k], for grad_sh[n][sh_dim(lmax)]. Overwrites grad_vectors[n][3].
template <class T>
void reverse_spherical_harmonics(int lmax, std::size_t n, const T* vectors, const T* grad_sh,
                                 T* grad_vectors);

extern template void compute_spherical_harmonics<float>(int, std::size_t, const float*, float*, float*);
extern template void compute_spherical_harmonics<double>(int, std::size_t, const double*, double*, double*);
extern template void reverse_spherical_harmonics<float>(int, std::size_t, const float*, const float*, float*);
extern template void reverse_spherical_harmonics<double>(int, std::size_t, const double*, const double*,
                                                         double*);
// Dual numbers: forward-mode tangents of the values and, through the reverse, of the
// gradient (the double backward, see math/dual.hpp).
extern template void compute_spherical_harmonics<Dual<float>>(int, std::size_t, const Dual<float>*, Dual<float>*,
                                                              Dual<float>*);
extern template void compute_spherical_harmonics<Dual<double>>(int, std::size_t, const Dual<double>*, Dual<double>*,
                                                               Dual<double>*);
extern template void reverse_spherical_harmonics<Dual<float>>(int, std::size_t, const Dual<float>*, const Dual<float>*,
                                                              Dual<float>*);
extern template void reverse_spherical_harmonics<Dual<double>>(int, std::size_t, const Dual<double>*,
                                                               const Dual<double>*, Dual<double>*);

}  // namespace fastmlip

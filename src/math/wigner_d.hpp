// SPDX-License-Identifier: MIT
#pragma once
/// \file Rotations and their Wigner D matrices in the real basis of spherical_harmonics.hpp,
/// for equivariance tests of every kernel: a feature of irreps `ir` transforms under a
/// rotation R as x -> wigner_D(ir, R) x.
///
/// D^l(R) is defined by Y_l(R v) = D^l(R) Y_l(v) for all v (e3nn's convention: it equals
/// e3nn's `Irrep(l, p).D_from_matrix(R)` and `o3.wigner_D(l, alpha, beta, gamma)`). It is
/// computed from that definition, D^l_ij(R) = (1/4pi) \int Y_i(R v) Y_j(v) dv over the unit
/// sphere, with a Gauss-Legendre x trapezoid product rule that integrates these degree-2l
/// polynomials exactly (docs/equivariant-conventions.md, "Wigner D").
///
/// Rotation matrices are row-major std::array<T, 9> acting on column vectors (v' = R v).
#include <array>
#include <vector>

#include "math/irreps.hpp"

namespace fastmlip {

template <class T>
using Mat3 = std::array<T, 9>;

/// e3nn's Euler angles (`o3.angles_to_matrix`): R = R_y(alpha) R_x(beta) R_y(gamma), i.e.
/// gamma about y first, then beta about x, then alpha about y.
template <class T>
Mat3<T> rotation_from_euler(T alpha, T beta, T gamma);

/// The rotation of the quaternion w + x i + y j + z k (normalised here; InputError when it is
/// zero). Uniform random rotations come from quaternions with four i.i.d. normal components.
template <class T>
Mat3<T> rotation_from_quaternion(T w, T x, T y, T z);

/// D^l(R), row-major (2l+1) x (2l+1), for a proper rotation R (R^T R = I, det R = +1 within
/// 1e-10 in double, 1e-5 in float). Throws InputError for l outside 0..kMaxL or an R that is
/// not a rotation.
template <class T>
std::vector<T> wigner_D(int l, const Mat3<T>& R);

/// D^l(R_y(alpha) R_x(beta) R_y(gamma)): e3nn's `o3.wigner_D(l, alpha, beta, gamma)`.
template <class T>
std::vector<T> wigner_D(int l, T alpha, T beta, T gamma);

/// The representation of an orthogonal R (det +-1) on a feature of the given irreps: block
/// diagonal, mul copies of p^k D^l(det(R) R) per entry with k = 1 for an improper R, as
/// e3nn's `Irreps.D_from_matrix`. Row-major irreps.dim() x irreps.dim().
template <class T>
std::vector<T> wigner_D(const Irreps& irreps, const Mat3<T>& R);

extern template Mat3<float> rotation_from_euler<float>(float, float, float);
extern template Mat3<double> rotation_from_euler<double>(double, double, double);
extern template Mat3<float> rotation_from_quaternion<float>(float, float, float, float);
extern template Mat3<double> rotation_from_quaternion<double>(double, double, double, double);
extern template std::vector<float> wigner_D<float>(int, const Mat3<float>&);
extern template std::vector<double> wigner_D<double>(int, const Mat3<double>&);
extern template std::vector<float> wigner_D<float>(int, float, float, float);
extern template std::vector<double> wigner_D<double>(int, double, double, double);
extern template std::vector<float> wigner_D<float>(const Irreps&, const Mat3<float>&);
extern template std::vector<double> wigner_D<double>(const Irreps&, const Mat3<double>&);

}  // namespace fastmlip

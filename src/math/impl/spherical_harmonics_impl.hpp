// SPDX-License-Identifier: MIT
#pragma once
/// \file Per-vector real spherical harmonics and their Jacobian, callable from host code,
/// Kokkos functors and CUDA kernels alike: no allocation, no exceptions, fixed-size locals.
///
/// The formulas (derived in docs/equivariant-conventions.md, section "Spherical harmonics"):
/// with u = v / max(|v|, 1e-12) and the "textbook" frame (X, Y, Z) = (u_z, u_x, u_y) in
/// which Z is the polar axis (e3nn's y),
///
///   Y_{l, m}  = K_{l|m|} Q_l^{|m|}(Z, r^2) * { C_m (m > 0),  1 (m = 0),  S_|m| (m < 0) }
///   C_m + i S_m = (X + i Y)^m
///   Q_m^m = (2m-1)!!,  Q_{m+1}^m = (2m+1) Z Q_m^m,
///   (l-m) Q_l^m = (2l-1) Z Q_{l-1}^m - (l+m-1) r^2 Q_{l-2}^m
///   K_{lm} = sqrt((2l+1) (2 - delta_{m0}) (l-m)! / (l+m)!)
///
/// r^2 = X^2 + Y^2 + Z^2 is 1 on the sphere; keeping it makes every Y_l a homogeneous
/// polynomial of degree l, as e3nn's are, so that vectors shorter than the 1e-12 clamp (and
/// the zero vector, where Y_0 = 1 and Y_{l>0} = 0) give e3nn's values too.
#include <cmath>

#include "math/limits.hpp"

#ifndef FASTMLIP_HOST_DEVICE
#if defined(__CUDACC__) || defined(__HIPCC__)
#define FASTMLIP_HOST_DEVICE __host__ __device__
#else
#define FASTMLIP_HOST_DEVICE
#endif
#endif

namespace fastmlip::detail {

/// The clamp of torch.nn.functional.normalize (its default eps), which e3nn's
/// spherical_harmonics(normalize=True) applies: |v| below it is replaced by it.
inline constexpr double kShNormalizeEps = 1e-12;

// sqrt usable in constant expressions (std::sqrt is not constexpr in C++17). Newton's
// iteration from above converges monotonically; it stops when it no longer decreases, which
// leaves it within one ulp of the true root.
// Host-device so that device code may evaluate kNorm below at compile time (nvcc refuses a
// host-only constexpr call from a __host__ __device__ function).
FASTMLIP_HOST_DEVICE constexpr double constexpr_sqrt(double a) {
  if (a <= 0) {
    return 0;
  }
  double x = a > 1 ? a : 1;
  for (int it = 0; it < 200; ++it) {
    const double next = 0.5 * (x + a / x);
    if (!(next < x)) {
      break;
    }
    x = next;
  }
  return x;
}

/// K_{lm} for 0 <= m <= l <= kMaxL, flattened at l (l + 1) / 2 + m.
struct ShNormalization {
  double k[(kMaxL + 1) * (kMaxL + 2) / 2] = {};
};

FASTMLIP_HOST_DEVICE constexpr ShNormalization make_sh_normalization() {
  ShNormalization n;
  for (int l = 0; l <= kMaxL; ++l) {
    for (int m = 0; m <= l; ++m) {
      double ratio = 1;  // (l-m)! / (l+m)!
      for (int f = l - m + 1; f <= l + m; ++f) {
        ratio /= f;
      }
      n.k[l * (l + 1) / 2 + m] = constexpr_sqrt((2 * l + 1) * (m == 0 ? 1.0 : 2.0) * ratio);
    }
  }
  return n;
}

/// Y_l(v) for l = 0..lmax (lmax <= kMaxL, unchecked here: the public entry points check),
/// written to sh[l*l + l + m]. When jac is not null, also dY/dv, written to
/// jac[3 * (l*l + l + m) + k] = d sh[l*l + l + m] / d v[k]: the gradient of e3nn's function of
/// the unnormalised vector (for |v| >= 1e-12 it is tangent to the sphere and scales as 1/|v|;
/// below the clamp it is the gradient of the polynomial divided by 1e-12, as autograd gives
/// through e3nn).
template <class T>
FASTMLIP_HOST_DEVICE inline void spherical_harmonics_one(int lmax, T vx, T vy, T vz, T* sh, T* jac) {
  constexpr ShNormalization kNorm = make_sh_normalization();
  using std::sqrt;
  const T eps = static_cast<T>(kShNormalizeEps);
  const T norm = sqrt(vx * vx + vy * vy + vz * vz);
  // torch's clamp_min passes the gradient where norm >= eps, so the projected branch is taken
  // there; below, denom is the constant eps.
  const bool projected = norm >= eps;
  const T denom = projected ? norm : eps;
  const T ux = vx / denom, uy = vy / denom, uz = vz / denom;
  const T X = uz, Y = ux, Z = uy;  // textbook frame: Z is e3nn's polar axis y
  const T r2 = X * X + Y * Y + Z * Z;

  // (X + iY)^m, m = 0..lmax.
  T C[kMaxL + 1], S[kMaxL + 1];
  C[0] = 1;
  S[0] = 0;
  for (int m = 0; m < lmax; ++m) {
    C[m + 1] = X * C[m] - Y * S[m];
    S[m + 1] = X * S[m] + Y * C[m];
  }

  // Q_l^m and, for the Jacobian, dQ_l^m / d(X, Y, Z): the three-term recurrence in l at
  // fixed m, differentiated term by term (r^2 contributes 2 (X, Y, Z) Q_{l-2}^m).
  T Q[kMaxL + 1][kMaxL + 1];
  T dQ[kMaxL + 1][kMaxL + 1][3];
  const bool want_jac = jac != nullptr;
  for (int m = 0; m <= lmax; ++m) {
    T dfact = 1;  // (2m-1)!!
    for (int f = 3; f <= 2 * m - 1; f += 2) {
      dfact *= static_cast<T>(f);
    }
    Q[m][m] = dfact;
    if (want_jac) {
      dQ[m][m][0] = dQ[m][m][1] = dQ[m][m][2] = 0;
    }
    if (m + 1 <= lmax) {
      Q[m + 1][m] = static_cast<T>(2 * m + 1) * Z * dfact;
      if (want_jac) {
        dQ[m + 1][m][0] = dQ[m + 1][m][1] = 0;
        dQ[m + 1][m][2] = static_cast<T>(2 * m + 1) * dfact;
      }
    }
    for (int l = m + 2; l <= lmax; ++l) {
      const T a = static_cast<T>(2 * l - 1), b = static_cast<T>(l + m - 1),
              inv = T(1) / static_cast<T>(l - m);
      Q[l][m] = (a * Z * Q[l - 1][m] - b * r2 * Q[l - 2][m]) * inv;
      if (want_jac) {
        const T q2 = 2 * Q[l - 2][m];
        dQ[l][m][0] = (a * Z * dQ[l - 1][m][0] - b * (r2 * dQ[l - 2][m][0] + q2 * X)) * inv;
        dQ[l][m][1] = (a * Z * dQ[l - 1][m][1] - b * (r2 * dQ[l - 2][m][1] + q2 * Y)) * inv;
        dQ[l][m][2] = (a * (Z * dQ[l - 1][m][2] + Q[l - 1][m]) - b * (r2 * dQ[l - 2][m][2] + q2 * Z)) * inv;
      }
    }
  }

  for (int l = 0; l <= lmax; ++l) {
    const int centre = l * l + l;
    for (int m = -l; m <= l; ++m) {
      const int a = m < 0 ? -m : m;
      const T K = static_cast<T>(kNorm.k[l * (l + 1) / 2 + a]);
      // The azimuthal factor A and its (X, Y) derivatives: d(X+iY)^a = a (X+iY)^(a-1) (dX + i dY).
      T A = 1, dAX = 0, dAY = 0;
      if (m > 0) {
        A = C[a];
        dAX = a * C[a - 1];
        dAY = -a * S[a - 1];
      } else if (m < 0) {
        A = S[a];
        dAX = a * S[a - 1];
        dAY = a * C[a - 1];
      }
      const T q = Q[l][a];
      sh[centre + m] = K * q * A;
      if (want_jac) {
        // Gradient of the polynomial in the textbook frame, then back to e3nn's (x, y, z).
        const T gX = K * (dQ[l][a][0] * A + q * dAX);
        const T gY = K * (dQ[l][a][1] * A + q * dAY);
        const T gZ = K * (dQ[l][a][2] * A);
        T gx = gY, gy = gZ, gz = gX;
        if (projected) {
          // d(v/|v|)/dv = (I - u u^T) / |v|
          const T radial = ux * gx + uy * gy + uz * gz;
          gx -= radial * ux;
          gy -= radial * uy;
          gz -= radial * uz;
        }
        T* row = jac + 3 * (centre + m);
        row[0] = gx / denom;
        row[1] = gy / denom;
        row[2] = gz / denom;
      }
    }
  }
}

}  // namespace fastmlip::detail

// SPDX-License-Identifier: MIT
#pragma once
/// \file Naive reference of radial_basis.hpp: one transcendental call per basis function,
/// std::pow for the envelope, the derivative written out term by term. Slow and obvious; the
/// fast kernels are tested against it.
#include <cmath>
#include <cstddef>

#include "kernels/radial_basis.hpp"

namespace fastmlip::kernels::reference {

/// The polynomial cutoff f_p(r / r_max) and its derivative, whether or not the basis carries it.
template <class T>
T polynomial_cutoff(const RadialBasisParams& p, T r) {
  const double u = static_cast<double>(r) / p.r_max;
  if (u >= 1.0) {
    return T(0);
  }
  const double q = p.envelope_p;
  return static_cast<T>(1.0 - (q + 1) * (q + 2) / 2 * std::pow(u, q) + q * (q + 2) * std::pow(u, q + 1) -
                        q * (q + 1) / 2 * std::pow(u, q + 2));
}

template <class T>
T polynomial_cutoff_derivative(const RadialBasisParams& p, T r) {
  const double u = static_cast<double>(r) / p.r_max;
  if (u >= 1.0) {
    return T(0);
  }
  const double q = p.envelope_p;
  return static_cast<T>((-(q + 1) * (q + 2) / 2 * q * std::pow(u, q - 1) + q * (q + 2) * (q + 1) * std::pow(u, q) -
                         q * (q + 1) / 2 * (q + 2) * std::pow(u, q + 1)) /
                        p.r_max);
}

/// The envelope the basis is multiplied by: f_p, or 1 with apply_cutoff false.
template <class T>
T envelope(const RadialBasisParams& p, T r) {
  return p.apply_cutoff ? polynomial_cutoff(p, r) : T(1);
}

template <class T>
T envelope_derivative(const RadialBasisParams& p, T r) {
  return p.apply_cutoff ? polynomial_cutoff_derivative(p, r) : T(0);
}

/// b_n(x) and db_n/dx (radial_basis.hpp), written out from each kind's closed form: Chebyshev's
/// T_k(x) = cos(k acos x) inside [-1, 1] and cosh(k acosh x) above 1 (distances are positive),
/// T_k'(x) = k sin(k t) / sin(t) or k sinh(k t) / sinh(t) with t that angle, k^2 at x = 1.
inline void basis_function(const RadialBasisParams& p, int n, double x, double& b, double& db) {
  const double w = p.frequencies[n];
  switch (p.kind) {
    case RadialBasisKind::Gaussian:
      b = std::exp(p.gaussian_coeff * (x - w) * (x - w));
      db = 2.0 * p.gaussian_coeff * (x - w) * b;
      return;
    case RadialBasisKind::Chebyshev:
      if (std::abs(x - 1.0) < 1e-12) {
        b = 1.0;
        db = w * w;
      } else if (x < 1.0) {
        const double t = std::acos(x);
        b = std::cos(w * t);
        db = w * std::sin(w * t) / std::sin(t);
      } else {
        const double t = std::acosh(x);
        b = std::cosh(w * t);
        db = w * std::sinh(w * t) / std::sinh(t);
      }
      return;
    default:
      b = p.c() * std::sin(w * x) / x;
      db = p.c() * (w * std::cos(w * x) / x - std::sin(w * x) / (x * x));
  }
}

/// grad_r[e] = sum_n grad_out[e,n] dR_n/dr; grad_w[n] = sum_e grad_out[e,n] dR_n/dw_n
/// (grad_w may be null: frequencies are fixed in MACE; a Bessel basis only).
template <class T>
void reverse_radial_basis(const RadialBasisParams& p, std::size_t num_edges, const T* r, const T* grad_out,
                          T* grad_r, T* grad_w) {
  const int N = p.num_basis();
  if (grad_w != nullptr) {
    for (int n = 0; n < N; ++n) {
      grad_w[n] = T(0);
    }
  }
  for (std::size_t e = 0; e < num_edges; ++e) {
    const double re = r[e];
    const double f = envelope(p, r[e]);
    const double df = envelope_derivative(p, r[e]);
    double g = 0.0;
    for (int n = 0; n < N; ++n) {
      double b, db;
      basis_function(p, n, re, b, db);
      g += grad_out[e * N + n] * (db * f + b * df);
      if (grad_w != nullptr) {
        grad_w[n] += static_cast<T>(grad_out[e * N + n] * p.c() * std::cos(p.frequencies[n] * re) * f);
      }
    }
    grad_r[e] = static_cast<T>(g);
  }
}

/// out[e*N + n] = b_n(x[e]) f(r[e]): the basis at a transformed distance x, the envelope at r
/// (distance_transform.hpp).
template <class T>
void compute_radial_basis_at(const RadialBasisParams& p, std::size_t num_edges, const T* x, const T* r,
                             T* out) {
  const int N = p.num_basis();
  for (std::size_t e = 0; e < num_edges; ++e) {
    const double f = envelope(p, r[e]);
    for (int n = 0; n < N; ++n) {
      double b, db;
      basis_function(p, n, x[e], b, db);
      out[e * N + n] = static_cast<T>(b * f);
    }
  }
}

/// out[e*N + n] = R_n(r[e]); r[e] > 0 (callers reject coincident atoms).
template <class T>
void compute_radial_basis(const RadialBasisParams& p, std::size_t num_edges, const T* r, T* out) {
  compute_radial_basis_at(p, num_edges, r, r, out);
}

/// grad_r[e] = sum_n grad_out[e,n] dR_n/dr for compute_radial_basis_at, x = x(r), dxdr[e] = dx/dr.
template <class T>
void reverse_radial_basis_at(const RadialBasisParams& p, std::size_t num_edges, const T* x, const T* dxdr,
                             const T* r, const T* grad_out, T* grad_r) {
  const int N = p.num_basis();
  for (std::size_t e = 0; e < num_edges; ++e) {
    const double f = envelope(p, r[e]);
    const double df = envelope_derivative(p, r[e]);
    double g = 0.0;
    for (int n = 0; n < N; ++n) {
      double b, db;
      basis_function(p, n, x[e], b, db);
      g += grad_out[e * N + n] * (db * dxdr[e] * f + b * df);
    }
    grad_r[e] = static_cast<T>(g);
  }
}

/// out[a*W + j] = A_j(theta[a]), W = 1 + 2K.
template <class T>
void compute_fourier(const FourierParams& p, std::size_t num_angles, const T* theta, T* out) {
  const int K = p.order(), W = p.width();
  const double norm = 1.0 / std::sqrt(M_PI);
  for (std::size_t a = 0; a < num_angles; ++a) {
    out[a * W] = static_cast<T>(norm / std::sqrt(2.0));
    for (int k = 0; k < K; ++k) {
      out[a * W + 1 + k] = static_cast<T>(norm * std::sin(p.frequencies[k] * theta[a]));
      out[a * W + 1 + K + k] = static_cast<T>(norm * std::cos(p.frequencies[k] * theta[a]));
    }
  }
}

/// grad_theta[a] = sum_j grad_out[a,j] dA_j/dtheta; grad_k likewise (may be null).
template <class T>
void reverse_fourier(const FourierParams& p, std::size_t num_angles, const T* theta, const T* grad_out, T* grad_theta,
                     T* grad_k) {
  const int K = p.order(), W = p.width();
  const double norm = 1.0 / std::sqrt(M_PI);
  if (grad_k != nullptr) {
    for (int k = 0; k < K; ++k) {
      grad_k[k] = T(0);
    }
  }
  for (std::size_t a = 0; a < num_angles; ++a) {
    double g = 0.0;
    for (int k = 0; k < K; ++k) {
      const double kk = p.frequencies[k], t = theta[a];
      const double gs = grad_out[a * W + 1 + k], gc = grad_out[a * W + 1 + K + k];
      g += norm * kk * (gs * std::cos(kk * t) - gc * std::sin(kk * t));
      if (grad_k != nullptr) {
        grad_k[k] += static_cast<T>(norm * t * (gs * std::cos(kk * t) - gc * std::sin(kk * t)));
      }
    }
    grad_theta[a] = static_cast<T>(g);
  }
}

}  // namespace fastmlip::kernels::reference

// SPDX-License-Identifier: MIT
#pragma once
/// \file Naive reference of radial_basis.hpp: one transcendental call per basis function,
/// std::pow for the envelope, the derivative written out term by term. Slow and obvious; the
/// fast kernels are tested against it.
#include <cmath>
#include <cstddef>

#include "kernels/radial_basis.hpp"

namespace fastmlip::kernels::reference {

template <class T>
T envelope(const RadialBesselParams& p, T r) {
  const double u = static_cast<double>(r) / p.r_max;
  if (u >= 1.0) {
    return T(0);
  }
  const double q = p.envelope_p;
  return static_cast<T>(1.0 - (q + 1) * (q + 2) / 2 * std::pow(u, q) + q * (q + 2) * std::pow(u, q + 1) -
                        q * (q + 1) / 2 * std::pow(u, q + 2));
}

template <class T>
T envelope_derivative(const RadialBesselParams& p, T r) {
  const double u = static_cast<double>(r) / p.r_max;
  if (u >= 1.0) {
    return T(0);
  }
  const double q = p.envelope_p;
  return static_cast<T>((-(q + 1) * (q + 2) / 2 * q * std::pow(u, q - 1) + q * (q + 2) * (q + 1) * std::pow(u, q) -
                         q * (q + 1) / 2 * (q + 2) * std::pow(u, q + 1)) /
                        p.r_max);
}

/// out[e*N + n] = R_n(r[e]); r[e] > 0 (callers reject coincident atoms).
template <class T>
void compute_radial_bessel(const RadialBesselParams& p, std::size_t num_edges, const T* r, T* out) {
  const int N = p.num_basis();
  for (std::size_t e = 0; e < num_edges; ++e) {
    const double re = r[e];
    const double f = envelope(p, r[e]);
    for (int n = 0; n < N; ++n) {
      out[e * N + n] = static_cast<T>(p.c() * std::sin(p.frequencies[n] * re) / re * f);
    }
  }
}

/// grad_r[e] = sum_n grad_out[e,n] dR_n/dr; grad_w[n] = sum_e grad_out[e,n] dR_n/dw_n
/// (grad_w may be null: frequencies are fixed in MACE).
template <class T>
void reverse_radial_bessel(const RadialBesselParams& p, std::size_t num_edges, const T* r, const T* grad_out, T* grad_r,
                           T* grad_w) {
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
      const double w = p.frequencies[n];
      const double s = std::sin(w * re), c = std::cos(w * re);
      const double bessel = p.c() * s / re;
      const double dbessel = p.c() * (w * c / re - s / (re * re));
      g += grad_out[e * N + n] * (dbessel * f + bessel * df);
      if (grad_w != nullptr) {
        grad_w[n] += static_cast<T>(grad_out[e * N + n] * p.c() * c * f);
      }
    }
    grad_r[e] = static_cast<T>(g);
  }
}

/// out[e*N + n] = c sin(w_n x[e]) / x[e] f(r[e]): the basis at a transformed distance x, the
/// envelope at r (distance_transform.hpp).
template <class T>
void compute_radial_bessel_at(const RadialBesselParams& p, std::size_t num_edges, const T* x, const T* r, T* out) {
  const int N = p.num_basis();
  for (std::size_t e = 0; e < num_edges; ++e) {
    const double xe = x[e];
    const double f = envelope(p, r[e]);
    for (int n = 0; n < N; ++n) {
      out[e * N + n] = static_cast<T>(p.c() * std::sin(p.frequencies[n] * xe) / xe * f);
    }
  }
}

/// grad_r[e] = sum_n grad_out[e,n] dR_n/dr for compute_radial_bessel_at, x = x(r), dxdr[e] = dx/dr.
template <class T>
void reverse_radial_bessel_at(const RadialBesselParams& p, std::size_t num_edges, const T* x, const T* dxdr,
                              const T* r, const T* grad_out, T* grad_r) {
  const int N = p.num_basis();
  for (std::size_t e = 0; e < num_edges; ++e) {
    const double xe = x[e];
    const double f = envelope(p, r[e]);
    const double df = envelope_derivative(p, r[e]);
    double g = 0.0;
    for (int n = 0; n < N; ++n) {
      const double w = p.frequencies[n];
      const double s = std::sin(w * xe), c = std::cos(w * xe);
      const double bessel = p.c() * s / xe;
      const double dbessel_dx = p.c() * (w * c / xe - s / (xe * xe));
      g += grad_out[e * N + n] * (dbessel_dx * dxdr[e] * f + bessel * df);
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

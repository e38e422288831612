// SPDX-License-Identifier: MIT
#include "kernels/radial_basis.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"

namespace fastmlip::kernels {
namespace {
bool harmonic_sequence(const std::vector<double>& w) {
  if (w.empty() || !(w[0] > 0.0)) {
    return false;
  }
  for (std::size_t n = 0; n < w.size(); ++n) {
    const double expect = static_cast<double>(n + 1) * w[0];
    if (std::abs(w[n] - expect) > 8.0 * 2.220446049250313e-16 * std::abs(expect)) {
      return false;
    }
  }
  return true;
}
}  // namespace

RadialBasisParams RadialBasisParams::mace(int num_basis, double r_max, int p) {
  RadialBasisParams out;
  out.r_max = r_max;
  out.envelope_p = p;
  for (int n = 0; n < num_basis; ++n) {
    out.frequencies.push_back((n + 1) * M_PI / r_max);
  }
  out.validate();
  return out;
}

RadialBasisParams RadialBasisParams::gaussian(int num_basis, double r_max, int p) {
  RadialBasisParams out;
  out.kind = RadialBasisKind::Gaussian;
  out.r_max = r_max;
  out.envelope_p = p;
  // torch.linspace(0, r_max, N): its values are start + i step for the first half and
  // end - (N-1-i) step for the second, which is what mace-torch's buffer holds.
  const double step = num_basis > 1 ? r_max / (num_basis - 1) : 0.0;
  for (int n = 0; n < num_basis; ++n) {
    out.frequencies.push_back(n < num_basis / 2 ? n * step : r_max - (num_basis - 1 - n) * step);
  }
  out.gaussian_coeff = num_basis > 1 ? -0.5 / (step * step) : 0.0;
  out.validate();
  return out;
}

RadialBasisParams RadialBasisParams::chebyshev(int num_basis, double r_max, int p) {
  RadialBasisParams out;
  out.kind = RadialBasisKind::Chebyshev;
  out.r_max = r_max;
  out.envelope_p = p;
  for (int n = 1; n <= num_basis; ++n) {
    out.frequencies.push_back(n);
  }
  out.validate();
  return out;
}

RadialBasisParams RadialBasisParams::chgnet(const std::vector<double>& frequencies_f, double r_cut) {
  RadialBasisParams out;
  out.r_max = r_cut;
  out.envelope_p = 8;
  for (double f : frequencies_f) {
    out.frequencies.push_back(f / r_cut);
  }
  out.validate();
  return out;
}

double RadialBasisParams::c() const noexcept { return prefactor != 0.0 ? prefactor : std::sqrt(2.0 / r_max); }

const char* RadialBasisParams::name() const noexcept {
  switch (kind) {
    case RadialBasisKind::Gaussian:
      return "gaussian";
    case RadialBasisKind::Chebyshev:
      return "chebyshev";
    default:
      return "bessel";
  }
}

RadialBasisKind radial_basis_kind(const std::string& name) {
  if (name == "bessel") {
    return RadialBasisKind::Bessel;
  }
  if (name == "gaussian") {
    return RadialBasisKind::Gaussian;
  }
  if (name == "chebyshev") {
    return RadialBasisKind::Chebyshev;
  }
  throw InputError("radial_type '" + name + "' is not known; supported: bessel, gaussian, chebyshev");
}

void RadialBasisParams::validate() const {
  if (num_basis() < 1 || num_basis() > kMaxRadialBasis) {
    throw InputError("RadialBasisParams: number of radial basis functions is " + std::to_string(num_basis()) +
                     "; supported: 1.." + std::to_string(kMaxRadialBasis));
  }
  if (!(r_max > 0.0) || !std::isfinite(r_max)) {
    throw InputError("RadialBasisParams: r_max must be a positive finite cutoff, got " +
                     std::to_string(r_max));
  }
  if (envelope_p < 1) {
    throw InputError("RadialBasisParams: envelope exponent p must be >= 1, got " +
                     std::to_string(envelope_p));
  }
  for (double w : frequencies) {
    if (!std::isfinite(w)) {
      throw InputError(std::string("RadialBasisParams: a ") + name() + " basis constant is not finite");
    }
  }
  if (kind == RadialBasisKind::Gaussian && !(gaussian_coeff < 0.0 && std::isfinite(gaussian_coeff))) {
    throw InputError("RadialBasisParams: the Gaussian basis' coefficient is " +
                     std::to_string(gaussian_coeff) +
                     "; it must be negative (mace-torch: -0.5 / (r_max / (N-1))^2, N >= 2)");
  }
  if (kind == RadialBasisKind::Chebyshev) {
    for (int n = 0; n < num_basis(); ++n) {
      if (frequencies[n] != n + 1) {
        throw InputError("RadialBasisParams: the Chebyshev basis' orders must be 1.." +
                         std::to_string(num_basis()) + " (mace-torch's ChebychevBasis); entry " +
                         std::to_string(n) + " is " + std::to_string(frequencies[n]));
      }
    }
  }
}

bool RadialBasisParams::harmonic() const noexcept {
  return kind == RadialBasisKind::Bessel && harmonic_sequence(frequencies);
}

FourierParams FourierParams::chgnet(int order) {
  FourierParams out;
  for (int k = 1; k <= order; ++k) {
    out.frequencies.push_back(k);
  }
  out.validate();
  return out;
}

void FourierParams::validate() const {
  if (order() < 1 || order() > kMaxFourierOrder) {
    throw InputError("FourierParams: order is " + std::to_string(order()) + "; supported: 1.." +
                     std::to_string(kMaxFourierOrder));
  }
  for (double k : frequencies) {
    if (!std::isfinite(k)) {
      throw InputError("FourierParams: a frequency is not finite");
    }
  }
}

bool FourierParams::harmonic() const noexcept { return harmonic_sequence(frequencies); }

}  // namespace fastmlip::kernels

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

RadialBesselParams RadialBesselParams::mace(int num_basis, double r_max, int p) {
  RadialBesselParams out;
  out.r_max = r_max;
  out.envelope_p = p;
  for (int n = 0; n < num_basis; ++n) {
    out.frequencies.push_back((n + 1) * M_PI / r_max);
  }
  out.validate();
  return out;
}

RadialBesselParams RadialBesselParams::chgnet(const std::vector<double>& frequencies_f, double r_cut) {
  RadialBesselParams out;
  out.r_max = r_cut;
  out.envelope_p = 8;
  for (double f : frequencies_f) {
    out.frequencies.push_back(f / r_cut);
  }
  out.validate();
  return out;
}

double RadialBesselParams::c() const noexcept { return prefactor != 0.0 ? prefactor : std::sqrt(2.0 / r_max); }

void RadialBesselParams::validate() const {
  if (num_basis() < 1 || num_basis() > kMaxRadialBasis) {
    throw InputError("RadialBesselParams: number of radial basis functions is " + std::to_string(num_basis()) +
                     "; supported: 1.." + std::to_string(kMaxRadialBasis));
  }
  if (!(r_max > 0.0) || !std::isfinite(r_max)) {
    throw InputError("RadialBesselParams: r_max must be a positive finite cutoff, got " + std::to_string(r_max));
  }
  if (envelope_p < 1) {
    throw InputError("RadialBesselParams: envelope exponent p must be >= 1, got " + std::to_string(envelope_p));
  }
  for (double w : frequencies) {
    if (!std::isfinite(w)) {
      throw InputError("RadialBesselParams: a frequency is not finite");
    }
  }
}

bool RadialBesselParams::harmonic() const noexcept { return harmonic_sequence(frequencies); }

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

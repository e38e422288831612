// SPDX-License-Identifier: MIT
#pragma once
/// \file The project's random stream: splitmix64 (Steele, Lea & Flood 2014).
///
/// Every rank must compute the same batch plan from (sizes, parameters, epoch, seed) alone, a
/// generated dataset must be the same file on every machine, and a failing randomised test
/// must replay, so the stream and every derived draw are written here with fixed integer
/// arithmetic. The std:: distributions are not used: their output differs between standard
/// libraries.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace fastmlip {

/// splitmix64: a 64-bit state advanced by a Weyl increment and finalised by a bijective mixer.
/// Passes BigCrush; one add and three multiply-xorshifts per draw.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept : m_state(seed) {}

  std::uint64_t next() noexcept {
    std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, n) for n >= 1, by the high half of the 128-bit product next() * n
  /// (Lemire 2019, without the rejection step: the bias is below n / 2^64, far under anything
  /// a batch plan can show, and skipping it keeps the number of draws per call fixed).
  std::uint64_t below(std::uint64_t n) noexcept { return mul_high(next(), n); }

  /// Uniform in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }

  /// Standard normal, by Box-Muller (two draws per value; 1 - u keeps log away from 0).
  double normal() noexcept {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
  }

  /// Fisher-Yates shuffle of [first, last).
  template <class It>
  void shuffle(It first, It last) noexcept {
    const auto n = static_cast<std::uint64_t>(last - first);
    for (std::uint64_t i = n; i > 1; --i) {
      using std::swap;
      swap(first[i - 1], first[below(i)]);
    }
  }

 private:
  static std::uint64_t mul_high(std::uint64_t a, std::uint64_t b) noexcept {
    // Portable 64x64 -> high 64 bits (no __int128, so MSVC builds give the same stream).
    const std::uint64_t a_lo = a & 0xFFFFFFFFull, a_hi = a >> 32;
    const std::uint64_t b_lo = b & 0xFFFFFFFFull, b_hi = b >> 32;
    const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
    const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFull) + lo_hi;
    return (hi_lo >> 32) + (cross >> 32) + hi_hi;
  }
  std::uint64_t m_state;
};

/// A seed for one independent stream, derived from the user's seed, the epoch and a stream id
/// (one per algorithm and purpose), so streams never overlap by accident of equal inputs.
inline std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t epoch, std::uint64_t stream) noexcept {
  Rng a(seed ^ 0x5DEECE66Dull);
  Rng b(a.next() ^ epoch);
  Rng c(b.next() ^ (stream * 0xD1B54A32D192ED03ull));
  return c.next();
}

}  // namespace fastmlip

// SPDX-License-Identifier: MIT
#pragma once
/// \file The largest angular momentum the host-built equivariant tables cover.
///
/// MACE models use spherical harmonics up to l = 3 and hidden features up to l = 2; l = 4
/// leaves room for l_max = 4 models at a table size that stays small (the CG table for
/// l <= 4 has 65 paths and about 2000 non-zeros). The formulas hold for any l: raising it
/// needs new e3nn fixtures, and kMaxL <= 7 keeps the factorials of Racah's formula exact.

namespace fastmlip {

/// Largest l of the spherical harmonics, Wigner 3j tables and Wigner D matrices.
inline constexpr int kMaxL = 4;

/// Number of spherical-harmonic components of all l = 0..lmax: (lmax + 1)^2.
constexpr int sh_dim(int lmax) noexcept { return (lmax + 1) * (lmax + 1); }

}  // namespace fastmlip

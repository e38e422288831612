// SPDX-License-Identifier: MIT
#pragma once
// The register width of the target a translation unit is compiled for, for the ISA units of
// math/isa/ and kernels/isa/, each compiled with its level's -m flags (the base units with the
// build's own target: wider when FASTMLIP_ENABLE_NATIVE gives the whole build AVX or AVX-512).

namespace fastmlip::math::isa {

/// Bytes in one vector register of this unit's target. A namespace-scope constexpr has internal
/// linkage, so each unit has its own, from its own flags.
#if defined(__AVX512F__)
constexpr int kUnitRegisterBytes = 64;
#elif defined(__AVX__)
constexpr int kUnitRegisterBytes = 32;
#else
constexpr int kUnitRegisterBytes = 16;
#endif

}  // namespace fastmlip::math::isa

// SPDX-License-Identifier: MIT
#pragma once
/// \file Chemical elements: symbol <-> atomic number, for species in datasets and pair_coeff.
#include <string>
#include <string_view>

namespace fastmlip {

inline constexpr int kMaxAtomicNumber = 118;

/// Atomic number of an element symbol ("Cu" -> 29); 0 when the symbol is not an element.
/// Case-sensitive, as in ASE and LAMMPS: "CU" is not copper.
int atomic_number(std::string_view symbol) noexcept;

/// Symbol of atomic number z (1..118); throws InputError otherwise.
std::string element_symbol(int z);

}  // namespace fastmlip

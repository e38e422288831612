// SPDX-License-Identifier: MIT
#include "core/elements.hpp"

#include <array>

#include "core/error.hpp"

namespace fastmlip {
namespace {
constexpr std::array<std::string_view, kMaxAtomicNumber + 1> kSymbols = {
    "",   "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si",
    "P",  "S",  "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu",
    "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru",
    "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr",
    "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",
    "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra", "Ac",
    "Th", "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Rf",
    "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og"};
}  // namespace

int atomic_number(std::string_view symbol) noexcept {
  for (int z = 1; z <= kMaxAtomicNumber; ++z) {
    if (kSymbols[z] == symbol) {
      return z;
    }
  }
  return 0;
}

std::string element_symbol(int z) {
  if (z < 1 || z > kMaxAtomicNumber) {
    throw InputError("element_symbol: atomic number " + std::to_string(z) +
                     " is not an element (expected 1..118)");
  }
  return std::string(kSymbols[z]);
}

}  // namespace fastmlip

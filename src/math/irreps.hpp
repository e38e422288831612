// SPDX-License-Identifier: MIT
#pragma once
/// \file Irreducible representations of O(3) and their direct sums, in e3nn's notation.
///
/// An irrep is (l, p): angular momentum l >= 0 and parity p = +1 ("e", even) or -1 ("o",
/// odd); it has dimension 2l + 1. A feature vector is laid out as e3nn lays out
/// `Irreps("128x0e+128x1o")`: the entries one after another, each entry `mul` copies of its
/// irrep, and each copy its 2l + 1 components (index m + l, m = -l..l) contiguous. Strings
/// are parsed and printed exactly as e3nn 0.4.4 does, so a model file's irreps strings round-
/// trip. See docs/equivariant-conventions.md.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fastmlip {

/// One irrep (l, p) of O(3).
struct Irrep {
  int l = 0;
  int p = 1;  ///< +1 even ("e"), -1 odd ("o")

  /// Parses "1o", "2e", or "3y" (e3nn's shorthand for parity (-1)^l, the parity of the
  /// spherical harmonics). Surrounding whitespace is ignored. Throws InputError naming the
  /// token otherwise.
  static Irrep parse(std::string_view token);

  constexpr int dim() const noexcept { return 2 * l + 1; }
  /// "1o", "2e": how e3nn prints it.
  std::string str() const;

  friend constexpr bool operator==(const Irrep& a, const Irrep& b) noexcept {
    return a.l == b.l && a.p == b.p;
  }
  friend constexpr bool operator!=(const Irrep& a, const Irrep& b) noexcept { return !(a == b); }
  /// e3nn's order (a tuple comparison of (l, p)): by l, odd before even. Irreps::sort uses it.
  friend constexpr bool operator<(const Irrep& a, const Irrep& b) noexcept {
    return a.l < b.l || (a.l == b.l && a.p < b.p);
  }
};

/// The irreps in the tensor product a (x) b: l = |a.l - b.l| .. a.l + b.l, parity a.p * b.p,
/// in increasing l (the order of e3nn's `Irrep.__mul__`).
std::vector<Irrep> irrep_product(const Irrep& a, const Irrep& b);

/// Whether a (x) b contains c: the triangle rule |a.l - b.l| <= c.l <= a.l + b.l and the
/// parity rule a.p * b.p == c.p. The coupling of such a path is a CG block of CGTable.
constexpr bool coupling_allowed(const Irrep& a, const Irrep& b, const Irrep& c) noexcept {
  const int lmin = a.l > b.l ? a.l - b.l : b.l - a.l;
  return lmin <= c.l && c.l <= a.l + b.l && a.p * b.p == c.p;
}

/// `mul` copies of one irrep: one entry of an Irreps.
struct MulIrrep {
  int mul = 0;
  Irrep ir;

  constexpr int dim() const noexcept { return mul * ir.dim(); }
  /// "128x1o", always with the multiplicity (as e3nn prints it).
  std::string str() const;

  friend constexpr bool operator==(const MulIrrep& a, const MulIrrep& b) noexcept {
    return a.mul == b.mul && a.ir == b.ir;
  }
  friend constexpr bool operator!=(const MulIrrep& a, const MulIrrep& b) noexcept { return !(a == b); }
};

/// A direct sum of irreps, e3nn's `o3.Irreps`: an ordered list of MulIrrep. Order matters
/// (it is the memory layout); zero multiplicities are kept until simplify() or
/// remove_zero_multiplicities(), as in e3nn.
class Irreps {
 public:
  struct Sorted;

  Irreps() = default;
  explicit Irreps(std::vector<MulIrrep> entries);

  /// Parses e3nn's notation: "128x0e+128x1o+64x2e", "0e + 1o" (multiplicity 1), "0x1o"
  /// (kept), "" (empty), whitespace around tokens allowed. Throws InputError naming the bad
  /// token and the whole string.
  static Irreps parse(std::string_view text);

  /// "1x0e+1x1o+1x2e+...": the irreps of the spherical harmonics up to lmax, with parity
  /// p^l (p = -1 for a polar vector, e3nn's default).
  static Irreps spherical_harmonics(int lmax, int p = -1);

  /// e3nn's printed form: entries joined by "+", each "MULxLP"; "" when empty.
  std::string str() const;

  std::size_t size() const noexcept { return m_entries.size(); }
  bool empty() const noexcept { return m_entries.empty(); }
  const MulIrrep& operator[](std::size_t i) const { return m_entries[i]; }
  const std::vector<MulIrrep>& entries() const noexcept { return m_entries; }
  std::vector<MulIrrep>::const_iterator begin() const noexcept { return m_entries.begin(); }
  std::vector<MulIrrep>::const_iterator end() const noexcept { return m_entries.end(); }

  /// Total dimension: sum of mul * (2l + 1).
  int dim() const noexcept;
  /// Total multiplicity: sum of mul.
  int num_irreps() const noexcept;
  /// Start of each entry in a feature vector, plus dim() at the end (size() + 1 values), so
  /// entry i occupies [offsets()[i], offsets()[i + 1]). e3nn's `slices()`.
  std::vector<int> offsets() const;
  /// Largest l; throws InputError when empty (e3nn raises too).
  int lmax() const;
  /// Total multiplicity of one irrep.
  int count(const Irrep& ir) const noexcept;
  /// The l of every copy, in layout order (e3nn's `ls`).
  std::vector<int> ls() const;

  /// Merges neighbouring entries of the same irrep and drops zero multiplicities; does not
  /// reorder (e3nn: "1e + 1e + 0e + 1e" -> "2x1e+1x0e+1x1e").
  Irreps simplify() const;
  Irreps remove_zero_multiplicities() const;
  /// Stable sort of the entries by irrep, with e3nn's permutation conventions.
  Sorted sort() const;

  friend Irreps operator+(const Irreps& a, const Irreps& b);
  friend bool operator==(const Irreps& a, const Irreps& b) noexcept { return a.m_entries == b.m_entries; }
  friend bool operator!=(const Irreps& a, const Irreps& b) noexcept { return !(a == b); }

 private:
  std::vector<MulIrrep> m_entries;
};

/// Result of Irreps::sort(), as e3nn's `sort()` named tuple: sorted entry k is original entry
/// inv[k]; original entry i goes to position p[i].
struct Irreps::Sorted {
  Irreps irreps;
  std::vector<int> p;
  std::vector<int> inv;
};

}  // namespace fastmlip

// SPDX-License-Identifier: MIT
#pragma once
/// \file Real-basis Wigner 3j (Clebsch-Gordan) coefficients, equal to e3nn's
/// `o3.wigner_3j(l1, l2, l3)`, and the sparse table of them that every tensor-product kernel
/// reads (the naive reference, Kokkos and CUDA kernels share one CGTable).
///
/// Built from the math, in four steps documented in docs/equivariant-conventions.md:
///  1. complex Clebsch-Gordan coefficients <l1 m1 l2 m2 | l3 m3> by Racah's formula;
///  2. the change to the real basis of spherical_harmonics.hpp, C = (U1 x U2 x conj U3) CG,
///     which is real up to a global power of i that is divided out;
///  3. e3nn's normalisation, sum C^2 = 1;
///  4. e3nn's sign: for l1 <= l2 <= l3 the centre C[l1][l2][l3] (m = 0, 0, 0) is positive,
///     or when it vanishes the first non-zero in row-major order; other orders are
///     permutations of that tensor times (-1)^(l1+l2+l3) for an odd permutation.
/// The result is invariant: sum C[i'j'k'] D1[i i'] D2[j j'] D3[k k'] = C[ijk] for the
/// wigner_D() of any rotation.
#include <vector>

#include "math/irreps.hpp"
#include "math/limits.hpp"

namespace fastmlip {

/// Complex-basis Clebsch-Gordan coefficient <j1 m1 j2 m2 | j3 m3> with the Condon-Shortley
/// phase (the textbook convention), by Racah's formula; 0 outside the selection rules.
/// Throws InputError for j > kMaxL or negative j.
double clebsch_gordan_complex(int j1, int m1, int j2, int m2, int j3, int m3);

/// e3nn's `o3.wigner_3j(l1, l2, l3)` as a dense row-major [2l1+1][2l2+1][2l3+1] array, index
/// m + l on each axis. Throws InputError for l outside 0..kMaxL or a triangle violation.
std::vector<double> wigner_3j(int l1, int l2, int l3);

/// One non-zero of a 3j block: C[i1][i2][i3] = value, with i = m + l on each axis.
struct CGNonZero {
  int i1 = 0;
  int i2 = 0;
  int i3 = 0;
  double value = 0;
};

/// One coupling l1 (x) l2 -> l3: its non-zeros are CGTable::entries[begin, end), in row-major
/// order of (i1, i2, i3).
struct CGPath {
  int l1 = 0;
  int l2 = 0;
  int l3 = 0;
  int begin = 0;
  int end = 0;

  int num_nonzero() const noexcept { return end - begin; }
};

/// The sparse Wigner 3j blocks of every (l1, l2, l3) with all l <= lmax that satisfies the
/// triangle rule, built once on the host. Entries are the exact non-zeros: values below
/// kCGZeroTolerance (pure rounding of cancelling terms; true non-zeros for l <= 4 exceed 0.02)
/// are dropped. The parity rule belongs to irreps, not to l: path(Irrep, Irrep, Irrep) applies
/// it.
class CGTable {
 public:
  int lmax = 0;
  std::vector<CGPath> paths;  ///< in lexicographic order of (l1, l2, l3)
  std::vector<CGNonZero> entries;

  /// Builds the table for 0 <= lmax <= kMaxL; InputError otherwise.
  static CGTable build(int lmax = kMaxL);

  /// Index of the path (l1, l2, l3) in `paths`, or -1 when it is not in the table (an l above
  /// lmax or a triangle violation). Never reads out of bounds.
  int find(int l1, int l2, int l3) const noexcept;
  /// The path (l1, l2, l3); throws InputError naming the l's and the table's lmax when absent.
  const CGPath& path(int l1, int l2, int l3) const;
  /// The path coupling irreps a (x) b -> c; throws InputError when the triangle or parity rule
  /// forbids it, or an l exceeds lmax.
  const CGPath& path(const Irrep& a, const Irrep& b, const Irrep& c) const;
  /// The block (l1, l2, l3) as a dense row-major array (for reference kernels and tests).
  std::vector<double> dense(int l1, int l2, int l3) const;

 private:
  std::vector<int> m_index;  // (l1, l2, l3) -> path index or -1, (lmax+1)^3 entries
};

/// Magnitude below which a computed 3j coefficient is the rounding of an exact zero.
inline constexpr double kCGZeroTolerance = 1e-12;

}  // namespace fastmlip

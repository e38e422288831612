// SPDX-License-Identifier: MIT
#include "math/clebsch_gordan.hpp"

#include <array>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <string>

#include "core/error.hpp"

namespace fastmlip {
namespace {

// Racah's sum runs to (j1 + j2 + j3 + 1)!, at most (3 kMaxL + 1)! = 13! for l <= 4: exact in
// long double (and in double, up to 22!).
constexpr int kMaxFactorial = 3 * kMaxL + 1;
static_assert(kMaxFactorial <= 22, "factorials must stay exact in floating point");

using Real = long double;  // 64-bit mantissa on x86: Racah's alternating sum loses no digit that
                           // survives the final rounding to double
using Complex = std::complex<Real>;

Real factorial(int n) {
  static const std::array<Real, kMaxFactorial + 1> table = [] {
    std::array<Real, kMaxFactorial + 1> t{};
    t[0] = 1;
    for (int i = 1; i <= kMaxFactorial; ++i) {
      t[i] = t[i - 1] * i;
    }
    return t;
  }();
  return table[n];
}

bool triangle(int l1, int l2, int l3) { return std::abs(l1 - l2) <= l3 && l3 <= l1 + l2; }

void check_l(const char* where, const char* name, int l) {
  if (l < 0 || l > kMaxL) {
    throw InputError(std::string(where) + ": " + name + " = " + std::to_string(l) +
                     " is outside the supported range 0 <= l <= " + std::to_string(kMaxL) +
                     " of the Wigner 3j tables");
  }
}

void check_triangle(const char* where, int l1, int l2, int l3) {
  if (!triangle(l1, l2, l3)) {
    throw InputError(std::string(where) + ": (l1, l2, l3) = (" + std::to_string(l1) + ", " +
                     std::to_string(l2) + ", " + std::to_string(l3) +
                     ") violates the triangle rule |l1 - l2| <= l3 <= l1 + l2");
  }
}

Real racah(int j1, int m1, int j2, int m2, int j3, int m3) {
  if (m1 + m2 != m3 || std::abs(m1) > j1 || std::abs(m2) > j2 || std::abs(m3) > j3 || !triangle(j1, j2, j3)) {
    return 0;
  }
  const Real pre =
      std::sqrt((2 * j3 + 1) * factorial(j3 + j1 - j2) * factorial(j3 - j1 + j2) * factorial(j1 + j2 - j3) /
                factorial(j1 + j2 + j3 + 1) * factorial(j3 + m3) * factorial(j3 - m3) * factorial(j1 - m1) *
                factorial(j1 + m1) * factorial(j2 - m2) * factorial(j2 + m2));
  Real sum = 0;
  for (int k = 0; k <= j1 + j2 - j3; ++k) {
    const int d[5] = {j1 + j2 - j3 - k, j1 - m1 - k, j2 + m2 - k, j3 - j2 + m1 + k, j3 - j1 - m2 + k};
    bool valid = true;
    Real den = factorial(k);
    for (int x : d) {
      valid = valid && x >= 0;
      den *= valid ? factorial(x) : 1;
    }
    if (valid) {
      sum += (k % 2 == 0 ? 1 : -1) / den;
    }
  }
  return pre * sum;
}

// Row i = m + l of U with Y_real = U Y_complex, for the complex harmonics with the
// Condon-Shortley phase and the real ones of spherical_harmonics.hpp (no such phase):
//   m > 0: Y_{l m}  = ((-1)^m Y_l^m + Y_l^-m) / sqrt 2
//   m < 0: Y_{l m}  = ((-1)^|m| Y_l^|m| - Y_l^-|m|) / (i sqrt 2)
//   m = 0: Y_{l 0}  = Y_l^0
// Each row has at most two non-zeros: columns col[0..1] (index m' + l) with weights w[0..1].
struct URow {
  int n = 0;
  int col[2] = {0, 0};
  Complex w[2];
};

URow u_row(int l, int m) {
  URow r;
  const Real s = 1 / std::sqrt(Real(2));
  const int a = std::abs(m);
  const Real sign = a % 2 == 0 ? 1 : -1;
  if (m == 0) {
    r.n = 1;
    r.col[0] = l;
    r.w[0] = 1;
  } else if (m > 0) {
    r.n = 2;
    r.col[0] = l + a;
    r.w[0] = sign * s;
    r.col[1] = l - a;
    r.w[1] = s;
  } else {
    r.n = 2;
    r.col[0] = l + a;
    r.w[0] = Complex(0, -sign * s);  // sign / (i sqrt 2)
    r.col[1] = l - a;
    r.w[1] = Complex(0, s);  // -1 / (i sqrt 2)
  }
  return r;
}

// Steps 1-3 for l1 <= l2 <= l3 (any order works; e3nn fixes the sign in sorted order), plus
// step 4's sign rule. Row-major [2l1+1][2l2+1][2l3+1].
std::vector<double> real_3j_sorted(int l1, int l2, int l3) {
  const int d1 = 2 * l1 + 1, d2 = 2 * l2 + 1, d3 = 2 * l3 + 1;
  std::vector<Complex> c(static_cast<std::size_t>(d1 * d2 * d3));
  std::size_t argmax = 0;
  for (int i = 0; i < d1; ++i) {
    const URow r1 = u_row(l1, i - l1);
    for (int j = 0; j < d2; ++j) {
      const URow r2 = u_row(l2, j - l2);
      for (int k = 0; k < d3; ++k) {
        const URow r3 = u_row(l3, k - l3);
        Complex acc = 0;
        for (int a = 0; a < r1.n; ++a) {
          for (int b = 0; b < r2.n; ++b) {
            for (int g = 0; g < r3.n; ++g) {
              const Real cg = racah(l1, r1.col[a] - l1, l2, r2.col[b] - l2, l3, r3.col[g] - l3);
              if (cg != 0) {
                acc += r1.w[a] * r2.w[b] * std::conj(r3.w[g]) * cg;
              }
            }
          }
        }
        const std::size_t idx = static_cast<std::size_t>((i * d2 + j) * d3 + k);
        c[idx] = acc;
        if (std::abs(acc) > std::abs(c[argmax])) {
          argmax = idx;
        }
      }
    }
  }
  // The invariant tensor is unique up to a factor, and a real one exists; with U's entries in
  // {1, +-1/sqrt2, +-i/sqrt2} that factor is a power of i. Keep the part along it and check
  // that the other part is rounding only.
  const bool imaginary = std::abs(c[argmax].imag()) > std::abs(c[argmax].real());
  std::vector<Real> re(c.size());
  Real norm2 = 0;
  for (std::size_t n = 0; n < c.size(); ++n) {
    re[n] = imaginary ? c[n].imag() : c[n].real();
    const Real other = imaginary ? c[n].real() : c[n].imag();
    if (std::abs(other) > 1e-14L) {
      throw Error("wigner_3j: internal error: the real-basis 3j symbol (" + std::to_string(l1) + ", " +
                  std::to_string(l2) + ", " + std::to_string(l3) + ") is not real up to a power of i");
    }
    norm2 += re[n] * re[n];
  }
  const Real inv_norm = 1 / std::sqrt(norm2);
  std::vector<double> out(c.size());
  for (std::size_t n = 0; n < c.size(); ++n) {
    const Real v = re[n] * inv_norm;
    out[n] = std::abs(v) < kCGZeroTolerance ? 0.0 : static_cast<double>(v);
  }
  // e3nn's sign: the centre element positive, else the first non-zero in row-major order.
  double pivot = out[static_cast<std::size_t>((l1 * d2 + l2) * d3 + l3)];
  for (std::size_t n = 0; pivot == 0 && n < out.size(); ++n) {
    pivot = out[n];
  }
  if (pivot < 0) {
    for (double& v : out) {
      v = -v;
    }
  }
  return out;
}

}  // namespace

double clebsch_gordan_complex(int j1, int m1, int j2, int m2, int j3, int m3) {
  check_l("clebsch_gordan_complex", "j1", j1);
  check_l("clebsch_gordan_complex", "j2", j2);
  check_l("clebsch_gordan_complex", "j3", j3);
  return static_cast<double>(racah(j1, m1, j2, m2, j3, m3));
}

std::vector<double> wigner_3j(int l1, int l2, int l3) {
  check_l("wigner_3j", "l1", l1);
  check_l("wigner_3j", "l2", l2);
  check_l("wigner_3j", "l3", l3);
  check_triangle("wigner_3j", l1, l2, l3);
  // Sort the axes by l (stable), compute in sorted order, permute back. Swapping two axes of
  // the invariant tensor multiplies it by (-1)^(l1+l2+l3), as e3nn's own permutations do.
  const std::array<int, 3> ls = {l1, l2, l3};
  std::array<int, 3> order = {0, 1, 2};  // order[s]: the requested axis at sorted position s
  int swaps = 0;
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b + 1 < 3 - a; ++b) {
      if (ls[order[b]] > ls[order[b + 1]]) {
        std::swap(order[b], order[b + 1]);
        ++swaps;
      }
    }
  }
  const std::vector<double> sorted = real_3j_sorted(ls[order[0]], ls[order[1]], ls[order[2]]);
  const double sign = (swaps % 2 == 1 && (l1 + l2 + l3) % 2 == 1) ? -1.0 : 1.0;
  const std::array<int, 3> dims = {2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1};
  const int sd1 = dims[order[1]], sd2 = dims[order[2]];
  std::vector<double> out(static_cast<std::size_t>(dims[0] * dims[1] * dims[2]));
  std::array<int, 3> idx{};
  for (idx[0] = 0; idx[0] < dims[0]; ++idx[0]) {
    for (idx[1] = 0; idx[1] < dims[1]; ++idx[1]) {
      for (idx[2] = 0; idx[2] < dims[2]; ++idx[2]) {
        const int s = (idx[order[0]] * sd1 + idx[order[1]]) * sd2 + idx[order[2]];
        out[static_cast<std::size_t>((idx[0] * dims[1] + idx[1]) * dims[2] + idx[2])] = sign * sorted[s];
      }
    }
  }
  return out;
}

CGTable CGTable::build(int lmax) {
  if (lmax < 0 || lmax > kMaxL) {
    throw InputError("CGTable::build: lmax " + std::to_string(lmax) +
                     " is outside the supported range 0 <= l <= " + std::to_string(kMaxL));
  }
  CGTable t;
  t.lmax = lmax;
  const int n = lmax + 1;
  t.m_index.assign(static_cast<std::size_t>(n * n * n), -1);
  for (int l1 = 0; l1 <= lmax; ++l1) {
    for (int l2 = 0; l2 <= lmax; ++l2) {
      for (int l3 = 0; l3 <= lmax; ++l3) {
        if (!triangle(l1, l2, l3)) {
          continue;
        }
        const std::vector<double> c = wigner_3j(l1, l2, l3);
        CGPath p{l1, l2, l3, static_cast<int>(t.entries.size()), 0};
        const int d2 = 2 * l2 + 1, d3 = 2 * l3 + 1;
        for (std::size_t idx = 0; idx < c.size(); ++idx) {
          if (c[idx] != 0) {
            const int flat = static_cast<int>(idx);
            t.entries.push_back(CGNonZero{flat / (d2 * d3), (flat / d3) % d2, flat % d3, c[idx]});
          }
        }
        p.end = static_cast<int>(t.entries.size());
        t.m_index[static_cast<std::size_t>((l1 * n + l2) * n + l3)] = static_cast<int>(t.paths.size());
        t.paths.push_back(p);
      }
    }
  }
  return t;
}

int CGTable::find(int l1, int l2, int l3) const noexcept {
  if (l1 < 0 || l2 < 0 || l3 < 0 || l1 > lmax || l2 > lmax || l3 > lmax || m_index.empty()) {
    return -1;
  }
  const int n = lmax + 1;
  return m_index[static_cast<std::size_t>((l1 * n + l2) * n + l3)];
}

const CGPath& CGTable::path(int l1, int l2, int l3) const {
  const int i = find(l1, l2, l3);
  if (i < 0) {
    const std::string ls =
        "(" + std::to_string(l1) + ", " + std::to_string(l2) + ", " + std::to_string(l3) + ")";
    if (l1 < 0 || l2 < 0 || l3 < 0 || l1 > lmax || l2 > lmax || l3 > lmax) {
      throw InputError("CGTable::path: (l1, l2, l3) = " + ls + " exceeds the table's lmax " +
                       std::to_string(lmax) + "; build the table with a larger lmax (at most " +
                       std::to_string(kMaxL) + ")");
    }
    throw InputError("CGTable::path: (l1, l2, l3) = " + ls +
                     " violates the triangle rule |l1 - l2| <= l3 <= l1 + l2; no such coupling exists");
  }
  return paths[static_cast<std::size_t>(i)];
}

const CGPath& CGTable::path(const Irrep& a, const Irrep& b, const Irrep& c) const {
  if (a.p * b.p != c.p) {
    throw InputError("CGTable::path: " + a.str() + " x " + b.str() + " -> " + c.str() +
                     " violates the parity rule p1 * p2 = p3; no such coupling exists");
  }
  return path(a.l, b.l, c.l);
}

std::vector<double> CGTable::dense(int l1, int l2, int l3) const {
  const CGPath& p = path(l1, l2, l3);
  const int d2 = 2 * l2 + 1, d3 = 2 * l3 + 1;
  std::vector<double> out(static_cast<std::size_t>((2 * l1 + 1) * d2 * d3), 0.0);
  for (int e = p.begin; e < p.end; ++e) {
    const CGNonZero& z = entries[static_cast<std::size_t>(e)];
    out[static_cast<std::size_t>((z.i1 * d2 + z.i2) * d3 + z.i3)] = z.value;
  }
  return out;
}

}  // namespace fastmlip

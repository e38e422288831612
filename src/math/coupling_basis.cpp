// SPDX-License-Identifier: MIT
#include "math/coupling_basis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/error.hpp"
#include "math/clebsch_gordan.hpp"
#include "math/limits.hpp"

namespace fastmlip {
namespace {

// One copy of an irrep of the coupling irreps: l, parity, and its first component in the
// flat layout ("ell" index).
struct Block {
  int l = 0;
  int p = 1;
  int offset = 0;
};

// The dense U is at most this many values (2 GiB): beyond that, a coupling this large is a
// configuration mistake, not a model anyone trains.
constexpr long long kMaxDenseValues = 1LL << 28;

// A candidate is independent of the accepted ones when its symmetrised residual keeps more
// than this fraction of its norm before symmetrisation. Over every kind of sector with l <= 4
// and nu <= 4, to every L <= 4 (4249 non-empty pairs), dependent candidates keep at most 2.3e-15
// (rounding) and accepted ones at least 1.2e-2, so the threshold sits in a gap of 13 orders of
// magnitude and no rounding can change which candidates are taken.
constexpr double kIndependenceTolerance = 1e-8;

constexpr double kPi = 3.141592653589793238462643383279502884;

std::vector<Block> blocks_of(const Irreps& irreps) {
  std::vector<Block> out;
  int offset = 0;
  for (const MulIrrep& e : irreps) {
    for (int u = 0; u < e.mul; ++u) {
      out.push_back({e.ir.l, e.ir.p, offset});
      offset += e.ir.dim();
    }
  }
  return out;
}

void check_args(const char* where, const Irreps& coupling_irreps, const Irrep& out, int nu) {
  const std::string w(where);
  if (nu < 1 || nu > kMaxCouplingOrder) {
    throw InputError(w + ": correlation order nu = " + std::to_string(nu) +
                     " is outside the supported range 1.." + std::to_string(kMaxCouplingOrder));
  }
  if (coupling_irreps.dim() == 0) {
    throw InputError(w + ": the coupling irreps '" + coupling_irreps.str() +
                     "' are empty; pass at least one irrep");
  }
  for (const MulIrrep& e : coupling_irreps) {
    if (e.mul < 0 || e.ir.l < 0 || e.ir.l > kMaxL) {
      throw InputError(w + ": coupling irrep " + e.str() + " of '" + coupling_irreps.str() +
                       "' is outside the supported range 0 <= l <= " + std::to_string(kMaxL) +
                       " of the Clebsch-Gordan tables");
    }
  }
  if (out.l < 0 || out.l > kMaxL || (out.p != 1 && out.p != -1)) {
    throw InputError(w + ": output irrep (l = " + std::to_string(out.l) + ", p = " + std::to_string(out.p) +
                     ") is outside the supported range 0 <= l <= " + std::to_string(kMaxL) + ", p = +-1");
  }
}

// ---------------------------------------------------------------------------------------------
// Dimensions by characters. An element of O(3) is eps R with R a rotation by angle theta and
// eps = +-1; irrep (l, p) has character chi_l(theta) = 1 + 2 sum_{m=1..l} cos(m theta), times p
// when eps = -1. The character of Sym^n W follows from the power sums p_k(g) = chi_W(g^k)
// (g^k = eps^k R^k, a rotation by k theta) by Newton's identity h_n = (1/n) sum_k p_k h_{n-k}.
// The Haar average of a class function over SO(3) is (1/pi) int_0^pi f(theta) (1 - cos theta);
// the integrand is a cosine polynomial of degree <= kMaxCouplingOrder kMaxL + kMaxL + 1 = 21,
// which the midpoint rule with N points integrates exactly for degrees below 2N.

constexpr int kCharacterPoints = 64;
static_assert(2 * kCharacterPoints > kMaxCouplingOrder * kMaxL + kMaxL + 1, "midpoint rule must be exact");

double chi_l(int l, double theta) {
  double s = 1;
  for (int m = 1; m <= l; ++m) {
    s += 2 * std::cos(m * theta);
  }
  return s;
}

// chi of Sym^n of the sum of `blocks` at eps R_theta.
double chi_sym(const std::vector<Block>& blocks, int n, double theta, int eps) {
  std::vector<double> pk(n + 1, 0.0), h(n + 1, 0.0);
  for (int k = 1; k <= n; ++k) {
    const bool improper = eps < 0 && k % 2 == 1;
    for (const Block& b : blocks) {
      pk[k] += (improper ? b.p : 1) * chi_l(b.l, k * theta);
    }
  }
  h[0] = 1;
  for (int m = 1; m <= n; ++m) {
    for (int k = 1; k <= m; ++k) {
      h[m] += pk[k] * h[m - k];
    }
    h[m] /= m;
  }
  return h[n];
}

// dim Hom_O(3)(prod_j Sym^{n_j} W_j, out) for the parts (W_j, n_j); rounded, checked integral.
int hom_dimension(const std::vector<std::pair<std::vector<Block>, int>>& parts, const Irrep& out) {
  double sum = 0, scale = 0;
  for (int eps : {1, -1}) {
    for (int j = 0; j < kCharacterPoints; ++j) {
      const double theta = (j + 0.5) * kPi / kCharacterPoints;
      double chi = (eps < 0 ? out.p : 1) * chi_l(out.l, theta);
      for (const auto& [w, n] : parts) {
        chi *= chi_sym(w, n, theta, eps);
      }
      sum += chi * (1 - std::cos(theta));
      scale += std::abs(chi);
    }
  }
  const double dim = sum / (2.0 * kCharacterPoints);
  const double rounded = std::round(dim);
  // Rounding grows with the size of the characters (num_ell^nu / nu! at theta = 0), which the
  // dense-size limit keeps below 2^28; 1e-10 of it still leaves the integer unambiguous.
  if (std::abs(dim - rounded) > 1e-10 * std::max(1.0, scale / (2.0 * kCharacterPoints)) || rounded < 0) {
    throw Error("symmetric_coupling_dimension: internal error: the character integral " +
                std::to_string(dim) + " is not a non-negative integer");
  }
  return static_cast<int>(rounded);
}

// ---------------------------------------------------------------------------------------------
// The construction, one sector at a time. A sector is a sorted multiset of nu blocks; symmetric
// tensors supported on different sectors are orthogonal, so each sector gets its own basis.
// Within a sector a symmetric tensor is stored by its values on the sorted index tuples t
// (i_1 <= .. <= i_nu, i_j in block b_j), scaled by sqrt(mult(t)) where mult(t) is the number of
// distinct orderings of t: then the Euclidean inner product of two such vectors is the
// Frobenius inner product of the dense tensors.

struct Sector {
  std::vector<int> blocks;                      // sorted block indices b_1 <= .. <= b_nu
  std::vector<std::vector<int>> tuples;         // sorted global index tuples
  std::vector<double> mult;                     // distinct orderings of each tuple
  std::unordered_map<std::int64_t, int> index;  // encoded sorted tuple -> position in `tuples`
  std::vector<std::vector<double>> basis;       // orthonormal vectors [m * T + t]
};

std::int64_t encode(const std::vector<int>& t, int num_ell) {
  std::int64_t key = 0;
  for (int i : t) {
    key = key * num_ell + i;
  }
  return key;
}

double distinct_orderings(const std::vector<int>& t) {
  double f = 1;
  for (std::size_t i = 1; i <= t.size(); ++i) {
    f *= static_cast<double>(i);
  }
  for (std::size_t i = 0; i < t.size();) {
    std::size_t j = i;
    while (j < t.size() && t[j] == t[i]) {
      ++j;
    }
    for (std::size_t r = 2; r <= j - i; ++r) {
      f /= static_cast<double>(r);
    }
    i = j;
  }
  return f;
}

// Every sorted global tuple of the sector: position j ranges over block b_j's components,
// non-decreasing where consecutive positions share a block (blocks are sorted and their
// offsets increase, so this is exactly the set of sorted tuples).
void enumerate_tuples(Sector& s, const std::vector<Block>& blocks, int num_ell) {
  const int nu = static_cast<int>(s.blocks.size());
  std::vector<int> t(nu);
  auto rec = [&](auto&& self, int j) -> void {
    if (j == nu) {
      s.index.emplace(encode(t, num_ell), static_cast<int>(s.tuples.size()));
      s.tuples.push_back(t);
      s.mult.push_back(distinct_orderings(t));
      return;
    }
    const Block& b = blocks[static_cast<std::size_t>(s.blocks[j])];
    const int lo = (j > 0 && s.blocks[j - 1] == s.blocks[j]) ? t[j - 1] : b.offset;
    for (int i = lo; i < b.offset + 2 * b.l + 1; ++i) {
      t[j] = i;
      self(self, j + 1);
    }
  };
  rec(rec, 0);
}

// Calls emit(tensor) for every left-comb coupling path of the legs `order` (block indices in
// leg order): ((l_1 (x) l_2 -> mu_2) (x) l_3 -> mu_3) .. -> L through the sparse 3j blocks of
// `cg`. tensor is dense [2L+1][prod_j (2 l_j + 1)], legs row-major in leg order.
// Intermediates stop at the table's lmax (kMaxL = 4), although a complete set of paths in one
// leg order needs up to 2 kMaxL (3 x 3 -> 6 in 3 x 3 x 3 -> 3). What is cut is recovered from the
// other leg orders: over all of them the symmetrised paths span every sector with l <= 4 and
// nu <= 4 (checked exhaustively; some sectors need it, e.g. 3o x 3o x 3o' -> 3o, and
// 1o x 4e x 1e -> 4o where 1 x 4 -> 5 is cut). build_sector checks each sector's count against
// the character formula anyway, so a shortfall is an error, never a silently smaller basis.
template <class Emit>
void coupling_paths(const std::vector<Block>& blocks, const std::vector<int>& order, int L, const CGTable& cg,
                    Emit&& emit) {
  const int nu = static_cast<int>(order.size());
  std::vector<int> ls(nu), rest(nu + 1, 0);
  for (int j = 0; j < nu; ++j) {
    ls[j] = blocks[static_cast<std::size_t>(order[j])].l;
  }
  for (int j = nu - 1; j >= 0; --j) {
    rest[j] = rest[j + 1] + ls[j];
  }
  // cur: [2 mu + 1][legs so far], legs row-major.
  auto rec = [&](auto&& self, const std::vector<double>& cur, int mu, int legs_dim, int j) -> void {
    if (j == nu) {
      if (mu == L) {
        emit(cur);
      }
      return;
    }
    const int lj = ls[j], dj = 2 * lj + 1;
    const int hi = std::min(mu + lj, j + 1 == nu ? L : cg.lmax);
    for (int mu2 = std::abs(mu - lj); mu2 <= hi; ++mu2) {
      if (std::abs(mu2 - L) > rest[j + 1] || (j + 1 == nu && mu2 != L)) {
        continue;  // L is out of reach from mu2 with the legs that remain
      }
      const CGPath& path = cg.path(mu, lj, mu2);
      const int next_dim = legs_dim * dj;
      std::vector<double> next(static_cast<std::size_t>((2 * mu2 + 1) * next_dim), 0.0);
      for (int e = path.begin; e < path.end; ++e) {
        const CGNonZero& z = cg.entries[static_cast<std::size_t>(e)];
        const double* src = cur.data() + static_cast<std::size_t>(z.i1) * legs_dim;
        double* dst = next.data() + static_cast<std::size_t>(z.i3) * next_dim + z.i2;
        for (int a = 0; a < legs_dim; ++a) {
          dst[static_cast<std::size_t>(a) * dj] += z.value * src[a];
        }
      }
      self(self, next, mu2, next_dim, j + 1);
    }
  };
  const int d0 = 2 * ls[0] + 1;
  std::vector<double> identity(static_cast<std::size_t>(d0 * d0), 0.0);
  for (int a = 0; a < d0; ++a) {
    identity[static_cast<std::size_t>(a * d0 + a)] = 1.0;
  }
  rec(rec, identity, ls[0], d0, 1);
}

// Fills s.basis with `expected` orthonormal vectors spanning the sector's symmetric
// equivariant tensors: symmetrised coupling paths, leg orders in lexicographic order of
// distinct permutations (the sorted order first), paths in increasing intermediates, each
// Gram-Schmidt orthogonalised (twice, for orthogonality to rounding) against those accepted.
void build_sector(Sector& s, const std::vector<Block>& blocks, int num_ell, const Irrep& out, int expected,
                  const CGTable& cg) {
  const int nu = static_cast<int>(s.blocks.size());
  const int M = out.dim();
  const std::size_t T = s.tuples.size();
  std::vector<int> order = s.blocks;
  std::vector<int> dims(nu), global(nu);
  do {
    for (int j = 0; j < nu; ++j) {
      dims[j] = 2 * blocks[static_cast<std::size_t>(order[j])].l + 1;
    }
    coupling_paths(blocks, order, out.l, cg, [&](const std::vector<double>& tensor) {
      if (static_cast<int>(s.basis.size()) == expected) {
        return;
      }
      // Sum over the orderings of each index tuple: w[m, t] = sum_{sort(s) = t} T[m, s] /
      // sqrt(mult(t)), the stored form of the symmetrised tensor (1/nu!) sum_sigma T o sigma.
      std::vector<double> w(static_cast<std::size_t>(M) * T, 0.0);
      const std::size_t legs = tensor.size() / static_cast<std::size_t>(M);
      double norm2 = 0;
      for (std::size_t a = 0; a < legs; ++a) {
        std::size_t rest = a;
        for (int j = nu - 1; j >= 0; --j) {
          global[j] = blocks[static_cast<std::size_t>(order[j])].offset + static_cast<int>(rest % dims[j]);
          rest /= dims[j];
        }
        std::vector<int> sorted = global;
        std::sort(sorted.begin(), sorted.end());
        const int t = s.index.at(encode(sorted, num_ell));
        for (int m = 0; m < M; ++m) {
          const double v = tensor[static_cast<std::size_t>(m) * legs + a];
          w[static_cast<std::size_t>(m) * T + t] += v;
          norm2 += v * v;
        }
      }
      for (int m = 0; m < M; ++m) {
        for (std::size_t t = 0; t < T; ++t) {
          w[m * T + t] /= std::sqrt(s.mult[t]);
        }
      }
      for (int pass = 0; pass < 2; ++pass) {
        for (const auto& q : s.basis) {
          double dot = 0;
          for (std::size_t i = 0; i < w.size(); ++i) {
            dot += q[i] * w[i];
          }
          for (std::size_t i = 0; i < w.size(); ++i) {
            w[i] -= dot * q[i];
          }
        }
      }
      double r2 = 0;
      for (double v : w) {
        r2 += v * v;
      }
      if (r2 > kIndependenceTolerance * kIndependenceTolerance * norm2) {
        const double inv = 1 / std::sqrt(r2);
        for (double& v : w) {
          v *= inv;
        }
        s.basis.push_back(std::move(w));
      }
    });
  } while (static_cast<int>(s.basis.size()) < expected && std::next_permutation(order.begin(), order.end()));
  if (static_cast<int>(s.basis.size()) != expected) {
    std::string which;  // e.g. "3o#0 x 3o#0 x 3o#1": irrep and block (copy) index
    for (int b : s.blocks) {
      const Block& bl = blocks[static_cast<std::size_t>(b)];
      which += (which.empty() ? "" : " x ") + Irrep{bl.l, bl.p}.str() + "#" + std::to_string(b);
    }
    throw Error("symmetric_coupling_basis: internal error: the sector " + which + " -> " + out.str() +
                " gave " + std::to_string(s.basis.size()) + " independent tensors, the character formula " +
                std::to_string(expected) + "; please report this with the irreps");
  }
}

}  // namespace

int symmetric_coupling_dimension(const Irreps& coupling_irreps, const Irrep& out, int nu) {
  check_args("symmetric_coupling_dimension", coupling_irreps, out, nu);
  return hom_dimension({{blocks_of(coupling_irreps), nu}}, out);
}

CouplingBasis symmetric_coupling_basis(const Irreps& coupling_irreps, const Irrep& out, int nu) {
  check_args("symmetric_coupling_basis", coupling_irreps, out, nu);
  static const CGTable cg = CGTable::build(kMaxL);
  const std::vector<Block> blocks = blocks_of(coupling_irreps);
  const int num_ell = coupling_irreps.dim();
  const int M = out.dim();
  // Values per basis tensor; refused early, before the character sums grow with it.
  long long per_k = M;
  for (int j = 0; j < nu; ++j) {
    per_k *= num_ell;
    if (per_k > kMaxDenseValues) {
      break;  // and no overflow
    }
  }
  const auto too_large = [&](const std::string& size) {
    return InputError("symmetric_coupling_basis: the dense U of '" + coupling_irreps.str() + "' -> " +
                      out.str() + " at nu = " + std::to_string(nu) + " would hold " + size +
                      ", above the limit of " + std::to_string(kMaxDenseValues) +
                      " values; use fewer coupling irreps or a lower correlation order");
  };
  if (per_k > kMaxDenseValues) {
    throw too_large("more than " + std::to_string(per_k) + " values per basis tensor");
  }
  const int K = hom_dimension({{blocks, nu}}, out);
  if (per_k * K > kMaxDenseValues) {
    throw too_large(std::to_string(per_k * K) + " values");
  }
  CouplingBasis result;
  if (M > 1) {
    result.shape.push_back(M);
  }
  for (int j = 0; j < nu; ++j) {
    result.shape.push_back(num_ell);
  }
  result.shape.push_back(K);
  if (K == 0) {
    return result;
  }

  // Sectors in lexicographic order of their sorted block multisets.
  std::vector<Sector> sectors;
  const int B = static_cast<int>(blocks.size());
  std::vector<int> pick(nu, 0);
  int found = 0;
  while (true) {
    int parity = 1;
    for (int b : pick) {
      parity *= blocks[static_cast<std::size_t>(b)].p;
    }
    if (parity == out.p) {
      // The sector is prod_j Sym^{n_j} (block j) over its distinct blocks.
      std::vector<std::pair<std::vector<Block>, int>> parts;
      for (int j = 0; j < nu;) {
        int k = j;
        while (k < nu && pick[k] == pick[j]) {
          ++k;
        }
        parts.push_back({{blocks[static_cast<std::size_t>(pick[j])]}, k - j});
        j = k;
      }
      const int expected = hom_dimension(parts, out);
      if (expected > 0) {
        Sector s;
        s.blocks = pick;
        enumerate_tuples(s, blocks, num_ell);
        build_sector(s, blocks, num_ell, out, expected, cg);
        found += expected;
        sectors.push_back(std::move(s));
      }
    }
    // Next non-decreasing tuple of block indices.
    int j = nu - 1;
    while (j >= 0 && pick[j] == B - 1) {
      --j;
    }
    if (j < 0) {
      break;
    }
    ++pick[j];
    for (int r = j + 1; r < nu; ++r) {
      pick[r] = pick[j];
    }
  }
  if (found != K) {
    throw Error("symmetric_coupling_basis: internal error: the sectors of '" + coupling_irreps.str() +
                "' -> " + out.str() + " at nu = " + std::to_string(nu) + " hold " + std::to_string(found) +
                " tensors, the character formula of the whole space " + std::to_string(K));
  }

  // Dense expansion. Stored value w[m, t] = sqrt(mult(t)) U[m, t] / sqrt(2L+1) for a unit w:
  // the factor sqrt(2L+1) makes sum_i U[m, i, k] U[m', i, k'] = delta_mm' delta_kk'.
  result.U.assign(static_cast<std::size_t>(per_k) * K, 0.0);
  const double scale = std::sqrt(static_cast<double>(M));
  int k = 0;
  for (const Sector& s : sectors) {
    const std::size_t T = s.tuples.size();
    for (const auto& w : s.basis) {
      for (std::size_t t = 0; t < T; ++t) {
        const double f = scale / std::sqrt(s.mult[t]);
        std::vector<int> perm = s.tuples[t];
        do {
          std::int64_t flat = 0;
          for (int i : perm) {
            flat = flat * num_ell + i;
          }
          for (int m = 0; m < M; ++m) {
            const double v = w[m * T + t];
            if (v != 0.0) {
              result.U[static_cast<std::size_t>((m * (per_k / M) + flat) * K + k)] = v * f;
            }
          }
        } while (std::next_permutation(perm.begin(), perm.end()));
      }
      ++k;
    }
  }
  return result;
}

SymmetricContractionBasis symmetric_contraction_basis(const Irreps& irreps_in, const Irreps& irreps_out,
                                                      int correlation) {
  if (correlation < 1 || correlation > kMaxCouplingOrder) {
    throw InputError("symmetric_contraction_basis: correlation " + std::to_string(correlation) +
                     " is outside the supported range 1.." + std::to_string(kMaxCouplingOrder));
  }
  if (irreps_in.empty() || irreps_out.empty()) {
    throw InputError("symmetric_contraction_basis: empty irreps ('" + irreps_in.str() + "' -> '" +
                     irreps_out.str() + "')");
  }
  // mace-torch couples one copy of each entry of the node features.
  std::vector<MulIrrep> ones;
  for (const MulIrrep& e : irreps_in) {
    ones.push_back({1, e.ir});
  }
  const Irreps coupling(ones);
  SymmetricContractionBasis out;
  for (const MulIrrep& e : irreps_out) {
    out.U.emplace_back();
    out.shapes.emplace_back();
    for (int nu = 1; nu <= correlation; ++nu) {
      CouplingBasis b = symmetric_coupling_basis(coupling, e.ir, nu);
      if (b.num_params() == 0) {
        throw InputError("symmetric_contraction_basis: no symmetric tensor of order " + std::to_string(nu) +
                         " couples '" + coupling.str() + "' to " + e.ir.str() + " (output entry " + e.str() +
                         " of '" + irreps_out.str() +
                         "'); the contraction needs at least one per order: drop " + e.ir.str() +
                         " from the output irreps");
      }
      out.U.back().push_back(std::move(b.U));
      out.shapes.back().push_back(std::move(b.shape));
    }
  }
  return out;
}

}  // namespace fastmlip

// SPDX-License-Identifier: MIT
#include "graph/neighbor_list.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

#include "core/error.hpp"

namespace fastmlip::graph {
namespace {

using Mat3 = std::array<double, 9>;  // row-major

double det3(const Mat3& m) {
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
         m[2] * (m[3] * m[7] - m[4] * m[6]);
}

Mat3 inverse3(const Mat3& m, double det) {
  const double s = 1.0 / det;
  return {(m[4] * m[8] - m[5] * m[7]) * s, (m[2] * m[7] - m[1] * m[8]) * s, (m[1] * m[5] - m[2] * m[4]) * s,
          (m[5] * m[6] - m[3] * m[8]) * s, (m[0] * m[8] - m[2] * m[6]) * s, (m[2] * m[3] - m[0] * m[5]) * s,
          (m[3] * m[7] - m[4] * m[6]) * s, (m[1] * m[6] - m[0] * m[7]) * s, (m[0] * m[4] - m[1] * m[3]) * s};
}

std::array<double, 3> row(const Mat3& m, int r) { return {m[3 * r], m[3 * r + 1], m[3 * r + 2]}; }

std::array<double, 3> cross(const std::array<double, 3>& u, const std::array<double, 3>& v) {
  return {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
}

double norm(const std::array<double, 3>& u) { return std::sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]); }

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// A cell is singular when its volume is tiny next to the product of its edge lengths (the
// volume of the box with the same edges): scale-free, so 1e-3 A cells and 1e3 A cells are judged
// alike.
bool singular(const Mat3& h) {
  const double scale = norm(row(h, 0)) * norm(row(h, 1)) * norm(row(h, 2));
  return !(std::fabs(det3(h)) > 1e-10 * scale);
}

// The coordinate frame of the search. Periodic directions use the cell vectors. Open
// directions only need *some* basis completing the periodic ones: the cell's own rows when
// the cell is regular, otherwise (ASE writes a zero row for a vacuum direction) unit vectors
// orthogonal to the periodic rows. Without a cell the frame is Cartesian.
struct Space {
  Mat3 h{};
  Mat3 hinv{};
  std::array<bool, 3> periodic{};
  std::array<double, 3> spacing{};  // distance between lattice planes along each direction
  const double* cell = nullptr;     // the caller's cell, for edge vectors
};

Space make_space(const double* cell, const std::array<bool, 3>& pbc, const char* fn) {
  Space sp;
  sp.periodic = pbc;
  const int nper = int(pbc[0]) + int(pbc[1]) + int(pbc[2]);
  if (cell == nullptr) {
    if (nper > 0) {
      throw InputError(std::string(fn) +
                       ": a periodic direction needs a cell; pass the lattice vectors or set pbc to false");
    }
    sp.h = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  } else {
    for (int k = 0; k < 9; ++k) {
      if (!std::isfinite(cell[k])) {
        throw InputError(std::string(fn) + ": the cell has a non-finite entry (row " +
                         std::to_string(k / 3 + 1) + ", column " + std::to_string(k % 3 + 1) +
                         "); check the Lattice of the input");
      }
    }
    std::copy(cell, cell + 9, sp.h.begin());
    sp.cell = cell;
    if (nper == 0) {
      // Nothing is periodic: the cell plays no role in the search (only shifts of 0 exist).
      sp.h = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    } else if (singular(sp.h)) {
      if (nper == 3) {
        throw InputError(std::string(fn) +
                         ": the cell is singular (its lattice vectors are linearly dependent); "
                         "check the Lattice of the input");
      }
      std::array<int, 3> open{};
      std::array<int, 3> per{};
      int no = 0, np = 0;
      for (int k = 0; k < 3; ++k) {
        (pbc[k] ? per[np++] : open[no++]) = k;
      }
      auto set_row = [&](int r, std::array<double, 3> v) {
        const double n = norm(v);
        for (int c = 0; c < 3; ++c) {
          sp.h[3 * r + c] = n > 0 ? v[c] / n : 0.0;
        }
      };
      if (np == 2) {
        set_row(open[0], cross(row(sp.h, per[0]), row(sp.h, per[1])));
      } else {
        const auto u = row(sp.h, per[0]);
        // The Cartesian axis least aligned with u gives a well-conditioned cross product.
        int axis = 0;
        for (int c = 1; c < 3; ++c) {
          if (std::fabs(u[c]) < std::fabs(u[axis])) {
            axis = c;
          }
        }
        std::array<double, 3> e{0, 0, 0};
        e[axis] = 1;
        const auto w1 = cross(u, e);
        set_row(open[0], w1);
        set_row(open[1], cross(u, w1));
      }
      if (singular(sp.h)) {
        throw InputError(
            std::string(fn) +
            ": the periodic lattice vectors are zero or linearly dependent; check the Lattice of the input");
      }
    }
  }
  const double det = det3(sp.h);
  sp.hinv = inverse3(sp.h, det);
  for (int k = 0; k < 3; ++k) {
    const double len = std::sqrt(sp.hinv[k] * sp.hinv[k] + sp.hinv[3 + k] * sp.hinv[3 + k] +
                                 sp.hinv[6 + k] * sp.hinv[6 + k]);
    sp.spacing[k] = 1.0 / len;  // column k of H^-1 is the reciprocal vector b_k, |b_k| = 1/d_k
  }
  return sp;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Calls v.begin(i), then v.edge(i, j, shift, vector, d2) for every (j, shift) with
// |r_j + shift.cell - r_i| < rc, then v.end(i), for i = 0..n-1 in order. The order of edges
// within a centre is unspecified.
template <class Visitor>
void search(const double* pos, std::size_t n, const Space& sp, double rc, double min_distance, const char* fn,
            Visitor& v) {
  if (n == 0) {
    return;
  }
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw InputError(std::string(fn) + ": " + std::to_string(n) + " atoms is more than the 2^31-1 supported");
  }
  // Fractional coordinates, wrapped into [0, 1) along periodic directions. wrap[] remembers
  // the whole cells removed so that shifts can be reported for the positions as given.
  std::vector<double> frac(3 * n);
  std::vector<std::int32_t> wrap(3 * n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const double* r = pos + 3 * i;
    if (!std::isfinite(r[0]) || !std::isfinite(r[1]) || !std::isfinite(r[2])) {
      throw InputError(std::string(fn) + ": atom " + std::to_string(i + 1) +
                       " has a non-finite position; check the input structure");
    }
    for (int k = 0; k < 3; ++k) {
      double f = r[0] * sp.hinv[k] + r[1] * sp.hinv[3 + k] + r[2] * sp.hinv[6 + k];
      if (sp.periodic[k]) {
        if (!(std::fabs(f) < 1e9)) {
          throw InputError(std::string(fn) + ": atom " + std::to_string(i + 1) + " lies " + fmt(f) +
                           " cells away from the cell; wrap the positions into the cell first");
        }
        double fl = std::floor(f);
        f -= fl;
        if (f >= 1.0) {  // f was a tiny negative number: f - floor(f) rounds to exactly 1
          f = 0.0;
          fl += 1.0;
        }
        wrap[3 * i + k] = static_cast<std::int32_t>(fl);
      }
      frac[3 * i + k] = f;
    }
  }

  // Bins are at least rc wide measured across the lattice planes (1 + 1e-5 keeps rc/width
  // safely below 1 so the stencil stays one bin deep; the 1e-6 in reach covers rounding in the
  // fractional coordinates). The distance across planes k never exceeds the distance itself, so
  // atoms within rc of a bin are in bins at most `reach` away along each direction.
  const double rc_wide = rc * (1.0 + 1e-5);
  std::array<std::int64_t, 3> nb{1, 1, 1};
  std::array<double, 3> lo{0, 0, 0};
  std::array<double, 3> span{1, 1, 1};
  for (int k = 0; k < 3; ++k) {
    if (!sp.periodic[k]) {
      double mn = frac[k], mx = frac[k];
      for (std::size_t i = 1; i < n; ++i) {
        mn = std::min(mn, frac[3 * i + k]);
        mx = std::max(mx, frac[3 * i + k]);
      }
      lo[k] = mn;
      span[k] = mx - mn;
    }
    const double cells = std::floor(span[k] * sp.spacing[k] / rc_wide);
    nb[k] = static_cast<std::int64_t>(std::clamp(cells, 1.0, 1e6));
  }
  // A sparse gas in a big box would get far more bins than atoms; coarser bins only add
  // candidates, never lose any, so cap the bin count at a few per atom.
  const std::int64_t max_bins = std::max<std::int64_t>(64, 4 * static_cast<std::int64_t>(n));
  while (nb[0] * nb[1] * nb[2] > max_bins) {
    const int k = static_cast<int>(std::max_element(nb.begin(), nb.end()) - nb.begin());
    nb[k] = (nb[k] + 1) / 2;
  }
  std::array<std::int64_t, 3> reach{};
  for (int k = 0; k < 3; ++k) {
    const double width = span[k] / static_cast<double>(nb[k]);
    if (!sp.periodic[k] && (nb[k] == 1 || !(width > 0))) {
      reach[k] = nb[k] - 1;
      continue;
    }
    const double x = rc / (sp.spacing[k] * width);
    const double r = std::ceil(x + 1e-6);
    if (sp.periodic[k] && r > 1e4) {
      throw InputError(std::string(fn) + ": the cell is " + fmt(sp.spacing[k]) + " A across direction " +
                       std::to_string(k + 1) + ", far shorter than the cutoff " + fmt(rc) +
                       " A (over 10^4 images); check the cell and the cutoff");
    }
    reach[k] = sp.periodic[k] ? static_cast<std::int64_t>(r)
                              : std::min<std::int64_t>(nb[k] - 1, static_cast<std::int64_t>(r));
  }

  // Counting sort of atoms by bin.
  const std::int64_t nbins = nb[0] * nb[1] * nb[2];
  std::vector<std::int64_t> bin_of(n);
  std::vector<std::array<std::int64_t, 3>> bin3(n);
  std::vector<std::int64_t> start(nbins + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) {
      const double u = (frac[3 * i + k] - lo[k]) / span[k];  // in [0, 1]
      std::int64_t b = span[k] > 0 ? static_cast<std::int64_t>(u * static_cast<double>(nb[k])) : 0;
      bin3[i][k] = std::clamp<std::int64_t>(b, 0, nb[k] - 1);
    }
    bin_of[i] = (bin3[i][0] * nb[1] + bin3[i][1]) * nb[2] + bin3[i][2];
    ++start[bin_of[i] + 1];
  }
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<std::int32_t> members(n);
  {
    std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
      members[fill[bin_of[i]]++] = static_cast<std::int32_t>(i);
    }
  }

  const double rc2 = rc * rc;
  const double min2 = min_distance * min_distance;
  for (std::size_t i = 0; i < n; ++i) {
    v.begin(i);
    const double* ri = pos + 3 * i;
    std::array<std::int64_t, 3> t{}, w{}, s{};
    for (std::int64_t o0 = -reach[0]; o0 <= reach[0]; ++o0) {
      t[0] = bin3[i][0] + o0;
      if (!sp.periodic[0] && (t[0] < 0 || t[0] >= nb[0])) {
        continue;
      }
      s[0] = sp.periodic[0] ? floor_div(t[0], nb[0]) : 0;
      w[0] = t[0] - s[0] * nb[0];
      for (std::int64_t o1 = -reach[1]; o1 <= reach[1]; ++o1) {
        t[1] = bin3[i][1] + o1;
        if (!sp.periodic[1] && (t[1] < 0 || t[1] >= nb[1])) {
          continue;
        }
        s[1] = sp.periodic[1] ? floor_div(t[1], nb[1]) : 0;
        w[1] = t[1] - s[1] * nb[1];
        for (std::int64_t o2 = -reach[2]; o2 <= reach[2]; ++o2) {
          t[2] = bin3[i][2] + o2;
          if (!sp.periodic[2] && (t[2] < 0 || t[2] >= nb[2])) {
            continue;
          }
          s[2] = sp.periodic[2] ? floor_div(t[2], nb[2]) : 0;
          w[2] = t[2] - s[2] * nb[2];
          const std::int64_t b = (w[0] * nb[1] + w[1]) * nb[2] + w[2];
          for (std::int64_t m = start[b]; m < start[b + 1]; ++m) {
            const std::int32_t j = members[m];
            // Image of the wrapped j relative to the wrapped i, re-expressed for the positions
            // as given: r_j,wrapped = r_j - wrap_j . cell.
            std::int32_t shift[3];
            for (int k = 0; k < 3; ++k) {
              shift[k] = static_cast<std::int32_t>(s[k] - wrap[3 * j + k] + wrap[3 * i + k]);
            }
            if (static_cast<std::size_t>(j) == i && shift[0] == 0 && shift[1] == 0 && shift[2] == 0) {
              continue;
            }
            double vec[3];
            edge_vector(ri, pos + 3 * j, sp.cell, shift, vec);
            const double d2 = vec[0] * vec[0] + vec[1] * vec[1] + vec[2] * vec[2];
            if (!(d2 < rc2)) {
              continue;
            }
            if (d2 < min2) {
              const std::string where = "image shift (" + std::to_string(shift[0]) + ", " +
                                        std::to_string(shift[1]) + ", " + std::to_string(shift[2]) + ")";
              if (static_cast<std::size_t>(j) == i) {
                throw NumericalError(std::string(fn) + ": atom " + std::to_string(i + 1) + " is " +
                                     fmt(std::sqrt(d2)) + " A from its own periodic image at " + where +
                                     ", closer than the minimum distance " + fmt(min_distance) +
                                     " A; the cell is degenerate, check the Lattice");
              }
              const std::size_t a = std::min<std::size_t>(i, j) + 1, bb = std::max<std::size_t>(i, j) + 1;
              throw NumericalError(std::string(fn) + ": atoms " + std::to_string(a) + " and " +
                                   std::to_string(bb) + " (1-based) are " + fmt(std::sqrt(d2)) +
                                   " A apart at " + where + ", closer than the minimum distance " +
                                   fmt(min_distance) +
                                   " A; remove the duplicated atom or fix the positions/cell");
            }
            v.edge(i, j, shift, vec, d2);
          }
        }
      }
    }
    v.end(i);
  }
}

void check_cutoff(double rc, double min_distance, const char* fn, const char* what) {
  if (!(rc > 0) || !std::isfinite(rc)) {
    throw InputError(std::string(fn) + ": the " + what + " must be a positive finite distance (A), got " +
                     fmt(rc));
  }
  if (!(min_distance >= 0) || !(min_distance < rc)) {
    throw InputError(std::string(fn) + ": min_distance must be >= 0 and below the " + what + " " + fmt(rc) +
                     " A, got " + fmt(min_distance));
  }
}

// Collects one centre's edges, sorts them into the canonical order and appends them.
struct Collector {
  NeighborList& out;
  bool vectors;
  struct Edge {
    std::int32_t j;
    std::int32_t s[3];
    double v[3];
  };
  std::vector<Edge> buf;

  void begin(std::size_t) { buf.clear(); }
  void edge(std::size_t, std::int32_t j, const std::int32_t* s, const double* v, double) {
    buf.push_back({j, {s[0], s[1], s[2]}, {v[0], v[1], v[2]}});
  }
  void end(std::size_t i) {
    std::sort(buf.begin(), buf.end(), [](const Edge& a, const Edge& b) {
      if (a.j != b.j) {
        return a.j < b.j;
      }
      return std::lexicographical_compare(a.s, a.s + 3, b.s, b.s + 3);
    });
    for (const Edge& e : buf) {
      out.neighbors.push_back(e.j);
      out.shifts.insert(out.shifts.end(), e.s, e.s + 3);
      if (vectors) {
        out.vectors.insert(out.vectors.end(), e.v, e.v + 3);
      }
    }
    out.offsets[i + 1] = static_cast<std::int64_t>(out.neighbors.size());
  }
};

struct Counter {
  double cutoff2, bond2;
  std::int64_t edges = 0, connected = 0, angles = 0, bonds = 0, own = 0;
  void begin(std::size_t) { bonds = own = 0; }
  void edge(std::size_t, std::int32_t, const std::int32_t*, const double*, double d2) {
    own += d2 < cutoff2;
    bonds += d2 < bond2;
  }
  void end(std::size_t) {
    edges += own;
    connected += own > 0;
    angles += bonds * (bonds - 1);
  }
};

}  // namespace

std::vector<std::int32_t> NeighborList::centers() const {
  std::vector<std::int32_t> c(num_edges());
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    std::fill(c.begin() + offsets[i], c.begin() + offsets[i + 1], static_cast<std::int32_t>(i));
  }
  return c;
}

NeighborList build_neighbor_list(const double* positions, std::size_t natoms, const double* cell,
                                 const std::array<bool, 3>& pbc, const NeighborListOptions& options) {
  const char* fn = "build_neighbor_list";
  check_cutoff(options.cutoff, options.min_distance, fn, "cutoff");
  if (natoms > 0 && positions == nullptr) {
    throw InputError("build_neighbor_list: positions is null but natoms is " + std::to_string(natoms));
  }
  const Space sp = make_space(cell, pbc, fn);
  NeighborList out;
  out.natoms = natoms;
  out.offsets.assign(natoms + 1, 0);
  Collector c{out, options.store_vectors, {}};
  search(positions, natoms, sp, options.cutoff, options.min_distance, fn, c);
  return out;
}

NeighborList build_neighbor_list(const std::vector<double>& positions,
                                 const std::optional<std::array<double, 9>>& cell,
                                 const std::array<bool, 3>& pbc, const NeighborListOptions& options) {
  if (positions.size() % 3 != 0) {
    throw InputError("build_neighbor_list: positions has " + std::to_string(positions.size()) +
                     " values, not a multiple of 3 (x y z per atom)");
  }
  return build_neighbor_list(positions.data(), positions.size() / 3, cell ? cell->data() : nullptr, pbc,
                             options);
}

GraphCounts count_graph(const double* positions, std::size_t natoms, const double* cell,
                        const std::array<bool, 3>& pbc, double cutoff, double bond_cutoff,
                        double min_distance) {
  const char* fn = "count_graph";
  check_cutoff(cutoff, min_distance, fn, "cutoff");
  check_cutoff(bond_cutoff, min_distance, fn, "bond cutoff");
  if (natoms > 0 && positions == nullptr) {
    throw InputError("count_graph: positions is null but natoms is " + std::to_string(natoms));
  }
  const Space sp = make_space(cell, pbc, fn);
  Counter c{cutoff * cutoff, bond_cutoff * bond_cutoff};
  search(positions, natoms, sp, std::max(cutoff, bond_cutoff), min_distance, fn, c);
  GraphCounts g;
  g.atoms = static_cast<std::int64_t>(natoms);
  g.edges = c.edges;
  g.connected = c.connected;
  g.angles = c.angles;
  return g;
}

GraphCounts count_graph(const std::vector<double>& positions,
                        const std::optional<std::array<double, 9>>& cell, const std::array<bool, 3>& pbc,
                        double cutoff, double bond_cutoff, double min_distance) {
  if (positions.size() % 3 != 0) {
    throw InputError("count_graph: positions has " + std::to_string(positions.size()) +
                     " values, not a multiple of 3 (x y z per atom)");
  }
  return count_graph(positions.data(), positions.size() / 3, cell ? cell->data() : nullptr, pbc, cutoff,
                     bond_cutoff, min_distance);
}

}  // namespace fastmlip::graph

// SPDX-License-Identifier: MIT
#include "graph/reference/neighbor_list_ref.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/error.hpp"

namespace fastmlip::graph::reference {
namespace {

using Vec = std::array<double, 3>;

Vec cross(const Vec& u, const Vec& v) {
  return {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
}
double dot(const Vec& u, const Vec& v) { return u[0] * v[0] + u[1] * v[1] + u[2] * v[2]; }

}  // namespace

NeighborList build_neighbor_list_ref(const double* positions, std::size_t natoms, const double* cell,
                                     const std::array<bool, 3>& pbc, const NeighborListOptions& options) {
  const double rc = options.cutoff;
  const bool any_periodic = pbc[0] || pbc[1] || pbc[2];
  if (any_periodic && cell == nullptr) {
    throw InputError("build_neighbor_list_ref: a periodic direction needs a cell");
  }
  // Reciprocal vectors g_k = (a_{k+1} x a_{k+2}) / V: g_k . r is the fractional coordinate
  // along k, and 1/|g_k| is the spacing of the lattice planes, so an image shift S_k can only
  // give an edge when |df_k + S_k| < rc |g_k|.
  std::array<Vec, 3> g{};
  if (any_periodic) {
    const std::array<Vec, 3> a = {Vec{cell[0], cell[1], cell[2]}, Vec{cell[3], cell[4], cell[5]},
                                  Vec{cell[6], cell[7], cell[8]}};
    const double volume = dot(a[0], cross(a[1], a[2]));
    if (volume == 0.0) {
      throw InputError("build_neighbor_list_ref: singular cell");
    }
    for (int k = 0; k < 3; ++k) {
      const Vec c = cross(a[(k + 1) % 3], a[(k + 2) % 3]);
      g[k] = {c[0] / volume, c[1] / volume, c[2] / volume};
    }
  }

  struct Edge {
    std::int32_t i, j;
    std::array<std::int32_t, 3> s;
    Vec v;
  };
  std::vector<Edge> edges;
  for (std::size_t i = 0; i < natoms; ++i) {
    for (std::size_t j = 0; j < natoms; ++j) {
      const Vec dr = {positions[3 * j] - positions[3 * i], positions[3 * j + 1] - positions[3 * i + 1],
                      positions[3 * j + 2] - positions[3 * i + 2]};
      std::array<long, 3> lo{0, 0, 0}, hi{0, 0, 0};
      for (int k = 0; k < 3; ++k) {
        if (pbc[k]) {
          const double df = dot(dr, g[k]);
          const double half = rc * std::sqrt(dot(g[k], g[k]));
          lo[k] = static_cast<long>(std::floor(-df - half)) - 1;
          hi[k] = static_cast<long>(std::ceil(-df + half)) + 1;
        }
      }
      for (long s0 = lo[0]; s0 <= hi[0]; ++s0) {
        for (long s1 = lo[1]; s1 <= hi[1]; ++s1) {
          for (long s2 = lo[2]; s2 <= hi[2]; ++s2) {
            const std::int32_t s[3] = {static_cast<std::int32_t>(s0), static_cast<std::int32_t>(s1),
                                       static_cast<std::int32_t>(s2)};
            if (i == j && s0 == 0 && s1 == 0 && s2 == 0) {
              continue;
            }
            Vec v;
            edge_vector(positions + 3 * i, positions + 3 * j, cell, s, v.data());
            if (dot(v, v) < rc * rc) {
              edges.push_back(
                  {static_cast<std::int32_t>(i), static_cast<std::int32_t>(j), {s[0], s[1], s[2]}, v});
            }
          }
        }
      }
    }
  }
  std::sort(edges.begin(), edges.end(),
            [](const Edge& x, const Edge& y) { return std::tie(x.i, x.j, x.s) < std::tie(y.i, y.j, y.s); });
  NeighborList out;
  out.natoms = natoms;
  out.offsets.assign(natoms + 1, 0);
  for (const Edge& e : edges) {
    ++out.offsets[e.i + 1];
    out.neighbors.push_back(e.j);
    out.shifts.insert(out.shifts.end(), e.s.begin(), e.s.end());
    if (options.store_vectors) {
      out.vectors.insert(out.vectors.end(), e.v.begin(), e.v.end());
    }
  }
  for (std::size_t i = 0; i < natoms; ++i) {
    out.offsets[i + 1] += out.offsets[i];
  }
  return out;
}

}  // namespace fastmlip::graph::reference

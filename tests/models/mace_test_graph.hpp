// SPDX-License-Identifier: MIT
#pragma once
// Graphs for the MACE model tests: structures through the project's neighbour list (ASE
// convention: edge i <- j with vector r_j + S.cell - r_i, i the receiver), with periodic
// images folded into the vectors or made explicit ghost nodes, and forces / virials from
// the edge gradients.
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "../common/tolerance.hpp"
#include "graph/atom_graph.hpp"
#include "graph/neighbor_list.hpp"
#include "models/mace/mace_model.hpp"

namespace fastmlip::test {

struct Structure {
  std::vector<double> positions;  // [n][3]
  std::vector<int> species;       // model species index
  std::optional<std::array<double, 9>> cell;
  std::array<bool, 3> pbc{false, false, false};
  int size() const { return static_cast<int>(species.size()); }
};

template <class T>
struct TestGraph {
  int n_local = 0, n_total = 0;
  std::vector<int> species, sender, receiver, owner;  // owner: of each ghost (n_total - n_local)
  std::vector<T> vectors;
  /// The graph contract over these arrays; its CSR offsets are counted from `receiver` here, so
  /// a test that edits the arrays sees its edit checked by the model.
  models::MaceGraph<T> view() const {
    center_start = graph::center_offsets(n_local, receiver);
    return graph::host_graph(n_local, n_total, species.data(), num_edges(), receiver.data(), sender.data(),
                             center_start.data(), vectors.data());
  }
  mutable std::vector<int> center_start;
  int num_edges() const { return static_cast<int>(sender.size()); }
};

/// Atoms uniformly in a box [0, side)^3, at least `min_dist` apart (rejection sampling).
inline Structure random_structure(int n, double side, double min_dist, int num_species, std::uint64_t seed,
                                  bool periodic) {
  Uniform u(seed);
  Structure s;
  int tries = 0;
  while (s.size() < n) {
    if (++tries > 100000 * (n + 1)) {
      throw std::runtime_error("random_structure: could not place the atoms; lower the density");
    }
    const double p[3] = {u(0, side), u(0, side), u(0, side)};
    bool ok = true;
    for (int j = 0; j < s.size() && ok; ++j) {
      double d2 = 0;
      for (int k = 0; k < 3; ++k) {
        double d = p[k] - s.positions[3 * j + k];
        if (periodic) {
          d -= side * std::round(d / side);
        }
        d2 += d * d;
      }
      ok = d2 >= min_dist * min_dist;
    }
    if (ok) {
      s.positions.insert(s.positions.end(), p, p + 3);
      s.species.push_back(static_cast<int>(u(0, num_species)) % num_species);
    }
  }
  if (periodic) {
    s.cell = std::array<double, 9>{side, 0, 0, 0, side, 0, 0, 0, side};
    s.pbc = {true, true, true};
  }
  return s;
}

inline graph::NeighborList neighbors(const Structure& s, double cutoff) {
  graph::NeighborListOptions opt;
  opt.cutoff = cutoff;
  return graph::build_neighbor_list(s.positions, s.cell, s.pbc, opt);
}

/// Every atom local, images folded into the edge vectors (mace-torch's own graph).
template <class T>
TestGraph<T> folded_graph(const Structure& s, double cutoff) {
  const auto nl = neighbors(s, cutoff);
  TestGraph<T> g;
  g.n_local = g.n_total = s.size();
  g.species = s.species;
  const auto centers = nl.centers();
  for (std::size_t e = 0; e < nl.num_edges(); ++e) {
    g.receiver.push_back(centers[e]);
    g.sender.push_back(nl.neighbors[e]);
    for (int k = 0; k < 3; ++k) {
      g.vectors.push_back(static_cast<T>(nl.vectors[3 * e + k]));
    }
  }
  return g;
}

/// The same edges, but every image (j, S != 0) is a ghost node that sends instead of j; a
/// ghost's features must come from its owner j through a FeatureExchange.
template <class T>
TestGraph<T> ghost_graph(const Structure& s, double cutoff) {
  TestGraph<T> g = folded_graph<T>(s, cutoff);
  const auto nl = neighbors(s, cutoff);
  std::map<std::tuple<int, int, int, int>, int> ghosts;
  for (std::size_t e = 0; e < nl.num_edges(); ++e) {
    const int* S = &nl.shifts[3 * e];
    if (S[0] == 0 && S[1] == 0 && S[2] == 0) {
      continue;
    }
    const auto key = std::make_tuple(nl.neighbors[e], S[0], S[1], S[2]);
    auto it = ghosts.find(key);
    if (it == ghosts.end()) {
      it = ghosts.emplace(key, g.n_total++).first;
      g.owner.push_back(nl.neighbors[e]);
      g.species.push_back(s.species[nl.neighbors[e]]);
    }
    g.sender[e] = it->second;
  }
  return g;
}

/// Copies owners' rows into ghost rows (forward) and adds ghost rows into owners (reverse),
/// as LAMMPS' forward and reverse communication do; counts the calls. With `offer_owners` it
/// also names the ghosts' owners (ghost_owners()), as a pair style on one rank does, so that the
/// model exchanges the rows itself.
template <class T>
class CopyExchange : public models::FeatureExchange<T> {
 public:
  CopyExchange(int n_local, std::vector<int> owner, bool offer_owners = false)
      : m_n_local(n_local), m_owner(std::move(owner)), m_offer(offer_owners) {}
  const int* ghost_owners() override { return m_offer ? m_owner.data() : nullptr; }
  void forward(T* rows, int width) override {
    ++forward_calls;
    widths.push_back(width);
    for (std::size_t g = 0; g < m_owner.size(); ++g) {
      for (int k = 0; k < width; ++k) {
        rows[(m_n_local + g) * width + k] = rows[static_cast<std::size_t>(m_owner[g]) * width + k];
      }
    }
  }
  void reverse(T* rows, int width) override {
    ++reverse_calls;
    widths.push_back(width);
    for (std::size_t g = 0; g < m_owner.size(); ++g) {
      for (int k = 0; k < width; ++k) {
        rows[static_cast<std::size_t>(m_owner[g]) * width + k] += rows[(m_n_local + g) * width + k];
        rows[(m_n_local + g) * width + k] = T(0);
      }
    }
  }
  int forward_calls = 0, reverse_calls = 0;
  std::vector<int> widths;

 private:
  int m_n_local;
  std::vector<int> m_owner;
  bool m_offer;
};

/// Forces on the local atoms: v = r_j - r_i, so F_i += dE/dv and F_owner(j) -= dE/dv.
template <class T>
std::vector<double> forces(const TestGraph<T>& g, const std::vector<T>& grad) {
  std::vector<double> f(3 * static_cast<std::size_t>(g.n_local), 0.0);
  for (int e = 0; e < g.num_edges(); ++e) {
    const int i = g.receiver[e];
    const int j = g.sender[e] < g.n_local ? g.sender[e] : g.owner[g.sender[e] - g.n_local];
    for (int k = 0; k < 3; ++k) {
      f[3 * i + k] += static_cast<double>(grad[3 * e + k]);
      f[3 * j + k] -= static_cast<double>(grad[3 * e + k]);
    }
  }
  return f;
}

/// Virial W = -sum_e v (x) dE/dv, 3x3 row-major.
template <class T>
std::array<double, 9> virial(const TestGraph<T>& g, const std::vector<T>& grad) {
  std::array<double, 9> w{};
  for (int e = 0; e < g.num_edges(); ++e) {
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) {
        w[3 * a + b] -= static_cast<double>(g.vectors[3 * e + a]) * static_cast<double>(grad[3 * e + b]);
      }
    }
  }
  return w;
}

}  // namespace fastmlip::test

// SPDX-License-Identifier: MIT
#pragma once
// Evaluates a ChgnetModel on one periodic structure and forms what chgnet reports: energy per
// atom, forces, stress in GPa (chgnet's convention, see below), magnetic moments and site
// energies. Shared by the CHGNet model tests.
#include <Kokkos_Core.hpp>
#include <array>
#include <cmath>
#include <map>
#include <vector>

#include "graph/neighbor_list.hpp"
#include "models/chgnet/chgnet_model.hpp"

namespace fastmlip::test {

struct ChgnetStructure {
  std::array<double, 9> lattice{};  // rows a, b, c (A)
  std::vector<double> positions;    // cartesian, n x 3 (A)
  std::vector<int> numbers;         // atomic numbers
  std::array<bool, 3> pbc{true, true, true};
  int size() const { return static_cast<int>(numbers.size()); }
};

struct ChgnetOutputs {
  double energy = 0, energy_per_atom = 0;
  std::vector<double> forces, site_energies, magmoms;
  std::array<double, 9> stress{};  // GPa
  /// 160.2 / V sum_e |v_e| |dE/dv_e| (GPa): the size of the terms the stress sums, i.e. the
  /// scale of its rounding error (float32 tolerances are relative to it).
  double stress_terms = 0;
  /// max over atoms of sum_{edges at the atom} |dE/dv_e| (eV/A): the size of the terms a force
  /// sums, the scale of its rounding error.
  double force_terms = 0;
};

/// chgnet's stress: (1/V) dE/d(strain) in GPa, with the strain applied as lattice (I + eps):
/// dE/d eps_ab = sum_e v_a dE/dv_b, so stress = -virial / V (positive under tension).
inline constexpr double kEvPerA3ToGPa = 160.21766208;

/// The model on its execution space, on a host-built graph: a device model gets the graph
/// mirrored into its memory (models::ChgnetGraphMirror), as a caller with a GPU would hand it.
template <class Space, class T>
models::ChgnetResult compute_on(models::ChgnetModel<Space, T>& model, const models::ChgnetGraph<T>& host,
                                models::ChgnetExchange<T>* exchange = nullptr) {
  models::ChgnetGraphMirror<T, typename Space::memory_space> mirror;
  models::ChgnetResult r;
  model.compute(mirror.of(host), exchange, true, r);
  return r;
}

/// The model on one periodic structure, images folded into the edge vectors (chgnet's graph).
template <class Space, class T>
ChgnetOutputs evaluate(models::ChgnetModel<Space, T>& model, const ChgnetStructure& s) {
  auto g = models::make_structure_graph<T>(s.positions, s.numbers, s.lattice.data(), s.pbc, model.cutoff(),
                                           model.bond_cutoff());
  const models::ChgnetResult r = compute_on(model, g.view());
  ChgnetOutputs o;
  const int n = s.size();
  o.energy = r.energy;
  o.energy_per_atom = r.energy / n;
  o.site_energies = r.site_energy;
  o.magmoms = r.magmom;
  o.forces.assign(3 * static_cast<std::size_t>(n), 0.0);
  std::array<double, 9> de_deps{};
  for (std::size_t e = 0; e < g.center.size(); ++e) {
    const double* gr = r.edge_gradient.data() + 3 * e;
    for (int d = 0; d < 3; ++d) {
      o.forces[3 * g.center[e] + d] += gr[d];
      o.forces[3 * g.neighbor[e] + d] -= gr[d];
      for (int b = 0; b < 3; ++b) de_deps[3 * d + b] += static_cast<double>(g.vectors[3 * e + d]) * gr[b];
    }
    const double v2 = std::pow(static_cast<double>(g.vectors[3 * e]), 2) + std::pow(static_cast<double>(g.vectors[3 * e + 1]), 2) +
                      std::pow(static_cast<double>(g.vectors[3 * e + 2]), 2);
    o.stress_terms += std::sqrt(v2) * std::sqrt(gr[0] * gr[0] + gr[1] * gr[1] + gr[2] * gr[2]);
  }
  const auto& L = s.lattice;
  const double volume = L[0] * (L[4] * L[8] - L[5] * L[7]) - L[1] * (L[3] * L[8] - L[5] * L[6]) +
                        L[2] * (L[3] * L[7] - L[4] * L[6]);
  for (int k = 0; k < 9; ++k) o.stress[k] = de_deps[k] / std::abs(volume) * kEvPerA3ToGPa;
  o.stress_terms *= kEvPerA3ToGPa / std::abs(volume);
  std::vector<double> terms(n, 0.0);
  for (std::size_t e = 0; e < g.center.size(); ++e) {
    const double* gr = r.edge_gradient.data() + 3 * e;
    const double a = std::sqrt(gr[0] * gr[0] + gr[1] * gr[1] + gr[2] * gr[2]);
    terms[g.center[e]] += a;
    terms[g.neighbor[e]] += a;
  }
  for (double t : terms) o.force_terms = std::max(o.force_terms, t);
  return o;
}

/// The same structure's graph as one LAMMPS rank holds it: every periodic image (j, S != 0) an
/// edge reaches is a ghost node of its own, owned by j, with as many slots as j in j's order.
/// Edges, their order and their vectors are make_structure_graph's, so the edge gradients of
/// both graphs compare entry by entry.
template <class T>
struct ChgnetGhostGraph {
  models::ChgnetStructureGraph<T> arrays;  // species, neighbor, slot_start, reverse_slot over n_total nodes
  int n_local = 0, n_total = 0;
  std::vector<int> owner;  // [n_total - n_local]

  models::ChgnetGraph<T> view() const {
    const auto& a = arrays;
    models::ChgnetGraph<T> g;
    static_cast<graph::AtomGraph<T>&>(g) =
        graph::host_graph(n_local, n_total, a.species.data(), static_cast<int>(a.center.size()),
                          a.center.data(), a.neighbor.data(), a.center_start.data(), a.vectors.data());
    g.slot_start = Kokkos::View<const int*, Kokkos::HostSpace>(a.slot_start.data(), a.slot_start.size());
    g.reverse_slot =
        Kokkos::View<const int*, Kokkos::HostSpace>(a.reverse_slot.data(), a.reverse_slot.size());
    return g;
  }
};

template <class T>
ChgnetGhostGraph<T> ghost_graph(const ChgnetStructure& s, double cutoff, double bond_cutoff) {
  ChgnetGhostGraph<T> out;
  auto& a = out.arrays;
  a = models::make_structure_graph<T>(s.positions, s.numbers, s.lattice.data(), s.pbc, cutoff, bond_cutoff);
  // The image shifts of the same edges (make_structure_graph's neighbour list, in its order).
  graph::NeighborListOptions opt;
  opt.cutoff = cutoff;
  const auto nl =
      graph::build_neighbor_list(s.positions.data(), s.numbers.size(), s.lattice.data(), s.pbc, opt);
  out.n_local = out.n_total = a.n_atoms;
  std::map<std::array<int, 4>, int> ghosts;  // (owner, shift) -> node
  const std::vector<int> local_slots = a.slot_start;
  for (std::size_t e = 0; e < a.center.size(); ++e) {
    const int* S = &nl.shifts[3 * e];
    if (S[0] == 0 && S[1] == 0 && S[2] == 0) {
      continue;
    }
    const int j = a.neighbor[e];
    auto it = ghosts.find({j, S[0], S[1], S[2]});
    if (it == ghosts.end()) {
      it = ghosts.emplace(std::array<int, 4>{j, S[0], S[1], S[2]}, out.n_total++).first;
      out.owner.push_back(j);
      a.species.push_back(a.species[j]);
      a.slot_start.push_back(a.slot_start.back() + local_slots[j + 1] - local_slots[j]);
    }
    const int ghost = it->second;
    a.neighbor[e] = ghost;
    // The reverse edge (j -> i, -S) is j's short edge; its row is the ghost's copy of it.
    if (a.reverse_slot[e] >= 0) {
      a.reverse_slot[e] = a.slot_start[ghost] + (a.reverse_slot[e] - local_slots[j]);
    }
  }
  return out;
}

/// LAMMPS' forward and reverse communication on one rank: ghost rows and slot rows are copies of
/// their owners' (forward); their adjoints are added to the owners' and zeroed (reverse).
template <class T>
class ChgnetCopyExchange : public models::ChgnetExchange<T> {
 public:
  /// `offer_owners`: also name the ghosts' owners (ghost_owners()), as a pair style on one rank
  /// does, so that the model does the exchanges itself.
  template <class U>
  explicit ChgnetCopyExchange(const ChgnetGhostGraph<U>& g, bool offer_owners = false)
      : m_n_local(g.n_local), m_owner(g.owner), m_slot_start(g.arrays.slot_start), m_offer(offer_owners) {}

  void forward(T* rows, int width) override { copy(rows, width, false, false); }
  void reverse(T* rows, int width) override { copy(rows, width, false, true); }
  void forward_slots(T* slots, int width) override { copy(slots, width, true, false); }
  void reverse_slots(T* slots, int width) override { copy(slots, width, true, true); }
  const int* ghost_owners() override { return m_offer ? m_owner.data() : nullptr; }
  int calls = 0;  // exchanges called

 private:
  /// slots: each node's slot rows (slot_start), else one row per node.
  void copy(T* rows, int width, bool slots, bool add) {
    ++calls;
    for (std::size_t g = 0; g < m_owner.size(); ++g) {
      const int ghost = m_n_local + static_cast<int>(g), owner = m_owner[g];
      const int n = slots ? m_slot_start[ghost + 1] - m_slot_start[ghost] : 1;
      const std::size_t from = slots ? m_slot_start[owner] : owner;
      const std::size_t to = slots ? m_slot_start[ghost] : ghost;
      for (std::size_t q = 0; q < static_cast<std::size_t>(n) * width; ++q) {
        T& mine = rows[from * width + q];
        T& theirs = rows[to * width + q];
        if (add) {
          mine += theirs;
          theirs = T(0);
        } else {
          theirs = mine;
        }
      }
    }
  }

  int m_n_local;
  std::vector<int> m_owner, m_slot_start;
  bool m_offer;
};

}  // namespace fastmlip::test

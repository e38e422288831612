// SPDX-License-Identifier: MIT
#pragma once
// Evaluates a ChgnetModel on one periodic structure and forms what chgnet reports: energy per
// atom, forces, stress in GPa (chgnet's convention, see below), magnetic moments and site
// energies. Shared by the CHGNet model tests.
#include <Kokkos_Core.hpp>
#include <array>
#include <cmath>
#include <vector>

#include "graph/graph_mirror.hpp"
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

/// The model on its execution space: a device model gets the host-built graph mirrored into its
/// memory (graph::GraphMirror and copies of the slots), as a caller with a GPU would hand it.
template <class Space, class T>
ChgnetOutputs evaluate(models::ChgnetModel<Space, T>& model, const ChgnetStructure& s) {
  auto g = models::make_structure_graph<T>(s.positions, s.numbers, s.lattice.data(), s.pbc, model.cutoff(),
                                           model.bond_cutoff());
  models::ChgnetResult r;
  using Mem = typename Space::memory_space;
  const models::ChgnetGraph<T> host = g.view();
  graph::GraphMirror<T, Mem> mirror;
  typename models::ChgnetModel<Space, T>::Graph dev;
  static_cast<graph::AtomGraph<T, Mem>&>(dev) = mirror.of(host);
  Kokkos::View<int*, Mem> slot_start("slot_start", host.slot_start.extent(0)),
      reverse_slot("reverse_slot", host.reverse_slot.extent(0));
  Kokkos::deep_copy(slot_start, host.slot_start);
  Kokkos::deep_copy(reverse_slot, host.reverse_slot);
  dev.slot_start = slot_start;
  dev.reverse_slot = reverse_slot;
  model.compute(dev, nullptr, true, r);
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

}  // namespace fastmlip::test

// SPDX-License-Identifier: MIT
#pragma once
/// \file CHGNet (Deng et al., Nat. Mach. Intell. 2023; the chgnet package, v0.3.0 and v0.2.0
/// checkpoints) evaluated with the inference optimisations of FastCHGNet: energy, site
/// energies, magnetic moments and dE/d(edge vector), from which callers form forces, the
/// virial and per-atom virials.
///
/// Graph layout (the one a LAMMPS pair style has, as for MACE): nodes 0..n_local-1 are the
/// atoms whose energies are wanted; nodes n_local..n_total-1 are ghosts (periodic images or
/// another rank's atoms). Every directed edge has a local centre. chgnet keeps one feature row
/// per undirected bond; here both directions of a bond carry the same row, so that every bond
/// a rank needs is one of its own edges.
///
/// A bond's update in a BondConv sums the angles at both of its ends. The half at the edge's
/// own centre is computed locally (H(a), one row per "short" edge, r < bond-graph cutoff); the
/// half at the far end is the H row of the reverse edge. That row lives in a *slot*: every
/// node owns slot rows for its short edges, locals in their edge order, ghosts in the order
/// their owner uses. The model fills the local slots and asks the caller's ChgnetExchange to
/// copy the ghost slots from their owners, once per BondConv (and, in the reverse pass, to add
/// their adjoints back). With atom-feature rows exchanged after every AtomConv, a halo of one
/// atom-graph cutoff (6 A) suffices, whatever the number of layers. A caller without ghosts
/// (one periodic structure with image shifts folded into the edge vectors, as chgnet builds
/// its graph) passes n_total = n_local, reverse slots of local edges, and no exchange:
/// make_structure_graph() below does that.
///
/// The file layout and hyperparameters: docs/pair_fastmlip_chgnet.md; the math, stage by
/// stage: chgnet_model.cpp.
#include <array>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/atom_graph.hpp"
#include "graph/graph_mirror.hpp"
#include "io/potential_file.hpp"
#include "kernels/dense_path.hpp"
#include "models/feature_exchange.hpp"

namespace fastmlip::models {

/// The caller's communication for CHGNet: node rows (atom features, as FeatureExchange) and
/// slot rows (the half bond updates H of short edges); host memory, or with rows_in_model_memory()
/// both kinds of rows where the model keeps them, as FeatureExchange. Call order of one
/// compute() with n_conv = 4 (the stage list, chgnet_stages.hpp): after each of AtomConvs 0..2, forward(x^k)
/// and then forward_slots in the following BondConv; with gradients, afterwards the mirror
/// image with reverse / reverse_slots. The sequence depends only on the model and `gradients`,
/// never on the graph.
template <class T>
class ChgnetExchange : public FeatureExchange<T> {
 public:
  /// Overwrite the ghost nodes' slot rows (slot_start[n_local]..slot_start[n_total]) with their
  /// owners' rows; `width` values per slot.
  virtual void forward_slots(T* slots, int width) = 0;
  /// Add the ghost nodes' slot rows into their owners' rows, then zero them.
  virtual void reverse_slots(T* slots, int width) = 0;
};

/// The graph CHGNet evaluates: the one contract of graph/atom_graph.hpp (in MemorySpace; edge
/// vectors r_neighbor (+ image shift) - r_center; species = atomic number - 1), plus the bond
/// slots of its short edges.
template <class T, class MemorySpace = Kokkos::HostSpace>
struct ChgnetGraph : graph::AtomGraph<T, MemorySpace> {
  /// [n_total + 1] CSR of slot rows by node. A local node has one slot per short edge, in
  /// edge order; a ghost as many as its owner has.
  Kokkos::View<const int*, MemorySpace> slot_start;
  /// [num_edges] slot of the reverse edge (neighbor -> center) for a short edge (shorter than
  /// the bond-graph cutoff), -1 for the others. This is what marks an edge short: the caller
  /// decides it once, in double precision, so the model and the caller's slot layout agree.
  Kokkos::View<const int*, MemorySpace> reverse_slot;
};

/// A ChgnetGraph moved to another memory space: graph::GraphMirror's copy of the atom graph plus
/// copies of the slots, kept between calls. Where `To` can read the graph's memory it is
/// returned as it is, nothing copied. A host caller of a device model (`device cuda`, the device
/// tests) hands the model its graph through one.
template <class T, class To>
class ChgnetGraphMirror {
 public:
  template <class From>
  ChgnetGraph<T, To> of(const ChgnetGraph<T, From>& g) {
    if constexpr (std::is_same_v<From, To>) {
      return g;
    } else {
      using Atoms = graph::GraphMirror<T, To>;
      ChgnetGraph<T, To> m;
      static_cast<graph::AtomGraph<T, To>&>(m) = m_atoms.of(g);
      m.slot_start = Atoms::copy(m_slot_start, g.slot_start, "fastmlip::chgnet::mirror_slot_start");
      m.reverse_slot = Atoms::copy(m_reverse_slot, g.reverse_slot, "fastmlip::chgnet::mirror_reverse_slot");
      return m;
    }
  }

 private:
  graph::GraphMirror<T, To> m_atoms;
  Kokkos::View<int*, To> m_slot_start, m_reverse_slot;
};

/// Results; sized by compute().
struct ChgnetResult {
  double energy = 0;                ///< sum of site_energy (eV)
  std::vector<double> site_energy;  ///< [n_local] readout + AtomRef (eV), chgnet's site energies
  std::vector<double> magmom;       ///< [n_local] |site_wise(x^3)| (mu_B)
  /// [num_edges][3] dE/d(vectors) (eV/A); empty without gradients. With v = r_j - r_i of edge
  /// i -> j: F_i += dE/dv, F_j -= dE/dv; virial W = -sum_e v (x) dE/dv.
  std::vector<double> edge_gradient;
};

/// The same results left in the model's memory: views into its buffers, valid until the next
/// compute(). What a caller whose data lives there (the /kk styles on a GPU) tallies from
/// without a copy. The energy is the sum of the site energies, formed on the host in node
/// order, so it is the same bits as ChgnetResult's.
template <class MemorySpace>
struct ChgnetDeviceResult {
  double energy = 0;
  Kokkos::View<const double*, MemorySpace> site_energy;  ///< [n_local] (eV)
  Kokkos::View<const double*, MemorySpace> magmom;       ///< [n_local] (mu_B)
  /// [num_edges][3] dE/d(vectors) (eV/A); empty without gradients.
  Kokkos::View<const double* [3], Kokkos::LayoutRight, MemorySpace> edge_gradient;
};

/// A periodic structure's graph with image shifts folded into the edge vectors (no ghosts);
/// owns its arrays. For tests, benchmarks and tools that evaluate one structure.
template <class T>
struct ChgnetStructureGraph {
  std::vector<int> species, center, center_start, neighbor, slot_start, reverse_slot;
  std::vector<T> vectors;
  int n_atoms = 0;
  ChgnetGraph<T> view() const;
};

/// Builds it: edges strictly shorter than `cutoff`, short edges strictly shorter than
/// `bond_cutoff`. `cell` row-major rows a, b, c (nullptr: open boundaries). Throws as
/// graph::build_neighbor_list does (names both atoms of a coincident pair).
template <class T>
ChgnetStructureGraph<T> make_structure_graph(const std::vector<double>& positions, const std::vector<int>& atomic_numbers,
                                             const double* cell, const std::array<bool, 3>& pbc, double cutoff,
                                             double bond_cutoff);

/// A CHGNet potential ready to evaluate, in compute precision T (float: the checkpoint's own;
/// double on request), its stages on ExecSpace (chgnet_stages.hpp; the pair styles: the host).
template <class ExecSpace, class T>
class ChgnetModel {
 public:
  using memory_space = typename ExecSpace::memory_space;
  /// The graph in ExecSpace's memory.
  using Graph = ChgnetGraph<T, memory_space>;

  /// Builds the model from a potential file (model kind "chgnet"); throws InputError naming the
  /// file and the tensor or hyperparameter on any inconsistency, UnsupportedError for a
  /// configuration this build does not evaluate (another activation, normalisation or readout).
  /// `path`: which implementation runs the stages' dense kernels (kernels/dense_path.hpp):
  /// automatic is the host's SIMD kernels on the host and Kokkos teams on a device; teams on
  /// the host is how the CPU tests run what a GPU runs.
  explicit ChgnetModel(const io::PotentialFile& file,
                       kernels::DensePath path = kernels::DensePath::automatic);
  ~ChgnetModel();
  ChgnetModel(ChgnetModel&&) noexcept;
  ChgnetModel& operator=(ChgnetModel&&) noexcept;

  double cutoff() const;       ///< atom-graph cutoff (A)
  double bond_cutoff() const;  ///< bond-graph cutoff (A)
  int num_elements() const;    ///< embedding rows: atomic numbers 1..num_elements()
  /// Why atomic number Z cannot be evaluated ("" when it can): beyond the embedding, or no
  /// AtomRef value (a composition energy of exactly 0 is chgnet's "not fitted").
  std::string species_problem(int atomic_number) const;
  /// Values per node row / slot row that compute() passes to the exchange.
  int atom_width() const;
  int bond_width() const;
  const std::string& version() const;
  /// Memory (bytes) the gated MLPs' activations may take to be kept from the forward to the
  /// reverse pass (default 512 MiB): a step whose activations fit skips recomputing them
  /// (small cells run about a third faster); a larger one recomputes them tile by tile. Both
  /// give the same bits. 0 always recomputes.
  void set_activation_budget(double bytes);

  /// Energies and magnetic moments, and dE/d(edge vectors) when `gradients`. Throws
  /// InputError for a species out of range, an edge whose centre is not local or out of order,
  /// a zero-length edge, or a slot layout that does not match the short edges. `exchange`
  /// may be null only when graph.n_total == graph.n_local. Work buffers are kept between calls.
  /// On a device, the rows exchanged are staged through host memory and the results copied to
  /// the host.
  void compute(const Graph& graph, ChgnetExchange<T>* exchange, bool gradients, ChgnetResult& result);
  /// The same, its results left in the model's memory (ChgnetDeviceResult); ChgnetResult's form
  /// is this one and a copy to the host.
  void compute(const Graph& graph, ChgnetExchange<T>* exchange, bool gradients,
               ChgnetDeviceResult<memory_space>& result);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace fastmlip::models

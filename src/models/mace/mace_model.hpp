// SPDX-License-Identifier: MIT
#pragma once
/// \file MACE (Batatia et al., NeurIPS 2022; mace-torch's MACE / ScaleShiftMACE) evaluated with
/// the fused kernels of src/kernels/: energy, per-atom energy and dE/d(edge vector), from which
/// callers form forces, the virial and per-atom virials.
///
/// The model sees a graph in the layout a LAMMPS pair style has: nodes 0..n_local-1 are the
/// atoms whose energies are wanted ("local"); nodes n_local..n_total-1 are "ghosts" (periodic
/// images or another rank's atoms) that only send messages. Every edge has a local receiver.
/// After each interaction layer the ghosts' node features must equal their owners' features:
/// the model asks the caller's FeatureExchange to copy them (forward communication), and in
/// the reverse pass to add the ghosts' adjoints into their owners (reverse communication). So
/// a halo of one cutoff suffices, whatever the number of layers. A caller without ghosts (one
/// structure, periodic images folded into edge vectors, as mace-torch builds its graph) passes
/// n_total = n_local and no exchange.
///
/// The file layout, hyperparameters and what the converter writes: docs/mace-potential.md.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/atom_graph.hpp"
#include "io/potential_file.hpp"
#include "kernels/backend.hpp"
#include "models/feature_exchange.hpp"

namespace fastmlip::models {

/// The graph MACE evaluates: the one contract of graph/atom_graph.hpp, in host memory. Edge
/// vectors are r_sender - r_receiver there, the opposite of mace-torch's; the model reads them as
/// they are (mace_model.cpp says why that gives mace-torch's energies and forces exactly).
template <class T>
using MaceGraph = graph::AtomGraph<T, Kokkos::HostSpace>;

struct MaceOptions {
  /// Head of a multi-head model, by name; empty picks the only head, else the file's
  /// hyperparameters.default_head (the converter's choice), else refuses naming the heads.
  std::string head;
  /// 0 (the default): evaluate each layer's radial MLP exactly, as mace-torch does. > 0: replace
  /// it by a cubic Hermite table of R(r) with knots at most this far apart (A), built when
  /// the model is constructed (kernels/radial_table.hpp). Several times faster; the error is
  /// measured at build time (radial_tables()) and is O(spacing^4) in R.
  double radial_spacing = 0.0;
  /// Lower end of the radial tables (A): shorter edges are refused. Below the 0.1 A at which
  /// the pair styles refuse close atoms.
  static constexpr double kRadialTableStart = 0.05;
  /// With radial_spacing > 0 and a distance transform (Agnesi, Soft: MACE-MP-0b3, MPA-0,
  /// OMAT-0, MATPES), R depends on the edge's pair of elements, so one table is built per pair
  /// of these elements (symbols); empty: every element of the model. The pair styles pass
  /// pair_coeff's elements. An edge between other elements is refused, naming them.
  std::vector<std::string> table_species;
  /// Which implementation runs the channelwise TP and the symmetric contraction
  /// (kernels/backend.hpp). Backend::cuda (the hand-written CUDA kernels) needs a model on
  /// Kokkos::Cuda in a build with FASTMLIP_ENABLE_CUDA; it serves the exact radial functions
  /// only (radial splines keep the Kokkos TP). Backend::automatic, the default, is cuda where
  /// that holds and kokkos elsewhere; kernel_backend() says which ran.
  kernels::Backend backend = kernels::Backend::automatic;
  /// Which implementation runs the exact radial MLP's forward and input gradient
  /// (RadialMLPKokkos): Backend::cuda runs each layer as a cuBLAS GEMM (a model on Kokkos::Cuda
  /// in a build that found cuBLAS, else refused). Backend::automatic is the Kokkos functors until
  /// a GPU run has compared the two on a GPU (benchmarks/README.md, "Next GPU check").
  kernels::Backend radial_backend = kernels::Backend::automatic;
  /// The structure's total charge (e) and spin multiplicity, for a model that embeds them
  /// (mace-torch's embedding_specs total_charge / total_spin, MACE-OMOL; the pair style's charge
  /// and spin keywords). Such a model refuses to load without the values it embeds, and a
  /// model without them refuses either value, so that neither is ever silently ignored.
  std::optional<double> total_charge, total_spin;
  /// false: leave the embeddings out (no values needed, nothing folded). For the trainer, whose
  /// structures each have their own charge and spin and which trains the embedding's weights.
  bool graph_embedding = true;
  /// Edges per chunk of the exact radial MLP and its TP; 0 (the default): as many as make
  /// kEdgeChunkBytes of radial weights on the host, a sixteenth of the GPU's memory on a GPU
  /// (5 GB on an 80 GB GPU). Each layer's weights R, [edges x weight_numel] (~1300
  /// values an edge at MACE-MP's medium shape), and their adjoint then exist for one chunk of
  /// whole receivers at a time instead of the whole graph, so that memory per atom does not
  /// grow with them. The forces are those of the unchunked model to round-off (the TP's sums
  /// keep their order, but for the CUDA kernels' sums over a sender's edges, which add up per
  /// chunk; the radial MLP's matrix products may round differently on fewer rows).
  int edge_chunk = 0;
  static constexpr std::size_t kEdgeChunkBytes = std::size_t(256) << 20;
};

/// What a layer's radial table is and how well it reproduces the exact radial function,
/// measured when it was built (kernels::RadialTable).
struct MaceRadialTableInfo {
  /// R: the radial MLP's output (the TP's weights); density: a Density (or non-linear) block's
  /// edge term tanh(d(r)^2).
  enum class Function { R, density };
  int layer = 0;
  Function function = Function::R;
  /// "R" or "density", as logs and test messages print it.
  const char* function_name() const { return function == Function::R ? "R" : "density"; }
  /// 1, or one per pair of elements when a distance transform makes the function depend on
  /// the pair (MaceOptions::table_species says which elements).
  int tables = 1;
  int knots = 0;
  int width = 0;       ///< values per knot and r (the layer's weight_numel; 1 for "density")
  double spacing = 0;  ///< A
  double max_error_value = 0, max_abs_value = 0;            ///< over all r and outputs
  double max_error_derivative = 0, max_abs_derivative = 0;  ///< of dR/dr (1/A)
  std::size_t bytes = 0;                                    ///< memory of the tables
};

/// Results; sized by compute().
template <class T>
struct MaceResult {
  double energy = 0;               ///< sum of node_energy (eV)
  /// [n_local] (eV), E0, scale/shift and half of each ZBL pair included; sums to `energy`.
  /// (mace-torch 0.3.13's plain MACE class reports only E0 + ZBL as its node_energy; its total
  /// energy is this sum.)
  std::vector<double> node_energy;
  /// [num_edges][3] dE/d(vectors) (eV/A); empty without gradients. With v = r_j - r_i of edge
  /// j -> i: F_i += dE/dv, F_j -= dE/dv; virial W = -sum_e v (x) dE/dv.
  std::vector<T> edge_gradient;
};

/// The same results left where the model computed them, in its execution space's memory, for a
/// caller whose data lives there too (the /kk pair styles tally forces on the KOKKOS device from
/// them); views into the model's buffers, valid until its next compute().
template <class T, class Memory>
struct MaceDeviceResult {
  double energy = 0;                                ///< as MaceResult's, summed in node order on the host
  Kokkos::View<const double*, Memory> node_energy;  ///< [n_local]
  Kokkos::View<const T* [3], Kokkos::LayoutRight, Memory>
      edge_gradient;  ///< [num_edges]; empty without gradients
};

/// A MACE potential ready to evaluate. T is the compute precision (double by default in the
/// pair styles, float on request); ExecSpace the Kokkos execution space of the kernels.
template <class ExecSpace, class T>
class MaceModel {
 public:
  using memory_space = typename ExecSpace::memory_space;
  /// The graph in ExecSpace's memory: MaceGraph<T> on the host spaces.
  using Graph = graph::AtomGraph<T, memory_space>;

  /// Builds the model from a potential file (model kind "mace"); throws InputError naming the
  /// file and the offending tensor or hyperparameter on any inconsistency (a missing or
  /// mis-shaped tensor, a missing key, irreps that do not chain), UnsupportedError listing
  /// what is supported for a configuration this build does not evaluate (another block
  /// class, gate or radial basis; an l or width beyond the kernels' limits).
  MaceModel(const io::PotentialFile& file, const MaceOptions& options = {});
  ~MaceModel();
  MaceModel(MaceModel&&) noexcept;
  MaceModel& operator=(MaceModel&&) noexcept;

  double cutoff() const;                    ///< r_max (A)
  int num_layers() const;                   ///< interactions
  const std::vector<io::PotentialSpecies>& species() const;  ///< the model's species, in order
  /// Species index of atomic number Z, or -1 if the model lacks it.
  int species_index(int atomic_number) const;
  /// The widest row (values per node) compute() ever passes to FeatureExchange::forward or
  /// reverse: a caller sizes its communication buffers from it before the first step.
  int max_exchange_width() const;
  /// One entry per layer when options.radial_spacing > 0, else empty.
  const std::vector<MaceRadialTableInfo>& radial_tables() const;
  /// Which backend runs the kernels that have several (options.backend resolved), e.g.
  /// "channelwise TP: cuda, symmetric contraction: cuda, radial MLP: kokkos" (kokkos also for a
  /// layer whose radial function is a table or the non-linear block's); a kernel whose layers differ lists
  /// each layer's.
  std::string kernel_backends() const;

  /// Energies, and dE/d(edge vectors) when `gradients`. The calls to `exchange` depend only
  /// on the model and on `gradients`, never on the graph (zero nodes or edges included), so
  /// that every MPI rank makes the same collective calls in the same order. `exchange` may be
  /// null only when graph.n_total == graph.n_local. Checks the graph once (graph::check_graph:
  /// InputError for a species index out of range, an edge whose receiver is not local or out of
  /// order, CSR offsets that do not match, a zero-length edge, naming both node indices). The
  /// model keeps its work buffers between calls (they grow with the largest graph seen), so one
  /// model serves one compute() at a time. Per-node readout energies are formed in T and summed
  /// in double.
  void compute(const Graph& graph, FeatureExchange<T>* exchange, bool gradients, MaceResult<T>& result);
  /// The same, its results left in ExecSpace's memory: no copy to the host but the per-node
  /// energies' (n_local doubles, for the total).
  void compute(const Graph& graph, FeatureExchange<T>* exchange, bool gradients,
               MaceDeviceResult<T, memory_space>& result);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace fastmlip::models

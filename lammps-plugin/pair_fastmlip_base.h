// SPDX-License-Identifier: MIT
#pragma once
// What every fastmlip pair style does the same way, whatever the model: the LAMMPS side of a
// graph potential evaluated by the core on the host.
//
//   pair_coeff * * <file> <symbols>  file read, model kind checked, one element per type
//   init_style                        units metal, newton on, atom IDs, a full neighbor list
//   compute                           the model's graph (fastmlip::graph::AtomGraph) from the
//                                     full list by the core's GraphBuilder, the model
//                                     (evaluate(), per style), then forces, energies and virials
//                                     by the core's tally_edges from dE/d(edge vector)
//   pack/unpack_*_comm                ghost rows of the model's per-layer exchanges
//
// A style (MACE, CHGNet) supplies its settings, its model, evaluate() and what its exchanges
// move. The KOKKOS variants (pair_fastmlip_kokkos.h) run the same builder and tally on the
// KOKKOS device, over the KOKKOS package's views, and call the same evaluate().
#include <Kokkos_Core.hpp>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/atom_graph.hpp"
#include "graph/graph_builder.hpp"
#include "model_placement.h"
#include "models/feature_exchange.hpp"
#include "pair.h"

namespace fastmlip::io {
class PotentialFile;
}

namespace fastmlip::plugin {
/// error->one (a rank-local error that ends the run) whose message reaches the user. LAMMPS
/// writes an error->one message through buffered stdio on the ranks that have a screen or log
/// (rank 0) and then MPI_Abort()s, which drops what is buffered: with the output redirected to a
/// file, nothing but the MPI library's abort notice remained. This flushes the screen and the
/// log before the abort, and on a rank with neither (every rank but 0) writes the message to
/// stderr, which mpirun forwards.
[[noreturn]] void error_one(LAMMPS_NS::LAMMPS* lmp, const char* file, int line, const std::string& message);
}  // namespace fastmlip::plugin

namespace LAMMPS_NS {

class PairFastmlipBase : public Pair {
 public:
  /// `style`: the style's name in messages ("fastmlip/mace"); `kind`: the potential file's
  /// model kind it evaluates ("mace").
  PairFastmlipBase(LAMMPS* lmp, std::string style, std::string kind);
  ~PairFastmlipBase() override;

  void compute(int eflag, int vflag) override;
  void coeff(int narg, char** arg) override;
  void init_style() override;
  double init_one(int i, int j) override;
  double memory_usage() override;

  int pack_forward_comm(int n, int* list, double* buf, int pbc_flag, int* pbc) override;
  void unpack_forward_comm(int n, int first, double* buf) override;
  int pack_reverse_comm(int n, int first, double* buf) override;
  void unpack_reverse_comm(int n, int* list, double* buf) override;

  /// The model's graph in host memory: the one contract of the core (graph/atom_graph.hpp),
  /// edges j -> i with i local, grouped by i in index order, vectors x_j - x_i, species the
  /// style's species index of each atom's type. Nodes 0..nlocal-1 local, nlocal..nall-1 ghosts.
  template <class T>
  using Graph = fastmlip::graph::AtomGraph<T, Kokkos::HostSpace>;
  /// What the model returns, in its buffers (valid until the next evaluate()): the energy,
  /// per-atom energies [nlocal] and dE/d(vectors) [num_edges][3], in double or in the compute
  /// precision (exactly one of the two gradient pointers is set).
  struct Output {
    double energy = 0;
    const double* node_energy = nullptr;
    const double* gradient_d = nullptr;
    const float* gradient_f = nullptr;
  };

  /// The memory of the plugin's device model (model_placement.h): a GPU's where this plugin's
  /// Kokkos has one, else the host's. A KOKKOS LAMMPS built on the same Kokkos builds its /kk
  /// graph there.
  using DeviceMemory = fastmlip::plugin::DeviceModelSpace::memory_space;
  template <class T>
  using DeviceGraph = fastmlip::graph::AtomGraph<T, DeviceMemory>;
  /// What a model running in DeviceMemory leaves there (views into its buffers, valid until the
  /// next evaluation): the energy, per-atom energies [nlocal] and dE/d(vectors) [num_edges], in
  /// double or in the compute precision (exactly one of the two gradients is set), as Output.
  struct DeviceOutput {
    double energy = 0;
    Kokkos::View<const double*, DeviceMemory> node_energy;
    Kokkos::View<const double* [3], Kokkos::LayoutRight, DeviceMemory> gradient_d;
    Kokkos::View<const float* [3], Kokkos::LayoutRight, DeviceMemory> gradient_f;
  };
  /// The atoms' positions [nall][3] and IDs [nall] in DeviceMemory (the KOKKOS package's views),
  /// for a model that reads them besides the graph (evaluate_reads_atoms).
  struct DeviceAtoms {
    Kokkos::View<const double* [3], Kokkos::LayoutRight, DeviceMemory> x;
    Kokkos::View<const tagint*, DeviceMemory> tag;
  };

  /// The rows the current exchange moves (set by exchange_nodes, or a style's own exchange):
  /// node rows of `width` values per atom, or (CHGNet) per-atom slot rows, pass `pass`.
  struct CommRows {
    double* d = nullptr;
    float* f = nullptr;
    int width = 0;
    bool slots = false;
    int pass = 0;
  };

  /// Overwrites the ghost rows of `rows` (nall rows of `width`) with their owners' rows, or
  /// (reverse) adds them into their owners' rows and zeroes them, through LAMMPS' pair
  /// communication. Every rank calls it the same number of times with the same width.
  template <class T>
  void exchange_nodes(T* rows, int width, bool reverse);
  /// Whether a model evaluated in place (evaluate_in_place) hands its exchanges the rows where it
  /// keeps them, in DeviceMemory (exchange_in_model_memory, exchange_slots_in_model_memory),
  /// instead of host rows: the /kk styles, which move them there.
  virtual bool exchanges_in_model_memory() const { return false; }
  /// exchange_nodes for rows in DeviceMemory (where exchanges_in_model_memory()). The default is
  /// exchange_nodes itself, for a DeviceMemory the host can read.
  virtual void exchange_in_model_memory(double* rows, int width, bool reverse) {
    exchange_nodes(rows, width, reverse);
  }
  virtual void exchange_in_model_memory(float* rows, int width, bool reverse) {
    exchange_nodes(rows, width, reverse);
  }
  /// A style's exchange of slot rows (CHGNet's bond slots, CommRows::slots) in host memory; the
  /// base has no slot rows, and says so.
  virtual void exchange_slot_rows(double* rows, int width, bool reverse);
  virtual void exchange_slot_rows(float* rows, int width, bool reverse);
  /// exchange_slot_rows for rows in DeviceMemory, as exchange_in_model_memory for node rows.
  virtual void exchange_slots_in_model_memory(double* rows, int width, bool reverse) {
    exchange_slot_rows(rows, width, reverse);
  }
  virtual void exchange_slots_in_model_memory(float* rows, int width, bool reverse) {
    exchange_slot_rows(rows, width, reverse);
  }
  /// The slot rows' layout during an in-place evaluation, for exchanges in DeviceMemory: each
  /// atom j's rows start(j)..start(j + 1) (local atoms' first), moved `per_pass` rows per atom
  /// in `passes` communications (the same on every rank).
  struct SlotLayout {
    Kokkos::View<const int*, DeviceMemory> start;  // [nall + 1]
    int passes = 0, per_pass = 1;
    int n_local_slots = 0, n_slots = 0;
  };
  virtual SlotLayout slot_layout_in_model_memory() const { return {}; }

  /// On one MPI rank, where every ghost atom is a periodic image of a local atom: the local index
  /// of each ghost's atom, [nghost], found by one forward communication per compute() (the first
  /// call) and valid until the next; the models then do their per-layer exchanges themselves,
  /// where their rows are (models/image_exchange.hpp). nullptr on several ranks.
  const int* ghost_owners();

  const std::string& style_name() const { return m_style; }

 protected:
  /// Builds the model from a file of the right kind; fills m_type_species (one entry per
  /// LAMMPS type, from the symbols) and m_cutoff, or raises error->all naming the type.
  /// fastmlip::Error thrown from here becomes an error->all naming the style.
  virtual void load_model(const fastmlip::io::PotentialFile& file, const std::string& path,
                          const std::vector<std::string>& symbols) = 0;
  virtual bool has_model() const = 0;
  virtual bool single_precision() const = 0;
  /// The widest row (in doubles) any exchange moves: LAMMPS sizes its buffers from it.
  virtual int max_exchange_width() const = 0;
  /// Runs the model on a graph; rank-local model errors become error->one.
  virtual Output evaluate(const Graph<double>& edges) = 0;
  /// Whether evaluate() reads atom->x and atom->tag besides the graph (then the KOKKOS variant
  /// brings them to the host first).
  virtual bool evaluate_reads_atoms() const { return false; }
  virtual Output evaluate(const Graph<float>& edges) = 0;
  /// Whether the loaded model runs in DeviceMemory and evaluates a graph there as it is
  /// (evaluate_in_place): the /kk styles then hand it their KOKKOS graph with nothing copied, and
  /// tally from its results where they are. A host model in a host-only plugin does; so does a
  /// `device cuda` model in a GPU plugin.
  virtual bool evaluates_in_place() const { return false; }
  /// Runs the model on a graph in its own memory; rank-local model errors become error->one.
  /// Only called when evaluates_in_place().
  virtual DeviceOutput evaluate_in_place(const DeviceGraph<double>& edges, const DeviceAtoms& atoms);
  virtual DeviceOutput evaluate_in_place(const DeviceGraph<float>& edges, const DeviceAtoms& atoms);
  /// Atom j's part of an exchange buffer, packed, or unpacked (added with `add`); the number
  /// of doubles. The base moves node rows; a style with other rows overrides both.
  virtual int pack_atom(int j, double* buf) const;
  virtual int unpack_atom(int j, const double* buf, bool add);

  /// Points m_comm at `rows` (node rows of `width` values, in T) for the next exchange.
  template <class T>
  void bind_rows(T* rows, int width) {
    m_comm = CommRows{};
    if constexpr (std::is_same_v<T, double>) {
      m_comm.d = rows;
    } else {
      m_comm.f = rows;
    }
    m_comm.width = width;
  }
  /// The rank-local error for the two atoms (indices) of a graph builder's ClosePairError,
  /// named by their IDs (smaller first), closer than kMinDistance.
  [[noreturn]] void error_too_close(const fastmlip::graph::ClosePairError& close);
  /// A rank-local error (fastmlip::plugin::error_one) naming this style.
  [[noreturn]] void error_one(const char* file, int line, const std::string& message);
  /// Raises a rank-local error naming the step and the atom(s) unless the model's energy,
  /// per-atom energies and edge gradients are all finite: a NaN must stop the run, not be
  /// integrated (LAMMPS would carry on and exit 0). `edges` is the graph that was evaluated.
  template <class T>
  void check_finite(const Output& out, const Graph<T>& edges);
  /// Brings atom->tag up to date on the host before an error names atoms (KOKKOS keeps the
  /// tags on its device).
  virtual void sync_tags_to_host() {}
  /// Atoms closer than this (Angstrom) are an error, not a force: no training set holds such
  /// pairs, and a model extrapolates wildly there (the manuals document the limit).
  static constexpr double kMinDistance = 0.1;

  std::string m_style, m_kind;
  /// Where the model runs (the `device` keyword): host, or cuda (Kokkos' GPU space); what it is
  /// when the keyword is not given: host, or cuda for the /kk styles on a GPU LAMMPS.
  std::string m_device = "host", m_default_device = "host";
  std::vector<int> m_type_species;  // [ntypes + 1]
  double m_cutoff = 0.0;
  CommRows m_comm;
  /// Starts a compute(): ghost_owners() is found anew.
  void new_evaluation() { m_owners_ready = false; }

 private:
  std::vector<int> m_owners;  // ghost_owners()
  bool m_owners_ready = false, m_owners_logged = false;

  void allocate();
  template <class T>
  void compute_host(int eflag, int vflag);
  template <class T>
  fastmlip::graph::GraphBuilder<Kokkos::DefaultHostExecutionSpace, T>& host_builder();

  // The host graph, rebuilt each step in buffers the builders keep (grow-only), one per
  // precision.
  fastmlip::graph::GraphBuilder<Kokkos::DefaultHostExecutionSpace, double> m_builder_d;
  fastmlip::graph::GraphBuilder<Kokkos::DefaultHostExecutionSpace, float> m_builder_f;
};

/// The models' node-row exchange (fastmlip::models::FeatureExchange) through a pair style, and
/// the slot-row one for CHGNet's exchanges derived from it: host rows, or with `in_model_memory`
/// (a model evaluated in place, when the pair style exchanges_in_model_memory()) the rows where
/// the model keeps them.
template <class T, class Base = fastmlip::models::FeatureExchange<T>>
class PairNodeExchange : public Base {
 public:
  explicit PairNodeExchange(PairFastmlipBase* pair, bool in_model_memory = false)
      : m_pair(pair), m_in_model_memory(in_model_memory) {}
  void forward(T* rows, int width) override { exchange(rows, width, false); }
  void reverse(T* rows, int width) override { exchange(rows, width, true); }
  const int* ghost_owners() override { return m_pair->ghost_owners(); }
  bool rows_in_model_memory() const override { return m_in_model_memory; }

 protected:
  /// A slot exchange (CHGNet's) through the pair style, where the rows are.
  void exchange_slots(T* rows, int width, bool reverse) {
    if (m_in_model_memory) {
      m_pair->exchange_slots_in_model_memory(rows, width, reverse);
    } else {
      m_pair->exchange_slot_rows(rows, width, reverse);
    }
  }
  PairFastmlipBase* m_pair;

 private:
  void exchange(T* rows, int width, bool reverse) {
    if (m_in_model_memory) {
      m_pair->exchange_in_model_memory(rows, width, reverse);
    } else {
      m_pair->exchange_nodes(rows, width, reverse);
    }
  }
  bool m_in_model_memory;
};

}  // namespace LAMMPS_NS

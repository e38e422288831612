// SPDX-License-Identifier: MIT
#include "pair_fastmlip_base.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "atom.h"
#include "comm.h"
#include "core/error.hpp"
#include "error.h"
#include "force.h"
#include "graph/edge_tally.hpp"
#include "io/potential_file.hpp"
#include "kokkos_runtime.h"
#include "lammps_compat.h"
#include "memory.h"
#include "neigh_list.h"
#include "neighbor.h"
#include "update.h"
#include "utils.h"

using namespace LAMMPS_NS;

PairFastmlipBase::PairFastmlipBase(LAMMPS* lmp, std::string style, std::string kind)
    : Pair(lmp), m_style(std::move(style)), m_kind(std::move(kind)) {
  single_enable = 0;
  restartinfo = 0;  // like other many-body styles: pair_coeff names the file again after read_restart
  one_coeff = 1;
  manybody_flag = 1;
  // The virial is sum over edges of -v (x) dE/dv; with ghost forces kept (newton on) that
  // equals sum_i x_i . f_i over local and ghost atoms, which fdotr computes.
  no_virial_fdotr_compute = 0;
}

PairFastmlipBase::~PairFastmlipBase() {
  if (allocated) {
    memory->destroy(setflag);
    memory->destroy(cutsq);
  }
}

void PairFastmlipBase::allocate() {
  allocated = 1;
  const int n = atom->ntypes;
  memory->create(setflag, n + 1, n + 1, "pair:setflag");
  memory->create(cutsq, n + 1, n + 1, "pair:cutsq");
  for (int i = 1; i <= n; ++i) {
    for (int j = i; j <= n; ++j) {
      setflag[i][j] = 0;
    }
  }
}

// pair_coeff * * file.safetensors Sym1 Sym2 ... (one element symbol per LAMMPS type)
void PairFastmlipBase::coeff(int narg, char** arg) {
  if (!allocated) {
    allocate();
  }
  const int ntypes = atom->ntypes;
  if (narg != 3 + ntypes) {
    error->all(FLERR, "pair_coeff for {}: expected '* * <potential file>' and {} element symbols "
                      "(one per atom type), got {} arguments", m_style, ntypes, narg);
  }
  if (std::strcmp(arg[0], "*") != 0 || std::strcmp(arg[1], "*") != 0) {
    error->all(FLERR, "pair_coeff for {} must be 'pair_coeff * * <file> <symbols...>'", m_style);
  }
  const std::string path = arg[2];
  const std::vector<std::string> symbols(arg + 3, arg + narg);
  // Rank-local (one node may lack the GPU others have): error->one, not a collective error->all.
  const std::string start_problem = fastmlip::plugin::kokkos_start_problem();
  if (!start_problem.empty()) {
    error->one(FLERR, "pair_coeff for {}: {}", m_style, start_problem);
  }
  fastmlip::plugin::ensure_kokkos_running();
  try {
    const auto file = fastmlip::io::read_potential_file(path);
    if (!file.checksummed && comm->me == 0) {
      utils::logmesg(lmp, fmt::format("pair_coeff for {}: note: {} has no tensor checksums (written before fastmlip "
                                      "recorded them), so damage to its weights cannot be detected; "
                                      "'fastmlip-potential seal' adds them\n", m_style, path));
    }
    if (file.model_kind() != m_kind) {
      const std::string other = file.model_kind();
      const bool known = other == "mace" || other == "chgnet";
      error->all(FLERR, "pair_coeff for {}: {} holds a '{}' model, not a '{}' one{}", m_style, path, other, m_kind,
                 known ? "; use pair_style fastmlip/" + other : "");
    }
    load_model(file, path, symbols);
  } catch (const fastmlip::Error& e) {
    error->all(FLERR, "pair_coeff for {}: {}", m_style, e.what());
  }
  for (int i = 1; i <= ntypes; ++i) {
    for (int j = i; j <= ntypes; ++j) {
      setflag[i][j] = 1;
    }
  }
}

void PairFastmlipBase::init_style() {
  if (!has_model()) {
    error->all(FLERR, "pair_style {}: no potential; use 'pair_coeff * * <file> <symbols...>'", m_style);
  }
  if (std::strcmp(update->unit_style, "metal") != 0) {
    error->all(FLERR, "pair_style {} requires 'units metal' (the potential is in eV and Angstrom), not 'units {}'",
               m_style, update->unit_style);
  }
  if (force->newton_pair == 0) {
    error->all(FLERR, "pair_style {} requires 'newton on' (forces on ghost atoms are returned to their owners by "
                      "LAMMPS' reverse communication)", m_style);
  }
  if (atom->tag_enable == 0) {
    error->all(FLERR, "pair_style {} requires atom IDs (errors name atoms by them, and bonds are matched across "
                      "ranks by them)", m_style);
  }
  fastmlip::plugin::request_full_list(this, neighbor, instance_me);
  // LAMMPS sizes its exchange buffers from these at comm->init(), which follows.
  comm_forward = comm_reverse = max_exchange_width();
}

double PairFastmlipBase::init_one(int, int) { return m_cutoff; }

double PairFastmlipBase::memory_usage() {
  double bytes = Pair::memory_usage();
  bytes += m_builder_d.memory_usage() + m_builder_f.memory_usage();
  return bytes;
}

void fastmlip::plugin::error_one(LAMMPS* lmp, const char* file, int line, const std::string& message) {
  if (lmp->screen == nullptr && lmp->logfile == nullptr) {
    int me = 0;
    MPI_Comm_rank(lmp->world, &me);
    std::fprintf(stderr, "ERROR on proc %d: %s\n", me, message.c_str());
    std::fflush(stderr);
  }
  try {
    lmp->error->one(file, line, message);
  } catch (...) {
    // Built with LAMMPS_EXCEPTIONS, error->one throws and lmp's main() MPI_Abort()s without
    // flushing stdio; a library caller may catch and go on, and then the flush is harmless.
    if (lmp->screen != nullptr) {
      std::fflush(lmp->screen);
    }
    if (lmp->logfile != nullptr) {
      std::fflush(lmp->logfile);
    }
    throw;
  }
  std::abort();  // not reached: error->one returns by exception or not at all
}

void PairFastmlipBase::error_one(const char* file, int line, const std::string& message) {
  fastmlip::plugin::error_one(lmp, file, line, "pair_style " + m_style + ": " + message);
}

void PairFastmlipBase::error_too_close(const fastmlip::graph::ClosePairError& close) {
  sync_tags_to_host();
  const tagint ti = atom->tag[close.atom_i], tj = atom->tag[close.atom_j];
  const tagint a = std::min(ti, tj), b = std::max(ti, tj);
  const double rsq = close.distance_sq;
  error_one(FLERR, fmt::format("atoms {} and {} are {:.4g} Angstrom apart, closer than {} Angstrom; check the "
                               "structure (overlapping atoms, a wrong lattice constant or units)",
                               a, b, std::sqrt(rsq), kMinDistance));
}

template <class T>
void PairFastmlipBase::check_finite(const Output& out, const Graph<T>& edges) {
  // One pass over what the model returned; cheap next to the model itself.
  int bad_atom = -1, bad_edge = -1;
  for (int i = 0; i < edges.n_local && bad_atom < 0; ++i) {
    if (!std::isfinite(out.node_energy[i])) {
      bad_atom = i;
    }
  }
  const std::size_t n = 3 * static_cast<std::size_t>(edges.num_edges());
  for (std::size_t k = 0; k < n && bad_atom < 0 && bad_edge < 0; ++k) {
    const double g = out.gradient_d != nullptr ? out.gradient_d[k] : static_cast<double>(out.gradient_f[k]);
    if (!std::isfinite(g)) {
      bad_edge = static_cast<int>(k / 3);
    }
  }
  if (bad_atom < 0 && bad_edge < 0 && std::isfinite(out.energy)) {
    return;
  }
  sync_tags_to_host();
  const tagint* tag = atom->tag;
  const std::string advice =
      "; the model was given a structure it cannot evaluate (atoms nearly overlapping, an exploding "
      "trajectory: check the timestep and the last dump)" +
      std::string(single_precision() ? ", or a value overflowed float32 (try 'precision float64')" : "");
  const bigint step = update->ntimestep;
  if (bad_atom >= 0) {
    error_one(FLERR, fmt::format("step {}: the energy of atom {} is {}{}", step, tag[bad_atom],
                                 out.node_energy[bad_atom], advice));
  }
  if (bad_edge >= 0) {
    const int i = edges.center(bad_edge), j = edges.neighbor(bad_edge);
    const T v[3] = {edges.vectors(bad_edge, 0), edges.vectors(bad_edge, 1), edges.vectors(bad_edge, 2)};
    error_one(FLERR, fmt::format("step {}: the force between atoms {} and {} ({:.4g} Angstrom apart) is not finite{}",
                                 step, tag[i], tag[j], std::sqrt(double(v[0]) * v[0] + double(v[1]) * v[1] +
                                                                  double(v[2]) * v[2]), advice));
  }
  error_one(FLERR, fmt::format("step {}: the energy is {}{}", step, out.energy, advice));
}

PairFastmlipBase::DeviceOutput PairFastmlipBase::evaluate_in_place(const DeviceGraph<double>&,
                                                                   const DeviceAtoms&) {
  error_one(FLERR, "this model cannot evaluate a graph in its own memory (evaluates_in_place() is false)");
}
PairFastmlipBase::DeviceOutput PairFastmlipBase::evaluate_in_place(const DeviceGraph<float>&,
                                                                   const DeviceAtoms&) {
  error_one(FLERR, "this model cannot evaluate a graph in its own memory (evaluates_in_place() is false)");
}

const int* PairFastmlipBase::ghost_owners() {
  if (comm->nprocs != 1) {
    return nullptr;
  }
  if (!m_owners_ready) {
    // Each local atom's index, copied to its images by the forward communication the model's
    // exchanges would use: then ghost g's value is its owner's index (an image of an image gets
    // it through the swap that made the first one).
    const int nlocal = atom->nlocal, nall = nlocal + atom->nghost;
    std::vector<double> index(nall, -1.0);
    for (int i = 0; i < nlocal; ++i) {
      index[i] = i;
    }
    exchange_nodes(index.data(), 1, false);
    m_owners.resize(nall - nlocal);
    for (int g = 0; g < nall - nlocal; ++g) {
      m_owners[g] = static_cast<int>(index[nlocal + g]);
    }
    m_owners_ready = true;
    if (!m_owners_logged) {
      utils::logmesg(lmp,
                     "pair_style {}: one MPI rank holds the whole system, so its ghost atoms are periodic "
                     "images: the model exchanges their rows itself, where they are, with no LAMMPS "
                     "communication per layer\n",
                     m_style);
      m_owners_logged = true;
    }
  }
  return m_owners.data();
}

template void PairFastmlipBase::check_finite<double>(const Output&, const Graph<double>&);
template void PairFastmlipBase::check_finite<float>(const Output&, const Graph<float>&);

void PairFastmlipBase::compute(int eflag, int vflag) {
  if (single_precision()) {
    compute_host<float>(eflag, vflag);
  } else {
    compute_host<double>(eflag, vflag);
  }
}

template <class T>
fastmlip::graph::GraphBuilder<Kokkos::DefaultHostExecutionSpace, T>& PairFastmlipBase::host_builder() {
  if constexpr (std::is_same_v<T, double>) {
    return m_builder_d;
  } else {
    return m_builder_f;
  }
}

namespace {

using HostExec = Kokkos::DefaultHostExecutionSpace;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
template <int N>
using HostRows = Kokkos::View<double* [N], Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged>;

/// LAMMPS' host full neighbor list, as graph::GraphBuilder reads a list.
struct HostNeighbors {
  int inum = 0;
  const int* ilist = nullptr;
  const int* numneigh = nullptr;
  int** firstneigh = nullptr;
  KOKKOS_INLINE_FUNCTION int atom(int ii) const { return ilist[ii]; }
  KOKKOS_INLINE_FUNCTION int count(int i) const { return numneigh[i]; }
  KOKKOS_INLINE_FUNCTION int neighbor(int i, int jj) const { return firstneigh[i][jj] & NEIGHMASK; }
};

/// A LAMMPS per-atom array (x, f, vatom: one contiguous block behind the row pointers) as a view
/// of its first `n` rows.
template <int N>
HostRows<N> rows_of(double** a, int n) {
  return HostRows<N>(n > 0 ? a[0] : nullptr, n);
}

}  // namespace

template <class T>
void PairFastmlipBase::compute_host(int eflag, int vflag) {
  ev_init(eflag, vflag);
  new_evaluation();
  const int nlocal = atom->nlocal;
  const int nall = nlocal + atom->nghost;

  const HostNeighbors neighbors{list->inum, list->ilist, list->numneigh, list->firstneigh};
  const Kokkos::View<const int*, Kokkos::HostSpace, Unmanaged> type(atom->type, nall);
  const Kokkos::View<const int*, Kokkos::HostSpace, Unmanaged> type_species(m_type_species.data(),
                                                                            m_type_species.size());
  Graph<T> graph;
  try {
    graph = host_builder<T>().build(rows_of<3>(atom->x, nall), neighbors, type, type_species, nlocal,
                                    nall, m_cutoff, kMinDistance);
  } catch (const fastmlip::graph::ClosePairError& close) {
    error_too_close(close);
  }
  const Output out = evaluate(graph);
  check_finite(out, graph);

  if (eflag_global) {
    eng_vdwl += out.energy;  // the model's own double-precision sum of the per-atom energies
  }
  if (eflag_atom) {
    fastmlip::graph::tally_node_energies<HostExec>(
        nlocal, Kokkos::View<const double*, Kokkos::HostSpace, Unmanaged>(out.node_energy, nlocal),
        Kokkos::View<double*, Kokkos::HostSpace, Unmanaged>(eatom, nlocal));
  }
  const bool explicit_virial = vflag_global && !vflag_fdotr;
  const auto vatom_rows = vflag_atom ? rows_of<6>(vatom, nall) : HostRows<6>();
  const int E = graph.num_edges();
  fastmlip::graph::Virial6 w;
  if (out.gradient_d != nullptr) {
    w = fastmlip::graph::tally_edges<HostExec, T, double>(
        graph, Kokkos::View<const double* [3], Kokkos::LayoutRight, Kokkos::HostSpace>(out.gradient_d, E),
        rows_of<3>(atom->f, nall), vatom_rows, explicit_virial);
  } else {
    w = fastmlip::graph::tally_edges<HostExec, T, float>(
        graph, Kokkos::View<const float* [3], Kokkos::LayoutRight, Kokkos::HostSpace>(out.gradient_f, E),
        rows_of<3>(atom->f, nall), vatom_rows, explicit_virial);
  }
  if (explicit_virial) {
    for (int k = 0; k < 6; ++k) {
      virial[k] += w.v[k];
    }
  }
  if (vflag_fdotr) {
    virial_fdotr_compute();
  }
}

template <class T>
void PairFastmlipBase::exchange_nodes(T* rows, int width, bool reverse) {
  bind_rows(rows, width);
  if (reverse) {
    comm_reverse = width;
    fastmlip::plugin::reverse_comm(comm, this);
    const int nlocal = atom->nlocal, nall = nlocal + atom->nghost;
    std::fill(rows + static_cast<std::size_t>(nlocal) * width, rows + static_cast<std::size_t>(nall) * width, T(0));
  } else {
    comm_forward = width;
    fastmlip::plugin::forward_comm(comm, this);
  }
  m_comm = CommRows{};
}

template void PairFastmlipBase::exchange_nodes<double>(double*, int, bool);
template void PairFastmlipBase::exchange_nodes<float>(float*, int, bool);

void PairFastmlipBase::exchange_slot_rows(double*, int, bool) {
  error->one(FLERR, "pair_style {}: internal error: a slot-row exchange, but this style has no slot rows",
             m_style);
}
void PairFastmlipBase::exchange_slot_rows(float*, int, bool) {
  error->one(FLERR, "pair_style {}: internal error: a slot-row exchange, but this style has no slot rows",
             m_style);
}

int PairFastmlipBase::pack_atom(int j, double* buf) const {
  const int w = m_comm.width;
  const std::size_t row = static_cast<std::size_t>(j) * w;
  for (int k = 0; k < w; ++k) {
    buf[k] = m_comm.d ? m_comm.d[row + k] : static_cast<double>(m_comm.f[row + k]);
  }
  return w;
}

int PairFastmlipBase::unpack_atom(int j, const double* buf, bool add) {
  const int w = m_comm.width;
  const std::size_t row = static_cast<std::size_t>(j) * w;
  for (int k = 0; k < w; ++k) {
    if (m_comm.d) {
      m_comm.d[row + k] = add ? m_comm.d[row + k] + buf[k] : buf[k];
    } else {
      m_comm.f[row + k] = add ? m_comm.f[row + k] + static_cast<float>(buf[k]) : static_cast<float>(buf[k]);
    }
  }
  return w;
}

// Forward and reverse communication move the same per-atom layout, so pack_atom/unpack_atom
// serve all four hooks.
int PairFastmlipBase::pack_forward_comm(int n, int* list, double* buf, int, int*) {
  int m = 0;
  for (int i = 0; i < n; ++i) m += pack_atom(list[i], buf + m);
  return m;
}

void PairFastmlipBase::unpack_forward_comm(int n, int first, double* buf) {
  int m = 0;
  for (int j = first; j < first + n; ++j) m += unpack_atom(j, buf + m, false);
}

int PairFastmlipBase::pack_reverse_comm(int n, int first, double* buf) {
  int m = 0;
  for (int j = first; j < first + n; ++j) m += pack_atom(j, buf + m);
  return m;
}

void PairFastmlipBase::unpack_reverse_comm(int n, int* list, double* buf) {
  int m = 0;
  for (int i = 0; i < n; ++i) m += unpack_atom(list[i], buf + m, true);
}

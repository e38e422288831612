// SPDX-License-Identifier: MIT
#include "pair_fastmlip_chgnet.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "atom.h"
#include "comm.h"
#include "core/elements.hpp"
#include "core/error.hpp"
#include "error.h"
#include "force.h"
#include "io/potential_file.hpp"
#include "kokkos_runtime.h"
#include "lammps_compat.h"
#include "memory.h"
#include "models/chgnet/chgnet_model.hpp"
#include "neigh_list.h"
#include "neighbor.h"
#include "update.h"
#include "utils.h"

using namespace LAMMPS_NS;
using fastmlip::models::ChgnetExchange;
using fastmlip::models::ChgnetGraph;
using fastmlip::models::ChgnetModel;
using fastmlip::models::ChgnetResult;

namespace LAMMPS_NS {

/// The model's exchanges, through the pair style's LAMMPS communication.
template <class T>
class ChgnetLammpsExchange final : public ChgnetExchange<T> {
 public:
  explicit ChgnetLammpsExchange(PairFastmlipChgnet* pair) : m_pair(pair) {}
  void forward(T* rows, int width) override { m_pair->exchange_nodes(rows, width, false); }
  void reverse(T* rows, int width) override { m_pair->exchange_nodes(rows, width, true); }
  void forward_slots(T* rows, int width) override { m_pair->exchange_slots(rows, width, false); }
  void reverse_slots(T* rows, int width) override { m_pair->exchange_slots(rows, width, true); }

 private:
  PairFastmlipChgnet* m_pair;
};

}  // namespace LAMMPS_NS

struct PairFastmlipChgnet::Backend {
  std::unique_ptr<ChgnetModel<double>> model_d;
  std::unique_ptr<ChgnetModel<float>> model_f;
  ChgnetResult result;

  template <class T>
  ChgnetModel<T>& model() {
    if constexpr (std::is_same_v<T, double>) {
      return *model_d;
    } else {
      return *model_f;
    }
  }
};

PairFastmlipChgnet::PairFastmlipChgnet(LAMMPS* lmp) : Pair(lmp) {
  single_enable = 0;
  restartinfo = 0;  // like other many-body styles: pair_coeff names the file again after read_restart
  one_coeff = 1;
  manybody_flag = 1;
  // The virial is sum over edges of -v (x) dE/dv; with ghost forces kept (newton on) that
  // equals sum_i x_i . f_i over local and ghost atoms, which fdotr computes.
  no_virial_fdotr_compute = 0;
}

PairFastmlipChgnet::~PairFastmlipChgnet() {
  if (allocated) {
    memory->destroy(setflag);
    memory->destroy(cutsq);
  }
}

void PairFastmlipChgnet::allocate() {
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

// pair_style fastmlip/chgnet [precision float32|float64]
void PairFastmlipChgnet::settings(int narg, char** arg) {
  static const char* usage = "usage: pair_style fastmlip/chgnet [precision float32|float64]";
  m_precision = "float32";
  for (int i = 0; i < narg; i += 2) {
    const std::string key = arg[i];
    if (i + 1 >= narg) {
      error->all(FLERR, "pair_style fastmlip/chgnet: keyword '{}' needs a value; {}", key, usage);
    }
    const std::string value = arg[i + 1];
    if (key == "precision") {
      if (value != "float64" && value != "float32") {
        error->all(FLERR, "pair_style fastmlip/chgnet: precision must be float32 or float64, not '{}'", value);
      }
      m_precision = value;
    } else {
      error->all(FLERR, "pair_style fastmlip/chgnet: unknown keyword '{}'; {}", key, usage);
    }
  }
}

// pair_coeff * * file.safetensors Sym1 Sym2 ... (one element symbol per LAMMPS type)
void PairFastmlipChgnet::coeff(int narg, char** arg) {
  if (!allocated) {
    allocate();
  }
  const int ntypes = atom->ntypes;
  if (narg != 3 + ntypes) {
    error->all(FLERR, "pair_coeff for fastmlip/chgnet: expected '* * <potential file>' and {} element symbols "
                      "(one per atom type), got {} arguments", ntypes, narg);
  }
  if (std::strcmp(arg[0], "*") != 0 || std::strcmp(arg[1], "*") != 0) {
    error->all(FLERR, "pair_coeff for fastmlip/chgnet must be 'pair_coeff * * <file> <symbols...>'");
  }
  const std::string path = arg[2];
  fastmlip::plugin::ensure_kokkos_running();
  try {
    const auto file = fastmlip::io::read_potential_file(path);
    if (file.model_kind() != "chgnet") {
      error->all(FLERR, "pair_coeff for fastmlip/chgnet: {} holds a '{}' model, not a CHGNet one{}", path,
                 file.model_kind(), file.model_kind() == "mace" ? "; use pair_style fastmlip/mace" : "");
    }
    m_backend = std::make_unique<Backend>();
    if (single_precision()) {
      m_backend->model_f = std::make_unique<ChgnetModel<float>>(file);
    } else {
      m_backend->model_d = std::make_unique<ChgnetModel<double>>(file);
    }
  } catch (const fastmlip::Error& e) {
    error->all(FLERR, "pair_coeff for fastmlip/chgnet: {}", e.what());
  }
  const auto& model_problem = [&](int z) {
    return m_backend->model_d ? m_backend->model_d->species_problem(z) : m_backend->model_f->species_problem(z);
  };
  m_type_z.assign(ntypes + 1, 0);
  for (int t = 1; t <= ntypes; ++t) {
    const std::string symbol = arg[2 + t];
    const int z = fastmlip::atomic_number(symbol);
    if (z == 0) {
      error->all(FLERR, "pair_coeff for fastmlip/chgnet: atom type {} is '{}', which is not an element symbol "
                        "(they are case-sensitive: 'Mn', not 'MN')", t, symbol);
    }
    const std::string problem = model_problem(z);
    if (!problem.empty()) {
      error->all(FLERR, "pair_coeff for fastmlip/chgnet: atom type {} ({}): the potential {} cannot evaluate it: {}",
                 t, symbol, path, problem);
    }
    m_type_z[t] = z;
  }
  m_cutoff = m_backend->model_d ? m_backend->model_d->cutoff() : m_backend->model_f->cutoff();
  m_bond_cutoff = m_backend->model_d ? m_backend->model_d->bond_cutoff() : m_backend->model_f->bond_cutoff();
  for (int i = 1; i <= ntypes; ++i) {
    for (int j = i; j <= ntypes; ++j) {
      setflag[i][j] = 1;
    }
  }
}

void PairFastmlipChgnet::init_style() {
  if (!m_backend) {
    error->all(FLERR, "pair_style fastmlip/chgnet: no potential; use 'pair_coeff * * <file> <symbols...>'");
  }
  if (std::strcmp(update->unit_style, "metal") != 0) {
    error->all(FLERR, "pair_style fastmlip/chgnet requires 'units metal' (the potential is in eV and Angstrom), "
                      "not 'units {}'", update->unit_style);
  }
  if (force->newton_pair == 0) {
    error->all(FLERR, "pair_style fastmlip/chgnet requires 'newton on' (forces on ghost atoms are returned to "
                      "their owners by LAMMPS' reverse communication)");
  }
  if (atom->tag_enable == 0) {
    error->all(FLERR, "pair_style fastmlip/chgnet requires atom IDs (bonds are matched across ranks by them)");
  }
  fastmlip::plugin::request_full_list(this, neighbor, instance_me);
  // Buffers of the exchanges are sized from these at comm->init(), which follows: the widest of
  // an atom-feature row, a pass of bond slot rows and a pass of slot metadata, in doubles.
  const int fa = m_backend->model_d ? m_backend->model_d->atom_width() : m_backend->model_f->atom_width();
  const int fb = m_backend->model_d ? m_backend->model_d->bond_width() : m_backend->model_f->bond_width();
  comm_forward = comm_reverse = std::max({fa, kSlotsPerPass * fb, kSlotsPerPass * 4});
}

double PairFastmlipChgnet::init_one(int, int) { return m_cutoff; }

double PairFastmlipChgnet::memory_usage() {
  double bytes = Pair::memory_usage();
  bytes += static_cast<double>(m_center.capacity() + m_neighbor.capacity() + m_species.capacity() +
                               m_reverse_slot.capacity() + m_slot_start.capacity()) * sizeof(int);
  bytes += static_cast<double>(m_vectors_d.capacity() + m_meta.capacity() + m_magmom.capacity()) * sizeof(double) +
           static_cast<double>(m_vectors_f.capacity()) * sizeof(float);
  return bytes;
}

void PairFastmlipChgnet::compute(int eflag, int vflag) {
  if (single_precision()) {
    compute_with<float>(eflag, vflag);
  } else {
    compute_with<double>(eflag, vflag);
  }
}

template <class T>
void PairFastmlipChgnet::compute_with(int eflag, int vflag) {
  ev_init(eflag, vflag);
  double** x = atom->x;
  double** f = atom->f;
  const int* type = atom->type;
  const tagint* tag = atom->tag;
  const int nlocal = atom->nlocal;
  const int nall = nlocal + atom->nghost;
  const double cutsq_model = m_cutoff * m_cutoff;

  m_species.resize(nall);
  for (int i = 0; i < nall; ++i) {
    m_species[i] = m_type_z[type[i]] - 1;
  }
  // Edges i -> j for local i, grouped by centre in index order (the model's CSR layout),
  // whatever order the neighbor list holds its atoms in.
  const int inum = list->inum;
  const int* ilist = list->ilist;
  const int* numneigh = list->numneigh;
  int** firstneigh = list->firstneigh;
  m_edge_start.assign(nlocal + 1, 0);
  for (int ii = 0; ii < inum; ++ii) {
    const int i = ilist[ii];
    int count = 0;
    for (int jj = 0; jj < numneigh[i]; ++jj) {
      const int j = firstneigh[i][jj] & NEIGHMASK;
      const double dx = x[j][0] - x[i][0], dy = x[j][1] - x[i][1], dz = x[j][2] - x[i][2];
      const double rsq = dx * dx + dy * dy + dz * dz;
      if (rsq < kMinDistance * kMinDistance) {
        error->one(FLERR, "pair_style fastmlip/chgnet: atoms {} and {} are {:.4g} Angstrom apart, closer than {} "
                          "Angstrom; check the structure (overlapping atoms, a wrong lattice constant or units)",
                   tag[i], tag[j], std::sqrt(rsq), kMinDistance);
      }
      count += rsq < cutsq_model ? 1 : 0;
    }
    m_edge_start[i + 1] = count;
  }
  for (int i = 0; i < nlocal; ++i) {
    m_edge_start[i + 1] += m_edge_start[i];
  }
  const int num_edges = m_edge_start[nlocal];
  m_center.resize(num_edges);
  m_neighbor.resize(num_edges);
  std::vector<T>& vectors = [&]() -> std::vector<T>& {
    if constexpr (std::is_same_v<T, double>) {
      return m_vectors_d;
    } else {
      return m_vectors_f;
    }
  }();
  vectors.resize(3 * static_cast<std::size_t>(num_edges));
  // Short edges (bond graph) are decided here, in double; -2 marks one until its reverse slot
  // is known.
  m_reverse_slot.assign(num_edges, -1);
  const double bond_sq = m_bond_cutoff * m_bond_cutoff;
  for (int ii = 0; ii < inum; ++ii) {
    const int i = ilist[ii];
    int e = m_edge_start[i];
    for (int jj = 0; jj < numneigh[i]; ++jj) {
      const int j = firstneigh[i][jj] & NEIGHMASK;
      const double dx = x[j][0] - x[i][0], dy = x[j][1] - x[i][1], dz = x[j][2] - x[i][2];
      const double rsq = dx * dx + dy * dy + dz * dz;
      if (rsq >= cutsq_model) {
        continue;
      }
      m_center[e] = i;
      m_neighbor[e] = j;
      vectors[3 * e] = static_cast<T>(dx);
      vectors[3 * e + 1] = static_cast<T>(dy);
      vectors[3 * e + 2] = static_cast<T>(dz);
      if (rsq < bond_sq) {
        m_reverse_slot[e] = -2;
      }
      ++e;
    }
  }
  build_slots(nlocal, nall);

  ChgnetGraph<T> graph;
  graph.n_local = nlocal;
  graph.n_total = nall;
  graph.species = m_species.data();
  graph.num_edges = num_edges;
  graph.center = m_center.data();
  graph.neighbor = m_neighbor.data();
  graph.vectors = vectors.data();
  graph.slot_start = m_slot_start.data();
  graph.reverse_slot = m_reverse_slot.data();
  ChgnetLammpsExchange<T> exchange(this);
  auto& result = m_backend->result;
  try {
    m_backend->model<T>().compute(graph, &exchange, true, result);
  } catch (const fastmlip::Error& e) {
    m_comm = CommRows{};
    error->one(FLERR, "pair_style fastmlip/chgnet: {}", e.what());
  }
  m_comm = CommRows{};
  m_magmom = result.magmom;
  m_magmom_step = update->ntimestep;

  if (eflag_global) {
    eng_vdwl += result.energy;
  }
  if (eflag_atom) {
    for (int i = 0; i < nlocal; ++i) {
      eatom[i] += result.site_energy[i];
    }
  }
  // v = r_j - r_i: F_i = -dE/dr_i = +dE/dv, F_j = -dE/dv. Each edge's virial -v (x) dE/dv is
  // split evenly between its two atoms for the per-atom virial.
  const bool explicit_virial = vflag_global && !vflag_fdotr;
  for (int e = 0; e < num_edges; ++e) {
    const int i = m_center[e], j = m_neighbor[e];
    const double* g = result.edge_gradient.data() + 3 * static_cast<std::size_t>(e);
    for (int k = 0; k < 3; ++k) {
      f[i][k] += g[k];
      f[j][k] -= g[k];
    }
    if (explicit_virial || vflag_atom) {
      const double v[3] = {static_cast<double>(vectors[3 * e]), static_cast<double>(vectors[3 * e + 1]),
                           static_cast<double>(vectors[3 * e + 2])};
      const double w[6] = {-v[0] * g[0], -v[1] * g[1], -v[2] * g[2], -v[0] * g[1], -v[0] * g[2], -v[1] * g[2]};
      for (int k = 0; k < 6; ++k) {
        if (explicit_virial) {
          virial[k] += w[k];
        }
        if (vflag_atom) {
          vatom[i][k] += 0.5 * w[k];
          vatom[j][k] += 0.5 * w[k];
        }
      }
    }
  }
  if (vflag_fdotr) {
    virial_fdotr_compute();
  }
}

void PairFastmlipChgnet::build_slots(int nlocal, int nall) {
  double** x = atom->x;
  const tagint* tag = atom->tag;
  const int num_edges = static_cast<int>(m_center.size());
  // 1. How many slots each atom has: its short edges, counted by the owner and sent to ghosts.
  std::vector<double> count(nall, 0.0);
  for (int e = 0; e < num_edges; ++e) {
    if (m_reverse_slot[e] == -2) {
      count[m_center[e]] += 1.0;
    }
  }
  exchange_nodes(count.data(), 1, false);
  m_slot_start.assign(nall + 1, 0);
  int local_max = 0;
  for (int i = 0; i < nall; ++i) {
    const int c = static_cast<int>(count[i]);
    m_slot_start[i + 1] = m_slot_start[i] + c;
    if (i < nlocal) {
      local_max = std::max(local_max, c);
    }
  }
  int global_max = 0;
  MPI_Allreduce(&local_max, &global_max, 1, MPI_INT, MPI_MAX, world);
  m_passes = (global_max + kSlotsPerPass - 1) / kSlotsPerPass;

  // 2. Each slot's identity: the far atom's ID and the bond vector, so that a bond's two ends
  // can find each other on any rank. Ghosts receive their owner's list.
  const int n_slots = m_slot_start[nall];
  m_meta.assign(4 * static_cast<std::size_t>(n_slots), 0.0);
  std::vector<int> local_slot(num_edges, -1);
  {
    int s = 0;
    for (int e = 0; e < num_edges; ++e) {
      if (m_reverse_slot[e] != -2) {
        continue;
      }
      local_slot[e] = s;
      const int j = m_neighbor[e], i = m_center[e];
      double* m = m_meta.data() + 4 * static_cast<std::size_t>(s);
      m[0] = static_cast<double>(tag[j]);
      m[1] = x[j][0] - x[i][0];
      m[2] = x[j][1] - x[i][1];
      m[3] = x[j][2] - x[i][2];
      ++s;
    }
  }
  exchange_slots(m_meta.data(), 4, false);

  // 3. The reverse of short edge i -> j is the slot of atom j whose far atom has i's ID and
  // whose vector is the opposite of this one (several images of one atom can be in reach of a
  // small cell; the vector tells them apart).
  for (int e = 0; e < num_edges; ++e) {
    if (local_slot[e] < 0) {
      continue;
    }
    const int i = m_center[e], j = m_neighbor[e];
    const double v[3] = {x[j][0] - x[i][0], x[j][1] - x[i][1], x[j][2] - x[i][2]};
    int best = -1;
    double best_dev = 1e-4;  // A; positions of images differ by rounding only
    for (int s = m_slot_start[j]; s < m_slot_start[j + 1]; ++s) {
      const double* m = m_meta.data() + 4 * static_cast<std::size_t>(s);
      if (static_cast<tagint>(m[0]) != tag[i]) {
        continue;
      }
      const double dev = std::abs(m[1] + v[0]) + std::abs(m[2] + v[1]) + std::abs(m[3] + v[2]);
      if (dev < best_dev) {
        best_dev = dev;
        best = s;
      }
    }
    if (best < 0) {
      error->one(FLERR, "pair_style fastmlip/chgnet: the bond between atoms {} and {} ({:.4g} A) has no partner on "
                        "the owner of atom {}; the ghost cutoff must cover the {} A atom-graph cutoff (check "
                        "comm_modify cutoff)", tag[i], tag[j],
                 std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]), tag[j], m_cutoff);
    }
    m_reverse_slot[e] = best;
  }
}

template <class T>
void PairFastmlipChgnet::exchange_nodes(T* rows, int width, bool reverse) {
  m_comm = CommRows{};
  if constexpr (std::is_same_v<T, double>) {
    m_comm.d = rows;
  } else {
    m_comm.f = rows;
  }
  m_comm.width = width;
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

template <class T>
void PairFastmlipChgnet::exchange_slots(T* rows, int width, bool reverse) {
  for (int p = 0; p < m_passes; ++p) {
    m_comm = CommRows{};
    if constexpr (std::is_same_v<T, double>) {
      m_comm.d = rows;
    } else {
      m_comm.f = rows;
    }
    m_comm.width = width;
    m_comm.slots = true;
    m_comm.pass = p;
    if (reverse) {
      comm_reverse = kSlotsPerPass * width;
      fastmlip::plugin::reverse_comm(comm, this);
    } else {
      comm_forward = kSlotsPerPass * width;
      fastmlip::plugin::forward_comm(comm, this);
    }
  }
  if (reverse) {
    const int nlocal = atom->nlocal, nall = nlocal + atom->nghost;
    std::fill(rows + static_cast<std::size_t>(m_slot_start[nlocal]) * width,
              rows + static_cast<std::size_t>(m_slot_start[nall]) * width, T(0));
  }
  m_comm = CommRows{};
}

namespace {

/// Value `index` of the bound rows, read as double.
double read_value(const PairFastmlipChgnet::CommRows& c, std::size_t index) {
  return c.d ? c.d[index] : static_cast<double>(c.f[index]);
}
void write_value(const PairFastmlipChgnet::CommRows& c, std::size_t index, double value, bool add) {
  if (c.d) {
    c.d[index] = add ? c.d[index] + value : value;
  } else {
    c.f[index] = add ? c.f[index] + static_cast<float>(value) : static_cast<float>(value);
  }
}

}  // namespace

// Node rows: `width` values of atom j. Slot rows: kSlotsPerPass rows of `width` values, slots
// pass * kSlotsPerPass.. of atom j; slots beyond the atom's count travel as zeros. Forward and
// reverse communication move the same layout, so one pair of helpers serves all four hooks.
int PairFastmlipChgnet::pack_atom(int j, double* buf) const {
  const int w = m_comm.width;
  int m = 0;
  if (!m_comm.slots) {
    for (int k = 0; k < w; ++k) buf[m++] = read_value(m_comm, static_cast<std::size_t>(j) * w + k);
    return m;
  }
  const int start = m_slot_start[j], cnt = m_slot_start[j + 1] - start;
  for (int q = 0; q < kSlotsPerPass; ++q) {
    const int slot = m_comm.pass * kSlotsPerPass + q;
    for (int k = 0; k < w; ++k) {
      buf[m++] = slot < cnt ? read_value(m_comm, static_cast<std::size_t>(start + slot) * w + k) : 0.0;
    }
  }
  return m;
}

int PairFastmlipChgnet::unpack_atom(int j, const double* buf, bool add) {
  const int w = m_comm.width;
  int m = 0;
  if (!m_comm.slots) {
    for (int k = 0; k < w; ++k) write_value(m_comm, static_cast<std::size_t>(j) * w + k, buf[m++], add);
    return m;
  }
  const int start = m_slot_start[j], cnt = m_slot_start[j + 1] - start;
  for (int q = 0; q < kSlotsPerPass; ++q) {
    const int slot = m_comm.pass * kSlotsPerPass + q;
    for (int k = 0; k < w; ++k) {
      const double value = buf[m++];
      if (slot < cnt) write_value(m_comm, static_cast<std::size_t>(start + slot) * w + k, value, add);
    }
  }
  return m;
}

int PairFastmlipChgnet::pack_forward_comm(int n, int* list, double* buf, int, int*) {
  int m = 0;
  for (int i = 0; i < n; ++i) m += pack_atom(list[i], buf + m);
  return m;
}

void PairFastmlipChgnet::unpack_forward_comm(int n, int first, double* buf) {
  int m = 0;
  for (int j = first; j < first + n; ++j) m += unpack_atom(j, buf + m, false);
}

int PairFastmlipChgnet::pack_reverse_comm(int n, int first, double* buf) {
  int m = 0;
  for (int j = first; j < first + n; ++j) m += pack_atom(j, buf + m);
  return m;
}

void PairFastmlipChgnet::unpack_reverse_comm(int n, int* list, double* buf) {
  int m = 0;
  for (int i = 0; i < n; ++i) m += unpack_atom(list[i], buf + m, true);
}

template void PairFastmlipChgnet::compute_with<double>(int, int);
template void PairFastmlipChgnet::compute_with<float>(int, int);

// SPDX-License-Identifier: MIT
#include "pair_fastmlip_chgnet.h"

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>

#include "atom.h"
#include "comm.h"
#include "core/elements.hpp"
#include "core/error.hpp"
#include "error.h"
#include "io/potential_file.hpp"
#include "lammps_compat.h"
#include "model_placement.h"
#include "models/chgnet/chgnet_model.hpp"
#include "update.h"
#include "utils.h"

using namespace LAMMPS_NS;
using fastmlip::models::ChgnetExchange;
using fastmlip::models::ChgnetGraph;
using fastmlip::models::ChgnetModel;
using fastmlip::models::ChgnetResult;

namespace {

/// The model's exchanges, through the pair style's LAMMPS communication: node rows as every
/// style moves them, slot rows as this one does.
template <class T>
class ChgnetLammpsExchange final : public PairNodeExchange<T, ChgnetExchange<T>> {
 public:
  explicit ChgnetLammpsExchange(PairFastmlipChgnet* pair) : PairNodeExchange<T, ChgnetExchange<T>>(pair), m_chgnet(pair) {}
  void forward_slots(T* rows, int width) override { m_chgnet->exchange_slots(rows, width, false); }
  void reverse_slots(T* rows, int width) override { m_chgnet->exchange_slots(rows, width, true); }

 private:
  PairFastmlipChgnet* m_chgnet;
};

/// One precision's model where it runs (model_placement.h), with the graph's copy (slots
/// included) in its memory.
template <class Space, class T>
struct Placed {
  std::unique_ptr<ChgnetModel<Space, T>> model;
  fastmlip::models::ChgnetGraphMirror<T, typename Space::memory_space> mirror;
};

}  // namespace

struct PairFastmlipChgnet::Backend : fastmlip::plugin::Placements<Placed> {
  ChgnetResult result;

  template <class T>
  void compute(const ChgnetGraph<T>& graph, ChgnetExchange<T>* exchange) {
    with_loaded<T>(
        [&](auto& placed) { placed.model->compute(placed.mirror.of(graph), exchange, true, result); });
  }
};

PairFastmlipChgnet::PairFastmlipChgnet(LAMMPS* lmp) : PairFastmlipBase(lmp, "fastmlip/chgnet", "chgnet") {}

PairFastmlipChgnet::~PairFastmlipChgnet() = default;

// pair_style fastmlip/chgnet [precision float32|float64] [device host|cuda]
void PairFastmlipChgnet::settings(int narg, char** arg) {
  static const char* usage =
      "usage: pair_style fastmlip/chgnet [precision float32|float64] [device host|cuda]";
  m_precision = "float32";
  m_device = m_default_device;
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
    } else if (key == "device") {
      const std::string problem = fastmlip::plugin::device_problem("fastmlip/chgnet", value);
      if (!problem.empty()) {
        error->all(FLERR, problem);
      }
      m_device = value;
    } else {
      error->all(FLERR, "pair_style fastmlip/chgnet: unknown keyword '{}'; {}", key, usage);
    }
  }
}

// pair_coeff * * file.safetensors Sym1 Sym2 ...: the file and symbols are checked by the base.
void PairFastmlipChgnet::load_model(const fastmlip::io::PotentialFile& file, const std::string& path,
                                    const std::vector<std::string>& symbols) {
  m_backend = std::make_unique<Backend>();
  m_backend->load(m_device, single_precision(), [&](auto& placed) {
    using Model = typename std::decay_t<decltype(placed.model)>::element_type;
    placed.model = std::make_unique<Model>(file);
  });
  if (comm->me == 0 && m_device == "cuda") {
    utils::logmesg(lmp, "fastmlip/chgnet: model on {} ({})\n", Kokkos::DefaultExecutionSpace::name(),
                   m_precision);
  }
  const auto& model_problem = [&](int z) {
    return m_backend->visit([&](const auto& m) { return m.species_problem(z); });
  };
  // The model's species index is the atomic number - 1 (its embedding row).
  const int ntypes = static_cast<int>(symbols.size());
  m_type_species.assign(ntypes + 1, -1);
  for (int t = 1; t <= ntypes; ++t) {
    const std::string& symbol = symbols[t - 1];
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
    m_type_species[t] = z - 1;
  }
  m_cutoff = m_backend->visit([](const auto& m) { return m.cutoff(); });
  m_bond_cutoff = m_backend->visit([](const auto& m) { return m.bond_cutoff(); });
}

int PairFastmlipChgnet::max_exchange_width() const {
  // The widest of an atom-feature row, a pass of bond slot rows and a pass of slot metadata.
  const int fa = m_backend->visit([](const auto& m) { return m.atom_width(); });
  const int fb = m_backend->visit([](const auto& m) { return m.bond_width(); });
  return std::max({fa, kSlotsPerPass * fb, kSlotsPerPass * 4});
}

double PairFastmlipChgnet::memory_usage() {
  double bytes = PairFastmlipBase::memory_usage();
  bytes += static_cast<double>(m_reverse_slot.capacity() + m_slot_start.capacity()) * sizeof(int);
  bytes += static_cast<double>(m_meta.capacity() + m_magmom.capacity()) * sizeof(double);
  return bytes;
}

PairFastmlipBase::Output PairFastmlipChgnet::evaluate(const Graph<double>& edges) { return evaluate_with(edges); }
PairFastmlipBase::Output PairFastmlipChgnet::evaluate(const Graph<float>& edges) { return evaluate_with(edges); }

template <class T>
PairFastmlipBase::Output PairFastmlipChgnet::evaluate_with(const Graph<T>& edges) {
  // Short edges (bond graph) are decided here, in double from the positions, whatever T is, so
  // that both ends of a bond agree; -2 marks one until build_slots finds its reverse slot.
  double** x = atom->x;
  const double bond_sq = m_bond_cutoff * m_bond_cutoff;
  const int num_edges = edges.num_edges();
  m_reverse_slot.assign(num_edges, -1);
  for (int e = 0; e < num_edges; ++e) {
    const int i = edges.center(e), j = edges.neighbor(e);
    const double dx = x[j][0] - x[i][0], dy = x[j][1] - x[i][1], dz = x[j][2] - x[i][2];
    if (dx * dx + dy * dy + dz * dz < bond_sq) {
      m_reverse_slot[e] = -2;
    }
  }
  build_slots(edges.n_local, edges.n_total, num_edges, edges.center.data(), edges.neighbor.data());

  ChgnetGraph<T> graph;
  static_cast<Graph<T>&>(graph) = edges;
  graph.slot_start = Kokkos::View<const int*, Kokkos::HostSpace>(m_slot_start.data(), m_slot_start.size());
  graph.reverse_slot =
      Kokkos::View<const int*, Kokkos::HostSpace>(m_reverse_slot.data(), m_reverse_slot.size());
  ChgnetLammpsExchange<T> exchange(this);
  auto& result = m_backend->result;
  try {
    m_backend->compute(graph, &exchange);
  } catch (const fastmlip::Error& e) {
    m_comm = CommRows{};
    error_one(FLERR, e.what());
  }
  m_magmom = result.magmom;
  m_magmom_step = update->ntimestep;
  Output out;
  out.energy = result.energy;
  out.node_energy = result.site_energy.data();
  out.gradient_d = result.edge_gradient.data();
  return out;
}

void PairFastmlipChgnet::build_slots(int nlocal, int nall, int num_edges, const int* center, const int* neighbor) {
  double** x = atom->x;
  const tagint* tag = atom->tag;
  // 1. How many slots each atom has: its short edges, counted by the owner and sent to ghosts.
  std::vector<double> count(nall, 0.0);
  for (int e = 0; e < num_edges; ++e) {
    if (m_reverse_slot[e] == -2) {
      count[center[e]] += 1.0;
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
      const int j = neighbor[e], i = center[e];
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
    const int i = center[e], j = neighbor[e];
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
      error_one(FLERR, fmt::format("the bond between atoms {} and {} ({:.4g} A) has no partner on the owner of "
                                   "atom {}; the ghost cutoff must cover the {} A atom-graph cutoff (check "
                                   "comm_modify cutoff)", tag[i], tag[j],
                                   std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]), tag[j], m_cutoff));
    }
    m_reverse_slot[e] = best;
  }
}

template <class T>
void PairFastmlipChgnet::exchange_slots(T* rows, int width, bool reverse) {
  for (int p = 0; p < m_passes; ++p) {
    bind_rows(rows, width);
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
double read_value(const PairFastmlipBase::CommRows& c, std::size_t index) {
  return c.d ? c.d[index] : static_cast<double>(c.f[index]);
}
void write_value(const PairFastmlipBase::CommRows& c, std::size_t index, double value, bool add) {
  if (c.d) {
    c.d[index] = add ? c.d[index] + value : value;
  } else {
    c.f[index] = add ? c.f[index] + static_cast<float>(value) : static_cast<float>(value);
  }
}

}  // namespace

// Slot rows (node rows are the base's): kSlotsPerPass rows of `width` values, slots
// pass * kSlotsPerPass.. of atom j; slots beyond the atom's count travel as zeros. Forward and
// reverse communication move the same layout.
int PairFastmlipChgnet::pack_atom(int j, double* buf) const {
  if (!m_comm.slots) {
    return PairFastmlipBase::pack_atom(j, buf);
  }
  const int w = m_comm.width;
  int m = 0;
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
  if (!m_comm.slots) {
    return PairFastmlipBase::unpack_atom(j, buf, add);
  }
  const int w = m_comm.width;
  int m = 0;
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


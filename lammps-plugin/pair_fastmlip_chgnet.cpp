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
using fastmlip::models::ChgnetDeviceResult;
using fastmlip::models::ChgnetExchange;
using fastmlip::models::ChgnetGraph;
using fastmlip::models::ChgnetModel;
using fastmlip::models::ChgnetResult;
using fastmlip::models::ChgnetSlotBuilder;
using fastmlip::models::ChgnetSlotExchange;

namespace {

/// The model's exchanges, through the pair style's LAMMPS communication: node rows as every
/// style moves them, slot rows as this one does.
template <class T>
class ChgnetLammpsExchange final : public PairNodeExchange<T, ChgnetExchange<T>> {
 public:
  ChgnetLammpsExchange(PairFastmlipChgnet* pair, bool in_model_memory)
      : PairNodeExchange<T, ChgnetExchange<T>>(pair, in_model_memory) {}
  void forward_slots(T* rows, int width) override { this->exchange_slots(rows, width, false); }
  void reverse_slots(T* rows, int width) override { this->exchange_slots(rows, width, true); }
};

/// The slot builder's exchanges (counts and slot records, in double whatever the model's
/// precision), and the layout they follow; with `in_model_memory` (the builder of a graph
/// evaluated in place, where the pair style exchanges_in_model_memory()) where the builder keeps
/// them, as the model's own exchanges.
class ChgnetLammpsSlotExchange final : public PairNodeExchange<double, ChgnetSlotExchange> {
 public:
  ChgnetLammpsSlotExchange(PairFastmlipChgnet* pair, bool in_model_memory)
      : PairNodeExchange<double, ChgnetSlotExchange>(pair, in_model_memory), m_chgnet(pair) {}
  void forward_slots(double* rows, int width) override { this->exchange_slots(rows, width, false); }
  void reverse_slots(double* rows, int width) override { this->exchange_slots(rows, width, true); }
  void slot_layout(const int* slot_start, const int* model_slot_start, int n_total, int local_max) override {
    m_chgnet->set_slot_layout(slot_start, n_total, local_max);
    if (this->rows_in_model_memory()) {
      m_chgnet->set_device_slot_start(model_slot_start, n_total);
    }
  }

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
  /// The slots of a host graph (the host styles, and /kk with its graph copied to the host), and
  /// of a graph in the device model's memory (/kk, evaluated in place).
  ChgnetSlotBuilder<fastmlip::plugin::HostModelSpace> host_slots;
  ChgnetSlotBuilder<fastmlip::plugin::DeviceModelSpace> device_slots;
  ChgnetDeviceResult<DeviceMemory> device_result;

  template <class T>
  void compute(const ChgnetGraph<T>& graph, ChgnetExchange<T>* exchange) {
    with_loaded<T>(
        [&](auto& placed) { placed.model->compute(placed.mirror.of(graph), exchange, true, result); });
  }
  /// Whether the model loaded is in `Memory`.
  template <class Memory>
  bool loaded_in() const {
    return visit([](const auto& model) {
      return std::is_same_v<typename std::decay_t<decltype(model)>::memory_space, Memory>;
    });
  }
  /// The model on a graph in its own memory, its results left there (loaded_in<DeviceMemory>()).
  template <class T>
  void compute_in_place(const ChgnetGraph<T, DeviceMemory>& graph, ChgnetExchange<T>* exchange) {
    with_loaded<T>([&](auto& placed) {
      using Model = typename std::decay_t<decltype(placed.model)>::element_type;
      if constexpr (std::is_same_v<typename Model::memory_space, DeviceMemory>) {
        placed.model->compute(graph, exchange, true, device_result);
      }
    });
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
  bytes += static_cast<double>(m_slot_start.capacity()) * sizeof(int) +
           static_cast<double>(m_magmom.capacity()) * sizeof(double);
  if (m_backend) {
    bytes += m_backend->host_slots.memory_usage() + m_backend->device_slots.memory_usage();
  }
  return bytes;
}

PairFastmlipBase::Output PairFastmlipChgnet::evaluate(const Graph<double>& edges) { return evaluate_with(edges); }
PairFastmlipBase::Output PairFastmlipChgnet::evaluate(const Graph<float>& edges) { return evaluate_with(edges); }

template <class T>
PairFastmlipBase::Output PairFastmlipChgnet::evaluate_with(const Graph<T>& edges) {
  const int nall = edges.n_total;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  const Kokkos::View<const double* [3], Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> x(
      nall > 0 ? atom->x[0] : nullptr, nall);
  const Kokkos::View<const tagint*, Kokkos::HostSpace, Unmanaged> tag(atom->tag, nall);
  ChgnetGraph<T> graph;
  static_cast<Graph<T>&>(graph) = edges;
  ChgnetLammpsSlotExchange slot_exchange(this, false);
  ChgnetLammpsExchange<T> exchange(this, false);
  auto& result = m_backend->result;
  try {
    const auto slots = m_backend->host_slots.build(edges, x, tag, m_bond_cutoff, &slot_exchange);
    graph.slot_start = slots.slot_start;
    graph.reverse_slot = slots.reverse_slot;
    m_backend->compute(graph, &exchange);
  } catch (const fastmlip::models::UnpairedBondError& e) {
    error_unpaired(e);
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

bool PairFastmlipChgnet::evaluates_in_place() const {
  return m_backend != nullptr && m_backend->loaded_in<DeviceMemory>();
}
PairFastmlipBase::DeviceOutput PairFastmlipChgnet::evaluate_in_place(const DeviceGraph<double>& edges,
                                                                     const DeviceAtoms& atoms) {
  return evaluate_in_place_with(edges, atoms);
}
PairFastmlipBase::DeviceOutput PairFastmlipChgnet::evaluate_in_place(const DeviceGraph<float>& edges,
                                                                     const DeviceAtoms& atoms) {
  return evaluate_in_place_with(edges, atoms);
}

// The /kk styles' graph where the KOKKOS package built it: the slots are built there too, and the
// results stay there but for the magnetic moments (one value per atom, for compute
// fastmlip/magmom).
template <class T>
PairFastmlipBase::DeviceOutput PairFastmlipChgnet::evaluate_in_place_with(const DeviceGraph<T>& edges,
                                                                          const DeviceAtoms& atoms) {
  ChgnetGraph<T, DeviceMemory> graph;
  static_cast<DeviceGraph<T>&>(graph) = edges;
  ChgnetLammpsSlotExchange slot_exchange(this, exchanges_in_model_memory());
  ChgnetLammpsExchange<T> exchange(this, exchanges_in_model_memory());
  const auto& result = m_backend->device_result;
  try {
    const auto slots =
        m_backend->device_slots.build(edges, atoms.x, atoms.tag, m_bond_cutoff, &slot_exchange);
    graph.slot_start = slots.slot_start;
    graph.reverse_slot = slots.reverse_slot;
    m_backend->compute_in_place(graph, &exchange);
    m_device_slot_start = {};
  } catch (const fastmlip::models::UnpairedBondError& e) {
    m_device_slot_start = {};
    error_unpaired(e);
  } catch (const fastmlip::Error& e) {
    m_device_slot_start = {};
    m_comm = CommRows{};
    error_one(FLERR, e.what());
  }
  m_magmom.resize(result.magmom.extent(0));
  Kokkos::deep_copy(Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        m_magmom.data(), m_magmom.size()),
                    result.magmom);
  m_magmom_step = update->ntimestep;
  DeviceOutput out;
  out.energy = result.energy;
  out.node_energy = result.site_energy;
  out.gradient_d = result.edge_gradient;
  return out;
}

void PairFastmlipChgnet::set_slot_layout(const int* slot_start, int nall, int local_max) {
  m_slot_start.assign(slot_start, slot_start + nall + 1);
  int global_max = 0;
  MPI_Allreduce(&local_max, &global_max, 1, MPI_INT, MPI_MAX, world);
  m_passes = (global_max + kSlotsPerPass - 1) / kSlotsPerPass;
}

void PairFastmlipChgnet::set_device_slot_start(const int* slot_start, int nall) {
  // Unmanaged: the builder owns the memory, and keeps it until its next build.
  m_device_slot_start =
      Kokkos::View<const int*, DeviceMemory>(slot_start, static_cast<std::size_t>(nall) + 1);
}

void PairFastmlipChgnet::exchange_slot_rows(double* rows, int width, bool reverse) {
  exchange_slots(rows, width, reverse);
}
void PairFastmlipChgnet::exchange_slot_rows(float* rows, int width, bool reverse) {
  exchange_slots(rows, width, reverse);
}

PairFastmlipBase::SlotLayout PairFastmlipChgnet::slot_layout_in_model_memory() const {
  SlotLayout layout;
  layout.start = m_device_slot_start;
  layout.passes = m_passes;
  layout.per_pass = kSlotsPerPass;
  const int nlocal = atom->nlocal, nall = nlocal + atom->nghost;
  if (static_cast<int>(m_slot_start.size()) == nall + 1) {
    layout.n_local_slots = m_slot_start[nlocal];
    layout.n_slots = m_slot_start[nall];
  }
  return layout;
}

void PairFastmlipChgnet::error_unpaired(const fastmlip::models::UnpairedBondError& e) {
  m_comm = CommRows{};
  sync_tags_to_host();
  const tagint* tag = atom->tag;
  error_one(FLERR, fmt::format("the bond between atoms {} and {} ({:.4g} A) has no partner on the owner of "
                               "atom {}; the ghost cutoff must cover the {} A atom-graph cutoff (check "
                               "comm_modify cutoff)",
                               tag[e.center], tag[e.neighbor], e.length, tag[e.neighbor], m_cutoff));
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


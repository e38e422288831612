// SPDX-License-Identifier: MIT
#include "pair_fastmlip_mace.h"

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>

#include "comm.h"
#include "core/error.hpp"
#include "error.h"
#include "graph/graph_mirror.hpp"
#include "io/potential_file.hpp"
#include "model_placement.h"
#include "models/mace/mace_model.hpp"
#include "utils.h"

using namespace LAMMPS_NS;
using fastmlip::models::MaceDeviceResult;
using fastmlip::models::MaceModel;
using fastmlip::models::MaceOptions;
using fastmlip::models::MaceResult;

namespace {
// One precision's model where it runs (model_placement.h), with the graph's copy in its memory.
template <class Space, class T>
struct Placed {
  std::unique_ptr<MaceModel<Space, T>> model;
  fastmlip::graph::GraphMirror<T, typename Space::memory_space> mirror;
};
}  // namespace

struct PairFastmlipMace::Backend : fastmlip::plugin::Placements<Placed> {
  MaceResult<double> result_d;
  MaceResult<float> result_f;

  template <class T>
  MaceResult<T>& result() {
    if constexpr (std::is_same_v<T, double>) {
      return result_d;
    } else {
      return result_f;
    }
  }
  template <class T>
  void compute(const fastmlip::graph::AtomGraph<T, Kokkos::HostSpace>& graph,
               fastmlip::models::FeatureExchange<T>* exchange) {
    with_loaded<T>(
        [&](auto& placed) { placed.model->compute(placed.mirror.of(graph), exchange, true, result<T>()); });
  }
  /// Whether the model loaded is in `Memory`.
  template <class Memory>
  bool loaded_in() const {
    return visit([](const auto& model) {
      return std::is_same_v<typename std::decay_t<decltype(model)>::memory_space, Memory>;
    });
  }
  /// The model on a graph in its own memory, its results left there (loaded_in<Memory>()).
  template <class T, class Memory>
  MaceDeviceResult<T, Memory> compute_in_place(const fastmlip::graph::AtomGraph<T, Memory>& graph,
                                               fastmlip::models::FeatureExchange<T>* exchange) {
    MaceDeviceResult<T, Memory> out;
    with_loaded<T>([&](auto& placed) {
      using Model = typename std::decay_t<decltype(placed.model)>::element_type;
      if constexpr (std::is_same_v<typename Model::memory_space, Memory>) {
        placed.model->compute(graph, exchange, true, out);
      }
    });
    return out;
  }
};

PairFastmlipMace::PairFastmlipMace(LAMMPS* lmp) : PairFastmlipBase(lmp, "fastmlip/mace", "mace") {}

PairFastmlipMace::~PairFastmlipMace() = default;

// pair_style fastmlip/mace [precision float64|float32] [head NAME] [radial exact|spline H]
//                          [device host|cuda] [charge Q] [spin S]
void PairFastmlipMace::settings(int narg, char** arg) {
  static const char* usage =
      "usage: pair_style fastmlip/mace [precision float64|float32] [head NAME] "
      "[radial exact|spline <knot spacing in A>] [device host|cuda] [charge Q] [spin S]";
  m_precision = "float64";
  m_head.clear();
  m_radial_spacing = 0.0;
  m_device = m_default_device;
  m_total_charge.reset();
  m_total_spin.reset();
  for (int i = 0; i < narg; i += 2) {
    const std::string key = arg[i];
    if (i + 1 >= narg) {
      error->all(FLERR, "pair_style fastmlip/mace: keyword '{}' needs a value; {}", key, usage);
    }
    const std::string value = arg[i + 1];
    if (key == "precision") {
      if (value != "float64" && value != "float32") {
        error->all(FLERR, "pair_style fastmlip/mace: precision must be float64 or float32, not '{}'", value);
      }
      m_precision = value;
    } else if (key == "head") {
      m_head = value;
    } else if (key == "charge" || key == "spin") {
      // The whole system's total charge (e) and spin multiplicity, for models that embed them
      // (MACE-OMOL); the model checks that it does and that it knows the value.
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !std::isfinite(v)) {
        error->all(FLERR, "pair_style fastmlip/mace: {} must be a number, not '{}'", key, value);
      }
      (key == "charge" ? m_total_charge : m_total_spin) = v;
    } else if (key == "device") {
      const std::string problem = fastmlip::plugin::device_problem("fastmlip/mace", value);
      if (!problem.empty()) {
        error->all(FLERR, problem);
      }
      m_device = value;
    } else if (key == "radial") {
      if (value == "exact") {
        m_radial_spacing = 0.0;
      } else if (value == "spline") {
        if (i + 2 >= narg) {
          error->all(FLERR, "pair_style fastmlip/mace: 'radial spline' needs a knot spacing in Angstrom "
                            "(0.005 reproduces the exact radial functions to ~1e-8 relative); {}", usage);
        }
        const std::string h = arg[i + 2];
        char* end = nullptr;
        const double spacing = std::strtod(h.c_str(), &end);
        if (end == h.c_str() || *end != '\0' || !(spacing >= 1e-5) || !(spacing <= 0.1)) {
          error->all(FLERR, "pair_style fastmlip/mace: the radial spline spacing must be a length in Angstrom "
                            "between 1e-5 and 0.1, not '{}'", h);
        }
        m_radial_spacing = spacing;
        ++i;  // the spacing was a third word
      } else {
        error->all(FLERR, "pair_style fastmlip/mace: radial must be 'exact' or 'spline <spacing>', not '{}'", value);
      }
    } else {
      error->all(FLERR, "pair_style fastmlip/mace: unknown keyword '{}'; {}", key, usage);
    }
  }
}

// pair_coeff * * file.safetensors Sym1 Sym2 ...: the file and symbols are checked by the base.
void PairFastmlipMace::load_model(const fastmlip::io::PotentialFile& file, const std::string& path,
                                  const std::vector<std::string>& symbols) {
  MaceOptions options;
  options.head = m_head;
  options.radial_spacing = m_radial_spacing;
  // Tables per pair of elements (distance transforms) for pair_coeff's elements only.
  options.table_species = symbols;
  options.total_charge = m_total_charge;
  options.total_spin = m_total_spin;
  m_backend = std::make_unique<Backend>();
  m_backend->load(m_device, single_precision(), [&](auto& placed) {
    using Model = typename std::decay_t<decltype(placed.model)>::element_type;
    placed.model = std::make_unique<Model>(file, options);
  });
  if (comm->me == 0 && m_device == "cuda") {
    utils::logmesg(lmp, "fastmlip/mace: model on {} ({}), kernels: {}\n",
                   Kokkos::DefaultExecutionSpace::name(), m_precision,
                   m_backend->visit([](const auto& m) { return m.kernel_backends(); }));
  }
  // Say how well the tables reproduce the model: users judge the trade from this line.
  const auto& tables = m_backend->visit([](const auto& m) -> decltype(auto) { return m.radial_tables(); });
  for (const auto& t : tables) {
    if (comm->me == 0) {
      const std::string what = t.function == fastmlip::models::MaceRadialTableInfo::Function::R
                                   ? std::string("radial spline")
                                   : fmt::format("radial spline ({})", t.function_name());
      const std::string pairs = t.tables > 1 ? fmt::format(" x {} element pairs", t.tables) : std::string();
      utils::logmesg(lmp,
                     "fastmlip/mace: layer {} {}: {} knots {:.6g} A apart{}, {:.1f} MB; "
                     "max error {:.2e} ({}, max {:.3g}), {:.2e} (d/dr, max {:.3g} 1/A)\n",
                     t.layer, what, t.knots, t.spacing, pairs, t.bytes / 1048576.0, t.max_error_value,
                     t.function_name(), t.max_abs_value, t.max_error_derivative, t.max_abs_derivative);
    }
  }
  const auto& species = m_backend->visit([](const auto& m) -> decltype(auto) { return m.species(); });
  std::string known;
  for (const auto& s : species) {
    known += (known.empty() ? "" : " ") + s.symbol;
  }
  const int ntypes = static_cast<int>(symbols.size());
  m_type_species.assign(ntypes + 1, -1);
  for (int t = 1; t <= ntypes; ++t) {
    const std::string symbol = symbols[t - 1];
    for (std::size_t s = 0; s < species.size(); ++s) {
      if (species[s].symbol == symbol) {
        m_type_species[t] = static_cast<int>(s);
      }
    }
    if (m_type_species[t] < 0) {
      error->all(FLERR, "pair_coeff for fastmlip/mace: atom type {} is '{}', which the model in {} does not have; "
                        "it has: {}", t, symbol, path, known);
    }
  }
  m_cutoff = m_backend->visit([](const auto& m) { return m.cutoff(); });
}

int PairFastmlipMace::max_exchange_width() const {
  // The widest node-feature row of any layer, in doubles.
  return m_backend->visit([](const auto& m) { return m.max_exchange_width(); });
}

PairFastmlipBase::Output PairFastmlipMace::evaluate(const Graph<double>& edges) { return evaluate_with(edges); }
PairFastmlipBase::Output PairFastmlipMace::evaluate(const Graph<float>& edges) { return evaluate_with(edges); }

bool PairFastmlipMace::evaluates_in_place() const {
  return m_backend != nullptr && m_backend->loaded_in<DeviceMemory>();
}
// MACE reads the graph only.
PairFastmlipBase::DeviceOutput PairFastmlipMace::evaluate_in_place(const DeviceGraph<double>& edges,
                                                                   const DeviceAtoms&) {
  return evaluate_in_place_with(edges);
}
PairFastmlipBase::DeviceOutput PairFastmlipMace::evaluate_in_place(const DeviceGraph<float>& edges,
                                                                   const DeviceAtoms&) {
  return evaluate_in_place_with(edges);
}

template <class T>
PairFastmlipBase::DeviceOutput PairFastmlipMace::evaluate_in_place_with(const DeviceGraph<T>& edges) {
  PairNodeExchange<T> exchange(this, exchanges_in_model_memory());
  DeviceOutput out;
  try {
    const auto result = m_backend->compute_in_place(edges, &exchange);
    out.energy = result.energy;
    out.node_energy = result.node_energy;
    if constexpr (std::is_same_v<T, double>) {
      out.gradient_d = result.edge_gradient;
    } else {
      out.gradient_f = result.edge_gradient;
    }
  } catch (const fastmlip::Error& e) {
    m_comm = CommRows{};
    error_one(FLERR, e.what());
  }
  return out;
}

template <class T>
PairFastmlipBase::Output PairFastmlipMace::evaluate_with(const Graph<T>& edges) {
  PairNodeExchange<T> exchange(this);
  auto& result = m_backend->result<T>();
  try {
    m_backend->compute<T>(edges, &exchange);
  } catch (const fastmlip::Error& e) {
    m_comm = CommRows{};
    error_one(FLERR, e.what());
  }
  Output out;
  out.energy = result.energy;
  out.node_energy = result.node_energy.data();
  if constexpr (std::is_same_v<T, double>) {
    out.gradient_d = result.edge_gradient.data();
  } else {
    out.gradient_f = result.edge_gradient.data();
  }
  return out;
}

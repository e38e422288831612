// SPDX-License-Identifier: MIT
#include "pair_fastmlip_mace.h"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "atom.h"
#include "comm.h"
#include "core/error.hpp"
#include "error.h"
#include "force.h"
#include "io/potential_file.hpp"
#include "kokkos_runtime.h"
#include "lammps_compat.h"
#include "memory.h"
#include "models/mace/mace_model.hpp"
#include "neigh_list.h"
#include "neighbor.h"
#include "update.h"
#include "utils.h"

using namespace LAMMPS_NS;
using fastmlip::models::FeatureExchange;
using fastmlip::models::MaceGraph;
using fastmlip::models::MaceModel;
using fastmlip::models::MaceOptions;
using fastmlip::models::MaceResult;

namespace {

// The model runs on the host, in Kokkos' default host execution space.
using ModelSpace = Kokkos::DefaultHostExecutionSpace;

/// Exchange of node-feature rows through LAMMPS' pair communication: ghosts receive their
/// owner's rows (forward), owners accumulate their ghosts' adjoints (reverse). Every rank
/// calls these the same number of times per step with the same width, as the model does.
template <class T>
class LammpsExchange final : public FeatureExchange<T> {
 public:
  LammpsExchange(PairFastmlipMace* pair, Comm* comm, int nlocal, int nall, PairFastmlipMace::CommRows& rows)
      : m_pair(pair), m_comm(comm), m_nlocal(nlocal), m_nall(nall), m_rows(rows) {}

  void forward(T* rows, int width) override {
    bind(rows, width);
    m_pair->comm_forward = width;
    fastmlip::plugin::forward_comm(m_comm, m_pair);
  }
  void reverse(T* rows, int width) override {
    bind(rows, width);
    m_pair->comm_reverse = width;
    fastmlip::plugin::reverse_comm(m_comm, m_pair);
    std::fill(rows + static_cast<std::size_t>(m_nlocal) * width, rows + static_cast<std::size_t>(m_nall) * width, T(0));
  }

 private:
  void bind(T* rows, int width) {
    m_rows = PairFastmlipMace::CommRows{};
    if constexpr (std::is_same_v<T, double>) {
      m_rows.d = rows;
    } else {
      m_rows.f = rows;
    }
    m_rows.width = width;
  }
  PairFastmlipMace* m_pair;
  Comm* m_comm;
  int m_nlocal, m_nall;
  PairFastmlipMace::CommRows& m_rows;
};

}  // namespace

struct PairFastmlipMace::Backend {
  std::unique_ptr<MaceModel<ModelSpace, double>> model_d;
  std::unique_ptr<MaceModel<ModelSpace, float>> model_f;
  MaceResult<double> result_d;
  MaceResult<float> result_f;

  const std::vector<fastmlip::io::PotentialSpecies>& species() const {
    return model_d ? model_d->species() : model_f->species();
  }
  double cutoff() const { return model_d ? model_d->cutoff() : model_f->cutoff(); }
  template <class T>
  MaceModel<ModelSpace, T>& model() {
    if constexpr (std::is_same_v<T, double>) {
      return *model_d;
    } else {
      return *model_f;
    }
  }
  template <class T>
  MaceResult<T>& result() {
    if constexpr (std::is_same_v<T, double>) {
      return result_d;
    } else {
      return result_f;
    }
  }
};

PairFastmlipMace::PairFastmlipMace(LAMMPS* lmp) : Pair(lmp) {
  single_enable = 0;
  restartinfo = 0;  // like other many-body styles: pair_coeff names the file again after read_restart
  one_coeff = 1;
  manybody_flag = 1;
  // The model's virial is sum over edges of -v (x) dE/dv; with ghost forces kept (newton on)
  // that equals sum_i x_i . f_i over local and ghost atoms, which fdotr computes.
  no_virial_fdotr_compute = 0;
}

PairFastmlipMace::~PairFastmlipMace() {
  if (allocated) {
    memory->destroy(setflag);
    memory->destroy(cutsq);
  }
}

void PairFastmlipMace::allocate() {
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

// pair_style fastmlip/mace [precision float64|float32] [head NAME] [radial exact|spline H]
void PairFastmlipMace::settings(int narg, char** arg) {
  static const char* usage = "usage: pair_style fastmlip/mace [precision float64|float32] [head NAME] "
                             "[radial exact|spline <knot spacing in A>]";
  m_precision = "float64";
  m_head.clear();
  m_radial_spacing = 0.0;
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

// pair_coeff * * file.safetensors Sym1 Sym2 ... (one symbol per LAMMPS type)
void PairFastmlipMace::coeff(int narg, char** arg) {
  if (!allocated) {
    allocate();
  }
  const int ntypes = atom->ntypes;
  if (narg != 3 + ntypes) {
    error->all(FLERR, "pair_coeff for fastmlip/mace: expected '* * <potential file>' and {} element symbols "
                      "(one per atom type), got {} arguments", ntypes, narg);
  }
  if (std::strcmp(arg[0], "*") != 0 || std::strcmp(arg[1], "*") != 0) {
    error->all(FLERR, "pair_coeff for fastmlip/mace must be 'pair_coeff * * <file> <symbols...>'");
  }
  const std::string path = arg[2];
  fastmlip::plugin::ensure_kokkos_running();
  try {
    const auto file = fastmlip::io::read_potential_file(path);
    if (file.model_kind() != "mace") {
      error->all(FLERR, "pair_coeff for fastmlip/mace: {} holds a '{}' model, not a MACE one{}", path,
                 file.model_kind(), file.model_kind() == "chgnet" ? "; use pair_style fastmlip/chgnet" : "");
    }
    MaceOptions options;
    options.head = m_head;
    options.radial_spacing = m_radial_spacing;
    m_backend = std::make_unique<Backend>();
    if (m_precision == "float32") {
      m_backend->model_f = std::make_unique<MaceModel<ModelSpace, float>>(file, options);
    } else {
      m_backend->model_d = std::make_unique<MaceModel<ModelSpace, double>>(file, options);
    }
    // Say how well the tables reproduce the model: users judge the trade from this line.
    const auto& tables =
        m_backend->model_d ? m_backend->model_d->radial_tables() : m_backend->model_f->radial_tables();
    for (const auto& t : tables) {
      if (comm->me == 0) {
        utils::logmesg(lmp, "fastmlip/mace: layer {} radial spline: {} knots {:.6g} A apart, {:.1f} MB; "
                            "max error {:.2e} (R, max |R| {:.3g}), {:.2e} (dR/dr, max |dR/dr| {:.3g} 1/A)\n",
                       t.layer, t.knots, t.spacing, t.bytes / 1048576.0, t.max_error_value, t.max_abs_value,
                       t.max_error_derivative, t.max_abs_derivative);
      }
    }
  } catch (const fastmlip::Error& e) {
    error->all(FLERR, "pair_coeff for fastmlip/mace: {}", e.what());
  }
  const auto& species = m_backend->species();
  std::string known;
  for (const auto& s : species) {
    known += (known.empty() ? "" : " ") + s.symbol;
  }
  m_type_species.assign(ntypes + 1, -1);
  for (int t = 1; t <= ntypes; ++t) {
    const std::string symbol = arg[2 + t];
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
  m_cutoff = m_backend->cutoff();
  for (int i = 1; i <= ntypes; ++i) {
    for (int j = i; j <= ntypes; ++j) {
      setflag[i][j] = 1;
    }
  }
}

void PairFastmlipMace::init_style() {
  if (!m_backend) {
    error->all(FLERR, "pair_style fastmlip/mace: no potential; use 'pair_coeff * * <file> <symbols...>'");
  }
  if (std::strcmp(update->unit_style, "metal") != 0) {
    error->all(FLERR, "pair_style fastmlip/mace requires 'units metal' (the potential is in eV and Angstrom), "
                      "not 'units {}'", update->unit_style);
  }
  if (force->newton_pair == 0) {
    error->all(FLERR, "pair_style fastmlip/mace requires 'newton on' (forces on ghost atoms are returned to "
                      "their owners by LAMMPS' reverse communication)");
  }
  if (atom->tag_enable == 0) {
    error->all(FLERR, "pair_style fastmlip/mace requires atom IDs");
  }
  fastmlip::plugin::request_full_list(this, neighbor, instance_me);
  // Buffers of the layer exchange are sized from these at comm->init(), which follows: the
  // widest node-feature row of any layer, in doubles.
  comm_forward = comm_reverse =
      m_backend->model_d ? m_backend->model_d->max_exchange_width() : m_backend->model_f->max_exchange_width();
}

double PairFastmlipMace::init_one(int, int) { return m_cutoff; }

double PairFastmlipMace::memory_usage() {
  double bytes = Pair::memory_usage();
  bytes += static_cast<double>(m_sender.capacity() + m_receiver.capacity() + m_species.capacity()) * sizeof(int);
  bytes += static_cast<double>(m_vectors_d.capacity()) * sizeof(double) + m_vectors_f.capacity() * sizeof(float);
  return bytes;
}

void PairFastmlipMace::compute(int eflag, int vflag) {
  if (single_precision()) {
    compute_with<float>(eflag, vflag);
  } else {
    compute_with<double>(eflag, vflag);
  }
}

template <class T>
void PairFastmlipMace::compute_with(int eflag, int vflag) {
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
    m_species[i] = m_type_species[type[i]];
  }
  // Edges j -> i for local i, grouped by receiver in index order (the model's CSR layout),
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
        error_too_close(tag[i], tag[j], rsq);
      }
      count += rsq < cutsq_model ? 1 : 0;
    }
    m_edge_start[i + 1] = count;
  }
  for (int i = 0; i < nlocal; ++i) {
    m_edge_start[i + 1] += m_edge_start[i];
  }
  const int num_edges = m_edge_start[nlocal];
  m_sender.resize(num_edges);
  m_receiver.resize(num_edges);
  std::vector<T>& vectors = [&]() -> std::vector<T>& {
    if constexpr (std::is_same_v<T, double>) {
      return m_vectors_d;
    } else {
      return m_vectors_f;
    }
  }();
  vectors.resize(3 * static_cast<std::size_t>(num_edges));
  for (int ii = 0; ii < inum; ++ii) {
    const int i = ilist[ii];
    int e = m_edge_start[i];
    for (int jj = 0; jj < numneigh[i]; ++jj) {
      const int j = firstneigh[i][jj] & NEIGHMASK;
      const double dx = x[j][0] - x[i][0], dy = x[j][1] - x[i][1], dz = x[j][2] - x[i][2];
      if (dx * dx + dy * dy + dz * dz >= cutsq_model) {
        continue;
      }
      m_sender[e] = j;
      m_receiver[e] = i;
      vectors[3 * e] = static_cast<T>(dx);
      vectors[3 * e + 1] = static_cast<T>(dy);
      vectors[3 * e + 2] = static_cast<T>(dz);
      ++e;
    }
  }

  MaceGraph<T> graph;
  graph.n_local = nlocal;
  graph.n_total = nall;
  graph.species = m_species.data();
  graph.num_edges = num_edges;
  graph.sender = m_sender.data();
  graph.receiver = m_receiver.data();
  graph.vectors = vectors.data();
  const auto& result = run_model(graph);

  if (eflag_global) {
    eng_vdwl += result.energy;
  }
  if (eflag_atom) {
    for (int i = 0; i < nlocal; ++i) {
      eatom[i] += result.node_energy[i];
    }
  }
  // v = r_j - r_i: F_i = -dE/dr_i = +dE/dv, F_j = -dE/dv. Each edge's virial -v (x) dE/dv is
  // split evenly between its two atoms for the per-atom virial.
  const bool explicit_virial = vflag_global && !vflag_fdotr;
  for (int e = 0; e < num_edges; ++e) {
    const int i = m_receiver[e], j = m_sender[e];
    const double g[3] = {static_cast<double>(result.edge_gradient[3 * e]),
                         static_cast<double>(result.edge_gradient[3 * e + 1]),
                         static_cast<double>(result.edge_gradient[3 * e + 2])};
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

void PairFastmlipMace::error_too_close(tagint a, tagint b, double rsq) {
  error->one(FLERR, "pair_style fastmlip/mace: atoms {} and {} are {:.4g} Angstrom apart, closer than {} "
                    "Angstrom; check the structure (overlapping atoms, a wrong lattice constant or units)",
             a, b, std::sqrt(rsq), kMinDistance);
}

template <class T>
const MaceResult<T>& PairFastmlipMace::run_model(const MaceGraph<T>& graph) {
  LammpsExchange<T> exchange(this, comm, graph.n_local, graph.n_total, m_comm);
  auto& result = m_backend->result<T>();
  try {
    m_backend->model<T>().compute(graph, &exchange, true, result);
  } catch (const fastmlip::Error& e) {
    m_comm = CommRows{};
    error->one(FLERR, "pair_style fastmlip/mace: {}", e.what());
  }
  m_comm = CommRows{};
  return result;
}

template const MaceResult<double>& PairFastmlipMace::run_model(const MaceGraph<double>&);
template const MaceResult<float>& PairFastmlipMace::run_model(const MaceGraph<float>&);
template void PairFastmlipMace::compute_with<double>(int, int);
template void PairFastmlipMace::compute_with<float>(int, int);

int PairFastmlipMace::pack_forward_comm(int n, int* list, double* buf, int, int*) {
  const int w = m_comm.width;
  int m = 0;
  for (int a = 0; a < n; ++a) {
    const std::size_t row = static_cast<std::size_t>(list[a]) * w;
    for (int k = 0; k < w; ++k) {
      buf[m++] = m_comm.d ? m_comm.d[row + k] : static_cast<double>(m_comm.f[row + k]);
    }
  }
  return m;
}

void PairFastmlipMace::unpack_forward_comm(int n, int first, double* buf) {
  const int w = m_comm.width;
  int m = 0;
  for (int a = first; a < first + n; ++a) {
    const std::size_t row = static_cast<std::size_t>(a) * w;
    for (int k = 0; k < w; ++k, ++m) {
      if (m_comm.d) {
        m_comm.d[row + k] = buf[m];
      } else {
        m_comm.f[row + k] = static_cast<float>(buf[m]);
      }
    }
  }
}

int PairFastmlipMace::pack_reverse_comm(int n, int first, double* buf) {
  const int w = m_comm.width;
  int m = 0;
  for (int a = first; a < first + n; ++a) {
    const std::size_t row = static_cast<std::size_t>(a) * w;
    for (int k = 0; k < w; ++k) {
      buf[m++] = m_comm.d ? m_comm.d[row + k] : static_cast<double>(m_comm.f[row + k]);
    }
  }
  return m;
}

void PairFastmlipMace::unpack_reverse_comm(int n, int* list, double* buf) {
  const int w = m_comm.width;
  int m = 0;
  for (int a = 0; a < n; ++a) {
    const std::size_t row = static_cast<std::size_t>(list[a]) * w;
    for (int k = 0; k < w; ++k, ++m) {
      if (m_comm.d) {
        m_comm.d[row + k] += buf[m];
      } else {
        m_comm.f[row + k] += static_cast<float>(buf[m]);
      }
    }
  }
}

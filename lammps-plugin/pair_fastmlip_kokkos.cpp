// SPDX-License-Identifier: MIT
#include "pair_fastmlip_kokkos.h"

#ifdef LMP_KOKKOS

#include <Kokkos_ScatterView.hpp>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "atom_kokkos.h"
#include "atom_masks.h"
#include "comm.h"
#include "error.h"
#include "force.h"
#include "graph/edge_tally.hpp"
#include "lammps.h"
#include "memory_kokkos.h"
#include "neigh_list_kokkos.h"
#include "neigh_request.h"
#include "neighbor.h"
#include "utils.h"

using namespace LAMMPS_NS;

namespace {

/// Whether kernels on DeviceType can read host memory: then the model's host buffers are used
/// in place, otherwise (CUDA, HIP) they are copied over.
template <class DeviceType>
constexpr bool kReadsHost = std::is_same_v<typename DeviceType::memory_space, Kokkos::HostSpace>;

/// A host array of the model's results as a view in DeviceType's memory: the array itself
/// where DeviceType reads host memory, else `staging` (grown as needed) after one copy.
template <class DeviceType, class V>
Kokkos::View<const V*, typename DeviceType::memory_space> on_device(const V* host, std::size_t n,
                                                                   Kokkos::View<V*, DeviceType>& staging,
                                                                   const char* label) {
  using Result = Kokkos::View<const V*, typename DeviceType::memory_space>;
  if constexpr (kReadsHost<DeviceType>) {
    (void)staging;
    (void)label;
    return Result(host, n);
  } else {
    fastmlip::grow_rows(staging, n, label);
    const Kokkos::pair<std::size_t, std::size_t> range(0, n);
    Kokkos::deep_copy(
        Kokkos::subview(staging, range),
        Kokkos::View<const V*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host, n));
    return Result(staging.data(), n);
  }
}

/// The KOKKOS package's full neighbor list on DeviceType, as graph::GraphBuilder reads a list.
template <class DeviceType>
struct KokkosNeighbors {
  using AT = ArrayTypes<DeviceType>;
  int inum = 0;
  typename AT::t_int_1d_randomread ilist;
  typename AT::t_int_1d_randomread numneigh;
  typename AT::t_neighbors_2d neighbors;
  KOKKOS_INLINE_FUNCTION int atom(int ii) const { return ilist(ii); }
  KOKKOS_INLINE_FUNCTION int count(int i) const { return numneigh(i); }
  KOKKOS_INLINE_FUNCTION int neighbor(int i, int jj) const { return neighbors(i, jj) & NEIGHMASK; }
};

/// Pair::virial_fdotr_compute on DeviceType: sum_i x_i . f_i over local and ghost atoms, or with
/// neigh_modify include only the first nfirst local atoms and the ghosts. The order of the
/// components is LAMMPS': xx yy zz xy xz yz.
template <class DeviceType>
struct VirialFdotrFunctor {
  using value_type = fastmlip::graph::Virial6;
  using AT = ArrayTypes<DeviceType>;
  typename AT::t_x_array_randomread m_x;
  typename AT::t_f_array m_f;
  int m_skip_begin = 0, m_skip_end = 0;  // atoms fdotr leaves out (neigh_modify include)

  KOKKOS_INLINE_FUNCTION void operator()(int i, value_type& ev) const {
    if (i >= m_skip_begin && i < m_skip_end) {
      return;
    }
    ev.v[0] += m_f(i, 0) * m_x(i, 0);
    ev.v[1] += m_f(i, 1) * m_x(i, 1);
    ev.v[2] += m_f(i, 2) * m_x(i, 2);
    ev.v[3] += m_f(i, 1) * m_x(i, 0);
    ev.v[4] += m_f(i, 2) * m_x(i, 0);
    ev.v[5] += m_f(i, 2) * m_x(i, 1);
  }
};

/// Whether a value is NaN or infinite, on any backend (x - x is 0 exactly for every finite x).
KOKKOS_INLINE_FUNCTION bool not_finite(double x) { return !(x - x == 0.0); }

/// How many of a model's per-atom energies and edge gradients in Memory are not finite.
template <class ExecSpace, class G>
struct CountNonFinite {
  struct TagEnergy {};
  struct TagGradient {};
  Kokkos::View<const double*, typename ExecSpace::memory_space> m_energy;
  Kokkos::View<const G* [3], Kokkos::LayoutRight, typename ExecSpace::memory_space> m_gradient;

  KOKKOS_INLINE_FUNCTION void operator()(TagEnergy, int i, int& bad) const {
    bad += not_finite(m_energy(i)) ? 1 : 0;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagGradient, int e, int& bad) const {
    for (int c = 0; c < 3; ++c) {
      bad += not_finite(static_cast<double>(m_gradient(e, c))) ? 1 : 0;
    }
  }

  int count() const {
    int bad = 0, bad_edges = 0;
    Kokkos::parallel_reduce("fastmlip::pair_kk::non_finite_energy",
                            Kokkos::RangePolicy<ExecSpace, TagEnergy>(0, m_energy.extent(0)), *this, bad);
    Kokkos::parallel_reduce("fastmlip::pair_kk::non_finite_gradient",
                            Kokkos::RangePolicy<ExecSpace, TagGradient>(0, m_gradient.extent(0)), *this,
                            bad_edges);
    return bad + bad_edges;
  }
};

/// How many of a model's per-atom energies and edge gradients (in G) are not finite.
template <class ExecSpace, class G>
int count_non_finite(
    const Kokkos::View<const double*, typename ExecSpace::memory_space>& energy,
    const Kokkos::View<const G* [3], Kokkos::LayoutRight, typename ExecSpace::memory_space>& gradient) {
  CountNonFinite<ExecSpace, G> count;
  count.m_energy = energy;
  count.m_gradient = gradient;
  return count.count();
}

/// A copy of rows [n][3] in `out`, on the host.
template <class G, class Memory>
const G* host_rows(const Kokkos::View<const G* [3], Kokkos::LayoutRight, Memory>& rows, std::vector<G>& out) {
  out.resize(3 * rows.extent(0));
  Kokkos::deep_copy(
      Kokkos::View<G* [3], Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
          out.data(), rows.extent(0)),
      rows);
  return out.data();
}

/// The model's ghost-row exchange runs on host rows (PairFastmlipMace::pack_forward_comm and
/// friends). CommKokkos picks the host path for a pair whose execution_space is Host, and
/// otherwise (a GPU build) its device path, which needs KOKKOS pack functions this style does
/// not have; so for the duration of the model the pair presents itself as a host pair.
class ExchangeOnHost {
 public:
  explicit ExchangeOnHost(Pair* pair) : m_pair(pair), m_saved(pair->execution_space) {
    pair->execution_space = Host;
  }
  ~ExchangeOnHost() { m_pair->execution_space = m_saved; }
  ExchangeOnHost(const ExchangeOnHost&) = delete;
  ExchangeOnHost& operator=(const ExchangeOnHost&) = delete;

 private:
  Pair* m_pair;
  ExecutionSpace m_saved;
};

}  // namespace

template <class DeviceType, class Style>
PairFastmlipKokkos<DeviceType, Style>::PairFastmlipKokkos(LAMMPS* lmp) : Style(lmp) {
  if (lmp->kokkos == nullptr) {
    this->error->all(FLERR, "pair_style {0}/kk needs the KOKKOS package active: start LAMMPS with '-k on' (e.g. "
                            "'lmp -k on t 4 -sf kk'), or use pair_style {0}", this->m_style);
  }
  this->respa_enable = 0;
  this->kokkosable = 1;
  this->atomKK = (AtomKokkos*)this->atom;
  this->execution_space = ExecutionSpaceFromDevice<DeviceType>::space;
  this->datamask_read = X_MASK | F_MASK | TAG_MASK | TYPE_MASK | ENERGY_MASK | VIRIAL_MASK;
  this->datamask_modify = F_MASK | ENERGY_MASK | VIRIAL_MASK;
  // On a GPU LAMMPS (-k on g 1) the model runs on the KOKKOS device unless `device host` says
  // otherwise, so that the graph built there is handed to it as it is.
  if constexpr (!kReadsHost<DeviceType> && std::is_same_v<Memory, typename Style::DeviceMemory>) {
    this->m_default_device = "cuda";
  }
}

template <class DeviceType, class Style>
PairFastmlipKokkos<DeviceType, Style>::~PairFastmlipKokkos() {
  if (this->copymode) {
    return;
  }
  this->memoryKK->destroy_kokkos(k_eatom, this->eatom);
  this->memoryKK->destroy_kokkos(k_vatom, this->vatom);
  this->eatom = nullptr;
  this->vatom = nullptr;
}

template <class DeviceType, class Style>
void PairFastmlipKokkos<DeviceType, Style>::sync_tags_to_host() {
  this->atomKK->sync(Host, TAG_MASK);
}

template <class DeviceType, class Style>
void PairFastmlipKokkos<DeviceType, Style>::init_style() {
  // The host style's checks (potential, units metal, newton on, atom IDs), its full
  // neighbor-list request and the exchange buffer sizes; then that request becomes a KOKKOS
  // list on DeviceType, as the KOKKOS package's own many-body styles do.
  Style::init_style();
  constexpr bool on_host =
      std::is_same_v<DeviceType, LMPHostType> && !std::is_same_v<DeviceType, LMPDeviceType>;
  constexpr bool on_device = std::is_same_v<DeviceType, LMPDeviceType>;
#if LAMMPS_VERSION_NUMBER >= 20220324
  auto* request = this->neighbor->find_request(this);
  request->set_kokkos_host(on_host);
  request->set_kokkos_device(on_device);
#else
  const int irequest = this->neighbor->nrequest - 1;
  this->neighbor->requests[irequest]->kokkos_host = on_host;
  this->neighbor->requests[irequest]->kokkos_device = on_device;
#endif

  const auto n = this->m_type_species.size();
  Kokkos::View<int*, Memory> type_species("fastmlip::pair_kk::type_species", n);
  Kokkos::deep_copy(type_species,
                    Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        this->m_type_species.data(), n));
  d_type_species = type_species;

  // Say once where the model meets the graph: whether a GPU run copies it each step is what a
  // user tuning one wants to know first.
  if (!m_route_logged && this->comm->me == 0) {
    const bool in_place = std::is_same_v<Memory, typename Style::DeviceMemory> && this->evaluates_in_place();
    utils::logmesg(
        this->lmp, "pair_style {}/kk: {}\n", this->m_style,
        in_place ? fmt::format("the model evaluates the graph in {} memory, where the KOKKOS package "
                               "built it, and the forces are tallied there",
                               Memory::name())
        : kReadsHost<DeviceType>
            ? std::string("the model evaluates a host-memory graph")
            : fmt::format("the model evaluates a host-memory graph, copied from {} memory each step "
                          "(its results copied back)",
                          Memory::name()));
    m_route_logged = true;
  }
}

template <class DeviceType, class Style>
double PairFastmlipKokkos<DeviceType, Style>::memory_usage() {
  double bytes = Style::memory_usage();
  bytes += m_builder_d.memory_usage() + m_builder_f.memory_usage() + m_host_d.bytes() + m_host_f.bytes();
  bytes += static_cast<double>(d_type_species.span()) * sizeof(int);
  bytes += static_cast<double>(d_gradient_d.span() + d_node_energy.span()) * sizeof(double) +
           static_cast<double>(d_gradient_f.span()) * sizeof(float);
  return bytes;
}

template <class DeviceType, class Style>
void PairFastmlipKokkos<DeviceType, Style>::compute(int eflag, int vflag) {
  if (this->single_precision()) {
    compute_kk<float>(eflag, vflag);
  } else {
    compute_kk<double>(eflag, vflag);
  }
}

template <class DeviceType, class Style>
template <class T>
void PairFastmlipKokkos<DeviceType, Style>::compute_kk(int eflag, int vflag) {
  this->ev_init(eflag, vflag, 0);
  this->new_evaluation();
  // Per-atom arrays are DualViews (pair->eatom / vatom are their host sides, which computes
  // read); recreated zeroed each step, as the KOKKOS package's styles do.
  if (this->eflag_atom) {
    this->memoryKK->destroy_kokkos(k_eatom, this->eatom);
    this->memoryKK->create_kokkos(k_eatom, this->eatom, this->maxeatom, "pair:eatom");
    d_eatom = k_eatom.template view<DeviceType>();
  }
  if (this->vflag_atom) {
    this->memoryKK->destroy_kokkos(k_vatom, this->vatom);
    this->memoryKK->create_kokkos(k_vatom, this->vatom, this->maxvatom, "pair:vatom");
    d_vatom = k_vatom.template view<DeviceType>();
  }
  this->atomKK->sync(this->execution_space, this->datamask_read);

  const int nlocal = this->atom->nlocal;
  const int nall = nlocal + this->atom->nghost;
  auto* k_list = static_cast<NeighListKokkos<DeviceType>*>(this->list);

  // The graph on DeviceType, by the same builder the host styles run.
  KokkosNeighbors<DeviceType> neighbors;
  neighbors.inum = this->list->inum;
  neighbors.ilist = k_list->d_ilist;
  neighbors.numneigh = k_list->d_numneigh;
  neighbors.neighbors = k_list->d_neighbors;
  const auto x = this->atomKK->k_x.template view<DeviceType>();
  DeviceGraph<T> graph;
  try {
    graph = builder<T>().build(x, neighbors, this->atomKK->k_type.template view<DeviceType>(), d_type_species,
                               nlocal, nall, this->m_cutoff, Style::kMinDistance);
  } catch (const fastmlip::graph::ClosePairError& close) {
    this->error_too_close(close);
  }

  // The model's results as views on DeviceType: where they are, for a model that evaluates the
  // graph in DeviceType's own memory (a MACE model on the KOKKOS device, or any host model in a
  // host-only build), else from a model in host memory given a host copy of the graph (see the
  // header).
  double energy = 0;
  Kokkos::View<const double*, Memory> node_energy;
  Rows<double> gradient_d;
  Rows<float> gradient_f;
  bool in_place = false;
  if constexpr (std::is_same_v<Memory, typename Style::DeviceMemory>) {
    if (this->evaluates_in_place()) {
      in_place = true;
      typename Style::DeviceOutput out;
      {
        typename Style::DeviceAtoms atoms;
        atoms.x = x;
        atoms.tag = this->atomKK->k_tag.template view<DeviceType>();
        ExchangeOnHost host_exchange(this);
        out = this->evaluate_in_place(graph, atoms);
      }
      check_finite_in_place(out, graph);
      energy = out.energy;
      node_energy = out.node_energy;
      gradient_d = out.gradient_d;
      gradient_f = out.gradient_f;
    }
  }
  if (!in_place) {
    if (this->evaluate_reads_atoms()) {
      this->atomKK->sync(Host, X_MASK | TAG_MASK);
    }
    const auto host_graph = host_mirror<T>().of(graph);
    typename Style::Output out;
    {
      ExchangeOnHost host_exchange(this);
      out = this->evaluate(host_graph);
    }
    this->check_finite(out, host_graph);
    energy = out.energy;
    node_energy =
        on_device<DeviceType>(out.node_energy, nlocal, d_node_energy, "fastmlip::pair_kk::node_energy");
    const std::size_t n_grad = 3 * static_cast<std::size_t>(graph.num_edges());
    if (out.gradient_d != nullptr) {
      gradient_d = Rows<double>(
          on_device<DeviceType>(out.gradient_d, n_grad, d_gradient_d, "fastmlip::pair_kk::gradient").data(),
          graph.num_edges());
    } else {
      gradient_f = Rows<float>(
          on_device<DeviceType>(out.gradient_f, n_grad, d_gradient_f, "fastmlip::pair_kk::gradient").data(),
          graph.num_edges());
    }
  }

  if (this->eflag_global) {
    this->eng_vdwl += energy;  // the model's own double-precision sum of the per-atom energies
  }
  if (this->eflag_atom) {
    fastmlip::graph::tally_node_energies<ExecSpace>(nlocal, node_energy, d_eatom);
  }
  const bool explicit_virial = this->vflag_global && !this->vflag_fdotr;
  const auto f = this->atomKK->k_f.template view<DeviceType>();
  const auto vatom = this->vflag_atom ? d_vatom : typename AT::t_virial_array();
  fastmlip::graph::Virial6 w;
  if (gradient_f.data() == nullptr) {  // double gradients, or none (no edges)
    w = fastmlip::graph::tally_edges<ExecSpace, T, double>(graph, gradient_d, f, vatom, explicit_virial);
  } else {
    w = fastmlip::graph::tally_edges<ExecSpace, T, float>(graph, gradient_f, f, vatom, explicit_virial);
  }
  if (explicit_virial) {
    for (int k = 0; k < 6; ++k) {
      this->virial[k] += w.v[k];
    }
  }
  if (this->vflag_fdotr) {
    VirialFdotrFunctor<DeviceType> fdotr;
    fdotr.m_x = x;
    fdotr.m_f = f;
    if (this->neighbor->includegroup != 0) {
      fdotr.m_skip_begin = this->atom->nfirst;
      fdotr.m_skip_end = this->atom->nlocal;
    }
    fastmlip::graph::Virial6 sum;
    Kokkos::parallel_reduce("fastmlip::pair_kk::virial_fdotr", Kokkos::RangePolicy<ExecSpace>(0, nall), fdotr, sum);
    for (int k = 0; k < 6; ++k) {
      this->virial[k] += sum.v[k];
    }
    this->vflag_fdotr = 0;
  }

  if (this->eflag_atom) {
    k_eatom.template modify<DeviceType>();
    k_eatom.template sync<LMPHostType>();
  }
  if (this->vflag_atom) {
    k_vatom.template modify<DeviceType>();
    k_vatom.template sync<LMPHostType>();
  }
  this->atomKK->modified(this->execution_space, (eflag || vflag) ? this->datamask_modify : F_MASK);
}

template <class DeviceType, class Style>
template <class T>
void PairFastmlipKokkos<DeviceType, Style>::check_finite_in_place(const typename Style::DeviceOutput& out,
                                                                  const DeviceGraph<T>& graph) {
  // The gradients are in double (CHGNet, MACE in float64) or float (MACE in float32); none at
  // all without edges.
  const bool in_double = out.gradient_f.data() == nullptr;
  const int bad = in_double ? count_non_finite<ExecSpace>(out.node_energy, out.gradient_d)
                            : count_non_finite<ExecSpace>(out.node_energy, out.gradient_f);
  if (bad == 0 && std::isfinite(out.energy)) {
    return;
  }
  // Something is not finite: the host check names the step and the atoms, from host copies.
  std::vector<double> node_energy(out.node_energy.extent(0));
  Kokkos::deep_copy(Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        node_energy.data(), node_energy.size()),
                    out.node_energy);
  std::vector<double> gradient_d;
  std::vector<float> gradient_f;
  typename Style::Output host;
  host.energy = out.energy;
  host.node_energy = node_energy.data();
  if (in_double) {
    host.gradient_d = host_rows(out.gradient_d, gradient_d);
  } else {
    host.gradient_f = host_rows(out.gradient_f, gradient_f);
  }
  this->check_finite(host, host_mirror<T>().of(graph));
}

namespace LAMMPS_NS {
template class PairFastmlipKokkos<LMPDeviceType, PairFastmlipMace>;
template class PairFastmlipKokkos<LMPDeviceType, PairFastmlipChgnet>;
#ifdef LMP_KOKKOS_GPU
template class PairFastmlipKokkos<LMPHostType, PairFastmlipMace>;
template class PairFastmlipKokkos<LMPHostType, PairFastmlipChgnet>;
#endif
}  // namespace LAMMPS_NS

#endif  // LMP_KOKKOS

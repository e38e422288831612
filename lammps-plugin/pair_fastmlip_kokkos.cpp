// SPDX-License-Identifier: MIT
#include "pair_fastmlip_kokkos.h"

#ifdef LMP_KOKKOS

#include <Kokkos_ScatterView.hpp>
#include <string>
#include <type_traits>

#include "atom_kokkos.h"
#include "atom_masks.h"
#include "error.h"
#include "force.h"
#include "lammps.h"
#include "memory_kokkos.h"
#include "neigh_list_kokkos.h"
#include "neigh_request.h"
#include "neighbor.h"

using namespace LAMMPS_NS;

namespace {

/// Whether kernels on DeviceType can read host memory: then the model's host buffers are used
/// in place, otherwise (CUDA, HIP) they are copied over.
template <class DeviceType>
constexpr bool kReadsHost = std::is_same_v<typename DeviceType::memory_space, Kokkos::HostSpace>;

/// Grows `view` to at least `n` entries (with headroom, since edge counts fluctuate from step
/// to step), keeping the host mirror in step. Contents are not kept.
template <class V, class DeviceType>
void grow(Kokkos::View<V*, DeviceType>& view, std::size_t n, const char* label) {
  if (view.extent(0) < n) {
    view = Kokkos::View<V*, DeviceType>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),
                                        n + n / 5 + 16);
  }
}
template <class Buffer>
void grow_mirrored(Buffer& buf, std::size_t n, const char* label) {
  const auto* before = buf.d.data();
  grow(buf.d, n, label);
  if (buf.d.data() != before || buf.h.extent(0) != buf.d.extent(0)) {
    buf.h = Kokkos::create_mirror_view(buf.d);
  }
}

/// The first `n` entries of a host mirror from its DeviceType view (a no-op where they alias).
template <class Buffer>
void to_host(Buffer& buf, std::size_t n) {
  const Kokkos::pair<std::size_t, std::size_t> range(0, n);
  Kokkos::deep_copy(Kokkos::subview(buf.h, range), Kokkos::subview(buf.d, range));
}

/// A host array of the model's results as a DeviceType view: the array itself where DeviceType
/// reads host memory, else `staging` (grown as needed) after one copy.
template <class DeviceType, class V>
Kokkos::View<const V*, DeviceType, Kokkos::MemoryTraits<Kokkos::Unmanaged>> on_device(
    const V* host, std::size_t n, Kokkos::View<V*, DeviceType>& staging, const char* label) {
  using Result = Kokkos::View<const V*, DeviceType, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  if constexpr (kReadsHost<DeviceType>) {
    (void)staging;
    (void)label;
    return Result(host, n);
  } else {
    grow(staging, n, label);
    const Kokkos::pair<std::size_t, std::size_t> range(0, n);
    Kokkos::deep_copy(
        Kokkos::subview(staging, range),
        Kokkos::View<const V*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host, n));
    return Result(staging.data(), n);
  }
}

/// Builds the model's graph from the KOKKOS full neighbor list: edges i -> j for local i within
/// the cutoff, grouped by i in index order, as the host styles build them. The
/// exclusive scan is this functor's only reduction-like launch, hence value_type = int.
template <class DeviceType, class T>
struct GraphFunctor {
  struct TagCountEdges {};
  struct TagEdgeOffsets {};
  struct TagFillEdges {};
  struct TagSpecies {};
  using value_type = int;
  using AT = ArrayTypes<DeviceType>;

  typename AT::t_x_array_randomread m_x;
  typename AT::t_int_1d_randomread m_type;
  typename AT::t_tagint_1d_randomread m_tag;
  typename AT::t_int_1d_randomread m_ilist;
  typename AT::t_int_1d_randomread m_numneigh;
  typename AT::t_neighbors_2d m_neighbors;
  Kokkos::View<const int*, DeviceType> m_type_species;
  double m_cutsq = 0, m_min_rsq = 0;
  int m_nlocal = 0;

  Kokkos::View<int*, DeviceType> m_count;
  Kokkos::View<int*, DeviceType> m_edge_start;
  Kokkos::View<int*, DeviceType> m_center, m_neighbor, m_species;
  Kokkos::View<T*, DeviceType> m_vectors;
  Kokkos::View<int, DeviceType> m_close_flag;
  Kokkos::View<tagint[2], DeviceType> m_close_tags;
  Kokkos::View<double, DeviceType> m_close_rsq;

  // Edges of local atom i; a pair closer than the minimum distance is recorded (once, by
  // whichever thread gets there first) for the host to report.
  KOKKOS_INLINE_FUNCTION void operator()(TagCountEdges, int ii) const {
    const int i = m_ilist(ii);
    const double xi = m_x(i, 0), yi = m_x(i, 1), zi = m_x(i, 2);
    const int jnum = m_numneigh(i);
    int count = 0;
    for (int jj = 0; jj < jnum; ++jj) {
      const int j = m_neighbors(i, jj) & NEIGHMASK;
      const double dx = m_x(j, 0) - xi, dy = m_x(j, 1) - yi, dz = m_x(j, 2) - zi;
      const double rsq = dx * dx + dy * dy + dz * dz;
      if (rsq < m_min_rsq && Kokkos::atomic_compare_exchange(&m_close_flag(), 0, 1) == 0) {
        const tagint a = m_tag(i), b = m_tag(j);
        m_close_tags(0) = a < b ? a : b;
        m_close_tags(1) = a < b ? b : a;
        m_close_rsq() = rsq;
      }
      count += rsq < m_cutsq ? 1 : 0;
    }
    m_count(i) = count;
  }

  // Exclusive scan over i = 0..nlocal (one past the end), so that m_edge_start(nlocal) is the
  // number of edges even when there are no local atoms.
  KOKKOS_INLINE_FUNCTION void operator()(TagEdgeOffsets, int i, int& update, bool final) const {
    if (final) {
      m_edge_start(i) = update;
    }
    update += i < m_nlocal ? m_count(i) : 0;
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagFillEdges, int ii) const {
    const int i = m_ilist(ii);
    const double xi = m_x(i, 0), yi = m_x(i, 1), zi = m_x(i, 2);
    const int jnum = m_numneigh(i);
    int e = m_edge_start(i);
    for (int jj = 0; jj < jnum; ++jj) {
      const int j = m_neighbors(i, jj) & NEIGHMASK;
      const double dx = m_x(j, 0) - xi, dy = m_x(j, 1) - yi, dz = m_x(j, 2) - zi;
      if (dx * dx + dy * dy + dz * dz >= m_cutsq) {
        continue;
      }
      m_center(e) = i;
      m_neighbor(e) = j;
      m_vectors(3 * e) = static_cast<T>(dx);
      m_vectors(3 * e + 1) = static_cast<T>(dy);
      m_vectors(3 * e + 2) = static_cast<T>(dz);
      ++e;
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagSpecies, int i) const {
    m_species(i) = m_type_species(m_type(i));
  }
};

/// Tallies the model's dE/d(edge vector) g of edge i -> j (v = x_j - x_i): F_i += g, F_j -= g;
/// per-atom virial -v (x) g half to each atom; global virial by an edge reduction or by
/// sum_i x_i . f_i (fdotr) over local and ghost atoms. Forces and per-atom virials land on
/// any atom of a full list, so they go through ScatterViews with Kokkos' defaults for the
/// execution space (plain on Serial, duplicated on OpenMP, atomic on GPUs). G is the precision
/// the model returns dE/dv in (MACE: its compute precision; CHGNet: double).
template <class DeviceType, class T, class G>
struct TallyFunctor {
  template <int VFLAG_ATOM>
  struct TagTallyEdges {};
  struct TagTallyEatom {};
  struct TagVirialFdotr {};
  using value_type = EV_FLOAT;
  using AT = ArrayTypes<DeviceType>;
  using ScatterF = Kokkos::Experimental::ScatterView<F_FLOAT* [3], typename AT::t_f_array::array_layout,
                                                     typename KKDevice<DeviceType>::value,
                                                     Kokkos::Experimental::ScatterSum>;
  using ScatterVatom =
      Kokkos::Experimental::ScatterView<F_FLOAT* [6], typename AT::t_virial_array::array_layout,
                                        typename KKDevice<DeviceType>::value,
                                        Kokkos::Experimental::ScatterSum>;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

  Kokkos::View<const int*, DeviceType> m_center, m_neighbor;
  Kokkos::View<const T*, DeviceType> m_vectors;
  Kokkos::View<const G*, DeviceType, Unmanaged> m_gradient;
  Kokkos::View<const double*, DeviceType, Unmanaged> m_node_energy;
  typename AT::t_x_array_randomread m_x;
  typename AT::t_f_array m_f;
  typename AT::t_efloat_1d m_eatom;
  ScatterF m_scatter_f;
  ScatterVatom m_scatter_vatom;
  int m_skip_begin = 0, m_skip_end = 0;  // atoms fdotr leaves out (neigh_modify include)

  template <int VFLAG_ATOM>
  KOKKOS_INLINE_FUNCTION void operator()(TagTallyEdges<VFLAG_ATOM> tag, int e) const {
    EV_FLOAT unused;
    tally(tag, e, unused, false);
  }
  template <int VFLAG_ATOM>
  KOKKOS_INLINE_FUNCTION void operator()(TagTallyEdges<VFLAG_ATOM> tag, int e, EV_FLOAT& ev) const {
    tally(tag, e, ev, true);
  }

  template <int VFLAG_ATOM>
  KOKKOS_INLINE_FUNCTION void tally(TagTallyEdges<VFLAG_ATOM>, int e, EV_FLOAT& ev, bool global) const {
    const int i = m_center(e), j = m_neighbor(e);
    const double g[3] = {static_cast<double>(m_gradient(3 * e)), static_cast<double>(m_gradient(3 * e + 1)),
                         static_cast<double>(m_gradient(3 * e + 2))};
    auto f = m_scatter_f.access();
    for (int k = 0; k < 3; ++k) {
      f(i, k) += g[k];
      f(j, k) -= g[k];
    }
    if (!global && !VFLAG_ATOM) {
      return;
    }
    const double v[3] = {static_cast<double>(m_vectors(3 * e)), static_cast<double>(m_vectors(3 * e + 1)),
                         static_cast<double>(m_vectors(3 * e + 2))};
    const double w[6] = {-v[0] * g[0], -v[1] * g[1], -v[2] * g[2], -v[0] * g[1], -v[0] * g[2], -v[1] * g[2]};
    if (global) {
      for (int k = 0; k < 6; ++k) {
        ev.v[k] += w[k];
      }
    }
    if (VFLAG_ATOM) {
      auto vatom = m_scatter_vatom.access();
      for (int k = 0; k < 6; ++k) {
        vatom(i, k) += 0.5 * w[k];
        vatom(j, k) += 0.5 * w[k];
      }
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagTallyEatom, int i) const { m_eatom(i) += m_node_energy(i); }

  // The order of Pair::virial_fdotr_compute: xx yy zz xy xz yz.
  KOKKOS_INLINE_FUNCTION void operator()(TagVirialFdotr, int i, EV_FLOAT& ev) const {
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
  d_close_flag = Kokkos::View<int, DeviceType>("fastmlip::pair_kk::close_flag");
  d_close_tags = Kokkos::View<tagint[2], DeviceType>("fastmlip::pair_kk::close_tags");
  d_close_rsq = Kokkos::View<double, DeviceType>("fastmlip::pair_kk::close_rsq");
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
  d_type_species = Kokkos::View<int*, DeviceType>("fastmlip::pair_kk::type_species", n);
  Kokkos::deep_copy(d_type_species,
                    Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        this->m_type_species.data(), n));
}

template <class DeviceType, class Style>
double PairFastmlipKokkos<DeviceType, Style>::memory_usage() {
  double bytes = Style::memory_usage();
  bytes += static_cast<double>(d_count.span() + d_edge_start.span() + m_species.d.span() + m_center.d.span() +
                               m_neighbor.d.span()) *
           sizeof(int);
  bytes +=
      static_cast<double>(m_buffers_d.vectors.d.span() + m_buffers_d.gradient.span() + d_node_energy.span()) *
      sizeof(double);
  bytes += static_cast<double>(m_buffers_f.vectors.d.span() + m_buffers_f.gradient.span()) * sizeof(float);
  if (!kReadsHost<DeviceType>) {  // separate host mirrors
    bytes += static_cast<double>(m_species.h.span() + m_center.h.span() + m_neighbor.h.span()) * sizeof(int);
    bytes += static_cast<double>(m_buffers_d.vectors.h.span()) * sizeof(double) +
             static_cast<double>(m_buffers_f.vectors.h.span()) * sizeof(float);
  }
  return bytes;
}

template <class DeviceType, class Style>
template <class T>
typename PairFastmlipKokkos<DeviceType, Style>::template PrecisionBuffers<T>&
PairFastmlipKokkos<DeviceType, Style>::buffers() {
  if constexpr (std::is_same_v<T, double>) {
    return m_buffers_d;
  } else {
    return m_buffers_f;
  }
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
  const int inum = this->list->inum;
  auto* k_list = static_cast<NeighListKokkos<DeviceType>*>(this->list);

  // Graph on DeviceType: count, scan, fill.
  grow(d_count, nlocal, "fastmlip::pair_kk::count");
  grow(d_edge_start, nlocal + 1, "fastmlip::pair_kk::edge_start");
  grow_mirrored(m_species, nall, "fastmlip::pair_kk::species");
  Kokkos::deep_copy(Kokkos::subview(d_count, Kokkos::pair<int, int>(0, nlocal)), 0);  // atoms not in ilist
  Kokkos::deep_copy(d_close_flag, 0);

  using Graph = GraphFunctor<DeviceType, T>;
  Graph graph_kernels;
  graph_kernels.m_x = this->atomKK->k_x.template view<DeviceType>();
  graph_kernels.m_type = this->atomKK->k_type.template view<DeviceType>();
  graph_kernels.m_tag = this->atomKK->k_tag.template view<DeviceType>();
  graph_kernels.m_ilist = k_list->d_ilist;
  graph_kernels.m_numneigh = k_list->d_numneigh;
  graph_kernels.m_neighbors = k_list->d_neighbors;
  graph_kernels.m_type_species = d_type_species;
  graph_kernels.m_cutsq = this->m_cutoff * this->m_cutoff;
  graph_kernels.m_min_rsq = Style::kMinDistance * Style::kMinDistance;
  graph_kernels.m_nlocal = nlocal;
  graph_kernels.m_count = d_count;
  graph_kernels.m_edge_start = d_edge_start;
  graph_kernels.m_species = m_species.d;
  graph_kernels.m_close_flag = d_close_flag;
  graph_kernels.m_close_tags = d_close_tags;
  graph_kernels.m_close_rsq = d_close_rsq;

  Kokkos::parallel_for("fastmlip::pair_kk::count_edges",
                       Kokkos::RangePolicy<DeviceType, typename Graph::TagCountEdges>(0, inum), graph_kernels);
  int close = 0;
  Kokkos::deep_copy(close, d_close_flag);
  if (close != 0) {
    auto h_tags = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d_close_tags);
    double rsq = 0;
    Kokkos::deep_copy(rsq, d_close_rsq);
    this->error_too_close(h_tags(0), h_tags(1), rsq);
  }
  Kokkos::parallel_scan("fastmlip::pair_kk::edge_offsets",
                        Kokkos::RangePolicy<DeviceType, typename Graph::TagEdgeOffsets>(0, nlocal + 1),
                        graph_kernels);
  int num_edges = 0;
  Kokkos::deep_copy(num_edges, Kokkos::subview(d_edge_start, nlocal));

  auto& buf = buffers<T>();
  grow_mirrored(m_center, num_edges, "fastmlip::pair_kk::center");
  grow_mirrored(m_neighbor, num_edges, "fastmlip::pair_kk::neighbor");
  grow_mirrored(buf.vectors, 3 * static_cast<std::size_t>(num_edges), "fastmlip::pair_kk::vectors");
  graph_kernels.m_center = m_center.d;
  graph_kernels.m_neighbor = m_neighbor.d;
  graph_kernels.m_vectors = buf.vectors.d;
  Kokkos::parallel_for("fastmlip::pair_kk::fill_edges",
                       Kokkos::RangePolicy<DeviceType, typename Graph::TagFillEdges>(0, inum), graph_kernels);
  Kokkos::parallel_for("fastmlip::pair_kk::species",
                       Kokkos::RangePolicy<DeviceType, typename Graph::TagSpecies>(0, nall), graph_kernels);

  // The model, in host memory (see the header): graph to the host mirrors (and positions and IDs
  // for a style that reads them, as CHGNet's bond matching does), results back.
  to_host(m_species, nall);
  to_host(m_center, num_edges);
  to_host(m_neighbor, num_edges);
  to_host(buf.vectors, 3 * static_cast<std::size_t>(num_edges));
  if (this->evaluate_reads_atoms()) {
    this->atomKK->sync(Host, X_MASK | TAG_MASK);
  }
  typename Style::template Edges<T> edges;
  edges.nlocal = nlocal;
  edges.nall = nall;
  edges.num_edges = num_edges;
  edges.species = m_species.h.data();
  edges.center = m_center.h.data();
  edges.neighbor = m_neighbor.h.data();
  edges.vectors = buf.vectors.h.data();
  typename Style::Output out;
  {
    ExchangeOnHost host_exchange(this);
    out = this->evaluate(edges);
  }
  this->check_finite(out, edges);

  if (this->eflag_global) {
    this->eng_vdwl += out.energy;  // the model's own double-precision sum of the per-atom energies
  }
  if (this->eflag_atom) {
    TallyFunctor<DeviceType, T, double> eatom;
    eatom.m_node_energy = on_device<DeviceType>(out.node_energy, nlocal, d_node_energy,
                                                "fastmlip::pair_kk::node_energy");
    eatom.m_eatom = d_eatom;
    Kokkos::parallel_for("fastmlip::pair_kk::tally_eatom",
                         Kokkos::RangePolicy<DeviceType, typename TallyFunctor<DeviceType, T, double>::TagTallyEatom>(
                             0, nlocal),
                         eatom);
  }
  if (out.gradient_d != nullptr) {
    tally_kk<T>(num_edges, out.gradient_d);
  } else {
    tally_kk<T>(num_edges, out.gradient_f);
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
template <class T, class G>
void PairFastmlipKokkos<DeviceType, Style>::tally_kk(int num_edges, const G* gradient) {
  using Tally = TallyFunctor<DeviceType, T, G>;
  Tally tally;
  tally.m_center = m_center.d;
  tally.m_neighbor = m_neighbor.d;
  tally.m_vectors = buffers<T>().vectors.d;
  tally.m_gradient = on_device<DeviceType>(gradient, 3 * static_cast<std::size_t>(num_edges), buffers<G>().gradient,
                                           "fastmlip::pair_kk::gradient");
  tally.m_x = this->atomKK->k_x.template view<DeviceType>();
  tally.m_f = this->atomKK->k_f.template view<DeviceType>();
  tally.m_scatter_f = typename Tally::ScatterF(tally.m_f);
  if (this->vflag_atom) {
    tally.m_scatter_vatom = typename Tally::ScatterVatom(d_vatom);
  }

  const bool explicit_virial = this->vflag_global && !this->vflag_fdotr;
  EV_FLOAT ev;
  if (this->vflag_atom) {
    using Policy = Kokkos::RangePolicy<DeviceType, typename Tally::template TagTallyEdges<1>>;
    if (explicit_virial) {
      Kokkos::parallel_reduce("fastmlip::pair_kk::tally_edges", Policy(0, num_edges), tally, ev);
    } else {
      Kokkos::parallel_for("fastmlip::pair_kk::tally_edges", Policy(0, num_edges), tally);
    }
  } else {
    using Policy = Kokkos::RangePolicy<DeviceType, typename Tally::template TagTallyEdges<0>>;
    if (explicit_virial) {
      Kokkos::parallel_reduce("fastmlip::pair_kk::tally_edges", Policy(0, num_edges), tally, ev);
    } else {
      Kokkos::parallel_for("fastmlip::pair_kk::tally_edges", Policy(0, num_edges), tally);
    }
  }
  Kokkos::Experimental::contribute(tally.m_f, tally.m_scatter_f);
  if (this->vflag_atom) {
    Kokkos::Experimental::contribute(d_vatom, tally.m_scatter_vatom);
  }
  if (explicit_virial) {
    for (int k = 0; k < 6; ++k) {
      this->virial[k] += ev.v[k];
    }
  }
  if (this->vflag_fdotr) {
    // Pair::virial_fdotr_compute on DeviceType: all local and ghost atoms, or with
    // neigh_modify include only the first nfirst local atoms and the ghosts.
    if (this->neighbor->includegroup != 0) {
      tally.m_skip_begin = this->atom->nfirst;
      tally.m_skip_end = this->atom->nlocal;
    }
    EV_FLOAT fdotr;
    Kokkos::parallel_reduce("fastmlip::pair_kk::virial_fdotr",
                            Kokkos::RangePolicy<DeviceType, typename Tally::TagVirialFdotr>(
                                0, this->atom->nlocal + this->atom->nghost),
                            tally, fdotr);
    for (int k = 0; k < 6; ++k) {
      this->virial[k] += fdotr.v[k];
    }
    this->vflag_fdotr = 0;
  }
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

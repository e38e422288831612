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
#include "comm_kokkos.h"
#include "error.h"
#include "force.h"
#include "graph/edge_tally.hpp"
#include "lammps.h"
#include "lammps_compat.h"
#include "memory_kokkos.h"
#include "models/exchange_on_host.hpp"
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

/// During the model's evaluation the pair presents itself to CommKokkos as a host pair, so that
/// the exchanges of host rows (CHGNet's bond slots, the ghost-owner lookup, and node rows where
/// LAMMPS packs on the host) take LAMMPS' host path through pack_forward_comm and friends. A
/// node-row exchange that LAMMPS packs on the device switches back for its call (AsDevicePair).
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

/// An exchange's rows and CommKokkos's buffer on DeviceType: the work of kokkos_pair_comm.h's four
/// hooks. Each atom of the call contributes `per_pass` rows of `width` values: its node row
/// (per_pass 1, no `start`), or its slot rows pass * per_pass.. (`start`: each atom's first slot
/// row; slots beyond its count travel as zeros, as the host pack_atom does). One thread per
/// buffer value. A swap's send list names each atom once, so the reverse sum has no two threads
/// on one value.
struct TagPackRows {};       // buf <- rows of atom list(i)
struct TagUnpackRows {};     // rows of atom first + i <- buf
struct TagPackGhostRows {};  // buf <- rows of atom first + i
struct TagAddRows {};        // rows of atom list(i) += buf

template <class DeviceType, class T>
struct RowsComm {
  using Memory = typename DeviceType::memory_space;
  Kokkos::View<T**, Kokkos::LayoutRight, Memory, Kokkos::MemoryTraits<Kokkos::Unmanaged>> m_rows;
  fastmlip::plugin::kokkos_comm_detail::SendList<DeviceType> m_list;
  Kokkos::View<const int*, Memory> m_start;
  double* m_buf = nullptr;
  int m_first = 0, m_width = 1, m_per_pass = 1, m_pass = 0;

  /// Buffer value v: atom index i of the call, and the row (or -1: a slot the atom lacks) and
  /// value k of that atom's part.
  KOKKOS_INLINE_FUNCTION void locate(int v, int atom_of_call, int& row, int& k) const {
    const int q = v / m_width;  // the atom's q-th row in the buffer, counted over the call
    k = v - q * m_width;
    const int slot = q % m_per_pass;
    if (m_start.data() == nullptr) {
      row = atom_of_call;
      return;
    }
    const int first = m_start(atom_of_call), count = m_start(atom_of_call + 1) - first;
    const int s = m_pass * m_per_pass + slot;
    row = s < count ? first + s : -1;
  }
  KOKKOS_INLINE_FUNCTION int call_index(int v) const { return v / (m_width * m_per_pass); }

  KOKKOS_INLINE_FUNCTION void operator()(TagPackRows, int v) const {
    int row, k;
    locate(v, m_list(call_index(v)), row, k);
    m_buf[v] = row >= 0 ? static_cast<double>(m_rows(row, k)) : 0.0;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagUnpackRows, int v) const {
    int row, k;
    locate(v, m_first + call_index(v), row, k);
    if (row >= 0) {
      m_rows(row, k) = static_cast<T>(m_buf[v]);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagPackGhostRows, int v) const {
    int row, k;
    locate(v, m_first + call_index(v), row, k);
    m_buf[v] = row >= 0 ? static_cast<double>(m_rows(row, k)) : 0.0;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagAddRows, int v) const {
    int row, k;
    locate(v, m_list(call_index(v)), row, k);
    if (row >= 0) {
      m_rows(row, k) += static_cast<T>(m_buf[v]);
    }
  }
};

/// One hook's launch over n atoms on the rows an exchange bound: the pair's CommRows `comm` (the
/// rows, d in double or else f in float, their width and the pass) and BoundLayout `bound` (how
/// many rows, and for slot rows each atom's first and the slots per pass). Returns the number of
/// buffer values.
template <class DeviceType, class Tag, class Comm, class Bound>
int launch_rows_comm(const char* label, const Comm& comm, const Bound& bound, int n, int first,
                     const fastmlip::plugin::kokkos_comm_detail::SendList<DeviceType>& list, double* buf) {
  const int values = n * bound.per_pass * comm.width;
  const auto run = [&](auto* rows) {
    using T = std::remove_pointer_t<decltype(rows)>;
    RowsComm<DeviceType, T> c;
    c.m_rows = decltype(c.m_rows)(rows, bound.rows, comm.width);
    c.m_list = list;
    c.m_start = bound.start;
    c.m_buf = buf;
    c.m_first = first;
    c.m_width = comm.width;
    c.m_per_pass = bound.per_pass;
    c.m_pass = comm.pass;
    Kokkos::parallel_for(label, Kokkos::RangePolicy<typename DeviceType::execution_space, Tag>(0, values), c);
  };
  if (comm.d != nullptr) {
    run(comm.d);
  } else {
    run(comm.f);
  }
  return values;
}

/// CommKokkos's settings for reverse pair communication where this LAMMPS has one (releases
/// after 29 Sep 2021); without it the reverse is classic, on the host.
template <class C>
auto reverse_pair_comm_classic(const C& comm, int)
    -> decltype(static_cast<bool>(comm.reverse_pair_comm_classic)) {
  return static_cast<bool>(comm.reverse_pair_comm_classic);
}
template <class C>
bool reverse_pair_comm_classic(const C&, long) {
  return true;
}

/// For one exchange the pair presents itself to CommKokkos as a device pair (execution_space
/// Device; and, where LAMMPS has the flag, reverse_comm_device), so that it calls the KOKKOS
/// hooks; the model's evaluation otherwise runs as a host pair (ExchangeOnHost).
class AsDevicePair {
 public:
  explicit AsDevicePair(Pair* pair) : m_pair(pair), m_saved(pair->execution_space) {
    pair->execution_space = Device;
    m_saved_reverse = set_reverse_comm_device(*pair, 1, 0);
  }
  ~AsDevicePair() {
    m_pair->execution_space = m_saved;
    set_reverse_comm_device(*m_pair, m_saved_reverse, 0);
  }
  AsDevicePair(const AsDevicePair&) = delete;
  AsDevicePair& operator=(const AsDevicePair&) = delete;

 private:
  /// Sets P::reverse_comm_device where LAMMPS has it; returns the value it had.
  template <class P>
  static auto set_reverse_comm_device(P& pair, int value, int)
      -> decltype(static_cast<int>(pair.reverse_comm_device)) {
    const int old = static_cast<int>(pair.reverse_comm_device);
    pair.reverse_comm_device = value;
    return old;
  }
  template <class P>
  static int set_reverse_comm_device(P&, int, long) {
    return 0;
  }
  Pair* m_pair;
  ExecutionSpace m_saved;
  int m_saved_reverse = 0;
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
void PairFastmlipKokkos<DeviceType, Style>::exchange_in_model_memory(double* rows, int width, bool reverse) {
  exchange_rows(rows, width, reverse, false);
}
template <class DeviceType, class Style>
void PairFastmlipKokkos<DeviceType, Style>::exchange_in_model_memory(float* rows, int width, bool reverse) {
  exchange_rows(rows, width, reverse, false);
}
template <class DeviceType, class Style>
void PairFastmlipKokkos<DeviceType, Style>::exchange_slots_in_model_memory(double* rows, int width,
                                                                           bool reverse) {
  exchange_rows(rows, width, reverse, true);
}
template <class DeviceType, class Style>
void PairFastmlipKokkos<DeviceType, Style>::exchange_slots_in_model_memory(float* rows, int width,
                                                                           bool reverse) {
  exchange_rows(rows, width, reverse, true);
}

template <class DeviceType, class Style>
bool PairFastmlipKokkos<DeviceType, Style>::packs_on_device(bool reverse) const {
  // CommKokkos calls the hooks on LMPDeviceType only; a tiled decomposition (CommTiledKokkos)
  // packs pair rows on the host.
  if constexpr (!std::is_same_v<DeviceType, LMPDeviceType>) {
    (void)reverse;
    return false;
  } else {
    const auto* kk = dynamic_cast<const CommKokkos*>(this->comm);
    if (kk == nullptr) {
      return false;
    }
    return reverse ? fastmlip::plugin::kDeviceReverse && !reverse_pair_comm_classic(*kk, 0)
                   : !kk->forward_pair_comm_classic;
  }
}

template <class DeviceType, class Style>
template <class T>
void PairFastmlipKokkos<DeviceType, Style>::exchange_rows(T* rows, int width, bool reverse, bool slots) {
  const auto host_exchange = [this, width, reverse, slots](T* host) {
    if (slots) {
      this->exchange_slot_rows(host, width, reverse);
    } else {
      this->exchange_nodes(host, width, reverse);
    }
  };
  if constexpr (!std::is_same_v<Memory, typename Style::DeviceMemory>) {
    // Not reached: only a model in DeviceType's memory is evaluated in place (compute_kk), and
    // only such a model is handed an exchange in its memory. Its rows would be host rows here.
    host_exchange(rows);
  } else {
    const int nlocal = this->atom->nlocal, nall = nlocal + this->atom->nghost;
    if (!m_exchange_logged && this->comm->me == 0) {
      const auto where = [&](bool r) {
        return packs_on_device(r)
                   ? fmt::format("in {} memory (the KOKKOS package's pair communication)", Memory::name())
                   : std::string("on the host (LAMMPS' classic pair communication)");
      };
      utils::logmesg(this->lmp,
                     "pair_style {}/kk: the model's ghost rows are packed {} forward, {} in reverse\n",
                     this->m_style, where(false), where(true));
    }
    m_exchange_logged = true;
    const auto layout = slots ? this->slot_layout_in_model_memory() : typename Style::SlotLayout{};
    const int n_rows = slots ? layout.n_slots : nall, n_local_rows = slots ? layout.n_local_slots : nlocal;
    const Kokkos::View<T**, Kokkos::LayoutRight, Memory> view(rows, n_rows, width);
    if (!packs_on_device(reverse)) {
      using fastmlip::models::ExchangeRows;
      // Slot rows are read and written wherever they are (the host exchange's layout is per atom).
      const ExchangeRows what = slots     ? ExchangeRows::any
                                : reverse ? ExchangeRows::reverse
                                          : ExchangeRows::forward;
      fastmlip::models::exchange_on_host(view, n_local_rows, what, staging<T>(), host_exchange);
      return;
    }
    m_bound.start = slots ? layout.start : Kokkos::View<const int*, Memory>();
    m_bound.per_pass = slots ? layout.per_pass : 1;
    m_bound.rows = n_rows;
    for (int pass = 0; pass < (slots ? layout.passes : 1); ++pass) {
      this->bind_rows(rows, width);
      this->m_comm.slots = slots;
      this->m_comm.pass = pass;
      AsDevicePair device(this);
      if (reverse) {
        this->comm_reverse = m_bound.per_pass * width;
        fastmlip::plugin::reverse_comm(this->comm, this);
      } else {
        this->comm_forward = m_bound.per_pass * width;
        fastmlip::plugin::forward_comm(this->comm, this);
      }
    }
    this->m_comm = typename Style::CommRows{};
    m_bound = BoundLayout{};
    if (reverse) {
      Kokkos::deep_copy(Kokkos::subview(view, std::make_pair(n_local_rows, n_rows), Kokkos::ALL()), T(0));
    }
  }
}

template <class DeviceType, class Style>
int PairFastmlipKokkos<DeviceType, Style>::pack_rows(int n, const SendList& list, double* buf) {
  return launch_rows_comm<DeviceType, TagPackRows>("fastmlip::pair_kk::pack_forward", this->m_comm, m_bound,
                                                   n, 0, list, buf);
}
template <class DeviceType, class Style>
void PairFastmlipKokkos<DeviceType, Style>::unpack_rows(int n, int first, const double* buf) {
  launch_rows_comm<DeviceType, TagUnpackRows>("fastmlip::pair_kk::unpack_forward", this->m_comm, m_bound, n,
                                              first, SendList(), const_cast<double*>(buf));
}
template <class DeviceType, class Style>
int PairFastmlipKokkos<DeviceType, Style>::pack_ghost_rows(int n, int first, double* buf) {
  return launch_rows_comm<DeviceType, TagPackGhostRows>("fastmlip::pair_kk::pack_reverse", this->m_comm,
                                                        m_bound, n, first, SendList(), buf);
}
template <class DeviceType, class Style>
void PairFastmlipKokkos<DeviceType, Style>::add_rows(int n, const SendList& list, const double* buf) {
  launch_rows_comm<DeviceType, TagAddRows>("fastmlip::pair_kk::unpack_reverse", this->m_comm, m_bound, n, 0,
                                           list, const_cast<double*>(buf));
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

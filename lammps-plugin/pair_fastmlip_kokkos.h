// SPDX-License-Identifier: MIT
#pragma once
// pair_style fastmlip/mace/kk and fastmlip/chgnet/kk (and their /kk/device, /kk/host names):
// the KOKKOS-package variants of the fastmlip pair styles, for a LAMMPS started with `-k on`
// (with `-sf kk`, plain `pair_style fastmlip/mace` resolves to fastmlip/mace/kk). One class
// template serves both models: PairFastmlipKokkos<DeviceType, Style> is Style with the graph
// building and the tally moved onto DeviceType.
//
// What runs where. On DeviceType, with Kokkos: the model graph is built from the KOKKOS
// package's full neighbor list by the core's graph::GraphBuilder (the host styles run the same
// kernels on the host), and forces, per-atom energies and virials and the global virial are
// tallied from the model's dE/d(edge vector) by the core's graph::tally_edges. In between, the
// model runs with its per-layer ghost exchanges (packed on DeviceType where LAMMPS' KOKKOS
// communication does so, see exchange_in_model_memory; else staged through host rows). A model in
// DeviceType's memory (Style::evaluates_in_place: a model on a GPU LAMMPS, where `device`
// defaults to cuda, or a host model on a Serial/OpenMP LAMMPS) is handed the builder's views as
// they are, with the KOKKOS positions and IDs (CHGNet builds its bond slots from them there), and
// its results are tallied where they are: nothing is copied but the per-atom energies' sum
// (and CHGNet's magnetic moments). Otherwise (`device host` on a GPU LAMMPS) the graph is copied
// to host memory for Style's evaluate() and the edge gradients and node energies back, one copy
// each way per step.
//
// Only compiled into a plugin built with Kokkos (LMP_KOKKOS), which must then be loaded into a
// LAMMPS with the KOKKOS package.
#ifdef LMP_KOKKOS

#include <Kokkos_Core.hpp>
#include <string>
#include <type_traits>

#include "graph/atom_graph.hpp"
#include "graph/graph_builder.hpp"
#include "graph/graph_mirror.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kokkos_pair_comm.h"
#include "kokkos_type.h"
#include "pair_fastmlip_chgnet.h"
#include "pair_fastmlip_mace.h"

namespace LAMMPS_NS {

template <class DeviceType, class Style>
class PairFastmlipKokkos : public Style,
                           public fastmlip::plugin::KokkosPairComm<PairFastmlipKokkos<DeviceType, Style>> {
 public:
  using device_type = DeviceType;
  using AT = ArrayTypes<DeviceType>;

  explicit PairFastmlipKokkos(LAMMPS* lmp);
  ~PairFastmlipKokkos() override;

  void compute(int eflag, int vflag) override;
  void init_style() override;
  double memory_usage() override;
  void sync_tags_to_host() override;

  // The model's per-layer node exchanges, handed its rows where it keeps them (DeviceType's
  // memory). Where LAMMPS' KOKKOS communication packs pair rows on the device (CommKokkos with
  // `comm device`, the default on a GPU LAMMPS; and for the reverse exchange a LAMMPS with the
  // reverse hooks), the pair presents itself as a device pair and the rows are packed and
  // unpacked on DeviceType by the hooks below, so only the packed boundary rows reach MPI
  // (through the host, or directly with GPU-aware MPI). Otherwise LAMMPS packs on the host: the
  // rows go there first (models/exchange_on_host.hpp), as every exchange did before.
  bool exchanges_in_model_memory() const override { return true; }
  void exchange_in_model_memory(double* rows, int width, bool reverse) override;
  void exchange_in_model_memory(float* rows, int width, bool reverse) override;
  // CHGNet's bond-slot rows likewise, in Style::slot_layout_in_model_memory()'s passes.
  void exchange_slots_in_model_memory(double* rows, int width, bool reverse) override;
  void exchange_slots_in_model_memory(float* rows, int width, bool reverse) override;

  // kokkos_pair_comm.h's hooks on the rows bound by exchange_rows (m_comm), on DeviceType.
  using SendList = fastmlip::plugin::kokkos_comm_detail::SendList<DeviceType>;
  int pack_rows(int n, const SendList& list, double* buf);
  void unpack_rows(int n, int first, const double* buf);
  int pack_ghost_rows(int n, int first, double* buf);
  void add_rows(int n, const SendList& list, const double* buf);

 private:
  using ExecSpace = typename DeviceType::execution_space;
  using Memory = typename DeviceType::memory_space;
  template <class T>
  using DeviceGraph = fastmlip::graph::AtomGraph<T, Memory>;
  template <class G>
  using Rows = Kokkos::View<const G* [3], Kokkos::LayoutRight, Memory>;

  template <class T>
  void compute_kk(int eflag, int vflag);
  /// check_finite for results in DeviceType's memory (a model evaluated in place): a reduction
  /// there, and only when something is not finite host copies for the message naming the atoms.
  template <class T>
  void check_finite_in_place(const typename Style::DeviceOutput& out, const DeviceGraph<T>& graph);
  template <class T>
  fastmlip::graph::GraphBuilder<ExecSpace, T>& builder() {
    if constexpr (std::is_same_v<T, double>) {
      return m_builder_d;
    } else {
      return m_builder_f;
    }
  }
  /// The graph in host memory for the model, from its DeviceType views: the views themselves
  /// where DeviceType's memory is the host's, else copies into host buffers kept between steps.
  template <class T>
  fastmlip::graph::GraphMirror<T, Kokkos::HostSpace>& host_mirror() {
    if constexpr (std::is_same_v<T, double>) {
      return m_host_d;
    } else {
      return m_host_f;
    }
  }

  Kokkos::View<const int*, Memory> d_type_species;  // [ntypes + 1] model species of each LAMMPS type
  fastmlip::graph::GraphBuilder<ExecSpace, double> m_builder_d;
  fastmlip::graph::GraphBuilder<ExecSpace, float> m_builder_f;
  fastmlip::graph::GraphMirror<double, Kokkos::HostSpace> m_host_d;
  fastmlip::graph::GraphMirror<float, Kokkos::HostSpace> m_host_f;
  // The model's dE/dv and per-atom energies on DeviceType, used only where DeviceType cannot
  // read host memory.
  Kokkos::View<double*, DeviceType> d_gradient_d, d_node_energy;
  Kokkos::View<float*, DeviceType> d_gradient_f;

  /// A node-row (or, `slots`, slot-row) exchange of rows in DeviceType's memory.
  template <class T>
  void exchange_rows(T* rows, int width, bool reverse, bool slots);
  /// The layout of the rows the hooks move, besides m_comm: every atom's row (node rows), or
  /// `per_pass` of each atom's slot rows from `start` (slot rows, pass m_comm.pass).
  struct BoundLayout {
    Kokkos::View<const int*, Memory> start;  // empty for node rows
    int per_pass = 1;
    int rows = 0;  // rows in the bound array
  };
  BoundLayout m_bound;
  /// Whether CommKokkos calls this pair's KOKKOS hooks for a forward (or reverse) exchange.
  bool packs_on_device(bool reverse) const;
  template <class T>
  fastmlip::kernels::impl::GrowBuffer<T, Kokkos::HostSpace>& staging() {
    if constexpr (std::is_same_v<T, double>) {
      return m_staging_d;
    } else {
      return m_staging_f;
    }
  }
  /// The rows of exchanges LAMMPS packs on the host, copied there where DeviceType's memory is
  /// not the host's; kept between calls.
  fastmlip::kernels::impl::GrowBuffer<double, Kokkos::HostSpace> m_staging_d{
      "fastmlip::pair_kk::exchange_rows_host"};
  fastmlip::kernels::impl::GrowBuffer<float, Kokkos::HostSpace> m_staging_f{
      "fastmlip::pair_kk::exchange_rows_host"};

  bool m_route_logged = false;     // the log's line on where the model meets the graph
  bool m_exchange_logged = false;  // the log's line on where its exchanges pack their rows

  DAT::tdual_efloat_1d k_eatom;
  DAT::tdual_virial_array k_vatom;
  typename AT::t_efloat_1d d_eatom;
  typename AT::t_virial_array d_vatom;
};

template <class DeviceType>
using PairFastmlipMaceKokkos = PairFastmlipKokkos<DeviceType, PairFastmlipMace>;
template <class DeviceType>
using PairFastmlipChgnetKokkos = PairFastmlipKokkos<DeviceType, PairFastmlipChgnet>;

}  // namespace LAMMPS_NS

#endif  // LMP_KOKKOS

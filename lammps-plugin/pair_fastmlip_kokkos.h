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
// model runs with its per-layer ghost exchanges (staged through host rows). A model in
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
#include "kokkos_type.h"
#include "pair_fastmlip_chgnet.h"
#include "pair_fastmlip_mace.h"

namespace LAMMPS_NS {

template <class DeviceType, class Style>
class PairFastmlipKokkos : public Style {
 public:
  using device_type = DeviceType;
  using AT = ArrayTypes<DeviceType>;

  explicit PairFastmlipKokkos(LAMMPS* lmp);
  ~PairFastmlipKokkos() override;

  void compute(int eflag, int vflag) override;
  void init_style() override;
  double memory_usage() override;
  void sync_tags_to_host() override;

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

  bool m_route_logged = false;  // the log's line on where the model meets the graph

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

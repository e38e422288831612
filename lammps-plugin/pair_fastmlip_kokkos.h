// SPDX-License-Identifier: MIT
#pragma once
// pair_style fastmlip/mace/kk and fastmlip/chgnet/kk (and their /kk/device, /kk/host names):
// the KOKKOS-package variants of the fastmlip pair styles, for a LAMMPS started with `-k on`
// (with `-sf kk`, plain `pair_style fastmlip/mace` resolves to fastmlip/mace/kk). One class
// template serves both models: PairFastmlipKokkos<DeviceType, Style> is Style with the graph
// building and the tally moved onto DeviceType.
//
// What runs where. On DeviceType, with Kokkos: the model graph is built from the KOKKOS
// package's full neighbor list (edges i -> j counted per local atom, exclusive scan to CSR
// offsets, filled in parallel), and forces, per-atom energies and virials and the global virial
// are tallied from the model's dE/d(edge vector). In between, the model itself (Style's
// evaluate(), the same as the host style's, with its per-layer ghost exchanges) runs in host
// memory, in Kokkos' default host execution space. So the graph is copied to host mirrors and
// the edge gradients and node energies back: on a Serial/OpenMP build the mirrors alias the
// DeviceType views and nothing is copied; on a CUDA/HIP build this is one host<->device copy
// each way per step, and the model is evaluated by the CPU. A device-resident model is future
// work (docs/pair_fastmlip_mace.md, "KOKKOS").
//
// Only compiled into a plugin built with Kokkos (LMP_KOKKOS), which must then be loaded into a
// LAMMPS with the KOKKOS package.
#ifdef LMP_KOKKOS

#include <Kokkos_Core.hpp>

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

  /// A graph buffer on DeviceType and its host mirror (an alias where DeviceType can read
  /// host memory).
  template <class V>
  struct Mirrored {
    Kokkos::View<V*, DeviceType> d;
    typename Kokkos::View<V*, DeviceType>::HostMirror h;
  };
  /// The buffers that depend on the compute precision.
  template <class T>
  struct PrecisionBuffers {
    Mirrored<T> vectors;  // [3 * num_edges] x_j - x_i
    // [3 * num_edges] dE/dv returned in T, used only where DeviceType cannot read host memory.
    Kokkos::View<T*, DeviceType> gradient;
  };

 private:
  template <class T>
  void compute_kk(int eflag, int vflag);
  /// Forces and virials from dE/dv (G: the precision the model returns it in).
  template <class T, class G>
  void tally_kk(int num_edges, const G* gradient);
  template <class T>
  PrecisionBuffers<T>& buffers();

  Kokkos::View<int*, DeviceType> d_type_species;  // [ntypes + 1] model species of each LAMMPS type
  Kokkos::View<int*, DeviceType> d_count;         // [nlocal] edges of each local atom
  Kokkos::View<int*, DeviceType> d_edge_start;    // [nlocal + 1] CSR offsets by centre
  Mirrored<int> m_species;                        // [nall]
  Mirrored<int> m_center, m_neighbor;             // [num_edges]
  PrecisionBuffers<double> m_buffers_d;
  PrecisionBuffers<float> m_buffers_f;
  // [nlocal] per-atom energies, used only where DeviceType cannot read host memory.
  Kokkos::View<double*, DeviceType> d_node_energy;

  // The first pair of atoms found closer than the minimum distance: flag, the two atom IDs
  // (smaller first), and their squared distance.
  Kokkos::View<int, DeviceType> d_close_flag;
  Kokkos::View<tagint[2], DeviceType> d_close_tags;
  Kokkos::View<double, DeviceType> d_close_rsq;

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

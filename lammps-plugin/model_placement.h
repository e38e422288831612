// SPDX-License-Identifier: MIT
#pragma once
// Where a pair style's model runs, for the `device host|cuda` keyword of fastmlip/mace and
// fastmlip/chgnet. `device host` (the default): on the host, in Kokkos' default host execution
// space, on the graph PairFastmlipBase builds (the /kk styles hand it a host copy too). `device
// cuda`: on the GPU, in Kokkos' default execution space, which is a GPU's only in a plugin built
// against a Kokkos with CUDA (the lammps-wheel-cuda preset). There the graph is copied to the GPU
// each step and the model stages its per-layer exchanges through host rows
// (models/exchange_on_host.hpp), so LAMMPS' communication and the tally stay as they are.
#include <Kokkos_Core.hpp>
#include <string>
#include <type_traits>

namespace fastmlip::plugin {

using HostModelSpace = Kokkos::DefaultHostExecutionSpace;
/// Whether this plugin's Kokkos has a GPU backend (its default memory is not the host's).
inline constexpr bool kHaveGpu =
    !Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible;
/// The GPU's execution space where there is one (else the host's, never used for a model).
using DeviceModelSpace = std::conditional_t<kHaveGpu, Kokkos::DefaultExecutionSpace, HostModelSpace>;

/// Why `device <value>` cannot be used by `style` in this plugin ("" when it can).
inline std::string device_problem(const std::string& style, const std::string& value) {
  if (value != "host" && value != "cuda") {
    return "pair_style " + style + ": device must be host or cuda, not '" + value + "'";
  }
  if (value == "cuda" && !kHaveGpu) {
    return "pair_style " + style +
           ": 'device cuda' needs a plugin built with a GPU Kokkos (this one's Kokkos runs on " +
           Kokkos::DefaultExecutionSpace::name() +
           " only); build it with the lammps-wheel-cuda preset (docs/building.md), or use 'device host' or "
           "the /kk style of a KOKKOS LAMMPS";
  }
  return "";
}

/// The four places of a model, Placed<Space, T> each (a model and what it needs in Space's
/// memory); one of them is loaded.
template <template <class, class> class Placed>
struct Placements {
  Placed<HostModelSpace, double> host_d;
  Placed<HostModelSpace, float> host_f;
  Placed<DeviceModelSpace, double> device_d;
  Placed<DeviceModelSpace, float> device_f;

  /// f(model) on the model loaded.
  template <class F>
  decltype(auto) visit(F&& f) const {
    if (host_d.model) {
      return f(*host_d.model);
    }
    if (host_f.model) {
      return f(*host_f.model);
    }
    if (device_d.model) {
      return f(*device_d.model);
    }
    return f(*device_f.model);
  }
  /// f(placed) on the placement loaded for precision T (nothing if T is not the one loaded).
  template <class T, class F>
  void with_loaded(F&& f) {
    auto run = [&](auto& placed) {
      if (placed.model) {
        f(placed);
      }
    };
    if constexpr (std::is_same_v<T, double>) {
      run(host_d), run(device_d);
    } else {
      run(host_f), run(device_f);
    }
  }
  /// Loads the model where `device` ("host" or "cuda") and `single` say, by make(placed).
  template <class F>
  void load(const std::string& device, bool single, F&& make) {
    if (device == "cuda") {
      single ? make(device_f) : make(device_d);
    } else {
      single ? make(host_f) : make(host_d);
    }
  }
};

}  // namespace fastmlip::plugin

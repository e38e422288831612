// SPDX-License-Identifier: MIT
// The styles module, fastmlip_styles.so: registers every style this package provides. The
// loader (plugin.cpp, fastmlipplugin.so) opens it and calls fastmlip_register_styles only after
// checking that the running LAMMPS and MPI are the ones this module was compiled against, since
// this module's LAMMPS C++ symbols and MPI handles bind to exactly those.
#include "compute_fastmlip_magmom.h"
#include "fastmlip_command.h"
#include "lammps.h"
#include "pair_fastmlip_chgnet.h"
#include "pair_fastmlip_kokkos.h"
#include "pair_fastmlip_mace.h"
#include "plugin_abi.h"

#include <cstddef>

#if __has_include("lammpsplugin.h")
#include "lammpsplugin.h"
// The struct we fill must be LAMMPS' own (plugin_abi.h declares it for installs without this header).
static_assert(sizeof(lammpsplugin_t) == sizeof(fastmlip::plugin::PluginEntry));
static_assert(offsetof(lammpsplugin_t, creator) == offsetof(fastmlip::plugin::PluginEntry, creator));
static_assert(offsetof(lammpsplugin_t, handle) == offsetof(fastmlip::plugin::PluginEntry, handle));
#endif

using namespace LAMMPS_NS;
using fastmlip::plugin::PluginEntry;

namespace {
Command* fastmlip_command_creator(LAMMPS* lmp) { return new FastmlipCommand(lmp); }
Pair* pair_fastmlip_mace_creator(LAMMPS* lmp) { return new PairFastmlipMace(lmp); }
Pair* pair_fastmlip_chgnet_creator(LAMMPS* lmp) { return new PairFastmlipChgnet(lmp); }
Compute* compute_fastmlip_magmom_creator(LAMMPS* lmp, int narg, char** arg) {
  return new ComputeFastmlipMagmom(lmp, narg, arg);
}
#ifdef LMP_KOKKOS
Pair* pair_fastmlip_mace_kk_device_creator(LAMMPS* lmp) { return new PairFastmlipMaceKokkos<LMPDeviceType>(lmp); }
Pair* pair_fastmlip_mace_kk_host_creator(LAMMPS* lmp) { return new PairFastmlipMaceKokkos<LMPHostType>(lmp); }
Pair* pair_fastmlip_chgnet_kk_device_creator(LAMMPS* lmp) { return new PairFastmlipChgnetKokkos<LMPDeviceType>(lmp); }
Pair* pair_fastmlip_chgnet_kk_host_creator(LAMMPS* lmp) { return new PairFastmlipChgnetKokkos<LMPHostType>(lmp); }
#endif
}  // namespace

// Default visibility: the module is built with hidden symbols so that the core's names never
// clash with LAMMPS'; only this entry point must be found by the loader's dlsym.
extern "C" __attribute__((visibility("default"))) void fastmlip_register_styles(
    void* lmp_ptr, void* handle, fastmlip::plugin::PluginRegister register_style) {
  auto* lmp = static_cast<LAMMPS*>(lmp_ptr);
  PluginEntry plugin{};
  // The loader checked that this is the LAMMPS we were compiled against; LAMMPS compares this
  // string with its own and prints a note when they differ.
  plugin.version = lmp->version;
  plugin.author = "the fastmlip developers";
  plugin.handle = handle;

  // LAMMPS keeps the name and info pointers (its plugin list), so they are string literals.
  const auto register_v1 = [&](const char* style, const char* name, const char* info, auto* creator) {
    plugin.style = style;
    plugin.name = name;
    plugin.info = info;
    plugin.creator.v1 = reinterpret_cast<fastmlip::plugin::PluginFactory1*>(creator);
    register_style(&plugin, lmp);
  };
  register_v1("command", "fastmlip", "fastmlip command: 'fastmlip info' reports the plugin build",
              &fastmlip_command_creator);
  register_v1("pair", "fastmlip/mace", "MACE potentials from fastmlip potential files (docs/pair_fastmlip_mace.md)",
              &pair_fastmlip_mace_creator);
  register_v1("pair", "fastmlip/chgnet",
              "CHGNet potentials from fastmlip potential files (docs/pair_fastmlip_chgnet.md)",
              &pair_fastmlip_chgnet_creator);

  plugin.style = "compute";
  plugin.name = "fastmlip/magmom";
  plugin.info = "per-atom magnetic moments predicted by pair_style fastmlip/chgnet";
  plugin.creator.v2 = reinterpret_cast<fastmlip::plugin::PluginFactory2*>(&compute_fastmlip_magmom_creator);
  register_style(&plugin, lmp);

#ifdef LMP_KOKKOS
  // The KOKKOS variants under the names the KOKKOS package gives its own styles (PairStyle(x/kk),
  // x/kk/device, x/kk/host): with `-sf kk`, `pair_style fastmlip/mace` resolves to fastmlip/mace/kk.
  const char* mace_kk = "MACE potentials, KOKKOS variant (docs/pair_fastmlip_mace.md)";
  register_v1("pair", "fastmlip/mace/kk", mace_kk, &pair_fastmlip_mace_kk_device_creator);
  register_v1("pair", "fastmlip/mace/kk/device", mace_kk, &pair_fastmlip_mace_kk_device_creator);
  register_v1("pair", "fastmlip/mace/kk/host", mace_kk, &pair_fastmlip_mace_kk_host_creator);
  const char* chgnet_kk = "CHGNet potentials, KOKKOS variant (docs/pair_fastmlip_chgnet.md)";
  register_v1("pair", "fastmlip/chgnet/kk", chgnet_kk, &pair_fastmlip_chgnet_kk_device_creator);
  register_v1("pair", "fastmlip/chgnet/kk/device", chgnet_kk, &pair_fastmlip_chgnet_kk_device_creator);
  register_v1("pair", "fastmlip/chgnet/kk/host", chgnet_kk, &pair_fastmlip_chgnet_kk_host_creator);
#endif
}

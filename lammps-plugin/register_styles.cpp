// SPDX-License-Identifier: MIT
// Entry point of fastmlipplugin.so: `plugin load fastmlipplugin.so` calls lammpsplugin_init,
// which checks the LAMMPS version and registers every style this package provides.
#include "compute_fastmlip_magmom.h"
#include "error.h"
#include "fastmlip_command.h"
#include "pair_fastmlip_chgnet.h"
#include "pair_fastmlip_mace.h"
#include "pair_fastmlip_kokkos.h"
#include "lammps.h"
#include "lammps_compat.h"
#include "lammpsplugin.h"
#include "version.h"
#include "version_gate.h"

using namespace LAMMPS_NS;

// Which LAMMPS this plugin was compiled against. A test build overrides it to exercise the
// refusal path of the version gate.
#ifndef FASTMLIP_COMPILED_LAMMPS_VERSION
#define FASTMLIP_COMPILED_LAMMPS_VERSION LAMMPS_VERSION
#endif

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

// Default visibility: the plugin is built with hidden symbols so that the core's names never
// clash with LAMMPS'; only this entry point must be found by dlsym.
extern "C" __attribute__((visibility("default"))) void lammpsplugin_init(void* lmp_ptr, void* handle, void* regfunc_ptr) {
  auto* lmp = static_cast<LAMMPS*>(lmp_ptr);
  const std::string problem = fastmlip::plugin::check_lammps_version(FASTMLIP_COMPILED_LAMMPS_VERSION, lmp->version);
  if (!problem.empty()) {
    lmp->error->all(FLERR, problem);
  }
  auto register_style = reinterpret_cast<lammpsplugin_regfunc>(regfunc_ptr);

  lammpsplugin_t plugin{};
  plugin.version = FASTMLIP_COMPILED_LAMMPS_VERSION;
  plugin.author = "the fastmlip developers";
  plugin.handle = handle;

  plugin.style = "command";
  plugin.name = "fastmlip";
  plugin.info = "fastmlip command: 'fastmlip info' reports the plugin build";
  plugin.creator.v1 = reinterpret_cast<lammpsplugin_factory1*>(&fastmlip_command_creator);
  register_style(&plugin, lmp);

  plugin.style = "pair";
  plugin.name = "fastmlip/mace";
  plugin.info = "MACE potentials from fastmlip potential files (docs/pair_fastmlip_mace.md)";
  plugin.creator.v1 = reinterpret_cast<lammpsplugin_factory1*>(&pair_fastmlip_mace_creator);
  register_style(&plugin, lmp);

  plugin.name = "fastmlip/chgnet";
  plugin.info = "CHGNet potentials from fastmlip potential files (docs/pair_fastmlip_chgnet.md)";
  plugin.creator.v1 = reinterpret_cast<lammpsplugin_factory1*>(&pair_fastmlip_chgnet_creator);
  register_style(&plugin, lmp);

  plugin.style = "compute";
  plugin.name = "fastmlip/magmom";
  plugin.info = "per-atom magnetic moments predicted by pair_style fastmlip/chgnet";
  plugin.creator.v2 = reinterpret_cast<lammpsplugin_factory2*>(&compute_fastmlip_magmom_creator);
  register_style(&plugin, lmp);
  plugin.style = "pair";

#ifdef LMP_KOKKOS
  // The KOKKOS variants under the names the KOKKOS package gives its own styles (PairStyle(x/kk),
  // x/kk/device, x/kk/host): with `-sf kk`, `pair_style fastmlip/mace` resolves to fastmlip/mace/kk.
  // LAMMPS keeps the name and info pointers (its plugin list), so they are string literals.
  const auto register_pair = [&](const char* name, const char* info, Pair* (*creator)(LAMMPS*)) {
    plugin.name = name;
    plugin.info = info;
    plugin.creator.v1 = reinterpret_cast<lammpsplugin_factory1*>(creator);
    register_style(&plugin, lmp);
  };
  const char* mace_kk = "MACE potentials, KOKKOS variant (docs/pair_fastmlip_mace.md)";
  register_pair("fastmlip/mace/kk", mace_kk, &pair_fastmlip_mace_kk_device_creator);
  register_pair("fastmlip/mace/kk/device", mace_kk, &pair_fastmlip_mace_kk_device_creator);
  register_pair("fastmlip/mace/kk/host", mace_kk, &pair_fastmlip_mace_kk_host_creator);
  const char* chgnet_kk = "CHGNet potentials, KOKKOS variant (docs/pair_fastmlip_chgnet.md)";
  register_pair("fastmlip/chgnet/kk", chgnet_kk, &pair_fastmlip_chgnet_kk_device_creator);
  register_pair("fastmlip/chgnet/kk/device", chgnet_kk, &pair_fastmlip_chgnet_kk_device_creator);
  register_pair("fastmlip/chgnet/kk/host", chgnet_kk, &pair_fastmlip_chgnet_kk_host_creator);
#endif
}

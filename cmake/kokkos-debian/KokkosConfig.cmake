# SPDX-License-Identifier: MIT
# Wrapper around Debian bookworm's Kokkos 3.4.01 CMake config (libtrilinos-kokkos-dev).
#
# Why: Debian builds Kokkos inside Trilinos, whose generated config gives the imported
# target Kokkos::kokkos the include directory "<prefix>/include" computed four levels up from
# the config file, which resolves to /usr/lib/include (it does not exist), while the headers
# sit in /usr/include/trilinos. CMake then refuses to generate any project that links the
# target. We load the real config unchanged and repair just that property, so both the
# LAMMPS build (EXTERNAL_KOKKOS) and fastmlip use one fixed target. Point Kokkos_DIR here.
if(NOT DEFINED FASTMLIP_SYSTEM_KOKKOS_DIR)
  set(FASTMLIP_SYSTEM_KOKKOS_DIR "/usr/lib/x86_64-linux-gnu/cmake/Kokkos")
endif()
include("${FASTMLIP_SYSTEM_KOKKOS_DIR}/KokkosConfig.cmake")

# Kokkos_INCLUDE_DIRS is written relative to the real file; normalise it.
set(_fastmlip_kokkos_inc "")
foreach(_dir IN LISTS Kokkos_INCLUDE_DIRS)
  get_filename_component(_dir "${_dir}" ABSOLUTE)
  list(APPEND _fastmlip_kokkos_inc "${_dir}")
endforeach()
if(NOT EXISTS "${_fastmlip_kokkos_inc}/Kokkos_Core.hpp")
  message(FATAL_ERROR "fastmlip Kokkos wrapper: Kokkos_Core.hpp not found in "
                      "'${_fastmlip_kokkos_inc}'. Install libtrilinos-kokkos-dev, or point "
                      "Kokkos_DIR at a Kokkos install that needs no repair.")
endif()
set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_fastmlip_kokkos_inc}")
# The real target also lists the flag -DKOKKOS_DEPENDENCE as a link item; harmless, kept.
set(Kokkos_INCLUDE_DIRS "${_fastmlip_kokkos_inc}")
set(Kokkos_FOUND TRUE)

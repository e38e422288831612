# SPDX-License-Identifier: MIT
# One Kokkos runtime per LAMMPS process: of liblammps.so and the styles module, at most one may
# define Kokkos' runtime (Kokkos::finalize). Two copies, as when the plugin linked its own static
# Kokkos beside the one a LAMMPS built with its bundled Kokkos carries, abort at exit or worse
# (cmake/FastmlipLammps.cmake). Where neither defines it, both use a shared libkokkoscore.so.
#   -DNM=... -DLAMMPS_LIBRARY=... -DSTYLES=.../fastmlip_styles.so
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FastmlipKokkosRuntime.cmake")
set(carriers "")
foreach(lib IN ITEMS "${LAMMPS_LIBRARY}" "${STYLES}")
  fastmlip_defines_kokkos_runtime("${NM}" "${lib}" defines)
  if(defines STREQUAL "")
    message(FATAL_ERROR "${NM} -D --defined-only ${lib} failed: cannot tell whether it carries Kokkos")
  elseif(defines)
    list(APPEND carriers "${lib}")
  endif()
endforeach()
list(LENGTH carriers n)
if(n GREATER 1)
  message(FATAL_ERROR "two Kokkos runtimes would share one LAMMPS process: ${carriers} each define "
    "Kokkos::finalize. The styles module must link liblammps.so ahead of the Kokkos libraries "
    "(lammps-plugin/CMakeLists.txt, FASTMLIP_LAMMPS_CARRIES_KOKKOS).")
endif()
if(n EQUAL 0)
  message(STATUS "neither ${LAMMPS_LIBRARY} nor ${STYLES} defines Kokkos' runtime: a shared Kokkos library, or none")
else()
  message(STATUS "one Kokkos runtime, in ${carriers}")
endif()

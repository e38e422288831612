# SPDX-License-Identifier: MIT
# Forward the version check to Debian's real file (see KokkosConfig.cmake beside this).
if(NOT DEFINED FASTMLIP_SYSTEM_KOKKOS_DIR)
  set(FASTMLIP_SYSTEM_KOKKOS_DIR "/usr/lib/x86_64-linux-gnu/cmake/Kokkos")
endif()
include("${FASTMLIP_SYSTEM_KOKKOS_DIR}/KokkosConfigVersion.cmake")

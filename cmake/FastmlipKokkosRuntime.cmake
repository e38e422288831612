# SPDX-License-Identifier: MIT
# fastmlip_defines_kokkos_runtime(<nm> <shared library> <out-var>): sets <out-var> to TRUE where the
# library defines Kokkos' runtime (exports Kokkos::finalize: a static Kokkos built into it),
# FALSE where it does not (it uses a shared libkokkoscore.so, or no Kokkos), and "" where nm
# could not read it. Used at configure time (FastmlipLammps.cmake) and by the test
# plugin.one_kokkos_runtime (tests/plugin/check_one_kokkos.cmake), which runs in script mode.
function(fastmlip_defines_kokkos_runtime nm library out)
  execute_process(COMMAND "${nm}" -D --defined-only "${library}" OUTPUT_VARIABLE symbols ERROR_QUIET
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    set(${out} "" PARENT_SCOPE)
  elseif(symbols MATCHES " T _ZN6Kokkos8finalizeEv")
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

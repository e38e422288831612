# SPDX-License-Identifier: MIT
# Compiler flags chosen by FASTMLIP_* options. Nothing numerically risky is on by default.
add_library(fastmlip_flags INTERFACE)
target_compile_options(fastmlip_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
if(FASTMLIP_ENABLE_FAST_MATH)
  target_compile_options(fastmlip_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-ffast-math>)
endif()
if(FASTMLIP_ENABLE_NATIVE)
  target_compile_options(fastmlip_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
if(FASTMLIP_SANITIZE)
  # Applied globally so that every library and test shares one runtime.
  add_compile_options(-fsanitize=${FASTMLIP_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${FASTMLIP_SANITIZE})
endif()
if(FASTMLIP_BUILD_FUZZERS)
  # libFuzzer ships with clang only. Coverage instrumentation goes on every library (global),
  # so that the fuzzers are guided by the parsers' branches; only the harnesses link the
  # fuzzer's main (-fsanitize=fuzzer, tests/fuzz).
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "FASTMLIP_BUILD_FUZZERS needs clang (libFuzzer); use the 'asan' or 'fuzz' preset "
                        "(scripts/install-deps.sh installs Debian's clang)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# fastmlip_host_only_sources(SOURCE...): sources of the calling directory that include no Kokkos
# header, so hold no device code. Where the C++ compiler is Kokkos' nvcc_wrapper (the kokkos-cuda,
# lammps-wheel-cuda and trainer-cuda presets), it compiles every .cpp as CUDA; these are handed to
# the host compiler alone (nvcc_wrapper --host-only), in about a third of the time nvcc takes
# over LibTorch's headers. Should one of them come to include Kokkos, it stops compiling
# (Kokkos' CUDA headers need nvcc), so the list cannot go stale unnoticed. nvcc_wrapper hands
# them a quoted definition (-DX="a b") with its escapes and split at the spaces: put such
# definitions on the sources that read them, not on a target with host-only sources.
function(fastmlip_host_only_sources)
  if(CMAKE_CXX_COMPILER MATCHES "nvcc_wrapper$")
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS --host-only)
  endif()
endfunction()

# fastmlip_reuse_torch_pch(TARGET...): executables that include LibTorch reuse train-potential's
# precompiled <torch/torch.h> (trainer/CMakeLists.txt says why and where it is made).
function(fastmlip_reuse_torch_pch)
  if(TARGET train-potential AND NOT CMAKE_CXX_COMPILER MATCHES "nvcc_wrapper$")
    foreach(target IN LISTS ARGN)
      target_precompile_headers(${target} REUSE_FROM train-potential)
    endforeach()
  endif()
endfunction()

# SPDX-License-Identifier: MIT
# Finds the third-party packages. All come from Debian bookworm (scripts/install-deps.sh);
# a user's own builds work too when their CMake configs are on CMAKE_PREFIX_PATH.
find_package(Threads REQUIRED)
# MPI is needed by the plugin, the LibTorch trainer and the examples, and by the multi-rank
# tests when it is there. A build of the core, its kernels and their tests alone (the CUDA
# kernels on a bare GPU machine, scripts/gpu-check.sh) needs none.
if(FASTMLIP_BUILD_PLUGIN OR FASTMLIP_ENABLE_TORCH OR FASTMLIP_BUILD_EXAMPLES)
  find_package(MPI REQUIRED COMPONENTS C)
else()
  find_package(MPI COMPONENTS C)
endif()
# We use MPI's C API only. OpenMPI's deprecated C++ bindings, pulled in by mpi.h otherwise,
# need libmpi_cxx at link time and are not exported by liblammps (plugin load would fail).
add_compile_definitions(OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(yaml-cpp REQUIRED)  # the trainer's --config files
find_package(ZLIB REQUIRED)  # crc32 of every tensor in a potential file
# LMDB (Debian's liblmdb-dev): train-potential's preprocessed datasets (trainer/data/store.hpp).
# Required with the trainer unless FASTMLIP_REQUIRE_LMDB is OFF (the trainer-cuda preset, which a
# bare GPU machine builds); elsewhere optional. A build without it says so when asked to read or
# write a dataset.
find_path(LMDB_INCLUDE_DIR lmdb.h)
find_library(LMDB_LIBRARY lmdb)
if(LMDB_INCLUDE_DIR AND LMDB_LIBRARY)
  add_library(fastmlip_lmdb INTERFACE)
  target_include_directories(fastmlip_lmdb INTERFACE "${LMDB_INCLUDE_DIR}")
  target_link_libraries(fastmlip_lmdb INTERFACE "${LMDB_LIBRARY}")
elseif(FASTMLIP_ENABLE_TORCH AND FASTMLIP_REQUIRE_LMDB)
  message(FATAL_ERROR "LMDB not found: train-potential needs it for its preprocessed datasets. "
                      "Install liblmdb-dev (scripts/install-deps.sh), or configure with FASTMLIP_ENABLE_TORCH=OFF.")
endif()

# The core's kernels are Kokkos code, so Kokkos is needed with or without FASTMLIP_ENABLE_KOKKOS
# (which adds the /kk styles for a LAMMPS built with KOKKOS). Reuse an existing Kokkos::kokkos
# target (e.g. the one a LAMMPS superbuild made); for a LAMMPS without KOKKOS, the plugin starts
# this Kokkos itself (lammps-plugin/kokkos_runtime.h).
if(NOT TARGET Kokkos::kokkos)
  if(NOT DEFINED Kokkos_DIR AND EXISTS "/usr/lib/x86_64-linux-gnu/cmake/Kokkos/KokkosConfig.cmake")
    # Debian's config needs a repair (see cmake/kokkos-debian/KokkosConfig.cmake).
    set(Kokkos_DIR "${PROJECT_SOURCE_DIR}/cmake/kokkos-debian")
  endif()
  find_package(Kokkos 3.4 REQUIRED CONFIG)
endif()

if(FASTMLIP_ENABLE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)  # H100/H200; override for other GPUs
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  find_package(CUDAToolkit REQUIRED)
endif()

if(FASTMLIP_ENABLE_TORCH)
  get_filename_component(_fastmlip_torch_prefix "${Torch_DIR}/../../.." ABSOLUTE)
  if(Torch_DIR AND EXISTS "${_fastmlip_torch_prefix}/share/cmake/Torch/TorchConfig.cmake")
    # TorchConfig.cmake finds its Caffe2 config and its libraries with PATHS, which CMake searches
    # after the system's: with a second LibTorch installed (Debian's libtorch-dev beside a pip
    # PyTorch) the given Torch_DIR would be mixed with the system's libtorch.so. Its own install
    # prefix (a pip torch package or a LibTorch archive: lib/, share/cmake/) is searched first.
    list(PREPEND CMAKE_PREFIX_PATH "${_fastmlip_torch_prefix}")
  endif()
  if(FASTMLIP_ENABLE_CUDA AND NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    # A LibTorch with CUDA ignores CMAKE_CUDA_ARCHITECTURES (it turns it off) and adds its own
    # -gencode flags to every CUDA source: those of TORCH_CUDA_ARCH_LIST, else of the GPU it
    # detects, else of its list of common GPUs, whose compute_50 nvcc 13 refuses (a build node
    # without a GPU). So it is given the same architectures: "90" is "9.0", "90a" "9.0a".
    set(TORCH_CUDA_ARCH_LIST)
    foreach(_fastmlip_arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
      if(_fastmlip_arch MATCHES "^([0-9]+)([0-9])([af]?)(-real|-virtual)?$")
        list(APPEND TORCH_CUDA_ARCH_LIST "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}${CMAKE_MATCH_3}")
      endif()
    endforeach()
  endif()
  find_package(Torch REQUIRED)
endif()
# NCCL, for train-potential's gradient all-reduce with one GPU per rank (trainer/nccl.hpp), in a
# trainer-cuda build: looked for in PyTorch's own nvidia-nccl wheel first (site-packages/nvidia/nccl,
# beside the torch package Torch_DIR points into, which is the libnccl its LibTorch loads), then
# under NCCL_HOME and beside the CUDA toolkit. Without it the gradients go through MPI.
if(FASTMLIP_ENABLE_TORCH AND FASTMLIP_ENABLE_CUDA)
  get_filename_component(_fastmlip_site "${Torch_DIR}/../../../.." ABSOLUTE)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS "${_fastmlip_site}/nvidia/nccl/include" "$ENV{NCCL_HOME}/include"
                                         ${CUDAToolkit_INCLUDE_DIRS})
  # NAMES_PER_DIR: the wheel has only libnccl.so.2, and a libnccl.so elsewhere (beside the CUDA
  # toolkit) must not win over it by name; the header and the library come from one place.
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
               HINTS "${_fastmlip_site}/nvidia/nccl/lib" "$ENV{NCCL_HOME}/lib" ${CUDAToolkit_LIBRARY_DIR})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(fastmlip_nccl INTERFACE)
    target_include_directories(fastmlip_nccl INTERFACE "${NCCL_INCLUDE_DIR}")
    target_link_libraries(fastmlip_nccl INTERFACE "${NCCL_LIBRARY}" CUDA::cudart)
    message(STATUS "NCCL for the gradient all-reduce: ${NCCL_LIBRARY}")
  else()
    message(STATUS "NCCL not found (NCCL_HOME, or PyTorch's nvidia-nccl wheel): the gradient all-reduce uses MPI")
  endif()
endif()

if(FASTMLIP_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(FASTMLIP_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

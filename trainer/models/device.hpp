// SPDX-License-Identifier: MIT
#pragma once
/// \file Where a trainer model runs: a torch::Device, and the Kokkos execution space whose
/// memory is that device's, for the kernel ops (kernel_ops.hpp: with_exec).
///
///   torch::Device   execution space                     built when
///   cpu             Kokkos::DefaultHostExecutionSpace   always
///   cuda:k          Kokkos::Cuda                        the core's Kokkos is a Kokkos-CUDA
///                                                       (the trainer-cuda preset)
///
/// Kokkos::Cuda runs on the GPU Kokkos was initialised on, so a model on cuda:k needs Kokkos
/// initialised on device k (train-potential does both from its rank; docs/train-potential.md,
/// "GPUs").
///
/// No Kokkos header here: the sources that only place tensors (the training loop, the
/// distributed layer, the executable's main) then compile without nvcc in a CUDA build
/// (cmake/FastmlipOptions.cmake, fastmlip_host_only_sources); device.cpp asks Kokkos for them.
#include <torch/torch.h>

#include <initializer_list>
#include <string>

namespace fastmlip::trainer {

/// Whether this build's kernels can run on CUDA tensors: its Kokkos has the CUDA backend.
bool device_kernels_cuda();

/// Kokkos started for this process, on GPU `device_id` where it has the CUDA backend (the GPU
/// this rank's model is on; ignored otherwise), and finalised at exit, after the models' Views
/// are gone (tests/kernels/kokkos_gtest_main.cpp says why the order matters).
void start_kokkos(int device_id = 0);

/// Why a model cannot run on `device` in this build and process, or "" when it can. Names what
/// to do: build the trainer-cuda preset, use a LibTorch with CUDA, or run where a GPU is.
inline std::string device_problem(const torch::Device& device) {
  if (device.is_cpu()) {
    return "";
  }
  if (!device.is_cuda()) {
    return "device '" + device.str() + "' is not supported; use cpu or cuda";
  }
  if (!device_kernels_cuda()) {
    return "this train-potential was built without CUDA kernels (its Kokkos has no CUDA backend); build the "
           "trainer-cuda preset (docs/building.md, \"The GPU trainer\") or use --device cpu";
  }
  if (!torch::cuda::is_available()) {
    return "no GPU is visible to LibTorch here (a LibTorch without CUDA, no GPU, or CUDA_VISIBLE_DEVICES "
           "empty); run on a GPU node or use --device cpu";
  }
  const auto count = static_cast<std::int64_t>(torch::cuda::device_count());
  if (device.has_index() && device.index() >= count) {
    return "device '" + device.str() + "' does not exist: LibTorch sees " + std::to_string(count) + " GPU(s)";
  }
  return "";
}

/// A CPU copy of t (t itself where it is on the CPU; undefined stays undefined): for what reads
/// host memory, such as MPI without CUDA awareness and the kernels run on the host.
inline torch::Tensor on_host(const torch::Tensor& t) {
  return t.defined() && !t.is_cpu() ? t.to(torch::kCPU) : t;
}

/// Each tensor moved to `device` in place (itself where it is there already; undefined stays
/// undefined): a batch's fields before a forward pass.
inline void move_to(const torch::Device& device, std::initializer_list<torch::Tensor*> tensors) {
  for (torch::Tensor* t : tensors) {
    if (t->defined()) {
      *t = t->to(device);
    }
  }
}

}  // namespace fastmlip::trainer

// SPDX-License-Identifier: MIT
#pragma once
/// \file Where a trainer model runs: a torch::Device, and the Kokkos execution space whose
/// memory is that device's, for the kernel ops (kernel_ops.hpp).
///
///   torch::Device   execution space                     built when
///   cpu             Kokkos::DefaultHostExecutionSpace   always
///   cuda:k          Kokkos::Cuda                        the core's Kokkos is a Kokkos-CUDA
///                                                       (the trainer-cuda preset)
///
/// Kokkos::Cuda runs on the GPU Kokkos was initialised on, so a model on cuda:k needs Kokkos
/// initialised on device k (train-potential does both from its rank; docs/train-potential.md,
/// "GPUs").
#include <torch/torch.h>

#include <Kokkos_Core.hpp>
#include <initializer_list>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace fastmlip::trainer {

/// A type standing for an execution space, for a generic lambda's argument.
template <class Exec>
struct ExecTag {
  using type = Exec;
};

/// Whether this build's kernels can run on CUDA tensors.
inline constexpr bool kDeviceKernelsCuda =
#if defined(KOKKOS_ENABLE_CUDA)
    true;
#else
    false;
#endif

/// Why a model cannot run on `device` in this build and process, or "" when it can. Names what
/// to do: build the trainer-cuda preset, use a LibTorch with CUDA, or run where a GPU is.
inline std::string device_problem(const torch::Device& device) {
  if (device.is_cpu()) {
    return "";
  }
  if (!device.is_cuda()) {
    return "device '" + device.str() + "' is not supported; use cpu or cuda";
  }
  if (!kDeviceKernelsCuda) {
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

/// f(ExecTag<Exec>{}) for the execution space of `device`; UnsupportedError naming `who` and
/// device_problem() where this build or process cannot run there.
template <class F>
decltype(auto) with_exec(const torch::Device& device, const std::string& who, F&& f) {
  const std::string problem = device_problem(device);
  if (!problem.empty()) {
    throw UnsupportedError(who + ": " + problem);
  }
#if defined(KOKKOS_ENABLE_CUDA)
  if (device.is_cuda()) {
    return std::forward<F>(f)(ExecTag<Kokkos::Cuda>{});
  }
#endif
  return std::forward<F>(f)(ExecTag<Kokkos::DefaultHostExecutionSpace>{});
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

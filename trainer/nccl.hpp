// SPDX-License-Identifier: MIT
#pragma once
/// \file The gradient all-reduce through NCCL, for ranks that each train on their own GPU
/// (train-potential --allreduce; docs/train-potential.md, "GPUs").
///
/// NCCL sums the gradients where they are, in GPU memory, over NVLink or the network, where the
/// MPI path (distributed.hpp) copies them to host buffers first. NCCL needs one GPU per rank: a
/// communicator whose ranks share a GPU is refused by NCCL itself, so such runs use MPI.
/// A build without NCCL (trainer/nccl_unavailable.cpp) says so wherever NCCL is asked for.
#include <mpi.h>
#include <torch/torch.h>

#include <memory>
#include <string>

namespace fastmlip::trainer {

/// Whether this build has NCCL (FASTMLIP_HAVE_NCCL: a trainer-cuda build that found it).
extern const bool kHaveNccl;

/// Why NCCL cannot sum this run's gradients, or "" when it can. Collective over `comm` (every
/// rank gets the same answer): a build without NCCL, a model not on a GPU, or ranks on one node
/// sharing a GPU (named).
std::string nccl_problem(const torch::Device& device, MPI_Comm comm);

/// An NCCL communicator over the ranks of `comm`, each on its `device`.
class NcclCommunicator {
 public:
  /// Collective over `comm`: rank 0 makes NCCL's unique id and MPI broadcasts it. Throws
  /// UnsupportedError where nccl_problem() is not empty, Error where NCCL fails.
  NcclCommunicator(MPI_Comm comm, const torch::Device& device);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  /// flat (contiguous float32 or float64 on this rank's GPU) replaced by its sum over the ranks,
  /// in stream order with LibTorch's work on the GPU (its default stream). Collective.
  void sum_in_place(torch::Tensor& flat) const;

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

}  // namespace fastmlip::trainer

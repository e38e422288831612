// SPDX-License-Identifier: MIT
#pragma once
/// \file MPI data parallelism for LibTorch parameters.
///
/// Every rank holds a full replica of the model. Parameters are broadcast from rank 0 once, so
/// replicas start identical whatever each rank's initialisation did; after each backward the
/// gradients are averaged over ranks, so every replica takes the same optimiser step.
#include <mpi.h>
#include <torch/torch.h>

#include <cstddef>
#include <vector>

namespace fastmlip::trainer {

/// Copies every parameter's values from `root` to all ranks of `comm`.
/// All ranks must pass parameters of the same shapes and dtypes in the same order.
void broadcast_parameters(const std::vector<torch::Tensor>& params, MPI_Comm comm, int root = 0);

/// Replaces each parameter's gradient by its mean over the ranks of `comm`.
///
/// Gradients are packed into buckets of at most `bucket_bytes` (per dtype) so that one
/// MPI_Allreduce moves many small tensors: latency, not bandwidth, dominates the many small
/// weight tensors of an equivariant model. A parameter without a gradient on this rank (a
/// species absent from its batch, say) contributes zeros, so every rank makes the same
/// collective calls. Throws fastmlip::InputError on a dtype other than float32/float64.
void allreduce_mean_gradients(const std::vector<torch::Tensor>& params, MPI_Comm comm,
                              std::size_t bucket_bytes = std::size_t{4} << 20);

}  // namespace fastmlip::trainer

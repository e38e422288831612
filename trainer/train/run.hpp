// SPDX-License-Identifier: MIT
#pragma once
/// \file The train-potential loop (docs/train-potential.md, "What a run does"): options to data,
/// statistics, a fresh or fine-tuned MACE, sampler batches, loss, optimiser/EMA/schedule,
/// per-epoch metrics (log lines, CSV, JSON per config_type, an SVG learning curve; a progress bar
/// on a terminal), an atomic checkpoint per epoch, --restart, the best validated model, the final
/// (EMA) model exported as a potential file that pair_style fastmlip/mace loads, and --test_file.
///
/// Data parallel over the ranks of `comm`: every rank plans the same global batches with the
/// sampler (ranks = world size) and trains on its own; parameters are broadcast from rank 0 at
/// the start, gradients averaged after each backward, metrics summed over ranks. Only rank 0
/// writes files and log lines.
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <ostream>
#include <string>

#include "core/error.hpp"
#include "options.hpp"

namespace fastmlip::trainer::train {

/// Throws UnsupportedError naming the first option whose value asks for something this build of
/// train-potential does not do yet (so that no option is silently ignored).
void check_implemented(const Options& options);

/// This rank's rank among the ranks on its node (MPI_COMM_TYPE_SHARED).
int node_local_rank(MPI_Comm comm);

/// Where this rank trains (--device): the CPU, or for cuda the GPU (node-local rank) mod (GPUs
/// LibTorch sees), so that ranks share a node's GPUs round-robin. cuda:0 where LibTorch sees none
/// (check_implemented says why that cannot run).
torch::Device training_device(const Options& options, MPI_Comm comm);

/// Where a training or validation step ran out of memory, for step_out_of_memory's message.
struct StepMemoryContext {
  std::string device;  ///< "cpu", "cuda:0"
  int rank = 0;
  bool validation = false;
  std::int64_t epoch = 0;  ///< 1-based
  std::int64_t step = 0;   ///< 1-based, within the epoch
  std::int64_t graphs = 0, atoms = 0;
  std::int64_t batch_capacity = 0;
  bool single = false;     ///< float32 (else float64, and float32 is suggested)
  std::string checkpoint;  ///< the last checkpoint written, or "" when none is yet
};

/// "train-potential: rank R ran out of DEVICE memory in epoch E, step S (a bin of G graphs and
/// N atoms) (<the allocator's text>). <what to do>; <the last checkpoint is intact>".
ResourceError step_out_of_memory(const StepMemoryContext& c, const char* allocator_said);

/// Runs a whole training. `log` receives the plain log lines (rank 0 only); the same lines go to
/// LOG_DIR/NAME.log. Throws fastmlip::Error (InputError, FileError, ...) for bad input.
void run_training(const Options& options, MPI_Comm comm, std::ostream& log);

}  // namespace fastmlip::trainer::train

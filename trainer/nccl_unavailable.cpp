// SPDX-License-Identifier: MIT
// nccl.hpp in a build without NCCL (every CPU build, and a trainer-cuda build that found none):
// asking for NCCL says what the build lacks.
#include <string>

#include "core/error.hpp"
#include "nccl.hpp"

namespace fastmlip::trainer {

const bool kHaveNccl = false;

std::string nccl_problem(const torch::Device&, MPI_Comm) {
  const std::string found_where = "CUDA's, NCCL_HOME's or PyTorch's nvidia-nccl wheel";
  return "this train-potential was built without NCCL, which a trainer-cuda build takes where it finds it (" +
         found_where + "; docs/building.md, \"The GPU trainer\"); use --allreduce mpi";
}

struct NcclCommunicator::State {};

NcclCommunicator::NcclCommunicator(MPI_Comm comm, const torch::Device& device) {
  throw UnsupportedError("NcclCommunicator: " + nccl_problem(device, comm));
}
NcclCommunicator::~NcclCommunicator() = default;

// No NcclCommunicator exists in this build (its constructor throws), so nothing sums.
void NcclCommunicator::sum_in_place(torch::Tensor&) const {}

}  // namespace fastmlip::trainer

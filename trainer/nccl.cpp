// SPDX-License-Identifier: MIT
#include "nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace fastmlip::trainer {
namespace {

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) {
    throw Error(std::string("train-potential: NCCL's ") + what + " failed: " + ncclGetErrorString(rc) +
                " (NCCL_DEBUG=INFO says more; --allreduce mpi avoids NCCL)");
  }
}

void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    throw Error(std::string("train-potential: ") + what + " failed: " + cudaGetErrorString(rc));
  }
}

// "" or the first two ranks of `comm` on one node with the same GPU, named. Collective.
std::string shared_gpu(const torch::Device& device, MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size = 1, rank = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_rank(comm, &rank);
  const int mine[2] = {static_cast<int>(device.index()), rank};
  std::vector<int> all(2 * static_cast<std::size_t>(node_size));
  MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, node);
  MPI_Comm_free(&node);
  std::string found;
  for (int a = 0; a < node_size && found.empty(); ++a) {
    for (int b = a + 1; b < node_size; ++b) {
      if (all[2 * a] == all[2 * b]) {
        found = "ranks " + std::to_string(all[2 * a + 1]) + " and " + std::to_string(all[2 * b + 1]) +
                " share GPU " + std::to_string(all[2 * a]) +
                " of their node, and NCCL needs one GPU per rank: run " +
                "as many ranks per node as it has GPUs, or use --allreduce mpi";
        break;
      }
    }
  }
  // Every rank must agree, also ranks on nodes without sharing: the lowest rank's finding wins.
  int any = found.empty() ? 0 : 1, global = 0;
  MPI_Allreduce(&any, &global, 1, MPI_INT, MPI_MAX, comm);
  if (global != 0 && found.empty()) {
    found = "ranks on another node share a GPU, and NCCL needs one GPU per rank; use --allreduce mpi";
  }
  return found;
}

ncclDataType_t nccl_type(const torch::Tensor& t) {
  if (t.scalar_type() == torch::kFloat64) {
    return ncclDouble;
  }
  if (t.scalar_type() == torch::kFloat32) {
    return ncclFloat;
  }
  throw InputError(std::string("fastmlip::trainer: gradients must be float32 or float64, got ") +
                   c10::toString(t.scalar_type()));
}

}  // namespace

const bool kHaveNccl = true;

std::string nccl_problem(const torch::Device& device, MPI_Comm comm) {
  // The same answer on every rank: the device option is the same everywhere.
  if (!device.is_cuda()) {
    return "NCCL sums gradients on GPUs, and this run trains on " + device.str() + "; use --device cuda";
  }
  return shared_gpu(device, comm);
}

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  int device = 0;
};

NcclCommunicator::NcclCommunicator(MPI_Comm comm, const torch::Device& device)
    : m_state(std::make_unique<State>()) {
  if (const std::string problem = nccl_problem(device, comm); !problem.empty()) {
    throw UnsupportedError("NcclCommunicator: " + problem);
  }
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  ncclUniqueId id{};
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  }
  MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm);
  m_state->device = device.index();
  // NCCL binds the communicator to the calling thread's current GPU.
  check_cuda(cudaSetDevice(m_state->device), "cudaSetDevice");
  check_nccl(ncclCommInitRank(&m_state->comm, world, id, rank), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (m_state && m_state->comm != nullptr) {
    ncclCommDestroy(m_state->comm);
  }
}

void NcclCommunicator::sum_in_place(torch::Tensor& flat) const {
  if (!flat.is_cuda() || !flat.is_contiguous() || flat.device().index() != m_state->device) {
    throw Error("NcclCommunicator::sum_in_place: the buffer must be contiguous on cuda:" +
                std::to_string(m_state->device) + ", not " + flat.device().str());
  }
  check_cuda(cudaSetDevice(m_state->device), "cudaSetDevice");
  // LibTorch queues its GPU work on the legacy default stream; NCCL's kernel goes there too, so
  // it starts after the ops that made `flat` and before those that read it.
  check_nccl(ncclAllReduce(flat.data_ptr(), flat.data_ptr(), static_cast<std::size_t>(flat.numel()),
                           nccl_type(flat), ncclSum, m_state->comm, cudaStreamLegacy),
             "all-reduce of gradients");
}

}  // namespace fastmlip::trainer

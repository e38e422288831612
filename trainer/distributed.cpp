// SPDX-License-Identifier: MIT
#include "distributed.hpp"

#include <string>

#include "core/error.hpp"

namespace fastmlip::trainer {
namespace {

MPI_Datatype mpi_type(const torch::Tensor& t) {
  if (t.scalar_type() == torch::kFloat64) {
    return MPI_DOUBLE;
  }
  if (t.scalar_type() == torch::kFloat32) {
    return MPI_FLOAT;
  }
  throw InputError(std::string("fastmlip::trainer: parameters must be float32 or float64, got ") +
                   c10::toString(t.scalar_type()));
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    throw Error(std::string("fastmlip::trainer: ") + what + " failed (MPI error " + std::to_string(rc) + ")");
  }
}

// Sums `bucket` (a list of same-dtype tensors) across ranks through one flat buffer, then
// writes the mean back into each gradient.
void reduce_bucket(const std::vector<torch::Tensor>& bucket, MPI_Comm comm, int world) {
  if (bucket.empty()) {
    return;
  }
  std::vector<torch::Tensor> flat_parts;
  flat_parts.reserve(bucket.size());
  for (const auto& p : bucket) {
    flat_parts.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
  }
  torch::Tensor flat = torch::cat(flat_parts).contiguous();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, flat.data_ptr(), static_cast<int>(flat.numel()), mpi_type(flat), MPI_SUM, comm),
            "MPI_Allreduce of gradients");
  flat.div_(world);
  std::int64_t offset = 0;
  for (const auto& p : bucket) {
    torch::Tensor mean = flat.narrow(0, offset, p.numel()).view(p.sizes());
    offset += p.numel();
    if (p.grad().defined()) {
      p.mutable_grad().copy_(mean);
    } else {
      p.mutable_grad() = mean.clone();
    }
  }
}

}  // namespace

void broadcast_parameters(const std::vector<torch::Tensor>& params, MPI_Comm comm, int root) {
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    torch::Tensor buf = p.detach().contiguous();
    check_mpi(MPI_Bcast(buf.data_ptr(), static_cast<int>(buf.numel()), mpi_type(buf), root, comm),
              "MPI_Bcast of parameters");
    if (!buf.is_same(p)) {
      p.detach().copy_(buf);
    }
  }
}

void allreduce_mean_gradients(const std::vector<torch::Tensor>& params, MPI_Comm comm, std::size_t bucket_bytes) {
  int world = 1;
  check_mpi(MPI_Comm_size(comm, &world), "MPI_Comm_size");
  torch::NoGradGuard no_grad;
  // Validate every dtype before the first collective call: a rank must not throw halfway
  // through a sequence of allreduces that the other ranks complete (they would hang).
  for (const auto& p : params) {
    mpi_type(p);
  }
  // One open bucket per dtype; parameters keep their order so all ranks build equal buckets.
  std::vector<torch::Tensor> bucket64, bucket32;
  std::size_t bytes64 = 0, bytes32 = 0;
  for (const auto& p : params) {
    const std::size_t bytes = static_cast<std::size_t>(p.numel()) * p.element_size();
    auto& bucket = p.scalar_type() == torch::kFloat64 ? bucket64 : bucket32;
    auto& filled = p.scalar_type() == torch::kFloat64 ? bytes64 : bytes32;
    if (!bucket.empty() && filled + bytes > bucket_bytes) {
      reduce_bucket(bucket, comm, world);
      bucket.clear();
      filled = 0;
    }
    bucket.push_back(p);
    filled += bytes;
  }
  reduce_bucket(bucket64, comm, world);
  reduce_bucket(bucket32, comm, world);
}

}  // namespace fastmlip::trainer

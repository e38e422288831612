// SPDX-License-Identifier: MIT
#include "distributed.hpp"

#include <string>
#include <utility>

#include "core/error.hpp"
#include "models/device.hpp"
#include "nccl.hpp"

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

// Puts `mean` (a view into a reduced bucket) into p's gradient.
// `mean` may be a host buffer's slice for a parameter on a GPU: copied to the parameter's device.
void set_grad(const torch::Tensor& p, const torch::Tensor& mean) {
  if (p.grad().defined()) {
    p.mutable_grad().copy_(mean);
  } else {
    p.mutable_grad() = mean.to(p.device(), /*non_blocking=*/false, /*copy=*/true);
  }
}

// Sums `bucket` (a list of same-dtype tensors) across ranks through one flat buffer, then
// writes the mean back into each gradient. With `nccl` the buffer stays on the GPU; MPI reads and
// writes host memory, so without it a GPU's buffer is staged through a host copy (no CUDA-aware
// MPI is assumed; on the host, on_host is the tensor itself).
void reduce_bucket(const std::vector<torch::Tensor>& bucket, MPI_Comm comm, int world,
                   const NcclCommunicator* nccl) {
  if (bucket.empty()) {
    return;
  }
  std::vector<torch::Tensor> flat_parts;
  flat_parts.reserve(bucket.size());
  for (const auto& p : bucket) {
    flat_parts.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
  }
  torch::Tensor flat;
  if (nccl != nullptr) {
    flat = torch::cat(flat_parts).contiguous();
    nccl->sum_in_place(flat);
  } else {
    flat = on_host(torch::cat(flat_parts)).contiguous();
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, flat.data_ptr(), static_cast<int>(flat.numel()), mpi_type(flat),
                            MPI_SUM, comm),
              "MPI_Allreduce of gradients");
  }
  flat.div_(world);
  std::int64_t offset = 0;
  for (const auto& p : bucket) {
    torch::Tensor mean = flat.narrow(0, offset, p.numel()).view(p.sizes());
    offset += p.numel();
    set_grad(p, mean);
  }
}

}  // namespace

void broadcast_parameters(const std::vector<torch::Tensor>& params, MPI_Comm comm, int root) {
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    torch::Tensor buf = on_host(p.detach()).contiguous();
    check_mpi(MPI_Bcast(buf.data_ptr(), static_cast<int>(buf.numel()), mpi_type(buf), root, comm),
              "MPI_Bcast of parameters");
    if (!buf.is_same(p)) {
      p.detach().copy_(buf);
    }
  }
}

void allreduce_mean_gradients(const std::vector<torch::Tensor>& params, MPI_Comm comm,
                              std::size_t bucket_bytes, const NcclCommunicator* nccl) {
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
      reduce_bucket(bucket, comm, world, nccl);
      bucket.clear();
      filled = 0;
    }
    bucket.push_back(p);
    filled += bytes;
  }
  reduce_bucket(bucket64, comm, world, nccl);
  reduce_bucket(bucket32, comm, world, nccl);
}

OverlappedGradientReducer::OverlappedGradientReducer(std::vector<torch::Tensor> params, MPI_Comm comm,
                                                     std::size_t bucket_bytes)
    : m_params(std::move(params)), m_comm(comm) {
  check_mpi(MPI_Comm_size(comm, &m_world), "MPI_Comm_size");
  int level = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&level), "MPI_Query_thread");
  m_any_thread = level >= MPI_THREAD_SERIALIZED;
  for (const auto& p : m_params) {
    mpi_type(p);
  }
  const std::size_t n = m_params.size();
  m_bucket_of.assign(n, 0);
  m_slot_of.assign(n, 0);
  m_fired.assign(n, 0);
  std::size_t filled = 0;
  for (std::size_t i = n; i-- > 0;) {
    const torch::Tensor& p = m_params[i];
    const std::size_t bytes = static_cast<std::size_t>(p.numel()) * p.element_size();
    const bool fresh = m_buckets.empty() ||
                       m_params[m_buckets.back().params.front()].scalar_type() != p.scalar_type() ||
                       filled + bytes > bucket_bytes;
    if (fresh) {
      m_buckets.emplace_back();
      filled = 0;
    }
    Bucket& b = m_buckets.back();
    m_bucket_of[i] = m_buckets.size() - 1;
    m_slot_of[i] = b.params.size();
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + m_params[b.params.back()].numel());
    b.params.push_back(i);
    filled += bytes;
  }
  for (Bucket& b : m_buckets) {
    const torch::Tensor& last = m_params[b.params.back()];
    // On the host, where MPI reads it, also for parameters on a GPU (each gradient is copied in).
    b.flat = torch::zeros({b.offsets.back() + last.numel()},
                          last.options().device(torch::kCPU).requires_grad(false));
  }
  for (std::size_t i = 0; i < n; ++i) {
    m_hooks.push_back(m_params[i].register_hook([this, i](torch::Tensor g) { on_gradient(i, g); }));
  }
}

OverlappedGradientReducer::~OverlappedGradientReducer() {
  for (std::size_t i = 0; i < m_hooks.size(); ++i) {
    m_params[i].remove_hook(m_hooks[i]);
  }
  // Requests still in flight (an exception between arm() and finish()) are left alone: MPI
  // forbids freeing a non-blocking collective's request, and the run ends in MPI_Abort.
}

void OverlappedGradientReducer::arm() {
  std::lock_guard<std::mutex> lock(m_mutex);
  for (Bucket& b : m_buckets) {
    b.missing = b.params.size();
    b.started = false;
  }
  std::fill(m_fired.begin(), m_fired.end(), 0);
  m_next = 0;
  m_early = 0;
  m_fired_twice = false;
  m_owner = std::this_thread::get_id();
  m_armed = true;
}

void OverlappedGradientReducer::on_gradient(std::size_t k, const torch::Tensor& grad) {
  std::lock_guard<std::mutex> lock(m_mutex);
  if (!m_armed) {
    return;
  }
  Bucket& b = m_buckets[m_bucket_of[k]];
  if (m_fired[k] || b.started) {
    // A leaf's gradient arrives once per backward (the engine sums its inputs first); a
    // second call would mean a gradient we cannot reduce any more. finish() reports it.
    m_fired_twice = true;
    return;
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor& p = m_params[k];
  // The hook runs before the gradient is added to .grad, and the optimiser steps on the sum.
  const torch::Tensor total = !grad.defined() ? p.grad() : p.grad().defined() ? p.grad() + grad : grad;
  torch::Tensor dst = b.flat.narrow(0, b.offsets[m_slot_of[k]], p.numel());
  if (total.defined()) {
    dst.copy_(total.reshape({-1}));
  } else {
    dst.zero_();
  }
  m_fired[k] = 1;
  --b.missing;
  // LibTorch runs a CPU backward on the calling thread and a GPU backward on its device thread
  // while the calling thread waits; from there the bucket goes out only where MPI allows another
  // thread to call it (the mutex keeps the calls apart), else it waits for finish().
  if (m_any_thread || std::this_thread::get_id() == m_owner) {
    start_ready();
    for (std::size_t j = 0; j < m_next; ++j) {
      // MPI progresses non-blocking collectives only inside MPI calls: give it one.
      if (m_buckets[j].request != MPI_REQUEST_NULL) {
        int done = 0;
        check_mpi(MPI_Test(&m_buckets[j].request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      }
    }
  }
}

void OverlappedGradientReducer::start(Bucket& b) {
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, b.flat.data_ptr(), static_cast<int>(b.flat.numel()),
                           mpi_type(b.flat), MPI_SUM, m_comm, &b.request),
            "MPI_Iallreduce of gradients");
  b.started = true;
}

void OverlappedGradientReducer::start_ready() {
  while (m_next < m_buckets.size() && m_buckets[m_next].missing == 0) {
    start(m_buckets[m_next]);
    ++m_next;
    ++m_early;
  }
}

void OverlappedGradientReducer::finish() {
  torch::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(m_mutex);
  m_armed = false;
  for (; m_next < m_buckets.size(); ++m_next) {
    Bucket& b = m_buckets[m_next];
    for (std::size_t s = 0; s < b.params.size(); ++s) {
      if (!m_fired[b.params[s]]) {
        const torch::Tensor& p = m_params[b.params[s]];
        torch::Tensor dst = b.flat.narrow(0, b.offsets[s], p.numel());
        if (p.grad().defined()) {
          dst.copy_(p.grad().reshape({-1}));
        } else {
          dst.zero_();
        }
      }
    }
    start(b);
  }
  for (Bucket& b : m_buckets) {
    check_mpi(MPI_Wait(&b.request, MPI_STATUS_IGNORE), "MPI_Wait of the gradient all-reduce");
    b.flat.div_(m_world);
    for (std::size_t s = 0; s < b.params.size(); ++s) {
      const torch::Tensor& p = m_params[b.params[s]];
      set_grad(p, b.flat.narrow(0, b.offsets[s], p.numel()).view(p.sizes()));
    }
  }
  if (m_fired_twice) {
    throw Error(
        "OverlappedGradientReducer: a parameter's gradient hook fired twice in one backward pass "
        "(or after its bucket was sent); use allreduce_mean_gradients for this model");
  }
}

}  // namespace fastmlip::trainer

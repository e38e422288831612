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
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace fastmlip::trainer {

class NcclCommunicator;

/// Copies every parameter's values from `root` to all ranks of `comm`.
/// All ranks must pass parameters of the same shapes and dtypes in the same order.
void broadcast_parameters(const std::vector<torch::Tensor>& params, MPI_Comm comm, int root = 0);

/// The gradient buckets' size: large enough that one collective moves many of an equivariant
/// model's small weight tensors, small enough that the overlapped reducer's first buckets are
/// sent while backward still runs.
inline constexpr std::size_t kBucketBytes = std::size_t{4} << 20;

/// Replaces each parameter's gradient by its mean over the ranks of `comm`.
///
/// Gradients are packed into buckets of at most `bucket_bytes` (per dtype) so that one
/// MPI_Allreduce moves many small tensors: latency, not bandwidth, dominates the many small
/// weight tensors of an equivariant model. A parameter without a gradient on this rank (a
/// species absent from its batch, say) contributes zeros, so every rank makes the same
/// collective calls. Throws fastmlip::InputError on a dtype other than float32/float64.
/// With `nccl` (nccl.hpp: ranks each on their own GPU) the buckets are summed by NCCL where they
/// are, on the GPU; without, by MPI through host buffers.
void allreduce_mean_gradients(const std::vector<torch::Tensor>& params, MPI_Comm comm,
                              std::size_t bucket_bytes = kBucketBytes,
                              const NcclCommunicator* nccl = nullptr);

/// The gradient all-reduce of allreduce_mean_gradients, overlapped with the backward pass
/// (FastCHGNet's communication overlap): a hook on each parameter copies its gradient into a
/// bucket as backward produces it, and a bucket whose gradients are all in is sent with
/// MPI_Iallreduce while backward goes on with the layers below.
///
/// Buckets hold parameters in reverse order (the order backward reaches them), at most
/// `bucket_bytes` each and one dtype each. Every rank starts its buckets in index order, bucket k
/// only after buckets 0..k-1, so all ranks issue the same collectives in the same order whatever
/// order their hooks fire in; a parameter whose hook did not fire (no gradient on this rank)
/// holds its accumulated .grad or zeros, and its bucket is sent by finish(). The hooks act only
/// between arm() and finish(), so the torch::autograd::grad call that computes forces (with
/// create_graph) and the backward passes of earlier accumulated bins pass through untouched.
/// The result is bitwise what allreduce_mean_gradients gives for the same .grad values.
///
/// Hooks run where LibTorch runs backward: on the calling thread for a CPU model, on its device
/// thread for a GPU model, while the thread that called arm() waits in backward. From a thread
/// other than arm()'s, buckets are sent only if MPI was initialised with at least
/// MPI_THREAD_SERIALIZED (train-potential asks for it); the reducer's MPI calls hold one mutex,
/// so they are never concurrent. With less, those buckets wait for finish().
class OverlappedGradientReducer {
 public:
  /// Registers one hook per parameter (removed by the destructor). Throws InputError on a dtype
  /// other than float32/float64, before any collective.
  OverlappedGradientReducer(std::vector<torch::Tensor> params, MPI_Comm comm,
                            std::size_t bucket_bytes = kBucketBytes);
  ~OverlappedGradientReducer();
  OverlappedGradientReducer(const OverlappedGradientReducer&) = delete;
  OverlappedGradientReducer& operator=(const OverlappedGradientReducer&) = delete;

  /// The next backward pass is the last one before the optimiser step: reduce its gradients
  /// (each parameter's .grad so far plus what this backward adds).
  void arm();
  /// After that backward: sends the buckets not yet sent, waits for all, and replaces each
  /// parameter's .grad by the mean over the ranks. Disarms the hooks.
  void finish();
  /// The number of buckets (for tests).
  std::size_t num_buckets() const noexcept { return m_buckets.size(); }
  /// Buckets sent while backward was still running in the last armed pass (for tests and
  /// the benchmark: 0 means no overlap happened).
  std::size_t started_during_backward() const noexcept { return m_early; }

 private:
  struct Bucket {
    std::vector<std::size_t> params;    // indices into m_params
    std::vector<std::int64_t> offsets;  // of each parameter in `flat`
    torch::Tensor flat;
    std::size_t missing = 0;  // parameters whose hook has not fired since arm()
    bool started = false;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  void on_gradient(std::size_t k, const torch::Tensor& grad);
  void start(Bucket& b);
  /// Starts, in order, the leading buckets that are complete.
  void start_ready();

  std::vector<torch::Tensor> m_params;
  MPI_Comm m_comm;
  int m_world = 1;
  std::vector<Bucket> m_buckets;
  std::vector<std::size_t> m_bucket_of, m_slot_of;  // per parameter
  std::vector<char> m_fired;
  std::vector<unsigned> m_hooks;
  std::size_t m_next = 0;  // the first bucket not started
  std::size_t m_early = 0;
  bool m_armed = false;
  bool m_fired_twice = false;
  std::thread::id m_owner;    // the thread that called arm()
  bool m_any_thread = false;  // MPI_THREAD_SERIALIZED or more: a hook on any thread may call MPI
  std::mutex m_mutex;         // the hooks' state and the reducer's MPI calls
};

}  // namespace fastmlip::trainer

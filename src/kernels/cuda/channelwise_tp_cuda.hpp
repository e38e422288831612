// SPDX-License-Identifier: MIT
#pragma once
/// \file CUDA backend of the channelwise tensor product (kernels/channelwise_tp.hpp), fused
/// with the gather of sender features and the scatter-sum into receivers. Plain C++ API: every
/// pointer is device memory, `stream` is a cudaStream_t (null: the default stream), no CUDA
/// header is needed to include this. Same layouts as the reference and Kokkos twins:
/// x [num_nodes x dim1], Y [E x dim2], w [E x weight_numel], out [num_nodes x dim_out], all
/// row-major, with the descriptor's offsets inside a row.
///
/// The kernels read the descriptor's CG non-zeros (uploaded once by ChannelwiseTPCuda), not a
/// CUDA-side copy of the Clebsch-Gordan math. Sums run in a fixed order and use no atomics:
/// results are reproducible bit for bit on the same device.
#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/channelwise_tp.hpp"

namespace fastmlip::cuda {

/// Device pointers (not owned) to an edge index in kernels/edge_index.hpp's layout: edges
/// sorted by receiver, plus the transpose by sender. An EdgeIndex<Kokkos::Cuda> passes its
/// views' data() here; EdgeIndexCuda builds one without Kokkos.
struct EdgeIndexDevice {
  int num_nodes = 0;
  int num_edges = 0;
  const int* receiver_ptr = nullptr;  ///< [num_nodes + 1]
  const int* sender = nullptr;        ///< [E]
  const int* receiver = nullptr;      ///< [E]
  const int* sender_ptr = nullptr;    ///< [num_nodes + 1]
  const int* sender_edges = nullptr;  ///< [E], edge ids grouped by sender, ascending
};

/// Owns an edge index in device memory, built on the host from edges sorted by receiver (the
/// neighbour-list order). The same checks and layout as EdgeIndex::build, without Kokkos, for
/// callers that drive the CUDA kernels directly.
class EdgeIndexCuda {
 public:
  /// Throws InputError naming the first edge out of order or a node index out of range, and
  /// fastmlip::Error when a CUDA call fails.
  static EdgeIndexCuda build(int num_nodes, const std::vector<int>& sender, const std::vector<int>& receiver);

  EdgeIndexCuda() = default;
  ~EdgeIndexCuda();
  EdgeIndexCuda(EdgeIndexCuda&&) noexcept;
  EdgeIndexCuda& operator=(EdgeIndexCuda&&) noexcept;
  EdgeIndexCuda(const EdgeIndexCuda&) = delete;
  EdgeIndexCuda& operator=(const EdgeIndexCuda&) = delete;

  EdgeIndexDevice view() const noexcept { return m_view; }

 private:
  int* m_storage = nullptr;  // one allocation holding the five index arrays
  EdgeIndexDevice m_view;
};

/// The descriptor on the device, and the fused kernels that read it. Construction uploads the
/// tables (and checks that the descriptor fits the kernels' limits) on the device current at
/// that time; the object must be used on that device. compute/reverse only launch kernels
/// (asynchronous on `stream`); a failed launch throws fastmlip::Error.
template <class T>
class ChannelwiseTPCuda {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "ChannelwiseTPCuda: T must be float or double");

 public:
  /// Throws InputError when the descriptor exceeds what the kernels hold (more than 48
  /// instructions or 16 node-feature entries, several instructions into one output entry, an
  /// instruction whose multiplicity differs from its input entry, or tables larger than the
  /// device's shared memory), naming the value and the limit.
  explicit ChannelwiseTPCuda(const kernels::ChannelwiseTP& tp);
  ~ChannelwiseTPCuda();
  ChannelwiseTPCuda(ChannelwiseTPCuda&&) noexcept;
  ChannelwiseTPCuda& operator=(ChannelwiseTPCuda&&) noexcept;
  ChannelwiseTPCuda(const ChannelwiseTPCuda&) = delete;
  ChannelwiseTPCuda& operator=(const ChannelwiseTPCuda&) = delete;

  const kernels::ChannelwiseTP& descriptor() const noexcept;

  /// out[n, :] = sum over edges e into n of TP(x[sender(e)], Y[e], w[e]); every element of
  /// out is written (zero for nodes without edges). The forward reads only g's receiver_ptr and
  /// sender, so a window on an index's receivers [first, last) (receiver_ptr advanced by first,
  /// num_nodes = last - first, out advanced by first rows) computes those rows only.
  void compute(const EdgeIndexDevice& g, const T* x, const T* Y, const T* w, T* out,
               void* stream = nullptr) const;

  /// Gradients of sum(out * grad_out) with respect to x, Y and w; each output is overwritten
  /// entirely (entries that no path reads get zero).
  void reverse(const EdgeIndexDevice& g, const T* x, const T* Y, const T* w, const T* grad_out, T* grad_x,
               T* grad_Y, T* grad_w, void* stream = nullptr) const;

  /// As reverse(), with grad_x summed into (grad_x += the gradient) rather than overwritten, and
  /// the rows of senders without an edge in g not touched: the reverse of one chunk of edges
  /// (kernels::EdgeIndex::chunk), whose senders' sums add up chunk after chunk.
  void reverse_accumulate(const EdgeIndexDevice& g, const T* x, const T* Y, const T* w, const T* grad_out,
                          T* grad_x, T* grad_Y, T* grad_w, void* stream = nullptr) const;

 private:
  void run_reverse(const EdgeIndexDevice& g, const T* x, const T* Y, const T* w, const T* grad_out, T* grad_x,
                   T* grad_Y, T* grad_w, bool accumulate, void* stream) const;

  struct State;
  std::unique_ptr<State> m_state;
};

}  // namespace fastmlip::cuda

// SPDX-License-Identifier: MIT
#pragma once
/// \file CUDA backend of the symmetric contraction (kernels/symmetric_contraction.hpp). Plain
/// C++ API: every pointer is device memory, `stream` is a cudaStream_t (null: the default
/// stream), no CUDA header is needed to include this. Same layouts as the reference and Kokkos
/// twins: x [num_nodes x dim_in] and out [num_nodes x dim_out] in e3nn's flat layout, species
/// one element index per node.
///
/// The kernels read the descriptor's monomial tree and entries (uploaded once) and the folded
/// per-element coefficients (set_weights). Sums run in a fixed order and use no atomics:
/// results, the weight gradient included, are reproducible bit for bit on the same device.
#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/symmetric_contraction.hpp"

namespace fastmlip::cuda {

template <class T>
class SymmetricContractionCuda {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "SymmetricContractionCuda: T must be float or double");

 public:
  using Nested = std::vector<std::vector<std::vector<double>>>;

  /// Uploads the monomial walk and entry tables on the current device. Throws InputError
  /// when the descriptor exceeds the kernels' limits (more than 64 ells, 16 input or output
  /// entries, or tables larger than the device's shared memory), naming the value and the
  /// limit; fastmlip::Error when a CUDA call fails.
  explicit SymmetricContractionCuda(const kernels::SymmetricContraction& sc);
  ~SymmetricContractionCuda();
  SymmetricContractionCuda(SymmetricContractionCuda&&) noexcept;
  SymmetricContractionCuda& operator=(SymmetricContractionCuda&&) noexcept;
  SymmetricContractionCuda(const SymmetricContractionCuda&) = delete;
  SymmetricContractionCuda& operator=(const SymmetricContractionCuda&) = delete;

  const kernels::SymmetricContraction& descriptor() const noexcept;

  /// Folds and uploads the element weights (mace-torch layout, see
  /// SymmetricContraction::fold). Synchronous.
  void set_weights(const Nested& W, int num_elements);
  /// Sets coefficients folded elsewhere on the device (SymmetricContractionKokkos' fold):
  /// `coef` is [num_elements, entries, stride] in the descriptor's entry order, of which
  /// channels 0..C-1 are read. Reordered into the kernels' layout on `stream`, with no host
  /// copy; asynchronous (coef must stay unchanged until the stream reaches the copy). The
  /// storage is reused while num_elements holds.
  void set_coefficients(const T* coef, int stride, int num_elements, void* stream = nullptr);
  int num_elements() const noexcept;

  /// Monomials the kernels evaluate per node and channel: those some entry reads, with their
  /// prefixes (at most descriptor().monomials.size()).
  int num_evaluated_monomials() const noexcept;

  /// Copies the species to the host and throws InputError naming the first node whose element
  /// index is outside 0..num_elements()-1. compute() and reverse() do not synchronise to check:
  /// on such a node they write NaN rather than read outside the coefficients.
  void check_species(const int* species, std::size_t num_nodes) const;

  /// out = the contraction of x (every element of out is written).
  void compute(const int* species, std::size_t num_nodes, const T* x, T* out, void* stream = nullptr) const;

  /// grad_x = d sum(out * grad_out) / dx (every element written).
  void reverse(const int* species, std::size_t num_nodes, const T* x, const T* grad_out, T* grad_x,
               void* stream = nullptr) const;

  /// Gradient of sum(out * grad_out) with respect to the weights, in mace-torch's layout (see
  /// SymmetricContraction::unfold_gradient). Per element, summed over its nodes in a fixed
  /// order (no atomics). Synchronises `stream`; validates the species (InputError).
  Nested reverse_weights(const int* species, std::size_t num_nodes, const T* x, const T* grad_out,
                         void* stream = nullptr) const;

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

}  // namespace fastmlip::cuda

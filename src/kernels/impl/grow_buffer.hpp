// SPDX-License-Identifier: MIT
#pragma once
/// \file Grow-only working storage for the kernels and models: a per-step array is allocated
/// once and reused while the system does not grow. On a GPU every allocation is a cudaMalloc and
/// every free a device synchronisation, so a step of MD that allocated its scratch anew paid both
/// a few dozen times; on the host it paid the allocator and, for zeroed arrays, a first touch.
/// Matrices handed out are unmanaged windows on the storage, valid until the next larger request;
/// vectors share its reference count.
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <string>
#include <utility>

#include "core/grow_rows.hpp"

namespace fastmlip::kernels::impl {

template <class V, class ExecSpace>
class GrowBuffer {
 public:
  using Matrix = Kokkos::View<V**, Kokkos::LayoutRight, ExecSpace>;
  using Vector = Kokkos::View<V*, ExecSpace>;

  GrowBuffer() = default;
  explicit GrowBuffer(std::string label) : m_label(std::move(label)) {}

  /// A rows x cols matrix (row-major, contiguous) on the storage; contents undefined.
  Matrix get(int rows, int cols) {
    return Matrix(reserve(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols)), rows, cols);
  }
  /// An n-vector on the storage; contents undefined. It shares the storage's reference count,
  /// so it stays valid after a larger request (which moves this buffer to new storage) and after
  /// the buffer itself is gone.
  Vector vector(std::size_t n) {
    reserve(n);
    return Kokkos::subview(m_store, std::pair<std::size_t, std::size_t>(0, n));
  }
  /// As vector(n), every value zero.
  Vector zeros(std::size_t n) {
    Vector v = vector(n);
    Kokkos::deep_copy(v, V(0));
    return v;
  }
  /// As get(rows, cols), every value zero.
  Matrix zeros(int rows, int cols) {
    Matrix m = get(rows, cols);
    Kokkos::deep_copy(m, V(0));
    return m;
  }

 private:
  V* reserve(std::size_t n) {
    grow_rows(m_store, n, m_label);  // with headroom, as the graph's arrays
    return m_store.data();
  }

  std::string m_label = "fastmlip::scratch";
  Kokkos::View<V*, ExecSpace> m_store;
};

}  // namespace fastmlip::kernels::impl

// SPDX-License-Identifier: MIT
#pragma once
/// \file Small helpers the Kokkos drivers share: host tables to device views, shape checks.
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace fastmlip::kernels::impl {

/// A host table as a read-only view in ExecSpace's memory.
template <class ExecSpace, class V>
Kokkos::View<const V*, ExecSpace> upload(const std::vector<V>& v, const std::string& label) {
  Kokkos::View<V*, ExecSpace> d(label, v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < v.size(); ++i) {
    h(i) = v[i];
  }
  Kokkos::deep_copy(d, h);
  return d;
}

/// A host row-major table [rows][cols] (of V, converted to T) as a view in ExecSpace's memory.
template <class ExecSpace, class V, class T = V>
Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> upload_matrix(const std::vector<V>& v, int rows, int cols,
                                                                const std::string& label) {
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> d(label, rows, cols);
  auto h = Kokkos::create_mirror_view(d);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      h(i, j) = static_cast<T>(v[static_cast<std::size_t>(i) * cols + j]);
    }
  }
  Kokkos::deep_copy(d, h);
  return d;
}

/// Throws InputError "<owner>::<fn>: <name> is R x C, expected r x c" on a shape mismatch.
template <class M>
void check_shape(const char* owner, const char* fn, const char* name, const M& v, std::size_t rows, std::size_t cols) {
  if (v.extent(0) != rows || v.extent(1) != cols) {
    throw InputError(std::string(owner) + "::" + fn + ": " + name + " is " + std::to_string(v.extent(0)) + " x " +
                     std::to_string(v.extent(1)) + ", expected " + std::to_string(rows) + " x " + std::to_string(cols));
  }
}

}  // namespace fastmlip::kernels::impl

// SPDX-License-Identifier: MIT
#pragma once
// Moving test data to and from an execution space's memory: what the kernel and model tests that
// run on Kokkos' default execution space (the host, or a GPU in the device tests) need around
// every call.
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace fastmlip::test {

/// A row-major [rows][cols] matrix of T in Space's memory from host values of any type V.
template <class T, class Space = Kokkos::DefaultExecutionSpace, class V>
Kokkos::View<T**, Kokkos::LayoutRight, Space> matrix_in_space(const std::vector<V>& v, std::size_t rows,
                                                              std::size_t cols,
                                                              const std::string& label = "test") {
  Kokkos::View<T**, Kokkos::LayoutRight, Space> d(label, rows, cols);
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t q = 0; q < v.size() && q < h.size(); ++q) {
    h.data()[q] = static_cast<T>(v[q]);
  }
  Kokkos::deep_copy(d, h);
  return d;
}

/// A vector of T in Space's memory from host values of any type V.
template <class T, class Space = Kokkos::DefaultExecutionSpace, class V>
Kokkos::View<T*, Space> vector_in_space(const std::vector<V>& v, const std::string& label = "test") {
  Kokkos::View<T*, Space> d(label, v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t q = 0; q < v.size(); ++q) {
    h(q) = static_cast<T>(v[q]);
  }
  Kokkos::deep_copy(d, h);
  return d;
}

/// A contiguous view's values on the host, widened to double, in its memory order.
template <class View>
std::vector<double> host_values(const View& d) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  return std::vector<double>(h.data(), h.data() + h.size());
}

}  // namespace fastmlip::test

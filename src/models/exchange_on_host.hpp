// SPDX-License-Identifier: MIT
#pragma once
/// \file The caller's communication (FeatureExchange, ChgnetExchange: LAMMPS' comm) reads and
/// writes node and slot rows in host memory. A model whose rows live in a device's memory hands
/// it a host copy and copies the result back; one on the host hands it the rows themselves.
#include <Kokkos_Core.hpp>

#include "kernels/impl/grow_buffer.hpp"

namespace fastmlip::models {

/// Runs exchange(T* rows) on `rows` [n][width] (row-major) or, where the rows' memory is not
/// host-accessible, on a copy of them in `staging` (kept between calls, as the models' other
/// storage), copied back afterwards.
template <class T, class Space, class F>
void exchange_on_host(const Kokkos::View<T**, Kokkos::LayoutRight, Space>& rows,
                      kernels::impl::GrowBuffer<T, Kokkos::HostSpace>& staging, F&& exchange) {
  using Memory = typename Kokkos::View<T**, Kokkos::LayoutRight, Space>::memory_space;
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible) {
    exchange(rows.data());
  } else {
    const auto host = staging.get(static_cast<int>(rows.extent(0)), static_cast<int>(rows.extent(1)));
    Kokkos::deep_copy(host, rows);
    exchange(host.data());
    Kokkos::deep_copy(rows, host);
  }
}

}  // namespace fastmlip::models

// SPDX-License-Identifier: MIT
#pragma once
/// \file The caller's communication (FeatureExchange, ChgnetExchange: LAMMPS' comm) reads and
/// writes node and slot rows in host memory. A model whose rows live in a device's memory hands
/// it a host copy and copies the result back; one on the host hands it the rows themselves.
#include <Kokkos_Core.hpp>
#include <utility>

#include "kernels/impl/grow_buffer.hpp"
#include "models/feature_exchange.hpp"

namespace fastmlip::models {

/// What an exchange of node rows [n][width] (nodes 0..n_local-1 local, the rest ghosts) reads and
/// writes, by FeatureExchange's contract: `forward` reads the local rows and overwrites the ghost
/// rows; `reverse` reads every row, adds into the local rows and zeroes the ghost rows; `any`
/// (rows of another layout, CHGNet's bond slots) may read and write every row.
enum class ExchangeRows { forward, reverse, any };

/// exchange(T* rows) on a host copy of `rows` in `staging` (kept between calls), whatever
/// memory `rows` is in. Only what the exchange reads crosses to the host and only what it writes
/// crosses back: a forward exchange copies the local rows over and the ghost rows back, a reverse
/// one every row over and the local rows back (the ghost rows are zeroed where they are). With
/// as many ghosts as local rows, a forward exchange moves half of what copying every row both ways
/// would, a reverse one three quarters.
template <class T, class Space, class F>
void exchange_through_host_copy(const Kokkos::View<T**, Kokkos::LayoutRight, Space>& rows, int n_local,
                                ExchangeRows what, kernels::impl::GrowBuffer<T, Kokkos::HostSpace>& staging,
                                F&& exchange) {
  const int n = static_cast<int>(rows.extent(0));
  const auto host = staging.get(n, static_cast<int>(rows.extent(1)));
  const auto part = [](const auto& v, int first, int last) {
    return Kokkos::subview(v, std::make_pair(first, last), Kokkos::ALL());
  };
  const int over = what == ExchangeRows::forward ? n_local : n;
  Kokkos::deep_copy(part(host, 0, over), part(rows, 0, over));
  exchange(host.data());
  switch (what) {
    case ExchangeRows::forward:
      Kokkos::deep_copy(part(rows, n_local, n), part(host, n_local, n));
      return;
    case ExchangeRows::reverse:
      Kokkos::deep_copy(part(rows, 0, n_local), part(host, 0, n_local));
      Kokkos::deep_copy(part(rows, n_local, n), T(0));
      return;
    case ExchangeRows::any:
      Kokkos::deep_copy(rows, host);
      return;
  }
}

/// Runs exchange(T* rows) on `rows` [n][width] (row-major) where its memory is host-accessible,
/// else through a host copy (exchange_through_host_copy).
template <class T, class Space, class F>
void exchange_on_host(const Kokkos::View<T**, Kokkos::LayoutRight, Space>& rows, int n_local,
                      ExchangeRows what, kernels::impl::GrowBuffer<T, Kokkos::HostSpace>& staging,
                      F&& exchange) {
  using Memory = typename Kokkos::View<T**, Kokkos::LayoutRight, Space>::memory_space;
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible) {
    exchange(rows.data());
  } else {
    exchange_through_host_copy(rows, n_local, what, staging, std::forward<F>(exchange));
  }
}

/// A node-row exchange (FeatureExchange::forward, or reverse) of `rows` [n][width]: the rows as
/// they are where the exchange takes the model's memory (rows_in_model_memory), else as
/// exchange_on_host gives them.
template <class T, class Space>
void exchange_node_rows(FeatureExchange<T>& exchange,
                        const Kokkos::View<T**, Kokkos::LayoutRight, Space>& rows, int n_local, bool forward,
                        kernels::impl::GrowBuffer<T, Kokkos::HostSpace>& staging) {
  const int width = static_cast<int>(rows.extent(1));
  const auto run = [&](T* data) {
    if (forward) {
      exchange.forward(data, width);
    } else {
      exchange.reverse(data, width);
    }
  };
  if (exchange.rows_in_model_memory()) {
    run(rows.data());
  } else {
    exchange_on_host(rows, n_local, forward ? ExchangeRows::forward : ExchangeRows::reverse, staging, run);
  }
}

}  // namespace fastmlip::models

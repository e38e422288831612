// SPDX-License-Identifier: MIT
#pragma once
/// \file Nodes grouped by a small integer label (the element), by counting sort on the host:
/// per-element weight gradients then sum their nodes in a fixed order, with no atomics, so
/// training is reproducible bit for bit.
#include <Kokkos_Core.hpp>
#include <climits>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace fastmlip::kernels {

/// Throws InputError naming the first node whose label is outside 0..groups-1: kernels index
/// weights by these labels, so a bad one would otherwise be an out-of-bounds read.
namespace impl {

/// The first node whose label is outside 0..groups-1 (INT_MAX if none), found where the labels
/// live.
template <class ExecSpace>
struct FirstBadLabel {
  Kokkos::View<const int*, ExecSpace> m_label;
  int m_groups = 0;
  KOKKOS_INLINE_FUNCTION void operator()(int n, int& first) const {
    if (n < first && (m_label(n) < 0 || m_label(n) >= m_groups)) {
      first = n;
    }
  }
};

}  // namespace impl

/// Throws InputError naming the first node whose label is outside 0..groups-1. One reduction
/// on ExecSpace; only the offending label is brought to the host, to be named.
template <class ExecSpace>
void check_labels(Kokkos::View<const int*, ExecSpace> label, int groups, const std::string& who) {
  int bad = INT_MAX;
  Kokkos::parallel_reduce("fastmlip::check_labels", Kokkos::RangePolicy<ExecSpace>(0, label.extent(0)),
                          impl::FirstBadLabel<ExecSpace>{label, groups}, Kokkos::Min<int>(bad));
  if (bad != INT_MAX) {
    int value = 0;
    Kokkos::deep_copy(value, Kokkos::subview(label, bad));
    throw InputError(who + ": node " + std::to_string(bad) + " has element index " + std::to_string(value) +
                     "; the weights cover 0.." + std::to_string(groups - 1));
  }
}

template <class ExecSpace>
struct NodeGroups {
  Kokkos::View<int*, ExecSpace> ptr;    ///< [groups + 1]: group g holds nodes[ptr(g) .. ptr(g+1))
  Kokkos::View<int*, ExecSpace> nodes;  ///< node ids, ascending within a group

  /// `label(n)` in 0..groups-1 for every node; InputError naming the node otherwise.
  static NodeGroups build(Kokkos::View<const int*, ExecSpace> label, int groups, const char* who) {
    check_labels(label, groups, who);
    auto h_label = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), label);
    const int N = static_cast<int>(label.extent(0));
    NodeGroups out;
    out.ptr = Kokkos::View<int*, ExecSpace>("fastmlip::node_groups::ptr", groups + 1);
    out.nodes = Kokkos::View<int*, ExecSpace>("fastmlip::node_groups::nodes", N);
    auto h_ptr = Kokkos::create_mirror_view(out.ptr);
    auto h_nodes = Kokkos::create_mirror_view(out.nodes);
    std::vector<int> count(groups + 1, 0);
    for (int n = 0; n < N; ++n) {
      ++count[h_label(n) + 1];
    }
    for (int g = 0; g < groups; ++g) {
      count[g + 1] += count[g];
    }
    for (int g = 0; g <= groups; ++g) {
      h_ptr(g) = count[g];
    }
    for (int n = 0; n < N; ++n) {
      h_nodes(count[h_label(n)]++) = n;
    }
    Kokkos::deep_copy(out.ptr, h_ptr);
    Kokkos::deep_copy(out.nodes, h_nodes);
    return out;
  }
};

}  // namespace fastmlip::kernels

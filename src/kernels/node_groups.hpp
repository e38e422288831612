// SPDX-License-Identifier: MIT
#pragma once
/// \file Nodes grouped by a small integer label (the element), by a stable counting sort on the
/// execution space: per-element weight gradients then sum their nodes in a fixed order, with no
/// atomics, so training is reproducible bit for bit.
#include <Kokkos_Core.hpp>
#include <climits>
#include <cstddef>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "kernels/impl/grow_buffer.hpp"

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

namespace impl {

/// A stable counting sort of the nodes by label, on the execution space and without atomics:
/// the nodes are cut into blocks of kBlock; each block counts its labels (TagCount), each label
/// turns its blocks' counts into their starts (TagOffsets), the label sizes are summed into
/// offsets (NodeGroupsScan), and each block places its nodes in node order (TagPlace). Nodes
/// are thus ascending within a label, as a serial counting sort leaves them.
template <class ExecSpace>
struct NodeGroupsFunctor {
  struct TagCount {};
  struct TagOffsets {};
  struct TagPlace {};
  static constexpr int kBlock = 256;
  Kokkos::View<const int*, ExecSpace> m_label;
  Kokkos::View<int**, Kokkos::LayoutRight, ExecSpace> m_block;  // [block, label]: count, then start
  Kokkos::View<int*, ExecSpace> m_ptr, m_nodes;
  int m_groups = 0, m_num_nodes = 0, m_blocks = 0;

  KOKKOS_INLINE_FUNCTION void operator()(TagCount, int b) const {
    for (int g = 0; g < m_groups; ++g) {
      m_block(b, g) = 0;
    }
    const int end = (b + 1) * kBlock < m_num_nodes ? (b + 1) * kBlock : m_num_nodes;
    for (int n = b * kBlock; n < end; ++n) {
      ++m_block(b, m_label(n));
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagOffsets, int g) const {
    int run = 0;
    for (int b = 0; b < m_blocks; ++b) {
      const int c = m_block(b, g);
      m_block(b, g) = run;
      run += c;
    }
    m_ptr(g + 1) = run;  // the label's size, until NodeGroupsScan
    if (g == 0) {
      m_ptr(0) = 0;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagPlace, int b) const {
    const int end = (b + 1) * kBlock < m_num_nodes ? (b + 1) * kBlock : m_num_nodes;
    for (int n = b * kBlock; n < end; ++n) {
      const int g = m_label(n);
      m_nodes(m_ptr(g) + m_block(b, g)++) = n;
    }
  }
};

/// ptr(g + 1) = the sizes of labels 0..g: sizes in, offsets out.
template <class ExecSpace>
struct NodeGroupsScan {
  using value_type = int;
  Kokkos::View<const int*, ExecSpace> m_size;
  Kokkos::View<int*, ExecSpace> m_ptr;
  KOKKOS_INLINE_FUNCTION void operator()(int g, int& update, const bool final) const {
    update += m_size(g);
    if (final) {
      m_ptr(g + 1) = update;
    }
  }
};

}  // namespace impl

/// Working storage of NodeGroups::build, reused from call to call (grow-only).
template <class ExecSpace>
struct NodeGroupsStorage {
  impl::GrowBuffer<int, ExecSpace> ptr{"fastmlip::node_groups::ptr"}, nodes{"fastmlip::node_groups::nodes"},
      size{"fastmlip::node_groups::size"}, block{"fastmlip::node_groups::block"};
};

template <class ExecSpace>
struct NodeGroups {
  Kokkos::View<int*, ExecSpace> ptr;    ///< [groups + 1]: group g holds nodes[ptr(g) .. ptr(g+1))
  Kokkos::View<int*, ExecSpace> nodes;  ///< node ids, ascending within a group

  /// `label(n)` in 0..groups-1 for every node; InputError naming the node otherwise. Built where
  /// the labels are (impl::NodeGroupsFunctor): no copy to the host but the check's one number.
  /// The arrays are `storage`'s, valid until its next build.
  static NodeGroups build(Kokkos::View<const int*, ExecSpace> label, int groups, const char* who,
                          NodeGroupsStorage<ExecSpace>& storage) {
    using F = impl::NodeGroupsFunctor<ExecSpace>;
    check_labels(label, groups, who);
    const int N = static_cast<int>(label.extent(0));
    F f;
    f.m_label = label;
    f.m_groups = groups;
    f.m_num_nodes = N;
    f.m_blocks = (N + F::kBlock - 1) / F::kBlock;
    f.m_ptr = storage.ptr.vector(static_cast<std::size_t>(groups) + 1);
    f.m_nodes = storage.nodes.vector(static_cast<std::size_t>(N));
    f.m_block = storage.block.get(f.m_blocks, groups);
    Kokkos::parallel_for("fastmlip::node_groups::count",
                         Kokkos::RangePolicy<ExecSpace, typename F::TagCount>(0, f.m_blocks), f);
    Kokkos::parallel_for("fastmlip::node_groups::offsets",
                         Kokkos::RangePolicy<ExecSpace, typename F::TagOffsets>(0, groups), f);
    // The sizes, copied out of ptr, summed into it.
    auto size = storage.size.vector(static_cast<std::size_t>(groups));
    Kokkos::deep_copy(size, Kokkos::subview(f.m_ptr, std::pair<int, int>(1, groups + 1)));
    Kokkos::parallel_scan("fastmlip::node_groups::scan", Kokkos::RangePolicy<ExecSpace>(0, groups),
                          impl::NodeGroupsScan<ExecSpace>{size, f.m_ptr});
    Kokkos::parallel_for("fastmlip::node_groups::place",
                         Kokkos::RangePolicy<ExecSpace, typename F::TagPlace>(0, f.m_blocks), f);
    return NodeGroups{f.m_ptr, f.m_nodes};
  }

  /// As above, with arrays of its own.
  static NodeGroups build(Kokkos::View<const int*, ExecSpace> label, int groups, const char* who) {
    NodeGroupsStorage<ExecSpace> fresh;  // the views returned keep their arrays alive
    return build(label, groups, who, fresh);
  }
};

}  // namespace fastmlip::kernels

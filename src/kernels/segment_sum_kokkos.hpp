// SPDX-License-Identifier: MIT
#pragma once
/// \file Segment sums: out(s, :) = sum of rows ptr(s) .. ptr(s+1)-1 of x, e.g. per-structure
/// energies from per-atom energies of a batch whose atoms are grouped by structure. Each
/// segment is summed by one team in row order, so the result is the same bit for bit on every
/// run (no atomics), which is what makes training reproducible.
#include <Kokkos_Core.hpp>
#include <string>

#include "core/error.hpp"
#include "kernels/impl/upload.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
struct SegmentSumFunctor {
  struct TagForward {};
  struct TagReverse {};
  Kokkos::View<const int*, ExecSpace> m_ptr;
  Kokkos::View<const int*, ExecSpace> m_segment;  // segment of each row (reverse only)
  Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace> m_x, m_grad_out;
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> m_out, m_grad_x;

  // One index per (segment, column): a serial walk down the rows fixes the summation order.
  KOKKOS_INLINE_FUNCTION void operator()(TagForward, int idx) const {
    const int D = static_cast<int>(m_x.extent(1));
    const int s = idx / D, c = idx % D;
    T acc = 0;
    for (int r = m_ptr(s); r < m_ptr(s + 1); ++r) {
      acc += m_x(r, c);
    }
    m_out(s, c) = acc;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int idx) const {
    const int D = static_cast<int>(m_grad_x.extent(1));
    const int r = idx / D, c = idx % D;
    m_grad_x(r, c) = m_grad_out(m_segment(r), c);
  }
};

template <class ExecSpace, class T>
class SegmentSumKokkos {
  using Functor = SegmentSumFunctor<ExecSpace, T>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  /// `ptr`: segment boundaries, ptr[0] = 0, non-decreasing, ptr.back() = number of rows.
  explicit SegmentSumKokkos(const std::vector<int>& ptr) {
    if (ptr.empty() || ptr.front() != 0) {
      throw InputError("SegmentSumKokkos: segment boundaries must start at 0");
    }
    std::vector<int> segment;
    for (std::size_t s = 0; s + 1 < ptr.size(); ++s) {
      if (ptr[s + 1] < ptr[s]) {
        throw InputError("SegmentSumKokkos: segment " + std::to_string(s) + " ends (" + std::to_string(ptr[s + 1]) +
                         ") before it starts (" + std::to_string(ptr[s]) + ")");
      }
      segment.insert(segment.end(), ptr[s + 1] - ptr[s], static_cast<int>(s));
    }
    m_segments = static_cast<int>(ptr.size()) - 1;
    m_rows = ptr.back();
    m_f.m_ptr = impl::upload<ExecSpace>(ptr, "fastmlip::segment_sum::ptr");
    m_f.m_segment = impl::upload<ExecSpace>(segment, "fastmlip::segment_sum::segment");
  }

  void compute(ConstMatrix x, Matrix out) const {
    impl::check_shape("SegmentSumKokkos", "compute", "x", x, m_rows, x.extent(1));
    impl::check_shape("SegmentSumKokkos", "compute", "out", out, m_segments, x.extent(1));
    auto f = m_f;
    f.m_x = x;
    f.m_out = out;
    Kokkos::parallel_for("fastmlip::segment_sum::forward",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagForward>(0, out.size()), f);
  }

  /// grad_x(r, :) = grad_out(segment of r, :).
  void reverse(ConstMatrix grad_out, Matrix grad_x) const {
    impl::check_shape("SegmentSumKokkos", "reverse", "grad_out", grad_out, m_segments, grad_out.extent(1));
    impl::check_shape("SegmentSumKokkos", "reverse", "grad_x", grad_x, m_rows, grad_out.extent(1));
    auto f = m_f;
    f.m_grad_out = grad_out;
    f.m_grad_x = grad_x;
    Kokkos::parallel_for("fastmlip::segment_sum::reverse",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverse>(0, grad_x.size()), f);
  }

 private:
  Functor m_f;
  int m_segments = 0, m_rows = 0;
};

}  // namespace fastmlip::kernels

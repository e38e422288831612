// SPDX-License-Identifier: MIT
#pragma once
// A FeatureExchange that takes the model's node rows where they are (rows_in_model_memory), as
// the /kk pair styles' does, and does on Space what CopyExchange / ChgnetCopyExchange do on host
// rows: ghost rows copied from their owners (forward), added into them and zeroed (reverse).
#include <Kokkos_Core.hpp>
#include <utility>
#include <vector>

#include "models/feature_exchange.hpp"

namespace fastmlip::test {

/// DeviceRowsExchange's kernels, one thread per value of a row and the ghosts in order, so that
/// an owner's sum is the host exchanges' (outside the class: nvcc launches only accessible
/// functors).
template <class Space, class T>
struct DeviceRowsCopy {
  struct TagForward {};
  struct TagReverse {};
  Kokkos::View<T**, Kokkos::LayoutRight, typename Space::memory_space,
               Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      rows;
  Kokkos::View<int*, typename Space::memory_space> owner;
  int n_local = 0;
  KOKKOS_INLINE_FUNCTION void operator()(TagForward, int k) const {
    for (int g = 0; g < static_cast<int>(owner.extent(0)); ++g) {
      rows(n_local + g, k) = rows(owner(g), k);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int k) const {
    for (int g = 0; g < static_cast<int>(owner.extent(0)); ++g) {
      rows(owner(g), k) += rows(n_local + g, k);
      rows(n_local + g, k) = T(0);
    }
  }
};

/// The same for slot rows (CHGNet's bond slots): each node's rows slot_start(j)..slot_start(j+1),
/// a ghost's copied from (or added into) its owner's in order, one thread per value of a row.
template <class Space, class T>
struct DeviceSlotsCopy {
  struct TagForward {};
  struct TagReverse {};
  Kokkos::View<T**, Kokkos::LayoutRight, typename Space::memory_space,
               Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      rows;
  Kokkos::View<int*, typename Space::memory_space> owner, slot_start;
  int n_local = 0;
  KOKKOS_INLINE_FUNCTION void operator()(TagForward, int k) const {
    for (int g = 0; g < static_cast<int>(owner.extent(0)); ++g) {
      const int from = slot_start(owner(g)), to = slot_start(n_local + g);
      for (int q = 0; q < slot_start(n_local + g + 1) - to; ++q) {
        rows(to + q, k) = rows(from + q, k);
      }
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int k) const {
    for (int g = 0; g < static_cast<int>(owner.extent(0)); ++g) {
      const int from = slot_start(owner(g)), to = slot_start(n_local + g);
      for (int q = 0; q < slot_start(n_local + g + 1) - to; ++q) {
        rows(from + q, k) += rows(to + q, k);
        rows(to + q, k) = T(0);
      }
    }
  }
};

/// Base's exchange (its slot rows, ghost owners, counters) with the node rows taken where the
/// model keeps them and exchanged on Space. `widths` lists the node exchanges' widths.
template <class Space, class T, class Base = models::FeatureExchange<T>>
class DeviceRowsExchange : public Base {
 public:
  template <class... BaseArgs>
  DeviceRowsExchange(int n_local, const std::vector<int>& owner, BaseArgs&&... base)
      : Base(std::forward<BaseArgs>(base)...) {
    m_copy.owner = Kokkos::View<int*, typename Space::memory_space>("fastmlip::test::owner", owner.size());
    m_copy.n_local = n_local;
    Kokkos::deep_copy(m_copy.owner,
                      Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                          owner.data(), owner.size()));
  }
  bool rows_in_model_memory() const override { return true; }
  void forward(T* rows, int width) override {
    run<typename DeviceRowsCopy<Space, T>::TagForward>(rows, width);
  }
  void reverse(T* rows, int width) override {
    run<typename DeviceRowsCopy<Space, T>::TagReverse>(rows, width);
  }
  std::vector<int> widths;

 private:
  template <class Tag>
  void run(T* rows, int width) {
    widths.push_back(width);
    m_copy.rows = decltype(m_copy.rows)(rows, m_copy.n_local + m_copy.owner.extent(0), width);
    Kokkos::parallel_for("fastmlip::test::device_rows_exchange", Kokkos::RangePolicy<Space, Tag>(0, width),
                         m_copy);
    Kokkos::fence();
  }
  DeviceRowsCopy<Space, T> m_copy;
};

}  // namespace fastmlip::test

// SPDX-License-Identifier: MIT
#pragma once
/// \file What CHGNet's convolution stages (chgnet_atom_conv.hpp, chgnet_angle_blocks.hpp) share:
/// they run their rows (edges or angles) in chunks, assemble each chunk's gated-MLP input from
/// projections gathered per row, scatter per-row results back to nodes or bonds, and may keep a
/// chunk's activations for the reverse pass.
///
/// Every helper has the two paths of the dense kernels (kernels/dense_kokkos.hpp): `rows`, on
/// host spaces, plain loops and the host's SIMD row kernels (the arithmetic ChgnetModel's host
/// loops ran, bit for bit, and no launch per 32-row tile); `teams`, Kokkos launches, on devices
/// (and on the host where a test asks for it). Scatters are atomic on `teams`: a device sums a
/// row's contributions in no fixed order.
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <string>

#include "core/error.hpp"
#include "kernels/dense_kokkos.hpp"
#include "kernels/gated_mlp.hpp"
#include "kernels/gated_mlp_kokkos.hpp"
#include "kernels/impl/rows_impl.hpp"

namespace fastmlip::models::chgnet::impl {

template <class ExecSpace>
constexpr bool kHostSpace =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;

/// A 2-D element-wise step f(Tag, t, j) over rows x cols: a plain loop on the `rows` path, a
/// launch on `teams`.
template <class Tag, class ExecSpace, class F>
void for_each_element(bool rows_path, const char* label, int rows, int cols, const F& f) {
  if constexpr (kHostSpace<ExecSpace>) {
    if (rows_path) {
      for (int t = 0; t < rows; ++t) {
        for (int j = 0; j < cols; ++j) {
          f(Tag(), t, j);
        }
      }
      return;
    }
  }
  Kokkos::parallel_for(label, Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Tag>({0, 0}, {rows, cols}),
                       f);
}

template <class ExecSpace, class T>
struct RowsFunctor {
  struct TagGather {};   // rows(t, :) += table(idx(r0 + t) - base, :)
  struct TagScatter {};  // table(idx(r0 + t) - base, :) += rows(t, :), atomically

  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> rows, table;
  Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace> const_rows, const_table;
  Kokkos::View<const int*, ExecSpace> idx;
  int r0 = 0, base = 0;

  KOKKOS_INLINE_FUNCTION void operator()(TagGather, int t, int j) const {
    rows(t, j) += const_table(idx(r0 + t) - base, j);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagScatter, int t, int j) const {
    Kokkos::atomic_add(&table(idx(r0 + t) - base, j), const_rows(t, j));
  }
};

/// rows [n][w] += table rows idx(r0 .. r0 + n - 1); `base`: the index of table's first row
/// (a window on a longer table).
template <class ExecSpace, class T>
void add_gathered(bool rows_path, const Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>& rows,
                  const Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>& table,
                  const Kokkos::View<const int*, ExecSpace>& idx, int r0, int base = 0) {
  const int n = static_cast<int>(rows.extent(0)), w = static_cast<int>(rows.extent(1));
  if constexpr (kHostSpace<ExecSpace>) {
    if (rows_path) {
      kernels::rows::add_rows(table.data(), idx.data() + r0, base, n, w, rows.data());
      return;
    }
  }
  RowsFunctor<ExecSpace, T> f;
  f.rows = rows, f.const_table = table, f.idx = idx, f.r0 = r0, f.base = base;
  for_each_element<typename RowsFunctor<ExecSpace, T>::TagGather, ExecSpace>(
      false, "fastmlip::chgnet::gather", n, w, f);
}

/// table rows idx(r0 .. r0 + n - 1) += rows [n][w], in row order on `rows`; `base` as in
/// add_gathered.
template <class ExecSpace, class T>
void scatter_added(bool rows_path, const Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>& rows,
                   const Kokkos::View<const int*, ExecSpace>& idx, int r0,
                   const Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>& table, int base = 0) {
  const int n = static_cast<int>(rows.extent(0)), w = static_cast<int>(rows.extent(1));
  if constexpr (kHostSpace<ExecSpace>) {
    if (rows_path) {
      kernels::rows::scatter_rows(rows.data(), idx.data() + r0, base, n, w, table.data());
      return;
    }
  }
  RowsFunctor<ExecSpace, T> f;
  f.const_rows = rows, f.table = table, f.idx = idx, f.r0 = r0, f.base = base;
  for_each_element<typename RowsFunctor<ExecSpace, T>::TagScatter, ExecSpace>(
      false, "fastmlip::chgnet::scatter", n, w, f);
}

/// One layer's activations kept from the forward to the reverse pass: the gated MLP's first-layer
/// outputs of every row and, on `rows`, its other activations tile by tile
/// (GatedMlpKokkos::Kept). Grown, never shrunk, while kept.
template <class ExecSpace, class T>
struct KeptActivations {
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using Mlp = kernels::GatedMlpKokkos<ExecSpace, T>;
  Matrix z1;
  typename Mlp::Kept acts;

  void resize(const Mlp& m, int rows) { resize(m, rows, m.kept_size(rows)); }
  /// For chunks whose rows are not all multiples of the tile: `values` of activations in all,
  /// each chunk's from its own offset (tiles_at).
  void resize(const Mlp& m, int rows, std::size_t values) {
    if (z1.extent(0) < static_cast<std::size_t>(rows) ||
        z1.extent(1) != static_cast<std::size_t>(m.width2())) {
      z1 = Matrix(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("fastmlip::chgnet::kept_z1")),
                  rows, m.width2());
    }
    if (acts.extent(0) < values) {
      acts = typename Mlp::Kept(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("fastmlip::chgnet::kept_acts")),
          values);
    }
  }
  /// Rows r0 .. r0 + n - 1.
  Matrix z1_rows(int r0, int n) const {
    return Kokkos::subview(z1, Kokkos::make_pair(r0, r0 + n), Kokkos::ALL);
  }
  /// Their activations, r0 a multiple of the tile (a chunk's tiles are consecutive).
  typename Mlp::Kept tiles(const Mlp& m, int r0, int n) const {
    return tiles_at(m.kept_size(static_cast<std::size_t>(r0)), m, n);
  }
  /// The activations of a chunk of n rows whose own start at value `first`.
  typename Mlp::Kept tiles_at(std::size_t first, const Mlp& m, int n) const {
    return Kokkos::subview(acts, Kokkos::make_pair(first, first + m.kept_size(static_cast<std::size_t>(n))));
  }
};

/// What a chunked convolution stage holds besides its weights: the path its kernels take, its
/// rows per chunk (the gated MLP's 32-row tile on `rows`, kDeviceChunk on `teams`) and whether
/// its forward keeps activations for its reverse.
template <class ExecSpace, class T>
class ChunkedStage {
 public:
  /// The views the stages take (derived stages name them with `using typename Base::...`).
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstInts = Kokkos::View<const int*, ExecSpace>;
  using ConstReals = Kokkos::View<const T*, ExecSpace>;
  using Doubles = Kokkos::View<double*, ExecSpace>;

  /// Rows per chunk on the `teams` path: enough rows for a device, a few MB of scratch.
  static constexpr int kDeviceChunk = 8192;

  int chunk() const { return m_chunk; }
  /// Rows per chunk, a positive multiple of the gated MLP's tile (kept activations are laid out
  /// tile by tile): tests use small chunks on `teams` to cross chunk boundaries.
  void set_chunk(int rows) {
    if (rows <= 0 || rows % kernels::GatedMlp<T>::kTile != 0) {
      throw InputError(std::string(m_name) + "::set_chunk: " + std::to_string(rows) +
                       " rows is not a positive multiple of " + std::to_string(kernels::GatedMlp<T>::kTile));
    }
    m_chunk = rows;
  }

 protected:
  ChunkedStage(const char* name, kernels::DensePath path)
      : m_name(name),
        m_rows_path(kernels::impl::resolve_path<ExecSpace>(path, name) == kernels::DensePath::rows),
        m_chunk(m_rows_path ? kernels::GatedMlp<T>::kTile : kDeviceChunk) {}

  /// A 2-D element-wise step of the stage's functor F (for_each_element).
  template <class Tag, class F>
  void each(const char* label, int rows, int cols, const F& f) const {
    for_each_element<Tag, ExecSpace>(m_rows_path, label, rows, cols, f);
  }

  const char* m_name;
  bool m_rows_path;
  int m_chunk;
  bool m_keep = false;
};

}  // namespace fastmlip::models::chgnet::impl

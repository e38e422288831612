// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the tabulated radial function (radial_table.hpp).
#include <Kokkos_Core.hpp>
#include <climits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/impl/radial_table_impl.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/radial_table.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class RadialTableKokkos {
  static_assert(std::is_floating_point_v<T>, "RadialTableKokkos: T must be float or double (inference only)");
  using Functor = impl::RadialTableFunctor<ExecSpace, T>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Vector = Kokkos::View<T*, ExecSpace>;
  using ConstVector = Kokkos::View<const T*, ExecSpace>;

  explicit RadialTableKokkos(const RadialTable& table) : RadialTableKokkos(std::vector<RadialTable>{table}) {}

  /// Several tables of one function family (one per pair of elements), on the same knots and
  /// of the same width; an edge's table is chosen by set_edge_tables().
  explicit RadialTableKokkos(const std::vector<RadialTable>& tables) {
    if (tables.empty()) {
      throw InputError("RadialTableKokkos: no tables");
    }
    const RadialTable& first = tables.front();
    std::vector<T> data;
    data.reserve(tables.size() * first.data.size());
    for (const auto& table : tables) {
      table.validate();
      if (table.knots != first.knots || table.width != first.width || table.r_lo != first.r_lo ||
          table.r_max != first.r_max) {
        throw InputError(
            "RadialTableKokkos: tables on different knots or of different widths cannot be stacked");
      }
      data.insert(data.end(), table.data.begin(), table.data.end());
    }
    m_table_r_lo = first.r_lo;
    m_width = first.width;
    auto& t = m_f.m_table;
    t.data = impl::upload<ExecSpace>(data, "fastmlip::radial_table::data");
    t.width = first.width;
    t.knots = first.knots;
    t.r_lo = first.r_lo;
    t.r_max = first.r_max;
    t.inv_h = 1.0 / first.h;
    t.stride = first.data.size();
    t.tables = static_cast<int>(tables.size());
  }

  int width() const { return m_width; }
  int num_tables() const { return m_f.m_table.tables; }
  /// Edge e reads table edge_table(e) from now on (the calls check each index against
  /// num_tables()); an empty view: table 0 for every edge.
  void set_edge_tables(Kokkos::View<const int*, ExecSpace> edge_table) {
    m_f.m_table.edge_table = edge_table;
  }
  /// What kernels that evaluate the table themselves need (ChannelwiseTPKokkos).
  const impl::HermiteTable<ExecSpace, T>& table() const { return m_f.m_table; }

  /// Throws InputError naming the first edge shorter than the table's lower end (or not a
  /// number), or whose table index (set_edge_tables) is out of range.
  void check(ConstVector r) const {
    const auto& edge_table = m_f.m_table.edge_table;
    if (edge_table.extent(0) > 0 && edge_table.extent(0) != r.extent(0)) {
      throw InputError("RadialTableKokkos: " + std::to_string(edge_table.extent(0)) +
                       " edge table indices for " + std::to_string(r.extent(0)) + " edges");
    }
    auto f = m_f;
    f.m_r = r;
    int first_bad = INT_MAX;
    Kokkos::parallel_reduce("fastmlip::radial_table::check",
                            Kokkos::RangePolicy<ExecSpace, typename Functor::TagCheck>(0, r.extent(0)), f,
                            Kokkos::Min<int>(first_bad));
    if (first_bad != INT_MAX && edge_table.extent(0) > 0) {
      int t;
      Kokkos::deep_copy(t, Kokkos::subview(edge_table, first_bad));
      if (t < 0 || t >= num_tables()) {
        throw InputError("RadialTableKokkos: edge " + std::to_string(first_bad) + " reads table " +
                         std::to_string(t) + " of " + std::to_string(num_tables()));
      }
    }
    if (first_bad != INT_MAX) {
      T bad;
      Kokkos::deep_copy(bad, Kokkos::subview(r, first_bad));
      throw InputError("RadialTableKokkos: edge " + std::to_string(first_bad) + " has length " +
                       std::to_string(static_cast<double>(bad)) + " A, below the radial table's lower end " +
                       std::to_string(m_table_r_lo) + " A; evaluate the radial MLP exactly for such close atoms");
    }
  }

  /// out[e, :] = R(r[e]). Throws InputError naming the first edge shorter than the table's
  /// lower end (or not a number).
  void compute(ConstVector r, Matrix out) const {
    impl::check_shape("RadialTableKokkos", "compute", "out", out, r.extent(0), m_width);
    check(r);
    auto f = m_f;
    f.m_r = r;
    f.m_out = out;
    Kokkos::parallel_for("fastmlip::radial_table::forward",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagForward>(0, r.extent(0)), f);
  }

  /// grad_r[e] = sum_j grad_out[e, j] dR_j/dr (r[e]).
  void reverse(ConstVector r, ConstMatrix grad_out, Vector grad_r) const {
    impl::check_shape("RadialTableKokkos", "reverse", "grad_out", grad_out, r.extent(0), m_width);
    if (grad_r.extent(0) != r.extent(0)) {
      throw InputError("RadialTableKokkos::reverse: grad_r has " + std::to_string(grad_r.extent(0)) +
                       " entries for " + std::to_string(r.extent(0)) + " edges");
    }
    check(r);
    auto f = m_f;
    f.m_r = r;
    f.m_grad_out = grad_out;
    f.m_grad_r = grad_r;
    Kokkos::parallel_for("fastmlip::radial_table::reverse",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverse>(0, r.extent(0)), f);
  }

 private:
  double m_table_r_lo = 0;
  int m_width = 0;
  Functor m_f;
};

}  // namespace fastmlip::kernels

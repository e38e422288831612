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

  explicit RadialTableKokkos(const RadialTable& table) : m_table_r_lo(table.r_lo), m_width(table.width) {
    table.validate();
    std::vector<T> data(table.data.begin(), table.data.end());
    auto& t = m_f.m_table;
    t.data = impl::upload<ExecSpace>(data, "fastmlip::radial_table::data");
    t.width = table.width;
    t.knots = table.knots;
    t.r_lo = table.r_lo;
    t.r_max = table.r_max;
    t.inv_h = 1.0 / table.h;
  }

  int width() const { return m_width; }
  /// What kernels that evaluate the table themselves need (ChannelwiseTPKokkos).
  const impl::HermiteTable<ExecSpace, T>& table() const { return m_f.m_table; }

  /// Throws InputError naming the first edge shorter than the table's lower end (or not a number).
  void check(ConstVector r) const {
    auto f = m_f;
    f.m_r = r;
    int first_bad = INT_MAX;
    Kokkos::parallel_reduce("fastmlip::radial_table::check",
                            Kokkos::RangePolicy<ExecSpace, typename Functor::TagCheck>(0, r.extent(0)), f,
                            Kokkos::Min<int>(first_bad));
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
  double m_table_r_lo;
  int m_width;
  Functor m_f;
};

}  // namespace fastmlip::kernels

// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the equivariant linear map (linear.hpp).
#include <Kokkos_Core.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "math/dual.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/impl/linear_impl.hpp"
#include "kernels/linear.hpp"
#include "kernels/node_groups.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class LinearKokkos {
  static_assert(is_kernel_scalar_v<T>, "LinearKokkos: T must be float, double or a Dual of them");
  using Functor = impl::LinearFunctor<ExecSpace, T>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Sets = Kokkos::View<const int*, ExecSpace>;

  explicit LinearKokkos(const EquivariantLinear& lin) : m_lin(lin) {
    const auto& I = lin.instructions;
    Kokkos::View<impl::LinearInsDev*, ExecSpace> ins("fastmlip::linear::instructions", I.size());
    auto h_ins = Kokkos::create_mirror_view(ins);
    for (std::size_t q = 0; q < I.size(); ++q) {
      h_ins(q) = {I[q].mul_in, I[q].mul_out, I[q].dim, I[q].offset_in, I[q].offset_out, I[q].offset_weight, I[q].path_weight};
    }
    Kokkos::deep_copy(ins, h_ins);
    m_f.m_ins = ins;
    m_f.m_out_cols = columns(lin.irreps_out, "fastmlip::linear::out_columns");
    m_f.m_in_cols = columns(lin.irreps_in, "fastmlip::linear::in_columns");
    std::vector<int> by_out, by_in;
    for (std::size_t q = 0; q < I.size(); ++q) {
      by_out.push_back(I[q].out);
      by_in.push_back(I[q].in);
    }
    csr(by_out, static_cast<int>(lin.irreps_out.size()), m_f.m_out_ins_ptr, m_f.m_out_ins);
    csr(by_in, static_cast<int>(lin.irreps_in.size()), m_f.m_in_ins_ptr, m_f.m_in_ins);
    std::vector<int> weight_ins(lin.weight_numel);
    for (std::size_t q = 0; q < I.size(); ++q) {
      for (int k = 0; k < I[q].mul_in * I[q].mul_out; ++k) {
        weight_ins[I[q].offset_weight + k] = static_cast<int>(q);
      }
    }
    m_f.m_weight_ins = impl::upload<ExecSpace>(weight_ins, "fastmlip::linear::weight_instruction");
    m_f.m_dim_in = lin.irreps_in.dim();
    m_f.m_dim_out = lin.irreps_out.dim();
    m_f.m_weight_numel = lin.weight_numel;
  }

  /// W: [num_sets, weight_numel] (see EquivariantLinear::weights_from_e3nn).
  void compute(ConstMatrix W, Sets set, ConstMatrix x, Matrix out) const {
    check_call("compute", W, set, x);
    impl::check_shape("LinearKokkos", "compute", "out", out, x.extent(0), m_lin.irreps_out.dim());
    auto f = bind(W, set, x);
    f.m_out = out;
    Kokkos::parallel_for("fastmlip::linear::forward",
                         Kokkos::TeamPolicy<ExecSpace, typename Functor::TagForward>(x.extent(0), Kokkos::AUTO), f);
  }

  void reverse(ConstMatrix W, Sets set, ConstMatrix x, ConstMatrix grad_out, Matrix grad_x) const {
    check_call("reverse", W, set, x);
    impl::check_shape("LinearKokkos", "reverse", "grad_out", grad_out, x.extent(0), m_lin.irreps_out.dim());
    impl::check_shape("LinearKokkos", "reverse", "grad_x", grad_x, x.extent(0), m_lin.irreps_in.dim());
    auto f = bind(W, set, x);
    f.m_grad_out = grad_out;
    f.m_grad_x = grad_x;
    Kokkos::parallel_for("fastmlip::linear::reverse",
                         Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverse>(x.extent(0), Kokkos::AUTO), f);
  }

  void reverse_weights(ConstMatrix W, Sets set, ConstMatrix x, ConstMatrix grad_out, Matrix grad_W) const {
    check_call("reverse_weights", W, set, x);
    impl::check_shape("LinearKokkos", "reverse_weights", "grad_out", grad_out, x.extent(0), m_lin.irreps_out.dim());
    impl::check_shape("LinearKokkos", "reverse_weights", "grad_W", grad_W, m_lin.num_sets, m_lin.weight_numel);
    Kokkos::View<int*, ExecSpace> labels("fastmlip::linear::labels", x.extent(0));
    if (set.extent(0)) {
      Kokkos::deep_copy(labels, set);
    }
    const auto groups = NodeGroups<ExecSpace>::build(labels, m_lin.num_sets, "LinearKokkos::reverse_weights");
    auto f = bind(W, set, x);
    f.m_grad_out = grad_out;
    f.m_grad_W = grad_W;
    f.m_group_ptr = groups.ptr;
    f.m_group_nodes = groups.nodes;
    Kokkos::parallel_for("fastmlip::linear::reverse_weights",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverseWeights>(
                             0, static_cast<long>(m_lin.num_sets) * m_lin.weight_numel),
                         f);
  }

 private:
  Functor bind(ConstMatrix W, Sets set, ConstMatrix x) const {
    auto f = m_f;
    f.m_W = W;
    f.m_set = set;
    f.m_x = x;
    return f;
  }
  static Kokkos::View<const impl::LinearColumn*, ExecSpace> columns(const Irreps& irreps, const char* label) {
    Kokkos::View<impl::LinearColumn*, ExecSpace> cols(std::string(label), irreps.dim());
    auto h = Kokkos::create_mirror_view(cols);
    int c = 0;
    for (std::size_t e = 0; e < irreps.size(); ++e) {
      for (int u = 0; u < irreps[e].mul; ++u) {
        for (int m = 0; m < irreps[e].ir.dim(); ++m) {
          h(c++) = {static_cast<int>(e), u, m};
        }
      }
    }
    Kokkos::deep_copy(cols, h);
    return cols;
  }
  // Instruction ids grouped by entry (in instruction order within an entry).
  static void csr(const std::vector<int>& entry_of_ins, int entries, Kokkos::View<const int*, ExecSpace>& ptr,
                  Kokkos::View<const int*, ExecSpace>& ids) {
    std::vector<int> p(entries + 1, 0), list;
    for (int e : entry_of_ins) {
      ++p[e + 1];
    }
    for (int e = 0; e < entries; ++e) {
      p[e + 1] += p[e];
      for (std::size_t q = 0; q < entry_of_ins.size(); ++q) {
        if (entry_of_ins[q] == e) {
          list.push_back(static_cast<int>(q));
        }
      }
    }
    ptr = impl::upload<ExecSpace>(p, "fastmlip::linear::entry_ptr");
    ids = impl::upload<ExecSpace>(list, "fastmlip::linear::entry_instructions");
  }
  void check_call(const char* fn, const ConstMatrix& W, const Sets& set, const ConstMatrix& x) const {
    impl::check_shape("LinearKokkos", fn, "W", W, m_lin.num_sets, m_lin.weight_numel);
    impl::check_shape("LinearKokkos", fn, "x", x, x.extent(0), m_lin.irreps_in.dim());
    if (m_lin.num_sets > 1 && set.extent(0) != x.extent(0)) {
      throw InputError(std::string("LinearKokkos::") + fn + ": element-indexed weights need one element per node (" +
                       std::to_string(set.extent(0)) + " for " + std::to_string(x.extent(0)) + " nodes)");
    }
    if (m_lin.num_sets > 1) {
      check_labels(set, m_lin.num_sets, std::string("LinearKokkos::") + fn);
    }
  }
  EquivariantLinear m_lin;
  Functor m_f;
};

}  // namespace fastmlip::kernels

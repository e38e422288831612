// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the channelwise tensor product (channelwise_tp.hpp), fused with the
/// gather of sender features and the scatter-sum into receivers.
#include <Kokkos_Core.hpp>
#include <string>

#include "core/error.hpp"
#include "math/dual.hpp"
#include "kernels/channelwise_tp.hpp"
#include "kernels/edge_index.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/impl/channelwise_tp_impl.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class ChannelwiseTPKokkos {
  static_assert(is_kernel_scalar_v<T>, "ChannelwiseTPKokkos: T must be float, double or a Dual of them");
  using Functor = impl::ChannelwiseTPFunctor<ExecSpace, T>;
  using Limits = impl::ChannelwiseTPLimits;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  explicit ChannelwiseTPKokkos(const ChannelwiseTP& tp) : m_tp(tp) {
    if (tp.dim2() > Limits::kMaxEdgeAttr) {
      throw InputError("ChannelwiseTPKokkos: edge attributes " + tp.irreps2.str() + " have " +
                       std::to_string(tp.dim2()) + " components; this build supports up to " +
                       std::to_string(Limits::kMaxEdgeAttr));
    }
    // Per-channel input layout: irreps1 entries one after another, (2 l1 + 1) each.
    std::vector<int> local_in_of_entry(tp.irreps1.size(), 0);
    int in_per_channel = 0;
    for (std::size_t i = 0; i < tp.irreps1.size(); ++i) {
      local_in_of_entry[i] = in_per_channel;
      in_per_channel += tp.irreps1[i].ir.dim();
    }
    if (in_per_channel > Limits::kMaxInPerChannel) {
      throw InputError("ChannelwiseTPKokkos: node irreps " + tp.irreps1.str() + " have " + std::to_string(in_per_channel) +
                       " components per channel; this build supports up to " + std::to_string(Limits::kMaxInPerChannel));
    }
    Kokkos::View<impl::TPInstructionDev*, ExecSpace> ins("fastmlip::channelwise_tp::instructions", tp.instructions.size());
    Kokkos::View<impl::TPEntryDev<T>*, ExecSpace> cg("fastmlip::channelwise_tp::cg", tp.cg.size());
    auto h_ins = Kokkos::create_mirror_view(ins);
    auto h_cg = Kokkos::create_mirror_view(cg);
    int local_out = 0, max_mul = 0, m_size = 0;
    std::vector<bool> out_seen(tp.irreps_out.size(), false);
    for (std::size_t q = 0; q < tp.instructions.size(); ++q) {
      const auto& I = tp.instructions[q];
      if (out_seen[I.out]) {
        // The accumulator layout assumes one instruction per output entry, which
        // ChannelwiseTP::mace guarantees; a hand-made descriptor might not.
        throw InputError("ChannelwiseTPKokkos: output entry " + std::to_string(I.out) + " has several instructions");
      }
      out_seen[I.out] = true;
      h_ins(q) = impl::TPInstructionDev{I.mul, 2 * I.l1 + 1, 2 * I.l2 + 1, 2 * I.l3 + 1, I.offset1, I.offset2,
                                        I.offset_out, I.offset_weight, I.cg_begin, I.cg_end, local_out,
                                        local_in_of_entry[I.i1], m_size};
      local_out += 2 * I.l3 + 1;
      m_size += (2 * I.l1 + 1) * (2 * I.l3 + 1);
      max_mul = std::max(max_mul, I.mul);
    }
    for (std::size_t z = 0; z < tp.cg.size(); ++z) {
      h_cg(z) = impl::TPEntryDev<T>{tp.cg[z].i1, tp.cg[z].i2, tp.cg[z].i3, static_cast<T>(tp.cg[z].value)};
    }
    Kokkos::deep_copy(ins, h_ins);
    Kokkos::deep_copy(cg, h_cg);
    m_f.m_ins = ins;
    m_f.m_cg = cg;
    m_f.m_num_ins = static_cast<int>(tp.instructions.size());
    m_f.m_max_mul = max_mul;
    m_f.m_out_per_channel = local_out;
    m_f.m_in_per_channel = in_per_channel;
    m_f.m_dim2 = tp.dim2();
    m_f.m_m_size = m_size;
  }

  const ChannelwiseTP& descriptor() const noexcept { return m_tp; }

  /// out(n, :) = sum over edges into n of TP(x(sender), Y(e), w(e)).
  void compute(const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, ConstMatrix w, Matrix out) const {
    impl::check_shape("ChannelwiseTPKokkos", "compute", "x", x, g.num_nodes, m_tp.dim1());
    impl::check_shape("ChannelwiseTPKokkos", "compute", "Y", Y, g.num_edges, m_tp.dim2());
    impl::check_shape("ChannelwiseTPKokkos", "compute", "w", w, g.num_edges, m_tp.weight_numel);
    impl::check_shape("ChannelwiseTPKokkos", "compute", "out", out, g.num_nodes, m_tp.dim_out());
    auto f = m_f;
    f.m_graph = g;
    f.m_x = x;
    f.m_Y = Y;
    f.m_w = w;
    f.m_out = out;
    Kokkos::TeamPolicy<ExecSpace, typename Functor::TagForward> policy(g.num_nodes, Kokkos::AUTO);
    policy.set_scratch_size(0, Kokkos::PerTeam(f.forward_shmem_bytes()));
    Kokkos::parallel_for("fastmlip::channelwise_tp::forward", policy, f);
  }

  /// Gradients of sum(out * grad_out) with respect to x, Y and w.
  void reverse(const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, ConstMatrix w, ConstMatrix grad_out,
               Matrix grad_x, Matrix grad_Y, Matrix grad_w) const {
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "x", x, g.num_nodes, m_tp.dim1());
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "Y", Y, g.num_edges, m_tp.dim2());
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "w", w, g.num_edges, m_tp.weight_numel);
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "grad_out", grad_out, g.num_nodes, m_tp.dim_out());
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "grad_x", grad_x, g.num_nodes, m_tp.dim1());
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "grad_Y", grad_Y, g.num_edges, m_tp.dim2());
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "grad_w", grad_w, g.num_edges, m_tp.weight_numel);
    auto f = m_f;
    f.m_graph = g;
    f.m_x = x;
    f.m_Y = Y;
    f.m_w = w;
    f.m_grad_out = grad_out;
    f.m_grad_x = grad_x;
    f.m_grad_Y = grad_Y;
    f.m_grad_w = grad_w;
    Kokkos::deep_copy(grad_x, T(0));  // irreps1 entries that no path reads get zero gradient
    Kokkos::parallel_for("fastmlip::channelwise_tp::reverse_sender",
                         Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverseSender>(g.num_nodes, Kokkos::AUTO), f);
    Kokkos::parallel_for("fastmlip::channelwise_tp::reverse_edge",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverseEdge>(0, g.num_edges), f);
  }

 private:
  ChannelwiseTP m_tp;
  Functor m_f;
};

}  // namespace fastmlip::kernels

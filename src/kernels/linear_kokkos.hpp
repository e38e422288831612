// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the equivariant linear map (linear.hpp).
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/linear_gemm.hpp"
#include "kernels/impl/linear_impl.hpp"
#include "kernels/impl/team_scratch.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/linear.hpp"
#include "kernels/node_groups.hpp"
#include "math/dual.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class LinearKokkos {
  static_assert(is_kernel_scalar_v<T>, "LinearKokkos: T must be float, double or a Dual of them");
  using Functor = impl::LinearFunctor<ExecSpace, T>;
  using Group = impl::LinearGroupFunctor<ExecSpace>;
  /// Host spaces compute the weight gradient as GEMMs (impl/linear_gemm.hpp).
  static constexpr bool kHost =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;

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
    for (const auto& q : I) {
      m_f.m_max_mul = std::max({m_f.m_max_mul, q.mul_in, q.mul_out});
    }
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
    launch<typename Functor::TagForward>("fastmlip::linear::forward", f, set, static_cast<int>(x.extent(0)));
  }

  void reverse(ConstMatrix W, Sets set, ConstMatrix x, ConstMatrix grad_out, Matrix grad_x) const {
    check_call("reverse", W, set, x);
    impl::check_shape("LinearKokkos", "reverse", "grad_out", grad_out, x.extent(0), m_lin.irreps_out.dim());
    impl::check_shape("LinearKokkos", "reverse", "grad_x", grad_x, x.extent(0), m_lin.irreps_in.dim());
    auto f = bind(W, set, x);
    f.m_grad_out = grad_out;
    f.m_grad_x = grad_x;
    launch<typename Functor::TagReverse>("fastmlip::linear::reverse", f, set, static_cast<int>(x.extent(0)));
  }

  void reverse_weights(ConstMatrix W, Sets set, ConstMatrix x, ConstMatrix grad_out, Matrix grad_W) const {
    check_call("reverse_weights", W, set, x);
    impl::check_shape("LinearKokkos", "reverse_weights", "grad_out", grad_out, x.extent(0), m_lin.irreps_out.dim());
    impl::check_shape("LinearKokkos", "reverse_weights", "grad_W", grad_W, m_lin.num_sets, m_lin.weight_numel);
    // No sets given: every node is in set 0.
    const Sets labels = set.extent(0) ? set : Sets(m_zero_labels.zeros(x.extent(0)));
    const auto groups =
        NodeGroups<ExecSpace>::build(labels, m_lin.num_sets, "LinearKokkos::reverse_weights", m_groups);
    if constexpr (kHost) {
      impl::LinearWeightsGemmFunctor<ExecSpace, T> g;
      g.m_ins = m_f.m_ins;
      g.m_num_ins = static_cast<int>(m_lin.instructions.size());
      g.m_group_ptr = groups.ptr;
      g.m_group_nodes = groups.nodes;
      g.m_x = x;
      g.m_grad_out = grad_out;
      g.m_grad_W = grad_W;
      Kokkos::deep_copy(grad_W, T(0));  // weights of no instruction stay zero
      Kokkos::parallel_for(
          "fastmlip::linear::reverse_weights_gemm",
          Kokkos::RangePolicy<ExecSpace,
                              typename impl::LinearWeightsGemmFunctor<ExecSpace, T>::TagReverseWeights>(
              0, static_cast<long>(m_lin.num_sets) * g.m_num_ins),
          g);
      return;
    }
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
  /// The forward and reverse stages' tiles (impl::LinearFunctor::tile_bounds): with several
  /// weight sets, the nodes grouped by set on ExecSpace (impl::LinearGroupFunctor), and a league
  /// of ceil(nodes / kTile) + sets teams, an upper bound of the tiles (the extra ones idle).
  template <class Tag>
  void launch(const char* label, Functor& f, const Sets& set, int nodes) const {
    static_assert(Group::kTile == Functor::kTile, "LinearKokkos: the grouping cuts the functor's tiles");
    f.m_num_nodes = nodes;
    int league = (nodes + Functor::kTile - 1) / Functor::kTile;
    if (m_lin.num_sets > 1) {
      const int sets = m_lin.num_sets;
      Group g;
      g.m_set = set;
      g.m_sets = sets;
      // Reused from call to call (impl/grow_buffer.hpp); the offsets and the order are written in
      // full by the launches below, the counts start from zero.
      g.m_count = m_count.zeros(sets);
      g.m_group_ptr = m_group_ptr.vector(sets + 1);
      g.m_tile_ptr = m_tile_ptr.vector(sets + 1);
      g.m_nodes = m_order.vector(nodes);
      using Count = Kokkos::RangePolicy<ExecSpace, typename Group::TagCount>;
      using Offsets = Kokkos::RangePolicy<ExecSpace, typename Group::TagOffsets>;
      using Fill = Kokkos::RangePolicy<ExecSpace, typename Group::TagFill>;
      Kokkos::parallel_for("fastmlip::linear::count_sets", Count(0, nodes), g);
      Kokkos::parallel_for("fastmlip::linear::set_offsets", Offsets(0, 1), g);
      Kokkos::parallel_for("fastmlip::linear::group_by_set", Fill(0, nodes), g);
      f.m_group_ptr = g.m_group_ptr;
      f.m_group_nodes = g.m_nodes;
      f.m_tile_ptr = g.m_tile_ptr;
      league += sets;
    }
    if constexpr (kHost && std::is_floating_point_v<T>) {
      // The host's tiles as GEMMs at the CPU's widest level (impl/linear_gemm.hpp).
      using Gemm = impl::LinearTilesGemmFunctor<ExecSpace, T>;
      constexpr bool kReverse = std::is_same_v<Tag, typename Functor::TagReverse>;
      using GemmTag = std::conditional_t<kReverse, typename Gemm::TagReverse, typename Gemm::TagForward>;
      Gemm g{f, {}};
      if constexpr (kReverse) {
        g.m_Wt = transposed_weights(f.m_W);
      }
      Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace, GemmTag>(0, league), g);
      return;
    }
    Kokkos::TeamPolicy<ExecSpace, Tag> policy(league, Kokkos::AUTO);
    f.m_scratch_level = impl::set_team_scratch(policy, f.tile_shmem_bytes());
    Kokkos::parallel_for(label, policy, f);
  }

  /// Each instruction's block of W ([mul_in][mul_out]) as [mul_out][mul_in], per set: the
  /// reverse GEMM's right-hand side (host only; a few thousand values per set).
  ConstMatrix transposed_weights(const ConstMatrix& W) const {
    Matrix Wt = m_Wt.get(static_cast<int>(W.extent(0)), static_cast<int>(W.extent(1)));
    for (std::size_t s = 0; s < W.extent(0); ++s) {
      for (const auto& I : m_lin.instructions) {
        for (int u = 0; u < I.mul_in; ++u) {
          for (int v = 0; v < I.mul_out; ++v) {
            Wt(s, I.offset_weight + v * I.mul_in + u) = W(s, I.offset_weight + u * I.mul_out + v);
          }
        }
      }
    }
    return Wt;
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
  mutable NodeGroupsStorage<ExecSpace> m_groups;  ///< reverse_weights' nodes by set (shared by copies)
  mutable impl::GrowBuffer<int, ExecSpace> m_zero_labels{"fastmlip::linear::labels"};
  // The grouping of nodes by weight set, per call; one object's calls must not overlap.
  mutable impl::GrowBuffer<int, ExecSpace> m_count{"fastmlip::linear::set_count"},
      m_group_ptr{"fastmlip::linear::set_ptr"}, m_tile_ptr{"fastmlip::linear::tile_ptr"},
      m_order{"fastmlip::linear::order"};
  mutable impl::GrowBuffer<T, ExecSpace> m_Wt{"fastmlip::linear::weights_transposed"};
};

}  // namespace fastmlip::kernels

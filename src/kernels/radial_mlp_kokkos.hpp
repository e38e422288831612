// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the radial MLP (radial_mlp.hpp).
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "math/dual.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/impl/radial_mlp_impl.hpp"
#include "kernels/radial_mlp.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class RadialMLPKokkos {
  static_assert(is_kernel_scalar_v<T>, "RadialMLPKokkos: T must be float, double or a Dual of them");
  using Functor = impl::RadialMLPFunctor<ExecSpace, T>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  explicit RadialMLPKokkos(const RadialMLP& mlp) : RadialMLPKokkos(mlp, nullptr) {}

  /// For T = Dual only: weights w + eps * t with tangents `weight_tangents` (the layout of
  /// mlp.weights), so that a Dual run differentiates forward-mode with respect to the weights
  /// as well as the inputs. The trainer's double backward needs this: the backward of a
  /// weight gradient is a directional derivative in which the weights move too.
  RadialMLPKokkos(const RadialMLP& mlp, const std::vector<std::vector<double>>& weight_tangents)
      : RadialMLPKokkos(mlp, &weight_tangents) {
    static_assert(is_dual_v<T>, "RadialMLPKokkos: weight tangents need a Dual scalar");
  }

 private:
  RadialMLPKokkos(const RadialMLP& mlp, const std::vector<std::vector<double>>* tangents) : m_mlp(mlp) {
    mlp.validate();
    if (tangents != nullptr) {
      bool ok = tangents->size() == mlp.weights.size();
      for (std::size_t l = 0; ok && l < mlp.weights.size(); ++l) {
        ok = (*tangents)[l].size() == mlp.weights[l].size();
      }
      if (!ok) {
        throw InputError("RadialMLPKokkos: the weight tangents do not have the weights' layout");
      }
    }
    int hidden_total = 0;
    for (int l = 1; l + 1 < static_cast<int>(mlp.widths.size()); ++l) {
      hidden_total += mlp.widths[l];
    }
    if (hidden_total > Functor::kMaxHiddenTotal || mlp.width_in() > Functor::kMaxHidden) {
      throw InputError("RadialMLPKokkos: hidden widths sum to " + std::to_string(hidden_total) + " and the input is " +
                       std::to_string(mlp.width_in()) + " wide; this build supports up to " +
                       std::to_string(Functor::kMaxHiddenTotal) + " and " + std::to_string(Functor::kMaxHidden));
    }
    std::vector<T> W;
    std::vector<int> w_off, z_off, layer_of;
    int z = 0;
    for (int l = 0; l < mlp.num_layers(); ++l) {
      w_off.push_back(static_cast<int>(W.size()));
      z_off.push_back(z);
      z += l + 1 < mlp.num_layers() ? mlp.widths[l + 1] : 0;
      const double scale = 1.0 / std::sqrt(static_cast<double>(mlp.widths[l]));
      for (std::size_t i = 0; i < mlp.weights[l].size(); ++i) {
        W.push_back(weight_value(mlp.weights[l][i] * scale, tangents ? (*tangents)[l][i] * scale : 0.0));
        layer_of.push_back(l);
      }
    }
    m_hidden_total = z;
    m_f.m_hidden_total = z;
    m_f.m_W = impl::upload<ExecSpace>(W, "fastmlip::radial_mlp::weights");
    m_f.m_widths = impl::upload<ExecSpace>(mlp.widths, "fastmlip::radial_mlp::widths");
    m_f.m_w_offset = impl::upload<ExecSpace>(w_off, "fastmlip::radial_mlp::weight_offsets");
    m_f.m_z_offset = impl::upload<ExecSpace>(z_off, "fastmlip::radial_mlp::z_offsets");
    m_f.m_grad_layer = impl::upload<ExecSpace>(layer_of, "fastmlip::radial_mlp::weight_layer");
    m_f.m_layers = mlp.num_layers();
    m_f.m_max_width = *std::max_element(mlp.widths.begin(), mlp.widths.end() - 1);
    m_f.m_cst = static_cast<T>(mlp.act_cst);
  }

  static T weight_value(double value, double tangent) {
    if constexpr (is_dual_v<T>) {
      using V = typename T::value_type;
      return T(static_cast<V>(value), static_cast<V>(tangent));
    } else {
      return static_cast<T>(value);
    }
  }

 public:

  void compute(ConstMatrix in, Matrix out) const {
    impl::check_shape("RadialMLPKokkos", "compute", "in", in, in.extent(0), m_mlp.width_in());
    impl::check_shape("RadialMLPKokkos", "compute", "out", out, in.extent(0), m_mlp.width_out());
    auto f = m_f;
    f.m_in = in;
    f.m_out = out;
    const int tiles = static_cast<int>((in.extent(0) + Functor::kTile - 1) / Functor::kTile);
    Kokkos::TeamPolicy<ExecSpace, typename Functor::TagForwardTile> policy(tiles, Kokkos::AUTO);
    policy.set_scratch_size(0, Kokkos::PerTeam(f.tile_shmem_bytes()));
    Kokkos::parallel_for("fastmlip::radial_mlp::forward", policy, f);
  }

  /// grad_in = d sum(out * grad_out) / d in.
  void reverse(ConstMatrix in, ConstMatrix grad_out, Matrix grad_in) const {
    impl::check_shape("RadialMLPKokkos", "reverse", "in", in, in.extent(0), m_mlp.width_in());
    impl::check_shape("RadialMLPKokkos", "reverse", "grad_out", grad_out, in.extent(0), m_mlp.width_out());
    impl::check_shape("RadialMLPKokkos", "reverse", "grad_in", grad_in, in.extent(0), m_mlp.width_in());
    auto f = m_f;
    f.m_in = in;
    f.m_grad_out = grad_out;
    f.m_grad_in = grad_in;
    const int tiles = static_cast<int>((in.extent(0) + Functor::kTile - 1) / Functor::kTile);
    Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverseTile> policy(tiles, Kokkos::AUTO);
    policy.set_scratch_size(0, Kokkos::PerTeam(f.reverse_tile_shmem_bytes()));
    Kokkos::parallel_for("fastmlip::radial_mlp::reverse", policy, f);
  }

  /// Gradient with respect to the (unscaled, e3nn-layout) weights of every layer; for T = Dual
  /// with the tangents (double backward).
  std::vector<std::vector<host_scalar_t<T>>> reverse_weights(ConstMatrix in, ConstMatrix grad_out) const {
    impl::check_shape("RadialMLPKokkos", "reverse_weights", "in", in, in.extent(0), m_mlp.width_in());
    impl::check_shape("RadialMLPKokkos", "reverse_weights", "grad_out", grad_out, in.extent(0), m_mlp.width_out());
    const std::size_t E = in.extent(0);
    auto f = m_f;
    f.m_in = in;
    f.m_grad_out = grad_out;
    f.m_grad_in = Matrix("fastmlip::radial_mlp::grad_in", E, m_mlp.width_in());
    f.m_z = Matrix("fastmlip::radial_mlp::z", E, std::max(1, m_hidden_total));
    f.m_dz = Matrix("fastmlip::radial_mlp::dz", E, std::max(1, m_hidden_total));
    Kokkos::parallel_for("fastmlip::radial_mlp::reverse",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverse>(0, E), f);
    f.m_grad_W = Kokkos::View<T*, ExecSpace>("fastmlip::radial_mlp::grad_W", m_f.m_W.extent(0));
    Kokkos::parallel_for("fastmlip::radial_mlp::reverse_weights",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverseWeights>(0, m_f.m_W.extent(0)), f);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), f.m_grad_W);
    std::vector<std::vector<host_scalar_t<T>>> out;
    std::size_t k = 0;
    for (int l = 0; l < m_mlp.num_layers(); ++l) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(m_mlp.widths[l]));  // W_used = w * scale
      out.emplace_back();
      for (std::size_t i = 0; i < m_mlp.weights[l].size(); ++i) {
        out.back().push_back(static_cast<host_scalar_t<T>>(h(k++)) * scale);
      }
    }
    return out;
  }

 private:
  RadialMLP m_mlp;
  Functor m_f;
  int m_hidden_total = 0;
};

}  // namespace fastmlip::kernels

// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the radial MLP (radial_mlp.hpp).
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "kernels/impl/radial_mlp_gemm.hpp"
#include "kernels/impl/radial_mlp_impl.hpp"
#include "kernels/impl/team_scratch.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/radial_mlp.hpp"
#include "math/dual.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class RadialMLPKokkos {
  static_assert(is_kernel_scalar_v<T>, "RadialMLPKokkos: T must be float, double or a Dual of them");
  using Functor = impl::RadialMLPFunctor<ExecSpace, T>;
  /// Host spaces run the MLP as dense products (impl/radial_mlp_gemm.hpp); device spaces run
  /// the tiled functors (impl/radial_mlp_impl.hpp).
  static constexpr bool kHost =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;
  using Real = std::decay_t<decltype(value_of(T()))>;  ///< float or double, also for T = Dual
  using GemmFunctor = impl::RadialMLPGemmFunctor<ExecSpace, Real>;

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
    if constexpr (kHost) {
      init_gemm(tangents);
    }
  }

  void init_gemm(const std::vector<std::vector<double>>* tangents) {
    if (m_mlp.num_layers() > kMaxGemmLayers) {
      throw InputError("RadialMLPKokkos: " + std::to_string(m_mlp.num_layers()) +
                       " layers; this build supports up to " + std::to_string(kMaxGemmLayers));
    }
    GemmFunctor& g = m_g;
    g.m_layers = m_mlp.num_layers();
    g.m_dual = is_dual_v<T>;
    g.m_cst = static_cast<Real>(m_mlp.act_cst);
    g.m_hidden_total = m_hidden_total;
    g.m_max_width = *std::max_element(m_mlp.widths.begin(), m_mlp.widths.end() - 1);
    std::size_t n = 0;
    for (int l = 0; l <= g.m_layers; ++l) {
      g.m_widths[l] = m_mlp.widths[l];
      g.m_w_off[l] = n;
      n += l < g.m_layers ? m_mlp.weights[l].size() : 0;
    }
    const auto planes = [&](const char* label) {
      return typename GemmFunctor::HostView(std::string(label), std::max<std::size_t>(n, 1));
    };
    g.m_Wv = planes("fastmlip::radial_mlp::gemm_weights");
    g.m_WTv = planes("fastmlip::radial_mlp::gemm_weights_t");
    if (g.m_dual) {
      g.m_Wd = planes("fastmlip::radial_mlp::gemm_weight_tangents");
      g.m_WTd = planes("fastmlip::radial_mlp::gemm_weight_tangents_t");
    }
    for (int l = 0; l < g.m_layers; ++l) {
      const int a = m_mlp.widths[l], b = m_mlp.widths[l + 1];
      const double scale = 1.0 / std::sqrt(static_cast<double>(a));
      for (int i = 0; i < a; ++i) {
        for (int j = 0; j < b; ++j) {
          const std::size_t k = static_cast<std::size_t>(i) * b + j, kt = static_cast<std::size_t>(j) * a + i;
          g.m_Wv(g.m_w_off[l] + k) = g.m_WTv(g.m_w_off[l] + kt) =
              static_cast<Real>(m_mlp.weights[l][k] * scale);
          if (g.m_dual) {
            const double t = tangents ? (*tangents)[l][k] * scale : 0.0;
            g.m_Wd(g.m_w_off[l] + k) = g.m_WTd(g.m_w_off[l] + kt) = static_cast<Real>(t);
          }
        }
      }
    }
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
    if constexpr (kHost) {
      run_gemm(in, ConstMatrix(), out, Matrix(), nullptr);
      return;
    }
    auto f = m_f;
    f.m_in = in;
    f.m_out = out;
    const int tiles = static_cast<int>((in.extent(0) + Functor::kTile - 1) / Functor::kTile);
    Kokkos::TeamPolicy<ExecSpace, typename Functor::TagForwardTile> policy(tiles, Kokkos::AUTO);
    f.m_scratch_level = impl::set_team_scratch(policy, f.tile_shmem_bytes());
    Kokkos::parallel_for("fastmlip::radial_mlp::forward", policy, f);
  }

  /// grad_in = d sum(out * grad_out) / d in.
  void reverse(ConstMatrix in, ConstMatrix grad_out, Matrix grad_in) const {
    impl::check_shape("RadialMLPKokkos", "reverse", "in", in, in.extent(0), m_mlp.width_in());
    impl::check_shape("RadialMLPKokkos", "reverse", "grad_out", grad_out, in.extent(0), m_mlp.width_out());
    impl::check_shape("RadialMLPKokkos", "reverse", "grad_in", grad_in, in.extent(0), m_mlp.width_in());
    if constexpr (kHost) {
      run_gemm(in, grad_out, Matrix(), grad_in, nullptr);
      return;
    }
    auto f = m_f;
    f.m_in = in;
    f.m_grad_out = grad_out;
    f.m_grad_in = grad_in;
    const int tiles = static_cast<int>((in.extent(0) + Functor::kTile - 1) / Functor::kTile);
    Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverseTile> policy(tiles, Kokkos::AUTO);
    f.m_scratch_level = impl::set_team_scratch(policy, f.reverse_tile_shmem_bytes());
    Kokkos::parallel_for("fastmlip::radial_mlp::reverse", policy, f);
  }

  /// Gradient with respect to the (unscaled, e3nn-layout) weights of every layer; for T = Dual
  /// with the tangents (double backward).
  std::vector<std::vector<host_scalar_t<T>>> reverse_weights(ConstMatrix in, ConstMatrix grad_out) const {
    impl::check_shape("RadialMLPKokkos", "reverse_weights", "in", in, in.extent(0), m_mlp.width_in());
    impl::check_shape("RadialMLPKokkos", "reverse_weights", "grad_out", grad_out, in.extent(0), m_mlp.width_out());
    if constexpr (kHost) {
      return reverse_all(in, grad_out,
                         Matrix("fastmlip::radial_mlp::grad_in", in.extent(0), m_mlp.width_in()));
    }
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

  /// reverse and reverse_weights in one pass: grad_in, and the weight gradients returned;
  /// `out`, if given (not a default-constructed view), gets compute's result too. On host
  /// spaces this runs the forward once for all three, which the trainer's backward needs.
  std::vector<std::vector<host_scalar_t<T>>> reverse_all(ConstMatrix in, ConstMatrix grad_out, Matrix grad_in,
                                                         Matrix out = Matrix()) const {
    impl::check_shape("RadialMLPKokkos", "reverse_all", "in", in, in.extent(0), m_mlp.width_in());
    impl::check_shape("RadialMLPKokkos", "reverse_all", "grad_out", grad_out, in.extent(0),
                      m_mlp.width_out());
    impl::check_shape("RadialMLPKokkos", "reverse_all", "grad_in", grad_in, in.extent(0), m_mlp.width_in());
    if (out.data() != nullptr) {
      impl::check_shape("RadialMLPKokkos", "reverse_all", "out", out, in.extent(0), m_mlp.width_out());
    }
    if constexpr (kHost) {
      std::vector<std::vector<host_scalar_t<T>>> gw;
      run_gemm(in, grad_out, out, grad_in, &gw);
      return gw;
    } else {
      if (out.data() != nullptr) {
        compute(in, out);
      }
      reverse(in, grad_out, grad_in);
      return reverse_weights(in, grad_out);
    }
  }

 private:
  static constexpr int kMaxGemmLayers = 16;

  /// One matrix as the gemm functor's planes: the view's own storage where it is a contiguous
  /// real matrix, else a copy split into value and tangent (dual numbers).
  template <class V>
  struct PlaneCopy {
    std::vector<Real> v, d;
    impl::Planes<V> planes;
  };
  template <class View>
  static auto planes_of(const View& m, bool read) {
    using V = std::conditional_t<std::is_const_v<typename View::value_type>, const Real, Real>;
    PlaneCopy<V> c;
    const int cols = static_cast<int>(m.extent(1));
    if constexpr (!is_dual_v<T>) {
      if (m.span_is_contiguous() || m.extent(0) <= 1) {
        c.planes = {m.data(), nullptr, cols};
        return c;
      }
    }
    const std::size_t n = m.extent(0) * m.extent(1);
    c.v.assign(n, Real(0));
    if constexpr (is_dual_v<T>) {
      c.d.assign(n, Real(0));
    }
    if (read) {
      for (std::size_t r = 0; r < m.extent(0); ++r) {
        for (std::size_t j = 0; j < m.extent(1); ++j) {
          if constexpr (is_dual_v<T>) {
            c.v[r * cols + j] = m(r, j).v;
            c.d[r * cols + j] = m(r, j).d;
          } else {
            c.v[r * cols + j] = m(r, j);
          }
        }
      }
    }
    // A read matrix whose tangents are all zero (the trainer's grad_out) drops its tangent
    // plane, which saves the functor the products with it.
    const bool tangent =
        !c.d.empty() && (!read || std::any_of(c.d.begin(), c.d.end(), [](Real t) { return t != 0; }));
    c.planes = {c.v.data(), tangent ? c.d.data() : nullptr, cols};
    return c;
  }
  /// Writes a PlaneCopy that holds its own storage back into the view.
  static void write_back(const PlaneCopy<Real>& c, const Matrix& m) {
    if (c.v.empty()) {
      return;
    }
    const std::size_t cols = m.extent(1);
    for (std::size_t r = 0; r < m.extent(0); ++r) {
      for (std::size_t j = 0; j < cols; ++j) {
        if constexpr (is_dual_v<T>) {
          m(r, j) = T(c.v[r * cols + j], c.d[r * cols + j]);
        } else {
          m(r, j) = c.v[r * cols + j];
        }
      }
    }
  }

  /// The host path: forward only (no grad_out) or forward and backward; out and grad_in are
  /// written where given, weight gradients (unscaled layout) where gw is not null.
  void run_gemm(ConstMatrix in, ConstMatrix grad_out, Matrix out, Matrix grad_in,
                std::vector<std::vector<host_scalar_t<T>>>* gw) const {
    GemmFunctor f = m_g;
    f.m_edges = static_cast<int>(in.extent(0));
    const int chunks = f.num_chunks();
    const auto pin = planes_of(in, true);
    f.m_in = pin.planes;
    PlaneCopy<const Real> pg;
    PlaneCopy<Real> pout, pgin;
    if (out.data() != nullptr) {
      pout = planes_of(out, false);
      f.m_out = pout.planes;
    }
    std::vector<Real> slots;
    if (grad_out.data() != nullptr) {
      pg = planes_of(grad_out, true);
      f.m_grad_out = pg.planes;
      pgin = planes_of(grad_in, false);
      f.m_grad_in = pgin.planes;
      if (gw != nullptr) {
        slots.assign(static_cast<std::size_t>(chunks) * f.planes() * f.num_weights(), Real(0));
        f.m_grad_w = slots.data();
      }
    }
    if (chunks > 0) {
      const std::size_t bytes = sizeof(Real) * f.scratch_values();
      if (grad_out.data() != nullptr) {
        Kokkos::TeamPolicy<ExecSpace, typename GemmFunctor::TagReverse> policy(chunks, 1);
        policy.set_scratch_size(1, Kokkos::PerTeam(bytes));
        Kokkos::parallel_for("fastmlip::radial_mlp::gemm_reverse", policy, f);
      } else {
        Kokkos::TeamPolicy<ExecSpace, typename GemmFunctor::TagForward> policy(chunks, 1);
        policy.set_scratch_size(1, Kokkos::PerTeam(bytes));
        Kokkos::parallel_for("fastmlip::radial_mlp::gemm_forward", policy, f);
      }
      ExecSpace().fence();
    }
    if (out.data() != nullptr) {
      write_back(pout, out);
    }
    if (grad_out.data() != nullptr) {
      write_back(pgin, grad_in);
    }
    if (gw == nullptr) {
      return;
    }
    // The chunks' slots summed in chunk order (the same sum for any thread count), then scaled
    // to the unscaled weights (W_used = w * scale).
    const std::size_t nw = f.num_weights(), stride = f.planes() * nw;
    gw->clear();
    for (int l = 0; l < m_mlp.num_layers(); ++l) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(m_mlp.widths[l]));
      auto& layer = gw->emplace_back(m_mlp.weights[l].size());
      for (std::size_t i = 0; i < layer.size(); ++i) {
        const std::size_t k = f.m_w_off[l] + i;
        double v = 0, d = 0;
        for (int c = 0; c < chunks; ++c) {
          v += slots[c * stride + k];
          if constexpr (is_dual_v<T>) {
            d += slots[c * stride + nw + k];
          }
        }
        if constexpr (is_dual_v<T>) {
          layer[i] = host_scalar_t<T>(v * scale, d * scale);
        } else {
          layer[i] = v * scale;
        }
      }
    }
  }

  RadialMLP m_mlp;
  Functor m_f;
  GemmFunctor m_g;
  int m_hidden_total = 0;
};

}  // namespace fastmlip::kernels

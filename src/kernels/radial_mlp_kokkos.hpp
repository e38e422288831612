// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the radial MLP (radial_mlp.hpp).
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "kernels/backend.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/radial_mlp_gemm.hpp"
#include "kernels/impl/radial_mlp_impl.hpp"
#include "kernels/impl/radial_mlp_layers.hpp"
#include "kernels/impl/team_scratch.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/radial_mlp.hpp"
#include "math/dual.hpp"
#if defined(FASTMLIP_HAVE_CUBLAS)
#include "kernels/cuda/cublas_gemm.hpp"
#endif

namespace fastmlip::kernels {

namespace impl {
/// Whether this build can run the radial MLP's Backend::cuda (cuBLAS) on ExecSpace in precision T.
template <class ExecSpace, class T>
inline constexpr bool kCublasBackend =
#if defined(FASTMLIP_HAVE_CUBLAS)
    kCudaBackend<ExecSpace, T>;
#else
    false;
#endif
}  // namespace impl

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
  using Scale = impl::RadialMLPScaleFunctor<ExecSpace, T>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Vector = Kokkos::View<T*, ExecSpace>;
  using ConstVector = Kokkos::View<const T*, ExecSpace>;

  explicit RadialMLPKokkos(const RadialMLP& mlp) : RadialMLPKokkos(mlp, nullptr) {}

  /// `backend` (kernels/backend.hpp) for compute() and reverse(): Backend::cuda runs each layer
  /// as a cuBLAS GEMM with the activations between them (impl/radial_mlp_layers.hpp), in float
  /// or double on a Kokkos::Cuda execution space in a build that found cuBLAS; elsewhere it is
  /// refused (UnsupportedError). Backend::kokkos and, until a GPU run has compared the two on a
  /// GPU, Backend::automatic run the Kokkos functors. The weight gradients (the trainer) always
  /// run the functors.
  RadialMLPKokkos(const RadialMLP& mlp, Backend backend) : RadialMLPKokkos(mlp, nullptr) {
    if (backend != Backend::cuda) {
      return;
    }
    if constexpr (impl::kCublasBackend<ExecSpace, T>) {
#if defined(FASTMLIP_HAVE_CUBLAS)
      m_layers = std::make_shared<const Layers>(mlp.widths, static_cast<T>(mlp.act_cst),
                                                cuda::CublasGemm<T>(ExecSpace().cuda_stream()));
#endif
    } else {
#if defined(FASTMLIP_HAVE_CUDA) && !defined(FASTMLIP_HAVE_CUBLAS)
      const char* build = " This build found no cuBLAS beside the CUDA toolkit.";
#elif !defined(FASTMLIP_HAVE_CUDA)
      const char* build = " This build has no CUDA: configure it with -DFASTMLIP_ENABLE_CUDA=ON.";
#else
      const char* build = "";
#endif
      throw UnsupportedError(
          std::string("RadialMLPKokkos: the 'cuda' backend runs the radial MLP's layers as cuBLAS "
                      "GEMMs, in float or double, on a Kokkos::Cuda execution space; this one "
                      "runs on ") +
          ExecSpace::name() + "." + build + " Use the 'kokkos' backend.");
    }
  }

  /// Which implementation runs compute() and reverse().
  Backend backend() const noexcept { return m_layers ? Backend::cuda : Backend::kokkos; }

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
    m_W_store = Vector("fastmlip::radial_mlp::weights", W.size());
    {
      const auto h = Kokkos::create_mirror_view(m_W_store);
      std::copy(W.begin(), W.end(), h.data());
      Kokkos::deep_copy(m_W_store, h);
    }
    m_f.m_W = m_W_store;
    std::vector<double> scale;
    for (int l = 0; l < mlp.num_layers(); ++l) {
      scale.push_back(1.0 / std::sqrt(static_cast<double>(mlp.widths[l])));
    }
    m_scale.m_layer_scale = impl::upload<ExecSpace>(scale, "fastmlip::radial_mlp::layer_scale");
    m_f.m_widths = impl::upload<ExecSpace>(mlp.widths, "fastmlip::radial_mlp::widths");
    m_f.m_w_offset = impl::upload<ExecSpace>(w_off, "fastmlip::radial_mlp::weight_offsets");
    m_f.m_z_offset = impl::upload<ExecSpace>(z_off, "fastmlip::radial_mlp::z_offsets");
    m_f.m_grad_layer = impl::upload<ExecSpace>(layer_of, "fastmlip::radial_mlp::weight_layer");
    m_scale.m_layer = m_f.m_grad_layer;
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
    alloc_planes();
    for (int l = 0; l < g.m_layers; ++l) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(m_mlp.widths[l]));
      for (std::size_t k = 0; k < m_mlp.weights[l].size(); ++k) {
        set_plane_weight(l, k, static_cast<Real>(m_mlp.weights[l][k] * scale),
                         static_cast<Real>(tangents ? (*tangents)[l][k] * scale : 0.0));
      }
    }
  }

  /// The gemm functor's weight planes (values, transposes; tangents for T = Dual), new storage.
  void alloc_planes() {
    GemmFunctor& g = m_g;
    const std::size_t n = g.m_w_off[g.m_layers];
    const auto planes = [&](const char* label) {
      return typename GemmFunctor::HostView(std::string(label), std::max<std::size_t>(n, 1));
    };
    g.m_Wv = planes("fastmlip::radial_mlp::gemm_weights");
    g.m_WTv = planes("fastmlip::radial_mlp::gemm_weights_t");
    if (g.m_dual) {
      g.m_Wd = planes("fastmlip::radial_mlp::gemm_weight_tangents");
      g.m_WTd = planes("fastmlip::radial_mlp::gemm_weight_tangents_t");
    }
  }

  /// Weight k of layer l (row-major [n_l, n_l+1], scaled) into the planes and their transposes.
  void set_plane_weight(int l, std::size_t k, Real value, Real tangent) {
    GemmFunctor& g = m_g;
    const int a = m_mlp.widths[l], b = m_mlp.widths[l + 1];
    const std::size_t i = k / b, j = k % b, kt = j * a + i;
    g.m_Wv(g.m_w_off[l] + k) = g.m_WTv(g.m_w_off[l] + kt) = value;
    if (g.m_dual) {
      g.m_Wd(g.m_w_off[l] + k) = g.m_WTd(g.m_w_off[l] + kt) = tangent;
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
#if defined(FASTMLIP_HAVE_CUBLAS)
    if constexpr (impl::kCublasBackend<ExecSpace, T>) {
      if (m_layers) {
        m_layers->compute(m_W_store, in, out);
        return;
      }
    }
#endif
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
#if defined(FASTMLIP_HAVE_CUBLAS)
    if constexpr (impl::kCublasBackend<ExecSpace, T>) {
      if (m_layers) {
        m_layers->reverse(m_W_store, in, grad_out, grad_in);
        return;
      }
    }
#endif
    auto f = m_f;
    f.m_in = in;
    f.m_grad_out = grad_out;
    f.m_grad_in = grad_in;
    const int tiles = static_cast<int>((in.extent(0) + Functor::kTile - 1) / Functor::kTile);
    Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverseTile> policy(tiles, Kokkos::AUTO);
    f.m_scratch_level = impl::set_team_scratch(policy, f.reverse_tile_shmem_bytes());
    Kokkos::parallel_for("fastmlip::radial_mlp::reverse", policy, f);
  }

  /// Number of weights, every layer's n_l x n_l+1.
  std::size_t num_weights() const noexcept { return m_W_store.extent(0); }

  /// Sets the weights from one flat array in ExecSpace's memory: every layer's [n_l, n_l+1]
  /// in turn, unscaled (RadialMLP::weights' layout); for T = Dual, with their tangents. Scaled
  /// there: no copy to the host, for weights that change every step (the trainer). The storage
  /// is reused while no copy of this kernel shares it (a copy keeps the weights it had).
  /// Asynchronous on a device: w must stay unchanged until the scaling ran.
  void set_weights(ConstVector w) {
    if (w.extent(0) != num_weights()) {
      throw InputError("RadialMLPKokkos::set_weights: " + std::to_string(w.extent(0)) +
                       " weights; the layers " + widths_str() + " have " + std::to_string(num_weights()));
    }
    // Two references, the store and m_f's view of it, mean no copy of this kernel shares it.
    if (m_W_store.use_count() != 2) {
      m_f.m_W = {};
      m_W_store = Vector(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::radial_mlp::weights"),
                         num_weights());
    }
    Scale f = m_scale;
    f.m_w = w;
    f.m_W = m_W_store;
    Kokkos::parallel_for(
        "fastmlip::radial_mlp::set_weights",
        Kokkos::RangePolicy<ExecSpace, typename Scale::TagSetWeights>(0, static_cast<int>(num_weights())), f);
    m_f.m_W = m_W_store;
    if constexpr (kHost) {
      ExecSpace().fence();
      if (m_g.m_Wv.use_count() != 1) {
        alloc_planes();
      }
      for (int l = 0; l < m_mlp.num_layers(); ++l) {
        const std::size_t first = m_g.m_w_off[l], n = m_g.m_w_off[l + 1] - first;
        for (std::size_t k = 0; k < n; ++k) {
          set_plane_weight(l, k, value_of(m_W_store(first + k)), tangent_of(m_W_store(first + k)));
        }
      }
    }
  }

  /// Gradient with respect to the (unscaled, e3nn-layout) weights of every layer, as one flat
  /// array (set_weights' layout) written into grad_w on ExecSpace, with no copy to the host; for
  /// T = Dual with the tangents (double backward). Working storage is reused from call to call.
  void reverse_weights(ConstMatrix in, ConstMatrix grad_out, Vector grad_w) const {
    impl::check_shape("RadialMLPKokkos", "reverse_weights", "in", in, in.extent(0), m_mlp.width_in());
    impl::check_shape("RadialMLPKokkos", "reverse_weights", "grad_out", grad_out, in.extent(0), m_mlp.width_out());
    if constexpr (kHost) {
      reverse_all(in, grad_out, m_scratch_grad_in.get(static_cast<int>(in.extent(0)), m_mlp.width_in()),
                  Matrix(), grad_w);
    } else {
      check_gradient_length("reverse_weights", grad_w);
      weights_pass(in, grad_out, grad_w);
    }
  }

  /// As above, copied to the host: one vector per layer.
  std::vector<std::vector<host_scalar_t<T>>> reverse_weights(ConstMatrix in, ConstMatrix grad_out) const {
    Vector flat(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::radial_mlp::grad_w"),
                num_weights());
    reverse_weights(in, grad_out, flat);
    return per_layer(flat);
  }

  /// reverse and reverse_weights in one pass: grad_in, and the weight gradients into grad_w
  /// (set_weights' layout, on ExecSpace); `out`, if given (not a default-constructed view), gets
  /// compute's result too. On host spaces this runs the forward once for all three, which the
  /// trainer's backward needs.
  void reverse_all(ConstMatrix in, ConstMatrix grad_out, Matrix grad_in, Matrix out, Vector grad_w) const {
    impl::check_shape("RadialMLPKokkos", "reverse_all", "in", in, in.extent(0), m_mlp.width_in());
    impl::check_shape("RadialMLPKokkos", "reverse_all", "grad_out", grad_out, in.extent(0),
                      m_mlp.width_out());
    impl::check_shape("RadialMLPKokkos", "reverse_all", "grad_in", grad_in, in.extent(0), m_mlp.width_in());
    if (out.data() != nullptr) {
      impl::check_shape("RadialMLPKokkos", "reverse_all", "out", out, in.extent(0), m_mlp.width_out());
    }
    check_gradient_length("reverse_all", grad_w);
    if constexpr (kHost) {
      std::vector<std::vector<host_scalar_t<T>>> gw;
      run_gemm(in, grad_out, out, grad_in, &gw);
      std::size_t k = 0;
      for (const auto& layer : gw) {
        for (const auto& v : layer) {
          if constexpr (is_dual_v<T>) {
            using V = typename T::value_type;
            grad_w(k++) = T(static_cast<V>(v.v), static_cast<V>(v.d));
          } else {
            grad_w(k++) = static_cast<T>(v);
          }
        }
      }
    } else {
      if (out.data() != nullptr) {
        compute(in, out);
      }
      reverse(in, grad_out, grad_in);
      weights_pass(in, grad_out, grad_w);
    }
  }

  /// As above, the weight gradients returned to the host, one vector per layer.
  std::vector<std::vector<host_scalar_t<T>>> reverse_all(ConstMatrix in, ConstMatrix grad_out, Matrix grad_in,
                                                         Matrix out = Matrix()) const {
    Vector flat(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::radial_mlp::grad_w"),
                num_weights());
    reverse_all(in, grad_out, grad_in, out, flat);
    return per_layer(flat);
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

  /// The device path's weight gradient: per edge, the pre-activations and their gradients
  /// (TagReverse, into working storage; the input gradient it also writes is not kept), then one
  /// thread per weight sums over the edges, then the scale comes off.
  void weights_pass(ConstMatrix in, ConstMatrix grad_out, Vector grad_w) const {
    const int E = static_cast<int>(in.extent(0)), H = std::max(1, m_hidden_total);
    auto f = m_f;
    f.m_in = in;
    f.m_grad_out = grad_out;
    f.m_grad_in = m_scratch_grad_in.get(E, m_mlp.width_in());
    f.m_z = m_scratch_z.get(E, H);
    f.m_dz = m_scratch_dz.get(E, H);
    Kokkos::parallel_for("fastmlip::radial_mlp::reverse",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverse>(0, E), f);
    f.m_grad_W = grad_w;
    const int n = static_cast<int>(num_weights());
    Kokkos::parallel_for("fastmlip::radial_mlp::reverse_weights",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverseWeights>(0, n), f);
    Scale u = m_scale;
    u.m_grad = grad_w;
    Kokkos::parallel_for("fastmlip::radial_mlp::unscale_gradient",
                         Kokkos::RangePolicy<ExecSpace, typename Scale::TagUnscaleGradient>(0, n), u);
  }

  void check_gradient_length(const char* fn, const Vector& grad_w) const {
    if (grad_w.extent(0) != num_weights()) {
      throw InputError(std::string("RadialMLPKokkos::") + fn + ": grad_w holds " +
                       std::to_string(grad_w.extent(0)) + " values; the layers " + widths_str() + " have " +
                       std::to_string(num_weights()) + " weights");
    }
  }

  /// A flat weight array, copied to the host and cut into layers.
  std::vector<std::vector<host_scalar_t<T>>> per_layer(const Vector& flat) const {
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), flat);
    std::vector<std::vector<host_scalar_t<T>>> out;
    std::size_t k = 0;
    for (int l = 0; l < m_mlp.num_layers(); ++l) {
      auto& layer = out.emplace_back();
      for (std::size_t i = 0; i < m_mlp.weights[l].size(); ++i, ++k) {
        if constexpr (is_dual_v<T>) {
          layer.emplace_back(static_cast<double>(h(k).v), static_cast<double>(h(k).d));
        } else {
          layer.push_back(static_cast<double>(h(k)));
        }
      }
    }
    return out;
  }

  std::string widths_str() const {
    std::string s;
    for (int w : m_mlp.widths) {
      s += (s.empty() ? "" : "-") + std::to_string(w);
    }
    return s;
  }

  RadialMLP m_mlp;
#if defined(FASTMLIP_HAVE_CUBLAS)
  using Layers = std::conditional_t<impl::kCublasBackend<ExecSpace, T>,
                                    impl::RadialMLPLayers<ExecSpace, T, cuda::CublasGemm<T>>, void>;
#else
  using Layers = void;
#endif
  std::shared_ptr<const Layers> m_layers;  ///< Backend::cuda's layers, shared by copies
  Functor m_f;
  GemmFunctor m_g;
  Scale m_scale;
  Vector m_W_store;  ///< the scaled weights m_f reads
  // Working storage of the device path's reverse_all, reused from call to call.
  mutable impl::GrowBuffer<T, ExecSpace> m_scratch_grad_in{"fastmlip::radial_mlp::grad_in"},
      m_scratch_z{"fastmlip::radial_mlp::z"}, m_scratch_dz{"fastmlip::radial_mlp::dz"};
  int m_hidden_total = 0;
};

}  // namespace fastmlip::kernels

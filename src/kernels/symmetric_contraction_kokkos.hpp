// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the symmetric contraction (symmetric_contraction.hpp).
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "kernels/backend.hpp"
#include "kernels/impl/symmetric_contraction_impl.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/node_groups.hpp"
#include "kernels/symmetric_contraction.hpp"
#include "kernels/symmetric_contraction_simd.hpp"
#include "math/dual.hpp"
#if defined(FASTMLIP_HAVE_CUDA)
#include "kernels/cuda/symmetric_contraction_cuda.hpp"
#endif

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class SymmetricContractionKokkos {
  static_assert(is_kernel_scalar_v<T>, "SymmetricContractionKokkos: T must be float, double or a Dual of them");
  using Functor = impl::SymmetricContractionFunctor<ExecSpace, T>;
  using Limits = impl::SymmetricContractionLimits;
  /// Host spaces run compute() and reverse() in the row kernels (symmetric_contraction_simd.hpp)
  /// for float and double.
  static constexpr bool kHostSimd =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible &&
      std::is_floating_point_v<T>;
  using Rows = impl::SymmetricContractionRowsFunctor<ExecSpace, T>;
  using Fold = impl::SymmetricContractionFoldFunctor<ExecSpace, T>;
  using Coef = Kokkos::View<T***, Kokkos::LayoutRight, ExecSpace>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Species = Kokkos::View<const int*, ExecSpace>;
  using Vector = Kokkos::View<T*, ExecSpace>;
  using ConstVector = Kokkos::View<const T*, ExecSpace>;
  using Nested = std::vector<std::vector<std::vector<double>>>;

  /// `backend` (kernels/backend.hpp): Backend::cuda runs compute() and reverse() through the
  /// hand-written CUDA kernels (UnsupportedError where this build or execution space has none;
  /// InputError where the descriptor exceeds their limits); reverse_weights() stays on Kokkos.
  /// Backend::automatic (the default) picks them where they can run.
  explicit SymmetricContractionKokkos(const SymmetricContraction& sc, Backend backend = Backend::automatic) : m_sc(sc) {
    int out_per_channel = 0;
    for (const auto& e : sc.irreps_out) {
      out_per_channel += e.ir.dim();
    }
    if (static_cast<int>(sc.monomials.size()) > Limits::kMaxMonomials || sc.num_ell > Limits::kMaxEll ||
        out_per_channel > Limits::kMaxOutPerChannel) {
      throw InputError("SymmetricContractionKokkos: " + sc.irreps_in.str() + " at correlation " +
                       std::to_string(sc.correlation) + " needs " + std::to_string(sc.monomials.size()) +
                       " monomials per channel; this build supports up to " + std::to_string(Limits::kMaxMonomials));
    }
    Kokkos::View<impl::SCMonomialDev*, ExecSpace> mono("fastmlip::symmetric_contraction::monomials", sc.monomials.size());
    Kokkos::View<impl::SCEntryDev*, ExecSpace> entries("fastmlip::symmetric_contraction::entries", sc.entries.size());
    Kokkos::View<int*, ExecSpace> ell_off("fastmlip::symmetric_contraction::ell_offset", sc.num_ell),
        ell_stride("fastmlip::symmetric_contraction::ell_stride", sc.num_ell);
    auto h_mono = Kokkos::create_mirror_view(mono);
    auto h_entries = Kokkos::create_mirror_view(entries);
    auto h_off = Kokkos::create_mirror_view(ell_off);
    auto h_stride = Kokkos::create_mirror_view(ell_stride);
    for (std::size_t t = 0; t < sc.monomials.size(); ++t) {
      h_mono(t) = {sc.monomials[t].parent, sc.monomials[t].last};
    }
    std::vector<int> local_base(sc.irreps_out.size(), 0);
    for (std::size_t o = 1; o < sc.irreps_out.size(); ++o) {
      local_base[o] = local_base[o - 1] + sc.irreps_out[o - 1].ir.dim();
    }
    for (std::size_t g = 0; g < sc.entries.size(); ++g) {
      const auto& en = sc.entries[g];
      const int M = sc.irreps_out[en.contraction].ir.dim();
      h_entries(g) = {sc.out_offset(en.contraction) + en.m, M, local_base[en.contraction] + en.m, en.monomial};
    }
    for (int i = 0; i < sc.num_ell; ++i) {
      h_off(i) = sc.ell_offset[i];
      h_stride(i) = sc.ell_stride[i];
    }
    Kokkos::deep_copy(mono, h_mono);
    Kokkos::deep_copy(entries, h_entries);
    Kokkos::deep_copy(ell_off, h_off);
    Kokkos::deep_copy(ell_stride, h_stride);
    m_f.m_mono = mono;
    m_f.m_entries = entries;
    m_f.m_ell_offset = ell_off;
    m_f.m_ell_stride = ell_stride;
    m_f.m_channels = sc.channels;
    m_f.m_num_mono = static_cast<int>(sc.monomials.size());
    m_f.m_num_entries = static_cast<int>(sc.entries.size());
    m_f.m_num_ell = sc.num_ell;
    m_f.m_out_per_channel = out_per_channel;
    build_fold_tables();
    if (impl::resolve<ExecSpace, T>(backend) == Backend::cuda) {
      if constexpr (impl::kCudaBackend<ExecSpace, T>) {
#if defined(FASTMLIP_HAVE_CUDA)
        try {
          m_cuda = std::make_shared<CudaSC>(sc);
        } catch (const InputError&) {
          // Beyond the CUDA kernels' limits: an error when asked for by name, the Kokkos
          // path when chosen automatically.
          if (backend == Backend::cuda) {
            throw;
          }
        }
#endif
      } else {
        throw impl::no_cuda_backend("SymmetricContractionKokkos", ExecSpace::name());
      }
    }
  }

  Backend backend() const noexcept { return m_cuda ? Backend::cuda : Backend::kokkos; }

  /// Sets the element weights (mace-torch layout, see SymmetricContraction::fold): uploaded as
  /// the flat array and folded on ExecSpace, as set_weights(ConstVector) does.
  void set_weights(const Nested& W, int num_elements) {
    fold(upload_weights(m_sc.flatten_weights(W, num_elements), nullptr), num_elements);
#if defined(FASTMLIP_HAVE_CUDA)
    if constexpr (impl::kCudaBackend<ExecSpace, T>) {
      if (m_cuda) {
        // The CUDA kernels' own host fold, as the GPU runs of the MD model checked it; the
        // device fold's reordering (set_coefficients) serves the trainer's flat weights.
        m_cuda->set_weights(W, num_elements);
      }
    }
#endif
  }

  /// For T = Dual only: weights W + eps * W_tangent (same layout), so that a Dual run also
  /// differentiates forward-mode with respect to the weights (the trainer's double backward).
  /// The fold is linear, so the coefficients' tangents are the folded tangents.
  void set_weights(const Nested& W, const Nested& W_tangent, int num_elements) {
    static_assert(is_dual_v<T>, "SymmetricContractionKokkos: weight tangents need a Dual scalar");
    const auto tangent = m_sc.flatten_weights(W_tangent, num_elements);
    fold(upload_weights(m_sc.flatten_weights(W, num_elements), &tangent), num_elements);
  }

  /// Sets the element weights from the flat array in ExecSpace's memory
  /// (SymmetricContraction::weight_offset; for T = Dual, the weights with their tangents) and
  /// folds them there: no copy to the host, for weights that change every step (the trainer).
  /// The coefficients' storage is reused while the shape holds and no copy of this kernel
  /// shares it (a copy keeps the Kokkos path's coefficients it had; the CUDA backend's state is
  /// shared by copies). Asynchronous on a device: W must stay unchanged until the fold ran.
  void set_weights(ConstVector W, int num_elements) {
    fold(W, num_elements);
#if defined(FASTMLIP_HAVE_CUDA)
    if constexpr (impl::kCudaBackend<ExecSpace, T>) {
      if (m_cuda) {
        m_cuda->set_coefficients(m_coef_store.data(), static_cast<int>(m_coef_store.extent(2)), num_elements,
                                 ExecSpace().cuda_stream());
      }
    }
#endif
  }

 private:
  /// The coefficients m_f reads, folded on ExecSpace from the flat weights W.
  void fold(ConstVector W, int num_elements) {
    if (num_elements < 1 || W.extent(0) != m_sc.num_weights(num_elements)) {
      throw InputError("SymmetricContractionKokkos::set_weights: " + std::to_string(W.extent(0)) +
                       " weights for " + std::to_string(num_elements) + " elements; expected " +
                       (num_elements < 1
                            ? std::string("at least one element")
                            : std::to_string(m_sc.num_weights(num_elements)) +
                                  " (elements x channels x the sum of K over contractions and orders)"));
    }
    // Channels padded with zeros to whole blocks: the kernels read a block's coefficients
    // without a bounds test.
    constexpr int B = Limits::kCoefChannelPad;
    static_assert(B % Functor::kChannelBlock == 0, "the functors' blocks must divide the padding");
    const int G = static_cast<int>(m_sc.entries.size()), padded = (m_sc.channels + B - 1) / B * B;
    // Two references, the store and m_f's view of it, mean no copy of this kernel shares it.
    const bool reuse =
        m_coef_store.use_count() == 2 && static_cast<int>(m_coef_store.extent(0)) == num_elements &&
        static_cast<int>(m_coef_store.extent(1)) == G && static_cast<int>(m_coef_store.extent(2)) == padded;
    if (!reuse) {
      m_f.m_coef = {};
      m_coef_store =
          Coef(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::symmetric_contraction::coef"),
               num_elements, G, padded);
    }
    Fold f = m_fold;
    f.m_num_elements = num_elements;
    f.m_w = W;
    f.m_coef = m_coef_store;
    Kokkos::parallel_for(
        "fastmlip::symmetric_contraction::fold",
        Kokkos::RangePolicy<ExecSpace, typename Fold::TagFold, Kokkos::IndexType<std::int64_t>>(
            0, static_cast<std::int64_t>(num_elements) * G * padded),
        f);
    m_f.m_coef = m_coef_store;
    m_num_elements = num_elements;
  }

  /// Host weights (and tangents, for T = Dual) as a flat array on ExecSpace.
  static ConstVector upload_weights(const std::vector<double>& w, const std::vector<double>* tangent) {
    std::vector<T> v(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      if constexpr (is_dual_v<T>) {
        using V = typename T::value_type;
        v[i] = T(static_cast<V>(w[i]), tangent ? static_cast<V>((*tangent)[i]) : V(0));
      } else {
        v[i] = static_cast<T>(w[i]);
      }
    }
    return impl::upload<ExecSpace>(v, "fastmlip::symmetric_contraction::weights");
  }

  /// The fold's tables (impl::SymmetricContractionFoldFunctor) from the descriptor.
  void build_fold_tables() {
    const int corr = m_sc.correlation, G = static_cast<int>(m_sc.entries.size());
    const int blocks = static_cast<int>(m_sc.num_params.size()) * corr;
    std::vector<int> k_start(blocks + 1, 0), ptr(blocks + 1, 0), entry_block(G), entry_usym(G), members(G);
    for (int b = 0; b < blocks; ++b) {
      k_start[b + 1] = k_start[b] + m_sc.num_params[b / corr][b % corr];
    }
    for (int g = 0; g < G; ++g) {
      const SCEntry& en = m_sc.entries[g];
      entry_block[g] = en.contraction * corr + en.nu - 1;
      entry_usym[g] = en.usym_offset;
      ++ptr[entry_block[g] + 1];
    }
    for (int b = 0; b < blocks; ++b) {
      ptr[b + 1] += ptr[b];
    }
    std::vector<int> fill(ptr.begin(), ptr.end() - 1);
    for (int g = 0; g < G; ++g) {  // ascending within a block: unfold_gradient's order
      members[fill[entry_block[g]]++] = g;
    }
    m_fold.m_usym = impl::upload<ExecSpace>(m_sc.usym, "fastmlip::symmetric_contraction::usym");
    m_fold.m_entry_block =
        impl::upload<ExecSpace>(entry_block, "fastmlip::symmetric_contraction::entry_block");
    m_fold.m_entry_usym = impl::upload<ExecSpace>(entry_usym, "fastmlip::symmetric_contraction::entry_usym");
    m_fold.m_block_k_start =
        impl::upload<ExecSpace>(k_start, "fastmlip::symmetric_contraction::block_k_start");
    m_fold.m_block_entry_ptr =
        impl::upload<ExecSpace>(ptr, "fastmlip::symmetric_contraction::block_entry_ptr");
    m_fold.m_block_entries =
        impl::upload<ExecSpace>(members, "fastmlip::symmetric_contraction::block_entries");
    m_fold.m_num_blocks = blocks;
    m_fold.m_num_entries = G;
    m_fold.m_channels = m_sc.channels;
  }

 public:

  int num_elements() const noexcept { return m_num_elements; }

  void compute(Species species, ConstMatrix x, Matrix out) const {
    check_call("compute", species, x);
    impl::check_shape("SymmetricContractionKokkos", "compute", "out", out, x.extent(0), m_sc.dim_out());
#if defined(FASTMLIP_HAVE_CUDA)
    if constexpr (impl::kCudaBackend<ExecSpace, T>) {
      if (m_cuda && impl::dense(species) && impl::dense(x) && impl::dense(out)) {
        m_cuda->compute(species.data(), x.extent(0), x.data(), out.data(), ExecSpace().cuda_stream());
        return;
      }
    }
#endif
    auto f = m_f;
    f.m_species = species;
    f.m_x = x;
    f.m_out = out;
    Kokkos::deep_copy(out, T(0));
    if constexpr (kHostSimd) {
      launch_rows<typename Rows::TagForward>("fastmlip::symmetric_contraction::forward_rows", f);
      return;
    }
    Kokkos::parallel_for("fastmlip::symmetric_contraction::forward",
                         Kokkos::TeamPolicy<ExecSpace, typename Functor::TagForward>(x.extent(0), Kokkos::AUTO), f);
  }

  /// grad_x = d sum(out * grad_out) / dx.
  void reverse(Species species, ConstMatrix x, ConstMatrix grad_out, Matrix grad_x) const {
    check_call("reverse", species, x);
    impl::check_shape("SymmetricContractionKokkos", "reverse", "grad_out", grad_out, x.extent(0), m_sc.dim_out());
    impl::check_shape("SymmetricContractionKokkos", "reverse", "grad_x", grad_x, x.extent(0), m_sc.dim_in());
#if defined(FASTMLIP_HAVE_CUDA)
    if constexpr (impl::kCudaBackend<ExecSpace, T>) {
      if (m_cuda && impl::dense(species) && impl::dense(x) && impl::dense(grad_out) && impl::dense(grad_x)) {
        m_cuda->reverse(species.data(), x.extent(0), x.data(), grad_out.data(), grad_x.data(), ExecSpace().cuda_stream());
        return;
      }
    }
#endif
    auto f = m_f;
    f.m_species = species;
    f.m_x = x;
    f.m_grad_out = grad_out;
    f.m_grad_x = grad_x;
    if constexpr (kHostSimd) {
      launch_rows<typename Rows::TagReverse>("fastmlip::symmetric_contraction::reverse_rows", f);
      return;
    }
    Kokkos::parallel_for("fastmlip::symmetric_contraction::reverse",
                         Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverse>(x.extent(0), Kokkos::AUTO), f);
  }

  /// Gradient of sum(out * grad_out) with respect to the weights, as the flat array
  /// (SymmetricContraction::weight_offset), written into grad_W on ExecSpace: per element
  /// over its nodes, then through the fold's adjoint, with no copy to the host (the trainer's
  /// form). For T = Dual, the tangents of the gradient too (double backward).
  void reverse_weights(Species species, ConstMatrix x, ConstMatrix grad_out, Vector grad_W) const {
    check_call("reverse_weights", species, x);
    impl::check_shape("SymmetricContractionKokkos", "reverse_weights", "grad_out", grad_out, x.extent(0), m_sc.dim_out());
    if (grad_W.extent(0) != m_sc.num_weights(m_num_elements)) {
      throw InputError("SymmetricContractionKokkos::reverse_weights: grad_W holds " +
                       std::to_string(grad_W.extent(0)) + " values; the weights of " +
                       std::to_string(m_num_elements) + " elements are " +
                       std::to_string(m_sc.num_weights(m_num_elements)));
    }
    const auto groups = NodeGroups<ExecSpace>::build(species, m_num_elements,
                                                     "SymmetricContractionKokkos::reverse_weights", m_groups);
    const int G = static_cast<int>(m_sc.entries.size());
    // Working storage, reused while the shape holds and no copy of this kernel shares it.
    if (m_grad_coef.use_count() != 1 || static_cast<int>(m_grad_coef.extent(0)) != m_num_elements ||
        static_cast<int>(m_grad_coef.extent(1)) != G) {
      m_grad_coef =
          Coef(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::symmetric_contraction::grad_coef"),
               m_num_elements, G, m_sc.channels);
    }
    auto f = m_f;
    f.m_species = species;
    f.m_x = x;
    f.m_grad_out = grad_out;
    f.m_element_ptr = groups.ptr;
    f.m_element_nodes = groups.nodes;
    f.m_grad_coef = m_grad_coef;
    Kokkos::parallel_for("fastmlip::symmetric_contraction::reverse_weights",
                         Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverseCoef>(m_num_elements, Kokkos::AUTO), f);
    Fold u = m_fold;
    u.m_num_elements = m_num_elements;
    u.m_grad_coef = m_grad_coef;
    u.m_grad_w = grad_W;
    Kokkos::parallel_for(
        "fastmlip::symmetric_contraction::unfold",
        Kokkos::RangePolicy<ExecSpace, typename Fold::TagUnfold, Kokkos::IndexType<std::int64_t>>(
            0, static_cast<std::int64_t>(grad_W.extent(0))),
        u);
  }

  /// As above, copied to the host in mace-torch's layout (SymmetricContraction::unfold_gradient):
  /// [o][nu-1][e, k, c].
  std::vector<std::vector<std::vector<host_scalar_t<T>>>> reverse_weights(Species species, ConstMatrix x,
                                                                          ConstMatrix grad_out) const {
    Vector flat(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::symmetric_contraction::grad_weights"),
        m_num_elements > 0 ? m_sc.num_weights(m_num_elements) : 0);
    reverse_weights(species, x, grad_out, flat);
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), flat);
    std::vector<std::vector<std::vector<host_scalar_t<T>>>> out(m_sc.num_params.size());
    for (int o = 0; o < static_cast<int>(out.size()); ++o) {
      for (int nu = 1; nu <= m_sc.correlation; ++nu) {
        const std::size_t first = m_sc.weight_offset(o, nu, m_num_elements);
        const std::size_t n =
            static_cast<std::size_t>(m_num_elements) * m_sc.num_params[o][nu - 1] * m_sc.channels;
        auto& w = out[o].emplace_back();
        w.reserve(n);
        for (std::size_t i = first; i < first + n; ++i) {
          if constexpr (is_dual_v<T>) {
            w.emplace_back(static_cast<double>(h(i).v), static_cast<double>(h(i).d));
          } else {
            w.push_back(static_cast<double>(h(i)));
          }
        }
      }
    }
    return out;
  }

 private:
  /// The row kernels over nodes, a block of Rows::kNodes per work item.
  template <class Tag>
  void launch_rows(const char* label, const Functor& f) const {
    Rows r;
    r.m_f = f;
    r.m_simd = &symmetric_contraction_simd<T>();
    r.m_shape = SCSimdShape{f.m_mono.data(),       f.m_entries.data(),
                            f.m_ell_offset.data(), f.m_ell_stride.data(),
                            f.m_num_mono,          f.m_num_entries,
                            f.m_num_ell,           f.m_channels,
                            f.m_out_per_channel,   static_cast<int>(f.m_coef.extent(2))};
    const int nodes = static_cast<int>(f.m_x.extent(0));
    Kokkos::parallel_for(
        label, Kokkos::RangePolicy<ExecSpace, Tag>(0, (nodes + Rows::kNodes - 1) / Rows::kNodes), r);
  }

  void check_call(const char* fn, const Species& species, const ConstMatrix& x) const {
    if (m_num_elements == 0) {
      throw InputError(std::string("SymmetricContractionKokkos::") + fn + ": set_weights() was not called");
    }
    impl::check_shape("SymmetricContractionKokkos", fn, "x", x, x.extent(0), m_sc.dim_in());
    if (species.extent(0) != x.extent(0)) {
      throw InputError(std::string("SymmetricContractionKokkos::") + fn + ": " + std::to_string(species.extent(0)) +
                       " species for " + std::to_string(x.extent(0)) + " nodes");
    }
    check_labels(species, m_num_elements, std::string("SymmetricContractionKokkos::") + fn);
  }
  SymmetricContraction m_sc;
  Functor m_f;
  Fold m_fold;
  Coef m_coef_store;         ///< the folded coefficients m_f reads
  mutable Coef m_grad_coef;  ///< reverse_weights' per-element gradient, before the unfold
  mutable NodeGroupsStorage<ExecSpace> m_groups;  ///< reverse_weights' nodes by element (shared by copies)
  int m_num_elements = 0;
  // The hand-written kernels behind Backend::cuda (kernels/cuda/symmetric_contraction_cuda.hpp),
  // where this build has them for ExecSpace and T; shared, as the class is copied by value.
#if defined(FASTMLIP_HAVE_CUDA)
  using CudaSC = std::conditional_t<impl::kCudaBackend<ExecSpace, T>, cuda::SymmetricContractionCuda<T>, void>;
#else
  using CudaSC = void;
#endif
  std::shared_ptr<CudaSC> m_cuda;
};

}  // namespace fastmlip::kernels

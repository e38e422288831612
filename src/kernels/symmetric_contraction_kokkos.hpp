// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the symmetric contraction (symmetric_contraction.hpp).
#include <Kokkos_Core.hpp>
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

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Species = Kokkos::View<const int*, ExecSpace>;

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

  /// Sets the element weights (mace-torch layout, see SymmetricContraction::fold).
  void set_weights(const std::vector<std::vector<std::vector<double>>>& W, int num_elements) {
    upload_coef(m_sc.fold(W, num_elements), nullptr, num_elements);
#if defined(FASTMLIP_HAVE_CUDA)
    if constexpr (impl::kCudaBackend<ExecSpace, T>) {
      if (m_cuda) {
        m_cuda->set_weights(W, num_elements);
      }
    }
#endif
  }

  /// For T = Dual only: weights W + eps * W_tangent (same layout), so that a Dual run also
  /// differentiates forward-mode with respect to the weights (the trainer's double backward).
  /// fold() is linear, so the coefficients' tangents are the folded tangents.
  void set_weights(const std::vector<std::vector<std::vector<double>>>& W,
                   const std::vector<std::vector<std::vector<double>>>& W_tangent, int num_elements) {
    static_assert(is_dual_v<T>, "SymmetricContractionKokkos: weight tangents need a Dual scalar");
    const auto tangent = m_sc.fold(W_tangent, num_elements);
    upload_coef(m_sc.fold(W, num_elements), &tangent, num_elements);
  }

 private:
  void upload_coef(const std::vector<double>& coef, const std::vector<double>* tangent, int num_elements) {
    // Channels padded with zeros to whole blocks: the kernels read a block's coefficients
    // without a bounds test.
    constexpr int B = Limits::kCoefChannelPad;
    static_assert(B % Functor::kChannelBlock == 0, "the functors' blocks must divide the padding");
    const int padded = (m_sc.channels + B - 1) / B * B;
    Kokkos::View<T***, Kokkos::LayoutRight, ExecSpace> d("fastmlip::symmetric_contraction::coef", num_elements,
                                                         m_sc.entries.size(), padded);
    auto h = Kokkos::create_mirror_view(d);
    const std::size_t G = m_sc.entries.size(), C = m_sc.channels;
    for (std::size_t i = 0; i < coef.size(); ++i) {
      const std::size_t c = i % C, g = (i / C) % G, el = i / (C * G);
      if constexpr (is_dual_v<T>) {
        using V = typename T::value_type;
        h(el, g, c) = T(static_cast<V>(coef[i]), tangent ? static_cast<V>((*tangent)[i]) : V(0));
      } else {
        h(el, g, c) = static_cast<T>(coef[i]);
      }
    }
    Kokkos::deep_copy(d, h);
    m_f.m_coef = d;
    m_num_elements = num_elements;
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

  /// Gradient with respect to the weights, in mace-torch's layout (see unfold_gradient).
  /// For T = Dual, the tangents of the gradient come back too (double backward).
  std::vector<std::vector<std::vector<host_scalar_t<T>>>> reverse_weights(Species species, ConstMatrix x, ConstMatrix grad_out) const {
    check_call("reverse_weights", species, x);
    impl::check_shape("SymmetricContractionKokkos", "reverse_weights", "grad_out", grad_out, x.extent(0), m_sc.dim_out());
    const auto groups = NodeGroups<ExecSpace>::build(species, m_num_elements, "SymmetricContractionKokkos::reverse_weights");
    Kokkos::View<T***, Kokkos::LayoutRight, ExecSpace> gcoef("fastmlip::symmetric_contraction::grad_coef", m_num_elements,
                                                             m_sc.entries.size(), m_sc.channels);
    auto f = m_f;
    f.m_species = species;
    f.m_x = x;
    f.m_grad_out = grad_out;
    f.m_element_ptr = groups.ptr;
    f.m_element_nodes = groups.nodes;
    f.m_grad_coef = gcoef;
    Kokkos::parallel_for("fastmlip::symmetric_contraction::reverse_weights",
                         Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverseCoef>(m_num_elements, Kokkos::AUTO), f);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gcoef);
    if constexpr (is_dual_v<T>) {
      // unfold_gradient is linear: unfold the values and the tangents separately.
      std::vector<double> value(h.size()), tangent(h.size());
      for (std::size_t i = 0; i < h.size(); ++i) {
        value[i] = static_cast<double>(h.data()[i].v);
        tangent[i] = static_cast<double>(h.data()[i].d);
      }
      const auto gv = m_sc.unfold_gradient(value, m_num_elements), gt = m_sc.unfold_gradient(tangent, m_num_elements);
      std::vector<std::vector<std::vector<Dual<double>>>> out(gv.size());
      for (std::size_t a = 0; a < gv.size(); ++a) {
        out[a].resize(gv[a].size());
        for (std::size_t b = 0; b < gv[a].size(); ++b) {
          for (std::size_t c = 0; c < gv[a][b].size(); ++c) {
            out[a][b].emplace_back(gv[a][b][c], gt[a][b][c]);
          }
        }
      }
      return out;
    } else {
      return m_sc.unfold_gradient(std::vector<double>(h.data(), h.data() + h.size()), m_num_elements);
    }
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

// SPDX-License-Identifier: MIT
#pragma once
/// \file CHGNet's two heads on any Kokkos execution space (chgnet_stages.hpp's Magmom and
/// Readout blocks), over the dense kernels' entry points (kernels/dense_kokkos.hpp):
///
///   Magmom    m_i = |site_wise(x^{n_conv-1}_i)|                      (not differentiated)
///   Readout   E_i = MLP(LayerNorm(x^{n_conv}_i)) + AtomRef[Z_i]      (v0.2.0: no LayerNorm)
///             MLP = Linear (SiLU Linear)*, one output
///
/// and the readout's reverse, dE/dx^{n_conv} with E = sum_i E_i. On host spaces the dense
/// kernels take their `rows` path (the SIMD kernels the trainer's CHGNet runs) and the SiLU the
/// SIMD kernels' scalar twin; a device takes the `teams` path. The host LayerNorm sums each row
/// in the SIMD kernels' order, so the site energies differ from the plain row loop ChgnetModel
/// ran before by round-off (benchmarks/README.md).
#include <Kokkos_Core.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/dense.hpp"
#include "kernels/dense_kokkos.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/rows_impl.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/layer_norm.hpp"
#include "kernels/normed_mlp_kokkos.hpp"

namespace fastmlip::models::chgnet {

namespace impl {

template <class ExecSpace, class T>
struct HeadsFunctor {
  struct TagSiteEnergy {};   // E_i = y_i + AtomRef[Z_i]
  struct TagMagmom {};       // m_i = |y_i|

  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> z;
  Kokkos::View<const int*, ExecSpace> species;
  Kokkos::View<const double*, ExecSpace> atom_ref;
  Kokkos::View<double*, ExecSpace> out;

  KOKKOS_INLINE_FUNCTION void operator()(TagSiteEnergy, int i) const {
    out(i) = static_cast<double>(z(i, 0)) + atom_ref(species(i));
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagMagmom, int i) const {
    const double m = z(i, 0);
    out(i) = m < 0 ? -m : m;
  }
};

}  // namespace impl

template <class ExecSpace, class T>
class Heads {
  using Functor = impl::HeadsFunctor<ExecSpace, T>;
  using Glue = kernels::impl::NormedMLPGlue<ExecSpace, T>;
  static constexpr bool kHost =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Doubles = Kokkos::View<double*, ExecSpace>;
  using ConstInts = Kokkos::View<const int*, ExecSpace>;

  /// `norm`: the readout's LayerNorm (absent in v0.2.0); `readout`: its linears, the last with
  /// one output; `atom_ref`: [elements] eV; `site_wise`: the magnetic-moment linear (Fa -> 1).
  Heads(const std::optional<kernels::LayerNorm<T>>& norm, const std::vector<kernels::Dense<T>>& readout,
        const std::vector<double>& atom_ref, const kernels::Dense<T>& site_wise,
        kernels::DensePath path = kernels::DensePath::automatic)
      : m_site_wise(site_wise, path),
        m_atom_ref(kernels::impl::upload<ExecSpace>(atom_ref, "fastmlip::chgnet::atom_ref")),
        m_teams(m_site_wise.path() == kernels::DensePath::teams) {
    if (norm) {
      m_norm.emplace(*norm, path);
    }
    for (const auto& d : readout) {
      m_readout.emplace_back(d, path);
    }
    m_z_buf.assign(m_readout.size(), Buffer("fastmlip::chgnet::readout_z"));
  }

  /// m [rows] = |site_wise(x)| of x [rows][Fa].
  void magmom(const ConstMatrix& x, const Doubles& m) const {
    const Matrix y = m_raw.get(static_cast<int>(x.extent(0)), 1);
    m_site_wise.compute(x, y);
    Functor f;
    f.z = y;
    f.out = m;
    Kokkos::parallel_for("fastmlip::chgnet::magmom",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagMagmom>(0, x.extent(0)), f);
  }

  /// site_energy [rows] from x [rows][Fa] and the rows' species; keeps the activations for
  /// reverse().
  void compute(const ConstMatrix& x, const ConstInts& species, const Doubles& site_energy) {
    const int rows = static_cast<int>(x.extent(0)), dim = static_cast<int>(x.extent(1));
    m_h = m_h_buf.get(rows, dim);
    Kokkos::deep_copy(m_h, x);
    if (m_norm) {
      m_yhat = m_yhat_buf.get(rows, dim);
      m_inv = m_inv_buf.vector(rows);
      m_norm->compute(m_h, m_yhat, m_inv);
    }
    m_z.resize(m_readout.size());
    Matrix act = m_h;
    for (std::size_t l = 0; l < m_readout.size(); ++l) {
      m_z[l] = m_z_buf[l].get(rows, m_readout[l].out());
      m_readout[l].compute(act, m_z[l]);
      if (l + 1 == m_readout.size()) {
        break;
      }
      // Layer l's input is not read again (reverse() needs only the pre-activations), so the
      // activations of every layer share one buffer.
      act = m_act_buf.get(rows, m_readout[l].out());
      silu(m_z[l], act);
    }
    Functor f;
    f.z = m_z.back();
    f.species = species;
    f.atom_ref = m_atom_ref;
    f.out = site_energy;
    Kokkos::parallel_for("fastmlip::chgnet::site_energy",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagSiteEnergy>(0, rows), f);
  }

  /// gx [rows][Fa] = dE/dx for E the sum of compute()'s site energies (overwritten).
  void reverse(const Matrix& gx) const {
    const int rows = static_cast<int>(gx.extent(0));
    Matrix g = m_grad_buf[0].get(rows, 1);
    Kokkos::deep_copy(g, T(1));
    for (std::size_t l = m_readout.size(); l-- > 0;) {
      if (l + 1 < m_readout.size()) {
        silu_reverse(m_z[l], g);
      }
      // Two buffers in turn: layer l's input adjoint must not overwrite its output adjoint.
      const Matrix gprev = l == 0 ? gx : m_grad_buf[(m_readout.size() - l) % 2].get(rows, m_readout[l].in());
      m_readout[l].reverse(g, gprev);
      g = gprev;
    }
    if (m_norm) {
      m_norm->reverse(gx, m_yhat, m_inv);
    }
  }

 private:
  /// a = silu(z): on the host the SIMD kernels' scalar twin, as the host loops had it.
  void silu(const Matrix& z, const Matrix& a) const {
    if constexpr (kHost) {
      if (!m_teams) {
        for (std::size_t q = 0; q < z.size(); ++q) {
          a.data()[q] = kernels::rows::silu(z.data()[q]);
        }
        return;
      }
    }
    glue<typename Glue::TagSilu>("fastmlip::chgnet::readout_silu", a, z);
  }
  /// g *= silu'(z) = s (1 + z (1 - s)), s = sigmoid(z).
  void silu_reverse(const Matrix& z, const Matrix& g) const {
    if constexpr (kHost) {
      if (!m_teams) {
        for (std::size_t q = 0; q < z.size(); ++q) {
          const T s = kernels::rows::sigmoid(z.data()[q]);
          g.data()[q] *= s * (T(1) + z.data()[q] * (T(1) - s));
        }
        return;
      }
    }
    glue<typename Glue::TagSiluReverse>("fastmlip::chgnet::readout_silu_reverse", g, z);
  }
  /// On a device: the radial MLP's elementwise SiLU steps (kernels/normed_mlp_kokkos.hpp), `out`
  /// from z.
  template <class Tag>
  static void glue(const char* label, const Matrix& out, const Matrix& z) {
    Glue f;
    f.out = out;
    f.in = z;
    f.width = static_cast<int>(z.extent(1));
    Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace, Tag>(0, static_cast<int>(z.size())), f);
  }

  std::optional<kernels::LayerNormKokkos<ExecSpace, T>> m_norm;
  std::vector<kernels::DenseKokkos<ExecSpace, T>> m_readout;
  kernels::DenseKokkos<ExecSpace, T> m_site_wise;
  Kokkos::View<const double*, ExecSpace> m_atom_ref;
  bool m_teams = false;
  // What compute() keeps for reverse(): the LayerNorm's input and yhat, 1/sigma, each linear's
  // pre-activation; windows on storage kept between steps (GrowBuffer), as the other stages'.
  using Buffer = kernels::impl::GrowBuffer<T, ExecSpace>;
  Matrix m_h, m_yhat;
  typename Buffer::Vector m_inv;
  std::vector<Matrix> m_z;
  Buffer m_h_buf{"fastmlip::chgnet::readout_in"}, m_yhat_buf{"fastmlip::chgnet::readout_yhat"},
      m_inv_buf{"fastmlip::chgnet::readout_inv"}, m_act_buf{"fastmlip::chgnet::readout_act"};
  std::vector<Buffer> m_z_buf;
  mutable Buffer m_raw{"fastmlip::chgnet::magmom_raw"};
  mutable Buffer m_grad_buf[2] = {Buffer("fastmlip::chgnet::readout_grad"),
                                  Buffer("fastmlip::chgnet::readout_grad")};
};

}  // namespace fastmlip::models::chgnet

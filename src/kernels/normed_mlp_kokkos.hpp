// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos entry points of mace-torch's RadialMLP (normed_mlp.hpp) over rows (edges):
///
///   NormedMLPKokkos::compute   out = MLP(x; pre), keeping each hidden layer's LayerNorm output,
///                              normalised row and 1/sigma
///   NormedMLPKokkos::reverse   gx = dE/dx from gout, with the activations of the last compute
///
/// Composed of the dense layer and LayerNorm entry points (dense_kokkos.hpp: the host SIMD
/// kernels on host spaces, team functors on devices) and one elementwise functor for the SiLU and
/// the first layer's per-row term. The activations live in a caller's NormedMLPWorkspace, which
/// grows with the largest row count seen: reverse() reads what the compute() before it, on the
/// same workspace, left there. A model that recomputes each MLP just before its reverse (MACE's
/// does) shares one workspace among all its MLPs.
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/dense_kokkos.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/radial_mlp_impl.hpp"
#include "kernels/normed_mlp.hpp"

namespace fastmlip::kernels {

namespace impl {

/// The elementwise steps between NormedMLPKokkos' dense layers and norms.
template <class ExecSpace, class T>
struct NormedMLPGlue {
  struct TagAddPre {};       // z(r, k) += pre(r, k)
  struct TagSilu {};         // a(r, k) = silu(z(r, k))
  struct TagSiluReverse {};  // g(r, k) *= silu'(z(r, k))
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  Matrix out;
  ConstMatrix in;
  int width = 0;

  KOKKOS_INLINE_FUNCTION void operator()(TagAddPre, int idx) const {
    out(idx / width, idx % width) += in(idx / width, idx % width);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagSilu, int idx) const {
    out(idx / width, idx % width) = silu(in(idx / width, idx % width));
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagSiluReverse, int idx) const {
    out(idx / width, idx % width) *= silu_derivative(in(idx / width, idx % width));
  }
};

}  // namespace impl

/// The activations of one NormedMLPKokkos::compute, for its reverse.
template <class ExecSpace, class T>
struct NormedMLPWorkspace {
  using Buffer = impl::GrowBuffer<T, ExecSpace>;
  // Per hidden layer: the LayerNorm output (SiLU's input), the normalised row, 1/sigma, SiLU's output.
  std::vector<Buffer> z, hat, inv, act;
  Buffer grad[2];  // the reverse pass' hidden adjoints, alternating
  void reserve_layers(std::size_t n) {
    for (auto* v : {&z, &hat, &inv, &act}) {
      if (v->size() < n) {
        v->resize(n);
      }
    }
  }
};

template <class ExecSpace, class T>
class NormedMLPKokkos {
  using Glue = impl::NormedMLPGlue<ExecSpace, T>;
  using Buffer = impl::GrowBuffer<T, ExecSpace>;

 public:
  using Workspace = NormedMLPWorkspace<ExecSpace, T>;
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  explicit NormedMLPKokkos(const NormedMLP& mlp, DensePath path = DensePath::automatic)
      : m_widths(mlp.widths) {
    mlp.validate();
    const int L = mlp.num_layers();
    for (int l = 0; l < L; ++l) {
      const std::vector<T> w(mlp.weight[l].begin(), mlp.weight[l].end());
      const std::vector<T> b(mlp.bias[l].begin(), mlp.bias[l].end());
      m_dense.emplace_back(Dense<T>(mlp.widths[l], mlp.widths[l + 1], w.data(), b.data()), path);
      if (l + 1 < L) {
        LayerNorm<T> norm;
        norm.dim = mlp.widths[l + 1];
        norm.gamma.assign(mlp.gamma[l].begin(), mlp.gamma[l].end());
        norm.beta.assign(mlp.beta[l].begin(), mlp.beta[l].end());
        m_norm.emplace_back(norm, path);
      }
    }
  }
  int width_in() const { return m_widths.front(); }
  int width_out() const { return m_widths.back(); }
  int width_first() const { return m_widths.at(1); }

  /// out [rows][width_out] = MLP(x [rows][width_in]) with pre [rows][width_first] added to the
  /// first pre-activation (an empty view: nothing added); the activations into `ws`.
  void compute(const ConstMatrix& x, const ConstMatrix& pre, const Matrix& out, Workspace& ws) const {
    const int rows = static_cast<int>(x.extent(0));
    if (pre.extent(0) != 0) {
      impl::check_shape("NormedMLPKokkos", "compute", "pre", pre, rows, width_first());
    }
    const int L = static_cast<int>(m_dense.size());
    ws.reserve_layers(static_cast<std::size_t>(L - 1));
    std::vector<Matrix> z, hat, act;
    std::vector<Vector> inv;
    for (int l = 0; l + 1 < L; ++l) {
      const int n = m_widths[l + 1];
      z.push_back(ws.z[l].get(rows, n));
      hat.push_back(ws.hat[l].get(rows, n));
      act.push_back(ws.act[l].get(rows, n));
      inv.push_back(vector(ws.inv[l], rows));
    }
    const int c = chunk(rows);
    for (int r0 = 0; r0 < rows; r0 += c) {
      const int r1 = std::min(rows, r0 + c);
      ConstMatrix h = part(x, r0, r1);
      for (int l = 0; l + 1 < L; ++l) {
        const Matrix zc = part(z[l], r0, r1), ac = part(act[l], r0, r1);
        m_dense[l].compute(h, zc);
        if (l == 0 && pre.extent(0) != 0) {
          launch<typename Glue::TagAddPre>("fastmlip::normed_mlp::add_pre", zc, part(pre, r0, r1));
        }
        m_norm[l].compute(zc, part(hat[l], r0, r1), Vector(inv[l].data() + r0, r1 - r0));
        launch<typename Glue::TagSilu>("fastmlip::normed_mlp::silu", ac, zc);
        h = ac;
      }
      const Matrix oc = part(out, r0, r1);
      m_dense[L - 1].compute(h, oc);
      if (L == 1 && pre.extent(0) != 0) {
        launch<typename Glue::TagAddPre>("fastmlip::normed_mlp::add_pre", oc, part(pre, r0, r1));
      }
    }
  }

  /// gx [rows][width_in] = dE/dx from gout [rows][width_out] = dE/d(out), through the
  /// activations the last compute() left in `ws` (same rows).
  void reverse(const ConstMatrix& gout, const Matrix& gx, Workspace& ws) const {
    const int rows = static_cast<int>(gout.extent(0));
    const int L = static_cast<int>(m_dense.size());
    const int c = chunk(rows);
    for (int r0 = 0; r0 < rows; r0 += c) {
      const int r1 = std::min(rows, r0 + c);
      ConstMatrix g = part(gout, r0, r1);
      for (int l = L - 1; l >= 1; --l) {
        const int n = m_widths[l];
        const Matrix gh(ws.grad[l % 2].get(c, n).data(), r1 - r0, n);
        m_dense[l].reverse(g, gh);
        launch<typename Glue::TagSiluReverse>("fastmlip::normed_mlp::silu_reverse", gh,
                                              part(ws.z[l - 1].get(rows, n), r0, r1));
        m_norm[l - 1].reverse(gh, part(ws.hat[l - 1].get(rows, n), r0, r1),
                              Vector(vector(ws.inv[l - 1], rows).data() + r0, r1 - r0));
        g = gh;
      }
      m_dense[0].reverse(g, part(gx, r0, r1));
    }
  }

 private:
  using Vector = Kokkos::View<T*, ExecSpace>;
  /// Rows per pass on the host (`rows` path): a pass's activations stay in L2 while the dense
  /// products sweep their weight columns, as the radial MLP's GEMM does (radial_mlp_gemm.hpp);
  /// over all rows at once each column panel would stream the whole input from memory (it made
  /// MACE-MH-1's radial MLP 3x slower). Devices take all rows in one launch.
  static constexpr int kHostChunk = 256;
  int chunk(int rows) const {
    return m_dense.front().path() == DensePath::rows ? kHostChunk : std::max(rows, 1);
  }
  /// Rows r0 .. r1-1 of a row-major matrix, as a matrix of its own.
  template <class M>
  static M part(const M& m, int r0, int r1) {
    return M(m.data() + static_cast<std::size_t>(r0) * m.extent(1), r1 - r0, m.extent(1));
  }
  static Kokkos::View<T*, ExecSpace> vector(Buffer& b, int rows) {
    return Kokkos::View<T*, ExecSpace>(b.get(rows, 1).data(), rows);
  }
  template <class Tag>
  static void launch(const char* label, const Matrix& out, const ConstMatrix& in) {
    Glue f;
    f.out = out;
    f.in = in;
    f.width = static_cast<int>(out.extent(1));
    Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace, Tag>(0, out.extent(0) * out.extent(1)), f);
  }

  std::vector<int> m_widths;
  std::vector<DenseKokkos<ExecSpace, T>> m_dense;
  std::vector<LayerNormKokkos<ExecSpace, T>> m_norm;
};

}  // namespace fastmlip::kernels

// SPDX-License-Identifier: MIT
#pragma once
/// \file CHGNet's atom convolutions (chgnet_stages.hpp's AtomConv blocks) on any Kokkos
/// execution space:
///
///   x^{k+1}_i = x^k_i + O^a_k sum_{e: c(e) = i} GMLP_k([x^k_c, b^k_e, x^k_n]) * w_e
///
/// for the local nodes i (ghost rows of x^{k+1} are left zero for the exchange to fill). A short
/// edge's b^k is its stored row; a long edge's is b^0 = W_b B(r_e) plus the BondConv biases
/// before layer k; w_e = W_a B(r_e), B the 6 A basis. Long edges' b^0 and every edge's w are
/// not stored: each chunk of edges recomputes them from r (31 values per edge instead of 128),
/// and the centre's and the neighbour's first-layer projections are computed once per node and
/// gathered per edge (FastCHGNet's redundancy removal; GatedMlpKokkos::project).
///
/// reverse() goes from dE/dx^{k+1} (local rows) to dE/dx^k (local and ghost rows), dE/db^k of
/// the short edges and dE/dr of every edge (long edges' b^0 and all w through the basis).
///
/// The edges run in chunks: GatedMlp's tile of 32 rows on the `rows` path (host spaces; a
/// chunk's rows stay in cache between the SIMD kernels, which are the arithmetic ChgnetModel's
/// host loops ran before, bit for bit), kDeviceChunk rows on `teams`. Per chunk, when the caller
/// asks (keep()), the first-layer outputs and, on `rows`, the gated MLP's activations are kept
/// for the reverse pass, which then skips recomputing the forward. Sums over the edges of a
/// centre run in edge order on every path (edges are sorted by centre); sums over the edges of
/// a neighbour are atomic on a device (their order there is not fixed).
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/impl/atom_graph_impl.hpp"  // host_value
#include "kernels/dense.hpp"
#include "kernels/dense_kokkos.hpp"
#include "kernels/gated_mlp.hpp"
#include "kernels/gated_mlp_kokkos.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/rows_impl.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "models/chgnet/chgnet_chunks.hpp"

namespace fastmlip::models::chgnet {

namespace impl {

/// The element-wise steps of a chunk of edges e0 .. e0 + rows - 1 (row t is edge e0 + t).
template <class ExecSpace, class T>
struct AtomConvFunctor {
  struct TagBondRows {};       // x(t, :) = b(slot) for a short edge; += long_bias for a long one (k > 0)
  struct TagWeigh {};          // y(t, :) *= w(t, :)
  struct TagCentreSum {};      // acc(i, :) += the rows of i's edges in the chunk, in edge order
  struct TagResidual {};       // x(i, :) += y(i, :)
  struct TagScaleGathered {};  // out(t, :) = p0(center, :) in(t, :)
  struct TagShortAdjoint {};   // gb(slot, :) += gx(t, :), gx(t, :) = 0, for a short edge
  struct TagGradR {};          // g_r(e0 + t) += gr(t)

  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstInts = Kokkos::View<const int*, ExecSpace>;

  int e0 = 0, i0 = 0;
  bool long_bias_on = false;
  ConstInts center, neighbor, center_start, edge_slot;
  ConstMatrix in, p0;
  Kokkos::View<const T*, ExecSpace> long_bias, in_vec;
  Matrix out, out2;
  Kokkos::View<double*, ExecSpace> g_r;

  KOKKOS_INLINE_FUNCTION void operator()(TagBondRows, int t, int j) const {
    const int s = edge_slot(e0 + t);
    if (s >= 0) {
      out(t, j) = in(s, j);
    } else if (long_bias_on) {
      out(t, j) += long_bias(j);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagWeigh, int t, int j) const { out(t, j) *= in(t, j); }
  KOKKOS_INLINE_FUNCTION void operator()(TagCentreSum, int ii, int j) const {
    const int i = i0 + ii, rows = static_cast<int>(in.extent(0));
    const int t0 = (center_start(i) > e0 ? center_start(i) : e0) - e0;
    const int t1 = (center_start(i + 1) < e0 + rows ? center_start(i + 1) : e0 + rows) - e0;
    T v = out(i, j);
    for (int t = t0; t < t1; ++t) {
      v += in(t, j);
    }
    out(i, j) = v;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagResidual, int i, int j) const { out(i, j) += in(i, j); }
  KOKKOS_INLINE_FUNCTION void operator()(TagScaleGathered, int t, int j) const {
    out(t, j) = p0(center(e0 + t), j) * in(t, j);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagShortAdjoint, int t, int j) const {
    const int s = edge_slot(e0 + t);
    if (s >= 0) {
      out2(s, j) += out(t, j);
      out(t, j) = T(0);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagGradR, int t) const { g_r(e0 + t) += in_vec(t); }
};

}  // namespace impl

template <class ExecSpace, class T>
class AtomConv : public impl::ChunkedStage<ExecSpace, T> {
  using Base = impl::ChunkedStage<ExecSpace, T>;
  using Functor = impl::AtomConvFunctor<ExecSpace, T>;
  using Mlp = kernels::GatedMlpKokkos<ExecSpace, T>;
  using Base::m_chunk, Base::m_keep, Base::m_rows_path;

 public:
  using typename Base::Matrix, typename Base::ConstMatrix, typename Base::ConstInts,
      typename Base::ConstReals, typename Base::Doubles;

  /// What the convolutions read of the graph: edges sorted by centre (a local node), the short
  /// edges' slots (-1: long) and every edge's length.
  struct Edges {
    int n_local = 0, n_total = 0;
    ConstInts center, neighbor;  ///< [E]
    ConstInts center_start;      ///< [n_local + 1]
    ConstInts edge_slot;         ///< [E]
    ConstReals r;                ///< [E]
    int num_edges() const { return static_cast<int>(center.extent(0)); }
  };

  /// `basis`: the 6 A Bessel basis; `bond_embedding` (W_b, n_radial -> Fb) and `bond_weights`
  /// (W_a, n_radial -> Fa), both without bias; per layer k its gated MLP (segments Fa, Fb, Fa),
  /// its output linear O^a_k (Fa -> Fa) and the BondConv biases summed before it (Fb values,
  /// or none for zero).
  AtomConv(const kernels::RadialBasisParams& basis, const kernels::Dense<T>& bond_embedding,
           const kernels::Dense<T>& bond_weights, const std::vector<kernels::GatedMlp<T>>& gmlp,
           const std::vector<kernels::Dense<T>>& out, const std::vector<std::vector<T>>& long_bias,
           kernels::DensePath path = kernels::DensePath::automatic)
      : Base("chgnet::AtomConv", path),
        m_rbf(basis),
        m_bond(bond_embedding, path),
        m_weights(bond_weights, path) {
    if (gmlp.size() != out.size() || gmlp.size() != long_bias.size()) {
      throw InputError("chgnet::AtomConv: " + std::to_string(gmlp.size()) + " gated MLPs, " +
                       std::to_string(out.size()) + " output linears and " +
                       std::to_string(long_bias.size()) + " bias sums: one of each per layer");
    }
    m_fa = bond_weights.out;
    m_fb = bond_embedding.out;
    for (std::size_t k = 0; k < gmlp.size(); ++k) {
      m_gmlp.emplace_back(gmlp[k], path);
      m_out.emplace_back(out[k], path);
      const Mlp& m = m_gmlp.back();
      if (m.segments() != 3 || m.segment_width(0) != m_fa || m.segment_width(1) != m_fb ||
          m.segment_width(2) != m_fa || m.out() != m_fa || m_out.back().in() != m_fa ||
          m_out.back().out() != m_fa) {
        throw InputError("chgnet::AtomConv: layer " + std::to_string(k) +
                         "'s gated MLP must read [x_c, b_e, x_n] (" + std::to_string(m_fa) + ", " +
                         std::to_string(m_fb) + ", " + std::to_string(m_fa) + ") and write " +
                         std::to_string(m_fa) + " values, as its output linear");
      }
      const bool any = !long_bias[k].empty();
      if (any && static_cast<int>(long_bias[k].size()) != m_fb) {
        throw InputError("chgnet::AtomConv: layer " + std::to_string(k) + "'s bias sum has " +
                         std::to_string(long_bias[k].size()) + " values, not " + std::to_string(m_fb));
      }
      m_long_bias.push_back(
          any ? kernels::impl::upload<ExecSpace>(long_bias[k], "fastmlip::chgnet::long_bias")
              : Kokkos::View<const T*, ExecSpace>());
    }
    m_kept.resize(m_gmlp.size());
  }

  int layers() const { return static_cast<int>(m_gmlp.size()); }
  /// Whether compute() keeps each layer's activations for reverse() (the caller's memory plan);
  /// false frees what was kept. Results are the same bits either way.
  void keep(bool on) {
    m_keep = on;
    if (!on) {
      for (auto& k : m_kept) {
        k = impl::KeptActivations<ExecSpace, T>();
      }
    }
  }

  /// x_next [n_total][Fa] = x^{k+1} from x^k [n_total][Fa] (ghost rows current) and the short
  /// edges' b^k [S][Fb]; x_next's ghost rows are zero.
  void compute(int k, const Edges& g, const ConstMatrix& x, const ConstMatrix& b, const Matrix& x_next) {
    check(k, g, x, b);
    const Mlp& m = m_gmlp[k];
    const int E = g.num_edges(), NL = g.n_local, W2 = m.width2();
    project(m, g, x);
    const Matrix agg = m_agg.get(NL, m_fa);
    Kokkos::deep_copy(agg, T(0));
    if (m_keep) {
      m_kept[k].resize(m, E);
    }
    for (int e0 = 0; e0 < E; e0 += m_chunk) {
      const int rows = std::min(m_chunk, E - e0);
      const Matrix z1 = m_keep ? m_kept[k].z1_rows(e0, rows) : m_z1.get(rows, W2);
      const Matrix w = edge_rows(k, g, b, e0, rows);
      first_layer(m, g, e0, rows, z1);
      const Matrix y = m_y.get(rows, m_fa);
      m.compute_from_z1(z1, y, m_keep ? m_kept[k].tiles(m, e0, rows) : typename Mlp::Kept());
      Functor f = base(g, e0);
      f.in = w, f.out = y;
      this->template each<typename Functor::TagWeigh>("fastmlip::chgnet::atom_conv_weigh", rows, m_fa, f);
      centre_sum(g, e0, y, agg);
    }
    Kokkos::deep_copy(x_next, T(0));
    const auto local = Kokkos::make_pair(0, NL);
    const Matrix head = Kokkos::subview(x_next, local, Kokkos::ALL);
    m_out[k].compute(agg, head);
    Functor f;
    f.in = Kokkos::subview(x, local, Kokkos::ALL), f.out = head;
    this->template each<typename Functor::TagResidual>("fastmlip::chgnet::atom_conv_residual", NL, m_fa, f);
  }

  /// The reverse of compute(k): adds dE/dx^k into gx [n_total][Fa] (skipped when gx is empty:
  /// x^0 depends on the species only), dE/db^k into gb [S][Fb] and dE/dr into g_r [E], from
  /// gx_next [n_total][Fa] = dE/dx^{k+1} (local rows complete). x and b as given to compute().
  void reverse(int k, const Edges& g, const ConstMatrix& x, const ConstMatrix& b, const ConstMatrix& gx_next,
               const Matrix& gx, const Matrix& gb, const Doubles& g_r) {
    check(k, g, x, b);
    const Mlp& m = m_gmlp[k];
    const int E = g.num_edges(), NL = g.n_local, N = g.n_total, W2 = m.width2();
    const bool need_x = gx.data() != nullptr;
    const auto local = Kokkos::make_pair(0, NL);
    const Matrix gagg = m_agg.get(NL, m_fa);
    m_out[k].reverse(Kokkos::subview(gx_next, local, Kokkos::ALL), gagg);
    Matrix g_centre, g_neighbor;
    if (need_x) {
      Functor f;
      f.in = Kokkos::subview(gx_next, local, Kokkos::ALL), f.out = Kokkos::subview(gx, local, Kokkos::ALL);
      this->template each<typename Functor::TagResidual>("fastmlip::chgnet::atom_conv_residual", NL, m_fa, f);
      g_centre = m_g_centre.get(NL, W2);
      g_neighbor = m_g_neighbor.get(N, W2);
      Kokkos::deep_copy(g_centre, T(0));
      Kokkos::deep_copy(g_neighbor, T(0));
    }
    if (!m_keep) {
      project(m, g, x);
    }
    for (int e0 = 0; e0 < E; e0 += m_chunk) {
      const int rows = std::min(m_chunk, E - e0);
      Matrix z1;
      const Matrix w = edge_rows(k, g, b, e0, rows);
      if (m_keep) {
        z1 = m_kept[k].z1_rows(e0, rows);
      } else {
        z1 = m_z1.get(rows, W2);
        first_layer(m, g, e0, rows, z1);
      }
      // dE/dy = g(centre) w, then dE/dw = g(centre) y with y as the reverse recomputed it.
      const Matrix gy = m_gy.get(rows, m_fa), y = m_y.get(rows, m_fa), ga = m_ga.get(rows, W2),
                   gw = m_gw.get(rows, m_fa);
      Functor f = base(g, e0);
      f.p0 = gagg, f.in = w, f.out = gy;
      this->template each<typename Functor::TagScaleGathered>("fastmlip::chgnet::atom_conv_grad_y", rows,
                                                              m_fa, f);
      m.reverse_to_z1(z1, gy, ga, y, m_keep ? m_kept[k].tiles(m, e0, rows) : typename Mlp::Kept());
      f.in = y, f.out = gw;
      this->template each<typename Functor::TagScaleGathered>("fastmlip::chgnet::atom_conv_grad_w", rows,
                                                              m_fa, f);
      // Short edges' bond adjoints go to b^k; long edges' (b^0 plus biases) to the basis, with
      // the weights'.
      const Matrix gbond = m_bond_rows.get(rows, m_fb);
      m.reverse_segment(1, ga, gbond, false);
      f.out = gbond, f.out2 = gb;
      this->template each<typename Functor::TagShortAdjoint>("fastmlip::chgnet::atom_conv_short_adjoint",
                                                             rows, m_fb, f);
      const Matrix gbasis = m_basis.get(rows, m_rbf.num_basis());
      m_bond.reverse(gbond, gbasis, false);
      m_weights.reverse(gw, gbasis, true);
      const auto gr = m_gr.vector(rows);
      m_rbf.reverse(Kokkos::subview(g.r, Kokkos::make_pair(e0, e0 + rows)), gbasis, gr);
      f.in_vec = gr, f.g_r = g_r;
      Kokkos::parallel_for("fastmlip::chgnet::atom_conv_grad_r",
                           Kokkos::RangePolicy<ExecSpace, typename Functor::TagGradR>(0, rows), f);
      if (need_x) {
        centre_sum(g, e0, ga, g_centre);
        impl::scatter_added<ExecSpace, T>(m_rows_path, ga, g.neighbor, e0, g_neighbor);
      }
    }
    if (need_x) {
      m.reverse_segment(0, g_centre, Kokkos::subview(gx, local, Kokkos::ALL), true);
      m.reverse_segment(2, g_neighbor, gx, true);
    }
  }

 private:
  void check(int k, const Edges& g, const ConstMatrix& x, const ConstMatrix& b) const {
    if (k < 0 || k >= layers()) {
      throw InputError("chgnet::AtomConv: layer " + std::to_string(k) + " of " + std::to_string(layers()));
    }
    if (x.extent(0) != static_cast<std::size_t>(g.n_total) || x.extent(1) != static_cast<std::size_t>(m_fa) ||
        b.extent(1) != static_cast<std::size_t>(m_fb)) {
      throw InputError("chgnet::AtomConv: x must be [" + std::to_string(g.n_total) + "][" +
                       std::to_string(m_fa) + "] and b [S][" + std::to_string(m_fb) + "]");
    }
  }

  Functor base(const Edges& g, int e0) const {
    Functor f;
    f.e0 = e0;
    f.center = g.center, f.neighbor = g.neighbor, f.center_start = g.center_start, f.edge_slot = g.edge_slot;
    return f;
  }

  /// The centre's and neighbour's projections of x^k: p0 = x W_c (local rows), p1 = x W_n (all).
  void project(const Mlp& m, const Edges& g, const ConstMatrix& x) {
    m_p0 = m_proj0.get(g.n_local, m.width2());
    m_p1 = m_proj1.get(g.n_total, m.width2());
    m.project(0, Kokkos::subview(x, Kokkos::make_pair(0, g.n_local), Kokkos::ALL), m_p0);
    m.project(2, x, m_p1);
  }

  /// The chunk's bond rows at level k (into m_xb, which first_layer reads) and its edge
  /// weights w (returned).
  Matrix edge_rows(int k, const Edges& g, const ConstMatrix& b, int e0, int rows) {
    const Matrix basis = m_basis.get(rows, m_rbf.num_basis());
    m_rbf.compute(Kokkos::subview(g.r, Kokkos::make_pair(e0, e0 + rows)), basis);
    m_xb = m_bond_rows.get(rows, m_fb);
    const Matrix w = m_w.get(rows, m_fa);
    m_bond.compute(basis, m_xb);
    m_weights.compute(basis, w);
    Functor f = base(g, e0);
    f.in = b, f.out = m_xb, f.long_bias = m_long_bias[k], f.long_bias_on = m_long_bias[k].data() != nullptr;
    this->template each<typename Functor::TagBondRows>("fastmlip::chgnet::atom_conv_bond_rows", rows, m_fb,
                                                       f);
    return w;
  }

  /// z1 = b1 + b_e W_b + p0(centre) + p1(neighbour), the order of the host tiles.
  void first_layer(const Mlp& m, const Edges& g, int e0, int rows, const Matrix& z1) const {
    m.compute_z1_from_segment(1, m_xb, z1);
    impl::add_gathered<ExecSpace, T>(m_rows_path, z1, m_p0, g.center, e0);
    impl::add_gathered<ExecSpace, T>(m_rows_path, z1, m_p1, g.neighbor, e0);
  }

  /// acc(centre, :) += the chunk's rows, per centre in edge order.
  void centre_sum(const Edges& g, int e0, const Matrix& src, const Matrix& acc) const {
    const int rows = static_cast<int>(src.extent(0));
    if (rows == 0) {
      return;
    }
    if (m_rows_path) {
      impl::scatter_added<ExecSpace, T>(true, src, g.center, e0, acc);
      return;
    }
    // The chunk's centres are a contiguous range (edges are sorted by centre).
    const int i0 = graph::impl::host_value(g.center, e0),
              i1 = graph::impl::host_value(g.center, e0 + rows - 1);
    Functor f = base(g, e0);
    f.i0 = i0, f.in = src, f.out = acc;
    this->template each<typename Functor::TagCentreSum>("fastmlip::chgnet::atom_conv_centre_sum", i1 - i0 + 1,
                                                        static_cast<int>(src.extent(1)), f);
  }
  kernels::RadialBasisKokkos<ExecSpace, T> m_rbf;
  kernels::DenseKokkos<ExecSpace, T> m_bond, m_weights;
  std::vector<Mlp> m_gmlp;
  std::vector<kernels::DenseKokkos<ExecSpace, T>> m_out;
  std::vector<Kokkos::View<const T*, ExecSpace>> m_long_bias;
  int m_fa = 0, m_fb = 0;
  std::vector<impl::KeptActivations<ExecSpace, T>> m_kept;
  // Per-step working storage, grown, never shrunk.
  using Buffer = kernels::impl::GrowBuffer<T, ExecSpace>;
  mutable Buffer m_proj0{"fastmlip::chgnet::atom_conv_p0"}, m_proj1{"fastmlip::chgnet::atom_conv_p1"},
      m_agg{"fastmlip::chgnet::atom_conv_agg"}, m_z1{"fastmlip::chgnet::atom_conv_z1"},
      m_y{"fastmlip::chgnet::atom_conv_y"}, m_w{"fastmlip::chgnet::atom_conv_w"},
      m_gy{"fastmlip::chgnet::atom_conv_gy"}, m_gw{"fastmlip::chgnet::atom_conv_gw"},
      m_ga{"fastmlip::chgnet::atom_conv_ga"}, m_bond_rows{"fastmlip::chgnet::atom_conv_bond_rows"},
      m_basis{"fastmlip::chgnet::atom_conv_basis"}, m_gr{"fastmlip::chgnet::atom_conv_grad_r"},
      m_g_centre{"fastmlip::chgnet::atom_conv_g_centre"},
      m_g_neighbor{"fastmlip::chgnet::atom_conv_g_neighbor"};
  Matrix m_p0, m_p1, m_xb;
};

}  // namespace fastmlip::models::chgnet

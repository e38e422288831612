// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos entry points of CHGNet's gated MLP (gated_mlp.hpp) on an execution space's
/// views, the stages a device CHGNet block is made of:
///
///   project          proj = x_s W_s                     (a repeated input segment, once per node)
///   compute_z1       z1 = b1 + sum_s z_s W_s            (whole input rows)
///   compute_z1_from_segment  z1 = b1 + x_s W_s          (one segment's rows; the caller adds the
///                                                        others' gathered projections)
///   compute_from_z1  y = GMLP(z1)
///   reverse_to_z1    ga = dL/dz1 from gy = dL/dy        (recomputes the forward from z1)
///   reverse_segment  gx_s (+)= ga W_s
///   reverse_input    gz = ga W                          (whole input rows)
///
/// A caller assembles z1 itself where rows repeat (the centre atom of each edge): projections
/// gathered and added per row, FastCHGNet's redundancy removal. Two paths behind the same
/// entry points:
/// - `rows` (host spaces): the host kernel's tiles and SIMD GEMMs (GatedMlp), the same
///   arithmetic as the pair style's CHGNet, bit for bit;
/// - `teams` (devices): impl/gated_mlp_impl.hpp, one team per row. It also runs on the host,
///   which is how the CPU tests check it.
/// Input gradients only (the MD path): weight gradients stay with the trainer's host kernels.
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "kernels/dense_kokkos.hpp"
#include "kernels/gated_mlp.hpp"
#include "kernels/impl/gated_mlp_impl.hpp"
#include "kernels/impl/team_scratch.hpp"
#include "kernels/impl/upload.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class GatedMlpKokkos {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "GatedMlpKokkos: T is float or double");
  using Functor = impl::GatedMlpFunctor<ExecSpace, T>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  /// `path`: automatic is rows on host spaces, teams elsewhere; rows on a device space is an
  /// UnsupportedError (the host kernel cannot read device memory).
  explicit GatedMlpKokkos(const GatedMlp<T>& mlp, DensePath path = DensePath::automatic)
      : m_host(mlp), m_path(impl::resolve_path<ExecSpace>(path, "GatedMlpKokkos")) {
    Functor& f = m_f;
    f.in = mlp.in, f.hidden = mlp.hidden, f.out = mlp.out, f.width2 = mlp.width2, f.norm = mlp.norm;
    // W1 [width2][in] back together from the segments (each [width2][len], torch's layout).
    std::vector<T> w1(static_cast<std::size_t>(mlp.width2) * mlp.in);
    for (std::size_t s = 0; s < mlp.seg.size(); ++s) {
      const Dense<T>& d = mlp.seg[s];
      for (int o = 0; o < mlp.width2; ++o) {
        std::copy_n(d.w.data() + static_cast<std::size_t>(o) * d.in, d.in,
                    w1.data() + static_cast<std::size_t>(o) * mlp.in + mlp.seg_begin[s]);
      }
    }
    f.W1 = impl::upload_matrix<ExecSpace>(w1, mlp.width2, mlp.in, "fastmlip::gated_mlp::W1");
    m_dense.W = f.W1, m_dense.out = mlp.width2;
    f.b1 = impl::upload<ExecSpace>(mlp.b1, "fastmlip::gated_mlp::b1");
    if (mlp.hidden > 0) {
      f.W2c = impl::upload_matrix<ExecSpace>(mlp.core2.w, mlp.out, mlp.hidden, "fastmlip::gated_mlp::W2c");
      f.W2g = impl::upload_matrix<ExecSpace>(mlp.gate2.w, mlp.out, mlp.hidden, "fastmlip::gated_mlp::W2g");
      f.b2c = impl::upload<ExecSpace>(mlp.core2.b, "fastmlip::gated_mlp::b2c");
      f.b2g = impl::upload<ExecSpace>(mlp.gate2.b, "fastmlip::gated_mlp::b2g");
    }
    if (mlp.norm) {
      f.ln_cw = impl::upload<ExecSpace>(mlp.ln_core.gamma, "fastmlip::gated_mlp::ln_core_w");
      f.ln_cb = impl::upload<ExecSpace>(mlp.ln_core.beta, "fastmlip::gated_mlp::ln_core_b");
      f.ln_gw = impl::upload<ExecSpace>(mlp.ln_gate.gamma, "fastmlip::gated_mlp::ln_gate_w");
      f.ln_gb = impl::upload<ExecSpace>(mlp.ln_gate.beta, "fastmlip::gated_mlp::ln_gate_b");
    }
  }

  DensePath path() const { return m_path; }
  int in() const { return m_host.in; }
  int out() const { return m_host.out; }
  int width2() const { return m_host.width2; }
  int segments() const { return static_cast<int>(m_host.seg.size()); }
  int segment_width(int s) const { return m_host.seg.at(s).in; }

  /// proj [rows][width2] = x [rows][segment_width(s)] W_s (no bias).
  void project(int s, const ConstMatrix& x, const Matrix& proj) const {
    check_segment("project", s);
    impl::check_shape(kName, "project", "x", x, x.extent(0), segment_width(s));
    impl::check_shape(kName, "project", "proj", proj, x.extent(0), width2());
    if (m_path == DensePath::rows) {
      m_host.seg[s].compute(x.data(), rows(x), segment_width(s), proj.data(), width2());
    } else {
      impl::launch_dense(m_dense, x, m_host.seg_begin[s], segment_width(s), {}, proj, false);
    }
  }

  /// z1 [rows][width2] = b1 + z [rows][in] W^T.
  void compute_z1(const ConstMatrix& z, const Matrix& z1) const {
    impl::check_shape(kName, "compute_z1", "z", z, z.extent(0), in());
    impl::check_shape(kName, "compute_z1", "z1", z1, z.extent(0), width2());
    if (m_path == DensePath::rows) {
      m_host.compute_z1(z.data(), rows(z), z1.data());
    } else {
      impl::launch_dense(m_dense, z, 0, in(), m_f.b1, z1, false);
    }
  }

  /// z1 [rows][width2] = b1 + x [rows][segment_width(s)] W_s: the first layer with only segment
  /// s given as whole rows; the caller adds the other segments' projections.
  void compute_z1_from_segment(int s, const ConstMatrix& x, const Matrix& z1) const {
    check_segment("compute_z1_from_segment", s);
    impl::check_shape(kName, "compute_z1_from_segment", "x", x, x.extent(0), segment_width(s));
    impl::check_shape(kName, "compute_z1_from_segment", "z1", z1, x.extent(0), width2());
    if (m_path == DensePath::rows) {
      // The bias first, then the product added: the order of the host model's tiles.
      for (int t = 0; t < rows(x); ++t) {
        std::copy(m_host.b1.begin(), m_host.b1.end(), z1.data() + static_cast<std::size_t>(t) * width2());
      }
      m_host.seg[s].compute(x.data(), rows(x), segment_width(s), z1.data(), width2(), true);
    } else {
      impl::launch_dense(m_dense, x, m_host.seg_begin[s], segment_width(s), m_f.b1, z1, false);
    }
  }

  /// Activations compute_from_z1 may keep for reverse_to_z1 on the `rows` path, so that the
  /// reverse skips recomputing the forward: kept_size(rows) values (0 on `teams`, whose
  /// reverse recomputes each row in team scratch). An empty Kept keeps nothing.
  using Kept = Kokkos::View<T*, ExecSpace>;
  std::size_t kept_size(std::size_t rows) const {
    if (m_path != DensePath::rows) {
      return 0;
    }
    const std::size_t tiles = (rows + GatedMlp<T>::kTile - 1) / GatedMlp<T>::kTile;
    return tiles * m_host.kept_size();
  }

  /// y [rows][out] = GMLP from the first-layer outputs z1 [rows][width2]; with `kept`
  /// (kept_size(rows) values) also keeps the activations there for reverse_to_z1.
  void compute_from_z1(const ConstMatrix& z1, const Matrix& y, const Kept& kept = Kept()) const {
    impl::check_shape(kName, "compute_from_z1", "z1", z1, z1.extent(0), width2());
    impl::check_shape(kName, "compute_from_z1", "y", y, z1.extent(0), out());
    if (m_path == DensePath::rows) {
      host_tiles(z1, kept, "compute_from_z1",
                 [&](int r0, int n, typename GatedMlp<T>::Acts& a, bool from_kept) {
                   T* dst = y.data() + static_cast<std::size_t>(r0) * out();
                   if (!from_kept) {
                     m_host.compute_from_z1(n, a, dst, m_work);
                     return;
                   }
                   // Kept: y goes where the reverse reads it, then to the caller.
                   m_host.compute_from_z1(n, a, a.y, m_work);
                   std::copy_n(a.y, static_cast<std::size_t>(n) * out(), dst);
                 });
    } else {
      rows_by_teams<typename Functor::TagForward>("fastmlip::gated_mlp::forward", z1, z1, y);
    }
  }

  /// ga [rows][width2] = dL/dz1 from gy = dL/dy [rows][out], for the rows whose first-layer
  /// outputs are z1. With `y` [rows][out] also writes the forward's y there (a caller whose
  /// weights multiply y needs it again). With `kept`, compute_from_z1's kept activations of
  /// the same z1 are read instead of recomputing them.
  void reverse_to_z1(const ConstMatrix& z1, const ConstMatrix& gy, const Matrix& ga,
                     const Matrix& y = Matrix(), const Kept& kept = Kept()) const {
    impl::check_shape(kName, "reverse_to_z1", "z1", z1, z1.extent(0), width2());
    impl::check_shape(kName, "reverse_to_z1", "gy", gy, z1.extent(0), out());
    impl::check_shape(kName, "reverse_to_z1", "ga", ga, z1.extent(0), width2());
    const bool want_y = y.data() != nullptr;
    if (want_y) {
      impl::check_shape(kName, "reverse_to_z1", "y", y, z1.extent(0), out());
    }
    if (m_path == DensePath::rows) {
      host_tiles(z1, kept, "reverse_to_z1",
                 [&](int r0, int n, typename GatedMlp<T>::Acts& a, bool from_kept) {
                   if (!from_kept) {
                     m_host.compute_from_z1(n, a, a.y, m_work);
                   }
                   m_host.reverse_to_z1(gy.data() + static_cast<std::size_t>(r0) * out(), n, a, m_work);
                   std::copy_n(m_work.ga.data(), static_cast<std::size_t>(n) * width2(),
                               ga.data() + static_cast<std::size_t>(r0) * width2());
                   if (want_y) {
                     std::copy_n(a.y, static_cast<std::size_t>(n) * out(),
                                 y.data() + static_cast<std::size_t>(r0) * out());
                   }
                 });
    } else {
      Functor f = m_f;
      f.y = y;
      rows_by_teams<typename Functor::TagReverse>("fastmlip::gated_mlp::reverse", z1, gy, ga, f);
    }
  }

  /// gx [rows][segment_width(s)] = ga W_s, or += with `accumulate`.
  void reverse_segment(int s, const ConstMatrix& ga, const Matrix& gx, bool accumulate) const {
    check_segment("reverse_segment", s);
    impl::check_shape(kName, "reverse_segment", "ga", ga, ga.extent(0), width2());
    impl::check_shape(kName, "reverse_segment", "gx", gx, ga.extent(0), segment_width(s));
    if (m_path == DensePath::rows) {
      m_host.seg[s].reverse(ga.data(), rows(ga), width2(), gx.data(), segment_width(s), accumulate);
    } else {
      impl::launch_dense_reverse(m_dense, ga, m_host.seg_begin[s], segment_width(s), gx, accumulate);
    }
  }

  /// gz [rows][in] = ga W.
  void reverse_input(const ConstMatrix& ga, const Matrix& gz) const {
    impl::check_shape(kName, "reverse_input", "ga", ga, ga.extent(0), width2());
    impl::check_shape(kName, "reverse_input", "gz", gz, ga.extent(0), in());
    if (m_path == DensePath::rows) {
      for (int s = 0; s < segments(); ++s) {
        m_host.seg[s].reverse(ga.data(), rows(ga), width2(), gz.data() + m_host.seg_begin[s], in(), false);
      }
    } else {
      impl::launch_dense_reverse(m_dense, ga, 0, in(), gz, false);
    }
  }

  /// y [rows][out] = GMLP(z [rows][in]).
  void compute(const ConstMatrix& z, const Matrix& y) const {
    const Matrix z1 = grow(m_z1, z.extent(0));
    compute_z1(z, z1);
    compute_from_z1(z1, y);
  }
  /// gz [rows][in] = dL/dz from gy = dL/dy, recomputing the forward.
  void reverse(const ConstMatrix& z, const ConstMatrix& gy, const Matrix& gz) const {
    const Matrix z1 = grow(m_z1, z.extent(0)), ga = grow(m_ga, z.extent(0));
    compute_z1(z, z1);
    reverse_to_z1(z1, gy, ga);
    reverse_input(ga, gz);
  }

 private:
  static constexpr const char* kName = "GatedMlpKokkos";

  static int rows(const ConstMatrix& m) { return static_cast<int>(m.extent(0)); }
  void check_segment(const char* fn, int s) const {
    if (s < 0 || s >= segments()) {
      throw InputError(std::string(kName) + "::" + fn + ": segment " + std::to_string(s) + " of " +
                       std::to_string(segments()));
    }
  }
  // A work view of at least `n` rows (grown, never shrunk), as its first n rows.
  Matrix grow(Matrix& v, std::size_t n) const {
    if (v.extent(0) < n || v.extent(1) != static_cast<std::size_t>(width2())) {  // never allocated: 0 x 0
      v = Matrix(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::gated_mlp::work"), n, width2());
    }
    return Kokkos::subview(v, Kokkos::make_pair(std::size_t(0), n), Kokkos::ALL);
  }

  // Host path: each tile of kTile rows through the host kernel, its z1 read in place; the
  // other activations in `kept` (tile by tile) when given, else in one scratch tile.
  template <class F>
  void host_tiles(const ConstMatrix& z1, const Kept& kept, const char* fn, F&& tile) const {
    m_host.size(m_work);
    const bool keep = kept.data() != nullptr;
    if (keep && kept.extent(0) < kept_size(z1.extent(0))) {
      throw InputError(std::string(kName) + "::" + fn + ": kept has " + std::to_string(kept.extent(0)) +
                       " values, expected kept_size(rows) = " + std::to_string(kept_size(z1.extent(0))));
    }
    if (!keep && m_acts.size() < m_host.kept_size()) {
      m_acts.resize(m_host.kept_size());
    }
    for (int r0 = 0; r0 < rows(z1); r0 += GatedMlp<T>::kTile) {
      const int n = std::min(GatedMlp<T>::kTile, rows(z1) - r0);
      T* rest = keep ? kept.data() + static_cast<std::size_t>(r0 / GatedMlp<T>::kTile) * m_host.kept_size()
                     : m_acts.data();
      // The host kernel only reads z1: the caller's rows serve as the tile's.
      typename GatedMlp<T>::Acts a =
          m_host.layout_around(const_cast<T*>(z1.data()) + static_cast<std::size_t>(r0) * width2(), rest);
      tile(r0, n, a, keep);
    }
  }

  template <class Tag>
  void rows_by_teams(const char* label, const ConstMatrix& z1, const ConstMatrix& gy,
                     const Matrix& out_) const {
    rows_by_teams<Tag>(label, z1, gy, out_, m_f);
  }
  template <class Tag>
  void rows_by_teams(const char* label, const ConstMatrix& z1, const ConstMatrix& gy, const Matrix& out_,
                     Functor f) const {
    f.z1 = z1, f.gy = gy, f.ga = out_;
    Kokkos::TeamPolicy<ExecSpace, Tag> policy(static_cast<int>(z1.extent(0)), Kokkos::AUTO);
    f.scratch_level = impl::set_team_scratch(
        policy, Functor::Scratch::shmem_size(Functor::scratch_values(width2(), out())));
    Kokkos::parallel_for(label, policy, f);
  }

  GatedMlp<T> m_host;
  DensePath m_path;
  Functor m_f;
  impl::DenseFunctor<ExecSpace, T> m_dense;  // the first layer, W1, for the products over its columns
  mutable typename GatedMlp<T>::Work m_work;
  mutable std::vector<T> m_acts;
  mutable Matrix m_z1, m_ga;  // compute / reverse's first-layer outputs and their adjoint
};

}  // namespace fastmlip::kernels

// SPDX-License-Identifier: MIT
#pragma once
/// \file CHGNet's blocks whose rows are angles (chgnet_stages.hpp's BondConv and AngleUpdate) on
/// any Kokkos execution space. An angle alpha = (c; a, b) is an ordered pair of distinct short
/// edges out of centre c; both blocks read the input row [b_a, b_b, g_alpha, x_c]:
///
///   BondConv k     H_s       = sum_{alpha = (c; s, b)} GMLP^b_k([...]) * w'_s * w'_b
///                  b^{k+1}_s = b^k_s + O^b_k (H_s + H_{reverse(s)})
///   AngleUpdate k  g^{k+1}   = g^k + GMLP^g_k([b^{k+1}_a, b^{k+1}_b, g^k, x^{k+1}_c])
///
/// with g^0 = W_g F(theta) recomputed per chunk from the angles (never stored). With about ten
/// angles per short bond, angle rows are most of CHGNet's memory, so the blocks let a model hold
/// one array of them, whatever its number of layers: AngleUpdate overwrites g^k with g^{k+1} and
/// its reverse dE/dg^{k+1} with dE/dg^k, chunk by chunk; the last BondConv's reverse may write
/// dE/dg^k over the g^k it reads (gg_first); and a reverse that needs an earlier g^k recomputes
/// it per chunk from g^0 (AngleFeatures). H has a row per
/// slot (chgnet_model.hpp): the caller fills the ghost slots between the two halves of a
/// BondConv (compute_bond_messages, then finish_bond) and adds their adjoints back between the
/// two halves of its reverse (start_bond_reverse, then reverse_bond_messages).
///
/// As the atom convolutions (chgnet_atom_conv.hpp): chunks of angles, the repeated segments
/// projected once per bond or node and gathered per angle, activations kept per layer when the
/// caller asks (keep()), sums over angles atomic on a device. A chunk is the angles of whole
/// centres (plan()), at most the chunk size (the 32-row tile on the host's `rows` path,
/// kDeviceChunk rows on `teams`) unless one centre has more: since an angle's two bonds are
/// short edges of its own centre, a chunk reads the bonds of its centres only, so the
/// projections of those bonds, and the adjoints summed onto them in a reverse, are per chunk
/// too. Nothing but g's rows scales with the angles, and no projection with the whole graph.
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/dense.hpp"
#include "kernels/dense_kokkos.hpp"
#include "kernels/gated_mlp.hpp"
#include "kernels/gated_mlp_kokkos.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "models/chgnet/chgnet_chunks.hpp"

namespace fastmlip::models::chgnet {

namespace impl {

/// The element-wise steps of a chunk of angles a0 .. a0 + rows - 1 (row t is angle a0 + t).
template <class ExecSpace, class T>
struct AngleBlocksFunctor {
  struct TagMessage {};      // y(t, :) *= w(a, :) w(b, :)
  struct TagMessageGrad {};  // gy(t, :) = gH(a, :) w(a, :) w(b, :)
  struct TagWeightGrad {};   // gw(a, :) += gH(a) y w(b); gw(b, :) += gH(a) y w(a)
  struct TagPairSum {};      // sum(s, :) = H(s, :) + H(reverse(s), :)
  struct TagSelf {};         // gH(s, :) += gsum(s, :)
  struct TagReverse {};      // gH(reverse(s), :) += gsum(s, :)
  struct TagAdd {};          // out(t, :) += in(t, :)
  struct TagResidual {};     // out(t, :) = in(t, :) + in2(t, :); out may be in
  struct TagGradTheta {};    // g_theta(a0 + t) += gt(t)

  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  int a0 = 0;
  bool atomic = false;  // scatters: atomic on `teams`, in angle order on `rows`
  Kokkos::View<const int*, ExecSpace> ang_a, ang_b, reverse;
  ConstMatrix in, in2, w, gh;
  Kokkos::View<const T*, ExecSpace> in_vec;
  Matrix out;
  Kokkos::View<double*, ExecSpace> g_theta;

  KOKKOS_INLINE_FUNCTION void operator()(TagMessage, int t, int j) const {
    const int q = a0 + t;
    out(t, j) = out(t, j) * w(ang_a(q), j) * w(ang_b(q), j);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagMessageGrad, int t, int j) const {
    const int q = a0 + t, a = ang_a(q);
    out(t, j) = gh(a, j) * w(a, j) * w(ang_b(q), j);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagWeightGrad, int t, int j) const {
    const int q = a0 + t, a = ang_a(q), b = ang_b(q);
    const T ga = gh(a, j) * in(t, j) * w(b, j), gb = gh(a, j) * in(t, j) * w(a, j);
    if (atomic) {
      Kokkos::atomic_add(&out(a, j), ga);
      Kokkos::atomic_add(&out(b, j), gb);
    } else {
      out(a, j) += ga;
      out(b, j) += gb;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagPairSum, int s, int j) const {
    out(s, j) = in(s, j) + in(reverse(s), j);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagSelf, int s, int j) const { out(s, j) += in(s, j); }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int s, int j) const { out(reverse(s), j) += in(s, j); }
  KOKKOS_INLINE_FUNCTION void operator()(TagAdd, int t, int j) const { out(t, j) += in(t, j); }
  KOKKOS_INLINE_FUNCTION void operator()(TagResidual, int t, int j) const {
    out(t, j) = in(t, j) + in2(t, j);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagGradTheta, int t) const { g_theta(a0 + t) += in_vec(t); }
};

}  // namespace impl

template <class ExecSpace, class T>
class AngleBlocks : public impl::ChunkedStage<ExecSpace, T> {
  using Base = impl::ChunkedStage<ExecSpace, T>;
  using Base::m_chunk, Base::m_keep, Base::m_rows_path;
  using Functor = impl::AngleBlocksFunctor<ExecSpace, T>;
  using Mlp = kernels::GatedMlpKokkos<ExecSpace, T>;
  using Kept = impl::KeptActivations<ExecSpace, T>;

 public:
  using typename Base::Matrix, typename Base::ConstMatrix, typename Base::ConstInts,
      typename Base::ConstReals, typename Base::Doubles;

  /// What the blocks read of the geometry (chgnet_geometry.hpp).
  struct Angles {
    int n_local = 0;
    int num_slots = 0;                    ///< slot rows of H: local and ghost
    ConstInts angle_a, angle_b, angle_c;  ///< [A]: the two short edges (slots) and the centre
    ConstInts angle_start;                ///< [n_local + 1] CSR of the angles by centre
    ConstInts short_start;                ///< [n_local + 1] CSR of the short edges by centre
    ConstInts short_reverse;              ///< [S] the slot of each short edge's reverse bond
    ConstReals theta;                     ///< [A]
    int num_angles() const { return static_cast<int>(angle_a.extent(0)); }
    int num_short() const { return static_cast<int>(short_reverse.extent(0)); }
  };

  /// Where a reverse finds g^k (k > 0) to recompute its first layer: the rows `held` [A][Fg],
  /// or, with `held` empty, chunk by chunk from g^0 through AngleUpdates 0 .. k-1, which read
  /// b_next[j] = b^{j+1} and x_next[j] = x^{j+1}: a model that holds one array of angle rows
  /// has it hold dE/dg in its reverse. Unused for k = 0 (g^0 comes from theta) and where the
  /// activations were kept.
  struct AngleFeatures {
    ConstMatrix held;
    std::vector<ConstMatrix> b_next, x_next;
  };

  /// `fourier` and `angle_embedding` (W_g, n_angular -> Fg, no bias) make g^0; per BondConv k
  /// its gated MLP (segments Fb, Fb, Fg, Fa; Fb out) and output linear O^b_k (Fb -> Fb); per
  /// AngleUpdate k (one fewer: the last BondConv's is never read) its gated MLP (Fg out).
  AngleBlocks(const kernels::FourierParams& fourier, const kernels::Dense<T>& angle_embedding,
              const std::vector<kernels::GatedMlp<T>>& bond_gmlp,
              const std::vector<kernels::Dense<T>>& bond_out,
              const std::vector<kernels::GatedMlp<T>>& angle_gmlp,
              kernels::DensePath path = kernels::DensePath::automatic)
      : Base("chgnet::AngleBlocks", path), m_fourier(fourier), m_embed(angle_embedding, path) {
    m_fg = angle_embedding.out;
    if (bond_gmlp.size() != bond_out.size() ||
        angle_gmlp.size() + 1 != std::max<std::size_t>(bond_gmlp.size(), 1)) {
      throw InputError("chgnet::AngleBlocks: " + std::to_string(bond_gmlp.size()) + " bond gated MLPs, " +
                       std::to_string(bond_out.size()) + " output linears and " +
                       std::to_string(angle_gmlp.size()) +
                       " angle gated MLPs: one output linear per bond MLP and one angle MLP fewer");
    }
    for (std::size_t k = 0; k < bond_gmlp.size(); ++k) {
      m_bond.emplace_back(bond_gmlp[k], path);
      m_out.emplace_back(bond_out[k], path);
    }
    for (const auto& g : angle_gmlp) {
      m_angle.emplace_back(g, path);
    }
    if (!m_bond.empty()) {
      m_fb = m_bond[0].out();
      m_fa = m_bond[0].segment_width(3);
    }
    auto check_mlp = [&](const Mlp& m, const char* what, std::size_t k, int out) {
      if (m.segments() != 4 || m.segment_width(0) != m_fb || m.segment_width(1) != m_fb ||
          m.segment_width(2) != m_fg || m.segment_width(3) != m_fa || m.out() != out) {
        throw InputError(std::string("chgnet::AngleBlocks: ") + what + " " + std::to_string(k) +
                         "'s gated MLP must read [b_a, b_b, g, x_c] (" + std::to_string(m_fb) + ", " +
                         std::to_string(m_fb) + ", " + std::to_string(m_fg) + ", " + std::to_string(m_fa) +
                         ") and write " + std::to_string(out) + " values");
      }
    };
    for (std::size_t k = 0; k < m_bond.size(); ++k) {
      check_mlp(m_bond[k], "bond_conv", k, m_fb);
      if (m_out[k].in() != m_fb || m_out[k].out() != m_fb) {
        throw InputError("chgnet::AngleBlocks: bond_conv " + std::to_string(k) + "'s output linear must be " +
                         std::to_string(m_fb) + " -> " + std::to_string(m_fb));
      }
    }
    for (std::size_t k = 0; k < m_angle.size(); ++k) {
      check_mlp(m_angle[k], "angle_update", k, m_fg);
    }
    m_kept_bond.resize(m_bond.size());
    m_kept_angle.resize(m_angle.size());
  }

  int bond_layers() const { return static_cast<int>(m_bond.size()); }
  int angle_layers() const { return static_cast<int>(m_angle.size()); }
  /// The chunks of a graph's angles: call once per graph, before its first block (the model
  /// does, after its geometry stage). Reads angle_start and short_start on the host.
  void plan(const Angles& an) {
    const auto host = [](const ConstInts& v, const char* what, int n) {
      if (v.extent(0) != static_cast<std::size_t>(n)) {
        throw InputError(std::string("chgnet::AngleBlocks::plan: ") + what + " has " +
                         std::to_string(v.extent(0)) +
                         " entries, expected n_local + 1 = " + std::to_string(n));
      }
      std::vector<int> out(n);
      Kokkos::deep_copy(Kokkos::View<int*, Kokkos::HostSpace>(out.data(), out.size()), v);
      return out;
    };
    const auto angle_start = host(an.angle_start, "angle_start", an.n_local + 1);
    const auto short_start = host(an.short_start, "short_start", an.n_local + 1);
    if (angle_start.back() != an.num_angles() || short_start.back() != an.num_short()) {
      throw InputError("chgnet::AngleBlocks::plan: angle_start and short_start end at " +
                       std::to_string(angle_start.back()) + " and " + std::to_string(short_start.back()) +
                       ", not at the " + std::to_string(an.num_angles()) + " angles and " +
                       std::to_string(an.num_short()) + " short edges");
    }
    m_spans.clear();
    m_planned = {an.n_local, an.num_angles(), an.num_short()};
    for (int c0 = 0; c0 < an.n_local;) {
      // Whole centres while they fit (always the first), then one chunk of them.
      int c1 = c0 + 1;
      while (c1 < an.n_local && angle_start[c1 + 1] - angle_start[c0] <= m_chunk) {
        ++c1;
      }
      if (angle_start[c1] > angle_start[c0]) {
        m_spans.push_back({angle_start[c0], angle_start[c1], c0, c1, short_start[c0], short_start[c1]});
      }
      c0 = c1;
    }
  }

  /// Whether the forward keeps each layer's activations for the reverse (as AtomConv::keep).
  /// Kept, the reverse reads no angle features: it passes empty views for g_k.
  bool keeps() const { return m_keep; }
  void keep(bool on) {
    m_keep = on;
    if (!on) {
      std::fill(m_kept_bond.begin(), m_kept_bond.end(), Kept());
      std::fill(m_kept_angle.begin(), m_kept_angle.end(), Kept());
    }
  }

  // ---- BondConv k ---------------------------------------------------------------------------

  /// H [num_slots][Fb]: the local slots' half updates, ghost slots zero. b [S][Fb] = b^k, g_k
  /// [A][Fg] = g^k (ignored for k = 0: g^0 comes from theta), x [>= n_local][Fa] = x^{k+1}, w
  /// [S][Fb] = w'.
  void compute_bond_messages(int k, const Angles& an, const ConstMatrix& b, const ConstMatrix& g_k,
                             const ConstMatrix& x, const ConstMatrix& w, const Matrix& H) {
    check(m_bond, "bond_conv", k, an, b, x);
    const Mlp& m = m_bond[k];
    Kokkos::deep_copy(H, T(0));
    if (m_keep) {
      m_kept_bond[k].resize(m, an.num_angles(), kept_values(m));
    }
    std::size_t kept0 = 0;
    for (const Span& sp : m_spans) {
      const int a0 = sp.a0, rows = sp.rows();
      project(m, sp, b, x);
      const Matrix z1 = m_keep ? m_kept_bond[k].z1_rows(a0, rows) : m_z1.get(rows, m.width2());
      first_layer(m, an, angle_rows(k, an, AngleFeatures{g_k, {}, {}}, sp), sp, z1);
      const Matrix y = m_y.get(rows, m_fb);
      m.compute_from_z1(z1, y, kept_tiles(m, m_kept_bond[k], kept0, rows));
      Functor f = base(an, a0);
      f.w = w, f.out = y;
      this->template each<typename Functor::TagMessage>("fastmlip::chgnet::bond_conv_message", rows, m_fb, f);
      impl::scatter_added<ExecSpace, T>(m_rows_path, y, an.angle_a, a0, H);
    }
  }

  /// b_next [S][Fb] = b + O^b_k (H_s + H_reverse(s)), H's ghost slots filled.
  void finish_bond(int k, const Angles& an, const ConstMatrix& H, const ConstMatrix& b,
                   const Matrix& b_next) {
    const int S = an.num_short();
    const Matrix sum = m_sum.get(S, m_fb);
    Functor f = base(an, 0);
    f.in = H, f.out = sum;
    this->template each<typename Functor::TagPairSum>("fastmlip::chgnet::bond_conv_pair_sum", S, m_fb, f);
    m_out[k].compute(sum, b_next);
    f.in = b, f.out = b_next;
    this->template each<typename Functor::TagAdd>("fastmlip::chgnet::bond_conv_residual", S, m_fb, f);
  }

  /// The reverse's first half: gb [S][Fb] += gb_next (the residual) and gH [num_slots][Fb] =
  /// dE/dH from gb_next = dE/db^{k+1}; the caller then adds the ghost slots' rows to their
  /// owners.
  void start_bond_reverse(int k, const Angles& an, const ConstMatrix& gb_next, const Matrix& gb,
                          const Matrix& gH) {
    const int S = an.num_short();
    Functor f = base(an, 0);
    f.in = gb_next, f.out = gb;
    this->template each<typename Functor::TagAdd>("fastmlip::chgnet::bond_conv_residual_grad", S, m_fb, f);
    const Matrix gsum = m_sum.get(S, m_fb);
    m_out[k].reverse(gb_next, gsum);
    Kokkos::deep_copy(gH, T(0));
    // A slot's row gets at most two terms, its own and its reverse bond's: the order of two
    // additions to zero does not change the sum, so two race-free passes give the host loop's bits.
    f.in = gsum, f.out = gH;
    this->template each<typename Functor::TagSelf>("fastmlip::chgnet::bond_conv_grad_self", S, m_fb, f);
    this->template each<typename Functor::TagReverse>("fastmlip::chgnet::bond_conv_grad_reverse", S, m_fb, f);
  }

  /// The reverse's second half, from gH (ghost adjoints added to their owners): adds dE/db^k
  /// into gb [S][Fb], dE/dg^k into gg [A][Fg] (k > 0) or dE/dtheta into g_theta [A] (k = 0),
  /// dE/dx^{k+1} into gx's local rows and dE/dw' into gw [S][Fb]. With `gg_first`, dE/dg^k is
  /// written over gg instead: the first block to reach it, gg may be g_k.held's own storage (a
  /// chunk's rows of g^k are read before its rows of dE/dg^k are written). b, x, w as in
  /// compute_bond_messages.
  void reverse_bond_messages(int k, const Angles& an, const ConstMatrix& b, const AngleFeatures& g_k,
                             const ConstMatrix& x, const ConstMatrix& w, const ConstMatrix& gH,
                             const Matrix& gb, const Matrix& gg, bool gg_first, const Doubles& g_theta,
                             const Matrix& gx, const Matrix& gw) {
    check(m_bond, "bond_conv", k, an, b, x);
    const Mlp& m = m_bond[k];
    std::size_t kept0 = 0;
    for (const Span& sp : m_spans) {
      const int a0 = sp.a0, rows = sp.rows();
      start_adjoints(m, sp);
      const Matrix z1 = chunk_z1(m, m_kept_bond[k], k, an, b, g_k, x, sp);
      const Matrix gy = m_gy.get(rows, m_fb), y = m_y.get(rows, m_fb), ga = m_ga.get(rows, m.width2());
      Functor f = base(an, a0);
      f.gh = gH, f.w = w, f.out = gy;
      this->template each<typename Functor::TagMessageGrad>("fastmlip::chgnet::bond_conv_grad_y", rows, m_fb,
                                                            f);
      m.reverse_to_z1(z1, gy, ga, y, kept_tiles(m, m_kept_bond[k], kept0, rows));
      f.in = y, f.out = gw;
      this->template each<typename Functor::TagWeightGrad>("fastmlip::chgnet::bond_conv_grad_w", rows, m_fb,
                                                           f);
      reverse_first_layer(m, k, an, ga, sp, gg, gg_first, g_theta);
      finish_adjoints(m, sp, gb, gx);
    }
  }

  // ---- AngleUpdate k ------------------------------------------------------------------------

  /// g [A][Fg]: g^k on entry (ignored for k = 0: g^0 comes from theta), g^{k+1} on exit, from
  /// b_next [S][Fb] = b^{k+1} and x = x^{k+1}. In place, chunk by chunk: a chunk's g^k is read
  /// (into the first layer and the residual) before its g^{k+1} is written.
  void compute_angle(int k, const Angles& an, const ConstMatrix& b_next, const ConstMatrix& x,
                     const Matrix& g) {
    check(m_angle, "angle_update", k, an, b_next, x);
    check_angle_rows(an, g);
    const Mlp& m = m_angle[k];
    if (m_keep) {
      m_kept_angle[k].resize(m, an.num_angles(), kept_values(m));
    }
    std::size_t kept0 = 0;
    for (const Span& sp : m_spans) {
      const int a0 = sp.a0, rows = sp.rows();
      project(m, sp, b_next, x);
      const Matrix z1 = m_keep ? m_kept_angle[k].z1_rows(a0, rows) : m_z1.get(rows, m.width2());
      const ConstMatrix gk = angle_rows(k, an, AngleFeatures{g, {}, {}}, sp);
      first_layer(m, an, gk, sp, z1);
      const Matrix y = m_y.get(rows, m_fg);
      m.compute_from_z1(z1, y, kept_tiles(m, m_kept_angle[k], kept0, rows));
      Functor f = base(an, a0);
      f.in = gk, f.in2 = y, f.out = Kokkos::subview(g, Kokkos::make_pair(a0, a0 + rows), Kokkos::ALL);
      this->template each<typename Functor::TagResidual>("fastmlip::chgnet::angle_update_residual", rows,
                                                         m_fg, f);
    }
  }

  /// The reverse of compute_angle. gg [A][Fg] holds dE/dg^{k+1} on entry; for k > 0 it holds
  /// this block's part of dE/dg^k on exit (the residual's is dE/dg^{k+1} itself, so in place it
  /// is no work; chunk by chunk, a chunk's rows are read before they are added to), and the
  /// BondConv k that reads g^k adds its part next. For k = 0, dE/dg^0 goes into g_theta instead
  /// and gg is only read. Adds dE/db^{k+1} into gb_next and dE/dx^{k+1} into gx's local rows.
  /// g_k: where g^k is (AngleFeatures).
  void reverse_angle(int k, const Angles& an, const ConstMatrix& b_next, const AngleFeatures& g_k,
                     const ConstMatrix& x, const Matrix& gg, const Matrix& gb_next, const Doubles& g_theta,
                     const Matrix& gx) {
    check(m_angle, "angle_update", k, an, b_next, x);
    check_angle_rows(an, gg);
    const Mlp& m = m_angle[k];
    std::size_t kept0 = 0;
    for (const Span& sp : m_spans) {
      const int a0 = sp.a0, rows = sp.rows();
      start_adjoints(m, sp);
      const ConstMatrix gn = Kokkos::subview(gg, Kokkos::make_pair(a0, a0 + rows), Kokkos::ALL);
      if (k == 0) {
        add_angle_adjoint(k, an, gn, a0, gg, g_theta);  // the residual g^1 = g^0 + ...
      }
      const Matrix z1 = chunk_z1(m, m_kept_angle[k], k, an, b_next, g_k, x, sp);
      const Matrix ga = m_ga.get(rows, m.width2());
      m.reverse_to_z1(z1, gn, ga, Matrix(), kept_tiles(m, m_kept_angle[k], kept0, rows));
      reverse_first_layer(m, k, an, ga, sp, gg, false, g_theta);  // gn read: its rows may take dE/dg^k
      finish_adjoints(m, sp, gb_next, gx);
    }
  }

 private:
  /// A chunk (plan()): angles a0 .. a1 - 1 of centres c0 .. c1 - 1, whose short edges are
  /// s0 .. s1 - 1.
  struct Span {
    int a0, a1, c0, c1, s0, s1;
    int rows() const { return a1 - a0; }
  };

  void check(const std::vector<Mlp>& set, const char* what, int k, const Angles& an, const ConstMatrix& b,
             const ConstMatrix& x) const {
    if (k < 0 || k >= static_cast<int>(set.size())) {
      throw InputError(std::string("chgnet::AngleBlocks: ") + what + " layer " + std::to_string(k) + " of " +
                       std::to_string(set.size()));
    }
    if (b.extent(0) != static_cast<std::size_t>(an.num_short()) ||
        b.extent(1) != static_cast<std::size_t>(m_fb) || x.extent(0) < static_cast<std::size_t>(an.n_local) ||
        x.extent(1) != static_cast<std::size_t>(m_fa)) {
      throw InputError(std::string("chgnet::AngleBlocks: ") + what + " needs b [" +
                       std::to_string(an.num_short()) + "][" + std::to_string(m_fb) +
                       "] and x [>= " + std::to_string(an.n_local) + "][" + std::to_string(m_fa) + "]");
    }
    if (m_planned != std::array<int, 3>{an.n_local, an.num_angles(), an.num_short()}) {
      throw InputError(std::string("chgnet::AngleBlocks: ") + what + " on a graph of " +
                       std::to_string(an.n_local) + " centres, " + std::to_string(an.num_angles()) +
                       " angles and " + std::to_string(an.num_short()) +
                       " short edges that plan() has not seen: call plan() once per graph first");
    }
  }

  void check_angle_rows(const Angles& an, const ConstMatrix& rows) const {
    if (rows.extent(0) != static_cast<std::size_t>(an.num_angles()) ||
        rows.extent(1) != static_cast<std::size_t>(m_fg)) {
      throw InputError("chgnet::AngleBlocks: angle_update needs angle rows [" +
                       std::to_string(an.num_angles()) + "][" + std::to_string(m_fg) + "]");
    }
  }

  Functor base(const Angles& an, int a0) const {
    Functor f;
    f.a0 = a0;
    f.atomic = !m_rows_path;
    f.ang_a = an.angle_a, f.ang_b = an.angle_b, f.reverse = an.short_reverse;
    return f;
  }
  /// The chunk's repeated segments projected: p0 = b W_a, p1 = b W_b (its short edges), p2 =
  /// x W_c (its centres).
  void project(const Mlp& m, const Span& sp, const ConstMatrix& b, const ConstMatrix& x) {
    const int W2 = m.width2();
    m_p0 = m_proj0.get(sp.s1 - sp.s0, W2);
    m_p1 = m_proj1.get(sp.s1 - sp.s0, W2);
    m_p2 = m_proj2.get(sp.c1 - sp.c0, W2);
    const ConstMatrix bs = Kokkos::subview(b, Kokkos::make_pair(sp.s0, sp.s1), Kokkos::ALL);
    m.project(0, bs, m_p0);
    m.project(1, bs, m_p1);
    m.project(3, Kokkos::subview(x, Kokkos::make_pair(sp.c0, sp.c1), Kokkos::ALL), m_p2);
  }
  /// Values of kept activations a layer takes: each chunk's from a tile boundary.
  std::size_t kept_values(const Mlp& m) const {
    std::size_t n = 0;
    for (const Span& sp : m_spans) {
      n += m.kept_size(static_cast<std::size_t>(sp.rows()));
    }
    return n;
  }
  /// The next chunk's kept activations (none unless keeping), advancing `first` past them.
  typename Mlp::Kept kept_tiles(const Mlp& m, const Kept& kept, std::size_t& first, int rows) const {
    if (!m_keep) {
      return typename Mlp::Kept();
    }
    const auto t = kept.tiles_at(first, m, rows);
    first += m.kept_size(static_cast<std::size_t>(rows));
    return t;
  }

  /// Angle rows g^k of the chunk: W_g F(theta) for k = 0; for k > 0 held, or recomputed from
  /// g^0 through the AngleUpdates before k, each as compute_angle runs it (the same bits). The
  /// recomputation leaves the projections and the z1 and y scratch to the caller's next use.
  ConstMatrix angle_rows(int k, const Angles& an, const AngleFeatures& g_k, const Span& sp) {
    const int a0 = sp.a0, rows = sp.rows();
    if (k > 0 && g_k.held.data() != nullptr) {
      return Kokkos::subview(g_k.held, Kokkos::make_pair(a0, a0 + rows), Kokkos::ALL);
    }
    const Matrix basis = m_basis.get(rows, m_fourier.width()), g0 = m_g0.get(rows, m_fg);
    m_fourier.compute(Kokkos::subview(an.theta, Kokkos::make_pair(a0, a0 + rows)), basis);
    m_embed.compute(basis, g0);
    if (k == 0) {
      return g0;
    }
    if (g_k.b_next.size() < static_cast<std::size_t>(k) || g_k.x_next.size() < static_cast<std::size_t>(k) ||
        k > angle_layers()) {
      throw InputError("chgnet::AngleBlocks: g^" + std::to_string(k) + " is neither held nor recomputable: " +
                       std::to_string(g_k.b_next.size()) + " bond and " + std::to_string(g_k.x_next.size()) +
                       " atom feature levels given for " + std::to_string(angle_layers()) + " AngleUpdates");
    }
    const Matrix g = m_chain.get(rows, m_fg);
    for (int j = 0; j < k; ++j) {
      const Mlp& m = m_angle[j];
      project(m, sp, g_k.b_next[j], g_k.x_next[j]);
      const ConstMatrix prev = j == 0 ? ConstMatrix(g0) : ConstMatrix(g);
      const Matrix z1 = m_z1.get(rows, m.width2()), y = m_y.get(rows, m_fg);
      first_layer(m, an, prev, sp, z1);
      m.compute_from_z1(z1, y, typename Mlp::Kept());
      Functor f = base(an, a0);
      f.in = prev, f.in2 = y, f.out = g;
      this->template each<typename Functor::TagResidual>("fastmlip::chgnet::angle_recompute_residual", rows,
                                                         m_fg, f);
    }
    return g;
  }

  /// z1 = b1 + g W_g + p0(a) + p1(b) + p2(c), the order of the host tiles.
  void first_layer(const Mlp& m, const Angles& an, const ConstMatrix& gk, const Span& sp,
                   const Matrix& z1) const {
    m.compute_z1_from_segment(2, gk, z1);
    impl::add_gathered<ExecSpace, T>(m_rows_path, z1, m_p0, an.angle_a, sp.a0, sp.s0);
    impl::add_gathered<ExecSpace, T>(m_rows_path, z1, m_p1, an.angle_b, sp.a0, sp.s0);
    impl::add_gathered<ExecSpace, T>(m_rows_path, z1, m_p2, an.angle_c, sp.a0, sp.c0);
  }
  /// The chunk's first-layer outputs for a reverse: kept, or recomputed from b, g_k and x.
  Matrix chunk_z1(const Mlp& m, const Kept& kept, int k, const Angles& an, const ConstMatrix& b,
                  const AngleFeatures& g_k, const ConstMatrix& x, const Span& sp) {
    if (m_keep) {
      return kept.z1_rows(sp.a0, sp.rows());
    }
    const ConstMatrix gk = angle_rows(k, an, g_k, sp);  // first: it may use the projections
    project(m, sp, b, x);
    const Matrix z1 = m_z1.get(sp.rows(), m.width2());
    first_layer(m, an, gk, sp, z1);
    return z1;
  }

  /// Adds dE/dg^k of the chunk (`tile`, rows x Fg): into gg for k > 0, through the embedding and
  /// the Fourier basis into g_theta for k = 0.
  void add_angle_adjoint(int k, const Angles& an, const ConstMatrix& tile, int a0, const Matrix& gg,
                         const Doubles& g_theta) {
    const int rows = static_cast<int>(tile.extent(0));
    Functor f = base(an, a0);
    if (k > 0) {
      f.in = tile, f.out = Kokkos::subview(gg, Kokkos::make_pair(a0, a0 + rows), Kokkos::ALL);
      this->template each<typename Functor::TagAdd>("fastmlip::chgnet::angle_grad", rows, m_fg, f);
      return;
    }
    const Matrix gbasis = m_basis.get(rows, m_fourier.width());
    m_embed.reverse(tile, gbasis);
    const auto gt = m_gt.vector(rows);
    m_fourier.reverse(Kokkos::subview(an.theta, Kokkos::make_pair(a0, a0 + rows)), gbasis, gt);
    f.in_vec = gt, f.g_theta = g_theta;
    Kokkos::parallel_for("fastmlip::chgnet::grad_theta",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagGradTheta>(0, rows), f);
  }

  /// The adjoints of the chunk's first layer: the angle rows' (add_angle_adjoint, or written
  /// over gg's rows with gg_first), the repeated segments' into the accumulators.
  void reverse_first_layer(const Mlp& m, int k, const Angles& an, const Matrix& ga, const Span& sp,
                           const Matrix& gg, bool gg_first, const Doubles& g_theta) {
    if (k > 0 && gg_first) {
      m.reverse_segment(2, ga, Kokkos::subview(gg, Kokkos::make_pair(sp.a0, sp.a1), Kokkos::ALL), false);
    } else {
      const Matrix gtile = m_gtile.get(static_cast<int>(ga.extent(0)), m_fg);
      m.reverse_segment(2, ga, gtile, false);
      add_angle_adjoint(k, an, gtile, sp.a0, gg, g_theta);
    }
    impl::scatter_added<ExecSpace, T>(m_rows_path, ga, an.angle_a, sp.a0, m_g0_acc, sp.s0);
    impl::scatter_added<ExecSpace, T>(m_rows_path, ga, an.angle_b, sp.a0, m_g1_acc, sp.s0);
    impl::scatter_added<ExecSpace, T>(m_rows_path, ga, an.angle_c, sp.a0, m_g2_acc, sp.c0);
  }
  /// The chunk's sums of first-layer adjoints by short edge and by centre, zero. Every angle of
  /// a short edge or a centre is in its chunk, so each sum is complete at the chunk's end.
  void start_adjoints(const Mlp& m, const Span& sp) {
    m_g0_acc = m_acc0.get(sp.s1 - sp.s0, m.width2());
    m_g1_acc = m_acc1.get(sp.s1 - sp.s0, m.width2());
    m_g2_acc = m_acc2.get(sp.c1 - sp.c0, m.width2());
    Kokkos::deep_copy(m_g0_acc, T(0));
    Kokkos::deep_copy(m_g1_acc, T(0));
    Kokkos::deep_copy(m_g2_acc, T(0));
  }
  /// ... through the repeated segments' weights into the chunk's rows of gb and gx.
  void finish_adjoints(const Mlp& m, const Span& sp, const Matrix& gb, const Matrix& gx) const {
    const Matrix gbs = Kokkos::subview(gb, Kokkos::make_pair(sp.s0, sp.s1), Kokkos::ALL);
    m.reverse_segment(0, m_g0_acc, gbs, true);
    m.reverse_segment(1, m_g1_acc, gbs, true);
    m.reverse_segment(3, m_g2_acc, Kokkos::subview(gx, Kokkos::make_pair(sp.c0, sp.c1), Kokkos::ALL), true);
  }

  kernels::FourierKokkos<ExecSpace, T> m_fourier;
  kernels::DenseKokkos<ExecSpace, T> m_embed;
  std::vector<Mlp> m_bond, m_angle;
  std::vector<kernels::DenseKokkos<ExecSpace, T>> m_out;
  int m_fa = 0, m_fb = 0, m_fg = 0;
  std::vector<Kept> m_kept_bond, m_kept_angle;
  std::vector<Span> m_spans;
  std::array<int, 3> m_planned{-1, -1, -1};  // n_local, angles and short edges plan() saw
  // Per-step working storage, grown, never shrunk.
  using Buffer = kernels::impl::GrowBuffer<T, ExecSpace>;
  Buffer m_proj0{"fastmlip::chgnet::angle_p0"}, m_proj1{"fastmlip::chgnet::angle_p1"},
      m_proj2{"fastmlip::chgnet::angle_p2"}, m_z1{"fastmlip::chgnet::angle_z1"},
      m_y{"fastmlip::chgnet::angle_y"}, m_gy{"fastmlip::chgnet::angle_gy"},
      m_ga{"fastmlip::chgnet::angle_ga"}, m_sum{"fastmlip::chgnet::bond_sum"},
      m_basis{"fastmlip::chgnet::angle_basis"}, m_g0{"fastmlip::chgnet::angle_g0"},
      m_gtile{"fastmlip::chgnet::angle_grad_rows"}, m_gt{"fastmlip::chgnet::angle_grad_theta"},
      m_chain{"fastmlip::chgnet::angle_recomputed_g"}, m_acc0{"fastmlip::chgnet::angle_acc0"},
      m_acc1{"fastmlip::chgnet::angle_acc1"}, m_acc2{"fastmlip::chgnet::angle_acc2"};
  Matrix m_p0, m_p1, m_p2, m_g0_acc, m_g1_acc, m_g2_acc;
};

}  // namespace fastmlip::models::chgnet

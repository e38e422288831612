// SPDX-License-Identifier: MIT
#pragma once
/// \file chgnet's GatedMLP (layers.py), as CHGNet's convolutions run it:
///
///   GMLP(z) = silu(LN_1(core(z))) * sigmoid(LN_2(gate(z)))
///
/// core and gate are [Linear, SiLU, Linear] with a hidden layer, one Linear without (chgnet
/// 0.3.0's angle update); without `norm` (chgnet 0.2.0) there are no LayerNorms. Their first
/// layers are one merged GEMM with outputs [core | gate] (FastCHGNet's merged GatedMLP).
///
/// The input is often a concatenation of rows gathered from nodes, bonds and angles, so the
/// first layer is split by input segment: W z = sum_s W_s z_s. A caller whose segment rows
/// repeat (the centre atom of every edge) projects them once (`project`) and adds the
/// projections per row (rows::add_rows), which cuts CHGNet's first-layer work 3-4 times; the
/// whole-row stages below run every segment as a GEMM.
///
///   compute_gated_mlp   y = GMLP(z)                                 compute, or z1 + compute_from_z1
///   reverse_gated_mlp   gz = (dGMLP/dz)^T gy and the weights' grads  reverse, or reverse_to_z1 + the
///                                                                    first layer's segments
///
/// Tiles of kTile rows keep each tile's activations in cache between the GEMMs. S is float,
/// double or Dual<float / double> (impl/rows_impl.hpp). The naive twin:
/// reference/dense_ref.hpp.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/dense.hpp"
#include "kernels/impl/rows_impl.hpp"
#include "kernels/layer_norm.hpp"

namespace fastmlip::kernels {

/// A gated MLP's weights in torch's layout (chgnet's state_dict), and the layout of their
/// gradients. width = hidden > 0 ? hidden : out.
template <class S>
struct GatedMlpWeights {
  int in = 0, hidden = 0, out = 0;
  bool norm = true;
  std::vector<S> core1_w, core1_b, gate1_w, gate1_b;  ///< [width][in], [width]
  std::vector<S> core2_w, core2_b, gate2_w, gate2_b;  ///< [out][hidden], [out] (hidden > 0 only)
  std::vector<S> ln_core_w, ln_core_b, ln_gate_w, ln_gate_b;  ///< [out] (norm only)

  int width() const { return hidden > 0 ? hidden : out; }
  /// The tensors in one fixed order (the trainer's op passes them in it): core1 w, b, gate1 w,
  /// b, then with a hidden layer core2 w, b, gate2 w, b, then with norm the two LayerNorms'
  /// weight and bias.
  std::vector<std::vector<S>*> parts() { return parts_of(*this); }
  std::vector<const std::vector<S>*> parts() const { return parts_of(*this); }
  /// The shape of each of parts(), as {rows, cols} (cols 0: a vector).
  std::vector<std::pair<int, int>> shapes() const {
    const int w = width();
    std::vector<std::pair<int, int>> s{{w, in}, {w, 0}, {w, in}, {w, 0}};
    if (hidden > 0) s.insert(s.end(), {{out, hidden}, {out, 0}, {out, hidden}, {out, 0}});
    if (norm) s.insert(s.end(), {{out, 0}, {out, 0}, {out, 0}, {out, 0}});
    return s;
  }
  /// Same architecture, every value zero (a gradient accumulator).
  GatedMlpWeights zeros_like() const {
    GatedMlpWeights z;
    z.in = in, z.hidden = hidden, z.out = out, z.norm = norm;
    auto parts_z = z.parts();
    const auto sh = shapes();
    for (std::size_t k = 0; k < parts_z.size(); ++k) {
      parts_z[k]->assign(static_cast<std::size_t>(sh[k].first) * std::max(sh[k].second, 1), S(0));
    }
    return z;
  }
  /// Throws InputError naming `what` and the part whose size does not match the shape.
  void check(const std::string& what) const {
    const auto self = parts();
    const auto sh = shapes();
    for (std::size_t k = 0; k < self.size(); ++k) {
      const std::size_t want = static_cast<std::size_t>(sh[k].first) * std::max(sh[k].second, 1);
      if (self[k]->size() != want) {
        throw InputError(what + ": gated MLP weight part " + std::to_string(k) + " has " +
                         std::to_string(self[k]->size()) + " values, expected " + std::to_string(want));
      }
    }
  }

 private:
  // One list for both constnesses of parts().
  template <class Self>
  static auto parts_of(Self& w) {
    std::vector<decltype(&w.core1_w)> p{&w.core1_w, &w.core1_b, &w.gate1_w, &w.gate1_b};
    if (w.hidden > 0) p.insert(p.end(), {&w.core2_w, &w.core2_b, &w.gate2_w, &w.gate2_b});
    if (w.norm) p.insert(p.end(), {&w.ln_core_w, &w.ln_core_b, &w.ln_gate_w, &w.ln_gate_b});
    return p;
  }
};

/// Rows per tile: a tile's activations stay in cache between the GEMMs.
inline constexpr int kGatedMlpTile = 32;

template <class S>
struct GatedMlp {
  static constexpr int kTile = kGatedMlpTile;
  int in = 0, hidden = 0, out = 0, width2 = 0;  // width2: first-layer outputs, core | gate
  std::vector<int> seg_begin;                    // first input column of each segment
  std::vector<Dense<S>> seg;                     // first layer by input segment, no bias
  std::vector<S> b1;                             // first-layer bias [width2]
  Dense<S> core2, gate2;                         // second layers, when hidden > 0
  bool norm = true;                              // LayerNorm on core and gate (gMLP_norm "layer")
  LayerNorm<S> ln_core, ln_gate;

  GatedMlp() = default;
  /// Merges core and gate's first layers and splits them by input segment (`segments`: the
  /// segments' widths, summing to weights.in; empty: one segment).
  GatedMlp(const GatedMlpWeights<S>& weights, std::vector<int> segments) {
    weights.check("GatedMlp");
    in = weights.in;
    hidden = weights.hidden;
    out = weights.out;
    norm = weights.norm;
    const int width = weights.width();
    if (segments.empty()) segments = {in};
    int total = 0;
    for (int s : segments) total += s;
    if (total != in) {
      throw InputError("GatedMlp: input segments sum to " + std::to_string(total) + ", not the input width " +
                       std::to_string(in));
    }
    width2 = 2 * width;
    b1 = weights.core1_b;
    b1.insert(b1.end(), weights.gate1_b.begin(), weights.gate1_b.end());
    int begin = 0;
    for (int len : segments) {
      std::vector<S> w(static_cast<std::size_t>(width2) * len);
      for (int o = 0; o < width2; ++o) {
        const std::vector<S>& src = o < width ? weights.core1_w : weights.gate1_w;
        const int so = o < width ? o : o - width;
        for (int i = 0; i < len; ++i) {
          w[static_cast<std::size_t>(o) * len + i] = src[static_cast<std::size_t>(so) * in + begin + i];
        }
      }
      seg.emplace_back(len, width2, w.data(), static_cast<const S*>(nullptr));
      seg_begin.push_back(begin);
      begin += len;
    }
    if (hidden > 0) {
      core2 = Dense<S>(hidden, out, weights.core2_w.data(), weights.core2_b.data());
      gate2 = Dense<S>(hidden, out, weights.gate2_w.data(), weights.gate2_b.data());
    }
    if (norm) {
      ln_core = LayerNorm<S>{out, weights.ln_core_w, weights.ln_core_b};
      ln_gate = LayerNorm<S>{out, weights.ln_gate_w, weights.ln_gate_b};
    }
  }

  /// One tile's activations, what the forward computes and the reverse reads: pointers into
  /// one buffer of acts_size() values (layout()), which may be a caller's kept buffer, so that
  /// neither pass copies them. z1, s1 [rows][width2]; c, g, chat, ghat, sc, sg, y [rows][out];
  /// cinv, ginv [rows]. s1 only with a hidden layer, chat, ghat, cinv, ginv only with
  /// LayerNorm (else null).
  struct Acts {
    S *z1, *s1, *c, *g, *chat, *ghat, *cinv, *ginv, *sc, *sg, *y;
  };
  std::size_t acts_size() const {
    const std::size_t r = kTile, f = width2, o = out;
    return r * f + (hidden > 0 ? r * f : 0) + 5 * r * o + (norm ? 2 * r * o + 2 * r : 0);
  }
  Acts layout(S* p) const { return layout_around(p, p + static_cast<std::size_t>(kTile) * width2); }
  /// The values of a tile's activations besides z1: a caller that keeps z1 elsewhere keeps
  /// these (layout_around).
  std::size_t kept_size() const { return acts_size() - static_cast<std::size_t>(kTile) * width2; }
  /// Acts with z1 at `z1` (ld width2) and the rest in kept_size() values at p.
  Acts layout_around(S* z1, S* p) const {
    const std::size_t r = kTile, f = width2, o = out;
    auto take = [&p](std::size_t n) {
      S* q = p;
      p += n;
      return q;
    };
    Acts a{};
    a.z1 = z1;
    a.s1 = hidden > 0 ? take(r * f) : nullptr;
    a.c = take(r * o), a.g = take(r * o), a.sc = take(r * o), a.sg = take(r * o), a.y = take(r * o);
    if (norm) a.chat = take(r * o), a.ghat = take(r * o), a.cinv = take(r), a.ginv = take(r);
    return a;
  }
  /// Per-tile scratch that is never kept. ga = dL/d(first-layer outputs) after reverse_to_z1.
  struct Work {
    std::vector<S> a1, gc, gg, ga;
  };
  void size(Work& w) const {
    const std::size_t r = kTile;
    auto grow = [](std::vector<S>& v, std::size_t n) {
      if (v.size() < n) v.resize(n);
    };
    grow(w.a1, r * width2);
    grow(w.gc, r * out);
    grow(w.gg, r * out);
    grow(w.ga, r * width2);
  }

  /// proj[rows][width2] = rows of `x` (ld = the segment's width) times segment s.
  void project(int s, const S* x, int rows, std::vector<S>& proj) const {
    proj.resize(static_cast<std::size_t>(rows) * width2);
    seg[s].compute(x, rows, seg[s].in, proj.data(), width2);
  }

  /// z1 [rows][width2] = b1 + sum_s z_s W_s for whole input rows z [rows][in].
  void compute_z1(const S* z, int rows, S* z1) const {
    for (int t = 0; t < rows; ++t) std::copy(b1.begin(), b1.end(), z1 + static_cast<std::size_t>(t) * width2);
    for (std::size_t s = 0; s < seg.size(); ++s) {
      seg[s].compute(z + seg_begin[s], rows, in, z1, width2, true);
    }
  }

  /// Finishes the forward pass of `rows` rows (at most kTile) whose first-layer outputs are in
  /// a.z1, into y (ld out; a.y or elsewhere). a keeps what the reverse needs.
  void compute_from_z1(int rows, const Acts& a, S* y, Work& w) const {
    const int f = width2;
    if (hidden > 0) {
      rows::silu_forward(a.z1, a.s1, w.a1.data(), static_cast<std::size_t>(rows) * f);
      core2.compute(w.a1.data(), rows, f, a.c, out);
      gate2.compute(w.a1.data() + hidden, rows, f, a.g, out);
    } else {
      for (int r = 0; r < rows; ++r) {
        std::copy_n(a.z1 + static_cast<std::size_t>(r) * f, out, a.c + static_cast<std::size_t>(r) * out);
        std::copy_n(a.z1 + static_cast<std::size_t>(r) * f + out, out, a.g + static_cast<std::size_t>(r) * out);
      }
    }
    if (norm) {
      ln_core.compute_rows(a.c, a.chat, a.cinv, rows);
      ln_gate.compute_rows(a.g, a.ghat, a.ginv, rows);
    }
    rows::gate_forward(a.c, a.g, a.sc, a.sg, y, static_cast<std::size_t>(rows) * out);
  }

  /// w.ga = dL/d(first-layer outputs) of the rows whose forward is in a, from gy = dL/dy
  /// (ld out). With `gw`, also adds the gradients of the second layers and LayerNorms into it
  /// (the first layer's need the input: see reverse).
  void reverse_to_z1(const S* gy, int rows, const Acts& a, Work& w, GatedMlpWeights<S>* gw = nullptr) const {
    const int f = width2;
    rows::gate_backward(gy, a.c, a.sc, a.sg, w.gc.data(), w.gg.data(), static_cast<std::size_t>(rows) * out);
    if (norm) {
      if (gw != nullptr) {
        ln_core.reverse_weights(w.gc.data(), a.chat, rows, gw->ln_core_w.data(), gw->ln_core_b.data());
        ln_gate.reverse_weights(w.gg.data(), a.ghat, rows, gw->ln_gate_w.data(), gw->ln_gate_b.data());
      }
      ln_core.reverse_rows(w.gc.data(), a.chat, a.cinv, rows);
      ln_gate.reverse_rows(w.gg.data(), a.ghat, a.ginv, rows);
    }
    if (hidden > 0) {
      if (gw != nullptr) {
        // silu(z1) again: the forward's copy is scratch, not kept with the tile.
        for (std::size_t q = 0; q < static_cast<std::size_t>(rows) * f; ++q) w.a1[q] = a.z1[q] * a.s1[q];
        core2.reverse_weights(w.a1.data(), f, w.gc.data(), out, rows, gw->core2_w.data(), gw->core2_b.data());
        gate2.reverse_weights(w.a1.data() + hidden, f, w.gg.data(), out, rows, gw->gate2_w.data(),
                              gw->gate2_b.data());
      }
      core2.reverse(w.gc.data(), rows, out, w.ga.data(), f, false);
      gate2.reverse(w.gg.data(), rows, out, w.ga.data() + hidden, f, false);
      rows::silu_backward(a.z1, a.s1, w.ga.data(), static_cast<std::size_t>(rows) * f);
    } else {
      for (int r = 0; r < rows; ++r) {
        std::copy_n(w.gc.data() + static_cast<std::size_t>(r) * out, out, w.ga.data() + static_cast<std::size_t>(r) * f);
        std::copy_n(w.gg.data() + static_cast<std::size_t>(r) * out, out,
                    w.ga.data() + static_cast<std::size_t>(r) * f + out);
      }
    }
  }

  /// y [rows][out] = GMLP(z [rows][in]), any number of rows.
  void compute(const S* z, int rows, S* y) const {
    std::vector<S> buf(acts_size());
    Work w;
    size(w);
    const Acts a = layout(buf.data());
    for (int r0 = 0; r0 < rows; r0 += kTile) {
      const int n = std::min(kTile, rows - r0);
      compute_z1(z + static_cast<std::size_t>(r0) * in, n, a.z1);
      compute_from_z1(n, a, y + static_cast<std::size_t>(r0) * out, w);
    }
  }

  /// gz [rows][in] = dL/dz from gy = dL/dy [rows][out]; with `gw` (zeros_like of the
  /// weights, or a running sum) adds dL/d(every weight) into it. Recomputes each tile's
  /// activations from z.
  void reverse(const S* z, const S* gy, int rows, S* gz, GatedMlpWeights<S>* gw) const {
    std::vector<S> buf(acts_size()), gw1(gw != nullptr ? static_cast<std::size_t>(width2) * in : 0, S(0)),
        gb1(gw != nullptr ? static_cast<std::size_t>(width2) : 0, S(0));
    Work w;
    size(w);
    const Acts a = layout(buf.data());
    for (int r0 = 0; r0 < rows; r0 += kTile) {
      const int n = std::min(kTile, rows - r0);
      const S* zt = z + static_cast<std::size_t>(r0) * in;
      compute_z1(zt, n, a.z1);
      compute_from_z1(n, a, a.y, w);
      reverse_to_z1(gy + static_cast<std::size_t>(r0) * out, n, a, w, gw);
      S* gzt = gz + static_cast<std::size_t>(r0) * in;
      for (std::size_t s = 0; s < seg.size(); ++s) {
        seg[s].reverse(w.ga.data(), n, width2, gzt + seg_begin[s], in, false);
      }
      if (gw != nullptr) {
        rows::add_outer(w.ga.data(), width2, zt, in, n, width2, in, gw1.data());
        rows::add_column_sums(w.ga.data(), width2, n, width2, gb1.data());
      }
    }
    if (gw != nullptr) {
      // The merged first layer's gradient back into core's and gate's rows.
      const int width = width2 / 2;
      for (int o = 0; o < width2; ++o) {
        std::vector<S>& dst = o < width ? gw->core1_w : gw->gate1_w;
        std::vector<S>& dstb = o < width ? gw->core1_b : gw->gate1_b;
        const int so = o < width ? o : o - width;
        for (int i = 0; i < in; ++i) {
          dst[static_cast<std::size_t>(so) * in + i] += gw1[static_cast<std::size_t>(o) * in + i];
        }
        dstb[so] += gb1[o];
      }
    }
  }
};

}  // namespace fastmlip::kernels

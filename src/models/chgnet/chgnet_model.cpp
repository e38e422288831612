// SPDX-License-Identifier: MIT
// CHGNet as the chgnet package (v0.3.x, model/model.py, layers.py, functions.py) evaluates it,
// with a hand-written reverse pass for dE/d(edge vectors). Notation: x^k atom features, b^k
// bond features, g^k angle features, e an edge c -> n with vector v and length r, s a short
// edge (r < bond cutoff), alpha an angle (c; a, b): ordered pair of distinct short edges a, b
// out of the same centre c.
//
//   basis:    B(r) = RadialBessel_6A(r),  B'(s) = RadialBessel_3A(r_s),
//             F(alpha) = Fourier(theta),  theta = acos(0.999999 u_a . u_b)     (chgnet's clamp)
//   embed:    x^0_i = Emb[Z_i - 1],  b^0_e = W_b B(r_e),  w_e = W_a B(r_e),  w'_s = W_w B'(r_s),
//             g^0_alpha = W_g F(alpha)
//   k = 0..n_conv-2:
//     AtomConv  x^{k+1}_i = x^k_i + O^a_k sum_{e: c=i} GMLP([x^k_c, b^k_e, x^k_n]) * w_e
//     BondConv  H_s      = sum_{alpha=(c;s,b)} GMLP([b^k_s, b^k_b, g^k_alpha, x^{k+1}_c]) * w'_s * w'_b
//               b^{k+1}_s = b^k_s + O^b_k (H_s + H_{reverse(s)})
//               (a long edge is in no angle: b^{k+1}_e = b^k_e + bias of O^b_k, 0 without one)
//     AngleUpd  g^{k+1}_alpha = g^k_alpha + GMLP([b^{k+1}_a, b^{k+1}_b, g^k_alpha, x^{k+1}_c])
//               (not for the last k: the final AtomConv never reads it; FastCHGNet)
//     after the last k: magmom_i = |site_wise(x^{k+1}_i)|
//   final AtomConv -> x^{n_conv};  E_i = MLP(LayerNorm(x^{n_conv}_i)) + AtomRef[Z_i]
//
//   GMLP(z) = silu(LN_1(core(z))) * sigmoid(LN_2(gate(z))) (v0.2.0: no LN); core and gate
//   have the same shapes, and their first linear layers are one merged GEMM here (FastCHGNet's
//   merged GatedMLP), split by input segment so that rows repeated across edges or angles are
//   multiplied once (GatedMlp).
//
// chgnet keeps one row per undirected bond and per angle; both directions of a bond carry the
// same row here (chgnet's sum over the angles at both ends of a bond is H_s + H_reverse(s)).
// Only short edges change in BondConv, so b^k is stored for short edges only, long edges read
// b^0 plus the biases so far (none for v0.3.0): the redundancy removal of FastCHGNet. b^0, w and
// g^0 are recomputed per tile from r and theta rather than stored (chgnet_atom_conv.hpp,
// angle_rows).
//
// Reverse pass: tile by tile, each GMLP's activations are read where the forward left them (kept
// per tile when the step's fit in set_activation_budget, i.e. small cells) or recomputed from
// its gathered input, and differentiated in the same tile.
//
// Stages already on a Kokkos execution space, run here on the host: the geometry half of Basis
// (chgnet_geometry.hpp), the stored embeddings (chgnet_embedding.hpp), the AtomConvs
// (chgnet_atom_conv.hpp) and the Magmom and Readout heads (chgnet_heads.hpp). BondConv and
// AngleUpdate are host loops over std::vector (issue 18: CHGNet on the execution space).
#include "models/chgnet/chgnet_model.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/elements.hpp"
#include "core/error.hpp"
#include "core/out_of_memory.hpp"
#include "graph/neighbor_list.hpp"
#include "kernels/dense.hpp"
#include "kernels/gated_mlp.hpp"
#include "kernels/layer_norm.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "models/chgnet/chgnet_atom_conv.hpp"
#include "models/chgnet/chgnet_embedding.hpp"
#include "models/chgnet/chgnet_geometry.hpp"
#include "models/chgnet/chgnet_heads.hpp"
#include "models/chgnet/chgnet_stages.hpp"

namespace fastmlip::models {

namespace {

using HostExec = Kokkos::DefaultHostExecutionSpace;
template <class T>
using Dense = kernels::Dense<T>;
template <class T>
using LayerNorm = kernels::LayerNorm<T>;
template <class T>
using GatedMlp = kernels::GatedMlp<T>;

/// Rows per tile of the GMLP loops (kernels/gated_mlp.hpp).
constexpr int kTile = kernels::kGatedMlpTile;

/// z1 row t += proj row idx[t] (a gathered projection), for `rows` rows.
template <class T>
void add_rows(const std::vector<T>& proj, const int* idx, int rows, int width, T* z1) {
  kernels::rows::add_rows(proj.data(), idx, rows, width, z1);
}

/// acc row idx[t] += ga row t: the adjoint of add_rows.
template <class T>
void scatter_rows(const T* ga, const int* idx, int rows, int width, std::vector<T>& acc) {
  kernels::rows::scatter_rows(ga, idx, rows, width, acc.data());
}

}  // namespace

template <class T>
struct ChgnetModel<T>::Impl {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "ChgnetModel: T must be float or double");
  using Vec = Kokkos::View<T*, HostExec>;
  using Mat = Kokkos::View<T**, Kokkos::LayoutRight, HostExec>;

  std::string source, version;
  double r_atom = 6.0, r_bond = 3.0;
  int Fa = 0, Fb = 0, Fg = 0, n_radial = 0, n_angular = 0, n_conv = 0, n_elements = 0;
  std::vector<double> atom_ref;  // [n_elements]
  Dense<T> angle_embedding;      // g^0 = W_g F(theta), per tile
  std::optional<kernels::FourierKokkos<HostExec, T>> fourier;
  std::vector<GatedMlp<T>> bond_gmlp, angle_gmlp;
  std::vector<Dense<T>> bond_out;
  bool gmlp_norm = true;
  std::optional<chgnet::Embedding<HostExec, T>> embed;  // x^0, short b^0, w' (chgnet_embedding.hpp)
  std::optional<chgnet::AtomConv<HostExec, T>> atom_conv;  // the AtomConvs (chgnet_atom_conv.hpp)
  std::optional<chgnet::Heads<HostExec, T>> heads;      // Magmom and Readout (chgnet_heads.hpp)
  std::vector<chgnet::Stage> stages;  // the model's blocks, in order (chgnet_stages.hpp)

  // ---- loading ----------------------------------------------------------------------------
  const io::PotentialFile* file = nullptr;

  [[noreturn]] void fail(const std::string& what) const { throw InputError(source + ": " + what); }

  std::vector<T> tensor(const std::string& name, const std::vector<std::int64_t>& shape) const {
    const auto v = file->values<double>(name, shape, io::Conversion::widen);
    return std::vector<T>(v.begin(), v.end());
  }
  Dense<T> dense(const std::string& prefix, int in, int out, bool bias) const {
    const auto w = tensor(prefix + ".weight", {out, in});
    const auto b = bias ? tensor(prefix + ".bias", {out}) : std::vector<T>();
    return Dense<T>(in, out, w.data(), bias ? b.data() : nullptr);
  }
  bool has(const std::string& name) const { return file->contains(name); }
  LayerNorm<T> layer_norm(const std::string& prefix, int dim) const {
    LayerNorm<T> n;
    n.dim = dim;
    n.gamma = tensor(prefix + ".weight", {dim});
    n.beta = tensor(prefix + ".bias", {dim});
    return n;
  }
  /// chgnet's MLP layer indices: hidden 0 -> [Dropout, Linear]; hidden h -> [Linear, SiLU,
  /// Dropout, Linear].
  GatedMlp<T> gated(const std::string& prefix, const std::vector<int>& segments, int hidden, int out) const {
    kernels::GatedMlpWeights<T> w;
    for (int len : segments) w.in += len;
    w.hidden = hidden;
    w.out = out;
    w.norm = gmlp_norm;
    const std::string c = prefix + ".mlp_core.layers.", q = prefix + ".mlp_gate.layers.";
    const int width = w.width();
    const std::string first = hidden > 0 ? "0" : "1";
    w.core1_w = tensor(c + first + ".weight", {width, w.in});
    w.core1_b = tensor(c + first + ".bias", {width});
    w.gate1_w = tensor(q + first + ".weight", {width, w.in});
    w.gate1_b = tensor(q + first + ".bias", {width});
    if (hidden > 0) {
      w.core2_w = tensor(c + "3.weight", {out, hidden});
      w.core2_b = tensor(c + "3.bias", {out});
      w.gate2_w = tensor(q + "3.weight", {out, hidden});
      w.gate2_b = tensor(q + "3.bias", {out});
    }
    if (w.norm) {
      w.ln_core_w = tensor(prefix + ".bn1.weight", {out});
      w.ln_core_b = tensor(prefix + ".bn1.bias", {out});
      w.ln_gate_w = tensor(prefix + ".bn2.weight", {out});
      w.ln_gate_b = tensor(prefix + ".bn2.bias", {out});
    }
    return GatedMlp<T>(w, segments);
  }

  explicit Impl(const io::PotentialFile& f) : file(&f) {
    source = f.display_name();
    if (f.model_kind() != "chgnet") fail("model kind is \"" + f.model_kind() + "\", not \"chgnet\"");
    auto hp = [&](const std::string& key) { return "/hyperparameters/" + key; };
    auto need_string = [&](const std::string& key, const std::string& want) {
      const auto v = f.meta<std::string>(hp(key));
      if (v != want) {
        throw UnsupportedError(source + ": hyperparameter " + key + " is \"" + v + "\"; fastmlip evaluates CHGNet with " +
                               key + " \"" + want + "\" (the v0.2.0/v0.3.0 architecture)");
      }
    };
    need_string("non_linearity", "silu");
    // gMLP_norm and readout_norm: "layer" (v0.3.0, r2scan) or null (v0.2.0: no normalisation).
    auto layer_or_none = [&](const std::string& key) {
      const auto* v = io::detail::find_meta(f.metadata, hp(key));
      if (v == nullptr || v->is_null()) return false;
      if (v->is_string() && v->template get<std::string>() == "layer") return true;
      throw UnsupportedError(source + ": hyperparameter " + key + " is " + io::detail::json_excerpt(*v) +
                             "; fastmlip evaluates CHGNet with " + key + " \"layer\" or null (the v0.2.0/v0.3.0 "
                             "architectures)");
    };
    gmlp_norm = layer_or_none("gMLP_norm");
    const bool readout_ln = layer_or_none("readout_norm");
    for (const char* key : {"mlp_first", "update_bond", "update_angle"}) {
      if (!f.meta<bool>(hp(key))) {
        throw UnsupportedError(source + ": hyperparameter " + key +
                               " is false; fastmlip evaluates CHGNet with it true (the v0.2.0/v0.3.0 architecture)");
      }
    }
    version = f.has_meta(hp("version")) ? f.meta<std::string>(hp("version")) : std::string("unknown");
    r_atom = f.meta<double>("/cutoffs/atom_graph");
    r_bond = f.meta<double>("/cutoffs/bond_graph");
    if (!(r_bond > 0 && r_bond <= r_atom)) fail("cutoffs: bond_graph must be in (0, atom_graph]");
    Fa = f.meta<int>(hp("atom_fea_dim"));
    Fb = f.meta<int>(hp("bond_fea_dim"));
    Fg = f.meta<int>(hp("angle_fea_dim"));
    n_radial = f.meta<int>(hp("num_radial"));
    n_angular = f.meta<int>(hp("num_angular"));
    n_conv = f.meta<int>(hp("n_conv"));
    const int h_atom = f.meta<int>(hp("atom_conv_hidden_dim"));
    const int h_bond = f.meta<int>(hp("bond_conv_hidden_dim"));
    const int h_angle = f.meta<int>(hp("angle_layer_hidden_dim"));
    const int p = f.meta<int>(hp("cutoff_coeff"));
    const bool out_bias = f.meta<bool>(hp("mlp_out_bias"));
    for (auto [name, v] : {std::pair{"atom_fea_dim", Fa}, {"bond_fea_dim", Fb}, {"angle_fea_dim", Fg},
                           {"num_radial", n_radial}, {"num_angular", n_angular}, {"cutoff_coeff", p}}) {
      if (v < 1 || v > 4096) fail(std::string("hyperparameter ") + name + " = " + std::to_string(v) + " is out of range");
    }
    if (n_conv < 2) fail("hyperparameter n_conv = " + std::to_string(n_conv) + ": CHGNet needs at least 2");
    if (n_angular % 2 != 1) fail("hyperparameter num_angular must be odd (1 + 2 x Fourier order)");

    const auto emb = file->get("atom_embedding.embedding.weight");
    if (emb.shape.size() != 2) fail("atom_embedding.embedding.weight must be 2-dimensional");
    n_elements = static_cast<int>(emb.shape[0]);
    if (n_elements < 1 || n_elements > kMaxAtomicNumber) fail("atom_embedding.embedding.weight has a bad row count");
    const std::vector<T> embedding = tensor("atom_embedding.embedding.weight", {n_elements, Fa});
    atom_ref = f.values<double>("composition_model.fc.weight", {1, n_elements}, io::Conversion::widen);

    auto frequencies = [&](const std::string& name, int n) {
      const auto v = f.values<double>(name, {n}, io::Conversion::widen);
      return v;
    };
    auto bessel = [&](const std::string& name, double rc) {
      kernels::RadialBasisParams params;
      for (double fr : frequencies(name, n_radial)) params.frequencies.push_back(fr / rc);
      params.r_max = rc;
      params.envelope_p = p;
      return params;
    };
    const auto basis_ag = bessel("bond_basis_expansion.rbf_expansion_ag.frequencies", r_atom);
    kernels::FourierParams fp;
    fp.frequencies = frequencies("angle_basis_expansion.fourier_expansion.frequencies", (n_angular - 1) / 2);
    fourier.emplace(fp);

    const Dense<T> bond_embedding = dense("bond_embedding", n_radial, Fb, false);
    const Dense<T> bond_weights_ag = dense("bond_weights_ag", n_radial, Fa, false);
    const Dense<T> bond_weights_bg = dense("bond_weights_bg", n_radial, Fb, false);
    angle_embedding = dense("angle_embedding", n_angular, Fg, false);
    std::vector<GatedMlp<T>> atom_gmlp;
    std::vector<Dense<T>> atom_out;
    for (int k = 0; k < n_conv; ++k) {
      const std::string a = "atom_conv_layers." + std::to_string(k);
      atom_gmlp.push_back(gated(a + ".twoBody_atom", {Fa, Fb, Fa}, h_atom, Fa));
      atom_out.push_back(dense(a + ".mlp_out.layers.1", Fa, Fa, out_bias));
    }
    for (int k = 0; k + 1 < n_conv; ++k) {
      const std::string b = "bond_conv_layers." + std::to_string(k);
      bond_gmlp.push_back(gated(b + ".twoBody_bond", {Fb, Fb, Fg, Fa}, h_bond, Fb));
      bond_out.push_back(dense(b + ".mlp_out.layers.1", Fb, Fb, out_bias));
      // The last AngleUpdate's output is never read (the final AtomConv reads no angles).
      if (k + 2 < n_conv) {
        angle_gmlp.push_back(
            gated("angle_layers." + std::to_string(k) + ".twoBody_bond", {Fb, Fb, Fg, Fa}, h_angle, Fg));
      }
    }
    const Dense<T> site_wise = dense("site_wise", Fa, 1, true);
    std::optional<LayerNorm<T>> readout_norm;
    if (readout_ln) readout_norm = layer_norm("readout_norm", Fa);
    std::vector<Dense<T>> readout;
    // mlp.layers: Linear, SiLU, (Linear, SiLU)*, Dropout, Linear; find the Linears by name.
    int in = Fa;
    for (int idx = 0; idx < 64; ++idx) {
      const std::string name = "mlp.layers." + std::to_string(idx);
      if (!has(name + ".weight")) continue;
      const auto& w = file->get(name + ".weight");
      if (w.shape.size() != 2) fail(name + ".weight must be 2-dimensional");
      readout.push_back(dense(name, in, static_cast<int>(w.shape[0]), true));
      in = readout.back().out;
    }
    if (readout.empty() || readout.back().out != 1) fail("the readout MLP (mlp.layers.*) must end in one output");
    embed.emplace(embedding, Fa, basis_ag,
                  bessel("bond_basis_expansion.rbf_expansion_bg.frequencies", r_bond), bond_embedding,
                  bond_weights_bg);
    heads.emplace(readout_norm, readout, atom_ref, site_wise);
    // A long edge's bond row at layer k is b^0 plus the BondConv biases before k (none at k = 0).
    std::vector<std::vector<T>> long_bias(n_conv);
    std::vector<T> sum(Fb, T(0));
    bool any = false;
    for (int k = 1; k < n_conv; ++k) {
      if (!bond_out[k - 1].b.empty()) {
        for (int j = 0; j < Fb; ++j) {
          sum[j] += bond_out[k - 1].b[j];
        }
        any = true;
      }
      if (any) {
        long_bias[k] = sum;
      }
    }
    atom_conv.emplace(basis_ag, bond_embedding, bond_weights_ag, atom_gmlp, atom_out, long_bias);
    stages = chgnet::stage_list(n_conv);
    file = nullptr;
  }

  std::string species_problem(int z) const {
    if (z < 1 || z > n_elements) {
      const std::string name = z >= 1 && z <= kMaxAtomicNumber ? " (" + element_symbol(z) + ")" : "";
      return "atomic number " + std::to_string(z) + name + " is beyond the model's " + std::to_string(n_elements) +
             " elements";
    }
    if (atom_ref[z - 1] == 0.0) {
      return "element " + element_symbol(z) + " has no AtomRef (composition) energy in this potential: it was absent "
             "from the training data";
    }
    return "";
  }

  // ---- per-call state ---------------------------------------------------------------------
  int N = 0, NL = 0, E = 0, S = 0, A = 0, n_slots = 0;
  // The geometry stage's arrays (chgnet_geometry.hpp), under short names.
  chgnet::Geometry<HostExec, T> geo;
  using Ints = typename chgnet::Geometry<HostExec, T>::Ints;
  Ints short_edge;           // [S] edge of each local slot
  Ints rev;                  // [S] slot of the reverse bond
  Ints edge_slot;            // [E] slot or -1
  Ints ang_a, ang_b, ang_c;  // [A]
  // The radial and Fourier bases of edges and angles are evaluated tile by tile from r and
  // theta where they are used (31 values per edge or angle are not stored); only the short
  // edges' 3 A basis is kept.
  Vec r, theta;
  // Per-edge rows b^0 = W_b B(r) and w = W_a B(r) are not stored: each tile recomputes them
  // from the basis (31 values per edge instead of 128), and their adjoints go straight into
  // the basis' adjoint. Likewise g^0 = W_g F(theta) per angle. With about 100 edges and 100
  // angles per atom these arrays would otherwise be most of the memory.
  std::vector<T> w_bg;                    // [S][Fb]
  std::vector<std::vector<T>> x, bs, g;   // x^k [N][Fa], short b^k [S][Fb], g^k [A][Fg]
  std::vector<T> H;                       // [n_slots][Fb]

  void validate(const ChgnetGraph<T>& gr, const ChgnetExchange<T>* exchange) {
    auto bad = [&](const std::string& what) { throw InputError("ChgnetModel::compute: " + what); };
    graph::check_graph(gr, n_elements, "ChgnetModel::compute",
                       "the model has " + std::to_string(n_elements) + " elements");
    if (gr.n_total > gr.n_local && exchange == nullptr) bad("the graph has ghost nodes but no ChgnetExchange");
    if (gr.slot_start == nullptr || (gr.num_edges() > 0 && gr.reverse_slot == nullptr)) {
      bad("slot_start (and reverse_slot, with edges) must be given");
    }
    // The slot layout is checked by the geometry stage (compute_chgnet_geometry).
  }

  using ConstInts = Kokkos::View<const int*, Kokkos::HostSpace>;
  ConstInts slot_start_view(const ChgnetGraph<T>& gr) const {
    return ConstInts(gr.slot_start, gr.n_total + 1);
  }

  /// The geometry (short edges, angles, r, theta; chgnet_geometry.hpp) and the bases (stage
  /// "compute_basis").
  void compute_basis(const ChgnetGraph<T>& gr) {
    N = gr.n_total;
    NL = gr.n_local;
    E = gr.num_edges();
    n_slots = gr.slot_start[N];
    chgnet::compute_chgnet_geometry(gr, slot_start_view(gr), ConstInts(gr.reverse_slot, E),
                                    "ChgnetModel::compute", geo);
    S = geo.num_short;
    A = geo.num_angles;
    short_edge = geo.short_edge;
    rev = geo.short_reverse;
    edge_slot = geo.edge_slot;
    ang_a = geo.angle_a;
    ang_b = geo.angle_b;
    ang_c = geo.angle_c;
    r = geo.r;
    theta = geo.theta;
  }

  /// Embeddings (stage "compute_embedding").
  void compute_embedding(const ChgnetGraph<T>& gr) {
    x.assign(n_conv + 1, {});
    bs.assign(n_conv, {});
    g.assign(n_conv - 1, {});
    x[0].resize(static_cast<std::size_t>(N) * Fa);
    w_bg.resize(static_cast<std::size_t>(S) * Fb);
    bs[0].resize(static_cast<std::size_t>(S) * Fb);
    embed->compute(gr.species, geo.r_short, Mat(x[0].data(), N, Fa), Mat(bs[0].data(), S, Fb),
                   Mat(w_bg.data(), S, Fb));
  }

  /// Angle rows g^k of angles a0..a0+rows-1: stored for k >= 1, from the basis for k = 0.
  const T* angle_rows(int k, int a0, int rows) {
    if (k > 0) return g[k].data() + static_cast<std::size_t>(a0) * Fg;
    fourier->compute(Vec(theta.data() + a0, rows), Mat(Ft.data(), rows, n_angular));
    angle_embedding.compute(Ft.data(), rows, n_angular, G0t.data(), Fg);
    return G0t.data();
  }
  /// Adds dE/dg^k for angles a0..a0+rows-1 (`tile`, rows x Fg): into the stored adjoint for
  /// k >= 1, through the embedding into the Fourier basis' adjoint for k = 0.
  void add_angle_adjoint(int k, int a0, int rows, const T* tile) {
    if (k > 0) {
      T* dst = ggs[k].data() + static_cast<std::size_t>(a0) * Fg;
      for (std::size_t q = 0; q < static_cast<std::size_t>(rows) * Fg; ++q) dst[q] += tile[q];
    } else {
      angle_embedding.reverse(tile, rows, Fg, Ft.data(), n_angular, false);
      fourier->reverse(Vec(theta.data() + a0, rows), Mat(Ft.data(), rows, n_angular), Vec(GRt.data(), rows));
      for (int t = 0; t < rows; ++t) g_theta[a0 + t] += GRt[t];
    }
  }

  /// Projections of the repeated input segments (GatedMlp) and their adjoint accumulators.
  std::vector<T> P0, P1, P2, G0, G1, G2;

  /// First-layer outputs of a BondConv / AngleUpdate for angles a0..a0+rows-1: the input is
  /// [b_a, b_b, g_alpha, x_c] (chgnet's order); P0 = b W_a, P1 = b W_b per short edge and
  /// P2 = x W_c per local node are projected beforehand.
  void angle_z1(const GatedMlp<T>& m, const T* gk, int a0, int rows, T* z1) {
    for (int t = 0; t < rows; ++t) std::copy(m.b1.begin(), m.b1.end(), z1 + static_cast<std::size_t>(t) * m.width2);
    m.seg[2].compute(gk, rows, Fg, z1, m.width2, true);
    add_rows(P0, ang_a.data() + a0, rows, m.width2, z1);
    add_rows(P1, ang_b.data() + a0, rows, m.width2, z1);
    add_rows(P2, ang_c.data() + a0, rows, m.width2, z1);
  }
  void project_angle(const GatedMlp<T>& m, const std::vector<T>& bk, const std::vector<T>& xk) {
    m.project(0, bk.data(), S, P0);
    m.project(1, bk.data(), S, P1);
    m.project(3, xk.data(), NL, P2);
  }

  typename GatedMlp<T>::Work work;
  std::vector<T> GX, GY, G0t, Ft, GRt;
  void size_tiles() {
    Ft.resize(static_cast<std::size_t>(kTile) * n_angular);
    GRt.resize(kTile);
    G0t.resize(static_cast<std::size_t>(kTile) * Fg);
    GX.resize(static_cast<std::size_t>(kTile) * Fg);
    GY.resize(static_cast<std::size_t>(kTile) * Fb);
    // One scratch for every GMLP: each field as large as the largest GMLP needs.
    std::size_t acts = 0;
    for (const auto* set : {&bond_gmlp, &angle_gmlp}) {
      for (const auto& m : *set) {
        m.size(work);
        acts = std::max(acts, m.acts_size());
      }
    }
    if (scratch_acts.size() < acts) scratch_acts.resize(acts);
  }

  /// A tile's GMLP activations, kept from the forward pass for the reverse pass when the whole
  /// step's fit in keep_bytes (small systems, such as FastCHGNet's 8- to 32-atom cells): the
  /// reverse then skips recomputing the forward (a third of its work). Larger systems
  /// recompute, so memory stays proportional to the graph. The arithmetic is the same either
  /// way: results do not depend on which.
  double keep_bytes = 512.0 * 1024 * 1024;
  bool keep = false;
  /// [GMLP use][tile] (atom k, then bond k, then angle k): one buffer per tile (GatedMlp::
  /// layout), kept across calls so that an MD run does not reallocate them every step.
  std::vector<std::vector<std::vector<T>>> kept;
  std::vector<T> scratch_acts;  // the activations of the tile at hand when nothing is kept
  int use_bond(int k) const { return k; }
  int use_angle(int k) const { return n_conv - 1 + k; }

  void plan_keep(bool gradients) {
    const int K = n_conv - 1;
    const double tiles_e = std::ceil(E / double(kTile)), tiles_a = std::ceil(A / double(kTile));
    const double per_row = 2.0 * 128 + 8.0 * std::max({Fa, Fb, Fg}) + 2;  // floats a tile row keeps, at most
    const double bytes = (tiles_e * n_conv + tiles_a * (2 * K - 1)) * kTile * per_row * sizeof(T);
    keep = gradients && bytes <= keep_bytes;
    atom_conv->keep(keep);
    if (keep) {
      kept.resize(2 * n_conv - 2);
      // Tiles beyond this step's are freed: what stays kept is within keep_bytes.
      for (int k = 0; k < K; ++k) {
        kept[use_bond(k)].resize(static_cast<std::size_t>(tiles_a));
        if (k + 1 < K) kept[use_angle(k)].resize(static_cast<std::size_t>(tiles_a));
      }
    } else {
      kept.clear();
    }
  }
  /// The activations of tile `tile` of GMLP use `use`: its kept buffer, or the scratch.
  typename GatedMlp<T>::Acts acts(int use, int tile, const GatedMlp<T>& m) {
    if (!keep) return m.layout(scratch_acts.data());
    std::vector<T>& b = kept[use][tile];
    if (b.size() < m.acts_size()) b.resize(m.acts_size());
    return m.layout(b.data());
  }

  /// What the AtomConvs read of the graph (chgnet_atom_conv.hpp).
  typename chgnet::AtomConv<HostExec, T>::Edges atom_edges(const ChgnetGraph<T>& gr) const {
    typename chgnet::AtomConv<HostExec, T>::Edges e;
    e.n_local = NL, e.n_total = N;
    e.center = gr.center, e.neighbor = gr.neighbor, e.center_start = gr.center_start;
    e.edge_slot = geo.edge_slot, e.r = geo.r;
    return e;
  }

  /// AtomConv k: x^{k+1} from x^k (ghost rows of x^k current).
  void compute_atom_conv(int k, const ChgnetGraph<T>& gr) {
    x[k + 1].resize(static_cast<std::size_t>(N) * Fa);
    atom_conv->compute(k, atom_edges(gr), ConstMat(x[k].data(), N, Fa), ConstMat(bs[k].data(), S, Fb),
                       Mat(x[k + 1].data(), N, Fa));
  }

  /// BondConv k: short b^{k+1} from b^k, g^k, x^{k+1}.
  void compute_bond_conv(int k, ChgnetExchange<T>* exchange) {
    const auto& m = bond_gmlp[k];
    project_angle(m, bs[k], x[k + 1]);
    H.assign(static_cast<std::size_t>(n_slots) * Fb, T(0));
    for (int a0 = 0; a0 < A; a0 += kTile) {
      const int rows = std::min(kTile, A - a0);
      const auto act = acts(use_bond(k), a0 / kTile, m);
      angle_z1(m, angle_rows(k, a0, rows), a0, rows, act.z1);
      m.compute_from_z1(rows, act, act.y, work);
      for (int t = 0; t < rows; ++t) {
        const int a = a0 + t;
        T* h = H.data() + static_cast<std::size_t>(ang_a[a]) * Fb;
        const T* y = act.y + static_cast<std::size_t>(t) * Fb;
        const T* wa = w_bg.data() + static_cast<std::size_t>(ang_a[a]) * Fb;
        const T* wb = w_bg.data() + static_cast<std::size_t>(ang_b[a]) * Fb;
        for (int j = 0; j < Fb; ++j) h[j] += y[j] * wa[j] * wb[j];
      }
    }
    if (exchange) exchange->forward_slots(H.data(), Fb);
    std::vector<T> sum(static_cast<std::size_t>(S) * Fb);
    for (int s = 0; s < S; ++s) {
      const T* h1 = H.data() + static_cast<std::size_t>(s) * Fb;
      const T* h2 = H.data() + static_cast<std::size_t>(rev[s]) * Fb;
      for (int j = 0; j < Fb; ++j) sum[static_cast<std::size_t>(s) * Fb + j] = h1[j] + h2[j];
    }
    bs[k + 1].resize(static_cast<std::size_t>(S) * Fb);
    bond_out[k].compute(sum.data(), S, Fb, bs[k + 1].data(), Fb);
    for (std::size_t q = 0; q < static_cast<std::size_t>(S) * Fb; ++q) bs[k + 1][q] += bs[k][q];
  }

  /// AngleUpdate k: g^{k+1} from b^{k+1}, g^k, x^{k+1}.
  void compute_angle_update(int k) {
    const auto& m = angle_gmlp[k];
    project_angle(m, bs[k + 1], x[k + 1]);
    g[k + 1].resize(static_cast<std::size_t>(A) * Fg);
    for (int a0 = 0; a0 < A; a0 += kTile) {
      const int rows = std::min(kTile, A - a0);
      const T* gk = angle_rows(k, a0, rows);
      const auto act = acts(use_angle(k), a0 / kTile, m);
      angle_z1(m, gk, a0, rows, act.z1);
      T* out = g[k + 1].data() + static_cast<std::size_t>(a0) * Fg;
      m.compute_from_z1(rows, act, out, work);
      for (std::size_t q = 0; q < static_cast<std::size_t>(rows) * Fg; ++q) out[q] += gk[q];
    }
  }

  using ConstMat = Kokkos::View<const T**, Kokkos::LayoutRight, HostExec>;
  using Doubles = Kokkos::View<double*, HostExec>;

  /// Site energies and the energy (stage "compute_readout", chgnet_heads.hpp).
  void compute_readout(const ChgnetGraph<T>& gr, ChgnetResult& result) {
    result.site_energy.assign(NL, 0.0);
    heads->compute(ConstMat(x[n_conv].data(), NL, Fa), Kokkos::subview(gr.species, Kokkos::make_pair(0, NL)),
                   Doubles(result.site_energy.data(), NL));
    result.energy = 0;
    for (int i = 0; i < NL; ++i) {
      result.energy += result.site_energy[i];
    }
  }

  /// dE/dx^{n_conv} (local rows) from the readout.
  void reverse_readout(std::vector<T>& gx) {
    gx.assign(static_cast<std::size_t>(N) * Fa, T(0));
    heads->reverse(Mat(gx.data(), NL, Fa));
  }

  // ---- reverse ----------------------------------------------------------------------------
  std::vector<std::vector<T>> gxs, gbs, ggs;  // adjoints of x^k, short b^k, g^k
  std::vector<T> gw_bg, gH;
  std::vector<double> g_r, g_theta;  // dE/dr (edges), dE/dtheta (angles)

  /// Reverse of AtomConv k: from dE/dx^{k+1} (local rows complete) to dE/dx^k (local and
  /// ghost rows; not for k = 0, whose x^0 depends on the species only), dE/db^k and dE/dr.
  void reverse_atom_conv(int k, const ChgnetGraph<T>& gr) {
    const Mat gx = k > 0 ? Mat(gxs[k].data(), N, Fa) : Mat();
    atom_conv->reverse(k, atom_edges(gr), ConstMat(x[k].data(), N, Fa), ConstMat(bs[k].data(), S, Fb),
                       ConstMat(gxs[k + 1].data(), N, Fa), gx, Mat(gbs[k].data(), S, Fb),
                       Doubles(g_r.data(), E));
  }

  /// The adjoints of a BondConv / AngleUpdate's first layer for angles a0..: the angle rows
  /// into gg (contiguous), the repeated segments into the accumulators G0, G1 (short edges) and
  /// G2 (local nodes).
  void reverse_angle_z1(const GatedMlp<T>& m, int k, int a0, int rows) {
    m.seg[2].reverse(work.ga.data(), rows, m.width2, GX.data(), Fg, false);
    add_angle_adjoint(k, a0, rows, GX.data());
    scatter_rows(work.ga.data(), ang_a.data() + a0, rows, m.width2, G0);
    scatter_rows(work.ga.data(), ang_b.data() + a0, rows, m.width2, G1);
    scatter_rows(work.ga.data(), ang_c.data() + a0, rows, m.width2, G2);
  }
  void start_angle_adjoints(const GatedMlp<T>& m) {
    G0.assign(static_cast<std::size_t>(S) * m.width2, T(0));
    G1.assign(static_cast<std::size_t>(S) * m.width2, T(0));
    G2.assign(static_cast<std::size_t>(NL) * m.width2, T(0));
  }
  void finish_angle_adjoints(const GatedMlp<T>& m, std::vector<T>& gb, std::vector<T>& gx) {
    m.seg[0].reverse(G0.data(), S, m.width2, gb.data(), Fb, true);
    m.seg[1].reverse(G1.data(), S, m.width2, gb.data(), Fb, true);
    m.seg[3].reverse(G2.data(), NL, m.width2, gx.data(), Fa, true);
  }

  /// Reverse of BondConv k: from dE/db^{k+1} (short) to dE/db^k, dE/dg^k, dE/dx^{k+1} (local
  /// rows) and the bond-graph weights w'.
  void reverse_bond_conv(int k, ChgnetExchange<T>* exchange) {
    const auto& m = bond_gmlp[k];
    const auto& gnext = gbs[k + 1];
    for (std::size_t q = 0; q < static_cast<std::size_t>(S) * Fb; ++q) gbs[k][q] += gnext[q];
    std::vector<T> gsum(static_cast<std::size_t>(S) * Fb, T(0));
    bond_out[k].reverse(gnext.data(), S, Fb, gsum.data(), Fb, false);
    gH.assign(static_cast<std::size_t>(n_slots) * Fb, T(0));
    for (int s = 0; s < S; ++s) {
      const T* src = gsum.data() + static_cast<std::size_t>(s) * Fb;
      T* h1 = gH.data() + static_cast<std::size_t>(s) * Fb;
      T* h2 = gH.data() + static_cast<std::size_t>(rev[s]) * Fb;
      for (int j = 0; j < Fb; ++j) {
        h1[j] += src[j];
        h2[j] += src[j];
      }
    }
    if (exchange) exchange->reverse_slots(gH.data(), Fb);
    if (!keep) project_angle(m, bs[k], x[k + 1]);
    start_angle_adjoints(m);
    for (int a0 = 0; a0 < A; a0 += kTile) {
      const int rows = std::min(kTile, A - a0);
      const auto act = acts(use_bond(k), a0 / kTile, m);
      if (!keep) {
        angle_z1(m, angle_rows(k, a0, rows), a0, rows, act.z1);
        m.compute_from_z1(rows, act, act.y, work);
      }
      for (int t = 0; t < rows; ++t) {
        const int a = a0 + t;
        const T* gh = gH.data() + static_cast<std::size_t>(ang_a[a]) * Fb;
        const T* wa = w_bg.data() + static_cast<std::size_t>(ang_a[a]) * Fb;
        const T* wb = w_bg.data() + static_cast<std::size_t>(ang_b[a]) * Fb;
        T* gwa = gw_bg.data() + static_cast<std::size_t>(ang_a[a]) * Fb;
        T* gwb = gw_bg.data() + static_cast<std::size_t>(ang_b[a]) * Fb;
        const T* y = act.y + static_cast<std::size_t>(t) * Fb;
        T* gy = GY.data() + static_cast<std::size_t>(t) * Fb;
        for (int j = 0; j < Fb; ++j) {
          gy[j] = gh[j] * wa[j] * wb[j];
          gwa[j] += gh[j] * y[j] * wb[j];
          gwb[j] += gh[j] * y[j] * wa[j];
        }
      }
      m.reverse_to_z1(GY.data(), rows, act, work);
      reverse_angle_z1(m, k, a0, rows);
    }
    finish_angle_adjoints(m, gbs[k], gxs[k + 1]);
  }

  /// Reverse of AngleUpdate k: from dE/dg^{k+1} to dE/dg^k, dE/db^{k+1}, dE/dx^{k+1}.
  void reverse_angle_update(int k) {
    const auto& m = angle_gmlp[k];
    const auto& gnext = ggs[k + 1];
    if (!keep) project_angle(m, bs[k + 1], x[k + 1]);
    start_angle_adjoints(m);
    for (int a0 = 0; a0 < A; a0 += kTile) {
      const int rows = std::min(kTile, A - a0);
      const T* gn = gnext.data() + static_cast<std::size_t>(a0) * Fg;
      add_angle_adjoint(k, a0, rows, gn);  // the residual g^{k+1} = g^k + ...
      const auto act = acts(use_angle(k), a0 / kTile, m);
      if (!keep) {
        angle_z1(m, angle_rows(k, a0, rows), a0, rows, act.z1);
        m.compute_from_z1(rows, act, act.y, work);
      }
      m.reverse_to_z1(gn, rows, act, work);
      reverse_angle_z1(m, k, a0, rows);
    }
    finish_angle_adjoints(m, gbs[k + 1], gxs[k + 1]);
  }

  /// Reverse of the embeddings and bases: dE/d(edge vectors) (stage "reverse_basis").
  void reverse_basis(const ChgnetGraph<T>& gr, ChgnetResult& result) {
    // The short edges: b^0's adjoint (the long edges' went in with each AtomConv) through the
    // 6 A basis, and the bond-graph weights' through the 3 A basis.
    Doubles g_short("fastmlip::chgnet::grad_r_short", S);
    embed->reverse(geo.r_short, ConstMat(gbs[0].data(), S, Fb), ConstMat(gw_bg.data(), S, Fb), g_short);
    for (int s = 0; s < S; ++s) {
      g_r[short_edge[s]] += g_short(s);
    }
    // Then dE/dr and dE/dtheta into dE/d(edge vectors): the geometry stage's reverse.
    using ConstDoubles = Kokkos::View<const double*, Kokkos::HostSpace>;
    result.edge_gradient.assign(static_cast<std::size_t>(E) * 3, 0.0);
    chgnet::reverse_chgnet_geometry(
        gr, slot_start_view(gr), geo, ConstDoubles(g_r.data(), E), ConstDoubles(g_theta.data(), A),
        Kokkos::View<double* [3], Kokkos::LayoutRight, Kokkos::HostSpace>(result.edge_gradient.data(), E));
  }

  // ---- driver: the stage list (chgnet_stages.hpp), forward, then backwards ----------------

  void compute_stage(const chgnet::Stage& s, const ChgnetGraph<T>& gr, ChgnetExchange<T>* exchange,
                     bool gradients, ChgnetResult& result) {
    using K = chgnet::StageKind;
    switch (s.kind) {
      case K::Basis:
        compute_basis(gr);
        size_tiles();
        plan_keep(gradients);
        return;
      case K::Embedding:
        return compute_embedding(gr);
      case K::AtomConv:
        return compute_atom_conv(s.layer, gr);
      case K::ExchangeAtoms:
        if (exchange) exchange->forward(x[s.layer].data(), Fa);
        return;
      case K::BondConv:
        return compute_bond_conv(s.layer, exchange);
      case K::AngleUpdate:
        return compute_angle_update(s.layer);
      case K::Magmom:
        result.magmom.assign(NL, 0.0);
        heads->magmom(ConstMat(x[s.layer].data(), NL, Fa), Doubles(result.magmom.data(), NL));
        return;
      case K::Readout:
        return compute_readout(gr, result);
    }
  }

  void reverse_stage(const chgnet::Stage& s, const ChgnetGraph<T>& gr, ChgnetExchange<T>* exchange,
                     ChgnetResult& result) {
    using K = chgnet::StageKind;
    switch (s.kind) {
      case K::Readout:
        return reverse_readout(gxs[n_conv]);
      case K::AtomConv:
        return reverse_atom_conv(s.layer, gr);
      case K::ExchangeAtoms:
        if (exchange) exchange->reverse(gxs[s.layer].data(), Fa);
        return;
      case K::BondConv:
        return reverse_bond_conv(s.layer, exchange);
      case K::AngleUpdate:
        return reverse_angle_update(s.layer);
      case K::Magmom:     // not differentiated
      case K::Embedding:  // the embeddings' adjoints go through the bases in reverse_basis
        return;
      case K::Basis:
        return reverse_basis(gr, result);
    }
  }

  void compute(const ChgnetGraph<T>& gr, ChgnetExchange<T>* exchange, bool gradients, ChgnetResult& result) {
    validate(gr, exchange);
    for (const chgnet::Stage& s : stages) compute_stage(s, gr, exchange, gradients, result);
    result.edge_gradient.clear();
    if (!gradients) return;

    const int K = n_conv - 1;
    gxs.assign(n_conv + 1, {});
    for (int k = 1; k < n_conv; ++k) gxs[k].assign(static_cast<std::size_t>(N) * Fa, T(0));
    gbs.assign(n_conv, std::vector<T>(static_cast<std::size_t>(S) * Fb, T(0)));
    // dE/dg^k for k >= 1 (g^0's goes into g_an directly).
    ggs.assign(K, {});
    for (int k = 1; k < K; ++k) ggs[k].assign(static_cast<std::size_t>(A) * Fg, T(0));
    g_r.assign(E, 0.0);
    g_theta.assign(A, 0.0);
    gw_bg.assign(static_cast<std::size_t>(S) * Fb, T(0));
    for (auto s = stages.rbegin(); s != stages.rend(); ++s) reverse_stage(*s, gr, exchange, result);
  }
};

template <class T>
ChgnetGraph<T> ChgnetStructureGraph<T>::view() const {
  ChgnetGraph<T> g;
  static_cast<graph::AtomGraph<T>&>(g) =
      graph::host_graph(n_atoms, n_atoms, species.data(), static_cast<int>(center.size()), center.data(),
                        neighbor.data(), center_start.data(), vectors.data());
  g.slot_start = slot_start.data();
  g.reverse_slot = reverse_slot.data();
  return g;
}

template <class T>
ChgnetStructureGraph<T> make_structure_graph(const std::vector<double>& positions, const std::vector<int>& atomic_numbers,
                                             const double* cell, const std::array<bool, 3>& pbc, double cutoff,
                                             double bond_cutoff) {
  graph::NeighborListOptions opt;
  opt.cutoff = cutoff;
  const std::size_t n = atomic_numbers.size();
  if (positions.size() != 3 * n) throw InputError("make_structure_graph: positions must hold 3 values per atom");
  const auto nl = graph::build_neighbor_list(positions.data(), n, cell, pbc, opt);
  ChgnetStructureGraph<T> g;
  g.n_atoms = static_cast<int>(n);
  for (int z : atomic_numbers) g.species.push_back(z - 1);
  const auto centers = nl.centers();
  const std::size_t ne = nl.num_edges();
  g.center.assign(centers.begin(), centers.end());
  g.center_start = graph::center_offsets(g.n_atoms, g.center);
  g.neighbor.assign(nl.neighbors.begin(), nl.neighbors.end());
  g.vectors.resize(3 * ne);
  std::vector<int> slot(ne, -1);
  g.slot_start.assign(n + 1, 0);
  // Short edges decided in double, as a pair style decides them.
  int next = 0;
  for (std::size_t e = 0; e < ne; ++e) {
    const double* v = nl.vectors.data() + 3 * e;
    for (int d = 0; d < 3; ++d) g.vectors[3 * e + d] = static_cast<T>(v[d]);
    if (v[0] * v[0] + v[1] * v[1] + v[2] * v[2] < bond_cutoff * bond_cutoff) {
      slot[e] = next++;
      ++g.slot_start[centers[e] + 1];
    }
  }
  for (std::size_t i = 0; i < n; ++i) g.slot_start[i + 1] += g.slot_start[i];
  // The reverse of (i, j, S) is (j, i, -S).
  std::map<std::tuple<int, int, int, int, int>, int> by_key;
  for (std::size_t e = 0; e < ne; ++e) {
    if (slot[e] < 0) continue;
    by_key[{centers[e], nl.neighbors[e], nl.shifts[3 * e], nl.shifts[3 * e + 1], nl.shifts[3 * e + 2]}] = slot[e];
  }
  g.reverse_slot.assign(ne, -1);
  for (std::size_t e = 0; e < ne; ++e) {
    if (slot[e] < 0) continue;
    const auto it = by_key.find({nl.neighbors[e], centers[e], -nl.shifts[3 * e], -nl.shifts[3 * e + 1], -nl.shifts[3 * e + 2]});
    if (it == by_key.end()) throw InputError("make_structure_graph: a short edge has no reverse (asymmetric neighbor list)");
    g.reverse_slot[e] = it->second;
  }
  return g;
}

template <class T>
ChgnetModel<T>::ChgnetModel(const io::PotentialFile& file) : m_impl(std::make_unique<Impl>(file)) {}
template <class T>
ChgnetModel<T>::~ChgnetModel() = default;
template <class T>
ChgnetModel<T>::ChgnetModel(ChgnetModel&&) noexcept = default;
template <class T>
ChgnetModel<T>& ChgnetModel<T>::operator=(ChgnetModel&&) noexcept = default;
template <class T>
double ChgnetModel<T>::cutoff() const {
  return m_impl->r_atom;
}
template <class T>
double ChgnetModel<T>::bond_cutoff() const {
  return m_impl->r_bond;
}
template <class T>
int ChgnetModel<T>::num_elements() const {
  return m_impl->n_elements;
}
template <class T>
std::string ChgnetModel<T>::species_problem(int z) const {
  return m_impl->species_problem(z);
}
template <class T>
int ChgnetModel<T>::atom_width() const {
  return m_impl->Fa;
}
template <class T>
int ChgnetModel<T>::bond_width() const {
  return m_impl->Fb;
}
template <class T>
void ChgnetModel<T>::set_activation_budget(double bytes) {
  m_impl->keep_bytes = bytes;
}
template <class T>
const std::string& ChgnetModel<T>::version() const {
  return m_impl->version;
}
template <class T>
void ChgnetModel<T>::compute(const ChgnetGraph<T>& graph, ChgnetExchange<T>* exchange, bool gradients,
                             ChgnetResult& result) {
  translate_out_of_memory(
      [&] { m_impl->compute(graph, exchange, gradients, result); },
      [&] {
        return MemoryContext{
            m_impl->source, Kokkos::HostSpace::name(), std::is_same_v<T, float>, graph.n_local,
            graph.n_total,  graph.num_edges()};
      });
}

template class ChgnetModel<float>;
template class ChgnetModel<double>;
template struct ChgnetStructureGraph<float>;
template struct ChgnetStructureGraph<double>;
template ChgnetStructureGraph<float> make_structure_graph<float>(const std::vector<double>&, const std::vector<int>&,
                                                                 const double*, const std::array<bool, 3>&, double,
                                                                 double);
template ChgnetStructureGraph<double> make_structure_graph<double>(const std::vector<double>&, const std::vector<int>&,
                                                                   const double*, const std::array<bool, 3>&, double,
                                                                   double);

}  // namespace fastmlip::models

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
// Reverse pass: chunk by chunk, each GMLP's activations are read where the forward left them
// (kept per layer when the step's fit in set_activation_budget, i.e. small cells) or recomputed
// from its gathered input, and differentiated in the same chunk.
//
// Every block is a stage on ExecSpace (chgnet_stages.hpp lists them in order): the geometry
// (chgnet_geometry.hpp), the stored embeddings (chgnet_embedding.hpp), the AtomConvs
// (chgnet_atom_conv.hpp), BondConv and AngleUpdate (chgnet_angle_blocks.hpp) and the Magmom and
// Readout heads (chgnet_heads.hpp). This driver holds their storage, in ExecSpace's memory, and
// runs them forward, then backwards. Host memory is touched only at the edges of a call: the
// caller's exchange gets host rows (exchange_on_host.hpp), or the node and slot rows where they
// are if it takes them there (a /kk style), and the results are copied to the caller's host
// vectors.
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
#include "graph/impl/atom_graph_impl.hpp"  // host_value
#include "graph/neighbor_list.hpp"
#include "kernels/dense.hpp"
#include "kernels/gated_mlp.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/layer_norm.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "models/chgnet/chgnet_angle_blocks.hpp"
#include "models/chgnet/chgnet_atom_conv.hpp"
#include "models/chgnet/chgnet_embedding.hpp"
#include "models/chgnet/chgnet_geometry.hpp"
#include "models/chgnet/chgnet_heads.hpp"
#include "models/chgnet/chgnet_stages.hpp"
#include "models/exchange_on_host.hpp"
#include "models/image_exchange.hpp"

namespace fastmlip::models {

namespace {

using HostExec = Kokkos::DefaultHostExecutionSpace;
template <class T>
using Dense = kernels::Dense<T>;
template <class T>
using LayerNorm = kernels::LayerNorm<T>;
template <class T>
using GatedMlp = kernels::GatedMlp<T>;

}  // namespace

/// dE/dr of each short edge's own edge (distinct edges: no two threads write one entry).
template <class ExecSpace>
struct AddShortGradient {
  Kokkos::View<double*, ExecSpace> g_r;
  Kokkos::View<const int*, ExecSpace> short_edge;
  Kokkos::View<const double*, ExecSpace> g_short;
  KOKKOS_INLINE_FUNCTION void operator()(int s) const { g_r(short_edge(s)) += g_short(s); }
};

template <class ExecSpace, class T>
struct ChgnetModel<ExecSpace, T>::Impl {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "ChgnetModel: T must be float or double");
  using Memory = typename ExecSpace::memory_space;
  using Mat = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMat = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Doubles = Kokkos::View<double*, ExecSpace>;

  std::string source, version;
  double r_atom = 6.0, r_bond = 3.0;
  int Fa = 0, Fb = 0, Fg = 0, n_radial = 0, n_angular = 0, n_conv = 0, n_elements = 0;
  std::vector<double> atom_ref;  // [n_elements]
  bool gmlp_norm = true;
  std::optional<chgnet::Embedding<ExecSpace, T>> embed;     // x^0, short b^0, w' (chgnet_embedding.hpp)
  std::optional<chgnet::AtomConv<ExecSpace, T>> atom_conv;  // the AtomConvs (chgnet_atom_conv.hpp)
  std::optional<chgnet::AngleBlocks<ExecSpace, T>>
      angle_blocks;                                  // BondConvs, AngleUpdates (chgnet_angle_blocks.hpp)
  std::optional<chgnet::Heads<ExecSpace, T>> heads;  // Magmom and Readout (chgnet_heads.hpp)
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

  Impl(const io::PotentialFile& f, kernels::DensePath path) : file(&f) {
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

    const Dense<T> bond_embedding = dense("bond_embedding", n_radial, Fb, false);
    const Dense<T> bond_weights_ag = dense("bond_weights_ag", n_radial, Fa, false);
    const Dense<T> bond_weights_bg = dense("bond_weights_bg", n_radial, Fb, false);
    const Dense<T> angle_embedding = dense("angle_embedding", n_angular, Fg, false);
    std::vector<GatedMlp<T>> atom_gmlp;
    std::vector<Dense<T>> atom_out;
    for (int k = 0; k < n_conv; ++k) {
      const std::string a = "atom_conv_layers." + std::to_string(k);
      atom_gmlp.push_back(gated(a + ".twoBody_atom", {Fa, Fb, Fa}, h_atom, Fa));
      atom_out.push_back(dense(a + ".mlp_out.layers.1", Fa, Fa, out_bias));
    }
    std::vector<GatedMlp<T>> bond_gmlp, angle_gmlp;
    std::vector<Dense<T>> bond_out;
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
                  bond_weights_bg, path);
    heads.emplace(readout_norm, readout, atom_ref, site_wise, path);
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
    atom_conv.emplace(basis_ag, bond_embedding, bond_weights_ag, atom_gmlp, atom_out, long_bias, path);
    angle_blocks.emplace(fp, angle_embedding, bond_gmlp, bond_out, angle_gmlp, path);
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
  using Graph = typename ChgnetModel<ExecSpace, T>::Graph;
  using Buffer = kernels::impl::GrowBuffer<T, ExecSpace>;
  using DoubleBuffer = kernels::impl::GrowBuffer<double, ExecSpace>;
  int N = 0, NL = 0, E = 0, S = 0, A = 0, n_slots = 0;
  chgnet::Geometry<ExecSpace, T> geo;  // short edges, angles, r, theta (chgnet_geometry.hpp)
  Kokkos::View<const int*, Memory> short_start;  // [NL + 1] the short edges by centre
  // Stored features, in ExecSpace's memory: x^k of every node, b^k of the short edges only (long
  // edges' rows are b^0 plus biases, recomputed with w per chunk of edges), and one array of angle
  // rows, g^k for the latest k >= 1 (g^0 is recomputed per chunk of angles). With about 100 edges
  // and 100 angles per atom the per-edge and per-angle rows would otherwise be most of the memory.
  // Each array is a window on storage kept between calls (GrowBuffer), so an MD step allocates
  // nothing once the system stops growing.
  //
  // Angle rows dominate what is left (about 130 angles per atom at 64 values each, 33 KB per atom
  // in float32), so there is one array of them, whatever the number of layers: g^k in the forward
  // (AngleUpdate overwrites g^k with g^{k+1}), then dE/dg^k in the reverse. The last BondConv's
  // reverse, the first to reach an angle's dE/dg, writes it over that angle's g^{K-1} once it has
  // read it; each AngleUpdate's reverse turns dE/dg^{k+1} into dE/dg^k in place; the blocks that
  // read an earlier g^k recompute it per chunk of angles from g^0 (chgnet_angle_blocks.hpp's
  // AngleFeatures: one AngleUpdate forward per layer below k, the chunk's rows only). The reverse
  // holds two dE/db^k at a time (a ring of two), and H and its adjoint share storage (the
  // forward's H is dead before the reverse starts).
  std::vector<Buffer> x_buf, bs_buf, gx_buf, gb_buf;
  Buffer angle_buf{"fastmlip::chgnet::g_then_grad_g"};
  Buffer w_bg_buf{"fastmlip::chgnet::w_bg"}, H_buf{"fastmlip::chgnet::H_and_grad_H"},
      gw_bg_buf{"fastmlip::chgnet::grad_w_bg"};
  DoubleBuffer site_buf{"fastmlip::chgnet::site_energy"}, magmom_buf{"fastmlip::chgnet::magmom"},
      g_r_buf{"fastmlip::chgnet::grad_r"}, g_theta_buf{"fastmlip::chgnet::grad_theta"},
      g_short_buf{"fastmlip::chgnet::grad_r_short"}, edge_grad_buf{"fastmlip::chgnet::edge_gradient"};
  kernels::impl::GrowBuffer<T, Kokkos::HostSpace> exchange_host{"fastmlip::chgnet::exchange_rows_host"};
  // The exchanges done here when the caller names every ghost's owner (image_exchange.hpp).
  ImageExchange<ExecSpace> images;
  Mat w_bg, H;
  std::vector<Mat> x, bs;  // x^k [N][Fa], short b^k [S][Fb]
  Mat g;                   // g^{g_level} [A][Fg] on angle_buf (none while g_level is 0: g^0 is not stored)
  int g_level = 0;

  void size_buffers() {
    auto labelled = [](int n, const char* label) { return std::vector<Buffer>(n, Buffer(label)); };
    if (x_buf.empty()) {
      x_buf = labelled(n_conv + 1, "fastmlip::chgnet::x");
      bs_buf = labelled(n_conv, "fastmlip::chgnet::b");
      gx_buf = labelled(n_conv + 1, "fastmlip::chgnet::grad_x");
      gb_buf = labelled(2, "fastmlip::chgnet::grad_b");  // the ring: dE/db^k in gb_buf[k % 2]
    }
  }

  void validate(const Graph& gr, const ChgnetExchange<T>* exchange) {
    auto bad = [&](const std::string& what) { throw InputError("ChgnetModel::compute: " + what); };
    graph::check_graph(gr, n_elements, "ChgnetModel::compute",
                       "the model has " + std::to_string(n_elements) + " elements");
    if (gr.n_total > gr.n_local && exchange == nullptr) bad("the graph has ghost nodes but no ChgnetExchange");
    if (gr.slot_start.data() == nullptr || (gr.num_edges() > 0 && gr.reverse_slot.data() == nullptr)) {
      bad("slot_start (and reverse_slot, with edges) must be given");
    }
    // The slot layout is checked by the geometry stage (compute_chgnet_geometry).
  }

  /// A result array into the caller's host vector.
  static void to_host(const Kokkos::View<const double*, Memory>& v, std::vector<double>& out) {
    out.resize(v.extent(0));
    Kokkos::deep_copy(Kokkos::View<double*, Kokkos::HostSpace>(out.data(), out.size()), v);
  }

  /// The geometry (stage "compute_basis"; the bases themselves are evaluated per chunk where
  /// they are used, from r and theta).
  void compute_basis(const Graph& gr, ChgnetExchange<T>* exchange) {
    N = gr.n_total;
    NL = gr.n_local;
    E = gr.num_edges();
    chgnet::compute_chgnet_geometry(gr, gr.slot_start, gr.reverse_slot, "ChgnetModel::compute", geo);
    // A local node's short edges are its slots (chgnet_geometry.hpp): their CSR is slot_start's.
    short_start = Kokkos::subview(gr.slot_start, Kokkos::make_pair(0, NL + 1));
    n_slots = graph::impl::host_value(gr.slot_start, N);
    images.set(exchange != nullptr ? exchange->ghost_owners() : nullptr, NL, N);
    if (images.active()) {
      images.set_slots(gr.slot_start, n_slots, graph::impl::host_value(gr.slot_start, NL));
    }
    S = geo.num_short;
    A = geo.num_angles;
    size_buffers();
    angle_blocks->plan(angles());
  }

  /// Embeddings (stage "compute_embedding").
  void compute_embedding(const Graph& gr) {
    x.assign(n_conv + 1, Mat());
    bs.assign(n_conv, Mat());
    g = Mat();
    g_level = 0;
    x[0] = x_buf[0].get(N, Fa);
    bs[0] = bs_buf[0].get(S, Fb);
    w_bg = w_bg_buf.get(S, Fb);
    embed->compute(gr.species, geo.r_short, x[0], bs[0], w_bg);
  }

  /// Whether this step keeps the gated MLPs' activations from the forward to the reverse pass:
  /// when the whole step's fit in keep_bytes (small systems, such as FastCHGNet's 8- to 32-atom
  /// cells), the reverse skips recomputing the forward (a third of its work). Larger systems
  /// recompute, so memory stays proportional to the graph. The arithmetic is the same either
  /// way: results do not depend on which.
  double keep_bytes = 512.0 * 1024 * 1024;
  void plan_keep(bool gradients) {
    const int K = n_conv - 1, tile = kernels::kGatedMlpTile;
    const double tiles_e = std::ceil(E / double(tile)), tiles_a = std::ceil(A / double(tile));
    const double per_row = 2.0 * 128 + 8.0 * std::max({Fa, Fb, Fg}) + 2;  // values a tile row keeps, at most
    const double bytes = (tiles_e * n_conv + tiles_a * (2 * K - 1)) * tile * per_row * sizeof(T);
    const bool keep = gradients && bytes <= keep_bytes;
    atom_conv->keep(keep);
    angle_blocks->keep(keep);
  }

  /// What the AtomConvs read of the graph (chgnet_atom_conv.hpp).
  typename chgnet::AtomConv<ExecSpace, T>::Edges atom_edges(const Graph& gr) const {
    typename chgnet::AtomConv<ExecSpace, T>::Edges e;
    e.n_local = NL, e.n_total = N;
    e.center = gr.center, e.neighbor = gr.neighbor, e.center_start = gr.center_start;
    e.edge_slot = geo.edge_slot, e.r = geo.r;
    return e;
  }

  /// AtomConv k: x^{k+1} from x^k (ghost rows of x^k current).
  void compute_atom_conv(int k, const Graph& gr) {
    x[k + 1] = x_buf[k + 1].get(N, Fa);
    atom_conv->compute(k, atom_edges(gr), x[k], bs[k], x[k + 1]);
  }

  /// What BondConv and AngleUpdate read of the geometry (chgnet_angle_blocks.hpp).
  typename chgnet::AngleBlocks<ExecSpace, T>::Angles angles() const {
    typename chgnet::AngleBlocks<ExecSpace, T>::Angles an;
    an.n_local = NL, an.num_slots = n_slots;
    an.angle_a = geo.angle_a, an.angle_b = geo.angle_b, an.angle_c = geo.angle_c;
    an.angle_start = geo.angle_start, an.short_start = short_start;
    an.short_reverse = geo.short_reverse, an.theta = geo.theta;
    return an;
  }
  /// g^k (none for k = 0: recomputed from theta) in the forward, where g holds it.
  ConstMat angle_features(int k) const {
    if (k > 0 && g_level != k) {
      // A stage order this driver does not know (chgnet_stages.hpp changed without it).
      throw Error("ChgnetModel: internal error: g^" + std::to_string(k) + " asked for while g^" +
                  std::to_string(g_level) + " is held");
    }
    return k > 0 ? ConstMat(g) : ConstMat();
  }
  /// Where the reverse of a block that reads g^k finds it: held in g by the last BondConv (the
  /// forward's last g^k), recomputed per chunk by the others (the array holds dE/dg by then).
  typename chgnet::AngleBlocks<ExecSpace, T>::AngleFeatures reverse_angle_features(int k) const {
    typename chgnet::AngleBlocks<ExecSpace, T>::AngleFeatures f;
    if (k == 0 || angle_blocks->keeps()) {
      return f;  // g^0 comes from theta; kept activations need no g
    }
    if (k == n_conv - 2) {
      f.held = angle_features(k);
      return f;
    }
    for (int j = 0; j < k; ++j) {
      f.b_next.push_back(bs[j + 1]);
      f.x_next.push_back(x[j + 1]);
    }
    return f;
  }

  /// BondConv k: short b^{k+1} from b^k, g^k, x^{k+1}; the ghost slots of H from their owners.
  void compute_bond_conv(int k, ChgnetExchange<T>* exchange) {
    const auto an = angles();
    H = H_buf.get(n_slots, Fb);
    angle_blocks->compute_bond_messages(k, an, bs[k], angle_features(k), x[k + 1], w_bg, H);
    if (images.slots_active()) {
      images.forward_slots(H);
    } else if (exchange && exchange->rows_in_model_memory()) {
      exchange->forward_slots(H.data(), Fb);
    } else if (exchange) {
      exchange_on_host(H, NL, ExchangeRows::any, exchange_host,
                       [&](T* rows) { exchange->forward_slots(rows, Fb); });
    }
    bs[k + 1] = bs_buf[k + 1].get(S, Fb);
    angle_blocks->finish_bond(k, an, H, bs[k], bs[k + 1]);
  }

  /// AngleUpdate k: g^{k+1} from b^{k+1}, g^k, x^{k+1}, over g^k.
  void compute_angle_update(int k) {
    angle_features(k);         // checks that g holds g^k
    g = angle_buf.get(A, Fg);  // the same storage: g^k's rows are kept
    angle_blocks->compute_angle(k, angles(), bs[k + 1], x[k + 1], g);
    g_level = k + 1;
  }

  /// Site energies and the energy (stage "compute_readout", chgnet_heads.hpp).
  void compute_readout(const Graph& gr, ChgnetDeviceResult<Memory>& result) {
    const Doubles site = site_buf.vector(NL);
    heads->compute(Kokkos::subview(x[n_conv], Kokkos::make_pair(0, NL), Kokkos::ALL),
                   Kokkos::subview(gr.species, Kokkos::make_pair(0, NL)), site);
    result.site_energy = site;
    // The energy is summed on the host in node order, so that it is the same bits wherever the
    // model runs.
    to_host(site, site_host);
    result.energy = 0;
    for (int i = 0; i < NL; ++i) {
      result.energy += site_host[i];
    }
  }
  std::vector<double> site_host;

  // ---- reverse ----------------------------------------------------------------------------
  std::vector<Mat> gxs, gbs;  // adjoints of x^k, short b^k (two live: gbs[k] is gb_buf[k % 2])
  Mat gg;                     // dE/dg^k for the k whose blocks are being reversed
  Mat gw_bg, gH;
  Doubles g_r, g_theta;  // dE/dr (edges), dE/dtheta (angles)

  /// dE/dx^{n_conv} (local rows; ghost rows zero) from the readout.
  void reverse_readout() {
    gxs[n_conv] = gx_buf[n_conv].zeros(N, Fa);
    heads->reverse(Kokkos::subview(gxs[n_conv], Kokkos::make_pair(0, NL), Kokkos::ALL));
  }

  /// Reverse of AtomConv k: from dE/dx^{k+1} (local rows complete) to dE/dx^k (local and
  /// ghost rows; not for k = 0, whose x^0 depends on the species only), dE/db^k and dE/dr.
  void reverse_atom_conv(int k, const Graph& gr) {
    atom_conv->reverse(k, atom_edges(gr), x[k], bs[k], gxs[k + 1], k > 0 ? gxs[k] : Mat(), gbs[k], g_r);
  }

  /// Reverse of BondConv k: from dE/db^{k+1} (short) to dE/db^k, dE/dg^k, dE/dx^{k+1} (local
  /// rows) and the bond-graph weights w'.
  void reverse_bond_conv(int k, ChgnetExchange<T>* exchange) {
    const auto an = angles();
    const auto g_k = reverse_angle_features(k);
    gH = H_buf.get(n_slots, Fb);
    gbs[k] = gb_buf[k % 2].zeros(S, Fb);  // over dE/db^{k+2}, dead since BondConv k+1's reverse
    angle_blocks->start_bond_reverse(k, an, gbs[k + 1], gbs[k], gH);
    if (images.slots_active()) {
      images.reverse_slots(gH);
    } else if (exchange && exchange->rows_in_model_memory()) {
      exchange->reverse_slots(gH.data(), Fb);
    } else if (exchange) {
      exchange_on_host(gH, NL, ExchangeRows::any, exchange_host,
                       [&](T* rows) { exchange->reverse_slots(rows, Fb); });
    }
    // The last BondConv writes dE/dg^k over g^k (gg and g are one array); the others add to it.
    angle_blocks->reverse_bond_messages(k, an, bs[k], g_k, x[k + 1], w_bg, gH, gbs[k], k > 0 ? gg : Mat(),
                                        k == n_conv - 2, g_theta, gxs[k + 1], gw_bg);
  }

  /// Reverse of AngleUpdate k: from dE/dg^{k+1} to dE/dg^k (in gg, in place), dE/db^{k+1},
  /// dE/dx^{k+1}.
  void reverse_angle_update(int k) {
    const auto g_k = reverse_angle_features(k);
    angle_blocks->reverse_angle(k, angles(), bs[k + 1], g_k, x[k + 1], gg, gbs[k + 1], g_theta, gxs[k + 1]);
  }

  /// Reverse of the embeddings and bases: dE/d(edge vectors) (stage "reverse_basis").
  void reverse_basis(const Graph& gr, ChgnetDeviceResult<Memory>& result) {
    // The short edges: b^0's adjoint (the long edges' went in with each AtomConv) through the
    // 6 A basis, and the bond-graph weights' through the 3 A basis.
    const Doubles g_short = g_short_buf.vector(S);
    embed->reverse(geo.r_short, gbs[0], gw_bg, g_short);
    AddShortGradient<ExecSpace> f{g_r, geo.short_edge, g_short};
    Kokkos::parallel_for("fastmlip::chgnet::grad_r_short_edges", Kokkos::RangePolicy<ExecSpace>(0, S), f);
    // Then dE/dr and dE/dtheta into dE/d(edge vectors): the geometry stage's reverse.
    const auto grad = edge_grad_buf.vector(static_cast<std::size_t>(E) * 3);
    chgnet::reverse_chgnet_geometry(
        gr, gr.slot_start, geo, g_r, g_theta,
        Kokkos::View<double* [3], Kokkos::LayoutRight, ExecSpace>(grad.data(), E));
    result.edge_gradient = Kokkos::View<const double* [3], Kokkos::LayoutRight, Memory>(grad.data(), E);
  }

  // ---- driver: the stage list (chgnet_stages.hpp), forward, then backwards ----------------

  void compute_stage(const chgnet::Stage& s, const Graph& gr, ChgnetExchange<T>* exchange, bool gradients,
                     ChgnetDeviceResult<Memory>& result) {
    using K = chgnet::StageKind;
    switch (s.kind) {
      case K::Basis:
        compute_basis(gr, exchange);
        plan_keep(gradients);
        return;
      case K::Embedding:
        return compute_embedding(gr);
      case K::AtomConv:
        return compute_atom_conv(s.layer, gr);
      case K::ExchangeAtoms:
        if (images.active()) {
          images.forward(x[s.layer]);
        } else if (exchange) {
          exchange_node_rows<T>(*exchange, x[s.layer], NL, true, exchange_host);
        }
        return;
      case K::BondConv:
        return compute_bond_conv(s.layer, exchange);
      case K::AngleUpdate:
        return compute_angle_update(s.layer);
      case K::Magmom: {
        const Doubles m = magmom_buf.vector(NL);
        heads->magmom(Kokkos::subview(x[s.layer], Kokkos::make_pair(0, NL), Kokkos::ALL), m);
        result.magmom = m;
        return;
      }
      case K::Readout:
        return compute_readout(gr, result);
    }
  }

  void reverse_stage(const chgnet::Stage& s, const Graph& gr, ChgnetExchange<T>* exchange,
                     ChgnetDeviceResult<Memory>& result) {
    using K = chgnet::StageKind;
    switch (s.kind) {
      case K::Readout:
        return reverse_readout();
      case K::AtomConv:
        return reverse_atom_conv(s.layer, gr);
      case K::ExchangeAtoms:
        if (images.active()) {
          images.reverse(gxs[s.layer]);
        } else if (exchange) {
          exchange_node_rows<T>(*exchange, gxs[s.layer], NL, false, exchange_host);
        }
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

  void compute(const Graph& gr, ChgnetExchange<T>* exchange, bool gradients,
               ChgnetDeviceResult<Memory>& result) {
    validate(gr, exchange);
    result = ChgnetDeviceResult<Memory>();
    for (const chgnet::Stage& s : stages) {
      compute_stage(s, gr, exchange, gradients, result);
    }
    if (!gradients) return;

    const int K = n_conv - 1;
    gxs.assign(n_conv + 1, Mat());
    for (int k = 1; k < n_conv; ++k) {
      gxs[k] = gx_buf[k].zeros(N, Fa);
    }
    // dE/db^k for the last AtomConv's k; each BondConv k's reverse starts its dE/db^k.
    gbs.assign(n_conv, Mat());
    gbs[K] = gb_buf[K % 2].zeros(S, Fb);
    // dE/dg^k for k >= 1 (g^0's goes into dE/dtheta directly), on g's storage: the last
    // BondConv's reverse writes the first part, dE/dg^{K-1}, over g^{K-1}.
    gg = K > 1 ? angle_buf.get(A, Fg) : Mat();
    g_r = g_r_buf.zeros(E);
    g_theta = g_theta_buf.zeros(A);
    gw_bg = gw_bg_buf.zeros(S, Fb);
    for (auto s = stages.rbegin(); s != stages.rend(); ++s) reverse_stage(*s, gr, exchange, result);
  }
};

template <class T>
ChgnetGraph<T> ChgnetStructureGraph<T>::view() const {
  ChgnetGraph<T> g;
  static_cast<graph::AtomGraph<T>&>(g) =
      graph::host_graph(n_atoms, n_atoms, species.data(), static_cast<int>(center.size()), center.data(),
                        neighbor.data(), center_start.data(), vectors.data());
  g.slot_start = Kokkos::View<const int*, Kokkos::HostSpace>(slot_start.data(), slot_start.size());
  g.reverse_slot = Kokkos::View<const int*, Kokkos::HostSpace>(reverse_slot.data(), reverse_slot.size());
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

template <class ExecSpace, class T>
ChgnetModel<ExecSpace, T>::ChgnetModel(const io::PotentialFile& file, kernels::DensePath path)
    : m_impl(std::make_unique<Impl>(file, path)) {}
template <class ExecSpace, class T>
ChgnetModel<ExecSpace, T>::~ChgnetModel() = default;
template <class ExecSpace, class T>
ChgnetModel<ExecSpace, T>::ChgnetModel(ChgnetModel&&) noexcept = default;
template <class ExecSpace, class T>
ChgnetModel<ExecSpace, T>& ChgnetModel<ExecSpace, T>::operator=(ChgnetModel&&) noexcept = default;
template <class ExecSpace, class T>
double ChgnetModel<ExecSpace, T>::cutoff() const {
  return m_impl->r_atom;
}
template <class ExecSpace, class T>
double ChgnetModel<ExecSpace, T>::bond_cutoff() const {
  return m_impl->r_bond;
}
template <class ExecSpace, class T>
int ChgnetModel<ExecSpace, T>::num_elements() const {
  return m_impl->n_elements;
}
template <class ExecSpace, class T>
std::string ChgnetModel<ExecSpace, T>::species_problem(int z) const {
  return m_impl->species_problem(z);
}
template <class ExecSpace, class T>
int ChgnetModel<ExecSpace, T>::atom_width() const {
  return m_impl->Fa;
}
template <class ExecSpace, class T>
int ChgnetModel<ExecSpace, T>::bond_width() const {
  return m_impl->Fb;
}
template <class ExecSpace, class T>
void ChgnetModel<ExecSpace, T>::set_activation_budget(double bytes) {
  m_impl->keep_bytes = bytes;
}
template <class ExecSpace, class T>
const std::string& ChgnetModel<ExecSpace, T>::version() const {
  return m_impl->version;
}
template <class ExecSpace, class T>
void ChgnetModel<ExecSpace, T>::compute(const Graph& graph, ChgnetExchange<T>* exchange, bool gradients,
                                        ChgnetResult& result) {
  ChgnetDeviceResult<memory_space> out;
  compute(graph, exchange, gradients, out);
  result.energy = out.energy;
  result.site_energy = m_impl->site_host;
  Impl::to_host(out.magmom, result.magmom);
  result.edge_gradient.resize(3 * out.edge_gradient.extent(0));
  Kokkos::deep_copy(Kokkos::View<double* [3], Kokkos::LayoutRight, Kokkos::HostSpace>(
                        result.edge_gradient.data(), out.edge_gradient.extent(0)),
                    out.edge_gradient);
}

template <class ExecSpace, class T>
void ChgnetModel<ExecSpace, T>::compute(const Graph& graph, ChgnetExchange<T>* exchange, bool gradients,
                                        ChgnetDeviceResult<memory_space>& result) {
  translate_out_of_memory([&] { m_impl->compute(graph, exchange, gradients, result); },
                          [&] {
                            return MemoryContext{m_impl->source,
                                                 ExecSpace::memory_space::name(),
                                                 std::is_same_v<T, float>,
                                                 graph.n_local,
                                                 graph.n_total,
                                                 graph.num_edges()};
                          });
}

template class ChgnetModel<HostExec, float>;
template class ChgnetModel<HostExec, double>;
#if defined(KOKKOS_ENABLE_CUDA)
// The same stages compiled by Kokkos for CUDA: CHGNet's device path (issues 18 and 20).
template class ChgnetModel<Kokkos::Cuda, float>;
template class ChgnetModel<Kokkos::Cuda, double>;
#endif
template struct ChgnetStructureGraph<float>;
template struct ChgnetStructureGraph<double>;
template ChgnetStructureGraph<float> make_structure_graph<float>(const std::vector<double>&, const std::vector<int>&,
                                                                 const double*, const std::array<bool, 3>&, double,
                                                                 double);
template ChgnetStructureGraph<double> make_structure_graph<double>(const std::vector<double>&, const std::vector<int>&,
                                                                   const double*, const std::array<bool, 3>&, double,
                                                                   double);

}  // namespace fastmlip::models

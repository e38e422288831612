// SPDX-License-Identifier: MIT
// The MACE loader (docs/mace-potential.md): mace-torch 0.3.13's state_dict tensors, verbatim,
// plus the hyperparameters mace-torch keeps as Python attributes. Every tensor is asked for
// with the shape the hyperparameters imply, so a file that does not describe the model it
// claims to is refused here, naming the tensor, not later as a wrong number.
#include "models/mace/mace_spec.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "kernels/linear_kokkos.hpp"
#include "math/spherical_harmonics.hpp"
#include "models/mace/mace_model.hpp"

namespace fastmlip::models::mace {
namespace {

using io::kAnyExtent;
using Shape = std::vector<std::int64_t>;

const char* const kSupportedInteractions =
    "RealAgnosticInteractionBlock, RealAgnosticResidualInteractionBlock, "
    "RealAgnosticDensityInteractionBlock, "
    "RealAgnosticDensityResidualInteractionBlock, RealAgnosticResidualNonLinearInteractionBlock";

class Reader {
 public:
  explicit Reader(const io::PotentialFile& f) : m_f(f), m_name(f.display_name()) {}

  const std::string& name() const { return m_name; }

  [[noreturn]] void fail(const std::string& what) const { throw InputError(m_name + ": " + what); }
  [[noreturn]] void unsupported(const std::string& what) const { throw UnsupportedError(m_name + ": " + what); }

  template <class V>
  V hp(const std::string& key) const {
    return m_f.meta<V>("/hyperparameters/" + key);
  }
  bool has_hp(const std::string& key) const { return m_f.has_meta("/hyperparameters/" + key); }
  const nlohmann::json& hp_json(const std::string& key) const {
    return m_f.metadata.at(nlohmann::json::json_pointer("/hyperparameters/" + key));
  }
  Irreps irreps(const std::string& key) const {
    const auto text = hp<std::string>(key);
    try {
      return Irreps::parse(text);
    } catch (const InputError& e) {
      fail("hyperparameter '" + key + "' = '" + text + "' is not an irreps string: " + e.what());
    }
  }

  /// Values of tensor `name` (F64, or F32 widened) with the given shape.
  std::vector<double> tensor(const std::string& name, const Shape& shape) const {
    return m_f.values<double>(name, shape, io::Conversion::widen);
  }
  bool has_tensor(const std::string& name) const { return m_f.contains(name); }
  const io::Tensor& raw(const std::string& name) const { return m_f.get(name); }
  /// A scalar that mace-torch stores as an integer or floating buffer, of shape [] or [1]
  /// (ZBLBasis's a_exp / a_prefactor are one-element vectors in some versions).
  double number(const std::string& name) const {
    const auto& t = m_f.get(name);
    io::check_tensor(t, {t.dtype}, t.shape.empty() ? Shape{} : Shape{1}, m_name);
    if (t.dtype == io::DType::F64 || t.dtype == io::DType::F32) {
      return t.as<double>(io::Conversion::widen)[0];
    }
    try {
      return static_cast<double>(t.as<std::int64_t>(io::Conversion::widen)[0]);
    } catch (const InputError&) {
      fail("tensor '" + name + "' has dtype " + io::dtype_name(t.dtype) + "; expected a number");
    }
  }

  /// Runs a table constructor, prefixing its InputError with the file and the block.
  template <class F>
  auto build(const std::string& where, F&& f) const -> decltype(f()) {
    try {
      return f();
    } catch (const UnsupportedError& e) {
      unsupported(where + ": " + e.what());
    } catch (const InputError& e) {
      fail(where + ": " + e.what());
    }
  }

 private:
  const io::PotentialFile& m_f;
  std::string m_name;
};

Shape flat(int n) { return {static_cast<std::int64_t>(n)}; }

/// e3nn o3.Linear(in -> out) and its flat weight tensor.
void read_linear(const Reader& r, const std::string& where, const std::string& tensor, const Irreps& in,
                 const Irreps& out, kernels::EquivariantLinear& lin, std::vector<double>& w) {
  lin = r.build(where, [&] { return kernels::EquivariantLinear::e3nn(in, out); });
  w = r.tensor(tensor, flat(lin.weight_numel));
}

void require_equal(const Reader& r, const std::string& what, const Irreps& got, const Irreps& expected) {
  if (got != expected) {
    r.fail(what + " is '" + got.str() + "' but must be '" + expected.str() + "' (mace-torch builds it so)");
  }
}

bool scalars_only(const Irreps& irreps) {
  for (const auto& e : irreps) {
    if (e.ir != Irrep{0, 1}) {
      return false;
    }
  }
  return true;
}

/// A mace-torch RadialMLP `prefix` (net.0, net.1 LayerNorm, net.2 SiLU, net.3, ...) whose input
/// is [B (nb), source embedding (C0), target embedding (C0)]: the MLP over B, and the first
/// layer's species terms, src[z] W_1[:, nb:nb+C0]^T and tgt[z] W_1[:, nb+C0:]^T per species.
void read_normed_mlp(const Reader& r, const std::string& where, const std::string& prefix,
                     const std::vector<int>& widths, int nb, const std::vector<double>& src,
                     const std::vector<double>& tgt, int E, int C0, kernels::NormedMLP& mlp,
                     std::vector<double>& first_source, std::vector<double>& first_target) {
  if (widths.size() < 2 || widths.front() != nb + 2 * C0) {
    r.fail(where + " widths must start with num_bessel + 2 x the node scalars (" +
           std::to_string(nb + 2 * C0) + ")");
  }
  const int L = static_cast<int>(widths.size()) - 1;
  mlp.widths = widths;
  mlp.widths[0] = nb;
  for (int l = 0; l < L; ++l) {
    const std::string lin = prefix + "net." + std::to_string(3 * l) + ".";
    auto w = r.tensor(lin + "weight", {widths[l + 1], widths[l]});
    if (l == 0) {
      const int H = widths[1], in = widths[0];
      std::vector<double> wb(static_cast<std::size_t>(H) * nb);
      first_source.assign(static_cast<std::size_t>(E) * H, 0.0);
      first_target.assign(static_cast<std::size_t>(E) * H, 0.0);
      for (int k = 0; k < H; ++k) {
        const double* row = w.data() + static_cast<std::size_t>(k) * in;
        std::copy(row, row + nb, wb.begin() + static_cast<std::ptrdiff_t>(k) * nb);
        for (int z = 0; z < E; ++z) {
          double s = 0, g = 0;
          for (int c = 0; c < C0; ++c) {
            s += src[static_cast<std::size_t>(z) * C0 + c] * row[nb + c];
            g += tgt[static_cast<std::size_t>(z) * C0 + c] * row[nb + C0 + c];
          }
          first_source[static_cast<std::size_t>(z) * H + k] = s;
          first_target[static_cast<std::size_t>(z) * H + k] = g;
        }
      }
      w = std::move(wb);
    }
    mlp.weight.push_back(std::move(w));
    mlp.bias.push_back(r.tensor(lin + "bias", flat(widths[l + 1])));
    if (l + 1 < L) {
      const std::string norm = prefix + "net." + std::to_string(3 * l + 1) + ".";
      mlp.gamma.push_back(r.tensor(norm + "weight", flat(widths[l + 1])));
      mlp.beta.push_back(r.tensor(norm + "bias", flat(widths[l + 1])));
    }
  }
  r.build(where, [&] {
    mlp.validate();
    return 0;
  });
}

/// RealAgnosticResidualNonLinearInteractionBlock's own parts (mace_spec.hpp, NonLinearSpec).
void read_nonlinear(const Reader& r, int t, const MaceSpec& spec, InteractionSpec& I) {
  const std::string h = "interactions/" + std::to_string(t) + "/";
  const std::string p = "interactions." + std::to_string(t) + ".";
  const std::string where = "interaction " + std::to_string(t);
  NonLinearSpec& N = *I.nonlinear;
  const int E = spec.num_elements, nb = spec.radial_basis.num_basis();
  const int C0 = I.node_feats.count(Irrep{0, 1});
  // source / target_embedding: e3nn Linear(E x 0e -> C0 x 0e), weights [E][C0] times 1/sqrt(E).
  auto embedding = [&](const std::string& name) {
    auto w = r.tensor(p + name + ".weight", flat(E * C0));
    for (double& v : w) {
      v /= std::sqrt(static_cast<double>(E));
    }
    return w;
  };
  const auto src = embedding("source_embedding"), tgt = embedding("target_embedding");
  read_normed_mlp(r, where + " conv_tp_weights", p + "conv_tp_weights.",
                  r.hp<std::vector<int>>(h + "radial_mlp"), nb, src, tgt, E, C0, N.radial, N.radial_source,
                  N.radial_target);
  if (N.radial.width_out() != I.tp.weight_numel) {
    r.fail("hyperparameter '" + h + "radial_mlp' must end with the conv_tp weight count (" +
           std::to_string(I.tp.weight_numel) + ")");
  }
  read_normed_mlp(r, where + " density_fn", p + "density_fn.", r.hp<std::vector<int>>(h + "density_mlp"), nb,
                  src, tgt, E, C0, N.density, N.density_source, N.density_target);
  if (N.density.width_out() != 1) {
    r.fail("hyperparameter '" + h + "density_mlp' must end with 1");
  }
  N.alpha = r.number(p + "alpha");
  N.beta = r.number(p + "beta");
  if (!std::isfinite(N.alpha) || !std::isfinite(N.beta)) {
    r.fail("tensors '" + p + "alpha' and '" + p + "beta' must be finite");
  }
  N.nonlin = r.irreps(h + "irreps_nonlin");
  read_linear(r, where + " linear_1", p + "linear_1.weight", I.tp.irreps_out, N.nonlin, I.linear, I.w_linear);
  read_linear(r, where + " linear_res", p + "linear_res.weight", I.edge, N.nonlin, N.linear_res,
              N.w_linear_res);
  read_linear(r, where + " linear_2", p + "linear_2.weight", I.target, I.target, N.linear_2, N.w_linear_2);
  read_linear(r, where + " skip_tp", p + "skip_tp.weight", I.node_feats, I.hidden, I.skip, I.w_skip);

  // GatedEquivariantBlock's slices, as the converter read them from the module.
  const auto& g = r.hp_json(h + "gate");
  const auto scalars = g.at("scalars").get<std::vector<int>>(), gates = g.at("gates").get<std::vector<int>>();
  N.scalar_cst = g.at("scalar_cst").get<double>();
  N.gate_cst = g.at("gate_cst").get<double>();
  const int width_in = N.nonlin.dim();
  const auto bad = [&](const std::string& what) { r.fail("hyperparameter '" + h + "gate': " + what); };
  if (scalars.size() != 2 || gates.size() != 2 || scalars[0] != 0 || gates[0] != scalars[1]) {
    bad("scalars must be [0, n] and gates [n, g]");
  }
  for (int k = 0; k < scalars[1]; ++k) {
    N.gate_source.push_back(k);
    N.gate_gate.push_back(-1);
  }
  for (const auto& info : g.at("gated")) {
    const auto v = info.get<std::vector<int>>();  // start, length, irrep dimension, multiplicity, gate offset
    if (v.size() != 5 || v[2] < 1 || v[1] != v[2] * v[3] || v[0] < 0 || v[0] + v[1] > width_in || v[4] < 0 ||
        v[4] + v[3] > gates[1]) {
      bad("a gated block [start, length, irrep dimension, multiplicity, gate offset] outside the input");
    }
    for (int j = 0; j < v[1]; ++j) {  // e3nn's mul_ir layout: channel j / dim of the block
      N.gate_source.push_back(v[0] + j);
      N.gate_gate.push_back(gates[0] + v[4] + j / v[2]);
    }
  }
  if (static_cast<int>(N.gate_source.size()) != I.target.dim()) {
    bad("its output has " + std::to_string(N.gate_source.size()) + " values, the target irreps " +
        std::to_string(I.target.dim()));
  }
  if (!(N.scalar_cst > 0) || !(N.gate_cst > 0) || !std::isfinite(N.scalar_cst) ||
      !std::isfinite(N.gate_cst)) {
    bad("scalar_cst and gate_cst must be positive");
  }
}

void read_interaction(const Reader& r, int t, const MaceSpec& spec, InteractionSpec& I) {
  const std::string h = "interactions/" + std::to_string(t) + "/";
  const std::string p = "interactions." + std::to_string(t) + ".";
  const std::string where = "interaction " + std::to_string(t);
  const auto cls = r.hp<std::string>(h + "class");
  if (cls == "RealAgnosticResidualInteractionBlock" || cls == "RealAgnosticDensityResidualInteractionBlock") {
    I.residual = true;
    I.density = cls == "RealAgnosticDensityResidualInteractionBlock";
  } else if (cls == "RealAgnosticResidualNonLinearInteractionBlock") {
    I.residual = true;
    I.nonlinear.emplace();
  } else if (cls == "RealAgnosticInteractionBlock" || cls == "RealAgnosticDensityInteractionBlock") {
    I.residual = false;
    I.density = cls == "RealAgnosticDensityInteractionBlock";
  } else {
    r.unsupported(where + " is a '" + cls + "'; supported interaction blocks: " + kSupportedInteractions);
  }
  I.node_feats = r.irreps(h + "node_feats_irreps");
  I.target = r.irreps(h + "target_irreps");
  I.hidden = r.irreps(h + "hidden_irreps");
  const Irreps edge_attrs = r.irreps(h + "edge_attrs_irreps");
  require_equal(r, "hyperparameter '" + h + "edge_attrs_irreps'", edge_attrs, Irreps::spherical_harmonics(spec.max_ell));
  const Irreps mid = r.irreps(h + "irreps_mid");
  I.avg_num_neighbors = r.hp<double>(h + "avg_num_neighbors");
  if (!(I.avg_num_neighbors > 0) || !std::isfinite(I.avg_num_neighbors)) {
    r.fail("hyperparameter '" + h + "avg_num_neighbors' must be positive, got " + std::to_string(I.avg_num_neighbors));
  }

  // edge_irreps is written only where it differs from node_feats_irreps.
  I.edge = r.has_hp(h + "edge_irreps") ? r.irreps(h + "edge_irreps") : I.node_feats;
  read_linear(r, where + " linear_up", p + "linear_up.weight", I.node_feats, I.edge, I.linear_up,
              I.w_linear_up);
  I.tp =
      r.build(where + " conv_tp", [&] { return kernels::ChannelwiseTP::mace(I.edge, edge_attrs, I.target); });
  require_equal(r, "hyperparameter '" + h + "irreps_mid' (the conv_tp output)", mid, I.tp.irreps_out);
  if (r.has_hp(h + "conv_tp_weight_numel") && r.hp<int>(h + "conv_tp_weight_numel") != I.tp.weight_numel) {
    r.fail("hyperparameter '" + h + "conv_tp_weight_numel' = " + std::to_string(r.hp<int>(h + "conv_tp_weight_numel")) +
           " but the conv_tp built from the irreps has " + std::to_string(I.tp.weight_numel) + " weights");
  }

  if (I.nonlinear) {
    return read_nonlinear(r, t, spec, I);
  }
  // conv_tp_weights: e3nn FullyConnectedNet [num_bessel, hidden.., weight_numel].
  const auto widths = r.hp<std::vector<int>>(h + "radial_mlp");
  if (widths.size() < 2 || widths.front() != spec.radial_basis.num_basis() ||
      widths.back() != I.tp.weight_numel) {
    std::string w;
    for (int x : widths) {
      w += (w.empty() ? "" : ", ") + std::to_string(x);
    }
    r.fail("hyperparameter '" + h + "radial_mlp' = [" + w + "] must start with num_bessel (" +
           std::to_string(spec.radial_basis.num_basis()) + ") and end with the conv_tp weight count (" +
           std::to_string(I.tp.weight_numel) + ")");
  }
  I.mlp.widths = widths;
  I.mlp.act_cst = r.hp<double>(h + "radial_mlp_cst");
  for (std::size_t k = 0; k + 1 < widths.size(); ++k) {
    I.mlp.weights.push_back(r.tensor(p + "conv_tp_weights.layer" + std::to_string(k) + ".weight",
                                     {widths[k], widths[k + 1]}));
  }
  r.build(where + " conv_tp_weights", [&] {
    I.mlp.validate();
    return 0;
  });

  read_linear(r, where + " linear", p + "linear.weight", I.tp.irreps_out, I.target, I.linear, I.w_linear);
  if (I.density) {
    // density_fn: e3nn FullyConnectedNet [num_bessel, 1], one layer without activation, i.e.
    // d_e = B_e . w / sqrt(num_bessel); the message is divided by 1 + sum_e tanh(d_e^2).
    const int nb = spec.radial_basis.num_basis();
    I.w_density = r.tensor(p + "density_fn.layer0.weight", {nb, 1});
    for (double& w : I.w_density) {
      w /= std::sqrt(static_cast<double>(nb));
    }
  } else {
    // mace-torch divides the linear's output by avg_num_neighbors; a linear map, so fold it in.
    for (double& w : I.w_linear) {
      w /= I.avg_num_neighbors;
    }
  }

  const Irreps skip_in = I.residual ? I.node_feats : I.target;
  const Irreps skip_out = I.residual ? I.hidden : I.target;
  I.skip = r.build(where + " skip_tp",
                   [&] { return kernels::EquivariantLinear::element_skip(skip_in, spec.num_elements, skip_out); });
  I.w_skip = I.skip.weights_from_e3nn(r.tensor(p + "skip_tp.weight", flat(I.skip.weight_numel * I.skip.num_sets)));
}

/// embeddings (mace-torch's embedding_specs, MACE-OMOL; graph_embedding.hpp): read always; with
/// MaceOptions::graph_embedding, evaluated once for the pair style's total charge and spin and
/// folded into the node embedding. With the embedding readout, a linear map of that embedding
/// gives each node an energy, which mace-torch adds unscaled to the E0s; both depend on the
/// species alone once the charge and spin are fixed, so they are folded in here, in double.
void read_graph_embedding(const Reader& r, const MaceOptions& o, MaceSpec& spec) {
  const int C = spec.embedding_irreps.dim();
  spec.embedding_shift.assign(static_cast<std::size_t>(C), 0.0);
  if (!r.has_hp("embeddings") || r.hp_json("embeddings").is_null()) {
    if (o.graph_embedding && (o.total_charge || o.total_spin)) {
      throw InputError(spec.source +
                       ": the model embeds no total charge or spin (it was trained without "
                       "mace-torch's embedding_specs); remove the " +
                       std::string(o.total_charge ? "charge" : "spin") + " keyword");
    }
    return;
  }
  const GraphEmbedding& g = spec.graph_embedding =
      GraphEmbedding::read(r.hp_json("embeddings"), C, spec.source);
  std::vector<std::vector<double>> weights;
  for (const auto& t : g.tensors()) {
    weights.push_back(r.tensor(t.name, t.shape));
  }
  for (const auto& f : g.features) {
    spec.graph_features.push_back(f.name);
  }
  if (r.hp_json("embeddings").value("readout", false)) {
    if (g.features.empty()) {
      // mace-torch builds embedding_readout only with embedding_specs; the trainer evaluates it
      // with the features' embedding.
      r.fail(
          "hyperparameter 'embeddings' has a readout without features (mace-torch's "
          "use_embedding_readout needs embedding_specs)");
    }
    // LinearReadoutBlock: an e3nn Linear C x 0e -> heads x 0e.
    kernels::EquivariantLinear lin;
    read_linear(r, "embedding readout", "embedding_readout.linear.weight", spec.embedding_irreps,
                Irreps::parse(std::to_string(spec.heads.size()) + "x0e"), lin, spec.w_embedding_readout);
    spec.embedding_readout = std::move(lin);
  }
  if (!o.graph_embedding) {
    return;
  }
  for (const auto& f : g.features) {
    const bool charge = f.name == "total_charge";
    const std::string keyword = charge ? "charge" : "spin";
    if (!(charge ? o.total_charge : o.total_spin)) {
      throw InputError(spec.source + ": the model embeds the structure's total " + keyword +
                       " (mace-torch's embedding_specs '" + f.name + "'): give it with the pair style's '" +
                       keyword + "' keyword (mace-torch's default is " + (charge ? "charge 0" : "spin 1") +
                       ")");
    }
  }
  const double charge = o.total_charge.value_or(0.0), spin = o.total_spin.value_or(1.0);
  if (const std::string problem = g.value_problem(charge, spin); !problem.empty()) {
    throw InputError(spec.source + ": the pair style's total charge and spin: " + problem +
                     "; change the 'charge' or 'spin' keyword");
  }
  std::vector<const double*> w;
  for (const auto& t : weights) {
    w.push_back(t.data());
  }
  compute_graph_embedding(g, w, charge, spin, spec.embedding_shift.data());
  if (spec.embedding_readout) {
    // Each species' embedding with the shift, through the readout's kernel (the one the trainer
    // runs per structure); the selected head's column joins e0.
    using Host = Kokkos::DefaultHostExecutionSpace;
    using Lin = kernels::LinearKokkos<Host, double>;
    const int E = spec.num_elements, H = static_cast<int>(spec.heads.size());
    typename Lin::Matrix x("embedding readout input", E, C), y("embedding readout", E, H);
    for (int z = 0; z < E; ++z) {
      for (int c = 0; c < C; ++c) {
        x(z, c) = spec.embedding_path_weight * spec.w_embedding[static_cast<std::size_t>(z) * C + c] +
                  spec.embedding_shift[c];
      }
    }
    const typename Lin::ConstMatrix W(spec.w_embedding_readout.data(), 1, spec.w_embedding_readout.size());
    Lin(*spec.embedding_readout).compute(W, typename Lin::Sets(), x, y);
    for (int z = 0; z < E; ++z) {
      spec.e0[z] += y(z, spec.head);
    }
  }
}

void read_product(const Reader& r, int t, const MaceSpec& spec, const InteractionSpec& I, ProductSpec& P) {
  const std::string h = "products/" + std::to_string(t) + "/";
  const std::string p = "products." + std::to_string(t) + ".";
  const std::string where = "product " + std::to_string(t);
  const int corr = r.hp<int>(h + "correlation");
  if (corr < 1 || corr > 4) {
    r.unsupported("hyperparameter '" + h + "correlation' = " + std::to_string(corr) + "; supported: 1 to 4");
  }
  const Irreps in = r.irreps(h + "irreps_in"), out = r.irreps(h + "irreps_out");
  require_equal(r, "hyperparameter '" + h + "irreps_in'", in, I.target);
  require_equal(r, "hyperparameter '" + h + "irreps_out'", out, I.hidden);
  P.use_sc = r.hp<bool>(h + "use_sc");
  P.agnostic = r.has_hp(h + "agnostic") && r.hp<bool>(h + "agnostic");
  const int weight_sets = P.agnostic ? 1 : spec.num_elements;
  if (in.empty() || out.empty()) {
    r.fail("hyperparameters '" + h + "irreps_in'/'irreps_out' must not be empty");
  }
  const int C = in[0].mul;
  int num_ell = 0;
  for (const auto& e : in) {
    num_ell += e.ir.dim();
  }
  std::vector<std::vector<std::vector<double>>> U(out.size());
  std::vector<std::vector<std::vector<int>>> shapes(out.size());
  P.W.assign(out.size(), {});
  for (std::size_t o = 0; o < out.size(); ++o) {
    const std::string c = p + "symmetric_contractions.contractions." + std::to_string(o) + ".";
    const int L = out[o].ir.l;
    for (int nu = 1; nu <= corr; ++nu) {
      // mace-torch's U_matrix_nu: [2L+1, num_ell x nu, K], the first axis squeezed when L = 0.
      Shape s;
      if (L > 0) {
        s.push_back(2 * L + 1);
      }
      for (int k = 0; k < nu; ++k) {
        s.push_back(num_ell);
      }
      s.push_back(kAnyExtent);
      const std::string name = c + "U_matrix_" + std::to_string(nu);
      U[o].push_back(r.tensor(name, s));
      std::vector<int> shape;
      for (auto x : r.raw(name).shape) {
        shape.push_back(static_cast<int>(x));
      }
      shapes[o].push_back(shape);
    }
    // weights_max is the highest order; weights.k is order corr-1-k (mace-torch's ParameterList).
    P.W[o].resize(corr);
    for (int nu = corr; nu >= 1; --nu) {
      const std::string name = nu == corr ? c + "weights_max" : c + "weights." + std::to_string(corr - 1 - nu);
      const auto K = shapes[o][nu - 1].back();
      P.W[o][nu - 1] = r.tensor(name, {weight_sets, K, C});
    }
  }
  P.sc = r.build(where + " symmetric contraction",
                 [&] { return kernels::SymmetricContraction::from_mace(in, out, corr, U, shapes); });
  read_linear(r, where + " linear", p + "linear.weight", out, out, P.linear, P.w_linear);
}

/// Readout k of the file's `readouts` list (hyperparameters readouts/k/, tensors readouts.k.),
/// read for layer t (k == t, or k = 0 for the one readout of use_last_readout_only).
void read_readout(const Reader& r, int k, int t, const MaceSpec& spec, const Irreps& in, ReadoutSpec& R) {
  const std::string h = "readouts/" + std::to_string(k) + "/";
  const std::string& p = R.prefix = "readouts." + std::to_string(k) + ".";
  const std::string where =
      "readout " + std::to_string(k) + (k == t ? "" : " (layer " + std::to_string(t) + "'s)");
  const int H = static_cast<int>(spec.heads.size());
  const Irreps heads_out = Irreps::parse(std::to_string(H) + "x0e");
  const auto cls = r.hp<std::string>(h + "class");
  require_equal(r, "hyperparameter '" + h + "irreps_in'", r.irreps(h + "irreps_in"), in);
  require_equal(r, "hyperparameter '" + h + "irreps_out'", r.irreps(h + "irreps_out"), heads_out);
  if (cls == "LinearReadoutBlock") {
    R.nonlinear = false;
    read_linear(r, where, p + "linear.weight", in, heads_out, R.linear_1, R.w_linear_1);
  } else if (cls == "NonLinearReadoutBlock" || cls == "NonLinearBiasReadoutBlock") {
    R.nonlinear = true;
    R.bias = cls == "NonLinearBiasReadoutBlock";
    const Irreps mlp = r.irreps(h + "mlp_irreps");
    if (!scalars_only(mlp) || mlp.dim() % H != 0) {
      r.unsupported("hyperparameter '" + h + "mlp_irreps' = '" + mlp.str() +
                    "'; supported: scalars (Nx0e) split evenly over the " + std::to_string(H) + " heads");
    }
    const auto gate = r.hp<std::string>(h + "gate");
    if (gate != "silu") {
      r.unsupported("hyperparameter '" + h + "gate' = '" + gate + "'; supported: silu");
    }
    R.gate_cst = r.hp<double>(h + "gate_cst");
    // e3nn's normalize2mom drops a constant within 1e-4 of 1 (its _is_id); do the same.
    if (std::abs(R.gate_cst - 1.0) < 1e-4) {
      R.gate_cst = 1.0;
    }
    R.hidden_per_head = mlp.dim() / H;
    read_linear(r, where + " linear_1", p + "linear_1.weight", in, mlp, R.linear_1, R.w_linear_1);
    read_linear(r, where + " linear_2", p + "linear_2.weight", mlp, heads_out, R.linear_2, R.w_linear_2);
    if (R.bias) {
      read_linear(r, where + " linear_mid", p + "linear_mid.weight", mlp, mlp, R.linear_mid, R.w_linear_mid);
      R.b_mid = r.tensor(p + "linear_mid.bias", flat(mlp.dim()));
      R.b_2 = r.tensor(p + "linear_2.bias", flat(H));
    }
  } else {
    r.unsupported(
        where + " is a '" + cls +
        "'; supported readouts: LinearReadoutBlock, NonLinearReadoutBlock, NonLinearBiasReadoutBlock");
  }
}

// Each model species' radius from a table indexed by atomic number (ZBL's and the Agnesi
// transform's covalent_radii, both ase.data.covalent_radii as the model holds it).
std::vector<double> species_radii(const Reader& r, const MaceSpec& spec, const std::string& name,
                                  const std::vector<double>& by_z) {
  std::vector<double> out;
  for (const auto& s : spec.species) {
    if (s.z >= static_cast<int>(by_z.size()) || !(by_z[s.z] > 0)) {
      r.fail("tensor '" + name + "' has no positive radius for " + s.symbol + " (Z = " + std::to_string(s.z) + ")");
    }
    out.push_back(by_z[s.z]);
  }
  return out;
}

void read_zbl(const Reader& r, const MaceSpec& spec, ZblSpec& z) {
  const std::string p = "pair_repulsion_fn.";
  const auto c = r.tensor(p + "c", {4});
  for (int k = 0; k < 4; ++k) {
    z.c[k] = c[k];
  }
  z.a_exp = r.number(p + "a_exp");
  z.a_prefactor = r.number(p + "a_prefactor");
  const double pv = r.number(p + "p");
  z.p = static_cast<int>(pv);
  if (z.p != pv || z.p < 1) {
    r.fail("tensor '" + p + "p' = " + std::to_string(pv) + " must be a positive integer");
  }
  if (r.has_hp("zbl/screening_exponents")) {
    const auto d = r.hp<std::vector<double>>("zbl/screening_exponents");
    if (d.size() != 4) {
      r.fail("hyperparameter 'zbl/screening_exponents' must have 4 values, has " + std::to_string(d.size()));
    }
    std::copy(d.begin(), d.end(), z.screening);
  }
  if (r.has_hp("zbl/bohr_radius")) {
    z.bohr_radius = r.hp<double>("zbl/bohr_radius");
  }
  if (r.has_hp("zbl/coulomb_constant")) {
    z.coulomb = r.hp<double>("zbl/coulomb_constant");
  }
  z.covalent_radii = r.tensor(p + "covalent_radii", {kAnyExtent});
  species_radii(r, spec, p + "covalent_radii", z.covalent_radii);
}

// The transform's buffers (or parameters, when trained): AgnesiTransform's a, q, p or
// SoftTransform's alpha, and the covalent radii by atomic number, of which each model element's
// is kept.
void read_distance_transform(const Reader& r, const std::string& which, MaceSpec& spec) {
  const std::string p = "radial_embedding.distance_transform.";
  auto& t = spec.distance_transform;
  if (which == "Agnesi") {
    t.kind = kernels::DistanceTransformKind::Agnesi;
    t.a = r.number(p + "a");
    t.q = r.number(p + "q");
    t.p = r.number(p + "p");
  } else if (which == "Soft") {
    t.kind = kernels::DistanceTransformKind::Soft;
    t.alpha = r.number(p + "alpha");
  } else {
    r.unsupported("hyperparameter 'distance_transform' = '" + which + "'; supported: None, Agnesi, Soft");
  }
  t.covalent_radii = species_radii(r, spec, p + "covalent_radii", r.tensor(p + "covalent_radii", {kAnyExtent}));
  try {
    t.validate(spec.num_elements);
  } catch (const InputError& e) {
    r.fail(std::string("tensors '") + p + "*': " + e.what());
  }
}

MaceSpec load(const io::PotentialFile& file, const MaceOptions& options) {
  const Reader r(file);
  MaceSpec spec;
  spec.source = r.name();
  if (file.model_kind() != "mace") {
    r.fail("holds a '" + file.model_kind() + "' model, not a MACE one");
  }
  spec.species = file.species();
  spec.num_elements = r.hp<int>("num_elements");
  if (spec.num_elements != static_cast<int>(spec.species.size())) {
    r.fail("hyperparameter 'num_elements' = " + std::to_string(spec.num_elements) + " but the file lists " +
           std::to_string(spec.species.size()) + " species");
  }
  const auto model_class = r.hp<std::string>("model_class");
  if (model_class != "MACE" && model_class != "ScaleShiftMACE") {
    r.unsupported("hyperparameter 'model_class' = '" + model_class + "'; supported: MACE, ScaleShiftMACE");
  }
  spec.scale_shift = model_class == "ScaleShiftMACE";
  const std::string radial_type = r.has_hp("radial_type") ? r.hp<std::string>("radial_type") : "bessel";
  try {
    spec.radial_basis.kind = kernels::radial_basis_kind(radial_type);
  } catch (const InputError&) {
    r.unsupported("hyperparameter 'radial_type' = '" + radial_type +
                  "'; supported: bessel, gaussian, chebyshev");
  }
  if (r.has_hp("distance_transform") && !r.hp_json("distance_transform").is_null() &&
      r.hp<std::string>("distance_transform") != "None") {
    read_distance_transform(r, r.hp<std::string>("distance_transform"), spec);
  }

  spec.r_max = r.hp<double>("r_max");
  const double r_cut = file.meta<double>("/cutoffs/r_max");
  if (!(spec.r_max > 0) || std::abs(spec.r_max - r_cut) > 1e-12 * spec.r_max) {
    r.fail("hyperparameter 'r_max' = " + std::to_string(spec.r_max) + " must be positive and equal cutoffs.r_max = " +
           std::to_string(r_cut));
  }
  const int num_bessel = r.hp<int>("num_bessel");
  const int p = r.hp<int>("num_polynomial_cutoff");
  spec.max_ell = r.hp<int>("max_ell");
  if (spec.max_ell < 0 || spec.max_ell > kMaxL) {
    r.unsupported("hyperparameter 'max_ell' = " + std::to_string(spec.max_ell) + "; supported: 0 to " +
                  std::to_string(kMaxL));
  }
  spec.num_interactions = r.hp<int>("num_interactions");
  if (spec.num_interactions < 1) {
    r.fail("hyperparameter 'num_interactions' = " + std::to_string(spec.num_interactions) + " must be at least 1");
  }
  const int T = spec.num_interactions;

  // Heads: mace-torch readouts have one output column per head and E0 / scale / shift a head
  // axis; a node of head h reads column h (models.py: [num_atoms_arange, node_heads]).
  spec.heads = r.hp<std::vector<std::string>>("heads");
  if (spec.heads.empty()) {
    r.fail("hyperparameter 'heads' is empty; a model has at least one head");
  }
  const int H = static_cast<int>(spec.heads.size());
  std::string head_list;
  for (const auto& n : spec.heads) {
    head_list += (head_list.empty() ? "'" : ", '") + n + "'";
  }
  std::string wanted = options.head;
  if (wanted.empty() && r.has_hp("default_head") && !r.hp_json("default_head").is_null()) {
    wanted = r.hp<std::string>("default_head");  // the converter's choice (mace's calculator: "default")
  }
  if (wanted.empty()) {
    if (H > 1) {
      throw InputError(spec.source + ": the model has " + std::to_string(H) + " heads (" + head_list +
                       "); choose one (pair_style keyword 'head')");
    }
    spec.head = 0;
  } else {
    spec.head = -1;
    for (int k = 0; k < H; ++k) {
      if (spec.heads[k] == wanted) {
        spec.head = k;
      }
    }
    if (spec.head < 0) {
      throw InputError(spec.source + ": the model has no head '" + wanted + "'; its heads are " + head_list);
    }
  }

  // Atomic energies: [E] for one head, [H, E] otherwise (AtomicEnergiesBlock: atleast_2d).
  const std::string ae = "atomic_energies_fn.atomic_energies";
  const int E = spec.num_elements;
  if (r.raw(ae).shape.size() == 1 && H == 1) {
    spec.e0 = r.tensor(ae, {E});
  } else {
    const auto all = r.tensor(ae, {H, E});
    spec.e0.assign(all.begin() + static_cast<std::ptrdiff_t>(spec.head) * E,
                   all.begin() + static_cast<std::ptrdiff_t>(spec.head + 1) * E);
  }
  if (spec.scale_shift) {
    for (const char* which : {"scale", "shift"}) {
      const std::string name = std::string("scale_shift.") + which;
      double v = 0;
      if (r.raw(name).shape.empty() && H == 1) {
        v = r.tensor(name, {})[0];
      } else {
        v = r.tensor(name, {H})[spec.head];
      }
      (std::string(which) == "scale" ? spec.scale : spec.shift) = v;
    }
  }

  // Radial basis x PolynomialCutoff(p). Bessel: BesselBasis(bessel_weights); its prefactor is
  // the buffer BesselBasis holds (sqrt(2 / r_max) rounded to the model's dtype: in float32 that
  // is up to ~4e-8 relative off the double value), so it is read, not recomputed. Files without
  // the tensor (writers older than this rule) keep the double sqrt(2 / r_max). Gaussian: the
  // centres are GaussianBasis' buffer; its coefficient is a plain attribute, not in the
  // state_dict, which the converter writes as hyperparameter gaussian_coeff (files without it:
  // computed from r_max and N as mace-torch does). Chebyshev: its buffer n of orders.
  spec.radial_basis.r_max = spec.r_max;
  spec.radial_basis.envelope_p = p;
  // mace-torch >= 0.3.14's apply_cutoff (absent: true, the envelope on the basis). False
  // (MACE-OMOL): the basis alone, and f_p(r) on each radial MLP output and Density term.
  spec.radial_basis.apply_cutoff = !r.has_hp("apply_cutoff") || r.hp<bool>("apply_cutoff");
  const std::string basis = "radial_embedding.bessel_fn.";
  switch (spec.radial_basis.kind) {
    case kernels::RadialBasisKind::Gaussian: {
      spec.radial_basis.frequencies = r.tensor(basis + "gaussian_weights", {num_bessel});
      if (num_bessel < 2) {
        r.fail("hyperparameter 'num_bessel' = " + std::to_string(num_bessel) +
               ": a Gaussian radial basis needs at least 2 functions");
      }
      // The converter writes the model's own coeff (a float32 model's may differ from this
      // value: mace-torch computes it from the unrounded r_max); older files lack it.
      const double step = spec.r_max / (num_bessel - 1);
      spec.radial_basis.gaussian_coeff =
          r.has_hp("gaussian_coeff") ? r.hp<double>("gaussian_coeff") : -0.5 / (step * step);
      break;
    }
    case kernels::RadialBasisKind::Chebyshev:
      spec.radial_basis.frequencies = r.tensor(basis + "n", {1, num_bessel});
      break;
    default:
      spec.radial_basis.frequencies = r.tensor(basis + "bessel_weights", {num_bessel});
  }
  const std::string prefactor = basis + "prefactor";
  if (spec.radial_basis.kind == kernels::RadialBasisKind::Bessel && r.has_tensor(prefactor)) {
    spec.radial_basis.prefactor = r.number(prefactor);
    if (!(std::isfinite(spec.radial_basis.prefactor) && spec.radial_basis.prefactor > 0)) {
      r.fail("tensor '" + prefactor + "' = " + std::to_string(spec.radial_basis.prefactor) +
             " must be a finite positive number (mace-torch stores sqrt(2 / r_max))");
    }
  }
  r.build("radial embedding", [&] {
    spec.radial_basis.validate();
    return 0;
  });

  // Embedding: o3.Linear(E x 0e -> C x 0e) of the one-hot species.
  spec.interactions.resize(T);
  const Irreps nf0 = r.irreps("interactions/0/node_feats_irreps");
  if (!scalars_only(nf0) || nf0.size() != 1) {
    r.fail("hyperparameter 'interactions/0/node_feats_irreps' = '" + nf0.str() + "' must be Cx0e (the embedding)");
  }
  spec.embedding_irreps = nf0;
  {
    kernels::EquivariantLinear emb;
    read_linear(r, "node embedding", "node_embedding.linear.weight", Irreps::parse(std::to_string(E) + "x0e"), nf0, emb,
                spec.w_embedding);
    spec.embedding_path_weight = emb.instructions.at(0).path_weight;
  }
  read_graph_embedding(r, options, spec);

  // Readouts: one per layer, or with use_last_readout_only (mace-torch >= 0.3.14) one, on the
  // last layer, stored as mace-torch's readouts.0. The list's length is checked against the
  // flag, so that a file whose readouts do not match it is refused rather than misread.
  spec.last_readout_only = r.has_hp("use_last_readout_only") && r.hp<bool>("use_last_readout_only");
  const std::size_t readouts_expected = spec.last_readout_only ? 1 : static_cast<std::size_t>(T);
  const nlohmann::json no_list;
  const auto& readout_list = r.has_hp("readouts") ? r.hp_json("readouts") : no_list;
  if (!readout_list.is_array() || readout_list.size() != readouts_expected) {
    r.fail("hyperparameter 'readouts' must list " + std::to_string(readouts_expected) + " readout(s) for " +
           std::to_string(T) + " interaction(s)" +
           (spec.last_readout_only ? " with use_last_readout_only (one, on the last layer)"
                                   : " (one per layer)") +
           ", has " +
           (readout_list.is_array() ? std::to_string(readout_list.size()) : std::string("no list")));
  }
  spec.products.resize(T);
  spec.readouts.resize(T);
  Irreps features = nf0;
  for (int t = 0; t < T; ++t) {
    read_interaction(r, t, spec, spec.interactions[t]);
    require_equal(r, "hyperparameter 'interactions/" + std::to_string(t) + "/node_feats_irreps'",
                  spec.interactions[t].node_feats, features);
    read_product(r, t, spec, spec.interactions[t], spec.products[t]);
    if (!spec.last_readout_only) {
      read_readout(r, t, t, spec, spec.interactions[t].hidden, spec.readouts[t]);
    } else if (t == T - 1) {
      read_readout(r, 0, t, spec, spec.interactions[t].hidden, spec.readouts[t]);
    } else {
      spec.readouts[t].present = false;
    }
    features = spec.interactions[t].hidden;
  }

  // ZBL pair repulsion: present when the hyperparameter is an object (null or absent: none).
  const bool zbl_hp = r.has_hp("zbl") && !r.hp_json("zbl").is_null();
  if (zbl_hp != r.has_tensor("pair_repulsion_fn.c")) {
    r.fail(zbl_hp ? "hyperparameter 'zbl' is set but the tensors 'pair_repulsion_fn.*' are missing"
                  : "has 'pair_repulsion_fn.*' tensors but hyperparameter 'zbl' is null or absent");
  }
  if (zbl_hp) {
    spec.zbl.emplace();
    read_zbl(r, spec, *spec.zbl);
  }
  return spec;
}

}  // namespace

MaceSpec load_mace_spec(const io::PotentialFile& file, const MaceOptions& options) {
  try {
    return load(file, options);
  } catch (const FileError& e) {
    // The container's accessors report a missing tensor or key as a FileError naming the
    // file; for a model file that is an input problem, and MaceModel documents InputError.
    throw InputError(e.what());
  }
}

}  // namespace fastmlip::models::mace

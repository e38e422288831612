// SPDX-License-Identifier: MIT
// The MACE file layout's writer (mace_layout.hpp): mace-torch 0.3.13's MACE / ScaleShiftMACE
// construction (modules/models.py, modules/blocks.py), tensor by tensor in its order.
#include "models/mace/mace_layout.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/elements.hpp"
#include "core/error.hpp"
#include "kernels/channelwise_tp.hpp"
#include "kernels/linear.hpp"
#include "kernels/radial_basis.hpp"
#include "math/coupling_basis.hpp"
#include "math/irreps.hpp"
#include "models/mace/graph_embedding.hpp"

namespace fastmlip::models::mace {

namespace {

/// e3nn's normalize2mom constant of SiLU, as mace-torch's models hold it.
constexpr double kSiluCst = 1.6791767923989418;
/// The same constant of the sigmoid (mace-torch's GatedEquivariantBlock gates).
constexpr double kSigmoidCst = 1.8467055342154763;
const char* const kNonLinear = "RealAgnosticResidualNonLinearInteractionBlock";

std::string irrep_str(int mul, int l) {
  return std::to_string(mul) + "x" + std::to_string(l) + (l % 2 ? "o" : "e");
}

/// --embedding_specs' tensors (mace-torch's GenericJointEmbedding and, with the readout, its
/// LinearReadoutBlock) and the `embeddings` hyperparameters the loader reads; null without. A
/// table is drawn as torch's Embedding (N(0, 1)), the Linear layers at the standard deviation of
/// torch's uniform default.
template <class AddDrawn>
nlohmann::json write_embeddings(const MaceLayout& c, int C, int H, const AddDrawn& add_drawn) {
  const std::string fn = "write_mace_layout: embedding_specs: ";
  if (c.embedding_specs.empty()) {
    if (c.embedding_readout) {
      throw InputError(fn + "use_embedding_readout needs embedding_specs");
    }
    return nullptr;
  }
  const GraphEmbedding g{c.embedding_specs, C};
  if (const std::string problem = g.problem(); !problem.empty()) {
    throw InputError(fn + problem);
  }
  for (const auto& t : g.tensors()) {
    std::int64_t n = 1;
    for (const std::int64_t d : t.shape) {
      n *= d;
    }
    add_drawn(t.name, t.shape, n, t.fan_in > 0 ? 1.0 / std::sqrt(3.0 * static_cast<double>(t.fan_in)) : 1.0);
  }
  if (c.embedding_readout) {
    add_drawn("embedding_readout.linear.weight", {C * H}, static_cast<std::int64_t>(C) * H, 1.0);
  }
  return {{"features", g.features_json()}, {"readout", c.embedding_readout}};
}

/// RealAgnosticResidualNonLinearInteractionBlock's tensors, in mace-torch's construction order,
/// and its hyperparameters (appended to `inter`). torch's Linear layers are drawn at the standard
/// deviation of its uniform default; the LayerNorm weights are 1 and biases 0 (plus what the
/// weight source gives at scale 0: nothing for the trainer), alpha 20 and beta 0 likewise.
template <class AddDrawn>
void write_nonlinear(const std::string& p, const Irreps& features, const Irreps& hidden, const Irreps& edge,
                     const Irreps& target, const kernels::ChannelwiseTP& tp, const MaceLayout& c,
                     const AddDrawn& add_drawn, const MaceWeightDraw& draw, io::PotentialFile& pot,
                     nlohmann::json& inter) {
  const int E = static_cast<int>(c.atomic_numbers.size()), C0 = features.count(Irrep{0, 1});
  // The gate: scalars, one gate per gated channel, the gated (l > 0) entries of the target.
  int scalars = 0, gates = 0;
  std::string gated_s;
  for (const auto& e : target) {
    if (e.ir.l == 0) {
      scalars += e.mul;
    } else {
      gates += e.mul;
      gated_s += "+" + irrep_str(e.mul, e.ir.l);
    }
  }
  const Irreps nonlin = Irreps::parse(irrep_str(scalars + gates, 0) + gated_s);
  nlohmann::json gated = nlohmann::json::array();
  int start = scalars + gates, offset = 0;
  for (const auto& e : target) {
    if (e.ir.l > 0) {
      gated.push_back({start, e.mul * e.ir.dim(), e.ir.dim(), e.mul, offset});
      start += e.mul * e.ir.dim();
      offset += e.mul;
    }
  }
  // mace-torch's constant initial value plus what the weight source gives at scale 0.
  const auto add_value = [&](const std::string& name, std::vector<std::int64_t> shape, std::int64_t n,
                             double base) {
    auto v = draw(name, n, 0.0);
    if (static_cast<std::int64_t>(v.size()) != n) {
      throw InputError("write_mace_layout: the weight source gave " + std::to_string(v.size()) +
                       " values for " + name + ", not " + std::to_string(n));
    }
    for (double& x : v) {
      x += base;
    }
    pot.add<double>(name, std::move(shape), std::move(v));
  };
  const auto normed = [&](const std::string& prefix, const std::vector<int>& widths) {
    for (std::size_t k = 0; k + 1 < widths.size(); ++k) {
      const std::string lin = prefix + "net." + std::to_string(3 * k) + ".";
      const double sd = 1.0 / std::sqrt(3.0 * widths[k]);
      add_drawn(lin + "weight", {widths[k + 1], widths[k]},
                static_cast<std::int64_t>(widths[k + 1]) * widths[k], sd);
      add_drawn(lin + "bias", {widths[k + 1]}, widths[k + 1], sd);
      if (k + 2 < widths.size()) {
        const std::string norm = prefix + "net." + std::to_string(3 * k + 1) + ".";
        add_value(norm + "weight", {widths[k + 1]}, widths[k + 1], 1.0);
        add_value(norm + "bias", {widths[k + 1]}, widths[k + 1], 0.0);
      }
    }
  };
  const auto up = kernels::EquivariantLinear::e3nn(features, edge);
  const auto skip = kernels::EquivariantLinear::e3nn(features, hidden);
  const auto res = kernels::EquivariantLinear::e3nn(edge, nonlin);
  const auto l1 = kernels::EquivariantLinear::e3nn(tp.irreps_out, nonlin);
  const auto l2 = kernels::EquivariantLinear::e3nn(target, target);
  // mace-torch draws the species embeddings uniform in +-0.001.
  add_drawn(p + "source_embedding.weight", {E * C0}, E * C0, 0.001 / std::sqrt(3.0));
  add_drawn(p + "target_embedding.weight", {E * C0}, E * C0, 0.001 / std::sqrt(3.0));
  add_drawn(p + "linear_up.weight", {up.weight_numel}, up.weight_numel, 1.0);
  std::vector<int> widths{c.num_bessel + 2 * C0};
  widths.insert(widths.end(), c.radial_mlp.begin(), c.radial_mlp.end());
  widths.push_back(tp.weight_numel);
  normed(p + "conv_tp_weights.", widths);
  add_drawn(p + "skip_tp.weight", {skip.weight_numel}, skip.weight_numel, 1.0);
  add_drawn(p + "linear_res.weight", {res.weight_numel}, res.weight_numel, 1.0);
  add_drawn(p + "linear_1.weight", {l1.weight_numel}, l1.weight_numel, 1.0);
  add_drawn(p + "linear_2.weight", {l2.weight_numel}, l2.weight_numel, 1.0);
  const std::vector<int> density{c.num_bessel + 2 * C0, 64, 1};  // mace-torch's fixed [in, 64, 1]
  normed(p + "density_fn.", density);
  add_value(p + "alpha", {}, 1, 20.0);
  add_value(p + "beta", {}, 1, 0.0);
  inter.push_back({{"class", kNonLinear},
                   {"node_feats_irreps", features.str()},
                   {"edge_attrs_irreps", Irreps::spherical_harmonics(c.max_ell).str()},
                   {"target_irreps", target.str()},
                   {"hidden_irreps", hidden.str()},
                   {"irreps_mid", tp.irreps_out.str()},
                   {"irreps_nonlin", nonlin.str()},
                   {"radial_mlp", widths},
                   {"density_mlp", density},
                   {"gate",
                    {{"scalars", {0, scalars}},
                     {"gates", {scalars, gates}},
                     {"gated", gated},
                     {"scalar_cst", kSiluCst},
                     {"gate_cst", kSigmoidCst}}},
                   {"avg_num_neighbors", c.avg_num_neighbors}});
}

}  // namespace

const std::vector<double>& ase_covalent_radii() {
  static const std::vector<double> r = {
      0.2,  0.31, 0.28, 1.28, 0.96, 0.84, 0.76, 0.71, 0.66, 0.57, 0.58, 1.66, 1.41, 1.21, 1.11, 1.07, 1.05,
      1.02, 1.06, 2.03, 1.76, 1.7,  1.6,  1.53, 1.39, 1.39, 1.32, 1.26, 1.24, 1.32, 1.22, 1.22, 1.2,  1.19,
      1.2,  1.2,  1.16, 2.2,  1.95, 1.9,  1.75, 1.64, 1.54, 1.47, 1.46, 1.42, 1.39, 1.45, 1.44, 1.42, 1.39,
      1.39, 1.38, 1.39, 1.4,  2.44, 2.15, 2.07, 2.04, 2.03, 2.01, 1.99, 1.98, 1.98, 1.96, 1.94, 1.92, 1.92,
      1.89, 1.9,  1.87, 1.87, 1.75, 1.7,  1.62, 1.51, 1.44, 1.41, 1.36, 1.36, 1.32, 1.45, 1.46, 1.48, 1.4,
      1.5,  1.5,  2.6,  2.21, 2.15, 2.06, 2.0,  1.96, 1.9,  1.87, 1.8,  1.69, 0.2,  0.2,  0.2,  0.2,  0.2,
      0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2,  0.2};
  return r;
}

io::PotentialFile write_mace_layout(const MaceLayout& c, const MaceLayoutValues& v, const MaceWeightDraw& draw) {
  const std::string fn = "write_mace_layout: ";
  const int E = static_cast<int>(c.atomic_numbers.size()), C = c.num_channels, T = c.num_interactions;
  const int H = static_cast<int>(c.heads.size());
  if (E < 1 || H < 1 || static_cast<int>(v.atomic_energies.size()) != H * E) {
    throw InputError(fn + "need at least one species, one head and one E0 per species and head (got " +
                     std::to_string(E) + " species, " + std::to_string(H) + " heads, " +
                     std::to_string(v.atomic_energies.size()) + " E0s)");
  }
  if (c.scale_shift && (static_cast<int>(v.scale.size()) != H || static_cast<int>(v.shift.size()) != H)) {
    throw InputError(fn + "ScaleShiftMACE needs one scale and one shift per head");
  }
  bool positive = !c.correlation.empty();
  for (int k : c.correlation) positive = positive && k >= 1;
  for (int w : c.radial_mlp) positive = positive && w >= 1;
  if (!positive || C < 1 || T < 1 || c.max_L < 0 || c.max_ell < 0 || c.num_bessel < 1 || c.mlp_irreps < 1 ||
      !(c.r_max > 0) || !(c.avg_num_neighbors > 0)) {
    throw InputError(fn +
                     "num_channels, num_interactions, correlation, radial_MLP, num_bessel and MLP_irreps must be "
                     "positive, max_L and max_ell non-negative, r_max and avg_num_neighbors positive");
  }
  // Each block's class: residual (a skip from x^t, products with use_sc) and Density (the
  // learned normalisation, density_fn) follow from its name.
  const std::vector<std::string> firsts = {
      "RealAgnosticInteractionBlock", "RealAgnosticResidualInteractionBlock",
      "RealAgnosticDensityInteractionBlock", "RealAgnosticDensityResidualInteractionBlock", kNonLinear};
  if (std::find(firsts.begin(), firsts.end(), c.interaction_first) == firsts.end()) {
    throw InputError(
        fn + "interaction_first '" + c.interaction_first +
        "' is not supported; supported: RealAgnosticInteractionBlock, "
        "RealAgnosticResidualInteractionBlock, RealAgnosticDensityInteractionBlock, "
        "RealAgnosticDensityResidualInteractionBlock, RealAgnosticResidualNonLinearInteractionBlock");
  }
  if (c.interaction != firsts[1] && c.interaction != firsts[3] && c.interaction != firsts[4]) {
    throw InputError(
        fn + "interaction '" + c.interaction +
        "' is not supported; supported: RealAgnosticResidualInteractionBlock, "
        "RealAgnosticDensityResidualInteractionBlock, RealAgnosticResidualNonLinearInteractionBlock");
  }
  if (c.distance_transform != "None" && c.distance_transform != "Agnesi" && c.distance_transform != "Soft") {
    throw InputError(fn + "distance_transform '" + c.distance_transform +
                     "' is not supported; supported: None, Agnesi, Soft");
  }
  // The basis' constants, as mace-torch's constructor makes its buffer (validated there).
  kernels::RadialBasisParams basis;
  try {
    switch (kernels::radial_basis_kind(c.radial_type)) {
      case kernels::RadialBasisKind::Gaussian:
        basis = kernels::RadialBasisParams::gaussian(c.num_bessel, c.r_max, c.num_polynomial_cutoff);
        break;
      case kernels::RadialBasisKind::Chebyshev:
        basis = kernels::RadialBasisParams::chebyshev(c.num_bessel, c.r_max, c.num_polynomial_cutoff);
        break;
      default:
        basis = kernels::RadialBasisParams::mace(c.num_bessel, c.r_max, c.num_polynomial_cutoff);
    }
  } catch (const InputError& e) {
    throw InputError(fn + e.what());
  }
  io::PotentialFile pot;
  nlohmann::json species = nlohmann::json::array();
  for (int z : c.atomic_numbers) {
    species.push_back({{"Z", z}, {"symbol", element_symbol(z)}});
  }
  // mace-torch: hidden_irreps = C x (0e + 1o + ... up to max_L); the interaction target is C
  // copies of the harmonics' irreps; the embedding gives C x 0e.
  std::string hidden_s, target_s;
  for (int l = 0; l <= c.max_L; ++l) {
    hidden_s += (l ? "+" : "") + irrep_str(C, l);
  }
  for (int l = 0; l <= c.max_ell; ++l) {
    target_s += (l ? "+" : "") + irrep_str(C, l);
  }
  const Irreps hidden_full = Irreps::parse(hidden_s), target = Irreps::parse(target_s);
  const Irreps scalars = Irreps::parse(irrep_str(C, 0)), sh = Irreps::spherical_harmonics(c.max_ell);
  const Irreps head_out = Irreps::parse(irrep_str(H, 0));
  std::optional<Irreps> edge_irreps;
  if (!c.edge_irreps.empty()) {
    try {
      edge_irreps = Irreps::parse(c.edge_irreps);
    } catch (const InputError& e) {
      throw InputError(fn + "edge_irreps '" + c.edge_irreps + "': " + e.what());
    }
    if (c.edge_irreps_first && edge_irreps->count(Irrep{0, 1}) < 1) {
      throw InputError(fn + "use_edge_irreps_first gives the first interaction edge_irreps' scalars, and '" +
                       c.edge_irreps + "' has no 0e");
    }
  } else if (c.edge_irreps_first) {
    throw InputError(fn + "use_edge_irreps_first needs edge_irreps");
  }
  auto add_drawn = [&](const std::string& name, std::vector<std::int64_t> shape, std::int64_t n, double scale) {
    auto values = draw(name, n, scale);
    if (static_cast<std::int64_t>(values.size()) != n) {
      throw InputError(fn + "the weight source gave " + std::to_string(values.size()) + " values for " + name +
                       ", not " + std::to_string(n));
    }
    pot.add<double>(name, std::move(shape), std::move(values));
  };

  add_drawn("node_embedding.linear.weight", {E * C}, E * C, 1.0);
  const nlohmann::json embeddings = write_embeddings(c, C, H, add_drawn);
  const std::string b = "radial_embedding.bessel_fn.";
  if (basis.kind == kernels::RadialBasisKind::Gaussian) {
    pot.add<double>(b + "gaussian_weights", {c.num_bessel}, basis.frequencies);
  } else if (basis.kind == kernels::RadialBasisKind::Chebyshev) {
    pot.add<double>(b + "n", {1, c.num_bessel}, basis.frequencies);
  } else {
    std::vector<double> bw;
    for (int n = 1; n <= c.num_bessel; ++n) {
      bw.push_back(M_PI / c.r_max * n);
    }
    pot.add<double>(b + "bessel_weights", {c.num_bessel}, bw);
    if (c.bessel_prefactor) {
      pot.add<double>(b + "prefactor", {}, {std::sqrt(2.0 / c.r_max)});
    }
  }
  if (c.distance_transform != "None") {
    // AgnesiTransform's or SoftTransform's buffers at mace-torch's defaults, and ASE's covalent
    // radii by Z.
    const std::string d = "radial_embedding.distance_transform.";
    if (c.distance_transform == "Agnesi") {
      pot.add<double>(d + "a", {}, {1.0805});
      pot.add<double>(d + "q", {}, {0.9183});
      pot.add<double>(d + "p", {}, {4.5791});
    } else {
      pot.add<double>(d + "alpha", {}, {4.0});
    }
    const auto& radii = ase_covalent_radii();
    pot.add<double>(d + "covalent_radii", {static_cast<std::int64_t>(radii.size())}, radii);
  }
  if (H == 1) {
    pot.add<double>("atomic_energies_fn.atomic_energies", {E}, v.atomic_energies);
  } else {
    pot.add<double>("atomic_energies_fn.atomic_energies", {H, E}, v.atomic_energies);
  }

  nlohmann::json inter = nlohmann::json::array(), prods = nlohmann::json::array(), reads = nlohmann::json::array();
  Irreps features = scalars;
  for (int t = 0; t < T; ++t) {
    const std::string p = "interactions." + std::to_string(t) + ".";
    const std::string& cls = t == 0 ? c.interaction_first : c.interaction;
    const bool residual = cls.find("Residual") != std::string::npos;
    const bool density = cls.find("Density") != std::string::npos;

    const Irreps hidden = (t == T - 1 && T > 1) ? scalars : hidden_full;
    // mace-torch's edge_irreps: the later layers', and the first one's scalars alone with
    // use_edge_irreps_first; else linear_up is square.
    Irreps edge = features;
    if (edge_irreps && t > 0) {
      edge = *edge_irreps;
    } else if (edge_irreps && c.edge_irreps_first) {
      edge = Irreps::parse(irrep_str(edge_irreps->count(Irrep{0, 1}), 0));
    }
    const auto tp = kernels::ChannelwiseTP::mace(edge, sh, target);
    const auto up = kernels::EquivariantLinear::e3nn(features, edge);
    if (cls == kNonLinear) {
      write_nonlinear(p, features, hidden, edge, target, tp, c, add_drawn, draw, pot, inter);
    } else {
      const auto lin = kernels::EquivariantLinear::e3nn(tp.irreps_out, target);
      const auto skip = residual ? kernels::EquivariantLinear::element_skip(features, E, hidden)
                                 : kernels::EquivariantLinear::element_skip(target, E, target);
      std::vector<int> widths{c.num_bessel};
      widths.insert(widths.end(), c.radial_mlp.begin(), c.radial_mlp.end());
      widths.push_back(tp.weight_numel);
      add_drawn(p + "linear_up.weight", {up.weight_numel}, up.weight_numel, 1.0);
      for (std::size_t k = 0; k + 1 < widths.size(); ++k) {
        add_drawn(p + "conv_tp_weights.layer" + std::to_string(k) + ".weight", {widths[k], widths[k + 1]},
                  static_cast<std::int64_t>(widths[k]) * widths[k + 1], 1.0);
      }
      add_drawn(p + "linear.weight", {lin.weight_numel}, lin.weight_numel, 1.0);
      add_drawn(p + "skip_tp.weight", {skip.weight_numel * E},
                static_cast<std::int64_t>(skip.weight_numel) * E, 1.0);
      if (density) {
        // density_fn: e3nn FullyConnectedNet [num_bessel, 1], created after skip_tp.
        add_drawn(p + "density_fn.layer0.weight", {c.num_bessel, 1}, c.num_bessel, 1.0);
      }
      inter.push_back({{"class", cls},
                       {"node_feats_irreps", features.str()},
                       {"edge_attrs_irreps", sh.str()},
                       {"target_irreps", target.str()},
                       {"hidden_irreps", hidden.str()},
                       {"irreps_mid", tp.irreps_out.str()},
                       {"radial_mlp", widths},
                       {"radial_mlp_cst", kSiluCst},
                       {"avg_num_neighbors", c.avg_num_neighbors}});
    }
    if (edge != features) {
      inter.back()["edge_irreps"] = edge.str();
    }
    const int corr = c.correlation[std::min<std::size_t>(t, c.correlation.size() - 1)];
    const std::string q = "products." + std::to_string(t) + ".";
    // Our coupling basis, not mace-torch's U: it spans the same functions with fewer columns
    // (docs/equivariant-conventions.md); weights drawn as mace-torch draws them, randn / K.
    const auto basis = symmetric_contraction_basis(target, hidden, corr);
    for (std::size_t o = 0; o < hidden.size(); ++o) {
      const std::string s = q + "symmetric_contractions.contractions." + std::to_string(o) + ".";
      for (int nu = 1; nu <= corr; ++nu) {
        const auto& shape = basis.shapes[o][nu - 1];
        pot.add<double>(s + "U_matrix_" + std::to_string(nu), std::vector<std::int64_t>(shape.begin(), shape.end()),
                        basis.U[o][nu - 1]);
      }
      // mace-torch creates weights_max first, then orders correlation-1 .. 1.
      for (int nu = corr; nu >= 1; --nu) {
        const int K = basis.shapes[o][nu - 1].back();
        const std::string name = nu == corr ? s + "weights_max" : s + "weights." + std::to_string(corr - 1 - nu);
        const int sets = c.agnostic_product ? 1 : E;
        add_drawn(name, {sets, K, C}, static_cast<std::int64_t>(sets) * K * C, 1.0 / K);
      }
    }
    const auto plin = kernels::EquivariantLinear::e3nn(hidden, hidden);
    add_drawn(q + "linear.weight", {plin.weight_numel}, plin.weight_numel, 1.0);
    prods.push_back({{"correlation", corr}, {"irreps_in", target.str()}, {"irreps_out", hidden.str()}, {"use_sc", residual}});
    if (c.agnostic_product) {
      prods.back()["agnostic"] = true;
    }
    const std::string r = "readouts." + std::to_string(c.last_readout_only ? 0 : t) + ".";
    if (t < T - 1 && !c.last_readout_only) {
      const auto ro = kernels::EquivariantLinear::e3nn(hidden, head_out);
      add_drawn(r + "linear.weight", {ro.weight_numel}, ro.weight_numel, 1.0);
      reads.push_back({{"class", "LinearReadoutBlock"}, {"irreps_in", hidden.str()}, {"irreps_out", head_out.str()}});
    } else if (t == T - 1) {
      const Irreps mlp = Irreps::parse(irrep_str(H * c.mlp_irreps, 0));
      const auto l1 = kernels::EquivariantLinear::e3nn(hidden, mlp);
      const auto l2 = kernels::EquivariantLinear::e3nn(mlp, head_out);
      add_drawn(r + "linear_1.weight", {l1.weight_numel}, l1.weight_numel, 1.0);
      add_drawn(r + "linear_2.weight", {l2.weight_numel}, l2.weight_numel, 1.0);
      if (c.readout_bias) {
        const auto lm = kernels::EquivariantLinear::e3nn(mlp, mlp);
        add_drawn(r + "linear_mid.weight", {lm.weight_numel}, lm.weight_numel, 1.0);
        // e3nn creates its biases as zeros: scale 0 (a test's weight source may draw others).
        add_drawn(r + "linear_mid.bias", {mlp.dim()}, mlp.dim(), 0.0);
        add_drawn(r + "linear_2.bias", {H}, H, 0.0);
      }
      reads.push_back({{"class", c.readout_bias ? "NonLinearBiasReadoutBlock" : "NonLinearReadoutBlock"},
                       {"irreps_in", hidden.str()},
                       {"mlp_irreps", mlp.str()},
                       {"gate", "silu"},
                       {"gate_cst", kSiluCst},
                       {"irreps_out", head_out.str()},
                       {"num_heads", H}});
    }
    features = hidden;
  }
  if (c.scale_shift) {
    if (H == 1) {
      pot.add<double>("scale_shift.scale", {}, {v.scale[0]});
      pot.add<double>("scale_shift.shift", {}, {v.shift[0]});
    } else {
      pot.add<double>("scale_shift.scale", {H}, v.scale);
      pot.add<double>("scale_shift.shift", {H}, v.shift);
    }
  }
  nlohmann::json zbl = nullptr;
  if (c.zbl) {
    // ZBLBasis(p=num_polynomial_cutoff): mace-torch's fixed constants and buffers.
    pot.add<double>("pair_repulsion_fn.c", {4}, {0.1818, 0.5099, 0.2802, 0.02817});
    pot.add<double>("pair_repulsion_fn.a_exp", {}, {0.3});
    pot.add<double>("pair_repulsion_fn.a_prefactor", {}, {0.4543});
    pot.add<std::int64_t>("pair_repulsion_fn.p", {}, {c.num_polynomial_cutoff});
    const auto& radii = ase_covalent_radii();
    pot.add<double>("pair_repulsion_fn.covalent_radii", {static_cast<std::int64_t>(radii.size())}, radii);
    std::vector<double> per_species;
    for (int z : c.atomic_numbers) {
      per_species.push_back(radii.at(z));
    }
    zbl = {{"p", c.num_polynomial_cutoff},  {"a_exp", 0.3},
           {"a_prefactor", 0.4543},         {"c", {0.1818, 0.5099, 0.2802, 0.02817}},
           {"covalent_radii", per_species}, {"screening_exponents", {3.2, 0.9423, 0.4028, 0.2016}},
           {"bohr_radius", 0.529},          {"coulomb_constant", 14.3996}};
  }
  pot.add<std::int64_t>("atomic_numbers", {E}, std::vector<std::int64_t>(c.atomic_numbers.begin(), c.atomic_numbers.end()));
  nlohmann::json hp = {{"model_class", c.scale_shift ? "ScaleShiftMACE" : "MACE"},
                       {"num_elements", E},
                       {"r_max", c.r_max},
                       {"num_bessel", c.num_bessel},
                       {"num_polynomial_cutoff", c.num_polynomial_cutoff},
                       {"max_ell", c.max_ell},
                       {"num_interactions", T},
                       {"heads", c.heads},
                       {"radial_type", c.radial_type},
                       {"distance_transform", c.distance_transform},
                       {"interactions", inter},
                       {"products", prods},
                       {"readouts", reads},
                       {"zbl", zbl}};
  if (H == 1) {
    hp["default_head"] = c.heads[0];
  }
  if (c.last_readout_only) {
    hp["use_last_readout_only"] = true;
  }
  if (!embeddings.is_null()) {
    hp["embeddings"] = embeddings;
  }
  if (!c.apply_cutoff) {
    hp["apply_cutoff"] = false;
  }
  pot.metadata = {{"model", "mace"},
                  {"species", species},
                  {"cutoffs", {{"r_max", c.r_max}}},
                  {"units", "metal"},
                  {"dtype", "float64"},
                  {"hyperparameters", hp},
                  {"provenance", v.provenance}};
  pot.validate_metadata();
  return pot;
}

}  // namespace fastmlip::models::mace

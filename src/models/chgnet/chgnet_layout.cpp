// SPDX-License-Identifier: MIT
// The CHGNet file layout's writer (chgnet_layout.hpp): chgnet 0.3.0's CHGNet.__init__, tensor by
// tensor in its construction order, so that one weight source gives one model.
#include "models/chgnet/chgnet_layout.hpp"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/elements.hpp"
#include "core/error.hpp"

namespace fastmlip::models {

io::PotentialFile write_chgnet_layout(const ChgnetLayout& c, const ChgnetWeightDraw& draw,
                                      const nlohmann::json& provenance) {
  const std::string fn = "write_chgnet_layout: ";
  auto bad = [&](const std::string& field, const std::string& value, const std::string& want) {
    throw InputError(fn + field + " = " + value + " " + want);
  };
  for (const auto& [field, v] : {std::pair<const char*, int>{"atom_fea_dim", c.atom_fea_dim},
                                 {"bond_fea_dim", c.bond_fea_dim},
                                 {"angle_fea_dim", c.angle_fea_dim},
                                 {"num_radial", c.num_radial},
                                 {"num_angular", c.num_angular},
                                 {"cutoff_coeff", c.cutoff_coeff}}) {
    if (v < 1 || v > 4096) {
      bad(field, std::to_string(v), "is out of range: it must be in [1, 4096]");
    }
  }
  for (const auto& [field, v] : {std::pair<const char*, int>{"atom_conv_hidden_dim", c.atom_conv_hidden_dim},
                                 {"bond_conv_hidden_dim", c.bond_conv_hidden_dim},
                                 {"angle_layer_hidden_dim", c.angle_layer_hidden_dim}}) {
    if (v < 0 || v > 4096) {
      bad(field, std::to_string(v), "is out of range: it must be in [0, 4096] (0: no hidden layer)");
    }
  }
  if (c.num_angular % 2 != 1) {
    bad("num_angular", std::to_string(c.num_angular), "must be odd (1 + 2 x the Fourier order)");
  }
  if (c.n_conv < 2 || c.n_conv > 64) {
    bad("n_conv", std::to_string(c.n_conv), "is out of range: CHGNet needs at least 2 (at most 64)");
  }
  // chgnet's MLP takes a non-empty list of hidden widths (an empty one fails in its constructor).
  if (c.mlp_hidden_dims.empty() || c.mlp_hidden_dims.size() > 16) {
    bad("mlp_hidden_dims", "a list of " + std::to_string(c.mlp_hidden_dims.size()) + " widths",
        "must have 1 to 16 entries");
  }
  for (int h : c.mlp_hidden_dims) {
    if (h < 1 || h > 4096) {
      bad("mlp_hidden_dims", "[.., " + std::to_string(h) + ", ..]", "must hold widths in [1, 4096]");
    }
  }
  if (!(c.atom_graph_cutoff > 0) || !std::isfinite(c.atom_graph_cutoff)) {
    bad("atom_graph_cutoff", std::to_string(c.atom_graph_cutoff), "must be positive (Angstrom)");
  }
  if (!(c.bond_graph_cutoff > 0 && c.bond_graph_cutoff <= c.atom_graph_cutoff)) {
    bad("bond_graph_cutoff", std::to_string(c.bond_graph_cutoff),
        "must be in (0, atom_graph_cutoff = " + std::to_string(c.atom_graph_cutoff) + "] (Angstrom)");
  }
  if (c.max_num_elements < 1 || c.max_num_elements > kMaxAtomicNumber) {
    bad("max_num_elements", std::to_string(c.max_num_elements),
        "is out of range: it must be in [1, " + std::to_string(kMaxAtomicNumber) + "]");
  }
  if (c.atomic_numbers.empty() || c.e0s.size() != c.atomic_numbers.size()) {
    bad("e0s", "a list of " + std::to_string(c.e0s.size()) + " energies",
        "must give one AtomRef energy per element of atomic_numbers (" +
            std::to_string(c.atomic_numbers.size()) + ", at least one)");
  }
  const int n_el = c.max_num_elements;
  std::vector<double> atom_ref(n_el, 0.0);
  for (std::size_t i = 0; i < c.atomic_numbers.size(); ++i) {
    const int z = c.atomic_numbers[i];
    if (z < 1 || z > n_el) {
      bad("atomic_numbers", "[.., " + std::to_string(z) + ", ..]",
          "is beyond the model's max_num_elements = " + std::to_string(n_el));
    }
    // The core refuses an element whose AtomRef is exactly 0 as absent from training.
    if (!std::isfinite(c.e0s[i]) || c.e0s[i] == 0.0 || atom_ref[z - 1] != 0.0) {
      bad("e0s", "[" + element_symbol(z) + ": " + std::to_string(c.e0s[i]) + "]",
          "must be finite and non-zero, and given once per element");
    }
    atom_ref[z - 1] = c.e0s[i];
  }

  io::PotentialFile pot;
  auto put = [&](const std::string& name, std::vector<std::int64_t> shape, std::vector<double> values) {
    pot.add<double>(name, std::move(shape), std::move(values));
  };
  auto drawn = [&](const std::string& name, std::vector<std::int64_t> shape, ChgnetInit init) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    auto values = draw(name, n, init);
    if (static_cast<std::int64_t>(values.size()) != n) {
      throw InputError(fn + "the weight source gave " + std::to_string(values.size()) + " values for " + name +
                       ", not " + std::to_string(n));
    }
    put(name, std::move(shape), std::move(values));
  };
  // nn.Linear's default initialisation, kaiming_uniform_(a = sqrt(5)) for the weight, is
  // U(-1/sqrt(in), 1/sqrt(in)), with the same bound for the bias; weight first.
  auto linear = [&](const std::string& prefix, std::int64_t in, std::int64_t out, bool bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    drawn(prefix + ".weight", {out, in}, {ChgnetInit::uniform, bound});
    if (bias) {
      drawn(prefix + ".bias", {out}, {ChgnetInit::uniform, bound});
    }
  };
  auto layer_norm = [&](const std::string& prefix, std::int64_t n) {
    put(prefix + ".weight", {n}, std::vector<double>(static_cast<std::size_t>(n), 1.0));
    put(prefix + ".bias", {n}, std::vector<double>(static_cast<std::size_t>(n), 0.0));
  };
  // chgnet's GatedMLP: mlp_core then mlp_gate (Linear, SiLU, Dropout, Linear, or Dropout, Linear
  // without a hidden layer), then the two norms.
  auto gated = [&](const std::string& prefix, std::int64_t in, std::int64_t hidden, std::int64_t out) {
    for (const char* part : {".mlp_core.layers.", ".mlp_gate.layers."}) {
      if (hidden > 0) {
        linear(prefix + part + "0", in, hidden, true);
        linear(prefix + part + "3", hidden, out, true);
      } else {
        linear(prefix + part + "1", in, out, true);
      }
    }
    if (c.layer_norm) {
      layer_norm(prefix + ".bn1", out);
      layer_norm(prefix + ".bn2", out);
    }
  };
  const std::int64_t Fa = c.atom_fea_dim, Fb = c.bond_fea_dim, Fg = c.angle_fea_dim;
  const std::int64_t nr = c.num_radial, na = c.num_angular;
  // In chgnet's construction order (CHGNet.__init__), so that one seed gives one model.
  pot.add<double>("composition_model.fc.weight", {1, n_el}, atom_ref);
  // nn.Embedding: N(0, 1).
  drawn("atom_embedding.embedding.weight", {n_el, Fa}, {ChgnetInit::normal, 1.0});
  // Learnable frequencies at their canonical values: n pi (RadialBessel), k (Fourier).
  std::vector<double> bessel, fourier;
  for (std::int64_t n = 1; n <= nr; ++n) bessel.push_back(static_cast<double>(n) * M_PI);
  for (std::int64_t k = 1; k <= (na - 1) / 2; ++k) fourier.push_back(static_cast<double>(k));
  put("bond_basis_expansion.rbf_expansion_ag.frequencies", {nr}, bessel);
  put("bond_basis_expansion.rbf_expansion_bg.frequencies", {nr}, bessel);
  linear("bond_embedding", nr, Fb, false);
  linear("bond_weights_ag", nr, Fa, false);
  linear("bond_weights_bg", nr, Fb, false);
  put("angle_basis_expansion.fourier_expansion.frequencies", {(na - 1) / 2}, fourier);
  linear("angle_embedding", na, Fg, false);
  for (int k = 0; k < c.n_conv; ++k) {
    const std::string a = "atom_conv_layers." + std::to_string(k);
    gated(a + ".twoBody_atom", 2 * Fa + Fb, c.atom_conv_hidden_dim, Fa);
    linear(a + ".mlp_out.layers.1", Fa, Fa, c.mlp_out_bias);
  }
  for (int k = 0; k + 1 < c.n_conv; ++k) {
    const std::string b = "bond_conv_layers." + std::to_string(k);
    gated(b + ".twoBody_bond", 2 * Fb + Fg + Fa, c.bond_conv_hidden_dim, Fb);
    linear(b + ".mlp_out.layers.1", Fb, Fb, c.mlp_out_bias);
  }
  // n_conv - 1 AngleUpdates as chgnet builds them, the last of which no layer reads.
  for (int k = 0; k + 1 < c.n_conv; ++k) {
    gated("angle_layers." + std::to_string(k) + ".twoBody_bond", 2 * Fb + Fg + Fa, c.angle_layer_hidden_dim,
          Fg);
  }
  linear("site_wise", Fa, 1, true);
  if (c.layer_norm) {
    layer_norm("readout_norm", Fa);
  }
  // chgnet's MLP: Linear, SiLU, (Linear, SiLU)*, Dropout, Linear(.., 1).
  const auto& hd = c.mlp_hidden_dims;
  std::int64_t in = Fa;
  for (std::size_t k = 0; k < hd.size(); ++k) {
    linear("mlp.layers." + std::to_string(2 * k), in, hd[k], true);
    in = hd[k];
  }
  linear("mlp.layers." + std::to_string(2 * hd.size() + 1), in, 1, true);

  nlohmann::json species = nlohmann::json::array();
  for (int z = 1; z <= n_el; ++z) {
    species.push_back({{"Z", z}, {"symbol", element_symbol(z)}});
  }
  const nlohmann::json norm = c.layer_norm ? nlohmann::json("layer") : nlohmann::json(nullptr);
  pot.metadata = {{"model", "chgnet"},
                  {"species", species},
                  {"cutoffs", {{"atom_graph", c.atom_graph_cutoff}, {"bond_graph", c.bond_graph_cutoff}}},
                  {"units", "metal"},
                  {"dtype", "float64"},
                  {"hyperparameters",
                   {{"atom_fea_dim", c.atom_fea_dim},
                    {"bond_fea_dim", c.bond_fea_dim},
                    {"angle_fea_dim", c.angle_fea_dim},
                    {"num_radial", c.num_radial},
                    {"num_angular", c.num_angular},
                    {"n_conv", c.n_conv},
                    {"atom_conv_hidden_dim", c.atom_conv_hidden_dim},
                    {"bond_conv_hidden_dim", c.bond_conv_hidden_dim},
                    {"angle_layer_hidden_dim", c.angle_layer_hidden_dim},
                    {"mlp_hidden_dims", c.mlp_hidden_dims},
                    {"mlp_out_bias", c.mlp_out_bias},
                    {"mlp_first", true},
                    {"update_bond", true},
                    {"update_angle", true},
                    {"learnable_rbf", true},
                    {"is_intensive", true},
                    {"composition_model", "AtomRef"},
                    {"non_linearity", "silu"},
                    {"gMLP_norm", norm},
                    {"readout_norm", norm},
                    {"cutoff_coeff", c.cutoff_coeff},
                    {"version", "fresh"}}},
                  {"provenance", provenance}};
  pot.validate_metadata();
  return pot;
}

}  // namespace fastmlip::models

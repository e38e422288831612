// SPDX-License-Identifier: MIT
#pragma once
// A small random MACE potential built in C++ with the layout of docs/mace-potential.md
// (mace-torch state_dict names and shapes, mace-torch's hyperparameters), U bases from
// symmetric_contraction_basis. It exercises every block the loader supports without needing
// the Python fixtures.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/tolerance.hpp"
#include "io/potential_file.hpp"
#include "kernels/channelwise_tp.hpp"
#include "kernels/linear.hpp"
#include "math/coupling_basis.hpp"
#include "math/irreps.hpp"

namespace fastmlip::test {

struct MaceTestConfig {
  int channels = 4;
  int max_ell = 2;
  int num_interactions = 2;
  std::vector<int> correlation = {3, 2, 2, 2};
  int num_bessel = 6;
  int poly_p = 5;
  double r_max = 4.0;
  bool residual_first = false;  // MACE-MP: the first block is RealAgnosticInteractionBlock
  bool scale_shift = true;
  bool zbl = false;
  int heads = 1;
  int mlp_per_head = 6;
  std::vector<int> z = {29, 28, 8};
  std::vector<std::string> symbols = {"Cu", "Ni", "O"};
};

inline std::vector<double> random_values(Uniform& u, std::size_t n, double scale) {
  std::vector<double> v(n);
  for (double& x : v) {
    x = u(-scale, scale);
  }
  return v;
}

/// ase.data.covalent_radii for Z = 0..30 (what mace-torch's ZBLBasis stores as a buffer).
inline std::vector<double> covalent_radii_head() {
  return {0.2,  0.31, 0.28, 1.28, 0.96, 0.84, 0.76, 0.71, 0.66, 0.57, 0.58, 1.66, 1.41, 1.21, 1.11, 1.07,
          1.05, 1.02, 1.06, 2.03, 1.76, 1.7,  1.6,  1.53, 1.39, 1.39, 1.32, 1.26, 1.24, 1.32, 1.22};
}

inline io::PotentialFile make_mace_potential(const MaceTestConfig& cfg, std::uint64_t seed) {
  Uniform u(seed);
  const int E = static_cast<int>(cfg.z.size()), C = cfg.channels, T = cfg.num_interactions, H = cfg.heads;
  io::PotentialFile pot;
  nlohmann::json species = nlohmann::json::array();
  for (int e = 0; e < E; ++e) {
    species.push_back({{"Z", cfg.z[e]}, {"symbol", cfg.symbols[e]}});
  }
  const Irreps sh = Irreps::spherical_harmonics(cfg.max_ell);
  // interaction_irreps = (sh_irreps * C).sort().simplify(): C copies of each l of the harmonics.
  std::string target_s, hidden_full_s = std::to_string(C) + "x0e+" + std::to_string(C) + "x1o";
  for (int l = 0; l <= cfg.max_ell; ++l) {
    target_s += (l ? "+" : "") + std::to_string(C) + "x" + std::to_string(l) + ((l % 2) ? "o" : "e");
  }
  if (cfg.max_ell == 0) {
    hidden_full_s = std::to_string(C) + "x0e";
  }
  const Irreps target = Irreps::parse(target_s), hidden_full = Irreps::parse(hidden_full_s);
  const Irreps scalars = Irreps::parse(std::to_string(C) + "x0e");
  const Irreps heads_out = Irreps::parse(std::to_string(H) + "x0e");

  nlohmann::json inter = nlohmann::json::array(), prods = nlohmann::json::array(), reads = nlohmann::json::array();
  pot.add<double>("node_embedding.linear.weight", {E * C}, random_values(u, E * C, 1.0));
  std::vector<double> bw;
  for (int n = 1; n <= cfg.num_bessel; ++n) {
    bw.push_back(M_PI / cfg.r_max * n);
  }
  pot.add<double>("radial_embedding.bessel_fn.bessel_weights", {cfg.num_bessel}, bw);
  if (H == 1) {
    pot.add<double>("atomic_energies_fn.atomic_energies", {E}, random_values(u, E, 3.0));
  } else {
    pot.add<double>("atomic_energies_fn.atomic_energies", {H, E}, random_values(u, H * E, 3.0));
  }
  Irreps features = scalars;
  const double silu_cst = 1.6791767923989418;
  for (int t = 0; t < T; ++t) {
    const std::string p = "interactions." + std::to_string(t) + ".";
    const bool residual = t > 0 || cfg.residual_first;
    const Irreps hidden = (t == T - 1 && T > 1) ? scalars : hidden_full;
    const auto tp = kernels::ChannelwiseTP::mace(features, sh, target);
    const auto up = kernels::EquivariantLinear::e3nn(features, features);
    const auto lin = kernels::EquivariantLinear::e3nn(tp.irreps_out, target);
    const auto skip = residual ? kernels::EquivariantLinear::element_skip(features, E, hidden)
                               : kernels::EquivariantLinear::element_skip(target, E, target);
    const std::vector<int> widths = {cfg.num_bessel, 8, tp.weight_numel};
    pot.add<double>(p + "linear_up.weight", {up.weight_numel}, random_values(u, up.weight_numel, 1.0));
    for (std::size_t k = 0; k + 1 < widths.size(); ++k) {
      pot.add<double>(p + "conv_tp_weights.layer" + std::to_string(k) + ".weight", {widths[k], widths[k + 1]},
                      random_values(u, static_cast<std::size_t>(widths[k]) * widths[k + 1], 1.0));
    }
    pot.add<double>(p + "linear.weight", {lin.weight_numel}, random_values(u, lin.weight_numel, 1.0));
    pot.add<double>(p + "skip_tp.weight", {skip.weight_numel * E}, random_values(u, skip.weight_numel * E, 1.0));
    inter.push_back({{"class", residual ? "RealAgnosticResidualInteractionBlock" : "RealAgnosticInteractionBlock"},
                     {"node_feats_irreps", features.str()},
                     {"edge_attrs_irreps", sh.str()},
                     {"target_irreps", target.str()},
                     {"hidden_irreps", hidden.str()},
                     {"irreps_mid", tp.irreps_out.str()},
                     {"radial_mlp", widths},
                     {"radial_mlp_cst", silu_cst},
                     {"avg_num_neighbors", 3.5}});
    // Product.
    const int corr = cfg.correlation[t];
    const std::string q = "products." + std::to_string(t) + ".";
    const auto basis = symmetric_contraction_basis(target, hidden, corr);
    for (std::size_t o = 0; o < hidden.size(); ++o) {
      const std::string c = q + "symmetric_contractions.contractions." + std::to_string(o) + ".";
      for (int nu = 1; nu <= corr; ++nu) {
        const auto& s = basis.shapes[o][nu - 1];
        pot.add<double>(c + "U_matrix_" + std::to_string(nu), std::vector<std::int64_t>(s.begin(), s.end()),
                        basis.U[o][nu - 1]);
        const int K = s.back();
        const std::string wname = nu == corr ? c + "weights_max" : c + "weights." + std::to_string(corr - 1 - nu);
        pot.add<double>(wname, {E, K, C}, random_values(u, static_cast<std::size_t>(E) * K * C, 1.0 / K));
      }
    }
    const auto plin = kernels::EquivariantLinear::e3nn(hidden, hidden);
    pot.add<double>(q + "linear.weight", {plin.weight_numel}, random_values(u, plin.weight_numel, 1.0));
    prods.push_back({{"correlation", corr},
                     {"irreps_in", target.str()},
                     {"irreps_out", hidden.str()},
                     {"use_sc", residual}});
    // Readout.
    const std::string r = "readouts." + std::to_string(t) + ".";
    if (t < T - 1) {
      const auto ro = kernels::EquivariantLinear::e3nn(hidden, heads_out);
      pot.add<double>(r + "linear.weight", {ro.weight_numel}, random_values(u, ro.weight_numel, 1.0));
      reads.push_back({{"class", "LinearReadoutBlock"}, {"irreps_in", hidden.str()}, {"irreps_out", heads_out.str()}});
    } else {
      const Irreps mlp = Irreps::parse(std::to_string(H * cfg.mlp_per_head) + "x0e");
      const auto l1 = kernels::EquivariantLinear::e3nn(hidden, mlp);
      const auto l2 = kernels::EquivariantLinear::e3nn(mlp, heads_out);
      pot.add<double>(r + "linear_1.weight", {l1.weight_numel}, random_values(u, l1.weight_numel, 1.0));
      pot.add<double>(r + "linear_2.weight", {l2.weight_numel}, random_values(u, l2.weight_numel, 1.0));
      reads.push_back({{"class", "NonLinearReadoutBlock"},
                       {"irreps_in", hidden.str()},
                       {"mlp_irreps", mlp.str()},
                       {"gate", "silu"},
                       {"gate_cst", silu_cst},
                       {"irreps_out", heads_out.str()}});
    }
    features = hidden;
  }
  if (cfg.scale_shift) {
    if (H == 1) {
      pot.add<double>("scale_shift.scale", {}, {1.7});
      pot.add<double>("scale_shift.shift", {}, {-0.3});
    } else {
      pot.add<double>("scale_shift.scale", {H}, random_values(u, H, 2.0));
      pot.add<double>("scale_shift.shift", {H}, random_values(u, H, 1.0));
    }
  }
  nlohmann::json zbl = nullptr;
  if (cfg.zbl) {
    pot.add<double>("pair_repulsion_fn.c", {4}, {0.1818, 0.5099, 0.2802, 0.02817});
    pot.add<double>("pair_repulsion_fn.a_exp", {}, {0.3});
    pot.add<double>("pair_repulsion_fn.a_prefactor", {}, {0.4543});
    pot.add<std::int32_t>("pair_repulsion_fn.p", {}, {cfg.poly_p});
    const auto radii = covalent_radii_head();
    pot.add<double>("pair_repulsion_fn.covalent_radii", {static_cast<std::int64_t>(radii.size())}, radii);
    zbl = {{"p", cfg.poly_p}};
  }
  pot.add<std::int64_t>("atomic_numbers", {E}, std::vector<std::int64_t>(cfg.z.begin(), cfg.z.end()));
  std::vector<std::string> head_names;
  for (int h = 0; h < H; ++h) {
    head_names.push_back(H == 1 ? "default" : "head" + std::to_string(h));
  }
  pot.metadata = {{"model", "mace"},
                  {"species", species},
                  {"cutoffs", {{"r_max", cfg.r_max}}},
                  {"units", "metal"},
                  {"dtype", "float64"},
                  {"hyperparameters",
                   {{"model_class", cfg.scale_shift ? "ScaleShiftMACE" : "MACE"},
                    {"num_elements", E},
                    {"r_max", cfg.r_max},
                    {"num_bessel", cfg.num_bessel},
                    {"num_polynomial_cutoff", cfg.poly_p},
                    {"max_ell", cfg.max_ell},
                    {"num_interactions", T},
                    {"heads", head_names},
                    {"interactions", inter},
                    {"products", prods},
                    {"readouts", reads},
                    {"zbl", zbl}}},
                  {"provenance", {{"writer", "fastmlip tests/models"}}}};
  return pot;
}

}  // namespace fastmlip::test

// SPDX-License-Identifier: MIT
#pragma once
// A small random MACE potential in the layout of docs/mace-potential.md, written by the core's
// one writer of it (models/mace/mace_layout.hpp). It exercises every block the loader supports
// without needing the Python fixtures.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/tolerance.hpp"
#include "io/potential_file.hpp"
#include "models/mace/mace_layout.hpp"
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
  bool density = false;            // the Density blocks (MPA-0, OMAT-0)
  bool nonlinear = false;          // RealAgnosticResidualNonLinearInteractionBlock throughout (MH-1, OMOL)
  bool last_readout_only = false;  // mace-torch's use_last_readout_only
  bool apply_cutoff = true;        // false: the envelope on the radial MLP outputs (MACE-OMOL)
  bool agnostic_product = false;   // one set of product weights (MACE-MH-1)
  bool readout_bias = false;       // NonLinearBiasReadoutBlock (MACE-MH-1)
  std::string edge_irreps;         // linear_up's output irreps (MACE-MH-1, OMOL); "": square
  bool edge_irreps_first = false;  // the first layer's too, as their scalars
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

/// The file of cfg through the core's layout writer (models/mace/mace_layout.hpp), weights and
/// E0s drawn uniformly from `seed`. Written as an older mace-torch wrote it: no stored Bessel
/// prefactor (the loader computes sqrt(2 / r_max)).
inline io::PotentialFile make_mace_potential(const MaceTestConfig& cfg, std::uint64_t seed) {
  Uniform u(seed);
  const int E = static_cast<int>(cfg.z.size()), H = cfg.heads;
  models::mace::MaceLayout layout;
  layout.atomic_numbers = cfg.z;
  layout.r_max = cfg.r_max;
  layout.num_bessel = cfg.num_bessel;
  layout.num_polynomial_cutoff = cfg.poly_p;
  layout.max_ell = cfg.max_ell;
  layout.num_channels = cfg.channels;
  layout.max_L = cfg.max_ell == 0 ? 0 : 1;  // hidden C x 0e + C x 1o (MACE-MP's)
  layout.correlation = cfg.correlation;
  layout.num_interactions = cfg.num_interactions;
  layout.radial_mlp = {8};
  layout.mlp_irreps = cfg.mlp_per_head;
  layout.avg_num_neighbors = 3.5;
  layout.scale_shift = cfg.scale_shift;
  layout.interaction_first =
      cfg.residual_first ? "RealAgnosticResidualInteractionBlock" : "RealAgnosticInteractionBlock";
  if (cfg.density) {
    layout.interaction_first = cfg.residual_first ? "RealAgnosticDensityResidualInteractionBlock"
                                                  : "RealAgnosticDensityInteractionBlock";
    layout.interaction = "RealAgnosticDensityResidualInteractionBlock";
  }
  if (cfg.nonlinear) {
    layout.interaction_first = layout.interaction = "RealAgnosticResidualNonLinearInteractionBlock";
  }
  layout.zbl = cfg.zbl;
  layout.last_readout_only = cfg.last_readout_only;
  layout.apply_cutoff = cfg.apply_cutoff;
  layout.agnostic_product = cfg.agnostic_product;
  layout.readout_bias = cfg.readout_bias;
  layout.edge_irreps = cfg.edge_irreps;
  layout.edge_irreps_first = cfg.edge_irreps_first;
  layout.heads.clear();
  for (int h = 0; h < H; ++h) {
    layout.heads.push_back(H == 1 ? "default" : "head" + std::to_string(h));
  }
  layout.bessel_prefactor = false;
  models::mace::MaceLayoutValues values;
  values.atomic_energies = random_values(u, static_cast<std::size_t>(H) * E, 3.0);
  if (H == 1) {
    values.scale = {1.7};
    values.shift = {-0.3};
  } else {
    values.scale = random_values(u, H, 2.0);
    values.shift = random_values(u, H, 1.0);
  }
  values.provenance = {{"writer", "fastmlip tests/models"}};
  return models::mace::write_mace_layout(
      layout, values, [&u](const std::string& name, std::int64_t n, double scale) {
        // Uniform in [-scale, scale]: the tests want weights of every sign at a known size, and
        // biases (which mace-torch starts at zero) that are not zero; likewise what mace-torch
        // starts at a constant (scale 0: LayerNorm's affine map, the non-linear block's alpha
        // and beta), around that constant.
        const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
        return random_values(u, static_cast<std::size_t>(n), bias || scale == 0 ? 0.5 : scale);
      });
}

}  // namespace fastmlip::test

// SPDX-License-Identifier: MIT
#pragma once
/// \file The training losses, as mace-torch 0.3.13 computes them (mace/modules/loss.py).
///
/// With n_g the atoms of graph g, w_g = config_weight, w^E_g, w^F_g, w^S_g, w^V_g the per-label
/// weights (trainer/data: 0 when the frame lacks the label) and lambda_* the --*_weight options:
///
///   L_E = mean_g  w_g w^E_g ((E_g - E^ref_g) / n_g)^2                    (mean over graphs)
///   L_F = mean_{i,a}  w_g(i) w^F_g(i) (F_ia - F^ref_ia)^2                (mean over 3N entries)
///   L_S = mean_{g,a,b}  w_g w^S_g (S_gab - S^ref_gab)^2                   (mean over 9 G entries)
///   L_V = mean_{g,a,b}  w_g w^V_g ((V_gab - V^ref_gab) / n_g)^2          (mean over 9 G entries)
///
///   weighted (WeightedEnergyForcesLoss):          lambda_E L_E + lambda_F L_F
///   stress   (WeightedEnergyForcesStressLoss):    lambda_E L_E + lambda_F L_F + lambda_S L_S
///   virials  (WeightedEnergyForcesVirialsLoss):   lambda_E L_E + lambda_F L_F + lambda_V L_V
///   huber    (WeightedHuberEnergyForcesStressLoss, CHGNet's criterion): the mean Huber loss
///            h_delta(x) = x^2/2 for |x| <= delta, delta (|x| - delta/2) otherwise, of the
///            energy per atom, the forces and the stress, weighted by lambda_E, lambda_F,
///            lambda_S; like mace-torch's, it ignores the per-config weights.
///
/// CHGNet's magnetic-moment term (chgnet's CombinedLoss, mag_loss_ratio), added to any of the
/// above when the model predicts magmoms and lambda_M = --magmom_weight > 0: over the M atoms
/// of the frames that carry magmom labels (data::Config::magmoms),
///
///   L_M = (1/M) sum_i  w_g(i) w^M_g(i) (m_i - m^ref_i)^2      (huber: (1/M) sum_i h_delta(m_i - m^ref_i))
///
/// w^M_g = Config::magmom_weight. A batch without magmom labels adds 0, as chgnet skips the
/// term; with a LossReduction, M is global_num_magmom_atoms.
///
/// Data parallel: the means above are over this rank's batch. With a LossReduction giving the
/// global counts, each term is (local sum) * world_size / (global count), mace-torch's
/// reduce_loss under DDP: averaging the ranks' gradients (allreduce_mean_gradients) then gives
/// the gradient of the mean over the global batch.
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace fastmlip::trainer {
class Options;
}

namespace fastmlip::trainer::train {

enum class LossKind { kWeighted, kStress, kVirials, kHuber };

/// --loss and the --*_weight / --huber_delta options.
struct LossConfig {
  LossKind kind = LossKind::kWeighted;
  double energy_weight = 1.0, forces_weight = 100.0, stress_weight = 1.0, virials_weight = 1.0;
  double huber_delta = 0.01;
  double magmom_weight = 0.1;  ///< lambda_M (chgnet's mag_loss_ratio default)
};
LossConfig loss_config_from(const Options& options);
/// "weighted", "stress", "virials", "huber".
LossKind parse_loss_kind(const std::string& name);

/// The labels of a batch, as tensors. Absent labels are zeros with a zero per-label weight.
struct LossTargets {
  torch::Tensor energy;     ///< [G] eV
  torch::Tensor forces;     ///< [N, 3] eV/A
  torch::Tensor stress;     ///< [G, 3, 3] eV/A^3, ASE's sign
  torch::Tensor virials;    ///< [G, 3, 3] eV, mace-torch's sign
  torch::Tensor num_atoms;  ///< [G] atoms per graph (floating)
  torch::Tensor batch;      ///< [N] int64 graph of each atom
  torch::Tensor weight, energy_weight, forces_weight, stress_weight, virials_weight;  ///< [G]
  torch::Tensor magmoms;              ///< [N] mu_B, 0 where absent
  torch::Tensor magmom_weight;        ///< [N] w_g w^M_g of the atom's frame, 0 where it has no magmoms
  torch::Tensor has_magmom;           ///< [N] 1 where the atom's frame has magmoms, else 0
  std::int64_t num_magmom_atoms = 0;  ///< atoms with magmom labels
};

/// Targets of configurations concatenated in order (the atom order of make_mace_batch over the
/// same structures), in `dtype` (float32 or float64).
/// On `device`, where the model's predictions are (the tensors are built on the host, then moved).
LossTargets make_loss_targets(const std::vector<const data::Config*>& configs, torch::Dtype dtype,
                              torch::Device device = torch::kCPU);

/// What the model predicted; stress and virials are needed only by the losses that use them.
struct LossPredictions {
  torch::Tensor energy;   ///< [G]
  torch::Tensor forces;   ///< [N, 3]
  torch::Tensor stress;   ///< [G, 3, 3], for stress and huber (huber skips it when undefined)
  torch::Tensor virials;  ///< [G, 3, 3], for virials
  /// [N], from a model with a magmom head (CHGNet); undefined: no magmom term. The {} keeps
  /// the callers' four-member aggregate initialisations free of -Wmissing-field-initializers.
  torch::Tensor magmoms{};
};

/// Global element counts for data-parallel normalisation (see the file comment).
struct LossReduction {
  std::int64_t global_num_graphs = 0;
  std::int64_t global_num_atoms = 0;
  int world_size = 1;
  std::int64_t global_num_magmom_atoms = 0;  ///< needed when the loss has a magmom term
};

/// The total and its (already lambda-weighted) terms; terms a loss does not use are undefined.
struct LossTerms {
  torch::Tensor total, energy, forces, stress, virials, magmoms;
};

/// Throws InputError when a prediction the loss needs is missing or shapes disagree.
LossTerms compute_loss(const LossConfig& config, const LossPredictions& pred, const LossTargets& ref,
                       const std::optional<LossReduction>& reduction = std::nullopt);

}  // namespace fastmlip::trainer::train

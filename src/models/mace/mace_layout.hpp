// SPDX-License-Identifier: MIT
#pragma once
/// \file The writer of the MACE potential-file layout (docs/mace-potential.md), the twin of
/// load_mace_spec (mace_spec.hpp), its one reader: mace-torch's state_dict names and shapes and
/// the hyperparameters the loader reads, for the architecture mace_run_train's `--model MACE`
/// builds (ScaleShiftMACE or MACE; a first interaction block, residual blocks after it, plain or
/// Density; linear readouts, the last one non-linear; Bessel, Gaussian or Chebyshev radial basis;
/// optional ZBL and Agnesi or Soft transform), with our
/// coupling basis as the U matrices.
///
/// The weights come from the caller, one call of `draw` per tensor in mace-torch's construction
/// order: the trainer draws a fresh model from torch's generator, the tests from their uniform
/// stream. Everything else (radial basis constants, U matrices, ZBL constants) is fixed here.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/potential_file.hpp"

namespace fastmlip::models::mace {

/// One feature of mace_run_train's --embedding_specs (mace-torch >= 0.3.14, MACE-OMOL): the
/// structure's total charge or spin, embedded and added to every node's embedding.
struct MaceEmbeddingFeature {
  std::string name;  ///< "total_charge" or "total_spin" (per structure)
  std::string type;  ///< "categorical" (a table) or "continuous" (Linear-SiLU-Linear)
  int emb_dim = 0;
  int num_classes = 0, offset = 0;  ///< categorical: row int(value + offset) of [num_classes, emb_dim]
  bool use_bias = true;             ///< continuous: its two Linear layers' biases
};

/// The hyperparameters that shape a MACE file, with mace_run_train's names.
struct MaceLayout {
  std::vector<int> atomic_numbers;  ///< the model's species, in order
  double r_max = 5.0;
  int num_bessel = 8;             ///< num_radial_basis
  int num_polynomial_cutoff = 5;  ///< num_cutoff_basis
  int max_ell = 3;
  int num_channels = 128;
  int max_L = 1;  ///< hidden irreps C x (0e + 1o + ... up to L)
  /// Per interaction; shorter than num_interactions: the last entry repeats.
  std::vector<int> correlation = {3};
  int num_interactions = 2;
  std::vector<int> radial_mlp = {64, 64, 64};
  int mlp_irreps = 16;  ///< hidden scalars per head of the last readout (MLP_irreps "16x0e")
  double avg_num_neighbors = 1.0;
  bool scale_shift = true;  ///< ScaleShiftMACE (else MACE)
  /// The interaction blocks' classes, mace_run_train's --interaction_first (the first block:
  /// RealAgnosticInteractionBlock, RealAgnosticResidualInteractionBlock, or their Density
  /// variants) and --interaction (every later block: RealAgnosticResidualInteractionBlock or
  /// RealAgnosticDensityResidualInteractionBlock). MACE-MP-0: the defaults; MACE-MPA-0 and
  /// OMAT-0: RealAgnosticDensityInteractionBlock, then RealAgnosticDensityResidualInteractionBlock.
  std::string interaction_first = "RealAgnosticInteractionBlock";
  std::string interaction = "RealAgnosticResidualInteractionBlock";
  /// mace_run_train's --radial_type: "bessel", "gaussian" or "chebyshev".
  std::string radial_type = "bessel";
  /// mace_run_train's --distance_transform: "None", "Agnesi" with AgnesiTransform's default
  /// a, q, p (the radial basis at the transformed distance; MPA-0, OMAT-0, MATPES), or "Soft"
  /// with SoftTransform's default alpha.
  std::string distance_transform = "None";
  bool zbl = false;  ///< mace-torch's ZBL pair repulsion (--pair_repulsion)
  /// mace_run_train's --use_last_readout_only (mace-torch >= 0.3.14): one readout, the
  /// non-linear one on the last layer, stored as readouts.0.
  bool last_readout_only = false;
  /// mace_run_train's --apply_cutoff (mace-torch >= 0.3.14): false puts the polynomial envelope
  /// on the radial MLP outputs and Density terms instead of the basis (MACE-OMOL).
  bool apply_cutoff = true;
  /// mace_run_train's --use_agnostic_product (mace-torch >= 0.3.14, MACE-MH-1): one set of
  /// product weights shared by every species.
  bool agnostic_product = false;
  /// The last readout as mace-torch's NonLinearBiasReadoutBlock (MACE-MH-1): a second gated
  /// layer, linear_mid with a bias, and a bias on linear_2.
  bool readout_bias = false;
  /// mace_run_train's --edge_irreps (mace-torch >= 0.3.14; MACE-MH-1, OMOL): the irreps each
  /// interaction's linear_up maps the node features to and its conv TP reads, e.g.
  /// "16x0e+16x1o"; empty: the node features' own irreps. The first interaction gets them only
  /// with edge_irreps_first (--use_edge_irreps_first), and then as their scalars alone (Nx0e).
  std::string edge_irreps;
  bool edge_irreps_first = false;
  /// mace_run_train's --embedding_specs (in its order) and --use_embedding_readout: the
  /// features' tables or MLPs, their projection (SiLU of a Linear without bias to the embedding's
  /// C scalars) added to every node's embedding, and a linear readout of that embedding.
  std::vector<MaceEmbeddingFeature> embedding_specs;
  bool embedding_readout = false;
  /// Head names; one head: {"Default"} (mace-torch's name), written with "default_head".
  std::vector<std::string> heads = {"Default"};
  /// radial_embedding.bessel_fn.prefactor = sqrt(2 / r_max), as mace-torch >= 0.3.10 stores it
  /// (false: a file of an older mace-torch, the loader computes it).
  bool bessel_prefactor = true;
};

/// The numbers of a file that are not drawn weights.
struct MaceLayoutValues {
  std::vector<double> atomic_energies;  ///< [heads][elements] E0s (eV)
  std::vector<double> scale, shift;     ///< [heads] ScaleShiftMACE's, when scale_shift
  nlohmann::json provenance = nlohmann::json::object();
};

/// The values of tensor `name` ([count], row-major in the file's shape); `scale` is the
/// standard deviation mace-torch draws it with (1, or 1/K for a contraction's weights).
using MaceWeightDraw = std::function<std::vector<double>(const std::string& name, std::int64_t count, double scale)>;

/// The potential file; throws InputError naming the field of a bad hyperparameter or value
/// count. The result passes PotentialFile::validate_metadata and load_mace_spec.
io::PotentialFile write_mace_layout(const MaceLayout& layout, const MaceLayoutValues& values,
                                    const MaceWeightDraw& draw);

/// ase.data.covalent_radii (Z = 0..118): mace-torch's ZBLBasis buffer.
const std::vector<double>& ase_covalent_radii();

}  // namespace fastmlip::models::mace

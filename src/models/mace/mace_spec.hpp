// SPDX-License-Identifier: MIT
#pragma once
/// \file The MACE loader: a potential file (docs/mace-potential.md) read into host-side tables
/// and weights, independent of the compute precision and the execution space. MaceModel builds
/// its kernels from this; tests use it to check what was read.
///
/// Everything here mirrors mace-torch 0.3.13 (modules/models.py MACE / ScaleShiftMACE,
/// modules/blocks.py): which blocks exist, their irreps, their weights in mace-torch's layouts
/// regrouped where a kernel wants another (the skip TP's per-element blocks), and the
/// constants that mace-torch keeps as Python attributes (avg_num_neighbors, normalize2mom
/// constants) taken from the hyperparameters.
#include <optional>
#include <string>
#include <vector>

#include "io/potential_file.hpp"
#include "kernels/channelwise_tp.hpp"
#include "kernels/distance_transform.hpp"
#include "kernels/linear.hpp"
#include "kernels/normed_mlp.hpp"
#include "kernels/radial_basis.hpp"
#include "kernels/radial_mlp.hpp"
#include "kernels/symmetric_contraction.hpp"
#include "math/irreps.hpp"
#include "models/mace/graph_embedding.hpp"

namespace fastmlip::models {
struct MaceOptions;
}

namespace fastmlip::models::mace {

/// MACE-MH-1 / OMOL's RealAgnosticResidualNonLinearInteractionBlock (mace-torch >= 0.3.14):
///
///   R_e   = RadialMLP([B_e, src[z_j], tgt[z_i]])             (LayerNorm MLP with biases)
///   d_i   = sum_{e->i} tanh(DensityMLP([B_e, src, tgt])^2)  (times f_p(r) with apply_cutoff False)
///   u_i   = linear_1(sum_{j->i} TP(h_j, Y, R_e)) / (alpha + beta d_i) + linear_res(h_i)
///   m_i   = linear_2(gate(u_i)),   sc_i = skip(x_i)          (skip: a plain Linear, no species)
///
/// src / tgt are e3nn Linears of the one-hot species: their products with the MLPs' first weight
/// columns are folded into per-species first-layer terms here.
struct NonLinearSpec {
  kernels::NormedMLP radial, density;  ///< first layers: the radial basis columns only
  /// [E][width_first] per MLP: the first layer's terms of the sender's (source) and the
  /// receiver's (target) species embeddings.
  std::vector<double> radial_source, radial_target, density_source, density_target;
  double alpha = 1, beta = 1;
  Irreps nonlin;                                    ///< the gate's input: scalars, gates, gated
  kernels::EquivariantLinear linear_res, linear_2;  ///< edge -> nonlin; target -> target
  std::vector<double> w_linear_res, w_linear_2;
  /// The gate, per output column k (target irreps): the input column it reads, and the column
  /// of its gate (-1: a scalar, silu(u) scalar_cst; else u sigmoid(u_gate) gate_cst).
  std::vector<int> gate_source, gate_gate;
  double scalar_cst = 1, gate_cst = 1;
};

/// One interaction block t (RealAgnosticInteractionBlock or RealAgnosticResidualInteractionBlock).
struct InteractionSpec {
  /// Residual blocks apply skip_tp to the block's input features (the self-connection added
  /// after the product); the non-residual block (MACE-MP's first layer) applies it to the
  /// message, before the product.
  bool residual = false;
  /// The Density variants (MPA-0, OMAT-0): the message is divided by 1 + the node's learned
  /// density, sum over its edges of tanh((B_e . w_density)^2), not by avg_num_neighbors.
  bool density = false;
  std::vector<double> w_density;  ///< [num_bessel]: density_fn's weights over sqrt(num_bessel)
  /// RealAgnosticResidualNonLinearInteractionBlock (residual): `linear` is its linear_1 (not
  /// divided by avg_num_neighbors), `mlp` is unused, `skip` has one weight set.
  std::optional<NonLinearSpec> nonlinear;
  Irreps node_feats, target, hidden;
  /// What linear_up maps the node features to and the conv TP reads: node_feats, or mace-torch's
  /// edge_irreps (MACE-MH-1, OMOL; the first layer's only with use_edge_irreps_first).
  Irreps edge;
  kernels::EquivariantLinear linear_up;  ///< node_feats -> edge
  std::vector<double> w_linear_up;
  kernels::ChannelwiseTP tp;             ///< edge (x) SH -> irreps_mid
  kernels::RadialMLP mlp;                ///< radial basis features -> tp.weight_numel (not nonlinear)
  kernels::EquivariantLinear linear;     ///< irreps_mid -> target
  std::vector<double> w_linear;          ///< already divided by avg_num_neighbors (not for density)
  kernels::EquivariantLinear skip;       ///< residual: node_feats -> hidden; else target -> target
  std::vector<double> w_skip;            ///< [skip.num_sets][skip.weight_numel] (regrouped by element)
  double avg_num_neighbors = 1;
};

/// One product block t (EquivariantProductBasisBlock).
struct ProductSpec {
  kernels::SymmetricContraction sc;                   ///< target -> hidden
  std::vector<std::vector<std::vector<double>>> W;    ///< W[o][nu-1]: [E, K_nu, C]
  kernels::EquivariantLinear linear;                  ///< hidden -> hidden
  std::vector<double> w_linear;
  bool use_sc = true;                                 ///< add the residual block's skip
  /// mace-torch's use_agnostic_product (MACE-MH-1): W holds one weight set (E = 1), used for
  /// every species.
  bool agnostic = false;
};

/// One readout t: LinearReadoutBlock, NonLinearReadoutBlock or NonLinearBiasReadoutBlock.
struct ReadoutSpec {
  /// mace-torch's use_last_readout_only: only the last layer has a readout, the others' features
  /// feed the next layer alone.
  bool present = true;
  /// Its tensors' prefix, "readouts.<k>.": k is its place in mace-torch's `readouts` list, which
  /// is the layer index except with use_last_readout_only (one readout, k = 0).
  std::string prefix;
  bool nonlinear = false;
  kernels::EquivariantLinear linear_1;  ///< linear: the readout itself; non-linear: to the MLP irreps
  std::vector<double> w_linear_1;
  kernels::EquivariantLinear linear_2;  ///< non-linear only: MLP irreps -> heads x 0e
  std::vector<double> w_linear_2;
  /// NonLinearBiasReadoutBlock (MACE-MH-1): a second gated layer, linear_mid (MLP irreps -> MLP
  /// irreps) plus b_mid, between the first gate and linear_2, and linear_2 adds b_2 (one value per
  /// head). e3nn adds its biases unscaled.
  bool bias = false;
  kernels::EquivariantLinear linear_mid;
  std::vector<double> w_linear_mid, b_mid, b_2;
  double gate_cst = 1;                  ///< e3nn normalize2mom constant of SiLU (1 if e3nn dropped it)
  int hidden_per_head = 0;              ///< non-linear: hidden units per head (mace-torch mask_head blocks)
};

/// mace-torch's ZBLBasis (pair_repulsion_fn), parameters from its buffers.
struct ZblSpec {
  double c[4] = {0, 0, 0, 0};
  /// Constants in mace-torch's source, not its state_dict; the converter records them in
  /// hyperparameters.zbl and they are taken from there when present.
  double screening[4] = {3.2, 0.9423, 0.4028, 0.2016};
  double bohr_radius = 0.529;
  double coulomb = 14.3996;  ///< eV A / e^2, as mace-torch rounds it
  double a_exp = 0, a_prefactor = 0;
  int p = 6;
  std::vector<double> covalent_radii;  ///< indexed by Z (ase.data.covalent_radii)
};

struct MaceSpec {
  std::string source;  ///< pot.display_name(), for messages
  std::vector<io::PotentialSpecies> species;
  int num_elements = 0;
  double r_max = 0;
  int max_ell = 0;
  int num_interactions = 0;
  std::vector<std::string> heads;
  int head = 0;  ///< the selected head's index

  bool scale_shift = false;  ///< ScaleShiftMACE
  double scale = 1, shift = 0;
  std::vector<double> e0;    ///< [E] atomic energies of the selected head (eV)

  Irreps embedding_irreps;         ///< C x 0e
  std::vector<double> w_embedding; ///< o3.Linear(E x 0e -> C x 0e) weights [E][C]
  double embedding_path_weight = 1;
  /// [C] mace-torch's joint_embedding of the structure's features (embedding_specs: total
  /// charge and spin, from MaceOptions), added to every node's embedding; zeros without. Its
  /// embedding_readout energy, a function of the species alone once the features are fixed, is
  /// folded into e0.
  std::vector<double> embedding_shift;
  std::vector<std::string> graph_features;  ///< the features embedded (total_charge, total_spin)
  /// The file's joint embedding (no features without one), read whether or not it is folded
  /// (MaceOptions::graph_embedding): the trainer evaluates it per structure.
  GraphEmbedding graph_embedding;
  /// mace-torch's embedding_readout (use_embedding_readout): an o3.Linear C x 0e -> heads x 0e of
  /// that embedding, whose selected head adds an energy to each node's e0. Read whenever the file
  /// has one; folded into e0 with the graph embedding, run per structure by the trainer.
  std::optional<kernels::EquivariantLinear> embedding_readout;
  std::vector<double> w_embedding_readout;  ///< [C][heads], as e3nn stores it

  kernels::RadialBasisParams radial_basis;  ///< mace-torch radial_embedding.bessel_fn (any radial_type)
  /// The radial basis's distance transform (none, or Agnesi: MPA-0, OMAT-0, MP-0b3).
  kernels::DistanceTransformParams distance_transform;
  std::vector<InteractionSpec> interactions;
  std::vector<ProductSpec> products;
  std::vector<ReadoutSpec> readouts;  ///< one per layer; `present` false where the layer has none
  bool last_readout_only = false;     ///< mace-torch's use_last_readout_only
  std::optional<ZblSpec> zbl;
};

/// Reads and checks everything; throws InputError naming the file and the tensor or key on
/// any inconsistency, UnsupportedError (listing what is supported) for a configuration this
/// build does not evaluate.
MaceSpec load_mace_spec(const io::PotentialFile& file, const MaceOptions& options);

}  // namespace fastmlip::models::mace

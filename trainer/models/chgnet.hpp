// SPDX-License-Identifier: MIT
#pragma once
/// \file The trainer's CHGNet (Deng et al., Nat. Mach. Intell. 2023; the chgnet package 0.3.x,
/// model/model.py and layers.py) as a LibTorch model: the core's block list of the model
/// (src/models/chgnet/chgnet_stages.hpp), the one ChgnetModel runs (chgnet_model.cpp's file
/// comment gives the equations), on a batch of graphs, with autograd in place of the hand-written reverse pass, so that forces
/// come from autograd with create_graph and a force loss back-propagates to every weight.
///
/// Notation as in chgnet_model.cpp: x^k atom features, b^k bond features (one row per directed
/// edge; both directions of a bond carry the same values, as the core does), g^k angle features
/// (one row per ordered pair of distinct short edges out of one atom), w = W_a B(r),
/// w' = W_w B'(r):
///
///   AtomConv  x^{k+1}_i = x^k_i + O^a_k sum_{e: c=i} GMLP([x_c, b_e, x_n]) * w_e
///   BondConv  H_s = sum_{(c; s, t)} GMLP([b_s, b_t, g, x^{k+1}_c]) * w'_s * w'_t
///             b^{k+1}_e = b^k_e + O^b_k (H_e + H_reverse(e))   (H = 0 for a long edge)
///   AngleUpd  g^{k+1} = g^k + GMLP([b^{k+1}_s, b^{k+1}_t, g^k, x^{k+1}_c])  (not after the last BondConv)
///   magmom_i = |site_wise(x^{n_conv-1}_i)|,  E_i = MLP(LN(x^{n_conv}_i)) + AtomRef[Z_i]
///
/// Which part runs on what (docs/train-potential.md, "Model layer: CHGNet"): the radial Bessel
/// and Fourier bases, every linear layer, the gated MLPs and the readout LayerNorm are the
/// core's kernels (the pair style's) as autograd functions (chgnet_ops.hpp); the gathers, sums
/// and angles between them are LibTorch ops, whose double backward autograd provides.
///
/// Parameters: the potential file's tensors under their names (chgnet's state_dict names),
/// except the AtomRef energies (composition_model.fc.weight), frozen as chgnet's Trainer
/// freezes them by default (train_composition_model=False), and the last AngleUpdate
/// (angle_layers.{n_conv-2}), whose output no later layer reads. save() writes those back as
/// they were read.
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/potential_file.hpp"
#include "models/chgnet/chgnet_layout.hpp"

namespace fastmlip::trainer {

/// Several CHGNet graphs concatenated. Edges are directed, grouped by graph and sorted by
/// centre within a graph (what make_chgnet_batch gives).
struct ChgnetBatch {
  torch::Tensor positions;  ///< [N, 3] Angstrom, float64
  torch::Tensor species;    ///< [N] int64 embedding index: atomic number - 1
  torch::Tensor batch;      ///< [N] int64 graph index
  torch::Tensor center;     ///< [E] int64
  torch::Tensor neighbor;   ///< [E] int64
  /// [E, 3] Cartesian image shift: the edge vector is r_neighbor - r_center + shift.
  torch::Tensor shifts;
  torch::Tensor short_edge;        ///< [S] int64 edges shorter than the bond-graph cutoff
  torch::Tensor short_reverse;     ///< [S] int64 short index of each short edge's reverse edge
  torch::Tensor angle_a, angle_b;  ///< [A] int64 short indices of an angle's two bonds
  torch::Tensor angle_center;      ///< [A] int64 node of the angle's vertex
  torch::Tensor cell;              ///< [G, 3, 3] rows a, b, c (zeros without a cell)
  std::int64_t num_graphs = 0;
};

/// One structure for make_chgnet_batch.
struct ChgnetStructure {
  std::vector<double> positions;  ///< [n][3] Angstrom
  std::vector<int> atomic_numbers;
  std::optional<std::array<double, 9>> cell;
  std::array<bool, 3> pbc{false, false, false};
};

/// The graphs of the core (models::make_structure_graph: every pair strictly within `cutoff`,
/// all periodic images; short edges strictly within `bond_cutoff`), concatenated in order.
/// Throws as graph::build_neighbor_list does.
ChgnetBatch make_chgnet_batch(const std::vector<ChgnetStructure>& structures, double cutoff,
                              double bond_cutoff);

struct ChgnetForwardOptions {
  bool forces = true;  ///< forces = -dE/dpositions (the force head with direct_heads)
  /// virials = -dE/d(strain) (the MACE layer's displacement trick; the stress head with direct_heads)
  bool virials = false;
  bool create_graph = false;  ///< keep forces and virials differentiable (training on them)
};

struct ChgnetOutput {
  torch::Tensor energy;       ///< [G] eV (chgnet reports energy / n_atoms)
  torch::Tensor site_energy;  ///< [N] eV, sums to energy
  torch::Tensor magmom;       ///< [N] mu_B
  torch::Tensor forces;       ///< [N, 3] eV/A, when asked for
  /// [G, 3, 3] eV, when asked for. stress = -virials / volume (positive under tension, chgnet's
  /// and ASE's sign); chgnet's GPa is that times 160.2177.
  torch::Tensor virials;
};

/// FastCHGNet's direct heads (Zhou et al., arXiv:2412.20796, sec. III-B "Multi-Head
/// Decomposition"; our reading of it, the paper's equations being only described in words):
///
///   force head   F_i = sum_{e: i -> j} MLP_F(b_e) u_e / |u_e|        (b_e the final bond features)
///   stress head  sigma_g = mean_{i in g} sum_{k,l} S_kl(x_i) n_k (x) n_l,  S = sym(MLP_S(x_i)) (6 values),
///                n_1, n_2, n_3 the unit normals b x c, c x a, a x b of the cell's faces
///
/// with x_i the final atom features; virials = -V sigma. The bond features are invariant and
/// the directions u_e / |u_e| and normals rotate with the structure, so F rotates as a vector and
/// sigma as a tensor; both directions of a bond carry the same b_e and opposite directions, so
/// the forces of a structure sum to zero. MLPs: Linear(F, hidden), SiLU, Linear(hidden, 1 or 6).
/// A graph without a cell (zero rows) gets zero stress.
struct ChgnetTorchOptions {
  bool direct_heads = false;
  int head_hidden = 64;
  /// Seeds the heads' initial weights (torch's Linear default: U(-1/sqrt(in), 1/sqrt(in)))
  /// when the file has none.
  std::uint64_t seed = 123;
  /// Where the parameters live and the forward runs (models/device.hpp); a batch is moved there.
  torch::Device device = torch::kCPU;
  /// The dense layers, LayerNorms and gated MLPs as LibTorch ops (linear, layer_norm, silu,
  /// sigmoid) instead of the core's dense kernels, whose arrays are host memory. Always so on a
  /// GPU; on the CPU it is the GPU's arithmetic where CI can test it.
  bool torch_dense_ops = false;
};

/// A fresh CHGNet's hyperparameters (models::ChgnetLayout, the core's writer of the file
/// layout) and the seed of its weights.
struct ChgnetConfig : models::ChgnetLayout {
  std::uint64_t seed = 123;
};

/// The potential file of a fresh CHGNet (docs/pair_fastmlip_chgnet.md, "The potential file"),
/// weights drawn as torch's nn.Linear / nn.Embedding defaults draw them, from torch's CPU
/// generator seeded with config.seed (docs/train-potential.md, "Model layer: CHGNet", says where
/// we differ from chgnet). Throws InputError naming the field of a bad hyperparameter.
io::PotentialFile make_chgnet_potential(const ChgnetConfig& config);

/// T: float or double, the precision of parameters and computation.
template <class T>
class ChgnetTorchModel {
 public:
  /// From a CHGNet potential file (model kind "chgnet"; chgnet 0.2.0/0.3.0 architecture, as
  /// the core's ChgnetModel accepts). Throws InputError / UnsupportedError as its loader does.
  ///
  /// With options.direct_heads the forces and virials come from the direct heads (see
  /// ChgnetTorchOptions), read from the file's force_head.* and stress_head.* tensors or, when
  /// it has none (fine-tuning a released model), drawn fresh; they are then parameters and
  /// saved with the rest. The core's ChgnetModel (the pair style) ignores them: it computes
  /// forces as -dE/dr.
  explicit ChgnetTorchModel(const io::PotentialFile& file, const ChgnetTorchOptions& options = {});
  ~ChgnetTorchModel();
  ChgnetTorchModel(ChgnetTorchModel&&) noexcept;
  ChgnetTorchModel& operator=(ChgnetTorchModel&&) noexcept;

  ChgnetOutput forward(const ChgnetBatch& batch, const ChgnetForwardOptions& options = {});

  /// The trainable tensors (requires_grad) with the file's names and shapes.
  const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters() const;
  std::vector<torch::Tensor> parameters() const;

  torch::Device device() const;  ///< where it runs (ChgnetTorchOptions::device)
  double cutoff() const;         ///< atom graph (A)
  double bond_cutoff() const;    ///< bond graph (A)
  int num_elements() const;    ///< embedding rows: atomic numbers 1..num_elements()

  /// The model as a potential file: the source's tensors and metadata with the current
  /// parameters (as F64) and `dtype` set to this model's precision.
  io::PotentialFile to_potential_file() const;
  /// to_potential_file written atomically (io::write_potential_file).
  void save(const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

extern template class ChgnetTorchModel<float>;
extern template class ChgnetTorchModel<double>;

}  // namespace fastmlip::trainer

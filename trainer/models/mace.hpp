// SPDX-License-Identifier: MIT
#pragma once
/// \file The trainer's MACE (Batatia et al., NeurIPS 2022; mace-torch 0.3.13's MACE and
/// ScaleShiftMACE) as a LibTorch model whose every kernel is a core kernel wrapped as an
/// autograd function (kernel_ops.hpp), so forces come from autograd with create_graph and the
/// force loss back-propagates to every weight (kernel_function.hpp: the double backward).
///
/// The computation is the plugin's MaceModel's: both run the core's stage list of the model
/// (src/models/mace/mace_stages.hpp; the paper's eqs. 8-11 and 13, docs/mace-potential.md "What
/// the model computes"), here on a batch of graphs:
///
///   x^0_i = W_emb[z_i] / sqrt(E);   Y_e = SH(u_e);   B_e = Bessel(|u_e|) f_p(|u_e| / r_max)
///   per layer t:   h = linear_up(x^t);   A_i = sum_{e: j->i} TP(h_j, Y_e, MLP_t(B_e))
///                  m = linear(A) / avg_num_neighbors          (non-residual: m = skip_tp(m, z))
///                  x^{t+1} = products.t.linear(SC_t(m; z)) [+ skip_tp(x^t, z), residual]
///                  e^t = readout_t(x^{t+1})[head]
///   E_i = E0[z_i] + scale (ZBL_i + sum_t e^t_i) + shift    (MACE: E0[z_i] + ZBL_i + sum_t e^t_i)
///
/// with u_e = r_receiver - r_sender + shift_e, mace-torch's edge vector. Gathers, scatter-sums
/// over graphs, residual adds, the readout gate, ZBL, E0 and scale/shift are LibTorch ops.
///
/// Parameters are the trainable tensors of mace-torch's state_dict, under its names; E0s,
/// scale/shift, the Bessel frequencies, the U matrices and ZBL's parameters are buffers, as in
/// mace-torch by default. A model is built from a potential file (fine-tuning) or fresh from
/// hyperparameters (MaceConfig), and saved back to a potential file that MaceModel loads.
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/potential_file.hpp"
#include "models/mace/mace_layout.hpp"

namespace fastmlip::trainer {

/// Several graphs concatenated, as the sampler produces them. Edges (sender -> receiver) must
/// be sorted by receiver (what make_mace_batch and the core's neighbour list give); nodes of
/// one graph may be anywhere, `batch` says which graph each belongs to.
struct MaceBatch {
  torch::Tensor positions;  ///< [N, 3] Angstrom, any floating dtype (converted to the model's)
  torch::Tensor species;    ///< [N] int64, the model's species index (0-based, file order)
  torch::Tensor batch;      ///< [N] int64 graph index, 0..num_graphs-1
  torch::Tensor sender;     ///< [E] int64
  torch::Tensor receiver;   ///< [E] int64, non-decreasing
  /// [E, 3] Cartesian shifts: the edge vector is r_receiver - r_sender + shift (mace-torch's
  /// convention; for a periodic image r_sender + S.cell the shift is -S.cell).
  torch::Tensor shifts;
  torch::Tensor cell;  ///< [num_graphs, 3, 3] rows a, b, c (zeros without a cell); for stress
  /// [num_graphs] float64: each structure's total charge and spin multiplicity, which a model
  /// with embedding_specs (MACE-OMOL) embeds.
  torch::Tensor total_charge, total_spin;
  std::int64_t num_graphs = 0;
};

/// One structure for make_mace_batch.
struct MaceStructure {
  std::vector<double> positions;  ///< [n][3] Angstrom
  std::vector<int> species;       ///< model species indices
  std::optional<std::array<double, 9>> cell;
  std::array<bool, 3> pbc{false, false, false};
  /// The structure's total charge (e) and spin multiplicity; mace-torch's defaults, 0 and 1,
  /// where the data has none (as mace-torch trains such a model).
  double total_charge = 0.0, total_spin = 1.0;
};

/// Graphs with the core's neighbour list (every pair strictly within `cutoff`, all periodic
/// images), concatenated in the given order. Throws as build_neighbor_list does.
MaceBatch make_mace_batch(const std::vector<MaceStructure>& structures, double cutoff);

struct MaceForwardOptions {
  bool forces = true;         ///< forces = -dE/dpositions
  bool virials = false;       ///< virials = -dE/d(strain), by mace-torch's displacement trick
  bool create_graph = false;  ///< keep forces and virials differentiable (training on them)
};

struct MaceOutput {
  torch::Tensor energy;       ///< [num_graphs] eV
  torch::Tensor node_energy;  ///< [N] eV: E0, readouts, ZBL halves, scale/shift (sums to energy)
  torch::Tensor forces;       ///< [N, 3] eV/A, when asked for
  torch::Tensor virials;      ///< [num_graphs, 3, 3] eV, when asked for; stress = -virials / volume
};

/// A fresh model's hyperparameters, with mace_run_train's names and defaults (its `--model MACE`
/// builds a ScaleShiftMACE whose first interaction is RealAgnosticInteractionBlock; residual
/// blocks follow; the last readout is non-linear, the others linear).
struct MaceConfig {
  /// The architecture, with mace_run_train's names (models/mace/mace_layout.hpp: the core's one
  /// writer of the file layout); one head, "Default".
  models::mace::MaceLayout layout;
  std::vector<double> e0s;  ///< E0 per species (eV), in layout.atomic_numbers' order
  double scale = 1.0, shift = 0.0;
  std::uint64_t seed = 123;
};

/// The potential file of a fresh model (docs/mace-potential.md), weights drawn as mace-torch
/// draws them (see docs/train-potential.md, "Model layer", for where we differ).
io::PotentialFile make_mace_potential(const MaceConfig& config);

/// How a MaceTorchModel is built beyond its file.
struct MaceTorchOptions {
  /// The head a multi-head model evaluates (MaceOptions::head's rules); every head's tensors are
  /// kept and saved.
  std::string head;
  /// Where the parameters live and the forward runs (models/device.hpp); a batch is moved there,
  /// and the outputs are there.
  torch::Device device = torch::kCPU;
  /// MACE-MH-1's LayerNorm MLPs as LibTorch ops (linear, layer_norm, silu) instead of the core's
  /// dense kernels, whose arrays are host memory. Always so on a GPU; on the CPU it is the GPU's
  /// arithmetic where CI can test it (ChgnetTorchOptions::torch_dense_ops likewise).
  bool torch_dense_ops = false;
};

/// T: float or double, the precision of parameters and computation.
template <class T>
class MaceTorchModel {
 public:
  /// From a potential file (fine-tuning). Throws what MaceModel's loader throws for a file it
  /// does not evaluate, and UnsupportedError where this build or process cannot run on
  /// options.device (device_problem()).
  MaceTorchModel(const io::PotentialFile& file, const MaceTorchOptions& options);
  /// The same, with the kernels' dense ops: MaceTorchOptions{head, device}.
  explicit MaceTorchModel(const io::PotentialFile& file, const std::string& head = "",
                          torch::Device device = torch::kCPU);
  ~MaceTorchModel();
  MaceTorchModel(MaceTorchModel&&) noexcept;
  MaceTorchModel& operator=(MaceTorchModel&&) noexcept;

  MaceOutput forward(const MaceBatch& batch, const MaceForwardOptions& options = {});

  /// The trainable tensors (requires_grad), mace-torch's names. skip_tp weights are held
  /// regrouped by element ([E, weight_numel per element], the kernel's layout) and the node
  /// embedding as [E, C]; the others with mace-torch's shapes.
  const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters() const;
  std::vector<torch::Tensor> parameters() const;

  torch::Device device() const;
  double cutoff() const;
  const std::vector<io::PotentialSpecies>& species() const;
  int species_index(int atomic_number) const;
  /// Why the model cannot embed a structure of this total charge (a charge outside a categorical
  /// table, or not an integer there), or "" when it can (and for a model without embeddings).
  std::string graph_feature_problem(double total_charge, double total_spin) const;

  /// The model as a potential file: the source file's tensors and metadata with the current
  /// parameters (as F64) and `dtype` set to this model's precision.
  io::PotentialFile to_potential_file() const;
  /// to_potential_file written atomically; the same parameters give the same bytes.
  void save(const std::string& path) const;

 private:
  template <class, class>
  friend struct MaceOn;
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

extern template class MaceTorchModel<float>;
extern template class MaceTorchModel<double>;

}  // namespace fastmlip::trainer

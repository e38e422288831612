// SPDX-License-Identifier: MIT
#pragma once
/// \file The writer of the CHGNet potential-file layout (docs/pair_fastmlip_chgnet.md, "The
/// potential file"), the twin of ChgnetModel's loader: chgnet's state_dict names and shapes and
/// the hyperparameters the loader reads, for the architecture the core evaluates (chgnet 0.3.0's,
/// or 0.2.0's without LayerNorms and with output biases).
///
/// The drawn weights come from the caller, one call of `draw` per tensor in chgnet's
/// construction order (CHGNet.__init__): the trainer draws a fresh model from torch's
/// generator. Everything else (AtomRef energies, basis frequencies, LayerNorms) is set here.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/potential_file.hpp"

namespace fastmlip::models {

/// A CHGNet file's hyperparameters: chgnet 0.3.0's architecture and values (the names of
/// chgnet's CHGNet constructor), with the fixed choices the core evaluates (SiLU, mlp_first,
/// bond and angle updates, learnable basis frequencies, intensive energy with an AtomRef).
struct ChgnetLayout {
  std::vector<int> atomic_numbers;  ///< elements with an AtomRef energy (the others get 0: refused)
  std::vector<double> e0s;          ///< AtomRef energy per element of atomic_numbers (eV/atom)
  int atom_fea_dim = 64;
  int bond_fea_dim = 64;
  int angle_fea_dim = 64;
  int num_radial = 31;
  int num_angular = 31;  ///< odd: 1 + 2 x the Fourier order
  int n_conv = 4;        ///< at least 2
  int atom_conv_hidden_dim = 64;
  int bond_conv_hidden_dim = 64;
  int angle_layer_hidden_dim = 0;  ///< 0: the gated MLP has no hidden layer (chgnet's 0.3.0)
  std::vector<int> mlp_hidden_dims = {64, 64, 64};
  bool mlp_out_bias = false;  ///< biases on the convolutions' output Linears (true in 0.2.0)
  bool layer_norm = true;     ///< gMLP_norm and readout_norm "layer" (false: none, as 0.2.0)
  int cutoff_coeff = 8;
  double atom_graph_cutoff = 6.0;  ///< Angstrom
  double bond_graph_cutoff = 3.0;  ///< Angstrom, at most atom_graph_cutoff
  int max_num_elements = 94;       ///< rows of the embedding and the AtomRef
};

/// How torch initialises a tensor: nn.Linear's U(-scale, scale) or nn.Embedding's N(0, scale^2).
struct ChgnetInit {
  enum Kind { uniform, normal } kind = uniform;
  double scale = 1;
};

/// The values of tensor `name` ([count], row-major in the file's shape), drawn as `init` says.
using ChgnetWeightDraw = std::function<std::vector<double>(const std::string& name, std::int64_t count, ChgnetInit init)>;

/// The potential file; throws InputError naming the field of a bad hyperparameter ("n_conv = 1
/// ..."). The result passes PotentialFile::validate_metadata and ChgnetModel's loader.
io::PotentialFile write_chgnet_layout(const ChgnetLayout& layout, const ChgnetWeightDraw& draw,
                                      const nlohmann::json& provenance);

}  // namespace fastmlip::models

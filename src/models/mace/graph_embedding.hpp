// SPDX-License-Identifier: MIT
#pragma once
/// \file mace-torch's joint embedding of a structure's total charge and spin (mace_run_train's
/// --embedding_specs, MACE-OMOL; mace-torch >= 0.3.14, GenericJointEmbedding). For the features
/// f in the file's order, with the structure's value v_f:
///
///   e_f = T_f[v_f + offset_f]                  categorical: a row of the table T_f [classes, w_f]
///   e_f = W2_f silu(W0_f v_f + b0_f) + b2_f     continuous: torch Linear(1, w_f), SiLU, Linear(w_f, w_f)
///   s   = silu(P [e_1, e_2, ...])              P [C, sum of w_f], a torch Linear without bias
///
/// s [C] is added to the embedding of every node of the structure. This is the block's one
/// definition: the loader runs compute_graph_embedding once for the pair style's charge and spin
/// and folds s into the node embedding (MaceSpec::embedding_shift); the trainer runs the same
/// compute and reverse stages per structure as a kernel, and their Dual<T> twins for the double
/// backward (trainer/models/mace.cpp).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/mace/mace_layout.hpp"

namespace fastmlip::models::mace {

struct GraphEmbedding {
  std::vector<MaceEmbeddingFeature> features;
  int channels = 0;  ///< C, the node embedding's width

  /// The file's `embeddings` hyperparameter (docs/mace-potential.md) for a C-channel embedding;
  /// an UnsupportedError naming `source` for what this block does not read.
  static GraphEmbedding read(const nlohmann::json& embeddings, int channels, const std::string& source);
  /// The `embeddings` hyperparameter that read() reads back (its `readout` flag is the caller's).
  nlohmann::json features_json() const;

  /// "" when the features are ones this block computes; else what is wrong, naming the feature.
  std::string problem() const;
  int width() const;  ///< the concatenation's width, sum of emb_dim

  /// A weight under mace-torch's name, its shape, and the fan-in of torch's default
  /// initialisation (0: an Embedding table, N(0, 1)).
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::int64_t fan_in = 0;
  };
  /// Every weight in mace-torch's construction order: the order of the `w` arguments below.
  /// None without features.
  std::vector<Tensor> tensors() const;

  /// "" when the structure's total charge and spin can be embedded; else why not (a categorical
  /// value that is not one of the table's integers, or a value that is not finite).
  std::string value_problem(double total_charge, double total_spin) const;
};

/// s [channels] of one structure. `w` holds tensors() in their order, each dense row-major.
/// An InputError when value_problem() is not empty.
template <class S>
void compute_graph_embedding(const GraphEmbedding& g, const std::vector<const S*>& w, double total_charge,
                             double total_spin, S* s);

/// The weights' gradients of sum(s * grad_s) for one structure, added to `grad_w` (same order and
/// shapes as `w`). The values are data: they get no gradient.
template <class S>
void reverse_graph_embedding(const GraphEmbedding& g, const std::vector<const S*>& w, double total_charge,
                             double total_spin, const S* grad_s, const std::vector<S*>& grad_w);

}  // namespace fastmlip::models::mace

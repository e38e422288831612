// SPDX-License-Identifier: MIT
#pragma once
/// \file Evaluating a MACE or CHGNet potential on labelled configurations: the metrics of
/// train/metrics.hpp from model predictions, used for the validation and test sets of a run and
/// by `train-potential eval` (docs/train-potential.md, "train-potential eval").
#include <mpi.h>

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/graph_set.hpp"
#include "models/mace.hpp"
#include "train/family.hpp"
#include "train/metrics.hpp"

namespace fastmlip::trainer::train {

/// A model's prediction for one configuration (double, whatever the model's precision).
struct ConfigPrediction {
  double energy = 0;                             ///< eV
  std::vector<double> forces;                    ///< natoms*3 eV/A
  std::optional<std::array<double, 9>> virials;  ///< eV, when computed
};

/// Adds the predictions of one forward pass over `configs` (in batch order) to `acc`: energy and
/// forces, stress and virials when `out.virials` is defined, magmoms ([N] mu_B, CHGNet) when
/// `magmoms` is. With `keep`, the predictions are appended there too.
void accumulate_batch(ErrorAccumulator& acc, const std::vector<const data::Config*>& configs,
                      const MaceOutput& out, std::vector<ConfigPrediction>* keep = nullptr,
                      const torch::Tensor& magmoms = {});

struct EvalOptions {
  std::int64_t batch_capacity = 3072;  ///< atoms per forward pass (a larger frame goes alone)
  bool virials = false;                ///< also predict virials (stress and virial metrics)
  bool keep_predictions = false;       ///< fill EvalResult::predictions (one rank only)
};

struct EvalResult {
  ErrorAccumulator metrics;
  std::vector<ConfigPrediction> predictions;  ///< per configuration, in order (keep_predictions)
};

/// Evaluates `model` (of family F, train/family.hpp: MaceFamily<T> or ChgnetFamily<T>) on
/// `configs`: consecutive batches of up to batch_capacity atoms, rank r of `comm` taking every
/// world-th batch and reading only its own frames, metrics summed over the ranks (collective).
template <class F>
EvalResult evaluate_model(typename F::Model& model, const data::GraphSet& configs, const EvalOptions& options,
                          MPI_Comm comm);

/// The text of `train-potential eval --help`.
std::string eval_help();

/// `train-potential eval ARGS...` (the arguments after "eval"): evaluates a potential file on a
/// dataset, prints the metrics table to `out`, and writes --output (JSON) and --write_predictions
/// (extxyz). Returns the exit status; throws fastmlip::Error for bad input (the caller prints it).
int run_eval_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace fastmlip::trainer::train

// SPDX-License-Identifier: MIT
#pragma once
/// \file Error metrics of a potential on labelled configurations (docs/train-potential.md,
/// "Metrics"): RMSE and MAE of the energy per atom, the force components, the stress components
/// and the virial components per atom, overall and per config_type, plus the mean batch loss.
///
/// The sums are plain doubles so that ranks add them with one MPI_Allreduce; RMSE = sqrt(sum of
/// squares / count), MAE = sum of |error| / count, NaN where nothing was counted. Units: eV/atom,
/// eV/A, eV/A^3, eV/atom. Predicted stress is -virials / volume (mace-torch's convention, ASE's
/// sign), so a model that computed virials gives both stress and virial errors.
#include <mpi.h>

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace fastmlip::trainer::train {

/// Sums of squared and absolute errors with their counts; `loss` sums batch losses.
struct ErrorSums {
  static constexpr int kQuantities = 5;  // energy/atom, forces, stress, virials/atom, magmoms
  std::array<double, kQuantities> sq{}, abs{}, n{};
  double configs = 0;  // configurations seen
  double loss = 0, n_loss = 0;

  void add(int quantity, double error);
  ErrorSums& operator+=(const ErrorSums& other);
};

/// RMSE and MAE of one set of sums (NaN where the count is 0).
struct Metrics {
  double rmse_e = 0, mae_e = 0;                  ///< energy per atom, eV/atom
  double rmse_f = 0, mae_f = 0;                  ///< force components, eV/A
  double rmse_s = 0, mae_s = 0;                  ///< stress components, eV/A^3
  double rmse_v = 0, mae_v = 0;                  ///< virial components per atom, eV/atom
  double rmse_m = 0, mae_m = 0;                  ///< magnetic moments, mu_B (CHGNet)
  double loss = 0;                               ///< mean batch loss
  long long configs = 0;                         ///< configurations seen
  long long n_e = 0, n_f = 0, n_s = 0, n_v = 0;  ///< energies / components counted
  long long n_m = 0;                             ///< magmoms counted
};

Metrics metrics_of(const ErrorSums& s);

/// A model's predictions for one configuration, borrowed views.
struct Prediction {
  double energy = 0;                ///< eV
  const double* forces = nullptr;   ///< natoms*3 eV/A, or nullptr when not predicted
  const double* virials = nullptr;  ///< row-major 3x3 eV, or nullptr when not predicted
  const double* magmoms = nullptr;  ///< natoms mu_B, or nullptr when not predicted
};

/// Error sums overall and per config_type. The config_types are fixed at construction (every
/// rank holds the same dataset, so every rank lists the same types in the same order and the
/// sums reduce element by element).
class ErrorAccumulator {
 public:
  explicit ErrorAccumulator(std::vector<std::string> config_types = {});

  /// Adds the errors of one configuration: energy per atom when it has an energy, forces when it
  /// has forces and `p.forces` is given, virials per atom and stress (-virials / volume, only
  /// when the configuration has a cell with a non-zero volume) when it has those labels and
  /// `p.virials` is given, magmoms when it has them and `p.magmoms` is given. Throws InputError
  /// when its config_type was not listed.
  void add(const data::Config& c, const Prediction& p);
  /// One batch's loss, counted overall as `share` of a batch (a bin of an accumulated step).
  void add_loss(double loss, double share = 1.0);
  /// Sums every rank's sums (collective over `comm`; nothing to do on one rank).
  void reduce(MPI_Comm comm);
  /// All sums as one vector (overall, then per type), and back: what ranks add and what a
  /// checkpoint within an epoch stores. set_flat throws InputError for a vector of another size.
  std::vector<double> flat() const;
  void set_flat(const std::vector<double>& values);

  const ErrorSums& overall() const { return m_overall; }
  const std::vector<std::string>& config_types() const { return m_types; }
  const ErrorSums& of_type(const std::string& type) const;

 private:
  std::vector<std::string> m_types;
  ErrorSums m_overall;
  std::vector<ErrorSums> m_by_type;
};

/// The distinct config_types of `configs`, sorted.
std::vector<std::string> config_types_of(const std::vector<data::Config>& configs);

/// {"overall": {...}, "per_config_type": {"TYPE": {...}}}, each {...} holding configs, loss,
/// rmse_e_per_atom, mae_e_per_atom, rmse_f, mae_f, rmse_stress, mae_stress, rmse_virials_per_atom,
/// mae_virials_per_atom and the counts (a metric without data is null), and rmse_magmom,
/// mae_magmom and n_magmoms only where magmoms were counted.
nlohmann::json metrics_json(const ErrorAccumulator& acc);

/// A table of the metrics, overall then one row per config_type, in meV units, for logs:
///   config_type   n   RMSE E/atom  MAE E/atom  RMSE F  MAE F  [RMSE S  MAE S]  [RMSE V/atom  ...]
std::string metrics_table(const ErrorAccumulator& acc);

}  // namespace fastmlip::trainer::train

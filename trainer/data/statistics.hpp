// SPDX-License-Identifier: MIT
#pragma once
/// \file Training-set statistics that fix a model's constants before training, computed as
/// mace-torch 0.3.13 computes them (mace/data/utils.py compute_average_E0s,
/// mace/tools/scripts_utils.py get_atomic_energies, mace/modules/utils.py
/// compute_avg_num_neighbors, compute_mean_std_atomic_inter_energy,
/// compute_mean_rms_energy_forces). Parity with those functions is tested to 1e-10 relative in
/// double (tests/reference/make_trainer_data_fixtures.py).
///
/// One difference by design: mace-torch computes the statistics over its training DataLoader,
/// which drops the last incomplete batch of a shuffled epoch (drop_last=True), so it leaves out
/// up to batch_size - 1 random configurations. Here every training configuration counts (the
/// same numbers when the training set is a multiple of the batch size).
///
/// Each statistic is computed from per-graph summaries (data/graph_summary.hpp), in graph order:
/// a preprocessed dataset's stored ones (no graph is read), or those of the configurations in
/// memory. Either way the same numbers are added in the same order, so a run from a file and one
/// from its dataset get the same bits. (Sums run by element, then by frame: the E0 sum of a frame
/// is sum over Z of count_Z * E0_Z, the squared forces are summed per frame and then over frames.)
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/graph_set.hpp"

namespace fastmlip::trainer::data {

/// Z -> isolated-atom energy (eV).
using E0Map = std::map<int, double>;

/// The atomic numbers present, ascending (mace-torch's z_table).
std::vector<int> elements_of(const GraphSet& configs);

/// E0s by linear least squares: rows are configurations, columns the elements (ascending Z),
/// entries the element counts, right-hand side the energies; the minimum-norm solution when the
/// counts do not determine every E0 (np.linalg.lstsq's, by SVD). Every configuration needs an
/// energy (InputError naming the frame otherwise).
E0Map fit_e0s(const GraphSet& train);

/// Resolves --E0s. `spec` is "average" (fit_e0s over train), a .json file {"Z": eV} (or element
/// symbols as keys), or a dict text "{29: -3.5, Ni: -4.2}"; no spec uses the training file's
/// IsolatedAtom energies. Every element of `all_configs` must have an E0: InputError naming the
/// element otherwise. (mace-torch prefers IsolatedAtom frames over --E0s when both exist; here
/// an explicit --E0s wins.)
E0Map resolve_e0s(const std::optional<std::string>& spec, const GraphSet& train,
                  const std::map<int, double>& isolated_atom_energies, const std::vector<int>& elements);

/// mace-torch's avg_num_neighbors: the mean, over atoms with at least one neighbour, of the
/// number of directed edges within r_max (the core's neighbour list; no self edge, periodic
/// images counted). Atoms with no neighbour do not count, as torch.unique drops them.
double avg_num_neighbors(const GraphSet& configs, double r_max);

/// Shift and scale of the interaction energy.
struct ScaleShift {
  double mean = 0.0;  ///< mean over configurations of (E - sum E0)/natoms (eV/atom)
  double std = 1.0;   ///< the scale of --scaling
};

/// mean and std of (E - sum E0)/natoms. std is scatter_std's: sqrt(sum (x - mean)^2 /
/// (max(n - 1, 1) + 1e-6)), the 1e-6 included; a zero std becomes 1 (_check_non_zero).
ScaleShift mean_std_atomic_inter_energy(const GraphSet& configs, const E0Map& e0s);

/// mean as above and the RMS of all force components (absent forces count as zeros, as
/// mace-torch's zero-filled tensors do); a zero RMS becomes 1.
ScaleShift mean_rms_energy_forces(const GraphSet& configs, const E0Map& e0s);

/// By --scaling: std_scaling, rms_forces_scaling, or no_scaling (mean 0 and std 1, what
/// mace-torch's ScaleShiftMACE ends up with: it sets std to 1 and computes no mean).
ScaleShift compute_scale_shift(const std::string& scaling, const GraphSet& configs, const E0Map& e0s);

}  // namespace fastmlip::trainer::data

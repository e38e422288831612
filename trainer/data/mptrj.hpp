// SPDX-License-Identifier: MIT
#pragma once
/// \file Labelled configurations from a JSON file in the layout of the Materials Project
/// trajectory dataset (MPtrj, chgnet's training set; what chgnet 0.3.1's StructureJsonData
/// reads):
///
///   { "mp-1234": { "mp-1234-0-0": { "structure": {pymatgen Structure.as_dict()},
///                                   "uncorrected_total_energy": -45.1, "corrected_total_energy": -46.3,
///                                   "force": [[fx, fy, fz], ...], "stress": [[...], [...], [...]],
///                                   "magmom": [m_1, ...] or null, ... }, ... }, ... }
///
/// The structure: `lattice.matrix` (rows a, b, c; A), `lattice.pbc` (default all periodic),
/// and per site `species[0].element` (an ordered site; a disordered one is an error) and
/// either `xyz` (Cartesian, A) or `abc` (fractional).
///
/// Labels and units, converted to the trainer's (data::Config, ASE's conventions):
/// - energy: `energy_key`, eV per structure, by default `corrected_total_energy` (the energy
///   with the Materials Project 2020 compatibility corrections, what chgnet's MPtrj
///   `energy_per_atom` holds and chgnet 0.3.0 was trained on); `uncorrected_total_energy` is
///   the raw DFT energy. A key ending in `_per_atom` is multiplied by the number of atoms.
/// - forces: `force`, eV/A.
/// - stress: `stress`, VASP's: kBar, positive under compression. chgnet trains on -0.1 x that
///   in GPa (positive under tension); the trainer's stress is eV/A^3 with the same sign, so
///   stress = -stress_kBar / 1602.1766208.
/// - magmoms: `magmom`, mu_B; their absolute values, as chgnet trains on them. null or absent:
///   the frame has no magmom label.
///
/// Frames keep the file's order (mp-id, then frame id). Errors name the file, the frame
/// number and id, and the key. chgnet's StructureData (chgnet.data.dataset) has no file format
/// of its own: it is built in Python from lists, so there is nothing else to read.
///
/// The file is read one frame at a time (the JSON parser hands over each frame object as it ends
/// and forgets it), so the full MPtrj (about 1.6 million frames, 11 GB of JSON) is never held
/// as JSON; read_mptrj keeps the configurations, scan_mptrj only those asked for.
#include <functional>
#include <istream>
#include <string>

#include "data/dataset.hpp"

namespace fastmlip::trainer::data {

struct MptrjReadOptions {
  std::string energy_key = "corrected_total_energy";
  std::string forces_key = "force";
  std::string stress_key = "stress";
  std::string magmom_key = "magmom";
  bool require_energy = true;
  bool require_forces = true;
  bool require_stress = false;
  bool require_magmoms = false;
  /// Skip and count frames lacking a required label instead of throwing.
  bool allow_missing = false;
};

/// Reads an MPtrj-style JSON file. Throws FileError (unreadable, malformed, a missing required
/// label), NumericalError (a NaN or infinite label).
Dataset read_mptrj(const std::string& path, const MptrjReadOptions& options);

/// read_mptrj frame by frame, as scan_dataset (data/dataset.hpp): `take(g, config)` for each kept
/// frame g with `wanted(g)` (the others' structures are not converted); `ds` gets the skip
/// counts and warning. Returns the number of kept frames.
std::size_t scan_mptrj(std::istream& in, const std::string& source, const MptrjReadOptions& options,
                       Dataset& ds, const std::function<bool(std::size_t)>& wanted,
                       const std::function<void(std::size_t, Config&&)>& take);

/// A labelled dataset file as train-potential takes one: a preprocessed dataset directory
/// (data/store.hpp, made by `train-potential preprocess` with the same options), MPtrj-style JSON
/// (the reader above, its own keys, VASP units converted) when the name ends in .json, else
/// extended XYZ (read_dataset). The label requirements and allow_missing of `options` apply to both; its
/// keys, config_type weights and isolated-atom handling to extended XYZ only.
Dataset read_labelled_file(const std::string& path, const ReadOptions& options);

/// read_labelled_file's extended XYZ or MPtrj JSON (not a preprocessed dataset) frame by frame,
/// as scan_dataset: `take(g, config)` for each kept configuration g with `wanted(g)`, the other
/// frames' atoms unparsed (extended XYZ) or structures unconverted (JSON); `ds` gets the skip
/// counts, warning and IsolatedAtom energies. Returns the number of kept configurations.
std::size_t scan_labelled_file(const std::string& path, const ReadOptions& options, Dataset& ds,
                               const std::function<bool(std::size_t)>& wanted,
                               const std::function<void(std::size_t, Config&&)>& take);
Dataset read_mptrj(std::istream& in, const std::string& source, const MptrjReadOptions& options);

/// kBar per eV/A^3: VASP's stress unit in the trainer's.
inline constexpr double kKbarPerEvPerA3 = 1602.1766208;

}  // namespace fastmlip::trainer::data

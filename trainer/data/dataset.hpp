// SPDX-License-Identifier: MIT
#pragma once
/// \file Labelled configurations read from extended XYZ, as mace-torch reads them
/// (mace/data/utils.py config_from_atoms, load_from_xyz) on top of ASE's extxyz conventions.
///
/// Labels and units (ASE's):
/// - energy: a comment-line (info) number, eV.
/// - forces: a per-atom R:3 column (Properties=...:REF_forces:R:3), eV/A.
/// - stress: an info value of 9 numbers (3x3, read row-major as mace-torch's voigt_to_matrix
///   does; ASE reads its own `stress`/`virial` keys column-major, the same for any symmetric
///   tensor) or 6 in Voigt order xx yy zz yz xz xy; eV/A^3, ASE's sign: sigma = (1/V) dE/d(strain),
///   positive under tension (the negative of the pressure tensor).
/// - virials: 9 or 6 numbers as for stress, eV, mace-torch's sign: virials = -dE/d(strain)
///   = -V * stress.
/// - Per-frame weights, as mace-torch reads them: `config_weight` (times the config_type_weights
///   entry of the frame's `config_type`, default "Default"), and `config_energy_weight`,
///   `config_forces_weight`, `config_stress_weight`, `config_virials_weight` (default 1; 0 when the
///   frame lacks that label).
/// - Periodicity from `pbc` (a Lattice without pbc is periodic, as in ASE).
///
/// Bad input: errors name the file, line and 1-based frame. A frame that lacks a required label
/// is an error naming the key, or with allow_missing is skipped and counted. NaN or infinite
/// labels are errors (forces name the atom).
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fastmlip::trainer {
class Options;
}

namespace fastmlip::trainer::data {

/// Where the labels are; mace-torch's --energy_key etc. and their defaults.
struct LabelKeys {
  std::string energy = "REF_energy";    ///< info key
  std::string forces = "REF_forces";    ///< per-atom column
  std::string stress = "REF_stress";    ///< info key
  std::string virials = "REF_virials";  ///< info key
};

/// How to read a labelled file.
struct ReadOptions {
  LabelKeys keys;
  bool require_energy = true;
  bool require_forces = true;
  /// A frame must carry stress or virials (either satisfies it).
  bool require_stress = false;
  /// Skip and count frames lacking a required label instead of throwing.
  bool allow_missing = false;
  /// config_type -> weight factor (mace-torch's --config_type_weights); absent types get 1.
  std::vector<std::pair<std::string, double>> config_type_weights{{"Default", 1.0}};
  /// Single-atom frames with config_type=IsolatedAtom give Dataset::isolated_atom_energies and
  /// are left out of configs unless keep_isolated_atoms (mace-torch does this for training files).
  bool extract_isolated_atoms = false;
  bool keep_isolated_atoms = false;
};

/// One labelled configuration.
struct Config {
  std::vector<int> atomic_numbers;
  std::vector<double> positions;  ///< natoms*3, A
  std::optional<std::array<double, 9>> cell;
  std::array<bool, 3> pbc{false, false, false};

  std::optional<double> energy;                  ///< eV
  std::vector<double> forces;                    ///< natoms*3 eV/A, empty when absent
  std::optional<std::array<double, 9>> stress;   ///< row-major 3x3, eV/A^3
  std::optional<std::array<double, 9>> virials;  ///< row-major 3x3, eV
  /// natoms magnetic moments (mu_B, |moment| as chgnet trains on them), empty when absent
  /// (the extxyz reader never sets them; mptrj.hpp does).
  std::vector<double> magmoms;
  /// The info keys total_charge (e) and total_spin (multiplicity), mace-torch's names: what a
  /// model with charge / spin embeddings reads (mace-torch's 0 and 1 where absent).
  std::optional<double> total_charge, total_spin;

  double weight = 1.0;  ///< config_weight * config_type_weights[config_type]
  double energy_weight = 1.0, forces_weight = 1.0, stress_weight = 1.0, virials_weight = 1.0;
  double magmom_weight = 1.0;  ///< the magmom loss factor; frames without magmoms add nothing
  std::string config_type = "Default";

  std::string source;  ///< file, for messages
  long line = 0;       ///< line of the frame's atom count
  long frame = 0;      ///< 1-based frame in the file
  std::string id;      ///< the frame's name in its file, when it has one (MPtrj's "mp-1234-0-1")

  std::size_t natoms() const noexcept { return atomic_numbers.size(); }
  /// "data.xyz:17 (frame 3)"; with an id (JSON: no line) "MPtrj.json (frame 3, mp-1234-0-1)"
  std::string where() const;
};

/// The frames of one file.
struct Dataset {
  std::vector<Config> configs;
  /// Frames skipped for a missing label (allow_missing), and per missing key how many.
  std::size_t skipped = 0;
  std::map<std::string, std::size_t> missing_by_key;
  /// Z -> energy of the IsolatedAtom frames (extract_isolated_atoms).
  std::map<int, double> isolated_atom_energies;
  /// "data.xyz: skipped 3 of 50 frames lacking a required label (REF_forces: 3)", or "".
  std::string skip_warning;
};

/// Sets ds.skip_warning from ds.skipped and ds.missing_by_key, `total` frames read (every reader).
void set_skip_warning(Dataset& ds, const std::string& source, std::size_t total);

/// Reads a labelled extxyz file. Throws FileError (malformed, missing label), NumericalError
/// (NaN/inf label); see the file comment.
Dataset read_dataset(const std::string& path, const ReadOptions& options);
Dataset read_dataset(std::istream& in, const std::string& source, const ReadOptions& options);

/// read_dataset frame by frame, keeping nothing: `take(g, config)` gets each kept configuration
/// g (0-based, in file order: the Dataset::configs index read_dataset would give it) for which
/// `wanted(g)` is true; the atom lines of the other kept frames are passed over unparsed, so a
/// frame's checks are made by the reader that wants it. `ds` gets the skip counts, the warning
/// and the IsolatedAtom energies (every reader sees all of these), and no configs. Returns the
/// number of kept configurations.
std::size_t scan_dataset(std::istream& in, const std::string& source, const ReadOptions& options, Dataset& ds,
                         const std::function<bool(std::size_t)>& wanted,
                         const std::function<void(std::size_t, Config&&)>& take);

/// ReadOptions from the trainer options: the four keys, allow_missing, config_type_weights,
/// keep_isolated_atoms; energy and forces are required when their loss weight is positive,
/// stress (or virials) when --loss is stress or virials.
ReadOptions read_options_from(const Options& options);

/// The seeded train/validation split used when no validation file is given. As mace-torch's
/// random_train_valid_split: the validation set has floor(valid_fraction * n) configurations,
/// the rest train, both taken from one seeded permutation (train first). The permutation is the
/// project's (splitmix64 Fisher-Yates, core/rng.hpp), not numpy's PCG64 shuffle, so the sizes
/// match mace-torch's for the same n and fraction but the chosen indices do not.
struct Split {
  std::vector<std::size_t> train, valid;
};
Split split_train_valid(std::size_t n, double valid_fraction, std::uint64_t seed);

}  // namespace fastmlip::trainer::data

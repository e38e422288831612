// SPDX-License-Identifier: MIT
#pragma once
/// \file The trainer's options: one table (name, type, default, allowed values, help), a YAML
/// config file, command-line flags that override it, and the --help text rendered from the
/// table.
///
/// Names, meanings and defaults follow mace-torch 0.3.13's `mace_run_train`
/// (mace/tools/arg_parser.py) wherever it has the option; options of our own (--model
/// mace|chgnet, --batch_capacity, --sampler, --allow_missing, --restart, ...) say so in their
/// help. Precedence: built-in default < YAML file (--config) < command line, whatever the order
/// of the flags. Every error (an unknown key, a bad value) is an InputError that names where the
/// key came from (file and line, or the command line), the key, the value and what is allowed.
///
/// Torch- and MPI-free, so the asan build and tools other than train-potential can use it.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "models/mace/mace_layout.hpp"

namespace fastmlip::trainer {

/// What an option's value is.
enum class OptionType {
  kString,   ///< free text
  kPath,     ///< a file or directory name
  kInt,      ///< 64-bit integer
  kFloat,    ///< finite double
  kBool,     ///< true/false (also yes/no, t/f, y/n, 1/0, case-insensitive, as mace's str2bool)
  kChoice,   ///< one of OptionSpec::choices, exactly as written there
  kIntList,  ///< "[64, 64, 64]", "64,64,64" or a YAML sequence
  kDict,     ///< "{key: number, ...}" (Python-literal style, keys bare or quoted) or a YAML map
  kE0s,      ///< "average", a .json file, or a kDict of element -> energy (eV)
  kMapping,  ///< a nested mapping: a YAML map, or its flow / JSON / Python-literal text; kept as flow text
};

/// Bounds of a numeric option (kInt, kFloat, every element of kIntList).
struct Range {
  std::optional<double> min, max;
  bool min_open = false;  ///< min itself is excluded
  bool max_open = false;  ///< max itself is excluded
  bool contains(double v) const noexcept;
  /// "> 0", ">= 1", "in (0, 1)", "" for no bounds.
  std::string describe() const;
};

/// One row of the table.
struct OptionSpec {
  std::string name;
  OptionType type = OptionType::kString;
  /// The default as it would be written on the command line; nullopt is "no value" (None).
  std::optional<std::string> default_text;
  std::vector<std::string> choices;  ///< kChoice only
  Range range;
  std::string group;  ///< section of --help
  std::string help;
  bool required = false;  ///< parse_command_line fails when it has no value (unless --help)
  bool nullable = false;  ///< "None"/"null" (or YAML null) clears it back to no value
  bool cli_only = false;  ///< --config: meaningless inside the file
};

/// Every option, grouped as --help shows them.
const std::vector<OptionSpec>& option_table();
/// The row of `name`, or nullptr.
const OptionSpec* find_option(const std::string& name);
/// The valid name closest to `name` (edit distance, ignoring case and '-' vs '_').
std::string closest_option(const std::string& name);

/// A value: none, text (kString/kPath/kChoice/kE0s), integer, float, bool, integer list, dict.
using OptionValue = std::variant<std::monostate, std::string, long long, double, bool, std::vector<long long>,
                                 std::vector<std::pair<std::string, double>>>;

/// Parses "{29: -3.5, 'Ni': -4.25, \"Default\": 1.0}" into (key, value) pairs in order; keys may
/// be bare or quoted, values are finite numbers; "{}" is empty. Throws InputError saying what is
/// wrong (the caller adds where the text came from).
std::vector<std::pair<std::string, double>> parse_flat_dict(const std::string& text);

/// mace_run_train's --embedding_specs, e.g. "{total_charge: {type: categorical, per: graph,
/// num_classes: 11, emb_dim: 16, offset: 5}, total_spin: {type: continuous, emb_dim: 8}}", in
/// its order. Throws InputError naming the feature and key that is wrong or unknown.
std::vector<models::mace::MaceEmbeddingFeature> parse_embedding_specs(const std::string& text);

/// The resolved options of one run.
class Options {
 public:
  /// Every option at its default.
  Options();

  /// Sets `name` from text as written on the command line or in a YAML scalar. `origin` is
  /// where it came from ("config.yaml:12", "command line"); it prefixes every error message.
  void set(const std::string& name, const std::string& text, const std::string& origin);
  /// Applies a YAML mapping of option -> value (file: the path for error messages).
  void load_yaml(const std::string& yaml_text, const std::string& file);
  void load_yaml_file(const std::string& path);
  /// Applies command-line flags (without the program name): --key value, --key=value, and a
  /// bare --key for a bool (true). --config and --help/-h are not accepted here.
  void apply_flags(const std::vector<std::string>& args);
  /// Throws InputError listing every required option that has no value.
  void check_required() const;

  /// True when the option has a value (not None).
  bool has(const std::string& name) const;
  std::string get_string(const std::string& name) const;  ///< kString, kPath, kChoice, kE0s
  long long get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  std::vector<long long> get_int_list(const std::string& name) const;
  std::vector<std::pair<std::string, double>> get_dict(const std::string& name) const;
  const OptionValue& value(const std::string& name) const;
  /// Where the value came from: "default", "FILE:LINE" or "command line".
  const std::string& origin(const std::string& name) const;

  /// All options as a YAML mapping in table order, with the origin of each as a comment; a
  /// run's log and checkpoint record it, and load_yaml reads it back to the same options.
  std::string to_yaml() const;

 private:
  const OptionSpec& spec(const std::string& name) const;  // throws InputError for a bad name
  void assign(const OptionSpec& s, OptionValue v, const std::string& origin);
  std::map<std::string, OptionValue> m_values;
  std::map<std::string, std::string> m_origins;
};

/// The command line of train-potential.
struct CommandLine {
  Options options;
  bool help = false;  ///< --help or -h was given: print render_help() and exit 0
};

/// Reads --config FILE (wherever it stands) first, then applies the other flags in order (the
/// last of a repeated flag wins, as in argparse), then checks required options unless --help.
CommandLine parse_command_line(const std::vector<std::string>& args);
CommandLine parse_command_line(int argc, const char* const* argv);

/// The complete --help text, rendered from option_table().
std::string render_help(const std::string& program = "train-potential");

}  // namespace fastmlip::trainer

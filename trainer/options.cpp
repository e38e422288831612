// SPDX-License-Identifier: MIT
#include "options.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "sampling/sampler.hpp"

namespace fastmlip::trainer {
namespace {

using T = OptionType;

Range positive() { return Range{0.0, std::nullopt, true, false}; }
Range at_least(double v) { return Range{v, std::nullopt, false, false}; }
Range open_unit() { return Range{0.0, 1.0, true, true}; }

OptionSpec opt(std::string group, std::string name, T type, std::optional<std::string> def, std::string help,
               Range range = {}, std::vector<std::string> choices = {}) {
  OptionSpec s;
  s.group = std::move(group);
  s.name = std::move(name);
  s.type = type;
  s.default_text = std::move(def);
  s.help = std::move(help);
  s.range = range;
  s.choices = std::move(choices);
  s.nullable = !s.default_text.has_value();
  return s;
}

std::vector<OptionSpec> build_table() {
  const std::string run = "Run", data = "Data", model = "Model", stats = "Normalisation", loss = "Loss",
                    optim = "Optimisation", batch = "Batching", ckpt = "Checkpoints and output";
  std::vector<OptionSpec> t;
  // Run.
  t.push_back(
      opt(run, "config", T::kPath, std::nullopt,
          "YAML file of option: value pairs. Flags on the command line override it, wherever they stand."));
  t.back().cli_only = true;
  t.push_back(opt(run, "name", T::kString, std::nullopt,
                  "Experiment name; output files are named after it. Required, as in mace-torch."));
  t.back().required = true;
  t.back().nullable = false;
  t.push_back(opt(run, "seed", T::kInt, "123",
                  "Random seed of the train/validation split, the initial weights and the batch plans.",
                  at_least(0)));
  t.push_back(opt(run, "model", T::kChoice, "mace",
                  "Model family (ours; mace-torch's --model names a MACE class instead).", {},
                  {"mace", "chgnet"}));
  t.push_back(opt(run, "default_dtype", T::kChoice, "float64",
                  "Floating-point type of the model and the training.", {}, {"float32", "float64"}));
  t.push_back(opt(run, "device", T::kChoice, "cpu", "Where the model runs.", {}, {"cpu", "cuda"}));
  t.push_back(
      opt(run, "log_level", T::kChoice, "INFO", "Log verbosity.", {}, {"DEBUG", "INFO", "WARNING", "ERROR"}));
  t.push_back(opt(run, "work_dir", T::kPath, ".", "Directory for all outputs not placed elsewhere."));
  t.push_back(
      opt(run, "log_dir", T::kPath, std::nullopt, "Directory of the log files (default: WORK_DIR/logs)."));
  t.push_back(opt(run, "model_dir", T::kPath, std::nullopt,
                  "Directory of the exported potentials (default: WORK_DIR)."));
  t.push_back(opt(run, "checkpoints_dir", T::kPath, std::nullopt,
                  "Directory of the checkpoints (default: WORK_DIR/checkpoints)."));
  t.push_back(opt(run, "results_dir", T::kPath, std::nullopt,
                  "Directory of the metrics and plots (default: WORK_DIR/results)."));

  // Data.
  t.push_back(
      opt(data, "train_file", T::kPath, std::nullopt, "Training set, extended XYZ (ASE conventions)."));
  t.back().required = true;
  t.back().nullable = false;
  t.push_back(
      opt(data, "valid_file", T::kPath, std::nullopt,
          "Validation set, extended XYZ. Without it, a seeded random VALID_FRACTION of the training set."));
  t.push_back(opt(data, "valid_fraction", T::kFloat, "0.1",
                  "Fraction of the training set held out for validation when no VALID_FILE is given.",
                  open_unit()));
  t.push_back(opt(data, "test_file", T::kPath, std::nullopt,
                  "Test set, extended XYZ; evaluated at the end, per config_type."));
  t.push_back(
      opt(data, "energy_key", T::kString, "REF_energy", "Comment-line (info) key of the energies (eV)."));
  t.push_back(
      opt(data, "forces_key", T::kString, "REF_forces", "Per-atom (Properties) key of the forces (eV/A)."));
  t.push_back(opt(data, "stress_key", T::kString, "REF_stress",
                  "Info key of the stresses (eV/A^3; 9 values or Voigt 6; ASE sign, tensile positive)."));
  t.push_back(opt(data, "virials_key", T::kString, "REF_virials",
                  "Info key of the virials (eV; 9 values or Voigt 6; virials = -volume * stress)."));
  t.push_back(
      opt(data, "allow_missing", T::kBool, "false",
          "Skip (and count) frames that lack a required label instead of stopping with an error (ours)."));
  t.push_back(opt(data, "config_type_weights", T::kDict, "{\"Default\": 1.0}",
                  "Loss weight per config_type, multiplied into each frame's config_weight."));
  t.push_back(opt(data, "keep_isolated_atoms", T::kBool, "false",
                  "Keep single-atom frames with config_type=IsolatedAtom in the training set (their energies "
                  "are the E0s either way)."));

  // Model.
  t.push_back(opt(model, "r_max", T::kFloat, "5.0", "Cutoff radius (A).", positive()));
  t.push_back(opt(model, "num_radial_basis", T::kInt, "8", "Number of radial (Bessel) basis functions.",
                  at_least(1)));
  t.push_back(opt(model, "num_cutoff_basis", T::kInt, "5", "Power p of the polynomial cutoff envelope.",
                  at_least(1)));
  t.push_back(opt(model, "max_ell", T::kInt, "3", "Highest l of the edge spherical harmonics.", at_least(0)));
  t.push_back(opt(model, "num_channels", T::kInt, "128",
                  "Channels of the hidden node features (mace-torch's effective default).", at_least(1)));
  t.push_back(opt(model, "max_L", T::kInt, "1",
                  "Highest L of the hidden node features (mace-torch's effective default).", at_least(0)));
  t.push_back(
      opt(model, "correlation", T::kInt, "3", "Correlation order of the product basis.", at_least(1)));
  t.push_back(opt(model, "num_interactions", T::kInt, "2", "Number of interaction layers.", at_least(1)));
  t.push_back(
      opt(model, "radial_MLP", T::kIntList, "[64, 64, 64]", "Hidden widths of the radial MLP.", at_least(1)));
  t.push_back(
      opt(model, "MLP_irreps", T::kString, "16x0e", "Hidden irreps of the last (non-linear) readout."));
  t.push_back(opt(model, "interaction_first", T::kChoice, "RealAgnosticInteractionBlock",
                  "Class of the first interaction block (MACE-MPA-0 and OMAT-0: "
                  "RealAgnosticDensityInteractionBlock; MACE-MH-1 and OMOL: "
                  "RealAgnosticResidualNonLinearInteractionBlock).",
                  {},
                  {"RealAgnosticInteractionBlock", "RealAgnosticResidualInteractionBlock",
                   "RealAgnosticDensityInteractionBlock", "RealAgnosticDensityResidualInteractionBlock",
                   "RealAgnosticResidualNonLinearInteractionBlock"}));
  t.push_back(opt(model, "interaction", T::kChoice, "RealAgnosticResidualInteractionBlock",
                  "Class of the later interaction blocks (MACE-MPA-0 and OMAT-0: "
                  "RealAgnosticDensityResidualInteractionBlock; MACE-MH-1 and OMOL: "
                  "RealAgnosticResidualNonLinearInteractionBlock).",
                  {},
                  {"RealAgnosticResidualInteractionBlock", "RealAgnosticDensityResidualInteractionBlock",
                   "RealAgnosticResidualNonLinearInteractionBlock"}));
  t.push_back(opt(model, "radial_type", T::kChoice, "bessel",
                  "Radial basis of the edge length (mace-torch's Bessel, Gaussian or Chebyshev).", {},
                  {"bessel", "gaussian", "chebyshev"}));
  t.push_back(opt(model, "distance_transform", T::kChoice, "None",
                  "Transform of the edge length before the radial basis (Agnesi: MPA-0, OMAT-0, MATPES; "
                  "or Soft).",
                  {}, {"None", "Agnesi", "Soft"}));
  t.push_back(opt(model, "pair_repulsion", T::kBool, "false", "Add mace-torch's ZBL pair repulsion."));
  t.push_back(opt(model, "use_last_readout_only", T::kBool, "false",
                  "One readout, the non-linear one on the last layer (mace-torch's use_last_readout_only)."));
  t.push_back(
      opt(model, "apply_cutoff", T::kBool, "true",
          "Polynomial envelope on the radial basis (true) or, as MACE-OMOL, on the radial MLP outputs "
          "and Density terms (false)."));
  t.push_back(opt(model, "use_agnostic_product", T::kBool, "false",
                  "One set of product weights for every species (mace-torch's use_agnostic_product, "
                  "MACE-MH-1)."));
  t.push_back(opt(model, "readout_bias", T::kBool, "false",
                  "The last readout as mace-torch's NonLinearBiasReadoutBlock (MACE-MH-1): a second gated "
                  "layer, and biases on its last two linear maps."));
  t.push_back(opt(model, "edge_irreps", T::kString, std::nullopt,
                  "Irreps the interactions' linear_up maps the node features to, and their convolution "
                  "reads (mace-torch's edge_irreps, e.g. 64x0e+64x1o; MACE-MH-1, OMOL). Unset: the node "
                  "features' own."));
  t.push_back(
      opt(model, "use_edge_irreps_first", T::kBool, "false",
          "Give the first interaction edge_irreps' scalars too (mace-torch's use_edge_irreps_first)."));
  t.push_back(
      opt(model, "embedding_specs", T::kMapping, std::nullopt,
          "Embed each structure's total_charge / total_spin (mace-torch's embedding_specs, MACE-OMOL), "
          "e.g. {total_charge: {type: categorical, per: graph, num_classes: 11, emb_dim: 16, offset: 5}, "
          "total_spin: {type: continuous, per: graph, emb_dim: 8}}; the frames' info keys of those "
          "names give the values."));
  t.push_back(opt(model, "use_embedding_readout", T::kBool, "false",
                  "Add a linear readout of the charge / spin embedding to each atom's energy (mace-torch's "
                  "use_embedding_readout)."));
  t.push_back(opt(model, "foundation_model", T::kPath, std::nullopt,
                  "Potential file to fine-tune from (e.g. potentials/chgnet-0.3.0.safetensors)."));
  t.push_back(opt(model, "direct_heads", T::kBool, "false",
                  "CHGNet only: FastCHGNet's direct force and stress heads instead of gradients (ours)."));

  // Normalisation.
  t.push_back(
      opt(stats, "E0s", T::kE0s, std::nullopt,
          "Isolated-atom energies: 'average' (least-squares fit over the training set), a .json file "
          "{Z: eV}, or a dict such as \"{29: -3.5, 28: -4.2}\" or \"{Cu: -3.5, Ni: -4.2}\". Without it, "
          "the training set's IsolatedAtom frames must cover every element."));
  t.push_back(
      opt(stats, "scaling", T::kChoice, "rms_forces_scaling",
          "Scale of the interaction energy: RMS of the force components, std of (E - E0s)/atom, or 1.", {},
          {"std_scaling", "rms_forces_scaling", "no_scaling"}));
  t.push_back(opt(stats, "mean", T::kFloat, std::nullopt,
                  "Shift: mean of (E - E0s)/atom. Computed from the training set when not given."));
  t.push_back(opt(stats, "std", T::kFloat, std::nullopt,
                  "Scale (see SCALING). Computed from the training set when not given.", positive()));
  t.push_back(opt(stats, "avg_num_neighbors", T::kFloat, "1",
                  "Normalisation of the message sum, used when COMPUTE_AVG_NUM_NEIGHBORS is false.",
                  positive()));
  t.push_back(opt(stats, "compute_avg_num_neighbors", T::kBool, "true",
                  "Compute avg_num_neighbors from the training set's graphs at R_MAX."));

  // Loss.
  t.push_back(opt(loss, "loss", T::kChoice, "weighted",
                  "weighted: energy per atom and forces; stress, virials: and stress or virials; huber: "
                  "Huber on all three (CHGNet).",
                  {}, {"weighted", "stress", "virials", "huber"}));
  t.push_back(opt(loss, "energy_weight", T::kFloat, "1.0", "Weight of the energy term.", at_least(0)));
  t.push_back(opt(loss, "forces_weight", T::kFloat, "100.0", "Weight of the forces term.", at_least(0)));
  t.push_back(opt(loss, "stress_weight", T::kFloat, "1.0", "Weight of the stress term.", at_least(0)));
  t.push_back(opt(loss, "virials_weight", T::kFloat, "1.0", "Weight of the virials term.", at_least(0)));
  t.push_back(opt(loss, "huber_delta", T::kFloat, "0.01", "Delta of the Huber loss.", positive()));
  t.push_back(opt(loss, "magmom_weight", T::kFloat, "0.1",
                  "CHGNet only: weight of the magnetic-moment term (chgnet's mag_loss_ratio).", at_least(0)));
  t.push_back(opt(loss, "compute_stress", T::kBool, "false",
                  "Predict stresses and virials for the metrics even when the loss does not use them (the "
                  "stress, virials and huber losses always predict them)."));

  // Optimisation.
  t.push_back(opt(optim, "optimizer", T::kChoice, "adam", "Optimiser.", {}, {"adam", "adamw"}));
  t.push_back(opt(optim, "amsgrad", T::kBool, "true", "Use the AMSGrad variant of Adam/AdamW."));
  t.push_back(opt(optim, "lr", T::kFloat, "0.01", "Learning rate.", positive()));
  t.push_back(opt(optim, "lr_reference_batch", T::kInt, std::nullopt,
                  "Global batch (atoms) at which LR applies unscaled: the initial learning rate is LR * "
                  "BATCH_CAPACITY * ranks / LR_REFERENCE_BATCH (FastCHGNet's linear scaling; ours). None: LR "
                  "as given.",
                  at_least(1)));
  t.push_back(opt(optim, "weight_decay", T::kFloat, "5e-07", "Weight decay (L2 penalty).", at_least(0)));
  t.push_back(opt(optim, "beta", T::kFloat, "0.9", "First-moment decay (beta1) of Adam/AdamW.", open_unit()));
  t.push_back(
      opt(optim, "clip_grad", T::kFloat, "10.0", "Gradient-norm clipping; None disables it.", positive()));
  t.back().nullable = true;
  t.push_back(
      opt(optim, "scheduler", T::kChoice, "ReduceLROnPlateau",
          "Learning-rate schedule: on a validation-loss plateau, or cosine annealing over MAX_NUM_EPOCHS.",
          {}, {"ReduceLROnPlateau", "CosineAnnealingLR"}));
  t.push_back(
      opt(optim, "lr_factor", T::kFloat, "0.8", "ReduceLROnPlateau: factor of each reduction.", open_unit()));
  t.push_back(opt(optim, "scheduler_patience", T::kInt, "50",
                  "ReduceLROnPlateau: epochs without improvement.", at_least(0)));
  t.push_back(opt(optim, "ema", T::kBool, "false", "Keep an exponential moving average of the weights."));
  t.push_back(opt(optim, "ema_decay", T::kFloat, "0.99", "Decay of the moving average.", open_unit()));
  t.push_back(opt(optim, "max_num_epochs", T::kInt, "2048", "Number of epochs.", at_least(1)));
  t.push_back(opt(optim, "patience", T::kInt, "2048",
                  "Stop after this many consecutive epochs without a better validation loss.", at_least(1)));
  t.push_back(opt(optim, "eval_interval", T::kInt, "1", "Validate every this many epochs.", at_least(1)));

  // Batching.
  t.push_back(opt(batch, "batch_capacity", T::kInt, "3072",
                  "Atoms per batch (per rank): the bin size of the sampler (ours; replaces --batch_size).",
                  at_least(1)));
  std::vector<std::string> packers = sampling::packer_names();
  t.push_back(opt(batch, "sampler", T::kChoice, "fastmlip",
                  "Batch planner (src/sampling): bin packing of graphs by atom count (ours).", {}, packers));
  t.push_back(opt(batch, "prefetch", T::kInt, "2",
                  "Batches whose graphs a background thread builds ahead of the step; 0 builds them in "
                  "the step (ours).",
                  at_least(0)));
  t.push_back(opt(batch, "accumulate_bins", T::kInt, "1",
                  "Bins per rank and optimiser step, their gradients accumulated: a global step is "
                  "ranks x this many bins, so -np 1 with 2 and -np 2 with 1 train on the same batches "
                  "(ours).",
                  at_least(1)));
  t.push_back(opt(batch, "overlap_allreduce", T::kBool, "true",
                  "Overlap the gradient all-reduce with backward (gradient hooks); false reduces after "
                  "backward (ours)."));
  t.push_back(opt(batch, "allreduce", T::kChoice, "auto",
                  "How the gradients are summed over ranks: nccl on the GPUs (one GPU per rank, a build "
                  "with NCCL), mpi through host memory, or auto: nccl where it can, else mpi (ours).",
                  {}, {"auto", "mpi", "nccl"}));

  // Checkpoints and output.
  t.push_back(opt(ckpt, "restart", T::kPath, std::nullopt,
                  "Checkpoint to continue from, exactly where it stopped (ours; see also RESTART_LATEST)."));
  t.push_back(opt(ckpt, "restart_latest", T::kBool, "false",
                  "Continue from the newest checkpoint in CHECKPOINTS_DIR."));
  t.push_back(opt(ckpt, "checkpoint_interval", T::kInt, "0",
                  "Also write a checkpoint every this many steps; 0 writes one per epoch only (ours).",
                  at_least(0)));
  t.push_back(
      opt(ckpt, "keep_checkpoints", T::kBool, "false", "Keep every checkpoint, not only the newest."));
  t.push_back(opt(ckpt, "plot", T::kBool, "true", "Write the learning curve as RESULTS_DIR/NAME_learning_curve.svg after each epoch."));
  return t;
}

std::string lower(std::string s) {
  for (char& c : s) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) {
    return "";
  }
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string format_number(double v, bool mark_float = true) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // The shortest text that reads back to the same double, so defaults print as written.
  for (int p = 1; p <= 17; ++p) {
    char shorter[40];
    std::snprintf(shorter, sizeof shorter, "%.*g", p, v);
    if (std::strtod(shorter, nullptr) == v) {
      std::string s = shorter;
      if (mark_float && s.find_first_of(".en") == std::string::npos) {
        s += ".0";
      }
      return s;
    }
  }
  return buf;
}

bool is_none_text(const std::string& s) {
  const std::string l = lower(s);
  return l == "none" || l == "null" || l == "~";
}

std::string type_name(const OptionSpec& s) {
  switch (s.type) {
    case T::kString:
      return "TEXT";
    case T::kPath:
      return "PATH";
    case T::kInt:
      return "INT";
    case T::kFloat:
      return "FLOAT";
    case T::kBool:
      return "BOOL";
    case T::kChoice:
      return "CHOICE";
    case T::kIntList:
      return "[INT, ...]";
    case T::kDict:
      return "{KEY: FLOAT, ...}";
    case T::kE0s:
      return "E0S";
    case T::kMapping:
      return "{...}";
  }
  return "VALUE";
}

/// What a value of this option may be, for error messages and --help.
std::string allowed(const OptionSpec& s) {
  std::string a;
  switch (s.type) {
    case T::kString:
    case T::kPath:
      a = "any text";
      break;
    case T::kInt:
      a = "an integer";
      break;
    case T::kFloat:
      a = "a finite number";
      break;
    case T::kBool:
      a = "true or false (yes/no, t/f, y/n, 1/0)";
      break;
    case T::kChoice: {
      a = "one of ";
      for (std::size_t i = 0; i < s.choices.size(); ++i) {
        a += (i ? ", " : "") + s.choices[i];
      }
      break;
    }
    case T::kIntList:
      a = "a list of integers such as [64, 64, 64]";
      break;
    case T::kDict:
      a = "a dict such as {\"Default\": 1.0}";
      break;
    case T::kE0s:
      a = "'average', a .json file, or a dict such as {29: -3.5, 28: -4.2}";
      break;
    case T::kMapping:
      a = "a mapping such as {total_charge: {type: categorical, num_classes: 11, emb_dim: 16, offset: 5}}";
      break;
  }
  const std::string r = s.range.describe();
  if (!r.empty()) {
    a += (s.type == T::kIntList ? ", each " : " ") + r;
  }
  if (s.nullable) {
    a += ", or None";
  }
  return a;
}

bool parse_int(const std::string& text, long long& v) {
  const std::string s = trim(text);
  if (s.empty()) {
    return false;
  }
  errno = 0;
  char* end = nullptr;
  v = std::strtoll(s.c_str(), &end, 10);
  return end == s.c_str() + s.size() && errno != ERANGE;
}

bool parse_float(const std::string& text, double& v) {
  const std::string s = trim(text);
  if (s.empty()) {
    return false;
  }
  errno = 0;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno != ERANGE && std::isfinite(v);
}

bool parse_bool(const std::string& text, bool& b) {
  const std::string l = lower(trim(text));
  if (l == "true" || l == "yes" || l == "t" || l == "y" || l == "1") {
    b = true;
    return true;
  }
  if (l == "false" || l == "no" || l == "f" || l == "n" || l == "0") {
    b = false;
    return true;
  }
  return false;
}

std::vector<long long> parse_int_list(const std::string& text) {
  std::string s = trim(text);
  if (!s.empty() && s.front() == '[') {
    if (s.back() != ']') {
      throw InputError("unbalanced brackets");
    }
    s = s.substr(1, s.size() - 2);
  }
  for (char& c : s) {
    if (c == ',') {
      c = ' ';
    }
  }
  std::istringstream in(s);
  std::vector<long long> out;
  std::string tok;
  while (in >> tok) {
    long long v;
    if (!parse_int(tok, v)) {
      throw InputError("'" + tok + "' is not an integer");
    }
    out.push_back(v);
  }
  if (out.empty()) {
    throw InputError("the list is empty");
  }
  return out;
}

/// Checks a numeric value against the row's range; returns "" when it is fine.
std::string range_problem(const OptionSpec& s, double v) {
  if (!s.range.contains(v)) {
    return "must be " + s.range.describe();
  }
  return "";
}

[[noreturn]] void bad_value(const OptionSpec& s, const std::string& text, const std::string& origin,
                            const std::string& why) {
  throw InputError(origin + ": option '" + s.name + "': value '" + text + "' " + why +
                   "; allowed: " + allowed(s));
}

/// Converts text to the row's type and checks it.
OptionValue convert(const OptionSpec& s, const std::string& text, const std::string& origin) {
  if (s.nullable && is_none_text(text)) {
    return std::monostate{};
  }
  switch (s.type) {
    case T::kString:
    case T::kPath:
      return text;
    case T::kInt: {
      long long v;
      if (!parse_int(text, v)) {
        bad_value(s, text, origin, "is not an integer");
      }
      if (auto p = range_problem(s, static_cast<double>(v)); !p.empty()) {
        bad_value(s, text, origin, p);
      }
      return v;
    }
    case T::kFloat: {
      double v;
      if (!parse_float(text, v)) {
        bad_value(s, text, origin, "is not a finite number");
      }
      if (auto p = range_problem(s, v); !p.empty()) {
        bad_value(s, text, origin, p);
      }
      return v;
    }
    case T::kBool: {
      bool b;
      if (!parse_bool(text, b)) {
        bad_value(s, text, origin, "is not a boolean");
      }
      return b;
    }
    case T::kChoice: {
      const std::string v = trim(text);
      if (std::find(s.choices.begin(), s.choices.end(), v) == s.choices.end()) {
        bad_value(s, text, origin, "is not an allowed choice");
      }
      return v;
    }
    case T::kIntList: {
      std::vector<long long> list;
      try {
        list = parse_int_list(text);
      } catch (const InputError& e) {
        bad_value(s, text, origin, std::string("is not a list of integers (") + e.what() + ")");
      }
      for (long long v : list) {
        if (auto p = range_problem(s, static_cast<double>(v)); !p.empty()) {
          bad_value(s, text, origin, "has an element that " + p);
        }
      }
      return list;
    }
    case T::kDict: {
      try {
        return parse_flat_dict(text);
      } catch (const InputError& e) {
        bad_value(s, text, origin, std::string("is not a dict (") + e.what() + ")");
      }
    }
    case T::kE0s: {
      const std::string v = trim(text);
      if (lower(v) == "average" || (v.size() > 5 && v.compare(v.size() - 5, 5, ".json") == 0)) {
        return v;
      }
      try {
        parse_flat_dict(v);
      } catch (const InputError& e) {
        bad_value(s, text, origin,
                  std::string("is neither 'average', a .json file nor a dict (") + e.what() + ")");
      }
      return v;
    }
    case T::kMapping: {
      YAML::Node node;
      try {
        node = YAML::Load(text);
      } catch (const YAML::Exception& e) {
        bad_value(s, text, origin, std::string("is not a mapping (") + e.msg + ")");
      }
      if (!node.IsMap()) {
        bad_value(s, text, origin, "is not a mapping");
      }
      YAML::Emitter em;
      em << YAML::Flow << node;
      return std::string(em.c_str());
    }
  }
  return text;
}

std::string value_text(const OptionValue& v) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(long long i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_number(d); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const std::vector<long long>& l) const {
      std::string s = "[";
      for (std::size_t i = 0; i < l.size(); ++i) {
        s += (i ? ", " : "") + std::to_string(l[i]);
      }
      return s + "]";
    }
    std::string operator()(const std::vector<std::pair<std::string, double>>& d) const {
      std::string s = "{";
      for (std::size_t i = 0; i < d.size(); ++i) {
        s += (i ? ", \"" : "\"") + d[i].first + "\": " + format_number(d[i].second);
      }
      return s + "}";
    }
  };
  return std::visit(Visitor{}, v);
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) {
    prev[j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string normalise_name(const std::string& s) {
  std::string n = lower(s);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

[[noreturn]] void unknown_option(const std::string& name, const std::string& origin) {
  std::string msg = origin + ": unknown option '" + name + "'";
  msg += " (did you mean '" + closest_option(name) + "'?). Valid options:";
  for (const auto& s : option_table()) {
    msg += " " + s.name;
  }
  throw InputError(msg);
}

void wrap(std::string& out, const std::string& text, std::size_t indent, std::size_t width) {
  std::istringstream in(text);
  std::string word, line(indent, ' ');
  bool empty = true;
  while (in >> word) {
    if (!empty && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.assign(indent, ' ');
      empty = true;
    }
    line += (empty ? "" : " ") + word;
    empty = false;
  }
  if (!empty) {
    out += line + "\n";
  }
}

}  // namespace

bool Range::contains(double v) const noexcept {
  if (min && (min_open ? !(v > *min) : !(v >= *min))) {
    return false;
  }
  if (max && (max_open ? !(v < *max) : !(v <= *max))) {
    return false;
  }
  return true;
}

std::string Range::describe() const {
  if (min && max) {
    return "in " + std::string(min_open ? "(" : "[") + format_number(*min, false) + ", " +
           format_number(*max, false) + (max_open ? ")" : "]");
  }
  if (min) {
    return (min_open ? "> " : ">= ") + format_number(*min, false);
  }
  if (max) {
    return (max_open ? "< " : "<= ") + format_number(*max, false);
  }
  return "";
}

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = build_table();
  return table;
}

const OptionSpec* find_option(const std::string& name) {
  for (const auto& s : option_table()) {
    if (s.name == name) {
      return &s;
    }
  }
  return nullptr;
}

std::string closest_option(const std::string& name) {
  // No option name is near 64 characters long, so a longer name is compared by its first 64:
  // the suggestion is the same for any name that could be a typo, and the cost stays bounded.
  const std::string n = normalise_name(name.substr(0, 64));
  std::string best;
  std::size_t best_d = static_cast<std::size_t>(-1);
  for (const auto& s : option_table()) {
    const std::size_t d = edit_distance(n, normalise_name(s.name));
    if (d < best_d) {
      best_d = d;
      best = s.name;
    }
  }
  return best;
}

std::vector<models::mace::MaceEmbeddingFeature> parse_embedding_specs(const std::string& text) {
  const std::string fn = "embedding_specs: ";
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(fn + "not a mapping (" + e.msg + ")");
  }
  if (!root.IsMap() || root.size() == 0) {
    throw InputError(fn + "expected a mapping of feature name -> its spec");
  }
  std::vector<models::mace::MaceEmbeddingFeature> out;
  for (const auto& kv : root) {
    models::mace::MaceEmbeddingFeature f;
    f.name = kv.first.as<std::string>();
    const YAML::Node& spec = kv.second;
    if (!spec.IsMap()) {
      throw InputError(fn + f.name + ": expected a mapping (type, emb_dim, ...)");
    }
    const auto text_of = [&](const char* key) -> std::string {
      const YAML::Node n = spec[key];
      if (!n || !n.IsScalar()) {
        throw InputError(fn + f.name + ": '" + key + "' is missing or not a value");
      }
      return n.Scalar();
    };
    const auto int_of = [&](const char* key) {
      long long v = 0;
      if (!parse_int(text_of(key), v) || v < -1000000 || v > 1000000) {
        throw InputError(fn + f.name + ": '" + key + "' must be an integer");
      }
      return static_cast<int>(v);
    };
    for (const auto& e : spec) {
      const std::string k = e.first.as<std::string>();
      static const std::vector<std::string> known = {"type",   "per",    "emb_dim", "num_classes",
                                                     "offset", "in_dim", "use_bias"};
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        throw InputError(fn + f.name + ": unknown key '" + k +
                         "' (known: type, per, emb_dim, num_classes, offset, in_dim, use_bias)");
      }
    }
    f.type = text_of("type");
    f.emb_dim = int_of("emb_dim");
    if (spec["per"] && text_of("per") != "graph") {
      throw InputError(fn + f.name + ": per '" + text_of("per") +
                       "' is not supported; supported: graph (one value per structure)");
    }
    if (f.type == "categorical") {
      f.num_classes = int_of("num_classes");
      f.offset = spec["offset"] ? int_of("offset") : 0;
    } else if (spec["in_dim"] && int_of("in_dim") != 1) {
      throw InputError(fn + f.name + ": in_dim must be 1 (one value per structure)");
    }
    if (spec["use_bias"]) {
      bool b = true;
      if (!parse_bool(text_of("use_bias"), b)) {
        throw InputError(fn + f.name + ": 'use_bias' must be true or false");
      }
      f.use_bias = b;
    }
    out.push_back(f);
  }
  return out;
}

std::vector<std::pair<std::string, double>> parse_flat_dict(const std::string& text) {
  const std::string s = trim(text);
  if (s.size() < 2 || s.front() != '{' || s.back() != '}') {
    throw InputError("expected {key: number, ...}");
  }
  std::vector<std::pair<std::string, double>> out;
  std::size_t i = 1;
  const std::size_t n = s.size() - 1;  // index of the closing brace
  auto skip_ws = [&] {
    while (i < n && std::isspace(static_cast<unsigned char>(s[i]))) {
      ++i;
    }
  };
  skip_ws();
  while (i < n) {
    std::string key;
    if (s[i] == '"' || s[i] == '\'') {
      const char q = s[i++];
      while (i < n && s[i] != q) {
        key += s[i++];
      }
      if (i >= n) {
        throw InputError("unterminated quote in a key");
      }
      ++i;
    } else {
      while (i < n && s[i] != ':' && !std::isspace(static_cast<unsigned char>(s[i]))) {
        key += s[i++];
      }
    }
    skip_ws();
    if (key.empty() || i >= n || s[i] != ':') {
      throw InputError("expected 'key: number' at '" + s.substr(i) + "'");
    }
    // Keys are config_type names and element symbols. A quote, backslash or control character
    // could not be written back (to_yaml quotes keys as they are), so it is refused here.
    for (const char c : key) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\' || c == '\'' || u < 0x20 || u == 0x7f) {
        std::string shown;
        for (const char d : key) {
          const auto w = static_cast<unsigned char>(d);
          shown += (w < 0x20 || w == 0x7f) ? '?' : d;
        }
        throw InputError("key '" + shown +
                         "' has a quote, backslash or control character (shown as ?): keys are config_type names or "
                         "element symbols, plain text");
      }
    }
    ++i;
    skip_ws();
    std::string num;
    while (i < n && s[i] != ',') {
      num += s[i++];
    }
    double v;
    if (!parse_float(num, v)) {
      throw InputError("value '" + trim(num) + "' of key '" + key + "' is not a finite number");
    }
    for (const auto& [k, unused] : out) {
      if (k == key) {
        throw InputError("key '" + key + "' appears twice");
      }
    }
    out.emplace_back(key, v);
    if (i < n) {
      ++i;  // the comma
    }
    skip_ws();
  }
  return out;
}

Options::Options() {
  for (const auto& s : option_table()) {
    m_values[s.name] = s.default_text ? convert(s, *s.default_text, "default of " + s.name) : OptionValue{};
    m_origins[s.name] = "default";
  }
}

const OptionSpec& Options::spec(const std::string& name) const {
  const OptionSpec* s = find_option(name);
  if (s == nullptr) {
    unknown_option(name, "Options");
  }
  return *s;
}

void Options::assign(const OptionSpec& s, OptionValue v, const std::string& origin) {
  m_values[s.name] = std::move(v);
  m_origins[s.name] = origin;
}

void Options::set(const std::string& name, const std::string& text, const std::string& origin) {
  const OptionSpec* s = find_option(name);
  if (s == nullptr) {
    unknown_option(name, origin);
  }
  assign(*s, convert(*s, text, origin), origin);
}

void Options::load_yaml(const std::string& yaml_text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw FileError(file, e.mark.line + 1, "not valid YAML: " + e.msg);
  }
  if (root.IsNull()) {
    return;  // an empty file sets nothing
  }
  if (!root.IsMap()) {
    throw FileError(file, root.Mark().line + 1, "expected a mapping of option: value pairs");
  }
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) {
      // A "? {a: b}: v" or "[a]: v" key: as<std::string>() would throw yaml-cpp's own exception.
      throw FileError(file, kv.first.Mark().line + 1,
                      "an option name must be plain text, not a YAML list or mapping (write option: value)");
    }
    const std::string key = kv.first.as<std::string>();
    const std::string origin = file + ":" + std::to_string(kv.first.Mark().line + 1);
    const OptionSpec* s = find_option(key);
    if (s == nullptr) {
      unknown_option(key, origin);
    }
    if (s->cli_only) {
      throw InputError(origin + ": option '" + key + "' is only accepted on the command line");
    }
    const YAML::Node& v = kv.second;
    if (v.IsNull()) {
      if (!s->nullable) {
        bad_value(*s, "null", origin, "is empty");
      }
      assign(*s, std::monostate{}, origin);
    } else if (v.IsScalar()) {
      set(key, v.Scalar(), origin);
    } else if (v.IsSequence() && s->type == T::kIntList) {
      std::string text = "[";
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].IsScalar()) {
          bad_value(*s, "(nested)", origin, "has an element that is not a number");
        }
        text += (i ? ", " : "") + v[i].Scalar();
      }
      set(key, text + "]", origin);
    } else if (v.IsMap() && s->type == T::kMapping) {
      YAML::Emitter em;
      em << YAML::Flow << v;
      set(key, em.c_str(), origin);
    } else if (v.IsMap() && (s->type == T::kDict || s->type == T::kE0s)) {
      // Rebuilt as quoted text so that the one dict parser checks it.
      std::string text = "{";
      bool first = true;
      for (const auto& e : v) {
        if (!e.first.IsScalar() || !e.second.IsScalar()) {
          bad_value(*s, "(nested)", origin, "is not a flat mapping of key: number");
        }
        text += (first ? "\"" : ", \"") + e.first.Scalar() + "\": " + e.second.Scalar();
        first = false;
      }
      set(key, text + "}", origin);
    } else {
      YAML::Emitter em;
      em << YAML::Flow << v;
      bad_value(*s, em.c_str(), origin, v.IsSequence() ? "is a list" : "is a mapping");
    }
  }
}

void Options::load_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw FileError(path, 0, "cannot open the config file");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  load_yaml(ss.str(), path);
}

void Options::apply_flags(const std::vector<std::string>& args) {
  const std::string origin = "command line";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      throw InputError(origin + ": unexpected argument '" + a +
                       "' (options are written --key value or --key=value)");
    }
    std::string key = a.substr(2), text;
    bool has_text = false;
    if (const auto eq = key.find('='); eq != std::string::npos) {
      text = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_text = true;
    }
    const OptionSpec* s = find_option(key);
    if (s == nullptr) {
      unknown_option(key, origin + " (--" + key + ")");
    }
    if (s->cli_only || key == "help") {
      throw InputError(origin + ": --" + key + " is handled by parse_command_line");
    }
    if (!has_text) {
      const bool next_is_value = i + 1 < args.size() && args[i + 1].compare(0, 2, "--") != 0;
      if (s->type == T::kBool && !next_is_value) {
        text = "true";  // a bare --ema, as mace-torch's store_true flags
      } else if (!next_is_value) {
        throw InputError(origin + ": option --" + key + " needs a value; allowed: " + allowed(*s));
      } else {
        text = args[++i];
      }
    }
    set(key, text, origin);
  }
}

void Options::check_required() const {
  std::string missing;
  for (const auto& s : option_table()) {
    if (s.required && !has(s.name)) {
      missing += (missing.empty() ? "--" : ", --") + s.name;
    }
  }
  if (!missing.empty()) {
    throw InputError("train-potential: required option(s) not given: " + missing +
                     " (on the command line or in the --config file)");
  }
}

bool Options::has(const std::string& name) const {
  return !std::holds_alternative<std::monostate>(value(name));
}

const OptionValue& Options::value(const std::string& name) const {
  spec(name);
  return m_values.at(name);
}

const std::string& Options::origin(const std::string& name) const {
  spec(name);
  return m_origins.at(name);
}

namespace {
template <class V>
const V& typed(const OptionValue& v, const OptionSpec& s, const char* want) {
  if (const V* p = std::get_if<V>(&v)) {
    return *p;
  }
  if (std::holds_alternative<std::monostate>(v)) {
    throw InputError("option '" + s.name + "' has no value (None); give it with --" + s.name);
  }
  throw InputError("Options: option '" + s.name + "' is not " + want + " (it is " + type_name(s) + ")");
}
}  // namespace

std::string Options::get_string(const std::string& name) const {
  return typed<std::string>(value(name), spec(name), "text");
}
long long Options::get_int(const std::string& name) const {
  return typed<long long>(value(name), spec(name), "an integer");
}
double Options::get_float(const std::string& name) const {
  return typed<double>(value(name), spec(name), "a float");
}
bool Options::get_bool(const std::string& name) const {
  return typed<bool>(value(name), spec(name), "a bool");
}
std::vector<long long> Options::get_int_list(const std::string& name) const {
  return typed<std::vector<long long>>(value(name), spec(name), "a list");
}
std::vector<std::pair<std::string, double>> Options::get_dict(const std::string& name) const {
  return typed<std::vector<std::pair<std::string, double>>>(value(name), spec(name), "a dict");
}

std::string Options::to_yaml() const {
  std::string out = "# train-potential options (origin of each value in the comment)\n";
  for (const auto& s : option_table()) {
    if (s.cli_only) {
      continue;
    }
    const OptionValue& v = m_values.at(s.name);
    std::string text = std::holds_alternative<std::monostate>(v) ? "null" : value_text(v);
    if (std::holds_alternative<std::string>(v)) {
      // Quoted, so that YAML keeps "1e3" or "{...}" text as text; line breaks and other control
      // characters escaped, since YAML folds a raw line break in a quoted scalar into a space.
      std::string q = "\"";
      for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
          q += '\\';
          q += c;
        } else if (c == '\n') {
          q += "\\n";
        } else if (c == '\r') {
          q += "\\r";
        } else if (c == '\t') {
          q += "\\t";
        } else if (u < 0x20 || u == 0x7f) {
          static const char kHex[] = "0123456789abcdef";
          q += "\\x";
          q += kHex[u >> 4];
          q += kHex[u & 15];
        } else {
          q += c;
        }
      }
      text = q + "\"";
    }
    out += s.name + ": " + text + "  # " + m_origins.at(s.name) + "\n";
  }
  return out;
}

CommandLine parse_command_line(const std::vector<std::string>& args) {
  CommandLine cl;
  std::vector<std::string> rest;
  std::optional<std::string> config;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      cl.help = true;
    } else if (a == "--config") {
      if (i + 1 >= args.size()) {
        throw InputError("command line: option --config needs a file name");
      }
      config = args[++i];
    } else if (a.compare(0, 9, "--config=") == 0) {
      config = a.substr(9);
    } else {
      rest.push_back(a);
    }
  }
  if (cl.help) {
    return cl;  // --help prints the table whatever else is wrong
  }
  if (config) {
    cl.options.load_yaml_file(*config);
  }
  cl.options.apply_flags(rest);
  cl.options.check_required();
  return cl;
}

CommandLine parse_command_line(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    args.emplace_back(argv[i]);
  }
  return parse_command_line(args);
}

std::string render_help(const std::string& program) {
  std::string out = "Usage: " + program + " [--config FILE] [--KEY VALUE | --KEY=VALUE]...\n\n";
  wrap(
      out,
      "Trains a MACE or CHGNet potential on labelled extended-XYZ data. Options come from the built-in "
      "defaults, then the YAML file given with --config (KEY: VALUE lines), then the command line; the later "
      "wins. Names follow mace-torch's mace_run_train where the meaning is the same. A bool flag alone "
      "(--ema) "
      "means true. None clears an option that has no default.",
      0, 100);
  std::string group;
  for (const auto& s : option_table()) {
    if (s.group != group) {
      group = s.group;
      out += "\n" + group + ":\n";
    }
    out += "  --" + s.name + " " + type_name(s) + "\n";
    wrap(out, s.help, 6, 100);
    std::string facts;
    if (s.required) {
      facts = "Required.";
    } else {
      facts =
          "Default: " + (s.default_text ? value_text(convert(s, *s.default_text, "")) : std::string("None")) +
          ".";
    }
    if (s.type != T::kString && s.type != T::kPath) {
      facts += " Allowed: " + allowed(s) + ".";
    }
    wrap(out, facts, 6, 100);
  }
  out += "\n  --help, -h\n";
  wrap(out, "Print this text and exit.", 6, 100);
  return out;
}

}  // namespace fastmlip::trainer

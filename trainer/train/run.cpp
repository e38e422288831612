// SPDX-License-Identifier: MIT
#include "train/run.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/out_of_memory.hpp"
#include "data/dataset.hpp"
#include "data/graph_set.hpp"
#include "data/mptrj.hpp"
#include "data/statistics.hpp"
#include "distributed.hpp"
#include "io/atomic_file.hpp"
#include "io/potential_file.hpp"
#include "models/chgnet.hpp"
#include "models/device.hpp"
#include "models/mace.hpp"
#include "nccl.hpp"
#include "sampling/sampler.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "train/family.hpp"
#include "train/learning_curve.hpp"
#include "train/loss.hpp"
#include "train/metrics.hpp"
#include "train/optim.hpp"
#include "train/prefetch.hpp"
#include "train/progress.hpp"

namespace fastmlip::trainer::train {
namespace {

namespace fs = std::filesystem;

/// Model options that a --foundation_model file fixes; setting one as well is an error, not a
/// silently ignored value.
const std::vector<std::string> kModelOptions = {"r_max",
                                                "num_radial_basis",
                                                "num_cutoff_basis",
                                                "max_ell",
                                                "num_channels",
                                                "max_L",
                                                "correlation",
                                                "num_interactions",
                                                "radial_MLP",
                                                "MLP_irreps",
                                                "E0s",
                                                "scaling",
                                                "mean",
                                                "std",
                                                "avg_num_neighbors",
                                                "compute_avg_num_neighbors",
                                                "interaction_first",
                                                "interaction",
                                                "radial_type",
                                                "distance_transform",
                                                "pair_repulsion",
                                                "use_last_readout_only",
                                                "apply_cutoff",
                                                "use_agnostic_product",
                                                "readout_bias",
                                                "edge_irreps",
                                                "use_edge_irreps_first"};

bool set_by_user(const Options& o, const std::string& name) { return o.origin(name) != "default"; }

UnsupportedError not_yet(const Options& o, const std::string& name, const std::string& what) {
  return UnsupportedError("train-potential: option '" + name + "' (" + o.origin(name) + "): " + what +
                          " is not implemented yet (see docs/train-potential.md, \"Not yet\")");
}

/// "16x0e" -> 16: the only MLP_irreps the model layer builds are scalars.
int parse_mlp_irreps(const std::string& text) {
  const auto x = text.find('x');
  if (x == std::string::npos || x == 0 || text.substr(x + 1) != "0e") {
    throw InputError("train-potential: option 'MLP_irreps': value '" + text +
                     "' is not of the form Nx0e (scalars only, e.g. 16x0e)");
  }
  try {
    const int n = std::stoi(text.substr(0, x));
    if (n < 1) {
      throw InputError("");
    }
    return n;
  } catch (const std::exception&) {
    throw InputError("train-potential: option 'MLP_irreps': value '" + text + "' needs a positive count");
  }
}

std::string dir_option(const Options& o, const std::string& name, const std::string& fallback) {
  return o.has(name) ? o.get_string(name) : fallback;
}

/// What a training step needs of one bin before the model runs: its configurations (read from
/// their shards when the data is a preprocessed dataset), their graphs (neighbour lists) and the
/// loss targets. Built by the prefetch thread (no MPI; the model only for its species).
template <class Batch>
struct PreparedBin {
  std::vector<data::Config> configs;
  Batch batch;
  LossTargets targets;

  std::vector<const data::Config*> pointers() const {
    std::vector<const data::Config*> p;
    p.reserve(configs.size());
    for (const auto& c : configs) {
      p.push_back(&c);
    }
    return p;
  }
};

/// One log line to the stream and the log file.
class Logger {
 public:
  Logger(std::ostream& out, bool active) : m_out(out), m_active(active) {}
  void open(const std::string& path) {
    if (m_active) {
      m_file.open(path, std::ios::app);
      if (!m_file) {
        throw FileError(path, 0, "cannot open the log file for appending (check --log_dir)");
      }
    }
  }
  void line(const std::string& text) {
    if (m_active) {
      m_out << text << '\n' << std::flush;
      if (m_file) {
        m_file << text << '\n' << std::flush;
      }
    }
  }

 private:
  std::ostream& m_out;
  bool m_active;
  std::ofstream m_file;
};

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

template <class F>
class Trainer {
 public:
  using T = typename F::Scalar;
  using Structure = typename F::Structure;
  using Batch = typename F::Batch;
  using Bin = PreparedBin<Batch>;

  Trainer(const Options& o, MPI_Comm comm, std::ostream& out)
      : m_o(o),
        m_comm(comm),
        m_log(out, rank_of(comm) == 0),
        // The bar only on a terminal: redirected output and the log file get the epoch lines alone.
        m_bar(out, rank_of(comm) == 0 && &out == &std::cout && stdout_is_a_user_terminal()) {
    MPI_Comm_rank(comm, &m_rank);
    MPI_Comm_size(comm, &m_world);
    m_device = training_device(o, comm);
  }

  void run();

 private:
  /// stdout is a terminal, and not the pseudo-terminal an MPI launcher gives its ranks: Open
  /// MPI's mpirun connects every rank's stdout to a pty even when its own output goes to a file,
  /// so under a launcher the bar would fill redirected logs with carriage returns.
  static bool stdout_is_a_user_terminal() {
    for (const char* launcher_var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
      if (std::getenv(launcher_var) != nullptr) {
        return false;
      }
    }
    return isatty(STDOUT_FILENO) == 1;
  }
  static int rank_of(MPI_Comm c) {
    int r = 0;
    MPI_Comm_rank(c, &r);
    return r;
  }
  static torch::Dtype dtype() { return std::is_same_v<T, float> ? torch::kFloat32 : torch::kFloat64; }

  void read_data();
  io::PotentialFile initial_potential();
  /// Every frame of `set` has what the model needs (its elements; for a MACE model with charge or
  /// spin embeddings, values it takes): InputError naming the first frame that does not. A
  /// preprocessed dataset is checked from its index's elements, so no graph is read unless an
  /// element is missing; its charges and spins are checked as their bins are prepared.
  void check_frames(const data::GraphSet& set) const;
  /// Forward on a prepared bin, with the global counts `red` (none: the bin's own means); the bin
  /// counts as `share` of a batch in the mean training loss. Accumulates metrics into `acc`.
  /// Returns the loss.
  /// f(), with a failed allocation inside it (core/out_of_memory.hpp) turned into
  /// step_out_of_memory's error naming the bin, what to do and the last checkpoint.
  template <class Fn>
  void guard_memory(const Bin& bin, bool validation, std::int64_t epoch, std::int64_t step, Fn&& f) const {
    try {
      f();
    } catch (const Error&) {
      throw;
    } catch (const c10::Error& e) {  // LibTorch's allocators: their text without the backtrace
      if (!is_out_of_memory(e)) {
        throw;
      }
      throw step_out_of_memory(memory_context(bin, validation, epoch, step), e.what_without_backtrace());
    } catch (const std::exception& e) {
      if (!is_out_of_memory(e)) {
        throw;
      }
      throw step_out_of_memory(memory_context(bin, validation, epoch, step), e.what());
    }
  }
  StepMemoryContext memory_context(const Bin& bin, bool validation, std::int64_t epoch,
                                   std::int64_t step) const {
    StepMemoryContext c;
    c.device = m_device.str();
    c.rank = m_rank;
    c.validation = validation;
    c.epoch = epoch + 1;
    c.step = step + 1;
    c.graphs = static_cast<std::int64_t>(bin.configs.size());
    for (const auto& g : bin.configs) {
      c.atoms += static_cast<std::int64_t>(g.natoms());
    }
    c.batch_capacity = m_o.get_int("batch_capacity");
    c.single = std::is_same_v<T, float>;
    c.checkpoint = std::filesystem::exists(m_checkpoint_path) ? m_checkpoint_path : "";
    return c;
  }
  torch::Tensor batch_loss(const Bin& bin, bool train, ErrorAccumulator& acc,
                           const std::optional<LossReduction>& red, double share);
  /// The configurations `graphs` of `set`, their graphs and targets (thread-safe: the prefetch
  /// thread calls it).
  Bin prepare(const data::GraphSet& set, const std::vector<std::int64_t>& graphs) const;
  /// Global graph and atom counts of the bins one step trains on all ranks (none on 1 rank
  /// without accumulation, where the loss takes the bin's own means).
  std::optional<LossReduction> step_reduction(const std::vector<Bin>& bins) const;
  ErrorAccumulator validate(std::int64_t epoch) { return evaluate_on(m_valid, epoch); }
  /// The metrics (and loss) of `set`, batched by the sampler; each rank reads its own batches.
  /// `epoch` (0-based) only names the epoch in an out-of-memory message.
  ErrorAccumulator evaluate_on(const data::GraphSet& set, std::int64_t epoch);
  /// The batch plan of `set` for this run's ranks (--sampler, --batch_capacity, --seed),
  /// `bins_per_rank` bins per rank and step.
  sampling::BatchSampler sampler_for(const data::GraphSet& set, std::int64_t bins_per_rank = 1) const;
  /// The checkpoint after `epoch` epochs, or with `partial` after `steps` optimiser steps of the
  /// next epoch (--checkpoint_interval; collective then: every rank's partial training sums go in).
  void write_checkpoint_now(const std::string& csv, std::int64_t epoch, std::int64_t steps = 0,
                            const ErrorAccumulator* partial = nullptr) const;
  /// RESULTS_DIR/NAME_train.json and, with --plot, NAME_learning_curve.svg from m_epochs (rank 0).
  void write_epoch_outputs() const;
  /// --test_file: the final model on the test set, logged and written to NAME_test.json.
  void evaluate_test_set();

  const Options& m_o;
  MPI_Comm m_comm;
  Logger m_log;
  ProgressBar m_bar;
  int m_rank = 0, m_world = 1;
  std::string m_name, m_checkpoint_path, m_results_dir, m_model_dir;
  /// In memory (files) or streamed (preprocessed datasets): data/graph_set.hpp.
  data::GraphSet m_train, m_valid, m_test;
  std::map<int, double> m_isolated;
  std::vector<int> m_elements;   // of the training and validation data, ascending
  bool m_magmom_labels = false;  // some training or validation frame has magnetic moments
  torch::Device m_device = torch::kCPU;  ///< where the model, its batches and the loss live
  std::unique_ptr<NcclCommunicator> m_nccl;  ///< the gradient all-reduce's, when NCCL does it
  std::unique_ptr<typename F::Model> m_model;
  std::unique_ptr<Optimization> m_opt;
  LossConfig m_loss;
  bool m_virials = false;          // the loss needs virials (and stress)
  bool m_compute_virials = false;  // the forward computes them: the loss or --compute_stress
  /// Per-epoch metrics as written to NAME_train.json; kept in the checkpoint.
  nlohmann::json m_epochs = nlohmann::json::array();
  /// Lowest validation loss so far and its epoch (NAME_best.safetensors); kept in the checkpoint.
  double m_best_loss = std::numeric_limits<double>::infinity();
  std::int64_t m_best_epoch = 0;
  /// Restarting from a checkpoint within an epoch: the steps of that epoch already done and this
  /// rank's training sums over them.
  std::int64_t m_resume_steps = 0;
  std::vector<double> m_resume_sums;
};

template <class F>
void Trainer<F>::read_data() {
  data::ReadOptions ro = data::read_options_from(m_o);
  ro.extract_isolated_atoms = true;
  data::OpenedData train = data::open_labelled_data(m_o.get_string("train_file"), ro);
  m_isolated = train.meta.isolated_atom_energies;
  if (!train.meta.skip_warning.empty()) {
    m_log.line("warning: " + train.meta.skip_warning);
  }
  std::set<int> elements(train.meta.elements.begin(), train.meta.elements.end());
  m_magmom_labels = train.meta.any_magmoms;
  bool streamed = train.graphs.store() != nullptr;
  // The validation and test files: the training file's keys and labels, IsolatedAtom frames kept.
  const auto open_other = [&](const std::string& option) {
    data::ReadOptions oo = ro;
    oo.extract_isolated_atoms = false;
    data::OpenedData d = data::open_labelled_data(m_o.get_string(option), oo);
    if (!d.meta.skip_warning.empty()) {
      m_log.line("warning: " + d.meta.skip_warning);
    }
    streamed = streamed || d.graphs.store() != nullptr;
    return d;
  };
  if (m_o.has("valid_file")) {
    data::OpenedData valid = open_other("valid_file");
    elements.insert(valid.meta.elements.begin(), valid.meta.elements.end());
    m_magmom_labels = m_magmom_labels || valid.meta.any_magmoms;
    m_valid = std::move(valid.graphs);
    m_train = std::move(train.graphs);
  } else {
    // The two parts cover the file, so its elements and labels are theirs.
    const data::Split split = data::split_train_valid(train.graphs.size(), m_o.get_float("valid_fraction"),
                                                      static_cast<std::uint64_t>(m_o.get_int("seed")));
    m_train = train.graphs.subset(split.train);
    m_valid = train.graphs.subset(split.valid);
  }
  m_elements.assign(elements.begin(), elements.end());
  if (m_train.empty()) {
    throw InputError("train-potential: " + m_o.get_string("train_file") +
                     ": no training configurations left after the validation split and IsolatedAtom frames"
                     " (lower --valid_fraction or give more frames)");
  }
  if (m_o.has("test_file")) {
    // Opened now, so that a bad test file stops the run before the training, not after it.
    m_test = open_other("test_file").graphs;
  }
  m_log.line("data: " + std::to_string(m_train.size()) + " training and " + std::to_string(m_valid.size()) +
             " validation configurations" +
             (m_o.has("test_file") ? ", " + std::to_string(m_test.size()) + " test configurations" : ""));
  if (streamed) {
    m_log.line("data: preprocessed datasets are read from their shards as each rank's bins need them");
  }
}

template <class F>
io::PotentialFile Trainer<F>::initial_potential() {
  if constexpr (!F::kMace) {
    // A CHGNet has chgnet 0.3.0's architecture (fresh) or its file's (fine-tuning): MACE's
    // hyperparameter options do not apply. --E0s sets a fresh model's AtomRef energies.
    std::vector<std::string> set;
    for (const auto& n : kModelOptions) {
      if (n != "E0s" && set_by_user(m_o, n)) {
        set.push_back("'" + n + "' (" + m_o.origin(n) + ")");
      }
    }
    if (!set.empty()) {
      std::string names;
      for (const auto& n : set) {
        names += (names.empty() ? "" : ", ") + n;
      }
      throw InputError("train-potential: --model chgnet: MACE model option(s) " + names +
                       " do not apply to CHGNet (a fresh CHGNet has chgnet 0.3.0's architecture, a "
                       "fine-tuned one its --foundation_model's); drop them");
    }
  }
  if (m_o.has("foundation_model")) {
    for (const auto& n : kModelOptions) {
      if (set_by_user(m_o, n)) {
        throw InputError("train-potential: option '" + n + "' (" + m_o.origin(n) +
                         ") cannot be combined with --foundation_model: the model's hyperparameters, E0s "
                         "and scale/shift come from the potential file");
      }
    }
    m_log.line("model: fine-tuning " + m_o.get_string("foundation_model"));
    io::PotentialFile file = io::read_potential_file(m_o.get_string("foundation_model"));
    if (!file.checksummed) {
      m_log.line("note: " + file.source + " has no tensor checksums (written before fastmlip recorded them), so "
                 "damage to its weights cannot be detected; 'fastmlip-potential seal' adds them");
    }
    return file;
  }
  const std::vector<int>& elements = m_elements;
  std::optional<std::string> e0_spec;
  if (m_o.has("E0s")) {
    e0_spec = m_o.get_string("E0s");
  }
  const data::E0Map e0s = data::resolve_e0s(e0_spec, m_train, m_isolated, elements);
  std::ostringstream msg;
  msg << "model: fresh " << (F::kMace ? "MACE" : "CHGNet (chgnet 0.3.0 architecture)") << ", elements";
  for (int z : elements) {
    msg << ' ' << z << " (E0 " << e0s.at(z) << ")";
  }
  if constexpr (!F::kMace) {
    // chgnet's AtomRef: a per-element energy added to every site, from the E0s.
    ChgnetConfig cc;
    cc.atomic_numbers = elements;
    for (int z : elements) {
      cc.e0s.push_back(e0s.at(z));
    }
    cc.seed = static_cast<std::uint64_t>(m_o.get_int("seed"));
    m_log.line(msg.str());
    return make_chgnet_potential(cc);
  }
  MaceConfig c;
  c.layout.atomic_numbers = elements;
  for (int z : elements) {
    c.e0s.push_back(e0s.at(z));
  }
  c.layout.r_max = m_o.get_float("r_max");
  c.layout.num_bessel = static_cast<int>(m_o.get_int("num_radial_basis"));
  c.layout.num_polynomial_cutoff = static_cast<int>(m_o.get_int("num_cutoff_basis"));
  c.layout.max_ell = static_cast<int>(m_o.get_int("max_ell"));
  c.layout.num_channels = static_cast<int>(m_o.get_int("num_channels"));
  c.layout.max_L = static_cast<int>(m_o.get_int("max_L"));
  c.layout.correlation = {static_cast<int>(m_o.get_int("correlation"))};
  c.layout.num_interactions = static_cast<int>(m_o.get_int("num_interactions"));
  c.layout.radial_mlp.clear();
  for (long long v : m_o.get_int_list("radial_MLP")) {
    c.layout.radial_mlp.push_back(static_cast<int>(v));
  }
  c.layout.mlp_irreps = parse_mlp_irreps(m_o.get_string("MLP_irreps"));
  c.layout.interaction_first = m_o.get_string("interaction_first");
  c.layout.interaction = m_o.get_string("interaction");
  c.layout.radial_type = m_o.get_string("radial_type");
  c.layout.distance_transform = m_o.get_string("distance_transform");
  c.layout.zbl = m_o.get_bool("pair_repulsion");
  c.layout.last_readout_only = m_o.get_bool("use_last_readout_only");
  c.layout.apply_cutoff = m_o.get_bool("apply_cutoff");
  c.layout.agnostic_product = m_o.get_bool("use_agnostic_product");
  c.layout.readout_bias = m_o.get_bool("readout_bias");
  c.layout.edge_irreps = m_o.has("edge_irreps") ? m_o.get_string("edge_irreps") : "";
  c.layout.edge_irreps_first = m_o.get_bool("use_edge_irreps_first");
  if (m_o.has("embedding_specs")) {
    c.layout.embedding_specs = parse_embedding_specs(m_o.get_string("embedding_specs"));
  }
  c.layout.embedding_readout = m_o.get_bool("use_embedding_readout");
  c.layout.avg_num_neighbors = m_o.get_bool("compute_avg_num_neighbors")
                                   ? data::avg_num_neighbors(m_train, c.layout.r_max)
                                   : m_o.get_float("avg_num_neighbors");
  const data::ScaleShift ss = data::compute_scale_shift(m_o.get_string("scaling"), m_train, e0s);
  c.shift = m_o.has("mean") ? m_o.get_float("mean") : ss.mean;
  c.scale = m_o.has("std") ? m_o.get_float("std") : ss.std;
  c.seed = static_cast<std::uint64_t>(m_o.get_int("seed"));
  msg << ", avg_num_neighbors " << c.layout.avg_num_neighbors << ", shift " << c.shift << ", scale "
      << c.scale;
  m_log.line(msg.str());
  return make_mace_potential(c);
}

template <class F>
void Trainer<F>::check_frames(const data::GraphSet& set) const {
  if (set.store() == nullptr) {
    set.for_each([&](const data::Config& c) { F::structure(*m_model, c); });
    return;
  }
  const std::vector<int>& elements = set.store()->meta().elements;
  if (std::all_of(elements.begin(), elements.end(), [&](int z) { return F::covers(*m_model, z); })) {
    return;
  }
  // The error path: find and name the first frame of the set with an element the model lacks
  // (the dataset's other frames may hold it, this set's none).
  set.for_each([&](const data::Config& c) {
    for (int z : c.atomic_numbers) {
      if (!F::covers(*m_model, z)) {
        F::structure(*m_model, c);
      }
    }
  });
}

template <class F>
typename Trainer<F>::Bin Trainer<F>::prepare(const data::GraphSet& set,
                                             const std::vector<std::int64_t>& graphs) const {
  Bin bin;
  bin.configs.reserve(graphs.size());
  for (auto g : graphs) {
    bin.configs.push_back(set.load(static_cast<std::size_t>(g)));
  }
  bin.batch = F::batch(*m_model, structures_of<F>(*m_model, bin.configs));
  // On the prefetch thread: the targets' copy to a GPU overlaps the step before.
  bin.targets = make_loss_targets(bin.pointers(), dtype(), m_device);
  return bin;
}

template <class F>
std::optional<LossReduction> Trainer<F>::step_reduction(const std::vector<Bin>& bins) const {
  if (m_world == 1 && bins.size() == 1) {
    return std::nullopt;
  }
  std::int64_t local[3] = {0, 0, 0};
  for (const auto& b : bins) {
    local[0] += static_cast<std::int64_t>(b.configs.size());
    for (const auto& c : b.configs) {
      local[1] += static_cast<std::int64_t>(c.natoms());
      local[2] += c.magmoms.empty() ? 0 : static_cast<std::int64_t>(c.natoms());
    }
  }
  std::int64_t global[3] = {local[0], local[1], local[2]};
  if (m_world > 1) {
    MPI_Allreduce(local, global, 3, MPI_INT64_T, MPI_SUM, m_comm);
  }
  return LossReduction{global[0], global[1], m_world, global[2]};
}

template <class F>
torch::Tensor Trainer<F>::batch_loss(const Bin& bin, bool train, ErrorAccumulator& acc,
                                     const std::optional<LossReduction>& red, double share) {
  const Batch& batch = bin.batch;
  const FamilyOutput fam = F::forward(*m_model, batch, m_compute_virials, train);
  const MaceOutput& out = fam.out;
  const LossTargets& ref = bin.targets;
  LossPredictions pred{out.energy, out.forces, {}, {}, fam.magmoms};
  if (m_virials) {
    pred.virials = out.virials;
    // stress = -virials / volume; graphs without a cell have no stress label (weight 0), so a
    // volume of 1 there only keeps the arithmetic finite.
    auto vol = torch::linalg_det(batch.cell.to(out.virials.device(), out.virials.scalar_type())).abs();
    vol = torch::where(vol > 0, vol, torch::ones_like(vol));
    pred.stress = -out.virials / vol.view({-1, 1, 1});
  }
  torch::Tensor loss = compute_loss(m_loss, pred, ref, red).total;
  accumulate_batch(acc, bin.pointers(), out, nullptr, fam.magmoms);
  acc.add_loss(loss.detach().template item<double>(), share);
  return loss;
}

template <class F>
sampling::BatchSampler Trainer<F>::sampler_for(const data::GraphSet& set, std::int64_t bins_per_rank) const {
  std::vector<std::int64_t> sizes(set.size());
  for (std::size_t i = 0; i < set.size(); ++i) {
    sizes[i] = static_cast<std::int64_t>(set.natoms(i));
  }
  sampling::PackParams pp;
  pp.capacity = m_o.get_int("batch_capacity");
  // W ranks x A bins per step: the plan depends on W * A only, so -np 1 --accumulate_bins 2 and
  // -np 2 train on the same global batches.
  pp.ranks = m_world * bins_per_rank;
  pp.seed = static_cast<std::uint64_t>(m_o.get_int("seed"));
  return sampling::BatchSampler(std::move(sizes), m_o.get_string("sampler"), pp);  // no second copy
}

template <class F>
ErrorAccumulator Trainer<F>::evaluate_on(const data::GraphSet& set, std::int64_t epoch) {
  ErrorAccumulator acc(set.config_types());
  if (set.empty()) {
    return acc;
  }
  const sampling::BatchSampler sampler = sampler_for(set);
  const std::vector<std::vector<std::int64_t>> batches = sampler.batches(m_rank, 0);
  Prefetcher<Bin> feed(batches.size(), static_cast<std::size_t>(m_o.get_int("prefetch")),
                       [&](std::size_t i) { return prepare(set, batches[i]); });
  for (std::size_t i = 0; i < batches.size(); ++i) {
    std::vector<Bin> one;
    one.push_back(feed.next());
    // Every rank takes part in the count all-reduce, also with an empty batch.
    const std::optional<LossReduction> red = step_reduction(one);
    if (!one[0].configs.empty()) {
      guard_memory(one[0], true, epoch, static_cast<std::int64_t>(i),
                   [&] { batch_loss(one[0], false, acc, red, 1.0); });
    }
  }
  acc.reduce(m_comm);
  return acc;
}

template <class F>
void Trainer<F>::write_checkpoint_now(const std::string& csv, std::int64_t epoch, std::int64_t steps,
                                      const ErrorAccumulator* partial) const {
  std::vector<double> sums;
  if (partial != nullptr) {
    // Each rank's own sums, so that a restart adds the rest of the epoch to them in the same order.
    const std::vector<double> mine = partial->flat();
    sums.resize(mine.size() * static_cast<std::size_t>(m_world));
    MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, sums.data(),
               static_cast<int>(mine.size()), MPI_DOUBLE, 0, m_comm);
  }
  if (m_rank != 0) {
    return;
  }
  CheckpointState s;
  if (partial != nullptr) {
    s.ints["run/epoch_steps"] = steps;
    s.ints["run/world"] = m_world;
    s.ints["run/accumulate_bins"] = m_o.get_int("accumulate_bins");
    s.tensors["run/partial_train"] = torch::tensor(sums, torch::kFloat64)
                                         .view({m_world, static_cast<std::int64_t>(sums.size()) / m_world});
  }
  save_tensors(s, "model/", m_model->named_parameters());
  m_opt->save(s);
  save_torch_rng(s);
  s.texts["run/csv"] = csv;
  s.texts["run/epochs_json"] = m_epochs.dump();
  s.reals["run/best_valid_loss"] = m_best_loss;
  s.ints["run/best_epoch"] = m_best_epoch;
  s.texts["run/options"] = m_o.to_yaml();
  s.texts["run/dtype"] = m_o.get_string("default_dtype");
  write_checkpoint(m_checkpoint_path, s);
  if (m_o.get_bool("keep_checkpoints")) {
    const fs::path p(m_checkpoint_path);
    const std::string tag =
        partial != nullptr ? "_step-" + std::to_string(m_opt->steps()) : "_epoch-" + std::to_string(epoch);
    write_checkpoint((p.parent_path() / (m_name + tag + ".ckpt")).string(), s);
  }
}

template <class F>
void Trainer<F>::write_epoch_outputs() const {
  if (m_rank != 0) {
    return;
  }
  const nlohmann::json doc = {{"name", m_name}, {"epochs", m_epochs}};
  io::write_file_atomically(m_results_dir + "/" + m_name + "_train.json",
                            [&](std::ostream& out) { out << doc.dump(1) << '\n'; });
  if (!m_o.get_bool("plot")) {
    return;
  }
  // Curves from the JSON history, so that a restarted run draws the epochs before the restart.
  const auto series = [&](const char* set, const char* key, double unit, std::string label,
                          std::string color) {
    CurveSeries c{std::move(label), std::move(color), {}, {}};
    for (const auto& e : m_epochs) {
      const auto& m = e.at(set);
      if (!m.is_null() && m.at("overall").at(key).is_number()) {
        c.x.push_back(e.at("epoch").get<double>());
        c.y.push_back(unit * m.at("overall").at(key).get<double>());
      }
    }
    return c;
  };
  const std::vector<CurvePanel> panels = {
      {"loss",
       {series("train", "loss", 1, "train", "#1f77b4"), series("valid", "loss", 1, "valid", "#d62728")}},
      {"RMSE F (meV/A)",
       {series("train", "rmse_f", 1e3, "train", "#1f77b4"),
        series("valid", "rmse_f", 1e3, "valid", "#d62728")}}};
  const std::string svg = learning_curve_svg(panels);
  io::write_file_atomically(m_results_dir + "/" + m_name + "_learning_curve.svg",
                            [&](std::ostream& out) { out << svg; });
}

template <class F>
void Trainer<F>::evaluate_test_set() {
  EvalOptions eo;
  eo.batch_capacity = m_o.get_int("batch_capacity");
  eo.virials = m_compute_virials;
  const ErrorAccumulator test = evaluate_model<F>(*m_model, m_test, eo, m_comm).metrics;
  m_log.line("test: " + m_o.get_string("test_file") + ", " + std::to_string(m_test.size()) +
             " configurations (meV units)");
  std::istringstream table(metrics_table(test));
  for (std::string row; std::getline(table, row);) {
    m_log.line(row);
  }
  if (m_rank == 0) {
    nlohmann::json j = metrics_json(test);
    j["model"] = m_model_dir + "/" + m_name + ".safetensors";
    j["data"] = m_o.get_string("test_file");
    const std::string path = m_results_dir + "/" + m_name + "_test.json";
    io::write_file_atomically(path, [&](std::ostream& out) { out << j.dump(2) << '\n'; });
    m_log.line("test metrics: " + path);
  }
}

template <class F>
void Trainer<F>::run() {
  m_name = m_o.get_string("name");
  const std::string work = m_o.get_string("work_dir");
  const std::string log_dir = dir_option(m_o, "log_dir", work + "/logs");
  const std::string ckpt_dir = dir_option(m_o, "checkpoints_dir", work + "/checkpoints");
  m_results_dir = dir_option(m_o, "results_dir", work + "/results");
  m_model_dir = dir_option(m_o, "model_dir", work);
  m_checkpoint_path = ckpt_dir + "/" + m_name + ".ckpt";
  if (m_rank == 0) {
    for (const auto& d : {work, log_dir, ckpt_dir, m_results_dir, m_model_dir}) {
      std::error_code ec;
      fs::create_directories(d, ec);
      if (ec) {
        throw FileError(d, 0, "cannot create the directory: " + ec.message());
      }
    }
  }
  m_log.open(log_dir + "/" + m_name + ".log");
  // The gradient all-reduce (--allreduce): NCCL where every rank has a GPU of its own, else MPI.
  // Decided on every rank alike (nccl_problem is collective), before any data is read.
  if (const std::string allreduce = m_o.get_string("allreduce"); allreduce != "mpi") {
    const std::string problem = nccl_problem(m_device, m_comm);
    if (!problem.empty() && allreduce == "nccl") {
      throw UnsupportedError("train-potential: option 'allreduce' (" + m_o.origin("allreduce") +
                             "): " + problem);
    }
    if (problem.empty() && m_world > 1) {
      m_nccl = std::make_unique<NcclCommunicator>(m_comm, m_device);
    }
  }
  m_log.line("train-potential: " + m_name + ", " + std::to_string(m_world) + " rank(s), " +
             m_o.get_string("default_dtype") + (m_device.is_cpu() ? "" : ", rank 0 on " + m_device.str()) +
             (m_world == 1 ? ""
              : m_nccl     ? ", gradients all-reduced by NCCL"
                           : ", gradients all-reduced by MPI"));
  // LibTorch seeds its default generator non-deterministically; a run is a function of --seed
  // (and a restart restores the generator from the checkpoint).
  torch::manual_seed(static_cast<std::uint64_t>(m_o.get_int("seed")));
  read_data();
  m_model = F::make(initial_potential(), m_o, m_device);
  // An element the model lacks is an error now, not in the middle of the training.
  check_frames(m_train);
  check_frames(m_valid);
  check_frames(m_test);
  m_loss = loss_config_from(m_o);
  m_virials = m_loss.kind != LossKind::kWeighted;
  m_compute_virials = m_virials || m_o.get_bool("compute_stress");
  // The learning-rate scaling counts the bins of a global step: ranks x accumulated bins.
  const int bins_per_step = m_world * static_cast<int>(m_o.get_int("accumulate_bins"));
  m_opt = std::make_unique<Optimization>(m_model->named_parameters(), optim_config_from(m_o, bins_per_step));
  if (m_world > 1) {
    broadcast_parameters(m_model->parameters(), m_comm);
  }

  // The first eight columns are those of earlier versions; stress and virials were appended.
  std::string csv =
      "epoch,lr,train_loss,valid_loss,rmse_e_per_atom,mae_e_per_atom,rmse_f,mae_f,rmse_stress,mae_stress,"
      "rmse_virials_per_atom,mae_virials_per_atom";
  // Magmom columns only where there are magmom labels (CHGNet on MPtrj data).
  const bool magmom_columns = !F::kMace && m_magmom_labels;
  csv += magmom_columns ? ",rmse_magmom,mae_magmom\n" : "\n";
  std::optional<std::string> restart;
  if (m_o.has("restart")) {
    restart = m_o.get_string("restart");
  } else if (m_o.get_bool("restart_latest") && fs::exists(m_checkpoint_path)) {
    restart = m_checkpoint_path;
  }
  if (restart) {
    const CheckpointState s = read_checkpoint(*restart);
    if (s.text("run/dtype") != m_o.get_string("default_dtype")) {
      throw InputError("train-potential: " + *restart + " was written by a " + s.text("run/dtype") +
                       " run; this run is " + m_o.get_string("default_dtype"));
    }
    load_tensors(s, "model/", m_model->named_parameters());
    m_opt->load(s);
    load_torch_rng(s);
    csv = s.text("run/csv");
    // Checkpoints of earlier versions lack the JSON history and the best loss: start them afresh.
    if (s.texts.count("run/epochs_json") != 0) {
      m_epochs = nlohmann::json::parse(s.text("run/epochs_json"));
      m_best_loss = s.real("run/best_valid_loss");
      m_best_epoch = s.integer("run/best_epoch");
    }
    if (s.ints.count("run/epoch_steps") != 0) {
      // Each rank's sums and bins are its own, and the plan depends on ranks x accumulate_bins.
      if (s.integer("run/world") != m_world ||
          s.integer("run/accumulate_bins") != m_o.get_int("accumulate_bins")) {
        throw InputError("train-potential: " + *restart + " was written within an epoch by a run on " +
                         std::to_string(s.integer("run/world")) + " rank(s) with --accumulate_bins " +
                         std::to_string(s.integer("run/accumulate_bins")) +
                         "; continue it the same way (this run: " + std::to_string(m_world) +
                         " rank(s), --accumulate_bins " + std::to_string(m_o.get_int("accumulate_bins")) +
                         "), or restart from an end-of-epoch checkpoint");
      }
      m_resume_steps = s.integer("run/epoch_steps");
      const torch::Tensor mine = s.tensor("run/partial_train")[m_rank].contiguous();
      m_resume_sums.assign(mine.data_ptr<double>(), mine.data_ptr<double>() + mine.numel());
    }
    m_log.line("restart: " + *restart + " after epoch " + std::to_string(m_opt->epochs()) +
               (m_resume_steps > 0 ? " and " + std::to_string(m_resume_steps) + " step(s) of the next" : "") +
               ", step " + std::to_string(m_opt->steps()));
  }

  const std::int64_t accumulate = m_o.get_int("accumulate_bins");
  const sampling::BatchSampler sampler = sampler_for(m_train, accumulate);
  const std::int64_t max_epochs = m_o.get_int("max_num_epochs");
  const std::int64_t eval_interval = m_o.get_int("eval_interval");
  const std::int64_t checkpoint_interval = m_o.get_int("checkpoint_interval");
  const auto params = m_model->parameters();
  // NCCL sums the gradients on the GPU after backward; MPI's sums may overlap it.
  std::optional<OverlappedGradientReducer> reducer;
  if (m_world > 1 && !m_nccl && m_o.get_bool("overlap_allreduce")) {
    reducer.emplace(params, m_comm);
  }

  const std::vector<std::string> train_types = m_train.config_types();

  for (std::int64_t epoch = m_opt->epochs(); epoch < max_epochs; ++epoch) {
    const double lr = m_opt->lr();
    ErrorAccumulator train(train_types);
    // Step s of the plan is bins s*W*A .. s*W*A + W*A - 1; rank r takes r*A .. r*A + A - 1.
    const sampling::Plan plan = sampler.plan(static_cast<std::uint64_t>(epoch));
    // A restart within this epoch continues after the steps done before it (their sums come back).
    std::size_t first = 0;
    if (m_resume_steps > 0) {
      train.set_flat(m_resume_sums);
      first = static_cast<std::size_t>(m_resume_steps);
      m_resume_steps = 0;
    }
    std::vector<std::vector<std::int64_t>> mine;
    for (std::size_t step = first; step < plan.steps(); ++step) {
      for (std::int64_t a = 0; a < accumulate; ++a) {
        mine.push_back(plan.bin(plan.bin_at(step, m_rank * accumulate + a)));
      }
    }
    Prefetcher<Bin> feed(mine.size(), static_cast<std::size_t>(m_o.get_int("prefetch")),
                         [&](std::size_t i) { return prepare(m_train, mine[i]); });
    m_bar.start(static_cast<std::int64_t>(plan.steps() - first),
                "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(max_epochs) + " ");
    for (std::size_t step = first; step < plan.steps(); ++step) {
      std::vector<Bin> bins;
      for (std::int64_t a = 0; a < accumulate; ++a) {
        bins.push_back(feed.next());
      }
      const std::optional<LossReduction> red = step_reduction(bins);
      m_opt->zero_grad();
      for (std::int64_t a = 0; a < accumulate; ++a) {
        if (reducer && a + 1 == accumulate) {
          reducer->arm();  // only the last bin's backward sends the accumulated gradients
        }
        if (!bins[a].configs.empty()) {
          guard_memory(bins[a], false, epoch, static_cast<std::int64_t>(step), [&] {
            batch_loss(bins[a], true, train, red, 1.0 / static_cast<double>(accumulate)).backward();
          });
        }
      }
      if (reducer) {
        reducer->finish();
      } else if (m_world > 1) {
        allreduce_mean_gradients(params, m_comm, kBucketBytes, m_nccl.get());
      }
      m_opt->step();
      m_bar.step();
      if (checkpoint_interval > 0 && m_opt->steps() % checkpoint_interval == 0 && step + 1 < plan.steps()) {
        write_checkpoint_now(csv, epoch, static_cast<std::int64_t>(step + 1), &train);
      }
    }
    m_bar.clear();
    train.reduce(m_comm);
    // Validation every --eval_interval epochs and after the last, with the EMA weights when there
    // is an EMA (as mace-torch evaluates); the best validated weights are exported as they are.
    const bool validating = (epoch + 1) % eval_interval == 0 || epoch + 1 == max_epochs;
    std::optional<ErrorAccumulator> v;
    std::optional<double> valid_loss;
    if (validating) {
      std::vector<torch::Tensor> saved;
      if (m_opt->ema() != nullptr) {
        torch::NoGradGuard ng;
        for (const auto& p : params) {
          saved.push_back(p.detach().clone());
        }
        m_opt->ema()->copy_to(params);
      }
      v = validate(epoch);
      if (v->overall().n_loss > 0) {
        valid_loss = metrics_of(v->overall()).loss;
      }
      if (valid_loss && *valid_loss < m_best_loss) {
        m_best_loss = *valid_loss;
        m_best_epoch = epoch + 1;
        if (m_rank == 0) {
          m_model->save(m_model_dir + "/" + m_name + "_best.safetensors");
        }
      }
      if (!saved.empty()) {
        torch::NoGradGuard ng;
        for (std::size_t k = 0; k < params.size(); ++k) {
          params[k].copy_(saved[k]);
        }
      }
    }
    const Metrics tm = metrics_of(train.overall());
    const double train_loss = tm.loss;
    m_opt->end_epoch(valid_loss);
    const auto num = [](double x) { return std::isnan(x) ? std::string() : fmt("%.10e", x); };
    Metrics vm;
    vm.rmse_e = vm.mae_e = vm.rmse_f = vm.mae_f = vm.rmse_s = vm.mae_s = vm.rmse_v = vm.mae_v = NAN;
    vm.rmse_m = vm.mae_m = NAN;
    if (valid_loss) {
      vm = metrics_of(v->overall());
    }
    csv += std::to_string(epoch + 1) + "," + num(lr) + "," + num(train_loss) + "," +
           num(valid_loss.value_or(NAN)) + "," + num(vm.rmse_e) + "," + num(vm.mae_e) + "," + num(vm.rmse_f) +
           "," + num(vm.mae_f) + "," + num(vm.rmse_s) + "," + num(vm.mae_s) + "," + num(vm.rmse_v) + "," +
           num(vm.mae_v) + (magmom_columns ? "," + num(vm.rmse_m) + "," + num(vm.mae_m) : std::string()) +
           "\n";
    std::string line = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(max_epochs) + ": lr " +
                       fmt("%.3e", lr) + ", train loss " + fmt("%.6e", train_loss);
    if (valid_loss) {
      line += ", valid loss " + fmt("%.6e", *valid_loss) + ", RMSE E/atom " + fmt("%.2f", 1e3 * vm.rmse_e) +
              " meV, MAE E/atom " + fmt("%.2f", 1e3 * vm.mae_e) + " meV, RMSE F " +
              fmt("%.2f", 1e3 * vm.rmse_f) + " meV/A, MAE F " + fmt("%.2f", 1e3 * vm.mae_f) + " meV/A";
      if (vm.n_s > 0) {
        line += ", RMSE S " + fmt("%.2f", 1e3 * vm.rmse_s) + " meV/A^3";
      }
      if (vm.n_v > 0) {
        line += ", RMSE V/atom " + fmt("%.2f", 1e3 * vm.rmse_v) + " meV";
      }
      if (vm.n_m > 0) {
        line += ", RMSE M " + fmt("%.4f", vm.rmse_m) + " mu_B, MAE M " + fmt("%.4f", vm.mae_m) + " mu_B";
      }
      if (m_best_epoch == epoch + 1) {
        line += " (best)";
      }
    } else {
      line += validating ? " (no validation set)" : " (not validated this epoch)";
    }
    m_log.line(line);
    m_epochs.push_back({{"epoch", epoch + 1},
                        {"lr", lr},
                        {"train", metrics_json(train)},
                        {"valid", valid_loss ? metrics_json(*v) : nlohmann::json(nullptr)}});
    if (m_rank == 0) {
      const std::string path = m_results_dir + "/" + m_name + "_train.csv";
      io::write_file_atomically(path, [&](std::ostream& out) { out << csv; });
    }
    write_epoch_outputs();
    write_checkpoint_now(csv, epoch + 1);
  }

  // The final model: the EMA weights when there is an EMA.
  if (m_opt->ema() != nullptr) {
    m_opt->ema()->copy_to(params);
  }
  if (m_rank == 0) {
    const std::string path = m_model_dir + "/" + m_name + ".safetensors";
    m_model->save(path);
    m_log.line(std::string("exported ") + (m_opt->ema() != nullptr ? "EMA" : "final") + " model: " + path);
    if (m_best_epoch > 0) {
      m_log.line("best validation loss " + fmt("%.6e", m_best_loss) + " at epoch " +
                 std::to_string(m_best_epoch) + ": " + m_model_dir + "/" + m_name + "_best.safetensors");
    }
  }
  if (!m_test.empty()) {
    evaluate_test_set();
  }
  // What streaming read: each rank its own bins' graphs (rank 0's count; the others' are alike).
  std::set<const data::PreprocessedDataset*> stores;
  for (const data::GraphSet* set : {&m_train, &m_valid, &m_test}) {
    if (set->store() != nullptr) {
      stores.insert(set->store());
    }
  }
  if (!stores.empty()) {
    std::uint64_t records = 0, graphs = 0;
    for (const auto* store : stores) {
      records += store->records_read();
      graphs += store->size();
    }
    m_log.line("data: rank 0 read " + std::to_string(records) + " graph records of the " +
               std::to_string(graphs) + " in its datasets");
  }
}

}  // namespace

void check_implemented(const Options& o) {
  if (o.get_string("model") != "mace" && o.get_string("model") != "chgnet") {
    throw not_yet(o, "model", "--model " + o.get_string("model"));
  }
  if (o.get_string("device") != "cpu") {
    // Here, before any data is read: no GPU, or a build without CUDA kernels.
    if (const std::string problem = device_problem(torch::Device(torch::kCUDA)); !problem.empty()) {
      throw UnsupportedError("train-potential: option 'device' (" + o.origin("device") + "): " + problem);
    }
  }
  if (o.get_bool("direct_heads") && o.get_string("model") != "chgnet") {
    throw InputError("train-potential: option 'direct_heads' (" + o.origin("direct_heads") +
                     "): direct force/stress heads are CHGNet's; use them with --model chgnet");
  }
  for (const char* n : {"log_level", "patience"}) {
    if (set_by_user(o, n)) {
      throw not_yet(o, n, std::string("--") + n);
    }
  }
}

ResourceError step_out_of_memory(const StepMemoryContext& c, const char* allocator_said) {
  const std::string where = c.validation
                                ? "validating in epoch " + std::to_string(c.epoch)
                                : "in epoch " + std::to_string(c.epoch) + ", step " + std::to_string(c.step);
  return ResourceError(
      "train-potential: rank " + std::to_string(c.rank) + " ran out of " + c.device + " memory " + where +
      " (a bin of " + std::to_string(c.graphs) + " graphs and " + std::to_string(c.atoms) + " atoms; " +
      allocator_message(allocator_said) +
      "). A bin's activations grow with its atoms and edges: use a smaller " + "--batch_capacity (now " +
      std::to_string(c.batch_capacity) + " atoms; --accumulate_bins keeps the global batch)" +
      (c.single ? std::string(". ") : std::string(", or --default_dtype float32. ")) +
      (c.checkpoint.empty() ? std::string("No checkpoint had been written yet.")
                            : "The last checkpoint, " + c.checkpoint +
                                  ", is intact: continue with --restart " + c.checkpoint + "."));
}

int node_local_rank(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

torch::Device training_device(const Options& o, MPI_Comm comm) {
  if (o.get_string("device") == "cpu") {
    return torch::kCPU;
  }
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  const int local = node_local_rank(comm);
  return {torch::kCUDA, static_cast<torch::DeviceIndex>(gpus > 0 ? local % gpus : 0)};
}

void run_training(const Options& options, MPI_Comm comm, std::ostream& log) {
  check_implemented(options);
  const bool f32 = options.get_string("default_dtype") == "float32";
  if (options.get_string("model") == "chgnet") {
    if (f32) {
      Trainer<ChgnetFamily<float>>(options, comm, log).run();
    } else {
      Trainer<ChgnetFamily<double>>(options, comm, log).run();
    }
  } else if (f32) {
    Trainer<MaceFamily<float>>(options, comm, log).run();
  } else {
    Trainer<MaceFamily<double>>(options, comm, log).run();
  }
}

}  // namespace fastmlip::trainer::train

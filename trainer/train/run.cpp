// SPDX-License-Identifier: MIT
#include "train/run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "data/dataset.hpp"
#include "data/statistics.hpp"
#include "distributed.hpp"
#include "io/atomic_file.hpp"
#include "io/potential_file.hpp"
#include "models/mace.hpp"
#include "sampling/sampler.hpp"
#include "train/checkpoint.hpp"
#include "train/loss.hpp"
#include "train/optim.hpp"
#include "train/prefetch.hpp"

namespace fastmlip::trainer::train {
namespace {

namespace fs = std::filesystem;

/// Model options that a --foundation_model file fixes; setting one as well is an error, not a
/// silently ignored value.
const std::vector<std::string> kModelOptions = {
    "r_max",      "num_radial_basis", "num_cutoff_basis", "max_ell",   "num_channels", "max_L",
    "correlation", "num_interactions", "radial_MLP",      "MLP_irreps", "E0s",          "scaling",
    "mean",        "std",              "avg_num_neighbors", "compute_avg_num_neighbors"};

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

/// Sums of squared and absolute errors and their counts, for RMSE and MAE.
struct ErrorSums {
  double sq_e = 0, abs_e = 0, n_e = 0;  // energy per atom, per graph
  double sq_f = 0, abs_f = 0, n_f = 0;  // force components
  double loss = 0, n_loss = 0;          // batch losses
};

/// What a training step needs of one bin before the model runs: its configurations, their graphs
/// (neighbour lists) and the loss targets. Built by the prefetch thread (no MPI, no model).
struct PreparedBin {
  std::vector<const data::Config*> configs;
  MaceBatch batch;
  LossTargets targets;
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

template <class T>
class Trainer {
 public:
  Trainer(const Options& o, MPI_Comm comm, std::ostream& out)
      : m_o(o), m_comm(comm), m_log(out, rank_of(comm) == 0) {
    MPI_Comm_rank(comm, &m_rank);
    MPI_Comm_size(comm, &m_world);
  }

  void run();

 private:
  static int rank_of(MPI_Comm c) {
    int r = 0;
    MPI_Comm_rank(c, &r);
    return r;
  }
  static torch::Dtype dtype() { return std::is_same_v<T, float> ? torch::kFloat32 : torch::kFloat64; }

  void read_data();
  io::PotentialFile initial_potential();
  std::vector<MaceStructure> structures_of(const std::vector<data::Config>& configs) const;
  /// Forward on one batch of configs; accumulates metrics into `sums`. Returns the loss.
  torch::Tensor batch_loss(const std::vector<const data::Config*>& configs,
                           const std::vector<const MaceStructure*>& structures, bool train, ErrorSums& sums);
  /// The same on a prepared bin, with the global counts `red` (none: the bin's own means); the
  /// bin counts as `share` of a batch in the mean training loss.
  torch::Tensor batch_loss(const PreparedBin& bin, bool train, ErrorSums& sums,
                           const std::optional<LossReduction>& red, double share);
  /// Graphs and targets of bin `graphs` of m_train (thread-safe: the prefetch thread calls it).
  PreparedBin prepare(const std::vector<std::int64_t>& graphs) const;
  /// Global graph and atom counts of the bins one step trains on all ranks (none on 1 rank
  /// without accumulation, where the loss takes the bin's own means).
  std::optional<LossReduction> step_reduction(const std::vector<PreparedBin>& bins) const;
  ErrorSums validate();
  /// The batch plan of `configs` for this run's ranks (--sampler, --batch_capacity, --seed),
  /// `bins_per_rank` bins per rank and step.
  sampling::BatchSampler sampler_for(const std::vector<data::Config>& configs,
                                     std::int64_t bins_per_rank = 1) const;
  void reduce(ErrorSums& s) const;
  void write_checkpoint_now(const std::string& csv) const;

  const Options& m_o;
  MPI_Comm m_comm;
  Logger m_log;
  int m_rank = 0, m_world = 1;
  std::string m_name, m_checkpoint_path, m_results_dir, m_model_dir;
  std::vector<data::Config> m_train, m_valid;
  std::map<int, double> m_isolated;
  std::vector<MaceStructure> m_train_s, m_valid_s;
  std::unique_ptr<MaceTorchModel<T>> m_model;
  std::unique_ptr<Optimization> m_opt;
  LossConfig m_loss;
  bool m_virials = false;
};

template <class T>
void Trainer<T>::read_data() {
  data::ReadOptions ro = data::read_options_from(m_o);
  ro.extract_isolated_atoms = true;
  data::Dataset train = data::read_dataset(m_o.get_string("train_file"), ro);
  m_isolated = train.isolated_atom_energies;
  if (!train.skip_warning.empty()) {
    m_log.line("warning: " + train.skip_warning);
  }
  if (m_o.has("valid_file")) {
    data::ReadOptions vo = ro;
    vo.extract_isolated_atoms = false;
    data::Dataset valid = data::read_dataset(m_o.get_string("valid_file"), vo);
    if (!valid.skip_warning.empty()) {
      m_log.line("warning: " + valid.skip_warning);
    }
    m_train = std::move(train.configs);
    m_valid = std::move(valid.configs);
  } else {
    const data::Split split = data::split_train_valid(train.configs.size(), m_o.get_float("valid_fraction"),
                                                      static_cast<std::uint64_t>(m_o.get_int("seed")));
    for (auto i : split.train) {
      m_train.push_back(train.configs[i]);
    }
    for (auto i : split.valid) {
      m_valid.push_back(train.configs[i]);
    }
  }
  if (m_train.empty()) {
    throw InputError("train-potential: " + m_o.get_string("train_file") +
                     ": no training configurations left after the validation split and IsolatedAtom frames"
                     " (lower --valid_fraction or give more frames)");
  }
  m_log.line("data: " + std::to_string(m_train.size()) + " training and " + std::to_string(m_valid.size()) +
             " validation configurations");
}

template <class T>
io::PotentialFile Trainer<T>::initial_potential() {
  if (m_o.has("foundation_model")) {
    for (const auto& n : kModelOptions) {
      if (set_by_user(m_o, n)) {
        throw InputError("train-potential: option '" + n + "' (" + m_o.origin(n) +
                         ") cannot be combined with --foundation_model: the model's hyperparameters, E0s "
                         "and scale/shift come from the potential file");
      }
    }
    m_log.line("model: fine-tuning " + m_o.get_string("foundation_model"));
    return io::read_potential_file(m_o.get_string("foundation_model"));
  }
  std::vector<data::Config> all = m_train;
  all.insert(all.end(), m_valid.begin(), m_valid.end());
  const std::vector<int> elements = data::elements_of(all);
  std::optional<std::string> e0_spec;
  if (m_o.has("E0s")) {
    e0_spec = m_o.get_string("E0s");
  }
  const data::E0Map e0s = data::resolve_e0s(e0_spec, m_train, m_isolated, elements);
  MaceConfig c;
  c.atomic_numbers = elements;
  for (int z : elements) {
    c.e0s.push_back(e0s.at(z));
  }
  c.r_max = m_o.get_float("r_max");
  c.num_bessel = static_cast<int>(m_o.get_int("num_radial_basis"));
  c.num_polynomial_cutoff = static_cast<int>(m_o.get_int("num_cutoff_basis"));
  c.max_ell = static_cast<int>(m_o.get_int("max_ell"));
  c.num_channels = static_cast<int>(m_o.get_int("num_channels"));
  c.max_L = static_cast<int>(m_o.get_int("max_L"));
  c.correlation = static_cast<int>(m_o.get_int("correlation"));
  c.num_interactions = static_cast<int>(m_o.get_int("num_interactions"));
  c.radial_mlp.clear();
  for (long long v : m_o.get_int_list("radial_MLP")) {
    c.radial_mlp.push_back(static_cast<int>(v));
  }
  c.mlp_irreps = parse_mlp_irreps(m_o.get_string("MLP_irreps"));
  c.avg_num_neighbors = m_o.get_bool("compute_avg_num_neighbors") ? data::avg_num_neighbors(m_train, c.r_max)
                                                                  : m_o.get_float("avg_num_neighbors");
  const data::ScaleShift ss = data::compute_scale_shift(m_o.get_string("scaling"), m_train, e0s);
  c.shift = m_o.has("mean") ? m_o.get_float("mean") : ss.mean;
  c.scale = m_o.has("std") ? m_o.get_float("std") : ss.std;
  c.seed = static_cast<std::uint64_t>(m_o.get_int("seed"));
  std::ostringstream msg;
  msg << "model: fresh MACE, elements";
  for (int z : elements) {
    msg << ' ' << z << " (E0 " << e0s.at(z) << ")";
  }
  msg << ", avg_num_neighbors " << c.avg_num_neighbors << ", shift " << c.shift << ", scale " << c.scale;
  m_log.line(msg.str());
  return make_mace_potential(c);
}

template <class T>
std::vector<MaceStructure> Trainer<T>::structures_of(const std::vector<data::Config>& configs) const {
  std::vector<MaceStructure> out;
  out.reserve(configs.size());
  for (const auto& c : configs) {
    MaceStructure s;
    s.positions = c.positions;
    s.cell = c.cell;
    s.pbc = c.pbc;
    for (std::size_t i = 0; i < c.natoms(); ++i) {
      const int k = m_model->species_index(c.atomic_numbers[i]);
      if (k < 0) {
        throw InputError("train-potential: " + c.where() + ": atom " + std::to_string(i + 1) + " has Z = " +
                         std::to_string(c.atomic_numbers[i]) +
                         ", which the model does not have (give a foundation model that covers it)");
      }
      s.species.push_back(k);
    }
    out.push_back(std::move(s));
  }
  return out;
}

template <class T>
torch::Tensor Trainer<T>::batch_loss(const std::vector<const data::Config*>& configs,
                                     const std::vector<const MaceStructure*>& structures, bool train,
                                     ErrorSums& sums) {
  std::vector<MaceStructure> s;
  s.reserve(structures.size());
  for (const auto* p : structures) {
    s.push_back(*p);
  }
  const PreparedBin bin{configs, make_mace_batch(s, m_model->cutoff()), make_loss_targets(configs, dtype())};
  std::optional<LossReduction> red;
  if (m_world > 1) {
    red = step_reduction({bin});
  }
  return batch_loss(bin, train, sums, red, 1.0);
}

template <class T>
PreparedBin Trainer<T>::prepare(const std::vector<std::int64_t>& graphs) const {
  PreparedBin bin;
  std::vector<MaceStructure> s;
  for (auto g : graphs) {
    bin.configs.push_back(&m_train[static_cast<std::size_t>(g)]);
    s.push_back(m_train_s[static_cast<std::size_t>(g)]);
  }
  bin.batch = make_mace_batch(s, m_model->cutoff());
  bin.targets = make_loss_targets(bin.configs, dtype());
  return bin;
}

template <class T>
std::optional<LossReduction> Trainer<T>::step_reduction(const std::vector<PreparedBin>& bins) const {
  if (m_world == 1 && bins.size() == 1) {
    return std::nullopt;
  }
  std::int64_t local[2] = {0, 0};
  for (const auto& b : bins) {
    local[0] += static_cast<std::int64_t>(b.configs.size());
    for (const auto* c : b.configs) {
      local[1] += static_cast<std::int64_t>(c->natoms());
    }
  }
  std::int64_t global[2] = {local[0], local[1]};
  if (m_world > 1) {
    MPI_Allreduce(local, global, 2, MPI_INT64_T, MPI_SUM, m_comm);
  }
  return LossReduction{global[0], global[1], m_world};
}

template <class T>
torch::Tensor Trainer<T>::batch_loss(const PreparedBin& bin, bool train, ErrorSums& sums,
                                     const std::optional<LossReduction>& red, double share) {
  const auto& configs = bin.configs;
  const MaceBatch& batch = bin.batch;
  MaceForwardOptions fo;
  fo.forces = true;
  fo.virials = m_virials;
  fo.create_graph = train;
  const MaceOutput out = m_model->forward(batch, fo);
  const LossTargets& ref = bin.targets;
  LossPredictions pred{out.energy, out.forces, {}, {}};
  if (m_virials) {
    pred.virials = out.virials;
    // stress = -virials / volume; graphs without a cell have no stress label (weight 0), so a
    // volume of 1 there only keeps the arithmetic finite.
    auto vol = torch::linalg_det(batch.cell.to(out.virials.scalar_type())).abs();
    vol = torch::where(vol > 0, vol, torch::ones_like(vol));
    pred.stress = -out.virials / vol.view({-1, 1, 1});
  }
  torch::Tensor loss = compute_loss(m_loss, pred, ref, red).total;
  {
    torch::NoGradGuard ng;
    const auto e = out.energy.detach().to(torch::kFloat64);
    const auto f = out.forces.detach().to(torch::kFloat64).contiguous();
    std::size_t atom = 0;
    for (std::size_t g = 0; g < configs.size(); ++g) {
      const data::Config& c = *configs[g];
      const double n = static_cast<double>(c.natoms());
      if (c.energy) {
        const double d = (e[static_cast<std::int64_t>(g)].template item<double>() - *c.energy) / n;
        sums.sq_e += d * d;
        sums.abs_e += std::abs(d);
        sums.n_e += 1;
      }
      if (!c.forces.empty()) {
        const double* fp = f.data_ptr<double>() + 3 * atom;
        for (std::size_t k = 0; k < 3 * c.natoms(); ++k) {
          const double d = fp[k] - c.forces[k];
          sums.sq_f += d * d;
          sums.abs_f += std::abs(d);
          sums.n_f += 1;
        }
      }
      atom += c.natoms();
    }
    sums.loss += loss.detach().template item<double>();
    sums.n_loss += share;
  }
  return loss;
}

template <class T>
void Trainer<T>::reduce(ErrorSums& s) const {
  if (m_world == 1) {
    return;
  }
  double v[8] = {s.sq_e, s.abs_e, s.n_e, s.sq_f, s.abs_f, s.n_f, s.loss, s.n_loss};
  MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_DOUBLE, MPI_SUM, m_comm);
  s = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
}

template <class T>
sampling::BatchSampler Trainer<T>::sampler_for(const std::vector<data::Config>& configs,
                                               std::int64_t bins_per_rank) const {
  std::vector<std::int64_t> sizes;
  for (const auto& c : configs) {
    sizes.push_back(static_cast<std::int64_t>(c.natoms()));
  }
  sampling::PackParams pp;
  pp.capacity = m_o.get_int("batch_capacity");
  // W ranks x A bins per step: the plan depends on W * A only, so -np 1 --accumulate_bins 2 and
  // -np 2 train on the same global batches.
  pp.ranks = m_world * bins_per_rank;
  pp.seed = static_cast<std::uint64_t>(m_o.get_int("seed"));
  return sampling::BatchSampler(sizes, m_o.get_string("sampler"), pp);
}

template <class T>
ErrorSums Trainer<T>::validate() {
  ErrorSums sums;
  if (m_valid.empty()) {
    return sums;
  }
  const sampling::BatchSampler sampler = sampler_for(m_valid);
  for (const auto& b : sampler.batches(m_rank, 0)) {
    if (b.empty()) {
      if (m_world > 1) {
        step_reduction({});  // the count all-reduce the other ranks' batch_loss makes
      }
      continue;
    }
    std::vector<const data::Config*> cs;
    std::vector<const MaceStructure*> ss;
    for (auto g : b) {
      cs.push_back(&m_valid[static_cast<std::size_t>(g)]);
      ss.push_back(&m_valid_s[static_cast<std::size_t>(g)]);
    }
    batch_loss(cs, ss, false, sums);
  }
  reduce(sums);
  return sums;
}

template <class T>
void Trainer<T>::write_checkpoint_now(const std::string& csv) const {
  if (m_rank != 0) {
    return;
  }
  CheckpointState s;
  save_tensors(s, "model/", m_model->named_parameters());
  m_opt->save(s);
  save_torch_rng(s);
  s.texts["run/csv"] = csv;
  s.texts["run/options"] = m_o.to_yaml();
  s.texts["run/dtype"] = m_o.get_string("default_dtype");
  write_checkpoint(m_checkpoint_path, s);
}

template <class T>
void Trainer<T>::run() {
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
  m_log.line("train-potential: " + m_name + ", " + std::to_string(m_world) + " rank(s), " +
             m_o.get_string("default_dtype"));
  if (!set_by_user(m_o, "plot") && m_o.get_bool("plot")) {
    m_log.line("note: no learning-curve plot is written yet (--plot is not implemented)");
  }
  // LibTorch seeds its default generator non-deterministically; a run is a function of --seed
  // (and a restart restores the generator from the checkpoint).
  torch::manual_seed(static_cast<std::uint64_t>(m_o.get_int("seed")));
  read_data();
  m_model = std::make_unique<MaceTorchModel<T>>(initial_potential());
  m_train_s = structures_of(m_train);
  m_valid_s = structures_of(m_valid);
  m_loss = loss_config_from(m_o);
  m_virials = m_loss.kind != LossKind::kWeighted;
  // The learning-rate scaling counts the bins of a global step: ranks x accumulated bins.
  const int bins_per_step = m_world * static_cast<int>(m_o.get_int("accumulate_bins"));
  m_opt = std::make_unique<Optimization>(m_model->named_parameters(), optim_config_from(m_o, bins_per_step));
  if (m_world > 1) {
    broadcast_parameters(m_model->parameters(), m_comm);
  }

  std::string csv = "epoch,lr,train_loss,valid_loss,rmse_e_per_atom,mae_e_per_atom,rmse_f,mae_f\n";
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
    m_log.line("restart: " + *restart + " after epoch " + std::to_string(m_opt->epochs()) + ", step " +
               std::to_string(m_opt->steps()));
  }

  const std::int64_t accumulate = m_o.get_int("accumulate_bins");
  const sampling::BatchSampler sampler = sampler_for(m_train, accumulate);
  const std::int64_t max_epochs = m_o.get_int("max_num_epochs");
  const auto params = m_model->parameters();
  std::optional<OverlappedGradientReducer> reducer;
  if (m_world > 1 && m_o.get_bool("overlap_allreduce")) {
    reducer.emplace(params, m_comm);
  }

  for (std::int64_t epoch = m_opt->epochs(); epoch < max_epochs; ++epoch) {
    const double lr = m_opt->lr();
    ErrorSums train;
    // Step s of the plan is bins s*W*A .. s*W*A + W*A - 1; rank r takes r*A .. r*A + A - 1.
    const sampling::Plan plan = sampler.plan(static_cast<std::uint64_t>(epoch));
    std::vector<std::vector<std::int64_t>> mine;
    for (std::size_t step = 0; step < plan.steps(); ++step) {
      for (std::int64_t a = 0; a < accumulate; ++a) {
        mine.push_back(plan.bin(plan.bin_at(step, m_rank * accumulate + a)));
      }
    }
    Prefetcher<PreparedBin> feed(mine.size(), static_cast<std::size_t>(m_o.get_int("prefetch")),
                                 [&](std::size_t i) { return prepare(mine[i]); });
    for (std::size_t step = 0; step < plan.steps(); ++step) {
      std::vector<PreparedBin> bins;
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
          batch_loss(bins[a], true, train, red, 1.0 / static_cast<double>(accumulate)).backward();
        }
      }
      if (reducer) {
        reducer->finish();
      } else if (m_world > 1) {
        allreduce_mean_gradients(params, m_comm);
      }
      m_opt->step();
    }
    reduce(train);
    // Validation with the EMA weights when there is an EMA (as mace-torch evaluates).
    std::vector<torch::Tensor> saved;
    if (m_opt->ema() != nullptr) {
      torch::NoGradGuard ng;
      for (const auto& p : params) {
        saved.push_back(p.detach().clone());
      }
      m_opt->ema()->copy_to(params);
    }
    const ErrorSums v = validate();
    if (!saved.empty()) {
      torch::NoGradGuard ng;
      for (std::size_t k = 0; k < params.size(); ++k) {
        params[k].copy_(saved[k]);
      }
    }
    const double train_loss = train.n_loss > 0 ? train.loss / train.n_loss : NAN;
    std::optional<double> valid_loss;
    if (v.n_loss > 0) {
      valid_loss = v.loss / v.n_loss;
    }
    m_opt->end_epoch(valid_loss);
    const auto num = [](double x) { return std::isnan(x) ? std::string() : fmt("%.10e", x); };
    const double rmse_e = v.n_e > 0 ? std::sqrt(v.sq_e / v.n_e) : NAN;
    const double mae_e = v.n_e > 0 ? v.abs_e / v.n_e : NAN;
    const double rmse_f = v.n_f > 0 ? std::sqrt(v.sq_f / v.n_f) : NAN;
    const double mae_f = v.n_f > 0 ? v.abs_f / v.n_f : NAN;
    csv += std::to_string(epoch + 1) + "," + num(lr) + "," + num(train_loss) + "," +
           num(valid_loss.value_or(NAN)) + "," + num(rmse_e) + "," + num(mae_e) + "," + num(rmse_f) + "," +
           num(mae_f) + "\n";
    std::string line = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(max_epochs) + ": lr " +
                       fmt("%.3e", lr) + ", train loss " + fmt("%.6e", train_loss);
    if (valid_loss) {
      line += ", valid loss " + fmt("%.6e", *valid_loss) + ", RMSE E/atom " + fmt("%.2f", 1e3 * rmse_e) +
              " meV, MAE E/atom " + fmt("%.2f", 1e3 * mae_e) + " meV, RMSE F " + fmt("%.2f", 1e3 * rmse_f) +
              " meV/A, MAE F " + fmt("%.2f", 1e3 * mae_f) + " meV/A";
    } else {
      line += " (no validation set)";
    }
    m_log.line(line);
    if (m_rank == 0) {
      const std::string path = m_results_dir + "/" + m_name + "_train.csv";
      io::write_file_atomically(path, [&](std::ostream& out) { out << csv; });
    }
    write_checkpoint_now(csv);
  }

  // The final model: the EMA weights when there is an EMA.
  if (m_opt->ema() != nullptr) {
    m_opt->ema()->copy_to(params);
  }
  if (m_rank == 0) {
    const std::string path = m_model_dir + "/" + m_name + ".safetensors";
    m_model->save(path);
    m_log.line(std::string("exported ") + (m_opt->ema() != nullptr ? "EMA" : "final") + " model: " + path);
  }
}

}  // namespace

void check_implemented(const Options& o) {
  if (o.get_string("model") != "mace") {
    throw not_yet(o, "model", "--model " + o.get_string("model"));
  }
  if (o.get_string("device") != "cpu") {
    throw not_yet(o, "device", "training on --device " + o.get_string("device"));
  }
  if (o.has("test_file")) {
    throw not_yet(o, "test_file", "evaluating a test set");
  }
  if (o.get_bool("direct_heads")) {
    throw not_yet(o, "direct_heads", "direct force/stress heads (CHGNet)");
  }
  if (o.get_bool("compute_stress")) {
    throw not_yet(o, "compute_stress", "stress metrics without a stress loss");
  }
  if (o.get_int("checkpoint_interval") != 0) {
    throw not_yet(o, "checkpoint_interval", "checkpoints within an epoch");
  }
  if (o.get_bool("keep_checkpoints")) {
    throw not_yet(o, "keep_checkpoints", "keeping every epoch's checkpoint");
  }
  if (o.get_int("eval_interval") != 1) {
    throw not_yet(o, "eval_interval", "validation other than every epoch");
  }
  for (const char* n : {"log_level", "patience"}) {
    if (set_by_user(o, n)) {
      throw not_yet(o, n, std::string("--") + n);
    }
  }
  if (set_by_user(o, "plot") && o.get_bool("plot")) {
    throw not_yet(o, "plot", "the learning-curve plot");
  }
}

void run_training(const Options& options, MPI_Comm comm, std::ostream& log) {
  check_implemented(options);
  if (options.get_string("default_dtype") == "float32") {
    Trainer<float>(options, comm, log).run();
  } else {
    Trainer<double>(options, comm, log).run();
  }
}

}  // namespace fastmlip::trainer::train

// SPDX-License-Identifier: MIT
#include "train/evaluate.hpp"

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "data/mptrj.hpp"
#include "data/store.hpp"
#include "io/atomic_file.hpp"
#include "io/extxyz.hpp"
#include "io/potential_file.hpp"

namespace fastmlip::trainer::train {
namespace {

/// The options of `train-potential eval`: name -> (default, help). An empty default is "none".
struct EvalFlag {
  std::string name, def, help;
};
const std::vector<EvalFlag>& eval_flags() {
  static const std::vector<EvalFlag> flags = {
      {"model", "",
       "Potential file to evaluate (MACE or CHGNet, e.g. WORK_DIR/NAME.safetensors). Required."},
      {"data", "", "Labelled extended XYZ file, or MPtrj-style JSON (a name ending in .json). Required."},
      {"energy_key", "REF_energy", "Info key of the reference energies (eV)."},
      {"forces_key", "REF_forces", "Per-atom key of the reference forces (eV/A)."},
      {"stress_key", "REF_stress", "Info key of the reference stresses (eV/A^3, ASE sign)."},
      {"virials_key", "REF_virials", "Info key of the reference virials (eV)."},
      {"default_dtype", "float64", "float64 or float32: the precision the model runs in."},
      {"batch_capacity", "3072", "Atoms per forward pass."},
      {"output", "", "Write the metrics as JSON to this file."},
      {"write_predictions", "",
       "Write the data's frames with the predictions added (fastmlip_energy, fastmlip_forces, and "
       "fastmlip_stress/fastmlip_virials when computed) to this extended XYZ file."},
  };
  return flags;
}

std::map<std::string, std::string> parse_eval_flags(const std::vector<std::string>& args) {
  std::map<std::string, std::string> v;
  for (const auto& f : eval_flags()) {
    v[f.name] = f.def;
  }
  for (std::size_t k = 0; k < args.size(); ++k) {
    const std::string& a = args[k];
    if (a.rfind("--", 0) != 0) {
      throw InputError("eval: unexpected argument '" + a +
                       "' (options are --KEY VALUE; see train-potential eval --help)");
    }
    std::string key = a.substr(2), value;
    const auto eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      if (k + 1 >= args.size()) {
        throw InputError("eval: option '--" + key + "' needs a value");
      }
      value = args[++k];
    }
    if (v.count(key) == 0) {
      throw InputError("eval: unknown option '--" + key + "' (see train-potential eval --help)");
    }
    v[key] = value;
  }
  for (const char* required : {"model", "data"}) {
    if (v[required].empty()) {
      throw InputError(std::string("eval: --") + required + " is required (see train-potential eval --help)");
    }
  }
  if (v["default_dtype"] != "float64" && v["default_dtype"] != "float32") {
    throw InputError("eval: option '--default_dtype': value '" + v["default_dtype"] +
                     "' is not float64 or float32");
  }
  return v;
}

std::int64_t positive_int(const std::string& name, const std::string& text) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < 1) {
    throw InputError("eval: option '--" + name + "': value '" + text + "' must be a positive integer");
  }
  return n;
}

std::string numbers_text(const double* v, int n) {
  std::string s;
  char buf[32];
  for (int k = 0; k < n; ++k) {
    std::snprintf(buf, sizeof buf, "%.17g", v[k]);
    s += (k > 0 ? " " : "") + std::string(buf);
  }
  return s;
}

template <class F>
int eval_family(const io::PotentialFile& file, const std::map<std::string, std::string>& flags,
                std::ostream& out) {
  const std::string model_path = flags.at("model"), data_path = flags.at("data");
  typename F::Model model(file);
  const bool predictions = !flags.at("write_predictions").empty();
  if (predictions && data::is_preprocessed_dataset(data_path)) {
    throw InputError("eval: --write_predictions writes the data's frames back as extended XYZ; " + data_path +
                     " is a preprocessed dataset: evaluate the extended XYZ file it was made from");
  }
  if (predictions && std::filesystem::path(data_path).extension() == ".json") {
    throw InputError("eval: --write_predictions writes the data's frames back as extended XYZ, and " +
                     data_path + " is JSON; evaluate an extended XYZ file to get predictions");
  }
  data::ReadOptions ro;
  ro.keys = {flags.at("energy_key"), flags.at("forces_key"), flags.at("stress_key"), flags.at("virials_key")};
  // Evaluation needs no label: each metric counts the frames that have it.
  ro.require_energy = false;
  ro.require_forces = false;
  // A preprocessed dataset: its labels must be the keys asked for; which frames it kept is its own.
  const data::OpenedData ds = data::open_labelled_data(data_path, ro, data::StoreCheck::kLabelKeys);
  const data::GraphSet& configs = ds.graphs;
  EvalOptions eo;
  eo.batch_capacity = positive_int("batch_capacity", flags.at("batch_capacity"));
  eo.virials = ds.meta.any_stress_or_virials || (predictions && ds.meta.any_cell);
  eo.keep_predictions = predictions;
  const EvalResult r = evaluate_model<F>(model, configs, eo, MPI_COMM_SELF);
  out << "eval: " << model_path << " on " << data_path << " (" << configs.size() << " configurations)\n"
      << metrics_table(r.metrics) << std::flush;
  if (!flags.at("output").empty()) {
    nlohmann::json j = metrics_json(r.metrics);
    j["model"] = model_path;
    j["data"] = data_path;
    io::write_file_atomically(flags.at("output"), [&](std::ostream& o) { o << j.dump(2) << '\n'; });
    out << "eval: metrics written to " << flags.at("output") << '\n';
  }
  if (predictions) {
    std::vector<io::Frame> frames = io::read_extxyz(data_path);
    std::vector<io::Frame> written;
    for (std::size_t k = 0; k < configs.size(); ++k) {
      const data::Config c = configs.load(k);
      io::Frame f = frames.at(static_cast<std::size_t>(c.frame - 1));
      const ConfigPrediction& p = r.predictions[k];
      f.set_info("fastmlip_energy", numbers_text(&p.energy, 1));
      f.set_array("fastmlip_forces", 3, p.forces);
      if (p.virials) {
        f.set_info("fastmlip_virials", numbers_text(p.virials->data(), 9));
        if (c.cell) {
          const auto& m = *c.cell;
          const double volume =
              std::abs(m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                       m[2] * (m[3] * m[7] - m[4] * m[6]));
          if (volume > 0) {
            std::array<double, 9> s{};
            for (int i = 0; i < 9; ++i) {
              s[i] = -(*p.virials)[i] / volume;
            }
            f.set_info("fastmlip_stress", numbers_text(s.data(), 9));
          }
        }
      }
      written.push_back(std::move(f));
    }
    io::write_extxyz(flags.at("write_predictions"), written);
    out << "eval: predictions written to " << flags.at("write_predictions") << '\n';
  }
  return 0;
}

template <class T>
int eval_with(const std::map<std::string, std::string>& flags, std::ostream& out) {
  const std::string& model_path = flags.at("model");
  const io::PotentialFile file = io::read_potential_file(model_path);
  if (!file.checksummed) {
    out << "eval: note: " << model_path << " has no tensor checksums (written before fastmlip recorded them), so "
        << "damage to its weights cannot be detected; 'fastmlip-potential seal' adds them\n";
  }
  if (file.model_kind() == "mace") {
    return eval_family<MaceFamily<T>>(file, flags, out);
  }
  if (file.model_kind() == "chgnet") {
    return eval_family<ChgnetFamily<T>>(file, flags, out);
  }
  throw UnsupportedError("eval: " + model_path + " is a '" + file.model_kind() +
                         "' potential; train-potential evaluates MACE and CHGNet potentials");
}

}  // namespace

void accumulate_batch(ErrorAccumulator& acc, const std::vector<const data::Config*>& configs,
                      const MaceOutput& out, std::vector<ConfigPrediction>* keep,
                      const torch::Tensor& magmoms) {
  torch::NoGradGuard ng;
  const auto e = out.energy.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const auto f = out.forces.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  torch::Tensor v;
  if (out.virials.defined()) {
    v = out.virials.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  }
  torch::Tensor m;
  if (magmoms.defined()) {
    m = magmoms.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  }
  std::size_t atom = 0;
  for (std::size_t g = 0; g < configs.size(); ++g) {
    const data::Config& c = *configs[g];
    Prediction p;
    p.energy = e.data_ptr<double>()[g];
    p.forces = f.data_ptr<double>() + 3 * atom;
    if (v.defined()) {
      p.virials = v.data_ptr<double>() + 9 * g;
    }
    if (m.defined()) {
      p.magmoms = m.data_ptr<double>() + atom;
    }
    acc.add(c, p);
    if (keep != nullptr) {
      ConfigPrediction k;
      k.energy = p.energy;
      k.forces.assign(p.forces, p.forces + 3 * c.natoms());
      if (p.virials != nullptr) {
        k.virials.emplace();
        std::copy(p.virials, p.virials + 9, k.virials->begin());
      }
      keep->push_back(std::move(k));
    }
    atom += c.natoms();
  }
}

template <class F>
EvalResult evaluate_model(typename F::Model& model, const data::GraphSet& configs, const EvalOptions& options,
                          MPI_Comm comm) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  if (options.keep_predictions && world > 1) {
    throw UnsupportedError("evaluate_model: keeping predictions needs a single rank");
  }
  EvalResult r{ErrorAccumulator(configs.config_types()), {}};
  std::size_t begin = 0;
  for (long batch = 0; begin < configs.size(); ++batch) {
    // Consecutive frames up to the capacity; a frame larger than the capacity goes alone. The
    // sizes come from memory or the index: a rank reads only the frames of its own batches.
    std::size_t end = begin + 1;
    std::int64_t atoms = static_cast<std::int64_t>(configs.natoms(begin));
    while (end < configs.size() &&
           atoms + static_cast<std::int64_t>(configs.natoms(end)) <= options.batch_capacity) {
      atoms += static_cast<std::int64_t>(configs.natoms(end));
      ++end;
    }
    if (batch % world == rank) {
      std::vector<data::Config> cs;
      for (std::size_t k = begin; k < end; ++k) {
        cs.push_back(configs.load(k));
      }
      std::vector<const data::Config*> ptrs;
      for (const auto& c : cs) {
        ptrs.push_back(&c);
      }
      const FamilyOutput out =
          F::forward(model, F::batch(model, structures_of<F>(model, cs)), options.virials, false);
      accumulate_batch(r.metrics, ptrs, out.out, options.keep_predictions ? &r.predictions : nullptr,
                       out.magmoms);
    }
    begin = end;
  }
  r.metrics.reduce(comm);
  return r;
}

std::string eval_help() {
  std::ostringstream h;
  h << "usage: train-potential eval --model FILE.safetensors --data FILE.xyz [options]\n\n"
       "Evaluates a MACE or CHGNet potential file on a labelled extended XYZ file (or MPtrj-style\n"
       "JSON) and prints RMSE and MAE of the energy per atom, forces, and (when the data has them)\n"
       "stress, virials per atom and magnetic moments, overall and per config_type (meV and mu_B).\n"
       "Frames need no label; each metric counts the frames that have its label.\n\noptions:\n";
  for (const auto& f : eval_flags()) {
    h << "  --" << f.name << (f.def.empty() ? std::string() : " (default " + f.def + ")") << "\n      "
      << f.help << "\n";
  }
  h << "  --help\n      Print this text.\n";
  return h.str();
}

int run_eval_command(const std::vector<std::string>& args, std::ostream& out) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      out << eval_help();
      return 0;
    }
  }
  const auto flags = parse_eval_flags(args);
  return flags.at("default_dtype") == "float32" ? eval_with<float>(flags, out)
                                                : eval_with<double>(flags, out);
}

template EvalResult evaluate_model<MaceFamily<float>>(MaceTorchModel<float>&, const data::GraphSet&,
                                                      const EvalOptions&, MPI_Comm);
template EvalResult evaluate_model<MaceFamily<double>>(MaceTorchModel<double>&, const data::GraphSet&,
                                                       const EvalOptions&, MPI_Comm);
template EvalResult evaluate_model<ChgnetFamily<float>>(ChgnetTorchModel<float>&, const data::GraphSet&,
                                                        const EvalOptions&, MPI_Comm);
template EvalResult evaluate_model<ChgnetFamily<double>>(ChgnetTorchModel<double>&, const data::GraphSet&,
                                                         const EvalOptions&, MPI_Comm);

}  // namespace fastmlip::trainer::train

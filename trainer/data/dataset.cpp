// SPDX-License-Identifier: MIT
#include "data/dataset.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <numeric>
#include <sstream>

#include "core/elements.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "io/extxyz.hpp"
#include "options.hpp"

namespace fastmlip::trainer::data {
namespace {

/// Stream id of the train/validation split in stream_seed (core/rng.hpp).
constexpr std::uint64_t kSplitStream = 0x5B117;

std::string where(const io::Frame& f) {
  return f.source + ":" + std::to_string(f.line) + ": frame " + std::to_string(f.index);
}

bool number(const std::string& s, double& v) {
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

std::vector<std::string> split_ws(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string t;
  while (in >> t) {
    out.push_back(t);
  }
  return out;
}

/// Reads an info value of `count` numbers (count 0: 6 or 9); throws naming frame and key.
std::vector<double> info_numbers(const io::Frame& f, const std::string& key, const std::string& value,
                                 const char* what, std::size_t count) {
  std::vector<double> out;
  for (const auto& tok : split_ws(value)) {
    double v;
    if (!number(tok, v)) {
      throw FileError(f.source, f.line,
                      "frame " + std::to_string(f.index) + ": " + what + " '" + key + "' value '" + value +
                          "' is not numeric");
    }
    out.push_back(v);
  }
  const bool ok = count ? out.size() == count : (out.size() == 6 || out.size() == 9);
  if (!ok) {
    throw FileError(
        f.source, f.line,
        "frame " + std::to_string(f.index) + ": " + what + " '" + key + "' has " +
            std::to_string(out.size()) + " values, expected " +
            (count ? std::to_string(count) : std::string("9 (3x3) or 6 (Voigt xx yy zz yz xz xy)")));
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    if (!std::isfinite(out[k])) {
      throw NumericalError(where(f) + ": " + what + " '" + key + "' is not finite (" + value + ")");
    }
  }
  return out;
}

/// 9 row-major or 6 Voigt (xx yy zz yz xz xy) values as a row-major 3x3 (voigt_to_matrix).
std::array<double, 9> to_matrix(const std::vector<double>& v) {
  if (v.size() == 9) {
    return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
  }
  return {v[0], v[5], v[4], v[5], v[1], v[3], v[4], v[3], v[2]};
}

double info_weight(const io::Frame& f, const std::string& key) {
  const std::string* v = f.find_info(key);
  if (v == nullptr) {
    return 1.0;
  }
  return info_numbers(f, key, *v, "weight", 1)[0];
}

}  // namespace

std::string Config::where() const {
  if (!id.empty()) {
    return source + " (frame " + std::to_string(frame) + ", " + id + ")";  // a JSON frame has no line
  }
  return source + ":" + std::to_string(line) + " (frame " + std::to_string(frame) + ")";
}

namespace {

/// The required labels a frame lacks, from its comment line and column layout alone.
std::vector<std::string> missing_labels(const io::Frame& f, const ReadOptions& opt) {
  std::vector<std::string> missing;
  if (opt.require_energy && f.find_info(opt.keys.energy) == nullptr) {
    missing.push_back(opt.keys.energy);
  }
  if (opt.require_forces && f.find_array(opt.keys.forces) == nullptr) {
    missing.push_back(opt.keys.forces);
  }
  if (opt.require_stress && f.find_info(opt.keys.stress) == nullptr &&
      f.find_info(opt.keys.virials) == nullptr) {
    missing.push_back(opt.keys.stress + "' or '" + opt.keys.virials);
  }
  return missing;
}

std::string config_type_of(const io::Frame& f) {
  const std::string* ct = f.find_info("config_type");
  return ct != nullptr ? *ct : "Default";
}

/// A frame that has every required label as a Config: its labels checked, its weights.
Config config_of(const io::Frame& f, const ReadOptions& opt) {
  Config c;
  c.source = f.source;
  c.line = f.line;
  c.frame = f.index;
  c.positions = f.positions;
  c.cell = f.cell;
  c.pbc = f.pbc;
  c.atomic_numbers.reserve(f.natoms());
  for (const auto& s : f.species) {
    c.atomic_numbers.push_back(atomic_number(s));
  }
  c.config_type = config_type_of(f);
  // mace-torch's total_charge / total_spin info keys (its defaults): what a model with
  // embedding_specs embeds per structure (MACE-OMOL).
  if (const std::string* q = f.find_info("total_charge")) {
    c.total_charge = info_numbers(f, "total_charge", *q, "total charge", 1)[0];
  }
  if (const std::string* s = f.find_info("total_spin")) {
    c.total_spin = info_numbers(f, "total_spin", *s, "total spin", 1)[0];
  }
  if (const std::string* e = f.find_info(opt.keys.energy)) {
    c.energy = info_numbers(f, opt.keys.energy, *e, "energy", 1)[0];
  }
  if (const io::AtomColumn* col = f.find_array(opt.keys.forces)) {
    if (col->type != 'R' || col->width != 3) {
      throw FileError(f.source, f.line,
                      "frame " + std::to_string(f.index) + ": forces column '" + opt.keys.forces + "' is " +
                          col->type + ":" + std::to_string(col->width) + ", expected R:3");
    }
    for (std::size_t k = 0; k < col->numbers.size(); ++k) {
      if (!std::isfinite(col->numbers[k])) {
        throw NumericalError(where(f) + ": forces '" + opt.keys.forces + "' of atom " +
                             std::to_string(k / 3 + 1) + " (" + f.species[k / 3] + ") are not finite");
      }
    }
    c.forces = col->numbers;
  }
  if (const std::string* s = f.find_info(opt.keys.stress)) {
    c.stress = to_matrix(info_numbers(f, opt.keys.stress, *s, "stress", 0));
  }
  if (const std::string* s = f.find_info(opt.keys.virials)) {
    c.virials = to_matrix(info_numbers(f, opt.keys.virials, *s, "virials", 0));
  }
  // Weights, as config_from_atoms.
  double type_weight = 1.0;
  for (const auto& [type, w] : opt.config_type_weights) {
    if (type == c.config_type) {
      type_weight = w;
    }
  }
  c.weight = info_weight(f, "config_weight") * type_weight;
  c.energy_weight = c.energy ? info_weight(f, "config_energy_weight") : 0.0;
  c.forces_weight = !c.forces.empty() ? info_weight(f, "config_forces_weight") : 0.0;
  c.stress_weight = c.stress ? info_weight(f, "config_stress_weight") : 0.0;
  c.virials_weight = c.virials ? info_weight(f, "config_virials_weight") : 0.0;
  return c;
}

}  // namespace

std::size_t scan_dataset(std::istream& in, const std::string& source, const ReadOptions& opt, Dataset& ds,
                         const std::function<bool(std::size_t)>& wanted,
                         const std::function<void(std::size_t, Config&&)>& take) {
  io::ExtxyzReader reader(in, source);
  io::Frame f;
  std::size_t total = 0, graphs = 0;
  // What the comment line says of the frame being read: whether it is kept, and if so whether
  // its atoms are parsed. A single atom always is (an IsolatedAtom frame's element is on its
  // atom line, and every caller needs those energies).
  std::vector<std::string> missing;
  bool isolated = false, graph = false;
  const auto decide = [&](const io::Frame& h, std::size_t natoms) {
    missing = missing_labels(h, opt);
    isolated =
        missing.empty() && opt.extract_isolated_atoms && natoms == 1 && config_type_of(h) == "IsolatedAtom";
    graph = missing.empty() && (!isolated || opt.keep_isolated_atoms);
    return natoms == 1 || (graph && wanted(graphs));
  };
  while (reader.next(f, decide)) {
    ++total;
    if (!missing.empty()) {
      if (!opt.allow_missing) {
        std::string keys;
        for (const auto& k : missing) {
          keys += (keys.empty() ? "'" : ", '") + k + "'";
        }
        throw FileError(f.source, f.line,
                        "frame " + std::to_string(f.index) + ": no " + keys +
                            " label (check --energy_key/--forces_key/--stress_key/--virials_key, or set "
                            "--allow_missing to skip such frames)");
      }
      ++ds.skipped;
      for (const auto& k : missing) {
        ++ds.missing_by_key[k];
      }
      continue;
    }
    const std::size_t g = graphs;
    graphs += graph ? 1 : 0;
    if (!isolated && !wanted(g)) {
      continue;  // another reader's frame: its atoms were not parsed
    }
    Config c = config_of(f, opt);
    if (isolated) {
      if (!c.energy) {
        throw FileError(
            f.source, f.line,
            "frame " + std::to_string(f.index) + ": IsolatedAtom frame has no '" + opt.keys.energy + "'");
      }
      ds.isolated_atom_energies[c.atomic_numbers[0]] = *c.energy;
      if (!graph || !wanted(g)) {
        continue;
      }
    }
    take(g, std::move(c));
  }
  set_skip_warning(ds, source, total);
  return graphs;
}

Dataset read_dataset(std::istream& in, const std::string& source, const ReadOptions& opt) {
  Dataset ds;
  scan_dataset(
      in, source, opt, ds, [](std::size_t) { return true; },
      [&](std::size_t, Config&& c) { ds.configs.push_back(std::move(c)); });
  return ds;
}

void set_skip_warning(Dataset& ds, const std::string& source, std::size_t total) {
  if (ds.skipped == 0) {
    return;
  }
  ds.skip_warning = source + ": skipped " + std::to_string(ds.skipped) + " of " + std::to_string(total) +
                    " frames lacking a required label (";
  bool first = true;
  for (const auto& [k, n] : ds.missing_by_key) {
    ds.skip_warning += (first ? "'" : ", '") + k + "': " + std::to_string(n);
    first = false;
  }
  ds.skip_warning += ")";
}

Dataset read_dataset(const std::string& path, const ReadOptions& options) {
  std::ifstream in(path);
  if (!in) {
    throw FileError(path, 0, "cannot open the dataset");
  }
  return read_dataset(in, path, options);
}

ReadOptions read_options_from(const Options& o) {
  ReadOptions r;
  r.keys.energy = o.get_string("energy_key");
  r.keys.forces = o.get_string("forces_key");
  r.keys.stress = o.get_string("stress_key");
  r.keys.virials = o.get_string("virials_key");
  r.allow_missing = o.get_bool("allow_missing");
  r.config_type_weights = o.get_dict("config_type_weights");
  r.keep_isolated_atoms = o.get_bool("keep_isolated_atoms");
  r.require_energy = o.get_float("energy_weight") > 0.0;
  r.require_forces = o.get_float("forces_weight") > 0.0;
  const std::string loss = o.get_string("loss");
  r.require_stress = loss == "stress" || loss == "virials";
  return r;
}

Split split_train_valid(std::size_t n, double valid_fraction, std::uint64_t seed) {
  if (!(valid_fraction > 0.0 && valid_fraction < 1.0)) {
    throw InputError("split_train_valid: valid_fraction must be in (0, 1), got " +
                     std::to_string(valid_fraction));
  }
  // mace-torch: train_size = size - int(valid_fraction * size); int() truncates as the cast does.
  const auto n_valid = static_cast<std::size_t>(valid_fraction * static_cast<double>(n));
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  Rng rng(stream_seed(seed, 0, kSplitStream));
  rng.shuffle(perm.begin(), perm.end());
  Split s;
  s.train.assign(perm.begin(), perm.end() - static_cast<std::ptrdiff_t>(n_valid));
  s.valid.assign(perm.end() - static_cast<std::ptrdiff_t>(n_valid), perm.end());
  return s;
}

}  // namespace fastmlip::trainer::data

// SPDX-License-Identifier: MIT
#include "data/mptrj.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/elements.hpp"
#include "core/error.hpp"
#include "data/store.hpp"

namespace fastmlip::trainer::data {
namespace {

using Json = nlohmann::ordered_json;  // keeps the file's order of mp-ids and frames

/// The frame being read, for messages: "MPtrj.json (frame 3, mp-1234-0-1)".
struct Frame {
  const std::string& source;
  long index;
  const std::string& id;
  std::string where() const { return source + " (frame " + std::to_string(index) + ", " + id + ")"; }
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError(source, 0, "frame " + std::to_string(index) + " (" + id + "): " + what);
  }
};

double number(const Frame& f, const Json& v, const std::string& what) {
  if (!v.is_number()) {
    f.fail(what + " is " + std::string(v.type_name()) + ", not a number");
  }
  const double x = v.get<double>();
  if (!std::isfinite(x)) {
    throw NumericalError(f.where() + ": " + what + " is not finite");
  }
  return x;
}

/// A list of `n` numbers (n < 0: any length).
std::vector<double> numbers(const Frame& f, const Json& v, long n, const std::string& what) {
  if (!v.is_array() || (n >= 0 && static_cast<long>(v.size()) != n)) {
    f.fail(what + " must be a list of " + (n >= 0 ? std::to_string(n) + " " : std::string()) + "numbers");
  }
  std::vector<double> out;
  for (std::size_t k = 0; k < v.size(); ++k) {
    out.push_back(number(f, v[k], what + "[" + std::to_string(k) + "]"));
  }
  return out;
}

/// An [n][3] list, flattened.
std::vector<double> rows3(const Frame& f, const Json& v, std::size_t n, const std::string& what) {
  if (!v.is_array() || v.size() != n) {
    f.fail(what + " must be a list of " + std::to_string(n) + " rows of 3 numbers");
  }
  std::vector<double> out;
  for (std::size_t i = 0; i < n; ++i) {
    const auto row = numbers(f, v[i], 3, what + "[" + std::to_string(i) + "]");
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

const Json& member(const Frame& f, const Json& obj, const std::string& key, const std::string& what) {
  if (!obj.is_object() || !obj.contains(key)) {
    f.fail(what + " has no '" + key + "'");
  }
  return obj.at(key);
}

/// The pymatgen Structure dict into c's atoms, cell and pbc.
void read_structure(const Frame& f, const Json& s, Config& c) {
  const Json& lattice = member(f, s, "lattice", "'structure'");
  const auto m = rows3(f, member(f, lattice, "matrix", "'structure.lattice'"), 3, "structure.lattice.matrix");
  std::array<double, 9> cell{};
  std::copy(m.begin(), m.end(), cell.begin());
  c.cell = cell;
  c.pbc = {true, true, true};
  if (lattice.contains("pbc")) {
    const Json& p = lattice.at("pbc");
    if (!p.is_array() || p.size() != 3 || !p[0].is_boolean() || !p[1].is_boolean() || !p[2].is_boolean()) {
      f.fail("structure.lattice.pbc must be a list of 3 booleans");
    }
    c.pbc = {p[0].get<bool>(), p[1].get<bool>(), p[2].get<bool>()};
  }
  const Json& sites = member(f, s, "sites", "'structure'");
  if (!sites.is_array() || sites.empty()) {
    f.fail("structure.sites must be a non-empty list");
  }
  for (std::size_t i = 0; i < sites.size(); ++i) {
    const std::string at = "structure.sites[" + std::to_string(i) + "]";
    const Json& site = sites[i];
    const Json& species = member(f, site, "species", "'" + at + "'");
    if (!species.is_array() || species.size() != 1) {
      f.fail(at + ".species must hold one element (a disordered site cannot be evaluated)");
    }
    const Json& el = member(f, species[0], "element", "'" + at + ".species[0]'");
    const int z = el.is_string() ? atomic_number(el.get<std::string>()) : 0;
    if (z == 0) {
      f.fail(at + ".species[0].element is " + el.dump() + ", not an element symbol");
    }
    c.atomic_numbers.push_back(z);
    if (site.contains("xyz")) {
      const auto x = numbers(f, site.at("xyz"), 3, at + ".xyz");
      c.positions.insert(c.positions.end(), x.begin(), x.end());
    } else if (site.contains("abc")) {
      const auto a = numbers(f, site.at("abc"), 3, at + ".abc");
      for (int k = 0; k < 3; ++k) {
        c.positions.push_back(a[0] * m[k] + a[1] * m[3 + k] + a[2] * m[6 + k]);
      }
    } else {
      f.fail(at + " has neither 'xyz' nor 'abc'");
    }
  }
}

bool present(const Json& frame, const std::string& key) {
  return frame.contains(key) && !frame.at(key).is_null();
}

}  // namespace

std::size_t scan_mptrj(std::istream& in, const std::string& source, const MptrjReadOptions& opt, Dataset& ds,
                       const std::function<bool(std::size_t)>& wanted,
                       const std::function<void(std::size_t, Config&&)>& take) {
  long index = 0;
  std::size_t graphs = 0;
  std::string mp_id, id;
  // One frame object, as the parser finishes it: its labels and, when wanted, the configuration.
  const auto frame_done = [&](const Json& frame) {
    const Frame f{source, ++index, id};
    // Required labels first: a frame lacking one is an error or (allow_missing) skipped.
    std::vector<std::string> missing;
    const std::pair<bool, const std::string*> required[] = {{opt.require_energy, &opt.energy_key},
                                                            {opt.require_forces, &opt.forces_key},
                                                            {opt.require_stress, &opt.stress_key},
                                                            {opt.require_magmoms, &opt.magmom_key}};
    for (const auto& [need, key] : required) {
      if (need && !present(frame, *key)) {
        missing.push_back(*key);
      }
    }
    if (!missing.empty()) {
      if (!opt.allow_missing) {
        f.fail("no '" + missing[0] + "' (a required label; allow_missing skips such frames)");
      }
      ++ds.skipped;
      for (const auto& k : missing) {
        ++ds.missing_by_key[k];
      }
      return;
    }
    const std::size_t g = graphs++;
    if (!wanted(g)) {
      return;  // another reader's frame
    }
    Config c;
    c.source = source;
    c.frame = index;
    c.id = id;
    read_structure(f, member(f, frame, "structure", "the frame"), c);
    const std::size_t n = c.natoms();
    if (present(frame, opt.energy_key)) {
      const double e = number(f, frame.at(opt.energy_key), "'" + opt.energy_key + "'");
      const std::string suffix = "_per_atom";
      const bool per_atom =
          opt.energy_key.size() > suffix.size() &&
          opt.energy_key.compare(opt.energy_key.size() - suffix.size(), suffix.size(), suffix) == 0;
      c.energy = per_atom ? e * static_cast<double>(n) : e;
    }
    if (present(frame, opt.forces_key)) {
      c.forces = rows3(f, frame.at(opt.forces_key), n, "'" + opt.forces_key + "'");
    }
    if (present(frame, opt.stress_key)) {
      const auto s = rows3(f, frame.at(opt.stress_key), 3, "'" + opt.stress_key + "'");
      std::array<double, 9> stress{};
      for (int k = 0; k < 9; ++k) {
        stress[k] = -s[k] / kKbarPerEvPerA3;  // VASP kBar, compressive positive -> eV/A^3, tensile positive
      }
      c.stress = stress;
    }
    if (present(frame, opt.magmom_key)) {
      c.magmoms = numbers(f, frame.at(opt.magmom_key), static_cast<long>(n), "'" + opt.magmom_key + "'");
      for (double& m : c.magmoms) {
        m = std::abs(m);
      }
    }
    take(g, std::move(c));
  };
  // The parser's callback sees each frame object whole when it ends (depth 2) and discards it,
  // so the document is read one frame at a time, never held.
  using Event = Json::parse_event_t;
  const Json::parser_callback_t on = [&](int depth, Event event, Json& parsed) {
    if (depth == 0 && (event == Event::array_start || (event == Event::value && !parsed.is_object()))) {
      throw FileError(source, 0, "the top level must be an object of mp-ids (the MPtrj layout)");
    }
    if (event == Event::key && depth == 1) {
      mp_id = parsed.get<std::string>();
    } else if (event == Event::key && depth == 2) {
      id = parsed.get<std::string>();
    } else if (depth == 1 && (event == Event::array_start || event == Event::value)) {
      throw FileError(source, 0, "'" + mp_id + "' must be an object of frames (the MPtrj layout)");
    } else if (depth == 2 && (event == Event::array_start || event == Event::value)) {
      const Frame f{source, index + 1, id};
      f.fail("the frame must be an object (the MPtrj layout)");
    } else if (depth == 2 && event == Event::object_end) {
      frame_done(parsed);
      return false;
    } else if (depth == 1 && event == Event::object_end) {
      return false;  // an mp-id's frames are done
    }
    return true;
  };
  try {
    const Json rest = Json::parse(in, on);
    if (!rest.is_object()) {
      throw FileError(source, 0, "the top level must be an object of mp-ids (the MPtrj layout)");
    }
  } catch (const Json::exception& e) {
    // parse_error for bad syntax, out_of_range for a number beyond double's range ("1e400").
    throw FileError(source, 0,
                    std::string("not valid JSON: ") + e.what() + " (numbers must be finite doubles)");
  }
  set_skip_warning(ds, source, static_cast<std::size_t>(index));
  return graphs;
}

Dataset read_mptrj(std::istream& in, const std::string& source, const MptrjReadOptions& opt) {
  Dataset ds;
  scan_mptrj(
      in, source, opt, ds, [](std::size_t) { return true; },
      [&](std::size_t, Config&& c) { ds.configs.push_back(std::move(c)); });
  return ds;
}

Dataset read_mptrj(const std::string& path, const MptrjReadOptions& options) {
  std::ifstream in(path);
  if (!in) {
    throw FileError(path, 0, "cannot open the dataset");
  }
  return read_mptrj(in, path, options);
}

namespace {

MptrjReadOptions mptrj_options(const ReadOptions& options) {
  MptrjReadOptions mo;
  mo.require_energy = options.require_energy;
  mo.require_forces = options.require_forces;
  mo.require_stress = options.require_stress;
  mo.allow_missing = options.allow_missing;
  return mo;
}

bool is_json(const std::string& path) { return std::filesystem::path(path).extension() == ".json"; }

}  // namespace

Dataset read_labelled_file(const std::string& path, const ReadOptions& options) {
  if (is_preprocessed_dataset(path)) {
    return read_preprocessed(path, options);
  }
  return is_json(path) ? read_mptrj(path, mptrj_options(options)) : read_dataset(path, options);
}

std::size_t scan_labelled_file(const std::string& path, const ReadOptions& options, Dataset& ds,
                               const std::function<bool(std::size_t)>& wanted,
                               const std::function<void(std::size_t, Config&&)>& take) {
  if (!is_json(path)) {
    std::ifstream in(path);
    if (!in) {
      throw FileError(path, 0, "cannot open the dataset");
    }
    return scan_dataset(in, path, options, ds, wanted, take);
  }
  std::ifstream in(path);
  if (!in) {
    throw FileError(path, 0, "cannot open the dataset");
  }
  return scan_mptrj(in, path, mptrj_options(options), ds, wanted, take);
}

}  // namespace fastmlip::trainer::data

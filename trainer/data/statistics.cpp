// SPDX-License-Identifier: MIT
#include "data/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/elements.hpp"
#include "core/error.hpp"
#include "graph/neighbor_list.hpp"
#include "options.hpp"

namespace fastmlip::trainer::data {
namespace {

/// Minimum-norm least-squares solution of A x = b (A: rows x cols, row-major), with singular
/// values below eps * max(rows, cols) * s_max treated as zero, as np.linalg.lstsq(rcond=None).
/// A Householder QR first reduces a tall A to its cols x cols triangle (so the cost is one pass
/// over the data), then a one-sided Jacobi SVD of that triangle gives singular values to full
/// relative accuracy, which a normal-equations solve (squaring the condition number) would not.
std::vector<double> lstsq_min_norm(std::vector<double> a, std::vector<double> b, std::size_t rows,
                                   std::size_t cols) {
  const double eps = std::numeric_limits<double>::epsilon();
  std::size_t r = rows;
  if (rows > cols) {
    for (std::size_t k = 0; k < cols; ++k) {
      double norm = 0.0;
      for (std::size_t i = k; i < rows; ++i) {
        norm += a[i * cols + k] * a[i * cols + k];
      }
      norm = std::sqrt(norm);
      if (norm == 0.0) {
        continue;
      }
      const double alpha = a[k * cols + k] > 0 ? -norm : norm;
      std::vector<double> v(rows - k);
      for (std::size_t i = k; i < rows; ++i) {
        v[i - k] = a[i * cols + k];
      }
      v[0] -= alpha;
      double vv = 0.0;
      for (double x : v) {
        vv += x * x;
      }
      if (vv == 0.0) {
        continue;
      }
      for (std::size_t j = k; j < cols; ++j) {
        double d = 0.0;
        for (std::size_t i = k; i < rows; ++i) {
          d += v[i - k] * a[i * cols + j];
        }
        d *= 2.0 / vv;
        for (std::size_t i = k; i < rows; ++i) {
          a[i * cols + j] -= d * v[i - k];
        }
      }
      double d = 0.0;
      for (std::size_t i = k; i < rows; ++i) {
        d += v[i - k] * b[i];
      }
      d *= 2.0 / vv;
      for (std::size_t i = k; i < rows; ++i) {
        b[i] -= d * v[i - k];
      }
    }
    r = cols;  // the triangle; rows below it hold only the residual
  }
  // One-sided Jacobi on the columns of the r x cols matrix M: M V = U S.
  std::vector<double> v(cols * cols, 0.0);
  for (std::size_t j = 0; j < cols; ++j) {
    v[j * cols + j] = 1.0;
  }
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (std::size_t p = 0; p + 1 < cols; ++p) {
      for (std::size_t q = p + 1; q < cols; ++q) {
        double alpha = 0.0, beta = 0.0, gamma = 0.0;
        for (std::size_t i = 0; i < r; ++i) {
          alpha += a[i * cols + p] * a[i * cols + p];
          beta += a[i * cols + q] * a[i * cols + q];
          gamma += a[i * cols + p] * a[i * cols + q];
        }
        if (gamma == 0.0 || std::abs(gamma) <= eps * std::sqrt(alpha * beta)) {
          continue;
        }
        rotated = true;
        const double zeta = (beta - alpha) / (2.0 * gamma);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::abs(zeta) + std::sqrt(1.0 + zeta * zeta));
        const double c = 1.0 / std::sqrt(1.0 + t * t), s = c * t;
        for (std::size_t i = 0; i < r; ++i) {
          const double x = a[i * cols + p], y = a[i * cols + q];
          a[i * cols + p] = c * x - s * y;
          a[i * cols + q] = s * x + c * y;
        }
        for (std::size_t i = 0; i < cols; ++i) {
          const double x = v[i * cols + p], y = v[i * cols + q];
          v[i * cols + p] = c * x - s * y;
          v[i * cols + q] = s * x + c * y;
        }
      }
    }
    if (!rotated) {
      break;
    }
  }
  std::vector<double> sigma(cols, 0.0);
  double smax = 0.0;
  for (std::size_t j = 0; j < cols; ++j) {
    double n2 = 0.0;
    for (std::size_t i = 0; i < r; ++i) {
      n2 += a[i * cols + j] * a[i * cols + j];
    }
    sigma[j] = std::sqrt(n2);
    smax = std::max(smax, sigma[j]);
  }
  const double cutoff = eps * static_cast<double>(std::max(rows, cols)) * smax;
  std::vector<double> x(cols, 0.0);
  for (std::size_t j = 0; j < cols; ++j) {
    if (!(sigma[j] > cutoff)) {
      continue;
    }
    // (u_j . b) / s_j with u_j = M[:, j] / s_j.
    double ub = 0.0;
    for (std::size_t i = 0; i < r; ++i) {
      ub += a[i * cols + j] * b[i];
    }
    const double coef = ub / (sigma[j] * sigma[j]);
    for (std::size_t i = 0; i < cols; ++i) {
      x[i] += coef * v[i * cols + j];
    }
  }
  return x;
}

/// The summaries of `set` (r_max > 0: with neighbour counts there): a preprocessed dataset's
/// stored ones when they were made at that r_max (or none is needed), else one pass.
std::vector<GraphSummary> summaries_of(const GraphSet& set, double r_max, const char* who) {
  std::vector<GraphSummary> out;
  out.reserve(set.size());
  if (const PreprocessedDataset* store = set.store();
      store != nullptr && (r_max <= 0.0 || r_max == store->meta().r_max)) {
    std::vector<GraphSummary> all = store->summaries();
    for (std::size_t i = 0; i < set.size(); ++i) {
      out.push_back(std::move(all[set.graph(i)]));
    }
    return out;
  }
  set.for_each([&](const Config& c) {
    try {
      out.push_back(summarize(c, r_max));
    } catch (const Error& e) {
      throw InputError(std::string(who) + ": " + c.where() + ": " + e.what());
    }
  });
  return out;
}

/// (E - sum E0) / natoms of each summary; errors name the frame (read again from the set).
std::vector<double> atomic_inter_energies(const GraphSet& set, const E0Map& e0s, const char* who) {
  const std::vector<GraphSummary> sums = summaries_of(set, 0.0, who);
  std::vector<double> out;
  out.reserve(sums.size());
  for (std::size_t i = 0; i < sums.size(); ++i) {
    const GraphSummary& g = sums[i];
    // By element, ascending Z: the same order whichever way the summary was made.
    double e0 = 0.0;
    for (const auto& [z, count] : g.composition) {
      const auto it = e0s.find(z);
      if (it == e0s.end()) {
        throw InputError(std::string(who) + ": no E0 for element " + element_symbol(z) +
                         " (Z=" + std::to_string(z) + ") of " + set.load(i).where());
      }
      e0 += static_cast<double>(count) * it->second;
    }
    if (g.atoms == 0) {
      throw InputError(std::string(who) + ": " + set.load(i).where() + " has no atoms");
    }
    if (!g.has_energy) {
      throw InputError(std::string(who) + ": " + set.load(i).where() + " has no energy");
    }
    out.push_back((g.energy - e0) / static_cast<double>(g.atoms));
  }
  if (out.empty()) {
    throw InputError(std::string(who) + ": the training set is empty");
  }
  return out;
}

double mean_of(const std::vector<double>& x) {
  double s = 0.0;
  for (double v : x) {
    s += v;
  }
  return s / static_cast<double>(x.size());
}

/// Element key of an E0s dict or json: an atomic number or a symbol.
int element_key(const std::string& key, const std::string& from) {
  char* end = nullptr;
  const long z = std::strtol(key.c_str(), &end, 10);
  if (!key.empty() && *end == '\0') {
    if (z < 1 || z > kMaxAtomicNumber) {
      throw InputError("--E0s " + from + ": " + key + " is not an atomic number (1..118)");
    }
    return static_cast<int>(z);
  }
  const int zz = atomic_number(key);
  if (zz == 0) {
    throw InputError("--E0s " + from + ": '" + key + "' is neither an atomic number nor an element symbol");
  }
  return zz;
}

}  // namespace

GraphSummary summarize(const Config& c, double r_max) {
  GraphSummary g;
  g.atoms = static_cast<std::uint32_t>(c.natoms());
  g.has_energy = c.energy.has_value();
  g.energy = c.energy.value_or(0.0);
  for (double f : c.forces) {
    g.force_sq += f * f;
  }
  std::map<int, std::uint32_t> counts;
  for (int z : c.atomic_numbers) {
    ++counts[z];
  }
  g.composition.assign(counts.begin(), counts.end());
  if (r_max > 0.0) {
    const graph::GraphCounts n = graph::count_graph(c.positions, c.cell, c.pbc, r_max, r_max);
    g.edges = static_cast<std::uint64_t>(n.edges);
    g.connected = static_cast<std::uint32_t>(n.connected);
  }
  return g;
}

std::vector<int> elements_of(const GraphSet& configs) {
  std::set<int> zs;
  for (const auto& g : summaries_of(configs, 0.0, "elements_of")) {
    for (const auto& zc : g.composition) {
      zs.insert(zc.first);
    }
  }
  return {zs.begin(), zs.end()};
}

E0Map fit_e0s(const GraphSet& train) {
  if (train.empty()) {
    throw InputError("fit_e0s: the training set is empty; give --E0s per element instead of 'average'");
  }
  const std::vector<GraphSummary> sums = summaries_of(train, 0.0, "fit_e0s");
  std::set<int> present;
  for (const auto& g : sums) {
    for (const auto& zc : g.composition) {
      present.insert(zc.first);
    }
  }
  const std::vector<int> zs(present.begin(), present.end());
  const std::size_t n = sums.size(), m = zs.size();
  std::vector<double> a(n * m, 0.0), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!sums[i].has_energy) {
      throw InputError("fit_e0s: " + train.load(i).where() + " has no energy");
    }
    b[i] = sums[i].energy;
    for (const auto& [z, count] : sums[i].composition) {
      a[i * m + static_cast<std::size_t>(std::lower_bound(zs.begin(), zs.end(), z) - zs.begin())] =
          static_cast<double>(count);
    }
  }
  const std::vector<double> x = lstsq_min_norm(std::move(a), std::move(b), n, m);
  E0Map e0s;
  for (std::size_t j = 0; j < m; ++j) {
    e0s[zs[j]] = x[j];
  }
  return e0s;
}

E0Map resolve_e0s(const std::optional<std::string>& spec, const GraphSet& train,
                  const std::map<int, double>& isolated_atom_energies, const std::vector<int>& elements) {
  E0Map e0s;
  std::string from;
  if (!spec) {
    if (isolated_atom_energies.empty()) {
      throw InputError(
          "--E0s not given and the training file has no IsolatedAtom frames: give --E0s average "
          "(least-squares "
          "fit), a .json file or a dict such as {29: -3.5}");
    }
    e0s = isolated_atom_energies;
    from = "(IsolatedAtom frames of the training file)";
  } else if (*spec == "average" || *spec == "Average" || *spec == "AVERAGE") {
    e0s = fit_e0s(train);
    from = "average";
  } else if (spec->size() > 5 && spec->compare(spec->size() - 5, 5, ".json") == 0) {
    from = *spec;
    std::ifstream in(*spec);
    if (!in) {
      throw FileError(*spec, 0, "cannot open the --E0s file");
    }
    nlohmann::json j;
    try {
      in >> j;
    } catch (const nlohmann::json::exception& e) {
      throw FileError(*spec, 0, std::string("not valid JSON: ") + e.what());
    }
    if (!j.is_object()) {
      throw FileError(*spec, 0, "expected an object {\"Z\": energy, ...}");
    }
    for (const auto& [k, v] : j.items()) {
      if (!v.is_number() || !std::isfinite(v.get<double>())) {
        throw FileError(*spec, 0, "E0 of '" + k + "' is not a finite number");
      }
      e0s[element_key(k, from)] = v.get<double>();
    }
  } else {
    from = *spec;
    for (const auto& [k, v] : parse_flat_dict(*spec)) {
      e0s[element_key(k, "'" + from + "'")] = v;
    }
  }
  for (int z : elements) {
    if (e0s.find(z) == e0s.end()) {
      throw InputError("--E0s " + from + " has no energy for element " + element_symbol(z) +
                       " (Z=" + std::to_string(z) + "), which the data contain; add it");
    }
  }
  return e0s;
}

double avg_num_neighbors(const GraphSet& configs, double r_max) {
  std::int64_t edges = 0, atoms_with_neighbors = 0;
  for (const auto& g : summaries_of(configs, r_max, "avg_num_neighbors")) {
    edges += static_cast<std::int64_t>(g.edges);
    atoms_with_neighbors += g.connected;
  }
  if (atoms_with_neighbors == 0) {
    throw InputError("avg_num_neighbors: no atom of the training set has a neighbour within r_max = " +
                     std::to_string(r_max) + " A");
  }
  return static_cast<double>(edges) / static_cast<double>(atoms_with_neighbors);
}

ScaleShift mean_std_atomic_inter_energy(const GraphSet& configs, const E0Map& e0s) {
  const std::vector<double> x = atomic_inter_energies(configs, e0s, "mean_std_atomic_inter_energy");
  ScaleShift r;
  r.mean = mean_of(x);
  double ss = 0.0;
  for (double v : x) {
    ss += (v - r.mean) * (v - r.mean);
  }
  // scatter_std(unbiased=True): count - 1 clamped to 1, plus its 1e-6.
  const double dof = std::max(static_cast<double>(x.size()) - 1.0, 1.0) + 1e-6;
  r.std = std::sqrt(ss / dof);
  if (r.std == 0.0) {
    r.std = 1.0;
  }
  return r;
}

ScaleShift mean_rms_energy_forces(const GraphSet& configs, const E0Map& e0s) {
  ScaleShift r;
  r.mean = mean_of(atomic_inter_energies(configs, e0s, "mean_rms_energy_forces"));
  double sum = 0.0;
  std::size_t count = 0;
  // Each frame's sum, then the frames' in order: the same bits from stored summaries.
  for (const auto& g : summaries_of(configs, 0.0, "mean_rms_energy_forces")) {
    sum += g.force_sq;
    count += 3 * static_cast<std::size_t>(g.atoms);  // absent forces are zeros in mace-torch's batches
  }
  r.std = count ? std::sqrt(sum / static_cast<double>(count)) : 0.0;
  if (r.std == 0.0) {
    r.std = 1.0;
  }
  return r;
}

ScaleShift compute_scale_shift(const std::string& scaling, const GraphSet& configs, const E0Map& e0s) {
  if (scaling == "std_scaling") {
    return mean_std_atomic_inter_energy(configs, e0s);
  }
  if (scaling == "rms_forces_scaling") {
    return mean_rms_energy_forces(configs, e0s);
  }
  if (scaling == "no_scaling") {
    return ScaleShift{};  // mace-torch: std 1 and, with no mean computed, a shift of 0
  }
  throw InputError("compute_scale_shift: unknown scaling '" + scaling +
                   "'; allowed: std_scaling, rms_forces_scaling, no_scaling");
}

}  // namespace fastmlip::trainer::data

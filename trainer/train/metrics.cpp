// SPDX-License-Identifier: MIT
#include "train/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/error.hpp"

namespace fastmlip::trainer::train {
namespace {

enum Quantity { kEnergy = 0, kForces = 1, kStress = 2, kVirials = 3, kMagmoms = 4 };

double ratio(double a, double n) { return n > 0 ? a / n : NAN; }

double det3(const std::array<double, 9>& m) {
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
         m[2] * (m[3] * m[7] - m[4] * m[6]);
}

nlohmann::json number(double v) {
  // JSON has no NaN; a metric without data is null.
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

nlohmann::json json_of(const Metrics& m) {
  nlohmann::json j = {{"configs", m.configs},
          {"loss", number(m.loss)},
          {"rmse_e_per_atom", number(m.rmse_e)},
          {"mae_e_per_atom", number(m.mae_e)},
          {"rmse_f", number(m.rmse_f)},
          {"mae_f", number(m.mae_f)},
          {"rmse_stress", number(m.rmse_s)},
          {"mae_stress", number(m.mae_s)},
          {"rmse_virials_per_atom", number(m.rmse_v)},
          {"mae_virials_per_atom", number(m.mae_v)},
          {"n_energies", m.n_e},
          {"n_force_components", m.n_f},
          {"n_stress_components", m.n_s},
          {"n_virial_components", m.n_v}};
  // Only with magmoms, so that a MACE run's JSON is as before.
  if (m.n_m > 0) {
    j["rmse_magmom"] = number(m.rmse_m);
    j["mae_magmom"] = number(m.mae_m);
    j["n_magmoms"] = m.n_m;
  }
  return j;
}

}  // namespace

void ErrorSums::add(int quantity, double error) {
  sq[quantity] += error * error;
  abs[quantity] += std::abs(error);
  n[quantity] += 1;
}

ErrorSums& ErrorSums::operator+=(const ErrorSums& o) {
  for (int q = 0; q < kQuantities; ++q) {
    sq[q] += o.sq[q];
    abs[q] += o.abs[q];
    n[q] += o.n[q];
  }
  configs += o.configs;
  loss += o.loss;
  n_loss += o.n_loss;
  return *this;
}

Metrics metrics_of(const ErrorSums& s) {
  Metrics m;
  const auto rmse = [&](int q) { return std::sqrt(ratio(s.sq[q], s.n[q])); };
  const auto mae = [&](int q) { return ratio(s.abs[q], s.n[q]); };
  m.rmse_e = rmse(kEnergy);
  m.mae_e = mae(kEnergy);
  m.rmse_f = rmse(kForces);
  m.mae_f = mae(kForces);
  m.rmse_s = rmse(kStress);
  m.mae_s = mae(kStress);
  m.rmse_v = rmse(kVirials);
  m.mae_v = mae(kVirials);
  m.rmse_m = rmse(kMagmoms);
  m.mae_m = mae(kMagmoms);
  m.loss = ratio(s.loss, s.n_loss);
  m.configs = static_cast<long long>(s.configs);
  m.n_e = static_cast<long long>(s.n[kEnergy]);
  m.n_f = static_cast<long long>(s.n[kForces]);
  m.n_s = static_cast<long long>(s.n[kStress]);
  m.n_v = static_cast<long long>(s.n[kVirials]);
  m.n_m = static_cast<long long>(s.n[kMagmoms]);
  return m;
}

ErrorAccumulator::ErrorAccumulator(std::vector<std::string> config_types)
    : m_types(std::move(config_types)), m_by_type(m_types.size()) {}

void ErrorAccumulator::add(const data::Config& c, const Prediction& p) {
  const auto it = std::find(m_types.begin(), m_types.end(), c.config_type);
  if (it == m_types.end()) {
    throw InputError("metrics: " + c.where() + ": config_type '" + c.config_type +
                     "' is not among the dataset's config_types (build the accumulator from the same data)");
  }
  ErrorSums e;
  e.configs = 1;
  const double n = static_cast<double>(c.natoms());
  if (c.energy) {
    e.add(kEnergy, (p.energy - *c.energy) / n);
  }
  if (!c.forces.empty() && p.forces != nullptr) {
    for (std::size_t k = 0; k < 3 * c.natoms(); ++k) {
      e.add(kForces, p.forces[k] - c.forces[k]);
    }
  }
  if (p.virials != nullptr) {
    if (c.virials) {
      for (int k = 0; k < 9; ++k) {
        e.add(kVirials, (p.virials[k] - (*c.virials)[k]) / n);
      }
    }
    const double volume = c.cell ? std::abs(det3(*c.cell)) : 0.0;
    if (c.stress && volume > 0) {
      for (int k = 0; k < 9; ++k) {
        e.add(kStress, -p.virials[k] / volume - (*c.stress)[k]);
      }
    }
  }
  if (!c.magmoms.empty() && p.magmoms != nullptr) {
    for (std::size_t k = 0; k < c.natoms(); ++k) {
      e.add(kMagmoms, p.magmoms[k] - c.magmoms[k]);
    }
  }
  m_overall += e;
  m_by_type[static_cast<std::size_t>(it - m_types.begin())] += e;
}

void ErrorAccumulator::add_loss(double loss, double share) {
  m_overall.loss += loss;
  m_overall.n_loss += share;
}

void ErrorAccumulator::reduce(MPI_Comm comm) {
  int world = 1;
  MPI_Comm_size(comm, &world);
  if (world == 1) {
    return;
  }
  std::vector<double> buf = flat();
  MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_DOUBLE, MPI_SUM, comm);
  set_flat(buf);
}

std::vector<double> ErrorAccumulator::flat() const {
  // Per sums object: 3 x kQuantities, configs, loss, n_loss.
  std::vector<double> buf;
  for (std::size_t k = 0; k <= m_by_type.size(); ++k) {
    const ErrorSums& s = k == 0 ? m_overall : m_by_type[k - 1];
    buf.insert(buf.end(), s.sq.begin(), s.sq.end());
    buf.insert(buf.end(), s.abs.begin(), s.abs.end());
    buf.insert(buf.end(), s.n.begin(), s.n.end());
    buf.push_back(s.configs);
    buf.push_back(s.loss);
    buf.push_back(s.n_loss);
  }
  return buf;
}

void ErrorAccumulator::set_flat(const std::vector<double>& values) {
  constexpr std::size_t kWidth = 3 * ErrorSums::kQuantities + 3;
  if (values.size() != kWidth * (m_by_type.size() + 1)) {
    throw InputError("metrics: " + std::to_string(values.size()) + " sums given for " +
                     std::to_string(m_by_type.size()) + " config_types (expected " +
                     std::to_string(kWidth * (m_by_type.size() + 1)) + ")");
  }
  const double* v = values.data();
  for (std::size_t k = 0; k <= m_by_type.size(); ++k) {
    ErrorSums& s = k == 0 ? m_overall : m_by_type[k - 1];
    for (auto* arr : {&s.sq, &s.abs, &s.n}) {
      std::copy(v, v + ErrorSums::kQuantities, arr->begin());
      v += ErrorSums::kQuantities;
    }
    s.configs = *v++;
    s.loss = *v++;
    s.n_loss = *v++;
  }
}

const ErrorSums& ErrorAccumulator::of_type(const std::string& type) const {
  const auto it = std::find(m_types.begin(), m_types.end(), type);
  if (it == m_types.end()) {
    throw InputError("metrics: no config_type '" + type + "'");
  }
  return m_by_type[static_cast<std::size_t>(it - m_types.begin())];
}

std::vector<std::string> config_types_of(const std::vector<data::Config>& configs) {
  std::set<std::string> types;
  for (const auto& c : configs) {
    types.insert(c.config_type);
  }
  return {types.begin(), types.end()};
}

nlohmann::json metrics_json(const ErrorAccumulator& acc) {
  nlohmann::json per_type = nlohmann::json::object();
  for (const auto& t : acc.config_types()) {
    per_type[t] = json_of(metrics_of(acc.of_type(t)));
  }
  return {{"overall", json_of(metrics_of(acc.overall()))}, {"per_config_type", per_type}};
}

std::string metrics_table(const ErrorAccumulator& acc) {
  const Metrics all = metrics_of(acc.overall());
  // Stress and virial columns only when some configuration had them, to keep the usual table narrow.
  const bool stress = all.n_s > 0, virials = all.n_v > 0;
  std::size_t width = 11;
  for (const auto& t : acc.config_types()) {
    width = std::max(width, t.size());
  }
  const auto cell = [](double v) {
    char buf[32];
    if (std::isnan(v)) {
      std::snprintf(buf, sizeof buf, " %12s", "-");
    } else {
      std::snprintf(buf, sizeof buf, " %12.3f", 1e3 * v);
    }
    return std::string(buf);
  };
  const auto head = [](const char* h) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %12s", h);
    return std::string(buf);
  };
  std::ostringstream out;
  out << std::string(width - 11, ' ') << "config_type"
      << " " << std::string(6 - 1, ' ') << "n" << head("RMSE E/atom") << head("MAE E/atom") << head("RMSE F")
      << head("MAE F");
  if (stress) {
    out << head("RMSE S") << head("MAE S");
  }
  if (virials) {
    out << head("RMSE V/atom") << head("MAE V/atom");
  }
  out << "\n" << std::string(width + 7, ' ') << head("meV") << head("meV") << head("meV/A") << head("meV/A");
  if (stress) {
    out << head("meV/A^3") << head("meV/A^3");
  }
  if (virials) {
    out << head("meV") << head("meV");
  }
  out << "\n";
  const auto row = [&](const std::string& name, const Metrics& m) {
    char n[16];
    std::snprintf(n, sizeof n, " %6lld", m.configs);
    out << std::string(width - name.size(), ' ') << name << n << cell(m.rmse_e) << cell(m.mae_e)
        << cell(m.rmse_f) << cell(m.mae_f);
    if (stress) {
      out << cell(m.rmse_s) << cell(m.mae_s);
    }
    if (virials) {
      out << cell(m.rmse_v) << cell(m.mae_v);
    }
    out << "\n";
  };
  row("all", all);
  for (const auto& t : acc.config_types()) {
    row(t, metrics_of(acc.of_type(t)));
  }
  return out.str();
}

}  // namespace fastmlip::trainer::train

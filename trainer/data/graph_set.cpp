// SPDX-License-Identifier: MIT
#include "data/graph_set.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include "core/error.hpp"
#include "data/mptrj.hpp"

namespace fastmlip::trainer::data {

// Here rather than in store.cpp: an extxyz file's summary is made the same way, also in a build
// without LMDB.
std::uint16_t StoreMeta::add(const std::string& config_type,
                             const std::vector<std::pair<int, std::uint32_t>>& composition, bool magmoms,
                             bool stress_or_virials, bool cell) {
  for (const auto& zc : composition) {
    const auto at = std::lower_bound(elements.begin(), elements.end(), zc.first);
    if (at == elements.end() || *at != zc.first) {
      elements.insert(at, zc.first);
    }
  }
  any_magmoms = any_magmoms || magmoms;
  any_stress_or_virials = any_stress_or_virials || stress_or_virials;
  any_cell = any_cell || cell;
  const auto type = std::find(config_types.begin(), config_types.end(), config_type);
  if (type != config_types.end()) {
    return static_cast<std::uint16_t>(type - config_types.begin());
  }
  if (config_types.size() == 65535) {
    throw InputError("more than 65535 config_types in one dataset (the next: '" + config_type + "')");
  }
  config_types.push_back(config_type);
  return static_cast<std::uint16_t>(config_types.size() - 1);
}

std::uint16_t StoreMeta::add(const Config& c) {
  return add(c.config_type, summarize(c, 0.0).composition, !c.magmoms.empty(), c.stress || c.virials,
             c.cell.has_value());
}

GraphSet::GraphSet(std::vector<Config> configs)
    : m_configs(std::make_shared<const std::vector<Config>>(std::move(configs))) {}

GraphSet::GraphSet(std::shared_ptr<const PreprocessedDataset> store) : m_store(std::move(store)) {}

std::size_t GraphSet::size() const noexcept {
  if (!m_all) {
    return m_picks.size();
  }
  return m_store ? m_store->size() : (m_configs ? m_configs->size() : 0);
}

std::size_t GraphSet::at(std::size_t i) const {
  if (i >= size()) {
    throw Error("GraphSet: graph " + std::to_string(i) + " of " + std::to_string(size()));
  }
  return m_all ? i : static_cast<std::size_t>(m_picks[i]);
}

std::size_t GraphSet::natoms(std::size_t i) const {
  const std::size_t g = at(i);
  return m_store ? m_store->entries()[g].atoms : (*m_configs)[g].natoms();
}

const std::string& GraphSet::config_type(std::size_t i) const {
  const std::size_t g = at(i);
  return m_store ? m_store->meta().config_types[m_store->entries()[g].config_type]
                 : (*m_configs)[g].config_type;
}

Config GraphSet::load(std::size_t i) const {
  const std::size_t g = at(i);
  return m_store ? m_store->read(g) : (*m_configs)[g];
}

void GraphSet::for_each(const std::function<void(const Config&)>& f) const {
  for (std::size_t i = 0; i < size(); ++i) {
    if (m_store) {
      f(m_store->read(at(i)));
    } else {
      f((*m_configs)[at(i)]);
    }
  }
}

GraphSet GraphSet::subset(const std::vector<std::size_t>& picks) const {
  GraphSet s;
  s.m_configs = m_configs;
  s.m_store = m_store;
  s.m_all = false;
  s.m_picks.reserve(picks.size());
  for (std::size_t i : picks) {
    const std::size_t g = at(i);
    if (g > UINT32_MAX) {
      throw InputError("GraphSet::subset: graph " + std::to_string(g) +
                       " is past the 2^32 graphs a subset numbers");
    }
    s.m_picks.push_back(static_cast<std::uint32_t>(g));
  }
  return s;
}

std::vector<std::string> GraphSet::config_types() const {
  std::set<std::string> types;
  for (std::size_t i = 0; i < size(); ++i) {
    types.insert(config_type(i));
  }
  return {types.begin(), types.end()};
}

OpenedData open_labelled_data(const std::string& path, const ReadOptions& options, StoreCheck check) {
  OpenedData d;
  if (is_preprocessed_dataset(path)) {
    auto store = std::make_shared<const PreprocessedDataset>(path);
    check_store_options(*store, options, check);
    d.meta = store->meta();
    d.graphs = GraphSet(std::move(store));
    return d;
  }
  Dataset ds = read_labelled_file(path, options);
  for (const auto& c : ds.configs) {
    d.meta.add(c);
  }
  d.meta.isolated_atom_energies = std::move(ds.isolated_atom_energies);
  d.meta.skipped = ds.skipped;
  d.meta.skip_warning = std::move(ds.skip_warning);
  d.graphs = GraphSet(std::move(ds.configs));
  return d;
}

}  // namespace fastmlip::trainer::data

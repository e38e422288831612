// SPDX-License-Identifier: MIT
#pragma once
/// \file The configurations a run trains, validates or tests on, wherever they live: in memory
/// (read from an extxyz or MPtrj JSON file) or in a preprocessed dataset (data/store.hpp), where
/// only the index is in memory and a configuration is read from its shard when it is needed.
///
/// The trainer plans from what every graph set answers without reading a configuration (its
/// size, each graph's atoms and config_type) and loads the configurations of its own bins only,
/// so on a preprocessed dataset no rank holds more than the index and the bins in flight
/// (docs/train-potential.md, "Preprocessed datasets", memory per rank). Both kinds give the same configurations in the
/// same order, so a run trains bit for bit the same on either.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/store.hpp"

namespace fastmlip::trainer::data {

class GraphSet {
 public:
  GraphSet() = default;
  /// The configurations in memory. Implicit, so that a std::vector<Config> is a graph set.
  GraphSet(std::vector<Config> configs);  // NOLINT(google-explicit-constructor)
  GraphSet(std::initializer_list<Config> configs) : GraphSet(std::vector<Config>(configs)) {}
  /// Every graph of a preprocessed dataset, in its order.
  explicit GraphSet(std::shared_ptr<const PreprocessedDataset> store);

  std::size_t size() const noexcept;
  bool empty() const noexcept { return size() == 0; }
  /// Graph i's atom count and config_type, from memory or the index (no record is read).
  std::size_t natoms(std::size_t i) const;
  const std::string& config_type(std::size_t i) const;
  /// Graph i's configuration: a copy, or its record read and checked (FileError naming the shard
  /// and graph when it is damaged). Safe to call from several threads.
  Config load(std::size_t i) const;
  /// Calls f on every configuration in order, one at a time (a stored set reads one record at a
  /// time, so a pass needs no more memory than one configuration).
  void for_each(const std::function<void(const Config&)>& f) const;
  /// The graphs `picks` (indices into this set), in that order.
  GraphSet subset(const std::vector<std::size_t>& picks) const;

  /// The sorted distinct config_types (from the index for a stored set).
  std::vector<std::string> config_types() const;
  /// The preprocessed dataset behind a stored set, or nullptr for one in memory.
  const PreprocessedDataset* store() const noexcept { return m_store.get(); }
  /// Graph i's number in the configurations or the dataset it was taken from.
  std::size_t graph(std::size_t i) const { return at(i); }

 private:
  std::size_t at(std::size_t i) const;

  std::shared_ptr<const std::vector<Config>> m_configs;
  std::shared_ptr<const PreprocessedDataset> m_store;
  /// The graphs of a subset (4 bytes each: a dataset's index numbers its graphs in 32 bits too);
  /// with m_all, every graph in order (no table).
  std::vector<std::uint32_t> m_picks;
  bool m_all = true;
};

/// A labelled file or preprocessed dataset opened for a run, with what is known of it as a whole:
/// a dataset's index meta, or the same made from a file's frames (its IsolatedAtom energies, skip
/// warning, config types, elements and label flags; the dataset-only fields left at their
/// defaults).
struct OpenedData {
  GraphSet graphs;
  StoreMeta meta;
};

/// `path` as a graph set: a preprocessed dataset (checked against `options` as `check` says, and
/// left on disk but for its index) or a file read whole (read_labelled_file).
OpenedData open_labelled_data(const std::string& path, const ReadOptions& options,
                              StoreCheck check = StoreCheck::kAllOptions);

}  // namespace fastmlip::trainer::data

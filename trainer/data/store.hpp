// SPDX-License-Identifier: MIT
#pragma once
/// \file A preprocessed dataset (`train-potential preprocess`, docs/train-potential.md,
/// "Preprocessed datasets"): a labelled file read once, stored as binary graphs in shards plus a
/// small index, so that a training run reads no text and each graph can be read on its own.
///
/// On disk, a directory:
/// - `shard-NNNNN.mdb`: an LMDB database (one file, MDB_NOSUBDIR) per writing rank. Key: the
///   graph's number in the dataset (8 bytes, big-endian, so the database keeps graph order);
///   value: one record, its CRC-32 and length in a header, then the configuration (data::Config,
///   every label, weight and where it came from).
/// - `index.mdb`: written last, so a directory without it is never taken for a dataset. Key
///   `meta`: JSON (format, version, graph and shard counts, the cutoffs the counts were made
///   at, the reading options that shaped the labels, the IsolatedAtom energies, config types,
///   the elements present and which labels occur: what a run needs before it reads a graph);
///   key `graphs`: per graph its atoms, edges within r_max, CHGNet angles, shard and config type
///   (16 bytes), with a CRC-32; key `summaries`: per graph what the training-set statistics need
///   (data/graph_summary.hpp: atoms with neighbours, energy, squared forces, atoms per element),
///   with a CRC-32, read only when a run computes statistics.
///
/// Why LMDB: a maintained C library in Debian (liblmdb), memory-mapped reads with no parsing and
/// no copy until a record is decoded, random access by key, many readers on one file without
/// locks (read-only, MDB_NOLOCK), crash-safe commits. mace-torch's and fairchem's preprocessed
/// data are HDF5 and LMDB; a dataset of small variable-sized records read one at a time by key is
/// LMDB's case, while HDF5's strength, large n-dimensional arrays read in slabs, is not ours.
///
/// Writing is atomic: everything goes to DIR.partial, which becomes DIR by one rename after
/// every shard and the index are on disk. DIR is never half-written; a DIR.partial left by an
/// interrupted run is removed by the next.
///
/// Bad data: a missing shard, a record whose CRC, length or atom count disagrees with the index,
/// an index of another format or a newer version: FileError naming the file and the graph.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/graph_summary.hpp"

namespace fastmlip::trainer::data {

/// The dataset format this build writes and reads.
/// (2: the meta lists the elements and which labels occur; version 1 datasets are refused with a
/// request to preprocess again.)
inline constexpr int kStoreVersion = 2;

/// One graph of the index.
struct StoreEntry {
  std::uint32_t atoms = 0;
  std::uint32_t edges = 0;   ///< directed edges within StoreMeta::r_max
  std::uint32_t angles = 0;  ///< CHGNet's angles at StoreMeta::bond_cutoff
  std::uint16_t shard = 0;
  std::uint16_t config_type = 0;  ///< into StoreMeta::config_types
};

/// What the index says of the whole dataset (its graph count is the per-graph table's length).
struct StoreMeta {
  int version = kStoreVersion;
  int shards = 0;
  double r_max = 0.0, bond_cutoff = 0.0;
  std::string source;  ///< the labelled file it was made from
  /// The reading options that shaped the stored labels and weights, as text (read_options_text):
  /// a training run with other options would silently train on other labels, so it is refused.
  std::string read_options;
  std::map<int, double> isolated_atom_energies;
  std::vector<std::string> config_types;
  /// The atomic numbers of the stored graphs, ascending; whether any graph has magnetic moments,
  /// stress or virials, a cell. A run checks its model and chooses its outputs from these
  /// without reading a graph.
  std::vector<int> elements;
  bool any_magmoms = false, any_stress_or_virials = false, any_cell = false;
  std::size_t skipped = 0;
  std::string skip_warning;

  /// Counts a graph into config_types, elements and the label flags; returns its config_type's
  /// number (InputError past 65535 types).
  std::uint16_t add(const std::string& config_type,
                    const std::vector<std::pair<int, std::uint32_t>>& composition, bool magmoms,
                    bool stress_or_virials, bool cell);
  std::uint16_t add(const Config& c);
};

/// A canonical text of the options that decide which frames and labels a dataset holds.
std::string read_options_text(const ReadOptions& options);

/// True when `path` is a directory holding a dataset's index.
bool is_preprocessed_dataset(const std::string& path);

/// Writes the graphs `mine` of a dataset directory as shard `shard` (one writer per shard, each
/// its own file): opens `dir`/shard-NNNNN.mdb, appends each configuration under its graph number,
/// commits in batches. Throws FileError naming the shard on any failure (a full disk included).
class ShardWriter {
 public:
  ShardWriter(const std::string& dir, int shard);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  void put(std::uint64_t graph, const Config& config);
  /// Commits what is pending and closes the file (the destructor abandons pending records).
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> m;
};

/// Writes the index of a dataset directory; `entries` and `summaries` in graph order (a summary's
/// atoms and edges are the entry's, not stored twice).
void write_store_index(const std::string& dir, const StoreMeta& meta, const std::vector<StoreEntry>& entries,
                       const std::vector<GraphSummary>& summaries);

/// The partial directory of `dir` (where a dataset is written before its rename).
std::string partial_dir_of(const std::string& dir);

/// A preprocessed dataset, opened read-only: its index is read at once (16 bytes per graph), a
/// graph's record only when read. Several processes may read it at once, and several threads
/// of one process may call read() at once.
class PreprocessedDataset {
 public:
  explicit PreprocessedDataset(const std::string& dir);
  ~PreprocessedDataset();
  PreprocessedDataset(PreprocessedDataset&&) noexcept;
  PreprocessedDataset& operator=(PreprocessedDataset&&) noexcept;

  const std::string& path() const noexcept;
  const StoreMeta& meta() const noexcept;
  const std::vector<StoreEntry>& entries() const noexcept;
  std::size_t size() const noexcept { return entries().size(); }
  /// Graph g's configuration; FileError naming the shard and graph when its record is missing
  /// or damaged, or disagrees with the index.
  Config read(std::uint64_t g) const;
  /// Every graph's summary (made at meta().r_max), read from the index now; FileError when the
  /// record is damaged or disagrees with the per-graph table.
  std::vector<GraphSummary> summaries() const;
  /// How many records read() has decoded so far (what a run reports of its reading).
  std::uint64_t records_read() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> m;
};

/// What read_preprocessed checks of the options a dataset was made with.
enum class StoreCheck {
  kAllOptions,  ///< every reading option (training: the labels, weights and frames must be the run's)
  kLabelKeys,   ///< the four label keys only (evaluation: the labels must be the ones asked for)
};

/// Throws FileError unless `store` was made with `options` (as `check` says), saying which option
/// differs and how to fix it.
void check_store_options(const PreprocessedDataset& store, const ReadOptions& options,
                         StoreCheck check = StoreCheck::kAllOptions);

/// Every graph of a dataset directory as a Dataset (in graph order, with its IsolatedAtom
/// energies and skip counts), after checking that it was made with `options` (FileError saying
/// which option differs and how to fix it).
Dataset read_preprocessed(const std::string& dir, const ReadOptions& options,
                          StoreCheck check = StoreCheck::kAllOptions);

}  // namespace fastmlip::trainer::data

// SPDX-License-Identifier: MIT
#include "train/preprocess.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "core/error.hpp"
#include "data/graph_record.hpp"
#include "data/mptrj.hpp"
#include "data/store.hpp"
#include "graph/neighbor_list.hpp"
#include "io/atomic_file.hpp"
#include "options.hpp"

namespace fastmlip::trainer::train {
namespace {

namespace fs = std::filesystem;

/// CHGNet's atom and bond graph cutoffs (chgnet 0.3.0), what its angles are counted at.
constexpr double kChgnetCutoff = 6.0;
constexpr double kBondCutoff = 3.0;

struct Args {
  Options options;
  std::string output;
};

Args parse(const std::vector<std::string>& args) {
  Args a;
  std::vector<std::string> rest;
  std::optional<std::string> config, output;
  // --KEY VALUE or --KEY=VALUE of the command's own two keys into dest; false for another flag.
  const auto take = [&](const std::string& key, std::size_t& i, std::optional<std::string>& dest) {
    const std::string& s = args[i];
    if (s == key) {
      if (i + 1 >= args.size()) {
        throw InputError("train-potential preprocess: " + key + " needs a value");
      }
      dest = args[++i];
      return true;
    }
    if (s.compare(0, key.size() + 1, key + "=") == 0) {
      dest = s.substr(key.size() + 1);
      return true;
    }
    return false;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!take("--config", i, config) && !take("--output", i, output)) {
      rest.push_back(args[i]);
    }
  }
  if (config) {
    a.options.load_yaml_file(*config);
  }
  a.options.apply_flags(rest);
  if (!output || output->empty()) {
    throw InputError("train-potential preprocess: --output DIR is required (where the datasets are written)");
  }
  if (!a.options.has("train_file")) {
    throw InputError(
        "train-potential preprocess: --train_file is required (in --config or on the command line)");
  }
  a.output = *output;
  return a;
}

/// One labelled file into the dataset directory `dir`, on every rank of `comm`.
void preprocess_file(const std::string& file, const std::string& dir, const data::ReadOptions& ro,
                     double cutoff, MPI_Comm comm, std::ostream& out) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  if (world > 65535) {
    throw InputError("train-potential preprocess: at most 65535 ranks (one shard each)");
  }
  if (data::is_preprocessed_dataset(file)) {
    throw InputError("train-potential preprocess: " + file + " is already a preprocessed dataset");
  }
  const std::string partial = data::partial_dir_of(dir);
  if (rank == 0) {
    std::error_code ec;
    if (fs::exists(dir, ec)) {
      throw FileError(
          dir, 0, "already exists: remove it or choose another --output (a dataset is never overwritten)");
    }
    // What an interrupted run left: never a dataset (it has no place under `dir`), so it goes.
    fastmlip::io::remove_tree(partial, ec);
    if (ec || !fs::create_directories(partial, ec) || ec) {
      throw FileError(partial, 0, "cannot create the directory" + (ec ? ": " + ec.message() : std::string()));
    }
  }
  MPI_Barrier(comm);
  // Every rank reads the file: the comment line of every frame (which frames are kept decides the
  // graph numbers) and the atoms of its own graphs r, r + W, ..., which it counts and writes into
  // its shard, one at a time. What the index needs of each graph goes to rank 0.
  data::Dataset ds;  // the skips, warning and IsolatedAtom energies (every rank sees them all)
  data::ByteWriter mine;
  std::size_t n = 0;
  {
    data::ShardWriter shard(partial, rank);
    const auto W = static_cast<std::size_t>(world), r = static_cast<std::size_t>(rank);
    n = data::scan_labelled_file(
        file, ro, ds, [&](std::size_t g) { return g % W == r; },
        [&](std::size_t g, data::Config&& c) {
          graph::GraphCounts gc;
          try {
            gc = graph::count_graph(c.positions, c.cell, c.pbc, cutoff, kBondCutoff);
          } catch (const Error& e) {
            throw InputError(c.where() + ": " + e.what());
          }
          if (gc.edges > UINT32_MAX || gc.angles > UINT32_MAX || c.natoms() > UINT32_MAX) {
            throw InputError(c.where() + ": " + std::to_string(gc.edges) + " edges and " +
                             std::to_string(gc.angles) +
                             " angles: more than a dataset graph may hold (2^32 - 1)");
          }
          data::GraphSummary sum = data::summarize(c, 0.0);
          sum.connected = static_cast<std::uint32_t>(gc.connected);
          mine.put(static_cast<std::uint64_t>(g));
          mine.put(static_cast<std::uint32_t>(gc.edges));
          mine.put(static_cast<std::uint32_t>(gc.angles));
          mine.put(static_cast<std::uint8_t>((c.magmoms.empty() ? 0 : 1) | (c.stress || c.virials ? 2 : 0) |
                                             (c.cell ? 4 : 0)));
          mine.put_string(c.config_type);
          data::put_summary(mine, sum);
          shard.put(g, c);
        });
    shard.close();
  }
  if (n == 0) {
    throw InputError("train-potential preprocess: " + file + ": no configurations to store" +
                     (ds.skip_warning.empty() ? std::string() : " (" + ds.skip_warning + ")"));
  }
  // Every shard is on disk once rank 0 has every rank's part: the index comes after.
  if (mine.str().size() > static_cast<std::size_t>(INT_MAX)) {
    throw InputError("train-potential preprocess: " + file + ": rank " + std::to_string(rank) +
                     "'s graphs need more than 2 GB of index data; preprocess on more ranks");
  }
  const int bytes = static_cast<int>(mine.str().size());
  std::vector<int> sizes(static_cast<std::size_t>(world)), offsets(static_cast<std::size_t>(world), 0);
  MPI_Gather(&bytes, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm);
  std::string parts;
  if (rank == 0) {
    long long total = 0;
    for (int k = 0; k < world; ++k) {
      offsets[static_cast<std::size_t>(k)] = static_cast<int>(std::min<long long>(total, INT_MAX));
      total += sizes[static_cast<std::size_t>(k)];
    }
    if (total > INT_MAX) {
      throw InputError("train-potential preprocess: " + file +
                       ": the index data exceed 2 GB on rank 0; preprocess the file in parts");
    }
    parts.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(mine.str().data(), bytes, MPI_CHAR, parts.data(), sizes.data(), offsets.data(), MPI_CHAR, 0,
              comm);
  mine.str().clear();
  mine.str().shrink_to_fit();
  if (rank == 0) {
    data::StoreMeta meta;
    meta.shards = world;
    meta.r_max = cutoff;
    meta.bond_cutoff = kBondCutoff;
    meta.source = file;
    meta.read_options = data::read_options_text(ro);
    meta.isolated_atom_energies = ds.isolated_atom_energies;
    meta.skipped = ds.skipped;
    meta.skip_warning = ds.skip_warning;
    std::vector<data::StoreEntry> entries(n);
    std::vector<data::GraphSummary> summaries(n);
    std::vector<std::string> types(n);
    std::vector<std::uint8_t> flags(n);
    std::vector<bool> seen(n, false);
    data::ByteReader in(parts.data(), parts.size(), "preprocess (the ranks' index data)");
    while (!in.at_end()) {
      const auto g = static_cast<std::size_t>(in.get<std::uint64_t>());
      if (g >= n || seen[g]) {
        throw Error("train-potential preprocess: graph " + std::to_string(g) + " of " + std::to_string(n) +
                    " came from two ranks or none");
      }
      seen[g] = true;
      entries[g].edges = in.get<std::uint32_t>();
      entries[g].angles = in.get<std::uint32_t>();
      flags[g] = in.get<std::uint8_t>();
      types[g] = in.get_string();
      summaries[g] = data::get_summary(in);
      summaries[g].edges = entries[g].edges;
      for (const auto& zc : summaries[g].composition) {
        entries[g].atoms += zc.second;
      }
      summaries[g].atoms = entries[g].atoms;
    }
    // In graph order, so that the config types are numbered as they first occur.
    for (std::size_t g = 0; g < n; ++g) {
      if (!seen[g]) {
        throw Error("train-potential preprocess: no rank wrote graph " + std::to_string(g) + " of " +
                    std::to_string(n));
      }
      entries[g].shard = static_cast<std::uint16_t>(g % static_cast<std::size_t>(world));
      entries[g].config_type = meta.add(types[g], summaries[g].composition, (flags[g] & 1) != 0,
                                        (flags[g] & 2) != 0, (flags[g] & 4) != 0);
    }
    data::write_store_index(partial, meta, entries, summaries);
    std::error_code ec;
    fs::rename(partial, dir, ec);
    if (ec) {
      throw FileError(dir, 0,
                      "cannot move the finished dataset into place from " + partial + ": " + ec.message());
    }
    std::uint64_t atoms = 0, edges = 0;
    for (const auto& e : entries) {
      atoms += e.atoms;
      edges += e.edges;
    }
    out << "preprocess: " << file << " -> " << dir << ": " << n << " graphs, " << atoms << " atoms, " << edges
        << " edges within " << cutoff << " A, " << world << " shard(s)"
        << (ds.skip_warning.empty() ? std::string() : "; " + ds.skip_warning) << '\n';
  }
  MPI_Barrier(comm);
}

}  // namespace

std::string preprocess_help() {
  return "Usage: train-potential preprocess --output DIR [--config FILE] [--KEY VALUE]...\n\n"
         "Reads the training configuration's --train_file (and --valid_file, --test_file when set) once and "
         "writes\n"
         "each as a preprocessed dataset: DIR/train, DIR/valid, DIR/test. Train on it with --train_file "
         "DIR/train\n"
         "(--valid_file DIR/valid, --test_file DIR/test) and the same data options (the label keys,\n"
         "--allow_missing, --config_type_weights, --keep_isolated_atoms, the loss weights that make labels\n"
         "required); a run with other data options is refused. The graphs' edge counts are made at --r_max\n"
         "(6 A with --model chgnet) and CHGNet's angles at 3 A. On several MPI ranks each rank writes its "
         "own\n"
         "shard. A directory is written whole or not at all; an existing one is never overwritten.\n"
         "See docs/train-potential.md, \"Preprocessed datasets\".\n";
}

int run_preprocess_command(const std::vector<std::string>& args, MPI_Comm comm, std::ostream& out) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      if (rank == 0) {
        out << preprocess_help();
      }
      return 0;
    }
  }
  const Args a = parse(args);
  const Options& o = a.options;
  const double cutoff = o.get_string("model") == "chgnet" ? kChgnetCutoff : o.get_float("r_max");
  // The reading options of a training run (train/run.cpp): IsolatedAtom frames give the E0s in the
  // training file and stay frames in the others.
  data::ReadOptions ro = data::read_options_from(o);
  ro.extract_isolated_atoms = true;
  if (rank == 0) {
    std::error_code ec;
    fs::create_directories(a.output, ec);
    if (ec) {
      throw FileError(a.output, 0, "cannot create the directory: " + ec.message());
    }
  }
  preprocess_file(o.get_string("train_file"), (fs::path(a.output) / "train").string(), ro, cutoff, comm, out);
  ro.extract_isolated_atoms = false;
  for (const auto& [option, name] :
       {std::pair<const char*, const char*>{"valid_file", "valid"}, {"test_file", "test"}}) {
    if (o.has(option)) {
      preprocess_file(o.get_string(option), (fs::path(a.output) / name).string(), ro, cutoff, comm, out);
    }
  }
  return 0;
}

}  // namespace fastmlip::trainer::train

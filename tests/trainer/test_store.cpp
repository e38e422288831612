// SPDX-License-Identifier: MIT
// Preprocessed datasets (trainer/data/store.hpp): every field of every configuration comes back
// bit for bit from two shards; damaged, truncated, missing, mismatched, unfinished and newer
// datasets are FileErrors naming the file and graph; a run with other reading options is refused.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../common/error_text.hpp"
#include "core/error.hpp"
#include "data/graph_set.hpp"
#include "data/statistics.hpp"
#include "data/store.hpp"
#include "io/atomic_file.hpp"

namespace fastmlip::trainer::data {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() / ("fastmlip_store_" + tag + "_" + std::to_string(::getpid()));
  fastmlip::io::remove_tree(p);
  fs::create_directories(p);
  return p.string();
}

/// Configurations with every optional part present in some and absent in others; odd sizes.
std::vector<Config> configs(int n, int size_offset = 0) {
  std::vector<Config> out;
  for (int k = 0; k < n; ++k) {
    Config c;
    const int atoms = 1 + (k * 3 + size_offset) % 7;
    for (int i = 0; i < atoms; ++i) {
      c.atomic_numbers.push_back(1 + (i * 7 + k) % 90);
      for (int a = 0; a < 3; ++a) {
        c.positions.push_back(std::sin(0.37 * (i + 1) * (a + 2) + k) * 4.1 + 1e-13 * k);
      }
    }
    if (k % 3 != 0) {
      c.cell = std::array<double, 9>{9.5 + k, 0.1, 0, 0, 10.25, -0.2, 0.03, 0, 11.0 / 3.0};
      c.pbc = {true, k % 2 == 0, true};
    }
    if (k % 4 != 1) {
      c.energy = -3.25 * atoms + std::cos(k) / 3.0;
    }
    if (k % 5 != 2) {
      for (int i = 0; i < 3 * atoms; ++i) {
        c.forces.push_back(std::tan(0.1 * i + k) / 7.0);
      }
    }
    if (k % 2 == 0) {
      c.stress = std::array<double, 9>{1e-3, 2e-4, -3e-5, 2e-4, 5e-3, 0, -3e-5, 0, -1.0 / 7.0};
    }
    if (k % 3 == 1) {
      c.virials = std::array<double, 9>{0.5, 0, 0, 0, 0.25, 0, 0, 0, -1.0 / 3.0};
    }
    if (k % 4 == 3) {
      for (int i = 0; i < atoms; ++i) {
        c.magmoms.push_back(0.1 * i + 1.0 / 9.0);
      }
    }
    if (k % 6 == 5) {
      c.total_charge = -1.0;
      c.total_spin = 2.0;
    }
    c.weight = 1.0 + k / 3.0;
    c.energy_weight = c.energy ? 0.5 : 0.0;
    c.forces_weight = 2.0;
    c.stress_weight = 1.0 / 3.0;
    c.virials_weight = 0.0;
    c.magmom_weight = 0.125;
    c.config_type = k % 3 == 0 ? "Default" : (k % 3 == 1 ? "bulk" : "surface with spaces");
    c.source = "data/set.xyz";
    c.line = 10 * k + 1;
    c.frame = k + 1;
    c.id = k % 2 ? "mp-" + std::to_string(k) + "-0-1" : "";
    out.push_back(std::move(c));
  }
  return out;
}

/// Writes `cs` as a dataset in `dir` with `shards` shards (graph g in shard g % shards).
/// With `counted`, the edges and summaries are the frames' own at r_max 5 (else made-up edges).
void write_store(const std::string& dir, const std::vector<Config>& cs, int shards, const ReadOptions& ro,
                 int version = kStoreVersion, bool counted = false) {
  fs::create_directories(dir);
  StoreMeta meta;
  meta.version = version;
  meta.shards = shards;
  meta.r_max = 5.0;
  meta.bond_cutoff = 3.0;
  meta.source = "data/set.xyz";
  meta.read_options = read_options_text(ro);
  meta.isolated_atom_energies = {{28, -1.5}, {29, -2.0 / 3.0}};
  meta.skipped = 2;
  meta.skip_warning = "data/set.xyz: skipped 2 of 19 frames";
  std::vector<StoreEntry> entries;
  std::vector<GraphSummary> summaries;
  for (int s = 0; s < shards; ++s) {
    ShardWriter w(dir, s);
    for (std::size_t g = static_cast<std::size_t>(s); g < cs.size(); g += static_cast<std::size_t>(shards)) {
      w.put(g, cs[g]);
    }
    w.close();
  }
  for (std::size_t g = 0; g < cs.size(); ++g) {
    summaries.push_back(summarize(cs[g], counted ? meta.r_max : 0.0));
    const auto edges = static_cast<std::uint32_t>(counted ? summaries.back().edges : 7 * g);
    entries.push_back({static_cast<std::uint32_t>(cs[g].natoms()), edges, static_cast<std::uint32_t>(g),
                       static_cast<std::uint16_t>(g % shards), meta.add(cs[g])});
  }
  write_store_index(dir, meta, entries, summaries);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

void expect_same(const Config& a, const Config& b, std::size_t g) {
  SCOPED_TRACE("graph " + std::to_string(g));
  EXPECT_EQ(a.atomic_numbers, b.atomic_numbers);
  EXPECT_TRUE(same_bits(a.positions, b.positions));
  EXPECT_EQ(a.cell, b.cell);
  EXPECT_EQ(a.pbc, b.pbc);
  EXPECT_EQ(a.energy, b.energy);
  EXPECT_TRUE(same_bits(a.forces, b.forces));
  EXPECT_EQ(a.stress, b.stress);
  EXPECT_EQ(a.virials, b.virials);
  EXPECT_TRUE(same_bits(a.magmoms, b.magmoms));
  EXPECT_EQ(a.total_charge, b.total_charge);
  EXPECT_EQ(a.total_spin, b.total_spin);
  EXPECT_EQ(a.weight, b.weight);
  EXPECT_EQ(a.energy_weight, b.energy_weight);
  EXPECT_EQ(a.forces_weight, b.forces_weight);
  EXPECT_EQ(a.stress_weight, b.stress_weight);
  EXPECT_EQ(a.virials_weight, b.virials_weight);
  EXPECT_EQ(a.magmom_weight, b.magmom_weight);
  EXPECT_EQ(a.config_type, b.config_type);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.line, b.line);
  EXPECT_EQ(a.frame, b.frame);
  EXPECT_EQ(a.id, b.id);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST(DatasetStore, EveryFieldComesBackBitForBitFromTwoShards) {
  const std::string dir = temp_dir("roundtrip") + "/set";
  const auto cs = configs(19);
  write_store(dir, cs, 2, ReadOptions{});
  ASSERT_TRUE(is_preprocessed_dataset(dir));
  const PreprocessedDataset ds(dir);
  ASSERT_EQ(ds.size(), cs.size());
  EXPECT_EQ(ds.meta().shards, 2);
  EXPECT_EQ(ds.meta().config_types, (std::vector<std::string>{"Default", "bulk", "surface with spaces"}));
  // Out of order, and each twice: a record is read on its own.
  for (std::size_t k = 0; k < 2 * cs.size(); ++k) {
    const std::size_t g = (k * 7) % cs.size();
    expect_same(ds.read(g), cs[g], g);
    EXPECT_EQ(ds.entries()[g].atoms, cs[g].natoms());
    EXPECT_EQ(ds.entries()[g].edges, 7 * g);
    EXPECT_EQ(ds.entries()[g].shard, g % 2);
  }
  const Dataset whole = read_preprocessed(dir, ReadOptions{});
  ASSERT_EQ(whole.configs.size(), cs.size());
  for (std::size_t g = 0; g < cs.size(); ++g) {
    expect_same(whole.configs[g], cs[g], g);
  }
  EXPECT_EQ(whole.isolated_atom_energies, (std::map<int, double>{{28, -1.5}, {29, -2.0 / 3.0}}));
  EXPECT_EQ(whole.skipped, 2u);
  EXPECT_EQ(whole.skip_warning, "data/set.xyz: skipped 2 of 19 frames");
  fastmlip::io::remove_tree(fs::path(dir).parent_path());
}

TEST(DatasetStore, AGraphSetReadsOnlyTheGraphsItLoads) {
  const std::string dir = temp_dir("graphset") + "/set";
  const auto cs = configs(17, 2);
  write_store(dir, cs, 3, ReadOptions{});
  const auto store = std::make_shared<const PreprocessedDataset>(dir);
  const GraphSet stored(store), memory(cs);
  const std::vector<std::size_t> picks{16, 4, 9, 0, 11};
  const GraphSet part = stored.subset(picks), memory_part = memory.subset(picks);
  ASSERT_EQ(part.size(), picks.size());
  // Sizes and types come from the index: nothing is read for them.
  EXPECT_EQ(part.config_types(), memory_part.config_types());
  for (std::size_t i = 0; i < picks.size(); ++i) {
    EXPECT_EQ(part.natoms(i), cs[picks[i]].natoms());
    EXPECT_EQ(part.config_type(i), cs[picks[i]].config_type);
    EXPECT_EQ(part.graph(i), picks[i]);
  }
  EXPECT_EQ(store->records_read(), 0u);
  // A subset of a subset picks from the dataset's graphs.
  const GraphSet two = part.subset({3, 1});
  expect_same(two.load(0), cs[0], 0);
  expect_same(two.load(1), cs[4], 4);
  EXPECT_EQ(store->records_read(), 2u);
  std::size_t i = 0;
  part.for_each([&](const Config& c) { expect_same(c, cs[picks[i]], picks[i]), ++i; });
  EXPECT_EQ(store->records_read(), 2u + picks.size());
  EXPECT_THROW(part.load(picks.size()), Error);
  fastmlip::io::remove_tree(fs::path(dir).parent_path());
}

TEST(DatasetStore, StatisticsFromTheIndexAreTheFramesOwnBitForBit) {
  const std::string dir = temp_dir("statistics") + "/set";
  auto cs = configs(23, 1);
  for (auto& c : cs) {
    if (!c.energy) {
      c.energy = -1.5 * static_cast<double>(c.natoms()) + 0.01;
    }
  }
  write_store(dir, cs, 3, ReadOptions{}, kStoreVersion, /*counted=*/true);
  const auto store = std::make_shared<const PreprocessedDataset>(dir);
  const GraphSet stored(store), memory(cs);
  const std::vector<std::size_t> picks{5, 0, 17, 3, 22, 11, 9, 14};
  const auto same = [](const GraphSet& a, const GraphSet& b) {
    EXPECT_EQ(elements_of(a), elements_of(b));
    const E0Map e0s = fit_e0s(a);
    EXPECT_EQ(e0s, fit_e0s(b));  // exact: the same rows in the same order
    EXPECT_EQ(avg_num_neighbors(a, 5.0), avg_num_neighbors(b, 5.0));
    for (const char* scaling : {"std_scaling", "rms_forces_scaling"}) {
      const ScaleShift x = compute_scale_shift(scaling, a, e0s), y = compute_scale_shift(scaling, b, e0s);
      EXPECT_EQ(x.mean, y.mean) << scaling;
      EXPECT_EQ(x.std, y.std) << scaling;
    }
  };
  same(stored, memory);
  same(stored.subset(picks), memory.subset(picks));
  EXPECT_EQ(store->records_read(), 0u);  // from the index alone
  // At another r_max than the dataset's, the neighbours are counted from the frames: the same.
  EXPECT_EQ(avg_num_neighbors(stored, 4.0), avg_num_neighbors(memory, 4.0));
  EXPECT_EQ(store->records_read(), cs.size());
  fastmlip::io::remove_tree(fs::path(dir).parent_path());
}

TEST(DatasetStore, AFullDiskIsAClearErrorNamingTheShard) {
  // A file size limit fails the write that crosses it as a full disk does (train-potential
  // ignores SIGXFSZ, as this test does while the limit holds).
  const std::string dir = temp_dir("full");
  const auto cs = configs(40);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 48 * 1024;
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string msg = test::error_of([&] {
    ShardWriter w(dir, 0);
    for (std::uint64_t g = 0; g < 2000; ++g) {
      w.put(g, cs[g % cs.size()]);
    }
    w.close();
  });
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  EXPECT_NE(msg.find(dir + "/shard-00000.mdb"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the disk is full"), std::string::npos) << msg;
  fastmlip::io::remove_tree(dir);
}

TEST(DatasetStore, OtherReadingOptionsAreRefusedNamingTheOption) {
  const std::string dir = temp_dir("options") + "/set";
  write_store(dir, configs(3), 1, ReadOptions{});
  ReadOptions other;
  other.keys.energy = "dft_energy";
  const std::string msg = test::error_of([&] { read_preprocessed(dir, other); });
  EXPECT_NE(msg.find(dir), std::string::npos) << msg;
  EXPECT_NE(msg.find("energy_key \"REF_energy\" there, \"dft_energy\" here"), std::string::npos) << msg;
  EXPECT_NE(msg.find("preprocess again"), std::string::npos) << msg;
  other = ReadOptions{};
  other.config_type_weights = {{"Default", 1.0}, {"bulk", 2.0}};
  EXPECT_NE(test::error_of([&] { read_preprocessed(dir, other); }).find("config_type_weights"),
            std::string::npos);
  fastmlip::io::remove_tree(fs::path(dir).parent_path());
}

TEST(DatasetStore, DamagedDatasetsAreClearErrorsNamingTheFileAndGraph) {
  const std::string root = temp_dir("damage");
  const auto cs = configs(9);
  const auto fresh = [&](const std::string& name) {
    const std::string dir = root + "/" + name;
    write_store(dir, cs, 2, ReadOptions{});
    return dir;
  };

  {  // One flipped bit in graph 4's energy (shard 0): its checksum no longer matches.
    const std::string dir = fresh("flipped");
    const std::string shard = dir + "/shard-00000.mdb";
    std::string bytes = slurp(shard);
    const double e = *cs[4].energy;
    // Every copy: LMDB may leave a stale one in a page's free space.
    const std::string pattern(reinterpret_cast<const char*>(&e), sizeof e);
    int flipped = 0;
    for (auto at = bytes.find(pattern); at != std::string::npos; at = bytes.find(pattern, at + 1)) {
      bytes[at + 3] ^= 0x10;
      ++flipped;
    }
    ASSERT_GE(flipped, 1);
    spit(shard, bytes);
    const PreprocessedDataset ds(dir);
    const std::string msg = test::error_of([&] { ds.read(4); });
    EXPECT_NE(msg.find(shard + " (graph 4)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
    expect_same(ds.read(2), cs[2], 2);  // the others still read
  }
  {  // A truncated shard.
    const std::string dir = fresh("truncated");
    const std::string shard = dir + "/shard-00001.mdb";
    fs::resize_file(shard, fs::file_size(shard) / 2);
    const PreprocessedDataset ds(dir);
    const std::string msg = test::error_of([&] { ds.read(3); });
    EXPECT_NE(msg.find(shard), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  }
  {  // A missing shard.
    const std::string dir = fresh("missing");
    fs::remove(dir + "/shard-00001.mdb");
    const PreprocessedDataset ds(dir);
    expect_same(ds.read(0), cs[0], 0);
    const std::string msg = test::error_of([&] { ds.read(1); });
    EXPECT_NE(msg.find(dir + "/shard-00001.mdb"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing shard"), std::string::npos) << msg;
  }
  {  // A shard from another run: the index and the record disagree.
    const std::string dir = fresh("mixed");
    const std::string other = root + "/other";
    write_store(other, configs(9, 1), 2, ReadOptions{});
    fs::copy_file(other + "/shard-00000.mdb", dir + "/shard-00000.mdb", fs::copy_options::overwrite_existing);
    const PreprocessedDataset ds(dir);
    const std::string msg = test::error_of([&] { ds.read(0); });
    EXPECT_NE(msg.find("(graph 0)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("disagrees with the index"), std::string::npos) << msg;
  }
  {  // A dataset written by a newer version.
    const std::string dir = root + "/newer";
    write_store(dir, cs, 1, ReadOptions{}, kStoreVersion + 1);
    const std::string msg = test::error_of([&] { PreprocessedDataset ds(dir); });
    EXPECT_NE(msg.find(dir + "/index.mdb"), std::string::npos) << msg;
    EXPECT_NE(msg.find("newer fastmlip"), std::string::npos) << msg;
  }
  {  // One written by an older version, whose index lacks what this one's holds.
    const std::string dir = root + "/older";
    write_store(dir, cs, 1, ReadOptions{}, kStoreVersion - 1);
    const std::string msg = test::error_of([&] { PreprocessedDataset ds(dir); });
    EXPECT_NE(msg.find("older fastmlip (dataset version 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("preprocess the data again"), std::string::npos) << msg;
  }
  {  // A flipped bit in the index's per-graph table.
    const std::string dir = fresh("index");
    std::string bytes = slurp(dir + "/index.mdb");
    // Graph 5's record: atoms, then edges = 35, angles = 5 (write_store's numbers).
    const std::uint32_t tail[3] = {static_cast<std::uint32_t>(cs[5].natoms()), 35, 5};
    const auto at = bytes.find(std::string(reinterpret_cast<const char*>(tail), sizeof tail));
    ASSERT_NE(at, std::string::npos);
    bytes[at + 4] ^= 0x01;
    spit(dir + "/index.mdb", bytes);
    const std::string msg = test::error_of([&] { PreprocessedDataset ds(dir); });
    EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
    EXPECT_NE(msg.find("damaged index"), std::string::npos) << msg;
  }
  {  // An unfinished one (no index yet), and a directory that is no dataset at all.
    const std::string dir = root + "/unfinished";
    fs::create_directories(partial_dir_of(dir));
    ShardWriter(partial_dir_of(dir), 0).close();
    EXPECT_FALSE(is_preprocessed_dataset(partial_dir_of(dir)));
    const std::string msg = test::error_of([&] { PreprocessedDataset ds(partial_dir_of(dir)); });
    EXPECT_NE(msg.find("did not finish"), std::string::npos) << msg;
    EXPECT_NE(test::error_of([&] { PreprocessedDataset ds(root); }).find("no index"), std::string::npos);
    EXPECT_NE(test::error_of([&] { PreprocessedDataset ds(root + "/nowhere"); }).find("no such directory"),
              std::string::npos);
  }
  fastmlip::io::remove_tree(root);
}

}  // namespace
}  // namespace fastmlip::trainer::data

// SPDX-License-Identifier: MIT
#include "data/store.hpp"

#include <lmdb.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.hpp"
#include "data/graph_record.hpp"

namespace fastmlip::trainer::data {
namespace {

namespace fs = std::filesystem;

constexpr char kFormat[] = "fastmlip-dataset";
constexpr char kIndexFile[] = "index.mdb";
constexpr std::size_t kEntryBytes = 16;
/// The address space an LMDB file may grow into: reserved, not allocated (the file grows as
/// pages are written). 1 TiB per shard is far beyond any dataset of today.
constexpr std::size_t kMapSize = std::size_t{1} << 40;
/// Records per write transaction: bounds the dirty pages a writer holds.
constexpr int kRecordsPerCommit = 512;

std::string shard_name(int shard) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard-%05d.mdb", shard);
  return buf;
}

std::string lmdb_message(int rc) { return std::string(mdb_strerror(rc)); }

/// Big-endian graph number: LMDB orders keys bytewise, so the database keeps graph order.
void graph_key(std::uint64_t g, unsigned char out[8]) {
  for (int b = 0; b < 8; ++b) {
    out[b] = static_cast<unsigned char>(g >> (56 - 8 * b));
  }
}

/// An LMDB environment on one file, closed on destruction.
class Env {
 public:
  Env(const std::string& path, bool write) : m_path(path) {
    int rc = mdb_env_create(&m_env);
    if (rc == 0) {
      rc = mdb_env_set_mapsize(m_env, kMapSize);
    }
    // Read-only readers take no lock file and no lock: the files never change after the rename,
    // and a read-only or shared filesystem then works.
    const unsigned flags = MDB_NOSUBDIR | MDB_NOLOCK | (write ? 0u : MDB_RDONLY);
    if (rc == 0) {
      rc = mdb_env_open(m_env, path.c_str(), flags, 0644);
    }
    if (rc != 0) {
      if (m_env != nullptr) {
        mdb_env_close(m_env);
        m_env = nullptr;
      }
      throw FileError(path, 0,
                      std::string(write ? "cannot create" : "cannot open") +
                          " the database: " + lmdb_message(rc) +
                          (rc == ENOENT ? " (a missing shard or index: preprocess the data again)" : ""));
    }
    if (!write) {
      // LMDB maps the file and trusts its header's page count: a truncated file would fault on
      // the first page past its end, so that is checked here, against the file's size.
      MDB_envinfo info;
      MDB_stat st;
      std::error_code ec;
      const auto bytes = fs::file_size(path, ec);
      if (mdb_env_info(m_env, &info) != 0 || mdb_env_stat(m_env, &st) != 0 || ec ||
          (static_cast<std::uintmax_t>(info.me_last_pgno) + 1) * st.ms_psize > bytes) {
        mdb_env_close(m_env);
        m_env = nullptr;
        throw FileError(path, 0,
                        "the file is shorter than its header says (truncated: preprocess the data again)");
      }
    }
  }
  ~Env() {
    if (m_env != nullptr) {
      mdb_env_close(m_env);
    }
  }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  MDB_env* get() const { return m_env; }
  const std::string& path() const { return m_path; }
  [[noreturn]] void fail(const std::string& what, int rc) const {
    throw FileError(
        m_path, 0,
        what + ": " + lmdb_message(rc) +
            // LMDB reports a short write (what a disk that fills mid-page gives) as EIO.
            (rc == ENOSPC || rc == EDQUOT || rc == EFBIG || rc == EIO || rc == MDB_MAP_FULL
                 ? " (the disk is full, a quota or file size limit was reached, or the device failed: free "
                   "space and preprocess again)"
                 : ""));
  }

 private:
  MDB_env* m_env = nullptr;
  std::string m_path;
};

/// A read transaction and the unnamed database, for reads of one value at a time.
struct ReadTxn {
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  explicit ReadTxn(const Env& env) {
    int rc = mdb_txn_begin(env.get(), nullptr, MDB_RDONLY, &txn);
    if (rc == 0) {
      rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
    }
    if (rc != 0) {
      if (txn != nullptr) {
        mdb_txn_abort(txn);
      }
      env.fail("cannot read the database", rc);
    }
  }
  ~ReadTxn() { mdb_txn_abort(txn); }
  ReadTxn(const ReadTxn&) = delete;
  ReadTxn& operator=(const ReadTxn&) = delete;
  /// The value of `key`, or false when there is none.
  bool get(const void* key, std::size_t key_size, MDB_val& value) const {
    MDB_val k{key_size, const_cast<void*>(key)};
    return mdb_get(txn, dbi, &k, &value) == 0;
  }
};

/// Writes key/value pairs, committing every kRecordsPerCommit.
class WriteTxn {
 public:
  explicit WriteTxn(const Env& env) : m_env(env) { begin(); }
  ~WriteTxn() {
    if (m_txn != nullptr) {
      mdb_txn_abort(m_txn);
    }
  }
  WriteTxn(const WriteTxn&) = delete;
  WriteTxn& operator=(const WriteTxn&) = delete;
  void put(const void* key, std::size_t key_size, const std::string& value) {
    MDB_val k{key_size, const_cast<void*>(key)};
    MDB_val v{value.size(), const_cast<char*>(value.data())};
    const int rc = mdb_put(m_txn, m_dbi, &k, &v, MDB_NOOVERWRITE);
    if (rc != 0) {
      m_env.fail("cannot write a record", rc);
    }
    if (++m_pending == kRecordsPerCommit) {
      commit();
      begin();
    }
  }
  void commit() {
    MDB_txn* t = m_txn;
    m_txn = nullptr;
    m_pending = 0;
    const int rc = mdb_txn_commit(t);
    if (rc != 0) {
      m_env.fail("cannot commit records", rc);
    }
  }

 private:
  void begin() {
    int rc = mdb_txn_begin(m_env.get(), nullptr, 0, &m_txn);
    if (rc == 0) {
      rc = mdb_dbi_open(m_txn, nullptr, 0, &m_dbi);
    }
    if (rc != 0) {
      m_env.fail("cannot start writing", rc);
    }
  }
  const Env& m_env;
  MDB_txn* m_txn = nullptr;
  MDB_dbi m_dbi = 0;
  int m_pending = 0;
};

/// This machine's byte order, as the index records it.
std::string byte_order() {
  const std::uint16_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1 ? "little" : "big";
}

}  // namespace

std::string read_options_text(const ReadOptions& o) {
  nlohmann::json j;
  j["energy_key"] = o.keys.energy;
  j["forces_key"] = o.keys.forces;
  j["stress_key"] = o.keys.stress;
  j["virials_key"] = o.keys.virials;
  j["require_energy"] = o.require_energy;
  j["require_forces"] = o.require_forces;
  j["require_stress"] = o.require_stress;
  j["allow_missing"] = o.allow_missing;
  j["config_type_weights"] = nlohmann::json::array();
  for (const auto& [type, w] : o.config_type_weights) {
    j["config_type_weights"].push_back({type, w});
  }
  j["extract_isolated_atoms"] = o.extract_isolated_atoms;
  j["keep_isolated_atoms"] = o.keep_isolated_atoms;
  return j.dump();
}

bool is_preprocessed_dataset(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / kIndexFile, ec);
}

std::string partial_dir_of(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') {
    d.pop_back();
  }
  return d + ".partial";
}

struct ShardWriter::Impl {
  Env env;
  std::optional<WriteTxn> txn;
  Impl(const std::string& path) : env(path, true) { txn.emplace(env); }
};

ShardWriter::ShardWriter(const std::string& dir, int shard)
    : m(std::make_unique<Impl>((fs::path(dir) / shard_name(shard)).string())) {}
ShardWriter::~ShardWriter() = default;

void ShardWriter::put(std::uint64_t graph, const Config& config) {
  unsigned char key[8];
  graph_key(graph, key);
  m->txn->put(key, sizeof key, encode_graph_record(config));
}

void ShardWriter::close() {
  m->txn->commit();
  m->txn.reset();
  const int rc = mdb_env_sync(m->env.get(), 1);
  if (rc != 0) {
    m->env.fail("cannot flush the shard to disk", rc);
  }
}

void write_store_index(const std::string& dir, const StoreMeta& meta, const std::vector<StoreEntry>& entries,
                       const std::vector<GraphSummary>& summaries) {
  if (summaries.size() != entries.size()) {
    throw Error("write_store_index: " + std::to_string(summaries.size()) + " summaries for " +
                std::to_string(entries.size()) + " graphs");
  }
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = meta.version;
  j["byte_order"] = byte_order();
  j["graphs"] = entries.size();
  j["shards"] = meta.shards;
  j["r_max"] = meta.r_max;
  j["bond_cutoff"] = meta.bond_cutoff;
  j["source"] = meta.source;
  j["read_options"] = meta.read_options;
  j["isolated_atom_energies"] = nlohmann::json::array();
  for (const auto& [z, e] : meta.isolated_atom_energies) {
    j["isolated_atom_energies"].push_back({z, e});
  }
  j["config_types"] = meta.config_types;
  j["elements"] = meta.elements;
  j["any_magmoms"] = meta.any_magmoms;
  j["any_stress_or_virials"] = meta.any_stress_or_virials;
  j["any_cell"] = meta.any_cell;
  j["skipped"] = meta.skipped;
  j["skip_warning"] = meta.skip_warning;
  ByteWriter b;
  for (const auto& e : entries) {
    b.put(e.atoms);
    b.put(e.edges);
    b.put(e.angles);
    b.put(e.shard);
    b.put(e.config_type);
  }
  ByteWriter blob;
  blob.put(crc32_of(b.str().data(), b.str().size()));
  blob.str() += b.str();
  ByteWriter sb;
  for (const auto& g : summaries) {
    put_summary(sb, g);
  }
  ByteWriter sums;
  sums.put(crc32_of(sb.str().data(), sb.str().size()));
  sums.str() += sb.str();
  const std::string path = (fs::path(dir) / kIndexFile).string();
  Env env(path, true);
  WriteTxn txn(env);
  txn.put("meta", 4, j.dump());
  txn.put("graphs", 6, blob.str());
  txn.put("summaries", 9, sums.str());
  txn.commit();
  const int rc = mdb_env_sync(env.get(), 1);
  if (rc != 0) {
    env.fail("cannot flush the index to disk", rc);
  }
}

struct PreprocessedDataset::Impl {
  std::string dir;
  StoreMeta meta;
  std::vector<StoreEntry> entries;
  std::vector<std::unique_ptr<Env>> shards;  // opened on first read
  std::mutex open_mutex;                     // guards `shards` (read() may run on several threads)
  std::atomic<std::uint64_t> records_read{0};
};

PreprocessedDataset::PreprocessedDataset(const std::string& dir) : m(std::make_unique<Impl>()) {
  m->dir = dir;
  const std::string index = (fs::path(dir) / kIndexFile).string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw FileError(
        dir, 0, "not a preprocessed dataset: no such directory (make one with train-potential preprocess)");
  }
  if (!fs::is_regular_file(index, ec)) {
    const bool partial = dir.size() > 8 && dir.compare(dir.size() - 8, 8, ".partial") == 0;
    throw FileError(index, 0,
                    partial
                        ? "a dataset whose preprocessing did not finish: run train-potential preprocess again"
                        : "not a preprocessed dataset: no index (make one with train-potential preprocess)");
  }
  Env env(index, false);
  ReadTxn txn(env);
  MDB_val v;
  if (!txn.get("meta", 4, v)) {
    throw FileError(index, 0, "the index has no 'meta' record (damaged, or not a fastmlip dataset)");
  }
  nlohmann::json j;
  std::uint64_t graphs = 0;
  try {
    j = nlohmann::json::parse(static_cast<const char*>(v.mv_data),
                              static_cast<const char*>(v.mv_data) + v.mv_size);
    if (j.at("format").get<std::string>() != kFormat) {
      throw FileError(index, 0, "format '" + j.at("format").get<std::string>() + "', not a fastmlip dataset");
    }
    m->meta.version = j.at("version").get<int>();
    if (m->meta.version > kStoreVersion) {
      throw FileError(index, 0,
                      "written by a newer fastmlip (dataset version " + std::to_string(m->meta.version) +
                          ", this build reads up to " + std::to_string(kStoreVersion) +
                          "): update fastmlip or preprocess the data again with this one");
    }
    if (m->meta.version < kStoreVersion) {
      throw FileError(index, 0,
                      "written by an older fastmlip (dataset version " + std::to_string(m->meta.version) +
                          ", this build reads version " + std::to_string(kStoreVersion) +
                          "): preprocess the data again with this one");
    }
    if (j.at("byte_order").get<std::string>() != byte_order()) {
      throw FileError(index, 0,
                      "written on a " + j.at("byte_order").get<std::string>() +
                          "-endian machine; preprocess the data again on this one");
    }
    graphs = j.at("graphs").get<std::uint64_t>();
    m->meta.shards = j.at("shards").get<int>();
    m->meta.r_max = j.at("r_max").get<double>();
    m->meta.bond_cutoff = j.at("bond_cutoff").get<double>();
    m->meta.source = j.at("source").get<std::string>();
    m->meta.read_options = j.at("read_options").get<std::string>();
    for (const auto& p : j.at("isolated_atom_energies")) {
      m->meta.isolated_atom_energies[p.at(0).get<int>()] = p.at(1).get<double>();
    }
    m->meta.config_types = j.at("config_types").get<std::vector<std::string>>();
    m->meta.elements = j.at("elements").get<std::vector<int>>();
    m->meta.any_magmoms = j.at("any_magmoms").get<bool>();
    m->meta.any_stress_or_virials = j.at("any_stress_or_virials").get<bool>();
    m->meta.any_cell = j.at("any_cell").get<bool>();
    m->meta.skipped = j.at("skipped").get<std::size_t>();
    m->meta.skip_warning = j.at("skip_warning").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw FileError(index, 0, std::string("the index's 'meta' record is damaged: ") + e.what());
  }
  if (m->meta.shards < 1 || m->meta.shards > 65535) {
    throw FileError(index, 0, "the index claims " + std::to_string(m->meta.shards) + " shards");
  }
  if (!txn.get("graphs", 6, v)) {
    throw FileError(index, 0, "the index has no 'graphs' record (damaged)");
  }
  const char* p = static_cast<const char*>(v.mv_data);
  if (v.mv_size < 4 || (v.mv_size - 4) != graphs * kEntryBytes) {
    throw FileError(index, 0,
                    "the 'graphs' record holds " + std::to_string(v.mv_size) + " bytes for " +
                        std::to_string(graphs) + " graphs (damaged index)");
  }
  std::uint32_t crc;
  std::memcpy(&crc, p, 4);
  if (crc32_of(p + 4, v.mv_size - 4) != crc) {
    throw FileError(index, 0, "the per-graph table's checksum does not match its bytes (damaged index)");
  }
  ByteReader r(p + 4, v.mv_size - 4, index);
  m->entries.resize(graphs);
  for (std::size_t g = 0; g < m->entries.size(); ++g) {
    auto& e = m->entries[g];
    e.atoms = r.get<std::uint32_t>();
    e.edges = r.get<std::uint32_t>();
    e.angles = r.get<std::uint32_t>();
    e.shard = r.get<std::uint16_t>();
    e.config_type = r.get<std::uint16_t>();
    if (e.shard >= m->meta.shards || e.config_type >= m->meta.config_types.size()) {
      throw FileError(index, 0,
                      "graph " + std::to_string(g) + " names shard " + std::to_string(e.shard) +
                          " and config type " + std::to_string(e.config_type) + " (damaged index)");
    }
  }
  m->shards.resize(static_cast<std::size_t>(m->meta.shards));
}

PreprocessedDataset::~PreprocessedDataset() = default;
PreprocessedDataset::PreprocessedDataset(PreprocessedDataset&&) noexcept = default;
PreprocessedDataset& PreprocessedDataset::operator=(PreprocessedDataset&&) noexcept = default;

const std::string& PreprocessedDataset::path() const noexcept { return m->dir; }
const StoreMeta& PreprocessedDataset::meta() const noexcept { return m->meta; }
const std::vector<StoreEntry>& PreprocessedDataset::entries() const noexcept { return m->entries; }
std::vector<GraphSummary> PreprocessedDataset::summaries() const {
  const std::string index = (fs::path(m->dir) / kIndexFile).string();
  Env env(index, false);
  ReadTxn txn(env);
  MDB_val v;
  if (!txn.get("summaries", 9, v)) {
    throw FileError(index, 0, "the index has no 'summaries' record (damaged)");
  }
  const char* p = static_cast<const char*>(v.mv_data);
  std::uint32_t crc = 0;
  if (v.mv_size < 4 || (std::memcpy(&crc, p, 4), crc32_of(p + 4, v.mv_size - 4) != crc)) {
    throw FileError(index, 0, "the per-graph summaries' checksum does not match their bytes (damaged index)");
  }
  ByteReader r(p + 4, v.mv_size - 4, index + " (summaries)");
  std::vector<GraphSummary> out(m->entries.size());
  for (std::size_t g = 0; g < out.size(); ++g) {
    GraphSummary& s = out[g];
    s = get_summary(r);
    s.atoms = m->entries[g].atoms;
    s.edges = m->entries[g].edges;
    std::uint64_t atoms = 0;
    for (const auto& zc : s.composition) {
      atoms += zc.second;
    }
    if (atoms != s.atoms || s.connected > s.atoms) {
      throw FileError(index, 0,
                      "graph " + std::to_string(g) + "'s summary counts " + std::to_string(atoms) +
                          " atoms, the per-graph table " + std::to_string(s.atoms) + " (damaged index)");
    }
  }
  if (!r.at_end()) {
    throw FileError(index, 0, "the per-graph summaries run past their last graph (damaged index)");
  }
  return out;
}

std::uint64_t PreprocessedDataset::records_read() const noexcept { return m->records_read.load(); }

Config PreprocessedDataset::read(std::uint64_t g) const {
  if (g >= m->entries.size()) {
    throw InputError(m->dir + ": graph " + std::to_string(g) + " of " + std::to_string(m->entries.size()));
  }
  const StoreEntry& e = m->entries[g];
  const Env* shard = nullptr;
  {
    std::lock_guard<std::mutex> lock(m->open_mutex);
    auto& env = m->shards[e.shard];
    if (!env) {
      env = std::make_unique<Env>((fs::path(m->dir) / shard_name(e.shard)).string(), false);
    }
    shard = env.get();
  }
  const Env* env = shard;
  const std::string where = env->path() + " (graph " + std::to_string(g) + ")";
  ReadTxn txn(*env);
  unsigned char key[8];
  graph_key(g, key);
  MDB_val v;
  if (!txn.get(key, sizeof key, v)) {
    throw FileError(where, 0,
                    "the index lists this graph here but the shard lacks it (damaged or mismatched shard: "
                    "preprocess the data again)");
  }
  Config c = decode_graph_record(static_cast<const char*>(v.mv_data), v.mv_size, where);
  ++m->records_read;
  if (c.natoms() != e.atoms || c.config_type != m->meta.config_types[e.config_type]) {
    throw FileError(where, 0,
                    "the record (" + std::to_string(c.natoms()) + " atoms, config_type '" + c.config_type +
                        "') disagrees with the index (" + std::to_string(e.atoms) + " atoms, '" +
                        m->meta.config_types[e.config_type] +
                        "'): the index and shards come from different runs; preprocess again");
  }
  return c;
}

void check_store_options(const PreprocessedDataset& store, const ReadOptions& options, StoreCheck check) {
  const std::string& dir = store.path();
  const std::string want = read_options_text(options);
  if (store.meta().read_options != want) {
    nlohmann::json have;
    try {
      have = nlohmann::json::parse(store.meta().read_options);
    } catch (const nlohmann::json::exception& e) {
      throw FileError(dir + "/" + kIndexFile, 0,
                      std::string("the stored reading options are damaged: ") + e.what());
    }
    const auto asked = nlohmann::json::parse(want);
    std::string diff;
    for (auto it = asked.begin(); it != asked.end(); ++it) {
      const std::string& k = it.key();
      const bool key = k.size() > 4 && k.compare(k.size() - 4, 4, "_key") == 0;
      if (check == StoreCheck::kLabelKeys && !key) {
        continue;
      }
      if (!have.contains(k) || have.at(k) != it.value()) {
        diff += (diff.empty() ? "" : ", ") + it.key() + " " +
                (have.contains(it.key()) ? have.at(it.key()).dump() : std::string("(unset)")) + " there, " +
                it.value().dump() + " here";
      }
    }
    if (!diff.empty()) {
      throw FileError(
          dir, 0,
          "preprocessed with other reading options than this run's (" + diff +
              "): its labels and weights would not be this run's; run train-potential preprocess again "
              "with these options, or use the options it was made with");
    }
  }
}

Dataset read_preprocessed(const std::string& dir, const ReadOptions& options, StoreCheck check) {
  PreprocessedDataset store(dir);
  check_store_options(store, options, check);
  Dataset ds;
  ds.configs.reserve(store.size());
  for (std::uint64_t g = 0; g < store.size(); ++g) {
    ds.configs.push_back(store.read(g));
  }
  ds.isolated_atom_energies = store.meta().isolated_atom_energies;
  ds.skipped = store.meta().skipped;
  ds.skip_warning = store.meta().skip_warning;
  return ds;
}

}  // namespace fastmlip::trainer::data

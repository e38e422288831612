// SPDX-License-Identifier: MIT
// data/store.hpp in a build without LMDB (a kernels-only build on a bare GPU machine): a dataset
// directory is still recognised, and reading or writing one says what the build lacks.
#include <filesystem>

#include "core/error.hpp"
#include "data/store.hpp"

namespace fastmlip::trainer::data {
namespace {

[[noreturn]] void missing(const std::string& path) {
  throw UnsupportedError(path +
                         ": preprocessed datasets need LMDB, and this build of fastmlip has none: install "
                         "liblmdb-dev (scripts/install-deps.sh) and build again");
}

}  // namespace

std::string read_options_text(const ReadOptions&) { missing("read_options_text"); }

bool is_preprocessed_dataset(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(std::filesystem::path(path) / "index.mdb", ec);
}

std::string partial_dir_of(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') {
    d.pop_back();
  }
  return d + ".partial";
}

struct ShardWriter::Impl {};
ShardWriter::ShardWriter(const std::string& dir, int) { missing(dir); }
ShardWriter::~ShardWriter() = default;
void ShardWriter::put(std::uint64_t, const Config&) { missing("ShardWriter"); }
void ShardWriter::close() { missing("ShardWriter"); }

void write_store_index(const std::string& dir, const StoreMeta&, const std::vector<StoreEntry>&,
                       const std::vector<GraphSummary>&) {
  missing(dir);
}

struct PreprocessedDataset::Impl {
  std::string dir;
  StoreMeta meta;
  std::vector<StoreEntry> entries;
};
PreprocessedDataset::PreprocessedDataset(const std::string& dir) { missing(dir); }
PreprocessedDataset::~PreprocessedDataset() = default;
PreprocessedDataset::PreprocessedDataset(PreprocessedDataset&&) noexcept = default;
PreprocessedDataset& PreprocessedDataset::operator=(PreprocessedDataset&&) noexcept = default;
const std::string& PreprocessedDataset::path() const noexcept { return m->dir; }
const StoreMeta& PreprocessedDataset::meta() const noexcept { return m->meta; }
const std::vector<StoreEntry>& PreprocessedDataset::entries() const noexcept { return m->entries; }
Config PreprocessedDataset::read(std::uint64_t) const { missing(m->dir); }
std::vector<GraphSummary> PreprocessedDataset::summaries() const { missing(m->dir); }
std::uint64_t PreprocessedDataset::records_read() const noexcept { return 0; }

void check_store_options(const PreprocessedDataset& store, const ReadOptions&, StoreCheck) {
  missing(store.path());
}

Dataset read_preprocessed(const std::string& dir, const ReadOptions&, StoreCheck) { missing(dir); }

}  // namespace fastmlip::trainer::data

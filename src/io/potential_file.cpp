// SPDX-License-Identifier: MIT
#include "io/potential_file.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>
#include <utility>

#include <zlib.h>

#include "core/elements.hpp"
#include "io/atomic_file.hpp"

namespace fastmlip::io {

namespace {

using json = nlohmann::json;

struct DTypeInfo {
  DType dtype;
  const char* name;
  std::size_t size;
};

// Names exactly as safetensors spells them.
constexpr std::array<DTypeInfo, 15> kDTypes{{
    {DType::BOOL, "BOOL", 1},
    {DType::U8, "U8", 1},
    {DType::I8, "I8", 1},
    {DType::F8_E4M3, "F8_E4M3", 1},
    {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::U16, "U16", 2},
    {DType::I16, "I16", 2},
    {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},
    {DType::U32, "U32", 4},
    {DType::I32, "I32", 4},
    {DType::F32, "F32", 4},
    {DType::U64, "U64", 8},
    {DType::I64, "I64", 8},
    {DType::F64, "F64", 8},
}};

const DTypeInfo& info(DType dtype) noexcept {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) {
      return d;
    }
  }
  return kDTypes.back();  // unreachable for a valid enumerator
}

std::string known_dtype_names() {
  std::string out;
  for (const auto& d : kDTypes) {
    out += (out.empty() ? "" : ", ") + std::string(d.name);
  }
  return out;
}

bool is_signed_int(DType d) noexcept {
  return d == DType::I8 || d == DType::I16 || d == DType::I32 || d == DType::I64;
}
bool is_unsigned_int(DType d) noexcept {
  return d == DType::U8 || d == DType::U16 || d == DType::U32 || d == DType::U64;
}

constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kFormatKey = "format";
constexpr const char* kVersionKey = "format_version";
constexpr const char* kFastmlipKey = "fastmlip";
constexpr const char* kInMemoryName = "<potential in memory>";

// Model kinds this build has loaders for; a file naming another one needs a newer fastmlip.
constexpr std::array<const char*, 2> kModelKinds{{"mace", "chgnet"}};

/// Product of extents with overflow and sign checks; false if an extent is negative or the
/// product exceeds `limit`. An extent of 0 makes the product 0 whatever the others are.
bool checked_numel(const std::vector<std::int64_t>& shape, std::uint64_t limit, std::uint64_t& numel) {
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t e) { return e < 0; })) {
    return false;
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    numel = 0;
    return true;
  }
  std::uint64_t n = 1;
  for (const std::int64_t e : shape) {
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(e), &n) || n > limit) {
      return false;
    }
  }
  numel = n;
  return true;
}

/// Parses JSON text with the checks nlohmann::json leaves out: a repeated key in any object
/// is an error (the safetensors spec forbids duplicates, and nlohmann would silently keep the
/// last one, so two readers could see different tensors), and nesting is bounded by
/// kMaxJsonDepth. Comments are not accepted. Throws FileError(source) naming `what`.
json parse_json_strictly(const char* begin, const char* end, const std::string& source,
                         const std::string& what) {
  std::vector<std::set<std::string>> open_objects;
  int depth = 0;
  auto check = [&](int /*nlohmann depth*/, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (++depth > kMaxJsonDepth) {
          throw FileError(source, 0,
                          what + " nests arrays/objects deeper than " + std::to_string(kMaxJsonDepth) +
                              " levels; the file is corrupt or not a fastmlip potential");
        }
        if (event == json::parse_event_t::object_start) {
          open_objects.emplace_back();
        }
        break;
      case json::parse_event_t::object_end:
        --depth;
        open_objects.pop_back();
        break;
      case json::parse_event_t::array_end:
        --depth;
        break;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!open_objects.back().insert(key).second) {
          throw FileError(source, 0,
                          what + " repeats the key '" + key +
                              "' (duplicate keys are forbidden: readers could disagree on which one counts)");
        }
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(begin, end, check, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    // A syntax error (parse_error) or a number beyond double's range (out_of_range.406).
    // nlohmann's message starts with "[json.exception.parse_error.101] "; the rest is useful.
    std::string msg = e.what();
    const auto bracket = msg.find("] ");
    if (msg.rfind("[json.exception", 0) == 0 && bracket != std::string::npos) {
      msg = msg.substr(bracket + 2);
    }
    throw FileError(source, 0, what + " is not valid JSON (" + msg + ")");
  }
}

bool is_hex_digest(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

/// The first non-finite number (or over-deep nesting) in `j`, as a message; "" if none.
/// NaN/inf cannot be written as JSON (nlohmann would emit null), so they are refused up front.
std::string non_finite_problem(const json& j, const std::string& where, int depth) {
  if (depth > kMaxJsonDepth) {
    return "'" + where + "' nests deeper than " + std::to_string(kMaxJsonDepth) + " levels";
  }
  if (j.is_number_float() && !std::isfinite(j.get<double>())) {
    return "'" + where + "' is not a finite number";
  }
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      auto p = non_finite_problem(it.value(), where + "/" + it.key(), depth + 1);
      if (!p.empty()) {
        return p;
      }
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      auto p = non_finite_problem(j[i], where + "/" + std::to_string(i), depth + 1);
      if (!p.empty()) {
        return p;
      }
    }
  }
  return {};
}

/// What is wrong with fastmlip's metadata object, or "" if nothing. The keys and their rules
/// are those of docs/potential-format.md, "The fastmlip metadata".
std::string metadata_problem(const json& m) {
  if (!m.is_object()) {
    return "must be a JSON object, not " + std::string(m.type_name());
  }
  auto missing = [](const char* key, const char* what) {
    return std::string("has no '") + key + "' (" + what + ")";
  };

  if (!m.contains("model") || !m["model"].is_string()) {
    return missing("model", "a string: the model kind, e.g. \"mace\"");
  }
  const auto& kind = m["model"].get_ref<const std::string&>();
  if (std::none_of(kModelKinds.begin(), kModelKinds.end(), [&](const char* k) { return kind == k; })) {
    return "'model' is '" + kind +
           "', a model kind this build does not know (it knows mace, chgnet): update fastmlip";
  }

  if (!m.contains("species") || !m["species"].is_array() || m["species"].empty()) {
    return missing("species", "a non-empty array of {\"Z\": int, \"symbol\": string}");
  }
  std::set<int> seen;
  for (std::size_t i = 0; i < m["species"].size(); ++i) {
    const json& s = m["species"][i];
    const std::string at = "'species/" + std::to_string(i) + "'";
    if (!s.is_object() || !s.contains("Z") || !s.contains("symbol") || !s["symbol"].is_string() ||
        !s["Z"].is_number_integer()) {
      return at + " must be {\"Z\": int, \"symbol\": string}";
    }
    const std::int64_t z = s["Z"].get<std::int64_t>();
    if (z < 1 || z > kMaxAtomicNumber) {
      return at + " has Z = " + std::to_string(z) + ", not an element (1.." +
             std::to_string(kMaxAtomicNumber) + ")";
    }
    const std::string& symbol = s["symbol"].get_ref<const std::string&>();
    if (element_symbol(static_cast<int>(z)) != symbol) {
      return at + " has Z = " + std::to_string(z) + " but symbol '" + symbol + "' (Z " + std::to_string(z) +
             " is " + element_symbol(static_cast<int>(z)) + ")";
    }
    if (!seen.insert(static_cast<int>(z)).second) {
      return at + " repeats " + symbol;
    }
  }

  if (!m.contains("cutoffs") || !m["cutoffs"].is_object() || m["cutoffs"].empty()) {
    return missing("cutoffs", "a non-empty object of named cutoffs in Angstrom, e.g. {\"r_max\": 5.0}");
  }
  for (auto it = m["cutoffs"].begin(); it != m["cutoffs"].end(); ++it) {
    if (!it.value().is_number() || !(it.value().get<double>() > 0.0) ||
        !std::isfinite(it.value().get<double>())) {
      return "'cutoffs/" + it.key() + "' must be a positive number (Angstrom)";
    }
  }

  if (!m.contains("units") || !m["units"].is_string()) {
    return missing("units", "\"metal\"");
  }
  if (m["units"] != "metal") {
    return "'units' is '" + m["units"].get<std::string>() +
           "'; fastmlip potentials are in LAMMPS metal units (eV, Angstrom): reconvert the model";
  }

  if (!m.contains("dtype") || !m["dtype"].is_string()) {
    return missing("dtype", "\"float64\" or \"float32\"");
  }
  if (m["dtype"] != "float64" && m["dtype"] != "float32") {
    return "'dtype' is '" + m["dtype"].get<std::string>() + "'; it must be \"float64\" or \"float32\"";
  }

  if (!m.contains("hyperparameters") || !m["hyperparameters"].is_object()) {
    return missing("hyperparameters", "an object of the model's hyperparameters");
  }

  if (!m.contains("provenance") || !m["provenance"].is_object()) {
    return missing("provenance", "an object with at least \"writer\"");
  }
  const json& prov = m["provenance"];
  if (!prov.contains("writer") || !prov["writer"].is_string() ||
      prov["writer"].get_ref<const std::string&>().empty()) {
    return "'provenance/writer' must name the converter or trainer and its version";
  }
  for (const char* key : {"source_sha256", "training_data_sha256"}) {
    if (prov.contains(key) && !(prov[key].is_string() && is_hex_digest(prov[key].get<std::string>()))) {
      return std::string("'provenance/") + key + "' must be a SHA-256 digest: 64 lowercase hex digits";
    }
  }
  return non_finite_problem(m, "", 0);
}

/// Parses __metadata__.format_version: a positive decimal integer without sign or leading
/// zeros. Returns false if it is not one. Sets `newer` for values above what we read (also
/// for numbers too long for an int, which are necessarily newer).
bool parse_format_version(const std::string& s, int& version, bool& newer) {
  if (s.empty() || s[0] == '0' ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  if (s.size() > 9) {
    newer = true;
    return true;
  }
  version = std::stoi(s);
  newer = version > kPotentialFormatVersion;
  return true;
}

/// A tensor entry of the header, checked, with its offsets relative to the data buffer.
struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

/// Checks one tensor entry of the header against the buffer size; throws FileError.
Entry parse_entry(const std::string& name, const json& v, std::uint64_t buffer_size,
                  const std::string& path) {
  auto bad = [&](const std::string& why) {
    return FileError(path, 0, "tensor '" + name + "' in the header: " + why);
  };
  if (name.empty()) {
    throw FileError(path, 0, "the header has a tensor with an empty name");
  }
  if (!v.is_object()) {
    throw bad("must be an object {dtype, shape, data_offsets}, not " + std::string(v.type_name()));
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets") {
      throw bad("unexpected key '" + it.key() + "' (a tensor has only dtype, shape and data_offsets)");
    }
  }
  if (!v.contains("dtype") || !v["dtype"].is_string()) {
    throw bad("has no dtype string");
  }
  Entry e{name, DType::F64, {}, 0, 0};
  try {
    e.dtype = parse_dtype(v["dtype"].get_ref<const std::string&>());
  } catch (const InputError& err) {
    throw bad(err.what());
  }
  if (!v.contains("shape") || !v["shape"].is_array()) {
    throw bad("has no shape array");
  }
  for (const json& d : v["shape"]) {
    // nlohmann stores non-negative integers as number_unsigned; negative ones and any
    // fraction or exponent land elsewhere and are refused.
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      throw bad("shape " + detail::json_excerpt(v["shape"]) + " must hold non-negative integers");
    }
    e.shape.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
  }
  if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2 ||
      !v["data_offsets"][0].is_number_unsigned() || !v["data_offsets"][1].is_number_unsigned()) {
    throw bad("data_offsets must be [begin, end], two non-negative integers");
  }
  e.begin = v["data_offsets"][0].get<std::uint64_t>();
  e.end = v["data_offsets"][1].get<std::uint64_t>();
  if (e.begin > e.end || e.end > buffer_size) {
    throw bad("data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
              "] are outside the data buffer of " + std::to_string(buffer_size) +
              " bytes; the file is truncated or corrupt");
  }
  const std::uint64_t elem = dtype_size(e.dtype);
  std::uint64_t numel = 0;
  if (!checked_numel(e.shape, buffer_size / elem, numel) || numel * elem != e.end - e.begin) {
    throw bad("shape " + shape_string(e.shape) + " of " + dtype_name(e.dtype) + " needs " +
              (checked_numel(e.shape, UINT64_MAX / elem, numel) ? std::to_string(numel * elem) : "more") +
              " bytes but data_offsets span " + std::to_string(e.end - e.begin));
  }
  return e;
}

/// Reads exactly `n` bytes; a short read means the file changed or shrank under us.
void read_exactly(std::istream& in, void* dst, std::uint64_t n, const std::string& path, const char* what) {
  in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
  if (static_cast<std::uint64_t>(in.gcount()) != n) {
    throw FileError(
        path, 0,
        std::string("read error in ") + what + " (the file is truncated or changed while being read)");
  }
}

/// Opens `path` for reading after checking it is an existing regular file; sets its size.
std::ifstream open_potential(const std::string& path, std::uint64_t& file_size) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    throw FileError(path, 0, "no such potential file (check the path)");
  }
  if (fs::is_directory(st)) {
    throw FileError(path, 0, "is a directory, not a potential file");
  }
  // A FIFO or device could block or never end; a potential is always a regular file.
  if (!fs::is_regular_file(st)) {
    throw FileError(path, 0, "is not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw FileError(path, 0,
                    std::string("cannot open: ") + std::strerror(errno) + " (check the permissions)");
  }
  in.seekg(0, std::ios::end);
  const std::streamoff end_pos = in.tellg();
  in.seekg(0, std::ios::beg);
  if (end_pos < 0 || !in) {
    throw FileError(path, 0, "cannot determine the file size");
  }
  file_size = static_cast<std::uint64_t>(end_pos);
  return in;
}

/// 8 lowercase hex digits, as the checksums are recorded.
std::string crc_hex(std::uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(crc));
  return buf;
}

/// Checks every tensor of `file` against `checksum_text` (the kChecksumKey JSON text): one
/// entry per tensor, each 8 hex digits equal to the CRC-32 of the tensor's bytes.
void verify_checksums(const PotentialFile& file, const std::string& checksum_text, const std::string& path) {
  const std::string damaged =
      "; the file was changed after it was written (an interrupted copy or download, a disk error, an edit): "
      "get a fresh copy, or convert or export the model again";
  const json sums = parse_json_strictly(checksum_text.data(), checksum_text.data() + checksum_text.size(), path,
                                        std::string("__metadata__.") + kChecksumKey);
  if (!sums.is_object()) {
    throw FileError(path, 0, std::string("__metadata__.") + kChecksumKey + " is not a JSON object" + damaged);
  }
  for (auto it = sums.begin(); it != sums.end(); ++it) {
    if (!file.contains(it.key())) {
      throw FileError(path, 0,
                      std::string("__metadata__.") + kChecksumKey + " lists a tensor '" + it.key() +
                          "' that the file does not hold" + damaged);
    }
  }
  for (const auto& kv : file.tensors()) {
    const auto recorded = sums.find(kv.first);
    if (recorded == sums.end()) {
      throw FileError(path, 0,
                      "tensor '" + kv.first + "' has no checksum in __metadata__." + kChecksumKey + damaged);
    }
    const std::string actual = crc_hex(tensor_crc32(kv.second));
    if (!recorded->is_string() || recorded->get_ref<const std::string&>() != actual) {
      throw FileError(path, 0,
                      "tensor '" + kv.first + "' is damaged: the CRC-32 of its " +
                          std::to_string(kv.second.data.size()) + " bytes is " + actual +
                          ", the header records " + detail::json_excerpt(*recorded) + damaged);
    }
  }
}

/// Throws FileError (read) naming the first tensor of `file` with a non-finite value.
void check_finite_tensors(const PotentialFile& file, const std::string& path) {
  for (const auto& kv : file.tensors()) {
    const std::string problem = non_finite_element(kv.second);
    if (!problem.empty()) {
      throw FileError(path, 0,
                      "tensor '" + kv.first + "' " + problem +
                          ": a potential with a NaN or infinite weight cannot give finite energies and forces; "
                          "convert or train the model again (check the training run for divergence)");
    }
  }
}

constexpr const char* kNotAPotential = " (not a safetensors potential file, or a truncated one)";

/// Reads the header length and the header, checks both against the file size and parses the
/// JSON; leaves `in` at the start of the data buffer.
json read_header(std::istream& in, const std::string& path, std::uint64_t file_size,
                 std::uint64_t& header_len) {
  if (file_size < 8) {
    throw FileError(
        path, 0,
        "only " + std::to_string(file_size) + " bytes, less than the 8-byte header length" + kNotAPotential);
  }
  read_exactly(in, &header_len, 8, path, "the header length");  // little-endian on disk and host
  if (header_len > kMaxHeaderBytes) {
    throw FileError(path, 0,
                    "header length " + std::to_string(header_len) + " exceeds the limit of " +
                        std::to_string(kMaxHeaderBytes) + " bytes" + kNotAPotential);
  }
  if (header_len > file_size - 8) {
    throw FileError(path, 0,
                    "header length " + std::to_string(header_len) + " is more than the " +
                        std::to_string(file_size - 8) +
                        " bytes that follow it; the file is truncated or corrupt");
  }
  std::string text(header_len, '\0');
  read_exactly(in, text.data(), header_len, path, "the header");
  if (text.empty() || text[0] != '{') {
    throw FileError(path, 0, std::string("the header does not start with '{'") + kNotAPotential);
  }
  json header = parse_json_strictly(text.data(), text.data() + text.size(), path, "the header");
  if (!header.is_object()) {  // cannot happen after '{', but the code below relies on it
    throw FileError(path, 0, std::string("the header is not a JSON object") + kNotAPotential);
  }
  return header;
}

/// Checks `__metadata__`: strings only, our format name, a format version this build reads, a
/// `fastmlip` entry. Copies the other entries to `extra`; returns the fastmlip JSON text.
const std::string& check_metadata_block(const json& header, const std::string& path,
                                        std::map<std::string, std::string>& extra) {
  const auto block = header.find(kMetadataKey);
  if (block == header.end()) {
    throw FileError(path, 0,
                    "the header has no __metadata__: a plain safetensors file, not a fastmlip potential "
                    "(convert models with potentials/convert)");
  }
  if (!block->is_object()) {
    throw FileError(path, 0, "__metadata__ must be an object of strings");
  }
  for (auto it = block->begin(); it != block->end(); ++it) {
    if (!it.value().is_string()) {
      throw FileError(path, 0,
                      "__metadata__ value '" + it.key() + "' is " + it.value().type_name() +
                          "; safetensors allows only strings there");
    }
  }
  const json& meta = *block;
  if (!meta.contains(kFormatKey) || meta[kFormatKey] != kPotentialFormatName) {
    throw FileError(
        path, 0,
        std::string("__metadata__.format is ") +
            (meta.contains(kFormatKey) ? "'" + meta[kFormatKey].get<std::string>() + "'" : "missing") +
            ", expected '" + kPotentialFormatName +
            "': not a fastmlip potential (convert models with potentials/convert)");
  }
  if (!meta.contains(kVersionKey)) {
    throw FileError(path, 0, "__metadata__ has no format_version");
  }
  const std::string& version_text = meta[kVersionKey].get_ref<const std::string&>();
  int version = 0;
  bool newer = false;
  if (!parse_format_version(version_text, version, newer)) {
    throw FileError(path, 0, "__metadata__.format_version '" + version_text + "' is not a positive integer");
  }
  if (newer) {
    throw FileError(path, 0,
                    "was written by a newer fastmlip (format version " + version_text +
                        "; this build reads up to " + std::to_string(kPotentialFormatVersion) +
                        "): update fastmlip");
  }
  if (!meta.contains(kFastmlipKey)) {
    throw FileError(path, 0, "__metadata__ has no 'fastmlip' entry (the model's metadata)");
  }
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    if (it.key() != kFormatKey && it.key() != kVersionKey && it.key() != kFastmlipKey) {
      extra[it.key()] = it.value().get<std::string>();
    }
  }
  return meta[kFastmlipKey].get_ref<const std::string&>();
}

/// The header's tensor entries, each checked on its own (parse_entry), then all together:
/// sorted by offset they must tile the buffer exactly, as the safetensors spec requires
/// ("entirely indexed, and cannot contain holes"): no overlap (two tensors sharing bytes), no
/// gap, nothing after the last. Returned in offset order.
std::vector<Entry> tensor_entries(const json& header, std::uint64_t buffer_size, const std::string& path) {
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() != kMetadataKey) {
      entries.push_back(parse_entry(it.key(), it.value(), buffer_size, path));
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  std::uint64_t covered = 0;
  for (const Entry& e : entries) {
    if (e.begin != covered) {
      throw FileError(
          path, 0,
          "tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) + " of the data buffer but " +
              (e.begin > covered
                   ? "the previous tensor ends at " + std::to_string(covered) + " (a gap)"
                   : "bytes up to " + std::to_string(covered) + " belong to another tensor (overlap)") +
              "; the file is corrupt");
    }
    covered = e.end;
  }
  if (covered != buffer_size) {
    throw FileError(
        path, 0,
        "the tensors cover " + std::to_string(covered) + " of the " + std::to_string(buffer_size) +
            " data bytes; the rest belongs to no tensor (the file is corrupt or has data appended)");
  }
  return entries;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// dtypes and tensors

const char* dtype_name(DType dtype) noexcept { return info(dtype).name; }

std::size_t dtype_size(DType dtype) noexcept { return info(dtype).size; }

DType parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) {
      return d.dtype;
    }
  }
  throw InputError("dtype '" + std::string(name) +
                   "' is not one fastmlip reads (known: " + known_dtype_names() + ")");
}

bool widens_to(DType from, DType to) noexcept {
  if (from == to) {
    return true;
  }
  if (from == DType::F32 && to == DType::F64) {
    return true;
  }
  const std::size_t fs = dtype_size(from);
  const std::size_t ts = dtype_size(to);
  if (is_signed_int(to)) {
    return (is_signed_int(from) && fs <= ts) || (is_unsigned_int(from) && fs < ts);
  }
  if (is_unsigned_int(to)) {
    return is_unsigned_int(from) && fs <= ts;
  }
  return false;
}

std::int64_t Tensor::numel() const {
  std::uint64_t n = 0;
  if (!checked_numel(shape, static_cast<std::uint64_t>(INT64_MAX), n)) {
    throw InputError("tensor '" + name + "': shape " + shape_string(shape) +
                     " has a negative extent or more than 2^63 elements");
  }
  return static_cast<std::int64_t>(n);
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + (shape[i] == kAnyExtent ? std::string("*") : std::to_string(shape[i]));
  }
  return out + "]";
}

namespace detail {

std::string describe_tensor(const Tensor& tensor) {
  return "tensor '" + tensor.name + "' (dtype " + dtype_name(tensor.dtype) + ", shape " +
         shape_string(tensor.shape) + ")";
}

void check_data_size(const Tensor& tensor) {
  const std::uint64_t elem = dtype_size(tensor.dtype);
  std::uint64_t numel = 0;
  if (!checked_numel(tensor.shape, UINT64_MAX / elem, numel)) {
    throw InputError(describe_tensor(tensor) + ": the shape has a negative extent or too many elements");
  }
  if (numel * elem != tensor.data.size()) {
    throw InputError(describe_tensor(tensor) + ": shape and dtype need " + std::to_string(numel) +
                     " elements (" + std::to_string(numel * elem) + " bytes) but there are " +
                     std::to_string(tensor.data.size()) + " bytes of data");
  }
}

const nlohmann::json* find_meta(const nlohmann::json& metadata, const std::string& pointer) {
  nlohmann::json::json_pointer ptr;
  try {
    ptr = nlohmann::json::json_pointer(pointer);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("PotentialFile::meta: '" + pointer +
                     "' is not a JSON pointer (write it as \"/key/subkey\")");
  }
  // contains() itself throws for some malformed array indices ("/a/01"); treat those as absent.
  try {
    if (!metadata.contains(ptr)) {
      return nullptr;
    }
    return &metadata.at(ptr);
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

std::string json_excerpt(const nlohmann::json& value) {
  // replace: in-memory metadata may hold invalid UTF-8; a message must not throw.
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  constexpr std::size_t kMax = 120;
  if (text.size() > kMax) {
    text = text.substr(0, kMax) + "...";
  }
  return text;
}

}  // namespace detail

void check_tensor(const Tensor& tensor, std::initializer_list<DType> dtypes,
                  const std::vector<std::int64_t>& shape, const std::string& source) {
  const bool dtype_ok = std::find(dtypes.begin(), dtypes.end(), tensor.dtype) != dtypes.end();
  bool shape_ok = tensor.shape.size() == shape.size();
  for (std::size_t i = 0; shape_ok && i < shape.size(); ++i) {
    shape_ok = shape[i] == kAnyExtent || shape[i] == tensor.shape[i];
  }
  if (dtype_ok && shape_ok) {
    return;
  }
  std::string expected_dtypes;
  for (const DType d : dtypes) {
    expected_dtypes += (expected_dtypes.empty() ? "" : " or ") + std::string(dtype_name(d));
  }
  throw FileError(source, 0,
                  detail::describe_tensor(tensor) + " does not match what the model expects (dtype " +
                      expected_dtypes + ", shape " + shape_string(shape) +
                      "); the tensor disagrees with the file's metadata: reconvert or retrain the potential");
}

std::uint32_t tensor_crc32(const Tensor& tensor) noexcept {
  // crc32_z takes a size_t length (zlib >= 1.2.9), so a tensor over 4 GiB needs no chunking.
  const auto* bytes = reinterpret_cast<const Bytef*>(tensor.data.data());
  return static_cast<std::uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), bytes, tensor.data.size()));
}

namespace {
/// Whether the IEEE-style bit pattern `bits` (exponent field `exp_mask`) is NaN or infinite:
/// an all-ones exponent. Used for the 16-bit formats, which have no C++ type here.
bool all_ones_exponent(std::uint32_t bits, std::uint32_t exp_mask) { return (bits & exp_mask) == exp_mask; }

template <class Bits>
Bits bits_at(const Tensor& t, std::size_t i) {
  Bits b;
  std::memcpy(&b, t.data.data() + i * sizeof(Bits), sizeof(Bits));
  return b;
}
}  // namespace

std::string non_finite_element(const Tensor& tensor) {
  const std::size_t n = tensor.data.size() / std::max<std::size_t>(dtype_size(tensor.dtype), 1);
  // The first non-finite element and what it is, per dtype; F8_E4M3 has NaN but no infinity.
  auto find = [&](auto is_bad, auto describe) -> std::string {
    for (std::size_t i = 0; i < n; ++i) {
      if (is_bad(i)) {
        std::string index;
        std::size_t rest = i;
        std::vector<std::int64_t> idx(tensor.shape.size());
        for (std::size_t d = tensor.shape.size(); d-- > 0;) {
          const auto extent = static_cast<std::size_t>(tensor.shape[d]);
          idx[d] = static_cast<std::int64_t>(rest % extent);
          rest /= extent;
        }
        return "holds " + describe(i) + " at element " + std::to_string(i) + " (index " + shape_string(idx) + ")";
      }
    }
    return {};
  };
  auto name_of = [](double v) { return std::string(std::isnan(v) ? "nan" : (v > 0 ? "+inf" : "-inf")); };
  switch (tensor.dtype) {
    case DType::F64:
      return find([&](std::size_t i) { return !std::isfinite(bits_at<double>(tensor, i)); },
                  [&](std::size_t i) { return name_of(bits_at<double>(tensor, i)); });
    case DType::F32:
      return find([&](std::size_t i) { return !std::isfinite(bits_at<float>(tensor, i)); },
                  [&](std::size_t i) { return name_of(bits_at<float>(tensor, i)); });
    case DType::F16:
      return find([&](std::size_t i) { return all_ones_exponent(bits_at<std::uint16_t>(tensor, i), 0x7C00u); },
                  [](std::size_t) { return std::string("a NaN or infinity"); });
    case DType::BF16:
      return find([&](std::size_t i) { return all_ones_exponent(bits_at<std::uint16_t>(tensor, i), 0x7F80u); },
                  [](std::size_t) { return std::string("a NaN or infinity"); });
    case DType::F8_E5M2:
      return find([&](std::size_t i) { return all_ones_exponent(bits_at<std::uint8_t>(tensor, i), 0x7Cu); },
                  [](std::size_t) { return std::string("a NaN or infinity"); });
    case DType::F8_E4M3:
      return find([&](std::size_t i) { return (bits_at<std::uint8_t>(tensor, i) & 0x7Fu) == 0x7Fu; },
                  [](std::size_t) { return std::string("a NaN"); });
    default:
      return {};
  }
}

// ---------------------------------------------------------------------------------------
// PotentialFile

const Tensor& PotentialFile::add(Tensor tensor) {
  if (tensor.name.empty() || tensor.name == kMetadataKey) {
    throw InputError("PotentialFile::add: '" + tensor.name +
                     "' cannot name a tensor (empty or the reserved __metadata__)");
  }
  if (contains(tensor.name)) {
    throw InputError("PotentialFile::add: a tensor '" + tensor.name + "' is already present");
  }
  detail::check_data_size(tensor);
  std::string name = tensor.name;
  return m_tensors.emplace(std::move(name), std::move(tensor)).first->second;
}

const Tensor& PotentialFile::get(const std::string& name) const {
  const auto it = m_tensors.find(name);
  if (it != m_tensors.end()) {
    return it->second;
  }
  std::string have;
  std::size_t listed = 0;
  for (const auto& kv : m_tensors) {
    if (listed++ == 8) {
      have += ", ...";
      break;
    }
    have += (have.empty() ? "" : ", ") + kv.first;
  }
  fail("no tensor '" + name + "' (the file has " + std::to_string(m_tensors.size()) + ": " +
       (have.empty() ? "none" : have) + "); it is incomplete or was written for another model");
}

const Tensor& PotentialFile::get(const std::string& name, std::initializer_list<DType> dtypes,
                                 const std::vector<std::int64_t>& shape) const {
  const Tensor& t = get(name);
  check_tensor(t, dtypes, shape, display_name());
  return t;
}

bool PotentialFile::has_meta(const std::string& pointer) const {
  return detail::find_meta(metadata, pointer) != nullptr;
}

std::string PotentialFile::model_kind() const {
  validate_metadata();
  return metadata["model"].get<std::string>();
}

std::vector<PotentialSpecies> PotentialFile::species() const {
  validate_metadata();
  std::vector<PotentialSpecies> out;
  for (const json& s : metadata["species"]) {
    out.push_back({s["Z"].get<int>(), s["symbol"].get<std::string>()});
  }
  return out;
}

double PotentialFile::cutoff() const {
  validate_metadata();
  double r = 0.0;
  for (const json& c : metadata["cutoffs"]) {
    r = std::max(r, c.get<double>());
  }
  return r;
}

DType PotentialFile::compute_dtype() const {
  validate_metadata();
  return metadata["dtype"] == "float32" ? DType::F32 : DType::F64;
}

void PotentialFile::validate_metadata() const {
  const std::string problem = metadata_problem(metadata);
  if (!problem.empty()) {
    fail("metadata " + problem);
  }
}

std::string PotentialFile::display_name() const {
  return source.empty() ? std::string(kInMemoryName) : source;
}

void PotentialFile::fail(const std::string& what) const { throw FileError(display_name(), 0, what); }

// ---------------------------------------------------------------------------------------
// Reading

PotentialFile read_potential_file(const std::string& path) {
  std::uint64_t file_size = 0;
  std::ifstream in = open_potential(path, file_size);
  std::uint64_t header_len = 0;
  const json header = read_header(in, path, file_size, header_len);

  PotentialFile file;
  file.source = path;
  // __metadata__ first: the format version decides how to read everything else, so a file
  // from a newer fastmlip gets "update fastmlip", not a confusing complaint about its content.
  const std::string& fastmlip_text = check_metadata_block(header, path, file.extra_metadata);
  std::vector<Entry> entries = tensor_entries(header, file_size - 8 - header_len, path);
  // The fastmlip metadata is checked before the (possibly large) tensor data is read.
  file.metadata = parse_json_strictly(fastmlip_text.data(), fastmlip_text.data() + fastmlip_text.size(), path,
                                      "__metadata__.fastmlip");
  file.validate_metadata();

  // The buffer follows the header directly and the entries tile it in order, so one
  // sequential pass reads it all.
  for (Entry& e : entries) {
    Tensor t;
    t.name = std::move(e.name);
    t.dtype = e.dtype;
    t.shape = std::move(e.shape);
    t.data.resize(e.end - e.begin);
    read_exactly(in, t.data.data(), t.data.size(), path, ("tensor '" + t.name + "'").c_str());
    file.add(std::move(t));
  }
  // Damage first: a flipped bit in a weight is reported as damage, not as a NaN weight.
  const auto sums = file.extra_metadata.find(kChecksumKey);
  if (sums != file.extra_metadata.end()) {
    verify_checksums(file, sums->second, path);
    file.extra_metadata.erase(sums);  // rewritten from the tensors on every write
    file.checksummed = true;
  }
  check_finite_tensors(file, path);
  return file;
}

// ---------------------------------------------------------------------------------------
// Writing

void write_potential_file(const std::string& path, const PotentialFile& file) {
  const std::string where = "write_potential_file(" + path + "): ";
  const std::string problem = metadata_problem(file.metadata);
  if (!problem.empty()) {
    throw InputError(where + "metadata " + problem);
  }
  for (const auto& kv : file.extra_metadata) {
    if (kv.first == kFormatKey || kv.first == kVersionKey || kv.first == kFastmlipKey || kv.first == kChecksumKey) {
      throw InputError(where + "extra_metadata may not set the reserved key '" + kv.first + "'");
    }
  }

  // Largest elements first, then by name: every tensor then starts at a multiple of its
  // element size (each tensor's byte length is a multiple of its own element size, and the
  // buffer starts 8-aligned), so readers that map the file can use the bytes in place.
  std::vector<const Tensor*> order;
  json checksums = json::object();
  for (const auto& kv : file.tensors()) {
    detail::check_data_size(kv.second);
    const std::string problem = non_finite_element(kv.second);
    if (!problem.empty()) {
      throw InputError(where + "tensor '" + kv.first + "' " + problem +
                       "; a potential with a NaN or infinite weight would be refused at load (did training diverge?)");
    }
    checksums[kv.first] = crc_hex(tensor_crc32(kv.second));
    order.push_back(&kv.second);
  }
  std::stable_sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });

  std::string header;
  try {
    nlohmann::ordered_json h;
    nlohmann::ordered_json meta;
    meta[kFormatKey] = kPotentialFormatName;
    meta[kVersionKey] = std::to_string(kPotentialFormatVersion);
    // Compact and key-sorted (nlohmann::json objects are ordered maps): the same potential
    // always gives the same bytes.
    meta[kFastmlipKey] = file.metadata.dump();
    meta[kChecksumKey] = checksums.dump();
    for (const auto& kv : file.extra_metadata) {
      meta[kv.first] = kv.second;
    }
    h[kMetadataKey] = std::move(meta);
    std::uint64_t offset = 0;
    for (const Tensor* t : order) {
      h[t->name] = {{"dtype", dtype_name(t->dtype)},
                    {"shape", t->shape},
                    {"data_offsets", {offset, offset + t->data.size()}}};
      offset += t->data.size();
    }
    header = h.dump();
  } catch (const nlohmann::json::type_error& e) {
    // The only type error dump() raises is invalid UTF-8 in a string.
    throw InputError(where + "a tensor name or metadata string is not valid UTF-8 (" + e.what() + ")");
  }
  // Pad with spaces (the spec allows trailing 0x20) so the data buffer starts 8-aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeaderBytes) {
    throw InputError(where + "the header would be " + std::to_string(header.size()) +
                     " bytes, over the safetensors limit of " + std::to_string(kMaxHeaderBytes));
  }

  write_file_atomically(path, [&](std::ostream& out) {
    const std::uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);  // little-endian host (static_assert)
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const Tensor* t : order) {
      out.write(reinterpret_cast<const char*>(t->data.data()), static_cast<std::streamsize>(t->data.size()));
    }
  });
}

int species_index(const std::vector<PotentialSpecies>& species, int z) {
  for (std::size_t k = 0; k < species.size(); ++k) {
    if (species[k].z == z) {
      return static_cast<int>(k);
    }
  }
  return -1;
}

}  // namespace fastmlip::io

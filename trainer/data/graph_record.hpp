// SPDX-License-Identifier: MIT
#pragma once
/// \file One graph of a preprocessed dataset as bytes (data/store.hpp keeps one per LMDB record):
/// a 16-byte header (magic "FMG1", the payload's length, its CRC-32) and the payload: the
/// configuration's atoms, positions, cell and pbc, every label present, its weights, config type
/// and where it came from (file, line, frame, id), fixed-size values in this machine's byte order.
/// Torch-, MPI- and LMDB-free, so that the fuzz preset fuzzes the decoder (tests/fuzz).
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "data/dataset.hpp"
#include "data/graph_summary.hpp"

namespace fastmlip::trainer::data {

/// zlib's CRC-32 of n bytes.
std::uint32_t crc32_of(const void* data, std::size_t n);

/// The record of one configuration (header and payload).
std::string encode_graph_record(const Config& c);
/// A configuration from its record: FileError naming `where` when the magic, length or checksum
/// is wrong, or the payload is malformed (decode_graph_payload).
Config decode_graph_record(const char* bytes, std::size_t size, const std::string& where);
/// A configuration from a record's payload alone: FileError naming `where` when it ends early,
/// has bytes past its end, or holds counts that disagree (forces or magmoms for another number of
/// atoms, more atoms than its bytes could hold).
Config decode_graph_payload(const char* bytes, std::size_t size, const std::string& where);

/// Appends fixed-size values in this machine's byte order (the index records which, and a reader
/// of the other order refuses the dataset).
class ByteWriter {
 public:
  template <class V>
  void put(V v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    m_s.append(p, sizeof v);
  }
  void put_doubles(const double* v, std::size_t n) {
    if (n > 0) {  // an empty vector's data() may be null, which memcpy must not see
      m_s.append(reinterpret_cast<const char*>(v), n * sizeof(double));
    }
  }
  void put_string(const std::string& s) {
    put(static_cast<std::uint32_t>(s.size()));
    m_s.append(s);
  }
  std::string& str() { return m_s; }

 private:
  std::string m_s;
};

/// Reads what ByteWriter wrote; reading past the end throws FileError naming `where`.
class ByteReader {
 public:
  ByteReader(const char* p, std::size_t n, std::string where)
      : m_p(p), m_end(p + n), m_where(std::move(where)) {}
  template <class V>
  V get() {
    V v;
    need(sizeof v);
    std::memcpy(&v, m_p, sizeof v);
    m_p += sizeof v;
    return v;
  }
  void get_doubles(double* v, std::size_t n) {
    if (n > static_cast<std::size_t>(m_end - m_p) / sizeof(double)) {
      short_record();
    }
    if (n > 0) {
      std::memcpy(v, m_p, n * sizeof(double));
      m_p += n * sizeof(double);
    }
  }
  std::string get_string() {
    const auto n = get<std::uint32_t>();
    need(n);
    std::string s(m_p, n);
    m_p += n;
    return s;
  }
  bool at_end() const { return m_p == m_end; }

 private:
  void need(std::size_t n) {
    if (n > static_cast<std::size_t>(m_end - m_p)) {
      short_record();
    }
  }
  [[noreturn]] void short_record() const {
    throw FileError(m_where, 0, "the record ends early (damaged, or written by another version)");
  }
  const char* m_p;
  const char* m_end;
  std::string m_where;
};

/// A graph summary's own fields (its atoms with a neighbour, energy, squared forces and atoms
/// per element; not its atoms and edges, which the index's table holds): in the index, and
/// between the ranks that preprocess a file.
void put_summary(ByteWriter& w, const GraphSummary& s);
/// The fields put_summary wrote; FileError (from `r`) when they end early.
GraphSummary get_summary(ByteReader& r);

}  // namespace fastmlip::trainer::data

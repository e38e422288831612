// SPDX-License-Identifier: MIT
#include "data/graph_record.hpp"

#include <zlib.h>

#include <array>

namespace fastmlip::trainer::data {
namespace {

constexpr std::uint32_t kRecordMagic = 0x31474D46;  // "FMG1" little-endian

// Flags of a record: which optional parts it has.
enum : std::uint32_t {
  kHasCell = 1u << 0,
  kPbcX = 1u << 1,
  kPbcY = 1u << 2,
  kPbcZ = 1u << 3,
  kHasEnergy = 1u << 4,
  kHasStress = 1u << 5,
  kHasVirials = 1u << 6,
  kHasCharge = 1u << 7,
  kHasSpin = 1u << 8,
};

}  // namespace

std::uint32_t crc32_of(const void* data, std::size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {  // zlib's crc32 takes a uInt length
    const uInt chunk = n > (1u << 30) ? (1u << 30) : static_cast<uInt>(n);
    c = crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<std::uint32_t>(c);
}

std::string encode_graph_record(const Config& c) {
  ByteWriter b;
  const auto n = static_cast<std::uint32_t>(c.natoms());
  std::uint32_t flags = 0;
  flags |= c.cell ? kHasCell : 0u;
  flags |= c.pbc[0] ? kPbcX : 0u;
  flags |= c.pbc[1] ? kPbcY : 0u;
  flags |= c.pbc[2] ? kPbcZ : 0u;
  flags |= c.energy ? kHasEnergy : 0u;
  flags |= c.stress ? kHasStress : 0u;
  flags |= c.virials ? kHasVirials : 0u;
  flags |= c.total_charge ? kHasCharge : 0u;
  flags |= c.total_spin ? kHasSpin : 0u;
  b.put(n);
  b.put(flags);
  for (int z : c.atomic_numbers) {
    b.put(static_cast<std::int32_t>(z));
  }
  b.put_doubles(c.positions.data(), c.positions.size());
  if (c.cell) {
    b.put_doubles(c.cell->data(), 9);
  }
  if (c.energy) {
    b.put(*c.energy);
  }
  b.put(static_cast<std::uint32_t>(c.forces.size()));
  b.put_doubles(c.forces.data(), c.forces.size());
  if (c.stress) {
    b.put_doubles(c.stress->data(), 9);
  }
  if (c.virials) {
    b.put_doubles(c.virials->data(), 9);
  }
  b.put(static_cast<std::uint32_t>(c.magmoms.size()));
  b.put_doubles(c.magmoms.data(), c.magmoms.size());
  if (c.total_charge) {
    b.put(*c.total_charge);
  }
  if (c.total_spin) {
    b.put(*c.total_spin);
  }
  for (double w :
       {c.weight, c.energy_weight, c.forces_weight, c.stress_weight, c.virials_weight, c.magmom_weight}) {
    b.put(w);
  }
  b.put_string(c.config_type);
  b.put_string(c.source);
  b.put(static_cast<std::int64_t>(c.line));
  b.put(static_cast<std::int64_t>(c.frame));
  b.put_string(c.id);
  // Header: magic, payload length, CRC-32 of the payload.
  ByteWriter h;
  h.put(kRecordMagic);
  h.put(static_cast<std::uint64_t>(b.str().size()));
  h.put(crc32_of(b.str().data(), b.str().size()));
  return h.str() + b.str();
}

Config decode_graph_payload(const char* p, std::size_t len, const std::string& where) {
  ByteReader r(p, len, where);
  Config c;
  const auto n = r.get<std::uint32_t>();
  const auto flags = r.get<std::uint32_t>();
  // Every atom takes at least 28 bytes (Z and a position), so a count beyond that is damage, not
  // an allocation to attempt.
  if (n > len / 28) {
    throw FileError(where, 0,
                    "the record claims " + std::to_string(n) + " atoms in " + std::to_string(len) + " bytes");
  }
  c.atomic_numbers.resize(n);
  for (auto& z : c.atomic_numbers) {
    z = r.get<std::int32_t>();
  }
  c.positions.resize(3 * static_cast<std::size_t>(n));
  r.get_doubles(c.positions.data(), c.positions.size());
  if (flags & kHasCell) {
    std::array<double, 9> cell;
    r.get_doubles(cell.data(), 9);
    c.cell = cell;
  }
  c.pbc = {(flags & kPbcX) != 0, (flags & kPbcY) != 0, (flags & kPbcZ) != 0};
  if (flags & kHasEnergy) {
    c.energy = r.get<double>();
  }
  const auto nf = r.get<std::uint32_t>();
  if (nf != 0 && nf != 3 * n) {
    throw FileError(
        where, 0,
        "the record has " + std::to_string(nf) + " force components for " + std::to_string(n) + " atoms");
  }
  c.forces.resize(nf);
  r.get_doubles(c.forces.data(), nf);
  if (flags & kHasStress) {
    std::array<double, 9> s;
    r.get_doubles(s.data(), 9);
    c.stress = s;
  }
  if (flags & kHasVirials) {
    std::array<double, 9> v;
    r.get_doubles(v.data(), 9);
    c.virials = v;
  }
  const auto nm = r.get<std::uint32_t>();
  if (nm != 0 && nm != n) {
    throw FileError(
        where, 0,
        "the record has " + std::to_string(nm) + " magnetic moments for " + std::to_string(n) + " atoms");
  }
  c.magmoms.resize(nm);
  r.get_doubles(c.magmoms.data(), nm);
  if (flags & kHasCharge) {
    c.total_charge = r.get<double>();
  }
  if (flags & kHasSpin) {
    c.total_spin = r.get<double>();
  }
  c.weight = r.get<double>();
  c.energy_weight = r.get<double>();
  c.forces_weight = r.get<double>();
  c.stress_weight = r.get<double>();
  c.virials_weight = r.get<double>();
  c.magmom_weight = r.get<double>();
  c.config_type = r.get_string();
  c.source = r.get_string();
  c.line = static_cast<long>(r.get<std::int64_t>());
  c.frame = static_cast<long>(r.get<std::int64_t>());
  c.id = r.get_string();
  if (!r.at_end()) {
    throw FileError(where, 0, "the record has bytes past its end (damaged shard, or another version)");
  }
  return c;
}

Config decode_graph_record(const char* p, std::size_t size, const std::string& where) {
  ByteReader h(p, size, where);
  if (size < 16 || h.get<std::uint32_t>() != kRecordMagic) {
    throw FileError(where, 0, "not a graph record (damaged shard, or another format)");
  }
  const auto len = h.get<std::uint64_t>();
  const auto crc = h.get<std::uint32_t>();
  if (len != size - 16) {
    throw FileError(where, 0,
                    "the record holds " + std::to_string(size - 16) + " bytes, its header says " +
                        std::to_string(len) + " (damaged shard)");
  }
  if (crc32_of(p + 16, len) != crc) {
    throw FileError(
        where, 0,
        "the record's checksum does not match its bytes (damaged shard: preprocess the data again)");
  }
  return decode_graph_payload(p + 16, len, where);
}

void put_summary(ByteWriter& w, const GraphSummary& s) {
  w.put(s.connected);
  w.put(static_cast<std::uint8_t>(s.has_energy));
  w.put(s.energy);
  w.put(s.force_sq);
  w.put(static_cast<std::uint32_t>(s.composition.size()));
  for (const auto& [z, count] : s.composition) {
    w.put(static_cast<std::uint16_t>(z));
    w.put(count);
  }
}

GraphSummary get_summary(ByteReader& r) {
  GraphSummary s;
  s.connected = r.get<std::uint32_t>();
  s.has_energy = r.get<std::uint8_t>() != 0;
  s.energy = r.get<double>();
  s.force_sq = r.get<double>();
  const auto kinds = r.get<std::uint32_t>();
  for (std::uint32_t k = 0; k < kinds; ++k) {
    const int z = r.get<std::uint16_t>();
    s.composition.emplace_back(z, r.get<std::uint32_t>());
  }
  return s;
}

}  // namespace fastmlip::trainer::data

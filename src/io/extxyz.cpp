// SPDX-License-Identifier: MIT
#include "io/extxyz.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/elements.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace fastmlip::io {
namespace {

std::string format_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  std::string tok;
  while (is >> tok) {
    out.push_back(tok);
  }
  return out;
}

bool parse_double(const std::string& s, double& v) {
  if (s.empty()) {
    return false;
  }
  errno = 0;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno != ERANGE;
}

bool parse_bool(const std::string& s, bool& b) {
  if (s == "T" || s == "True" || s == "true" || s == "1") {
    b = true;
    return true;
  }
  if (s == "F" || s == "False" || s == "false" || s == "0") {
    b = false;
    return true;
  }
  return false;
}

/// Splits the comment line into key=value pairs. Values may be "double quoted" (with \" and
/// \\ escapes) or {curly braced}; a bare key means "T", as in ASE.
std::vector<std::pair<std::string, std::string>> parse_comment(const std::string& line,
                                                               const std::string& src, long lineno) {
  std::vector<std::pair<std::string, std::string>> kv;
  std::size_t i = 0;
  const std::size_t n = line.size();
  auto skip_ws = [&] {
    while (i < n && std::isspace(static_cast<unsigned char>(line[i]))) {
      ++i;
    }
  };
  auto read_token = [&](bool stop_at_eq) {
    std::string tok;
    if (i < n && (line[i] == '"' || line[i] == '{')) {
      const char close = line[i] == '"' ? '"' : '}';
      ++i;
      while (i < n && line[i] != close) {
        if (line[i] == '\\' && i + 1 < n) {
          ++i;
        }
        tok += line[i++];
      }
      if (i >= n) {
        throw FileError(src, lineno, std::string("unterminated ") + (close == '"' ? "quote" : "brace") +
                                         " in the comment line");
      }
      ++i;
      return tok;
    }
    while (i < n && !std::isspace(static_cast<unsigned char>(line[i])) && !(stop_at_eq && line[i] == '=')) {
      tok += line[i++];
    }
    return tok;
  };
  skip_ws();
  while (i < n) {
    std::string key = read_token(true);
    skip_ws();
    std::string value = "T";
    if (i < n && line[i] == '=') {
      ++i;
      skip_ws();
      value = read_token(false);
    }
    if (key.empty()) {
      throw FileError(src, lineno, "empty key in the comment line (expected key=value pairs)");
    }
    kv.emplace_back(std::move(key), std::move(value));
    skip_ws();
  }
  return kv;
}

/// Whether a key or value must be written "quoted" to read back as itself: parse_comment ends a
/// bare token at any whitespace (and a key at '='), and takes one that starts with '"' or '{' as
/// quoted or braced.
bool needs_quotes(const std::string& v) {
  if (v.empty() || v[0] == '{') {
    return true;
  }
  for (char c : v) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '=') {
      return true;
    }
  }
  return false;
}

std::string quote(const std::string& v) {
  if (!needs_quotes(v)) {
    return v;
  }
  std::string q = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') {
      q += '\\';
    }
    q += c;
  }
  return q + "\"";
}

}  // namespace

const std::string* Frame::find_info(const std::string& key) const noexcept {
  for (const auto& [k, v] : info) {
    if (k == key) {
      return &v;
    }
  }
  return nullptr;
}

void Frame::set_info(const std::string& key, const std::string& value) {
  for (auto& [k, v] : info) {
    if (k == key) {
      v = value;
      return;
    }
  }
  info.emplace_back(key, value);
}

std::vector<double> Frame::info_numbers(const std::string& key) const {
  const std::string* v = find_info(key);
  if (v == nullptr) {
    throw FileError(source, line, "frame has no '" + key + "' in its comment line");
  }
  std::vector<double> out;
  for (const auto& tok : split_ws(*v)) {
    double d;
    if (!parse_double(tok, d)) {
      throw FileError(source, line, "value of '" + key + "' is not numeric: '" + *v + "'");
    }
    out.push_back(d);
  }
  return out;
}

const AtomColumn* Frame::find_array(const std::string& name) const noexcept {
  for (const auto& c : arrays) {
    if (c.name == name) {
      return &c;
    }
  }
  return nullptr;
}

void Frame::set_array(const std::string& name, int width, std::vector<double> values) {
  if (values.size() != natoms() * static_cast<std::size_t>(width)) {
    throw InputError("Frame::set_array: column '" + name + "' has " + std::to_string(values.size()) +
                     " values, expected natoms*width = " + std::to_string(natoms() * width));
  }
  for (auto& c : arrays) {
    if (c.name == name) {
      c = AtomColumn{name, 'R', width, std::move(values), {}};
      return;
    }
  }
  arrays.push_back(AtomColumn{name, 'R', width, std::move(values), {}});
}

ExtxyzReader::ExtxyzReader(std::istream& in, std::string source) : m_in(in), m_source(std::move(source)) {}

bool ExtxyzReader::next(Frame& frame) { return next(frame, {}); }

bool ExtxyzReader::next(Frame& frame, const std::function<bool(const Frame&, std::size_t)>& want) {
  try {
    if (!read_frame(frame, want ? &want : nullptr)) {
      return false;
    }
  } catch (const FileError& e) {
    throw FileError(e.path(), e.line(), "frame " + std::to_string(m_frames + 1) + ": " + e.detail());
  }
  frame.index = ++m_frames;
  return true;
}

bool ExtxyzReader::read_frame(Frame& frame, const std::function<bool(const Frame&, std::size_t)>* want) {
  std::string line;
  // Skip blank lines between frames (some writers leave a trailing newline).
  do {
    if (!std::getline(m_in, line)) {
      return false;
    }
    ++m_line;
  } while (line.find_first_not_of(" \t\r") == std::string::npos);

  frame = Frame{};
  frame.source = m_source;
  frame.line = m_line;
  const long count_line = m_line;
  const auto count_tok = split_ws(line);
  char* end = nullptr;
  const long natoms = count_tok.size() == 1 ? std::strtol(count_tok[0].c_str(), &end, 10) : -1;
  if (count_tok.size() != 1 || *end != '\0' || natoms < 0) {
    throw FileError(m_source, count_line, "expected the number of atoms, got '" + line + "'");
  }
  if (!std::getline(m_in, line)) {
    throw FileError(m_source, count_line + 1, "file ends before the comment line of this frame");
  }
  ++m_line;
  const long comment_line = m_line;
  if (!line.empty() && line.back() == '\r') {
    line.pop_back();
  }
  std::string properties = "species:S:1:pos:R:3";
  for (auto& [key, value] : parse_comment(line, m_source, comment_line)) {
    if (key == "Lattice") {
      const auto t = split_ws(value);
      std::array<double, 9> cell{};
      bool ok = t.size() == 9;
      for (std::size_t k = 0; ok && k < 9; ++k) {
        ok = parse_double(t[k], cell[k]);
      }
      if (!ok) {
        throw FileError(m_source, comment_line, "Lattice must hold 9 numbers, got '" + value + "'");
      }
      frame.cell = cell;
    } else if (key == "Properties") {
      properties = value;
    } else if (key == "pbc") {
      const auto t = split_ws(value);
      bool ok = t.size() == 3;
      for (std::size_t k = 0; ok && k < 3; ++k) {
        ok = parse_bool(t[k], frame.pbc[k]);
      }
      if (!ok) {
        throw FileError(m_source, comment_line, "pbc must be three of T/F, got '" + value + "'");
      }
    } else {
      frame.info.emplace_back(key, value);
    }
  }
  // ASE: a Lattice without pbc means periodic in all three directions.
  if (frame.cell && line.find("pbc=") == std::string::npos) {
    frame.pbc = {true, true, true};
  }

  // Column layout.
  struct Col {
    std::string name;
    char type;
    int width;
  };
  std::vector<Col> cols;
  {
    std::vector<std::string> parts;
    std::stringstream ss(properties);
    std::string p;
    while (std::getline(ss, p, ':')) {
      parts.push_back(p);
    }
    if (parts.size() % 3 != 0 || parts.empty()) {
      throw FileError(m_source, comment_line, "Properties must be name:type:count triples, got '" + properties + "'");
    }
    for (std::size_t k = 0; k < parts.size(); k += 3) {
      const std::string& t = parts[k + 1];
      int w = std::atoi(parts[k + 2].c_str());
      if (t.size() != 1 || std::string("RILS").find(t[0]) == std::string::npos || w <= 0) {
        throw FileError(m_source, comment_line,
                        "bad Properties entry '" + parts[k] + ":" + t + ":" + parts[k + 2] +
                            "' (type must be R, I, L or S and the count positive)");
      }
      for (const auto& c : cols) {
        if (c.name == parts[k]) {
          // Two columns of one name would leave one of them nowhere to go.
          throw FileError(m_source, comment_line,
                          "Properties declares the column '" + parts[k] + "' twice, in '" + properties +
                              "'; each per-atom column needs its own name");
        }
      }
      cols.push_back({parts[k], t[0], w});
    }
  }
  int species_col = -1, pos_col = -1;
  for (std::size_t c = 0; c < cols.size(); ++c) {
    if (cols[c].name == "species" && cols[c].type == 'S' && cols[c].width == 1) {
      species_col = static_cast<int>(c);
    } else if (cols[c].name == "pos" && cols[c].type == 'R' && cols[c].width == 3) {
      pos_col = static_cast<int>(c);
    } else {
      frame.arrays.push_back(AtomColumn{cols[c].name, cols[c].type, cols[c].width, {}, {}});
    }
  }
  if (species_col < 0 || pos_col < 0) {
    throw FileError(m_source, comment_line, "Properties must contain species:S:1 and pos:R:3, got '" + properties + "'");
  }
  // Widths come from the file: summed in 64 bits, a count near INT_MAX cannot overflow the sum.
  long long total_width = 0;
  for (const auto& c : cols) {
    total_width += c.width;
  }

  if (want != nullptr && !(*want)(frame, static_cast<std::size_t>(natoms))) {
    for (long a = 0; a < natoms; ++a) {
      if (!std::getline(m_in, line)) {
        throw FileError(m_source, m_line + 1,
                        "file ends inside a frame: expected " + std::to_string(natoms) +
                            " atom lines after line " + std::to_string(count_line) + ", found " +
                            std::to_string(a));
      }
      ++m_line;
    }
    return true;
  }
  // Grown atom by atom: the count is the file's claim, and a huge one in a short file must end
  // in "file ends inside a frame", not in an allocation of that many atoms.
  frame.species.reserve(static_cast<std::size_t>(std::min(natoms, 4096L)));
  for (long a = 0; a < natoms; ++a) {
    if (!std::getline(m_in, line)) {
      throw FileError(m_source, m_line + 1,
                      "file ends inside a frame: expected " + std::to_string(natoms) + " atom lines after line " +
                          std::to_string(count_line) + ", found " + std::to_string(a));
    }
    ++m_line;
    const auto tok = split_ws(line);
    frame.species.emplace_back();
    frame.positions.resize(frame.positions.size() + 3);
    if (static_cast<long long>(tok.size()) != total_width) {
      throw FileError(m_source, m_line,
                      "atom " + std::to_string(a + 1) + " has " + std::to_string(tok.size()) +
                          " columns, Properties declares " + std::to_string(total_width));
    }
    std::size_t t = 0;
    std::size_t extra = 0;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const Col& col = cols[c];
      if (static_cast<int>(c) == species_col) {
        if (atomic_number(tok[t]) == 0) {
          throw FileError(m_source, m_line, "atom " + std::to_string(a + 1) + ": '" + tok[t] + "' is not an element symbol");
        }
        frame.species[a] = tok[t++];
        continue;
      }
      if (static_cast<int>(c) == pos_col) {
        for (int k = 0; k < 3; ++k, ++t) {
          double v;
          if (!parse_double(tok[t], v) || !std::isfinite(v)) {
            throw FileError(m_source, m_line, "atom " + std::to_string(a + 1) + ": position '" + tok[t] + "' is not a finite number");
          }
          frame.positions[3 * a + k] = v;
        }
        continue;
      }
      AtomColumn& dst = frame.arrays[extra++];
      for (int k = 0; k < col.width; ++k, ++t) {
        if (col.type == 'S') {
          dst.strings.push_back(tok[t]);
        } else if (col.type == 'L') {
          bool b;
          if (!parse_bool(tok[t], b)) {
            throw FileError(m_source, m_line, "atom " + std::to_string(a + 1) + ": '" + col.name + "' value '" + tok[t] + "' is not T or F");
          }
          dst.numbers.push_back(b ? 1.0 : 0.0);
        } else if (col.type == 'I') {
          // Whole numbers only, and ones a double holds exactly (the column stores doubles): a
          // "0.1" in an I column used to be kept as 0.1 and written back as 0.
          errno = 0;
          char* end = nullptr;
          const long long v = std::strtoll(tok[t].c_str(), &end, 10);
          if (end == tok[t].c_str() || *end != '\0' || errno == ERANGE || v > (1LL << 53) || v < -(1LL << 53)) {
            throw FileError(m_source, m_line, "atom " + std::to_string(a + 1) + ": '" + col.name + "' value '" + tok[t] +
                                                  "' is not an integer (the column is declared :I:; declare it :R: for reals)");
          }
          dst.numbers.push_back(static_cast<double>(v));
        } else {
          double v;
          if (!parse_double(tok[t], v)) {
            throw FileError(m_source, m_line, "atom " + std::to_string(a + 1) + ": '" + col.name + "' value '" + tok[t] + "' is not a number");
          }
          dst.numbers.push_back(v);
        }
      }
    }
  }
  return true;
}

std::vector<Frame> read_extxyz(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw FileError(path, 0, std::string("cannot open: ") + std::strerror(errno));
  }
  ExtxyzReader reader(in, path);
  std::vector<Frame> frames;
  Frame f;
  while (reader.next(f)) {
    frames.push_back(std::move(f));
  }
  return frames;
}

void write_extxyz(std::ostream& out, const Frame& frame) {
  const std::size_t n = frame.natoms();
  if (frame.positions.size() != 3 * n) {
    throw InputError("write_extxyz: frame has " + std::to_string(n) + " species but " +
                     std::to_string(frame.positions.size()) + " position values");
  }
  out << n << '\n';
  if (frame.cell) {
    out << "Lattice=\"";
    for (int k = 0; k < 9; ++k) {
      out << (k ? " " : "") << format_double((*frame.cell)[k]);
    }
    out << "\" ";
  }
  out << "Properties=species:S:1:pos:R:3";
  for (const auto& c : frame.arrays) {
    const std::size_t expect = n * c.width;
    if ((c.type == 'S' ? c.strings.size() : c.numbers.size()) != expect) {
      throw InputError("write_extxyz: column '" + c.name + "' has the wrong number of values");
    }
    out << ':' << c.name << ':' << c.type << ':' << c.width;
  }
  for (const auto& [k, v] : frame.info) {
    out << ' ' << quote(k) << '=' << quote(v);
  }
  out << " pbc=\"" << (frame.pbc[0] ? 'T' : 'F') << ' ' << (frame.pbc[1] ? 'T' : 'F') << ' '
      << (frame.pbc[2] ? 'T' : 'F') << "\"\n";
  for (std::size_t a = 0; a < n; ++a) {
    out << frame.species[a];
    for (int k = 0; k < 3; ++k) {
      out << ' ' << format_double(frame.positions[3 * a + k]);
    }
    for (const auto& c : frame.arrays) {
      for (int k = 0; k < c.width; ++k) {
        const std::size_t idx = a * c.width + k;
        out << ' ';
        if (c.type == 'S') {
          out << c.strings[idx];
        } else if (c.type == 'L') {
          out << (c.numbers[idx] != 0.0 ? 'T' : 'F');
        } else if (c.type == 'I') {
          out << static_cast<long long>(c.numbers[idx]);
        } else {
          out << format_double(c.numbers[idx]);
        }
      }
    }
    out << '\n';
  }
}

void write_extxyz(const std::string& path, const std::vector<Frame>& frames) {
  write_file_atomically(path, [&](std::ostream& out) {
    for (const auto& f : frames) {
      write_extxyz(out, f);
    }
  });
}

}  // namespace fastmlip::io

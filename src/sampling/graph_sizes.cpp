// SPDX-License-Identifier: MIT
#include "sampling/graph_sizes.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.hpp"
#include "graph/neighbor_list.hpp"
#include "io/extxyz.hpp"
#include "core/rng.hpp"

namespace fastmlip::sampling {
namespace {

// Parses a non-negative decimal integer that fits in int64; false otherwise.
bool parse_count(const std::string& tok, std::int64_t& out) {
  if (tok.empty() || tok.size() > 18) {
    return false;
  }
  std::int64_t v = 0;
  for (char c : tok) {
    if (c < '0' || c > '9') {
      return false;
    }
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

bool parse_weight(const std::string& tok, double& out) {
  if (tok.empty()) {
    return false;
  }
  char* end = nullptr;
  out = std::strtod(tok.c_str(), &end);
  return end != nullptr && *end == '\0' && std::isfinite(out) && out >= 0.0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

const char* kMeasureHelp =
    "use atoms, edges, angles, a '+'-joined set such as atoms+edges+angles, or weighted:A,B,C";

}  // namespace

SizeMeasure SizeMeasure::parse(const std::string& spec) {
  SizeMeasure m;
  m.spec = spec;
  m.w_atoms = m.w_edges = m.w_angles = 0.0;
  if (spec.rfind("weighted:", 0) == 0) {
    const auto parts = split(spec.substr(9), ',');
    if (parts.size() != 3 || !parse_weight(parts[0], m.w_atoms) || !parse_weight(parts[1], m.w_edges) ||
        !parse_weight(parts[2], m.w_angles)) {
      throw InputError(
          "size measure '" + spec +
          "': weighted: needs three non-negative numbers A,B,C (size = A atoms + B edges + C angles)");
    }
  } else {
    for (const std::string& term : split(spec, '+')) {
      double* w = term == "atoms"    ? &m.w_atoms
                  : term == "edges"  ? &m.w_edges
                  : term == "angles" ? &m.w_angles
                                     : nullptr;
      if (w == nullptr || *w != 0.0) {
        throw InputError("size measure '" + spec + "' is not understood (" +
                         (w == nullptr ? "unknown term '" + term + "'" : "'" + term + "' given twice") +
                         "); " + kMeasureHelp);
      }
      *w = 1.0;
    }
  }
  if (m.w_atoms == 0.0 && m.w_edges == 0.0 && m.w_angles == 0.0) {
    throw InputError("size measure '" + spec +
                     "' gives every graph size 0; at least one weight must be positive");
  }
  return m;
}

std::int64_t SizeMeasure::operator()(const GraphSize& g) const {
  const double x = w_atoms * static_cast<double>(g.atoms) + w_edges * static_cast<double>(g.edges) +
                   w_angles * static_cast<double>(g.angles);
  if (!(x < 9.0e18)) {
    throw InputError("size measure '" + spec + "': a graph size of " + std::to_string(x) +
                     " does not fit in 63 bits; use smaller weights");
  }
  // Integer weights on integer counts are exact below 2^53; the forgiveness only matters for
  // fractional weights, where 0.1 * 30 = 3.0000000000000004 must still give 3.
  return static_cast<std::int64_t>(std::ceil(x - 1e-9 * std::max(1.0, x)));
}

std::string SizeList::where(std::size_t g) const {
  if (g < lines.size() && lines[g] > 0) {
    return source + ":" + std::to_string(lines[g]);
  }
  return source + " graph " + std::to_string(g);
}

SizeList read_size_list(std::istream& in, const std::string& source) {
  SizeList list;
  list.source = source;
  std::string line;
  long lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const std::size_t hash = line.find('#');
    std::istringstream words(hash == std::string::npos ? line : line.substr(0, hash));
    std::vector<std::string> tok;
    for (std::string w; words >> w;) {
      tok.push_back(w);
    }
    if (tok.empty()) {
      continue;
    }
    GraphSize g;
    std::int64_t* fields[3] = {&g.atoms, &g.edges, &g.angles};
    bool ok = tok.size() <= 3;
    for (std::size_t k = 0; ok && k < tok.size(); ++k) {
      ok = parse_count(tok[k], *fields[k]);
    }
    if (!ok) {
      std::string shown = line.substr(0, 80);
      if (!shown.empty() && shown.back() == '\r') {
        shown.pop_back();
      }
      throw FileError(source, lineno,
                      "expected 1 to 3 non-negative integers 'atoms [edges [angles]]', got '" + shown + "'");
    }
    list.graphs.push_back(g);
    list.columns.push_back(static_cast<int>(tok.size()));
    list.lines.push_back(lineno);
  }
  if (in.bad()) {
    throw FileError(source, lineno, "read error after this line");
  }
  return list;
}

SizeList read_size_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw FileError(path, 0, std::string("cannot open the size list: ") + std::strerror(errno));
  }
  return read_size_list(in, path);
}

void write_size_list(std::ostream& out, const SizeList& list) {
  out << "# fastmlip size list: atoms edges angles, one graph per line (from " << list.source << ")\n";
  for (const GraphSize& g : list.graphs) {
    out << g.atoms << ' ' << g.edges << ' ' << g.angles << '\n';
  }
}

SizeList sizes_from_extxyz(const std::string& path, double cutoff, double bond_cutoff) {
  std::ifstream in(path);
  if (!in) {
    throw FileError(path, 0, std::string("cannot open the dataset: ") + std::strerror(errno));
  }
  io::ExtxyzReader reader(in, path);
  SizeList list;
  list.source = path;
  io::Frame frame;
  while (reader.next(frame)) {
    graph::GraphCounts c;
    try {
      c = graph::count_graph(frame.positions, frame.cell, frame.pbc, cutoff, bond_cutoff);
    } catch (const Error& e) {
      throw FileError(path, frame.line, "frame " + std::to_string(list.size() + 1) + ": " + e.what());
    }
    list.graphs.push_back({c.atoms, c.edges, c.angles});
    list.columns.push_back(3);
    list.lines.push_back(frame.line);
  }
  return list;
}

std::vector<std::int64_t> packing_sizes(const SizeList& list, const SizeMeasure& measure) {
  std::vector<std::int64_t> out(list.size());
  const int need = measure.needs_angles() ? 3 : measure.needs_edges() ? 2 : 1;
  for (std::size_t g = 0; g < list.size(); ++g) {
    const int have = g < list.columns.size() ? list.columns[g] : 3;
    if (have < need) {
      const char* missing = need == 3 && have == 2 ? "angles" : "edges";
      const std::string msg =
          "size measure '" + measure.spec + "' needs the " + missing + " column, but this graph has " +
          std::to_string(have) + (have == 1 ? " column" : " columns") +
          "; give 'atoms edges angles' per line, or pack by a measure of the columns given";
      if (g < list.lines.size() && list.lines[g] > 0) {
        throw FileError(list.source, list.lines[g], msg);
      }
      throw InputError(list.where(g) + ": " + msg);
    }
    out[g] = measure(list.graphs[g]);
  }
  return out;
}

namespace {

struct Source {
  const char* name;
  std::int64_t graphs;
  std::int64_t lo, hi;  // atom range; MPtrj (lo == 1, hi == 444) uses the log-normal draw
  bool lognormal;
};

// The MACE paper's Table 3.
const Source kTable3[] = {
    {"Al-HCl(aq)", 884, 281, 281, false},
    {"CuNi", 74335, 492, 500, false},
    {"HEA", 25628, 36, 48, false},
    {"Liquid water", 190267, 768, 768, false},
    {"MPtrj", 1580312, 1, 444, true},
    {"TMD", 219627, 16, 96, false},
    {"Water clusters", 460000, 9, 75, false},
    {"Zeolite", 99770, 203, 408, false},
};

// exp(mu + sigma Z): mean exp(mu + sigma^2/2) = exp(3.44) = 31.2 before rounding and the
// 1..444 window, both of which move it by less than 0.1 atom.
constexpr double kMptrjMu = 3.12;
constexpr double kMptrjSigma = 0.8;

std::int64_t draw_atoms(const Source& s, Rng& rng) {
  if (!s.lognormal) {
    return s.lo + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(s.hi - s.lo + 1)));
  }
  for (;;) {
    // Box-Muller; 1 - u keeps the logarithm finite.
    const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    const double a = std::round(std::exp(kMptrjMu + kMptrjSigma * z));
    if (a >= static_cast<double>(s.lo) && a <= static_cast<double>(s.hi)) {
      return static_cast<std::int64_t>(a);
    }
  }
}

}  // namespace

SizeList synthetic_sizes(const std::string& spec, std::uint64_t seed) {
  const std::size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  if (name != "table3" && name != "mptrj") {
    throw InputError("synthetic dataset '" + spec +
                     "' is unknown; use table3[:N] (the MACE paper's Table 3) or mptrj[:N]");
  }
  std::vector<Source> sources;
  for (const Source& s : kTable3) {
    if (name == "table3" || s.lognormal) {
      sources.push_back(s);
    }
  }
  std::int64_t full = 0;
  for (const Source& s : sources) {
    full += s.graphs;
  }
  std::int64_t n = full;
  if (colon != std::string::npos && (!parse_count(spec.substr(colon + 1), n) || n > 1'000'000'000)) {
    throw InputError("synthetic dataset '" + spec + "': N must be an integer from 0 to 10^9");
  }
  // Largest-remainder apportionment of N over the sources, so that the counts sum to N exactly
  // and follow the table's proportions.
  std::vector<std::int64_t> count(sources.size());
  std::vector<std::pair<double, std::size_t>> rest;
  std::int64_t given = 0;
  for (std::size_t k = 0; k < sources.size(); ++k) {
    const double exact =
        static_cast<double>(n) * static_cast<double>(sources[k].graphs) / static_cast<double>(full);
    count[k] = static_cast<std::int64_t>(std::floor(exact));
    given += count[k];
    rest.push_back({exact - std::floor(exact), k});
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t r = 0; given < n; ++r, ++given) {
    ++count[rest[r % rest.size()].second];
  }

  SizeList list;
  list.source = "synthetic:" + spec;
  list.graphs.reserve(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < sources.size(); ++k) {
    Rng rng(stream_seed(seed, 0, 1000 + k));
    for (std::int64_t i = 0; i < count[k]; ++i) {
      GraphSize g;
      g.atoms = draw_atoms(sources[k], rng);
      const double edges_per_atom = 30.0 + 30.0 * rng.uniform();
      const double bonds_per_atom = 6.0 + 10.0 * rng.uniform();
      g.edges = static_cast<std::int64_t>(std::llround(static_cast<double>(g.atoms) * edges_per_atom));
      g.angles = static_cast<std::int64_t>(
          std::llround(static_cast<double>(g.atoms) * bonds_per_atom * (bonds_per_atom - 1.0)));
      list.graphs.push_back(g);
    }
  }
  list.columns.assign(list.graphs.size(), 3);
  return list;
}

}  // namespace fastmlip::sampling

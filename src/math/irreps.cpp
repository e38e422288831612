// SPDX-License-Identifier: MIT
#include "math/irreps.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <iterator>
#include <numeric>

#include "core/error.hpp"

namespace fastmlip {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

// A non-negative decimal integer that fits in an int; false otherwise. Stricter than
// Python's int() (no sign, no underscores), which no irreps string written by e3nn uses.
bool parse_non_negative(std::string_view s, int& out) {
  s = trim(s);
  if (s.empty()) {
    return false;
  }
  long long v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
    v = 10 * v + (c - '0');
    if (v > INT_MAX) {
      return false;
    }
  }
  out = static_cast<int>(v);
  return true;
}

void check_entry(const MulIrrep& e, const char* where) {
  if (e.mul < 0 || e.ir.l < 0 || (e.ir.p != 1 && e.ir.p != -1)) {
    throw InputError(std::string(where) + ": invalid irreps entry (mul " + std::to_string(e.mul) + ", l " +
                     std::to_string(e.ir.l) + ", p " + std::to_string(e.ir.p) +
                     "); need mul >= 0, l >= 0 and p = +1 or -1");
  }
}

}  // namespace

Irrep Irrep::parse(std::string_view token) {
  const std::string_view name = trim(token);
  Irrep ir;
  if (name.size() >= 2 && parse_non_negative(name.substr(0, name.size() - 1), ir.l)) {
    switch (name.back()) {
      case 'e':
        ir.p = 1;
        return ir;
      case 'o':
        ir.p = -1;
        return ir;
      case 'y':
        ir.p = ir.l % 2 == 0 ? 1 : -1;
        return ir;
      default:
        break;
    }
  }
  throw InputError("Irrep::parse: cannot read \"" + std::string(token) +
                   "\" as an irrep; write l followed by e (even), o (odd) or y (parity (-1)^l), e.g. \"1o\"");
}

std::string Irrep::str() const { return std::to_string(l) + (p == 1 ? "e" : "o"); }

std::vector<Irrep> irrep_product(const Irrep& a, const Irrep& b) {
  std::vector<Irrep> out;
  for (int l = std::abs(a.l - b.l); l <= a.l + b.l; ++l) {
    out.push_back(Irrep{l, a.p * b.p});
  }
  return out;
}

std::string MulIrrep::str() const { return std::to_string(mul) + "x" + ir.str(); }

Irreps::Irreps(std::vector<MulIrrep> entries) : m_entries(std::move(entries)) {
  long long total = 0;
  for (const MulIrrep& e : m_entries) {
    check_entry(e, "Irreps");
    total += static_cast<long long>(e.mul) * e.ir.dim();
    if (total > INT_MAX) {
      throw InputError("Irreps: total dimension exceeds " + std::to_string(INT_MAX) + "; split the irreps");
    }
  }
}

Irreps Irreps::parse(std::string_view text) {
  std::vector<MulIrrep> entries;
  if (trim(text).empty()) {
    return Irreps();
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t plus = text.find('+', start);
    const std::string_view token =
        text.substr(start, plus == std::string_view::npos ? text.size() - start : plus - start);
    const auto fail = [&](const std::string& why) {
      return InputError("Irreps::parse: bad token \"" + std::string(token) + "\" in \"" + std::string(text) +
                        "\": " + why + "; expected e3nn's form, e.g. \"128x0e+128x1o\"");
    };
    MulIrrep e;
    const std::size_t x = token.find('x');
    if (x == std::string_view::npos) {
      e.mul = 1;
    } else if (token.find('x', x + 1) != std::string_view::npos) {
      throw fail("more than one 'x'");
    } else if (!parse_non_negative(token.substr(0, x), e.mul)) {
      throw fail("the multiplicity is not a non-negative integer");
    }
    try {
      e.ir = Irrep::parse(x == std::string_view::npos ? token : token.substr(x + 1));
    } catch (const InputError&) {
      throw fail("the irrep is not of the form l followed by e, o or y");
    }
    entries.push_back(e);
    if (plus == std::string_view::npos) {
      break;
    }
    start = plus + 1;
  }
  return Irreps(std::move(entries));
}

Irreps Irreps::spherical_harmonics(int lmax, int p) {
  if (lmax < 0 || (p != 1 && p != -1)) {
    throw InputError("Irreps::spherical_harmonics: need lmax >= 0 and p = +1 or -1, got lmax " +
                     std::to_string(lmax) + ", p " + std::to_string(p));
  }
  std::vector<MulIrrep> entries;
  for (int l = 0; l <= lmax; ++l) {
    entries.push_back(MulIrrep{1, Irrep{l, l % 2 == 0 ? 1 : p}});
  }
  return Irreps(std::move(entries));
}

std::string Irreps::str() const {
  std::string out;
  for (std::size_t i = 0; i < m_entries.size(); ++i) {
    if (i > 0) {
      out += '+';
    }
    out += m_entries[i].str();
  }
  return out;
}

int Irreps::dim() const noexcept {
  int d = 0;
  for (const MulIrrep& e : m_entries) {
    d += e.dim();
  }
  return d;
}

int Irreps::num_irreps() const noexcept {
  int n = 0;
  for (const MulIrrep& e : m_entries) {
    n += e.mul;
  }
  return n;
}

std::vector<int> Irreps::offsets() const {
  std::vector<int> out(m_entries.size() + 1, 0);
  for (std::size_t i = 0; i < m_entries.size(); ++i) {
    out[i + 1] = out[i] + m_entries[i].dim();
  }
  return out;
}

int Irreps::lmax() const {
  if (m_entries.empty()) {
    throw InputError("Irreps::lmax: the irreps are empty, so they have no largest l");
  }
  int l = 0;
  for (const MulIrrep& e : m_entries) {
    l = std::max(l, e.ir.l);
  }
  return l;
}

int Irreps::count(const Irrep& ir) const noexcept {
  int n = 0;
  for (const MulIrrep& e : m_entries) {
    if (e.ir == ir) {
      n += e.mul;
    }
  }
  return n;
}

std::vector<int> Irreps::ls() const {
  std::vector<int> out;
  for (const MulIrrep& e : m_entries) {
    out.insert(out.end(), static_cast<std::size_t>(e.mul), e.ir.l);
  }
  return out;
}

Irreps Irreps::simplify() const {
  std::vector<MulIrrep> out;
  for (const MulIrrep& e : m_entries) {
    if (!out.empty() && out.back().ir == e.ir) {
      out.back().mul += e.mul;
    } else if (e.mul > 0) {
      out.push_back(e);
    }
  }
  return Irreps(std::move(out));
}

Irreps Irreps::remove_zero_multiplicities() const {
  std::vector<MulIrrep> out;
  std::copy_if(m_entries.begin(), m_entries.end(), std::back_inserter(out),
               [](const MulIrrep& e) { return e.mul > 0; });
  return Irreps(std::move(out));
}

Irreps::Sorted Irreps::sort() const {
  // e3nn sorts (ir, original index, mul) tuples: by irrep, ties kept in original order.
  Sorted s;
  s.inv.resize(m_entries.size());
  std::iota(s.inv.begin(), s.inv.end(), 0);
  std::stable_sort(s.inv.begin(), s.inv.end(),
                   [this](int a, int b) { return m_entries[a].ir < m_entries[b].ir; });
  s.p.resize(m_entries.size());
  std::vector<MulIrrep> sorted;
  for (std::size_t k = 0; k < s.inv.size(); ++k) {
    s.p[s.inv[k]] = static_cast<int>(k);
    sorted.push_back(m_entries[s.inv[k]]);
  }
  s.irreps = Irreps(std::move(sorted));
  return s;
}

Irreps operator+(const Irreps& a, const Irreps& b) {
  std::vector<MulIrrep> out = a.m_entries;
  out.insert(out.end(), b.m_entries.begin(), b.m_entries.end());
  return Irreps(std::move(out));
}

}  // namespace fastmlip

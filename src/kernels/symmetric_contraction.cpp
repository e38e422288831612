// SPDX-License-Identifier: MIT
#include "kernels/symmetric_contraction.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/error.hpp"

namespace fastmlip::kernels {
namespace {

std::string shape_str(const std::vector<int>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace

SymmetricContraction SymmetricContraction::from_mace(const Irreps& irreps_in, const Irreps& irreps_out, int correlation,
                                                     const std::vector<std::vector<std::vector<double>>>& U,
                                                     const std::vector<std::vector<std::vector<int>>>& u_shapes) {
  if (correlation < 1 || correlation > 4) {
    throw InputError("SymmetricContraction: correlation " + std::to_string(correlation) + " is not supported (1..4)");
  }
  if (irreps_in.empty() || irreps_out.empty()) {
    throw InputError("SymmetricContraction: empty irreps ('" + irreps_in.str() + "' -> '" + irreps_out.str() + "')");
  }
  SymmetricContraction sc;
  sc.irreps_in = irreps_in;
  sc.irreps_out = irreps_out;
  sc.correlation = correlation;
  sc.channels = irreps_in[0].mul;
  const auto off_in = irreps_in.offsets();
  for (std::size_t i = 0; i < irreps_in.size(); ++i) {
    if (irreps_in[i].mul != sc.channels) {
      throw InputError("SymmetricContraction: every irreps_in entry needs the same multiplicity, got '" +
                       irreps_in.str() + "'");
    }
    for (int m = 0; m < irreps_in[i].ir.dim(); ++m) {
      sc.ell_offset.push_back(off_in[i] + m);
      sc.ell_stride.push_back(irreps_in[i].ir.dim());
    }
  }
  for (const auto& e : irreps_out) {
    if (e.mul != sc.channels) {
      throw InputError("SymmetricContraction: irreps_out '" + irreps_out.str() + "' must have multiplicity " +
                       std::to_string(sc.channels) + " per entry, like irreps_in");
    }
  }
  sc.num_ell = static_cast<int>(sc.ell_offset.size());
  if (U.size() != irreps_out.size() || u_shapes.size() != irreps_out.size()) {
    throw InputError("SymmetricContraction: " + std::to_string(U.size()) + " U sets for " +
                     std::to_string(irreps_out.size()) + " output irreps");
  }

  // Sorted tuples as a prefix tree: tuple_id maps (i_1..i_d) -> monomial index.
  std::map<std::vector<int>, int> tuple_id;
  std::vector<std::vector<int>> level = {{}};
  for (int d = 1; d <= correlation; ++d) {
    std::vector<std::vector<int>> next;
    for (const auto& prefix : level) {
      const int start = prefix.empty() ? 0 : prefix.back();
      const int parent = prefix.empty() ? -1 : tuple_id.at(prefix);
      for (int i = start; i < sc.num_ell; ++i) {
        auto t = prefix;
        t.push_back(i);
        tuple_id[t] = static_cast<int>(sc.monomials.size());
        sc.monomials.push_back({d, parent, i});
        next.push_back(std::move(t));
      }
    }
    level = std::move(next);
  }

  sc.num_params.resize(irreps_out.size());
  for (std::size_t o = 0; o < irreps_out.size(); ++o) {
    const int M = irreps_out[o].ir.dim();
    if (static_cast<int>(U[o].size()) != correlation || static_cast<int>(u_shapes[o].size()) != correlation) {
      throw InputError("SymmetricContraction: contraction " + std::to_string(o) + " (" + irreps_out[o].str() +
                       ") has " + std::to_string(U[o].size()) + " U tensors, expected one per order 1.." +
                       std::to_string(correlation));
    }
    for (int nu = 1; nu <= correlation; ++nu) {
      const auto& shape = u_shapes[o][nu - 1];
      // mace-torch squeezes the leading axis when L = 0.
      std::vector<int> expect;
      if (M > 1) {
        expect.push_back(M);
      }
      for (int a = 0; a < nu; ++a) {
        expect.push_back(sc.num_ell);
      }
      const bool prefix_ok = shape.size() == expect.size() + 1 && std::equal(expect.begin(), expect.end(), shape.begin());
      const int K = prefix_ok ? shape.back() : 0;
      long long numel = 1;
      for (int s : shape) {
        numel *= s;
      }
      if (!prefix_ok || K < 1 || numel != static_cast<long long>(U[o][nu - 1].size())) {
        expect.push_back(-1);
        throw InputError("SymmetricContraction: U of contraction " + std::to_string(o) + " (" + irreps_out[o].str() +
                         "), order " + std::to_string(nu) + " has shape " + shape_str(shape) + " and " +
                         std::to_string(U[o][nu - 1].size()) + " values; expected " + shape_str(expect) +
                         " with K >= 1 (K = -1 above)");
      }
      sc.num_params[o].push_back(K);
      // Sum over index permutations onto sorted tuples: entry (m, tuple) -> K values.
      std::map<std::pair<int, int>, std::vector<double>> sym;
      const auto& u = U[o][nu - 1];
      const long long per_m = numel / M / K;
      for (long long flat = 0; flat < numel / K; ++flat) {
        const int m = static_cast<int>(flat / per_m);
        long long rest = flat % per_m;
        std::vector<int> idx(nu);
        for (int a = nu - 1; a >= 0; --a) {
          idx[a] = static_cast<int>(rest % sc.num_ell);
          rest /= sc.num_ell;
        }
        bool nonzero = false;
        for (int k = 0; k < K && !nonzero; ++k) {
          nonzero = u[flat * K + k] != 0.0;
        }
        if (!nonzero) {
          continue;
        }
        std::sort(idx.begin(), idx.end());
        auto& vals = sym[{m, tuple_id.at(idx)}];
        vals.resize(K, 0.0);
        for (int k = 0; k < K; ++k) {
          vals[k] += u[flat * K + k];
        }
      }
      for (const auto& [key, vals] : sym) {
        double mag = 0;
        for (double v : vals) {
          mag = std::max(mag, std::abs(v));
        }
        if (mag < 1e-14) {
          continue;  // permutations cancelled exactly (antisymmetric parts of U)
        }
        sc.entries.push_back({static_cast<int>(o), nu, key.first, key.second, static_cast<int>(sc.usym.size())});
        sc.usym.insert(sc.usym.end(), vals.begin(), vals.end());
      }
    }
  }

  // Keep only the monomials some entry reads, with their prefixes. The others would be computed
  // and walked back for nothing: an output of L = 0 alone (MACE-MP small's layers) reads 165 of
  // the 968 sorted tuples of 0e+1o+2e+3o at correlation 3, 0e+1o (the medium's) 494. Filtering
  // keeps the tree's order, so parents still come first and siblings stay in runs.
  std::vector<char> needed(sc.monomials.size(), 0);
  for (const SCEntry& en : sc.entries) {
    for (int t = en.monomial; t >= 0 && !needed[t]; t = sc.monomials[t].parent) {
      needed[t] = 1;
    }
  }
  std::vector<int> renumber(sc.monomials.size(), -1);
  std::vector<SCMonomial> kept;
  for (std::size_t t = 0; t < sc.monomials.size(); ++t) {
    if (needed[t]) {
      SCMonomial m = sc.monomials[t];
      m.parent = m.parent < 0 ? -1 : renumber[m.parent];
      renumber[t] = static_cast<int>(kept.size());
      kept.push_back(m);
    }
  }
  sc.monomials = std::move(kept);
  for (SCEntry& en : sc.entries) {
    en.monomial = renumber[en.monomial];
  }
  return sc;
}

void SymmetricContraction::check_weights(const std::vector<std::vector<std::vector<double>>>& W,
                                         int num_elements, const char* fn) const {
  for (std::size_t o = 0; o < num_params.size(); ++o) {
    for (int nu = 1; nu <= correlation; ++nu) {
      const std::size_t expect = static_cast<std::size_t>(num_elements) * num_params[o][nu - 1] * channels;
      if (o >= W.size() || W[o].size() != static_cast<std::size_t>(correlation) || W[o][nu - 1].size() != expect) {
        throw InputError(std::string("SymmetricContraction::") + fn + ": weights of contraction " +
                         std::to_string(o) + ", order " + std::to_string(nu) + " need " +
                         std::to_string(expect) + " values ([" + std::to_string(num_elements) + ", " +
                         std::to_string(num_params[o][nu - 1]) + ", " + std::to_string(channels) + "])");
      }
    }
  }
}

std::size_t SymmetricContraction::weight_offset(int o, int nu, int num_elements) const {
  std::size_t k = 0;
  for (int a = 0; a < static_cast<int>(num_params.size()); ++a) {
    for (int b = 1; b <= correlation; ++b) {
      if (a == o && b == nu) {
        return k * static_cast<std::size_t>(num_elements) * channels;
      }
      k += num_params[a][b - 1];
    }
  }
  return k * static_cast<std::size_t>(num_elements) * channels;  // one past the end
}

std::size_t SymmetricContraction::num_weights(int num_elements) const {
  return weight_offset(static_cast<int>(num_params.size()), 1, num_elements);
}

std::vector<double> SymmetricContraction::flatten_weights(
    const std::vector<std::vector<std::vector<double>>>& W, int num_elements) const {
  check_weights(W, num_elements, "flatten_weights");
  std::vector<double> flat;
  flat.reserve(num_weights(num_elements));
  for (std::size_t o = 0; o < num_params.size(); ++o) {
    for (int nu = 1; nu <= correlation; ++nu) {
      flat.insert(flat.end(), W[o][nu - 1].begin(), W[o][nu - 1].end());
    }
  }
  return flat;
}

std::vector<double> SymmetricContraction::fold(const std::vector<std::vector<std::vector<double>>>& W,
                                               int num_elements) const {
  const int C = channels, G = static_cast<int>(entries.size());
  check_weights(W, num_elements, "fold");
  std::vector<double> coef(static_cast<std::size_t>(num_elements) * G * C, 0.0);
  for (int e = 0; e < num_elements; ++e) {
    for (int g = 0; g < G; ++g) {
      const SCEntry& en = entries[g];
      const int K = num_params[en.contraction][en.nu - 1];
      const auto& w = W[en.contraction][en.nu - 1];
      for (int k = 0; k < K; ++k) {
        const double uk = usym[en.usym_offset + k];
        for (int c = 0; c < C; ++c) {
          coef[(static_cast<std::size_t>(e) * G + g) * C + c] += uk * w[(static_cast<std::size_t>(e) * K + k) * C + c];
        }
      }
    }
  }
  return coef;
}

std::vector<std::vector<std::vector<double>>> SymmetricContraction::unfold_gradient(const std::vector<double>& grad_coef,
                                                                                    int num_elements) const {
  const int C = channels, G = static_cast<int>(entries.size());
  if (grad_coef.size() != static_cast<std::size_t>(num_elements) * G * C) {
    throw InputError("SymmetricContraction::unfold_gradient: " + std::to_string(grad_coef.size()) +
                     " values, expected elements x entries x channels = " + std::to_string(num_elements * G * C));
  }
  std::vector<std::vector<std::vector<double>>> gW(num_params.size());
  for (std::size_t o = 0; o < num_params.size(); ++o) {
    for (int nu = 1; nu <= correlation; ++nu) {
      gW[o].emplace_back(static_cast<std::size_t>(num_elements) * num_params[o][nu - 1] * C, 0.0);
    }
  }
  for (int e = 0; e < num_elements; ++e) {
    for (int g = 0; g < G; ++g) {
      const SCEntry& en = entries[g];
      const int K = num_params[en.contraction][en.nu - 1];
      auto& w = gW[en.contraction][en.nu - 1];
      for (int k = 0; k < K; ++k) {
        const double uk = usym[en.usym_offset + k];
        for (int c = 0; c < C; ++c) {
          w[(static_cast<std::size_t>(e) * K + k) * C + c] += uk * grad_coef[(static_cast<std::size_t>(e) * G + g) * C + c];
        }
      }
    }
  }
  return gW;
}

}  // namespace fastmlip::kernels

// SPDX-License-Identifier: MIT
#include "models/chgnet/chgnet_stages.hpp"

#include "core/error.hpp"

namespace fastmlip::models::chgnet {

std::vector<Stage> stage_list(int n_conv) {
  if (n_conv < 2) {
    throw InputError("CHGNet needs at least 2 atom convolutions, got n_conv = " + std::to_string(n_conv));
  }
  const int K = n_conv - 1;  // AtomConv / BondConv pairs before the final AtomConv
  std::vector<Stage> list{{StageKind::Basis, -1}, {StageKind::Embedding, -1}};
  for (int k = 0; k < K; ++k) {
    list.push_back({StageKind::AtomConv, k});
    // Right after x^{k+1} is made: BondConv and AngleUpdate read only its local rows, the
    // next AtomConv its ghost rows too.
    list.push_back({StageKind::ExchangeAtoms, k + 1});
    list.push_back({StageKind::BondConv, k});
    if (k + 1 < K) {
      list.push_back({StageKind::AngleUpdate, k});
    }
  }
  list.push_back({StageKind::Magmom, K});
  list.push_back({StageKind::AtomConv, K});
  list.push_back({StageKind::Readout, -1});
  return list;
}

std::string describe(const Stage& s) {
  const std::string k = std::to_string(s.layer);
  switch (s.kind) {
    case StageKind::Basis:
      return "basis";
    case StageKind::Embedding:
      return "embedding";
    case StageKind::AtomConv:
      return "atom_conv " + k;
    case StageKind::ExchangeAtoms:
      return "exchange x" + k;
    case StageKind::BondConv:
      return "bond_conv " + k;
    case StageKind::AngleUpdate:
      return "angle_update " + k;
    case StageKind::Magmom:
      return "magmom x" + k;
    case StageKind::Readout:
      return "readout";
  }
  return "?";
}

}  // namespace fastmlip::models::chgnet

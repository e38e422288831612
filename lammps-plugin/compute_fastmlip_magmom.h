// SPDX-License-Identifier: MIT
#pragma once
// compute ID group fastmlip/magmom: the magnetic moment (mu_B) of each atom, as predicted by
// pair_style fastmlip/chgnet at the current step (CHGNet's site-wise magmom head). A per-atom
// vector, for dump custom (c_ID) and, through compute reduce, thermo. Site energies need no
// compute of their own: they are the pair style's per-atom energies (compute pe/atom).
// Manual: docs/pair_fastmlip_chgnet.md.
#include "compute.h"

namespace LAMMPS_NS {

class PairFastmlipChgnet;

class ComputeFastmlipMagmom : public Compute {
 public:
  ComputeFastmlipMagmom(LAMMPS* lmp, int narg, char** arg);
  ~ComputeFastmlipMagmom() override;
  void init() override;
  void compute_peratom() override;
  double memory_usage() override;

 private:
  PairFastmlipChgnet* m_pair = nullptr;
  int m_nmax = 0;
  double* m_values = nullptr;
};

}  // namespace LAMMPS_NS

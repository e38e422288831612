// SPDX-License-Identifier: MIT
#include "compute_fastmlip_magmom.h"

#include "atom.h"
#include "error.h"
#include "force.h"
#include "memory.h"
#include "pair.h"
#include "pair_fastmlip_chgnet.h"
#include "update.h"

using namespace LAMMPS_NS;

ComputeFastmlipMagmom::ComputeFastmlipMagmom(LAMMPS* lmp, int narg, char** arg) : Compute(lmp, narg, arg) {
  if (narg != 3) {
    error->all(FLERR, "compute fastmlip/magmom takes no arguments: compute ID group fastmlip/magmom");
  }
  peratom_flag = 1;
  size_peratom_cols = 0;
}

ComputeFastmlipMagmom::~ComputeFastmlipMagmom() { memory->destroy(m_values); }

void ComputeFastmlipMagmom::init() {
  // Also found inside pair_style hybrid: pair_match with exact = 0 looks into sub-styles.
  m_pair = dynamic_cast<PairFastmlipChgnet*>(force->pair_match("fastmlip/chgnet", 0));
  if (m_pair == nullptr) {
    error->all(FLERR, "compute fastmlip/magmom needs pair_style fastmlip/chgnet, which predicts the moments");
  }
}

void ComputeFastmlipMagmom::compute_peratom() {
  invoked_peratom = update->ntimestep;
  if (m_pair->magmom_step() != update->ntimestep) {
    error->all(FLERR, "compute fastmlip/magmom: the moments are from step {}, not the current step {}; the pair "
                      "style has not run on this step (use the compute on steps where forces are computed)",
               m_pair->magmom_step(), update->ntimestep);
  }
  const int nlocal = atom->nlocal;
  if (atom->nmax > m_nmax) {
    memory->destroy(m_values);
    m_nmax = atom->nmax;
    memory->create(m_values, m_nmax, "fastmlip/magmom:values");
    vector_atom = m_values;
  }
  const auto& m = m_pair->magmoms();
  const int* mask = atom->mask;
  for (int i = 0; i < nlocal; ++i) {
    m_values[i] = (mask[i] & groupbit) && i < static_cast<int>(m.size()) ? m[i] : 0.0;
  }
}

double ComputeFastmlipMagmom::memory_usage() { return static_cast<double>(m_nmax) * sizeof(double); }

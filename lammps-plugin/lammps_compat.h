// SPDX-License-Identifier: MIT
#pragma once
// The one place that absorbs LAMMPS API changes since the 29 Sep 2021 release, keyed on
// LAMMPS_VERSION_NUMBER (yyyymmdd, derived from version.h by cmake/FastmlipLammps.cmake).
// Pair styles call these helpers instead of the version-specific API.
#ifndef LAMMPS_VERSION_NUMBER
#error "LAMMPS_VERSION_NUMBER must be defined (yyyymmdd); cmake/FastmlipLammps.cmake does this"
#endif

#include "comm.h"
#include "neighbor.h"
#include "pair.h"
#if LAMMPS_VERSION_NUMBER < 20220324
#include "neigh_request.h"
#endif

namespace fastmlip::plugin {

/// Requests a full neighbor list with ghost neighbors for a many-body pair style.
/// 2022-03-24 replaced neighbor->request() + flag fields with add_request(this, flags).
/// `instance_me` is the pair's protected member of that name (only the old API needs it).
inline void request_full_ghost_list(LAMMPS_NS::Pair* pair, LAMMPS_NS::Neighbor* neighbor, int instance_me) {
#if LAMMPS_VERSION_NUMBER >= 20220324
  (void)instance_me;
  neighbor->add_request(pair, LAMMPS_NS::NeighConst::REQ_FULL | LAMMPS_NS::NeighConst::REQ_GHOST);
#else
  const int irequest = neighbor->request(pair, instance_me);
  neighbor->requests[irequest]->half = 0;
  neighbor->requests[irequest]->full = 1;
  neighbor->requests[irequest]->ghost = 1;
#endif
}

/// Requests a full neighbor list of local atoms (neighbors may be ghosts).
inline void request_full_list(LAMMPS_NS::Pair* pair, LAMMPS_NS::Neighbor* neighbor, int instance_me) {
#if LAMMPS_VERSION_NUMBER >= 20220324
  (void)instance_me;
  neighbor->add_request(pair, LAMMPS_NS::NeighConst::REQ_FULL);
#else
  const int irequest = neighbor->request(pair, instance_me);
  neighbor->requests[irequest]->half = 0;
  neighbor->requests[irequest]->full = 1;
#endif
}

/// Forward / reverse communication of a pair style's per-atom data (pack_forward_comm and
/// friends, pair->comm_forward / comm_reverse values per atom). LAMMPS 24 Mar 2022 renamed
/// forward_comm_pair(Pair*) to forward_comm(Pair*) (lammps/lammps#3148).
inline void forward_comm(LAMMPS_NS::Comm* comm, LAMMPS_NS::Pair* pair) {
#if LAMMPS_VERSION_NUMBER >= 20220324
  comm->forward_comm(pair);
#else
  comm->forward_comm_pair(pair);
#endif
}
inline void reverse_comm(LAMMPS_NS::Comm* comm, LAMMPS_NS::Pair* pair) {
#if LAMMPS_VERSION_NUMBER >= 20220324
  comm->reverse_comm(pair);
#else
  comm->reverse_comm_pair(pair);
#endif
}

}  // namespace fastmlip::plugin

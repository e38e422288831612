// SPDX-License-Identifier: MIT
#pragma once
// pair_style fastmlip/chgnet: CHGNet potentials (fastmlip potential files converted from chgnet
// checkpoints) inside LAMMPS.
//
// The style only translates: LAMMPS' full neighbor list of local atoms becomes the model's
// graph (centres local, neighbors local or ghost); ghost atom features are refreshed from their
// owners after every AtomConv, and the ghosts' half bond updates (the angles at a bond's far
// end) once per BondConv, through LAMMPS' forward communication, with the adjoints returned by
// reverse communication. So a halo of one 6 A cutoff suffices for all four convolutions. The
// model is fastmlip::models::ChgnetModel. Manual: docs/pair_fastmlip_chgnet.md.
#include <memory>
#include <string>
#include <vector>

#include "pair.h"

namespace LAMMPS_NS {

class PairFastmlipChgnet : public Pair {
 public:
  explicit PairFastmlipChgnet(LAMMPS* lmp);
  ~PairFastmlipChgnet() override;

  void compute(int eflag, int vflag) override;
  void settings(int narg, char** arg) override;
  void coeff(int narg, char** arg) override;
  void init_style() override;
  double init_one(int i, int j) override;
  double memory_usage() override;

  int pack_forward_comm(int n, int* list, double* buf, int pbc_flag, int* pbc) override;
  void unpack_forward_comm(int n, int first, double* buf) override;
  int pack_reverse_comm(int n, int first, double* buf) override;
  void unpack_reverse_comm(int n, int* list, double* buf) override;

  /// Magnetic moments (mu_B) of the local atoms at the last compute(), by local index; what
  /// compute fastmlip/magmom reports.
  const std::vector<double>& magmoms() const { return m_magmom; }
  /// The timestep of the last compute() (-1 before the first).
  bigint magmom_step() const { return m_magmom_step; }

  struct Backend;
  /// What the current exchange moves. Node rows: `width` values per atom. Slot rows: for each
  /// atom, slots [pass * per_pass, (pass + 1) * per_pass) of its own, `width` values each
  /// (an atom with fewer slots sends zeros, and receives into none).
  struct CommRows {
    double* d = nullptr;
    float* f = nullptr;
    int width = 0;
    bool slots = false;
    int pass = 0;
  };

  /// Slot rows moved per atom in one communication: 8 rows of 64 features is 512 doubles per
  /// atom, about LAMMPS' own buffer for a many-body style, and few atoms have more than 16
  /// bonds shorter than 3 A, so two passes per exchange are the usual case.
  static constexpr int kSlotsPerPass = 8;

 protected:
  std::unique_ptr<Backend> m_backend;
  std::string m_precision = "float32";
  std::vector<int> m_type_z;  // [ntypes + 1] atomic number of each LAMMPS type
  double m_cutoff = 0.0, m_bond_cutoff = 0.0;
  CommRows m_comm;
  std::vector<int> m_slot_start;  // [nall + 1] during a compute: the model's slot layout
  int m_passes = 0;               // slot passes per exchange, the same on every rank

  // Graph buffers, reused between steps.
  std::vector<int> m_species, m_center, m_neighbor, m_edge_start, m_reverse_slot;
  std::vector<double> m_vectors_d, m_meta;
  std::vector<float> m_vectors_f;
  std::vector<double> m_magmom;
  bigint m_magmom_step = -1;

  void allocate();
  template <class T>
  void compute_with(int eflag, int vflag);
  /// The slot layout of every atom and the reverse slot of each short edge (one count and a
  /// few metadata exchanges).
  void build_slots(int nlocal, int nall);
  /// Forward or reverse exchange of slot rows, in as many passes as every rank needs.
  template <class T>
  void exchange_slots(T* rows, int width, bool reverse);
  template <class T>
  void exchange_nodes(T* rows, int width, bool reverse);
  /// One atom's part of an exchange buffer (the layout of CommRows), packed or unpacked (added
  /// with `add`); return the number of doubles.
  int pack_atom(int j, double* buf) const;
  int unpack_atom(int j, const double* buf, bool add);
  bool single_precision() const { return m_precision == "float32"; }
  static constexpr double kMinDistance = 0.1;
  template <class T>
  friend class ChgnetLammpsExchange;
};

}  // namespace LAMMPS_NS

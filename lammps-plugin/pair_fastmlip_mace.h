// SPDX-License-Identifier: MIT
#pragma once
// pair_style fastmlip/mace: MACE potentials (fastmlip potential files) inside LAMMPS.
//
// The style only translates: LAMMPS' full neighbor list of local atoms becomes the model's
// graph (receivers local, senders local or ghost), the model's node features of ghost atoms are
// refreshed from their owners after every interaction layer through LAMMPS' forward
// communication (and their adjoints returned by reverse communication), and dE/d(edge vector)
// is tallied into forces, energies and virials. The model itself is fastmlip::models::MaceModel.
// Manual: docs/pair_fastmlip_mace.md.
#include <memory>
#include <string>
#include <vector>

#include "models/mace/mace_model.hpp"
#include "pair.h"

namespace LAMMPS_NS {

class PairFastmlipMace : public Pair {
 public:
  explicit PairFastmlipMace(LAMMPS* lmp);
  ~PairFastmlipMace() override;

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

  /// The model in its compute precision (float or double); defined in the .cpp.
  struct Backend;
  /// Rows the current exchange moves: exactly one of the two is set, `width` values per atom.
  struct CommRows {
    double* d = nullptr;
    float* f = nullptr;
    int width = 0;
  };

 protected:
  std::unique_ptr<Backend> m_backend;
  std::string m_precision = "float64";
  std::string m_head;
  double m_radial_spacing = 0.0;  ///< 0: exact radial MLP; else the spline's knot spacing (A)
  std::vector<int> m_type_species;  // [ntypes + 1]: model species index of each LAMMPS type
  double m_cutoff = 0.0;
  CommRows m_comm;

  // Graph buffers, reused between steps.
  std::vector<int> m_species, m_sender, m_receiver, m_edge_start;
  std::vector<double> m_vectors_d;
  std::vector<float> m_vectors_f;

  void allocate();
  template <class T>
  void compute_with(int eflag, int vflag);
  /// Runs the model on a graph in host memory (receivers local, senders local or ghost), with
  /// ghost rows exchanged through LAMMPS' pair communication after every layer; errors of the
  /// model become error->one. Shared by the host style and the /kk style.
  template <class T>
  const fastmlip::models::MaceResult<T>& run_model(const fastmlip::models::MaceGraph<T>& graph);
  bool single_precision() const { return m_precision == "float32"; }
  /// Atoms closer than this (Angstrom) are an error, not a force: no MACE training set holds
  /// such pairs, and a model extrapolates wildly there (the manual documents the limit).
  static constexpr double kMinDistance = 0.1;
  /// The rank-local error for two atoms `rsq` apart (squared), closer than kMinDistance.
  void error_too_close(tagint a, tagint b, double rsq);
  friend struct Backend;
};

}  // namespace LAMMPS_NS

// SPDX-License-Identifier: MIT
#pragma once
// pair_style fastmlip/mace: MACE potentials (fastmlip potential files) inside LAMMPS.
//
// The style only translates (PairFastmlipBase): LAMMPS' full neighbor list of local atoms
// becomes the model's graph (receivers local, senders local or ghost), the model's node
// features of ghost atoms are refreshed from their owners after every interaction layer through
// LAMMPS' forward communication (and their adjoints returned by reverse communication), and
// dE/d(edge vector) is tallied into forces, energies and virials. The model itself is
// fastmlip::models::MaceModel. Manual: docs/pair_fastmlip_mace.md.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pair_fastmlip_base.h"

namespace LAMMPS_NS {

class PairFastmlipMace : public PairFastmlipBase {
 public:
  explicit PairFastmlipMace(LAMMPS* lmp);
  ~PairFastmlipMace() override;

  void settings(int narg, char** arg) override;

  /// The model in its compute precision (float or double); defined in the .cpp.
  struct Backend;

 protected:
  void load_model(const fastmlip::io::PotentialFile& file, const std::string& path,
                  const std::vector<std::string>& symbols) override;
  bool has_model() const override { return m_backend != nullptr; }
  bool single_precision() const override { return m_precision == "float32"; }
  int max_exchange_width() const override;
  Output evaluate(const Graph<double>& edges) override;
  Output evaluate(const Graph<float>& edges) override;
  bool evaluates_in_place() const override;
  DeviceOutput evaluate_in_place(const DeviceGraph<double>& edges, const DeviceAtoms& atoms) override;
  DeviceOutput evaluate_in_place(const DeviceGraph<float>& edges, const DeviceAtoms& atoms) override;

 private:
  template <class T>
  Output evaluate_with(const Graph<T>& edges);
  template <class T>
  DeviceOutput evaluate_in_place_with(const DeviceGraph<T>& edges);

  std::unique_ptr<Backend> m_backend;
  std::string m_precision = "float64";
  std::string m_head;
  double m_radial_spacing = 0.0;  ///< 0: exact radial MLP; else the spline's knot spacing (A)
  /// The charge and spin keywords: the system's total charge and spin multiplicity, for a model
  /// that embeds them (MaceOptions::total_charge / total_spin).
  std::optional<double> m_total_charge, m_total_spin;
};

}  // namespace LAMMPS_NS

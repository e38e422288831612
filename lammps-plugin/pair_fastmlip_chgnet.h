// SPDX-License-Identifier: MIT
#pragma once
// pair_style fastmlip/chgnet: CHGNet potentials (fastmlip potential files converted from chgnet
// checkpoints) inside LAMMPS.
//
// The style only translates (PairFastmlipBase): LAMMPS' full neighbor list of local atoms
// becomes the model's graph (centres local, neighbors local or ghost); ghost atom features are
// refreshed from their owners after every AtomConv, and the ghosts' half bond updates (the
// angles at a bond's far end) once per BondConv, through LAMMPS' forward communication, with
// the adjoints returned by reverse communication. So a halo of one 6 A cutoff suffices for all
// four convolutions. The model is fastmlip::models::ChgnetModel. Manual:
// docs/pair_fastmlip_chgnet.md.
#include <memory>
#include <string>
#include <vector>

#include "models/chgnet/chgnet_slots.hpp"
#include "pair_fastmlip_base.h"

namespace LAMMPS_NS {

class PairFastmlipChgnet : public PairFastmlipBase {
 public:
  explicit PairFastmlipChgnet(LAMMPS* lmp);
  ~PairFastmlipChgnet() override;

  void settings(int narg, char** arg) override;
  double memory_usage() override;

  /// Magnetic moments (mu_B) of the local atoms at the last compute(), by local index; what
  /// compute fastmlip/magmom reports.
  const std::vector<double>& magmoms() const { return m_magmom; }
  /// The timestep of the last compute() (-1 before the first).
  bigint magmom_step() const { return m_magmom_step; }

  /// Forward or reverse exchange of slot rows (CommRows::slots), in as many passes as every
  /// rank needs.
  template <class T>
  void exchange_slots(T* rows, int width, bool reverse);
  /// The slot layout the model's slots follow during a compute (ChgnetSlotBuilder tells it):
  /// kept on the host for the slot exchanges, with the passes every rank makes.
  void set_slot_layout(const int* slot_start, int nall, int local_max);
  /// The same layout where an in-place evaluation's builder keeps it, in DeviceMemory
  /// (`slot_start` [nall + 1]), for its slot exchanges there: from when the builder reports it
  /// until the evaluation ends.
  void set_device_slot_start(const int* slot_start, int nall);

  struct Backend;

  /// Slot rows moved per atom in one communication: 8 rows of 64 features is 512 doubles per
  /// atom, about LAMMPS' own buffer for a many-body style, and few atoms have more than 16
  /// bonds shorter than 3 A, so two passes per exchange are the usual case.
  static constexpr int kSlotsPerPass = 8;

 protected:
  void load_model(const fastmlip::io::PotentialFile& file, const std::string& path,
                  const std::vector<std::string>& symbols) override;
  bool has_model() const override { return m_backend != nullptr; }
  bool single_precision() const override { return m_precision == "float32"; }
  int max_exchange_width() const override;
  Output evaluate(const Graph<double>& edges) override;
  Output evaluate(const Graph<float>& edges) override;
  bool evaluate_reads_atoms() const override { return true; }  // short bonds and bond matching
  int pack_atom(int j, double* buf) const override;
  int unpack_atom(int j, const double* buf, bool add) override;
  bool evaluates_in_place() const override;
  void exchange_slot_rows(double* rows, int width, bool reverse) override;
  void exchange_slot_rows(float* rows, int width, bool reverse) override;
  SlotLayout slot_layout_in_model_memory() const override;
  DeviceOutput evaluate_in_place(const DeviceGraph<double>& edges, const DeviceAtoms& atoms) override;
  DeviceOutput evaluate_in_place(const DeviceGraph<float>& edges, const DeviceAtoms& atoms) override;

 private:
  template <class T>
  Output evaluate_with(const Graph<T>& edges);
  template <class T>
  DeviceOutput evaluate_in_place_with(const DeviceGraph<T>& edges, const DeviceAtoms& atoms);
  /// error->one for a short bond whose reverse no slot holds (ChgnetSlotBuilder), naming the atoms.
  [[noreturn]] void error_unpaired(const fastmlip::models::UnpairedBondError& e);

  std::unique_ptr<Backend> m_backend;
  std::string m_precision = "float32";
  double m_bond_cutoff = 0.0;
  std::vector<int> m_slot_start;  // [nall + 1] during a compute: the model's slot layout
  int m_passes = 0;               // slot passes per exchange, the same on every rank
  /// The same layout in DeviceMemory during an in-place evaluation (the /kk styles' slot
  /// exchanges on the device), empty otherwise.
  Kokkos::View<const int*, DeviceMemory> m_device_slot_start;
  std::vector<double> m_magmom;
  bigint m_magmom_step = -1;
};

}  // namespace LAMMPS_NS

// SPDX-License-Identifier: MIT
#pragma once
/// \file The model families train-potential trains and evaluates (--model mace|chgnet), behind one
/// interface: a model from a potential file, data::Config as the model's structures, batches, and
/// a forward pass giving what the loss and the metrics take. The trainer (train/run.cpp) and
/// `train-potential eval` (train/evaluate.cpp) are written once against it.
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "data/dataset.hpp"
#include "io/potential_file.hpp"
#include "models/chgnet.hpp"
#include "models/mace.hpp"
#include "options.hpp"

namespace fastmlip::trainer::train {

/// A forward pass as the trainer uses it: energies, forces and virials (as the metrics take them)
/// and, from a model with a magmom head, magnetic moments.
struct FamilyOutput {
  MaceOutput out;
  torch::Tensor magmoms;  ///< [N] mu_B, or undefined
};

/// Forces always; virials and a differentiable graph as the pass needs (both families' options).
template <class ForwardOptions>
ForwardOptions forward_options(bool virials, bool create_graph) {
  ForwardOptions fo;
  fo.forces = true;
  fo.virials = virials;
  fo.create_graph = create_graph;
  return fo;
}

/// What the trainer needs of one model family (--model): its model from a potential file, a
/// data::Config as the model's structure, batches and the forward pass. T: the precision.
/// The structures of `configs` for family F's model (F::structure of each).
template <class F>
std::vector<typename F::Structure> structures_of(const typename F::Model& m,
                                                 const std::vector<data::Config>& configs) {
  std::vector<typename F::Structure> out;
  out.reserve(configs.size());
  for (const auto& c : configs) {
    out.push_back(F::structure(m, c));
  }
  return out;
}

template <class T>
struct MaceFamily {
  using Scalar = T;
  using Model = MaceTorchModel<T>;
  using Structure = MaceStructure;
  using Batch = MaceBatch;
  static constexpr bool kMace = true;

  static std::unique_ptr<Model> make(const io::PotentialFile& file, const Options&, torch::Device device) {
    return std::make_unique<Model>(file, "", device);
  }
  /// The model's species indices; an element the model lacks is an InputError naming the frame
  /// and the atom.
  static Structure structure(const Model& m, const data::Config& c) {
    Structure s;
    s.positions = c.positions;
    s.cell = c.cell;
    s.pbc = c.pbc;
    s.total_charge = c.total_charge.value_or(0.0);
    s.total_spin = c.total_spin.value_or(1.0);
    // Here, once per frame and naming it, rather than as a batch's error in the forward pass.
    if (const std::string problem = m.graph_feature_problem(s.total_charge, s.total_spin); !problem.empty()) {
      throw InputError("train-potential: " + c.where() + ": " + problem);
    }
    for (std::size_t i = 0; i < c.natoms(); ++i) {
      const int k = m.species_index(c.atomic_numbers[i]);
      if (k < 0) {
        throw InputError("train-potential: " + c.where() + ": atom " + std::to_string(i + 1) +
                         " has Z = " + std::to_string(c.atomic_numbers[i]) +
                         ", which the model does not have (give a foundation model that covers it)");
      }
      s.species.push_back(k);
    }
    return s;
  }
  /// Whether the model has element z (what structure() checks of each atom).
  static bool covers(const Model& m, int z) { return m.species_index(z) >= 0; }
  static Batch batch(const Model& m, const std::vector<Structure>& s) {
    return make_mace_batch(s, m.cutoff());
  }
  static FamilyOutput forward(Model& m, const Batch& batch, bool virials, bool create_graph) {
    return {m.forward(batch, forward_options<MaceForwardOptions>(virials, create_graph)), {}};
  }
};

template <class T>
struct ChgnetFamily {
  using Scalar = T;
  using Model = ChgnetTorchModel<T>;
  using Structure = ChgnetStructure;
  using Batch = ChgnetBatch;
  static constexpr bool kMace = false;

  static std::unique_ptr<Model> make(const io::PotentialFile& file, const Options& o, torch::Device device) {
    ChgnetTorchOptions co;
    co.device = device;
    co.direct_heads = o.get_bool("direct_heads");
    co.seed = static_cast<std::uint64_t>(o.get_int("seed"));
    return std::make_unique<Model>(file, co);
  }
  static Structure structure(const Model& m, const data::Config& c) {
    for (std::size_t i = 0; i < c.natoms(); ++i) {
      if (!covers(m, c.atomic_numbers[i])) {
        throw InputError("train-potential: " + c.where() + ": atom " + std::to_string(i + 1) +
                         " has Z = " + std::to_string(c.atomic_numbers[i]) +
                         ", which the CHGNet model does not have (it covers Z = 1.." +
                         std::to_string(m.num_elements()) + ")");
      }
    }
    return {c.positions, c.atomic_numbers, c.cell, c.pbc};
  }
  static bool covers(const Model& m, int z) { return z >= 1 && z <= m.num_elements(); }
  static Batch batch(const Model& m, const std::vector<Structure>& s) {
    return make_chgnet_batch(s, m.cutoff(), m.bond_cutoff());
  }
  static FamilyOutput forward(Model& m, const Batch& batch, bool virials, bool create_graph) {
    ChgnetOutput o = m.forward(batch, forward_options<ChgnetForwardOptions>(virials, create_graph));
    return {{o.energy, o.site_energy, o.forces, o.virials}, o.magmom};
  }
};

}  // namespace fastmlip::trainer::train

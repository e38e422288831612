// SPDX-License-Identifier: MIT
#pragma once
/// \file The caller's per-layer communication of node rows, shared by the models (MACE,
/// CHGNet): ghost rows are refreshed from their owners after each layer, and their adjoints
/// returned in the reverse pass, so a halo of one cutoff suffices.

namespace fastmlip::models {

/// The caller's communication between layers (MACE's use is described here; CHGNet's in
/// chgnet_model.hpp). Rows are nodes, `width` values per row,
/// row-major, in the model's compute precision; `rows` holds n_total rows (host memory, or the
/// model's own where rows_in_model_memory()).
///
/// What is exchanged: the sender features of layer t >= 1, h^t = linear_up(x^t), which the
/// model computes for the local rows only (mace-torch's LAMMPS path exchanges the same
/// tensor). Call order of one compute(), T = num_layers():
///   forward(h^1), forward(h^2), .., forward(h^{T-1})             (T-1 calls, in layer order)
///   and with gradients, afterwards:
///   reverse(dE/dh^{T-1}), .., reverse(dE/dh^1)                    (T-1 calls, reverse order)
/// Widths are those of each layer's node features (all equal for MACE-MP shapes);
/// max_exchange_width() bounds them. A one-layer model never calls the exchange.
template <class T>
class FeatureExchange {
 public:
  virtual ~FeatureExchange() = default;
  /// Overwrite rows n_local..n_total-1 of `rows` with the rows of their owners.
  virtual void forward(T* rows, int width) = 0;
  /// Add rows n_local..n_total-1 of `rows` into their owners' rows, then zero them.
  virtual void reverse(T* rows, int width) = 0;
  /// Where every ghost node is a periodic image of a local node (one rank holding the whole
  /// system): the owner (0..n_local-1) of each ghost n_local..n_total-1 of the graph being
  /// evaluated, [n_total - n_local] in host memory, valid for this evaluation. The model then
  /// does every exchange itself where the rows are (image_exchange.hpp), with the same result,
  /// and calls none of this class's exchanges. nullptr (the default): the exchanges above.
  virtual const int* ghost_owners() { return nullptr; }
  /// Whether forward() and reverse() take the rows where the model keeps them, in the memory of
  /// the execution space it runs on, rather than in host memory: a caller that moves them there
  /// (a /kk pair style, whose LAMMPS packs pair communication on the KOKKOS device). The model
  /// then hands its rows over as they are (exchange_on_host.hpp, exchange_node_rows); otherwise
  /// through a host copy where its memory is not the host's.
  virtual bool rows_in_model_memory() const { return false; }
};

}  // namespace fastmlip::models

// SPDX-License-Identifier: MIT
#pragma once
/// \file CHGNet's one definition: the ordered list of blocks a model with n_conv atom
/// convolutions runs (chgnet's model.py forward, FastCHGNet's pruning), run by two executors:
///
/// - ChgnetModel (chgnet_model.cpp), the pair styles' model: each block's compute stage in list
///   order (fused tiles, redundancy removal), then its hand-written reverse stage in the
///   opposite order for dE/d(edge vectors);
/// - the trainer's ChgnetTorchModel (trainer/models/chgnet.cpp): each block as the same core
///   kernels (dense, LayerNorm, gated MLP, bases) wrapped as autograd functions.
///
/// With x^k atom, b^k bond and g^k angle features:
///
///   Basis           B(r), B'(r_short), F(theta)
///   Embedding       x^0, b^0, g^0 and the edge weights w, w'
///   per k = 0 .. n_conv-2:
///     AtomConv k      x^k, b^k       -> x^{k+1}
///     ExchangeAtoms   x^{k+1}: ghost rows from their owners (only the next AtomConv reads them)
///     BondConv k      b^k, g^k, x^{k+1} -> b^{k+1}
///     AngleUpdate k   b^{k+1}, g^k, x^{k+1} -> g^{k+1}   (not after the last BondConv: no
///                     later block reads it)
///   Magmom          |site_wise(x^{n_conv-1})|
///   AtomConv n_conv-1 -> x^{n_conv}
///   Readout         E_i = MLP(LayerNorm(x^{n_conv}_i)) + AtomRef[Z_i]
///
/// Which blocks run and in what order is decided here, once; what each block computes is its
/// executor's (the math of each: chgnet_model.cpp's header).
#include <string>
#include <vector>

namespace fastmlip::models::chgnet {

enum class StageKind {
  Basis,          ///< the radial and Fourier bases of the edges, short edges and angles
  Embedding,      ///< x^0, b^0, g^0, w, w'
  AtomConv,       ///< x^{k+1} = x^k + O^a_k sum_e GMLP([x_c, b_e, x_n]) * w_e
  ExchangeAtoms,  ///< x^{k+1}'s ghost rows from their owners (MPI halos)
  BondConv,       ///< b^{k+1} = b^k + O^b_k (H_s + H_reverse(s))
  AngleUpdate,    ///< g^{k+1} = g^k + GMLP([b_a, b_b, g, x_c])
  Magmom,         ///< magmom_i = |site_wise(x_i)|: not differentiated
  Readout,        ///< site energies
};

struct Stage {
  StageKind kind = StageKind::Basis;
  /// The block's k: AtomConv, BondConv, AngleUpdate; the features' level for ExchangeAtoms
  /// and Magmom (x^layer); -1 for the others.
  int layer = -1;
};

/// The blocks of a CHGNet with `n_conv` atom convolutions (at least 2), in evaluation order.
std::vector<Stage> stage_list(int n_conv);

/// "bond_conv 1", for messages, docs and tests.
std::string describe(const Stage& stage);

}  // namespace fastmlip::models::chgnet

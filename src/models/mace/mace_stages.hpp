// SPDX-License-Identifier: MIT
#pragma once
/// \file MACE's one definition: the ordered list of stages a potential file's model runs, and
/// which value each stage reads and writes. Two executors run the same list:
///
/// - MaceModel (mace_model.cpp), the pair styles' model: each stage's compute_X in list order,
///   then its hand-written reverse_X in the opposite order for dE/d(edge vectors);
/// - the trainer's MaceTorchModel (trainer/models/mace.cpp): each stage as the same core
///   kernels wrapped as autograd functions, so LibTorch differentiates it twice.
///
/// What differs between mace-torch's block classes (a residual or non-residual interaction, a
/// self-connection or not, ZBL) is decided here, once, from the MaceSpec; the executors know
/// each stage kind, not the model's wiring. A new block class is a new stage list (and, where it
/// needs one, a new stage kind in both executors).
///
/// Per interaction t, with x^t the layer's input features (paper eqs. 8-11, 13):
///
///   LinearUp          x^t          -> h^t       linear_up, on the rows x^t has
///   ExchangeSenders   h^t          -> h^t       ghost rows from their owners (t > 0, MPI halos)
///   Convolution       h^t, Y, B    -> A^t       sum over edges of TP(h_j, Y, MLP_t(B))
///   InteractionLinear A^t          -> m^t       linear / avg_num_neighbors (residual blocks)
///                                  -> l^t       (non-residual: skip_tp's input)
///   SkipTP            x^t          -> s^t       residual blocks with a self-connection
///                     l^t          -> m^t       non-residual blocks (MACE-MP's first layer)
///   Product           m^t          -> x^{t+1}   products.t.linear(SC_t(m; z))
///   AddResidual       s^t          -> x^{t+1}   x^{t+1} += s^t
///   Readout           x^{t+1}      -> energy    readout_t(x^{t+1})[head], summed per node
///                                               (use_last_readout_only: the last layer only)
///
/// RealAgnosticResidualNonLinearInteractionBlock (MACE-MH-1, OMOL) replaces the two stages after
/// the convolution by
///
///   InteractionLinear A^t          -> l^t       linear_1(A) / (alpha + beta density)
///   LinearResidual    h^t          -> u^t       linear_res(h^t), local rows
///   AddResidual       l^t          -> u^t       u^t += l^t
///   Gate              u^t          -> g^t       the equivariant gate
///   LinearOut         g^t          -> m^t       linear_2
///   SkipTP            x^t          -> s^t       a plain Linear (no species)
///
/// around them EdgeBasis (Y, B from the edge vectors), Embedding (x^0) and Zbl first, and
/// NodeEnergy (E0, scale, shift) last.
#include <string>
#include <vector>

namespace fastmlip::models::mace {

struct MaceSpec;

/// The node-feature values of one layer that stages pass to each other (the edge values Y and B
/// and the energies are the EdgeBasis, Readout and NodeEnergy stages' own).
enum class Value {
  Features,        ///< x^t: the layer's input (x^0: every node; x^{t>0}: the local nodes)
  Senders,         ///< h^t = linear_up(x^t): every node, ghosts' rows from their owners
  Messages,        ///< A^t: the convolution's sum over each node's edges
  LinearOut,       ///< l^t: linear(A^t) of a non-residual block, skip_tp's input
  SelfConnection,  ///< s^t: skip_tp(x^t, z), the residual
  ProductInput,    ///< m^t: the symmetric contraction's input
  GateInput,       ///< u^t: the non-linear block's gate input
  GateOutput,      ///< g^t: its gate's output
};

struct Slot {
  Value value = Value::Features;
  int layer = 0;
  friend bool operator==(const Slot& a, const Slot& b) { return a.value == b.value && a.layer == b.layer; }
  friend bool operator!=(const Slot& a, const Slot& b) { return !(a == b); }
};

enum class StageKind {
  EdgeBasis,          ///< Y = SH(v), B = b(|v|) f_p(|v| / r_max), b the radial basis
  Embedding,          ///< out = x^0 = W_emb[z] / sqrt(E)
  Zbl,                ///< mace-torch's ZBLBasis pair energy, half to each receiver
  LinearUp,           ///< out = linear_up_t(in)
  ExchangeSenders,    ///< in = out: ghost rows from their owners
  Convolution,        ///< out = sum_{j->i} TP(in_j, Y, MLP_t(B))
  InteractionLinear,  ///< out = linear_t(in) / avg_num_neighbors, or / (1 + density_i) (Density blocks)
  SkipTP,             ///< out = skip_tp_t(in; z)
  LinearResidual,     ///< out = linear_res_t(in), the local rows (non-linear block)
  Gate,               ///< out = gate_t(in) (non-linear block)
  LinearOut,          ///< out = linear_2_t(in) (non-linear block)
  Product,            ///< out = products.t.linear(SC_t(in; z))
  AddResidual,        ///< out += in
  Readout,            ///< energy_i += readout_t(in_i)[head]
  NodeEnergy,         ///< E_i = E0[z_i] + scale (ZBL_i + energy_i) + shift
};

struct Stage {
  StageKind kind = StageKind::EdgeBasis;
  int layer = -1;  ///< the interaction, product or readout index; -1 for the model-wide stages
  Slot in, out;    ///< node stages only (LinearUp .. Readout; Readout has no out, Embedding no in)
};

/// Whether a stage of this kind reads a slot (`in`) and writes one (`out`).
bool reads_slot(StageKind kind);
bool writes_slot(StageKind kind);

/// The stages of `spec`'s model, in evaluation order.
std::vector<Stage> stage_list(const MaceSpec& spec);

/// The stage list with what a hand-written reverse pass needs to know of it (MaceModel's).
struct StageGraph {
  explicit StageGraph(std::vector<Stage> stages);
  std::vector<Stage> stages;
  /// How many stages read `slot` (its adjoint is their sum; with one, it is written directly).
  /// ExchangeSenders, which works in place, does not count.
  int consumers(const Slot& slot) const;
  /// Whether dE/d(slot) is wanted: false for what depends on the species only (x^0 and all it
  /// feeds alone), so the reverse pass skips those stages' input adjoints.
  bool needs_adjoint(const Slot& slot) const;
  /// The widest rows an ExchangeSenders stage passes (values per node), for communication buffers.
  int max_exchange_width(const MaceSpec& spec) const;

 private:
  std::vector<std::pair<Slot, int>> m_consumers;
  std::vector<Slot> m_species_only;
};

/// Values per node of `slot` (its rows: every node for x^0, h^t and A^t, else the local nodes).
int slot_width(const MaceSpec& spec, const Slot& slot);

/// "skip_tp(x1) -> s1", for messages, docs and tests.
std::string describe(const Stage& stage);

}  // namespace fastmlip::models::mace

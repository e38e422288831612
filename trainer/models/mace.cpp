// SPDX-License-Identifier: MIT
// The trainer's MACE: mace-torch 0.3.13's MACE / ScaleShiftMACE (modules/models.py,
// modules/blocks.py) on the core kernels, as the plugin's MaceModel evaluates it
// (src/models/mace/mace_model.cpp), with autograd in place of the hand-written reverse pass.
// The loader is the plugin's (models/mace/mace_spec.hpp), so a file this model accepts is one
// MaceModel accepts, read the same way.
#include "models/mace.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "core/elements.hpp"
#include "core/error.hpp"
#include "graph/neighbor_list.hpp"
#include "kernels/channelwise_tp.hpp"
#include "kernels/linear.hpp"
#include "math/coupling_basis.hpp"
#include "math/irreps.hpp"
#include "models/chgnet_ops.hpp"
#include "models/device.hpp"
#include "models/kernel_ops.hpp"
#include "models/mace/mace_layout.hpp"
#include "models/mace/mace_model.hpp"
#include "models/mace/mace_spec.hpp"
#include "models/mace/mace_stages.hpp"

namespace fastmlip::trainer {

// ---- batches ----------------------------------------------------------------------------------

MaceBatch make_mace_batch(const std::vector<MaceStructure>& structures, double cutoff) {
  std::vector<double> pos, shifts, cells, charges, spins;
  std::vector<std::int64_t> species, batch, sender, receiver;
  graph::NeighborListOptions opt;
  opt.cutoff = cutoff;
  std::int64_t offset = 0;
  for (std::size_t g = 0; g < structures.size(); ++g) {
    const auto& s = structures[g];
    const std::size_t n = s.species.size();
    if (s.positions.size() != 3 * n) {
      throw InputError("make_mace_batch: structure " + std::to_string(g) + " has " + std::to_string(n) +
                       " species but " + std::to_string(s.positions.size()) +
                       " position values (need 3 per atom)");
    }
    const double* cell = s.cell ? s.cell->data() : nullptr;
    const auto nl = graph::build_neighbor_list(s.positions.data(), n, cell, s.pbc, opt);
    const auto centers = nl.centers();
    for (std::size_t e = 0; e < nl.num_edges(); ++e) {
      receiver.push_back(offset + centers[e]);
      sender.push_back(offset + nl.neighbors[e]);
      for (int k = 0; k < 3; ++k) {
        double sh = 0;
        for (int a = 0; a < 3 && cell != nullptr; ++a) {
          sh -= nl.shifts[3 * e + a] * cell[3 * a + k];
        }
        shifts.push_back(sh);
      }
    }
    pos.insert(pos.end(), s.positions.begin(), s.positions.end());
    species.insert(species.end(), s.species.begin(), s.species.end());
    batch.insert(batch.end(), n, static_cast<std::int64_t>(g));
    for (int k = 0; k < 9; ++k) {
      cells.push_back(s.cell ? (*s.cell)[k] : 0.0);
    }
    charges.push_back(s.total_charge);
    spins.push_back(s.total_spin);
    offset += static_cast<std::int64_t>(n);
  }
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  const auto N = offset, E = static_cast<std::int64_t>(sender.size()),
             G = static_cast<std::int64_t>(structures.size());
  MaceBatch b;
  b.positions = torch::from_blob(pos.data(), {N, 3}, f64).clone();
  b.species = torch::from_blob(species.data(), {N}, i64).clone();
  b.batch = torch::from_blob(batch.data(), {N}, i64).clone();
  b.sender = torch::from_blob(sender.data(), {E}, i64).clone();
  b.receiver = torch::from_blob(receiver.data(), {E}, i64).clone();
  b.shifts = torch::from_blob(shifts.data(), {E, 3}, f64).clone();
  b.cell = torch::from_blob(cells.data(), {G, 3, 3}, f64).clone();
  b.total_charge = torch::from_blob(charges.data(), {G}, f64).clone();
  b.total_spin = torch::from_blob(spins.data(), {G}, f64).clone();
  b.num_graphs = G;
  return b;
}

// ---- a fresh model ----------------------------------------------------------------------------

namespace {

/// Standard normal numbers from torch's CPU generator, seeded: the distribution e3nn and
/// mace-torch draw their weights from (torch.randn), not their sequence.
std::vector<double> randn(torch::Generator& gen, std::int64_t n, double scale) {
  const auto t = torch::randn({n}, gen, torch::TensorOptions().dtype(torch::kFloat64)) * scale;
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + n);
}

}  // namespace

io::PotentialFile make_mace_potential(const MaceConfig& c) {
  models::mace::MaceLayoutValues values;
  values.atomic_energies = c.e0s;
  values.scale = {c.scale};
  values.shift = {c.shift};
  values.provenance = {{"writer", "fastmlip-trainer 0.1.0"}, {"seed", c.seed}};
  auto gen = at::detail::createCPUGenerator(c.seed);
  return models::mace::write_mace_layout(
      c.layout, values,
      [&gen](const std::string&, std::int64_t n, double scale) { return randn(gen, n, scale); });
}

// ---- the model ------------------------------------------------------------------------------

/// What MaceTorchModel asks of its model, which lives on one device (MaceOn below).
template <class T>
struct MaceTorchModel<T>::Impl {
  virtual ~Impl() = default;
  virtual MaceOutput forward(const MaceBatch& b, const MaceForwardOptions& o) = 0;
  virtual const std::vector<std::pair<std::string, torch::Tensor>>& named_params() const = 0;
  virtual const models::mace::MaceSpec& model_spec() const = 0;
  virtual io::PotentialFile to_file() const = 0;
  virtual torch::Device device() const = 0;
};

/// The model on `device`, whose memory is Exec's: its parameters and buffers live there, a batch
/// is moved there, and its kernels run there (kernel_ops.hpp).
template <class T, class Exec>
struct MaceOn final : MaceTorchModel<T>::Impl {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "MaceTorchModel: T must be float or double");
  static constexpr bool kHost =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible;

  /// A trainable tensor and where it goes in the file: its shape there and, for the skip
  /// weights, the file index of each of our elements (regrouped by element).
  struct Param {
    std::vector<std::int64_t> file_shape;
    std::vector<std::int64_t> file_index;  // empty: the same order
  };

  struct Layer {
    const models::mace::InteractionSpec* I = nullptr;
    const models::mace::ProductSpec* P = nullptr;
    const models::mace::ReadoutSpec* R = nullptr;
    std::shared_ptr<const LinearKernels<T, Exec>> up, lin, skip, prod, r1, r2, rmid;
    std::shared_ptr<const ChannelwiseTPKernels<T, Exec>> tp;
    std::shared_ptr<SymmetricContractionKernels<T, Exec>> sc;
    std::shared_ptr<RadialMLPKernels<T, Exec>> mlp;
    torch::Tensor W_up, W_lin, W_skip, W_prod, W_r1, W_r2, W_rmid;
    torch::Tensor b_mid, b_2;  // NonLinearBiasReadoutBlock: [M] and [heads]
    torch::Tensor W_density;  // Density blocks: density_fn.layer0.weight [num_bessel, 1]
    std::vector<torch::Tensor> W_mlp, W_sc;
    /// RealAgnosticResidualNonLinearInteractionBlock: its RadialMLPs (Linear, LayerNorm, SiLU)
    /// over [B, source embedding of the sender, target embedding of the receiver], the density
    /// normalisation's alpha and beta, linear_res, linear_2 and the gate (torch ops throughout).
    struct NormedMLP {
      std::vector<torch::Tensor> weight, bias, gamma, beta;
    };
    NormedMLP nl_radial, nl_density;
    torch::Tensor W_source, W_target, alpha, beta, W_res, W_lin2;
    std::shared_ptr<const LinearKernels<T, Exec>> res, lin2;
    torch::Tensor gate_source, gate_gate, gate_scalar;  // [target dim]: int64, int64 (0 for scalars), bool
    torch::Tensor head_mask;  // non-linear readout: 1 on the selected head's hidden units
    std::string tag;
  };

  torch::Device dev;
  bool torch_dense;  // MaceTorchOptions::torch_dense_ops, always on a device
  io::PotentialFile file;
  models::mace::MaceSpec spec;
  std::vector<models::mace::Stage> stages;  // the core's stage list of this model
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<Param> params;
  std::vector<Layer> layers;
  torch::Tensor W_emb;  // [E, C]
  c10::intrusive_ptr<SphericalHarmonicsOp<T, Exec>> sh;
  c10::intrusive_ptr<RadialBasisOp<T, Exec>> radial_basis;
  c10::intrusive_ptr<TransformedBasisOp<T, Exec>> transformed;  // with a distance transform
  torch::Tensor rcov;                                     // [E] its covalent radius per species
  torch::Tensor e0;  // [E]
  /// embedding_specs (MACE-OMOL): the joint embedding's weights (GraphEmbedding::tensors()
  /// order) and the embedding readout's.
  std::vector<torch::Tensor> W_graph;
  torch::Tensor W_emb_readout;  // [1, C x heads]
  std::shared_ptr<const LinearKernels<T, Exec>> emb_readout;
  /// A batch's edge index and what it reads (edge_index()).
  struct EdgeOwner {
    torch::Tensor sender, receiver;  // int32 [E], where the batch lives
    kernels::EdgeIndexStorage<Exec> storage;
    kernels::EdgeIndex<Exec> index;
  };
  std::shared_ptr<EdgeOwner> last_edges;

  torch::TensorOptions real() const { return torch::TensorOptions().dtype(torch_dtype<T>()).device(dev); }
  /// A buffer of the file's (float64 host values) in this model's precision, on its device.
  torch::Tensor buffer(const std::vector<double>& v) const {
    return torch::tensor(v, torch::TensorOptions().dtype(torch::kFloat64)).to(real());
  }

  torch::Tensor add_param(const std::string& name, const std::vector<std::int64_t>& shape,
                          std::vector<std::int64_t> file_index = {}) {
    const auto& t = file.get(name);
    const auto v = t.as<double>(io::Conversion::widen);
    std::vector<double> ours(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      ours[i] = file_index.empty() ? v[i] : v[static_cast<std::size_t>(file_index[i])];
    }
    auto value = buffer(ours).reshape(shape);
    value.requires_grad_(true);
    named.emplace_back(name, value);
    params.push_back({t.shape, std::move(file_index)});
    return value;
  }

  /// The non-linear block's parameters, under mace-torch's names (the file's own shapes).
  void add_nonlinear(Layer& L, const std::string& pi) {
    const models::mace::NonLinearSpec& N = *L.I->nonlinear;
    const std::int64_t E = spec.num_elements, C0 = L.I->node_feats.count(Irrep{0, 1});
    L.W_source = add_param(pi + "source_embedding.weight", {E, C0});
    L.W_target = add_param(pi + "target_embedding.weight", {E, C0});
    const auto normed = [&](const std::string& prefix, const std::vector<int>& widths,
                            typename Layer::NormedMLP& m) {
      const int depth = static_cast<int>(widths.size()) - 1;
      for (int k = 0; k < depth; ++k) {
        // The file's first layer reads [B, source, target]: its full width.
        const std::int64_t in = k == 0 ? widths[0] + 2 * C0 : widths[k], out = widths[k + 1];
        const std::string lin = prefix + "net." + std::to_string(3 * k) + ".";
        m.weight.push_back(add_param(lin + "weight", {out, in}));
        m.bias.push_back(add_param(lin + "bias", {out}));
        if (k + 1 < depth) {
          const std::string norm = prefix + "net." + std::to_string(3 * k + 1) + ".";
          m.gamma.push_back(add_param(norm + "weight", {out}));
          m.beta.push_back(add_param(norm + "bias", {out}));
        }
      }
    };
    normed(pi + "conv_tp_weights.", N.radial.widths, L.nl_radial);
    normed(pi + "density_fn.", N.density.widths, L.nl_density);
    L.alpha = add_param(pi + "alpha", {});
    L.beta = add_param(pi + "beta", {});
    L.W_lin = add_param(pi + "linear_1.weight", {1, L.I->linear.weight_numel});
    L.res = std::make_shared<const LinearKernels<T, Exec>>(N.linear_res);
    L.lin2 = std::make_shared<const LinearKernels<T, Exec>>(N.linear_2);
    L.W_res = add_param(pi + "linear_res.weight", {1, N.linear_res.weight_numel});
    L.W_lin2 = add_param(pi + "linear_2.weight", {1, N.linear_2.weight_numel});
    std::vector<std::int64_t> source(N.gate_source.begin(), N.gate_source.end()), gate;
    std::vector<int> scalar;
    for (int g : N.gate_gate) {
      gate.push_back(g < 0 ? 0 : g);
      scalar.push_back(g < 0);
    }
    L.gate_source = torch::tensor(source, torch::dtype(torch::kInt64)).to(dev);
    L.gate_gate = torch::tensor(gate, torch::dtype(torch::kInt64)).to(dev);
    L.gate_scalar = torch::tensor(scalar, torch::dtype(torch::kInt32)).to(torch::kBool).to(dev);
  }

  /// mace-torch's RadialMLP of x: the core's dense and LayerNorm kernels (the CHGNet trainer's
  /// DenseOp and LayerNormOp, twice differentiable), or, with torch_dense (always on a GPU,
  /// since those kernels take host arrays), LibTorch's linear and layer_norm (eps 1e-5, torch's
  /// LayerNorm default): the same arithmetic, which MaceTorch.TorchDenseOpsGiveTheKernelsModel
  /// compares on the CPU.
  torch::Tensor normed_mlp(const typename Layer::NormedMLP& m, torch::Tensor x,
                           const std::string& name) const {
    const std::size_t depth = m.weight.size();
    for (std::size_t k = 0; k < depth; ++k) {
      if (torch_dense) {
        x = torch::linear(x, m.weight[k], m.bias[k]);
      } else {
        const DenseStages dense{static_cast<int>(m.weight[k].size(1)), static_cast<int>(m.weight[k].size(0)),
                                true};
        x = apply_kernel(c10::make_intrusive<DenseOp<T>>(dense, name), {x, m.weight[k], m.bias[k]});
      }
      if (k + 1 < depth) {
        if (torch_dense) {
          x = torch::layer_norm(x, {m.weight[k].size(0)}, m.gamma[k], m.beta[k], 1e-5);
        } else {
          const LayerNormStages norm{static_cast<int>(m.weight[k].size(0))};
          x = apply_kernel(c10::make_intrusive<LayerNormOp<T>>(norm, name), {x, m.gamma[k], m.beta[k]});
        }
        x = torch::silu(x);
      }
    }
    return x;
  }

  /// The parameters of the file's `embeddings` (docs/mace-potential.md), under mace-torch's names.
  void add_graph_embedding() {
    for (const auto& t : spec.graph_embedding.tensors()) {
      W_graph.push_back(add_param(t.name, t.shape));
    }
    if (spec.embedding_readout) {
      emb_readout = std::make_shared<const LinearKernels<T, Exec>>(*spec.embedding_readout);
      W_emb_readout = add_param("embedding_readout.linear.weight", {1, spec.embedding_readout->weight_numel});
    }
  }

  /// A batch's total charges or spins [G], or mace-torch's defaults (charge 0, spin 1) where the
  /// batch was made without them.
  static torch::Tensor graph_values(const MaceBatch& b, const torch::Tensor& t, double fallback) {
    return t.defined() ? t : torch::full({b.num_graphs}, fallback, torch::dtype(torch::kFloat64));
  }

  /// [G, C]: each structure's joint embedding of its charge and spin. The core's kernel
  /// (models/mace/graph_embedding.hpp), per structure on the host; or, with torch_dense (always
  /// on a GPU, where that kernel would copy the weights to the host and back at every call),
  /// the same arithmetic as LibTorch ops where the weights are, which
  /// MaceTorch.TorchDenseOpsGiveTheKernelsModel compares on the CPU. The values were checked by
  /// validate() (and where the frames were read, naming the frame).
  torch::Tensor graph_embedding(const MaceBatch& b) const {
    if (torch_dense) {
      return graph_embedding_ops(b);
    }
    const auto values = [&](const torch::Tensor& t, double fallback) {
      const auto c = graph_values(b, t, fallback).to(torch::kCPU, torch::kFloat64).contiguous();
      return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    };
    auto op = c10::make_intrusive<GraphEmbeddingOp<T>>(spec.graph_embedding, values(b.total_charge, 0.0),
                                                       values(b.total_spin, 1.0));
    return apply_kernel(op, W_graph);
  }

  /// graph_embedding as LibTorch ops: e_f = T_f[v_f + offset_f] (a row per structure) or
  /// W2_f silu(W0_f v_f + b0_f) + b2_f; s = silu(P [e_1, e_2, ...]).
  torch::Tensor graph_embedding_ops(const MaceBatch& b) const {
    const auto charge = graph_values(b, b.total_charge, 0.0).to(dev, torch::kFloat64);
    const auto spin = graph_values(b, b.total_spin, 1.0).to(dev, torch::kFloat64);
    std::vector<torch::Tensor> parts;
    std::size_t k = 0;  // the next weight, in GraphEmbedding::tensors() order
    for (const auto& f : spec.graph_embedding.features) {
      const auto& v = f.name == "total_charge" ? charge : spin;
      if (f.type == "categorical") {
        // mace-torch's (v + offset).long(): validate() checked that these are the table's rows.
        parts.push_back(W_graph[k++].index_select(0, (v + f.offset).to(torch::kInt64)));
        continue;
      }
      const auto& w0 = W_graph[k++];
      const torch::Tensor b0 = f.use_bias ? W_graph[k++] : torch::Tensor();
      const auto& w2 = W_graph[k++];
      const torch::Tensor b2 = f.use_bias ? W_graph[k++] : torch::Tensor();
      const auto hidden = torch::silu(torch::linear(v.to(torch_dtype<T>()).unsqueeze(1), w0, b0));
      parts.push_back(torch::linear(hidden, w2, b2));
    }
    return torch::silu(torch::linear(torch::cat(parts, 1), W_graph[k]));
  }

  MaceOn(const io::PotentialFile& f, const MaceTorchOptions& o)
      : dev(o.device), torch_dense(o.torch_dense_ops || !kHost), file(f) {
    models::MaceOptions opt;
    opt.head = o.head;
    // Each structure of a batch has its own charge and spin: the embedding is evaluated per
    // structure here (add_graph_embedding), not folded in by the loader.
    opt.graph_embedding = false;
    spec = models::mace::load_mace_spec(file, opt);
    stages = models::mace::stage_list(spec);
    const int E = spec.num_elements, C = spec.embedding_irreps.dim();
    sh = c10::make_intrusive<SphericalHarmonicsOp<T, Exec>>(spec.max_ell);
    radial_basis = c10::make_intrusive<RadialBasisOp<T, Exec>>(spec.radial_basis);
    if (spec.distance_transform.active()) {
      transformed =
          c10::make_intrusive<TransformedBasisOp<T, Exec>>(spec.radial_basis, spec.distance_transform);
      rcov = buffer(spec.distance_transform.covalent_radii);
    }
    e0 = buffer(spec.e0);
    W_emb = add_param("node_embedding.linear.weight", {E, C});
    add_graph_embedding();
    for (int t = 0; t < spec.num_interactions; ++t) {
      Layer L;
      L.I = &spec.interactions[t];
      L.P = &spec.products[t];
      L.R = &spec.readouts[t];
      L.tag = " (layer " + std::to_string(t) + ")";
      const std::string pi = "interactions." + std::to_string(t) + ".";
      const std::string pp = "products." + std::to_string(t) + ".";
      L.up = std::make_shared<const LinearKernels<T, Exec>>(L.I->linear_up);
      L.lin = std::make_shared<const LinearKernels<T, Exec>>(L.I->linear);
      L.skip = std::make_shared<const LinearKernels<T, Exec>>(L.I->skip);
      L.prod = std::make_shared<const LinearKernels<T, Exec>>(L.P->linear);
      L.tp = std::make_shared<const ChannelwiseTPKernels<T, Exec>>(L.I->tp);
      // use_agnostic_product: one weight set, every atom read as species 0.
      L.sc = std::make_shared<SymmetricContractionKernels<T, Exec>>(L.P->sc, L.P->agnostic ? 1 : E);
      if (!L.I->nonlinear) {  // the non-linear block's radial MLP is a normed MLP
        L.mlp = std::make_shared<RadialMLPKernels<T, Exec>>(L.I->mlp);
      }
      L.W_up = add_param(pi + "linear_up.weight", {1, L.I->linear_up.weight_numel});
      for (int k = 0; k < L.I->mlp.num_layers(); ++k) {
        L.W_mlp.push_back(add_param(pi + "conv_tp_weights.layer" + std::to_string(k) + ".weight",
                                    {L.I->mlp.widths[k], L.I->mlp.widths[k + 1]}));
      }
      if (L.I->nonlinear) {
        add_nonlinear(L, pi);
      } else {
        L.W_lin = add_param(pi + "linear.weight", {1, L.I->linear.weight_numel});
      }
      if (L.I->density) {
        L.W_density = add_param(pi + "density_fn.layer0.weight", {spec.radial_basis.num_basis(), 1});
      }
      // Our element-major layout of the skip weights, as indices into mace-torch's flat vector.
      std::vector<double> iota(static_cast<std::size_t>(L.I->skip.weight_numel) * L.I->skip.num_sets);
      std::iota(iota.begin(), iota.end(), 0.0);
      std::vector<std::int64_t> index;
      for (double v : L.I->skip.weights_from_e3nn(iota)) {
        index.push_back(static_cast<std::int64_t>(v));
      }
      L.W_skip = add_param(pi + "skip_tp.weight", {L.I->skip.num_sets, L.I->skip.weight_numel}, index);
      const int corr = L.P->sc.correlation;
      for (std::size_t o = 0; o < L.P->sc.irreps_out.size(); ++o) {
        const std::string c = pp + "symmetric_contractions.contractions." + std::to_string(o) + ".";
        for (int nu = 1; nu <= corr; ++nu) {
          const std::string name =
              nu == corr ? c + "weights_max" : c + "weights." + std::to_string(corr - 1 - nu);
          L.W_sc.push_back(add_param(name, file.get(name).shape));
        }
      }
      L.W_prod = add_param(pp + "linear.weight", {1, L.P->linear.weight_numel});
      // The readout's tensors under its own prefix (use_last_readout_only keeps one, readouts.0.,
      // on the last layer; the other layers' features feed the next layer alone).
      const std::string& pr = L.R->prefix;
      if (L.R->present && !L.R->nonlinear) {
        L.r1 = std::make_shared<const LinearKernels<T, Exec>>(L.R->linear_1);
        L.W_r1 = add_param(pr + "linear.weight", {1, L.R->linear_1.weight_numel});
      } else if (L.R->present) {
        L.r1 = std::make_shared<const LinearKernels<T, Exec>>(L.R->linear_1);
        L.r2 = std::make_shared<const LinearKernels<T, Exec>>(L.R->linear_2);
        L.W_r1 = add_param(pr + "linear_1.weight", {1, L.R->linear_1.weight_numel});
        L.W_r2 = add_param(pr + "linear_2.weight", {1, L.R->linear_2.weight_numel});
        const int M = L.R->linear_1.irreps_out.dim(), P = L.R->hidden_per_head;
        if (L.R->bias) {
          L.rmid = std::make_shared<const LinearKernels<T, Exec>>(L.R->linear_mid);
          L.W_rmid = add_param(pr + "linear_mid.weight", {1, L.R->linear_mid.weight_numel});
          L.b_mid = add_param(pr + "linear_mid.bias", {M});
          L.b_2 = add_param(pr + "linear_2.bias", {static_cast<std::int64_t>(spec.heads.size())});
        }
        std::vector<double> mask(M);
        for (int k = 0; k < M; ++k) {
          mask[k] = k / P == spec.head ? 1.0 : 0.0;
        }
        L.head_mask = buffer(mask);
      }
      layers.push_back(std::move(L));
    }
  }

  /// mace-torch's ZBLBasis on every edge; half of each directed edge's energy to its receiver.
  torch::Tensor zbl(const torch::Tensor& r, const torch::Tensor& species, const torch::Tensor& sender,
                    const torch::Tensor& receiver, std::int64_t N) const {
    const auto& Z = *spec.zbl;
    std::vector<double> z, radius;
    for (const auto& s : spec.species) {
      z.push_back(s.z);
      radius.push_back(Z.covalent_radii[s.z]);
    }
    const auto zs = buffer(z), rs = buffer(radius);
    const auto s_recv = species.index_select(0, receiver), s_send = species.index_select(0, sender);
    const auto zu = zs.index_select(0, s_send), zv = zs.index_select(0, s_recv);
    const auto a = Z.a_prefactor * Z.bohr_radius / (zu.pow(Z.a_exp) + zv.pow(Z.a_exp));
    auto phi = torch::zeros_like(r);
    for (int k = 0; k < 4; ++k) {
      phi = phi + Z.c[k] * torch::exp(-Z.screening[k] * r / a);
    }
    const auto V = Z.coulomb * zu * zv / r * phi;
    const auto rc = rs.index_select(0, s_send) + rs.index_select(0, s_recv);
    const auto x = r / rc;
    const double p = Z.p;
    const auto env =
        1 - (p + 1) * (p + 2) / 2 * x.pow(p) + p * (p + 2) * x.pow(p + 1) - p * (p + 1) / 2 * x.pow(p + 2);
    const auto pair = torch::where(r < rc, 0.5 * V * env, torch::zeros_like(r));
    return torch::zeros({N}, real()).index_add(0, receiver, pair);
  }

  void validate(const MaceBatch& b) const {
    const std::string fn = "MaceTorchModel::forward: ";
    const auto N = b.positions.defined() ? b.positions.size(0) : -1;
    if (!b.positions.defined() || b.positions.dim() != 2 || b.positions.size(1) != 3) {
      throw InputError(fn + "positions must be [N, 3]");
    }
    auto is_vec = [&](const torch::Tensor& t, std::int64_t n) {
      return t.defined() && t.dim() == 1 && t.size(0) == n && t.scalar_type() == torch::kInt64;
    };
    if (!is_vec(b.species, N) || !is_vec(b.batch, N)) {
      throw InputError(fn + "species and batch must be int64 [N] with N = " + std::to_string(N));
    }
    const auto E = b.sender.defined() ? b.sender.size(0) : -1;
    if (!is_vec(b.sender, E) || !is_vec(b.receiver, E) || !b.shifts.defined() || b.shifts.dim() != 2 ||
        b.shifts.size(0) != E || b.shifts.size(1) != 3) {
      throw InputError(fn + "sender and receiver must be int64 [E], shifts [E, 3]");
    }
    if (N > 0) {
      const auto smin = b.species.min().item<std::int64_t>(), smax = b.species.max().item<std::int64_t>();
      if (smin < 0 || smax >= spec.num_elements) {
        throw InputError(fn + "species index " + std::to_string(smin < 0 ? smin : smax) + " outside 0.." +
                         std::to_string(spec.num_elements - 1) + " (the model " + spec.source + ")");
      }
      const auto gmin = b.batch.min().item<std::int64_t>(), gmax = b.batch.max().item<std::int64_t>();
      if (gmin < 0 || gmax >= b.num_graphs) {
        throw InputError(fn + "graph index " + std::to_string(gmin < 0 ? gmin : gmax) + " outside 0.." +
                         std::to_string(b.num_graphs - 1));
      }
    }
    if (!W_graph.empty()) {
      // The joint embedding's values, before any kernel reads a table row they select. A batch
      // built on the host (the trainer's) is checked there, with no copy.
      const auto charge = graph_values(b, b.total_charge, 0.0).to(torch::kCPU, torch::kFloat64).contiguous();
      const auto spin = graph_values(b, b.total_spin, 1.0).to(torch::kCPU, torch::kFloat64).contiguous();
      if (charge.numel() != b.num_graphs || spin.numel() != b.num_graphs) {
        throw InputError(fn + "total_charge and total_spin must have one value per structure (" +
                         std::to_string(b.num_graphs) + ")");
      }
      for (std::int64_t g = 0; g < b.num_graphs; ++g) {
        const std::string problem =
            spec.graph_embedding.value_problem(charge.data_ptr<double>()[g], spin.data_ptr<double>()[g]);
        if (!problem.empty()) {
          throw InputError(fn + "structure " + std::to_string(g) + " of the batch: " + problem);
        }
      }
    }
  }

  /// The batch's tensors on this model's device (themselves where they are there already).
  MaceBatch on_device(const MaceBatch& in) const {
    MaceBatch b = in;
    move_to(dev, {&b.positions, &b.species, &b.batch, &b.sender, &b.receiver, &b.shifts, &b.cell,
                  &b.total_charge, &b.total_spin});
    return b;
  }

  /// The batch's edge index, built where the batch lives from its int32 labels (no host round
  /// trip on a GPU). The index reads those labels' storage, so the shared pointer owns them too:
  /// the autograd nodes that hold the index until the backward pass keep them alive. The last
  /// batch's arrays are reused once nothing else holds them (the usual case: its backward pass
  /// is over), so that a training step does not allocate them anew (on a GPU each allocation is
  /// a cudaMalloc and each free a synchronisation); a graph still alive keeps its own.
  std::shared_ptr<const kernels::EdgeIndex<Exec>> edge_index(const MaceBatch& b, int num_nodes) {
    // use_count 1: only this model holds it. No other thread can then take a reference; one
    // that is dropping its last reference at this moment only makes us allocate afresh.
    if (!last_edges || last_edges.use_count() != 1) {
      last_edges = std::make_shared<EdgeOwner>();
    }
    EdgeOwner& owner = *last_edges;
    owner.sender = b.sender.to(torch::kInt32).contiguous();
    owner.receiver = b.receiver.to(torch::kInt32).contiguous();
    const auto labels = [](const torch::Tensor& t) {
      return Kokkos::View<const int*, Exec>(t.data_ptr<int>(), t.size(0));
    };
    owner.index = kernels::EdgeIndex<Exec>::from_edges(
        num_nodes, labels(owner.sender), labels(owner.receiver), owner.storage, "MaceTorchModel::forward");
    return std::shared_ptr<const kernels::EdgeIndex<Exec>>(last_edges, &owner.index);
  }

  MaceOutput forward(const MaceBatch& b_in, const MaceForwardOptions& o) override {
    validate(b_in);
    const MaceBatch b = on_device(b_in);
    torch::AutoGradMode grad_mode(torch::GradMode::is_enabled() || o.forces || o.virials);
    const auto N = b.positions.size(0), G = b.num_graphs;
    torch::Tensor pos = b.positions.to(real()).detach();
    if (o.forces) {
      pos.requires_grad_(true);
    }
    torch::Tensor disp;
    torch::Tensor u = pos.index_select(0, b.receiver) - pos.index_select(0, b.sender) + b.shifts.to(real());
    if (o.virials) {
      // mace-torch's displacement trick (utils.get_symmetric_displacement): positions and
      // cell strained by (1 + S), S the symmetric part; every edge vector is a difference of
      // strained positions and a strained shift, so it is strained the same way.
      disp = torch::zeros({G, 3, 3}, real()).requires_grad_(true);
      const torch::Tensor S = 0.5 * (disp + disp.transpose(1, 2));
      const auto edge_graph = b.batch.index_select(0, b.receiver);
      u = u + torch::bmm(u.unsqueeze(1), S.index_select(0, edge_graph)).squeeze(1);
    }
    const torch::Tensor r = (u * u).sum(1).sqrt();
    if (r.numel() > 0 && !(r.detach().min().item<double>() > 0)) {
      throw InputError(
          "MaceTorchModel::forward: an edge has zero length (coincident atoms, or a self-edge "
          "without an image shift)");
    }
    // The kernels read int32 labels.
    const auto species32 = b.species.to(torch::kInt32).contiguous();
    const auto zeros32 = torch::zeros_like(species32);  // use_agnostic_product's species
    const auto graph = edge_index(b, static_cast<int>(N));

    // The model's stages (models/mace/mace_stages.hpp), each the core kernels as autograd
    // functions; the values they pass are kept by slot until the end of the pass.
    std::map<std::pair<int, int>, torch::Tensor> values;
    const auto value = [&values](const models::mace::Slot& s) -> torch::Tensor& {
      return values[{static_cast<int>(s.value), s.layer}];
    };
    torch::Tensor Y, B, pair;
    std::map<int, torch::Tensor> nl_input;  // per non-linear layer: its MLPs' edge input
    // apply_cutoff False (MACE-OMOL): f_p(r) multiplies the radial MLP's output and the Density
    // term instead of the basis. Written in torch ops so that it is differentiated twice.
    torch::Tensor fc;
    if (!spec.radial_basis.apply_cutoff) {
      const double q = spec.radial_basis.envelope_p;
      const auto x = r / spec.radial_basis.r_max;
      const auto xp = x.pow(q);
      fc = (1.0 - (q + 1) * (q + 2) / 2 * xp + q * (q + 2) * xp * x - q * (q + 1) / 2 * xp * x * x) *
           (x < 1.0).to(r.scalar_type());
      fc = fc.unsqueeze(1);  // [E, 1]
    }
    auto inter = torch::zeros({N}, real());
    torch::Tensor node_energy;
    torch::Tensor emb_energy;  // [N] the embedding readout's (embedding_specs with use_embedding_readout)
    for (const auto& s : stages) {
      using K = models::mace::StageKind;
      Layer* L = s.layer >= 0 ? &layers.at(s.layer) : nullptr;
      const auto linear = [&](const std::shared_ptr<const LinearKernels<T, Exec>>& k, const torch::Tensor& in,
                              const torch::Tensor& W, bool by_element, const char* what) {
        auto op = c10::make_intrusive<LinearOp<T, Exec>>(k, by_element ? species32 : torch::Tensor(),
                                                         what + L->tag);
        return apply_kernel(op, {in, W});
      };
      switch (s.kind) {
        case K::EdgeBasis:
          Y = apply_kernel(sh, {u});
          if (transformed) {
            const auto rs = rcov.index_select(0, b.species);
            const auto rsum = (rs.index_select(0, b.sender) + rs.index_select(0, b.receiver)).contiguous();
            B = apply_kernel(transformed, {r, rsum});
          } else {
            B = apply_kernel(radial_basis, {r});
          }
          break;
        case K::Embedding: {
          auto x0 = W_emb.index_select(0, b.species) * spec.embedding_path_weight;
          if (!W_graph.empty()) {
            x0 = x0 + graph_embedding(b).index_select(0, b.batch);
            if (emb_readout) {
              // The loader's readout kernel, per structure here; its energy joins E0.
              auto op =
                  c10::make_intrusive<LinearOp<T, Exec>>(emb_readout, torch::Tensor(), "embedding_readout");
              emb_energy = apply_kernel(op, {x0, W_emb_readout}).select(1, spec.head);
            }
          }
          value(s.out) = x0;
          break;
        }
        case K::Zbl:
          pair = zbl(r, b.species, b.sender, b.receiver, N);
          break;
        case K::LinearUp:
          value(s.out) = linear(L->up, value(s.in), L->W_up, false, "linear_up");
          break;
        case K::ExchangeSenders:
          break;  // a batch has no ghost nodes: every graph is whole
        case K::Convolution: {
          if (L->I->nonlinear) {
            // The edge's radial input: B and the e3nn Linear embeddings (path weight 1/sqrt(E)) of
            // its sender's and receiver's species.
            const double pw = 1.0 / std::sqrt(static_cast<double>(spec.num_elements));
            const auto src = L->W_source.index_select(0, b.species) * pw;
            const auto tgt = L->W_target.index_select(0, b.species) * pw;
            nl_input[s.layer] =
                torch::cat({B, src.index_select(0, b.sender), tgt.index_select(0, b.receiver)}, 1);
            auto R = normed_mlp(L->nl_radial, nl_input[s.layer], "conv_tp_weights" + L->tag);
            if (fc.defined()) {
              R = R * fc;
            }
            value(s.out) =
                apply_kernel(c10::make_intrusive<ChannelwiseTPOp<T, Exec>>(L->tp, graph, "conv_tp" + L->tag),
                             {value(s.in), Y, R});
            break;
          }
          std::vector<torch::Tensor> mlp_in{B};
          mlp_in.insert(mlp_in.end(), L->W_mlp.begin(), L->W_mlp.end());
          auto R = apply_kernel(c10::make_intrusive<RadialMLPOp<T, Exec>>(L->mlp, "conv_tp_weights" + L->tag),
                                mlp_in);
          if (fc.defined()) {
            R = R * fc;
          }
          value(s.out) =
              apply_kernel(c10::make_intrusive<ChannelwiseTPOp<T, Exec>>(L->tp, graph, "conv_tp" + L->tag),
                           {value(s.in), Y, R});
          break;
        }
        case K::InteractionLinear:
          if (L->I->nonlinear) {
            // linear_1(A) / (alpha + beta sum over the node's edges of tanh(density_fn^2)).
            const auto d = normed_mlp(L->nl_density, nl_input[s.layer], "density_fn" + L->tag);
            const auto edge = fc.defined() ? torch::tanh(d * d) * fc : torch::tanh(d * d);
            const auto lin = linear(L->lin, value(s.in), L->W_lin, false, "linear_1");
            const auto dens = torch::zeros({lin.size(0), 1}, real()).index_add(0, b.receiver, edge);
            value(s.out) = lin / (dens * L->beta + L->alpha);
          } else if (L->I->density) {
            // Density blocks: divided by 1 + sum over the node's edges of tanh(d_e^2), d_e the
            // density_fn of the edge's radial features (e3nn's x @ W / sqrt(fan_in)).
            const auto d =
                B.matmul(L->W_density) / std::sqrt(static_cast<double>(spec.radial_basis.num_basis()));
            const auto u = linear(L->lin, value(s.in), L->W_lin, false, "linear");
            const auto edge = fc.defined() ? torch::tanh(d * d) * fc : torch::tanh(d * d);
            const auto dens = torch::zeros({u.size(0), 1}, real()).index_add(0, b.receiver, edge);
            value(s.out) = u / (dens + 1.0);
          } else {
            value(s.out) = linear(L->lin, value(s.in), L->W_lin, false, "linear") / L->I->avg_num_neighbors;
          }
          break;
        case K::SkipTP:
          // The non-linear block's skip is a plain Linear: one weight set, no species.
          value(s.out) = linear(L->skip, value(s.in), L->W_skip, L->I->skip.num_sets > 1, "skip_tp");
          break;
        case K::LinearResidual:
          value(s.out) = linear(L->res, value(s.in), L->W_res, false, "linear_res");
          break;
        case K::Gate: {
          // GatedEquivariantBlock: silu(scalars) c_s, and each gated value times sigmoid(its gate) c_g.
          const auto& N = *L->I->nonlinear;
          const auto& in = value(s.in);
          const auto x = in.index_select(1, L->gate_source);
          const auto g = in.index_select(1, L->gate_gate);
          value(s.out) = torch::where(L->gate_scalar, N.scalar_cst * torch::silu(x),
                                      x * (N.gate_cst * torch::sigmoid(g)));
          break;
        }
        case K::LinearOut:
          value(s.out) = linear(L->lin2, value(s.in), L->W_lin2, false, "linear_2");
          break;
        case K::Product: {
          std::vector<torch::Tensor> sc_in{value(s.in)};
          sc_in.insert(sc_in.end(), L->W_sc.begin(), L->W_sc.end());
          const auto c =
              apply_kernel(c10::make_intrusive<SymmetricContractionOp<T, Exec>>(
                               L->sc, L->P->agnostic ? zeros32 : species32, "symmetric_contraction" + L->tag),
                           sc_in);
          value(s.out) = linear(L->prod, c, L->W_prod, false, "products.linear");
          break;
        }
        case K::AddResidual:
          value(s.out) = value(s.out) + value(s.in);
          break;
        case K::Readout: {
          torch::Tensor e;
          if (!L->R->nonlinear) {
            e = linear(L->r1, value(s.in), L->W_r1, false, "readout");
          } else {
            const auto z = linear(L->r1, value(s.in), L->W_r1, false, "readout.linear_1");
            auto a = L->R->gate_cst * torch::silu(z) * L->head_mask;
            if (L->R->bias) {  // NonLinearBiasReadoutBlock: a second gated layer, biases added unscaled
              const auto zm = linear(L->rmid, a, L->W_rmid, false, "readout.linear_mid") + L->b_mid;
              a = L->R->gate_cst * torch::silu(zm) * L->head_mask;
            }
            e = linear(L->r2, a, L->W_r2, false, "readout.linear_2");
            if (L->R->bias) {
              e = e + L->b_2;
            }
          }
          inter = inter + e.select(1, spec.head);
          break;
        }
        case K::NodeEnergy: {
          const auto sum = pair.defined() ? inter + pair : inter;
          auto e0_nodes = e0.index_select(0, b.species);
          if (emb_energy.defined()) {
            e0_nodes = e0_nodes + emb_energy;  // unscaled, as mace-torch adds it to e0
          }
          node_energy = spec.scale_shift ? e0_nodes + spec.scale * sum + spec.shift : e0_nodes + sum;
          break;
        }
      }
    }
    MaceOutput out;
    out.node_energy = node_energy;
    out.energy = torch::zeros({G}, real()).index_add(0, b.batch, out.node_energy);
    if (o.forces || o.virials) {
      std::vector<torch::Tensor> wrt;
      if (o.forces) {
        wrt.push_back(pos);
      }
      if (o.virials) {
        wrt.push_back(disp);
      }
      const auto grads = torch::autograd::grad({out.energy.sum()}, wrt, {}, /*retain_graph=*/o.create_graph,
                                               /*create_graph=*/o.create_graph, /*allow_unused=*/true);
      std::size_t k = 0;
      const auto negate = [](const torch::Tensor& g, const torch::Tensor& like) {
        return g.defined() ? -g : torch::zeros_like(like);
      };
      if (o.forces) {
        out.forces = negate(grads[k], pos);
        ++k;
      }
      if (o.virials) {
        out.virials = negate(grads[k], disp);
      }
    }
    return out;
  }

  const std::vector<std::pair<std::string, torch::Tensor>>& named_params() const override { return named; }
  const models::mace::MaceSpec& model_spec() const override { return spec; }
  torch::Device device() const override { return dev; }

  io::PotentialFile to_file() const override {
    io::PotentialFile out;
    out.metadata = file.metadata;
    out.extra_metadata = file.extra_metadata;
    out.metadata["dtype"] = std::is_same_v<T, double> ? "float64" : "float32";
    std::map<std::string, std::size_t> which;
    for (std::size_t k = 0; k < named.size(); ++k) {
      which[named[k].first] = k;
    }
    for (const auto& [name, tensor] : file.tensors()) {
      const auto it = which.find(name);
      if (it == which.end()) {
        out.add(tensor);
        continue;
      }
      const torch::Tensor v = named[it->second].second.detach().to(torch::kCPU, torch::kFloat64).contiguous();
      const double* p = v.data_ptr<double>();
      const auto& P = params[it->second];
      std::vector<double> values(static_cast<std::size_t>(v.numel()));
      for (std::size_t i = 0; i < values.size(); ++i) {
        values[P.file_index.empty() ? i : static_cast<std::size_t>(P.file_index[i])] = p[i];
      }
      out.add<double>(name, P.file_shape, values);
    }
    return out;
  }
};

template <class T>
MaceTorchModel<T>::MaceTorchModel(const io::PotentialFile& file, const MaceTorchOptions& options)
    : m_impl(with_exec(options.device, "MaceTorchModel", [&](auto exec) -> std::unique_ptr<Impl> {
        return std::make_unique<MaceOn<T, typename decltype(exec)::type>>(file, options);
      })) {}
template <class T>
MaceTorchModel<T>::MaceTorchModel(const io::PotentialFile& file, const std::string& head,
                                  torch::Device device)
    : MaceTorchModel(file, MaceTorchOptions{head, device, false}) {}
template <class T>
MaceTorchModel<T>::~MaceTorchModel() = default;
template <class T>
MaceTorchModel<T>::MaceTorchModel(MaceTorchModel&&) noexcept = default;
template <class T>
MaceTorchModel<T>& MaceTorchModel<T>::operator=(MaceTorchModel&&) noexcept = default;

template <class T>
MaceOutput MaceTorchModel<T>::forward(const MaceBatch& batch, const MaceForwardOptions& options) {
  return m_impl->forward(batch, options);
}
template <class T>
const std::vector<std::pair<std::string, torch::Tensor>>& MaceTorchModel<T>::named_parameters() const {
  return m_impl->named_params();
}
template <class T>
std::vector<torch::Tensor> MaceTorchModel<T>::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : m_impl->named_params()) {
    out.push_back(p.second);
  }
  return out;
}
template <class T>
torch::Device MaceTorchModel<T>::device() const {
  return m_impl->device();
}
template <class T>
double MaceTorchModel<T>::cutoff() const {
  return m_impl->model_spec().r_max;
}
template <class T>
const std::vector<io::PotentialSpecies>& MaceTorchModel<T>::species() const {
  return m_impl->model_spec().species;
}
template <class T>
int MaceTorchModel<T>::species_index(int atomic_number) const {
  return io::species_index(m_impl->model_spec().species, atomic_number);
}
template <class T>
std::string MaceTorchModel<T>::graph_feature_problem(double total_charge, double total_spin) const {
  const std::string problem = m_impl->model_spec().graph_embedding.value_problem(total_charge, total_spin);
  return problem.empty() ? problem : "its " + problem;
}
template <class T>
io::PotentialFile MaceTorchModel<T>::to_potential_file() const {
  return m_impl->to_file();
}
template <class T>
void MaceTorchModel<T>::save(const std::string& path) const {
  io::write_potential_file(path, to_potential_file());
}

template class MaceTorchModel<float>;
template class MaceTorchModel<double>;

}  // namespace fastmlip::trainer

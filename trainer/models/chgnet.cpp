// SPDX-License-Identifier: MIT
// The trainer's CHGNet: chgnet 0.3.x's CHGNet (model/model.py, layers.py, basis.py) as the core's
// ChgnetModel evaluates it (src/models/chgnet/chgnet_model.cpp), on LibTorch autograd. The
// loader is the core's: the file is first given to ChgnetModel, so a file this model accepts
// is one the pair style accepts, and the same hyperparameters are refused with the same
// messages.
#include "models/chgnet.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "core/elements.hpp"
#include "core/error.hpp"
#include "models/chgnet/chgnet_layout.hpp"
#include "models/chgnet/chgnet_model.hpp"
#include "models/chgnet/chgnet_stages.hpp"
#include "models/chgnet_ops.hpp"
#include "models/device.hpp"

namespace fastmlip::trainer {

// ---- batches ----------------------------------------------------------------------------------

ChgnetBatch make_chgnet_batch(const std::vector<ChgnetStructure>& structures, double cutoff,
                              double bond_cutoff) {
  std::vector<double> pos, shifts, cells;
  std::vector<std::int64_t> species, batch, center, neighbor, short_edge, short_reverse, angle_a, angle_b,
      angle_center;
  std::int64_t node0 = 0, edge0 = 0, short0 = 0;
  for (std::size_t gi = 0; gi < structures.size(); ++gi) {
    const auto& s = structures[gi];
    const std::size_t n = s.atomic_numbers.size();
    if (s.positions.size() != 3 * n) {
      throw InputError("make_chgnet_batch: structure " + std::to_string(gi) + " has " + std::to_string(n) +
                       " atomic numbers but " + std::to_string(s.positions.size()) +
                       " position values (need 3 per atom)");
    }
    const auto g = models::make_structure_graph<double>(
        s.positions, s.atomic_numbers, s.cell ? s.cell->data() : nullptr, s.pbc, cutoff, bond_cutoff);
    const std::size_t ne = g.center.size();
    std::vector<std::int64_t> slot_edge;  // the structure's short edges by slot
    for (std::size_t e = 0; e < ne; ++e) {
      const int c = g.center[e], nb = g.neighbor[e];
      center.push_back(node0 + c);
      neighbor.push_back(node0 + nb);
      // The graph holds the edge vector; the image shift is what it adds to r_n - r_c. It is
      // recovered in double (to ~1e-15 A), so that autograd sees the vector as a function of
      // the positions.
      for (int d = 0; d < 3; ++d) {
        shifts.push_back(g.vectors[3 * e + d] - (s.positions[3 * nb + d] - s.positions[3 * c + d]));
      }
      if (g.reverse_slot[e] >= 0) {
        slot_edge.push_back(static_cast<std::int64_t>(e));
      }
    }
    // make_structure_graph numbers the short edges in edge order: slot s is slot_edge[s].
    for (std::size_t sl = 0; sl < slot_edge.size(); ++sl) {
      short_edge.push_back(edge0 + slot_edge[sl]);
      short_reverse.push_back(short0 + g.reverse_slot[slot_edge[sl]]);
    }
    // Angles: ordered pairs of distinct short edges out of one atom (the core's order).
    for (std::size_t i = 0; i < n; ++i) {
      for (int a = g.slot_start[i]; a < g.slot_start[i + 1]; ++a) {
        for (int b = g.slot_start[i]; b < g.slot_start[i + 1]; ++b) {
          if (a == b) {
            continue;
          }
          angle_a.push_back(short0 + a);
          angle_b.push_back(short0 + b);
          angle_center.push_back(node0 + static_cast<std::int64_t>(i));
        }
      }
    }
    pos.insert(pos.end(), s.positions.begin(), s.positions.end());
    for (int z : s.atomic_numbers) {
      species.push_back(z - 1);
    }
    batch.insert(batch.end(), n, static_cast<std::int64_t>(gi));
    for (int k = 0; k < 9; ++k) {
      cells.push_back(s.cell ? (*s.cell)[k] : 0.0);
    }
    node0 += static_cast<std::int64_t>(n);
    edge0 += static_cast<std::int64_t>(ne);
    short0 += static_cast<std::int64_t>(slot_edge.size());
  }
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  auto ints = [&](std::vector<std::int64_t>& v) {
    return torch::from_blob(v.data(), {static_cast<std::int64_t>(v.size())}, i64).clone();
  };
  ChgnetBatch b;
  b.positions = torch::from_blob(pos.data(), {node0, 3}, f64).clone();
  b.species = ints(species);
  b.batch = ints(batch);
  b.center = ints(center);
  b.neighbor = ints(neighbor);
  b.shifts = torch::from_blob(shifts.data(), {edge0, 3}, f64).clone();
  b.short_edge = ints(short_edge);
  b.short_reverse = ints(short_reverse);
  b.angle_a = ints(angle_a);
  b.angle_b = ints(angle_b);
  b.angle_center = ints(angle_center);
  b.num_graphs = static_cast<std::int64_t>(structures.size());
  b.cell = torch::from_blob(cells.data(), {b.num_graphs, 3, 3}, f64).clone();
  return b;
}

// ---- the model --------------------------------------------------------------------------------

template <class T>
struct ChgnetTorchModel<T>::Impl {
  io::PotentialFile file;
  ChgnetTorchOptions options;
  std::string source;
  double r_atom = 6.0, r_bond = 3.0;
  int n_conv = 0, n_elements = 0;
  bool gmlp_norm = true, readout_ln = true;
  std::vector<std::string> readout;  // the readout MLP's Linear layers, in order
  std::vector<models::chgnet::Stage> stages;  // the core's block list of this model
  // The bases on the execution space of options.device (kernel ops are device-generic).
  c10::intrusive_ptr<KernelOp> rbf_ag, rbf_bg, fourier;
  bool torch_dense = false;  ///< the dense family as LibTorch ops (ChgnetTorchOptions::torch_dense_ops)
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::map<std::string, torch::Tensor> tensors;  // every tensor the forward reads, by file name

  torch::TensorOptions real() const {
    return torch::TensorOptions().dtype(torch_dtype<T>()).device(options.device);
  }

  torch::Tensor read(const std::string& name) const {
    const auto& t = file.get(name);
    const auto v = file.values<double>(name, t.shape, io::Conversion::widen);
    return torch::tensor(v, torch::TensorOptions().dtype(torch::kFloat64)).reshape(t.shape).to(real());
  }

  /// The direct heads' tensors: Linear(in, hidden), SiLU, Linear(hidden, out) as
  /// <prefix>.layers.0 and .layers.2, from the file or drawn as torch's Linear default.
  void add_head(const std::string& prefix, std::int64_t in, std::int64_t out, torch::Generator& gen) {
    const std::int64_t h = options.head_hidden;
    const std::pair<std::string, std::vector<std::int64_t>> shapes[] = {{".layers.0.weight", {h, in}},
                                                                        {".layers.0.bias", {h}},
                                                                        {".layers.2.weight", {out, h}},
                                                                        {".layers.2.bias", {out}}};
    for (const auto& [suffix, shape] : shapes) {
      const std::string name = prefix + suffix;
      torch::Tensor t;
      if (file.contains(name)) {
        file.get(name, {io::DType::F32, io::DType::F64}, shape);  // throws naming a wrong shape
        t = read(name);
      } else {
        const std::int64_t fan_in = suffix.rfind(".layers.0", 0) == 0 ? in : h;
        const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
        t = (torch::rand(shape, gen, torch::TensorOptions().dtype(torch::kFloat64)) * 2 - 1) * bound;
        t = t.to(real());
      }
      t.requires_grad_(true);
      named.emplace_back(name, t);
      tensors[name] = t;
    }
  }
  static bool is_head(const std::string& name) {
    return name.rfind("force_head.", 0) == 0 || name.rfind("stress_head.", 0) == 0;
  }

  Impl(const io::PotentialFile& f, const ChgnetTorchOptions& o) : file(f), options(o) {
    // The core's loader checks the model kind, every hyperparameter and tensor shape, and
    // refuses the architectures it does not evaluate.
    const models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> core(f);
    source = f.display_name();
    r_atom = core.cutoff();
    r_bond = core.bond_cutoff();
    n_elements = core.num_elements();
    auto hp = [](const std::string& key) { return "/hyperparameters/" + key; };
    n_conv = f.meta<int>(hp("n_conv"));
    stages = models::chgnet::stage_list(n_conv);
    const auto* gn = io::detail::find_meta(f.metadata, hp("gMLP_norm"));
    gmlp_norm = gn != nullptr && !gn->is_null();
    const auto* rn = io::detail::find_meta(f.metadata, hp("readout_norm"));
    readout_ln = rn != nullptr && !rn->is_null();
    const int p = f.meta<int>(hp("cutoff_coeff"));
    auto bessel = [p](double r_cut) {
      kernels::RadialBasisParams params;
      params.r_max = r_cut;
      params.envelope_p = p;
      return params;
    };
    torch_dense = o.torch_dense_ops || !o.device.is_cpu();
    with_exec(o.device, "ChgnetTorchModel", [&](auto exec) {
      using Exec = typename decltype(exec)::type;
      rbf_ag = c10::make_intrusive<ChgnetBesselOp<T, Exec>>(bessel(r_atom),
                                                            "bond_basis_expansion.rbf_expansion_ag");
      rbf_bg = c10::make_intrusive<ChgnetBesselOp<T, Exec>>(bessel(r_bond),
                                                            "bond_basis_expansion.rbf_expansion_bg");
      fourier =
          c10::make_intrusive<ChgnetFourierOp<T, Exec>>(kernels::FourierParams{}, "angle_basis_expansion");
    });
    for (int idx = 0; idx < 64; ++idx) {
      const std::string name = "mlp.layers." + std::to_string(idx);
      if (f.contains(name + ".weight")) {
        readout.push_back(name);
      }
    }
    // The last AngleUpdate is never read (the final AtomConv reads no angles), and the AtomRef
    // energies are frozen (chgnet's train_composition_model=False): both stay as read.
    const std::string unused = "angle_layers." + std::to_string(n_conv - 2) + ".";
    for (const auto& [name, tensor] : f.tensors()) {
      if (name.rfind(unused, 0) == 0 || is_head(name)) {
        continue;
      }
      torch::Tensor t = read(name);
      if (name != "composition_model.fc.weight") {
        t.requires_grad_(true);
        named.emplace_back(name, t);
      }
      tensors[name] = t;
    }
    if (options.direct_heads) {
      if (options.head_hidden < 1) {
        throw InputError(source + ": the direct heads need a positive hidden width");
      }
      auto gen = at::detail::createCPUGenerator(options.seed);
      add_head("force_head", at("bond_embedding.weight").size(0), 1, gen);
      add_head("stress_head", at("atom_embedding.embedding.weight").size(1), 6, gen);
    }
  }

  const torch::Tensor& at(const std::string& name) const {
    const auto it = tensors.find(name);
    if (it == tensors.end()) {
      throw InputError(source + ": no tensor " + name);
    }
    return it->second;
  }
  /// torch's nn.Linear on the core's dense kernel (DenseOp).
  torch::Tensor linear(const torch::Tensor& x, const std::string& prefix) const {
    const auto& W = at(prefix + ".weight");
    const auto b = tensors.find(prefix + ".bias");
    if (torch_dense) {
      return b != tensors.end() ? torch::linear(x, W, b->second) : torch::linear(x, W);
    }
    DenseStages stages{static_cast<int>(W.size(1)), static_cast<int>(W.size(0)), b != tensors.end()};
    const auto op = c10::make_intrusive<DenseOp<T>>(stages, prefix);
    if (stages.bias) {
      return apply_kernel(op, {x, W, b->second});
    }
    return apply_kernel(op, {x, W});
  }
  /// chgnet's GatedMLP, silu(LN_1(core(z))) * sigmoid(LN_2(gate(z))), on the core's kernel
  /// (GatedMlpOp): core and gate are [Linear, SiLU, Dropout, Linear] with a hidden layer,
  /// [Dropout, Linear] without.
  torch::Tensor gated(const std::string& prefix, const torch::Tensor& z) const {
    const std::string c = prefix + ".mlp_core.layers.", q = prefix + ".mlp_gate.layers.";
    const bool hidden = tensors.count(c + "0.weight") > 0;
    const std::string first = hidden ? "0" : "1";
    if (torch_dense) {
      const auto mlp = [&](const std::string& l) {
        return hidden ? linear(torch::silu(linear(z, l + "0")), l + "3") : linear(z, l + "1");
      };
      const auto core = mlp(c), gate = mlp(q);
      if (!gmlp_norm) {
        return torch::silu(core) * torch::sigmoid(gate);
      }
      return torch::silu(layer_norm(core, prefix + ".bn1")) *
             torch::sigmoid(layer_norm(gate, prefix + ".bn2"));
    }
    GatedMlpStages stages;
    stages.in = static_cast<int>(z.size(1));
    stages.hidden = hidden ? static_cast<int>(at(c + "0.weight").size(0)) : 0;
    stages.out = static_cast<int>(at(c + (hidden ? "3" : "1") + ".weight").size(0));
    stages.norm = gmlp_norm;
    // GatedMlpWeights::parts() order.
    std::vector<torch::Tensor> in{z, at(c + first + ".weight"), at(c + first + ".bias"), at(q + first + ".weight"),
                                  at(q + first + ".bias")};
    if (hidden) {
      for (const auto& name : {c + "3.weight", c + "3.bias", q + "3.weight", q + "3.bias"}) in.push_back(at(name));
    }
    if (gmlp_norm) {
      for (const char* part : {".bn1.weight", ".bn1.bias", ".bn2.weight", ".bn2.bias"}) in.push_back(at(prefix + part));
    }
    return apply_kernel(c10::make_intrusive<GatedMlpOp<T>>(stages, prefix), in);
  }
  /// torch's LayerNorm (eps 1e-5) on the core's kernel (LayerNormOp).
  torch::Tensor layer_norm(const torch::Tensor& x, const std::string& prefix) const {
    if (torch_dense) {
      return torch::layer_norm(x, {x.size(1)}, at(prefix + ".weight"), at(prefix + ".bias"), 1e-5);
    }
    const auto op = c10::make_intrusive<LayerNormOp<T>>(LayerNormStages{static_cast<int>(x.size(1))}, prefix);
    return apply_kernel(op, {x, at(prefix + ".weight"), at(prefix + ".bias")});
  }

  void validate(const ChgnetBatch& b) const {
    const std::string fn = "ChgnetTorchModel::forward: ";
    if (!b.positions.defined() || b.positions.dim() != 2 || b.positions.size(1) != 3) {
      throw InputError(fn + "positions must be [N, 3]");
    }
    const auto N = b.positions.size(0);
    auto is_vec = [](const torch::Tensor& t, std::int64_t n) {
      return t.defined() && t.dim() == 1 && (n < 0 || t.size(0) == n) && t.scalar_type() == torch::kInt64;
    };
    if (!is_vec(b.species, N) || !is_vec(b.batch, N)) {
      throw InputError(fn + "species and batch must be int64 [N] with N = " + std::to_string(N));
    }
    const auto E = b.center.defined() ? b.center.size(0) : -1;
    if (!is_vec(b.center, E) || !is_vec(b.neighbor, E) || !b.shifts.defined() || b.shifts.dim() != 2 ||
        b.shifts.size(0) != E || b.shifts.size(1) != 3) {
      throw InputError(fn + "center and neighbor must be int64 [E], shifts [E, 3]");
    }
    const auto S = b.short_edge.defined() ? b.short_edge.size(0) : -1;
    const auto A = b.angle_a.defined() ? b.angle_a.size(0) : -1;
    if (!is_vec(b.short_edge, S) || !is_vec(b.short_reverse, S) || !is_vec(b.angle_a, A) ||
        !is_vec(b.angle_b, A) || !is_vec(b.angle_center, A)) {
      throw InputError(fn +
                       "short_edge and short_reverse must be int64 [S], angle_a, angle_b and "
                       "angle_center int64 [A] (make_chgnet_batch builds them)");
    }
    auto in_range = [&](const torch::Tensor& t, std::int64_t hi, const char* what) {
      if (t.numel() > 0 && (t.min().item<std::int64_t>() < 0 || t.max().item<std::int64_t>() >= hi)) {
        throw InputError(fn + what + " holds an index outside 0.." + std::to_string(hi - 1));
      }
    };
    in_range(b.species, n_elements, "species (atomic number - 1)");
    in_range(b.batch, b.num_graphs, "batch");
    in_range(b.center, N, "center");
    in_range(b.neighbor, N, "neighbor");
    in_range(b.short_edge, E, "short_edge");
    in_range(b.short_reverse, S, "short_reverse");
    in_range(b.angle_a, S, "angle_a");
    in_range(b.angle_b, S, "angle_b");
    in_range(b.angle_center, N, "angle_center");
  }

  /// AtomConv k: x^{k+1} from x^k, the bond rows b (one per edge) and the weights w.
  torch::Tensor atom_conv(int k, const torch::Tensor& x, const torch::Tensor& b, const torch::Tensor& w,
                          const ChgnetBatch& batch) const {
    const std::string L = "atom_conv_layers." + std::to_string(k);
    const auto z = torch::cat({x.index_select(0, batch.center), b, x.index_select(0, batch.neighbor)}, 1);
    const auto msg = gated(L + ".twoBody_atom", z) * w;
    const auto agg = torch::zeros_like(x).index_add(0, batch.center, msg);
    return x + linear(agg, L + ".mlp_out.layers.1");
  }

  /// The input rows of a BondConv / AngleUpdate GMLP: [b_s, b_t, g, x_c] per angle (s, t).
  static torch::Tensor angle_input(const torch::Tensor& b_short, const torch::Tensor& g,
                                   const torch::Tensor& x, const ChgnetBatch& batch) {
    return torch::cat({b_short.index_select(0, batch.angle_a), b_short.index_select(0, batch.angle_b), g,
                       x.index_select(0, batch.angle_center)},
                      1);
  }

  /// The batch's tensors on this model's device (themselves where they are there already).
  ChgnetBatch on_device(const ChgnetBatch& in) const {
    ChgnetBatch b = in;
    move_to(options.device,
            {&b.positions, &b.species, &b.batch, &b.center, &b.neighbor, &b.shifts, &b.short_edge,
             &b.short_reverse, &b.angle_a, &b.angle_b, &b.angle_center, &b.cell});
    return b;
  }

  ChgnetOutput forward(const ChgnetBatch& bt_in, const ChgnetForwardOptions& o) {
    validate(bt_in);
    const ChgnetBatch bt = on_device(bt_in);
    const bool direct = options.direct_heads;
    torch::AutoGradMode grad_mode(torch::GradMode::is_enabled() || (!direct && (o.forces || o.virials)));
    const auto G = bt.num_graphs;
    torch::Tensor pos = bt.positions.to(real()).detach();
    if (o.forces && !direct) {
      pos.requires_grad_(true);
    }
    torch::Tensor u =
        pos.index_select(0, bt.neighbor) - pos.index_select(0, bt.center) + bt.shifts.to(real());
    torch::Tensor disp;
    if (o.virials && !direct) {
      // The displacement trick of the MACE layer: positions and cell strained by (1 + S), S
      // symmetric; every edge vector is then strained the same way.
      disp = torch::zeros({G, 3, 3}, real()).requires_grad_(true);
      const torch::Tensor S = 0.5 * (disp + disp.transpose(1, 2));
      const auto edge_graph = bt.batch.index_select(0, bt.center);
      u = u + torch::bmm(u.unsqueeze(1), S.index_select(0, edge_graph)).squeeze(1);
    }
    const torch::Tensor r = (u * u).sum(1).sqrt();
    if (r.numel() > 0 && !(r.detach().min().item<double>() > 0)) {
      throw InputError("ChgnetTorchModel::forward: an edge has zero length (coincident atoms)");
    }
    // The model's blocks (models/chgnet/chgnet_stages.hpp), each on the core kernels as
    // autograd functions.
    ChgnetOutput out;
    torch::Tensor B, us, rs, Bb, F, x, b, w, wab, g;
    for (const auto& s : stages) {
      using K = models::chgnet::StageKind;
      const std::string k = std::to_string(s.layer);
      switch (s.kind) {
        case K::Basis: {
          B = apply_kernel(rbf_ag, {r, at("bond_basis_expansion.rbf_expansion_ag.frequencies") / r_atom});
          us = u.index_select(0, bt.short_edge);
          rs = r.index_select(0, bt.short_edge);
          Bb = apply_kernel(rbf_bg, {rs, at("bond_basis_expansion.rbf_expansion_bg.frequencies") / r_bond});
          const auto ua = us.index_select(0, bt.angle_a) / rs.index_select(0, bt.angle_a).unsqueeze(1);
          const auto ub = us.index_select(0, bt.angle_b) / rs.index_select(0, bt.angle_b).unsqueeze(1);
          // chgnet's clamp: theta = acos(0.999999 cos) keeps acos' derivative finite at 0 and pi.
          const auto theta = torch::acos((ua * ub).sum(1) * (1 - 1e-6));
          F = apply_kernel(fourier, {theta, at("angle_basis_expansion.fourier_expansion.frequencies")});
          break;
        }
        case K::Embedding: {
          x = at("atom_embedding.embedding.weight").index_select(0, bt.species);
          b = linear(B, "bond_embedding");
          w = linear(B, "bond_weights_ag");
          const auto wb = linear(Bb, "bond_weights_bg");
          wab = wb.index_select(0, bt.angle_a) * wb.index_select(0, bt.angle_b);
          g = linear(F, "angle_embedding");
          break;
        }
        case K::AtomConv:
          x = atom_conv(s.layer, x, b, w, bt);
          break;
        case K::ExchangeAtoms:
          break;  // a batch has no ghost nodes: every graph is whole
        case K::BondConv: {
          const std::string L = "bond_conv_layers." + k;
          const auto y =
              gated(L + ".twoBody_bond", angle_input(b.index_select(0, bt.short_edge), g, x, bt)) * wab;
          const auto H = torch::zeros({bt.short_edge.size(0), y.size(1)}, real()).index_add(0, bt.angle_a, y);
          // A bond's update sums the angles at both of its ends; long edges get O^b(0).
          const auto upd =
              torch::zeros_like(b).index_add(0, bt.short_edge, H + H.index_select(0, bt.short_reverse));
          b = b + linear(upd, L + ".mlp_out.layers.1");
          break;
        }
        case K::AngleUpdate:
          g = g + gated("angle_layers." + k + ".twoBody_bond", angle_input(b.index_select(0, bt.short_edge), g, x, bt));
          break;
        case K::Magmom:
          out.magmom = linear(x, "site_wise").squeeze(1).abs();
          break;
        case K::Readout: {
          auto h = readout_ln ? layer_norm(x, "readout_norm") : x;
          for (std::size_t l = 0; l < readout.size(); ++l) {
            h = linear(h, readout[l]);
            if (l + 1 < readout.size()) {
              h = torch::silu(h);
            }
          }
          out.site_energy =
              h.squeeze(1) + at("composition_model.fc.weight").squeeze(0).index_select(0, bt.species);
          break;
        }
      }
    }
    out.energy = torch::zeros({G}, real()).index_add(0, bt.batch, out.site_energy);
    if (direct) {
      if (o.forces) {
        out.forces = torch::zeros({x.size(0), 3}, real())
                         .index_add(0, bt.center, head("force_head", b) * u / r.unsqueeze(1));
      }
      if (o.virials) {
        out.virials = stress_head_virials(x, bt);
      }
      return out;
    }
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
      const auto negate = [](const torch::Tensor& gr, const torch::Tensor& like) {
        return gr.defined() ? -gr : torch::zeros_like(like);
      };
      std::size_t k = 0;
      if (o.forces) {
        out.forces = negate(grads[k++], pos);
      }
      if (o.virials) {
        out.virials = negate(grads[k], disp);
      }
    }
    return out;
  }

  torch::Tensor head(const std::string& prefix, const torch::Tensor& features) const {
    return linear(torch::silu(linear(features, prefix + ".layers.0")), prefix + ".layers.2");
  }

  /// -V sigma_g of the stress head (ChgnetTorchOptions).
  torch::Tensor stress_head_virials(const torch::Tensor& x, const ChgnetBatch& bt) const {
    const auto G = bt.num_graphs;
    const auto k = head("stress_head", x);  // [N, 6]: xx yy zz yz xz xy
    const auto S =
        torch::stack({k.select(1, 0), k.select(1, 5), k.select(1, 4), k.select(1, 5), k.select(1, 1),
                      k.select(1, 3), k.select(1, 4), k.select(1, 3), k.select(1, 2)},
                     1)
            .view({-1, 3, 3});
    const auto count = torch::zeros({G}, real()).index_add(0, bt.batch, torch::ones({x.size(0)}, real()));
    const auto S_mean =
        torch::zeros({G, 3, 3}, real()).index_add(0, bt.batch, S) / count.clamp_min(1).view({-1, 1, 1});
    const auto cell = bt.cell.to(real());
    const auto a = cell.select(1, 0), b = cell.select(1, 1), c = cell.select(1, 2);
    auto normals = torch::stack({torch::cross(b, c, 1), torch::cross(c, a, 1), torch::cross(a, b, 1)}, 1);
    normals = normals / normals.norm(2, 2, true).clamp_min(1e-12);  // a zero cell gives zero normals
    const auto sigma = torch::bmm(torch::bmm(normals.transpose(1, 2), S_mean), normals);
    const auto volume = torch::det(cell).abs();
    return -volume.view({-1, 1, 1}) * sigma;
  }

  io::PotentialFile to_file() const {
    io::PotentialFile out;
    out.metadata = file.metadata;
    out.extra_metadata = file.extra_metadata;
    out.metadata["dtype"] = std::is_same_v<T, double> ? "float64" : "float32";
    std::map<std::string, torch::Tensor> trained(named.begin(), named.end());
    auto add = [&out](const std::string& name, const torch::Tensor& p) {
      const torch::Tensor v = p.detach().to(torch::kCPU, torch::kFloat64).contiguous();
      out.add<double>(name, v.sizes().vec(),
                      std::vector<double>(v.data_ptr<double>(), v.data_ptr<double>() + v.numel()));
    };
    for (const auto& [name, tensor] : file.tensors()) {
      const auto it = trained.find(name);
      if (it == trained.end()) {
        // Frozen, unread, or a direct head this model was built without: as read.
        out.add(tensor);
      } else {
        add(name, it->second);
      }
    }
    for (const auto& [name, p] : named) {
      if (!file.contains(name)) {
        add(name, p);  // direct heads drawn fresh
      }
    }
    return out;
  }
};

template <class T>
ChgnetTorchModel<T>::ChgnetTorchModel(const io::PotentialFile& file, const ChgnetTorchOptions& options)
    : m_impl(std::make_unique<Impl>(file, options)) {}
template <class T>
ChgnetTorchModel<T>::~ChgnetTorchModel() = default;
template <class T>
ChgnetTorchModel<T>::ChgnetTorchModel(ChgnetTorchModel&&) noexcept = default;
template <class T>
ChgnetTorchModel<T>& ChgnetTorchModel<T>::operator=(ChgnetTorchModel&&) noexcept = default;

template <class T>
ChgnetOutput ChgnetTorchModel<T>::forward(const ChgnetBatch& batch, const ChgnetForwardOptions& options) {
  return m_impl->forward(batch, options);
}
template <class T>
const std::vector<std::pair<std::string, torch::Tensor>>& ChgnetTorchModel<T>::named_parameters() const {
  return m_impl->named;
}
template <class T>
std::vector<torch::Tensor> ChgnetTorchModel<T>::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : m_impl->named) {
    out.push_back(p.second);
  }
  return out;
}
template <class T>
torch::Device ChgnetTorchModel<T>::device() const {
  return m_impl->options.device;
}
template <class T>
double ChgnetTorchModel<T>::cutoff() const {
  return m_impl->r_atom;
}
template <class T>
double ChgnetTorchModel<T>::bond_cutoff() const {
  return m_impl->r_bond;
}
template <class T>
int ChgnetTorchModel<T>::num_elements() const {
  return m_impl->n_elements;
}
template <class T>
io::PotentialFile ChgnetTorchModel<T>::to_potential_file() const {
  return m_impl->to_file();
}
template <class T>
void ChgnetTorchModel<T>::save(const std::string& path) const {
  io::write_potential_file(path, to_potential_file());
}

template class ChgnetTorchModel<float>;
template class ChgnetTorchModel<double>;

// ---- a fresh model --------------------------------------------------------------------------

io::PotentialFile make_chgnet_potential(const ChgnetConfig& c) {
  auto gen = at::detail::createCPUGenerator(c.seed);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  // torch's draws: rand for nn.Linear's uniform default, randn for nn.Embedding.
  const auto draw = [&](const std::string&, std::int64_t n, models::ChgnetInit init) {
    const torch::Tensor t = init.kind == models::ChgnetInit::normal ? torch::randn({n}, gen, f64) * init.scale
                                                                     : (torch::rand({n}, gen, f64) * 2 - 1) * init.scale;
    return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + n);
  };
  return models::write_chgnet_layout(c, draw, {{"writer", "fastmlip-trainer 0.1.0"}, {"seed", c.seed}});
}

}  // namespace fastmlip::trainer

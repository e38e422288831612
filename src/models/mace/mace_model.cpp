// SPDX-License-Identifier: MIT
// MACE (Batatia et al., NeurIPS 2022) as mace-torch 0.3.13 evaluates MACE / ScaleShiftMACE
// (modules/models.py, modules/blocks.py), composed from the fused kernels, with a hand-written
// reverse pass for dE/d(edge vectors). Per layer t (paper eqs. 8-11, 13):
//
//   h^t     = linear_up(x^t)                                          (every sender row)
//   A_i     = sum_{j->i} TP(h^t_j, Y(v_ji), MLP_t(B(|v_ji|)))         (eq. 8-9; fused scatter)
//   m_i     = linear(A_i) / avg_num_neighbors                          (mace-torch's division)
//             Density blocks: linear(A_i) / (1 + sum_{e->i} tanh((B_e . w_density)^2))
//   residual block:      sc_i = skip_tp(x^t_i, z_i),   m'_i = m_i
//   non-residual block:  m'_i = skip_tp(m_i, z_i)                      (MACE-MP's first layer)
//   non-linear block (MH-1, OMOL): R from a LayerNorm MLP of [B, species embeddings],
//             m'_i = linear_2(gate(linear_1(A_i) / (alpha + beta density_i) + linear_res(h_i))),
//             sc_i = skip(x^t_i)                                        (mace_spec.hpp NonLinearSpec)
//   x^{t+1}_i = products.t.linear(SC_t(m'_i; z_i)) [+ sc_i if residual and use_sc]   (eq. 10-11)
//   e^t_i   = readout_t(x^{t+1}_i)[head]                               (eq. 13)
//
//   E_i = E0[z_i] + scale * (ZBL_i + sum_t e^t_i) + shift   (ScaleShiftMACE; MACE: scale 1, shift 0)
//
// Edge vectors: the model reads the graph contract's v = r_j - r_i (+ shift) as it is, with no
// copy and no sign flip on the way in or out. mace-torch's edge vector is the opposite, u = r_i -
// r_j. Since Y_l(-u) = (-1)^l Y_l(u) exactly (the harmonics are odd or even polynomials of the
// normalised vector), evaluating on v flips the sign of every odd-parity intermediate feature
// exactly and changes nothing else: energies and dE/dv are the same bits as mace-torch's
// convention would give (-dE/du). A term-by-term comparison of intermediate features with
// mace-torch must flip their odd-parity components.
#include "models/mace/mace_model.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "core/out_of_memory.hpp"
#include "graph/impl/atom_graph_impl.hpp"
#include "kernels/channelwise_tp_kokkos.hpp"
#include "kernels/edge_index.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/linear_kokkos.hpp"
#include "kernels/normed_mlp_kokkos.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "kernels/radial_mlp_kokkos.hpp"
#include "kernels/radial_table_kokkos.hpp"
#include "kernels/spherical_harmonics_kokkos.hpp"
#include "kernels/symmetric_contraction_kokkos.hpp"
#include "math/spherical_harmonics.hpp"
#include "models/exchange_on_host.hpp"
#include "models/image_exchange.hpp"
#include "models/mace/impl/mace_glue_impl.hpp"
#include "models/mace/mace_spec.hpp"
#include "models/mace/mace_stages.hpp"

namespace fastmlip::models {

template <class ExecSpace, class T>
struct MaceModel<ExecSpace, T>::Impl {
  // Every stage runs on ExecSpace over views in its memory: the kernels, the elementwise glue
  // between them (impl/mace_glue_impl.hpp: embedding, edge lengths, residual and adjoint sums,
  // the readout gate, ZBL, node energies, dE/dv), the graph check and the edge index's transpose.
  // Host memory is touched only at the edges of a call: the caller's FeatureExchange gets host
  // rows (staged through a host copy where ExecSpace's memory is not the host's), and the
  // results stay in ExecSpace's memory (MaceDeviceResult) or are copied out into MaceResult's
  // host vectors at the end.
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "MaceModel: T must be float or double");

  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using Ints = Kokkos::View<const int*, ExecSpace>;
  using Vector = Kokkos::View<T*, ExecSpace>;

  /// A grow-only buffer handing out matrices of exact shape (the kernels check extents):
  /// storage is reused across steps, so an MD run allocates only when the system grows.
  using Buffer = kernels::impl::GrowBuffer<T, ExecSpace>;

  static Matrix weights(const std::vector<double>& w, int rows) {
    const int cols = rows > 0 ? static_cast<int>(w.size()) / rows : 0;
    return kernels::impl::upload_matrix<ExecSpace, double, T>(w, rows, cols, "fastmlip::mace::weights");
  }

  /// The kernels and weights of interaction, product and readout t.
  /// A radial table's pair of elements (model species indices) and their covalent radii summed
  /// (the distance transform's r0); one entry {0, 0, 0} when R is a function of r alone.
  struct TablePair {
    double rsum = 0;
    int receiver = 0, sender = 0;
  };

  struct Layer {
    const mace::InteractionSpec* I;
    const mace::ProductSpec* P;
    const mace::ReadoutSpec* R;  // R->present false: the layer has no readout (use_last_readout_only)
    kernels::LinearKokkos<ExecSpace, T> up, lin, skip, prod;
    std::optional<kernels::LinearKokkos<ExecSpace, T>> r1, r2, rmid;
    kernels::ChannelwiseTPKokkos<ExecSpace, T> tp;
    std::optional<kernels::RadialMLPKokkos<ExecSpace, T>> mlp;  // all but the non-linear block
    /// With MaceOptions::radial_spacing > 0: R(r) tabulated, used instead of radial_basis + mlp
    /// (one table per pair of elements under a distance transform); a Density block's edge term
    /// tanh(d(r)^2) likewise.
    std::optional<kernels::RadialTableKokkos<ExecSpace, T>> table, density_table;
    kernels::SymmetricContractionKokkos<ExecSpace, T> sc;
    Matrix W_up, W_lin, W_skip, W_prod, W_r1, W_r2, W_rmid;
    Matrix b_mid, b_2;  // [1][M], [1][heads]: NonLinearBiasReadoutBlock's biases, else empty
    Matrix W_density;  // [num_bessel][1] for the Density blocks, else empty
    // The non-linear block (I->nonlinear): its radial and density MLPs, their first layers'
    // species terms [E][width], linear_res, linear_2 and the gate's column maps.
    std::optional<kernels::NormedMLPKokkos<ExecSpace, T>> nl_radial, nl_density;
    Matrix P_radial_source, P_radial_target, P_density_source, P_density_target;
    std::optional<kernels::LinearKokkos<ExecSpace, T>> res, lin2;
    Matrix W_res, W_lin2;
    Kokkos::View<const int*, ExecSpace> gate_source, gate_gate;

    /// One function of r tabulated per pair of elements (f(pair, r, value, derivative)),
    /// stacked; its measured errors (the largest over the tables) appended to `info`.
    template <class F>
    kernels::RadialTableKokkos<ExecSpace, T> build_tables(int t, MaceRadialTableInfo::Function function,
                                                          const std::vector<TablePair>& pairs,
                                                          const MaceOptions& options, double r_max, int width,
                                                          std::vector<MaceRadialTableInfo>& info,
                                                          const F& f) {
      std::vector<kernels::RadialTable> built;
      built.reserve(pairs.size());
      for (const TablePair& pair : pairs) {
        built.push_back(kernels::RadialTable::build([&](double r, double* v, double* d) { f(pair, r, v, d); },
                                                    width, r_max, options.radial_spacing,
                                                    MaceOptions::kRadialTableStart));
      }
      MaceRadialTableInfo in;
      in.layer = t;
      in.function = function;
      in.tables = static_cast<int>(built.size());
      in.knots = built.front().knots;
      in.width = width;
      in.spacing = built.front().h;
      for (const auto& tab : built) {
        in.max_error_value = std::max(in.max_error_value, tab.max_error_value);
        in.max_abs_value = std::max(in.max_abs_value, tab.max_abs_value);
        in.max_error_derivative = std::max(in.max_error_derivative, tab.max_error_derivative);
        in.max_abs_derivative = std::max(in.max_abs_derivative, tab.max_abs_derivative);
        in.bytes += tab.data.size() * sizeof(T);
      }
      info.push_back(in);
      return kernels::RadialTableKokkos<ExecSpace, T>(built);
    }

    /// table_pairs: with radial tables, one entry per table (pair_tables()).
    Layer(const mace::MaceSpec& s, int t, const MaceOptions& options,
          const std::vector<TablePair>& table_pairs, std::vector<MaceRadialTableInfo>& tables)
        : I(&s.interactions[t]),
          P(&s.products[t]),
          R(&s.readouts[t]),
          up(I->linear_up),
          lin(I->linear),
          skip(I->skip),
          prod(P->linear),
          // Radial splines feed the TP tabulated weights, which only the Kokkos TP reads.
          tp(I->tp, options.radial_spacing != 0.0 ? kernels::Backend::kokkos : options.backend),
          sc(P->sc, options.backend),
          W_up(weights(I->w_linear_up, 1)),
          W_lin(weights(I->w_linear, 1)),
          W_skip(weights(I->w_skip, I->skip.num_sets)),
          W_prod(weights(P->w_linear, 1)) {
      // With radial tables the radial (and density) MLPs are only evaluated on the host, to
      // build the tables: their device copies would go unused.
      const bool exact_radial = options.radial_spacing == 0.0;
      if (I->nonlinear) {
        const mace::NonLinearSpec& N = *I->nonlinear;
        if (exact_radial) {
          nl_radial.emplace(N.radial);
          nl_density.emplace(N.density);
          P_radial_source = weights(N.radial_source, s.num_elements);
          P_radial_target = weights(N.radial_target, s.num_elements);
          P_density_source = weights(N.density_source, s.num_elements);
          P_density_target = weights(N.density_target, s.num_elements);
        }
        res.emplace(N.linear_res);
        lin2.emplace(N.linear_2);
        W_res = weights(N.w_linear_res, 1);
        W_lin2 = weights(N.w_linear_2, 1);
        gate_source = kernels::impl::upload<ExecSpace>(N.gate_source, "fastmlip::mace::gate_source");
        gate_gate = kernels::impl::upload<ExecSpace>(N.gate_gate, "fastmlip::mace::gate_gate");
      } else if (exact_radial) {
        mlp.emplace(I->mlp, options.radial_backend);
      }
      // use_agnostic_product: one weight set, read for every atom through species 0.
      sc.set_weights(P->W, P->agnostic ? 1 : s.num_elements);
      if (I->density && exact_radial) {
        W_density = weights(I->w_density, static_cast<int>(I->w_density.size()));
      }
      if (!exact_radial) {
        const auto& basis = s.radial_basis;
        const auto& transform = s.distance_transform;
        if (I->nonlinear) {
          // The MLPs' first-layer species terms of the table's pair, as pair_terms() adds them.
          const mace::NonLinearSpec& N = *I->nonlinear;
          const auto pre = [](const std::vector<double>& source, const std::vector<double>& target, int width,
                              const TablePair& p) {
            std::vector<double> v(width);
            for (int k = 0; k < width; ++k) {
              v[k] = source[static_cast<std::size_t>(p.sender) * width + k] +
                     target[static_cast<std::size_t>(p.receiver) * width + k];
            }
            return v;
          };
          table.emplace(build_tables(t, MaceRadialTableInfo::Function::R, table_pairs, options, basis.r_max,
                                     N.radial.width_out(), tables,
                                     [&](const TablePair& p, double r, double* v, double* d) {
                                       kernels::evaluate_normed_radial_function(
                                           basis, transform, p.rsum, N.radial,
                                           pre(N.radial_source, N.radial_target, N.radial.width_first(), p),
                                           r, v, d);
                                     }));
          density_table.emplace(build_tables(
              t, MaceRadialTableInfo::Function::density, table_pairs, options, basis.r_max, 1, tables,
              [&](const TablePair& p, double r, double* v, double* d) {
                kernels::evaluate_normed_density_term(
                    basis, transform, p.rsum, N.density,
                    pre(N.density_source, N.density_target, N.density.width_first(), p), r, v, d);
              }));
        } else {
          const auto& mlp = I->mlp;
          table.emplace(build_tables(t, MaceRadialTableInfo::Function::R, table_pairs, options, basis.r_max,
                                     mlp.width_out(), tables,
                                     [&](const TablePair& p, double r, double* v, double* d) {
                                       kernels::evaluate_radial_function(basis, transform, p.rsum, mlp, r, v,
                                                                         d);
                                     }));
        }
        if (I->density) {
          const auto& w = I->w_density;
          density_table.emplace(build_tables(t, MaceRadialTableInfo::Function::density, table_pairs, options,
                                             basis.r_max, 1, tables,
                                             [&](const TablePair& p, double r, double* v, double* d) {
                                               kernels::evaluate_density_term(basis, transform, p.rsum, w, r,
                                                                              v, d);
                                             }));
        }
      }
      if (R->present) {
        r1.emplace(R->linear_1);
        W_r1 = weights(R->w_linear_1, 1);
      }
      if (R->present && R->nonlinear) {
        r2.emplace(R->linear_2);
        W_r2 = weights(R->w_linear_2, 1);
      }
      if (R->present && R->bias) {
        rmid.emplace(R->linear_mid);
        W_rmid = weights(R->w_linear_mid, 1);
        b_mid = weights(R->b_mid, 1);
        b_2 = weights(R->b_2, 1);
      }
    }
  };

  mace::MaceSpec spec;
  mace::StageGraph plan;  // the model's stages (mace_stages.hpp), run in order, then reversed
  std::vector<Layer> layers;
  kernels::RadialBasisKokkos<ExecSpace, T> radial_basis;
  kernels::SphericalHarmonicsKokkos<ExecSpace, T> harmonics;
  int sh_width;
  Matrix W_embedding;  // [num_elements][C]: node_embedding's weights times its path weight
  std::vector<MaceRadialTableInfo> tables;
  bool tabulated;  // every layer's R(r) from its table (no radial basis, no MLP)
  // Under a distance transform or with non-linear blocks, tables per pair of elements: the table
  // of each (receiver, sender) species pair, -1 for elements left out of
  // MaceOptions::table_species; and the current graph's table index per edge. Empty otherwise
  // (one table per layer).
  Kokkos::View<const int**, Kokkos::LayoutRight, ExecSpace> pair_table;
  std::vector<std::string> table_symbols;  // the elements with tables, for the refusal
  Kokkos::View<int*, ExecSpace> edge_table;
  kernels::impl::GrowBuffer<int, ExecSpace> edge_table_storage{"fastmlip::mace::edge_table"};

  // Per-call state, valid during compute().
  int n_local = 0, n_total = 0, num_edges = 0;
  Ints species_all, species_local;
  // use_agnostic_product: every local atom as species 0, the one weight set of those products.
  Ints species_agnostic;
  kernels::impl::GrowBuffer<int, ExecSpace> species_agnostic_storage{"fastmlip::mace::species_agnostic"};
  kernels::EdgeIndex<ExecSpace> graph_index;  // the graph's own views, plus the transpose by sender
  // graph_index's own arrays, reused from step to step.
  kernels::EdgeIndexStorage<ExecSpace> graph_index_storage;
  // The exact radial MLP and TP in chunks of edges (MaceOptions::edge_chunk): a chunk is the
  // edges [begin, end) of receivers [first, last); the chunks cover every local node. The host copy
  // of the CSR offsets they are cut by is this step's once made (center_start_host_ready).
  struct EdgeChunk {
    int first, last, begin, end;
  };
  int edge_chunk = 0;  // MaceOptions::edge_chunk
  std::vector<int> center_start_host;
  bool center_start_host_ready = false;
  std::vector<EdgeChunk> edge_chunks_of_layer;
  kernels::EdgeIndexStorage<ExecSpace> chunk_index_storage;  // each chunk's index, in turn
  // The host copy of the rows the caller's communication exchanges, where ExecSpace's memory is
  // not the host's (exchange_rows).
  kernels::impl::GrowBuffer<T, Kokkos::HostSpace> exchange_rows_host{"fastmlip::mace::exchange_rows_host"};
  // The exchanges done here when every ghost is an image of a local node (exchange_rows); asked
  // of the caller once per compute.
  ImageExchange<ExecSpace> images;
  bool images_asked = false;
  Kokkos::View<const T* [3], Kokkos::LayoutRight, ExecSpace> vectors;  // [E][3] the graph's own
  Vector r;     // [E] lengths
  Matrix Y, B;  // [E][sh], [E][num_bessel]
  Ints center_start;                              // [n_local + 1] the graph's CSR offsets
  Kokkos::View<double*, ExecSpace> inter_energy;  // [n_local] sum of the readouts
  Kokkos::View<double*, ExecSpace> pair_energy;   // [n_local] ZBL
  Kokkos::View<double*, ExecSpace> node_energy;   // [n_local] the result
  std::vector<double> node_energy_host;           // its copy, summed in node order on the host
  double energy = 0;                              // that sum
  Kokkos::View<const T* [3], Kokkos::LayoutRight, ExecSpace> edge_gradient;  // [E] the result, in g_grad
  Kokkos::View<const double*, ExecSpace> e0;      // [num_elements] E0 of each species
  // ZBL's constants, and the atomic number and covalent radius of each model species.
  impl::ZblConstants zbl_constants;
  Kokkos::View<const double*, ExecSpace> zbl_z, zbl_rcov;
  // The distance transform's covalent radius of each model species (empty without one),
  // and the transformed lengths x and dx/dr of the current graph's edges.
  Kokkos::View<const double*, ExecSpace> transform_rcov;
  Vector x_edge, dxdr_edge;
  // apply_cutoff False without tables (separate_cutoff()): f_p(r) of each edge, its derivative,
  // and dE/d f_p summed over the layers' radial MLP outputs and Density terms.
  Vector fc_edge, dfc_edge, gcut_edge;

  using Glue = impl::MaceGlueFunctor<ExecSpace, T>;
  template <class Tag>
  static void launch(const char* label, int n, const Glue& f) {
    Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace, Tag>(0, n), f);
  }
  /// rows(i, :) += bias(0, :) for every row i.
  static void add_bias(const char* label, Matrix rows, Matrix bias) {
    Glue f;
    f.m_out = rows;
    f.m_bias = bias;
    launch<typename Glue::TagAddBias>(label, static_cast<int>(rows.extent(0)), f);
  }
  /// a += b over their first n values (flat).
  static void add(const char* label, T* a, const T* b, std::size_t n) {
    Glue f;
    f.m_a = Kokkos::View<T*, ExecSpace>(a, n);
    f.m_b = Kokkos::View<const T*, ExecSpace>(b, n);
    launch<typename Glue::TagAdd>(label, static_cast<int>(n), f);
  }

  // Buffers. x[t]: input features of layer t (x[0]: all rows; x[t>0]: local rows); h[t]: the
  // sender features linear_up(x[t]) of every row; m[t]: the contraction's input; z[t]: the
  // non-linear readout's pre-activation. The rest are scratch reused by every layer.
  std::vector<Buffer> x, h, m, z, zmid, gx;  // zmid[t]: NonLinearBiasReadoutBlock's second pre-activation
  // l[t]: the interaction linear's output (the Density reverse reads it); u[t]: the non-linear
  // block's gate input (the gate's reverse reads it).
  std::vector<Buffer> l, u;
  Buffer b_g, g_g, g_u_gate, b_pre, b_dedge, g_dedge, g_dedge_basis;  // the non-linear block's scratch
  // Its MLPs' activations: each MLP is recomputed just before its reverse, so one serves all.
  kernels::NormedMLPWorkspace<ExecSpace, T> nl_workspace;
  Buffer b_Y, b_B, b_r, b_x, b_dxdr, b_fc, b_dfc, b_R, b_Rs, b_A, b_sc, b_prod, b_out, b_act, b_act2;
  Buffer g_out, g_act, g_act2, g_prod, g_m, g_mpre, g_A, g_h, g_Yt, g_R, g_Bt, g_Y, g_B, g_r, g_rt, g_cut;
  std::vector<Buffer> density;  // [n_local] per Density layer: 1 + this is the message's divisor
  Buffer g_u;                   // the Density layers' linear-output adjoint
  Buffer g_sc, g_contribution;  // the self-connection's adjoint; a contribution to a summed adjoint
  Buffer g_v, g_grad;           // [E][3]: dE/dv through the harmonics, and dE/dv
  T energy_seed = T(1);         // d(node energy)/d(readout and ZBL energies): the scale
  std::vector<mace::Slot> adjoints_started;  // summed adjoints with a first contribution, this pass

  Impl(const io::PotentialFile& file, const MaceOptions& options)
      : spec(mace::load_mace_spec(file, options)),
        plan(mace::stage_list(spec)),
        radial_basis(spec.radial_basis),
        harmonics(spec.max_ell),
        sh_width(sh_dim(spec.max_ell)),
        tabulated(options.radial_spacing != 0.0) {
    const int n_layers = spec.num_interactions;
    edge_chunk = options.edge_chunk;
    if (options.edge_chunk < 0) {
      throw InputError(spec.source + ": edge_chunk must be 0 (automatic) or a number of edges, got " +
                       std::to_string(options.edge_chunk));
    }
    if (!(options.radial_spacing >= 0.0) || !std::isfinite(options.radial_spacing) ||
        (options.radial_spacing > 0.0 && options.radial_spacing < 1e-5)) {
      throw InputError(spec.source + ": the radial table spacing must be 0 (exact radial MLP) or at least 1e-5 A, got " +
                       std::to_string(options.radial_spacing));
    }
    {
      const int C = spec.embedding_irreps.dim();
      std::vector<double> w(spec.w_embedding.size());
      for (std::size_t k = 0; k < w.size(); ++k) {
        // Rounded to T from the double value, as the embedding always was; plus the structure's
        // charge / spin embedding where the model has one (zeros otherwise).
        const double shift = spec.embedding_shift.empty() ? 0.0 : spec.embedding_shift[k % C];
        w[k] = static_cast<double>(static_cast<T>(spec.embedding_path_weight * spec.w_embedding[k] + shift));
      }
      W_embedding = weights(w, spec.num_elements);
      if (static_cast<int>(W_embedding.extent(1)) != C) {
        throw InputError(spec.source + ": node_embedding has " + std::to_string(spec.w_embedding.size()) +
                         " weights, expected " + std::to_string(spec.num_elements) + " x " +
                         std::to_string(C));
      }
    }
    e0 = kernels::impl::upload<ExecSpace>(spec.e0, "fastmlip::mace::e0");
    if (spec.zbl) {
      const mace::ZblSpec& Z = *spec.zbl;
      for (int k = 0; k < 4; ++k) {
        zbl_constants.c[k] = Z.c[k];
        zbl_constants.screening[k] = Z.screening[k];
      }
      zbl_constants.bohr_radius = Z.bohr_radius;
      zbl_constants.coulomb = Z.coulomb;
      zbl_constants.a_exp = Z.a_exp;
      zbl_constants.a_prefactor = Z.a_prefactor;
      zbl_constants.p = Z.p;
      Kokkos::View<double*, ExecSpace> z("fastmlip::mace::zbl_z", spec.num_elements);
      Kokkos::View<double*, ExecSpace> rcov("fastmlip::mace::zbl_rcov", spec.num_elements);
      auto h_z = Kokkos::create_mirror_view(z);
      auto h_rcov = Kokkos::create_mirror_view(rcov);
      for (int s = 0; s < spec.num_elements; ++s) {
        const int Zs = spec.species[s].z;
        if (Zs < 0 || Zs >= static_cast<int>(Z.covalent_radii.size())) {
          throw InputError(spec.source + ": ZBL has no covalent radius for species " +
                           spec.species[s].symbol +
                           " (Z = " + std::to_string(Zs) + ")");
        }
        h_z(s) = Zs;
        h_rcov(s) = Z.covalent_radii[Zs];
      }
      Kokkos::deep_copy(z, h_z);
      Kokkos::deep_copy(rcov, h_rcov);
      zbl_z = z;
      zbl_rcov = rcov;
    }
    std::vector<TablePair> table_pairs;
    if (tabulated) {
      table_pairs = pair_tables(options);
    }
    if (spec.distance_transform.active()) {
      transform_rcov = kernels::impl::upload<ExecSpace>(spec.distance_transform.covalent_radii,
                                                        "fastmlip::mace::transform_rcov");
    }
    layers.reserve(n_layers);
    for (int t = 0; t < n_layers; ++t) {
      try {
        layers.emplace_back(spec, t, options, table_pairs, tables);
      } catch (const UnsupportedError& e) {
        throw UnsupportedError(spec.source + ": layer " + std::to_string(t) + ": " + e.what());
      } catch (const InputError& e) {
        // A kernel's own limits (l, widths, accumulator sizes): say which file and layer.
        throw UnsupportedError(spec.source + ": layer " + std::to_string(t) + ": " + e.what());
      }
    }
    x.resize(n_layers + 1);
    l.resize(n_layers);
    u.resize(n_layers);
    density.resize(n_layers);
    h.resize(n_layers);
    m.resize(n_layers);
    z.resize(n_layers);
    zmid.resize(n_layers);
    gx.resize(n_layers + 1);
  }

  int max_exchange_width() const { return plan.max_exchange_width(spec); }

  /// The pairs of elements each layer tabulates: one table, {0, 0, 0}, where R is a function of r
  /// alone; with a distance transform one per unordered pair of options.table_species (the
  /// transform is symmetric in the two elements); with non-linear blocks, whose MLPs read the
  /// sender's and the receiver's embeddings apart, one per ordered pair. Fills pair_table.
  std::vector<TablePair> pair_tables(const MaceOptions& options) {
    bool ordered = false;
    for (const auto& I : spec.interactions) {
      ordered = ordered || I.nonlinear.has_value();
    }
    if (!spec.distance_transform.active() && !ordered) {
      return {TablePair{}};
    }
    std::vector<int> use;
    if (options.table_species.empty()) {
      for (int e = 0; e < spec.num_elements; ++e) {
        use.push_back(e);
      }
    }
    for (const auto& symbol : options.table_species) {
      int found = -1;
      for (int e = 0; e < spec.num_elements; ++e) {
        found = spec.species[e].symbol == symbol ? e : found;
      }
      if (found < 0) {
        std::string known;
        for (const auto& sp : spec.species) {
          known += (known.empty() ? "" : " ") + sp.symbol;
        }
        throw InputError(spec.source + ": radial tables asked for element '" + symbol +
                         "', which the model does not have; it has: " + known);
      }
      if (std::find(use.begin(), use.end(), found) == use.end()) {
        use.push_back(found);
      }
    }
    const auto& rcov = spec.distance_transform.covalent_radii;
    Kokkos::View<int**, Kokkos::LayoutRight, Kokkos::HostSpace> host("fastmlip::mace::pair_table_host",
                                                                     spec.num_elements, spec.num_elements);
    Kokkos::deep_copy(host, -1);
    std::vector<TablePair> pairs;
    for (std::size_t a = 0; a < use.size(); ++a) {
      table_symbols.push_back(spec.species[use[a]].symbol);
      for (std::size_t b = ordered ? 0 : a; b < use.size(); ++b) {
        const int i = use[a], j = use[b];  // receiver, sender
        host(i, j) = static_cast<int>(pairs.size());
        if (!ordered) {
          host(j, i) = host(i, j);
        }
        pairs.push_back({spec.distance_transform.active() ? rcov[i] + rcov[j] : 0.0, i, j});
      }
    }
    Kokkos::View<int**, Kokkos::LayoutRight, ExecSpace> dev("fastmlip::mace::pair_table", spec.num_elements,
                                                            spec.num_elements);
    Kokkos::deep_copy(dev, host);
    pair_table = dev;
    return pairs;
  }

  /// Each edge's table where tables are per pair of elements, bound to every layer's tables; refuses an
  /// edge between elements that have no table.
  void bind_edge_tables() {
    if (pair_table.extent(0) == 0) {
      return;
    }
    edge_table = Kokkos::View<int*, ExecSpace>(edge_table_storage.get(num_edges, 1).data(), num_edges);
    Glue f = zbl_glue();
    f.m_pair_table = pair_table;
    f.m_edge_table = edge_table;
    int first_missing = INT_MAX;
    Kokkos::parallel_reduce("fastmlip::mace::edge_table",
                            Kokkos::RangePolicy<ExecSpace, typename Glue::TagEdgeTable>(0, num_edges), f,
                            Kokkos::Min<int>(first_missing));
    if (first_missing != INT_MAX) {
      int ends[2];
      Kokkos::deep_copy(ends[0], Kokkos::subview(graph_index.receiver, first_missing));
      Kokkos::deep_copy(ends[1], Kokkos::subview(graph_index.sender, first_missing));
      std::string pair, built;
      for (int k = 0; k < 2; ++k) {
        int sp;
        Kokkos::deep_copy(sp, Kokkos::subview(species_all, ends[k]));
        pair += (k ? " and " : "") + spec.species[sp].symbol;
      }
      for (const auto& symbol : table_symbols) {
        built += (built.empty() ? "" : " ") + symbol;
      }
      throw InputError("MaceModel::compute: edge " + std::to_string(first_missing) + " joins " + pair +
                       ", but the radial tables (" + spec.source + ") were built for the elements " + built +
                       " only; list every element the structure has (pair_coeff's elements, "
                       "MaceOptions::table_species)");
    }
    for (auto& Ly : layers) {
      Ly.table->set_edge_tables(edge_table);
      if (Ly.density_table) {
        Ly.density_table->set_edge_tables(edge_table);
      }
    }
  }

  // ---- input checks ------------------------------------------------------------------------

  using Graph = typename MaceModel<ExecSpace, T>::Graph;

  void validate(const Graph& g, const FeatureExchange<T>* exchange) const {
    const std::string fn = "MaceModel::compute";
    // With radial tables, edges shorter than the tables' start are refused in the same pass.
    const graph::LengthFloor table_start{
        MaceOptions::kRadialTableStart,
        "below the radial tables' start (" + std::to_string(MaceOptions::kRadialTableStart) +
            " A); evaluate the radial MLP exactly (radial_spacing 0) for such close atoms"};
    graph::check_graph(g, spec.num_elements, fn,
                       "the model (" + spec.source + ") has species 0.." + std::to_string(spec.num_elements - 1),
                       tabulated ? &table_start : nullptr);
    if (exchange == nullptr && g.n_total != g.n_local && spec.num_interactions > 1) {
      throw InputError(fn + ": the graph has " + std::to_string(g.n_total - g.n_local) +
                       " ghost nodes but no FeatureExchange; ghosts need their owners' features after each layer");
    }
  }

  // ---- where each stage's values live ------------------------------------------------------

  /// A slot's rows: every node for x^0 (species only) and h^t (ghost rows from their owners);
  /// the local nodes for the rest, A^t included (only local nodes receive messages).
  int rows(const mace::Slot& s) const {
    const bool all = s.value == mace::Value::Senders || (s.value == mace::Value::Features && s.layer == 0);
    return all ? n_total : n_local;
  }

  /// Where a slot's values and its adjoint live. The values the reverse pass reads again are
  /// kept per layer: x^t (the linears' reverse stages take it for its shape), h^t (the
  /// convolution's reverse) and m^t (the contraction's). The others, and the adjoints but x^t's,
  /// share one buffer per kind across the layers.
  struct Storage {
    Buffer& value;
    Buffer& adjoint;
  };
  Storage storage(const mace::Slot& s) {
    switch (s.value) {
      case mace::Value::Features:
        return {x.at(s.layer), gx.at(s.layer)};
      case mace::Value::Senders:
        return {h.at(s.layer), g_h};
      case mace::Value::ProductInput:
        return {m.at(s.layer), g_m};
      case mace::Value::Messages:
        return {b_A, g_A};
      case mace::Value::LinearOut:
        return {l.at(s.layer), g_mpre};
      case mace::Value::GateInput:
        return {u.at(s.layer), g_u_gate};
      case mace::Value::GateOutput:
        return {b_g, g_g};
      case mace::Value::SelfConnection:
        return {b_sc, g_sc};
    }
    throw std::logic_error("MaceModel: unknown slot");
  }
  Matrix value(const mace::Slot& s) { return storage(s).value.get(rows(s), mace::slot_width(spec, s)); }
  Matrix adjoint(const mace::Slot& s) { return storage(s).adjoint.get(rows(s), mace::slot_width(spec, s)); }
  /// The first n_local rows of a slot's values or adjoint.
  Matrix local(const Matrix& a) const { return Matrix(a.data(), n_local, a.extent(1)); }

  /// Where a reverse stage writes its d(energy)/d(in): the adjoint itself when `in` has one
  /// reader, else scratch that accumulate() sums into it (the first contribution is copied, the
  /// others added, in reverse stage order).
  Matrix adjoint_target(const mace::Slot& s) {
    if (plan.consumers(s) == 1) {
      return adjoint(s);
    }
    return g_contribution.get(rows(s), mace::slot_width(spec, s));
  }
  void accumulate(const mace::Slot& s, const Matrix& contribution) {
    if (plan.consumers(s) == 1) {
      return;  // written in place
    }
    Matrix a = adjoint(s);
    if (std::find(adjoints_started.begin(), adjoints_started.end(), s) == adjoints_started.end()) {
      adjoints_started.push_back(s);
      Kokkos::deep_copy(ExecSpace(), a, contribution);
    } else {
      add("fastmlip::mace::adjoint_sum", a.data(), contribution.data(), a.size());
    }
  }

  /// The caller's communication (LAMMPS' comm) on node rows: host memory, or this model's where
  /// the caller takes them there (exchange_node_rows);
  /// or, where the caller names every ghost's owner (a rank holding the whole periodic system),
  /// the same copies and sums on ExecSpace (image_exchange.hpp).
  void exchange_rows(FeatureExchange<T>& exchange, const Matrix& rows, bool forward) {
    if (!images_asked) {
      images.set(exchange.ghost_owners(), n_local, n_total);
      images_asked = true;
    }
    if (images.active()) {
      forward ? images.forward(rows) : images.reverse(rows);
      return;
    }
    exchange_node_rows(exchange, rows, n_local, forward, exchange_rows_host);
  }

  // ---- forward stages ------------------------------------------------------------------------

  /// mace-torch's apply_cutoff False: the basis B has no envelope, and f_p(r) multiplies each
  /// radial MLP output and Density term instead. Tables hold R(r) f_p(r) themselves.
  bool separate_cutoff() const { return !spec.radial_basis.apply_cutoff && !tabulated; }
  /// rows(e, :) *= f_p(r_e).
  void scale_by_cutoff(const Matrix& rows, const EdgeChunk& chunk) {
    Glue c;
    c.m_out = rows;
    c.m_fc = edge_rows(fc_edge, chunk);
    launch<typename Glue::TagScaleRows>("fastmlip::mace::cutoff_scale", static_cast<int>(rows.extent(0)), c);
  }

  /// x^0 = node_embedding(one-hot z): o3.Linear(E x 0e -> C x 0e), i.e. a weight row per
  /// element times e3nn's path weight 1/sqrt(E). Depends on species only: every row.
  void compute_embedding(const mace::Stage& s) {
    Glue f;
    f.m_species = species_all;
    f.m_w_embedding = W_embedding;
    f.m_out = value(s.out);
    launch<typename Glue::TagEmbedding>("fastmlip::mace::embedding", n_total, f);
  }

  /// Y = SH(v) (o3.SphericalHarmonics, normalize, component) and B = b(|v|) f_p(|v|/r_max), b
  /// the radial basis (Bessel, Gaussian or Chebyshev), at a transformed distance with a transform.
  void compute_edge_basis() {
    const int E = num_edges;
    r = Vector(b_r.get(E, 1).data(), E);
    Glue f;
    f.m_vectors = vectors;
    f.m_r = r;
    launch<typename Glue::TagEdgeLength>("fastmlip::mace::edge_length", E, f);
    Y = b_Y.get(E, sh_width);
    harmonics.compute(vectors, Y);
    if (tabulated) {
      return bind_edge_tables();
    }
    if (separate_cutoff()) {
      fc_edge = Vector(b_fc.get(E, 1).data(), E);
      dfc_edge = Vector(b_dfc.get(E, 1).data(), E);
      Glue c;
      c.m_r = r;
      c.m_fc = fc_edge;
      c.m_dfc = dfc_edge;
      c.m_inv_rmax = 1.0 / spec.radial_basis.r_max;
      c.m_p = spec.radial_basis.envelope_p;
      launch<typename Glue::TagCutoff>("fastmlip::mace::cutoff", E, c);
    }
    B = b_B.get(E, radial_basis.num_basis());
    if (!spec.distance_transform.active()) {
      radial_basis.compute(r, B);
      return;
    }
    // B = b(x) f_p(r / r_max), x = T(r; r0 of the edge's two elements).
    x_edge = Vector(b_x.get(E, 1).data(), E);
    dxdr_edge = Vector(b_dxdr.get(E, 1).data(), E);
    Glue t = zbl_glue();
    t.m_transform_rcov = transform_rcov;
    t.m_transform = spec.distance_transform.constants();
    t.m_x = x_edge;
    t.m_dxdr = dxdr_edge;
    launch<typename Glue::TagTransform>("fastmlip::mace::distance_transform", E, t);
    radial_basis.compute_at(x_edge, r, B);
  }

  /// h^t = linear_up(x^t) on the rows x^t has (layers after the first: the local rows; the
  /// ghost rows come from their owners in the ExchangeSenders stage).
  void compute_linear_up(const mace::Stage& s) {
    Layer& Ly = layers[s.layer];
    const Matrix in = value(s.in), out = value(s.out);
    Ly.up.compute(Ly.W_up, Ints(), in, Matrix(out.data(), in.extent(0), out.extent(1)));
  }

  /// A^t = sum over each node's edges of TP(h_j, Y, R(r)).
  void compute_convolution(const mace::Stage& s) {
    Layer& Ly = layers[s.layer];
    const Matrix ht = value(s.in);
    Matrix A = value(s.out);
    if (Ly.table) {
      // The TP evaluates R(r) from the table edge by edge: no [edges x weight_numel] array.
      Ly.tp.compute(graph_index, ht, Y, *Ly.table, r, A);
      return;
    }
    // R for one chunk of edges at a time, each consumed by the TP before the next; one chunk
    // of every edge runs the TP's whole-index entry point (its CUDA kernels, where it has them).
    const int wn = Ly.tp.descriptor().weight_numel;
    const auto& chunks = edge_chunks(Ly);
    const bool whole = chunks.size() == 1;
    if (!whole) {
      Ly.tp.begin_chunks(ht);
    }
    for (const EdgeChunk& c : chunks) {
      Matrix R = b_R.get(c.end - c.begin, wn);
      radial_mlp(Ly, R, c);
      if (separate_cutoff()) {
        scale_by_cutoff(R, c);
      }
      if (whole) {
        Ly.tp.compute(graph_index, ht, Y, R, A);
      } else {
        Ly.tp.compute_chunk(
            kernels::EdgeIndex<ExecSpace>::chunk(graph_index, c.begin, c.end, chunk_index_storage), c.first,
            c.last, edge_rows(Y, c), R, A);
      }
    }
  }

  /// Layer Ly's exact radial MLP and TP in chunks of edges (MaceOptions::edge_chunk): one chunk
  /// of every edge where they fit in one.
  const std::vector<EdgeChunk>& edge_chunks(const Layer& Ly) {
    const int wn = Ly.tp.descriptor().weight_numel;
    const std::size_t per_chunk =
        edge_chunk > 0 ? static_cast<std::size_t>(edge_chunk)
                       : std::max<std::size_t>(1, edge_chunk_bytes() / (sizeof(T) * std::max(1, wn)));
    edge_chunks_of_layer.clear();
    if (static_cast<std::size_t>(num_edges) <= per_chunk) {
      edge_chunks_of_layer.push_back({0, n_local, 0, num_edges});
      return edge_chunks_of_layer;
    }
    if (!center_start_host_ready) {
      center_start_host.resize(n_local + 1);
      Kokkos::deep_copy(Kokkos::View<int*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                            center_start_host.data(), center_start_host.size()),
                        center_start);
      center_start_host_ready = true;
    }
    // Whole receivers, as many as fit (at least one, however many edges it has).
    int first = 0;
    while (first < n_local) {
      int last = first + 1;
      while (last < n_local &&
             static_cast<std::size_t>(center_start_host[last + 1] - center_start_host[first]) <= per_chunk) {
        ++last;
      }
      edge_chunks_of_layer.push_back({first, last, center_start_host[first], center_start_host[last]});
      first = last;
    }
    return edge_chunks_of_layer;
  }
  /// Radial weights per chunk by default: MaceOptions::kEdgeChunkBytes on the host; on a GPU a
  /// sixteenth of its memory, as the chunks must also be large enough to fill it (a chunk's TP
  /// runs over its receivers, a few thousand warps for tens of thousands of edges).
  static std::size_t edge_chunk_bytes() {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) {
      return std::max<std::size_t>(MaceOptions::kEdgeChunkBytes,
                                   ExecSpace().cuda_device_prop().totalGlobalMem / 16);
    }
#endif
    return MaceOptions::kEdgeChunkBytes;
  }
  /// Rows [c.begin, c.end) of an edge array.
  static Matrix edge_rows(const Matrix& m, const EdgeChunk& c) {
    const std::size_t cols = m.extent(1);
    return Matrix(m.data() + static_cast<std::size_t>(c.begin) * cols, c.end - c.begin, cols);
  }
  static Vector edge_rows(const Vector& v, const EdgeChunk& c) {
    return Vector(v.data() + c.begin, c.end - c.begin);
  }

  /// The first-layer species terms of a non-linear block's MLP, per edge of chunk c, into b_pre.
  Matrix pair_terms(const Matrix& source, const Matrix& target, const EdgeChunk& c) {
    Glue f = zbl_glue();
    const Kokkos::pair<int, int> rows(c.begin, c.end);
    f.m_center = Kokkos::subview(graph_index.receiver, rows);
    f.m_neighbor = Kokkos::subview(graph_index.sender, rows);
    f.m_out = b_pre.get(c.end - c.begin, static_cast<int>(source.extent(1)));
    f.m_pair_source = source;
    f.m_pair_target = target;
    launch<typename Glue::TagPairTerm>("fastmlip::mace::pair_terms", c.end - c.begin, f);
    return f.m_out;
  }
  Matrix pair_terms(const Matrix& source, const Matrix& target) {
    return pair_terms(source, target, EdgeChunk{0, n_local, 0, num_edges});
  }
  /// R = the layer's radial MLP of B (the non-linear block's: of B and the edge's species), for
  /// the edges of chunk c.
  void radial_mlp(Layer& Ly, const Matrix& R, const EdgeChunk& c) {
    const Matrix Bc = edge_rows(B, c);
    if (Ly.nl_radial) {
      Ly.nl_radial->compute(Bc, pair_terms(Ly.P_radial_source, Ly.P_radial_target, c), R, nl_workspace);
    } else {
      Ly.mlp->compute(Bc, R);
    }
  }
  /// A Density block's tabulated edge terms tanh(d_e^2), into b_dedge.
  Vector density_terms(Layer& Ly) {
    Matrix d = b_dedge.get(num_edges, 1);
    Ly.density_table->compute(r, d);
    return Vector(d.data(), num_edges);
  }
  /// The non-linear block's edge densities d_e (before tanh(d^2)), into b_dedge.
  Vector edge_densities(Layer& Ly) {
    Matrix d = b_dedge.get(num_edges, 1);
    Ly.nl_density->compute(B, pair_terms(Ly.P_density_source, Ly.P_density_target), d, nl_workspace);
    return Vector(d.data(), num_edges);
  }

  /// x^{t+1} = products.t.linear(SC_t(m; z)).
  void compute_product(const mace::Stage& s) {
    Layer& Ly = layers[s.layer];
    Matrix out = value(s.out);
    Matrix prod = b_prod.get(n_local, out.extent(1));
    Ly.sc.compute(product_species(Ly), value(s.in), prod);
    Ly.prod.compute(Ly.W_prod, Ints(), prod, out);
  }

  /// The species skip_tp reads its weights by: none for the non-linear block's plain Linear.
  Ints skip_species(const Layer& Ly) const { return Ly.I->skip.num_sets > 1 ? species_local : Ints(); }
  /// The non-linear block's gate: its input u (s.in), its output (s.out), its column maps.
  Glue equivariant_gate_glue(const Layer& Ly, const mace::Stage& s) {
    Glue f;
    f.m_z = value(s.in);
    f.m_out = value(s.out);
    f.m_gate_source = Ly.gate_source;
    f.m_gate_gate = Ly.gate_gate;
    f.m_cst = static_cast<T>(Ly.I->nonlinear->scalar_cst);
    f.m_cst2 = static_cast<T>(Ly.I->nonlinear->gate_cst);
    return f;
  }

  /// The species the symmetric contraction of layer Ly reads its weights by.
  Ints product_species(const Layer& Ly) const { return Ly.P->agnostic ? species_agnostic : species_local; }

  /// The readout gate's functor: pre-activations z, the rows it writes (or scales, in reverse).
  Glue gate_glue(const Layer& Ly, Matrix z, Matrix out) const {
    Glue f;
    f.m_z = z;
    f.m_out = out;
    f.m_head = spec.head;
    f.m_per_head = Ly.R->hidden_per_head;
    f.m_cst = static_cast<T>(Ly.R->gate_cst);
    return f;
  }

  /// e^t_i = readout_t(x^{t+1}_i)[head]. The non-linear readout is linear_2(mask_head(cst *
  /// silu(linear_1(x)))): with heads, only the selected head's block of hidden units is kept.
  void compute_readout(const mace::Stage& s) {
    const int t = s.layer;
    Layer& Ly = layers[t];
    const int L = n_local, H = static_cast<int>(spec.heads.size()), head = spec.head;
    const Matrix xn = value(s.in);
    Matrix out = b_out.get(L, H);
    if (!Ly.R->nonlinear) {
      Ly.r1->compute(Ly.W_r1, Ints(), xn, out);
    } else {
      const int M = Ly.R->linear_1.irreps_out.dim();
      Matrix zt = z[t].get(L, M);
      Ly.r1->compute(Ly.W_r1, Ints(), xn, zt);
      Matrix a = b_act.get(L, M);
      launch<typename Glue::TagGate>("fastmlip::mace::readout_gate", L, gate_glue(Ly, zt, a));
      if (Ly.R->bias) {
        // NonLinearBiasReadoutBlock: a second gated layer, linear_mid + b_mid, then linear_2 + b_2.
        Matrix zm = zmid[t].get(L, M);
        Ly.rmid->compute(Ly.W_rmid, Ints(), a, zm);
        add_bias("fastmlip::mace::readout_mid_bias", zm, Ly.b_mid);
        Matrix a2 = b_act2.get(L, M);
        launch<typename Glue::TagGate>("fastmlip::mace::readout_gate_mid", L, gate_glue(Ly, zm, a2));
        Ly.r2->compute(Ly.W_r2, Ints(), a2, out);
        add_bias("fastmlip::mace::readout_out_bias", out, Ly.b_2);
      } else {
        Ly.r2->compute(Ly.W_r2, Ints(), a, out);
      }
    }
    Glue f;
    f.m_out = out;
    f.m_head = head;
    f.m_energy = inter_energy;
    launch<typename Glue::TagEnergy>("fastmlip::mace::readout_energy", L, f);
  }

  // ---- ZBL (mace-torch ZBLBasis) ---------------------------------------------------------

  /// A functor with the ZBL term's data and the graph (its CSR offsets, centres, neighbors).
  Glue zbl_glue() const {
    Glue f;
    f.m_species = species_all;
    f.m_center_start = center_start;
    f.m_center = graph_index.receiver;
    f.m_neighbor = graph_index.sender;
    f.m_r = r;
    f.m_vectors = vectors;
    f.m_has_zbl = spec.zbl.has_value();
    f.m_zbl = zbl_constants;
    f.m_species_z = zbl_z;
    f.m_species_rcov = zbl_rcov;
    return f;
  }

  /// The Density normalisation's functor for layer t: the basis, the weights, the densities.
  Glue density_glue(const Layer& Ly, int t) {
    Glue f;
    f.m_center_start = center_start;
    f.m_basis = B;
    if (!Ly.density_table) {  // tabulated: the edge terms come whole from the table
      f.m_w_density = Kokkos::View<const T*, ExecSpace>(Ly.W_density.data(), Ly.W_density.extent(0));
    }
    f.m_density = Vector(density[t].get(n_local, 1).data(), n_local);
    if (Ly.I->nonlinear) {
      f.m_alpha = static_cast<T>(Ly.I->nonlinear->alpha);
      f.m_beta = static_cast<T>(Ly.I->nonlinear->beta);
    }
    if (separate_cutoff()) {
      f.m_fc = fc_edge;
      f.m_gcut = gcut_edge;
    }
    return f;
  }

  void compute_zbl() {
    Glue f = zbl_glue();
    f.m_energy = pair_energy;
    launch<typename Glue::TagZblEnergy>("fastmlip::mace::zbl_energy", n_local, f);
  }

  void compute_node_energy() {
    Glue f;
    f.m_species = species_all;
    f.m_e0 = e0;
    f.m_inter = inter_energy;
    f.m_pair = pair_energy;
    f.m_scale_shift = spec.scale_shift;
    f.m_scale = spec.scale;
    f.m_shift = spec.shift;
    f.m_energy = node_energy;
    launch<typename Glue::TagNodeEnergy>("fastmlip::mace::node_energy", n_local, f);
  }

  void compute_stage(const mace::Stage& s, FeatureExchange<T>* exchange) {
    using K = mace::StageKind;
    switch (s.kind) {
      case K::EdgeBasis:
        return compute_edge_basis();
      case K::Embedding:
        return compute_embedding(s);
      case K::Zbl:
        return compute_zbl();
      case K::LinearUp:
        return compute_linear_up(s);
      case K::ExchangeSenders:
        if (exchange != nullptr) {
          exchange_rows(*exchange, value(s.in), true);
        }
        return;
      case K::Convolution:
        return compute_convolution(s);
      case K::InteractionLinear: {
        Layer& Ly = layers[s.layer];
        Ly.lin.compute(Ly.W_lin, Ints(), value(s.in), value(s.out));
        if (Ly.I->density || Ly.I->nonlinear) {
          Glue f = density_glue(Ly, s.layer);
          if (Ly.density_table) {
            f.m_edge_term = density_terms(Ly);
          } else if (Ly.I->nonlinear) {
            f.m_edge_value = edge_densities(Ly);
          }
          f.m_out = value(s.out);
          launch<typename Glue::TagDensity>("fastmlip::mace::density", n_local, f);
        }
        return;
      }
      case K::SkipTP: {
        const Layer& Ly = layers[s.layer];
        return Ly.skip.compute(Ly.W_skip, skip_species(Ly), local(value(s.in)), value(s.out));
      }
      case K::LinearResidual: {
        const Layer& Ly = layers[s.layer];
        return Ly.res->compute(Ly.W_res, Ints(), local(value(s.in)), value(s.out));
      }
      case K::Gate:
        return launch<typename Glue::TagEquivariantGate>("fastmlip::mace::equivariant_gate", n_local,
                                                         equivariant_gate_glue(layers[s.layer], s));
      case K::LinearOut: {
        const Layer& Ly = layers[s.layer];
        return Ly.lin2->compute(Ly.W_lin2, Ints(), value(s.in), value(s.out));
      }
      case K::Product:
        return compute_product(s);
      case K::AddResidual: {
        const Matrix out = value(s.out);
        return add("fastmlip::mace::residual", out.data(), value(s.in).data(), out.size());
      }
      case K::Readout:
        return compute_readout(s);
      case K::NodeEnergy:
        return compute_node_energy();
    }
  }

  // ---- reverse stages: d(seed * energy)/d(in) from d(seed * energy)/d(out) -----------------

  void reverse_readout(const mace::Stage& s) {
    const int t = s.layer;
    Layer& Ly = layers[t];
    const int L = n_local, H = static_cast<int>(spec.heads.size()), head = spec.head;
    const Matrix xn = value(s.in);
    Matrix go = g_out.get(L, H);
    {
      Glue f;
      f.m_out = go;
      f.m_head = head;
      f.m_seed = energy_seed;
      launch<typename Glue::TagSeed>("fastmlip::mace::readout_seed", L, f);
    }
    Matrix gx_in = adjoint_target(s.in);
    if (!Ly.R->nonlinear) {
      Ly.r1->reverse(Ly.W_r1, Ints(), xn, go, gx_in);
    } else {
      const int M = Ly.R->linear_1.irreps_out.dim();
      const Matrix zt = z[t].get(L, M);
      Matrix ga = g_act.get(L, M);
      Ly.r2->reverse(Ly.W_r2, Ints(), b_act.get(L, M), go, ga);
      if (Ly.R->bias) {
        // Through the second gated layer: its gate at zmid, then linear_mid (biases add nothing).
        const Matrix zm = zmid[t].get(L, M);
        launch<typename Glue::TagGateReverse>("fastmlip::mace::readout_gate_mid_reverse", L,
                                              gate_glue(Ly, zm, ga));
        Matrix ga1 = g_act2.get(L, M);
        Ly.rmid->reverse(Ly.W_rmid, Ints(), b_act.get(L, M), ga, ga1);
        ga = ga1;
      }
      launch<typename Glue::TagGateReverse>("fastmlip::mace::readout_gate_reverse", L, gate_glue(Ly, zt, ga));
      Ly.r1->reverse(Ly.W_r1, Ints(), xn, ga, gx_in);
    }
    accumulate(s.in, gx_in);
  }

  void reverse_product(const mace::Stage& s) {
    Layer& Ly = layers[s.layer];
    const Matrix g = adjoint(s.out);
    Matrix gs = g_prod.get(n_local, g.extent(1));
    Ly.prod.reverse(Ly.W_prod, Ints(), b_prod.get(n_local, g.extent(1)), g, gs);
    Matrix gm = adjoint_target(s.in);
    Ly.sc.reverse(product_species(Ly), value(s.in), gs, gm);
    accumulate(s.in, gm);
  }

  /// From dE/dA to dE/dh^t (every row; the ghosts' go to their owners in ExchangeSenders'
  /// reverse) and the edge adjoints, accumulated over the layers into g_Y and g_B (or g_r).
  void reverse_convolution(const mace::Stage& s) {
    Layer& Ly = layers[s.layer];
    const int E = num_edges;
    const int wn = Ly.tp.descriptor().weight_numel;
    const Matrix gA = adjoint(s.out);
    Matrix gh = adjoint_target(s.in), gYt = g_Yt.get(E, sh_width);
    if (Ly.table) {
      // dE/dr straight from the TP's edge kernel, contracted with dR/dr there.
      Vector grt(g_rt.get(E, 1).data(), E), gr(g_r.get(E, 1).data(), E);
      Ly.tp.reverse(graph_index, value(s.in), Y, *Ly.table, r, gA, gh, gYt, grt);
      add("fastmlip::mace::radial_adjoint", gr.data(), grt.data(), static_cast<std::size_t>(E));
    } else {
      // The radial MLP output is recomputed rather than kept per layer: it is the largest
      // activation (edges x weight_numel, ~1300 values per edge at MACE-MP shapes), and it
      // exists for one chunk of edges at a time (edge_chunks).
      const auto& chunks = edge_chunks(Ly);
      const bool whole = chunks.size() == 1;
      Matrix gBt = g_Bt.get(E, radial_basis.num_basis()), gB = g_B.get(E, radial_basis.num_basis());
      if (!whole) {
        Ly.tp.begin_reverse_chunks(value(s.in), gA);
      }
      for (const EdgeChunk& c : chunks) {
        const int Ec = c.end - c.begin;
        Matrix R = b_R.get(Ec, wn), gR = g_R.get(Ec, wn);
        radial_mlp(Ly, R, c);
        // The TP's weights: R, or R f_p(r), with R itself kept for dE/d f_p = gR . R.
        Matrix Rs = R;
        if (separate_cutoff()) {
          Rs = b_Rs.get(Ec, wn);
          Kokkos::deep_copy(ExecSpace(), Rs, R);
          scale_by_cutoff(Rs, c);
        }
        if (whole) {
          Ly.tp.reverse(graph_index, value(s.in), Y, Rs, gA, gh, gYt, gR);
        } else {
          Ly.tp.reverse_chunk(
              kernels::EdgeIndex<ExecSpace>::chunk(graph_index, c.begin, c.end, chunk_index_storage),
              edge_rows(Y, c), Rs, edge_rows(gYt, c), gR);
        }
        if (separate_cutoff()) {
          Glue f;
          f.m_out = gR;
          f.m_z = R;
          f.m_fc = edge_rows(fc_edge, c);
          f.m_gcut = edge_rows(gcut_edge, c);
          launch<typename Glue::TagScaleRowsReverse>("fastmlip::mace::cutoff_reverse", Ec, f);
        }
        if (Ly.nl_radial) {
          Ly.nl_radial->reverse(gR, edge_rows(gBt, c), nl_workspace);  // through radial_mlp()'s activations
        } else {
          Ly.mlp->reverse(edge_rows(B, c), gR, edge_rows(gBt, c));
        }
      }
      if (!whole) {
        Ly.tp.end_reverse_chunks(gh);
      }
      add("fastmlip::mace::basis_adjoint", gB.data(), gBt.data(),
          static_cast<std::size_t>(E) * radial_basis.num_basis());
    }
    add("fastmlip::mace::harmonics_adjoint", g_Y.get(E, sh_width).data(), gYt.data(),
        static_cast<std::size_t>(E) * sh_width);
    accumulate(s.in, gh);
  }

  /// dE/dv from the accumulated edge adjoints: harmonics, radial basis and ZBL (whose edge
  /// gradient is formed here, in the same pass over the edges, rather than in a Zbl reverse).
  void reverse_edge_basis() {
    const int E = num_edges;
    Kokkos::View<T* [3], Kokkos::LayoutRight, ExecSpace> gv(g_v.get(E, 3).data(), E);
    harmonics.reverse(vectors, g_Y.get(E, sh_width), gv);
    // With tables, the layers have accumulated dE/dr into g_r already.
    Vector gr(g_r.get(E, 1).data(), E);
    if (!tabulated && spec.distance_transform.active()) {
      radial_basis.reverse_at(x_edge, dxdr_edge, r, g_B.get(E, radial_basis.num_basis()), gr);
    } else if (!tabulated) {
      radial_basis.reverse(r, g_B.get(E, radial_basis.num_basis()), gr);
    }
    Glue f = zbl_glue();
    if (separate_cutoff()) {
      f.m_gcut = gcut_edge;
      f.m_dfc = dfc_edge;
    }
    f.m_pair_seed = static_cast<double>(energy_seed);
    f.m_gr = gr;
    f.m_gv = gv;
    f.m_grad = Kokkos::View<T* [3], Kokkos::LayoutRight, ExecSpace>(g_grad.get(E, 3).data(), E);
    launch<typename Glue::TagEdgeGradient>("fastmlip::mace::edge_gradient", E, f);
    edge_gradient = f.m_grad;
  }

  void reverse_stage(const mace::Stage& s, FeatureExchange<T>* exchange) {
    using K = mace::StageKind;
    const bool want_in = mace::reads_slot(s.kind) && plan.needs_adjoint(s.in);
    switch (s.kind) {
      case K::NodeEnergy:
        // E_i = E0 + scale (ZBL_i + readouts_i) + shift: the readouts' and ZBL's seed.
        energy_seed = static_cast<T>(spec.scale_shift ? spec.scale : 1.0);
        return;
      case K::Readout:
        return reverse_readout(s);
      case K::AddResidual:
        if (want_in) {
          Matrix g = adjoint_target(s.in);
          Kokkos::deep_copy(ExecSpace(), g, adjoint(s.out));
          accumulate(s.in, g);
        }
        return;
      case K::Product:
        return reverse_product(s);
      case K::SkipTP:
        if (want_in) {
          const Layer& Ly = layers[s.layer];
          Matrix g = adjoint_target(s.in);
          Ly.skip.reverse(Ly.W_skip, skip_species(Ly), local(value(s.in)), adjoint(s.out), local(g));
          accumulate(s.in, g);
        }
        return;
      case K::LinearResidual:
        if (want_in) {
          // Into the local rows of dE/dh; its ghost rows get nothing from this stage.
          const Layer& Ly = layers[s.layer];
          Matrix g = adjoint_target(s.in);
          Ly.res->reverse(Ly.W_res, Ints(), local(value(s.in)), adjoint(s.out), local(g));
          Kokkos::deep_copy(
              ExecSpace(), Kokkos::subview(g, Kokkos::pair<int, int>(n_local, n_total), Kokkos::ALL()), T(0));
          accumulate(s.in, g);
        }
        return;
      case K::Gate: {
        Glue f = equivariant_gate_glue(layers[s.layer], s);
        f.m_gout = adjoint(s.out);
        f.m_gu = adjoint_target(s.in);
        launch<typename Glue::TagEquivariantGateReverse>("fastmlip::mace::equivariant_gate_reverse", n_local,
                                                         f);
        return accumulate(s.in, f.m_gu);
      }
      case K::LinearOut: {
        const Layer& Ly = layers[s.layer];
        Matrix g = adjoint_target(s.in);
        Ly.lin2->reverse(Ly.W_lin2, Ints(), value(s.in), adjoint(s.out), g);
        return accumulate(s.in, g);
      }
      case K::InteractionLinear: {
        Layer& Ly = layers[s.layer];
        Matrix gA = adjoint_target(s.in);
        Matrix gout = adjoint(s.out);
        if (Ly.I->density || Ly.I->nonlinear) {
          // Through out = u / D, D = 1 + density (alpha + beta density): dE/du, and dE/dB of the
          // density's edges into g_B (the non-linear block's: dE/dd_e, then through its MLP).
          Glue f = density_glue(Ly, s.layer);
          f.m_gout = gout;
          f.m_z = value(s.out);
          f.m_gu = g_u.get(n_local, static_cast<int>(gout.extent(1)));
          if (!tabulated) {
            f.m_gbasis = g_B.get(num_edges, radial_basis.num_basis());
          }
          if (Ly.I->nonlinear || Ly.density_table) {
            // recomputed: the MLP keeps its activations for reverse; the table is cheap
            if (Ly.density_table) {
              f.m_edge_term = density_terms(Ly);
            } else {
              f.m_edge_value = edge_densities(Ly);
            }
            f.m_gedge = Vector(g_dedge.get(num_edges, 1).data(), num_edges);
            Kokkos::deep_copy(ExecSpace(), f.m_gedge, T(0));  // edges of no local node stay 0
          }
          launch<typename Glue::TagDensityReverse>("fastmlip::mace::density_reverse", n_local, f);
          if (Ly.density_table) {
            // dE/dr of each edge through its tabulated term, into g_r as the TP's tables do.
            const int E = num_edges;
            Vector grt(g_rt.get(E, 1).data(), E), gr(g_r.get(E, 1).data(), E);
            Ly.density_table->reverse(r, Matrix(f.m_gedge.data(), E, 1), grt);
            add("fastmlip::mace::density_radial_adjoint", gr.data(), grt.data(), static_cast<std::size_t>(E));
          }
          if (Ly.I->nonlinear && !Ly.density_table) {
            const int nb = radial_basis.num_basis();
            Matrix gBt = g_dedge_basis.get(num_edges, nb);
            Ly.nl_density->reverse(Matrix(f.m_gedge.data(), num_edges, 1), gBt, nl_workspace);
            add("fastmlip::mace::density_basis_adjoint", g_B.get(num_edges, nb).data(), gBt.data(),
                static_cast<std::size_t>(num_edges) * nb);
          }
          gout = f.m_gu;
        }
        Ly.lin.reverse(Ly.W_lin, Ints(), value(s.in), gout, gA);
        return accumulate(s.in, gA);
      }
      case K::Convolution:
        return reverse_convolution(s);
      case K::ExchangeSenders:
        if (exchange != nullptr) {
          exchange_rows(*exchange, adjoint(s.in), false);
        }
        return;
      case K::LinearUp:
        if (want_in) {
          const Layer& Ly = layers[s.layer];
          const Matrix in = value(s.in), gh = adjoint(s.out);
          Matrix g = adjoint_target(s.in);
          Ly.up.reverse(Ly.W_up, Ints(), in, Matrix(gh.data(), in.extent(0), gh.extent(1)), g);
          accumulate(s.in, g);
        }
        return;
      case K::Zbl:        // its edge gradient is formed in EdgeBasis' reverse
      case K::Embedding:  // x^0 depends on the species only
        return;
      case K::EdgeBasis:
        return reverse_edge_basis();
    }
  }

  // ---- driver ------------------------------------------------------------------------------

  /// Leaves the results in node_energy, energy and (with gradients) edge_gradient.
  void compute(const Graph& g, FeatureExchange<T>* exchange, bool gradients) {
    validate(g, exchange);
    n_local = g.n_local;
    n_total = g.n_total;
    num_edges = g.num_edges();
    species_all = g.species;
    species_local = Kokkos::subview(g.species, Kokkos::pair<int, int>(0, n_local));
    if (std::any_of(spec.products.begin(), spec.products.end(), [](const auto& P) { return P.agnostic; })) {
      species_agnostic = species_agnostic_storage.zeros(static_cast<std::size_t>(n_local));
    }
    graph_index = kernels::EdgeIndex<ExecSpace>::from_graph(g, graph_index_storage);
    if (inter_energy.extent(0) < static_cast<std::size_t>(n_local)) {
      inter_energy = Kokkos::View<double*, ExecSpace>("fastmlip::mace::inter_energy", n_local);
    }
    Kokkos::deep_copy(inter_energy, 0.0);
    if (pair_energy.extent(0) < static_cast<std::size_t>(n_local)) {
      pair_energy = Kokkos::View<double*, ExecSpace>("fastmlip::mace::pair_energy", n_local);
      node_energy = Kokkos::View<double*, ExecSpace>("fastmlip::mace::node_energy", n_local);
    }
    Kokkos::deep_copy(pair_energy, 0.0);
    center_start = g.center_start;
    center_start_host_ready = false;
    images_asked = false;
    vectors = g.vectors;

    for (const mace::Stage& s : plan.stages) {
      compute_stage(s, exchange);
    }
    // The total is summed in node order on the host, so that it has the same bits on every
    // backend and whichever result the caller asked for.
    node_energy_host.resize(n_local);
    Kokkos::deep_copy(Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                          node_energy_host.data(), n_local),
                      Kokkos::subview(node_energy, Kokkos::pair<int, int>(0, n_local)));
    energy = 0;
    for (int i = 0; i < n_local; ++i) {
      energy += node_energy_host[i];
    }
    edge_gradient = {};
    if (!gradients) {
      return;
    }
    // Every convolution adds into the edge adjoints.
    Kokkos::deep_copy(g_Y.get(num_edges, sh_width), T(0));
    if (tabulated) {
      Kokkos::deep_copy(g_r.get(num_edges, 1), T(0));
    } else {
      Kokkos::deep_copy(g_B.get(num_edges, radial_basis.num_basis()), T(0));
    }
    if (separate_cutoff()) {
      gcut_edge = Vector(g_cut.get(num_edges, 1).data(), num_edges);
      Kokkos::deep_copy(gcut_edge, T(0));
    }
    adjoints_started.clear();
    for (auto s = plan.stages.rbegin(); s != plan.stages.rend(); ++s) {
      reverse_stage(*s, exchange);
    }
  }
};

template <class ExecSpace, class T>
MaceModel<ExecSpace, T>::MaceModel(const io::PotentialFile& file, const MaceOptions& options)
    : m_impl(std::make_unique<Impl>(file, options)) {}
template <class ExecSpace, class T>
MaceModel<ExecSpace, T>::~MaceModel() = default;
template <class ExecSpace, class T>
MaceModel<ExecSpace, T>::MaceModel(MaceModel&&) noexcept = default;
template <class ExecSpace, class T>
MaceModel<ExecSpace, T>& MaceModel<ExecSpace, T>::operator=(MaceModel&&) noexcept = default;

template <class ExecSpace, class T>
double MaceModel<ExecSpace, T>::cutoff() const {
  return m_impl->spec.r_max;
}
template <class ExecSpace, class T>
int MaceModel<ExecSpace, T>::num_layers() const {
  return m_impl->spec.num_interactions;
}
template <class ExecSpace, class T>
const std::vector<io::PotentialSpecies>& MaceModel<ExecSpace, T>::species() const {
  return m_impl->spec.species;
}
template <class ExecSpace, class T>
int MaceModel<ExecSpace, T>::species_index(int atomic_number) const {
  return io::species_index(m_impl->spec.species, atomic_number);
}
template <class ExecSpace, class T>
int MaceModel<ExecSpace, T>::max_exchange_width() const {
  return m_impl->max_exchange_width();
}
template <class ExecSpace, class T>
const std::vector<MaceRadialTableInfo>& MaceModel<ExecSpace, T>::radial_tables() const {
  return m_impl->tables;
}
template <class ExecSpace, class T>
std::string MaceModel<ExecSpace, T>::kernel_backends() const {
  const auto& layers = m_impl->layers;
  const auto list = [&](auto backend_of) {
    std::string all;
    bool same = true;
    for (std::size_t t = 0; t < layers.size(); ++t) {
      same = same && backend_of(layers[t]) == backend_of(layers[0]);
      all += (t ? " " : "") + std::string("layer ") + std::to_string(t) + " " +
             kernels::backend_name(backend_of(layers[t]));
    }
    return layers.empty() ? std::string("none") : same ? kernels::backend_name(backend_of(layers[0])) : all;
  };
  return "channelwise TP: " + list([](const auto& L) { return L.tp.backend(); }) +
         ", symmetric contraction: " + list([](const auto& L) { return L.sc.backend(); }) + ", radial MLP: " +
         list([](const auto& L) { return L.mlp ? L.mlp->backend() : kernels::Backend::kokkos; });
}
template <class ExecSpace, class T>
void MaceModel<ExecSpace, T>::compute(const Graph& graph, FeatureExchange<T>* exchange, bool gradients,
                                      MaceDeviceResult<T, memory_space>& result) {
  translate_out_of_memory([&] { m_impl->compute(graph, exchange, gradients); },
                          [&] {
                            return MemoryContext{m_impl->spec.source,
                                                 ExecSpace::memory_space::name(),
                                                 std::is_same_v<T, float>,
                                                 graph.n_local,
                                                 graph.n_total,
                                                 graph.num_edges()};
                          });
  result.energy = m_impl->energy;
  result.node_energy = Kokkos::subview(m_impl->node_energy, Kokkos::pair<int, int>(0, graph.n_local));
  result.edge_gradient = m_impl->edge_gradient;
}
template <class ExecSpace, class T>
void MaceModel<ExecSpace, T>::compute(const Graph& graph, FeatureExchange<T>* exchange, bool gradients,
                                      MaceResult<T>& result) {
  MaceDeviceResult<T, memory_space> in_place;
  compute(graph, exchange, gradients, in_place);
  // The results leave the execution space here, into the caller's host vectors.
  result.energy = in_place.energy;
  result.node_energy = m_impl->node_energy_host;
  result.edge_gradient.resize(3 * in_place.edge_gradient.extent(0));
  Kokkos::deep_copy(
      Kokkos::View<T* [3], Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
          result.edge_gradient.data(), in_place.edge_gradient.extent(0)),
      in_place.edge_gradient);
}

template class MaceModel<Kokkos::DefaultHostExecutionSpace, double>;
template class MaceModel<Kokkos::DefaultHostExecutionSpace, float>;
#if defined(KOKKOS_ENABLE_CUDA)
// The same stages compiled by Kokkos for CUDA: the device path (issue 20).
template class MaceModel<Kokkos::Cuda, double>;
template class MaceModel<Kokkos::Cuda, float>;
#endif

}  // namespace fastmlip::models

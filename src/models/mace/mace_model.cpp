// SPDX-License-Identifier: MIT
// MACE (Batatia et al., NeurIPS 2022) as mace-torch 0.3.13 evaluates MACE / ScaleShiftMACE
// (modules/models.py, modules/blocks.py), composed from the fused kernels, with a hand-written
// reverse pass for dE/d(edge vectors). Per layer t (paper eqs. 8-11, 13):
//
//   h^t     = linear_up(x^t)                                          (every sender row)
//   A_i     = sum_{j->i} TP(h^t_j, Y(v_ji), MLP_t(B(|v_ji|)))         (eq. 8-9; fused scatter)
//   m_i     = linear(A_i) / avg_num_neighbors                          (mace-torch's division)
//   residual block:      sc_i = skip_tp(x^t_i, z_i),   m'_i = m_i
//   non-residual block:  m'_i = skip_tp(m_i, z_i)                      (MACE-MP's first layer)
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
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "kernels/channelwise_tp_kokkos.hpp"
#include "kernels/edge_index.hpp"
#include "kernels/linear_kokkos.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "kernels/radial_mlp_kokkos.hpp"
#include "kernels/radial_table_kokkos.hpp"
#include "kernels/symmetric_contraction_kokkos.hpp"
#include "math/spherical_harmonics.hpp"
#include "models/mace/mace_spec.hpp"

namespace fastmlip::models {

template <class ExecSpace, class T>
struct MaceModel<ExecSpace, T>::Impl {
  // The glue between kernels (validation, residual sums, the readout gate, exchange buffers)
  // runs on the host over the kernels' own views, so the views must be host-accessible.
  static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible,
                "MaceModel: ExecSpace's memory must be host-accessible (a host space, or CUDA UVM)");
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "MaceModel: T must be float or double");

  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using Ints = Kokkos::View<const int*, ExecSpace>;
  using Vector = Kokkos::View<T*, ExecSpace>;

  /// A grow-only buffer handing out matrices of exact shape (the kernels check extents):
  /// storage is reused across steps, so an MD run allocates only when the system grows.
  struct Buffer {
    Kokkos::View<T*, ExecSpace> store;
    Matrix get(int rows, int cols) {
      const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
      if (store.extent(0) < n) {
        store = Kokkos::View<T*, ExecSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::mace::buffer"),
                                            n + n / 4);
      }
      return Matrix(store.data(), rows, cols);
    }
  };

  static Matrix weights(const std::vector<double>& w, int rows) {
    const int cols = rows > 0 ? static_cast<int>(w.size()) / rows : 0;
    Matrix m("fastmlip::mace::weights", rows, cols);
    auto h = Kokkos::create_mirror_view(m);
    for (std::size_t i = 0; i < w.size(); ++i) {
      h.data()[i] = static_cast<T>(w[i]);
    }
    Kokkos::deep_copy(m, h);
    return m;
  }

  /// The kernels and weights of interaction, product and readout t.
  struct Layer {
    const mace::InteractionSpec* I;
    const mace::ProductSpec* P;
    const mace::ReadoutSpec* R;
    kernels::LinearKokkos<ExecSpace, T> up, lin, skip, prod, r1;
    std::optional<kernels::LinearKokkos<ExecSpace, T>> r2;
    kernels::ChannelwiseTPKokkos<ExecSpace, T> tp;
    kernels::RadialMLPKokkos<ExecSpace, T> mlp;
    /// With MaceOptions::radial_spacing > 0: R(r) tabulated, used instead of bessel + mlp.
    std::optional<kernels::RadialTableKokkos<ExecSpace, T>> table;
    kernels::SymmetricContractionKokkos<ExecSpace, T> sc;
    Matrix W_up, W_lin, W_skip, W_prod, W_r1, W_r2;
    bool add_sc;

    Layer(const mace::MaceSpec& s, int t, const MaceOptions& options, std::vector<MaceRadialTableInfo>& tables)
        : I(&s.interactions[t]),
          P(&s.products[t]),
          R(&s.readouts[t]),
          up(I->linear_up),
          lin(I->linear),
          skip(I->skip),
          prod(P->linear),
          r1(R->linear_1),
          tp(I->tp),
          mlp(I->mlp),
          sc(P->sc),
          W_up(weights(I->w_linear_up, 1)),
          W_lin(weights(I->w_linear, 1)),
          W_skip(weights(I->w_skip, s.num_elements)),
          W_prod(weights(P->w_linear, 1)),
          W_r1(weights(R->w_linear_1, 1)),
          add_sc(I->residual && P->use_sc) {
      sc.set_weights(P->W, s.num_elements);
      if (options.radial_spacing != 0.0) {
        const auto tab = kernels::RadialTable::build(s.bessel, I->mlp, options.radial_spacing,
                                                     MaceOptions::kRadialTableStart);
        table.emplace(tab);
        MaceRadialTableInfo info;
        info.layer = t;
        info.knots = tab.knots;
        info.width = tab.width;
        info.spacing = tab.h;
        info.max_error_value = tab.max_error_value;
        info.max_abs_value = tab.max_abs_value;
        info.max_error_derivative = tab.max_error_derivative;
        info.max_abs_derivative = tab.max_abs_derivative;
        info.bytes = tab.data.size() * sizeof(T);
        tables.push_back(info);
      }
      if (R->nonlinear) {
        r2.emplace(R->linear_2);
        W_r2 = weights(R->w_linear_2, 1);
      }
    }
  };

  mace::MaceSpec spec;
  std::vector<Layer> layers;
  kernels::RadialBesselKokkos<ExecSpace, T> bessel;
  int sh_width;
  std::vector<MaceRadialTableInfo> tables;
  bool tabulated;  // every layer's R(r) from its table (no Bessel basis, no MLP)

  // Per-call state, valid during compute().
  int n_local = 0, n_total = 0, num_edges = 0;
  Ints species_all, species_local;
  kernels::EdgeIndex<ExecSpace> graph_index;  // the graph's own views, plus the transpose by sender
  const T* vectors = nullptr;  // [E][3] the graph's edge vectors (its own view's data)
  Vector r;               // [E] lengths
  Matrix Y, B;            // [E][sh], [E][num_bessel]
  std::vector<double> inter_energy, pair_energy;  // [n_local]

  // Buffers. x[t]: input features of layer t (x[0]: all rows; x[t>0]: local rows); h[t]: the
  // sender features linear_up(x[t]) of every row; m[t]: the contraction's input; z[t]: the
  // non-linear readout's pre-activation. The rest are scratch reused by every layer.
  std::vector<Buffer> x, h, m, z, gx;
  Buffer b_Y, b_B, b_r, b_R, b_A, b_mpre, b_sc, b_prod, b_out, b_act;
  Buffer g_out, g_act, g_tmp, g_prod, g_m, g_mpre, g_A, g_h, g_Yt, g_R, g_Bt, g_Y, g_B, g_r, g_rt;

  Impl(const io::PotentialFile& file, const MaceOptions& options)
      : spec(mace::load_mace_spec(file, options)),
        bessel(spec.bessel),
        sh_width(sh_dim(spec.max_ell)),
        tabulated(options.radial_spacing != 0.0) {
    const int n_layers = spec.num_interactions;
    if (!(options.radial_spacing >= 0.0) || !std::isfinite(options.radial_spacing) ||
        (options.radial_spacing > 0.0 && options.radial_spacing < 1e-5)) {
      throw InputError(spec.source + ": the radial table spacing must be 0 (exact radial MLP) or at least 1e-5 A, got " +
                       std::to_string(options.radial_spacing));
    }
    layers.reserve(n_layers);
    for (int t = 0; t < n_layers; ++t) {
      try {
        layers.emplace_back(spec, t, options, tables);
      } catch (const UnsupportedError& e) {
        throw UnsupportedError(spec.source + ": layer " + std::to_string(t) + ": " + e.what());
      } catch (const InputError& e) {
        // A kernel's own limits (l, widths, accumulator sizes): say which file and layer.
        throw UnsupportedError(spec.source + ": layer " + std::to_string(t) + ": " + e.what());
      }
    }
    x.resize(n_layers + 1);
    h.resize(n_layers);
    m.resize(n_layers);
    z.resize(n_layers);
    gx.resize(n_layers + 1);
  }

  int max_exchange_width() const {
    int w = 0;
    for (int t = 1; t < spec.num_interactions; ++t) {
      w = std::max(w, spec.interactions[t].node_feats.dim());
    }
    return w;
  }

  // ---- input checks ------------------------------------------------------------------------

  void validate(const MaceGraph<T>& g, const FeatureExchange<T>* exchange) const {
    const std::string fn = "MaceModel::compute";
    graph::check_graph(g, spec.num_elements, fn,
                       "the model (" + spec.source + ") has species 0.." + std::to_string(spec.num_elements - 1));
    if (exchange == nullptr && g.n_total != g.n_local && spec.num_interactions > 1) {
      throw InputError(fn + ": the graph has " + std::to_string(g.n_total - g.n_local) +
                       " ghost nodes but no FeatureExchange; ghosts need their owners' features after each layer");
    }
    if (!tabulated) {
      return;
    }
    const double start_sq = MaceOptions::kRadialTableStart * MaceOptions::kRadialTableStart;
    for (int e = 0; e < g.num_edges(); ++e) {
      const double d2 = static_cast<double>(g.vectors(e, 0)) * g.vectors(e, 0) +
                        static_cast<double>(g.vectors(e, 1)) * g.vectors(e, 1) +
                        static_cast<double>(g.vectors(e, 2)) * g.vectors(e, 2);
      if (d2 < start_sq) {
        throw InputError(fn + ": edge " + std::to_string(e) + " joins nodes " + std::to_string(g.center(e)) +
                         " and " + std::to_string(g.neighbor(e)) + " at distance " + std::to_string(std::sqrt(d2)) +
                         " A, below the radial tables' start (" + std::to_string(MaceOptions::kRadialTableStart) +
                         " A); evaluate the radial MLP exactly (radial_spacing 0) for such close atoms");
      }
    }
  }

  // ---- forward stages ------------------------------------------------------------------------

  /// x^0 = node_embedding(one-hot z): o3.Linear(E x 0e -> C x 0e), i.e. a weight row per
  /// element times e3nn's path weight 1/sqrt(E). Depends on species only: every row.
  void compute_embedding() {
    const int C = spec.embedding_irreps.dim();
    Matrix x0 = x[0].get(n_total, C);
    for (int n = 0; n < n_total; ++n) {
      const int s = species_all(n);
      for (int c = 0; c < C; ++c) {
        x0(n, c) = static_cast<T>(spec.embedding_path_weight * spec.w_embedding[static_cast<std::size_t>(s) * C + c]);
      }
    }
  }

  /// Y = SH(v) (o3.SphericalHarmonics, normalize, component) and B = Bessel(|v|) f_p(|v|/r_max).
  void compute_edge_basis() {
    const int E = num_edges;
    r = Vector(b_r.get(E, 1).data(), E);
    for (int e = 0; e < E; ++e) {
      double d2 = 0;
      for (int k = 0; k < 3; ++k) {
        d2 += static_cast<double>(vectors[3 * e + k]) * vectors[3 * e + k];
      }
      r(e) = static_cast<T>(std::sqrt(d2));
    }
    Y = b_Y.get(E, sh_width);
    compute_spherical_harmonics(spec.max_ell, static_cast<std::size_t>(E), vectors, Y.data());
    if (!tabulated) {
      B = b_B.get(E, bessel.num_basis());
      bessel.compute(r, B);
    }
  }

  /// Interaction t up to the contraction's input m[t] (and the residual sc into b_sc).
  /// Layers after the first exchange the sender features h^t: their rows for local nodes
  /// are computed here, the ghost rows come from the owners.
  void compute_interaction(int t, FeatureExchange<T>* exchange) {
    Layer& Ly = layers[t];
    const int L = n_local, N = n_total;
    const int d_in = Ly.I->node_feats.dim();
    const int rows_in = t == 0 ? N : L;
    Matrix xt = x[t].get(rows_in, d_in);
    Matrix ht = h[t].get(N, d_in);
    Ly.up.compute(Ly.W_up, Ints(), xt, Matrix(ht.data(), rows_in, d_in));
    if (t > 0 && exchange != nullptr) {
      exchange->forward(ht.data(), d_in);
    }
    Matrix A = b_A.get(N, Ly.tp.descriptor().dim_out());
    if (Ly.table) {
      // The TP evaluates R(r) from the table edge by edge: no [edges x weight_numel] array.
      Ly.tp.compute(graph_index, ht, Y, *Ly.table, r, A);
    } else {
      Matrix R = b_R.get(num_edges, Ly.tp.descriptor().weight_numel);
      Ly.mlp.compute(B, R);
      Ly.tp.compute(graph_index, ht, Y, R, A);
    }
    const Matrix A_local(A.data(), L, A.extent(1));
    const int d_t = Ly.I->target.dim();
    Matrix mt = m[t].get(L, d_t);
    const Matrix x_local(xt.data(), L, d_in);
    if (Ly.I->residual) {
      Ly.lin.compute(Ly.W_lin, Ints(), A_local, mt);
      if (Ly.add_sc) {
        Ly.skip.compute(Ly.W_skip, species_local, x_local, b_sc.get(L, Ly.I->hidden.dim()));
      }
    } else {
      Matrix mpre = b_mpre.get(L, d_t);
      Ly.lin.compute(Ly.W_lin, Ints(), A_local, mpre);
      Ly.skip.compute(Ly.W_skip, species_local, mpre, mt);
    }
  }

  /// x^{t+1} = products.t.linear(SC_t(m'; z)) (+ sc).
  void compute_product(int t) {
    Layer& Ly = layers[t];
    const int L = n_local, d_h = Ly.I->hidden.dim();
    Matrix s = b_prod.get(L, d_h);
    Ly.sc.compute(species_local, m[t].get(L, Ly.I->target.dim()), s);
    Matrix xn = x[t + 1].get(L, d_h);
    Ly.prod.compute(Ly.W_prod, Ints(), s, xn);
    if (Ly.add_sc) {
      const Matrix sc = b_sc.get(L, d_h);
      for (std::size_t k = 0; k < static_cast<std::size_t>(L) * d_h; ++k) {
        xn.data()[k] += sc.data()[k];
      }
    }
  }

  static T silu(T v) { return v / (T(1) + std::exp(-v)); }
  static T silu_grad(T v) {
    const T s = T(1) / (T(1) + std::exp(-v));
    return s * (T(1) + v * (T(1) - s));
  }

  /// e^t_i = readout_t(x^{t+1}_i)[head]. The non-linear readout is linear_2(mask_head(cst *
  /// silu(linear_1(x)))): with heads, only the selected head's block of hidden units is kept.
  void compute_readout(int t) {
    Layer& Ly = layers[t];
    const int L = n_local, H = static_cast<int>(spec.heads.size()), head = spec.head;
    const Matrix xn = x[t + 1].get(L, Ly.I->hidden.dim());
    Matrix out = b_out.get(L, H);
    if (!Ly.R->nonlinear) {
      Ly.r1.compute(Ly.W_r1, Ints(), xn, out);
    } else {
      const int M = Ly.R->linear_1.irreps_out.dim(), P = Ly.R->hidden_per_head;
      Matrix zt = z[t].get(L, M);
      Ly.r1.compute(Ly.W_r1, Ints(), xn, zt);
      Matrix a = b_act.get(L, M);
      const T cst = static_cast<T>(Ly.R->gate_cst);
      for (int i = 0; i < L; ++i) {
        for (int k = 0; k < M; ++k) {
          a(i, k) = (k / P == head) ? cst * silu(zt(i, k)) : T(0);
        }
      }
      Ly.r2->compute(Ly.W_r2, Ints(), a, out);
    }
    for (int i = 0; i < L; ++i) {
      inter_energy[i] += static_cast<double>(out(i, head));
    }
  }

  // ---- ZBL (mace-torch ZBLBasis) ---------------------------------------------------------

  /// Half the ZBL energy of one directed edge (each pair appears twice, once per receiver)
  /// and its derivative with respect to the length.
  void zbl_edge(int zi, int zj, double d, double& energy, double& denergy) const {
    const mace::ZblSpec& Z = *spec.zbl;
    const double a = Z.a_prefactor * Z.bohr_radius / (std::pow(zj, Z.a_exp) + std::pow(zi, Z.a_exp));
    double phi = 0, dphi = 0;
    for (int k = 0; k < 4; ++k) {
      const double ex = Z.c[k] * std::exp(-Z.screening[k] * d / a);
      phi += ex;
      dphi -= Z.screening[k] / a * ex;
    }
    const double K = Z.coulomb * zi * zj;
    const double v = K / d * phi, dv = K * (dphi / d - phi / (d * d));
    const double rm = Z.covalent_radii[zi] + Z.covalent_radii[zj];
    if (!(d < rm)) {
      energy = denergy = 0;
      return;
    }
    const double x1 = d / rm, p = Z.p;
    const double xp = std::pow(x1, p - 1);
    const double env = 1 - (p + 1) * (p + 2) / 2 * xp * x1 + p * (p + 2) * xp * x1 * x1 -
                       p * (p + 1) / 2 * xp * x1 * x1 * x1;
    const double denv = p * (p + 1) * (p + 2) / 2 * xp * (-1 + 2 * x1 - x1 * x1) / rm;
    energy = 0.5 * v * env;
    denergy = 0.5 * (dv * env + v * denv);
  }

  void compute_zbl() {
    if (!spec.zbl) {
      return;
    }
    for (int e = 0; e < num_edges; ++e) {
      double en = 0, den = 0;
      const int i = graph_index.receiver(e), j = graph_index.sender(e);
      zbl_edge(spec.species[species_all(i)].z, spec.species[species_all(j)].z, static_cast<double>(r(e)), en, den);
      pair_energy[i] += en;
    }
  }

  // ---- reverse stages ------------------------------------------------------------------------

  /// gx[t+1] += d(seed * e^t)/dx^{t+1}.
  void reverse_readout(int t, T seed) {
    Layer& Ly = layers[t];
    const int L = n_local, H = static_cast<int>(spec.heads.size()), head = spec.head;
    const int d_h = Ly.I->hidden.dim();
    const Matrix xn = x[t + 1].get(L, d_h);
    Matrix go = g_out.get(L, H);
    for (int i = 0; i < L; ++i) {
      for (int k = 0; k < H; ++k) {
        go(i, k) = k == head ? seed : T(0);
      }
    }
    Matrix gxr = g_tmp.get(L, d_h);
    if (!Ly.R->nonlinear) {
      Ly.r1.reverse(Ly.W_r1, Ints(), xn, go, gxr);
    } else {
      const int M = Ly.R->linear_1.irreps_out.dim(), P = Ly.R->hidden_per_head;
      const Matrix zt = z[t].get(L, M);
      Matrix ga = g_act.get(L, M);
      Ly.r2->reverse(Ly.W_r2, Ints(), b_act.get(L, M), go, ga);
      const T cst = static_cast<T>(Ly.R->gate_cst);
      for (int i = 0; i < L; ++i) {
        for (int k = 0; k < M; ++k) {
          ga(i, k) = (k / P == head) ? ga(i, k) * cst * silu_grad(zt(i, k)) : T(0);
        }
      }
      Ly.r1.reverse(Ly.W_r1, Ints(), xn, ga, gxr);
    }
    Matrix g = gx[t + 1].get(L, d_h);
    for (std::size_t k = 0; k < static_cast<std::size_t>(L) * d_h; ++k) {
      g.data()[k] += gxr.data()[k];
    }
  }

  /// From gx[t+1] to the adjoint of the contraction's input, g_m.
  void reverse_product(int t) {
    Layer& Ly = layers[t];
    const int L = n_local, d_h = Ly.I->hidden.dim(), d_t = Ly.I->target.dim();
    const Matrix g = gx[t + 1].get(L, d_h);
    Matrix gs = g_prod.get(L, d_h);
    Ly.prod.reverse(Ly.W_prod, Ints(), b_prod.get(L, d_h), g, gs);
    Ly.sc.reverse(species_local, m[t].get(L, d_t), gs, g_m.get(L, d_t));
  }

  /// From g_m to the edge adjoints (accumulated into g_Y, g_B) and, for t > 0, gx[t].
  void reverse_interaction(int t, FeatureExchange<T>* exchange) {
    Layer& Ly = layers[t];
    const int L = n_local, N = n_total, E = num_edges;
    const int d_in = Ly.I->node_feats.dim(), d_t = Ly.I->target.dim(), d_h = Ly.I->hidden.dim();
    const int d_mid = Ly.tp.descriptor().dim_out(), wn = Ly.tp.descriptor().weight_numel;
    Matrix gm = g_m.get(L, d_t);
    if (!Ly.I->residual) {
      Matrix gpre = g_mpre.get(L, d_t);
      Ly.skip.reverse(Ly.W_skip, species_local, b_mpre.get(L, d_t), gm, gpre);
      gm = gpre;
    }
    Matrix gA = g_A.get(N, d_mid);
    Ly.lin.reverse(Ly.W_lin, Ints(), b_A.get(L, d_mid), gm, Matrix(gA.data(), L, d_mid));
    std::fill(gA.data() + static_cast<std::size_t>(L) * d_mid, gA.data() + static_cast<std::size_t>(N) * d_mid, T(0));
    Matrix gh = g_h.get(N, d_in), gYt = g_Yt.get(E, sh_width);
    if (Ly.table) {
      // dE/dr straight from the TP's edge kernel, contracted with dR/dr there.
      Vector grt(g_rt.get(E, 1).data(), E), gr(g_r.get(E, 1).data(), E);
      Ly.tp.reverse(graph_index, h[t].get(N, d_in), Y, *Ly.table, r, gA, gh, gYt, grt);
      for (int e = 0; e < E; ++e) {
        gr(e) += grt(e);
      }
    } else {
      // The radial MLP output is recomputed rather than kept per layer: it is the largest
      // activation (edges x weight_numel, ~1300 values per edge at MACE-MP shapes).
      Matrix R = b_R.get(E, wn), gR = g_R.get(E, wn);
      Ly.mlp.compute(B, R);
      Ly.tp.reverse(graph_index, h[t].get(N, d_in), Y, R, gA, gh, gYt, gR);
      Matrix gBt = g_Bt.get(E, bessel.num_basis()), gB = g_B.get(E, bessel.num_basis());
      Ly.mlp.reverse(B, gR, gBt);
      for (std::size_t k = 0; k < static_cast<std::size_t>(E) * bessel.num_basis(); ++k) {
        gB.data()[k] += gBt.data()[k];
      }
    }
    Matrix gY = g_Y.get(E, sh_width);
    for (std::size_t k = 0; k < static_cast<std::size_t>(E) * sh_width; ++k) {
      gY.data()[k] += gYt.data()[k];
    }
    if (t == 0) {
      return;  // x^0 depends on the species only
    }
    if (exchange != nullptr) {
      exchange->reverse(gh.data(), d_in);
    }
    Matrix g = gx[t].get(L, d_in);
    const Matrix xt = x[t].get(L, d_in);
    Ly.up.reverse(Ly.W_up, Ints(), xt, Matrix(gh.data(), L, d_in), g);
    if (Ly.add_sc) {
      Matrix gs = g_tmp.get(L, d_in);
      Ly.skip.reverse(Ly.W_skip, species_local, xt, gx[t + 1].get(L, d_h), gs);
      for (std::size_t k = 0; k < static_cast<std::size_t>(L) * d_in; ++k) {
        g.data()[k] += gs.data()[k];
      }
    }
  }

  /// dE/dv from the accumulated edge adjoints: harmonics, radial basis and ZBL.
  void reverse_edge_basis(T pair_seed, std::vector<T>& out) {
    const int E = num_edges;
    std::vector<T> gv(3 * static_cast<std::size_t>(E));
    reverse_spherical_harmonics(spec.max_ell, static_cast<std::size_t>(E), vectors, g_Y.get(E, sh_width).data(),
                                gv.data());
    // With tables, the layers have accumulated dE/dr into g_r already.
    Vector gr(g_r.get(E, 1).data(), E);
    if (!tabulated) {
      bessel.reverse(r, g_B.get(E, bessel.num_basis()), gr);
    }
    out.assign(3 * static_cast<std::size_t>(E), T(0));
    for (int e = 0; e < E; ++e) {
      double gl = static_cast<double>(gr(e));
      if (spec.zbl) {
        double en = 0, den = 0;
        zbl_edge(spec.species[species_all(graph_index.receiver(e))].z,
                 spec.species[species_all(graph_index.sender(e))].z, static_cast<double>(r(e)), en, den);
        gl += static_cast<double>(pair_seed) * den;
      }
      for (int k = 0; k < 3; ++k) {
        const double dv = static_cast<double>(gv[3 * e + k]) + gl * static_cast<double>(vectors[3 * e + k]) / r(e);
        out[3 * e + k] = static_cast<T>(dv);
      }
    }
  }

  // ---- driver ------------------------------------------------------------------------------

  void compute(const MaceGraph<T>& g, FeatureExchange<T>* exchange, bool gradients, MaceResult<T>& result) {
    validate(g, exchange);
    const int T_ = spec.num_interactions;
    n_local = g.n_local;
    n_total = g.n_total;
    num_edges = g.num_edges();
    species_all = g.species;
    species_local = Kokkos::subview(g.species, Kokkos::pair<int, int>(0, n_local));
    graph_index = kernels::EdgeIndex<ExecSpace>::from_graph(g);
    inter_energy.assign(n_local, 0.0);
    pair_energy.assign(n_local, 0.0);

    compute_embedding();
    vectors = g.vectors.data();
    compute_edge_basis();
    compute_zbl();
    for (int t = 0; t < T_; ++t) {
      compute_interaction(t, exchange);
      compute_product(t);
      compute_readout(t);
    }
    result.node_energy.assign(n_local, 0.0);
    result.energy = 0;
    for (int i = 0; i < n_local; ++i) {
      const double e0 = spec.e0[species_local(i)];
      const double inter = inter_energy[i] + pair_energy[i];
      result.node_energy[i] = spec.scale_shift ? e0 + spec.scale * inter + spec.shift : e0 + inter;
      result.energy += result.node_energy[i];
    }
    result.edge_gradient.clear();
    if (!gradients) {
      return;
    }
    const T seed = static_cast<T>(spec.scale_shift ? spec.scale : 1.0);
    Kokkos::deep_copy(gx[T_].get(n_local, spec.interactions[T_ - 1].hidden.dim()), T(0));
    Kokkos::deep_copy(g_Y.get(num_edges, sh_width), T(0));
    if (tabulated) {
      Kokkos::deep_copy(g_r.get(num_edges, 1), T(0));
    } else {
      Kokkos::deep_copy(g_B.get(num_edges, bessel.num_basis()), T(0));
    }
    for (int t = T_ - 1; t >= 0; --t) {
      reverse_readout(t, seed);
      reverse_product(t);
      reverse_interaction(t, exchange);
    }
    reverse_edge_basis(seed, result.edge_gradient);
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
  const auto& s = m_impl->spec.species;
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (s[k].z == atomic_number) {
      return static_cast<int>(k);
    }
  }
  return -1;
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
void MaceModel<ExecSpace, T>::compute(const MaceGraph<T>& graph, FeatureExchange<T>* exchange, bool gradients,
                                      MaceResult<T>& result) {
  m_impl->compute(graph, exchange, gradients, result);
}

template class MaceModel<Kokkos::DefaultHostExecutionSpace, double>;
template class MaceModel<Kokkos::DefaultHostExecutionSpace, float>;

}  // namespace fastmlip::models

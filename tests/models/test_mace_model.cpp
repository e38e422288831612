// SPDX-License-Identifier: MIT
// MaceModel on random potentials built in C++ (mace_test_potential.hpp): gradients against
// finite differences, invariances, the ghost/exchange path against folded images, float
// against double, sizes {0, 1, 13, a few hundred}, and the loader's and compute()'s errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>

#include "../common/error_text.hpp"
#include "../common/memory_limit.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "io/potential_file.hpp"
#include "mace_test_graph.hpp"
#include "mace_test_potential.hpp"
#include "math/wigner_d.hpp"
#include "models/mace/mace_model.hpp"

namespace fastmlip::test {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
template <class T>
using Model = models::MaceModel<Exec, T>;

// The model variants the tests run over: every block the loader supports appears in one.
struct Variant {
  const char* name;
  MaceTestConfig cfg;
  std::string head;
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  v.push_back({"mp_like", MaceTestConfig{}, ""});
  MaceTestConfig b;
  b.residual_first = true;
  b.scale_shift = false;
  b.num_interactions = 3;
  b.correlation = {2, 3, 1};
  b.zbl = true;
  v.push_back({"residual_mace_zbl_3layers", b, ""});
  MaceTestConfig c;
  c.heads = 2;
  c.max_ell = 3;
  c.channels = 3;
  v.push_back({"two_heads_lmax3", c, "head1"});
  MaceTestConfig d;
  d.num_interactions = 1;
  d.correlation = {2};
  d.zbl = true;
  v.push_back({"one_layer", d, ""});
  // mace-torch >= 0.3.14's options: one readout on the last of three layers, the envelope on the
  // radial MLP outputs (apply_cutoff False); and the latter with the Density blocks, whose edge
  // density then carries the envelope too.
  MaceTestConfig e;
  e.num_interactions = 3;
  e.correlation = {2, 2, 2};
  e.last_readout_only = true;
  e.apply_cutoff = false;
  v.push_back({"last_readout_no_cutoff_3layers", e, ""});
  MaceTestConfig f;
  f.density = true;
  f.apply_cutoff = false;
  f.zbl = true;
  v.push_back({"density_no_cutoff", f, ""});
  // MACE-MH-1's product and readout: one set of product weights for every species, and the
  // NonLinearBiasReadoutBlock, with two heads (mask_head after each of its gates).
  MaceTestConfig g;
  g.agnostic_product = true;
  g.readout_bias = true;
  g.heads = 2;
  g.residual_first = true;
  v.push_back({"agnostic_bias_readout_2heads", g, "head0"});
  // edge_irreps (MACE-MH-1, OMOL): linear_up to other irreps than the node features', with
  // mixed multiplicities and an l (2e) the hidden features lack, the first layer's to 3x0e.
  MaceTestConfig h;
  h.edge_irreps = "3x0e+2x1o+2x2e";
  h.edge_irreps_first = true;
  h.zbl = true;
  v.push_back({"edge_irreps", h, ""});
  // MACE-MH-1's shape: the non-linear interaction block on every layer (species embeddings in a
  // LayerNorm radial MLP, the density normalisation alpha + beta density, the gate), with its
  // edge_irreps, apply_cutoff False, agnostic product and bias readout, two heads.
  MaceTestConfig nl;
  nl.nonlinear = true;
  nl.edge_irreps = "3x0e+2x1o+2x2e";
  nl.edge_irreps_first = true;
  nl.apply_cutoff = false;
  nl.agnostic_product = true;
  nl.readout_bias = true;
  nl.heads = 2;
  nl.zbl = true;
  v.push_back({"nonlinear_mh1", nl, "head1"});
  return v;
}

template <class T>
Model<T> make_model(const Variant& v, std::uint64_t seed = 5) {
  models::MaceOptions opt;
  opt.head = v.head;
  return Model<T>(make_mace_potential(v.cfg, seed), opt);
}

// A cluster of n atoms (min distance 1.4 A, inside ZBL range for some pairs) in a box.
Structure cluster(int n, std::uint64_t seed) {
  const double side = std::cbrt(n * 12.0);
  return random_structure(n, side, 1.4, 3, seed, false);
}

template <class T>
double energy_of(Model<T>& m, const TestGraph<T>& g) {
  models::MaceResult<T> r;
  CopyExchange<T> ex(g.n_local, g.owner);
  m.compute(g.view(), &ex, false, r);
  return r.energy;
}

double rel_err(double a, double b, double floor = 1.0) { return std::abs(a - b) / std::max(floor, std::abs(b)); }

TEST(MaceModel, EdgeGradientsMatchFiniteDifferences) {
  for (const auto& v : variants()) {
    auto m = make_model<double>(v);
    const auto s = cluster(9, 3);
    auto g = folded_graph<double>(s, v.cfg.r_max);
    ASSERT_GT(g.num_edges(), 20) << v.name;
    models::MaceResult<double> r;
    m.compute(g.view(), nullptr, true, r);
    ASSERT_EQ(r.edge_gradient.size(), g.vectors.size());
    const double h = 1e-5;
    double worst = 0;
    for (std::size_t k = 0; k < g.vectors.size(); ++k) {
      auto gp = g, gm = g;
      gp.vectors[k] += h;
      gm.vectors[k] -= h;
      const double fd = (energy_of(m, gp) - energy_of(m, gm)) / (2 * h);
      worst = std::max(worst, rel_err(r.edge_gradient[k], fd));
      EXPECT_NEAR(r.edge_gradient[k], fd, 1e-6 * std::max(1.0, std::abs(fd))) << v.name << " component " << k;
    }
    std::printf("%s: %d edges, E = %.6f eV, worst FD error %.2e\n", v.name, g.num_edges(), r.energy, worst);
  }
}

// MaceOptions::radial_spacing: every layer's R(r) from a cubic Hermite table. Its energy is
// within the measured table error of the exact model's, and its gradients are the exact
// derivatives of its own energy (what makes NVE conserve energy with a table).
TEST(MaceModel, RadialSplineIsCloseToExactAndItsGradientsAreItsOwn) {
  for (const auto& v : variants()) {
    models::MaceOptions opt;
    opt.head = v.head;
    Model<double> exact(make_mace_potential(v.cfg, 5), opt);
    opt.radial_spacing = 0.005;
    Model<double> spline(make_mace_potential(v.cfg, 5), opt);
    // One R table per layer, and a Density or non-linear block's edge-term table beside it.
    ASSERT_EQ(static_cast<int>(spline.radial_tables().size()),
              spline.num_layers() * (v.cfg.density || v.cfg.nonlinear ? 2 : 1))
        << v.name;
    EXPECT_TRUE(exact.radial_tables().empty());
    for (const auto& t : spline.radial_tables()) {
      EXPECT_LE(t.spacing, 0.005) << v.name;
      EXPECT_GT(t.max_error_value, 0.0) << v.name;  // measured, not assumed
      EXPECT_LT(t.max_error_value, 1e-6 * t.max_abs_value) << v.name << " layer " << t.layer;
      EXPECT_LT(t.max_error_derivative, 1e-4 * t.max_abs_derivative) << v.name << " layer " << t.layer;
    }
    const auto s = cluster(9, 3);
    auto g = folded_graph<double>(s, v.cfg.r_max);
    models::MaceResult<double> re, rs;
    exact.compute(g.view(), nullptr, true, re);
    spline.compute(g.view(), nullptr, true, rs);
    // (The energies alone may agree to the last bit: the tables' error is ~1e-9 in R.)
    EXPECT_TRUE(rs.energy != re.energy || rs.edge_gradient != re.edge_gradient)
        << v.name << ": the table changed nothing";
    EXPECT_NEAR(rs.energy, re.energy, 1e-6 * std::max(1.0, std::abs(re.energy))) << v.name;
    double scale = 1e-300;
    for (double x : re.edge_gradient) {
      scale = std::max(scale, std::abs(x));
    }
    for (std::size_t k = 0; k < re.edge_gradient.size(); ++k) {
      EXPECT_NEAR(rs.edge_gradient[k], re.edge_gradient[k], 1e-5 * scale) << v.name << " component " << k;
    }
    const double h = 1e-5;
    for (std::size_t k = 0; k < g.vectors.size(); k += 7) {
      auto gp = g, gm = g;
      gp.vectors[k] += h;
      gm.vectors[k] -= h;
      const double fd = (energy_of(spline, gp) - energy_of(spline, gm)) / (2 * h);
      EXPECT_NEAR(rs.edge_gradient[k], fd, 1e-6 * std::max(1.0, std::abs(fd))) << v.name << " component " << k;
    }
  }
}

TEST(MaceModel, RadialSplineRefusesBadSpacingsAndTooCloseAtoms) {
  const auto v = variants()[0];
  for (double bad : {-0.01, 1e-7, std::nan("")}) {
    models::MaceOptions opt;
    opt.radial_spacing = bad;
    EXPECT_THROW(Model<double>(make_mace_potential(v.cfg, 5), opt), InputError) << bad;
  }
  models::MaceOptions opt;
  opt.radial_spacing = 0.01;
  Model<double> m(make_mace_potential(v.cfg, 5), opt);
  auto s = cluster(5, 4);
  auto g = folded_graph<double>(s, v.cfg.r_max);
  ASSERT_GT(g.num_edges(), 0);
  const double d = std::sqrt(g.vectors[0] * g.vectors[0] + g.vectors[1] * g.vectors[1] + g.vectors[2] * g.vectors[2]);
  for (int k = 0; k < 3; ++k) {
    g.vectors[k] *= 0.03 / d;  // edge 0 now 0.03 A long, below the tables' 0.05 A
  }
  models::MaceResult<double> r;
  try {
    m.compute(g.view(), nullptr, true, r);
    ADD_FAILURE() << "an edge below the radial tables was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("edge 0 "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("radial tables"), std::string::npos) << e.what();
  }
}

TEST(MaceModel, EnergyIsRotationInvariantAndGradientsRotate) {
  const auto R = rotation_from_euler(0.7, -1.1, 2.4);
  for (const auto& v : variants()) {
    auto m = make_model<double>(v);
    const auto s = cluster(11, 8);
    const auto g = folded_graph<double>(s, v.cfg.r_max);
    auto gr = g;
    for (int e = 0; e < g.num_edges(); ++e) {
      for (int a = 0; a < 3; ++a) {
        gr.vectors[3 * e + a] = 0;
        for (int b = 0; b < 3; ++b) {
          gr.vectors[3 * e + a] += R[3 * a + b] * g.vectors[3 * e + b];
        }
      }
    }
    models::MaceResult<double> r0, r1;
    m.compute(g.view(), nullptr, true, r0);
    m.compute(gr.view(), nullptr, true, r1);
    EXPECT_NEAR(r1.energy, r0.energy, 1e-11 * std::max(1.0, std::abs(r0.energy))) << v.name;
    double scale = 1e-300;
    for (double x : r0.edge_gradient) {
      scale = std::max(scale, std::abs(x));
    }
    for (int e = 0; e < g.num_edges(); ++e) {
      for (int a = 0; a < 3; ++a) {
        double rg = 0;
        for (int b = 0; b < 3; ++b) {
          rg += R[3 * a + b] * r0.edge_gradient[3 * e + b];
        }
        EXPECT_NEAR(r1.edge_gradient[3 * e + a], rg, 1e-11 * scale) << v.name << " edge " << e;
      }
    }
  }
}

template <class T>
class MaceModelTyped : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(MaceModelTyped, Dtypes);

// With the ghosts' owners named (a pair style on one rank), the model exchanges the rows itself
// where they are (image_exchange.hpp) and never calls the caller's exchange: the same copies and
// the same sums in the same order, so the same bits.
TYPED_TEST(MaceModelTyped, NamedGhostOwnersGiveTheExchangesBitsWithoutIt) {
  using T = TypeParam;
  for (const auto& v : variants()) {
    auto m = make_model<T>(v);
    const auto s = random_structure(13, 6.5, 1.5, 3, 21, true);
    const auto gg = ghost_graph<T>(s, v.cfg.r_max);
    models::MaceResult<T> through, itself;
    CopyExchange<T> ex(gg.n_local, gg.owner);
    m.compute(gg.view(), &ex, true, through);
    CopyExchange<T> owners(gg.n_local, gg.owner, true);
    m.compute(gg.view(), &owners, true, itself);
    EXPECT_EQ(owners.forward_calls + owners.reverse_calls, 0) << v.name;
    EXPECT_EQ(itself.energy, through.energy) << v.name;
    EXPECT_EQ(itself.node_energy, through.node_energy) << v.name;
    EXPECT_EQ(itself.edge_gradient, through.edge_gradient) << v.name;
  }
}

// A periodic structure evaluated as mace-torch does (images folded into the vectors, no
// ghosts) and as a LAMMPS rank does (images as ghost nodes fed by the exchange) gives the same
// energies and forces; the exchange is called T-1 times each way with the advertised width.
TYPED_TEST(MaceModelTyped, GhostsWithExchangeMatchFoldedImages) {
  using T = TypeParam;
  for (const auto& v : variants()) {
    auto m = make_model<T>(v);
    const auto s = random_structure(13, 6.5, 1.5, 3, 21, true);
    const auto gf = folded_graph<T>(s, v.cfg.r_max);
    const auto gg = ghost_graph<T>(s, v.cfg.r_max);
    ASSERT_GT(gg.n_total, gg.n_local + 10) << v.name;
    models::MaceResult<T> rf, rg;
    m.compute(gf.view(), nullptr, true, rf);
    CopyExchange<T> ex(gg.n_local, gg.owner);
    m.compute(gg.view(), &ex, true, rg);
    EXPECT_EQ(ex.forward_calls, m.num_layers() - 1) << v.name;
    EXPECT_EQ(ex.reverse_calls, m.num_layers() - 1) << v.name;
    for (int w : ex.widths) {
      EXPECT_LE(w, m.max_exchange_width()) << v.name;
    }
    if (m.num_layers() > 1) {
      EXPECT_EQ(*std::max_element(ex.widths.begin(), ex.widths.end()), m.max_exchange_width()) << v.name;
    }
    const double tol = std::is_same_v<T, double> ? 1e-12 : 1e-5;
    EXPECT_NEAR(rg.energy, rf.energy, tol * std::max(1.0, std::abs(rf.energy))) << v.name;
    for (int i = 0; i < gf.n_local; ++i) {
      EXPECT_NEAR(rg.node_energy[i], rf.node_energy[i], tol * std::max(1.0, std::abs(rf.energy))) << v.name;
    }
    const auto ff = forces(gf, rf.edge_gradient), fg = forces(gg, rg.edge_gradient);
    double scale = 1e-300;
    for (double x : ff) {
      scale = std::max(scale, std::abs(x));
    }
    for (std::size_t k = 0; k < ff.size(); ++k) {
      EXPECT_NEAR(fg[k], ff[k], (std::is_same_v<T, double> ? 1e-11 : 1e-4) * scale) << v.name << " force " << k;
    }
  }
}

// compute() into MaceDeviceResult (the results left in the model's memory, which the /kk pair
// styles tally from) gives the bits compute() into MaceResult copies out, with ghosts and an
// exchange, and no edge gradients when none are asked for.
TYPED_TEST(MaceModelTyped, ResultsLeftInPlaceAreTheCopiedResults) {
  using T = TypeParam;
  for (const auto& v : variants()) {
    auto m = make_model<T>(v);
    const auto gg = ghost_graph<T>(random_structure(13, 6.5, 1.5, 3, 23, true), v.cfg.r_max);
    models::MaceResult<T> copied;
    CopyExchange<T> ex(gg.n_local, gg.owner);
    m.compute(gg.view(), &ex, true, copied);
    models::MaceDeviceResult<T, Kokkos::HostSpace> in_place;
    m.compute(gg.view(), &ex, true, in_place);
    EXPECT_EQ(in_place.energy, copied.energy) << v.name;
    ASSERT_EQ(in_place.node_energy.extent(0), static_cast<std::size_t>(gg.n_local)) << v.name;
    for (int i = 0; i < gg.n_local; ++i) {
      EXPECT_EQ(in_place.node_energy(i), copied.node_energy[i]) << v.name << " atom " << i;
    }
    ASSERT_EQ(3 * in_place.edge_gradient.extent(0), copied.edge_gradient.size()) << v.name;
    ASSERT_GT(copied.edge_gradient.size(), 0u) << v.name;
    for (std::size_t e = 0; e < in_place.edge_gradient.extent(0); ++e) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(in_place.edge_gradient(e, c), copied.edge_gradient[3 * e + c]) << v.name << " edge " << e;
      }
    }
    m.compute(gg.view(), &ex, false, in_place);
    EXPECT_EQ(in_place.energy, copied.energy) << v.name;
    EXPECT_EQ(in_place.edge_gradient.extent(0), 0u) << v.name << ": gradients without asking";
  }
}

// MaceOptions::edge_chunk: the exact radial MLP and TP over chunks of one, a few and tens of
// edges give the unchunked model's energies and forces to round-off, for every block (the
// non-linear block's LayerNorm MLP, the envelope on the MLP outputs included), with ghosts.
TYPED_TEST(MaceModelTyped, EdgeChunksGiveTheUnchunkedModel) {
  using T = TypeParam;
  for (const auto& v : variants()) {
    auto whole = make_model<T>(v);
    const auto s = random_structure(13, 6.5, 1.5, 3, 29, true);
    const auto g = ghost_graph<T>(s, v.cfg.r_max);
    ASSERT_GT(g.num_edges(), 100) << v.name;
    models::MaceResult<T> rw;
    CopyExchange<T> exw(g.n_local, g.owner);
    whole.compute(g.view(), &exw, true, rw);
    double scale = 1e-300;
    for (double x : rw.edge_gradient) {
      scale = std::max(scale, std::abs(x));
    }
    for (const int chunk : {1, 7, 50}) {
      models::MaceOptions opt;
      opt.head = v.head;
      opt.edge_chunk = chunk;
      Model<T> m(make_mace_potential(v.cfg, 5), opt);
      for (int step = 0; step < 2; ++step) {  // the second step reuses the first's buffers
        models::MaceResult<T> rc;
        CopyExchange<T> ex(g.n_local, g.owner);
        m.compute(g.view(), &ex, true, rc);
        const std::string at =
            std::string(v.name) + ", chunks of " + std::to_string(chunk) + ", step " + std::to_string(step);
        const double tol = std::is_same_v<T, double> ? 1e-13 : 1e-5;
        EXPECT_NEAR(rc.energy, rw.energy, tol * std::max(1.0, std::abs(rw.energy))) << at;
        ASSERT_EQ(rc.edge_gradient.size(), rw.edge_gradient.size()) << at;
        for (std::size_t k = 0; k < rw.edge_gradient.size(); ++k) {
          ASSERT_NEAR(rc.edge_gradient[k], rw.edge_gradient[k], tol * scale) << at << " @" << k;
        }
      }
    }
  }
  models::MaceOptions bad;
  bad.edge_chunk = -1;
  EXPECT_THROW(Model<T>(make_mace_potential(variants()[0].cfg, 5), bad), InputError);
}

TYPED_TEST(MaceModelTyped, FloatAgreesWithDouble) {
  using T = TypeParam;
  for (const auto& v : variants()) {
    auto md = make_model<double>(v);
    auto mt = make_model<T>(v);
    const auto s = cluster(13, 4);
    const auto gd = folded_graph<double>(s, v.cfg.r_max);
    const auto gt = folded_graph<T>(s, v.cfg.r_max);
    models::MaceResult<double> rd;
    models::MaceResult<T> rt;
    md.compute(gd.view(), nullptr, true, rd);
    mt.compute(gt.view(), nullptr, true, rt);
    const double tol = std::is_same_v<T, double> ? 1e-13 : 2e-5;
    EXPECT_NEAR(rt.energy, rd.energy, tol * std::max(1.0, std::abs(rd.energy))) << v.name;
    double scale = 1e-300;
    for (double x : rd.edge_gradient) {
      scale = std::max(scale, std::abs(x));
    }
    for (std::size_t k = 0; k < rd.edge_gradient.size(); ++k) {
      EXPECT_NEAR(rt.edge_gradient[k], rd.edge_gradient[k], 50 * tol * scale) << v.name << " @" << k;
    }
  }
}

// Sizes {0, 1, 13, a few hundred}: per-atom energies sum to the energy, forces sum to zero,
// the exchange is called the same number of times whatever the graph (MPI ranks call alike).
TYPED_TEST(MaceModelTyped, SizesZeroOneThirteenAndHundreds) {
  using T = TypeParam;
  const auto v = variants()[0];
  auto m = make_model<T>(v);
  for (int n : {0, 1, 13, 300}) {
    const auto s = n == 300 ? random_structure(n, 14.0, 1.6, 3, 7, true) : cluster(n, 11);
    const auto g = ghost_graph<T>(s, v.cfg.r_max);
    CopyExchange<T> ex(g.n_local, g.owner);
    models::MaceResult<T> r;
    m.compute(g.view(), &ex, true, r);
    EXPECT_EQ(ex.forward_calls, m.num_layers() - 1) << n;
    EXPECT_EQ(ex.reverse_calls, m.num_layers() - 1) << n;
    ASSERT_EQ(static_cast<int>(r.node_energy.size()), n);
    ASSERT_EQ(r.edge_gradient.size(), 3 * static_cast<std::size_t>(g.num_edges()));
    double sum = 0;
    for (double e : r.node_energy) {
      EXPECT_TRUE(std::isfinite(e));
      sum += e;
    }
    EXPECT_NEAR(sum, r.energy, 1e-12 * std::max(1.0, std::abs(r.energy))) << n;
    if (n == 0) {
      EXPECT_EQ(r.energy, 0.0);
    }
    if (n == 1) {
      EXPECT_EQ(g.num_edges(), 0);
    }
    const auto f = forces(g, r.edge_gradient);
    double fsum[3] = {0, 0, 0}, scale = 1;
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < 3; ++k) {
        fsum[k] += f[3 * i + k];
        scale = std::max(scale, std::abs(f[3 * i + k]));
      }
    }
    for (double x : fsum) {
      EXPECT_NEAR(x, 0.0, (std::is_same_v<T, double> ? 1e-10 : 1e-3) * scale * std::max(1, n)) << n;
    }
  }
}

TEST(MaceModel, OneAtomWithoutNeighboursHasItsIsolatedEnergy) {
  // Without edges the messages vanish; MACE (no scale/shift, no ZBL) gives E0 plus the readouts
  // of the skip path alone. The same atom far from another one (beyond r_max) gets the same.
  auto v = variants()[1];
  v.cfg.zbl = false;
  auto m = make_model<double>(v);
  Structure one;
  one.positions = {0, 0, 0};
  one.species = {1};
  Structure two = one;
  two.positions.insert(two.positions.end(), {10, 0, 0});
  two.species.push_back(1);
  models::MaceResult<double> r1, r2;
  m.compute(folded_graph<double>(one, v.cfg.r_max).view(), nullptr, true, r1);
  m.compute(folded_graph<double>(two, v.cfg.r_max).view(), nullptr, true, r2);
  EXPECT_DOUBLE_EQ(r2.energy, 2 * r1.energy);
  EXPECT_DOUBLE_EQ(r2.node_energy[0], r1.energy);
}

// ---- errors ------------------------------------------------------------------------------

TEST(MaceModel, ComputeRejectsBadGraphs) {
  const auto v = variants()[0];
  auto m = make_model<double>(v);
  const auto s = cluster(8, 2);
  const auto good = folded_graph<double>(s, v.cfg.r_max);
  models::MaceResult<double> r;
  {
    auto g = good;
    g.species[3] = 7;
    EXPECT_THROW(m.compute(g.view(), nullptr, true, r), InputError);
    EXPECT_NE(error_of([&] { m.compute(g.view(), nullptr, true, r); }).find("node 3 has species index 7"),
              std::string::npos);
  }
  {
    auto g = good;
    g.vectors[3 * 5] = g.vectors[3 * 5 + 1] = g.vectors[3 * 5 + 2] = 0;
    const auto msg = error_of([&] { m.compute(g.view(), nullptr, true, r); });
    EXPECT_NE(msg.find("MaceModel::compute: edge 5 joins nodes " + std::to_string(g.receiver[5]) + " and " +
                       std::to_string(g.sender[5]) + " at distance 0"),
              std::string::npos)
        << msg;
    EXPECT_THROW(m.compute(g.view(), nullptr, true, r), InputError);
  }
  {
    auto g = good;
    g.vectors[3 * 2 + 1] = std::nan("");
    EXPECT_THROW(m.compute(g.view(), nullptr, true, r), InputError);
  }
  {
    auto g = good;
    std::swap(g.receiver[0], g.receiver.back());
    EXPECT_NE(error_of([&] { m.compute(g.view(), nullptr, true, r); }).find("sorted by receiver"), std::string::npos);
  }
  {
    auto g = good;
    g.n_local = 2;  // receivers beyond 1 are then ghosts
    CopyExchange<double> ex(2, {});
    EXPECT_NE(error_of([&] { m.compute(g.view(), &ex, true, r); }).find("not a local node"), std::string::npos);
  }
  {
    const auto g = ghost_graph<double>(random_structure(6, 5.0, 1.5, 3, 1, true), v.cfg.r_max);
    ASSERT_GT(g.n_total, g.n_local);
    EXPECT_NE(error_of([&] { m.compute(g.view(), nullptr, true, r); }).find("no FeatureExchange"), std::string::npos);
  }
  // After errors the model still works.
  m.compute(good.view(), nullptr, true, r);
  EXPECT_TRUE(std::isfinite(r.energy));
}

// A copy of `pot` with tensor `name` dropped (and replaced by `replacement` if given).
io::PotentialFile edited(const io::PotentialFile& pot, const std::string& name,
                         std::optional<io::Tensor> replacement = std::nullopt) {
  io::PotentialFile out;
  out.metadata = pot.metadata;
  for (const auto& [n, t] : pot.tensors()) {
    if (n != name) {
      out.add(t);
    }
  }
  if (replacement) {
    out.add(*replacement);
  }
  return out;
}

// One file per test and process: ctest runs the tests of this binary in parallel processes,
// and a shared name let one test read the file another had just written.
std::string bad_file_path() {
  return ::testing::TempDir() + "fastmlip_mace_bad_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + std::to_string(getpid()) +
         ".safetensors";
}

std::string load_error(const io::PotentialFile& pot, const std::string& head = "") {
  const std::string path = bad_file_path();
  io::write_potential_file(path, pot);
  const auto back = io::read_potential_file(path);
  std::remove(path.c_str());
  models::MaceOptions opt;
  opt.head = head;
  try {
    Model<double> m(back, opt);
  } catch (const InputError& e) {
    return std::string("InputError: ") + e.what();
  } catch (const UnsupportedError& e) {
    return std::string("UnsupportedError: ") + e.what();
  }
  return "<loaded>";
}

TEST(MaceModel, LoaderRefusesInconsistentFiles) {
  const auto v = variants()[0];
  const auto pot = make_mace_potential(v.cfg, 5);
  const std::string path = bad_file_path();
  EXPECT_EQ(load_error(pot), "<loaded>");

  auto msg = load_error(edited(pot, "interactions.1.linear.weight"));
  EXPECT_EQ(msg.rfind("InputError: " + path, 0), 0u) << msg;
  EXPECT_NE(msg.find("interactions.1.linear.weight"), std::string::npos) << msg;

  msg = load_error(edited(pot, "products.0.symmetric_contractions.contractions.1.weights.0",
                          io::Tensor::from<double>("products.0.symmetric_contractions.contractions.1.weights.0",
                                                   {3, 2, 5}, std::vector<double>(30, 0.1))));
  EXPECT_EQ(msg.rfind("InputError: " + path, 0), 0u) << msg;
  EXPECT_NE(msg.find("products.0.symmetric_contractions.contractions.1.weights.0"), std::string::npos) << msg;

  msg = load_error(edited(pot, "interactions.0.skip_tp.weight",
                          io::Tensor::from<double>("interactions.0.skip_tp.weight", {7}, std::vector<double>(7, 0.1))));
  EXPECT_NE(msg.find("interactions.0.skip_tp.weight"), std::string::npos) << msg;

  auto bad = pot;
  bad.metadata["hyperparameters"]["interactions"][1]["class"] = "RealAgnosticAttResidualInteractionBlock";
  msg = load_error(bad);
  EXPECT_EQ(msg.rfind("UnsupportedError: " + path, 0), 0u) << msg;
  EXPECT_NE(msg.find("RealAgnosticResidualInteractionBlock"), std::string::npos) << msg;

  // A Density block (supported) whose file lacks its density_fn: an InputError naming the tensor.
  bad = pot;
  bad.metadata["hyperparameters"]["interactions"][1]["class"] = "RealAgnosticDensityResidualInteractionBlock";
  msg = load_error(bad);
  EXPECT_EQ(msg.rfind("InputError: " + path, 0), 0u) << msg;
  EXPECT_NE(msg.find("interactions.1.density_fn.layer0.weight"), std::string::npos) << msg;

  bad = pot;
  bad.metadata["hyperparameters"]["readouts"][1]["gate"] = "tanh";
  EXPECT_NE(load_error(bad).find("supported: silu"), std::string::npos);

  bad = pot;
  bad.metadata["hyperparameters"]["products"][0]["correlation"] = 2;  // the file holds order 3
  msg = load_error(bad);
  EXPECT_EQ(msg.rfind("InputError: " + path, 0), 0u) << msg;

  bad = pot;
  bad.metadata["hyperparameters"]["interactions"][0]["avg_num_neighbors"] = -1.0;
  EXPECT_NE(load_error(bad).find("avg_num_neighbors"), std::string::npos);

  bad = pot;
  bad.metadata["hyperparameters"].erase("max_ell");
  msg = load_error(bad);
  EXPECT_EQ(msg.rfind("InputError: " + path, 0), 0u) << msg;
  EXPECT_NE(msg.find("max_ell"), std::string::npos) << msg;

  bad = pot;
  bad.metadata["hyperparameters"]["interactions"][0]["irreps_mid"] = "4x0e";
  EXPECT_NE(load_error(bad).find("irreps_mid"), std::string::npos);

  bad = pot;
  bad.metadata["hyperparameters"]["zbl"] = {{"p", 5}};  // no pair_repulsion_fn tensors
  EXPECT_NE(load_error(bad).find("pair_repulsion_fn"), std::string::npos);

  bad = pot;
  bad.metadata["hyperparameters"]["model_class"] = "AtomicDipolesMACE";
  EXPECT_NE(load_error(bad).find("supported: MACE, ScaleShiftMACE"), std::string::npos);
}

// Regression (issue 17): the loader recomputed the Bessel prefactor as sqrt(2 / r_max) and
// ignored radial_embedding.bessel_fn.prefactor, which mace-torch stores in the model's dtype
// (4e-8 relative off in float32). The stored value must be used: a file whose prefactor is
// k sqrt(2 / r_max) must evaluate exactly like one without the tensor whose first radial MLP
// layers are scaled by k (that layer is linear in the Bessel features), and not like the
// unscaled file.
TEST(MaceModel, UsesTheStoredBesselPrefactor) {
  const auto v = variants()[1];  // three layers, ZBL: every radial MLP and the pair term
  const auto pot = make_mace_potential(v.cfg, 5);
  ASSERT_FALSE(pot.contains("radial_embedding.bessel_fn.prefactor"));
  const double k = 1.37, c = std::sqrt(2.0 / v.cfg.r_max);
  const auto with_prefactor = [&](double value) {
    return edited(pot, "radial_embedding.bessel_fn.prefactor",
                  io::Tensor::from<double>("radial_embedding.bessel_fn.prefactor", {}, {value}));
  };
  auto scaled_mlp = pot;
  for (int t = 0; t < v.cfg.num_interactions; ++t) {
    const std::string name = "interactions." + std::to_string(t) + ".conv_tp_weights.layer0.weight";
    const auto& w = pot.get(name);
    auto values = w.as<double>(io::Conversion::widen);
    for (double& x : values) {
      x *= k;
    }
    scaled_mlp = edited(scaled_mlp, name, io::Tensor::from<double>(name, w.shape, values));
  }
  const auto g = folded_graph<double>(cluster(9, 3), v.cfg.r_max);
  const auto evaluate = [&](const io::PotentialFile& p) {
    Model<double> m(p);
    models::MaceResult<double> r;
    m.compute(g.view(), nullptr, true, r);
    return r;
  };
  const auto plain = evaluate(pot), same = evaluate(with_prefactor(c)), stored = evaluate(with_prefactor(k * c)),
             expected = evaluate(scaled_mlp);
  EXPECT_EQ(same.energy, plain.energy);  // the stored sqrt(2 / r_max) is the old default
  EXPECT_GT(rel_err(stored.energy, plain.energy), 1e-6) << "the stored prefactor was ignored";
  EXPECT_LT(rel_err(stored.energy, expected.energy), 1e-12);
  ASSERT_EQ(stored.edge_gradient.size(), expected.edge_gradient.size());
  for (std::size_t i = 0; i < stored.edge_gradient.size(); ++i) {
    EXPECT_NEAR(stored.edge_gradient[i], expected.edge_gradient[i], 1e-11) << i;
  }
  EXPECT_NE(load_error(with_prefactor(-c)).find("bessel_fn.prefactor"), std::string::npos);
}

TEST(MaceModel, HeadsAreChosenByName) {
  auto v = variants()[2];
  const auto pot = make_mace_potential(v.cfg, 5);
  EXPECT_NE(load_error(pot).find("has 2 heads ('head0', 'head1')"), std::string::npos) << load_error(pot);
  EXPECT_NE(load_error(pot, "omat").find("no head 'omat'"), std::string::npos);
  // The heads give different energies (own E0, scale, shift and readout columns).
  models::MaceOptions o0, o1;
  o0.head = "head0";
  o1.head = "head1";
  Model<double> m0(pot, o0), m1(pot, o1);
  const auto g = folded_graph<double>(cluster(7, 5), v.cfg.r_max);
  models::MaceResult<double> r0, r1;
  m0.compute(g.view(), nullptr, false, r0);
  m1.compute(g.view(), nullptr, false, r1);
  EXPECT_GT(std::abs(r0.energy - r1.energy), 1e-6);
  EXPECT_TRUE(r0.edge_gradient.empty());
  // A converter-recorded default head is taken when none is asked for.
  auto with_default = pot;
  with_default.metadata["hyperparameters"]["default_head"] = "head1";
  Model<double> md(with_default);
  models::MaceResult<double> rd;
  md.compute(g.view(), nullptr, false, rd);
  EXPECT_EQ(rd.energy, r1.energy);
}

// Issue 20's "scratch reused across steps": a second compute() on a graph of the same size
// allocates nothing (on a GPU each allocation is a cudaMalloc and each free a device
// synchronisation). Counted with Kokkos' allocation hook; the first step must allocate, which
// shows the hook sees the model's allocations. Exact and radial-spline models, with the ghost
// exchange, species-indexed linears and dE/dv.
std::atomic<int> g_allocations{0};

TEST(MaceModel, ASecondStepOfTheSameSizeAllocatesNothing) {
  Kokkos::Tools::Experimental::set_allocate_data_callback(
      [](Kokkos::Tools::SpaceHandle, const char*, const void*, std::uint64_t) { ++g_allocations; });
  for (const double spacing : {0.0, 0.01}) {
    for (const auto& v : variants()) {
      models::MaceOptions opt;
      opt.head = v.head;
      opt.radial_spacing = spacing;
      Model<double> m(make_mace_potential(v.cfg, 5), opt);
      const auto g = ghost_graph<double>(cluster(11, 7), v.cfg.r_max);
      CopyExchange<double> ex(g.n_local, g.owner);
      models::MaceResult<double> r;
      g_allocations = 0;
      m.compute(g.view(), &ex, true, r);
      EXPECT_GT(g_allocations.load(), 0) << v.name << ": the hook saw no allocation in the first step";
      const double e1 = r.energy;
      for (int step = 2; step <= 3; ++step) {
        g_allocations = 0;
        m.compute(g.view(), &ex, true, r);
        EXPECT_EQ(g_allocations.load(), 0) << v.name << " spacing " << spacing << ", step " << step;
        EXPECT_EQ(r.energy, e1) << v.name;
      }
    }
  }
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
}

TEST(MaceModel, ReportsItsShape) {
  const auto v = variants()[0];
  auto m = make_model<double>(v);
  EXPECT_EQ(m.cutoff(), v.cfg.r_max);
  EXPECT_EQ(m.num_layers(), 2);
  EXPECT_EQ(m.species_index(28), 1);
  EXPECT_EQ(m.species_index(1), -1);
  ASSERT_EQ(m.species().size(), 3u);
  EXPECT_EQ(m.species()[2].symbol, "O");
  // Layer 1 exchanges its sender features: 4x0e+4x1o = 16 values per node.
  EXPECT_EQ(m.max_exchange_width(), 16);
  Model<double> moved(std::move(m));
  EXPECT_EQ(moved.num_layers(), 2);
}

// Running out of memory is a ResourceError that names the atoms, edges and precision and says
// what to do, never an uncaught std::bad_alloc that ends the LAMMPS run (issue 20; on a GPU,
// Kokkos' "failed to allocate" takes the same path). A child process evaluates a 2000-atom
// MP-small graph with 256 MB of address space to spare, where the work buffers need about 2 GB.
TEST(MaceModelMemory, OutOfMemoryIsAClearError) {
  if (kSanitized) {
    GTEST_SKIP() << "the sanitizers' own address-space reservations defeat the limit";
  }
  const auto pot =
      io::read_potential_file(std::string(FASTMLIP_REFERENCE_DATA_DIR) + "/mace/mp_small.safetensors");
  Model<double> m(pot, {});
  const Structure s = random_structure(2000, 28.7, 1.2, static_cast<int>(m.species().size()), 2026, true);
  const auto g = folded_graph<double>(s, m.cutoff());
  const auto child = run_with_memory_headroom(
      [&] {
        models::MaceResult<double> r;
        m.compute(g.view(), nullptr, true, r);
      },
      std::size_t{256} << 20);
  const std::string& msg = child.message;
  ASSERT_EQ(child.code, 0) << msg;
  EXPECT_NE(msg.find("mp_small.safetensors: out of " + std::string(Exec::memory_space::name()) +
                     " memory evaluating 2000 local and 0 ghost atoms with " + std::to_string(g.num_edges()) +
                     " edges in float64 ("),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.find("Traceback"), std::string::npos) << msg;
  EXPECT_NE(
      msg.find("run on more MPI ranks (or GPUs), so that each holds fewer atoms, or evaluate in float32"),
      std::string::npos)
      << msg;
}

}  // namespace
}  // namespace fastmlip::test

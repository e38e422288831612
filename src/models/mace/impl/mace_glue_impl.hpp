// SPDX-License-Identifier: MIT
#pragma once
// The elementwise stages of MaceModel between its kernels, as one functor with a tag per stage,
// launched on the model's execution space over its views: the node embedding, the edge lengths,
// the residual and adjoint sums, the readout's gated activation and its reverse, the seeds and
// the per-node energies. Each iteration touches only its own row, so the results do not depend
// on the thread count and are the bits the host loops gave.
#include <Kokkos_Core.hpp>

#include "core/kokkos_compat.hpp"
#include "kernels/distance_transform.hpp"
#include "kernels/impl/polynomial_envelope.hpp"
#include "kernels/impl/radial_mlp_impl.hpp"

namespace fastmlip::models::impl {

/// mace-torch's ZBLBasis constants (mace::ZblSpec without its host vector), copyable to any
/// execution space; the per-species atomic numbers and covalent radii travel as views.
struct ZblConstants {
  double c[4] = {0, 0, 0, 0};
  double screening[4] = {0, 0, 0, 0};
  double bohr_radius = 0, coulomb = 0, a_exp = 0, a_prefactor = 0, p = 6;
};

template <class ExecSpace, class T>
struct MaceGlueFunctor {
  struct TagEmbedding {};     // x0(n, :) = W_emb(species(n), :)
  struct TagEdgeLength {};    // r(e) = |v(e)|, summed in double
  struct TagAdd {};           // a[k] += b[k]
  struct TagGate {};          // a(i, k) = cst silu(z(i, k)) in the head's block, else 0
  struct TagGateReverse {};   // ga(i, k) *= cst silu'(z(i, k)) in the head's block, else 0
  struct TagAddBias {};       // out(i, k) += bias(0, k)
  struct TagSeed {};          // go(i, k) = seed for k = head, else 0
  struct TagEnergy {};        // energy(i) += out(i, head)
  struct TagZblEnergy {};     // energy(i) = sum of half the ZBL energy of i's edges, in edge order
  struct TagEdgeGradient {};  // grad(e, :) = dE/dv from the harmonics', radial and ZBL adjoints
  struct TagNodeEnergy {};    // node(i) = E0 + scale (readouts + ZBL) + shift
  struct TagTransform {};     // x(e), dx/dr(e): the radial basis's transformed distance
  // Radial tables per pair of elements: edge e's table index, or the first edge whose pair has
  // no table (min over edges).
  struct TagEdgeTable {};  // edge_table(e) = pair_table(species(receiver e), species(sender e))
  // Density: d_e = B(e, :) . w, or the non-linear block's edge_value(e); D = alpha + beta dens(i)
  // (1 + dens(i) for the Density blocks). With radial tables the Density blocks' whole edge term
  // tanh(d_e^2) comes from a table as edge_term(e), and the reverse writes gedge(e) = dE/dterm.
  struct TagDensity {};         // dens(i) = sum_e tanh(d_e^2); out(i, :) /= D
  struct TagDensityReverse {};  // gu(i, :) = gout(i, :) / D; gB(e, :) += dE/dd_e w, or gedge(e) = dE/dd_e
  // The non-linear block: its MLPs' first-layer species terms, and its equivariant gate.
  struct TagPairTerm {
  };  // out(e, :) = pair_source(species(sender e), :) + pair_target(species(receiver e), :)
  struct TagEquivariantGate {};  // out(i, k) = silu(u(i, s_k)) cst, or u(i, s_k) sigmoid(u(i, g_k)) cst2
  struct TagEquivariantGateReverse {};  // gu(i, :) from gout(i, :)
  // mace-torch's apply_cutoff False: the envelope f_p(r) multiplies the radial MLP's output.
  struct TagCutoff {};            // fc(e), dfc(e) = f_p(r(e) / r_max) and its r-derivative
  struct TagScaleRows {};         // out(e, :) *= fc(e)
  struct TagScaleRowsReverse {};  // gcut(e) += out(e, :) . z(e, :); out(e, :) *= fc(e)  (out: gR, z: R)
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  Kokkos::View<const int*, ExecSpace> m_species;
  ConstMatrix m_w_embedding;
  Kokkos::View<const T* [3], Kokkos::LayoutRight, ExecSpace> m_vectors;
  Kokkos::View<T*, ExecSpace> m_r;
  Kokkos::View<T*, ExecSpace> m_a;
  Kokkos::View<const T*, ExecSpace> m_b;
  Matrix m_out;
  ConstMatrix m_z;
  ConstMatrix m_bias;
  Kokkos::View<double*, ExecSpace> m_energy;
  int m_head = 0, m_per_head = 1;
  T m_cst = T(1), m_seed = T(1);
  // ZBL and the edge gradient.
  Kokkos::View<const int*, ExecSpace> m_center_start, m_center, m_neighbor;
  Kokkos::View<const double*, ExecSpace> m_species_z, m_species_rcov;  // by model species
  ZblConstants m_zbl;
  bool m_has_zbl = false;
  double m_pair_seed = 0;
  Kokkos::View<const T*, ExecSpace> m_gr;
  Kokkos::View<const T* [3], Kokkos::LayoutRight, ExecSpace> m_gv;
  Kokkos::View<T* [3], Kokkos::LayoutRight, ExecSpace> m_grad;
  // The distance transform: per-species covalent radii and its constants.
  Kokkos::View<const double*, ExecSpace> m_transform_rcov;
  kernels::DistanceTransformConstants m_transform;
  Kokkos::View<T*, ExecSpace> m_x, m_dxdr;
  // The Density blocks' normalisation: the radial basis, density_fn's weights, the densities.
  ConstMatrix m_basis, m_gout;
  Kokkos::View<const T*, ExecSpace> m_w_density;
  Kokkos::View<T*, ExecSpace> m_density;
  Matrix m_gu, m_gbasis;
  Kokkos::View<const T*, ExecSpace> m_edge_value;  // the non-linear block's d_e (else empty)
  Kokkos::View<T*, ExecSpace> m_gedge;             // its dE/dd_e (dE/dterm with m_edge_term)
  Kokkos::View<const T*, ExecSpace> m_edge_term;   // tabulated tanh(d_e^2) (else empty)
  // Radial tables per pair of elements.
  Kokkos::View<const int**, Kokkos::LayoutRight, ExecSpace> m_pair_table;  // [species][species], -1: none
  Kokkos::View<int*, ExecSpace> m_edge_table;
  T m_alpha = T(1), m_beta = T(1);
  // The non-linear block's first-layer species terms and gate.
  ConstMatrix m_pair_source, m_pair_target;
  Kokkos::View<const int*, ExecSpace> m_gate_source, m_gate_gate;
  T m_cst2 = T(1);
  // apply_cutoff False: the envelope per edge, its derivative, and dE/d(envelope) accumulated
  // by the layers (empty views: the basis carries the envelope, nothing to do here).
  Kokkos::View<T*, ExecSpace> m_fc, m_dfc, m_gcut;
  double m_inv_rmax = 0;
  int m_p = 5;
  // Node energies.
  Kokkos::View<const double*, ExecSpace> m_e0, m_inter, m_pair;  // e0 by species
  bool m_scale_shift = false;
  double m_scale = 1, m_shift = 0;

  /// Half the ZBL energy of one directed edge between species si (receiver) and sj (each pair
  /// appears twice, once per receiver) and its derivative with respect to the length d.
  KOKKOS_INLINE_FUNCTION void zbl_edge(int si, int sj, double d, double& energy, double& denergy) const {
    const ZblConstants& Z = m_zbl;
    const double zi = m_species_z(si), zj = m_species_z(sj);
    const double a = Z.a_prefactor * Z.bohr_radius / (kmath::pow(zj, Z.a_exp) + kmath::pow(zi, Z.a_exp));
    double phi = 0, dphi = 0;
    for (int k = 0; k < 4; ++k) {
      const double ex = Z.c[k] * kmath::exp(-Z.screening[k] * d / a);
      phi += ex;
      dphi -= Z.screening[k] / a * ex;
    }
    const double K = Z.coulomb * zi * zj;
    const double v = K / d * phi, dv = K * (dphi / d - phi / (d * d));
    const double rm = m_species_rcov(si) + m_species_rcov(sj);
    if (!(d < rm)) {
      energy = denergy = 0;
      return;
    }
    const double x1 = d / rm, p = Z.p;
    const double xp = kmath::pow(x1, p - 1);
    const double env = 1 - (p + 1) * (p + 2) / 2 * xp * x1 + p * (p + 2) * xp * x1 * x1 -
                       p * (p + 1) / 2 * xp * x1 * x1 * x1;
    const double denv = p * (p + 1) * (p + 2) / 2 * xp * (-1 + 2 * x1 - x1 * x1) / rm;
    energy = 0.5 * v * env;
    denergy = 0.5 * (dv * env + v * denv);
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagEmbedding, int n) const {
    const int s = m_species(n);
    for (int c = 0; c < static_cast<int>(m_out.extent(1)); ++c) {
      m_out(n, c) = m_w_embedding(s, c);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagEdgeLength, int e) const {
    double d2 = 0;
    for (int k = 0; k < 3; ++k) {
      d2 += static_cast<double>(m_vectors(e, k)) * m_vectors(e, k);
    }
    m_r(e) = static_cast<T>(kmath::sqrt(d2));
  }
  // In double whatever T is (the lengths are T's): the basis then sees x rounded once.
  KOKKOS_INLINE_FUNCTION void operator()(TagTransform, int e) const {
    const double rsum = m_transform_rcov(m_species(m_center(e))) + m_transform_rcov(m_species(m_neighbor(e)));
    double x, dxdr;
    kernels::impl::distance_transform(m_transform, static_cast<double>(m_r(e)), rsum, x, dxdr);
    m_x(e) = static_cast<T>(x);
    m_dxdr(e) = static_cast<T>(dxdr);
  }
  // Node i's edges are center_start(i)..center_start(i+1) (receiver-sorted): each iteration
  // owns its node's row and its edges, so no atomics and a fixed summation order.
  KOKKOS_INLINE_FUNCTION T edge_density(int e) const {
    if (m_edge_value.extent(0) > 0) {
      return m_edge_value(e);
    }
    T d = 0;
    for (int n = 0; n < static_cast<int>(m_w_density.extent(0)); ++n) {
      d += m_basis(e, n) * m_w_density(n);
    }
    return d;
  }
  /// The envelope the Density term carries on its own: f_p(r) with apply_cutoff False, else 1.
  KOKKOS_INLINE_FUNCTION T density_cutoff(int e) const { return m_fc.extent(0) > 0 ? m_fc(e) : T(1); }
  KOKKOS_INLINE_FUNCTION void operator()(TagEdgeTable, int e, int& first_missing) const {
    const int t = m_pair_table(m_species(m_center(e)), m_species(m_neighbor(e)));
    m_edge_table(e) = t;
    if (t < 0 && e < first_missing) {
      first_missing = e;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagDensity, int i) const {
    T dens = 0;
    for (int e = m_center_start(i); e < m_center_start(i + 1); ++e) {
      if (m_edge_term.extent(0) > 0) {
        dens += m_edge_term(e);
        continue;
      }
      const T d = edge_density(e);
      dens += kmath::tanh(d * d) * density_cutoff(e);
    }
    m_density(i) = dens;
    const T inv = T(1) / (m_alpha + m_beta * dens);
    for (int k = 0; k < static_cast<int>(m_out.extent(1)); ++k) {
      m_out(i, k) *= inv;
    }
  }
  // out = u / D, D = alpha + beta dens: du = gout / D, d dens = -beta gout . out / D, and
  // d tanh(d^2) / dd = 2 d (1 - tanh(d^2)^2). Here m_z holds the forward's out.
  KOKKOS_INLINE_FUNCTION void operator()(TagDensityReverse, int i) const {
    const T inv = T(1) / (m_alpha + m_beta * m_density(i));
    T gdens = 0;
    for (int k = 0; k < static_cast<int>(m_gu.extent(1)); ++k) {
      gdens -= m_gout(i, k) * m_z(i, k);
      m_gu(i, k) = m_gout(i, k) * inv;
    }
    gdens *= inv * m_beta;
    for (int e = m_center_start(i); e < m_center_start(i + 1); ++e) {
      if (m_edge_term.extent(0) > 0) {
        m_gedge(e) = gdens;  // edge e is node i's alone
        continue;
      }
      const T d = edge_density(e), th = kmath::tanh(d * d);
      const T gd = gdens * T(2) * d * (T(1) - th * th) * density_cutoff(e);
      if (m_gedge.extent(0) > 0) {
        m_gedge(e) = gd;  // edge e is node i's alone
      }
      for (int n = 0; n < static_cast<int>(m_w_density.extent(0)); ++n) {
        m_gbasis(e, n) += gd * m_w_density(n);
      }
      if (m_gcut.extent(0) > 0) {
        m_gcut(e) += gdens * th;  // edge e is node i's alone: no race
      }
    }
  }
  // In double whatever T is, as the basis's own envelope is for its Gaussian / Chebyshev kinds.
  KOKKOS_INLINE_FUNCTION void operator()(TagCutoff, int e) const {
    double f, df;
    kernels::impl::polynomial_envelope(static_cast<double>(m_r(e)), m_inv_rmax, m_p, f, df);
    m_fc(e) = static_cast<T>(f);
    m_dfc(e) = static_cast<T>(df);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagScaleRows, int e) const {
    for (int k = 0; k < static_cast<int>(m_out.extent(1)); ++k) {
      m_out(e, k) *= m_fc(e);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagScaleRowsReverse, int e) const {
    T g = 0;
    for (int k = 0; k < static_cast<int>(m_out.extent(1)); ++k) {
      g += m_out(e, k) * m_z(e, k);
      m_out(e, k) *= m_fc(e);
    }
    m_gcut(e) += g;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagPairTerm, int e) const {
    const int sj = m_species(m_neighbor(e)), si = m_species(m_center(e));
    for (int k = 0; k < static_cast<int>(m_out.extent(1)); ++k) {
      m_out(e, k) = m_pair_source(sj, k) + m_pair_target(si, k);
    }
  }
  KOKKOS_INLINE_FUNCTION static T sigmoid(T z) { return T(1) / (T(1) + kmath::exp(-z)); }
  // m_z: the gate's input u; m_out: its output.
  KOKKOS_INLINE_FUNCTION void operator()(TagEquivariantGate, int i) const {
    for (int k = 0; k < static_cast<int>(m_out.extent(1)); ++k) {
      const int s = m_gate_source(k), g = m_gate_gate(k);
      m_out(i, k) =
          g < 0 ? m_cst * kernels::impl::silu(m_z(i, s)) : m_z(i, s) * (m_cst2 * sigmoid(m_z(i, g)));
    }
  }
  // m_gout: dE/d(output); m_gu: dE/du, every column written (each is one output's source or a
  // gate, summed over the outputs it gates).
  KOKKOS_INLINE_FUNCTION void operator()(TagEquivariantGateReverse, int i) const {
    for (int k = 0; k < static_cast<int>(m_gu.extent(1)); ++k) {
      m_gu(i, k) = T(0);
    }
    for (int k = 0; k < static_cast<int>(m_gout.extent(1)); ++k) {
      const int s = m_gate_source(k), g = m_gate_gate(k);
      const T go = m_gout(i, k);
      if (g < 0) {
        m_gu(i, s) += go * m_cst * kernels::impl::silu_derivative(m_z(i, s));
      } else {
        const T sg = sigmoid(m_z(i, g));
        m_gu(i, s) += go * m_cst2 * sg;
        m_gu(i, g) += go * m_z(i, s) * m_cst2 * sg * (T(1) - sg);
      }
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagAdd, int k) const { m_a(k) += m_b(k); }
  KOKKOS_INLINE_FUNCTION void operator()(TagGate, int i) const {
    for (int k = 0; k < static_cast<int>(m_out.extent(1)); ++k) {
      m_out(i, k) = (k / m_per_head == m_head) ? m_cst * kernels::impl::silu(m_z(i, k)) : T(0);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagGateReverse, int i) const {
    for (int k = 0; k < static_cast<int>(m_out.extent(1)); ++k) {
      m_out(i, k) =
          (k / m_per_head == m_head) ? m_out(i, k) * m_cst * kernels::impl::silu_derivative(m_z(i, k)) : T(0);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagAddBias, int i) const {
    for (int k = 0; k < static_cast<int>(m_out.extent(1)); ++k) {
      m_out(i, k) += m_bias(0, k);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagSeed, int i) const {
    for (int k = 0; k < static_cast<int>(m_out.extent(1)); ++k) {
      m_out(i, k) = k == m_head ? m_seed : T(0);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagEnergy, int i) const {
    m_energy(i) += static_cast<double>(m_out(i, m_head));
  }
  // Over the receiver's own edges (the graph's CSR offsets): no atomics, a fixed order.
  KOKKOS_INLINE_FUNCTION void operator()(TagZblEnergy, int i) const {
    double sum = 0;
    for (int e = m_center_start(i); e < m_center_start(i + 1); ++e) {
      double en = 0, den = 0;
      zbl_edge(m_species(i), m_species(m_neighbor(e)), static_cast<double>(m_r(e)), en, den);
      sum += en;
    }
    m_energy(i) = sum;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagNodeEnergy, int i) const {
    const double e0 = m_e0(m_species(i));
    const double inter = m_inter(i) + m_pair(i);
    m_energy(i) = m_scale_shift ? e0 + m_scale * inter + m_shift : e0 + inter;
  }
  // dE/dv = dE/dY dY/dv + (dE/dr + seed dZBL/dr) v / r, formed in double.
  KOKKOS_INLINE_FUNCTION void operator()(TagEdgeGradient, int e) const {
    double gl = static_cast<double>(m_gr(e));
    if (m_gcut.extent(0) > 0) {
      gl += static_cast<double>(m_gcut(e)) * static_cast<double>(m_dfc(e));  // apply_cutoff False
    }
    if (m_has_zbl) {
      double en = 0, den = 0;
      zbl_edge(m_species(m_center(e)), m_species(m_neighbor(e)), static_cast<double>(m_r(e)), en, den);
      gl += m_pair_seed * den;
    }
    for (int k = 0; k < 3; ++k) {
      const double dv = static_cast<double>(m_gv(e, k)) + gl * static_cast<double>(m_vectors(e, k)) / m_r(e);
      m_grad(e, k) = static_cast<T>(dv);
    }
  }
};

}  // namespace fastmlip::models::impl

// SPDX-License-Identifier: MIT
#pragma once
/// \file CHGNet's stored embeddings (chgnet_stages.hpp's Embedding block, with the bond graph's
/// basis) on any Kokkos execution space:
///
///   x^0_i  = Emb[Z_i]                       atom features, every node
///   b^0_s  = W_b B_6A(r_s)                  bond features of the short edges
///   w'_s   = W_w B_3A(r_s)                  the bond graph's edge weights
///
/// and the reverse, dE/dr_s from dE/db^0_s and dE/dw'_s. Long edges' b^0 and w, and the angles'
/// g^0, are not stored: the convolution blocks recompute them tile by tile (chgnet_model.cpp).
/// On host spaces the dense layers take their `rows` path: bit for bit the host loops
/// ChgnetModel ran before.
#include <Kokkos_Core.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/dense.hpp"
#include "kernels/dense_kokkos.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/radial_basis_kokkos.hpp"

namespace fastmlip::models::chgnet {

namespace impl {

template <class ExecSpace, class T>
struct EmbeddingFunctor {
  struct TagAtoms {};  // x0(i, j) = table(species(i), j)
  struct TagSum {};    // grad_r(s) = a(s) + b(s), in double

  Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace> table;
  Kokkos::View<const int*, ExecSpace> species;
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> x0;
  Kokkos::View<const T*, ExecSpace> a, b;
  Kokkos::View<double*, ExecSpace> grad_r;

  KOKKOS_INLINE_FUNCTION void operator()(TagAtoms, int i, int j) const { x0(i, j) = table(species(i), j); }
  KOKKOS_INLINE_FUNCTION void operator()(TagSum, int s) const {
    grad_r(s) = static_cast<double>(a(s)) + static_cast<double>(b(s));
  }
};

}  // namespace impl

template <class ExecSpace, class T>
class Embedding {
  using Functor = impl::EmbeddingFunctor<ExecSpace, T>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstReals = Kokkos::View<const T*, ExecSpace>;
  using ConstInts = Kokkos::View<const int*, ExecSpace>;
  using Doubles = Kokkos::View<double*, ExecSpace>;

  /// `table` [elements][Fa] (atom_embedding), the 6 A and 3 A Bessel bases, bond_embedding
  /// (W_b) and bond_weights_bg (W_w), both n_radial -> Fb without bias.
  Embedding(const std::vector<T>& table, int Fa, const kernels::RadialBasisParams& basis_ag,
            const kernels::RadialBasisParams& basis_bg, const kernels::Dense<T>& bond_embedding,
            const kernels::Dense<T>& bond_weights_bg, kernels::DensePath path = kernels::DensePath::automatic)
      : m_table(kernels::impl::upload_matrix<ExecSpace>(table, static_cast<int>(table.size()) / Fa, Fa,
                                                        "fastmlip::chgnet::atom_embedding")),
        m_rbf_ag(basis_ag),
        m_rbf_bg(basis_bg),
        m_bond(bond_embedding, path),
        m_weights(bond_weights_bg, path) {}

  /// x0 [nodes][Fa], b0 and w [S][Fb] from the nodes' species and the short edges' lengths.
  void compute(const ConstInts& species, const ConstReals& r_short, const Matrix& x0, const Matrix& b0,
               const Matrix& w) const {
    Functor f;
    f.table = m_table;
    f.species = species;
    f.x0 = x0;
    Kokkos::parallel_for(
        "fastmlip::chgnet::atom_embedding",
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, typename Functor::TagAtoms>(
            {0, 0}, {static_cast<std::int64_t>(x0.extent(0)), static_cast<std::int64_t>(x0.extent(1))}),
        f);
    const Matrix basis = basis_rows(r_short.extent(0));
    m_rbf_bg.compute(r_short, basis);
    m_weights.compute(basis, w);
    m_rbf_ag.compute(r_short, basis);
    m_bond.compute(basis, b0);
  }

  /// grad_r [S] = dE/dr_s, from dE/db^0 and dE/dw' [S][Fb].
  void reverse(const ConstReals& r_short, const ConstMatrix& g_b0, const ConstMatrix& g_w,
               const Doubles& grad_r) const {
    const auto S = r_short.extent(0);
    const Matrix g_basis = basis_rows(S);
    const auto from_ag = m_from_ag.vector(S), from_bg = m_from_bg.vector(S);
    m_bond.reverse(g_b0, g_basis);
    m_rbf_ag.reverse(r_short, g_basis, from_ag);
    m_weights.reverse(g_w, g_basis);
    m_rbf_bg.reverse(r_short, g_basis, from_bg);
    Functor f;
    f.a = from_ag;
    f.b = from_bg;
    f.grad_r = grad_r;
    Kokkos::parallel_for("fastmlip::chgnet::grad_r_short",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagSum>(0, S), f);
  }

 private:
  Matrix basis_rows(std::size_t rows) const { return m_basis.get(static_cast<int>(rows), m_bond.in()); }

  Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace> m_table;
  kernels::RadialBasisKokkos<ExecSpace, T> m_rbf_ag, m_rbf_bg;
  kernels::DenseKokkos<ExecSpace, T> m_bond, m_weights;
  // Per-step working storage, kept between steps (GrowBuffer).
  using Buffer = kernels::impl::GrowBuffer<T, ExecSpace>;
  mutable Buffer m_basis{"fastmlip::chgnet::basis_short"}, m_from_ag{"fastmlip::chgnet::grad_r_short_ag"},
      m_from_bg{"fastmlip::chgnet::grad_r_short_bg"};
};

}  // namespace fastmlip::models::chgnet

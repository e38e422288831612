// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of math/spherical_harmonics.hpp for edge vectors in ExecSpace's memory:
/// Y_0..Y_lmax of every edge vector (e3nn's normalize=True, normalization="component") and the
/// reverse stage, dE/dv from dE/dY. The per-vector formulas are the host batch's own, so the
/// results are the same bits on the host.
#include <Kokkos_Core.hpp>
#include <string>

#include "core/error.hpp"
#include "kernels/impl/spherical_harmonics_kokkos_impl.hpp"
#include "math/spherical_harmonics.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class SphericalHarmonicsKokkos {
  // Dual numbers too: the trainer's double backward (trainer/models/kernel_ops.hpp).
  static_assert(is_kernel_scalar_v<T>, "SphericalHarmonicsKokkos: T must be float, double or a Dual of them");
  using Functor = impl::SphericalHarmonicsFunctor<ExecSpace, T>;

 public:
  using Vectors = Kokkos::View<const T* [3], Kokkos::LayoutRight, ExecSpace>;
  using GradVectors = Kokkos::View<T* [3], Kokkos::LayoutRight, ExecSpace>;
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  /// Throws InputError for lmax outside 0..kMaxL.
  explicit SphericalHarmonicsKokkos(int lmax) : m_lmax(lmax) {
    check_sh_lmax(lmax, "SphericalHarmonicsKokkos");
  }

  int lmax() const noexcept { return m_lmax; }
  int dim() const noexcept { return sh_dim(m_lmax); }

  /// sh(e, :) = Y(vectors(e, :)).
  void compute(Vectors vectors, Matrix sh) const {
    check("compute", vectors.extent(0), sh.extent(0), sh.extent(1));
    Functor f = bind(vectors);
    f.m_sh = sh;
    launch<typename Functor::TagCompute>("fastmlip::spherical_harmonics::compute", f);
  }

  /// grad_vectors(e, k) = sum_i grad_sh(e, i) d Y_i / d v_k at vectors(e, :) (overwritten).
  void reverse(Vectors vectors, ConstMatrix grad_sh, GradVectors grad_vectors) const {
    check("reverse", vectors.extent(0), grad_sh.extent(0), grad_sh.extent(1));
    if (grad_vectors.extent(0) != vectors.extent(0)) {
      throw InputError("SphericalHarmonicsKokkos::reverse: grad_vectors has " +
                       std::to_string(grad_vectors.extent(0)) + " rows, vectors " +
                       std::to_string(vectors.extent(0)));
    }
    Functor f = bind(vectors);
    f.m_grad_sh = grad_sh;
    f.m_grad_vectors = grad_vectors;
    launch<typename Functor::TagReverse>("fastmlip::spherical_harmonics::reverse", f);
  }

 private:
  void check(const char* fn, std::size_t n, std::size_t rows, std::size_t cols) const {
    if (rows != n || cols != static_cast<std::size_t>(dim())) {
      throw InputError(std::string("SphericalHarmonicsKokkos::") + fn + ": the harmonics are " +
                       std::to_string(rows) + " x " + std::to_string(cols) + ", need " + std::to_string(n) +
                       " x " + std::to_string(dim()) + " (edges x (lmax + 1)^2)");
    }
  }
  /// The functor with what both stages read.
  Functor bind(const Vectors& vectors) const {
    Functor f;
    f.m_lmax = m_lmax;
    f.m_vectors = vectors;
    return f;
  }
  /// One thread per edge.
  template <class Tag>
  static void launch(const char* label, const Functor& f) {
    Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace, Tag>(0, f.m_vectors.extent(0)), f);
  }
  int m_lmax;
};

}  // namespace fastmlip::kernels

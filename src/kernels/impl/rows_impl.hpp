// SPDX-License-Identifier: MIT
#pragma once
/// \file The row-wise products and activations of the dense kernels (dense.hpp, layer_norm.hpp,
/// gated_mlp.hpp), one function each, for any kernel scalar S:
///
///   S = float, double   the SIMD kernels of the active instruction-set level (math/simd_kernels.hpp)
///   S = Dual<T>         products as three products of T on those kernels (below); elementwise
///                       loops in dual arithmetic
///
/// Dual numbers run the same kernels so that the trainer's double backward (trainer/models/
/// kernel_function.hpp) gets exact tangents from the kernels' own compute and reverse stages.
/// A product of duals (A + eps dA)(B + eps dB) = AB + eps (dA B + A dB) is three real products:
/// done that way it keeps the SIMD GEMM's speed, where a loop over Dual<T> would not vectorise.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "math/dual.hpp"
#include "math/simd_kernels.hpp"

namespace fastmlip::kernels::rows {

template <class S>
inline constexpr bool is_simd_v = std::is_same_v<S, float> || std::is_same_v<S, double>;

/// The logistic function with the SIMD kernels' cap on exp(-z) (where sigmoid is 0 to the
/// precision of T anyway), so that the scalar paths agree with them.
template <class S>
S sigmoid(S z) {
  using std::exp;
  using T = decltype(value_of(z));
  constexpr T kCap = std::is_same_v<T, float> ? T(80) : T(700);
  const S m = -z;
  return S(1) / (S(1) + exp(kCap < m ? S(kCap) : m));  // std::min's order: NaN stays NaN
}
template <class S>
S silu(S z) {
  return z * sigmoid(z);
}

/// y[r][j] (+)= bias[j] + sum_k x[r][k] M[k][j], r < rows, j < J; M row-major [K][J]; with
/// `accumulate` the bias is ignored (math::SimdKernels::gemm).
template <class S>
void gemm(const S* x, int rows, int ldx, int K, const S* M, int J, S* y, int ldy, bool accumulate, const S* bias) {
  if (rows <= 0 || J <= 0) {
    return;
  }
  if constexpr (is_simd_v<S>) {
    math::simd_kernels<S>().gemm(x, rows, ldx, K, M, J, y, ldy, accumulate, bias);
  } else {
    using T = decltype(value_of(S{}));
    const std::size_t nx = static_cast<std::size_t>(rows) * K, nm = static_cast<std::size_t>(K) * J,
                      ny = static_cast<std::size_t>(rows) * J;
    std::vector<T> xv(nx), xd(nx), mv(nm), md(nm), yv(ny, T(0)), yd(ny, T(0)), bv, bd;
    for (int r = 0; r < rows; ++r) {
      for (int k = 0; k < K; ++k) {
        const S& s = x[static_cast<std::size_t>(r) * ldx + k];
        xv[static_cast<std::size_t>(r) * K + k] = s.v;
        xd[static_cast<std::size_t>(r) * K + k] = s.d;
      }
    }
    for (std::size_t q = 0; q < nm; ++q) {
      mv[q] = M[q].v;
      md[q] = M[q].d;
    }
    if (accumulate) {
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < J; ++j) {
          yv[static_cast<std::size_t>(r) * J + j] = y[static_cast<std::size_t>(r) * ldy + j].v;
          yd[static_cast<std::size_t>(r) * J + j] = y[static_cast<std::size_t>(r) * ldy + j].d;
        }
      }
    } else if (bias != nullptr) {
      bv.resize(J);
      bd.resize(J);
      for (int j = 0; j < J; ++j) {
        bv[j] = bias[j].v;
        bd[j] = bias[j].d;
      }
    }
    const auto& k = math::simd_kernels<T>();
    const bool with_bias = !accumulate && bias != nullptr;
    if (K > 0) {
      k.gemm(xv.data(), rows, K, K, mv.data(), J, yv.data(), J, accumulate, with_bias ? bv.data() : nullptr);
      k.gemm(xd.data(), rows, K, K, mv.data(), J, yd.data(), J, accumulate, with_bias ? bd.data() : nullptr);
      k.gemm(xv.data(), rows, K, K, md.data(), J, yd.data(), J, true, nullptr);
    } else if (with_bias) {
      for (int r = 0; r < rows; ++r) {
        std::copy(bv.begin(), bv.end(), yv.begin() + static_cast<std::ptrdiff_t>(r) * J);
        std::copy(bd.begin(), bd.end(), yd.begin() + static_cast<std::ptrdiff_t>(r) * J);
      }
    }
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < J; ++j) {
        y[static_cast<std::size_t>(r) * ldy + j] = S(yv[static_cast<std::size_t>(r) * J + j], yd[static_cast<std::size_t>(r) * J + j]);
      }
    }
  }
}

/// G[o][i] += sum_r gy[r][o] x[r][i] (o < out, i < in): the weight gradient of a dense layer,
/// as one GEMM of gy^T (transposed here, a tile at most) and x.
template <class S>
void add_outer(const S* gy, int ldy, const S* x, int ldx, int rows, int out, int in, S* G) {
  if (rows <= 0 || out <= 0 || in <= 0) {
    return;
  }
  std::vector<S> gyt(static_cast<std::size_t>(out) * rows), xc;
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      gyt[static_cast<std::size_t>(o) * rows + r] = gy[static_cast<std::size_t>(r) * ldy + o];
    }
  }
  const S* xm = x;
  if (ldx != in) {
    xc.resize(static_cast<std::size_t>(rows) * in);
    for (int r = 0; r < rows; ++r) {
      std::copy_n(x + static_cast<std::size_t>(r) * ldx, in, xc.data() + static_cast<std::size_t>(r) * in);
    }
    xm = xc.data();
  }
  gemm(gyt.data(), out, rows, rows, xm, in, G, in, true, static_cast<const S*>(nullptr));
}

/// gb[o] += sum_r gy[r][o]: a bias gradient.
template <class S>
void add_column_sums(const S* gy, int ldy, int rows, int out, S* gb) {
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      gb[o] += gy[static_cast<std::size_t>(r) * ldy + o];
    }
  }
}

template <class S>
void silu_forward(const S* z, S* s, S* a, std::size_t n) {
  if constexpr (is_simd_v<S>) {
    math::simd_kernels<S>().silu_forward(z, s, a, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      s[i] = sigmoid(z[i]);
      a[i] = z[i] * s[i];
    }
  }
}

template <class S>
void silu_backward(const S* z, const S* s, S* g, std::size_t n) {
  if constexpr (is_simd_v<S>) {
    math::simd_kernels<S>().silu_backward(z, s, g, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      g[i] = g[i] * (s[i] * (S(1) + z[i] * (S(1) - s[i])));
    }
  }
}

template <class S>
void gate_forward(const S* c, const S* g, S* sc, S* sg, S* y, std::size_t n) {
  if constexpr (is_simd_v<S>) {
    math::simd_kernels<S>().gate_forward(c, g, sc, sg, y, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      sc[i] = sigmoid(c[i]);
      sg[i] = sigmoid(g[i]);
      y[i] = c[i] * sc[i] * sg[i];
    }
  }
}

template <class S>
void gate_backward(const S* gy, const S* c, const S* sc, const S* sg, S* gc, S* gg, std::size_t n) {
  if constexpr (is_simd_v<S>) {
    math::simd_kernels<S>().gate_backward(gy, c, sc, sg, gc, gg, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      gc[i] = gy[i] * sg[i] * sc[i] * (S(1) + c[i] * (S(1) - sc[i]));
      gg[i] = gy[i] * (c[i] * sc[i]) * sg[i] * (S(1) - sg[i]);
    }
  }
}

template <class S>
void layer_norm_forward(S* y, S* yhat, S* inv_sigma, const S* gamma, const S* beta, int rows, int dim, double eps) {
  if constexpr (is_simd_v<S>) {
    math::simd_kernels<S>().layer_norm_forward(y, yhat, inv_sigma, gamma, beta, rows, dim, static_cast<S>(eps));
  } else {
    using std::sqrt;
    for (int r = 0; r < rows; ++r) {
      S* yr = y + static_cast<std::size_t>(r) * dim;
      S* hr = yhat + static_cast<std::size_t>(r) * dim;
      S mean(0), var(0);
      for (int j = 0; j < dim; ++j) mean += yr[j];
      mean /= S(dim);
      for (int j = 0; j < dim; ++j) {
        hr[j] = yr[j] - mean;
        var += hr[j] * hr[j];
      }
      var /= S(dim);
      const S inv = S(1) / sqrt(var + S(eps));
      for (int j = 0; j < dim; ++j) {
        hr[j] *= inv;
        yr[j] = hr[j] * gamma[j] + beta[j];
      }
      inv_sigma[r] = inv;
    }
  }
}

template <class S>
void layer_norm_backward(S* g, const S* yhat, const S* inv_sigma, const S* gamma, int rows, int dim) {
  if constexpr (is_simd_v<S>) {
    math::simd_kernels<S>().layer_norm_backward(g, yhat, inv_sigma, gamma, rows, dim);
  } else {
    for (int r = 0; r < rows; ++r) {
      S* gr = g + static_cast<std::size_t>(r) * dim;
      const S* hr = yhat + static_cast<std::size_t>(r) * dim;
      S m1(0), m2(0);
      for (int j = 0; j < dim; ++j) {
        gr[j] *= gamma[j];
        m1 += gr[j];
        m2 += gr[j] * hr[j];
      }
      m1 /= S(dim);
      m2 /= S(dim);
      for (int j = 0; j < dim; ++j) gr[j] = inv_sigma[r] * (gr[j] - m1 - hr[j] * m2);
    }
  }
}

/// dst row t += src row idx[t] - base (math::SimdKernels::add_rows).
template <class S>
void add_rows(const S* src, const int* idx, int base, int rows, int width, S* dst) {
  if constexpr (is_simd_v<S>) {
    math::simd_kernels<S>().add_rows(src, idx, base, rows, width, dst);
  } else {
    for (int t = 0; t < rows; ++t) {
      for (int j = 0; j < width; ++j) {
        dst[static_cast<std::size_t>(t) * width + j] +=
            src[static_cast<std::size_t>(idx[t] - base) * width + j];
      }
    }
  }
}

/// dst row idx[t] - base += src row t, in order of t.
template <class S>
void scatter_rows(const S* src, const int* idx, int base, int rows, int width, S* dst) {
  if constexpr (is_simd_v<S>) {
    math::simd_kernels<S>().scatter_rows(src, idx, base, rows, width, dst);
  } else {
    for (int t = 0; t < rows; ++t) {
      for (int j = 0; j < width; ++j) {
        dst[static_cast<std::size_t>(idx[t] - base) * width + j] +=
            src[static_cast<std::size_t>(t) * width + j];
      }
    }
  }
}

}  // namespace fastmlip::kernels::rows

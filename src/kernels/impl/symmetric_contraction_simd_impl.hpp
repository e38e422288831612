// SPDX-License-Identifier: MIT
// The row kernels of kernels/symmetric_contraction_simd.hpp. No include guard, no includes and
// no namespace of its own, on purpose: each ISA translation unit (kernels/isa/*.cpp) includes
// this text inside an anonymous namespace and compiles it with its level's -m flags (see
// impl/channelwise_tp_simd_impl.hpp). The innermost loops run over a block of B channels with
// unit stride; B is a constant, so they vectorise at the unit's width.

/// Ells of channels c0 .. c0+B-1 into xl [ell][B] (zeros past the last channel), then every
/// monomial into mono [monomial][B], one multiplication each.
template <class T, int B>
void sc_monomials(const fastmlip::kernels::SCSimdShape& s, const T* x, int c0, T* __restrict xl,
                  T* __restrict mono) {
  for (int i = 0; i < s.num_ell; ++i) {
    for (int b = 0; b < B; ++b) {
      xl[i * B + b] = c0 + b < s.channels ? x[s.ell_offset[i] + (c0 + b) * s.ell_stride[i]] : T(0);
    }
  }
  for (int t = 0; t < s.num_mono; ++t) {
    const auto md = s.mono[t];
    const T* __restrict xi = xl + md.last * B;
    T* __restrict m = mono + t * B;
    if (md.parent < 0) {
      for (int b = 0; b < B; ++b) {
        m[b] = xi[b];
      }
    } else {
      const T* __restrict p = mono + md.parent * B;
      for (int b = 0; b < B; ++b) {
        m[b] = p[b] * xi[b];
      }
    }
  }
}

template <class T>
void sc_forward(const fastmlip::kernels::SCSimdShape& s, const T* coef, const T* x, T* out, T* scratch) {
  constexpr int B = fastmlip::kernels::kSCSimdBlock<T>;
  T* xl = scratch;
  T* mono = xl + s.num_ell * B;
  T* acc = mono + s.num_mono * B;
  for (int c0 = 0; c0 < s.channels; c0 += B) {
    sc_monomials<T, B>(s, x, c0, xl, mono);
    for (int j = 0; j < s.out_per_channel * B; ++j) {
      acc[j] = T(0);
    }
    for (int g = 0; g < s.num_entries; ++g) {
      const auto en = s.entries[g];
      const T* __restrict cf = coef + g * s.coef_ld + c0;
      const T* __restrict m = mono + en.monomial * B;
      T* __restrict a = acc + en.local * B;
      for (int b = 0; b < B; ++b) {
        a[b] += cf[b] * m[b];
      }
    }
    // Each output component of these channels once: entries of one `local` share out/stride.
    for (int g = 0; g < s.num_entries; ++g) {
      const auto en = s.entries[g];
      for (int b = 0; b < B && c0 + b < s.channels; ++b) {
        out[en.out + (c0 + b) * en.stride] = acc[en.local * B + b];
      }
    }
  }
}

template <class T>
void sc_reverse(const fastmlip::kernels::SCSimdShape& s, const T* coef, const T* x, const T* grad_out,
                T* grad_x, T* scratch) {
  constexpr int B = fastmlip::kernels::kSCSimdBlock<T> / 2;  // see symmetric_contraction_simd.hpp
  T* xl = scratch;
  T* gx = xl + s.num_ell * B;
  T* mono = gx + s.num_ell * B;
  T* gmono = mono + s.num_mono * B;
  T* go = gmono + s.num_mono * B;
  for (int c0 = 0; c0 < s.channels; c0 += B) {
    sc_monomials<T, B>(s, x, c0, xl, mono);
    for (int t = 0; t < s.num_mono * B; ++t) {
      gmono[t] = T(0);
    }
    for (int i = 0; i < s.num_ell * B; ++i) {
      gx[i] = T(0);
    }
    for (int g = 0; g < s.num_entries; ++g) {
      const auto en = s.entries[g];
      for (int b = 0; b < B; ++b) {
        go[en.local * B + b] = c0 + b < s.channels ? grad_out[en.out + (c0 + b) * en.stride] : T(0);
      }
    }
    // grad of each monomial: the coefficients times the output gradients of its entries.
    for (int g = 0; g < s.num_entries; ++g) {
      const auto en = s.entries[g];
      const T* __restrict cf = coef + g * s.coef_ld + c0;
      const T* __restrict o = go + en.local * B;
      T* __restrict gm = gmono + en.monomial * B;
      for (int b = 0; b < B; ++b) {
        gm[b] += cf[b] * o[b];
      }
    }
    // Back through the tree, children before parents.
    for (int t = s.num_mono - 1; t >= 0; --t) {
      const auto md = s.mono[t];
      const T* __restrict gm = gmono + t * B;
      T* __restrict gxl = gx + md.last * B;
      if (md.parent < 0) {
        for (int b = 0; b < B; ++b) {
          gxl[b] += gm[b];
        }
      } else {
        const T* __restrict p = mono + md.parent * B;
        const T* __restrict xi = xl + md.last * B;
        T* __restrict gp = gmono + md.parent * B;
        for (int b = 0; b < B; ++b) {
          gxl[b] += gm[b] * p[b];
          gp[b] += gm[b] * xi[b];
        }
      }
    }
    for (int i = 0; i < s.num_ell; ++i) {
      for (int b = 0; b < B && c0 + b < s.channels; ++b) {
        grad_x[s.ell_offset[i] + (c0 + b) * s.ell_stride[i]] = gx[i * B + b];
      }
    }
  }
}

template <class T>
constexpr fastmlip::kernels::SymmetricContractionSimd<T> sc_simd_table() {
  return {&sc_forward<T>, &sc_reverse<T>};
}

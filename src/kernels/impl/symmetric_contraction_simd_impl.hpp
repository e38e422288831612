// SPDX-License-Identifier: MIT
// The row kernels of kernels/symmetric_contraction_simd.hpp. No include guard, no includes and
// no namespace of its own, on purpose: each ISA translation unit (kernels/isa/*.cpp) includes
// this text inside an anonymous namespace and compiles it with its level's -m flags (see
// impl/channelwise_tp_simd_impl.hpp). Every operation on a block of B channels is written on
// GCC vectors of the unit's register width (ScBlock): left to the vectorisers, the 4-channel
// loops of the reverse were unrolled into scalar code (perf annotate, AVX-512 unit).

/// A block of B channels as kVecs registers of the unit's width, loaded and stored unaligned
/// (the scratch is a std::vector's, the rows are anywhere).
template <class T, int B>
struct ScBlock {
  static constexpr int kWidth = fastmlip::math::isa::kUnitRegisterBytes / static_cast<int>(sizeof(T));
  static constexpr int kLanes = kWidth < B ? kWidth : B;
  static constexpr int kVecs = B / kLanes;
  static_assert(kVecs * kLanes == B, "ScBlock: B a multiple of the register's lanes");
  typedef T V __attribute__((vector_size(kLanes * sizeof(T))));
  static V load(const T* p) {
    V v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(T* p, V v) { __builtin_memcpy(p, &v, sizeof v); }
  /// d = a * b over the block.
  static void mul(T* __restrict d, const T* a, const T* b) {
    for (int v = 0; v < kVecs; ++v) {
      store(d + v * kLanes, load(a + v * kLanes) * load(b + v * kLanes));
    }
  }
  /// d += a * b over the block (a product, then a sum: no contraction, the functors' bits).
  static void add_mul(T* __restrict d, const T* a, const T* b) {
    for (int v = 0; v < kVecs; ++v) {
      store(d + v * kLanes, load(d + v * kLanes) + load(a + v * kLanes) * load(b + v * kLanes));
    }
  }
  /// d += a over the block.
  static void add(T* __restrict d, const T* a) {
    for (int v = 0; v < kVecs; ++v) {
      store(d + v * kLanes, load(d + v * kLanes) + load(a + v * kLanes));
    }
  }
  /// A block held in registers while a run of terms is added into it: in memory, each term's
  /// sum would wait for the previous one's store to reach the next load.
  struct Acc {
    V r[kVecs] = {};
    void load_from(const T* p) {
      for (int v = 0; v < kVecs; ++v) {
        r[v] = load(p + v * kLanes);
      }
    }
    void store_to(T* p) const {
      for (int v = 0; v < kVecs; ++v) {
        store(p + v * kLanes, r[v]);
      }
    }
    void add_mul(const T* a, const T* b) {
      for (int v = 0; v < kVecs; ++v) {
        r[v] = r[v] + load(a + v * kLanes) * load(b + v * kLanes);
      }
    }
  };
};

/// Ells of channels c0 .. c0+B-1 into xl [ell][B] (zeros past the last channel), then every
/// monomial into mono [monomial][B], one multiplication each.
template <class T, int B>
void sc_monomials(const fastmlip::kernels::SCSimdShape& s, const T* x, int c0, T* __restrict xl,
                  T* __restrict mono) {
  using K = ScBlock<T, B>;
  for (int i = 0; i < s.num_ell; ++i) {
    for (int b = 0; b < B; ++b) {
      xl[i * B + b] = c0 + b < s.channels ? x[s.ell_offset[i] + (c0 + b) * s.ell_stride[i]] : T(0);
    }
  }
  for (int t = 0; t < s.num_mono; ++t) {
    const auto md = s.mono[t];
    const T* xi = xl + md.last * B;
    T* m = mono + t * B;
    if (md.parent < 0) {
      __builtin_memcpy(m, xi, B * sizeof(T));
    } else {
      K::mul(m, mono + md.parent * B, xi);
    }
  }
}

// Both kernels take several nodes and loop over them inside each channel block: a block's
// coefficients (every entry's B channels, some 100 kB in mp_medium's shape, whose whole
// coefficients outgrow L2) then come from L1 or L2 for all but the first node, where a loop over
// nodes outside would stream them from L3 for each node. Each (block, node) is the one-node
// computation, so the order changes no sum.

template <class T>
void sc_forward(const fastmlip::kernels::SCSimdShape& s, int nodes, const T* const* coefs, const T* const* xs,
                T* const* outs, T* scratch) {
  constexpr int B = fastmlip::kernels::kSCSimdBlock<T>;
  using K = ScBlock<T, B>;
  T* xl = scratch;
  T* mono = xl + s.num_ell * B;
  T* acc = mono + s.num_mono * B;
  for (int c0 = 0; c0 < s.channels; c0 += B) {
    for (int n = 0; n < nodes; ++n) {
      const T* coef = coefs[n];
      T* out = outs[n];
      sc_monomials<T, B>(s, xs[n], c0, xl, mono);
      for (int j = 0; j < s.out_per_channel * B; ++j) {
        acc[j] = T(0);
      }
      // Runs of entries of one output component (the entries come grouped by component) sum in
      // registers, in the same order as one at a time in memory.
      typename K::Acc a;
      int cur = -1;
      for (int g = 0; g < s.num_entries; ++g) {
        const auto en = s.entries[g];
        if (en.local != cur) {
          if (cur >= 0) {
            a.store_to(acc + cur * B);
          }
          cur = en.local;
          a.load_from(acc + cur * B);
        }
        a.add_mul(coef + g * s.coef_ld + c0, mono + en.monomial * B);
      }
      if (cur >= 0) {
        a.store_to(acc + cur * B);
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
}

template <class T>
void sc_reverse(const fastmlip::kernels::SCSimdShape& s, int nodes, const T* const* coefs, const T* const* xs,
                const T* const* grad_outs, T* const* grad_xs, T* scratch) {
  constexpr int B = fastmlip::kernels::kSCSimdBlock<T> / 2;  // see symmetric_contraction_simd.hpp
  using K = ScBlock<T, B>;
  T* xl = scratch;
  T* gx = xl + s.num_ell * B;
  T* mono = gx + s.num_ell * B;
  T* gmono = mono + s.num_mono * B;
  T* go = gmono + s.num_mono * B;
  for (int c0 = 0; c0 < s.channels; c0 += B) {
    for (int n = 0; n < nodes; ++n) {
      const T* coef = coefs[n];
      const T* grad_out = grad_outs[n];
      T* grad_x = grad_xs[n];
      sc_monomials<T, B>(s, xs[n], c0, xl, mono);
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
        K::add_mul(gmono + en.monomial * B, coef + g * s.coef_ld + c0, go + en.local * B);
      }
      // Back through the tree, children before parents: a monomial m = p x_last passes gm x_last
      // to its parent and gm p to its last ell. Siblings come in runs (the tree's order); a run's
      // terms into their parent sum in registers, in the order of one at a time in memory. A
      // parent's run ends before the walk reaches the parent, whose gradient is then complete.
      typename K::Acc gp;
      int cur = -1;
      for (int t = s.num_mono - 1; t >= 0; --t) {
        const auto md = s.mono[t];
        if (md.parent != cur) {
          if (cur >= 0) {
            gp.store_to(gmono + cur * B);
          }
          cur = md.parent;
          if (cur >= 0) {
            gp.load_from(gmono + cur * B);
          }
        }
        const T* gm = gmono + t * B;
        T* gxl = gx + md.last * B;
        if (md.parent < 0) {
          K::add(gxl, gm);
        } else {
          K::add_mul(gxl, gm, mono + md.parent * B);
          gp.add_mul(gm, xl + md.last * B);
        }
      }
      if (cur >= 0) {
        gp.store_to(gmono + cur * B);
      }
      for (int i = 0; i < s.num_ell; ++i) {
        for (int b = 0; b < B && c0 + b < s.channels; ++b) {
          grad_x[s.ell_offset[i] + (c0 + b) * s.ell_stride[i]] = gx[i * B + b];
        }
      }
    }
  }
}

template <class T>
constexpr fastmlip::kernels::SymmetricContractionSimd<T> sc_simd_table() {
  return {&sc_forward<T>, &sc_reverse<T>};
}

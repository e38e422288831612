// SPDX-License-Identifier: MIT
// Hand-written CUDA of the channelwise tensor product (kernels/channelwise_tp.hpp), fused with
// the gather of sender features and the scatter-sum into receivers.
//
// The contraction is regrouped so that the per-channel work is a small dense matvec:
//   m[r, u, k] = sum_e w[e, u] sum_i A_e[i][k] x[s, u, i],   A_e[i][k] = sum_j C_ijk Y[e, j]
// A_e (n1 x n3 values per instruction) does not depend on the channel, so a warp builds it
// once per edge from the sparse CG table (one (i, k) slot per lane) into shared memory, and
// every lane then does n1 * n3 multiply-adds from registers and broadcast shared reads. For
// l <= 3, n1 * n3 is no larger than the number of CG non-zeros, so this is never more work
// than the sparse loop per channel, and it keeps the accumulators in registers.
//
// Thread mapping: one warp per (receiver, 32-channel tile) in the forward pass, per (sender,
// tile) for grad_x (transposed CSR), per edge for grad_w and grad_Y (the warp walks the
// channel tiles itself, so grad_Y's sum over channels is a warp-shuffle reduction). Lane =
// channel: the loads of w[e, u] are 32 consecutive values; feature slices x[s, u0 .. u0+31, :]
// and grad_out[r, u0 .. u0+31, :] are contiguous and staged through shared memory with 16-byte
// vector loads, then read back per lane; outputs leave the same way. The message per edge
// never exists in memory. No atomics: every output element has one owner warp and every sum
// runs in a fixed order, so results are bit-for-bit reproducible.
//
// The instruction loop is data (descriptor order); its body is compiled with exact sizes for
// l1, l3 <= 3 (all of MACE's common shapes) and with run-time sizes bounded by 2 kMaxL + 1
// otherwise. The CG values are the descriptor's, regrouped on the host and staged per block in
// shared memory; instruction metadata travels in the kernel parameters (constant bank).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda/channelwise_tp_cuda.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/launch.cuh"

namespace fastmlip::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
// Four warps per block, as the other per-edge kernels (launch.cuh): the warps are independent
// work items, the block only shares the staged CG tables.
constexpr int kThreads = launch::kEdgeThreads;
constexpr int kWarpsPerBlock = kThreads / kWarp;
static_assert(kThreads % kWarp == 0, "blocks are whole warps");
constexpr int kMaxDim = 2 * kMaxL + 1;
// Kernel parameters are limited to 4 KiB; these bounds keep TPArgs well inside (MACE models
// have at most ~30 instructions and 4 node-feature entries).
constexpr int kMaxInstructions = 48;
constexpr int kMaxEntries1 = 16;
// Exact-size bodies for l <= kUnrolledL. The edge kernel also keeps an n1 x n3 partial sum per
// lane in registers, which for l1 = 3 (49 values in double) would cost occupancy for every
// shape, so it unrolls l1 <= 2 only and reduces slot by slot otherwise.
constexpr int kUnrolledL = 3;
constexpr int kUnrolledEdgeL1 = 2;

struct InsArgs {
  int l1, l3;
  int n1, n2, n3;
  int mul;
  int offset1, offset2, offset_out, offset_weight;
  int slot;   // first (i, k) slot of this instruction in the A table (n1 * n3 slots)
  int jslot;  // first j slot in the grad_Y table (n2 slots)
};

struct EntryArgs {  // one irreps1 entry, for grad_x
  int l1, n1, mul, offset1;
  int ins_begin, ins_end;  // its instructions: ins_order[ins_begin .. ins_end)
};

struct TPArgs {
  int num_ins, num_entries1;
  int dim1, dim2, dim_out, weight_numel;
  int tiles_out;  // channel tiles of the forward pass (largest instruction mul / 32)
  int tiles_in;   // channel tiles of grad_x (largest irreps1 mul / 32)
  // Shared-memory table layout in bytes. Section 1 (A table): CG values, slot pointers,
  // j of each value. Section 2 (grad_Y table): CG values, j-slot pointers, (i, k) slot of
  // each value. Both 16-byte aligned; section 2 follows section 1.
  int sec1_bytes, sec2_bytes;
  int off_ik_ptr, off_ik_j;
  int off_j_ptr, off_j_slot;
  InsArgs ins[kMaxInstructions];
  EntryArgs entries[kMaxEntries1];
  int ins_order[kMaxInstructions];
};
static_assert(sizeof(TPArgs) + 256 < 4096, "TPArgs must fit the 4 KiB kernel-parameter space");

// Per-warp scratch layout (offsets in elements of T, each part 16-byte aligned).
struct Scratch {
  int table_bytes;  // shared bytes before the first warp's scratch
  int per_warp;     // elements of T per warp
  int a, b, c, d, e;
};

template <class T>
struct Tables {
  const T* ik_c;
  const int* ik_ptr;
  const int* ik_j;
  const T* jc;
  const int* j_ptr;
  const int* j_slot;
};

template <int N>
struct Dim {
  static constexpr int value = N;
};

// f(Dim<2 l + 1>) for l <= LU, else f(Dim<0>) (run-time size).
template <int LU, int A = 0, class F>
__device__ __forceinline__ void dispatch_l(int l, F&& f) {
  if constexpr (A > LU) {
    f(Dim<0>{});
  } else {
    if (l == A) {
      f(Dim<2 * A + 1>{});
    } else {
      dispatch_l<LU, A + 1>(l, f);
    }
  }
}

// f(Dim<2 l1 + 1>, Dim<2 l3 + 1>) for l1 <= L1U and l3 <= L3U, else f(Dim<0>, Dim<0>).
template <int L1U, int L3U, int A = 0, int B = 0, class F>
__device__ __forceinline__ void dispatch_l1_l3(int l1, int l3, F&& f) {
  if constexpr (A > L1U) {
    f(Dim<0>{}, Dim<0>{});
  } else if constexpr (B > L3U) {
    dispatch_l1_l3<L1U, L3U, A + 1, 0>(l1, l3, f);
  } else {
    if (l1 == A && l3 == B) {
      f(Dim<2 * A + 1>{}, Dim<2 * B + 1>{});
    } else {
      dispatch_l1_l3<L1U, L3U, A, B + 1>(l1, l3, f);
    }
  }
}

template <class T>
struct Vec16;
template <>
struct Vec16<float> {
  using type = float4;
};
template <>
struct Vec16<double> {
  using type = double2;
};

// The warp copies `count` contiguous values from global to shared memory: 16-byte vectors when
// both ends are aligned (feature rows whose multiplicities are multiples of 4 floats or 2
// doubles), single values otherwise. Consecutive lanes read consecutive addresses either way.
template <class T>
__device__ __forceinline__ void warp_stage(T* __restrict__ dst, const T* __restrict__ src, int count,
                                           int lane) {
  using V = typename Vec16<T>::type;
  constexpr int kPer = static_cast<int>(sizeof(V) / sizeof(T));
  int done = 0;
  if (((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) & 15u) == 0) {
    const int nv = count / kPer;
    const V* s = reinterpret_cast<const V*>(src);
    V* d = reinterpret_cast<V*>(dst);
    for (int v = lane; v < nv; v += kWarp) {
      d[v] = __ldg(s + v);
    }
    done = nv * kPer;
  }
  for (int v = done + lane; v < count; v += kWarp) {
    dst[v] = __ldg(src + v);
  }
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  // Butterfly: every lane ends with the same total, summed in the same order on every run.
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    v += __shfl_xor_sync(kFullMask, v, o);
  }
  return v;
}

// A[i * n3 + k] = sum_j C_ijk y[j] for one instruction, one (i, k) slot per lane.
template <class T>
__device__ __forceinline__ void build_A(const Tables<T>& tb, int slot, int na, const T* __restrict__ y, T* A,
                                        int lane) {
  for (int a = lane; a < na; a += kWarp) {
    const int zb = tb.ik_ptr[slot + a], ze = tb.ik_ptr[slot + a + 1];
    T v = T(0);
    for (int z = zb; z < ze; ++z) {
      v += tb.ik_c[z] * __ldg(y + tb.ik_j[z]);
    }
    A[a] = v;
  }
}

// Copies the first `bytes` of the table blob into shared memory (the whole block).
__device__ __forceinline__ void stage_tables(uint4* smem, const uint4* __restrict__ src, int bytes) {
  for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x) {
    smem[i] = __ldg(src + i);
  }
  __syncthreads();
}

template <class T>
__device__ __forceinline__ Tables<T> tables_at(const unsigned char* base, const TPArgs& a) {
  Tables<T> t;
  t.ik_c = reinterpret_cast<const T*>(base);
  t.ik_ptr = reinterpret_cast<const int*>(base + a.off_ik_ptr);
  t.ik_j = reinterpret_cast<const int*>(base + a.off_ik_j);
  const unsigned char* s2 = base + a.sec1_bytes;
  t.jc = reinterpret_cast<const T*>(s2);
  t.j_ptr = reinterpret_cast<const int*>(s2 + a.off_j_ptr);
  t.j_slot = reinterpret_cast<const int*>(s2 + a.off_j_slot);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Forward: one instruction for one (receiver, channel tile), over the receiver's edges.
template <class T, int D1, int D3>
__device__ __forceinline__ void forward_ins(const InsArgs& I, const TPArgs& args, const Tables<T>& tb,
                                            const EdgeIndexDevice& g, const T* __restrict__ x,
                                            const T* __restrict__ Y, const T* __restrict__ w,
                                            T* __restrict__ out, int node, int u0, int lane, T* A, T* buf) {
  constexpr int B1 = D1 ? D1 : kMaxDim, B3 = D3 ? D3 : kMaxDim;  // register bounds
  const int n1 = D1 ? D1 : I.n1, n3 = D3 ? D3 : I.n3;
  const int valid = min(kWarp, I.mul - u0);
  const bool active = lane < valid;
  T acc[B3];
#pragma unroll
  for (int k = 0; k < B3; ++k) {
    acc[k] = T(0);
  }
  const int e_begin = g.receiver_ptr[node], e_end = g.receiver_ptr[node + 1];
  int s_next = e_begin < e_end ? g.sender[e_begin] : 0;
  for (int e = e_begin; e < e_end; ++e) {
    const int s = s_next;
    if (e + 1 < e_end) {
      s_next = g.sender[e + 1];  // one edge ahead: the next gather's address is ready early
    }
    const T wv = active
                     ? __ldg(w + static_cast<long long>(e) * args.weight_numel + I.offset_weight + u0 + lane)
                     : T(0);
    warp_stage(buf, x + static_cast<long long>(s) * args.dim1 + I.offset1 + u0 * n1, valid * n1, lane);
    build_A(tb, I.slot, n1 * n3, Y + static_cast<long long>(e) * args.dim2 + I.offset2, A, lane);
    __syncwarp();
    if (active) {
      T xi[B1];
#pragma unroll
      for (int i = 0; i < B1; ++i) {
        xi[i] = i < n1 ? buf[lane * n1 + i] : T(0);
      }
#pragma unroll
      for (int k = 0; k < B3; ++k) {
        if (k < n3) {
          T t = T(0);
#pragma unroll
          for (int i = 0; i < B1; ++i) {
            if (i < n1) {
              t += A[i * n3 + k] * xi[i];
            }
          }
          acc[k] += wv * t;
        }
      }
    }
    __syncwarp();  // buf and A are rewritten for the next edge
  }
  if (active) {
#pragma unroll
    for (int k = 0; k < B3; ++k) {
      if (k < n3) {
        buf[lane * n3 + k] = acc[k];
      }
    }
  }
  __syncwarp();
  T* dst = out + static_cast<long long>(node) * args.dim_out + I.offset_out + u0 * n3;
  for (int v = lane; v < valid * n3; v += kWarp) {
    dst[v] = buf[v];
  }
  __syncwarp();
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    tp_forward_kernel(const __grid_constant__ TPArgs args, const Scratch sc, const uint4* __restrict__ tables,
                      const EdgeIndexDevice g, const T* __restrict__ x, const T* __restrict__ Y,
                      const T* __restrict__ w, T* __restrict__ out) {
  extern __shared__ uint4 tp_smem[];
  stage_tables(tp_smem, tables, args.sec1_bytes);
  const auto* base = reinterpret_cast<const unsigned char*>(tp_smem);
  const Tables<T> tb = tables_at<T>(base, args);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  T* ws =
      reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(tp_smem) + sc.table_bytes) + warp * sc.per_warp;
  T* A = ws + sc.a;
  T* buf = ws + sc.b;
  const long long items = static_cast<long long>(g.num_nodes) * args.tiles_out;
  for (long long item = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp; item < items;
       item += static_cast<long long>(gridDim.x) * kWarpsPerBlock) {
    const int node = static_cast<int>(item / args.tiles_out);
    const int u0 = static_cast<int>(item % args.tiles_out) * kWarp;
    for (int q = 0; q < args.num_ins; ++q) {
      const InsArgs I = args.ins[q];
      if (I.mul <= u0) {
        continue;
      }
      dispatch_l1_l3<kUnrolledL, kUnrolledL>(I.l1, I.l3, [&](auto d1, auto d3) {
        forward_ins<T, decltype(d1)::value, decltype(d3)::value>(I, args, tb, g, x, Y, w, out, node, u0, lane,
                                                                 A, buf);
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// grad_x: one instruction's contribution to one (sender, tile), over the sender's edges.
template <class T, int D1, int D3>
__device__ __forceinline__ void grad_x_ins(const InsArgs& I, const TPArgs& args, const Tables<T>& tb,
                                           const EdgeIndexDevice& g, const T* __restrict__ Y,
                                           const T* __restrict__ w, const T* __restrict__ grad_out, int s,
                                           int u0, int lane, T* A, T* buf, T (&gx)[D1 ? D1 : kMaxDim]) {
  constexpr int B1 = D1 ? D1 : kMaxDim, B3 = D3 ? D3 : kMaxDim;
  const int n1 = D1 ? D1 : I.n1, n3 = D3 ? D3 : I.n3;
  const int valid = min(kWarp, I.mul - u0);
  const bool active = lane < valid;
  const int end = g.sender_ptr[s + 1];
  for (int idx = g.sender_ptr[s]; idx < end; ++idx) {
    const int e = g.sender_edges[idx];
    const int r = g.receiver[e];
    const T wv = active
                     ? __ldg(w + static_cast<long long>(e) * args.weight_numel + I.offset_weight + u0 + lane)
                     : T(0);
    warp_stage(buf, grad_out + static_cast<long long>(r) * args.dim_out + I.offset_out + u0 * n3, valid * n3,
               lane);
    build_A(tb, I.slot, n1 * n3, Y + static_cast<long long>(e) * args.dim2 + I.offset2, A, lane);
    __syncwarp();
    if (active) {
      T gk[B3];
#pragma unroll
      for (int k = 0; k < B3; ++k) {
        gk[k] = k < n3 ? buf[lane * n3 + k] : T(0);
      }
#pragma unroll
      for (int i = 0; i < B1; ++i) {
        if (i < n1) {
          T t = T(0);
#pragma unroll
          for (int k = 0; k < B3; ++k) {
            if (k < n3) {
              t += A[i * n3 + k] * gk[k];
            }
          }
          gx[i] += wv * t;
        }
      }
    }
    __syncwarp();
  }
}

// All instructions reading irreps1 entry P, summed in registers, stored once.
template <class T, int D1>
__device__ __forceinline__ void grad_x_entry(const EntryArgs& P, const TPArgs& args, const Tables<T>& tb,
                                             const EdgeIndexDevice& g, const T* __restrict__ Y,
                                             const T* __restrict__ w, const T* __restrict__ grad_out,
                                             T* __restrict__ grad_x, bool accumulate, int s, int u0, int lane,
                                             T* A, T* buf) {
  constexpr int B1 = D1 ? D1 : kMaxDim;
  const int n1 = D1 ? D1 : P.n1;
  const int valid = min(kWarp, P.mul - u0);
  T gx[B1];
#pragma unroll
  for (int i = 0; i < B1; ++i) {
    gx[i] = T(0);
  }
  for (int t = P.ins_begin; t < P.ins_end; ++t) {
    const InsArgs I = args.ins[args.ins_order[t]];
    dispatch_l<kUnrolledL>(I.l3, [&](auto d3) {
      grad_x_ins<T, D1, decltype(d3)::value>(I, args, tb, g, Y, w, grad_out, s, u0, lane, A, buf, gx);
    });
  }
  if (lane < valid) {
#pragma unroll
    for (int i = 0; i < B1; ++i) {
      if (i < n1) {
        buf[lane * n1 + i] = gx[i];
      }
    }
  }
  __syncwarp();
  T* dst = grad_x + static_cast<long long>(s) * args.dim1 + P.offset1 + u0 * n1;
  for (int v = lane; v < valid * n1; v += kWarp) {
    dst[v] = accumulate ? dst[v] + buf[v] : buf[v];
  }
  __syncwarp();
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    tp_grad_x_kernel(const __grid_constant__ TPArgs args, const Scratch sc, const uint4* __restrict__ tables,
                     const EdgeIndexDevice g, const T* __restrict__ Y, const T* __restrict__ w,
                     const T* __restrict__ grad_out, T* __restrict__ grad_x, bool accumulate) {
  extern __shared__ uint4 tp_smem[];
  stage_tables(tp_smem, tables, args.sec1_bytes);
  const auto* base = reinterpret_cast<const unsigned char*>(tp_smem);
  const Tables<T> tb = tables_at<T>(base, args);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  T* ws =
      reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(tp_smem) + sc.table_bytes) + warp * sc.per_warp;
  T* A = ws + sc.a;
  T* buf = ws + sc.b;
  const long long items = static_cast<long long>(g.num_nodes) * args.tiles_in;
  for (long long item = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp; item < items;
       item += static_cast<long long>(gridDim.x) * kWarpsPerBlock) {
    const int s = static_cast<int>(item / args.tiles_in);
    const int u0 = static_cast<int>(item % args.tiles_in) * kWarp;
    if (accumulate && g.sender_ptr[s] == g.sender_ptr[s + 1]) {
      continue;  // nothing to add: a chunk of edges reaches few of the senders
    }
    for (int p = 0; p < args.num_entries1; ++p) {
      const EntryArgs P = args.entries[p];
      if (P.mul <= u0) {
        continue;
      }
      dispatch_l<kUnrolledL>(P.l1, [&](auto d1) {
        grad_x_entry<T, decltype(d1)::value>(P, args, tb, g, Y, w, grad_out, grad_x, accumulate, s, u0, lane,
                                             A, buf);
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Edge gradients of one instruction: grad_w[e, u] per lane, and this instruction's share of
// grad_Y[e, :] (accumulated in gy) from B[i][k] = sum_u w_u x_ui g_uk.
template <class T, int D1, int D3>
__device__ __forceinline__ void edge_ins(const InsArgs& I, const TPArgs& args, const Tables<T>& tb,
                                         const T* __restrict__ x, const T* __restrict__ Y,
                                         const T* __restrict__ w, const T* __restrict__ grad_out,
                                         T* __restrict__ grad_w, long long e, int s, int r, int lane, T* A,
                                         T* Bs, T* xbuf, T* gbuf, T* gy) {
  constexpr bool kExact = D1 != 0 && D3 != 0;
  constexpr int B1 = D1 ? D1 : kMaxDim, B3 = D3 ? D3 : kMaxDim;
  constexpr int kB = kExact ? D1 * D3 : 1;
  const int n1 = D1 ? D1 : I.n1, n3 = D3 ? D3 : I.n3, na = n1 * n3;
  build_A(tb, I.slot, na, Y + e * args.dim2 + I.offset2, A, lane);
  if constexpr (!kExact) {
    for (int a = lane; a < na; a += kWarp) {
      Bs[a] = T(0);
    }
  }
  T B[kB];
#pragma unroll
  for (int a = 0; a < kB; ++a) {
    B[a] = T(0);
  }
  __syncwarp();
  const T* xrow = x + static_cast<long long>(s) * args.dim1 + I.offset1;
  const T* grow = grad_out + static_cast<long long>(r) * args.dim_out + I.offset_out;
  const T* wrow = w + e * args.weight_numel + I.offset_weight;
  T* gwrow = grad_w + e * args.weight_numel + I.offset_weight;
  for (int u0 = 0; u0 < I.mul; u0 += kWarp) {
    const int valid = min(kWarp, I.mul - u0);
    const bool active = lane < valid;
    const T wv = active ? __ldg(wrow + u0 + lane) : T(0);
    warp_stage(xbuf, xrow + u0 * n1, valid * n1, lane);
    warp_stage(gbuf, grow + u0 * n3, valid * n3, lane);
    __syncwarp();
    T xi[B1], gk[B3];
#pragma unroll
    for (int i = 0; i < B1; ++i) {
      xi[i] = active && i < n1 ? xbuf[lane * n1 + i] : T(0);
    }
#pragma unroll
    for (int k = 0; k < B3; ++k) {
      gk[k] = active && k < n3 ? gbuf[lane * n3 + k] : T(0);
    }
    T gw = T(0);
#pragma unroll
    for (int i = 0; i < B1; ++i) {
      if (i < n1) {
        T t = T(0);
#pragma unroll
        for (int k = 0; k < B3; ++k) {
          if (k < n3) {
            t += A[i * n3 + k] * gk[k];
          }
        }
        gw += xi[i] * t;
      }
    }
    if (active) {
      gwrow[u0 + lane] = gw;
    }
#pragma unroll
    for (int i = 0; i < B1; ++i) {
      const T wx = wv * xi[i];
#pragma unroll
      for (int k = 0; k < B3; ++k) {
        if constexpr (kExact) {
          B[i * D3 + k] += wx * gk[k];
        } else if (i < n1 && k < n3) {
          // n1 and n3 are the same on every lane: the shuffles stay converged.
          const T v = warp_sum(wx * gk[k]);
          if (lane == 0) {
            Bs[i * n3 + k] += v;
          }
        }
      }
    }
    __syncwarp();
  }
  if constexpr (kExact) {
#pragma unroll
    for (int a = 0; a < kB; ++a) {
      B[a] = warp_sum(B[a]);
    }
    if (lane == 0) {
#pragma unroll
      for (int a = 0; a < kB; ++a) {
        Bs[a] = B[a];
      }
    }
  }
  __syncwarp();
  for (int jj = lane; jj < I.n2; jj += kWarp) {
    T v = T(0);
    for (int z = tb.j_ptr[I.jslot + jj]; z < tb.j_ptr[I.jslot + jj + 1]; ++z) {
      v += tb.jc[z] * Bs[tb.j_slot[z]];
    }
    gy[I.offset2 + jj] += v;
  }
  __syncwarp();
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    tp_edge_kernel(const __grid_constant__ TPArgs args, const Scratch sc, const uint4* __restrict__ tables,
                   const EdgeIndexDevice g, const T* __restrict__ x, const T* __restrict__ Y,
                   const T* __restrict__ w, const T* __restrict__ grad_out, T* __restrict__ grad_Y,
                   T* __restrict__ grad_w) {
  extern __shared__ uint4 tp_smem[];
  stage_tables(tp_smem, tables, args.sec1_bytes + args.sec2_bytes);
  const auto* base = reinterpret_cast<const unsigned char*>(tp_smem);
  const Tables<T> tb = tables_at<T>(base, args);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  T* ws =
      reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(tp_smem) + sc.table_bytes) + warp * sc.per_warp;
  T* A = ws + sc.a;
  T* Bs = ws + sc.b;
  T* xbuf = ws + sc.c;
  T* gbuf = ws + sc.d;
  T* gy = ws + sc.e;
  const long long items = g.num_edges;
  for (long long e = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp; e < items;
       e += static_cast<long long>(gridDim.x) * kWarpsPerBlock) {
    const int s = g.sender[e], r = g.receiver[e];
    for (int j = lane; j < args.dim2; j += kWarp) {
      gy[j] = T(0);
    }
    __syncwarp();
    for (int q = 0; q < args.num_ins; ++q) {
      const InsArgs I = args.ins[q];
      dispatch_l1_l3<kUnrolledEdgeL1, kUnrolledL>(I.l1, I.l3, [&](auto d1, auto d3) {
        edge_ins<T, decltype(d1)::value, decltype(d3)::value>(I, args, tb, x, Y, w, grad_out, grad_w, e, s, r,
                                                              lane, A, Bs, xbuf, gbuf, gy);
      });
    }
    __syncwarp();
    for (int j = lane; j < args.dim2; j += kWarp) {
      grad_Y[e * args.dim2 + j] = gy[j];
    }
    __syncwarp();
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

// Device memory owned by one object; freed in the destructor (errors there are not thrown).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t bytes) {
    if (bytes > 0) {
      FASTMLIP_CUDA_CHECK(cudaMalloc(&m_ptr, bytes));
    }
  }
  ~DeviceMemory() {
    if (m_ptr != nullptr) {
      cudaFree(m_ptr);
    }
  }
  DeviceMemory(DeviceMemory&& o) noexcept : m_ptr(std::exchange(o.m_ptr, nullptr)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(m_ptr, o.m_ptr);
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const noexcept { return m_ptr; }

 private:
  void* m_ptr = nullptr;
};

int round_up(int v, int m) { return (v + m - 1) / m * m; }

// Appends the bytes of v to blob; returns the byte offset where they start.
template <class V>
int append(std::vector<unsigned char>& blob, const std::vector<V>& v) {
  const int at = static_cast<int>(blob.size());
  blob.resize(blob.size() + v.size() * sizeof(V));
  if (!v.empty()) {
    std::memcpy(blob.data() + at, v.data(), v.size() * sizeof(V));
  }
  return at;
}

void pad16(std::vector<unsigned char>& blob) {
  blob.resize(static_cast<std::size_t>(round_up(static_cast<int>(blob.size()), 16)), 0);
}

struct DeviceLimits {
  int sms = 0;
  int smem_optin = 0;
};

DeviceLimits device_limits() {
  int dev = 0;
  DeviceLimits d;
  FASTMLIP_CUDA_CHECK(cudaGetDevice(&dev));
  FASTMLIP_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
  FASTMLIP_CUDA_CHECK(cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return d;
}

// Raises the kernel's dynamic shared-memory limit when needed and returns the persistent grid
// size: as many blocks as can be resident at once on every multiprocessor.
template <class Kernel>
int prepare_kernel(Kernel kernel, int smem, const DeviceLimits& dev, const char* name) {
  if (smem > dev.smem_optin) {
    throw InputError(std::string("ChannelwiseTPCuda: kernel ") + name + " needs " + std::to_string(smem) +
                     " bytes of shared memory for this descriptor; the device allows " +
                     std::to_string(dev.smem_optin));
  }
  if (smem > 48 * 1024) {
    FASTMLIP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  int blocks = 0;
  FASTMLIP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, smem));
  return std::max(1, blocks) * dev.sms;
}

unsigned grid_for(long long items, int cap) {
  const long long blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(std::max<long long>(1, std::min<long long>(blocks, cap)));
}

void require(bool ok, const char* fn, const char* name) {
  if (!ok) {
    throw InputError(std::string("ChannelwiseTPCuda::") + fn + ": " + name +
                     " is null but the graph is not empty");
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// EdgeIndexCuda

EdgeIndexCuda EdgeIndexCuda::build(int num_nodes, const std::vector<int>& sender,
                                   const std::vector<int>& receiver) {
  if (num_nodes < 0) {
    throw InputError("EdgeIndexCuda::build: num_nodes is " + std::to_string(num_nodes));
  }
  if (sender.size() != receiver.size()) {
    throw InputError("EdgeIndexCuda::build: " + std::to_string(sender.size()) + " senders but " +
                     std::to_string(receiver.size()) + " receivers");
  }
  const int E = static_cast<int>(sender.size());
  // Counting sort into both CSR layouts, as EdgeIndex::build does (that one needs Kokkos).
  std::vector<int> rptr(num_nodes + 1, 0), sptr(num_nodes + 1, 0), sedges(E);
  for (int e = 0; e < E; ++e) {
    if (sender[e] < 0 || sender[e] >= num_nodes || receiver[e] < 0 || receiver[e] >= num_nodes) {
      throw InputError("EdgeIndexCuda::build: edge " + std::to_string(e) + " (" + std::to_string(sender[e]) +
                       " -> " + std::to_string(receiver[e]) + ") names a node outside 0.." +
                       std::to_string(num_nodes - 1));
    }
    if (e > 0 && receiver[e] < receiver[e - 1]) {
      throw InputError("EdgeIndexCuda::build: edges must be sorted by receiver; edge " + std::to_string(e) +
                       " has receiver " + std::to_string(receiver[e]) + " after " +
                       std::to_string(receiver[e - 1]));
    }
    ++rptr[receiver[e] + 1];
    ++sptr[sender[e] + 1];
  }
  for (int n = 0; n < num_nodes; ++n) {
    rptr[n + 1] += rptr[n];
    sptr[n + 1] += sptr[n];
  }
  std::vector<int> fill(sptr.begin(), sptr.end() - 1);
  for (int e = 0; e < E; ++e) {
    sedges[fill[sender[e]]++] = e;
  }
  // One allocation: receiver_ptr, sender_ptr (num_nodes + 1 each), sender, receiver,
  // sender_edges (E each).
  std::vector<int> host;
  host.reserve(2 * (num_nodes + 1) + 3 * E);
  host.insert(host.end(), rptr.begin(), rptr.end());
  host.insert(host.end(), sptr.begin(), sptr.end());
  host.insert(host.end(), sender.begin(), sender.end());
  host.insert(host.end(), receiver.begin(), receiver.end());
  host.insert(host.end(), sedges.begin(), sedges.end());
  EdgeIndexCuda out;
  FASTMLIP_CUDA_CHECK(cudaMalloc(&out.m_storage, host.size() * sizeof(int)));
  FASTMLIP_CUDA_CHECK(
      cudaMemcpy(out.m_storage, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice));
  int* p = out.m_storage;
  out.m_view.num_nodes = num_nodes;
  out.m_view.num_edges = E;
  out.m_view.receiver_ptr = p;
  out.m_view.sender_ptr = p + (num_nodes + 1);
  out.m_view.sender = p + 2 * (num_nodes + 1);
  out.m_view.receiver = p + 2 * (num_nodes + 1) + E;
  out.m_view.sender_edges = p + 2 * (num_nodes + 1) + 2 * E;
  return out;
}

EdgeIndexCuda::~EdgeIndexCuda() {
  if (m_storage != nullptr) {
    cudaFree(m_storage);
  }
}

EdgeIndexCuda::EdgeIndexCuda(EdgeIndexCuda&& o) noexcept
    : m_storage(std::exchange(o.m_storage, nullptr)), m_view(std::exchange(o.m_view, EdgeIndexDevice{})) {}

EdgeIndexCuda& EdgeIndexCuda::operator=(EdgeIndexCuda&& o) noexcept {
  std::swap(m_storage, o.m_storage);
  std::swap(m_view, o.m_view);
  return *this;
}

// ---------------------------------------------------------------------------------------------
// ChannelwiseTPCuda

template <class T>
struct ChannelwiseTPCuda<T>::State {
  kernels::ChannelwiseTP tp;
  TPArgs args{};
  DeviceMemory tables;
  Scratch fwd{}, gx{}, edge{};
  int cap_fwd = 1, cap_gx = 1, cap_edge = 1;
};

template <class T>
ChannelwiseTPCuda<T>::ChannelwiseTPCuda(const kernels::ChannelwiseTP& tp)
    : m_state(std::make_unique<State>()) {
  State& st = *m_state;
  st.tp = tp;
  TPArgs& a = st.args;
  const int num_ins = static_cast<int>(tp.instructions.size());
  const int num_entries1 = static_cast<int>(tp.irreps1.size());
  if (num_ins > kMaxInstructions || num_entries1 > kMaxEntries1) {
    throw InputError("ChannelwiseTPCuda: " + tp.irreps1.str() + " x " + tp.irreps2.str() + " has " +
                     std::to_string(num_ins) + " instructions and " + std::to_string(num_entries1) +
                     " node-feature entries; the CUDA kernels hold up to " +
                     std::to_string(kMaxInstructions) + " and " + std::to_string(kMaxEntries1));
  }
  a.num_ins = num_ins;
  a.num_entries1 = num_entries1;
  a.dim1 = tp.dim1();
  a.dim2 = tp.dim2();
  a.dim_out = tp.dim_out();
  a.weight_numel = tp.weight_numel;

  // Regroup each instruction's CG non-zeros by (i, k) for A, and by j for grad_Y.
  std::vector<T> ik_c, jc;
  std::vector<int> ik_ptr{0}, ik_j, j_ptr{0}, j_slot;
  std::vector<bool> out_seen(tp.irreps_out.size(), false);
  int max_mul = 0, max_n1 = 1, max_n3 = 1, max_a = 1;
  for (int q = 0; q < num_ins; ++q) {
    const kernels::TPInstruction& I = tp.instructions[q];
    if (out_seen[I.out]) {
      throw InputError("ChannelwiseTPCuda: output entry " + std::to_string(I.out) + " of " +
                       tp.irreps_out.str() +
                       " has several instructions; the kernels give each output one owner");
    }
    out_seen[I.out] = true;
    if (I.mul != tp.irreps1[I.i1].mul) {
      throw InputError("ChannelwiseTPCuda: instruction " + std::to_string(q) + " has multiplicity " +
                       std::to_string(I.mul) + " but its input entry " + tp.irreps1[I.i1].str() + " has " +
                       std::to_string(tp.irreps1[I.i1].mul));
    }
    const int n1 = 2 * I.l1 + 1, n2 = 2 * I.l2 + 1, n3 = 2 * I.l3 + 1;
    InsArgs& d = a.ins[q];
    d = InsArgs{I.l1,
                I.l3,
                n1,
                n2,
                n3,
                I.mul,
                I.offset1,
                I.offset2,
                I.offset_out,
                I.offset_weight,
                static_cast<int>(ik_ptr.size()) - 1,
                static_cast<int>(j_ptr.size()) - 1};
    for (int i = 0; i < n1; ++i) {
      for (int k = 0; k < n3; ++k) {
        for (int z = I.cg_begin; z < I.cg_end; ++z) {
          if (tp.cg[z].i1 == i && tp.cg[z].i3 == k) {
            ik_c.push_back(static_cast<T>(tp.cg[z].value));
            ik_j.push_back(tp.cg[z].i2);
          }
        }
        ik_ptr.push_back(static_cast<int>(ik_c.size()));
      }
    }
    for (int j = 0; j < n2; ++j) {
      for (int z = I.cg_begin; z < I.cg_end; ++z) {
        if (tp.cg[z].i2 == j) {
          jc.push_back(static_cast<T>(tp.cg[z].value));
          j_slot.push_back(tp.cg[z].i1 * n3 + tp.cg[z].i3);
        }
      }
      j_ptr.push_back(static_cast<int>(jc.size()));
    }
    max_mul = std::max(max_mul, I.mul);
    max_n1 = std::max(max_n1, n1);
    max_n3 = std::max(max_n3, n3);
    max_a = std::max(max_a, n1 * n3);
  }
  // irreps1 entries and the instructions that read each, in instruction order.
  const auto off1 = tp.irreps1.offsets();
  int max_mul1 = 0, t = 0;
  for (int p = 0; p < num_entries1; ++p) {
    EntryArgs& E = a.entries[p];
    E.l1 = tp.irreps1[p].ir.l;
    E.n1 = tp.irreps1[p].ir.dim();
    E.mul = tp.irreps1[p].mul;
    E.offset1 = off1[p];
    E.ins_begin = t;
    for (int q = 0; q < num_ins; ++q) {
      if (tp.instructions[q].i1 == p) {
        a.ins_order[t++] = q;
      }
    }
    E.ins_end = t;
    max_mul1 = std::max(max_mul1, E.mul);
    max_n1 = std::max(max_n1, E.n1);
  }
  a.tiles_out = (max_mul + kWarp - 1) / kWarp;
  a.tiles_in = (max_mul1 + kWarp - 1) / kWarp;

  // The table blob: section 1 then section 2, T arrays first so every part stays aligned.
  std::vector<unsigned char> blob;
  append(blob, ik_c);
  a.off_ik_ptr = append(blob, ik_ptr);
  a.off_ik_j = append(blob, ik_j);
  pad16(blob);
  a.sec1_bytes = static_cast<int>(blob.size());
  std::vector<unsigned char> sec2;
  append(sec2, jc);
  a.off_j_ptr = append(sec2, j_ptr);
  a.off_j_slot = append(sec2, j_slot);
  pad16(sec2);
  a.sec2_bytes = static_cast<int>(sec2.size());
  blob.insert(blob.end(), sec2.begin(), sec2.end());

  // Per-warp scratch, each part rounded to 16 bytes.
  const int v = 16 / static_cast<int>(sizeof(T));
  const int a_len = round_up(max_a, v), stage_len = round_up(kWarp * std::max(max_n1, max_n3), v);
  st.fwd = Scratch{a.sec1_bytes, a_len + stage_len, 0, a_len, 0, 0, 0};
  st.gx = st.fwd;
  const int x_len = round_up(kWarp * max_n1, v), g_len = round_up(kWarp * max_n3, v),
            y_len = round_up(a.dim2, v);
  st.edge = Scratch{a.sec1_bytes + a.sec2_bytes, 2 * a_len + x_len + g_len + y_len, 0, a_len, 2 * a_len,
                    2 * a_len + x_len,           2 * a_len + x_len + g_len};

  // Everything above is host-side validation and layout; from here on the device is needed.
  st.tables = DeviceMemory(blob.size());
  if (!blob.empty()) {
    FASTMLIP_CUDA_CHECK(cudaMemcpy(st.tables.get(), blob.data(), blob.size(), cudaMemcpyHostToDevice));
  }
  const DeviceLimits dev = device_limits();
  auto smem = [](const Scratch& s) {
    return s.table_bytes + kWarpsPerBlock * s.per_warp * static_cast<int>(sizeof(T));
  };
  st.cap_fwd = prepare_kernel(tp_forward_kernel<T>, smem(st.fwd), dev, "forward");
  st.cap_gx = prepare_kernel(tp_grad_x_kernel<T>, smem(st.gx), dev, "grad_x");
  st.cap_edge = prepare_kernel(tp_edge_kernel<T>, smem(st.edge), dev, "edge gradients");
}

template <class T>
ChannelwiseTPCuda<T>::~ChannelwiseTPCuda() = default;
template <class T>
ChannelwiseTPCuda<T>::ChannelwiseTPCuda(ChannelwiseTPCuda&&) noexcept = default;
template <class T>
ChannelwiseTPCuda<T>& ChannelwiseTPCuda<T>::operator=(ChannelwiseTPCuda&&) noexcept = default;

template <class T>
const kernels::ChannelwiseTP& ChannelwiseTPCuda<T>::descriptor() const noexcept {
  return m_state->tp;
}

template <class T>
void ChannelwiseTPCuda<T>::compute(const EdgeIndexDevice& g, const T* x, const T* Y, const T* w, T* out,
                                   void* stream) const {
  const State& st = *m_state;
  if (g.num_nodes < 0 || g.num_edges < 0) {
    throw InputError("ChannelwiseTPCuda::compute: graph with " + std::to_string(g.num_nodes) + " nodes and " +
                     std::to_string(g.num_edges) + " edges");
  }
  const long long items = static_cast<long long>(g.num_nodes) * st.args.tiles_out;
  if (items == 0) {
    return;
  }
  require(g.receiver_ptr != nullptr && (g.num_edges == 0 || g.sender != nullptr), "compute",
          "the edge index");
  require(out != nullptr && (g.num_edges == 0 || (x != nullptr && Y != nullptr && w != nullptr)), "compute",
          "an input or output pointer");
  const Scratch& sc = st.fwd;
  const std::size_t smem = sc.table_bytes + kWarpsPerBlock * sc.per_warp * sizeof(T);
  tp_forward_kernel<T><<<grid_for(items, st.cap_fwd), kThreads, smem, static_cast<cudaStream_t>(stream)>>>(
      st.args, sc, static_cast<const uint4*>(st.tables.get()), g, x, Y, w, out);
  FASTMLIP_CUDA_CHECK_LAUNCH();
}

template <class T>
void ChannelwiseTPCuda<T>::reverse(const EdgeIndexDevice& g, const T* x, const T* Y, const T* w,
                                   const T* grad_out, T* grad_x, T* grad_Y, T* grad_w, void* stream) const {
  run_reverse(g, x, Y, w, grad_out, grad_x, grad_Y, grad_w, false, stream);
}

template <class T>
void ChannelwiseTPCuda<T>::reverse_accumulate(const EdgeIndexDevice& g, const T* x, const T* Y, const T* w,
                                              const T* grad_out, T* grad_x, T* grad_Y, T* grad_w,
                                              void* stream) const {
  run_reverse(g, x, Y, w, grad_out, grad_x, grad_Y, grad_w, true, stream);
}

template <class T>
void ChannelwiseTPCuda<T>::run_reverse(const EdgeIndexDevice& g, const T* x, const T* Y, const T* w,
                                       const T* grad_out, T* grad_x, T* grad_Y, T* grad_w, bool accumulate,
                                       void* stream) const {
  const State& st = *m_state;
  if (g.num_nodes < 0 || g.num_edges < 0) {
    throw InputError("ChannelwiseTPCuda::reverse: graph with " + std::to_string(g.num_nodes) + " nodes and " +
                     std::to_string(g.num_edges) + " edges");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  const long long node_items = static_cast<long long>(g.num_nodes) * st.args.tiles_in;
  if (node_items > 0) {
    require(
        g.sender_ptr != nullptr && (g.num_edges == 0 || (g.sender_edges != nullptr && g.receiver != nullptr)),
        "reverse", "the edge index");
    require(grad_x != nullptr && (g.num_edges == 0 || (Y != nullptr && w != nullptr && grad_out != nullptr)),
            "reverse", "an input or output pointer");
    const Scratch& sc = st.gx;
    const std::size_t smem = sc.table_bytes + kWarpsPerBlock * sc.per_warp * sizeof(T);
    tp_grad_x_kernel<T><<<grid_for(node_items, st.cap_gx), kThreads, smem, s>>>(
        st.args, sc, static_cast<const uint4*>(st.tables.get()), g, Y, w, grad_out, grad_x, accumulate);
    FASTMLIP_CUDA_CHECK_LAUNCH();
  }
  if (g.num_edges > 0) {
    require(g.sender != nullptr && g.receiver != nullptr, "reverse", "the edge index");
    require(x != nullptr && Y != nullptr && w != nullptr && grad_out != nullptr && grad_Y != nullptr &&
                grad_w != nullptr,
            "reverse", "an input or output pointer");
    const Scratch& sc = st.edge;
    const std::size_t smem = sc.table_bytes + kWarpsPerBlock * sc.per_warp * sizeof(T);
    tp_edge_kernel<T><<<grid_for(g.num_edges, st.cap_edge), kThreads, smem, s>>>(
        st.args, sc, static_cast<const uint4*>(st.tables.get()), g, x, Y, w, grad_out, grad_Y, grad_w);
    FASTMLIP_CUDA_CHECK_LAUNCH();
  }
}

template class ChannelwiseTPCuda<float>;
template class ChannelwiseTPCuda<double>;

}  // namespace fastmlip::cuda
